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

Everything here is still in terms of SymPy dynamic symbols; the derivation
stage replaces them by plain symbols.
"""

from __future__ import annotations

import hashlib
import math
import re

import sympy as sm
from sympy.physics.mechanics import dynamicsymbols, find_dynamicsymbols

from .errors import ModelError

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _as_list(seq):
    return list(seq) if seq is not None else []


def _matrix(rows):
    """Column matrix from a possibly empty SymPy matrix or sequence."""
    rows = list(rows) if rows is not None else []
    return sm.Matrix(rows) if rows else sm.zeros(0, 1)


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
        if getattr(kane, "_fr", None) is None or getattr(kane, "_frstar", None) is None:
            raise ModelError(
                f"model {name!r}: call kane.kanes_equations(bodies, loads) before Model(kane, ...)")
        if len(getattr(kane, "_uaux", [])):
            raise ModelError(f"model {name!r}: auxiliary speeds are not supported")
        self.name = name
        self.description = description
        t = dynamicsymbols._t
        self.time = t

        self.q = list(kane.q)
        self.u = list(kane.u)
        self.q_dependent = list(kane._qdep)
        self.u_dependent = list(kane._udep)
        self.qd = [qi.diff(t) for qi in self.q]
        self.ud = [ui.diff(t) for ui in self.u]

        qd, u = sm.Matrix(self.qd), sm.Matrix(self.u)
        # Implicit kinematic equations k_kqdot qd + k_ku u + f_k = 0: the form the
        # user wrote, before KanesMethod's symbolic solve for qd.
        k_kqdot = getattr(kane, "_k_kqdot_implicit", kane._k_kqdot)
        k_ku = getattr(kane, "_k_ku_implicit", kane._k_ku)
        f_k = getattr(kane, "_f_k_implicit", kane._f_k)
        self.kinematic = k_kqdot * qd + k_ku * u + f_k
        self.f_c = _matrix(kane._f_h)
        if len(kane._f_nh):
            self.f_v = kane._f_nh + kane._k_nh * u
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
            self.dynamic = _unconstrained_dynamics(kane, self.kinematic)
            self.multipliers = len(self.u_dependent)
        else:
            self.dynamic = kane._fr + kane._frstar
        self.reduction = "multipliers" if self.multipliers else "kane"

        self._check_sizes()
        self.inputs = self._find_inputs(inputs)
        self.parameters, self.parameter_values = self._check_parameters(parameters)

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


def _unconstrained_dynamics(kane, kinematic):
    """fr + fr* of the same system with every speed independent (o rows)."""
    from sympy.physics.mechanics import KanesMethod

    free = KanesMethod(kane._inertial, q_ind=list(kane.q), u_ind=list(kane.u),
                       kd_eqs=list(kinematic))
    free.kanes_equations(kane.bodies, kane.loads)
    return free._fr + free._frstar


def _name(symbol):
    """The user's name of a coordinate, speed, input or parameter."""
    if isinstance(symbol, sm.Function) and isinstance(symbol.func, sm.core.function.UndefinedFunction):
        return symbol.func.__name__
    return str(symbol)
