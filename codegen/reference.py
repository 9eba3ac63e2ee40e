"""SymPy's own routes to A and B of a KanesMethod, as references.

Shared by the tests (tests/reference.py re-exports it) and the benchmark
(:mod:`codegen.bench.sympy_routes`). Nothing here uses codegen's derivation or
generated code: everything comes from SymPy's ``KanesMethod`` and ``Linearizer``.

* :meth:`KaneReference.linearizer_AB` -- SymPy's ``Linearizer``
  (``kane.to_linearizer()``, then ``linearize(op_point=..., A_and_B=True)``) at
  a fully numeric operating point: q, u, their time derivatives qd and ud
  (given, or computed here from the equations, see
  :meth:`KaneReference.state_derivative`), inputs r (and their derivatives,
  zero), parameters and time t.
* :meth:`KaneReference.lambdified_AB` and :meth:`KaneReference.lambdified_MAB`
  -- the symbolic ``linearize(A_and_B=True)`` (A, B), or ``A_and_B=False`` (M,
  A, B, solved numerically per point), lambdified once.
* :meth:`KaneReference.constrained_fd_AB` -- constrained central finite
  differences: perturb one independent coordinate, speed or input, re-solve
  the dependent coordinates (Newton on f_c) and the dependent speeds (linear
  solve of f_v), and evaluate the state derivative from SymPy's
  ``mass_matrix_full`` and ``forcing_full`` (lambdified, NumPy solve). By
  default Richardson extrapolation of two central differences (h = 1e-4 and
  5e-5) makes it accurate to about 1e-9 relative, far below the 1e-6 the
  tests ask for, unless the partition is close to singular (the dependent
  coordinates then vary fast with the independent ones).
* :meth:`KaneReference.local_state_space`, :meth:`KaneReference.descriptor`,
  :meth:`KaneReference.equilibrium`, :meth:`KaneReference.automatic_partition`
  -- the reference of the rank-revealing half of the procedure: the
  multiplier form ``F + B_v^T lambda = 0`` with F the
  unconstrained Kane equations of the same bodies and loads (a second
  ``KanesMethod``), SVDs of J_c and B_v at the point, minimum-norm
  multipliers, the local state-space form in the null-space coordinates
  (Spencer's thesis, ch. 3), a regular index-reduced descriptor form
  (González et al., eqs. 7-8) and Gauss-Newton equilibria.
  :meth:`KaneReference.local_chart_fd` checks the local form by finite
  differences in its chart, from SymPy's reduced equations.

SymPy pitfalls found on the way (SymPy 1.14), worked around here:

1. ``KanesMethod.to_linearizer`` counts twice every term that contains none
   of the variables it splits by.  Kinematic equations: it forms
   ``f_0 = f_k|_{u=0} + k_kqdot qd`` and ``f_1 = f_k|_{qd=0} + k_ku u``, but
   KanesMethod's ``f_k`` is exactly the part free of qd and u, so ``f_0 + f_1``
   holds ``2 f_k`` and ``A_qq = -d(f_0 + f_1)/dq`` counts ``d f_k/dq`` twice.
   Dynamic equations: ``f_2 = Fr*|_{qd=u=0}`` and ``f_3 = Fr*|_{ud=0} + Fr``
   both hold the part of ``Fr*`` free of qd, u and ud, so ``A_uqd`` counts its
   q-derivative twice.  Both happen with rheonomic speeds, e.g. velocities
   relative to a frame turning at a prescribed rate
   (tests/user_models/rotating_wire.py: ``f_k = omega x r`` and centripetal
   terms ``m omega^2 r`` in ``Fr*``).  :func:`make_linearizer` removes the
   duplicates (``fix_double_count=True``, the default of the tests), so that
   ``f_0 + f_1`` and ``f_2 + f_3`` are the kinematic and dynamic residuals;
   tests/test_user_models.py shows the unpatched Linearizer disagreeing with
   constrained finite differences there. (The benchmark times the unpatched
   one, as users call it.)
2. ``to_linearizer`` sorts the inputs with ``default_sort_key``; the helper
   reorders them to the model's declared inputs so B's columns match.
3. The state order of SymPy's A is [q_ind, u_ind] in the KanesMethod's order
   (``kane.q`` is q_ind + q_dep).  For another partition the Linearizer's
   ``q_i, q_d, u_i, u_d`` are replaced before its (lazy) setup, keeping the
   model's order within q_i and u_i, as codegen's ``independent_state_names``.
   But ``sympy.physics.mechanics.linearize.permutation_matrix(orig, per)``
   returns the transpose of the matrix its docstring promises
   (``orig == P * per`` fails for a 3-cycle), so a Linearizer whose
   ``q_i + q_d`` is not ``q`` in order is wrong (for the disk with q2
   dependent it even reports a singular ``J_c P_qd``).  The helper therefore
   also reorders the Linearizer's ``q``, ``u`` to [independent, dependent].

SymPy's private attributes are read through :mod:`codegen.sympy_adapter`.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import sympy as sm
from sympy.physics.mechanics import dynamicsymbols, msubs

from . import subexpressions
from . import sympy_adapter as adapter
from .partition import complement


class PlainSymbols:
    """Plain symbols for the dynamic symbols of a KanesMethod (lambdify takes no
    functions of time): t, q, u, qd, ud, r (with r' = 0) and the parameters."""

    def __init__(self, q, u, inputs, parameters):
        t = dynamicsymbols._t
        self.t = sm.Symbol("t_")
        self.q = list(sm.symbols(f"q_0:{len(q)}")) if q else []
        self.u = list(sm.symbols(f"u_0:{len(u)}")) if u else []
        self.qd = list(sm.symbols(f"qd_0:{len(q)}")) if q else []
        self.ud = list(sm.symbols(f"ud_0:{len(u)}")) if u else []
        self.r = list(sm.symbols(f"r_0:{len(inputs)}")) if inputs else []
        self.p = list(parameters)
        self.mapping = {qi.diff(t): s for qi, s in zip(q, self.qd)}
        self.mapping.update({ui.diff(t): s for ui, s in zip(u, self.ud)})
        self.mapping.update({ri.diff(t): sm.S.Zero for ri in inputs})
        self.mapping.update(zip(q, self.q))
        self.mapping.update(zip(u, self.u))
        self.mapping.update(zip(inputs, self.r))
        self.mapping[t] = self.t
        # arguments of the lambdified right-hand side and of the linearization
        self.rhs_args = [self.t, self.q, self.u, self.r, self.p]
        self.linearization_args = [self.t, self.q, self.u, self.qd, self.ud, self.r, self.p]

    def lambdify(self, args, matrices, label):
        """``sympy.lambdify(args, matrices, cse=True)`` after replacing the
        dynamic symbols; refuses symbols that are not among ``args``. The
        replacement and the check visit each distinct subexpression once, and
        lambdify gets a list (no walk of the trees for the namespace's
        symbols) without implemented functions (``use_imps=False``: none
        would be printable as C anyway): on the bicycle's mass_matrix_full and
        forcing_full the tree walks cost minutes."""
        allowed = {args[0]}.union(*map(set, args[1:]))
        done = {}
        plain = [subexpressions.replace(m, self.mapping, done) for m in matrices]
        extra = subexpressions.free_symbols(plain) - allowed
        if extra:
            raise ValueError(f"{label} holds symbols that are neither states, inputs nor "
                             f"parameters: {sorted(map(str, extra))}")
        function = sm.lambdify(args, plain, "numpy", cse=True, use_imps=False)
        if len(plain) > 1:
            return function
        return lambda *values: function(*values)[0]


class KaneReference:
    """Numeric functions of a KanesMethod, from SymPy's own matrices.

    ``parameters`` maps symbols to default values (the codegen Model's dict);
    ``inputs`` the input dynamic symbols in B's column order (default: SymPy's
    Linearizer order). The symbolic right-hand side and its lambdified
    functions are formed on first use (:meth:`equations`, :meth:`functions`).
    """

    def __init__(self, kane, parameters, inputs=None):
        t = dynamicsymbols._t
        self.kane = kane
        self.t = t
        self.q = list(kane.q)
        self.u = list(kane.u)
        self.qd = [qi.diff(t) for qi in self.q]
        self.ud = [ui.diff(t) for ui in self.u]
        self.q_dep = adapter.dependent_coordinates(kane)
        self.u_dep = adapter.dependent_speeds(kane)
        self.parameters = list(parameters)
        self.default_p = np.array([float(v) for v in parameters.values()])
        if inputs is None:
            fr, frstar = adapter.fr_frstar(kane)
            states = set(self.q) | set(self.u) | set(self.qd) | set(self.ud)
            inputs = sorted(subexpressions.dynamic_symbols([fr + frstar], exclude=states),
                            key=sm.default_sort_key)
        self.inputs = list(inputs)
        self.nq, self.nu, self.nr = len(self.q), len(self.u), len(self.inputs)
        self.nc, self.nv = len(self.q_dep), len(self.u_dep)
        self.plain = PlainSymbols(self.q, self.u, self.inputs, self.parameters)
        self._linearizers = {}
        self._equations = self._functions = None

    @classmethod
    def from_model(cls, model):
        """The reference of a codegen Model's KanesMethod, parameters and inputs."""
        return cls(model.kane, dict(zip(model.parameters, model.parameter_values)), model.inputs)

    # -- SymPy's equations, symbolic and lambdified --------------------------------------
    def equations(self):
        """SymPy's ``mass_matrix_full``, ``forcing_full`` (qd replaced by the
        kinematic equations if they hold any), f_c, J_c = df_c/dq, f_v, B_v = df_v/du
        (formed once)."""
        if self._equations is not None:
            return self._equations
        mass, forcing = self.kane.mass_matrix_full, self.kane.forcing_full
        if subexpressions.dynamic_symbols([forcing, mass],
                                          exclude=set(self.q) | set(self.u) | set(self.inputs)):
            kindiff = self.kane.kindiffdict()
            mass, forcing = msubs(mass, kindiff), msubs(forcing, kindiff)
        f_c = adapter.configuration_constraints(self.kane)
        f_v = adapter.velocity_constraints(self.kane)
        self._equations = SimpleNamespace(
            mass_full=mass, forcing_full=forcing, f_c=f_c, f_v=f_v,
            J_c=f_c.jacobian(self.q) if self.nc else sm.zeros(0, self.nq),
            B_v=f_v.jacobian(self.u) if self.nv else sm.zeros(0, self.nu))
        return self._equations

    def functions(self):
        """The :meth:`equations` lambdified (once): each takes (t, q, u, r, p)."""
        if self._functions is None:
            args = self.plain.rhs_args
            self._functions = SimpleNamespace(**{name: self.plain.lambdify(args, [matrix], name)
                                                 for name, matrix in vars(self.equations()).items()})
        return self._functions

    # -- arguments ---------------------------------------------------------------
    def _args(self, q, u=None, r=None, p=None, t=0.0):
        u = np.zeros(self.nu) if u is None else np.asarray(u, float)
        r = np.zeros(self.nr) if r is None else np.asarray(r, float)
        p = self.default_p if p is None else np.asarray(p, float)
        return float(t), list(np.asarray(q, float)), list(u), list(r), list(p)

    def partition(self, dependent_q=None, dependent_u=None):
        """Index arrays (dq, qi, du, ui) of a partition (indices or names),
        default the kane's."""
        dq = [self.q.index(s) for s in self.q_dep] if dependent_q is None else \
            self._indices(dependent_q, self.q)
        du = [self.u.index(s) for s in self.u_dep] if dependent_u is None else \
            self._indices(dependent_u, self.u)
        qi = complement(self.nq, dq)
        ui = complement(self.nu, du)
        return dq, qi, du, ui

    def state_names(self, dependent_q=None, dependent_u=None):
        dq, qi, du, ui = self.partition(dependent_q, dependent_u)
        return tuple([_name(self.q[i]) for i in qi] + [_name(self.u[i]) for i in ui])

    # -- numeric functions ---------------------------------------------------------
    def state_derivative(self, q, u, r=None, p=None, t=0.0):
        """(qd, ud) from SymPy's mass_matrix_full and forcing_full: the kinematic
        equations, the constrained dynamic equations and the acceleration
        constraints, solved numerically."""
        args = self._args(q, u, r, p, t)
        M = np.asarray(self.functions().mass_full(*args), float)
        F = np.asarray(self.functions().forcing_full(*args), float).ravel()
        x = np.linalg.solve(M, F)
        return x[:self.nq], x[self.nq:]

    def residuals(self, q, u, p=None, t=0.0):
        args = self._args(q, u, None, p, t)
        return (np.asarray(self.functions().f_c(*args), float).ravel(),
                np.asarray(self.functions().f_v(*args), float).ravel())

    def complete(self, q, u, p=None, t=0.0, dependent_q=None, dependent_u=None, tol=1e-14):
        """Dependent coordinates by Newton's method on f_c (from the given
        values), then dependent speeds by a linear solve of f_v."""
        dq, qi, du, ui = self.partition(dependent_q, dependent_u)
        f = self.functions()
        q = np.array(q, float)
        u = np.array(u, float)
        for _ in range(60):
            args = self._args(q, u, None, p, t)
            f_c = np.asarray(f.f_c(*args), float).ravel()
            if not len(f_c) or np.max(np.abs(f_c)) <= tol:
                break
            J = np.asarray(f.J_c(*args), float)
            q[dq] -= np.linalg.solve(J[:, dq], f_c)
        else:
            raise RuntimeError(f"Newton on f_c did not converge: {f_c}")
        if self.nv:
            args = self._args(q, np.where(np.isin(np.arange(self.nu), du), 0.0, u), None, p, t)
            B = np.asarray(f.B_v(*args), float)
            rest = np.asarray(f.f_v(*args), float).ravel()   # f_v with u_d = 0
            u[du] = np.linalg.solve(B[:, du], -rest)
        return q, u

    def independent_derivative(self, x, r, p, t, dependent_q=None, dependent_u=None, q0=None):
        """d/dt of the independent states x = [q_i, u_i] on the constraint
        manifold: dependents re-solved from f_c, f_v (Newton from q0)."""
        dq, qi, du, ui = self.partition(dependent_q, dependent_u)
        q = np.array(q0, float)
        q[qi] = x[:len(qi)]
        u = np.zeros(self.nu)
        u[ui] = x[len(qi):]
        q, u = self.complete(q, u, p, t, dq, du)
        qd, ud = self.state_derivative(q, u, r, p, t)
        return np.concatenate([qd[qi], ud[ui]])

    def constrained_fd_AB(self, q, u, r=None, p=None, t=0.0, dependent_q=None,
                          dependent_u=None, h=1e-4, richardson=True):
        """(A, B) by constrained central differences with step h; with
        ``richardson``, one Richardson step D = (4 D(h/2) - D(h))/3, error O(h^4)."""
        dq, qi, du, ui = self.partition(dependent_q, dependent_u)
        r = np.zeros(self.nr) if r is None else np.asarray(r, float)
        q = np.asarray(q, float)
        u = np.asarray(u, float)
        x0 = np.concatenate([q[qi], u[ui]])

        def f(x, rr):
            return self.independent_derivative(x, rr, p, t, dq, du, q0=q)

        def central(g, n, step):
            cols = []
            for j in range(n):
                e = np.zeros(n)
                e[j] = step
                cols.append((g(e) - g(-e)) / (2 * step))
            return np.array(cols).T if cols else np.zeros((len(x0), 0))

        def derivative(g, n):
            if not richardson:
                return central(g, n, h)
            return (4 * central(g, n, h / 2) - central(g, n, h)) / 3

        A = derivative(lambda e: f(x0 + e, r), len(x0))
        B = derivative(lambda e: f(x0, r + e), self.nr)
        return A, B.reshape(len(x0), self.nr)

    # -- SymPy's Linearizer ---------------------------------------------------------
    def op_point(self, q, u, r=None, p=None, t=0.0, rates=None):
        """A fully numeric operating point for ``Linearizer.linearize``: q, u,
        qd and ud (``rates``, else computed from all the equations), r and r'
        (zero), parameters and t."""
        r = np.zeros(self.nr) if r is None else np.asarray(r, float)
        p = self.default_p if p is None else np.asarray(p, float)
        qd, ud = self.state_derivative(q, u, r, p, t) if rates is None else rates
        point = {}
        point.update(zip(self.qd, map(sm.Float, qd)))
        point.update(zip(self.ud, map(sm.Float, ud)))
        point.update(zip(self.q, map(sm.Float, q)))
        point.update(zip(self.u, map(sm.Float, u)))
        point.update({ri.diff(self.t): sm.Float(0) for ri in self.inputs})
        point.update(zip(self.inputs, map(sm.Float, r)))
        point.update(zip(self.parameters, map(sm.Float, p)))
        point[self.t] = sm.Float(t)
        return point

    def linearizer(self, dependent_q=None, dependent_u=None, fix_double_count=True):
        """``kane.to_linearizer()`` (cached) with B's columns in :attr:`inputs`
        order, for another partition if one is given (indices)."""
        key = (None if dependent_q is None else tuple(dependent_q),
               None if dependent_u is None else tuple(dependent_u), fix_double_count)
        if key not in self._linearizers:
            partition = {}
            if dependent_q is not None or dependent_u is not None:
                dq, qi, du, ui = self.partition(dependent_q, dependent_u)
                partition = dict(q_i=[self.q[i] for i in qi], q_d=[self.q[i] for i in dq],
                                 u_i=[self.u[i] for i in ui], u_d=[self.u[i] for i in du])
            self._linearizers[key] = make_linearizer(
                self.kane, inputs=self.inputs, fix_double_count=fix_double_count, **partition)
        return self._linearizers[key]

    def linearizer_state_names(self, dependent_q=None, dependent_u=None):
        """Names of the states of SymPy's A, read off the Linearizer's own
        permutation: x = perm_mat^T [q; u]."""
        return tuple(_name(s) for s in
                     adapter.linearizer_states(self.linearizer(dependent_q, dependent_u)))

    def linearizer_AB(self, q, u, r=None, p=None, t=0.0, dependent_q=None, dependent_u=None,
                      fix_double_count=True, rates=None, numeric_solve=False):
        """(A, B) of SymPy's Linearizer at the numeric :meth:`op_point`.
        ``numeric_solve``: its M, A~ and B~ (``A_and_B=False``) solved by
        NumPy, where SymPy's own solve (``A_and_B=True``, an LU of M with the
        point substituted) pivots on rounding noise."""
        lin = self.linearizer(dependent_q, dependent_u, fix_double_count)
        if numeric_solve:
            M, A, B = lin.linearize(op_point=self.op_point(q, u, r, p, t, rates), A_and_B=False)
            nx = A.shape[1]
            A_full, B_full = self._solved(lin, M.evalf(), _with_inputs(M, A, B).evalf(), nx)
            return A_full[:nx], B_full[:nx]
        A, B = lin.linearize(op_point=self.op_point(q, u, r, p, t, rates), A_and_B=True)
        nx = A.shape[0]
        A = np.array(A.evalf(), dtype=float).reshape(nx, nx)
        B = np.array(B.evalf(), dtype=float).reshape(nx, self.nr) if self.nr else np.zeros((nx, 0))
        return A, B

    def lambdified_AB(self, A, B):
        """Symbolic A, B of ``linearize(A_and_B=True)`` lambdified:
        ``f(t, q, u, qd, ud, r, p) -> (A, B)`` as arrays."""
        nx = A.shape[0]
        B = B if B.shape[1] else sm.zeros(nx, 0)
        function = self.plain.lambdify(self.plain.linearization_args, [A, B], "A, B")

        def evaluate(*args):
            a, b = function(*args)
            return np.asarray(a, dtype=float), np.asarray(b, dtype=float).reshape(nx, self.nr)
        return evaluate

    def lambdified_MAB(self, lin, M, A, B):
        """Symbolic M, A, B of ``lin.linearize(A_and_B=False)`` lambdified, and
        solved per point: ``f(t, q, u, qd, ud, r, p) -> (A, B)`` as arrays."""
        function = self.plain.lambdify(self.plain.linearization_args, [M, _with_inputs(M, A, B)], "M, A, B")

        def evaluate(*args):
            return self._solved(lin, *function(*args), A.shape[1])
        return evaluate

    def _solved(self, lin, m, ab, nx):
        """(A, B) in every state, x = perm_mat^T M^-1 [A~, B~], from numeric
        M and [A~, B~] of ``lin``."""
        x = np.array(lin.perm_mat.T, dtype=float) @ np.linalg.solve(np.asarray(m, dtype=float),
                                                                   np.asarray(ab, dtype=float))
        return x[:, :nx], x[:, nx:nx + self.nr]


    # -- multiplier form, local state-space form, descriptor form, equilibria ------------
    #
    # The reference of the rank-revealing half (codegen/procedure.py describes what
    # the generated C does; this is an independent route to the same numbers).
    # Everything below is NumPy on SymPy's equations: the unconstrained Kane
    # equations of the same bodies and loads (:meth:`multiplier_equations`),
    # lambdified once, and NumPy's SVDs at the point. See :meth:`local_state_space`
    # for the formulation, :meth:`descriptor` for the descriptor form,
    # :meth:`equilibrium`.

    def multiplier_equations(self):
        """The equations of the multiplier form in plain symbols (formed once).

        * ``f_k(q, qd, u, t)`` (n): the kinematic equations as the user wrote
          them (``k_kqdot qd + k_ku u + f_k``), linear in qd;
        * ``f_c(q, t)`` (l), ``f_v(q, u, t)`` (m, linear in u);
        * ``f_a = J_vq qd + B_v ud + d f_v/d t`` (m): the acceleration
          constraints, the total time derivative of f_v;
        * ``F(q, qd, u, ud, r, t)`` (o): Kane's equations ``Fr + Fr*`` of the
          same bodies and loads with *every* speed independent (a new
          ``KanesMethod`` without constraints, given the user's solved
          kinematic equations ``qd = qd(q, u)`` so that nothing is solved
          again); the kane's own ``Fr + Fr*`` when there are no velocity
          constraints. The dynamics of the constrained system are
          ``g = F + B_v^T lambda = 0`` with m multipliers lambda;
        * their Jacobians: ``M_qq = d f_k/d qd``, ``A_qq = -d f_k/d q``,
          ``A_qu = -d f_k/d u``; ``J_c``, ``J_vq = d f_v/d q``, ``B_v = d f_v/d u``;
          ``fa_q = d f_a/d q``, ``fa_u = d f_a/d u`` (``d f_a/d qd = J_vq``,
          ``d f_a/d ud = B_v``); ``M_d = d F/d ud``, ``g_q = d g/d q`` (holds
          the curvature term ``d(B_v^T lambda)/d q``), ``g_qd``, ``g_u``, ``g_r``;
          ``Bt_q = d(B_v^T lambda)/d q`` alone (for :meth:`equilibrium`).

        Returns a namespace with the symbols (``t, q, qd, u, ud, lam, r, p``) and
        a dict ``blocks`` name -> Matrix.
        """
        cached = getattr(self, "_multiplier_equations", None)
        if cached is not None:
            return cached
        plain = self.plain
        lam = list(sm.symbols(f"lam_0:{self.nv}")) if self.nv else []

        def to_plain(matrix):
            return sm.Matrix(matrix).xreplace(plain.mapping)

        eq = self.equations()
        f_k = to_plain(adapter.kinematic_equations(self.kane))
        f_c = to_plain(eq.f_c) if self.nc else sm.zeros(0, 1)
        f_v = to_plain(eq.f_v) if self.nv else sm.zeros(0, 1)
        F = to_plain(self._unconstrained_kane_equations())
        q, qd, u, ud, r = plain.q, plain.qd, plain.u, plain.ud, plain.r

        def jac(matrix, symbols, rows=None):
            rows = matrix.shape[0] if rows is None else rows
            if not rows or not symbols:
                return sm.zeros(rows, len(symbols))
            return matrix.jacobian(symbols)

        J_c = jac(f_c, q)
        J_vq = jac(f_v, q)
        B_v = jac(f_v, u)
        if self.nv:
            f_a = J_vq * sm.Matrix(qd) + B_v * sm.Matrix(ud) + f_v.diff(plain.t)
            g = F + B_v.T * sm.Matrix(lam)
        else:
            f_a, g = sm.zeros(0, 1), F
        if any(e.has(*ud) for e in f_k) or any(e.has(*qd) for e in jac(f_k, qd)):
            raise ValueError("the kinematic equations must be linear in qd and free of ud")
        blocks = {
            "f_k": f_k, "M_qq": jac(f_k, qd), "A_qq": -jac(f_k, q), "A_qu": -jac(f_k, u),
            "f_c": f_c, "J_c": J_c,
            "f_v": f_v, "J_vq": J_vq, "B_v": B_v,
            "f_a": f_a, "fa_q": jac(f_a, q), "fa_u": jac(f_a, u),
            "F": F, "M_d": jac(F, ud), "g_q": jac(g, q), "g_qd": jac(g, qd), "g_u": jac(g, u),
            "g_r": jac(g, r, self.nu),
            "Bt_q": jac(B_v.T * sm.Matrix(lam), q, self.nu) if self.nv else sm.zeros(self.nu, self.nq),
        }
        if any(e.has(*ud) for e in blocks["M_d"]):
            raise ValueError("the dynamic equations must be linear in ud")
        args = [plain.t, q, qd, u, ud, lam, r, plain.p]
        allowed = {plain.t}.union(q, qd, u, ud, lam, r, plain.p)
        extra = set().union(*(m.free_symbols for m in blocks.values())) - allowed
        if extra:
            raise ValueError("the equations hold symbols that are neither states, inputs nor "
                             f"parameters: {sorted(map(str, extra))}")
        self._multiplier_equations = SimpleNamespace(
            t=plain.t, q=q, qd=qd, u=u, ud=ud, lam=lam, r=r, p=plain.p, args=args, blocks=blocks)
        return self._multiplier_equations

    def _unconstrained_kane_equations(self):
        """``Fr + Fr*`` (o rows, dynamic symbols) with every speed independent."""
        fr, frstar = adapter.fr_frstar(self.kane)
        if not self.nv:
            return fr + frstar
        if self.kane.bodies is None or self.kane.loads is None:
            raise ValueError("the multiplier form needs the KanesMethod's bodies and loads "
                             "(pass them to kanes_equations)")
        from sympy.physics.mechanics import KanesMethod

        qd_of_u = self.kane.kindiffdict()
        explicit = [qdi - qd_of_u[qdi] for qdi in self.qd]

        def solved(matrix, rhs):            # d(qd - qd(q, u))/d qd = I: nothing to solve
            assert matrix == sm.eye(matrix.shape[0])
            return rhs

        free = KanesMethod(adapter.inertial_frame(self.kane), q_ind=self.q, u_ind=self.u,
                           kd_eqs=explicit, kd_eqs_solver=solved)
        fr, frstar = free.kanes_equations(self.kane.bodies, self.kane.loads)
        return fr + frstar

    def _multiplier_blocks(self):
        """The :meth:`multiplier_equations` lambdified (once):
        ``f(t, q, qd, u, ud, lam, r, p) -> dict name -> array``."""
        cached = getattr(self, "_multiplier_function", None)
        if cached is not None:
            return cached
        eqs = self.multiplier_equations()
        names = [name for name, m in eqs.blocks.items() if m.shape[0] and m.shape[1]]
        shapes = {name: m.shape for name, m in eqs.blocks.items()}
        function = sm.lambdify(eqs.args, [eqs.blocks[name] for name in names], "numpy", cse=True)

        def evaluate(t, q, qd, u, ud, lam, r, p):
            values = function(float(t), *(list(map(float, v)) for v in (q, qd, u, ud, lam, r, p)))
            out = {name: np.zeros(shape) for name, shape in shapes.items()}
            for name, value in zip(names, values):
                out[name] = np.asarray(value, dtype=float).reshape(shapes[name])
            for name in ("f_k", "f_c", "f_v", "f_a", "F"):
                out[name] = out[name].ravel()
            return SimpleNamespace(**out)

        self._multiplier_function = evaluate
        return evaluate

    def operating_blocks(self, q, u, r=None, p=None, t=0.0, rank_tol=None):
        """Everything the local and the descriptor forms need at one point.

        1. ``qd*`` from the kinematic equations: ``M_qq qd* = -f_k(q, 0, u)``.
        2. SVDs ``J_c = U_c S_c V_c^T``, ``B_v = U_v S_v V_v^T``; rank = number of
           singular values above ``rank_tol * sigma_max`` (default
           :data:`DEFAULT_RANK_TOL`; rank 0 if the matrix is zero). Orthonormal
           null-space bases ``N_q = V_c[:, rank_c:]``, ``N_u = V_v[:, rank_v:]``,
           pseudo-inverses ``J_c^+``, ``B_v^+`` from the kept singular values,
           projectors ``P_c = I - J_c J_c^+``, ``P_v = I - B_v B_v^+`` onto the
           left null spaces (zero at regular points).
        3. ``ud*`` and ``lambda*`` from the KKT system ``M_d ud + B_v^T lambda = -F0``,
           ``B_v ud = -fa0`` (``F0``, ``fa0``: F and f_a at qd*, ud = 0), in its
           minimum-norm solution: ``ud* = -B_v^+ fa0 + N_u W^-1 N_u^T (M_d B_v^+ fa0 - F0)``
           with ``W = N_u^T M_d N_u``, and ``lambda* = -(B_v^+)^T (M_d ud* + F0)``
           (the minimum-norm multipliers: no component in the left null space of
           B_v). ``kkt_residual`` is the largest residual of the two equations
           (nonzero only where the point is inconsistent at a singular configuration).
        4. Every Jacobian block of :meth:`multiplier_equations` at
           ``(q, qd*, u, ud*, lambda*, r, p, t)``.
        """
        tol = DEFAULT_RANK_TOL if rank_tol is None else float(rank_tol)
        evaluate = self._multiplier_blocks()
        q = np.asarray(q, float)
        u = np.zeros(self.nu) if u is None else np.asarray(u, float)
        r = np.zeros(self.nr) if r is None else np.asarray(r, float)
        p = self.default_p if p is None else np.asarray(p, float)
        n, o, m = self.nq, self.nu, self.nv
        zq, zu, zl = np.zeros(n), np.zeros(o), np.zeros(m)
        b = evaluate(t, q, zq, u, zu, zl, r, p)
        qd = np.linalg.solve(b.M_qq, -b.f_k)
        b = evaluate(t, q, qd, u, zu, zl, r, p)
        c = _rank_revealing(b.J_c, tol)
        v = _rank_revealing(b.B_v, tol)
        M_d, F0, fa0 = b.M_d, b.F, b.f_a
        W = v.N.T @ M_d @ v.N
        particular = -v.pinv @ fa0
        ud = particular + v.N @ np.linalg.solve(W, v.N.T @ (-F0 - M_d @ particular))
        lam = -v.pinv.T @ (M_d @ ud + F0)
        kkt = np.concatenate([M_d @ ud + F0 + b.B_v.T @ lam, b.B_v @ ud + fa0])
        blocks = evaluate(t, q, qd, u, ud, lam, r, p)
        return SimpleNamespace(
            q=q, u=u, r=r, p=p, t=float(t), qd=qd, ud=ud, lam=lam, rank_tol=tol,
            kkt_residual=float(np.abs(kkt).max()) if kkt.size else 0.0,
            svd_c=c, svd_v=v, W=W, blocks=blocks)

    def _acceleration_map(self, point):
        """The linearized minimum-norm KKT solve as matrices:
        ``delta ud = G_q delta q + G_u delta u + G_r delta r`` for any delta q,
        delta u (not only admissible ones), and ``delta qd = Q_q delta q + Q_u delta u``.

        Linearized equations at the point (``delta qd`` from the kinematics):

            M_d delta ud + B_v^T delta lambda = rho_d
                = -(g_q + g_qd Q_q) delta q - (g_u + g_qd Q_u) delta u - g_r delta r
            B_v delta ud = rho_a = -(fa_q + J_vq Q_q) delta q - (fa_u + J_vq Q_u) delta u

        solved as at the point: ``delta ud = S_a rho_a + S_d rho_d`` with
        ``S_d = N_u W^-1 N_u^T``, ``S_a = (I - S_d M_d) B_v^+``.
        """
        b, v = point.blocks, point.svd_v
        Q_q = np.linalg.solve(b.M_qq, b.A_qq)
        Q_u = np.linalg.solve(b.M_qq, b.A_qu)
        R_dq = -(b.g_q + b.g_qd @ Q_q)
        R_du = -(b.g_u + b.g_qd @ Q_u)
        R_dr = -b.g_r
        R_aq = -(b.fa_q + b.J_vq @ Q_q)
        R_au = -(b.fa_u + b.J_vq @ Q_u)
        S_d = v.N @ np.linalg.solve(point.W, v.N.T)
        S_a = (np.eye(self.nu) - S_d @ b.M_d) @ v.pinv
        return SimpleNamespace(Q_q=Q_q, Q_u=Q_u, G_q=S_a @ R_aq + S_d @ R_dq,
                               G_u=S_a @ R_au + S_d @ R_du, G_r=S_d @ R_dr)

    def local_state_space(self, q, u, r=None, p=None, t=0.0, rank_tol=None, partition=None,
                          chart="auto"):
        """The local state-space form at (q, u, r, p, t): A, B in orthonormal
        coordinates of the admissible perturbations at the point (Spencer's
        thesis, ch. 3: y = V_2^T q; here also for the speeds), defined at
        regular and singular points alike.

        **Chart** (``chart``): ``"auto"`` (the default,
        as the generated C): where J_c and B_v have full rank, a partition's
        chart written in orthonormal bases: the model's default partition
        where its blocks are well conditioned (:func:`_well_conditioned`),
        else the pivoted one (:meth:`automatic_partition`); N_q, N_u the
        orthonormalization (QR with a positive R diagonal) of that
        partition's C_0 and C_2, and A = G A_p G^-1, B = G B_p with A_p, B_p
        the selection chart of that partition below (Peterson's A) and G the
        map of its states to y = N_q^T delta q, z = N_u^T delta u. Where a
        rank drops, and always with ``chart="null space"``: the null spaces'
        chart below, whose A differs from every partition's at points that
        are not steady in it.

        **Equations** (all o speeds, multiplier form; :meth:`multiplier_equations`):
        kinematics ``f_k(q, qd, u, t) = 0`` (n), dynamics
        ``g = F(q, qd, u, ud, r, t) + B_v(q, t)^T lambda = 0`` (o), constraints
        ``f_c = 0`` (l), ``f_v = 0`` (m), acceleration constraints ``f_a = 0`` (m).

        **At the point** (:meth:`operating_blocks`): qd* from the kinematics;
        SVDs of J_c and B_v with rank ``rank_c``, ``rank_v`` by singular values
        above ``rank_tol * sigma_max`` (default :data:`DEFAULT_RANK_TOL`);
        orthonormal bases ``N_q`` (n x (n - rank_c)) of null(J_c) and ``N_u``
        (o x (o - rank_v)) of null(B_v) (the trailing right singular vectors);
        pseudo-inverses from the kept singular values; ud* and the
        **minimum-norm multipliers** lambda* from the KKT system
        ``M_d ud + B_v^T lambda = -F0``, ``B_v ud = -fa0`` (F0, fa0: F and f_a
        at (q, qd*, u, ud = 0); ``M_d = dF/d ud`` is minus Kane's mass matrix)
        in its minimum-norm solution

            ud* = -B_v^+ fa0 + N_u W^-1 N_u^T (M_d B_v^+ fa0 - F0),  W = N_u^T M_d N_u
            lambda* = -(B_v^+)^T (M_d ud* + F0)

        (unique at regular points; where B_v loses rank, the pseudo-inverse
        multipliers, as González takes them at the singular four-bar). Every
        Jacobian is then taken at (q, qd*, u, ud*, lambda*). Needed: M_qq and
        W invertible (a mass matrix positive definite on null(B_v)).

        **Admissible perturbations** (the local coordinates x = [y; z]):

            delta q = N_q y
            delta u = N_u z + C_1 delta q,    C_1 = -B_v^+ J_vq

        ``C_1 delta q`` is the part of delta u forced by ``d f_v/d q delta q``:
        the minimum-norm solution of ``B_v delta u = -J_vq delta q`` (exact at
        regular points; a least-squares solution where B_v has lost rank and
        ``J_vq delta q`` leaves its range). ``T = [[N_q, 0], [C_1 N_q, N_u]]``
        (``embedding``) maps x to [delta q; delta u]. At regular points x are
        the coordinates of the chart ``y = N_q^T q``, ``z = N_u^T u`` (N_q, N_u
        fixed at the point; q, u completed from f_c, f_v), and A, B below are
        exactly the Jacobians of the equations of motion in that chart.

        **Linearized dynamics**:

            delta qd = Q_q delta q + Q_u delta u,  Q_q = M_qq^-1 A_qq, Q_u = M_qq^-1 A_qu
            M_d delta ud + B_v^T delta lambda = rho_d = -(g_q + g_qd Q_q) delta q
                                        - (g_u + g_qd Q_u) delta u - g_r delta r
            B_v delta ud = rho_a = -(fa_q + J_vq Q_q) delta q - (fa_u + J_vq Q_u) delta u

        (g_q = dF/dq + d(B_v^T lambda*)/dq holds the multipliers' curvature
        term). Projection: delta ud = B_v^+ rho_a + N_u zeta, and the
        dynamics premultiplied by N_u^T (which removes delta lambda, whatever
        the multipliers' increments are) give

            zeta = W^-1 N_u^T (rho_d - M_d B_v^+ rho_a),    W = N_u^T M_d N_u.

        **Result**: ``y' = N_q^T delta qd``, ``z' = N_u^T delta ud = zeta``:

            A = [[N_q^T (Q_q + Q_u C_1) N_q,  N_q^T Q_u N_u],
                 [N_u^T (G_q + G_u C_1) N_q,  N_u^T G_u N_u]]
            B = [[0], [W^-1 N_u^T (-g_r)]]

        with ``delta ud = G_q delta q + G_u delta u + G_r delta r`` the two
        linearized equations above solved as the KKT system at the point
        (:meth:`_acceleration_map`): ``G_x = S_a R_ax + S_d R_dx`` for the
        coefficient matrices R of rho_a and rho_d, ``S_d = N_u W^-1 N_u^T``,
        ``S_a = (I - S_d M_d) B_v^+`` (so N_u^T S_a = -W^-1 N_u^T M_d B_v^+).

        Size ``(n - rank_c) + (o - rank_v)``: the partition-based size at
        regular points, larger where the ranks drop.
        Another orthonormal basis (N_q R_q, N_u R_u) gives the orthogonally
        similar ``diag(R_q, R_u)^T A diag(R_q, R_u)``: the C may use any SVD.
        At equilibria (and wherever the chart transition to a partition's
        chart (q_i, u_i) is stationary) the eigenvalues are those of the
        partition-based A; at other moving points each chart has its own A
        (A_2 = H A_1 H^-1 + H' H^-1, H the Jacobian of the chart transition,
        H' its rate along the motion), like two partitions. E.g. the rolling
        disk upright at speed v: the partition chart (u1, u2, u3 independent)
        gives six zeros and +/-2 sqrt(1 - 3 v^2)/sqrt(5), this chart four zeros,
        the same real pair and +/- i v/sqrt(2) (u4, u6 turn with the spin angle).

        **Selection chart** (``partition``, optional): instead of N_q^T, N_u^T,
        take selected coordinates and speeds as the local coordinates:
        ``partition=(dependent_q, dependent_u)`` (indices or names; rank_c and
        rank_v of them, and the rest must be independent on null(J_c),
        null(B_v)), or ``"auto"`` (:meth:`automatic_partition`). With
        ``S_q``, ``S_u`` the selections of the independent ones:
        ``K_q = N_q (S_q^T N_q)^-1``, ``K_u = N_u (S_u^T N_u)^-1``,
        ``C_1s = (I - K_u S_u^T) C_1``; delta q = K_q y, delta u = K_u z + C_1s delta q,
        ``y' = S_q^T delta qd``, ``z' = S_u^T delta ud``. At a regular point
        with the model's partition this is exactly the partition-based A
        (Peterson's procedure), and it stays defined where the ranks drop
        (then with fewer dependent coordinates than constraints).

        Returns :class:`LocalStateSpace`.
        """
        if chart not in ("auto", "null space"):
            raise ValueError(f"chart must be 'auto' or 'null space', not {chart!r}")
        point = self.operating_blocks(q, u, r, p, t, rank_tol)
        full = point.svd_c.rank == len(point.blocks.J_c) and point.svd_v.rank == len(point.blocks.B_v)
        if partition is None and chart == "auto" and full:
            return self._partition_chart(q, u, r, p, t, rank_tol, point)
        b, c, v = point.blocks, point.svd_c, point.svd_v
        acc = self._acceleration_map(point)
        N_q, N_u = c.N, v.N
        C_1 = -v.pinv @ b.J_vq
        dependent_q = dependent_u = None
        if partition is None:             # orthonormal chart: y = N_q^T q, z = N_u^T u
            K_q, K_u, C = N_q, N_u, C_1
            rows_q, rows_u = N_q.T, N_u.T
        else:                             # selection chart: y = S_q^T q, z = S_u^T u
            if isinstance(partition, str):
                if partition != "auto":
                    raise ValueError(f"partition must be None, 'auto' or (dependent_q, dependent_u), "
                                     f"not {partition!r}")
                dependent_q, dependent_u = self._pivoted_partition(point)
            else:
                dependent_q = self._indices(partition[0], self.q)
                dependent_u = self._indices(partition[1], self.u)
            rows_q = _selection(self.nq, dependent_q, c.rank, "coordinates", N_q)
            rows_u = _selection(self.nu, dependent_u, v.rank, "speeds", N_u)
            K_q = N_q @ np.linalg.inv(rows_q @ N_q)
            K_u = N_u @ np.linalg.inv(rows_u @ N_u)
            C = (np.eye(self.nu) - K_u @ rows_u) @ C_1
        dq_y = K_q                        # delta q per y
        du_y = C @ K_q                    # delta u per y
        A = np.block([[rows_q @ (acc.Q_q @ dq_y + acc.Q_u @ du_y), rows_q @ acc.Q_u @ K_u],
                      [rows_u @ (acc.G_q @ dq_y + acc.G_u @ du_y), rows_u @ acc.G_u @ K_u]])
        B = np.vstack([np.zeros((K_q.shape[1], self.nr)), rows_u @ acc.G_r])
        embedding = np.block([[K_q, np.zeros((self.nq, K_u.shape[1]))], [du_y, K_u]])
        return LocalStateSpace(A=A, B=B, N_q=N_q, N_u=N_u, rank_c=c.rank, rank_v=v.rank,
                               dof=N_u.shape[1], embedding=embedding, C_1=C_1,
                               sigma_c=c.s, sigma_v=v.s, qd=point.qd, ud=point.ud,
                               lam=point.lam, kkt_residual=point.kkt_residual,
                               rank_tol=point.rank_tol, dependent_q=dependent_q,
                               dependent_u=dependent_u,
                               chart="null space" if partition is None else "selection")

    def automatic_partition(self, q, u, r=None, p=None, t=0.0, rank_tol=None):
        """Dependent coordinates and speeds by name: for the coordinates and
        the speeds separately, the model's default where its block is well
        conditioned (:func:`_well_conditioned`), else the pivot columns of a
        column-pivoted QR (Businger-Golub: at each step the column of largest
        remaining norm, the first one on ties) of J_c (B_v), as many as its
        rank (SVD, ``rank_tol``). The complement is independent on null(J_c)
        (null(B_v)) at the point, also where the ranks drop."""
        point = self.operating_blocks(q, u, r, p, t, rank_tol)
        dq, du = self._pivoted_partition(point)
        return [_name(self.q[i]) for i in dq], [_name(self.u[i]) for i in du]

    def _pivoted_partition(self, point):
        b = point.blocks
        default_q, _, default_u, _ = self.partition()
        dependent_q = self._indices(default_q, self.q)
        dependent_u = self._indices(default_u, self.u)
        if not (point.svd_c.rank == len(b.J_c) and _well_conditioned(b.J_c, dependent_q)):
            dependent_q = _pivot_columns(b.J_c, point.svd_c.rank)
        if not (point.svd_v.rank == len(b.B_v) and _well_conditioned(b.B_v, dependent_u)):
            dependent_u = _pivot_columns(b.B_v, point.svd_v.rank)
        return sorted(dependent_q), sorted(dependent_u)

    def _partition_chart(self, q, u, r, p, t, rank_tol, point):
        """The local form in the chart of the partition _pivoted_partition
        chooses, in the orthonormal bases of its C_0 and C_2 (see
        :meth:`local_state_space`)."""
        dependent_q, dependent_u = self._pivoted_partition(point)
        selected = self.local_state_space(q, u, r, p, t, rank_tol, partition=(dependent_q, dependent_u))
        nq_i = selected.embedding.shape[1] - (self.nu - point.svd_v.rank)
        C_0 = selected.embedding[:self.nq, :nq_i]           # K_q of the selection chart
        C_2 = selected.embedding[self.nq:, nq_i:]           # K_u

        def orthonormal(C):
            Q, R = np.linalg.qr(C)
            return Q * np.sign(np.diag(R)) if C.size else Q

        N_q, N_u = orthonormal(C_0), orthonormal(C_2)
        projection = np.block([[N_q.T, np.zeros((N_q.shape[1], self.nu))],
                               [np.zeros((N_u.shape[1], self.nq)), N_u.T]])
        G = projection @ selected.embedding                  # x_local = G x_partition
        H = np.linalg.inv(G)
        return LocalStateSpace(**{**vars(selected), "A": G @ selected.A @ H, "B": G @ selected.B,
                                  "N_q": N_q, "N_u": N_u, "embedding": selected.embedding @ H,
                                  "chart": "partition"})

    def descriptor(self, q, u, r=None, p=None, t=0.0, rank_tol=None):
        """(E, A, B) of the linearized, index-reduced descriptor form
        ``E w' = A w + B delta r`` (González et al., eqs. 7-8, with the
        constraints at velocity and acceleration level and the drift of the
        invariants absorbed by stabilizing multipliers, Gear-Gupta-Leimkuhler style).

        Variables, in this order (size n + o + 2 m + l):

            w = [delta q (n); delta u (o); delta lambda (m); mu (l); nu (m)]

        delta lambda: the increments of the multipliers of ``F + B_v^T lambda = 0``;
        mu, nu: multipliers that keep delta q in null(J_c) and delta u on the
        linearized velocity constraints (zero on the nonlinear motion; they
        absorb the turning of those subspaces along a moving point). Rows
        (blocks as in :meth:`multiplier_equations`, at the point of
        :meth:`operating_blocks`; ``P_c``, ``P_v`` the projectors onto the left
        null spaces of J_c and B_v, zero at regular points):

            kinematic (n):  M_qq dq' = A_qq dq + A_qu du + M_qq J_c^T mu
            dynamic (o):    g_qd dq' + M_d du' = -g_q dq - g_u du - B_v^T dlambda
                                                  + g_qd J_c^T mu + M_d B_v^T nu - g_r dr
            acceleration (m): (I-P_v)(J_vq dq' + B_v du') = (I-P_v)(-fa_q dq - fa_u du
                                  + J_vq J_c^T mu + B_v B_v^T nu) - P_v dlambda
            position (l):   0 = J_c dq + P_c mu
            velocity (m):   0 = (I-P_v)(J_vq dq + B_v du) + P_v nu

        i.e. the linearization of ``f_k(q, q' - J_c^T mu, u) = 0``,
        ``g(q, q' - J_c^T mu, u, u' - B_v^T nu, r, lambda) = 0``,
        ``f_a(q, q' - J_c^T mu, u, u' - B_v^T nu) = 0``, ``f_c = 0``, ``f_v = 0``
        at (q*, qd*, u*, ud*, lambda*, 0, 0). Where J_c or B_v lose rank the
        redundant constraint rows become ``P mu = 0``, ``P nu = 0``,
        ``P dlambda = 0`` (minimum-norm multipliers, as in the local form), so
        the pencil stays regular. Its finite generalized eigenvalues are the
        eigenvalues of :meth:`local_state_space` (its (n - rank_c) + (o - rank_v)
        of them, at every point: on the constraints, dq = N_q y, du = N_u z + C_1 dq,
        and N_q^T, N_u^T of the kinematic and dynamic rows are the local form);
        the other 2 m + l + rank_c + rank_v are infinite. At a static
        equilibrium (u* = 0, f_v = B_v(q) u) with regular J_c, mu = nu = 0 on
        every solution and this is González's RCS linearization (his eq. 8 with
        the multipliers' curvature in the stiffness) with the constraints at
        velocity level instead of position level. (The stabilizing directions
        J_c^T, B_v^T make this the descriptor of the orthonormal chart; the
        finite eigenvalues are chart-independent only where the local form's are.)
        """
        point = self.operating_blocks(q, u, r, p, t, rank_tol)
        b, c, v = point.blocks, point.svd_c, point.svd_v
        n, o, m, l = self.nq, self.nu, self.nv, self.nc
        P_c, P_v = c.P_left, v.P_left
        Rv = np.eye(m) - P_v
        size = n + o + 2 * m + l
        E = np.zeros((size, size))
        A = np.zeros((size, size))
        B = np.zeros((size, self.nr))
        iq, iu = slice(0, n), slice(n, n + o)
        il, imu, inu = (slice(n + o, n + o + m), slice(n + o + m, n + o + m + l),
                        slice(n + o + m + l, size))
        rk, rd, ra = iq, iu, slice(n + o, n + o + m)
        rp, rv = slice(n + o + m, n + o + m + l), slice(n + o + m + l, size)
        # kinematic rows
        E[rk, iq] = b.M_qq
        A[rk, iq], A[rk, iu], A[rk, imu] = b.A_qq, b.A_qu, b.M_qq @ b.J_c.T
        # dynamic rows
        E[rd, iq], E[rd, iu] = b.g_qd, b.M_d
        A[rd, iq], A[rd, iu], A[rd, il] = -b.g_q, -b.g_u, -b.B_v.T
        A[rd, imu], A[rd, inu] = b.g_qd @ b.J_c.T, b.M_d @ b.B_v.T
        B[rd] = -b.g_r
        # acceleration rows
        E[ra, iq], E[ra, iu] = Rv @ b.J_vq, Rv @ b.B_v
        A[ra, iq], A[ra, iu], A[ra, il] = -Rv @ b.fa_q, -Rv @ b.fa_u, -P_v
        A[ra, imu], A[ra, inu] = Rv @ b.J_vq @ b.J_c.T, Rv @ b.B_v @ b.B_v.T
        # position and velocity rows
        A[rp, iq], A[rp, imu] = b.J_c, P_c
        A[rv, iq], A[rv, iu], A[rv, inu] = Rv @ b.J_vq, Rv @ b.B_v, P_v
        return E, A, B

    def descriptor_names(self):
        """Names of the descriptor variables w, in :meth:`descriptor`'s order."""
        return tuple([_name(s) for s in self.q] + [_name(s) for s in self.u]
                     + [f"lambda{i}" for i in range(self.nv)] + [f"mu{i}" for i in range(self.nc)]
                     + [f"nu{i}" for i in range(self.nv)])

    def equilibrium(self, q_guess, u=None, r=None, p=None, t=0.0, fixed=None, tol=1e-12,
                    max_iter=50, free_speeds=None, rank_tol=None):
        """A consistent (q, u) near the guess where the independent
        accelerations vanish: static equilibria (``u=None``: u = 0) or steady
        motions (speeds ``u`` given, held unless named in ``free_speeds``).

        "Independent accelerations" are those of the local state-space form's
        chart, z' = N_u^T ud*: the residual is

            R(q, u) = [f_c(q); f_v(q, u); P_N ud*(q, u)],    P_N = N_u N_u^T

        (the projector onto null(B_v), independent of the basis), with ud* the
        minimum-norm KKT solution of :meth:`operating_blocks`. For a static
        point (u = 0, no rheonomic terms) ``P_N ud* = 0`` is ud* = 0, i.e. the
        projected dynamics ``N_u^T F(q, 0, 0, 0, r) = 0``; a steady motion may
        keep accelerations along the constraint normals (the rolling disk's
        u4, u6 turn with the spin angle). Gauss-Newton with minimum-norm steps
        (``numpy.linalg.lstsq``) on the unknowns: the coordinates not named in
        ``fixed`` (names or indices into q) and the speeds named in
        ``free_speeds``; what the residual does not depend on (ignorable
        coordinates) stays at its guess. Jacobian, from the linearization blocks:

            [[J_c, 0], [J_vq, B_v], [P_N (G_q - Bt_q(a)), P_N G_u]],   a = (B_v^+)^T ud*

        (G: :meth:`_acceleration_map`; ``-P_N Bt_q(a)`` is the derivative of
        the projector applied to ud* where ud* lies in the row space of B_v):
        exact at the solution, so the convergence is quadratic at regular
        points. Converged when ``max |R| <= tol``; raises RuntimeError
        otherwise. Returns (q, u).
        """
        q = np.array(q_guess, float)
        u = np.zeros(self.nu) if u is None else np.array(u, float)
        held_q = set(self._indices(fixed, self.q))
        free_q = [i for i in range(self.nq) if i not in held_q]
        free_u = self._indices(free_speeds, self.u)
        columns = free_q + [self.nq + j for j in free_u]
        evaluate = self._multiplier_blocks()
        residual = None
        for _ in range(max_iter + 1):
            point = self.operating_blocks(q, u, r, p, t, rank_tol)
            b, v = point.blocks, point.svd_v
            P_N = v.N @ v.N.T
            residual = np.concatenate([b.f_c, b.f_v, P_N @ point.ud])
            if np.abs(residual).max() <= tol:
                return q, u
            acc = self._acceleration_map(point)
            a = v.pinv.T @ point.ud
            curvature = evaluate(point.t, q, point.qd, u, point.ud, a, point.r, point.p).Bt_q
            jacobian = np.block([[b.J_c, np.zeros((self.nc, self.nu))],
                                 [b.J_vq, b.B_v],
                                 [P_N @ (acc.G_q - curvature), P_N @ acc.G_u]])
            step = np.linalg.lstsq(jacobian[:, columns], -residual, rcond=None)[0]
            q[free_q] += step[:len(free_q)]
            u[free_u] += step[len(free_q):]
        raise RuntimeError(f"equilibrium: no convergence in {max_iter} iterations, "
                           f"max |residual| = {np.abs(residual).max():.3g}")

    def _indices(self, names, symbols):
        if names is None:
            return []
        labels = [_name(s) for s in symbols]
        out = []
        for item in names:
            if isinstance(item, str):
                if item not in labels:
                    raise ValueError(f"unknown name {item!r}; expected one of {labels}")
                out.append(labels.index(item))
            else:
                out.append(int(item))
        return out

    def local_chart_fd(self, q, u, N_q, N_u, r=None, p=None, t=0.0, h=1e-4):
        """(A, B) by central differences (one Richardson step) of the equations
        of motion in the chart ``y = N_q^T q``, ``z = N_u^T u`` (N_q, N_u fixed):
        q completed from ``N_q^T q = y0 + y`` and f_c = 0 (Newton), u from
        ``N_u^T u = z0 + z`` and f_v = 0 (linear), derivatives from SymPy's
        ``mass_matrix_full``/``forcing_full`` (:meth:`state_derivative`, the
        KanesMethod's own reduced equations: nothing of the multiplier form).
        Regular points only. The check of :meth:`local_state_space` at moving points."""
        f = self.functions()
        q0, u0 = np.asarray(q, float), np.asarray(u, float)
        r0 = np.zeros(self.nr) if r is None else np.asarray(r, float)
        ny, nz = N_q.shape[1], N_u.shape[1]
        y0, z0 = N_q.T @ q0, N_u.T @ u0

        def rates(x, rr):
            qq = q0 + N_q @ x[:ny]
            for _ in range(60):
                args = self._args(qq, u0, None, p, t)
                fc = np.asarray(f.f_c(*args), float).ravel() if self.nc else np.zeros(0)
                res = np.concatenate([N_q.T @ qq - y0 - x[:ny], fc])
                if np.abs(res).max() <= 1e-14:
                    break
                J = np.vstack([N_q.T, np.asarray(f.J_c(*args), float).reshape(self.nc, self.nq)])
                qq = qq - np.linalg.solve(J, res)
            else:
                raise RuntimeError("local_chart_fd: Newton on f_c did not converge")
            args = self._args(qq, np.zeros(self.nu), None, p, t)
            if self.nv:
                Bv = np.asarray(f.B_v(*args), float).reshape(self.nv, self.nu)
                rest = np.asarray(f.f_v(*args), float).ravel()
                uu = np.linalg.solve(np.vstack([N_u.T, Bv]), np.concatenate([z0 + x[ny:], -rest]))
            else:
                uu = N_u @ (z0 + x[ny:])
            qd, ud = self.state_derivative(qq, uu, rr, p, t)
            return np.concatenate([N_q.T @ qd, N_u.T @ ud])

        def derivative(g, size):
            def central(step):
                cols = [(g(step * e) - g(-step * e)) / (2 * step) for e in np.eye(size)]
                return np.array(cols).T if cols else np.zeros((ny + nz, 0))
            return (4 * central(h / 2) - central(h)) / 3

        A = derivative(lambda e: rates(e, r0), ny + nz)
        B = derivative(lambda e: rates(np.zeros(ny + nz), r0 + e), self.nr)
        return A, B.reshape(ny + nz, self.nr)


def make_linearizer(kane, inputs=None, fix_double_count=True, q_i=None, q_d=None, u_i=None, u_d=None):
    """``kane.to_linearizer()`` with the inputs in the given order, optionally
    another partition, and (``fix_double_count``) without SymPy's double
    counting of the terms free of qd, u (and ud) (see the module docstring)."""
    lin = kane.to_linearizer()
    if fix_double_count:
        t = dynamicsymbols._t
        f_k = adapter.solved_kinematic_terms(kane)
        if len(f_k) and any(e != 0 for e in f_k):
            lin.f_1 = lin.f_1 - f_k                # f_k is in f_0 already
        free = dict.fromkeys(list(kane.u) + [qi.diff(t) for qi in kane.q]
                             + [ui.diff(t) for ui in kane.u], 0)
        spurious = msubs(adapter.fr_frstar(kane)[1], free)   # in f_3 already
        if any(e != 0 for e in spurious):
            lin.f_2 = lin.f_2 - spurious
    if inputs is not None:
        # an input the reduced equations do not hold gets a zero column of B
        assert set(lin.r) <= set(inputs), (inputs, lin.r)
        lin.r = sm.Matrix(list(inputs)) if inputs else sm.Matrix()
    if q_i is not None:
        # SymPy's permutation_matrix(orig, per) returns the inverse of the
        # permutation its docstring promises (orig == P per fails unless the
        # permutation is an involution), harmless for the KanesMethod's own
        # partition (q = q_i + q_d, P = I) but wrong for any other.  Reorder the
        # Linearizer's q and u to [independent, dependent], so P = I again.
        adapter.set_linearizer_partition(lin, q_i, q_d, u_i, u_d)
    return lin


def _with_inputs(M, A, B):
    """[A~, B~] of ``Linearizer.linearize(A_and_B=False)`` (B~ with no columns
    where there are no inputs)."""
    return A.row_join(B if B.shape[1] else sm.zeros(M.shape[0], 0))


def linearizer_AB(kane, op_point_dict, A_and_B=True, inputs=None, fix_double_count=True):
    """SymPy's Linearizer at a numeric operating point (a dict holding q, u,
    qd, ud, r, parameters and t): ``(A, B)`` as NumPy arrays, rows and columns
    [q_ind, u_ind] in the KanesMethod's order, B's columns in ``inputs`` order."""
    lin = make_linearizer(kane, inputs, fix_double_count)
    result = lin.linearize(op_point=op_point_dict, A_and_B=A_and_B)
    return tuple(np.array(msubs(m, op_point_dict).evalf(), dtype=float) if m.shape[1]
                 else np.zeros(m.shape) for m in result)


def _name(symbol):
    if isinstance(symbol, sm.Function):
        return symbol.func.__name__
    return str(symbol)


DEFAULT_RANK_TOL = 1e-9
"""Default rank tolerance of the local and descriptor forms, relative to the
largest singular value (of J_c, of B_v)."""


class LocalStateSpace(SimpleNamespace):
    """Result of :meth:`KaneReference.local_state_space`.

    ``A``, ``B``: the local state-space form, x = [y; z] (y: n - rank_c
    coordinate directions, z: o - rank_v speed directions); ``N_q``, ``N_u``:
    the orthonormal null-space bases; ``rank_c``, ``rank_v``: ranks of J_c and
    B_v at the point; ``dof = o - rank_v`` (independent speeds);
    ``embedding`` T: [delta q; delta u] = T x; ``C_1 = -B_v^+ J_vq``;
    ``sigma_c``, ``sigma_v``: singular values; ``qd``, ``ud``, ``lam``: qd*,
    ud* and the minimum-norm multipliers at the point; ``kkt_residual``;
    ``dependent_q``, ``dependent_u``: the selection chart's dependent indices
    (None for the orthonormal chart). With a selection chart, ``embedding``
    holds K_q, K_u and ``C_1`` stays the minimum-norm ``-B_v^+ J_vq``.
    """


def _rank_revealing(matrix, tol):
    """SVD pieces of a (rows x cols) matrix: rank (singular values above tol *
    sigma_max), orthonormal null-space basis N, pseudo-inverse, projector onto
    the left null space."""
    rows, cols = matrix.shape
    if rows == 0:
        return SimpleNamespace(rank=0, s=np.zeros(0), N=np.eye(cols), pinv=np.zeros((cols, 0)),
                               P_left=np.zeros((0, 0)))
    U, s, Vt = np.linalg.svd(matrix, full_matrices=True)
    rank = int(np.sum(s > tol * s[0])) if s.size and s[0] > 0 else 0
    V = Vt.T
    pinv = V[:, :rank] @ np.diag(1.0 / s[:rank]) @ U[:, :rank].T
    left = U[:, rank:]
    return SimpleNamespace(rank=rank, s=s, N=V[:, rank:], pinv=pinv, P_left=left @ left.T)


# a partition block whose condition estimate exceeds this is ill conditioned:
# the generated C's 1 / CONDITION_RTOL (IllConditionedWarning)
ILL_CONDITIONED = 1e4


def _well_conditioned(jacobian, dependent):
    """Whether the block of the ``dependent`` columns of a constraint Jacobian
    is well conditioned in the generated C's sense: its condition estimate,
    the Jacobian's largest absolute entry over the smallest pivot of LU with
    partial pivoting, at most :data:`ILL_CONDITIONED`."""
    block = np.array(jacobian, float)[:, list(dependent)]
    if block.size == 0:
        return True
    n = block.shape[0]
    for k in range(n):                   # LU with partial pivoting: the pivots
        row = k + int(np.argmax(np.abs(block[k:, k])))
        block[[k, row]] = block[[row, k]]
        if block[k, k] == 0.0:
            return False
        block[k + 1:, k:] -= np.outer(block[k + 1:, k] / block[k, k], block[k, k:])
    smallest = np.abs(np.diag(block)).min()
    return np.abs(jacobian).max() / smallest <= ILL_CONDITIONED


def _pivot_columns(matrix, rank):
    """Indices (sorted) of the first ``rank`` pivots of a column-pivoted
    Gram-Schmidt QR of ``matrix``."""
    R = np.array(matrix, float)
    chosen = []
    for _ in range(rank):
        norms = np.linalg.norm(R, axis=0)
        norms[chosen] = -1.0
        j = int(np.argmax(norms))
        chosen.append(j)
        v = R[:, j] / np.linalg.norm(R[:, j])
        R = R - np.outer(v, v @ R)
    return sorted(chosen)


def _selection(size, dependent, rank, label, N, max_condition=1e12):
    """Rows S^T selecting the independent entries; checks that there are
    ``rank`` dependent ones and that S^T N is invertible."""
    dependent = list(dependent)
    if len(dependent) != rank or len(set(dependent)) != rank:
        raise ValueError(f"{rank} dependent {label} needed at this point (the rank), got {dependent}")
    independent = complement(size, dependent)
    rows = np.eye(size)[independent]
    if independent and np.linalg.cond(rows @ N) > max_condition:
        raise ValueError(f"the independent {label} {independent} do not parametrize the null space here")
    return rows


def descriptor_eigenvalues(E, A, count=None, tol=1e-8):
    """Finite generalized eigenvalues of the pencil (A, E) (SciPy's QZ,
    ``scipy.linalg.eig(A, E, homogeneous_eigvals=True)``): the ``count`` of
    smallest |alpha/beta| if given, else those with |beta| > tol |alpha|;
    sorted by imaginary, then real part."""
    import scipy.linalg

    alpha, beta = scipy.linalg.eig(A, E, right=False, homogeneous_eigvals=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(np.abs(beta) > 0, np.abs(alpha) / np.abs(beta), np.inf)
        values = alpha / beta
    if count is not None:
        keep = np.argsort(ratio, kind="stable")[:count]
    else:
        keep = np.nonzero(np.abs(beta) > tol * np.abs(alpha))[0]
    values = values[keep]
    return values[np.lexsort((np.round(values.real, 8), np.round(values.imag, 8)))]
