/*
 * The generic helpers of the generated code: small dense linear algebra on
 * row-major arrays, views, LU, SVDs, orthonormal bases. Included verbatim
 * into every model's C file (codegen/emit.py); the steps of
 * codegen/procedure.py call them in their looped rendering. Plain C99;
 * they use SINGULAR_RTOL and NONFINITE_RESULT, defined before this text.
 */

/* ---- small dense linear algebra on row-major arrays ---------------------- */

/* Loops over BLOCK_COLUMNS consecutive entries (a constant trip count) are
   unrolled where the compiler takes the hint, so that plain -O2 keeps their
   values in (vector) registers; a helper called with a constant width is
   inlined where the compiler allows forcing it. */
#define BLOCK_COLUMNS 8
#if defined(__GNUC__) || defined(__clang__)
#define FORCE_INLINE static inline __attribute__((always_inline))
#define UNROLL_COLUMNS _Pragma("GCC unroll 32")
#else
#define FORCE_INLINE static
#define UNROLL_COLUMNS
#endif
/* With DENSE_CLONES defined (the model's <NAME>_DENSE_CLONES: the Python
   module's build defines it), the LU factorizations and solves are compiled
   several times where the compiler and the C library can choose between them
   at load time (target_clones, an ifunc of glibc on x86-64): for AVX2 (four
   doubles a vector instruction) and for the baseline, and with
   DENSE_CLONES_WIDE (a model whose linearization runs them on its fast path:
   a large one; a third copy costs a small model's compile 0.3 s) for
   x86-64-v4 (AVX-512: eight; GCC 11 or later, clang) too; otherwise once,
   for the baseline, and the object needs nothing but libm (an embedded
   build). The same operations in the same order in every clone, so the same
   bits: no fused multiply-add (GCC contracts none in ISO C, -std=c99: the
   x86-64-v4 clone only there; clang is told so below, as it would contract
   in that clone). */
#if defined(DENSE_CLONES) && defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#if defined(DENSE_CLONES_WIDE) && (defined(__clang__) || (__GNUC__ >= 11 && defined(__STRICT_ANSI__)))
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
#define VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#endif
#ifndef VECTOR_CLONES
#define VECTOR_CLONES
#endif

/* y += factor x over count entries; x and y do not overlap. Bit for bit the
   plain loop's result (y - f x and y + (-f) x round alike). */
FORCE_INLINE void add_multiple(int count, double factor, const double *restrict x, double *restrict y)
{
    int j = 0, c;
    for (; j + BLOCK_COLUMNS <= count; j += BLOCK_COLUMNS)
        UNROLL_COLUMNS for (c = 0; c < BLOCK_COLUMNS; ++c) y[j + c] += factor * x[j + c];
    for (; j < count; ++j) y[j] += factor * x[j];
}

static void fill_zero(double *a, int count)
{
    int i;
    for (i = 0; i < count; ++i) a[i] = 0.0;
}

/* 1 if no entry is NaN or +-Inf: a[i] * 0.0 is 0 for a finite entry and NaN
   otherwise, and a NaN stays NaN in a sum. Four independent sums (two
   vectors of two): few instructions an entry, short chains of additions.
   This runs on every input and output of every call, mostly on a few entries
   of a known count: always inlined (a call costs more than the check then;
   GCC stopped inlining it by itself once view_is_finite called it too). */
FORCE_INLINE int all_finite(const double *a, int count)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int i;
    for (i = 0; i + 3 < count; i += 4) {
        s0 += a[i] * 0.0;
        s1 += a[i + 1] * 0.0;
        s2 += a[i + 2] * 0.0;
        s3 += a[i + 3] * 0.0;
    }
    for (; i < count; ++i) s0 += a[i] * 0.0;
    return (s0 + s1) + (s2 + s3) == 0.0;
}

/* a[start .. start + length) = 0 for the count runs (start, length) of runs:
   the structural zeros of a block whose non-zeros were written by
   straight-line code (a block with few non-zeros: a few long runs). */
static void zero_runs(double *a, const int *runs, int count)
{
    int k;
    for (k = 0; k < count; ++k) {
        double *start = a + runs[2 * k];
        const int length = runs[2 * k + 1];
        if (length >= BLOCK_COLUMNS) {
            fill_zero(start, length);     /* (a call of memset, where the compiler makes it one) */
        } else {
            int j;
            UNROLL_COLUMNS for (j = 0; j < BLOCK_COLUMNS; ++j)
                if (j < length) start[j] = 0.0;
        }
    }
}

static double norm_inf(const double *a, int count)
{
    double largest = 0.0;
    int i;
    for (i = 0; i < count; ++i) if (fabs(a[i]) > largest) largest = fabs(a[i]);
    return largest;
}

/* 1 if an entry is larger than tol in absolute value or is NaN (which
   norm_inf would pass over, so a NaN residual must not pass the check). */
static int exceeds(const double *a, int count, double tol)
{
    int bad = 0, i;
    for (i = 0; i < count; ++i) bad |= !(fabs(a[i]) <= tol);
    return bad;
}

/* status (a failed check of the matrix or residual a, count entries), or
   NONFINITE_RESULT if a holds NaN or Inf: a NaN passes no pivot test, so a
   matrix the model's expressions made NaN (e.g. 0/0) would be reported as
   singular; report the real cause instead. Called only on the error path.
   LU elimination keeps non-finite entries non-finite, so a may be a partly
   factorized matrix. */
static int unless_nonfinite(const double *a, int count, int status)
{
    return all_finite(a, count) ? status : NONFINITE_RESULT;
}

/* ---- views: rows and columns of row-major arrays (codegen/procedure.py, View) ---- */

/* The matrix a view reads: data[row(i) * ld + column(j)], row(i) = rows[i] (or
   i), column(j) = cols[j] (or j), or its transpose. Written views are never
   transposed. */
typedef struct {
    double *data;
    int ld;
    const int *rows;
    const int *cols;
    int transposed;
} view;

static view make_view(const double *data, int ld, const int *rows, const int *cols, int transposed)
{
    view v;
    v.data = (double *)data;   /* read only where the view is an operand */
    v.ld = ld;
    v.rows = rows;
    v.cols = cols;
    v.transposed = transposed;
    return v;
}

static double *view_entry(view v, int i, int j)
{
    const int row = v.transposed ? j : i, column = v.transposed ? i : j;
    return v.data + (v.rows ? v.rows[row] : row) * v.ld + (v.cols ? v.cols[column] : column);
}

/* the start of row i of an untransposed view (its columns: v.cols or 0, 1, ...) */
static double *view_row(view v, int i)
{
    return v.data + (v.rows ? v.rows[i] : i) * v.ld;
}

static int view_is_finite(int rows, int cols, view v)
{
    double sum = 0.0;
    int i, j;
    if (!v.transposed && !v.cols) {
        for (i = 0; i < rows; ++i)
            if (!all_finite(view_row(v, i), cols)) return 0;
        return 1;
    }
    for (i = 0; i < rows; ++i)
        for (j = 0; j < cols; ++j) sum += *view_entry(v, i, j) * 0.0;
    return sum == 0.0;
}

static int view_is_plain(view v)
{
    return !v.rows && !v.cols && !v.transposed;
}

/* Whether the rows x cols blocks at a and b (row strides lda, ldb) share no
   memory. */
static int apart(const double *a, int lda, const double *b, int ldb, int rows, int cols)
{
    const char *a_end = (const char *)(a + (rows - 1) * lda + cols);
    const char *b_end = (const char *)(b + (rows - 1) * ldb + cols);
    return a_end <= (const char *)b || b_end <= (const char *)a;
}

/* The columns of a partition (src.cols: the columns but a few, ascending)
   into plain rows: by runs of consecutive columns, each a memcpy per row,
   where there are few runs and src and dst share no memory; returns 0 (and
   copies nothing) otherwise. The same values as entry by entry. */
static int copy_column_runs(int rows, int cols, view src, view dst)
{
    int i, j, run, runs = 0, last = 0;
    for (j = 0; j < cols; ++j) {
        runs += j == 0 || src.cols[j] != src.cols[j - 1] + 1;
        if (src.cols[j] > last) last = src.cols[j];
    }
    if (src.rows || dst.rows || 4 * runs > cols
        || !apart(src.data, src.ld, dst.data, dst.ld, rows, last + 1 > cols ? last + 1 : cols))
        return 0;
    for (j = 0; j < cols; j += run) {
        for (run = 1; j + run < cols && src.cols[j + run] == src.cols[j] + run; ++run) continue;
        for (i = 0; i < rows; ++i)
            memcpy(dst.data + i * dst.ld + j, src.data + i * src.ld + src.cols[j], (size_t)run * sizeof(double));
    }
    return 1;
}

/* dst = src (rows x cols), -src when negate; dst += (-)src when accumulate.
   Row by row through row pointers where src is not transposed (dst never is). */
static void copy_view(int rows, int cols, view src, int negate, int accumulate, view dst)
{
    int i, j;
    if (!src.transposed && src.cols && !negate && !accumulate && !dst.cols && rows > 0
        && copy_column_runs(rows, cols, src, dst))
        return;
    if (!src.transposed) {
        for (i = 0; i < rows; ++i) {
            const double *from = view_row(src, i);
            double *to = view_row(dst, i);
            const int *from_cols = src.cols, *to_cols = dst.cols;
            if (!negate && !accumulate && !to_cols) {
                if (from_cols) {                  /* the columns of a partition */
                    for (j = 0; j + 4 <= cols; j += 4) {
                        to[j] = from[from_cols[j]];
                        to[j + 1] = from[from_cols[j + 1]];
                        to[j + 2] = from[from_cols[j + 2]];
                        to[j + 3] = from[from_cols[j + 3]];
                    }
                    for (; j < cols; ++j) to[j] = from[from_cols[j]];
                } else
                    memmove(to, from, (size_t)cols * sizeof(double));
                continue;
            }
            for (j = 0; j < cols; ++j) {
                const double value = negate ? -from[from_cols ? from_cols[j] : j] : from[from_cols ? from_cols[j] : j];
                double *out = to + (to_cols ? to_cols[j] : j);
                *out = accumulate ? *out + value : value;
            }
        }
        return;
    }
    for (i = 0; i < rows; ++i)
        for (j = 0; j < cols; ++j) {
            const double value = negate ? -*view_entry(src, i, j) : *view_entry(src, i, j);
            double *out = view_entry(dst, i, j);
            *out = accumulate ? *out + value : value;
        }
}

static void zero_view(int rows, int cols, view dst)
{
    int i, j;
    for (i = 0; i < rows; ++i)
        for (j = 0; j < cols; ++j) *view_entry(dst, i, j) = 0.0;
}

/* dst = I (rows x cols: ones where i == j) */
static void identity_view(int rows, int cols, view dst)
{
    int i, j;
    for (i = 0; i < rows; ++i)
        for (j = 0; j < cols; ++j) *view_entry(dst, i, j) = i == j ? 1.0 : 0.0;
}

/* c = a b (mode SET), c - a b (SUBTRACT) or c + a b (ADD): a rows x inner, b
   inner x cols. Zero factors of a are skipped (the blocks are sparse); plain
   views of b and c take the inner loop over contiguous memory. */
enum { SET = 0, SUBTRACT = 1, ADD = 2 };

/* row i of c (cols entries) += factor times row l of b; plain: both views
   contiguous by rows */
static void add_row_multiple(double factor, view b, int l, view c, int i, int cols, int plain)
{
    int j;
    if (plain) {
        const double *b_row = b.data + l * b.ld;
        double *c_row = c.data + i * c.ld;
        add_multiple(cols, factor, b_row, c_row);
    } else {
        for (j = 0; j < cols; ++j) *view_entry(c, i, j) += factor * *view_entry(b, l, j);
    }
}

static void product_view(int rows, int inner, int cols, view a, view b, view c, int mode)
{
    int i, j, l;
    const int plain = view_is_plain(b) && view_is_plain(c);
    for (i = 0; i < rows; ++i) {
        if (mode == SET)
            for (j = 0; j < cols; ++j) *view_entry(c, i, j) = 0.0;
        for (l = 0; l < inner; ++l) {
            const double factor = mode == SUBTRACT ? -*view_entry(a, i, l) : *view_entry(a, i, l);
            if (factor != 0.0) add_row_multiple(factor, b, l, c, i, cols, plain);
        }
    }
}

static void negate_view(int rows, int cols, view v)
{
    int i, j;
    for (i = 0; i < rows; ++i)
        for (j = 0; j < cols; ++j) *view_entry(v, i, j) = -*view_entry(v, i, j);
}

/* rows (count x cols view) = (I - P) rows, P count x count; tmp: count */
static void project_out(int count, int cols, view rows, const double *P, double *tmp)
{
    int i, j, k;
    for (j = 0; j < cols; ++j) {
        for (i = 0; i < count; ++i) {
            double sum = 0.0;
            for (k = 0; k < count; ++k) sum += P[i * count + k] * *view_entry(rows, k, j);
            tmp[i] = sum;
        }
        for (i = 0; i < count; ++i) *view_entry(rows, i, j) -= tmp[i];
    }
}

/* the rows of v (rows x cols): the first count moved after the others, by
   three reversals */
static void reverse_rows(view v, int first, int count, int cols)
{
    int i, j;
    for (i = 0; i < count / 2; ++i)
        for (j = 0; j < cols; ++j) {
            double *x = view_entry(v, first + i, j), *y = view_entry(v, first + count - 1 - i, j);
            const double swap = *x;
            *x = *y;
            *y = swap;
        }
}

static void rotate_rows(int rows, int cols, int count, view v)
{
    reverse_rows(v, 0, count, cols);
    reverse_rows(v, count, rows - count, cols);
    reverse_rows(v, 0, rows, cols);
}

/* Rows of cols entries packed one after another at a (stride cols) spread in
   place to rows of stride entries (stride >= cols): from the last entry
   back, so no entry is overwritten before it is read. */
static void widen_rows(int rows, int cols, int stride, double *a)
{
    int i, j;
    for (i = rows - 1; i >= 0; --i)
        for (j = cols - 1; j >= 0; --j) a[i * stride + j] = a[i * cols + j];
}

static void copy_indices(int count, const int *source, int *destination)
{
    int i;
    for (i = 0; i < count; ++i) destination[i] = source[i];
}

static void fill_indices(int count, int value, int *destination)
{
    int i;
    for (i = 0; i < count; ++i) destination[i] = value;
}

/* independent (count - dependent_count indices, ascending) = the complement of
   dependent in 0..count */
static void complement(int count, const int *dependent, int dependent_count, int *independent)
{
    int i, j, k = 0;
    for (i = 0; i < count; ++i) {
        int found = 0;
        for (j = 0; j < dependent_count; ++j) found |= dependent[j] == i;
        if (!found) independent[k++] = i;
    }
}

/* In-place LU factorization with partial pivoting of the n x n matrix a.
   Returns 1 if a pivot is not larger than SINGULAR_RTOL times the largest
   absolute entry of a, or of the matrix a is taken from when scale is its
   largest entry (a constraint Jacobian's columns of the dependent coordinates
   or speeds are judged against the whole Jacobian), else 0. */
VECTOR_CLONES static int lu_factor(int n, double *a, int *pivot, double scale)
{
    const double own = norm_inf(a, n * n);
    const double threshold = SINGULAR_RTOL * (own > scale ? own : scale);
    int i, j, k;
    for (k = 0; k < n; ++k) {
        int row = k;
        double largest = fabs(a[k * n + k]);
        for (i = k + 1; i < n; ++i) {
            if (fabs(a[i * n + k]) > largest) {
                largest = fabs(a[i * n + k]);
                row = i;
            }
        }
        pivot[k] = row;
        if (!(largest > threshold) || largest == 0.0) return 1;
        if (row != k) {
            for (j = 0; j < n; ++j) {
                const double swap = a[k * n + j];
                a[k * n + j] = a[row * n + j];
                a[row * n + j] = swap;
            }
        }
        for (i = k + 1; i < n; ++i) {
            const double factor = a[i * n + k] / a[k * n + k];
            a[i * n + k] = factor;
            if (factor == 0.0) continue;   /* the blocks are sparse: skip zero rows */
            add_multiple(n - k - 1, -factor, a + k * n + k + 1, a + i * n + k + 1);
        }
    }
    return 0;
}

/* The substitutions of lu_solve on width (<= 4 BLOCK_COLUMNS) columns of b:
   each row's running sums stay in registers while the rows above it (below
   it) are subtracted, so an entry takes a load, a multiply and a subtraction
   instead of a load and a store of the sum as well. Each entry sees the same
   operations in the same order as in the plain row-by-row substitution, so
   the result is the same bit for bit. Called with a constant width, the
   column loops have fixed trip counts: plain -O2 makes them vector
   instructions (so it is inlined where the compiler allows forcing it). */
FORCE_INLINE void substitute_columns(int n, const double *lu, double *b, int ldb, int width)
{
    double sum[4 * BLOCK_COLUMNS] = {0.0};
    int i, k, c;
    for (i = 1; i < n; ++i) {
        double *row = b + i * ldb;
        UNROLL_COLUMNS for (c = 0; c < width; ++c) sum[c] = row[c];
        for (k = 0; k < i; ++k) {
            const double factor = lu[i * n + k];
            const double *above = b + k * ldb;
            if (factor == 0.0) continue;
            UNROLL_COLUMNS for (c = 0; c < width; ++c) sum[c] -= factor * above[c];
        }
        UNROLL_COLUMNS for (c = 0; c < width; ++c) row[c] = sum[c];
    }
    for (i = n - 1; i >= 0; --i) {
        const double inverse = 1.0 / lu[i * n + i];
        double *row = b + i * ldb;
        UNROLL_COLUMNS for (c = 0; c < width; ++c) sum[c] = row[c];
        for (k = i + 1; k < n; ++k) {
            const double factor = lu[i * n + k];
            const double *below = b + k * ldb;
            if (factor == 0.0) continue;
            UNROLL_COLUMNS for (c = 0; c < width; ++c) sum[c] -= factor * below[c];
        }
        UNROLL_COLUMNS for (c = 0; c < width; ++c) row[c] = sum[c] * inverse;
    }
}

/* Solve (LU) x = b for the n x m right-hand side b (row stride ldb), in place:
   the row swaps, then the substitutions on blocks of 32, 16 and 8 columns and
   the remainder. */
VECTOR_CLONES static void lu_solve(int n, const double *lu, const int *pivot, double *b, int ldb, int m)
{
    int j, k;
    for (k = 0; k < n; ++k) {
        if (pivot[k] != k) {
            for (j = 0; j < m; ++j) {
                const double swap = b[k * ldb + j];
                b[k * ldb + j] = b[pivot[k] * ldb + j];
                b[pivot[k] * ldb + j] = swap;
            }
        }
    }
    for (j = 0; j + 4 * BLOCK_COLUMNS <= m; j += 4 * BLOCK_COLUMNS)
        substitute_columns(n, lu, b + j, ldb, 4 * BLOCK_COLUMNS);
    for (; j + 2 * BLOCK_COLUMNS <= m; j += 2 * BLOCK_COLUMNS)
        substitute_columns(n, lu, b + j, ldb, 2 * BLOCK_COLUMNS);
    for (; j + BLOCK_COLUMNS <= m; j += BLOCK_COLUMNS)
        substitute_columns(n, lu, b + j, ldb, BLOCK_COLUMNS);
    if (j + 1 == m)
        substitute_columns(n, lu, b + j, ldb, 1);       /* one column (ud*, B'): no column loop */
    else if (j < m)
        substitute_columns(n, lu, b + j, ldb, m - j);
}

/* scale over the smallest absolute pivot of the n x n LU factors lu: the
   condition estimate of a partition block (scale: the largest absolute entry
   of the Jacobian the block is taken from). 1 for an empty block, +Inf for a
   zero pivot. Cheap, and of the order of the condition number for the small
   blocks of constraint Jacobians; used to warn, not to decide. */
static double pivot_condition(int n, const double *lu, double scale)
{
    double smallest = HUGE_VAL;
    int k;
    if (n == 0) return 1.0;
    for (k = 0; k < n; ++k) if (fabs(lu[k * n + k]) < smallest) smallest = fabs(lu[k * n + k]);
    return smallest > 0.0 ? scale / smallest : HUGE_VAL;
}

/* One-sided Jacobi SVD (Hestenes) in place: g (rows x cols, row-major) becomes
   G V with the columns of G V mutually orthogonal, v (cols x cols) orthogonal,
   columns sorted by decreasing norm sigma[k]. So g = U S V^T with U S the
   columns of the result: sigma are the singular values (cols of them, the
   last cols - rows zero for a wide matrix) and the columns of v beyond the
   rank span the null space. Accuracy: a few ulps of sigma[0] (a column below
   DBL_EPSILON times the matrix's Frobenius norm is left as it is: zero);
   sweeps until no pair of columns needs a rotation (at most 60). v may be
   NULL: the singular values only. */
static void jacobi_svd(int rows, int cols, double *g, double *v, double *sigma)
{
    int i, j, k, sweep;
    double negligible = 0.0;   /* columns this small (squared) count as zero */
    if (v) {
        fill_zero(v, cols * cols);
        for (k = 0; k < cols; ++k) v[k * cols + k] = 1.0;
    }
    for (k = 0; k < rows * cols; ++k) negligible += g[k] * g[k];
    negligible *= DBL_EPSILON * DBL_EPSILON;
    for (sweep = 0; sweep < 60; ++sweep) {
        int rotated = 0;
        for (i = 0; i + 1 < cols; ++i) {
            for (j = i + 1; j < cols; ++j) {
                double alpha = 0.0, beta = 0.0, gamma = 0.0, zeta, t, c, s;
                for (k = 0; k < rows; ++k) {
                    const double a = g[k * cols + i], b = g[k * cols + j];
                    alpha += a * a;
                    beta += b * b;
                    gamma += a * b;
                }
                /* orthogonal to working precision, or a column that is zero
                   to it (the null space of a wide matrix): no rotation */
                if (!(gamma * gamma > DBL_EPSILON * DBL_EPSILON * alpha * beta) || alpha <= negligible
                    || beta <= negligible)
                    continue;
                rotated = 1;
                zeta = (beta - alpha) / (2.0 * gamma);
                t = (zeta >= 0.0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1.0 + zeta * zeta));
                c = 1.0 / sqrt(1.0 + t * t);
                s = c * t;
                for (k = 0; k < rows; ++k) {
                    const double a = g[k * cols + i], b = g[k * cols + j];
                    g[k * cols + i] = c * a - s * b;
                    g[k * cols + j] = s * a + c * b;
                }
                for (k = 0; v && k < cols; ++k) {
                    const double a = v[k * cols + i], b = v[k * cols + j];
                    v[k * cols + i] = c * a - s * b;
                    v[k * cols + j] = s * a + c * b;
                }
            }
        }
        if (!rotated) break;
    }
    for (j = 0; j < cols; ++j) {
        double sum = 0.0;
        for (k = 0; k < rows; ++k) sum += g[k * cols + j] * g[k * cols + j];
        sigma[j] = sqrt(sum);
    }
    for (i = 0; i < cols; ++i) {   /* selection sort, decreasing: cols is small */
        int largest = i;
        for (j = i + 1; j < cols; ++j) if (sigma[j] > sigma[largest]) largest = j;
        if (largest == i) continue;
        {
            const double swap = sigma[i];
            sigma[i] = sigma[largest];
            sigma[largest] = swap;
        }
        for (k = 0; k < rows; ++k) {
            const double swap = g[k * cols + i];
            g[k * cols + i] = g[k * cols + largest];
            g[k * cols + largest] = swap;
        }
        for (k = 0; v && k < cols; ++k) {
            const double swap = v[k * cols + i];
            v[k * cols + i] = v[k * cols + largest];
            v[k * cols + largest] = swap;
        }
    }
}

/* The SVD of a wide (or square) rows x cols matrix a (rows <= cols), in the
   form jacobi_svd gives (g = a v: the columns U S, then cols - rows zero
   columns; v orthogonal; sigma decreasing), through a Householder QR of a^T =
   Q [R; 0]: then a = R^T Q^T restricted, a one-sided Jacobi SVD of the small
   R^T = U S W^T, and v = Q diag(W, I). Exact to rounding like jacobi_svd, at
   the cost of rows reflectors instead of cols^2 / 2 rotations a sweep.
   scratch: cols * rows + 2 * rows * rows + rows doubles. */
static void wide_svd(int rows, int cols, const double *a, double *g, double *v, double *sigma,
                     double *scratch)
{
    double *x = scratch, *small = scratch + cols * rows;   /* x = a^T: cols x rows */
    int i, j, k;
    for (i = 0; i < rows; ++i)
        for (j = 0; j < cols; ++j) x[j * rows + i] = a[i * cols + j];
    if (v) {
        fill_zero(v, cols * cols);
        for (k = 0; k < cols; ++k) v[k * cols + k] = 1.0;
    }
    for (k = 0; k < rows; ++k) {
        /* the reflector I - 2 h h^T / (h^T h) that zeros x[k+1:, k] */
        double norm = 0.0, alpha, hh;
        for (i = k; i < cols; ++i) norm += x[i * rows + k] * x[i * rows + k];
        norm = sqrt(norm);
        if (norm == 0.0) continue;
        alpha = x[k * rows + k] > 0.0 ? -norm : norm;
        x[k * rows + k] -= alpha;   /* h = x[k:, k] - alpha e_k, kept in place */
        hh = 0.0;
        for (i = k; i < cols; ++i) hh += x[i * rows + k] * x[i * rows + k];
        for (j = k + 1; j < rows; ++j) {   /* the remaining columns of x */
            double dot = 0.0;
            for (i = k; i < cols; ++i) dot += x[i * rows + k] * x[i * rows + j];
            dot *= 2.0 / hh;
            for (i = k; i < cols; ++i) x[i * rows + j] -= dot * x[i * rows + k];
        }
        for (j = 0; v && j < cols; ++j) {  /* v = v H_k: Q = H_0 H_1 ... */
            double dot = 0.0;
            for (i = k; i < cols; ++i) dot += v[j * cols + i] * x[i * rows + k];
            dot *= 2.0 / hh;
            for (i = k; i < cols; ++i) v[j * cols + i] -= dot * x[i * rows + k];
        }
        x[k * rows + k] = alpha;            /* R[k][k]; the reflector is no longer needed */
        for (i = k + 1; i < cols; ++i) x[i * rows + k] = 0.0;
    }
    /* R^T (rows x rows, lower triangular): its SVD R^T W = U S */
    for (i = 0; i < rows; ++i)
        for (j = 0; j < rows; ++j) g[i * cols + j] = j <= i ? x[j * rows + i] : 0.0;
    for (i = 0; i < rows; ++i)
        for (j = 0; j < rows; ++j) small[i * rows + j] = g[i * cols + j];
    if (!v) {   /* the singular values only */
        jacobi_svd(rows, rows, small, 0, sigma);
        for (j = rows; j < cols; ++j) sigma[j] = 0.0;
        return;
    }
    {
        double *w_small = small + rows * rows, *row = w_small + rows * rows;
        jacobi_svd(rows, rows, small, w_small, sigma);
        for (i = 0; i < rows; ++i) {
            for (j = 0; j < cols; ++j) g[i * cols + j] = j < rows ? small[i * rows + j] : 0.0;
        }
        for (j = rows; j < cols; ++j) sigma[j] = 0.0;
        /* v[:, :rows] = Q[:, :rows] W */
        for (i = 0; i < cols; ++i) {
            for (j = 0; j < rows; ++j) {
                double sum = 0.0;
                for (k = 0; k < rows; ++k) sum += v[i * cols + k] * w_small[k * rows + j];
                row[j] = sum;
            }
            for (j = 0; j < rows; ++j) v[i * cols + j] = row[j];
        }
    }
}

/* The numerical rank: singular values above rtol times the largest (sorted
   decreasing; at most limit of them); 0 for a zero matrix. */
static int numerical_rank(const double *sigma, int count, int limit, double rtol)
{
    int rank = 0;
    if (count == 0 || !(sigma[0] > 0.0)) return 0;
    while (rank < count && rank < limit && sigma[rank] > rtol * sigma[0]) ++rank;
    return rank;
}

/* The singular values of a (rows x cols) into sigma (cols of them, the same
   numbers wide_svd and jacobi_svd give) and the numerical rank; scratch as
   for wide_svd, and rows * cols doubles more. */
static int singular_values(int rows, int cols, const double *a, double *sigma, double rtol,
                           double *scratch)
{
    int i;
    if (rows <= cols) {
        wide_svd(rows, cols, a, scratch, 0, sigma, scratch + rows * cols);
    } else {
        for (i = 0; i < rows * cols; ++i) scratch[i] = a[i];
        jacobi_svd(rows, cols, scratch, 0, sigma);
    }
    return numerical_rank(sigma, cols, rows, rtol);
}

/* x (cols x m view) = A^+ b (b: rows x m view), or (A^+)^T b (b: cols x m,
   x: rows x m) when transposed, for the SVD of A (rows x cols) from
   jacobi_svd (g = U S, v, sigma), its first rank singular values kept:
   x = sum_k v_k (g_k . b) / sigma_k^2, the minimum-norm least-squares
   solution (transposed: sum_k g_k (v_k . b) / sigma_k^2); negated when
   negate. scratch: rank * m doubles. x may be b when rows == cols (b is
   read completely before x is written). */
static void pseudoinverse_solve(int rows, int cols, int rank, const double *g, const double *v,
                                const double *sigma, view b, int m, view x, int transposed,
                                int negate, double *scratch)
{
    const int in = transposed ? cols : rows, out = transposed ? rows : cols;
    int i, j, k;
    for (k = 0; k < rank; ++k) {
        const double weight = (negate ? -1.0 : 1.0) / (sigma[k] * sigma[k]);
        for (j = 0; j < m; ++j) {
            double sum = 0.0;
            for (i = 0; i < in; ++i)
                sum += (transposed ? v[i * cols + k] : g[i * cols + k]) * *view_entry(b, i, j);
            scratch[k * m + j] = sum * weight;
        }
    }
    for (i = 0; i < out; ++i) {
        for (j = 0; j < m; ++j) {
            double sum = 0.0;
            for (k = 0; k < rank; ++k)
                sum += (transposed ? g[i * cols + k] : v[i * cols + k]) * scratch[k * m + j];
            *view_entry(x, i, j) = sum;
        }
    }
}

/* The SVD of a (rows x cols view) in jacobi_svd's form into g (rows x cols),
   v (cols x cols), sigma (cols): through wide_svd where qr is set and rows <=
   cols (a Householder QR first: fewer rotations for a wide matrix), else by
   one-sided Jacobi on a itself (accurate to rounding relative to each column's
   scale: for badly scaled matrices); the numerical rank at rtol. scratch: as
   for wide_svd, and rows * cols more. */
static int svd(int rows, int cols, view a, double *g, double *v, double *sigma, double rtol, int qr,
               double *scratch)
{
    copy_view(rows, cols, a, 0, 0, make_view(scratch, cols, 0, 0, 0));
    if (qr && rows <= cols) {
        wide_svd(rows, cols, scratch, g, v, sigma, scratch + rows * cols);
    } else {
        copy_view(rows, cols, make_view(scratch, cols, 0, 0, 0), 0, 0, make_view(g, cols, 0, 0, 0));
        jacobi_svd(rows, cols, g, v, sigma);
    }
    return numerical_rank(sigma, cols, rows, rtol);
}

/* The thin QR factorization C = N L^T of C (rows x cols) with the identity
   in the rows independent[0..cols) and -K (count x cols, stride ldk) in the
   rows dependent[0..count): N with orthonormal columns, L lower triangular
   with a positive diagonal (unique), by Householder reflections (orthonormal
   to rounding however large K is). basis_t (cols x rows, stride ld_basis) =
   N^T, low (cols x cols) = L. scratch: 2 rows cols + cols doubles. */
static void orthonormalize(int rows, int cols, const double *K, int ldk, const int *dependent,
                           int count, const int *independent, double *basis_t, int ld_basis,
                           double *low, double *scratch)
{
    double *a = scratch, *q = scratch + rows * cols, *beta = q + rows * cols;
    int i, j, k;
    fill_zero(a, rows * cols);
    for (j = 0; j < cols; ++j) a[independent[j] * cols + j] = 1.0;
    for (k = 0; k < count; ++k)
        for (j = 0; j < cols; ++j) a[dependent[k] * cols + j] = -K[k * ldk + j];
    for (k = 0; k < cols; ++k) {
        /* the reflector I - beta h h^T that zeros a[k+1:, k]; h kept in place
           below the diagonal (its first entry in q's diagonal slot) */
        double norm = 0.0, alpha, hh = 0.0;
        for (i = k; i < rows; ++i) norm += a[i * cols + k] * a[i * cols + k];
        norm = sqrt(norm);
        alpha = a[k * cols + k] > 0.0 ? -norm : norm;
        a[k * cols + k] -= alpha;
        for (i = k; i < rows; ++i) hh += a[i * cols + k] * a[i * cols + k];
        beta[k] = hh > 0.0 ? 2.0 / hh : 0.0;
        for (j = k + 1; j < cols; ++j) {
            double dot = 0.0;
            for (i = k; i < rows; ++i) dot += a[i * cols + k] * a[i * cols + j];
            dot *= beta[k];
            for (i = k; i < rows; ++i) a[i * cols + j] -= dot * a[i * cols + k];
        }
        q[k * cols + k] = a[k * cols + k];   /* h[0], before R's diagonal replaces it */
        a[k * cols + k] = alpha;
    }
    /* N = H_0 ... H_{cols-1} [I; 0], the reflectors applied last to first */
    for (i = 0; i < rows; ++i)
        for (j = 0; j < cols; ++j) basis_t[j * ld_basis + i] = i == j ? 1.0 : 0.0;
    for (k = cols - 1; k >= 0; --k) {
        for (j = 0; j < cols; ++j) {
            double dot = q[k * cols + k] * basis_t[j * ld_basis + k];
            for (i = k + 1; i < rows; ++i) dot += a[i * cols + k] * basis_t[j * ld_basis + i];
            dot *= beta[k];
            basis_t[j * ld_basis + k] -= dot * q[k * cols + k];
            for (i = k + 1; i < rows; ++i) basis_t[j * ld_basis + i] -= dot * a[i * cols + k];
        }
    }
    /* L = R^T with a positive diagonal: flip the signs of the rows of R (and
       of the columns of N) whose diagonal entry is negative */
    for (j = 0; j < cols; ++j) {
        const double sign = a[j * cols + j] < 0.0 ? -1.0 : 1.0;
        for (k = 0; k < cols; ++k) low[k * cols + j] = k >= j ? sign * a[j * cols + k] : 0.0;
        if (sign < 0.0)
            for (i = 0; i < rows; ++i) basis_t[j * ld_basis + i] = -basis_t[j * ld_basis + i];
    }
}

/* b (n x m, row stride ldb) = L^T b for the lower triangular L (n x n):
   row i reads rows k >= i, so from the top in place */
static void lower_transposed_multiply(int n, const double *low, double *b, int ldb, int m)
{
    int i, j, k;
    for (i = 0; i < n; ++i)
        for (j = 0; j < m; ++j) {
            double sum = 0.0;
            for (k = i; k < n; ++k) sum += low[k * n + i] * b[k * ldb + j];
            b[i * ldb + j] = sum;
        }
}

/* The projector I - A A^+ (rows x rows) onto the left null space of A, from
   jacobi_svd of A (the columns g_k / sigma_k, k < rank, span its range). */
static void left_null_projector(int rows, int cols, int rank, const double *g, const double *sigma,
                                double *projector)
{
    int i, j, k;
    fill_zero(projector, rows * rows);
    for (i = 0; i < rows; ++i) projector[i * rows + i] = 1.0;
    for (k = 0; k < rank; ++k) {
        const double weight = 1.0 / (sigma[k] * sigma[k]);
        for (i = 0; i < rows; ++i)
            for (j = 0; j < rows; ++j) projector[i * rows + j] -= g[i * cols + k] * g[j * cols + k] * weight;
    }
}

/* Steadiness in a chart: flags[j] = 1 for each
   essential state j < states whose rate is not zero, that is above tol times
   the largest rate (at least 1); returns their count. The equations are
   E x' = A x + ... (rows of them, ld columns of E and A: the states first,
   then algebraic variables such as multipliers); E NULL: the identity, x' =
   A x, with row i the rate of state i (rows == states). A state is
   ignorable when no equation depends on it (its column of A is zero) except
   the equations of ignorable states (rows whose E holds only ignorable
   states' rates), repeatedly: a position, a heading, a wheel's angle. Such
   states add only zero eigenvalues and may change along a steady motion;
   the others are essential, and a steady motion keeps them constant (for a
   speed: no acceleration). An entry of A below ignorable_rtol times A's
   largest is zero. active: rows ints of scratch. */
static int unsteady_states(int rows, int states, int ld, const double *E, const double *A,
                           const double *rate, double tol, double ignorable_rtol, int *flags,
                           int *active)
{
    double negligible = 0.0, largest = 1.0;
    int changed = 1, count = 0, i, j;
    for (j = 0; j < states; ++j) if (fabs(rate[j]) > largest) largest = fabs(rate[j]);
    for (j = 0; j < states; ++j) count += !(fabs(rate[j]) <= tol * largest);
    if (!count) {   /* every rate zero: steady, whichever states are essential */
        for (j = 0; j < states; ++j) flags[j] = 0;
        return 0;
    }
    count = 0;
    {
        /* A's largest entry, in four independent running maxima (one chain of
           comparisons would wait on each; the maximum is the same in any order) */
        double m0 = 0.0, m1 = 0.0, m2 = 0.0, m3 = 0.0;
        const int total = rows * ld;
        for (i = 0; i + 3 < total; i += 4) {
            m0 = fabs(A[i]) > m0 ? fabs(A[i]) : m0;
            m1 = fabs(A[i + 1]) > m1 ? fabs(A[i + 1]) : m1;
            m2 = fabs(A[i + 2]) > m2 ? fabs(A[i + 2]) : m2;
            m3 = fabs(A[i + 3]) > m3 ? fabs(A[i + 3]) : m3;
        }
        for (; i < total; ++i) m0 = fabs(A[i]) > m0 ? fabs(A[i]) : m0;
        m0 = m1 > m0 ? m1 : m0;
        m2 = m3 > m2 ? m3 : m2;
        negligible = m2 > m0 ? m2 : m0;
    }
    negligible *= ignorable_rtol;   /* rounding in a column that is zero */
    for (j = 0; j < states; ++j) flags[j] = 1;
    for (i = 0; i < rows; ++i) active[i] = 1;
    if (!E && states <= 64 && rows == states) {
        /* the same passes on bit sets: column j's rows with a non-zero entry */
        unsigned long long essential = states == 64 ? ~0ULL : (1ULL << states) - 1, next;
        unsigned long long column[64];
        for (j = 0; j < states; ++j) column[j] = 0;
        for (i = 0; i < rows; ++i) {   /* row by row: A in the order of memory */
            const unsigned long long bit = 1ULL << i;
            for (j = 0; j < states; ++j) column[j] |= fabs(A[i * ld + j]) > negligible ? bit : 0ULL;
        }
        for (;;) {
            next = 0;
            for (j = 0; j < states; ++j) next |= (unsigned long long)((essential >> j & 1) && (column[j] & essential)) << j;
            if (next == essential) break;
            essential = next;
        }
        for (j = 0; j < states; ++j) {
            flags[j] = (int)(essential >> j & 1) && !(fabs(rate[j]) <= tol * largest);
            count += flags[j];
        }
        return count;
    }
    while (changed) {
        changed = 0;
        for (j = 0; j < states; ++j) {
            int depends = 0;
            if (!flags[j]) continue;
            for (i = 0; i < rows && !depends; ++i) depends = active[i] && fabs(A[i * ld + j]) > negligible;
            if (!depends) {
                flags[j] = 0;
                changed = 1;
            }
        }
        for (i = 0; i < rows; ++i) {
            int rates = 0, essential = 0;
            if (!active[i]) continue;
            if (!E) {
                active[i] = flags[i];
                continue;
            }
            for (j = 0; j < states; ++j)
                if (E[i * ld + j] != 0.0) {
                    rates = 1;
                    essential |= flags[j];
                }
            if (rates && !essential) {
                active[i] = 0;
                changed = 1;
            }
        }
    }
    for (j = 0; j < states; ++j) {
        flags[j] = flags[j] && !(fabs(rate[j]) <= tol * largest);
        count += flags[j];
    }
    return count;
}

/* The first count pivot columns of a column-pivoted (Gram-Schmidt) QR of a
   (rows x cols; destroyed): at each step the column of largest remaining norm
   (the first on ties), whose direction is then removed from every column.
   chosen: count indices, ascending. */
static void pivot_columns(int rows, int cols, double *a, int count, int *chosen)
{
    int i, j, step;
    for (step = 0; step < count; ++step) {
        int best = -1;
        double largest = -1.0;
        for (j = 0; j < cols; ++j) {
            double sum = 0.0;
            int taken = 0;
            for (i = 0; i < step; ++i) taken |= chosen[i] == j;
            if (taken) continue;
            for (i = 0; i < rows; ++i) sum += a[i * cols + j] * a[i * cols + j];
            if (sqrt(sum) > largest) {
                largest = sqrt(sum);
                best = j;
            }
        }
        chosen[step] = best;
        if (largest > 0.0) {
            for (j = 0; j < cols; ++j) {
                double dot = 0.0;
                for (i = 0; i < rows; ++i) dot += a[i * cols + best] * a[i * cols + j];
                dot /= largest * largest;
                if (j != best)
                    for (i = 0; i < rows; ++i) a[i * cols + j] -= dot * a[i * cols + best];
            }
            for (i = 0; i < rows; ++i) a[i * cols + best] = 0.0;
        }
    }
    for (i = 1; i < count; ++i) {   /* insertion sort, ascending */
        const int key = chosen[i];
        for (j = i - 1; j >= 0 && chosen[j] > key; --j) chosen[j + 1] = chosen[j];
        chosen[j + 1] = key;
    }
}
