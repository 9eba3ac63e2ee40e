"""SymPy ``test_kane.py::test_implicit_kinematics``: a free rigid body whose
attitude is a unit quaternion, with implicit kinematic equations.

The body B (mass M_B, central inertia J_B_xx, J_B_yy, J_B_zz and the product
J_B_xz) is oriented in the inertial frame NED by the quaternion
(lambda_0, lambda_1, lambda_2, lambda_3); its mass centre is at
B_x B.x + B_y B.y + B_z B.z from the origin (position measured along the
body's own axes). Speeds: the mass centre's velocity along B.x, B.y, B.z
(U, V, W) and the body's angular velocity along B.x, B.y, B.z (P, Q, R).

The quaternion has one coordinate too many: the configuration constraint is
its unit norm, lambda . lambda - 1 = 0, with lambda_0 dependent. There are
no velocity constraints: the seventh kinematic equation,
lambda . lambda' = 0, keeps the norm constant by itself (d f_c/dt =
2 lambda . lambda' vanishes on every motion), and the kinematic equations
are handed to KanesMethod in implicit form (``explicit_kinematics=False``),
since solving them for q' symbolically is what SymPy's test shows to be
expensive.

Loads: gravity g along NED.z, a torque T_z about B.z and a force F_z along
B.z at the mass centre (the inputs).

As in SymPy's test, except that the model is written out here in our words,
the parameters get default values (a body with a product of inertia, so that
the rotational equations couple), and the points below are ours.

Before the hardening issue's fix the model was refused: with no velocity constraints
the check of d f_c/dt compared the rounding-level value of 2 lambda .
lambda' (about 1e-17) with 1e-7 times itself.
"""

import math

from sympy import Matrix, symbols
from sympy.physics.mechanics import (KanesMethod, Point, ReferenceFrame, RigidBody,
                                     dynamicsymbols, inertia)

from codegen import Model

PARAMETERS = {"M_B": 2.3, "g": 9.81, "J_B_xx": 0.21, "J_B_yy": 0.34, "J_B_zz": 0.42,
              "J_B_xz": 0.05}


def make_kane(keep_norm=True):
    """``keep_norm=False`` (not SymPy's; for tests/test_model_checks.py): the
    seventh kinematic equation is lambda_0' = 0 instead of lambda . lambda' = 0,
    so nothing keeps the norm and, with no velocity constraints, the model
    must be refused."""
    inertial = ReferenceFrame("NED")
    origin = Point("NED_o")
    origin.set_vel(inertial, 0)

    quaternion = dynamicsymbols("lambda_0:4", real=True)
    body_frame = inertial.orientnew("B", "Quaternion", quaternion)
    position = dynamicsymbols("B_x:z")                  # along the body's axes
    mass_centre = origin.locatenew("B_cm", position[0] * body_frame.x + position[1] * body_frame.y
                                   + position[2] * body_frame.z)
    body_axes = (body_frame.x, body_frame.y, body_frame.z)

    # angular velocity: the quaternion's (in terms of lambda') set equal to P, Q, R
    P, Q, R = angular_rates = dynamicsymbols("P Q R")
    omega_of_quaternion_rates = body_frame.ang_vel_in(inertial)
    body_frame.set_ang_vel(inertial, P * body_frame.x + Q * body_frame.y + R * body_frame.z)
    omega_mismatch = body_frame.ang_vel_in(inertial) - omega_of_quaternion_rates
    # mass-centre velocity: the position's time derivative set equal to U, V, W
    U, V, W = velocity_components = dynamicsymbols("U V W")
    velocity_of_position_rates = mass_centre.vel(inertial)
    mass_centre.set_vel(inertial, U * body_frame.x + V * body_frame.y + W * body_frame.z)
    velocity_mismatch = mass_centre.vel(inertial) - velocity_of_position_rates

    lambda_vector = Matrix(quaternion)
    unit_norm = (lambda_vector.T * lambda_vector)[0] - 1
    norm_kept = (lambda_vector.T * lambda_vector.diff())[0]      # lambda . lambda' = 0
    seventh = norm_kept if keep_norm else quaternion[0].diff()
    kinematic = ([omega_mismatch.dot(e) for e in body_axes]
                 + [velocity_mismatch.dot(e) for e in body_axes] + [seventh])

    kane = KanesMethod(inertial, q_ind=list(quaternion[1:]) + list(position),
                       u_ind=list(velocity_components) + list(angular_rates),
                       q_dependent=[quaternion[0]], kd_eqs=kinematic,
                       configuration_constraints=[unit_norm], velocity_constraints=[],
                       u_dependent=[], explicit_kinematics=False)

    mass, gravity = symbols("M_B g")
    J_xx, J_yy, J_zz, J_xz = symbols("J_B_xx J_B_yy J_B_zz J_B_xz")
    # SymPy's test writes the product of inertia with a minus sign: I_xz = -J_B_xz
    central_inertia = inertia(body_frame, J_xx, J_yy, J_zz, 0, 0, -J_xz)
    body = RigidBody("RB", mass_centre, body_frame, mass, (central_inertia, mass_centre))
    torque_z, force_z = dynamicsymbols("T_z F_z")
    loads = [(mass_centre, mass * gravity * inertial.z),
             (body_frame, torque_z * body_frame.z),
             (mass_centre, force_z * body_frame.z)]
    kane.kanes_equations([body], loads)
    values = {"M_B": mass, "g": gravity, "J_B_xx": J_xx, "J_B_yy": J_yy, "J_B_zz": J_zz,
              "J_B_xz": J_xz}
    return kane, {values[name]: value for name, value in PARAMETERS.items()}, [torque_z, force_z]


def make_model():
    return Model(*make_kane(), name="implicit_kinematics",
                 description="SymPy test_kane implicit kinematics: quaternion attitude")


def _unit_quaternion(angle, axis):
    """(lambda_1, lambda_2, lambda_3, lambda_0) of a rotation by ``angle`` about ``axis``."""
    norm = math.sqrt(sum(a * a for a in axis))
    s = math.sin(angle / 2) / norm
    return [s * axis[0], s * axis[1], s * axis[2], math.cos(angle / 2)]


# (q, u, r) in the KanesMethod's order q = (lambda_1, lambda_2, lambda_3, B_x, B_y, B_z,
# lambda_0), u = (U, V, W, P, Q, R), r = (T_z, F_z) as declared; lambda_0 is completed
# from the unit norm. A tumbling, translating body away from any equilibrium, and one
# turned by more than a half turn (lambda_0 < 0 on the other branch of the norm).
_ATTITUDE_1 = _unit_quaternion(0.9, (0.3, -0.5, 0.8))
_ATTITUDE_2 = _unit_quaternion(3.8, (-0.6, 0.2, 0.4))
POINTS = [(_ATTITUDE_1[:3] + [0.4, -1.2, 0.7] + _ATTITUDE_1[3:],
           [0.8, -0.3, 1.1, 0.6, -1.4, 0.9], [0.35, -1.7]),
          (_ATTITUDE_2[:3] + [-2.0, 0.3, 1.5] + [_ATTITUDE_2[3] * 1.05],
           [-0.4, 1.3, 0.2, -0.7, 0.5, 1.8], [-0.6, 2.4])]


def closed_form(point):
    return None
