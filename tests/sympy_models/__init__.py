"""Models of SymPy's own mechanics test suite (sympy/physics/mechanics/tests/),
ported for tests/test_sympy_suite_models.py.

Each module says which SymPy test it comes from and what was changed, and
provides ``make_kane()`` -> ``(kane, parameters, inputs)`` (the KanesMethod on
which kanes_equations() has been called, the constant symbols with default
values, the input dynamic symbols), ``make_model()`` -> ``codegen.Model`` and
``POINTS``: operating points as guesses ``(q, u, r)`` in the KanesMethod's
order, completed (dependent coordinates and speeds solved) by the test with
the reference's own Newton solver.
"""
