"""The Python face of a generated module.

A generated package (``generated/<name>/``) holds a compiled kernel (Cython
loops over the C functions) and builds one :class:`CompiledModel` from it. This
class validates and broadcasts arguments and turns the C status codes into
exceptions that say what is wrong, at which point of a batch. It imports only
NumPy, so loading a generated module does not load SymPy.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import types
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import errors
from .errors import EvaluationError, InputError
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

_EXCEPTION = {s.code: getattr(errors, s.exception) for s in STATUSES if s.exception}


# Batches are split across threads (the C kernels run without the GIL and are
# reentrant with one workspace per call) when they hold at least
# PARALLEL_THRESHOLD points and about PARALLEL_WORK operations of generated
# code in all: below that, starting threads costs more than it saves.
PARALLEL_THRESHOLD = 2048
PARALLEL_WORK = 1_000_000
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


def run_batch(function, n, inputs, options, outputs, threads=None, work_per_point=1):
    """``function(n, *inputs, *options, *outputs)`` -> (status, index), split
    into contiguous chunks of points run concurrently when the batch is large.

    ``inputs`` and ``outputs`` hold one row per point (or, for inputs, one shared
    row); ``threads`` defaults to the number of cores. Returns the status of the
    first failing point in batch order and its index."""
    if threads is None:
        threads = _CORES if n * work_per_point >= PARALLEL_WORK else 1
    threads = max(1, int(threads))
    if threads == 1 or n < PARALLEL_THRESHOLD:
        return function(n, *inputs, *options, *outputs)
    bounds = np.linspace(0, n, threads + 1).astype(int)
    chunks = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]

    def rows(array, start, stop):
        return array if array is None or array.shape[0] == 1 else array[start:stop]

    def part(chunk):
        start, stop = chunk
        return function(stop - start, *[rows(a, start, stop) for a in inputs], *options,
                        *[rows(a, start, stop) for a in outputs])

    results = list(_executor().map(part, chunks))
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


_INT_MAX = 2**31 - 1   # the C int of max_iter


def _shown(value):
    """repr for a message, cut short (an int of 400 digits is not read)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:30] + "..."


def _plain_number(value):
    """A Python int or float a C double holds (the single-point fast path)."""
    return isinstance(value, float) or (isinstance(value, int) and abs(value) < 1e308)


class _Batch:
    """Arguments flattened to one row per point (or one shared row)."""

    def __init__(self, shape, arrays):
        self.shape = shape
        self.size = math.prod(shape)
        self.arrays = arrays

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

    def _partition(self, given, count, dependent_count, names, label):
        if given is None:
            return None
        given = list(np.atleast_1d(given)) if not isinstance(given, (list, tuple)) else list(given)
        indices = []
        for item in given:
            if isinstance(item, str):
                if item not in names:
                    raise InputError(f"{self.name}: {label}: unknown name {item!r}; names are {', '.join(names)}")
                indices.append(names.index(item))
            elif isinstance(item, (int, np.integer)) and not isinstance(item, bool):
                indices.append(int(item))
            else:
                raise InputError(f"{self.name}: {label} must hold indices or names, got {item!r}")
        if len(indices) != dependent_count:
            raise InputError(f"{self.name}: {label} needs {dependent_count} entries "
                             f"(one per constraint), got {len(indices)}")
        for i in indices:
            if not 0 <= i < count:
                raise InputError(f"{self.name}: {label} index {i} is out of range 0..{count - 1}")
        if len(set(indices)) != len(indices):
            raise InputError(f"{self.name}: {label} repeats an index: {indices}")
        return indices

    def _indices(self, given, count, dependent_count, names, label, default):
        """The partition for the kernel: None for the model's default, also
        when given explicitly (in any order: the rows and columns of the
        results follow the model's order, not that of dependent_q), so the
        call takes the straight-line code of the default partition."""
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
        try:
            array = np.asarray(value)
        except (TypeError, ValueError, OverflowError):   # e.g. ragged nested lists
            raise InputError(f"{self.name}: {label} must be {what}") from None
        # NumPy would keep only the real part of complex values (with a warning)
        # and would parse strings: refuse both
        if array.dtype.kind == "c" or (array.dtype.kind == "O" and any(
                isinstance(x, (complex, np.complexfloating)) for x in array.flat)):
            raise InputError(f"{self.name}: {label} holds complex values; it must be real")
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
        """One row per point, or a single row when the value is shared."""
        if math.prod(own_shape) == 1:
            rows = array.reshape((1, length) if length is not None else (1,))
        else:
            full = np.broadcast_to(array, shape + ((length,) if length is not None else ()))
            count = math.prod(shape)   # explicit: -1 is ambiguous for zero-length rows
            rows = full.reshape((count, length) if length is not None else (count,))
        return np.ascontiguousarray(rows, dtype=float)

    # -- errors ----------------------------------------------------------------
    def _raise(self, status, index, batch, dependent_q=None, dependent_u=None, tol=None,
               detail="", blocks=None):
        """The exception for a failed call at batch point ``index``; ``detail``
        follows the message and the index; ``blocks``: the blocks the call
        evaluates, when not all (named if they hold NaN or Inf)."""
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
                       "choose other dependent coordinates (dependent_q=...)")
        elif status == SINGULAR_VELOCITY_PARTITION:
            message = (f"the constraint Jacobian block B_v P_ud (d f_v/d u in the columns of the "
                       f"dependent speeds {[self.u_names[i] for i in du]}) is singular; "
                       "choose other dependent speeds (dependent_u=...)")
        if status in (SINGULAR_CONFIGURATION_PARTITION, SINGULAR_VELOCITY_PARTITION, SINGULAR_M_UU):
            # a rank-deficient constraint Jacobian makes every partition block
            # and the multiplier form's speed mass matrix singular: name the cause
            message = self._rank_deficiency(self._row(batch, index)) or message
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
    # deficient in error messages (SINGULAR_RTOL of the generated C is 1e-12)
    RANK_RTOL = 1e-9

    def _rank_deficiency(self, row):
        """Message saying that J_c or B_v lost rank at the point (a singular
        configuration: no partition works), or "" if both have full row rank."""
        jacobians = getattr(self._kernel, "constraint_jacobians", None)
        if jacobians is None:
            return ""
        J_c, B_v = jacobians(float(row["t"]), row["q"], row["u"], row["r"], row["p"])
        parts = []
        for label, matrix, names, rows_label in (
                ("J_c = d f_c/d q", J_c, self.q_names, "f_c"),
                ("B_v = d f_v/d u", B_v, self.u_names, "f_v")):
            if matrix.shape[0] == 0 or not np.all(np.isfinite(matrix)):
                continue
            left, values, _ = np.linalg.svd(matrix)
            scale = values[0] if values.size else 0.0
            rank = int(np.sum(values > self.RANK_RTOL * scale)) if scale > 0 else 0
            if rank == matrix.shape[0]:
                continue
            # the constraints that combine into a vanishing row: the left null space
            null = left[:, rank:]
            involved = [f"{rows_label}[{i}]" for i in range(matrix.shape[0])
                        if np.abs(null[i]).max() > 1e-3]
            smallest = ", ".join(f"{v:.2e}" for v in values[rank:]) or "0"
            parts.append(f"the constraint Jacobian {label} has rank {rank} of {matrix.shape[0]} "
                         f"here (smallest singular values {smallest}, largest {scale:.2e}; "
                         f"dependent rows: {', '.join(involved)})")
        if not parts:
            return ""
        return ("; ".join(parts) + ": a singular configuration, where the constraints are not "
                "independent, so no choice of dependent coordinates or speeds works (and the "
                "multiplier form's speed mass matrix is singular with it); the local state-space "
                "form that linearizes such points (more states, minimum-norm multipliers) is "
                "not available yet")

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
    def linearize(self, q, u, r=None, p=None, t=0.0, *, dependent_q=None, dependent_u=None,
                  tol=1e-8, threads=None):
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
        ``dependent_q``/``dependent_u`` choose the partition (indices or names).
        The point must satisfy the constraints to ``tol`` (max-norm); pass
        ``tol=None`` to skip that check. Batches of at least
        ``PARALLEL_THRESHOLD`` points run on ``threads`` threads (default: all
        cores).
        """
        self._check_tol(tol)
        threads = self._check_threads(threads)
        dq, du = self._partitions(dependent_q, dependent_u)
        if dq is None and du is None and not isinstance(p, dict) and _plain_number(t):
            # one point, default partition: checked and evaluated in the kernel
            result = self._kernel.linearize_one(q, u, r, p, float(t), -1.0 if tol is None else float(tol))
            if result is not None:
                return result
        A, B, _, _ = self._linearize(q, u, r, p, t, dq, du, tol, False, threads)
        return A, B

    def linearize_full(self, q, u, r=None, p=None, t=0.0, *, dependent_q=None, dependent_u=None,
                       tol=1e-8, threads=None):
        """``(A', B')``: derivatives of all coordinates and speeds (rows q, then u)
        with respect to the independent states and the inputs. Arguments and
        batches as for :meth:`linearize`."""
        self._check_tol(tol)
        threads = self._check_threads(threads)
        dq, du = self._partitions(dependent_q, dependent_u)
        _, _, A_full, B_full = self._linearize(q, u, r, p, t, dq, du, tol, True, threads)
        return A_full, B_full

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
        if isinstance(threads, (int, np.integer)) and not isinstance(threads, bool) and threads >= 1:
            return int(threads)
        raise InputError(f"{self.name}: threads must be a whole number >= 1, or None (all cores "
                         f"for large batches), got {_shown(threads)}")

    def _linearize(self, q, u, r, p, t, dq, du, tol, full, threads):
        """``dq``, ``du``: partition index arrays from :meth:`_partitions`."""
        batch = self._batch(q, u, r, p, t)
        n, nx, nr, ns = batch.size, self.nx, self.nr, self.nq + self.nu
        A = np.empty((n, nx * nx)) if not full else None
        B = np.empty((n, nx * nr)) if not full else None
        A_full = np.empty((n, ns * nx)) if full else None
        B_full = np.empty((n, ns * nr)) if full else None
        tolerance = -1.0 if tol is None else float(tol)
        a = batch.arrays
        status, index = run_batch(self._kernel.linearize, n,
                                  (a["t"], a["q"], a["u"], a["r"], a["p"]), (dq, du, tolerance),
                                  (A, B, A_full, B_full, None, None), threads, self.operation_count)
        if status != OK:
            self._raise(status, index, batch, dq, du, tol)
        if full:
            return None, None, batch.reshape(A_full, ns, nx), batch.reshape(B_full, ns, nr)
        return batch.reshape(A, nx, nx), batch.reshape(B, nx, nr), None, None

    def state_derivative(self, q, u, r=None, p=None, t=0.0, *, threads=None):
        """``(qd, ud)``: time derivatives of all coordinates and speeds.
        Arguments and batches as for :meth:`linearize`."""
        threads = self._check_threads(threads)
        batch = self._batch(q, u, r, p, t)
        n, a = batch.size, batch.arrays
        qd, ud = np.empty((n, self.nq)), np.empty((n, self.nu))
        status, index = run_batch(self._kernel.state_derivative, n,
                                  (a["t"], a["q"], a["u"], a["r"], a["p"]), (), (qd, ud), threads,
                                  self.operation_count)
        if status != OK:
            self._raise(status, index, batch)
        return batch.reshape(qd, self.nq), batch.reshape(ud, self.nu)

    def constraint_residuals(self, q, u, p=None, t=0.0):
        """``(f_c, f_v)``: configuration and velocity constraint residuals.
        Arguments and batches as for :meth:`linearize`."""
        batch = self._batch(q, u, None, p, t)
        n, a = batch.size, batch.arrays
        f_c, f_v = np.empty((n, self.nc)), np.empty((n, self.nv))
        status, index = self._kernel.constraint_residuals(n, a["t"], a["q"], a["u"], a["p"], f_c, f_v)
        if status != OK:
            self._raise(status, index, batch, blocks=("f_c", "f_v"))
        return batch.reshape(f_c, self.nc), batch.reshape(f_v, self.nv)

    def complete(self, q, u, p=None, t=0.0, *, dependent_q=None, dependent_u=None, tol=1e-12,
                 max_iter=50):
        """``(q, u)`` with the dependent coordinates solved from f_c = 0 (Newton's
        method from the given values, at most ``max_iter`` steps, until
        |f_c|_inf <= tol) and the dependent speeds from f_v = 0. Arguments and
        batches as for :meth:`linearize`."""
        self._check_tol(tol, allow_none=False)
        if (isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer))
                or not 0 <= max_iter <= _INT_MAX):
            raise InputError(f"{self.name}: max_iter must be a whole number from 0 to {_INT_MAX}, "
                             f"got {_shown(max_iter)}")
        batch = self._batch(q, u, None, p, t)
        dq, du = self._partitions(dependent_q, dependent_u)
        n, a = batch.size, batch.arrays
        # copies, completed in place; order="C": a copy of a broadcast view
        # (one row shared by all points) is not C-contiguous by default
        q_out = np.array(np.broadcast_to(a["q"], (n, self.nq)), order="C")
        u_out = np.array(np.broadcast_to(a["u"], (n, self.nu)), order="C")
        status, index = self._kernel.complete_point(n, a["t"], q_out, u_out, a["p"], dq, du,
                                                    float(tol), int(max_iter))
        detail = ""
        if status == NO_CONVERGENCE:
            # q_out holds Newton's last iterate at the failing point
            row = self._row(batch, index)
            f_c, _ = self._residuals_at({**row, "q": q_out[index], "u": u_out[index]})
            detail = (f": |f_c|_inf = {np.max(np.abs(f_c)):.3e} after {int(max_iter)} iterations "
                      f"(tol {float(tol):g}); start nearer a solution, choose other dependent "
                      "coordinates (dependent_q=...), or check that the constraints can be met")
        if status != OK:
            # blocks=(): Newton's iterates are not the given point, so the
            # blocks evaluated there say nothing sure about the failure
            self._raise(status, index, batch, dq, du, tol, detail, blocks=())
        return batch.reshape(q_out, self.nq), batch.reshape(u_out, self.nu)

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
        ``["T_steer"]``. ``dependent_q``, ``dependent_u`` and ``tol`` are
        passed to :meth:`linearize`; ``name`` names the system (default: the
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
        A, B = self.linearize(q, u, r, p, t, dependent_q=dependent_q, dependent_u=dependent_u,
                              tol=tol)
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
        for attribute in ("state_space",):
            if attribute not in vars(package):
                setattr(package, attribute, getattr(self, attribute))


# Step of the differences of the constraint residuals (relative to max(1, |x|)),
# and the largest coupling (relative to max(1, |A|)) a dropped state may have
# with the kept ones in state_space(states=...).
_DIFFERENCE_STEP = 1e-3
_DECOUPLED = 1e-10


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
