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


def compile_object(source, work, timeout=None):
    """``cc <pipeline flags> -c source``: (seconds or None on timeout, object path)."""
    cc, flags = c_flags()
    source = Path(source)
    obj = source.with_suffix(".o")
    seconds, _ = run_limited([cc, *flags, "-c", source.name, "-o", obj.name], work, timeout)
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
    for key in (("status", "ours"), ("status", "loop"), ("status", "casadi")):
        if key in values and values[key][0] != 0:
            raise RuntimeError(f"C driver: {key[1]} returned status {values[key][0]:g}")
    return values


def run_c_driver(work, name, points, settings, objects, casadi_name=None, nx=None, nr=None):
    """Write, compile and run the timing driver; ``objects``: compiled model(s)."""
    cc, flags = c_flags()
    work = Path(work)
    driver = work / f"bench_{name}.c"
    driver.write_text(driver_source(name, points, casadi_name))
    defines = ["-DWITH_CASADI=1"] if casadi_name else []
    exe = work / f"bench_{name}"
    run_limited([cc, *flags, *defines, "-Wno-unused-parameter", "-c", driver.name, "-o",
                 f"bench_{name}.o"], work, None)
    run_limited([cc, f"bench_{name}.o", *[Path(o).name for o in objects], "-o", exe.name, "-lm"],
                work, None)
    _, result = run_limited([str(exe), str(settings.c_repeats), str(settings.c_repeat_seconds)],
                            work, None)
    values = _parse(result.stdout)

    def matrix(key, rows, cols):
        data = values.get(key)
        return None if data is None else np.array(data).reshape(rows, cols)

    return CResult(
        ours=tuple(values[("time", "ours")]), ours_nocheck=tuple(values[("time", "ours_nocheck")]),
        casadi=tuple(values[("time", "casadi")]) if ("time", "casadi") in values else None,
        iterations=values["iterations"],
        A=matrix(("A", "ours"), nx, nx), B=matrix(("B", "ours"), nx, nr),
        A_casadi=matrix(("A", "casadi"), nx, nx), B_casadi=matrix(("B", "casadi"), nx, nr))


def c_loop_seconds(result):
    """(min, median) of a CResult's ``ours`` in seconds (the driver prints ns)."""
    return tuple(v * 1e-9 for v in result.ours)
