"""Exceptions raised by the pipeline and by generated modules.

This module imports nothing heavy, so a generated module can use it without
loading SymPy.
"""


class CodegenError(Exception):
    """Base class of every error this package raises."""


class ModelError(CodegenError, ValueError):
    """The model cannot be generated as given (undeclared symbol, bad shape...)."""


class BuildError(CodegenError, RuntimeError):
    """Compiling or installing a generated module failed."""


class EvaluationError(CodegenError, ValueError):
    """A generated function refused an operating point; the message says why."""


class InputError(EvaluationError):
    """Wrong shape, wrong length or non-finite value in the arguments."""


class SingularMatrixError(EvaluationError):
    """A matrix that must be inverted is singular at the operating point."""


class ConstraintViolationError(EvaluationError):
    """The operating point does not satisfy f_c or f_v within the tolerance."""


class ConvergenceError(EvaluationError):
    """Newton's method did not converge when completing an operating point."""


class IllConditionedWarning(UserWarning):
    """A partition block (J_c P_qd or B_v P_ud) is ill-conditioned at the point:
    the result is computed, but about log10(condition) of its digits are at
    risk. Choose a better-conditioned partition (``dependent_q="auto"``) or
    use ``linearize_local``."""


class MultipleRootWarning(UserWarning):
    """``complete`` converged where J_c P_qd is (nearly) singular: a multiple
    root of f_c, where Newton's method converges slowly and the dependent
    coordinates are only accurate to about sqrt(tol)."""


class NotSteadyWarning(UserWarning):
    """The operating point is not steady in the chart of the result: some of
    the chart's essential states (those the equations depend on) change along
    the motion there. A is still the linearization at the point in that
    chart, but the point is no equilibrium of the linearized equations: its
    eigenvalues depend on the chart and do not describe stability. A static
    equilibrium is steady in every chart; a steady motion (a rolling wheel,
    a bicycle at speed) in a chart whose states it keeps constant, such as
    the model's own partition. The message names the states; pass
    ``steady_tol=None`` to skip the check."""
