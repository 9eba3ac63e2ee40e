"""The tests' references: SymPy's own routes (:mod:`codegen.reference`, where the
SymPy pitfalls they work around are documented), plus two test helpers."""

from __future__ import annotations

import numpy as np

from codegen.reference import (KaneReference, PlainSymbols, linearizer_AB,  # noqa: F401
                               make_linearizer)


def capture_kane(module, function="make_model"):
    """``(kane, kwargs)``: the KanesMethod of the codegen Model that
    ``module.function()`` returns, and the keyword arguments (parameters,
    inputs, name, description) that make that Model."""
    model = getattr(module, function)()
    return model.kane, dict(parameters=dict(zip(model.parameters, model.parameter_values)),
                            inputs=list(model.inputs), name=model.name,
                            description=model.description)


def assert_matrices_close(actual, expected, rtol, label=""):
    """Entrywise |a - e| <= rtol |e| + rtol * max|e| (relative to the matrix scale)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (label, actual.shape, expected.shape)
    scale = max(1.0, float(np.abs(expected).max())) if expected.size else 1.0
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale, err_msg=label)
