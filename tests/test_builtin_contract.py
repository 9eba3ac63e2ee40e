"""Every built-in model keeps the contract of ``codegen/models/__init__.py``:
its parameters in the order of ``DEFAULT_PARAMETERS`` (which
``codegen.operating_point`` relies on to lay out ``p``), and operating points
that satisfy the model's own constraints."""

import numpy as np
import pytest

import codegen
from codegen.models import BUILTIN, builtin_module

FAST = sorted(set(BUILTIN) - {"bicycle"})   # the bicycle's contract: tests/test_bicycle.py


@pytest.mark.parametrize("name", FAST)
def test_parameters_in_the_order_of_default_parameters(name):
    module = builtin_module(name)
    model = module.make_model()
    assert model.p_names == list(module.DEFAULT_PARAMETERS)
    assert model.parameter_values == list(module.DEFAULT_PARAMETERS.values())


@pytest.mark.parametrize("name", FAST)
def test_default_operating_point_has_the_model_sizes(name):
    module = builtin_module(name)
    model = module.make_model()
    point, kwargs = module.DEFAULT_OPERATING_POINT
    op = codegen.operating_point(name, point, **kwargs)
    assert op.q.shape == (model.n,) and op.u.shape == (model.o,)
    assert op.r.shape in ((0,), (model.s,)) and op.p.shape == (len(model.parameters),)
    assert np.all(np.isfinite(op.q)) and np.all(np.isfinite(op.u))
