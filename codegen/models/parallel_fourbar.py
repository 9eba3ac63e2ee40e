"""Parallel four-bar robot (Spencer's thesis, section 2.4.1, Fig. 2.4).

Four rods in a vertical plane, two of them (1 and 2) pivoted at the base O,
each driven there by a motor. Spencer's coordinates: q1, q2 are the absolute
angles of bodies 1 (length L1) and 2 (length L2) from the x axis; body 3
(length L1) is hinged to the tip C of body 2 at the relative angle q3; body 4
(length L2) is hinged to the tip D of body 3 at the relative angle q4, and
its tip is held at the tip A of body 1, Spencer's constraint

    L2 cos q2 + L1 cos(q2 + q3) + L2 cos(q2 + q3 + q4) - L1 cos q1 = 0
    L2 sin q2 + L1 sin(q2 + q3) + L2 sin(q2 + q3 + q4) - L1 sin q1 = 0.

On the parallelogram branch q3 = q1 - q2 and q4 = q2 - q1 - pi, so with q1, q2
independent Spencer's K = d q/d(q1, q2) = [[1, 0], [0, 1], [1, -1], [-1, 1]]
is constant. Speeds u_i = q_i'; velocity constraints are the time
derivatives. Default partition as Spencer's: q3, q4 (u3, u4) dependent,
singular only where the parallelogram is flat (sin q4 = 0, q1 - q2 = 0 or pi),
which is a singular configuration (J_c of rank 1). q1 and q2 cannot both be
dependent (only their difference is fixed by q3, q4).

What Spencer leaves out, chosen here: the rods are uniform (centre at half
length, central inertia m L^2/12) with masses m1..m4; L1 = 1 m, L2 = 0.5 m,
m1 = m3 = 1 kg, m2 = m4 = 0.5 kg; gravity g along -y; inputs are the two
motor torques T1 (ground on body 1) and T2 (ground on body 2).

In (q1, q2): kinetic energy [d11 q1'^2 + 2 d12 q1' q2' + d22 q2'^2]/2 with
d11 = (m1/3 + m3/3 + m4) L1^2, d22 = (m2/3 + m3 + m4/3) L2^2,
d12 = (m3 + m4)/2 L1 L2 cos(q1 - q2); potential g (a1 sin q1 + a2 sin q2) with
a1 = (m1/2 + m3/2 + m4) L1, a2 = (m2/2 + m3 + m4/2) L2. Any regular
configuration at rest is an equilibrium under the holding torques
T_i = g a_i cos q_i (``equilibrium``).
"""

import math

import sympy as sm
import sympy.physics.mechanics as me

from ..model import Model

DESCRIPTION = "parallel four-bar robot, two base motors (Spencer thesis, Fig. 2.4)"
DEFAULT_PARAMETERS = {"L1": 1.0, "L2": 0.5, "m1": 1.0, "m2": 0.5, "m3": 1.0, "m4": 0.5, "g": 9.81}


def make_model():
    q1, q2, q3, q4 = me.dynamicsymbols("q1:5")
    u1, u2, u3, u4 = me.dynamicsymbols("u1:5")
    T1, T2 = me.dynamicsymbols("T1 T2")
    t = me.dynamicsymbols._t
    symbols = {name: sm.Symbol(name) for name in DEFAULT_PARAMETERS}
    L1, L2, m1, m2, m3, m4, g = (symbols[name] for name in DEFAULT_PARAMETERS)

    N = me.ReferenceFrame("N")
    body1 = N.orientnew("body1", "Axis", [q1, N.z])
    body2 = N.orientnew("body2", "Axis", [q2, N.z])
    body3 = body2.orientnew("body3", "Axis", [q3, N.z])
    body4 = body3.orientnew("body4", "Axis", [q4, N.z])
    body1.set_ang_vel(N, u1 * N.z)
    body2.set_ang_vel(N, u2 * N.z)
    body3.set_ang_vel(N, (u2 + u3) * N.z)
    body4.set_ang_vel(N, (u2 + u3 + u4) * N.z)

    O = me.Point("O")
    O.set_vel(N, 0)
    A = O.locatenew("A", L1 * body1.x)           # tip of body 1
    C = O.locatenew("C", L2 * body2.x)           # tip of body 2
    D = C.locatenew("D", L1 * body3.x)           # tip of body 3
    tip4 = D.locatenew("tip4", L2 * body4.x)     # tip of body 4, held at A
    for point, base, frame in ((A, O, body1), (C, O, body2), (D, C, body3), (tip4, D, body4)):
        point.v2pt_theory(base, N, frame)

    bodies, loads = [], []
    for k, (base, frame, length, mass) in enumerate(((O, body1, L1, m1), (O, body2, L2, m2),
                                                     (C, body3, L1, m3), (D, body4, L2, m4)), 1):
        centre = base.locatenew(f"G{k}", length / 2 * frame.x)
        centre.v2pt_theory(base, N, frame)
        inertia = me.inertia(frame, 0, 0, mass * length**2 / 12)
        bodies.append(me.RigidBody(f"body{k}", centre, frame, mass, (inertia, centre)))
        loads.append((centre, -mass * g * N.y))
    loads += [(body1, T1 * N.z), (body2, T2 * N.z)]

    closure = tip4.pos_from(A)
    f_c = [closure.dot(N.x), closure.dot(N.y)]
    qd_to_u = {q1.diff(t): u1, q2.diff(t): u2, q3.diff(t): u3, q4.diff(t): u4}
    f_v = [fc.diff(t).xreplace(qd_to_u) for fc in f_c]
    kinematic = [qi.diff(t) - ui for qi, ui in zip((q1, q2, q3, q4), (u1, u2, u3, u4))]
    kane = me.KanesMethod(N, q_ind=[q1, q2], u_ind=[u1, u2], kd_eqs=kinematic,
                          q_dependent=[q3, q4], configuration_constraints=f_c,
                          u_dependent=[u3, u4], velocity_constraints=f_v)
    kane.kanes_equations(bodies, loads)
    parameters = {symbols[name]: value for name, value in DEFAULT_PARAMETERS.items()}
    return Model(kane, parameters=parameters, inputs=[T1, T2], name="parallel_fourbar",
                 description=DESCRIPTION)


def gravity_moments(parameters):
    """a1, a2 of the potential g (a1 sin q1 + a2 sin q2) (module docstring)."""
    L1, L2, m1, m2, m3, m4 = (parameters[n] for n in ("L1", "L2", "m1", "m2", "m3", "m4"))
    return (m1 / 2 + m3 / 2 + m4) * L1, (m2 / 2 + m3 + m4 / 2) * L2


def configuration(q1, q2):
    """All four coordinates on the parallelogram branch."""
    return [q1, q2, q1 - q2, q2 - q1 - math.pi]


def equilibrium(parameters, q1=-math.pi / 3, q2=-2 * math.pi / 3):
    """At rest at (q1, q2), held by the motor torques T_i = g a_i cos q_i."""
    a1, a2 = gravity_moments(parameters)
    g = parameters["g"]
    return configuration(q1, q2), [0.0] * 4, [g * a1 * math.cos(q1), g * a2 * math.cos(q2)]


def general(parameters, q1=0.9, q2=2.3, u1=0.8, u2=-0.5, T1=1.5, T2=-0.7):
    """A regular, moving, accelerating point (u3 = u1 - u2, u4 = -u3)."""
    return configuration(q1, q2), [u1, u2, u1 - u2, u2 - u1], [T1, T2]


def flat(parameters, q=-math.pi / 2):
    """Bodies 1 and 2 along one line (q1 = q2), held at rest: the parallelogram
    is flat, every body on one line, J_c has rank 1 (a singular configuration:
    no partition is valid)."""
    return equilibrium(parameters, q, q)


OPERATING_POINTS = {"equilibrium": equilibrium, "general": general, "flat": flat}
DEFAULT_OPERATING_POINT = ("equilibrium", {})


def closed_form(parameters, q1, q2):
    """Eigenvalues at rest at (q1, q2) under the constant holding torques:
    +/- i omega with det(K - omega^2 M) = 0, M = [[d11, d12], [d12, d22]],
    K = diag(-g a1 sin q1, -g a2 sin q2) (module docstring)."""
    L1, L2, m1, m2, m3, m4, g = (parameters[n] for n in DEFAULT_PARAMETERS)
    a1, a2 = gravity_moments(parameters)
    d11 = (m1 / 3 + m3 / 3 + m4) * L1**2
    d22 = (m2 / 3 + m3 + m4 / 3) * L2**2
    d12 = (m3 + m4) / 2 * L1 * L2 * math.cos(q1 - q2)
    k1, k2 = -g * a1 * math.sin(q1), -g * a2 * math.sin(q2)
    # det(M) w^4 - (k1 d22 + k2 d11) w^2 + k1 k2 = 0
    a, b, c = d11 * d22 - d12**2, -(k1 * d22 + k2 * d11), k1 * k2
    root = math.sqrt(b * b - 4 * a * c)
    squares = ((-b - root) / (2 * a), (-b + root) / (2 * a))
    values = []
    for w2 in squares:
        w = complex(w2) ** 0.5
        values += [1j * w, -1j * w]
    return values


def expected_eigenvalues(parameters, name, **kwargs):
    if name == "equilibrium":
        q, _, _ = equilibrium(parameters, **kwargs)
        values = closed_form(parameters, q[0], q[1])
        text = ", ".join(f"+/-{abs(v.imag):.6g}i" if abs(v.real) < 1e-12 * abs(v) else f"+/-{abs(v.real):.6g}"
                         for v in values[::2])
        return f"{text}  [det(K - w^2 M) = 0 in (q1, q2), holding torques constant]"
    return None
