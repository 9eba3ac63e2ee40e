"""Settings of a benchmark run and the small helpers every part of it uses."""

from __future__ import annotations

import math
import os
import platform
import signal
import statistics
import subprocess
import time
from dataclasses import dataclass

import numpy as np

NPOINTS = 64            # distinct points the loops cycle through (a power of two)
DISAGREE = 1e-6         # a route "disagrees" beyond this, relative to max(1, max|A|)
BATCH_SIZE = 10_000


@dataclass
class Settings:
    """Repetition counts and limits; ``Settings.quick()`` for CI and smoke runs."""

    c_repeats: int = 15            # repeats of the C loop (each ~c_repeat_seconds)
    c_repeat_seconds: float = 0.02
    py_repeats: int = 7            # repeats of the single Python call loop
    py_repeat_seconds: float = 0.05
    batch_size: int = BATCH_SIZE
    batch_repeats: int = 7
    linearizer_repeats: int = 5    # numeric Linearizer calls timed (after one warm-up)
    lambdified_repeats: int = 5
    lambdified_repeat_seconds: float = 0.1
    sympy_limit: float = 300.0     # seconds per SymPy route (after the model is formed)
    casadi_limit: float = 300.0    # seconds for CasADi's generation, and for its compilation
    casadi: bool = True
    sympy: bool = True
    sensitivities: bool = True     # the sensitivities' rows (two more builds of the model)
    sympy_routes: tuple = ("linearizer", "symbolic_AB", "symbolic_MAB", "finite_differences")
    seed: int = 0
    work_dir: str | None = None    # keep builds and C files here (default: a temporary dir)

    def __post_init__(self):
        for name in ("c_repeats", "py_repeats", "batch_size", "batch_repeats",
                     "linearizer_repeats", "lambdified_repeats"):
            check_count(getattr(self, name), name)
        for name in ("c_repeat_seconds", "py_repeat_seconds", "lambdified_repeat_seconds",
                     "sympy_limit", "casadi_limit"):
            check_seconds(getattr(self, name), name)

    @classmethod
    def quick(cls, **changes):
        values = dict(c_repeats=5, c_repeat_seconds=0.003, py_repeats=3, py_repeat_seconds=0.01,
                      batch_repeats=3, linearizer_repeats=1, lambdified_repeats=2,
                      lambdified_repeat_seconds=0.02)
        values.update(changes)
        return cls(**values)


def check_count(value, name):
    """Refuse a repeat count or size that is not a whole number >= 1 (InputError)."""
    from ..errors import InputError
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InputError(f"{name} must be a whole number >= 1, got {value!r}")


def check_seconds(value, name):
    """Refuse a duration or time limit that is not a finite number of seconds > 0 (InputError)."""
    from ..errors import InputError
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not (math.isfinite(value) and value > 0):
        raise InputError(f"{name} must be a finite number of seconds > 0, got {value!r}")


def say(progress, message):
    """Pass ``message`` to the progress callback, if there is one."""
    if progress:
        progress(message)


def min_median(samples):
    samples = [s for s in samples if s is not None]
    if not samples:
        return None, None
    return min(samples), statistics.median(samples)


def max_abs_diff(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        return float("nan")
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a - b)))


def kill_group(process):
    """Kill a process started with ``start_new_session=True`` and its children."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_limited(command, cwd, timeout):
    """Run ``command``; returns (seconds, CompletedProcess) or (None, None) if it
    ran past ``timeout`` (then its whole process group is killed: gcc's cc1 too)."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(process)
        process.communicate()
        return None, None
    seconds = time.perf_counter() - started
    result = subprocess.CompletedProcess(command, process.returncode, out, err)
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, command))} failed:\n{out}{err}")
    return seconds, result


def c_flags():
    """The compiler and flags of the pipeline for the model's own C."""
    from ..compile import C_STANDARD_FLAGS, OPTIMIZATION_FLAGS, compiler
    return compiler(), [*OPTIMIZATION_FLAGS, *C_STANDARD_FLAGS]


def system_line():
    """The machine, compiler, flags and BLAS threads, in one line."""
    cc, flags = c_flags()
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout.splitlines()[0]
    except Exception:
        version = cc
    try:
        load = "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        load = ""
    blas = os.environ.get("OPENBLAS_NUM_THREADS")
    return (f"{platform.machine()}, {os.cpu_count()} cores" + (f" ({load})" if load else "") +
            f"; {version}; flags {' '.join(flags)}; Python {platform.python_version()}" +
            (f"; OPENBLAS_NUM_THREADS={blas}" if blas else "; BLAS threads not pinned (their idle "
             "spinning can slow one-thread timings)"))
