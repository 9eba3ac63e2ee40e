"""SymPy ``test_kane.py::test_two_dof``: two particles on springs and
dampers; q2 is the displacement of the second particle relative to the
first. The kinematic equations are scaled by arbitrary factors
(q1'/2 - u1/2, 2 q2' - 2 u2), so M_qq = diag(1/2, 2) is not the identity.
Unchanged; default parameter values added."""

from sympy import symbols
from sympy.physics.mechanics import KanesMethod, Particle, Point, ReferenceFrame, dynamicsymbols

from codegen import Model

PARAMETERS = {"m": 1.3, "c1": 0.2, "c2": 0.45, "k1": 3.0, "k2": 1.7}


def make_kane():
    q1, q2, u1, u2 = dynamicsymbols('q1 q2 u1 u2')
    q1d, q2d, u1d, u2d = dynamicsymbols('q1 q2 u1 u2', 1)
    m, c1, c2, k1, k2 = symbols('m c1 c2 k1 k2')
    N = ReferenceFrame('N')
    P1 = Point('P1')
    P2 = Point('P2')
    P1.set_vel(N, u1 * N.x)
    P2.set_vel(N, (u1 + u2) * N.x)
    kd = [q1d/2 - u1/2, 2*q2d - 2*u2]
    FL = [(P1, (-k1 * q1 - c1 * u1 + k2 * q2 + c2 * u2) * N.x), (P2, (-k2 *
        q2 - c2 * u2) * N.x)]
    pa1 = Particle('pa1', P1, m)
    pa2 = Particle('pa2', P2, m)
    BL = [pa1, pa2]
    KM = KanesMethod(N, q_ind=[q1, q2], u_ind=[u1, u2], kd_eqs=kd)
    KM.kanes_equations(BL, FL)
    symbols_ = {"m": m, "c1": c1, "c2": c2, "k1": k1, "k2": k2}
    return KM, {symbols_[n]: v for n, v in PARAMETERS.items()}, []


def make_model():
    return Model(*make_kane(), name="kane_two_dof", description="SymPy test_kane two_dof")


POINTS = [([0.4, -0.2], [1.1, 0.3], [])]


def closed_form(point):
    """From SymPy's expected right-hand sides:
    u1' = (-k1 q1 - c1 u1 + k2 q2 + c2 u2)/m,
    u2' = (k1 q1 + c1 u1 - 2 k2 q2 - 2 c2 u2)/m."""
    p = PARAMETERS
    m = p["m"]
    return [[0, 0, 1, 0], [0, 0, 0, 1],
            [-p["k1"] / m, p["k2"] / m, -p["c1"] / m, p["c2"] / m],
            [p["k1"] / m, -2 * p["k2"] / m, p["c1"] / m, -2 * p["c2"] / m]]
