"""One benchmark run: every route for each model, printed as soon as measured."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np

from .build import build_with, copy_c_sources, forced_build, form_model
from .c_driver import c_loop_seconds, compile_object, lane_objects, run_c_driver, vector_peak
from .casadi import casadi_sources, casadi_variant
from .common import NPOINTS, Settings, max_abs_diff, min_median, say, system_line
from .points import base_point, benchmark_points, inputs_of
from .python_calls import (batch_threads, time_batch, time_calls, time_local_and_linearize,
                           time_single_call, unchecked)
from .report import ModelReport, Row, format_report, format_time
from .sympy_routes import SYMPY_ROUTES, run_sympy_route
from .targets import evaluate_targets


def bench_model(spec, settings, progress=None):
    """Measure every route for one model; returns a :class:`ModelReport`."""
    work_root = Path(settings.work_dir) if settings.work_dir else None
    if work_root:
        work_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"codegen-bench-{Path(str(spec)).stem}-", dir=work_root))
    try:
        return _bench_model(spec, settings, work, progress)
    finally:
        if not settings.work_dir:
            shutil.rmtree(work, ignore_errors=True)


def _c_rows(c, c_again, settings, A_ref, B_ref):
    """Our bare C loop: the faster of the runs before and after the Python rows
    (the machine's speed drifts on shared cores), and the loop without the
    check; the lane batch in C, timed alternating with the loop (its ratio
    to the loop is the in-run ratio)."""
    best = c_again if c_again.ours[0] < c.ours[0] else c
    which = " (faster of two runs, before and after the Python rows)" if best is c_again else \
        " (faster of two runs)"
    rows = [Row("c_loop", "ours: bare C loop (no Python)", *c_loop_seconds(best),
                max_diff=max(max_abs_diff(c.A, A_ref), max_abs_diff(c.B, B_ref)),
                note=f"{c.iterations} calls per repeat{which}", samples=settings.c_repeats),
            Row("c_loop_nocheck", "ours: bare C loop, no constraint check",
                *(v * 1e-9 for v in c.ours_nocheck), max_diff=None,
                note="tol < 0: f_c, f_v not evaluated", samples=settings.c_repeats)]
    if best.batch is not None:
        scalar = best.ours[0]
        rows.append(Row("c_batch", "ours: lane batch in C (linearize_batch)",
                        *(v * 1e-9 for v in best.batch), max_diff=max_abs_diff(best.A_batch, A_ref),
                        note=f"{scalar / best.batch[0]:.2f}x the C loop in the same run; "
                             f"batches of {NPOINTS}", samples=settings.c_repeats))
    return rows


def _floor_row(artifact, work):
    """The vector floor: linearize's arithmetic per point over the measured
    peak of separate multiplies and adds in the lane code's instructions."""
    fast = artifact.record.get("lanes", {})
    if "operations" not in fast:
        return Row("floor", "vector floor (estimate)", status="skipped",
                   note="the build has no lane code")
    peak, _ = vector_peak(work)
    seconds = fast["operations"] / peak * 1e-9
    return Row("floor", "vector floor (estimate)", seconds, seconds,
               note=f"{fast['operations']} operations per point / {peak:.1f} flops per ns measured "
                    f"(multiply and add, {fast.get('target')}); {fast.get('math_calls', 0)} math "
                    "calls not counted")


def _python_rows(module, points, settings, scalar=None, vector_math=None):
    threads = batch_threads(module)
    rows = [Row("batch", f"ours: batch of {settings.batch_size} in one call",
                *time_batch(module, points, settings), max_diff=0.0,
                note=(f"{threads} threads" if threads > 1 else "one thread"),
                samples=settings.batch_repeats)]
    if threads > 1:
        rows.append(Row("batch_1", "ours: the same batch on one thread",
                        *time_batch(module, points, settings, threads=1), max_diff=0.0,
                        note="threads=1", samples=settings.batch_repeats))
    if scalar is not None:
        # alternating with the lane build's (and the vector-math build's), so
        # that all see the same machine
        builds = [module, scalar] + ([vector_math] if vector_math is not None else [])
        times = [[] for _ in builds]
        for _ in range(2):
            for build, samples in zip(builds, times):
                samples.append(time_batch(build, points, settings, threads=1))
        lanes_best, scalar_best = min(times[0]), min(times[1])
        rows.append(Row("batch_scalar_1", "ours without lane code: the batch, one thread",
                        *scalar_best, max_diff=0.0,
                        note=f"CODEGEN_LANES=off; the lanes {scalar_best[0] / lanes_best[0]:.2f}x "
                             "faster in the same run (paired)", samples=2 * settings.batch_repeats))
        rows.append(Row("batch_lanes_1", "ours: the batch, one thread (paired)", *lanes_best,
                        max_diff=0.0, note="alternating with the row above",
                        samples=2 * settings.batch_repeats))
        if vector_math is not None:
            best = min(times[2])
            A, _ = unchecked(vector_math.linearize)(points.q, points.u, inputs_of(module, points.r),
                                                     points.p, points.t)
            A_exact, _ = unchecked(module.linearize)(points.q, points.u, inputs_of(module, points.r),
                                                      points.p, points.t)
            rows.append(Row("batch_vector_math_1", "ours, vector math: the batch, one thread", *best,
                            max_diff=float(np.abs(A - A_exact).max()),
                            note=f"CODEGEN_VECTOR_MATH=1 (libmvec, fused multiply-add); "
                                 f"{scalar_best[0] / best[0]:.2f}x the scalar batch (paired); "
                                 "max|diff| against the bit-identical lanes",
                            samples=2 * settings.batch_repeats))
    rows.append(Row("single", "ours: one linearize call from Python",
                    *time_single_call(module, points, settings), max_diff=0.0,
                    samples=settings.py_repeats))
    return rows + _local_rows(module, points, settings)


def _local_rows(module, points, settings):
    """linearize_local and linearize on the same batch, one thread, alternating
    (the target: linearize_local per point within 2x of linearize)."""
    measured = time_local_and_linearize(module, points, settings)
    if measured is None:
        return [Row("local", "ours: linearize_local, batch, one thread", status="skipped",
                    note="the module has no linearize_local (built by an older codegen)")]
    (local_min, local_median), (plain_min, plain_median) = measured
    return [Row("local_linearize", "ours: linearize, batch, one thread (paired)", plain_min,
                plain_median, max_diff=0.0, note="alternating with linearize_local",
                samples=settings.batch_repeats),
            Row("local", "ours: linearize_local, batch, one thread", local_min, local_median,
                max_diff=None, note=f"{local_min / plain_min:.2f}x linearize (paired); A in the "
                "local chart, not comparable entrywise", samples=settings.batch_repeats)]


def _casadi_row(variant, c_ours, A_ref, B_ref, settings):
    """A CasADi build's row; ours and CasADi were timed in the same process, so
    CasADi's times are scaled by ours in that run: the ratio to the ours row is
    the in-run ratio."""
    label = f"{variant['label']}: bare C loop"
    if not variant["ok"]:
        return Row(variant["key"], label, status=variant["status"], note=variant["note"]), None
    run = variant["run"]
    diff = max(max_abs_diff(run.A_casadi, A_ref), max_abs_diff(run.B_casadi, B_ref))
    ours_then = min_median(run.ours)[0]
    factor = (c_ours.min / (ours_then * 1e-9)) if ours_then else 1.0
    return Row(variant["key"], label, *(v * 1e-9 * factor for v in run.casadi), max_diff=diff,
               setup={"CasADi SX + codegen": variant["code"]["generate"],
                      "compile": variant["code"]["compile"]},
               note=f"ours {ours_then:.0f} ns in the same run", samples=settings.c_repeats), diff


def _casadi_map_row(variant, c_ours, settings):
    """CasADi's own batch (its map of the function over the points), timed in
    the same driver run, scaled like its function's row."""
    run = variant["run"]
    ours_then = min_median(run.ours)[0]
    factor = (c_ours.min / (ours_then * 1e-9)) if ours_then else 1.0
    return Row(f"{variant['key']}_map", f"{variant['label']}: its map over {NPOINTS} points",
               *(v * 1e-9 * factor for v in run.casadi_map), max_diff=None,
               note=f"CasADi's Function.map (serial), same flags; ours {ours_then:.0f} ns in that run",
               samples=settings.c_repeats)


def _sensitivity_rows(model, module, points, settings, work, progress, scalar=None):
    """The sensitivities with respect to every parameter and to one (the
    first), per point on a batch, one thread, alternating with linearize's
    batch of the same points (the model built without sensitivities) and,
    where there is one, with its build without lane code (``scalar``: one
    point at a time; the note gives that ratio too, the target is against
    the lanes')."""
    if not settings.sensitivities or not hasattr(model, "with_sensitivities") or not model.parameters:
        return [Row("sensitivities", "ours: sensitivities, every parameter", status="skipped",
                     note="--no-sensitivities" if not settings.sensitivities else "no parameters")]
    rows = []
    for key, chosen in (("sensitivities", "all"), ("sensitivities_1", [model.p_names[0]])):
        say(progress, f"{model.name}: built with sensitivities to {chosen if chosen == 'all' else chosen[0]}")
        sensitive = build_with(model.with_sensitivities(chosen), work / f"build_{key}")
        count = len(sensitive.sensitivity_names)
        calls = [sensitive.sensitivities, module.linearize] + ([scalar.linearize] if scalar else [])
        sens, plain, *rest = time_calls(calls, points, settings)
        one_at_a_time = rest[0] if rest else None
        label = (f"ours: sensitivities, all {count} parameters" if chosen == "all"
                 else f"ours: sensitivities, one parameter ({chosen[0]})")
        against_scalar = (f"; {sens[0] / one_at_a_time[0]:.1f}x its batch without lane code "
                          f"({format_time(one_at_a_time[0])})" if one_at_a_time else "")
        rows.append(Row(key, label, *sens, max_diff=None,
                        note=f"{sens[0] / plain[0]:.1f}x linearize's batch in the same run "
                             f"({format_time(plain[0])} per point; {sens[0] / plain[0] / count:.2f}x "
                             f"per parameter){against_scalar}; batch, one thread",
                        samples=2 * settings.batch_repeats))
        rows.append(Row(f"{key}_linearize", "ours: linearize, batch, one thread (paired)", *plain,
                        max_diff=None, note="alternating with the row above",
                        samples=2 * settings.batch_repeats))
        if one_at_a_time:
            rows.append(Row(f"{key}_linearize_scalar", "ours without lane code: linearize, batch (paired)",
                            *one_at_a_time, max_diff=None,
                            note="CODEGEN_LANES=off, alternating with the rows above",
                            samples=2 * settings.batch_repeats))
    return rows


def _output_rows(model_module, points, settings, work, progress):
    """The outputs' y, C and D per point against linearize of the same
    build (lanes off: both one point at a time), for a model whose
    ``make_model`` takes ``outputs=True``."""
    import inspect

    make = getattr(model_module, "make_model", None)
    if make is None or "outputs" not in inspect.signature(make).parameters:
        return []
    say(progress, f"{model_module.__name__}: built with outputs")
    module = build_with(make(outputs=True), work / "build_outputs", CODEGEN_LANES="off")
    outputs, plain = time_calls([module.outputs, module.linearize], points, settings)
    return [Row("outputs", f"ours: outputs y, C, D ({len(module.y_names)} outputs)", *outputs,
                max_diff=None, note=f"{outputs[0] / plain[0]:.2f}x linearize of the same build "
                                    f"({format_time(plain[0])} per point); batch, one thread, lanes off",
                samples=2 * settings.batch_repeats),
            Row("outputs_linearize", "ours: linearize, the outputs' build (paired)", *plain,
                max_diff=None, note="alternating with the row above", samples=2 * settings.batch_repeats)]


def _sympy_rows(spec, model, points, settings, A_ref, B_ref, progress):
    if not settings.sympy:
        return [Row(route, SYMPY_ROUTES[route][0], status="skipped", note="--no-sympy")
                for route in settings.sympy_routes]
    if getattr(model, "kane", None) is None:
        return [Row(route, SYMPY_ROUTES[route][0], status="skipped",
                    note="the model's KanesMethod is not available")
                for route in settings.sympy_routes]
    rows = []
    sympy_points = [points.row(i) for i in range(min(len(points), 16))]
    for route in settings.sympy_routes:
        say(progress, f"{model.name}: {SYMPY_ROUTES[route][0]} (limit {settings.sympy_limit:g} s)")
        row, A, B = run_sympy_route(spec, route, sympy_points, settings)
        if A is not None:
            row.max_diff = max(max_abs_diff(A, A_ref), max_abs_diff(B, B_ref))
        rows.append(row)
    return rows


def _bench_model(spec, settings, work, progress):
    say(progress, f"{spec}: forming the equations")
    model, model_module, formed = form_model(spec)
    name = model.name
    say(progress, f"{name}: forced build (derivation, CSE, emission, compile)")
    artifact, module, imported = forced_build(model, work / "build")
    stages = {"equations of motion (model)": formed, **artifact.timings, "import": imported}
    sizes = dict(nq=module.nq, nu=module.nu, nr=module.nr, np=module.np, nc=module.nc,
                 nv=module.nv, nx=module.nx)
    c_dir = work / "c"
    code = {"ours": {"bytes": copy_c_sources(artifact, name, c_dir),
                     "generate": sum(artifact.timings.get(k, 0.0)
                                     for k in ("derivation", "CSE", "emission"))}}

    # CasADi: generate (forked child, before anything else runs threads) and compile,
    # from our derivation and from the KanesMethod's symbolically reduced one
    variants = []
    for key, label, source in casadi_sources(model, artifact):
        variant = casadi_variant(key, label, source, f"{name}_{key}", c_dir, settings, progress, name)
        code[key] = variant["code"]
        variants.append(variant)
    code["ours"]["compile"], _ = compile_object(c_dir / f"{name}.c", c_dir, model=True)
    objects, lane_defines = lane_objects(c_dir, name)

    points = benchmark_points(module, base_point(module, spec, model_module), seed=settings.seed)
    # the benchmark's points move on purpose: no NotSteadyWarning
    A_ref, B_ref = unchecked(module.linearize)(points.q[0], points.u[0], inputs_of(module, points.r[0]),
                                                points.p, float(points.t[0]))

    say(progress, f"{name}: C loop and lane batch")
    c = run_c_driver(c_dir, name, points, settings, objects, None, module.nx, module.nr,
                     lanes=lane_defines)
    for variant in (v for v in variants if v["ok"]):
        say(progress, f"{name}: C loop, ours and {variant['label']}, alternating")
        try:
            variant["run"] = run_c_driver(c_dir, name, points, settings,
                                          [*objects, c_dir / f"{variant['name']}.o"],
                                          variant["name"], module.nx, module.nr, lanes=lane_defines)
        except RuntimeError as error:
            variant["ok"] = False
            variant["note"] = f"the C driver with CasADi's code failed ({error})"
    say(progress, f"{name}: the same model without lane code (CODEGEN_LANES=off)")
    scalar = build_with(model, work / "build_scalar", CODEGEN_LANES="off") if lane_defines else None
    vector_math = None
    if lane_defines:
        say(progress, f"{name}: the same model with vector math in the lanes (CODEGEN_VECTOR_MATH=1)")
        try:
            vector_math = build_with(model, work / "build_vector_math", CODEGEN_VECTOR_MATH="1")
        except Exception as error:     # no libmvec here: the row says so
            say(progress, f"{name}: no vector-math build ({error})")
    say(progress, f"{name}: Python: batch and single calls")
    python_rows = _python_rows(module, points, settings, scalar, vector_math)
    c_again = run_c_driver(c_dir, name, points, settings, objects, None, module.nx, module.nr,
                           lanes=lane_defines)
    rows = _c_rows(c, c_again, settings, A_ref, B_ref) + [_floor_row(artifact, work)] + python_rows

    casadi_diff = None
    for variant in variants:
        row, diff = _casadi_row(variant, rows[0], A_ref, B_ref, settings)
        rows.append(row)
        if variant["ok"] and variant["run"].casadi_map is not None:
            rows.append(_casadi_map_row(variant, rows[0], settings))
        if diff is not None:
            casadi_diff = diff if casadi_diff is None else max(casadi_diff, diff)
    rows += _sensitivity_rows(model, module, points, settings, work, progress, scalar)
    rows += _output_rows(model_module, points, settings, work, progress)
    rows += _sympy_rows(spec, model, points, settings, A_ref, B_ref, progress)

    report = ModelReport(spec=str(spec), name=name, sizes=sizes,
                         operation_count=int(artifact.record.get("operation_count", -1)),
                         stage_seconds=stages, rows=rows, code=code,
                         casadi_note="; ".join(v["note"] for v in variants if v["note"]),
                         casadi_diff=casadi_diff,
                         scale=float(max([1.0, np.max(np.abs(A_ref), initial=0.0),
                                          np.max(np.abs(B_ref), initial=0.0)])))
    report.targets = evaluate_targets(report)
    return report


def default_models():
    from ..models import BUILTIN
    return ["disk"] + (["bicycle"] if "bicycle" in BUILTIN else [])


def run(models=None, settings=None, out=print, progress=None):
    """Benchmark ``models`` (default: disk, and bicycle when it is registered);
    prints each table through ``out`` as soon as it is measured; returns the reports."""
    settings = settings or Settings()
    models = list(models) if models else default_models()
    out(f"codegen bench: {', '.join(models)}")
    out(f"  machine: {system_line()}")
    out(f"  repeats: C {settings.c_repeats} x ~{format_time(settings.c_repeat_seconds)}, "
        f"single call {settings.py_repeats}, batch {settings.batch_repeats}, "
        f"numeric Linearizer {settings.linearizer_repeats} (after one warm-up), "
        f"lambdified {settings.lambdified_repeats}; "
        f"SymPy limit {settings.sympy_limit:g} s per route, "
        f"CasADi limit {settings.casadi_limit:g} s")
    reports = []
    for spec in models:
        try:
            report = bench_model(spec, settings, progress)
        except Exception as error:  # one model's failure must not lose the others' results
            if len(models) == 1:
                raise
            out(f"\n== {spec}: benchmark failed: {type(error).__name__}: {error}")
            continue
        report.system = system_line()
        out("")
        out(format_report(report))
        reports.append(report)
    return reports
