"""SymPy ``test_kane.py::test_parallel_axis``: an inverted pendulum on a
cart whose inertia is given about the hinge, not the mass centre (tests the
parallel axis code of KanesMethod); a spring on the cart and a force input F.
Unchanged; default parameter values added."""

from sympy import symbols
from sympy.physics.mechanics import (KanesMethod, Particle, Point, ReferenceFrame, RigidBody,
                                     dynamicsymbols, inertia)

from codegen import Model

PARAMETERS = {"g": 9.81, "k": 4.0, "ls": 0.3, "a": 0.6, "mA": 0.8, "mC": 2.1,
              "Ix": 0.05, "Iy": 0.06, "Iz": 0.4}


def make_kane():
    gravity = symbols('g')
    k, ls = symbols('k ls')
    a, mA, mC = symbols('a mA mC')
    F = dynamicsymbols('F')
    Ix, Iy, Iz = symbols('Ix Iy Iz')
    q1, q2 = dynamicsymbols('q1 q2')
    q1d, q2d = dynamicsymbols('q1 q2', 1)
    u1, u2 = dynamicsymbols('u1 u2')
    u1d, u2d = dynamicsymbols('u1 u2', 1)
    N = ReferenceFrame('N')
    A = ReferenceFrame('A')
    A.orient(N, 'Axis', [-q2, N.z])
    A.set_ang_vel(N, -u2 * N.z)
    O = Point('O')
    C = O.locatenew('C', q1 * N.x)
    Ao = C.locatenew('Ao', a * A.y)
    O.set_vel(N, 0)
    C.set_vel(N, u1 * N.x)
    Ao.v2pt_theory(C, N, A)
    Cart = Particle('Cart', C, mC)
    Pendulum = RigidBody('Pendulum', Ao, A, mA, (inertia(A, Ix, Iy, Iz), C))
    kindiffs = [q1d - u1, q2d - u2]
    bodyList = [Cart, Pendulum]
    forceList = [(Ao, -N.y * gravity * mA),
                 (C, -N.y * gravity * mC),
                 (C, -N.x * k * (q1 - ls)),
                 (C, N.x * F)]
    km = KanesMethod(N, [q1, q2], [u1, u2], kindiffs)
    km.kanes_equations(bodyList, forceList)
    symbols_ = {"g": gravity, "k": k, "ls": ls, "a": a, "mA": mA, "mC": mC, "Ix": Ix, "Iy": Iy, "Iz": Iz}
    return km, {symbols_[n]: v for n, v in PARAMETERS.items()}, [F]


def make_model():
    return Model(*make_kane(), name="kane_parallel_axis", description="SymPy test_kane parallel_axis")


POINTS = [([0.1, 0.35], [-0.4, 1.2], [0.8])]
