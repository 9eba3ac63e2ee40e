"""Chaplygin sled on a moving belt, with a rotor: a nonholonomic constraint
that holds explicit time and parameters.

A rigid body B (mass m, central inertia I about the vertical) carries a
knife edge at P = (x, y), heading theta; its mass centre G lies a distance b
ahead of P along B.x, where a rotor R (mass m_r, axial inertia I_r, angle
phi relative to B) spins. The ground is a belt moving along N.x at
a sin(Omega t): the knife edge cannot slide sideways relative to it,

    f_v = (v_P - a sin(Omega t) N.x) . B.y
        = -sin(theta) (ux - a sin(Omega t)) + cos(theta) uy = 0

with speeds ux = x', uy = y', w = theta', wr = phi'. So the dependent speed
uy moves with the belt's parameters a and Omega and with time. Inputs: a
thrust F along B.x at P, and a torque T on the rotor from B (-T on B); a
drag c on P's velocity relative to the belt along B.x. Dependent speed uy:
the partition is singular at heading +/- pi/2 (ux is then the one to choose),
ux as dependent at heading 0 and pi.
"""

import numpy as np
import sympy as sm
import sympy.physics.mechanics as me

from codegen import Model

PARAMETERS = {"m": 2.0, "I": 0.3, "b": 0.4, "a": 0.5, "Omega": 1.7, "I_r": 0.05, "c": 0.2, "m_r": 0.5}


def make_model():
    x, y, theta, phi = me.dynamicsymbols("x y theta phi")
    ux, uy, w, wr = me.dynamicsymbols("ux uy w wr")
    F, T = me.dynamicsymbols("F T")
    m, I, b, a, Omega, I_r, c, m_r = sm.symbols("m I b a Omega I_r c m_r")
    t = me.dynamicsymbols._t

    N = me.ReferenceFrame("N")
    B = N.orientnew("B", "Axis", [theta, N.z])
    B.set_ang_vel(N, w * N.z)
    R = B.orientnew("R", "Axis", [phi, B.z])
    R.set_ang_vel(B, wr * B.z)
    O = me.Point("O")
    O.set_vel(N, 0)
    P = O.locatenew("P", x * N.x + y * N.y)
    P.set_vel(N, ux * N.x + uy * N.y)
    G = P.locatenew("G", b * B.x)
    G.v2pt_theory(P, N, B)

    slip = P.vel(N) - a * sm.sin(Omega * t) * N.x       # P's velocity relative to the belt
    kane = me.KanesMethod(N, q_ind=[x, y, theta, phi], u_ind=[ux, w, wr], u_dependent=[uy],
                          kd_eqs=[x.diff() - ux, y.diff() - uy, theta.diff() - w, phi.diff() - wr],
                          velocity_constraints=[slip.dot(B.y)])
    sled = me.RigidBody("sled", G, B, m, (me.inertia(B, 0, 0, I), G))
    rotor = me.RigidBody("rotor", G, R, m_r, (me.inertia(R, 0, 0, I_r), G))
    loads = [(P, F * B.x - c * slip.dot(B.x) * B.x), (R, T * B.z), (B, -T * B.z)]
    kane.kanes_equations([sled, rotor], loads)
    symbols = {"m": m, "I": I, "b": b, "a": a, "Omega": Omega, "I_r": I_r, "c": c, "m_r": m_r}
    return Model(kane, parameters={symbols[k]: v for k, v in PARAMETERS.items()}, inputs=[F, T],
                 name="belt_sled", description="Chaplygin sled with a rotor on a belt moving as a sin(Omega t)")


def operating_point(rng=None, parameters=None):
    """Consistent, non-equilibrium (q, u, r, p, t): a random pose with the
    heading away from multiples of pi/2, random ux, w, wr, uy from the
    constraint at a random time, nonzero inputs."""
    rng = np.random.default_rng(rng)
    par = dict(PARAMETERS, **(parameters or {}))
    x, y, phi = rng.uniform(-2, 2, 3)
    theta = float(rng.uniform(0.3, 1.2)) * (1 if rng.random() < 0.5 else -1) + (np.pi if rng.random() < 0.5 else 0.0)
    ux, w, wr = rng.uniform(-1.5, 1.5, 3)
    t = float(rng.uniform(0.2, 3.0))
    belt = par["a"] * np.sin(par["Omega"] * t)
    uy = np.sin(theta) * (ux - belt) / np.cos(theta)
    r = rng.uniform(0.5, 2, 2) * np.where(rng.random(2) < 0.5, -1, 1)
    return (np.array([x, y, theta, phi]), np.array([ux, w, wr, uy]), r, np.array(list(par.values())), t)
