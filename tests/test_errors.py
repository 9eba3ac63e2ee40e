"""Bad input of every kind gets an exception that names the problem: which
argument, which constraint, which matrix, which batch index. Never a crash,
never a silent NaN or garbage."""

from pathlib import Path

import numpy as np
import pytest
import sympy as sm
import sympy.physics.mechanics as me

import codegen
from codegen.errors import (CodegenError, ConstraintViolationError, ConvergenceError, InputError,
                            ModelError, SingularMatrixError)


USER_MODELS = Path(__file__).resolve().parent / "user_models"


@pytest.fixture(scope="module")
def sled(build_dir):
    """A model with inputs (thrust F, torque T): tests/user_models/sled.py."""
    return codegen.build(codegen.load_model_file(f"{USER_MODELS / 'sled.py'}:make_model"),
                         output_dir=build_dir)


@pytest.fixture(scope="module")
def turn():
    """A consistent leaning steady turn (q, u) of the disk (all defaults)."""
    op = codegen.operating_point("disk", "steady_turn", lean=0.4, spin_rate=-3.0)
    return op.q, op.u


# -- shapes, lengths, types ------------------------------------------------------------


@pytest.mark.parametrize("argument, position, value, length", [
    ("q", 0, np.zeros(5), 6),
    ("q", 0, np.zeros(7), 6),
    ("u", 1, np.zeros(3), 6),
    ("r", 2, [1.0], 0),          # the disk has no inputs: an r of length 1 is wrong too
    ("p", 3, [1.0, 1.0], 3),
    ("p", 3, np.ones((2, 4)), 3),
])
def test_wrong_length_names_the_argument(disk, turn, argument, position, value, length):
    args = [turn[0], turn[1], None, None]
    args[position] = value
    with pytest.raises(InputError, match=rf"\b{argument} must have length {length}"):
        disk.linearize(*args)


def test_wrong_shapes_and_types(disk, turn):
    q, u = turn
    with pytest.raises(InputError, match=r"\bq must have length 6.*\(1, 1, 6, 1\)"):
        disk.linearize(q[None, None, :, None], u)
    with pytest.raises(InputError, match=r"\bq must have length 6"):
        disk.linearize(1.0, u)                       # a scalar
    with pytest.raises(InputError, match=r"\bq must be an array of numbers"):
        disk.linearize("abcdef", u)
    with pytest.raises(InputError, match=r"\bq must be an array, not a dict"):
        disk.linearize({"q1": 0.0}, u)
    with pytest.raises(InputError, match=r"\bt must be a number"):
        disk.linearize(q, u, t="now")
    with pytest.raises(InputError, match=r"do not broadcast.*q: \(3, 6\).*u: \(4, 6\)"):
        disk.linearize(np.tile(q, (3, 1)), np.tile(u, (4, 1)))
    with pytest.raises(InputError, match=r"do not broadcast.*t: \(2,\)"):
        disk.linearize(np.tile(q, (4, 1)), u, t=[0.0, 1.0])
    with pytest.raises(InputError, match=r"\bu must have length 6"):
        disk.state_derivative(q, u[:4])
    with pytest.raises(InputError, match=r"\bu must have length 6"):
        disk.constraint_residuals(q, u[:4])
    with pytest.raises(InputError, match=r"\bq must have length 6"):
        disk.complete(q[:5], u)


def test_complex_values_are_refused(disk, turn):
    """A complex q must not be cast to its real part silently (NumPy only
    warns); codegen should refuse it."""
    q, u = turn
    with pytest.raises(InputError, match=r"\bq\b"):
        disk.linearize(q + 1e-3j, u)


def test_errors_are_codegen_errors_and_value_errors(disk, turn):
    with pytest.raises(CodegenError):
        disk.linearize(turn[0][:5], turn[1])
    with pytest.raises(ValueError):
        disk.linearize(turn[0][:5], turn[1])


def test_inputs_of_a_model_with_inputs(sled):
    q, u = np.zeros(3), np.zeros(3)                   # at rest: consistent
    A, B = sled.linearize(q, u)                       # r defaults to zero
    assert A.shape == (5, 5) and B.shape == (5, 2)
    with pytest.raises(InputError, match=r"\br must have length 2.*\(3,\)"):
        sled.linearize(q, u, [1.0, 2.0, 3.0])
    with pytest.raises(InputError, match=r"\br must have length 2"):
        sled.linearize(q, u, 1.0)
    with pytest.raises(InputError, match=r"\br holds a non-finite value"):
        sled.linearize(q, u, [np.nan, 0.0])
    rb = np.zeros((4, 2))
    rb[1, 1] = np.inf
    # (the exact "(1,)" form is checked in test_non_finite_value_in_a_batch_...)
    with pytest.raises(InputError, match=r"\br holds a non-finite value at batch index \((np\.int64\()?1\)?,\)"):
        sled.linearize(q, u, rb)
    with pytest.raises(InputError, match=r"\br must have length 2"):
        sled.state_derivative(q, u, [1.0])


# -- non-finite values, batches --------------------------------------------------------


@pytest.mark.parametrize("argument", ["q", "u", "p", "t"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_value_names_the_argument(disk, turn, argument, bad):
    values = {"q": turn[0].copy(), "u": turn[1].copy(), "p": disk.default_parameters.copy(), "t": 0.0}
    if argument == "t":
        values["t"] = bad
    else:
        values[argument][1] = bad
    with pytest.raises(InputError, match=rf"\b{argument} holds a non-finite value"):
        disk.linearize(values["q"], values["u"], None, values["p"], values["t"])


def test_non_finite_value_in_a_batch_names_the_batch_index(disk, turn):
    """The index reads like the other messages' "(3,)" (not "(np.int64(3),)")."""
    q, u = turn
    qb = np.tile(q, (5, 1))
    qb[3, 2] = np.nan
    with pytest.raises(InputError, match=r"\bq holds a non-finite value at batch index \(3,\)"):
        disk.linearize(qb, u)
    ub = np.tile(u, (2, 3, 1))
    ub[1, 2, 0] = np.inf
    with pytest.raises(InputError, match=r"\bu holds a non-finite value at batch index \(1, 2\)"):
        disk.linearize(q, ub)
    with pytest.raises(InputError, match=r"\bt holds a non-finite value at batch index \(2,\)"):
        disk.linearize(q, u, t=[0.0, 1.0, np.nan])


# -- constraint violations ---------------------------------------------------------------


def test_configuration_constraint_violation_names_constraint_and_batch_index(disk, turn):
    q, u = turn
    qb = np.tile(q, (4, 1))
    qb[2, 5] += 1e-3                                # q6: contact constraint r cos q2 + q6
    with pytest.raises(ConstraintViolationError,
                       match=r"configuration constraints f_c.*f_c\[0\] = 1\.000e-03.*batch index \(2,\)"):
        disk.linearize(qb, u)
    with pytest.raises(ConstraintViolationError, match=r"f_c\[0\]"):
        disk.linearize(qb[2], u)


@pytest.mark.parametrize("speed, row", [(3, 0), (4, 1), (5, 2)])
def test_velocity_constraint_violation_names_the_row(disk, turn, speed, row):
    q, u = turn
    ub = np.tile(u, (3, 1))
    ub[1, speed] += 1e-3                            # u4, u5, u6 enter rolling rows 0, 1, 2
    with pytest.raises(ConstraintViolationError,
                       match=rf"velocity constraints f_v.*f_v\[{row}\] = 1\.000e-03.*batch index \(1,\)"):
        disk.linearize(q, ub)


def test_tolerance(disk, turn):
    q, u = turn
    bad = q.copy()
    bad[5] += 1e-6
    with pytest.raises(ConstraintViolationError, match=r"tol 1e-08"):
        disk.linearize(bad, u)
    A, _ = disk.linearize(bad, u, tol=1e-5)           # within a looser tolerance
    A_none, _ = disk.linearize(bad, u, tol=None)      # check skipped on request
    assert np.all(np.isfinite(A)) and np.array_equal(A, A_none)
    with pytest.raises(ConstraintViolationError, match=r"tol 1e-10"):
        disk.linearize_full(bad, u, tol=1e-10)


@pytest.mark.parametrize("tol", [-1.0, np.nan])
def test_invalid_tolerance_is_refused(disk, turn, tol):
    """A negative or NaN tolerance must not silently switch the constraint
    check off (only tol=None does that)."""
    q, u = turn
    bad = q.copy()
    bad[5] += 0.1
    with pytest.raises((InputError, ConstraintViolationError), match="tol"):
        disk.linearize(bad, u, tol=tol)


# -- singular partitions ---------------------------------------------------------------


def test_singular_configuration_partition_names_matrix_and_coordinates(disk, turn):
    """d f_c/d q1 = 0 everywhere: the yaw cannot be the dependent coordinate."""
    q, u = turn
    with pytest.raises(SingularMatrixError, match=r"J_c P_qd.*\['q1'\].*dependent_q"):
        disk.linearize(q, u, dependent_q=["q1"])
    with pytest.raises(SingularMatrixError, match=r"J_c P_qd.*\['q1'\]"):
        disk.linearize_full(q, u, dependent_q=[0])


def test_partition_singular_only_at_the_point(disk, turn):
    """Lean q2 dependent: d f_c/d q2 = -r sin q2 vanishes upright. It works
    in the turn, fails upright, and in a batch names the upright point."""
    up = codegen.operating_point("disk", "upright", v=0.5)
    A, _ = disk.linearize(*turn, dependent_q=["q2"])
    assert np.all(np.isfinite(A))
    with pytest.raises(SingularMatrixError, match=r"J_c P_qd.*\['q2'\]"):
        disk.linearize(up.q, up.u, dependent_q=["q2"])
    q = np.stack([turn[0], turn[0], up.q])
    u = np.stack([turn[1], turn[1], up.u])
    with pytest.raises(SingularMatrixError, match=r"\['q2'\].*batch index \(2,\)"):
        disk.linearize(q, u, dependent_q=["q2"])


def test_singular_velocity_partition_names_matrix_and_speeds(disk, turn):
    """d f_v/d u3 = 0: u3 cannot be a dependent speed."""
    q, u = turn
    with pytest.raises(SingularMatrixError, match=r"B_v P_ud.*\['u1', 'u2', 'u3'\].*dependent_u"):
        disk.linearize(q, u, dependent_u=["u1", "u2", "u3"])


def test_singular_mass_matrix(disk, turn):
    q, u = turn
    with pytest.raises(SingularMatrixError, match="mass matrix"):
        disk.linearize(q, u, p={"m": 0.0})
    with pytest.raises(SingularMatrixError, match="mass matrix"):
        disk.state_derivative(q, u, p={"m": 0.0})


# -- bad partitions ----------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, message", [
    ({"dependent_q": [6]}, r"dependent_q index 6 is out of range 0\.\.5"),
    ({"dependent_q": [-1]}, r"dependent_q index -1 is out of range"),
    ({"dependent_u": [3, 3, 4]}, r"dependent_u repeats an index"),
    ({"dependent_u": ["u4", "u4", "u5"]}, r"dependent_u repeats an index"),
    ({"dependent_q": [4, 5]}, r"dependent_q needs 1 entries.*got 2"),
    ({"dependent_q": []}, r"dependent_q needs 1 entries.*got 0"),
    ({"dependent_u": [3, 4]}, r"dependent_u needs 3 entries.*got 2"),
    ({"dependent_u": ["u7", "u4", "u5"]}, r"dependent_u: unknown name 'u7'"),
    ({"dependent_q": ["x"]}, r"dependent_q: unknown name 'x'"),
    ({"dependent_q": ["u1"]}, r"dependent_q: unknown name 'u1'"),
    ({"dependent_u": [3.0, 4, 5]}, r"dependent_u must hold indices or names"),
    ({"dependent_u": [True, 4, 5]}, r"dependent_u must hold indices or names"),
])
def test_bad_partition(disk, turn, kwargs, message):
    q, u = turn
    for call in (lambda: disk.linearize(q, u, **kwargs),
                 lambda: disk.linearize_full(q, u, **kwargs),
                 lambda: disk.complete(q, u, **kwargs),
                 lambda: disk.independent_state_names(**kwargs)):
        with pytest.raises(InputError, match=message):
            call()


# -- parameters ---------------------------------------------------------------------------


def test_parameters_by_name(disk, turn):
    q, u = turn
    with pytest.raises(InputError, match=r"unknown parameter 'mass'.*m, r, g"):
        disk.linearize(q, u, p={"mass": 2.0})
    with pytest.raises(InputError, match=r"unknown parameter 'mass'"):
        disk.parameters(mass=2.0)
    # a partial dict keeps the other defaults
    A_dict, _ = disk.linearize(q, u, p={"m": 2.5})
    A_vec, _ = disk.linearize(q, u, p=[2.5, 1.0, 1.0])
    np.testing.assert_array_equal(A_dict, A_vec)
    # r changes the contact constraint: the point no longer satisfies it
    with pytest.raises(ConstraintViolationError, match=r"f_c\[0\]"):
        disk.linearize(q, u, p={"r": 0.5})


def test_non_numeric_parameter_value_names_the_parameter(disk, turn):
    """An InputError naming the parameter, not NumPy's bare ValueError."""
    q, u = turn
    with pytest.raises(InputError, match=r"\br\b"):
        disk.linearize(q, u, p={"r": "large"})


# -- completing a point -------------------------------------------------------------------


def test_complete_does_not_converge(disk):
    """q6 = -2 with r = 1 and the lean q2 dependent: cos q2 = 2 has no solution."""
    with pytest.raises(ConvergenceError, match="Newton"):
        disk.complete(np.array([0, 0.5, 0, 0, 0, -2.0]), np.zeros(6), dependent_q=["q2"])
    with pytest.raises(SingularMatrixError, match=r"J_c P_qd.*\['q2'\]"):
        disk.complete(np.array([0, 0.0, 0, 0, 0, -2.0]), np.zeros(6), dependent_q=["q2"])


# -- models ---------------------------------------------------------------------------------


def spring_kane(extra_force=0, kinematic_extra=0, constraint=None):
    """A mass on a spring (x, v), optionally with extra terms."""
    x, v = me.dynamicsymbols("x v")
    m, k = sm.symbols("m k")
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    P = O.locatenew("P", x * N.x)
    P.set_vel(N, v * N.x)
    kane = me.KanesMethod(N, q_ind=[x], u_ind=[v], kd_eqs=[x.diff() - v + kinematic_extra])
    kane.kanes_equations([me.Particle("P", P, m)], [(P, (-k * x + extra_force) * N.x)])
    return kane, m, k


def test_model_with_undeclared_symbol_names_it():
    kane, m, k = spring_kane(extra_force=sm.Symbol("c_damp") * me.dynamicsymbols("v"))
    with pytest.raises(ModelError, match=r"not declared parameters: c_damp, k"):
        codegen.Model(kane, parameters={m: 1.0}, name="spring")


def test_model_parameter_checks():
    kane, m, k = spring_kane()
    with pytest.raises(ModelError, match=r"default value of k is not a number"):
        codegen.Model(kane, parameters={m: 1.0, k: "stiff"}, name="spring")
    with pytest.raises(ModelError, match=r"default value of k is not finite"):
        codegen.Model(kane, parameters={m: 1.0, k: float("nan")}, name="spring")
    with pytest.raises(ModelError, match=r"parameters must be a dict"):
        codegen.Model(kane, parameters=[m, k], name="spring")
    with pytest.raises(ModelError, match=r"C identifier"):
        codegen.Model(kane, parameters={m: 1.0, k: 1.0}, name="my-spring")


def test_model_input_checks():
    F, G = me.dynamicsymbols("F G")
    kane, m, k = spring_kane(extra_force=F + G)
    with pytest.raises(ModelError, match=r"depend on \['G\(t\)'\].*not among the declared inputs"):
        codegen.Model(kane, parameters={m: 1.0, k: 1.0}, inputs=[F], name="spring")
    with pytest.raises(ModelError, match=r"repeated"):
        codegen.Model(kane, parameters={m: 1.0, k: 1.0}, inputs=[F, G, F], name="spring")
    model = codegen.Model(kane, parameters={m: 1.0, k: 1.0}, name="spring")
    assert model.r_names == ["F", "G"]
    # an input in the kinematic equations is refused
    kane, m, k = spring_kane(kinematic_extra=F)
    with pytest.raises(ModelError, match=r"kinematic equations contain time-varying symbols \['F\(t\)'\]"):
        codegen.Model(kane, parameters={m: 1.0, k: 1.0}, name="spring")


def test_model_needs_kanes_equations():
    x, v = me.dynamicsymbols("x v")
    kane = me.KanesMethod(me.ReferenceFrame("N"), q_ind=[x], u_ind=[v], kd_eqs=[x.diff() - v])
    with pytest.raises(ModelError, match=r"kanes_equations"):
        codegen.Model(kane, parameters={}, name="spring")


def test_model_file_errors(tmp_path):
    with pytest.raises(ModelError, match=r"does not exist"):
        codegen.load_model_file(f"{tmp_path / 'missing.py'}:make_model")
    path = tmp_path / "not_a_model.py"
    path.write_text("def make_model():\n    return 42\n")
    with pytest.raises(ModelError, match=r"has no function 'make_system'"):
        codegen.load_model_file(f"{path}:make_system")
    with pytest.raises(ModelError, match=r"returned int, expected codegen.Model"):
        codegen.load_model_file(f"{path}:make_model")
    with pytest.raises(ModelError, match=r"path/to/file.py:function"):
        codegen.load_model_file(str(path))
