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


# ---- count_operations: SymPy's count_ops, faster -----------------------------

_x, _y, _z = sm.symbols("x y z", real=True)


def _expressions():
    """Random expressions of what models hold: sums and differences, products
    with integer, rational, float and negative coefficients, powers (negative,
    fractional, symbolic), quotients, sin, cos, exp, sqrt, abs."""
    from hypothesis import strategies as st

    leaves = st.sampled_from([_x, _y, _z, sm.Integer(2), sm.Integer(-3), sm.Rational(1, 2),
                              sm.Rational(-3, 4), sm.Float(1.5), sm.Float(-1.0), sm.pi, sm.E])
    unary = [sm.sin, sm.cos, sm.exp, sm.sqrt, sm.Abs, lambda a: -a, lambda a: 1 / a,
             lambda a: a ** 2, lambda a: a ** -2, lambda a: a ** sm.Rational(-1, 2), lambda a: a ** _z]
    binary = [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / b,
              lambda a, b: -a * b, lambda a, b: a - 2 * b]

    def extend(children):
        return st.one_of(st.tuples(st.sampled_from(unary), children).map(lambda t: t[0](t[1])),
                         st.tuples(st.sampled_from(binary), children, children).map(lambda t: t[0](t[1], t[2])))

    return st.recursive(leaves, extend, max_leaves=12)


def test_count_operations_is_sympys_count_ops():
    from hypothesis import given, settings

    @settings(max_examples=400, deadline=None, derandomize=True)
    @given(_expressions())
    def check(expr):
        assert subexpressions.count_operations(expr) == sm.count_ops(expr), expr

    check()


def test_count_operations_on_a_models_cse_output():
    """Every temporary and reduced entry of the disk's and the closed chain's CSE."""
    from codegen.derive import derive
    from codegen.emit import StageEmitter

    for model in (disk.make_model(), cart_chain.make_model(3, True)):
        emitter = StageEmitter(derive(model))
        expressions = list(emitter.temporary_expr.values()) + [
            expr for exprs in emitter.reduced.values() for expr in exprs]
        assert [subexpressions.count_operations(e) for e in expressions] == \
            [sm.count_ops(e) for e in expressions]
