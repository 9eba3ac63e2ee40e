"""Batches: the threaded path, the single-point fast path and dask.array
all give what one call per point gives."""

import numpy as np
import pytest

from codegen import runtime
from codegen.errors import ConstraintViolationError


@pytest.fixture(scope="module")
def points(disk):
    rng = np.random.default_rng(3)
    n = runtime.PARALLEL_THRESHOLD * 2 + 17
    return disk.complete(rng.uniform(-1, 1, (n, disk.nq)), rng.uniform(-2, 2, (n, disk.nu)))


def test_threaded_batch_equals_serial_batch_and_single_calls(disk, points):
    q, u = points
    A_serial, B_serial = disk.linearize(q, u, threads=1)
    A_threads, B_threads = disk.linearize(q, u, threads=2)
    assert np.array_equal(A_serial, A_threads) and np.array_equal(B_serial, B_threads)
    for i in (0, len(q) // 2, len(q) - 1):
        A, B = disk.linearize(q[i], u[i])           # single-point fast path
        assert np.array_equal(A, A_serial[i]) and B.shape == B_serial[i].shape
        A, B = disk.linearize(list(q[i]), list(u[i]))
        assert np.array_equal(A, A_serial[i])
    qd1, ud1 = disk.state_derivative(q, u, threads=1)
    qd2, ud2 = disk.state_derivative(q, u, threads=2)
    assert np.array_equal(qd1, qd2) and np.array_equal(ud1, ud2)


def test_threaded_batch_reports_the_first_bad_point(disk, points):
    q, u = points
    q = q.copy()
    bad = len(q) - 5                                 # in the last chunk
    q[bad, 5] += 0.1                                 # off the configuration constraint
    with pytest.raises(ConstraintViolationError, match=rf"batch index \({bad},\)"):
        disk.linearize(q, u, threads=2)


def test_single_point_fast_path_falls_back_for_explanations(disk, points):
    q, u = points
    with pytest.raises(ConstraintViolationError, match=r"f_c\[0\]"):
        disk.linearize(q[0] + np.array([0, 0, 0, 0, 0, 0.5]), u[0])


def test_sweep_through_dask_array_matches_direct_calls(disk):
    da = pytest.importorskip("dask.array")
    import codegen
    speeds = np.linspace(0.0, 1.0, 1000)
    points = [codegen.operating_point("disk", "upright", v=v) for v in speeds]
    q = np.array([p.q for p in points])
    u = np.array([p.u for p in points])
    q_d = da.from_array(q, chunks=(128, disk.nq))
    u_d = da.from_array(u, chunks=(128, disk.nu))
    A_d = da.map_blocks(lambda qb, ub: disk.linearize(qb, ub)[0], q_d, u_d,
                        dtype=float, chunks=(q_d.chunks[0], (disk.nx,), (disk.nx,)), new_axis=2)
    # eigenvalues per point, computed lazily block by block
    lam = A_d.map_blocks(np.linalg.eigvals, dtype=complex, drop_axis=2,
                         chunks=(q_d.chunks[0], (disk.nx,)))
    A_direct, _ = disk.linearize(q, u)
    np.testing.assert_array_equal(A_d.compute(), A_direct)
    growth = lam.real.max(axis=1).compute()
    np.testing.assert_allclose(growth, np.linalg.eigvals(A_direct).real.max(axis=1), atol=1e-12)


def test_complete_with_one_row_shared_by_the_batch(disk, points):
    """u given once for a batch of q: completed in copies that must be
    C-contiguous (a plain copy of a broadcast view is not)."""
    q, u = points
    q_done, u_done = disk.complete(q[:5], u[0])
    for i in range(5):
        q_i, u_i = disk.complete(q[i], u[0])
        assert np.array_equal(q_done[i], q_i) and np.array_equal(u_done[i], u_i)
    q_done, u_done = disk.complete(q[0], u[:3])
    assert q_done.shape == (3, 6) and np.array_equal(q_done[2], disk.complete(q[0], u[2])[0])


def test_batch_of_empty_input_rows_for_a_model_without_inputs(disk, points):
    q, u = points
    A, B = disk.linearize(q[:5], u[:5], np.zeros((5, 0)))
    assert A.shape == (5, disk.nx, disk.nx) and B.shape == (5, disk.nx, 0)


def test_single_point_accepts_any_real_vector_layout(disk, points):
    q, u = points
    A, _ = disk.linearize(q[7], u[7])
    for q_view, u_view in ((q[7].astype(">f8"), u[7].astype(">f8")),           # byte-swapped
                           (np.repeat(q[7], 2)[::2], np.repeat(u[7], 2)[::2]),  # strided
                           (q[7].astype(np.float32).astype(object), u[7])):     # object dtype
        A_view, _ = disk.linearize(q_view, u_view, tol=1e-6)
        np.testing.assert_allclose(A_view, A, rtol=1e-6, atol=1e-6)
    A_swapped, _ = disk.linearize(q[7].astype(">f8"), u[7].astype(">f8"))
    assert np.array_equal(A_swapped, A)
