"""The arguments of a generated model's methods: checked once, broadcast once.

Every method takes ``(q, u, r, p, t)`` and reads them through :func:`batch`,
the broadcasting rule: q, u, r and p are vectors along their last axis, their
leading axes and all axes of t are batch axes, and the batch shape is
``np.broadcast_shapes(q.shape[:-1], u.shape[:-1], r.shape[:-1],
p.shape[:-1], t.shape)``. The result, a :class:`Batch`, holds each argument
as the kernel reads it: one row per point, or one row shared by every point.

Names or indices (partitions, ``fixed``, ``periodic``, ``states``, ``inputs``,
``outputs``) become checked indices in :func:`indices_of`; the numeric options
(``tol``, ``steady_tol``, ``rank_tol``, ``max_step``, ``threads``,
``max_iter``) are checked in :func:`option`, against the rules in this module.
"""

from __future__ import annotations

import functools
import math
import os
import warnings
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from . import kernel
from .diagnostics import outside_stacklevel, shown

AUTO = "auto"   # dependent_q/dependent_u: chosen at each point (column-pivoted QR)

# the most iterations equilibrium and complete may be asked for: Newton's
# method converges in tens where it converges at all (and both stop early
# when the residual stops decreasing)
MAX_ITER = 100_000

# the default steady_tol: a rate of an essential state of the result's chart
# above STEADY_TOL times the largest rate (at least 1) makes the point not
# steady in that chart (NotSteadyWarning)
STEADY_TOL = 1e-6


# -- the batch ---------------------------------------------------------------------------

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


class Batch:
    """Arguments flattened to one row per point (or one shared row): ``arrays``
    maps t, q, u, r, p to the kernel's input arrays; ``shape`` is the batch
    shape and ``size`` the number of points."""

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
        """Rows of a result (one per point) as an array of the batch shape."""
        return flat.reshape(self.shape + trailing)

    def row(self, index):
        """The arguments of point ``index``: a dict of t, q, u, r, p."""
        return {key: kernel.row(array, index) for key, array in self.arrays.items()}

    def all_rows(self, key):
        """One row per point of an argument (a read-only view where it is shared)."""
        array = self.arrays[key]
        return np.broadcast_to(array, (self.size,) + array.shape[1:])

    def writable_rows(self, key):
        """A copy of an argument, one C-contiguous row per point, for the kernels
        that work in place (order="C": a copy of a broadcast view, one row
        shared by all points, is not C-contiguous by default)."""
        return np.array(self.all_rows(key), order="C")


def batch(model, q, u, r=None, p=None, t=0.0):
    """The arguments of a call as a :class:`Batch`: each checked (real
    numbers, its length), and broadcast by the rule of the module's docstring.
    r None: no inputs (zeros); p None: the defaults, a dict: by name."""
    arrays = {"q": vector(model, q, model.nq, "q"), "u": vector(model, u, model.nu, "u")}
    if r is None:
        r = np.zeros(model.nr)
    arrays["r"] = vector(model, r, model.nr, "r")
    if p is None:
        p = model.default_parameters
    elif isinstance(p, dict):
        p = parameter_vector(model, p)
    arrays["p"] = vector(model, p, model.np, "p")
    t = numbers(model, t, "t", "a number or an array of numbers")
    try:
        shape = _batch_shape([*(a.shape[:-1] for a in arrays.values()), t.shape])
    except ValueError:
        shapes = ", ".join(f"{k}: {a.shape}" for k, a in arrays.items())
        raise InputError(f"{model.name}: leading (batch) dimensions do not broadcast: "
                         f"{shapes}, t: {t.shape}") from None
    # t holds one time per point. With more dimensions than the batch of the
    # vectors, broadcasting would form every combination: t of shape (100, 1)
    # beside q of shape (100, 6) would make 100 x 100 points. Refuse that.
    vector_dims = max(a.ndim - 1 for a in arrays.values())
    if 0 < vector_dims < t.ndim:
        points = np.broadcast_shapes(*(a.shape[:-1] for a in arrays.values()))
        raise InputError(
            f"{model.name}: t of shape {t.shape} has more dimensions than the batch of "
            f"q, u, r, p {points}, so broadcasting would make a batch of shape {shape}; "
            f"t holds one time per point: pass t of shape {points} (or a scalar), or "
            "give q, u, r or p the extra dimensions explicitly for a grid")
    flat = {key: _rows(array, array.shape[:-1], shape, array.shape[-1])
            for key, array in arrays.items()}
    flat["t"] = _rows(t, t.shape, shape, None)
    # NaN and Inf are refused by the C (status NONFINITE_INPUT), so valid
    # batches are not scanned twice; diagnostics.raise_status then names the argument.
    return Batch(shape, flat)


def _batch_shape(shapes):
    """np.broadcast_shapes of the arguments' batch shapes; without NumPy's
    general rule where every shape is () or one and the same shape (the
    common call: a row per point, the rest shared), which costs microseconds."""
    distinct = set(shapes)
    distinct.discard(())
    if len(distinct) <= 1:
        return distinct.pop() if distinct else ()
    return np.broadcast_shapes(*shapes)


def _rows(array, own_shape, shape, length):
    """One row per point, or a single row when the value is shared: also
    a vector broadcast along the batch (np.broadcast_to: every batch
    stride 0), which is not copied into a row per point."""
    size = math.prod(own_shape)
    if size == 1 or size > 1 and all(
            stride == 0 for stride, extent in zip(array.strides, own_shape) if extent > 1):
        array = array[(0,) * len(own_shape)] if own_shape else array
        rows = array.reshape((1, length) if length is not None else (1,))
    elif own_shape == shape:        # a row per point already: no broadcast view
        rows = array.reshape((size, length) if length is not None else (size,))
    else:
        full = np.broadcast_to(array, shape + ((length,) if length is not None else ()))
        count = math.prod(shape)   # explicit: -1 is ambiguous for zero-length rows
        rows = full.reshape((count, length) if length is not None else (count,))
    return np.ascontiguousarray(rows, dtype=float)


def plain_number(value):
    """A Python int or float a C double holds (the single-point fast path)."""
    return isinstance(value, float) or (isinstance(value, int) and abs(value) < 1e308)


def numbers(model, value, label, what="an array of numbers"):
    """``value`` as a float array; InputError for what is not real numbers."""
    if isinstance(value, dict):
        raise InputError(f"{model.name}: {label} must be an array, not a dict")
    if value is None:
        raise InputError(f"{model.name}: {label} must be {what}, got None")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, OverflowError):   # e.g. ragged nested lists
        raise InputError(f"{model.name}: {label} must be {what}") from None
    # NumPy would keep only the real part of complex values (with a warning)
    # and would parse strings: refuse both
    if array.dtype.kind == "c" or (array.dtype.kind == "O" and any(
            isinstance(x, (complex, np.complexfloating)) for x in array.flat)):
        raise InputError(f"{model.name}: {label} holds complex values; it must be real")
    if array.dtype.kind == "O" and any(x is None for x in array.flat):
        raise InputError(f"{model.name}: {label} holds None; it must be {what}")
    if array.dtype.kind not in "biufO":
        raise InputError(f"{model.name}: {label} must be {what}, got dtype {array.dtype}")
    try:
        return np.asarray(array, dtype=float)
    except OverflowError:
        raise InputError(f"{model.name}: {label} holds a number too large for a double") from None
    except (TypeError, ValueError):
        raise InputError(f"{model.name}: {label} must be {what}") from None


def vector(model, value, length, label):
    """``value`` as a float array whose last axis has ``length`` entries."""
    array = numbers(model, value, label)
    if array.ndim == 0 or array.shape[-1] != length:
        raise InputError(f"{model.name}: {label} must have length {length} in its last "
                         f"dimension, got shape {array.shape}")
    return array


def parameter_vector(model, values):
    """The default parameter vector with the entries of ``values`` (a dict by
    name; a SymPy Symbol stands for its name) replaced."""
    p = model.default_parameters.copy()
    for key, value in values.items():
        # a SymPy Symbol stands for its name (without importing SymPy here)
        key = key if isinstance(key, str) else getattr(key, "name", key)
        try:
            index = model.p_names.index(key)
        except ValueError:
            raise InputError(f"{model.name}: unknown parameter {key!r}; "
                             f"parameters are {', '.join(model.p_names)}") from None
        if isinstance(value, (complex, np.complexfloating)):
            raise InputError(f"{model.name}: parameter {key!r} must be a real number, "
                             f"got {shown(value)}")
        try:
            p[index] = float(value)
        except (TypeError, ValueError, OverflowError):
            raise InputError(f"{model.name}: parameter {key!r} must be a number that fits "
                             f"a double, got {shown(value)}") from None
    return p


# -- the old order of complete and constraint_residuals -----------------------------------

_ABSENT = object()


def _last_axis(value):
    """The length of the last axis of an array-like; None for a scalar, a
    dict, None or what is not an array (the checks of the call explain)."""
    if value is None or isinstance(value, dict):
        return None
    try:
        shape = np.shape(value)
    except (TypeError, ValueError):
        return None
    return shape[-1] if shape else None


def accepts_old_order(method):
    """For ``complete`` and ``constraint_residuals``, which took ``(q, u, p,
    t)`` before every method took ``(q, u, r, p, t)``: a call that only the
    old order fits is read in it, with a DeprecationWarning. A third
    positional argument can be r where it is None or its last axis has nr
    entries, p where it is None, a dict or its last axis has np entries; a
    fourth can be p (None, a dict, np entries) or t (a number or an array).
    Where both orders fit, None third is r (the new order), and a vector
    that can be r and p (nr == np > 0) is refused: pass p by keyword."""
    function = method.__name__

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if 3 <= len(args) <= 4:
            args, kwargs = _read_order(self, function, args, kwargs)
        return method(self, *args, **kwargs)
    return wrapper


def _can_be_r(model, value):
    return value is None or _last_axis(value) == model.nr


def _can_be_p(model, value):
    return value is None or isinstance(value, dict) or _last_axis(value) == model.np


def _read_order(model, function, args, kwargs):
    """``(args, kwargs)`` of a call with 3 or 4 positional arguments, in the
    order (q, u, r, p, t)."""
    x = args[2]
    y = args[3] if len(args) == 4 else _ABSENT
    new = _can_be_r(model, x) and (y is _ABSENT or _can_be_p(model, y))
    old = (_can_be_p(model, x) and "p" not in kwargs
           and (y is _ABSENT or (y is not None and not isinstance(y, dict) and "t" not in kwargs)))
    if not old or (new and (x is None or (model.np == 0 and y is _ABSENT))):
        return args, kwargs        # (where both fit: None is r; or the same call either way)
    if new:
        raise InputError(
            f"{model.name}: {function}: the third positional argument can be the inputs r "
            f"(the order (q, u, r, p, t) of every method) or the parameters p (the old order "
            f"(q, u, p, t) of {function}): this model has as many inputs as parameters "
            f"({model.np}). Pass the parameters by keyword: {function}(q, u, p=..., t=...) "
            f"({function} does not use r: the constraints hold no inputs)")
    warnings.warn(DeprecationWarning(
        f"{model.name}: {function}(q, u, p, t) is the old order of its arguments: "
        f"{function} takes (q, u, r, p, t) like every other method (r, the inputs, is not "
        "used: the constraints hold none); pass the parameters by keyword, p=..., and the "
        "time as t=..."), stacklevel=outside_stacklevel())
    kwargs = dict(kwargs, p=x)
    if y is not _ABSENT:
        kwargs["t"] = y
    return args[:2], kwargs


# -- names and indices ------------------------------------------------------------------

def indices_of(model, given, names, label, *, count=None, indices=True, at_least_one=False,
               unknown=None, not_once=None):
    """Indices into ``names`` of ``given``: a name, an index (where
    ``indices``; in ``range(count)``, default ``len(names)``) or a list of
    them, each at most once (and at least one where ``at_least_one``);
    InputError otherwise. ``unknown(item)`` and ``not_once(given)`` word the
    messages where a caller needs its own words (else they say ``label``)."""
    count = len(names) if count is None else count
    if isinstance(given, (str, int, np.integer)):
        given = [given]
    else:
        given = list(given) if isinstance(given, (list, tuple)) else list(np.atleast_1d(given))
    found = []
    for item in given:
        if isinstance(item, str):
            item = str(item)   # a NumPy string prints as itself
            if item not in names:
                if unknown is not None:
                    raise InputError(f"{model.name}: {unknown(item)}")
                hint = (' (for the partition chosen at each point: "auto", in lower case)'
                        if item.lower() == AUTO and label.startswith("dependent") else "")
                raise InputError(f"{model.name}: {label}: unknown name {item!r}{hint}; names "
                                 f"are {', '.join(names)}")
            found.append(names.index(item))
        elif indices and isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            found.append(int(item))
        elif unknown is not None:
            raise InputError(f"{model.name}: {unknown(item)}")
        else:
            raise InputError(f"{model.name}: {label} must hold indices or names, got {item!r}")
    for item, i in zip(given, found):
        if not 0 <= i < count:
            if unknown is not None:
                raise InputError(f"{model.name}: {unknown(item)}")
            raise InputError(f"{model.name}: {label} index {i} is out of range 0..{count - 1}")
    if len(set(found)) != len(found) or (at_least_one and not found):
        if not_once is not None:
            raise InputError(f"{model.name}: {not_once(given)}")
        raise InputError(f"{model.name}: {label} repeats an index: {found}")
    return found


def _partition_facts(model, which):
    """(count, dependent count, names, keyword, default) of the coordinates
    (``which`` "q") or the speeds ("u")."""
    if which == "q":
        return model.nq, model.nc, model.q_names, "dependent_q", model.dependent_q
    return model.nu, model.nv, model.u_names, "dependent_u", model.dependent_u


def partition(model, given, which):
    """A given partition (names or indices) of the coordinates (``which``
    "q") or speeds ("u") as indices; None for None. ``"auto"`` is for calls
    at points (it depends on the point): refused."""
    if given is None:
        return None
    count, dependent_count, names, label, _ = _partition_facts(model, which)
    if isinstance(given, str) and given == AUTO:
        raise InputError(f"{model.name}: {label}=\"auto\" depends on the point: it is taken "
                         "by linearize, linearize_full and complete, whose results name the "
                         "partition chosen (.dependent_q, .dependent_u, .state_names)")
    found = indices_of(model, given, names, label, count=count)
    if len(found) != dependent_count:
        raise InputError(f"{model.name}: {label} needs {dependent_count} entries "
                         f"(one per constraint), got {len(found)}; where the constraint "
                         "Jacobian has lost rank no partition works: use linearize_local")
    return found


def kernel_partition(model, given, which):
    """The partition for the kernel: None for the model's default, also
    when given explicitly (in any order: the rows and columns of the
    results follow the model's order, not that of dependent_q), so the
    call takes the straight-line code of the default partition; AUTO for
    ``"auto"`` (chosen at each point); else an index array."""
    if isinstance(given, str) and given == AUTO:
        return AUTO
    found = partition(model, given, which)
    if found is None or sorted(found) == sorted(_partition_facts(model, which)[4]):
        return None
    return np.array(found, dtype=np.intc)


def kernel_partitions(model, dependent_q, dependent_u):
    """:func:`kernel_partition` of the coordinates and of the speeds."""
    if dependent_q is None and dependent_u is None:     # the common case, quickly
        return None, None
    return (kernel_partition(model, dependent_q, "q"),
            kernel_partition(model, dependent_u, "u"))


def batch_index(index, shape):
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
                         f"batch axis of the batch of shape {shape}), got {shown(index)}") from None
    if len(index) != len(shape) or not all(
            isinstance(i, (int, np.integer)) and not isinstance(i, bool) and -n <= i < n
            for i, n in zip(index, shape)):
        raise InputError(f"point index {index!r} is not an index into the batch of shape {shape}")
    return tuple(int(i) % n for i, n in zip(index, shape))


# -- numeric options -------------------------------------------------------------------

_REFUSED = object()


@dataclass(frozen=True)
class Option:
    """The values the numeric option ``name`` allows: from ``low`` to ``high`` (each
    excluded where ``*_open``), a whole number (``whole``: an int, not a
    float), finite unless ``infinite``; ``none``: the kernel's value for None
    (refused where _REFUSED). ``says``: what the message says it must be
    (a function of the model where it names a model's default)."""
    name: str
    says: object
    low: float = 0.0
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    whole: bool = False
    infinite: bool = False
    none: object = _REFUSED

    def allows(self, value):
        above = value > self.low if self.low_open else value >= self.low     # NaN: neither
        below = value < self.high if self.high_open else value <= self.high
        return above and below and (self.infinite or math.isfinite(value))


# the constraint tolerance of the linearizations (None: not checked, -1 for the kernel)
TOL = Option("tol", "a number >= 0 (None skips the check),", infinite=True, none=-1.0)
# Newton's tolerance (complete, equilibrium): needed
NEWTON_TOL = Option("tol", "a number >= 0,", infinite=True)
STEADY = Option("steady_tol", "a number >= 0 (relative to the largest rate of the chart's "
                "states), or None to skip the check;", none=-1.0)
RANK_TOL = Option("rank_tol", lambda model: "a number between 0 and 1 (relative to the largest "
                  f"singular value), or None for the default {model.RANK_RTOL:g};",
                  low_open=True, high=1.0, high_open=True, none=0.0)
MAX_STEP = Option("max_step", "a number > 0 (the largest change of an unknown in one "
                  "iteration), or None for no bound;", low_open=True, none=-1.0)
THREADS = Option("threads", f"a whole number from 1 to {kernel.MAX_THREADS} (a batch runs on at "
                 f"most as many threads as it has points, at most {kernel.CORES} at once here), "
                 "or None (all cores for large batches),", low=1, high=kernel.MAX_THREADS,
                 whole=True, none=None)
ITERATIONS = Option("max_iter", f"a whole number from 0 to {MAX_ITER},", high=MAX_ITER,
                    whole=True)


def option(model, value, rule):
    """``value`` of the option ``rule.name`` for the kernel (a float, or an
    int for a whole number; ``rule.none`` for None); InputError if ``rule``
    does not allow it."""
    if value is None:
        if rule.none is not _REFUSED:
            return rule.none
    elif rule.whole:
        if (isinstance(value, (int, np.integer)) and not isinstance(value, bool)
                and rule.allows(value)):
            return int(value)
    elif type(value) is float:          # the common case, quickly
        if rule.allows(value):
            return value
    elif not isinstance(value, (bool, np.bool_)):
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            number = math.nan
        if rule.allows(number):
            return number
    says = rule.says(model) if callable(rule.says) else rule.says
    raise InputError(f"{model.name}: {rule.name} must be {says} got {shown(value)}")
