"""Constrained finite differences of SymPy's own Lagrange equations.

:class:`LagrangeReference` is :class:`reference.KaneReference` (tests/reference.py,
codegen/reference.py) with its equations taken from a ``LagrangesMethod``
instead: the state derivative solves SymPy's ``mass_matrix_full`` (with the
multiplier columns and the differentiated constraints) against
``forcing_full`` for [q', q'', lambda]; f_c are the holonomic constraints and
f_v SymPy's ``coneqs``. Nothing of codegen's Model or derivation is used, so
the finite differences check the whole translation of a LagrangesMethod.
The speeds are the coordinate rates; the partition is given by index.
"""

from types import SimpleNamespace

import numpy as np
import sympy as sm
from sympy.physics.mechanics import dynamicsymbols

from codegen import sympy_adapter
from reference import KaneReference, PlainSymbols


class LagrangeReference(KaneReference):

    def __init__(self, lagrange, parameters, inputs, dependent_q, dependent_u):
        t = dynamicsymbols._t
        self.kane = None
        self.lagrange = lagrange
        self.t = t
        self.q = list(lagrange.q)
        self.u = list(lagrange.u)              # q'
        self.qd = list(self.u)
        self.ud = [rate.diff(t) for rate in self.u]
        self.q_dep = [self.q[i] for i in dependent_q]
        self.u_dep = [self.u[i] for i in dependent_u]
        self.parameters = list(parameters)
        self.default_p = np.array([float(v) for v in parameters.values()])
        self.inputs = list(inputs)
        self.nq, self.nu, self.nr = len(self.q), len(self.u), len(self.inputs)
        self.nc, self.nv = len(self.q_dep), len(self.u_dep)
        # q' maps to the speed symbols (the later update wins over the q' -> qd one)
        self.plain = PlainSymbols(self.q, self.u, self.inputs, self.parameters)
        self._linearizers = {}
        self._equations = self._functions = None

    def equations(self):
        if self._equations is None:
            f_c = sympy_adapter.holonomic_constraints(self.lagrange)
            f_v = sm.Matrix(self.lagrange.coneqs) if len(self.lagrange.coneqs) else sm.zeros(0, 1)
            self._equations = SimpleNamespace(
                mass_full=self.lagrange.mass_matrix_full, forcing_full=self.lagrange.forcing_full,
                f_c=f_c, f_v=f_v,
                J_c=f_c.jacobian(self.q) if self.nc else sm.zeros(0, self.nq),
                B_v=f_v.jacobian(self.u) if self.nv else sm.zeros(0, self.nu))
        return self._equations

    def state_derivative(self, q, u, r=None, p=None, t=0.0):
        """(q', q'') from SymPy's augmented system (the multipliers dropped)."""
        args = self._args(q, u, r, p, t)
        M = np.asarray(self.functions().mass_full(*args), float)
        F = np.asarray(self.functions().forcing_full(*args), float).ravel()
        x = np.linalg.solve(M, F)
        return x[:self.nq], x[self.nq:2 * self.nq]

    @classmethod
    def from_model(cls, model):
        """The reference of a codegen Model made from a LagrangesMethod (its
        parameters, inputs and default partition)."""
        return cls(model.lagrange, dict(zip(model.parameters, model.parameter_values)), model.inputs,
                   [model.q.index(s) for s in model.q_dependent],
                   [model.u.index(s) for s in model.u_dependent])


def build_both_ways(lagrange_model, kane_model, build_dir, guesses):
    """``(lagrange, kane, ref, points)``: the same system compiled from its
    Lagrange and its Kane form, the Lagrange reference, and the ``guesses``
    ``(q, u, r)`` completed onto the constraints by the reference (so the
    points do not depend on the code under test)."""
    import codegen

    lagrange = codegen.build(lagrange_model, output_dir=build_dir)
    kane = codegen.build(kane_model, output_dir=build_dir)
    ref = LagrangeReference.from_model(lagrange_model)
    points = []
    for q, u, r in guesses:
        q, u = ref.complete(q, u)
        points.append((q, u, np.array(r, dtype=float)))
    return lagrange, kane, ref, points
