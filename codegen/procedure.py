"""The numeric procedure, described once as named steps.

Every call of the generated code runs, after the symbolic blocks are
evaluated (Peterson's thesis chapter; Peterson, Gede and Hubbard):

    qd*  from  M_qq qd = -f_k(q, qd = 0, u, t)
    ud*  from  M_uu [ud; lambda] = -[f_a; f_d](q, qd*, u, ud = 0, r, t)
    K_c = (J_c P_qd)^-1 J_c P_qi,  K_v = [K_q, K_u] = (B_v P_ud)^-1 [J_vq, B_v P_ui]
    Ahat_x = A_xq + A_xu C_1 = A_xq - A_xu P_ud K_q              (x = q, u)
    A~  = [Ahat_q C_0, A_qu C_2; Ahat_u C_0, A_uu C_2],  X C_0 = X P_qi - X P_qd K_c,
                                                         X C_2 = X P_ui - X P_ud K_u
    A'  = M^-1 A~, B' = M^-1 [0; 0; B_u]   (block forward substitution, M = [M_qq 0; M_uq M_uu])
    A, B = the rows of A', B' of the independent states
    C, D = [Hhat_q C_0, H_u C_2] + H_rates A', H_r + H_rates B'   (the outputs y = h(q, qd, u, ud, r, t))

and, where a partition does not serve (Spencer's thesis: SVD null spaces and
local parametrizations; González et al.: the descriptor form), the rank-
revealing half: SVDs of J_c and B_v, the speed-level system solved through
the null space of B_v (minimum-norm multipliers), the local form in a
partition's chart or in the null spaces' (its embedding [dq; du] = T x, and
the outputs in its states: C = C_p H in a partition's chart, H the rows of T
at its independent states; C = H_q T_q + H_u T_u + H_rates A'_T, D = H_r +
H_rates B' with A'_T = M^-1 A~ T in the null spaces'), the descriptor form,
the automatic partition, equilibria by Gauss-Newton.

Here that procedure is data: :class:`Stage` objects, each holding the
symbolic blocks it evaluates and its numeric steps (:class:`Factor`,
:class:`Solve`, :class:`SVD`, ...) on :class:`View` objects (workspace arrays,
or rows and columns of them; a selection by a partition's index array is a
view too). Three renderings read it:

* :mod:`codegen.straight_line` runs the steps of the partition path on traced
  values for the model's default partition, with static pivots, and gives
  straight-line C;
* the template macros of ``templates/util.c.jinja`` turn every step into
  calls of the generic C helpers of ``templates/helpers.c`` (LU with partial
  pivoting, views, SVDs, ...), for any partition and for the rank-revealing
  half; a step kind without a looped rendering is an error when generating;
* entry points (:mod:`codegen.entry_points`) say which stages each public C
  function runs.

A change to the mathematics is a change here; the renderings follow. Every
threshold of the numerics is in :data:`THRESHOLDS` (rendered as overridable
macros of the header).
"""

from __future__ import annotations

from dataclasses import dataclass

# -- thresholds: the one home of every tolerance of the numerics ------------------------------

# name -> (default, what it decides); the header defines <NAME>_<name> for each,
# overridable at compile time (#ifndef)
THRESHOLDS = {
    "SINGULAR_RTOL": (1e-12, "Pivots of the LU factorizations (partial pivoting) smaller than "
                             "this times the largest absolute entry of the matrix count as singular."),
    "PIVOT_TAU": (0.1, "With the default partition, the factorizations run as generated "
                       "straight-line code with a pivot order fixed at generation time. Each "
                       "fixed pivot must be at least this fraction of every other candidate in its "
                       "column (threshold partial pivoting) and pass the SINGULAR_RTOL test; if one "
                       "does not, the call takes the general path (LU with partial pivoting), which "
                       "gives the same result to rounding and reports singular matrices. 1.0 "
                       "accepts only the pivots partial pivoting would choose."),
    "RANK_RTOL": (1e-9, "The local and descriptor forms and the automatic partition decide the "
                        "rank of J_c and B_v by their singular values: those above this times the "
                        "largest count (the default; each call may pass its own rank_tol)."),
    "CONDITION_RTOL": (1e-4, "A partition block (J_c P_qd, B_v P_ud) is well conditioned where "
                             "its condition estimate (the Jacobian's largest entry over the "
                             "smallest LU pivot) is at most 1 / CONDITION_RTOL: the straight-line "
                             "code accepts a static pivot only above this times the Jacobian's "
                             "largest entry, the charts keep the model's partition where its "
                             "blocks are, and the Python module warns above it."),
    "NEWTON_RTOL": (1e-13, "equilibrium's Gauss-Newton steps are minimum-norm: singular values "
                           "of its Jacobian below this times the largest count as zero "
                           "(directions along a family of equilibria); only at the rounding "
                           "level, as stiff models have singular values many decades apart."),
    "GRAM_LIMIT": (1e4, "The straight-line local chart orthonormalizes C = [I; -K] by Cholesky "
                        "of C^T C = I + K^T K, whose trace bounds its condition number and so the "
                        "loss of orthogonality (about DBL_EPSILON times it); above this trace the "
                        "looped rendering (Householder reflections) runs."),
    "GRAM_PIVOT": (0.5, "The Cholesky pivots of I + K^T K are at least 1; one below this "
                        "means rounding ruined the factorization (then the looped rendering)."),
    "CERTIFICATE_MARGIN": (2.0, "The straight-line certificate of full rank asks sigma_min / "
                                "sigma_max of its bounds to exceed this times rank_tol."),
    "CERTIFICATE_LIMIT": (1e6, "... and the bounds' ratio sigma_max / sigma_min to stay below "
                               "this, so that the rounding of the Gram matrix J J^T cannot matter."),
    "CERTIFICATE_FLOOR": (1e-12, "A Cholesky pivot of J J^T below this times ||J||_F^2 fails the "
                                 "certificate before its square root."),
    "HALVINGS": (40, "equilibrium halves a step at most this many times looking for a decrease "
                     "of |R| (down to 1e-12 of the Gauss-Newton step); none: no progress."),
    "ROUNDING_FACTOR": (64.0, "equilibrium's estimate of the rounding level of its residual: "
                              "this times DBL_EPSILON times the largest row of |dR/dx| |x|."),
    "BAND_MIN_ORDER": (24, "At generation time: a looped LU factorization of a matrix whose "
                           "structural non-zeros the derivation knows (the speed-level system, "
                           "M_qq, the default partition's J_c P_qd and B_v P_ud) of at least this "
                           "order runs banded, in a bandwidth-reducing order chosen then "
                           "(codegen/ordering.py), where that costs at most BAND_FRACTION of the "
                           "dense LU; smaller ones stay dense (the generated C lists the banded "
                           "factorizations with their reorderings)."),
    "BAND_FRACTION": (0.25, "At generation time: the largest ratio of the banded LU's operations "
                            "(n lower (lower + upper)) to the dense LU's (n^3 / 3) for which a "
                            "factorization runs banded (see BAND_MIN_ORDER)."),
    "SPARSE_MIN_ENTRIES": (1024, "At generation time: a looped product whose left operand is a "
                                 "whole block the derivation evaluates (or its columns of the "
                                 "model's default partition) with at least this many entries, "
                                 "at most SPARSE_FRACTION of them structurally non-zero, "
                                 "iterates over a list of those non-zeros made then (the "
                                 "generated C's sparse_* tables); other products, and another "
                                 "partition's, step through every entry."),
    "SPARSE_FRACTION": (0.25, "At generation time: the largest fraction of structural non-zeros "
                              "of a product's left operand for which the product runs sparse "
                              "(see SPARSE_MIN_ENTRIES)."),
    "IGNORABLE_RTOL": (1e-12, "unsteady_states: an entry of A below this times A's largest is "
                              "zero (a state no equation depends on is ignorable)."),
}

# thresholds the generator applies (they choose the code): not header macros,
# since redefining one when compiling the C would change nothing
GENERATION_THRESHOLDS = ("BAND_MIN_ORDER", "BAND_FRACTION", "SPARSE_MIN_ENTRIES", "SPARSE_FRACTION")

# Sizes are tuples of size names, summed: ("nq", "nui") is NQ + NUI. nw: unknowns
# of the speed-level solve (speeds, plus the multipliers); nd: the dynamic
# equations (nw - nv rows of B_u). Sizes known only at run time (the ranks
# at the point) are C macros of the workspace in the looped code:
RUN_TIME_SIZES = {
    "rank_c": "the rank of J_c", "rank_v": "the rank of B_v",
    "ny": "nq - rank_c: coordinate directions of the null spaces' chart",
    "nz": "nu - rank_v: speed directions (degrees of freedom) of the null spaces' chart",
    "nlx": "ny + nz: states of the null spaces' chart",
    "nzl": "nz + nl: unknowns of the reduced speed-level system",
    "nrows": "rows of equilibrium's residual",
    "nunknowns": "unknowns of equilibrium's iteration",
}

ARRAYS = {
    # name: (rows, columns) of its storage
    # -- the blocks and rates at the point
    "f_c": (("nc",), ("one",)), "f_v": (("nv",), ("one",)),
    "J_c": (("nc",), ("nq",)), "J_vq": (("nv",), ("nq",)), "B_v": (("nv",), ("nu",)),
    "M_qq": (("nq",), ("nq",)), "kinematic_residual": (("nq",), ("one",)), "qd": (("nq",), ("one",)),
    "M_uu": (("nw",), ("nw",)), "speed_residual": (("nw",), ("one",)), "ud": (("nw",), ("one",)),
    "A_qq": (("nq",), ("nq",)), "A_qu": (("nq",), ("nu",)), "M_uq": (("nw",), ("nq",)),
    "A_uq": (("nw",), ("nq",)), "A_uu": (("nw",), ("nu",)), "B_u": (("nd",), ("nr",)),
    # -- a partition's solution
    "Jc_dependent": (("nc",), ("nc",)), "Bv_dependent": (("nv",), ("nv",)),
    # -- band storage of the banded factorizations (Factor.band; fewer
    #    columns than the matrix's are used: the band's width)
    "band_qq": (("nq",), ("nq",)), "band_uu": (("nw",), ("nw",)),
    "band_c": (("nc",), ("nc",)), "band_v": (("nv",), ("nv",)),
    "K_c": (("nc",), ("nqi",)), "K_v": (("nv",), ("nq", "nui")),
    "Ahat_q": (("nq",), ("nq",)), "Ahat_u": (("nw",), ("nq",)),
    "A_full": (("nq", "nw"), ("nx",)), "B_full": (("nq", "nw"), ("nr",)),
    "A": (("nx",), ("nx",)), "B": (("nx",), ("nr",)),
    # -- the outputs y = h(q, qd, u, ud, r, t) and their linearization C, D
    #    (the blocks y, H_q, H_u, H_rates = dh/d[qd; ud; lambda], H_r, and
    #    the numeric stage's products)
    "y": (("nout",), ("one",)), "H_q": (("nout",), ("nq",)), "H_u": (("nout",), ("nu",)),
    "H_rates": (("nout",), ("nq", "nw")), "H_r": (("nout",), ("nr",)),
    "Hhat_q": (("nout",), ("nq",)), "C_out": (("nout",), ("nx",)), "D_out": (("nout",), ("nr",)),
    # -- the local form in a partition's chart (transposed where the
    #    partition's index sets select columns)
    "N_qT": (("nqi",), ("nq",)), "N_uT": (("nui",), ("nu",)),
    "L_chart_q": (("nqi",), ("nqi",)), "L_chart_u": (("nui",), ("nui",)),
    "Kq_Nq": (("nv",), ("nqi",)), "chart_coupling": (("nui",), ("nqi",)),
    "minus_C1Nq_T": (("nqi",), ("nu",)),
    "H_T": (("nx",), ("nx",)), "G_A": (("nx",), ("nx",)),
    "A_local": (("nx",), ("nx",)), "B_local": (("nx",), ("nr",)),
    # -- SVDs of J_c and B_v (jacobi_svd's form: U S, V, sigma)
    "svd_c": (("nc",), ("nq",)), "svd_c_v": (("nq",), ("nq",)), "sigma_c": (("nq",), ("one",)),
    "svd_v": (("nv",), ("nu",)), "svd_v_v": (("nu",), ("nu",)), "sigma_v": (("nu",), ("one",)),
    # -- SVDs of their transposes: complete left singular vectors
    "svd_rows_c": (("nq",), ("nc",)), "svd_rows_c_v": (("nc",), ("nc",)),
    "sigma_rows_c": (("nc",), ("one",)),
    "svd_rows_v": (("nu",), ("nv",)), "svd_rows_v_v": (("nv",), ("nv",)),
    "sigma_rows_v": (("nv",), ("one",)),
    # -- the speed-level system through the null space of B_v: S = [M_d N_u, M_l]
    "speed_system": (("nd",), ("nw",)), "svd_speed": (("nd",), ("nw",)),
    "svd_speed_v": (("nw",), ("nw",)), "sigma_speed": (("nw",), ("one",)),
    "speed_particular": (("nu",), ("ns", "nr", "one")),
    "speed_reduced": (("nw",), ("ns", "nr", "one")),
    # -- the local form in a partition's chart by looped code, and in the null spaces'
    "T_partition": (("ns",), ("nx",)), "rates_partition": (("nq", "nw"), ("nx",)),
    "Kq_C0": (("nv",), ("nqi",)),
    "C_1": (("nu",), ("nq",)), "T_null": (("ns",), ("ns",)), "rates_null": (("nq", "nw"), ("ns",)),
    # -- the outputs' linearization in the local form's states: C (nlx
    #    columns) and D
    "C_local": (("nout",), ("ns",)), "D_local": (("nout",), ("nr",)),
    # -- the descriptor form
    "projector_c": (("nc",), ("nc",)), "projector_v": (("nv",), ("nv",)),
    # -- equilibrium
    "rates_identity": (("nq", "nw"), ("ns",)),
    "newton_residual": (("nc", "nv", "nu"), ("one",)),
    "newton_jacobian": (("nc", "nv", "nu"), ("ns",)),
    "turning": (("nu",), ("nq",)), "normal": (("nv",), ("one",)),
    "newton_v": (("ns",), ("ns",)), "newton_sigma": (("ns",), ("one",)),
    "newton_step": (("ns",), ("one",)), "trial_q": (("nq",), ("one",)), "trial_u": (("nu",), ("one",)),
    # -- the helpers' scratch (SVDs, QR, pseudo-inverse solves, equilibrium's
    #    Jacobian in its unknowns' columns)
    "scratch": (("ns", "nw", "nw", "nw"), ("ns", "nr", "one")),
}

# The tangents (forward mode, one parameter direction at a time) of the
# arrays of the partition path and the outputs: d_<name>, the same shape
# (codegen/procedure.py's tangent_steps writes the steps that compute them),
# and the seeds: d_q, d_u (the dependent coordinates and speeds re-solved on
# the constraint manifold), d_p (the parameter direction)
TANGENT_ARRAYS = ("f_c", "f_v", "J_c", "J_vq", "B_v", "M_qq", "kinematic_residual", "qd", "M_uu",
                  "speed_residual", "ud", "A_qq", "A_qu", "M_uq", "A_uq", "A_uu", "B_u", "K_c", "K_v",
                  "Ahat_q", "Ahat_u", "A_full", "B_full", "y", "H_q", "H_u", "H_rates", "H_r", "Hhat_q",
                  "C_out", "D_out")
ARRAYS.update({f"d_{name}": ARRAYS[name] for name in TANGENT_ARRAYS})
ARRAYS.update({"d_q": (("nq",), ("one",)), "d_u": (("nu",), ("one",)), "d_p": (("np",), ("one",)),
               "d_q_dependent": (("nc",), ("one",)), "d_u_dependent": (("nv",), ("one",))})

# arrays the caller passes (an entry point's outputs): name -> C parameter
CALLER_ARRAYS = {
    "E_descriptor": ("E", (("ndesc",), ("ndesc",))),
    "A_descriptor": ("A", (("ndesc",), ("ndesc",))),
    "B_descriptor": ("B", (("ndesc",), ("nr",))),
}

# index arrays: of the workspace's partition (and their lengths), and the
# model's default partition (constant arrays of the generated C)
INDEX_SETS = {"dependent_q": ("nc",), "independent_q": ("nqi",),
              "dependent_u": ("nv",), "independent_u": ("nui",),
              "default_dependent_q": ("nc",), "default_dependent_u": ("nv",),
              "unknowns": ("nunknowns",)}


@dataclass(frozen=True)
class View:
    """Rows ``row_start .. row_start + rows`` of a workspace array (or those
    listed in the index array ``row_index``) and either the columns
    ``col_start .. col_start + cols`` or those listed in the index array
    ``index``. ``None`` for rows or cols: all of them (the storage's)."""

    array: str
    row_start: tuple = ()
    rows: tuple | None = None
    col_start: tuple = ()
    cols: tuple | None = None
    index: str | None = None
    transposed: bool = False   # read as the transpose (never written so)
    row_index: str | None = None

    @property
    def shape(self):
        return ARRAYS[self.array] if self.array in ARRAYS else CALLER_ARRAYS[self.array][1]

    @property
    def row_count(self):
        if self.row_index is not None:
            return INDEX_SETS[self.row_index]
        return self.shape[0] if self.rows is None else self.rows

    @property
    def col_count(self):
        if self.index is not None:
            return INDEX_SETS[self.index]
        return self.shape[1] if self.cols is None else self.cols

    @property
    def read_rows(self):
        """The rows of the matrix the view reads (its columns when transposed)."""
        return self.col_count if self.transposed else self.row_count

    @property
    def read_cols(self):
        return self.row_count if self.transposed else self.col_count

    @property
    def stride(self):
        return self.shape[1]

    @property
    def whole(self):
        return not (self.row_start or self.rows or self.col_start or self.cols or self.index
                    or self.row_index)


# -- steps of the partition path (all three renderings) ----------------------------------------


@dataclass(frozen=True)
class Factor:
    """LU factors of the square matrix ``matrix``, kept as ``name`` for later
    solves. Singular (``status``) when a pivot is not larger than the relative
    tolerance times the largest entry of ``matrix``, or of ``scale`` (the
    array the matrix's columns come from) when that is larger."""

    kind = "factor"
    name: str
    matrix: View
    status: str
    scale: str | None = None
    workspace: str | None = None   # array holding the factors (None: in place)
    what: str = ""
    # a partition block whose condition is estimated (the index into the
    # workspace's condition[]), or None; its static pivots in straight-line
    # code must pass CONDITION_RTOL instead of SINGULAR_RTOL
    condition: int | None = None
    # the looped rendering as a banded LU (a codegen.ordering.Band: the
    # matrix's reordering and bandwidths, decided at generation time from its
    # structural non-zeros; see with_bands), or None: dense. Factors into the
    # array band_<name>. A matrix selected by a partition's index array is
    # reordered for the model's default partition: with another partition the
    # call factors it dense.
    band: object = None


@dataclass(frozen=True)
class Solve:
    """``out = factor^-1 [rhs_1, rhs_2, ...]`` (the right-hand sides side by
    side, negated when ``negate``); no ``rhs``: in place, ``out`` is the
    right-hand side."""

    kind = "solve"
    factor: str
    out: View
    rhs: tuple = ()
    negate: bool = False
    what: str = ""


@dataclass(frozen=True)
class SubtractProduct:
    """``out = minuend - a b`` (no minuend: ``out -= a b``)."""

    kind = "subtract_product"
    out: View
    a: View
    b: View
    minuend: View | None = None
    what: str = ""
    # the looped rendering over the structural non-zeros of ``a`` (a
    # SparseRows, decided at generation time; see with_sparse_products), or
    # None: every entry. ``a`` selected by the partition's index array: only
    # with the model's default partition (another steps through every entry).
    sparse: object = None


@dataclass(frozen=True)
class AddProduct:
    """``out += a b``."""

    kind = "add_product"
    out: View
    a: View
    b: View
    what: str = ""
    # the looped rendering over the structural non-zeros of ``a`` (a
    # SparseRows, decided at generation time; see with_sparse_products), or
    # None: every entry. ``a`` selected by the partition's index array: only
    # with the model's default partition (another steps through every entry).
    sparse: object = None


@dataclass(frozen=True)
class Multiply:
    """``out = a b``."""

    kind = "multiply"
    out: View
    a: View
    b: View
    what: str = ""
    # the looped rendering over the structural non-zeros of ``a`` (a
    # SparseRows, decided at generation time; see with_sparse_products), or
    # None: every entry. ``a`` selected by the partition's index array: only
    # with the model's default partition (another steps through every entry).
    sparse: object = None


@dataclass(frozen=True)
class Orthonormalize:
    """The orthonormal basis of a partition's chart: with C = [I; -K] (the
    identity in the rows of ``independent``, -K in those of ``dependent``;
    C = C_0 for K = K_c, C_2 for K = K_u), the thin QR factorization
    C = N L^T with L lower triangular and a positive diagonal (unique: the
    Gram-Schmidt orthonormalization of C's columns, in the order of the
    independent coordinates or speeds). ``basis`` receives N^T; the factor
    L is kept as ``name`` for :class:`TriangularMultiply`. The straight-line
    rendering takes L from the Cholesky factorization of C^T C = I + K^T K
    (its pivots are at least 1: no pivoting) and PIVOT_REJECTED where that
    matrix's trace exceeds GRAM_LIMIT (the basis would lose orthogonality)
    or a pivot fell below GRAM_PIVOT (rounding); the looped one uses
    Householder reflections, orthonormal to rounding however skewed the
    partition."""

    kind = "orthonormalize"
    name: str
    basis: View
    K: View
    dependent: str
    independent: str
    what: str = ""


@dataclass(frozen=True)
class TriangularMultiply:
    """``out = L^T out`` with the factor L of :class:`Orthonormalize` ``factor``."""

    kind = "triangular_multiply"
    factor: str
    out: View
    what: str = ""


@dataclass(frozen=True)
class Zero:
    kind = "zero"
    out: View
    what: str = ""


@dataclass(frozen=True)
class Identity:
    """``out = I`` (a square view)."""

    kind = "identity"
    out: View
    what: str = ""


@dataclass(frozen=True)
class Copy:
    """``out = source`` (``-source`` when ``negate``; ``out += source`` when
    ``accumulate``)."""

    kind = "copy"
    out: View
    source: View
    negate: bool = False
    accumulate: bool = False
    what: str = ""


@dataclass(frozen=True)
class CheckFinite:
    """NONFINITE_RESULT unless the views are finite."""

    kind = "check_finite"
    views: tuple
    what: str = ""


@dataclass(frozen=True)
class SelectRows:
    """The outputs of the partition's solution: A, B (rows of the independent
    states of A_full, B_full) and A_full, B_full (the rows of all coordinates
    and speeds), into the caller's arrays those it asked for."""

    kind = "select_rows"
    what: str = "row selection: A, B for the independent states; A', B' for all"


@dataclass(frozen=True)
class RankCertificate:
    """Full row rank of ``matrix`` (rows <= cols) at the run-time tolerance.
    The straight-line rendering certifies it without an SVD: with matrix
    matrix^T = L L^T (Cholesky), sigma_min >= 1 / ||L^-1||_F and sigma_max <=
    ||matrix||_F, and the check asks sigma_min / sigma_max > CERTIFICATE_MARGIN
    rank_tol of these bounds, with the bounds' ratio below CERTIFICATE_LIMIT
    (so the Gram matrix's rounding cannot matter); where it fails,
    PIVOT_REJECTED, and the general path decides the rank from the SVD. The
    looped rendering runs after that SVD and checks its rank, the
    workspace's ``rank`` (RANK_DEFICIENT otherwise)."""

    kind = "rank_certificate"
    matrix: View
    rank: str
    what: str = ""


@dataclass(frozen=True)
class LocalOutputs:
    """The outputs of the local form in a partition's chart: A = A_local,
    B = B_local, the embedding T = [[N_q, 0], [C_1 N_q, N_u]] (NX columns),
    into the caller's arrays, then checked."""

    kind = "local_outputs"
    what: str = "A, B and T of the local form into the caller's arrays"


# -- steps of the rank-revealing half (looped rendering) ---------------------------------------


@dataclass(frozen=True)
class SVD:
    """The singular value decomposition of ``matrix`` (rows x cols) in
    jacobi_svd's form: ``svd_<name>`` = U S (rows x cols), ``svd_<name>_v``
    = V (cols x cols), ``sigma_<name>`` (cols, decreasing); the rank (singular
    values above ``tolerance`` times the largest, at most the rows) into the
    workspace's ``rank``. ``method``: ``"qr"``, a wide matrix through a
    Householder QR of its transpose first (wide_svd: fewer rotations), or
    ``"jacobi"``, one-sided Jacobi on the matrix itself (accurate relative to
    each column's scale: badly scaled matrices, e.g. the speed-level system
    of a stiff model); the iterations are the helpers'. ``status``: the
    status where the rank is below the rows (None: a rank is an answer)."""

    kind = "svd"
    name: str
    matrix: View
    rank: str
    tolerance: str = "rank_tol"      # a threshold name, or the run-time rank_tol
    status: str | None = None
    method: str = "qr"
    what: str = ""


@dataclass(frozen=True)
class SingularValues:
    """The singular values of ``matrix`` into ``sigma_<name>`` (the same
    numbers as :class:`SVD`), without the vectors; the rank into ``rank``."""

    kind = "singular_values"
    name: str
    matrix: View
    rank: str
    what: str = ""


@dataclass(frozen=True)
class PseudoSolve:
    """``out = A^+ rhs`` (``(A^+)^T rhs`` when ``transposed``) for the matrix A
    of the SVD ``svd``, its first ``rank`` (a size) singular values kept: the
    minimum-norm least-squares solution; negated when ``negate``."""

    kind = "pseudo_solve"
    svd: str
    out: View
    rhs: View
    rank: tuple
    transposed: bool = False
    negate: bool = False
    what: str = ""


@dataclass(frozen=True)
class LeftNullProjector:
    """``out = I - U U^T`` (rows x rows) for the SVD ``svd`` of rank ``rank``:
    the projector onto the left null space of its matrix."""

    kind = "left_null_projector"
    svd: str
    out: View
    rank: str
    what: str = ""


@dataclass(frozen=True)
class ProjectOut:
    """``out = (I - P) out`` for the rows of ``out`` (P: ``projector``, square)."""

    kind = "project_out"
    out: View
    projector: View
    what: str = ""


@dataclass(frozen=True)
class RotateRows:
    """The rows of ``out``: the first ``count`` moved after the others (the
    speed-level rows [f_a; f_d] become [f_d; f_a])."""

    kind = "rotate_rows"
    out: View
    count: tuple
    what: str = ""


@dataclass(frozen=True)
class Evaluate:
    """The symbolic blocks of the stage ``stage`` evaluated again at the point
    (e.g. the Jacobian blocks with shifted multipliers)."""

    kind = "evaluate"
    stage: str
    what: str = ""


@dataclass(frozen=True)
class ConditionEstimate:
    """The condition estimate of the square block ``block`` of a constraint
    Jacobian (its largest entry over the smallest pivot of LU with partial
    pivoting, into ``workspace``/``pivot``; +Inf where singular) into the
    workspace's ``condition[slot]``."""

    kind = "condition_estimate"
    block: View
    scale: str
    workspace: str
    pivot: str
    slot: int
    what: str = ""


@dataclass(frozen=True)
class ChoosePartition:
    """The dependent set of a chart into ``out`` (an index set of the
    workspace, its complement too): the model's ``default`` where the
    workspace's keep_default is set, ``condition[slot]`` is at most
    1 / CONDITION_RTOL and the rank ``rank`` is full, else the first ``rank``
    pivot columns of a column-pivoted QR of ``matrix`` (the best-conditioned
    dependent set), ascending (-1 after them where the rank is not full)."""

    kind = "choose_partition"
    matrix: View
    default: str
    out: str
    rank: str
    slot: int
    what: str = ""


@dataclass(frozen=True)
class Branch:
    """``then`` where the workspace's chart is ``chart``, else ``otherwise``:
    the rank-revealing paths differ in a partition's chart and in the null
    spaces'."""

    kind = "branch"
    chart: str
    then: tuple
    otherwise: tuple = ()
    what: str = ""


@dataclass(frozen=True)
class GaussNewton:
    """equilibrium's iteration, its stopping rules as data: at each iterate
    the stage ``point`` (evaluations, ranks, rates), the residual stage
    ``residual`` (into newton_residual, max|R|, |R|^2); converged at max|R|
    <= tol; else the stage ``jacobian`` (newton_jacobian), the columns of the
    unknowns, their SVD (NEWTON_RTOL), the minimum-norm step, scaled so no
    unknown moves by more than max_step; halved at most HALVINGS times until
    |R|^2 decreases; where none does, converged if max|R| is at most
    ROUNDING_FACTOR DBL_EPSILON times the largest row of |dR/dx| |x| (the
    rounding level), else NO_PROGRESS; NO_CONVERGENCE after max_iter."""

    kind = "gauss_newton"
    point: str
    residual: str
    jacobian: str
    what: str = "Gauss-Newton on the equilibrium residual"
    # the workspace arrays its rendering uses
    arrays = ("newton_residual", "newton_jacobian", "newton_v", "newton_sigma", "newton_step",
              "trial_q", "trial_u", "scratch")


@dataclass(frozen=True)
class Stage:
    """One stage of a call: the symbolic blocks it evaluates (named in
    Derivation.stages), then its numeric steps."""

    name: str
    evaluates: str | None
    steps: tuple
    what: str = ""
    results: tuple = ()   # views of the workspace later stages read
    # arrays this stage reads from the workspace, where the stage before it
    # left them (not carried values): A, B of the solution
    reads_stored: tuple = ()
    # renderings: "both" (straight-line for the default partition, looped for
    # any), "extended" (looped for any; straight-line on the extended fast
    # path of the outputs and the sensitivities, after the partition path's
    # stages: codegen.emit), "looped" (the rank-revealing half)
    renderings: str = "both"


def step_arrays(step):
    """The workspace arrays (:data:`ARRAYS`, not the caller's) a step reads or
    writes, its helpers' scratch included: what sizes the workspace of the
    entry points that run it."""
    names = set()
    for field in vars(step).values():
        if isinstance(field, View):
            names.add(field.array)
        elif isinstance(field, tuple):
            for item in field:
                if isinstance(item, View):
                    names.add(item.array)
                elif hasattr(item, "kind"):
                    names |= step_arrays(item)
    kind = step.kind
    if kind == "factor":
        names |= {step.workspace, step.scale}
        if step.band is not None:
            names.add(f"band_{step.name}")
    elif kind == "orthonormalize":
        names |= {f"L_{step.name}", "scratch"}
    elif kind == "triangular_multiply":
        names.add(f"L_{step.factor}")
    elif kind in ("svd", "singular_values", "pseudo_solve", "left_null_projector"):
        name = step.name if kind in ("svd", "singular_values") else step.svd
        names |= {f"sigma_{name}", "scratch"}
        if kind != "singular_values":
            names |= {f"svd_{name}", f"svd_{name}_v"}
    elif kind in ("project_out", "choose_partition"):
        names.add("scratch")
    elif kind == "condition_estimate":
        names |= {step.scale, step.workspace}
    elif kind == "select_rows":
        names |= {"A_full", "B_full", "A", "B"}
    elif kind == "local_outputs":
        names |= {"A_local", "B_local", "N_qT", "N_uT", "minus_C1Nq_T"}
    elif kind == "gauss_newton":
        names |= set(step.arrays)
    return {name for name in names if name in ARRAYS}


def with_bands(stages, bands):
    """``stages`` with the factorizations named in ``bands`` (name -> Band)
    banded (the Solve steps follow their Factor by name)."""
    import dataclasses

    def banded(step):
        if isinstance(step, Factor) and step.name in bands:
            return dataclasses.replace(step, band=bands[step.name])
        if step.kind == "branch":
            return dataclasses.replace(step, then=tuple(map(banded, step.then)),
                                       otherwise=tuple(map(banded, step.otherwise)))
        return step
    return tuple(dataclasses.replace(stage, steps=tuple(map(banded, stage.steps))) for stage in stages)


@dataclass(frozen=True)
class SparseRows:
    """The structural non-zeros of a product's left operand ``a`` (a whole
    block, or its columns of the model's default partition), row by row:
    those of row i are ``start[i] .. start[i + 1]``, each at ``entry`` in the
    block's storage and in column ``inner`` of the operand (ascending: the
    sums are the dense loop's, which skips zeros). ``name``: of its tables."""

    name: str
    start: tuple
    entry: tuple
    inner: tuple


PRODUCT_KINDS = ("subtract_product", "add_product", "multiply")


def sparse_key(view):
    """The name of the tables of a product operand's non-zeros."""
    return view.array + (f"_{view.index}" if view.index else "")


def with_sparse_products(stages, patterns):
    """``stages`` with the products whose left operand has a pattern in
    ``patterns`` (sparse_key -> SparseRows) sparse."""
    import dataclasses

    def sparse(step):
        if step.kind in PRODUCT_KINDS and sparse_key(step.a) in patterns:
            return dataclasses.replace(step, sparse=patterns[sparse_key(step.a)])
        if step.kind == "branch":
            return dataclasses.replace(step, then=tuple(map(sparse, step.then)),
                                       otherwise=tuple(map(sparse, step.otherwise)))
        return step
    return tuple(dataclasses.replace(stage, steps=tuple(map(sparse, stage.steps))) for stage in stages)


def step_writes(step):
    """The workspace arrays a step writes (its ``out`` or ``basis`` views,
    those of the steps in its branches, an SVD's factors)."""
    names = set()
    for field in ("out", "basis"):
        view = getattr(step, field, None)
        if isinstance(view, View):
            names.add(view.array)
    if step.kind == "branch":
        for inner in step.then + step.otherwise:
            names |= step_writes(inner)
    if step.kind in ("svd", "singular_values"):
        names |= {f"svd_{step.name}", f"svd_{step.name}_v", f"sigma_{step.name}"}
    return {name for name in names if name in ARRAYS}


# -- tangents: the forward mode of the partition path -------------------------------------------


def tangent(view):
    """The view of the same entries of the array's tangent (d_<array>)."""
    import dataclasses

    return dataclasses.replace(view, array=f"d_{view.array}")


def _columns(view, start, count):
    """Columns ``start .. start + count`` of ``view`` (contiguous columns)."""
    import dataclasses

    return dataclasses.replace(view, col_start=view.col_start + tuple(start), cols=tuple(count))


def tangent_steps(steps, factors):
    """The forward-mode (tangent) steps of ``steps``: after the steps ran,
    with every array X they read or write at its final value and its
    tangent d_X given for the inputs, these compute the tangents of what
    they wrote, in the order they wrote it (so in-place updates need only
    the final values). ``factors``: name -> Factor (a factorization has no
    tangent step: its solves are differentiated, with the factors kept):

        out = s F^-1 rhs       ->  d_out = F^-1 (s d_rhs - dF out)
        out = minuend - a b    ->  d_out = d_minuend - da b - a db
        out += a b             ->  d_out += da b + a db
        out = a b              ->  d_out = da b + a db

    and copies, zeros and checks alike. The selection of A, B's rows is the
    caller's."""
    out = []
    for step in steps:
        kind = step.kind
        what = f"d({step.what})" if step.what else ""
        if kind == "factor" or kind == "select_rows":
            continue
        if kind == "solve":
            factor = factors[step.factor]
            if step.rhs:
                offset = ()
                for part in step.rhs:
                    out.append(Copy(_columns(tangent(step.out), offset, part.col_count), tangent(part),
                                    negate=step.negate, what=what))
                    what = ""
                    offset += tuple(part.col_count)
            elif step.negate:
                out.append(Copy(tangent(step.out), tangent(step.out), negate=True, what=what))
                what = ""
            out.append(SubtractProduct(tangent(step.out), tangent(factor.matrix), step.out, what=what))
            out.append(Solve(step.factor, tangent(step.out)))
        elif kind == "subtract_product":
            if step.minuend is not None:
                out.append(Copy(tangent(step.out), tangent(step.minuend), what=what))
                what = ""
            out.append(SubtractProduct(tangent(step.out), tangent(step.a), step.b, what=what,
                                       sparse=step.sparse))
            out.append(SubtractProduct(tangent(step.out), step.a, tangent(step.b), sparse=step.sparse))
        elif kind == "add_product":
            out.append(AddProduct(tangent(step.out), tangent(step.a), step.b, what=what, sparse=step.sparse))
            out.append(AddProduct(tangent(step.out), step.a, tangent(step.b), sparse=step.sparse))
        elif kind == "multiply":
            out.append(Multiply(tangent(step.out), tangent(step.a), step.b, what=what, sparse=step.sparse))
            out.append(AddProduct(tangent(step.out), step.a, tangent(step.b), sparse=step.sparse))
        elif kind == "copy":
            out.append(Copy(tangent(step.out), tangent(step.source), negate=step.negate,
                            accumulate=step.accumulate, what=what))
        elif kind in ("zero", "identity"):
            out.append(Zero(tangent(step.out), what=what))
        elif kind == "check_finite":
            out.append(CheckFinite(tuple(tangent(view) for view in step.views), what=what))
        else:
            raise ValueError(f"no tangent rule for the step kind {kind!r}")
    return tuple(out)


# The seeds of a parameter direction: with the independent coordinates and
# speeds held, the dependent ones move with p on the constraint manifold:
#     J_c dq + df_c/dp = 0,   J_vq dq + B_v du + df_v/dp = 0
# (d_f_c, d_f_v: the residuals' tangents with d_q = d_u = 0), solved with the
# partition's factors
TANGENT_SEEDS = (
    Solve("c", View("d_q_dependent"), (View("d_f_c"),), negate=True,
          what="dq_d = -(J_c P_qd)^-1 df_c/dp"),
    Zero(View("d_q")),
    Copy(View("d_q", row_index="dependent_q"), View("d_q_dependent")),
    Copy(View("d_u_dependent"), View("d_f_v")),
    AddProduct(View("d_u_dependent"), View("J_vq"), View("d_q")),
    Solve("v", View("d_u_dependent"), negate=True, what="du_d = -(B_v P_ud)^-1 (df_v/dp + J_vq dq)"),
    Zero(View("d_u")),
    Copy(View("d_u", row_index="dependent_u"), View("d_u_dependent")),
)


# -- the partition path -------------------------------------------------------------------------


def _kinematic_rates(kinematic_identity):
    if kinematic_identity:
        return (Copy(View("qd"), View("kinematic_residual"), negate=True,
                     what="qd* = -f_k (M_qq is the identity)"),
                CheckFinite((View("qd"),)))
    return (Factor("qq", View("M_qq"), "SINGULAR_M_QQ", what="M_qq"),
            Solve("qq", View("qd"), (View("kinematic_residual"),), negate=True,
                  what="qd* = -M_qq^-1 f_k"),
            CheckFinite((View("qd"),)))


DYNAMIC_RATES = (
    Factor("uu", View("M_uu"), "SINGULAR_M_UU", what="M_uu = [M_uuc; M_uud]"),
    Solve("uu", View("ud"), (View("speed_residual"),), negate=True,
          what="[ud*; lambda*] = -M_uu^-1 [f_a; f_d]"),
    CheckFinite((View("ud"),)),
)

K_q = View("K_v", cols=("nq",))
K_u = View("K_v", col_start=("nq",), cols=("nui",))
A_q = View("A_full", rows=("nq",))                       # rows of the coordinates
A_u = View("A_full", row_start=("nq",), rows=("nw",))    # rows of the speeds (and multipliers)


PARTITION = (
    Factor("c", View("J_c", index="dependent_q"), "SINGULAR_CONFIGURATION_PARTITION", scale="J_c",
           workspace="Jc_dependent", what="J_c P_qd", condition=0),
    Solve("c", View("K_c"), (View("J_c", index="independent_q"),), what="K_c = (J_c P_qd)^-1 J_c P_qi"),
    Factor("v", View("B_v", index="dependent_u"), "SINGULAR_VELOCITY_PARTITION", scale="B_v",
           workspace="Bv_dependent", what="B_v P_ud", condition=1),
    Solve("v", View("K_v"), (View("J_vq"), View("B_v", index="independent_u")),
          what="K_v = [K_q, K_u] = (B_v P_ud)^-1 [J_vq, B_v P_ui]"),
)


def _times_C(out, T, X):
    """A~ of the rows of out (A_q or A_u): [T C_0, X C_2]."""
    rows, start = out.row_count, out.row_start
    return (
        SubtractProduct(View(out.array, start, rows, (), ("nqi",)), View(T, index="dependent_q"),
                        View("K_c"), minuend=View(T, index="independent_q"),
                        what=f"{T} C_0 = {T} P_qi - {T} P_qd K_c"),
        SubtractProduct(View(out.array, start, rows, ("nqi",), ("nui",)),
                        View(X, index="dependent_u"), K_u, minuend=View(X, index="independent_u"),
                        what=f"{X} C_2 = {X} P_ui - {X} P_ud K_u"),
    )


def forward_substitution(coordinates, speeds, speed_solve, kinematic_identity):
    """The block forward substitution A' = M^-1 A~ on the rows of one array,
    in place: ``coordinates`` (its NQ rows of the coordinates' rates),
    ``speeds`` (the NW rows of the speed-level unknowns); ``speed_solve``
    (view) -> the steps solving the speed-level system in place."""
    steps = () if kinematic_identity else (
        Solve("qq", coordinates, what="A'_q = M_qq^-1 A~_q"),)
    return steps + (
        SubtractProduct(speeds, View("M_uq"), coordinates, what="A~_u - M_uq A'_q"),
        *speed_solve(speeds),
    )


def lu_speed_solve(view):
    """The speed-level system solved with the LU factors of M_uu."""
    return (Solve("uu", view, what="M_uu^-1 (the speed-level system)"),)


def _solution(kinematic_identity):
    steps = [
        SubtractProduct(View("Ahat_q"), View("A_qu", index="dependent_u"), K_q, minuend=View("A_qq"),
                        what="Ahat_q = A_qq + A_qu C_1 = A_qq - A_qu P_ud K_q"),
        SubtractProduct(View("Ahat_u"), View("A_uu", index="dependent_u"), K_q, minuend=View("A_uq"),
                        what="Ahat_u = A_uq + A_uu C_1 = A_uq - A_uu P_ud K_q"),
        *_times_C(A_q, "Ahat_q", "A_qu"),
        *_times_C(A_u, "Ahat_u", "A_uu"),
        *forward_substitution(A_q, A_u, lu_speed_solve, kinematic_identity),
        Zero(View("B_full", rows=("nq", "nv")), what="B' = M^-1 [0; 0; B_u]: no coordinate rows"),
        Copy(View("B_full", row_start=("nq", "nv"), rows=("nd",)), View("B_u")),
        Solve("uu", View("B_full", row_start=("nq",), rows=("nw",))),
        CheckFinite((View("A_full", rows=("nq", "nu")), View("B_full", rows=("nq", "nu")))),
        SelectRows(),
    ]
    return tuple(steps)


# The linearization of the outputs y = h(q, qd, u, ud, r, t) on the constraint
# manifold, in the independent states x = [q_i, u_i] of the workspace's
# partition, after the solution (its K_c, K_v and all rows of A', B', the
# multipliers' included, in the workspace): dq = C_0 dq_i, du = C_1 dq + C_2
# du_i, d[qd; ud; lambda] = A' x + B' dr, so
#     C = [Hhat_q C_0, H_u C_2] + H_rates A',  Hhat_q = H_q + H_u C_1 = H_q - H_u P_ud K_q
#     D = H_r + H_rates B'
# (DESIGN.md, section 3e): the products of the solution with H for A.
OUTPUTS = (
    SubtractProduct(View("Hhat_q"), View("H_u", index="dependent_u"), K_q, minuend=View("H_q"),
                    what="Hhat_q = H_q + H_u C_1 = H_q - H_u P_ud K_q"),
    *_times_C(View("C_out"), "Hhat_q", "H_u"),
    AddProduct(View("C_out"), View("H_rates"), View("A_full"),
               what="C = [Hhat_q C_0, H_u C_2] + H_rates A'"),
    Copy(View("D_out"), View("H_r"), what="D = H_r + H_rates B'"),
    AddProduct(View("D_out"), View("H_rates"), View("B_full")),
    CheckFinite((View("y"), View("C_out"), View("D_out")), what="y, C and D"),
)


def completion_steps(stages):
    """complete_point: the Newton step on f_c(q) = 0 for the dependent
    coordinates, and the one exact step of f_v(u) = 0 (linear in u) for the
    dependent speeds, with the factorizations of the partition stage."""
    factor = {step.name: step for stage in stages for step in stage.steps if isinstance(step, Factor)}
    return dict(
        coordinates=(factor["c"], Solve("c", View("f_c"), what="the Newton step (J_c P_qd)^-1 f_c")),
        speeds=(factor["v"], Solve("v", View("f_v"), what="the step (B_v P_ud)^-1 f_v")))


def _local_chart():
    """The local form at a regular point in the chart of a partition: the partition's own linearization A, B (the solution's, in
    the workspace's ``A`` and ``B``), written in orthonormal bases of the
    admissible perturbations, so a similarity transform of A (same
    eigenvalues, at steady motions too).

    C_0 = P_qi - P_qd K_c spans null(J_c); C_0 = N_q L_q^T (Orthonormalize)
    gives the basis N_q (the Gram-Schmidt orthonormalization of C_0's
    columns); likewise C_2 = N_u L_u^T for null(B_v). The minimum-norm C_1 =
    -B_v^+ J_vq is the partition's -P_ud K_q with its part in null(B_v)
    removed, so C_1 N_q = -P_ud K_q N_q + N_u V with the coupling V = N_u^T
    P_ud K_q N_q. The local states x = [y; z] (dq = N_q y, du = C_1 dq +
    N_u z) and the partition's x_p = [dq_i; du_i] are related by x = G x_p
    and x_p = H x, G = [[L_q^T, 0], [-V L_q^T, L_u^T]], H (the independent
    rows of the embedding T) its inverse: A_local = G A H, B_local = G B =
    [0; L_u^T B_u] (the partition's B has no coordinate rows). Everything is
    kept transposed where the partition's index sets select columns."""
    return (
        RankCertificate(View("J_c"), "rank_c", what="J_c has full rank"),
        RankCertificate(View("B_v"), "rank_v", what="B_v has full rank"),
        Orthonormalize("chart_q", View("N_qT"), View("K_c"), "dependent_q", "independent_q",
                       what="C_0 = N_q L_q^T"),
        Orthonormalize("chart_u", View("N_uT"), K_u, "dependent_u", "independent_u",
                       what="C_2 = N_u L_u^T"),
        Multiply(View("Kq_Nq"), K_q, View("N_qT", transposed=True), what="K_q N_q"),
        Multiply(View("chart_coupling"), View("N_uT", index="dependent_u"), View("Kq_Nq"),
                 what="V = N_u^T P_ud K_q N_q"),
        Zero(View("minus_C1Nq_T")),
        Copy(View("minus_C1Nq_T", index="dependent_u"), View("Kq_Nq", transposed=True),
             what="(P_ud K_q N_q)^T"),
        SubtractProduct(View("minus_C1Nq_T"), View("chart_coupling", transposed=True), View("N_uT"),
                        what="-(C_1 N_q)^T = (P_ud K_q N_q - N_u V)^T"),
        Copy(View("H_T", rows=("nqi",), cols=("nqi",)), View("N_qT", index="independent_q"),
             what="H^T: the independent rows of T, transposed"),
        Zero(View("H_T", row_start=("nqi",), rows=("nui",), cols=("nqi",))),
        Copy(View("H_T", rows=("nqi",), col_start=("nqi",), cols=("nui",)),
             View("minus_C1Nq_T", index="independent_u"), negate=True),
        Copy(View("H_T", row_start=("nqi",), rows=("nui",), col_start=("nqi",), cols=("nui",)),
             View("N_uT", index="independent_u")),
        Copy(View("G_A"), View("A"), what="G A: the partition's A in the local states' rows"),
        TriangularMultiply("chart_q", View("G_A", rows=("nqi",)), what="L_q^T A_qi"),
        TriangularMultiply("chart_u", View("G_A", row_start=("nqi",), rows=("nui",)),
                           what="L_u^T A_ui"),
        SubtractProduct(View("G_A", row_start=("nqi",), rows=("nui",)), View("chart_coupling"),
                        View("G_A", rows=("nqi",)), what="L_u^T A_ui - V L_q^T A_qi"),
        Multiply(View("A_local"), View("G_A"), View("H_T", transposed=True), what="A = G A H"),
        Zero(View("B_local", rows=("nqi",))),
        Copy(View("B_local", row_start=("nqi",), rows=("nui",)),
             View("B", row_start=("nqi",), rows=("nui",))),
        TriangularMultiply("chart_u", View("B_local", row_start=("nqi",), rows=("nui",)),
                           what="B = [0; L_u^T B_ui]"),
        LocalOutputs(),
    )


# -- the rank-revealing half (looped code) ------------------------------------------------------


CONSTRAINT_SVDS = (
    SVD("c", View("J_c"), "rank_c", what="J_c = U S V^T: rank, null space N_q"),
    SVD("v", View("B_v"), "rank_v", what="B_v = U S V^T: rank, null space N_u"),
)

# the left singular vectors of J_c and B_v, complete (one-sided Jacobi on the
# transposes: V is orthogonal even where singular values vanish): which
# combinations of the constraints' rows are (nearly) dependent
CONSTRAINT_ROW_SPACES = (
    SVD("rows_c", View("J_c", transposed=True), "rank_rows_c", method="jacobi",
        what="J_c^T = V S U^T: U, the left singular vectors of J_c"),
    SVD("rows_v", View("B_v", transposed=True), "rank_rows_v", method="jacobi",
        what="B_v^T = V S U^T: U, the left singular vectors of B_v"),
)

CONSTRAINT_SINGULAR_VALUES = (
    SingularValues("c", View("J_c"), "rank_c", what="the singular values of J_c"),
    SingularValues("v", View("B_v"), "rank_v", what="the singular values of B_v"),
)

# N_u: the trailing right singular vectors of B_v
N_u = View("svd_v_v", col_start=("rank_v",), cols=("nz",))
N_q = View("svd_c_v", col_start=("rank_c",), cols=("ny",))


def null_space_speed_solve(view):
    """The speed-level system M_uu [ud; lambda] = [r_a; r_d] through the null
    space of B_v, in place on ``view`` (NW rows, [r_a; r_d]): its first NV
    rows (the acceleration constraints) are B_v ud = r_a, so ud = B_v^+ r_a +
    N_u zeta, and the dynamic rows M_d ud + M_l lambda = r_d (M_l = B_v^T in
    the multiplier form) leave S [zeta; lambda] = r_d - M_d B_v^+ r_a with S =
    [M_d N_u, M_l] (speed_system, ND rows of rank ND), solved in the
    minimum-norm sense: zeta is unique and the multipliers are the
    minimum-norm ones where B_v lost rank. No product squares the
    conditioning of B_v."""
    width = view.col_count
    rows = view.row_start
    r_a = View(view.array, rows, ("nv",), view.col_start, view.cols)
    r_d = View(view.array, rows + ("nv",), ("nd",), view.col_start, view.cols)
    speeds = View(view.array, rows, ("nu",), view.col_start, view.cols)
    multipliers = View(view.array, rows + ("nu",), ("nl",), view.col_start, view.cols)
    particular = View("speed_particular", cols=width)
    reduced = View("speed_reduced", rows=("nzl",), cols=width)
    return (
        PseudoSolve("v", particular, r_a, ("rank_v",), what="B_v^+ r_a"),
        SubtractProduct(r_d, View("M_uu", row_start=("nv",), rows=("nd",), cols=("nu",)), particular,
                        what="r_d - M_d B_v^+ r_a"),
        PseudoSolve("speed", reduced, r_d, ("nd",), what="[zeta; lambda] = S^+ (r_d - M_d B_v^+ r_a)"),
        AddProduct(particular, N_u, View("speed_reduced", rows=("nz",), cols=width),
                   what="ud = B_v^+ r_a + N_u zeta"),
        Copy(speeds, particular),
        Copy(multipliers, View("speed_reduced", row_start=("nz",), rows=("nl",), cols=width)),
    )


NULL_SPACE_RATES = (
    Multiply(View("speed_system", cols=("nz",)),
             View("M_uu", row_start=("nv",), rows=("nd",), cols=("nu",)), N_u,
             what="S = [M_d N_u, M_l]"),
    Copy(View("speed_system", col_start=("nz",), cols=("nl",)),
         View("M_uu", row_start=("nv",), rows=("nd",), col_start=("nu",), cols=("nl",))),
    SVD("speed", View("speed_system", cols=("nzl",)), "rank_speed", tolerance="SINGULAR_RTOL",
        status="SINGULAR_M_UU", method="jacobi",
        what="S: full row rank, or the dynamics do not determine ud"),
    Copy(View("ud"), View("speed_residual"), negate=True),
    *null_space_speed_solve(View("ud")),
    CheckFinite((View("ud"),), what="ud* and the minimum-norm multipliers"),
)


def _embedded_rates(embedding, rates, width, kinematic_identity):
    """A' = M^-1 A~ T (into ``rates``, ``width`` columns) for the embedding
    T of the states (``embedding``: NS rows [T_q; T_u]), the speed-level
    system through the null space of B_v; B' = M^-1 [0; 0; B_u] into
    B_full."""
    T_q = View(embedding, rows=("nq",), cols=width)
    T_u = View(embedding, row_start=("nq",), rows=("nu",), cols=width)
    coordinates = View(rates, rows=("nq",), cols=width)
    speeds = View(rates, row_start=("nq",), rows=("nw",), cols=width)
    return (
        Multiply(coordinates, View("A_qq"), T_q, what="A~_q = A_qq T_q + A_qu T_u"),
        AddProduct(coordinates, View("A_qu"), T_u),
        Multiply(speeds, View("A_uq"), T_q, what="A~_u = A_uq T_q + A_uu T_u"),
        AddProduct(speeds, View("A_uu"), T_u),
        *forward_substitution(coordinates, speeds, null_space_speed_solve, kinematic_identity),
        Zero(View("B_full", rows=("nq", "nv")), what="B' = M^-1 [0; 0; B_u]"),
        Copy(View("B_full", row_start=("nq", "nv"), rows=("nd",)), View("B_u")),
        *null_space_speed_solve(View("B_full", row_start=("nq",), rows=("nw",))),
        CheckFinite((View(rates, rows=("nq", "nu"), cols=width), View("B_full", rows=("nq", "nu")))),
    )


def _partition_embedding_rates(kinematic_identity):
    """The partition's A and B at a regular point from its embedding T_p =
    [[C_0, 0], [C_1 C_0, C_2]] (C_1 = -P_ud K_q) with the null-space speed
    solve (no squared conditioning near a singular configuration): the rows
    of its independent states of A' = M^-1 A~ T_p into A and B."""
    return (
        Zero(View("T_partition")),
        Identity(View("T_partition", cols=("nqi",), row_index="independent_q"),
                 what="C_0 = P_qi - P_qd K_c"),
        Copy(View("T_partition", cols=("nqi",), row_index="dependent_q"), View("K_c"), negate=True),
        Multiply(View("Kq_C0"), K_q, View("T_partition", rows=("nq",), cols=("nqi",)),
                 what="K_q C_0: C_1 C_0 = -P_ud K_q C_0"),
        Copy(View("T_partition", row_start=("nq",), cols=("nqi",), row_index="dependent_u"),
             View("Kq_C0"), negate=True),
        Identity(View("T_partition", row_start=("nq",), col_start=("nqi",), cols=("nui",),
                      row_index="independent_u"), what="C_2 = P_ui - P_ud K_u"),
        Copy(View("T_partition", row_start=("nq",), col_start=("nqi",), cols=("nui",),
                  row_index="dependent_u"), K_u, negate=True),
        *_embedded_rates("T_partition", "rates_partition", ("nx",), kinematic_identity),
        Copy(View("A", rows=("nqi",)), View("rates_partition", row_index="independent_q"),
             what="the partition's A: the rows of its independent states"),
        Copy(View("A", row_start=("nqi",), rows=("nui",)),
             View("rates_partition", row_start=("nq",), row_index="independent_u")),
        Copy(View("B", rows=("nqi",)), View("B_full", row_index="independent_q")),
        Copy(View("B", row_start=("nqi",), rows=("nui",)),
             View("B_full", row_start=("nq",), row_index="independent_u")),
    )


def _null_space_chart(kinematic_identity):
    """The local form where J_c or B_v lost rank (no partition exists): the
    embedding T = [[N_q, 0], [C_1 N_q, N_u]] (C_1 = -B_v^+ J_vq, the part of du
    forced by J_vq dq), A' = M^-1 A~ T, and the rows projected onto the null
    spaces: A = [N_q^T A'_q; N_u^T A'_u], B = [0; N_u^T B'_u]."""
    T_q = View("T_null", rows=("nq",), cols=("ny",))
    return (
        PseudoSolve("v", View("C_1"), View("J_vq"), ("rank_v",), negate=True, what="C_1 = -B_v^+ J_vq"),
        Zero(View("T_null")),
        Copy(T_q, N_q, what="T = [[N_q, 0], [C_1 N_q, N_u]]"),
        Multiply(View("T_null", row_start=("nq",), rows=("nu",), cols=("ny",)), View("C_1"), T_q),
        Copy(View("T_null", row_start=("nq",), rows=("nu",), col_start=("ny",), cols=("nz",)), N_u),
        *_embedded_rates("T_null", "rates_null", ("nlx",), kinematic_identity),
    )


# The outputs in a partition's chart's local states: the partition's C_p, D
# (the outputs stage, after the partition path) and x_p = H x, H the rows of
# the embedding T at the partition's independent states (T in T_null's first
# NX columns): C = C_p H, D = D_p.
LOCAL_CHART_OUTPUTS = (
    Multiply(View("C_local", cols=("nx",)), View("C_out", cols=("nqi",)),
             View("T_null", cols=("nx",), row_index="independent_q"), what="C = C_p H"),
    AddProduct(View("C_local", cols=("nx",)), View("C_out", col_start=("nqi",), cols=("nui",)),
               View("T_null", row_start=("nq",), cols=("nx",), row_index="independent_u")),
    Copy(View("D_local"), View("D_out"), what="D = D_p"),
    CheckFinite((View("C_local", cols=("nx",)),), what="C"),
)


# The outputs y = h(q, qd, u, ud, r, t) linearized in the null spaces'
# chart's states x, after its embedding T = [T_q; T_u] and the rates A' =
# M^-1 A~ T, B' (all rows, the minimum-norm multipliers' included) are in the
# workspace: dq = T_q x, du = T_u x, d[qd; ud; lambda] = A' x + B' dr, so
#     C = H_q T_q + H_u T_u + H_rates A',   D = H_r + H_rates B'.
LOCAL_OUTPUTS = (
    Multiply(View("C_local", cols=("nlx",)), View("H_q"), View("T_null", rows=("nq",), cols=("nlx",)),
             what="C = H_q T_q + H_u T_u + H_rates A'"),
    AddProduct(View("C_local", cols=("nlx",)), View("H_u"),
               View("T_null", row_start=("nq",), rows=("nu",), cols=("nlx",))),
    AddProduct(View("C_local", cols=("nlx",)), View("H_rates"), View("rates_null", cols=("nlx",))),
    Copy(View("D_local"), View("H_r"), what="D = H_r + H_rates B'"),
    AddProduct(View("D_local"), View("H_rates"), View("B_full")),
    CheckFinite((View("y"), View("C_local", cols=("nlx",)), View("D_local")), what="y, C and D"),
)


def _descriptor(kinematic_identity):
    """The descriptor form E w' = A w + B r (González et al., eqs. 7-8) at the
    point the null-space rates evaluated: the linearization of f_k(q, q' -
    J_c^T mu, u) = 0, the speed-level rows [f_a; f_d](q, q' - J_c^T mu, u, u'
    - B_v^T nu, lambda, r) = 0 (the acceleration rows and the velocity rows
    projected onto the range of B_v), J_c dq + P_c mu = 0 and (I - P_v)(J_vq
    dq + B_v du) + P_v nu = 0, P_c, P_v the projectors onto the left null
    spaces. Columns: dq, du, dlambda, mu, nu; rows: kinematic, speed-level,
    position, velocity; the speed-level rows finally ordered [f_d; f_a]."""
    # the first column of each kind of variable, and the first row of each kind of equation
    du_col, dlambda_col = ("nq",), ("nq", "nu")
    mu_col, nu_col = ("nq", "nu", "nl"), ("nq", "nu", "nl", "nc")
    speed_rows, position_rows, velocity_rows = ("nq",), ("nq", "nw"), ("nq", "nw", "nc")
    E, A, B = "E_descriptor", "A_descriptor", "B_descriptor"

    def block(array, rows, cols, row_start=(), col_start=()):
        return View(array, row_start, rows, col_start, cols)

    kinematic = (
        (Identity(block(E, ("nq",), ("nq",)), what="kinematic rows: M_qq = I"),
         Copy(block(A, ("nq",), ("nc",), col_start=mu_col), View("J_c", transposed=True)))
        if kinematic_identity else
        (Evaluate("kinematics", what="M_qq again: its factors replaced it"),
         Copy(block(E, ("nq",), ("nq",)), View("M_qq"), what="kinematic rows"),
         Multiply(block(A, ("nq",), ("nc",), col_start=mu_col), View("M_qq"),
                  View("J_c", transposed=True))))
    return (
        LeftNullProjector("c", View("projector_c"), "rank_c", what="P_c = I - U_c U_c^T"),
        LeftNullProjector("v", View("projector_v"), "rank_v", what="P_v = I - U_v U_v^T"),
        Zero(View(E)), Zero(View(A)), Zero(View(B)),
        *kinematic,
        Copy(block(A, ("nq",), ("nq",)), View("A_qq")),
        Copy(block(A, ("nq",), ("nu",), col_start=du_col), View("A_qu")),
        Copy(block(E, ("nw",), ("nq",), row_start=speed_rows), View("M_uq"),
             what="speed-level rows: the acceleration constraints, then the dynamic equations"),
        Copy(block(E, ("nw",), ("nu",), row_start=speed_rows, col_start=du_col), View("M_uu", cols=("nu",))),
        Copy(block(A, ("nw",), ("nq",), row_start=speed_rows), View("A_uq")),
        Copy(block(A, ("nw",), ("nu",), row_start=speed_rows, col_start=du_col), View("A_uu")),
        Copy(block(A, ("nw",), ("nl",), row_start=speed_rows, col_start=dlambda_col),
             View("M_uu", col_start=("nu",), cols=("nl",)), negate=True),
        Copy(block(B, ("nd",), ("nr",), row_start=speed_rows + ("nv",)), View("B_u")),
        Multiply(block(A, ("nw",), ("nc",), row_start=speed_rows, col_start=mu_col), View("M_uq"),
                 View("J_c", transposed=True)),
        Multiply(block(A, ("nw",), ("nv",), row_start=speed_rows, col_start=nu_col),
                 View("M_uu", cols=("nu",)), View("B_v", transposed=True)),
        Copy(block(A, ("nc",), ("nq",), row_start=position_rows), View("J_c"), what="position rows"),
        Copy(block(A, ("nc",), ("nc",), row_start=position_rows, col_start=mu_col), View("projector_c")),
        Copy(block(A, ("nv",), ("nq",), row_start=velocity_rows), View("J_vq"), what="velocity rows"),
        Copy(block(A, ("nv",), ("nu",), row_start=velocity_rows, col_start=du_col), View("B_v")),
        ProjectOut(block(E, ("nv",), ("ndesc",), row_start=speed_rows), View("projector_v"),
                   what="the acceleration and velocity rows onto the range of B_v"),
        ProjectOut(block(A, ("nv",), ("ndesc",), row_start=speed_rows), View("projector_v")),
        ProjectOut(block(A, ("nv",), ("ndesc",), row_start=velocity_rows), View("projector_v")),
        Copy(block(A, ("nv",), ("nl",), row_start=speed_rows, col_start=dlambda_col), View("projector_v", cols=("nl",)),
             negate=True, accumulate=True,
             what="where B_v lost rank, P_v fixes the free multipliers and nu"),
        Copy(block(A, ("nv",), ("nv",), row_start=velocity_rows, col_start=nu_col), View("projector_v"),
             accumulate=True),
        RotateRows(block(E, ("nw",), ("ndesc",), row_start=speed_rows), ("nv",), what="rows [f_d; f_a]"),
        RotateRows(block(A, ("nw",), ("ndesc",), row_start=speed_rows), ("nv",)),
        RotateRows(block(B, ("nw",), ("nr",), row_start=speed_rows), ("nv",)),
        CheckFinite((View(E), View(A), View(B))),
    )


DEFAULT_CONDITIONS = (
    ConditionEstimate(View("J_c", index="default_dependent_q"), "J_c", "Jc_dependent", "pivot_c", 0,
                      what="the model's J_c P_qd"),
    ConditionEstimate(View("B_v", index="default_dependent_u"), "B_v", "Bv_dependent", "pivot_v", 1,
                      what="the model's B_v P_ud"),
)

CHART_PARTITION = (
    ChoosePartition(View("J_c"), "default_dependent_q", "dependent_q", "rank_c", 0,
                    what="the chart's dependent coordinates"),
    ChoosePartition(View("B_v"), "default_dependent_u", "dependent_u", "rank_v", 1,
                    what="the chart's dependent speeds"),
)

PARTITION_CONDITIONS = (
    ConditionEstimate(View("J_c", index="dependent_q"), "J_c", "Jc_dependent", "pivot_c", 0,
                      what="J_c P_qd of the workspace's partition"),
    ConditionEstimate(View("B_v", index="dependent_u"), "B_v", "Bv_dependent", "pivot_v", 1,
                      what="B_v P_ud of the workspace's partition"),
)


EQUILIBRIUM_RESIDUAL = (
    Copy(View("newton_residual", rows=("nc",)), View("f_c"), what="R = [f_c; f_v; accelerations]"),
    Copy(View("newton_residual", row_start=("nc",), rows=("nv",)), View("f_v")),
    Branch("PARTITION_CHART",
           (Copy(View("newton_residual", row_start=("nc", "nv"), rows=("nui",)),
                 View("ud", row_index="independent_u"),
                 what="a partition's chart: the accelerations of its independent speeds"),),
           (Multiply(View("newton_residual", row_start=("nc", "nv"), rows=("nz",)),
                     View("svd_v_v", col_start=("rank_v",), cols=("nz",), transposed=True),
                     View("ud", rows=("nu",)),
                     what="the null spaces' chart: N_u^T ud*"),)),
)


def _equilibrium_jacobian(kinematic_identity):
    """d R / d[q; u]: [[J_c, 0]; [J_vq, B_v]; the accelerations' rows], from G,
    the ud rows of A' for the identity embedding (the derivatives of ud*(q,
    u)). A partition's chart: the rows of G of its independent speeds. The
    null spaces' chart: N_u^T (G - [C, 0]), C the turning of the null space:
    d(N_u^T ud*)/dq = N_u^T (G_q - C) at a point where N_u^T ud* = 0, with
    C = d(B_v^T a)/dq, a = (B_v^+)^T ud* (the accelerations along the
    constraint normals a steady motion keeps). In the multiplier form C is
    exact: the dynamic rows of A_uq hold -d(B_v^T lambda)/dq, linear in
    lambda, so C is the change of A_uq when a is added to the multipliers
    (one more evaluation of the Jacobian stage); without multipliers C is
    left out (slower convergence at steady motions)."""
    G = "rates_identity"
    coordinates = View(G, rows=("nq",))
    speeds = View(G, row_start=("nq",), rows=("nw",))
    J = "newton_jacobian"
    turning = (
        PseudoSolve("v", View("normal"), View("ud", rows=("nu",)), ("rank_v",), transposed=True,
                    what="a = (B_v^+)^T ud*"),
        Copy(View("turning"), View("A_uq", row_start=("nv",), rows=("nu",))),
        Copy(View("ud", row_start=("nu",), rows=("nl",)), View("normal", rows=("nl",)), accumulate=True,
             what="the multipliers shifted by a"),
        Evaluate("jacobians"),
        Copy(View("ud", row_start=("nu",), rows=("nl",)), View("normal", rows=("nl",)), accumulate=True,
             negate=True),
        Copy(View(G, row_start=("nq",), rows=("nu",), cols=("nq",)), View("turning"), accumulate=True,
             negate=True, what="G_q - C = G_q - (A_uq(lambda*) - A_uq(lambda* + a))"),
        Copy(View(G, row_start=("nq",), rows=("nu",), cols=("nq",)),
             View("A_uq", row_start=("nv",), rows=("nu",)), accumulate=True),
    )
    return (
        Zero(View(G)),
        Copy(View(G, rows=("nq",), cols=("nq",)), View("A_qq"), what="[A_qq, A_qu; A_uq, A_uu]"),
        Copy(View(G, rows=("nq",), col_start=("nq",), cols=("nu",)), View("A_qu")),
        Copy(View(G, row_start=("nq",), rows=("nw",), cols=("nq",)), View("A_uq")),
        Copy(View(G, row_start=("nq",), rows=("nw",), col_start=("nq",), cols=("nu",)), View("A_uu")),
        *forward_substitution(coordinates, speeds, null_space_speed_solve, kinematic_identity),
        Zero(View(J, rows=("nrows",))),
        Copy(View(J, rows=("nc",), cols=("nq",)), View("J_c")),
        Copy(View(J, row_start=("nc",), rows=("nv",), cols=("nq",)), View("J_vq")),
        Copy(View(J, row_start=("nc",), rows=("nv",), col_start=("nq",), cols=("nu",)), View("B_v")),
        Branch("PARTITION_CHART",
               (Copy(View(J, row_start=("nc", "nv"), rows=("nui",)),
                     View(G, row_start=("nq",), row_index="independent_u")),),
               (*turning,
                Multiply(View(J, row_start=("nc", "nv"), rows=("nz",)),
                         View("svd_v_v", col_start=("rank_v",), cols=("nz",), transposed=True),
                         View(G, row_start=("nq",), rows=("nu",))),)),
    )


def _tangent_stages(kinematic_identity):
    """The tangent (forward-mode) stages of the partition path, for the
    parameter sensitivities: the seeds, then each numeric stage's tangent
    after the tangents of the blocks it reads (codegen/emit.py writes those,
    the tangent rendering of the symbolic blocks)."""
    factors = {step.name: step for step in (*_kinematic_rates(kinematic_identity), *DYNAMIC_RATES, *PARTITION)
               if isinstance(step, Factor)}

    def stage(name, steps, what, results=()):
        return Stage(f"tangent_{name}", None, tangent_steps(steps, factors), what, results=results,
                     renderings="extended")
    # results: what the straight-line rendering (the extended fast path)
    # stores for the blocks' tangents and the caller to read
    return (
        Stage("tangent_seeds", None, TANGENT_SEEDS, "the dependent coordinates' and speeds' tangents",
              results=(View("d_q"), View("d_u")), renderings="extended"),
        stage("kinematic_rates", _kinematic_rates(kinematic_identity), "the tangent of qd*",
              (View("d_qd"),)),
        stage("dynamic_rates", DYNAMIC_RATES, "the tangent of ud* (and the multipliers)", (View("d_ud"),)),
        stage("partition", PARTITION, "the tangents of K_c and K_v"),
        stage("solution", _solution(kinematic_identity), "the tangents of A', B'",
              (View("d_A_full", rows=("nq", "nu")), View("d_B_full", rows=("nq", "nu")))),
        stage("outputs", OUTPUTS, "the tangents of the outputs' C, D", (View("d_C_out"), View("d_D_out"))),
    )


def procedure(kinematic_identity, multipliers=True):
    """The stages of the numeric procedure, in order. The partition path
    (both renderings): residuals .. solution, and the local chart after it;
    the rank-revealing half (looped): the SVDs, the null-space rates, the
    chart's partition, a partition's A by the null-space solve, the null
    spaces' chart, the descriptor form and the equilibrium. ``multipliers``:
    whether the dynamics have multipliers (the equilibrium's turning term
    needs them)."""
    jacobian = _equilibrium_jacobian(kinematic_identity)
    if not multipliers:       # the turning term needs multipliers: left out
        *head, branch = jacobian
        jacobian = (*head, Branch(branch.chart, branch.then, branch.otherwise[-1:]))
    return (
        Stage("residuals", "residuals", (), "the constraint residuals f_c, f_v"),
        Stage("constraint_jacobians", "constraint_jacobians", (), "J_c, J_vq, B_v"),
        Stage("kinematic_rates", "kinematics", _kinematic_rates(kinematic_identity), "qd*",
              results=(View("qd"),)),
        Stage("dynamic_rates", "dynamics", DYNAMIC_RATES, "ud* (and the multipliers)",
              results=(View("ud"),)),
        Stage("jacobians", "jacobians", (), "the Jacobian blocks at (q, qd*, u, ud*, r, t)"),
        Stage("partition", None, PARTITION, "the partition's K_c and K_v"),
        Stage("solution", None, _solution(kinematic_identity), "A', B' and the outputs"),
        Stage("outputs", "outputs", OUTPUTS,
              "the outputs y and their linearization C, D (after the partition's solution)",
              results=(View("C_out"), View("D_out")), renderings="extended"),
        *_tangent_stages(kinematic_identity),
        Stage("local_chart", None, _local_chart(),
              "the local form at a regular point, in a partition's chart",
              reads_stored=("A", "B")),
        Stage("constraint_svds", None, CONSTRAINT_SVDS, "SVDs of J_c and B_v", renderings="looped"),
        Stage("constraint_singular_values", None, CONSTRAINT_SINGULAR_VALUES,
              "the singular values of J_c and B_v", renderings="looped"),
        Stage("constraint_row_spaces", None, CONSTRAINT_ROW_SPACES,
              "the left singular vectors of J_c and B_v", renderings="looped"),
        Stage("null_space_rates", None, NULL_SPACE_RATES,
              "ud* and the minimum-norm multipliers through the null space of B_v",
              renderings="looped"),
        Stage("default_conditions", None, DEFAULT_CONDITIONS,
              "the condition estimates of the model's partition", renderings="looped"),
        Stage("chart_partition", None, CHART_PARTITION,
              "the partition of a chart (after the ranks and the default's conditions): the "
              "model's where well conditioned", renderings="looped"),
        Stage("partition_rates", None, _partition_embedding_rates(kinematic_identity),
              "a partition's A and B by the null-space solve", renderings="looped"),
        Stage("null_space_chart", None, _null_space_chart(kinematic_identity),
              "the local form in the null spaces' chart", renderings="looped"),
        Stage("local_chart_outputs", None, LOCAL_CHART_OUTPUTS,
              "the outputs' C, D in a partition's chart's local states", renderings="looped"),
        Stage("local_outputs", None, LOCAL_OUTPUTS,
              "the outputs' C, D in the null spaces' chart's states", renderings="looped"),
        Stage("partition_conditions", None, PARTITION_CONDITIONS,
              "the condition estimates of the workspace's partition", renderings="looped"),
        Stage("descriptor", None, _descriptor(kinematic_identity), "the descriptor form",
              renderings="looped"),
        Stage("equilibrium_residual", None, EQUILIBRIUM_RESIDUAL, "equilibrium's residual",
              renderings="looped"),
        Stage("equilibrium_jacobian", None, jacobian, "equilibrium's Jacobian", renderings="looped"),
        Stage("equilibrium", None, (GaussNewton("null_space_point", "equilibrium_residual",
                                                "equilibrium_jacobian"),),
              "an equilibrium or steady motion", renderings="looped"),
    )
