"""The lane rendering (codegen/lanes.py): batches of linearize, linearize_full
and the state derivative run W points at once, and return what one call per
point returns, bit for bit, on batches that mix regular, ill-conditioned,
singular, non-finite and inconsistent points. The reference is the same model
built without lane code (CODEGEN_LANES=off: its batches loop the scalar code)
and single calls of the lane build."""

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import codegen
from codegen import compile as compile_step
from codegen.errors import CodegenError
from codegen.models import disk as disk_models
from codegen.models import fourbar
from codegen.runtime import arguments, kernel


def variant_dir(build_dir):
    """Where the builds for other targets go: beside the session's."""
    return Path(build_dir).parent / f"{Path(build_dir).name}-variants"


def build_with(monkeypatch, model, build_dir, lanes=None, vector_math=False):
    """``model`` built with CODEGEN_LANES=lanes (None: this machine's target).
    Another target's build goes to a directory beside ``build_dir``, so that the
    session's output directory keeps leading to the default builds (other tests
    load them from there by name)."""
    if lanes is not None or vector_math:
        build_dir = variant_dir(build_dir)
    with monkeypatch.context() as m:
        if lanes is None:
            m.delenv("CODEGEN_LANES", raising=False)
        else:
            m.setenv("CODEGEN_LANES", lanes)
        if vector_math:
            m.setenv("CODEGEN_VECTOR_MATH", "1")
        else:
            m.delenv("CODEGEN_VECTOR_MATH", raising=False)
        return codegen.build(model, output_dir=build_dir)


@pytest.fixture(scope="module")
def disk_without_lanes(build_dir, disk_model):
    with pytest.MonkeyPatch.context() as m:
        return build_with(m, disk_model, build_dir, "off")


@pytest.fixture(scope="module")
def fourbar_pair(build_dir):
    model = fourbar.make_model(1)
    with pytest.MonkeyPatch.context() as m:
        return build_with(m, model, build_dir), build_with(m, model, build_dir, "off")


def package_dir_of(module):
    return Path(module.__file__).parent


def lanes_record(module):
    """The build record's "lanes" entry of a compiled model."""
    return compile_step.read_record(package_dir_of(module))["lanes"]


def kernel_linearize(module, q, u, r=None, p=None, t=0.0, full=False):
    """(status, index, out) of the kernel's linearize batch: A, B, the
    condition estimates and the steadiness flags of each point."""
    batch = arguments.batch(module, q, u, r, p, t)
    return kernel.linearize(module._kernel, batch, full=full, dependent_q=None, dependent_u=None,
                            tol=1e-8, steady_tol=1e-9, threads=1, work=1)


def disk_points(module, n, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(scale=0.6, size=(n, module.nq))
    u = rng.normal(size=(n, module.nu))
    return tuple(np.array(a) for a in module.complete(q, u))


def test_the_lane_target_is_in_the_build_and_its_key(disk, monkeypatch):
    """This machine's target (or the one CODEGEN_LANES names) decides the
    flags of the lane code and is part of the cache key: a cache shared by
    machines with other CPUs holds one build per target."""
    entry = lanes_record(disk)
    assert entry["target"] in compile_step.LANE_TARGETS
    keys = {}
    for target in ("avx512", "avx2", "portable", "off"):
        monkeypatch.setenv("CODEGEN_LANES", target)
        keys[target] = compile_step.cache_key("model", "generator")
    assert len(set(keys.values())) == 4
    monkeypatch.setenv("CODEGEN_LANES", "sse9")
    with pytest.raises(CodegenError, match="CODEGEN_LANES"):
        compile_step.lane_target()


def test_the_c_checks_the_cpu_before_the_lanes(disk):
    """A build for AVX-512 or AVX2 runs its lanes only where the CPU has
    them (__builtin_cpu_supports), so a build moved to an older machine
    still computes (one point at a time)."""
    text = (package_dir_of(disk) / "disk.c").read_text()
    usable = text[text.index("static int lanes_usable"):]
    assert '__builtin_cpu_supports("avx512f")' in usable and '__builtin_cpu_supports("avx2")' in usable
    assert "if (!dependent_q && !dependent_u && lanes_usable())" in text


def test_disk_batches_equal_the_scalar_build_bit_for_bit(disk, disk_without_lanes):
    """Regular points, a tail block shorter than W, per-point times and
    inputs: A, B, A', the condition estimates and the steadiness flags."""
    q, u = disk_points(disk, 29)
    t = np.linspace(0.0, 1.0, 29)
    p = np.tile(disk.default_parameters, (29, 1))
    for name in ("m", "g"):          # per point (the radius would move f_c)
        p[:, disk.p_names.index(name)] *= 1.0 + 0.1 * np.arange(29)
    for full in (False, True):
        s1, _, lanes = kernel_linearize(disk, q, u, None, p, t, full=full)
        s2, _, scalar = kernel_linearize(disk_without_lanes, q, u, None, p, t, full=full)
        assert s1 == s2 == 0
        for name in ("A", "B", "condition", "unsteady"):
            assert np.array_equal(getattr(lanes, name), getattr(scalar, name)), name
    qd1, ud1 = disk.state_derivative(q, u, None, p, t)
    qd2, ud2 = disk_without_lanes.state_derivative(q, u, None, p, t)
    assert np.array_equal(qd1, qd2) and np.array_equal(ud1, ud2)


def test_steady_and_moving_points_get_the_same_steadiness(disk, disk_without_lanes):
    """Steady turns (no flag) and the same points with a perturbed speed
    (flags): the lanes' bit-set steadiness is unsteady_states'."""
    points = [disk_models.steady_turn(disk_models.DEFAULT_PARAMETERS, lean=lean, spin_rate=-4.0)
              for lean in np.linspace(0.05, 0.6, 11)]
    q = np.array([p[0] for p in points])
    u = np.array([p[1] for p in points])
    u[::2, 0] += 0.3
    q, u = disk.complete(q, u)
    _, _, lanes = kernel_linearize(disk, q, u)
    _, _, scalar = kernel_linearize(disk_without_lanes, q, u)
    assert np.array_equal(lanes.unsteady, scalar.unsteady)
    assert lanes.unsteady[1::2].sum() == 0 and lanes.unsteady[::2].sum() > 0


def test_mixed_batch_fails_where_single_calls_fail(disk, disk_without_lanes):
    """Non-finite, inconsistent and singular points among regular ones: the
    same first failure (status and index) as the scalar build, and the
    regular points' results as single calls give them."""
    q, u = disk_points(disk, 21, seed=3)
    bad = {5: "nan", 9: "off", 14: "singular"}
    q[5, 2] = np.nan
    q[9, 5] += 0.1                      # off f_c = 0
    q[14, 1] = np.pi / 2                 # lean 90 degrees: M_qq singular
    q[14], u[14] = (np.array(a) for a in disk.complete(q[14], u[14]))
    for index in sorted(bad):
        order = [i for i in range(21) if i not in bad or i == index]
        s1, i1, _ = kernel_linearize(disk, q[order], u[order])
        s2, i2, _ = kernel_linearize(disk_without_lanes, q[order], u[order])
        assert (s1, i1) == (s2, i2) and s1 != 0, bad[index]
    good = [i for i in range(21) if i not in bad]
    A, B = disk.linearize(q[good], u[good])
    for k, i in enumerate(good):
        A1, B1 = disk.linearize(q[i], u[i])
        assert np.array_equal(A[k], A1) and np.array_equal(B[k], B1)


def test_fourbar_near_and_at_its_singular_point(fourbar_pair):
    """Points approaching the flat configuration (J_c P_qd ill-conditioned:
    static pivots fail, the lanes hand them to the general path) and at it
    (singular): the lane build equals the scalar build on every point."""
    lanes, scalar = fourbar_pair
    assert lanes_record(lanes)["target"] != "off" and lanes_record(scalar)["target"] == "off"
    params = dict(fourbar.DEFAULT_PARAMETERS)
    angles = np.concatenate([np.linspace(1.2, 0.3, 9), [1e-3, 1e-6, 1e-9, 1e-12]])
    points = [fourbar.general(params, phi=a, omega=0.7) for a in angles]
    q = np.array([p[0] for p in points])
    u = np.array([p[1] for p in points])
    s1, i1, out1 = kernel_linearize(lanes, q, u)
    s2, i2, out2 = kernel_linearize(scalar, q, u)
    assert (s1, i1) == (s2, i2)
    n = i1 if s1 else len(q)
    for name in ("A", "B", "condition", "unsteady"):
        assert np.array_equal(getattr(out1, name)[:n], getattr(out2, name)[:n]), name
    flat_q, flat_u = fourbar.flat(params)[:2]
    s1, _, _ = kernel_linearize(lanes, np.array([q[0], flat_q]), np.array([u[0], flat_u]))
    s2, _, _ = kernel_linearize(scalar, np.array([q[0], flat_q]), np.array([u[0], flat_u]))
    assert s1 == s2


def test_threads_and_partitions(disk):
    """Batches on several threads, and with a partition given (the scalar
    code, one point at a time), equal single calls."""
    q, u = disk_points(disk, 40, seed=5)
    A, _ = disk.linearize(q, u, threads=2)
    A1, _ = disk.linearize(q, u, threads=1)
    assert np.array_equal(A, A1)
    other = disk.linearize(q, u, dependent_q=[5], dependent_u=[3, 4, 5])[0]
    for k in (0, 17, 39):
        assert np.array_equal(other[k], disk.linearize(q[k], u[k], dependent_q=[5],
                                                        dependent_u=[3, 4, 5])[0])


def test_bicycle_batches_equal_single_calls(bicycle):
    from codegen.models import bicycle as bicycle_models
    rng = np.random.default_rng(2)
    q0, u0 = bicycle_models.general(dict(zip(bicycle.p_names, bicycle.default_parameters)))[:2]
    q = np.array(q0) + 0.05 * rng.normal(size=(19, bicycle.nq))
    u = np.array(u0) + 0.2 * rng.normal(size=(19, bicycle.nu))
    q, u = bicycle.complete(q, u)
    r = rng.normal(size=(19, bicycle.nr))
    A, B = bicycle.linearize(q, u, r)
    qd, ud = bicycle.state_derivative(q, u, r)
    for k in range(19):
        A1, B1 = bicycle.linearize(q[k], u[k], r[k])
        qd1, ud1 = bicycle.state_derivative(q[k], u[k], r[k])
        assert np.array_equal(A[k], A1) and np.array_equal(B[k], B1)
        assert np.array_equal(qd[k], qd1) and np.array_equal(ud[k], ud1)


def test_bit_identical_lanes_hold_no_fused_multiply_add(disk):
    """The lane code is compiled without contraction: no instruction of the
    module fuses a multiplication and an addition (which would round once
    where the scalar code rounds twice)."""
    if shutil.which("objdump") is None:
        pytest.skip("objdump not installed")
    extension = next(package_dir_of(disk).glob("_kernel*.so"))
    text = subprocess.run(["objdump", "-d", str(extension)], capture_output=True, text=True,
                          check=True).stdout
    assert "disk_lanes_linearize" in text
    assert not re.search(r"\bv?f(n)?m(add|sub)\d*[ps]d\b", text)


def test_portable_build_equals_the_native_one(disk, build_dir, disk_model, monkeypatch):
    """The compiler's default target (no -march): the same bits."""
    portable = build_with(monkeypatch, disk_model, build_dir, "portable")
    assert lanes_record(portable)["target"] == "portable"
    q, u = disk_points(disk, 20, seed=7)
    assert np.array_equal(portable.linearize(q, u)[0], disk.linearize(q, u)[0])


def test_vector_math_is_within_its_bound(disk, build_dir, disk_model, monkeypatch):
    """CODEGEN_VECTOR_MATH=1: glibc's vector sin and cos in the lanes, and
    contraction allowed: results within a few ulps of the scalar code
    (measured: at most 4e-16 relative to max |A|; bound 1e-13)."""
    if not Path("/lib/x86_64-linux-gnu/libmvec.so.1").exists() and not shutil.which("ldconfig"):
        pytest.skip("no libmvec")
    try:
        fast = build_with(monkeypatch, disk_model, build_dir, vector_math=True)
    except CodegenError as error:
        pytest.skip(f"vector math not available here: {error}")
    # the record of the build just made (the module may be one this process
    # imported before from another directory with the same key: the benchmark's)
    assert compile_step.read_record(variant_dir(build_dir) / "disk")["lanes"]["vector_math"]
    q, u = disk_points(disk, 64, seed=11)
    A, _ = fast.linearize(q, u)
    A_exact, _ = disk.linearize(q, u)
    scale = np.abs(A_exact).max(axis=(1, 2))
    assert (np.abs(A - A_exact).max(axis=(1, 2)) <= 1e-13 * scale).all()


def local_batch(module, q, u, width=None):
    """(status, index, out) of the kernel's linearize_local batch."""
    batch = arguments.batch(module, q, u, None, None, 0.0)
    return kernel.linearize_local(module._kernel, batch, width=width or module.nx, rank_tol=1e-9,
                                  tol=1e-8, steady_tol=1e-9, threads=1, work=1)


def test_local_batches_equal_the_scalar_build_and_single_calls(disk, disk_without_lanes):
    """linearize_local's regular-point stage in the lanes: A, B, T, ranks,
    charts and steadiness equal the scalar build's batch and one call per
    point, bit for bit (an upright disk among the points; a tail block)."""
    q, u = disk_points(disk, 27, seed=13)
    q[4, 1] = 0.0                        # upright
    q, u = (np.array(a) for a in disk.complete(q, u))
    s1, _, lanes = local_batch(disk, q, u)
    s2, _, scalar = local_batch(disk_without_lanes, q, u)
    assert s1 == s2 == 0 and lanes.width == scalar.width == disk.nx
    for name in ("A", "B", "T", "ranks", "charts", "unsteady"):
        assert np.array_equal(getattr(lanes, name), getattr(scalar, name)), name
    result = disk.linearize_local(q, u)
    for k in range(len(q)):
        one = disk.linearize_local(q[k], u[k])
        assert np.array_equal(one.A, result.A[k]) and np.array_equal(one.embedding, result.embedding[k])


def test_local_batches_across_a_singular_configuration(fourbar_pair):
    """The four-bar approaching and at its flat configuration (J_c loses
    rank: a larger local form, the batch laid out again for the largest
    size), and rows too narrow for a point: the lane build as the scalar one."""
    lanes, scalar = fourbar_pair
    params = dict(fourbar.DEFAULT_PARAMETERS)
    points = [fourbar.general(params, phi=a, omega=0.7) for a in np.linspace(1.2, 0.2, 11)]
    points.insert(5, fourbar.flat(params))
    q = np.array([p[0] for p in points])
    u = np.array([p[1] for p in points])
    for width in (lanes.nx, lanes.nq + lanes.nu):
        s1, i1, out1 = local_batch(lanes, q, u, width)
        s2, i2, out2 = local_batch(scalar, q, u, width)
        assert (s1, i1) == (s2, i2) == (0, len(q))
        assert out1.width == out2.width == lanes.nq + lanes.nu     # the flat point needs more
        assert np.array_equal(out1.ranks, out2.ranks) and np.array_equal(out1.charts, out2.charts)
        ns, nr = lanes.nq + lanes.nu, lanes.nr
        for i, (rank_c, rank_v) in enumerate(out1.ranks):
            nx = ns - rank_c - rank_v      # each point packed with its own size
            for name, used in (("A", nx * nx), ("B", nx * nr), ("T", ns * nx), ("unsteady", nx)):
                assert np.array_equal(getattr(out1, name)[i, :used], getattr(out2, name)[i, :used]), name
    assert out1.ranks[5, 0] < lanes.nc
    result = lanes.linearize_local(q, u)
    one = lanes.linearize_local(q[5], u[5])
    assert result.point(5).nx == one.nx > lanes.nx
    assert np.array_equal(result.point(5).A, one.A)


def test_an_avx512_build_runs_on_any_cpu(disk, build_dir, disk_model, monkeypatch):
    """A build for AVX-512 (as a cache shared with an AVX-512 machine would
    hold) loaded here: where this CPU lacks AVX-512 the C's check sends every
    point to the scalar code, where it has it the lanes run; either way the
    results are the native build's, bit for bit."""
    moved = build_with(monkeypatch, disk_model, build_dir, "avx512")
    assert lanes_record(moved)["target"] == "avx512" and lanes_record(moved)["lanes"] == 8
    q, u = disk_points(disk, 21, seed=17)
    for name in ("linearize", "state_derivative"):
        for a, b in zip(getattr(moved, name)(q, u), getattr(disk, name)(q, u)):
            assert np.array_equal(a, b), name
    assert np.array_equal(moved.linearize_local(q, u).A, disk.linearize_local(q, u).A)


def test_linearize_without_the_full_rows_skips_them(disk_sources):
    """linearize's batches where the caller asks for neither A' nor B' run a
    lane solution without A_full's and B_full's dependent rows, stores and
    checks (the scalar code checks only the outputs asked for); the batch
    tests above hold it to the scalar build's bits, with and without A'."""
    import re

    text = disk_sources.files["disk_lanes.c"]

    def body(function):
        match = re.search(r"^NOT_INLINED static void %s\(.*?^}" % function, text, re.S | re.M)
        assert match, function
        return match.group(0)

    full, reduced = body("lane_solution"), body("lane_solution_reduced")
    assert "A_full" in full and "A_full" not in reduced and "B_full" not in reduced
    # every entry of A is still stored and checked
    for i in range(8 * 8):                   # the disk's A: 8 states
        assert f"w->A[{i}][k] =" in reduced and f"fabs(w->A[{i}][k])" in reduced
    assert reduced.count("const double v") < full.count("const double v")
    assert "disk_lanes_linearize_reduced(" in disk_sources.files["disk.c"]
    # the 35 structural zeros of the disk's A are unloaded from a table, the
    # other 29 entries from the lanes (the batch tests above check the bits)
    kernel = re.search(r"^int disk_lanes_linearize_reduced\(.*?^}", text, re.S | re.M).group(0)
    assert "static const double fixed_A[64] = { 0.0 };" in kernel
    assert len(set(re.findall(r"row\[(\d+)\] = w->A\[\1\]\[k\];", kernel))) == 29
