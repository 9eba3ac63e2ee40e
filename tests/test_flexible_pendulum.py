"""The flexible double pendulum of González et al. (codegen.models.flexible_pendulum),
checked against references that share nothing with the model's SymPy equations
or the generated code (tests/flexible_pendulum_reference.py, NumPy):

* the hanging equilibrium that ``equilibrium()`` finds from the undeformed
  links, against the closed-form static stretch of a hanging rod;
* the eigenvalues there against the floating-frame system linearized by
  another route (mass matrix by quadrature of J^T J, Hessian of the potential
  plus multipliers times constraint Hessians, null-space projection);
* the rigid limit: as E grows, the first two pairs converge like 1/E to the
  closed form of the double pendulum of two thin rods (and a Richardson
  extrapolation lands on it);
* without gravity, the elastic spectrum against a plain linear
  finite-element model of the same beams in world coordinates;
* convergence in n_p of the first four eigenvalues (the paper's Table 3
  quantity; printed, see ``pytest -s``);
* linearize (MCS), linearize_local and the finite generalized eigenvalues of
  the descriptor form (RCS) give the same spectrum.

n_p = 1 and 2 are built once per session. n_p = 5 and 10 take minutes to form
(SymPy's LagrangesMethod, see the model's docstring): set
CODEGEN_TEST_FLEXIBLE_LARGE=1 to include them.
"""

import math
import os

import numpy as np
import pytest
import scipy.linalg

import codegen
from codegen.models import flexible_pendulum

import flexible_pendulum_reference as reference

large = pytest.mark.skipif(not os.environ.get("CODEGEN_TEST_FLEXIBLE_LARGE"),
                           reason="n_p = 5, 10 take minutes to build: set CODEGEN_TEST_FLEXIBLE_LARGE=1")
ELEMENTS = [1, 2, pytest.param(5, marks=large), pytest.param(10, marks=large)]
# González et al., section 4.2: l_p = 4 m, r_p = 0.15 m, rho = 1500 kg/m^3, E = 1e8 N/m^2
PAPER = {"l": 4.0, "r": 0.15, "rho": 1500.0, "E": 1.0e8, "g": 9.81}


class _Built(dict):
    """The compiled model for each element count, built on first use."""

    def __init__(self, build_dir):
        super().__init__()
        self.build_dir = build_dir

    def __missing__(self, elements):
        module = codegen.build(flexible_pendulum.make_model(elements), output_dir=self.build_dir)
        self[elements] = module
        return module


@pytest.fixture(scope="session")
def flexible(build_dir):
    return _Built(build_dir)


def frequencies(A):
    """Imaginary parts of the eigenvalues in the upper half plane, ascending,
    after checking that the eigenvalues come in pairs +/- i omega."""
    s = np.linalg.eigvals(A)
    assert np.abs(s.real).max() <= 1e-9 * np.abs(s).max(), "eigenvalues off the imaginary axis"
    upper = np.sort(s.imag[s.imag > 0])
    assert 2 * len(upper) == len(s)
    return upper


def assert_frequencies_close(actual, expected, label=""):
    """Each frequency to 1e-9 relative plus the rounding of an eigenvalue of
    a stiff A: about eps ||A|| ~ eps omega_max^2 in omega^2, so
    eps omega_max^2 / (2 omega) in omega (a margin of 32 on that: the
    equilibrium found is as accurate as its tolerance, 1e-10 in max|R|, and
    the stiff A amplifies that)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (label, actual.shape, expected.shape)
    tolerance = 1e-9 * expected + 16 * np.finfo(float).eps * expected.max()**2 / expected
    worst = np.argmax(np.abs(actual - expected) / tolerance)
    assert abs(actual[worst] - expected[worst]) <= tolerance[worst], (
        label, worst, actual[worst], expected[worst], tolerance[worst])


def assert_relative(actual, expected, rtol, label=""):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (label, actual.shape, expected.shape)
    error = np.max(np.abs(actual - expected) / np.abs(expected))
    assert error <= rtol, (label, error, actual, expected)


def static_equilibrium(module, elements):
    """``equilibrium()`` from the undeformed hanging links, with its defaults:
    the Jacobian of its residual spans about ten decades here (elastic
    stiffness over mass beside the pendulum's g/l), and its minimum-norm steps
    keep every direction above the rounding level."""
    start = codegen.operating_point("flexible_pendulum", "hanging", elements=elements)
    return module.equilibrium(start.q)


# -- the model -------------------------------------------------------------------------------


@pytest.mark.parametrize("elements", [1, 2])
def test_model_has_the_papers_coordinates_and_constraints(elements):
    model = flexible_pendulum.make_model(elements)
    assert model.n == model.o == 6 * elements + 12
    assert model.l == model.m == 10
    assert dict(zip(model.p_names, model.parameter_values)) == PAPER
    assert flexible_pendulum.DEFAULT_PARAMETERS == PAPER
    assert model.q_names == flexible_pendulum.coordinate_names(elements)
    assert model.q_names[:3] == ["x1", "y1", "theta1"] and model.q_names[-3:] == [
        f"q2_fx{elements + 1}", f"q2_fy{elements + 1}", f"q2_ftheta{elements + 1}"]
    dependent = [str(q).replace("(t)", "") for q in model.q_dependent]
    assert dependent == ["x1", "y1", "q1_fx1", "q1_fy1", "q1_ftheta1",
                         "x2", "y2", "q2_fx1", "q2_fy1", "q2_ftheta1"]
    assert model.name == ("flexible_pendulum" if elements == flexible_pendulum.DEFAULT_ELEMENTS
                          else f"flexible_pendulum{elements}")


@pytest.mark.parametrize("elements", [0, -1, 1.5, True, "2"])
def test_bad_element_counts_are_refused(elements):
    with pytest.raises((ValueError, TypeError)):
        flexible_pendulum.make_model(elements)


def test_element_matrices_are_the_textbook_ones():
    """The SymPy-derived consistent mass and stiffness of one element against
    the textbook matrices of the reference, at a sample length."""
    element = flexible_pendulum.beam_element()
    le, rho_A, E_A, E_I = 0.7, 3.0, 5.0, 2.0
    mass = np.array(element.M.subs(element.le, le), dtype=float) * rho_A
    stiffness = (np.array(element.K_axial.subs(element.le, le), dtype=float) * E_A
                 + np.array(element.K_bending.subs(element.le, le), dtype=float) * E_I)
    np.testing.assert_allclose(mass, reference.element_mass(rho_A, le), rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(stiffness, reference.element_stiffness(E_A, E_I, le), rtol=1e-14, atol=1e-14)
    for xi in (0.0, 0.3, 1.0):
        shape = np.array(element.S.subs({element.xi: xi, element.le: le}), dtype=float)
        np.testing.assert_allclose(shape, reference.shape_functions(xi, le), atol=1e-15)


# -- equilibrium -----------------------------------------------------------------------------


@pytest.mark.parametrize("elements", ELEMENTS)
def test_equilibrium_finds_the_static_stretch(flexible, elements):
    """From the undeformed links, equilibrium() finds the rods stretched under
    their own weight: the closed form of a hanging rod at the nodes (linear
    elements are exact there), the angles -pi/2, no bending; the model's
    own ``equilibrium`` point is the same."""
    module = flexible[elements]
    expected = reference.hanging_coordinates(PAPER, elements)
    hanging = codegen.operating_point("flexible_pendulum", "hanging", elements=elements)
    assert np.abs(hanging.q - expected).max() > 3e-3            # the stretch of link 1's end
    q, u = static_equilibrium(module, elements)
    assert np.abs(q - expected).max() < 1e-12, np.abs(q - expected).max()
    assert np.all(u == 0)
    qd, ud = module.state_derivative(q, u)
    assert np.abs(ud).max() < 1e-9
    f_c, f_v = module.constraint_residuals(q, u)
    assert np.abs(f_c).max() < 1e-14 and np.abs(f_v).max() == 0
    point = codegen.operating_point("flexible_pendulum", "equilibrium", elements=elements)
    np.testing.assert_allclose(point.q, expected, rtol=0, atol=1e-14)


# -- eigenvalues -------------------------------------------------------------------------------


@pytest.mark.parametrize("elements", ELEMENTS)
def test_eigenvalues_match_the_floating_frame_reference(flexible, elements):
    """All 6 n_p + 2 frequencies at the hanging equilibrium, against the
    reference's linearization of the same system by another route."""
    module = flexible[elements]
    q, u = static_equilibrium(module, elements)
    A, _ = module.linearize(q, u)
    assert A.shape == (2 * (6 * elements + 2),) * 2
    assert_frequencies_close(frequencies(A), reference.floating_frame_frequencies(PAPER, elements))


@pytest.mark.parametrize("elements", ELEMENTS)
def test_rigid_limit(flexible, elements):
    """E -> infinity: the first two pairs tend to the rigid double pendulum of
    two thin rods, with an error that falls like 1/E (tenfold per decade);
    extrapolating out the 1/E term lands on the closed form."""
    module = flexible[elements]
    rigid = np.array(reference.rigid_double_pendulum(PAPER))
    moduli = [1e10, 1e11, 1e12]
    slowest = []
    for E in moduli:
        p = module.parameters(E=E)
        q = reference.hanging_coordinates(dict(PAPER, E=E), elements)   # exact static stretch
        u = np.zeros_like(q)
        assert np.abs(module.state_derivative(q, u, p=p)[1]).max() < 1e-9
        A, _ = module.linearize(q, u, p=p)
        slowest.append(frequencies(A)[:2])
    errors = [(w - rigid) / rigid for w in slowest]
    assert all(np.all(e < 0) for e in errors)         # flexibility lowers the frequencies
    for coarse, fine in zip(errors, errors[1:]):
        assert np.all((8 < coarse / fine) & (coarse / fine < 12)), (coarse, fine)
    assert np.abs(errors[-1]).max() < 3e-6
    E1, E2 = moduli[:2]
    extrapolated = (E2 * slowest[1] - E1 * slowest[0]) / (E2 - E1)
    assert_relative(extrapolated, rigid, 1e-7)


@pytest.mark.parametrize("elements", ELEMENTS)
def test_elastic_spectrum_without_gravity_is_the_plain_finite_element_one(flexible, elements):
    """g = 0: the undeformed links are an equilibrium; two double zeros (the
    links turning freely about the pins) and the 6 n_p elastic frequencies of
    the plain linear finite-element model of the same beams."""
    module = flexible[elements]
    p = module.parameters(g=0.0)
    hanging = codegen.operating_point("flexible_pendulum", "hanging", elements=elements,
                                      parameters={"g": 0.0})
    A, _ = module.linearize(hanging.q, hanging.u, p=p)
    s = np.linalg.eigvals(A)
    s = s[np.argsort(np.abs(s))]
    assert np.abs(s[:4]).max() < 1e-4 * np.abs(s[4])      # a Jordan pair each: sqrt(eps) spread
    elastic = np.sort(s[4:].imag[s[4:].imag > 0])
    expected = reference.plain_fe_frequencies(dict(PAPER, g=0.0), elements)
    assert np.abs(expected[:2]).max() < 1e-3 and len(elastic) == len(expected) - 2 == 6 * elements
    assert np.abs(s[4:].real).max() <= 1e-9 * np.abs(s).max()
    assert_frequencies_close(elastic, expected[2:])


@pytest.mark.parametrize("elements", ELEMENTS)
def test_linearize_local_and_descriptor_forms_agree(flexible, elements):
    """The MCS spectrum (linearize: partition), the local form (orthonormal
    null-space bases) and the finite generalized eigenvalues of the RCS
    descriptor form (coordinates, speeds, multipliers) are the same."""
    module = flexible[elements]
    q, u = static_equilibrium(module, elements)
    A, _ = module.linearize(q, u)
    expected = frequencies(A)
    local = module.linearize_local(q, u)
    assert (local.rank_c, local.rank_v, local.dof) == (10, 10, 6 * elements + 2)
    assert_frequencies_close(frequencies(local.A), expected, "local")
    E, A_d, _ = module.linearize_descriptor(q, u)
    s = scipy.linalg.eigvals(A_d, E)
    finite = s[np.isfinite(s) & (np.abs(s) < 1e3 * expected.max())]
    assert len(finite) == len(expected) * 2
    assert np.abs(finite.real).max() <= 1e-8 * expected.max()
    assert_frequencies_close(np.sort(finite.imag[finite.imag > 0]), expected, "descriptor")


def test_first_four_eigenvalues_converge_in_the_element_count(flexible):
    """The paper's Table 3 quantity: the first four frequencies for n_p = 1,
    2 (and 5, 10 with CODEGEN_TEST_FLEXIBLE_LARGE=1) from the built models
    approach the reference's n_p = 40 values from above (nested meshes:
    Rayleigh-Ritz), the error shrinking with n_p."""
    counts = [1, 2] + ([5, 10] if os.environ.get("CODEGEN_TEST_FLEXIBLE_LARGE") else [])
    converged = reference.floating_frame_frequencies(PAPER, 40)[:4]
    print("\nfirst four eigenvalues of the flexible double pendulum, +/- i omega (rad/s):")
    errors = []
    for elements in counts:
        module = flexible[elements]
        q, u = static_equilibrium(module, elements)
        first = frequencies(module.linearize(q, u)[0])[:4]
        print(f"  n_p = {elements:2d}: " + ", ".join(f"{w:.6f}" for w in first))
        assert np.all(first > converged)
        errors.append((first - converged) / converged)
    print(f"  n_p = 40 (reference): " + ", ".join(f"{w:.6f}" for w in converged))
    for coarse, fine in zip(errors, errors[1:]):
        assert np.all(fine < coarse), (coarse, fine)
    rigid = reference.rigid_double_pendulum(PAPER)
    print(f"  rigid limit (E -> infinity): {rigid[0]:.6f}, {rigid[1]:.6f}")


def test_expected_eigenvalues_line_names_the_rigid_limit():
    text = flexible_pendulum.expected_eigenvalues(PAPER, "equilibrium")
    slow, fast = reference.rigid_double_pendulum(PAPER)
    assert f"{slow:.6g}" in text and f"{fast:.6g}" in text and "rigid" in text
    assert flexible_pendulum.expected_eigenvalues(PAPER, "hanging") is None


# -- the reference itself (NumPy only) ------------------------------------------------------


@pytest.mark.parametrize("elements", [1, 2, 5])
def test_reference_routes_agree_without_gravity(elements):
    """The reference's floating-frame route and its plain finite elements
    share only the element matrices' textbook formulas."""
    parameters = dict(PAPER, g=0.0)
    floating = reference.floating_frame_frequencies(parameters, elements)
    plain = reference.plain_fe_frequencies(parameters, elements)
    assert np.abs(floating[:2]).max() < 1e-3 and np.abs(plain[:2]).max() < 1e-3
    assert_frequencies_close(floating[2:], plain[2:])


@pytest.mark.parametrize("elements", [1, 3])
def test_reference_closed_form_stretch_is_an_equilibrium(elements):
    """grad V + J^T lambda = 0 at the closed-form point; the ground carries
    the weight of both links, the pin between them the weight of link 2."""
    system = reference.FloatingFrame(PAPER, elements)
    lam, residual = system.multipliers(reference.hanging_coordinates(PAPER, elements))
    weight = system.rho_A * PAPER["l"] * PAPER["g"]
    assert residual < 1e-12 * weight
    np.testing.assert_allclose(lam[:4], [0.0, -2 * weight, 0.0, weight], rtol=1e-12, atol=1e-9)


def test_reference_rigid_double_pendulum_closed_form():
    """The closed form against the generalized eigenvalues of its own M, K."""
    l, g = PAPER["l"], PAPER["g"]
    M = l**2 * np.array([[4 / 3, 1 / 2], [1 / 2, 1 / 3]])
    K = g * l * np.array([[3 / 2, 0.0], [0.0, 1 / 2]])
    expected = np.sqrt(scipy.linalg.eigh(K, M, eigvals_only=True))
    np.testing.assert_allclose(reference.rigid_double_pendulum(PAPER), expected, rtol=1e-14)
    assert math.isclose(flexible_pendulum.rigid_limit(PAPER)[0], expected[0], rel_tol=1e-14)
