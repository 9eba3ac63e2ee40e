"""C99 expression printer for generated code.

Symbols print as the C expressions the generated functions use for them
(``q[3]``, ``p[0]``, ``t``, CSE temporaries ``x12``); small integer powers
print as products, which compilers do not do for ``pow`` without
``-ffast-math``.

Only ISO C99 is printed, so the code compiles with ``-std=c99 -pedantic``:

* Irrational constants (``pi``, ``sqrt(2)``, ``log(2)``, ``2/sqrt(pi)``...)
  print as the double literal nearest their value. SymPy's C printers would
  print the POSIX macros ``M_PI``, ``M_SQRT2``, ``M_LN2``... which ``<math.h>``
  does not define under ``-std=c99``.
* The piecewise-smooth functions the derivation produces (``sign``,
  ``Heaviside``, ``Piecewise``, ``Max``, ``Min``) print as one-line double
  expressions: ternary chains and ``fmax``/``fmin``.

:func:`unprintable` lists the subexpressions of an expression this printer
cannot print (an unevaluated ``Derivative``, an undefined function...), so
the derivation can refuse a model with a message naming them, instead of the
printer failing deep inside the emission.
"""

import sympy as sm
from sympy.printing.c import C99CodePrinter
from sympy.printing.precedence import PRECEDENCE


class ModelCodePrinter(C99CodePrinter):
    """Prints one expression of a model; ``names`` maps each symbol to C."""

    def __init__(self, names):
        # math_macros={}: never print M_PI, M_SQRT2... (POSIX, not C99); the
        # constants are printed as literals by _print below anyway.
        super().__init__({"contract": False, "math_macros": {}})
        self.names = names   # may change between statements (carried temporaries)

    def _print(self, expr, **kwargs):
        # A real irrational constant, however SymPy spells it (sqrt(2) is a
        # Pow, 1/sqrt(2) a Mul, log(2) a function), is one correctly rounded
        # double literal: exact where SymPy's printer would print a macro or
        # a run-time computation such as (1.0/3.141592653589793).
        if _is_irrational_constant(expr):
            return _double_literal(expr)
        return super()._print(expr, **kwargs)

    def _print_Symbol(self, symbol):
        try:
            return self.names[symbol]
        except KeyError:
            raise KeyError(f"symbol {symbol} has no C name: it is not an input, a parameter "
                           "or a temporary of this model") from None

    def _print_Mul(self, expr, **kwargs):
        # Fold the numeric factors of a product into one literal when one of
        # them is irrational (sqrt(2)*x/3 -> 0.47140452079103168*x), so the
        # constant is rounded once; rational coefficients print as before.
        numeric = [a for a in expr.args if a.is_number]
        if any(_is_irrational_constant(a) for a in numeric):
            rest = [a for a in expr.args if not a.is_number]
            coefficient = sm.Mul(*numeric)
            if _is_irrational_constant(coefficient):
                literal = sm.Float(float(coefficient.evalf(40)), 17)
                return super()._print_Mul(sm.Mul(literal, *rest, evaluate=False), **kwargs)
        return super()._print_Mul(expr, **kwargs)

    def _print_Pow(self, expr):
        base, exponent = expr.base, expr.exp
        if exponent.is_Integer and 1 < abs(int(exponent)) <= 4:
            b = self.parenthesize(base, PRECEDENCE["Mul"])
            product = "*".join([b] * abs(int(exponent)))
            # parenthesized: the Mul printer treats a Pow as atomic
            return f"({product})" if exponent > 0 else f"(1.0/({product}))"
        if exponent == -1:
            return f"(1.0/{self.parenthesize(base, PRECEDENCE['Mul'])})"
        if exponent == sm.Rational(-1, 2):
            return f"(1.0/{self._ns}sqrt({self._print(base)}))"
        return super()._print_Pow(expr)

    def _print_Float(self, expr):
        # repr of a Python float round-trips exactly
        return repr(float(expr))

    def _print_NumberSymbol(self, expr):
        # M_PI, M_E... are POSIX, not C99: print the double nearest the constant
        return _double_literal(expr)

    _print_Pi = _print_NumberSymbol
    _print_Exp1 = _print_NumberSymbol
    _print_GoldenRatio = _print_NumberSymbol
    _print_EulerGamma = _print_NumberSymbol
    _print_Catalan = _print_NumberSymbol

    # -- piecewise-smooth functions -----------------------------------------------------
    # Each prints as a double expression on one line. Integer branches are
    # printed as doubles (1.0, not 1) so that no integer division can arise
    # from a quotient of two of them.

    def _branch(self, expr):
        if expr.is_Integer:
            return f"{int(expr)}.0"
        return self._print(expr)

    def _print_Piecewise(self, expr):
        pieces = list(expr.args)
        if pieces[-1].cond != sm.true:
            raise ValueError(f"Piecewise without a default (expr, True) branch: {expr}")
        text = f"({self._branch(pieces[-1].expr)})"
        for piece in reversed(pieces[:-1]):
            text = f"(({self._print(piece.cond)}) ? ({self._branch(piece.expr)}) : {text})"
        return text

    def _print_sign(self, expr):
        x = self._print(expr.args[0])
        return f"((double)(({x} > 0) - ({x} < 0)))"

    def _print_Heaviside(self, expr):
        # SymPy's value at 0 is the second argument (default 1/2)
        x = self._print(expr.args[0])
        at_zero = expr.args[1] if len(expr.args) > 1 else sm.S.Half
        return f"(({x} > 0) ? 1.0 : (({x} < 0) ? 0.0 : {self._branch(at_zero)}))"

    def _print_BooleanTrue(self, expr):
        return "1"   # C99 has no `true` without <stdbool.h>

    def _print_BooleanFalse(self, expr):
        return "0"


def _is_irrational_constant(expr):
    """A real, finite number that is not a SymPy Rational or Float: a constant
    such as pi, sqrt(2), log(10)/3 that needs rounding to a double."""
    return (isinstance(expr, sm.Expr) and not expr.is_Rational and not expr.is_Float
            and expr.is_number and expr.is_extended_real is True and expr.is_finite is True)


def _double_literal(expr):
    """The double nearest ``expr`` (evaluated with 40 digits), as a C literal
    that parses back to the same double (a negative one is parenthesized by
    the callers, from SymPy's precedence of the expression, like a Float)."""
    return repr(float(sm.N(expr, 40)))


# Expression classes that are not functions of numbers and that no C printer
# can turn into code; their presence means a derivation left something
# unevaluated.
_UNEVALUATED = (sm.Derivative, sm.Subs, sm.Integral, sm.Limit, sm.Sum, sm.Product, sm.Order)
# Constants that would print (NAN, INFINITY, I) but are never a valid entry
# of a block: a NaN or an infinity in a model's equations is an error.
_NOT_REAL_FINITE = (sm.S.NaN, sm.S.ComplexInfinity, sm.S.Infinity, sm.S.NegativeInfinity,
                    sm.S.ImaginaryUnit)


def unprintable(expr, printer=None, seen=None):
    """The subexpressions of ``expr`` that :class:`ModelCodePrinter` cannot
    print as C: unevaluated derivatives, substitutions, integrals..., and
    applied functions the C printer does not know (undefined functions,
    DiracDelta, ...). Each distinct node is inspected once (``seen``, a set
    that may be shared between calls, holds the nodes already inspected)."""
    printer = printer or ModelCodePrinter({})
    found = []
    seen = set() if seen is None else seen
    stack = [expr]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if isinstance(node, _UNEVALUATED) or node in _NOT_REAL_FINITE:
            found.append(node)
            continue
        if isinstance(node, sm.Piecewise) and node.args[-1].cond != sm.true:
            found.append(node)    # undefined where no condition holds
            continue
        if isinstance(node, sm.Function) and not _printable_function(printer, node):
            found.append(node)
            continue
        stack.extend(a for a in node.args if isinstance(a, sm.Basic))
    return found


def _printable_function(printer, node):
    """Does the printer know this applied function? Either as a C math
    function (``known_functions``) or by a ``_print_<Class>`` method of its
    own (not the generic ``_print_Function`` fallback)."""
    cls = type(node)
    if cls.__name__ in printer.known_functions or hasattr(node, printer.printmethod):
        return True   # a C math function, or a class that prints itself (_ccode)
    for klass in cls.__mro__:
        if klass in (sm.Function, sm.core.function.Application):
            return False
        method = getattr(type(printer), f"_print_{klass.__name__}", None)
        if method is not None:
            return getattr(method, "__name__", "") != "_print_not_supported"
    return False
