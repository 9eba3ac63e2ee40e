"""Memoized derivatives of large expressions that share subtrees.

Used by the model stage (:mod:`codegen.model`, :mod:`codegen.eom`: Lagrange's
equations, the check of d f_c/dt) and by the derivation stage
(:mod:`codegen.derive`: every Jacobian block), so it sits below both.

SymPy's ``diff`` walks a tree's free symbols again at every product it
differentiates, which dominates the derivation of a large model. Here the set
of variables each node depends on is computed once per node, and every
derivative is memoized per node, so a subexpression shared by many entries
(and by several blocks) is differentiated once. The rules are the textbook
ones (sum, product, power, chain rule through ``fdiff``), written once in
:class:`_Rules` for both kinds of derivative: partial derivatives
(:class:`Differentiator`) and derivatives along a motion
(:class:`TotalDerivative`). For the piecewise-smooth Abs, sign, Heaviside, Max,
Min and Piecewise they are the derivatives away from their kinks
(:meth:`_Rules._piecewise_smooth`); any other node falls back to SymPy's
``diff``.
"""

from __future__ import annotations

import sympy as sm

# Functions differentiated by _Rules._piecewise_smooth.
_PIECEWISE_SMOOTH = (sm.Abs, sm.sign, sm.Heaviside, sm.Max, sm.Min, sm.Piecewise)


class _Rules:
    """The rules of differentiation, for a derivative ``self(expr, x)`` in the
    direction ``x`` (a variable, or None for :class:`TotalDerivative`), with
    ``self.depends(expr)``: the variables ``expr`` depends on, memoized."""

    def __init__(self, variables):
        self.variables = frozenset(variables)
        self._depends = {}
        self._derivative = {}

    def depends(self, expr):
        try:
            return self._depends[expr]
        except KeyError:
            pass
        if expr.is_Symbol:
            found = self.variables & {expr}
        elif not expr.args:
            found = frozenset()
        else:
            found = frozenset().union(*(self.depends(arg) for arg in expr.args))
        self._depends[expr] = found
        return found

    def _varies(self, expr, x):
        """Whether ``expr`` changes in the direction ``x``."""
        raise NotImplementedError

    def _leaf(self, expr, x):
        """The derivative of a variable."""
        raise NotImplementedError

    def _fallback(self, expr, x):
        """The derivative of a node the rules do not cover, by SymPy's diff."""
        raise NotImplementedError

    def __call__(self, expr, x=None):
        if not self._varies(expr, x):
            return sm.S.Zero
        if expr.is_Symbol:
            return self._leaf(expr, x)
        key = (expr, x)
        try:
            return self._derivative[key]
        except KeyError:
            pass
        args = expr.args
        if expr.is_Add:
            result = sm.Add(*[self(arg, x) for arg in args])
        elif expr.is_Mul:
            terms = []
            for i, arg in enumerate(args):
                if self._varies(arg, x):
                    terms.append(sm.Mul(*args[:i], self(arg, x), *args[i + 1:]))
            result = sm.Add(*terms)
        elif expr.is_Pow:
            base, exponent = args
            if not self._varies(exponent, x):
                result = exponent * base ** (exponent - 1) * self(base, x)
            else:
                result = expr * (self(exponent, x) * sm.log(base) + exponent * self(base, x) / base)
        elif isinstance(expr, _PIECEWISE_SMOOTH):
            result = self._piecewise_smooth(expr, x)
        elif isinstance(expr, sm.Function) and hasattr(expr, "fdiff"):
            try:
                result = sm.Add(*[expr.fdiff(i + 1) * self(arg, x) for i, arg in enumerate(args)
                                  if self._varies(arg, x)])
            except (sm.core.function.ArgumentIndexError, NotImplementedError):
                result = self._fallback(expr, x)
        else:
            result = self._fallback(expr, x)
        self._derivative[key] = result
        return result

    def _piecewise_smooth(self, expr, x):
        """Derivatives of functions with kinks or jumps, right wherever the
        function is differentiable (every operating point off the kinks).
        SymPy's own rules give distributions (d sign = 2 DiracDelta) or leave
        an unevaluated Derivative (sign.fdiff), which no C code can compute."""
        if isinstance(expr, sm.Abs):
            arg = expr.args[0]
            return sm.sign(arg) * self(arg, x)          # real argument: d|a| = sign(a) da
        if isinstance(expr, (sm.sign, sm.Heaviside)):
            return sm.S.Zero                            # piecewise constant
        if isinstance(expr, (sm.Max, sm.Min)):
            # the derivative of the active argument: the first one that is
            # >= (Max) or <= (Min) all the others
            pick = sm.Ge if isinstance(expr, sm.Max) else sm.Le
            args = expr.args
            pieces = [(self(a, x), sm.And(*[pick(a, b) for j, b in enumerate(args) if j != i]))
                      for i, a in enumerate(args[:-1])]
            return sm.Piecewise(*pieces, (self(args[-1], x), True))
        # Piecewise: the derivative of each branch under the same condition
        # (conditions are constant between the switching surfaces)
        return sm.Piecewise(*[(self(piece.expr, x), piece.cond) for piece in expr.args])


class Differentiator(_Rules):
    """Partial derivatives ``self(expr, x)`` with respect to the ``variables``
    (plain symbols), memoized on (node, variable) for all expressions given."""

    def _varies(self, expr, x):
        return x in self.depends(expr)

    def _leaf(self, expr, x):
        return sm.S.One          # expr is x: the only variable it depends on

    def _fallback(self, expr, x):
        return expr.diff(x)

    def jacobian(self, matrix, symbols):
        rows = matrix.shape[0]
        if rows == 0 or not symbols:
            return sm.zeros(rows, len(symbols))
        return sm.Matrix(rows, len(symbols), [self(matrix[i, 0], x) for i in range(rows) for x in symbols])


class TotalDerivative(_Rules):
    """The derivative ``self(expr)`` along a motion on which each variable
    ``s`` of ``rates`` (plain symbols) changes at the rate ``rates[s]``: the
    directional derivative sum_s d expr/d s rates[s], by the chain rule at
    each node (as SymPy's ``diff(expr, t)`` of dynamic symbols, memoized).
    Time itself is one of the variables with rate 1, if it appears."""

    def __init__(self, rates):
        self.rates = {s: rate for s, rate in rates.items() if rate != 0}   # the others are constant
        super().__init__(self.rates)

    def _varies(self, expr, x):
        return bool(self.depends(expr))

    def _leaf(self, expr, x):
        return self.rates[expr]

    def _fallback(self, expr, x):
        return sm.Add(*[expr.diff(s) * self.rates[s] for s in sorted(self.depends(expr), key=str)])
