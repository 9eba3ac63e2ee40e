"""The rolling disk against independent references (tests/reference.py): SymPy's
Linearizer at numeric operating points and constrained finite differences, at
random consistent points that are not equilibria (leaning, accelerating, with
parameters other than the chapter's); and the chapter's naive-Jacobian pitfall.
"""

import math

import numpy as np
import pytest

import codegen
from codegen.models import disk as disk_source

import reference
from reference import assert_matrices_close

SEEDS = [101, 202, 303]


@pytest.fixture(scope="module")
def disk_ref():
    kane, kwargs = reference.capture_kane(disk_source)
    return reference.KaneReference(kane, kwargs["parameters"], kwargs["inputs"])


def random_point(ref, seed):
    """A consistent, non-equilibrium point: random configuration with lean
    0.3 <= |q2| <= 1, random independent speeds, random parameters; q6 and
    u4, u5, u6 solved by the reference (Newton on f_c, linear solve of f_v)."""
    rng = np.random.default_rng(seed)
    p = np.array([rng.uniform(0.5, 2.0), rng.uniform(0.3, 1.5), rng.uniform(1.0, 10.0)])  # m, r, g
    q = np.concatenate([rng.uniform(-math.pi, math.pi, 5), [0.0]])
    q[1] = rng.uniform(0.3, 1.0) * rng.choice([-1, 1])
    u = np.concatenate([rng.uniform(-2.0, 2.0, 3), [0.0, 0.0, 0.0]])
    q, u = ref.complete(q, u, p)
    return q, u, p


@pytest.fixture(scope="module")
def points(disk_ref):
    return [random_point(disk_ref, seed) for seed in SEEDS]


def test_state_order_matches_sympy(disk, disk_ref):
    expected = ("q1", "q2", "q3", "q4", "q5", "u1", "u2", "u3")
    assert disk.state_names == disk_ref.linearizer_state_names() == expected
    other = disk.independent_state_names(dependent_q=["q2"], dependent_u=["u1", "u4", "u6"])
    assert other == disk_ref.linearizer_state_names([1], [0, 3, 5])


def test_points_are_consistent_and_accelerating(disk, disk_ref, points):
    for q, u, p in points:
        f_c, f_v = disk.constraint_residuals(q, u, p=p)
        assert np.abs(np.concatenate([f_c, f_v])).max() < 1e-12
        # codegen's own completion finds the same dependent values
        q_c, u_c = disk.complete(q + np.r_[0, 0, 0, 0, 0, 0.05], np.r_[u[:3], 9.0, 9.0, 9.0], p=p)
        np.testing.assert_allclose(q_c, q, rtol=0, atol=1e-12)
        np.testing.assert_allclose(u_c, u, rtol=0, atol=1e-12)
        qd, ud = disk_ref.state_derivative(q, u, None, p)
        assert np.abs(ud[:3]).max() > 0.1, "not an equilibrium"


def test_state_derivative_matches_sympy(disk, disk_ref, points):
    for q, u, p in points:
        qd, ud = disk.state_derivative(q, u, None, p)
        qd_ref, ud_ref = disk_ref.state_derivative(q, u, None, p)
        assert_matrices_close(np.concatenate([qd, ud]), np.concatenate([qd_ref, ud_ref]), 1e-12)


def test_linearize_matches_sympy_linearizer(disk, disk_ref, points):
    """To 1e-10 (relative to the largest entry of A)."""
    for q, u, p in points:
        A, B = disk.linearize(q, u, None, p)
        A_ref, B_ref = disk_ref.linearizer_AB(q, u, None, p)
        assert A.shape == A_ref.shape == (8, 8) and B.shape == B_ref.shape == (8, 0)
        assert_matrices_close(A, A_ref, 1e-10)
    # the plain helper (a fresh Linearizer from kane.to_linearizer()) agrees
    q, u, p = points[0]
    A_plain, B_plain = reference.linearizer_AB(disk_ref.kane, disk_ref.op_point(q, u, None, p))
    assert_matrices_close(disk.linearize(q, u, None, p)[0], A_plain, 1e-10)


def test_linearize_full_matches_sympy(disk, disk_ref, points):
    """All 12 rows (dependent coordinates and speeds too): SymPy's M^-1 A~."""
    q, u, p = points[0]
    lin = disk_ref.linearizer()
    M, A_tilde, _ = lin.linearize(op_point=disk_ref.op_point(q, u, None, p))
    expected = np.linalg.solve(np.array(M.evalf(), dtype=float), np.array(A_tilde.evalf(), dtype=float))
    A_full, B_full = disk.linearize_full(q, u, None, p)
    assert A_full.shape == (12, 8) and B_full.shape == (12, 0)
    assert_matrices_close(A_full, expected, 1e-10)


def test_linearize_matches_constrained_finite_differences(disk, disk_ref, points):
    for q, u, p in points:
        A, _ = disk.linearize(q, u, None, p)
        A_fd, _ = disk_ref.constrained_fd_AB(q, u, None, p)
        assert_matrices_close(A, A_fd, 1e-6)


def test_another_partition_matches_sympy_and_finite_differences(disk, disk_ref, points):
    """Lean q2 dependent (regular since |q2| >= 0.3) and u1, u4, u6."""
    dependent_q, dependent_u = ["q2"], ["u1", "u4", "u6"]
    names = disk.independent_state_names(dependent_q, dependent_u)
    assert names == disk_ref.state_names([1], [0, 3, 5]) == ("q1", "q3", "q4", "q5", "q6", "u2", "u3", "u5")
    for q, u, p in points[:2]:
        A, _ = disk.linearize(q, u, None, p, dependent_q=dependent_q, dependent_u=dependent_u)
        A_ref, _ = disk_ref.linearizer_AB(q, u, None, p, dependent_q=[1], dependent_u=[0, 3, 5])
        assert_matrices_close(A, A_ref, 1e-10)
        A_fd, _ = disk_ref.constrained_fd_AB(q, u, None, p, dependent_q=[1], dependent_u=[0, 3, 5])
        assert_matrices_close(A, A_fd, 1e-6)


def test_batch_of_random_points(disk, disk_ref, points):
    q = np.array([pt[0] for pt in points])
    u = np.array([pt[1] for pt in points])
    p = np.array([pt[2] for pt in points])
    A, B = disk.linearize(q, u, None, p)
    assert A.shape == (len(points), 8, 8) and B.shape == (len(points), 8, 0)
    for k, (qk, uk, pk) in enumerate(points):
        np.testing.assert_array_equal(A[k], disk.linearize(qk, uk, None, pk)[0])


# -- the pitfall --------------------------------------------------------------------


@pytest.fixture(scope="module")
def naive_jacobian(disk_ref):
    """The chapter's naive approach: solve [f_0 + f_1; f_2 + f_3; f_a] = 0 for
    (qd, ud) as functions f(q, u) of all 12 coordinates and speeds (SymPy's
    mass_matrix_full and forcing_full, M(x) xd = F(x)) and take the Jacobian
    with respect to all 12, as for an unconstrained system:
        d(M^-1 F)/dx = M^-1 (dF/dx - dM/dx M^-1 F)   (exact, symbolic derivatives)."""
    import sympy as sm

    kane = disk_ref.kane
    x = list(kane.q) + list(kane.u)
    M, F = kane.mass_matrix_full, kane.forcing_full
    args = [x, disk_ref.parameters]
    mass = sm.lambdify(args, M, cse=True)
    forcing = sm.lambdify(args, F, cse=True)
    forcing_jacobian = sm.lambdify(args, F.jacobian(x), cse=True)
    mass_derivatives = sm.lambdify(args, [M.diff(xi) for xi in x], cse=True)

    def jacobian(q, u, p):
        xv, pv = list(q) + list(u), list(p)
        Mv = np.array(mass(xv, pv), dtype=float)
        f = np.linalg.solve(Mv, np.array(forcing(xv, pv), dtype=float).ravel())
        dM = np.array(mass_derivatives(xv, pv), dtype=float)          # (12, 12, 12): d M/d x_k
        return np.linalg.solve(Mv, np.array(forcing_jacobian(xv, pv), dtype=float)
                               - np.einsum("kij,j->ik", dM, f))
    return jacobian


def char_poly_error(A, zeros, squares, points=(0.7, 1.3, -2.1, 0.4 + 0.9j)):
    """Largest relative error of det(zI - A) against z^zeros prod(z^2 - s)."""
    n = A.shape[0]
    errors = []
    for z in points:
        expected = z ** zeros * np.prod([z * z - s for s in squares])
        actual = np.linalg.det(z * np.eye(n) - A)
        errors.append(abs(actual - expected) / max(1.0, abs(expected)))
    return max(errors)


@pytest.mark.parametrize("v", [0.3, 0.5, 0.9, 1.2])
def test_naive_jacobian_gives_the_chapters_wrong_eigenvalues(disk, naive_jacobian, v):
    """Documents the pitfall of the chapter's section "Rolling disk": the naive
    Jacobian of the full ODE right-hand side at upright steady rolling
    (m = r = g = 1) has 12 eigenvalues, eight of them zero, and
    +/- (sqrt 6/3) sqrt(-v^2), +/- sqrt(4/5 - 12/5 v^2) -- exactly the chapter's
    (its "incorrect" eigenvalues, eq. evals_incorrect). The spurious pair
    +/- i sqrt(6)/3 v has no counterpart in the right linearization, which has 8
    states: six zeros and +/- 2 sqrt(1 - 3 v^2)/sqrt(5) (codegen's A)."""
    op = codegen.operating_point("disk", "upright", v=v)
    naive = naive_jacobian(op.q, op.u, op.p)
    assert naive.shape == (12, 12)
    spurious = -6.0 / 9.0 * v * v                       # ((sqrt 6/3) sqrt(-v^2))^2
    chapter_pair = 4.0 / 5.0 - 12.0 / 5.0 * v * v
    assert char_poly_error(naive, 8, [spurious, chapter_pair]) < 1e-10

    A, _ = disk.linearize(op.q, op.u, None, op.p)
    assert A.shape == (8, 8)
    right = 4.0 / 5.0 * (1.0 - 3.0 * v * v)              # (2 sqrt(1 - 3 v^2)/sqrt 5)^2
    assert char_poly_error(A, 6, [right]) < 1e-10
    # the spurious pair is not an eigenvalue of the right A
    z = 1j * math.sqrt(6.0) / 3.0 * v
    assert np.abs(np.linalg.eigvals(A) - z).min() > 0.1
    # nor does dropping the rows and columns of the dependent states repair the
    # naive Jacobian: its 8 x 8 independent block has other eigenvalues
    independent = [0, 1, 2, 3, 4, 6, 7, 8]
    block = naive[np.ix_(independent, independent)]
    assert char_poly_error(block, 6, [right]) > 1e-3


def test_sympy_permutation_matrix_pitfall():
    """Documents why tests/reference.py reorders a Linearizer's q and u for a
    partition other than the KanesMethod's: SymPy's permutation_matrix(orig,
    per) promises orig == P per but returns P^T (right only for involutions)."""
    import sympy as sm
    from sympy.physics.mechanics.linearize import permutation_matrix

    a, b, c = sm.symbols("a b c")
    P = permutation_matrix([a, b, c], [b, c, a])
    assert P * sm.Matrix([b, c, a]) != sm.Matrix([a, b, c])
    assert P.T * sm.Matrix([b, c, a]) == sm.Matrix([a, b, c])
