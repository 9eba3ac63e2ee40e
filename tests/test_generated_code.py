"""The generated artifact: golden files, strict compilation, determinism,
the expression printer, batches."""

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import sympy as sm

import codegen
from codegen.printer import ModelCodePrinter

GOLDEN = Path(__file__).parent / "golden"
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]


def cc():
    return os.environ.get("CC", "cc")


@pytest.mark.parametrize("file_name", ["disk.c", "disk.h", "disk_lanes.c", "codegen-table.c", "codegen-kernel.h"])
def test_golden_files(disk_sources, update_golden, file_name):
    """A change to the generator shows up as a readable diff of these files.
    Regenerate with: pytest tests/test_generated_code.py --update-golden"""
    text = disk_sources.files[file_name]
    golden = GOLDEN / file_name
    if update_golden:
        golden.write_text(text)
    assert golden.exists(), f"missing {golden}; run pytest --update-golden"
    assert text == golden.read_text(), f"{file_name} differs from {golden}; review, then --update-golden"


def test_generation_is_deterministic_across_processes(disk_sources, tmp_path):
    """Same model, same bytes, whatever the hash seed of the process."""
    script = textwrap.dedent("""
        import sys
        from codegen.models import disk
        from codegen.derive import derive
        from codegen.emit import emit
        files = emit(derive(disk.make_model())).files
        sys.stdout.write(files["disk.c"] + files["disk.h"] + files["disk_lanes.c"])
    """)
    outputs = []
    for seed in ("1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                env=env, check=True)
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1] == (disk_sources.files["disk.c"] + disk_sources.files["disk.h"]
                                        + disk_sources.files["disk_lanes.c"])


def test_sine_and_cosine_of_an_argument_are_one_call(disk_sources):
    """The scalar code computes the sine and the cosine of one argument with
    one call of the C library (sin_and_cos, cos_and_sin), also where they are
    first needed in different parts (the disk's cos(q1) in the residuals and
    sin(q1) in the constraint Jacobians: the later part loads the carried
    value): every argument of the evaluation's sines and cosines is the
    argument of one call."""
    text = disk_sources.files["disk.c"]
    statements = "\n".join(line for line in text.splitlines() if line.lstrip().startswith("const double x"))
    calls = re.findall(r"\b(sin|cos|sin_and_cos|cos_and_sin)\(([^,()]+)[,)]", statements)
    arguments = [argument for _, argument in calls]
    assert arguments, "no sine or cosine found in disk.c"
    repeated = sorted({a for a in arguments if arguments.count(a) > 1})
    assert not repeated, f"sines and cosines of {repeated} in more than one call: {calls}"
    assert {"sin_and_cos", "cos_and_sin"} & {name for name, _ in calls}


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_strict_compilation(disk_sources, tmp_path, compiler):
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} not installed")
    for name in ("disk.c", "disk.h", "disk_lanes.c", "codegen-kernel.h", "codegen-table.c"):
        (tmp_path / name).write_text(disk_sources.files[name])
    # the model's C alone, and with the lane code: portable (plain loops), and
    # vectorized for this machine's target as the build compiles it
    lane = codegen.compile.lane_target()
    targets = [flag for flag in lane.flags if flag.startswith(("-march", "-mprefer"))]
    for source, flags in (("disk.c", ["-O2"]),
                          ("disk.c", ["-O2", "-DDISK_LANES_KERNELS", "-DDISK_LANES_ISA=4"]),
                          ("disk_lanes.c", ["-O2"]),
                          ("disk_lanes.c", ["-O3", "-fopenmp-simd", "-DDISK_LANES_SIMD", *targets]),
                          ("codegen-table.c", ["-O2"])):
        result = subprocess.run([compiler, *STRICT, *flags, "-c", source, "-o", "out.o"],
                                cwd=tmp_path, capture_output=True, text=True)
        assert result.returncode == 0, (source, flags, result.stderr)
        assert result.stderr == "", (source, flags)


def test_kernel_compiles_without_a_warning(tmp_path):
    """The Python kernel's C, as the build translates and compiles it, gives
    the compiler nothing to warn of (its warnings are not shown by a build:
    here they fail). A const pointer taken as a mutable one did, twice."""
    import sysconfig

    from codegen.emit import emit_kernel

    pyx_text, header = emit_kernel()
    (tmp_path / "_kernel.pyx").write_text(pyx_text)
    (tmp_path / "codegen-kernel.h").write_text(header)
    subprocess.run([sys.executable, "-m", "cython", "-3", "--fast-fail", "--module-name", "_kernel", "-o",
                    "kernel.c", "_kernel.pyx"], cwd=tmp_path, check=True, capture_output=True)
    result = subprocess.run([os.environ.get("CC", "cc"), "-O0", "-fPIC", "-I", sysconfig.get_paths()["include"],
                             "-I", np.get_include(), "-I", ".", "-DNPY_NO_DEPRECATED_API=NPY_1_7_API_VERSION",
                             "-c", "kernel.c", "-o", "kernel.o"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0 and "warning" not in result.stderr, result.stderr


def test_kernel_is_the_same_for_every_model(disk_sources):
    """The kernel's text names no model (it is compiled once for all); each
    model's codegen-table.c defines what its header declares."""
    from codegen.emit import emit_kernel

    pyx_text, header = emit_kernel()
    assert emit_kernel() == (pyx_text, header)
    assert "disk" not in pyx_text.lower() and "disk" not in header.lower()
    assert disk_sources.files["codegen-kernel.h"] == header
    table = disk_sources.files["codegen-table.c"]
    declared = set(re.findall(r"CODEGEN_KERNEL_API [^;(]*?\b(codegen_\w+)\s*[(;\[]", header))
    defined = set(re.findall(r"^[^\s/#*][^;(=]*?\b(codegen_\w+)\s*(?:\(| =|\[)", table, re.M))
    assert declared and declared == defined, declared ^ defined


def test_header_compiles_as_cpp(disk_sources, tmp_path):
    if shutil.which("g++") is None:
        pytest.skip("g++ not installed")
    (tmp_path / "disk.h").write_text(disk_sources.files["disk.h"])
    (tmp_path / "use.cpp").write_text('#include "disk.h"\nint main() { disk_workspace w; (void)w; return 0; }\n')
    result = subprocess.run(["g++", "-Wall", "-Wextra", "-Werror", "-c", "use.cpp"], cwd=tmp_path,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_printer_output_evaluates_like_sympy(tmp_path):
    """Printed C of tricky expressions (powers inside quotients, negative and
    half-integer exponents, nested functions) computes what SymPy computes."""
    x, y, z = sm.symbols("x y z", real=True)
    expressions = [y / x**2, x**3 * y, 1 / x, y / (x + y)**2, x**-2 + 1, 1 / sm.sqrt(x),
                   x**sm.Rational(5, 2), sm.sin(x)**2 / sm.cos(y)**3, (x - y)**4 / z,
                   sm.tan(x) * sm.atan2(y, z), -x**2, sm.Rational(1, 3) * x / y**-2,
                   sm.exp(-x**2) * sm.log(z), sm.Abs(y - x)**3, x**y, sm.pi * x]
    printer = ModelCodePrinter({x: "v[0]", y: "v[1]", z: "v[2]"})
    body = "\n".join(f"    out[{i}] = {printer.doprint(e)};" for i, e in enumerate(expressions))
    source = textwrap.dedent("""\
        #include <math.h>
        #include <stdio.h>
        int main(void) {
            double v[3], out[%d];
            while (scanf("%%lf %%lf %%lf", &v[0], &v[1], &v[2]) == 3) {
        %s
                for (int i = 0; i < %d; ++i) printf("%%.17g\\n", out[i]);
            }
            return 0;
        }
        """) % (len(expressions), body, len(expressions))
    (tmp_path / "check.c").write_text(source)
    subprocess.run([cc(), "-std=c99", "-O2", "check.c", "-o", "check", "-lm"], cwd=tmp_path, check=True)
    rng = np.random.default_rng(7)
    points = rng.uniform(0.3, 2.0, size=(5, 3))
    stdin = "\n".join(" ".join(repr(float(v)) for v in p) for p in points)
    result = subprocess.run(["./check"], cwd=tmp_path, input=stdin, capture_output=True, text=True, check=True)
    values = np.array(result.stdout.split(), dtype=float).reshape(len(points), len(expressions))
    for point, row in zip(points, values):
        expected = [float(e.subs({x: point[0], y: point[1], z: point[2]}).evalf(30)) for e in expressions]
        assert row == pytest.approx(expected, rel=1e-13)


def test_batch_equals_single_calls(disk):
    rng = np.random.default_rng(3)
    q_ind, u_ind = rng.normal(size=(4, 3, 6)), rng.normal(size=(4, 3, 6))
    p = disk.default_parameters * [1.0, 1.3, 1.0]
    q, u = disk.complete(q_ind, u_ind, p=p)
    assert q.shape == (4, 3, 6)
    A, B = disk.linearize(q, u, p=p, t=np.linspace(0, 1, 3))
    assert A.shape == (4, 3, 8, 8) and B.shape == (4, 3, 8, 0)
    for i in range(4):
        for j in range(3):
            A1, _ = disk.linearize(q[i, j], u[i, j], p={"r": 1.3})
            assert np.array_equal(A1, A[i, j])


def test_full_matrices_contain_the_reduced_ones(disk):
    op = codegen.operating_point("disk", "steady_turn", lean=0.3, spin_rate=-3.0)
    A, _ = disk.linearize(*op)
    A_full, B_full = disk.linearize_full(*op)
    assert A_full.shape == (12, 8) and B_full.shape == (12, 0)
    rows = [disk.full_state_names.index(name) for name in disk.state_names]
    assert np.array_equal(A_full[rows], A)


def test_dependent_rows_follow_the_constraints(disk):
    """Rows of dependent speeds in A' are the derivative of u_d = u_d(q_i, u_i):
    perturbing along A' keeps f_v satisfied to first order."""
    op = codegen.operating_point("disk", "steady_turn", lean=0.3, spin_rate=-3.0)
    A_full, _ = disk.linearize_full(*op)
    qd, ud = disk.state_derivative(op.q, op.u)
    # d/dt f_v = 0 along the motion: check via the speed rows of the state derivative
    h = 1e-7
    q2, u2 = op.q + h * qd, op.u + h * ud
    _, f_v = disk.constraint_residuals(q2, u2)
    assert np.abs(f_v).max() < 1e-12


def test_straight_line_path_agrees_with_general_path(disk):
    """The default partition runs generated straight-line code with static
    pivots; the same partition passed to the C as an index array runs the
    template's dense LU with partial pivoting. Different arithmetic, same
    results to rounding. (The Python API sends an explicit default partition
    to the C as NULL, the fast path, so the kernel is called directly here.)"""
    rng = np.random.default_rng(7)
    n = 40
    q = rng.uniform(-1.5, 1.5, (n, disk.nq))
    u = rng.uniform(-3, 3, (n, disk.nu))
    q, u = disk.complete(q, u)
    results = {}
    for label, dq, du in (("straight-line", None, None),
                          ("general", np.array(disk.dependent_q, dtype=np.intc),
                           np.array(disk.dependent_u, dtype=np.intc))):
        A_full = np.empty((n, (disk.nq + disk.nu) * disk.nx))
        B_full = np.empty((n, (disk.nq + disk.nu) * disk.nr))
        condition = np.empty((n, 2))
        status, _ = disk._kernel.linearize(
            n, np.zeros(1), np.ascontiguousarray(q), np.ascontiguousarray(u), np.zeros((1, disk.nr)),
            disk.default_parameters[None].copy(), dq, du, 1e-8, False, False, 0.0, -1.0,
            None, None, A_full, B_full, None, None, condition, None, None, None)
        assert status == 0
        results[label] = (A_full, condition)
    fast_A, fast_condition = results["straight-line"]
    general_A, general_condition = results["general"]
    # the straight-line code does not estimate the condition (0) and takes most
    # points (the others fail its pivot checks); the general path estimates it
    assert np.mean(fast_condition[:, 0] == 0.0) > 0.5 and np.all(general_condition > 0.0)
    assert not np.array_equal(fast_A, general_A)      # really two computations
    scale = np.abs(general_A).max()
    np.testing.assert_allclose(fast_A, general_A, rtol=0, atol=1e-12 * scale)


def test_every_static_pivot_is_checked_before_it_divides(disk_sources):
    """The straight-line code returns to the general path when a static pivot
    fails its check, before 1.0 / pivot: no division by zero on the way to the
    fallback (which traps where floating-point exceptions are enabled)."""
    lines = disk_sources.files["disk.c"].splitlines()
    reciprocals = [(k, m.group(1)) for k, line in enumerate(lines)
                   for m in [re.match(r"\s*const double v\d+ = 1\.0 / (.+);$", line)] if m]
    assert reciprocals
    # the local chart's Cholesky factors: 1 / sqrt(d), d checked positive first
    roots = {m.group(1): (k, m.group(2)) for k, line in enumerate(lines)
             for m in [re.match(r"\s*const double (v\d+) = sqrt\((.+)\);$", line)] if m}
    assert roots
    for k, root in reciprocals:
        if root not in roots:
            continue
        at, square = roots[root]
        checks = [line for line in lines[:at] if re.match(rf"\s*if \(!\({square} > ", line)]
        assert checks and "return PIVOT_REJECTED;" in checks[-1], square
    for k, pivot in [(k, pivot) for k, pivot in reciprocals if pivot not in roots]:
        # the partition blocks' pivots pass the stricter CONDITION_RTOL
        checks = [line for line in lines[:k] if f"if (!(fabs({pivot}) > SINGULAR_RTOL" in line
                  or f"if (!(fabs({pivot}) > CONDITION_RTOL" in line]
        assert checks and "return PIVOT_REJECTED;" in checks[-1], pivot


def test_status_codes_have_one_source(disk, disk_sources):
    """codegen/status.py is rendered into the header, the C messages and the
    Python exceptions."""
    from codegen import errors, runtime
    from codegen.status import STATUSES
    header = disk_sources.files["disk.h"]
    for status in STATUSES:
        assert f"#define DISK_{status.macro_suffix} {status.code}\n" in header
        assert disk._kernel.status_message(status.code) == status.message
        if status.code:
            assert runtime.diagnostics.EXCEPTIONS[status.code] is getattr(errors, status.exception)


def test_one_procedure_gives_both_renderings(disk_sources):
    """Each factorization of codegen/procedure.py appears in the straight-line
    code (its scale and pivot checks) and in the general path (lu_factor)."""
    from codegen.procedure import Factor, procedure
    text = disk_sources.files["disk.c"]
    factors = [step for stage in procedure(False) for step in stage.steps if isinstance(step, Factor)]
    assert [f.name for f in factors] == ["qq", "uu", "c", "v"]
    for factor in factors:
        assert f"double scale_{factor.name} = " in text
        assert f"w->pivot_{factor.name}, " in text
        assert f"DISK_ERR_{factor.status});" in text
