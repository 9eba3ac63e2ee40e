"""Our module from Python: one ``linearize`` call per point, a batch in one call, and
``linearize_local`` against ``linearize`` on the same batch."""

from __future__ import annotations

import functools
import inspect
import os
import time

import numpy as np

from .common import NPOINTS, min_median
from .points import inputs_of


def unchecked(call):
    """``call`` without the steadiness check (the benchmark's points are
    deliberately moving; a module built before the check has none)."""
    try:
        checks = "steady_tol" in inspect.signature(call).parameters
    except (TypeError, ValueError):
        checks = False
    return functools.partial(call, steady_tol=None) if checks else call


def time_single_call(module, points, settings):
    """Seconds per ``module.linearize`` call with one point (min, median)."""
    rows = [(points.q[i], points.u[i], inputs_of(module, points.r[i]), points.p, float(points.t[i]))
            for i in range(len(points))]
    linearize = unchecked(module.linearize)
    for args in rows[:4]:
        linearize(*args)

    def loop(number):
        started = time.perf_counter()
        for k in range(number):
            linearize(*rows[k & (NPOINTS - 1)])
        return time.perf_counter() - started

    number = 16
    while loop(number) < settings.py_repeat_seconds and number < 1 << 24:
        number *= 2
    return min_median([loop(number) / number for _ in range(settings.py_repeats)])


def supports_threads(module):
    """Whether ``module.linearize`` takes ``threads=`` (batches split across cores)."""
    try:
        return "threads" in inspect.signature(module.linearize).parameters
    except (TypeError, ValueError):
        return False


def batch_threads(module):
    """Threads a large batch runs on by default (1 if the runtime does not split)."""
    if not supports_threads(module):
        return 1
    from ..runtime import kernel
    return int(getattr(kernel, "CORES", os.cpu_count() or 1))


def _batch_arguments(module, points, size):
    """(q, u, r, p, t) of a batch of ``size`` points cycling through ``points``."""
    reps = -(-size // len(points))
    q = np.tile(points.q, (reps, 1))[:size]
    u = np.tile(points.u, (reps, 1))[:size]
    r = np.tile(points.r, (reps, 1))[:size]
    t = np.tile(points.t, reps)[:size]
    return q, u, inputs_of(module, r), points.p, t


def time_batch(module, points, settings, threads=None):
    """Seconds per point of one ``module.linearize`` call on a batch (min, median);
    ``threads``: passed on when the runtime supports it (default: its default)."""
    size = settings.batch_size
    arguments = _batch_arguments(module, points, size)
    options = {"threads": threads} if threads is not None and supports_threads(module) else {}
    linearize = unchecked(module.linearize)
    linearize(*arguments, **options)
    samples = []
    for _ in range(settings.batch_repeats):
        started = time.perf_counter()
        linearize(*arguments, **options)
        samples.append((time.perf_counter() - started) / size)
    return min_median(samples)


def time_calls(calls, points, settings, repeats=None):
    """Seconds per point of each of ``calls`` (module methods taking (q, u, r,
    p, t, threads=...)) on the same batch, one thread, alternating call by
    call (so all see the same machine speed), ``repeats`` rounds (default
    twice the batch repeats): a (min, median) for each."""
    size = settings.batch_size
    arguments = _batch_arguments(calls[0].__self__, points, size)
    calls = [unchecked(call) for call in calls]
    samples = [[] for _ in calls]
    for call in calls:
        call(*arguments, threads=1)
    for _ in range(2 * settings.batch_repeats if repeats is None else repeats):
        for call, times in zip(calls, samples):
            started = time.perf_counter()
            call(*arguments, threads=1)
            times.append((time.perf_counter() - started) / size)
    return [min_median(times) for times in samples]


def time_local_and_linearize(module, points, settings):
    """Seconds per point of ``linearize_local`` and of ``linearize`` on the same
    batch, one thread, alternating call by call (so both see the same machine
    speed): ((min, median) of linearize_local, (min, median) of linearize);
    None for a module built before linearize_local existed."""
    local = getattr(module, "linearize_local", None)
    if local is None:
        return None
    local_times, linearize_times = time_calls([local, module.linearize], points, settings,
                                              repeats=settings.batch_repeats)
    return local_times, linearize_times
