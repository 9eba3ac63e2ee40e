"""The numeric procedure as straight-line C, for the model's default partition.

:mod:`codegen.procedure` describes the steps; this module runs them in Python
on *traced* values (a temporary, an element of a workspace array, or an exact
constant for a structural zero or one), and every arithmetic operation becomes
one operation record. Operations with a structural zero are never recorded,
so the generated code does only the arithmetic the sparsity of the blocks
leaves. The records are data: ``templates/util.c.jinja`` lays them out as C.

Pivoting in straight-line code is static: the pivot order of each LU
factorization is chosen here, on sample values of the matrix (a few random
points), and every pivot is checked at run time *before* anything divides by
it: against the other candidates of its column (threshold partial pivoting:
``|pivot| >= PIVOT_TAU * |a_ik|``) and against the matrix scale
(``SINGULAR_RTOL``). A failed check returns from the straight-line function
with an internal status, and the caller takes the general path (the looped
rendering of the same procedure, dense LU with partial pivoting), which also
reports singular matrices.

The stages that run as separate C functions (qd*, ud*, the solution) are
sections of one trace; a value one section computes and a later one uses (the
LU factors of M_uu, say) is carried in the workspace.

Straight-line code grows like the cube of a system's size, and the compiler's
time on it faster still, so a stage whose trace records more operations than
a limit (``codegen.emit.STRAIGHT_LINE_LIMIT``) gets no straight-line code: the
C calls its looped rendering directly. So does a stage that needs such a
stage's straight-line code (the solution reads the rate stages' LU factors).

Only exact constants are folded (``0 * x``, ``1 * x``, ``x - 0``); no
floating-point reassociation happens, so results are the same on every
compiler.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from sympy.printing.pycode import PythonCodePrinter

from .procedure import ARRAYS, Factor, Solve, View


@dataclass(frozen=True)
class Temp:
    """A value computed by the straight-line code (rendered ``v<index>``)."""

    index: int
    kind = "temp"


@dataclass(frozen=True)
class Element:
    """An entry of a workspace array, read only."""

    array: str
    index: int
    kind = "element"


def _is_const(value):
    return isinstance(value, float)


def _temps(values):
    return [v for v in values if isinstance(v, Temp)]


@dataclass(eq=False)
class Operation:
    """One record of the trace. ``op`` names the template macro that lays it out:

    define       ``name = expr(args)``, expr in neg, mul, sub, sub_mul (c - a b), add,
                 add_mul (c + a b), reciprocal, sqrt
    scale        the largest absolute value of ``initial`` and ``entries`` (of factor ``label``)
    check_pivot  return PIVOT_REJECTED unless ``pivot`` passes against the scale and ``others``
    check_rank   return PIVOT_REJECTED unless ``args`` (||L^-1||_F^2, ||J||_F^2) certify full rank
    check_positive return PIVOT_REJECTED unless ``pivot`` > the threshold ``label`` * ``value``
                 (before a square root)
    check_at_most return PIVOT_REJECTED unless ``pivot`` <= the threshold ``label``
    reject       return PIVOT_REJECTED (a structurally zero pivot)
    store        ``array[index] = value`` (workspace array, or the caller's if ``output``)
    check_finite NONFINITE_RESULT unless the workspace array's ``count`` entries are finite
    place_rows   the rows of A (B) into A_full (B_full), when asked for: ``outputs`` (A, A_full, width)
    check_outputs NONFINITE_RESULT unless the ``outputs`` (target, count) the caller asked for are finite
    comment      the description ``label`` of the procedure's step whose operations follow
    """

    op: str
    section: int
    name: Temp | None = None
    expr: str = ""
    args: tuple = ()
    label: str = ""
    initial: float = 0.0
    entries: tuple = ()
    pivot: object = None
    others: tuple = ()
    array: str = ""
    index: int = 0
    value: object = None
    output: bool = False    # store into the caller's array, not the workspace's
    count: int = 0
    outputs: tuple = ()

    def uses(self):
        return _temps(self.args + self.entries + self.others + (self.pivot, self.value))


class OverLimit(Exception):
    """The trace of a stage grew past its budget of operations."""


class Trace:
    """Records operations on traced values: floats (exact constants), Temp, Element."""

    def __init__(self):
        self.operations = []
        self.count = 0
        self.section = 0
        self.budget = None   # the most operations the trace may hold (None: no limit)

    def _append(self, operation):
        self.operations.append(operation)
        if self.budget is not None and len(self.operations) > self.budget:
            raise OverLimit

    def _new(self, expr, *args):
        name = Temp(self.count)
        self.count += 1
        self._append(Operation("define", self.section, name=name, expr=expr, args=args))
        return name

    def record(self, op, **fields):
        """An operation with an effect (a store or a check): always kept."""
        self._append(Operation(op, self.section, **fields))

    def neg(self, a):
        if _is_const(a):
            return -a
        return self._new("neg", a)

    def mul(self, a, b):
        if _is_const(a) and _is_const(b):
            return a * b
        if a == 0.0 or b == 0.0:
            return 0.0
        if a == 1.0:
            return b
        if b == 1.0:
            return a
        if a == -1.0:
            return self.neg(b)
        if b == -1.0:
            return self.neg(a)
        return self._new("mul", a, b)

    def sub_mul(self, c, a, b):
        """c - a * b"""
        if a == 0.0 or b == 0.0:
            return c
        if c == 0.0:
            return self.neg(self.mul(a, b))
        if _is_const(a) and _is_const(b):
            return self.sub(c, a * b)
        if a == 1.0:
            return self.sub(c, b)
        if b == 1.0:
            return self.sub(c, a)
        return self._new("sub_mul", c, a, b)

    def sub(self, c, a):
        if a == 0.0:
            return c
        if c == 0.0:
            return self.neg(a)
        if _is_const(a) and _is_const(c):
            return c - a
        return self._new("sub", c, a)

    def reciprocal(self, a):
        if _is_const(a):
            return 1.0 / a
        return self._new("reciprocal", a)

    def sqrt(self, a):
        if _is_const(a):
            return math.sqrt(a)
        return self._new("sqrt", a)

    def dot(self, pairs, start=0.0):
        """start + the sum of a * b over the pairs, left to right"""
        total = start
        for a, b in pairs:
            total = self.add_mul(total, a, b)
        return total

    def add_mul(self, c, a, b):
        """c + a * b"""
        if a == 0.0 or b == 0.0:
            return c
        if _is_const(a) and _is_const(b):
            return self.sub(c, -(a * b))
        if a == -1.0:
            return self.sub(c, b)
        if b == -1.0:
            return self.sub(c, a)
        if c == 0.0:
            return self.mul(a, b)
        if a == 1.0 and not _is_const(b):
            return self._new("add", c, b)
        if b == 1.0 and not _is_const(a):
            return self._new("add", c, a)
        return self._new("add_mul", c, a, b)

    def sections(self, count, first_slot):
        """The operations of each section: only definitions something uses; a
        value a later section uses is stored in a carried slot of the workspace
        (numbered from ``first_slot``) right after its definition, and read from
        there where it is used."""
        used = set()
        kept = []
        for operation in reversed(self.operations):
            if operation.op == "define" and operation.name not in used:
                continue
            used.update(operation.uses())
            kept.append(operation)
        kept.reverse()
        defined_in = {o.name: o.section for o in kept if o.op == "define"}
        carried = sorted({v for o in kept for v in o.uses() if defined_in[v] < o.section},
                         key=lambda v: v.index)
        slot = {v: Element("carried", first_slot + k) for k, v in enumerate(carried)}

        def read(v, section):
            return slot[v] if isinstance(v, Temp) and defined_in[v] < section else v

        # a result is stored right after its definition: no value stays live
        # to the end of the function
        stores_after = {}
        for o in kept:
            if o.op == "store" and isinstance(o.value, Temp) and defined_in[o.value] == o.section:
                stores_after.setdefault(o.value, []).append(o)
        for v in carried:
            stores_after.setdefault(v, []).append(
                Operation("store", defined_in[v], array="carried", index=slot[v].index, value=v))
        result = [[] for _ in range(count)]
        # a comment stays only where code follows it (before the next comment)
        kept = [o for o, after in zip(kept, kept[1:] + [None])
                if o.op != "comment" or (after is not None and after.op != "comment"
                                         and after.section == o.section)]
        for o in kept:
            if o.op == "store" and o in stores_after.get(o.value, ()):
                continue
            result[o.section].append(replace(
                o, args=tuple(read(v, o.section) for v in o.args),
                entries=tuple(read(v, o.section) for v in o.entries),
                others=tuple(read(v, o.section) for v in o.others),
                pivot=read(o.pivot, o.section), value=read(o.value, o.section)))
            if o.op == "define":
                result[o.section].extend(stores_after.get(o.name, ()))
        return result, len(carried)


def diagonal_sum(trace, a):
    """The sum of the diagonal of the traced square matrix a."""
    total = 0.0
    for i in range(len(a)):
        total = trace.add_mul(total, 1.0, a[i][i])
    return total


def traced_cholesky(trace, a, check):
    """(L, the reciprocals of L's diagonal) of the symmetric traced matrix a
    (its lower triangle is read), row by row. ``check(pivot)`` records the
    check a pivot passes before its square root, or returns False (then the
    factorization stops: None) where it cannot pass."""
    n = len(a)
    low = [[0.0] * n for _ in range(n)]
    inverse = [0.0] * n
    for i in range(n):
        for j in range(i + 1):
            value = a[i][j]
            for k in range(j):
                value = trace.sub_mul(value, low[i][k], low[j][k])
            if i == j:
                if not check(value):
                    return None
                low[i][i] = trace.sqrt(value)
                inverse[i] = trace.reciprocal(low[i][i])
            else:
                low[i][j] = trace.mul(value, inverse[j])
    return low, inverse


def choose_pivots(samples):
    """Row order for LU without run-time pivoting.

    ``samples`` are numeric instances of one matrix (same structure). At each
    step the row chosen is the one whose entry in the pivot column is largest
    relative to the column's largest entry, in the worst sample: the order
    partial pivoting would take when the samples agree, and a compromise when
    they do not.
    """
    mats = [np.array(s, dtype=float) for s in samples]
    mats = [m for m in mats if np.all(np.isfinite(m))]
    n = samples[0].shape[0] if samples else 0
    if not mats:
        return list(range(n))
    remaining = list(range(n))
    order = []
    for k in range(n):
        best, best_score = remaining[0], -1.0
        for i in remaining:
            scores = []
            for m in mats:
                column = max(abs(m[j, k]) for j in remaining)
                if column > 0:
                    scores.append(abs(m[i, k]) / column)
            score = min(scores) if scores else 0.0
            if score > best_score:
                best, best_score = i, score
        order.append(best)
        remaining.remove(best)
        for m in mats:
            if m[best, k] != 0:
                for i in remaining:
                    factor = m[i, k] / m[best, k]
                    m[i, k:] -= factor * m[best, k:]
    return order


class TracedLU:
    """LU factors of a traced square matrix with a static row order."""

    def __init__(self, trace, matrix, order, label, scale_entries=()):
        """``scale_entries``: further traced values the singularity test is
        relative to (the rest of the Jacobian a partition block comes from)."""
        n = len(matrix)
        self.n = n
        self.trace = trace
        a = [list(matrix[i]) for i in order]
        self.order = list(order)
        entries = [x for row in a for x in row if not _is_const(x)]
        entries += [x for x in scale_entries if not _is_const(x) and x not in entries]
        constants = [abs(x) for row in a for x in row if _is_const(x)]
        constants += [abs(x) for x in scale_entries if _is_const(x)]
        # the scale of the matrix: its largest absolute entry
        if n:
            trace.record("scale", label=label, initial=max(constants) if constants else 0.0,
                         entries=tuple(entries))
        self.inverse = []
        for k in range(n):
            pivot = a[k][k]
            others = tuple(a[i][k] for i in range(k + 1, n) if a[i][k] != 0.0)
            if _is_const(pivot) and pivot == 0.0:
                trace.record("reject")
                self.inverse.append(0.0)
                continue
            # checked before the division: a rejected pivot never divides
            trace.record("check_pivot", label=label, pivot=pivot, others=others)
            inverse = trace.reciprocal(pivot)
            self.inverse.append(inverse)
            for i in range(k + 1, n):
                if a[i][k] == 0.0:
                    continue
                factor = trace.mul(a[i][k], inverse)
                a[i][k] = factor
                for j in range(k + 1, n):
                    a[i][j] = trace.sub_mul(a[i][j], factor, a[k][j])
        self.lu = a

    def solve(self, rhs):
        """Solve A X = rhs (rows of traced values), returning the rows of X."""
        t, n = self.trace, self.n
        b = [list(rhs[i]) for i in self.order]
        width = len(b[0]) if b else 0
        for i in range(1, n):
            for k in range(i):
                factor = self.lu[i][k]
                for j in range(width):
                    b[i][j] = t.sub_mul(b[i][j], factor, b[k][j])
        for i in range(n - 1, -1, -1):
            for k in range(i + 1, n):
                factor = self.lu[i][k]
                for j in range(width):
                    b[i][j] = t.sub_mul(b[i][j], factor, b[k][j])
            for j in range(width):
                b[i][j] = t.mul(b[i][j], self.inverse[i])
        return b


def sample_blocks(emitter, block_names, count=4, seed=20261122):
    """Numeric values of the named blocks at ``count`` random points.

    Used only to choose static pivot orders; seeded, so generation stays
    deterministic. The first point has all coordinates zero (where many
    models are operated); the others are random.
    """
    d = emitter.derivation
    needed = emitter.closure(block_names)
    printer = PythonCodePrinter({"fully_qualified_modules": True})
    lines = [f"{symbol} = {printer.doprint(emitter.temporary_expr[symbol])}"
             for symbol in sorted(needed, key=emitter.position.get)]
    for name in block_names:
        for (index, _), expr in zip(emitter.blocks[name].entries, emitter.reduced[name]):
            lines.append(f"out_{name}[{index}] = {printer.doprint(expr)}")
    program = compile("\n".join(lines) or "pass", f"<{d.name} samples>", "exec")
    rng = np.random.default_rng(seed)
    samples = []
    for k in range(count):
        env = {"math": math}
        values = {d.t: 0.0}
        for symbols, scale in ((d.q, 1.0), (d.u, 1.0), (d.qd, 1.0), (d.ud, 1.0), (d.r, 1.0)):
            for s in symbols:
                values[s] = 0.0 if (k == 0 and symbols is d.q) else float(rng.uniform(-scale, scale))
        for s, v in zip(d.p, d.parameter_values):
            values[s] = float(v)
        env.update({str(s): v for s, v in values.items()})
        for name in block_names:
            env[f"out_{name}"] = [0.0] * emitter.blocks[name].size
        try:
            with np.errstate(all="ignore"):
                exec(program, env)
        except (ZeroDivisionError, ValueError, OverflowError):
            continue
        samples.append({name: np.array(env[f"out_{name}"], dtype=float).reshape(
            emitter.blocks[name].rows, emitter.blocks[name].cols) for name in block_names})
    return samples


class StraightLine:
    """Runs the procedure's steps on traced values for the default partition.

    ``sections[stage name]`` holds, for each stage with numeric steps that
    gets straight-line code, the operations of its straight-line C function
    (see :meth:`Trace.sections`); ``looped[stage name]`` says why a stage gets
    none, ``operation_counts`` how many operations the traced stages recorded.
    """

    def __init__(self, emitter, stages, sizes, first_slot, limit=None, requires=None, tangents=False):
        """``limit``: the most operations a stage's straight-line trace may
        record (None: no limit); a larger stage gets only the looped rendering,
        and so does a stage that solves with the factors of a looped one, or
        that ``requires`` (stage -> stage names) a looped one. Tracing stops at
        the limit: a stage too large costs no more time here than one at it.
        ``tangents``: the blocks' tangents d_<block> are inputs too (the
        sensitivity workspace's, with the blocks' structural zeros), for
        tangent stages (:func:`codegen.procedure.tangent_steps`) traced after
        the stages they differentiate: their operations read the primal's
        values (carried) and factors."""
        requires = requires or {}
        d = emitter.derivation
        self.sizes = dict(sizes, one=1)
        self.trace = Trace()
        self.index = {"dependent_q": list(d.dependent_q), "dependent_u": list(d.dependent_u),
                      "independent_q": d.independent_q, "independent_u": d.independent_u}
        self.values = {}
        for name, block in emitter.blocks.items():
            nonzero = {index for index, _ in block.entries}
            for array in (name, f"d_{name}") if tangents else (name,):
                self.values[array] = [[Element(array, i * block.cols + j) if i * block.cols + j in nonzero
                                       else 0.0 for j in range(block.cols)] for i in range(block.rows)]
        numeric = [stage for stage in stages if stage.steps]
        factored = sorted({step.matrix.array for stage in numeric for step in stage.steps
                           if isinstance(step, Factor)})
        self.samples = sample_blocks(emitter, factored)
        self.factors = {}
        made_by = {step.name: stage.name for stage in numeric for step in stage.steps
                   if isinstance(step, Factor)}
        self.operation_counts = {}
        self.looped = {}   # stage -> why it has no straight-line code
        for section, stage in enumerate(numeric):
            # a stage solving with another's factors needs that one's straight-line code
            needs = {made_by[step.factor] for step in stage.steps
                     if isinstance(step, Solve) and made_by[step.factor] != stage.name}
            needs |= set(requires.get(stage.name, ()))
            missing = sorted(name for name in needs if name in self.looped)
            if missing:
                self.looped[stage.name] = f"needs the straight-line code of {', '.join(missing)}"
                continue
            start = len(self.trace.operations)
            if self._trace_stage(section, stage, limit):
                self.operation_counts[stage.name] = len(self.trace.operations) - start
            else:
                self.looped[stage.name] = f"more than {limit} straight-line operations"
        sections, self.carried_count = self.trace.sections(len(numeric), first_slot)
        self.sections = {stage.name: section for stage, section in zip(numeric, sections)
                         if stage.name not in self.looped}

    def _trace_stage(self, section, stage, limit):
        """Trace one stage; False (and nothing of it kept) once it records
        more than ``limit`` operations."""
        trace = self.trace
        start = len(trace.operations)
        trace.section = section
        trace.budget = None if limit is None else start + limit
        written = {name: [list(row) for row in rows] for name, rows in self.values.items()}
        factors = dict(self.factors)
        try:
            self.results = stage.results
            for name in stage.reads_stored:
                self._read_stored(name)
            for step in stage.steps:
                if step.what:   # the step's description, a comment of the C
                    trace.record("comment", label=step.what)
                getattr(self, "_" + type(step).__name__)(step)
            self._store_results()
            return True
        except OverLimit:
            # as if the stage had not been traced: later stages read no value of it
            del trace.operations[start:]
            self.values, self.factors = written, factors
            return False
        finally:
            trace.budget = None

    # -- views -------------------------------------------------------------------
    def _size(self, terms):
        return sum(self.sizes[t] for t in terms)

    def _rows_cols(self, view):
        start = self._size(view.row_start)
        if view.row_index is not None:
            rows = [start + i for i in self.index[view.row_index]]
        else:
            rows = range(start, start + self._size(view.row_count))
        if view.index is not None:
            cols = self.index[view.index]
        else:
            first = self._size(view.col_start)
            cols = range(first, first + self._size(view.col_count))
        return rows, cols

    def read(self, view):
        matrix = self.values[view.array]
        rows, cols = self._rows_cols(view)
        if view.transposed:
            return [[matrix[i][j] for i in rows] for j in cols]
        return [[matrix[i][j] for j in cols] for i in rows]

    def write(self, view, rows_of_values):
        assert not view.transposed, "a transposed view is read only"
        if view.array not in self.values:
            rows, cols = ARRAYS[view.array]
            self.values[view.array] = [[0.0] * self._size(cols) for _ in range(self._size(rows))]
        matrix = self.values[view.array]
        rows, cols = self._rows_cols(view)
        for i, row in zip(rows, rows_of_values):
            for j, value in zip(cols, row):
                matrix[i][j] = value

    def _read_stored(self, name):
        """A or B as the solution's straight-line code left them in the
        workspace (the rows of the independent states of A_full, B_full);
        exact constants stay constants."""
        full = {"A": "A_full", "B": "B_full"}[name]
        width = len(self.values[full][0]) if self.values[full] else 0
        nq = self.sizes["nq"]
        independent = self.index["independent_q"] + [nq + i for i in self.index["independent_u"]]
        self.values[name] = [
            [x if _is_const(x) else Element(name, k * width + j)
             for j, x in enumerate(self.values[full][i])]
            for k, i in enumerate(independent)]

    # -- steps -------------------------------------------------------------------
    def _Factor(self, step):
        rows, cols = self._rows_cols(step.matrix)
        samples = [s[step.matrix.array][np.ix_(list(rows), list(cols))] for s in self.samples]
        scale = [x for row in self.values[step.scale] for x in row] if step.scale else ()
        matrix = self.read(step.matrix)
        self.factors[step.name] = TracedLU(self.trace, matrix, choose_pivots(samples) if samples
                                           else list(range(len(matrix))), step.name, scale)

    def _Solve(self, step):
        if step.rhs:
            parts = [self.read(view) for view in step.rhs]
            rhs = [[x for part in parts for x in part[i]] for i in range(len(parts[0]))]
        else:
            rhs = self.read(step.out)
        if step.negate:
            rhs = [[self.trace.neg(x) for x in row] for row in rhs]
        self.write(step.out, self.factors[step.factor].solve(rhs))

    def _SubtractProduct(self, step):
        result = [list(row) for row in self.read(step.minuend or step.out)]
        a, b = self.read(step.a), self.read(step.b)
        for i, row in enumerate(result):
            for k in range(len(b)):
                for j in range(len(row)):
                    row[j] = self.trace.sub_mul(row[j], a[i][k], b[k][j])
        self.write(step.out, result)

    def _Multiply(self, step):
        a, b = self.read(step.a), self.read(step.b)
        t = self.trace
        rows, cols = self._rows_cols(step.out)
        self.write(step.out, [[t.dot((row[k], b[k][j]) for k in range(len(b)))
                               for j in range(len(cols))] for row in a])

    def _Orthonormalize(self, step):
        """N^T and L of C = [I; -K] = N L^T (see Orthonormalize) by Cholesky
        QR: L L^T = C^T C = I + K^T K, then N^T = L^-1 C^T. The pivots are at
        least 1 (the eigenvalues of I + K^T K are); the trace bounds the
        condition number of C^T C, and so the loss of orthogonality of N
        (about DBL_EPSILON times it): above GRAM_LIMIT (procedure.THRESHOLDS)
        the general path (Householder reflections) runs."""
        K, t = self.read(step.K), self.trace
        n = len(self.index[step.independent])
        gram = [[t.dot(((row[i], row[j]) for row in K), 1.0 if i == j else 0.0) if j <= i else 0.0
                 for j in range(n)] for i in range(n)]
        trace = diagonal_sum(t, gram)
        if not _is_const(trace):
            t.record("check_at_most", pivot=trace, label="GRAM_LIMIT")

        def check(pivot):
            # at least 1 exactly; far below it only where rounding ruined the
            # factorization (then the general path)
            if not _is_const(pivot):
                t.record("check_positive", pivot=pivot, value=1.0, label="GRAM_PIVOT")
            return True

        low, inverse = traced_cholesky(t, gram, check)
        self.factors[step.name] = (low, inverse)
        # C^T: the identity in the independent columns, -K^T in the dependent ones
        rows = len(self._rows_cols(step.basis)[1])
        basis = [[0.0] * rows for _ in range(n)]
        for k, i in enumerate(self.index[step.independent]):
            basis[k][i] = 1.0
        for k, i in enumerate(self.index[step.dependent]):
            for j in range(n):
                basis[j][i] = t.neg(K[k][j])
        # N^T = L^-1 C^T, by forward substitution
        for i in range(n):
            for k in range(i):
                basis[i] = [t.sub_mul(x, low[i][k], y) for x, y in zip(basis[i], basis[k])]
            basis[i] = [t.mul(x, inverse[i]) for x in basis[i]]
        self.write(step.basis, basis)

    def _TriangularMultiply(self, step):
        """out = L^T out, row by row from the top (row i reads rows k >= i,
        not yet overwritten)."""
        low, _ = self.factors[step.factor]
        b, t = self.read(step.out), self.trace
        for i in range(len(b)):
            b[i] = [t.dot((low[k][i], b[k][j]) for k in range(i, len(b))) for j in range(len(b[i]))]
        self.write(step.out, b)

    def _RankCertificate(self, step):
        a, t = self.read(step.matrix), self.trace
        rows, cols = len(a), len(a[0]) if a else 0
        if rows == 0:
            return
        if rows > cols:
            t.record("reject")
            return
        gram = [[t.dot(zip(a[i], a[j])) for j in range(i + 1)] for i in range(rows)]
        norm = diagonal_sum(t, gram)   # ||J||_F^2, the trace of J J^T

        def check(pivot):
            if _is_const(pivot) and pivot <= 0.0:
                t.record("reject")   # a structurally zero row
                return False
            # below 1e-12 ||J||_F^2 the bounds' ratio exceeds 1e6 (the check
            # below fails anyway): leave before the square root
            t.record("check_positive", pivot=pivot, value=norm, label="CERTIFICATE_FLOOR")
            return True

        factor = traced_cholesky(t, gram, check)
        if factor is None:
            return
        low, inverse = factor
        # ||L^-1||_F^2: the columns of L^-1 by forward substitution
        inverse_norm = 0.0
        for j in range(rows):
            column = [0.0] * rows
            column[j] = inverse[j]
            for i in range(j + 1, rows):
                value = 0.0
                for k in range(j, i):
                    value = t.sub_mul(value, low[i][k], column[k])
                column[i] = t.mul(value, inverse[i])
            inverse_norm = t.dot(((x, x) for x in column[j:]), inverse_norm)
        t.record("check_rank", args=(inverse_norm, norm))

    def _LocalOutputs(self, step):
        """A, B and T = [[N_q, 0], [C_1 N_q, N_u]] into the caller's arrays
        (row-major, NX columns; B: NR), then checked."""
        t = self.trace
        nqi, nui = self.sizes["nqi"], self.sizes["nui"]
        nx, nr = nqi + nui, self.sizes["nr"]
        N_q = self.read(View("N_qT", transposed=True))
        N_u = self.read(View("N_uT", transposed=True))
        C_1N_q = [[t.neg(x) for x in row]
                  for row in self.read(View("minus_C1Nq_T", transposed=True))]
        embedding = [row + [0.0] * nui for row in N_q] + [a + b for a, b in zip(C_1N_q, N_u)]
        outputs = []
        for target, matrix, width in (("A", self.values["A_local"], nx),
                                      ("B", self.values["B_local"], nr),
                                      ("T", embedding, nx)):
            if not width:
                continue
            for i, row in enumerate(matrix):
                for j, value in enumerate(row):
                    t.record("store", array=target, output=True, index=i * width + j, value=value)
            outputs.append((target, len(matrix) * width))
        t.record("check_outputs", outputs=tuple(outputs))

    def _Zero(self, step):
        rows, cols = self._rows_cols(step.out)
        self.write(step.out, [[0.0] * len(cols) for _ in rows])

    def _Identity(self, step):
        rows, cols = self._rows_cols(step.out)
        self.write(step.out, [[1.0 if i == j else 0.0 for j in range(len(cols))]
                              for i in range(len(rows))])

    def _Copy(self, step):
        source = self.read(step.source)
        t = self.trace
        if step.negate:
            source = [[t.neg(x) for x in row] for row in source]
        if step.accumulate:
            source = [[t.add_mul(x, 1.0, y) for x, y in zip(old, new)]
                      for old, new in zip(self.read(step.out), source)]
        self.write(step.out, source)

    def _AddProduct(self, step):
        result = [list(row) for row in self.read(step.out)]
        a, b = self.read(step.a), self.read(step.b)
        for i, row in enumerate(result):
            for k in range(len(b)):
                for j in range(len(row)):
                    row[j] = self.trace.add_mul(row[j], a[i][k], b[k][j])
        self.write(step.out, result)

    def _store_results(self):
        """Store the stage's results (the workspace arrays later stages read),
        once, before they are checked."""
        self.stored = self.results
        for view in self.results:
            stride = self._size(view.stride)
            rows, cols = self._rows_cols(view)
            for i, row in zip(rows, self.read(view)):
                for j, value in zip(cols, row):
                    self.trace.record("store", array=view.array, index=i * stride + j, value=value)
        self.results = ()

    def _CheckFinite(self, step):
        # the results this code stores; the outputs are checked where they are written
        self._store_results()
        for view in step.views:
            if any(view.array == result.array for result in self.stored):
                self.trace.record("check_finite", array=view.array,
                                  count=self._size(view.row_count) * self._size(view.col_count))

    def _SelectRows(self, step):
        """Every output straight into the caller's arrays (the C points those
        the caller did not ask for at the workspace): a row of an independent
        state into A (B), a row of a dependent one into A_full (B_full); A_full
        gets the rows of A only when asked for. Then the asked-for outputs are
        checked: no copy, no check of what nobody reads."""
        nq, nu = self.sizes["nq"], self.sizes["nu"]
        independent = self.index["independent_q"] + [nq + i for i in self.index["independent_u"]]
        state = {row: k for k, row in enumerate(independent)}
        outputs, placed = [], []
        for reduced, full, width in (("A", "A_full", "nx"), ("B", "B_full", "nr")):
            matrix, n = self.values[full], self.sizes[width]
            if not n:
                continue
            for i in range(nq + nu):
                target, row = (reduced, state[i]) if i in state else (full, i)
                for j in range(n):
                    self.trace.record("store", array=target, output=True, index=row * n + j,
                                      value=matrix[i][j])
            placed.append((reduced, full, width))
            outputs += [(reduced, len(independent) * n), (full, (nq + nu) * n)]
        self.trace.record("place_rows", outputs=tuple(placed))
        self.trace.record("check_outputs", outputs=tuple(outputs))
