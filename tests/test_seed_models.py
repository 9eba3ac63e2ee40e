"""The seed systems of González et al. and Spencer's thesis as built-in models,
checked against references that do not use codegen's derivation:

* fourbar (N-loop four-bar linkage, natural coordinates): the eigenvalues at
  the static equilibria against the closed form of the one-degree-of-freedom
  parallelogram motion, derived here with SymPy from the geometry (undamped
  and damped, N = 1, 2, and another gravity direction and stiffness); the
  singular configuration of the paper (N = 1, k = 0, gravity along +x): J_c
  loses a rank, today's linearization refuses it, and the paper's
  +/-3.4310i, +/-4.4294i are what the minimum-norm multipliers of these
  coordinates give (the reference for the local state-space form to come).
* spencer_pendulum: +/- i sqrt(g/l) hanging; the linearization in the chart
  of either coordinate at a moving point against its closed form; the
  default partition fails at q2 = 0, the other one works there.
* parallel_fourbar: the eigenvalues at an equilibrium held by the motor
  torques against the closed form in (q1, q2); linearize_full's coordinate
  rows give Spencer's constant K at every point.
* five_bar (Table 3.1): equilibrium, Spencer's configurations, J_c rank 1 at
  (pi, 0, 0, pi) where linearize raises SingularMatrixError.

At equilibria the eigenvalues do not depend on the partition (Spencer,
Theorem 4.1.1): checked with every valid dependent set tried. A and B
against constrained finite differences and SymPy's Linearizer
(tests/reference.py) at moving points. SymPy's Linearizer is used through
its blocks M, A~, B~ with a NumPy solve: its own LUsolve of the numeric M
pivots on an entry that vanishes on the constraint manifold but is 1e-16 in
floating point (the five-bar's d f_a/d u1' is the tip's y coordinate) and
returns garbage (test_sympy_linearizer_pivots_on_rounding_noise).
"""

import math
from collections import namedtuple

import numpy as np
import pytest
import sympy as sm
from scipy.optimize import brentq

import codegen
from codegen.errors import SingularMatrixError
from codegen.models import five_bar, fourbar, parallel_fourbar, spencer_pendulum

import reference
from reference import assert_matrices_close
from local_checks import parallelogram_one_dof

Built = namedtuple("Built", "model compiled ref defaults")


def _build(model, build_dir):
    """The compiled module and a reference on the same KanesMethod (the
    user's kane that the Model keeps; nothing of codegen's derivation)."""
    compiled = codegen.build(model, output_dir=build_dir)
    parameters = dict(zip(model.parameters, model.parameter_values))
    ref = reference.KaneReference(model.kane, parameters, model.inputs)
    return Built(model, compiled, ref, dict(zip(model.p_names, model.parameter_values)))


@pytest.fixture(scope="module")
def fourbar1(build_dir):
    return _build(fourbar.make_model(1), build_dir)


@pytest.fixture(scope="module")
def fourbar2(build_dir):
    return _build(fourbar.make_model(2), build_dir)


@pytest.fixture(scope="module")
def pendulum(build_dir):
    return _build(spencer_pendulum.make_model(), build_dir)


@pytest.fixture(scope="module")
def parallel(build_dir):
    return _build(parallel_fourbar.make_model(), build_dir)


@pytest.fixture(scope="module")
def fivebar(build_dir):
    return _build(five_bar.make_model(), build_dir)


def _sorted(values):
    """By imaginary, then real part (rounded: parts that are zero come out as
    +-1e-16 and must not decide the order)."""
    values = np.asarray(values, dtype=complex)
    return values[np.lexsort((np.round(values.real, 6), np.round(values.imag, 6)))]


def eigenvalues(A):
    return _sorted(np.linalg.eigvals(A))


def assert_eigenvalues_close(actual, expected, rtol=1e-9, label=""):
    actual, expected = _sorted(actual), _sorted(expected)
    scale = max(1.0, np.abs(expected).max())
    assert np.abs(actual - expected).max() <= rtol * scale, (label, actual, expected)


def constraint_jacobian(built, q, p=None):
    """J_c at q from the reference's f_v = J_c u (velocity constraints are the
    time derivatives of f_c here): column j is f_v at u = e_j."""
    return np.column_stack([built.ref.residuals(q, np.eye(built.ref.nu)[j], p)[1]
                            for j in range(built.ref.nu)])


def linearizer_full(built, q, u, r=None, p=None):
    """SymPy's Linearizer blocks at the point, M^-1 [A~, B~] by NumPy (rows: all
    coordinates, then all speeds, in the model's order)."""
    M, A_tilde, B_tilde = built.ref.linearizer().linearize(op_point=built.ref.op_point(q, u, r, p))
    M = np.array(M.evalf(), dtype=float)
    A = np.linalg.solve(M, np.array(A_tilde.evalf(), dtype=float))
    B = (np.linalg.solve(M, np.array(B_tilde.evalf(), dtype=float)) if built.ref.nr
         else np.zeros((len(M), 0)))
    return A, B


def independent_rows(built):
    names = built.compiled.full_state_names
    return [names.index(n) for n in built.compiled.state_names]


def check_against_references(built, q, u, r=None, p=None, linearizer=True):
    A, B = built.compiled.linearize(q, u, r, p)
    A_fd, B_fd = built.ref.constrained_fd_AB(q, u, r, p)
    assert_matrices_close(A, A_fd, 1e-6, f"{built.model.name} A vs finite differences")
    assert_matrices_close(B, B_fd, 1e-6, f"{built.model.name} B vs finite differences")
    if linearizer:
        A_full, B_full = built.compiled.linearize_full(q, u, r, p)
        A_lin, B_lin = linearizer_full(built, q, u, r, p)
        assert_matrices_close(A_full, A_lin, 1e-9, f"{built.model.name} A' vs SymPy's Linearizer")
        assert_matrices_close(B_full, B_lin, 1e-9, f"{built.model.name} B' vs SymPy's Linearizer")
        rows = independent_rows(built)
        assert np.array_equal(A_full[rows], A) and np.array_equal(B_full[rows], B)


def check_partition_invariance(built, q, u, r, partitions, p=None, rtol=1e-9):
    """Spencer's Theorem 4.1.1: at an equilibrium every valid partition gives
    the same eigenvalues."""
    reference_values = eigenvalues(built.compiled.linearize(q, u, r, p)[0])
    for dependent_q, dependent_u in partitions:
        A, _ = built.compiled.linearize(q, u, r, p, dependent_q=dependent_q, dependent_u=dependent_u)
        assert_eigenvalues_close(eigenvalues(A), reference_values, rtol,
                                 f"{built.model.name} with {dependent_q}, {dependent_u}")
    return reference_values


# -- N-loop four-bar: closed form of the parallelogram motion, derived here ------------


def fourbar_reference(parameters, loops, bracket):
    """Equilibrium angle (SciPy's brentq in ``bracket``) and the two
    eigenvalues: roots of I s^2 + C s + V'' = 0."""
    inertia, slope, curvature, damping = parallelogram_one_dof(loops)
    values = [parameters[n] for n in ("l", "m", "g", "gravity_angle", "k", "l0", "c")]
    phi = brentq(lambda x: slope(x, *values), *bracket, xtol=1e-15, rtol=1e-15)
    I, C, K = inertia(phi, *values), damping(phi, *values), curvature(phi, *values)
    return phi, np.roots([I, C, K])


@pytest.mark.parametrize("loops, bracket, expected_phi",
                         [(1, (1.6, 3.0), 2.234331), (2, (1.6, 3.0), 2.027132)])
@pytest.mark.parametrize("damping", [0.0, 1.0])
def test_fourbar_equilibrium_eigenvalues_closed_form(request, loops, bracket, expected_phi, damping):
    built = request.getfixturevalue(f"fourbar{loops}")
    parameters = dict(built.defaults, c=damping)
    phi_ref, s_ref = fourbar_reference(parameters, loops, bracket)
    assert abs(phi_ref - expected_phi) < 1e-6
    q, u = fourbar.equilibrium(parameters, loops=loops)
    assert abs(q[0] - phi_ref) < 1e-12
    _, ud = built.compiled.state_derivative(q, u, p={"c": damping})
    assert np.abs(ud).max() < 1e-11, "the point is an equilibrium"
    A, _ = built.compiled.linearize(q, u, p={"c": damping})
    assert A.shape == (2, 2) and built.compiled.state_names == ("phi", "omega")
    assert_eigenvalues_close(eigenvalues(A), s_ref, 1e-10, f"N = {loops}, c = {damping}")
    assert_eigenvalues_close(fourbar.closed_form(parameters, q[0], loops), s_ref, 1e-12)
    if damping:
        assert np.all(eigenvalues(A).real < 0)
    else:
        assert np.abs(eigenvalues(A).real).max() < 1e-12


def test_fourbar_other_gravity_direction_and_stiffness(fourbar2):
    """Runtime parameters: gravity tilted by -0.3 rad, k = 40, l0 = 1.3,
    damped: the leaning and the hanging stable equilibria and the unstable one
    between them; and the hanging phi = -pi/2 of the paper's values."""
    parameters = dict(fourbar2.defaults, gravity_angle=-math.pi / 2 - 0.3, k=40.0, l0=1.3, c=0.5)
    p = fourbar2.compiled.parameters(**{n: parameters[n] for n in ("gravity_angle", "k", "l0", "c")})
    for guess, bracket, stable in ((2.0, (1.6, 3.0), True), (-1.5, (-2.5, -1.0), True),
                                   (0.8, (0.3, 1.2), False)):
        q, u = fourbar.equilibrium(parameters, loops=2, guess=guess, stable=stable)
        phi_ref, s_ref = fourbar_reference(parameters, 2, bracket)
        assert abs(q[0] - phi_ref) < 1e-12
        A, _ = fourbar2.compiled.linearize(q, u, p=p)
        assert_eigenvalues_close(eigenvalues(A), s_ref, 1e-10)
        assert (eigenvalues(A).real.max() < 0) == stable
    q, u = fourbar.equilibrium(fourbar2.defaults, loops=2, guess=-1.5)
    assert abs(q[0] + math.pi / 2) < 1e-12


def test_fourbar_partition_invariance_at_equilibrium(fourbar1, fourbar2):
    """Any single coordinate (speed) of the crank tips may be the independent one."""
    for built, loops in ((fourbar1, 1), (fourbar2, 2)):
        for damping in (0.0, 1.0):
            parameters = dict(built.defaults, c=damping)
            q, u = fourbar.equilibrium(parameters, loops=loops)
            p = built.compiled.parameters(c=damping)
            names_q, names_u = built.compiled.q_names, built.compiled.u_names
            partitions = []
            for independent in (1, 2, len(names_q) - 1):    # x0, y0, y_N
                partitions.append(([n for j, n in enumerate(names_q) if j != independent],
                                   [n for j, n in enumerate(names_u) if j != independent]))
            partitions.append((partitions[0][0], partitions[2][1]))    # mixed
            values = check_partition_invariance(built, q, u, None, partitions, p, rtol=1e-9)
            _, s_ref = fourbar_reference(parameters, loops, (1.6, 3.0))
            assert_eigenvalues_close(values, s_ref, 1e-10)


def test_fourbar_against_references_at_moving_points(fourbar1, fourbar2):
    for built, loops in ((fourbar1, 1), (fourbar2, 2)):
        q, u = fourbar.general(built.defaults, loops=loops, phi=1.2, omega=0.7)
        p = built.compiled.parameters(c=1.0, gravity_angle=-1.3)
        check_against_references(built, q, u, None, p, linearizer=loops == 1)
        # another partition: x0 independent
        names_q, names_u = built.compiled.q_names, built.compiled.u_names
        dq, du = [n for n in names_q if n != "x0"], [n for n in names_u if n != "vx0"]
        A, _ = built.compiled.linearize(q, u, None, p, dependent_q=dq, dependent_u=du)
        A_fd, _ = built.ref.constrained_fd_AB(q, u, None, p, dependent_q=[names_q.index(n) for n in dq],
                                              dependent_u=[names_u.index(n) for n in du])
        assert_matrices_close(A, A_fd, 1e-6, "x0 independent")


def test_fourbar_singular_flat_configuration(fourbar1):
    """González's singular case: N = 1, k = 0, gravity along +x, phi = 0. J_c
    loses a rank (every rod on the x axis); today's linearization refuses the
    point with a SingularMatrixError (the speed-level KKT matrix [M B_v^T; B_v 0]
    is singular once B_v loses rank)."""
    built = fourbar1
    parameters = dict(built.defaults, k=0.0, gravity_angle=0.0)
    p = built.compiled.parameters(k=0.0, gravity_angle=0.0)
    q, u = fourbar.flat(parameters)
    f_c, f_v = built.compiled.constraint_residuals(q, u, p=p)
    assert np.abs(np.concatenate([f_c, f_v])).max() < 1e-15
    J_c = constraint_jacobian(built, q, p)
    assert np.linalg.matrix_rank(J_c, tol=1e-12) == 3 == built.compiled.nc - 1
    for dependent_q, dependent_u in ((None, None), (["x0", "y0", "x1", "phi"], ["vx0", "vy0", "vx1", "omega"])):
        # the error names the cause (the rank of J_c and B_v), not a matrix that is
        # singular only as a consequence
        with pytest.raises(SingularMatrixError, match=r"J_c = d f_c/d q has rank 3 of 4 .*"
                           r"B_v = d f_v/d u has rank 3 of 4 .*singular configuration") as error:
            built.compiled.linearize(q, u, p=p, dependent_q=dependent_q, dependent_u=dependent_u)
        assert not str(error.value).startswith("fourbar: the speed mass matrix")
    # a regular point close by is fine
    q, u = fourbar.general(parameters, phi=0.05, omega=0.0)
    built.compiled.linearize(q, u, p=p)


def test_gonzalez_singular_eigenvalues_from_minimum_norm_multipliers(fourbar1):
    """The paper's +/-3.4310i and +/-4.4294i at the flat configuration are the
    linearization with the minimum-norm multipliers of these constraints,
    projected on the null space of J_c (two directions): built here from the
    model's f_c (its Hessians), the natural-coordinate mass matrix of uniform
    rods m/3 [[I, I/2], [I/2, I]] and the gravity force. Exact values:
    sqrt(6 g/5) and sqrt(2 g). (The reference for the local state-space form.)"""
    ref = fourbar1.ref
    g = 9.81
    q_plain = sm.symbols("phi x0 y0 x1 y1")
    symbols = {s.name: s for s in fourbar1.model.parameters}
    f_c = sm.Matrix(ref.equations().f_c).xreplace(dict(zip(ref.q, q_plain)))
    values = {symbols["l"]: 1.0, symbols["k"]: 0.0}
    point = dict(zip(q_plain, (0.0, 1.0, 0.0, 2.0, 0.0)))
    J = np.array(f_c.jacobian(q_plain).xreplace(values).xreplace(point), dtype=float)
    hessians = [np.array(sm.hessian(row, q_plain).xreplace(values).xreplace(point), dtype=float)
                for row in f_c]
    # mass matrix: cranks A0-B0, A1-B1 (A fixed) and coupler B0-B1, m = l = 1
    M = np.zeros((5, 5))
    B0, B1 = [1, 2], [3, 4]
    for tip in (B0, B1):
        M[np.ix_(tip, tip)] += np.eye(2) / 3
    M[np.ix_(B0 + B1, B0 + B1)] += np.kron([[1, 0.5], [0.5, 1]], np.eye(2)) / 3
    Q = np.array([0.0, g, 0.0, g, 0.0])           # weight along +x: m g at each tip
    lam = -np.linalg.pinv(J.T) @ Q                 # Q + J^T lam = 0, minimum norm
    assert np.abs(Q + J.T @ lam).max() < 1e-12
    null = np.linalg.svd(J)[2][np.linalg.matrix_rank(J):].T
    assert null.shape == (5, 2)
    stiffness = -sum(li * H for li, H in zip(lam, hessians))
    omega2 = np.linalg.eigvals(np.linalg.solve(null.T @ M @ null, null.T @ stiffness @ null))
    omega = np.sort(np.sqrt(omega2.real))
    np.testing.assert_allclose(omega, [math.sqrt(6 * g / 5), math.sqrt(2 * g)], rtol=1e-12)
    np.testing.assert_allclose(omega, fourbar.SINGULAR_EIGENVALUES, atol=5e-5)


# -- Spencer's Cartesian pendulum ---------------------------------------------------------


def pendulum_chart_A(chart, angle, rate, l, g):
    """A of the pendulum in the chart (s, s') with s = l sin(theta) ("q1") or
    s = -l cos(theta) ("q2"), theta from the downward vertical: the map
    (theta, theta') -> (s, s') composed with theta'' = -(g/l) sin(theta)."""
    th, w = sm.symbols("theta w")
    s = l * sm.sin(th) if chart == "q1" else -l * sm.cos(th)
    s_dot = s.diff(th) * w
    s_ddot = s.diff(th, 2) * w**2 + s.diff(th) * (-g / l * sm.sin(th))
    to_chart = sm.Matrix([s, s_dot]).jacobian([th, w])
    flow = sm.Matrix([s_dot, s_ddot]).jacobian([th, w])
    A = flow * to_chart.inv()
    return np.array(A.subs({th: angle, w: rate}).evalf(), dtype=float)


def test_pendulum_hanging(pendulum):
    c = pendulum.compiled
    assert c.q_names == ("q1", "q2") and c.state_names == ("q1", "u1")
    for l, g in ((1.0, 9.81), (2.0, 1.5)):
        q, u = spencer_pendulum.hanging({"m": 1.0, "l": l, "g": g})
        A, _ = c.linearize(q, u, p={"l": l, "g": g})
        assert_eigenvalues_close(eigenvalues(A), [-1j * math.sqrt(g / l), 1j * math.sqrt(g / l)], 1e-12)
        np.testing.assert_allclose(A, pendulum_chart_A("q1", 0.0, 0.0, l, g), atol=1e-12)
    # q1 dependent is singular at the hanging position (q1 = 0): no other valid partition here
    with pytest.raises(SingularMatrixError, match=r"J_c P_qd.*\['q1'\]"):
        c.linearize(q, u, p={"l": l, "g": g}, dependent_q=["q1"], dependent_u=["u1"])


@pytest.mark.parametrize("angle, rate", [(0.6, 0.0), (0.6, 1.3), (-2.2, -0.8)])
def test_pendulum_charts_at_moving_points(pendulum, angle, rate):
    """Each chart's A against its closed form (they differ away from equilibria)."""
    c = pendulum.compiled
    q, u = spencer_pendulum.at_angle(pendulum.defaults, angle, rate)
    A1, _ = c.linearize(q, u)
    np.testing.assert_allclose(A1, pendulum_chart_A("q1", angle, rate, 1.0, 9.81), rtol=1e-12, atol=1e-12)
    A2, _ = c.linearize(q, u, dependent_q=["q1"], dependent_u=["u1"])
    np.testing.assert_allclose(A2, pendulum_chart_A("q2", angle, rate, 1.0, 9.81), rtol=1e-12, atol=1e-12)
    check_against_references(pendulum, q, u)


def test_pendulum_default_partition_fails_at_q2_zero(pendulum):
    """Spencer's example: y_q = q1 fails where q2 = 0; q2 works there."""
    c = pendulum.compiled
    q, u = spencer_pendulum.horizontal(pendulum.defaults, rate=0.4)
    with pytest.raises(SingularMatrixError, match=r"J_c P_qd.*\['q2'\]"):
        c.linearize(q, u)
    A, _ = c.linearize(q, u, dependent_q=["q1"], dependent_u=["u1"])
    np.testing.assert_allclose(A, pendulum_chart_A("q2", math.pi / 2, 0.4, 1.0, 9.81), atol=1e-12)


# -- Spencer's parallel four-bar robot ----------------------------------------------------


def parallel_fourbar_reference(parameters, q1, q2):
    """Eigenvalues at rest at (q1, q2) under constant holding torques, from the
    parallelogram's kinetic and potential energy in (q1, q2) derived here:
    body 3 parallel to body 1 (hinged at C = L2 e(q2)), body 4 parallel to
    body 2 (from D = C + L1 e(q1) back to A = L1 e(q1))."""
    a, b, ra, rb = sm.symbols("a b r_a r_b")
    L1, L2, m1, m2, m3, m4, g = (parameters[n] for n in ("L1", "L2", "m1", "m2", "m3", "m4", "g"))
    e = lambda angle: sm.Matrix([sm.cos(angle), sm.sin(angle)])  # noqa: E731
    bodies = [  # (centre, angular rate, mass, length)
        (L1 / 2 * e(a), ra, m1, L1),
        (L2 / 2 * e(b), rb, m2, L2),
        (L2 * e(b) + L1 / 2 * e(a), ra, m3, L1),
        (L1 * e(a) + L2 / 2 * e(b), rb, m4, L2),
    ]
    kinetic, potential = 0, 0
    for centre, omega, mass, length in bodies:
        v = centre.jacobian([a, b]) * sm.Matrix([ra, rb])
        kinetic += mass * v.dot(v) / 2 + mass * length**2 / 12 * omega**2 / 2
        potential += mass * g * centre[1]
    point = {a: q1, b: q2}
    M = np.array(sm.hessian(kinetic, [ra, rb]).subs(point), dtype=float)
    K = np.array(sm.hessian(potential, [a, b]).subs(point), dtype=float)
    omega = np.sqrt(np.linalg.eigvals(np.linalg.solve(M, K)).astype(complex))
    return np.concatenate([1j * omega, -1j * omega])


SPENCER_K = np.array([[1, 0], [0, 1], [1, -1], [-1, 1]], dtype=float)


def test_parallel_fourbar_equilibrium(parallel):
    c = parallel.compiled
    assert c.state_names == ("q1", "q2", "u1", "u2") and c.r_names == ("T1", "T2")
    for q1, q2 in ((-math.pi / 3, -2 * math.pi / 3), (-1.2, -2.5)):
        q, u, r = parallel_fourbar.equilibrium(parallel.defaults, q1, q2)
        _, ud = c.state_derivative(q, u, r)
        assert np.abs(ud).max() < 1e-12
        A, _ = c.linearize(q, u, r)
        expected = parallel_fourbar_reference(parallel.defaults, q1, q2)
        assert_eigenvalues_close(eigenvalues(A), expected, 1e-10)
        assert_eigenvalues_close(parallel_fourbar.closed_form(parallel.defaults, q1, q2), expected, 1e-12)
        partitions = [(["q1", "q3"], ["u1", "u3"]), (["q2", "q4"], ["u2", "u4"]),
                      (["q1", "q4"], ["u2", "u3"]), (["q2", "q3"], ["u1", "u4"])]
        check_partition_invariance(parallel, q, u, r, partitions, rtol=1e-10)
    check_against_references(parallel, q, u, r)


def test_parallel_fourbar_dependent_rows_give_spencers_K(parallel):
    """The coordinate rows of A' (all coordinates) in the columns of the
    independent speeds u1, u2 are d q'/d(u1, u2) = K, at rest and moving, and
    the dependent speed rows are the same combination of the independent ones."""
    c = parallel.compiled
    full = c.full_state_names
    rows_q = [full.index(n) for n in c.q_names]
    rows_u = [full.index(n) for n in c.u_names]
    for q, u, r in (parallel_fourbar.equilibrium(parallel.defaults),
                    parallel_fourbar.general(parallel.defaults)):
        A_full, B_full = c.linearize_full(q, u, r)
        np.testing.assert_allclose(A_full[np.ix_(rows_q, [2, 3])], SPENCER_K, atol=1e-13)
        np.testing.assert_allclose(A_full[np.ix_(rows_q, [0, 1])], 0.0, atol=1e-13)
        np.testing.assert_allclose(A_full[rows_u], SPENCER_K @ A_full[rows_u[:2]], atol=1e-11)
        np.testing.assert_allclose(B_full[rows_u], SPENCER_K @ B_full[rows_u[:2]], atol=1e-12)


def test_parallel_fourbar_at_moving_point_and_flat(parallel):
    q, u, r = parallel_fourbar.general(parallel.defaults)
    check_against_references(parallel, q, u, r)
    # the flat parallelogram (q1 = q2): every body on one line, J_c has rank 1
    q, u, r = parallel_fourbar.flat(parallel.defaults)
    J_c = constraint_jacobian(parallel, q)
    assert np.linalg.matrix_rank(J_c, tol=1e-12) == 1
    with pytest.raises(SingularMatrixError):
        parallel.compiled.linearize(q, u, r)


# -- Spencer's five-bar mechanism ---------------------------------------------------------


FIVE_BAR_PARTITIONS = [(["q1", "q2"], ["u1", "u2"]), (["q1", "q3"], ["u1", "u3"]),
                       (["q2", "q4"], ["u2", "u4"]), (["q1", "q4"], ["u1", "u4"]),
                       (["q2", "q3"], ["u2", "u3"]), (["q3", "q4"], ["u1", "u2"])]


def test_five_bar_table_3_1_and_spencers_configurations(fivebar):
    c = fivebar.compiled
    assert c.q_names == ("q1", "q2", "q3", "q4") and c.state_names == ("q1", "q2", "u1", "u2")
    assert fivebar.defaults["L1"] == fivebar.defaults["L4"] == 1.0
    assert fivebar.defaults["L2"] == fivebar.defaults["L3"] == 1.5
    assert [fivebar.defaults[n] for n in ("m1", "m4", "m2", "m3", "I1", "I4", "I2", "I3")] == [2, 2, 3, 3, 1, 1, 2, 2]
    q, u = five_bar.symmetric(fivebar.defaults)
    side = math.pi / 3 + math.acos(2 / 3)
    spencer = [2 * math.pi / 3, side, 2 * math.asin(2 / 3), side]      # his ex. 2 start
    np.testing.assert_allclose([q[0], q[1], q[3]], [spencer[0], spencer[1], spencer[3]], atol=1e-14)
    assert abs(q[2] - (spencer[2] - math.pi)) < 1e-14      # his q3 is the interior angle
    for point in (five_bar.symmetric, five_bar.singular, five_bar.moving, five_bar.hanging):
        q, u = point(fivebar.defaults)
        f_c, f_v = c.constraint_residuals(q, u)
        assert np.abs(np.concatenate([f_c, f_v])).max() < 1e-13, point.__name__


def test_five_bar_hanging_equilibrium(fivebar):
    c = fivebar.compiled
    q, u = five_bar.hanging(fivebar.defaults)
    _, ud = c.state_derivative(q, u)
    assert np.abs(ud).max() < 1e-12
    values = check_partition_invariance(fivebar, q, u, None, FIVE_BAR_PARTITIONS, rtol=1e-9)
    assert np.abs(values.real).max() < 1e-10 and np.all(np.abs(values.imag) > 1.0)
    A_fd, _ = fivebar.ref.constrained_fd_AB(q, u)
    assert_eigenvalues_close(values, eigenvalues(A_fd), 1e-7)


def test_five_bar_against_references_at_a_moving_point(fivebar):
    q, u = five_bar.moving(fivebar.defaults)
    check_against_references(fivebar, q, u, linearizer=False)   # SymPy's: next test
    for dependent_q, dependent_u in FIVE_BAR_PARTITIONS[:3]:
        A, _ = fivebar.compiled.linearize(q, u, dependent_q=dependent_q, dependent_u=dependent_u)
        A_fd, _ = fivebar.ref.constrained_fd_AB(
            q, u, dependent_q=[int(n[1]) - 1 for n in dependent_q],
            dependent_u=[int(n[1]) - 1 for n in dependent_u])
        assert_matrices_close(A, A_fd, 1e-6, f"{dependent_q}, {dependent_u}")


def test_five_bar_singular_configuration(fivebar):
    """(pi, 0, 0, pi): every link on the x axis, J_c has rank 1; every
    partition fails today (SingularMatrixError), the local state-space form
    will handle it."""
    c = fivebar.compiled
    q, u = five_bar.singular(fivebar.defaults)
    J_c = constraint_jacobian(fivebar, q)
    assert np.linalg.matrix_rank(J_c, tol=1e-12) == 1
    assert np.abs(J_c[0]).max() < 1e-15
    for dependent_q, dependent_u in [(None, None)] + FIVE_BAR_PARTITIONS:
        with pytest.raises(SingularMatrixError, match=r"J_c = d f_c/d q has rank 1 of 2 here "
                           r"\(smallest singular values .*; dependent rows: f_c\[0\]\)"):
            c.linearize(q, u, dependent_q=dependent_q, dependent_u=dependent_u)


def test_sympy_linearizer_pivots_on_rounding_noise(fivebar):
    """Why linearizer_full solves with NumPy: in SymPy's numeric M the entry
    d f_a[0]/d u1' equals the tip's y coordinate, zero on the constraint
    manifold but 9e-16 at the point, and SymPy's LUsolve takes it as a pivot."""
    q, u = five_bar.moving(fivebar.defaults)
    A, _ = fivebar.compiled.linearize(q, u)
    A_sympy, _ = fivebar.ref.linearizer_AB(q, u)
    assert np.abs(A_sympy - A).max() > 0.1
    A_numpy, _ = linearizer_full(fivebar, q, u)
    assert_matrices_close(A_numpy[independent_rows(fivebar)], A, 1e-9)


# -- the built-in registry ----------------------------------------------------------------


@pytest.mark.parametrize("name, module", [("fourbar", fourbar), ("spencer_pendulum", spencer_pendulum),
                                          ("parallel_fourbar", parallel_fourbar), ("five_bar", five_bar)])
def test_builtin_contract(request, name, module):
    """Registered, parameters in Model order, default point consistent and
    regular, every operating point consistent."""
    from codegen.models import BUILTIN, builtin_module
    fixture = {"fourbar": "fourbar1", "spencer_pendulum": "pendulum", "parallel_fourbar": "parallel",
               "five_bar": "fivebar"}[name]
    built = request.getfixturevalue(fixture)
    assert name in BUILTIN and builtin_module(name) is module
    assert list(module.DEFAULT_PARAMETERS) == list(built.compiled.p_names)
    np.testing.assert_array_equal(list(module.DEFAULT_PARAMETERS.values()), built.compiled.default_parameters)
    point_name, kwargs = module.DEFAULT_OPERATING_POINT
    op = codegen.operating_point(name, point_name, **kwargs)
    A, B = built.compiled.linearize(op.q, op.u, op.r, op.p)
    assert np.all(np.isfinite(A))
    for point_name in module.OPERATING_POINTS:
        op = codegen.operating_point(name, point_name)
        f_c, f_v = built.compiled.constraint_residuals(op.q, op.u, p=op.p)
        assert np.abs(np.concatenate([f_c, f_v])).max() < 1e-12, point_name
    if hasattr(module, "expected_eigenvalues"):
        point_name, kwargs = module.DEFAULT_OPERATING_POINT
        text = module.expected_eigenvalues(dict(module.DEFAULT_PARAMETERS), point_name, **kwargs)
        assert text
