"""Models built from joints (issue 12, item 2): a ``System`` (bodies, joints,
loads, holonomic constraints) after ``form_eoms()`` with KanesMethod or with
LagrangesMethod, and a (deprecated) ``JointsMethod``, go to ``Model``
directly. Each system of tests/lagrange_models/systems.py is formed both
ways; the joints' speeds are the coordinate rates both times (Kane: the
joints' kinematic equations u = q'; Lagrange: the joints get q' as speeds),
so the two builds have the same states, and they must give the same A and B
to rounding. References:

* the Kane form of the same System, built through the pipeline;
* constrained finite differences of SymPy's Lagrange equations of the
  System (tests/lagrange_models/lagrange_reference.py);
* a closed form: the cart pendulum with a torsional spring k at the pin,
  hanging, oscillates at omega^2 = (mc + mp)(mp g l + k)/(mc mp l^2).

Systems: SymPy's cart pendulum (PrismaticJoint and PinJoint, a holonomic
constraint), a four-bar closed by two holonomic constraints after a chain of
three PinJoints, and the cart pendulum without the constraint through
JointsMethod.
"""

import math
from collections import namedtuple

import numpy as np
import pytest
import sympy as sm
import sympy.physics.mechanics as me

import codegen
from codegen import Model
from codegen.errors import ModelError

from lagrange_models import systems
from lagrange_models.lagrange_reference import build_both_ways
from reference import assert_matrices_close

# (q, u, r) guesses; dependent coordinates and speeds completed
SYSTEMS = {
    "cart_pendulum": (systems.cart_pendulum,     # q = (qp, qc)
                      [([0.4, 0.0], [0.9, 0.0], [1.3]), ([-1.1, 0.0], [-0.3, 0.0], [-0.5])]),
    "fourbar": (systems.fourbar,                 # relative angles q1, q2, q3
                [([0.3, 0.1, 1.2 + math.pi], [1.0, 0.0, 0.0], [0.4]),
                 ([2.4, -1.9, 1.4 + math.pi], [-1.7, 0.0, 0.0], [-0.2])]),
    "joints_cart_pendulum": (systems.joints_cart_pendulum,   # q = (qc, qp)
                             [([0.2, 0.5], [-0.4, 1.1], [0.7]), ([0.0, -2.0], [0.3, 0.0], [0.0])]),
}

Case = namedtuple("Case", "name lagrange_model lagrange kane ref points")


class _Built(dict):
    """Each system formed and built both ways once per module."""

    def __init__(self, build_dir):
        super().__init__()
        self.build_dir = build_dir

    def __missing__(self, name):
        make, guesses = SYSTEMS[name]
        lagrange_model = make(me.LagrangesMethod)
        lagrange, kane, ref, points = build_both_ways(lagrange_model, make(me.KanesMethod),
                                                      self.build_dir, guesses)
        self[name] = Case(name, lagrange_model, lagrange, kane, ref, points)
        return self[name]


@pytest.fixture(scope="module")
def built(build_dir):
    return _Built(build_dir)


@pytest.fixture(scope="module", params=list(SYSTEMS))
def case(request, built):
    return built[request.param]


def test_the_same_states_both_ways(case):
    """Coordinates in the System's order (q_ind, q_dep) both ways; Lagrange's
    speeds are the coordinate rates, Kane's the joints' speeds u = q'."""
    lagrange, kane = case.lagrange, case.kane
    assert lagrange.q_names == kane.q_names
    assert lagrange.u_names == tuple(f"{q}_rate" for q in lagrange.q_names)
    rename = dict(zip(lagrange.u_names, kane.u_names)) | {q: q for q in lagrange.q_names}
    assert tuple(rename[name] for name in lagrange.state_names) == kane.state_names


def test_the_systems_partition_is_the_default(built):
    """q_dep of the System, and its u_dep (the rates of q_dep) as dependent speeds."""
    model = built["fourbar"].lagrange_model
    assert [str(s) for s in model.q_dependent] == ["q2(t)", "q3(t)"]
    assert [str(s) for s in model.u_dependent] == ["q2_rate(t)", "q3_rate(t)"]
    assert model.multipliers == 2


def test_same_A_and_B_as_kanes_method(case):
    """The coordinate rates are the Kane speeds (u = q' for every joint): the
    same point in both, the same A and B."""
    for q, u, r in case.points:
        assert np.abs(np.concatenate(case.kane.constraint_residuals(q, u) + ([0.0],))).max() < 1e-12
        A, B = case.lagrange.linearize(q, u, r)
        A_kane, B_kane = case.kane.linearize(q, u, r)
        assert np.abs(A).max() > 1.0
        assert_matrices_close(A, A_kane, 1e-10, f"{case.name} A at q={q}")
        assert_matrices_close(B, B_kane, 1e-10, f"{case.name} B at q={q}")


def test_linearize_matches_constrained_finite_differences_of_sympy_lagrange(case):
    for q, u, r in case.points:
        qd, ud = case.lagrange.state_derivative(q, u, r)
        assert_matrices_close(np.concatenate([qd, ud]),
                              np.concatenate(case.ref.state_derivative(q, u, r)), 1e-11)
        A, B = case.lagrange.linearize(q, u, r)
        A_fd, B_fd = case.ref.constrained_fd_AB(q, u, r)
        assert_matrices_close(A, A_fd, 1e-6, f"{case.name} A at q={q}")
        assert_matrices_close(B, B_fd, 1e-6, f"{case.name} B at q={q}")


def test_cart_pendulum_with_a_spring_closed_form(built):
    c = built["joints_cart_pendulum"]
    p = systems.CART_PENDULUM
    g, l, mc, mp, k = (p[name] for name in ("g", "l", "mc", "mp", "k"))
    omega = math.sqrt((mc + mp) * (mp * g * l + k) / (mc * mp * l**2))
    for compiled in (c.lagrange, c.kane):
        eigenvalues = np.linalg.eigvals(compiled.linearize([0.0, 0.0], [0.0, 0.0], [0.0])[0])
        eigenvalues = sorted(eigenvalues, key=lambda z: (round(z.imag, 9), round(z.real, 9)))
        np.testing.assert_allclose(eigenvalues, [-1j * omega, 0, 0, 1j * omega], atol=1e-10)


def _pendulum_system(speed):
    g, l, m = sm.symbols("g l m")
    q = me.dynamicsymbols("q")
    speed = q.diff() if speed is None else speed
    rail = me.RigidBody("rail")
    bob = me.Particle("bob", mass=m)
    bob_frame = me.ReferenceFrame("bob_frame")
    system = me.System.from_newtonian(rail)
    system.add_joints(me.PinJoint("pin", rail, bob, q, speed, joint_axis=rail.z,
                                  child_interframe=bob_frame, child_point=l * bob_frame.y))
    system.apply_uniform_gravity(-g * system.y)
    return system, {g: 9.81, l: 0.5, m: 1.0}


def test_lagrange_system_with_joint_speeds_that_are_not_rates_is_refused():
    """SymPy forms Lagrange's equations from q' only: a joint speed u drops
    out (here the equations are 0 = 0), so the model is refused, saying how
    to write the joint."""
    system, parameters = _pendulum_system(me.dynamicsymbols("u"))
    system.form_eoms(me.LagrangesMethod)
    assert system.eom_method.eom == sm.Matrix([0])
    with pytest.raises(ModelError, match=r"formed with LagrangesMethod, but its speeds \['u'\] are not "
                                         r"the coordinate rates.*speeds=q.diff\(\)") as error:
        Model(system, parameters, name="pin_with_speed_u")
    assert "kanes_equations" not in str(error.value)


def test_lagrange_system_with_rates_as_speeds_is_accepted_and_unformed_is_refused():
    system, parameters = _pendulum_system(None)
    with pytest.raises(ModelError, match=r"call System.form_eoms\(\) before Model"):
        Model(system, parameters, name="pin")
    system.form_eoms(me.LagrangesMethod)
    model = Model(system, parameters, name="pin")
    assert (model.q_names, model.u_names, model.lagrange) == (["q"], ["q_rate"], system.eom_method)
