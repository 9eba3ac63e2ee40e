"""Bandwidth-reducing orderings of structural non-zero patterns, at generation time.

A looped factorization of a large, sparse matrix whose pattern the derivation
knows (the multiplier form's speed-level system [M_uuc; M_uud] of the N-loop
four-bar, its partition blocks J_c P_qd and B_v P_ud) runs as a banded LU with
partial pivoting on the matrix reordered here: reverse Cuthill-McKee
(George and Liu) on the bipartite graph of the pattern (a node per row and
per column, an edge per structural non-zero), whose order of the row nodes
and of the column nodes gives the row and the column orderings: the rows of
these matrices are equations, not unknowns, so one symmetric permutation
would not do. Partial pivoting keeps L within the lower bandwidth and widens U by
it (LAPACK's dgbtrf), so the factorization costs about n kl (kl + ku) instead
of n^3 / 3. Pure Python, deterministic: ties broken by index.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Band:
    """A reordering of an n x n matrix and its bandwidths: the reordered
    matrix's entry (i, j) is the original's (rows[i], cols[j]), and it is
    structurally zero unless -lower <= j - i <= upper."""

    rows: tuple
    cols: tuple
    lower: int
    upper: int

    @property
    def n(self):
        return len(self.rows)

    @property
    def width(self):
        """Entries per row of the band storage of the LU factors: L's lower,
        the diagonal, U's upper widened by lower (row interchanges)."""
        return 2 * self.lower + self.upper + 1

    def factor_cost(self):
        """Multiply-adds of the banded factorization (an upper bound)."""
        return self.n * self.lower * (self.lower + self.upper)

    def dense_cost(self):
        return self.n ** 3 // 3



def bandwidths(nonzeros, rows, cols):
    """(lower, upper) bandwidths of the pattern ``nonzeros`` ((row, col)
    pairs) with its rows in the order ``rows`` and its columns in ``cols``."""
    row_at = {k: i for i, k in enumerate(rows)}
    col_at = {k: i for i, k in enumerate(cols)}
    lower = upper = 0
    for row, col in nonzeros:
        offset = col_at[col] - row_at[row]
        lower, upper = max(lower, -offset), max(upper, offset)
    return lower, upper


def reverse_cuthill_mckee(count, edges):
    """An ordering of the nodes 0..count-1 of the graph ``edges`` with a small
    bandwidth: breadth-first from a pseudo-peripheral node of each component,
    neighbours by increasing degree, the whole reversed."""
    neighbours = [set() for _ in range(count)]
    for a, b in edges:
        if a != b:
            neighbours[a].add(b)
            neighbours[b].add(a)
    neighbours = [sorted(s) for s in neighbours]
    degree = [len(s) for s in neighbours]
    placed = [False] * count
    order = []

    def levels(start):
        seen, frontier, last = {start}, [start], [start]
        depth = 0
        while frontier:
            last = frontier
            following = []
            for node in frontier:
                for other in neighbours[node]:
                    if other not in seen and not placed[other]:
                        seen.add(other)
                        following.append(other)
            frontier = following
            depth += 1
        return depth, last

    for seed in sorted(range(count), key=lambda k: (degree[k], k)):
        if placed[seed]:
            continue
        # a pseudo-peripheral start: the far end of breadth-first searches
        start, (depth, last) = seed, levels(seed)
        while True:
            candidate = min(last, key=lambda k: (degree[k], k))
            candidate_depth, candidate_last = levels(candidate)
            if candidate_depth <= depth:
                break
            start, depth, last = candidate, candidate_depth, candidate_last
        placed[start] = True
        queue, head = [start], 0
        while head < len(queue):
            node = queue[head]
            head += 1
            order.append(node)
            for other in sorted((k for k in neighbours[node] if not placed[k]), key=lambda k: (degree[k], k)):
                placed[other] = True
                queue.append(other)
    return tuple(reversed(order))


def band_of(n, nonzeros):
    """The :class:`Band` of the n x n pattern ``nonzeros`` ((row, col)
    pairs): reverse Cuthill-McKee on its bipartite graph (row i is node i,
    column j node n + j), or the natural order where that is cheaper."""
    nonzeros = sorted(set(nonzeros))
    order = reverse_cuthill_mckee(2 * n, [(row, n + col) for row, col in nonzeros])
    candidates = [(tuple(range(n)), tuple(range(n))),
                  (tuple(k for k in order if k < n), tuple(k - n for k in order if k >= n))]
    best = None
    for rows, cols in candidates:
        band = Band(rows, cols, *bandwidths(nonzeros, rows, cols))
        if best is None or band.factor_cost() < best.factor_cost():
            best = band
    return best


def swaps(order):
    """``order`` (the new position i holds the old k = order[i]) as a sequence
    of interchanges: swapping positions i and swaps[i] for i = 0, 1, ... in
    turn moves old position order[i] to i (as LU pivots do)."""
    at = list(range(len(order)))          # at[i]: the old index now at position i
    where = list(range(len(order)))       # where[k]: the position of old index k
    result = []
    for i, k in enumerate(order):
        j = where[k]
        result.append(j)
        at[i], at[j] = at[j], at[i]
        where[at[i]], where[at[j]] = i, j
    return tuple(result)
