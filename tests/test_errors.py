"""Bad input of every kind gets an exception that names the problem: which
argument, which constraint, which matrix, which batch index. Never a crash,
never a silent NaN or garbage."""

import re
from pathlib import Path

import numpy as np
import pytest
import sympy as sm
import sympy.physics.mechanics as me

import codegen
from codegen.errors import (CodegenError, ConstraintViolationError, ConvergenceError, EvaluationError,
                            InputError, ModelError, SingularMatrixError)


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
    warns); codegen should refuse it and say so."""
    q, u = turn
    with pytest.raises(InputError, match=r"\bq holds complex values"):
        disk.linearize(q + 1e-3j, u)
    with pytest.raises(InputError, match=r"\bu holds complex values"):
        disk.linearize_full(q, np.array(list(u + 1j), dtype=object))
    with pytest.raises(InputError, match=r"\bp holds complex values"):
        disk.state_derivative(q, u, p=disk.default_parameters + 0j)
    with pytest.raises(InputError, match=r"\bt holds complex values"):
        disk.constraint_residuals(q, u, t=1j)
    with pytest.raises(InputError, match=r"\bq holds complex values"):
        disk.complete(np.tile(q + 1e-3j, (3, 1)), u)


def test_numbers_a_double_cannot_hold_and_strings_are_refused(disk, turn):
    q, u = turn
    with pytest.raises(InputError, match=r"\bq holds a number too large for a double"):
        disk.linearize([10**400] * 6, u)
    with pytest.raises(InputError, match=r"\bt\b"):
        disk.linearize(q, u, t=10**400)
    with pytest.raises(InputError, match=r"parameter 'm' must be a number that fits a double"):
        disk.linearize(q, u, p={"m": 10**400})
    with pytest.raises(InputError, match=r"\bu must be an array of numbers"):
        disk.linearize(q, [str(x) for x in u])          # NumPy would parse the strings
    with pytest.raises(InputError, match=r"\btol\b"):
        disk.linearize(q, u, tol=10**400)


@pytest.mark.parametrize("threads", ["a", 0, -2, 1.5, True, [2], 1025, 2**31, 10**20])
def test_bad_thread_count(disk, turn, threads):
    q, u = turn
    for call in (lambda: disk.linearize(q, u, threads=threads),
                 lambda: disk.linearize(np.tile(q, (3, 1)), u, threads=threads),
                 lambda: disk.linearize_full(q, u, threads=threads),
                 lambda: disk.state_derivative(q, u, threads=threads)):
        with pytest.raises(InputError, match=r"threads must be a whole number from 1 to 1024"):
            call()


@pytest.mark.parametrize("max_iter", [10**12, -1, 2.5, "many", None])
def test_bad_iteration_limit(disk, turn, max_iter):
    with pytest.raises(InputError, match=r"max_iter must be a whole number"):
        disk.complete(*turn, max_iter=max_iter)


def test_parameters_keyed_by_sympy_symbols(disk, turn):
    q, u = turn
    A_symbol, _ = disk.linearize(q, u, p={sm.Symbol("m"): 2.5})
    A_name, _ = disk.linearize(q, u, p={"m": 2.5})
    assert np.array_equal(A_symbol, A_name)
    with pytest.raises(InputError, match=r"unknown parameter 'mass'"):
        disk.linearize(q, u, p={sm.Symbol("mass"): 2.5})


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


def test_violation_under_changed_parameters_says_to_recompute_the_point(disk):
    """The README's p={"r": 0.3} at a point made for r = 1: say why and what to do."""
    op = codegen.operating_point("disk", "upright", v=0.5)
    with pytest.raises(ConstraintViolationError,
                       match=r"f_c\[0\].*differ from the defaults \(r = 0\.3\).*"
                             r"codegen\.operating_point\(\.\.\., parameters=\{\.\.\.\}\).*complete\("):
        disk.linearize(op.q, op.u, p={"r": 0.3})
    qb = np.tile(op.q, (3, 1))
    with pytest.raises(ConstraintViolationError, match=r"batch index \(0,\).*r = 0\.3"):
        disk.linearize(qb, op.u, p=[1.0, 0.3, 1.0])
    # with the defaults there is nothing to recompute: no hint
    bad = op.q.copy()
    bad[5] += 0.1
    with pytest.raises(ConstraintViolationError) as error:
        disk.linearize(bad, op.u)
    assert "parameters" not in str(error.value)
    # the point made for the parameters is consistent
    op3 = codegen.operating_point("disk", "upright", parameters={"r": 0.3}, v=0.5)
    assert np.all(np.isfinite(disk.linearize(*op3)[0]))


def test_non_numeric_parameter_value_names_the_parameter(disk, turn):
    """An InputError naming the parameter, not NumPy's bare ValueError."""
    q, u = turn
    with pytest.raises(InputError, match=r"\br\b"):
        disk.linearize(q, u, p={"r": "large"})


# -- completing a point -------------------------------------------------------------------


def test_complete_does_not_converge(disk):
    """q6 = -2 with r = 1 and the lean q2 dependent: cos q2 = 2 has no solution.
    The message gives the residual Newton's method ended with and its steps."""
    with pytest.raises(ConvergenceError,
                       match=r"Newton.*\|f_c\|_inf = \d\.\d{3}e[+-]\d+ after 50 iterations \(tol 1e-12\)"):
        disk.complete(np.array([0, 0.5, 0, 0, 0, -2.0]), np.zeros(6), dependent_q=["q2"])
    qb = np.zeros((3, 6))
    qb[:, 1] = 0.5
    qb[:, 5] = -0.9
    qb[2, 5] = -2.0
    with pytest.raises(ConvergenceError, match=r"converge at batch index \(2,\): .* after 20 iterations"):
        disk.complete(qb, np.zeros(6), dependent_q=["q2"], max_iter=20)
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


# -- NaN from the model's own expressions --------------------------------------------------


@pytest.fixture(scope="module")
def ring(build_dir):
    """A particle (mass m sin(c)/c: 0/0 at the parameter c = 0) held on the
    circle sqrt(x^2 + y^2) = L, whose derivatives x/sqrt(x^2 + y^2), ... are
    0/0 at the centre: where the model's own expressions are NaN, which is
    not where a matrix is singular."""
    x, y = me.dynamicsymbols("x y")
    vx, vy = me.dynamicsymbols("vx vy")
    m, k, c, L = sm.symbols("m k c L")
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    P = O.locatenew("P", x * N.x + y * N.y)
    P.set_vel(N, vx * N.x + vy * N.y)
    radius = sm.sqrt(x**2 + y**2)
    kane = me.KanesMethod(N, q_ind=[x], u_ind=[vx], kd_eqs=[x.diff() - vx, y.diff() - vy],
                          q_dependent=[y], configuration_constraints=[radius - L],
                          u_dependent=[vy], velocity_constraints=[(x * vx + y * vy) / radius])
    kane.kanes_equations([me.Particle("P", P, m * sm.sin(c) / c)], [(P, -k * x * N.x)])
    model = codegen.Model(kane, parameters={m: 1.0, k: 1.0, c: 1.0, L: 1.0}, name="ring")
    return codegen.build(model, output_dir=build_dir)


def test_nan_in_the_mass_matrix_is_not_called_singular(ring):
    """sin(c)/c at c = 0: the mass matrix is NaN; the straight-line code falls
    back to the general path, whose LU finds no usable pivot. Both must say NaN."""
    q, u = np.array([0.6, 0.8]), np.zeros(2)
    assert np.all(np.isfinite(ring.linearize(q, u)[0]))       # regular at c = 1
    for call in (lambda: ring.linearize(q, u, p={"c": 0.0}),
                 lambda: ring.linearize(np.tile(q, (2, 1)), u, p={"c": 0.0}),
                 lambda: ring.linearize_full(q, u, p={"c": 0.0}),
                 lambda: ring.state_derivative(q, u, p={"c": 0.0}),
                 lambda: ring.linearize(q, u, p={"c": 0.0}, dependent_q=["x"], dependent_u=["vx"])):
        with pytest.raises(EvaluationError, match=r"NaN or Inf at this point.*M_uu") as error:
            call()
        assert not isinstance(error.value, SingularMatrixError)


def test_nan_constraint_residual_does_not_pass_the_check(ring):
    """At the centre f_c = -L is finite but f_v = (x vx + y vy)/sqrt(x^2 + y^2)
    is NaN: a NaN residual must not pass the tolerance (nor be called a
    singular matrix later)."""
    q, u = np.zeros(2), np.zeros(2)
    for call in (lambda: ring.linearize(q, u, tol=10.0), lambda: ring.linearize(q, u, tol=None),
                 lambda: ring.linearize_full(q, u, tol=10.0), lambda: ring.state_derivative(q, u)):
        with pytest.raises(EvaluationError, match=r"NaN or Inf at this point.*f_v") as error:
            call()
        assert not isinstance(error.value, (SingularMatrixError, ConstraintViolationError))
    with pytest.raises(EvaluationError, match=r"NaN or Inf.*in f_v \(the velocity constraints\)$"):
        ring.constraint_residuals(q, u)                  # names only what it computes


def test_nan_jacobian_in_newton_is_not_called_singular(ring):
    """complete from the centre: f_c = -L is finite, the matrix of Newton's
    step d f_c/d y = y/sqrt(x^2 + y^2) is 0/0."""
    with pytest.raises(EvaluationError, match=r"NaN or Inf at this point") as error:
        ring.complete(np.zeros(2), np.zeros(2))
    assert not isinstance(error.value, SingularMatrixError)
    q, u = ring.complete(np.array([0.6, 0.5]), np.array([1.0, 0.0]))   # elsewhere it works
    assert np.allclose(q, [0.6, 0.8]) and np.allclose(u, [1.0, -0.75])


# -- operating points of the built-in models ---------------------------------------------------


@pytest.mark.parametrize("args, kwargs, message", [
    (("wheel", "upright"), {}, r"no built-in model 'wheel'.*disk"),
    (("disk", "sideways"), {}, r"'disk' has no operating point 'sideways'.*upright, steady_turn"),
    (("disk", "upright"), {"parameters": {"R": 1.0}}, r"no parameter 'R'; parameters: m, r, g"),
    (("disk", "upright"), {"parameters": [1.0]}, r"parameters must be a dict"),
    (("disk", "upright"), {"speed": 1.0}, r"'upright' has no argument 'speed'; its arguments: v"),
    (("disk", "upright"), {"parameters": {"r": 0}}, r"'upright' cannot be formed for r=0.*radius r"),
    (("disk", "steady_turn"), {"parameters": {"r": 0.0}}, r"radius r must not be zero"),
    (("disk", "upright"), {"v": float("nan")}, r"'upright': v must be finite, got nan"),
    (("disk", "upright"), {"v": float("inf")}, r"v must be finite"),
    (("disk", "upright"), {"v": 10**400}, r"v must be finite, got 1000.*\.\.\."),
    (("disk", "upright"), {"v": 0.5 + 1j}, r"v must be a real number"),
    (("disk", "upright"), {"v": "fast"}, r"v must be a real number"),
    (("disk", "upright"), {"t": float("nan")}, r"t must be finite"),
    (("disk", "upright"), {"parameters": {"g": float("nan")}}, r"parameter 'g' must be finite"),
    (("disk", "upright"), {"parameters": {"g": "heavy"}}, r"parameter 'g' must be a real number"),
    (("disk", "steady_turn"), {"lean": 1.2, "spin_rate": -0.1}, r"no steady turn at lean 1\.2"),
    (("disk", "steady_turn"), {"branch": 2}, r"'steady_turn' cannot be formed for branch=2"),
    (("cart_chain", "hanging"), {"n": 2.5}, r"n \(the number of links\) must be a whole number"),
])
def test_operating_point_errors_name_model_point_and_argument(args, kwargs, message):
    with pytest.raises(InputError, match=message):
        codegen.operating_point(*args, **kwargs)


def test_operating_point_accepts_symbols_and_flags():
    by_symbol = codegen.operating_point("disk", "upright", parameters={sm.Symbol("r"): 0.5}, v=0.2)
    by_name = codegen.operating_point("disk", "upright", parameters={"r": 0.5}, v=0.2)
    assert all(np.array_equal(a, b) for a, b in zip(by_symbol, by_name))
    op = codegen.operating_point("cart_chain", "hanging", n=2, closed=True)
    assert op.q.shape == (3,) and op.r.shape == (1,)


# -- the sweep command line ------------------------------------------------------------------


@pytest.mark.parametrize("arguments, message", [
    (["--param", "x"], r"error: .*'upright' has no argument 'x'; its arguments: v"),
    (["--point", "sideways"], r"error: .*no operating point 'sideways'"),
    (["--set", "v"], r"--set: expected name=value"),
    (["--set", "lean=abc"], r"--set: the value of 'lean' must be a number"),
    (["--num", "0"], r"--num: expected a whole number >= 1"),
    (["--num", "-3"], r"--num: expected a whole number >= 1"),
    (["--num", "ten"], r"--num: expected a whole number >= 1"),
    (["--from", "nan"], r"--from: expected a finite number"),
])
def test_sweep_command_line_errors_are_messages(tmp_path, capsys, arguments, message):
    """A clean message and a non-zero exit code, no traceback (and no build)."""
    from codegen.__main__ import main
    try:
        code = main(["sweep", "disk", *arguments, "--out", str(tmp_path / "sweep"),
                     "--output-dir", str(tmp_path / "generated")])
    except SystemExit as exit:                 # argparse: usage and exit code 2
        code = exit.code
    assert code not in (0, None)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert re.search(message, err), err
    assert not (tmp_path / "generated").exists()
