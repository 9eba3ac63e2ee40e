"""What a failed or doubtful call tells its caller.

A kernel reports a status code and the index of the first failing point. Here
it becomes an exception of :mod:`codegen.errors` that names the model, the
batch index and the cause in the user's terms: the constraint violated and by
how much, the blocks holding NaN or Inf, the dependent coordinates whose block
is singular, or the rank the constraint Jacobian lost (a singular
configuration). Results that are computed but at risk come with a warning:
:class:`~codegen.errors.IllConditionedWarning`,
:class:`~codegen.errors.MultipleRootWarning`,
:class:`~codegen.errors.NotSteadyWarning`.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import types
import warnings

import numpy as np

from .. import errors
from ..errors import (EvaluationError, IllConditionedWarning, InputError, MultipleRootWarning,
                      NotSteadyWarning)
from ..status import STATUSES
from . import kernel
from .kernel import (CONFIGURATION_CONSTRAINT, NO_CONVERGENCE, NO_PROGRESS, NONFINITE_INPUT,
                     NONFINITE_RESULT, RANK_DEFICIENT, SINGULAR_CONFIGURATION_PARTITION,
                     SINGULAR_M_UU, SINGULAR_VELOCITY_PARTITION, VELOCITY_CONSTRAINT)

# the exception of each failing status (the table is codegen/status.py)
EXCEPTIONS = {s.code: getattr(errors, s.exception) for s in STATUSES if s.exception}

# the blocks named in messages about NaN or Inf, for people
BLOCK_DESCRIPTIONS = {
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

# a constraint Jacobian of full rank whose smallest singular value is below
# this (relative) makes the speed mass matrix (whose condition grows like its
# square) singular to working precision: a point near a singular
# configuration, named as such in the error
NEAR_RANK_RTOL = 1e-6

# complete() warns of a multiple root when the condition estimate of J_c P_qd
# at the converged point exceeds MULTIPLE_ROOT / sqrt(tol): at a double root
# of f_c, Newton's method stops about sqrt(tol) from it, where the block's
# smallest pivot is about sqrt(tol) (relative), so the estimate is of order
# 1/sqrt(tol); at a simple root it stays of order one.
MULTIPLE_ROOT = 1e-2

LOCAL_HINT = ("use linearize_local(q, u, ...), the local state-space form, which "
              "linearizes such points (more states, minimum-norm multipliers), or "
              "linearize_descriptor")

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


# -- words -------------------------------------------------------------------------------

def shown(value):
    """repr for a message, cut short (an int of 400 digits is not read)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:30] + "..."


def estimate(value):
    """A condition estimate for a message; the C reports a zero pivot as
    infinite or as the largest double."""
    return f"{value:.2e}" if value < 1e300 else "infinite: the block is singular"


def batch_position(batch, index):
    """The batch index (a tuple) of flat point ``index``."""
    return tuple(int(i) for i in np.unravel_index(index, batch.shape))


# the batch of a single-point call (a point of no batch axes), for the warnings
ONE_POINT = types.SimpleNamespace(shape=(), size=1)


def outside_stacklevel():
    """The ``stacklevel`` of ``warnings.warn`` (called by the caller of this
    function) that points at the first frame outside this package: the
    user's call, however deep inside the runtime the warning is raised."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None:
        name = frame.f_code.co_filename
        inside = _INSIDE.get(name)
        if inside is None:
            inside = _INSIDE[name] = os.path.dirname(name) == _PACKAGE_DIR
        if not inside:
            break
        frame = frame.f_back
        level += 1
    return level


# file name -> whether it is one of this package's (outside_stacklevel, on every warning)
_INSIDE = {}


def explain_memory(method=None, *, name=None):
    """A batch too large for memory raises InputError saying so (NumPy's
    MemoryError names the size), not a bare MemoryError. ``name``: the
    method the message names (default: the decorated one; for a method's
    batch path, which the method calls)."""
    if method is None:
        return functools.partial(explain_memory, name=name)
    called = name or method.__name__

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except MemoryError as error:
            raise InputError(
                f"{self.name}: {called}: the batch does not fit in memory ({error}); "
                "split it into smaller batches, e.g. over the blocks of a dask.array "
                "(README, Batches)") from None
    return wrapper


# -- partitions in messages -----------------------------------------------------------------

def point_partition(indices, index):
    """The partition point ``index`` used: a row of a per-point array, or the shared one."""
    if indices is None or isinstance(indices, np.ndarray) and indices.ndim == 1:
        return indices
    return indices[index]


def dependent_names(model, indices, index, which):
    """Names of the dependent coordinates (``which`` "q") or speeds ("u") point
    ``index`` used (``indices``: per point, shared, or None: the default)."""
    indices = point_partition(indices, index)
    if indices is None:
        indices = model.dependent_q if which == "q" else model.dependent_u
    names = model.q_names if which == "q" else model.u_names
    return [names[i] for i in sorted(int(i) for i in indices)]



def partition_chart(model, dependent_q, dependent_u, index):
    """(state names, description) of the partition's chart point ``index``
    used (``dependent_q``, ``dependent_u``: per point, shared, or None)."""
    if dependent_q is None and dependent_u is None:
        known = getattr(model, "_default_chart", None)   # the default's: formed on loading
        if known is not None:
            return known
    dq = dependent_names(model, dependent_q, index, "q")
    du = dependent_names(model, dependent_u, index, "u")
    names = model.independent_state_names(dq, du)
    return names, (f"the partition with dependent coordinates {dq} and speeds {du}, "
                   f"states {', '.join(names)}")

# -- status -> exception -----------------------------------------------------------------

def raise_status(model, status, index, batch, dependent_q=None, dependent_u=None, tol=None,
                 detail="", blocks=None, partitioned=True):
    """Raise the exception for a call that failed at batch point ``index``;
    ``detail`` follows the message and the index; ``blocks``: the blocks the
    call evaluates, when not all (named if they hold NaN or Inf).
    ``partitioned``: the call used a partition, so a singular matrix may come
    from a rank-deficient constraint Jacobian (said so, pointing to
    linearize_local); False for the calls that handle rank deficiency."""
    if kernel.cancelled(model._kernel, status):   # another thread saw Ctrl-C
        raise KeyboardInterrupt
    if status == NONFINITE_INPUT:
        error = nonfinite_argument(model, batch)
        if error is not None:
            raise error
    where = f" at batch index {batch_position(batch, index)}" if batch.shape else ""
    message = kernel.status_message(model._kernel, status)
    dq = model.dependent_q if dependent_q is None else tuple(dependent_q)
    du = model.dependent_u if dependent_u is None else tuple(dependent_u)
    hint = ""
    if status in (CONFIGURATION_CONSTRAINT, VELOCITY_CONSTRAINT):
        message += _violation(model, status, batch.row(index), tol)
        hint = _parameter_hint(model, batch.row(index)["p"])
    elif status == NONFINITE_RESULT:
        message += _nonfinite_blocks(model, batch.row(index), blocks)
    elif status == SINGULAR_CONFIGURATION_PARTITION:
        message = (f"the constraint Jacobian block J_c P_qd (d f_c/d q in the columns of the "
                   f"dependent coordinates {[model.q_names[i] for i in dq]}) is singular; "
                   "choose other dependent coordinates (dependent_q=..., or "
                   "dependent_q=\"auto\" to choose them at each point)")
    elif status == SINGULAR_VELOCITY_PARTITION:
        message = (f"the constraint Jacobian block B_v P_ud (d f_v/d u in the columns of the "
                   f"dependent speeds {[model.u_names[i] for i in du]}) is singular; "
                   "choose other dependent speeds (dependent_u=..., or "
                   "dependent_u=\"auto\" to choose them at each point)")
    if partitioned and status in (SINGULAR_CONFIGURATION_PARTITION,
                                  SINGULAR_VELOCITY_PARTITION, SINGULAR_M_UU, RANK_DEFICIENT):
        # a rank-deficient constraint Jacobian makes every partition block
        # and the multiplier form's speed mass matrix singular: name the cause
        message = rank_deficiency(model, batch.row(index),
                                  near=status == SINGULAR_M_UU) or message
    raise EXCEPTIONS.get(status, EvaluationError)(f"{model.name}: {message}{where}{detail}{hint}")


def nonfinite_argument(model, batch, keys=None):
    """InputError naming the first argument (of ``keys``, default all) that
    holds NaN or Inf, and its batch index; None if every one is finite."""
    for key, array in batch.arrays.items():
        if keys is not None and key not in keys:
            continue
        if not np.all(np.isfinite(array)):
            bad = np.argwhere(~np.isfinite(array.reshape(array.shape[0], -1)))[0][0]
            position = batch_position(batch, bad) if batch.shape else ()
            where = f" at batch index {position}" if array.shape[0] > 1 else ""
            return InputError(f"{model.name}: {key} holds a non-finite value{where}")
    return None


def _parameter_hint(model, p):
    """Why a point may violate the constraints: it was made for other
    parameters (e.g. the README's p={"r": 0.3} at a point made for r = 1)."""
    changed = [f"{n} = {v:g}" for n, v, d in zip(model.p_names, p, model.default_parameters)
               if v != d]
    if not changed:
        return ""
    return (f"; the parameters differ from the defaults ({', '.join(changed)}): a point made "
            "for other parameter values is off the constraints, so make it for these: "
            "codegen.operating_point(..., parameters={...}) for a built-in model, or "
            "complete(q, u, p=...) to project it onto the constraints")


def _violation(model, status, point, tol):
    f_c, f_v = kernel.constraint_residuals_at(model._kernel, point)
    if status == CONFIGURATION_CONSTRAINT:
        k = int(np.argmax(np.abs(f_c)))
        return f": f_c[{k}] = {f_c[k]:.3e} (tol {tol:g})"
    k = int(np.argmax(np.abs(f_v)))
    return f": f_v[{k}] = {f_v[k]:.3e} (tol {tol:g})"


def _nonfinite_blocks(model, point, blocks=None):
    """Which evaluated blocks hold NaN or Inf at the point (the kernel of a
    module built by an older codegen cannot say)."""
    names = kernel.nonfinite_blocks(model._kernel, point)
    if names is None:
        return ""
    names = [n for n in names if blocks is None or n in blocks]
    if not names:
        return ""
    return "; NaN or Inf in " + ", ".join(BLOCK_DESCRIPTIONS.get(n, n) for n in names)


def rank_deficiency(model, point, near=False):
    """Message saying that J_c or B_v lost rank at the point (a singular
    configuration: no partition works), or (``near``: the speed mass matrix
    was found singular) that one is so close to it that the speed mass
    matrix is singular to working precision; "" otherwise."""
    # the C's SVDs: its singular values, ranks and left singular vectors
    svds = kernel.constraint_rank(model._kernel, point, model.RANK_RTOL)
    if svds is None:    # J_c or B_v is not finite here
        return ""
    ranks, sigma_c, sigma_v, U_c, U_v = svds
    deficient, close = [], []
    for label, values, left, rank, rows_label in (
            ("J_c = d f_c/d q", sigma_c, U_c, int(ranks[0]), "f_c"),
            ("B_v = d f_v/d u", sigma_v, U_v, int(ranks[1]), "f_v")):
        count = len(values)
        if count == 0:
            continue
        scale = values[0]
        if rank == count and (not near or values[-1] >= NEAR_RANK_RTOL * scale):
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
                + LOCAL_HINT)
    if close:
        return ("the speed mass matrix [M_uuc; M_uud] is singular to working precision: "
                + "; ".join(close) + ", so the point is near a singular configuration, and "
                "the speed mass matrix's condition is about the square of that ratio; "
                + LOCAL_HINT)
    return ""


def complete_detail(model, status, index, batch, out, tol, max_iter):
    """What follows the message of a failed complete: |f_c| at Newton's last
    iterate (``out.q``, ``out.u`` hold it at the failing point), and what to try."""
    if status != NO_CONVERGENCE:
        return ""
    f_c, _ = kernel.constraint_residuals_at(
        model._kernel, {**batch.row(index), "q": out.q[index], "u": out.u[index]})
    return (f": |f_c|_inf = {np.max(np.abs(f_c)):.3e} after {max_iter} iterations "
            f"(tol {float(tol):g}); start nearer a solution, choose other dependent "
            "coordinates (dependent_q=...), or check that the constraints can be met")


def equilibrium_detail(model, status, index, batch, out, tol, vary_u):
    """What follows the message of a failed equilibrium: max|R|, the
    iterations, and what to try; that the held speeds cannot meet the
    velocity constraints where they are what is left of R."""
    if status not in (NO_CONVERGENCE, NO_PROGRESS):
        return ""
    residual, initial = out.residual[index], out.initial[index]
    count = int(out.iterations[index])
    what = (f": max|R| = {residual:.3e} after {count} iteration{'s' * (count != 1)} "
            f"(tol {float(tol):g}; R = [f_c, f_v, the independent accelerations])")
    f_c, f_v = kernel.constraint_residuals_at(
        model._kernel, {**batch.row(index), "q": out.q[index], "u": out.u[index]})
    held = vary_u is None or not np.any(vary_u)
    if f_v.size and np.abs(f_v).max() > float(tol) and np.abs(f_v).max() >= 0.5 * residual:
        k = int(np.argmax(np.abs(f_v)))
        speeds = "the speeds held" if held else "the speeds held and those free"
        return (f"{what}; {speeds} cannot meet the velocity constraints (f_v[{k}] = "
                f"{f_v[k]:.3e} at the last iterate): give speeds that satisfy them with the "
                "coordinates of the equilibrium (complete(q, u) makes the dependent ones), "
                "or let the dependent speeds vary (free_speeds=[...])")
    if status == NO_PROGRESS and residual <= 1e-8 * initial:
        return (f"{what}, and the residual stopped decreasing there, {initial:.1e} at "
                "the guess: about the rounding level of these equations at this point, so "
                f"the point is an equilibrium to working precision; ask for tol of about "
                f"{10 * residual:.0e} or more")
    if status == NO_PROGRESS:
        return (f"{what}, and the residual stopped decreasing: no equilibrium near the guess "
                "in these unknowns (a least-squares minimum that is no solution: too many "
                "coordinates held with fixed=..., speeds held that no steady motion has, or "
                "parameters without an equilibrium here); start from another guess or free "
                "more unknowns")
    return (f"{what}; start nearer an equilibrium, allow more iterations (max_iter), hold "
            "coordinates with fixed=..., give the speeds of a steady motion (or let some "
            "vary: free_speeds=...), or check that an equilibrium exists for these parameters")


def singular_values_failed(model, status, index):
    """The error of a batch of singular values that failed (at points that
    linearize_local accepted)."""
    return EvaluationError(f"singular values of J_c and B_v at point {index}: "
                           f"{kernel.status_message(model._kernel, status)}")


# -- warnings -----------------------------------------------------------------------------

def worst_condition(condition, limit, batch):
    """The worst condition estimate (``condition``: one row per point, a
    column per partition block; NaN: not known, counted as infinite) if it
    exceeds ``limit``: (point index, block column, estimate, where-text
    naming how many points exceed it and the worst's batch index), else None."""
    if condition.size == 0:
        return None
    # a batch of well-conditioned points (the common case) in one pass over it
    # (a NaN makes the maximum NaN, which fails the comparison)
    if condition.max() <= limit:
        return None
    worst = np.nan_to_num(condition, nan=np.inf) if np.isnan(condition).any() else condition
    index, which = divmod(int(np.argmax(worst)), worst.shape[1])
    value = worst[index, which]
    if value <= limit:
        return None
    where = ""
    if batch.shape:
        count = int(np.sum(np.any(worst > limit, axis=1)))
        where = (f" at {count} of {batch.size} points (worst at batch index "
                 f"{batch_position(batch, index)})")
    return index, which, value, where


def warn_conditioning(model, condition, batch, dependent_q, dependent_u):
    """IllConditionedWarning if a partition block's condition estimate
    (``condition``: one row [J_c P_qd, B_v P_ud] per point) exceeds
    ``model.ill_conditioned``, naming the worst point and how many digits are
    at risk: between log10 and 2 log10 of the estimate (the multiplier form's
    speed-level solve can square it: the four-bar near its flat configuration
    loses 2 log10, a pendulum near horizontal nothing)."""
    found = worst_condition(condition, model.ill_conditioned, batch)
    if found is None:
        return
    index, which, value, where = found
    if which == 0:
        dependent, block = dependent_names(model, dependent_q, index, "q"), "J_c P_qd"
        what, keyword = "dependent coordinates", "dependent_q"
    else:
        dependent, block = dependent_names(model, dependent_u, index, "u"), "B_v P_ud"
        what, keyword = "dependent speeds", "dependent_u"
    digits = (f"{min(16.0, math.log10(value)):.0f} to {min(16.0, 2 * math.log10(value)):.0f}"
              if value < 1e300 else "all")
    warnings.warn(IllConditionedWarning(
        f"{model.name}: the partition block {block} ({what} {dependent}) is ill-conditioned"
        f"{where}: condition estimate {estimate(value)}, so {digits} of the ~16 significant digits "
        f"of the result are at risk; near a singular configuration of this partition. "
        f"Choose better-conditioned {what} ({keyword}=\"auto\" picks them at each point) or "
        "use linearize_local (no partition)"), stacklevel=outside_stacklevel())


def warn_multiple_root(model, condition, batch, dependent_q, tol):
    """MultipleRootWarning where complete() stopped at a multiple root of
    f_c: J_c P_qd's condition estimate above MULTIPLE_ROOT / sqrt(tol)."""
    if model.nc == 0:
        return
    limit = MULTIPLE_ROOT / math.sqrt(max(float(tol), 1e-300))
    found = worst_condition(condition.reshape(-1, 1), limit, batch)
    if found is None:
        return
    index, _, value, where = found
    warnings.warn(MultipleRootWarning(
        f"{model.name}: complete converged{where} where J_c P_qd (dependent coordinates "
        f"{dependent_names(model, dependent_q, index, 'q')}) is nearly singular (condition "
        f"estimate {estimate(value)}): a multiple "
        f"root of f_c, or a point near a singular configuration, where Newton's method "
        f"stops about sqrt(tol) = {math.sqrt(float(tol)):.1e} from the root, so the "
        "dependent coordinates are only that accurate. Check the configuration (a singular "
        "one? linearize_local handles those) or choose other dependent coordinates "
        "(dependent_q=\"auto\")"), stacklevel=outside_stacklevel())


def warn_not_steady(model, unsteady, batch, what, names_of):
    """NotSteadyWarning where a point is not steady in its chart.
    ``unsteady``: one row of state flags per point; ``names_of(index)``:
    the names of point ``index``'s chart states and the chart's description."""
    if unsteady is None or unsteady.size == 0:
        return
    where = ""
    if batch.shape:
        from .results import flagged_rows   # here: results imports arguments, which imports this

        points = flagged_rows(unsteady)   # the points with a flag
        if not points.size:
            return
        index = int(points[0])
        where = (f" at {points.size} of {batch.size} points (first at batch index "
                 f"{batch_position(batch, index)})")
    else:                   # one point (a single call): a few flags, no NumPy reductions
        index = 0
    flags = unsteady[index].tolist()
    if not any(flags):
        return
    names, chart = names_of(index)
    flagged = [names[j] for j, flag in enumerate(flags) if flag and j < len(names)]
    warnings.warn(NotSteadyWarning(
        f"{model.name}: the point is not steady in the chart of {what} ({chart}){where}: "
        f"{', '.join(flagged)} {'changes' if len(flagged) == 1 else 'change'} along the "
        "motion, so A is linearized about a point that moves in this chart, and its "
        "eigenvalues depend on the chart and do not describe stability. A steady motion is "
        "steady in a chart whose states it keeps constant (for a rolling wheel, the model's "
        "partition with rates in the leaning frame); steady_tol=None skips this check"),
        stacklevel=outside_stacklevel())
