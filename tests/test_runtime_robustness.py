"""The Python face of a generated module in situations a user meets without
looking for them (issue 9): a forked child after a threaded batch, the
broadcasting of t, r and p against q and u, and the default partition given
explicitly."""

import multiprocessing

import numpy as np
import pytest

import codegen
from codegen import runtime
from codegen.errors import InputError


@pytest.fixture(scope="module")
def op():
    return codegen.operating_point("disk", "steady_turn", lean=0.4, spin_rate=-3.0)


# -- fork after a threaded batch -------------------------------------------------------


def test_threaded_batch_in_a_forked_child(disk, op):
    """The parent's pool is inherited without its threads: the child must
    start its own instead of waiting forever for dead workers."""
    n = runtime.PARALLEL_THRESHOLD * 2 + 17
    q, u = np.tile(op.q, (n, 1)), np.tile(op.u, (n, 1))
    A, _ = disk.linearize(q, u, threads=2)            # starts the parent's pool

    def child():
        A_child, _ = disk.linearize(q, u, threads=2)
        assert np.array_equal(A_child, A)               # else exit code 1

    process = multiprocessing.get_context("fork").Process(target=child)
    process.start()
    process.join(timeout=60)
    if process.is_alive():                              # the regression: a hang
        process.kill()
        process.join()
        pytest.fail("a threaded batch in a forked child hangs")
    assert process.exitcode == 0
    # and the parent's pool still works
    A_again, _ = disk.linearize(q, u, threads=2)
    assert np.array_equal(A_again, A)


# -- broadcasting ---------------------------------------------------------------------


def test_t_with_a_trailing_axis_beside_a_batch_is_refused(disk, op):
    """t of shape (100, 1) beside q of shape (100, 6) would be 100 x 100 points."""
    q, u = np.tile(op.q, (100, 1)), np.tile(op.u, (100, 1))
    for call in (lambda t: disk.linearize(q, u, t=t), lambda t: disk.linearize_full(q, u, t=t),
                 lambda t: disk.state_derivative(q, u, t=t),
                 lambda t: disk.constraint_residuals(q, u, t=t), lambda t: disk.complete(q, u, t=t)):
        with pytest.raises(InputError, match=r"t of shape \(100, 1\).*\(100, 100\).*"
                                             r"pass t of shape \(100,\)"):
            call(np.zeros((100, 1)))
        with pytest.raises(InputError, match=r"t of shape \(1, 100\)"):
            call(np.zeros((1, 100)))


def test_broadcasting_what_a_user_expects(disk, op):
    k = 5
    q, u = np.tile(op.q, (k, 1)), np.tile(op.u, (k, 1))
    A0, _ = disk.linearize(op.q, op.u)
    # scalars, shape () and one time per point
    for t in (0.0, 0, np.float64(0.0), np.array(0.0), np.zeros(k), [0.0] * k, np.zeros(1)):
        A, _ = disk.linearize(q, u, t=t)
        assert A.shape == (k, 8, 8) and np.array_equal(A, np.broadcast_to(A0, A.shape))
    # p shared, or one row per point
    for p in (disk.default_parameters, np.tile(disk.default_parameters, (k, 1)), {"m": 1.0}):
        A, _ = disk.linearize(q, u, p=p)
        assert A.shape == (k, 8, 8) and np.array_equal(A[2], A0)
    # one point, many times: a sweep in time (the disk does not depend on t)
    A, _ = disk.linearize(op.q, op.u, t=np.linspace(0, 1, 7))
    assert A.shape == (7, 8, 8) and np.array_equal(A[3], A0)
    # one point, many parameter vectors: m does not change A
    A, _ = disk.linearize(op.q, op.u, p=np.tile(disk.default_parameters * [2, 1, 1], (3, 1)))
    assert A.shape == (3, 8, 8)
    # a grid by explicit axes: q[None] with t[:, None]
    A, _ = disk.linearize(q[None], u[None], t=np.linspace(0, 1, 3)[:, None])
    assert A.shape == (3, k, 8, 8) and np.array_equal(A[1, 2], A0)
    # q and u batches of different, broadcastable shapes
    A, _ = disk.linearize(q[:, None], u[None, :3], t=np.zeros((k, 3)))
    assert A.shape == (k, 3, 8, 8)


def test_batches_still_refuse_shapes_that_do_not_broadcast(disk, op):
    q = np.tile(op.q, (4, 1))
    with pytest.raises(InputError, match=r"do not broadcast.*t: \(3,\)"):
        disk.linearize(q, op.u, t=np.zeros(3))


# -- the default partition, given explicitly ----------------------------------------------


class _Recorder:
    """Records the partitions the kernel is given (a kernel stand-in)."""

    def __init__(self, kernel):
        self._kernel = kernel
        self.partitions = []

    def __getattr__(self, name):
        return getattr(self._kernel, name)

    def linearize(self, n, t, q, u, r, p, dependent_q, dependent_u, *rest):
        self.partitions.append((dependent_q, dependent_u))
        return self._kernel.linearize(n, t, q, u, r, p, dependent_q, dependent_u, *rest)


@pytest.mark.parametrize("dependent_q, dependent_u", [
    (["q6"], ["u4", "u5", "u6"]),
    ([5], [3, 4, 5]),
    ((5,), np.array([5, 3, 4])),        # another order: the same partition
    (None, ["u6", "u5", "u4"]),
    (["q6"], None),
])
def test_default_partition_given_explicitly_takes_the_fast_path(disk, op, monkeypatch,
                                                                 dependent_q, dependent_u):
    """The straight-line code of the default partition, not the general path:
    the kernel gets no partition, and the results are those of the default call
    to the bit (rows and columns follow the model's order, whatever the order
    of dependent_q)."""
    recorder = _Recorder(disk._kernel)
    monkeypatch.setattr(disk.model, "_kernel", recorder)
    q, u = np.tile(op.q, (3, 1)), np.tile(op.u, (3, 1))
    kwargs = dict(dependent_q=dependent_q, dependent_u=dependent_u)
    A0, B0 = disk.linearize(q, u)
    A, B = disk.linearize(q, u, **kwargs)
    A_full0, _ = disk.linearize_full(q, u)
    A_full, _ = disk.linearize_full(q, u, **kwargs)
    assert np.array_equal(A, A0) and np.array_equal(B, B0) and np.array_equal(A_full, A_full0)
    assert recorder.partitions == [(None, None)] * 4
    A_one, _ = disk.linearize(op.q, op.u, **kwargs)    # one point
    assert np.array_equal(A_one, A0[0])
    assert disk.independent_state_names(**kwargs) == disk.state_names


def test_another_partition_still_takes_the_general_path(disk, op, monkeypatch):
    recorder = _Recorder(disk._kernel)
    monkeypatch.setattr(disk.model, "_kernel", recorder)
    disk.linearize(np.tile(op.q, (2, 1)), op.u, dependent_q=["q2"])
    (dq, du), = recorder.partitions
    assert list(dq) == [1] and du is None


def test_a_batch_that_does_not_fit_in_memory_is_explained(disk, op, monkeypatch):
    """linearize's batch path (behind its single-point fast path) turns
    NumPy's MemoryError into an InputError that names the method and says
    to split the batch."""
    from codegen.runtime import kernel

    def out_of_memory(*args, **kwargs):
        raise MemoryError("Unable to allocate 80.0 TiB")
    monkeypatch.setattr(kernel, "linearize", out_of_memory)
    with pytest.raises(InputError, match=r"disk: linearize: the batch does not fit in memory "
                                         r"\(Unable to allocate 80.0 TiB\); split it"):
        disk.linearize(np.tile(op.q, (3, 1)), op.u)
    A, _ = disk.linearize(op.q, op.u)       # one point: the kernel's single-point path
    assert A.shape == (disk.nx, disk.nx)


def test_single_calls_from_several_threads(disk):
    """The single-point paths (linearize, linearize_local) keep one
    workspace each between calls; callers in other threads at the same time
    (the C runs without the GIL) get their own: four threads of single calls
    at different points each get their points' results, bit for bit those
    of one batch."""
    import threading

    rng = np.random.default_rng(11)
    points = [disk.complete(rng.normal(scale=0.5, size=disk.nq), rng.normal(size=disk.nu))
              for _ in range(4)]
    q, u = (np.array([point[k] for point in points]) for k in (0, 1))
    expected, _ = disk.linearize(q, u, steady_tol=None)
    local = disk.linearize_local(q, u, steady_tol=None)
    wrong = []

    def work(k):
        for _ in range(1500):
            A, _ = disk.linearize(q[k], u[k], steady_tol=None)
            A_local = disk.linearize_local(q[k], u[k], steady_tol=None).A
            if not (np.array_equal(A, expected[k]) and np.array_equal(A_local, local.A[k])):
                wrong.append(k)
                return
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
