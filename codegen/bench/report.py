"""What a benchmark run measured, and the printed table and JSON of it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from .casadi import VARIANTS as CASADI_VARIANTS
from .common import DISAGREE


@dataclass
class Row:
    """One line of the table: a way to get A and B, per operating point."""

    key: str
    label: str
    min: float | None = None         # seconds per point
    median: float | None = None
    setup: dict = field(default_factory=dict)   # what is paid once: name -> seconds
    max_diff: float | None = None    # max |A - A_ours|, |B - B_ours| at the first point
    status: str = "ok"               # ok, timeout, error, skipped
    note: str = ""
    samples: int = 0


@dataclass
class ModelReport:
    spec: str
    name: str
    sizes: dict
    operation_count: int
    stage_seconds: dict          # stage of our pipeline -> seconds
    rows: list
    code: dict                   # "ours"/"casadi" -> dict(bytes, generate, compile, ...)
    casadi_note: str = ""
    casadi_diff: float | None = None
    targets: list = field(default_factory=list)
    system: str = ""
    scale: float = 1.0           # max(1, max|A|, max|B|) of ours at the first point

    def row(self, key):
        for row in self.rows:
            if row.key == key:
                return row
        return None


def format_time(seconds):
    """Seconds as a short human string: 312 ns, 4.1 us, 2.3 ms, 1.52 s."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= scale or unit == "ns":
            value = seconds / scale
            return f"{value:.3g} {unit}" if value < 1000 else f"{value:.0f} {unit}"
    return "-"


def format_ratio(value):
    if value is None or not math.isfinite(value):
        return "-"
    if value >= 1e4:
        return f"{value:.2e}"
    return f"{value:.3g}"


def _stage_lines(report):
    s = report.sizes
    lines = [f"== {report.name} ({report.spec}): {s['nq']} coordinates ({s['nc']} dependent), "
             f"{s['nu']} speeds ({s['nv']} dependent), {s['nr']} inputs, {s['np']} parameters; "
             f"A is {s['nx']}x{s['nx']}; {report.operation_count} operations after CSE",
             "", "build of our pipeline (forced, empty cache):"]
    for stage, seconds in report.stage_seconds.items():
        lines.append(f"  {stage:<30}{seconds:9.2f} s")
    lines.append(f"  {'total':<30}{sum(report.stage_seconds.values()):9.2f} s")
    return lines


def _time_lines(report):
    base_c = report.row("c_loop")
    base_batch = report.row("batch")
    lines = ["", "time per operating point (min and median over repeats; ratios of minima):"]
    header = (f"  {'route':<44}{'min':>10}{'median':>10}{'x bare C':>10}{'x batch':>10}"
              f"{'max|diff|':>11}  once / note")
    lines.append(header)
    lines.append("  " + "-" * (len(header) - 2 + 12))
    disagreements = []
    for row in report.rows:
        if row.min is not None:
            vs_c = row.min / base_c.min if base_c and base_c.min else None
            vs_batch = row.min / base_batch.min if base_batch and base_batch.min else None
            cells = (f"{format_time(row.min):>10}{format_time(row.median):>10}"
                     f"{format_ratio(vs_c):>10}{format_ratio(vs_batch):>10}")
        else:
            shown = "> limit" if row.status == "timeout" else row.status
            cells = f"{shown:>10}{'':>10}{'-':>10}{'-':>10}"
        diff = "-" if row.max_diff is None else f"{row.max_diff:.1e}"
        if row.max_diff is not None and not row.max_diff <= DISAGREE * report.scale:
            diff += "!"
            disagreements.append(row.label)
        once = ", ".join(f"{k} {format_time(v)}" for k, v in row.setup.items() if v is not None)
        extra = "; ".join(x for x in (once, row.note) if x)
        lines.append(f"  {row.label:<44}{cells}{diff:>11}  {extra}")

    lines.append(f"  (max|diff|: largest |entry of A, B minus ours| at the first benchmark point; "
                 f"max|A| there = {report.scale:.3g})")
    if disagreements:
        lines.append(f"  ! disagrees with ours by more than {DISAGREE:g} x max(1, max|A|): "
                     f"{', '.join(disagreements)}")
    return lines


def _code_lines(report):
    lines = ["", "generated C, ours vs CasADi (same compiler and flags, .c -> .o):"]
    for who in ("ours", *CASADI_VARIANTS):
        info = report.code.get(who)
        if not info:
            continue
        size = f"{info['bytes']:,} bytes" if info.get("bytes") is not None else "-"
        gen = format_time(info.get("generate")) if info.get("generate") is not None else "> limit"
        comp = format_time(info.get("compile")) if info.get("compile") is not None else "> limit"
        what = (f"{report.operation_count} operations after CSE" if who == "ours" else
                f"{info.get('instructions', '-')} SX instructions")
        lines.append(f"  {who:<12}{size:>16}   generated in {gen:>9}   compiled in {comp:>9}   "
                     f"{what}")
    if "casadi" in report.code:
        lines.append("  (generated in: ours = derivation + CSE + emission; CasADi = SX from the "
                     "blocks (ours, or of SymPy's reduced Kane equations) + its code generator)")
    if report.casadi_note:
        lines.append(f"  note: {report.casadi_note}")
    if report.casadi_diff is not None:
        lines.append(f"  CasADi vs ours at the first benchmark point: max |diff| = "
                     f"{report.casadi_diff:.2e}")
    return lines


def format_report(report):
    """The printed table of one model."""
    lines = _stage_lines(report) + _time_lines(report) + _code_lines(report)
    lines += ["", "targets (min times of this run):"]
    for target in report.targets:
        lines.append(f"  [{target.verdict:^4}] {target.text:<54} {target.measured}")
    return "\n".join(lines)


def report_dict(report):
    """JSON-friendly form of a ModelReport."""
    def clean(value):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        return value

    return clean({
        "spec": report.spec, "name": report.name, "sizes": report.sizes,
        "operation_count": report.operation_count, "stage_seconds": report.stage_seconds,
        "rows": [row.__dict__ for row in report.rows], "code": report.code,
        "casadi_note": report.casadi_note, "casadi_diff": report.casadi_diff,
        "scale": report.scale,
        "targets": [t.__dict__ for t in report.targets]})


def write_json(reports, path):
    Path(path).write_text(json.dumps([report_dict(r) for r in reports], indent=2) + "\n")
    return Path(path)
