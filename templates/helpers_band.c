/* ---- banded LU: the looped factorizations of large sparse matrices --------

   A matrix whose structural non-zeros the generator knows is reordered at
   generation time (codegen/ordering.py: reverse Cuthill-McKee on its
   bipartite graph): entry (i, j) of the reordered matrix is entry (rows[i],
   cols[j]) of the original, zero unless -lower <= j - i <= upper. Its LU
   factors with partial pivoting stay within the band of L (lower) and a band
   of U widened by lower by the row interchanges (LAPACK's dgbtrf): about
   n lower (lower + upper) operations instead of n^3 / 3. Band storage: row i
   holds the columns i - lower .. i + lower + upper at
   band[i * width + j - i + lower], width = 2 lower + upper + 1. The solves
   apply the reorderings as row interchanges (row_swaps, col_swaps: the
   reorderings as sequences of interchanges, like LU pivots). */

#define BAND_AT(band, width, lower, i, j) ((band)[(i) * (width) + (j) - (i) + (lower)])

/* LU factorization with partial pivoting of the reordered n x n matrix of
   the view a into band storage. Returns 1 where lu_factor would (a pivot not
   larger than SINGULAR_RTOL times the largest absolute entry of the matrix,
   or scale when larger), else 0. */
VECTOR_CLONES static int band_factor(int n, int lower, int upper, view a, const int *rows, const int *cols,
                       double *band, int *pivot, double scale)
{
    const int width = 2 * lower + upper + 1;
    double own = 0.0, threshold;
    int i, j, k;
    fill_zero(band, n * width);
    for (i = 0; i < n; ++i) {
        const int first = i - lower < 0 ? 0 : i - lower, last = i + upper < n ? i + upper : n - 1;
        for (j = first; j <= last; ++j) {
            const double entry = *view_entry(a, rows[i], cols[j]);
            BAND_AT(band, width, lower, i, j) = entry;
            if (fabs(entry) > own) own = fabs(entry);   /* norm_inf's */
        }
    }
    threshold = SINGULAR_RTOL * (own > scale ? own : scale);
    for (k = 0; k < n; ++k) {
        const int below = k + lower < n ? k + lower : n - 1;
        const int right = k + lower + upper < n ? k + lower + upper : n - 1;
        int row = k;
        double largest = fabs(BAND_AT(band, width, lower, k, k));
        for (i = k + 1; i <= below; ++i) {
            if (fabs(BAND_AT(band, width, lower, i, k)) > largest) {
                largest = fabs(BAND_AT(band, width, lower, i, k));
                row = i;
            }
        }
        pivot[k] = row;
        if (!(largest > threshold) || largest == 0.0) return 1;
        if (row != k) {
            for (j = k; j <= right; ++j) {
                const double swap = BAND_AT(band, width, lower, k, j);
                BAND_AT(band, width, lower, k, j) = BAND_AT(band, width, lower, row, j);
                BAND_AT(band, width, lower, row, j) = swap;
            }
        }
        for (i = k + 1; i <= below; ++i) {
            const double factor = BAND_AT(band, width, lower, i, k) / BAND_AT(band, width, lower, k, k);
            BAND_AT(band, width, lower, i, k) = factor;
            if (factor == 0.0) continue;
            add_multiple(right - k, -factor, &BAND_AT(band, width, lower, k, k + 1),
                         &BAND_AT(band, width, lower, i, k + 1));
        }
    }
    return 0;
}

static void swap_rows(double *b, int ldb, int m, int i, int k)
{
    int j;
    if (i == k) return;
    for (j = 0; j < m; ++j) {
        const double swap = b[i * ldb + j];
        b[i * ldb + j] = b[k * ldb + j];
        b[k * ldb + j] = swap;
    }
}

/* Solve A x = b with band_factor's factors of A, for the n x m right-hand
   side b (row stride ldb), in place. */
VECTOR_CLONES static void band_solve(int n, int lower, int upper, const double *band, const int *pivot,
                       const int *row_swaps, const int *col_swaps, double *b, int ldb, int m)
{
    const int width = 2 * lower + upper + 1;
    int i, j, k;
    for (k = 0; k < n; ++k) swap_rows(b, ldb, m, k, row_swaps[k]);   /* the reordered equations */
    for (k = 0; k < n; ++k) {                                         /* L (interchanges as they came) */
        const int below = k + lower < n ? k + lower : n - 1;
        swap_rows(b, ldb, m, k, pivot[k]);
        for (i = k + 1; i <= below; ++i) {
            const double factor = BAND_AT(band, width, lower, i, k);
            if (factor == 0.0) continue;
            add_multiple(m, -factor, b + k * ldb, b + i * ldb);
        }
    }
    for (i = n - 1; i >= 0; --i) {                                    /* U */
        const int right = i + lower + upper < n ? i + lower + upper : n - 1;
        const double inverse = 1.0 / BAND_AT(band, width, lower, i, i);
        for (k = i + 1; k <= right; ++k) {
            const double factor = BAND_AT(band, width, lower, i, k);
            if (factor == 0.0) continue;
            add_multiple(m, -factor, b + k * ldb, b + i * ldb);
        }
        for (j = 0; j < m; ++j) b[i * ldb + j] *= inverse;
    }
    for (k = n - 1; k >= 0; --k) swap_rows(b, ldb, m, k, col_swaps[k]);   /* the original unknowns */
}

/* pivot_condition of band_factor's factors */
static double band_pivot_condition(int n, int lower, int upper, const double *band, double scale)
{
    const int width = 2 * lower + upper + 1;
    double smallest = HUGE_VAL;
    int k;
    if (n == 0) return 1.0;
    for (k = 0; k < n; ++k)
        if (fabs(BAND_AT(band, width, lower, k, k)) < smallest) smallest = fabs(BAND_AT(band, width, lower, k, k));
    return smallest > 0.0 ? scale / smallest : HUGE_VAL;
}
