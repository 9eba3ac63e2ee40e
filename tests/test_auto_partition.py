"""``dependent_q="auto"``, ``dependent_u="auto"`` (issue 11, items 2 and 3),
the errors at rank-deficient points and the warnings before them.

* Spencer's Cartesian pendulum along a path through q2 = 0 (where the
  model's own partition fails): "auto" keeps the model's partition (q2
  dependent) wherever its block is well conditioned (|J_c P_qd| at least
  1e-4 of |J_c|: no IllConditionedWarning) and takes the larger |J_c| entry
  (column-pivoted QR of a 1 x 2 Jacobian) only where it is not, reported by
  name; A (and linearize_full's A') equal the exact linearization in the
  chart of the independent coordinate, derived here with SymPy from
  theta'' = -(g/l) sin(theta), to 1e-10.
* Spencer's five-bar along a path of configurations through a point where
  its own partition (q3, q4 dependent) is singular (links 3 and 4 aligned):
  the partition matches KaneReference.automatic_partition, A matches the
  reference's selection chart and constrained finite differences.
* complete(dependent_q="auto"): the best-conditioned set at the given point
  (a point, not a chart): exact closed form; MultipleRootWarning at a double
  root of the model's partition.
* Rank-deficient points: SingularMatrixError naming the ranks, singular
  values and linearize_local. IllConditionedWarning near the singular
  four-bar (phi = 1e-6), with the condition estimate of the partition block
  (compared with NumPy's condition number of the reference's J_c block).
"""

import contextlib
import math
import re
import warnings

import numpy as np
import pytest
import sympy as sm
from scipy.optimize import brentq

import codegen
from codegen.errors import SingularMatrixError
from codegen.models import five_bar, fourbar, spencer_pendulum


G = 9.81


def assert_close(actual, expected, rtol, label=""):
    actual, expected = np.asarray(actual, float), np.asarray(expected, float)
    assert actual.shape == expected.shape, (label, actual.shape, expected.shape)
    scale = max(1.0, float(np.abs(expected).max())) if expected.size else 1.0
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale, err_msg=label)


@contextlib.contextmanager
def no_warnings():
    """Any warning inside is an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# -- the pendulum's exact charts -----------------------------------------------------------


def pendulum_chart(chart, angle, rate, l=1.0, g=G):
    """(A, A_full) of the pendulum in the chart x = (s, s') of the independent
    coordinate: s = q1 = l sin(theta) (chart "q1") or s = q2 = -l cos(theta)
    (chart "q2"); A_full: d/dt [q1, q2, u1, u2] with respect to x."""
    th, w = sm.symbols("theta w")
    q1, q2 = l * sm.sin(th), -l * sm.cos(th)
    wd = -g / l * sm.sin(th)
    def rate_of(expr):
        return expr.diff(th) * w + expr.diff(w) * wd
    u1, u2 = rate_of(q1), rate_of(q2)
    full = sm.Matrix([u1, u2, rate_of(u1), rate_of(u2)])
    s = q1 if chart == "q1" else q2
    to_chart = sm.Matrix([s, rate_of(s)]).jacobian([th, w])
    A_full = full.jacobian([th, w]) * to_chart.inv()
    rows = [0, 2] if chart == "q1" else [1, 3]
    values = {th: angle, w: rate}
    A_full = np.array(A_full.subs(values).evalf(30), dtype=float)
    return A_full[rows], A_full


PATH = [0.3, 0.7, 1.2, 1.5, math.pi / 2, 1.65, 2.0, 2.6, -1.2, -math.pi / 2, math.pi / 2 + 2e-5]


def chart_dependent(q):
    """The dependent coordinate "auto" takes at q: the model's q2 where its
    block 2 q2 of J_c = [2 q1, 2 q2] is well conditioned (condition estimate
    max|J_c| / |2 q2| at most 1e4), else the larger entry (pivoted QR)."""
    if max(abs(q[0]), abs(q[1])) <= 1e4 * abs(q[1]):
        return "q2"
    return "q1" if abs(q[0]) > abs(q[1]) else "q2"


@pytest.mark.parametrize("rate", [0.4, -0.8])
def test_pendulum_path_through_q2_zero(pendulum, rate):
    c = pendulum.compiled
    values = dict(spencer_pendulum.DEFAULT_PARAMETERS)
    chosen = []
    for angle in PATH:
        q, u = spencer_pendulum.at_angle(values, angle, rate)
        # J_c = [2 q1, 2 q2] (and B_v, the same row)
        dependent = chart_dependent(q)
        independent = "q2" if dependent == "q1" else "q1"
        with no_warnings():          # the pendulum swings: not steady in any chart
            result = c.linearize(q, u, dependent_q="auto", dependent_u="auto", steady_tol=None)
        A, B = result
        assert list(result.dependent_q) == [dependent], angle
        assert list(result.dependent_u) == ["u" + dependent[1]], angle
        assert tuple(result.state_names) == (independent, "u" + independent[1])
        expected, expected_full = pendulum_chart(independent, angle, rate)
        assert_close(A, expected, 1e-10, f"A at angle {angle}")
        assert B.shape == (2, 0)
        full = c.linearize_full(q, u, dependent_q="auto", dependent_u="auto", steady_tol=None)
        A_full, _ = full
        assert list(full.dependent_q) == [dependent]
        assert_close(A_full, expected_full, 1e-10, f"A' at angle {angle}")
        chosen.append(dependent)
    # the path changes charts only where the model's fails (q2 ~ 0)
    assert chosen == ["q1" if abs(math.cos(angle)) < 1e-4 else "q2" for angle in PATH]
    # the model's own partition fails at q2 = 0 (where "auto" worked)
    with pytest.raises(SingularMatrixError):
        c.linearize(*spencer_pendulum.horizontal(values, rate=rate))


def test_pendulum_path_as_a_batch(pendulum):
    c = pendulum.compiled
    values = dict(spencer_pendulum.DEFAULT_PARAMETERS)
    points = [spencer_pendulum.at_angle(values, angle, 0.4) for angle in PATH]
    q = np.array([point[0] for point in points])
    u = np.array([point[1] for point in points])
    result = c.linearize(q, u, dependent_q="auto", dependent_u="auto", steady_tol=None)
    A, _ = result
    assert A.shape == (len(PATH), 2, 2)
    dq = np.asarray(result.dependent_q)
    du = np.asarray(result.dependent_u)
    assert dq.shape == (len(PATH), 1) and du.shape == (len(PATH), 1)
    for i, angle in enumerate(PATH):
        dependent = 0 if chart_dependent(q[i]) == "q1" else 1
        assert dq[i, 0] == dependent and du[i, 0] == dependent
        expected, _ = pendulum_chart("q2" if dependent == 0 else "q1", angle, 0.4)
        assert_close(A[i], expected, 1e-10, f"batch point {i}")
    # one chosen partition for all points: also names
    lower = [i for i in range(len(PATH)) if chart_dependent(q[i]) == "q2"]
    result = c.linearize(q[lower], u[lower], dependent_q="auto", dependent_u="auto",
                         steady_tol=None)
    np.testing.assert_array_equal(np.asarray(result.dependent_q), [[1]] * len(lower))
    assert result.uniform and tuple(result.dependent_q_names) == ("q2",)
    assert tuple(result.state_names) == ("q1", "u1")


def test_only_one_of_the_two_automatic(pendulum):
    """dependent_q="auto" with a given dependent_u (and the reverse), near
    the horizontal, where the model's q2 (u2) is ill conditioned."""
    c = pendulum.compiled
    q, u = spencer_pendulum.at_angle(dict(spencer_pendulum.DEFAULT_PARAMETERS), math.pi / 2 - 1e-5, 0.4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", codegen.errors.IllConditionedWarning)   # u2 given
        result = c.linearize(q, u, dependent_q="auto", dependent_u=["u2"], steady_tol=None)
        assert list(result.dependent_q) == ["q1"] and list(result.dependent_u) == ["u2"]
        # q1 dependent and u2 dependent: a mixed chart, same as giving both by hand
        A_given, _ = c.linearize(q, u, dependent_q=["q1"], dependent_u=["u2"], steady_tol=None)
        np.testing.assert_array_equal(result[0], A_given)
    result = c.linearize(q, u, dependent_q=["q1"], dependent_u="auto", steady_tol=None)
    assert list(result.dependent_u) == ["u1"]
    A_given, _ = c.linearize(q, u, dependent_q=["q1"], dependent_u=["u1"], steady_tol=None)
    np.testing.assert_array_equal(result[0], A_given)
    # away from it the model's partition is kept, whichever is "auto"
    q, u = spencer_pendulum.at_angle(dict(spencer_pendulum.DEFAULT_PARAMETERS), 1.2, 0.4)
    result = c.linearize(q, u, dependent_q="auto", dependent_u=["u2"], steady_tol=None)
    assert list(result.dependent_q) == ["q2"]


# -- the five-bar through a point where its own partition fails -----------------------------


def _fivebar_path(parameters, theta1=1.0, elbow=1.0, rates=(0.3, -0.5)):
    """Points (q, u) along the path of link 4's angle theta4 (link 1 held at
    theta1 from +x): P3 = D - L4 e(theta4), P2 on the circles about P1 and P3.
    It passes the configuration where links 3 and 4 are aligned (q4 = 0,
    found by brentq): there the model's own partition (q3, q4 dependent, i.e.
    q1, q2 independent) is singular, as (q1, q2) cannot parametrize the loop
    at that fold. Speeds: u1, u4 given, u2, u3 from f_v."""
    L1, L2, L3, L4, d = (parameters[k] for k in ("L1", "L2", "L3", "L4", "d"))
    P1 = L1 * np.array([math.cos(theta1), math.sin(theta1)])
    D = np.array([d, 0.0])

    def point(theta4):
        P3 = D - L4 * np.array([math.cos(theta4), math.sin(theta4)])
        chord = P3 - P1
        dist = np.linalg.norm(chord)
        a = (L2**2 - L3**2 + dist**2) / (2 * dist)
        h = math.sqrt(L2**2 - a**2)
        normal = np.array([-chord[1], chord[0]]) / dist
        P2 = P1 + a * chord / dist + elbow * h * normal
        theta2 = math.atan2(*(P2 - P1)[::-1])
        theta3 = math.atan2(*(P3 - P2)[::-1])
        q = [math.pi - theta1, theta1 - theta2, theta2 - theta3, theta3 - theta4]
        return five_bar.complete(parameters, q, rates, dependent=(1, 2))

    def sin_q4(theta4):
        return math.sin(point(theta4)[0][3])

    def assembles(theta4):
        P3 = D - L4 * np.array([math.cos(theta4), math.sin(theta4)])
        return abs(L2 - L3) + 0.05 < np.linalg.norm(P3 - P1) < L2 + L3 - 0.05

    grid = [x for x in np.linspace(-math.pi, math.pi, 145) if assembles(x)]
    values = [sin_q4(x) for x in grid]
    crossings = [brentq(sin_q4, a, b, xtol=1e-15)
                 for a, b, fa, fb in zip(grid, grid[1:], values, values[1:])
                 if fa * fb < 0 and b - a < 0.1]
    assert crossings, "no aligned configuration on the path"
    theta4 = crossings[0]
    return [point(theta4 + s) for s in (-0.3, -0.05, 0.0, 0.05, 0.3)], point(theta4)


def test_five_bar_through_its_configurations(fivebar):
    c, ref = fivebar.compiled, fivebar.ref
    parameters = dict(five_bar.DEFAULT_PARAMETERS)
    path, (q_star, u_star) = _fivebar_path(parameters)
    assert abs(math.sin(q_star[3])) < 1e-12
    # the model's partition: singular (or at least flagged) at the aligned point
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            c.linearize(q_star, u_star)
        except SingularMatrixError:
            pass
        else:
            assert any(isinstance(w.message, codegen.errors.IllConditionedWarning) for w in caught)
    for q, u in path:
        with no_warnings():      # moving along the path: not steady
            result = c.linearize(q, u, dependent_q="auto", dependent_u="auto", steady_tol=None)
        A, _ = result
        names_q, names_u = ref.automatic_partition(q, u)
        assert list(result.dependent_q) == names_q and list(result.dependent_u) == names_u
        dq = [c.q_names.index(n) for n in names_q]
        du = [c.u_names.index(n) for n in names_u]
        selected = ref.local_state_space(q, u, partition=(dq, du))
        assert_close(A, selected.A, 1e-9, f"selection chart at {q}")
        if abs(math.sin(q[3])) > 1e-3:      # SymPy's reduced equations need the model's partition
            # near the fold the model's partition is kept (well conditioned, but
            # the dependent coordinates vary fast): differences lose digits
            A_fd, _ = ref.constrained_fd_AB(q, u, dependent_q=dq, dependent_u=du)
            assert_close(A, A_fd, 1e-4, f"finite differences at {q}")
        # the same partition given by hand gives the same numbers
        A_given, _ = c.linearize(q, u, dependent_q=names_q, dependent_u=names_u, steady_tol=None)
        np.testing.assert_array_equal(A, A_given)


def test_five_bar_hanging_auto_same_eigenvalues(fivebar):
    c = fivebar.compiled
    q, u = five_bar.hanging(dict(five_bar.DEFAULT_PARAMETERS))
    A, _ = c.linearize(q, u)
    result = c.linearize(q, u, dependent_q="auto", dependent_u="auto")
    def ordered(values):
        return values[np.lexsort((np.round(values.real, 6), np.round(values.imag, 6)))]

    np.testing.assert_allclose(ordered(np.linalg.eigvals(result[0])), ordered(np.linalg.eigvals(A)),
                               rtol=1e-9, atol=1e-9)


# -- complete ------------------------------------------------------------------------------


def test_complete_auto(pendulum):
    c = pendulum.compiled
    q0, u0 = [1.0, 0.05], [0.0, 0.4]
    with no_warnings():
        q, u = c.complete(q0, u0, dependent_q="auto", dependent_u="auto", tol=1e-15)
    q1 = math.sqrt(1 - 0.05**2)
    np.testing.assert_allclose(q, [q1, 0.05], rtol=0, atol=1e-15)
    np.testing.assert_allclose(u, [-0.05 * 0.4 / q1, 0.4], rtol=0, atol=1e-15)
    # a batch: each point its own choice
    q, u = c.complete([[1.0, 0.05], [0.05, -1.0]], [[0.0, 0.4], [0.3, 0.0]],
                      dependent_q="auto", dependent_u="auto", tol=1e-15)
    np.testing.assert_allclose(q[0], [q1, 0.05], atol=1e-15)
    np.testing.assert_allclose(q[1], [0.05, -math.sqrt(1 - 0.05**2)], atol=1e-15)
    np.testing.assert_allclose(u[1], [0.3, 0.3 * 0.05 / math.sqrt(1 - 0.05**2)], atol=1e-15)


def test_complete_multiple_root_warning(pendulum):
    """q1 = 1 held, q2 dependent: f_c = q2^2, a double root at q2 = 0: Newton
    converges linearly, q2 only to about sqrt(tol)."""
    c = pendulum.compiled
    with pytest.warns(codegen.errors.MultipleRootWarning):
        q, _ = c.complete([1.0, 0.05], [0.0, 0.0])
    assert q[0] == 1.0 and 0 < abs(q[1]) < 1e-5
    # a simple root: no warning
    with no_warnings():
        q, _ = c.complete([0.6, -0.7], [0.0, 0.0])
    np.testing.assert_allclose(q, [0.6, -0.8], atol=1e-14)


# -- errors at rank-deficient points ------------------------------------------------------------


def test_rank_deficient_errors_point_to_linearize_local(fourbar1, fivebar):
    c = fourbar1.compiled
    p = c.parameters(k=0.0, gravity_angle=0.0)
    q, u = fourbar.flat(dict(fourbar.DEFAULT_PARAMETERS, k=0.0, gravity_angle=0.0))
    for kwargs in ({"dependent_q": "auto", "dependent_u": "auto"}, {"dependent_q": "auto"}, {}):
        with pytest.raises(SingularMatrixError) as error:
            c.linearize(q, u, p=p, **kwargs)
        message = str(error.value)
        assert "rank 3 of 4" in message, message
        assert "linearize_local" in message, message
        assert re.search(r"singular values? [^;]*\d", message), message
        assert "f_c[" in message, message
    # Spencer's five-bar at (pi, 0, 0, pi)
    q, u = five_bar.singular(dict(five_bar.DEFAULT_PARAMETERS))
    with pytest.raises(SingularMatrixError, match=r"rank 1 of 2(.|\n)*linearize_local"):
        fivebar.compiled.linearize(q, u, dependent_q="auto", dependent_u="auto")
    local = fivebar.compiled.linearize_local(q, u)
    assert local.nx == 6 and (local.rank_c, local.rank_v) == (1, 1)


# -- the warning before the error ---------------------------------------------------------------


def _block_condition(ref, q, p, dependent):
    J_c = np.asarray(ref.functions().J_c(0.0, list(q), [0.0] * ref.nu, [], list(p)), float)
    return np.linalg.cond(J_c[:, dependent])


def test_ill_conditioned_warning_near_the_singular_fourbar(fourbar1):
    c, ref = fourbar1.compiled, fourbar1.ref
    values = dict(fourbar.DEFAULT_PARAMETERS, k=0.0, gravity_angle=0.0)
    p = c.parameters(k=0.0, gravity_angle=0.0)
    q, u = fourbar.general(values, phi=1e-6, omega=0.0)
    with pytest.warns(codegen.errors.IllConditionedWarning) as record:
        c.linearize(q, u, p=p)
    message = str([w for w in record if issubclass(w.category, codegen.errors.IllConditionedWarning)][0].message)
    assert "digit" in message and ("auto" in message or "linearize_local" in message), message
    dependent = [c.q_names.index(n) if isinstance(n, str) else int(n) for n in c.dependent_q]
    condition = _block_condition(ref, q, p, dependent)
    assert condition > 1e6
    numbers = [float(x) for x in re.findall(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?", message)]
    assert any(condition / 1e3 <= x <= condition * 1e3 for x in numbers), (condition, message)
    digits = math.log10(condition)
    assert any(abs(x - digits) <= 1.5 for x in numbers), (digits, message)
    # far from the singular point: silent (but for the motion, not steady)
    q, u = fourbar.general(values, phi=0.8, omega=0.3)
    with no_warnings():
        c.linearize(q, u, p=p, steady_tol=None)
        c.linearize_local(q, u, p=p, steady_tol=None)
    # linearize_local takes the best-conditioned partition there, without a warning
    q, u = fourbar.general(values, phi=1e-6, omega=0.0)
    with no_warnings():
        c.linearize_local(q, u, p=p, steady_tol=None)
