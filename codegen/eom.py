"""Equations of motion formed faster than SymPy forms them.

Part of the model stage (:mod:`codegen.model` uses it; so may a model file).
SymPy's ``KanesMethod.kanes_equations`` and ``LagrangesMethod.
form_lagranges_equations`` dominate the build of large models: 12 s for a
32-link chain on a cart, 65 s for the flexible double pendulum with 72
coordinates. This module forms the same equations in a fraction of the time:

:func:`kanes_equations`
    ``kanes_equations(kane, bodies, loads)`` instead of
    ``kane.kanes_equations(bodies, loads)``: the same expressions, term for
    term (it runs SymPy's own algorithm, ``_form_fr`` and ``_form_frstar``,
    step by step; only the dot products of vectors are computed without
    SymPy's matrix machinery, and each product of two vector components is
    computed once for all bodies, see :class:`_Dot`), stored in the
    KanesMethod as SymPy stores them, so ``kane.mass_matrix``,
    ``kane.forcing``, ``kane.to_linearizer()`` and :class:`codegen.Model`
    work unchanged. It also keeps the unconstrained equations (every speed
    independent), which the multiplier form of :class:`codegen.Model` needs:
    ``Model`` then does not form them again.

:func:`unconstrained_kane_dynamics`
    Fr + Fr* of a KanesMethod's system with every speed independent, what
    :class:`codegen.Model` needs for the multiplier form: taken from
    :func:`kanes_equations` if it formed ``kane``, else formed here as a
    second KanesMethod over the bodies and loads would form them, without
    that second KanesMethod.

:func:`lagranges_equations`
    ``lagranges_equations(lagrange)`` instead of
    ``lagrange.form_lagranges_equations()``: Lagrange's equations of the
    Lagrangian, formed with plain symbols and memoized derivatives
    (:mod:`codegen.differentiate`). Equal to SymPy's mathematically, not
    term for term (the mass matrix is the Hessian of L in the rates, the
    forcing the rest of d/dt dL/dq' - dL/dq), stored in the
    LagrangesMethod as SymPy stores them.

Also :func:`kinematic_solver`, a ``kd_eqs_solver`` for ``KanesMethod`` that
skips SymPy's symbolic LU solve where the kinematic equations are q' = u.

The SymPy attributes read and written are all in :mod:`codegen.sympy_adapter`.
"""

from __future__ import annotations

import weakref

import sympy as sm
from sympy.physics.mechanics import Particle, RigidBody, dynamicsymbols, msubs, partial_velocity
from sympy.physics.vector import Vector

from . import sympy_adapter
from .differentiate import Differentiator, TotalDerivative

# kane -> the unconstrained equations kanes_equations formed with it (see _remember)
_UNCONSTRAINED = weakref.WeakKeyDictionary()


class _Dot:
    """``a.dot(b)`` of two Vectors, the same expression SymPy's ``Vector.dot``
    returns, faster.

    SymPy computes every pair of frame components as the matrix product
    ``(m2^T D) m1`` with ``D = f2.dcm(f1)``, through its DomainMatrix
    machinery; forming Kane's equations makes tens of thousands of such
    products, mostly of the same few components (the partial velocity of a
    chain's link is the same vector in every body beyond it). Here each pair
    of components is multiplied once, with the arithmetic of SymPy's sparse
    product (row of ``m2^T D`` first, each entry the ``Add`` of its nonzero
    products in column order, then that row times ``m1``), and the pair's
    result is reused. The sum over pairs is accumulated as ``Vector.dot``
    accumulates it. ``Vector.simp`` and Dyadics go to SymPy's own ``dot``.
    SymPy's sparse product also checks each entry for infinities (``0 * x ==
    0``), which costs an assumptions query per product; no model has them, and
    :func:`kanes_equations` leaves a model with an infinite constant to SymPy.
    """

    def __init__(self):
        self._dcm = {}
        self._pairs = {}

    def __call__(self, a, b):
        if Vector.simp or not isinstance(a, Vector) or not isinstance(b, Vector):
            return a.dot(b)
        out = _Sum()
        for m1, f1 in a.args:
            for m2, f2 in b.args:
                out.add(*self._pair(m1, f1, m2, f2))
        return out.value()

    def _pair(self, m1, f1, m2, f2):
        """``(the product of the pair, whether it is free of Floats)``."""
        key = (tuple(m1), f1, tuple(m2), f2)
        try:
            return self._pairs[key]
        except KeyError:
            pass
        dcm = self._dcm.get((f2, f1))
        if dcm is None:
            matrix = f2.dcm(f1)
            dcm = self._dcm[(f2, f1)] = [[matrix[i, j] for j in range(3)] for i in range(3)]
        left, right = key[2], key[0]
        # row = m2^T D, only where m1 is nonzero (the other entries meet zeros)
        terms = []
        for j in range(3):
            if right[j] == 0:
                continue
            products = [left[k] * dcm[k][j] for k in range(3) if left[k] != 0 and dcm[k][j] != 0]
            if products:
                row_j = sm.Add(*products)
                if row_j:
                    terms.append(row_j * right[j])
        result = sm.Add(*terms) if terms else sm.S.Zero
        self._pairs[key] = result, not result.has(sm.Float)
        return self._pairs[key]


class _Sum:
    """A sum accumulated term by term (``out += term``), formed at the end.

    SymPy's methods add one term at a time, and every ``+`` flattens the sum
    so far again: quadratic in its length. Flattening once gives the same
    expression: ``Add`` collects like terms with their coefficients and
    sorts, whatever the order, except that the coefficients of like terms
    with Float coefficients are rounded in another order; so a sum that
    receives a term with a Float is accumulated as SymPy accumulates it.
    """

    __slots__ = ("terms", "total")

    def __init__(self):
        self.terms = []
        self.total = None            # the sum so far, once a term holds a Float

    def add(self, term, exact=None):
        if term is sm.S.Zero:
            return
        if exact is None:
            exact = not term.has(sm.Float)
        if self.total is None and exact:
            self.terms.append(term)
            return
        if self.total is None:
            self.total = sm.Add(*self.terms) if self.terms else sm.S.Zero
        self.total += term

    def value(self):
        if self.total is not None:
            return self.total
        return sm.Add(*self.terms) if self.terms else sm.S.Zero


# -- Kane's equations ---------------------------------------------------------------------


def kinematic_solver(matrix, rhs):
    """A ``kd_eqs_solver`` for ``KanesMethod``: where the kinematic equations
    are ``q_i' - (...) = 0`` in some order (the matrix of the q' coefficients
    a permutation matrix P), their solution is the right-hand side reordered,
    ``P^T rhs``, which SymPy's default LU solve returns too, after O(n^3)
    symbolic operations (5 s for the 66 speeds of the 32-loop four-bar);
    otherwise SymPy's LU solve::

        KanesMethod(N, q_ind, u_ind, kd_eqs=[qi.diff() - ui for ...],
                    kd_eqs_solver=codegen.eom.kinematic_solver)
    """
    rhs = sm.Matrix(rhs)
    order = _permutation(matrix)
    if order is None:
        return matrix.LUsolve(rhs)
    solution = sm.zeros(*rhs.shape)
    for row, column in enumerate(order):       # matrix[row, column] == 1: x[column] = rhs[row]
        solution[column, :] = rhs[row, :]
    return solution


def _permutation(matrix):
    """``order`` with ``matrix[row, order[row]] == 1`` the only nonzero entries,
    if ``matrix`` is a permutation matrix; else None."""
    if not matrix.is_square:
        return None
    order = []
    for row in range(matrix.rows):
        nonzero = [j for j in range(matrix.cols) if matrix[row, j] != 0]
        if len(nonzero) != 1 or matrix[row, nonzero[0]] != 1:
            return None
        order.append(nonzero[0])
    return order if len(set(order)) == len(order) else None


def kanes_equations(kane, bodies=None, loads=None):
    """``kane.kanes_equations(bodies, loads)``, faster: returns ``(Fr, Fr*)``
    and leaves ``kane`` as SymPy's method leaves it (the same expressions).

    Use it in a model file in place of the method call::

        from codegen.eom import kanes_equations
        kanes_equations(kane, bodies, loads)      # not kane.kanes_equations(bodies, loads)
        return Model(kane, parameters=...)

    On a 32-link chain on a cart this takes 40 % of SymPy's time; with
    velocity constraints :class:`codegen.Model` also reuses the
    unconstrained equations formed on the way (its multiplier form), instead
    of forming them a second time.
    """
    state = sympy_adapter.kane_formation_state(kane)
    if bodies is None:
        bodies = state.bodies
    if loads is None and state.loads is not None:
        loads = state.loads
    if loads == []:
        loads = None
    if not state.k_kqdot:
        raise AttributeError("Create an instance of KanesMethod with kinematic differential "
                             "equations to use this method.")
    if _has_infinities(bodies, loads):
        return kane.kanes_equations(bodies, loads)      # see _Dot: SymPy's own arithmetic
    dot = _Dot()
    fr_all, fr = _form_fr(state, loads, dot)
    frstar_all, frstar, k_d, nonMM = _form_frstar(state, bodies, dot)
    f_d = -(fr - nonMM)
    sympy_adapter.store_kanes_equations(kane, bodies, loads, fr, frstar, k_d, f_d)
    if state.uaux:
        # as kanes_equations: the auxiliary equations from a KanesMethod of the auxiliary speeds
        km = sympy_adapter.auxiliary_kanes_method(kane)
        aux_state = sympy_adapter.kane_formation_state(km)
        _, fraux = _form_fr(aux_state, loads, dot)
        _, frstaraux, aux_k_d, aux_nonMM = _form_frstar(aux_state, bodies, dot)
        sympy_adapter.store_kanes_equations(km, bodies, loads, fraux, frstaraux, aux_k_d,
                                            -(fraux - aux_nonMM))
        fr, frstar = sympy_adapter.store_auxiliary_equations(kane, km, fraux, frstaraux)
    else:
        _remember(kane, state, bodies, loads, fr_all, frstar_all)
    return fr, frstar


def _has_infinities(bodies, loads):
    """Whether a mass, an inertia or a load holds oo, zoo or nan."""
    infinities = (sm.S.Infinity, sm.S.NegativeInfinity, sm.S.ComplexInfinity, sm.S.NaN)
    parts = []
    for body in bodies or ():
        parts.append(sm.sympify(body.mass))
        if isinstance(body, RigidBody):
            parts += [entry for dyad in body.central_inertia.args for entry in dyad[:1]]
    for pair in loads or ():
        vector = pair[1]            # (point or frame, vector), also a Force or Torque
        if isinstance(vector, Vector):
            parts += [entry for measure, _ in vector.args for entry in measure]
    return any(sm.sympify(part).has(*infinities) for part in parts)


def _form_fr(state, loads, dot):
    """SymPy's ``KanesMethod._form_fr``: ``(FR of all o speeds, Fr)``."""
    N = state.inertial
    vel_list, f_list = sympy_adapter.force_list(loads, N)
    vel_list = [msubs(i, state.qdot_u_map) for i in vel_list]
    f_list = [msubs(i, state.qdot_u_map) for i in f_list]
    o = len(state.u)
    b = len(f_list)
    FR = sm.zeros(o, 1)
    partials = partial_velocity(vel_list, state.u, N)
    for i in range(o):
        FR[i] = sum(dot(partials[j][i], f_list[j]) for j in range(b))
    FR_all = FR
    if state.udep:
        p = o - len(state.udep)
        FRtilde = FR[:p, 0]
        FRold = FR[p:o, 0]
        FRtilde += state.Ars.T * FRold
        FR = FRtilde
    return FR_all, FR


def _form_frstar(state, bodies, dot):
    """SymPy's ``KanesMethod._form_frstar``, with :class:`_Dot` for the dot
    products and plain lists for the sums: ``(Fr* of all o speeds, Fr*, MM,
    nonMM)``, the last three as SymPy stores them (projected where there are
    dependent speeds)."""
    if not sm.utilities.iterables.iterable(bodies):
        raise TypeError("Bodies must be supplied in an iterable.")
    t = dynamicsymbols._t
    N = state.inertial
    udot_zero = dict.fromkeys(state.udot, 0)
    uaux_zero = dict.fromkeys(state.uaux, 0)
    uauxdot = [sm.diff(i, t) for i in state.uaux]
    uauxdot_zero = dict.fromkeys(uauxdot, 0)
    q_ddot_u_map = {k.diff(t): v.diff(t).xreplace(state.qdot_u_map)
                    for (k, v) in state.qdot_u_map.items()}
    q_ddot_u_map.update(state.qdot_u_map)

    def get_partial_velocity(body):
        if isinstance(body, RigidBody):
            vlist = [body.masscenter.vel(N), body.frame.ang_vel_in(N)]
        elif isinstance(body, Particle):
            vlist = [body.point.vel(N)]
        else:
            raise TypeError("The body list may only contain either RigidBody or Particle as "
                            "list elements.")
        v = [msubs(vel, state.qdot_u_map) for vel in vlist]
        return partial_velocity(v, state.u, N)
    partials = [get_partial_velocity(body) for body in bodies]

    o = len(state.u)
    zero = sm.S.Zero
    # the entries of MM and nonMM, summed over the bodies
    MM = [[_Sum() for _ in range(o)] for _ in range(o)]
    nonMM = [_Sum() for _ in range(o)]

    def zero_uaux(expr):
        return msubs(expr, uaux_zero)

    def zero_udot_uaux(expr):
        return msubs(msubs(expr, udot_zero), uaux_zero)

    for i, body in enumerate(bodies):
        if isinstance(body, RigidBody):
            M = zero_uaux(body.mass)
            I = zero_uaux(body.central_inertia)  # noqa: E741 - SymPy's name
            vel = zero_uaux(body.masscenter.vel(N))
            omega = zero_uaux(body.frame.ang_vel_in(N))
            acc = zero_udot_uaux(body.masscenter.acc(N))
            inertial_force = (M.diff(t) * vel + M * acc)
            inertial_torque = zero_uaux((I.dt(body.frame).dot(omega))
                                        + msubs(I.dot(body.frame.ang_acc_in(N)), udot_zero)
                                        + (omega.cross(I.dot(omega))))
            for j in range(o):
                tmp_vel = zero_uaux(partials[i][0][j])
                tmp_ang = zero_uaux(I.dot(partials[i][1][j]))
                row = MM[j]
                for k in range(o):
                    translational = dot(tmp_vel, partials[i][0][k])
                    if translational is not zero:           # else M * 0 adds nothing
                        row[k].add(M * translational)
                    row[k].add(dot(tmp_ang, partials[i][1][k]))
                nonMM[j].add(dot(inertial_force, partials[i][0][j]))
                nonMM[j].add(dot(inertial_torque, partials[i][1][j]))
        else:
            M = zero_uaux(body.mass)
            vel = zero_uaux(body.point.vel(N))
            acc = zero_udot_uaux(body.point.acc(N))
            inertial_force = (M.diff(t) * vel + M * acc)
            for j in range(o):
                temp = zero_uaux(partials[i][0][j])
                row = MM[j]
                for k in range(o):
                    translational = dot(temp, partials[i][0][k])
                    if translational is not zero:
                        row[k].add(M * translational)
                nonMM[j].add(dot(inertial_force, partials[i][0][j]))
    MM = sm.Matrix([[entry.value() for entry in row] for row in MM]) if o else sm.zeros(0, 0)
    nonMM = sm.Matrix([entry.value() for entry in nonMM]) if o else sm.zeros(0, 1)
    MM = zero_uaux(msubs(MM, q_ddot_u_map))
    nonMM = msubs(msubs(nonMM, q_ddot_u_map), udot_zero, uauxdot_zero, uaux_zero)
    fr_star = -(MM * msubs(sm.Matrix(state.udot), uauxdot_zero) + nonMM)
    fr_star_all = fr_star
    if state.udep:
        p = o - len(state.udep)
        fr_star_ind = fr_star[:p, 0]
        fr_star_dep = fr_star[p:o, 0]
        fr_star = fr_star_ind + (state.Ars.T * fr_star_dep)
        MMi = MM[:p, :]
        MMd = MM[p:o, :]
        MM = MMi + (state.Ars.T * MMd)
        nonMM = nonMM[:p, :] + (state.Ars.T * nonMM[p:o, :])
    return fr_star_all, fr_star, MM, nonMM


def _remember(kane, state, bodies, loads, fr_all, frstar_all):
    """Keep the unconstrained equations of ``kane`` for
    :func:`unconstrained_kane_dynamics`, with what they were formed from: they
    serve only while ``kane`` holds the equations formed here (the same
    ``Fr`` object), from the same bodies and loads."""
    fr, frstar = sympy_adapter.fr_frstar(kane)
    _UNCONSTRAINED[kane] = dict(fr=fr, frstar=frstar, bodies=bodies, loads=loads,
                                qdot_u_map=dict(state.qdot_u_map), dynamics=fr_all + frstar_all)


def unconstrained_kane_dynamics(kane):
    """Fr + Fr* (o rows) of the system of ``kane`` with every speed
    independent, for the multiplier form of :class:`codegen.Model`.

    They are what a second ``KanesMethod`` of the same system (all
    coordinates and speeds independent, the explicit kinematic equations
    ``q' - q'(u) = 0`` of ``kane.kindiffdict()``, solved by the identity)
    forms from ``kane.bodies`` and ``kane.loads``, and are formed here as it
    would form them, term for term, without it: from the equations
    :func:`kanes_equations` kept when it formed ``kane`` (SymPy computes them
    on the way to the reduced equations, then drops them), else with the
    fast forms of this module.

    The explicit equations carry the user's own q'(u): KanesMethod solved the
    kinematic equations with the user's ``kd_eqs_solver`` (a simplifying
    solve, say), and solving the implicit equations again with SymPy's
    default LU can divide by terms that vanish where the user's solution is
    finite (the rolling disc of SymPy's test_kane5, upright). That
    KanesMethod's q' -> u map is ``-(k_ku u + f_k)`` of the explicit
    equations, which need not be written as ``kane``'s own map is, so the
    kept equations are used only where both maps are the same expressions
    (as in every model whose kinematic equations are q' = u).
    """
    qd_of_u = kane.kindiffdict()
    q = list(kane.q)
    u = list(kane.u)
    t = dynamicsymbols._t
    qd = [qi.diff(t) for qi in q]
    # KanesMethod._initialize_kindiffeq_matrices of the explicit equations
    # qd - qd(u) = 0, with k_kqdot the identity and the identity as solver
    explicit = sm.Matrix([qdi - qd_of_u[qdi] for qdi in qd])
    k_ku = explicit.jacobian(u)
    f_k = explicit.xreplace(dict.fromkeys(u, 0)).xreplace(dict.fromkeys(qd, 0))
    qdot_u_map = dict(zip(qd, -(k_ku * sm.Matrix(u) + f_k)))

    kept = _UNCONSTRAINED.get(kane)
    fr, frstar = sympy_adapter.fr_frstar(kane)
    if (kept is not None and kept["fr"] is fr and kept["frstar"] is frstar
            and kept["bodies"] is kane.bodies and kept["loads"] is kane.loads
            and kept["qdot_u_map"] == qdot_u_map):
        return kept["dynamics"]
    state = sympy_adapter.KaneFormation(
        inertial=sympy_adapter.inertial_frame(kane), u=sm.Matrix(u), udep=sm.Matrix(),
        uaux=sm.Matrix(), udot=sm.Matrix(u).diff(t), qdot_u_map=qdot_u_map, Ars=sm.Matrix(),
        bodies=kane.bodies, loads=kane.loads, k_kqdot=sm.eye(len(q)))
    loads = kane.loads if kane.loads else None
    dot = _Dot()
    fr_all, _ = _form_fr(state, loads, dot)
    frstar_all, _, _, _ = _form_frstar(state, kane.bodies, dot)
    return fr_all + frstar_all


# -- Lagrange's equations -----------------------------------------------------------------


def lagranges_equations(lagrange):
    """``lagrange.form_lagranges_equations()``, faster: returns the equations
    of motion and leaves ``lagrange`` as SymPy's method leaves it (its
    ``mass_matrix``, ``forcing``, ``eom``, the multiplier coefficients and the
    constraint rows; equal to SymPy's mathematically, see the module
    docstring).

    ``d/dt dL/dq' - dL/dq - Q = M_d q'' - F_d`` with ``M_d`` the Hessian of
    L in the rates q' and ``F_d = dL/dq + Q - (the rest of d/dt dL/dq')``,
    all derivatives taken once per shared subexpression in plain symbols: for
    the flexible double pendulum with 72 coordinates a second instead of
    SymPy's minute (whose cost is its ``subs`` of q'' = 0 and its Jacobians
    over every coordinate of the whole equations).
    """
    t = dynamicsymbols._t
    q = list(lagrange.q)
    n = len(q)
    lagrangian = sympy_adapter.lagrangian(lagrange)
    forces = sm.Matrix(sympy_adapter.lagrange_generalized_forces(lagrange))     # Q
    coneqs = sympy_adapter.lagrange_constraints(lagrange)
    motion = _PlainMotion(q, [lagrangian, forces, coneqs])
    if motion.unsupported:
        # the Lagrangian holds q'' (or Q does): SymPy's method copes
        return lagrange.form_lagranges_equations()
    plain_q, plain_qd, plain_qdd = motion.q, motion.qd, motion.qdd
    lagrangian = motion.plain(lagrangian)
    differentiate = Differentiator(motion.variables)
    momenta = [differentiate(lagrangian, x) for x in plain_qd]           # dL/dq'
    # d/dt dL/dq' without its q'' terms (q' held), and M_d, its q'' coefficients
    along_motion = TotalDerivative(motion.rates_at_rest)
    rate_of_momenta = sm.Matrix([along_motion(p) for p in momenta])
    M_d = sm.Matrix(n, n, lambda i, k: differentiate(momenta[i], plain_qd[k]))
    term2 = sm.Matrix([differentiate(lagrangian, x) for x in plain_q])   # dL/dq
    term4 = motion.plain(forces)
    f_d = -(rate_of_momenta - term2 - term4)
    term1 = M_d * sm.Matrix(plain_qdd) + rate_of_momenta if n else sm.zeros(0, 1)

    # the constraints coneqs(q, q', t) = 0 (linear in q') and their rates, linear in q''
    coneqs = motion.plain(coneqs)
    lam_coeffs = -Differentiator(plain_qd).jacobian(coneqs, plain_qd)  # = -d(coneqs')/dq''
    f_cd = -sm.Matrix([along_motion(row) for row in coneqs])            # coneqs' with q'' = 0

    dynamic = motion.dynamic
    return sympy_adapter.store_lagranges_equations(
        lagrange, term1=dynamic(term1), term2=dynamic(term2), term4=dynamic(term4),
        m_d=dynamic(M_d), f_d=dynamic(f_d), lam_coeffs=dynamic(lam_coeffs),
        m_cd=dynamic(-lam_coeffs), f_cd=dynamic(f_cd))


class _PlainMotion:
    """Plain symbols for the time-varying quantities of some expressions (the
    coordinates q, their rates q' and accelerations q'', every other
    function of time r(t) and its derivatives, time itself), with the rates at
    which they change along a motion, and the way back.

    ``rates_at_rest``: the rate of each variable with the coordinates'
    accelerations zero (q -> q', q' -> 0, r -> r', r' -> r'', ..., t -> 1):
    ``TotalDerivative(rates_at_rest)`` is d/dt with q'' = 0. ``unsupported``:
    the expressions hold q'' (Lagrange's equations are then left to SymPy).
    """

    def __init__(self, q, expressions):
        t = dynamicsymbols._t
        n = len(q)
        self.q = [sm.Dummy(f"q{i}") for i in range(n)]
        self.qd = [sm.Dummy(f"qd{i}") for i in range(n)]
        self.qdd = [sm.Dummy(f"qdd{i}") for i in range(n)]
        self.t = sm.Dummy("t")
        to_plain, rates = {}, {self.t: sm.S.One}
        for i, qi in enumerate(q):
            to_plain[qi.diff(t, 2)] = self.qdd[i]
            to_plain[qi.diff(t)] = self.qd[i]
            to_plain[qi] = self.q[i]
            rates[self.q[i]] = self.qd[i]
            rates[self.qd[i]] = sm.S.Zero
        # other functions of time (inputs, prescribed motions) and their derivatives
        found = set()
        for expression in expressions:
            found |= sm.sympify(expression).atoms(sm.Derivative, sm.core.function.AppliedUndef)
        orders = {}
        for node in found:
            base, order = (node.expr, sum(c for _, c in node.variable_count)) if node.is_Derivative \
                else (node, 0)
            if base in to_plain or base.args != (t,):
                continue
            orders[base] = max(order, orders.get(base, 0))
        for base in sorted(orders, key=sm.default_sort_key):
            chain = [sm.Dummy(f"{base.func.__name__}_{k}") for k in range(orders[base] + 2)]
            for k, symbol in enumerate(chain[:-1]):
                to_plain[base.diff(t, k) if k else base] = symbol
                rates[symbol] = chain[k + 1]
            to_plain[base.diff(t, len(chain) - 1)] = chain[-1]
        to_plain[t] = self.t
        self.unsupported = any(node.is_Derivative and node not in to_plain
                               for node in found) or any(
            sm.sympify(e).has(*[qi.diff(t, 2) for qi in q]) for e in expressions[:2])
        # (xreplace swaps whole nodes, q'' before the q inside it)
        self._to_plain = to_plain
        self._back = {v: k for k, v in to_plain.items()}
        self.rates_at_rest = rates
        self.variables = list(rates)

    def plain(self, expression):
        return sm.sympify(expression).xreplace(self._to_plain)

    def dynamic(self, matrix):
        return matrix.xreplace(self._back)
