"""Outputs in the model (issue 21, item 1): ``Model(..., outputs={...})``,
``model.outputs(q, u, ...)`` -> (y, C, D) and ``state_space(outputs=[...])``.

References, independent of the generated code: a Cartesian pendulum with a
sideways force reduced by hand to its one independent coordinate (SymPy
forms its Lagrange equation and differentiates the outputs written in the
independent states: C and D exactly), constrained finite differences of y
along the manifold (perturb an independent state, complete the point with
the module's ``complete``, evaluate y again), and, for the rolling disk,
outputs that are coordinates, speeds and their rates, whose rows of C and D
are rows of ``constraint_maps().embedding`` and ``linearize_full``.
"""

import numpy as np
import pytest
import sympy as sm
import sympy.physics.mechanics as me

import codegen
from codegen import Model
from codegen.errors import InputError, ModelError

PARAMETERS = {"m": 1.3, "L": 0.8, "g": 9.81}


def pendulum_model(outputs=None, name="pendulum_outputs"):
    """Bob at (x, y) on a rod of length L, x down (along gravity), y
    sideways, a sideways force F: q = [y, x], u = [uy, ux], x and ux
    dependent (the README's example)."""
    x, y = me.dynamicsymbols("x y")
    ux, uy = me.dynamicsymbols("ux uy")
    F = me.dynamicsymbols("F")
    m, L, g = sm.symbols("m L g")
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    bob = O.locatenew("bob", x * N.x + y * N.y)
    bob.set_vel(N, ux * N.x + uy * N.y)
    kane = me.KanesMethod(
        N, q_ind=[y], u_ind=[uy], kd_eqs=[x.diff() - ux, y.diff() - uy],
        q_dependent=[x], configuration_constraints=[x**2 + y**2 - L**2],
        u_dependent=[ux], velocity_constraints=[x * ux + y * uy])
    kane.kanes_equations([me.Particle("P", bob, m)], [(bob, m * g * N.x + F * N.y)])
    symbols = dict(x=x, y=y, ux=ux, uy=uy, F=F, m=m, L=L, g=g, t=me.dynamicsymbols._t)
    if callable(outputs):
        outputs = outputs(**symbols)
    return Model(kane, parameters={m: PARAMETERS["m"], L: PARAMETERS["L"], g: PARAMETERS["g"]},
                 inputs=[F], name=name, outputs=outputs)


def pendulum_outputs(x, y, ux, uy, F, m, L, g, t):
    """Positions, an angle, accelerations (ud, with the input), a coordinate
    rate (qd), explicit time and a parameter."""
    return {"height": -x, "angle": sm.atan2(y, x), "ax": ux.diff(t), "ay": m * uy.diff(t) + F,
            "kinetic": m * (x.diff(t)**2 + uy**2) / 2, "mixed": sm.sin(t) * L * y + F**2 * ux}


@pytest.fixture(scope="module")
def pendulum(build_dir):
    return codegen.build(pendulum_model(pendulum_outputs), output_dir=build_dir)


def reduced_pendulum():
    """The outputs of :func:`pendulum_outputs` as functions of the
    independent states (Y, UY), the input and time, with the pendulum's
    equation of motion in Y alone (Lagrange, x = sqrt(L^2 - Y^2) on the
    hanging side): C and D are their derivatives. Returns a function of
    (Y, UY, F, t) -> (y, C, D)."""
    Y, UY, F, t = sm.symbols("Y UY F t", real=True)
    m, L, g = (sm.Float(PARAMETERS[k]) for k in ("m", "L", "g"))
    yt = sm.Function("yt")(t)
    xt = sm.sqrt(L**2 - yt**2)
    lagrangian = m * (xt.diff(t)**2 + yt.diff(t)**2) / 2 + m * g * xt
    equation = lagrangian.diff(yt.diff(t)).diff(t) - lagrangian.diff(yt) - F
    Ydd = sm.Symbol("Ydd")
    equation = equation.subs(yt.diff(t, 2), Ydd).subs(yt.diff(t), UY).subs(yt, Y)
    accel_y = sm.solve(equation, Ydd)[0]
    x = sm.sqrt(L**2 - Y**2)
    ux = -Y * UY / x
    accel_x = ux.diff(Y) * UY + ux.diff(UY) * accel_y
    h = sm.Matrix([-x, sm.atan2(Y, x), accel_x, m * accel_y + F, m * (ux**2 + UY**2) / 2,
                   sm.sin(t) * L * Y + F**2 * ux])
    C = h.jacobian([Y, UY])
    D = h.jacobian([F])
    return sm.lambdify((Y, UY, F, t), (h, C, D), "numpy")


def moving_point(model, y=0.35, uy=-0.9):
    q, u = model.complete([y, 0.7], [uy, 0.0])
    return q, u


def manifold_differences(model, q, u, r, t, dependent_q=None, dependent_u=None, h=1e-6):
    """C and D of the model's outputs by central differences: each
    independent state moved (the dependent ones completed), then each
    input."""
    maps = model.constraint_maps(q, u, dependent_q=dependent_q, dependent_u=dependent_u)
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
            qq, uu = model.complete(qq, uu, dependent_q=dependent_q, dependent_u=dependent_u,
                                    tol=1e-15)
            ends.append(model.outputs(qq, uu, r, t=t, dependent_q=dependent_q,
                                      dependent_u=dependent_u).y)
        columns.append((ends[0] - ends[1]) / (2 * h))
    inputs = []
    for k in range(model.nr):
        step = np.zeros(model.nr)
        step[k] = h
        inputs.append((model.outputs(q, u, r + step, t=t).y - model.outputs(q, u, r - step, t=t).y)
                      / (2 * h))
    D = np.array(inputs).T if inputs else np.zeros((len(model.y_names), 0))
    return np.array(columns).T, D


def test_outputs_of_the_pendulum_match_its_reduced_equations(pendulum):
    assert pendulum.y_names == ("height", "angle", "ax", "ay", "kinetic", "mixed")
    reference = reduced_pendulum()
    for y, uy, force, t in [(0.35, -0.9, 0.4, 0.3), (-0.5, 1.7, -2.0, 1.1), (0.0, 0.0, 0.0, 0.0)]:
        q, u = moving_point(pendulum, y, uy)
        result = pendulum.outputs(q, u, [force], t=t)
        assert result.state_names == ("y", "uy") and result.y_names == pendulum.y_names
        h, C, D = (np.array(a, dtype=float) for a in reference(y, uy, force, t))
        np.testing.assert_allclose(result.y, h.ravel(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(result.C, C, rtol=1e-11, atol=1e-11)
        np.testing.assert_allclose(result.D, D, rtol=1e-11, atol=1e-11)
    assert np.abs(result.D).max() > 0.5        # accelerations depend on the input


@pytest.mark.parametrize("partition", [{}, {"dependent_q": ["y"], "dependent_u": ["uy"]}])
def test_outputs_match_constrained_differences(pendulum, partition):
    q, u = moving_point(pendulum)
    r, t = np.array([0.4]), 0.3
    result = pendulum.outputs(q, u, r, t=t, **partition)
    C, D = manifold_differences(pendulum, q, u, r, t, **partition)
    np.testing.assert_allclose(result.C, C, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(result.D, D, rtol=1e-7, atol=1e-7)
    if partition:
        assert result.state_names == ("x", "ux")


def test_batches_and_the_generic_call(pendulum):
    points = [moving_point(pendulum, y, uy) for y, uy in [(0.1, 0.2), (0.3, -1.0), (-0.4, 0.5)]]
    q = np.array([p[0] for p in points])
    u = np.array([p[1] for p in points])
    r = np.array([[0.1], [0.2], [-0.3]])
    t = np.array([0.0, 0.5, 1.0])
    batch = pendulum.outputs(q, u, r, t=t)
    assert batch.y.shape == (3, 6) and batch.C.shape == (3, 6, 2) and batch.D.shape == (3, 6, 1)
    for k in range(3):
        one = pendulum.outputs(q[k], u[k], r[k], t=t[k])
        for a, b in zip(batch, one):
            np.testing.assert_array_equal(a[k], b)
    generic = pendulum.call("outputs", q[1], u[1], r[1], t=t[1], tol=1e-8)
    for a, b in zip(generic, pendulum.outputs(q[1], u[1], r[1], t=t[1])):
        np.testing.assert_array_equal(a, b)
    # a scalar option left out takes the method's default (it was handed to
    # the C as None: a raw TypeError); a partition may be given by names;
    # a bad value is refused as the method refuses it
    names = [pendulum.q_names[i] for i in pendulum.dependent_q], [pendulum.u_names[i] for i in pendulum.dependent_u]
    generic = pendulum.call("outputs", q[1], u[1], r[1], t=t[1], dependent_q=names[0], dependent_u=names[1])
    for a, b in zip(generic, pendulum.outputs(q[1], u[1], r[1], t=t[1], dependent_q=list(pendulum.dependent_q),
                                              dependent_u=list(pendulum.dependent_u))):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(InputError, match="tol must be a number >= 0"):
        pendulum.call("outputs", q[1], u[1], r[1], tol="small")
    with pytest.raises(InputError, match="tol must be a number >= 0"):
        pendulum.call("outputs", q[1], u[1], r[1], tol=np.nan)


def test_outputs_check_the_point(pendulum):
    q, u = moving_point(pendulum)
    with pytest.raises(codegen.errors.ConstraintViolationError):
        pendulum.outputs(q + 0.01, u)
    y = pendulum.outputs(q + 0.01, u, tol=None).y
    assert np.isfinite(y).all()
    with pytest.raises(InputError, match="auto"):
        pendulum.outputs(q, u, dependent_q="auto")
    # x dependent where x = 0 (horizontal): the default partition is singular
    q_flat, u_flat = pendulum.complete([PARAMETERS["L"], 0.0], [0.0, 0.0], dependent_q=["y"],
                                       dependent_u=["uy"])
    with pytest.raises(codegen.errors.SingularMatrixError):
        pendulum.outputs(q_flat, u_flat)


def test_state_space_takes_outputs_by_name(pendulum):
    q, u = moving_point(pendulum)
    r = np.array([0.4])
    control = pytest.importorskip("control")
    system = pendulum.state_space(q, u, r, outputs=["ay", "x", "height", "uy"])
    assert system.output_labels == ["ay", "x", "height", "uy"]
    result = pendulum.outputs(q, u, r)
    maps = pendulum.constraint_maps(q, u)
    np.testing.assert_array_equal(system.C[0], result.C[3])
    np.testing.assert_array_equal(system.D[0], result.D[3])
    np.testing.assert_array_equal(system.C[1], maps.embedding[1])     # x: a coordinate
    np.testing.assert_array_equal(system.C[2], result.C[0])
    assert not system.D[1:].any() and system.D[0, 0] != 0
    # -height is x: the output's row is the coordinate's
    np.testing.assert_allclose(system.C[2], -system.C[1], atol=1e-15)
    assert isinstance(system, control.StateSpace)
    with pytest.raises(InputError, match="nor an output of the model.*height, angle"):
        pendulum.state_space(q, u, r, outputs=["bogus"])


def test_disk_outputs_are_rows_of_the_embedding_and_of_linearize_full(build_dir, disk_model, disk):
    """The disk (multiplier form, no inputs) with outputs that are a
    dependent coordinate, a dependent speed, coordinate rates and
    accelerations: their rows of C are rows of the embedding and of A';
    and a nonlinear output against constrained differences."""
    kane = disk_model.kane
    q1, q2, q3, q4, q5, q6 = kane.q[:6]
    by_name = {str(s): s for s in disk_model.parameters}
    u = {name: s for name, s in zip(disk_model.u_names, disk_model.u)}
    t = me.dynamicsymbols._t
    outputs = {"height": -q6, "forward": u["u4"], "x_rate": q4.diff(t), "lean_accel": u["u1"].diff(t),
               "side_accel": u["u5"].diff(t),
               "mixed": by_name["r"] * sm.sin(q2) * u["u2"].diff(t) + sm.cos(q1) * q3.diff(t) * u["u6"]}
    model = Model(kane, parameters=dict(zip(disk_model.parameters, disk_model.parameter_values)),
                  name="disk_outputs", outputs=outputs)
    compiled = codegen.build(model, output_dir=build_dir)
    op = codegen.operating_point("disk", "steady_turn", lean=0.3, spin_rate=-3.0)
    q, u0 = np.array(op.q, dtype=float), np.array(op.u, dtype=float)
    q, u0 = compiled.complete(q + 0.05, u0 + 0.1)       # a moving point, not steady
    result = compiled.outputs(q, u0)
    maps = compiled.constraint_maps(q, u0)
    A_full, B_full = compiled.linearize_full(q, u0)
    nq = compiled.nq
    np.testing.assert_allclose(result.C[0], -maps.embedding[5], atol=1e-14)
    np.testing.assert_allclose(result.C[1], maps.embedding[nq + 3], atol=1e-14)
    np.testing.assert_allclose(result.C[2], A_full[3], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(result.C[3], A_full[nq + 0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(result.C[4], A_full[nq + 4], rtol=1e-12, atol=1e-12)
    assert result.D.shape == (6, 0)
    qd, ud = compiled.state_derivative(q, u0)
    np.testing.assert_allclose(result.y[:5], [-q[5], u0[3], qd[3], ud[0], ud[4]], rtol=1e-13,
                               atol=1e-14)
    C, _ = manifold_differences(compiled, q, u0, np.zeros(0), 0.0)
    np.testing.assert_allclose(result.C, C, rtol=1e-6, atol=1e-7)
    # the same C with another partition: through its own embedding
    other = dict(dependent_q=["q2"], dependent_u=["u1", "u4", "u6"])
    result = compiled.outputs(q, u0, **other)
    C, _ = manifold_differences(compiled, q, u0, np.zeros(0), 0.0, **other)
    np.testing.assert_allclose(result.C, C, rtol=1e-6, atol=1e-7)


def test_a_model_without_outputs(disk):
    op = codegen.operating_point("disk", "upright", v=0.5)
    assert disk.y_names == ()
    y, C, D = disk.outputs(op.q, op.u)
    assert y.shape == (0,) and C.shape == (0, disk.nx) and D.shape == (0, disk.nr)


def test_bad_outputs_are_refused_at_model():
    with pytest.raises(ModelError, match=r"output 'bad' contains k, which is not among"):
        pendulum_model(lambda x, y, **_: {"bad": sm.Symbol("k") * x}, name="bad1")
    with pytest.raises(ModelError, match=r"output 'jerk' contains .*uy''"):
        pendulum_model(lambda uy, t, **_: {"jerk": uy.diff(t, 2)}, name="bad2")
    with pytest.raises(ModelError, match=r"output 'other' contains w"):
        pendulum_model(lambda x, **_: {"other": me.dynamicsymbols("w") + x}, name="bad3")
    with pytest.raises(ModelError, match="output name 'x' is the name of a coordinate"):
        pendulum_model(lambda x, **_: {"x": x}, name="bad4")
    with pytest.raises(ModelError, match="output name 'uy' is the name of a speed"):
        pendulum_model(lambda x, **_: {"uy": x}, name="bad5")
    with pytest.raises(ModelError, match="must be a C identifier"):
        pendulum_model(lambda x, **_: {"bob height": x}, name="bad6")
    with pytest.raises(ModelError, match="undefined function"):
        pendulum_model(lambda x, **_: {"g_of_x": sm.Function("G")(x)}, name="bad7")
    with pytest.raises(ModelError, match="scalar"):
        pendulum_model(lambda x, **_: {"vector": sm.Matrix([x, x])}, name="bad8")


def test_outputs_enter_the_fingerprint():
    plain = pendulum_model(name="same")
    first = pendulum_model(lambda x, **_: {"height": -x}, name="same")
    second = pendulum_model(lambda x, **_: {"height": x}, name="same")
    assert len({plain.fingerprint(), first.fingerprint(), second.fingerprint()}) == 3


DRIVER = r"""
#include <stdio.h>
#include "NAME.h"

int main(void)
{
    NAME_workspace work;
    NAME_local_workspace local;
    const double q[MACRO_NQ] = {QVALUES}, u[MACRO_NU] = {UVALUES}, r[MACRO_NR] = {RVALUES};
    double y[MACRO_NOUT], C[MACRO_NOUT * MACRO_NX], D[MACRO_NOUT * MACRO_NR];
    double C_local[MACRO_NOUT * (MACRO_NQ + MACRO_NU)];
    int ranks[2], chart[MACRO_NC + MACRO_NV];
    int k, status = NAME_outputs(0.3, q, u, r, 0, 0, 0, 1e-8, y, C, D, &work);
    printf("%d\n", status);
    for (k = 0; k < MACRO_NOUT; ++k) printf("%s %.17g\n", NAME_y_names[k], y[k]);
    for (k = 0; k < MACRO_NOUT * MACRO_NX; ++k) printf("%.17g\n", C[k]);
    for (k = 0; k < MACRO_NOUT * MACRO_NR; ++k) printf("%.17g\n", D[k]);
    status = NAME_outputs(0.3, q, u, r, 0, 0, 0, 1e-8, y, 0, 0, &work);   /* y alone */
    if (status != 0) return status;
    /* the local form's basis: C packed with nx = NX columns here */
    status = NAME_outputs_local(0.3, q, u, r, 0, 0.0, 1e-8, y, C_local, D, ranks, chart, &local);
    printf("local %d %d %d\n", status, ranks[0], ranks[1]);
    for (k = 0; k < MACRO_NOUT * MACRO_NX; ++k) printf("%.17g\n", C_local[k]);
    return status;
}
"""


@pytest.mark.parametrize("flags", [[], ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]],
                         ids=["strict", "sanitizers"])
def test_the_c_of_a_model_with_outputs_compiles_strictly_and_agrees(pendulum, tmp_path, flags):
    """-std=c99 -Wall -Wextra -Werror -pedantic (and the sanitizers), on its
    own: the same y, C and D as the module."""
    import shutil
    import subprocess
    from pathlib import Path

    from codegen.derive import derive
    from codegen.emit import emit
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler")
    name = "pendulum_outputs"
    sources = emit(derive(pendulum_model(pendulum_outputs)))
    for file_name in (f"{name}.c", f"{name}.h"):
        (tmp_path / file_name).write_text(sources.files[file_name])
    assert sources.files[f"{name}.c"] == (Path(pendulum.__file__).parent / f"{name}.c").read_text()
    q, u = moving_point(pendulum)
    r = np.array([0.4])
    values = {"QVALUES": q, "UVALUES": u, "RVALUES": r}
    driver = DRIVER.replace("MACRO", name.upper()).replace("NAME", name)
    for key, vector in values.items():
        driver = driver.replace(key, ", ".join(repr(float(x)) for x in vector))
    (tmp_path / "main.c").write_text(driver)
    strict = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1", *flags]
    subprocess.run([compiler, *strict, "main.c", f"{name}.c", "-lm", "-o", "main"], cwd=tmp_path,
                   check=True, capture_output=True)
    lines = subprocess.run(["./main"], cwd=tmp_path, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    assert lines[0] == "0"
    expected = pendulum.outputs(q, u, r, t=0.3)
    nout = len(pendulum.y_names)
    assert [line.split()[0] for line in lines[1:1 + nout]] == list(pendulum.y_names)
    y = [float(line.split()[1]) for line in lines[1:1 + nout]]
    split = next(k for k, line in enumerate(lines) if line.startswith("local"))
    rest = np.array([float(line) for line in lines[1 + nout:split]])
    np.testing.assert_allclose(y, expected.y, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(rest[:expected.C.size], expected.C.ravel(), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(rest[expected.C.size:], expected.D.ravel(), rtol=1e-13, atol=1e-14)
    assert lines[split].split()[1:] == ["0", str(pendulum.nc), str(pendulum.nv)]
    local = pendulum.outputs_local(q, u, r, t=0.3)
    np.testing.assert_allclose(np.array([float(line) for line in lines[split + 1:]]), local.C.ravel(),
                               rtol=1e-13, atol=1e-14)


def test_multipliers_as_outputs(build_dir):
    """The rod's tension through the multiplier of the pendulum's velocity
    constraint f_v = x ux + y uy (F + B_v^T lambda = 0: lambda = -T / L):
    m g / L hanging at rest, its linearization against constrained
    differences (it depends on the input)."""
    lam, = codegen.multipliers(1)
    model = pendulum_model(lambda L, **_: {"tension": -lam * L}, name="pendulum_tension")
    compiled = codegen.build(model, output_dir=build_dir)
    q, u = compiled.complete([0.0, 0.5], [0.0, 0.0])
    m, L, g = (PARAMETERS[k] for k in ("m", "L", "g"))
    np.testing.assert_allclose(compiled.outputs(q, u, [0.0]).y, [m * g], rtol=1e-14)
    q, u = moving_point(compiled)
    r = np.array([0.7])
    result = compiled.outputs(q, u, r, t=0.2)
    # the tension of a moving pendulum: m (g cos + L w^2) + F sin, angle from the vertical
    angle, rate = np.arctan2(q[0], q[1]), u[0] / q[1]
    np.testing.assert_allclose(result.y, [m * (g * np.cos(angle) + L * rate**2) + r[0] * np.sin(angle)],
                               rtol=1e-12)
    C, D = manifold_differences(compiled, q, u, r, 0.2)
    np.testing.assert_allclose(result.C, C, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(result.D, D, rtol=1e-7, atol=1e-7)
    assert abs(result.D[0, 0]) > 0.1
    with pytest.raises(ModelError, match="contains the multipliers lambda_1, but the model has 1"):
        pendulum_model(lambda **_: {"bad": codegen.multipliers(2)[1]}, name="bad_multiplier")


def test_the_disk_with_outputs_matches_constrained_differences(build_dir):
    """The built-in disk's measurement outputs (``make_model(outputs=True)``,
    the benchmark's): a dependent coordinate and speed, a coordinate rate, a
    speed's rate, an energy; C by the extended fast path against differences
    along the manifold, at a leaning, turning point."""
    from codegen.models import disk as disk_models

    module = codegen.build(disk_models.make_model(outputs=True), output_dir=build_dir)
    assert module.name == "disk_outputs" and len(module.y_names) == 7
    rng = np.random.default_rng(5)
    q, u = module.complete(rng.normal(scale=0.5, size=module.nq), rng.normal(size=module.nu))
    result = module.outputs(q, u)
    C, _ = manifold_differences(module, np.array(q), np.array(u), None, 0.0)
    np.testing.assert_allclose(result.C, C, rtol=0, atol=1e-7 * max(1.0, np.abs(C).max()))
    assert np.abs(result.C).max() > 0.1


def pivot_pendulum(reaction_frame):
    """A pendulum (mass m, length L, torque input T) whose pivot's velocity
    is two auxiliary speeds, bringing the pivot's reaction R1, R2 (components
    along ``reaction_frame``'s x and y: "N" fixed, "A" turning with the rod)
    into evidence; the outputs are R1 and R2."""
    q, u, T = me.dynamicsymbols("q u T")
    ua1, ua2, R1, R2 = me.dynamicsymbols("ua1 ua2 R1 R2")
    m, L, g = sm.symbols("m L g")
    N = me.ReferenceFrame("N")
    A = N.orientnew("A", "Axis", [q, N.z])
    A.set_ang_vel(N, u * N.z)
    O = me.Point("O")
    O.set_vel(N, ua1 * N.x + ua2 * N.y)
    P = O.locatenew("P", -L * A.y)
    P.v2pt_theory(O, N, A)
    frame = {"N": N, "A": A}[reaction_frame]
    kane = me.KanesMethod(N, q_ind=[q], u_ind=[u], kd_eqs=[q.diff() - u], u_auxiliary=[ua1, ua2])
    kane.kanes_equations([me.Particle("bob", P, m)],
                         [(O, R1 * frame.x + R2 * frame.y), (P, -m * g * N.y), (A, T * N.z)])
    return Model(kane, {m: 1.3, L: 0.8, g: 9.81}, [T], name=f"pivot_reactions_{reaction_frame}",
                 outputs={"R1": R1, "R2": R2})


def test_reactions_of_auxiliary_speeds_as_outputs(build_dir):
    """Outputs that name the reactions an auxiliary speed brings into
    evidence (symbols of the loads only the auxiliary equations determine)
    are solved from those equations: the pendulum's pivot force against its
    closed form m a_P + m g N.y (the acceleration from the torque, so D is
    not zero), C and D against constrained differences; SymPy's rolling disc
    with auxiliary speeds (test_kane.py::test_aux) against SymPy's own solve
    of its auxiliary equations at SymPy's own state derivative. Reactions
    whose coefficients couple through the configuration are refused."""
    module = codegen.build(pivot_pendulum("N"), output_dir=build_dir)
    m, L, g = 1.3, 0.8, 9.81
    for q, u, torque in ((0.4, -1.1, 0.7), (2.5, 0.3, -1.9)):
        result = module.outputs([q], [u], [torque])
        rate = torque / (m * L ** 2) - g / L * np.sin(q)
        expected = [m * L * (rate * np.cos(q) - u ** 2 * np.sin(q)),
                    m * L * (rate * np.sin(q) + u ** 2 * np.cos(q)) + m * g]
        np.testing.assert_allclose(result.y, expected, rtol=1e-13)
        C, D = manifold_differences(module, np.array([q]), np.array([u]), np.array([torque]), 0.0)
        np.testing.assert_allclose(result.C, C, rtol=1e-7, atol=1e-7)
        np.testing.assert_allclose(result.D, D, rtol=1e-7, atol=1e-7)
        np.testing.assert_allclose(result.D[:, 0], [np.cos(q) / L, np.sin(q) / L], rtol=1e-13)
    with pytest.raises(ModelError, match=r"outputs \['R1', 'R2'\] hold the reactions R1, R2 .* "
                                         "are not constant and couple them"):
        pivot_pendulum("A")

    from codegen.reference import KaneReference
    from sympy_models.auxiliary_speeds import make_kane_aux
    kane, parameters, (f1, f2) = make_kane_aux()
    disc = codegen.build(Model(kane, parameters, [], name="disc_reactions", outputs={"f1": f1, "f2": f2}),
                         output_dir=build_dir)
    solved = sm.solve(kane.auxiliary_eqs, [f1, f2], dict=True)[0]
    t = me.dynamicsymbols._t
    reference = KaneReference(kane, parameters, [])
    rng = np.random.default_rng(5)
    for _ in range(2):
        q, u = rng.normal(size=3), rng.normal(size=3)
        rates = np.concatenate(reference.state_derivative(q, u))
        values = {**{s.diff(t): v for s, v in zip(list(kane.q) + list(kane.u), rates)},
                  **{a.diff(t): 0 for a in kane._uaux}}
        plain = {**dict(zip(kane.q, q)), **dict(zip(kane.u, u)), **{a: 0 for a in kane._uaux}, **parameters}
        expected = [float(solved[f].xreplace(values).xreplace(plain)) for f in (f1, f2)]
        result = disc.outputs(q, u)
        np.testing.assert_allclose(result.y, expected, rtol=1e-12)
        C, _ = manifold_differences(disc, q, u, np.zeros(0), 0.0)
        np.testing.assert_allclose(result.C, C, rtol=1e-7, atol=1e-7)


def test_outputs_in_the_local_form_basis(pendulum, build_dir):
    """outputs_local: C in the states of linearize_local at each point, its
    chart and bases, against central differences along the local form's
    embedding (each local state moved, the point completed back onto the
    manifold in the chart's partition); a batch whose points lie in two
    charts (the pendulum near horizontal, where the default partition is
    singular) equals its points one by one."""
    L = PARAMETERS["L"]
    near_horizontal = pendulum.complete([L, 1e-5], [0.0, 0.3], dependent_q=["y"], dependent_u=["uy"])
    points = [moving_point(pendulum), near_horizontal, moving_point(pendulum, -0.2, 0.4)]
    q, u = (np.array([point[k] for point in points]) for k in (0, 1))
    r, t = np.array([[0.3], [0.1], [-0.2]]), np.array([0.1, 0.4, 0.9])
    batch = pendulum.outputs_local(q, u, r, t=t)
    local = pendulum.linearize_local(q, u, r, t=t)
    assert local.chart == "mixed" and batch.state_names == ("y0", "z0")
    for k in range(len(points)):
        one = pendulum.outputs_local(q[k], u[k], r[k], t=t[k])
        for a, b in zip(one, batch):
            np.testing.assert_array_equal(a, b[k])
        chart = local.point(k)
        partition = dict(dependent_q=list(chart.dependent_q), dependent_u=list(chart.dependent_u))
        T, h, columns = chart.embedding, 1e-6, []
        for j in range(T.shape[1]):
            ends = []
            for step in (h, -h):
                qq, uu = pendulum.complete(q[k] + step * T[:2, j], u[k] + step * T[2:, j], r[k], t=t[k],
                                           tol=1e-15, **partition)
                ends.append(pendulum.outputs(qq, uu, r[k], t=t[k], tol=None, **partition).y)
            columns.append((ends[0] - ends[1]) / (2 * h))
        np.testing.assert_allclose(one.C, np.array(columns).T, rtol=0, atol=1e-7 * np.abs(one.C).max())
        np.testing.assert_allclose(one.D, pendulum.outputs(q[k], u[k], r[k], t=t[k]).D, rtol=1e-13,
                                   atol=1e-15)
        np.testing.assert_array_equal(one.y, pendulum.outputs(q[k], u[k], r[k], t=t[k], **partition).y)

    empty = pendulum.outputs_local(np.zeros((0, 2)), np.zeros((0, 2)))
    assert [a.shape for a in empty] == [(0, 6), (0, 6, 2), (0, 6, 1)]


def test_outputs_in_the_null_spaces_chart(build_dir):
    """outputs_local at a singular configuration (the redundant
    parallelogram: J_c of rank 3 of 4 everywhere on its branch), where no
    partition exists and the local form is the null spaces': the outputs
    q_k have C = T_q (the embedding's rows), the accelerations u_k' have C =
    A'_u, whose projection N_u^T A'_u is linearize_local's A (its z rows);
    and the crank's acceleration and its D against the branch's closed form
    I phi'' = -c cos phi + T."""
    import importlib
    parallelogram = importlib.import_module("user_models.redundant_parallelogram")
    kane, _, _ = parallelogram.equations()
    t = me.dynamicsymbols._t
    outputs = {**{f"angle{k}": q for k, q in enumerate(kane.q)},
               **{f"acceleration{k}": u.diff(t) for k, u in enumerate(kane.u)}}
    module = codegen.build(parallelogram.make_model(outputs=outputs, name="parallelogram_outputs"),
                           output_dir=build_dir)
    phi, torque = 0.6, 0.25
    q, u = parallelogram.branch_point(phi, rate=0.4)
    result = module.outputs_local(q, u, [torque])
    local = module.linearize_local(q, u, [torque], steady_tol=None)
    assert (local.rank_c, local.rank_v, local.chart) == (3, 3, "null space")
    assert result.state_names == ("y0", "z0") and result.C.shape == (8, 2)
    T = local.embedding
    np.testing.assert_allclose(result.C[:4], T[:4], rtol=0, atol=1e-15)
    np.testing.assert_allclose(T[4:, 1:].T @ result.C[4:], local.A[1:], rtol=1e-12,
                               atol=1e-12 * np.abs(local.A).max())
    np.testing.assert_allclose(result.y[:4], q, rtol=0, atol=0)
    I, c = parallelogram.closed_form()
    np.testing.assert_allclose(result.y[4], (-c * np.cos(phi) + torque) / I, rtol=1e-12)
    np.testing.assert_allclose(result.D[4], [1.0 / I], rtol=1e-12)
    np.testing.assert_allclose(result.D[:4], 0.0, atol=0)
    # a batch with a point off the branch's singular set is not needed: the
    # whole branch is singular; the batch equals its points one by one
    batch = module.outputs_local(np.array([q, q]), np.array([u, u]), [[torque], [0.0]])
    np.testing.assert_array_equal(batch.C[0], result.C)
    np.testing.assert_array_equal(batch.D[1], result.D)


def _rates_outputs(model):
    """The model with its coordinates, speeds and their rates as outputs."""
    import copy
    t = me.dynamicsymbols._t
    outputs = {}
    for label, symbols in (("q", model.q), ("u", model.u)):
        for i, symbol in enumerate(symbols):
            outputs[f"{label}_out{i}"] = symbol
            outputs[f"{label}d_out{i}"] = symbol.diff(t)
    copied = copy.copy(model)
    copied.y_names, copied.outputs = copied._take_outputs(outputs)
    copied.name = f"{model.name}_rates_out"
    return copied


@pytest.mark.parametrize("source", ["sympy_models.kane5_rolling_disc", "user_models.driven_pendulum",
                                    "user_models.sled"])
def test_outputs_local_of_the_rates_are_the_local_form(source, build_dir):
    """With q, u, q', u' as outputs, outputs_local is linearize_local again,
    at points that are not equilibria (a nonholonomic disc with dependent
    speeds, time in a configuration constraint, a nonholonomic sled): the
    rows of q and u are the embedding T, and the rates' rows at the chart's
    independent states are H A and H B (x_p = H x: H the independent rows
    of T), through the null space of B_v here and the partition's LU there."""
    import importlib
    module_source = importlib.import_module(source)
    if hasattr(module_source, "make_kane"):
        kane, parameters, inputs = module_source.make_kane()
        model = Model(kane, parameters, inputs, name=source.split(".")[-1])
        points = [(np.array(q, float), np.array(u, float), np.array(r, float), None, 0.0)
                  for q, u, r in module_source.POINTS]
    else:
        model = module_source.make_model()
        points = [module_source.operating_point(seed) for seed in (1, 2)]
    module = codegen.build(_rates_outputs(model), output_dir=build_dir)
    nq, nu = module.nq, module.nu

    def rows(label, count):
        return [module.y_names.index(f"{label}_out{i}") for i in range(count)]
    moving = 0
    for q, u, r, p, t in points:
        q, u = module.complete(q, u, r, p, t=t, tol=1e-14)
        result = module.outputs_local(q, u, r, p, t=t)
        local = module.linearize_local(q, u, r, p, t=t, steady_tol=None)
        assert local.chart == "partition"
        T = local.embedding
        np.testing.assert_allclose(result.C[rows("q", nq)], T[:nq], rtol=0, atol=1e-15)
        np.testing.assert_allclose(result.C[rows("u", nu)], T[nq:], rtol=0, atol=1e-15)
        independent_q = [i for i in range(nq) if module.q_names[i] not in local.dependent_q]
        independent_u = [i for i in range(nu) if module.u_names[i] not in local.dependent_u]
        H = T[independent_q + [nq + i for i in independent_u]]
        for matrix, local_matrix in ((result.C, local.A), (result.D, local.B)):
            rates = np.vstack([matrix[rows("qd", nq)][independent_q], matrix[rows("ud", nu)][independent_u]])
            scale = max(1.0, np.abs(local_matrix).max(initial=0.0))
            np.testing.assert_allclose(H @ local_matrix, rates, rtol=0, atol=1e-13 * scale)
        qd, ud = module.state_derivative(q, u, r, p, t=t)
        np.testing.assert_allclose(result.y[rows("qd", nq)], qd, rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(result.y[rows("ud", nu)], ud, rtol=1e-13, atol=1e-14)
        moving += np.abs(qd).max() > 1e-3
    assert moving   # a point that is not an equilibrium: the chart matters
