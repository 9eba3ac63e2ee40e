"""SymPy ``test_kane.py::test_rolling_disc``: the rolling disc formed from
the contact point up, in minimal coordinates (yaw q1, lean q2, spin q3) and
speeds (u1, u2, u3: angular velocity in the lean frame L). Unchanged;
parameters r = m = g = 1 as in SymPy's check of the critical speed."""

import math

from sympy import symbols
from sympy.physics.mechanics import (KanesMethod, Point, ReferenceFrame, RigidBody, dot,
                                     dynamicsymbols, inertia)

from codegen import Model


def make_kane():
    q1, q2, q3, u1, u2, u3 = dynamicsymbols('q1 q2 q3 u1 u2 u3')
    q1d, q2d, q3d, u1d, u2d, u3d = dynamicsymbols('q1 q2 q3 u1 u2 u3', 1)
    r, m, g = symbols('r m g')
    N = ReferenceFrame('N')
    Y = N.orientnew('Y', 'Axis', [q1, N.z])
    L = Y.orientnew('L', 'Axis', [q2, Y.x])
    R = L.orientnew('R', 'Axis', [q3, L.y])
    w_R_N_qd = R.ang_vel_in(N)
    R.set_ang_vel(N, u1 * L.x + u2 * L.y + u3 * L.z)
    C = Point('C')
    C.set_vel(N, 0)
    Dmc = C.locatenew('Dmc', r * L.z)
    Dmc.v2pt_theory(C, N, R)
    I = inertia(L, m / 4 * r**2, m / 2 * r**2, m / 4 * r**2)
    kd = [dot(R.ang_vel_in(N) - w_R_N_qd, uv) for uv in L]
    ForceList = [(Dmc, - m * g * Y.z)]
    BodyD = RigidBody('BodyD', Dmc, R, m, (I, Dmc))
    BodyList = [BodyD]
    KM = KanesMethod(N, q_ind=[q1, q2, q3], u_ind=[u1, u2, u3], kd_eqs=kd)
    KM.kanes_equations(BodyList, ForceList)
    return KM, {r: 1.0, m: 1.0, g: 1.0}, []


def make_model():
    return Model(*make_kane(), name="kane_rolling_disc", description="SymPy test_kane rolling_disc")


# upright rolling at spin rate 0.3 (closed form below), SymPy's critical speed
# 1/sqrt(3) (all eigenvalues zero), and a leaning, turning, accelerating point
POINTS = [([0.2, 0.0, 0.5], [0.0, 0.3, 0.0], []),
          ([0.0, 0.0, 0.0], [0.0, 1 / math.sqrt(3), 0.0], []),
          ([0.3, 0.4, -1.2], [0.5, -1.3, 0.8], [])]


def upright_eigenvalues(spin_rate):
    """Upright (q2 = 0, u1 = u3 = 0) with r = m = g = 1, below the critical
    speed (3 u2^2 <= 1): four zeros and +/- 2 sqrt(1 - 3 u2^2)/sqrt(5)."""
    lam = 2 * math.sqrt(1 - 3 * spin_rate ** 2) / math.sqrt(5)
    return [-lam, 0.0, 0.0, 0.0, 0.0, lam]
