"""The status codes of the generated C: one table, rendered everywhere.

Each code is rendered into the header (``#define <NAME>_ERR_...`` with its
documentation), into the C function ``<name>_status_message`` and, through
:mod:`codegen.runtime`, into the Python constants and the exception each
failed call raises. Codes are consecutive from 0; add new ones at the end.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Status:
    name: str          # the C macro is <NAME>_<name> (OK) or <NAME>_ERR_<name>
    code: int
    message: str       # the sentence of <name>_status_message
    exception: str     # class name in codegen.errors raised by the Python module
    doc: str           # what the header says about it: cause, and what to do

    @property
    def macro_suffix(self):
        return self.name if self.name == "OK" else f"ERR_{self.name}"


STATUSES = (
    Status("OK", 0, "success", "", ""),
    Status("NONFINITE_INPUT", 1, "an input holds NaN or Inf", "InputError",
           "An argument holds NaN or +-Inf: fix the caller's data."),
    Status("BAD_PARTITION", 2, "a dependent index is out of range or repeated", "InputError",
           "A partition index is out of range or repeated."),
    Status("CONFIGURATION_CONSTRAINT", 3,
           "the configuration constraints f_c are violated beyond the tolerance",
           "ConstraintViolationError",
           "|f_c|_inf > tol: the configuration is off the constraint manifold. Complete the "
           "point with {name}_complete_point, or pass a larger tol (tol < 0 skips the check)."),
    Status("VELOCITY_CONSTRAINT", 4,
           "the velocity constraints f_v are violated beyond the tolerance",
           "ConstraintViolationError",
           "|f_v|_inf > tol: the speeds violate the velocity constraints (as above)."),
    Status("SINGULAR_M_QQ", 5,
           "M_qq (d f_k/d qd) is singular: the kinematic equations do not determine qd",
           "SingularMatrixError",
           "M_qq = d f_k/d qd is singular: the kinematic equations do not determine qd here "
           "(a coordinate singularity of the model, e.g. gimbal lock)."),
    Status("SINGULAR_M_UU", 6,
           "the speed mass matrix [M_uuc; M_uud] is singular: the dynamic equations do not "
           "determine ud",
           "SingularMatrixError",
           "The speed mass matrix [M_uuc; M_uud] is singular: the dynamic equations with the "
           "acceleration constraints do not determine ud here."),
    Status("SINGULAR_CONFIGURATION_PARTITION", 7,
           "J_c P_qd is singular: choose other dependent coordinates", "SingularMatrixError",
           "J_c P_qd (columns of d f_c/d q of the dependent coordinates) is singular: choose "
           "other dependent coordinates for this configuration."),
    Status("SINGULAR_VELOCITY_PARTITION", 8,
           "B_v P_ud is singular: choose other dependent speeds", "SingularMatrixError",
           "B_v P_ud (columns of d f_v/d u of the dependent speeds) is singular: choose other "
           "dependent speeds for this configuration."),
    Status("NONFINITE_RESULT", 9,
           "the model's expressions evaluate to NaN or Inf at this point (e.g. 0/0, or an "
           "overflow)",
           "EvaluationError",
           "A result is NaN or +-Inf (overflow, or the model's expressions are undefined here, "
           "e.g. 0/0 in the equations). Returned instead of a singular-matrix status when the "
           "matrix itself holds NaN or Inf, and instead of a constraint status when a residual "
           "is NaN: the cause is the model's expressions at this point, not the partition."),
    Status("NO_CONVERGENCE", 10, "Newton's method did not converge", "ConvergenceError",
           "Newton's method did not reach tol within max_iter iterations (complete_point: on "
           "f_c; equilibrium: on the equilibrium equations)."),
    Status("NULL_ARGUMENT", 11, "a required pointer argument is NULL", "InputError",
           "A required pointer argument is NULL."),
    Status("RANK_DEFICIENT", 12,
           "a constraint Jacobian is rank-deficient here (a singular configuration): no "
           "partition works; use linearize_local", "SingularMatrixError",
           "J_c or B_v has lower rank than it has rows at this point (a singular "
           "configuration, or redundant constraints): no choice of NC dependent coordinates "
           "(NV dependent speeds) is valid. {name}_linearize_local and "
           "{name}_linearize_descriptor linearize such points."),
    Status("NO_PROGRESS", 13, "the iteration stopped: the residual no longer decreases",
           "ConvergenceError",
           "equilibrium: no step along the Gauss-Newton direction (halved down to 1e-12 of it) "
           "decreases the residual: a least-squares minimum that is no solution (e.g. too many "
           "coordinates held fixed, or speeds held that violate f_v), or a point where the "
           "residual is not differentiable. q and u hold the last iterate."),
    Status("WIDTH", 14, "the point's local form has more states than the batch's rows hold",
           "InputError",
           "linearize_local_batch: the point's local form has nx states, more than the rows' "
           "width (a singular configuration in a batch laid out for regular points): call "
           "again with width = NS, which holds every point."),
)

assert [s.code for s in STATUSES] == list(range(len(STATUSES)))

CODES = {s.name: s.code for s in STATUSES}
