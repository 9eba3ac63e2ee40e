"""Stage 1 of the pipeline: the model.

A :class:`Model` holds what the rest of the pipeline needs from a user's
``KanesMethod``: the coordinates and speeds with the default dependent ones,
the inputs, the constant parameters with default values, and the residual
equations of the thesis chapter's Table 1, each written as an expression that
is zero on a motion of the system:

=====================  ==========================  =====
residual               depends on                  rows
=====================  ==========================  =====
``f_c``                q, t                        l
``f_v``                q, u, t                     m
``kinematic``          q, qd, u, t  (= f_0 + f_1)  n
``dynamic``            q, qd, u, ud, r, t (f_2+f_3) o - m
=====================  ==========================  =====

The acceleration constraints ``f_a`` are not taken from the user: they are the
total time derivative of ``f_v``, formed in :mod:`codegen.derive`.

A model the procedure cannot linearize correctly is refused here with a
:class:`~codegen.errors.ModelError`: among others, configuration constraints
whose time derivative is not among the velocity constraints (checked
numerically, see :meth:`Model._check_velocity_constraints_hold_df_c_dt`).

Everything here is still in terms of SymPy dynamic symbols; the derivation
stage replaces them by plain symbols.
"""

from __future__ import annotations

import hashlib
import math
import re

import sympy as sm
from sympy.physics.mechanics import dynamicsymbols, find_dynamicsymbols

from .derive import _Differentiator   # memoized derivatives (SymPy's diff is slow on the bicycle)
from . import sympy_adapter
from .errors import ModelError

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Model:
    """A multibody model ready for code generation.

    Parameters
    ----------
    kane : sympy.physics.mechanics.KanesMethod
        On which ``kanes_equations()`` has been called.
    parameters : dict
        Every constant symbol of the equations mapped to its default value.
        The dict's order is the order of ``p`` in the generated code.
    inputs : sequence of dynamic symbols, optional
        The specified inputs ``r`` in the order of ``B``'s columns.  By default
        every dynamic symbol of the dynamic equations that is neither a
        coordinate nor a speed, sorted as SymPy's ``Linearizer`` sorts them.
    name : str
        A C identifier; prefix of every generated symbol and the module name.
    description : str
        One line shown by ``python -m codegen list`` and in the C banner.
    reduction : {"auto", "multipliers", "kane"}
        How the velocity constraints enter the dynamics. ``"multipliers"``:
        the unconstrained Kane equations F (all o speeds independent) are formed
        again from the KanesMethod's bodies and loads, and the generated code
        solves F + B_v^T lambda = 0 with the acceleration constraints for ud and
        the multipliers lambda numerically (DESIGN.md, section 3): no symbolic
        elimination of the dependent speeds, smaller expressions, and any
        dependent set works at run time. ``"kane"``: the KanesMethod's own
        reduced equations (o - m rows, reduced symbolically by SymPy for its
        dependent speeds). ``"auto"``: multipliers when there are velocity
        constraints and the KanesMethod has its bodies and loads.
    """

    def __init__(self, kane, parameters, inputs=None, name="model", description="",
                 reduction="auto"):
        if not _IDENTIFIER.match(name):
            raise ModelError(f"model name {name!r} must be a C identifier")
        kane = _kanes_method(kane, name)
        fr, frstar = sympy_adapter.fr_frstar(kane)
        if fr is None or frstar is None:
            raise ModelError(
                f"model {name!r}: call kane.kanes_equations(bodies, loads) before Model(kane, ...)")
        auxiliary = sympy_adapter.auxiliary_speeds(kane)
        if auxiliary:
            raise ModelError(
                f"model {name!r}: auxiliary speeds {[_name(s) for s in auxiliary]} are not supported "
                "(yet): form the KanesMethod without u_auxiliary")
        self.name = name
        self.description = description
        # the user's equations, kept for the reference routes (SymPy's Linearizer)
        self.kane = kane
        t = dynamicsymbols._t
        self.time = t

        self.q = list(kane.q)
        self.u = list(kane.u)
        self.q_dependent = sympy_adapter.dependent_coordinates(kane)
        self.u_dependent = sympy_adapter.dependent_speeds(kane)
        self.qd = [qi.diff(t) for qi in self.q]
        self.ud = [ui.diff(t) for ui in self.u]

        qd, u = sm.Matrix(self.qd), sm.Matrix(self.u)
        # Implicit kinematic equations k_kqdot qd + k_ku u + f_k = 0: the form the
        # user wrote, before KanesMethod's symbolic solve for qd.
        k_kqdot, k_ku, f_k = sympy_adapter.kinematic_coefficients(kane)
        self.kinematic = k_kqdot * qd + k_ku * u + f_k
        self.f_c = sympy_adapter.configuration_constraints(kane)
        # velocity constraints k_nh u + f_nh = 0 (linear in u, as SymPy splits them)
        k_nh, f_nh = sympy_adapter.velocity_constraint_coefficients(kane)
        if len(f_nh):
            self.f_v = f_nh + k_nh * u
        else:
            self.f_v = sm.zeros(0, 1)
        if reduction not in ("auto", "multipliers", "kane"):
            raise ModelError(f"model {name!r}: reduction must be 'auto', 'multipliers' or 'kane', "
                             f"not {reduction!r}")
        has_loads = kane.bodies is not None and kane.loads is not None
        if reduction == "multipliers" and not has_loads:
            raise ModelError(f"model {name!r}: reduction='multipliers' needs the KanesMethod's "
                             "bodies and loads (pass them to kanes_equations)")
        self.multipliers = 0
        if len(self.u_dependent) and reduction != "kane" and has_loads:
            # F of all o speeds; the constraint forces B_v^T lambda are added in derive
            self.dynamic = _unconstrained_dynamics(kane)
            self.multipliers = len(self.u_dependent)
        else:
            self.dynamic = fr + frstar
        self.reduction = "multipliers" if self.multipliers else "kane"

        self._check_sizes()
        self.inputs = self._find_inputs(inputs)
        self.parameters, self.parameter_values = self._check_parameters(parameters)
        self._check_velocity_constraints_hold_df_c_dt(kane, k_kqdot, k_ku, f_k, k_nh, f_nh)

    # -- sizes ---------------------------------------------------------------
    @property
    def n(self):
        return len(self.q)

    @property
    def o(self):
        return len(self.u)

    @property
    def l(self):  # noqa: E743 - the paper's name
        return len(self.q_dependent)

    @property
    def m(self):
        return len(self.u_dependent)

    @property
    def s(self):
        return len(self.inputs)

    # -- names -----------------------------------------------------------------
    @property
    def q_names(self):
        return [_name(s) for s in self.q]

    @property
    def u_names(self):
        return [_name(s) for s in self.u]

    @property
    def r_names(self):
        return [_name(s) for s in self.inputs]

    @property
    def p_names(self):
        return [_name(s) for s in self.parameters]

    # -- checks ----------------------------------------------------------------
    def _check_sizes(self):
        n, o, l, m = self.n, self.o, self.l, self.m
        shapes = {"kinematic": (self.kinematic, n), "f_c": (self.f_c, l),
                  "f_v": (self.f_v, m), "dynamic": (self.dynamic, o - m + self.multipliers)}
        for label, (matrix, rows) in shapes.items():
            if matrix.shape != (rows, 1):
                raise ModelError(
                    f"model {self.name!r}: {label} has shape {matrix.shape}, expected ({rows}, 1)")
        names = self.q_names + self.u_names
        if len(set(names)) != len(names):
            raise ModelError(f"model {self.name!r}: coordinate and speed names must be distinct: {names}")

    def _states(self):
        return set(self.q) | set(self.u) | set(self.qd) | set(self.ud)

    def _find_inputs(self, inputs):
        states = self._states()
        for label, eqs in (("kinematic equations", self.kinematic),
                           ("configuration constraints f_c", self.f_c),
                           ("velocity constraints f_v", self.f_v)):
            extra = find_dynamicsymbols(eqs, exclude=states) if len(eqs) else set()
            if extra:
                raise ModelError(
                    f"model {self.name!r}: the {label} contain time-varying symbols "
                    f"{sorted(map(str, extra))} that are neither coordinates nor speeds; "
                    "only the dynamic equations may contain inputs")
        found = sorted(find_dynamicsymbols(self.dynamic, exclude=states), key=sm.default_sort_key)
        if inputs is None:
            return found
        inputs = list(inputs)
        for r in inputs:
            if r in states or not isinstance(r, sm.Function):
                raise ModelError(f"model {self.name!r}: input {r} must be a dynamic symbol "
                                 "that is neither a coordinate nor a speed")
        missing = [r for r in found if r not in inputs]
        if missing:
            raise ModelError(
                f"model {self.name!r}: the dynamic equations depend on {[str(r) for r in missing]}, "
                "which are not among the declared inputs")
        if len(set(inputs)) != len(inputs):
            raise ModelError(f"model {self.name!r}: inputs are repeated: {inputs}")
        return inputs

    def _check_parameters(self, parameters):
        if not isinstance(parameters, dict):
            raise ModelError(f"model {self.name!r}: parameters must be a dict symbol -> default value")
        symbols, values = [], []
        for symbol, value in parameters.items():
            if not isinstance(symbol, sm.Symbol):
                raise ModelError(f"model {self.name!r}: parameter {symbol!r} is not a SymPy Symbol")
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise ModelError(f"model {self.name!r}: default value of {symbol} is not a number: {value!r}") from None
            if not math.isfinite(value):
                raise ModelError(f"model {self.name!r}: default value of {symbol} is not finite: {value}")
            symbols.append(symbol)
            values.append(value)
        used = set()
        for eqs in (self.kinematic, self.f_c, self.f_v, self.dynamic):
            for expr in eqs:
                used |= expr.free_symbols
        used.discard(self.time)
        undeclared = sorted((s for s in used if s not in set(symbols)), key=str)
        if undeclared:
            raise ModelError(
                f"model {self.name!r}: the equations contain symbols that are not declared "
                f"parameters: {', '.join(map(str, undeclared))}. Pass them in parameters={{...}} "
                "with default values")
        names = [str(s) for s in symbols]
        if len(set(names)) != len(names):
            raise ModelError(f"model {self.name!r}: parameter names must be distinct: {names}")
        return symbols, values

    def _check_velocity_constraints_hold_df_c_dt(self, kane, k_kqdot, k_ku, f_k, k_nh, f_nh):
        """The velocity constraints must include the time derivative of the
        configuration constraints (the thesis chapter's f_v; C_1 and C_2 and
        the acceleration constraints rest on it). Without it the generated
        code would happily return a wrong A: a pendulum in x, y with only its
        length constraint gets eigenvalues 0, 0, 0 instead of +/-i sqrt(g/L).

        d f_c/dt = J_c qd + df_c/dt|_q with qd from the kinematic equations
        K qd + k_ku u + f_k = 0 is affine in u: G u + g0. Each of its rows must
        be a combination of the rows of f_v = B_v u + f_v0, i.e. [G g0] must
        lie in the row space of [B_v f_v0]. Checked numerically (no symbolic
        solve) at a few random points on the constraint manifold (random
        independent coordinates, dependent ones by Newton on f_c), seeded so
        model creation stays deterministic. A row is reported missing only if
        it fails at every point; if no point on the manifold can be found the
        check is skipped rather than refuse a model on weak evidence (unless
        f_v is empty). A row that vanishes identically needs no velocity
        constraint: the kinematic equations keep f_c constant by themselves.
        """
        if not self.l:
            return
        missing = _rows_outside_velocity_constraints(self, k_kqdot, k_ku, f_k, k_nh, f_nh)
        if missing is None and not self.m:
            # no point found to evaluate at; without velocity constraints the
            # model is wrong unless d f_c/dt vanishes identically, so refuse
            missing = range(self.l)
        if missing:
            self._refuse_missing_df_c_dt(kane, missing)

    def _refuse_missing_df_c_dt(self, kane, rows):
        t = self.time
        qd_of_u = kane.kindiffdict()      # the user's own solve, for the message only
        readable = {s: sm.Symbol(_name(s)) for s in self.q + self.u}   # x, not x(t)
        lines = []
        speeds = set()
        for i in rows:
            rate = sm.expand(self.f_c[i].diff(t).xreplace(qd_of_u))
            speeds |= {u for u in self.u if rate.has(u)}
            text = str(rate.xreplace(readable))
            lines.append(f"d/dt f_c[{i}] = {text if len(text) <= 200 else text[:200] + ' ...'}")
        candidates = [_name(u) for u in self.u if u in speeds and u not in self.u_dependent]
        dependent = [_name(u) for u in self.u_dependent]
        have = (f"f_v has no rows" if not self.m else
                f"no combination of the {self.m} rows of f_v gives {'it' if len(lines) == 1 else 'them'}")
        raise ModelError(
            f"model {self.name!r}: the velocity constraints must include the time derivative of "
            f"the configuration constraints, but {have}: add " + "; ".join(lines)
            + f" to velocity_constraints, with u_dependent={dependent} plus one more dependent "
            f"speed per added constraint (one of {', '.join(candidates) or 'the speeds'})"
            + ("" if not self.m else ", or correct the velocity constraints"))

    # -- identity -------------------------------------------------------------
    def fingerprint(self):
        """Hash of everything that determines the generated code."""
        h = hashlib.sha256()
        for part in (self.name, self.description, self.q, self.u, self.q_dependent,
                     self.u_dependent, self.inputs, self.parameters, self.parameter_values,
                     self.kinematic, self.f_c, self.f_v, self.dynamic, self.reduction):
            h.update(sm.srepr(part).encode() if not isinstance(part, str) else part.encode())
            h.update(b"\x00")
        return h.hexdigest()

    def __repr__(self):
        return (f"Model({self.name!r}: n={self.n} coordinates ({self.l} dependent), "
                f"o={self.o} speeds ({self.m} dependent), {self.s} inputs, "
                f"{len(self.parameters)} parameters)")


def _rows_outside_velocity_constraints(model, k_kqdot, k_ku, f_k, k_nh, f_nh, points=3, attempts=15):
    """Indices of the rows of d f_c/dt that are not combinations of the rows
    of f_v at any of ``points`` random points on the constraint manifold
    (see Model._check_velocity_constraints_hold_df_c_dt); None if no point
    could be evaluated."""
    import numpy as np

    n, o = model.n, model.o
    t = model.time
    q_plain = sm.symbols(f"q_0:{n}", real=True)
    u_plain = sm.symbols(f"u_0:{o}", real=True)
    t_plain = sm.Symbol("t_", real=True)
    to_plain = dict(zip(model.q, q_plain)) | dict(zip(model.u, u_plain)) | {t: t_plain}
    f_c = model.f_c.xreplace(to_plain)
    differentiate = _Differentiator(list(q_plain) + [t_plain])
    matrices = [f_c, differentiate.jacobian(f_c, q_plain), differentiate.jacobian(f_c, [t_plain]),
                sm.Matrix(k_kqdot).xreplace(to_plain), sm.Matrix(k_ku).xreplace(to_plain),
                sm.Matrix(f_k).xreplace(to_plain)]
    if model.m:
        matrices += [sm.Matrix(k_nh).xreplace(to_plain), sm.Matrix(f_nh).xreplace(to_plain)]
    evaluate = sm.lambdify([q_plain, u_plain, t_plain, model.parameters], matrices, "numpy", cse=True)
    dependent = [model.q.index(s) for s in model.q_dependent]
    p = [float(v) for v in model.parameter_values]
    rng = np.random.default_rng(20240909)

    def values(q, u, time):
        with np.errstate(all="ignore"):
            return [np.asarray(m, dtype=float).reshape(shape.shape)
                    for m, shape in zip(evaluate(q, u, time, p), matrices)]

    failures = np.zeros(model.l, dtype=int)
    valid = 0
    for attempt in range(attempts):
        # small coordinates first, then whole turns (loops that close only far from q = 0)
        q = rng.uniform(-1.0, 1.0, n) * (0.5, 1.0, math.pi)[attempt % 3]
        u = rng.uniform(-1.0, 1.0, o)
        time = float(rng.uniform(0.1, 1.0))
        for _ in range(30):                       # Newton on f_c for the dependent coordinates
            residual, J_c = values(q, u, time)[:2]
            if not (np.all(np.isfinite(residual)) and np.all(np.isfinite(J_c))):
                break
            if np.abs(residual).max() <= 1e-11 * (1.0 + np.abs(q).max()):
                break
            try:
                q[dependent] -= np.linalg.solve(J_c[:, dependent], residual.ravel())
            except np.linalg.LinAlgError:
                break
        else:
            continue
        evaluated = values(q, u, time)
        if model.m:
            residual, J_c, f_ct, K, k_u, k_0, B_v, f_v0 = evaluated
        else:
            residual, J_c, f_ct, K, k_u, k_0 = evaluated
            B_v, f_v0 = np.zeros((0, o)), np.zeros((0, 1))
        if not all(np.all(np.isfinite(m)) for m in evaluated):
            continue
        if np.abs(residual).max() > 1e-9 * (1.0 + np.abs(q).max()) or np.linalg.cond(K) > 1e10:
            continue
        # d f_c/dt = G u + g0 with qd = -K^-1 (k_u u + k_0)
        G = -J_c @ np.linalg.solve(K, k_u)
        g0 = (-J_c @ np.linalg.solve(K, k_0) + f_ct).ravel()
        rates = np.column_stack([G, g0])                      # l x (o + 1)
        constraints = np.column_stack([B_v, f_v0.ravel()])    # m x (o + 1)
        for i, row in enumerate(rates):
            scale = np.linalg.norm(row)
            if scale == 0.0:
                continue
            if model.m:
                combination = np.linalg.lstsq(constraints.T, row, rcond=None)[0]
                row = constraints.T @ combination - row     # what no combination reaches
            if np.linalg.norm(row) > 1e-7 * scale:
                failures[i] += 1
        valid += 1
        if valid == points:
            break
    if not valid:
        return None
    return [i for i in range(model.l) if failures[i] == valid]


def _unconstrained_dynamics(kane):
    """fr + fr* of the same system with every speed independent (o rows).

    Kane's equations need qd in terms of u (partial velocities, accelerations).
    That map must be the user's own: KanesMethod solved the kinematic
    equations with the user's ``kd_eqs_solver`` (e.g. a simplifying solve),
    and a new KanesMethod given the implicit equations would solve them again
    with SymPy's default LU, which can divide by terms that vanish where the
    user's solution is finite (the rolling disc of SymPy's test_kane5 upright).
    So the new KanesMethod gets the explicit equations qd - qd(u) = 0 taken
    from ``kane.kindiffdict()``: their qd coefficient is the identity, and the
    solver below returns the right-hand side as it is, without any solve.
    """
    from sympy.physics.mechanics import KanesMethod

    qd_of_u = kane.kindiffdict()
    qd = [qi.diff(dynamicsymbols._t) for qi in kane.q]
    explicit = [qdi - qd_of_u[qdi] for qdi in qd]

    def identity_solve(matrix, rhs):
        # d(qd - qd(u))/d qd is the identity: nothing to solve
        if matrix != sm.eye(matrix.shape[0]):
            raise ModelError("internal: explicit kinematic equations without identity coefficient")
        return rhs

    free = KanesMethod(sympy_adapter.inertial_frame(kane), q_ind=list(kane.q), u_ind=list(kane.u),
                       kd_eqs=explicit, kd_eqs_solver=identity_solve)
    fr, frstar = free.kanes_equations(kane.bodies, kane.loads)
    return fr + frstar


def _kanes_method(equations, name):
    """The KanesMethod behind what the user passed: itself, a ``System``'s or a
    ``JointsMethod``'s (after ``form_eoms()`` with Kane's method); anything else
    is refused with a message that says what to pass."""
    from sympy.physics.mechanics import KanesMethod, LagrangesMethod

    if isinstance(equations, KanesMethod):
        return equations
    inner = getattr(equations, "eom_method", None) or getattr(equations, "method", None)
    if isinstance(inner, KanesMethod):
        return inner
    kind = type(equations).__name__
    if isinstance(equations, LagrangesMethod) or isinstance(inner, LagrangesMethod):
        what = kind if isinstance(equations, LagrangesMethod) else f"{kind} formed with LagrangesMethod"
        raise ModelError(f"model {name!r}: {what} is not supported yet (issue 12); "
                         "write the model with KanesMethod (or System.form_eoms() with the default "
                         "eom_method=KanesMethod)")
    if inner is None and hasattr(equations, "form_eoms"):
        raise ModelError(f"model {name!r}: call {kind}.form_eoms() before Model(...)")
    raise ModelError(f"model {name!r}: expected a sympy.physics.mechanics KanesMethod "
                     f"(or a System/JointsMethod formed with it), got {kind}")


def _name(symbol):
    """The user's name of a coordinate, speed, input or parameter."""
    if isinstance(symbol, sm.Function) and isinstance(symbol.func, sm.core.function.UndefinedFunction):
        return symbol.func.__name__
    return str(symbol)
