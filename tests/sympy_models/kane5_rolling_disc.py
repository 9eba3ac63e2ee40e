"""The rolling disc of SymPy's ``test_kane5.py``
(``_create_rolling_disc``, ``test_kane_rolling_disc_kdes_callable``): a disc
rolling without slip on the ground, coordinates q1 (yaw), q2 (lean), q3
(spin), q4, q5 (contact point), speeds u1..u3 (disc angular velocity in the
disc frame) and u4, u5 (contact point velocity, dependent through the two
rolling constraints).

The user solves the kinematic equations with their own ``kd_eqs_solver``
(``simplify(A.LUsolve(b))``): SymPy's default LU solve divides by terms that
vanish upright (q2 = 0, and at q3 = 0), where the simplified solution is
finite. Unchanged from SymPy, except that the parameters get default values
(the ones of SymPy's numeric checks) and ``make_kane(solver="LU")`` gives the
``test_kane_rolling_disc_lu`` variant.
"""

import sympy as sm
from sympy import simplify, symbols
from sympy.physics.mechanics import (KanesMethod, ReferenceFrame, RigidBody, cross,
                                     dynamicsymbols, inertia)

from codegen import Model


def _create_rolling_disc():
    # verbatim from sympy/physics/mechanics/tests/test_kane5.py
    t = dynamicsymbols._t
    q1, q2, q3, q4, q5, u1, u2, u3, u4, u5 = dynamicsymbols('q1:6 u1:6')
    g, r, m = symbols('g r m')
    ground = RigidBody('ground')
    disc = RigidBody('disk', mass=m)
    disc.inertia = (m * r ** 2 / 4 * inertia(disc.frame, 1, 2, 1),
                    disc.masscenter)
    ground.masscenter.set_vel(ground.frame, 0)
    disc.masscenter.set_vel(disc.frame, 0)
    int_frame = ReferenceFrame('int_frame')
    int_frame.orient_body_fixed(ground.frame, (q1, q2, 0), 'zxy')
    disc.frame.orient_axis(int_frame, int_frame.y, q3)
    g_w_d = disc.frame.ang_vel_in(ground.frame)
    disc.frame.set_ang_vel(ground.frame,
                           u1 * disc.x + u2 * disc.y + u3 * disc.z)
    cp = ground.masscenter.locatenew('contact_point',
                                     q4 * ground.x + q5 * ground.y)
    cp.set_vel(ground.frame, u4 * ground.x + u5 * ground.y)
    disc.masscenter.set_pos(cp, r * int_frame.z)
    disc.masscenter.set_vel(ground.frame, cross(
        disc.frame.ang_vel_in(ground.frame), disc.masscenter.pos_from(cp)))
    kdes = [g_w_d.dot(disc.x) - u1, g_w_d.dot(disc.y) - u2,
            g_w_d.dot(disc.z) - u3, q4.diff(t) - u4, q5.diff(t) - u5]
    v0 = cp.vel(ground.frame) + cross(
        disc.frame.ang_vel_in(int_frame), cp.pos_from(disc.masscenter))
    fnh = [v0.dot(ground.x), v0.dot(ground.y)]
    loads = [(disc.masscenter, -disc.mass * g * ground.z)]
    bodies = [disc]
    return {
        'frame': ground.frame,
        'q_ind': [q1, q2, q3, q4, q5],
        'u_ind': [u1, u2, u3],
        'u_dep': [u4, u5],
        'kdes': kdes,
        'fnh': fnh,
        'bodies': bodies,
        'loads': loads,
        'parameters': {g: 9.81, r: 0.25, m: 3.5},
    }


def make_kane(solver="callable"):
    props = _create_rolling_disc()
    if solver == "callable":
        options = dict(kd_eqs_solver=lambda A, b: simplify(A.LUsolve(b)))
    else:
        options = dict(constraint_solver=solver)
    kane = KanesMethod(props['frame'], props['q_ind'], props['u_ind'], props['kdes'],
                       u_dependent=props['u_dep'], velocity_constraints=props['fnh'],
                       bodies=props['bodies'], forcelist=props['loads'],
                       explicit_kinematics=False, **options)
    kane.kanes_equations()
    return kane, props['parameters'], []


def make_model(solver="callable"):
    kane, parameters, inputs = make_kane(solver)
    return Model(kane, parameters=parameters, inputs=inputs, name="kane5_rolling_disc",
                 description="SymPy test_kane5 rolling disc, user kinematic solver")


# (q, u, r) in the KanesMethod's order; u4, u5 are completed from the constraints
UPRIGHT = ([0.0, 0.0, 0.0, 0.0, 0.0], [0.0, -3.0, 0.0, 0.0, 0.0], [])
POINTS = [
    UPRIGHT,                                            # upright, rolling straight on
    ([0.3, 0.1, 1.97, -0.35, 2.27], [-0.2, 1.3, 0.15, 0.0, 0.0], []),    # SymPy's first numeric check
    ([3.97, -0.28, 8.2, -0.35, 2.27], [-0.25, -2.2, 0.62, 0.0, 0.0], []),  # and its second
]
