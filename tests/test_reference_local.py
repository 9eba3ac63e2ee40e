"""The NumPy/SymPy reference of issue 11 (codegen.reference): the local
state-space form, the descriptor form and equilibria, pinned to the papers
and to the partition-based linearization of the compiled modules.

* González et al., section 5.1: the four-bar (N = 1, k = 0, gravity along +x)
  at its singular flat configuration: J_c and B_v lose one rank, the local
  form has 4 states and the eigenvalues +/-3.4310i, +/-4.4294i (exactly
  sqrt(6 g/5), sqrt(2 g)) with the minimum-norm multipliers; the descriptor
  form's finite generalized eigenvalues are the same.
* At equilibria (pendulum hanging and inverted, disk at rest, five-bar
  hanging) the local form's eigenvalues are those of the compiled module's
  partition-based A (Spencer, Theorem 4.1.1).
* At moving points each chart has its own A (as two partitions do): the
  local form is the model's partition written in orthonormal bases, A_local =
  H A H^-1 with the compiled A (with the model's partition as a selection
  chart it *is* the compiled A); the null spaces' chart (y = N_q^T q,
  z = N_u^T u, the C's where a rank drops) is checked against finite
  differences in that chart and through the chart transition, A_null =
  H A H^-1 + H' H^-1. The rolling disk upright at speed v has the thesis's
  six zeros and +/-2 sqrt(1 - 3 v^2)/sqrt(5) in the partition's chart, and
  four zeros, that pair and +/- i v/sqrt(2) in the null spaces' chart.
* Spencer's five-bar at (pi, 0, 0, pi): rank 1, three degrees of freedom, a
  6 x 6 nilpotent A (all eigenvalues zero); the descriptor form agrees.
* Equilibria by Gauss-Newton: the four-bar's (N = 1, 2, k = 25) as the
  model module finds them, the singular flat one, the disk's steady turns.
"""

import importlib.util
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

import codegen
from codegen.models import disk as disk_models
from codegen.models import five_bar, fourbar, spencer_pendulum
from codegen.reference import KaneReference, descriptor_eigenvalues

G = 9.81


def _sorted(values):
    values = np.asarray(values, dtype=complex)
    return values[np.lexsort((np.round(values.real, 6), np.round(values.imag, 6)))]


def assert_eigenvalues_close(actual, expected, rtol, label="", zero_tol=1e-7):
    """Sorted eigenvalues agree to rtol (relative to the largest); repeated
    zero eigenvalues (Jordan blocks: computed as +/- sqrt(eps)-sized values)
    only to ``zero_tol``."""
    actual, expected = _sorted(actual), _sorted(expected)
    assert actual.shape == expected.shape, (label, actual, expected)
    scale = max(1.0, float(np.abs(expected).max()))
    zero = (np.abs(expected) < zero_tol) & (np.abs(actual) < zero_tol)
    if zero.any():
        assert np.abs(actual[zero] - expected[zero]).max() <= zero_tol, (label, actual, expected)
    if (~zero).any():
        assert np.abs(actual[~zero] - expected[~zero]).max() <= rtol * scale, (label, actual, expected)


def assert_close(actual, expected, rtol, label=""):
    scale = max(1.0, float(np.abs(expected).max())) if np.size(expected) else 1.0
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale, err_msg=label)


def assert_deflating_subspace(ref, local, q, u, r=None, p=None, t=0.0, tol=1e-9):
    """The local form's states span a deflating subspace of the descriptor
    pencil with A_local as its restriction: there are multiplier rows X (and
    X_r for the inputs) with A [T; X] = E [T; X] A_local and
    E [T; X] B_local = B + A [0; X_r]. Exact, also where eigenvalues are
    ill-conditioned (Jordan blocks)."""
    E, A, B = ref.descriptor(q, u, r, p, t)
    states = ref.nq + ref.nu
    T = local.embedding
    rhs = E[:, :states] @ T @ local.A - A[:, :states] @ T
    X = np.linalg.lstsq(A[:, states:], rhs, rcond=None)[0]
    scale = max(1.0, np.abs(A).max(), np.abs(E).max()) * max(1.0, np.abs(local.A).max())
    assert np.abs(A[:, states:] @ X - rhs).max() <= tol * scale
    if ref.nr:
        rhs = E[:, :states] @ T @ local.B - B
        X_r = np.linalg.lstsq(A[:, states:], rhs, rcond=None)[0]
        assert np.abs(A[:, states:] @ X_r - rhs).max() <= tol * scale
    return E, A, B


def chart_transition(ref, q, u, local, dependent_q, dependent_u, p=None, t=0.0):
    """H: (delta q_i, delta u_i) of a partition -> (y, z) of the orthonormal
    chart, at (q, u, t) (Peterson's C_0, C_1, C_2 there, N_q and N_u fixed)."""
    b = ref.operating_blocks(q, u, p=p, t=t).blocks
    n, o = ref.nq, ref.nu
    qi = [i for i in range(n) if i not in dependent_q]
    ui = [i for i in range(o) if i not in dependent_u]
    P_qi, P_qd = np.eye(n)[:, qi], np.eye(n)[:, dependent_q]
    P_ui, P_ud = np.eye(o)[:, ui], np.eye(o)[:, dependent_u]
    C_0 = (np.eye(n) - P_qd @ np.linalg.solve(b.J_c @ P_qd, b.J_c)) @ P_qi
    C_1 = -P_ud @ np.linalg.solve(b.B_v @ P_ud, b.J_vq)
    C_2 = (np.eye(o) - P_ud @ np.linalg.solve(b.B_v @ P_ud, b.B_v)) @ P_ui
    N_q, N_u = local.N_q, local.N_u
    return np.block([[N_q.T @ C_0, np.zeros((N_q.shape[1], len(ui)))],
                     [N_u.T @ C_1 @ C_0, N_u.T @ C_2]])


# -- fixtures: references on the models' own KanesMethods, two compiled modules --------


@pytest.fixture(scope="module")
def fourbar1():
    return KaneReference.from_model(fourbar.make_model(1))


@pytest.fixture(scope="module")
def fourbar2():
    return KaneReference.from_model(fourbar.make_model(2))


@pytest.fixture(scope="module")
def fivebar():
    return KaneReference.from_model(five_bar.make_model())


@pytest.fixture(scope="module")
def disk_ref(disk_model):
    return KaneReference.from_model(disk_model)


@pytest.fixture(scope="module")
def pendulum(build_dir):
    model = spencer_pendulum.make_model()
    return KaneReference.from_model(model), codegen.build(model, output_dir=build_dir)


def _parameters(ref, values):
    return np.array([values[name] for name in (str(s) for s in ref.parameters)])


# -- González's singular four-bar --------------------------------------------------------


def test_gonzalez_singular_fourbar_local_form(fourbar1):
    ref = fourbar1
    values = dict(fourbar.DEFAULT_PARAMETERS, k=0.0, gravity_angle=0.0)
    p = _parameters(ref, values)
    q, u = fourbar.flat(values)
    local = ref.local_state_space(q, u, p=p)
    assert local.A.shape == (4, 4) and local.B.shape == (4, 0)
    assert (local.rank_c, local.rank_v, local.dof) == (3, 3, 2)     # l = m = 4: one rank lost
    assert local.sigma_c[-1] < 1e-12 * local.sigma_c[0]
    assert local.kkt_residual < 1e-12 and np.abs(local.ud).max() < 1e-12   # an equilibrium
    # minimum-norm multipliers: cranks in tension g m/2 each, no axial force in the coupler
    np.testing.assert_allclose(local.lam, [-G / 2, -G / 2, 0.0, 0.0], atol=1e-12)
    values_A = np.linalg.eigvals(local.A)
    assert np.abs(values_A.real).max() < 1e-9
    omega = np.sort(np.abs(values_A.imag))
    np.testing.assert_allclose(omega, np.repeat(fourbar.SINGULAR_EIGENVALUES, 2), atol=1e-4)
    np.testing.assert_allclose(omega, np.repeat([math.sqrt(6 * G / 5), math.sqrt(2 * G)], 2),
                               rtol=1e-10)
    # descriptor: 22 x 22 (n + o + 2 m + l), a regular pencil with exactly 4 finite eigenvalues
    E, A, B = assert_deflating_subspace(ref, local, q, u, p=p)
    assert E.shape == A.shape == (22, 22) and len(ref.descriptor_names()) == 22
    finite = descriptor_eigenvalues(E, A)
    assert len(finite) == 4
    assert_eigenvalues_close(finite, values_A, 1e-9, "descriptor vs local")
    # the automatic (QR-pivoted) selection chart: three dependent coordinates and speeds,
    # the same eigenvalues (an equilibrium)
    dependent_q, dependent_u = ref.automatic_partition(q, u, p=p)
    assert len(dependent_q) == len(dependent_u) == 3
    selected = ref.local_state_space(q, u, p=p, partition="auto")
    assert_eigenvalues_close(np.linalg.eigvals(selected.A), values_A, 1e-9, "auto partition")


def test_rank_tolerance_near_the_singular_configuration(fourbar1):
    """phi = 1e-6: regular with the default tolerance (2 states), the
    singular system's 4 states when the tolerance exceeds sigma_min/sigma_max."""
    ref = fourbar1
    values = dict(fourbar.DEFAULT_PARAMETERS, k=0.0, gravity_angle=0.0)
    p = _parameters(ref, values)
    q, u = fourbar.general(values, phi=1e-6, omega=0.0)
    regular = ref.local_state_space(q, u, p=p)
    assert regular.A.shape == (2, 2) and regular.rank_c == 4
    ratio = regular.sigma_c[-1] / regular.sigma_c[0]
    assert 1e-8 < ratio < 1e-5
    coarse = ref.local_state_space(q, u, p=p, rank_tol=1e-4)
    assert coarse.A.shape == (4, 4) and coarse.rank_c == 3
    flat = ref.local_state_space(*fourbar.flat(values), p=p)
    assert_eigenvalues_close(np.linalg.eigvals(coarse.A), np.linalg.eigvals(flat.A), 1e-4)


# -- regular points: equilibria and moving points against the compiled modules ---------------


def test_local_form_at_equilibria_matches_partition(disk, disk_ref, pendulum):
    ref_p, compiled_p = pendulum
    cases = [(ref_p, compiled_p, spencer_pendulum.hanging(spencer_pendulum.DEFAULT_PARAMETERS)),
             (ref_p, compiled_p, spencer_pendulum.at_angle(spencer_pendulum.DEFAULT_PARAMETERS, math.pi)),
             (disk_ref, disk, disk_models.upright(disk_models.DEFAULT_PARAMETERS, v=0.0))]
    for ref, compiled, (q, u) in cases:
        local = ref.local_state_space(q, u)
        A, _ = compiled.linearize(q, u)
        assert local.A.shape == A.shape
        assert_eigenvalues_close(np.linalg.eigvals(local.A), np.linalg.eigvals(A), 1e-9, compiled.name)
        assert_deflating_subspace(ref, local, q, u)
    w = math.sqrt(G)
    local = ref_p.local_state_space(*spencer_pendulum.hanging(spencer_pendulum.DEFAULT_PARAMETERS))
    assert_eigenvalues_close(np.linalg.eigvals(local.A), [1j * w, -1j * w], 1e-12)


MOVING = [("disk", "upright", {"v": 0.5}), ("disk", "upright", {"v": 0.2}),
          ("disk", "steady_turn", {"lean": 0.3, "spin_rate": -3.0}),
          ("disk", "steady_turn", {"lean": 0.3, "spin_rate": -3.0, "branch": 1}),
          ("spencer_pendulum", "at_angle", {"angle": 0.6, "rate": 1.3}),
          ("spencer_pendulum", "at_angle", {"angle": -2.2, "rate": -0.8})]


@pytest.mark.parametrize("model_name, point, kwargs", MOVING)
def test_local_form_at_moving_points(disk, disk_ref, pendulum, model_name, point, kwargs):
    ref, compiled = (disk_ref, disk) if model_name == "disk" else pendulum
    op = codegen.operating_point(model_name, point, **kwargs)
    q, u = np.asarray(op.q), np.asarray(op.u)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", codegen.errors.NotSteadyWarning)   # the pendulum swings
        A, B = compiled.linearize(op.q, op.u, op.r, op.p)
    dependent_q, _, dependent_u, _ = ref.partition()
    # the model's partition as a selection chart: the compiled A itself
    selected = ref.local_state_space(q, u, partition=(dependent_q, dependent_u))
    assert_close(selected.A, A, 1e-9, "selection chart vs compiled A")
    # the default chart (DESIGN.md section 3c): the model's partition, well
    # conditioned here, in orthonormal bases: A_local = H A H^-1, no rate term
    local = ref.local_state_space(q, u)
    assert local.chart == "partition"
    assert (local.dependent_q, local.dependent_u) == (dependent_q, dependent_u)
    H = chart_transition(ref, q, u, local, dependent_q, dependent_u)
    assert_close(local.A, H @ A @ np.linalg.inv(H), 1e-9, "A_local = H A H^-1")
    assert_eigenvalues_close(np.linalg.eigvals(local.A), np.linalg.eigvals(A), 1e-9)
    # the null spaces' chart (y = N_q^T q, z = N_u^T u; the C's where a rank
    # drops): finite differences in that chart, and the chart transition with
    # its rate along the motion, A_null = H A H^-1 + H' H^-1
    null = ref.local_state_space(q, u, chart="null space")
    assert null.A.shape == A.shape
    A_fd, _ = ref.local_chart_fd(q, u, null.N_q, null.N_u)
    assert_close(null.A, A_fd, 1e-7, "null spaces' chart vs finite differences in it")
    H = chart_transition(ref, q, u, null, dependent_q, dependent_u)
    eps = 1e-5
    H_rate = (chart_transition(ref, q + eps * null.qd, u + eps * null.ud, null, dependent_q, dependent_u)
              - chart_transition(ref, q - eps * null.qd, u - eps * null.ud, null, dependent_q,
                                 dependent_u)) / (2 * eps)
    H_inv = np.linalg.inv(H)
    assert_close(null.A, H @ A @ H_inv + H_rate @ H_inv, 1e-7, "A_null = H A H^-1 + H' H^-1")
    assert_deflating_subspace(ref, null, q, u)
    if point == "upright":
        v = kwargs["v"]
        s = 2 * math.sqrt(1 - 3 * v * v) / math.sqrt(5)
        assert_eigenvalues_close(np.linalg.eigvals(A), [s, -s, 0, 0, 0, 0, 0, 0], 1e-9)
        assert_eigenvalues_close(np.linalg.eigvals(local.A), [s, -s, 0, 0, 0, 0, 0, 0], 1e-9)
        # u4..u6 are components in the spinning wheel: not steady in that chart
        assert_eigenvalues_close(np.linalg.eigvals(null.A),
                                 [s, -s, 1j * v / math.sqrt(2), -1j * v / math.sqrt(2), 0, 0, 0, 0],
                                 1e-9, "null spaces' chart of the rolling disk")


def test_automatic_partition_is_a_valid_compiled_partition(disk, disk_ref):
    """Column-pivoted QR at the leaning steady turn; the selection chart with
    that partition is the compiled A with the same dependent sets."""
    op = codegen.operating_point("disk", "steady_turn", lean=0.3, spin_rate=-3.0)
    dependent_q, dependent_u = disk_ref.automatic_partition(op.q, op.u)
    assert len(dependent_q) == 1 and len(dependent_u) == 3
    A, _ = disk.linearize(op.q, op.u, dependent_q=dependent_q, dependent_u=dependent_u)
    selected = disk_ref.local_state_space(op.q, op.u, partition="auto")
    assert (selected.dependent_q, selected.dependent_u) == (
        [disk.q_names.index(n) for n in dependent_q], [disk.u_names.index(n) for n in dependent_u])
    assert_close(selected.A, A, 1e-9)


def test_rheonomic_model_with_an_input():
    """Bead on a turning wire (explicit time in f_c, relative speeds, an
    axial force): A and B against finite differences in both charts; the
    descriptor's B."""
    path = Path(__file__).parent / "user_models" / "rotating_wire.py"
    spec = importlib.util.spec_from_file_location("rotating_wire_source_local", path)
    source = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(source)
    ref = KaneReference.from_model(source.make_model())
    t, r = 0.4, [0.5]
    q, u = ref.complete([0.7, 0.0], [0.3, 0.0], t=t)
    null = ref.local_state_space(q, u, r, t=t, chart="null space")
    assert null.B.shape == (2, 1)
    A_fd, B_fd = ref.local_chart_fd(q, u, null.N_q, null.N_u, r, t=t)
    assert_close(null.A, A_fd, 1e-7)
    assert_close(null.B, B_fd, 1e-7)
    dependent_q, _, dependent_u, _ = ref.partition()
    selected = ref.local_state_space(q, u, r, t=t, partition=(dependent_q, dependent_u))
    A_p, B_p = ref.constrained_fd_AB(q, u, r, t=t)
    assert_close(selected.A, A_p, 1e-7)
    assert_close(selected.B, B_p, 1e-7)
    # the default chart: the partition's A in orthonormal bases
    local = ref.local_state_space(q, u, r, t=t)
    H = chart_transition(ref, q, u, local, dependent_q, dependent_u, t=t)
    assert_close(local.A, H @ A_p @ np.linalg.inv(H), 1e-7)
    assert_close(local.B, H @ B_p, 1e-7)
    # the descriptor form is in the chart of all coordinates and speeds: the
    # null spaces' chart's eigenvalues
    E, A, B = assert_deflating_subspace(ref, null, q, u, r, t=t)
    assert_eigenvalues_close(descriptor_eigenvalues(E, A), np.linalg.eigvals(null.A), 1e-9)


# -- Spencer's five-bar ------------------------------------------------------------------------


def test_five_bar_singular_configuration(fivebar):
    """(pi, 0, 0, pi) at rest: J_c = B_v of rank 1, three degrees of freedom,
    a 6 x 6 A = [[0, I], [0, 0]]: every link lies on the x axis, where the
    gravity stiffness (sin theta), the multipliers' curvature and dM/dq vanish;
    all six eigenvalues are zero (three Jordan blocks of size 2). Not an
    equilibrium: the mechanism falls (ud* != 0, in null(B_v)); the part of
    d f_a/d q delta q outside the range of B_v (the x-closure's curvature
    times ud*) is dropped by the minimum-norm solve, in both forms alike."""
    ref = fivebar
    q, u = five_bar.singular(dict(five_bar.DEFAULT_PARAMETERS))
    local = ref.local_state_space(q, u)
    assert (local.rank_c, local.rank_v, local.dof) == (1, 1, 3)
    assert local.A.shape == (6, 6)
    assert local.kkt_residual < 1e-12
    assert np.abs(local.ud).max() > 1.0                       # it falls ...
    assert np.abs(local.N_u @ (local.N_u.T @ local.ud) - local.ud).max() < 1e-12   # ... in null(B_v)
    assert abs(local.lam[0]) < 1e-12 and local.lam[1] > 0      # x-closure carries nothing
    np.testing.assert_allclose(local.A[:3, 3:], np.eye(3), atol=1e-12)
    np.testing.assert_allclose(local.A[3:], 0.0, atol=1e-10)
    np.testing.assert_allclose(local.A[:3, :3], 0.0, atol=1e-12)
    assert np.linalg.matrix_rank(local.A, tol=1e-8) == 3
    assert np.abs(np.linalg.eigvals(local.A)).max() < 1e-6
    E, A, _ = assert_deflating_subspace(ref, local, q, u)
    assert E.shape == (14, 14)
    finite = descriptor_eigenvalues(E, A)
    assert len(finite) == 6 and np.abs(finite).max() < 1e-6
    # a regular equilibrium of the same model: the forms agree with each other
    # and with the partition chart of the model
    q, u = five_bar.hanging(dict(five_bar.DEFAULT_PARAMETERS))
    local = ref.local_state_space(q, u)
    assert local.A.shape == (4, 4)
    selected = ref.local_state_space(q, u, partition=(ref.partition()[0], ref.partition()[2]))
    A_fd, _ = ref.constrained_fd_AB(q, u)
    assert_close(selected.A, A_fd, 1e-6)
    assert_eigenvalues_close(np.linalg.eigvals(local.A), np.linalg.eigvals(selected.A), 1e-9)
    E, A, _ = assert_deflating_subspace(ref, local, q, u)
    assert_eigenvalues_close(descriptor_eigenvalues(E, A), np.linalg.eigvals(local.A), 1e-9)


# -- equilibria ------------------------------------------------------------------------------


@pytest.mark.parametrize("loops", [1, 2])
def test_fourbar_equilibria_from_nearby_guesses(request, loops):
    ref = request.getfixturevalue(f"fourbar{loops}")
    values = dict(fourbar.DEFAULT_PARAMETERS)          # k = 25, gravity along -y
    rng = np.random.default_rng(loops)
    for guess, stable in ((2.0, True), (-1.5, True), (1.2, False)):
        expected, _ = fourbar.equilibrium(values, loops=loops, guess=guess, stable=stable)
        start = np.array(fourbar.configuration(values, expected[0] + 0.15, loops))
        start += 0.02 * rng.standard_normal(start.size)          # off the constraints too
        q, u = ref.equilibrium(start)
        np.testing.assert_allclose(q, expected, atol=1e-9)
        assert np.abs(u).max() == 0.0
        _, ud = ref.state_derivative(q, u)
        assert np.abs(ud).max() < 1e-10
        f_c, _ = ref.residuals(q, u)
        assert np.abs(f_c).max() < 1e-12


def test_fourbar_singular_equilibrium(fourbar1):
    """Newton converges to the flat configuration too, but only to about
    sqrt(tol): the residual is quadratic in the distance there."""
    values = dict(fourbar.DEFAULT_PARAMETERS, k=0.0, gravity_angle=0.0)
    p = _parameters(fourbar1, values)
    start = np.array(fourbar.configuration(values, 0.1)) + 0.01 * np.array([1, -1, 2, 1, -2])
    q, _ = fourbar1.equilibrium(start, p=p)
    np.testing.assert_allclose(q, fourbar.flat(values)[0], atol=1e-5)


def test_disk_steady_motions(disk, disk_ref):
    values = dict(disk_models.DEFAULT_PARAMETERS)
    q_turn, u_turn = disk_models.steady_turn(values, lean=0.3, spin_rate=-3.0)
    # speeds held: the lean, height and spin angle follow
    start = np.array(q_turn)
    start[1], start[2], start[5] = 0.25, 0.05, -0.9
    q, u = disk_ref.equilibrium(start, u_turn)
    np.testing.assert_allclose(q, q_turn, atol=1e-12)
    np.testing.assert_array_equal(u, u_turn)
    # lean held, speeds free from a wrong yaw rate: a steady turn of the chapter's condition
    yaw = disk_models.steady_turn_yaw_rates(values, 0.3, -3.0)[0]
    guess = disk_models._speeds(q_turn, 1.1 * yaw, 0.0, -3.0, values["r"])
    q, u = disk_ref.equilibrium(q_turn, guess, fixed=["q2"],
                                free_speeds=["u2", "u3", "u4", "u5", "u6"])
    assert q[1] == 0.3
    yaw_rate = u[2] / math.cos(q[1])
    spin_rate = u[1] - math.sin(q[1]) * yaw_rate
    assert min(abs(yaw_rate - w) for w in disk_models.steady_turn_yaw_rates(values, 0.3, spin_rate)) < 1e-10
    _, ud = disk.state_derivative(q, u)
    assert np.abs(ud[:3]).max() < 1e-10            # the compiled module's independent speeds
    # static: upright at rest, the ignorable coordinates untouched
    start = [0.1, 0.05, 0.2, 0.3, 0.4, -0.98]
    q, u = disk_ref.equilibrium(start, fixed=["q1"])
    np.testing.assert_allclose(q, [0.1, 0.0, 0.2, 0.3, 0.4, -1.0], atol=1e-12)
    # nothing to find with the lean held away from upright at rest
    with pytest.raises(RuntimeError, match="no convergence"):
        disk_ref.equilibrium(start, fixed=["q2"], max_iter=5)
