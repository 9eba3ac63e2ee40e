"""Independent reference computations for the linearization of a KanesMethod.

Nothing here uses codegen's derivation or generated code. Two references:

* :func:`linearizer_AB` -- SymPy's own ``Linearizer`` (``kane.to_linearizer()``,
  then ``linearize(op_point=..., A_and_B=True)``) at a fully numeric operating
  point: q, u, their time derivatives qd and ud (computed here from the
  equations, see :meth:`KaneReference.state_derivative`), inputs r (and their
  derivatives, zero), parameters and time t.
* :meth:`KaneReference.constrained_fd_AB` -- constrained central finite
  differences: perturb one independent coordinate, speed or input, re-solve
  the dependent coordinates (Newton on f_c) and the dependent speeds (linear
  solve of f_v), and evaluate the state derivative from SymPy's
  ``mass_matrix_full`` and ``forcing_full`` (lambdified, NumPy solve).
  Richardson extrapolation of two central differences (h = 1e-4 and 5e-5)
  makes it accurate to about 1e-9 relative, far below the 1e-6 the tests ask
  for, unless the partition is close to singular (the dependent coordinates
  then vary fast with the independent ones).

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
   duplicates (``fix_double_count=True``, the default), so that
   ``f_0 + f_1`` and ``f_2 + f_3`` are the kinematic and dynamic residuals;
   tests/test_user_models.py shows the unpatched Linearizer disagreeing with
   constrained finite differences there.
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
"""

from __future__ import annotations

import numpy as np
import sympy as sm
from sympy.physics.mechanics import dynamicsymbols, find_dynamicsymbols, msubs


def capture_kane(module, function="make_model"):
    """Run ``module.function()`` with ``module.Model`` replaced by a recorder;
    returns ``(kane, kwargs)``: the KanesMethod and the keyword arguments
    (parameters, inputs, name, ...) that would have made the codegen Model.

    Works for any model file that does ``from codegen import Model`` (the
    built-in disk and the user models), without codegen seeing the kane.
    """
    captured = {}

    def recorder(kane, parameters=None, inputs=None, **kwargs):
        captured.update(kane=kane, parameters=parameters, inputs=inputs, **kwargs)
        return None

    original = module.Model
    module.Model = recorder
    try:
        getattr(module, function)()
    finally:
        module.Model = original
    kane = captured.pop("kane")
    return kane, captured


class KaneReference:
    """Numeric functions of a KanesMethod, from SymPy's own matrices.

    ``parameters`` maps symbols to default values (the codegen Model's dict);
    ``inputs`` the input dynamic symbols in B's column order (default: SymPy's
    Linearizer order).
    """

    def __init__(self, kane, parameters, inputs=None):
        t = dynamicsymbols._t
        self.kane = kane
        self.t = t
        self.q = list(kane.q)
        self.u = list(kane.u)
        self.qd = [qi.diff(t) for qi in self.q]
        self.ud = [ui.diff(t) for ui in self.u]
        self.q_dep = list(kane._qdep)
        self.u_dep = list(kane._udep)
        self.parameters = list(parameters)
        self.default_p = np.array([float(v) for v in parameters.values()])
        states = set(self.q) | set(self.u) | set(self.qd) | set(self.ud)
        found = sorted(find_dynamicsymbols(kane._fr + kane._frstar, exclude=states),
                       key=sm.default_sort_key)
        self.inputs = list(inputs) if inputs is not None else found
        self.nq, self.nu, self.nr = len(self.q), len(self.u), len(self.inputs)
        self.nc, self.nv = len(self.q_dep), len(self.u_dep)

        # plain symbols for lambdify
        ts = sm.Symbol("t_")
        qs = sm.symbols(f"q_0:{self.nq}")
        us = sm.symbols(f"u_0:{self.nu}")
        rs = sm.symbols(f"r_0:{self.nr}") if self.nr else ()
        plain = dict(zip(self.q, qs)) | dict(zip(self.u, us)) | dict(zip(self.inputs, rs))
        plain[t] = ts
        args = [ts, list(qs), list(us), list(rs), list(self.parameters)]

        def lam(matrix, label):
            matrix = sm.Matrix(matrix)
            left = find_dynamicsymbols(matrix, exclude=set(self.q) | set(self.u) | set(self.inputs))
            assert not left, f"{label} holds {left}"
            return sm.lambdify(args, matrix.xreplace(plain), "numpy", cse=True)

        self._mass_full = lam(kane.mass_matrix_full, "mass_matrix_full")
        self._forcing_full = lam(kane.forcing_full, "forcing_full")
        f_c = sm.Matrix(kane._f_h) if self.nc else sm.zeros(0, 1)
        f_v = (kane._f_nh + kane._k_nh * sm.Matrix(self.u)) if self.nv else sm.zeros(0, 1)
        self._f_c = lam(f_c, "f_c")
        self._J_c = lam(f_c.jacobian(self.q) if self.nc else sm.zeros(0, self.nq), "J_c")
        self._f_v = lam(f_v, "f_v")
        self._B_v = lam(f_v.jacobian(self.u) if self.nv else sm.zeros(0, self.nu), "B_v")
        self._linearizers = {}

    # -- arguments ---------------------------------------------------------------
    def _args(self, q, u=None, r=None, p=None, t=0.0):
        u = np.zeros(self.nu) if u is None else np.asarray(u, float)
        r = np.zeros(self.nr) if r is None else np.asarray(r, float)
        p = self.default_p if p is None else np.asarray(p, float)
        return float(t), list(np.asarray(q, float)), list(u), list(r), list(p)

    def partition(self, dependent_q=None, dependent_u=None):
        """Index arrays (dq, dq_i, du, du_i) of a partition, default the kane's."""
        dq = [self.q.index(s) for s in self.q_dep] if dependent_q is None else list(dependent_q)
        du = [self.u.index(s) for s in self.u_dep] if dependent_u is None else list(dependent_u)
        qi = [i for i in range(self.nq) if i not in dq]
        ui = [i for i in range(self.nu) if i not in du]
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
        M = np.asarray(self._mass_full(*args), float)
        F = np.asarray(self._forcing_full(*args), float).ravel()
        x = np.linalg.solve(M, F)
        return x[:self.nq], x[self.nq:]

    def residuals(self, q, u, p=None, t=0.0):
        args = self._args(q, u, None, p, t)
        return (np.asarray(self._f_c(*args), float).ravel(),
                np.asarray(self._f_v(*args), float).ravel())

    def complete(self, q, u, p=None, t=0.0, dependent_q=None, dependent_u=None, tol=1e-14):
        """Dependent coordinates by Newton's method on f_c (from the given
        values), then dependent speeds by a linear solve of f_v."""
        dq, qi, du, ui = self.partition(dependent_q, dependent_u)
        q = np.array(q, float)
        u = np.array(u, float)
        for _ in range(60):
            args = self._args(q, u, None, p, t)
            f_c = np.asarray(self._f_c(*args), float).ravel()
            if not len(f_c) or np.max(np.abs(f_c)) <= tol:
                break
            J = np.asarray(self._J_c(*args), float)
            q[dq] -= np.linalg.solve(J[:, dq], f_c)
        else:
            raise RuntimeError(f"Newton on f_c did not converge: {f_c}")
        if self.nv:
            args = self._args(q, np.where(np.isin(np.arange(self.nu), du), 0.0, u), None, p, t)
            B = np.asarray(self._B_v(*args), float)
            rest = np.asarray(self._f_v(*args), float).ravel()   # f_v with u_d = 0
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
                          dependent_u=None, h=1e-4):
        """(A, B) by constrained central differences with one Richardson step:
        D = (4 D(h/2) - D(h))/3, error O(h^4)."""
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

        def richardson(g, n):
            return (4 * central(g, n, h / 2) - central(g, n, h)) / 3

        A = richardson(lambda e: f(x0 + e, r), len(x0))
        B = richardson(lambda e: f(x0, r + e), self.nr)
        return A, B.reshape(len(x0), self.nr)

    # -- SymPy's Linearizer ---------------------------------------------------------
    def op_point(self, q, u, r=None, p=None, t=0.0):
        """A fully numeric operating point for ``Linearizer.linearize``: q, u,
        qd and ud (consistent with all the equations), r and r' (zero),
        parameters and t."""
        r = np.zeros(self.nr) if r is None else np.asarray(r, float)
        p = self.default_p if p is None else np.asarray(p, float)
        qd, ud = self.state_derivative(q, u, r, p, t)
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
        key = (tuple(dependent_q or ()), tuple(dependent_u or ()), fix_double_count)
        if key not in self._linearizers:
            dq, qi, du, ui = self.partition(dependent_q, dependent_u)
            self._linearizers[key] = make_linearizer(
                self.kane, inputs=self.inputs, fix_double_count=fix_double_count,
                q_i=[self.q[i] for i in qi], q_d=[self.q[i] for i in dq],
                u_i=[self.u[i] for i in ui], u_d=[self.u[i] for i in du])
        return self._linearizers[key]

    def linearizer_state_names(self, dependent_q=None, dependent_u=None):
        """Names of the states of SymPy's A, read off the Linearizer's own
        permutation: x = perm_mat^T [q; u]."""
        lin = self.linearizer(dependent_q, dependent_u)
        if not lin._setup_done:
            lin._setup()
        x = lin.perm_mat.T * lin.q.col_join(lin.u)
        return tuple(_name(s) for s in x)

    def linearizer_AB(self, q, u, r=None, p=None, t=0.0, dependent_q=None, dependent_u=None,
                      fix_double_count=True):
        lin = self.linearizer(dependent_q, dependent_u, fix_double_count)
        A, B = lin.linearize(op_point=self.op_point(q, u, r, p, t), A_and_B=True)
        nx = (self.nq - self.nc) + (self.nu - self.nv)
        A = np.array(A.evalf(), dtype=float).reshape(nx, nx)
        B = np.array(B.evalf(), dtype=float).reshape(nx, self.nr) if self.nr else np.zeros((nx, 0))
        return A, B


def make_linearizer(kane, inputs=None, fix_double_count=True, q_i=None, q_d=None, u_i=None, u_d=None):
    """``kane.to_linearizer()`` with the inputs in the given order, optionally
    another partition, and (``fix_double_count``) without SymPy's double
    counting of the terms free of qd, u (and ud) (see the module docstring)."""
    lin = kane.to_linearizer()
    if fix_double_count:
        t = dynamicsymbols._t
        if len(kane._f_k) and any(e != 0 for e in kane._f_k):
            lin.f_1 = lin.f_1 - kane._f_k          # f_k is in f_0 already
        free = dict.fromkeys(list(kane.u) + [qi.diff(t) for qi in kane.q]
                             + [ui.diff(t) for ui in kane.u], 0)
        spurious = msubs(kane._frstar, free)       # in f_3 already
        if any(e != 0 for e in spurious):
            lin.f_2 = lin.f_2 - spurious
    if inputs is not None:
        assert set(inputs) == set(lin.r), (inputs, lin.r)
        lin.r = sm.Matrix(list(inputs)) if inputs else sm.Matrix()
    if q_i is not None:
        # SymPy's permutation_matrix(orig, per) returns the inverse of the
        # permutation its docstring promises (orig == P per fails unless the
        # permutation is an involution), harmless for the KanesMethod's own
        # partition (q = q_i + q_d, P = I) but wrong for any other.  Reorder the
        # Linearizer's q and u to [independent, dependent], so P = I again.
        t = dynamicsymbols._t
        lin.q_i, lin.q_d = sm.Matrix(q_i), (sm.Matrix(q_d) if q_d else sm.Matrix())
        lin.u_i, lin.u_d = sm.Matrix(u_i), (sm.Matrix(u_d) if u_d else sm.Matrix())
        lin.q = sm.Matrix(list(q_i) + list(q_d))
        lin.u = sm.Matrix(list(u_i) + list(u_d))
        lin._qd = lin.q.diff(t)
        lin._ud = lin.u.diff(t)
        duplicates = set(lin._qd).intersection(lin.u)
        lin._qd_dup = sm.Matrix([v if v not in duplicates else sm.Dummy() for v in lin._qd])
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


def assert_matrices_close(actual, expected, rtol, label=""):
    """Entrywise |a - e| <= rtol |e| + rtol * max|e| (relative to the matrix scale)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (label, actual.shape, expected.shape)
    scale = max(1.0, float(np.abs(expected).max())) if expected.size else 1.0
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale, err_msg=label)
