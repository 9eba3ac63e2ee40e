"""The bare C loop: a timing driver (templates/bench_driver.c.jinja) compiled
with the pipeline's compiler and flags, linked with our model's object and
optionally CasADi's, run, and its printed results read back."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .common import c_flags, run_limited


def driver_source(name, points, casadi_name=None, tol=1e-8):
    """C source of the timing driver for model ``name`` over ``points``."""
    from ..emit import environment

    assert len(points) & (len(points) - 1) == 0, "NPOINTS must be a power of two"

    def numbers(values):
        return [repr(float(v)) for v in values]

    return environment().get_template("bench_driver.c.jinja").render(
        name=name, casadi=casadi_name or f"{name}_casadi", npoints=len(points),
        tol=repr(float(tol)), t=numbers(points.t), p=numbers(points.p),
        q=[numbers(row) for row in points.q], u=[numbers(row) for row in points.u],
        r=[numbers(row) for row in points.r])


@dataclass
class CResult:
    ours: tuple                    # (min, median) nanoseconds per call, with the constraint check
    ours_nocheck: tuple            # tol < 0: no check of f_c, f_v at the point
    casadi: tuple | None
    iterations: int
    A: np.ndarray
    B: np.ndarray
    A_casadi: np.ndarray | None = None
    B_casadi: np.ndarray | None = None
    batch: tuple | None = None     # <name>_linearize_batch over the points, per point
    A_batch: np.ndarray | None = None
    casadi_map: tuple | None = None


def lane_objects(c_dir, name):
    """Compile the model's C with the lane code beside it, as the pipeline
    does (the lane target of this machine): ``(objects, defines)``; the
    model's object alone (and no defines) where it has no lane code."""
    from ..compile import C_STANDARD_FLAGS, dense_defines, lane_target

    cc, flags = c_flags()
    c_dir = Path(c_dir)
    target = lane_target()
    if target.name == "off" or not (c_dir / f"{name}_lanes.c").exists():
        compile_object(c_dir / f"{name}.c", c_dir, model=True)
        return [c_dir / f"{name}.o"], []
    defines = target.defines(name)
    run_limited([cc, *flags, *defines, *dense_defines(name), "-c", f"{name}.c", "-o", f"{name}.o"], c_dir, None)
    run_limited([cc, *target.flags, *C_STANDARD_FLAGS, *defines, f"-D{name.upper()}_LANES_SIMD", "-c",
                 f"{name}_lanes.c", "-o", f"{name}_lanes.o"], c_dir, None)
    return [c_dir / f"{name}.o", c_dir / f"{name}_lanes.o"], defines


def compile_object(source, work, timeout=None, model=False):
    """``cc <pipeline flags> -c source``: (seconds or None on timeout, object
    path); ``model``: the source is a model's C, compiled with the defines
    the Python module's build gives it (codegen.compile.dense_defines)."""
    from ..compile import dense_defines

    cc, flags = c_flags()
    source = Path(source)
    obj = source.with_suffix(".o")
    defines = dense_defines(source.stem) if model else []
    seconds, _ = run_limited([cc, *flags, *defines, "-c", source.name, "-o", obj.name], work, timeout)
    return seconds, obj


def _parse(stdout):
    """The driver's lines ``A ours 1 2 ...``, ``time casadi 3 4``, ``iterations n``."""
    values = {}
    for line in stdout.splitlines():
        key, _, rest = line.partition(" ")
        if key in ("A", "B", "time", "status"):
            label, _, numbers = rest.partition(" ")
            values[(key, label)] = [float(v) for v in numbers.split()]
        elif key == "iterations":
            values["iterations"] = int(rest)
    for key in (("status", "ours"), ("status", "loop"), ("status", "casadi"), ("status", "batch"),
                ("status", "casadi_map")):
        if key in values and values[key][0] != 0:
            raise RuntimeError(f"C driver: {key[1]} returned status {values[key][0]:g}")
    return values


def compile_c_driver(work, name, points, objects, casadi_name=None, lanes=None):
    """Write and compile the timing driver; ``objects``: compiled model(s);
    ``lanes``: the lane defines of the objects (then the batch is timed too,
    and CasADi's map beside CasADi's function). Returns the executable."""
    cc, flags = c_flags()
    work = Path(work)
    driver = work / f"bench_{name}.c"
    driver.write_text(driver_source(name, points, casadi_name))
    defines = ["-DWITH_CASADI=1", "-DWITH_CASADI_MAP=1"] if casadi_name else []
    if lanes:
        defines += ["-DWITH_LANES=1", *lanes]
    exe = work / f"bench_{name}"
    run_limited([cc, *flags, *defines, "-Wno-unused-parameter", "-c", driver.name, "-o",
                 f"bench_{name}.o"], work, None)
    run_limited([cc, f"bench_{name}.o", *[Path(o).name for o in objects], "-o", exe.name, "-lm"],
                work, None)
    return exe


def run_compiled_driver(exe, settings, nx=None, nr=None):
    """Run a driver of :func:`compile_c_driver` once: a CResult."""
    _, result = run_limited([str(exe), str(settings.c_repeats), str(settings.c_repeat_seconds)],
                            Path(exe).parent, None)
    values = _parse(result.stdout)

    def matrix(key, rows, cols):
        data = values.get(key)
        return None if data is None else np.array(data).reshape(rows, cols)

    return CResult(
        ours=tuple(values[("time", "ours")]), ours_nocheck=tuple(values[("time", "ours_nocheck")]),
        casadi=tuple(values[("time", "casadi")]) if ("time", "casadi") in values else None,
        iterations=values["iterations"],
        A=matrix(("A", "ours"), nx, nx), B=matrix(("B", "ours"), nx, nr),
        A_casadi=matrix(("A", "casadi"), nx, nx), B_casadi=matrix(("B", "casadi"), nx, nr),
        batch=tuple(values[("time", "batch")]) if ("time", "batch") in values else None,
        A_batch=matrix(("A", "batch"), nx, nx),
        casadi_map=tuple(values[("time", "casadi_map")]) if ("time", "casadi_map") in values else None)


def run_c_driver(work, name, points, settings, objects, casadi_name=None, nx=None, nr=None,
                 lanes=None):
    """Write, compile and run the timing driver once (:func:`compile_c_driver`,
    :func:`run_compiled_driver`): a CResult."""
    exe = compile_c_driver(work, name, points, objects, casadi_name, lanes)
    return run_compiled_driver(exe, settings, nx, nr)


def c_loop_seconds(result):
    """(min, median) of a CResult's ``ours`` in seconds (the driver prints ns)."""
    return tuple(v * 1e-9 for v in result.ours)


PEAK_SOURCE = r"""
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <time.h>
#define W 8
#define K 16
static double acc[K][W], m[W], a[W];
static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}
int main(void)
{
    long i, n = 2000000;
    int j, k, rep;
    double best = 0.0, sum = 0.0;
    for (k = 0; k < W; ++k) {
        m[k] = 0.9999999 + 1e-9 * k;
        a[k] = 1e-9 * k;
        for (j = 0; j < K; ++j) acc[j][k] = 1.0 + 0.01 * j + 0.001 * k;
    }
    for (rep = 0; rep < 5; ++rep) {
        double start = now_ns(), flops;
        for (i = 0; i < n; ++i)
            for (j = 0; j < K; ++j) {
#pragma omp simd
                for (k = 0; k < W; ++k) acc[j][k] = acc[j][k] * m[k] + a[k];
            }
        flops = 2.0 * n * K * W / (now_ns() - start);
        if (flops > best) best = flops;
    }
    for (j = 0; j < K; ++j) for (k = 0; k < W; ++k) sum += acc[j][k];
    printf("%.6g %g\n", best, sum);
    return 0;
}
"""


def vector_peak(work):
    """Multiplications and additions per nanosecond this core sustains in
    the lane code's instructions (separate multiply and add, as the lane code
    computes: -ffp-contract=off), measured: (flops per ns, flags)."""
    from ..compile import C_STANDARD_FLAGS, lane_target

    cc, _ = c_flags()
    work = Path(work)
    (work / "peak.c").write_text(PEAK_SOURCE)
    flags = [*lane_target().flags, *C_STANDARD_FLAGS]
    run_limited([cc, *flags, "peak.c", "-o", "peak"], work, None)
    _, result = run_limited([str(work / "peak")], work, None)
    return float(result.stdout.split()[0]), flags
