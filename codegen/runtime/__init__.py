"""The Python face of a generated module.

A generated package (``generated/<name>/``) imports :class:`CompiledModel`
from here and builds one from its compiled kernel. The modules, one concern
each, in the order they import one another:

* :mod:`.kernel`: every call into the kernel, the status codes, the thread
  pool and :func:`run_batch`;
* :mod:`.diagnostics`: status -> exception with context, rank text, warnings;
* :mod:`.arguments`: the broadcasting rule, once (:class:`~.arguments.Batch`);
  names -> indices; the numeric options; the old argument order;
* :mod:`.results`: :class:`PartitionedResult`, :class:`DescriptorForm`,
  :class:`LocalLinearization` (picklable, with metadata);
* :mod:`.control`: ``state_space`` (python-control);
* :mod:`.pickling`: build references, :class:`GeneratedPackage`;
* :mod:`.compiled`: :class:`CompiledModel`, which puts them together.

It imports only NumPy, so loading a generated module does not load SymPy.
"""

from . import arguments, control, diagnostics, kernel, pickling, results
from .arguments import AUTO, MAX_ITER, STEADY_TOL
from .compiled import CompiledModel
from .diagnostics import MULTIPLE_ROOT
from .kernel import (CHECK_WORK, CONFIGURATION_CONSTRAINT, MAX_THREADS, NO_CONVERGENCE,
                     NO_PROGRESS, NONFINITE_INPUT, NONFINITE_RESULT, OK, PARALLEL_THRESHOLD,
                     PARALLEL_WORK, RANK_DEFICIENT, SINGULAR_CONFIGURATION_PARTITION,
                     SINGULAR_M_UU, SINGULAR_VELOCITY_PARTITION, VELOCITY_CONSTRAINT, check_every,
                     run_batch)
from .pickling import GeneratedPackage, _model_from_build, _package_from_build
from .results import DescriptorForm, LocalLinearization, PartitionedResult, _rebuild_tuple

# Pickles name a class or function by its module: these are named by this
# package (where pickles made before it was split into modules find them too),
# so that moving them between its modules never breaks a saved pickle.
for _pickled in (CompiledModel, GeneratedPackage, _model_from_build, _package_from_build,
                 DescriptorForm, LocalLinearization, PartitionedResult, _rebuild_tuple):
    _pickled.__module__ = __name__
del _pickled

__all__ = ["CompiledModel", "GeneratedPackage", "PartitionedResult", "DescriptorForm",
           "LocalLinearization", "run_batch", "check_every", "AUTO", "MAX_ITER", "STEADY_TOL",
           "MULTIPLE_ROOT", "PARALLEL_THRESHOLD", "PARALLEL_WORK", "MAX_THREADS", "CHECK_WORK",
           "OK", "NONFINITE_INPUT", "CONFIGURATION_CONSTRAINT", "VELOCITY_CONSTRAINT",
           "SINGULAR_CONFIGURATION_PARTITION", "SINGULAR_VELOCITY_PARTITION", "SINGULAR_M_UU",
           "NONFINITE_RESULT", "NO_CONVERGENCE", "NO_PROGRESS", "RANK_DEFICIENT"]
