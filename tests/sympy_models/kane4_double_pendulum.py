"""SymPy ``test_kane4.py::test_replace_qdots_in_force``: a double pendulum
of two particles whose joint spring and damper torque is written in terms of
q2' (not a speed): KanesMethod replaces it with the speeds through the
kinematic equations. The second set of kinematic equations, kde2 =
[u1 - q1', u2 - (q1' + q2')] (u2 is the absolute rate of the second rod),
is used. No gravity. Unchanged; default parameter values added."""

from sympy import symbols
from sympy.physics.mechanics import KanesMethod, Particle, Point, ReferenceFrame, dynamicsymbols

from codegen import Model

PARAMETERS = {"l": 0.7, "m": 1.1, "sigma": 2.5, "delta": 0.35}


def make_kane():
    q1, q2 = dynamicsymbols('q1, q2')
    qd1, qd2 = dynamicsymbols('q1, q2', level=1)
    u1, u2 = dynamicsymbols('u1, u2')
    l, m = symbols('l, m')
    N = ReferenceFrame('N')
    A = N.orientnew('A', 'Axis', (q1, N.z))
    B = A.orientnew('B', 'Axis', (q2, N.z))
    O = Point('O')
    O.set_vel(N, 0)
    P = O.locatenew('P', (l * A.x))
    P.v2pt_theory(O, N, A)
    Q = P.locatenew('Q', (l * B.x))
    Q.v2pt_theory(P, N, B)
    Ap = Particle('Ap', P, m)
    Bp = Particle('Bp', Q, m)
    sig, delta = symbols('sigma, delta')
    Ta = (sig * q2 + delta * qd2) * N.z
    forces = [(A, Ta), (B, -Ta)]
    kde2 = [u1 - qd1, u2 - (qd1 + qd2)]
    KM2 = KanesMethod(N, [q1, q2], [u1, u2], kd_eqs=kde2)
    KM2.kanes_equations([Ap, Bp], forces)
    symbols_ = {"l": l, "m": m, "sigma": sig, "delta": delta}
    return KM2, {symbols_[n]: v for n, v in PARAMETERS.items()}, []


def make_model():
    return Model(*make_kane(), name="kane4_double_pendulum", description="SymPy test_kane4 double pendulum")


POINTS = [([0.3, -0.8], [1.2, -0.4], [])]
