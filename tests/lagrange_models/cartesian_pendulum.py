"""Pendulum in Cartesian coordinates: bob (mass m) at (x, y) on a massless rod
of length L from the origin, x down along gravity, a sideways force F on the
bob as the input. One holonomic constraint x^2 + y^2 - L^2 = 0; x dependent.

Lagrange: q = [x, y], L = m (x'^2 + y'^2)/2, gravity and F in the force list.
Kane: the README's model (q = [y, x], speeds ux = x', uy = y').
Both have the states [y, y'] (Lagrange: ``y, y_rate``; Kane: ``y, uy``).
Hanging (x = L): A = [[0, 1], [-g/L, 0]], B = [[0], [1/m]].
"""

import sympy as sm
import sympy.physics.mechanics as me

from codegen import Model

PARAMETERS = {"m": 1.3, "L": 0.8, "g": 9.81}


def _symbols():
    x, y, F = me.dynamicsymbols("x y F")
    m, L, g = sm.symbols("m L g")
    return x, y, F, m, L, g


def make_lagrange(dependent_q=("x",)):
    x, y, F, m, L, g = _symbols()
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    bob = O.locatenew("bob", x * N.x + y * N.y)
    bob.set_vel(N, x.diff() * N.x + y.diff() * N.y)
    particle = me.Particle("P", bob, m)
    lagrange = me.LagrangesMethod(me.Lagrangian(N, particle), [x, y],
                                  forcelist=[(bob, m * g * N.x + F * N.y)], frame=N,
                                  hol_coneqs=[x**2 + y**2 - L**2])
    lagrange.form_lagranges_equations()
    return Model(lagrange, parameters=dict(zip((m, L, g), PARAMETERS.values())), inputs=[F],
                 name="lagrange_pendulum", dependent_q=dependent_q)


def make_kane():
    x, y, F, m, L, g = _symbols()
    ux, uy = me.dynamicsymbols("ux uy")
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    bob = O.locatenew("bob", x * N.x + y * N.y)
    bob.set_vel(N, ux * N.x + uy * N.y)
    kane = me.KanesMethod(
        N, q_ind=[y], u_ind=[uy], kd_eqs=[x.diff() - ux, y.diff() - uy],
        q_dependent=[x], configuration_constraints=[x**2 + y**2 - L**2],
        u_dependent=[ux], velocity_constraints=[x * ux + y * uy])
    kane.kanes_equations([me.Particle("P", bob, m)], [(bob, m * g * N.x + F * N.y)])
    return Model(kane, parameters=dict(zip((m, L, g), PARAMETERS.values())), inputs=[F],
                 name="kane_pendulum")


def hanging_AB(parameters=PARAMETERS):
    m, L, g = parameters["m"], parameters["L"], parameters["g"]
    return [[0.0, 1.0], [-g / L, 0.0]], [[0.0], [1.0 / m]]


# (q, u, r) in the Lagrange model's order q = [x, y]; x and x' completed
HANGING = ([0.8, 0.0], [0.0, 0.0], [0.0])
POINTS = [HANGING, ([0.7, 0.35], [0.0, 0.9], [0.4]), ([0.2, -0.7], [0.0, -1.3], [-0.8])]

# the Kane form's speed of each coordinate of the Lagrange form (in its order)
KANE_SPEEDS = ["ux", "uy"]
