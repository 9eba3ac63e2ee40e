"""A bead on a straight wire that turns at a constant rate in a vertical
plane, with speeds measured relative to the turning wire.

The wire W passes through the fixed point O and is at angle omega t to the
horizontal N.x (gravity g along -N.y). The bead (mass m) is at (x, y) in N,
pulled to O by a spring k, with friction c along the wire and an axial force
F. Speeds: u1, u2 are the components along W.x, W.y of the bead's velocity
*relative to W*, so the kinematic equations

    x' - (u1 cos wt - u2 sin wt) + omega y = 0
    y' - (u1 sin wt + u2 cos wt) - omega x = 0

contain terms free of qd and u that depend on q (omega x r): SymPy's
``to_linearizer`` counts those twice (see tests/reference.py). Configuration
constraint (explicit time): the bead is on the wire, y_W = -x sin wt + y cos wt
= 0; its time derivative is u2 (the formula below, which simplifies to u2).
Dependent: y and u2 (singular for y where cos(omega t) = 0).
"""

import math

import numpy as np
import sympy as sm
import sympy.physics.mechanics as me

from codegen import Model

PARAMETERS = {"m": 0.8, "k": 3.0, "c": 0.3, "g": 9.81, "omega": 1.3}


def make_model():
    t = me.dynamicsymbols._t
    x, y = me.dynamicsymbols("x y")
    u1, u2 = me.dynamicsymbols("u1 u2")
    F = me.dynamicsymbols("F")
    m, k, c, g, omega = sm.symbols("m k c g omega")

    N = me.ReferenceFrame("N")
    W = N.orientnew("W", "Axis", [omega * t, N.z])
    O = me.Point("O")
    O.set_vel(N, 0)
    bead = O.locatenew("bead", x * N.x + y * N.y)
    relative = u1 * W.x + u2 * W.y
    velocity = relative + (omega * N.z).cross(bead.pos_from(O))
    bead.set_vel(N, velocity)

    kinematic = [x.diff(t) - velocity.dot(N.x), y.diff(t) - velocity.dot(N.y)]
    f_c = [bead.pos_from(O).dot(W.y)]
    qd_to_u = sm.solve(kinematic, [x.diff(t), y.diff(t)])
    f_v = [fc.diff(t).xreplace(qd_to_u) for fc in f_c]

    loads = [(bead, -m * g * N.y - k * bead.pos_from(O) - c * u1 * W.x + F * W.x)]
    kane = me.KanesMethod(N, q_ind=[x], u_ind=[u1], kd_eqs=kinematic,
                          q_dependent=[y], configuration_constraints=f_c,
                          u_dependent=[u2], velocity_constraints=f_v)
    kane.kanes_equations([me.Particle("bead", bead, m)], loads)
    symbols = {"m": m, "k": k, "c": c, "g": g, "omega": omega}
    return Model(kane, parameters={symbols[k_]: v for k_, v in PARAMETERS.items()}, inputs=[F],
                 name="rotating_wire", description="bead on a turning wire, relative speeds")


def operating_point(rng=None, parameters=None, t=None):
    """Consistent, non-equilibrium (q, u, r, p, t) at nonzero time with
    cos(omega t) away from zero."""
    rng = np.random.default_rng(rng)
    par = dict(PARAMETERS, **(parameters or {}))
    if t is None:
        t = float(rng.uniform(0.2, 0.8)) * rng.choice([-1, 1]) / par["omega"] + (math.pi / par["omega"] if rng.random() < 0.5 else 0.0)
    s = float(rng.uniform(-1.5, 1.5))               # position along the wire
    angle = par["omega"] * t
    q = np.array([s * math.cos(angle), s * math.sin(angle)])
    u = np.array([float(rng.uniform(-2, 2)), 0.0])
    r = np.array([float(rng.uniform(-1, 1))])
    return q, u, r, np.array(list(par.values())), float(t)
