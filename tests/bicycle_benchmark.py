"""Independent reference: the linearized Carvallo-Whipple bicycle of
Meijaard, Papadopoulos, Ruina & Schwab (2007), Proc. R. Soc. A 463, 1955-1982.

Plain numpy/scipy transcription of the paper's Appendix A (canonical matrices
M, C1, K0, K2 of ``M q'' + v C1 q' + (g K0 + v^2 K2) q = f`` for
q = [roll, steer]); nothing here depends on ``codegen``.
"""

import math

import numpy as np
from scipy.optimize import brentq


def benchmark_parameters():
    """The 26 benchmark parameter values (Table 1 of the paper), SI units."""
    return {
        "w": 1.02, "c": 0.08, "lam": math.pi / 10.0, "g": 9.81,
        "rR": 0.3, "mR": 2.0, "IRxx": 0.0603, "IRyy": 0.12,
        "xB": 0.3, "zB": -0.9, "mB": 85.0,
        "IBxx": 9.2, "IByy": 11.0, "IBzz": 2.8, "IBxz": 2.4,
        "xH": 0.9, "zH": -0.7, "mH": 4.0,
        "IHxx": 0.05892, "IHyy": 0.06, "IHzz": 0.00708, "IHxz": -0.00756,
        "rF": 0.35, "mF": 3.0, "IFxx": 0.1405, "IFyy": 0.28,
    }


def canonical_matrices(par):
    """(M, C1, K0, K2), each 2x2 for [roll, steer], from the paper's Appendix A."""
    w, c, lam = par["w"], par["c"], par["lam"]
    rR, mR, IRxx, IRyy = par["rR"], par["mR"], par["IRxx"], par["IRyy"]
    xB, zB, mB = par["xB"], par["zB"], par["mB"]
    IBxx, IBzz, IBxz = par["IBxx"], par["IBzz"], par["IBxz"]
    xH, zH, mH = par["xH"], par["zH"], par["mH"]
    IHxx, IHzz, IHxz = par["IHxx"], par["IHzz"], par["IHxz"]
    rF, mF, IFxx, IFyy = par["rF"], par["mF"], par["IFxx"], par["IFyy"]
    sin_lam, cos_lam = math.sin(lam), math.cos(lam)

    # Whole bicycle: mass, centre of mass, inertia about the rear contact point.
    mass_total = mR + mB + mH + mF
    x_total = (xB * mB + xH * mH + w * mF) / mass_total
    z_total = (-rR * mR + zB * mB + zH * mH - rF * mF) / mass_total
    IRzz, IFzz = IRxx, IFxx
    ITxx = IRxx + IBxx + IHxx + IFxx + mR * rR**2 + mB * zB**2 + mH * zH**2 + mF * rF**2
    ITxz = IBxz + IHxz - mB * xB * zB - mH * xH * zH + mF * w * rF
    ITzz = IRzz + IBzz + IHzz + IFzz + mB * xB**2 + mH * xH**2 + mF * w**2

    # Front assembly (fork/handlebar plus front wheel).
    mass_front = mH + mF
    x_front = (xH * mH + w * mF) / mass_front
    z_front = (zH * mH - rF * mF) / mass_front
    IAxx = IHxx + IFxx + mH * (zH - z_front)**2 + mF * (rF + z_front)**2
    IAxz = IHxz - mH * (xH - x_front) * (zH - z_front) + mF * (w - x_front) * (rF + z_front)
    IAzz = IHzz + IFzz + mH * (xH - x_front)**2 + mF * (w - x_front)**2
    # Distance of its mass centre ahead of the steer axis, and its inertia
    # about / products with the steer axis.
    u_front = (x_front - w - c) * cos_lam - z_front * sin_lam
    IA_ll = (mass_front * u_front**2 + IAxx * sin_lam**2
             + 2.0 * IAxz * sin_lam * cos_lam + IAzz * cos_lam**2)
    IA_lx = -mass_front * u_front * z_front + IAxx * sin_lam + IAxz * cos_lam
    IA_lz = mass_front * u_front * x_front + IAxz * sin_lam + IAzz * cos_lam

    mu = c / w * cos_lam  # trail ratio
    S_R = IRyy / rR
    S_F = IFyy / rF
    S_T = S_R + S_F
    S_A = mass_front * u_front + mu * mass_total * x_total

    M = np.array([
        [ITxx, IA_lx + mu * ITxz],
        [IA_lx + mu * ITxz, IA_ll + 2.0 * mu * IA_lz + mu**2 * ITzz],
    ])
    K0 = np.array([
        [mass_total * z_total, -S_A],
        [-S_A, -S_A * sin_lam],
    ])
    K2 = np.array([
        [0.0, (S_T - mass_total * z_total) / w * cos_lam],
        [0.0, (S_A + S_F * sin_lam) / w * cos_lam],
    ])
    C1 = np.array([
        [0.0, mu * S_T + S_F * cos_lam + ITxz / w * cos_lam - mu * mass_total * z_total],
        [-(mu * S_T + S_F * cos_lam), IA_lz / w * cos_lam + mu * (S_A + ITzz / w * cos_lam)],
    ])
    return M, C1, K0, K2


def state_matrix(par, v):
    """4x4 A of x' = A x for x = [roll, steer, roll_rate, steer_rate]."""
    M, C1, K0, K2 = canonical_matrices(par)
    M_inv = np.linalg.inv(M)
    return np.block([
        [np.zeros((2, 2)), np.eye(2)],
        [-M_inv @ (par["g"] * K0 + v**2 * K2), -M_inv @ (v * C1)],
    ])


def input_matrix(par):
    """4x2 B of x' = A x + B [T_roll, T_steer]."""
    M, _, _, _ = canonical_matrices(par)
    return np.vstack([np.zeros((2, 2)), np.linalg.inv(M)])


def eigenvalues(par, v):
    """Eigenvalues of the 4x4 state matrix, sorted by (real, imaginary) part."""
    return np.sort_complex(np.linalg.eigvals(state_matrix(par, v)))


def _weave_real_part(par, v):
    """Real part of the oscillatory (weave) pair; -inf when there is none."""
    lam = eigenvalues(par, v)
    oscillatory = lam[np.abs(lam.imag) > 1e-12]
    return float(np.max(oscillatory.real)) if oscillatory.size else -np.inf


def _capsize_eigenvalue(par, v):
    """The real eigenvalue closest to zero (the capsize mode above weave speed)."""
    lam = eigenvalues(par, v)
    real = lam[np.abs(lam.imag) <= 1e-12].real
    return float(real[np.argmin(np.abs(real))])


def weave_speed(par, bracket=(3.0, 5.0)):
    """Speed where the weave pair's real part crosses zero."""
    return brentq(lambda v: _weave_real_part(par, v), *bracket, xtol=1e-15, rtol=4 * np.finfo(float).eps)


def capsize_speed(par, bracket=(5.5, 7.0)):
    """Speed where the capsize eigenvalue crosses zero."""
    return brentq(lambda v: _capsize_eigenvalue(par, v), *bracket, xtol=1e-15, rtol=4 * np.finfo(float).eps)
