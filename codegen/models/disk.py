"""Rolling disk in the non-minimal formulation of Peterson's thesis chapter.

A thin disk C (mass m, radius r) rolls without slip on a horizontal plane;
n_z points down, along gravity. Orientation by body-fixed Z-X-Y rotations:
yaw q1 (frame A), lean q2 (frame B), spin q3 (frame C). The centre C* is
located by q4, q5, q6 along n_x, n_y, n_z, so contact with the ground is the
configuration constraint ``r cos(q2) + q6 = 0`` (q6 dependent). The angular
velocity of C is ``u1 b_x + u2 b_y + u3 b_z`` and the velocity of C* is
``u4 c_x + u5 c_y + u6 c_z``; rolling gives three velocity constraints with
u4, u5, u6 dependent. Inertia of a thin disk: I_xx = I_zz = m r^2/4,
I_yy = m r^2/2 (c_y normal to the disk).
"""

import math

import numpy as np
import sympy as sm
import sympy.physics.mechanics as me

from ..model import Model

DESCRIPTION = "rolling disk, non-minimal coordinates (Peterson thesis chapter)"

# The chapter's parameter values (m = r = g = 1): its closed-form eigenvalues
# are stated for these.
DEFAULT_PARAMETERS = {"m": 1.0, "r": 1.0, "g": 1.0}


def make_model(sensitivities=None, outputs=False):
    """The model; with ``sensitivities`` (parameter names or "all") the
    same model with them, named ``<name>_sensitivities``. ``outputs``: with
    measurement outputs (named ``disk_outputs``): the lean, the yaw rate (a
    coordinate rate), the lean acceleration (a speed's rate), the centre's
    speed along c_x (a dependent speed), the height of the centre (a
    dependent coordinate), the contact point's x and the kinetic energy."""
    q1, q2, q3, q4, q5, q6 = me.dynamicsymbols("q1:7")
    u1, u2, u3, u4, u5, u6 = me.dynamicsymbols("u1:7")
    q1d, q2d, q3d, q4d, q5d, q6d = (qi.diff() for qi in (q1, q2, q3, q4, q5, q6))
    m, r, g = sm.symbols("m r g")

    N = me.ReferenceFrame("N")
    A = N.orientnew("A", "Axis", [q1, N.z])   # yaw
    B = A.orientnew("B", "Axis", [q2, A.x])   # lean
    C = B.orientnew("C", "Axis", [q3, B.y])   # spin
    C.set_ang_vel(N, u1 * B.x + u2 * B.y + u3 * B.z)

    origin = me.Point("N*")
    origin.set_vel(N, 0)
    centre = origin.locatenew("C*", q4 * N.x + q5 * N.y + q6 * N.z)
    centre.set_vel(N, u4 * C.x + u5 * C.y + u6 * C.z)
    contact = centre.locatenew("P*", r * B.z)
    contact.v2pt_theory(centre, N, C)

    f_c = [r * sm.cos(q2) + q6]
    f_v = [contact.vel(N).dot(unit) for unit in (C.x, C.y, C.z)]

    # Kinematic differential equations, as in the chapter: angular velocity
    # from the Z-X-Y rates, velocity of C* from rolling (v = w x (-r b_z)).
    kinematic = [
        q2d - u1,
        sm.sin(q2) * q1d + q3d - u2,
        sm.cos(q2) * q1d - u3,
        q4d + r * u1 * sm.sin(q1) * sm.cos(q2) + r * u2 * sm.cos(q1),
        q5d - r * u1 * sm.cos(q1) * sm.cos(q2) + r * u2 * sm.sin(q1),
        q6d - r * u1 * sm.sin(q2),
    ]

    inertia = me.inertia(C, m * r**2 / 4, m * r**2 / 2, m * r**2 / 4)
    disk = me.RigidBody("disk", centre, C, m, (inertia, centre))
    loads = [(centre, m * g * N.z)]

    kane = me.KanesMethod(
        N, q_ind=[q1, q2, q3, q4, q5], u_ind=[u1, u2, u3], kd_eqs=kinematic,
        q_dependent=[q6], configuration_constraints=f_c,
        u_dependent=[u4, u5, u6], velocity_constraints=f_v)
    kane.kanes_equations([disk], loads)
    symbols = {"m": m, "r": r, "g": g}
    # p in the order of DEFAULT_PARAMETERS (operating_point relies on it)
    parameters = {symbols[name]: value for name, value in DEFAULT_PARAMETERS.items()}
    measured = None
    if outputs:
        measured = {"lean": q2, "yaw_rate": q1d, "lean_acceleration": u1.diff(me.dynamicsymbols._t),
                    "centre_speed": u4, "height": -q6, "contact_x": contact.pos_from(origin).dot(N.x),
                    "kinetic_energy": disk.kinetic_energy(N)}
    model = Model(kane, parameters=parameters, name="disk_outputs" if outputs else "disk",
                  description=DESCRIPTION, outputs=measured)
    return model.with_sensitivities(sensitivities) if sensitivities else model


def _speeds(q, yaw_rate, lean_rate, spin_rate, r):
    """Speeds u1..u6 of the chapter from coordinate rates, on the constraint manifold."""
    q2, q3 = q[1], q[2]
    u1 = lean_rate
    u2 = math.sin(q2) * yaw_rate + spin_rate
    u3 = math.cos(q2) * yaw_rate
    u4 = -r * u2 * math.cos(q3)
    u5 = r * u1
    u6 = -r * u2 * math.sin(q3)
    return [u1, u2, u3, u4, u5, u6]


def _radius(parameters):
    r = parameters["r"]
    if r == 0.0:   # the speeds below divide by it
        raise ValueError("the radius r must not be zero")
    return r


def upright(parameters, v=0.5):
    """Upright steady rolling along n_x at forward speed v = -r q3'."""
    r = _radius(parameters)
    q = [0.0, 0.0, 0.0, 0.0, 0.0, -r]
    return q, _speeds(q, 0.0, 0.0, -v / r, r)


def steady_turn_yaw_rates(parameters, lean, spin_rate):
    """Yaw rates q1' of steady turns at constant lean q2 and spin rate q3'.

    Roots of the chapter's steady-turn condition
    g/r sin q2 + 3/2 cos q2 q3' q1' + 5/4 cos q2 sin q2 q1'^2 = 0,
    a quadratic in q1' (the chapter's printed root formula is that of the
    reciprocal quadratic, see ``tests/test_disk.py``).
    """
    g, r = parameters["g"], _radius(parameters)
    a = 1.25 * math.cos(lean) * math.sin(lean)
    b = 1.5 * math.cos(lean) * spin_rate
    c = g / r * math.sin(lean)
    if a == 0.0:
        return [] if c != 0.0 else [0.0]
    disc = b * b - 4 * a * c
    if disc < 0:
        raise ValueError(
            f"no steady turn at lean {lean} with spin rate {spin_rate}: need "
            f"q3'^2 >= 20 g/(9 r) sin(q2) tan(q2) = {20 * g / (9 * r) * math.sin(lean) * math.tan(lean):.6g}")
    root = math.sqrt(disc)
    return sorted([(-b - root) / (2 * a), (-b + root) / (2 * a)])


def steady_turn(parameters, lean=0.2, spin_rate=-3.0, branch=0):
    """Steady turn at constant lean q2 and spin rate q3' (yaw rate from the
    steady-turn condition; ``branch`` 0 or 1 picks the root)."""
    r = parameters["r"]
    yaw_rate = steady_turn_yaw_rates(parameters, lean, spin_rate)[branch]
    q = [0.0, lean, 0.0, 0.0, 0.0, -r * math.cos(lean)]
    return q, _speeds(q, yaw_rate, 0.0, spin_rate, r)


OPERATING_POINTS = {"upright": upright, "steady_turn": steady_turn}
DEFAULT_OPERATING_POINT = ("upright", {"v": 0.5})
SWEEP = {"point": "upright", "param": "v"}


def expected_eigenvalues(parameters, name, **kwargs):
    """The chapter's closed form (m = r = g = 1) for a person to compare with."""
    if name == "upright" and parameters == DEFAULT_PARAMETERS:
        v = kwargs.get("v", 0.5)
        lam = 2 * np.sqrt(complex(1 - 3 * v * v)) / math.sqrt(5)
        return f"six zeros and +/-({lam:.6g})  [Peterson thesis: +/-2 sqrt(1 - 3 v^2)/sqrt(5)]"
    return None
