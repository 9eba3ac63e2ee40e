"""Peterson's rolling disk (as codegen/models/disk.py: yaw q1, lean q2, spin
q3, centre at (q4, q5, q6), n_z down along gravity; m = r = g = 1) with the
coordinate rates as speeds. One holonomic constraint r cos(q2) + q6 = 0 (the
disk touches the ground; q6 dependent), two nonholonomic ones (the contact
point does not slip along n_x, n_y; with the time derivative of the
holonomic one, the contact point is at rest; q4', q5', q6' dependent).

Lagrange: L = T + m g q6 (gravity through the potential energy), the
nonholonomic constraints in q'. Kane: speeds u_i = q_i', the same constraints.
Upright steady rolling at forward speed v = -r q3': eigenvalues
+/- 2 sqrt(1 - 3 v^2)/sqrt(5) and six zeros (Peterson's thesis chapter).
"""

import math

import sympy as sm
import sympy.physics.mechanics as me

from codegen import Model

PARAMETERS = {"m": 1.0, "r": 1.0, "g": 1.0}


def _disk():
    q = me.dynamicsymbols("q1:7")
    m, r, g = sm.symbols("m r g")
    N = me.ReferenceFrame("N")
    A = N.orientnew("A", "Axis", [q[0], N.z])   # yaw
    B = A.orientnew("B", "Axis", [q[1], A.x])   # lean
    C = B.orientnew("C", "Axis", [q[2], B.y])   # spin
    origin = me.Point("N*")
    origin.set_vel(N, 0)
    centre = origin.locatenew("C*", q[3] * N.x + q[4] * N.y + q[5] * N.z)
    centre.set_vel(N, q[3].diff() * N.x + q[4].diff() * N.y + q[5].diff() * N.z)
    contact = centre.locatenew("P*", r * B.z)
    contact.v2pt_theory(centre, N, C)
    inertia = me.inertia(C, m * r**2 / 4, m * r**2 / 2, m * r**2 / 4)
    disk = me.RigidBody("disk", centre, C, m, (inertia, centre))
    f_c = [r * sm.cos(q[1]) + q[5]]
    rolling = [contact.vel(N).dot(N.x), contact.vel(N).dot(N.y)]
    parameters = dict(zip((m, r, g), PARAMETERS.values()))
    return N, q, disk, f_c, rolling, parameters, (m, g)


def make_lagrange():
    N, q, disk, f_c, rolling, parameters, (m, g) = _disk()
    disk.potential_energy = -m * g * q[5]
    lagrange = me.LagrangesMethod(me.Lagrangian(N, disk), q, bodies=[disk], frame=N,
                                  hol_coneqs=f_c, nonhol_coneqs=rolling)
    lagrange.form_lagranges_equations()
    return Model(lagrange, parameters=parameters, name="lagrange_disk")


def make_kane():
    N, q, disk, f_c, rolling, parameters, (m, g) = _disk()
    u = me.dynamicsymbols("u1:7")
    t = me.dynamicsymbols._t
    kane = me.KanesMethod(
        N, q_ind=q[:5], u_ind=u[:3], kd_eqs=[qi.diff(t) - ui for qi, ui in zip(q, u)],
        q_dependent=q[5:], configuration_constraints=f_c,
        u_dependent=u[3:], velocity_constraints=[f_c[0].diff(t)] + rolling)
    kane.kanes_equations([disk], [(disk.masscenter, m * g * N.z)])
    return Model(kane, parameters=parameters, name="kane_disk")


def upright(v):
    """(q, u): upright, rolling along n_x at speed v (m = r = g = 1)."""
    return [0.0, 0.0, 0.0, 0.0, 0.0, -1.0], [0.0, 0.0, -v, v, 0.0, 0.0]


def upright_eigenvalues(v):
    root = 2 * complex(1 - 3 * v * v) ** 0.5 / math.sqrt(5)
    return [root, -root] + [0j] * 6


# (q, u, r) in the order q1..q6 (q6 and q4', q5', q6' completed): leaned, turning, not steady
POINTS = [([0.3, 0.25, 1.1, 0.2, -0.4, 0.0], [0.4, -0.3, 2.2, 0.0, 0.0, 0.0], []),
          ([-1.2, -0.5, 0.4, 1.0, 0.3, 0.0], [-0.7, 0.6, -1.5, 0.0, 0.0, 0.0], [])]

# the Kane form's speed of each coordinate of the Lagrange form (in its order)
KANE_SPEEDS = ["u1", "u2", "u3", "u4", "u5", "u6"]
