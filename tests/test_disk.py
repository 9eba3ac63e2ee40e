"""The rolling disk against the closed forms of Peterson's thesis chapter.

Parameters m = r = g = 1 (the chapter's). Multiple zero eigenvalues belong to
Jordan blocks, which LAPACK resolves only to about sqrt(machine epsilon), so
all eight eigenvalues are checked at once through the characteristic
polynomial: det(z I - A) = z^6 (z^2 - lambda^2) at several z, which is
well conditioned.
"""

import math

import numpy as np
import pytest

import codegen
from codegen.models import disk as disk_model_module


def characteristic_polynomial_error(A, nonzero_squared, points=(0.7, 1.3, 2.1, -1.7)):
    """Largest relative error of det(zI - A) against z^6 (z^2 - nonzero_squared)."""
    n = A.shape[0]
    errors = []
    for z in points:
        expected = z ** (n - 2) * (z * z - nonzero_squared)
        actual = np.linalg.det(z * np.eye(n) - A)
        errors.append(abs(actual - expected) / max(1.0, abs(expected)))
    return max(errors)


@pytest.mark.parametrize("v", np.linspace(-1.2, 1.2, 25))
def test_upright_steady_rolling_eigenvalues(disk, v):
    op = codegen.operating_point("disk", "upright", v=v)
    A, B = disk.linearize(*op)
    assert A.shape == (8, 8) and B.shape == (8, 0)
    lam_squared = 4.0 / 5.0 * (1.0 - 3.0 * v * v)   # (2 sqrt(1 - 3 v^2)/sqrt(5))^2
    assert characteristic_polynomial_error(A, lam_squared) < 1e-10
    # the nonzero pair itself, to 1e-10
    eigenvalues = np.linalg.eigvals(A)
    largest = eigenvalues[np.argsort(-np.abs(eigenvalues))[:2]]
    expected = 2.0 * np.sqrt(complex(1.0 - 3.0 * v * v)) / math.sqrt(5.0)
    if abs(expected) > 1e-3:
        assert np.allclose(sorted(largest, key=lambda z: (z.real, z.imag)),
                           sorted([expected, -expected], key=lambda z: (z.real, z.imag)),
                           rtol=0, atol=1e-10)


def test_upright_critical_speed_is_one_over_sqrt_3(disk):
    """Below v* = 1/sqrt(3) a real positive eigenvalue (capsize), above it none."""
    v_star = 1.0 / math.sqrt(3.0)
    for v, unstable in ((0.99 * v_star, True), (1.01 * v_star, False)):
        A, _ = disk.linearize(*codegen.operating_point("disk", "upright", v=v))
        assert (np.linalg.eigvals(A).real.max() > 1e-3) == unstable


def chapter_yaw_rate_roots(g, r, lean, spin_rate):
    """The root formula as printed in the chapter (it solves the reciprocal quadratic)."""
    root = math.sqrt(-5 * g / r * math.sin(lean) ** 2 * math.cos(lean)
                     + 9 / 4 * spin_rate ** 2 * math.cos(lean) ** 2)
    prefactor = r / (2 * g * math.sin(lean))
    return [prefactor * (-1.5 * spin_rate * math.cos(lean) + sign * root) for sign in (-1, 1)]


def steady_turn_condition(g, r, lean, yaw_rate, spin_rate):
    return (g / r * math.sin(lean) + 1.5 * math.cos(lean) * spin_rate * yaw_rate
            + 1.25 * math.cos(lean) * math.sin(lean) * yaw_rate ** 2)


STEADY_TURNS = [(0.2, -3.0, 0), (0.2, -3.0, 1), (0.5, -4.0, 0), (0.5, -4.0, 1),
                (-0.3, 2.5, 0), (-0.3, 2.5, 1), (1.0, -6.0, 0)]


@pytest.mark.parametrize("lean, spin_rate, branch", STEADY_TURNS)
def test_steady_turn_is_steady(disk, lean, spin_rate, branch):
    """At the steady-turn point the lean, yaw and spin rates do not change."""
    op = codegen.operating_point("disk", "steady_turn", lean=lean, spin_rate=spin_rate, branch=branch)
    qd, ud = disk.state_derivative(op.q, op.u)
    assert np.allclose(ud[:3], 0.0, atol=1e-12)
    assert qd[1] == pytest.approx(0.0, abs=1e-14)
    assert qd[2] == pytest.approx(spin_rate, abs=1e-14)
    assert steady_turn_condition(1.0, 1.0, lean, qd[0], spin_rate) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("lean, spin_rate, branch", STEADY_TURNS)
def test_steady_turn_eigenvalues_match_chapter(disk, lean, spin_rate, branch):
    """Six zeros and +/- sqrt(4/5 cos q2 - q1'^2 - 14/5 sin q2 q1' q3' - 12/5 q3'^2)."""
    op = codegen.operating_point("disk", "steady_turn", lean=lean, spin_rate=spin_rate, branch=branch)
    qd, _ = disk.state_derivative(op.q, op.u)
    yaw_rate = qd[0]
    lam_squared = (0.8 * math.cos(lean) - yaw_rate ** 2
                   - 2.8 * math.sin(lean) * yaw_rate * spin_rate - 2.4 * spin_rate ** 2)
    A, _ = disk.linearize(*op)
    scale = max(1.0, abs(lam_squared))
    assert characteristic_polynomial_error(A / math.sqrt(scale), lam_squared / scale) < 1e-10


def test_chapter_root_formula_for_the_yaw_rate_is_wrong():
    """Documents an erratum: the chapter's printed roots do not satisfy its own
    steady-turn condition; they are the roots of the reciprocal quadratic
    (prefactor r/(2 g sin q2) where 1/(2 a), a = 5/4 cos q2 sin q2, belongs).
    codegen.models.disk solves the condition itself."""
    g = r = 1.0
    lean, spin_rate = 0.2, -3.0
    printed = chapter_yaw_rate_roots(g, r, lean, spin_rate)
    assert all(abs(steady_turn_condition(g, r, lean, w, spin_rate)) > 1e-2 for w in printed)
    # their reciprocals are the yaw rates that satisfy the condition
    ours = disk_model_module.steady_turn_yaw_rates({"g": g, "r": r}, lean, spin_rate)
    assert sorted(1 / w for w in printed) == pytest.approx(sorted(ours), rel=1e-12)
    assert all(abs(steady_turn_condition(g, r, lean, w, spin_rate)) < 1e-12 for w in ours)


def test_eigenvalues_do_not_depend_on_the_partition(disk):
    """The linearized constrained system is intrinsic: another choice of
    dependent coordinate and speeds gives a similar A (same eigenvalues)."""
    op = codegen.operating_point("disk", "steady_turn", lean=0.4, spin_rate=-3.5, branch=1)
    A_default, _ = disk.linearize(*op)
    # lean q2 dependent instead of q6 (valid since sin q2 != 0), u1, u4, u6 dependent speeds
    A_other, _ = disk.linearize(*op, dependent_q=[1], dependent_u=["u1", "u4", "u6"])
    names = disk.independent_state_names(dependent_q=[1], dependent_u=["u1", "u4", "u6"])
    assert names == ("q1", "q3", "q4", "q5", "q6", "u2", "u3", "u5")
    scale = np.abs(A_default).max()
    for z in (0.9, 2.3, -1.1, 5.0):
        d1 = np.linalg.det(z * np.eye(8) - A_default / scale)
        d2 = np.linalg.det(z * np.eye(8) - A_other / scale)
        assert d1 == pytest.approx(d2, rel=1e-9, abs=1e-12)
