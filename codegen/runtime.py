"""The Python face of a generated module.

A generated package (``generated/<name>/``) holds a compiled kernel (Cython
loops over the C functions) and builds one :class:`CompiledModel` from it. This
class validates and broadcasts arguments and turns the C status codes into
exceptions that say what is wrong, at which point of a batch. It imports only
NumPy, so loading a generated module does not load SymPy.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import threading
import types
import warnings
import concurrent.futures
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import errors
from .errors import (EvaluationError, IllConditionedWarning, InputError, MultipleRootWarning,
                     NotSteadyWarning)
from .partition import complement
from .status import CODES, STATUSES

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

_EXCEPTION = {s.code: getattr(errors, s.exception) for s in STATUSES if s.exception}


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
_CORES = os.cpu_count() or 1
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
            _pool = ThreadPoolExecutor(max_workers=_CORES,
                                       thread_name_prefix="codegen-batch")
        return _pool


def check_every(work_per_point, iterations=1):
    """Points (or iterations of an iterating kernel, each ``iterations``
    times the work of a point) between two looks for Ctrl-C."""
    return max(1, CHECK_WORK // max(1, int(work_per_point) * iterations))


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
        threads = _CORES if n * work_per_point >= PARALLEL_WORK else 1
    threads = max(1, min(int(threads), n))
    if threads == 1 or n < PARALLEL_THRESHOLD:
        return function(n, *inputs, *options, *outputs, every, cancel)
    bounds = np.linspace(0, n, threads + 1).astype(int)
    chunks = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]

    def rows(array, start, stop):
        return array if array is None or array.shape[0] == 1 else array[start:stop]

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


# the blocks named in messages about NaN or Inf, for people
_BLOCK_DESCRIPTIONS = {
    "f_c": "f_c (the configuration constraints)",
    "f_v": "f_v (the velocity constraints)",
    "kinematic_residual": "the kinematic equations",
    "M_qq": "M_qq (d f_k/d qd)",
    "qd": "qd*",
    "speed_residual": "the dynamic equations",
    "M_uu": "M_uu (the speed mass matrix)",
    "ud": "ud*",
    "J_c": "J_c (d f_c/d q)",
    "J_vq": "d f_v/d q",
    "B_v": "B_v (d f_v/d u)",
}


# the most iterations equilibrium and complete may be asked for: Newton's
# method converges in tens where it converges at all (and both stop early
# when the residual stops decreasing)
MAX_ITER = 100_000

# complete() warns of a multiple root when the condition estimate of J_c P_qd
# at the converged point exceeds MULTIPLE_ROOT / sqrt(tol): at a double root
# of f_c, Newton's method stops about sqrt(tol) from it, where the block's
# smallest pivot is about sqrt(tol) (relative), so the estimate is of order
# 1/sqrt(tol); at a simple root it stays of order one.
MULTIPLE_ROOT = 1e-2

AUTO = "auto"   # dependent_q/dependent_u: chosen at each point (column-pivoted QR)

# the default steady_tol: a rate of an essential state of the result's chart
# above STEADY_TOL times the largest rate (at least 1) makes the point not
# steady in that chart (NotSteadyWarning)
STEADY_TOL = 1e-6


def _estimate(value):
    """A condition estimate for a message; the C reports a zero pivot as
    infinite or as the largest double."""
    return f"{value:.2e}" if value < 1e300 else "infinite: the block is singular"


def _outside_stacklevel():
    """The ``stacklevel`` of ``warnings.warn`` (called by the caller of this
    function) that points at the first frame outside this module: the user's
    call, however deep inside the runtime the warning is raised."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
        level += 1
    return level


def _shown(value):
    """repr for a message, cut short (an int of 400 digits is not read)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:30] + "..."


def _plain_number(value):
    """A Python int or float a C double holds (the single-point fast path)."""
    return isinstance(value, float) or (isinstance(value, int) and abs(value) < 1e308)


def _available_memory():
    """Bytes of memory available to a new allocation: MemAvailable on Linux,
    the physical memory elsewhere (None if unknown)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _memory_explained(method):
    """A batch too large for memory raises InputError saying so (NumPy's
    MemoryError names the size), not a bare MemoryError."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except MemoryError as error:
            raise InputError(
                f"{self.name}: {method.__name__}: the batch does not fit in memory ({error}); "
                "split it into smaller batches, e.g. over the blocks of a dask.array "
                "(README, Batches)") from None
    return wrapper


class _Batch:
    """Arguments flattened to one row per point (or one shared row)."""

    def __init__(self, shape, arrays):
        self.shape = shape
        self.size = math.prod(shape)
        self.arrays = arrays

    def check_fits(self, name, doubles_per_point):
        """InputError before allocating results that cannot fit in memory (an
        allocation beyond it may succeed lazily and bring the kernel's
        out-of-memory killer down on the whole machine when written)."""
        needed = self.size * doubles_per_point * 8
        if needed < 1 << 28:      # 256 MiB: no need to ask the system
            return
        available = _available_memory()
        if available is not None and needed > available:
            raise InputError(
                f"{name}: the results of a batch of {self.size} points need "
                f"{needed / 2**30:.1f} GiB, more than the {available / 2**30:.1f} GiB of memory "
                "available: split it into smaller batches, e.g. over the blocks of a dask.array "
                "(README, Batches)")

    def reshape(self, flat, *trailing):
        return flat.reshape(self.shape + trailing)


class CompiledModel:
    """Validated, broadcasting access to a generated kernel."""

    def __init__(self, kernel, *, name, description, generator_version, q_names, u_names,
                 r_names, p_names, default_parameters, dependent_q, dependent_u,
                 operation_count):
        self._kernel = kernel
        self.name = name
        self.description = description
        self.generator_version = generator_version
        self.q_names = tuple(q_names)
        self.u_names = tuple(u_names)
        self.r_names = tuple(r_names)
        self.p_names = tuple(p_names)
        self.default_parameters = np.array(default_parameters, dtype=float)
        self.default_parameters.setflags(write=False)
        self.dependent_q = tuple(dependent_q)
        self.dependent_u = tuple(dependent_u)
        self.operation_count = operation_count
        sizes = kernel.SIZES
        self.nq, self.nu, self.nr, self.np = sizes["nq"], sizes["nu"], sizes["nr"], sizes["np"]
        self.nc, self.nv, self.nx = sizes["nc"], sizes["nv"], sizes["nx"]
        expected = (len(q_names), len(u_names), len(r_names), len(p_names),
                    len(dependent_q), len(dependent_u))
        if expected != (self.nq, self.nu, self.nr, self.np, self.nc, self.nv):
            raise ImportError(f"generated module {name!r}: kernel and metadata disagree; rebuild it")
        missing = [f for f in ("linearize_local", "constraint_singular_values")
                   if not hasattr(kernel, f)]
        if missing:
            raise ImportError(f"generated module {name!r} was built by an older codegen (its kernel "
                              f"has no {missing[0]}); rebuild it: python -m codegen build "
                              f"{name} --force (or codegen.build(model, force=True))")
        # linearize_local's batches: the size of the local state the last batch
        # had throughout (a guess for the next; nx unless constraints are redundant)
        self._local_width = self.nx
        # condition estimate of a partition block above which IllConditionedWarning
        # is raised: the C estimates it where a pivot is below CONDITION_RTOL
        # times the Jacobian's largest entry (the straight-line code's pivots above
        # it are not estimated), so the threshold is the C's
        self.ill_conditioned = 1.0 / kernel.CONDITION_RTOL
        self.state_names = self.independent_state_names()
        self._extend_package()

    # -- names -----------------------------------------------------------------
    def independent_state_names(self, dependent_q=None, dependent_u=None):
        """Names of x = [q_i, u_i] for a partition (default: the model's)."""
        dq = self._partition(dependent_q, self.nq, self.nc, self.q_names, "dependent_q")
        du = self._partition(dependent_u, self.nu, self.nv, self.u_names, "dependent_u")
        dq = self.dependent_q if dq is None else tuple(dq)
        du = self.dependent_u if du is None else tuple(du)
        return tuple([self.q_names[i] for i in complement(self.nq, dq)] +
                     [self.u_names[i] for i in complement(self.nu, du)])

    @property
    def full_state_names(self):
        return self.q_names + self.u_names

    def parameters(self, **values):
        """The default parameter vector with some entries replaced by name."""
        return self._parameter_dict(values)

    # -- argument handling -----------------------------------------------------
    def _parameter_dict(self, values):
        p = self.default_parameters.copy()
        for key, value in values.items():
            # a SymPy Symbol stands for its name (without importing SymPy here)
            key = key if isinstance(key, str) else getattr(key, "name", key)
            try:
                index = self.p_names.index(key)
            except ValueError:
                raise InputError(f"{self.name}: unknown parameter {key!r}; "
                                 f"parameters are {', '.join(self.p_names)}") from None
            if isinstance(value, (complex, np.complexfloating)):
                raise InputError(f"{self.name}: parameter {key!r} must be a real number, got {_shown(value)}")
            try:
                p[index] = float(value)
            except (TypeError, ValueError, OverflowError):
                raise InputError(f"{self.name}: parameter {key!r} must be a number that fits "
                                 f"a double, got {_shown(value)}") from None
        return p

    def _name_indices(self, given, count, names, label):
        """Indices into ``names`` of ``given`` (names or indices, one or a list),
        each in range and at most once; InputError otherwise."""
        if isinstance(given, str):
            given = [given]
        given = list(np.atleast_1d(given)) if not isinstance(given, (list, tuple)) else list(given)
        indices = []
        for item in given:
            if isinstance(item, str):
                item = str(item)   # a NumPy string prints as itself
                if item not in names:
                    hint = (' (for the partition chosen at each point: "auto", in lower case)'
                            if item.lower() == AUTO and label.startswith("dependent") else "")
                    raise InputError(f"{self.name}: {label}: unknown name {item!r}{hint}; names "
                                     f"are {', '.join(names)}")
                indices.append(names.index(item))
            elif isinstance(item, (int, np.integer)) and not isinstance(item, bool):
                indices.append(int(item))
            else:
                raise InputError(f"{self.name}: {label} must hold indices or names, got {item!r}")
        for i in indices:
            if not 0 <= i < count:
                raise InputError(f"{self.name}: {label} index {i} is out of range 0..{count - 1}")
        if len(set(indices)) != len(indices):
            raise InputError(f"{self.name}: {label} repeats an index: {indices}")
        return indices

    def _partition(self, given, count, dependent_count, names, label):
        """A given partition (names or indices) as indices; None for None.
        ``"auto"`` is for calls at points (it depends on the point): refused."""
        if given is None:
            return None
        if isinstance(given, str) and given == AUTO:
            raise InputError(f"{self.name}: {label}=\"auto\" depends on the point: it is taken "
                             "by linearize, linearize_full and complete, whose results name the "
                             "partition chosen (.dependent_q, .dependent_u, .state_names)")
        indices = self._name_indices(given, count, names, label)
        if len(indices) != dependent_count:
            raise InputError(f"{self.name}: {label} needs {dependent_count} entries "
                             f"(one per constraint), got {len(indices)}; where the constraint "
                             "Jacobian has lost rank no partition works: use linearize_local")
        return indices

    def _indices(self, given, count, dependent_count, names, label, default):
        """The partition for the kernel: None for the model's default, also
        when given explicitly (in any order: the rows and columns of the
        results follow the model's order, not that of dependent_q), so the
        call takes the straight-line code of the default partition; AUTO for
        ``"auto"`` (chosen at each point)."""
        if isinstance(given, str) and given == AUTO:
            return AUTO
        indices = self._partition(given, count, dependent_count, names, label)
        if indices is None or sorted(indices) == sorted(default):
            return None
        return np.array(indices, dtype=np.intc)

    def _partitions(self, dependent_q, dependent_u):
        return (self._indices(dependent_q, self.nq, self.nc, self.q_names, "dependent_q",
                              self.dependent_q),
                self._indices(dependent_u, self.nu, self.nv, self.u_names, "dependent_u",
                              self.dependent_u))

    def _numbers(self, value, label, what="an array of numbers"):
        """``value`` as a float array; InputError for what is not real numbers."""
        if isinstance(value, dict):
            raise InputError(f"{self.name}: {label} must be an array, not a dict")
        if value is None:
            raise InputError(f"{self.name}: {label} must be {what}, got None")
        try:
            array = np.asarray(value)
        except (TypeError, ValueError, OverflowError):   # e.g. ragged nested lists
            raise InputError(f"{self.name}: {label} must be {what}") from None
        # NumPy would keep only the real part of complex values (with a warning)
        # and would parse strings: refuse both
        if array.dtype.kind == "c" or (array.dtype.kind == "O" and any(
                isinstance(x, (complex, np.complexfloating)) for x in array.flat)):
            raise InputError(f"{self.name}: {label} holds complex values; it must be real")
        if array.dtype.kind == "O" and any(x is None for x in array.flat):
            raise InputError(f"{self.name}: {label} holds None; it must be {what}")
        if array.dtype.kind not in "biufO":
            raise InputError(f"{self.name}: {label} must be {what}, got dtype {array.dtype}")
        try:
            return np.asarray(array, dtype=float)
        except OverflowError:
            raise InputError(f"{self.name}: {label} holds a number too large for a double") from None
        except (TypeError, ValueError):
            raise InputError(f"{self.name}: {label} must be {what}") from None

    def _vector(self, value, length, label):
        array = self._numbers(value, label)
        if array.ndim == 0 or array.shape[-1] != length:
            raise InputError(f"{self.name}: {label} must have length {length} in its last "
                             f"dimension, got shape {array.shape}")
        return array

    def _batch(self, q, u, r=None, p=None, t=0.0):
        arrays = {"q": self._vector(q, self.nq, "q"), "u": self._vector(u, self.nu, "u")}
        if r is None:
            r = np.zeros(self.nr)
        arrays["r"] = self._vector(r, self.nr, "r")
        if p is None:
            p = self.default_parameters
        elif isinstance(p, dict):
            p = self._parameter_dict(p)
        arrays["p"] = self._vector(p, self.np, "p")
        t = self._numbers(t, "t", "a number or an array of numbers")
        try:
            shape = np.broadcast_shapes(*(a.shape[:-1] for a in arrays.values()), t.shape)
        except ValueError:
            shapes = ", ".join(f"{k}: {a.shape}" for k, a in arrays.items())
            raise InputError(f"{self.name}: leading (batch) dimensions do not broadcast: "
                             f"{shapes}, t: {t.shape}") from None
        # t holds one time per point. With more dimensions than the batch of the
        # vectors, broadcasting would form every combination: t of shape (100, 1)
        # beside q of shape (100, 6) would make 100 x 100 points. Refuse that.
        vector_dims = max(a.ndim - 1 for a in arrays.values())
        if 0 < vector_dims < t.ndim:
            points = np.broadcast_shapes(*(a.shape[:-1] for a in arrays.values()))
            raise InputError(
                f"{self.name}: t of shape {t.shape} has more dimensions than the batch of "
                f"q, u, r, p {points}, so broadcasting would make a batch of shape {shape}; "
                f"t holds one time per point: pass t of shape {points} (or a scalar), or "
                "give q, u, r or p the extra dimensions explicitly for a grid")
        flat = {}
        for key, array in arrays.items():
            flat[key] = self._rows(array, array.shape[:-1], shape, array.shape[-1])
        flat["t"] = self._rows(t, t.shape, shape, None)
        # NaN and Inf are refused by the C (status NONFINITE_INPUT), so valid
        # batches are not scanned twice; _raise then names the argument.
        return _Batch(shape, flat)

    def _nonfinite_detail(self, batch):
        """InputError naming the first non-finite argument and batch index."""
        shape = batch.shape
        for key, array in batch.arrays.items():
            if not np.all(np.isfinite(array)):
                bad = np.argwhere(~np.isfinite(array.reshape(array.shape[0], -1)))[0][0]
                index = tuple(int(i) for i in np.unravel_index(bad, shape)) if shape else ()
                where = f" at batch index {index}" if array.shape[0] > 1 else ""
                return InputError(f"{self.name}: {key} holds a non-finite value{where}")
        return None

    @staticmethod
    def _rows(array, own_shape, shape, length):
        """One row per point, or a single row when the value is shared: also
        a vector broadcast along the batch (np.broadcast_to: every batch
        stride 0), which is not copied into a row per point."""
        batch_strides = array.strides[:len(own_shape)]
        if math.prod(own_shape) == 1 or math.prod(own_shape) > 1 and all(
                stride == 0 for stride, size in zip(batch_strides, own_shape) if size > 1):
            array = array[(0,) * len(own_shape)] if own_shape else array
            rows = array.reshape((1, length) if length is not None else (1,))
        else:
            full = np.broadcast_to(array, shape + ((length,) if length is not None else ()))
            count = math.prod(shape)   # explicit: -1 is ambiguous for zero-length rows
            rows = full.reshape((count, length) if length is not None else (count,))
        return np.ascontiguousarray(rows, dtype=float)

    # -- errors ----------------------------------------------------------------
    def _raise(self, status, index, batch, dependent_q=None, dependent_u=None, tol=None,
               detail="", blocks=None, partitioned=True):
        """The exception for a failed call at batch point ``index``; ``detail``
        follows the message and the index; ``blocks``: the blocks the call
        evaluates, when not all (named if they hold NaN or Inf).
        ``partitioned``: the call used a partition, so a singular matrix may
        come from a rank-deficient constraint Jacobian (said so, pointing to
        linearize_local); False for the calls that handle rank deficiency."""
        if status == self._kernel.CANCELLED:   # another thread saw Ctrl-C
            raise KeyboardInterrupt
        if status == NONFINITE_INPUT:
            error = self._nonfinite_detail(batch)
            if error is not None:
                raise error
        where = ""
        if batch.shape:
            where = f" at batch index {tuple(int(i) for i in np.unravel_index(index, batch.shape))}"
        message = self._kernel.status_message(status)
        dq = self.dependent_q if dependent_q is None else tuple(dependent_q)
        du = self.dependent_u if dependent_u is None else tuple(dependent_u)
        hint = ""
        if status in (CONFIGURATION_CONSTRAINT, VELOCITY_CONSTRAINT):
            message += self._violation_detail(status, index, batch, tol)
            hint = self._parameter_hint(self._row(batch, index)["p"])
        elif status == NONFINITE_RESULT:
            message += self._nonfinite_blocks(self._row(batch, index), blocks)
        elif status == SINGULAR_CONFIGURATION_PARTITION:
            message = (f"the constraint Jacobian block J_c P_qd (d f_c/d q in the columns of the "
                       f"dependent coordinates {[self.q_names[i] for i in dq]}) is singular; "
                       "choose other dependent coordinates (dependent_q=..., or "
                       "dependent_q=\"auto\" to choose them at each point)")
        elif status == SINGULAR_VELOCITY_PARTITION:
            message = (f"the constraint Jacobian block B_v P_ud (d f_v/d u in the columns of the "
                       f"dependent speeds {[self.u_names[i] for i in du]}) is singular; "
                       "choose other dependent speeds (dependent_u=..., or "
                       "dependent_u=\"auto\" to choose them at each point)")
        if partitioned and status in (SINGULAR_CONFIGURATION_PARTITION,
                                      SINGULAR_VELOCITY_PARTITION, SINGULAR_M_UU, RANK_DEFICIENT):
            # a rank-deficient constraint Jacobian makes every partition block
            # and the multiplier form's speed mass matrix singular: name the cause
            message = self._rank_deficiency(self._row(batch, index),
                                            near=status == SINGULAR_M_UU) or message
        raise _EXCEPTION.get(status, EvaluationError)(f"{self.name}: {message}{where}{detail}{hint}")

    @staticmethod
    def _row(batch, index):
        """The arguments of batch point ``index``."""
        return {k: a[index if a.shape[0] > 1 else 0] for k, a in batch.arrays.items()}

    def _parameter_hint(self, p):
        """Why a point may violate the constraints: it was made for other
        parameters (e.g. the README's p={"r": 0.3} at a point made for r = 1)."""
        changed = [f"{n} = {v:g}" for n, v, d in zip(self.p_names, p, self.default_parameters)
                   if v != d]
        if not changed:
            return ""
        return (f"; the parameters differ from the defaults ({', '.join(changed)}): a point made "
                "for other parameter values is off the constraints, so make it for these: "
                "codegen.operating_point(..., parameters={...}) for a built-in model, or "
                "complete(q, u, p=...) to project it onto the constraints")

    # relative singular value below which a constraint Jacobian counts as rank
    # deficient in error messages: <NAME>_RANK_RTOL of the generated C (the
    # default tolerance of linearize_local, linearize_descriptor and "auto")
    @property
    def RANK_RTOL(self):
        return self._kernel.RANK_RTOL

    # a constraint Jacobian of full rank whose smallest singular value is below
    # this (relative) makes the speed mass matrix (whose condition grows like
    # its square) singular to working precision: a point near a singular
    # configuration, named as such in the error
    NEAR_RANK_RTOL = 1e-6

    _LOCAL_HINT = ("use linearize_local(q, u, ...), the local state-space form, which "
                   "linearizes such points (more states, minimum-norm multipliers), or "
                   "linearize_descriptor")

    def _rank_deficiency(self, row, near=False):
        """Message saying that J_c or B_v lost rank at the point (a singular
        configuration: no partition works), or (``near``: the speed mass
        matrix was found singular) that one is so close to it that the speed
        mass matrix is singular to working precision; "" otherwise."""
        jacobians = getattr(self._kernel, "constraint_jacobians", None)
        if jacobians is None:
            return ""
        J_c, B_v = jacobians(float(row["t"]), row["q"], row["u"], row["r"], row["p"])
        deficient, close = [], []
        for label, matrix, rows_label in (("J_c = d f_c/d q", J_c, "f_c"),
                                          ("B_v = d f_v/d u", B_v, "f_v")):
            if matrix.shape[0] == 0 or not np.all(np.isfinite(matrix)):
                continue
            left, values, _ = np.linalg.svd(matrix)
            scale = values[0] if values.size else 0.0
            rank = int(np.sum(values > self.RANK_RTOL * scale)) if scale > 0 else 0
            count = matrix.shape[0]
            if rank == count and (not near or values[-1] >= self.NEAR_RANK_RTOL * scale):
                continue
            # the constraints that combine into a (nearly) vanishing row: the
            # left singular vectors of the smallest singular values
            weak = rank if rank < count else count - 1
            involved = [f"{rows_label}[{i}]" for i in range(count)
                        if np.abs(left[i, weak:]).max() > 1e-3]
            if rank < count:
                smallest = ", ".join(f"{v:.2e}" for v in values[rank:]) or "0"
                deficient.append(
                    f"the constraint Jacobian {label} has rank {rank} of {count} here (smallest "
                    f"singular values {smallest}, largest {scale:.2e}; dependent rows: "
                    f"{', '.join(involved)})")
            else:
                close.append(f"the constraint Jacobian {label} is nearly rank-deficient here "
                            f"(smallest singular value {values[-1]:.2e}, largest {scale:.2e}; "
                            f"rows: {', '.join(involved)})")
        if deficient:
            return ("; ".join(deficient) + ": a singular configuration, where the constraints "
                    "are not independent, so no choice of dependent coordinates or speeds works "
                    "(and the multiplier form's speed mass matrix is singular with it); "
                    + self._LOCAL_HINT)
        if close:
            return ("the speed mass matrix [M_uuc; M_uud] is singular to working precision: "
                    + "; ".join(close) + ", so the point is near a singular configuration, and "
                    "the speed mass matrix's condition is about the square of that ratio; "
                    + self._LOCAL_HINT)
        return ""

    def _nonfinite_blocks(self, row, blocks=None):
        """Which evaluated blocks hold NaN or Inf at the point (the kernel of a
        module built by an older codegen cannot say)."""
        diagnose = getattr(self._kernel, "nonfinite_blocks", None)
        if diagnose is None:
            return ""
        names = diagnose(float(row["t"]), row["q"], row["u"], row["r"], row["p"])
        names = [n for n in names if blocks is None or n in blocks]
        if not names:
            return ""
        return "; NaN or Inf in " + ", ".join(_BLOCK_DESCRIPTIONS.get(n, n) for n in names)

    def _violation_detail(self, status, index, batch, tol):
        f_c, f_v = self._residuals_at(self._row(batch, index))
        if status == CONFIGURATION_CONSTRAINT:
            k = int(np.argmax(np.abs(f_c)))
            return f": f_c[{k}] = {f_c[k]:.3e} (tol {tol:g})"
        k = int(np.argmax(np.abs(f_v)))
        return f": f_v[{k}] = {f_v[k]:.3e} (tol {tol:g})"

    def _residuals_at(self, row):
        f_c, f_v = np.empty((1, self.nc)), np.empty((1, self.nv))
        self._kernel.constraint_residuals(1, np.atleast_1d(row["t"]), row["q"][None], row["u"][None],
                                          row["p"][None], f_c, f_v)
        return f_c[0], f_v[0]

    # -- public functions -------------------------------------------------------
    @_memory_explained
    def linearize(self, q, u, r=None, p=None, t=0.0, *, dependent_q=None, dependent_u=None,
                  tol=1e-8, steady_tol=STEADY_TOL, threads=None):
        """``(A, B)`` of ``d x/dt = A x + B r`` for the independent states x = [q_i, u_i].

        Batches: q, u, r and p are vectors along their last axis; their leading
        axes and all axes of t are batch axes, and the batch shape is
        ``np.broadcast_shapes(q.shape[:-1], u.shape[:-1], r.shape[:-1],
        p.shape[:-1], t.shape)``: A has shape ``batch + (nx, nx)``. So any
        argument may be shared by all points (one vector, a scalar t), or
        given per point, e.g. q and u of shape (k, nq) and (k, nu) with p of
        shape (np,) or (k, np) and t scalar or of shape (k,). t holds one time
        per point: when q, u, r or p have batch axes, t may not have more axes
        than they have (t of shape (k, 1) beside q of shape (k, nq) would
        broadcast to k x k points and is refused; pass t of shape (k,)). For a
        grid, give the axes explicitly: q[None] and t[:, None].

        p may also be a dict of parameter values by name (others default).
        ``dependent_q``/``dependent_u`` choose the partition (indices or names),
        or ``"auto"``: chosen at each point by column-pivoted QR of J_c (B_v),
        the best-conditioned dependent set there; the result is then a
        :class:`PartitionedResult` ``(A, B)`` that names the partition each
        point used (``.dependent_q``, ``.dependent_u``, ``.state_names``).
        An :class:`~codegen.errors.IllConditionedWarning` says when a partition
        block is so ill-conditioned (condition estimate above
        ``ill_conditioned``, the generated C's 1/CONDITION_RTOL) that digits of
        A are at risk. The point must satisfy the constraints to
        ``tol`` (max-norm); pass ``tol=None`` to skip that check. Batches of
        at least ``PARALLEL_THRESHOLD`` points run on ``threads`` threads
        (default: all cores).

        **Chart.** A is the linearization in the partition's chart (its
        independent states). ``"auto"`` keeps the model's default partition
        wherever its blocks are well conditioned and switches only where they
        are not, so results along a path stay in one chart where they can. At
        a point that is not steady in the chart (an essential state, one the
        equations depend on, changes along the motion: ``steady_tol``), A's
        eigenvalues depend on the chart and do not describe stability: a
        :class:`~codegen.errors.NotSteadyWarning` names the states
        (``steady_tol=None`` skips the check).
        """
        self._check_tol(tol)
        steady = self._steady_tolerance(steady_tol)
        threads = self._check_threads(threads)
        dq, du = self._partitions(dependent_q, dependent_u)
        if dq is None and du is None and not isinstance(p, dict) and _plain_number(t):
            # one point, default partition, well conditioned, steady: checked
            # and evaluated in the kernel
            result = self._kernel.linearize_one(q, u, r, p, float(t),
                                                -1.0 if tol is None else float(tol),
                                                self.ill_conditioned, steady)
            if result is not None:
                return result
        return self._linearize(q, u, r, p, t, dq, du, tol, False, threads, steady)

    @_memory_explained
    def linearize_full(self, q, u, r=None, p=None, t=0.0, *, dependent_q=None, dependent_u=None,
                       tol=1e-8, steady_tol=STEADY_TOL, threads=None):
        """``(A', B')``: derivatives of all coordinates and speeds (rows q, then u)
        with respect to the independent states and the inputs. Arguments,
        batches, ``"auto"`` partitions and warnings as for :meth:`linearize`."""
        self._check_tol(tol)
        steady = self._steady_tolerance(steady_tol)
        threads = self._check_threads(threads)
        dq, du = self._partitions(dependent_q, dependent_u)
        return self._linearize(q, u, r, p, t, dq, du, tol, True, threads, steady)

    def _steady_tolerance(self, steady_tol):
        """``steady_tol`` for the kernel: -1 (no check) for None, else a number >= 0."""
        if steady_tol is None:
            return -1.0
        try:
            value = float(steady_tol)
            ok = not isinstance(steady_tol, bool) and value >= 0.0 and math.isfinite(value)
        except (TypeError, ValueError, OverflowError):
            ok = False
        if not ok:
            raise InputError(f"{self.name}: steady_tol must be a number >= 0 (relative to the "
                             f"largest rate of the chart's states), or None to skip the check; "
                             f"got {_shown(steady_tol)}")
        return value

    def _warn_not_steady(self, unsteady, batch, what, names_of):
        """NotSteadyWarning where a point is not steady in its chart.
        ``unsteady``: one row of state flags per point; ``names_of(index)``:
        the names of point ``index``'s chart states and the chart's description."""
        if unsteady is None or unsteady.size == 0:
            return
        points = np.nonzero(unsteady.any(axis=1))[0]
        if points.size == 0:
            return
        index = int(points[0])
        names, chart = names_of(index)
        flagged = [names[j] for j in np.nonzero(unsteady[index])[0] if j < len(names)]
        where = ""
        if batch.shape:
            point = tuple(int(i) for i in np.unravel_index(index, batch.shape))
            where = f" at {points.size} of {batch.size} points (first at batch index {point})"
        warnings.warn(NotSteadyWarning(
            f"{self.name}: the point is not steady in the chart of {what} ({chart}){where}: "
            f"{', '.join(flagged)} {'changes' if len(flagged) == 1 else 'change'} along the "
            "motion, so A is linearized about a point that moves in this chart, and its "
            "eigenvalues depend on the chart and do not describe stability. A steady motion is "
            "steady in a chart whose states it keeps constant (for a rolling wheel, the model's "
            "partition with rates in the leaning frame); steady_tol=None skips this check"),
            stacklevel=_outside_stacklevel())

    def _check_tol(self, tol, allow_none=True):
        if tol is None and allow_none:
            return
        try:
            ok = float(tol) >= 0.0
        except (TypeError, ValueError, OverflowError):
            ok = False
        if not ok:
            skip = " (None skips the check)" if allow_none else ""
            raise InputError(f"{self.name}: tol must be a number >= 0{skip}, got {_shown(tol)}")

    def _check_threads(self, threads):
        if threads is None:
            return None
        if (isinstance(threads, (int, np.integer)) and not isinstance(threads, bool)
                and 1 <= threads <= MAX_THREADS):
            return int(threads)
        raise InputError(f"{self.name}: threads must be a whole number from 1 to {MAX_THREADS} "
                         f"(a batch runs on at most as many threads as it has points, at most "
                         f"{_CORES} at once here), or None (all cores for large batches), got "
                         f"{_shown(threads)}")

    def _check_max_iter(self, max_iter):
        if (isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer))
                or not 0 <= max_iter <= MAX_ITER):
            raise InputError(f"{self.name}: max_iter must be a whole number from 0 to {MAX_ITER}, "
                             f"got {_shown(max_iter)}")
        return int(max_iter)

    def _rank_tolerance(self, rank_tol):
        """``rank_tol`` for the kernel: 0 (its default, ``RANK_RTOL``) for None,
        else a number in (0, 1): singular values below rank_tol times the
        largest count as zero."""
        if rank_tol is None:
            return 0.0
        try:
            value = float(rank_tol)
            ok = not isinstance(rank_tol, bool) and 0.0 < value < 1.0
        except (TypeError, ValueError, OverflowError):
            ok = False
        if not ok:
            raise InputError(f"{self.name}: rank_tol must be a number between 0 and 1 (relative "
                             f"to the largest singular value), or None for the default "
                             f"{self.RANK_RTOL:g}; got {_shown(rank_tol)}")
        return value

    def _automatic(self, dq, du, n):
        """Kernel arguments of a partition from :meth:`_partitions`: (dq, du,
        auto_q, auto_u, chosen_q, chosen_u), where chosen_q/chosen_u receive
        the partition chosen at each point when it is ``"auto"``."""
        auto_q, auto_u = isinstance(dq, str), isinstance(du, str)
        return (None if auto_q else dq, None if auto_u else du, auto_q, auto_u,
                np.zeros((n, self.nc), dtype=np.intc) if auto_q else None,
                np.zeros((n, self.nv), dtype=np.intc) if auto_u else None)

    def _linearize(self, q, u, r, p, t, dq, du, tol, full, threads, steady=-1.0):
        """``dq``, ``du``: partition index arrays (or AUTO) from :meth:`_partitions`;
        ``steady``: the kernel's steady_tol (negative: not checked)."""
        batch = self._batch(q, u, r, p, t)
        n, nx, nr, ns = batch.size, self.nx, self.nr, self.nq + self.nu
        batch.check_fits(self.name, (ns if full else nx) * (nx + nr) + 3 + nx)
        A = np.empty((n, nx * nx)) if not full else None
        B = np.empty((n, nx * nr)) if not full else None
        A_full = np.empty((n, ns * nx)) if full else None
        B_full = np.empty((n, ns * nr)) if full else None
        condition = np.empty((n, 2))
        tolerance = -1.0 if tol is None else float(tol)
        kernel_dq, kernel_du, auto_q, auto_u, chosen_q, chosen_u = self._automatic(dq, du, n)
        unsteady = np.zeros((n, nx), dtype=np.intc) if steady >= 0.0 and nx else None
        a = batch.arrays
        status, index = run_batch(self._kernel.linearize, n,
                                  (a["t"], a["q"], a["u"], a["r"], a["p"]),
                                  (kernel_dq, kernel_du, tolerance, auto_q, auto_u, 0.0, steady),
                                  (A, B, A_full, B_full, None, None, condition, chosen_q, chosen_u,
                                   unsteady),
                                  threads, self.operation_count)
        dq_used = chosen_q if auto_q else dq
        du_used = chosen_u if auto_u else du
        if status != OK:
            self._raise(status, index, batch, self._point_partition(dq_used, index),
                        self._point_partition(du_used, index), tol)
        self._warn_conditioning(condition, batch, dq_used, du_used)

        def chart(index):
            dependent_q = self._dependent_names(dq_used, index, 0)
            dependent_u = self._dependent_names(du_used, index, 1)
            names = self.independent_state_names(dependent_q, dependent_u)
            return names, (f"the partition with dependent coordinates {dependent_q} and speeds "
                           f"{dependent_u}, states {', '.join(names)}")

        self._warn_not_steady(unsteady, batch, "linearize_full" if full else "linearize", chart)
        if full:
            result = (batch.reshape(A_full, ns, nx), batch.reshape(B_full, ns, nr))
        else:
            result = (batch.reshape(A, nx, nx), batch.reshape(B, nx, nr))
        if auto_q or auto_u:
            return PartitionedResult(self, result, batch.shape, dq_used, du_used)
        return result

    @staticmethod
    def _point_partition(indices, index):
        """The partition point ``index`` used: a row of a per-point array, or the shared one."""
        if indices is None or isinstance(indices, np.ndarray) and indices.ndim == 1:
            return indices
        return indices[index]

    @staticmethod
    def _worst_condition(condition, limit, batch):
        """The worst condition estimate (``condition``: one row per point, a
        column per partition block; NaN: not known, counted as infinite) if it
        exceeds ``limit``: (point index, block column, estimate, where-text
        naming how many points exceed it and the worst's batch index), else None."""
        if condition.size == 0:
            return None
        worst = np.nan_to_num(condition, nan=np.inf)
        index, which = divmod(int(np.argmax(worst)), worst.shape[1])
        value = worst[index, which]
        if value <= limit:
            return None
        where = ""
        if batch.shape:
            count = int(np.sum(np.any(worst > limit, axis=1)))
            point = tuple(int(i) for i in np.unravel_index(index, batch.shape))
            where = f" at {count} of {batch.size} points (worst at batch index {point})"
        return index, which, value, where

    def _dependent_names(self, indices, index, which):
        """Names of the dependent coordinates (which = 0) or speeds (1) point
        ``index`` used (``indices``: per point, shared, or None: the default)."""
        indices = self._point_partition(indices, index)
        if indices is None:
            indices = self.dependent_q if which == 0 else self.dependent_u
        names = self.q_names if which == 0 else self.u_names
        return [names[i] for i in sorted(int(i) for i in indices)]

    def _warn_conditioning(self, condition, batch, dq, du):
        """IllConditionedWarning if a partition block's condition estimate
        (``condition``: one row [J_c P_qd, B_v P_ud] per point) exceeds
        ``ill_conditioned``, naming the worst point and how many digits are at
        risk: between log10 and 2 log10 of the estimate (the multiplier form's
        speed-level solve can square it: the four-bar near its flat
        configuration loses 2 log10, a pendulum near horizontal nothing)."""
        found = self._worst_condition(condition, self.ill_conditioned, batch)
        if found is None:
            return
        index, which, value, where = found
        if which == 0:
            dependent, block = self._dependent_names(dq, index, 0), "J_c P_qd"
            what, keyword = "dependent coordinates", "dependent_q"
        else:
            dependent, block = self._dependent_names(du, index, 1), "B_v P_ud"
            what, keyword = "dependent speeds", "dependent_u"
        digits = (f"{min(16.0, math.log10(value)):.0f} to {min(16.0, 2 * math.log10(value)):.0f}"
                  if value < 1e300 else "all")
        warnings.warn(IllConditionedWarning(
            f"{self.name}: the partition block {block} ({what} {dependent}) is ill-conditioned"
            f"{where}: condition estimate {_estimate(value)}, so {digits} of the ~16 significant digits "
            f"of the result are at risk; near a singular configuration of this partition. "
            f"Choose better-conditioned {what} ({keyword}=\"auto\" picks them at each point) or "
            "use linearize_local (no partition)"), stacklevel=_outside_stacklevel())

    @_memory_explained
    def linearize_local(self, q, u, r=None, p=None, t=0.0, *, rank_tol=None, tol=1e-8,
                        steady_tol=STEADY_TOL, threads=None):
        """The local state-space form at each point: a :class:`LocalLinearization`.

        The states are coordinates x = [y; z] in orthonormal bases of the
        admissible perturbations at the point, delta q = N_q y (N_q: null
        space of J_c = d f_c/d q) and delta u = N_u z + C_1 delta q (N_u: null
        space of B_v = d f_v/d u; C_1 = -B_v^+ d f_v/d q, the minimum-norm
        map), with the ranks of J_c and B_v decided with ``rank_tol``
        (relative to the largest singular value; default ``RANK_RTOL`` =
        1e-9).

        **Chart** (``.chart``, ``.dependent_q``, ``.dependent_u``): where J_c
        and B_v have full rank, A is a partition's linearization (that of
        :meth:`linearize`) written in these bases, ``A = G A_p G^-1``: the
        same eigenvalues, at steady motions too. The partition is the model's
        default wherever its blocks are well conditioned, else the one
        ``dependent_q="auto"`` chooses, and N_q, N_u are the Gram-Schmidt
        orthonormalization of its independent directions (smooth along a
        path). Where a rank drops (a singular configuration: no partition
        exists), the chart is the null spaces' (SVDs, minimum-norm
        multipliers), with (nq - rank_c) + (nu - rank_v) states. A point that
        is not steady in the chart gets a
        :class:`~codegen.errors.NotSteadyWarning` (``steady_tol``, as for
        :meth:`linearize`). Arguments, batches, ``tol`` and ``threads`` as for
        :meth:`linearize`. Where the ranks differ within a batch, the arrays
        are padded with NaN (see :class:`LocalLinearization`).
        """
        self._check_tol(tol)
        steady = self._steady_tolerance(steady_tol)
        threads = self._check_threads(threads)
        rtol = self._rank_tolerance(rank_tol)
        tolerance = -1.0 if tol is None else float(tol)
        reported_tol = self.RANK_RTOL if rank_tol is None else rtol
        if not isinstance(p, dict) and _plain_number(t):
            # one point, steady in its chart: checked and evaluated in the kernel
            one = self._kernel.linearize_local_one(q, u, r, p, float(t), rtol, tolerance, steady)
            if one is not None:
                A, B, T, rank_c, rank_v, sigma, chart = one
                y, z = self.nq - rank_c, self.nu - rank_v
                return LocalLinearization(
                    A=A, B=B, N_q=T[:self.nq, :y], N_u=T[self.nq:, y:], embedding=T,
                    rank_c=rank_c, rank_v=rank_v, dof=z, nx=y + z, sigma_c=sigma[:self.nc],
                    sigma_v=sigma[self.nc:], rank_tol=reported_tol,
                    **self._chart_names(chart[None], ()))
        batch = self._batch(q, u, r, p, t)
        n, ns, nr = batch.size, self.nq + self.nu, self.nr
        batch.check_fits(self.name, self.nx * (self.nx + nr + ns) + 2 + self.nc + self.nv + ns)
        a = batch.arrays
        inputs = (a["t"], a["q"], a["u"], a["r"], a["p"])
        ranks = np.empty((n, 2), dtype=np.intc)
        charts = np.empty((n, self.nc + self.nv), dtype=np.intc)
        unsteady = np.zeros((n, ns), dtype=np.intc) if steady >= 0.0 and ns else None
        # first compactly, every point of the size of the last uniform batch
        # (one buffer: A, B, T of a point side by side); where a point's size
        # differs, again with rows of the largest size
        k = self._local_width
        results = np.empty((n, k * k + k * nr + ns * k))
        status, index = run_batch(self._kernel.linearize_local, n, inputs,
                                  (rtol, tolerance, steady, k),
                                  (results, ranks, charts, unsteady), threads, self.operation_count)
        if status == self._kernel.NONUNIFORM:
            results = np.empty((n, ns * ns + ns * nr + ns * ns))
            status, index = run_batch(self._kernel.linearize_local, n, inputs,
                                      (rtol, tolerance, steady, -1),
                                      (results, ranks, charts, unsteady), threads,
                                      self.operation_count)
            k = ns
        if status != OK:
            self._raise(status, index, batch, tol=tol, partitioned=False)
        A, B, T = results[:, :k * k], results[:, k * k:k * (k + nr)], results[:, k * (k + nr):]
        result = LocalLinearization._from_kernel(self, batch.shape, A, B, T, ranks,
                                                 self._singular_values(batch, rtol), reported_tol,
                                                 self._chart_names(charts, batch.shape))
        if result.uniform and n:
            self._local_width = int(result.nx)
        if unsteady is not None:
            self._warn_not_steady(unsteady, batch, "linearize_local",
                                  lambda index: self._local_chart(charts[index], ranks[index]))
        return result

    def _is_partition_chart(self, chart):
        """Whether a local form's chart row (dependent indices, -1: none) is a partition's."""
        return not (np.any(chart < 0)) if chart.size else True

    def _local_chart(self, chart, ranks):
        """(state names, description) of a local form's chart (a kernel row of
        dependent indices, and the point's ranks)."""
        if not self._is_partition_chart(chart):
            names = tuple(f"y{k}" for k in range(self.nq - int(ranks[0]))) + \
                tuple(f"z{k}" for k in range(self.nu - int(ranks[1])))
            return names, "the null spaces of J_c and B_v at a singular configuration, states y = N_q^T q, z = N_u^T u"
        dq = [self.q_names[i] for i in chart[:self.nc]]
        du = [self.u_names[i] for i in chart[self.nc:]]
        names = self.independent_state_names(dq, du)
        return names, (f"the partition with dependent coordinates {dq} and speeds {du}, "
                       f"states {', '.join(names)}")

    def _chart_names(self, charts, shape):
        """The chart of a LocalLinearization: ``chart``, ``dependent_q``,
        ``dependent_u`` (names) where every point has the same chart, and the
        per-point rows (dependent indices, -1: the null spaces') with the names
        they index, for ``point(i)``."""
        n = charts.shape[0]
        info = dict(charts=charts.reshape(shape + (charts.shape[1],)),
                    chart_names=(self.q_names, self.u_names, self.nc))
        if n and (charts.size == 0 or charts.min() >= 0 and (charts == charts[0]).all()):
            return dict(info, chart="partition",
                        dependent_q=tuple(self.q_names[i] for i in charts[0, :self.nc]),
                        dependent_u=tuple(self.u_names[i] for i in charts[0, self.nc:]))
        if n and (charts < 0).any(axis=1).all():
            return dict(info, chart="null space", dependent_q=None, dependent_u=None)
        return dict(info, chart="mixed" if n else "partition", dependent_q=None, dependent_u=None)

    def _singular_values(self, batch, rtol):
        """A function giving (n, nc + nv) singular values of J_c and B_v of the
        batch's points, computed when first asked for (from a copy of the
        points: the caller may change its arrays)."""
        a = {key: np.array(batch.arrays[key]) for key in ("t", "q", "u", "p")}
        n, kernel = batch.size, self._kernel

        def compute():
            sigma = np.empty((n, self.nc + self.nv))
            status, index = run_batch(kernel.constraint_singular_values, n,
                                      (a["t"], a["q"], a["u"], a["p"]), (rtol,), (sigma,))
            if status != OK:   # the same points linearize_local accepted
                raise EvaluationError(f"singular values of J_c and B_v at point {index}: "
                                      f"{kernel.status_message(status)}")
            return sigma
        return compute

    @_memory_explained
    def linearize_descriptor(self, q, u, r=None, p=None, t=0.0, *, rank_tol=None, tol=1e-8,
                             steady_tol=STEADY_TOL, threads=None):
        """``(E, A, B)`` of the linearized descriptor form ``E w' = A w + B r``
        (González et al., eqs. 7-8: the index-reduced DAE in all coordinates,
        speeds and multipliers), a :class:`DescriptorForm`.

        ``w = [delta q (nq), delta u (nu), delta lambda (nl), mu (nc), nu (nv)]``
        (names in ``.variables``): the coordinates, the speeds, the increments
        of the multipliers of the velocity constraints, and the multipliers
        that keep the perturbations on the constraints. Defined at singular
        configurations too. Its chart is that of all coordinates and speeds:
        its finite generalized eigenvalues (of the pencil ``A - s E``) are
        those of :meth:`linearize` and :meth:`linearize_local` at equilibria
        and at motions steady in every coordinate and speed; elsewhere they
        differ (the rolling disk's speeds measured in the spinning wheel
        change along a steady roll), and a
        :class:`~codegen.errors.NotSteadyWarning` names the coordinates and
        speeds that change (``steady_tol``, as for :meth:`linearize`). The
        others are infinite. ``.rank_c``, ``.rank_v``: the ranks of J_c and
        B_v (``rank_tol`` as for :meth:`linearize_local`). Arguments,
        batches, ``tol`` and ``threads`` as for :meth:`linearize`.
        """
        self._check_tol(tol)
        steady = self._steady_tolerance(steady_tol)
        threads = self._check_threads(threads)
        rtol = self._rank_tolerance(rank_tol)
        batch = self._batch(q, u, r, p, t)
        n, size, nr = batch.size, self._kernel.SIZES["ndesc"], self.nr
        batch.check_fits(self.name, size * (2 * size + nr) + 2 + self.nq + self.nu)
        E, A, B = np.empty((n, size * size)), np.empty((n, size * size)), np.empty((n, size * nr))
        ranks = np.empty((n, 2), dtype=np.intc)
        ns = self.nq + self.nu
        unsteady = np.zeros((n, ns), dtype=np.intc) if steady >= 0.0 and ns else None
        a = batch.arrays
        status, index = run_batch(self._kernel.linearize_descriptor, n,
                                  (a["t"], a["q"], a["u"], a["r"], a["p"]),
                                  (rtol, -1.0 if tol is None else float(tol), steady),
                                  (E, A, B, ranks, unsteady), threads, self.operation_count)
        if status != OK:
            self._raise(status, index, batch, tol=tol, partitioned=False)
        self._warn_not_steady(unsteady, batch, "linearize_descriptor", lambda index: (
            self.full_state_names, "all coordinates and speeds"))
        return DescriptorForm((batch.reshape(E, size, size), batch.reshape(A, size, size),
                               batch.reshape(B, size, nr)),
                              self.descriptor_variables, _per_point(ranks[:, 0], batch.shape),
                              _per_point(ranks[:, 1], batch.shape))

    @property
    def descriptor_variables(self):
        """Names of the descriptor variables w of :meth:`linearize_descriptor`."""
        nl = self._kernel.SIZES["nl"]
        return (self.q_names + self.u_names + tuple(f"lambda{i}" for i in range(nl))
                + tuple(f"mu{i}" for i in range(self.nc)) + tuple(f"nu{i}" for i in range(self.nv)))

    @_memory_explained
    def equilibrium(self, q_guess, u=None, r=None, p=None, t=0.0, *, fixed=None,
                    free_speeds=None, tol=1e-10, max_iter=100, rank_tol=None, max_step=1.0,
                    periodic=None):
        """``(q, u)``: a consistent point near the guess where the independent
        accelerations vanish: a static equilibrium (``u=None``: u = 0) or a
        steady motion (the speeds ``u`` given).

        Gauss-Newton in the generated C on the residual ``R = [f_c; f_v;
        the chart's independent accelerations]`` with the generated Jacobians:
        the chart is the one :meth:`linearize_local` takes at the guess (a
        partition's at a regular point, the model's where it is well
        conditioned: the accelerations of its independent speeds, so the
        motion found is steady there and :meth:`linearize` describes its
        stability; the null spaces' where J_c or B_v lost rank, ``N_u^T
        ud*``). Minimum-norm steps where the equations are underdetermined
        (families of equilibria, ignorable coordinates: the step leaves them
        near the guess), pseudo-inverses where the constraint Jacobians lose
        rank. Unknowns: every coordinate except those in ``fixed`` (names or
        indices, held at the guess), and the speeds named in ``free_speeds``
        (default: none; the speeds are held as given, and must satisfy the
        velocity constraints with the coordinates found).

        **Staying near the guess.** The model does not know which
        coordinates are angles: no unknown moves by more than ``max_step``
        in one iteration (in its own units: radians for an angle, metres for
        a position; None: no bound), and the coordinates named in
        ``periodic`` (angles) are returned within half a turn of the guess
        (q + 2 pi k, the same configuration).

        Converged when ``max|R| <= tol``;
        :class:`~codegen.errors.ConvergenceError` after ``max_iter`` (at most
        ``MAX_ITER``) iterations, or as soon as the residual stops decreasing
        (no step along the Gauss-Newton direction decreases it, or it fell by
        less than 1 % in 10 iterations), with max|R|, the number of
        iterations and what to try. Ctrl-C stops it. Batches of guesses as
        for :meth:`linearize` (solved one by one).
        """
        self._check_tol(tol, allow_none=False)
        max_iter = self._check_max_iter(max_iter)
        rtol = self._rank_tolerance(rank_tol)
        step = self._max_step(max_step)
        vary_q = vary_u = None
        if fixed is not None:
            vary_q = np.ones(self.nq, dtype=np.intc)
            vary_q[self._name_indices(fixed, self.nq, self.q_names, "fixed")] = 0
        if free_speeds is not None:
            vary_u = np.zeros(self.nu, dtype=np.intc)
            vary_u[self._name_indices(free_speeds, self.nu, self.u_names, "free_speeds")] = 1
        wrapped = [] if periodic is None else self._name_indices(periodic, self.nq, self.q_names,
                                                                 "periodic")
        batch = self._batch(q_guess, np.zeros(self.nu) if u is None else u, r, p, t)
        n, a = batch.size, batch.arrays
        batch.check_fits(self.name, self.nq + self.nu + 2)
        q_out, u_out = self._writable_rows(batch)
        iterations = np.zeros(n, dtype=np.intc)
        residual, initial = np.zeros(n), np.zeros(n)
        status, index = self._kernel.equilibrium(
            n, a["t"], q_out, u_out, a["r"], a["p"], vary_q, vary_u, rtol, float(tol), step,
            max_iter, iterations, residual, initial, check_every(self.operation_count, 20), None)
        if status != OK:
            self._raise(status, index, batch, tol=tol, blocks=(), partitioned=False,
                        detail=self._equilibrium_detail(status, index, batch, q_out, u_out,
                                                        iterations, residual, initial, tol, vary_u))
        if wrapped:
            guess = np.broadcast_to(a["q"], (n, self.nq))[:, wrapped]
            q_out[:, wrapped] = guess + (q_out[:, wrapped] - guess + math.pi) % (2 * math.pi) - math.pi
        return batch.reshape(q_out, self.nq), batch.reshape(u_out, self.nu)

    def _max_step(self, max_step):
        if max_step is None:
            return -1.0
        try:
            value = float(max_step)
            ok = not isinstance(max_step, bool) and value > 0.0 and math.isfinite(value)
        except (TypeError, ValueError, OverflowError):
            ok = False
        if not ok:
            raise InputError(f"{self.name}: max_step must be a number > 0 (the largest change of "
                             f"an unknown in one iteration), or None for no bound; got "
                             f"{_shown(max_step)}")
        return value

    def _equilibrium_detail(self, status, index, batch, q_out, u_out, iterations, residual,
                            initial, tol, vary_u):
        """What follows the message of a failed equilibrium: max|R|, the
        iterations, and what to try; that the held speeds cannot meet the
        velocity constraints where they are what is left of R."""
        if status not in (NO_CONVERGENCE, NO_PROGRESS):
            return ""
        count = int(iterations[index])
        what = (f": max|R| = {residual[index]:.3e} after {count} iteration{'s' * (count != 1)} "
                f"(tol {float(tol):g}; R = [f_c, f_v, the independent accelerations])")
        row = self._row(batch, index)
        f_c, f_v = self._residuals_at({**row, "q": q_out[index], "u": u_out[index]})
        held = vary_u is None or not np.any(vary_u)
        if f_v.size and np.abs(f_v).max() > float(tol) and np.abs(f_v).max() >= 0.5 * residual[index]:
            k = int(np.argmax(np.abs(f_v)))
            speeds = "the speeds held" if held else "the speeds held and those free"
            return (f"{what}; {speeds} cannot meet the velocity constraints (f_v[{k}] = "
                    f"{f_v[k]:.3e} at the last iterate): give speeds that satisfy them with the "
                    "coordinates of the equilibrium (complete(q, u) makes the dependent ones), "
                    "or let the dependent speeds vary (free_speeds=[...])")
        if status == NO_PROGRESS and residual[index] <= 1e-8 * initial[index]:
            return (f"{what}, and the residual stopped decreasing there, {initial[index]:.1e} at "
                    "the guess: about the rounding level of these equations at this point, so "
                    f"the point is an equilibrium to working precision; ask for tol of about "
                    f"{10 * residual[index]:.0e} or more")
        if status == NO_PROGRESS:
            return (f"{what}, and the residual stopped decreasing: no equilibrium near the guess "
                    "in these unknowns (a least-squares minimum that is no solution: too many "
                    "coordinates held with fixed=..., speeds held that no steady motion has, or "
                    "parameters without an equilibrium here); start from another guess or free "
                    "more unknowns")
        return (f"{what}; start nearer an equilibrium, allow more iterations (max_iter), hold "
                "coordinates with fixed=..., give the speeds of a steady motion (or let some "
                "vary: free_speeds=...), or check that an equilibrium exists for these parameters")

    def _writable_rows(self, batch):
        """Copies of the batch's q and u, one C-contiguous row per point, for
        the kernels that work in place (order="C": a copy of a broadcast view,
        one row shared by all points, is not C-contiguous by default)."""
        n, a = batch.size, batch.arrays
        return (np.array(np.broadcast_to(a["q"], (n, self.nq)), order="C"),
                np.array(np.broadcast_to(a["u"], (n, self.nu)), order="C"))

    @_memory_explained
    def state_derivative(self, q, u, r=None, p=None, t=0.0, *, threads=None):
        """``(qd, ud)``: time derivatives of all coordinates and speeds.
        Arguments and batches as for :meth:`linearize`."""
        threads = self._check_threads(threads)
        batch = self._batch(q, u, r, p, t)
        n, a = batch.size, batch.arrays
        batch.check_fits(self.name, self.nq + self.nu)
        qd, ud = np.empty((n, self.nq)), np.empty((n, self.nu))
        status, index = run_batch(self._kernel.state_derivative, n,
                                  (a["t"], a["q"], a["u"], a["r"], a["p"]), (), (qd, ud), threads,
                                  self.operation_count)
        if status != OK:
            self._raise(status, index, batch)
        return batch.reshape(qd, self.nq), batch.reshape(ud, self.nu)

    @_memory_explained
    def constraint_residuals(self, q, u, p=None, t=0.0):
        """``(f_c, f_v)``: configuration and velocity constraint residuals.
        Arguments and batches as for :meth:`linearize`."""
        batch = self._batch(q, u, None, p, t)
        n, a = batch.size, batch.arrays
        batch.check_fits(self.name, self.nc + self.nv)
        f_c, f_v = np.empty((n, self.nc)), np.empty((n, self.nv))
        status, index = run_batch(self._kernel.constraint_residuals, n,
                                  (a["t"], a["q"], a["u"], a["p"]), (), (f_c, f_v), 1,
                                  self.operation_count)
        if status != OK:
            self._raise(status, index, batch, blocks=("f_c", "f_v"))
        return batch.reshape(f_c, self.nc), batch.reshape(f_v, self.nv)

    @_memory_explained
    def complete(self, q, u, p=None, t=0.0, *, dependent_q=None, dependent_u=None, tol=1e-12,
                 max_iter=50):
        """``(q, u)`` with the dependent coordinates solved from f_c = 0 (Newton's
        method from the given values, at most ``max_iter`` steps, until
        |f_c|_inf <= tol) and the dependent speeds from f_v = 0. Arguments and
        batches as for :meth:`linearize`; ``"auto"`` partitions are chosen at
        the given point (the result is then a :class:`PartitionedResult`
        ``(q, u)``). A :class:`~codegen.errors.MultipleRootWarning` says when
        it converged to a multiple root of f_c (J_c P_qd nearly singular
        there), where the coordinates are only accurate to about sqrt(tol)."""
        self._check_tol(tol, allow_none=False)
        max_iter = self._check_max_iter(max_iter)
        batch = self._batch(q, u, None, p, t)
        dq, du = self._partitions(dependent_q, dependent_u)
        n, a = batch.size, batch.arrays
        batch.check_fits(self.name, self.nq + self.nu + 1 + self.nc + self.nv)
        q_out, u_out = self._writable_rows(batch)
        condition = np.empty(n)
        kernel_dq, kernel_du, auto_q, auto_u, chosen_q, chosen_u = self._automatic(dq, du, n)
        status, index = self._kernel.complete_point(n, a["t"], q_out, u_out, a["p"], kernel_dq,
                                                    kernel_du, float(tol), max_iter, auto_q,
                                                    auto_u, 0.0, condition, chosen_q, chosen_u,
                                                    check_every(self.operation_count), None)
        dq_used = chosen_q if auto_q else dq
        du_used = chosen_u if auto_u else du
        detail = ""
        if status == NO_CONVERGENCE:
            # q_out holds Newton's last iterate at the failing point
            row = self._row(batch, index)
            f_c, _ = self._residuals_at({**row, "q": q_out[index], "u": u_out[index]})
            detail = (f": |f_c|_inf = {np.max(np.abs(f_c)):.3e} after {max_iter} iterations "
                      f"(tol {float(tol):g}); start nearer a solution, choose other dependent "
                      "coordinates (dependent_q=...), or check that the constraints can be met")
        if status != OK:
            # blocks=(): Newton's iterates are not the given point, so the
            # blocks evaluated there say nothing sure about the failure
            self._raise(status, index, batch, self._point_partition(dq_used, index),
                        self._point_partition(du_used, index), tol, detail, blocks=())
        self._warn_multiple_root(condition, batch, dq_used, tol)
        result = (batch.reshape(q_out, self.nq), batch.reshape(u_out, self.nu))
        if auto_q or auto_u:
            return PartitionedResult(self, result, batch.shape, dq_used, du_used)
        return result

    def _warn_multiple_root(self, condition, batch, dq, tol):
        """MultipleRootWarning where complete() stopped at a multiple root of
        f_c: J_c P_qd's condition estimate above MULTIPLE_ROOT / sqrt(tol)."""
        if self.nc == 0:
            return
        limit = MULTIPLE_ROOT / math.sqrt(max(float(tol), 1e-300))
        found = self._worst_condition(condition.reshape(-1, 1), limit, batch)
        if found is None:
            return
        index, _, value, where = found
        warnings.warn(MultipleRootWarning(
            f"{self.name}: complete converged{where} where J_c P_qd (dependent coordinates "
            f"{self._dependent_names(dq, index, 0)}) is nearly singular (condition estimate "
            f"{_estimate(value)}): a multiple "
            f"root of f_c, or a point near a singular configuration, where Newton's method "
            f"stops about sqrt(tol) = {math.sqrt(float(tol)):.1e} from the root, so the "
            "dependent coordinates are only that accurate. Check the configuration (a singular "
            "one? linearize_local handles those) or choose other dependent coordinates "
            "(dependent_q=\"auto\")"), stacklevel=_outside_stacklevel())

    def __repr__(self):
        return (f"<generated model {self.name!r}: {self.nq} coordinates ({self.nc} dependent), "
                f"{self.nu} speeds ({self.nv} dependent), {self.nr} inputs, {self.np} parameters>")

    # -- control design (python-control), issue 12 -----------------------------------------
    def state_space(self, q, u, r=None, p=None, t=0.0, outputs=None, *, states=None, inputs=None,
                    dependent_q=None, dependent_u=None, tol=1e-8, name=None):
        """The linearization at one operating point as a ``control.StateSpace``
        (python-control, an optional dependency: ``pip install control``).

        ``d x/dt = A x + B r``, ``y = C x + D r`` with named states (the
        independent states of the partition, ``independent_state_names``),
        inputs (``r_names``) and outputs. ``outputs`` names coordinates or
        speeds, dependent ones included (default: the states): ``y_k`` is the
        change of that quantity, so its row of C maps the states to it on the
        constraint manifold. For an independent one that is a unit row; for a
        dependent coordinate it is ``d q_d/d q_i = -(J_c P_qd)^-1 J_c P_qi``,
        for a dependent speed ``d u_d/d (q_i, u_i)`` from the velocity
        constraints. These rows are formed from the generated constraint
        residuals f_c and f_v by central differences with Richardson
        extrapolation (about 1e-12 relative for smooth constraints); the
        states' rows are exact. D is zero: the constraints hold no inputs.
        Their time derivatives are the rows of :meth:`linearize_full`: where
        the constraint Jacobians do not change along the motion (equilibria,
        steady motions), ``C_y A = A_full[y]`` and ``C_y B = B_full[y]``.

        ``states`` keeps only these states (names), e.g. the roll/steer block
        of a bicycle: allowed when the dropped states do not enter the kept
        states' equations nor the outputs at this point (else InputError).
        ``inputs`` keeps only these inputs (names or indices), e.g.
        ``["T_steer"]``. ``dependent_q``, ``dependent_u`` (``"auto"`` too) and
        ``tol`` are passed to :meth:`linearize`; ``name`` names the system (default: the
        model's name). Arguments as for :meth:`linearize`, for one point.
        """
        try:
            import control
        except ImportError:
            raise ImportError(f"{self.name}: state_space needs python-control, which is not "
                              "installed: pip install control (or pip install -e \".[control]\" "
                              "in a codegen checkout)") from None
        batch = self._batch(q, u, r, p, t)
        if batch.shape != ():
            raise InputError(f"{self.name}: state_space takes one operating point (q of shape "
                             f"({self.nq},), u of shape ({self.nu},), a scalar t); got a batch of "
                             f"shape {batch.shape}: call it once per point")
        result = self.linearize(q, u, r, p, t, dependent_q=dependent_q, dependent_u=dependent_u,
                                tol=tol)
        A, B = result
        if isinstance(result, PartitionedResult):     # "auto": the partition chosen here
            dependent_q, dependent_u = result.dependent_q, result.dependent_u
        all_states = self.independent_state_names(dependent_q, dependent_u)
        kept = self._selected_states(states, all_states)
        dropped = [i for i in range(len(all_states)) if i not in kept]
        columns = self._selected_inputs(inputs)
        output_names = [all_states[i] for i in kept] if outputs is None else \
            self._output_names(outputs)
        C_full = self._output_rows(output_names, batch, dependent_q, dependent_u)

        scale = max(1.0, float(np.max(np.abs(A), initial=0.0)))
        if dropped:
            coupling = np.abs(A[np.ix_(kept, dropped)])
            if coupling.size and coupling.max() > _DECOUPLED * scale:
                i, j = np.unravel_index(int(np.argmax(coupling)), coupling.shape)
                raise InputError(
                    f"{self.name}: states={[all_states[k] for k in kept]} leaves out states that "
                    f"enter their equations at this point: d({all_states[kept[i]]})/dt depends on "
                    f"{all_states[dropped[j]]} (A entry {A[kept[i], dropped[j]]:.3e}); keep it, "
                    "or pass states=None for all states")
            coupling = np.abs(C_full[:, dropped])
            if coupling.size and coupling.max() > _DECOUPLED * max(1.0, np.abs(C_full).max()):
                i, j = np.unravel_index(int(np.argmax(coupling)), coupling.shape)
                raise InputError(
                    f"{self.name}: output {output_names[i]} depends on the state "
                    f"{all_states[dropped[j]]}, which states= leaves out; keep it or choose "
                    "other outputs")
        A_kept = A[np.ix_(kept, kept)]
        B_kept = B[np.ix_(kept, columns)]
        C = C_full[:, kept]
        D = np.zeros((len(output_names), len(columns)))
        try:
            return control.ss(A_kept, B_kept, C, D, states=[all_states[i] for i in kept],
                              inputs=[self.r_names[j] for j in columns],
                              outputs=list(output_names), name=self.name if name is None else name)
        except control.ControlDimension:
            if len(output_names) != 1 or columns:
                raise
            # python-control 0.10.2 turns a D of shape (1, 0) into (0, 0) and refuses it
            raise InputError(f"{self.name}: python-control {control.__version__} cannot hold a "
                             "system with one output and no inputs (its issue #1176, fixed after "
                             "0.10.2): ask for two outputs, or choose an input") from None

    def _selected_states(self, states, all_states):
        if states is None:
            return list(range(len(all_states)))
        states = [states] if isinstance(states, str) else list(states)
        indices = []
        for state in states:
            if not isinstance(state, str) or state not in all_states:
                raise InputError(f"{self.name}: states: {state!r} is not an independent state of "
                                 f"this partition; they are {', '.join(all_states)}")
            indices.append(all_states.index(state))
        if not indices or len(set(indices)) != len(indices):
            raise InputError(f"{self.name}: states must name at least one state, each once; "
                             f"got {states!r}")
        return indices

    def _selected_inputs(self, inputs):
        if inputs is None:
            return list(range(self.nr))
        inputs = [inputs] if isinstance(inputs, (str, int, np.integer)) else list(inputs)
        columns = []
        for item in inputs:
            if isinstance(item, str) and item in self.r_names:
                columns.append(self.r_names.index(item))
            elif (isinstance(item, (int, np.integer)) and not isinstance(item, bool)
                  and 0 <= item < self.nr):
                columns.append(int(item))
            else:
                raise InputError(f"{self.name}: inputs: {item!r} is not an input; inputs are "
                                 f"{', '.join(self.r_names) or '(none)'}")
        if len(set(columns)) != len(columns):
            raise InputError(f"{self.name}: inputs repeats an input: {inputs!r}")
        return columns

    def _output_names(self, outputs):
        outputs = [outputs] if isinstance(outputs, str) else list(outputs)
        names = self.full_state_names
        for item in outputs:
            if not isinstance(item, str) or item not in names:
                raise InputError(f"{self.name}: outputs: {item!r} is not a coordinate or speed; "
                                 f"they are {', '.join(names)}")
        if not outputs or len(set(outputs)) != len(outputs):
            raise InputError(f"{self.name}: outputs must name at least one coordinate or speed, "
                             f"each once; got {outputs!r}")
        return outputs

    def _output_rows(self, output_names, batch, dependent_q=None, dependent_u=None):
        """Rows of C (outputs x independent states) for coordinates and speeds by name."""
        dq = self._partition(dependent_q, self.nq, self.nc, self.q_names, "dependent_q")
        du = self._partition(dependent_u, self.nu, self.nv, self.u_names, "dependent_u")
        dq = list(self.dependent_q if dq is None else dq)
        du = list(self.dependent_u if du is None else du)
        full = self.full_state_names
        dependent = {self.q_names[i] for i in dq} | {self.u_names[i] for i in du}
        if any(name in dependent for name in output_names):
            row = self._row(batch, 0)
            Phi = self._constraint_map(row, dq, du)
        else:
            states = self.independent_state_names(dq, du)
            Phi = np.zeros((len(full), len(states)))
            for k, state in enumerate(states):
                Phi[full.index(state), k] = 1.0
        return Phi[[full.index(name) for name in output_names]]

    def _constraint_jacobians(self, row):
        """``(J_c, J_vq, B_v)``: d f_c/d q, d f_v/d q and d f_v/d u at a point,
        by central differences of the generated residuals, Richardson-extrapolated
        (error of order h^4), all perturbed points in one batched call."""
        q, u, p, t = row["q"], row["u"], row["p"], float(row["t"])
        x = np.concatenate([q, u])
        n = x.size
        h = _DIFFERENCE_STEP * np.maximum(1.0, np.abs(x))
        points = np.repeat(x[None], 4 * n, axis=0)
        steps = np.empty((4, n))
        for k, factor in enumerate((1.0, -1.0, 0.5, -0.5)):
            moved = x + factor * h
            steps[k] = moved - x             # the step actually taken, after rounding
            points[k * n + np.arange(n), np.arange(n)] = moved
        f_c, f_v = self.constraint_residuals(points[:, :self.nq], points[:, self.nq:], p, t)
        f = np.concatenate([f_c, f_v], axis=1).reshape(4, n, -1)
        wide = (f[0] - f[1]) / (steps[0] - steps[1])[:, None]
        narrow = (f[2] - f[3]) / (steps[2] - steps[3])[:, None]
        jacobian = ((4.0 * narrow - wide) / 3.0).T      # (nc + nv) x (nq + nu)
        J_c = jacobian[:self.nc, :self.nq]
        return J_c, jacobian[self.nc:, :self.nq], jacobian[self.nc:, self.nq:]

    def _constraint_map(self, row, dq, du):
        """Phi ((nq + nu) x nx): the change of every coordinate and speed (rows q,
        then u) per change of the independent states, on the constraint manifold."""
        qi = complement(self.nq, dq)
        ui = complement(self.nu, du)
        nqi, nui = len(qi), len(ui)
        Phi = np.zeros((self.nq + self.nu, nqi + nui))
        Phi[qi, np.arange(nqi)] = 1.0
        Phi[[self.nq + i for i in ui], nqi + np.arange(nui)] = 1.0
        if self.nc == 0 and self.nv == 0:
            return Phi
        J_c, J_vq, B_v = self._constraint_jacobians(row)
        if self.nc:
            Phi[dq, :nqi] = -np.linalg.solve(J_c[:, dq], J_c[:, qi])
        if self.nv:
            dq_dx = Phi[:self.nq]                   # d q/d x (zero in the u_i columns)
            du_i = np.zeros((self.nu, nqi + nui))
            du_i[ui, nqi + np.arange(nui)] = 1.0
            rhs = J_vq @ dq_dx + B_v[:, ui] @ du_i[ui]
            Phi[[self.nq + i for i in du]] = -np.linalg.solve(B_v[:, du], rhs)
        return Phi + 0.0        # no -0.0 from the negation in printed matrices

    # -- pickling: by reference to the build, for worker processes (issue 12) -----------------
    def _build_reference(self):
        """Where this model's build is: a dict of its name, key, fingerprint, key
        link (``.builds/<name>-<key>``, survives a forced rebuild of the same key)
        and build directory, for :func:`_package_from_build`."""
        import pickle
        from pathlib import Path

        from .compile import read_record

        kernel_file = getattr(self._kernel, "__file__", None)
        record = None
        if kernel_file is not None:
            build_dir = Path(kernel_file).resolve().parent
            record = read_record(build_dir)
        if record is None:
            raise pickle.PicklingError(f"{self.name}: cannot pickle this model: its kernel is not "
                                       "a codegen build on disk (no build.json beside it)")
        key_link = build_dir.parent / f"{record['name']}-{record['key']}"
        return {"name": record["name"], "key": record["key"],
                "fingerprint": record.get("fingerprint"),
                "key_link": str(key_link), "build_dir": str(build_dir)}

    def __reduce__(self):
        """Pickled by reference to its build (a path and its key), not by value:
        unpickling imports the build from its directory (see
        :func:`_package_from_build`), so worker processes of a cluster load the
        compiled module from the shared file system."""
        return (_model_from_build, (self._build_reference(),))

    def _extend_package(self):
        """Make the generated package that created this model picklable and give
        it the functions added after its template was written (``state_space``).
        The package is the one whose ``_kernel`` is this kernel, still being
        imported; names the package defines itself are left alone."""
        package = sys.modules.get(getattr(self._kernel, "__name__", "").rpartition(".")[0])
        if package is None or getattr(package, "_kernel", None) is not self._kernel:
            return
        if type(package) is types.ModuleType:
            package.__class__ = GeneratedPackage
        for attribute in ("state_space", "linearize_local", "linearize_descriptor", "equilibrium",
                          "descriptor_variables", "RANK_RTOL", "ill_conditioned"):
            if attribute not in vars(package):
                setattr(package, attribute, getattr(self, attribute))


# Step of the differences of the constraint residuals (relative to max(1, |x|)),
# and the largest coupling (relative to max(1, |A|)) a dropped state may have
# with the kept ones in state_space(states=...).
_DIFFERENCE_STEP = 1e-3
_DECOUPLED = 1e-10


def _per_point(values, shape):
    """Per-point integers (e.g. ranks): a Python int when every point has the
    same value, else an int array of the batch shape."""
    values = np.asarray(values).reshape(shape)
    if values.size and np.all(values == values.flat[0]):
        return int(values.flat[0])
    return values.astype(int)


def _batch_index(index, shape):
    """A point of a batch of ``shape``: a tuple of batch indices, or an int
    (a flat index in C order; for a one-dimensional batch, its index)."""
    if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
        size = math.prod(shape)
        if not -size <= index < size:
            raise InputError(f"point index {index} is out of range for a batch of {size} points")
        return tuple(int(i) for i in np.unravel_index(int(index) % size, shape)) if shape else ()
    try:
        index = tuple(index)
    except TypeError:
        raise InputError(f"a point index is an int (a flat index) or a tuple of ints (one per "
                         f"batch axis of the batch of shape {shape}), got {_shown(index)}") from None
    if len(index) != len(shape) or not all(
            isinstance(i, (int, np.integer)) and not isinstance(i, bool) and -n <= i < n
            for i, n in zip(index, shape)):
        raise InputError(f"point index {index!r} is not an index into the batch of shape {shape}")
    return tuple(int(i) % n for i, n in zip(index, shape))


class PartitionedResult(tuple):
    """A result tuple, ``(A, B)`` of ``linearize``/``linearize_full`` or
    ``(q, u)`` of ``complete``, with the partition each point used (returned
    when ``dependent_q`` or ``dependent_u`` is ``"auto"``).

    One point: ``dependent_q``, ``dependent_u`` and ``state_names`` are tuples
    of names. A batch: ``dependent_q`` and ``dependent_u`` are int index arrays
    of shape ``batch + (nc,)`` and ``batch + (nv,)`` (ascending in each row);
    ``uniform`` says whether every point used the same partition, and then
    ``dependent_q_names``, ``dependent_u_names`` and ``state_names`` name it
    (else they are None: the rows of A belong to different states at
    different points; ``point_state_names(i)`` names those of one point).
    """

    def __new__(cls, model, values, shape, dependent_q, dependent_u):
        self = super().__new__(cls, values)
        n = math.prod(shape)
        dq = cls._per_point_indices(dependent_q, model.dependent_q, n, shape, model.nc)
        du = cls._per_point_indices(dependent_u, model.dependent_u, n, shape, model.nv)
        self._model = model
        flat_q, flat_u = dq.reshape(n, model.nc), du.reshape(n, model.nv)
        self.uniform = bool(n == 0 or (np.all(flat_q == flat_q[0]) and np.all(flat_u == flat_u[0])))
        if shape:
            self.dependent_q, self.dependent_u = dq, du
            names = self.uniform and n > 0
            self.dependent_q_names = self._names(flat_q[0], model.q_names) if names else None
            self.dependent_u_names = self._names(flat_u[0], model.u_names) if names else None
            self.state_names = (model.independent_state_names(list(flat_q[0]), list(flat_u[0]))
                                if names else None)
        else:
            self.dependent_q = self.dependent_q_names = self._names(dq, model.q_names)
            self.dependent_u = self.dependent_u_names = self._names(du, model.u_names)
            self.state_names = model.independent_state_names(list(dq), list(du))
        return self

    @staticmethod
    def _per_point_indices(indices, default, n, shape, count):
        """The dependent indices of every point, ascending: ``batch + (count,)``
        from one shared partition (None: the default) or one row per point."""
        indices = np.sort(np.asarray(default if indices is None else indices, dtype=int), axis=-1)
        rows = indices[None] if indices.ndim == 1 else indices
        return np.broadcast_to(rows, (n, count)).reshape(shape + (count,)).copy()

    @staticmethod
    def _names(indices, names):
        return tuple(names[int(i)] for i in indices)

    def point_state_names(self, index):
        """The independent state names (rows of A) of one point of the batch
        (``index``: a tuple of batch indices or a flat int index)."""
        if not isinstance(self.dependent_q, np.ndarray):
            _batch_index(index, ())   # refuses anything but () and the flat index 0
            return self.state_names
        index = _batch_index(index, self.dependent_q.shape[:-1])
        return self._model.independent_state_names(list(self.dependent_q[index]),
                                                   list(self.dependent_u[index]))

    def __reduce__(self):
        """Pickles with its metadata (and the model: by reference to its build)."""
        return (_rebuild_tuple, (type(self), tuple(self), self.__dict__))


class DescriptorForm(tuple):
    """``(E, A, B)`` of ``linearize_descriptor``: ``E w' = A w + B r``.
    ``variables``: the names of w (coordinates, speeds, ``lambda0``...,
    ``mu0``..., ``nu0``...); ``rank_c``, ``rank_v``: the ranks of J_c and
    B_v (ints when equal at every point of a batch, else int arrays of the
    batch shape)."""

    def __new__(cls, values, variables, rank_c, rank_v):
        self = super().__new__(cls, values)
        self.variables, self.rank_c, self.rank_v = variables, rank_c, rank_v
        return self

    def __reduce__(self):
        """Pickles with its metadata."""
        return (_rebuild_tuple, (type(self), tuple(self), self.__dict__))


def _rebuild_tuple(cls, values, state):
    """A result tuple subclass from its values and attributes (unpickling)."""
    self = tuple.__new__(cls, values)
    self.__dict__.update(state)
    return self


class LocalLinearization:
    """The local state-space form of ``linearize_local``.

    ``A`` (nx x nx), ``B`` (nx x nr): ``d x/dt = A x + B r`` for the local
    coordinates x = [y; z]; ``N_q`` (nq x (nq - rank_c)), ``N_u``
    (nu x (nu - rank_v)): orthonormal bases of the admissible coordinate and
    speed perturbations (null spaces of J_c and B_v at the point);
    ``embedding`` T ((nq + nu) x nx): [delta q; delta u] = T x, with
    T = [[N_q, 0], [C_1 N_q, N_u]]; ``rank_c``, ``rank_v``: the ranks of J_c
    and B_v; ``dof = nu - rank_v`` (degrees of freedom: independent speeds);
    ``nx = (nq - rank_c) + (nu - rank_v)``; ``sigma_c``, ``sigma_v``: the
    singular values of J_c and B_v (descending; for a batch computed when
    first read, from a copy of the points); ``rank_tol``: the relative
    tolerance that decided the ranks.

    The bases: where the model's default partition is well conditioned and
    both ranks are certainly full, N_q and N_u are the Gram-Schmidt
    orthonormalization of the partition's independent directions (C_0 =
    d q / d q_i and C_2, in the order of the independent coordinates and
    speeds), which varies smoothly along a path; elsewhere they come from the
    SVDs of J_c and B_v. Both are orthonormal bases of the same spaces.

    Batches: where every point has the same ranks (``uniform``), the arrays
    stack along the batch axes (A: ``batch + (nx, nx)``) and the ranks are
    ints. Where the ranks differ (a batch that crosses a singular
    configuration), each array is padded with NaN to the largest size in
    the batch (A: ``batch + (max nx, max nx)``, the point's own A in its
    leading ``nx x nx`` block; in ``embedding`` and ``B`` its leading
    ``nx`` columns/rows; N_q and N_u their leading columns), ``uniform`` is
    False, and ``rank_c``, ``rank_v``, ``dof`` and ``nx`` are int arrays of
    the batch shape. ``point(i)`` gives the result of one point, trimmed.
    """

    def __init__(self, *, A, B, N_q, N_u, embedding, rank_c, rank_v, dof, nx, rank_tol,
                 sigma_c=None, sigma_v=None, singular_values=None, uniform=True, shape=(),
                 chart="partition", dependent_q=None, dependent_u=None, charts=None,
                 chart_names=None):
        """``singular_values``: instead of sigma_c and sigma_v, a function
        giving them, called when they are first asked for. ``charts``: per
        point, the dependent indices of the chart's partition (-1: the null
        spaces'), into ``chart_names`` (q_names, u_names)."""
        self.A, self.B, self.N_q, self.N_u, self.embedding = A, B, N_q, N_u, embedding
        self.rank_c, self.rank_v, self.dof, self.nx = rank_c, rank_v, dof, nx
        self._singular_values = singular_values
        self._sigma = (sigma_c, sigma_v) if singular_values is None else None
        self.rank_tol = rank_tol
        self.uniform, self.shape = uniform, shape
        self.chart, self.dependent_q, self.dependent_u = chart, dependent_q, dependent_u
        self._charts, self._chart_names = charts, chart_names

    def __getstate__(self):
        """Pickles with its singular values (computed now if not yet read)."""
        self._sigmas()
        state = dict(self.__dict__)
        state["_singular_values"] = None
        return state

    def _sigmas(self):
        if self._sigma is None:     # computed once, when first asked for
            self._sigma = self._singular_values()
            self._singular_values = None
        return self._sigma

    @property
    def sigma_c(self):
        """The singular values of J_c (descending), per point."""
        return self._sigmas()[0]

    @property
    def sigma_v(self):
        """The singular values of B_v (descending), per point."""
        return self._sigmas()[1]

    @classmethod
    def _from_kernel(cls, model, shape, A, B, T, ranks, sigma, rank_tol, chart):
        """From the kernel's rows (each point's A, B, T packed with its own nx
        in a row at least that large; ranks (n, 2); sigma: a function giving
        the (n, nc + nv) singular values, called when they are asked for)."""
        nq, nu, nr, ns = model.nq, model.nu, model.nr, model.nq + model.nu
        n = math.prod(shape)
        uniform = n == 0 or bool(np.all(ranks == ranks[0]))
        if uniform:      # the common case, and every single point: no padding
            pairs = [(0, 0) if n == 0 else (int(ranks[0, 0]), int(ranks[0, 1]))]
        else:
            pairs = sorted(set(map(tuple, ranks.tolist())))
        sizes = [(nq - rank_c, nu - rank_v) for rank_c, rank_v in pairs]
        width = max(y + z for y, z in sizes)
        wide_y, wide_z = max(y for y, _ in sizes), max(z for _, z in sizes)
        if uniform:      # views of the kernel's rows: no copies
            (y, z), k = sizes[0], width
            A_out, B_out = A[:, :k * k].reshape(n, k, k), B[:, :k * nr].reshape(n, k, nr)
            T_out = T[:, :ns * k].reshape(n, ns, k)
            N_q, N_u = T_out[:, :nq, :y], T_out[:, nq:, y:]
        else:            # padded with NaN to the largest size
            def fill(size):
                return np.full(size, np.nan)
            A_out, B_out = fill((n, width, width)), fill((n, width, nr))
            T_out = fill((n, ns, width))
            N_q, N_u = fill((n, nq, wide_y)), fill((n, nu, wide_z))
        for (rank_c, rank_v), (y, z) in zip(pairs, sizes) if not uniform else ():
            rows = np.nonzero((ranks[:, 0] == rank_c) & (ranks[:, 1] == rank_v))[0]
            count = len(rows)           # explicit: -1 is ambiguous for empty rows
            k = y + z
            A_out[rows, :k, :k] = A[rows, :k * k].reshape(count, k, k)
            B_out[rows, :k] = B[rows, :k * nr].reshape(count, k, nr)
            T_k = T[rows, :ns * k].reshape(count, ns, k)
            T_out[rows, :, :k] = T_k
            N_q[rows, :, :y] = T_k[:, :nq, :y]
            N_u[rows, :, :z] = T_k[:, nq:, y:]

        def batch(array):
            return array.reshape(shape + array.shape[1:])

        if uniform:
            (rank_c, rank_v), (y, z) = pairs[0], sizes[0]
            counts = dict(rank_c=rank_c, rank_v=rank_v, dof=z, nx=y + z)
        else:
            rank_c, rank_v = ranks[:, 0].astype(int), ranks[:, 1].astype(int)
            counts = dict(rank_c=rank_c, rank_v=rank_v, dof=nu - rank_v,
                          nx=(nq - rank_c) + (nu - rank_v))
            counts = {key: value.reshape(shape) for key, value in counts.items()}
        def singular_values():
            values = sigma()
            return batch(values[:, :model.nc]), batch(values[:, model.nc:])

        return cls(A=batch(A_out), B=batch(B_out), N_q=batch(N_q), N_u=batch(N_u),
                   embedding=batch(T_out), singular_values=singular_values, rank_tol=rank_tol,
                   uniform=uniform, shape=shape, **counts, **chart)

    def point(self, index):
        """The result at one point of the batch (``index``: a tuple of batch
        indices, or an int: a flat index in C order), trimmed to its size."""
        index = _batch_index(index, self.shape)

        def at(value):
            return value[index] if isinstance(value, np.ndarray) else value

        nx, dof = int(at(self.nx)), int(at(self.dof))
        ny = nx - dof
        chart = dict(chart=self.chart, dependent_q=self.dependent_q, dependent_u=self.dependent_u)
        if self._charts is not None:
            row = self._charts[index]
            q_names, u_names, nc = self._chart_names
            if row.size and np.any(row < 0):
                chart = dict(chart="null space", dependent_q=None, dependent_u=None)
            else:
                chart = dict(chart="partition", dependent_q=tuple(q_names[i] for i in row[:nc]),
                             dependent_u=tuple(u_names[i] for i in row[nc:]))
        return LocalLinearization(
            A=self.A[index][:nx, :nx], B=self.B[index][:nx], N_q=self.N_q[index][:, :ny],
            N_u=self.N_u[index][:, :dof], embedding=self.embedding[index][:, :nx],
            rank_c=int(at(self.rank_c)), rank_v=int(at(self.rank_v)), dof=dof, nx=nx,
            singular_values=lambda: (self.sigma_c[index], self.sigma_v[index]),
            rank_tol=self.rank_tol, **chart)

    def __repr__(self):
        where = f"batch of shape {self.shape}, " if self.shape else ""
        return (f"<LocalLinearization: {where}nx={self.nx}, rank_c={self.rank_c}, "
                f"rank_v={self.rank_v}, dof={self.dof}{'' if self.uniform else ', not uniform'}>")


class GeneratedPackage(types.ModuleType):
    """The type of a generated package (``generated/<name>``): a module that
    pickles by reference to its build, like its model."""

    def __reduce__(self):
        model = vars(self).get("_model") or vars(self).get("model")
        if not isinstance(model, CompiledModel):
            import pickle
            raise pickle.PicklingError(f"generated package {self.__name__} is not fully imported")
        return (_package_from_build, (model._build_reference(),))


def _package_from_build(reference):
    """The generated package of a pickled reference (see
    ``CompiledModel._build_reference``), imported in this process.

    Looks, in order, at the build's key link and directory as they were where
    it was pickled (a shared file system), at ``.builds/<name>-<key>`` of this
    process's output directory (``$CODEGEN_OUTPUT_DIR`` or ``generated/``:
    a shipped build, or one built here from the same model with the same
    compiler), and at ``<output dir>/<name>`` if it is a build of the same
    model (same fingerprint: built here by another compiler or codegen).
    Raises BuildError saying how to make the build available otherwise."""
    import socket
    from pathlib import Path

    from .compile import read_record, resolve_output_dir
    from .errors import BuildError
    from .load import load_package

    name, key, fingerprint = reference["name"], reference["key"], reference.get("fingerprint")
    output_dir = resolve_output_dir()
    candidates = [(Path(reference["key_link"]), True), (Path(reference["build_dir"]), True),
                  (output_dir / ".builds" / f"{name}-{key}", True), (output_dir / name, False)]
    for directory, same_key in candidates:
        record = read_record(directory)
        if record is None or record.get("name") != name:
            continue
        if record.get("key") == key or (not same_key and fingerprint is not None
                                         and record.get("fingerprint") == fingerprint):
            return load_package(directory)
    raise BuildError(
        f"cannot load the generated model {name!r} (build {key}) in this process on "
        f"{socket.gethostname()}: {reference['key_link']} does not exist here, nor a build of "
        f"it in {output_dir}. A pickled generated model refers to its build on disk, not to "
        "its bytes, so every process that unpickles it needs the build: share the output "
        "directory at the same path; or build on the workers from the model (e.g. with "
        "dask.distributed: client.run(lambda: codegen.build(make_model())), which builds into "
        "$CODEGEN_OUTPUT_DIR or generated/ there); or ship the build: copy the output "
        "directory (generated/, with its links: rsync -a or tar) to the workers and set "
        "CODEGEN_OUTPUT_DIR to where it lands")


def _model_from_build(reference):
    """The CompiledModel of a pickled reference (see :func:`_package_from_build`)."""
    return _package_from_build(reference).model
