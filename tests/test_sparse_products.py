"""Products over a sparse left operand's structural non-zeros (issue 20, item 5).

A looped product whose left operand is a large, mostly-zero block the
derivation evaluates (or its columns of the model's default partition)
iterates over a list of its non-zeros made at generation time
(emit.sparse_products, templates/helpers_sparse.c); another partition, and
every other product, steps through every entry. Checked here: the choice
(none for the disk; the 12-loop four-bar's M_uq, A_uq, A_uu), determinism,
strict compilation, and a built four-bar against the same model generated
without sparse products, at random consistent points, in the default
partition and another."""

import subprocess

import numpy as np
import pytest

import codegen.emit as emit_module
from codegen.load import load_package
from codegen.models import fourbar
from codegen.pipeline import build_artifact

STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Wshadow"]


def test_generation_time_choice(disk_sources, tmp_path):
    from codegen.derive import derive
    from codegen.emit import emit

    assert "sparse_product" not in disk_sources.files["disk.c"]
    derivation = derive(fourbar.make_model(12))
    sources = emit(derivation)
    c_text = sources.files["fourbar12.c"]
    assert "sparse_product(NW, NX, sparse_start_M_uq" in c_text
    assert "static const int sparse_entry_A_uu[" in c_text
    assert emit(derivation).files["fourbar12.c"] == c_text        # deterministic
    for name, text in sources.files.items():
        (tmp_path / name).write_text(text)
    subprocess.run(["gcc", *STRICT, "-O1", "-c", "fourbar12.c", "-o", "fourbar12.o"], cwd=tmp_path,
                   check=True)
    saved = emit_module.THRESHOLDS["SPARSE_MIN_ENTRIES"], emit_module.THRESHOLDS["BAND_MIN_ORDER"]
    try:
        emit_module.THRESHOLDS["SPARSE_MIN_ENTRIES"] = (10 ** 9, saved[0][1])
        assert "sparse_product" not in emit(derivation).files["fourbar12.c"]
        # no band and only whole blocks (M_uq, A_uq, A_uu: 53 x 27; not the
        # 53 x 26 A_uu P_ud): no partition check, and still warning-free
        emit_module.THRESHOLDS["SPARSE_MIN_ENTRIES"] = (1400, saved[0][1])
        emit_module.THRESHOLDS["BAND_MIN_ORDER"] = (10 ** 6, saved[1][1])
        text = emit(derivation).files["fourbar12.c"]
        assert "sparse_product(NW, NX, sparse_start_M_uq" in text and "same_indices" not in text
        (tmp_path / "fourbar12.c").write_text(text)
        subprocess.run(["gcc", *STRICT, "-O1", "-c", "fourbar12.c", "-o", "fourbar12.o"], cwd=tmp_path,
                       check=True)
    finally:
        emit_module.THRESHOLDS["SPARSE_MIN_ENTRIES"], emit_module.THRESHOLDS["BAND_MIN_ORDER"] = saved


@pytest.fixture(scope="module")
def fourbar12_builds(tmp_path_factory):
    """The 12-loop four-bar with sparse products (a lower size threshold, so
    the partition's A_qu P_ud takes them too) and without."""
    model = fourbar.make_model(12)
    saved = emit_module.THRESHOLDS["SPARSE_MIN_ENTRIES"]
    try:
        emit_module.THRESHOLDS["SPARSE_MIN_ENTRIES"] = (256, saved[1])
        sparse = build_artifact(model, output_dir=tmp_path_factory.mktemp("sparse"), force=True)
        emit_module.THRESHOLDS["SPARSE_MIN_ENTRIES"] = (10 ** 9, saved[1])
        dense = build_artifact(model, output_dir=tmp_path_factory.mktemp("dense"), force=True)
    finally:
        emit_module.THRESHOLDS["SPARSE_MIN_ENTRIES"] = saved
    text = (sparse.package_dir / "fourbar12.c").read_text()
    assert "sparse_product(NW, NQ, sparse_start_A_uu_dependent_u" in text
    assert "sparse_start_A_qu_dependent_u" in text
    assert "sparse_product(" not in (dense.package_dir / "fourbar12.c").read_text()
    return load_package(sparse.package_dir), load_package(dense.package_dir)


def _points(module, count, seed):
    parameters = dict(zip(module.p_names, module.default_parameters))
    rng = np.random.default_rng(seed)
    for phi in rng.uniform(0.3, 2.8, count):
        q, u = fourbar.general(parameters, 12, phi=phi, omega=rng.normal())
        yield module.complete(q, u)


def _close(ours, theirs):
    for x, y in zip(ours, theirs):
        if np.size(x):
            np.testing.assert_allclose(x, y, rtol=1e-11, atol=1e-11 * np.abs(y).max())


def test_built_model_matches_dense_build(fourbar12_builds):
    sparse, dense = fourbar12_builds
    for q, u in _points(sparse, 6, 11):
        for call in ("linearize", "linearize_full"):
            _close(getattr(sparse, call)(q, u, steady_tol=None), getattr(dense, call)(q, u, steady_tol=None))
        _close(sparse.state_derivative(q, u), dense.state_derivative(q, u))


def test_another_partition_takes_the_dense_path(fourbar12_builds):
    sparse, dense = fourbar12_builds
    dependent = list(range(sparse.nq))
    dependent.remove(2)
    q, u = next(_points(sparse, 1, 3))
    kwargs = dict(dependent_q=dependent, dependent_u=dependent, steady_tol=None)
    _close(sparse.linearize(q, u, **kwargs), dense.linearize(q, u, **kwargs))
