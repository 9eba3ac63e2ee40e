"""Closed-loop four-bar linkage with a motor torque on the crank.

Ground pivots O = (0, 0) and D = (l0, 0); crank OA (length l1, absolute angle
q1), coupler AB (l2, q2), rocker DB (l3, q3); uniform rods of masses m1..m3;
gravity g along -y. Loop closure, two configuration constraints (one degree
of freedom):

    l1 cos q1 + l2 cos q2 - l0 - l3 cos q3 = 0
    l1 sin q1 + l2 sin q2      - l3 sin q3 = 0

Speeds u_i = q_i'; velocity constraints are the time derivatives. Dependent:
q2, q3 and u2, u3 (singular where coupler and rocker are aligned, sin(q2 - q3)
= 0). Input: motor torque T on the crank; viscous damping k at the crank.
Link lengths make a Grashof crank-rocker, so every crank angle is reachable.
"""

import math

import numpy as np
import sympy as sm
import sympy.physics.mechanics as me

from codegen import Model

PARAMETERS = {"l0": 1.0, "l1": 0.3, "l2": 1.0, "l3": 0.8, "m1": 0.5, "m2": 1.1, "m3": 0.9,
              "g": 9.81, "k": 0.05}


def make_model():
    t = me.dynamicsymbols._t
    q1, q2, q3 = me.dynamicsymbols("q1:4")
    u1, u2, u3 = me.dynamicsymbols("u1:4")
    T = me.dynamicsymbols("T")
    l0, l1, l2, l3, m1, m2, m3, g, k = sm.symbols("l0 l1 l2 l3 m1 m2 m3 g k")

    N = me.ReferenceFrame("N")
    crank = N.orientnew("crank", "Axis", [q1, N.z])
    coupler = N.orientnew("coupler", "Axis", [q2, N.z])
    rocker = N.orientnew("rocker", "Axis", [q3, N.z])
    for frame, speed in ((crank, u1), (coupler, u2), (rocker, u3)):
        frame.set_ang_vel(N, speed * N.z)

    O = me.Point("O")
    O.set_vel(N, 0)
    D = O.locatenew("D", l0 * N.x)
    D.set_vel(N, 0)
    A = O.locatenew("A", l1 * crank.x)
    A.v2pt_theory(O, N, crank)
    B = A.locatenew("B", l2 * coupler.x)
    G1 = O.locatenew("G1", l1 / 2 * crank.x)
    G1.v2pt_theory(O, N, crank)
    G2 = A.locatenew("G2", l2 / 2 * coupler.x)
    G2.v2pt_theory(A, N, coupler)
    G3 = D.locatenew("G3", l3 / 2 * rocker.x)
    G3.v2pt_theory(D, N, rocker)

    loop = B.pos_from(O) - (l0 * N.x + l3 * rocker.x)
    f_c = [loop.dot(N.x), loop.dot(N.y)]
    qd_to_u = {q1.diff(t): u1, q2.diff(t): u2, q3.diff(t): u3}
    f_v = [fc.diff(t).xreplace(qd_to_u) for fc in f_c]
    kinematic = [q1.diff(t) - u1, q2.diff(t) - u2, q3.diff(t) - u3]

    bodies = []
    for name, frame, point, mass, length in (("crank", crank, G1, m1, l1),
                                             ("coupler", coupler, G2, m2, l2),
                                             ("rocker", rocker, G3, m3, l3)):
        inertia = me.inertia(frame, 0, 0, mass * length ** 2 / 12)
        bodies.append(me.RigidBody(name, point, frame, mass, (inertia, point)))
    loads = [(G1, -m1 * g * N.y), (G2, -m2 * g * N.y), (G3, -m3 * g * N.y),
             (crank, (T - k * u1) * N.z)]
    kane = me.KanesMethod(N, q_ind=[q1], u_ind=[u1], kd_eqs=kinematic,
                          q_dependent=[q2, q3], configuration_constraints=f_c,
                          u_dependent=[u2, u3], velocity_constraints=f_v)
    kane.kanes_equations(bodies, loads)
    symbols = {"l0": l0, "l1": l1, "l2": l2, "l3": l3, "m1": m1, "m2": m2, "m3": m3, "g": g, "k": k}
    return Model(kane, parameters={symbols[k_]: v for k_, v in PARAMETERS.items()}, inputs=[T],
                 name="crank_rocker", description="four-bar linkage (crank-rocker) with a motor torque")


def operating_point(rng=None, parameters=None, crank_angle=None):
    """Consistent, non-equilibrium (q, u, r, p, t): random crank angle and
    rate, coupler and rocker from the loop (elbow up), nonzero torque."""
    rng = np.random.default_rng(rng)
    par = dict(PARAMETERS, **(parameters or {}))
    l0, l1, l2, l3 = par["l0"], par["l1"], par["l2"], par["l3"]
    q1 = float(rng.uniform(-math.pi, math.pi)) if crank_angle is None else float(crank_angle)
    ax, ay = l1 * math.cos(q1), l1 * math.sin(q1)
    # B: intersection of the circles |B - A| = l2 and |B - D| = l3, above the line AD
    dx, dy = l0 - ax, -ay
    d = math.hypot(dx, dy)
    along = (l2 ** 2 - l3 ** 2 + d ** 2) / (2 * d)
    height = math.sqrt(l2 ** 2 - along ** 2)
    bx = ax + along * dx / d - height * dy / d
    by = ay + along * dy / d + height * dx / d
    q2 = math.atan2(by - ay, bx - ax)
    q3 = math.atan2(by, bx - l0)
    u1 = float(rng.uniform(-3, 3))
    # l2 u2 (-sin q2, cos q2) - l3 u3 (-sin q3, cos q3) = -l1 u1 (-sin q1, cos q1)
    M = np.array([[-l2 * math.sin(q2), l3 * math.sin(q3)], [l2 * math.cos(q2), -l3 * math.cos(q3)]])
    rhs = -l1 * u1 * np.array([-math.sin(q1), math.cos(q1)])
    u2, u3 = np.linalg.solve(M, rhs)
    r = [float(rng.uniform(-1, 1))]
    return (np.array([q1, q2, q3]), np.array([u1, u2, u3]), np.array(r),
            np.array(list(par.values())), 0.0)
