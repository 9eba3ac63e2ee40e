"""Eigenvalue sweeps: the disk's critical speed 1/sqrt(3) from the generated module."""

import csv
import math
import os
import subprocess
import sys

import numpy as np

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


def test_sweep_cli_writes_csv_and_png(tmp_path):
    out = tmp_path / "disk_sweep"
    result = subprocess.run([sys.executable, "-m", "codegen", "sweep", "disk", "--param", "v", "--from", "0",
                             "--to", "1", "--num", "11", "--out", str(out), "--output-dir", str(tmp_path / "gen")],
                            capture_output=True, text=True, env=dict(os.environ, CI="true"))
    assert result.returncode == 0, result.stderr
    assert "v = 0.57735026919" in result.stdout
    rows = list(csv.reader(out.with_suffix(".csv").open()))
    assert rows[0][:3] == ["v", "re0", "im0"] and len(rows) == 12
    values = np.array(rows[1:], dtype=float)
    assert np.allclose(values[:, 0], np.linspace(0, 1, 11))
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
