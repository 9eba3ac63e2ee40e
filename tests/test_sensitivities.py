"""Parameter sensitivities (issue 21, item 2): ``Model(..., sensitivities=...)``
and ``module.sensitivities(q, u, ...)`` -> dA/dp, dB/dp (dC/dp, dD/dp).

References, independent of the tangent code:
* closed forms: the rolling disk's upright eigenvalues, lambda^2 =
  4/5 g/r - 12/5 omega^2 (the chapter's +/-2 sqrt(1 - 3 v^2)/sqrt(5) at
  m = r = g = 1), differentiated by hand; the bicycle's roll/steer state
  matrix from Meijaard et al.'s canonical M, C1, K0, K2
  (tests/bicycle_benchmark.py, a transcription of the paper), differentiated
  by fourth-order central differences of that formula;
* finite differences of the module itself (fourth order, the dependent
  coordinates and speeds re-solved at each perturbed parameter with
  ``complete``), at points that are not equilibria, with the default and
  another partition, and of the outputs' C and D;
* the weave and capsize speeds re-solved at perturbed parameters.
"""

import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import brentq

import bicycle_benchmark as bench
import codegen
from codegen.errors import IllConditionedWarning, InputError, ModelError, NotSteadyWarning
from codegen.models import bicycle as bicycle_models
from codegen.models import disk as disk_models
from codegen.models import fourbar
from codegen.runtime.results import eigenvalue_sensitivities
from test_outputs import pendulum_model, pendulum_outputs


@pytest.fixture(scope="module")
def disk_sensitive(build_dir):
    return codegen.build(disk_models.make_model(sensitivities="all"), output_dir=build_dir)


@pytest.fixture(scope="module")
def bicycle_sensitive(build_dir):
    # by its recipe, as the README builds it: there it is then found without
    # forming the bicycle's equations again
    return codegen.build("bicycle", sensitivities="all", output_dir=build_dir)


def finite_differences(module, q, u, r, p, index, step, dependent_q=None, dependent_u=None,
                       outputs=False, t=0.0):
    """Fourth-order central differences of (A, B) (or (C, D)) in p[index],
    the dependent coordinates and speeds completed at each parameter value."""
    values = {}
    for k in (-2, -1, 1, 2):
        p_k = np.array(p, dtype=float)
        p_k[index] += k * step
        q_k, u_k = module.complete(q, u, r, p_k, t, dependent_q=dependent_q, dependent_u=dependent_u,
                                   tol=1e-14)
        if outputs:
            _, C, D = module.outputs(q_k, u_k, r, p_k, t, dependent_q=dependent_q,
                                     dependent_u=dependent_u, tol=1e-10)
            values[k] = (C, D)
        else:
            values[k] = module.linearize(q_k, u_k, r, p_k, t, dependent_q=dependent_q,
                                         dependent_u=dependent_u, tol=1e-10)
    return tuple((-values[2][i] + 8 * values[1][i] - 8 * values[-1][i] + values[-2][i]) / (12 * step)
                 for i in range(2))


def assert_matches_differences(module, q, u, r=None, p=None, dependent_q=None, dependent_u=None,
                               rtol=1e-7, t=0.0):
    p = np.array(module.default_parameters if p is None else p, dtype=float)
    result = module.sensitivities(q, u, r, p, t, dependent_q=dependent_q, dependent_u=dependent_u)
    A, B = module.linearize(q, u, r, p, t, dependent_q=dependent_q, dependent_u=dependent_u)
    np.testing.assert_allclose(result.A, A, rtol=0, atol=1e-12 * np.abs(A).max())
    scale = max(1.0, np.abs(A).max())
    for j, name in enumerate(result.p_names):
        index = module.p_names.index(name)
        step = 1e-4 * max(1.0, abs(p[index]))
        dA, dB = finite_differences(module, q, u, r, p, index, step, dependent_q, dependent_u, t=t)
        np.testing.assert_allclose(result.dA[j], dA, rtol=0, atol=rtol * scale, err_msg=name)
        np.testing.assert_allclose(result.dB[j], dB, rtol=0, atol=rtol * max(1.0, np.abs(B).max(initial=0.0)),
                                   err_msg=name)
    return result


def disk_point(module, seed):
    rng = np.random.default_rng(seed)
    q, u = module.complete(rng.normal(scale=0.6, size=module.nq), rng.normal(size=module.nu))
    return np.array(q), np.array(u)


def test_disk_upright_eigenvalues_follow_the_closed_form(disk_sensitive):
    """lambda^2 = 4/5 g/r - 12/5 omega^2 at upright rolling with spin rate
    omega (held, as every independent speed): d lambda^2/d g = 4/(5 r),
    d/dr = -4 g/(5 r^2), d/dm = 0, for the simple pair; the six zero
    eigenvalues are not simple (NaN)."""
    module = disk_sensitive
    for r, g, v in ((1.0, 1.0, 0.5), (0.3, 9.81, 1.0), (0.5, 2.0, 0.2)):
        parameters = {"m": 2.0, "r": r, "g": g}
        q, u = disk_models.upright(parameters, v=v)
        p = [parameters[name] for name in module.p_names]
        lam, dlam = module.sensitivities(q, u, p=p).eigenvalues()
        omega = v / r
        pair = np.argsort(-np.abs(lam))[:2]
        assert np.allclose(lam[pair] ** 2, 0.8 * g / r - 2.4 * omega**2, rtol=1e-12)
        expected = {"m": 0.0, "r": -0.8 * g / r**2, "g": 0.8 / r}
        for j, name in enumerate(module.sensitivity_names):
            for i in pair:
                assert 2 * lam[i] * dlam[j, i] == pytest.approx(expected[name], rel=1e-10, abs=1e-12)
        assert np.isnan(np.delete(dlam, pair, axis=1)).all()


def test_disk_at_moving_points_against_finite_differences(disk_sensitive):
    """Leaning, turning, accelerating points (not equilibria): the radius
    moves the dependent height q6 and the dependent speeds."""
    for seed in range(3):
        q, u = disk_point(disk_sensitive, seed)
        assert_matches_differences(disk_sensitive, q, u)


def test_parameters_of_the_dynamics_alone_skip_the_kinematics_tangents(disk_sensitive):
    """m and g enter neither the rolling constraints nor the kinematic
    equations: in their directions the coordinates, speeds and rates are
    held, and the tangents of the residuals', the constraint Jacobians' and
    the kinematics' parts are zeros, not evaluated (their tables of
    directions in the generated C); r moves the height, and evaluates them.
    The results in every direction are checked above (closed form, finite
    differences)."""
    source = (Path(disk_sensitive.__file__).parent / "disk_sensitivities.c").read_text()
    names = list(disk_sensitive.sensitivity_names)
    assert names == ["m", "r", "g"]
    for part in ("residuals", "constraint_jacobians", "kinematics"):
        table = re.search(rf"active_{part}\[NSENS\] = {{ ([0-9, ]+) }};", source)
        assert table, part
        assert [int(x) for x in table.group(1).split(",")] == [name == "r" for name in names], part


def test_another_partition_and_batches(build_dir):
    """The four-bar (the link lengths move its dependent angles), default
    and another partition, and a batch equal to single points."""
    model = fourbar.make_model(1).with_sensitivities("all")
    module = codegen.build(model, output_dir=build_dir)
    params = dict(zip(module.p_names, module.default_parameters))
    points = [fourbar.general(params, phi=phi, omega=0.9) for phi in (1.1, 0.7)]
    q, u = (np.array([point[k] for point in points]) for k in (0, 1))
    for k in range(len(points)):
        assert_matches_differences(module, q[k], u[k])
        # the independent angle and rate swapped with the first dependent ones
        other_q = [i for i in range(module.nq) if i != module.dependent_q[0]][-module.nc:]
        other_u = [i for i in range(module.nu) if i != module.dependent_u[0]][-module.nv:]
        assert sorted(other_q) != sorted(module.dependent_q)
        assert_matches_differences(module, q[k], u[k], dependent_q=other_q, dependent_u=other_u)
    batch = module.sensitivities(q, u)
    assert batch.dA.shape == (2, len(module.sensitivity_names), module.nx, module.nx)
    for k in range(len(points)):
        one = module.sensitivities(q[k], u[k])
        assert np.array_equal(batch.dA[k], one.dA) and np.array_equal(batch.dB[k], one.dB)


def recorded(call, *args, **options):
    """The messages of the warnings ``call`` gives, by category."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call(*args, **options)
    found = {}
    for warning in caught:
        found.setdefault(warning.category, []).append(str(warning.message))
    return found


def test_sensitivities_warn_where_linearize_does(disk_sensitive, build_dir):
    """A, its derivatives and the eigenvalues' derivatives are the chart's:
    at a point that is not steady in the partition's chart, sensitivities
    warns as linearize does (the same states named), on the fast path and on
    the general path (the partition given), for one point and a batch; not
    at the disk's steady motions, nor with steady_tol=None. Near the
    four-bar's singular configuration both say the partition block is
    ill-conditioned."""
    module = disk_sensitive
    params = dict(zip(module.p_names, module.default_parameters))
    moving = [disk_point(module, seed) for seed in range(3)]
    steady = [disk_models.upright(params, v=2.0), disk_models.steady_turn(params, lean=0.3)]
    partition = dict(dependent_q=list(module.dependent_q), dependent_u=list(module.dependent_u))
    for options in ({}, partition):
        for q, u in moving:
            said = recorded(module.sensitivities, q, u, **options)[NotSteadyWarning]
            expected = recorded(module.linearize, q, u, **options)[NotSteadyWarning]
            assert said == [text.replace("chart of linearize", "chart of sensitivities") for text in expected]
            assert NotSteadyWarning not in recorded(module.sensitivities, q, u, steady_tol=None, **options)
        for q, u in steady:
            assert recorded(module.sensitivities, q, u, **options) == {}
        q, u = (np.array([point[k] for point in steady + moving]) for k in (0, 1))
        said = recorded(module.sensitivities, q, u, **options)[NotSteadyWarning]
        assert len(said) == 1 and "at 3 of 5 points (first at batch index (2,))" in said[0]
    fourbar_module = codegen.build(fourbar.make_model(1).with_sensitivities("all"), output_dir=build_dir)
    fourbar_params = dict(zip(fourbar_module.p_names, fourbar_module.default_parameters))
    q, u = fourbar.general(fourbar_params, phi=np.pi - 1e-5, omega=0.9)[:2]
    said = recorded(fourbar_module.sensitivities, q, u).get(IllConditionedWarning)
    assert said and said == recorded(fourbar_module.linearize, q, u)[IllConditionedWarning]


def test_a_kernel_from_before_the_steadiness_flags_is_refused(disk_sensitive):
    """A module whose <name>_sensitivities has no steadiness flags (built
    before them) would be called with arguments it does not take: it is
    refused on import, saying to rebuild."""
    import types
    from codegen.runtime import kernel
    real = disk_sensitive._kernel
    assert kernel.missing_function(real) is None
    table = dict(real.ENTRY_POINTS)
    table["sensitivities"] = dict(table["sensitivities"], parameters=tuple(
        row for row in table["sensitivities"]["parameters"]
        if row[0] not in ("steady_tol", "condition", "unsteady")))
    old = types.SimpleNamespace(**{name: getattr(real, name) for name in dir(real) if not name.startswith("__")})
    old.ENTRY_POINTS = table
    assert kernel.missing_function(old) == "sensitivities' steadiness flags"


def assert_renderings_agree(module, q, u, r=None, rtol=1e-11):
    """The straight-line fast path (no partition given) against the looped
    general path (the same default partition, given explicitly)."""
    fast = module.sensitivities(q, u, r)
    general = module.sensitivities(q, u, r, dependent_q=list(module.dependent_q),
                                   dependent_u=list(module.dependent_u))
    names = ("A", "B", "dA", "dB") + (("C", "D", "dC", "dD") if module.y_names else ())
    for name in names:
        exact = getattr(general, name)
        np.testing.assert_allclose(getattr(fast, name), exact, rtol=0,
                                   atol=rtol * max(1.0, np.abs(exact).max(initial=0.0)), err_msg=name)


def test_the_fast_path_agrees_with_the_general_path(disk_sensitive, build_dir):
    """The disk at moving points, and the four-bar around its circle: where
    a static pivot of the fast path is rejected (the four-bar near its
    partition's singular angles), the call takes the general path."""
    for seed in range(4):
        assert_renderings_agree(disk_sensitive, *disk_point(disk_sensitive, seed))
    module = codegen.build(fourbar.make_model(1).with_sensitivities("all"), output_dir=build_dir)
    params = dict(zip(module.p_names, module.default_parameters))
    for phi in np.linspace(0.05, 2 * np.pi - 0.05, 23):
        try:
            q, u = fourbar.general(params, phi=phi, omega=0.9)[:2]
            module.linearize(q, u)
        except Exception:   # no assembly, or the default partition singular there
            continue
        assert_renderings_agree(module, q, u)


def test_direction_lanes_give_the_scalar_codes_bits(disk_sensitive, build_dir, monkeypatch):
    """On the fast path the lane code takes W parameter directions at once
    (templates/lanes.c.jinja, direction_*): the results of the scalar code
    (the same model built with CODEGEN_LANES=off), value for value, on the
    disk (3 directions: one block, padded), the four-bar (7: two blocks,
    the parameters of its kinematics and of its dynamics alone mixed) and a
    pendulum with outputs (dC, dD too), at moving points; the four-bar also
    near its partition's
    singular angles, where some points take the general path."""
    import json

    from codegen import compile as compile_stage
    if compile_stage.lane_target().name == "off":
        pytest.skip("no lane code on this machine (CODEGEN_LANES=off)")
    fourbar_model = fourbar.make_model(1).with_sensitivities("all")
    outputs_model = pendulum_model(pendulum_outputs, name="pendulum_sensitivities").with_sensitivities("all")
    lanes = {"disk": disk_sensitive, "fourbar": codegen.build(fourbar_model, output_dir=build_dir),
             "outputs": codegen.build(outputs_model, output_dir=build_dir)}
    monkeypatch.setenv("CODEGEN_LANES", "off")
    scalar = {"disk": codegen.build(disk_models.make_model(sensitivities="all"), output_dir=build_dir),
              "fourbar": codegen.build(fourbar_model, output_dir=build_dir),
              "outputs": codegen.build(outputs_model, output_dir=build_dir)}
    monkeypatch.undo()
    for name, module in lanes.items():
        folder = Path(module.__file__).parent
        assert f"{module.name}_direction_lanes(" in (folder / f"{module.name}_lanes.c").read_text(), name
        record = json.loads((Path(scalar[name].__file__).parent / "build.json").read_text())
        assert record["lanes"]["target"] == "off", name
    points = {"disk": [disk_point(disk_sensitive, seed) for seed in range(6)], "fourbar": []}
    length = lanes["outputs"].default_parameters[lanes["outputs"].p_names.index("L")]
    points["outputs"] = [tuple(np.array(v) for v in lanes["outputs"].complete([side * length, length], [rate, 0.0]))
                         for side, rate in ((0.4, 0.7), (0.8, -0.2), (-0.6, 2.0), (0.1, 0.3), (-0.3, -1.0),
                                            (0.5, 0.0))]
    params = dict(zip(lanes["fourbar"].p_names, lanes["fourbar"].default_parameters))
    for phi in np.linspace(0.05, 2 * np.pi - 0.05, 17):
        try:
            points["fourbar"].append(tuple(np.array(v) for v in fourbar.general(params, phi=phi, omega=0.9)[:2]))
        except Exception:   # no assembly there
            continue
    for name, module in lanes.items():
        q = np.array([point[0] for point in points[name]])
        u = np.array([point[1] for point in points[name]])
        options = dict(steady_tol=None, tol=1e-6)
        r = [0.6] if module.nr else None
        fields = ("dA", "dB", "A", "B") + (("dC", "dD", "C", "D") if name == "outputs" else ())
        for k in range(len(q)):
            try:
                expected = scalar[name].sensitivities(q[k], u[k], r, **options)
            except codegen.errors.EvaluationError:
                continue
            got = module.sensitivities(q[k], u[k], r, **options)
            for field in fields:
                np.testing.assert_array_equal(getattr(got, field), getattr(expected, field), err_msg=f"{name} {k} {field}")
        assert len(q) >= 6


def test_direction_groups_give_the_scalar_codes_bits(tmp_path, monkeypatch):
    """The lane code renders the blocks' tangents once a group of directions
    (codegen.emit._direction_groups), with only that group's seeds: in
    groups of two, the four-bar's seven directions (its link length enters
    the loop's constraints, the others its dynamics alone) and the outputs
    pendulum's run in four and in two groups, and the results equal the
    scalar code's (CODEGEN_LANES=off) value for value at moving points. A
    group of the dynamics' parameters alone reads no tangent of a
    coordinate, speed or coordinate rate."""
    import codegen.emit
    from codegen import compile as compile_stage
    if compile_stage.lane_target().name == "off":
        pytest.skip("no lane code on this machine (CODEGEN_LANES=off)")
    monkeypatch.setattr(codegen.emit, "DIRECTION_GROUP", 2)
    models = {"fourbar": fourbar.make_model(1).with_sensitivities("all", name="fourbar_in_groups"),
              "outputs": pendulum_model(pendulum_outputs, name="pendulum_in_groups").with_sensitivities("all")}
    lanes = {name: codegen.build(model, output_dir=tmp_path / "lanes") for name, model in models.items()}
    with monkeypatch.context() as off:
        off.setenv("CODEGEN_LANES", "off")
        scalar = {name: codegen.build(model, output_dir=tmp_path / "scalar") for name, model in models.items()}
    source = (Path(lanes["fourbar"].__file__).parent / "fourbar_in_groups_lanes.c").read_text()
    # the direction lanes' (the point lanes' follow, with the same groups)
    source = source.split("/* ---- the sensitivities of W points at once")[0]
    groups = re.findall(r"/\* group (\d+): the directions ([\d, ]+) \*/", source)
    assert [number for number, _ in groups] == ["0", "1", "2", "3"]
    # the groups of the dynamics alone run tangent stages of their own (the
    # constraints' tangents are zeros there: codegen.lanes.fold_zeros)
    assert "/* group 1: the tangent stages without what is zero in its directions */" in source
    names = lanes["fourbar"].sensitivity_names
    first = [names[int(j)] for j in groups[0][1].split(", ")]
    assert first[0] == "l"
    # the dynamics' groups: their tangent functions read no d_q, d_u, d_qd
    for number, _ in groups[1:]:
        body = source.split(f"/* group {number}:")[1].split("/* group")[0].split("/*\n * The tangent stages'")[0]
        assert "d_carried" in body or "d_p[" in body
        assert not re.search(r"\bd_(q|u|qd)\[\d+\]\[k\]", body), number
    # C99 without a warning (-O3 as the lanes are built: clang warns at -O1 that it
    # cannot vectorize the omp simd loops), every group's functions used
    import shutil
    import subprocess
    for name, module in lanes.items():
        folder = Path(module.__file__).parent
        upper = module.name.upper()
        # the whole file, and (with point lanes) each of the two parts the build compiles apart
        split = f"{upper}_LANES_PART" in (folder / f"{module.name}_lanes.c").read_text()
        assert split == (name == "fourbar"), name      # the pendulum has outputs: no point lanes
        for compiler in [c for c in ("gcc", "clang") if shutil.which(c)]:
            for part in ([], [f"-D{upper}_LANES_PART=1"], [f"-D{upper}_LANES_PART=2"])[:3 if split else 1]:
                result = subprocess.run(
                    [compiler, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O3", "-fopenmp-simd",
                     f"-D{upper}_LANES=4", f"-D{upper}_LANES_KERNELS", f"-D{upper}_LANES_SIMD", *part, "-c",
                     str(folder / f"{module.name}_lanes.c"), "-o", str(tmp_path / f"{name}_{compiler}.o")],
                    capture_output=True, text=True)
                assert result.returncode == 0 and result.stderr == "", (name, compiler, part, result.stderr)
    params = dict(zip(lanes["fourbar"].p_names, lanes["fourbar"].default_parameters))
    points = {"fourbar": [], "outputs": []}
    for phi in np.linspace(0.05, 2 * np.pi - 0.05, 11):
        try:
            points["fourbar"].append(tuple(np.array(v) for v in fourbar.general(params, phi=phi, omega=0.9)[:2]))
        except Exception:   # no assembly there
            continue
    length = lanes["outputs"].default_parameters[lanes["outputs"].p_names.index("L")]
    points["outputs"] = [tuple(np.array(v) for v in lanes["outputs"].complete([side * length, length], [rate, 0.0]))
                         for side, rate in ((0.4, 0.7), (-0.6, 2.0), (0.5, 0.0))]
    compared = 0
    for name, module in lanes.items():
        fields = ("dA", "dB") + (("dC", "dD") if name == "outputs" else ())
        r = [0.6] if module.nr else None
        for q, u in points[name]:
            try:
                expected = scalar[name].sensitivities(q, u, r, steady_tol=None, tol=1e-6)
            except codegen.errors.EvaluationError:
                continue
            got = module.sensitivities(q, u, r, steady_tol=None, tol=1e-6)
            for field in fields:
                np.testing.assert_array_equal(getattr(got, field), getattr(expected, field), err_msg=f"{name} {field}")
            compared += 1
    assert compared >= 8


def test_point_lanes_give_each_points_own_bits(disk_sensitive, tmp_path, monkeypatch):
    """A batch of sensitivities runs W points at once on the fast path
    (templates/lanes.c.jinja, point_*: the primal, the partials and each
    direction's tangents in the lanes): each point's A, B, dA, dB are those of
    its own call, value for value. The disk (3 directions, one group); the
    four-bar in groups of two (its link length enters the loop's constraints,
    the other six parameters its dynamics alone), across its angles (near its
    partition's singular ones points take the general path); one-parameter
    builds (the partials their group's own): the four-bar's link length and
    the disk's mass. Random parameters per point, and shared ones. A batch
    with a point off the constraints or a NaN fails at that point, with its
    own call's error."""
    import codegen.emit
    from codegen import compile as compile_stage
    if compile_stage.lane_target().name == "off":
        pytest.skip("no lane code on this machine (CODEGEN_LANES=off)")
    monkeypatch.setattr(codegen.emit, "DIRECTION_GROUP", 2)
    models = {"fourbar": fourbar.make_model(1).with_sensitivities("all", name="fourbar_point_lanes"),
              "fourbar_l": fourbar.make_model(1).with_sensitivities(["l"], name="fourbar_point_lanes_l"),
              "disk_m": disk_models.make_model().with_sensitivities(["m"], name="disk_point_lanes_m")}
    modules = {name: codegen.build(model, output_dir=tmp_path) for name, model in models.items()}
    modules["disk"] = disk_sensitive
    rng = np.random.default_rng(3)
    for name, module in modules.items():
        folder = Path(module.__file__).parent
        assert f"int {module.name}_lanes_sensitivities(" in (folder / f"{module.name}_lanes.c").read_text(), name
        if name.startswith("disk"):
            points = [disk_point(module, seed) for seed in range(21)]
        else:
            params = dict(zip(module.p_names, module.default_parameters))
            points = []
            for phi in np.linspace(0.05, 2 * np.pi - 0.05, 29):
                try:
                    point = tuple(np.array(v) for v in fourbar.general(params, phi=phi, omega=0.9)[:2])
                    module.sensitivities(*point, steady_tol=None, tol=1e-6)
                except Exception:   # no assembly there, or a singular configuration
                    continue
                points.append(point)
        q = np.array([point[0] for point in points])
        u = np.array([point[1] for point in points])
        r = rng.normal(size=(len(q), module.nr)) if module.nr else None
        # the kinematic parameters as they are (the points are completed for them)
        p = np.tile(module.default_parameters, (len(q), 1))
        for k, parameter in enumerate(module.p_names):
            if parameter in ("m", "m1", "m2", "m3", "g", "I1", "I2", "I3"):
                p[:, k] *= rng.uniform(0.5, 2.0, size=len(q))
        for pp in (p, None):
            got = module.sensitivities(q, u, r, pp, steady_tol=None, tol=1e-6)
            for k in range(len(q)):
                one = module.sensitivities(q[k], u[k], None if r is None else r[k], None if pp is None else pp[k],
                                           steady_tol=None, tol=1e-6)
                for field in ("A", "B", "dA", "dB"):
                    np.testing.assert_array_equal(getattr(got, field)[k], getattr(one, field),
                                                  err_msg=f"{name} point {k} {field}")
        assert len(q) >= 20, name
        # a point off the constraints, then one with a NaN speed: the batch's
        # error is that point's own
        for bad, error in ((5, codegen.errors.ConstraintViolationError), (9, codegen.errors.InputError)):
            qb, ub = q.copy(), u.copy()
            if error is codegen.errors.InputError:
                ub[bad, 0] = np.nan
            else:
                qb[bad] += 0.05
            with pytest.raises(error) as batch_error:
                module.sensitivities(qb, ub, r, steady_tol=None, tol=1e-6)
            with pytest.raises(error) as own:
                module.sensitivities(qb[bad], ub[bad], None if r is None else r[bad], steady_tol=None, tol=1e-6)
            assert str(batch_error.value).endswith(f"at batch index ({bad},)"), str(batch_error.value)
            assert str(batch_error.value).split(" at batch index")[0] == str(own.value), (own.value, batch_error.value)


def test_the_outputs_fast_path_agrees_with_the_general_path(build_dir):
    """The outputs' C, D and their tangents by the extended straight-line
    path against the looped one (the same partition, given explicitly)."""
    model = pendulum_model(pendulum_outputs, name="pendulum_sensitivities").with_sensitivities("all")
    module = codegen.build(model, output_dir=build_dir)
    length = module.default_parameters[module.p_names.index("L")]
    for side, rate in ((0.4, 0.7), (0.8, -0.2), (-0.6, 2.0)):
        q, u = module.complete([side * length, length], [rate, 0.0])
        assert_renderings_agree(module, q, u, [0.6])
        fast = module.outputs(q, u, [0.6])
        general = module.outputs(q, u, [0.6], dependent_q=list(module.dependent_q),
                                 dependent_u=list(module.dependent_u))
        for a, b in zip(fast, general):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * max(1.0, np.abs(b).max()))


def test_one_parameter_equals_its_row_of_all(build_dir):
    """With one parameter the blocks' partial derivatives stay inline in the
    tangents; with several they are evaluated once a point and shared by the
    directions (partials_evaluate_*). The same products in the same order:
    the one-parameter build's dA, dB, dC, dD equal the row of that
    parameter in the all-parameter build, bit for bit, at moving points."""
    plain = pendulum_model(pendulum_outputs, name="pendulum_sensitivities")
    every = codegen.build(plain.with_sensitivities("all"), output_dir=build_dir)
    one = codegen.build(plain.with_sensitivities(["L"], name="pendulum_sensitivity_L"),
                        output_dir=build_dir)
    assert one.sensitivity_names == ("L",)
    j = list(every.sensitivity_names).index("L")
    q, u = every.complete([[0.4, 0.7], [-0.3, 0.8]], [[0.3, 0.0], [-1.1, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotSteadyWarning)
        a = every.sensitivities(q, u, [[0.6], [-0.2]], t=0.3)
        b = one.sensitivities(q, u, [[0.6], [-0.2]], t=0.3)
    for name in ("dA", "dB", "dC", "dD"):
        np.testing.assert_array_equal(getattr(a, name)[:, j], getattr(b, name)[:, 0])
    assert np.abs(a.dA[:, j]).max() > 0.1


def test_outputs_sensitivities_against_finite_differences(build_dir):
    """dC/dp, dD/dp of the pendulum's outputs (positions, an angle,
    accelerations, a parameter in an output), the rod length moving the
    dependent coordinate."""
    model = pendulum_model(pendulum_outputs, name="pendulum_sensitivities").with_sensitivities("all")
    module = codegen.build(model, output_dir=build_dir)
    q, u = module.complete([0.4, 0.7], [0.3, 0.0])
    r = [0.6]
    result = module.sensitivities(q, u, r, t=0.3)
    p = np.array(module.default_parameters)
    _, C, D = module.outputs(q, u, r, t=0.3)
    np.testing.assert_array_equal(result.C, C)
    # without the outputs: the same A, B and derivatives, no C, D
    plain = module.sensitivities(q, u, r, t=0.3, outputs=False)
    for name in ("A", "B", "dA", "dB"):
        np.testing.assert_array_equal(getattr(plain, name), getattr(result, name))
    for name in ("C", "D", "dC", "dD"):
        with pytest.raises(AttributeError, match=name):
            getattr(plain, name)
    with pytest.raises(InputError, match="outputs must be True or False"):
        module.sensitivities(q, u, r, t=0.3, outputs="C")
    for j, name in enumerate(result.p_names):
        index = module.p_names.index(name)
        step = 1e-4 * max(1.0, abs(p[index]))
        values = {}
        for k in (-2, -1, 1, 2):
            p_k = p.copy()
            p_k[index] += k * step
            q_k, u_k = module.complete(q, u, r, p_k, t=0.3, tol=1e-14)
            values[k] = module.outputs(q_k, u_k, r, p_k, t=0.3, tol=1e-10)
        for slot, name_of in ((1, "C"), (2, "D")):
            fd = (-values[2][slot] + 8 * values[1][slot] - 8 * values[-1][slot] + values[-2][slot]) / (12 * step)
            exact = (result.dC if name_of == "C" else result.dD)[j]
            np.testing.assert_allclose(exact, fd, rtol=0, atol=1e-7 * max(1.0, np.abs(fd).max()),
                                       err_msg=f"d{name_of}/d{name}")


def test_bicycle_against_the_canonical_matrices(bicycle_sensitive):
    """The roll/steer block of A at upright straight running (v = 3, 5 m/s)
    and its derivatives with respect to every benchmark parameter but the
    rear wheel radius (which changes the speed at a held wheel rate) against
    Meijaard et al.'s canonical form, differentiated numerically."""
    module = bicycle_sensitive
    roll, steer = module.state_names.index("roll"), module.state_names.index("steer")
    rows = [roll, steer, module.state_names.index("roll_rate"), module.state_names.index("steer_rate")]
    for v in (3.0, 5.0):
        op = codegen.operating_point("bicycle", "upright", v=v)
        result = module.sensitivities(op.q, op.u, op.r)
        block = result.A[np.ix_(rows, rows)]
        par = bench.benchmark_parameters()
        np.testing.assert_allclose(block, bench.state_matrix(par, v), rtol=1e-11, atol=1e-11)
        for name in module.sensitivity_names:
            if name == "rR":
                continue
            j = module.sensitivity_names.index(name)
            step = 1e-4 * max(1.0, abs(par[name]))
            states, inputs = {}, {}
            for k in (-2, -1, 1, 2):
                shifted = dict(par, **{name: par[name] + k * step})
                states[k], inputs[k] = bench.state_matrix(shifted, v), bench.input_matrix(shifted)
            for exact, values in ((result.dA[j][np.ix_(rows, rows)], states),
                                  (result.dB[j][rows], inputs)):
                fd = (-values[2] + 8 * values[1] - 8 * values[-1] + values[-2]) / (12 * step)
                np.testing.assert_allclose(exact, fd, rtol=0, atol=1e-7 * max(1.0, np.abs(fd).max()),
                                           err_msg=name)


def test_bicycle_at_a_general_point_against_finite_differences(bicycle_sensitive):
    """Leaned, steered, accelerating, with torques: every parameter, the
    geometric ones moving the pitch and the dependent speeds."""
    module = bicycle_sensitive
    rng = np.random.default_rng(4)
    q0, u0 = bicycle_models.general(dict(zip(module.p_names, module.default_parameters)))[:2]
    q, u = module.complete(np.array(q0) + 0.05 * rng.normal(size=module.nq),
                           np.array(u0) + 0.2 * rng.normal(size=module.nu))
    r = rng.normal(size=module.nr)
    assert_matches_differences(module, np.array(q), np.array(u), r, rtol=2e-7)
    assert_renderings_agree(module, np.array(q), np.array(u), r)


def weave_and_capsize(module, p):
    """The weave and capsize speeds of the bicycle with parameters p."""
    def eigenvalues(v):
        op = codegen.operating_point("bicycle", "upright", v=v,
                                     parameters=dict(zip(module.p_names, p)))
        return np.linalg.eigvals(module.linearize(op.q, op.u, op.r, p)[0])

    def weave(v):
        lam = eigenvalues(v)
        return float(lam[np.abs(lam.imag) > 1e-9].real.max())

    def capsize(v):
        lam = eigenvalues(v)
        real = lam[np.abs(lam.imag) <= 1e-9].real
        return float(real[np.argmin(np.abs(real))])
    return (brentq(weave, 3.5, 5.0, xtol=1e-14), brentq(capsize, 5.5, 7.0, xtol=1e-14))


def test_weave_speed_gradient_against_re_solving(bicycle_sensitive):
    """d v_weave/d p = -(d Re lambda/d p) / (d Re lambda/d v) from the
    eigenvalue sensitivities (the speed derivative by a central difference),
    against the weave speed re-solved at p +/- h (trail and head angle)."""
    module = bicycle_sensitive
    p = np.array(module.default_parameters)
    v_weave, _ = weave_and_capsize(module, p)
    op = codegen.operating_point("bicycle", "upright", v=v_weave)
    lam, dlam = module.sensitivities(op.q, op.u, op.r).eigenvalues()
    k = int(np.argmin(np.where(np.abs(lam.imag) > 1e-9, np.abs(lam.real), np.inf)))
    h = 1e-6
    slopes = []
    for v in (v_weave + h, v_weave - h):
        point = codegen.operating_point("bicycle", "upright", v=v)
        values = np.linalg.eigvals(module.linearize(point.q, point.u, point.r)[0])
        slopes.append(values[np.argmin(np.abs(values - lam[k]))].real)
    d_real_dv = (slopes[0] - slopes[1]) / (2 * h)
    for name in ("c", "lam"):
        j = module.sensitivity_names.index(name)
        gradient = -dlam[j, k].real / d_real_dv
        index = module.p_names.index(name)
        step = 1e-5
        speeds = []
        for sign in (1, -1):
            shifted = p.copy()
            shifted[index] += sign * step
            speeds.append(weave_and_capsize(module, shifted)[0])
        assert gradient == pytest.approx((speeds[0] - speeds[1]) / (2 * step), rel=1e-5)


def test_eigenvalue_sensitivities_of_a_known_matrix():
    """d lambda/d p of A(p) = [[p, 1], [0, 2]] and a defective pair."""
    lam, dlam = eigenvalue_sensitivities(np.array([[1.0, 1.0], [0.0, 2.0]]),
                                         np.array([[[1.0, 0.0], [0.0, 0.0]]]))
    order = np.argsort(lam)
    assert np.allclose(lam[order], [1.0, 2.0]) and np.allclose(dlam[0, order], [1.0, 0.0])
    _, dlam = eigenvalue_sensitivities(np.array([[0.0, 1.0], [0.0, 0.0]]), np.eye(2)[None])
    assert np.isnan(dlam).all()


def test_models_without_sensitivities_and_bad_names(disk, disk_model):
    with pytest.raises(InputError, match="has no sensitivities"):
        disk.sensitivities(*disk_models.upright(disk_models.DEFAULT_PARAMETERS))
    with pytest.raises(ModelError, match="not a parameter"):
        disk_model.with_sensitivities(["mass"])
    with pytest.raises(ModelError, match="'all' or a list"):
        disk_model.with_sensitivities("some")
    assert disk_model.with_sensitivities(["g", "m"]).sensitivity_names == ["m", "g"]
    assert disk_model.with_sensitivities(["g"]).name == "disk_sensitivities"
    assert disk_model.with_sensitivities(["g"], name="mine").name == "mine"
    assert disk_model.with_sensitivities(None).fingerprint() == disk_model.fingerprint()
    assert disk_model.with_sensitivities(["g"]).fingerprint() != disk_model.fingerprint()
    assert math.isfinite(disk.default_parameters[0])


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_generated_c_with_sensitivities_compiles_strictly(disk_sensitive, build_dir, tmp_path, compiler):
    """The tangent rendering is C99 that compiles without a warning under
    -Wall -Wextra -Werror -pedantic (the disk with every sensitivity)."""
    import shutil
    import subprocess
    from pathlib import Path

    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} not installed")
    name = disk_sensitive.name
    folder = Path(build_dir) / name    # this session's build (the module may be one imported earlier)
    result = subprocess.run([compiler, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O2",
                             "-c", str(folder / f"{name}.c"), "-o", str(tmp_path / "out.o")],
                            capture_output=True, text=True)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    header = (folder / f"{name}.h").read_text()
    assert f"#define {name.upper()}_NSENS 3" in header and f"{name}_sensitivities(" in header


SENSITIVITY_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include "NAME.h"
int main(int argc, char **argv)
{
    double q[NAME_UPPER_NQ + 1], u[NAME_UPPER_NU + 1];
    double dA[NAME_UPPER_NSX * NAME_UPPER_NX + 1], A[NAME_UPPER_NX * NAME_UPPER_NX + 1], condition[2];
    int unsteady[NAME_UPPER_NX + 1];
    /* on the heap and never initialized: a read of what no step wrote shows */
    NAME_sensitivity_workspace *work = malloc(sizeof *work);
    int i, status;
    if (!work || argc != NAME_UPPER_NQ + NAME_UPPER_NU + 1) return 2;
    for (i = 0; i < NAME_UPPER_NQ; ++i) q[i] = atof(argv[1 + i]);
    for (i = 0; i < NAME_UPPER_NU; ++i) u[i] = atof(argv[1 + NAME_UPPER_NQ + i]);
    status = NAME_sensitivities(0.0, q, u, NULL, NULL, NULL, NULL, 1e-8, 1e-6, A, NULL, dA, NULL, NULL,
                                NULL, NULL, NULL, condition, unsteady, work);
    printf("%d\n", status);
    for (i = 0; i < NAME_UPPER_NX; ++i) printf("%d\n", unsteady[i]);
    for (i = 0; i < NAME_UPPER_NSX * NAME_UPPER_NX; ++i) printf("%.17g\n", dA[i]);
    {
        /* a batch of BATCH points (two lane blocks and a part): the point with
           its speeds scaled (on the manifold: f_v is linear in u), one off the
           configuration constraints, one with a speed NaN; each point's
           status and outputs those of its own call, value for value */
        enum { BATCH = 11, SIZE = NAME_UPPER_NSX * NAME_UPPER_NX + NAME_UPPER_NX * NAME_UPPER_NX + 2 };
        static const double scale[BATCH] = {1.0, 0.5, -1.3, 2.0, 1.0, 0.7, 1.0, -0.2, 3.0, 1.1, 0.0};
        NAME_batch_workspace *batch = malloc(sizeof *batch);
        double *bq = malloc(sizeof(double) * BATCH * NAME_UPPER_NQ), *bu = malloc(sizeof(double) * BATCH * NAME_UPPER_NU);
        double *out = malloc(sizeof(double) * BATCH * SIZE), one[SIZE];
        int *flags = malloc(sizeof(int) * BATCH * NAME_UPPER_NX), one_flags[NAME_UPPER_NX + 1], statuses[BATCH];
        int k, j, mismatches = 0;
        if (!batch || !bq || !bu || !out || !flags) return 2;
        for (k = 0; k < BATCH; ++k) {
            for (i = 0; i < NAME_UPPER_NQ; ++i) bq[k * NAME_UPPER_NQ + i] = q[i] + (k == 4 ? 0.1 : 0.0);
            for (i = 0; i < NAME_UPPER_NU; ++i) bu[k * NAME_UPPER_NU + i] = scale[k] * u[i];
        }
        bu[6 * NAME_UPPER_NU] = atof("nan");
        status = NAME_sensitivities_batch(BATCH, NULL, 0, bq, NAME_UPPER_NQ, bu, NAME_UPPER_NU, NULL, 0, NULL, 0,
                                          NULL, NULL, 1e-8, 1e-6, out, NULL, out + BATCH * NAME_UPPER_NX * NAME_UPPER_NX,
                                          NULL, NULL, NULL, NULL, NULL, out + BATCH * (SIZE - 2), flags, statuses,
                                          batch);
        printf("%d\n", status);
        for (k = 0; k < BATCH; ++k) {
            const int s = NAME_sensitivities(0.0, bq + k * NAME_UPPER_NQ, bu + k * NAME_UPPER_NU, NULL, NULL, NULL,
                                            NULL, 1e-8, 1e-6, one, NULL, one + NAME_UPPER_NX * NAME_UPPER_NX, NULL,
                                            NULL, NULL, NULL, NULL, one + SIZE - 2, one_flags, work);
            printf("%d\n", statuses[k]);
            if (s != statuses[k]) mismatches++;
            if (s != 0) continue;
            for (i = 0; i < NAME_UPPER_NX * NAME_UPPER_NX; ++i)
                mismatches += out[k * NAME_UPPER_NX * NAME_UPPER_NX + i] != one[i];
            for (i = 0; i < NAME_UPPER_NSX * NAME_UPPER_NX; ++i)
                mismatches += out[BATCH * NAME_UPPER_NX * NAME_UPPER_NX + k * NAME_UPPER_NSX * NAME_UPPER_NX + i]
                              != one[NAME_UPPER_NX * NAME_UPPER_NX + i];
            for (j = 0; j < 2; ++j) mismatches += out[BATCH * (SIZE - 2) + 2 * k + j] != one[SIZE - 2 + j];
            for (i = 0; i < NAME_UPPER_NX; ++i) mismatches += flags[k * NAME_UPPER_NX + i] != one_flags[i];
        }
        printf("%d\n", mismatches);
        free(batch); free(bq); free(bu); free(out); free(flags);
    }
    free(work);
    return status == 0 ? 0 : 3;
}
"""


@pytest.mark.parametrize("checker", ["sanitizers", "valgrind"])
@pytest.mark.parametrize("lanes", [False, True, "groups"], ids=["scalar", "direction_lanes", "direction_groups"])
def test_sensitivities_in_c_under_sanitizers_and_valgrind(disk_sensitive, build_dir, tmp_path, checker, lanes,
                                                           monkeypatch):
    """<name>_sensitivities from C on a fresh, uninitialized workspace: no
    memory error, no undefined behaviour, no read of an unwritten value, and
    the module's numbers bit for bit (the same C, the same flags but the
    checks'); without the lane code, and with it (the directions four at a
    time: the disk's three in one block, one lane a copy; or, rendered in
    groups of two, two blocks of the groups' own code)."""
    import os
    import shutil
    import subprocess
    from pathlib import Path

    import codegen.emit

    if checker == "valgrind" and shutil.which("valgrind") is None:
        pytest.skip("valgrind not installed")
    folder = Path(build_dir) / disk_sensitive.name
    if lanes == "groups":
        monkeypatch.setattr(codegen.emit, "DIRECTION_GROUP", 2)
        model = disk_models.make_model().with_sensitivities("all", name="disk_in_groups")
        disk_sensitive = codegen.build(model, output_dir=tmp_path / "build")
        folder = tmp_path / "build" / disk_sensitive.name
        assert "/* group 1: the directions" in (folder / "disk_in_groups_lanes.c").read_text()
    name = disk_sensitive.name
    source = tmp_path / "driver.c"
    source.write_text(SENSITIVITY_DRIVER.replace("NAME_UPPER", name.upper()).replace("NAME", name))
    # Unoptimized under the sanitizers (they see every access as written; at
    # -O2 GCC took 37 s to instrument the disk's tangents), -O1 under valgrind:
    # without -ffast-math and with C99's -ffp-contract=off every level
    # computes the module's bits.
    flags = ["-std=c99", "-g", "-O0" if checker == "sanitizers" else "-O1", f"-I{folder}"]
    if checker == "sanitizers":
        flags += ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
    binary = tmp_path / "driver"
    sources = [str(source), str(folder / f"{name}.c")]
    if lanes:
        upper = name.upper()
        flags += [f"-D{upper}_LANES=4", f"-D{upper}_LANES_KERNELS", f"-D{upper}_LANES_SIMD", "-fopenmp-simd"]
        sources.append(str(folder / f"{name}_lanes.c"))
    subprocess.run(["cc", *flags, *sources, "-o", str(binary), "-lm"], check=True, capture_output=True)
    q, u = disk_point(disk_sensitive, 7)
    command = [str(binary), *map(repr, q.tolist()), *map(repr, u.tolist())]
    if checker == "valgrind":
        command = ["valgrind", "--error-exitcode=99", "--quiet", *command]
    result = subprocess.run(command, capture_output=True, text=True,
                            env=dict(os.environ, ASAN_OPTIONS="detect_leaks=1"))
    assert result.returncode == 3, result.stderr     # the batch's bad points
    lines = result.stdout.split()
    assert lines[0] == "0"
    # the batch: its first failure (point 4, off the constraints), each point's
    # status (point 6, a NaN speed: a non-finite input), no output different
    # from the point's own call's
    batch = lines[-13:]
    assert batch[0] == "3"          # <NAME>_CONFIGURATION_CONSTRAINT
    statuses = batch[1:12]
    assert [s != "0" for s in statuses] == [k in (4, 6) for k in range(11)], statuses
    assert batch[12] == "0", batch
    lines = lines[:-13]
    nx = disk_sensitive.nx
    # the states not steady in the chart: those linearize's warning names
    moving = [disk_sensitive.state_names[i] for i, flag in enumerate(lines[1:1 + nx]) if flag == "1"]
    said = recorded(disk_sensitive.linearize, q, u)[NotSteadyWarning][0]
    assert moving and said.split("): ")[1].startswith(", ".join(moving) + " change")
    dA = np.array(lines[1 + nx:], dtype=float).reshape(-1, nx, nx)
    np.testing.assert_array_equal(dA, disk_sensitive.sensitivities(q, u, steady_tol=None).dA)
