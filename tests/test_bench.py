"""The benchmark and scaling commands, in quick mode (tiny repeat counts).

These check the machinery, not the speed: every row is there, every time is
positive, every route agrees with our module at the benchmark point, a SymPy
route past its time limit is cut off and reported, and CasADi's generated C
(when casadi is installed) gives our numbers. The performance targets are
benchmarks (python -m codegen bench), not timed tests.
"""

import csv
import json
import math
import os
import subprocess

import pytest

from codegen import bench
from codegen.__main__ import main
from test_readme import RUN_ELSEWHERE, blocks as readme_blocks, shell_commands

# the README's benchmark command (tests/test_readme.py leaves it to disk_bench below)
README_BENCH, = RUN_ELSEWHERE

ROWS = ["ours: bare C loop (no Python)", "ours: batch of 10000 in one call",
        "ours: one linearize call from Python", "CasADi, our blocks (multiplier form): bare C loop",
        "CasADi, SymPy-reduced Kane blocks: bare C loop",
        "SymPy Linearizer, numeric op point", "SymPy symbolic A, B + lambdify",
        "SymPy symbolic M, A, B + lambdify + solve", "constrained central FD, lambdified RHS",
        "ours: sensitivities, all 3 parameters", "ours: sensitivities, one parameter (m)",
        "ours without lane code: the batch, one thread", "lane batch in C (linearize_batch)",
        "ours: outputs y, C, D (7 outputs)"]


def readme_command(start):
    """The README's shell command that starts with ``start``, as printed."""
    for kind, body, _ in readme_blocks():
        if kind == "bash":
            for command in shell_commands(body):
                if command.startswith(start):
                    return command
    raise AssertionError(f"README.md has no command starting with {start!r}")


@pytest.fixture(scope="module")
def disk_bench(tmp_path_factory):
    """The README's ``python -m codegen bench disk --quick --json bench_disk.json``
    once, as printed, in a folder of its own (tests/test_readme.py leaves this
    command to this fixture instead of running it a second time): (printed
    text, JSON report)."""
    where = tmp_path_factory.mktemp("bench")
    command = readme_command(README_BENCH)
    result = subprocess.run(["bash", "-c", command], cwd=where, capture_output=True, text=True,
                            env=dict(os.environ, OPENBLAS_NUM_THREADS="1", MPLBACKEND="Agg"),
                            timeout=1200)
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    # its points move on purpose: it asks for no steadiness check, and warns of none
    assert "NotSteadyWarning" not in result.stderr, result.stderr
    return result.stdout, json.loads((where / "bench_disk.json").read_text())[0]


def test_bench_prints_every_row_stage_and_target(disk_bench):
    text, _ = disk_bench
    for label in ROWS:
        assert label in text, label
    for stage in ("equations of motion (model)", "derivation", "CSE", "emission", "kernel",
                  "compile", "operations after CSE"):
        assert stage in text, stage
    for target in ("ours vs CasADi", "batch from Python within 1.5x of bare C",
                   "single Python call adds", ">= 100x (batch)", ">= 1e5x (batch)",
                   "lane batch vs scalar batch", "sensitivities to every parameter",
                   "sensitivities to one parameter", "outputs y, C, D vs linearize of the same build"):
        assert target in text, target
    assert "x bare C" in text and "x batch" in text


def test_bench_times_are_positive_and_routes_agree(disk_bench):
    _, report = disk_bench
    rows = {row["key"]: row for row in report["rows"]}
    assert report["operation_count"] > 0
    assert all(seconds >= 0 for seconds in report["stage_seconds"].values())
    for key in ("c_loop", "c_loop_nocheck", "batch", "single", "linearizer", "symbolic_AB",
                "symbolic_MAB", "finite_differences"):
        row = rows[key]
        assert row["status"] == "ok", (key, row["note"])
        assert 0 < row["min"] <= row["median"] < 60, key
    assert rows["c_loop"]["min"] < rows["single"]["min"]
    assert rows["batch"]["min"] < rows["linearizer"]["min"]
    # the bare C in the driver and the Python module are the same code
    assert rows["c_loop"]["max_diff"] < 1e-13
    for key in ("linearizer", "symbolic_AB", "symbolic_MAB"):
        assert rows[key]["max_diff"] < 1e-9, key
    assert rows["finite_differences"]["max_diff"] < 1e-6
    verdicts = {t["text"]: t["verdict"] for t in report["targets"]}
    assert set(verdicts.values()) <= {"PASS", "MISS", "n/a"}


def test_bench_casadi_agrees_with_ours(disk_bench):
    pytest.importorskip("casadi")
    text, report = disk_bench
    rows = {row["key"]: row for row in report["rows"]}
    for key in ("casadi", "casadi_kane"):   # our blocks, and SymPy's reduced Kane blocks
        row = rows[key]
        assert row["status"] == "ok", row["note"]
        assert 0 < row["min"] <= row["median"]
        assert row["max_diff"] < 1e-12
    assert report["casadi_diff"] < 1e-12
    assert report["code"]["casadi"]["bytes"] > 0 and report["code"]["casadi"]["compile"] > 0
    assert "CasADi vs ours at the first benchmark point" in text


def test_sympy_route_past_its_limit_is_cut_off(tmp_path):
    settings = bench.Settings.quick(sympy_limit=0.05)
    points = [dict(t=0.0, q=[0.0] * 6, u=[0.0] * 6, r=[], p=[1.0, 1.0, 1.0], qd=[0.0] * 6,
                   ud=[0.0] * 6)]
    row, A, B = bench.run_sympy_route("disk", "symbolic_AB", points, settings)
    assert row.status == "timeout" and A is None
    assert "> 0.05 s limit" in row.note
    report = bench.ModelReport("disk", "disk", dict(nq=6, nu=6, nr=0, np=3, nc=1, nv=3, nx=8), 1,
                               {}, [row], {})
    assert "> limit" in bench.format_report(report)


def test_scaling_writes_table_csv_and_png(tmp_path, capsys):
    assert main(["scaling", "--sizes", "2", "3", "--repeats", "2", "--batch", "100",
                 "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "ops after CSE" in printed and "bare C us" in printed
    with open(tmp_path / "scaling.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["n"]) for r in rows] == [2, 3]
    for r in rows:
        for key in ("operations", "model_s", "derive_s", "cse_emit_s", "compile_s", "c_loop_us",
                    "batch_us", "single_us"):
            assert math.isfinite(float(r[key])) and float(r[key]) > 0, key
    assert int(rows[1]["operations"]) > int(rows[0]["operations"])
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    png = tmp_path / "scaling.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_scaling_of_the_fourbar(tmp_path, capsys):
    """The other families: sizes are loops (four-bar) or elements (flexible
    pendulum); the point they are timed at is consistent."""
    assert main(["scaling", "--model", "fourbar", "--sizes", "1", "2", "--repeats", "2",
                 "--batch", "50", "--out", str(tmp_path)]) == 0
    assert "N-loop four-bar" in capsys.readouterr().out
    with open(tmp_path / "scaling_fourbar.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["n"]) for r in rows] == [1, 2] and [int(r["nc"]) for r in rows] == [4, 6]
    assert all(float(r["c_loop_us"]) > 0 for r in rows)


@pytest.mark.parametrize("changes", [dict(batch_size=0), dict(batch_size=-1), dict(c_repeats=0),
                                     dict(batch_repeats=2.5), dict(sympy_limit=float("nan")),
                                     dict(casadi_limit=0.0), dict(c_repeat_seconds=-1.0)])
def test_settings_refuse_counts_and_times_that_cannot_be(changes):
    """A batch of 0 points divided by zero, -1 gave negative times per point."""
    from codegen.errors import InputError
    with pytest.raises(InputError, match=next(iter(changes))):
        bench.Settings.quick(**changes)


@pytest.mark.parametrize("arguments, message", [(dict(sizes=[-2]), "size n"),
                                                (dict(sizes=[]), "at least one size"),
                                                (dict(sizes=[2], repeats=0), "repeats"),
                                                (dict(sizes=[2], batch_size=0), "batch_size"),
                                                (dict(sizes=[2], family="pendulum"), "unknown model"),
                                                (dict(sizes=[2], family="fourbar", closed=True),
                                                 "cart chain only"),
                                                (dict(sizes=[2], against="no-such-revision-7f3"),
                                                 "--against no-such-revision-7f3")])
def test_scaling_refuses_bad_arguments_before_building(tmp_path, arguments, message):
    from codegen.bench import scaling
    from codegen.errors import InputError
    with pytest.raises(InputError, match=message):
        scaling.run(out_dir=tmp_path / "out", out=lambda text: None, **arguments)
    assert not (tmp_path / "out").exists()


def _git_head():
    import subprocess
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    return root, (done.stdout.strip() if done.returncode == 0 else None)


def test_against_unpacks_the_revisions_own_files(tmp_path):
    """--against builds with the revision's code: its files as git holds them
    (compared with git show), not this tree's."""
    import subprocess
    from codegen.bench import scaling
    root, head = _git_head()
    if head is None:
        pytest.skip("not a git checkout")
    revision = scaling.unpack_revision("HEAD", tmp_path)
    assert revision.commit == head and revision.name == "HEAD"
    for path in ("codegen/__main__.py", "templates/helpers.c", "setup.py"):
        committed = subprocess.run(["git", "-C", str(root), "show", f"HEAD:{path}"],
                                   capture_output=True, check=True).stdout
        assert (revision.source / path).read_bytes() == committed, path
    assert not (revision.source / ".git").exists()


def test_against_columns_name_the_revision():
    from codegen.bench import scaling
    row = dict(n=2, nx=4, nc=1, operations=10, c_bytes=100, model_s=1.0, derive_s=1.0,
               cse_emit_s=1.0, kernel_s=1.0, compile_s=1.0, total_s=5.0, c_loop_us=1.0,
               c_loop_median_us=1.0, batch_us=1.0, batch_1_us=1.0, threads=1, single_us=2.0,
               against="v0.1", against_c_loop_us=1.0, against_us=3.0, against_median_us=3.5,
               speedup=3.0, speedup_median=3.5, against_difference=0.0)
    header = scaling.format_table([row]).splitlines()[0]
    assert "v0.1 C us" in header and "x faster" in header and "A vs v0.1" in header
    assert "REV" not in header and "{}" not in header
