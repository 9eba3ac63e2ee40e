"""N-loop four-bar linkage with diagonal springs (González et al., Fig. 1, section 5.1).

Geometry (the paper's figure, read from its text): ground pivots
A_i = (i l, 0), i = 0..N; N + 1 cranks A_i B_i and N couplers B_{i-1} B_i,
all equal uniform rods (length l, mass m). Every loop A_{i-1} A_i B_i B_{i-1}
is a rhombus of side l; on the parallelogram branch all cranks stay parallel
at the angle phi from the x axis (one degree of freedom, regardless of N).
Loop i has a spring (stiffness k, natural length l0 = sqrt(2) l: relaxed at
the square, phi = pi/2) from B_i to A_{i-1}, and a damper c alongside it
(the paper's damped case, c = 1 Ns/m; c = 0 by default). Gravity has
magnitude g and points along (cos gravity_angle, sin gravity_angle):
gravity_angle = -pi/2 is the figure's -y, gravity_angle = 0 is the singular
case of section 5.1 (gravity along +x).

Coordinates: the paper's own natural coordinates, not one angle per rod:
x_i, y_i of B_0..B_N and the angle phi of the last crank A_N B_N
(n = 2N + 3), with its constraints (m = 2N + 2): the squared rod lengths
|B_i - A_i|^2 = l^2 (cranks), |B_i - B_{i-1}|^2 = l^2 (couplers), and
(x_N - N l) sin(phi) - y_N cos(phi) = 0, which ties phi to B_N. Speeds are
the coordinate rates (vx_i, vy_i, omega); the velocity constraints are the
time derivatives. The model orders them independent first:
q = [phi, x_0, y_0, ..., x_N, y_N], u = [omega, vx_0, vy_0, ...]. Default
partition: phi and omega independent (the paper's choice for the velocity
transformation), every B coordinate dependent; it is valid wherever the
cranks are not along the ground line (phi != 0, pi).

Why natural coordinates rather than one angle per rod: at the singular
configuration (phi = 0, all rods on the x axis, the Jacobian loses one rank)
the constraint forces are not unique, and the linearization there depends on
which multipliers are taken. The paper's numbers (+/-3.4310i and +/-4.4294i,
N = 1, k = 0, gravity along +x) are those of the minimum-norm multipliers of
*these* constraints (squared lengths, all scaled alike): they leave the
coupler without axial force, the cranks in tension g m/2 each, and give
M = [[2/3, 1/6], [1/6, 2/3]] m l^2, K = g m l I on (y_0, y_1), whose roots
are exactly sqrt(6 g/5) = 3.4310 and sqrt(2 g) = 4.4294. With one angle per
rod (loop closed at B_1) the minimum-norm multipliers put the whole weight
of the coupler on crank 0 and give +/-3.1321i and +/-6.4189i instead. The
rods are written as point masses m/6 at each end and 2m/3 at the centre: the
same mass, centre and central inertia m l^2/12 as the uniform rod, so the
mass matrix is García de Jalón's constant natural-coordinate matrix (the one
the paper's method uses); phi carries no mass.

Closed form of the one-degree-of-freedom motion (parallelogram branch,
-pi < phi < pi): kinetic energy I phi'^2/2 with I = m l^2 (4N + 1)/3 (cranks
m l^2/3 each, couplers translating at l phi'), potential

    V(phi) = -m g l (3N + 1)/2 cos(phi - gravity_angle)
             + N k/2 (2 l cos(phi/2) - l0)^2,

dissipation N c l^2 sin^2(phi/2) phi'^2/2; so the equilibria solve V'(phi) = 0
and the eigenvalues of the linearization there are the roots of
I s^2 + N c l^2 sin^2(phi/2) s + V''(phi) = 0 (``closed_form``). With the
paper's values and gravity along -y the square (phi = pi/2) is an unstable
equilibrium (V'' = 12.5 N - 9.81 (3N + 1)/2 < 0); the stable ones are the
hanging phi = -pi/2 and a leaning one, phi = 2.2343 (N = 1), 2.0271 (N = 2),
1.9153 (N = 4) with eigenvalues +/-2.1477i, +/-1.8174i, +/-1.5964i
(damped: -0.2424 +/- 2.1340i, -0.2401 +/- 1.8015i, -0.2361 +/- 1.5788i). The
paper's Table 1 (its s_1 for each N) is not in our copy of the paper, so
these are checked against the closed form only.
"""

import math

import numpy as np
import sympy as sm
import sympy.physics.mechanics as me

from ..eom import kanes_equations, kinematic_solver
from ..model import Model

DESCRIPTION = "N-loop four-bar linkage with diagonal springs, natural coordinates (González et al.)"

# González et al., section 4.1: l = 1 m, m = 1 kg, g = 9.81, k = 25 N/m,
# l0 = sqrt(2) m; gravity along -y; undamped (the damped case has c = 1).
DEFAULT_PARAMETERS = {
    "l": 1.0, "m": 1.0, "g": 9.81, "gravity_angle": -math.pi / 2,
    "k": 25.0, "l0": math.sqrt(2.0), "c": 0.0,
}


def _names(loops):
    q = [f"{axis}{i}" for i in range(loops + 1) for axis in ("x", "y")] + ["phi"]
    u = [f"v{axis}{i}" for i in range(loops + 1) for axis in ("x", "y")] + ["omega"]
    return q, u


def make_model(loops=1):
    """The linkage with ``loops`` = N loops (N >= 1)."""
    if int(loops) != loops or loops < 1:
        raise ValueError(f"loops must be a positive integer, got {loops!r}")
    loops = int(loops)
    q_names, u_names = _names(loops)
    q = [me.dynamicsymbols(name) for name in q_names]
    u = [me.dynamicsymbols(name) for name in u_names]
    t = me.dynamicsymbols._t
    symbols = {name: sm.Symbol(name) for name in DEFAULT_PARAMETERS}
    l, m, g, gamma, k, l0, c = (symbols[name] for name in DEFAULT_PARAMETERS)

    N = me.ReferenceFrame("N")
    origin = me.Point("O")
    origin.set_vel(N, 0)
    gravity = g * (sm.cos(gamma) * N.x + sm.sin(gamma) * N.y)

    ground = []       # A_i, fixed
    tips = []         # B_i
    for i in range(loops + 1):
        A = origin.locatenew(f"A{i}", i * l * N.x)
        A.set_vel(N, 0)
        ground.append(A)
        x, y, vx, vy = q[2 * i], q[2 * i + 1], u[2 * i], u[2 * i + 1]
        B = origin.locatenew(f"B{i}", x * N.x + y * N.y)
        B.set_vel(N, vx * N.x + vy * N.y)
        tips.append(B)

    # A uniform rod P-Q as masses m/6 at P and Q and 2m/3 at its centre (the
    # fixed end A_i of a crank carries no kinetic energy and no load).
    particles = {}

    def add_mass(point, mass):
        particles.setdefault(point.name, [point, 0])[1] += mass

    def centre(P, Q, name):
        point = P.locatenew(name, Q.pos_from(P) / 2)
        point.set_vel(N, (P.vel(N) + Q.vel(N)) / 2)
        return point

    for i in range(loops + 1):
        add_mass(tips[i], m / 6)
        add_mass(centre(ground[i], tips[i], f"crank{i}_centre"), 2 * m / 3)
    for i in range(1, loops + 1):
        add_mass(tips[i - 1], m / 6)
        add_mass(tips[i], m / 6)
        add_mass(centre(tips[i - 1], tips[i], f"coupler{i}_centre"), 2 * m / 3)
    bodies = [me.Particle(f"mass_at_{name}", point, mass) for name, (point, mass) in particles.items()]
    loads = [(point, mass * gravity) for point, mass in particles.values()]

    # spring and damper of loop i on the diagonal A_{i-1} B_i
    for i in range(1, loops + 1):
        diagonal = tips[i].pos_from(ground[i - 1])
        length = sm.sqrt(diagonal.dot(diagonal))
        rate = diagonal.dot(tips[i].vel(N)) / length
        tension = k * (length - l0) + c * rate
        loads.append((tips[i], -tension * diagonal / length))

    f_c = []
    for i in range(loops + 1):                       # cranks A_i B_i
        r = tips[i].pos_from(ground[i])
        f_c.append(r.dot(r) - l**2)
    for i in range(1, loops + 1):                    # couplers B_{i-1} B_i
        r = tips[i].pos_from(tips[i - 1])
        f_c.append(r.dot(r) - l**2)
    phi = q[-1]
    x_N, y_N = q[-3], q[-2]
    f_c.append((x_N - loops * l) * sm.sin(phi) - y_N * sm.cos(phi))
    qd_to_u = {qi.diff(t): ui for qi, ui in zip(q, u)}
    f_v = [sm.expand(fc.diff(t).xreplace(qd_to_u)) for fc in f_c]
    kinematic = [qi.diff(t) - ui for qi, ui in zip(q, u)]

    kane = me.KanesMethod(N, q_ind=[phi], u_ind=[u[-1]], kd_eqs=kinematic,
                          q_dependent=q[:-1], configuration_constraints=f_c,
                          u_dependent=u[:-1], velocity_constraints=f_v,
                          kd_eqs_solver=kinematic_solver)
    # SymPy's kane.kanes_equations(bodies, loads), the same equations in less time
    # (codegen.eom), and the multiplier form reuses its unconstrained equations
    kanes_equations(kane, bodies, loads)
    parameters = {symbols[name]: value for name, value in DEFAULT_PARAMETERS.items()}
    name = "fourbar" if loops == 1 else f"fourbar{loops}"
    return Model(kane, parameters=parameters, name=name,
                 description=f"{loops}-loop four-bar linkage with diagonal springs (González et al.)")


# -- the one-degree-of-freedom closed form --------------------------------------------


def potential_slope(parameters, phi, loops=1):
    """V'(phi) of the module docstring."""
    l, m, g, gamma, k, l0 = (parameters[n] for n in ("l", "m", "g", "gravity_angle", "k", "l0"))
    return (m * g * l * (3 * loops + 1) / 2 * math.sin(phi - gamma)
            - loops * k * l * math.sin(phi / 2) * (2 * l * math.cos(phi / 2) - l0))


def potential_curvature(parameters, phi, loops=1):
    """V''(phi) of the module docstring."""
    l, m, g, gamma, k, l0 = (parameters[n] for n in ("l", "m", "g", "gravity_angle", "k", "l0"))
    half = phi / 2
    return (m * g * l * (3 * loops + 1) / 2 * math.cos(phi - gamma)
            + loops * k * l**2 * math.sin(half) ** 2
            - loops * k * l / 2 * math.cos(half) * (2 * l * math.cos(half) - l0))


def closed_form(parameters, phi, loops=1):
    """The two eigenvalues of the linearization at an equilibrium phi:
    roots of I s^2 + C s + K = 0 (module docstring)."""
    l, m, c = parameters["l"], parameters["m"], parameters["c"]
    inertia = m * l**2 * (4 * loops + 1) / 3
    damping = loops * c * l**2 * math.sin(phi / 2) ** 2
    stiffness = potential_curvature(parameters, phi, loops)
    root = np.sqrt(complex(damping**2 - 4 * inertia * stiffness))
    return (-damping - root) / (2 * inertia), (-damping + root) / (2 * inertia)


def equilibrium_angles(parameters, loops=1, samples=2000):
    """Every equilibrium phi in (-pi, pi) of the parallelogram branch: sign
    changes of V' on a grid, refined by bisection (plain Python, no SciPy).
    Returns (phi, stable) pairs, stable when V''(phi) > 0."""
    slope = lambda phi: potential_slope(parameters, phi, loops)  # noqa: E731
    edge = 1e-9
    grid = [-math.pi + edge + (2 * math.pi - 2 * edge) * j / samples for j in range(samples + 1)]
    found = []
    for a, b in zip(grid, grid[1:]):
        fa, fb = slope(a), slope(b)
        if fa == 0.0:
            found.append(a)
            continue
        if fa * fb > 0:
            continue
        for _ in range(200):
            middle = 0.5 * (a + b)
            fm = slope(middle)
            if fm == 0.0 or b - a < 1e-15:
                break
            if fa * fm < 0:
                b, fb = middle, fm
            else:
                a, fa = middle, fm
        found.append(0.5 * (a + b))
    return [(phi, potential_curvature(parameters, phi, loops) > 0) for phi in found]


# -- operating points ---------------------------------------------------------------


def configuration(parameters, phi, loops=1):
    """Coordinates [phi, x_0, y_0, ..., x_N, y_N] (the model's order: independent
    first) of the parallelogram at crank angle phi."""
    l = parameters["l"]
    q = [phi]
    for i in range(loops + 1):
        q += [i * l + l * math.cos(phi), l * math.sin(phi)]
    return q


def speeds(parameters, phi, omega, loops=1):
    """Speeds [omega, vx_0, vy_0, ..., vx_N, vy_N] at crank angle phi and rate omega."""
    l = parameters["l"]
    return [omega] + [l * omega * v for _ in range(loops + 1) for v in (-math.sin(phi), math.cos(phi))]


def equilibrium(parameters, loops=1, guess=2.0, stable=True):
    """Static equilibrium on the parallelogram branch nearest to the crank angle
    ``guess`` (only stable ones unless ``stable=False``). With the paper's
    values (gravity along -y) the stable one leans towards the spring's ground
    pivot: phi = 2.2343 (N = 1), 2.0271 (N = 2), 1.9153 (N = 4); the hanging
    phi = -pi/2 is stable too (``guess=-1.5``)."""
    candidates = [phi for phi, is_stable in equilibrium_angles(parameters, loops)
                  if is_stable or not stable]
    if not candidates:
        raise ValueError("no equilibrium of the parallelogram branch in (-pi, pi) for these parameters")
    phi = min(candidates, key=lambda angle: abs(math.remainder(angle - guess, 2 * math.pi)))
    return configuration(parameters, phi, loops), speeds(parameters, phi, 0.0, loops)


def general(parameters, loops=1, phi=1.2, omega=0.7):
    """A regular, moving (not equilibrium) point: crank angle phi, rate omega."""
    return configuration(parameters, phi, loops), speeds(parameters, phi, omega, loops)


def flat(parameters, loops=1):
    """The singular configuration of section 5.1: phi = 0, every rod on the x
    axis, at rest. The constraint Jacobian loses one rank (two degrees of
    freedom to first order); an equilibrium when gravity is along +x
    (gravity_angle = 0, any k); the paper's eigenvalues are for N = 1, k = 0.
    No partition is valid here (J_c P_qd is singular for every choice);
    today's linearization already stops at the speed-level solve, whose
    matrix [M B_v^T; B_v 0] is singular once B_v loses rank."""
    return configuration(parameters, 0.0, loops), speeds(parameters, 0.0, 0.0, loops)


OPERATING_POINTS = {"equilibrium": equilibrium, "general": general, "flat": flat}
DEFAULT_OPERATING_POINT = ("equilibrium", {})
SINGULAR_EIGENVALUES = (3.4310, 4.4294)   # González et al., section 5.1 (imaginary parts)


def expected_eigenvalues(parameters, name, **kwargs):
    loops = kwargs.get("loops", 1)
    if name == "equilibrium":
        q, _ = equilibrium(parameters, **kwargs)
        s = closed_form(parameters, q[0], loops)[1]
        pair = (f"{s.real + 0.0:.6g} +/- {abs(s.imag):.6g}i" if s.imag else
                ", ".join(f"{v.real:.6g}" for v in closed_form(parameters, q[0], loops)))
        return (f"{pair} at phi = {q[0]:.6g}  "
                "[closed form of the parallelogram motion: I s^2 + C s + V''(phi) = 0]")
    if name == "flat":
        return ("González et al. (N = 1, k = 0, gravity along +x): +/-3.4310i, +/-4.4294i, "
                "with minimum-norm multipliers; no partition is valid here")
    return None
