"""Constraints given to Model beside a KanesMethod of the unconstrained system
(issue 11, item 7), including redundant ones that SymPy's KanesMethod refuses.

* A parallelogram linkage with a third crank (tests/user_models/
  redundant_parallelogram.py): 4 configuration constraints of rank 3 in 4
  coordinates, one degree of freedom. Builds; residuals against the hand
  form; linearize, complete and state_derivative raise the rank-deficiency
  error; linearize_local gives one degree of freedom and the closed form
  I phi'' = -c cos phi + T (eigenvalues, the 2 x 2 A and B in the chart).
* A spherical pendulum in x, y, z with its length constraint written twice
  (rank 1 of 2 everywhere): two degrees of freedom, +/- i sqrt(g/L) twice
  hanging down.
* Both against the multiplier-form reference (codegen.reference.KaneReference,
  given the same constraints, formed here with SymPy, not by Model) at
  moving, non-equilibrium points.
* Without redundancy the new path is the old one: the two-crank
  parallelogram with its constraints given to Model equals the same linkage
  with the constraints in the KanesMethod (A, B, state derivative), and its
  default partition is the KanesMethod's.
* What cannot be generated is refused with a ModelError naming the counts.
"""

import importlib.util
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import sympy as sm
import sympy.physics.mechanics as me

import codegen
from codegen import Model
from codegen.errors import ModelError, SingularMatrixError
from codegen.reference import KaneReference

USER_MODELS = Path(__file__).resolve().parent / "user_models"


def _source():
    spec = importlib.util.spec_from_file_location("redundant_parallelogram_source",
                                                  USER_MODELS / "redundant_parallelogram.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


linkage = _source()


def require_local(module):
    """linearize_local is the lead's issue-11 work; skip (loudly) without it."""
    if not hasattr(module, "linearize_local"):
        pytest.skip("this build has no linearize_local (the generated C of issue 11 item 1 "
                    "is not in this tree yet)")


class GivenConstraintsReference(KaneReference):
    """KaneReference of an unconstrained KanesMethod plus constraints given
    beside it: the multiplier form F + B_v^T lambda = 0 with F from SymPy's
    KanesMethod of the same bodies and loads, f_c and f_v from the caller."""

    def __init__(self, kane, parameters, inputs, f_c, f_v, q_dep, u_dep):
        super().__init__(kane, parameters, inputs)
        self.q_dep, self.u_dep = list(q_dep), list(u_dep)
        self.nc, self.nv = len(self.q_dep), len(self.u_dep)
        f_c, f_v = sm.Matrix(f_c), sm.Matrix(f_v)
        self._equations = SimpleNamespace(f_c=f_c, f_v=f_v, J_c=f_c.jacobian(self.q),
                                          B_v=f_v.jacobian(self.u), mass_full=None, forcing_full=None)


def rates_to_speeds(kane, expressions):
    """d/dt of ``expressions`` with q' = u (these models' kinematics), by SymPy."""
    t = me.dynamicsymbols._t
    rates = {qi.diff(t): ui for qi, ui in zip(kane.q, kane.u)}
    return [sm.diff(e, t).xreplace(rates) for e in expressions]


def same_local_form(local, ref, atol=1e-9):
    """A, B of two local forms in possibly different orthonormal bases: compare
    the basis-free T A T^+ and T B (T the embedding x -> [dq; du])."""
    T, T_ref = np.asarray(local.embedding), ref.embedding
    assert T.shape == T_ref.shape
    np.testing.assert_allclose(T @ local.A @ np.linalg.pinv(T), T_ref @ ref.A @ np.linalg.pinv(T_ref),
                               rtol=1e-9, atol=atol)
    np.testing.assert_allclose(T @ local.B, T_ref @ ref.B, rtol=1e-9, atol=atol)
    np.testing.assert_allclose(np.sort_complex(np.linalg.eigvals(local.A)),
                               np.sort_complex(np.linalg.eigvals(ref.A)), rtol=1e-8, atol=1e-8)


# -- the parallelogram with a redundant third crank ------------------------------------------


@pytest.fixture(scope="module")
def parallelogram(build_dir):
    model = linkage.make_model()
    return model, codegen.build(model, output_dir=build_dir)


def test_parallelogram_model(parallelogram):
    model, module = parallelogram
    assert (model.n, model.o, model.l, model.m, model.multipliers) == (4, 4, 4, 4, 4)
    assert model.reduction == "multipliers"
    assert model.kane is None              # SymPy's routes would lack the constraints
    assert [module.q_names[i] for i in module.dependent_q] == ["q1", "q2", "q3", "q_coupler"]
    assert module.nx == 0                  # the partition form has no state left


def test_parallelogram_residuals(parallelogram):
    _, module = parallelogram
    p = linkage.PARAMETERS
    d, L = p["d"], p["L"]
    q = np.array([0.3, 0.5, -0.2, 0.1])
    u = np.array([1.0, -2.0, 0.5, 3.0])
    f_c, f_v = module.constraint_residuals(q, u)
    q1, q2, q3, qc = q
    u1, u2, u3, uc = u
    expected_c = [L * math.cos(q2) + d - L * math.cos(q1) - d * math.cos(qc),
                  L * math.sin(q2) - L * math.sin(q1) - d * math.sin(qc),
                  L * math.cos(q3) + 2 * d - L * math.cos(q1) - 2 * d * math.cos(qc),
                  L * math.sin(q3) - L * math.sin(q1) - 2 * d * math.sin(qc)]
    expected_v = [-L * math.sin(q2) * u2 + L * math.sin(q1) * u1 + d * math.sin(qc) * uc,
                  L * math.cos(q2) * u2 - L * math.cos(q1) * u1 - d * math.cos(qc) * uc,
                  -L * math.sin(q3) * u3 + L * math.sin(q1) * u1 + 2 * d * math.sin(qc) * uc,
                  L * math.cos(q3) * u3 - L * math.cos(q1) * u1 - 2 * d * math.cos(qc) * uc]
    np.testing.assert_allclose(f_c, expected_c, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(f_v, expected_v, rtol=1e-13, atol=1e-15)
    q, u = linkage.branch_point(0.4, rate=1.5)
    f_c, f_v = module.constraint_residuals(q, u)
    assert np.abs(f_c).max() < 1e-15 and np.abs(f_v).max() < 1e-15


def test_parallelogram_partition_forms_raise_rank_deficiency(parallelogram):
    _, module = parallelogram
    q, u = linkage.branch_point(0.4, rate=1.5)
    for call in (lambda: module.linearize(q, u), lambda: module.linearize_full(q, u),
                 lambda: module.state_derivative(q, u), lambda: module.complete(q, u)):
        with pytest.raises(SingularMatrixError, match=r"rank 3 of 4.*linearize_local"):
            call()


@pytest.mark.parametrize("phi, rate, torque", [(-math.pi / 2, 0.0, 0.0), (0.3, 0.0, 0.0),
                                               (0.3, 2.0, 0.7), (2.5, -1.2, -0.4)])
def test_parallelogram_local_form_is_the_closed_form(parallelogram, phi, rate, torque):
    """On the branch the chart y = N_q^T q is sqrt(3) phi (up to sign): the
    local A is exactly [[0, 1], [c sin(phi) / I, 0]] and B = [0, sqrt(3) / I]
    (signs of the basis aside), at rest or moving."""
    _, module = parallelogram
    require_local(module)
    q, u = linkage.branch_point(phi, rate)
    local = module.linearize_local(q, u, r=[torque])
    assert (local.rank_c, local.rank_v, local.dof, local.nx) == (3, 3, 1, 2)
    assert local.A.shape == (2, 2) and local.B.shape == (2, 1)
    inertia, c = linkage.closed_form()
    stiffness = c * math.sin(phi) / inertia          # d(phi'')/d phi
    A = local.A
    assert abs(A[0, 0]) < 1e-12 and abs(A[1, 1]) < 1e-12
    np.testing.assert_allclose(abs(A[0, 1]), 1.0, rtol=1e-12)
    np.testing.assert_allclose(A[0, 1] * A[1, 0], stiffness, rtol=1e-10)
    np.testing.assert_allclose(local.B[0, 0], 0.0, atol=1e-12)
    np.testing.assert_allclose(abs(local.B[1, 0]), math.sqrt(3) / inertia, rtol=1e-10)
    # admissible directions: all cranks together, the coupler still
    N_q = np.asarray(local.N_q).ravel()
    np.testing.assert_allclose(np.abs(N_q), [3 ** -0.5] * 3 + [0.0], atol=1e-12)
    if phi == -math.pi / 2:
        omega = math.sqrt(-stiffness)
        np.testing.assert_allclose(np.sort(np.linalg.eigvals(A).imag), [-omega, omega], rtol=1e-10)
        np.testing.assert_allclose(omega, math.sqrt((1.5 * 0.3 + 1.2) * 9.81 / ((0.3 + 1.2) * 0.4)),
                                   rtol=1e-14)


def test_parallelogram_local_form_against_reference(parallelogram):
    """Against the multiplier-form reference given the same constraints
    (SymPy's KanesMethod for F, f_v = d f_c/dt by SymPy here)."""
    _, module = parallelogram
    require_local(module)
    kane, f_c, symbols = linkage.equations()
    parameters = {symbols[k]: v for k, v in linkage.PARAMETERS.items()}
    ref = GivenConstraintsReference(kane, parameters, [me.dynamicsymbols("T")], f_c,
                                    rates_to_speeds(kane, f_c), kane.q, kane.u)
    for phi, rate, torque in ((0.3, 2.0, 0.7), (-1.0, -0.5, 0.0)):
        q, u = linkage.branch_point(phi, rate)
        local = module.linearize_local(q, u, r=[torque])
        expected = ref.local_state_space(q, u, r=[torque])
        assert (expected.rank_c, expected.rank_v) == (local.rank_c, local.rank_v)
        same_local_form(local, expected)


# -- the spherical pendulum with its constraint written twice ---------------------------------


def doubled_spherical_pendulum(name="doubled_spherical", **options):
    """A particle at (x, y, z), speeds the rates, gravity along -z, a force F
    along x; the rod length as |r|^2 = L^2 and as |r| = L. ``options`` go to
    Model (default: configuration_constraints, velocity constraints formed)."""
    x, y, z, ux, uy, uz = me.dynamicsymbols("x y z ux uy uz")
    F = me.dynamicsymbols("F")
    m, g, L = sm.symbols("m g L")
    t = me.dynamicsymbols._t
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    P = O.locatenew("P", x * N.x + y * N.y + z * N.z)
    P.set_vel(N, ux * N.x + uy * N.y + uz * N.z)
    kane = me.KanesMethod(N, q_ind=[x, y, z], u_ind=[ux, uy, uz],
                          kd_eqs=[x.diff(t) - ux, y.diff(t) - uy, z.diff(t) - uz])
    kane.kanes_equations([me.Particle("p", P, m)], [(P, -m * g * N.z + F * N.x)])
    r2 = x ** 2 + y ** 2 + z ** 2
    f_c = [r2 - L ** 2, sm.sqrt(r2) - L]
    options.setdefault("configuration_constraints", f_c)
    parameters = {m: 0.7, g: 9.81, L: 2.0}
    model = Model(kane, parameters, inputs=[F], name=name, **options)
    return model, SimpleNamespace(kane=kane, f_c=f_c, parameters=parameters, inputs=[F],
                                  speeds=(ux, uy, uz), coordinates=(x, y, z))


@pytest.fixture(scope="module")
def spherical(build_dir):
    model, source = doubled_spherical_pendulum()
    return model, codegen.build(model, output_dir=build_dir), source


def test_spherical_model_and_residuals(spherical):
    model, module, _ = spherical
    assert (model.l, model.m, model.multipliers) == (2, 2, 2)
    # one column of J_c is independent (the last), completed with the one before
    assert [module.q_names[i] for i in module.dependent_q] == ["y", "z"]
    assert [module.u_names[i] for i in module.dependent_u] == ["uy", "uz"]
    q, u = np.array([0.3, -0.4, 1.1]), np.array([0.5, 0.2, -0.7])
    f_c, f_v = module.constraint_residuals(q, u)
    r = np.linalg.norm(q)
    np.testing.assert_allclose(f_c, [r ** 2 - 4.0, r - 2.0], rtol=1e-14)
    np.testing.assert_allclose(f_v, [2 * q @ u, q @ u / r], rtol=1e-14)
    with pytest.raises(SingularMatrixError, match=r"rank 1 of 2.*linearize_local"):
        module.linearize([0.0, 0.0, -2.0], np.zeros(3))


def test_spherical_local_form(spherical):
    model, module, source = spherical
    require_local(module)
    local = module.linearize_local([0.0, 0.0, -2.0], np.zeros(3), r=[0.0])
    assert (local.rank_c, local.rank_v, local.dof, local.nx) == (1, 1, 2, 4)
    omega = math.sqrt(9.81 / 2.0)
    eigenvalues = np.linalg.eigvals(local.A)
    np.testing.assert_allclose(np.sort(eigenvalues.imag), [-omega, -omega, omega, omega], rtol=1e-10)
    np.testing.assert_allclose(eigenvalues.real, 0.0, atol=1e-10)
    # a moving, non-equilibrium point against the reference
    ref = GivenConstraintsReference(source.kane, source.parameters, source.inputs, source.f_c,
                                    rates_to_speeds(source.kane, source.f_c),
                                    source.coordinates[1:], source.speeds[1:])
    theta, phi = 0.7, 0.4
    q = 2.0 * np.array([math.sin(theta) * math.cos(phi), math.sin(theta) * math.sin(phi),
                        -math.cos(theta)])
    u = np.cross([0.3, -1.1, 0.8], q)          # tangent: f_v = 0
    local = module.linearize_local(q, u, r=[0.4])
    expected = ref.local_state_space(q, u, r=[0.4])
    assert (local.rank_c, local.rank_v) == (expected.rank_c, expected.rank_v) == (1, 1)
    same_local_form(local, expected)


def test_explicit_velocity_constraints_with_redundancy():
    """Given velocity constraints are checked to hold d f_c/dt (the Newton
    onto the manifold copes with the redundant f_c); one row suffices here."""
    x, y, z, ux, uy, uz = me.dynamicsymbols("x y z ux uy uz")
    model, _ = doubled_spherical_pendulum(velocity_constraints=[x * ux + y * uy + z * uz])
    assert (model.l, model.m) == (2, 1)
    with pytest.raises(ModelError, match=r"d/dt f_c\[0\].*velocity_constraints"):
        doubled_spherical_pendulum(velocity_constraints=[uz - x * ux])
    with pytest.raises(ModelError, match=r"f_v has no rows"):
        doubled_spherical_pendulum(velocity_constraints=[])


# -- without redundancy: the same as constraints in the KanesMethod -------------------------


def test_nonredundant_equals_kane_constraints(build_dir):
    given = linkage.make_model(cranks=2, name="parallelogram_given")
    in_kane = linkage.make_model(cranks=2, in_kane=True, name="parallelogram_in_kane")
    assert given.q_dependent == in_kane.q_dependent
    assert given.u_dependent == in_kane.u_dependent
    assert given.reduction == in_kane.reduction == "multipliers"
    a = codegen.build(given, output_dir=build_dir)
    b = codegen.build(in_kane, output_dir=build_dir)
    assert list(a.state_names) == list(b.state_names) == ["q1", "u1"]
    inertia, c = linkage.closed_form(cranks=2)
    for phi, rate, torque in ((0.3, 2.0, 0.7), (-math.pi / 2, 0.0, 0.0), (2.2, -1.0, 0.1)):
        q, u = linkage.branch_point(phi, rate, cranks=2)
        A, B = a.linearize(q, u, r=[torque])
        A_k, B_k = b.linearize(q, u, r=[torque])
        np.testing.assert_allclose(A, A_k, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(B, B_k, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(A, [[0, 1], [c * math.sin(phi) / inertia, 0]], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(B, [[0], [1 / inertia]], rtol=1e-12)
        qd, ud = a.state_derivative(q, u, r=[torque])
        np.testing.assert_allclose(ud[0], (-c * math.cos(phi) + torque) / inertia, rtol=1e-12)
        np.testing.assert_allclose(np.concatenate([qd, ud]),
                                   np.concatenate(b.state_derivative(q, u, r=[torque])), rtol=1e-12,
                                   atol=1e-13)


# -- refused ----------------------------------------------------------------------------------


def planar_pendulum_kane(constrained=False):
    x, y, ux, uy = me.dynamicsymbols("x y ux uy")
    m, g, L = sm.symbols("m g L")
    t = me.dynamicsymbols._t
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    P = O.locatenew("P", x * N.x + y * N.y)
    P.set_vel(N, ux * N.x + uy * N.y)
    extra = {}
    if constrained:
        extra = dict(q_dependent=[y], configuration_constraints=[x ** 2 + y ** 2 - L ** 2],
                     u_dependent=[uy], velocity_constraints=[x * ux + y * uy])
    kane = me.KanesMethod(N, q_ind=[x] if constrained else [x, y], u_ind=[ux] if constrained else [ux, uy],
                          kd_eqs=[x.diff(t) - ux, y.diff(t) - uy], **extra)
    kane.kanes_equations([me.Particle("p", P, m)], [(P, -m * g * N.y)])
    return kane, (x, y, ux, uy), {m: 1.0, g: 9.81, L: 1.0}


def test_refused():
    kane, (x, y, ux, uy), parameters = planar_pendulum_kane()
    L = sm.Symbol("L")
    length = x ** 2 + y ** 2 - L ** 2
    with pytest.raises(ModelError, match=r"3 configuration constraints for 2 coordinates"):
        Model(kane, parameters, configuration_constraints=[length, 2 * length, 3 * length])
    with pytest.raises(ModelError, match=r"3 velocity constraints for 2 speeds"):
        Model(kane, parameters, configuration_constraints=[length],
              velocity_constraints=[x * ux + y * uy] * 3)
    with pytest.raises(ModelError, match=r"reduction='kane'"):
        Model(kane, parameters, configuration_constraints=[length], reduction="kane")
    with pytest.raises(ModelError, match=r"only the coordinates .* not \['ux\(t\)'\]"):
        Model(kane, parameters, configuration_constraints=[length + ux])
    with pytest.raises(ModelError, match=r"linear in the speeds"):
        Model(kane, parameters, configuration_constraints=[length],
              velocity_constraints=[x * ux + y * uy, ux ** 2])
    with pytest.raises(ModelError, match=r"dependent_q needs 1 distinct entries"):
        Model(kane, parameters, configuration_constraints=[length], dependent_q=["x", "y"])
    with pytest.raises(ModelError, match=r"scalar expressions"):
        Model(kane, parameters, configuration_constraints=[sm.Matrix([length])])
    with pytest.raises(ModelError, match=r"sequence of SymPy expressions"):
        Model(kane, parameters, configuration_constraints=[x * me.ReferenceFrame("N").x])
    # without constraints given, dependent_q stays a LagrangesMethod option
    with pytest.raises(ModelError, match=r"dependent_q and dependent_u are for"):
        Model(kane, parameters, dependent_q=["y"])
    constrained, _, parameters = planar_pendulum_kane(constrained=True)
    with pytest.raises(ModelError, match=r"constraints of its own"):
        Model(constrained, parameters, configuration_constraints=[length])
    lagrange = me.LagrangesMethod(sm.Symbol("m") * (x.diff() ** 2 + y.diff() ** 2) / 2, [x, y])
    lagrange.form_lagranges_equations()
    with pytest.raises(ModelError, match=r"give a LagrangesMethod its constraints itself"):
        Model(lagrange, {sm.Symbol("m"): 1.0}, configuration_constraints=[x ** 2 + y ** 2 - 1])


def test_given_partition_and_velocity_constraints_only():
    kane, (x, y, ux, uy), parameters = planar_pendulum_kane()
    L = sm.Symbol("L")
    model = Model(kane, parameters, configuration_constraints=[x ** 2 + y ** 2 - L ** 2],
                  dependent_q=["x"], dependent_u=[ux])
    assert model.q_dependent == [x] and model.u_dependent == [ux]
    assert list(model.f_v) == [2 * x * ux + 2 * y * uy]      # d f_c/dt, formed by Model
    # rates q' in given velocity constraints become speeds; nonholonomic only: l = 0
    t = me.dynamicsymbols._t
    model = Model(kane, parameters, velocity_constraints=[x.diff(t) - y * uy])
    assert (model.l, model.m) == (0, 1) and list(model.f_v) == [ux - y * uy]


def test_explicit_velocity_constraints_of_the_parallelogram():
    """Gauss-Newton onto the manifold where J_c is square and singular: three
    rows of d f_c/dt span the fourth there (rank 3), two do not."""
    kane, f_c, _ = linkage.equations()
    f_v = rates_to_speeds(kane, f_c)
    assert linkage.make_model(velocity_constraints=f_v[:3]).m == 3
    with pytest.raises(ModelError, match=r"no combination of the 2 rows of f_v.*d/dt f_c\[2\]"):
        linkage.make_model(velocity_constraints=f_v[:2])
