"""An n-link planar pendulum on a cart, for scaling studies.

The cart (mass mc) moves along n_x, pushed by the force F; link k (mass m,
length l, uniform rod) hangs from the tip of link k-1 (link 1 from the cart).
Angles q_k are absolute, measured from the downward vertical; gravity g along
n_y (down). No constraints: with ``closed=True`` the tip of the last link is
held on the vertical line through its starting point x = x0 by a
configuration constraint (one dependent angle, one dependent speed), which
makes a closed kinematic loop.
"""

import numpy as np
import sympy as sm
import sympy.physics.mechanics as me

from ..eom import kanes_equations, kinematic_solver
from ..model import Model

DESCRIPTION = "n-link pendulum on a cart (scaling studies; make_model(n, closed))"
DEFAULT_PARAMETERS = {"mc": 1.0, "m": 0.5, "l": 0.4, "g": 9.81, "x0": 0.0}


def make_model(n=3, closed=False):
    x = me.dynamicsymbols("x")
    angles = list(me.dynamicsymbols(f"theta1:{n + 1}"))
    v = me.dynamicsymbols("v")
    rates = list(me.dynamicsymbols(f"omega1:{n + 1}"))
    F = me.dynamicsymbols("F")
    mc, m, l, g, x0 = sm.symbols("mc m l g x0")

    N = me.ReferenceFrame("N")
    origin = me.Point("O")
    origin.set_vel(N, 0)
    cart = origin.locatenew("cart", x * N.x)
    cart.set_vel(N, v * N.x)
    bodies = [me.Particle("cart", cart, mc)]
    loads = [(cart, F * N.x), (cart, mc * g * N.y)]
    joint = cart
    for k in range(n):
        frame = N.orientnew(f"L{k + 1}", "Axis", [angles[k], N.z])
        frame.set_ang_vel(N, rates[k] * N.z)
        centre = joint.locatenew(f"G{k + 1}", l / 2 * frame.y)
        centre.v2pt_theory(joint, N, frame)
        tip = joint.locatenew(f"P{k + 1}", l * frame.y)
        tip.v2pt_theory(joint, N, frame)
        rod = me.RigidBody(f"link{k + 1}", centre, frame, m,
                           (me.inertia(frame, 0, 0, m * l**2 / 12), centre))
        bodies.append(rod)
        loads.append((centre, m * g * N.y))
        joint = tip

    q, u = [x] + angles, [v] + rates
    kinematic = [qi.diff() - ui for qi, ui in zip(q, u)]
    if closed:
        f_c = [joint.pos_from(origin).dot(N.x) - x0]
        f_v = [joint.vel(N).dot(N.x)]
        kane = me.KanesMethod(N, q_ind=q[:-1], u_ind=u[:-1], kd_eqs=kinematic,
                              q_dependent=q[-1:], configuration_constraints=f_c,
                              u_dependent=u[-1:], velocity_constraints=f_v,
                              kd_eqs_solver=kinematic_solver)
    else:
        kane = me.KanesMethod(N, q_ind=q, u_ind=u, kd_eqs=kinematic, kd_eqs_solver=kinematic_solver)
    # SymPy's kane.kanes_equations(bodies, loads), the same equations in less time
    # (codegen.eom), and the multiplier form reuses its unconstrained equations
    kanes_equations(kane, bodies, loads)
    symbols = {"mc": mc, "m": m, "l": l, "g": g, "x0": x0}
    parameters = {symbols[k]: v for k, v in DEFAULT_PARAMETERS.items()}  # x0 unused when open
    name = f"cart_chain{n}" + ("_closed" if closed else "")
    return Model(kane, parameters=parameters, inputs=[F], name=name, description=DESCRIPTION)


def hanging(parameters, n=3, closed=False):
    """At rest, every link hanging straight down (cart at x0 when closed)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n (the number of links) must be a whole number >= 1, got {n!r}")
    q = np.zeros(n + 1)
    q[0] = parameters.get("x0", 0.0)
    return q, np.zeros(n + 1), [0.0]


OPERATING_POINTS = {"hanging": hanging}
DEFAULT_OPERATING_POINT = ("hanging", {})
