"""The public C functions of a generated model, one row each.

Every entry point is declared here once: its parameters (inputs, options,
outputs with their shapes), the workspace family it needs, the stages of
:mod:`codegen.procedure` it runs and how the Cython kernel loops it over a
batch. The renderings read this table:

* the header's prototypes and their documentation (``templates/model.h.jinja``);
* the C body of an entry point whose ``body`` is ``"stages"``: the point
  checked, the partition set, its stages run in order, its outputs copied
  from the workspace arrays named by their ``source`` (``templates/model.c.jinja``);
  the others' bodies are macros of ``templates/entry_points.c.jinja``;
* the Cython declarations, and the batch loop of every ``"map"`` entry
  point (one call per point, inputs by row, outputs into rows)
  (``templates/module.pyx.jinja``);
* the kernel's ``ENTRY_POINTS`` metadata, from which the Python runtime
  allocates outputs and builds the results of the ``"map"`` entry points
  (:mod:`codegen.runtime.kernel`).

Adding an entry point: a row here (with ``body="stages"`` when it runs
stages and copies workspace arrays out, otherwise a macro of the same name
in ``templates/entry_points.c.jinja``), its stages in
:mod:`codegen.procedure` if it needs new ones, and its tests. A ``"map"``
entry point is then also a method of every compiled model
(``model.<name>(q, u, r, p, t)``, see :mod:`codegen.runtime`).

Sizes are tuples of size names, summed (as in :mod:`codegen.procedure`):
``("nq", "nui")`` is NQ + NUI.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Workspace families: a caller allocates the workspace of the family of the
# functions it calls. Each contains the one before it (its first member), so
# a larger one serves every function of a smaller one.
FAMILIES = {
    "base": ("workspace", "linearize, the state derivative, completion, the constraint maps"),
    "local": ("local_workspace", "the local form, singular values, the automatic partition "
                                 "(SVDs, null spaces, charts)"),
    "full": ("full_workspace", "the descriptor form and equilibria (projectors, Gauss-Newton)"),
    # beside the others: the base workspace and the tangents of its arrays
    "sensitivity": ("sensitivity_workspace", "the parameter sensitivities (the base workspace and "
                                             "the tangents of its arrays)"),
}


@dataclass(frozen=True)
class Parameter:
    """One parameter of a C entry point.

    ``role``: ``"time"``, ``"point"`` (an input vector of the point: q, u,
    r, p), ``"in_out"`` (a vector solved in place), ``"partition"`` (an
    optional index array), ``"option"`` (a scalar), ``"flags"`` (an optional
    int input array), ``"output"``. ``shape``: (rows, cols) of an array,
    each a size tuple; a vector has cols ``("one",)``."""

    name: str
    role: str
    ctype: str
    shape: tuple = ()
    optional: bool = False      # NULL allowed
    doc: str = ""
    source: str | None = None   # ("stages" bodies) the workspace array copied into this output
    packed: bool = False        # rows of a run-time size: the buffer has the largest

    @property
    def is_array(self):
        return "*" in self.ctype

    @property
    def is_int(self):
        return self.ctype.replace("const", "").replace("*", "").strip() == "int"


@dataclass(frozen=True)
class EntryPoint:
    """A public C function ``<model>_<name>``. ``family``: the workspace it
    takes (last parameter ``work``; None: none). ``stages``: the procedure's
    stages it runs. ``body``: ``"stages"`` (generated from the stages and the
    outputs' sources) or ``"macro"`` (a macro of entry_points.c.jinja).
    ``batch``: the kernel's loop over a batch: ``"map"`` (generated: one call
    per point), the name of a hand-written loop of module.pyx.jinja, or None
    (called inside other loops only). ``returns``: the C return type (int: a
    status code)."""

    name: str
    doc: str
    parameters: tuple
    family: str | None = "base"
    stages: tuple = ()
    body: str = "macro"
    batch: str | None = "map"
    returns: str = "int"
    workspace_first: bool = False
    # a C batch entry point <model>_<name>_batch (see batch_signature): None,
    # or the parameters it has beyond the row's (per point, after its outputs)
    batch_c: tuple | None = None

    @property
    def outputs(self):
        return tuple(p for p in self.parameters if p.role == "output")

    @property
    def inputs(self):
        return tuple(p for p in self.parameters if p.role in ("point", "in_out"))

    @property
    def options(self):
        return tuple(p for p in self.parameters if p.role in ("option", "partition", "flags"))

    def has(self, name):
        return any(p.name == name for p in self.parameters)


# -- the parameters many entry points share -------------------------------------------------

T = Parameter("t", "time", "double", doc="time")
Q = Parameter("q", "point", "const double *", (("nq",), ("one",)), doc="coordinates")
U = Parameter("u", "point", "const double *", (("nu",), ("one",)), doc="speeds")
R = Parameter("r", "point", "const double *", (("nr",), ("one",)), optional=True,
              doc="inputs (NULL: zero)")
P = Parameter("p", "point", "const double *", (("np",), ("one",)), optional=True,
              doc="parameters (NULL: the defaults)")
DEPENDENT_Q = Parameter("dependent_q", "partition", "const int *", (("nc",), ("one",)), optional=True,
                        doc="the dependent coordinates (NULL: the model's default)")
DEPENDENT_U = Parameter("dependent_u", "partition", "const int *", (("nv",), ("one",)), optional=True,
                        doc="the dependent speeds (NULL: the model's default)")
TOL = Parameter("tol", "option", "double",
                doc="the largest accepted |f_c|_inf and |f_v|_inf at the point (< 0: not checked)")
RANK_TOL = Parameter("rank_tol", "option", "double",
                     doc="singular values of J_c, B_v above rank_tol times the largest count "
                         "for the ranks (<= 0: RANK_RTOL)")
RANKS = Parameter("ranks", "output", "int *", (("2",), ("one",)), optional=True,
                  doc="[rank of J_c, rank of B_v]")
POINT = (T, Q, U, R, P)


ENTRY_POINTS = (
    EntryPoint(
        "linearize",
        """Linearize at the operating point (t, q, u, r, p) with a partition:
        d x/dt = A x + B r in the independent states x = [q_i, u_i] (the
        perturbations about the point). The default partition runs as
        straight-line code with static pivots; another partition, or a
        static pivot that fails its check, takes the general path (LU with
        partial pivoting; the same result to rounding).""",
        POINT + (
            DEPENDENT_Q, DEPENDENT_U, TOL,
            Parameter("A", "output", "double *", (("nx",), ("nx",)), True,
                      "d x/dt = A x + B r"),
            Parameter("B", "output", "double *", (("nx",), ("nr",)), True),
            Parameter("A_full", "output", "double *", (("ns",), ("nx",)), True,
                      "the derivatives of all coordinates and speeds (rows q then u) with respect "
                      "to the independent states; rows of dependent quantities serve output and "
                      "measurement equations"),
            Parameter("B_full", "output", "double *", (("ns",), ("nr",)), True,
                      "... and to the inputs"),
            Parameter("qd", "output", "double *", (("nq",), ("one",)), True, "qd* at the point"),
            Parameter("ud", "output", "double *", (("nu",), ("one",)), True, "ud* at the point"),
        ),
        stages=("residuals", "constraint_jacobians", "kinematic_rates", "dynamic_rates", "jacobians",
                "partition", "solution"),
        batch="linearize",
        batch_c=(Parameter("condition", "output", "double *", (("2",), ("one",)), True,
                           "partition_condition(work, 0) after each point"),
                 Parameter("steady_tol", "option", "double", doc="for unsteady"),
                 Parameter("unsteady", "output", "int *", (("nx",), ("one",)), True,
                           "unsteady_states(work, NULL, A, NULL, steady_tol) after each point"))),
    EntryPoint(
        "state_derivative",
        """qd* and ud*, the state derivative of all coordinates and speeds at
        (t, q, u, r, p). The point should satisfy the constraints (not
        checked).""",
        POINT + (
            Parameter("qd", "output", "double *", (("nq",), ("one",)), True, "qd*", source="qd"),
            Parameter("ud", "output", "double *", (("nu",), ("one",)), True, "ud*", source="ud"),
        ),
        stages=("residuals", "constraint_jacobians", "kinematic_rates", "dynamic_rates"),
        body="stages", batch_c=()),
    EntryPoint(
        "constraint_residuals",
        """The constraint residuals f_c and f_v at (t, q, u, p).""",
        (T, Q, U, P,
         Parameter("f_c", "output", "double *", (("nc",), ("one",)), True, "f_c(q, t)"),
         Parameter("f_v", "output", "double *", (("nv",), ("one",)), True, "f_v(q, u, t)")),
        family=None, stages=("residuals",)),
    EntryPoint(
        "complete_point",
        """Complete an operating point in place: the dependent coordinates of
        q by Newton's method on f_c (starting from the values in q) until
        |f_c|_inf <= tol, at most max_iter iterations; then the dependent
        speeds of u from f_v = 0 (exact: f_v is linear in u). The independent
        entries are not changed.""",
        (T,
         Parameter("q", "in_out", "double *", (("nq",), ("one",)), doc="coordinates, completed in place"),
         Parameter("u", "in_out", "double *", (("nu",), ("one",)), doc="speeds, completed in place"),
         P, DEPENDENT_Q, DEPENDENT_U,
         Parameter("tol", "option", "double", doc="the largest accepted |f_c|_inf"),
         Parameter("max_iter", "option", "int", doc="the most Newton iterations")),
        stages=("residuals", "constraint_jacobians", "partition_conditions"),
        batch="complete_point"),
    EntryPoint(
        "constraint_maps",
        """The constraint Jacobians and a partition's maps at (t, q, u, p):
        J_c = d f_c/d q, J_vq = d f_v/d q, B_v = d f_v/d u, and K_c, K_v, from
        which the admissible perturbations follow exactly: dq = C_0 dq_i,
        du = C_1 dq + C_2 du_i with C_0 = P_qi - P_qd K_c, C_1 = -P_ud K_q,
        C_2 = P_ui - P_ud K_u (K_v = [K_q, K_u]; P_.. the columns of the
        identity of the partition's index sets). The point is not checked
        against the constraints.""",
        (T, Q, U, P, DEPENDENT_Q, DEPENDENT_U,
         Parameter("J_c", "output", "double *", (("nc",), ("nq",)), True, "d f_c/d q", source="J_c"),
         Parameter("J_vq", "output", "double *", (("nv",), ("nq",)), True, "d f_v/d q", source="J_vq"),
         Parameter("B_v", "output", "double *", (("nv",), ("nu",)), True, "d f_v/d u", source="B_v"),
         Parameter("K_c", "output", "double *", (("nc",), ("nqi",)), True,
                   "(J_c P_qd)^-1 J_c P_qi", source="K_c"),
         Parameter("K_v", "output", "double *", (("nv",), ("nq", "nui")), True,
                   "[K_q, K_u] = (B_v P_ud)^-1 [J_vq, B_v P_ui]", source="K_v")),
        stages=("residuals", "constraint_jacobians", "partition"),
        body="stages"),
    EntryPoint(
        "outputs",
        """The outputs y = h(q, qd*, u, ud*, r, t) of the model (its
        Model(..., outputs=...): NOUT of them, named in <model>_y_names) at
        the operating point (t, q, u, r, p), and their linearization
        y = C x + D r on the constraint manifold in the independent states
        x = [q_i, u_i] of the partition, exact: C = H_q C_0 + H_u [C_1 C_0,
        C_2] + H_rates A', D = H_r + H_rates B' (H: the Jacobians of h with
        respect to q, u, [qd; ud; lambda] and r; A', B' as linearize's
        A_full, B_full with the multipliers' rows). C and D come from the
        general path of linearize (any partition); y alone (C and D NULL)
        needs no partition.""",
        POINT + (
            DEPENDENT_Q, DEPENDENT_U, TOL,
            Parameter("y", "output", "double *", (("nout",), ("one",)), True, "y = h at the point"),
            Parameter("C", "output", "double *", (("nout",), ("nx",)), True,
                      "d y/d x on the constraint manifold"),
            Parameter("D", "output", "double *", (("nout",), ("nr",)), True, "d y/d r"),
        ),
        stages=("residuals", "constraint_jacobians", "kinematic_rates", "dynamic_rates", "jacobians",
                "partition", "solution", "outputs")),
    EntryPoint(
        "sensitivities",
        """The parameter sensitivities at (t, q, u, r, p) with a partition:
        the derivatives dA/dp_j, dB/dp_j of linearize's A and B (and the
        outputs' dC/dp_j, dD/dp_j) with respect to each parameter of the
        model's sensitivities (NSENS, in <model>_sensitivity_names; their
        indices in p: <model>_sensitivity_parameters), exact to rounding: the
        forward mode (tangents) of every stage of the linearization. The
        independent coordinates and speeds, r and t are held; the dependent
        coordinates and speeds move with p_j on the constraint manifold
        (J_c dq = -df_c/dp_j, B_v du = -(df_v/dp_j + J_vq dq)), as re-solving
        the point at the new parameter value does. A and B (and C, D) are
        linearize's (outputs'), from the general path (any partition).""",
        POINT + (
            DEPENDENT_Q, DEPENDENT_U, TOL,
            Parameter("steady_tol", "option", "double", doc="unsteady's tolerance (unsteady_states')"),
            Parameter("A", "output", "double *", (("nx",), ("nx",)), True, "linearize's A"),
            Parameter("B", "output", "double *", (("nx",), ("nr",)), True, "linearize's B"),
            Parameter("dA", "output", "double *", (("nsx",), ("nx",)), True,
                      "NSENS x NX x NX: dA/dp_j, j = 0 .. NSENS - 1"),
            Parameter("dB", "output", "double *", (("nsx",), ("nr",)), True,
                      "NSENS x NX x NR: dB/dp_j"),
            Parameter("C", "output", "double *", (("nout",), ("nx",)), True, "the outputs' C"),
            Parameter("D", "output", "double *", (("nout",), ("nr",)), True, "the outputs' D"),
            Parameter("dC", "output", "double *", (("nsy",), ("nx",)), True,
                      "NSENS x NOUT x NX: dC/dp_j"),
            Parameter("dD", "output", "double *", (("nsy",), ("nr",)), True,
                      "NSENS x NOUT x NR: dD/dp_j"),
            Parameter("condition", "output", "double *", (("2",), ("one",)), True,
                      "the partition blocks' condition estimates, as partition_condition(work, 0) "
                      "after linearize"),
            Parameter("unsteady", "output", "int *", (("nx",), ("one",)), True,
                      "the states that are not steady in the partition's chart, as "
                      "unsteady_states(work, NULL, A, NULL, steady_tol) after linearize (A and "
                      "its derivatives depend on the chart where any is)"),
        ),
        family="sensitivity",
        stages=("residuals", "constraint_jacobians", "kinematic_rates", "dynamic_rates", "jacobians",
                "partition", "solution", "outputs", "tangent_seeds", "tangent_kinematic_rates",
                "tangent_dynamic_rates", "tangent_partition", "tangent_solution", "tangent_outputs"),
        batch_c=()),
    EntryPoint(
        "nonfinite_blocks",
        """Which blocks of the equations hold NaN or Inf at (t, q, u, r, p),
        evaluated in the order of a linearization (the constraint check
        skipped; for error messages). flags: one per name of
        <model>_block_names (1: not finite; blocks after a failed solve are
        not reached and stay 0).""",
        POINT + (Parameter("flags", "output", "int *", (("nblocks",), ("one",)), False,
                           "1 for each block that holds NaN or Inf"),),
        stages=("residuals", "constraint_jacobians", "kinematic_rates", "dynamic_rates", "jacobians")),
    EntryPoint(
        "linearize_local",
        """The local state-space form (Spencer's name) at (t, q, u, r, p),
        defined at regular and singular configurations alike. With
        orthonormal bases N_q of the null space of J_c (NQ - rank_c columns)
        and N_u of that of B_v (NU - rank_v), the admissible perturbations
        are dq = N_q y, du = N_u z + C_1 dq, C_1 = -B_v^+ J_vq, and
        x = [y, z] obeys d x/dt = A x + B r.
        The chart (which linearization A is, where the point is not an
        equilibrium): where J_c and B_v have full rank, a partition's: the
        model's default where its blocks are well conditioned (condition
        estimate at most 1 / CONDITION_RTOL), else the pivot columns of a
        column-pivoted QR (automatic_partition's choice). A is that
        partition's linearization (linearize's A for it) in the bases
        N_q = C_0 L_q^-T, N_u = C_2 L_u^-T (the Gram-Schmidt
        orthonormalization of the partition's independent directions, in
        their order; smooth along a path): A = G A_p G^-1, the same
        eigenvalues, at steady motions too. Where a rank dropped (no
        partition exists), the null spaces' from SVDs, with qd*, ud* and the
        multipliers the minimum-norm (pseudo-inverse) solution: the rates of
        all coordinates and speeds projected onto the null spaces.
        Outputs are packed row-major with nx = (NQ - ranks[0]) + (NU -
        ranks[1]) columns in buffers of the largest size.""",
        POINT + (
            RANK_TOL, TOL,
            Parameter("A", "output", "double *", (("ns",), ("ns",)), True, "nx x nx", packed=True),
            Parameter("B", "output", "double *", (("ns",), ("nr",)), True, "nx x NR", packed=True),
            Parameter("T", "output", "double *", (("ns",), ("ns",)), True,
                      "the embedding [dq; du] = T x: NS x nx = [[N_q, 0], [C_1 N_q, N_u]]",
                      packed=True),
            RANKS,
            Parameter("chart", "output", "int *", (("nc", "nv"), ("one",)), True,
                      "the dependent coordinates, then speeds (ascending) of the chart's "
                      "partition; all -1 in the null spaces' chart"),
            Parameter("sigma", "output", "double *", (("nc", "nv"), ("one",)), True,
                      "the singular values of J_c (NC, decreasing), then of B_v (NV); two "
                      "small SVDs where the chart came from straight-line code: NULL when not "
                      "needed"),
        ),
        family="local",
        stages=("residuals", "constraint_jacobians", "kinematic_rates", "dynamic_rates", "jacobians",
                "partition", "solution", "local_chart", "constraint_svds", "null_space_rates",
                "default_conditions", "chart_partition", "partition_rates", "null_space_chart"),
        batch="linearize_local",
        batch_c=(Parameter("width", "option", "int",
                           doc="the states a row holds: rows of A width x width, B width x NR, T "
                               "NS x width, unsteady width; each point's packed with its own nx "
                               "(a point with nx > width: status WIDTH). NX holds every regular "
                               "point, NS every point"),
                 Parameter("steady_tol", "option", "double", doc="for unsteady"),
                 Parameter("unsteady", "output", "int *", (("ns",), ("one",)), True,
                           "unsteady_states(work, NULL, A, T, steady_tol) after each point "
                           "(width entries, those beyond nx 0)"))),
    EntryPoint(
        "outputs_local",
        """The outputs y = h(q, qd*, u, ud*, r, t) at (t, q, u, r, p) and their
        linearization y = C x + D r in the states x of the local form
        (linearize_local's at the same point and rank_tol: its chart, its
        bases, its nx). In a partition's chart, C = C_p H and D = D_p with
        C_p, D_p the outputs' linearization in that partition (as outputs
        gives it) and H the rows of the embedding T at its independent
        states (x_p = H x); in the null spaces' chart, C = H_q T_q + H_u T_u
        + H_rates A', D = H_r + H_rates B', with T = [T_q; T_u] and A', B'
        the rates of all coordinates, speeds and the minimum-norm
        multipliers in its states, as linearize_local's. C is packed with
        nx = (NQ - ranks[0]) + (NU - ranks[1]) columns.""",
        POINT + (
            RANK_TOL, TOL,
            Parameter("y", "output", "double *", (("nout",), ("one",)), True, "y = h at the point"),
            Parameter("C", "output", "double *", (("nout",), ("ns",)), True,
                      "NOUT x nx: d y/d x in the local states", packed=True),
            Parameter("D", "output", "double *", (("nout",), ("nr",)), True, "d y/d r"),
            RANKS,
            Parameter("chart", "output", "int *", (("nc", "nv"), ("one",)), True,
                      "as linearize_local's"),
        ),
        family="local",
        stages=("residuals", "constraint_jacobians", "kinematic_rates", "dynamic_rates", "jacobians",
                "partition", "solution", "local_chart", "constraint_svds", "null_space_rates",
                "default_conditions", "chart_partition", "partition_rates", "null_space_chart",
                "outputs", "local_chart_outputs", "local_outputs")),
    EntryPoint(
        "constraint_singular_values",
        """The singular values of J_c and B_v at (t, q, u, p), and the ranks
        as linearize_local decides them; the same numbers as linearize_local's
        sigma, evaluating only the constraints.""",
        (T, Q, U, P, RANK_TOL, RANKS,
         Parameter("sigma", "output", "double *", (("nc", "nv"), ("one",)), False,
                   "the singular values of J_c (NC, decreasing), then of B_v (NV)"),
         Parameter("U_c", "output", "double *", (("nc",), ("nc",)), True,
                   "the left singular vectors of J_c (columns, in the order of its singular "
                   "values; complete: those of the zero ones span the dependent combinations "
                   "of f_c's rows); one more SVD: NULL when not needed"),
         Parameter("U_v", "output", "double *", (("nv",), ("nv",)), True,
                   "... of B_v")),
        family="local", stages=("residuals", "constraint_jacobians", "constraint_singular_values",
                                "constraint_row_spaces")),
    EntryPoint(
        "automatic_partition",
        """The automatic partition at (t, q, u, p), NC and NV entries,
        ascending. keep_default = 1 (a chart, as linearize_local takes it):
        for the coordinates and the speeds separately, the model's default
        where its block J_c P_qd (B_v P_ud) is well conditioned (condition
        estimate at most 1 / CONDITION_RTOL), else the pivot columns of a
        column-pivoted QR of J_c (B_v), the best-conditioned dependent set
        there: a path keeps the model's chart wherever it can.
        keep_default = 0: the pivot columns at every point (e.g. to complete
        a point). RANK_DEFICIENT when J_c or B_v has lost rank (ranks tells;
        the arrays then hold the rank pivots followed by -1).""",
        (T, Q, U, P, RANK_TOL,
         Parameter("keep_default", "option", "int", doc="1: keep the model's default where "
                                                          "well conditioned; 0: pivot columns"),
         Parameter("dependent_q", "output", "int *", (("nc",), ("one",)), False,
                   "the chosen dependent coordinates"),
         Parameter("dependent_u", "output", "int *", (("nv",), ("one",)), False,
                   "the chosen dependent speeds"),
         RANKS),
        family="local", stages=("residuals", "constraint_jacobians", "default_conditions",
                                "constraint_singular_values", "chart_partition"),
        batch=None),
    EntryPoint(
        "linearize_descriptor",
        """The linearized descriptor form E w' = A w + B r (González et al.,
        eqs. 7-8, index-reduced, with stabilizing multipliers), defined at
        every point. It is in the chart of all coordinates and speeds: its
        finite generalized eigenvalues are those of linearize and
        linearize_local at equilibria and at motions steady in all
        coordinates and speeds (see unsteady_states). Variables w = [dq (NQ),
        du (NU), dlambda (NL), mu (NC), nu (NV)]; rows: kinematic (NQ),
        dynamic (NW - NV), acceleration constraints (NV), position (NC),
        velocity (NV).""",
        POINT + (
            RANK_TOL, TOL,
            Parameter("E", "output", "double *", (("ndesc",), ("ndesc",)), False),
            Parameter("A", "output", "double *", (("ndesc",), ("ndesc",)), False),
            Parameter("B", "output", "double *", (("ndesc",), ("nr",)), False),
            RANKS),
        family="full",
        stages=("residuals", "constraint_jacobians", "constraint_svds", "kinematic_rates",
                "null_space_rates", "jacobians", "descriptor"),
        batch="linearize_descriptor"),
    EntryPoint(
        "equilibrium",
        """An equilibrium or steady motion near (q, u), in place: Gauss-Newton
        with minimum-norm steps on R = [f_c; f_v; the independent
        accelerations of the chart], the chart linearize_local takes at the
        first point (a partition's at a regular point: the accelerations of
        its independent speeds, so the motion found is steady there; the null
        spaces' where a rank dropped: N_u^T ud*). No unknown changes by more
        than max_step in one iteration (<= 0: no bound); the step is halved
        until |R| decreases. Converged when max|R| <= tol, or where no step
        decreases |R| and max|R| is at the rounding level of the equations
        there (ROUNDING_FACTOR eps times the largest row of |dR/dx| |x|);
        NO_PROGRESS where no step decreases |R| above that level;
        NO_CONVERGENCE after max_iter iterations (q and u hold the last
        iterate: call again to continue).""",
        (T,
         Parameter("q", "in_out", "double *", (("nq",), ("one",)), doc="coordinates, solved in place"),
         Parameter("u", "in_out", "double *", (("nu",), ("one",)), doc="speeds, solved in place"),
         R, P,
         Parameter("vary_q", "flags", "const int *", (("nq",), ("one",)), True,
                   "1 for the coordinates solved for (NULL: all)"),
         Parameter("vary_u", "flags", "const int *", (("nu",), ("one",)), True,
                   "1 for the speeds solved for (NULL: none; the speeds are held)"),
         RANK_TOL,
         Parameter("tol", "option", "double", doc="the largest accepted max|R|"),
         Parameter("max_step", "option", "double", doc="the largest change of an unknown per iteration"),
         Parameter("max_iter", "option", "int", doc="the most iterations"),
         Parameter("iterations", "output", "int *", (("1",), ("one",)), True, "iterations made"),
         Parameter("residual", "output", "double *", (("1",), ("one",)), True, "the last max|R|"),
         Parameter("rounding", "output", "double *", (("1",), ("one",)), True,
                   "the rounding level of R at the last iterate")),
        family="full",
        stages=("residuals", "constraint_jacobians", "constraint_svds", "kinematic_rates",
                "null_space_rates", "jacobians", "default_conditions", "chart_partition",
                "equilibrium_residual",
                "equilibrium_jacobian", "equilibrium"),
        batch="equilibrium"),
    EntryPoint(
        "unsteady_states",
        """Steadiness, after linearize (with A as it returned it, or NULL),
        linearize_local (A and T as returned; needed in the null spaces'
        chart only) or linearize_descriptor (E and A) with this workspace:
        flags each essential state of the result's chart whose rate is not
        zero (above steady_tol times the largest rate, at least 1), and
        returns their count (-1: no result to check). A point that is not
        steady in the chart is no equilibrium of its linearized equations:
        the eigenvalues of A then depend on the chart and do not describe
        stability. The chart's states: linearize's and the local form's
        partition chart, the partition's independent states x = [q_i, u_i]
        (NX flags); the local form's null spaces' chart, its nx states; the
        descriptor form, all coordinates and speeds (NS flags). A state is
        ignorable (never flagged) when no equation depends on it but those of
        ignorable states (a position, a heading, a wheel angle: its column of
        A is zero), repeatedly; the others are essential, and a steady motion
        keeps them constant.""",
        (Parameter("E", "option", "const double *", optional=True),
         Parameter("A", "option", "const double *", optional=True),
         Parameter("T", "option", "const double *", optional=True),
         Parameter("steady_tol", "option", "double"),
         Parameter("unsteady", "output", "int *", (("ns",), ("one",)), False)),
        batch=None, workspace_first=True),
    EntryPoint(
        "partition_condition",
        """After linearize or complete_point with this workspace: estimates of
        the condition of J_c P_qd and B_v P_ud (the Jacobian's largest entry
        over the smallest LU pivot; 1 without constraints, +Inf where
        singular, NaN where the call failed before it factorized the block).
        Large values (say above 1e6) mean about log10(condition) digits of
        the result are at risk: choose other dependent coordinates or use
        linearize_local.""",
        (Parameter("estimate", "option", "int",
                   doc="1: make the estimates the straight-line code did not need; 0: report "
                       "those as 0 (its static pivots passed CONDITION_RTOL: well conditioned)"),
         Parameter("condition", "output", "double *", (("2",), ("one",)), False)),
        stages=("partition_conditions",), batch=None, returns="void", workspace_first=True),
)

BY_NAME = {entry.name: entry for entry in ENTRY_POINTS}


def signature(entry, model):
    """The C parameter list of an entry point (its workspace last, or first)."""
    params = [f"{p.ctype}{'' if p.ctype.endswith('*') else ' '}{p.name}" for p in entry.parameters]
    if entry.family:
        work = f"{model}_{FAMILIES[entry.family][0]} *work"
        params = [work] + params if entry.workspace_first else params + [work]
    return ", ".join(params)


def batch_parameters(entry):
    """The C parameters of ``<model>_<entry>_batch`` beyond the count ``n``
    and before ``status`` and the batch workspace: each input of a point as
    a pointer and a stride (in its elements, 0: one shared row), the options
    shared, the outputs in rows of the points, then the row's ``batch_c``."""
    params = []
    for p in entry.parameters:
        if p.role == "time":
            params += ["const double *t", "int t_stride"]
        elif p.role == "point":
            params += [f"{p.ctype}{p.name}", f"int {p.name}_stride"]
        else:
            params.append(f"{p.ctype}{'' if p.ctype.endswith('*') else ' '}{p.name}")
    params += [f"{p.ctype}{'' if p.ctype.endswith('*') else ' '}{p.name}" for p in entry.batch_c]
    return params


def batch_signature(entry, model):
    """The C parameter list of ``<model>_<entry>_batch``."""
    return ", ".join(["int n", *batch_parameters(entry), "int *status", f"{model}_batch_workspace *work"])


def forwarded(entry, model):
    """The arguments by which ``codegen_<entry>`` (codegen-table.c) calls
    ``<model>_<entry>``: its parameters, the workspace cast to the model's type."""
    names = [p.name for p in entry.parameters]
    if entry.family:
        work = f"({model}_{FAMILIES[entry.family][0]} *)work"
        names = [work] + names if entry.workspace_first else names + [work]
    return ", ".join(names)


def forwarded_batch(entry, model):
    """The arguments by which ``codegen_<entry>_batch`` calls ``<model>_<entry>_batch``."""
    names = [re.split(r"[ *]", parameter)[-1] for parameter in batch_parameters(entry)]
    return ", ".join(["n", *names, "status", f"({model}_batch_workspace *)work"])


FAMILY_ORDER = tuple(FAMILIES)


def workspace_layout(stages, evaluated):
    """The workspace of each family, from the stages its entry points run.

    ``stages``: the procedure's stages; ``evaluated``: the arrays the
    symbolic blocks and rates are evaluated into (always in the base
    workspace). An array belongs to the smallest family one of whose entry
    points runs a stage that uses it; a stage's looped function takes the
    workspace of the largest family among its arrays (so calling it with a
    smaller one does not compile). Returns (arrays: family -> names in
    ARRAYS order, stage_family: stage -> family, array_family: name ->
    family)."""
    from .procedure import ARRAYS, step_arrays

    by_name = {stage.name: stage for stage in stages}
    rank = {family: k for k, family in enumerate(FAMILY_ORDER)}
    array_family = {name: "base" for name in evaluated}
    for family in FAMILY_ORDER:
        for entry in ENTRY_POINTS:
            if (entry.family or "base") != family:
                continue
            for stage in entry.stages:
                for step in by_name[stage].steps:
                    for name in sorted(step_arrays(step)):
                        array_family.setdefault(name, family)
    stage_family = {}
    for stage in stages:
        used = [array_family.get(name) for step in stage.steps for name in step_arrays(step)]
        if None in used:
            missing = sorted({name for step in stage.steps for name in step_arrays(step)
                             if name not in array_family})
            raise ValueError(f"the stage {stage.name} uses {', '.join(missing)}, which no entry "
                             "point's stages list: add the stage to the entry points that run it")
        stage_family[stage.name] = max(used, key=rank.get, default="base")
    arrays = {family: [name for name in ARRAYS if array_family.get(name) == family]
              for family in FAMILY_ORDER}
    return arrays, stage_family, array_family


def _size_text(terms):
    text = " + ".join("1" if t == "one" else t.upper() for t in terms)
    return f"({text})" if len(terms) > 1 else text


def shape_text(parameter):
    """``NX x NX``, ``NQ`` (a vector), ``NS x nx`` for packed outputs."""
    rows, cols = parameter.shape
    if cols == ("one",):
        return _size_text(rows)
    return f"{_size_text(rows)} x {_size_text(cols)}"


def entry_doc(entry, width=80):
    """The header's comment of an entry point (the lines inside /* */)."""
    import textwrap

    lines = textwrap.wrap(" ".join(entry.doc.split()), width - 3)
    lines.append("")
    for p in entry.parameters:
        if p.role == "time":
            what = p.doc
        elif p.is_array and p.shape:
            what = shape_text(p) + (", or NULL" if p.optional else "")
            what += f": {p.doc}" if p.doc else ""
        else:
            what = p.doc + (" (may be NULL)" if p.optional and p.is_array else "")
        label = p.name + (" (out)" if p.role == "output" else " (in/out)" if p.role == "in_out" else "")
        text = textwrap.wrap(what, width - 22) or [""]
        lines.append(f"  {label:<16} {text[0]}".rstrip())
        lines += [" " * 19 + line for line in text[1:]]
    if entry.stages:
        lines.append("")
        lines += textwrap.wrap("Stages (codegen/procedure.py): " + ", ".join(entry.stages) + ".",
                               width - 3)
    return "\n".join(f" * {line}".rstrip() for line in lines)


CYTHON_WORKSPACES = {family: type_ for family, (type_, _) in FAMILIES.items()}


def pyx_signature(entry):
    """The parameter list of an entry point as the Cython declaration has it
    (the workspaces are the kernel's opaque types)."""
    params = [f"{p.ctype}{'' if p.ctype.endswith('*') else ' '}{p.name}" for p in entry.parameters]
    if entry.family:
        work = f"{CYTHON_WORKSPACES[entry.family]} *work"
        params = [work] + params if entry.workspace_first else params + [work]
    return ", ".join(params)


def pyx_batch_signature(entry):
    """The parameter list of ``<model>_<entry>_batch`` as the Cython
    declaration has it."""
    return ", ".join(["int n", *batch_parameters(entry), "int *status", "batch_workspace *work"])


def pyx_argument(parameter):
    """The parameter of a generated batch loop (codegen's kernel) that feeds
    this C parameter: rows of a batch for arrays, a scalar for options."""
    p = parameter
    if p.role in ("point",):
        return f"const double[:, ::1] {p.name}"
    if p.role == "in_out":
        return f"double[:, ::1] {p.name}"
    if p.role in ("partition", "flags"):
        return f"const int[::1] {p.name}"
    if p.role == "output":
        return f"{'int' if p.is_int else 'double'}[:, ::1] {p.name}"
    return f"{p.ctype} {p.name}"


def pyx_pass(parameter):
    """The C argument of point i in a generated batch loop."""
    p = parameter
    if p.role == "point":
        return f"row({p.name}, i)"
    if p.role in ("in_out",):
        return f"out({p.name}, i)"
    if p.role in ("partition", "flags"):
        return f"indices({p.name})"
    if p.role == "output":
        return f"{'iout' if p.is_int else 'out'}({p.name}, i)"
    return p.name


def size_expression(terms):
    """A size tuple as an expression of the kernel's size constants."""
    return " + ".join("1" if t == "one" else t.upper() if t.isalpha() else t for t in terms) or "0"


# the size constants of a model (header macros <NAME>_<SIZE>), in the kernel too
SIZE_NAMES = ("nq", "nu", "nr", "np", "nc", "nv", "nqi", "nui", "nx", "nw", "nl", "ns", "nd", "ndesc",
              "nblocks", "nout", "nsens", "nsx", "nsy")


def stage_guards(entry, stages, evaluated_by):
    """For an entry point whose body is ``"stages"``: stage -> the C condition
    under which it runs (``""``: always): a stage runs where an output it or a
    later stage of the entry point writes is asked for (not NULL), so that
    asking for less costs less (the constraint Jacobians without a partition's
    maps: no factorization, which a singular configuration would fail).
    ``evaluated_by``: stage of evaluation -> the arrays it writes."""
    from .procedure import step_writes

    by_name = {stage.name: stage for stage in stages}
    writer = {}
    for k, name in enumerate(entry.stages):
        stage = by_name[name]
        arrays = set(evaluated_by.get(stage.evaluates or "", ()))
        for step in stage.steps:
            arrays |= step_writes(step)
        for array in arrays:
            writer[array] = k
    needed_after = {p.name: writer[p.source] for p in entry.outputs}
    guards = {}
    for k, name in enumerate(entry.stages):
        outputs = [p for p in entry.outputs if needed_after[p.name] >= k]
        if any(not p.optional for p in outputs):
            guards[name] = ""
        else:
            guards[name] = " || ".join(p.name for p in outputs) or "0"
    return guards
