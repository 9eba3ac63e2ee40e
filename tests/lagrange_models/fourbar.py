"""Closed-loop four-bar (crank-rocker) with a motor torque T and damping k on
the crank, as tests/user_models/fourbar.py: crank, coupler, rocker of lengths
l1, l2, l3 at absolute angles q1, q2, q3, ground pivots l0 apart, gravity
along -y, two loop-closure constraints; q2, q3 dependent.

Lagrange: gravity through the bodies' potential energies (dL/dq), the motor
torque in the force list. Kane: speeds u_i = q_i', gravity as forces.
"""

import sympy as sm
import sympy.physics.mechanics as me

from codegen import Model

PARAMETERS = {"l0": 1.0, "l1": 0.3, "l2": 1.0, "l3": 0.8, "m1": 0.5, "m2": 1.1, "m3": 0.9,
              "g": 9.81, "k": 0.05}


def _linkage(speeds):
    """Frames, points, bodies and the loop residual; angular velocities from
    ``speeds`` (None: SymPy's, in q')."""
    q = me.dynamicsymbols("q1:4")
    symbols = sm.symbols("l0 l1 l2 l3 m1 m2 m3 g k")
    l0, l1, l2, l3, m1, m2, m3, g, k = symbols
    N = me.ReferenceFrame("N")
    frames = [N.orientnew(label, "Axis", [qi, N.z]) for label, qi in zip(("crank", "coupler", "rocker"), q)]
    if speeds is not None:
        for frame, speed in zip(frames, speeds):
            frame.set_ang_vel(N, speed * N.z)
    crank, coupler, rocker = frames
    O = me.Point("O")
    O.set_vel(N, 0)
    D = O.locatenew("D", l0 * N.x)
    D.set_vel(N, 0)
    A = O.locatenew("A", l1 * crank.x)
    A.v2pt_theory(O, N, crank)
    B = A.locatenew("B", l2 * coupler.x)
    centres = [O.locatenew("G1", l1 / 2 * crank.x), A.locatenew("G2", l2 / 2 * coupler.x),
               D.locatenew("G3", l3 / 2 * rocker.x)]
    for centre, base, frame in zip(centres, (O, A, D), frames):
        centre.v2pt_theory(base, N, frame)
    bodies = []
    for label, frame, centre, mass, length in zip(("crank", "coupler", "rocker"), frames, centres,
                                                   (m1, m2, m3), (l1, l2, l3)):
        inertia = me.inertia(frame, 0, 0, mass * length**2 / 12)
        bodies.append(me.RigidBody(label, centre, frame, mass, (inertia, centre)))
    loop = B.pos_from(O) - (l0 * N.x + l3 * rocker.x)
    f_c = [loop.dot(N.x), loop.dot(N.y)]
    parameters = dict(zip(symbols, PARAMETERS.values()))
    return N, O, q, frames, bodies, f_c, parameters


def make_lagrange():
    T = me.dynamicsymbols("T")
    N, O, q, frames, bodies, f_c, parameters = _linkage(None)
    g, k = sm.symbols("g k")
    for body in bodies:    # m g y, y above the crank pivot O
        body.potential_energy = body.mass * g * body.masscenter.pos_from(O).dot(N.y)
    lagrange = me.LagrangesMethod(me.Lagrangian(N, *bodies), q,
                                  forcelist=[(frames[0], (T - k * q[0].diff()) * N.z)],
                                  bodies=bodies, frame=N, hol_coneqs=f_c)
    lagrange.form_lagranges_equations()
    return Model(lagrange, parameters=parameters, inputs=[T], name="lagrange_fourbar")


def make_kane():
    T = me.dynamicsymbols("T")
    u = me.dynamicsymbols("u1:4")
    N, O, q, frames, bodies, f_c, parameters = _linkage(u)
    g, k = sm.symbols("g k")
    t = me.dynamicsymbols._t
    qd_to_u = dict(zip([qi.diff(t) for qi in q], u))
    f_v = [fc.diff(t).xreplace(qd_to_u) for fc in f_c]
    loads = [(body.masscenter, -body.mass * g * N.y) for body in bodies]
    loads.append((frames[0], (T - k * u[0]) * N.z))
    kane = me.KanesMethod(N, q_ind=q[:1], u_ind=u[:1], kd_eqs=[qi.diff(t) - ui for qi, ui in zip(q, u)],
                          q_dependent=q[1:], configuration_constraints=f_c,
                          u_dependent=u[1:], velocity_constraints=f_v)
    kane.kanes_equations(bodies, loads)
    return Model(kane, parameters=parameters, inputs=[T], name="kane_fourbar")


# (q, u, r): crank angle and rate given; coupler, rocker near the elbow-up
# branch (completed by Newton), their rates from the constraints
POINTS = [([0.3, 0.4, 1.6], [1.2, 0.0, 0.0], [0.2]), ([2.4, 0.5, 1.9], [-2.0, 0.0, 0.0], [-0.7]),
          ([-1.5, 0.1, 1.2], [0.5, 0.0, 0.0], [0.0])]

# the Kane form's speed of each coordinate of the Lagrange form (in its order)
KANE_SPEEDS = ["u1", "u2", "u3"]
