"""Planar parallelogram linkage with three cranks: a redundant constraint.

Ground pivots O_k = ((k - 1) d, 0), k = 1, 2, 3; three uniform cranks of
length L and mass m_c at absolute angles q1, q2, q3; a uniform coupler bar of
mass m_b and length 2 d pinned to the tip A_1 of crank 1 at absolute angle
q_coupler (qc below); gravity g along -y; a motor torque T on crank 1. The
tips of cranks 2 and 3 are pinned to the coupler at distances d and 2 d from A_1: four
configuration constraints in four coordinates,

    L cos q2 + d         - (L cos q1 + d cos qc)   = 0
    L sin q2             - (L sin q1 + d sin qc)   = 0
    L cos q3 + 2 d       - (L cos q1 + 2 d cos qc) = 0
    L sin q3             - (L sin q1 + 2 d sin qc) = 0

of rank 3 on the parallelogram branch (q1 = q2 = q3, qc = 0): the third
crank repeats what the second already enforces, so the linkage keeps one
degree of freedom (SymPy's KanesMethod refuses it: four dependent
coordinates would leave none independent). The constraints are given to
``codegen.Model`` beside a KanesMethod of the unconstrained system (the
four bodies free to turn about their pins), with the velocity constraints
formed by Model as d f_c/dt.

Closed form on the branch (all cranks at phi, the coupler translating):
kinetic energy (m_c + m_b) L^2 phi'^2 / 2, potential (3 m_c / 2 + m_b) g L
sin phi, so

    (m_c + m_b) L^2 phi'' = -(3 m_c / 2 + m_b) g L cos phi + T

with the equilibrium hanging down at phi = -pi/2 and the frequency
omega^2 = (3 m_c / 2 + m_b) g / ((m_c + m_b) L) (:func:`closed_form`).
``cranks=2`` gives the ordinary (non-redundant) parallelogram four-bar,
which KanesMethod accepts too (``in_kane=True``).
"""

import sympy as sm
import sympy.physics.mechanics as me

from codegen import Model

PARAMETERS = {"d": 0.5, "L": 0.4, "m_c": 0.3, "m_b": 1.2, "g": 9.81}


def equations(cranks=3, in_kane=False):
    """(kane, f_c, symbols): the KanesMethod (formed) of ``cranks`` cranks and
    the coupler, coordinates [crank angles..., q_coupler] and speeds their
    rates; its 2 (cranks - 1) configuration constraints; a dict name ->
    symbol of the parameters. ``in_kane``: give the constraints to the
    KanesMethod instead (the crank 2 angle and the coupler angle dependent;
    only without redundancy, cranks=2); otherwise the KanesMethod is that of
    the unconstrained system."""
    t = me.dynamicsymbols._t
    q = list(me.dynamicsymbols(f"q1:{cranks + 1}")) + [me.dynamicsymbols("q_coupler")]
    u = list(me.dynamicsymbols(f"u1:{cranks + 1}")) + [me.dynamicsymbols("u_coupler")]
    T = me.dynamicsymbols("T")
    d, L, m_c, m_b, g = sm.symbols("d L m_c m_b g")
    N = me.ReferenceFrame("N")
    frames = [N.orientnew(f"F{i + 1}", "Axis", [q[i], N.z]) for i in range(cranks + 1)]
    for frame, speed in zip(frames, u):
        frame.set_ang_vel(N, speed * N.z)
    O1 = me.Point("O1")
    pivots = [O1] + [O1.locatenew(f"O{k + 1}", k * d * N.x) for k in range(1, cranks)]
    for O in pivots:
        O.set_vel(N, 0)
    bodies, loads = [], []
    for k in range(cranks):
        G = pivots[k].locatenew(f"G{k + 1}", L / 2 * frames[k].x)
        G.v2pt_theory(pivots[k], N, frames[k])
        inertia = me.inertia(frames[k], 0, 0, m_c * L ** 2 / 12)
        bodies.append(me.RigidBody(f"crank{k + 1}", G, frames[k], m_c, (inertia, G)))
        loads.append((G, -m_c * g * N.y))
    coupler = frames[cranks]
    A1 = O1.locatenew("A1", L * frames[0].x)
    A1.v2pt_theory(O1, N, frames[0])
    Gb = A1.locatenew("Gb", (cranks - 1) * d / 2 * coupler.x)
    Gb.v2pt_theory(A1, N, coupler)
    inertia = me.inertia(coupler, 0, 0, m_b * ((cranks - 1) * d) ** 2 / 12)
    bodies.append(me.RigidBody("coupler", Gb, coupler, m_b, (inertia, Gb)))
    loads += [(Gb, -m_b * g * N.y), (frames[0], T * N.z)]
    f_c = []
    for k in range(1, cranks):   # tip of crank k + 1 on the coupler, k d from A1
        gap = pivots[k].pos_from(O1) + L * frames[k].x - (A1.pos_from(O1) + k * d * coupler.x)
        f_c += [gap.dot(N.x), gap.dot(N.y)]
    kinematics = [qi.diff(t) - ui for qi, ui in zip(q, u)]
    if in_kane:
        rates = {qi.diff(t): ui for qi, ui in zip(q, u)}
        kane = me.KanesMethod(N, q_ind=[q[0]], u_ind=[u[0]], kd_eqs=kinematics,
                              q_dependent=q[1:], configuration_constraints=f_c, u_dependent=u[1:],
                              velocity_constraints=[f.diff(t).xreplace(rates) for f in f_c])
    else:
        kane = me.KanesMethod(N, q_ind=q, u_ind=u, kd_eqs=kinematics)
    kane.kanes_equations(bodies, loads)
    symbols = {"d": d, "L": L, "m_c": m_c, "m_b": m_b, "g": g}
    return kane, f_c, symbols


def make_model(cranks=3, in_kane=False, **options):
    """The Model: constraints given to Model beside the unconstrained
    KanesMethod, or (``in_kane``) to the KanesMethod; ``options`` go on to
    Model (e.g. dependent_q, velocity_constraints)."""
    kane, f_c, symbols = equations(cranks, in_kane)
    if not in_kane:
        options.setdefault("configuration_constraints", f_c)
    return Model(kane, parameters={symbols[k]: v for k, v in PARAMETERS.items()},
                 name=options.pop("name", "redundant_parallelogram"),
                 description=f"parallelogram linkage with {cranks} cranks", **options)


def branch_point(phi, rate=0.0, cranks=3):
    """(q, u) on the parallelogram branch: every crank at phi, coupler level."""
    return [phi] * cranks + [0.0], [rate] * cranks + [0.0]


def closed_form(cranks=3, parameters=None):
    """(I, c): the branch's inertia I = (k m_c / 3 + m_b) L^2 about phi and
    the gravity coefficient c = (k m_c / 2 + m_b) g L of V = c sin phi (k
    cranks): I phi'' = -c cos phi + T."""
    p = dict(PARAMETERS, **(parameters or {}))
    L, m_c, m_b, g = p["L"], p["m_c"], p["m_b"], p["g"]
    return (cranks * m_c / 3 + m_b) * L ** 2, (cranks * m_c / 2 + m_b) * g * L
