"""Built-in models.

Each built-in model is a module here with

* ``DESCRIPTION``: one line for ``python -m codegen list``;
* ``DEFAULT_PARAMETERS``: parameter name -> default value, in the order of the
  model's ``p`` (the one home of both: ``make_model`` builds its parameters
  from it, and :func:`codegen.operating_point` lays out ``p`` by it);
* ``make_model()``: returns a :class:`codegen.Model` (keyword options allowed,
  with defaults);
* ``OPERATING_POINTS``: name -> function ``(parameters, **kwargs) -> (q, u)`` or
  ``(q, u, r)``, where ``parameters`` maps parameter names to values and the
  returned vectors satisfy every constraint;
* ``DEFAULT_OPERATING_POINT``: ``(name, kwargs)`` used by the CLI and the benchmark
  (:func:`codegen.pipeline.default_point`);
* optionally ``SWEEP``: the defaults of ``python -m codegen sweep``;
* optionally ``expected_eigenvalues(parameters, name, **kwargs)``: a line of text
  with a published closed form, printed by the CLI next to the computed values.
"""

import importlib

BUILTIN = {
    "disk": "codegen.models.disk",
    "cart_chain": "codegen.models.cart_chain",
    "bicycle": "codegen.models.bicycle",
    "fourbar": "codegen.models.fourbar",
    "spencer_pendulum": "codegen.models.spencer_pendulum",
    "parallel_fourbar": "codegen.models.parallel_fourbar",
    "five_bar": "codegen.models.five_bar",
    "flexible_pendulum": "codegen.models.flexible_pendulum",
}


def builtin_module(name):
    try:
        return importlib.import_module(BUILTIN[name])
    except KeyError:
        raise KeyError(f"no built-in model {name!r}; built-in models: {', '.join(sorted(BUILTIN))}") from None
