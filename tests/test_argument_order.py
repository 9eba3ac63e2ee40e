"""One argument order, (q, u, r, p, t), for every method of a generated model.

complete and constraint_residuals took (q, u, p, t) before. They take r now
(checked and broadcast like everywhere, not used: the constraints hold no
inputs), and still read the old order, with a DeprecationWarning, where the
third positional argument cannot be r. Where it can be both (a model with as
many inputs as parameters), a fourth positional argument that fits only one
order decides, and otherwise the call is refused (README, "Using a generated
model")."""

import inspect
import warnings
from pathlib import Path

import numpy as np
import pytest
import sympy as sm
import sympy.physics.mechanics as me

import codegen
from codegen.errors import InputError

OLD_ORDER = r"old order of its arguments.*pass the parameters by keyword, p="


@pytest.fixture(scope="module")
def op():
    return codegen.operating_point("disk", "steady_turn", lean=0.4, spin_rate=-3.0)


@pytest.fixture(scope="module")
def bead(build_dir):
    """A bead on a ring of radius L, pushed by a force F: one input, one
    parameter (nr == np == 1), so a third positional argument of length 1
    can be either. The constraint x^2 + y^2 = L^2 depends on the parameter."""
    x, y, u1, u2, F = me.dynamicsymbols("x y u1 u2 F")
    L = sm.Symbol("L")
    t = me.dynamicsymbols._t
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    bead = O.locatenew("bead", x * N.x + y * N.y)
    bead.set_vel(N, u1 * N.x + u2 * N.y)
    kane = me.KanesMethod(N, q_ind=[x], u_ind=[u1], kd_eqs=[x.diff(t) - u1, y.diff(t) - u2],
                          q_dependent=[y], configuration_constraints=[x ** 2 + y ** 2 - L ** 2],
                          u_dependent=[u2], velocity_constraints=[x * u1 + y * u2])
    kane.kanes_equations([me.Particle("P", bead, 1)], [(bead, F * N.x)])
    model = codegen.Model(kane, parameters={L: 1.0}, inputs=[F], name="bead_on_ring",
                          description="a bead on a ring, pushed")
    return codegen.build(model, output_dir=build_dir)


def quietly(call):
    """The result of ``call()``, which must not warn."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return call()


def same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def test_every_method_takes_q_u_r_p_t_in_this_order(disk):
    for name in ("linearize", "linearize_full", "linearize_local", "linearize_descriptor",
                 "state_derivative", "constraint_residuals", "complete", "state_space"):
        parameters = list(inspect.signature(getattr(disk, name)).parameters)
        assert parameters[:5] == ["q", "u", "r", "p", "t"], name
    assert list(inspect.signature(disk.equilibrium).parameters)[:5] == [
        "q_guess", "u", "r", "p", "t"]


def test_the_new_order_does_not_warn(disk, op):
    p = disk.parameters(r=1.0)
    expected = disk.complete(op.q, op.u, p=p, t=0.5)
    assert same(quietly(lambda: disk.complete(op.q, op.u, None, p, 0.5)), expected)
    assert same(quietly(lambda: disk.complete(op.q, op.u, np.zeros(0), p, 0.5)), expected)
    assert same(quietly(lambda: disk.complete(*op)), disk.complete(op.q, op.u, p=op.p, t=op.t))
    assert same(quietly(lambda: disk.constraint_residuals(*op)),
                disk.constraint_residuals(op.q, op.u, p=op.p))
    quietly(lambda: disk.complete(op.q, op.u, np.zeros(0)))   # r of length nr = 0


@pytest.mark.parametrize("function", ["complete", "constraint_residuals"])
def test_the_old_order_still_works_with_a_deprecation_warning(disk, op, function):
    call = getattr(disk, function)
    p = disk.parameters(m=2.0)
    for args, kwargs in (((p,), {}), ((p, 0.5), {}), ((p,), {"t": 0.5}),
                         (({"m": 2.0},), {}), ((list(p), np.array(0.5)), {})):
        with pytest.warns(DeprecationWarning, match=OLD_ORDER) as caught:
            result = call(op.q, op.u, *args, **kwargs)
        deprecation, = [w for w in caught if w.category is DeprecationWarning]
        assert Path(deprecation.filename).name == Path(__file__).name   # the caller's line
        t = args[1] if len(args) > 1 else kwargs.get("t", 0.0)
        assert same(result, call(op.q, op.u, p=p, t=t)), (args, kwargs)
    with pytest.warns(DeprecationWarning, match=OLD_ORDER):      # p None, then t
        result = call(op.q, op.u, None, 0.5)
    assert same(result, call(op.q, op.u, t=0.5))


def test_the_old_order_with_a_batch(disk, op):
    q = np.tile(op.q, (4, 1))
    p = np.tile(disk.default_parameters, (4, 1))
    with pytest.warns(DeprecationWarning, match=OLD_ORDER):
        f_c, f_v = disk.constraint_residuals(q, op.u, p, np.linspace(0, 1, 4))
    assert f_c.shape == (4, 1) and np.array_equal(f_c, disk.constraint_residuals(q, op.u)[0])


def test_calls_that_fit_neither_order_say_what_is_wrong(disk, op):
    p = disk.default_parameters
    with pytest.raises(InputError, match=r"r must have length 0"):   # p twice: the new order
        disk.complete(op.q, op.u, p, p=p)
    with pytest.raises(InputError, match=r"r must have length 0"):   # neither length
        disk.complete(op.q, op.u, [1.0, 2.0])


def test_r_is_checked_and_broadcast_though_unused(bead):
    q, u = np.array([0.6, 0.8]), np.array([0.8, -0.6])
    f_c, f_v = bead.constraint_residuals(q, u, r=np.zeros((3, 1)))
    assert f_c.shape == (3, 1) and np.allclose(f_c, 0.0) and np.allclose(f_v, 0.0)
    q3, _ = bead.complete(q, u, r=[[1.0], [2.0]], p=[2.0])
    assert q3.shape == (2, 2) and np.allclose(q3[:, 1], np.sqrt(4.0 - 0.36))
    for bad in ([np.nan], [[0.0], [np.inf]]):
        with pytest.raises(InputError, match=r"r holds a non-finite value"):
            bead.complete(q, u, r=bad)
        with pytest.raises(InputError, match=r"r holds a non-finite value"):
            bead.constraint_residuals(q, u, r=bad)
    with pytest.raises(InputError, match=r"r must have length 1"):
        bead.complete(q, u, r=[1.0, 2.0])


def test_as_many_inputs_as_parameters(bead):
    """nr == np: the third argument alone cannot tell r from the old p."""
    q, u = np.array([0.6, 0.5]), np.array([0.8, 0.0])
    on_ring_of_2 = np.sqrt(4.0 - 0.36)
    for function in ("complete", "constraint_residuals"):
        call = getattr(bead, function)
        with pytest.raises(InputError, match=r"as many inputs as parameters \(1\).*p=\.\.\."):
            call(q, u, [2.0])
        with pytest.raises(InputError, match=r"as many inputs as parameters"):
            call(q, u, [0.0], [2.0])            # (r, p) or (p, t)
        quietly(lambda: call(q, u, [0.0], None))                 # p None: the new order
        quietly(lambda: call(q, u, [0.0], {"L": 2.0}))           # p a dict: the new order
        quietly(lambda: call(q, u, [0.0], [2.0], 0.0))           # five: the new order
        quietly(lambda: call(q, u, r=[0.0], p=[2.0]))
        with pytest.warns(DeprecationWarning, match=OLD_ORDER):
            call(q, u, [2.0], 0.0)                               # t a number: the old order
    with pytest.warns(DeprecationWarning, match=OLD_ORDER):
        q_old, _ = bead.complete(q, u, [2.0], 0.0)
    assert np.isclose(q_old[1], on_ring_of_2)
    q_new, _ = bead.complete(q, u, [0.0], {"L": 2.0})
    assert np.array_equal(q_new, q_old)
    assert np.isclose(bead.complete(q, u, [5.0], [2.0], 0.0)[0][1], on_ring_of_2)   # r unused
