"""The walks that visit each distinct subexpression once
(codegen/subexpressions.py) give what SymPy's tree walks give: xreplace,
free_symbols and find_dynamicsymbols, on models' equations (sharing, functions
of time, their derivatives) and on expressions built to share subtrees."""

import pytest
import sympy as sm
from sympy.physics.mechanics import dynamicsymbols, find_dynamicsymbols

from codegen import subexpressions
from codegen.models import cart_chain, disk


def _equations(make):
    kane = make().kane
    return [kane.mass_matrix_full, kane.forcing_full], kane


@pytest.mark.parametrize("make", [disk.make_model, lambda: cart_chain.make_model(3, True)],
                         ids=["disk", "closed cart chain"])
def test_the_same_as_sympys_tree_walks(make):
    matrices, kane = _equations(make)
    t = dynamicsymbols._t
    q, u = list(kane.q), list(kane.u)
    joined = matrices[0].row_join(matrices[1])
    for exclude in ((), set(q), set(q) | set(u)):
        assert subexpressions.dynamic_symbols(matrices, exclude) == \
            find_dynamicsymbols(joined, exclude=exclude or None)
    rule = {qi.diff(t): sm.Symbol(f"qd{i}") for i, qi in enumerate(q)}
    rule.update({qi: sm.Symbol(f"q{i}") for i, qi in enumerate(q)})
    rule.update({ui: sm.Symbol(f"u{i}") for i, ui in enumerate(u)})
    done = {}
    for matrix in matrices:
        replaced = subexpressions.replace(matrix, rule, done)
        assert replaced == matrix.xreplace(rule)
        assert subexpressions.free_symbols([replaced]) == replaced.free_symbols
    assert done, "the shared memo holds the rewritten nodes"


def test_shared_subtrees_are_walked_once():
    """2**40 paths to the innermost node: a tree walk would not end."""
    x, y = sm.symbols("x y")
    f = dynamicsymbols("f")
    e = f + x
    for _ in range(40):
        e = sm.sin(e) * sm.cos(e) + e
    assert subexpressions.dynamic_symbols([e]) == {f}
    assert subexpressions.free_symbols([e]) == {x, dynamicsymbols._t}
    replaced = subexpressions.replace(sm.Matrix([e]), {f: y})[0]
    assert subexpressions.free_symbols([replaced]) == {x, y}
    assert len(subexpressions.distinct_nodes([e])) < 500
