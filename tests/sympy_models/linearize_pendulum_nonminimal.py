"""SymPy ``test_linearize.py::test_linearize_pendulum_kane_nonminimal``: a
pendulum in Cartesian coordinates q1, q2 (N.x, N.y) with speeds u1, u2; the
configuration constraint is its length, the velocity constraint that the
speed along the rod (A.x, A at angle atan(q2/q1)) is zero, and the user gives
the acceleration constraint. Gravity 9.8 along N.x. Unchanged; default
values for L and m added.

Once the derivation declares the symbols real, the velocity constraint's
sqrt((q1**2 + q2**2)/q1**2) becomes sqrt(q1**2 + q2**2)/Abs(q1), whose
derivatives hold sign(q1) and then d sign(q1)/d q1 (issue 9, item 3).
"""

from sympy import Matrix, atan, solve, symbols
from sympy.physics.mechanics import KanesMethod, Particle, Point, ReferenceFrame, dynamicsymbols

from codegen import Model

PARAMETERS = {"L": 1.3, "m": 0.7}
G = 9.8


def make_kane():
    q1, q2 = dynamicsymbols('q1:3')
    q1d, q2d = dynamicsymbols('q1:3', level=1)
    u1, u2 = dynamicsymbols('u1:3')
    u1d, u2d = dynamicsymbols('u1:3', level=1)
    L, m, t = symbols('L, m, t')
    g = G
    N = ReferenceFrame('N')
    pN = Point('N*')
    pN.set_vel(N, 0)
    theta1 = atan(q2/q1)
    A = N.orientnew('A', 'axis', [theta1, N.z])
    P = pN.locatenew('P1', q1*N.x + q2*N.y)
    pP = Particle('pP', P, m)
    kde = Matrix([q1d - u1,
                  q2d - u2])
    dq_dict = solve(kde, [q1d, q2d])
    P.set_vel(N, P.pos_from(pN).dt(N).subs(dq_dict))
    f_c = Matrix([P.pos_from(pN).magnitude() - L])
    f_v = Matrix([P.vel(N).express(A).dot(A.x)])
    f_v.simplify()
    f_a = f_v.diff(t)
    f_a.simplify()
    R = m*g*N.x
    KM = KanesMethod(N, q_ind=[q2], u_ind=[u2], q_dependent=[q1],
            u_dependent=[u1], configuration_constraints=f_c,
            velocity_constraints=f_v, acceleration_constraints=f_a, kd_eqs=kde)
    KM.kanes_equations([pP], [(P, R)])
    return KM, {L: PARAMETERS["L"], m: PARAMETERS["m"]}, []


def make_model():
    return Model(*make_kane(), name="linearize_pendulum_nonminimal",
                 description="SymPy test_linearize pendulum, Kane, non-minimal")


# (q, u, r) in the KanesMethod's order q = (q2, q1), u = (u2, u1): SymPy's
# point (hanging along N.x, at rest), then a swinging one
SYMPY_POINT = ([0.0, PARAMETERS["L"]], [0.0, 0.0], [])
POINTS = [SYMPY_POINT, ([0.5, 1.2], [0.7, 0.0], [])]


def closed_form(point):
    """At SymPy's point: A = [[0, 1], [-9.8/L, 0]] (SymPy's expected result)."""
    if point is SYMPY_POINT:
        return [[0.0, 1.0], [-G / PARAMETERS["L"], 0.0]]
    return None
