"""Banded LU of the looped factorizations (issue 20, item 5).

Large sparse factorizations (the multiplier form's speed-level system of the
N-loop four-bar, its partition blocks) run as a banded LU with partial
pivoting in an order chosen at generation time from the symbolic pattern
(codegen/ordering.py, templates/helpers_band.c). Checked here: the C helpers
against numpy.linalg.solve on random reordered banded matrices, a singular
matrix's status, the generation-time choice (dense for small, banded for
large), and a built four-bar against its closed form and against the same
model generated without bands."""

import ctypes
import os
import subprocess

import numpy as np
import pytest

import codegen.emit as emit_module
from codegen.emit import template_dir
from codegen.load import load_package
from codegen.models import fourbar
from codegen.ordering import band_of, bandwidths, reverse_cuthill_mckee, swaps
from codegen.pipeline import build_artifact

STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Wshadow"]

HARNESS = r"""
#include <float.h>
#include <math.h>
#include <string.h>
#define SINGULAR_RTOL 1e-12
#define PIVOT_TAU 0.1
#define RANK_RTOL 1e-9
#define CONDITION_RTOL 1e-4
#define NEWTON_RTOL 1e-13
#define IGNORABLE_RTOL 1e-12
#define NONFINITE_RESULT 7
%s
%s
int test_band_factor(int n, int lower, int upper, const double *a, const int *rows, const int *cols,
                     double *band, int *pivot, double scale);
int test_band_factor(int n, int lower, int upper, const double *a, const int *rows, const int *cols,
                     double *band, int *pivot, double scale)
{
    return band_factor(n, lower, upper, make_view(a, n, 0, 0, 0), rows, cols, band, pivot, scale);
}
void test_band_solve(int n, int lower, int upper, const double *band, const int *pivot,
                     const int *row_swaps, const int *col_swaps, double *b, int m);
void test_band_solve(int n, int lower, int upper, const double *band, const int *pivot,
                     const int *row_swaps, const int *col_swaps, double *b, int m)
{
    band_solve(n, lower, upper, band, pivot, row_swaps, col_swaps, b, m, m);
}
int test_lu_factor(int n, double *a, int *pivot, double scale);
int test_lu_factor(int n, double *a, int *pivot, double scale)
{
    return lu_factor(n, a, pivot, scale);
}
"""


@pytest.fixture(scope="module")
def helpers(tmp_path_factory):
    work = tmp_path_factory.mktemp("band_helpers")
    source = work / "band.c"
    source.write_text(HARNESS % ((template_dir() / "helpers.c").read_text(),
                                 (template_dir() / "helpers_band.c").read_text()))
    library = work / "band.so"
    cc = os.environ.get("CC", "cc")
    # strict, with the unused helpers of helpers.c allowed (a model uses them all)
    subprocess.run([cc, *STRICT, "-Wno-unused-function", "-O2", "-shared", "-fPIC", str(source),
                    "-o", str(library), "-lm"], check=True)
    return ctypes.CDLL(str(library))


def _ints(values):
    return (ctypes.c_int * (len(values) + 1))(*values, -1)


def _doubles(array):
    return np.ascontiguousarray(array, dtype=float)


def _pointer(array):
    return array.ctypes.data_as(ctypes.POINTER(ctypes.c_double))


def band_solve(helpers, a, b, band=None, scale=0.0):
    """(status, x) of the banded path for a x = b."""
    n = a.shape[0]
    band = band or band_of(n, list(zip(*np.nonzero(a))))
    storage = np.zeros(n * band.width + 1)
    pivot = (ctypes.c_int * (n + 1))()
    a = _doubles(a)
    status = helpers.test_band_factor(n, band.lower, band.upper, _pointer(a), _ints(band.rows),
                                      _ints(band.cols), _pointer(storage), pivot, ctypes.c_double(scale))
    if status:
        return status, None
    x = _doubles(b).copy()
    helpers.test_band_solve(n, band.lower, band.upper, _pointer(storage), pivot, _ints(swaps(band.rows)),
                            _ints(swaps(band.cols)), _pointer(x), x.shape[1])
    return status, x


def random_banded(rng, n, lower, upper):
    """A random matrix of bandwidths (lower, upper), its rows and columns shuffled."""
    a = np.zeros((n, n))
    for i in range(n):
        for j in range(max(0, i - lower), min(n, i + upper + 1)):
            if rng.random() < 0.8 or i == j:
                a[i, j] = rng.normal()
    return a[rng.permutation(n)][:, rng.permutation(n)]


@pytest.mark.parametrize("seed", range(12))
def test_banded_solve_matches_numpy(helpers, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    a = random_banded(rng, n, int(rng.integers(0, 4)), int(rng.integers(0, 4)))
    a[np.abs(a) < 1e-300] = 0.0
    if abs(np.linalg.det(a)) < 1e-8:
        a += np.eye(n)     # keep it regular (the pattern's diagonal may be off the band)
    b = rng.normal(size=(n, (3, 21)[seed % 2]))     # a remainder of columns, and blocks of them
    status, x = band_solve(helpers, a, b)
    assert status == 0
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-9, atol=1e-9 * np.abs(x).max())


def test_ordering_finds_the_band_of_a_shuffled_banded_matrix():
    rng = np.random.default_rng(7)
    a = random_banded(rng, 80, 2, 1)
    band = band_of(80, list(zip(*np.nonzero(a))))
    assert band.lower + band.upper <= 8
    assert bandwidths(list(zip(*np.nonzero(a))), band.rows, band.cols) == (band.lower, band.upper)
    assert sorted(band.rows) == list(range(80)) and sorted(band.cols) == list(range(80))
    # deterministic: the same pattern gives the same ordering
    assert band_of(80, list(zip(*np.nonzero(a)))) == band
    assert reverse_cuthill_mckee(4, [(0, 1), (1, 2), (2, 3)]) == reverse_cuthill_mckee(4, [(2, 3), (0, 1), (1, 2)])


def test_singular_matrices_are_reported_like_the_dense_lu(helpers):
    rng = np.random.default_rng(3)
    a = random_banded(rng, 30, 2, 2) + 3 * np.eye(30)
    a[:, 5] = 0.0                                    # a zero column: exactly singular
    status, _ = band_solve(helpers, a, np.ones((30, 1)))
    dense = _doubles(a).copy()
    assert status == 1
    assert helpers.test_lu_factor(30, _pointer(dense), (ctypes.c_int * 31)(), ctypes.c_double(0.0)) == 1
    # singular relative to the scale: a pivot below SINGULAR_RTOL times the largest entry
    b = np.diag([1.0, 1e-14, 1.0]) + np.diag([0.0, 0.0], 1)
    status, _ = band_solve(helpers, b, np.ones((3, 1)))
    assert status == 1
    status, _ = band_solve(helpers, np.diag([1.0, 1e-11, 1.0]), np.ones((3, 1)))
    assert status == 0
    # and relative to the scale passed (a Jacobian the block's columns come from)
    status, _ = band_solve(helpers, np.diag([1.0, 1e-11, 1.0]), np.ones((3, 1)), scale=1e2)
    assert status == 1


def _factors(sources):
    return {line.split("band_factor(")[1].split(",")[0] for line in sources.files[f"{sources.name}.c"].splitlines()
            if "if (band_factor(" in line}


def test_generation_time_choice(disk_sources):
    from codegen.derive import derive
    from codegen.emit import emit

    # the disk: no banded factorization, no banded helpers in its C
    assert "band_factor" not in disk_sources.files["disk.c"]
    # the 12-loop four-bar: its 53 x 53 speed-level system and its 26 x 26
    # partition blocks are banded; with BAND_MIN_ORDER above them, dense
    derivation = derive(fourbar.make_model(12))
    sources = emit(derivation)
    c_text = sources.files["fourbar12.c"]
    assert {"NW", "NC", "NV"} <= _factors(sources)
    assert "w->banded_c = same_indices(NC" in c_text and "w->banded_v = same_indices(NV" in c_text
    assert emit(derivation).files["fourbar12.c"] == c_text        # deterministic
    saved = emit_module.THRESHOLDS["BAND_MIN_ORDER"]
    try:
        emit_module.THRESHOLDS["BAND_MIN_ORDER"] = (60, saved[1])
        assert "band_factor(" not in emit(derivation).files["fourbar12.c"]
    finally:
        emit_module.THRESHOLDS["BAND_MIN_ORDER"] = saved


@pytest.fixture(scope="module")
def fourbar12_builds(tmp_path_factory):
    """The 12-loop four-bar built with its banded factorizations and without."""
    model = fourbar.make_model(12)
    banded = load_package(build_artifact(model, output_dir=tmp_path_factory.mktemp("banded")).package_dir)
    saved = emit_module.THRESHOLDS["BAND_MIN_ORDER"]
    try:
        emit_module.THRESHOLDS["BAND_MIN_ORDER"] = (10 ** 6, saved[1])
        dense = load_package(build_artifact(model, output_dir=tmp_path_factory.mktemp("dense")).package_dir)
    finally:
        emit_module.THRESHOLDS["BAND_MIN_ORDER"] = saved
    return banded, dense


def test_built_model_matches_dense_build_and_closed_form(fourbar12_builds):
    banded, dense = fourbar12_builds
    parameters = dict(zip(banded.p_names, banded.default_parameters))
    rng = np.random.default_rng(5)
    for phi in rng.uniform(0.3, 2.8, 6):
        q, u = fourbar.general(parameters, 12, phi=phi, omega=rng.normal())
        q, u = banded.complete(q, u)
        for call in ("linearize", "linearize_full"):
            ours = getattr(banded, call)(q, u, steady_tol=None)
            theirs = getattr(dense, call)(q, u, steady_tol=None)
            for x, y in zip(ours, theirs):
                if np.size(x):
                    np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-9 * np.abs(y).max())
        qd, ud = banded.state_derivative(q, u)
        qd_dense, ud_dense = dense.state_derivative(q, u)
        np.testing.assert_allclose(ud, ud_dense, rtol=1e-9, atol=1e-12)
    # at the equilibrium, A's eigenvalues are the closed form's
    q, u = fourbar.equilibrium(parameters, 12)
    q, u = banded.complete(q, u)
    A, _ = banded.linearize(q, u)
    eigenvalues = np.sort_complex(np.linalg.eigvals(A))
    expected = np.sort_complex(np.asarray(fourbar.closed_form(parameters, q[0], 12), complex))
    np.testing.assert_allclose(eigenvalues, expected, rtol=1e-8)


def test_another_partition_takes_the_dense_path(fourbar12_builds):
    banded, dense = fourbar12_builds
    parameters = dict(zip(banded.p_names, banded.default_parameters))
    q, u = fourbar.general(parameters, 12, phi=1.1, omega=0.4)
    q, u = banded.complete(q, u)
    # phi dependent, y_0 independent: not the default partition (the band was chosen for that)
    dependent = [0] + list(range(1, banded.nq))
    dependent.remove(2)
    kwargs = dict(dependent_q=dependent, dependent_u=dependent, steady_tol=None)
    try:
        ours = banded.linearize(q, u, **kwargs)
    except TypeError:
        pytest.skip("linearize takes no partition")
    theirs = dense.linearize(q, u, **kwargs)
    for x, y in zip(ours, theirs):
        if np.size(x):
            np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-9 * np.abs(y).max())


def test_singular_speed_system_status(fourbar12_builds):
    """At the flat configuration the speed-level system is singular: the banded
    build reports it as the dense one does."""
    from codegen.errors import EvaluationError

    banded, dense = fourbar12_builds
    parameters = dict(zip(banded.p_names, banded.default_parameters))
    q, u = fourbar.flat(parameters, 12)
    errors = []
    for module in (banded, dense):
        with pytest.raises(EvaluationError) as caught:
            module.linearize(q, u, steady_tol=None)
        errors.append((type(caught.value), str(caught.value).split(":")[1]))
    assert errors[0] == errors[1]
