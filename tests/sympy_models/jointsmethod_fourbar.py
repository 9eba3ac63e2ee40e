"""SymPy ``test_jointsmethod.py::test_four_bar_linkage_with_manual_constraints``:
four links joined by three pin joints, the loop closed by two configuration
constraints (q2, q3 dependent) and their time derivatives, no loads (so the
KanesMethod has no load list and the pipeline uses its reduced equations).
Ported from the deprecated ``Body``/``JointsMethod`` to ``RigidBody`` and
``System`` (which gives the same kinematic equations, bodies and frame);
SymPy's numeric point (q, u satisfying the constraints) is the first point.
"""

from sympy import Matrix, solve, symbols
from sympy.physics.mechanics import (PinJoint, RigidBody, System, KanesMethod, dynamicsymbols,
                                     inertia)

from codegen import Model

PARAMETERS = {"l1": 0.13, "l2": 0.24, "l3": 0.21, "l4": 0.34, "rho": 997.0}


def make_kane():
    q1, q2, q3, u1, u2, u3 = dynamicsymbols('q1:4, u1:4')
    l1, l2, l3, l4, rho = symbols('l1:5, rho')
    link1 = RigidBody('Link1', mass=rho * l1)
    N = link1.frame
    inertias = [inertia(N, 0, 0, rho * l ** 3 / 12) for l in (l1, l2, l3, l4)]
    link1.inertia = (inertias[0], link1.masscenter)
    link2 = RigidBody('Link2', mass=rho * l2)
    link3 = RigidBody('Link3', mass=rho * l3)
    link4 = RigidBody('Link4', mass=rho * l4)
    # central inertias about z, as SymPy's inertia(N, 0, 0, rho l^3/12) of each link
    for link, l in ((link2, l2), (link3, l3), (link4, l4)):
        link.inertia = (inertia(link.frame, 0, 0, rho * l ** 3 / 12), link.masscenter)
    joint1 = PinJoint(
        'J1', link1, link2, coordinates=q1, speeds=u1, joint_axis=link1.z,
        parent_point=l1 / 2 * link1.x, child_point=-l2 / 2 * link2.x)
    joint2 = PinJoint(
        'J2', link2, link3, coordinates=q2, speeds=u2, joint_axis=link2.z,
        parent_point=l2 / 2 * link2.x, child_point=-l3 / 2 * link3.x)
    joint3 = PinJoint(
        'J3', link3, link4, coordinates=q3, speeds=u3, joint_axis=link3.z,
        parent_point=l3 / 2 * link3.x, child_point=-l4 / 2 * link4.x)
    loop = link4.masscenter.pos_from(link1.masscenter) \
        + l1 / 2 * link1.x + l4 / 2 * link4.x
    fh = Matrix([loop.dot(link1.x), loop.dot(link1.y)])
    system = System.from_newtonian(link1)
    system.add_joints(joint1, joint2, joint3)
    t = dynamicsymbols._t
    kdes = system.kdes
    qdots = solve(kdes, [q1.diff(t), q2.diff(t), q3.diff(t)])
    fhd = fh.diff(t).subs(qdots)
    kane = KanesMethod(system.frame, q_ind=[q1], u_ind=[u1],
                       q_dependent=[q2, q3], u_dependent=[u2, u3],
                       kd_eqs=kdes, configuration_constraints=fh,
                       velocity_constraints=fhd, forcelist=[],
                       bodies=[link1, link2, link3, link4])
    kane.kanes_equations()
    symbols_ = {"l1": l1, "l2": l2, "l3": l3, "l4": l4, "rho": rho}
    return kane, {symbols_[n]: v for n, v in PARAMETERS.items()}, []


def make_model():
    return Model(*make_kane(), name="jointsmethod_fourbar",
                 description="SymPy test_jointsmethod four-bar, manual constraints")


# SymPy's point, then another one (dependent values are Newton's start)
POINTS = [([2.1, 0.6655470375077588, 2.527408138024188], [0.2, -0.17963733938852067, 0.1309060540601612], []),
          ([1.8, 0.8, 2.4], [-0.5, 0.0, 0.0], [])]
