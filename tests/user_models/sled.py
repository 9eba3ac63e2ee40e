"""Chaplygin sled (knife edge) with a thrust force and a steering torque.

A rigid body B (mass m, central inertia I about the vertical) moves on a
horizontal plane: mass centre G at (x, y), heading theta. A knife edge at
P = G - b B.x cannot slide sideways: the nonholonomic constraint

    f_v = v_P . B.y = -sin(theta) ux + cos(theta) uy - b w = 0

with speeds ux = x', uy = y', w = theta'. Inputs: thrust F along B.x at G and
torque T about the vertical; linear drag c on G. Dependent speed uy: the
partition is singular where cos(theta) = 0 (heading theta = +/- pi/2), where
ux must be chosen dependent instead.
"""

import numpy as np
import sympy as sm
import sympy.physics.mechanics as me

from codegen import Model

PARAMETERS = {"m": 2.0, "I": 0.35, "b": 0.4, "c": 0.2}


def make_model(dependent="uy"):
    """The sled with ``dependent`` ("uy", the default, or "ux") as the dependent speed."""
    x, y, theta = me.dynamicsymbols("x y theta")
    ux, uy, w = me.dynamicsymbols("ux uy w")
    F, T = me.dynamicsymbols("F T")
    m, I, b, c = sm.symbols("m I b c")

    N = me.ReferenceFrame("N")
    B = N.orientnew("B", "Axis", [theta, N.z])
    B.set_ang_vel(N, w * N.z)
    O = me.Point("O")
    O.set_vel(N, 0)
    G = O.locatenew("G", x * N.x + y * N.y)
    G.set_vel(N, ux * N.x + uy * N.y)
    P = G.locatenew("P", -b * B.x)
    P.v2pt_theory(G, N, B)

    f_v = [P.vel(N).dot(B.y)]
    kinematic = [x.diff() - ux, y.diff() - uy, theta.diff() - w]
    body = me.RigidBody("sled", G, B, m, (me.inertia(B, 0, 0, I), G))
    loads = [(G, F * B.x - c * G.vel(N)), (B, T * N.z)]
    u_ind, u_dep = ([ux, w], [uy]) if dependent == "uy" else ([uy, w], [ux])
    kane = me.KanesMethod(N, q_ind=[x, y, theta], u_ind=u_ind, kd_eqs=kinematic,
                          u_dependent=u_dep, velocity_constraints=f_v)
    kane.kanes_equations([body], loads)
    symbols = {"m": m, "I": I, "b": b, "c": c}
    return Model(kane, parameters={symbols[k]: v for k, v in PARAMETERS.items()},
                 inputs=[F, T], name="sled", description="Chaplygin sled with thrust and torque")


def make_model_ux_dependent():
    """Speeds (uy, w, ux): regular at heading +/- pi/2, singular at 0 and pi."""
    return make_model("ux")


def operating_point(rng=None, parameters=None, theta=None):
    """Consistent, non-equilibrium (q, u, r, p, t): random pose (heading away
    from +/- pi/2), random ux, w, uy from the constraint, nonzero inputs."""
    rng = np.random.default_rng(rng)
    par = dict(PARAMETERS, **(parameters or {}))
    x, y = rng.uniform(-2, 2, 2)
    if theta is None:
        theta = float(rng.uniform(-1.2, 1.2)) + (np.pi if rng.random() < 0.5 else 0.0)
    ux, w = rng.uniform(-1.5, 1.5, 2)
    uy = (np.sin(theta) * ux + par["b"] * w) / np.cos(theta)
    r = rng.uniform(-2, 2, 2)
    return (np.array([x, y, theta]), np.array([ux, w, uy]), r, np.array(list(par.values())), 0.0)
