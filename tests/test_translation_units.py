"""A large model's C compiled as translation units in parallel
(``codegen.emit.SPLIT_STATEMENTS``): still one file, which compiles whole
(as an embedding build compiles it) and unit by unit, warning-free under
strict flags; the evaluation's functions are hidden in the module; and the
split module returns the bits of the whole file's.

The disk with outputs and sensitivities stands in for a large model (the
threshold lowered to 0): it has every kind of evaluation function (the
blocks' parts, their partials and tangents, the outputs')."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import codegen.compile
import codegen.emit
from codegen.derive import derive
from codegen.load import load_package
from codegen.models import disk as disk_models
from codegen.pipeline import build_artifact

STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O2", "-fPIC"]
NAME = "disk_outputs_sensitivities"


@pytest.fixture(scope="module")
def split_sources():
    model = disk_models.make_model(sensitivities="all", outputs=True)
    saved = codegen.emit.SPLIT_STATEMENTS
    codegen.emit.SPLIT_STATEMENTS = 0
    try:
        return codegen.emit.emit(derive(model))
    finally:
        codegen.emit.SPLIT_STATEMENTS = saved


def test_small_models_stay_one_unit(disk_sources):
    assert disk_sources.units == 0
    assert "_UNIT" not in disk_sources.files["disk.c"]


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_each_unit_and_the_whole_file_compile_strictly(split_sources, tmp_path, compiler):
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} not installed")
    assert split_sources.units == codegen.emit.EVALUATION_UNITS == 2
    for name, text in split_sources.files.items():
        (tmp_path / name).write_text(text)
    source = f"{NAME}.c"
    text = split_sources.files[source]
    # every evaluation function is in one of the evaluation units
    for unit in (1, 2):
        assert f"#if UNIT({unit})" in text
    defined = {}
    for unit in range(split_sources.units + 1):
        result = subprocess.run([compiler, *STRICT, f"-D{NAME.upper()}_UNIT={unit}", "-c", source,
                                 "-o", f"unit{unit}.o"], cwd=tmp_path, capture_output=True, text=True)
        assert result.returncode == 0 and result.stderr == "", (unit, result.stderr)
        symbols = subprocess.run(["nm", "--defined-only", f"unit{unit}.o"], cwd=tmp_path,
                                 capture_output=True, text=True, check=True).stdout
        defined[unit] = {line.split()[-1] for line in symbols.splitlines() if line.split()[1] == "T"}
    # the evaluation units define the evaluation (no public function), the rest the interface
    evaluation = defined[1] | defined[2]
    assert not defined[1] & defined[2]
    assert {"evaluate_residuals", "evaluate_dynamics", "tangent_evaluate_dynamics",
            "partials_evaluate_jacobians"} <= evaluation
    assert not any(symbol.startswith(NAME) for symbol in evaluation)
    assert f"{NAME}_linearize" in defined[0] and not evaluation & defined[0]
    # the whole file, as an embedding build compiles it
    result = subprocess.run([compiler, *STRICT, "-c", source, "-o", "whole.o"], cwd=tmp_path,
                            capture_output=True, text=True)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    # linked: the units' functions between them are not exported
    subprocess.run([compiler, "-shared", "unit0.o", "unit1.o", "unit2.o", "-o", "split.so", "-lm"],
                   cwd=tmp_path, check=True)
    exported = subprocess.run(["nm", "-D", "--defined-only", "split.so"], cwd=tmp_path,
                              capture_output=True, text=True, check=True).stdout
    assert f"{NAME}_linearize" in exported
    assert not re.search(r"\b(partials_|tangent_)?evaluate_", exported)


def _build(model, name, directory):
    model.name = name
    return load_package(build_artifact(model, output_dir=directory, force=True).package_dir)


def test_the_split_module_returns_the_bits_of_the_whole_file(tmp_path, monkeypatch):
    # without lane code: a build with lanes compiles the file whole (the lanes
    # take the second core)
    monkeypatch.setenv("CODEGEN_LANES", "off")
    whole = _build(disk_models.make_model(sensitivities="all", outputs=True), "disk_whole", tmp_path)
    with monkeypatch.context() as patch:
        patch.setattr(codegen.emit, "SPLIT_STATEMENTS", 0)
        split = _build(disk_models.make_model(sensitivities="all", outputs=True), "disk_split", tmp_path)
        # a compiler that is not GCC or clang (no hidden symbols): the file whole
        patch.setattr(codegen.compile, "_gnu_compatible", lambda cc: False)
        other_compiler = _build(disk_models.make_model(sensitivities="all", outputs=True), "disk_split_cc",
                                tmp_path)
        patch.undo()
        patch.setattr(codegen.emit, "SPLIT_STATEMENTS", 0)
        patch.setenv("CODEGEN_LANES", "portable")
        with_lanes = _build(disk_models.make_model(sensitivities="all", outputs=True), "disk_split_lanes",
                            tmp_path)
    assert json.loads((Path(split.__file__).parent / "build.json").read_text())["evaluation_units"] == 2
    assert json.loads((Path(whole.__file__).parent / "build.json").read_text())["evaluation_units"] == 0
    assert json.loads((Path(with_lanes.__file__).parent / "build.json").read_text())["evaluation_units"] == 0
    assert json.loads((Path(other_compiler.__file__).parent / "build.json").read_text())["evaluation_units"] == 0
    assert "#if UNIT(2)" in (Path(split.__file__).parent / "disk_split.c").read_text()
    assert "_UNIT" not in (Path(whole.__file__).parent / "disk_whole.c").read_text()
    rng = np.random.default_rng(3)
    points = [whole.complete(rng.normal(scale=0.6, size=whole.nq), rng.normal(size=whole.nu))
              for _ in range(6)]
    q, u = (np.array([point[k] for point in points]) for k in (0, 1))

    def same(a, b):
        arrays = [(x, y) for x, y in zip(a, b) if isinstance(x, np.ndarray)]
        assert arrays and all(np.array_equal(x, y) for x, y in arrays)

    for call in ("linearize", "linearize_full", "state_derivative"):
        same(getattr(whole, call)(q, u, steady_tol=None) if call != "state_derivative"
             else whole.state_derivative(q, u),
             getattr(split, call)(q, u, steady_tol=None) if call != "state_derivative"
             else split.state_derivative(q, u))
    a, b = whole.sensitivities(q, u, steady_tol=None), split.sensitivities(q, u, steady_tol=None)
    for field in ("A", "B", "dA", "dB", "C", "D", "dC", "dD"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field
    local_a, local_b = whole.linearize_local(q[0], u[0]), split.linearize_local(q[0], u[0])
    assert np.array_equal(local_a.A, local_b.A)
