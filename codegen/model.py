"""Stage 1 of the pipeline: the model.

A :class:`Model` holds what the rest of the pipeline needs from a user's
``KanesMethod`` or ``LagrangesMethod`` (or a ``System`` or ``JointsMethod``
formed with either): the coordinates and speeds with the default dependent ones,
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
numerically, see :meth:`Model._check_velocity_constraints_hold_df_c_dt`), and
undefined functions of the states, which SymPy's ``find_dynamicsymbols``
would let pass for inputs (see :meth:`Model._refuse_undefined_functions`).
The kinematic equations and the constraints are checked before the
multiplier form's unconstrained dynamics are formed, so that such a refusal
comes in about a second even where forming them takes a minute.

Everything here is still in terms of SymPy dynamic symbols; the derivation
stage replaces them by plain symbols.
"""

from __future__ import annotations

import hashlib
import math
import re

import sympy as sm
from sympy.physics.mechanics import dynamicsymbols, find_dynamicsymbols
from sympy.physics.vector import Vector

from . import eom, sympy_adapter
from .differentiate import Differentiator   # memoized derivatives (SymPy's diff is slow on the bicycle)
from .errors import ModelError

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Model:
    """A multibody model ready for code generation.

    Parameters
    ----------
    equations : sympy.physics.mechanics KanesMethod, LagrangesMethod, System or JointsMethod
        A ``KanesMethod`` on which ``kanes_equations()`` has been called, a
        ``LagrangesMethod`` on which ``form_lagranges_equations()`` has been
        called, or a ``System`` or ``JointsMethod`` after ``form_eoms()`` with
        either method.
    parameters : dict
        Every constant symbol of the equations mapped to its default value.
        The dict's order is the order of ``p`` in the generated code.
    inputs : sequence of dynamic symbols, optional
        The specified inputs ``r`` in the order of ``B``'s columns.  By default
        every dynamic symbol of the dynamic equations that is neither a
        coordinate nor a speed, sorted as SymPy's ``Linearizer`` sorts them.
        An input is an undefined function of time alone, ``r(t)``
        (``dynamicsymbols('r')`` or ``sm.Function('r')(t)``), or its time
        derivative ``r'(t)`` (a column of B of its own). An undefined function
        of anything else (``g(q)``, ``g(u)``, ``g(q, t)``, ``g(h(t))`` of an
        input h, ``g(k)``) is refused wherever it appears: its derivatives
        with respect to its arguments belong in A or B.
    name : str
        A C identifier; prefix of every generated symbol and the module name.
    description : str
        One line shown by ``python -m codegen list`` and in the C banner.
    reduction : {"auto", "multipliers", "kane"}
        How the velocity constraints enter the dynamics. ``"multipliers"``:
        the unconstrained Kane equations F (all o speeds independent, from the
        KanesMethod's bodies and loads: taken from :func:`codegen.eom.kanes_equations`
        where it formed the KanesMethod, else formed by
        :func:`codegen.eom.unconstrained_kane_dynamics`), and the generated code
        solves F + B_v^T lambda = 0 with the acceleration constraints for ud and
        the multipliers lambda numerically (DESIGN.md, section 3): no symbolic
        elimination of the dependent speeds, smaller expressions, and any
        dependent set works at run time. ``"kane"``: the KanesMethod's own
        reduced equations (o - m rows, reduced symbolically by SymPy for its
        dependent speeds). ``"auto"``: multipliers when there are velocity
        constraints and the KanesMethod has its bodies and loads. A
        LagrangesMethod's constraints always enter through multipliers.
    dependent_q, dependent_u : sequences, optional (LagrangesMethod, or constraints given here)
        The default dependent coordinates and speeds of a LagrangesMethod, or
        of a KanesMethod whose constraints are given to Model (below):
        symbols or names (a LagrangesMethod's speed also as the coordinate's
        derivative ``q.diff()``), one per constraint row. A KanesMethod's own
        are its ``q_dependent`` and ``u_dependent``, a System's its ``q_dep``
        and ``u_dep``. Otherwise the last coordinates (and speeds) whose
        columns of ``J_c = d f_c/dq`` (and ``B_v = d f_v/du``, the rates of the
        dependent coordinates first) are independent at random points. Every
        call of the generated code may choose another partition.
    configuration_constraints, velocity_constraints : sequences, optional
        Constraints of a KanesMethod (or a System formed with one) of the
        *unconstrained* system (every coordinate and speed independent, no
        constraints of its own), given here instead of to KanesMethod: f_c
        in the coordinates and time, f_v linear in the speeds (coordinate
        rates q' may appear: they are replaced by the kinematic equations).
        The dynamics are the multiplier form ``F + B_v^T lambda = 0`` with F
        the KanesMethod's own (unconstrained) equations, so its bodies and
        loads are not needed again. Unlike KanesMethod, this accepts
        **redundant constraints** (more rows than their rank, e.g. a
        parallelogram linkage with a third crank): see "Constraints given to
        Model" below. ``velocity_constraints=None`` (the default) with
        configuration constraints: f_v is their time derivative ``d f_c/dt``
        (q' from the kinematic equations), formed here. Given velocity
        constraints are taken as they are and must include ``d f_c/dt`` (as
        for a KanesMethod, checked numerically); to add nonholonomic
        constraints to holonomic ones, pass both, e.g.
        ``velocity_constraints=[*(f.diff(t) for f in f_c), *f_nh]``.

    outputs : dict, optional
        Measurements ``y = h(q, u, q', u', r, t, p)`` by name: name -> a SymPy
        expression in the coordinates, the speeds, their first time
        derivatives (``u'``: accelerations), the inputs, time and the
        parameters (every other symbol is refused, named). The generated
        code evaluates y at a point (``qd*``, ``ud*`` computed there) and
        its linearization ``y = C x + D r`` in the independent states x of
        any partition, exactly: ``C = dh/dq C_0 + dh/du [C_1 C_0, C_2] +
        dh/d(q', u', lambda) A'``, ``D = dh/dr + dh/d(q', u', lambda) B'`` (A',
        B': the rows of all coordinates and speeds of ``linearize_full``, and
        of the multipliers). In the multiplier form (velocity constraints,
        ``reduction="multipliers"``) an output may also hold the multipliers
        lambda of the velocity constraints, ``codegen.multipliers(m)``: the
        dynamics are ``F + B_v^T lambda = 0`` with F Kane's ``Fr + Fr*`` of
        all speeds, so ``B_v^T lambda`` are the generalized active forces of
        the constraint forces (a rod's tension T on a bob at distance L,
        f_v = x x' + y y': lambda = -T / L). With auxiliary speeds
        (``u_auxiliary``), an output may hold the reactions they bring into
        evidence: the symbols of the loads that only the auxiliary equations
        determine (declared neither as inputs nor as parameters), replaced by
        their solution of those equations, ``K R + g = 0`` with K constant
        or diagonal (each reaction along its auxiliary speed's direction;
        otherwise refused, saying so). Names must be
        C identifiers, distinct, and not names of coordinates, speeds or
        inputs. The order of the dict is the order of y.
    sensitivities : "all" or sequence, optional
        The parameters (names or symbols; ``"all"``: every one) to
        differentiate A and B (and the outputs' C and D) with respect to:
        the generated code then has ``<name>_sensitivities``, the forward
        mode (tangents) of every stage of a linearization, exact to
        rounding (``module.sensitivities``). The derivative holds the
        independent coordinates and speeds, the inputs and time, and moves
        the dependent coordinates and speeds with the parameter along the
        constraint manifold (as re-solving the point at the new parameter
        value does). Each parameter adds to the size of the generated C and
        to its build; none (the default) adds nothing.

    Constraints given to Model
    --------------------------
    The generated code takes one dependent coordinate per configuration
    constraint row and one dependent speed per velocity constraint row (l and
    m, and m multipliers), so at most as many rows as coordinates and speeds:
    more is a ModelError (remove rows that repeat others). The default
    partition (``dependent_q``, ``dependent_u`` not given) is the
    columns of J_c (B_v) that are independent at random points, completed
    with the last remaining coordinates (speeds) to one per row. Where the
    constraints are redundant at a point (rank of J_c below l, or of B_v
    below m) *no* partition is valid there: ``linearize``, ``linearize_full``,
    ``complete`` and ``state_derivative`` raise the rank-deficiency error
    (``SingularMatrixError``), and ``linearize_local`` (null spaces of J_c and
    B_v from an SVD, minimum-norm multipliers) works: its ranks decide the
    degrees of freedom, ``(n - rank J_c) + (o - rank B_v)`` states. The
    SymPy reference routes need the constraints in a KanesMethod, so such a
    model has ``kane = None`` (the benchmark skips those routes).

    Lagrange's equations
    --------------------
    From a LagrangesMethod (coordinates q, Lagrangian L, generalized forces Q
    of its force list, holonomic constraints ``hol_coneqs`` and nonholonomic
    constraints ``nonhol_coneqs``) the model takes:

    * speeds ``u``: the coordinate rates, one new dynamic symbol per
      coordinate named ``<coordinate>_rate`` (``theta`` -> ``theta_rate``),
      with the kinematic equations ``q' - u = 0``; these are the names of the
      speeds in ``u_names``, the state names and partitions by name;
    * ``f_c``: the holonomic constraints;
    * ``f_v``: SymPy's ``coneqs`` with q' -> u: the time derivatives of the
      holonomic constraints, then the nonholonomic constraints (which must be
      linear in q' and hold no other time-varying symbol);
    * ``dynamic``: ``d/dt(dL/dq') - dL/dq - Q`` with q' -> u, q'' -> u' (n
      rows, without the multiplier terms; SymPy's ``mass_matrix`` and
      ``forcing`` without the multiplier columns), to which the derivation adds
      the constraint forces ``B_v^T lambda`` (the same multiplier path as a
      KanesMethod with velocity constraints; no symbolic elimination).

    A System or JointsMethod formed with LagrangesMethod must give each joint
    the coordinate rate as its speed (``PinJoint(..., coordinates=q,
    speeds=q.diff())``), as SymPy's Lagrange examples do.

    Auxiliary speeds (``u_auxiliary`` of a KanesMethod, ``u_aux`` of a System)
    bring constraint forces into evidence; they are zero on every motion, so
    they are set to zero (with their derivatives) in every equation, as
    KanesMethod does in Fr*; their auxiliary equations give the reactions
    that outputs may hold (see ``outputs``).
    """

    def __init__(self, equations, parameters, inputs=None, name="model", description="",
                 reduction="auto", dependent_q=None, dependent_u=None,
                 configuration_constraints=None, velocity_constraints=None, outputs=None,
                 sensitivities=None):
        if not _IDENTIFIER.match(name):
            raise ModelError(f"model name {name!r} must be a C identifier")
        if reduction not in ("auto", "multipliers", "kane"):
            raise ModelError(f"model {name!r}: reduction must be 'auto', 'multipliers' or 'kane', "
                             f"not {reduction!r}")
        self.name = name
        self.description = description
        self.time = dynamicsymbols._t
        method, source = _equations_of_motion(equations, name)
        # the user's equations, kept for the reference routes (SymPy's Linearizer)
        self.kane = self.lagrange = None
        given = configuration_constraints is not None or velocity_constraints is not None
        self._auto_velocity_constraints = False    # f_v formed here as d f_c/dt
        if _is_kanes_method(method):
            if (dependent_q is not None or dependent_u is not None) and not given:
                raise ModelError(
                    f"model {name!r}: dependent_q and dependent_u are for a LagrangesMethod or for "
                    "constraints given to Model; a KanesMethod's default partition is its "
                    "q_dependent and u_dependent (every call of the generated code may choose another)")
            if given and reduction == "kane":
                raise ModelError(
                    f"model {name!r}: constraints given to Model enter through multipliers; "
                    "reduction='kane' needs the KanesMethod's own reduced equations (use 'auto')")
            # the unconstrained equations are the KanesMethod's own: no bodies and loads needed
            qd_of_u, kinematics = self._from_kanes_method(method, "auto" if given else reduction)
            if given:
                kinematics = self._take_constraints(configuration_constraints, velocity_constraints,
                                                    qd_of_u, kinematics)
        else:
            if given:
                raise ModelError(
                    f"model {name!r}: configuration_constraints and velocity_constraints are taken "
                    "beside a KanesMethod of the unconstrained system; give a LagrangesMethod its "
                    "constraints itself (hol_coneqs, nonhol_coneqs)")
            qd_of_u, kinematics = self._from_lagranges_method(method, source, reduction)
        self.qd = [qi.diff(self.time) for qi in self.q]
        self.ud = [ui.diff(self.time) for ui in self.u]

        # The kinematic equations and the constraints are checked first, the
        # check of d f_c/dt included: it needs nothing else, and a model it
        # refuses is refused before the multiplier form's unconstrained
        # dynamics are formed (a minute on the ball on a spinning disc).
        self._check_sizes()
        for label, rows in (("kinematic equation", self.kinematic),
                            ("configuration constraint", self.f_c),
                            ("velocity constraint", self.f_v)):
            self._refuse_undefined_functions(label, rows)
        self._refuse_inputs_outside_dynamics()
        self.parameters, self.parameter_values = self._check_parameters(parameters)
        self._refuse_undeclared_symbols([self.kinematic, self.f_c, self.f_v])
        if self.lagrange is not None:
            self._choose_lagrange_partition(source, dependent_q, dependent_u)
        elif given:
            self._choose_given_partition(dependent_q, dependent_u)
            self.kane = None   # its own equations lack the constraints: no reference routes
        if not self._auto_velocity_constraints:   # d f_c/dt by construction otherwise
            self._check_velocity_constraints_hold_df_c_dt(qd_of_u, *kinematics)

        if self.dynamic is None:     # the multiplier form: F of all o speeds, formed only now
            self.dynamic = _without_auxiliary(eom.unconstrained_kane_dynamics(method), method)
        self._check_sizes()
        time_varying = _time_varying_atoms(self.dynamic)      # one walk through the largest equations
        self._refuse_undefined_functions("dynamic equation", self.dynamic, time_varying)
        self.inputs = self._find_inputs(inputs, time_varying)
        self._refuse_undeclared_symbols([self.dynamic])
        self.y_names, self.outputs = self._take_outputs(outputs)
        self.sensitivity_parameters = self._take_sensitivities(sensitivities)

    def _from_kanes_method(self, kane, reduction):
        """q, u, the default partition and the residuals of a KanesMethod;
        returns the map q' -> q'(u) and the kinematic and velocity constraint
        coefficients for the check of d f_c/dt."""
        name = self.name
        fr, frstar = sympy_adapter.fr_frstar(kane)
        if fr is None or frstar is None:
            raise ModelError(
                f"model {name!r}: call kane.kanes_equations(bodies, loads) before Model(kane, ...)")
        self.kane = kane
        t = self.time

        def without_auxiliary(matrix):
            return _without_auxiliary(matrix, kane)

        self.q = list(kane.q)
        self.u = list(kane.u)
        self.q_dependent = sympy_adapter.dependent_coordinates(kane)
        self.u_dependent = sympy_adapter.dependent_speeds(kane)

        qd, u = sm.Matrix([qi.diff(t) for qi in self.q]), sm.Matrix(self.u)
        # Implicit kinematic equations k_kqdot qd + k_ku u + f_k = 0: the form the
        # user wrote, before KanesMethod's symbolic solve for qd.
        k_kqdot, k_ku, f_k = (without_auxiliary(m) for m in sympy_adapter.kinematic_coefficients(kane))
        self.kinematic = k_kqdot * qd + k_ku * u + f_k
        self.f_c = sympy_adapter.configuration_constraints(kane)
        # velocity constraints k_nh u + f_nh = 0 (linear in u, as SymPy splits them)
        k_nh, f_nh = (without_auxiliary(m) for m in sympy_adapter.velocity_constraint_coefficients(kane))
        if len(f_nh):
            self.f_v = f_nh + k_nh * u
        else:
            self.f_v = sm.zeros(0, 1)
        has_loads = kane.bodies is not None and kane.loads is not None
        if reduction == "multipliers" and not has_loads:
            raise ModelError(f"model {name!r}: reduction='multipliers' needs the KanesMethod's "
                             "bodies and loads (pass them to kanes_equations)")
        self.multipliers = 0
        if len(self.u_dependent) and reduction != "kane" and has_loads:
            # F of all o speeds (the constraint forces B_v^T lambda are added in
            # derive), formed by __init__ once the constraints have passed their checks
            self.dynamic = None
            self.multipliers = len(self.u_dependent)
        else:
            # with auxiliary speeds, their equations follow the o - m of the speeds
            rows = len(self.u) - len(self.u_dependent)
            self.dynamic = without_auxiliary((fr + frstar)[:rows, :])
        self.reduction = "multipliers" if self.multipliers else "kane"
        qd_of_u = {key: _without_auxiliary(value, kane) for key, value in kane.kindiffdict().items()}
        return qd_of_u, (k_kqdot, k_ku, f_k, k_nh, f_nh)

    def _take_constraints(self, configuration_constraints, velocity_constraints, qd_of_u, kinematics):
        """f_c and f_v given to Model beside a KanesMethod of the unconstrained
        system (see the class docstring); returns the kinematics tuple of the
        d f_c/dt check with the new velocity constraint coefficients."""
        name = self.name
        if len(self.u_dependent) or len(self.q_dependent) or len(self.f_c) or len(self.f_v):
            raise ModelError(
                f"model {name!r}: the KanesMethod has constraints of its own (q_dependent "
                f"{[_name(s) for s in self.q_dependent]}, u_dependent "
                f"{[_name(s) for s in self.u_dependent]}, {len(self.f_c)} configuration and "
                f"{len(self.f_v)} velocity constraints): give every constraint either to the "
                "KanesMethod or to Model, beside a KanesMethod of the unconstrained system")
        t = self.time
        q, u = self.q, self.u
        n, o = len(q), len(u)
        f_c = _constraint_rows(configuration_constraints or [], "configuration_constraints", name)
        self._refuse_undefined_functions("configuration constraint", f_c)
        foreign = find_dynamicsymbols(f_c, exclude=set(q)) if len(f_c) else set()
        if foreign:
            raise ModelError(
                f"model {name!r}: configuration_constraints may hold only the coordinates "
                f"{self.q_names} and time, not {sorted(map(str, foreign))}")
        if velocity_constraints is None:
            # d f_c/dt with q' from the kinematic equations
            f_v = f_c.diff(t).xreplace(qd_of_u) if len(f_c) else sm.zeros(0, 1)
            self._auto_velocity_constraints = bool(len(f_c))
        else:
            f_v = _constraint_rows(velocity_constraints, "velocity_constraints", name)
            self._refuse_undefined_functions("velocity constraint", f_v)
            f_v = f_v.xreplace(qd_of_u) if len(f_v) else f_v
            foreign = find_dynamicsymbols(f_v, exclude=set(q) | set(u)) if len(f_v) else set()
            if foreign:
                raise ModelError(
                    f"model {name!r}: velocity_constraints may hold only the coordinates, their "
                    f"rates, the speeds {self.u_names} and time, not {sorted(map(str, foreign))}")
        l, m = len(f_c), len(f_v)
        if l > n or m > o:
            raise ModelError(
                f"model {name!r}: {l} configuration constraints for {n} coordinates and {m} velocity "
                f"constraints for {o} speeds: the generated code takes one dependent coordinate per "
                "configuration constraint and one dependent speed per velocity constraint, so at "
                "most as many rows as coordinates and speeds; remove rows that repeat others "
                "(redundant rows are accepted up to that count)")
        B_v = f_v.jacobian(u) if m else sm.zeros(0, o)
        if any(entry.has(*u) for entry in B_v):
            raise ModelError(f"model {name!r}: velocity_constraints must be linear in the speeds")
        self.f_c, self.f_v = f_c, f_v
        # provisional default partition (sizes only), chosen once the parameters are known
        self.q_dependent, self.u_dependent = q[n - l:], u[o - m:] if m else []
        self.multipliers = m
        self.reduction = "multipliers" if m else self.reduction
        f_nh = f_v.xreplace(dict.fromkeys(u, 0)) if m else sm.zeros(0, 1)
        return (*kinematics[:3], B_v, f_nh)

    def _choose_given_partition(self, dependent_q, dependent_u):
        """The default dependent coordinates and speeds of constraints given to
        Model: as given, or the columns of J_c (B_v) independent at random
        points, completed with the last others to one per row (see the class
        docstring: redundant constraints have no valid partition)."""
        l, m = len(self.f_c), len(self.f_v)
        if dependent_q is not None:
            self.q_dependent = self._resolve(dependent_q, self.q, {}, "dependent_q", l)
        elif l:
            columns = _independent_columns(self, self.f_c.jacobian(self.q), l, [],
                                           "configuration constraints", complete=True)
            self.q_dependent = [self.q[i] for i in columns or range(self.n - l, self.n)]
        if dependent_u is not None:
            self.u_dependent = self._resolve(dependent_u, self.u, {}, "dependent_u", m)
        elif m:
            # the speeds at the dependent coordinates' places first (u = q' in most models)
            first = [i for i in (self.q.index(qi) for qi in self.q_dependent) if i < self.o]
            columns = _independent_columns(self, self.f_v.jacobian(self.u), m, first,
                                           "velocity constraints", complete=True)
            self.u_dependent = [self.u[i] for i in columns or range(self.o - m, self.o)]

    def _from_lagranges_method(self, lagrange, source, reduction):
        """q, the coordinate rates as speeds and the residuals of a
        LagrangesMethod (see the class docstring); the default partition is
        chosen later, once the parameters are known."""
        name = self.name
        if not sympy_adapter.lagrange_formed(lagrange):
            raise ModelError(f"model {name!r}: call form_lagranges_equations() on the "
                             "LagrangesMethod (or form_eoms() on the System) before Model(...)")
        self.lagrange = lagrange
        t = self.time
        self.q = list(lagrange.q)
        n = len(self.q)
        rates = [qi.diff(t) for qi in self.q]
        self.u = [dynamicsymbols(f"{_name(qi)}_rate") for qi in self.q]
        accelerations = [rate.diff(t) for rate in rates]
        # second derivatives first: xreplace swaps whole Derivative nodes
        to_speeds = dict(zip(accelerations, [ui.diff(t) for ui in self.u])) | dict(zip(rates, self.u))

        f_c = sympy_adapter.holonomic_constraints(lagrange)
        coneqs = sympy_adapter.lagrange_constraints(lagrange)
        m_d, f_d = sympy_adapter.lagrange_unconstrained_equations(lagrange)
        # before the check of foreign symbols in the constraints, whose message fits worse
        self._refuse_undefined_functions("configuration constraint", f_c)
        self._refuse_undefined_functions("velocity constraint", coneqs)
        known = set(self.q) | set(rates)
        foreign = find_dynamicsymbols(coneqs, exclude=known) if len(coneqs) else set()
        if foreign:
            raise ModelError(
                f"model {name!r}: the LagrangesMethod's constraints contain time-varying symbols "
                f"{sorted(map(str, foreign))} that are neither coordinates nor coordinate rates: "
                "write the nonholonomic constraints in the coordinates and their rates q'")
        equations = m_d.row_join(f_d)
        taken = {_name(s) for matrix in (equations, coneqs) for entry in matrix
                 for s in find_dynamicsymbols(entry)}
        clash = sorted(_name(ui) for ui in self.u if _name(ui) in taken)
        if clash:
            raise ModelError(
                f"model {name!r}: the speeds of a LagrangesMethod are named <coordinate>_rate, but "
                f"the equations already contain {clash}: rename those symbols")
        self._refuse_joint_speeds_in_lagrange(source, equations, rates)

        self.f_c = f_c
        self.f_v = coneqs.xreplace(to_speeds) if len(coneqs) else sm.zeros(0, 1)
        self.kinematic = sm.Matrix(rates) - sm.Matrix(self.u)
        # d/dt(dL/dq') - dL/dq - Q = M_d q'' - F_d; derive adds B_v^T lambda
        self.dynamic = (m_d * sm.Matrix(accelerations) - f_d).xreplace(to_speeds)
        m = len(self.f_v)
        if m and reduction == "kane":
            raise ModelError(
                f"model {name!r}: reduction='kane' needs a KanesMethod's reduced equations; a "
                "LagrangesMethod's constraints enter through multipliers (reduction='auto')")
        B_v = self.f_v.jacobian(self.u) if m else sm.zeros(0, n)
        if m and any(entry.has(*self.u) for entry in B_v):
            raise ModelError(f"model {name!r}: the LagrangesMethod's nonholonomic constraints must "
                             "be linear in the coordinate rates q'")
        self.multipliers = m
        self.reduction = "multipliers" if m else "none"
        # provisional default partition (sizes only): the last l coordinates and m speeds
        l = len(f_c)
        self.q_dependent = self.q[n - l:]
        self.u_dependent = self.u[n - m:] if m else []
        f_nh = self.f_v.xreplace(dict.fromkeys(self.u, 0)) if m else sm.zeros(0, 1)
        kinematics = (sm.eye(n), -sm.eye(n), sm.zeros(n, 1), B_v, f_nh)
        return dict(zip(rates, self.u)), kinematics

    def _refuse_joint_speeds_in_lagrange(self, source, equations, rates):
        """Joints define velocities with their speeds, but LagrangesMethod
        differentiates the Lagrangian with respect to q' only: with speeds
        other than the coordinate rates, the joints' velocities drop out of
        Lagrange's equations (or their speeds would pass for inputs). So a
        System or JointsMethod formed with LagrangesMethod needs joints whose
        speeds are the coordinate rates, and no other speed of the System may
        appear in the equations."""
        if source is self.lagrange:
            return
        rates = set(rates)
        if _is_system(source):
            speeds = [s for joint in source.joints for s in joint.speeds]
            speeds += [s for s in source.u if equations.has(s)]
        else:                                   # a JointsMethod: all its speeds are its joints'
            speeds = list(getattr(source, "u", []))
        wrong = list(dict.fromkeys(s for s in speeds if s not in rates))
        if wrong:
            kind = type(source).__name__
            raise ModelError(
                f"model {self.name!r}: the {kind} was formed with LagrangesMethod, but its speeds "
                f"{[_name(s) for s in wrong]} are not the coordinate rates, and Lagrange's equations "
                "differentiate only with respect to q': give each joint the rate of its coordinate "
                "as its speed (e.g. PinJoint(name, parent, child, coordinates=q, speeds=q.diff())), "
                "or form the equations with KanesMethod")

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

    # -- sensitivities ---------------------------------------------------------------
    def with_sensitivities(self, sensitivities, name=None):
        """The same model with the sensitivities to these parameters (as
        ``Model(..., sensitivities=...)``; None: none): a copy, the
        equations not formed again (e.g. a built-in model's). Named ``name``,
        by default ``<name>_sensitivities`` (beside the model's own build:
        ``generated/<name>_sensitivities``; the C functions' prefix)."""
        import copy

        model = copy.copy(self)
        model.sensitivity_parameters = self._take_sensitivities(sensitivities)
        if name is None:
            name = f"{self.name}_sensitivities" if model.sensitivity_parameters else self.name
        if not _IDENTIFIER.match(name):
            raise ModelError(f"model name {name!r} must be a C identifier")
        model.name = name
        return model

    @property
    def sensitivity_names(self):
        """The parameters the generated code differentiates A, B (and the
        outputs' C, D) with respect to, in the order of the parameters."""
        return [self.p_names[self.parameters.index(s)] for s in self.sensitivity_parameters]

    def _take_sensitivities(self, sensitivities):
        """The parameters of ``sensitivities`` (None: none; ``"all"``; names or
        symbols), in the order of the model's parameters."""
        if sensitivities is None:
            return []
        if isinstance(sensitivities, str):
            if sensitivities != "all":
                raise ModelError(f"model {self.name!r}: sensitivities must be 'all' or a list of "
                                 f"parameters (names or symbols), not {sensitivities!r}")
            return list(self.parameters)
        by_name = dict(zip(self.p_names, self.parameters))
        chosen = set()
        for item in sensitivities:
            symbol = by_name.get(item) if isinstance(item, str) else item
            if symbol not in self.parameters:
                raise ModelError(f"model {self.name!r}: sensitivities entry {item!r} is not a "
                                 f"parameter of the model ({', '.join(self.p_names)})")
            if symbol in chosen:
                raise ModelError(f"model {self.name!r}: sensitivities names {item!r} twice")
            chosen.add(symbol)
        return [s for s in self.parameters if s in chosen]

    # -- outputs -----------------------------------------------------------------
    def _take_outputs(self, outputs):
        """The names and the column Matrix of the output expressions (see the
        class docstring), checked: names, and only the model's own symbols."""
        if outputs is None:
            return [], sm.zeros(0, 1)
        if not isinstance(outputs, dict):
            raise ModelError(f"model {self.name!r}: outputs must be a dict name -> expression, "
                             f"not {type(outputs).__name__}")
        names, rows = [], []
        taken = {"coordinate": self.q_names, "speed": self.u_names, "input": self.r_names}
        for name, expression in outputs.items():
            if not isinstance(name, str) or not _IDENTIFIER.match(name):
                raise ModelError(f"model {self.name!r}: output name {name!r} must be a C identifier")
            for kind, known in taken.items():
                if name in known:
                    raise ModelError(
                        f"model {self.name!r}: output name {name!r} is the name of a {kind}; "
                        "state_space takes coordinates, speeds and outputs by name: choose "
                        "another name")
            try:
                expression = sm.sympify(expression)
            except (sm.SympifyError, TypeError) as error:
                raise ModelError(f"model {self.name!r}: output {name!r} is not a SymPy "
                                 f"expression: {error}") from None
            if isinstance(expression, (sm.MatrixBase, Vector)) or \
                    not isinstance(expression, sm.Expr):
                raise ModelError(f"model {self.name!r}: output {name!r} must be a scalar "
                                 f"expression, got {type(expression).__name__} (a vector "
                                 "gives one output per component: .dot(N.x), ...)")
            names.append(name)
            rows.append(expression)
        if len(set(names)) != len(names):
            raise ModelError(f"model {self.name!r}: output names must be distinct: {names}")
        matrix = sm.Matrix(rows) if rows else sm.zeros(0, 1)
        if self.kane is not None:
            matrix = self._solve_reactions(names, _without_auxiliary(matrix, self.kane))
        self._refuse_undefined_functions("output", matrix)
        allowed = self._states() | set(self.inputs)
        known = set(self.parameters) | set(multipliers(self.multipliers)) | {self.time}
        for name, row in zip(names, matrix):
            foreign = sorted({s for s in find_dynamicsymbols(row) if s not in allowed}, key=str)
            undeclared = sorted((s for s in row.free_symbols if s not in known), key=str)
            extra = [s for s in undeclared if isinstance(s, Multiplier)]
            if extra:
                raise ModelError(
                    f"model {self.name!r}: output {name!r} contains the multipliers "
                    f"{', '.join(map(str, extra))}, but the model has {self.multipliers} "
                    "(lambda_0 .. lambda_<m-1> of its m velocity constraints, in the multiplier "
                    "form only: reduction='multipliers')")
            if foreign or undeclared:
                readable = _readable_map([row])
                found = [str(s.xreplace(readable)) for s in foreign] + [str(s) for s in undeclared]
                raise ModelError(
                    f"model {self.name!r}: output {name!r} contains {', '.join(found)}, which "
                    f"{'is' if len(found) == 1 else 'are'} not among the coordinates "
                    f"{self.q_names}, the speeds {self.u_names}, their first time derivatives, "
                    f"the inputs {self.r_names}, time, the parameters {self.p_names} or the "
                    f"model's multipliers (codegen.multipliers({self.multipliers}))")
        return names, matrix

    def _solve_reactions(self, names, matrix):
        """The outputs with the reactions of auxiliary speeds replaced by
        their values. A reaction is an unknown of the auxiliary equations (Fr
        + Fr* of the auxiliary speeds = 0, the auxiliary speeds zero): a
        symbol of the loads that is not a coordinate, speed, input, parameter
        or time. The auxiliary equations are linear in the reactions, K R + g
        = 0; R = -K^-1 g where K is constant (a reaction along its auxiliary
        speed's direction: K = I) or diagonal. Anything else is refused with
        what to change (no symbolic inversion of a configuration-dependent K)."""
        equations = getattr(self.kane, "_aux_eq", None)
        if equations is None or not matrix.rows:
            return matrix
        declared = (self._states() | set(self.inputs) | set(self.parameters) | {self.time}
                    | set(multipliers(self.multipliers)))
        equations = _without_auxiliary(sm.Matrix(equations), self.kane)

        def unknowns_of(expression):
            found = set(find_dynamicsymbols(expression)) | expression.free_symbols
            return {s for s in found if s not in declared and not isinstance(s, sm.Derivative)}
        reactions = sorted(unknowns_of(equations), key=str)
        wanted = [s for s in reactions if any(row.has(s) for row in matrix)]
        if not wanted:
            return matrix
        used = [name for name, row in zip(names, matrix) if any(row.has(s) for s in wanted)]
        K = equations.jacobian(reactions)
        g = equations.xreplace({s: 0 for s in reactions})
        what = (f"model {self.name!r}: the outputs {used} hold the reactions "
                f"{', '.join(map(_name, wanted))} of auxiliary speeds")
        if K.rows != K.cols or any(unknowns_of(entry) & set(reactions) for entry in K):
            raise ModelError(
                f"{what}, which the {equations.rows} auxiliary equations do not determine one "
                f"by one (their unknowns: {', '.join(map(_name, reactions))}): give one auxiliary "
                "speed per reaction, along the reaction's direction, and declare the other "
                "symbols of the loads as inputs or parameters")
        if K.free_symbols - {self.time} or find_dynamicsymbols(K):
            if any(K[i, j] != 0 for i in range(K.rows) for j in range(K.cols) if i != j):
                raise ModelError(
                    f"{what}; their coefficients in the auxiliary equations are not constant "
                    "and couple them (no symbolic inversion is made): express "
                    "each reaction along its auxiliary speed's direction (its partial "
                    "velocity), as SymPy's examples do")
            if any(K[i, i] == 0 for i in range(K.rows)):
                raise ModelError(f"{what}, which the auxiliary equations do not determine "
                                 "(a reaction has no coefficient in its equation)")
            solution = [-g[i] / K[i, i] for i in range(K.rows)]
        else:
            if K.det() == 0:
                raise ModelError(f"{what}, which the auxiliary equations do not determine "
                                 "(their coefficients are singular)")
            solution = list(-(K.inv() * g))
        return matrix.xreplace(dict(zip(reactions, solution)))

    # -- checks ----------------------------------------------------------------
    def _check_sizes(self):
        n, o, l, m = self.n, self.o, self.l, self.m
        shapes = {"kinematic": (self.kinematic, n), "f_c": (self.f_c, l), "f_v": (self.f_v, m)}
        if self.dynamic is not None:
            shapes["dynamic"] = (self.dynamic, o - m + self.multipliers)
        for label, (matrix, rows) in shapes.items():
            if matrix.shape != (rows, 1):
                raise ModelError(
                    f"model {self.name!r}: {label} has shape {matrix.shape}, expected ({rows}, 1)")
        names = self.q_names + self.u_names
        if len(set(names)) != len(names):
            raise ModelError(f"model {self.name!r}: coordinate and speed names must be distinct: {names}")

    def _states(self):
        return set(self.q) | set(self.u) | set(self.qd) | set(self.ud)

    def _refuse_undefined_functions(self, label, rows, time_varying=None):
        """Refuse every undefined function (``sm.Function("g")``) that is not a
        function of time alone in ``rows`` (a column Matrix: "dynamic
        equation" 0, 1, ... for ``label`` "dynamic equation"); ``time_varying``:
        its :func:`_time_varying_atoms` if already known.

        SymPy's ``find_dynamicsymbols`` takes anything whose only free symbol
        is t for a dynamic symbol, so ``g(q(t))`` (and ``Derivative(g(q), q)``)
        would pass for an input: its value would be given at each call, and its
        derivative d g/d q, which belongs in A, would be lost without a word.
        An input is an undefined function of t alone, ``r(t)`` (or its time
        derivative ``r'(t)``, an input of its own, as SymPy's ``find_dynamicsymbols``
        finds it). That refuses, besides functions of coordinates, speeds and
        their rates, a function of an input, ``g(h(t))`` with h an input: its
        derivative d g/d h belongs in B. Functions of parameters (``g(k)``) or of
        expressions of t (``g(2 t)``) are refused too: nothing can evaluate
        them. (A ``sm.Function`` subclass that prints itself is not undefined
        and is left to the derivation, which refuses what it cannot
        differentiate.)
        """
        if not len(rows):
            return
        if time_varying is None:
            time_varying = _time_varying_atoms(rows)
        if not _undefined_functions_not_of_time(time_varying, self.time):
            return                            # the common case: one walk through the matrix
        for i, row in enumerate(rows):
            bad = _undefined_functions_not_of_time(_time_varying_atoms(row), self.time)
            if bad:
                raise ModelError(self._undefined_function_message(f"{label} {i}", bad[0], row))

    def _undefined_function_message(self, where, application, row):
        """The refusal of ``application`` (an undefined function not of t
        alone) found in the row ``where``: what it depends on, and what to do."""
        from sympy.core.function import AppliedUndef
        # g(q**2).diff(t) holds Subs(Derivative(g(xi), xi), xi, q**2): name g(q**2), not g(xi)
        for subs in row.atoms(sm.Subs):
            if application in subs.expr.atoms(AppliedUndef):
                application = application.xreplace(dict(zip(subs.variables, subs.point)))
                break
        readable = _readable_map([row])
        written = _abbreviated(application.xreplace(readable))
        function = application.func.__name__
        coordinates, speeds = set(self.q), set(self.u)

        def described(symbol):
            base = symbol.expr if isinstance(symbol, sm.Derivative) else symbol
            kind = ("coordinate" if base in coordinates else "speed" if base in speeds
                    else "a time-varying symbol that is not a state")
            if isinstance(symbol, sm.Derivative) and kind in ("coordinate", "speed"):
                kind = f"rate of a {kind}"
            return f"{symbol.xreplace(readable)} ({kind})"

        inside = _time_varying_arguments(application, self.time)
        states = [s for s in inside if (s.expr if isinstance(s, sm.Derivative) else s)
                  in coordinates | speeds]
        if states:
            depends = (f"depends on {', '.join(map(described, states))}, so it cannot be an input "
                       "(an input is a function of time alone): A needs its derivatives with "
                       "respect to the states, and they would be lost")
        elif inside:
            names = ", ".join(str(s.xreplace(readable)) for s in inside)
            depends = (f"is a function of {names}, not of time alone, so it cannot be an input: "
                       f"its derivative with respect to {names} (needed in B or A) would be lost")
        else:
            depends = ("has arguments that are not time alone, so it is no input r(t), and "
                       "nothing can evaluate it")
        return (f"model {self.name!r}: {where} contains the undefined function {written}, which "
                f"{depends}. Write {function} as an expression of its arguments (or a "
                f"sm.Function subclass with fdiff and a C printing method), or, if it is a signal "
                f"prescribed in time, make it a time-only input {function}(t) "
                f"(dynamicsymbols({function!r}))")

    def _refuse_inputs_outside_dynamics(self):
        states = self._states()
        for label, eqs in (("kinematic equations", self.kinematic),
                           ("configuration constraints f_c", self.f_c),
                           ("velocity constraints f_v", self.f_v)):
            extra = find_dynamicsymbols(eqs, exclude=states) if len(eqs) else set()
            if extra:
                raise ModelError(
                    f"model {self.name!r}: the {label} contain time-varying symbols "
                    f"{sorted(map(str, extra))} that are neither coordinates nor speeds; "
                    "only the dynamic equations may contain inputs (a prescribed function of "
                    "time is written in t itself, dynamicsymbols._t)")

    def _find_inputs(self, inputs, time_varying):
        """The inputs: given (checked), or every dynamic symbol of the dynamic
        equations that is not a state. ``time_varying``: the dynamic
        equations' :func:`_time_varying_atoms` (as SymPy's find_dynamicsymbols
        sees them: whatever has t as its only free symbol)."""
        states = self._states()
        found = sorted((s for s in time_varying if s.free_symbols == {self.time} and s not in states),
                       key=sm.default_sort_key)
        if inputs is None:
            return found
        inputs = list(inputs)
        for r in inputs:
            if r in states or not _is_function_of_time(r, self.time):
                raise ModelError(f"model {self.name!r}: input {r} must be a dynamic symbol r(t) "
                                 "(an undefined function of time alone, or its time derivative) "
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
        names = [str(s) for s in symbols]
        if len(set(names)) != len(names):
            raise ModelError(f"model {self.name!r}: parameter names must be distinct: {names}")
        return symbols, values

    def _refuse_undeclared_symbols(self, residuals):
        """Every constant symbol of the ``residuals`` must be a declared parameter."""
        used = set()
        for eqs in residuals:
            for expr in eqs:
                used |= expr.free_symbols
        used.discard(self.time)
        declared = set(self.parameters)
        undeclared = sorted((s for s in used if s not in declared), key=str)
        if undeclared:
            raise ModelError(
                f"model {self.name!r}: the equations contain symbols that are not declared "
                f"parameters: {', '.join(map(str, undeclared))}. Pass them in parameters={{...}} "
                "with default values")

    def _check_velocity_constraints_hold_df_c_dt(self, qd_of_u, k_kqdot, k_ku, f_k, k_nh, f_nh):
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
        model creation stays deterministic. What no combination reaches is
        compared with the size of the terms that make up the row (|J_c| |qd|
        and |df_c/dt|_q|), not with the row itself: a row that vanishes on
        every motion evaluates to rounding errors of those terms, and must
        pass (a unit quaternion whose kinematic equations keep lambda .
        lambda' = 0, with no velocity constraints: d f_c/dt is about 1e-17).
        A row is reported missing only if it fails at every point; if no point
        on the manifold can be found the check is skipped rather than refuse a
        model on weak evidence (unless f_v is empty).
        """
        if not self.l:
            return
        missing = _rows_outside_velocity_constraints(self, k_kqdot, k_ku, f_k, k_nh, f_nh)
        if missing is None and not self.m:
            # no point found to evaluate at; without velocity constraints the
            # model is wrong unless d f_c/dt vanishes identically, so refuse
            missing = {i: None for i in range(self.l)}
        if missing:
            self._refuse_missing_df_c_dt(qd_of_u, missing)

    def _refuse_missing_df_c_dt(self, qd_of_u, missing):
        """``missing``: the rows of d f_c/dt outside the velocity constraints,
        each with the indices of the speeds it involves at the points checked
        (None if unknown). ``qd_of_u``: q' in terms of u (a KanesMethod's own
        solve). Every step costs at most a bounded amount per row, whatever the
        size of the kinematic equations: the row is written with q' where
        q'(u) is large (the ball on a spinning disc: pages of trigonometry),
        and the speeds come from the numeric check, not from the expression."""
        t = self.time
        lines, speeds = [], set()
        rates_stay = False
        for i in missing:
            rate = self.f_c[i].diff(t)            # in q, q' and t: the size of f_c
            rates = [qd for qd in self.qd if rate.has(qd)]
            small = {qd: qd_of_u[qd] for qd in rates
                     if qd in qd_of_u and not _size_exceeds(qd_of_u[qd], 40)}
            if len(small) == len(rates):
                rate = rate.xreplace(small)       # in u: what the user can add as it is
            else:
                rates_stay = True
            lines.append(f"d/dt f_c[{i}] = {_abbreviated(rate.xreplace(_readable_map([rate])))}")
            speeds |= set(missing[i] or ())
        notes = []
        if speeds:
            notes.append(f"involving the speeds {', '.join(_name(self.u[j]) for j in sorted(speeds))}")
        if rates_stay:
            notes.append("q' may stay: KanesMethod and Model's velocity_constraints replace it by "
                         "the kinematic equations")
        candidates = [_name(self.u[j]) for j in sorted(speeds) if self.u[j] not in self.u_dependent]
        dependent = [_name(u) for u in self.u_dependent]
        have = (f"f_v has no rows" if not self.m else
                f"no combination of the {self.m} rows of f_v gives {'it' if len(lines) == 1 else 'them'}")
        raise ModelError(
            f"model {self.name!r}: the velocity constraints must include the time derivative of "
            f"the configuration constraints, but {have}: add " + "; ".join(lines)
            + " to velocity_constraints" + (f" ({'; '.join(notes)})" if notes else "")
            + f", with u_dependent={dependent} plus one more dependent speed per added "
            f"constraint (one of {', '.join(candidates) or 'the speeds'})"
            + ("" if not self.m else ", or correct the velocity constraints"))

    # -- default partition of a LagrangesMethod -----------------------------------------
    def _choose_lagrange_partition(self, source, dependent_q, dependent_u):
        """The default dependent coordinates and speeds of a LagrangesMethod:
        given (``dependent_q``, ``dependent_u``), a System's ``q_dep`` and
        ``u_dep``, or chosen by :func:`_independent_columns` (see the class
        docstring)."""
        l, m = len(self.f_c), len(self.f_v)
        rates = {qi.diff(self.time): ui for qi, ui in zip(self.q, self.u)}
        if dependent_q is None and dependent_u is None and _is_system(source):
            system_q, system_u = list(source.q_dep), list(source.u_dep)
            if len(system_q) == l and len(system_u) == m and all(s in rates for s in system_u):
                dependent_q, dependent_u = system_q, system_u
        if dependent_q is not None:
            self.q_dependent = self._resolve(dependent_q, self.q, {}, "dependent_q", l)
        elif l:
            columns = _independent_columns(self, self.f_c.jacobian(self.q), l, [], "holonomic constraints")
            self.q_dependent = [self.q[i] for i in columns or range(self.n - l, self.n)]
        if dependent_u is not None:
            self.u_dependent = self._resolve(dependent_u, self.u, rates, "dependent_u", m)
        elif m:
            first = [self.q.index(qi) for qi in self.q_dependent]   # the rates of q_dep
            columns = _independent_columns(self, self.f_v.jacobian(self.u), m, first, "velocity constraints")
            self.u_dependent = [self.u[i] for i in columns or range(self.o - m, self.o)]

    def _resolve(self, chosen, symbols, aliases, label, count):
        """Symbols (or names, or ``aliases`` keys) ``chosen`` among ``symbols``,
        in the model's order."""
        by_name = {_name(s): s for s in symbols}
        resolved = []
        for item in chosen:
            symbol = by_name.get(item) if isinstance(item, str) else aliases.get(item, item)
            if symbol not in symbols:
                raise ModelError(f"model {self.name!r}: {label} entry {item!r} is not one of "
                                 f"{list(by_name)}")
            resolved.append(symbol)
        if len(set(resolved)) != len(resolved) or len(resolved) != count:
            raise ModelError(f"model {self.name!r}: {label} needs {count} distinct entries (one per "
                             f"{'configuration' if label == 'dependent_q' else 'velocity'} "
                             f"constraint), got {list(chosen)}")
        return [s for s in symbols if s in set(resolved)]

    # -- identity -------------------------------------------------------------
    def fingerprint(self):
        """Hash of everything that determines the generated code: the names,
        the parameter values and the structure of every expression
        (:func:`_structure_digest`)."""
        h = hashlib.sha256()
        for part in (self.name, self.description, self.reduction, repr(self.parameter_values)):
            h.update(part.encode())
            h.update(b"\x00")
        sequences = [self.q, self.u, self.q_dependent, self.u_dependent, self.inputs,
                     self.parameters, self.kinematic, self.f_c, self.f_v, self.dynamic]
        if self.y_names:      # a model without outputs keeps the fingerprint it had
            h.update(repr(self.y_names).encode())
            sequences.append(self.outputs)
        if self.sensitivity_parameters:   # ... and one without sensitivities too
            h.update(repr(["sensitivities", *self.sensitivity_names]).encode())
        h.update(_structure_digest(sequences).encode())
        return h.hexdigest()

    def __repr__(self):
        return (f"Model({self.name!r}: n={self.n} coordinates ({self.l} dependent), "
                f"o={self.o} speeds ({self.m} dependent), {self.s} inputs, "
                f"{len(self.parameters)} parameters)")


class Multiplier(sm.Symbol):
    """lambda_k, the multiplier of the velocity constraint k in the
    multiplier form of the dynamics (for outputs)."""


def multipliers(count):
    """The multipliers lambda_0 .. lambda_<count-1> of the velocity
    constraints, for a model's outputs (``Model(..., outputs=...)``; the
    multiplier form's dynamics ``F + B_v^T lambda = 0``)."""
    return [Multiplier(f"lambda_{k}", real=True) for k in range(count)]


def _structure_digest(sequences):
    """SHA-256 of the expressions of ``sequences`` (lists or matrices), node by
    node: each distinct node once, as its kind and the numbers of its
    arguments (a leaf as its ``srepr``: names and assumptions), then each
    sequence as the numbers of its entries. The same as hashing their
    ``srepr`` would tell, but a subexpression that occurs many times is
    written once (0.01 s instead of 0.5 s for the 32-link closed chain).
    Equal subexpressions get one number whether or not they are one object."""
    from sympy.core.function import AppliedUndef

    h = hashlib.sha256()
    # by value, not by id: whether two equal subexpressions are one object
    # depends on SymPy's cache (its history in the process), the digest must not
    numbers = {}

    def number(node):
        key = (type(node), node)
        found = numbers.get(key)
        if found is not None:
            return found
        if node.args:
            children = ",".join(str(number(arg)) for arg in node.args)
            head = sm.srepr(node.func) if isinstance(node, AppliedUndef) else type(node).__name__
            h.update(f"{head}({children})\n".encode())
        else:
            h.update(f"{sm.srepr(node)}\n".encode())
        numbers[key] = len(numbers) + 1
        return numbers[key]

    for sequence in sequences:
        shape = sequence.shape if isinstance(sequence, sm.MatrixBase) else (len(sequence),)
        entries = [number(sm.sympify(entry)) for entry in sequence]
        h.update(f"{shape}: {entries}\n".encode())
    return h.hexdigest()


def _rows_outside_velocity_constraints(model, k_kqdot, k_ku, f_k, k_nh, f_nh, points=3, attempts=15,
                                       tolerance=1e-7):
    """The rows of d f_c/dt that are not combinations of the rows of f_v at
    any of ``points`` random points on the constraint manifold (see
    Model._check_velocity_constraints_hold_df_c_dt), as a dict: row index ->
    the indices of the speeds the row involves at those points; None if no
    point could be evaluated.

    At a point, with qd = Q u + qd0 from the kinematic equations
    (Q = -K^-1 k_ku, qd0 = -K^-1 f_k), row i of d f_c/dt is

        [G_i  g0_i] = [J_c,i Q   J_c,i qd0 + df_c,i/dt|_q]

    and what no combination of the rows of [B_v f_v0] reaches must be small
    compared with the terms that make up the row,

        [|J_c,i| |Q|   |J_c,i| |qd0| + |df_c,i/dt|_q|]   (entrywise absolute values),

    the size of the rounding errors of a row that vanishes on every motion.
    """
    import numpy as np

    n, o = model.n, model.o
    t = model.time
    q_plain = sm.symbols(f"q_0:{n}", real=True)
    u_plain = sm.symbols(f"u_0:{o}", real=True)
    t_plain = sm.Symbol("t_", real=True)
    to_plain = dict(zip(model.q, q_plain)) | dict(zip(model.u, u_plain)) | {t: t_plain}
    f_c = model.f_c.xreplace(to_plain)
    differentiate = Differentiator(list(q_plain) + [t_plain])
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
    involved = [set() for _ in range(model.l)]
    valid = 0
    for attempt in range(attempts):
        # small coordinates first, then whole turns (loops that close only far from q = 0)
        q = rng.uniform(-1.0, 1.0, n) * (0.5, 1.0, math.pi)[attempt % 3]
        u = rng.uniform(-1.0, 1.0, o)
        time = float(rng.uniform(0.1, 1.0))
        # Newton on f_c for the dependent coordinates, with minimum-norm
        # (truncated) steps: constraints given to Model may be redundant
        for _ in range(80):
            residual, J_c = values(q, u, time)[:2]
            if not (np.all(np.isfinite(residual)) and np.all(np.isfinite(J_c))):
                break
            if np.abs(residual).max() <= 1e-11 * (1.0 + np.abs(q).max()):
                break
            try:
                q[dependent] -= np.linalg.lstsq(J_c[:, dependent], residual.ravel(), rcond=1e-8)[0]
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
        Q = -np.linalg.solve(K, k_u)                          # qd = Q u + qd0
        qd0 = -np.linalg.solve(K, k_0)
        rates = np.column_stack([J_c @ Q, J_c @ qd0 + f_ct])  # [G g0], l x (o + 1)
        terms = np.column_stack([np.abs(J_c) @ np.abs(Q), np.abs(J_c) @ np.abs(qd0) + np.abs(f_ct)])
        constraints = np.column_stack([B_v, f_v0.ravel()])    # m x (o + 1)
        for i, row in enumerate(rates):
            scale = np.linalg.norm(terms[i])
            if scale == 0.0:
                continue
            unreached = row
            if model.m:
                combination = np.linalg.lstsq(constraints.T, row, rcond=None)[0]
                unreached = row - constraints.T @ combination
            if np.linalg.norm(unreached) > tolerance * scale:
                failures[i] += 1
                involved[i] |= {j for j in range(o) if abs(row[j]) > tolerance * scale}
        valid += 1
        if valid == points:
            break
    if not valid:
        return None
    return {i: sorted(involved[i]) for i in range(model.l) if failures[i] == valid}


def _is_kanes_method(method):
    from sympy.physics.mechanics import KanesMethod
    return isinstance(method, KanesMethod)


def _is_system(source):
    from sympy.physics.mechanics import System
    return isinstance(source, System)


def _equations_of_motion(equations, name):
    """``(method, source)``: the KanesMethod or LagrangesMethod behind what the
    user passed (itself, or a ``System``'s or ``JointsMethod``'s after
    ``form_eoms()``) and what it came from; anything else is refused with a
    message that says what to pass."""
    from sympy.physics.mechanics import KanesMethod, LagrangesMethod

    if isinstance(equations, (KanesMethod, LagrangesMethod)):
        return equations, equations
    inner = getattr(equations, "eom_method", None) or getattr(equations, "method", None)
    if isinstance(inner, (KanesMethod, LagrangesMethod)):
        return inner, equations
    kind = type(equations).__name__
    if inner is None and hasattr(equations, "form_eoms"):
        raise ModelError(f"model {name!r}: call {kind}.form_eoms() before Model(...)")
    raise ModelError(f"model {name!r}: expected a sympy.physics.mechanics KanesMethod or "
                     f"LagrangesMethod (or a System/JointsMethod after form_eoms()), got {kind}")


def _independent_columns(model, jacobian, count, first, label, complete=False):
    """Indices of ``count`` columns of ``jacobian`` (rows: constraints, columns:
    coordinates or speeds) that are linearly independent at a few seeded random
    points (coordinates and speeds in [-1, 1], the default parameters): the
    columns ``first`` if they are, then the others from the last one
    backwards, each kept if it adds to the rank at every point. So the last
    coordinates become the dependent ones, as in KanesMethod's ``q = q_ind +
    q_dep``, except those the constraints cannot determine (a column that
    vanishes, or one that repeats another). Empty if no point could be
    evaluated; a ModelError if the constraints themselves are dependent,
    unless ``complete``: then the independent columns are completed with
    the last others to ``count`` (redundant constraints given to Model)."""
    import numpy as np

    t = model.time
    q_plain = sm.symbols(f"q_0:{model.n}", real=True)
    u_plain = sm.symbols(f"u_0:{model.o}", real=True)
    t_plain = sm.Symbol("t_", real=True)
    to_plain = dict(zip(model.q, q_plain)) | dict(zip(model.u, u_plain)) | {t: t_plain}
    evaluate = sm.lambdify([q_plain, u_plain, t_plain, model.parameters],
                           jacobian.xreplace(to_plain), "numpy", cse=True)
    p = [float(v) for v in model.parameter_values]
    rng = np.random.default_rng(20240910)
    points = []
    for _ in range(10):
        with np.errstate(all="ignore"):
            value = np.asarray(evaluate(rng.uniform(-1.0, 1.0, model.n), rng.uniform(-1.0, 1.0, model.o),
                                        float(rng.uniform(0.1, 1.0)), p), dtype=float)
        if np.all(np.isfinite(value)):
            points.append(value.reshape(jacobian.shape))
        if len(points) == 3:
            break
    if not points:
        return []

    def independent(columns):
        for value in points:
            tolerance = 1e-9 * max(np.abs(value).max(), 1e-300)
            if np.linalg.matrix_rank(value[:, columns], tol=tolerance) < len(columns):
                return False
        return True

    chosen = list(first) if first and independent(list(first)) else []
    for j in reversed(range(jacobian.shape[1])):
        if len(chosen) == count:
            break
        if j not in chosen and independent(chosen + [j]):
            chosen.append(j)
    if len(chosen) < count and complete:
        chosen += [j for j in reversed(range(jacobian.shape[1])) if j not in chosen][:count - len(chosen)]
    if len(chosen) < count:
        raise ModelError(
            f"model {model.name!r}: the {count} {label} of the LagrangesMethod are not independent "
            f"(their Jacobian has rank {len(chosen)} at random points): remove the redundant ones")
    return sorted(chosen)


def _constraint_rows(rows, label, name):
    """A column Matrix of constraint expressions given as a sequence (or Matrix)."""
    if isinstance(rows, (str, sm.Basic)) and not isinstance(rows, sm.MatrixBase):
        raise ModelError(f"model {name!r}: {label} must be a sequence of expressions, got {rows!r}")
    try:
        entries = [sm.sympify(entry, strict=True) for entry in rows]
    except (TypeError, sm.SympifyError) as error:
        raise ModelError(f"model {name!r}: {label} must be a sequence of SymPy expressions "
                         f"({error})") from None
    bad = [entry for entry in entries if not isinstance(entry, sm.Expr) or entry.is_Matrix]
    if bad:
        raise ModelError(f"model {name!r}: {label} entries must be scalar expressions (a Vector "
                         f"needs .dot(N.x), ...), got {bad[0]!r}")
    return sm.Matrix(entries) if entries else sm.zeros(0, 1)


def _time_varying_atoms(expression):
    """The applied undefined functions and the derivatives in ``expression``
    (a Matrix or an expression), in one walk through it: what
    ``find_dynamicsymbols`` looks at."""
    from sympy.core.function import AppliedUndef
    return expression.atoms(AppliedUndef, sm.Derivative)


def _undefined_functions_not_of_time(time_varying, time):
    """The applications of undefined functions among ``time_varying`` (see
    :func:`_time_varying_atoms`) whose arguments are not exactly ``(t,)``,
    in a stable order."""
    from sympy.core.function import AppliedUndef
    found = [f for f in time_varying if isinstance(f, AppliedUndef) and f.args != (time,)]
    return sorted(found, key=sm.default_sort_key)


def _without_auxiliary(matrix, kane):
    """``matrix`` with the auxiliary speeds of ``kane`` and their derivatives
    set to zero: they are zero on every motion (KanesMethod sets them to zero
    in Fr*; here in every equation)."""
    auxiliary = sympy_adapter.auxiliary_speeds(kane)
    if not auxiliary:
        return sm.Matrix(matrix) if isinstance(matrix, sm.MatrixBase) else matrix
    t = dynamicsymbols._t
    zero = {ua.diff(t): 0 for ua in auxiliary} | {ua: 0 for ua in auxiliary}
    return (sm.Matrix(matrix) if isinstance(matrix, sm.MatrixBase) else matrix).xreplace(zero)


def _time_varying_arguments(application, time):
    """The time-varying symbols among the arguments of ``application``:
    dynamic symbols r(t) and their time derivatives, a derivative as a whole
    (q'(t), not also the q(t) inside it)."""
    from sympy.core.function import AppliedUndef
    arguments = sm.Tuple(*application.args)
    rates = [d for d in arguments.atoms(sm.Derivative) if _is_function_of_time(d, time)]
    without_rates = arguments.xreplace({d: sm.Dummy() for d in rates})
    functions = [f for f in without_rates.atoms(AppliedUndef) if f.args == (time,)]
    return sorted(functions + rates, key=sm.default_sort_key)


def _is_function_of_time(expression, time):
    """``r(t)`` (an undefined function of t alone: a coordinate, a speed or an
    input) or a time derivative of one."""
    from sympy.core.function import AppliedUndef
    if isinstance(expression, sm.Derivative):
        return (all(variable == time for variable, _ in expression.variable_count)
                and _is_function_of_time(expression.expr, time))
    return isinstance(expression, AppliedUndef) and expression.args == (time,)


def _readable_map(expressions):
    """x(t) -> x and its time derivatives -> x', x'' (plain symbols) for the
    dynamic symbols in ``expressions``: the names a user wrote, for messages.
    Apply with xreplace (derivatives are whole nodes, replaced first)."""
    time = dynamicsymbols._t
    mapping = {}
    for expression in expressions:
        for node in expression.atoms(sm.Derivative):
            if _is_function_of_time(node, time):
                order = sum(count for _, count in node.variable_count)
                mapping[node] = sm.Symbol(_name(node.expr) + "'" * order)
        for node in find_dynamicsymbols(expression):
            if _is_function_of_time(node, time) and not isinstance(node, sm.Derivative):
                mapping[node] = sm.Symbol(_name(node))
    return mapping


def _size_exceeds(expression, limit):
    """Whether ``expression`` has more than ``limit`` nodes; the cost is
    bounded by ``limit``, whatever the size of the expression."""
    for count, _ in enumerate(sm.preorder_traversal(expression), start=1):
        if count > limit:
            return True
    return False


def _abbreviated(expression, limit=200):
    """``str(expression)`` cut to about ``limit`` characters, at a cost bounded
    by ``limit`` (printing a large expression whole can take minutes: the
    printer orders the terms of every sum). A large sum shows its first small
    terms and how many more it has; anything else that is large is named by
    its kind."""
    if not _size_exceeds(expression, limit):
        text = str(expression)
        return text if len(text) <= limit else text[:limit] + " ..."
    if isinstance(expression, sm.Add):
        shown, length = [], 0
        for term in expression.args:
            if length > limit:
                break
            if not _size_exceeds(term, limit // 4):
                shown.append(str(term))
                length += len(shown[-1]) + 3
        rest = len(expression.args) - len(shown)
        return " + ".join(shown + [f"... ({rest} more terms)"])
    return f"<a {type(expression).__name__} of more than {limit} operations>"


def _name(symbol):
    """The user's name of a coordinate, speed, input or parameter."""
    if isinstance(symbol, sm.Function) and isinstance(symbol.func, sm.core.function.UndefinedFunction):
        return symbol.func.__name__
    return str(symbol)
