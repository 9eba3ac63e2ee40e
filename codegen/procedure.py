"""The numeric procedure, described once as named steps.

Every call of the generated code runs, after the symbolic blocks are
evaluated (Peterson's thesis chapter, DESIGN.md section 2):

    qd*  from  M_qq qd = -f_k(q, qd = 0, u, t)
    ud*  from  M_uu [ud; lambda] = -[f_a; f_d](q, qd*, u, ud = 0, r, t)
    K_c = (J_c P_qd)^-1 J_c P_qi,  K_v = [K_q, K_u] = (B_v P_ud)^-1 [J_vq, B_v P_ui]
    T_x = A_xq + A_xu C_1 = A_xq - A_xu P_ud K_q                (x = q, u)
    A~  = [T_q C_0, A_qu C_2; T_u C_0, A_uu C_2],  X C_0 = X P_qi - X P_qd K_c,
                                                   X C_2 = X P_ui - X P_ud K_u
    A'  = M^-1 A~, B' = M^-1 [0; 0; B_u]   (block forward substitution, M = [M_qq 0; M_uq M_uu])
    A, B = the rows of A', B' of the independent states

Here that procedure is data: a list of :class:`Stage` objects, each holding
the symbolic blocks it evaluates and its numeric steps (:class:`Factor`,
:class:`Solve`, :class:`SubtractProduct`, ...) on :class:`View` objects
(workspace arrays, or rows and columns of them; a column selection by a
partition's index array is a view too). Two renderings read it:

* :mod:`codegen.straight_line` runs the steps on traced values for the
  model's default partition, with static pivots, and gives straight-line C;
* the template macros of ``templates/util.c.jinja`` turn each step into calls
  of small generic C helpers (LU with partial pivoting, solve, gather,
  multiply-subtract), for any partition.

A change to the mathematics is a change here; both renderings follow.

The local state-space and descriptor forms (DESIGN.md section 3b) reuse these
stages (the evaluations, qd*, the factor steps, the block forward
substitution ``A' = M^-1 A~``) with two changes that only exist at run time,
so they are looped C functions of ``templates/model.c.jinja`` rather than
steps traced here: the ranks of J_c and B_v (SVDs at the point) decide the
sizes, and the partition's embedding ``[C_0, C_2]`` is replaced by the
null-space embedding ``T = [[N_q, 0], [C_1 N_q, N_u]]``; the speed-level
system is solved through the null space of B_v (minimum-norm multipliers).
At a regular point where the default partition's straight-line code runs,
the local form has a fast path that is a stage here (``local_chart``): the
chart of the partition itself, orthonormalized (see :func:`_local_chart`). It
is traced to straight-line code only; without that code (a stage over the
size limit) the SVD path runs.
"""

from __future__ import annotations

from dataclasses import dataclass

# Sizes are tuples of size names, summed: ("nq", "nui") is NQ + NUI.
# nw: unknowns of the speed-level solve (speeds, plus the multipliers);
# nd: the dynamic equations (nw - nv rows of B_u).
ARRAYS = {
    # name: (rows, columns)
    "f_c": (("nc",), ("one",)), "f_v": (("nv",), ("one",)),
    "J_c": (("nc",), ("nq",)), "J_vq": (("nv",), ("nq",)), "B_v": (("nv",), ("nu",)),
    "M_qq": (("nq",), ("nq",)), "kinematic_residual": (("nq",), ("one",)), "qd": (("nq",), ("one",)),
    "M_uu": (("nw",), ("nw",)), "speed_residual": (("nw",), ("one",)), "ud": (("nw",), ("one",)),
    "A_qq": (("nq",), ("nq",)), "A_qu": (("nq",), ("nu",)), "M_uq": (("nw",), ("nq",)),
    "A_uq": (("nw",), ("nq",)), "A_uu": (("nw",), ("nu",)), "B_u": (("nd",), ("nr",)),
    "Jc_dependent": (("nc",), ("nc",)), "Bv_dependent": (("nv",), ("nv",)),
    "K_c": (("nc",), ("nqi",)), "K_v": (("nv",), ("nq", "nui")),
    "T_q": (("nq",), ("nq",)), "T_u": (("nw",), ("nq",)),
    "A_full": (("nq", "nw"), ("nx",)), "B_full": (("nq", "nw"), ("nr",)),
    # the local chart at a regular point (transposed: the partition's index
    # sets select columns)
    "A": (("nx",), ("nx",)), "B": (("nx",), ("nr",)),
    "N_qT": (("nqi",), ("nq",)), "N_uT": (("nui",), ("nu",)),
    "L_chart_q": (("nqi",), ("nqi",)), "L_chart_u": (("nui",), ("nui",)),
    "KN": (("nv",), ("nqi",)), "W": (("nui",), ("nqi",)), "minus_C1NqT": (("nqi",), ("nu",)),
    "HT": (("nx",), ("nx",)), "GA": (("nx",), ("nx",)),
    "A_local": (("nx",), ("nx",)), "B_local": (("nx",), ("nr",)),
}

# index arrays of a partition and their lengths
INDEX_SETS = {"dependent_q": ("nc",), "independent_q": ("nqi",),
              "dependent_u": ("nv",), "independent_u": ("nui",)}


@dataclass(frozen=True)
class View:
    """Rows ``row_start .. row_start + rows`` of a workspace array and either
    the columns ``col_start .. col_start + cols`` or those listed in the index
    array ``index``. ``None`` for rows or cols: all of them."""

    array: str
    row_start: tuple = ()
    rows: tuple | None = None
    col_start: tuple = ()
    cols: tuple | None = None
    index: str | None = None
    transposed: bool = False   # read as the transpose (never written so)

    @property
    def row_count(self):
        return ARRAYS[self.array][0] if self.rows is None else self.rows

    @property
    def col_count(self):
        if self.index is not None:
            return INDEX_SETS[self.index]
        return ARRAYS[self.array][1] if self.cols is None else self.cols

    @property
    def read_rows(self):
        """The rows of the matrix the view reads (its columns when transposed)."""
        return self.col_count if self.transposed else self.row_count

    @property
    def read_cols(self):
        return self.row_count if self.transposed else self.col_count

    @property
    def stride(self):
        return ARRAYS[self.array][1]

    @property
    def whole(self):
        return not (self.row_start or self.rows or self.col_start or self.cols or self.index)


@dataclass(frozen=True)
class Factor:
    """LU factors of the square matrix ``matrix``, kept as ``name`` for later
    solves. Singular (``status``) when a pivot is not larger than the relative
    tolerance times the largest entry of ``matrix``, or of ``scale`` (the
    array the matrix's columns come from) when that is larger."""

    kind = "factor"   # the template macro that lays the step out as loops
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


@dataclass(frozen=True)
class Solve:
    """``out = factor^-1 [rhs_1, rhs_2, ...]`` (the right-hand sides side by
    side, negated when ``negate``); no ``rhs``: in place, ``out`` is the
    right-hand side."""

    kind = "solve"   # the template macro that lays the step out as loops
    factor: str
    out: View
    rhs: tuple = ()
    negate: bool = False
    what: str = ""


@dataclass(frozen=True)
class SubtractProduct:
    """``out = minuend - a b`` (no minuend: ``out -= a b``)."""

    kind = "subtract_product"   # the template macro that lays the step out as loops
    out: View
    a: View
    b: View
    minuend: View | None = None
    what: str = ""


@dataclass(frozen=True)
class Multiply:
    """``out = a b``."""

    kind = "multiply"
    out: View
    a: View
    b: View
    what: str = ""


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
    matrix's trace exceeds ``straight_line.GRAM_LIMIT`` (the basis would lose
    orthogonality) or a pivot fell below 1/2 (rounding); the looped one uses
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
    kind = "zero"   # the template macro that lays the step out as loops
    out: View
    what: str = ""


@dataclass(frozen=True)
class Copy:
    """``out = source`` (``-source`` when ``negate``)."""

    kind = "copy"   # the template macro that lays the step out as loops
    out: View
    source: View
    negate: bool = False
    what: str = ""


@dataclass(frozen=True)
class CheckFinite:
    """NONFINITE_RESULT unless the arrays' first ``rows`` rows are finite."""

    kind = "check_finite"   # the template macro that lays the step out as loops
    views: tuple
    what: str = ""


@dataclass(frozen=True)
class SelectRows:
    """The outputs: A, B (rows of the independent states of A_full, B_full)
    and A_full, B_full (the rows of all coordinates and speeds)."""

    kind = "select_rows"   # the template macro that lays the step out as loops
    what: str = "row selection: A, B for the independent states; A', B' for all"


@dataclass(frozen=True)
class RankCertificate:
    """Full row rank of ``matrix`` (rows <= cols) at the run-time tolerance.
    The straight-line rendering certifies it without an SVD: with matrix
    matrix^T = L L^T (Cholesky), sigma_min >= 1 / ||L^-1||_F and sigma_max <=
    ||matrix||_F, and the check asks sigma_min / sigma_max > 2 rank_tol of
    these bounds, with the bounds' ratio below 1e6 (so the Gram matrix's
    rounding cannot matter); where it fails, PIVOT_REJECTED, and the general
    path decides the rank from the SVD. The looped rendering runs after that
    SVD and checks its rank, the workspace's ``rank``
    (RANK_DEFICIENT otherwise)."""

    kind = "rank_certificate"
    matrix: View
    rank: str
    what: str = ""


@dataclass(frozen=True)
class LocalOutputs:
    """The outputs of the local form at a regular point: A = A_local, B =
    B_local, the embedding T = [[N_q, 0], [C_1 N_q, N_u]], into the caller's
    arrays, then checked."""

    kind = "local_outputs"
    what: str = "A, B and T of the local form into the caller's arrays"


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
    # left them (not carried values): A_full, B_full of the solution
    reads_stored: tuple = ()


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


def _solution(kinematic_identity):
    steps = [
        Factor("c", View("J_c", index="dependent_q"), "SINGULAR_CONFIGURATION_PARTITION", scale="J_c",
               workspace="Jc_dependent", what="J_c P_qd", condition=0),
        Solve("c", View("K_c"), (View("J_c", index="independent_q"),), what="K_c = (J_c P_qd)^-1 J_c P_qi"),
        Factor("v", View("B_v", index="dependent_u"), "SINGULAR_VELOCITY_PARTITION", scale="B_v",
               workspace="Bv_dependent", what="B_v P_ud", condition=1),
        Solve("v", View("K_v"), (View("J_vq"), View("B_v", index="independent_u")),
              what="K_v = [K_q, K_u] = (B_v P_ud)^-1 [J_vq, B_v P_ui]"),
        SubtractProduct(View("T_q"), View("A_qu", index="dependent_u"), K_q, minuend=View("A_qq"),
                        what="T_q = A_qq + A_qu C_1 = A_qq - A_qu P_ud K_q"),
        SubtractProduct(View("T_u"), View("A_uu", index="dependent_u"), K_q, minuend=View("A_uq"),
                        what="T_u = A_uq + A_uu C_1 = A_uq - A_uu P_ud K_q"),
        *_times_C(A_q, "T_q", "A_qu"),
        *_times_C(A_u, "T_u", "A_uu"),
    ]
    if not kinematic_identity:
        steps.append(Solve("qq", A_q, what="block forward substitution: A'_q = M_qq^-1 A~_q"))
    steps += [
        SubtractProduct(A_u, View("M_uq"), A_q, what="A~_u - M_uq A'_q"),
        Solve("uu", A_u, what="A'_u = M_uu^-1 (A~_u - M_uq A'_q)"),
        Zero(View("B_full", rows=("nq", "nv")), what="B' = M^-1 [0; 0; B_u]: no coordinate rows"),
        Copy(View("B_full", row_start=("nq", "nv"), rows=("nd",)), View("B_u")),
        Solve("uu", View("B_full", row_start=("nq",), rows=("nw",))),
        CheckFinite((View("A_full", rows=("nq", "nu")), View("B_full", rows=("nq", "nu")))),
        SelectRows(),
    ]
    return tuple(steps)


def completion_steps(stages):
    """complete_point: the Newton step on f_c(q) = 0 for the dependent
    coordinates, and the one exact step of f_v(u) = 0 (linear in u) for the
    dependent speeds, with the factorizations of the solution stage."""
    factor = {step.name: step for stage in stages for step in stage.steps if isinstance(step, Factor)}
    return dict(
        coordinates=(factor["c"], Solve("c", View("f_c"), what="the Newton step (J_c P_qd)^-1 f_c")),
        speeds=(factor["v"], Solve("v", View("f_v"), what="the step (B_v P_ud)^-1 f_v")))


def partition_steps(stages):
    """The steps of the solution stage that make a partition's K_c and K_v
    (factor J_c P_qd and B_v P_ud, solve): the local form in a partition's
    chart with looped code starts with them."""
    solution = next(stage for stage in stages if stage.name == "solution")
    return solution.steps[:4]


def _local_chart():
    """The local form at a regular point in the chart of a partition (DESIGN.md
    section 3c): the partition's own linearization A, B (the solution's, in
    the workspace's ``A`` and ``B``), written in orthonormal bases of the
    admissible perturbations, so a similarity transform of A (same
    eigenvalues, at steady motions too).

    C_0 = P_qi - P_qd K_c spans null(J_c); C_0 = N_q L_q^T (Orthonormalize)
    gives the basis N_q (the Gram-Schmidt orthonormalization of C_0's
    columns); likewise C_2 = N_u L_u^T for null(B_v). The minimum-norm C_1 =
    -B_v^+ J_vq is the partition's -P_ud K_q with its part in null(B_v)
    removed, so C_1 N_q = -P_ud K_q N_q + N_u W with W = N_u^T P_ud K_q N_q.
    The local states x = [y; z] (dq = N_q y, du = C_1 dq + N_u z) and the
    partition's x_p = [dq_i; du_i] are related by x = G x_p and x_p = H x,
    G = [[L_q^T, 0], [-W L_q^T, L_u^T]], H (the independent rows of the
    embedding T) its inverse: A_local = G A H, B_local = G B = [0; L_u^T B_u]
    (the partition's B has no coordinate rows). Everything is kept transposed
    where the partition's index sets select columns."""
    return (
        RankCertificate(View("J_c"), "rank_c", what="J_c has full rank"),
        RankCertificate(View("B_v"), "rank_v", what="B_v has full rank"),
        Orthonormalize("chart_q", View("N_qT"), View("K_c"), "dependent_q", "independent_q",
                       what="C_0 = N_q L_q^T"),
        Orthonormalize("chart_u", View("N_uT"), K_u, "dependent_u", "independent_u",
                       what="C_2 = N_u L_u^T"),
        Multiply(View("KN"), K_q, View("N_qT", transposed=True), what="K_q N_q"),
        Multiply(View("W"), View("N_uT", index="dependent_u"), View("KN"),
                 what="W = N_u^T P_ud K_q N_q"),
        Zero(View("minus_C1NqT")),
        Copy(View("minus_C1NqT", index="dependent_u"), View("KN", transposed=True),
             what="(P_ud K_q N_q)^T"),
        SubtractProduct(View("minus_C1NqT"), View("W", transposed=True), View("N_uT"),
                        what="-(C_1 N_q)^T = (P_ud K_q N_q - N_u W)^T"),
        Copy(View("HT", rows=("nqi",), cols=("nqi",)), View("N_qT", index="independent_q"),
             what="H^T: the independent rows of T, transposed"),
        Zero(View("HT", row_start=("nqi",), rows=("nui",), cols=("nqi",))),
        Copy(View("HT", rows=("nqi",), col_start=("nqi",), cols=("nui",)),
             View("minus_C1NqT", index="independent_u"), negate=True),
        Copy(View("HT", row_start=("nqi",), rows=("nui",), col_start=("nqi",), cols=("nui",)),
             View("N_uT", index="independent_u")),
        Copy(View("GA"), View("A"), what="G A: the partition's A in the local states' rows"),
        TriangularMultiply("chart_q", View("GA", rows=("nqi",)), what="L_q^T A_qi"),
        TriangularMultiply("chart_u", View("GA", row_start=("nqi",), rows=("nui",)),
                           what="L_u^T A_ui"),
        SubtractProduct(View("GA", row_start=("nqi",), rows=("nui",)), View("W"),
                        View("GA", rows=("nqi",)), what="L_u^T A_ui - W L_q^T A_qi"),
        Multiply(View("A_local"), View("GA"), View("HT", transposed=True), what="A = G A H"),
        Zero(View("B_local", rows=("nqi",))),
        Copy(View("B_local", row_start=("nqi",), rows=("nui",)),
             View("B", row_start=("nqi",), rows=("nui",))),
        TriangularMultiply("chart_u", View("B_local", row_start=("nqi",), rows=("nui",)),
                           what="B = [0; L_u^T B_ui]"),
        LocalOutputs(),
    )


def procedure(kinematic_identity):
    """The stages of a call of linearize, in order (then ``local_chart``, which
    only linearize_local runs, after the solution). state_derivative runs the
    first four; complete_point the first two."""
    return (
        Stage("residuals", "residuals", (), "the constraint residuals f_c, f_v"),
        Stage("constraint_jacobians", "constraint_jacobians", (), "J_c, J_vq, B_v"),
        Stage("kinematic_rates", "kinematics", _kinematic_rates(kinematic_identity), "qd*",
              results=(View("qd"),)),
        Stage("dynamic_rates", "dynamics", DYNAMIC_RATES, "ud* (and the multipliers)",
              results=(View("ud"),)),
        Stage("jacobians", "jacobians", (), "the Jacobian blocks at (q, qd*, u, ud*, r, t)"),
        Stage("solution", None, _solution(kinematic_identity), "A', B' and the outputs"),
        Stage("local_chart", None, _local_chart(),
              "the local form at a regular point, in a partition's chart",
              reads_stored=("A", "B")),
    )
