"""Walks of large expressions that share subtrees: each distinct node once.

The equations of a large model are trees with much sharing: the bicycle's
``mass_matrix_full`` and ``forcing_full`` hold about 20 million nodes as trees
but far fewer distinct ones. SymPy's ``xreplace``, ``free_symbols``,
``atoms`` and ``find_dynamicsymbols`` walk the trees, so they visit a shared
subexpression again on every path to it (minutes on the bicycle). The walks
here remember the nodes they have seen. Used by the derivation
(:mod:`codegen.derive`) and by the reference routes (:mod:`codegen.reference`).
And ``count_operations``: SymPy's ``count_ops`` of the CSE output, faster.
"""

from __future__ import annotations

import sympy as sm
from sympy.core.function import AppliedUndef, _coeff_isneg
from sympy.core.operations import LatticeOp
from sympy.simplify.radsimp import fraction
from sympy.physics.mechanics import dynamicsymbols


def replace(matrix, rule, done=None):
    """``matrix.xreplace(rule)``, each distinct subexpression rewritten once
    (SymPy's xreplace rewrites a subexpression again wherever it is shared:
    a third of the derivation of the 32-link chain). ``done``: a dict of the
    nodes already rewritten with this ``rule``, to share between calls."""
    done = {} if done is None else done

    def walk(node):
        try:
            return done[node]
        except KeyError:
            pass
        if node in rule:
            result = rule[node]
        elif not node.args:
            result = node
        else:
            args = [walk(arg) if isinstance(arg, sm.Basic) else arg for arg in node.args]
            changed = any(new is not old for new, old in zip(args, node.args))
            result = node.func(*args) if changed else node
        done[node] = result
        return result

    matrix = sm.Matrix(matrix)
    return sm.Matrix(matrix.rows, matrix.cols, [walk(entry) for entry in matrix])


def distinct_nodes(expressions):
    """The set of distinct subexpressions of ``expressions`` (matrices or
    expressions), each visited once."""
    seen = set()
    stack = [entry for expression in expressions
             for entry in (expression if isinstance(expression, sm.MatrixBase) else [expression])]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        stack.extend(arg for arg in node.args if isinstance(arg, sm.Basic))
    return seen


def free_symbols(expressions):
    """The symbols in ``expressions`` (no bound variables are expected: a
    Derivative's or a Lambda's variables count too)."""
    return {node for node in distinct_nodes(expressions) if isinstance(node, sm.Symbol)}


def dynamic_symbols(expressions, exclude=()):
    """``find_dynamicsymbols`` over ``expressions``: the functions of time and
    their derivatives in them, without those in ``exclude``."""
    time = {dynamicsymbols._t}
    found = {node for node in distinct_nodes(expressions)
             if isinstance(node, (AppliedUndef, sm.Derivative)) and node.free_symbols == time}
    return found - set(exclude)


def _plain_factor(factor):
    """Whether SymPy's ``fraction`` keeps a factor of a product in the
    numerator as it is (no negative or symbolic power, no exp, no
    non-integer rational)."""
    if factor.is_Pow:
        return factor.exp.is_Number and factor.exp.is_positive and factor.base is not sm.S.Exp1
    if factor.is_Rational:
        return factor.q == 1
    return not isinstance(factor, sm.exp)


def _negated_factors(args):
    """The factors of ``-Mul(*args)`` (its first, a negative number)."""
    return args[1:] if args[0] is sm.S.NegativeOne else (-args[0],) + args[1:]


def _product(factors, stack):
    """The MUL operations of a product of plain factors; its factors (or the
    one factor) go on the stack to be counted."""
    stack.extend(factors)
    return len(factors) - 1


def count_operations(expr):
    """``sympy.count_ops(expr)``, the same number, without SymPy's visual
    expression and, for products of plain factors, without negating or
    splitting them into numerator and denominator (16x faster on the
    bicycle's CSE output; ``tests/test_subexpressions.py`` checks it against
    SymPy). Subtractions and negations count as SymPy counts them."""
    S = sm.S
    total = 0
    stack = [expr]
    push, extend = stack.append, stack.extend
    while stack:
        a = stack.pop()
        if a.is_Symbol:
            continue
        if a.is_Rational:
            if a is not S.One:
                total += (a.p < 0) + (a.q != 1)
            continue
        if a.is_Mul:
            args = a.args
            if all(_plain_factor(f) for f in args):
                if args[0].is_Number and args[0].is_extended_negative:
                    total += 1                  # NEG
                    args = _negated_factors(args)
                    if len(args) == 1 and args[0].is_Add:
                        extend(args[0].args)    # SymPy goes on with the sum's terms
                        continue
                total += _product(args, stack)
                continue
            if _coeff_isneg(a):
                total += 1
                a = a.as_two_terms()[1] if a.args[0] is S.NegativeOne else -a
            numerator, denominator = fraction(a)
            if numerator.is_Integer:
                total += 1 + bool(numerator.is_negative)    # DIV (and NEG)
                push(denominator)
                continue
            if denominator is not S.One:
                if not denominator.is_Integer:
                    push(denominator)
                total += 1                      # DIV
                push(numerator)
                continue
        elif a.is_Add:
            terms = a.args
            negative = 0
            for term in terms:
                if _coeff_isneg(term):
                    negative += 1
                    if term.is_Mul and all(_plain_factor(f) for f in term.args):
                        total += _product(_negated_factors(term.args), stack)
                    else:
                        push(-term)
                else:
                    push(term)
            # ADD or SUB between terms; NEG where every term is negative
            total += len(terms) - 1 + (negative == len(terms))
            continue
        if a.is_Pow and a.exp is S.NegativeOne:
            total += 1                          # DIV
            push(a.base)
            continue
        if a is S.Exp1:
            total += 1
            continue
        if a.is_Pow and a.base is S.Exp1:
            total += 1                          # EXP
            push(a.exp)
            continue
        if a.is_Mul or isinstance(a, LatticeOp):
            total += len(a.args) - 1
        elif a.args and (a.is_Pow or a.is_Function or isinstance(a, (sm.Derivative, sm.Integral, sm.Sum))):
            total += 1
        extend(a.args)
    return total
