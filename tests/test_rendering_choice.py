"""The generator chooses, per numeric stage (qd*, ud*, the solution), between
straight-line code for the default partition and the looped rendering alone,
by the size of the straight-line code (codegen.emit.STRAIGHT_LINE_LIMIT
operations): the disk and the bicycle keep their straight-line code (it is
what makes them fast), the 16-loop four-bar (a 69 x 69 augmented speed
system) gets looped code for ud* and the solution, so its C stays small and
compiles in seconds. Both renderings give the same results. No timing is
asserted here."""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import codegen
import codegen.emit
from codegen.derive import derive
from codegen.emit import emit
from codegen.load import load_package
from codegen.models import disk as disk_models
from codegen.models import fourbar
from codegen.pipeline import build_artifact
from local_checks import assert_same_local_form

STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]
NUMERIC_STAGES = ("kinematic_rates", "dynamic_rates", "solution", "local_chart")


def cc():
    return os.environ.get("CC", "cc")


def straight_line_functions(c_text):
    return {stage for stage in NUMERIC_STAGES if f"int straight_line_{stage}(" in c_text}


def test_disk_keeps_straight_line_code(disk_sources):
    kinds = {stage: kind for stage, (kind, _) in disk_sources.renderings.items()}
    assert {stage: kinds[stage] for stage in NUMERIC_STAGES} == \
        dict.fromkeys(NUMERIC_STAGES, "straight-line")
    assert straight_line_functions(disk_sources.files["disk.c"]) == set(NUMERIC_STAGES)


def test_bicycle_keeps_straight_line_code(bicycle):
    c_text = (Path(bicycle.__file__).parent / "bicycle.c").read_text()
    assert straight_line_functions(c_text) == set(NUMERIC_STAGES)


@pytest.fixture(scope="module")
def fourbar16_sources():
    return emit(derive(fourbar.make_model(loops=16)))


def test_many_loop_fourbar_gets_looped_code(fourbar16_sources, tmp_path):
    """ud* of the 69 x 69 augmented system and the solution after it: looped
    only (straight-line, they were 2.3 MB of C and a minute of gcc); qd*
    (M_qq diagonal) stays straight-line. The C compiles strictly."""
    sources = fourbar16_sources
    kinds = {stage: kind for stage, (kind, _) in sources.renderings.items()
             if stage in NUMERIC_STAGES}
    assert kinds == {"kinematic_rates": "straight-line", "dynamic_rates": "looped", "solution": "looped",
                     "local_chart": "looped"}   # the local form: its SVD path
    c_text = sources.files["fourbar16.c"]
    assert straight_line_functions(c_text) == {"kinematic_rates"}
    assert "place_state_rows" not in c_text    # used only by the straight-line solution
    assert len(c_text.encode()) < 1_000_000    # straight-line everywhere: 4.2 MB
    for name in ("fourbar16.c", "fourbar16.h"):
        (tmp_path / name).write_text(sources.files[name])
    result = subprocess.run([cc(), *STRICT, "-O0", "-c", "fourbar16.c", "-o", "fourbar16.o"],
                            cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_a_stage_over_the_limit_is_looped_and_what_needs_it_too(disk_model):
    """With a limit between the disk's stages, the large solution is looped and
    the rates stay straight-line; a limit below the rates loops everything
    (the straight-line solution reads the rate stages' factors)."""
    derivation = derive(disk_model)
    sources = emit(derivation, straight_line_limit=100)
    assert straight_line_functions(sources.files["disk.c"]) == {"kinematic_rates", "dynamic_rates"}
    assert sources.renderings["solution"][0] == "looped"
    assert "solution" in sources.renderings["local_chart"][1]
    sources = emit(derivation, straight_line_limit=50)
    assert straight_line_functions(sources.files["disk.c"]) == {"kinematic_rates"}
    assert "dynamic_rates" in sources.renderings["solution"][1]


def _build(make, limit, suffix, build_dir, monkeypatch):
    """The model built with the given limit, under its own name (so its
    cached build and its imported module are its own)."""
    model = make()
    model.name = f"{model.name}_{suffix}"
    monkeypatch.setattr(codegen.emit, "STRAIGHT_LINE_LIMIT", limit)
    artifact = build_artifact(model, output_dir=build_dir, force=True)
    monkeypatch.undo()
    return load_package(artifact.package_dir)


def _compare(reference, other, points):
    for q, u in points:
        q, u = np.asarray(q, dtype=float), np.asarray(u, dtype=float)
        for expected, got in zip(reference.linearize_full(q, u) + reference.state_derivative(q, u),
                                 other.linearize_full(q, u) + other.state_derivative(q, u)):
            scale = max(1.0, np.abs(expected).max()) if expected.size else 1.0
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * scale)


def test_straight_line_and_looped_renderings_agree_on_the_fourbar(tmp_path, monkeypatch):
    """Two loops, built with every stage straight-line and with every stage
    looped: the same A', B', qd*, ud* to rounding."""
    make = lambda: fourbar.make_model(loops=2)
    straight = _build(make, 10**9, "straight", tmp_path, monkeypatch)
    looped = _build(make, 0, "looped", tmp_path, monkeypatch)
    assert straight_line_functions((Path(straight.__file__).parent / "fourbar2_straight.c").read_text()) \
        == set(NUMERIC_STAGES)
    assert straight_line_functions((Path(looped.__file__).parent / "fourbar2_looped.c").read_text()) == set()
    parameters = dict(fourbar.DEFAULT_PARAMETERS)
    points = [fourbar.equilibrium(parameters, loops=2),
              fourbar.general(parameters, loops=2),
              fourbar.general(parameters, loops=2, phi=2.6, omega=-1.3)]
    _compare(straight, looped, points)
    # the local form: the partition's chart (straight-line) against the SVD
    # path (looped): other orthonormal bases of the same spaces, the same A
    for q, u in points:
        assert_same_local_form(straight.linearize_local(q, u), looped.linearize_local(q, u), 1e-10)


def test_looped_solution_after_straight_line_rates_agrees_on_the_disk(disk, tmp_path, monkeypatch):
    """The disk with its solution looped (limit 100) after straight-line rate
    stages: the general solution refactors M_qq, M_uu itself."""
    mixed = _build(disk_models.make_model, 100, "mixed", tmp_path, monkeypatch)
    rng = np.random.default_rng(11)
    q = rng.uniform(-1.5, 1.5, (20, disk.nq))
    u = rng.uniform(-3, 3, (20, disk.nu))
    q, u = disk.complete(q, u)
    _compare(disk, mixed, list(zip(q, u)))
