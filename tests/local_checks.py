"""Comparisons shared by the tests of the local and descriptor forms (issue 11)."""

import functools
import math

import numpy as np
import sympy as sm

G = 9.81
# González et al., section 5.1: the one-loop four-bar at its singular flat
# configuration (k = 0, gravity along the rods); the closed forms are those of
# the minimum-norm multipliers (codegen/models/fourbar.py's docstring)
SINGULAR_CLOSED_FORM = (math.sqrt(6 * G / 5), math.sqrt(2 * G))     # 3.43103..., 4.42944...
PAPER_DIGITS = (3.4310, 4.4294)


def sorted_eigenvalues(values):
    values = np.asarray(values, dtype=complex)
    return values[np.lexsort((np.round(values.real, 6), np.round(values.imag, 6)))]


def assert_eigenvalues_close(actual, expected, rtol, label="", zero_tol=1e-7):
    """Sorted eigenvalues agree to rtol relative to the largest; a cluster of
    zeros (Jordan blocks: computed as +/- sqrt(eps)-sized values) to zero_tol."""
    actual, expected = sorted_eigenvalues(actual), sorted_eigenvalues(expected)
    assert actual.shape == expected.shape, (label, actual, expected)
    scale = max(1.0, float(np.abs(expected).max()))
    zero = (np.abs(expected) < zero_tol) & (np.abs(actual) < zero_tol)
    assert np.abs(actual[zero] - expected[zero]).max(initial=0.0) <= zero_tol, (label, actual, expected)
    assert np.abs(actual[~zero] - expected[~zero]).max(initial=0.0) <= rtol * scale, (label, actual, expected)


def assert_close(actual, expected, rtol, label=""):
    actual, expected = np.asarray(actual, float), np.asarray(expected, float)
    assert actual.shape == expected.shape, (label, actual.shape, expected.shape)
    scale = max(1.0, float(np.abs(expected).max())) if expected.size else 1.0
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale, err_msg=label)


def assert_gonzalez_singular_eigenvalues(eigenvalues):
    """Four eigenvalues +/-3.4310i, +/-4.4294i: the closed forms to 1e-9, the
    paper's digits to their last place."""
    eigenvalues = np.asarray(eigenvalues)
    assert len(eigenvalues) == 4, eigenvalues
    assert np.abs(eigenvalues.real).max() < 1e-8
    omega = np.sort(np.abs(eigenvalues.imag))
    np.testing.assert_allclose(omega, np.repeat(SINGULAR_CLOSED_FORM, 2), rtol=1e-9)
    np.testing.assert_allclose(omega, np.repeat(PAPER_DIGITS, 2), atol=5e-5)


def assert_same_local_form(result, other, rtol=1e-9):
    """Two local forms at one point in other orthonormal bases of the same
    spaces: with R = blockdiag(N_q,other^T N_q, N_u,other^T N_u) (checked
    orthogonal), A = R^T A_other R, B = R^T B_other, T = T_other R."""
    R_q = np.asarray(other.N_q).T @ np.asarray(result.N_q)
    R_u = np.asarray(other.N_u).T @ np.asarray(result.N_u)
    R = np.block([[R_q, np.zeros((R_q.shape[0], R_u.shape[1]))],
                  [np.zeros((R_u.shape[0], R_q.shape[1])), R_u]])
    np.testing.assert_allclose(R.T @ R, np.eye(R.shape[0]), atol=1e-10,
                               err_msg="the bases span the same spaces")
    assert_close(result.A, R.T @ np.asarray(other.A) @ R, rtol, "A through the change of basis")
    assert_close(result.B, R.T @ np.asarray(other.B), rtol, "B through the change of basis")
    assert_close(result.embedding, np.asarray(other.embedding) @ R, rtol,
                 "T through the change of basis")


@functools.lru_cache(maxsize=None)
def parallelogram_one_dof(loops):
    """The González N-loop four-bar's parallelogram motion (one degree of
    freedom, crank angle phi) from its geometry, independently of the
    models: I(phi), V'(phi), V''(phi), C(phi) (inertia, slope and curvature
    of the potential, damping);
    crank i from A_i = (i l, 0) at angle phi, coupler i translating with B_i,
    spring and damper of loop i on A_{i-1} B_i; lambdified as functions of
    (phi, parameters)."""
    phi, rate = sm.symbols("phi phi_rate")
    l, m, g, gamma, k, l0, c = sm.symbols("l m g gravity_angle k l0 c")
    e = sm.Matrix([sm.cos(phi), sm.sin(phi)])
    down = g * sm.Matrix([sm.cos(gamma), sm.sin(gamma)])
    A = [sm.Matrix([i * l, 0]) for i in range(loops + 1)]
    B = [A[i] + l * e for i in range(loops + 1)]
    kinetic, potential, rayleigh = 0, 0, 0
    for i in range(loops + 1):                      # cranks: rotation about A_i
        centre = A[i] + l / 2 * e
        v = centre.diff(phi) * rate
        kinetic += m * v.dot(v) / 2 + m * l**2 / 12 * rate**2 / 2
        potential -= m * down.dot(centre)
    for i in range(1, loops + 1):                   # couplers: translation
        centre = (B[i - 1] + B[i]) / 2
        v = centre.diff(phi) * rate
        kinetic += m * v.dot(v) / 2
        potential -= m * down.dot(centre)
        diagonal = B[i] - A[i - 1]
        length = sm.sqrt(diagonal.dot(diagonal))
        potential += k * (length - l0) ** 2 / 2
        rayleigh += c * (length.diff(phi) * rate) ** 2 / 2
    args = (phi, l, m, g, gamma, k, l0, c)
    inertia = sm.lambdify(args, sm.diff(kinetic, rate, 2))
    slope = sm.lambdify(args, sm.diff(potential, phi))
    curvature = sm.lambdify(args, sm.diff(potential, phi, 2))
    damping = sm.lambdify(args, sm.diff(rayleigh, rate, 2))
    return inertia, slope, curvature, damping
