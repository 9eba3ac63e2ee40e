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
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .errors import (ConstraintViolationError, ConvergenceError, EvaluationError, InputError,
                     SingularMatrixError)

# status codes of the generated C (see the header)
OK = 0
NONFINITE_INPUT = 1
BAD_PARTITION = 2
CONFIGURATION_CONSTRAINT = 3
VELOCITY_CONSTRAINT = 4
SINGULAR_M_QQ = 5
SINGULAR_M_UU = 6
SINGULAR_CONFIGURATION_PARTITION = 7
SINGULAR_VELOCITY_PARTITION = 8
NONFINITE_RESULT = 9
NO_CONVERGENCE = 10

_EXCEPTION = {
    NONFINITE_INPUT: InputError,
    BAD_PARTITION: InputError,
    CONFIGURATION_CONSTRAINT: ConstraintViolationError,
    VELOCITY_CONSTRAINT: ConstraintViolationError,
    SINGULAR_M_QQ: SingularMatrixError,
    SINGULAR_M_UU: SingularMatrixError,
    SINGULAR_CONFIGURATION_PARTITION: SingularMatrixError,
    SINGULAR_VELOCITY_PARTITION: SingularMatrixError,
    NONFINITE_RESULT: EvaluationError,
    NO_CONVERGENCE: ConvergenceError,
}


# Batches are split across threads (the C kernels run without the GIL and are
# reentrant with one workspace per call) when they hold at least
# PARALLEL_THRESHOLD points and about PARALLEL_WORK operations of generated
# code in all: below that, starting threads costs more than it saves.
PARALLEL_THRESHOLD = 2048
PARALLEL_WORK = 1_000_000
_CORES = os.cpu_count() or 1
_pool_lock = threading.Lock()
_pool = None


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

    # -- names -----------------------------------------------------------------
    def independent_state_names(self, dependent_q=None, dependent_u=None):
        """Names of x = [q_i, u_i] for a partition (default: the model's)."""
        dq = self._partition(dependent_q, self.nq, self.nc, self.q_names, "dependent_q")
        du = self._partition(dependent_u, self.nu, self.nv, self.u_names, "dependent_u")
        dq = self.dependent_q if dq is None else tuple(dq)
        du = self.dependent_u if du is None else tuple(du)
        return tuple([n for i, n in enumerate(self.q_names) if i not in dq] +
                     [n for i, n in enumerate(self.u_names) if i not in du])

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
            try:
                index = self.p_names.index(key)
            except ValueError:
                raise InputError(f"{self.name}: unknown parameter {key!r}; "
                                 f"parameters are {', '.join(self.p_names)}") from None
            if isinstance(value, (complex, np.complexfloating)):
                raise InputError(f"{self.name}: parameter {key!r} must be a real number, got {value!r}")
            try:
                p[index] = float(value)
            except (TypeError, ValueError):
                raise InputError(f"{self.name}: parameter {key!r} must be a number, got {value!r}") from None
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

    def _indices(self, given, count, dependent_count, names, label):
        indices = self._partition(given, count, dependent_count, names, label)
        return None if indices is None else np.array(indices, dtype=np.intc)

    def _vector(self, value, length, label):
        if isinstance(value, dict):
            raise InputError(f"{self.name}: {label} must be an array, not a dict")
        try:
            array = np.asarray(value)
            if array.dtype.kind == "c":
                raise InputError(f"{self.name}: {label} holds complex values; it must be real")
            array = np.asarray(array, dtype=float)
        except (TypeError, ValueError):
            raise InputError(f"{self.name}: {label} must be an array of numbers") from None
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
        try:
            t = np.asarray(t, dtype=float)
        except (TypeError, ValueError):
            raise InputError(f"{self.name}: t must be a number or an array of numbers") from None
        try:
            shape = np.broadcast_shapes(*(a.shape[:-1] for a in arrays.values()), t.shape)
        except ValueError:
            shapes = ", ".join(f"{k}: {a.shape}" for k, a in arrays.items())
            raise InputError(f"{self.name}: leading (batch) dimensions do not broadcast: "
                             f"{shapes}, t: {t.shape}") from None
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
    def _raise(self, status, index, batch, dependent_q=None, dependent_u=None, tol=None):
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
        if status in (CONFIGURATION_CONSTRAINT, VELOCITY_CONSTRAINT):
            message += self._violation_detail(status, index, batch, tol)
        elif status == SINGULAR_CONFIGURATION_PARTITION:
            message = (f"the constraint Jacobian block J_c P_qd (d f_c/d q in the columns of the "
                       f"dependent coordinates {[self.q_names[i] for i in dq]}) is singular; "
                       "choose other dependent coordinates (dependent_q=...)")
        elif status == SINGULAR_VELOCITY_PARTITION:
            message = (f"the constraint Jacobian block B_v P_ud (d f_v/d u in the columns of the "
                       f"dependent speeds {[self.u_names[i] for i in du]}) is singular; "
                       "choose other dependent speeds (dependent_u=...)")
        raise _EXCEPTION.get(status, EvaluationError)(f"{self.name}: {message}{where}")

    def _violation_detail(self, status, index, batch, tol):
        row = {k: a[index if a.shape[0] > 1 else 0] for k, a in batch.arrays.items()}
        f_c, f_v = self._residuals_at(row)
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

        q, u, r, p may carry leading batch dimensions (broadcast together with
        t); p may be a dict of parameter values by name (others default).
        ``dependent_q``/``dependent_u`` choose the partition (indices or names).
        The point must satisfy the constraints to ``tol`` (max-norm); pass
        ``tol=None`` to skip that check. Batches of at least
        ``PARALLEL_THRESHOLD`` points run on ``threads`` threads (default: all
        cores).
        """
        self._check_tol(tol)
        if dependent_q is None and dependent_u is None and not isinstance(p, dict) \
                and isinstance(t, (float, int)):
            # one point, default partition: checked and evaluated in the kernel
            result = self._kernel.linearize_one(q, u, r, p, float(t), -1.0 if tol is None else float(tol))
            if result is not None:
                return result
        A, B, _, _ = self._linearize(q, u, r, p, t, dependent_q, dependent_u, tol, False, threads)
        return A, B

    def linearize_full(self, q, u, r=None, p=None, t=0.0, *, dependent_q=None, dependent_u=None,
                       tol=1e-8, threads=None):
        """``(A', B')``: derivatives of all coordinates and speeds (rows q, then u)
        with respect to the independent states and the inputs."""
        _, _, A_full, B_full = self._linearize(q, u, r, p, t, dependent_q, dependent_u, tol, True,
                                               threads)
        return A_full, B_full

    def _check_tol(self, tol, allow_none=True):
        if tol is None and allow_none:
            return
        try:
            ok = float(tol) >= 0.0
        except (TypeError, ValueError):
            ok = False
        if not ok:
            skip = " (None skips the check)" if allow_none else ""
            raise InputError(f"{self.name}: tol must be a number >= 0{skip}, got {tol!r}")

    def _linearize(self, q, u, r, p, t, dependent_q, dependent_u, tol, full, threads):
        self._check_tol(tol)
        batch = self._batch(q, u, r, p, t)
        dq = self._indices(dependent_q, self.nq, self.nc, self.q_names, "dependent_q")
        du = self._indices(dependent_u, self.nu, self.nv, self.u_names, "dependent_u")
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
        """``(qd, ud)``: time derivatives of all coordinates and speeds."""
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
        """``(f_c, f_v)``: configuration and velocity constraint residuals."""
        batch = self._batch(q, u, None, p, t)
        n, a = batch.size, batch.arrays
        f_c, f_v = np.empty((n, self.nc)), np.empty((n, self.nv))
        status, index = self._kernel.constraint_residuals(n, a["t"], a["q"], a["u"], a["p"], f_c, f_v)
        if status != OK:
            self._raise(status, index, batch)
        return batch.reshape(f_c, self.nc), batch.reshape(f_v, self.nv)

    def complete(self, q, u, p=None, t=0.0, *, dependent_q=None, dependent_u=None, tol=1e-12,
                 max_iter=50):
        """``(q, u)`` with the dependent coordinates solved from f_c = 0 (Newton's
        method from the given values) and the dependent speeds from f_v = 0."""
        self._check_tol(tol, allow_none=False)
        batch = self._batch(q, u, None, p, t)
        dq = self._indices(dependent_q, self.nq, self.nc, self.q_names, "dependent_q")
        du = self._indices(dependent_u, self.nu, self.nv, self.u_names, "dependent_u")
        n, a = batch.size, batch.arrays
        q_out = np.array(np.broadcast_to(a["q"], (n, self.nq)))  # copies: completed in place
        u_out = np.array(np.broadcast_to(a["u"], (n, self.nu)))
        status, index = self._kernel.complete_point(n, a["t"], q_out, u_out, a["p"], dq, du,
                                                    float(tol), int(max_iter))
        if status != OK:
            self._raise(status, index, batch, dq, du, tol)
        return batch.reshape(q_out, self.nq), batch.reshape(u_out, self.nu)

    def __repr__(self):
        return (f"<generated model {self.name!r}: {self.nq} coordinates ({self.nc} dependent), "
                f"{self.nu} speeds ({self.nv} dependent), {self.nr} inputs, {self.np} parameters>")
