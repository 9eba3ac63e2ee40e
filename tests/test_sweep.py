"""Eigenvalue sweeps: the disk's critical speed 1/sqrt(3) from the generated module."""

import csv
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import codegen
from codegen.sweep import sweep


def test_disk_sweep_finds_the_critical_speed(disk):
    result = sweep(disk, lambda **kw: codegen.operating_point("disk", "upright", **kw), "v",
                   0.0, 1.2, 25)
    assert result.eigenvalues.shape == (25, 8)
    assert len(result.transitions) == 1
    transition = result.transitions[0]
    assert abs(transition.value - 1 / math.sqrt(3)) < 1e-9
    assert transition.mode == "real" and transition.unstable_side == "below"


def test_descending_sweep_says_which_side_is_unstable_by_value(disk):
    """From 1.2 down to 0: the disk is still unstable below its critical speed
    (smaller v), in the result, the figure's label and its shaded stable range."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from codegen.sweep import _stable_intervals, sweep_figure
    result = sweep(disk, lambda **kw: codegen.operating_point("disk", "upright", **kw), "v",
                   1.2, 0.0, 25)
    assert result.values[0] == 1.2 and result.values[-1] == 0.0
    [transition] = result.transitions
    assert abs(transition.value - 1 / math.sqrt(3)) < 1e-9
    assert transition.mode == "real" and transition.unstable_side == "below"
    [(low, high)] = _stable_intervals(result)
    assert abs(low - 1 / math.sqrt(3)) < 1e-9 and high == 1.2
    figure = sweep_figure(result, "disk")
    [label] = [text.get_text() for text in figure.axes[0].texts]
    assert "unstable below" in label
    assert figure.axes[0].get_xlim() == (0.0, 1.2)
    plt.close(figure)


def test_sweep_cli_writes_csv_and_png(tmp_path, disk, build_dir):
    """A descending sweep from the command line (the disk of the session: found by its key)."""
    out = tmp_path / "disk_sweep"
    result = subprocess.run([sys.executable, "-m", "codegen", "sweep", "disk", "--param", "v", "--from", "1",
                             "--to", "0", "--num", "11", "--out", str(out), "--output-dir", str(build_dir)],
                            capture_output=True, text=True, env=dict(os.environ, CI="true"))
    assert result.returncode == 0, result.stderr
    assert "v = 0.57735026919" in result.stdout and "(real mode unstable below)" in result.stdout
    rows = list(csv.reader(out.with_suffix(".csv").open()))
    assert rows[0][:3] == ["v", "re0", "im0"] and len(rows) == 12
    values = np.array(rows[1:], dtype=float)
    assert np.allclose(values[:, 0], np.linspace(1, 0, 11))
    png = out.with_suffix(".png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10000


def test_bicycle_sweep_cli_prints_weave_and_capsize_speeds(bicycle, build_dir, tmp_path):
    """The classic figure of the benchmark paper; the build comes from the
    session's bicycle through the built-in recipe cache."""
    out = tmp_path / "bicycle_sweep"
    result = subprocess.run([sys.executable, "-m", "codegen", "sweep", "bicycle", "--from", "0", "--to", "10",
                             "--num", "41", "--out", str(out), "--output-dir", str(build_dir)],
                            capture_output=True, text=True, env=dict(os.environ, CI="true"))
    assert result.returncode == 0, result.stderr
    lines = {line.split(":")[0].strip(): line for line in result.stdout.splitlines() if "speed:" in line}
    weave = float(lines["weave speed"].split("=")[1].split()[0])
    capsize = float(lines["capsize speed"].split("=")[1].split()[0])
    assert abs(weave - 4.29238253634111) < 1e-9 and abs(capsize - 6.02426201538837) < 1e-9
    rows = list(csv.reader(out.with_suffix(".csv").open()))
    assert len(rows) == 42 and rows[0][0] == "v"
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
