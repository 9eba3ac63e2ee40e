"""Flexible double pendulum (González et al., sections 4.2 and 5.2): two elastic
links in the floating-frame-of-reference formulation with finite elements.

The system (the paper's): two links of length l = 4 m, circular section of
radius r = 0.15 m, density rho = 1500 kg/m^3, Young's modulus E = 1e8 N/m^2,
gravity g along -y; link 1 pinned to the ground at o, link 2 pinned to link 1
at P_1, the end of link 1. Each link is discretized with n_p finite elements
(``make_model(elements=n_p)``) and described in the paper's coordinates, per
link k = 1, 2 (n = 2 (3 + 3 (n_p + 1)) = 6 n_p + 12):

* x_k, y_k, theta_k: position of the origin and angle (from the x axis) of
  the link's floating frame of reference (its body frame);
* q_k_fx<i>, q_k_fy<i>, q_k_ftheta<i>, node i = 1 .. n_p + 1: the elastic
  nodal coordinates in the body frame (axial and transverse displacement and
  rotation of the section of node i). Node 1 is at the first articulation
  (o, P_1), node n_p + 1 at the end of the link.

and m = 10 configuration constraints: the first node of link 1 at o (2), the
last node of link 1 on the first node of link 2 (2), and per link
q_k_fx1 = q_k_fy1 = q_k_ftheta1 = 0 (3 + 3: the frame stays attached and
tangent to the centre line at the first node). The pins are written on the
material nodes (frame origin plus nodal displacement), as a joint connects
points of the bodies; on the constraint manifold (q_k_f*1 = 0) that is the
frame origin. Speeds are the coordinate rates (``<coordinate>_rate``), the
velocity constraints the time derivatives.

Choices the paper leaves open (it cites Shabana, Dynamics of Multibody Systems,
for the finite-element approach):

* **Element**: Shabana's planar beam element, Euler-Bernoulli: axial
  displacement linear, transverse displacement cubic (Hermite) in the element
  coordinate, nodal coordinates (axial, transverse, rotation) at both ends;
  the elements lie along the body x axis, so element and body coordinates
  coincide (no element transformation). Shear deformation and the rotary
  inertia of the sections are neglected: the rod is a line with mass rho A
  per length (A = pi r^2) and bending stiffness E I (I = pi r^4 / 4). So the
  rigid limit (E -> infinity) is the double pendulum of two thin uniform rods
  (moment of inertia m l^2 / 3 about the end), not of two cylinders.
* **Mass**: consistent. The shape functions S(xi) are derived here in SymPy
  from the nodal interpolation conditions, and the inertia shape integrals
  (Shabana's S-bar = int rho S dV and S_kl = int rho S_k^T S_l dV, k, l = x, y)
  and the stiffness matrix (int E A u'^2 + E I v''^2 dx) are integrated in
  SymPy element by element and assembled per link. The kinetic energy is the
  floating-frame one written from them, with the undeformed position as
  reference nodal coordinates (u-bar = S (q_0 + q_f), exact for this element):

      T = m |R'|^2 / 2 + R' . A (theta' I~ S-bar q-bar + S-bar q_f')
          + theta'^2 q-bar^T M_ff q-bar / 2 + theta' q-bar^T (S_xy - S_yx) q_f'
          + q_f'^T M_ff q_f' / 2,            M_ff = S_xx + S_yy,

  exact (no lumping, no dropped inertia coupling: the quadratic velocity
  terms come out of Lagrange's equations).
* **Elasticity**: linear, U = q_f^T K_ff q_f / 2 with the constant stiffness
  matrix of the small-strain element (Shabana's linear floating-frame
  formulation). **Geometric stiffening is not included**: the axial load of
  the hanging links (link 1 carries the weight of both, 2 rho A l g = 8.3 kN)
  does not stiffen their bending. With these values that is not a small
  effect (T l^2 / (E I) = 3.3 for link 1); a model with it needs the
  nonlinear (von Karman) strain, u' + v'^2 / 2 in the axial strain.
* **Frame**: tangent frame at each link's first articulation (the paper's):
  the frame is the first node's position and section, by the three
  constraints above; the nodal coordinates of node 1 stay in q (constrained to
  zero), so n = 6 n_p + 12 as in the paper.
* **Gravity** acts on the distributed mass (consistent load vector):
  V = g (m y + [A S-bar q-bar]_y) per link.
* **Formulation**: a LagrangesMethod with L = T - U - V (the energy written
  from the assembled element matrices; the factors rho A, E A, E I multiply
  whole sums), the pins and frame constraints as its holonomic constraints.
  The constraint forces enter through multipliers: the pipeline's multiplier
  form is the paper's RCS equations, reduced numerically (``linearize``: the
  MCS spectrum, 2 (6 n_p + 2) eigenvalues).

Default partition: dependent x_k, y_k and the first node's nodal coordinates
(theta_k and the elastic coordinates of nodes 2 .. n_p + 1 independent, the
paper's MCS choice); J_c P_qd is triangular with unit diagonal blocks, valid
everywhere.

Operating points: ``hanging`` (theta_1 = theta_2 = -pi/2, undeformed, at rest:
not an equilibrium under gravity, the links stretch), and ``equilibrium`` (the
default): the hanging links with their static stretch under their own
weight. The axial problem of a hanging rod is exact at the nodes of linear
elements: link 1 carries rho A g (2 l - s) at s from o, link 2 rho A g (l - s),
so the axial nodal displacements are rho g / E (2 l s - s^2 / 2) and
rho g / E (l s - s^2 / 2); transverse displacements and rotations vanish and
the angles stay -pi/2. ``equilibrium()`` of the built module finds the same
point from ``hanging`` (for n_p = 10 only with a tighter ``rank_tol`` than
the default: the Jacobian of its residual spans the elastic stiffnesses and
the pendulum's g/l, more than 1e9; tests/test_flexible_pendulum.py).

Eigenvalues at ``equilibrium`` (+/- i omega, omega in rad/s, the first four):

    n_p =  1: 1.335932, 3.531082, 9.705196, 25.302247
    n_p =  2: 1.335751, 3.525373, 9.433485, 22.534542
    n_p =  5: 1.335732, 3.524456, 9.418036, 22.413056
    n_p = 10: 1.335731, 3.524428, 9.417527, 22.405883

(the paper's Table 3 is not in our copy). The rigid limit, two thin rods:
omega^2 = (3 -/+ 6/sqrt(7)) g/l, 1.340057 and 3.594335 (``rigid_limit``).

Cost: SymPy's ``form_lagranges_equations`` took most of the build of this
model and grew like n^2 (n_p = 1: 5 s, 2: 8 s, 5: 24 s, 10: 65 s of CPU on a
busy 2-core machine, against 4 to 8 s for derivation, code generation and
compilation): it substitutes q'' = 0 with ``subs``, whose structural
comparisons walk the expressions once per coordinate, and differentiates the
whole Lagrangian for every coordinate. The model forms Lagrange's equations
with :func:`codegen.eom.lagranges_equations` instead (memoized derivatives in
plain symbols, each shared subexpression differentiated once; equal to
SymPy's to rounding): about 2 s for n_p = 10, half of it assembling the
Lagrangian. The LagrangesMethod is kept per element count for the process.
"""

import functools
import math
from collections import namedtuple

import sympy as sm
import sympy.physics.mechanics as me

from ..eom import lagranges_equations
from ..model import Model

DESCRIPTION = ("flexible double pendulum, floating frames with planar beam elements "
               "(González et al.; make_model(elements))")

# González et al., section 4.2: l_p = 4 m, r_p = 0.15 m, rho = 1500 kg/m^3, E = 1e8 N/m^2
DEFAULT_PARAMETERS = {"l": 4.0, "r": 0.15, "rho": 1500.0, "E": 1.0e8, "g": 9.81}
DEFAULT_ELEMENTS = 2
NODAL = ("fx", "fy", "ftheta")      # nodal coordinates of a node: axial, transverse, rotation


def coordinate_names(elements=DEFAULT_ELEMENTS):
    """The names of q in the model's order: per link x, y, theta, then the
    nodal coordinates node by node."""
    names = []
    for link in (1, 2):
        names += [f"x{link}", f"y{link}", f"theta{link}"]
        names += [f"q{link}_{kind}{node}" for node in range(1, elements + 2) for kind in NODAL]
    return names


BeamElement = namedtuple("BeamElement", "S xi le M S_bar S_xy K_axial K_bending")


@functools.lru_cache(maxsize=None)
def beam_element():
    """Shape functions and inertia shape integrals of the planar beam element,
    derived in SymPy.

    In the element's nodal coordinates e = [u_a, v_a, phi_a, u_b, v_b, phi_b]
    (node a at x = 0, node b at x = le; u axial, v transverse, phi = v' the
    rotation of the section), with
    ``xi = x / le``:

    * ``S`` (2 x 6): the displacement field [u; v] = S e, u linear, v the
      cubic with v(0) = v_a, v'(0) = phi_a, v(le) = v_b, v'(le) = phi_b
      (solved here from those four conditions);
    * ``M`` = int S^T S dx: the consistent mass matrix per unit rho A;
    * ``S_bar`` = int S dx (2 x 6) and ``S_xy`` = int S_x^T S_y dx (S_x, S_y:
      the rows of S): Shabana's inertia shape integrals per unit rho A
      (S_xx + S_yy = M);
    * ``K_axial`` = int S_x'^T S_x' dx (times E A) and ``K_bending`` =
      int S_y''^T S_y'' dx (times E I): the stiffness matrix of the
      small-strain element.
    """
    xi, le, x = sm.symbols("xi le x", positive=True)
    e = sm.symbols("u_a v_a phi_a u_b v_b phi_b")
    a = sm.symbols("a0:4")
    axial = e[0] + (e[3] - e[0]) * x / le
    cubic = sum(a[k] * x**k for k in range(4))
    solved = sm.solve([cubic.subs(x, 0) - e[1], cubic.diff(x).subs(x, 0) - e[2],
                       cubic.subs(x, le) - e[4], cubic.diff(x).subs(x, le) - e[5]], a, dict=True)[0]
    field = sm.Matrix([axial, cubic.subs(solved)]).subs(x, xi * le)
    S = sm.expand(field.jacobian(e))

    def integral(f):                  # int_0^le f dx with x = le xi
        return sm.integrate(sm.expand(f), (xi, 0, 1)) * le

    du = S[0, :].diff(xi) / le
    d2v = S[1, :].diff(xi, 2) / le**2
    return BeamElement(S=S, xi=xi, le=le,
                       M=(S.T * S).applyfunc(integral),
                       S_bar=S.applyfunc(integral),
                       S_xy=(S[0, :].T * S[1, :]).applyfunc(integral),
                       K_axial=(du.T * du).applyfunc(integral),
                       K_bending=(d2v.T * d2v).applyfunc(integral))


LinkMatrices = namedtuple("LinkMatrices", "M_ff S_bar S_skew K_axial K_bending q_0")


def link_matrices(elements, length):
    """The element matrices of :func:`beam_element` assembled over one link
    of ``elements`` equal elements along its body x axis (``length`` a SymPy
    expression), in the link's nodal coordinates node by node (nf = 3 (n_p + 1)):
    ``M_ff`` (nf x nf), ``S_bar`` (2 x nf), ``S_skew`` = S_xy - S_xy^T
    (nf x nf) per unit rho A; ``K_axial``, ``K_bending`` per unit E A, E I;
    ``q_0``: the reference nodal coordinates, the undeformed axial positions
    of the nodes (u-bar = S (q_0 + q_f) exactly: the axial shape functions
    are linear)."""
    element = beam_element()
    nf = 3 * (elements + 1)
    at = {element.le: length / elements}
    M, S_skew, K_axial, K_bending = (sm.zeros(nf, nf) for _ in range(4))
    S_bar = sm.zeros(2, nf)
    for j in range(elements):
        for a, i in enumerate(range(3 * j, 3 * j + 6)):
            for b, k in enumerate(range(3 * j, 3 * j + 6)):
                M[i, k] += element.M[a, b].xreplace(at)
                S_skew[i, k] += (element.S_xy[a, b] - element.S_xy[b, a]).xreplace(at)
                K_axial[i, k] += element.K_axial[a, b].xreplace(at)
                K_bending[i, k] += element.K_bending[a, b].xreplace(at)
            for row in range(2):
                S_bar[row, i] += element.S_bar[row, a].xreplace(at)
    q_0 = sm.zeros(nf, 1)
    for node in range(elements + 1):
        q_0[3 * node] = node * length / elements
    return LinkMatrices(M, S_bar, S_skew, K_axial, K_bending, q_0)


def _quadratic(matrix, left, right):
    """left^T matrix right, summed over the structural non-zeros."""
    return sm.Add(*[matrix[i, k] * left[i] * right[k]
                    for i in range(matrix.rows) for k in range(matrix.cols) if matrix[i, k] != 0])


def make_model(elements=DEFAULT_ELEMENTS):
    """The flexible double pendulum with ``elements`` = n_p beam elements per
    link (n_p >= 1): n = 6 n_p + 12 coordinates, 10 configuration constraints.
    The model is named ``flexible_pendulum`` for the default n_p (2),
    ``flexible_pendulum<n_p>`` otherwise."""
    elements = _check_elements(elements)
    lagrange, dependent_q, symbols = _lagranges_method(elements)
    t = me.dynamicsymbols._t
    parameters = {symbols[name]: value for name, value in DEFAULT_PARAMETERS.items()}
    name = "flexible_pendulum" if elements == DEFAULT_ELEMENTS else f"flexible_pendulum{elements}"
    return Model(lagrange, parameters=parameters, name=name,
                 dependent_q=dependent_q, dependent_u=[qi.diff(t) for qi in dependent_q],
                 description=f"flexible double pendulum, {elements} beam element(s) per link "
                             "(González et al.)")


@functools.lru_cache(maxsize=None)
def _lagranges_method(elements):
    """The LagrangesMethod of the system with its equations formed, the
    default dependent coordinates and the parameter symbols. Kept per element
    count for the process (module docstring, "Cost"): a Model only reads it."""
    t = me.dynamicsymbols._t
    symbols = {name: sm.Symbol(name) for name in DEFAULT_PARAMETERS}
    l, r, rho, E, g = (symbols[name] for name in DEFAULT_PARAMETERS)
    mass_per_length = rho * sm.pi * r**2           # rho A
    axial_stiffness = E * sm.pi * r**2             # E A
    bending_stiffness = E * sm.pi * r**4 / 4       # E I

    names = coordinate_names(elements)
    q = me.dynamicsymbols(" ".join(names))
    nf = 3 * (elements + 1)
    link = link_matrices(elements, l)              # per unit rho A, E A, E I

    N = me.ReferenceFrame("N")
    origin = me.Point("o")
    origin.set_vel(N, 0)
    lagrangian = 0
    nodes = []                                     # (first node, last node, q_f) per link
    for k in range(2):
        block = q[k * (nf + 3):(k + 1) * (nf + 3)]
        x, y, theta, q_f = block[0], block[1], block[2], sm.Matrix(block[3:])
        frame = N.orientnew(f"B{k + 1}", "Axis", [theta, N.z])
        frame_origin = origin.locatenew(f"O{k + 1}", x * N.x + y * N.y)
        q_bar = link.q_0 + q_f
        q_f_rate = q_f.diff(t)
        theta_rate = theta.diff(t)
        R_rate = x.diff(t) * N.x + y.diff(t) * N.y

        def in_body(column, frame=frame):
            return column[0] * frame.x + column[1] * frame.y

        first_moment = in_body(link.S_bar * q_bar)     # int u-bar dx (times rho A)
        # T / (rho A), the floating-frame kinetic energy (module docstring)
        kinetic = (l * R_rate.dot(R_rate) / 2
                   + R_rate.dot(theta_rate * frame.z.cross(first_moment)
                                + in_body(link.S_bar * q_f_rate))
                   + theta_rate**2 * _quadratic(link.M_ff, q_bar, q_bar) / 2
                   + theta_rate * _quadratic(link.S_skew, q_bar, q_f_rate)
                   + _quadratic(link.M_ff, q_f_rate, q_f_rate) / 2)
        gravity = g * (l * y + first_moment.dot(N.y))  # V_gravity / (rho A)
        strain = (axial_stiffness * _quadratic(link.K_axial, q_f, q_f)
                  + bending_stiffness * _quadratic(link.K_bending, q_f, q_f)) / 2
        lagrangian += mass_per_length * (kinetic - gravity) - strain
        # the material points of the articulations: the first and last nodes
        nodes.append((frame_origin.locatenew(f"node{k + 1}_1", in_body(q_f[0:2])),
                      frame_origin.locatenew(f"node{k + 1}_{elements + 1}",
                                             in_body([l + q_f[nf - 3], q_f[nf - 2]])),
                      q_f))

    (o_node, end_of_link_1, q1_f), (P1_node, _, q2_f) = nodes
    pin_o = o_node.pos_from(origin)
    pin_P1 = end_of_link_1.pos_from(P1_node)
    f_c = [pin_o.dot(N.x), pin_o.dot(N.y), pin_P1.dot(N.x), pin_P1.dot(N.y),
           *q1_f[0:3], *q2_f[0:3]]                 # tangent frames at the first nodes
    lagrange = me.LagrangesMethod(lagrangian, q, hol_coneqs=f_c, frame=N)
    # lagrange.form_lagranges_equations(), the same equations in a fraction of
    # the time (codegen.eom; module docstring, "Cost")
    lagranges_equations(lagrange)

    dependent = {f"{axis}{k}" for k in (1, 2) for axis in ("x", "y")}
    dependent |= {f"q{k}_{kind}1" for k in (1, 2) for kind in NODAL}
    dependent_q = [qi for qi, name in zip(q, names) if name in dependent]
    return lagrange, dependent_q, symbols


def _check_elements(elements):
    if isinstance(elements, bool) or int(elements) != elements or elements < 1:
        raise ValueError(f"elements must be a positive integer, got {elements!r}")
    return int(elements)


# -- operating points ---------------------------------------------------------------


def _configuration(parameters, elements, stretch):
    """q of the hanging links (theta = -pi/2) with axial nodal displacements
    ``stretch(link, s)`` at the distance s of a node from the link's first node."""
    l = parameters["l"]
    q = []
    top = 0.0                              # y of the link's first node
    for link in (1, 2):
        nodal = []
        for node in range(elements + 1):
            s = l * node / elements
            nodal += [stretch(link, s), 0.0, 0.0]
        q += [0.0, top, -math.pi / 2] + nodal
        top -= l + nodal[-3]
    return q


def hanging(parameters, elements=DEFAULT_ELEMENTS):
    """theta_1 = theta_2 = -pi/2, undeformed, at rest (not an equilibrium: under
    gravity the links stretch)."""
    elements = _check_elements(elements)
    q = _configuration(parameters, elements, lambda link, s: 0.0)
    return q, [0.0] * len(q)


def equilibrium(parameters, elements=DEFAULT_ELEMENTS):
    """The hanging static equilibrium: theta_1 = theta_2 = -pi/2 with the axial
    static stretch under the links' own weight (exact at the nodes, see the
    module docstring)."""
    elements = _check_elements(elements)
    l, rho, E, g = (parameters[name] for name in ("l", "rho", "E", "g"))
    carried = {1: 2 * l, 2: l}         # the length of rod hanging below s = 0

    def stretch(link, s):
        return rho * g / E * (carried[link] * s - s**2 / 2)
    q = _configuration(parameters, elements, stretch)
    return q, [0.0] * len(q)


OPERATING_POINTS = {"equilibrium": equilibrium, "hanging": hanging}
DEFAULT_OPERATING_POINT = ("equilibrium", {})


def rigid_limit(parameters):
    """The two eigenvalue pairs (imaginary parts, rad/s) of the rigid double
    pendulum of two thin uniform rods hanging, the limit E -> infinity:
    roots of 7 w^4 - 42 (g/l) w^2 + 27 (g/l)^2 = 0."""
    ratio = parameters["g"] / parameters["l"]
    root = math.sqrt(42.0**2 - 4 * 7 * 27)
    return tuple(math.sqrt((42.0 + sign * root) / 14.0 * ratio) for sign in (-1, 1))


def expected_eigenvalues(parameters, name, **kwargs):
    if name != "equilibrium":
        return None
    slow, fast = rigid_limit(parameters)
    return (f"rigid limit (E -> infinity): +/-{slow:.6g}i, +/-{fast:.6g}i "
            "[two thin uniform rods]; the first two pairs approach these as E grows")
