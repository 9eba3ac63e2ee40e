"""The issues' performance targets, judged on one run's numbers (min times)."""

from __future__ import annotations

from dataclasses import dataclass

from .casadi import VARIANTS as CASADI_VARIANTS
from .report import format_ratio, format_time


@dataclass
class Target:
    text: str
    measured: str
    verdict: str        # PASS, MISS or n/a


def _have(row):
    return row is not None and row.min is not None and row.status == "ok"


def _casadi_target(get, c):
    """Ours vs the strongest peer: the faster CasADi build that finished."""
    peers = [get(key) for key in CASADI_VARIANTS]
    timed = [row for row in peers if _have(row)]
    casadi = min(timed, key=lambda row: row.min) if timed else next((r for r in peers if r), None)
    text = "ours vs CasADi, bare C per call >= 1x (goal 1.5x)"
    if not (_have(c) and _have(casadi)):
        return Target(text, casadi.note if casadi is not None else "not measured", "n/a")
    ratio = casadi.min / c.min
    median_ratio = casadi.median / c.median
    goal = " (goal 1.5x: " + ("met" if ratio >= 1.5 else "not met") + ")"
    return Target(text, f"{ratio:.2f}x (medians {median_ratio:.2f}x){goal} vs the faster "
                  f"CasADi build ({casadi.label.split(':')[0]})", "PASS" if ratio >= 1.0 else "MISS")


def _python_targets(c, batch, single, one_thread):
    out = []
    if _have(c) and _have(one_thread):
        ratio = one_thread.min / c.min
        out.append(Target("batch from Python within 1.5x of bare C (one thread)",
                          f"{ratio:.2f}x; on all threads {batch.min / c.min:.2f}x "
                          f"(speed-up {one_thread.min / batch.min:.2f}x)",
                          "PASS" if ratio <= 1.5 else "MISS"))
    elif _have(c) and _have(batch):
        ratio = batch.min / c.min
        out.append(Target("batch from Python within 1.5x of bare C", f"{ratio:.2f}x",
                          "PASS" if ratio <= 1.5 else "MISS"))
    if _have(c) and _have(single):
        overhead = single.min - c.min
        out.append(Target("single Python call adds <= ~2 us", format_time(overhead),
                          "PASS" if overhead <= 2e-6 else "MISS"))
    return out


def _sympy_targets(get, batch, one_thread):
    def also_one_thread(reference):
        if _have(one_thread) and one_thread is not batch:
            return f"; one thread {format_ratio(reference / one_thread.min)}x"
        return ""

    out = []
    lambdified = [get(k) for k in ("symbolic_AB", "symbolic_MAB")]
    finished = [r for r in lambdified if _have(r)]
    text = ">= 100x (batch) vs SymPy's fastest lambdified route"
    if _have(batch) and finished:
        fastest = min(finished, key=lambda r: r.min)
        ratio = fastest.min / batch.min
        out.append(Target(text, f"{format_ratio(ratio)}x vs {fastest.label} "
                          f"({format_time(fastest.min)}){also_one_thread(fastest.min)}",
                          "PASS" if ratio >= 100 else "MISS"))
    else:
        why = "; ".join(f"{r.label}: {r.note or r.status}" for r in lambdified if r is not None)
        out.append(Target(text, why or "not measured", "n/a"))
    linearizer = get("linearizer")
    text = ">= 1e5x (batch) vs SymPy's numeric Linearizer"
    if _have(batch) and linearizer is not None and linearizer.min is not None:
        ratio = linearizer.min / batch.min
        out.append(Target(text, f"{format_ratio(ratio)}x{also_one_thread(linearizer.min)}",
                          "PASS" if ratio >= 1e5 else "MISS"))
    else:
        out.append(Target(text, (linearizer.note or linearizer.status) if linearizer else
                          "not measured", "n/a"))
    return out


def _local_target(local, plain):
    """linearize_local per point within 2x of linearize (paired batch rows)."""
    text = "linearize_local within 2x of linearize"
    if not (_have(local) and _have(plain)):
        return [Target(text, local.note if local is not None else "not measured", "n/a")]
    ratio = local.min / plain.min
    return [Target(text, f"{ratio:.2f}x ({format_time(local.min)} vs {format_time(plain.min)} "
                   "per point, batch on one thread)", "PASS" if ratio <= 2.0 else "MISS")]


# the lane batch's goals per model (issue "Batches at the hardware limit"):
# vs the scalar batch (one thread, same run), vs the floor, vs CasADi
LANE_GOALS = {"bicycle": dict(scalar=5.0, floor=3.0, casadi=5.0), "disk": dict(scalar=1.8, vector_math=3.0)}


def _lane_targets(report, get):
    goals = LANE_GOALS.get(report.name, {})
    lanes, scalar = get("batch_lanes_1"), get("batch_scalar_1")
    c_batch, floor = get("c_batch"), get("floor")
    out = []
    goal = goals.get("scalar")
    text = f"lane batch vs scalar batch, one thread{f' >= {goal:g}x' if goal else ''}"
    if _have(lanes) and _have(scalar):
        ratio = scalar.min / lanes.min
        out.append(Target(text, f"{ratio:.2f}x ({format_time(lanes.min)} vs {format_time(scalar.min)} "
                          "per point, paired)", ("PASS" if ratio >= goal else "MISS") if goal else "n/a"))
    else:
        out.append(Target(text, "not measured (no lane code)", "n/a"))
    goal = goals.get("vector_math")
    fast = get("batch_vector_math_1")
    text = f"vector-math lanes vs scalar batch, one thread{f' >= {goal:g}x' if goal else ''}"
    if _have(fast) and _have(scalar):
        ratio = scalar.min / fast.min
        out.append(Target(text, f"{ratio:.2f}x ({format_time(fast.min)} vs {format_time(scalar.min)} per "
                          f"point, paired; max|diff| {fast.max_diff:.1e})",
                          ("PASS" if ratio >= goal else "MISS") if goal else "n/a"))
    goal = goals.get("floor")
    text = f"lane batch in C within {goal:g}x of the vector floor" if goal else \
        "lane batch in C vs the vector floor"
    if _have(c_batch) and _have(floor):
        ratio = c_batch.min / floor.min
        out.append(Target(text, f"{ratio:.2f}x ({format_time(c_batch.min)} vs {format_time(floor.min)})",
                          ("PASS" if ratio <= goal else "MISS") if goal else "n/a"))
    peers = [row for row in (get(k) for k in list(CASADI_VARIANTS) + [f"{k}_map" for k in CASADI_VARIANTS])
             if _have(row)]
    goal = goals.get("casadi")
    text = f"lane batch in C vs CasADi's fastest{f' >= {goal:g}x' if goal else ''}"
    if _have(c_batch) and peers:
        fastest = min(peers, key=lambda row: row.min)
        ratio = fastest.min / c_batch.min
        out.append(Target(text, f"{ratio:.2f}x vs {fastest.label}",
                          ("PASS" if ratio >= goal else "MISS") if goal else "n/a"))
    return out


def _sensitivity_targets(get):
    """Sensitivities (issue "Measurements and sensitivities"): every
    parameter at most 10x linearize, one at most 2x (per point, the batch on
    one thread, paired)."""
    out = []
    for key, goal, text in (("sensitivities", 10.0, "sensitivities to every parameter <= 10x linearize"),
                            ("sensitivities_1", 2.0, "sensitivities to one parameter <= 2x linearize")):
        row, plain, scalar = get(key), get(f"{key}_linearize"), get(f"{key}_linearize_scalar")
        if _have(row) and _have(plain):
            ratio = row.min / plain.min
            # against the lanes' batch (the target); the scalar batch's ratio
            # (one point at a time) for reading
            beside = (f"; {row.min / scalar.min:.1f}x the batch without lane code" if _have(scalar) else "")
            out.append(Target(text, f"{ratio:.1f}x ({format_time(row.min)} vs {format_time(plain.min)} per "
                              f"point, paired{beside})", "PASS" if ratio <= goal else "MISS"))
        else:
            out.append(Target(text, "not measured", "n/a"))
    row, plain = get("outputs"), get("outputs_linearize")
    if _have(row) and _have(plain):
        # "no more than their own expressions' cost": no threshold is set on
        # the time (the expressions' cost is not timed apart); the ratio is
        # for reading
        out.append(Target("outputs y, C, D vs linearize of the same build",
                          f"{row.min / plain.min:.2f}x ({format_time(row.min)} vs {format_time(plain.min)} "
                          "per point, paired)", "n/a"))
    return out


def evaluate_targets(report):
    """The issues' performance targets against this run's numbers (min times)."""
    get = report.row
    c, batch, one_thread = get("c_loop"), get("batch"), get("batch_1")
    return ([_casadi_target(get, c)] + _python_targets(c, batch, get("single"), one_thread)
            + _sympy_targets(get, batch, one_thread)
            + _local_target(get("local"), get("local_linearize")) + _lane_targets(report, get)
            + _sensitivity_targets(get))
