"""Independent references for the flexible double pendulum of González et al.
(codegen.models.flexible_pendulum), written from textbook formulas in NumPy:
no SymPy, nothing of codegen (in particular not the model's own equations).

The system: two equal links (length l, circular section of radius r, density
rho, Young's modulus E), link 1 pinned to the ground, link 2 pinned to the end
of link 1, gravity g along -y, each link divided into n_p Euler-Bernoulli beam
elements (axial displacement linear, transverse displacement cubic Hermite;
no shear, no rotary inertia of the sections, no geometric stiffening).

* :func:`rigid_double_pendulum`: the limit E -> infinity, two thin uniform
  rods hanging, in closed form.
* :func:`hanging_stretch`: the static axial displacement of the hanging links
  in closed form (the exact solution, which linear elements reproduce at
  their nodes).
* :func:`plain_fe_frequencies`: the links without gravity as a plain linear
  finite-element model in world coordinates (nodal displacements and
  rotations, the pins as shared displacements): the textbook element matrices,
  assembled, constrained by elimination, generalized symmetric eigenproblem.
* :func:`floating_frame_frequencies`: the floating-frame system with gravity,
  linearized at its static equilibrium by a route of its own: the mass matrix
  as the Gauss quadrature of J^T J (J: Jacobian of a material point's position
  with respect to the coordinates), the Hessian of the potential (strain,
  gravity) plus the multipliers times the constraint Hessians, projected on
  the null space of the constraint Jacobian (González et al., eq. 5: K_q needs
  the multipliers at the equilibrium). Its pins join the frame origins (the
  model's join the material nodes: the same constraint manifold, so the same
  spectrum).

Frequencies are returned in rad/s, ascending; the eigenvalues of the
linearized first-order system are +/- i omega (omega^2 < 0 would be
an instability: returned as -sqrt(-omega^2)).
"""

import math

import numpy as np
import scipy.linalg

NODAL = 3      # axial displacement, transverse displacement, rotation of the section


def section(parameters):
    """rho A, E A, E I of the circular section."""
    r = parameters["r"]
    area = math.pi * r**2
    return parameters["rho"] * area, parameters["E"] * area, parameters["E"] * math.pi * r**4 / 4


def element_mass(rho_A, le):
    """Consistent mass matrix of the planar beam element, nodal coordinates
    [u_a, v_a, phi_a, u_b, v_b, phi_b] (Przemieniecki; Cook et al.)."""
    M = np.zeros((6, 6))
    axial = rho_A * le / 6 * np.array([[2.0, 1.0], [1.0, 2.0]])
    bending = rho_A * le / 420 * np.array([
        [156.0, 22 * le, 54.0, -13 * le],
        [22 * le, 4 * le**2, 13 * le, -3 * le**2],
        [54.0, 13 * le, 156.0, -22 * le],
        [-13 * le, -3 * le**2, -22 * le, 4 * le**2]])
    u, v = [0, 3], [1, 2, 4, 5]
    M[np.ix_(u, u)] = axial
    M[np.ix_(v, v)] = bending
    return M


def element_stiffness(E_A, E_I, le):
    """Stiffness matrix of the planar beam element (same nodal coordinates)."""
    K = np.zeros((6, 6))
    axial = E_A / le * np.array([[1.0, -1.0], [-1.0, 1.0]])
    bending = E_I / le**3 * np.array([
        [12.0, 6 * le, -12.0, 6 * le],
        [6 * le, 4 * le**2, -6 * le, 2 * le**2],
        [-12.0, -6 * le, 12.0, -6 * le],
        [6 * le, 2 * le**2, -6 * le, 4 * le**2]])
    u, v = [0, 3], [1, 2, 4, 5]
    K[np.ix_(u, u)] = axial
    K[np.ix_(v, v)] = bending
    return K


def shape_functions(xi, le):
    """S(xi) (2 x 6): [u; v] = S [u_a, v_a, phi_a, u_b, v_b, phi_b], xi = x / le."""
    return np.array([
        [1 - xi, 0.0, 0.0, xi, 0.0, 0.0],
        [0.0, 1 - 3 * xi**2 + 2 * xi**3, le * (xi - 2 * xi**2 + xi**3),
         0.0, 3 * xi**2 - 2 * xi**3, le * (xi**3 - xi**2)]])


def link_stiffness(parameters, elements):
    """K_ff of one link, nodal coordinates node by node (3 (n_p + 1))."""
    _, E_A, E_I = section(parameters)
    le = parameters["l"] / elements
    nf = NODAL * (elements + 1)
    K = np.zeros((nf, nf))
    for j in range(elements):
        dofs = slice(NODAL * j, NODAL * j + 6)
        K[dofs, dofs] += element_stiffness(E_A, E_I, le)
    return K


# -- closed forms -----------------------------------------------------------------------


def rigid_double_pendulum(parameters):
    """(omega_1, omega_2) of two thin uniform rods (length l, equal mass m)
    hanging from a pin and pinned to each other. In the absolute angles from
    the downward vertical: M = m l^2 [[1/3 + 1, 1/2], [1/2, 1/3]] (rod 1 about
    its pin plus the mass of rod 2 at its end; the coupling through rod 2's
    centre at l/2), K = m g l [[1/2 + 1, 0], [0, 1/2]], so
    det(K - w^2 M) = 0 is 7 w^4 - 42 (g/l) w^2 + 27 (g/l)^2 = 0:
    w^2 = (3 -/+ 6/sqrt(7)) g/l."""
    ratio = parameters["g"] / parameters["l"]
    return tuple(math.sqrt((3 + sign * 6 / math.sqrt(7)) * ratio) for sign in (-1, 1))


def hanging_stretch(parameters, elements):
    """Axial displacements of the nodes of links 1 and 2 (each ``elements`` + 1
    values, from the link's first articulation) hanging at rest: link 1 carries
    the weight of rod below s, rho A g (2 l - s), so E A u' = rho A g (2 l - s),
    u(0) = 0: u = rho g / E (2 l s - s^2 / 2); link 2 likewise with l - s."""
    l, rho, E, g = (parameters[k] for k in ("l", "rho", "E", "g"))
    s = np.linspace(0.0, l, elements + 1)
    return rho * g / E * (2 * l * s - s**2 / 2), rho * g / E * (l * s - s**2 / 2)


def hanging_coordinates(parameters, elements):
    """The model's q at the hanging equilibrium, in its order: per link x, y,
    theta, then (fx, fy, ftheta) node by node; link 2's frame at the stretched
    end of link 1."""
    first, second = hanging_stretch(parameters, elements)
    q = []
    top = 0.0
    for stretch in (first, second):
        nodal = np.zeros((elements + 1, NODAL))
        nodal[:, 0] = stretch
        q += [0.0, top, -math.pi / 2, *nodal.ravel()]
        top -= parameters["l"] + stretch[-1]
    return np.array(q)


# -- plain finite elements, no gravity ------------------------------------------------------


def plain_fe_frequencies(parameters, elements):
    """Natural frequencies of the two links without gravity, a plain linear
    finite-element model: both links straight along one line, three
    world-frame nodal coordinates per node (displacements along and across the
    line, rotation), link 1's first node held (pin: displacements zero,
    rotation free), link 2's first node with the displacements of link 1's
    last node (pin: rotations independent). 6 n_p + 2 frequencies, the first
    two zero (the links turning about the pins)."""
    rho_A, E_A, E_I = section(parameters)
    le = parameters["l"] / elements
    per_link = NODAL * (elements + 1)
    size = 2 * per_link
    M = np.zeros((size, size))
    K = np.zeros((size, size))
    for link in range(2):
        for j in range(elements):
            dofs = slice(link * per_link + NODAL * j, link * per_link + NODAL * j + 6)
            M[dofs, dofs] += element_mass(rho_A, le)
            K[dofs, dofs] += element_stiffness(E_A, E_I, le)
    # all coordinates = T (independent ones): link 1 node 0 (u, v) held,
    # link 2 node 0 (u, v) = link 1 last node (u, v)
    last = NODAL * elements
    removed = {0, 1, per_link, per_link + 1}
    independent = [i for i in range(size) if i not in removed]
    T = np.zeros((size, len(independent)))
    for column, i in enumerate(independent):
        T[i, column] = 1.0
    for offset in (0, 1):
        T[per_link + offset] = T[last + offset]
    omega2 = scipy.linalg.eigh(T.T @ K @ T, T.T @ M @ T, eigvals_only=True)
    return _frequencies(omega2)


def _frequencies(omega2):
    omega2 = np.sort(np.asarray(omega2, dtype=float))
    return np.sign(omega2) * np.sqrt(np.abs(omega2))


# -- the floating-frame system linearized, with gravity ------------------------------------


class FloatingFrame:
    """The model's system with its coordinates (per link x, y, theta, then
    the nodal coordinates node by node), written independently: positions of
    material points, the mass matrix by Gauss quadrature of J^T J, the
    potential's gradient and Hessian, the constraints with frame-origin pins."""

    GAUSS = np.polynomial.legendre.leggauss(5)     # exact to degree 9 (J^T J: degree 6)

    def __init__(self, parameters, elements):
        self.p = dict(parameters)
        self.elements = elements
        self.rho_A, _, _ = section(parameters)
        self.le = parameters["l"] / elements
        self.nf = NODAL * (elements + 1)
        self.per_link = 3 + self.nf
        self.n = 2 * self.per_link
        self.K_ff = link_stiffness(parameters, elements)
        points, weights = self.GAUSS
        self.points = (points + 1) / 2                   # on [0, 1]
        self.weights = weights / 2

    def _link(self, q, link):
        block = q[link * self.per_link:(link + 1) * self.per_link]
        return block[0], block[1], block[2], block[3:]

    def reference_nodal(self):
        """q_0: the undeformed axial positions of the nodes (the element's
        linear axial shape functions reproduce them: u-bar = S (q_0 + q_f))."""
        q0 = np.zeros(self.nf)
        q0[0::NODAL] = np.arange(self.elements + 1) * self.le
        return q0

    def material_points(self):
        """(element j, S(xi) scattered to the link's nodal coordinates (2 x nf),
        quadrature weight times le) over all Gauss points of a link."""
        for j in range(self.elements):
            for xi, w in zip(self.points, self.weights):
                S = np.zeros((2, self.nf))
                S[:, NODAL * j:NODAL * j + 6] = shape_functions(xi, self.le)
                yield S, w * self.le

    def mass_matrix(self, q):
        """int rho A J^T J dx, J = d(position)/dq of the material point:
        position = R + A(theta) S q-bar."""
        M = np.zeros((self.n, self.n))
        q0 = self.reference_nodal()
        for link in range(2):
            _, _, theta, q_f = self._link(q, link)
            A = _rotation(theta)
            A_theta = _rotation(theta + math.pi / 2)        # dA/dtheta
            offset = link * self.per_link
            for S, weight in self.material_points():
                J = np.zeros((2, self.n))
                J[:, offset:offset + 2] = np.eye(2)
                J[:, offset + 2] = A_theta @ S @ (q0 + q_f)
                J[:, offset + 3:offset + self.per_link] = A @ S
                M += self.rho_A * weight * J.T @ J
        return M

    def potential_gradient_hessian(self, q):
        """Gradient and Hessian of the strain energy plus the gravity
        potential g int rho A y dx."""
        g = self.p["g"]
        gradient = np.zeros(self.n)
        hessian = np.zeros((self.n, self.n))
        q0 = self.reference_nodal()
        for link in range(2):
            _, _, theta, q_f = self._link(q, link)
            offset = link * self.per_link
            elastic = slice(offset + 3, offset + self.per_link)
            gradient[elastic] += self.K_ff @ q_f
            hessian[elastic, elastic] += self.K_ff
            A = _rotation(theta)
            A_theta = _rotation(theta + math.pi / 2)
            for S, weight in self.material_points():
                c = g * self.rho_A * weight                  # y = y_R + [A S q-bar]_y
                gradient[offset + 1] += c
                gradient[offset + 2] += c * (A_theta @ S @ (q0 + q_f))[1]
                gradient[elastic] += c * (A @ S)[1]
                hessian[offset + 2, offset + 2] -= c * (A @ S @ (q0 + q_f))[1]
                cross = c * (A_theta @ S)[1]
                hessian[offset + 2, elastic] += cross
                hessian[elastic, offset + 2] += cross
        return gradient, hessian

    def constraints(self, q):
        """Phi (10), its Jacobian and its Hessians (10 x n x n): link 1's frame
        origin at o, link 2's frame origin at the end of link 1's centre line
        (its last node), the first node's nodal coordinates of both links zero."""
        x1, y1, theta1, q1 = self._link(q, 0)
        x2, y2, _, q2 = self._link(q, 1)
        o2 = self.per_link
        last = 3 + self.nf - NODAL                          # link 1's last node, fx
        end = np.array([self.p["l"] + q1[-NODAL], q1[-NODAL + 1]])
        A1, A1_theta = _rotation(theta1), _rotation(theta1 + math.pi / 2)
        phi = np.concatenate([[x1, y1], np.array([x1, y1]) + A1 @ end - [x2, y2],
                              q1[:NODAL], q2[:NODAL]])
        J = np.zeros((10, self.n))
        H = np.zeros((10, self.n, self.n))
        J[0, 0] = J[1, 1] = 1.0
        J[2:4, 0:2] = np.eye(2)
        J[2:4, 2] = A1_theta @ end
        J[2:4, last:last + 2] = A1
        J[2:4, o2:o2 + 2] = -np.eye(2)
        for row in range(NODAL):
            J[4 + row, 3 + row] = 1.0
            J[7 + row, o2 + 3 + row] = 1.0
        for k in range(2):                                  # rows 2, 3: second derivatives
            H[2 + k, 2, 2] = -(A1 @ end)[k]
            for c in range(2):
                H[2 + k, 2, last + c] = H[2 + k, last + c, 2] = A1_theta[k, c]
        return phi, J, H

    def multipliers(self, q):
        """lambda of the static equilibrium, grad V + J^T lambda = 0 (least
        squares), and the residual of that equation (zero at an equilibrium)."""
        gradient, _ = self.potential_gradient_hessian(q)
        _, J, _ = self.constraints(q)
        lam, *_ = np.linalg.lstsq(J.T, -gradient, rcond=None)
        return lam, np.abs(gradient + J.T @ lam).max()

    def frequencies(self, q):
        """Natural frequencies of the linearization at the static equilibrium q:
        N^T M N y'' + N^T (V_qq + sum lambda_i Phi_i,qq) N y = 0, N the null
        space of the constraint Jacobian."""
        lam, _ = self.multipliers(q)
        _, J, H = self.constraints(q)
        _, V_qq = self.potential_gradient_hessian(q)
        stiffness = V_qq + np.einsum("i,ijk->jk", lam, H)
        N = scipy.linalg.null_space(J)
        M_r = N.T @ self.mass_matrix(q) @ N
        K_r = N.T @ stiffness @ N
        return _frequencies(scipy.linalg.eigh((K_r + K_r.T) / 2, (M_r + M_r.T) / 2, eigvals_only=True))


def _rotation(angle):
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s], [s, c]])


def floating_frame_frequencies(parameters, elements):
    """The frequencies of the floating-frame model with gravity at its hanging
    equilibrium (:func:`hanging_coordinates`)."""
    system = FloatingFrame(parameters, elements)
    return system.frequencies(hanging_coordinates(parameters, elements))
