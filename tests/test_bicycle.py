"""The Carvallo-Whipple bicycle against the benchmark of Meijaard et al. (2007).

The reference (tests/bicycle_benchmark.py) is the paper's linearized model
computed from its canonical matrices M, C1, K0, K2, independent of codegen;
the generated module linearizes the nonlinear Kane model of codegen/models/bicycle.py.
"""

import math
import sys

import numpy as np
import pytest
from scipy.optimize import brentq

import bicycle_benchmark as bench
import codegen
import reference
from codegen.models import bicycle as bicycle_model

ROLL_STEER = ["roll", "steer", "roll_rate", "steer_rate"]


def roll_steer_block(module, A, B=None):
    index = [list(module.state_names).index(name) for name in ROLL_STEER]
    block = A[np.ix_(index, index)]
    return block if B is None else (block, B[index[2:], :])


def upright(v, **parameters):
    return codegen.operating_point("bicycle", "upright", parameters=parameters, v=v)


def eigenvalues(module, v, **parameters):
    op = upright(v, **parameters)
    A, _ = module.linearize(*op)
    return np.sort_complex(np.linalg.eigvals(roll_steer_block(module, A)))


def test_names_and_sizes(bicycle):
    assert bicycle.np == 26 and bicycle.nr == 2
    assert set(ROLL_STEER) <= set(bicycle.state_names)
    assert [bicycle.u_names[i] for i in bicycle.dependent_u] == \
        ["yaw_rate", "pitch_rate", "front_wheel_rate", "x_rate", "y_rate"]
    assert list(bicycle.p_names) == list(bench.benchmark_parameters())
    # codegen.operating_point lays out p in the order of DEFAULT_PARAMETERS
    from codegen.models.bicycle import DEFAULT_PARAMETERS
    assert list(bicycle.p_names) == list(DEFAULT_PARAMETERS)


@pytest.mark.parametrize("v", np.arange(0.0, 10.01, 0.5))
def test_roll_steer_eigenvalues_match_the_benchmark(bicycle, v):
    ours = eigenvalues(bicycle, v)
    expected = bench.eigenvalues(bench.benchmark_parameters(), v)
    np.testing.assert_allclose(ours, expected, rtol=1e-10, atol=1e-10 * np.abs(expected).max())


def test_upright_point_is_consistent_and_other_modes_are_zero(bicycle):
    op = upright(4.0)
    f_c, f_v = bicycle.constraint_residuals(op.q, op.u, p=op.p)
    assert np.abs(f_c).max() < 1e-14 and np.abs(f_v).max() < 1e-14
    A, _ = bicycle.linearize(*op)
    # the six other states (yaw, wheel angles, x, y, rear wheel rate) give zeros
    all_eigenvalues = np.linalg.eigvals(A)
    assert np.sum(np.abs(all_eigenvalues) < 1e-9) == 6


def test_input_matrix_is_the_inverse_benchmark_mass_matrix(bicycle):
    A, B = bicycle.linearize(*upright(5.0))
    _, B_rs = roll_steer_block(bicycle, A, B)
    np.testing.assert_allclose(B_rs, bench.input_matrix(bench.benchmark_parameters())[2:], rtol=1e-12)


def _weave_growth(module, v):
    lam = eigenvalues(module, v)
    return float(lam[np.abs(lam.imag) > 1e-9].real.max())


def _capsize_eigenvalue(module, v):
    lam = eigenvalues(module, v)
    real = lam[np.abs(lam.imag) <= 1e-9].real
    return float(real[np.argmin(np.abs(real))])


def test_weave_and_capsize_speeds(bicycle):
    weave = brentq(lambda v: _weave_growth(bicycle, v), 3.5, 5.0, xtol=1e-13)
    capsize = brentq(lambda v: _capsize_eigenvalue(bicycle, v), 5.5, 7.0, xtol=1e-13)
    assert weave == pytest.approx(4.29238253634111, abs=1e-9)
    assert capsize == pytest.approx(6.02426201538837, abs=1e-9)


@pytest.mark.parametrize("changed", [{"rR": 0.35}, {"lam": math.pi / 8}, {"c": 0.1},
                                     {"mB": 70.0, "xB": 0.35, "IBxz": 2.0}])
def test_changed_parameters_match_the_benchmark_for_that_set(bicycle, changed):
    parameters = dict(bench.benchmark_parameters(), **changed)
    for v in (0.0, 3.0, 6.0, 9.0):
        ours = eigenvalues(bicycle, v, **changed)
        expected = bench.eigenvalues(parameters, v)
        np.testing.assert_allclose(ours, expected, rtol=1e-10, atol=1e-10 * np.abs(expected).max())


@pytest.fixture(scope="module")
def kane_reference():
    """SymPy's own (reduced) equations of the same KanesMethod, lambdified."""
    kane, kwargs = reference.capture_kane(bicycle_model)
    return reference.KaneReference(kane, kwargs["parameters"], kwargs["inputs"])


def random_point(module, rng):
    """A consistent, non-upright, non-equilibrium point: lean, steer, rates,
    torques; pitch and the dependent speeds completed."""
    q = np.zeros(module.nq)
    u = np.zeros(module.nu)
    names_q, names_u = list(module.q_names), list(module.u_names)
    for name, value in (("yaw", rng.uniform(-1, 1)), ("roll", rng.uniform(-0.3, 0.3)),
                        ("steer", rng.uniform(-0.4, 0.4)), ("rear_wheel", rng.uniform(-3, 3)),
                        ("front_wheel", rng.uniform(-3, 3)), ("x", rng.uniform(-2, 2)),
                        ("y", rng.uniform(-2, 2)), ("pitch", math.pi / 10)):
        q[names_q.index(name)] = value
    for name, value in (("roll_rate", rng.uniform(-1, 1)), ("steer_rate", rng.uniform(-1, 1)),
                        ("rear_wheel_rate", rng.uniform(-20, -5))):
        u[names_u.index(name)] = value
    q, u = module.complete(q, u)
    return q, u, rng.uniform(-3, 3, 2)


@pytest.mark.parametrize("changed", [{}, {"rR": 0.35, "lam": 0.4, "c": 0.1}])
@pytest.mark.parametrize("v", [0.0, 5.0, 10.0])
def test_input_matrix_at_other_speeds_and_parameters(bicycle, v, changed):
    """B does not depend on v in the benchmark; with changed parameters it is
    the inverse of that parameter set's mass matrix."""
    A, B = bicycle.linearize(*upright(v, **changed))
    _, B_rs = roll_steer_block(bicycle, A, B)
    expected = bench.input_matrix(dict(bench.benchmark_parameters(), **changed))[2:]
    np.testing.assert_allclose(B_rs, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


GENERAL_POINTS = [
    ({}, {}),
    ({"rR": 0.35, "lam": 0.4}, dict(yaw=-1.0, roll=-0.3, steer=-0.6, roll_rate=-0.4, steer_rate=1.1,
                                    rear_wheel_rate=-20.0, T_roll=-2.0, T_steer=0.5)),
]


@pytest.mark.parametrize("changed, kwargs", GENERAL_POINTS)
def test_general_point_is_consistent_and_not_an_equilibrium(bicycle, kane_reference, changed, kwargs):
    op = codegen.operating_point("bicycle", "general", parameters=changed, **kwargs)
    f_c, f_v = bicycle.constraint_residuals(op.q, op.u, p=op.p)
    assert np.abs(f_c).max() < 1e-13 and np.abs(f_v).max() < 1e-12
    # the module's own completion (generated Newton and solve) finds the same point
    q, u = bicycle.complete(op.q, op.u, p=op.p)
    np.testing.assert_allclose(q, op.q, rtol=0, atol=1e-13)
    np.testing.assert_allclose(u, op.u, rtol=0, atol=1e-12)
    assert abs(op.q[list(bicycle.q_names).index("pitch")] - op.p[list(bicycle.p_names).index("lam")]) > 1e-3
    # state derivative agrees with SymPy's reduced equations (mass_matrix_full,
    # forcing_full) and the point accelerates
    qd, ud = bicycle.state_derivative(op.q, op.u, op.r, op.p)
    qd_ref, ud_ref = kane_reference.state_derivative(op.q, op.u, op.r, op.p)
    np.testing.assert_allclose(qd, qd_ref, rtol=1e-11, atol=1e-11 * np.abs(qd_ref).max())
    np.testing.assert_allclose(ud, ud_ref, rtol=1e-10, atol=1e-10 * np.abs(ud_ref).max())
    assert np.abs(ud).max() > 1e-1


@pytest.mark.parametrize("changed, kwargs", GENERAL_POINTS)
def test_reduced_A_B_at_general_points_against_constrained_finite_differences(
        bicycle, kane_reference, changed, kwargs):
    op = codegen.operating_point("bicycle", "general", parameters=changed, **kwargs)
    A, B = bicycle.linearize(*op)
    A_fd, B_fd = kane_reference.constrained_fd_AB(op.q, op.u, op.r, op.p)
    np.testing.assert_allclose(A, A_fd, rtol=1e-6, atol=1e-6 * np.abs(A_fd).max())
    np.testing.assert_allclose(B, B_fd, rtol=1e-6, atol=1e-6 * np.abs(B_fd).max())


@pytest.mark.parametrize("seed", [1, 2])
def test_reduced_A_B_against_constrained_finite_differences(bicycle, kane_reference, seed):
    q, u, r = random_point(bicycle, np.random.default_rng(seed))
    A, B = bicycle.linearize(q, u, r)
    A_fd, B_fd = kane_reference.constrained_fd_AB(q, u, r)
    scale = np.abs(A_fd).max()
    np.testing.assert_allclose(A, A_fd, rtol=1e-6, atol=1e-6 * scale)
    np.testing.assert_allclose(B, B_fd, rtol=1e-6, atol=1e-6 * np.abs(B_fd).max())
    # a non-equilibrium point: the speeds change
    _, ud = bicycle.state_derivative(q, u, r)
    assert np.abs(ud).max() > 1e-2


def test_another_partition_at_run_time(bicycle, kane_reference):
    """Steer dependent instead of pitch (and roll rate instead of pitch rate):
    singular at upright, where the front contact height does not change with
    steer; regular at a leaned, steered point, where A, B in that partition
    agree with constrained finite differences in the same partition."""
    with pytest.raises(codegen.errors.SingularMatrixError, match="steer"):
        bicycle.linearize(*upright(5.0)[:2], dependent_q=["steer"])
    q, u, r = random_point(bicycle, np.random.default_rng(5))
    dependent_q = [list(bicycle.q_names).index("steer")]
    dependent_u = [list(bicycle.u_names).index(name)
                   for name in ("yaw_rate", "roll_rate", "front_wheel_rate", "x_rate", "y_rate")]
    A, B = bicycle.linearize(q, u, r, dependent_q=dependent_q, dependent_u=dependent_u)
    # this partition is poorly conditioned here (entries of A reach 3e4), so the
    # differences need a small step: h = 1e-4 is still 5 % off, 1e-5 converges
    A_fd, B_fd = kane_reference.constrained_fd_AB(q, u, r, dependent_q=dependent_q, dependent_u=dependent_u,
                                                  h=1e-5)
    np.testing.assert_allclose(A, A_fd, rtol=1e-5, atol=1e-5 * np.abs(A_fd).max())
    np.testing.assert_allclose(B, B_fd, rtol=1e-5, atol=1e-5 * np.abs(B_fd).max())
