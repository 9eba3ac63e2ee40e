"""The dense kernels of the looped rendering (templates/helpers.c) against
plain loops and numpy (issue 20, item 5: the per-point cost of large models).

lu_solve keeps each row's running sums in registers, a block of columns at a
time; lu_factor, the banded LU and the products add row multiples in blocks
of columns; the LU kernels are compiled for AVX2 beside the baseline where
the compiler and the C library allow choosing at load time (target_clones).
The claim checked here: the same bits as the plain row-by-row loops they
replace (written out below, in the order of the textbook algorithms), on
either clone, for every width that takes another path (blocks of 16, of 8,
a remainder), strided right-hand sides and zero factors; and the solutions
agree with numpy.linalg.solve."""

import ctypes
import os
import platform
import re
import shutil
import subprocess

import numpy as np
import pytest

from codegen.emit import template_dir

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

/* the plain loops: partial pivoting, right-looking elimination, row-by-row substitution */
int plain_lu_factor(int n, double *a, int *pivot, double scale);
int plain_lu_factor(int n, double *a, int *pivot, double scale)
{
    const double own = norm_inf(a, n * n);
    const double threshold = SINGULAR_RTOL * (own > scale ? own : scale);
    int i, j, k;
    for (k = 0; k < n; ++k) {
        int row = k;
        double largest = fabs(a[k * n + k]);
        for (i = k + 1; i < n; ++i)
            if (fabs(a[i * n + k]) > largest) {
                largest = fabs(a[i * n + k]);
                row = i;
            }
        pivot[k] = row;
        if (!(largest > threshold) || largest == 0.0) return 1;
        if (row != k)
            for (j = 0; j < n; ++j) {
                const double swap = a[k * n + j];
                a[k * n + j] = a[row * n + j];
                a[row * n + j] = swap;
            }
        for (i = k + 1; i < n; ++i) {
            const double factor = a[i * n + k] / a[k * n + k];
            a[i * n + k] = factor;
            if (factor == 0.0) continue;
            for (j = k + 1; j < n; ++j) a[i * n + j] -= factor * a[k * n + j];
        }
    }
    return 0;
}

void plain_lu_solve(int n, const double *lu, const int *pivot, double *b, int ldb, int m);
void plain_lu_solve(int n, const double *lu, const int *pivot, double *b, int ldb, int m)
{
    int i, j, k;
    for (k = 0; k < n; ++k)
        if (pivot[k] != k)
            for (j = 0; j < m; ++j) {
                const double swap = b[k * ldb + j];
                b[k * ldb + j] = b[pivot[k] * ldb + j];
                b[pivot[k] * ldb + j] = swap;
            }
    for (i = 1; i < n; ++i)
        for (k = 0; k < i; ++k) {
            const double factor = lu[i * n + k];
            if (factor == 0.0) continue;
            for (j = 0; j < m; ++j) b[i * ldb + j] -= factor * b[k * ldb + j];
        }
    for (i = n - 1; i >= 0; --i) {
        const double inverse = 1.0 / lu[i * n + i];
        for (k = i + 1; k < n; ++k) {
            const double factor = lu[i * n + k];
            if (factor == 0.0) continue;
            for (j = 0; j < m; ++j) b[i * ldb + j] -= factor * b[k * ldb + j];
        }
        for (j = 0; j < m; ++j) b[i * ldb + j] *= inverse;
    }
}

int test_lu_factor(int n, double *a, int *pivot, double scale);
int test_lu_factor(int n, double *a, int *pivot, double scale)
{
    return lu_factor(n, a, pivot, scale);
}

void test_lu_solve(int n, const double *lu, const int *pivot, double *b, int ldb, int m);
void test_lu_solve(int n, const double *lu, const int *pivot, double *b, int ldb, int m)
{
    lu_solve(n, lu, pivot, b, ldb, m);
}

/* c (rows x cols, row stride ldc) -= a b through views, b's columns picked by cols_b */
void test_product(int rows, int inner, int cols, const double *a, const double *b, int ldb,
                  const int *cols_b, double *c, int ldc);
void test_product(int rows, int inner, int cols, const double *a, const double *b, int ldb,
                  const int *cols_b, double *c, int ldc)
{
    product_view(rows, inner, cols, make_view(a, inner, 0, 0, 0), make_view(b, ldb, 0, cols_b, 0),
                 make_view(c, ldc, 0, 0, 0), SUBTRACT);
}

/* dst (rows x cols, stride ldd, its rows and columns picked) = (-)src (+ dst) */
void test_copy(int rows, int cols, const double *src, int lds, const int *src_rows, const int *src_cols,
               int transposed, int negate, int accumulate, double *dst, int ldd, const int *dst_rows,
               const int *dst_cols);
void test_copy(int rows, int cols, const double *src, int lds, const int *src_rows, const int *src_cols,
               int transposed, int negate, int accumulate, double *dst, int ldd, const int *dst_rows,
               const int *dst_cols)
{
    copy_view(rows, cols, make_view(src, lds, src_rows, src_cols, transposed), negate, accumulate,
              make_view(dst, ldd, dst_rows, dst_cols, 0));
}

void test_zero_runs(double *a, const int *runs, int count);
void test_zero_runs(double *a, const int *runs, int count)
{
    zero_runs(a, runs, count);
}

int test_is_finite(int rows, int cols, const double *a, int ld, const int *a_rows, const int *a_cols,
                   int transposed);
int test_is_finite(int rows, int cols, const double *a, int ld, const int *a_rows, const int *a_cols,
                   int transposed)
{
    return view_is_finite(rows, cols, make_view(a, ld, a_rows, a_cols, transposed));
}
"""


def _compile(work, name, extra):
    source = work / f"{name}.c"
    source.write_text(HARNESS % (template_dir() / "helpers.c").read_text())
    library = work / f"{name}.so"
    cc = os.environ.get("CC", "cc")
    # strict, with the unused helpers of helpers.c allowed (a model uses them all)
    subprocess.run([cc, *STRICT, "-Wno-unused-function", "-O2", *extra, "-shared", "-fPIC", str(source),
                    "-o", str(library), "-lm"], check=True)
    return ctypes.CDLL(str(library))


# the defines of each build of the helpers: a small model's module (the AVX2
# clone where this machine and compiler have it), a large one's (also
# x86-64-v4), an embedded build's (once, for the baseline)
BUILDS = {"clones": ["-DDENSE_CLONES"], "wide_clones": ["-DDENSE_CLONES", "-DDENSE_CLONES_WIDE"], "baseline": []}


@pytest.fixture(scope="module", params=list(BUILDS))
def kernels(request, tmp_path_factory):
    """The helpers as a model's C gets them (:data:`BUILDS`)."""
    work = tmp_path_factory.mktemp(f"kernels_{request.param}")
    return _compile(work, request.param, BUILDS[request.param])


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_no_clone_fuses_a_multiply_and_an_add(cc, tmp_path):
    """The x86-64-v4 clone has fused multiply-add instructions; the clones
    give the baseline's bits only if the compiler contracts none (GCC in ISO
    C; clang by the helpers' pragma): no vfmadd/vfmsub in the object."""
    if not shutil.which(cc) or not shutil.which("objdump"):
        pytest.skip(f"{cc} or objdump not installed")
    source = tmp_path / "clones.c"
    source.write_text(HARNESS % (template_dir() / "helpers.c").read_text())
    obj = tmp_path / "clones.o"
    subprocess.run([cc, *STRICT, "-Wno-unused-function", "-O2", *BUILDS["wide_clones"], "-c", str(source),
                    "-o", str(obj)], check=True)
    listing = subprocess.run(["objdump", "-d", str(obj)], check=True, capture_output=True, text=True).stdout
    if platform.machine() == "x86_64":
        assert "x86-64-v4" in listing or "x86_64_v4" in listing or "avx2" in listing, "no target clone compiled"
    fused = [line for line in listing.splitlines() if re.search(r"\bv?f(n)?m(add|sub)", line)]
    assert not fused, f"{cc}: fused multiply-add in the clones: {fused[:3]}"


def _p(array):
    return array.ctypes.data_as(ctypes.POINTER(ctypes.c_double))


def _ints(values):
    if values is None:
        return None
    return (ctypes.c_int * (len(values) + 1))(*values, -1)


def _factor(kernels, a, plain=False):
    n = a.shape[0]
    lu = np.ascontiguousarray(a, dtype=float).copy()
    pivot = (ctypes.c_int * (n + 1))()
    status = (kernels.plain_lu_factor if plain else kernels.test_lu_factor)(n, _p(lu), pivot, ctypes.c_double(0.0))
    return status, lu, pivot


def _random_matrix(rng, n, zeros):
    a = rng.normal(size=(n, n))
    a[rng.random((n, n)) < zeros] = 0.0
    return a + n * np.eye(n) * (rng.random() < 0.5)     # some well conditioned, some not


@pytest.mark.parametrize("m", [1, 3, 7, 8, 9, 15, 16, 17, 24, 33, 64, 70])
def test_lu_solve_is_the_plain_substitution_bit_for_bit(kernels, m):
    rng = np.random.default_rng(m)
    for trial in range(4):
        n = int(rng.integers(1, 40))
        a = _random_matrix(rng, n, zeros=[0.0, 0.3, 0.7, 0.0][trial])
        status, lu, pivot = _factor(kernels, a)
        plain_status, plain_lu, plain_pivot = _factor(kernels, a, plain=True)
        assert status == plain_status
        assert lu.tobytes() == plain_lu.tobytes() and list(pivot) == list(plain_pivot)
        if status:
            continue
        ldb = m + int(rng.integers(0, 3))                  # a strided right-hand side
        b = rng.normal(size=(n, ldb))
        b[rng.random((n, ldb)) < 0.2] = 0.0
        ours, theirs = b.copy(), b.copy()
        kernels.test_lu_solve(n, _p(lu), pivot, _p(ours), ldb, m)
        kernels.plain_lu_solve(n, _p(lu), pivot, _p(theirs), ldb, m)
        assert ours.tobytes() == theirs.tobytes()
        assert np.array_equal(ours[:, m:], b[:, m:])      # columns beyond m untouched
        if np.linalg.cond(a) > 1e8:
            continue
        expected = np.linalg.solve(a, b[:, :m])
        np.testing.assert_allclose(ours[:, :m], expected, rtol=1e-8,
                                   atol=1e-8 * max(1.0, np.abs(expected).max()))


def test_signed_zeros_and_non_finite_entries_follow_the_plain_loops(kernels):
    """Zero factors are skipped, as the plain loops skip them: the signs of
    zeros, and Inf and NaN in b (no 0 * Inf where a factor is zero), come out
    as theirs."""
    rng = np.random.default_rng(5)
    n, m = 12, 19
    a = np.triu(rng.normal(size=(n, n))) + 4 * np.eye(n)
    a[2, 5] = 0.0
    status, lu, pivot = _factor(kernels, a)
    assert status == 0
    b = rng.normal(size=(n, m))
    b[:, 3] = -0.0
    b[7, 4] = np.inf
    b[9, 17] = np.nan
    ours, theirs = b.copy(), b.copy()
    kernels.test_lu_solve(n, _p(lu), pivot, _p(ours), m, m)
    kernels.plain_lu_solve(n, _p(lu), pivot, _p(theirs), m, m)
    assert ours.tobytes() == theirs.tobytes()
    assert np.isnan(ours).any() and np.isinf(ours).any()


def test_singular_matrices_are_reported(kernels):
    a = np.eye(20)
    a[:, 7] = 0.0
    assert _factor(kernels, a)[0] == 1
    assert _factor(kernels, np.diag([1.0, 1e-14, 1.0]))[0] == 1
    assert _factor(kernels, np.diag([1.0, 1e-11, 1.0]))[0] == 0


@pytest.mark.parametrize("cols", [1, 5, 8, 12, 16, 29])
def test_products_through_views(kernels, cols):
    rng = np.random.default_rng(cols)
    rows, inner, ldb = 9, 6, cols + 11
    a = rng.normal(size=(rows, inner))
    a[rng.random(a.shape) < 0.3] = 0.0
    b = rng.normal(size=(inner, ldb))
    picked = sorted(rng.choice(ldb, size=cols, replace=False).tolist())
    for cols_b in (None, picked):
        c = rng.normal(size=(rows, cols + 2))
        expected = c.copy()
        columns = list(range(cols)) if cols_b is None else cols_b
        for i in range(rows):                       # the same operations, in order
            for k in range(inner):
                if a[i, k] != 0.0:
                    expected[i, :cols] += -a[i, k] * b[k, columns]
        kernels.test_product(rows, inner, cols, _p(a), _p(b), ldb, _ints(cols_b), _p(c), cols + 2)
        assert c.tobytes() == expected.tobytes()


@pytest.mark.parametrize("transposed", [0, 1])
@pytest.mark.parametrize("negate,accumulate", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_copies_through_views(kernels, transposed, negate, accumulate):
    rng = np.random.default_rng(11 + 2 * negate + accumulate)
    rows, cols = 5, 7
    src = rng.normal(size=(9, 10))
    src_rows = [8, 0, 3, 6, 2, 7, 5] if transposed else [8, 0, 3, 6, 2]
    src_cols = [9, 1, 4, 2, 0] if transposed else [9, 1, 4, 2, 0, 6, 3]
    view = src[np.ix_(src_rows, src_cols)]
    view = view.T if transposed else view
    for use_rows, use_cols in ((src_rows, src_cols), (None, None)):
        dst = rng.normal(size=(8, 11))
        dst_rows, dst_cols = [7, 1, 2, 5, 0], [10, 0, 3, 4, 8, 2, 6]
        expected = dst.copy()
        source = view if use_rows is not None else (src[:cols, :rows].T if transposed else src[:rows, :cols])
        value = -source if negate else source
        block = expected[np.ix_(dst_rows, dst_cols)]
        expected[np.ix_(dst_rows, dst_cols)] = block + value if accumulate else value
        kernels.test_copy(rows, cols, _p(src), 10, _ints(use_rows), _ints(use_cols), transposed, negate,
                          accumulate, _p(dst), 11, _ints(dst_rows), _ints(dst_cols))
        assert dst.tobytes() == expected.tobytes()
    # plain views, and a copy onto itself (dst = src, the same memory)
    dst = src.copy()
    kernels.test_copy(9, 10, _p(dst), 10, None, None, 0, 0, 0, _p(dst), 10, None, None)
    assert dst.tobytes() == src.tobytes()


def test_finite_checks_through_views(kernels):
    a = np.arange(60.0).reshape(6, 10)
    assert kernels.test_is_finite(6, 10, _p(a), 10, None, None, 0) == 1
    for bad in (np.nan, np.inf, -np.inf):
        for where in ((0, 0), (5, 9), (3, 4)):
            b = a.copy()
            b[where] = bad
            assert kernels.test_is_finite(6, 10, _p(b), 10, None, None, 0) == 0
            assert kernels.test_is_finite(6, 10, _p(b), 10, _ints([5, 4, 3, 2, 1, 0]), None, 0) == 0
            assert kernels.test_is_finite(10, 6, _p(b), 10, None, None, 1) == 0
    # a view that leaves the bad entry out: rows picked, or a narrower block of a wider array
    b = a.copy()
    b[3, 9] = np.nan
    assert kernels.test_is_finite(6, 9, _p(b), 10, None, None, 0) == 1
    assert kernels.test_is_finite(2, 10, _p(b), 10, _ints([0, 5]), None, 0) == 1
    assert kernels.test_is_finite(2, 10, _p(b), 10, _ints([0, 3]), None, 0) == 0


def test_structural_zeros_are_cleared_as_runs(kernels):
    """A block's structural zeros, as the generator's runs (start, length):
    short runs and long ones; nothing else is touched."""
    from codegen.emit import _runs

    rng = np.random.default_rng(2)
    zeros = sorted({0, 1, 2, 5, *range(9, 16), *range(20, 28), *range(30, 61), 63})
    runs = _runs(zeros)
    assert runs[:6] == [0, 3, 5, 1, 9, 7]
    a = rng.normal(size=64) + 10.0
    kernels.test_zero_runs(_p(a), _ints(runs), len(runs) // 2)
    expected = np.where(np.isin(np.arange(64), zeros), 0.0, a)
    assert np.array_equal(a, expected) and np.count_nonzero(a) == 64 - len(zeros)
