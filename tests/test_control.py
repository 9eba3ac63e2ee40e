"""module.state_space: the linearization as a python-control StateSpace
(issue 12 item 3), and what a person sees of long builds and sweeps (item 5).

References, independent of the generated code: the benchmark bicycle's
canonical matrices (tests/bicycle_benchmark.py) with SciPy's Riccati solver;
the disk's constraints in closed form (q6 = -r cos q2; u4 = -r u2 cos q3,
u5 = r u1, u6 = -r u2 sin q3); the bicycle's front-contact constraint
differentiated by SymPy; and linearize_full, whose rows are the time
derivatives of the outputs.
"""

import io
import math
import os
import pty
import re
import select
import subprocess
import sys
import time

import numpy as np
import pytest

import bicycle_benchmark as bench
import codegen
from codegen.errors import ConstraintViolationError, InputError

control = pytest.importorskip("control")
scipy_linalg = pytest.importorskip("scipy.linalg")

ROLL_STEER = ["roll", "steer", "roll_rate", "steer_rate"]


def upright(v):
    return codegen.operating_point("bicycle", "upright", v=v)


# -- item 3: python-control out ----------------------------------------------------------------

def test_default_system_is_the_linearization_with_named_states_inputs_outputs(bicycle):
    op = upright(3.0)
    system = bicycle.state_space(op.q, op.u, op.r, op.p)
    A, B = bicycle.linearize(*op)
    assert isinstance(system, control.StateSpace)
    assert system.state_labels == list(bicycle.state_names)
    assert system.input_labels == ["T_roll", "T_steer"]
    assert system.output_labels == list(bicycle.state_names)      # default outputs: the states
    assert np.array_equal(system.A, A) and np.array_equal(system.B, B)
    assert np.array_equal(system.C, np.eye(bicycle.nx))
    assert system.D.shape == (bicycle.nx, 2) and not system.D.any()
    assert system.name == "bicycle"


@pytest.mark.parametrize("v", [0.0, 2.0, 5.0, 8.0])
def test_roll_steer_poles_match_the_benchmark(bicycle, v):
    op = upright(v)
    system = bicycle.state_space(op.q, op.u, states=ROLL_STEER, inputs=["T_steer"])
    assert system.state_labels == ROLL_STEER and system.input_labels == ["T_steer"]
    assert system.A.shape == (4, 4) and system.B.shape == (4, 1)
    assert system.C.shape == (4, 4) and system.D.shape == (4, 1)
    par = bench.benchmark_parameters()
    np.testing.assert_allclose(system.A, bench.state_matrix(par, v), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(system.B, bench.input_matrix(par)[:, [1]], rtol=1e-10, atol=1e-12)
    expected = bench.eigenvalues(par, v)
    np.testing.assert_allclose(np.sort_complex(control.poles(system)), expected,
                               rtol=1e-9, atol=1e-9 * np.abs(expected).max())


@pytest.mark.parametrize("v", [1.0, 2.0, 3.0, 4.0])
def test_lqr_steer_torque_stabilizes_below_the_weave_speed(bicycle, v):
    """control.lqr on the generated system against the continuous Riccati
    equation of the benchmark's matrices, solved by SciPy."""
    op = upright(v)
    plant = bicycle.state_space(op.q, op.u, states=ROLL_STEER, inputs=["T_steer"])
    assert np.max(control.poles(plant).real) > 0          # unstable below 4.29 m/s
    Q, R = np.eye(4), np.array([[1.0]])
    K, S, closed_loop = control.lqr(plant, Q, R)
    par = bench.benchmark_parameters()
    A_ref, B_ref = bench.state_matrix(par, v), bench.input_matrix(par)[:, [1]]
    S_ref = scipy_linalg.solve_continuous_are(A_ref, B_ref, Q, R)
    K_ref = np.linalg.solve(R, B_ref.T @ S_ref)
    np.testing.assert_allclose(K, K_ref, rtol=1e-7)
    expected = np.sort_complex(np.linalg.eigvals(A_ref - B_ref @ K_ref))
    np.testing.assert_allclose(np.sort_complex(closed_loop), expected, rtol=1e-7)
    assert np.max(expected.real) < -0.5                   # well damped with Q = I, R = 1
    # the closed loop formed by python-control from the named system
    feedback = control.ss(plant.A - plant.B @ K, plant.B, plant.C, plant.D)
    np.testing.assert_allclose(np.sort_complex(control.poles(feedback)), expected, rtol=1e-7)


def _disk_rows(q, u, states, r=1.0):
    """Closed-form d(q6, u4, u5, u6)/d x of the disk (r = 1 by default)."""
    q2, q3, u1, u2 = q[1], q[2], u[0], u[1]
    rows = np.zeros((4, len(states)))
    rows[0, states.index("q2")] = r * math.sin(q2)
    rows[1, states.index("q3")] = r * u2 * math.sin(q3)
    rows[1, states.index("u2")] = -r * math.cos(q3)
    rows[2, states.index("u1")] = r
    rows[3, states.index("q3")] = -r * u2 * math.cos(q3)
    rows[3, states.index("u2")] = -r * math.sin(q3)
    return rows


def test_outputs_of_dependent_coordinates_and_speeds_of_the_disk(disk):
    rng = np.random.default_rng(12)
    for _ in range(5):
        q, u = disk.complete(rng.uniform(-1.5, 1.5, 6), rng.uniform(-3, 3, 6))
        system = disk.state_space(q, u, outputs=["q6", "u4", "u5", "u6", "q2", "u3"])
        states = system.state_labels
        assert states == list(disk.state_names) and system.input_labels == []
        assert system.output_labels == ["q6", "u4", "u5", "u6", "q2", "u3"]
        assert system.C.shape == (6, 8) and system.D.shape == (6, 0)
        np.testing.assert_allclose(system.C[:4], _disk_rows(q, u, states), rtol=0, atol=1e-11)
        assert np.array_equal(system.C[4], np.eye(8)[states.index("q2")])
        assert np.array_equal(system.C[5], np.eye(8)[states.index("u3")])


def test_dependent_output_rows_differentiate_to_the_linearize_full_rows(disk):
    """At a steady turn f_c depends only on the lean, which stays constant: so
    d/dt (C_q6 x) = C_q6 A x is the q6 row of linearize_full (q6' = r u1 sin q2)."""
    op = codegen.operating_point("disk", "steady_turn", lean=0.3, spin_rate=-3.0)
    system = disk.state_space(op.q, op.u, outputs=["q6", "u1"])
    A_full, _ = disk.linearize_full(*op)
    row = A_full[disk.full_state_names.index("q6")]
    assert abs(row[disk.state_names.index("u1")] - math.sin(0.3)) < 1e-13
    np.testing.assert_allclose(system.C[0] @ system.A, row, rtol=0, atol=1e-12)


def test_bicycle_pitch_and_dependent_rates_at_a_general_point(bicycle):
    """Leaned, steered, accelerating: the pitch row against the front-contact
    constraint differentiated by SymPy; the dependent rates (u = q' for the
    bicycle) against the coordinate rows of linearize_full, which are d q'/d x."""
    import sympy as sm

    from codegen.models import bicycle as model

    op = codegen.operating_point("bicycle", "general")
    outputs = ["pitch", "pitch_rate", "yaw_rate", "front_wheel_rate", "x_rate", "y_rate"]
    system = bicycle.state_space(op.q, op.u, op.r, op.p, outputs=outputs)
    assert system.output_labels == outputs and system.D.shape == (6, 2) and not system.D.any()
    A_full, B_full = bicycle.linearize_full(*op)
    for k, name in enumerate(outputs[1:], start=1):
        row = bicycle.q_names.index(name[:-len("_rate")])
        scale = np.abs(A_full[row]).max()
        np.testing.assert_allclose(system.C[k], A_full[row], rtol=0, atol=1e-10 * scale)
        assert not B_full[row].any()
    # d pitch/d q_i = -(d f_c/d q_i)/(d f_c/d pitch), symbolically
    kin = model._kinematics()
    values = dict(zip(bicycle.q_names, op.q))
    substitutions = {kin.q[name]: values[name] for name in model.COORDINATES}
    substitutions.update({kin.p[name]: value for name, value in model.DEFAULT_PARAMETERS.items()})
    f_c = kin.f_c[0]
    d_pitch = float(f_c.diff(kin.q["pitch"]).xreplace(substitutions).evalf())
    expected = np.zeros(bicycle.nx)
    for name in model.COORDINATES:
        if name != "pitch":
            derivative = float(sm.N(f_c.diff(kin.q[name]).xreplace(substitutions)))
            expected[list(bicycle.state_names).index(name)] = -derivative / d_pitch
    assert np.abs(expected).max() > 1e-3                       # a real test: pitch moves
    np.testing.assert_allclose(system.C[0], expected, rtol=0, atol=1e-11)


def test_partition_and_tolerance_are_passed_through(disk):
    op = codegen.operating_point("disk", "steady_turn", lean=0.3, spin_rate=-3.0)
    partition = dict(dependent_q=["q2"], dependent_u=["u1", "u4", "u6"])
    system = disk.state_space(op.q, op.u, outputs=["q2", "q6"], **partition)
    A, _ = disk.linearize(op.q, op.u, **partition)
    states = list(disk.independent_state_names(**partition))
    assert system.state_labels == states and np.array_equal(system.A, A)
    # q2 now dependent: r cos q2 + q6 = 0 gives d q2 = d q6/(r sin q2)
    expected = np.zeros(len(states))
    expected[states.index("q6")] = 1 / math.sin(0.3)
    np.testing.assert_allclose(system.C[0], expected, rtol=1e-11, atol=1e-12)
    assert np.array_equal(system.C[1], np.eye(len(states))[states.index("q6")])
    off = op.q + np.array([0, 0, 0, 0, 0, 1e-6])              # violates f_c by 1e-6
    with pytest.raises(ConstraintViolationError):
        disk.state_space(off, op.u)
    assert disk.state_space(off, op.u, tol=1e-5).nstates == 8


def test_state_space_refuses_what_it_cannot_do(disk, bicycle, monkeypatch):
    op = upright(3.0)
    upright_disk = codegen.operating_point("disk", "upright")[:2]
    with pytest.raises(InputError, match="one operating point"):
        bicycle.state_space(np.tile(op.q, (2, 1)), op.u)
    with pytest.raises(InputError, match="not a coordinate or speed"):
        bicycle.state_space(op.q, op.u, outputs=["T_steer"])
    with pytest.raises(InputError, match="not an input"):
        bicycle.state_space(op.q, op.u, inputs=["T_yaw"])
    with pytest.raises(InputError, match="not an independent state"):
        bicycle.state_space(op.q, op.u, states=["pitch"])
    # yaw's rate depends on steer: it cannot be kept without steer
    with pytest.raises(InputError, match="depends on steer"):
        bicycle.state_space(op.q, op.u, states=["yaw", "roll", "roll_rate"])
    with pytest.raises(InputError, match="output x_rate depends on the state rear_wheel_rate"):
        bicycle.state_space(op.q, op.u, states=ROLL_STEER, outputs=["yaw_rate", "x_rate"])
    try:             # python-control 0.10.2 cannot hold one output without inputs (#1176)
        assert disk.state_space(*upright_disk, outputs=["q6"]).C.shape == (1, 8)
    except InputError as error:
        assert "#1176" in str(error) and "two outputs" in str(error)
    monkeypatch.setitem(sys.modules, "control", None)       # as if not installed
    with pytest.raises(ImportError, match="pip install control"):
        disk.state_space(*upright_disk)


def test_generated_package_exposes_state_space(disk):
    assert disk.state_space == disk.model.state_space
    op = codegen.operating_point("disk", "upright", v=0.5)
    poles = np.sort_complex(control.poles(disk.state_space(op.q, op.u)))
    lam = 2 * math.sqrt(1 - 3 * 0.25) / math.sqrt(5)            # Peterson's closed form
    np.testing.assert_allclose(poles[[0, -1]].real, [-lam, lam], rtol=1e-12)


# -- item 5: a person's view -----------------------------------------------------------------

def test_live_progress_ticks_and_keeps_each_stage_duration():
    from codegen.__main__ import _LiveProgress

    stream = io.StringIO()
    progress = _LiveProgress(stream, interval=0.05, width=60)
    progress("forming the equations")
    time.sleep(0.3)                       # a long stage: its time ticks
    progress("compiling bicycle.c and the wrapper with cc, a message longer than the terminal")
    progress.close()
    text = stream.getvalue()
    lines = text.split("\n")
    assert len(lines) == 3 and lines[2] == ""              # two finished stages, nothing open
    duration = re.search(r"forming the equations  \((\d+\.\d) s\)\x1b\[K$", lines[0])
    assert duration and float(duration.group(1)) >= 0.25
    assert re.search(r"forming the equations  \.\.\. \d+ s\x1b\[K\r", lines[0])  # ticked
    assert "\r  [   0." in lines[1] and lines[1].rstrip("\x1b[K").endswith(" s)")
    final = lines[1].rsplit("\r", 1)[1].replace("\x1b[K", "")
    assert len(final) <= 59 and "..." in final              # cut to the terminal's width


def _run_in_pty(argv, env, timeout=180):
    """Run argv with stdout and stderr on a pseudo-terminal; (status, output)."""
    pid, fd = pty.fork()
    if pid == 0:                                         # child
        try:
            os.execvpe(argv[0], argv, env)
        finally:
            os._exit(127)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            try:
                data = os.read(fd, 4096)
            except OSError:                              # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    else:
        os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode(errors="replace")


def test_build_reports_every_stage_at_a_terminal_and_is_quiet_in_a_pipe(tmp_path):
    # a cold build (no compile cache: Cython and the compiler run)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "CODEGEN_COMPILE_CACHE")}
    env["TERM"] = "xterm"
    command = [sys.executable, "-m", "codegen", "build", "disk", "--force",
               "--output-dir", str(tmp_path / "gen")]
    status, output = _run_in_pty(command, env)
    assert status == 0, output
    finished = re.findall(r"\r  \[ *[\d.]+ s\] ([^\r\n]*?)  \(([\d.]+) s\)", output)
    stages = [stage for stage, _ in finished]
    for expected in ("forming the equations: disk.py", "constraint Jacobians",
                     "common subexpression elimination", "straight-line numeric stage",
                     "cython: translating and compiling the Python kernel",
                     "importing the compiled module"):
        assert any(stage.startswith(expected) for stage in stages), (expected, stages)
    assert "eigenvalues of A at upright(v=0.5)" in output
    # not at a terminal (CI unset all the same): no progress, the report only
    piped = subprocess.run(command[:-3] + command[-2:], capture_output=True, text=True, env=env)
    assert piped.returncode == 0 and piped.stderr == ""
    assert "eigenvalues of A" in piped.stdout and "\r" not in piped.stdout


def test_sweep_figure_says_what_is_shown(disk):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from codegen.sweep import sweep, sweep_figure

    result = sweep(disk, lambda **kw: codegen.operating_point("disk", "upright", **kw), "v",
                   0.0, 1.2, 25)
    fig = sweep_figure(result, "disk: eigenvalues vs forward speed", "forward speed v", "m/s")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "forward speed v [m/s]"
    assert "[1/s]" in ax.get_ylabel() and "[rad/s]" in ax.get_ylabel()
    assert ax.get_title() == "disk: eigenvalues vs forward speed"
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert any(text.startswith("real part") for text in legend)
    assert any(text.startswith("|imaginary part|") for text in legend)
    assert "not drawn: 6 eigenvalues that are 0 at every v" in legend
    assert any(text.startswith("stable") for text in legend)
    notes = [text.get_text() for text in ax.texts]
    assert notes == [" real mode: unstable below \n v = 0.5774 m/s "]
    # the shaded stable range starts at the critical speed 1/sqrt(3)
    spans = [patch.get_x() for patch in ax.patches]
    assert len(spans) == 1 and abs(spans[0] - 1 / math.sqrt(3)) < 1e-9
    plt.close(fig)
