"""Systems written both with LagrangesMethod and with KanesMethod (speeds the
coordinate rates, so both have the same states), for tests/test_lagrange.py.
Each module's ``make_lagrange()`` and ``make_kane()`` return a codegen Model."""
