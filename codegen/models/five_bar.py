"""Five-bar mechanism (Spencer's thesis, section 3.2, Fig. 3.1 and Table 3.1).

Four links in a vertical plane form a serial chain from the lower left
support O = (0, 0); the tip of link 4 is pinned at the lower right support
D = (d, 0) (the ground is the fifth bar): two configuration constraints,
two degrees of freedom. Table 3.1: links 1 and 4 have length L = 1 m, mass
2 kg, inertia 1 kg m^2; links 2 and 3 have length 3L/2 = 1.5 m, mass 3 kg,
inertia 2 kg m^2.

Spencer's coordinates q = (q1, q2, q3, q4) are joint angles; his figure is not
available, so the convention is fixed by his two stated configurations. The
absolute angle of link k from the +x axis is

    theta1 = pi - q1,  theta2 = theta1 - q2,  theta3 = theta2 - q3,  theta4 = theta3 - q4

(q1 is link 1's angle from the -x axis, the others are relative angles, all
measured clockwise). Then q = (pi, 0, 0, pi) puts links 1-3 stretched along
+x to x = 4 and link 4 folded back onto D at x = 3 = L + 3L/2 + 3L/2 - L
(which fixes the ground length d = 3 m): every link is on the x axis, so
every column of J_c (the tip's motion for each joint) is vertical, its x row
vanishes and its rank drops to 1: Spencer's singular configuration, where no
partition is valid. His symmetric start (ex. 2)
q1 = 2pi/3, q2 = q4 = pi/3 + acos(2/3) closes the loop symmetrically about
x = d/2 only with q3 = -2 acos(2/3) (apex below the supports); he prints
q3 = 2 asin(2/3), which is the interior angle at the apex (pi minus the
magnitude of the relative angle): ``symmetric`` returns the consistent value.

What Spencer leaves out, chosen here: each link's mass centre at half its
length (the table's inertias are taken about it); gravity g = 9.81 along -y;
no inputs (his simulations are passive). Speeds u_i = q_i'; velocity
constraints are the time derivatives. Default partition: q1, q2 independent,
q3, q4 (u3, u4) dependent, regular unless links 3 and 4 are aligned
(sin q4 = 0).
"""

import math

import numpy as np
import sympy as sm
import sympy.physics.mechanics as me

from ..model import Model

DESCRIPTION = "five-bar mechanism through a singular configuration (Spencer thesis, Table 3.1)"

# Spencer, Table 3.1; d = L1 + L2 + L3 - L4 (his singular configuration), g chosen.
DEFAULT_PARAMETERS = {
    "L1": 1.0, "L2": 1.5, "L3": 1.5, "L4": 1.0,
    "m1": 2.0, "m2": 3.0, "m3": 3.0, "m4": 2.0,
    "I1": 1.0, "I2": 2.0, "I3": 2.0, "I4": 1.0,
    "d": 3.0, "g": 9.81,
}


def make_model():
    q = list(me.dynamicsymbols("q1:5"))
    u = list(me.dynamicsymbols("u1:5"))
    t = me.dynamicsymbols._t
    symbols = {name: sm.Symbol(name) for name in DEFAULT_PARAMETERS}
    lengths = [symbols[f"L{k}"] for k in range(1, 5)]
    masses = [symbols[f"m{k}"] for k in range(1, 5)]
    inertias = [symbols[f"I{k}"] for k in range(1, 5)]
    d, g = symbols["d"], symbols["g"]

    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    frames, bodies, loads = [], [], []
    joint = O
    angle, rate = sm.pi - q[0], -u[0]
    for k in range(4):
        if k:
            angle, rate = angle - q[k], rate - u[k]
        frame = N.orientnew(f"link{k + 1}", "Axis", [angle, N.z])
        frame.set_ang_vel(N, rate * N.z)
        frames.append(frame)
        centre = joint.locatenew(f"G{k + 1}", lengths[k] / 2 * frame.x)
        centre.v2pt_theory(joint, N, frame)
        tip = joint.locatenew(f"P{k + 1}", lengths[k] * frame.x)
        tip.v2pt_theory(joint, N, frame)
        inertia = me.inertia(frame, 0, 0, inertias[k])
        bodies.append(me.RigidBody(f"link{k + 1}", centre, frame, masses[k], (inertia, centre)))
        loads.append((centre, -masses[k] * g * N.y))
        joint = tip

    closure = joint.pos_from(O) - d * N.x
    f_c = [closure.dot(N.x), closure.dot(N.y)]
    qd_to_u = {qi.diff(t): ui for qi, ui in zip(q, u)}
    f_v = [fc.diff(t).xreplace(qd_to_u) for fc in f_c]
    kinematic = [qi.diff(t) - ui for qi, ui in zip(q, u)]
    kane = me.KanesMethod(N, q_ind=q[:2], u_ind=u[:2], kd_eqs=kinematic,
                          q_dependent=q[2:], configuration_constraints=f_c,
                          u_dependent=u[2:], velocity_constraints=f_v)
    kane.kanes_equations(bodies, loads)
    parameters = {symbols[name]: value for name, value in DEFAULT_PARAMETERS.items()}
    return Model(kane, parameters=parameters, name="five_bar", description=DESCRIPTION)


# -- numeric kinematics for the operating points (NumPy, no SciPy) ------------------------


def _angles(q):
    theta1 = math.pi - q[0]
    theta2 = theta1 - q[1]
    theta3 = theta2 - q[2]
    return np.array([theta1, theta2, theta3, theta3 - q[3]])


def _lengths(parameters):
    return np.array([parameters[f"L{k}"] for k in range(1, 5)])


def loop_closure(parameters, q):
    """f_c: tip of link 4 minus D."""
    theta, L = _angles(q), _lengths(parameters)
    return np.array([np.sum(L * np.cos(theta)) - parameters["d"], np.sum(L * np.sin(theta))])


def constraint_jacobian(parameters, q):
    """J_c = d f_c/d q: q_k turns links k..4 clockwise."""
    theta, L = _angles(q), _lengths(parameters)
    # d tip/d theta_j = L_j (-sin, cos); d theta_j/d q_k = -1 for j >= k
    columns = np.array([L * -np.sin(theta), L * np.cos(theta)])
    return -np.cumsum(columns[:, ::-1], axis=1)[:, ::-1]


def _potential_gradient(parameters, q):
    """d V/d q for V = g sum m_k y(G_k)."""
    theta, L = _angles(q), _lengths(parameters)
    m = np.array([parameters[f"m{k}"] for k in range(1, 5)])
    # y(G_k) = sum_{j<k} L_j sin theta_j + L_k/2 sin theta_k
    weight = np.array([m[j] / 2 + m[j + 1:].sum() for j in range(4)])   # of L_j sin theta_j
    dV_dtheta = parameters["g"] * weight * L * np.cos(theta)
    return -np.cumsum(dV_dtheta[::-1])[::-1]


def complete(parameters, q, u_independent=(0.0, 0.0), dependent=(2, 3), tol=1e-14):
    """Dependent coordinates by Newton on f_c from q, then dependent speeds from f_v."""
    q = np.array(q, dtype=float)
    dependent = list(dependent)
    independent = [k for k in range(4) if k not in dependent]
    for _ in range(50):
        residual = loop_closure(parameters, q)
        if np.max(np.abs(residual)) <= tol:
            break
        J = constraint_jacobian(parameters, q)
        q[dependent] -= np.linalg.solve(J[:, dependent], residual)
    else:
        raise ValueError(f"five_bar: the loop does not close near {q}")
    u = np.zeros(4)
    u[independent] = u_independent
    J = constraint_jacobian(parameters, q)
    u[dependent] = np.linalg.solve(J[:, dependent], -J[:, independent] @ u[independent])
    return q.tolist(), u.tolist()


def singular(parameters):
    """Spencer's singular configuration q = (pi, 0, 0, pi) at rest (ex. 1's
    start): links 1-3 along +x, link 4 folded back onto D; J_c has rank 1."""
    return [math.pi, 0.0, 0.0, math.pi], [0.0] * 4


def symmetric(parameters, q1=2 * math.pi / 3):
    """Spencer's ex. 2 start: symmetric about x = d/2 (needs L1 = L4, L2 = L3),
    apex below the supports, at rest; q1 = 2pi/3 gives q2 = q4 = pi/3 + acos(2/3),
    q3 = -2 acos(2/3)."""
    L1, L2, d = parameters["L1"], parameters["L2"], parameters["d"]
    theta1 = math.pi - q1
    theta2 = -math.acos((d / 2 - L1 * math.cos(theta1)) / L2)
    return [q1, theta1 - theta2, 2 * theta2, theta1 - theta2], [0.0] * 4


def moving(parameters, q1=2 * math.pi / 3 + 0.2, q2=1.7, u1=0.6, u2=-0.9):
    """A regular, moving point near ``symmetric``: q3, q4 from the loop, u3, u4
    from the velocity constraints."""
    q, _ = symmetric(parameters)
    q[0], q[1] = q1, q2
    return complete(parameters, q, (u1, u2))


def hanging(parameters, tol=1e-13):
    """The stable equilibrium: the chain hanging below the supports (Newton on
    f_c = 0 and the projected gravity force N^T dV/dq = 0, N the null space of
    J_c; started from the symmetric hanging shape with link 1 at -70 degrees)."""
    theta1 = math.radians(-70.0)
    L1, L2, d = parameters["L1"], parameters["L2"], parameters["d"]
    theta2 = -math.acos(min(1.0, (d / 2 - L1 * math.cos(theta1)) / L2))
    q = np.array([math.pi - theta1, theta1 - theta2, 2 * theta2, theta1 - theta2])

    def residual(q):
        J = constraint_jacobian(parameters, q)
        null = np.linalg.svd(J)[2][2:].T          # 4 x 2 basis of the null space of J_c
        # sign-fixed basis so the residual is a smooth function of q
        basis = null @ np.linalg.inv(null[:2])    # columns: independent q1, q2 directions
        return np.concatenate([loop_closure(parameters, q), basis.T @ _potential_gradient(parameters, q)])

    for _ in range(60):
        r = residual(q)
        if np.max(np.abs(r)) <= tol:
            break
        h = 1e-6
        jac = np.column_stack([(residual(q + h * e) - residual(q - h * e)) / (2 * h) for e in np.eye(4)])
        q = q - np.linalg.solve(jac, r)
    else:
        raise ValueError("five_bar: no hanging equilibrium found")
    return q.tolist(), [0.0] * 4


OPERATING_POINTS = {"hanging": hanging, "symmetric": symmetric, "moving": moving,
                    "singular": singular}
DEFAULT_OPERATING_POINT = ("hanging", {})
