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
from sympy.physics.mechanics import dynamicsymbols, find_dynamicsymbols, msubs

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
        dynamic symbols; refuses symbols that are not among ``args``."""
        allowed = {args[0]}.union(*map(set, args[1:]))
        plain = [sm.Matrix(m).xreplace(self.mapping) for m in matrices]
        extra = set().union(*(e.free_symbols for m in plain for e in m)) - allowed
        if extra:
            raise ValueError(f"{label} holds symbols that are neither states, inputs nor "
                             f"parameters: {sorted(map(str, extra))}")
        return sm.lambdify(args, plain if len(plain) > 1 else plain[0], "numpy", cse=True)


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
            inputs = sorted(find_dynamicsymbols(fr + frstar, exclude=states), key=sm.default_sort_key)
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
        if find_dynamicsymbols(forcing.row_join(mass),
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
        """Index arrays (dq, qi, du, ui) of a partition, default the kane's."""
        dq = [self.q.index(s) for s in self.q_dep] if dependent_q is None else list(dependent_q)
        du = [self.u.index(s) for s in self.u_dep] if dependent_u is None else list(dependent_u)
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
                      fix_double_count=True, rates=None):
        """(A, B) of SymPy's Linearizer at the numeric :meth:`op_point`."""
        lin = self.linearizer(dependent_q, dependent_u, fix_double_count)
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
        nx = A.shape[1]
        B = B if B.shape[1] else sm.zeros(M.shape[0], 0)
        P_T = np.array(lin.perm_mat.T, dtype=float)
        function = self.plain.lambdify(self.plain.linearization_args, [M, A.row_join(B)], "M, A, B")

        def evaluate(*args):
            m, ab = function(*args)
            x = P_T @ np.linalg.solve(np.asarray(m, dtype=float), np.asarray(ab, dtype=float))
            return x[:, :nx], x[:, nx:nx + self.nr]
        return evaluate


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
