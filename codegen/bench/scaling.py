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

``--against REV`` also builds each size with the project as it was at git
revision REV (its files unpacked by ``git archive``, its own ``codegen.build``
run in a subprocess) and times both C functions with the same driver,
compiler and flags, alternating runs, at the same points: the speed-up of this
tree over REV per point, and how far apart the two A matrices are (the ratio
only means something where the two builds compute the same A).
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .build import copy_c_sources, derivation_of, forced_build
from .c_driver import c_loop_seconds, compile_c_driver, compile_object, run_compiled_driver
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

# the model of a family as a user's file makes it, in calls that every revision
# with the family understands (--against: the revision's own code builds it)
MODEL_FILES = {
    "cart_chain": "from codegen.models import cart_chain\n\n\ndef make():\n"
                  "    return cart_chain.make_model({n}, {closed})\n",
    "fourbar": "from codegen.models import fourbar\n\n\ndef make():\n"
               "    return fourbar.make_model({n})\n",
    "flexible_pendulum": "from codegen.models import flexible_pendulum\n\n\ndef make():\n"
                         "    return flexible_pendulum.make_model(elements={n})\n",
}
# A of the two builds further apart than this (relative to max |A|): not the same computation
AGAINST_AGREEMENT = 1e-8


@dataclass(frozen=True)
class Revision:
    """A git revision of the project, unpacked: what ``--against`` builds with."""
    name: str        # as the user gave it
    commit: str      # its full hash
    source: Path     # its files


def _git(root, *args):
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=120)


def unpack_revision(revision, work):
    """The project's files at git ``revision`` in ``work`` (``git archive``):
    a Revision. InputError where the project is not a git checkout or has
    no such commit."""
    root = Path(__file__).resolve().parents[2]
    try:
        inside = _git(root, "rev-parse", "--is-inside-work-tree")
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InputError(f"--against needs git: {error}") from None
    if inside.returncode != 0:
        raise InputError(f"--against {revision}: the project at {root} is not a git checkout "
                         "(install it from a clone)")
    found = _git(root, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    if found.returncode != 0:
        raise InputError(f"--against {revision}: no such commit in {root} (a shallow clone may "
                         "lack it: git fetch --unshallow)")
    commit = found.stdout.decode().strip()
    archive = _git(root, "archive", "--format=tar", commit)
    if archive.returncode != 0:
        raise InputError(f"--against {revision}: git archive failed: "
                         f"{archive.stderr.decode().strip()}")
    source = Path(work) / f"revision-{commit[:12]}"
    source.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        try:
            tar.extractall(source, filter="data")
        except TypeError:          # Python before 3.11.4: no filters (our own archive)
            tar.extractall(source)
    if not (source / "codegen" / "__main__.py").is_file():
        raise InputError(f"--against {revision}: commit {commit[:12]} has no codegen package")
    return Revision(revision, commit, source)


@contextlib.contextmanager
def revision_at(revision, work_dir=None):
    """``revision`` unpacked in a temporary folder for the ``with`` block (a
    Revision; None where ``revision`` is None), removed after it."""
    if revision is None:
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="codegen-revision-", dir=work_dir))
    try:
        yield unpack_revision(revision, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# run by --against with the revision's code first on sys.path: build the model
# of a MODEL_FILES file and print the folder of the built package (its C)
BUILD_AT_REVISION = """
import sys
from pathlib import Path
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import codegen
from revision_model import make
module = codegen.build(make(), output_dir=sys.argv[3])
print(Path(module.__file__).parent)
"""


def build_at_revision(revision, family, n, closed, work, timeout=None):
    """Build the model of ``family`` and size n with ``revision``'s own code
    (``codegen.build`` in a subprocess) in ``work`` and copy its C there:
    (folder of its C, model name)."""
    work = Path(work)
    models = work / "revision_model"
    models.mkdir()
    (models / "revision_model.py").write_text(MODEL_FILES[family].format(n=n, closed=closed))
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    try:
        done = subprocess.run([sys.executable, "-c", BUILD_AT_REVISION, str(revision.source),
                               str(models), str(work / "revision_build")],
                              cwd=revision.source, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise InputError(f"--against {revision.name}: {family} n={n} did not build within "
                         f"{timeout:g} s") from None
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
        raise InputError(f"--against {revision.name} ({revision.commit[:12]}): {family} n={n} "
                         f"does not build there:\n{tail}")
    package = Path(done.stdout.strip().splitlines()[-1])
    headers = sorted(package.glob("*.h"))
    if len(headers) != 1:
        raise InputError(f"--against {revision.name}: expected one header in its build, found "
                         f"{[h.name for h in headers]}")
    name = headers[0].stem
    out = work / "revision_c"
    out.mkdir()
    for suffix in (".c", ".h"):
        shutil.copy2(package / f"{name}{suffix}", out / f"{name}{suffix}")
    return out, name


def time_against(new_exe, old_exe, settings, rounds, nx, nr):
    """Run the two compiled drivers alternately ``rounds`` times each:
    (new CResults, old CResults)."""
    new, old = [], []
    for _ in range(rounds):
        new.append(run_compiled_driver(new_exe, settings, nx, nr))
        old.append(run_compiled_driver(old_exe, settings, nx, nr))
    return new, old


COLUMNS = [
    ("n", "n", "{:d}"),
    ("nx", "states", "{:d}"),
    ("nc", "constraints", "{:d}"),
    ("operations", "ops after CSE", "{:d}"),
    ("c_bytes", "C bytes", "{:,d}"),
    ("model_s", "equations s", "{:.2f}"),
    ("derive_s", "derive s", "{:.2f}"),
    ("cse_emit_s", "CSE+emit s", "{:.2f}"),
    ("kernel_s", "kernel s", "{:.2f}"),
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


# with --against REV: REV's build of the same model, timed alternately with this tree's
AGAINST_COLUMNS = [
    ("against_c_loop_us", "alternating: C us", "{:.3f}"),
    ("against_us", "{} C us", "{:.3f}"),
    ("against_median_us", "(median)", "{:.3f}"),
    ("speedup", "x faster", "{:.2f}"),
    ("speedup_median", "(median)", "{:.2f}"),
    ("against_difference", "A vs {}", "{:.1e}"),
]


def _columns(rows):
    against = next((r["against"] for r in rows if "against" in r), None)
    return (COLUMNS + (CASADI_COLUMNS if any("casadi_bytes" in r for r in rows) else []) +
            ([(key, title.format(against), fmt) for key, title, fmt in AGAINST_COLUMNS]
             if against else []))


def _cell(fmt, value):
    return "-" if value is None else fmt.format(value)


def measure_size(n, closed, work, repeats=7, batch_size=10_000, progress=None, casadi_limit=None,
                 family="cart_chain", against=None):
    """Build the model of ``family`` of size n (``cart_chain(n, closed)`` by
    default) from scratch in ``work`` and time it: one row (dict). With
    ``casadi_limit`` (seconds) also CasADi's C for the same mathematics; with
    ``against`` (a Revision) also that revision's build, timed alternately."""
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
    new_exe = compile_c_driver(c_dir, name, points, objects, casadi_name)
    c = run_compiled_driver(new_exe, settings, module.nx, module.nr)
    if c.casadi is not None:
        casadi["casadi_us"] = c.casadi[0] * 1e-3
    c_min, c_median = c_loop_seconds(c)
    compared = {}
    if against is not None:
        say(f"{family} n={n}: building it at {against.name} ({against.commit[:12]})")
        old_dir, old_name = build_at_revision(against, family, n, closed, work)
        compile_object(old_dir / f"{old_name}.c", old_dir, model=True)
        old_exe = compile_c_driver(old_dir, old_name, points, [old_dir / f"{old_name}.o"])
        say(f"{family} n={n}: timing against {against.name}, alternating")
        new_runs, old_runs = time_against(new_exe, old_exe, settings, repeats, module.nx,
                                          module.nr)
        new_min = min(c_loop_seconds(r)[0] for r in new_runs)
        new_median = float(np.median([c_loop_seconds(r)[1] for r in new_runs]))
        old_min = min(c_loop_seconds(r)[0] for r in old_runs)
        old_median = float(np.median([c_loop_seconds(r)[1] for r in old_runs]))
        A_new, A_old = new_runs[0].A, old_runs[0].A
        scale = max(float(np.max(np.abs(A_new))), np.finfo(float).tiny)
        compared = dict(against=against.name, against_us=old_min * 1e6,
                        against_median_us=old_median * 1e6,
                        speedup=old_min / new_min, speedup_median=old_median / new_median,
                        against_difference=float(np.max(np.abs(A_new - A_old))) / scale,
                        against_c_loop_us=new_min * 1e6)
    batch_min, _ = time_batch(module, points, settings)
    batch_1_min, _ = time_batch(module, points, settings, threads=1)
    single_min, _ = time_single_call(module, points, settings)
    row = dict(
        n=n, nx=module.nx, nc=module.nc,
        operations=int(artifact.record.get("operation_count", -1)), c_bytes=c_bytes,
        model_s=formed, derive_s=timings.get("derivation", 0.0),
        cse_emit_s=timings.get("CSE", 0.0) + timings.get("emission", 0.0),
        kernel_s=timings.get("kernel", 0.0),
        compile_s=timings.get("compile", 0.0),
        c_loop_us=c_min * 1e6, c_loop_median_us=c_median * 1e6,
        batch_us=batch_min * 1e6, batch_1_us=batch_1_min * 1e6, single_us=single_min * 1e6,
        threads=batch_threads(module))
    row["total_s"] = (row["model_s"] + row["derive_s"] + row["cse_emit_s"] + row["kernel_s"] +
                      row["compile_s"])
    row.update(casadi)
    row.update(compared)
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
              ("cse_emit_s", "CSE + emission"), ("kernel_s", "kernel"),
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
        out=print, work_dir=None, casadi_limit=None, family="cart_chain", against=None):
    """Measure every size, print the table, write CSV and PNG; returns (rows, csv, png).
    ``against``: a git revision to compare this tree's time per point with."""
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
    # the revision is unpacked (and refused if it cannot be) before any folder is made
    with revision_at(against, work_dir) as revision:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        stem = (("scaling" if family == "cart_chain" else f"scaling_{family}") +
                ("_closed" if closed else ""))
        kind = {"fourbar": "N-loop four-bar, N = n",
                "flexible_pendulum": "flexible double pendulum, n beam elements per link"}.get(
            family, "n-link pendulum on a cart, " +
            ("closed loop (tip on a vertical line)" if closed else "open chain"))
        out(f"scaling: {kind}, n = {', '.join(map(str, sizes))}")
        out(f"  machine: {system_line()}")
        out(f"  each build from scratch (no cache); times per point: min over {repeats} repeats, "
            f"batch of {batch_size} points (on all cores, and on one thread)")
        if revision is not None:
            out(f"  against {against} = {revision.commit[:12]}: its own code builds each size "
                f"(codegen.build in a subprocess); both C functions compiled with the same flags and "
                f"timed by the same driver, alternating {repeats} runs each; x faster = its time "
                f"/ this tree's (min / min, median / median)")
        rows = []
        for n in sizes:
            work = Path(tempfile.mkdtemp(prefix=f"codegen-scaling-{n}-", dir=work_dir))
            try:
                rows.append(measure_size(n, closed, work, repeats, batch_size, progress,
                                         casadi_limit, family, revision))
            finally:
                shutil.rmtree(work, ignore_errors=True)
        out("")
        out(format_table(rows))
        for r in rows:
            if r.get("against_difference", 0.0) > AGAINST_AGREEMENT:
                out(f"  warning: n={r['n']}: A differs from {against}'s by "
                    f"{r['against_difference']:.1e} of max |A|: the two builds do not compute the "
                    f"same A, so their times compare different work")
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
