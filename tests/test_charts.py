"""Charts at steady motions (DESIGN.md section 3c; issue "Nothing silently
wrong, round 3", first item).

A partition, or an orthonormal basis of the admissible perturbations, is a
chart; away from equilibria the linearization depends on it. The contract,
checked here against closed forms and independent models:

* ``linearize_local`` is a partition's linearization written in orthonormal
  bases (the model's partition where it is well conditioned): the same
  eigenvalues as ``linearize``, at steady motions too;
* ``"auto"`` keeps the model's partition where it is well conditioned;
* where the point is not steady in the chart of a result (an essential state
  changes along the motion), a ``NotSteadyWarning`` names the states: for
  ``linearize``, ``linearize_local`` and ``linearize_descriptor`` (whose
  chart is that of all coordinates and speeds) alike.

Models: Peterson's disk (its independent speeds are angular rates in the
leaning frame, its dependent ones components in the spinning wheel), the
same disk written with Lagrange's method (the coordinate rates as speeds),
and SymPy's test_kane5 rolling disc (angular velocity in the disc frame,
contact point velocity in the ground frame: no partition of those speeds is
steady in a turn). The closed forms are the thesis chapter's (upright:
+/- 2 sqrt(1 - 3 v^2)/sqrt(5) and six zeros; steady turn: six zeros and
+/- sqrt(4/5 cos q2 - q1'^2 - 14/5 sin q2 q1' q3' - 12/5 q3'^2)).
"""

import math
import warnings

import numpy as np
import pytest

import codegen
from codegen.errors import InputError, NotSteadyWarning
from codegen.reference import descriptor_eigenvalues
from lagrange_models import rolling_disk
from local_checks import assert_eigenvalues_close
from sympy_models import kane5_rolling_disc
from test_disk import characteristic_polynomial_error


def caught(function, *args, **kwargs):
    """(result, the messages of the NotSteadyWarnings it raised)."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result = function(*args, **kwargs)
    return result, [str(w.message) for w in record if w.category is NotSteadyWarning]


def every_form(module, q, u, p=None):
    """A of linearize, linearize_local and "auto", and the finite eigenvalues
    of the descriptor form, each with its NotSteadyWarnings."""
    (A, _), linearize_warnings = caught(module.linearize, q, u, p=p)
    local, local_warnings = caught(module.linearize_local, q, u, p=p)
    auto, auto_warnings = caught(module.linearize, q, u, p=p, dependent_q="auto", dependent_u="auto")
    (E, A_d, _), descriptor_warnings = caught(module.linearize_descriptor, q, u, p=p)
    finite = descriptor_eigenvalues(E, A_d, count=A.shape[0])
    return dict(linearize=(A, linearize_warnings), local=(local.A, local_warnings),
                auto=(auto[0], auto_warnings), descriptor=(finite, descriptor_warnings)), local, auto


def assert_nonzero_pair(A, lam_squared, label):
    """det(zI - A) = z^(n-2) (z^2 - lam^2): the thesis's spectrum, without
    computing the Jordan block of zeros."""
    scale = max(1.0, abs(lam_squared))
    error = characteristic_polynomial_error(A / math.sqrt(scale), lam_squared / scale)
    assert error < 1e-9, (label, error)


@pytest.mark.parametrize("v", [0.2, 0.5, 0.9])
def test_disk_upright_every_form_in_the_models_chart(disk, v):
    op = codegen.operating_point("disk", "upright", v=v)
    forms, local, auto = every_form(disk, op.q, op.u)
    lam_squared = 4 * (1 - 3 * v * v) / 5
    for name in ("linearize", "local", "auto"):
        A, messages = forms[name]
        assert_nonzero_pair(A, lam_squared, name)
        assert not messages, (name, messages)
    assert local.chart == "partition"
    assert (local.dependent_q, local.dependent_u) == (("q6",), ("u4", "u5", "u6"))
    assert (auto.dependent_q, auto.dependent_u) == (("q6",), ("u4", "u5", "u6"))
    # the descriptor form's chart holds u4..u6, which turn with the wheel: the
    # thesis pair and the spurious +/- i v/sqrt(2), with the warning naming them
    finite, messages = forms["descriptor"]
    assert len(messages) == 1 and "q3, u6 change along the motion" in messages[0], messages
    root = np.sqrt(complex(lam_squared))
    w = v / math.sqrt(2)
    expected = [root, -root, 1j * w, -1j * w]
    nonzero = finite[np.abs(finite) > 1e-6]
    assert len(nonzero) == 4
    for value in expected:
        assert np.abs(nonzero - value).min() < 1e-7, (value, nonzero)


STEADY_TURNS = [(0.2, -3.0, 0), (0.5, -4.0, 1), (-0.3, 2.5, 0), (1.0, -6.0, 0)]


@pytest.mark.parametrize("lean, spin_rate, branch", STEADY_TURNS)
def test_disk_steady_turns_every_form_agrees(disk, lean, spin_rate, branch):
    op = codegen.operating_point("disk", "steady_turn", lean=lean, spin_rate=spin_rate, branch=branch)
    qd, _ = disk.state_derivative(op.q, op.u)
    lam_squared = (0.8 * math.cos(lean) - qd[0] ** 2
                   - 2.8 * math.sin(lean) * qd[0] * spin_rate - 2.4 * spin_rate ** 2)
    forms, local, _ = every_form(disk, op.q, op.u)
    for name in ("linearize", "local", "auto"):
        A, messages = forms[name]
        assert_nonzero_pair(A, lam_squared, name)
        assert not messages, (name, messages)
    assert local.chart == "partition"
    assert len(forms["descriptor"][1]) == 1          # u4..u6 turn with the wheel


@pytest.fixture(scope="module")
def lagrange_disk(build_dir):
    return codegen.build(rolling_disk.make_lagrange(), output_dir=build_dir)


@pytest.fixture(scope="module")
def kane5(build_dir):
    return codegen.build(kane5_rolling_disc.make_model(), output_dir=build_dir)


def test_rolling_wheel_steady_turn_found_by_equilibrium(lagrange_disk):
    """Peterson's disk written with Lagrange's method (speeds: the coordinate
    rates; the contact point's velocity in the ground frame is dependent and
    turns with the heading). A steady turn found by equilibrium from a wrong
    yaw rate, the lean held: steady in the model's chart (the lean, yaw and
    spin rates constant), so linearize, linearize_local and "auto" give the
    thesis's pair and no spurious one; the descriptor form's chart (all
    coordinate rates) is not steady, and it says so."""
    m = lagrange_disk
    lean, spin_rate = 0.3, -2.0
    q0 = np.array([0.0, lean, 0.0, 0.0, 0.0, -math.cos(lean)])
    u0 = np.array([0.4, 0.0, spin_rate, 0.0, 0.0, 0.0])
    q0, u0 = m.complete(q0, u0)
    q, u = m.equilibrium(q0, u0, fixed=["q2"], free_speeds=["q1_rate", "q4_rate", "q5_rate",
                                                            "q6_rate"])
    assert q[1] == lean and u[2] == spin_rate
    qd, ud = m.state_derivative(q, u)
    assert np.abs(ud[:3]).max() < 1e-10                  # the model's independent speeds
    # the thesis's steady-turn condition, independently of the generated code
    yaw_rate = qd[0]
    condition = (math.sin(lean) + 1.5 * math.cos(lean) * spin_rate * yaw_rate
                 + 1.25 * math.cos(lean) * math.sin(lean) * yaw_rate ** 2)
    assert abs(condition) < 1e-9
    lam_squared = (0.8 * math.cos(lean) - yaw_rate ** 2
                   - 2.8 * math.sin(lean) * yaw_rate * spin_rate - 2.4 * spin_rate ** 2)
    assert lam_squared < 0                               # stable: a pair on the imaginary axis
    forms, local, _ = every_form(m, q, u)
    for name in ("linearize", "local", "auto"):
        A, messages = forms[name]
        assert_nonzero_pair(A, lam_squared, name)
        assert not messages, (name, messages)
        assert np.abs(np.linalg.eigvals(A).real).max() < 1e-6, name
    assert len(forms["descriptor"][1]) == 1


def test_no_partition_keeps_the_turn_steady(kane5):
    """SymPy's test_kane5 disc: angular velocity in the disc frame (it turns
    with the spin) and the contact point's velocity in the ground frame (it
    turns with the heading): at a steady turn no partition of these speeds is
    steady, and every form warns, naming the spin angle (its columns of A are
    not zero: the equations depend on it through the disc-frame speeds)."""
    m = kane5
    q0, u0 = m.complete([0.0, 0.3, 0.0, 0.0, 0.0], [0.0, -3.0, 0.5, 0.0, 0.0])
    q, u = m.equilibrium(q0, u0, fixed=["q2"], free_speeds=["u1", "u2", "u3", "u4", "u5"])
    forms, local, auto = every_form(m, q, u)
    for name, (A, messages) in forms.items():
        assert len(messages) == 1, (name, messages)
        assert "not steady" in messages[0] and "q3" in messages[0], (name, messages[0])
    # the same partition: linearize_local is still linearize's A in other bases
    A, _ = forms["linearize"]
    assert_eigenvalues_close(np.linalg.eigvals(local.A), np.linalg.eigvals(A), 1e-9, zero_tol=1e-6)


def test_swinging_pendulum_warns_and_names_the_states(pendulum):
    """A point that is not steady in any chart (a swinging pendulum): every
    form warns, naming the chart's states that change; steady_tol=None skips
    the check; at rest hanging, nothing."""
    from codegen.models import spencer_pendulum
    c = pendulum.compiled
    q, u = spencer_pendulum.at_angle(spencer_pendulum.DEFAULT_PARAMETERS, 0.6, 1.3)
    _, messages = caught(c.linearize, q, u)
    assert len(messages) == 1 and "q1, u1 change along the motion" in messages[0], messages
    assert "dependent coordinates ['q2']" in messages[0]
    _, messages = caught(c.linearize_local, q, u)
    assert len(messages) == 1 and "q1, u1 change" in messages[0]
    _, messages = caught(c.linearize_descriptor, q, u)
    assert len(messages) == 1
    for function in (c.linearize, c.linearize_full, c.linearize_local, c.linearize_descriptor):
        _, messages = caught(function, q, u, steady_tol=None)
        assert not messages
        _, messages = caught(function, *spencer_pendulum.hanging(spencer_pendulum.DEFAULT_PARAMETERS))
        assert not messages
    with pytest.raises(InputError, match="steady_tol"):
        c.linearize(q, u, steady_tol=-1.0)


def test_batch_warning_counts_the_points(disk):
    """One warning for a batch, with how many points are not steady and the
    first one's batch index."""
    upright = codegen.operating_point("disk", "upright", v=0.5)
    batch_q = np.tile(upright.q, (3, 1))
    batch_u = np.tile(upright.u, (3, 1))
    _, messages = caught(disk.linearize, batch_q, batch_u)
    assert not messages
    _, messages = caught(disk.linearize_descriptor, batch_q, batch_u)
    assert len(messages) == 1 and "at 3 of 3 points (first at batch index (0,))" in messages[0]
    # accelerating along one of the model's independent speeds at the second point
    pushed = batch_u.copy()
    pushed[1, 0] = 0.3                  # a lean rate: the lean changes
    pushed = disk.complete(batch_q, pushed)[1]
    _, messages = caught(disk.linearize, batch_q, pushed)
    assert len(messages) == 1 and "at 1 of 3 points (first at batch index (1,))" in messages[0]
    assert "q2" in messages[0]


def test_a_single_point_that_moves_is_warned_from_the_kernel_path(pendulum, monkeypatch):
    """A single linearize or linearize_local call at a point that is not
    steady stays on the single-point path (it used to redo the point on the
    batch path, 50-100x the call's cost, to say why): the same A, B and the
    same warning, attributed to the caller's line, as the batch path's (a p
    given as a dict takes that path)."""
    from codegen.models import spencer_pendulum
    from codegen.runtime import arguments
    c = pendulum.compiled
    q, u = spencer_pendulum.at_angle(spencer_pendulum.DEFAULT_PARAMETERS, 0.6, 1.3)
    batch_path = {}
    real_batch = arguments.batch

    def counted(*args, **kwargs):
        batch_path["calls"] = batch_path.get("calls", 0) + 1
        return real_batch(*args, **kwargs)

    for function in (c.linearize, c.linearize_local):
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            monkeypatch.setattr(arguments, "batch", counted)
            single = function(q, u)
            monkeypatch.setattr(arguments, "batch", real_batch)
            general = function(q, u, p={})
        assert batch_path.pop("calls", 0) == 0, function.__name__
        assert [w.category for w in record] == [NotSteadyWarning, NotSteadyWarning]
        assert str(record[0].message) == str(record[1].message)
        assert record[0].filename == __file__ and record[1].filename == __file__
        if function == c.linearize:
            assert all(np.array_equal(a, b) for a, b in zip(single, general))
        else:
            assert np.array_equal(single.A, general.A) and np.array_equal(single.embedding, general.embedding)
            assert single.chart == general.chart and single.dependent_q == general.dependent_q


def test_a_kernel_from_before_the_single_point_flags_is_refused(pendulum):
    """A module built before linearize_one returned the flags would be read
    wrongly by this runtime: it is refused on import, saying to rebuild."""
    import types
    from codegen.runtime import kernel
    real = pendulum.compiled._kernel
    assert kernel.missing_function(real) is None
    old = types.SimpleNamespace(**{name: getattr(real, name) for name in dir(real)
                                   if not name.startswith("__") and name != "ONE_POINT_FLAGS"})
    assert kernel.missing_function(old) == "ONE_POINT_FLAGS"
