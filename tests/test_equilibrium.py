"""``equilibrium`` of the compiled modules (issue 11, item 4).

* The N-loop four-bar (N = 1, 2, 4), both the built-in model and an
  independently written Kane model (tests/user_models/gonzalez_fourbar.py)
  passed through codegen.Model/codegen.build: every equilibrium of the
  parallelogram branch (the roots of V'(phi) of the one-degree-of-freedom
  motion, derived here with SymPy from the geometry and found by brentq) is
  found from a guess near it that is off the constraints; the eigenvalues of
  ``linearize`` and ``linearize_local`` there equal the roots of
  I s^2 + C(phi) s + V''(phi) = 0 to 1e-8, undamped and damped (c = 1).
* ``fixed`` coordinates: held bitwise; an impossible hold raises
  ConvergenceError in bounded time.
* Steady motions of the rolling disk (speeds held; lean held with speeds
  free: the chapter's steady-turn condition); static points with ignorable
  coordinates left at the guess.
* Spencer's pendulum (hanging, inverted) and five-bar (hanging) against
  their closed forms / the model module's own Newton.
"""

import importlib.util
import math
import time
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import brentq

import codegen
from codegen.errors import ConvergenceError
from codegen.models import disk as disk_models
from codegen.models import five_bar, fourbar, spencer_pendulum
from local_checks import parallelogram_one_dof


def _user_model_file():
    """tests/user_models/gonzalez_fourbar.py as a module (not on sys.path)."""
    path = Path(__file__).parent / "user_models" / "gonzalez_fourbar.py"
    spec = importlib.util.spec_from_file_location("gonzalez_fourbar_source", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gonzalez_fourbar = _user_model_file()

G = 9.81
LOOPS = [1, 2, 4]


# -- the one-degree-of-freedom closed form, from the geometry ----------------------------


def closed_form(values, loops):
    inertia, slope, curvature, damping = parallelogram_one_dof(loops)
    args = [values[n] for n in ("l", "m", "g", "gravity_angle", "k", "l0", "c")]

    def equilibria(margin=0.2, samples=4000):
        grid = np.linspace(-math.pi + margin, math.pi - margin, samples)
        s = np.array([slope(x, *args) for x in grid])
        return [brentq(lambda x: slope(x, *args), a, b, xtol=1e-15, rtol=1e-15)
                for a, b, fa, fb in zip(grid, grid[1:], s, s[1:]) if fa * fb < 0 or fb == 0]

    def eigenvalues(phi):
        return np.roots([inertia(phi, *args), damping(phi, *args), curvature(phi, *args)])

    return equilibria, eigenvalues


def _sorted(values):
    values = np.asarray(values, dtype=complex)
    return values[np.lexsort((np.round(values.real, 6), np.round(values.imag, 6)))]


def assert_eigenvalues_close(actual, expected, rtol, label=""):
    actual, expected = _sorted(actual), _sorted(expected)
    assert actual.shape == expected.shape, (label, actual, expected)
    scale = max(1.0, float(np.abs(expected).max()))
    assert np.abs(actual - expected).max() <= rtol * scale, (label, actual, expected)


# -- the four-bars ----------------------------------------------------------------------


_BUILT = {}


def fourbar_module(kind, loops, build_dir):
    key = (kind, loops)
    if key not in _BUILT:
        model = (fourbar.make_model(loops) if kind == "builtin"
                 else gonzalez_fourbar.make_model(loops))
        _BUILT[key] = codegen.build(model, output_dir=build_dir)
    return _BUILT[key]


def configuration(values, phi, loops):
    """Both models order q as [phi, x_B0, y_B0, ..., x_BN, y_BN]."""
    return np.array(gonzalez_fourbar.configuration(values, phi, loops))


@pytest.mark.parametrize("kind", ["user", "builtin"])
@pytest.mark.parametrize("loops", LOOPS)
def test_fourbar_equilibria_from_nearby_guesses(kind, loops, build_dir):
    c = fourbar_module(kind, loops, build_dir)
    assert c.nq == 2 * loops + 3 and c.q_names[0] == "phi"
    rng = np.random.default_rng(10 * loops + (kind == "user"))
    for damping in (0.0, 1.0):
        values = dict(fourbar.DEFAULT_PARAMETERS, c=damping)
        p = c.parameters(c=damping)
        equilibria, eigenvalues = closed_form(values, loops)
        found = equilibria()
        # the paper's values: the square (unstable), the hanging and a leaning stable one
        assert any(abs(phi - math.pi / 2) < 1e-12 for phi in found)
        assert any(abs(phi + math.pi / 2) < 1e-12 for phi in found)
        assert len(found) >= 3
        gaps = np.diff(sorted(found))
        for phi in found:
            offset = 0.25 * min(0.4, gaps.min()) * rng.choice([-1, 1])
            guess = configuration(values, phi + offset, loops)
            guess[1:] += 0.01 * rng.standard_normal(guess.size - 1)     # off the constraints
            q, u = c.equilibrium(guess, p=p)
            label = f"{kind} N = {loops}, c = {damping}, phi = {phi:.6f}"
            np.testing.assert_allclose(q, configuration(values, phi, loops), rtol=0, atol=1e-9,
                                       err_msg=label)
            assert np.abs(u).max() == 0.0
            expected = eigenvalues(phi)
            A, _ = c.linearize(q, u, p=p)
            assert_eigenvalues_close(np.linalg.eigvals(A), expected, 1e-8, f"{label}: linearize")
            local = c.linearize_local(q, u, p=p)
            assert local.nx == 2
            assert_eigenvalues_close(np.linalg.eigvals(local.A), expected, 1e-8, f"{label}: local")
            stable = bool(np.all(expected.real < 0)) if damping else None
            if damping:       # stable ones decay, the unstable ones have a growing mode
                assert bool(np.all(np.linalg.eigvals(local.A).real < 0)) == stable


@pytest.mark.parametrize("loops", [8, 16])
def test_fourbar_equilibria_many_loops(loops, build_dir):
    """The built-in four-bar up to the paper's N = 16 (looped code for the
    large speed-level system): every equilibrium of the closed form from a
    guess off the constraints, eigenvalues to 1e-8, undamped and damped."""
    c = fourbar_module("builtin", loops, build_dir)
    rng = np.random.default_rng(loops)
    for damping in (0.0, 1.0):
        values = dict(fourbar.DEFAULT_PARAMETERS, c=damping)
        p = c.parameters(c=damping)
        equilibria, eigenvalues = closed_form(values, loops)
        found = equilibria()
        assert len(found) >= 3
        for phi in found:
            guess = configuration(values, phi + 0.05, loops)
            guess[1:] += 0.01 * rng.standard_normal(guess.size - 1)
            q, u = c.equilibrium(guess, p=p)
            np.testing.assert_allclose(q, configuration(values, phi, loops), rtol=0, atol=1e-9)
            local = c.linearize_local(q, u, p=p)
            assert local.nx == 2
            assert_eigenvalues_close(np.linalg.eigvals(local.A), eigenvalues(phi), 1e-8,
                                     f"N = {loops}, c = {damping}, phi = {phi:.6f}")


@pytest.mark.parametrize("kind", ["user", "builtin"])
def test_fourbar_other_parameters(kind, build_dir):
    """Gravity tilted, another spring: equilibria move; closed form again (N = 2)."""
    c = fourbar_module(kind, 2, build_dir)
    values = dict(fourbar.DEFAULT_PARAMETERS, gravity_angle=-math.pi / 2 - 0.3, k=40.0, l0=1.3, c=0.5)
    p = c.parameters(**{n: values[n] for n in ("gravity_angle", "k", "l0", "c")})
    equilibria, eigenvalues = closed_form(values, 2)
    for phi in equilibria():
        q, u = c.equilibrium(configuration(values, phi + 0.05, 2), p=p)
        np.testing.assert_allclose(q, configuration(values, phi, 2), atol=1e-9)
        assert_eigenvalues_close(np.linalg.eigvals(c.linearize_local(q, u, p=p).A), eigenvalues(phi), 1e-8)


def test_fixed_coordinates(build_dir):
    c = fourbar_module("builtin", 2, build_dir)
    values = dict(fourbar.DEFAULT_PARAMETERS)
    equilibria, _ = closed_form(values, 2)
    phi = max(equilibria())                      # the leaning stable one, ~2.0271
    guess = configuration(values, phi, 2)
    guess[1:] += 0.02 * np.sin(np.arange(1, guess.size))
    for fixed in (["phi"], [0], "phi"):
        q, u = c.equilibrium(guess, fixed=fixed)
        assert q[0] == guess[0], fixed                                   # held bitwise
        np.testing.assert_allclose(q, configuration(values, phi, 2), atol=1e-9)
    # held where nothing balances: no equilibrium with phi = 1.0
    start = time.perf_counter()
    with pytest.raises(ConvergenceError, match="iteration"):
        c.equilibrium(configuration(values, 1.0, 2), fixed=["phi"])
    assert time.perf_counter() - start < 10.0
    # the same hold with few iterations: the message says how far it got
    with pytest.raises(ConvergenceError, match=r"(?i)max ?\|R\|"):
        c.equilibrium(configuration(values, 1.0, 2), fixed=["phi"], max_iter=3)


def test_hopeless_guess_raises_in_bounded_time(build_dir, disk):
    c = fourbar_module("builtin", 1, build_dir)
    # a guess far from the linkage: rods of length 1 cannot reach (40, -30); with max_iter
    # small it cannot get there either
    guess = np.array([0.3, 40.0, -30.0, 55.0, 17.0])
    start = time.perf_counter()
    with pytest.raises(ConvergenceError):
        c.equilibrium(guess, max_iter=2)
    with pytest.raises(ConvergenceError, match="iteration"):
        # the lean held at 0.3 at rest: no static equilibrium of the disk
        disk.equilibrium([0.1, 0.3, 0.2, 0.3, 0.4, -0.95], fixed=["q2"])
    assert time.perf_counter() - start < 30.0


def test_singular_flat_equilibrium(build_dir):
    """k = 0, gravity along +x: the flat configuration is an equilibrium at a
    singular point (pseudo-inverse steps); only ~sqrt(tol) accurate there."""
    c = fourbar_module("user", 1, build_dir)
    values = dict(fourbar.DEFAULT_PARAMETERS, k=0.0, gravity_angle=0.0)
    p = c.parameters(k=0.0, gravity_angle=0.0)
    start = configuration(values, 0.1, 1) + 0.01 * np.array([0, 1, -1, 2, 1])
    q, u = c.equilibrium(start, p=p)
    np.testing.assert_allclose(q, configuration(values, 0.0, 1), atol=1e-4)
    # steady to ~sqrt(tol) only (a multiple root): not within steady_tol in the singular chart
    local = c.linearize_local(q, u, p=p, rank_tol=1e-4, steady_tol=None)
    omega = np.sort(np.abs(np.linalg.eigvals(local.A).imag))
    np.testing.assert_allclose(omega, np.repeat([math.sqrt(6 * G / 5), math.sqrt(2 * G)], 2), rtol=1e-3)


# -- other models ----------------------------------------------------------------------


def test_disk_steady_motion_speeds_held(disk):
    """Speeds of a steady turn held: the lean, the spin angle and the height
    follow (KaneReference.equilibrium converges from this guess in a few
    iterations, tests/test_reference_local.py)."""
    values = dict(disk_models.DEFAULT_PARAMETERS)
    q_turn, u_turn = disk_models.steady_turn(values, lean=0.3, spin_rate=-3.0)
    for lean, spin_angle, height in ((0.25, 0.0, None), (0.3, 0.05, None), (0.25, 0.05, -0.9)):
        start = np.array(q_turn)
        start[1], start[2] = lean, spin_angle
        if height is not None:
            start[5] = height
        q, u = disk.equilibrium(start, u_turn)
        np.testing.assert_allclose(q, q_turn, atol=1e-9, err_msg=str(start))
        np.testing.assert_array_equal(u, u_turn)
        qd, ud = disk.state_derivative(q, u)
        assert np.abs(ud[:3]).max() < 1e-9 and abs(qd[1]) < 1e-12


def test_disk_steady_turn_lean_held(disk):
    """Lean held, speeds free from a wrong yaw rate: a steady turn by the
    chapter's condition."""
    values = dict(disk_models.DEFAULT_PARAMETERS)
    q_turn, _ = disk_models.steady_turn(values, lean=0.3, spin_rate=-3.0)
    yaw = disk_models.steady_turn_yaw_rates(values, 0.3, -3.0)[0]
    guess = disk_models._speeds(q_turn, 1.1 * yaw, 0.0, -3.0, values["r"])
    q, u = disk.equilibrium(q_turn, guess, fixed=["q2"], free_speeds=["u2", "u3", "u4", "u5", "u6"])
    assert q[1] == 0.3
    yaw_rate = u[2] / math.cos(q[1])
    spin_rate = u[1] - math.sin(q[1]) * yaw_rate
    assert min(abs(yaw_rate - w) for w in disk_models.steady_turn_yaw_rates(values, 0.3, spin_rate)) < 1e-8
    f_c, f_v = disk.constraint_residuals(q, u)
    assert np.abs(np.concatenate([f_c, f_v])).max() < 1e-10
    _, ud = disk.state_derivative(q, u)
    assert np.abs(ud[:3]).max() < 1e-9


def test_disk_static(disk):
    """Upright at rest; ignorable coordinates (x, y, spin angle) stay at the guess."""
    q, u = disk.equilibrium([0.1, 0.05, 0.2, 0.3, 0.4, -0.98], fixed=["q1"])
    np.testing.assert_allclose(q, [0.1, 0.0, 0.2, 0.3, 0.4, -1.0], atol=1e-9)
    assert np.abs(u).max() == 0.0


def test_pendulum_and_five_bar(build_dir):
    pendulum = codegen.build(spencer_pendulum.make_model(), output_dir=build_dir)
    w = math.sqrt(G)
    for guess, expected, eigen in (([0.1, -0.9], [0.0, -1.0], [1j * w, -1j * w]),
                                   ([-0.2, 1.1], [0.0, 1.0], [w, -w])):
        q, u = pendulum.equilibrium(guess)
        np.testing.assert_allclose(q, expected, atol=1e-10)
        assert_eigenvalues_close(np.linalg.eigvals(pendulum.linearize_local(q, u).A), eigen, 1e-8)
        A, _ = pendulum.linearize(q, u, dependent_q="auto", dependent_u="auto")
        assert_eigenvalues_close(np.linalg.eigvals(A), eigen, 1e-8)
    fivebar = codegen.build(five_bar.make_model(), output_dir=build_dir)
    expected, _ = five_bar.hanging(dict(five_bar.DEFAULT_PARAMETERS))
    guess = np.array(expected) + np.array([0.05, -0.04, 0.03, 0.02])
    q, u = fivebar.equilibrium(guess)
    np.testing.assert_allclose(q, expected, atol=1e-9)
    _, ud = fivebar.state_derivative(q, u)
    assert np.abs(ud).max() < 1e-9


def test_batch_of_guesses(build_dir):
    c = fourbar_module("user", 2, build_dir)
    values = dict(fourbar.DEFAULT_PARAMETERS)
    equilibria, _ = closed_form(values, 2)
    found = equilibria()
    guesses = np.array([configuration(values, phi + 0.05, 2) for phi in found])
    q, u = c.equilibrium(guesses)
    assert q.shape == guesses.shape and u.shape == (len(found), c.nu)
    for i, phi in enumerate(found):
        np.testing.assert_allclose(q[i], configuration(values, phi, 2), atol=1e-9)
