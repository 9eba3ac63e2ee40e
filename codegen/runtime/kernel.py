"""Every call into a generated kernel, and the thread pool that runs its batches.

A kernel is the Cython module ``_<name>`` of a generated package: loops over
the C functions, run without the GIL. This module is the only one that calls
it, so a change of the kernel's functions (their names, arguments, packed
layouts) is adapted here and nowhere else. The functions below take the
kernel and a batch (``batch.size`` points, ``batch.arrays`` with the rows of
t, q, u, r, p: see :mod:`codegen.runtime.arguments`), allocate the outputs in
the kernel's layout, and return the kernel's ``(status, index)`` with them.
"""

from __future__ import annotations

import concurrent.futures
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace as _Out   # the outputs of a kernel call, by name

import numpy as np

from ..status import CODES

# status codes of the generated C (the table is codegen/status.py)
OK = CODES["OK"]
NONFINITE_INPUT = CODES["NONFINITE_INPUT"]
CONFIGURATION_CONSTRAINT = CODES["CONFIGURATION_CONSTRAINT"]
VELOCITY_CONSTRAINT = CODES["VELOCITY_CONSTRAINT"]
SINGULAR_CONFIGURATION_PARTITION = CODES["SINGULAR_CONFIGURATION_PARTITION"]
SINGULAR_VELOCITY_PARTITION = CODES["SINGULAR_VELOCITY_PARTITION"]
SINGULAR_M_UU = CODES["SINGULAR_M_UU"]
NONFINITE_RESULT = CODES["NONFINITE_RESULT"]
NO_CONVERGENCE = CODES["NO_CONVERGENCE"]
NO_PROGRESS = CODES["NO_PROGRESS"]
RANK_DEFICIENT = CODES["RANK_DEFICIENT"]


# Batches are split across threads (the C kernels run without the GIL and are
# reentrant with one workspace per call) when they hold at least
# PARALLEL_THRESHOLD points and about PARALLEL_WORK operations of generated
# code in all: below that, starting threads costs more than it saves.
PARALLEL_THRESHOLD = 2048
PARALLEL_WORK = 1_000_000
# the most threads a batch may ask for (threads=...); a batch runs on at most
# as many threads as it has points, and on at most as many at once as the
# machine has cores (the others wait their turn)
MAX_THREADS = 1024
# operations of generated code between two looks for Ctrl-C in a kernel's loop
# (about 10 ms of work on a current core): Ctrl-C stops a batch, an
# equilibrium or a completion within about that
CHECK_WORK = 10_000_000
CORES = os.cpu_count() or 1
_pool_lock = threading.Lock()
_pool = None


def _forget_pool_in_child():
    """A forked child inherits the pool object but not its worker threads, so
    work submitted to it would wait forever (fork is multiprocessing's default
    on Linux). The child starts its own pool when it needs one, under a new
    lock: another thread may have held the old one at the fork."""
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):   # POSIX; without fork there is nothing to reset
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def _executor():
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=CORES, thread_name_prefix="codegen-batch")
        return _pool


def check_every(work_per_point, iterations=1):
    """Points (or iterations of an iterating kernel, each ``iterations``
    times the work of a point) between two looks for Ctrl-C."""
    return max(1, CHECK_WORK // max(1, int(work_per_point) * iterations))


# A kernel's input array holds one row per point, or one row that every point
# shares (the kernel's row(): a vector broadcast along the batch is not copied).

def row(array, index):
    """The row of point ``index`` of a kernel input array."""
    return array[index if array.shape[0] > 1 else 0]


def rows(array, start, stop):
    """The rows of points ``start:stop`` of a kernel array (None stays None)."""
    return array if array is None or array.shape[0] == 1 else array[start:stop]


def run_batch(function, n, inputs, options, outputs, threads=None, work_per_point=1):
    """``function(n, *inputs, *options, *outputs, check_every, cancel)`` ->
    (status, index), split into contiguous chunks of points run concurrently
    when the batch is large.

    ``inputs`` and ``outputs`` hold one row per point (or, for inputs, one shared
    row); ``threads`` defaults to the number of cores, and is at most ``n``.
    Returns the status of the first failing point in batch order and its
    index. Ctrl-C stops the batch within about CHECK_WORK operations: the
    kernel raises KeyboardInterrupt in the main thread, and the other chunks,
    cancelled, return before it is re-raised (no thread keeps running)."""
    every = check_every(work_per_point)
    cancel = np.zeros(1, dtype=np.intc)
    if threads is None:
        threads = CORES if n * work_per_point >= PARALLEL_WORK else 1
    threads = max(1, min(int(threads), n))
    if threads == 1 or n < PARALLEL_THRESHOLD:
        return function(n, *inputs, *options, *outputs, every, cancel)
    bounds = np.linspace(0, n, threads + 1).astype(int)
    chunks = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]

    def part(chunk):
        start, stop = chunk
        return function(stop - start, *[rows(a, start, stop) for a in inputs], *options,
                        *[rows(a, start, stop) for a in outputs], every, cancel)

    futures = [_executor().submit(part, chunk) for chunk in chunks]
    try:
        results = [future.result() for future in futures]
    except BaseException:
        # Ctrl-C (or another error) while waiting: stop the other chunks and
        # wait for them, so nothing runs on after the exception
        cancel[0] = 1
        for future in futures:
            future.cancel()
        concurrent.futures.wait(futures)
        raise
    for (start, stop), (status, index) in zip(chunks, results):
        if status != OK:
            return status, start + index
    return OK, n


# -- what the kernel says about itself ---------------------------------------------------

def sizes(kernel):
    """``{"nq": ..., "nu": ..., "nr", "np", "nc", "nv", "nx", "nl", "ns", "ndesc"}``."""
    return kernel.SIZES


def missing_function(kernel):
    """The first function a current runtime needs that the kernel lacks (a
    build of an older codegen), or None."""
    for function in ("linearize_local", "constraint_singular_values", "constraint_maps",
                     "outputs_local", "ENTRY_POINTS", "ONE_POINT_FLAGS"):
        if not hasattr(kernel, function):
            return function
    sensitivities = entry_point(kernel, "sensitivities")
    if sensitivities is not None and not any(row[0] == "unsteady" for row in sensitivities["parameters"]):
        return "sensitivities' steadiness flags"
    return None


def entry_point(kernel, name):
    """The kernel's row of the table of entry points (codegen/entry_points.py)
    for ``name``: a dict of ``family``, ``batch`` (``"map"``: a generated loop
    :func:`call` runs) and ``parameters`` (name, role, C type, shape ((rows,) of a
    vector, (rows, cols) of a matrix, or None), optional); None where the kernel has no such entry point."""
    table = getattr(kernel, "ENTRY_POINTS", None)
    return None if table is None else table.get(name)


def map_entry_points(kernel):
    """Names of the kernel's entry points that map each point to outputs."""
    return tuple(name for name, spec in kernel.ENTRY_POINTS.items() if spec["batch"] == "map")


def map_entry_point(kernel, name):
    """The table row of the ``"map"`` entry point ``name``, or None."""
    spec = entry_point(kernel, name)
    return spec if spec is not None and spec["batch"] == "map" else None


def call(kernel, name, batch, options=None, wanted=None, threads=None, work=1):
    """The ``"map"`` entry point ``name`` at every point of a batch, its
    outputs allocated from the kernel's table: ``options`` by parameter name
    (scalars, partition index arrays; absent: None, which the kernel reads as
    NULL for an array); ``wanted``: the optional outputs to compute (None:
    all; the others are passed as NULL and not computed). Returns ``(status,
    index, out)`` with ``out.<output>`` a row per point (rows x cols entries;
    int outputs as C ints), None where not wanted."""
    spec = entry_point(kernel, name)
    n, a = batch.size, batch.arrays
    inputs, values, outputs, out = [], [], [], {}
    for parameter, role, ctype, shape, optional in spec["parameters"]:
        if role in ("time", "point"):
            inputs.append(a[parameter])
        elif role == "output":
            asked = not optional or wanted is None or parameter in wanted
            array = (np.empty((n, math.prod(shape)), dtype=np.intc if "int" in ctype else float)
                     if asked else None)
            outputs.append(array)
            out[parameter] = array
        else:
            values.append((options or {}).get(parameter))
    status, index = run_batch(getattr(kernel, name), n, inputs, values, outputs, threads, work)
    return status, index, _Out(**out)


class _Point:
    """One point as a batch of one (for the diagnostic calls at a point)."""

    size = 1

    def __init__(self, point):
        self.arrays = {key: np.atleast_1d(np.asarray(point[key], dtype=float))[None]
                       if key != "t" else np.atleast_1d(float(point["t"])) for key in point}


def rank_rtol(kernel):
    """The C's default rank tolerance (``<NAME>_RANK_RTOL``), relative to the
    largest singular value."""
    return kernel.RANK_RTOL


def condition_rtol(kernel):
    """Pivots below this times the Jacobian's largest entry get a condition
    estimate (``<NAME>_CONDITION_RTOL``)."""
    return kernel.CONDITION_RTOL


def status_message(kernel, status):
    """The C's sentence for a status code."""
    return kernel.status_message(status)


def cancelled(kernel, status):
    """Whether a batch stopped because another of its threads saw Ctrl-C."""
    return status == kernel.CANCELLED


def module_file(kernel):
    """The kernel's shared library (None for a kernel not loaded from a file)."""
    return getattr(kernel, "__file__", None)


def module_name(kernel):
    """The kernel's module name (``<package>._<name>``), "" if it has none."""
    return getattr(kernel, "__name__", "")


# -- one point, in the calling thread ------------------------------------------------------

def linearize_one_function(kernel):
    """The kernel's function ``(q, u, r, p, t, tol, max_condition,
    steady_tol) -> (A, B, unsteady)`` at one point with the default partition
    from the arguments as given, or None where it cannot say (not plain
    vectors, a failed point, a block's condition above ``max_condition``):
    the caller then takes the batch path, which validates, explains and
    warns. ``unsteady``: None, or the flags of the states that are not steady
    in the chart (``steady_tol >= 0``), as a row of the batch path's
    ``out.unsteady``: the caller warns. Called directly (a single call's cost
    is its overhead)."""
    return kernel.linearize_one


def linearize_local_one(kernel, q, u, r, p, t, rank_tol, tol, steady_tol):
    """``(A, B, T, rank_c, rank_v, sigma, chart, unsteady)`` of one point,
    the arrays trimmed to its size, or None (as :func:`linearize_one_function`'s)."""
    return kernel.linearize_local_one(q, u, r, p, t, rank_tol, tol, steady_tol)


def nonfinite_blocks(kernel, point):
    """Names of the blocks that hold NaN or Inf at ``point`` (a dict of t, q,
    u, r, p), evaluated as a linearization would (the kernel's
    ``nonfinite_blocks``); None where it cannot say."""
    status, _, out = call(kernel, "nonfinite_blocks", _Point(point))
    if status != OK:
        return None
    return [name for name, flag in zip(kernel.BLOCK_NAMES, out.flags[0]) if flag]


def constraint_jacobians(kernel, point):
    """``(J_c, B_v)`` at ``point`` (a dict of t, q, u, r, p), from the
    kernel's ``constraint_maps``; None where they are not finite there."""
    s = kernel.SIZES
    status, _, out = call(kernel, "constraint_maps", _Point(point), wanted=("J_c", "B_v"))
    if status != OK:
        return None
    return out.J_c[0].reshape(s["nc"], s["nq"]), out.B_v[0].reshape(s["nv"], s["nu"])


def constraint_rank(kernel, point, rank_tol):
    """The C's SVDs of J_c and B_v at ``point``: ``(ranks, sigma_c, sigma_v,
    U_c, U_v)`` (the left singular vectors as columns, in the order of the
    singular values), or None where J_c or B_v is not finite there."""
    s = kernel.SIZES
    status, _, out = call(kernel, "constraint_singular_values", _Point(point),
                          {"rank_tol": rank_tol})
    if status != OK:
        return None
    nc, nv = s["nc"], s["nv"]
    return (out.ranks[0], out.sigma[0, :nc], out.sigma[0, nc:], out.U_c[0].reshape(nc, nc),
            out.U_v[0].reshape(nv, nv))


def constraint_residuals_at(kernel, point):
    """``(f_c, f_v)`` at ``point`` (a dict of t, q, u, p: vectors and a time)."""
    _, _, out = call(kernel, "constraint_residuals", _Point(point))
    return out.f_c[0], out.f_v[0]


# -- batches --------------------------------------------------------------------------

def _inputs(batch):
    a = batch.arrays
    return a["t"], a["q"], a["u"], a["r"], a["p"]


def _automatic(dependent, n, count):
    """Kernel arguments of a partition that may be ``"auto"`` (a str): (the
    indices or None, whether automatic, the rows receiving each point's choice)."""
    if isinstance(dependent, str):
        return None, True, np.zeros((n, count), dtype=np.intc)
    return dependent, False, None


def linearize(kernel, batch, *, full, dependent_q, dependent_u, tol, steady_tol, threads, work):
    """``linearize`` (``full``: ``linearize_full``) of a batch. ``dependent_q``,
    ``dependent_u``: index arrays, None (the default) or ``"auto"``;
    ``steady_tol`` < 0: no steadiness check. Returns ``(status, index, out)``:
    ``out.A``, ``out.B`` (one row per point: ``A`` nx x nx or, full, ns x nx),
    ``out.condition`` (the partition blocks' condition estimates, a row per
    point), ``out.unsteady`` (flags of the states, or None), and
    ``out.dependent_q``, ``out.dependent_u``: the partition each point used
    (rows per point where automatic, else as given)."""
    s = kernel.SIZES
    n, nx, nr, ns = batch.size, s["nx"], s["nr"], s["ns"]
    rows_of_A = ns if full else nx
    A, B = np.empty((n, rows_of_A * nx)), np.empty((n, rows_of_A * nr))
    condition = np.empty((n, 2))
    dq, auto_q, chosen_q = _automatic(dependent_q, n, s["nc"])
    du, auto_u, chosen_u = _automatic(dependent_u, n, s["nv"])
    unsteady = np.zeros((n, nx), dtype=np.intc) if steady_tol >= 0.0 and nx else None
    outputs = (None, None, A, B) if full else (A, B, None, None)
    status, index = run_batch(kernel.linearize, n, _inputs(batch),
                              (dq, du, tol, auto_q, auto_u, 0.0, steady_tol),
                              (*outputs, None, None, condition, chosen_q, chosen_u, unsteady),
                              threads, work)
    out = _Out(A=A, B=B, condition=condition, unsteady=unsteady,
               dependent_q=chosen_q if auto_q else dependent_q,
               dependent_u=chosen_u if auto_u else dependent_u)
    return status, index, out


def linearize_local(kernel, batch, *, width, rank_tol, tol, steady_tol, threads, work):
    """The local state-space form of a batch. ``width``: the size (nx) every
    point is expected to have (the size of the last uniform batch); where a
    point's differs, the batch is run again with rows of the largest size.
    Returns ``(status, index, out)``: ``out.A``, ``out.B``, ``out.T`` (one row
    per point, each point's arrays packed with its own nx in rows of width
    ``out.width``), ``out.ranks`` (rank of J_c, of B_v), ``out.charts`` (the
    chart's dependent indices, -1: the null spaces'), ``out.unsteady``."""
    s = kernel.SIZES
    n, nr, ns = batch.size, s["nr"], s["ns"]
    ranks = np.empty((n, 2), dtype=np.intc)
    charts = np.empty((n, s["nc"] + s["nv"]), dtype=np.intc)

    def run(k):
        # rows of k states: A k x k, B k x nr, T ns x k (compact where every
        # point has k; k = ns holds any point)
        out = _Out(A=np.empty((n, k * k)), B=np.empty((n, k * nr)), T=np.empty((n, ns * k)), width=k,
                   ranks=ranks, charts=charts,
                   unsteady=np.zeros((n, k), dtype=np.intc) if steady_tol >= 0.0 and ns else None)
        status, index = run_batch(kernel.linearize_local, n, _inputs(batch),
                                  (rank_tol, tol, steady_tol, k),
                                  (out.A, out.B, out.T, ranks, charts, out.unsteady), threads, work)
        return status, index, out

    status, index, out = run(min(max(width, s["nx"]), ns))
    if status == kernel.NONUNIFORM:
        status, index, out = run(ns)
    return status, index, out


def singular_values(kernel, batch, rank_tol):
    """A function giving the ``(n, nc + nv)`` singular values of J_c and B_v
    of the batch's points, computed when first called (from a copy of the
    points: the caller may change its arrays afterwards)."""
    a = {key: np.array(batch.arrays[key]) for key in ("t", "q", "u", "p")}
    n, s = batch.size, kernel.SIZES

    def compute():
        sigma = np.empty((n, s["nc"] + s["nv"]))
        status, index = run_batch(kernel.constraint_singular_values, n,
                                  (a["t"], a["q"], a["u"], a["p"]), (rank_tol,),
                                  (None, sigma, None, None))
        return status, index, sigma
    return compute


def linearize_descriptor(kernel, batch, *, rank_tol, tol, steady_tol, threads, work):
    """The descriptor form of a batch: ``(status, index, out)`` with ``out.E``,
    ``out.A``, ``out.B`` (a row per point: ndesc x ndesc, ndesc x nr),
    ``out.ranks`` (rank of J_c, of B_v), ``out.unsteady`` (flags of the
    coordinates and speeds, or None)."""
    s = kernel.SIZES
    n, size, nr, ns = batch.size, s["ndesc"], s["nr"], s["ns"]
    E, A, B = np.empty((n, size * size)), np.empty((n, size * size)), np.empty((n, size * nr))
    ranks = np.empty((n, 2), dtype=np.intc)
    unsteady = np.zeros((n, ns), dtype=np.intc) if steady_tol >= 0.0 and ns else None
    status, index = run_batch(kernel.linearize_descriptor, n, _inputs(batch),
                              (rank_tol, tol, steady_tol), (E, A, B, ranks, unsteady),
                              threads, work)
    return status, index, _Out(E=E, A=A, B=B, ranks=ranks, unsteady=unsteady)


def equilibrium(kernel, batch, *, vary_q, vary_u, rank_tol, tol, max_step, max_iter, work):
    """Gauss-Newton from each point's (q, u), one point after another (a point
    costs many iterations). ``vary_q``, ``vary_u``: flags of the unknowns (None:
    the C's defaults). Returns ``(status, index, out)``: ``out.q``, ``out.u``
    (the solutions, or the last iterate of the failing point), and per point
    ``out.iterations``, ``out.residual`` (final max|R|), ``out.initial``
    (max|R| at the guess)."""
    n, a = batch.size, batch.arrays
    q, u = batch.writable_rows("q"), batch.writable_rows("u")
    iterations = np.zeros(n, dtype=np.intc)
    residual, initial = np.zeros(n), np.zeros(n)
    status, index = kernel.equilibrium(
        n, a["t"], q, u, a["r"], a["p"], vary_q, vary_u, rank_tol, tol, max_step, max_iter,
        iterations, residual, initial, check_every(work, 20), None)
    return status, index, _Out(q=q, u=u, iterations=iterations, residual=residual,
                               initial=initial)


def state_derivative(kernel, batch, *, threads, work):
    """``(status, index, out)`` with ``out.qd``, ``out.ud``: a row per point."""
    return call(kernel, "state_derivative", batch, threads=threads, work=work)


def constraint_residuals(kernel, batch, *, work):
    """``(status, index, out)`` with ``out.f_c``, ``out.f_v``: a row per point
    (on one thread: each point costs little)."""
    return call(kernel, "constraint_residuals", batch, threads=1, work=work)


def complete(kernel, batch, *, dependent_q, dependent_u, tol, max_iter, work):
    """Newton on f_c for the dependent coordinates from each point's q, then
    f_v for the dependent speeds (``dependent_q``, ``dependent_u`` as for
    :func:`linearize`; ``"auto"``: chosen at the given point). Returns
    ``(status, index, out)``: ``out.q``, ``out.u`` (completed, or Newton's last
    iterate at the failing point), ``out.condition`` (J_c P_qd's condition
    estimate per point), ``out.dependent_q``, ``out.dependent_u`` as for
    :func:`linearize`."""
    s, n, a = kernel.SIZES, batch.size, batch.arrays
    q, u = batch.writable_rows("q"), batch.writable_rows("u")
    condition = np.empty(n)
    dq, auto_q, chosen_q = _automatic(dependent_q, n, s["nc"])
    du, auto_u, chosen_u = _automatic(dependent_u, n, s["nv"])
    status, index = kernel.complete_point(n, a["t"], q, u, a["p"], dq, du, tol, max_iter,
                                          auto_q, auto_u, 0.0, condition, chosen_q, chosen_u,
                                          check_every(work), None)
    out = _Out(q=q, u=u, condition=condition,
               dependent_q=chosen_q if auto_q else dependent_q,
               dependent_u=chosen_u if auto_u else dependent_u)
    return status, index, out
