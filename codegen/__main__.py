"""Command line of codegen: build models, export their C, study them.

    python -m codegen list                       the built-in models and their operating points
    python -m codegen build disk                 derive, generate, compile; print eigenvalues
    python -m codegen build my_model.py:make     the same for a user's model
    python -m codegen export disk --dir out/     self-contained C folder with Makefile
    python -m codegen sweep bicycle --param v --from 0 --to 10 --num 201
                                                 eigenvalues vs speed: CSV, PNG, weave/capsize
    python -m codegen bench disk --quick         time per point: ours (C, batch, Python),
                                                 CasADi, SymPy's routes; build stages; targets
    python -m codegen scaling --sizes 2 4 8 16   n-link cart chain: build stages and time per
                                                 point vs n (table, CSV, PNG)
    python -m codegen equilibria fourbar --coordinate phi --from -3 --to 3 --num 25
                                                 equilibria from guesses along one coordinate,
                                                 with eigenvalues and stability

python -m codegen COMMAND --help lists the options of a command.

Exit status: 0 done; 2 the command line is wrong (argparse's usage message:
an unknown option, a value of the wrong kind or out of range, an option the
command needs); 1 the command could not be done (one line on stderr starting
with "error:": the model file, the build, an operating point, a file that
cannot be written).
"""

from __future__ import annotations

import argparse
import json
import keyword
import math
import os
import sys
import textwrap
import time
from pathlib import Path

if len(sys.argv) > 1 and sys.argv[1] in ("bench", "scaling"):
    # Idle OpenBLAS workers spin after each NumPy linear-algebra call; on this
    # class of machine (2 hyperthreads) they halve the speed of the core our
    # one-thread timings run on. Set before NumPy loads; inherited by the
    # SymPy routes' subprocesses.
    for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_variable, "1")

import numpy as np  # noqa: E402


def _format_eigenvalues(values):
    values = sorted(values, key=lambda z: (round(z.real, 9), round(z.imag, 9)))
    parts = []
    for z in values:
        re = 0.0 if abs(z.real) < 1e-12 else z.real
        im = 0.0 if abs(z.imag) < 1e-12 else z.imag
        parts.append(f"{re:.6g}" if im == 0.0 else f"{re:.6g}{im:+.6g}j")
    return ", ".join(parts)


def _default_point(module_spec, built, model_module):
    """(description, q, u, r, p) of the point the CLI linearizes at."""
    from .pipeline import default_point

    label, op = default_point(built, module_spec, model_module)
    return label, op.q, op.u, op.r, op.p


def _import_hint(name, output_dir):
    """How to use the built model: codegen.load works from any directory; the
    import statement needs the output directory's parent on sys.path."""
    from .compile import default_output_dir, resolve_output_dir

    output_dir = resolve_output_dir(output_dir)
    given = "" if output_dir == default_output_dir() else f", output_dir={str(output_dir)!r}"
    hint = f"codegen.load({name!r}{given}) from any directory"
    package = output_dir.name
    if package.isidentifier() and not keyword.iskeyword(package):
        hint += f", or import {package}.{name} with {output_dir.parent} on sys.path"
    return hint


def parse_options(texts):
    """``make_model`` options of a built-in model from ``key=value`` words:
    the value as JSON (``n=32``, ``closed=true``, ``sensitivities='["c", "lam"]'``),
    else as a string (``sensitivities=all``)."""
    from .errors import InputError

    options = {}
    for text in texts or ():
        key, equals, value = text.partition("=")
        if not equals or not key.isidentifier():
            raise InputError(f"expected key=value (a make_model() option of a built-in model), got {text!r}")
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value
    return options


def _build_and_load(spec, output_dir, force=False, progress=None, options=None):
    """Build (or find cached) and import a built-in model (``options``: its
    make_model() keyword arguments) or a user's ``path/to/file.py:function``.
    Returns (artifact, module, model_module: the built-in's module where its
    operating points apply (no options), seconds forming the equations,
    seconds importing)."""
    from .errors import ModelError
    from .load import load_package
    from .models import BUILTIN, builtin_module
    from .pipeline import build_builtin, build_file, is_builtin

    if progress:
        progress(f"looking up the build of {spec}")
    if is_builtin(spec, options):
        artifact, formed = build_builtin(spec, output_dir, force=force, progress=progress, **(options or {}))
        # with options (another size, outputs...) its operating points may not fit: the
        # CLI then linearizes at the zero state, as for a user's model
        model_module = None if options else builtin_module(spec)
    elif ":" in str(spec):
        # a cached build whose recorded dependencies are unchanged: the file is not run
        artifact, formed = build_file(spec, output_dir, force=force, progress=progress)
        model_module = None
    else:
        raise ModelError(f"unknown model {spec!r}: give a built-in name "
                         f"({', '.join(sorted(BUILTIN))}) or path/to/file.py:function")
    if progress:
        progress("importing the compiled module")
    started = time.perf_counter()
    module = load_package(artifact.package_dir)
    return artifact, module, model_module, formed, time.perf_counter() - started


# what `build` prints for a model made without Model(..., description=...)
NO_DESCRIPTION = "(no description: Model(..., description=\"...\") gives one)"


def command_build(args):
    from .pipeline import terminal_progress

    progress = _build_progress(terminal_progress())
    try:
        artifact, module, model_module, formed, loaded = _build_and_load(
            args.model, args.output_dir, args.force, progress, parse_options(args.options))
    finally:
        if progress:
            progress.close()
    name = module.name

    print(f"model {name}: {module.description or NO_DESCRIPTION}")
    print(f"  coordinates q ({module.nq}, dependent {[module.q_names[i] for i in module.dependent_q]}): "
          f"{', '.join(module.q_names)}")
    print(f"  speeds u ({module.nu}, dependent {[module.u_names[i] for i in module.dependent_u]}): "
          f"{', '.join(module.u_names)}")
    print(f"  inputs r ({module.nr}): {', '.join(module.r_names) or '-'}")
    print(f"  parameters p ({module.np}): " +
          ", ".join(f"{n}={v:g}" for n, v in zip(module.p_names, module.default_parameters)))
    print(f"  states x ({module.nx}): {', '.join(module.state_names)}")
    print(f"  generated code: {artifact.record['operation_count']} operations after CSE")
    print("timings:" + (" (cached build)" if artifact.cached else ""))
    print(f"  {'equations of motion':<22}{formed:8.2f} s")
    for stage, seconds in artifact.timings.items():
        print(f"  {stage:<22}{seconds:8.2f} s")
    print(f"  {'import':<22}{loaded:8.2f} s")
    print(f"output: {artifact.link} -> {artifact.package_dir.name}")
    print(f"  use: {_import_hint(name, args.output_dir)}")
    print(f"  C: {artifact.package_dir / (name + '.c')}, {name}.h")

    try:
        label, q, u, r, p = _default_point(args.model, module, model_module)
        A, B = module.linearize(q, u, r, p)
    except Exception as error:  # a report for people: say why, do not fail the build
        print(f"eigenvalues: not computed ({error})")
        return 0
    print(f"eigenvalues of A at {label}:")
    print(f"  {_format_eigenvalues(np.linalg.eigvals(A))}")
    expected = getattr(model_module, "expected_eigenvalues", None)
    if expected is not None:
        name, kwargs = model_module.DEFAULT_OPERATING_POINT
        text = expected(dict(zip(module.p_names, map(float, p))), name, **kwargs)
        if text:
            print(f"  expected: {text}")
    return 0


def command_export(args):
    from .export import export_c
    from .pipeline import terminal_progress

    artifact, module, model_module, _, _ = _build_and_load(args.model, args.output_dir, args.force,
                                                           terminal_progress(), parse_options(args.options))
    label, q, u, r, _ = _default_point(args.model, module, model_module)
    files = export_c(artifact.package_dir, args.dir, module.name, label, 0.0, q, u, r)
    print(f"exported {module.name} to {args.dir}: {', '.join(files)}")
    print(f"  cd {args.dir} && make && ./example      (or cmake -S {args.dir} -B build)")
    return 0


class CommandError(Exception):
    """A command that is well formed but cannot be done (e.g. its output
    cannot be written): ``main`` prints ``error: <message>`` and returns 1."""


def _positive_count(text):
    """argparse type of --num, --batch, --repeats, --sizes: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def _finite(text):
    """argparse type of --from, --to: a finite number (not nan or inf)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _seconds(text):
    """argparse type of the time limits: a finite number of seconds > 0."""
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a time in seconds > 0, got {text!r}")
    return value


def _assignment(text):
    """argparse type of --set and --param: name=number -> (name, value), the
    number finite; a whole number stays an int (e.g. branch=1 picks a root by
    index)."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"expected name=value (e.g. lean=0.2), got {text!r}")
    try:
        number = int(value) if value.strip().lstrip("+-").isdigit() else float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"the value of {key.strip()!r} must be a number, "
                                         f"got {value!r}") from None
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"the value of {key.strip()!r} must be a finite number, "
                                         f"got {value!r}")
    return key.strip(), number


def _check_writable_file(path, option):
    """Refuse, before any work, an output file that cannot be written: it is
    opened for appending (which leaves an existing file as it is) and removed
    again if it did not exist."""
    path = Path(path)
    existed = path.exists()
    try:
        with path.open("a"):
            pass
    except OSError as error:
        raise CommandError(f"cannot write {path} ({error.strerror or error}): choose another "
                           f"{option}") from None
    if not existed:
        path.unlink()


def _check_writable_folder(path, option):
    """Create the output folder ``path`` (and its parents) if needed and check
    that a file can be written in it, before any work."""
    import tempfile

    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        raise CommandError(f"cannot write into {path} ({error.strerror or error}): choose another "
                           f"{option}") from None


def command_sweep(args):
    from .load import load_package
    from .models import BUILTIN, builtin_module
    from .pipeline import build_builtin, operating_point, terminal_progress
    from .sweep import sweep, write_csv, write_png

    if args.model not in BUILTIN:
        args.parser.error(f"sweep needs a built-in model (its operating points), one of "
                          f"{', '.join(sorted(BUILTIN))}; got {args.model!r}")
    model_module = builtin_module(args.model)
    defaults = getattr(model_module, "SWEEP", {})
    point = args.point or defaults.get("point") or model_module.DEFAULT_OPERATING_POINT[0]
    param = args.param or defaults.get("param")
    if not param:
        args.parser.error(f"give --param (an argument of the operating point {point!r} of "
                          f"{args.model}, e.g. v)")
    states = args.states or defaults.get("states", ())
    fixed = dict(args.set or [])
    # a wrong --param, --point or --set, or an output that cannot be written,
    # fails here, before the build
    operating_point(args.model, point, **{**fixed, param: args.start})
    out = Path(args.out or f"sweep_{args.model}_{param}")
    for path in (out.with_suffix(".csv"), out.with_suffix(".png")):
        _check_writable_file(path, "--out")
    progress = _build_progress(terminal_progress())
    try:
        artifact, _ = build_builtin(args.model, args.output_dir, progress=progress)
    finally:
        if progress:
            progress.close()
    module = load_package(artifact.package_dir)

    def make_point(**kwargs):
        return operating_point(args.model, point, **kwargs)

    result = sweep(module, make_point, param, args.start, args.stop, args.num, states, fixed,
                   defaults.get("mode_names"))
    csv_path = write_csv(result, out.with_suffix(".csv"))
    param_label, unit = defaults.get("param_label"), defaults.get("param_unit")
    if param_label is None and param in _PARAMETER_LABELS:
        param_label, unit = _PARAMETER_LABELS[param]
    block = ", ".join(result.states)
    title = textwrap.fill(f"{args.model}, {point} operating point: eigenvalues of A "
                          f"(states {block}) vs {param_label or param}", 80)
    png_path = write_png(result, out.with_suffix(".png"), title, param_label, unit or "")
    print(f"{args.model} {point}: eigenvalues of the {len(result.states)} states "
          f"{', '.join(result.states)} for {param} in [{args.start:g}, {args.stop:g}] ({args.num} points)")
    print(f"  wrote {csv_path}" + (f" and {png_path}" if png_path else " (install matplotlib for the PNG)"))
    if not result.transitions:
        print("  stability does not change in this range")
    for t in result.transitions:
        label = f"{t.name} speed" if t.name else f"{t.mode} mode"
        print(f"  {label}: {param} = {t.value:.12g}  ({t.mode} mode unstable {t.unstable_side})")
    return 0


class _LiveProgress:
    """Progress of a build for a person at a terminal (stderr): one line per
    stage, stamped with the time since the start; while a stage runs, its own
    time ticks at the end of its line every ``interval`` seconds, so a long
    stage (forming the bicycle's equations, the C compile of the N = 16
    four-bar: minutes) visibly runs; when the next stage starts, the line
    keeps the stage's duration. ``close()`` ends the last stage."""

    def __init__(self, stream, interval=1.0, width=None):
        import shutil
        import threading

        self.stream = stream
        self.interval = interval
        self.width = width or shutil.get_terminal_size((100, 24)).columns
        self.started = time.perf_counter()
        self.stage = None            # (text, start time) of the running stage
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.ticker = None

    def _line(self, text, suffix):
        # one terminal line: a longer one would wrap, and "\r" would not redraw it
        room = max(20, self.width - 1 - len(suffix))
        if len(text) > room:
            text = text[:room - 3] + "..."
        return text + suffix

    def _draw(self, now, final=False):
        text, start = self.stage
        seconds = now - start
        if final:
            suffix = f"  ({seconds:.1f} s)"
        else:
            suffix = f"  ... {seconds:.0f} s" if seconds >= self.interval else ""
        self.stream.write("\r" + self._line(text, suffix) + "\x1b[K" + ("\n" if final else ""))
        self.stream.flush()

    def __call__(self, message):
        import threading

        with self.lock:
            now = time.perf_counter()
            if self.stage is not None:
                self._draw(now, final=True)
            self.stage = (f"  [{now - self.started:6.1f} s] {message}", now)
            self._draw(now)
            if self.ticker is None:
                self.ticker = threading.Thread(target=self._tick, daemon=True,
                                               name="codegen-progress")
                self.ticker.start()

    def _tick(self):
        while not self.done.wait(self.interval):
            with self.lock:
                if self.stage is not None and not self.done.is_set():
                    self._draw(time.perf_counter())

    def close(self):
        self.done.set()
        if self.ticker is not None:
            self.ticker.join()
        with self.lock:
            if self.stage is not None:
                self._draw(time.perf_counter(), final=True)
                self.stage = None


def _build_progress(at_terminal):
    """A :class:`_LiveProgress` on stderr when ``at_terminal`` (what
    ``pipeline.terminal_progress()`` returned: None in CI or when stderr is not a
    terminal, so pipes and logs stay quiet), else None."""
    if at_terminal is None:
        return None
    if os.environ.get("TERM") == "dumb":     # no carriage-return redraws: plain lines
        return _PlainStages(at_terminal)
    return _LiveProgress(sys.stderr)


class _PlainStages:
    """The pipeline's plain progress lines, with the ``close()`` of :class:`_LiveProgress`."""

    def __init__(self, say):
        self.say = say

    def __call__(self, message):
        self.say(message)

    def close(self):
        pass


# x-axis labels of the sweep's plot for the operating-point arguments of the
# built-in models (a model's SWEEP may give "param_label" and "param_unit")
_PARAMETER_LABELS = {"v": ("forward speed v", "m/s")}


def _plain_progress(message):
    """Progress of the long-running bench and scaling commands when not at a terminal."""
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def command_bench(args):
    from . import bench
    from .pipeline import terminal_progress

    make = bench.Settings.quick if args.quick else bench.Settings
    changes = dict(sympy_limit=args.sympy_limit, casadi_limit=args.casadi_limit,
                   casadi=not args.no_casadi, sympy=not args.no_sympy, work_dir=args.work_dir,
                   sensitivities=not args.no_sensitivities)
    if args.batch is not None:
        changes["batch_size"] = args.batch
    if args.routes:
        changes["sympy_routes"] = tuple(args.routes)
    settings = make(**changes)
    if args.json:
        _check_writable_file(args.json, "--json")
    if args.work_dir:
        _check_writable_folder(args.work_dir, "--work-dir")
    reports = bench.run(args.models or None, settings, out=lambda text: print(text, flush=True),
                        progress=terminal_progress() or _plain_progress)
    if args.json:
        print(f"\nwrote {bench.write_json(reports, args.json)}")
    return 0


def command_scaling(args):
    from .bench import scaling
    from .pipeline import terminal_progress

    _check_writable_folder(args.out, "--out")
    scaling.run(args.sizes, closed=args.closed, out_dir=args.out, repeats=args.repeats,
                family=args.model,
                batch_size=args.batch, progress=terminal_progress() or _plain_progress,
                casadi_limit=args.casadi_limit if args.casadi else None,
                against=args.against, out=lambda text: print(text, flush=True))
    return 0


def _stability(eigenvalues):
    """"stable" (every real part negative), "unstable" (one positive) or
    "marginal" (the largest is zero: undamped oscillations, rigid-body or
    ignorable directions), judged relative to max(1, max|eigenvalue|)."""
    if eigenvalues.size == 0:
        return "marginal"
    tolerance = 1e-8 * max(1.0, float(np.max(np.abs(eigenvalues))))
    largest = float(np.max(eigenvalues.real))
    if largest > tolerance:
        return "unstable"
    return "stable" if largest < -tolerance else "marginal"


def _scan_guess(module, base, index, value, p):
    """The guess of one scan point: ``base`` with coordinate ``index`` set to
    ``value`` and, when that coordinate is independent in the model's
    partition, the dependent ones completed onto the constraints (a guess
    off them still serves: equilibrium projects it)."""
    import warnings

    from .errors import EvaluationError

    q = np.array(base, dtype=float)
    q[index] = value
    if index not in module.dependent_q:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                q, _ = module.complete(q, np.zeros(module.nu), p=p)
        except EvaluationError:
            pass
    return q


def find_equilibria(module, base, coordinate, start, stop, num, p):
    """Distinct static equilibria found by ``module.equilibrium`` from ``num``
    guesses with ``coordinate`` (a name of q) from ``start`` to ``stop``, the
    other coordinates from ``base``. Returns (list of (q, eigenvalues of
    linearize_local, stability), number of guesses that converged), sorted
    along the coordinate."""
    import warnings

    from .errors import EvaluationError, InputError

    if coordinate not in module.q_names:
        raise InputError(f"{module.name}: --coordinate {coordinate!r} is not a coordinate; "
                         f"coordinates are {', '.join(module.q_names)}")
    index = module.q_names.index(coordinate)
    found, converged = [], 0
    for value in np.linspace(start, stop, num):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                q, u = module.equilibrium(_scan_guess(module, base, index, value, p), p=p)
        except EvaluationError:
            continue
        converged += 1
        if any(np.max(np.abs(q - other)) <= 1e-6 * (1.0 + np.max(np.abs(other)))
               for other, _, _ in found):
            continue
        local = module.linearize_local(q, u, p=p, tol=None)
        eigenvalues = np.linalg.eigvals(local.A)
        found.append((q, eigenvalues, _stability(eigenvalues)))
    # along the coordinate, then by the others (equilibria that share its value)
    found.sort(key=lambda item: (round(float(item[0][index]), 6),
                                 tuple(np.round(item[0], 6).tolist())))
    return found, converged


def command_equilibria(args):
    from .pipeline import default_point, terminal_progress

    progress = _build_progress(terminal_progress())
    try:
        _, module, model_module, _, _ = _build_and_load(args.model, args.output_dir, args.force,
                                                        progress)
    finally:
        if progress:
            progress.close()
    p = module.parameters(**dict(args.param or []))
    label, op = default_point(module, args.model, model_module)
    found, converged = find_equilibria(module, op.q, args.coordinate, args.start, args.stop,
                                       args.num, p)
    changed = [f"{n}={v:g}" for n, v, d in zip(module.p_names, p, module.default_parameters)
               if v != d]
    print(f"{module.name}: static equilibria from {args.num} guesses with {args.coordinate} in "
          f"[{args.start:g}, {args.stop:g}] (other coordinates from the point {label}); "
          f"parameters {', '.join(changed) or 'the defaults'}")
    print(f"  {converged} of {args.num} guesses converged; {len(found)} distinct equilibria")
    for number, (q, eigenvalues, stability) in enumerate(found, 1):
        # the coordinates are as accurate as the residual's tolerance (1e-10)
        scale = 1e-9 * max(1.0, float(np.max(np.abs(q))))
        coordinates = ", ".join(f"{n} = {(0.0 if abs(v) < scale else v):.6g}"
                                for n, v in zip(module.q_names, q))
        print(f"{number}. {stability}: {coordinates}")
        print(f"   eigenvalues (linearize_local): {_format_eigenvalues(eigenvalues)}")
    return 0


def command_list(args):
    from .models import BUILTIN, builtin_module

    rows = [("model", "operating points", "description")]
    for name in sorted(BUILTIN):
        module = builtin_module(name)
        rows.append((name, ", ".join(module.OPERATING_POINTS), module.DESCRIPTION))
    widths = [max(len(row[column]) for row in rows) for column in range(2)]
    for name, points, description in rows:
        print(f"{name:<{widths[0]}}  {points:<{widths[1]}}  {description}")
    return 0


def main(argv=None):
    # the raw formatter keeps the docstring's examples one per line
    parser = argparse.ArgumentParser(prog="python -m codegen", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    build = commands.add_parser("build", help="derive, generate and compile a model")
    build.add_argument("model", help="built-in name (see 'list') or path/to/file.py:function")
    build.add_argument("options", nargs="*", metavar="key=value",
                       help="a built-in model's make_model() options, each value JSON or else a "
                            "string: cart_chain n=32 closed=true, bicycle sensitivities=all")
    build.add_argument("--force", action="store_true", help="rebuild even if a cached build exists")
    build.add_argument("--output-dir", default=None, help="default: generated/ (or $CODEGEN_OUTPUT_DIR)")
    build.set_defaults(run=command_build, parser=build)

    export = commands.add_parser("export", help="write a self-contained C folder (C, header, "
                                 "Makefile, CMakeLists.txt, example main.c)")
    export.add_argument("model", help="built-in name or path/to/file.py:function")
    export.add_argument("options", nargs="*", metavar="key=value",
                        help="a built-in model's make_model() options, as for build")
    export.add_argument("--dir", required=True, help="destination folder")
    export.add_argument("--force", action="store_true", help="rebuild even if cached")
    export.add_argument("--output-dir", default=None, help="where builds are cached")
    export.set_defaults(run=command_export, parser=export)

    sweep = commands.add_parser("sweep", help="eigenvalues versus an operating-point parameter: "
                                "CSV, PNG and where stability changes")
    sweep.add_argument("model", help="built-in name")
    sweep.add_argument("--param", help="operating-point argument to vary (default: the model's, e.g. v)")
    sweep.add_argument("--from", dest="start", type=_finite, default=0.0,
                       help="first value of the parameter (default 0)")
    sweep.add_argument("--to", dest="stop", type=_finite, default=10.0,
                       help="last value of the parameter (default 10; below --from: a descending "
                       "sweep)")
    sweep.add_argument("--num", type=_positive_count, default=201)
    sweep.add_argument("--point", help="operating-point family (default: the model's)")
    sweep.add_argument("--states", nargs="*", help="state names whose block of A is analysed")
    sweep.add_argument("--set", action="append", type=_assignment,
                       help="other operating-point arguments, name=value")
    sweep.add_argument("--out", help="output path without suffix (default: sweep_<model>_<param>)")
    sweep.add_argument("--output-dir", default=None, help="where builds are cached")
    sweep.set_defaults(run=command_sweep, parser=sweep)

    bench = commands.add_parser("bench", help="time per operating point of our module (bare C, "
                                "batch, single call), CasADi and SymPy's routes; build stages")
    bench.add_argument("models", nargs="*", help="built-in names or path/to/file.py:function "
                       "(default: disk, and bicycle when it is built in)")
    bench.add_argument("--quick", action="store_true", help="fewer and shorter repeats")
    bench.add_argument("--sympy-limit", type=_seconds, default=300.0, metavar="SECONDS",
                       help="time limit of each SymPy route, run in a subprocess (default 300)")
    bench.add_argument("--casadi-limit", type=_seconds, default=300.0, metavar="SECONDS",
                       help="time limit of CasADi's code generation and of its compilation "
                       "(default 300)")
    bench.add_argument("--no-casadi", action="store_true", help="skip CasADi")
    bench.add_argument("--no-sympy", action="store_true", help="skip the SymPy routes")
    bench.add_argument("--no-sensitivities", action="store_true",
                       help="skip the sensitivities' rows (two more builds of each model)")
    bench.add_argument("--routes", nargs="+", choices=["linearizer", "symbolic_AB", "symbolic_MAB",
                                                        "finite_differences"],
                       help="only these SymPy routes")
    bench.add_argument("--batch", type=_positive_count, default=None,
                       help="points in the batch call (default 10000)")
    bench.add_argument("--work-dir", default=None,
                       help="keep the builds and C files here (default: a temporary directory)")
    bench.add_argument("--json", default=None, help="also write the results as JSON")
    bench.set_defaults(run=command_bench, parser=bench)

    scale = commands.add_parser("scaling", help="a model family (cart chain, four-bar, flexible "
                                "pendulum) for several sizes n: time of "
                                "each build stage and per point (table, CSV, PNG)")
    scale.add_argument("--sizes", type=_positive_count, nargs="+",
                       default=[2, 4, 6, 8, 10, 12, 14, 16],
                       help="numbers of links n, each >= 1 (default 2 4 ... 16)")
    scale.add_argument("--model", default="cart_chain",
                       choices=["cart_chain", "fourbar", "flexible_pendulum"],
                       help="the family: cart_chain (n links, default), fourbar (n loops), "
                       "flexible_pendulum (n beam elements per link)")
    scale.add_argument("--closed", action="store_true",
                       help="close the loop (tip on a vertical line: one configuration constraint; "
                       "cart_chain only)")
    scale.add_argument("--out", default="scaling", help="output folder for scaling.csv and "
                       "scaling.png (default: scaling/)")
    scale.add_argument("--repeats", type=_positive_count, default=7,
                       help="repeats of each timing (default 7)")
    scale.add_argument("--batch", type=_positive_count, default=10000,
                       help="points in the batch call (default 10000)")
    scale.add_argument("--casadi", action="store_true", help="also CasADi's C for the same "
                       "mathematics: size, generation and compile time, time per call")
    scale.add_argument("--casadi-limit", type=_seconds, default=300.0, metavar="SECONDS",
                       help="time limit of CasADi's generation and of its compilation (default 300)")
    scale.add_argument("--against", metavar="REV",
                       help="also build each size with the project at git revision REV (its own "
                       "code, in a subprocess) and time both C functions alternately: the "
                       "speed-up per point over REV")
    scale.set_defaults(run=command_scaling, parser=scale)

    equilibria = commands.add_parser(
        "equilibria", help="static equilibria found from guesses along one coordinate, with "
        "their eigenvalues (local state-space form) and stability")
    equilibria.add_argument("model", help="built-in name or path/to/file.py:function")
    equilibria.add_argument("--coordinate", required=True,
                            help="the coordinate whose guesses are scanned (a name of q)")
    equilibria.add_argument("--from", dest="start", type=_finite, required=True,
                            help="first guess of the coordinate")
    equilibria.add_argument("--to", dest="stop", type=_finite, required=True,
                            help="last guess of the coordinate")
    equilibria.add_argument("--num", type=_positive_count, default=25,
                            help="number of guesses (default 25)")
    equilibria.add_argument("--param", action="append", type=_assignment,
                            help="a parameter value, name=value (repeatable)")
    equilibria.add_argument("--force", action="store_true", help="rebuild even if cached")
    equilibria.add_argument("--output-dir", default=None, help="where builds are cached")
    equilibria.set_defaults(run=command_equilibria, parser=equilibria)

    listing = commands.add_parser("list", help="list the built-in models")
    listing.set_defaults(run=command_list, parser=listing)

    args = parser.parse_args(argv)
    from .errors import CodegenError
    try:
        return args.run(args)
    except (CodegenError, CommandError, OSError) as error:
        # OSError: a file system failure that the checks before the work could not foresee
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # Ctrl-C: the kernels and builds stop within a fraction of a second and
        # leave nothing half written (builds are installed atomically)
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
