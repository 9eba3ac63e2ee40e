"""C99 expression printer for generated code.

Symbols print as the C expressions the generated functions use for them
(``q[3]``, ``p[0]``, ``t``, CSE temporaries ``x12``); small integer powers
print as products, which compilers do not do for ``pow`` without
``-ffast-math``.
"""

import sympy as sm
from sympy.printing.c import C99CodePrinter


class ModelCodePrinter(C99CodePrinter):
    """Prints one expression of a model; ``names`` maps each symbol to C."""

    def __init__(self, names):
        super().__init__({"contract": False})
        self.names = names   # may change between statements (carried temporaries)

    def _print_Symbol(self, symbol):
        try:
            return self.names[symbol]
        except KeyError:
            raise KeyError(f"symbol {symbol} has no C name: it is not an input, a parameter "
                           "or a temporary of this model") from None

    def _print_Pow(self, expr):
        base, exponent = expr.base, expr.exp
        if exponent.is_Integer and 1 < abs(int(exponent)) <= 4:
            b = self.parenthesize(base, sm.printing.precedence.PRECEDENCE["Mul"])
            product = "*".join([b] * abs(int(exponent)))
            # parenthesized: the Mul printer treats a Pow as atomic
            return f"({product})" if exponent > 0 else f"(1.0/({product}))"
        if exponent == -1:
            return f"(1.0/{self.parenthesize(base, sm.printing.precedence.PRECEDENCE['Mul'])})"
        if exponent == sm.Rational(-1, 2):
            return f"(1.0/sqrt({self._print(base)}))"
        return super()._print_Pow(expr)

    def _print_Float(self, expr):
        # repr of a Python float round-trips exactly
        return repr(float(expr))

    def _print_NumberSymbol(self, expr):
        # M_PI, M_E... are POSIX, not C99: print the double nearest the constant
        return repr(float(expr))

    _print_Pi = _print_NumberSymbol
    _print_Exp1 = _print_NumberSymbol
    _print_GoldenRatio = _print_NumberSymbol
    _print_EulerGamma = _print_NumberSymbol
    _print_Catalan = _print_NumberSymbol
