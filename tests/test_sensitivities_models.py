"""Parameter sensitivities of models written outside the project, against
fourth-order differences of the module itself (the dependent coordinates and
speeds re-solved at each perturbed parameter): time-dependent constraints,
a nonholonomic constraint, time in the kinematics, and a model formed with
LagrangesMethod. Apart from tests/test_sensitivities.py so that the two run
on different test workers.
"""

import numpy as np
import pytest

import codegen
from test_sensitivities import assert_matches_differences


@pytest.mark.parametrize("name", ["driven_pendulum", "sled", "rotating_wire", "belt_sled"])
def test_user_models_against_finite_differences(name, build_dir):
    """Every parameter of the user models (tests/user_models/), written
    outside the project: explicit time in the configuration constraints
    (the driven pendulum: its pivot's amplitude and frequency move the
    dependent coordinates), a nonholonomic constraint (the sled), explicit
    time in the kinematics (the bead on a turning wire), explicit time and
    parameters in a nonholonomic constraint (the belt sled: the belt's
    amplitude and frequency move the dependent speed), at points that are
    not equilibria, with time and inputs."""
    import importlib
    source = importlib.import_module(f"user_models.{name}")
    module = codegen.build(source.make_model().with_sensitivities("all"), output_dir=build_dir)
    for seed in (1, 2):
        q, u, r, p, t = source.operating_point(seed)
        assert_matches_differences(module, q, u, r, p, t=t)
    # a batch (the point lanes: time, inputs and parameters of each point in
    # the lanes) gives each point's own call's values
    points = [source.operating_point(seed) for seed in range(1, 12)]
    q, u, r, p, t = (np.array([point[k] for point in points]) for k in range(5))
    got = module.sensitivities(q, u, r if r.ndim == 2 else None, p, t, steady_tol=None)
    for k, (qk, uk, rk, pk, tk) in enumerate(points):
        one = module.sensitivities(qk, uk, rk if r.ndim == 2 else None, pk, tk, steady_tol=None)
        for field in ("A", "B", "dA", "dB"):
            np.testing.assert_array_equal(getattr(got, field)[k], getattr(one, field), err_msg=f"{name} {k} {field}")


def test_a_lagrange_model_against_finite_differences(build_dir):
    """The four-bar formed with LagrangesMethod through SymPy's System
    (tests/lagrange_models/): its link lengths move the dependent angles."""
    import sympy.physics.mechanics as me
    from lagrange_models import systems
    module = codegen.build(systems.fourbar(me.LagrangesMethod).with_sensitivities("all"),
                           output_dir=build_dir)
    q, u = module.complete([0.7, 0.5, -0.9], [0.6, 0.0, 0.0], [0.4])
    assert_matches_differences(module, q, u, [0.4], t=0.3)
