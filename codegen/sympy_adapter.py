"""Every access to SymPy's private attributes, in one place, with a version check.

``KanesMethod`` keeps the equations a user wrote in private attributes
(``_qdep``, ``_f_h``, ``_f_nh``, ``_k_kqdot_implicit``, ``_fr``, ...),
``LagrangesMethod`` its holonomic constraints and its equations without the
multiplier terms in others (``_hol_coneqs``, ``_m_d``, ``_f_d``), and
``Linearizer`` keeps its partition and its lazy setup in others (``_qd``,
``_setup_done``, ...). :mod:`codegen.eom` forms Kane's and Lagrange's equations
faster than these classes do and leaves them in the state their own methods
leave them in: what it reads and writes of them is here too. SymPy may
rename or change them in any release, so codegen reads (and writes) them only
through the functions below, and only with a SymPy
version these functions were checked with (:data:`TESTED_SYMPY`): another
version raises :class:`UntestedSymPyError` on import, saying what to do.
"""

from __future__ import annotations

import os
import re
from collections import namedtuple

import sympy as sm
from sympy.physics.mechanics import dynamicsymbols

from .errors import CodegenError

# (major, minor) releases of SymPy whose private attributes this module was
# checked against (the tests pin sympy==1.14.0: CSE output depends on it too)
TESTED_SYMPY = ((1, 14),)
# set to 1 to run with another SymPy anyway, at your own risk
ALLOW_UNTESTED = "CODEGEN_ALLOW_UNTESTED_SYMPY"


class UntestedSymPyError(CodegenError, ImportError):
    """The installed SymPy is not one whose internals codegen was checked with."""


def _release(version):
    """``"1.14.0"`` -> (1, 14); None if the string does not start that way."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def check_sympy_version(version=sm.__version__):
    """Raise :class:`UntestedSymPyError` unless ``version`` is a tested release
    (or ``$CODEGEN_ALLOW_UNTESTED_SYMPY`` is set)."""
    if _release(version) in TESTED_SYMPY or os.environ.get(ALLOW_UNTESTED):
        return
    tested = ", ".join(f"{major}.{minor}.x" for major, minor in TESTED_SYMPY)
    raise UntestedSymPyError(
        f"codegen reads private attributes of SymPy's KanesMethod, LagrangesMethod and "
        f"Linearizer, checked with SymPy {tested} only; SymPy {version} is installed. "
        f"Install a tested release "
        f"(pip install 'sympy=={TESTED_SYMPY[-1][0]}.{TESTED_SYMPY[-1][1]}.0'), or set "
        f"{ALLOW_UNTESTED}=1 to try this one (and check the results against the tests)")


check_sympy_version()


def _column(rows):
    """A column matrix of ``rows`` (a possibly empty matrix or sequence)."""
    rows = list(rows) if rows is not None else []
    return sm.Matrix(rows) if rows else sm.zeros(0, 1)


# -- KanesMethod -------------------------------------------------------------------------


def dependent_coordinates(kane):
    """The dependent coordinates q_d, in the KanesMethod's order."""
    return list(kane._qdep)


def dependent_speeds(kane):
    """The dependent speeds u_d, in the KanesMethod's order."""
    return list(kane._udep)


def auxiliary_speeds(kane):
    """The auxiliary speeds (empty for most models)."""
    uaux = getattr(kane, "_uaux", None)
    return [] if uaux is None else list(uaux)


def fr_frstar(kane):
    """``(Fr, Fr*)`` of ``kanes_equations()``; ``(None, None)`` before it was called."""
    return getattr(kane, "_fr", None), getattr(kane, "_frstar", None)


def inertial_frame(kane):
    """The inertial reference frame the KanesMethod was made with."""
    return kane._inertial


def kinematic_coefficients(kane):
    """``(k_kqdot, k_ku, f_k)`` of the kinematic equations as the user wrote
    them, ``k_kqdot qd + k_ku u + f_k = 0``, before KanesMethod's symbolic solve
    for qd (SymPy >= 1.13 keeps that implicit form; older releases only the
    solved one)."""
    return (getattr(kane, "_k_kqdot_implicit", kane._k_kqdot),
            getattr(kane, "_k_ku_implicit", kane._k_ku),
            getattr(kane, "_f_k_implicit", kane._f_k))


def kinematic_equations(kane):
    """``k_kqdot qd + k_ku u + f_k``: the residuals of :func:`kinematic_coefficients`."""
    k_kqdot, k_ku, f_k = kinematic_coefficients(kane)
    qd = sm.Matrix([qi.diff(dynamicsymbols._t) for qi in kane.q])
    return k_kqdot * qd + k_ku * sm.Matrix(kane.u) + f_k


def solved_kinematic_terms(kane):
    """``f_k`` of the solved kinematic equations ``qd = -f_k - k_ku u`` (k_kqdot
    the identity): the terms free of qd and u, as ``to_linearizer`` uses them."""
    return kane._f_k


def configuration_constraints(kane):
    """``f_c(q, t)``: a column of l residuals (0 x 1 without constraints)."""
    return _column(kane._f_h)


def velocity_constraint_coefficients(kane):
    """``(k_nh, f_nh)`` of the velocity constraints ``k_nh u + f_nh = 0`` (linear
    in u, as SymPy splits them; empty matrices without constraints)."""
    return kane._k_nh, kane._f_nh


def velocity_constraints(kane):
    """``f_v(q, u, t) = k_nh u + f_nh``: a column of m residuals (0 x 1 without)."""
    k_nh, f_nh = velocity_constraint_coefficients(kane)
    if not len(f_nh):
        return sm.zeros(0, 1)
    return f_nh + k_nh * sm.Matrix(kane.u)


# What KanesMethod._form_fr and _form_frstar read (codegen.eom forms them again)
KaneFormation = namedtuple("KaneFormation",
                           "inertial u udep uaux udot qdot_u_map Ars bodies loads k_kqdot")


def kane_formation_state(kane):
    """The attributes of ``kane`` that forming Kane's equations reads."""
    return KaneFormation(inertial=kane._inertial, u=kane.u, udep=kane._udep, uaux=kane._uaux,
                         udot=kane._udot, qdot_u_map=kane._qdot_u_map, Ars=kane._Ars,
                         bodies=kane._bodylist, loads=kane._forcelist, k_kqdot=kane._k_kqdot)


def force_list(loads, frame):
    """``(velocities, forces)`` of the loads, as KanesMethod and
    LagrangesMethod parse them (the velocity of each point, the angular
    velocity of each frame, in ``frame``)."""
    from sympy.physics.mechanics.functions import _f_list_parser
    return _f_list_parser(loads, frame)


def store_kanes_equations(kane, bodies, loads, fr, frstar, k_d, f_d):
    """Leave ``kane`` as ``kanes_equations(bodies, loads)`` leaves it (without
    auxiliary speeds: see :func:`store_auxiliary_equations`)."""
    kane._forcelist = loads
    kane._fr = fr
    kane._bodylist = bodies
    kane._frstar = frstar
    kane._k_d = k_d
    kane._f_d = f_d


def auxiliary_kanes_method(kane):
    """The KanesMethod of the auxiliary speeds that ``kanes_equations`` makes
    to form the auxiliary equations (its ``_km``)."""
    from sympy.physics.mechanics import KanesMethod
    if not kane._udep:
        km = KanesMethod(kane._inertial, kane.q, kane._uaux, u_auxiliary=kane._uaux,
                         constraint_solver=kane._constraint_solver)
    else:
        km = KanesMethod(kane._inertial, kane.q, kane._uaux, u_auxiliary=kane._uaux,
                         u_dependent=kane._udep,
                         velocity_constraints=(kane._k_nh * kane.u + kane._f_nh),
                         acceleration_constraints=(kane._k_dnh * kane._udot + kane._f_dnh),
                         constraint_solver=kane._constraint_solver)
    km._qdot_u_map = kane._qdot_u_map
    return km


def store_auxiliary_equations(kane, km, fraux, frstaraux):
    """As ``kanes_equations`` with auxiliary speeds: their equations follow
    the others in Fr and Fr*; returns the new ``(Fr, Fr*)``."""
    kane._km = km
    kane._aux_eq = fraux + frstaraux
    kane._fr = kane._fr.col_join(fraux)
    kane._frstar = kane._frstar.col_join(frstaraux)
    return kane._fr, kane._frstar


# -- LagrangesMethod ----------------------------------------------------------------------


def lagrange_formed(lagrange):
    """Whether ``form_lagranges_equations()`` (or ``form_eoms()``) was called."""
    return lagrange.eom is not None


def holonomic_constraints(lagrange):
    """``f_c(q, t)`` of a LagrangesMethod, its ``hol_coneqs``: a column of l
    residuals (0 x 1 without)."""
    return _column(lagrange._hol_coneqs)


def lagrange_constraints(lagrange):
    """``coneqs``: the time derivatives of the holonomic constraints, then the
    nonholonomic constraints, in q, q' and t (0 x 1 without)."""
    return _column(lagrange.coneqs)


def lagrange_unconstrained_equations(lagrange):
    """``(M_d, F_d)`` of ``d/dt(dL/dq') - dL/dq - Q = M_d q'' - F_d``: Lagrange's
    equations without the multiplier terms (n rows, in q, q', q'', inputs, t),
    as ``form_lagranges_equations`` split them: ``mass_matrix`` is
    ``[M_d, -lam_coeffs^T]`` and ``forcing`` is ``F_d``."""
    return sm.Matrix(lagrange._m_d), sm.Matrix(lagrange._f_d)


def lagrangian(lagrange):
    """The Lagrangian L of a LagrangesMethod (an expression)."""
    return lagrange._L[0]


def lagrange_generalized_forces(lagrange):
    """Q (n rows): the generalized forces of the LagrangesMethod's force list,
    computed as ``form_lagranges_equations`` computes its fourth term."""
    n = len(lagrange.q)
    if not lagrange.forcelist:
        return sm.zeros(n, 1)
    frame = lagrange.inertial
    term4 = sm.zeros(n, 1)
    for i, qd in enumerate(lagrange._qdots):
        flist = zip(*force_list(lagrange.forcelist, frame))
        term4[i] = sum(v.diff(qd, frame).dot(f) for (v, f) in flist)
    return term4


def store_lagranges_equations(lagrange, term1, term2, term4, m_d, f_d, lam_coeffs, m_cd, f_cd):
    """Leave ``lagrange`` as ``form_lagranges_equations()`` leaves it, given
    its terms (``d/dt dL/dq'``, ``dL/dq``, Q), ``M_d``, ``F_d``, and for the
    constraints ``coneqs`` the multiplier coefficients ``-d coneqs/dq'`` and
    their time derivative's ``q''`` coefficients and remaining terms (``_m_cd``,
    ``-_f_cd``; empty without constraints). Returns the equations of motion
    (``eom``)."""
    n = len(lagrange.q)
    if lagrange.coneqs:
        m = len(lagrange.coneqs)
        lagrange.lam_vec = sm.Matrix(dynamicsymbols('lam1:' + str(m + 1)))
        lagrange.lam_coeffs = lam_coeffs
        lagrange._term3 = lagrange.lam_coeffs.T * lagrange.lam_vec
        lagrange._m_cd = m_cd
        lagrange._f_cd = f_cd
    else:
        lagrange._term3 = sm.zeros(n, 1)
    lagrange._term1, lagrange._term2, lagrange._term4 = term1, term2, term4
    lagrange._m_d = m_d
    lagrange._f_d = f_d
    lagrange.eom = term1 - term2 - term4 - lagrange._term3
    return lagrange.eom


# -- Linearizer --------------------------------------------------------------------------


def set_linearizer_partition(lin, q_i, q_d, u_i, u_d):
    """Give a Linearizer (not yet set up) another partition, with its q and u
    reordered to [independent, dependent] (see codegen.reference, pitfall 3)."""
    t = dynamicsymbols._t
    lin.q_i, lin.q_d = sm.Matrix(q_i), (sm.Matrix(q_d) if q_d else sm.Matrix())
    lin.u_i, lin.u_d = sm.Matrix(u_i), (sm.Matrix(u_d) if u_d else sm.Matrix())
    lin.q = sm.Matrix(list(q_i) + list(q_d))
    lin.u = sm.Matrix(list(u_i) + list(u_d))
    lin._qd = lin.q.diff(t)
    lin._ud = lin.u.diff(t)
    # as Linearizer.__init__: a qd that is also a speed is replaced by a Dummy
    duplicates = set(lin._qd).intersection(lin.u)
    lin._qd_dup = sm.Matrix([v if v not in duplicates else sm.Dummy() for v in lin._qd])


def linearizer_states(lin):
    """The state vector of a Linearizer's A, ``perm_mat^T [q; u]`` (sets it up)."""
    if not lin._setup_done:
        lin._setup()
    return lin.perm_mat.T * lin.q.col_join(lin.u)
