"""Simple pendulum in Cartesian coordinates (Spencer's thesis, section 2.3, Fig. 2.2).

A particle of mass m at (q1, q2), Spencer's names, held at distance l from
the pivot at the origin: the configuration constraint g(q) = q1^2 + q2^2 - l^2
(Spencer's, with l = 1), and its time derivative 2 q1 u1 + 2 q2 u2 as the
velocity constraint; speeds u1 = q1', u2 = q2'. Gravity g along -q2 (Spencer
draws no gravity; q2 is taken as the upward axis). Default partition as in
Spencer's example: q1 independent (y_q = q1), q2 and u2 dependent, which
fails where q2 = 0 (pendulum horizontal: q1 does not determine q2 there);
q1 dependent instead fails at q1 = 0, which includes the hanging equilibrium.

Closed forms: at the hanging equilibrium the eigenvalues are +/- i sqrt(g/l)
for every valid partition; at a moving point the 1-DOF linearization in the
chart (q1, u1) follows from q1'' = -q1 (g/l) c - q1 u1^2/(l^2 c^2),
c = -q2/l = sqrt(1 - q1^2/l^2) on the lower half (see tests/test_seed_models.py).
"""

import math

import sympy as sm
import sympy.physics.mechanics as me

from ..model import Model

DESCRIPTION = "simple pendulum in Cartesian coordinates (Spencer thesis, Fig. 2.2)"
DEFAULT_PARAMETERS = {"m": 1.0, "l": 1.0, "g": 9.81}


def make_model():
    q1, q2 = me.dynamicsymbols("q1 q2")
    u1, u2 = me.dynamicsymbols("u1 u2")
    t = me.dynamicsymbols._t
    m, l, g = sm.symbols("m l g")

    N = me.ReferenceFrame("N")
    pivot = me.Point("O")
    pivot.set_vel(N, 0)
    bob = pivot.locatenew("P", q1 * N.x + q2 * N.y)
    bob.set_vel(N, u1 * N.x + u2 * N.y)

    f_c = [q1**2 + q2**2 - l**2]
    f_v = [2 * q1 * u1 + 2 * q2 * u2]        # d f_c/dt with q' = u
    kinematic = [q1.diff(t) - u1, q2.diff(t) - u2]
    kane = me.KanesMethod(N, q_ind=[q1], u_ind=[u1], kd_eqs=kinematic,
                          q_dependent=[q2], configuration_constraints=f_c,
                          u_dependent=[u2], velocity_constraints=f_v)
    kane.kanes_equations([me.Particle("bob", bob, m)], [(bob, -m * g * N.y)])
    symbols = {"m": m, "l": l, "g": g}
    # p in the order of DEFAULT_PARAMETERS (operating_point relies on it)
    parameters = {symbols[name]: value for name, value in DEFAULT_PARAMETERS.items()}
    return Model(kane, parameters=parameters, name="spencer_pendulum", description=DESCRIPTION)


def at_angle(parameters, angle=0.6, rate=0.0):
    """The pendulum at ``angle`` from the downward vertical (counterclockwise
    positive) turning at ``rate``: q = l (sin, -cos), u = l rate (cos, sin).
    A regular point of the default partition unless the pendulum is
    horizontal (angle = +/-pi/2)."""
    l = parameters["l"]
    q = [l * math.sin(angle), -l * math.cos(angle)]
    u = [l * rate * math.cos(angle), l * rate * math.sin(angle)]
    return q, u


def hanging(parameters):
    """The stable equilibrium, hanging straight down (q1 = 0, q2 = -l)."""
    return at_angle(parameters, 0.0, 0.0)


def horizontal(parameters, rate=0.0):
    """q2 = 0: where the default partition (q2 dependent) fails, as in Spencer's Fig. 2.3."""
    return at_angle(parameters, math.pi / 2, rate)


OPERATING_POINTS = {"hanging": hanging, "at_angle": at_angle, "horizontal": horizontal}
DEFAULT_OPERATING_POINT = ("hanging", {})


def expected_eigenvalues(parameters, name, **kwargs):
    if name == "hanging":
        w = math.sqrt(parameters["g"] / parameters["l"])
        return f"+/-{w:.6g}i  [+/- i sqrt(g/l)]"
    return None
