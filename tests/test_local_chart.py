"""The fast path of ``linearize_local`` at regular points (straight-line code
from the default partition, codegen.procedure._local_chart) and what came
with it: the singular values computed when first asked for, and the compact
batch layout with its fallback.

Checked against computations that do not use the generated C's chart:

* the bases are the Gram-Schmidt orthonormalization (NumPy QR, signs fixed)
  of the partition's independent directions C_0 = [I; -K_c] and C_2, from the
  kernel's exact J_c and B_v;
* the SVD-based general path at the same point (forced by a rank tolerance
  the fast path's certificate cannot meet while the SVD still finds full
  rank): the same A through the change of basis R = N_general^T N_fast;
* the singular values against NumPy's SVD of the same J_c and B_v.
"""

import numpy as np
import pytest

import codegen
from codegen.runtime import kernel

from conftest import MOVING_POINTS, moving_point
from local_checks import assert_close, assert_eigenvalues_close, assert_same_local_form
from codegen.models import fourbar

SINGULAR_VALUES = dict(fourbar.DEFAULT_PARAMETERS, k=0.0, gravity_angle=0.0)


def jacobians(compiled, q, u, p=None):
    """J_c and B_v at a point, exact (the kernel's evaluation)."""
    p = compiled.default_parameters if p is None else np.asarray(p, float)
    point = dict(t=0.0, q=np.asarray(q, float), u=np.asarray(u, float), r=np.zeros(compiled.nr),
                 p=p)
    return kernel.constraint_jacobians(compiled._kernel, point)


def gram_schmidt_basis(J, dependent):
    """The orthonormal basis of null(J) from the partition: the columns of
    C = [I; -K] (rows of the independent, then the dependent variables in
    their places), K = J_d^-1 J_i, orthonormalized in order (positive R
    diagonal)."""
    n = J.shape[1]
    dependent = list(dependent)
    independent = [i for i in range(n) if i not in dependent]
    C = np.zeros((n, len(independent)))
    C[independent] = np.eye(len(independent))
    if dependent:
        C[dependent] = -np.linalg.solve(J[:, dependent], J[:, independent])
    Q, R = np.linalg.qr(C)
    return Q * np.sign(np.diag(R))


@pytest.mark.parametrize("case", MOVING_POINTS)
def test_chart_is_the_partitions_gram_schmidt(case, pendulum, fourbar1, disk_built, fivebar):
    built, p, q, u = moving_point(case, pendulum, fourbar1, disk_built, fivebar)
    c = built.compiled
    result = c.linearize_local(q, u, p=p)
    J_c, B_v = jacobians(c, q, u, p)
    assert (result.rank_c, result.rank_v) == (c.nc, c.nv)
    assert_close(result.N_q, gram_schmidt_basis(J_c, c.dependent_q), 1e-11, "N_q")
    assert_close(result.N_u, gram_schmidt_basis(B_v, c.dependent_u), 1e-11, "N_u")


def forced_general(compiled, q, u, p=None, r=None):
    """linearize_local at a regular point through the general (SVD) path: a
    rank tolerance just below the smallest sigma_min / sigma_max, which the
    fast path's certificate (a margin of 2 on bounds) cannot meet."""
    J_c, B_v = jacobians(compiled, q, u, p)
    ratios = [s[-1] / s[0] for s in (np.linalg.svd(J_c, compute_uv=False),
                                     np.linalg.svd(B_v, compute_uv=False)) if s.size]
    return compiled.linearize_local(q, u, r, p=p, rank_tol=0.9 * min(ratios))


@pytest.mark.parametrize("case", MOVING_POINTS)
def test_fast_and_general_paths_agree(case, pendulum, fourbar1, disk_built, fivebar):
    built, p, q, u = moving_point(case, pendulum, fourbar1, disk_built, fivebar)
    c = built.compiled
    fast = c.linearize_local(q, u, p=p)
    general = forced_general(c, q, u, p)
    assert (general.rank_c, general.rank_v, general.nx) == (fast.rank_c, fast.rank_v, fast.nx)
    # a different basis of the same spaces: general comes from the SVD
    assert_same_local_form(fast, general)
    assert_eigenvalues_close(np.linalg.eigvals(fast.A), np.linalg.eigvals(general.A), 1e-9)
    np.testing.assert_array_equal(fast.sigma_c, general.sigma_c)
    np.testing.assert_array_equal(fast.sigma_v, general.sigma_v)


@pytest.mark.parametrize("point, kwargs", [("upright", dict(v=4.0)),
                                           ("general", dict(rear_wheel_rate=-8.0))])
def test_bicycle_fast_and_general_paths(bicycle, point, kwargs):
    """The bicycle (the large model): the partition's Gram-Schmidt basis, and
    the same A as the SVD path through the change of basis."""
    op = codegen.operating_point("bicycle", point, **kwargs)
    fast = bicycle.linearize_local(op.q, op.u, op.r, op.p)
    J_c, B_v = jacobians(bicycle, op.q, op.u, op.p)
    assert_close(fast.N_q, gram_schmidt_basis(J_c, bicycle.dependent_q), 1e-11, "N_q")
    assert_close(fast.N_u, gram_schmidt_basis(B_v, bicycle.dependent_u), 1e-11, "N_u")
    general = forced_general(bicycle, op.q, op.u, op.p, op.r)
    assert_same_local_form(fast, general)


def test_singular_values_when_asked_for(fourbar1, disk_built):
    """A batch's singular values are computed on first access, from a copy of
    the points: changing the caller's arrays afterwards changes nothing."""
    c = fourbar1.compiled
    values = dict(fourbar.DEFAULT_PARAMETERS)
    angles = [0.4, 1.2, 2.5, 0.0]   # the last: the flat singular configuration
    q = np.array([fourbar.configuration(values, a) for a in angles])
    u = np.zeros((len(angles), c.nu))
    expected = [jacobians(c, qi, ui) for qi, ui in zip(q, u)]
    result = c.linearize_local(q, u)
    q[:] = 0.123    # the caller reuses its arrays
    for i, (J_c, B_v) in enumerate(expected):
        assert_close(result.sigma_c[i], np.linalg.svd(J_c, compute_uv=False), 1e-12, "sigma_c")
        assert_close(result.sigma_v[i], np.linalg.svd(B_v, compute_uv=False), 1e-12, "sigma_v")
        point = result.point(i)
        np.testing.assert_array_equal(point.sigma_c, result.sigma_c[i])
    # the disk (no batch): the single-point path computes them at once
    q, u = [np.asarray(x) for x in moving_point("disk_turn", None, None, disk_built, None)[2:]]
    single = disk_built.compiled.linearize_local(q, u)
    batch = disk_built.compiled.linearize_local(np.tile(q, (3, 1)), np.tile(u, (3, 1)))
    for i in range(3):
        np.testing.assert_array_equal(batch.sigma_c[i], single.sigma_c)
        np.testing.assert_array_equal(batch.sigma_v[i], single.sigma_v)


def test_batch_sizes_change_between_calls(fourbar1):
    """Batches are first computed compactly at the size of the last uniform
    batch; a batch of another size (here: all at the singular configuration,
    then regular again) falls back and gives the same numbers as single
    points."""
    c = fourbar1.compiled
    p = c.parameters(k=0.0, gravity_angle=0.0)
    flat_q, flat_u = fourbar.flat(SINGULAR_VALUES)
    regular = [fourbar.general(fourbar.DEFAULT_PARAMETERS, phi=a, omega=0.3) for a in (0.5, 1.1)]
    batches = [np.array([flat_q] * 3), np.array([flat_q] * 3), np.array([x for x, _ in regular])]
    speeds = [np.array([flat_u] * 3), np.array([flat_u] * 3), np.array([y for _, y in regular])]
    for q, u in zip(batches, speeds):
        result = c.linearize_local(q, u, p=p)
        assert result.uniform
        for i in range(len(q)):
            single = c.linearize_local(q[i], u[i], p=p)
            assert result.nx == single.nx
            np.testing.assert_array_equal(result.A[i], single.A)
            np.testing.assert_array_equal(result.embedding[i], single.embedding)
    assert c.linearize_local(batches[0], speeds[0], p=p).nx == 4


@pytest.mark.parametrize("delta", [1e-1, 2e-2, 5e-3, 1e-4, 1e-7])
def test_near_the_partitions_singular_point(delta, pendulum):
    """Spencer's pendulum approaching q2 = 0, where its default partition (q2
    dependent) fails while J_c keeps full rank: the fast path's basis would
    lose orthogonality as the partition skews (I + K^T K grows like 1/delta^2),
    so from a trace of 1e4 on the SVD path runs; the results agree with the
    reference throughout."""
    from codegen.models import spencer_pendulum
    from test_local_form import check_against_reference
    q, u = spencer_pendulum.at_angle(spencer_pendulum.DEFAULT_PARAMETERS, np.pi / 2 - delta, 0.8)
    result = pendulum.compiled.linearize_local(q, u)
    N = np.asarray(result.embedding)
    np.testing.assert_allclose(result.N_q.T @ result.N_q, np.eye(result.N_q.shape[1]), atol=1e-14)
    np.testing.assert_allclose(result.N_u.T @ result.N_u, np.eye(result.N_u.shape[1]), atol=1e-14)
    assert N.shape == (4, 2)
    check_against_reference(pendulum, result, q, u, rtol=1e-9)
