"""The Carvallo-Whipple bicycle, nonlinear, in Moore's formulation.

Four rigid bodies: rear frame C (with rider), fork and handlebar E, rear wheel
D, front wheel F; knife-edge wheels rolling without slip on flat ground. N is
the ground frame with z down; A = yaw about N.z, B = roll about A.x, C = pitch
about B.y (rear frame), E = steer about C.z (the steer axis), D and F spin
about C.y and E.y. The rear contact point is at (x, y) on the ground.

Coordinates: yaw, roll, pitch, steer, rear_wheel, front_wheel, x, y; pitch
is dependent through the configuration constraint that the front wheel
touches the ground. Speeds are the coordinate rates (yaw_rate, ...); five
velocity constraints (no slip at either contact, and the front contact
staying on the ground) make yaw_rate, pitch_rate, front_wheel_rate, x_rate and
y_rate dependent. Inputs: roll torque T_roll (ground on rear frame, about the
roll axis) and steer torque T_steer (rear frame on fork), as in the benchmark.

Parameters are the 26 of the benchmark of Meijaard, Papadopoulos, Ruina and
Schwab (2007), with its values as defaults; Moore's geometry (d1, d2, d3, the
mass centres l1..l4) and the inertia tensors in the body frames are written
here as expressions of them, so any benchmark parameter can be changed at
evaluation time. At the nominal configuration (upright, zero steer) the pitch
equals the steer axis tilt lambda and the benchmark's frame coincides with B.
"""

import functools
import math
from types import SimpleNamespace

import numpy as np
import sympy as sm
import sympy.physics.mechanics as me

from ..model import Model

DESCRIPTION = "Carvallo-Whipple bicycle, Moore's nonlinear formulation, benchmark parameters"

# Meijaard et al. (2007), table 1 (SI units).
DEFAULT_PARAMETERS = {
    "w": 1.02, "c": 0.08, "lam": math.pi / 10, "g": 9.81,
    "rR": 0.3, "mR": 2.0, "IRxx": 0.0603, "IRyy": 0.12,
    "xB": 0.3, "zB": -0.9, "mB": 85.0, "IBxx": 9.2, "IByy": 11.0, "IBzz": 2.8, "IBxz": 2.4,
    "xH": 0.9, "zH": -0.7, "mH": 4.0, "IHxx": 0.05892, "IHyy": 0.06, "IHzz": 0.00708, "IHxz": -0.00756,
    "rF": 0.35, "mF": 3.0, "IFxx": 0.1405, "IFyy": 0.28,
}

COORDINATES = ["yaw", "roll", "pitch", "steer", "rear_wheel", "front_wheel", "x", "y"]
# speeds are the coordinate rates ("<coordinate>_rate"); these name their coordinates
INDEPENDENT_SPEEDS = ["roll", "steer", "rear_wheel"]
DEPENDENT_SPEEDS = ["yaw", "pitch", "front_wheel", "x", "y"]


def _kinematics():
    """Symbols, frames, points and the constraints f_c, f_v (shared by
    :func:`make_model` and the numeric completion of :func:`general`)."""
    p = {name: sm.Symbol(name) for name in DEFAULT_PARAMETERS}
    w, c, lam = p["w"], p["c"], p["lam"]
    rR, rF = p["rR"], p["rF"]

    q = {name: me.dynamicsymbols(name) for name in COORDINATES}
    u = {name: me.dynamicsymbols(f"{name}_rate") for name in COORDINATES}
    T_roll, T_steer = me.dynamicsymbols("T_roll T_steer")

    # Moore's geometry from the benchmark's, at the nominal configuration where
    # C.x = (cos lam, 0, -sin lam) and C.z = (sin lam, 0, cos lam) in the
    # benchmark frame (x forward, z down, origin at the rear contact).
    d1 = sm.cos(lam) * (c + w - rR * sm.tan(lam))       # rear wheel centre to steer axis
    d3 = -sm.cos(lam) * (c - rF * sm.tan(lam))          # steer axis to front wheel centre
    d2 = w * sm.sin(lam) + (rR - rF) * sm.cos(lam)      # along the steer axis
    l1 = p["xB"] * sm.cos(lam) - (p["zB"] + rR) * sm.sin(lam)   # rear frame mass centre
    l2 = p["xB"] * sm.sin(lam) + (p["zB"] + rR) * sm.cos(lam)   #   from the rear wheel centre
    l3 = (p["xH"] - w) * sm.cos(lam) - (p["zH"] + rF) * sm.sin(lam)  # fork mass centre
    l4 = (p["xH"] - w) * sm.sin(lam) + (p["zH"] + rF) * sm.cos(lam)  #   from the front wheel centre

    N = me.ReferenceFrame("N")
    A = N.orientnew("A", "Axis", [q["yaw"], N.z])
    B = A.orientnew("B", "Axis", [q["roll"], A.x])
    C = B.orientnew("C", "Axis", [q["pitch"], B.y])
    D = C.orientnew("D", "Axis", [q["rear_wheel"], C.y])
    E = C.orientnew("E", "Axis", [q["steer"], C.z])
    F = E.orientnew("F", "Axis", [q["front_wheel"], E.y])
    # frames fixed in the rear frame and the fork that coincide with the
    # benchmark's axes at the nominal configuration: the benchmark inertias
    C_bench = C.orientnew("C_bench", "Axis", [-lam, C.y])
    E_bench = E.orientnew("E_bench", "Axis", [-lam, E.y])

    origin = me.Point("O")
    origin.set_vel(N, 0)
    rear_contact = origin.locatenew("rear_contact", q["x"] * N.x + q["y"] * N.y)
    rear_centre = rear_contact.locatenew("rear_centre", -rR * B.z)
    frame_centre = rear_centre.locatenew("frame_centre", l1 * C.x + l2 * C.z)
    steer_point = rear_centre.locatenew("steer_point", d1 * C.x)
    front_centre = steer_point.locatenew("front_centre", d2 * E.z + d3 * E.x)
    fork_centre = front_centre.locatenew("fork_centre", l3 * E.x + l4 * E.z)
    # front contact: from the wheel centre, in the wheel plane, towards the ground
    down_in_wheel_plane = E.y.cross(A.z).cross(E.y).normalize()
    front_contact = front_centre.locatenew("front_contact", rF * down_in_wheel_plane)

    # velocities by differentiation; then the contact points as points of the wheels
    for point in (rear_contact, rear_centre, frame_centre, steer_point, front_centre, fork_centre):
        point.set_vel(N, point.pos_from(origin).dt(N))
    rear_wheel_contact = rear_centre.locatenew("rear_wheel_contact", rR * B.z)
    rear_wheel_contact.v2pt_theory(rear_centre, N, D)
    front_wheel_contact = front_centre.locatenew("front_wheel_contact", rF * down_in_wheel_plane)
    front_wheel_contact.v2pt_theory(front_centre, N, F)

    coordinates = [q[name] for name in COORDINATES]
    speeds = [u[name] for name in COORDINATES]
    kinematic = [qi.diff() - ui for qi, ui in zip(coordinates, speeds)]
    qd_to_u = {qi.diff(): ui for qi, ui in zip(coordinates, speeds)}

    f_c = [front_contact.pos_from(rear_contact).dot(A.z)]
    f_v = [rear_wheel_contact.vel(N).dot(A.x), rear_wheel_contact.vel(N).dot(A.y),
           front_wheel_contact.vel(N).dot(A.x), front_wheel_contact.vel(N).dot(A.y),
           front_wheel_contact.vel(N).dot(A.z)]
    f_v = [sm.Matrix([expr]).xreplace(qd_to_u)[0] for expr in f_v]
    return SimpleNamespace(p=p, q=q, u=u, T_roll=T_roll, T_steer=T_steer, N=N, A=A, C=C, D=D, E=E, F=F,
                           C_bench=C_bench, E_bench=E_bench, rear_centre=rear_centre,
                           frame_centre=frame_centre, front_centre=front_centre,
                           fork_centre=fork_centre, coordinates=coordinates, speeds=speeds,
                           kinematic=kinematic, f_c=f_c, f_v=f_v)


def make_model(sensitivities=None):
    """The model; with ``sensitivities`` (parameter names or "all") the
    same model with them, named ``<name>_sensitivities``."""
    k = _kinematics()
    p, q, u, N, A, C, D, E, F = k.p, k.q, k.u, k.N, k.A, k.C, k.D, k.E, k.F
    g, T_roll, T_steer = p["g"], k.T_roll, k.T_steer
    C_bench, E_bench = k.C_bench, k.E_bench
    rear_centre, frame_centre = k.rear_centre, k.frame_centre
    front_centre, fork_centre = k.front_centre, k.fork_centre
    coordinates, speeds = k.coordinates, k.speeds

    rear_frame = me.RigidBody(
        "rear_frame", frame_centre, C, p["mB"],
        (me.inertia(C_bench, p["IBxx"], p["IByy"], p["IBzz"], 0, 0, p["IBxz"]), frame_centre))
    fork = me.RigidBody(
        "fork", fork_centre, E, p["mH"],
        (me.inertia(E_bench, p["IHxx"], p["IHyy"], p["IHzz"], 0, 0, p["IHxz"]), fork_centre))
    rear_wheel = me.RigidBody("rear_wheel", rear_centre, D, p["mR"],
                              (me.inertia(C, p["IRxx"], p["IRyy"], p["IRxx"]), rear_centre))
    front_wheel = me.RigidBody("front_wheel", front_centre, F, p["mF"],
                               (me.inertia(E, p["IFxx"], p["IFyy"], p["IFxx"]), front_centre))
    bodies = [rear_frame, fork, rear_wheel, front_wheel]
    loads = [(frame_centre, p["mB"] * g * N.z), (fork_centre, p["mH"] * g * N.z),
             (rear_centre, p["mR"] * g * N.z), (front_centre, p["mF"] * g * N.z),
             (C, T_roll * A.x - T_steer * C.z), (E, T_steer * C.z)]

    dependent_q = [q["pitch"]]
    dependent_u = [u[name] for name in DEPENDENT_SPEEDS]
    kane = me.KanesMethod(
        N, q_ind=[qi for qi in coordinates if qi not in dependent_q],
        u_ind=[ui for ui in speeds if ui not in dependent_u], kd_eqs=k.kinematic,
        q_dependent=dependent_q, configuration_constraints=k.f_c,
        u_dependent=dependent_u, velocity_constraints=k.f_v)
    kane.kanes_equations(bodies, loads)
    parameters = {p[name]: value for name, value in DEFAULT_PARAMETERS.items()}
    model = Model(kane, parameters=parameters, inputs=[T_roll, T_steer], name="bicycle",
                  description=DESCRIPTION)
    return model.with_sensitivities(sensitivities) if sensitivities else model


def upright(parameters, v=5.0):
    """Steady upright straight running along n_x at forward speed v: zero yaw,
    roll and steer; the pitch of the nominal configuration (the steer axis
    tilt lambda, where the front wheel touches the ground by construction);
    wheels rolling at -v/r (they spin about their axles pointing right)."""
    q = dict.fromkeys(COORDINATES, 0.0)
    u = dict.fromkeys(COORDINATES, 0.0)
    q["pitch"] = parameters["lam"]
    u["rear_wheel"] = -v / parameters["rR"]
    u["front_wheel"] = -v / parameters["rF"]
    u["x"] = v
    order = [name for name in COORDINATES if name != "pitch"] + ["pitch"]
    speeds_order = INDEPENDENT_SPEEDS + DEPENDENT_SPEEDS
    return [q[name] for name in order], [u[name] for name in speeds_order], [0.0, 0.0]


@functools.lru_cache(maxsize=1)
def _constraint_functions():
    """Numeric f_c, d f_c/d pitch and the velocity-constraint matrix d f_v/d u
    (f_v is linear and homogeneous in u), as functions of (q by name in
    COORDINATES order, parameters in DEFAULT_PARAMETERS order)."""
    k = _kinematics()
    q_symbols = sm.symbols(" ".join(f"q_{name}" for name in COORDINATES))
    to_symbols = dict(zip(k.coordinates, q_symbols))
    p_symbols = [k.p[name] for name in DEFAULT_PARAMETERS]
    f_c = k.f_c[0].xreplace(to_symbols)
    pitch = to_symbols[k.q["pitch"]]
    B_v = sm.Matrix(k.f_v).jacobian(k.speeds).xreplace(to_symbols)
    args = [list(q_symbols), p_symbols]
    return (sm.lambdify(args, f_c, "math"), sm.lambdify(args, f_c.diff(pitch), "math"),
            sm.lambdify(args, B_v, "numpy"))


def general(parameters, yaw=0.3, roll=0.15, steer=0.25, rear_wheel=1.0, front_wheel=-0.5,
            x=0.4, y=-0.2, roll_rate=0.6, steer_rate=-0.8, rear_wheel_rate=-12.0,
            T_roll=0.7, T_steer=-1.3, tol=1e-14):
    """A consistent point that is neither upright nor an equilibrium: the
    given coordinates and independent speeds (roll_rate, steer_rate,
    rear_wheel_rate) and inputs; the pitch solved from the front contact
    constraint by Newton's method starting at lambda; the dependent speeds
    solved from the (linear) velocity constraints."""
    f_c, df_c, B_v = _constraint_functions()
    p = [parameters[name] for name in DEFAULT_PARAMETERS]
    q = dict(yaw=yaw, roll=roll, pitch=parameters["lam"], steer=steer, rear_wheel=rear_wheel,
             front_wheel=front_wheel, x=x, y=y)
    for _ in range(50):
        values = [q[name] for name in COORDINATES]
        residual = f_c(values, p)
        if abs(residual) <= tol * max(parameters["rR"], parameters["rF"]):
            break
        q["pitch"] -= residual / df_c(values, p)
    else:
        raise ValueError(f"bicycle.general: no pitch makes the front wheel touch the ground "
                         f"(roll {roll}, steer {steer}; residual {residual:.3e})")
    values = [q[name] for name in COORDINATES]
    matrix = np.asarray(B_v(values, p), dtype=float)
    column = {name: i for i, name in enumerate(COORDINATES)}
    given = {"roll": roll_rate, "steer": steer_rate, "rear_wheel": rear_wheel_rate}
    independent = np.array([given[name] for name in INDEPENDENT_SPEEDS])
    dependent = np.linalg.solve(matrix[:, [column[name] for name in DEPENDENT_SPEEDS]],
                                -matrix[:, [column[name] for name in INDEPENDENT_SPEEDS]] @ independent)
    order = [name for name in COORDINATES if name != "pitch"] + ["pitch"]
    return ([q[name] for name in order], list(independent) + list(dependent), [T_roll, T_steer])


OPERATING_POINTS = {"upright": upright, "general": general}
DEFAULT_OPERATING_POINT = ("upright", {"v": 5.0})
ROLL_STEER = ["roll", "steer", "roll_rate", "steer_rate"]
SWEEP = {"point": "upright", "param": "v", "states": ROLL_STEER,
         "mode_names": {"oscillatory": "weave", "real": "capsize"}}


def expected_eigenvalues(parameters, name, **kwargs):
    """Table 2 of Meijaard et al. (2007), for a person to compare with."""
    published = {0.0: "-5.53094, -3.13164, 3.13164, 5.53094",
                 5.0: "-14.0784, -0.775342 +/- 4.46487j, -0.322866",
                 10.0: "-24.6246, -3.72017 +/- 10.9068j, 0.161053"}
    v = float(kwargs.get("v", 5.0))
    if name == "upright" and parameters == DEFAULT_PARAMETERS and v in published:
        return (f"roll/steer {published[v]} and six zeros  "
                f"[benchmark, Meijaard et al. 2007, table 2, v = {v:g}]")
    return None
