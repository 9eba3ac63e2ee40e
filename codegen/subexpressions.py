"""Walks of large expressions that share subtrees: each distinct node once.

The equations of a large model are trees with much sharing: the bicycle's
``mass_matrix_full`` and ``forcing_full`` hold about 20 million nodes as trees
but far fewer distinct ones. SymPy's ``xreplace``, ``free_symbols``,
``atoms`` and ``find_dynamicsymbols`` walk the trees, so they visit a shared
subexpression again on every path to it (minutes on the bicycle). The walks
here remember the nodes they have seen. Used by the derivation
(:mod:`codegen.derive`) and by the reference routes (:mod:`codegen.reference`).
"""

from __future__ import annotations

import sympy as sm
from sympy.core.function import AppliedUndef
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
