"""Scaling study: how build time and time per point grow with the model.

``python -m codegen scaling --sizes 2 4 6 8 10 12 14 16 [--closed] [--out DIR]``
builds the n-link pendulum on a cart (:mod:`codegen.models.cart_chain`,
``make_model(n, closed)``) for each n, from scratch into a temporary folder,
and measures (``--model fourbar``: the N-loop four-bar, N = n;
``--model flexible_pendulum``: n beam elements per link)

* the time of each stage: forming the equations (``kanes_equations`` and the
  Model), derivation, CSE and emission, Cython, C compilation;
* the operation count after CSE and the size of the generated C;
* the time per operating point: the bare C function in a C loop (the timing
  driver of :mod:`codegen.bench.c_driver`), a batch of points in one Python call, one
  Python call.

It prints a table and writes ``scaling[_closed].csv`` and
``scaling[_closed].png`` (matplotlib, Agg backend) into ``--out``.
"""

from __future__ import annotations

import csv
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from .build import copy_c_sources, derivation_of, forced_build
from .c_driver import c_loop_seconds, compile_object, run_c_driver
from .casadi import casadi_available, generate_casadi
from ..errors import InputError
from .common import Settings, check_count, check_seconds, system_line
from .points import benchmark_points
from .python_calls import batch_threads, time_batch, time_single_call

# the families of models a size n describes: (how to make one, a consistent
# point to time it at, what n counts)
SCALED_MODELS = ("cart_chain", "fourbar", "flexible_pendulum")


def make_scaled(family, n, closed=False):
    """The model of ``family`` (SCALED_MODELS) of size n."""
    from ..models import cart_chain, flexible_pendulum, fourbar
    if family == "cart_chain":
        return cart_chain.make_model(n, closed)
    if family == "fourbar":
        return fourbar.make_model(n)
    if family == "flexible_pendulum":
        return flexible_pendulum.make_model(elements=n)
    raise InputError(f"unknown model family {family!r}; one of {', '.join(SCALED_MODELS)}")


def scaled_point(family, module, n):
    """A consistent (q, u) of the model of ``family`` and size n to time at:
    the chain at rest hanging, the four-bar's cranks at 1 rad turning, the
    flexible pendulum hanging undeformed."""
    from ..models import flexible_pendulum, fourbar
    if family == "fourbar":
        q, u = fourbar.general(fourbar.DEFAULT_PARAMETERS, loops=n, phi=1.0, omega=0.7)
        return np.array(q, dtype=float), np.array(u, dtype=float)
    if family == "flexible_pendulum":
        q, u = flexible_pendulum.hanging(flexible_pendulum.DEFAULT_PARAMETERS, n)
        return np.array(q), np.array(u)
    return module.complete(np.zeros(module.nq), np.zeros(module.nu))

COLUMNS = [
    ("n", "n", "{:d}"),
    ("nx", "states", "{:d}"),
    ("nc", "constraints", "{:d}"),
    ("operations", "ops after CSE", "{:d}"),
    ("c_bytes", "C bytes", "{:,d}"),
    ("model_s", "equations s", "{:.2f}"),
    ("derive_s", "derive s", "{:.2f}"),
    ("cse_emit_s", "CSE+emit s", "{:.2f}"),
    ("cython_s", "cython s", "{:.2f}"),
    ("compile_s", "compile s", "{:.2f}"),
    ("total_s", "total s", "{:.2f}"),
    ("c_loop_us", "bare C us", "{:.3f}"),
    ("c_loop_median_us", "(median)", "{:.3f}"),
    ("batch_us", "batch us", "{:.3f}"),
    ("batch_1_us", "(1 thread)", "{:.3f}"),
    ("threads", "threads", "{:d}"),
    ("single_us", "1 call us", "{:.3f}"),
]
# with --casadi: CasADi's build of the same mathematics (codegen.bench.casadi)
CASADI_COLUMNS = [
    ("casadi_bytes", "CasADi C bytes", "{:,d}"),
    ("casadi_generate_s", "CasADi gen s", "{:.2f}"),
    ("casadi_compile_s", "CasADi cc s", "{:.2f}"),
    ("casadi_us", "CasADi C us", "{:.3f}"),
]


def _columns(rows):
    return COLUMNS + (CASADI_COLUMNS if any("casadi_bytes" in r for r in rows) else [])


def _cell(fmt, value):
    return "-" if value is None else fmt.format(value)


def measure_size(n, closed, work, repeats=7, batch_size=10_000, progress=None, casadi_limit=None,
                 family="cart_chain"):
    """Build the model of ``family`` of size n (``cart_chain(n, closed)`` by
    default) from scratch in ``work`` and time it: one row (dict). With
    ``casadi_limit`` (seconds) also CasADi's C for the same mathematics."""
    say = progress or (lambda message: None)
    say(f"{family} n={n}{' closed' if closed else ''}: forming the equations")
    started = time.perf_counter()
    model = make_scaled(family, n, closed)
    formed = time.perf_counter() - started
    say(f"{family} n={n}: derivation, CSE, emission, compile")
    artifact, module, _ = forced_build(model, work / "build")
    timings = artifact.timings
    name = model.name
    c_dir = work / f"c_{name}"
    c_bytes = copy_c_sources(artifact, name, c_dir)

    settings = Settings(c_repeats=repeats, c_repeat_seconds=0.01, py_repeats=repeats,
                        py_repeat_seconds=0.02, batch_size=batch_size, batch_repeats=repeats)
    q0, u0 = scaled_point(family, module, n)
    base = (q0, u0, np.zeros(module.nr), np.array(module.default_parameters), 0.0)
    points = benchmark_points(module, base)
    casadi = {}
    objects = [c_dir / f"{name}.o"]
    casadi_name = None
    if casadi_limit and casadi_available():
        say(f"{family} n={n}: CasADi (limit {casadi_limit:g} s)")
        status, info = generate_casadi(derivation_of(model, artifact), f"{name}_casadi", c_dir,
                                       casadi_limit)
        casadi = dict(casadi_bytes=None, casadi_generate_s=None, casadi_compile_s=None,
                      casadi_us=None)
        if status == "ok":
            source = c_dir / f"{name}_casadi.c"
            casadi["casadi_bytes"] = source.stat().st_size + source.with_suffix(".h").stat().st_size
            casadi["casadi_generate_s"] = info["build"] + info["generate"]
            seconds, obj = compile_object(source, c_dir, casadi_limit)
            casadi["casadi_compile_s"] = seconds
            if seconds is not None:
                objects.append(obj)
                casadi_name = f"{name}_casadi"
    say(f"{family} n={n}: timing")
    compile_object(c_dir / f"{name}.c", c_dir, model=True)
    c = run_c_driver(c_dir, name, points, settings, objects, casadi_name, nx=module.nx, nr=module.nr)
    if c.casadi is not None:
        casadi["casadi_us"] = c.casadi[0] * 1e-3
    c_min, c_median = c_loop_seconds(c)
    batch_min, _ = time_batch(module, points, settings)
    batch_1_min, _ = time_batch(module, points, settings, threads=1)
    single_min, _ = time_single_call(module, points, settings)
    row = dict(
        n=n, nx=module.nx, nc=module.nc,
        operations=int(artifact.record.get("operation_count", -1)), c_bytes=c_bytes,
        model_s=formed, derive_s=timings.get("derivation", 0.0),
        cse_emit_s=timings.get("CSE", 0.0) + timings.get("emission", 0.0),
        cython_s=timings.get("cython", 0.0),
        compile_s=timings.get("compile", 0.0),
        c_loop_us=c_min * 1e6, c_loop_median_us=c_median * 1e6,
        batch_us=batch_min * 1e6, batch_1_us=batch_1_min * 1e6, single_us=single_min * 1e6,
        threads=batch_threads(module))
    row["total_s"] = (row["model_s"] + row["derive_s"] + row["cse_emit_s"] + row["cython_s"] +
                      row["compile_s"])
    row.update(casadi)
    return row


def format_table(rows):
    columns = _columns(rows)
    widths = [max(len(title), *(len(_cell(fmt, r.get(key))) for r in rows))
              for key, title, fmt in columns]
    lines = ["  ".join(title.rjust(w) for (_, title, _), w in zip(columns, widths))]
    for r in rows:
        lines.append("  ".join(_cell(fmt, r.get(key)).rjust(w)
                               for (key, _, fmt), w in zip(columns, widths)))
    return "\n".join(lines)


def write_csv(rows, path):
    path = Path(path)
    with path.open("w", newline="") as f:
        columns = _columns(rows)
        writer = csv.DictWriter(f, fieldnames=[key for key, _, _ in columns])
        writer.writeheader()
        for r in rows:
            writer.writerow({key: ("" if r.get(key) is None else
                                   f"{r[key]:.6g}" if isinstance(r[key], float) else r[key])
                             for key, _, _ in columns})
    return path


def write_png(rows, path, title):
    """Three panels versus n: build stages, time per point, operation count.
    Returns the path, or None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    n = [r["n"] for r in rows]
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    stages = [("model_s", "equations (kanes_equations, Model)"), ("derive_s", "derivation"),
              ("cse_emit_s", "CSE + emission"), ("cython_s", "Cython"),
              ("compile_s", "C compile"), ("total_s", "total")]
    for key, label in stages:
        axes[0].plot(n, [max(r[key], 1e-4) for r in rows], "o-", label=label,
                     linewidth=2.5 if key == "total_s" else 1.5)
    axes[0].set_yscale("log")
    axes[0].set_title("build time of each stage")
    axes[0].set_ylabel("seconds")
    threads = rows[0].get("threads", 1) if rows else 1
    for key, label in (("c_loop_us", "bare C loop"),
                       ("batch_us", f"batch from Python, per point ({threads} threads)"),
                       ("batch_1_us", "batch from Python, per point (1 thread)"),
                       ("single_us", "one call from Python")):
        axes[1].plot(n, [r[key] for r in rows], "o-", label=label)
    with_casadi = any(r.get("casadi_bytes") for r in rows)
    if with_casadi:
        axes[1].plot(n, [r.get("casadi_us") if r.get("casadi_us") is not None else np.nan
                         for r in rows], "x--", color="tab:purple", label="CasADi bare C loop")
    axes[1].set_yscale("log")
    axes[1].set_title("time per operating point")
    axes[1].set_ylabel("microseconds")
    axes[2].plot(n, [r["operations"] for r in rows], "o-", label="operations after CSE")
    axes[2].plot(n, [r["c_bytes"] / 10 for r in rows], "s--", label="bytes of C / 10")
    if with_casadi:
        axes[2].plot(n, [r.get("casadi_bytes") / 10 if r.get("casadi_bytes") else np.nan
                         for r in rows], "x--", color="tab:purple", label="CasADi bytes of C / 10")
    axes[2].set_yscale("log")
    axes[2].set_title("size of the generated code")
    for ax in axes:
        ax.set_xticks(n)
        ax.set_xlabel("links n")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return Path(path)


def _growth(rows, key):
    """Exponent b of a least-squares fit key ~ n^b (None if not enough data)."""
    values = [(r["n"], r[key]) for r in rows if r[key] > 0]
    if len(values) < 2 or len({n for n, _ in values}) < 2:
        return None
    x = np.log([n for n, _ in values])
    y = np.log([v for _, v in values])
    return float(np.polyfit(x, y, 1)[0])


def run(sizes, closed=False, out_dir="scaling", repeats=7, batch_size=10_000, progress=None,
        out=print, work_dir=None, casadi_limit=None, family="cart_chain"):
    """Measure every size, print the table, write CSV and PNG; returns (rows, csv, png)."""
    sizes = list(sizes)
    # refuse bad arguments before the first build, not after it
    if not sizes:
        raise InputError("give at least one size n (number of links)")
    for n in sizes:
        check_count(n, "each size n (number of links)")
    check_count(repeats, "repeats")
    check_count(batch_size, "batch_size")
    if casadi_limit is not None:
        check_seconds(casadi_limit, "casadi_limit")
    if family not in SCALED_MODELS:
        raise InputError(f"unknown model family {family!r}; one of {', '.join(SCALED_MODELS)}")
    if closed and family != "cart_chain":
        raise InputError("closed applies to the cart chain only")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = ("scaling" if family == "cart_chain" else f"scaling_{family}") + ("_closed" if closed else "")
    kind = {"fourbar": "N-loop four-bar, N = n",
            "flexible_pendulum": "flexible double pendulum, n beam elements per link"}.get(
        family, "n-link pendulum on a cart, " + ("closed loop (tip on a vertical line)" if closed
                                                 else "open chain"))
    out(f"scaling: {kind}, n = {', '.join(map(str, sizes))}")
    out(f"  machine: {system_line()}")
    out(f"  each build from scratch (no cache); times per point: min over {repeats} repeats, "
        f"batch of {batch_size} points (on all cores, and on one thread)")
    rows = []
    for n in sizes:
        work = Path(tempfile.mkdtemp(prefix=f"codegen-scaling-{n}-", dir=work_dir))
        try:
            rows.append(measure_size(n, closed, work, repeats, batch_size, progress, casadi_limit,
                                     family))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    out("")
    out(format_table(rows))
    growth = {key: _growth(rows, key) for key in ("operations", "total_s", "c_loop_us")}
    if all(v is not None for v in growth.values()):
        out(f"\n  fitted growth ~ n^b: operations b = {growth['operations']:.2f}, build time "
            f"b = {growth['total_s']:.2f}, bare C time per point b = {growth['c_loop_us']:.2f}")
    csv_path = write_csv(rows, out_dir / f"{stem}.csv")
    png_path = write_png(rows, out_dir / f"{stem}.png",
                         f"{kind}: build and evaluation vs n")
    out(f"\nwrote {csv_path}" + (f" and {png_path}" if png_path else
                                " (install matplotlib for the PNG)"))
    return rows, csv_path, png_path
