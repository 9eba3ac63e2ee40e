"""LagrangesMethod models (issue 12): the same system written with
LagrangesMethod and with KanesMethod (speeds the coordinate rates, so the
states correspond one to one) gives the same A and B to rounding (Parsa, "The
Lagrangian derivation of Kane's equations"), and both agree with independent
references:

* the Kane form of the same system, built through the pipeline;
* constrained finite differences of SymPy's own Lagrange equations
  (``mass_matrix_full`` with the multiplier columns, ``forcing_full``;
  tests/lagrange_models/lagrange_reference.py), which use nothing of the
  Model's translation;
* closed forms: the Cartesian pendulum hanging (A = [[0, 1], [-g/L, 0]],
  B = [[0], [1/m]], eigenvalues +/- i sqrt(g/L)), Peterson's rolling disk
  upright (+/- 2 sqrt(1 - 3 v^2)/sqrt(5) and six zeros), the pendulum in its
  angle without constraints.

Models (tests/lagrange_models/): the pendulum in Cartesian coordinates (one
holonomic constraint), a four-bar linkage (two holonomic constraints, a loop)
and the rolling disk (one holonomic and two nonholonomic constraints).
"""

import math
from collections import namedtuple

import numpy as np
import pytest
import sympy as sm
import sympy.physics.mechanics as me

import codegen
from codegen import Model
from codegen.errors import ModelError

from lagrange_models import cartesian_pendulum, fourbar, rolling_disk
from lagrange_models.lagrange_reference import build_both_ways
from reference import KaneReference, assert_matrices_close

SYSTEMS = {"pendulum": cartesian_pendulum, "fourbar": fourbar, "disk": rolling_disk}

Case = namedtuple("Case", "name source lagrange_model lagrange kane ref kane_ref points")


class _Built(dict):
    """Each system built both ways once per module."""

    def __init__(self, build_dir):
        super().__init__()
        self.build_dir = build_dir

    def __missing__(self, name):
        source = SYSTEMS[name]
        lagrange_model, kane_model = source.make_lagrange(), source.make_kane()
        lagrange, kane, ref, points = build_both_ways(lagrange_model, kane_model, self.build_dir,
                                                      source.POINTS)
        kane_ref = KaneReference.from_model(kane_model)
        self[name] = Case(name, source, lagrange_model, lagrange, kane, ref, kane_ref, points)
        return self[name]


@pytest.fixture(scope="module")
def built(build_dir):
    return _Built(build_dir)


@pytest.fixture(scope="module", params=list(SYSTEMS))
def case(request, built):
    return built[request.param]


def kane_names(case):
    """Lagrange name -> Kane name of every coordinate and speed."""
    names = {name: name for name in case.lagrange.q_names}
    names.update({f"{q}_rate": u for q, u in zip(case.lagrange.q_names, case.source.KANE_SPEEDS)})
    return names


def to_kane(case, q, u):
    """A Lagrange point (q, u = q') in the Kane form's order."""
    names = kane_names(case)
    q_kane, u_kane = np.empty(len(q)), np.empty(len(u))
    for name, value in zip(case.lagrange.q_names, q):
        q_kane[case.kane.q_names.index(names[name])] = value
    for name, value in zip(case.lagrange.u_names, u):
        u_kane[case.kane.u_names.index(names[name])] = value
    return q_kane, u_kane


# -- the same system both ways -----------------------------------------------------------------


def test_speeds_are_the_coordinate_rates_named_rate(case):
    model = case.lagrange_model
    assert model.u_names == [f"{name}_rate" for name in model.q_names]
    assert model.kinematic == sm.Matrix(model.qd) - sm.Matrix(model.u)
    assert model.multipliers == model.m == len(case.lagrange_model.f_v)
    # the same states as the Kane form, in the same order
    names = kane_names(case)
    assert tuple(names[name] for name in case.lagrange.state_names) == case.kane.state_names


def test_same_A_and_B_as_the_kane_form(case):
    for q, u, r in case.points:
        q_kane, u_kane = to_kane(case, q, u)
        assert np.abs(np.concatenate(case.kane.constraint_residuals(q_kane, u_kane))).max() < 1e-12
        A, B = case.lagrange.linearize(q, u, r)
        A_kane, B_kane = case.kane.linearize(q_kane, u_kane, r)
        assert np.abs(A).max() > 1.0
        assert_matrices_close(A, A_kane, 1e-10, f"{case.name} A at q={q}")
        assert_matrices_close(B, B_kane, 1e-10, f"{case.name} B at q={q}")


def test_state_derivative_matches_sympy_lagrange_equations(case):
    for q, u, r in case.points:
        qd, ud = case.lagrange.state_derivative(q, u, r)
        qd_ref, ud_ref = case.ref.state_derivative(q, u, r)
        assert_matrices_close(np.concatenate([qd, ud]), np.concatenate([qd_ref, ud_ref]), 1e-11)


def test_linearize_matches_constrained_finite_differences_of_sympy_lagrange(case):
    for q, u, r in case.points:
        A, B = case.lagrange.linearize(q, u, r)
        A_fd, B_fd = case.ref.constrained_fd_AB(q, u, r)
        assert_matrices_close(A, A_fd, 1e-6, f"{case.name} A at q={q}")
        assert_matrices_close(B, B_fd, 1e-6, f"{case.name} B at q={q}")


def test_another_partition_agrees_with_the_kane_form_and_finite_differences(built):
    """The four-bar with the crank dependent (q1, q3 and their rates): any
    partition works at run time, as for a KanesMethod with multipliers."""
    c = built["fourbar"]
    dq, du = ["q1", "q3"], ["q1_rate", "q3_rate"]
    for q, u, r in c.points:
        A, B = c.lagrange.linearize(q, u, r, dependent_q=dq, dependent_u=du)
        q_kane, u_kane = to_kane(c, q, u)
        A_kane, B_kane = c.kane.linearize(q_kane, u_kane, r, dependent_q=dq, dependent_u=["u1", "u3"])
        assert_matrices_close(A, A_kane, 1e-10)
        assert_matrices_close(B, B_kane, 1e-10)
        A_fd, B_fd = c.ref.constrained_fd_AB(q, u, r, dependent_q=[0, 2], dependent_u=[0, 2])
        assert_matrices_close(A, A_fd, 1e-6)
        assert_matrices_close(B, B_fd, 1e-6)


# -- closed forms -----------------------------------------------------------------------------


def test_cartesian_pendulum_hanging_closed_form(built):
    c = built["pendulum"]
    q, u, r = c.source.HANGING
    A, B = c.lagrange.linearize(q, u, r)
    A_expected, B_expected = c.source.hanging_AB()
    assert_matrices_close(A, A_expected, 1e-13)
    assert_matrices_close(B, B_expected, 1e-13)
    p = c.source.PARAMETERS
    frequency = math.sqrt(p["g"] / p["L"])
    assert np.allclose(sorted(np.linalg.eigvals(A), key=lambda z: z.imag),
                       [-1j * frequency, 1j * frequency], atol=1e-12)


@pytest.mark.parametrize("v", [0.3, 0.5, 0.8])
def test_rolling_disk_upright_closed_form(built, v):
    c = built["disk"]
    q, u = c.lagrange.complete(*c.source.upright(v))
    def ordered(values):      # by real, then imaginary part, rounding noise aside
        return sorted(values, key=lambda z: (round(z.real, 9), round(z.imag, 9)))
    eigenvalues = np.linalg.eigvals(c.lagrange.linearize(q, u)[0])
    np.testing.assert_allclose(ordered(eigenvalues), ordered(c.source.upright_eigenvalues(v)), atol=1e-12)


def _angle_pendulum(inputs=None):
    """The pendulum in its angle q from the downward vertical, no constraints,
    gravity as a force and a torque T at the pivot."""
    q, T = me.dynamicsymbols("q T")
    m, g, l = sm.symbols("m g l")
    N = me.ReferenceFrame("N")
    A = N.orientnew("A", "Axis", [q, N.z])
    O = me.Point("O")
    O.set_vel(N, 0)
    P = O.locatenew("P", l * A.x)
    P.v2pt_theory(O, N, A)
    lagrange = me.LagrangesMethod(me.Lagrangian(N, me.Particle("bob", P, m)), [q],
                                  forcelist=[(P, m * g * N.x), (A, T * N.z)], frame=N)
    lagrange.form_lagranges_equations()
    return Model(lagrange, {m: 0.7, g: 9.81, l: 1.6}, inputs=inputs, name="lagrange_angle_pendulum")


def test_unconstrained_pendulum_has_no_multipliers_and_the_closed_form(build_dir):
    model = _angle_pendulum()
    assert (model.l, model.m, model.multipliers, model.reduction) == (0, 0, 0, "none")
    assert model.r_names == ["T"]                       # found without being declared
    pendulum = codegen.build(model, output_dir=build_dir)
    A, B = pendulum.linearize([0.0], [0.0], [0.0])
    assert pendulum.state_names == ("q", "q_rate")
    assert_matrices_close(A, [[0.0, 1.0], [-9.81 / 1.6, 0.0]], 1e-13)
    assert_matrices_close(B, [[0.0], [1.0 / (0.7 * 1.6**2)]], 1e-13)


# -- the model stage ------------------------------------------------------------------------------


def _sled(**kwargs):
    """Chaplygin sled in Lagrange's form: q = [x, y, theta], no sideways slip
    at the centre, -sin(theta) x' + cos(theta) y' = 0 (free of theta')."""
    x, y, theta = me.dynamicsymbols("x y theta")
    m, I = sm.symbols("m I")
    N = me.ReferenceFrame("N")
    B = N.orientnew("B", "Axis", [theta, N.z])
    O = me.Point("O")
    O.set_vel(N, 0)
    G = O.locatenew("G", x * N.x + y * N.y)
    G.set_vel(N, x.diff() * N.x + y.diff() * N.y)
    body = me.RigidBody("sled", G, B, m, (me.inertia(B, 0, 0, I), G))
    lagrange = me.LagrangesMethod(
        me.Lagrangian(N, body), [x, y, theta], frame=N,
        nonhol_coneqs=[-sm.sin(theta) * x.diff() + sm.cos(theta) * y.diff()])
    lagrange.form_lagranges_equations()
    return Model(lagrange, {m: 1.0, I: 0.2}, name="lagrange_sled", **kwargs)


def test_default_partition_avoids_speeds_the_constraints_do_not_hold():
    """The last speed whose column of B_v is independent: theta' does not
    appear in the sled's constraint, so y' is dependent (not theta')."""
    model = _sled()
    assert (model.q_dependent, [str(s) for s in model.u_dependent]) == ([], ["y_rate(t)"])
    assert model.multipliers == 1 and model.reduction == "multipliers"


def test_partition_given_by_name_symbol_or_coordinate_derivative():
    x = me.dynamicsymbols("x")
    by_name = _sled(dependent_u=["x_rate"])
    by_symbol = _sled(dependent_u=[me.dynamicsymbols("x_rate")])
    by_derivative = _sled(dependent_u=[x.diff()])
    assert by_name.u_dependent == by_symbol.u_dependent == by_derivative.u_dependent \
        == [me.dynamicsymbols("x_rate")]
    assert by_name.fingerprint() == by_derivative.fingerprint() != _sled().fingerprint()
    # the pendulum: x dependent as asked (y, the default, is singular hanging)
    pendulum = cartesian_pendulum.make_lagrange()
    assert [str(s) for s in pendulum.q_dependent + pendulum.u_dependent] == ["x(t)", "x_rate(t)"]
    default = cartesian_pendulum.make_lagrange(dependent_q=None)
    assert [str(s) for s in default.q_dependent + default.u_dependent] == ["y(t)", "y_rate(t)"]
    assert default.fingerprint() != pendulum.fingerprint()


def test_lagrange_and_kane_forms_have_different_fingerprints():
    lagrange, kane = cartesian_pendulum.make_lagrange(), cartesian_pendulum.make_kane()
    kane.name = lagrange.name
    assert lagrange.fingerprint() != kane.fingerprint()


@pytest.mark.parametrize("kwargs, message", [
    (dict(dependent_u=["theta_rate"]), None),      # accepted: singular, but a valid choice
    (dict(dependent_u=["z_rate"]), r"dependent_u entry 'z_rate' is not one of \['x_rate'"),
    (dict(dependent_u=["x_rate", "y_rate"]), r"dependent_u needs 1 distinct entries"),
    (dict(dependent_q=["x"]), r"dependent_q needs 0 distinct entries"),
    (dict(reduction="kane"), r"reduction='kane' needs a KanesMethod's reduced equations"),
])
def test_partition_and_reduction_arguments_are_checked(kwargs, message):
    if message is None:
        assert [str(s) for s in _sled(**kwargs).u_dependent] == ["theta_rate(t)"]
        return
    with pytest.raises(ModelError, match=message):
        _sled(**kwargs)


def test_dependent_arguments_are_refused_for_a_kanes_method():
    kane = cartesian_pendulum.make_kane().kane
    with pytest.raises(ModelError, match="dependent_q and dependent_u are for a LagrangesMethod"):
        Model(kane, {s: 1.0 for s in sm.symbols("m L g")}, dependent_q=["y"], name="kane_pendulum")


def _lagrange(hol=(), nonhol=(), coordinates="x y"):
    x, y = me.dynamicsymbols(coordinates)[:2]
    m = sm.Symbol("m")
    N = me.ReferenceFrame("N")
    P = me.Point("P")
    P.set_vel(N, x.diff() * N.x + y.diff() * N.y)
    lagrange = me.LagrangesMethod(me.Lagrangian(N, me.Particle("p", P, m)), [x, y], frame=N,
                                  hol_coneqs=[c(x, y) for c in hol] or None,
                                  nonhol_coneqs=[c(x, y) for c in nonhol] or None)
    return lagrange, {m: 1.0}


@pytest.mark.parametrize("hol, nonhol, message", [
    ((), (lambda x, y: x.diff()**2 - y.diff(),), r"must be linear in the coordinate rates"),
    ((), (lambda x, y: x.diff() - me.dynamicsymbols("w"),),
     r"constraints contain time-varying symbols \['w\(t\)'\] that are neither coordinates nor "
     r"coordinate rates"),
    ((lambda x, y: x - y, lambda x, y: 2 * x - 2 * y), (),
     r"the 2 holonomic constraints of the LagrangesMethod are not independent"),
])
def test_constraints_the_model_cannot_use_are_refused(hol, nonhol, message):
    lagrange, parameters = _lagrange(hol, nonhol)
    lagrange.form_lagranges_equations()
    with pytest.raises(ModelError, match=message):
        Model(lagrange, parameters, name="refused")


def test_a_symbol_named_like_a_rate_is_refused():
    x, x_rate = me.dynamicsymbols("x x_rate")
    N = me.ReferenceFrame("N")
    P = me.Point("P")
    P.set_vel(N, x.diff() * N.x)
    lagrange = me.LagrangesMethod(me.Lagrangian(N, me.Particle("p", P, 1)), [x],
                                  forcelist=[(P, x_rate * N.x)], frame=N)
    lagrange.form_lagranges_equations()
    with pytest.raises(ModelError, match=r"named <coordinate>_rate, but the equations already "
                                         r"contain \['x_rate'\]"):
        Model(lagrange, {}, name="clash")


def test_an_unformed_lagrange_is_refused_without_mentioning_kanes_equations():
    lagrange, parameters = _lagrange()
    with pytest.raises(ModelError, match=r"call form_lagranges_equations\(\)") as error:
        Model(lagrange, parameters, name="unformed")
    assert "kanes_equations" not in str(error.value)
