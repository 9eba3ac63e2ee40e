"""``linearize_descriptor`` of the compiled modules (issue 11, item 5):

* E, A, B equal codegen.reference.KaneReference.descriptor (NumPy on SymPy's
  equations; basis-free: built from the Jacobian blocks, the minimum-norm
  multipliers and the projectors onto the left null spaces), variables named
  as the reference names them;
* the finite generalized eigenvalues of the pencil (A, E) (SciPy's QZ) are
  those of the chart of all coordinates and speeds (the reference's null
  spaces' chart): ``linearize_local``'s at González's singular four-bar,
  where they are +/- i sqrt(6 g/5), +/- i sqrt(2 g) (the paper's +/-3.4310i,
  +/-4.4294i), and at Spencer's singular five-bar (six zeros); at equilibria
  and motions steady in every coordinate and speed, those of ``linearize``;
  elsewhere a NotSteadyWarning;
* an input matrix B (rheonomic user model with an input), batches.
"""

import math
import warnings
from pathlib import Path

import numpy as np
import pytest

import codegen
from conftest import MOVING_POINTS, Built, moving_point
from local_checks import assert_close, assert_eigenvalues_close, assert_gonzalez_singular_eigenvalues
from codegen.models import disk as disk_models
from codegen.models import five_bar, fourbar, spencer_pendulum
from codegen.reference import descriptor_eigenvalues

SINGULAR_VALUES = dict(fourbar.DEFAULT_PARAMETERS, k=0.0, gravity_angle=0.0)


@pytest.fixture(scope="module")
def wire(build_dir):
    path = Path(__file__).parent / "user_models" / "rotating_wire.py"
    return Built.build(codegen.load_model_file(f"{path}:make_model"), build_dir)








def check_descriptor(built, q, u, r=None, p=None, t=0.0, rank_tol=None, rtol=1e-9):
    """The compiled (E, A, B) against the reference's; returns them."""
    c = built.compiled
    result = c.linearize_descriptor(q, u, r, p, t, rank_tol=rank_tol)
    E, A, B = result
    E_ref, A_ref, B_ref = built.ref.descriptor(q, u, r, p, t, rank_tol=rank_tol)
    size = c.nq + c.nu + 2 * c.nv + c.nc
    assert E.shape == A.shape == (size, size) and B.shape == (size, c.nr)
    assert tuple(result.variables) == tuple(built.ref.descriptor_names())
    local = built.ref.local_state_space(q, u, r, p, t, rank_tol=rank_tol)
    assert (result.rank_c, result.rank_v) == (local.rank_c, local.rank_v)
    assert_close(E, E_ref, rtol, f"{c.name}: E vs reference")
    assert_close(A, A_ref, rtol, f"{c.name}: A vs reference")
    assert_close(B, B_ref, rtol, f"{c.name}: B vs reference")
    return E, A, B


def test_gonzalez_singular_fourbar(fourbar1):
    c = fourbar1.compiled
    p = c.parameters(k=0.0, gravity_angle=0.0)
    q, u = fourbar.flat(SINGULAR_VALUES)
    E, A, B = check_descriptor(fourbar1, q, u, p=p)
    assert E.shape == (22, 22) and B.shape == (22, 0)
    finite = descriptor_eigenvalues(E, A)
    assert_gonzalez_singular_eigenvalues(finite)
    local = c.linearize_local(q, u, p=p)
    assert_eigenvalues_close(finite, np.linalg.eigvals(local.A), 1e-9, "descriptor vs local")
    result = c.linearize_descriptor(q, u, p=p)
    assert (result.rank_c, result.rank_v) == (3, 3)
    assert result.variables[:5] == c.q_names and result.variables[5:10] == c.u_names
    assert result.variables[10:] == ("lambda0", "lambda1", "lambda2", "lambda3", "mu0", "mu1", "mu2",
                                     "mu3", "nu0", "nu1", "nu2", "nu3")


def test_near_singular_and_rank_tolerance(fourbar1):
    """phi = 1e-6: two finite eigenvalues with the default tolerance, four
    (close to the singular ones) with rank_tol = 1e-4, as linearize_local."""
    c = fourbar1.compiled
    p = c.parameters(k=0.0, gravity_angle=0.0)
    q, u = fourbar.general(SINGULAR_VALUES, phi=1e-6, omega=0.0)
    for rank_tol, count in ((None, 2), (1e-4, 4)):
        E, A, _ = check_descriptor(fourbar1, q, u, p=p, rank_tol=rank_tol, rtol=1e-7)
        local = c.linearize_local(q, u, p=p, rank_tol=rank_tol)
        assert local.nx == count
        finite = descriptor_eigenvalues(E, A, count=count)
        assert_eigenvalues_close(finite, np.linalg.eigvals(local.A), 1e-6, f"rank_tol={rank_tol}")


@pytest.mark.parametrize("case", ["fourbar_equilibrium", "fourbar_damped", "pendulum_hanging",
                                  "fivebar_hanging", "disk_rest"])
def test_equilibria_match_linearize(case, fourbar1, pendulum, fivebar, disk_built):
    if case.startswith("fourbar"):
        values = dict(fourbar.DEFAULT_PARAMETERS, c=1.0 if case.endswith("damped") else 0.0)
        built, (q, u) = fourbar1, fourbar.equilibrium(values)
        p = fourbar1.compiled.parameters(c=values["c"])
    elif case == "pendulum_hanging":
        built, (q, u), p = pendulum, spencer_pendulum.hanging(spencer_pendulum.DEFAULT_PARAMETERS), None
    elif case == "fivebar_hanging":
        built, (q, u), p = fivebar, five_bar.hanging(dict(five_bar.DEFAULT_PARAMETERS)), None
    else:
        built, p = disk_built, None
        q, u = disk_models.upright(disk_models.DEFAULT_PARAMETERS, v=0.0)
    E, A, _ = check_descriptor(built, q, u, p=p)
    A_lin, _ = built.compiled.linearize(q, u, p=p)
    finite = descriptor_eigenvalues(E, A, count=A_lin.shape[0])
    assert_eigenvalues_close(finite, np.linalg.eigvals(A_lin), 1e-8, case)
    if case != "disk_rest":        # no zero eigenvalues: the count is decided by |beta|
        assert len(descriptor_eigenvalues(E, A)) == A_lin.shape[0]


@pytest.mark.parametrize("case", MOVING_POINTS)
def test_moving_points_are_in_the_chart_of_all_coordinates(case, fourbar1, pendulum, fivebar,
                                                           disk_built):
    """At moving points the descriptor form is in the chart of all
    coordinates and speeds: its finite eigenvalues are those of the
    reference's null spaces' chart, and a NotSteadyWarning names what changes
    along the motion in that chart (the disk's u4..u6 are components in the
    spinning wheel: upright they give the spurious +/- i v/sqrt(2)).
    tests/test_charts.py has motions steady in every coordinate and speed."""
    built, p, q, u = moving_point(case, pendulum, fourbar1, disk_built, fivebar)
    E, A, _ = check_descriptor(built, q, u, p=p)
    null = built.ref.local_state_space(q, u, p=p, chart="null space")
    finite = descriptor_eigenvalues(E, A, count=null.A.shape[0])
    assert_eigenvalues_close(finite, np.linalg.eigvals(null.A), 1e-7, case)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        built.compiled.linearize_descriptor(q, u, p=p)
    names = [str(w.message) for w in caught if w.category is codegen.errors.NotSteadyWarning]
    assert len(names) == 1, (case, names)
    if case.startswith("disk"):
        assert "q3, u6 change along the motion" in names[0], names[0]
    if case == "disk_upright":
        v = 0.5
        s = 2 * math.sqrt(1 - 3 * v * v) / math.sqrt(5)
        w = v / math.sqrt(2)
        assert_eigenvalues_close(finite, [s, -s, 1j * w, -1j * w, 0, 0, 0, 0], 1e-7)


def test_five_bar_singular_configuration(fivebar):
    """(pi, 0, 0, pi): rank 1, three degrees of freedom, six zero finite
    eigenvalues (A = [[0, I], [0, 0]] in the local form)."""
    q, u = five_bar.singular(dict(five_bar.DEFAULT_PARAMETERS))
    E, A, _ = check_descriptor(fivebar, q, u)
    assert E.shape == (14, 14)
    result = fivebar.compiled.linearize_descriptor(q, u)
    assert (result.rank_c, result.rank_v) == (1, 1)
    finite = descriptor_eigenvalues(E, A, count=6)
    assert np.abs(finite).max() < 1e-6
    # the seventh smallest is infinite (or at least huge): exactly six finite ones
    import scipy.linalg
    alpha, beta = scipy.linalg.eig(A, E, right=False, homogeneous_eigvals=True)
    assert np.sum(np.abs(beta) > 1e-8 * np.abs(alpha)) == 6


def test_input_matrix(wire):
    """Explicit time and an input: B against the reference and the finite
    eigenvalues against the reference's null spaces' chart (the chart of all
    coordinates and speeds)."""
    t, r = 0.4, [0.5]
    q, u = wire.ref.complete([0.7, 0.0], [0.3, 0.0], t=t)
    E, A, B = check_descriptor(wire, q, u, r, t=t)
    assert B.shape[1] == 1 and np.abs(B).max() > 0.1
    null = wire.ref.local_state_space(q, u, r, t=t, chart="null space")
    assert_eigenvalues_close(descriptor_eigenvalues(E, A, count=null.A.shape[0]),
                             np.linalg.eigvals(null.A), 1e-9)


def test_batch(fourbar1):
    """A batch holding the singular and a regular point: stacked (E, A, B),
    each point equal to its own call; ranks per point."""
    c = fourbar1.compiled
    p = c.parameters(k=0.0, gravity_angle=0.0)
    flat_q, flat_u = fourbar.flat(SINGULAR_VALUES)
    reg_q, reg_u = fourbar.general(SINGULAR_VALUES, phi=0.4, omega=0.3)
    q, u = np.array([flat_q, reg_q, flat_q]), np.array([flat_u, reg_u, flat_u])
    result = c.linearize_descriptor(q, u, p=p)
    E, A, B = result
    assert E.shape == A.shape == (3, 22, 22) and B.shape == (3, 22, 0)
    np.testing.assert_array_equal(result.rank_c, [3, 4, 3])
    np.testing.assert_array_equal(result.rank_v, [3, 4, 3])
    for i in range(3):
        E_i, A_i, _ = c.linearize_descriptor(q[i], u[i], p=p)
        np.testing.assert_allclose(E[i], E_i, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(A[i], A_i, rtol=1e-13, atol=1e-13)
    assert len(descriptor_eigenvalues(E[1], A[1])) == 2
    assert len(descriptor_eigenvalues(E[2], A[2])) == 4


def test_user_fourbar_singular_case(build_dir):
    """tests/user_models/gonzalez_fourbar.py through codegen.Model/build: the
    paper's digits as finite generalized eigenvalues of (E, A)."""
    path = Path(__file__).parent / "user_models" / "gonzalez_fourbar.py"
    built = Built.build(codegen.load_model_file(f"{path}:make_model"), build_dir)
    c = built.compiled
    p = c.parameters(k=0.0, gravity_angle=0.0)
    q, u = [0.0, 1.0, 0.0, 2.0, 0.0], [0.0] * 5
    E, A, _ = check_descriptor(built, q, u, p=p)
    finite = descriptor_eigenvalues(E, A)
    assert_gonzalez_singular_eigenvalues(finite)
