"""The user's path: the CLI on a model, the build cache, atomic installation."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import codegen
from codegen import compile as compile_stage
from codegen.__main__ import main
from codegen.errors import BuildError, ModelError
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
    for stage in ("derivation", "CSE", "emission", "kernel", "compile"):
        assert stage in out
    assert (tmp_path / "disk").is_symlink()
    again = run_cli("build", "disk", "--output-dir", str(tmp_path))
    assert "(cached build)" in again.stdout and "compile" not in again.stdout.split("timings:")[1].split("output:")[0]


def test_cli_builds_a_user_file(tmp_path):
    model_file = tmp_path / "spring.py"
    model_file.write_text(USER_MODEL)
    result = run_cli("build", f"{model_file}:make_model", "--output-dir", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    # x'' = (F - k x - c x')/m: eigenvalues of [[0, 1], [-4, -0.2]]
    expected = np.linalg.eigvals([[0.0, 1.0], [-4.0, -0.2]])
    assert f"{expected[0].real:.6g}" in result.stdout
    # a model without a description says so instead of printing nothing
    assert "model spring: (no description" in result.stdout


def test_cli_reports_model_errors(tmp_path):
    model_file = tmp_path / "bad.py"
    model_file.write_text(USER_MODEL.replace("parameters={m: 2.0, k: 8.0, c: 0.4}", "parameters={m: 2.0, k: 8.0}"))
    result = run_cli("build", f"{model_file}:make_model", "--output-dir", str(tmp_path))
    assert result.returncode == 1
    assert "not declared parameters: c" in result.stderr


def test_cli_list_aligns_its_columns(capsys):
    from codegen.models import BUILTIN
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[0] == "model"
    assert [line.split()[0] for line in lines[1:]] == sorted(BUILTIN)
    # every column starts where its title does, whatever the names' lengths
    for title in ("operating points", "description"):
        column = lines[0].index(title)
        for line in lines[1:]:
            assert line[column - 2:column] == "  " and line[column] != " ", (title, line)


def test_cli_help_keeps_its_examples_one_per_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    printed = capsys.readouterr().out
    assert "\n    python -m codegen list                       the built-in models" in printed
    assert "\n    python -m codegen build disk                 derive, generate" in printed


# -- clean errors: nothing on the command line ends in a traceback ---------------------------

@pytest.fixture
def no_work(monkeypatch):
    """The commands' work (builds, benchmark, scaling study) fails the test if it
    starts: a bad argument must be refused before it."""
    import codegen.__main__ as cli
    from codegen import bench, pipeline
    from codegen.bench import scaling

    def started(*args, **kwargs):
        raise AssertionError("the command started its work despite a bad argument")
    monkeypatch.setattr(cli, "_build_and_load", started)
    monkeypatch.setattr(pipeline, "build_builtin", started)
    monkeypatch.setattr(bench, "run", started)
    monkeypatch.setattr(scaling, "run", started)


@pytest.mark.parametrize("arguments, message", [
    ("sweep disk --from nan", "argument --from: expected a finite number, got 'nan'"),
    ("sweep disk --to inf", "argument --to: expected a finite number"),
    ("sweep disk --set lean=nan", "the value of 'lean' must be a finite number"),
    ("sweep disk --num 0", "argument --num: expected a whole number >= 1"),
    ("equilibria fourbar --coordinate phi --from 0 --to 1 --param c=inf",
     "the value of 'c' must be a finite number, got 'inf'"),
    ("equilibria fourbar --coordinate phi --from=-inf --to 1", "argument --from: expected a finite"),
    ("bench disk --batch 0", "argument --batch: expected a whole number >= 1, got 0"),
    ("bench disk --batch -1", "argument --batch: expected a whole number >= 1, got -1"),
    ("bench disk --sympy-limit 0", "argument --sympy-limit: expected a time in seconds > 0"),
    ("bench disk --casadi-limit nan", "argument --casadi-limit: expected a finite number"),
    ("scaling --sizes -2", "argument --sizes: expected a whole number >= 1, got -2"),
    ("scaling --sizes 2 0", "argument --sizes: expected a whole number >= 1, got 0"),
    ("scaling --repeats 0", "argument --repeats: expected a whole number >= 1, got 0"),
    ("scaling --batch 0", "argument --batch: expected a whole number >= 1, got 0"),
    ("scaling --casadi --casadi-limit -5", "argument --casadi-limit: expected a time in seconds"),
])
def test_cli_refuses_bad_numbers_before_any_work(no_work, capsys, arguments, message):
    with pytest.raises(SystemExit) as exit_:
        main(arguments.split())
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_cli_sweep_of_a_user_file_is_a_usage_error(no_work, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        main(["sweep", f"{tmp_path / 'model.py'}:make_model"])
    assert exit_.value.code == 2
    assert "sweep needs a built-in model" in capsys.readouterr().err


@pytest.mark.parametrize("arguments, option", [
    ("sweep disk --param v --out {missing}/sweep", "--out"),
    ("sweep disk --param v --out /proc/x", "--out"),
    ("bench disk --json {missing}/bench.json", "--json"),
    ("bench disk --work-dir {file}/work", "--work-dir"),
    ("scaling --sizes 2 --out {file}/scaling", "--out"),
])
def test_cli_refuses_an_output_it_cannot_write_before_any_work(no_work, capsys, tmp_path,
                                                                arguments, option):
    (tmp_path / "file").write_text("")
    arguments = arguments.format(missing=tmp_path / "missing", file=tmp_path / "file")
    if "/proc/" in arguments and not Path("/proc").is_dir():
        pytest.skip("no /proc here")
    assert main(arguments.split()) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot write") and f"choose another {option}" in err
    assert len(err.strip().splitlines()) == 1


# (file name, its text, the function the CLI calls, what the error says)
BAD_MODEL_FILES = [
    ("needs.py", "def make_model(n):\n    return None\n", "make_model",
     r"make_model\(n\) needs arguments.*give its arguments defaults"),
    ("number.py", "make_model = 3\n", "make_model", r"'make_model' is not a function \(it is of type int\)"),
    ("folder.py", None, "make_model", r"model file .*folder.py is a directory"),
    ("syntax.py", "def make_model(:\n    pass\n", "make_model",
     r"model file .*syntax.py is not valid Python: .* \(line 1\)"),
    ("imports.py", "import codegen_no_such_module\n", "make_model",
     r"model file .*imports.py could not be run: ModuleNotFoundError: No module named "
     r"'codegen_no_such_module' \(imports.py, line 1\); install codegen_no_such_module"),
    ("raises.py", "from codegen.errors import ModelError\n\ndef make_model():\n"
     "    raise ModelError('no such body')\n", "make_model",
     r"raises.py:make_model: make_model\(\) raised ModelError: no such body \(raises.py, line 4\)"),
    ("fails.py", "def make_model():\n    return 1 / 0\n", "make_model",
     r"fails.py:make_model: make_model\(\) raised ZeroDivisionError: division by zero "
     r"\(fails.py, line 2\)"),
]


@pytest.mark.parametrize("name, text, function, message", BAD_MODEL_FILES,
                         ids=[case[0] for case in BAD_MODEL_FILES])
def test_bad_model_files_are_model_errors_and_one_line_cli_errors(tmp_path, capsys, name, text,
                                                                  function, message):
    path = tmp_path / name
    if text is None:
        path.mkdir()
    else:
        path.write_text(text)
    with pytest.raises(ModelError, match=message):
        codegen.load_model_file(f"{path}:{function}")
    assert main(["build", f"{path}:{function}", "--output-dir", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    assert re.search(message, err), err


def test_cli_error_of_a_model_file_has_no_traceback(tmp_path):
    """The same as a newcomer sees it: one line, exit status 1."""
    path = tmp_path / "broken.py"
    path.write_text("def make_model():\n    return undefined_name\n")
    result = run_cli("build", f"{path}:make_model", "--output-dir", str(tmp_path / "out"))
    assert result.returncode == 1
    assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1
    assert "NameError: name 'undefined_name' is not defined (broken.py, line 2)" in result.stderr


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
    """Two processes building the same model at once both end with a working
    module, and only one of them derives and compiles it: the other waits for
    it (codegen.compile.build_lock) and takes it from the cache."""
    script = ("import sys, codegen; from codegen.models import disk; "
              "from codegen.pipeline import build_artifact; "
              "a = build_artifact(disk.make_model(), sys.argv[1]); "
              "m = codegen.load('disk', sys.argv[1]); print(m.nx, a.cached)")
    processes = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
    printed = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        printed.append(out.split())
    assert sorted(printed) == [["8", "False"], ["8", "True"]], printed
    # one finished build, one key link leading to it, no temporaries, no lock
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
