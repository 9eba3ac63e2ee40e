"""González's N-loop four-bar in natural coordinates, written as a user would
(independently of codegen/models/fourbar.py), for the issue-11 tests.

Geometry (González et al., section 5.1): ground pivots A_i = (i l, 0),
i = 0..N; cranks A_i B_i and couplers B_{i-1} B_i, all uniform rods of
length l and mass m; a spring (k, natural length l0) and a damper (c) on
the diagonal A_{i-1} B_i of each loop; gravity g along
(cos gravity_angle, sin gravity_angle).

Coordinates (natural coordinates): the crank angle ``phi`` of the *first*
crank A_0 B_0 (measured from +x) and the Cartesian positions ``xB<i>``,
``yB<i>`` of the moving joints B_0..B_N; speeds are their rates
(``w``, ``vxB<i>``, ``vyB<i>``). Constraints: squared rod lengths
|B_i - A_i|^2 - l^2 (cranks), |B_i - B_{i-1}|^2 - l^2 (couplers), and
B_0 . n(phi) = 0 with n = (-sin phi, cos phi) (phi ties to crank 0); the
velocity constraints are their time derivatives written out with vectors.

Mass of the rods: each uniform rod is its two-point Gauss-Legendre
quadrature, masses m/2 at the fractions 1/2 -/+ sqrt(3)/6 of its length.
The velocity is linear along a rod, so the quadrature reproduces the
continuum's kinetic energy (quadratic in the fraction) exactly, also for
non-rigid (stretching) velocity fields: the natural-coordinate mass matrix
m/3 [[I, I/2], [I/2, I]] of García de Jalón; the weight is exact as well
(linear in the fraction). ``phi`` carries no mass.
"""

import math

import sympy as sm
import sympy.physics.mechanics as me

import codegen

DEFAULTS = {"l": 1.0, "m": 1.0, "g": 9.81, "gravity_angle": -math.pi / 2,
            "k": 25.0, "l0": math.sqrt(2.0), "c": 0.0}

GAUSS = (0.5 - math.sqrt(3.0) / 6.0, 0.5 + math.sqrt(3.0) / 6.0)


def make_model(loops=1, name=None):
    loops = int(loops)
    t = me.dynamicsymbols._t
    phi, w = me.dynamicsymbols("phi w")
    xs = [me.dynamicsymbols(f"xB{i}") for i in range(loops + 1)]
    ys = [me.dynamicsymbols(f"yB{i}") for i in range(loops + 1)]
    vxs = [me.dynamicsymbols(f"vxB{i}") for i in range(loops + 1)]
    vys = [me.dynamicsymbols(f"vyB{i}") for i in range(loops + 1)]
    p = {key: sm.Symbol(key) for key in DEFAULTS}
    l, m, g, gamma, k, l0, c = (p[key] for key in ("l", "m", "g", "gravity_angle", "k", "l0", "c"))

    frame = me.ReferenceFrame("F")
    origin = me.Point("origin")
    origin.set_vel(frame, 0)
    pivots, joints = [], []
    for i in range(loops + 1):
        a = origin.locatenew(f"pivot{i}", i * l * frame.x)
        a.set_vel(frame, 0)
        pivots.append(a)
        b = origin.locatenew(f"joint{i}", xs[i] * frame.x + ys[i] * frame.y)
        b.set_vel(frame, vxs[i] * frame.x + vys[i] * frame.y)
        joints.append(b)

    weight = g * (sm.cos(gamma) * frame.x + sm.sin(gamma) * frame.y)
    particles, forces = [], []

    def uniform_rod(start, end, label):
        for j, s in enumerate(GAUSS):
            point = start.locatenew(f"{label}_gauss{j}", s * end.pos_from(start))
            point.set_vel(frame, (1 - s) * start.vel(frame) + s * end.vel(frame))
            particles.append(me.Particle(f"{label}_mass{j}", point, m / 2))
            forces.append((point, m / 2 * weight))

    for i in range(loops + 1):
        uniform_rod(pivots[i], joints[i], f"crank{i}")
    for i in range(1, loops + 1):
        uniform_rod(joints[i - 1], joints[i], f"coupler{i}")
    for i in range(1, loops + 1):
        d = joints[i].pos_from(pivots[i - 1])
        length = sm.sqrt(d.dot(d))
        stretch_rate = d.dot(joints[i].vel(frame)) / length
        forces.append((joints[i], -(k * (length - l0) + c * stretch_rate) / length * d))

    config, velocity = [], []
    for i in range(loops + 1):
        arm = joints[i].pos_from(pivots[i])
        config.append(arm.dot(arm) - l**2)
        velocity.append(2 * arm.dot(joints[i].vel(frame)))
    for i in range(1, loops + 1):
        link = joints[i].pos_from(joints[i - 1])
        config.append(link.dot(link) - l**2)
        velocity.append(2 * link.dot(joints[i].vel(frame) - joints[i - 1].vel(frame)))
    direction = sm.cos(phi) * frame.x + sm.sin(phi) * frame.y
    normal = -sm.sin(phi) * frame.x + sm.cos(phi) * frame.y
    position = joints[0].pos_from(origin)
    config.append(position.dot(normal))
    velocity.append(joints[0].vel(frame).dot(normal) - w * position.dot(direction))

    coords = [phi] + [v for i in range(loops + 1) for v in (xs[i], ys[i])]
    rates = [w] + [v for i in range(loops + 1) for v in (vxs[i], vys[i])]
    kinematics = [qi.diff(t) - ui for qi, ui in zip(coords, rates)]
    kane = me.KanesMethod(frame, q_ind=coords[:1], u_ind=rates[:1], kd_eqs=kinematics,
                          q_dependent=coords[1:], configuration_constraints=config,
                          u_dependent=rates[1:], velocity_constraints=velocity)
    kane.kanes_equations(particles, forces)
    name = name or ("gonzalez_fourbar" if loops == 1 else f"gonzalez_fourbar{loops}")
    return codegen.Model(kane, parameters={p[key]: value for key, value in DEFAULTS.items()},
                         name=name, description=f"González {loops}-loop four-bar (test user model)")


# -- operating points on the parallelogram branch (all cranks at the angle phi) ----------


def configuration(values, phi, loops=1):
    """q = [phi, xB0, yB0, ..., xBN, yBN] (the KanesMethod's order)."""
    l = values["l"]
    q = [phi]
    for i in range(loops + 1):
        q += [i * l + l * math.cos(phi), l * math.sin(phi)]
    return q


def speeds(values, phi, rate, loops=1):
    l = values["l"]
    u = [rate]
    for _ in range(loops + 1):
        u += [-l * rate * math.sin(phi), l * rate * math.cos(phi)]
    return u
