"""The third rendering of the procedure: lane code, W points at once.

Beside the straight-line rendering (one point, static pivots) and the looped
one (any partition, the rank-revealing half), the fast path of ``linearize``
and of ``state_derivative`` is rendered a third time for W points per call:
every value of the straight-line code becomes W values, one per *lane*,
stored structure-of-arrays (``w->M_uu[17][k]``: entry 17 of lane k), and the
body of each stage runs inside one loop over the lanes that the compiler
turns into vector instructions (``#pragma omp simd``). It is generated from
the same data as the straight-line code: the CSE statements of the symbolic
blocks (printed again, with lane names) and the traced operations of
:mod:`codegen.straight_line` (laid out by the lane macros of
``templates/lanes.c.jinja``). Nothing of it is written by hand.

What changes in a lane: a check (a static pivot, finiteness, the constraint
tolerance, the inputs) never returns; it sets the lane's flag, and the
lane's point is computed again, alone, by the ordinary scalar code (which
takes the general path or reports the error). So a batch returns exactly what
per-point calls return: the lanes do the same operations in the same order
(no reassociation, no contraction into fused multiply-adds), and the math
functions are the scalar libm's, called lane by lane through functions with
SIMD variants (``#pragma omp declare simd``), unless the build allows glibc's
vector math library (``vector_math``: sin, cos, exp, log, pow, a few ulps).

The compiler flags that make this fast (``-O3``, the instruction set, the
vector width) are the build's (:mod:`codegen.compile`); the lane code is one
translation unit of its own, ``<name>_lanes.c``, so the model's C keeps its
portable flags.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import sympy as sm

from .printer import ModelCodePrinter
from .procedure import ARRAYS
from .straight_line import Element, Temp, Trace

# C math functions the compiler vectorizes itself, exactly (correctly rounded
# IEEE operations): printed as they are.
NATIVE_FUNCTIONS = ("sqrt", "fabs")

# The other C99 math functions the printer may print, with their arities. In
# lane code each is called through a function with a SIMD variant that calls
# the scalar function lane by lane: the loop around it vectorizes, the values
# are the scalar ones.
LIBM_ARITIES = {
    **{f: 1 for f in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
                      "acosh", "atanh", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
                      "cbrt", "erf", "erfc", "tgamma", "lgamma", "floor", "ceil", "trunc", "round")},
    **{f: 2 for f in ("pow", "atan2", "hypot", "fmod", "fmax", "fmin", "copysign")},
}

# glibc's vector math library (libmvec) has had SIMD variants of these since
# version 2.22 (x86-64): with vector_math the lanes call them (not
# bit-identical to the scalar libm: a few ulps).
VECTOR_MATH_FUNCTIONS = ("sin", "cos", "exp", "log", "pow")

# The stages of each lane kernel, in order: "evaluate <stage>" evaluates a
# stage's symbolic blocks, "constraints" checks them against the tolerance,
# the others are straight-line sections of codegen.procedure's stages.
_LINEARIZE = ("evaluate residuals", "evaluate constraint_jacobians", "constraints",
              "evaluate kinematics", "kinematic_rates", "evaluate dynamics", "dynamic_rates",
              "evaluate jacobians", "partition", "solution")
KERNELS = {
    "linearize": _LINEARIZE,
    # linearize where the caller asks for neither A' nor B' (linearize's A, B):
    # the solution without the dependent rows of A_full, B_full and their
    # checks (the scalar code checks only the outputs asked for)
    "linearize_reduced": _LINEARIZE[:-1] + ("solution_reduced",),
    # the regular-point stage of linearize_local: the default partition's
    # chart, its Gram-Schmidt bases (where a lane's rank certificate or Gram
    # check fails, its point takes the scalar code, which may take the SVDs);
    # the chart reads A, not A' (the scalar code asks the solution for no
    # output, and checks none of it)
    "linearize_local": _LINEARIZE[:-1] + ("solution_reduced", "local_chart"),
    "state_derivative": ("evaluate residuals", "evaluate constraint_jacobians", "evaluate kinematics",
                         "kinematic_rates", "evaluate dynamics", "dynamic_rates"),
}

# the straight-line section a kernel's step is made from, where it is another's
SECTION_OF = {"solution_reduced": "solution"}

# the outputs of each kernel, copied out of the lanes of good points
KERNEL_OUTPUTS = {"linearize": ("A", "B", "A_full", "B_full", "qd", "ud"),
                  # the sensitivities' primal (point_lane_code): A and B, the
                  # tangents after it
                  "sensitivities_primal": ("A", "B"),
                  "linearize_reduced": ("A", "B", "qd", "ud"),
                  # and the partition's A, qd*, ud* where the caller computes the steadiness (NX > 64)
                  "linearize_local": ("A_local", "B_local", "T_local", "A", "qd", "ud"),
                  "state_derivative": ("qd", "ud")}

# the parameters every lane kernel begins with: whether the block is the
# batch's first (the parameters' math calls are kept from it where the points
# share one parameter vector), the points and their inputs with strides
KERNEL_PARAMETERS = ("int first, int count, const double *t, int t_stride, const double *q, int q_stride, "
                     "const double *u, int u_stride, const double *r, int r_stride, const double *p, "
                     "int p_stride")



def solves(steps):
    """Whether a kernel's steps end with a solution (A and the steadiness)."""
    return any(step.startswith("solution") for step in steps)


def reduced_solution(section):
    """The solution's straight-line operations without what only A_full and
    B_full need (their stores, the rows placed into them, their checks), and
    without the definitions nothing else uses; None where a kept operation
    reads A_full or B_full."""
    full = ("A_full", "B_full")
    kept = []
    for o in section:
        if o.op == "place_rows" or (o.op in ("store", "check_finite") and o.array in full):
            continue
        if o.op == "check_outputs":
            outputs = tuple((target, count) for target, count in o.outputs if target not in full)
            if not outputs:
                continue
            o = replace(o, outputs=outputs)
        kept.append(o)
    live, reduced = set(), []
    for o in reversed(kept):
        if o.op == "define" and o.name not in live:
            continue
        if any(getattr(v, "kind", None) == "element" and v.array in full
               for v in (*o.args, *o.entries, *o.others, o.pivot, o.value)):
            return None
        live.update(o.uses())
        reduced.append(o)
    return reduced[::-1]


def constant_entries(kernels, sections):
    """kernel -> output -> {index: value} of the entries of the output every
    one of the kernel's sections stores as the same number (a structural zero
    or one): unload writes them without reading the lanes. Only for outputs
    stored by ``store`` operations alone (not placed rows), and not for
    linearize_local (its rows have the caller's width)."""
    found = {}
    for kernel, steps in kernels.items():
        if kernel == "linearize_local":
            continue
        stores, placed = {}, set()
        for step in steps:
            for o in sections.get(step, ()):
                if o.op == "store":
                    stores.setdefault(o.array, {}).setdefault(o.index, set()).add(
                        o.value if isinstance(o.value, float) else None)
                elif o.op == "place_rows":
                    placed.update(full for _, full, _ in o.outputs)
        found[kernel] = {}
        for out in KERNEL_OUTPUTS[kernel]:
            if out in placed or out not in stores:
                continue
            constant = {index: values.pop() for index, values in stores[out].items()
                        if len(values) == 1 and None not in values}
            if constant:
                found[kernel][out] = constant
    return found


def kernel_signature(name, kernel):
    """The C prototype of a lane kernel (``<name>_lanes_<kernel>``): the
    block's inputs, the constraint tolerance (linearize), the outputs of the
    good points, linearize's steadiness, the good flags and the lanes' memory."""
    steps = SENSITIVITY_PRIMAL if kernel == "sensitivities_primal" else KERNELS[kernel]
    outputs = "".join(f"double *{out}, " for out in KERNEL_OUTPUTS[kernel])
    options = (", double tol" if "constraints" in steps else "") + \
        (", double rank_tol, int width" if "local_chart" in steps else "")
    steadiness = "double steady_tol, int *unsteady, " if solves(steps) else ""
    return f"int {name}_lanes_{kernel}({KERNEL_PARAMETERS}{options}, {outputs}{steadiness}int *good, double *memory)"


# the local chart's outputs (the caller's A, B, T of linearize_local) as
# arrays of the lanes, beside linearize's A and B
LOCAL_OUTPUTS = {"A": "A_local", "B": "B_local", "T": "T_local"}
# arrays of the lanes that are not workspace arrays (codegen.procedure.ARRAYS):
# the local form's embedding at a regular point, NS x NX
LANE_ARRAYS = {"T_local": (("nq", "nu"), ("nqi", "nui"))}


# operations of the straight-line trace the lane macros lay out
LANE_OPERATIONS = ("define", "scale", "check_pivot", "check_positive", "check_at_most", "check_rank",
                   "reject", "store", "check_finite", "place_rows", "comment", "check_outputs")


class LanePrinter(ModelCodePrinter):
    """Prints an expression for lane k: every math function through its lane
    function (``lane_sin``...), see :data:`LIBM_ARITIES`; a call computed
    before the loops (``hoisted``: the call -> its C) as that value."""

    _ns = "lane_"

    def __init__(self, names, hoisted=None):
        super().__init__(names)
        self.hoisted = hoisted or {}

    def _print(self, expr, **kwargs):
        found = self.hoisted.get(expr) if isinstance(expr, sm.Function) else None
        return found if found is not None else super()._print(expr, **kwargs)


def hoisted_calls(emitter, parts, derivation):
    """The math function calls of the kernels' blocks whose arguments are
    inputs of the point only (t, q, u, r, p): computed before the loops, lane
    by lane with the scalar libm (where the compiler fuses sin and cos of one
    argument into one sincos call, as it does in the scalar code), instead of
    through SIMD variants inside them. In a deterministic order."""
    d = derivation
    inputs = {d.t, *d.q, *d.u, *d.r, *d.p}
    exprs = [expr for _, _, entries in parts for _, _, expr in entries]
    exprs += [emitter.temporary_expr[s] for s in emitter._closure(exprs)]
    calls = set()
    for expr in exprs:
        for call in expr.atoms(sm.Function):
            name = type(call).__name__
            if (name in LIBM_ARITIES and call.free_symbols <= inputs
                    and not any(arg.atoms(sm.Function) for arg in call.args)):
                calls.add(call)
    return sorted(calls, key=sm.default_sort_key)


def scalar_math_statements(hoisted, printer, parameters):
    """The hoisted calls as the scalar libm computes them, in their order: a
    sin and a cos of one argument as one ``sincos`` (glibc's sincos gives the
    bits of its sin and cos: they share their kernels), the others alone.
    ``shared``: the call depends on the parameters only (computed once a batch
    where the batch shares one parameter vector)."""
    index = {call: j for j, call in enumerate(hoisted)}
    statements, done = [], set()
    for j, call in enumerate(hoisted):
        if j in done:
            continue
        shared = call.free_symbols <= parameters
        partner = None
        if isinstance(call, (sm.sin, sm.cos)):
            other = (sm.cos if isinstance(call, sm.sin) else sm.sin)(call.args[0], evaluate=False)
            partner = index.get(other)
        if partner is not None:
            sine, cosine = (j, partner) if isinstance(call, sm.sin) else (partner, j)
            done.add(partner)
            statements.append(dict(kind="sincos", shared=shared, argument=printer.doprint(call.args[0]),
                                   sine=sine, cosine=cosine))
        else:
            statements.append(dict(kind="call", shared=shared, index=j, c=printer.doprint(call)))
    return statements


def lane_names(derivation):
    """Symbol -> C of lane k (the point's inputs and rates are lane arrays)."""
    d = derivation
    names = {d.t: "t[k]"}
    for label, symbols in (("q", d.q), ("u", d.u), ("qd", d.qd), ("ud", d.ud + d.lam), ("r", d.r),
                           ("p", d.p)):
        names.update({symbol: f"{label}[{i}][k]" for i, symbol in enumerate(symbols)})
    return names


@dataclass
class LaneCode:
    """What ``templates/lanes.c.jinja`` lays out (None fields: no lane code)."""

    kernels: dict                    # kernel -> its steps (see KERNELS)
    evaluation: dict                 # stage -> its parts' statements, printed for lane k
    sections: dict                   # stage -> straight-line operations
    arrays: list                     # (name, C size) of the lane workspace's arrays
    functions: list                  # (name, arity, "native" | "scalar" | "vector") used
    placements: dict = field(default_factory=dict)   # full array -> [(full index, reduced array, index)]
    # kernel -> output -> {index: value}: entries every point has (constant_entries)
    constants: dict = field(default_factory=dict)
    # arithmetic operations of linearize's straight-line sections (a fused
    # c +- a b counted as two), and math function calls of its evaluation
    numeric_operations: int = 0
    math_calls: int = 0
    # the calls computed before the loops (see hoisted_calls): (function,
    # C of the scalar call, C of the lane's call); the functions of them
    # glibc's vector math has
    math: list = field(default_factory=list)
    vector_math: list = field(default_factory=list)
    math_statements: list = field(default_factory=list)   # see scalar_math_statements
    hoisted: list = field(default_factory=list)           # the hoisted calls (SymPy), see hoisted_calls


def lane_code(emitter, parts, straight, derivation, name_prefix):
    """The lane rendering, or ``(None, why)`` where there is none (a stage of
    a kernel without straight-line code, a function without a lane form).

    ``parts``: (part name, stage, entries) of the evaluation, as emitted for
    the straight-line code; ``straight``: its :class:`StraightLine`."""
    kernels, why = {}, {}
    for kernel, steps in KERNELS.items():
        sections = [SECTION_OF.get(step, step) for step in steps
                    if not step.startswith("evaluate") and step != "constraints"]
        missing = sorted(set(sections) - set(straight.sections))
        unknown = sorted({o.op for stage in sections if stage in straight.sections
                          for o in straight.sections[stage] if o.op not in LANE_OPERATIONS})
        if missing:
            why[kernel] = f"no straight-line code for {', '.join(missing)}"
        elif unknown:
            why[kernel] = f"the straight-line operation {unknown[0]!r} has no lane form"
        else:
            kernels[kernel] = steps
    if "linearize" not in kernels:
        return None, why["linearize"]
    needed = {step for steps in kernels.values() for step in steps if not step.startswith("evaluate")
              and step != "constraints"}
    evaluated = {step.split()[1] for steps in kernels.values() for step in steps
                 if step.startswith("evaluate")}
    hoisted = hoisted_calls(emitter, [part for part in parts if part[1] in evaluated], derivation)
    names = lane_names(derivation)
    printer = LanePrinter(names, {call: f"math[{j}][k]" for j, call in enumerate(hoisted)})
    statements, _ = emitter.stage_statements([(name, entries) for name, _, entries in parts],
                                             printer=printer, carried_format="carried[{}][k]")
    # the hoisted calls: (function, arguments as the scalar libm's, as the lane's)
    scalar_printer, vector_printer = ModelCodePrinter(dict(names)), ModelCodePrinter(dict(names))
    vector_printer._ns = "vector_"      # glibc's vector variants (VECTOR_MATH), see lanes.c.jinja
    math = [(type(call).__name__, scalar_printer.doprint(call), vector_printer.doprint(call))
            for call in hoisted]
    math_statements = scalar_math_statements(hoisted, scalar_printer, set(derivation.p))
    last = max(k for k, (_, stage, _) in enumerate(parts) if stage in evaluated)
    if any(stage not in evaluated for _, stage, _ in parts[:last]):
        # a later part would load a temporary an earlier, unrendered one stores
        return None, "a stage the kernels do not evaluate comes before one they do"
    evaluation = {}
    for (name, stage, _), part in zip(parts, statements):
        if stage in evaluated:
            evaluation.setdefault(stage, []).append(part)
    statements = [part for (_, stage, _), part in zip(parts, statements) if stage in evaluated]
    calling = _LIBM_CALL
    for part in statements:
        # whether the part calls a math function lane by lane (see LANE_LOOP_CALLS)
        exprs = [e for _, e, _ in part["temporaries"]] + [e for _, _, e in part["entries"]]
        part["calls"] = any(calling.search(expr) for expr in exprs)
        part["sqrt"] = any("lane_sqrt(" in expr for expr in exprs)   # see LANE_LOOP_SQRT
    text = "\n".join(expr for part in statements
                     for expr in [e for _, e, _ in part["temporaries"]] + [e for _, _, e in part["entries"]])
    functions = []
    for function in sorted(set(re.findall(r"\blane_(\w+)\(", text))):
        if function in NATIVE_FUNCTIONS:
            functions.append((function, 1, "native"))
        elif function in LIBM_ARITIES:
            functions.append((function, LIBM_ARITIES[function],
                              "vector" if function in VECTOR_MATH_FUNCTIONS else "scalar"))
        else:
            return None, f"the C function {function} has no lane form"
    # the lane workspace: every array the kernels read or write
    sections = {stage: section for stage, section in straight.sections.items() if stage in needed}
    if "local_chart" in sections:
        sections["local_chart"] = _local_outputs(sections["local_chart"])
    if "linearize_reduced" in kernels:
        reduced = reduced_solution(sections["solution"])
        if reduced is None:
            del kernels["linearize_reduced"]
            needed.discard("solution_reduced")
            if "linearize_local" in kernels:
                kernels["linearize_local"] = tuple("solution" if step == "solution_reduced" else step
                                                   for step in kernels["linearize_local"])
                needed.add("solution")
        else:
            sections["solution_reduced"] = reduced
    used = {"carried", "qd", "ud", "A", "B", "A_full", "B_full", "f_c", "f_v"}
    if "local_chart" in sections:
        used |= {"A_local", "B_local"}
    used |= {block for part in statements for block, _, _ in part["entries"]}
    for stage in sorted(needed):
        for o in sections[stage]:
            for value in (*o.args, *o.entries, *o.others, o.pivot, o.value):
                if getattr(value, "kind", None) == "element":
                    used.add(value.array)
            if o.op == "store":
                used.add(o.array)
    arrays = [(name, _size(ARRAYS[name], name_prefix)) for name in ARRAYS if name in used]
    if "local_chart" in sections:
        arrays += [(name, _size(shape, name_prefix)) for name, shape in LANE_ARRAYS.items()]
    placements = {}
    sizes = dict(derivation.sizes, one=1)
    nq = sizes["nq"]
    rows = list(straight.index["independent_q"]) + [nq + i for i in straight.index["independent_u"]]
    for o in straight.sections["solution"]:
        if o.op == "place_rows":
            for reduced, full, width in o.outputs:
                n = sizes[width]
                placements[full] = [(row * n + j, reduced, k * n + j)
                                    for k, row in enumerate(rows) for j in range(n)]
    numeric = sum(2 if o.expr in ("add_mul", "sub_mul") else 1
                  for stage in KERNELS["linearize"] if stage in straight.sections
                  for o in straight.sections[stage] if o.op == "define")
    calls = sum(len(calling.findall(expr)) for part in statements
                for expr in [e for _, e, _ in part["temporaries"]] + [e for _, _, e in part["entries"]])
    calls += len(math)
    vector = sorted({f for f, _, _ in math if f in VECTOR_MATH_FUNCTIONS})
    return LaneCode(math=math, vector_math=vector, math_statements=math_statements, hoisted=hoisted,
                    numeric_operations=numeric, math_calls=calls, kernels=kernels, evaluation=evaluation,
                    sections=sections, arrays=arrays, functions=functions, placements=placements,
                    constants=constant_entries(kernels, sections)), None


def _local_outputs(section):
    """The local chart's section with its outputs (the caller's A, B, T)
    stored into the lanes' A_local, B_local, T_local (see LOCAL_OUTPUTS)."""
    renamed = []
    for o in section:
        if o.op == "store" and o.output:
            o = replace(o, array=LOCAL_OUTPUTS[o.array])
        elif o.op == "check_outputs":
            o = replace(o, outputs=tuple((LOCAL_OUTPUTS[target], count) for target, count in o.outputs))
        renamed.append(o)
    return renamed


def _size(shape, prefix):
    """The C size of an array of :data:`codegen.procedure.ARRAYS` (+ 1: C99
    has no arrays of size zero)."""
    def terms(names):
        text = " + ".join("1" if t == "one" else f"{prefix}_{t.upper()}" if t.isalpha() else t
                          for t in names)
        return f"({text})" if len(names) > 1 else text
    return f"{terms(shape[0])} * {terms(shape[1])} + 1"


def lane_doubles(code, sizes, carried_count):
    """The doubles of one lane of the lane workspace (its arrays, the inputs,
    the carried values, the flag), for the header's size of a batch workspace."""
    values = dict(sizes, one=1)

    def count(names):
        return sum(1 if t == "one" else int(t) if t.isdigit() else values[t] for t in names)
    inputs = 1 + sum(sizes[n] + 1 for n in ("nq", "nu", "nr", "np"))   # t, q, u, r, p
    shapes = {**ARRAYS, **LANE_ARRAYS}
    arrays = sum(count(shapes[name][0]) * count(shapes[name][1]) + 1 for name, _ in code.arrays)
    # carried, the flag, unsteady, the hoisted calls
    return inputs + arrays + carried_count + 1 + 1 + sizes["nx"] + 1 + len(code.math) + 1


# ---- direction lanes: the sensitivities' tangents, W parameter directions at once ----
#
# The sensitivities run the tangents of every stage once per parameter
# direction, at one point: the primal values (the blocks, the factors, the
# partials d x / d s) are the same in every direction, only the tangents
# differ. On the fast path (the default partition's straight-line code) the
# tangents of W directions run at once: every tangent array is W values, one
# per direction (dl->d_M_uu[17][k]: entry 17 of direction k), the primal's are
# read as they are, and each part or stage is one loop over the directions.
# The directions run in groups (codegen.emit._direction_groups), the blocks'
# tangents rendered once a group with only the seeds its directions have,
# and a tangent stage again for a group where the zeros of those tangents
# leave terms out (fold_zeros). Otherwise the same operations in the same
# order as the scalar code of one direction: the same values (a part a
# direction does not enter stores the zeros the scalar code stores; a term
# left out is an exact zero, so only a zero's sign may differ).

# One direction's steps, in order (the scalar loop's and the lanes'): the
# blocks' tangents of an evaluation stage, or a tangent stage of the
# procedure. The residuals' tangents come twice: with the coordinates and
# speeds held (what the seeds solve for the dependent ones), then in the full
# direction (the carried tangents of the later stages). Then the outputs',
# where the model has outputs and the call asks for dC or dD.
TANGENT_ORDER = ("residuals", "tangent_seeds", "residuals", "constraint_jacobians", "kinematics",
                 "tangent_kinematic_rates", "dynamics", "tangent_dynamic_rates", "jacobians", "tangent_partition",
                 "tangent_solution")
TANGENT_SECTIONS = tuple(step for step in TANGENT_ORDER if step.startswith("tangent_"))
# the straight-line operations a tangent stage may have in direction lanes
DIRECTION_OPERATIONS = ("define", "store", "check_finite", "comment")
# a tangent's array entry in a part's statements (d_q[3], d_carried[12]) -> its direction's
_TANGENT_ENTRY = re.compile(r"\b(d_\w+)\[(\d+)\]")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\(")


def fold_zeros(operations, zeros):
    """A tangent stage's straight-line operations where the per-direction
    entries and carried slots ``zeros`` ((array, index)) hold exact zeros in
    every direction of a group: the definitions replayed through
    codegen.straight_line.Trace, whose rules fold the zeros (x + 0 * y is x,
    0 * y is 0: a definition they make zero or a copy of an operand is left
    out), then every definition nothing reads any more dropped. Returns the
    operations (``operations`` itself where no zero is read) and the zeros
    after them (the entries and slots they store zeros into). The values are
    the unfolded operations', a zero's sign aside, where those are finite."""
    zeros = set(zeros)
    trace, value_of, folded = Trace(), {}, False
    # new temporaries numbered after the stage's own
    trace.count = 1 + max((o.name.index for o in operations if o.op == "define"), default=-1)

    def value(v):
        nonlocal folded
        if isinstance(v, Temp):
            return value_of[v]
        if isinstance(v, Element) and (v.array, v.index) in zeros:
            folded = True
            return 0.0
        return v

    for o in operations:
        if o.op == "define":
            args = [value(a) for a in o.args]
            value_of[o.name] = (trace.add_mul(args[0], 1.0, args[1]) if o.expr == "add"
                                else getattr(trace, o.expr)(*args))
        elif o.op == "store":
            stored = value(o.value)
            (zeros.add if isinstance(stored, float) and stored == 0.0 else zeros.discard)((o.array, o.index))
            trace.record("store", array=o.array, index=o.index, value=stored, output=o.output)
        else:           # a check or a comment: no value of the trace
            trace.operations.append(o)
    if not folded:
        return operations, zeros
    read, kept = set(), []
    for o in reversed(trace.operations):
        if o.op == "define" and o.name not in read:
            continue
        read.update(o.uses())
        kept.append(o)
    return kept[::-1], zeros


def _per_direction(expr):
    """A statement of the scalar tangent code as direction k's (its tangents' entries)."""
    return _TANGENT_ENTRY.sub(r"\1[\2][k]", expr)


def _group_code(rendered_groups, sections, used):
    """The groups of directions as the lane templates lay them out, or
    ``(None, why)``: each group's parts of the blocks' tangents (their
    statements for a direction lane, and for a point lane), which directions
    each enters, and the tangent stages with the group's zeros folded in
    where that leaves something out (its own functions of them).
    ``rendered_groups``: [(directions, stage -> parts)]; ``used``: the
    tangent arrays the code uses, updated."""
    groups = []
    for number, (members, tangent_evaluation) in enumerate(rendered_groups):
        parts = {}
        for stage, group in tangent_evaluation.items():
            if stage == "outputs" and "tangent_outputs" not in sections:
                continue
            rendered = []
            for part in group:
                if not part["hoisted"]:
                    return None, f"{part['name']}: its partials are not computed once a point"
                exprs = [expr for _, expr, _ in part["tangents"]] + [expr for _, _, expr in part["entries"]]
                calls = sorted({c for expr in exprs for c in _CALL.findall(expr)})
                if calls:
                    return None, f"{part['name']}: its tangents call {calls[0]}"
                used |= {f"d_{block}" for block, _, _ in part["entries"]}
                # the group's directions it enters (the table is indexed by direction)
                active = [a if j in members else 0 for j, a in enumerate(part["active"])]
                entered = [part["active"][j] for j in members]
                rendered.append(dict(
                    name=part["name"], active=active,
                    mode="all" if all(entered) else "none" if not any(entered) else "mixed",
                    tangents=[(dx, _per_direction(expr), slot) for dx, expr, slot in part["tangents"]],
                    entries=[(block, index, _per_direction(expr)) for block, index, expr in part["entries"]],
                    # the same for the point lanes (every value a lane's)
                    point_tangents=[(dx, per_lane(expr), slot) for dx, expr, slot in part["tangents"]],
                    point_entries=[(block, index, per_lane(expr)) for block, index, expr in part["entries"]]))
            parts[stage] = rendered
        # the tangent stages with the group's zeros folded in (the blocks'
        # entries its tangents of the blocks write as zeros), where that
        # leaves something out: the group's own function of that stage
        zeros, own = set(), {}
        for step in TANGENT_ORDER + ("outputs", "tangent_outputs"):
            if step in sections:
                ops, zeros = fold_zeros(sections[step], zeros)
                if ops is not sections[step]:
                    own[step] = ops
            for part in parts.get(step, ()):
                for block, index, expr in part["entries"]:
                    (zeros.add if part["mode"] == "none" or expr == "0.0" else zeros.discard)(
                        (f"d_{block}", index))
        groups.append(dict(number=number, directions=list(members), parts=parts, sections=own,
                           prefix=f"g{number}_" if number else "", rendering=tangent_evaluation))
    return groups, None


def direction_lane_code(render_groups, extended_sections, tangent_arrays, name_prefix, nsens):
    """The direction-lane rendering of the sensitivities' fast path, or
    ``(None, why)``. ``render_groups``: called once, the directions in
    groups, each with the tangent rendering of the blocks its lanes run
    ([(directions, stage -> parts)], codegen.emit._direction_groups);
    ``tangent_arrays``: the sensitivity workspace's arrays (one per direction
    here); ``extended_sections``: the extended fast path's straight-line
    operations (stage -> operations). With one parameter direction the
    groups are made (the point lanes run them, point_lane_code) but a point
    has nothing to take at once: ``one_point`` is False."""
    if nsens < 1:
        return None, "no parameter directions"
    missing = [stage for stage in TANGENT_SECTIONS if stage not in extended_sections]
    if missing:
        return None, f"no straight-line code for {', '.join(missing)}"
    # the outputs' tangents (dC, dD) where the model has outputs
    stages = TANGENT_SECTIONS + (("tangent_outputs",) if "tangent_outputs" in extended_sections else ())
    sections = {stage: extended_sections[stage] for stage in stages}
    # the carried values the tangent stages store (a direction's own) -> their row here
    stored = sorted({o.index for ops in sections.values() for o in ops if o.op == "store" and o.array == "carried"})
    carried = {slot: row for row, slot in enumerate(stored)}
    used = {"d_q", "d_u", "d_qd", "d_ud", "d_p", "d_A_full", "d_B_full"} | (
        {"d_C_out", "d_D_out"} if "tangent_outputs" in sections else set())
    for stage, ops in sections.items():
        for o in ops:
            if o.op not in DIRECTION_OPERATIONS:
                return None, f"{stage}: the operation {o.op!r} has no direction-lane form"
            if o.op == "store" and (o.output or (o.array not in tangent_arrays and o.array != "carried")):
                return None, f"{stage} stores into {o.array}, not a tangent"
            for value in (*o.args, *o.entries, *o.others, o.pivot, o.value):
                if getattr(value, "kind", None) == "element" and value.array in tangent_arrays:
                    used.add(value.array)
            if o.op in ("store", "check_finite") and o.array != "carried":
                used.add(o.array)

    groups, why = _group_code(render_groups(), sections, used)
    if why:
        return None, why
    unknown = sorted(used - set(tangent_arrays) - {"d_carried"})
    if unknown:
        return None, f"{unknown[0]} is not a tangent array"
    arrays = [(name, _size(ARRAYS[name], name_prefix)) for name in ARRAYS if name in used]
    order = [j for group in groups for j in group["directions"]]
    starts = [0]
    for group in groups:
        starts.append(starts[-1] + len(group["directions"]))
    # the tangent stages some group runs as they are (the others its own)
    shared = [stage for stage in sections if any(stage not in group["sections"] for group in groups)]
    return dict(groups=groups, sections=sections, shared=shared, carried=carried, arrays=arrays, order=order,
                starts=starts, per_direction={name for name, _ in arrays}, one_point=nsens > 1), None


# ---- point lanes of the sensitivities: W points at once, a direction at a time ----
#
# A batch of sensitivities runs W points at once, as linearize's batch does:
# the primal of every stage in the lanes (the extended fast path's sections,
# which keep what the tangent stages read), the blocks' partial derivatives
# (the full rendering's slots of coef, once a point), then the parameter
# directions one at a time, each the operations of the scalar code of that
# direction with every value a lane's (w->M_uu[17][k], s->d_M_uu[17][k]). The
# blocks' tangents are the direction's group's rendering (as in the direction
# lanes: the same values, a zero's sign aside); a part the direction does not
# enter stores the scalar code's zeros. A point whose checks fail in some
# stage is computed again alone by <name>_sensitivities.

# the primal kernel: linearize's steps with the extended fast path's sections
# (named <stage>_extended; codegen.emit.EXTENDED_PRIMAL), its outputs A and B
SENSITIVITY_PRIMAL = ("evaluate residuals", "evaluate constraint_jacobians", "constraints", "evaluate kinematics",
                      "kinematic_rates_extended", "evaluate dynamics", "dynamic_rates_extended",
                      "evaluate jacobians", "partition_extended", "solution_extended")
# an entry C of a printed scalar expression (q[3], coef[12], d_carried[4]) ->
# lane k's; time (t) -> lane k's
_ARRAY_ENTRY = re.compile(r"\b([A-Za-z_]\w*)\[(\d+)\]")
_TIME = re.compile(r"\bt\b(?!\[)")
# a call of a math function lane by lane (not a vector instruction)
_LIBM_CALL = re.compile(r"\blane_(?!(?:%s)\()\w+\(" % "|".join(NATIVE_FUNCTIONS))


def per_lane(expr):
    """A statement of the scalar tangent code (its arrays' entries and time)
    as lane k's (every value of the point lanes is one per lane)."""
    return _TIME.sub("t[k]", _ARRAY_ENTRY.sub(r"\1[\2][k]", expr))


def point_lane_code(lanes, groups, tangent_evaluation, extended_sections, derivation, name_prefix):
    """The point-lane rendering of the sensitivities' batch, or ``(None,
    why)``; adds the primal kernel (``sensitivities_primal``) and its sections
    and arrays to ``lanes``. ``groups``: direction_lane_code's result (its
    groups, tangent stages and arrays); ``tangent_evaluation``: the full
    tangent rendering of the blocks (stage -> parts: their partials);
    ``extended_sections``: the extended fast path's straight-line operations."""
    d, sizes = derivation, derivation.sizes
    if groups is None:
        return None, "no direction groups"
    if sizes["nout"]:
        return None, "the model has outputs (their tangents run one point at a time)"
    if sizes["nx"] > 64:
        return None, "more than 64 states (the steadiness of a lane)"
    primal = {}
    for step in SENSITIVITY_PRIMAL:
        if step.endswith("_extended"):
            stage = step[:-len("_extended")]
            if stage not in extended_sections:
                return None, f"no straight-line code for the extended {stage}"
            unknown = sorted({o.op for o in extended_sections[stage] if o.op not in LANE_OPERATIONS})
            if unknown:
                return None, f"the straight-line operation {unknown[0]!r} has no lane form"
            primal[step] = extended_sections[stage]
    # the partials, printed for lane k (the hoisted math calls of the inputs from lane_math)
    printer = LanePrinter(lane_names(d), {call: f"math[{j}][k]" for j, call in enumerate(lanes.hoisted)})
    primal_names = dict(printer.names)
    partials, coefficients = [], 0
    if not all(part["hoisted"] for parts in tangent_evaluation.values() for part in parts):
        # one direction: the scalar code's partials are inline, the group's its own
        tangent_evaluation = groups["groups"][0]["rendering"]
    for stage, parts in tangent_evaluation.items():
        if stage == "outputs":
            continue
        for part in parts:
            if not part["hoisted"]:
                return None, f"{part['name']}: its partials are not computed once a point"
            coefficients += len(part["partial_exprs"])
            if not part["partial_exprs"]:
                continue
            printer.names.clear()
            printer.names.update(primal_names)
            printer.names.update({x: str(x) for x, _ in part["temporary_exprs"]})
            printer.names.update({x: f"carried[{slot}][k]" for x, slot in part["loads"].items()})
            temporaries = [(str(x), printer.doprint(expr)) for x, expr in part["temporary_exprs"]]
            coefs = [(slot, printer.doprint(expr)) for slot, expr in part["partial_exprs"]]
            exprs = [expr for _, expr in temporaries + coefs]
            partials.append(dict(name=part["name"], temporaries=temporaries, partials=coefs,
                                 calls=any(_LIBM_CALL.search(expr) for expr in exprs),
                                 sqrt=any("lane_sqrt(" in expr for expr in exprs)))
    printer.names.clear()
    printer.names.update(primal_names)
    # the lane functions the partials call beside the evaluation's
    known = {function for function, _, _ in lanes.functions}
    text = "\n".join(expr for part in partials for _, expr in part["temporaries"] + part["partials"])
    for function in sorted(set(re.findall(r"\blane_(\w+)\(", text)) - known):
        if function in NATIVE_FUNCTIONS:
            lanes.functions.append((function, 1, "native"))
        elif function in LIBM_ARITIES:
            lanes.functions.append((function, LIBM_ARITIES[function],
                                    "vector" if function in VECTOR_MATH_FUNCTIONS else "scalar"))
        else:
            return None, f"the C function {function} has no lane form"
    lanes.functions.sort()
    # the primal arrays the kernel and the tangent stages read or write, in the lanes
    tangent_arrays = set(groups["per_direction"]) | {"d_carried"}
    used = {name for name, _ in lanes.arrays}
    for ops in list(primal.values()) + list(groups["sections"].values()) + [
            ops for group in groups["groups"] for ops in group["sections"].values()]:
        for o in ops:
            for value in (*o.args, *o.entries, *o.others, o.pivot, o.value):
                if getattr(value, "kind", None) == "element" and value.array not in tangent_arrays:
                    used.add(value.array)
            if o.op == "store" and o.array not in tangent_arrays:
                used.add(o.array)
    used.discard("carried")        # the lanes' own (sized for the extended fast path)
    unknown = sorted(used - set(ARRAYS) - set(LANE_ARRAYS))
    if unknown:
        return None, f"{unknown[0]} is not an array of the lanes"
    lanes.arrays = ([(name, _size(ARRAYS[name], name_prefix)) for name in ARRAYS if name in used]
                    + [(name, size) for name, size in lanes.arrays if name in LANE_ARRAYS])
    lanes.kernels["sensitivities_primal"] = SENSITIVITY_PRIMAL
    lanes.sections.update(primal)
    lanes.constants = constant_entries(lanes.kernels, lanes.sections)
    # each direction's group
    group_of = [0] * sizes["nsens"]
    for group in groups["groups"]:
        for j in group["directions"]:
            group_of[j] = group["number"]
    return dict(groups=groups["groups"], sections=groups["sections"], shared=groups["shared"],
                carried=groups["carried"], arrays=groups["arrays"], per_direction=tangent_arrays,
                partials=partials, coefficients=coefficients, group_of=group_of), None



def point_lane_doubles(code, carried_by_evaluation):
    """The C expression of the doubles of one lane of the point lanes'
    tangents (their arrays, the evaluation's carried tangents, the tangent
    stages' carried values, the partials)."""
    return " + ".join([f"({size})" for _, size in code["arrays"]] + [
        f"{carried_by_evaluation} + 1", f"{len(code['carried'])} + 1", f"{code['coefficients']} + 1"])
