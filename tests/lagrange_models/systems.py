"""Models built from joints with ``System`` (and one with the deprecated
``JointsMethod``), each formed with KanesMethod (joint speeds u, with the
joints' kinematic equations u = q') or LagrangesMethod (joint speeds q', as
SymPy's Lagrange examples write them), for tests/test_joints_system.py.

* ``cart_pendulum``: SymPy's test_system_class cart pendulum, a PrismaticJoint
  (cart on a rail) and a PinJoint (bob on the cart) with a torsional spring, a
  force F on the cart and the holonomic constraint that the bob stays above
  the rail origin (qc dependent);
* ``fourbar``: a closed loop of three PinJoints (ground-crank, crank-coupler,
  coupler-rocker, relative angles) whose rocker tip must stay at the second
  ground pivot (two holonomic constraints; q2, q3 dependent), gravity and a
  motor torque T on the crank;
* ``joints_cart_pendulum``: the same cart and pendulum without the constraint,
  with the deprecated JointsMethod and Body.
"""

import warnings

import sympy as sm
import sympy.physics.mechanics as me

from codegen import Model

CART_PENDULUM = {"g": 9.81, "l": 0.9, "mc": 1.5, "mp": 0.6, "k": 0.8}
FOURBAR = {"l0": 1.0, "l1": 0.3, "l2": 1.0, "l3": 0.8, "m1": 0.5, "m2": 1.1, "m3": 0.9, "g": 9.81}


def _speeds(coordinates, method, names):
    """The joints' speeds: new ones for Kane, the coordinate rates for Lagrange."""
    if method is me.KanesMethod:
        return list(me.dynamicsymbols(names))
    return [q.diff() for q in coordinates]


def cart_pendulum(method):
    g, l, mc, mp, k = sm.symbols("g l mc mp k")
    F, qp, qc = me.dynamicsymbols("F qp qc")
    up, uc = _speeds([qp, qc], method, "up uc")
    rail = me.RigidBody("rail")
    cart = me.RigidBody("cart", mass=mc)
    bob = me.Particle("bob", mass=mp)
    bob_frame = me.ReferenceFrame("bob_frame")
    system = me.System.from_newtonian(rail)
    slider = me.PrismaticJoint("slider", rail, cart, qc, uc, joint_axis=rail.x)
    pin = me.PinJoint("pin", cart, bob, qp, up, joint_axis=cart.z,
                      child_interframe=bob_frame, child_point=l * bob_frame.y)
    system.add_joints(slider, pin)
    system.apply_uniform_gravity(-g * system.y)
    system.add_loads((cart.masscenter, F * rail.x))
    system.add_actuators(me.TorqueActuator(k * qp, cart.z, bob_frame, cart))
    system.add_holonomic_constraints(sm.sympify(bob.masscenter.pos_from(rail.masscenter).dot(system.x)))
    system.q_ind, system.q_dep = qp, qc
    system.u_ind, system.u_dep = up, uc
    system.validate_system(method)
    system.form_eoms(method)
    name = "system_cart_pendulum_" + ("kane" if method is me.KanesMethod else "lagrange")
    return Model(system, dict(zip((g, l, mc, mp, k), CART_PENDULUM.values())), inputs=[F], name=name)


def fourbar(method):
    l0, l1, l2, l3, m1, m2, m3, g = symbols = sm.symbols("l0 l1 l2 l3 m1 m2 m3 g")
    T = me.dynamicsymbols("T")
    q = me.dynamicsymbols("q1:4")
    u = _speeds(q, method, "u1:4")
    ground = me.RigidBody("ground")
    links = []
    for label, mass, length in (("crank", m1, l1), ("coupler", m2, l2), ("rocker", m3, l3)):
        link = me.RigidBody(label, mass=mass)
        link.central_inertia = me.inertia(link.frame, 0, 0, mass * length**2 / 12)
        links.append(link)
    crank, coupler, rocker = links
    system = me.System.from_newtonian(ground)
    system.add_joints(
        me.PinJoint("J1", ground, crank, q[0], u[0], child_point=-l1 / 2 * crank.x,
                    joint_axis=ground.z),
        me.PinJoint("J2", crank, coupler, q[1], u[1], parent_point=l1 / 2 * crank.x,
                    child_point=-l2 / 2 * coupler.x, joint_axis=crank.z),
        me.PinJoint("J3", coupler, rocker, q[2], u[2], parent_point=l2 / 2 * coupler.x,
                    child_point=-l3 / 2 * rocker.x, joint_axis=coupler.z))
    tip = rocker.masscenter.locatenew("tip", l3 / 2 * rocker.x)
    loop = tip.pos_from(ground.masscenter) - l0 * ground.x
    system.add_holonomic_constraints(loop.dot(ground.x), loop.dot(ground.y))
    system.apply_uniform_gravity(-g * ground.y)
    system.add_loads(me.Torque(crank, T * ground.z))
    system.q_ind, system.q_dep = q[:1], q[1:]
    system.u_ind, system.u_dep = u[:1], u[1:]
    system.validate_system(method)
    system.form_eoms(method)
    name = "system_fourbar_" + ("kane" if method is me.KanesMethod else "lagrange")
    return Model(system, dict(zip(symbols, FOURBAR.values())), inputs=[T], name=name)


def joints_cart_pendulum(method):
    g, l, mc, mp, k = sm.symbols("g l mc mp k")
    F, qp, qc = me.dynamicsymbols("F qp qc")
    up, uc = _speeds([qp, qc], method, "up uc")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        rail = me.Body("rail")
        cart = me.Body("cart", mass=mc)
        bob = me.Body("bob", mass=mp)
        slider = me.PrismaticJoint("slider", rail, cart, qc, uc, joint_axis=rail.x)
        pin = me.PinJoint("pin", cart, bob, qp, up, joint_axis=cart.z, child_point=l * bob.frame.y)
        cart.apply_force(F * rail.x)
        cart.apply_force(-mc * g * rail.y)
        bob.apply_force(-mp * g * rail.y)
        bob.apply_torque(-k * qp * cart.z, reaction_body=cart)
        joints = me.JointsMethod(rail, slider, pin)
        joints.form_eoms(method)
    name = "joints_cart_pendulum_" + ("kane" if method is me.KanesMethod else "lagrange")
    return Model(joints, dict(zip((g, l, mc, mp, k), CART_PENDULUM.values())), inputs=[F], name=name)
