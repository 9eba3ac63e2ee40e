"""The models of SymPy's own mechanics test suite (tests/sympy_models/), built
through the pipeline and checked against independent references:

* SymPy's ``Linearizer`` on the same KanesMethod (tests/reference.py, with its
  double-counting fix), asked for M, A~, B~ (``A_and_B=False``) and solved
  with NumPy: SymPy's ``A_and_B=True`` with a numeric operating point runs
  its LU on SymPy Floats, pivoting on the first entry that is not exactly
  zero, which can be a rounding residue;
* constrained finite differences of SymPy's own ``mass_matrix_full`` and
  ``forcing_full``;
* closed forms and numbers from the SymPy tests themselves where they have
  them.

Points are consistent (dependent coordinates and speeds solved by the
reference's Newton) and, where the model allows, not equilibria.

``test_kane.py::test_implicit_kinematics`` (a free body with a unit
quaternion, implicit kinematic equations that keep the norm, no velocity
constraints) was refused before the hardening issue: the check of d f_c/dt took the
rounding-level value of 2 lambda . lambda' for a missing velocity
constraint. SymPy's test gives no point of interest; ours are a tumbling
body on both branches of lambda_0.

Not here: ``test_kane3.py`` (the bicycle: tests/test_bicycle*.py),
``test_linearize.py``'s Kane rolling disc (the built-in disk,
tests/test_disk*.py), ``test_kane2.py::test_sub_qdot2`` (no bodies: a zero
mass matrix, nothing to linearize), Lagrange models
(tests/test_lagrange.py, tests/test_joints_system.py) and ``SymbolicSystem``
(not a KanesMethod). Models with auxiliary speeds are accepted (issue 12): the
auxiliary speeds are zero on every motion and do not change the
linearization; checked against finite differences of SymPy's own equations.
"""

import importlib
import math
from collections import namedtuple

import numpy as np
import pytest
import sympy as sm

import codegen
from codegen import Model

import reference
from reference import assert_matrices_close
from sympy_models import auxiliary_speeds

MODELS = ["kane_two_dof", "kane_rolling_disc", "kane_parallel_axis", "kane4_double_pendulum",
          "kane5_rolling_disc", "linearize_pendulum_nonminimal", "system_cart_pendulum",
          "jointsmethod_fourbar", "implicit_kinematics"]

Case = namedtuple("Case", "name source model compiled ref points")
_BUILT = {}


def built_case(name, build_dir):
    """Each model is formed, built and given its reference once per module."""
    if name not in _BUILT:
        source = importlib.import_module(f"sympy_models.{name}")
        kane, parameters, inputs = source.make_kane()
        model = Model(kane, parameters, inputs, name=name)
        compiled = codegen.build(model, output_dir=build_dir)
        ref = reference.KaneReference(kane, parameters, inputs)
        points = []
        for q, u, r in source.POINTS:     # complete the dependent coordinates and speeds
            q, u = ref.complete(q, u)
            points.append((q, u, np.array(r, dtype=float)))
        _BUILT[name] = Case(name, source, model, compiled, ref, points)
    return _BUILT[name]


@pytest.fixture(scope="module", params=MODELS)
def case(request, build_dir):
    return built_case(request.param, build_dir)


@pytest.fixture(scope="module")
def built(build_dir):
    """A model of the list by name (the same objects as ``case``)."""
    return lambda name: built_case(name, build_dir)


def sympy_AB(ref, q, u, r):
    """SymPy's Linearizer: M, A~, B~ at the numeric point, then A = P^T M^-1 A~
    solved by NumPy (with pivoting), as SymPy's docstring describes."""
    lin = ref.linearizer()
    M, A, B = lin.linearize(op_point=ref.op_point(q, u, r), A_and_B=False)
    P = np.array(lin.perm_mat, dtype=float)
    M = np.array(M.evalf(), dtype=float)
    A = P.T @ np.linalg.solve(M, np.array(A.evalf(), dtype=float))
    B = P.T @ np.linalg.solve(M, np.array(B.evalf(), dtype=float)) if ref.nr else np.zeros((len(A), 0))
    return A, B


def test_state_order_and_sizes(case):
    c = case.compiled
    assert (c.nq, c.nu, c.nc, c.nv, c.nr) == (case.ref.nq, case.ref.nu, case.ref.nc, case.ref.nv, case.ref.nr)
    assert c.state_names == case.ref.linearizer_state_names() == case.ref.state_names()


def test_points_are_consistent(case):
    for q, u, r in case.points:
        f_c, f_v = case.compiled.constraint_residuals(q, u)
        assert np.abs(np.concatenate([f_c, f_v, [0.0]])).max() < 1e-12


def test_state_derivative_matches_sympy(case):
    for q, u, r in case.points:
        qd, ud = case.compiled.state_derivative(q, u, r)
        qd_ref, ud_ref = case.ref.state_derivative(q, u, r)
        assert_matrices_close(np.concatenate([qd, ud]), np.concatenate([qd_ref, ud_ref]), 1e-11)


def test_linearize_matches_sympy_linearizer(case):
    for q, u, r in case.points:
        A, B = case.compiled.linearize(q, u, r)
        A_ref, B_ref = sympy_AB(case.ref, q, u, r)
        assert np.all(np.isfinite(A)) and np.all(np.isfinite(B))
        assert_matrices_close(A, A_ref, 1e-9, f"{case.name} A at q={q}")
        assert_matrices_close(B, B_ref, 1e-9, f"{case.name} B at q={q}")


def test_linearize_matches_constrained_finite_differences(case):
    for q, u, r in case.points:
        A, B = case.compiled.linearize(q, u, r)
        A_fd, B_fd = case.ref.constrained_fd_AB(q, u, r)
        assert_matrices_close(A, A_fd, 1e-6, f"{case.name} A at q={q}")
        assert_matrices_close(B, B_fd, 1e-6, f"{case.name} B at q={q}")


@pytest.mark.parametrize("name", ["kane_two_dof", "kane_rolling_disc", "linearize_pendulum_nonminimal"])
def test_closed_forms_of_the_sympy_tests(name, built):
    """Models whose SymPy test states A (or its eigenvalues) in closed form."""
    c = built(name)
    if name == "kane_rolling_disc":
        # upright rolling at spin rate 0.3: +/- 2 sqrt(1 - 3 u2^2)/sqrt(5) and zeros
        q, u, r = c.points[0]
        eigenvalues = np.sort(np.linalg.eigvals(c.compiled.linearize(q, u, r)[0]).real)
        assert np.allclose(eigenvalues, c.source.upright_eigenvalues(u[1]), atol=1e-12)
        # SymPy's check: at the critical speed 1/sqrt(3) all eigenvalues are zero:
        # A is nilpotent (its sixth power vanishes)
        q, u, r = c.points[1]
        A = c.compiled.linearize(q, u, r)[0]
        assert np.abs(np.linalg.matrix_power(A, 6)).max() < 1e-12
        return
    checked = 0
    for (q, u, r), point in zip(c.points, c.source.POINTS):
        expected = c.source.closed_form(point)
        if expected is not None:
            assert_matrices_close(c.compiled.linearize(q, u, r)[0], expected, 1e-12)
            checked += 1
    assert checked


# -- model-specific checks of issue 9 ---------------------------------------------------------


def test_rolling_disc_with_the_users_kinematic_solver_is_finite_upright(built):
    """test_kane5: the user solves the kinematic equations with a simplifying
    solver, finite at the upright configuration q = 0 where SymPy's default LU
    divides by zero. Before: the multiplier form re-formed the equations with
    the default solver, and linearize failed with NaN upright. Now it is finite
    and equals SymPy's Linearizer on the user's KanesMethod; and the state
    derivative reproduces the numbers of SymPy's own test at its two points."""
    c = built("kane5_rolling_disc")
    source, compiled, ref = c.source, c.compiled, c.ref
    q, u = ref.complete(*source.UPRIGHT[:2])
    assert np.all(q == 0.0)
    A, _ = compiled.linearize(q, u)
    assert np.all(np.isfinite(A))
    assert_matrices_close(A, sympy_AB(ref, q, u, [])[0], 1e-9)
    assert_matrices_close(A, ref.constrained_fd_AB(q, u)[0], 1e-6)
    # _verify_rolling_disc_numerically of test_kane5: p = (g, r, m), u4, u5 from the constraints
    p = [9.81, 0.26, 3.43]
    expected = {
        (0.3, 0.1, 1.97, -0.35, 2.27, -0.2, 1.3, 0.15): [
            0.126603940595934, 0.215942571601660, 1.28736069604936, 0.319764288376543,
            0.0989146857254898, -0.925848952664489, -0.0181350656532944, 2.91695398184589,
            -0.00992793421754526, 0.0412861634829171],
        (3.97, -0.28, 8.2, -0.35, 2.27, -0.25, -2.2, 0.62): [
            0.0259159090798597, 0.668041660387416, -2.19283799213811, 0.385441810852219,
            0.420109283790573, 1.45030568179066, -0.0110924422400793, -8.35617840186040,
            -0.154098542632173, -0.146102664410010]}
    for values, derivative in expected.items():
        q, u = compiled.complete(values[:5], list(values[5:]) + [0.0, 0.0], p=p)
        qd, ud = compiled.state_derivative(q, u, p=p)
        np.testing.assert_allclose(np.concatenate([qd, ud]), derivative, rtol=0, atol=1e-10)


def test_nonminimal_pendulum_with_abs_in_its_constraint(built):
    """test_linearize's non-minimal Kane pendulum: its velocity constraint
    becomes sqrt(q1^2 + q2^2)/Abs(q1) once the symbols are real, and the
    acceleration-level blocks hold d sign(q1)/d q1. Before: the build stopped
    in the printer (an unevaluated Derivative). Now SymPy's expected
    A = [[0, 1], [-9.8/L, 0]] at its point, and finite differences elsewhere,
    on both sides of q1 = 0 (the sign flips)."""
    c = built("linearize_pendulum_nonminimal")
    source, compiled, ref = c.source, c.compiled, c.ref
    L = source.PARAMETERS["L"]
    q, u = ref.complete(*source.SYMPY_POINT[:2])
    assert_matrices_close(compiled.linearize(q, u)[0], [[0, 1], [-9.8 / L, 0]], 1e-13)
    for angle, rate in ((0.6, -0.4), (2.5, 0.8)):        # q1 = L cos(angle) > 0, then < 0
        q = np.array([L * math.sin(angle), L * math.cos(angle)])
        u = np.array([L * math.cos(angle) * rate, -L * math.sin(angle) * rate])
        A, _ = compiled.linearize(q, u)
        assert_matrices_close(A, ref.constrained_fd_AB(q, u)[0], 1e-6, f"angle {angle}")
        assert_matrices_close(A, sympy_AB(ref, q, u, [])[0], 1e-9, f"angle {angle}")


def test_fourbar_state_derivative_matches_the_sympy_test(built):
    """test_jointsmethod's four-bar: SymPy's expected mass matrix and forcing
    at its point give u' = M^-1 F."""
    c = built("jointsmethod_fourbar")
    source, compiled = c.source, c.compiled
    q, u, _ = source.POINTS[0]
    mass = np.array([[3.452709815256506e+01, 7.003948798374735e+00, -4.939690970641498e+00],
                     [-2.203792703880936e-14, 2.071702479957077e-01, 2.842917573033711e-01],
                     [-1.300000000000123e-01, -8.836934896046506e-03, 1.864891330060847e-01]])
    forcing = np.array([-0.031211821321648, -0.00066022608181, 0.001813559741243])
    qd, ud = compiled.state_derivative(q, u)
    np.testing.assert_allclose(ud, np.linalg.solve(mass, forcing), rtol=1e-9)


def test_implicit_kinematics_quaternion_body(built):
    """test_kane's quaternion body, accepted (hardening issue): besides SymPy's
    Linearizer and finite differences (the parametrized tests above), the
    inputs' columns in closed form. The force F_z along B.z accelerates the
    mass centre along B.z only, W' = F_z/M + ... (U, V, W are its velocity
    along the body axes); the torque T_z about B.z drives Euler's equations,
    J w' = T_z e_z + ... with J = [[J_xx, 0, -J_xz], [0, J_yy, 0], [-J_xz, 0,
    J_zz]] (SymPy's test gives the product of inertia a minus sign); nothing
    else depends on them. And the motion keeps the unit norm: lambda .
    lambda' = 0 at each point."""
    c = built("implicit_kinematics")
    p = c.source.PARAMETERS
    inertia = np.array([[p["J_B_xx"], 0, -p["J_B_xz"]], [0, p["J_B_yy"], 0],
                        [-p["J_B_xz"], 0, p["J_B_zz"]]])
    expected = np.zeros((12, 2))                      # states: 6 coordinates, U V W P Q R
    expected[8, 1] = 1 / p["M_B"]
    expected[9:12, 0] = np.linalg.solve(inertia, [0.0, 0.0, 1.0])
    for q, u, r in c.points:
        quaternion = q[[6, 0, 1, 2]]                  # lambda_0 is the last coordinate
        assert abs(np.dot(quaternion, quaternion) - 1) < 1e-14
        assert_matrices_close(c.compiled.linearize(q, u, r)[1], expected, 1e-12)
        qd, _ = c.compiled.state_derivative(q, u, r)
        assert abs(np.dot(quaternion, qd[[6, 0, 1, 2]])) < 1e-14 * np.abs(qd).max()
    assert c.points[1][0][6] < 0 < c.points[0][0][6]    # both branches of lambda_0


# -- auxiliary speeds (issue 12) -------------------------------------------------------------

# (q, u, r) of each model in tests/sympy_models/auxiliary_speeds.py; dependent speeds completed
AUXILIARY_POINTS = {
    "kane_aux": [([0.3, 0.4, 0.2], [0.5, -0.2, 0.7], [0.1, 0.2]),
                 ([-1.0, 0.9, 2.0], [-0.3, 1.1, 0.4], [0.0, -0.5])],
    "kane2_non_central_inertia": [([0.2, 0.1, -0.3], [0.4, 0.6, 0.0, 0.0], []),
                                  ([-0.7, 1.3, 0.5], [-1.2, 0.3, 0.0, 0.0], [])],
    "box_on_ground": [([0.3], [0.5], [2.0, 1.0]), ([-1.0], [-0.2], [0.7, -0.4])],
}


def auxiliary_speeds_of(kane):
    from codegen.sympy_adapter import auxiliary_speeds
    return auxiliary_speeds(kane)


def auxiliary_reference(kane, parameters, inputs):
    """SymPy's own equations of a KanesMethod with auxiliary speeds (its
    ``mass_matrix_full`` and ``forcing_full`` hold the o - m equations, not the
    auxiliary ones), with the auxiliary speeds and their derivatives set to
    zero where they remain (velocity constraints and their derivatives)."""
    ref = reference.KaneReference(kane, parameters, inputs)
    t = ref.t
    auxiliary = auxiliary_speeds_of(kane)
    zero = {ua.diff(t): 0 for ua in auxiliary} | {ua: 0 for ua in auxiliary}
    equations = ref.equations()
    for name, matrix in vars(equations).items():
        setattr(equations, name, sm.Matrix(matrix).xreplace(zero))
    return ref


@pytest.mark.parametrize("name", list(auxiliary_speeds.MAKERS))
def test_models_with_auxiliary_speeds_linearize(name, build_dir):
    """Accepted (issue 12): the auxiliary speeds are set to zero and their
    equations dropped, so A and B are those of the model without them:
    constrained finite differences of SymPy's own equations agree, and so
    does the state derivative."""
    kane, parameters, inputs = auxiliary_speeds.MAKERS[name]()
    model = Model(kane, parameters, inputs, name=name)
    assert not any(eq.has(*auxiliary_speeds_of(kane)) for eq in model.dynamic.col_join(model.f_v))
    compiled = codegen.build(model, output_dir=build_dir)
    ref = auxiliary_reference(kane, parameters, inputs)
    assert compiled.state_names == ref.state_names()
    for q, u, r in AUXILIARY_POINTS[name]:
        q, u = ref.complete(q, u)
        qd, ud = compiled.state_derivative(q, u, r)
        assert_matrices_close(np.concatenate([qd, ud]), np.concatenate(ref.state_derivative(q, u, r)), 1e-11)
        A, B = compiled.linearize(q, u, r)
        A_fd, B_fd = ref.constrained_fd_AB(q, u, r)
        assert_matrices_close(A, A_fd, 1e-6, f"{name} A at q={q}")
        assert_matrices_close(B, B_fd, 1e-6, f"{name} B at q={q}")
        if name == "box_on_ground":
            # sliding with friction mu N: x'' = (F - mu N)/m, nothing depends on the state
            m, mu = 1.0, 0.3
            assert_matrices_close(A, [[0, 1], [0, 0]], 1e-14)
            assert_matrices_close(B, [[0, 0], [-mu / m, 1 / m]], 1e-14)
