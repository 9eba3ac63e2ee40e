"""``linearize_local`` of the compiled modules (issue 11, item 1), checked
against references that do not use the generated C:

* codegen.reference.KaneReference.local_state_space (NumPy on SymPy's
  equations) at regular and singular points, up to the freedom of the
  orthonormal bases: with R = N_ref^T N (orthogonal when the null spaces
  agree), A = R^T A_ref R, B = R^T B_ref, T = T_ref R;
* the closed forms: González's singular four-bar (N = 1, k = 0, gravity
  along +x, phi = 0) has the 4 x 4 A with eigenvalues +/- i sqrt(6 g/5),
  +/- i sqrt(2 g) (the paper's +/-3.4310i, +/-4.4294i); the pendulum hangs
  at +/- i sqrt(g/l); the disk upright at speed v, in the orthonormal chart,
  has four zeros, +/- 2 sqrt(1 - 3 v^2)/sqrt(5) and +/- i v/sqrt(2);
* finite differences in the local chart (KaneReference.local_chart_fd, from
  SymPy's own reduced equations) at moving points;
* the partition-based ``linearize`` at equilibria through the change of
  basis H = P T (P: the partition's independent rows of [dq; du], T the
  returned embedding): A_linearize = H A_local H^-1;
* batches (uniform ranks: stacked; differing ranks: NaN-padded, per-point
  ranks, ``point(i)``), and the rank tolerance near the singular point.
"""

import math
import warnings

import numpy as np
import pytest

import codegen
from conftest import MOVING_POINTS, Built, moving_point
from local_checks import (G, SINGULAR_CLOSED_FORM, assert_close, assert_eigenvalues_close,
                          assert_gonzalez_singular_eigenvalues)
from codegen.models import disk as disk_models
from codegen.models import five_bar, fourbar, spencer_pendulum



SINGULAR_VALUES = dict(fourbar.DEFAULT_PARAMETERS, k=0.0, gravity_angle=0.0)


def singular_p(built):
    return built.p(k=0.0, gravity_angle=0.0)


# -- helpers ---------------------------------------------------------------------------








def basis_change(N_ref, N, label):
    """R = N_ref^T N, checked orthogonal (N spans the reference's null space)
    and N checked orthonormal."""
    assert N.shape == N_ref.shape, (label, N.shape, N_ref.shape)
    np.testing.assert_allclose(N.T @ N, np.eye(N.shape[1]), atol=1e-10, err_msg=f"{label} orthonormal")
    R = N_ref.T @ N
    np.testing.assert_allclose(R.T @ R, np.eye(N.shape[1]), atol=1e-9,
                               err_msg=f"{label} spans the reference's null space")
    return R


def check_against_reference(built, result, q, u, r=None, p=None, t=0.0, rank_tol=None, rtol=1e-9):
    """One point of linearize_local against KaneReference.local_state_space."""
    ref = built.ref.local_state_space(q, u, r, p, t, rank_tol=rank_tol)
    assert (result.rank_c, result.rank_v) == (ref.rank_c, ref.rank_v)
    assert result.dof == ref.dof == built.compiled.nu - ref.rank_v
    nx = ref.A.shape[0]
    assert result.nx == nx
    assert result.A.shape == (nx, nx) and result.B.shape == (nx, built.compiled.nr)
    assert result.embedding.shape == (built.compiled.nq + built.compiled.nu, nx)
    assert_close(result.sigma_c, ref.sigma_c, 1e-10, "sigma_c")
    assert_close(result.sigma_v, ref.sigma_v, 1e-10, "sigma_v")
    R_q = basis_change(ref.N_q, np.asarray(result.N_q), "N_q")
    R_u = basis_change(ref.N_u, np.asarray(result.N_u), "N_u")
    R = np.block([[R_q, np.zeros((R_q.shape[0], R_u.shape[1]))],
                  [np.zeros((R_u.shape[0], R_q.shape[1])), R_u]])
    assert_close(result.A, R.T @ ref.A @ R, rtol, "A vs reference (through the change of basis)")
    assert_close(result.B, R.T @ ref.B, rtol, "B vs reference")
    assert_close(result.embedding, ref.embedding @ R, rtol, "embedding T vs reference")
    return ref


def partition_transition(compiled, result, dependent_q=None, dependent_u=None):
    """H = P T: (y, z) of the local chart -> the partition's independent
    [q_i; u_i] (P selects them from [dq; du])."""
    names = compiled.q_names + compiled.u_names
    independent = compiled.independent_state_names(dependent_q, dependent_u)
    P = np.eye(len(names))[[names.index(n) for n in independent]]
    return P @ np.asarray(result.embedding)


# -- González's singular four-bar --------------------------------------------------------


def test_gonzalez_singular_fourbar(fourbar1):
    c = fourbar1.compiled
    p = singular_p(fourbar1)
    q, u = fourbar.flat(SINGULAR_VALUES)
    result = c.linearize_local(q, u, p=p)
    assert result.A.shape == (4, 4) and result.B.shape == (4, 0)
    assert (result.rank_c, result.rank_v, result.dof, result.nx) == (3, 3, 2, 4)
    assert result.rank_tol == pytest.approx(1e-9)       # the documented default
    assert_gonzalez_singular_eigenvalues(np.linalg.eigvals(result.A))
    check_against_reference(fourbar1, result, q, u, p=p)
    # N_q spans null(J_c): J_c from the reference's SymPy equations
    J_c = np.asarray(fourbar1.ref.functions().J_c(0.0, list(q), list(u), [], list(p)), float)
    assert np.abs(J_c @ result.N_q).max() < 1e-12
    assert result.sigma_c[-1] < 1e-12 * result.sigma_c[0]


def test_singular_point_no_partition_works_but_local_does(fourbar1):
    """linearize refuses the flat point (and says to use linearize_local)."""
    c = fourbar1.compiled
    q, u = fourbar.flat(SINGULAR_VALUES)
    with pytest.raises(codegen.errors.SingularMatrixError, match="linearize_local"):
        c.linearize(q, u, p=singular_p(fourbar1))


# -- regular points ----------------------------------------------------------------------


def test_regular_equilibria_similar_to_linearize(fourbar1, pendulum, disk_built, fivebar):
    """Equilibria: the same eigenvalues as linearize, and A_linearize =
    H A_local H^-1 with H = P T, for the model's partition and another one."""
    cases = []
    values = dict(fourbar.DEFAULT_PARAMETERS)
    for c_value in (0.0, 1.0):
        values["c"] = c_value
        q, u = fourbar.equilibrium(values)
        cases.append((fourbar1, q, u, fourbar1.p(c=c_value),
                      ([n for n in fourbar1.compiled.q_names if n != "x0"],
                       [n for n in fourbar1.compiled.u_names if n != "vy1"])))
    q, u = spencer_pendulum.hanging(spencer_pendulum.DEFAULT_PARAMETERS)
    cases.append((pendulum, q, u, None, None))
    q, u = five_bar.hanging(dict(five_bar.DEFAULT_PARAMETERS))
    cases.append((fivebar, q, u, None, (["q1", "q3"], ["u2", "u4"])))
    q, u = disk_models.upright(disk_models.DEFAULT_PARAMETERS, v=0.0)
    cases.append((disk_built, q, u, None, None))
    for built, q, u, p, other in cases:
        c = built.compiled
        result = c.linearize_local(q, u, p=p)
        check_against_reference(built, result, q, u, p=p)
        for dq, du in [(None, None)] + ([other] if other else []):
            A, B = c.linearize(q, u, p=p, dependent_q=dq, dependent_u=du)
            assert result.A.shape == A.shape, c.name
            assert_eigenvalues_close(np.linalg.eigvals(result.A), np.linalg.eigvals(A), 1e-9, c.name)
            H = partition_transition(c, result, dq, du)
            assert_close(A, H @ result.A @ np.linalg.inv(H), 1e-9, f"{c.name}: A = H A_local H^-1")
            assert_close(B, H @ result.B, 1e-9, f"{c.name}: B = H B_local")
    # the pendulum's closed form
    q, u = spencer_pendulum.hanging(spencer_pendulum.DEFAULT_PARAMETERS)
    w = math.sqrt(G)
    assert_eigenvalues_close(np.linalg.eigvals(pendulum.compiled.linearize_local(q, u).A),
                             [1j * w, -1j * w], 1e-12)


@pytest.mark.parametrize("case", MOVING_POINTS)
def test_moving_points_are_the_partitions_linearization(case, fourbar1, pendulum, disk_built, fivebar):
    """Moving points (DESIGN.md section 3c): the reference, and the chart's
    partition linearized by constrained finite differences (SymPy's reduced
    equations), written in the returned bases: A = H^-1 A_fd H, H = P T; the
    same eigenvalues as linearize with that partition, at points that are not
    equilibria too. The disk upright at speed v: the thesis's six zeros and
    +/- 2 sqrt(1 - 3 v^2)/sqrt(5) (the null spaces' chart would add +/- i v/sqrt(2))."""
    built, p, q, u = moving_point(case, pendulum, fourbar1, disk_built, fivebar)
    q, u = np.asarray(q, float), np.asarray(u, float)
    c = built.compiled
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", codegen.errors.NotSteadyWarning)   # the pendulum swings
        result = c.linearize_local(q, u, p=p)
        A, B = c.linearize(q, u, p=p, dependent_q=result.dependent_q, dependent_u=result.dependent_u)
    assert result.chart == "partition"
    check_against_reference(built, result, q, u, p=p)
    H = partition_transition(c, result, result.dependent_q, result.dependent_u)
    A_fd, B_fd = built.ref.constrained_fd_AB(q, u, p=p, dependent_q=list(result.dependent_q),
                                             dependent_u=list(result.dependent_u))
    assert_close(result.A, np.linalg.solve(H, A_fd @ H), 1e-6, f"{case}: A vs finite differences")
    assert_close(result.A, np.linalg.solve(H, A @ H), 1e-9, f"{case}: A vs linearize")
    assert_eigenvalues_close(np.linalg.eigvals(result.A), np.linalg.eigvals(A), 1e-9, case)
    if case == "disk_upright":
        v = 0.5
        s = 2 * math.sqrt(1 - 3 * v * v) / math.sqrt(5)
        assert_eigenvalues_close(np.linalg.eigvals(result.A), [s, -s, 0, 0, 0, 0, 0, 0], 1e-9)


@pytest.mark.parametrize("case", MOVING_POINTS)
def test_reference_null_space_chart_against_chart_fd(case, fourbar1, pendulum, disk_built, fivebar):
    """The reference's null spaces' chart (what the C uses where a rank drops)
    at moving regular points: finite differences of SymPy's reduced equations
    in that chart (y = N_q^T q, z = N_u^T u). The disk upright at speed v has
    four zeros, the thesis pair and +/- i v/sqrt(2) there: u4..u6 are
    components in the spinning wheel, so the motion is not steady in this
    chart."""
    built, p, q, u = moving_point(case, pendulum, fourbar1, disk_built, fivebar)
    q, u = np.asarray(q, float), np.asarray(u, float)
    ref = built.ref.local_state_space(q, u, p=p, chart="null space")
    A_fd, _ = built.ref.local_chart_fd(q, u, ref.N_q, ref.N_u, p=p)
    assert_close(ref.A, A_fd, 1e-6, f"{case}: A vs finite differences in its chart")
    if case == "disk_upright":
        v = 0.5
        s = 2 * math.sqrt(1 - 3 * v * v) / math.sqrt(5)
        w = v / math.sqrt(2)
        assert_eigenvalues_close(np.linalg.eigvals(ref.A), [s, -s, 1j * w, -1j * w, 0, 0, 0, 0], 1e-9)


def test_input_matrix_and_time(build_dir):
    """A rheonomic user model with an input (bead on a turning wire): A and B
    against the reference and the partition's constrained finite differences
    written in the returned bases, at t != 0."""
    from pathlib import Path
    path = Path(__file__).parent / "user_models" / "rotating_wire.py"
    model = codegen.load_model_file(f"{path}:make_model")
    built = Built.build(model, build_dir)
    t, r = 0.4, [0.5]
    q, u = built.ref.complete([0.7, 0.0], [0.3, 0.0], t=t)
    result = built.compiled.linearize_local(q, u, r, t=t)
    assert result.B.shape == (2, 1)
    check_against_reference(built, result, q, u, r, t=t)
    A_fd, B_fd = built.ref.constrained_fd_AB(q, u, r, t=t, dependent_q=list(result.dependent_q),
                                             dependent_u=list(result.dependent_u))
    H = partition_transition(built.compiled, result, result.dependent_q, result.dependent_u)
    assert_close(result.A, np.linalg.solve(H, A_fd @ H), 1e-6)
    assert_close(result.B, np.linalg.solve(H, B_fd), 1e-6)
    assert np.abs(result.B).max() > 0.1


# -- the rank tolerance ----------------------------------------------------------------


def test_rank_tolerance_near_the_singular_configuration(fourbar1):
    """phi = 1e-6: regular with the default tolerance (2 states), the
    singular system's 4 states when rank_tol exceeds sigma_min/sigma_max."""
    c = fourbar1.compiled
    p = singular_p(fourbar1)
    q, u = fourbar.general(SINGULAR_VALUES, phi=1e-6, omega=0.0)
    regular = c.linearize_local(q, u, p=p)
    assert regular.A.shape == (2, 2) and (regular.rank_c, regular.rank_v) == (4, 4)
    ratio = regular.sigma_c[-1] / regular.sigma_c[0]
    assert 1e-8 < ratio < 1e-5
    check_against_reference(fourbar1, regular, q, u, p=p, rtol=1e-7)
    coarse = c.linearize_local(q, u, p=p, rank_tol=1e-4)
    assert coarse.A.shape == (4, 4) and (coarse.rank_c, coarse.rank_v) == (3, 3)
    assert coarse.rank_tol == 1e-4
    check_against_reference(fourbar1, coarse, q, u, p=p, rank_tol=1e-4, rtol=1e-7)
    # close to the singular point's eigenvalues
    omega = np.sort(np.abs(np.linalg.eigvals(coarse.A).imag))
    np.testing.assert_allclose(omega, np.repeat(SINGULAR_CLOSED_FORM, 2), rtol=1e-4)
    # at the flat point the dependence of the rows is exact (coupler row = crank 1 row -
    # crank 0 row): rank 3 also with a much smaller tolerance
    flat = c.linearize_local(*fourbar.flat(SINGULAR_VALUES), p=p, rank_tol=1e-13)
    assert (flat.rank_c, flat.nx) == (3, 4)


# -- batches ------------------------------------------------------------------------------


def test_batch_with_uniform_ranks(fourbar1):
    c = fourbar1.compiled
    values = dict(fourbar.DEFAULT_PARAMETERS)
    angles, rates = [0.4, 1.2, 2.5], [0.0, 0.7, -1.1]
    q = np.array([fourbar.configuration(values, a) for a in angles])
    u = np.array([fourbar.speeds(values, a, w) for a, w in zip(angles, rates)])
    p = np.array([c.parameters(c=cc) for cc in (0.0, 0.5, 1.0)])
    result = c.linearize_local(q, u, p=p)
    assert result.A.shape == (3, 2, 2) and result.B.shape == (3, 2, 0)
    assert result.embedding.shape == (3, c.nq + c.nu, 2)
    assert result.rank_c == 4 and result.rank_v == 4 and result.nx == 2 and result.dof == 1
    assert getattr(result, "uniform", True) is True
    for i in range(3):
        single = c.linearize_local(q[i], u[i], p=p[i])
        np.testing.assert_allclose(result.A[i], single.A, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(result.embedding[i], single.embedding, rtol=1e-13, atol=1e-13)
        check_against_reference(fourbar1, single, q[i], u[i], p=p[i])
    # eigenvalues of each point are those of the reference
    for i in range(3):
        ref = fourbar1.ref.local_state_space(q[i], u[i], p=p[i])
        assert_eigenvalues_close(np.linalg.eigvals(result.A[i]), np.linalg.eigvals(ref.A), 1e-9)


def _trimmed(padded):
    """The finite sub-block of a NaN-padded matrix (rows and columns with any
    finite entry)."""
    padded = np.asarray(padded)
    finite = np.isfinite(padded)
    rows = np.nonzero(finite.any(axis=1))[0]
    cols = np.nonzero(finite.any(axis=0))[0]
    block = padded[np.ix_(rows, cols)]
    assert np.isfinite(block).all(), "padding must be whole rows and columns of NaN"
    return block


def test_batch_with_differing_ranks(fourbar1):
    """The singular flat point and regular points in one batch: NaN-padded to
    the largest size, per-point ranks, point(i) trimmed, each point equal to
    its own call and to the reference."""
    c = fourbar1.compiled
    p = singular_p(fourbar1)
    flat_q, flat_u = fourbar.flat(SINGULAR_VALUES)
    reg_q, reg_u = fourbar.general(SINGULAR_VALUES, phi=0.4, omega=0.3)
    q = np.array([flat_q, reg_q, reg_q, flat_q])
    u = np.array([flat_u, reg_u, reg_u, flat_u])
    result = c.linearize_local(q, u, p=p)
    assert result.uniform is False
    np.testing.assert_array_equal(result.rank_c, [3, 4, 4, 3])
    np.testing.assert_array_equal(result.rank_v, [3, 4, 4, 3])
    np.testing.assert_array_equal(result.nx, [4, 2, 2, 4])
    np.testing.assert_array_equal(result.dof, [2, 1, 1, 2])
    assert result.A.shape == (4, 4, 4)
    for i in range(4):
        single = c.linearize_local(q[i], u[i], p=p)
        one = result.point(i)
        assert one.A.shape == single.A.shape == (single.nx, single.nx)
        assert (one.rank_c, one.rank_v, one.nx) == (single.rank_c, single.rank_v, single.nx)
        np.testing.assert_allclose(one.A, single.A, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(one.embedding, single.embedding, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(one.N_q, single.N_q, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(one.N_u, single.N_u, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(_trimmed(result.A[i]), single.A, rtol=1e-13, atol=1e-13)
        check_against_reference(fourbar1, one, q[i], u[i], p=p)
        if single.nx == 2:
            assert np.isnan(result.A[i]).sum() == 16 - 4
    omega = np.sort(np.abs(np.linalg.eigvals(result.point(3).A).imag))
    np.testing.assert_allclose(omega, np.repeat(SINGULAR_CLOSED_FORM, 2), rtol=1e-9)
    # a two-dimensional batch: point takes an index tuple
    q2 = np.array([[flat_q, reg_q], [reg_q, flat_q]])
    u2 = np.array([[flat_u, reg_u], [reg_u, flat_u]])
    grid = c.linearize_local(q2, u2, p=p)
    assert grid.A.shape == (2, 2, 4, 4)
    np.testing.assert_array_equal(grid.rank_c, [[3, 4], [4, 3]])
    np.testing.assert_allclose(grid.point((1, 1)).A, result.point(0).A, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(grid.point((0, 1)).A, result.point(1).A, rtol=1e-13, atol=1e-13)


# -- an independently written four-bar, through codegen.Model / codegen.build ----------------


@pytest.fixture(scope="module")
def user_fourbar(build_dir):
    """tests/user_models/gonzalez_fourbar.py: natural coordinates with the
    crank angle of the *first* crank, rods as two-point Gauss quadratures."""
    from pathlib import Path
    path = Path(__file__).parent / "user_models" / "gonzalez_fourbar.py"
    return Built.build(codegen.load_model_file(f"{path}:make_model"), build_dir)


def test_user_fourbar_singular_case(user_fourbar):
    c = user_fourbar.compiled
    assert c.q_names == ("phi", "xB0", "yB0", "xB1", "yB1")
    p = c.parameters(k=0.0, gravity_angle=0.0)
    l = 1.0
    q = [0.0, l, 0.0, 2 * l, 0.0]                   # flat: every rod on the x axis
    u = [0.0] * 5
    f_c, f_v = c.constraint_residuals(q, u, p=p)
    assert np.abs(np.concatenate([f_c, f_v])).max() == 0.0
    result = c.linearize_local(q, u, p=p)
    assert (result.rank_c, result.rank_v, result.nx, result.dof) == (3, 3, 4, 2)
    assert_gonzalez_singular_eigenvalues(np.linalg.eigvals(result.A))
    check_against_reference(user_fourbar, result, q, u, p=p)
    # and the partition-based route still refuses it, pointing here
    with pytest.raises(codegen.errors.SingularMatrixError, match="linearize_local"):
        c.linearize(q, u, p=p)


def test_user_fourbar_agrees_with_builtin_at_regular_points(user_fourbar, fourbar1):
    """Two models of one mechanism (different phi, different mass
    discretization): the same eigenvalues at an equilibrium, and the same
    local-form eigenvalues at the singular point."""
    values = dict(fourbar.DEFAULT_PARAMETERS, c=1.0)
    q, u = fourbar.equilibrium(values)
    mine = user_fourbar.compiled.linearize_local(q, u, p=user_fourbar.p(c=1.0))
    builtin = fourbar1.compiled.linearize_local(q, u, p=fourbar1.p(c=1.0))
    assert_eigenvalues_close(np.linalg.eigvals(mine.A), np.linalg.eigvals(builtin.A), 1e-9)
    expected = fourbar.closed_form(values, q[0])
    assert_eigenvalues_close(np.linalg.eigvals(mine.A), expected, 1e-9)


def test_large_batch_on_threads(fourbar1):
    """A batch large enough for the thread pool, ranks alternating between
    chunks: the same as one call per point."""
    c = fourbar1.compiled
    p = singular_p(fourbar1)
    from codegen.runtime import PARALLEL_THRESHOLD
    n = PARALLEL_THRESHOLD + 400
    angles = np.where(np.arange(n) % 3 == 0, 0.0, np.linspace(0.2, 2.5, n))
    q = np.array([fourbar.configuration(SINGULAR_VALUES, a) for a in angles])
    u = np.array([fourbar.speeds(SINGULAR_VALUES, a, 0.5 if a else 0.0) for a in angles])
    result = c.linearize_local(q, u, p=p, threads=2)
    serial = c.linearize_local(q, u, p=p, threads=1)
    np.testing.assert_array_equal(result.rank_c, np.where(angles == 0.0, 3, 4))
    np.testing.assert_array_equal(np.isnan(result.A), np.isnan(serial.A))
    np.testing.assert_array_equal(np.nan_to_num(result.A), np.nan_to_num(serial.A))
    for i in (0, 1, 2, 3, n // 2, n - 1):
        single = c.linearize_local(q[i], u[i], p=p)
        np.testing.assert_allclose(result.point(i).A, single.A, rtol=1e-13, atol=1e-13)


def test_constraint_check_and_defaults(fourbar1):
    """The point must satisfy the constraints to tol (as linearize); tol=None skips."""
    c = fourbar1.compiled
    q, u = fourbar.general(fourbar.DEFAULT_PARAMETERS, phi=1.2, omega=0.7)
    off = np.array(q)
    off[1] += 1e-3
    with pytest.raises(codegen.errors.ConstraintViolationError):
        c.linearize_local(off, u)
    with pytest.raises(codegen.errors.ConstraintViolationError):
        c.linearize_descriptor(off, u)
    assert c.linearize_local(off, u, tol=None).nx == 2
    assert c.linearize_local(q, u).rank_tol == 1e-9            # the documented default


def test_single_point_path_equals_the_batch_path(fourbar1, disk_built):
    """One point takes the kernel's single-point path; a batch of one the
    batched loop: the same results, bit for bit, regular and singular."""
    c = fourbar1.compiled
    p = singular_p(fourbar1)
    points = [(fourbar1, fourbar.flat(SINGULAR_VALUES), p),
              (fourbar1, fourbar.general(fourbar.DEFAULT_PARAMETERS, phi=1.2, omega=0.7), None),
              (disk_built, disk_models.steady_turn(disk_models.DEFAULT_PARAMETERS, lean=0.3,
                                                   spin_rate=-3.0), None)]
    for built, (q, u), parameters in points:
        c = built.compiled
        one = c.linearize_local(q, u, p=parameters)
        batch = c.linearize_local(np.asarray(q)[None], np.asarray(u)[None], p=parameters)
        for name in ("A", "B", "N_q", "N_u", "embedding", "sigma_c", "sigma_v"):
            np.testing.assert_array_equal(getattr(one, name), getattr(batch, name)[0], err_msg=name)
        assert (one.rank_c, one.rank_v, one.dof, one.nx) == (batch.rank_c, batch.rank_v, batch.dof,
                                                               batch.nx)
