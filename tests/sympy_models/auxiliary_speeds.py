"""Models of SymPy's suite with auxiliary speeds (u_auxiliary); the pipeline
sets the auxiliary speeds to zero (they do not change the linearization):

* ``kane_aux``: ``test_kane.py::test_aux``, the rolling disc with two
  auxiliary speeds of the contact point (KM2);
* ``kane2_non_central_inertia``: ``test_kane2.py::test_non_central_inertia``,
  Kane's exercises 8.12/8.17 (a vehicle on two rolling wheels; two dependent
  speeds and one auxiliary speed);
* ``box_on_ground``: ``test_system_class.py::TestSystemExamples::test_box_on_ground``,
  a particle sliding with friction, the normal force brought into evidence
  by an auxiliary speed.

Each ``make_*`` returns ``(kane, parameters, inputs)``; the code is SymPy's.
"""

from sympy import symbols
from sympy.physics.mechanics import (Force, KanesMethod, Particle, Point, ReferenceFrame, RigidBody,
                                     System, dot, dynamicsymbols, inertia)


def make_kane_aux():
    q1, q2, q3, u1, u2, u3 = dynamicsymbols('q1 q2 q3 u1 u2 u3')
    u4, u5, f1, f2 = dynamicsymbols('u4, u5, f1, f2')
    r, m, g = symbols('r m g')
    N = ReferenceFrame('N')
    Y = N.orientnew('Y', 'Axis', [q1, N.z])
    L = Y.orientnew('L', 'Axis', [q2, Y.x])
    R = L.orientnew('R', 'Axis', [q3, L.y])
    w_R_N_qd = R.ang_vel_in(N)
    R.set_ang_vel(N, u1 * L.x + u2 * L.y + u3 * L.z)
    C = Point('C')
    C.set_vel(N, u4 * L.x + u5 * (Y.z ^ L.x))
    Dmc = C.locatenew('Dmc', r * L.z)
    Dmc.v2pt_theory(C, N, R)
    Dmc.a2pt_theory(C, N, R)
    I = inertia(L, m / 4 * r**2, m / 2 * r**2, m / 4 * r**2)
    kd = [dot(R.ang_vel_in(N) - w_R_N_qd, uv) for uv in L]
    ForceList = [(Dmc, - m * g * Y.z), (C, f1 * L.x + f2 * (Y.z ^ L.x))]
    BodyD = RigidBody('BodyD', Dmc, R, m, (I, Dmc))
    KM2 = KanesMethod(N, q_ind=[q1, q2, q3], u_ind=[u1, u2, u3], kd_eqs=kd,
                      u_auxiliary=[u4, u5])
    KM2.kanes_equations([BodyD], ForceList)
    return KM2, {r: 1.0, m: 1.0, g: 1.0}, [f1, f2]


def make_kane2_non_central_inertia():
    q1, q2, q3 = dynamicsymbols('q1:4')
    q1d, q2d, q3d = dynamicsymbols('q1:4', level=1)
    u1, u2, u3, u4, u5 = dynamicsymbols('u1:6')
    R, M, g, e, f, theta = symbols('R, M, g, e, f, theta')
    a, b, mA, mB, IA, J, K = symbols('a b mA mB IA J K')
    Q1, Q2, Q3 = symbols('Q1, Q2 Q3')
    IA22, IA23, IA33 = symbols('IA22 IA23 IA33')
    F = ReferenceFrame('F')
    P = F.orientnew('P', 'axis', [-theta, F.y])
    A = P.orientnew('A', 'axis', [q1, P.x])
    A.set_ang_vel(F, u1*A.x + u3*A.z)
    B = A.orientnew('B', 'axis', [q2, A.z])
    C = A.orientnew('C', 'axis', [q3, A.z])
    B.set_ang_vel(A, u4 * A.z)
    C.set_ang_vel(A, u5 * A.z)
    pD = Point('D')
    pD.set_vel(A, 0)
    pD.set_vel(F, u2 * A.y)
    pS_star = pD.locatenew('S*', e*A.y)
    pQ = pD.locatenew('Q', f*A.y - R*A.x)
    for p in [pS_star, pQ]:
        p.v2pt_theory(pD, F, A)
    pA_star = pD.locatenew('A*', a*A.y)
    pB_star = pD.locatenew('B*', b*A.z)
    pC_star = pD.locatenew('C*', -b*A.z)
    for p in [pA_star, pB_star, pC_star]:
        p.v2pt_theory(pD, F, A)
    pB_hat = pB_star.locatenew('B^', -R*A.x)
    pC_hat = pC_star.locatenew('C^', -R*A.x)
    pB_hat.v2pt_theory(pB_star, F, B)
    pC_hat.v2pt_theory(pC_star, F, C)
    kde = [q1d - u1, q2d - u4, q3d - u5]
    vc = [dot(p.vel(F), A.y) for p in [pB_hat, pC_hat]]
    inertia_A = inertia(A, IA, IA22, IA33, 0, IA23, 0)
    inertia_B = inertia(B, K, K, J)
    inertia_C = inertia(C, K, K, J)
    rbA = RigidBody('rbA', pA_star, A, mA, (inertia_A, pA_star))
    rbB = RigidBody('rbB', pB_star, B, mB, (inertia_B, pB_star))
    rbC = RigidBody('rbC', pC_star, C, mB, (inertia_C, pC_star))
    km = KanesMethod(F, q_ind=[q1, q2, q3], u_ind=[u1, u2], kd_eqs=kde,
                     u_dependent=[u4, u5], velocity_constraints=vc,
                     u_auxiliary=[u3])
    forces = [(pS_star, -M*g*F.x), (pQ, Q1*A.x + Q2*A.y + Q3*A.z)]
    km.kanes_equations([rbA, rbB, rbC], forces)
    parameters = dict.fromkeys([R, M, g, e, f, theta, a, b, mA, mB, IA, J, K, Q1, Q2, Q3,
                                IA22, IA23, IA33], 1.0)
    return km, parameters, []


def make_box_on_ground():
    t = dynamicsymbols._t
    g, m, mu = symbols('g m mu')
    q, u, ua = dynamicsymbols('q u ua')
    N, F = dynamicsymbols('N F', positive=True)
    P = Particle("P", mass=m)
    system = System()
    system.add_bodies(P)
    P.masscenter.set_pos(system.fixed_point, q * system.x)
    P.masscenter.set_vel(system.frame, u * system.x + ua * system.y)
    system.q_ind, system.u_ind, system.u_aux = [q], [u], [ua]
    system.kdes = [q.diff(t) - u]
    system.apply_uniform_gravity(-g * system.y)
    system.add_loads(
        Force(P, N * system.y),
        Force(P, F * system.x - mu * N * system.x))
    system.validate_system()
    system.form_eoms()
    return system.eom_method, {g: 9.81, m: 1.0, mu: 0.3}, [N, F]


MAKERS = {"kane_aux": make_kane_aux,
          "kane2_non_central_inertia": make_kane2_non_central_inertia,
          "box_on_ground": make_box_on_ground}
