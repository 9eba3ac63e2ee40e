"""The table of entry points drives the C, the kernel and the Python face:
``constraint_maps`` (added as one row) against finite differences, the
generic ``call``, and a row added here becoming a working method."""

import dataclasses

import numpy as np
import pytest

import codegen
from codegen import entry_points
from codegen.errors import InputError


def _residuals(model, x):
    f_c, f_v = model.constraint_residuals(x[:model.nq], x[model.nq:])
    return np.concatenate([f_c, f_v])


def _jacobian(function, x, h=1e-6):
    return np.array([(function(x + h * e) - function(x - h * e)) / (2 * h)
                     for e in np.eye(x.size)]).T


def _point(model, seed):
    rng = np.random.default_rng(seed)
    return model.complete(rng.normal(size=model.nq), rng.normal(size=model.nu))


def test_constraint_jacobians_match_differences_of_the_residuals(disk):
    for seed in range(3):
        q, u = _point(disk, seed)
        maps = disk.constraint_maps(q, u)
        x = np.concatenate([q, u])
        J = _jacobian(lambda y: _residuals(disk, y), x)
        nq, nc = disk.nq, disk.nc
        np.testing.assert_allclose(maps.J_c, J[:nc, :nq], atol=1e-8)
        np.testing.assert_allclose(maps.J_vq, J[nc:, :nq], atol=1e-8)
        np.testing.assert_allclose(maps.B_v, J[nc:, nq:], atol=1e-8)


def _manifold_differences(model, q, u, maps, dq, du, h=1e-5):
    """The embedding by differences along the constraint manifold: move one
    independent state, complete the point, difference."""
    nqi = len(maps.independent_q)
    columns = []
    for k in range(nqi + len(maps.independent_u)):
        ends = []
        for step in (h, -h):
            qq, uu = q.copy(), u.copy()
            if k < nqi:
                qq[maps.independent_q[k]] += step
            else:
                uu[maps.independent_u[k - nqi]] += step
            qq, uu = model.complete(qq, uu, dependent_q=dq, dependent_u=du, tol=1e-15)
            ends.append(np.concatenate([qq, uu]))
        columns.append((ends[0] - ends[1]) / (2 * h))
    return np.array(columns).T


@pytest.mark.parametrize("reverse", [False, True])
def test_the_embedding_is_the_manifolds_tangent(fourbar1, reverse):
    """C_0, C_1, C_2 of any partition (given in any order) against
    differences of completed points; J_c C_0 = 0 and the velocity
    constraints' rows of the embedding vanish."""
    model = fourbar1.compiled
    q, u = _point(model, 4)
    dq = tuple(reversed(model.dependent_q)) if reverse else None
    du = tuple(reversed(model.dependent_u)) if reverse else None
    maps = model.constraint_maps(q, u, dependent_q=dq, dependent_u=du)
    if reverse:
        assert maps.dependent_q == dq and maps.dependent_u == du
    T = maps.embedding
    np.testing.assert_allclose(T, _manifold_differences(model, q, u, maps, dq, du), atol=1e-8)
    np.testing.assert_allclose(maps.J_c @ maps.C_0, 0, atol=1e-12)
    tangent = np.block([[maps.J_c, np.zeros((model.nc, model.nu))], [maps.J_vq, maps.B_v]]) @ T
    np.testing.assert_allclose(tangent, 0, atol=1e-12)


def test_batches_and_the_generic_call(fourbar1):
    model = fourbar1.compiled
    points = [_point(model, seed) for seed in range(4)]
    q = np.array([p[0] for p in points]).reshape(2, 2, model.nq)
    u = np.array([p[1] for p in points]).reshape(2, 2, model.nu)
    maps = model.constraint_maps(q, u)
    assert maps.K_c.shape == (2, 2, model.nc, model.nq - model.nc)
    assert maps.embedding.shape == (2, 2, model.nq + model.nu, model.nx)
    one = model.constraint_maps(q[1, 0], u[1, 0])
    for name in one.names:
        np.testing.assert_array_equal(getattr(maps, name)[1, 0], getattr(one, name))
    generic = model.call("constraint_maps", q[1, 0], u[1, 0])
    for a, b in zip(generic, one):
        np.testing.assert_array_equal(a, b)
    flags, = model.nonfinite_blocks(q[0, 0], u[0, 0])      # a "map" row is a method too
    assert flags.shape == (len(model._kernel.BLOCK_NAMES),) and not flags.any()
    with pytest.raises(InputError, match="no entry point 'linearize' that maps"):
        model.call("linearize", q[0, 0], u[0, 0])
    with pytest.raises(InputError, match="unknown option bogus"):
        model.call("constraint_maps", q[0, 0], u[0, 0], bogus=1)
    with pytest.raises(InputError, match="q holds a non-finite value"):
        model.constraint_maps(np.full(model.nq, np.nan), u[0, 0])


def test_a_new_row_of_the_table_is_a_working_method(disk_model, tmp_path, monkeypatch):
    """Adding an entry point is a row: the header declares it, the kernel
    loops over batches with it, and the model has it as a method."""
    row = entry_points.EntryPoint(
        "configuration_jacobian",
        """J_c = d f_c/d q at (t, q, u, p).""",
        (entry_points.T, entry_points.Q, entry_points.U, entry_points.P,
         entry_points.Parameter("J_c", "output", "double *", (("nc",), ("nq",)), doc="d f_c/d q",
                                source="J_c")),
        stages=("residuals", "constraint_jacobians"), body="stages")
    monkeypatch.setattr(entry_points, "ENTRY_POINTS", entry_points.ENTRY_POINTS + (row,))
    model = codegen.build(disk_model, output_dir=tmp_path)
    header = next(tmp_path.rglob("disk.h")).read_text()
    assert "int disk_configuration_jacobian(double t, const double *q, const double *u," in header
    q, u = _point(model, 0)
    J_c, = model.configuration_jacobian(np.array([q, q]), u)
    np.testing.assert_array_equal(J_c[0], model.constraint_maps(q, u).J_c)
    np.testing.assert_array_equal(J_c[1], J_c[0])


def test_every_row_names_known_roles_and_sizes():
    roles = {"time", "point", "in_out", "partition", "option", "flags", "output"}
    for entry in entry_points.ENTRY_POINTS:
        assert dataclasses.is_dataclass(entry)
        for p in entry.parameters:
            assert p.role in roles, (entry.name, p.name)
            for axis in p.shape:
                assert all(t in entry_points.SIZE_NAMES or t == "one" or t.isdigit() for t in axis), \
                    (entry.name, p.name, axis)
