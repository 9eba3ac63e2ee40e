/* ---- products over the structural non-zeros of a sparse left operand ------
   c (rows x cols) = a b, c += a b or c -= a b (mode), a's non-zeros of row i
   being start[i] .. start[i + 1] - 1, at a[entry[k]] in column inner[k] (the
   row of b), ascending: the same sums as product_view, which skips zeros. */
static void sparse_product(int rows, int cols, const int *start, const int *entry, const int *inner,
                                         const double *a, view b, view c, int mode)
{
    int i, j, k;
    const int plain = view_is_plain(b) && view_is_plain(c);
    for (i = 0; i < rows; ++i) {
        if (mode == SET)
            for (j = 0; j < cols; ++j) *view_entry(c, i, j) = 0.0;
        for (k = start[i]; k < start[i + 1]; ++k) {
            const double factor = mode == SUBTRACT ? -a[entry[k]] : a[entry[k]];
            if (factor != 0.0) add_row_multiple(factor, b, inner[k], c, i, cols, plain);
        }
    }
}

