"""A double pendulum in Cartesian coordinates whose pivot is driven along a
prescribed path: explicit time in the configuration constraints.

Two bobs (masses m1, m2) at (x1, y1) and (x2, y2) (y up, gravity g along -y);
rods of lengths L1, L2; the pivot moves horizontally, x_p(t) = a sin(omega t).
Configuration constraints (explicit time):

    f_c = [(x1 - x_p(t))^2 + y1^2 - L1^2,  (x2 - x1)^2 + (y2 - y1)^2 - L2^2]

Speeds are the Cartesian velocities u1..u4 = x1', y1', x2', y2'. The velocity
constraints are the total time derivatives of f_c, so they contain the
partial derivative with respect to t (the pivot's velocity a omega cos(omega t)).
Dependent: y1, y2 and u2, u4 (singular where a rod is horizontal: y1 = 0 or
y2 = y1). A horizontal force F acts on the lower bob, with viscous drag c.
"""

import math

import numpy as np
import sympy as sm
import sympy.physics.mechanics as me

from codegen import Model

PARAMETERS = {"m1": 1.2, "m2": 0.7, "L1": 1.1, "L2": 0.8, "g": 9.81, "a": 0.3,
              "omega": 2.5, "c": 0.15}


def make_model():
    t = me.dynamicsymbols._t
    x1, y1, x2, y2 = me.dynamicsymbols("x1 y1 x2 y2")
    u1, u2, u3, u4 = me.dynamicsymbols("u1:5")
    F = me.dynamicsymbols("F")
    m1, m2, L1, L2, g, a, omega, c = sm.symbols("m1 m2 L1 L2 g a omega c")

    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    bob1 = O.locatenew("bob1", x1 * N.x + y1 * N.y)
    bob1.set_vel(N, u1 * N.x + u2 * N.y)
    bob2 = O.locatenew("bob2", x2 * N.x + y2 * N.y)
    bob2.set_vel(N, u3 * N.x + u4 * N.y)

    pivot_x = a * sm.sin(omega * t)
    f_c = [(x1 - pivot_x) ** 2 + y1 ** 2 - L1 ** 2,
           (x2 - x1) ** 2 + (y2 - y1) ** 2 - L2 ** 2]
    qd_to_u = {x1.diff(t): u1, y1.diff(t): u2, x2.diff(t): u3, y2.diff(t): u4}
    f_v = [sm.expand(fc.diff(t).xreplace(qd_to_u)) for fc in f_c]   # holds d/dt of x_p(t)
    kinematic = [x1.diff(t) - u1, y1.diff(t) - u2, x2.diff(t) - u3, y2.diff(t) - u4]

    loads = [(bob1, -m1 * g * N.y),
             (bob2, -m2 * g * N.y + F * N.x - c * (u3 * N.x + u4 * N.y))]
    kane = me.KanesMethod(N, q_ind=[x1, x2], u_ind=[u1, u3], kd_eqs=kinematic,
                          q_dependent=[y1, y2], configuration_constraints=f_c,
                          u_dependent=[u2, u4], velocity_constraints=f_v)
    kane.kanes_equations([me.Particle("P1", bob1, m1), me.Particle("P2", bob2, m2)], loads)
    symbols = {"m1": m1, "m2": m2, "L1": L1, "L2": L2, "g": g, "a": a, "omega": omega, "c": c}
    return Model(kane, parameters={symbols[k]: v for k, v in PARAMETERS.items()}, inputs=[F],
                 name="driven_pendulum", description="Cartesian double pendulum, driven pivot")


def operating_point(rng=None, t=None, parameters=None):
    """A consistent, non-equilibrium point (q, u, r, p, t): random rod angles
    below the pivot, random independent speeds, nonzero force and time.
    Neither rod is vertical or horizontal, so any pair of dependent
    coordinates with one per rod (e.g. x1, y2) is a regular partition."""
    rng = np.random.default_rng(rng)
    par = dict(PARAMETERS, **(parameters or {}))
    t = float(rng.uniform(0.2, 2.0)) if t is None else float(t)
    xp = par["a"] * math.sin(par["omega"] * t)
    xp_rate = par["a"] * par["omega"] * math.cos(par["omega"] * t)
    # rod angles from the vertical, 0.3 <= |angle| <= 1 (no rod vertical or horizontal)
    th1, th2 = rng.uniform(0.3, 1.0, 2) * rng.choice([-1.0, 1.0], 2)
    x1, y1 = xp + par["L1"] * math.sin(th1), -par["L1"] * math.cos(th1)
    x2, y2 = x1 + par["L2"] * math.sin(th2), y1 - par["L2"] * math.cos(th2)
    u1, u3 = rng.uniform(-1.5, 1.5, 2)
    u2 = -(x1 - xp) * (u1 - xp_rate) / y1
    u4 = u2 - (x2 - x1) * (u3 - u1) / (y2 - y1)
    r = [float(rng.uniform(-2.0, 2.0))]
    return (np.array([x1, x2, y1, y2]), np.array([u1, u3, u2, u4]), np.array(r),
            np.array(list(par.values())), t)
