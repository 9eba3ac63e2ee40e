"""The generated C on its own, as a controller would use it: exported folder
with Makefile and example, sanitizers, valgrind, threads, no allocation, and
agreement with the Python module."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import codegen
from codegen.compile import lane_target
from codegen.export import export_c

DRIVER = Path(__file__).parent / "c" / "driver.c"
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]


def package_dir(module):
    return Path(module.__file__).parent


@pytest.fixture(scope="session")
def disk_export(disk, tmp_path_factory):
    destination = tmp_path_factory.mktemp("disk_export")
    op = codegen.operating_point("disk", "steady_turn", lean=0.3, spin_rate=-3.0)
    export_c(package_dir(disk), destination, "disk", "a steady turn", 0.0, op.q, op.u, op.r)
    return destination, op


@pytest.fixture(scope="module")
def bicycle_export(bicycle, tmp_path_factory):
    """The bicycle exported and built by its Makefile (its defaults: -O2, the
    lane code for the compiler's default target) once: the largest compile of
    this file, shared by the example's test and the driver's bit-for-bit test."""
    folder = tmp_path_factory.mktemp("bicycle_export")
    op = codegen.operating_point("bicycle", "upright", v=4.0)
    export_c(package_dir(bicycle), folder, "bicycle", "upright at 4 m/s", 0.0, op.q, op.u, op.r)
    subprocess.run(["make", "-s"], cwd=folder, check=True, capture_output=True)
    return folder, op


def parse_example(output):
    lines = output.splitlines()
    assert lines[0].startswith("status 0"), output
    matrices, i = {}, 1
    while i < len(lines):
        label, rows, cols = lines[i].split()
        rows, cols = int(rows), int(cols)
        values = [[float(v) for v in lines[i + 1 + k].split()] for k in range(rows)]
        matrices[label] = np.array(values).reshape(rows, cols)
        i += 1 + rows
    return matrices


def test_exported_folder_builds_with_make_and_matches_python(disk, disk_export):
    folder, op = disk_export
    assert sorted(p.name for p in folder.iterdir()) == ["CMakeLists.txt", "Makefile", "disk.c", "disk.h",
                                                        "disk_lanes.c", "main.c"]
    subprocess.run(["make", "-s"], cwd=folder, check=True, capture_output=True)
    result = subprocess.run(["./example"], cwd=folder, capture_output=True, text=True, check=True)
    matrices = parse_example(result.stdout)
    A, B = disk.linearize(*op)
    # same source, same compiler, same flags: identical bits
    assert np.array_equal(matrices["A"], A)
    assert matrices["B"].shape == B.shape


def test_exported_folder_builds_with_cmake(disk_export, tmp_path):
    folder, _ = disk_export
    if shutil.which("cmake") is None:
        pytest.skip("cmake not installed")
    subprocess.run(["cmake", "-S", str(folder), "-B", str(tmp_path)], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(tmp_path)], check=True, capture_output=True)
    result = subprocess.run([str(tmp_path / "disk_example")], capture_output=True, text=True, check=True)
    assert result.stdout.startswith("status 0")


def test_object_file_allocates_nothing_and_has_no_mutable_globals(disk_export, tmp_path):
    folder, _ = disk_export
    subprocess.run(["cc", *STRICT, "-O2", "-c", str(folder / "disk.c"), "-o", str(tmp_path / "disk.o")],
                   check=True)
    symbols = subprocess.run(["nm", "-P", str(tmp_path / "disk.o")], capture_output=True, text=True,
                             check=True).stdout.splitlines()
    undefined = sorted(line.split()[0] for line in symbols if line.split()[1] == "U")
    # data objects must live in read-only sections (.data.rel.ro holds const
    # pointer tables, read-only after relocation)
    table = subprocess.run(["objdump", "-t", str(tmp_path / "disk.o")], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    objects = [line.split() for line in table if re.search(r"\sO\s", line)]
    writable = [o for o in objects if not re.match(r"\.(rodata|data\.rel\.ro)", o[-3])]
    assert objects and writable == [], f"global or static mutable data: {writable}"
    allocation = {"malloc", "calloc", "realloc", "free", "alloca", "aligned_alloc", "posix_memalign"}
    assert not allocation & set(undefined), undefined
    math_only = {"sin", "cos", "tan", "sqrt", "pow", "exp", "log", "atan2", "asin", "acos", "atan",
                 "fabs", "sinh", "cosh", "tanh", "cbrt", "hypot", "sincos",
                 # calls the compiler itself may emit for copy loops
                 "memcpy", "memmove", "memset"}
    assert set(undefined) <= math_only, f"unexpected dependencies: {set(undefined) - math_only}"
    defined = {line.split()[0] for line in symbols if line.split()[1] in "TR"}
    assert all(name.startswith("disk_") for name in defined), defined


def driver_flags(name, folder, *options):
    """The flags of the driver (and the model) for model ``name`` whose header is in ``folder``."""
    return ["-std=c99", "-Wall", "-Wextra", "-pedantic", *options, "-pthread", f"-DPREFIX={name}",
            f"-DUPREFIX={name.upper()}", f'-DHEADER="{name}.h"', f"-I{folder}"]


def compile_driver(module, tmp_path, extra_flags, lanes="native"):
    """The driver with the model's C; ``lanes``: the lane code linked too,
    compiled for this machine's target ("native", as the module is), for the
    compiler's default target ("portable": valgrind knows no AVX-512), or
    not at all (None: the batches run one point at a time)."""
    name = module.name
    folder = package_dir(module)
    flags = driver_flags(name, folder, "-g", "-O1")
    binary = tmp_path / f"driver_{name}"
    sources = [str(DRIVER), str(folder / f"{name}.c")]
    if lanes:
        target = lane_target()
        lane_flags = [f for f in target.flags if not f.startswith(("-march", "-mprefer"))] \
            if lanes == "portable" else list(target.flags)
        objects = tmp_path / "lanes.o"
        subprocess.run(["cc", *lane_flags, *flags, *extra_flags, f"-D{name.upper()}_LANES_SIMD", "-c",
                        str(folder / f"{name}_lanes.c"), "-o", str(objects)], check=True, capture_output=True)
        flags.append(f"-D{name.upper()}_LANES_KERNELS")
        if lanes == "native" and target.level:
            flags.append(f"-D{name.upper()}_LANES_ISA={target.level}")
        sources.append(str(objects))
    subprocess.run(["cc", *flags, *extra_flags, *sources, "-o", str(binary), "-lm"], check=True,
                   capture_output=True)
    return binary


def parse_driver(output):
    values = {}
    point = None
    for line in output.splitlines():
        label, *rest = line.split()
        if label == "point":
            point = int(rest[0])
        elif label in ("q", "u", "r", "A", "B"):
            values[(point, label)] = np.array(rest, dtype=float)
        else:
            values[label] = np.array(rest, dtype=float)
    return values


def check_driver_against_python(module, output, exact=True):
    """The driver's results equal the module's: bit for bit when both were
    compiled alike, else to rounding (other flags, or the fallback path)."""
    values = parse_driver(output)
    assert values["failures"][0] == 0
    nx, nr = module.nx, module.nr
    for point in range(3):
        q, u, r = (values[(point, k)] for k in ("q", "u", "r"))
        A, B = module.linearize(q, u, r, t=0.25)
        A_c, B_c = values[(point, "A")].reshape(nx, nx), values[(point, "B")].reshape(nx, nr)
        if exact:
            assert np.array_equal(A_c, A) and np.array_equal(B_c, B)
        else:
            np.testing.assert_allclose(A_c, A, rtol=1e-9, atol=1e-9 * np.abs(A).max())
            np.testing.assert_allclose(B_c, B, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(B).max(initial=0.0)))
    # the local form at point 0 (the fallback build's SVD path has other
    # orthonormal bases of the same spaces: compared through R = N_c^T N)
    local = module.linearize_local(values[(0, "q")], values[(0, "u")], values[(0, "r")], t=0.25)
    T_c = values["local_T"].reshape(module.nq + module.nu, local.nx)
    A_c = values["local_A"].reshape(local.nx, local.nx)
    if exact:
        assert np.array_equal(T_c, local.embedding) and np.array_equal(A_c, local.A)
        assert np.array_equal(values["sigma"], np.concatenate([local.sigma_c, local.sigma_v]))
    else:
        y, nq = module.nq - local.rank_c, module.nq
        R = np.zeros((local.nx, local.nx))
        R[:y, :y] = T_c[:nq, :y].T @ local.N_q
        R[y:, y:] = T_c[nq:, y:].T @ local.N_u
        np.testing.assert_allclose(R.T @ R, np.eye(local.nx), atol=1e-9)
        np.testing.assert_allclose(A_c, R @ local.A @ R.T, rtol=0, atol=1e-9 * np.abs(local.A).max())
        np.testing.assert_allclose(values["sigma"], np.concatenate([local.sigma_c, local.sigma_v]),
                                   rtol=1e-12)


@pytest.mark.parametrize("model", ["disk", "bicycle"])
def test_driver_under_sanitizers(request, tmp_path, model):
    """Unoptimized (-O0: the sanitizers see every access as written; at -O1
    GCC took minutes to instrument the straight-line code), the disk with its
    lane code, the bicycle without (its batches one point at a time: its lane
    code, half a megabyte of loop bodies, would add half a minute). Its lanes
    come from the disk's template (checked here), run under valgrind below,
    and equal single calls bit for bit (tests/test_lanes.py)."""
    module = request.getfixturevalue(model)
    sanitizers = ["-O0", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                  "-fno-omit-frame-pointer"]
    binary = compile_driver(module, tmp_path, sanitizers, lanes="native" if model == "disk" else None)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1")
    result = subprocess.run([str(binary)], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""
    assert "completed 16" in result.stdout
    check_driver_against_python(module, result.stdout, exact=False)


# PIVOT_TAU = 1e300 rejects every static pivot that has another candidate in its
# column, so the straight-line code falls back to the general path (dense LU
# with partial pivoting on arrays whose structural zeros are written late):
# both paths run under valgrind, which reports any read of an unwritten entry.
# The lane code (vectorized for the default target) is linked in the disk's
# (its straight-line case runs the lanes, its fallback case lanes whose checks
# fail falling back point by point), not in the bicycle's: its lane code is a
# compile of half a minute and more, from the same template, and its lanes
# equal single calls bit for bit (tests/test_lanes.py).
@pytest.mark.parametrize("model, path", [("disk", "straight-line"), ("disk", "fallback"),
                                         ("bicycle", "straight-line"), ("bicycle", "fallback")])
def test_driver_under_valgrind(request, tmp_path, model, path):
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind not installed")
    module = request.getfixturevalue(model)
    flags = [] if path == "straight-line" else [f"-D{model.upper()}_PIVOT_TAU=1e300"]
    lanes = None if model == "bicycle" else "portable"
    binary = compile_driver(module, tmp_path, flags, lanes=lanes)
    result = subprocess.run(["valgrind", "--error-exitcode=99", "--leak-check=full", "--quiet", str(binary)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    check_driver_against_python(module, result.stdout, exact=path == "straight-line" and model == "disk")


def driver_with_library(module, folder, tmp_path):
    """The driver linked with the model's library that the exported
    Makefile built in ``folder`` (its lane width)."""
    name = module.name
    width = re.search(r"^LANE_WIDTH \?= (\d+)$", (folder / "Makefile").read_text(), re.M).group(1)
    binary = tmp_path / f"driver_{name}"
    subprocess.run(["cc", *driver_flags(name, folder, "-O2"), f"-D{name.upper()}_LANES={width}",
                    f"-D{name.upper()}_LANES_KERNELS", str(DRIVER), str(folder / f"lib{name}.a"),
                    "-o", str(binary), "-lm"], check=True, capture_output=True)
    return binary


@pytest.mark.parametrize("model", ["disk", "bicycle"])
def test_standalone_c_matches_python_module_bit_for_bit(request, tmp_path, model):
    """Built with the flags the module uses (-O2 -std=c99), the C gives the
    same bits: the disk compiled here with its lane code for this machine,
    the bicycle as its exported Makefile builds it (portable lane code)."""
    module = request.getfixturevalue(model)
    if model == "bicycle":
        binary = driver_with_library(module, request.getfixturevalue("bicycle_export")[0],
                                     tmp_path)
    else:
        binary = compile_driver(module, tmp_path, ["-O2"])
    result = subprocess.run([str(binary)], capture_output=True, text=True, check=True)
    check_driver_against_python(module, result.stdout)
    values = parse_driver(result.stdout)
    qd, ud = module.state_derivative(values[(0, "q")], values[(0, "u")], values[(0, "r")], t=0.25)
    assert np.array_equal(values["ud"], ud) and np.array_equal(values["qd"], qd)


def test_sincos_gives_the_bits_of_sin_and_cos(disk, tmp_path):
    """Where the disk's scalar code needs the sine and the cosine of one
    argument, one call computes both (glibc's sincos): the driver's output,
    every A and B of its points, is the same text as with the two calls
    (DISK_NO_SINCOS)."""
    assert "cos_and_sin(q[2], &fused_" in (package_dir(disk) / "disk.c").read_text()
    printed = []
    for flags, folder in (([], "fused"), (["-DDISK_NO_SINCOS"], "apart")):
        (tmp_path / folder).mkdir()
        binary = compile_driver(disk, tmp_path / folder, ["-O2", *flags], lanes=None)
        printed.append(subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout)
    assert printed[0] == printed[1]


def test_exported_bicycle_example_builds_and_matches_python(bicycle, bicycle_export):
    folder, op = bicycle_export
    result = subprocess.run(["./example"], cwd=folder, capture_output=True, text=True, check=True)
    matrices = parse_example(result.stdout)
    A, B = bicycle.linearize(*op)
    assert np.array_equal(matrices["A"], A) and np.array_equal(matrices["B"], B)


def test_header_documents_the_interface(disk):
    header = (package_dir(disk) / "disk.h").read_text()
    for needle in ("#define DISK_NQ 6", "#define DISK_NX 8", "DISK_WORKSPACE_SIZE", "row-major",
                   "DISK_ERR_SINGULAR_CONFIGURATION_PARTITION", "extern \"C\"", "q1, q2, q3, q4, q5, q6",
                   "concurrently", "no function allocates"):
        assert needle in header, needle
    codes = re.findall(r"#define DISK_(?:OK|ERR_\w+) (\d+)", header)
    assert sorted(map(int, codes)) == list(range(len(codes)))
