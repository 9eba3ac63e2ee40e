"""Linearized equations of motion of constrained multibody systems, as C.

The pipeline, one module per stage, in the order data flows:

1. :mod:`codegen.model`  -- a ``KanesMethod`` (or ``LagrangesMethod``, ``System``) and parameters
   become a :class:`Model`;
2. :mod:`codegen.derive` -- the linearization blocks (M_qq, A_qq, ...) are formed
   symbolically, once;
3. :mod:`codegen.emit`   -- one CSE over all blocks, C and Cython text from templates;
4. :mod:`codegen.compile` -- compiled into a cached, atomically installed package;
5. :mod:`codegen.load`   -- imported; :mod:`codegen.runtime` is its Python face.

:mod:`codegen.pipeline` runs them in order; ``python -m codegen`` is the CLI.
"""

__version__ = "0.1.0"

_LAZY = {
    "Model": "codegen.model",
    "multipliers": "codegen.model",
    "build": "codegen.pipeline",
    "build_artifact": "codegen.pipeline",
    "load_model_file": "codegen.pipeline",
    "operating_point": "codegen.pipeline",
    "OperatingPoint": "codegen.pipeline",
    "eigenvalue_sensitivities": "codegen.runtime.results",
}

from .load import load  # noqa: E402  (light: no SymPy)

__all__ = sorted(_LAZY) + ["load", "__version__"]


def __getattr__(name):
    # SymPy loads only when a model is built, not when a generated module is imported.
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'codegen' has no attribute {name!r}")
