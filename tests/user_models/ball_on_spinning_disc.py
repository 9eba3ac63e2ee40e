"""A ball rolling on a spinning disc, with the constraints of opty's gallery
example (csu-hmc/opty, examples-gallery/advanced/plot_ball_rolling_on_spinning_disc.py),
written here in our own words as a user would hand it to codegen. codegen must
refuse it, and at once: its velocity constraints are not the time derivative
of its configuration constraints.

The disc D turns about the vertical N.z at a prescribed rate that starts from
rest,

    disc_rate(t)  = Omega (1 - exp(-alpha t)),
    disc_angle(t) = Omega t + Omega (exp(-alpha t) - 1) / alpha

(explicit time: opty needs a stand-in function T(t) for it; codegen takes t).
A uniform ball B (mass m_ball, radius r, central inertia 2/5 m_ball r^2 about
every axis) rests on the disc; an observer particle (mass m_observer) is fixed
on the ball's surface at r B.x from its centre.

Coordinates: the ball's orientation relative to the disc as body-fixed 1-2-3
angles (a1, a2, a3), and the contact point's position on the disc,
x D.x + y D.y. Speeds: the ball's angular velocity relative to the disc along
the ball's own axes (w1, w2, w3), and the contact point's velocity relative to
the disc (vx, vy). Kinematic equations, in opty's implicit form: vx = x',
vy = y', and the ball's angular velocity in N from the angle rates equal to
the one from the speeds, component by component along N.x, N.y, N.z (through
the disc's angle: long expressions). Loads: gravity g on the ball and the
observer, and torques T1, T2, T3 about the ball's axes (the inputs). As in
opty, auxiliary speeds at the ball's centre bring the contact force
(R_x, R_y, R_z) into evidence; codegen sets them to zero.

The constraints, as opty writes them:

    f_c = [x - r a2,  y + r a1]
    f_v = [vx - r w2,  vy + r w1]

Both hold for a ball that turns about one of the disc's horizontal axes. In
general f_v is not d f_c/dt: with the 1-2-3 kinematics a2' = w1 sin a3 +
w2 cos a3 and a1' = (w1 cos a3 - w2 sin a3) / cos a2, so

    d f_c/dt = [vx - r (w1 sin a3 + w2 cos a3),  vy + r (w1 cos a3 - w2 sin a3) / cos a2],

which no combination of the rows of f_v gives away from a2 = a3 = 0. The
linearization would be wrong (C_1, C_2 and the acceleration constraints rest
on f_v holding d f_c/dt), so Model refuses it, naming both rows and the speeds
w1, w2, vx, vy they involve (not w3).

(A ball rolling without slip has no configuration constraint: rolling is
nonholonomic. The contact point moves on the disc as vx = r w.D.y,
vy = -r w.D.x, with w the ball's angular velocity relative to the disc, and x,
y stay independent coordinates.)

The hardening issue, item 3: the refusal used to expand d f_c/dt with q' replaced by the
kinematic equations' solution, pages of trigonometry; it was still running
after 23 minutes. It now comes within a second of Model(...) (the
KanesMethod's own kanes_equations takes SymPy about ten).
"""

import sympy as sm
import sympy.physics.mechanics as me

from codegen import Model

PARAMETERS = {"m_ball": 5.0, "m_observer": 1.0, "g": 9.81, "r": 1.0, "Omega": 10.0, "alpha": 0.5}


def make_kane():
    """``(kane, parameters)``: the KanesMethod after kanes_equations, and the
    parameters with default values (opty's)."""
    t = me.dynamicsymbols._t
    a1, a2, a3 = ball_angles = me.dynamicsymbols("a1 a2 a3")
    w1, w2, w3 = ball_rates = me.dynamicsymbols("w1 w2 w3")
    x, y, vx, vy = me.dynamicsymbols("x y vx vy")
    torques = me.dynamicsymbols("T1 T2 T3")
    auxiliary = me.dynamicsymbols("aux_x aux_y aux_z")
    contact_force = me.dynamicsymbols("R_x R_y R_z")
    m_ball, m_observer, g, r, Omega, alpha = sm.symbols("m_ball m_observer g r Omega alpha")

    ground = me.ReferenceFrame("N")
    disc = me.ReferenceFrame("D")
    ball = me.ReferenceFrame("B")
    origin = me.Point("O")
    origin.set_vel(ground, 0)

    disc_rate = Omega * (1 - sm.exp(-alpha * t))
    disc_angle = Omega * t + Omega * (sm.exp(-alpha * t) - 1) / alpha     # integral of disc_rate
    disc.orient_axis(ground, disc_angle, ground.z)
    disc.set_ang_vel(ground, disc_rate * ground.z)

    ball.orient_body_fixed(disc, (a1, a2, a3), "123")
    omega_from_angle_rates = ball.ang_vel_in(ground)
    ball.set_ang_vel(disc, w1 * ball.x + w2 * ball.y + w3 * ball.z)
    omega_from_speeds = ball.ang_vel_in(ground)

    contact = me.Point("contact")
    contact.set_pos(origin, x * disc.x + y * disc.y)
    contact.set_vel(disc, vx * disc.x + vy * disc.y)
    centre = me.Point("centre")
    centre.set_pos(contact, r * ground.z)
    # the centre's velocity from its position, plus the auxiliary speeds
    centre.set_vel(ground, centre.pos_from(origin).diff(t, ground)
                   + auxiliary[0] * ground.x + auxiliary[1] * ground.y + auxiliary[2] * ground.z)
    observer_point = me.Point("observer")
    observer_point.set_pos(centre, r * ball.x)
    observer_point.v2pt_theory(centre, ground, ball)

    central_inertia = sm.Rational(2, 5) * m_ball * r ** 2
    ball_body = me.RigidBody("ball", centre, ball, m_ball,
                             (me.inertia(ball, central_inertia, central_inertia, central_inertia), centre))
    observer = me.Particle("observer", observer_point, m_observer)
    loads = [(centre, -m_ball * g * ground.z + contact_force[0] * ground.x
              + contact_force[1] * ground.y + contact_force[2] * ground.z),
             (observer_point, -m_observer * g * ground.z),
             (ball, torques[0] * ball.x + torques[1] * ball.y + torques[2] * ball.z)]

    angular_velocity_mismatch = omega_from_angle_rates - omega_from_speeds
    kinematic = [vx - x.diff(t), vy - y.diff(t),
                 *(angular_velocity_mismatch.dot(axis) for axis in (ground.x, ground.y, ground.z))]
    configuration_constraints = [x - r * a2, y + r * a1]       # opty's: right for one axis only
    velocity_constraints = [vx - r * w2, vy + r * w1]          # opty's: not d/dt of the above

    kane = me.KanesMethod(ground, q_ind=list(ball_angles), q_dependent=[x, y],
                          u_ind=list(ball_rates), u_dependent=[vx, vy], u_auxiliary=auxiliary,
                          kd_eqs=kinematic, configuration_constraints=configuration_constraints,
                          velocity_constraints=velocity_constraints)
    kane.kanes_equations([ball_body, observer], loads)
    values = {"m_ball": m_ball, "m_observer": m_observer, "g": g, "r": r, "Omega": Omega,
              "alpha": alpha}
    return kane, {values[name]: value for name, value in PARAMETERS.items()}


def make_model():
    """Refused by Model (see the module docstring)."""
    kane, parameters = make_kane()
    return Model(kane, parameters, name="ball_on_spinning_disc",
                 description="ball rolling on a spinning disc, constraints as in opty's example")
