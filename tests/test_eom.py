"""codegen.eom: Kane's and Lagrange's equations formed faster than SymPy forms
them, with SymPy's results.

* ``kanes_equations(kane, bodies, loads)`` leaves every model of the suite
  (SymPy's own test models, the user models, the built-in models) with the
  same expressions, term for term, as ``kane.kanes_equations(bodies, loads)``:
  Fr, Fr*, the mass matrix and the forcing, the auxiliary equations;
* ``unconstrained_kane_dynamics(kane)``, the multiplier form's equations of
  every speed, is term for term what a second KanesMethod of the same system
  (every speed independent, the explicit kinematic equations, no solve)
  forms, which is how Model formed them before; where kanes_equations formed
  ``kane`` it hands over the equations it kept, and only while they are
  ``kane``'s;
* ``kinematic_solver`` returns what SymPy's LU solve returns;
* ``lagranges_equations(lagrange)`` agrees with ``form_lagranges_equations()``
  to rounding at random points, in every matrix a LagrangesMethod exposes
  (constraints, forces, inputs and explicit time included), and the flexible
  double pendulum built from it has its published eigenvalues
  (tests/test_flexible_pendulum.py).
"""

import copy
import importlib
import random

import pytest
import sympy as sm
import sympy.physics.mechanics as me
from sympy.core.function import AppliedUndef

from codegen import eom

# (user_models.ball_on_spinning_disc is not among them: SymPy forms its
# equations in 17 s and the check forms them twice more, 90 s of the suite on
# CI for the features the others cover: its model is checked by
# tests/test_model_checks.py)
KANE_MAKERS = [
    ("sympy_models.auxiliary_speeds", "make_kane_aux"),
    ("sympy_models.auxiliary_speeds", "make_kane2_non_central_inertia"),
    ("sympy_models.auxiliary_speeds", "make_box_on_ground"),
    ("sympy_models.implicit_kinematics", "make_kane"),
    ("sympy_models.jointsmethod_fourbar", "make_kane"),
    ("sympy_models.kane4_double_pendulum", "make_kane"),
    ("sympy_models.kane5_rolling_disc", "make_kane"),
    ("sympy_models.kane_parallel_axis", "make_kane"),
    ("sympy_models.kane_rolling_disc", "make_kane"),
    ("sympy_models.kane_two_dof", "make_kane"),
    ("sympy_models.linearize_pendulum_nonminimal", "make_kane"),
    ("sympy_models.system_cart_pendulum", "make_kane"),
    ("user_models.driven_pendulum", "make_model"),
    ("user_models.fourbar", "make_model"),
    ("user_models.gonzalez_fourbar", "make_model"),
    ("user_models.redundant_parallelogram", "make_model"),
    ("user_models.rotating_wire", "make_model"),
    ("user_models.sled", "make_model"),
    ("lagrange_models.rolling_disk", "make_kane"),
    ("codegen.models.disk", "make_model"),
    ("codegen.models.bicycle", "make_model"),
    ("codegen.models.five_bar", "make_model"),
    ("codegen.models.parallel_fourbar", "make_model"),
    ("codegen.models.spencer_pendulum", "make_model"),
]

KANE_ATTRIBUTES = ("_fr", "_frstar", "_k_d", "_f_d")


def second_kanes_method(kane):
    """Fr + Fr* of every speed as Model formed them before codegen.eom: a
    KanesMethod of the same system, all coordinates and speeds independent,
    the explicit kinematic equations q' - q'(u) = 0 solved by the identity."""
    qd_of_u = kane.kindiffdict()
    explicit = [qi.diff() - qd_of_u[qi.diff()] for qi in kane.q]
    free = me.KanesMethod(kane._inertial, q_ind=list(kane.q), u_ind=list(kane.u), kd_eqs=explicit,
                          kd_eqs_solver=lambda matrix, rhs: rhs)
    fr, frstar = free.kanes_equations(kane.bodies, kane.loads)
    return fr + frstar


def assert_same_as_sympy(kane, bodies, loads):
    """eom.kanes_equations on a copy of ``kane`` (whose SymPy equations are
    formed) gives the same expressions; so does the unconstrained route."""
    ours = copy.copy(kane)
    fr, frstar = eom.kanes_equations(ours, bodies, loads)
    assert fr == kane._fr and frstar == kane._frstar
    for attribute in KANE_ATTRIBUTES:
        assert getattr(ours, attribute) == getattr(kane, attribute), attribute
    if kane._uaux:
        assert ours._aux_eq == kane._aux_eq
    if kane._udep and kane.bodies is not None and kane.loads is not None:
        before = second_kanes_method(kane)
        assert eom.unconstrained_kane_dynamics(kane) == before          # formed here
        assert eom.unconstrained_kane_dynamics(ours) == before          # kept by kanes_equations


@pytest.fixture
def compare_every_kanes_method(monkeypatch):
    """While active, every ``KanesMethod.kanes_equations`` call also checks
    codegen.eom against it; returns the list of KanesMethods checked."""
    checked = []
    sympy_method = me.KanesMethod.kanes_equations

    def checking(self, bodies=None, loads=None):
        result = sympy_method(self, bodies, loads)
        assert_same_as_sympy(self, self._bodylist, self._forcelist)
        checked.append(self)
        return result

    monkeypatch.setattr(me.KanesMethod, "kanes_equations", checking)
    return checked


@pytest.mark.parametrize("module, function", KANE_MAKERS, ids=[f"{m}.{f}" for m, f in KANE_MAKERS])
def test_kanes_equations_are_sympys(compare_every_kanes_method, module, function):
    getattr(importlib.import_module(module), function)()
    assert compare_every_kanes_method, "the model formed no KanesMethod"


@pytest.mark.parametrize("make, args", [("cart_chain", (4, False)), ("cart_chain", (4, True)),
                                        ("fourbar", (2,))])
def test_builtin_models_formed_by_eom_are_sympys(monkeypatch, make, args):
    """cart_chain and fourbar form their equations with codegen.eom (and its
    kinematic solver): the same as SymPy's kanes_equations with its LU solve."""
    module = importlib.import_module(f"codegen.models.{make}")
    captured = []
    monkeypatch.setattr(module, "Model", lambda kane, **kwargs: captured.append(kane))
    module.make_model(*args)
    ours = captured.pop()
    monkeypatch.setattr(module, "kanes_equations",
                        lambda kane, bodies, loads: kane.kanes_equations(bodies, loads))
    monkeypatch.setattr(module, "kinematic_solver", "LU")
    module.make_model(*args)
    sympys = captured.pop()
    for attribute in KANE_ATTRIBUTES + ("_qdot_u_map", "_Ars", "_f_nh", "_k_nh"):
        assert getattr(ours, attribute) == getattr(sympys, attribute), attribute
    if sympys._udep:
        kept = eom.unconstrained_kane_dynamics(ours)
        assert kept == second_kanes_method(sympys)


def test_kept_equations_serve_only_while_they_are_the_kanes_methods():
    from codegen.models import cart_chain

    captured = []
    original = cart_chain.Model
    cart_chain.Model = lambda kane, **kwargs: captured.append(kane)
    try:
        cart_chain.make_model(3, True)
    finally:
        cart_chain.Model = original
    kane = captured[0]
    kept = eom.unconstrained_kane_dynamics(kane)
    assert eom.unconstrained_kane_dynamics(kane) is kept       # handed over, not formed again
    kane.kanes_equations(kane.bodies, kane.loads)              # SymPy forms them again
    again = eom.unconstrained_kane_dynamics(kane)
    assert again is not kept and again == kept


def test_floats_are_summed_as_sympy_sums_them(compare_every_kanes_method):
    """A model with Float coefficients (whose sums depend on the order of
    addition) still gives SymPy's expressions exactly."""
    q1, q2, u1, u2 = me.dynamicsymbols("q1 q2 u1 u2")
    N = me.ReferenceFrame("N")
    A = N.orientnew("A", "Axis", [q1, N.z])
    B = A.orientnew("B", "Axis", [q2, A.z])
    A.set_ang_vel(N, u1 * N.z)
    B.set_ang_vel(A, u2 * A.z)
    O = me.Point("O")
    O.set_vel(N, 0)
    P = O.locatenew("P", 0.3 * A.x)
    P.v2pt_theory(O, N, A)
    Q = P.locatenew("Q", 0.7 * B.x)
    Q.v2pt_theory(P, N, B)
    bodies = [me.Particle("p", P, 1.1), me.RigidBody("b", Q, B, 0.9, (me.inertia(B, 0.1, 0.2, 0.3), Q))]
    kane = me.KanesMethod(N, [q1, q2], [u1, u2], kd_eqs=[q1.diff() - u1, q2.diff() - u2])
    kane.kanes_equations(bodies, [(Q, 9.81 * N.y), (B, 0.1 * u2 * N.z)])
    assert compare_every_kanes_method


@pytest.mark.parametrize("order", [[0, 1, 2], [2, 0, 1], [1, 2, 0]])
def test_kinematic_solver_is_sympys_lu_solve(order):
    q = me.dynamicsymbols("q0:3")
    u = me.dynamicsymbols("u0:3")
    rhs = sm.Matrix([sm.sin(q[1]) * u[0], u[1] / sm.cos(q[0]), u[2] + q[2]])
    matrix = sm.zeros(3, 3)
    for row, column in enumerate(order):
        matrix[row, column] = 1
    assert eom.kinematic_solver(matrix, rhs) == matrix.LUsolve(rhs)
    general = matrix + sm.Matrix(3, 3, lambda i, j: sm.Symbol("a") if i == j == 0 else 0)
    assert eom.kinematic_solver(general, rhs) == general.LUsolve(rhs)


# -- Lagrange's equations --------------------------------------------------------------------


def lagrange_matrices(lagrange):
    return {"mass_matrix": lagrange.mass_matrix, "forcing": lagrange.forcing, "eom": lagrange.eom,
            "mass_matrix_full": lagrange.mass_matrix_full, "forcing_full": lagrange.forcing_full,
            "term1": lagrange._term1, "term2": lagrange._term2, "term3": lagrange._term3,
            "term4": lagrange._term4}


def assert_lagrange_agrees(lagrange, tolerance=1e-12):
    """Form the equations of ``lagrange`` (not yet formed) both ways and compare
    every matrix at three random points (every time-varying quantity, its
    derivatives and every constant random)."""
    ours = copy.copy(lagrange)
    lagrange.form_lagranges_equations()
    eom.lagranges_equations(ours)
    theirs, mine = lagrange_matrices(lagrange), lagrange_matrices(ours)
    atoms = set()
    for matrix in theirs.values():
        for entry in matrix:
            atoms |= entry.atoms(sm.Derivative, AppliedUndef, sm.Symbol)
    t = me.dynamicsymbols._t
    rng = random.Random(20250101)
    for _ in range(3):
        values = {a: rng.uniform(0.4, 1.3) for a in atoms if a != t}
        values[t] = 0.37
        # derivatives first: xreplace swaps whole Derivative nodes
        ordered = dict(sorted(values.items(), key=lambda item: not isinstance(item[0], sm.Derivative)))
        for name, matrix in theirs.items():
            assert matrix.shape == mine[name].shape, name
            a = matrix.xreplace(ordered).evalf()
            b = mine[name].xreplace(ordered).evalf()
            scale = max([abs(v) for v in a] + [1.0])
            worst = max([abs(x - y) for x, y in zip(a, b)] + [0.0])
            assert worst <= tolerance * scale, (name, worst, scale)


def lagrange_of(module, monkeypatch):
    """The LagrangesMethod of a test model, before its equations are formed."""
    captured = []
    monkeypatch.setattr(me.LagrangesMethod, "form_lagranges_equations",
                        lambda self: captured.append(self))
    monkeypatch.setattr(module, "Model", lambda *args, **kwargs: None)
    module.make_lagrange()
    monkeypatch.undo()
    return captured[0]


@pytest.mark.parametrize("name", ["cartesian_pendulum", "fourbar", "rolling_disk"])
def test_lagranges_equations_agree_with_sympy(name, monkeypatch):
    module = importlib.import_module(f"lagrange_models.{name}")
    assert_lagrange_agrees(lagrange_of(module, monkeypatch))


def test_lagranges_equations_with_inputs_time_and_forces():
    """A pendulum whose support moves as s(t) (an input inside the
    Lagrangian), a term in explicit time and a damping force."""
    theta, s = me.dynamicsymbols("theta s")
    m, l, g, c = sm.symbols("m l g c")
    t = me.dynamicsymbols._t
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    A = N.orientnew("A", "Axis", [theta, N.z])
    P = O.locatenew("P", s * N.x + l * A.x)
    P.set_vel(N, P.pos_from(O).dt(N))
    L = (me.Lagrangian(N, me.Particle("p", P, m)) - m * g * P.pos_from(O).dot(N.y)
         + sm.sin(t) * theta**2)
    assert_lagrange_agrees(me.LagrangesMethod(L, [theta], forcelist=[(P, -c * P.vel(N))], frame=N))


def test_flexible_pendulum_equations_agree_with_sympy():
    from codegen.models import flexible_pendulum

    lagrange = flexible_pendulum._lagranges_method.__wrapped__(1)[0]
    fresh = me.LagrangesMethod(lagrange._L[0], list(lagrange.q), hol_coneqs=list(lagrange._hol_coneqs),
                               frame=lagrange.inertial)
    assert_lagrange_agrees(fresh, tolerance=1e-11)


def test_accelerations_in_the_lagrangian_are_left_to_sympy():
    x = me.dynamicsymbols("x")
    lagrange = me.LagrangesMethod(x.diff() ** 2 / 2 + x.diff(me.dynamicsymbols._t, 2) * x, [x])
    ours = copy.copy(lagrange)
    eom.lagranges_equations(ours)
    lagrange.form_lagranges_equations()
    assert ours.eom == lagrange.eom
