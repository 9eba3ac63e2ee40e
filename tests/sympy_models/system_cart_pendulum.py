"""SymPy ``test_system_class.py::TestSystemExamples::test_cart_pendulum_kanes``:
a pendulum (bob on a pin joint) on a cart (prismatic joint) with a torsional
spring k qp and a force F, built with ``System`` and joints, then the
holonomic constraint that the bob stays above the rail origin
(bob.x = 0: qc = -l sin(qp)) with qc and uc dependent. ``System`` forms the
velocity constraint (the time derivative) itself and the KanesMethod; its
kinematic equations are the joints' u - q' = 0 in joint order, so M_qq is a
signed permutation. Unchanged; default parameter values added.
"""

from sympy import symbols, sympify
from sympy.physics.mechanics import (Particle, PinJoint, PrismaticJoint, ReferenceFrame, RigidBody,
                                     System, TorqueActuator, dynamicsymbols)

from codegen import Model

PARAMETERS = {"g": 9.81, "l": 0.9, "mc": 1.5, "mp": 0.6, "k": 0.8}


def make_kane():
    g, l, mc, mp, k = symbols('g l mc mp k')
    F, qp, qc, up, uc = dynamicsymbols('F qp qc up uc')
    rail = RigidBody('rail')
    cart = RigidBody('cart', mass=mc)
    bob = Particle('bob', mass=mp)
    bob_frame = ReferenceFrame('bob_frame')
    system = System.from_newtonian(rail)
    slider = PrismaticJoint('slider', rail, cart, qc, uc, joint_axis=rail.x)
    pin = PinJoint('pin', cart, bob, qp, up, joint_axis=cart.z,
                   child_interframe=bob_frame, child_point=l * bob_frame.y)
    system.add_joints(slider, pin)
    system.apply_uniform_gravity(-g * system.y)
    system.add_loads((cart.masscenter, F * rail.x))
    system.add_actuators(TorqueActuator(k * qp, cart.z, bob_frame, cart))
    system.add_holonomic_constraints(
        sympify(bob.masscenter.pos_from(rail.masscenter).dot(system.x)))
    system.q_ind, system.q_dep = qp, qc
    system.u_ind, system.u_dep = up, uc
    system.validate_system()
    system.form_eoms()
    symbols_ = {"g": g, "l": l, "mc": mc, "mp": mp, "k": k}
    return system.eom_method, {symbols_[n]: v for n, v in PARAMETERS.items()}, [F]


def make_model():
    return Model(*make_kane(), name="system_cart_pendulum",
                 description="SymPy test_system_class cart pendulum, holonomic constraint")


# q = (qp, qc), u = (up, uc); qc and uc completed
POINTS = [([0.4, 0.0], [0.9, 0.0], [1.3]), ([-1.1, 0.0], [-0.3, 0.0], [-0.5])]
