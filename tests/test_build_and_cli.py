"""The user's path: the CLI on a model, the build cache, atomic installation."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import codegen
from codegen import compile as compile_stage
from codegen.errors import BuildError
from codegen.pipeline import build_artifact

USER_MODEL = '''
import sympy as sm
import sympy.physics.mechanics as me
from codegen import Model


def make_model():
    """A damped mass on a spring, driven by a force F."""
    x, v = me.dynamicsymbols("x v")
    F = me.dynamicsymbols("F")
    m, k, c = sm.symbols("m k c")
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    P = O.locatenew("P", x * N.x)
    P.set_vel(N, v * N.x)
    kane = me.KanesMethod(N, q_ind=[x], u_ind=[v], kd_eqs=[x.diff() - v])
    kane.kanes_equations([me.Particle("particle", P, m)], [(P, (F - k * x - c * v) * N.x)])
    return Model(kane, parameters={m: 2.0, k: 8.0, c: 0.4}, inputs=[F], name="spring")
'''


def run_cli(*args, cwd=None):
    env = dict(os.environ, CI="true")
    return subprocess.run([sys.executable, "-m", "codegen", *args], capture_output=True, text=True,
                          env=env, cwd=cwd)


def test_cli_build_disk_prints_eigenvalues(tmp_path):
    result = run_cli("build", "disk", "--output-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "coordinates q (6, dependent ['q6'])" in out
    assert "eigenvalues of A at upright(v=0.5)" in out
    assert "-0.447214, 0, 0, 0, 0, 0, 0, 0.447214" in out
    for stage in ("derivation", "CSE", "emission", "cython", "compile"):
        assert stage in out
    assert (tmp_path / "disk").is_symlink()
    again = run_cli("build", "disk", "--output-dir", str(tmp_path))
    assert "(cached build)" in again.stdout and "compile" not in again.stdout.split("timings:")[1].split("output:")[0]


def test_cli_builds_a_user_file_and_list_names_builtins(tmp_path):
    model_file = tmp_path / "spring.py"
    model_file.write_text(USER_MODEL)
    result = run_cli("build", f"{model_file}:make_model", "--output-dir", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    # x'' = (F - k x - c x')/m: eigenvalues of [[0, 1], [-4, -0.2]]
    expected = np.linalg.eigvals([[0.0, 1.0], [-4.0, -0.2]])
    assert f"{expected[0].real:.6g}" in result.stdout
    listing = run_cli("list")
    assert listing.returncode == 0
    from codegen.models import BUILTIN
    assert [line.split()[0] for line in listing.stdout.splitlines()] == sorted(BUILTIN)


def test_cli_reports_model_errors(tmp_path):
    model_file = tmp_path / "bad.py"
    model_file.write_text(USER_MODEL.replace("parameters={m: 2.0, k: 8.0, c: 0.4}", "parameters={m: 2.0, k: 8.0}"))
    result = run_cli("build", f"{model_file}:make_model", "--output-dir", str(tmp_path))
    assert result.returncode == 1
    assert "not declared parameters: c" in result.stderr


def test_import_generated_package(tmp_path):
    """``import generated.<name>`` works from the directory holding ``generated/``."""
    model_file = tmp_path / "spring.py"
    model_file.write_text(USER_MODEL)
    model = codegen.load_model_file(f"{model_file}:make_model")
    codegen.build(model, output_dir=tmp_path / "generated")
    script = ("import generated.spring as s; A, B = s.linearize([0.0], [0.0], [1.0]); "
              "print(A.tolist(), B.tolist(), s.r_names)")
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[[0.0, 1.0], [-4.0, -0.2]] [[0.0], [0.5]] ('F',)"


def test_cache_hit_force_and_failed_build(tmp_path, disk_model, monkeypatch):
    first = build_artifact(disk_model, tmp_path)
    assert not first.cached
    second = build_artifact(disk_model, tmp_path)
    assert second.cached and second.package_dir == first.package_dir
    assert "derivation" not in second.timings

    # a build that fails (here: the compiler) leaves the previous build in place
    # and no half-written directory behind
    monkeypatch.setenv("CC", "false")
    with pytest.raises(BuildError):
        build_artifact(disk_model, tmp_path, force=True)
    monkeypatch.delenv("CC")
    assert (tmp_path / "disk").resolve() == first.package_dir.resolve()
    leftovers = [p.name for p in (tmp_path / ".builds").iterdir() if p.name.startswith(".")]
    assert leftovers == []
    module = codegen.load("disk", tmp_path)
    assert module.nx == 8

    forced = build_artifact(disk_model, tmp_path, force=True)
    assert not forced.cached and (forced.package_dir / "build.json").exists()


def test_concurrent_builds_agree(tmp_path):
    """Two processes building the same model at once both end with a working module."""
    script = ("import sys, codegen; from codegen.models import disk; "
              "m = codegen.build(disk.make_model(), output_dir=sys.argv[1]); print(m.nx)")
    processes = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        assert out.strip() == "8"
    # one finished build, one key link leading to it, no temporaries
    builds = sorted((tmp_path / ".builds").iterdir(), key=lambda p: p.is_symlink())
    assert [p.name.startswith(".") for p in builds] == [False, False]
    assert [p.is_symlink() for p in builds] == [False, True]
    assert builds[1].resolve() == builds[0] == (tmp_path / "disk").resolve()
    assert codegen.load("disk", tmp_path).nx == 8


def test_cache_key_changes_with_the_model(disk_model):
    from codegen.emit import generator_fingerprint
    key = compile_stage.cache_key(disk_model.fingerprint(), generator_fingerprint())
    assert key == compile_stage.cache_key(disk_model.fingerprint(), generator_fingerprint())
    assert key != compile_stage.cache_key(disk_model.fingerprint() + "x", generator_fingerprint())
