"""Models written by a user, built through the user-file path, checked against
SymPy's Linearizer and constrained finite differences (tests/reference.py) at
consistent operating points that are not equilibria.

The models (tests/user_models/):

* driven_pendulum -- explicit time in the configuration constraints (a pivot
  driven along x_p(t) = a sin(omega t)); velocity constraints hold the partial
  time derivative; two dependent coordinates and speeds; a force input.
* sled -- Chaplygin sled: a nonholonomic constraint and two inputs; its
  default partition is singular at heading pi/2.
* fourbar -- closed kinematic loop: two configuration constraints, one degree
  of freedom, a motor torque input.
* rotating_wire -- speeds relative to a frame turning at a prescribed rate:
  explicit time in the constraint and the kinematic equations, kinematic
  terms free of qd and u (which SymPy's to_linearizer counts twice).
* belt_sled -- a sled with a rotor on a belt moving at a sin(Omega t): explicit
  time and parameters in a nonholonomic constraint (the dependent speed moves
  with them), two inputs.
"""

import importlib.util
import os
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest

import codegen
from codegen.errors import ConstraintViolationError, SingularMatrixError

import reference
from reference import assert_matrices_close

USER_MODELS = Path(__file__).resolve().parent / "user_models"
MODELS = ["driven_pendulum", "sled", "fourbar", "rotating_wire", "belt_sled"]
SEEDS = [11, 22, 33]

# another valid partition of each model (names), checked like the default one
OTHER_PARTITION = {
    "driven_pendulum": (["x1", "y2"], ["u1", "u4"]),
    "sled": ([], ["ux"]),
    "fourbar": (["q1", "q3"], ["u1", "u3"]),
    "rotating_wire": (["x"], ["u2"]),
    "belt_sled": ([], ["ux"]),
}

# SymPy's Linearizer with A_and_B=True solves M symbolically with the point
# substituted, and for the belt sled pivots on rounding noise (at seed 22 its B
# holds -4 where M^-1 B~ has 0, and A differs by 158): there its own M, A~, B~
# solved by NumPy are the reference (the same matrices; both routes agree on
# the other models)
NUMERIC_SOLVE = {"belt_sled"}

Case = namedtuple("Case", "name model compiled source ref")


def import_user_file(name):
    """The user's model file as a module (for its operating points and for
    capturing its KanesMethod), independent of codegen's loader."""
    spec = importlib.util.spec_from_file_location(f"user_model_source_{name}", USER_MODELS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module", params=MODELS)
def case(request, build_dir):
    name = request.param
    model = codegen.load_model_file(f"{USER_MODELS / name}.py:make_model")
    compiled = codegen.build(model, output_dir=build_dir)
    source = import_user_file(name)
    kane, kwargs = reference.capture_kane(source)
    ref = reference.KaneReference(kane, kwargs["parameters"], kwargs["inputs"])
    return Case(name, model, compiled, source, ref)


def points(case):
    return [case.source.operating_point(seed) for seed in SEEDS]


def indices(names, all_names):
    return [list(all_names).index(n) for n in names]


def test_names_sizes_and_state_order(case):
    c, model = case.compiled, case.model
    assert c.q_names == tuple(model.q_names) and c.u_names == tuple(model.u_names)
    assert c.r_names == tuple(model.r_names) and c.p_names == tuple(case.source.PARAMETERS)
    assert (c.nq, c.nu, c.nc, c.nv, c.nr) == (case.ref.nq, case.ref.nu, case.ref.nc, case.ref.nv,
                                             case.ref.nr)
    assert np.array_equal(c.default_parameters, list(case.source.PARAMETERS.values()))
    # SymPy's A has the states [q_ind, u_ind] in the KanesMethod's order
    assert c.state_names == case.ref.linearizer_state_names() == case.ref.state_names()
    dq, du = OTHER_PARTITION[case.name]
    dq_i, du_i = indices(dq, c.q_names), indices(du, c.u_names)
    assert c.independent_state_names(dq or None, du) == case.ref.linearizer_state_names(dq_i or None, du_i)


def test_operating_points_are_consistent_and_not_equilibria(case):
    for q, u, r, p, t in points(case):
        f_c, f_v = case.ref.residuals(q, u, p, t)
        assert np.abs(np.concatenate([f_c, f_v, [0.0]])).max() < 1e-12
        f_c, f_v = case.compiled.constraint_residuals(q, u, p=p, t=t)
        assert np.abs(np.concatenate([f_c, f_v, [0.0]])).max() < 1e-12
        qd, ud = case.ref.state_derivative(q, u, r, p, t)
        assert np.abs(ud).max() > 0.1, "the point should be accelerating"
        assert np.all(r != 0.0), "nonzero inputs"


def test_state_derivative_matches_sympy(case):
    for q, u, r, p, t in points(case):
        qd, ud = case.compiled.state_derivative(q, u, r, p, t)
        qd_ref, ud_ref = case.ref.state_derivative(q, u, r, p, t)
        assert_matrices_close(np.concatenate([qd, ud]), np.concatenate([qd_ref, ud_ref]), 1e-11)


def test_linearize_matches_sympy_linearizer(case):
    """SymPy's A and B (its own solve; for NUMERIC_SOLVE its M, A~, B~
    solved by NumPy, which the first point checks on every model)."""
    for k, (q, u, r, p, t) in enumerate(points(case)):
        A, B = case.compiled.linearize(q, u, r, p, t)
        routes = [True] if case.name in NUMERIC_SOLVE else [False] + [True] * (k == 0)
        for numeric in routes:
            A_ref, B_ref = case.ref.linearizer_AB(q, u, r, p, t, numeric_solve=numeric)
            assert A.shape == A_ref.shape and B.shape == B_ref.shape
            assert_matrices_close(A, A_ref, 1e-9, f"{case.name} A at t={t} (numeric solve: {numeric})")
            assert_matrices_close(B, B_ref, 1e-9, f"{case.name} B at t={t} (numeric solve: {numeric})")


def test_linearize_matches_constrained_finite_differences(case):
    for q, u, r, p, t in points(case):
        A, B = case.compiled.linearize(q, u, r, p, t)
        A_fd, B_fd = case.ref.constrained_fd_AB(q, u, r, p, t)
        assert_matrices_close(A, A_fd, 1e-6, f"{case.name} A")
        assert_matrices_close(B, B_fd, 1e-6, f"{case.name} B")


def test_linearize_full_rows_of_dependent_states(case):
    """A' (all coordinates and speeds) agrees with SymPy's M^-1 A~, and its
    rows of the independent states are A."""
    q, u, r, p, t = points(case)[0]
    A_full, B_full = case.compiled.linearize_full(q, u, r, p, t)
    lin = case.ref.linearizer()
    M, A_tilde, B_tilde = lin.linearize(op_point=case.ref.op_point(q, u, r, p, t))
    M = np.array(M.evalf(), dtype=float)
    expected_A = np.linalg.solve(M, np.array(A_tilde.evalf(), dtype=float))
    assert_matrices_close(A_full, expected_A, 1e-9, "A_full")
    if case.ref.nr:
        expected_B = np.linalg.solve(M, np.array(B_tilde.evalf(), dtype=float))
        assert_matrices_close(B_full, expected_B, 1e-9, "B_full")
    A, B = case.compiled.linearize(q, u, r, p, t)
    rows = [i for i, n in enumerate(case.compiled.full_state_names) if n in case.compiled.state_names]
    assert np.array_equal(A_full[rows], A) and np.array_equal(B_full[rows], B)


def test_another_partition(case):
    """Dependent coordinates and speeds chosen at call time: SymPy's
    Linearizer and finite differences with the same partition agree. (Away
    from equilibria A is not similar across partitions: x_i2 = T(x) x_i1 with
    T varying along the motion adds dT/dt T^-1, so no eigenvalue check here.)"""
    dq, du = OTHER_PARTITION[case.name]
    dq_i, du_i = indices(dq, case.compiled.q_names), indices(du, case.compiled.u_names)
    for q, u, r, p, t in points(case)[:2]:
        A, B = case.compiled.linearize(q, u, r, p, t, dependent_q=dq or None, dependent_u=du)
        A_ref, B_ref = case.ref.linearizer_AB(q, u, r, p, t, dq_i or None, du_i,
                                              numeric_solve=case.name in NUMERIC_SOLVE)
        assert_matrices_close(A, A_ref, 1e-9, "A, other partition")
        assert_matrices_close(B, B_ref, 1e-9, "B, other partition")
        A_fd, B_fd = case.ref.constrained_fd_AB(q, u, r, p, t, dq_i or None, du_i)
        assert_matrices_close(A, A_fd, 1e-6, "A, other partition (FD)")


def test_batch_equals_single_points(case):
    """Leading dimensions broadcast, t included (one time per point)."""
    pts = points(case)
    q, u, r, p, t = (np.array([pt[i] for pt in pts]) for i in range(5))
    A, B = case.compiled.linearize(q, u, r, p, t)
    assert A.shape[0] == len(pts)
    for k, pt in enumerate(pts):
        A_k, B_k = case.compiled.linearize(*pt)
        np.testing.assert_array_equal(A[k], A_k)
        np.testing.assert_array_equal(B[k], B_k)


# -- model-specific checks ------------------------------------------------------------


@pytest.fixture(scope="module")
def model_case(build_dir):
    """One named user model, built once (shares the cache with ``case``)."""
    cache = {}

    def get(name):
        if name not in cache:
            model = codegen.load_model_file(f"{USER_MODELS / name}.py:make_model")
            source = import_user_file(name)
            kane, kwargs = reference.capture_kane(source)
            cache[name] = Case(name, model, codegen.build(model, output_dir=build_dir), source,
                               reference.KaneReference(kane, kwargs["parameters"], kwargs["inputs"]))
        return cache[name]
    return get


def test_explicit_time_in_the_constraints(model_case):
    """driven_pendulum: a point consistent at time t violates the constraints at
    another time; the velocity constraint holds the pivot's velocity (the
    partial time derivative), so linearizing at t = 0 is refused."""
    c = model_case("driven_pendulum")
    q, u, r, p, t = c.source.operating_point(5, t=0.7)
    f_c, f_v = c.compiled.constraint_residuals(q, u, p=p, t=t)
    assert np.abs(f_c).max() < 1e-12 and np.abs(f_v).max() < 1e-12
    f_c, f_v = c.compiled.constraint_residuals(q, u, p=p, t=t + 0.3)
    assert np.abs(f_c).max() > 1e-3
    with pytest.raises(ConstraintViolationError, match="f_c"):
        c.compiled.linearize(q, u, r, p, 0.0)
    # u at a time where only the pivot velocity differs: the same q satisfies
    # f_c at t and at the mirrored time pi/omega - t, the velocities do not
    omega = c.source.PARAMETERS["omega"]
    mirrored = np.pi / omega - t
    f_c, f_v = c.compiled.constraint_residuals(q, u, p=p, t=mirrored)
    assert np.abs(f_c).max() < 1e-12 and np.abs(f_v).max() > 1e-3
    with pytest.raises(ConstraintViolationError, match=r"f_v\[0\]"):
        c.compiled.linearize(q, u, r, p, mirrored)
    # and A changes with t through the explicit time (same x_i, re-completed)
    q2, u2 = c.compiled.complete(q, u, p=p, t=mirrored)
    A1, _ = c.compiled.linearize(q, u, r, p, t)
    A2, _ = c.compiled.linearize(q2, u2, r, p, mirrored)
    A2_ref, _ = c.ref.linearizer_AB(q2, u2, r, p, mirrored)
    assert_matrices_close(A2, A2_ref, 1e-9)
    assert np.abs(A1 - A2).max() > 1e-3


def test_sled_singular_partitions(model_case):
    """Heading theta = 0: with ux dependent B_v P_ud = -sin(theta) = 0, a
    SingularMatrixError naming B_v P_ud and ux; the default (uy) works there.
    Heading theta = pi/2: the default uy cannot be solved for (an error naming
    uy), but the dynamics are in multiplier form, not reduced symbolically for
    uy, so choosing ux dependent at run time works: checked against SymPy's
    Linearizer on a KanesMethod built with ux dependent."""
    c = model_case("sled")
    b = c.source.PARAMETERS["b"]
    r = np.array([0.7, -0.4])
    # theta = 0: -ux sin + uy cos - b w = 0 -> uy = b w
    q = np.array([0.3, -0.2, 0.0])
    u = np.array([1.1, 0.8, b * 0.8])            # (ux, w, uy)
    assert abs(c.compiled.constraint_residuals(q, u)[1][0]) < 1e-15
    with pytest.raises(SingularMatrixError, match=r"B_v P_ud.*\['ux'\]"):
        c.compiled.linearize(q, u, r, dependent_u=["ux"])
    A, B = c.compiled.linearize(q, u, r)
    A_ref, B_ref = c.ref.linearizer_AB(q, u, r)
    assert_matrices_close(A, A_ref, 1e-9)
    assert_matrices_close(B, B_ref, 1e-9)
    A_fd, B_fd = c.ref.constrained_fd_AB(q, u, r)
    assert_matrices_close(A, A_fd, 1e-6)
    assert_matrices_close(B, B_fd, 1e-6)
    # theta = pi/2: -ux - b w = 0
    q = np.array([0.3, -0.2, np.pi / 2])
    u = np.array([-b * 0.8, 0.8, -0.6])
    assert abs(c.compiled.constraint_residuals(q, u)[1][0]) < 1e-15
    with pytest.raises(SingularMatrixError, match=r"B_v P_ud.*\['uy'\]"):
        c.compiled.linearize(q, u, r)
    A, B = c.compiled.linearize(q, u, r, dependent_u=["ux"])
    assert list(c.compiled.independent_state_names(dependent_u=["ux"])) == ["x", "y", "theta", "w", "uy"]
    kane, kwargs = reference.capture_kane(c.source, "make_model_ux_dependent")
    ref = reference.KaneReference(kane, kwargs["parameters"], kwargs["inputs"])
    order = [0, 1, 2, 4, 3]                                 # SymPy's states: x, y, theta, uy, w
    A_fd, B_fd = ref.constrained_fd_AB(q, u[[2, 1, 0]], r)
    assert_matrices_close(A, A_fd[np.ix_(order, order)], 1e-6)
    assert_matrices_close(B, B_fd[order], 1e-6)
    # SymPy's Linearizer on that KanesMethod is not a reference at theta = pi/2:
    # its symbolic LU pivots on cos(theta) (structurally non-zero, numerically
    # 6e-17 there) and loses every digit of the uy row; its error grows like
    # eps / cos(theta) (1e-8 at pi/2 - 1e-8). A little away from pi/2 it agrees.
    A_sympy, _ = ref.linearizer_AB(q, u[[2, 1, 0]], r)
    assert np.abs(A_sympy[np.ix_(order, order)] - A).max() > 1e-3
    q[2] = np.pi / 2 - 0.01
    q, u = c.compiled.complete(q, u, dependent_u=["ux"])
    A, B = c.compiled.linearize(q, u, r, dependent_u=["ux"])
    A_ref, B_ref = ref.linearizer_AB(q, u[[2, 1, 0]], r)
    assert_matrices_close(A, A_ref[np.ix_(order, order)], 1e-9)
    assert_matrices_close(B, B_ref[order], 1e-9)


def test_sympy_to_linearizer_double_counts_rheonomic_terms(model_case):
    """Documents a SymPy pitfall (tests/reference.py): for speeds relative to
    a turning frame, the unpatched kane.to_linearizer() counts the kinematic
    terms free of qd and u (omega x r) and the centripetal part of Fr* twice
    and gets A wrong; constrained finite differences, the patched Linearizer
    and codegen agree."""
    c = model_case("rotating_wire")
    q, u, r, p, t = c.source.operating_point(7)
    A, B = c.compiled.linearize(q, u, r, p, t)
    A_fd, _ = c.ref.constrained_fd_AB(q, u, r, p, t)
    A_patched, _ = c.ref.linearizer_AB(q, u, r, p, t)
    A_sympy, _ = c.ref.linearizer_AB(q, u, r, p, t, fix_double_count=False)
    assert_matrices_close(A, A_fd, 1e-6)
    assert_matrices_close(A_patched, A_fd, 1e-6)
    assert np.abs(A_sympy - A_fd).max() > 0.1


def test_fourbar_partition_singular_at_the_toggle_position(model_case):
    """With the crank and coupler dependent (q1, q2), J_c P_qd is singular
    where crank and coupler are collinear: a toggle position of the
    crank-rocker, where the rocker is at an extreme. codegen names the matrix
    and the coordinates; the default partition (q2, q3) works there and agrees
    with SymPy's Linearizer."""
    c = model_case("fourbar")
    par = c.source.PARAMETERS
    l0, l1, l2, l3 = par["l0"], par["l1"], par["l2"], par["l3"]
    # |B - O| = l1 + l2 with B = D + l3 (cos q3, sin q3)
    q3 = np.arccos(((l1 + l2) ** 2 - l0 ** 2 - l3 ** 2) / (2 * l0 * l3))
    b_point = np.array([l0 + l3 * np.cos(q3), l3 * np.sin(q3)])
    q1 = q2 = np.arctan2(b_point[1], b_point[0])
    q = np.array([q1, q2, q3])
    u = np.array([1.3, 0.0, 0.0])
    u = c.compiled.complete(q, u)[1]      # speeds of coupler and rocker (q needs nothing)
    r = np.array([0.4])
    f_c, f_v = c.compiled.constraint_residuals(q, u)
    assert np.abs(np.concatenate([f_c, f_v])).max() < 1e-12
    with pytest.raises(SingularMatrixError, match=r"J_c P_qd.*\['q1', 'q2'\]"):
        c.compiled.linearize(q, u, r, dependent_q=["q1", "q2"], dependent_u=["u1", "u3"])
    with pytest.raises(SingularMatrixError, match=r"B_v P_ud.*\['u1', 'u2'\]"):
        c.compiled.linearize(q, u, r, dependent_q=["q2", "q3"], dependent_u=["u1", "u2"])
    A, B = c.compiled.linearize(q, u, r)
    A_ref, B_ref = c.ref.linearizer_AB(q, u, r)
    assert_matrices_close(A, A_ref, 1e-9)
    assert_matrices_close(B, B_ref, 1e-9)


# -- the command line on a user file ---------------------------------------------------


def test_cli_builds_a_user_model_file(tmp_path, model_case):
    """python -m codegen build tests/user_models/sled.py:make_model --output-dir D,
    then a fresh process imports the build with codegen.load and linearizes;
    the result equals SymPy's Linearizer."""
    env = dict(os.environ, CI="true")
    result = subprocess.run(
        [sys.executable, "-m", "codegen", "build", f"{USER_MODELS / 'sled.py'}:make_model",
         "--output-dir", str(tmp_path)], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "model sled" in out
    assert "speeds u (3, dependent ['uy']): ux, w, uy" in out
    assert "inputs r (2): F, T" in out
    assert "states x (5): x, y, theta, ux, w" in out
    assert "eigenvalues of A at" in out
    assert (tmp_path / "sled").is_symlink()

    c = model_case("sled")
    q, u, r, p, t = c.source.operating_point(SEEDS[0])
    script = (
        "import sys, numpy as np, codegen\n"
        f"m = codegen.load('sled', output_dir={str(tmp_path)!r})\n"
        f"A, B = m.linearize({q.tolist()}, {u.tolist()}, {r.tolist()}, {p.tolist()}, {t})\n"
        f"np.savez({str(tmp_path / 'ab.npz')!r}, A=A, B=B)\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    saved = np.load(tmp_path / "ab.npz")
    A_ref, B_ref = c.ref.linearizer_AB(q, u, r, p, t)
    assert_matrices_close(saved["A"], A_ref, 1e-9)
    assert_matrices_close(saved["B"], B_ref, 1e-9)
