"""Straight-line C for the numeric stage, used by :mod:`codegen.emit`.

The numeric stage (qd*, ud*, K_c, K_v, the products with C_0, C_1, C_2 and
the block-triangular solve) is written once, generically, in the C template
with loops and partial pivoting. For the model's default partition this module
also writes it out as straight-line code: the same algorithm is run here in
Python on *traced* values (a C variable name, or an exact constant for a
structural zero or one), and every arithmetic operation it performs becomes
one C statement. Operations with a structural zero are never emitted, so the
generated code does only the arithmetic the sparsity of the blocks leaves.

Pivoting in straight-line code is static: the pivot order of each LU
factorization is chosen here, on sample values of the matrix (a few random
points), and every pivot is checked at run time against the other candidates
of its column (threshold partial pivoting: ``|pivot| >= PIVOT_TAU * |a_ik|``)
and against the matrix scale (``SINGULAR_RTOL``). When a check fails the
generated code falls back to the template's dense LU with partial pivoting,
which also reports singular matrices, so robustness is that of the general
path.

Only exact constants are folded (``0 * x``, ``1 * x``, ``x - 0``); no
floating-point reassociation happens, so results are the same on every
compiler.
"""

from __future__ import annotations

import math
import re

import numpy as np
import sympy as sm
from sympy.printing.pycode import PythonCodePrinter

from .partition import complement

_NAME = re.compile(r"\bv\d+\b")


def _is_const(value):
    return isinstance(value, float)


def _c(value):
    if _is_const(value):
        return f"({value!r})" if value < 0 else repr(value)
    return value


class Trace:
    """Records C statements for arithmetic on traced values.

    A value is a ``float`` (an exact constant known at generation time) or a
    ``str`` (a C expression: a variable, or an array element such as
    ``w->M_uu[3]`` that is only read).
    """

    def __init__(self, check_flag):
        self.lines = []          # (defined name or None, text, section)
        self.count = 0
        self.check_flag = check_flag
        self.section = 0

    def next_section(self, check_flag):
        """Later statements go to a new fragment; checks there set ``check_flag``."""
        self.section += 1
        self.check_flag = check_flag

    def _new(self, text):
        name = f"v{self.count}"
        self.count += 1
        self.lines.append((name, f"const double {name} = {text};", self.section))
        return name

    def emit(self, text):
        """A statement with an effect (a store or a check): always kept."""
        self.lines.append((None, text, self.section))

    def store(self, flag, target, values):
        """``target[i] = values[i]`` when ``flag`` (the checks passed)."""
        self.emit(f"if ({flag}) {{")
        for i, value in enumerate(values):
            self.emit(f"    {target}[{i}] = {_c(value)};")
        self.emit("}")

    def neg(self, a):
        if _is_const(a):
            return -a
        return self._new(f"-{a}")

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
        return self._new(f"{_c(a)} * {_c(b)}")

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
        return self._new(f"{_c(c)} - {_c(a)} * {_c(b)}")

    def sub(self, c, a):
        if a == 0.0:
            return c
        if c == 0.0:
            return self.neg(a)
        if _is_const(a) and _is_const(c):
            return c - a
        return self._new(f"{_c(c)} - {_c(a)}")

    def reciprocal(self, a):
        if _is_const(a):
            return 1.0 / a
        return self._new(f"1.0 / {a}")

    def code(self, sections=None):
        """The statements of the first ``sections`` fragments (default: all),
        without definitions nothing in them uses."""
        count = self.section + 1 if sections is None else sections
        used = set()
        sections = [[] for _ in range(count)]
        for name, text, section in reversed(self.lines):
            if section >= count or (name is not None and name not in used):
                continue
            body = text.split("=", 1)[1] if name is not None else text
            used.update(_NAME.findall(body))
            sections[section].append(text)
        return [list(reversed(lines)) for lines in sections]


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
    n = samples[0].shape[0]
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

    def __init__(self, trace, matrix, order, tau, rtol, label, scale_entries=()):
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
        flag = trace.check_flag
        scale = f"scale_{label}"
        trace.emit(f"double {scale} = {max(constants) if constants else 0.0!r};")
        for x in entries:
            trace.emit(f"if (fabs({x}) > {scale}) {scale} = fabs({x});")
        self.inverse = []
        for k in range(n):
            pivot = a[k][k]
            others = [a[i][k] for i in range(k + 1, n) if a[i][k] != 0.0]
            if _is_const(pivot) and pivot == 0.0:
                trace.emit(f"{flag} = 0; /* structural zero pivot */")
                self.inverse.append(0.0)
                continue
            conditions = [f"fabs({_c(pivot)}) > {rtol} * {scale}"]
            conditions += [f"fabs({_c(pivot)}) >= {tau} * fabs({_c(x)})" for x in others]
            trace.emit(f"if (!({' && '.join(conditions)})) {flag} = 0;")
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
    needed = emitter._closure(block_names)
    printer = PythonCodePrinter({"fully_qualified_modules": True})
    lines = [f"{symbol} = {printer.doprint(emitter.temporary_expr[symbol])}"
             for symbol in sorted(needed, key=emitter._position.get)]
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


def _traced(emitter, name, target):
    """Rows of traced values of a block: its array elements, or 0.0."""
    block = emitter.blocks[name]
    nonzero = {index for index, _ in block.entries}
    return [[f"{target}[{i * block.cols + j}]" if i * block.cols + j in nonzero else 0.0
             for j in range(block.cols)] for i in range(block.rows)]


def _submatrix(samples, name, rows, cols):
    return [s[name][np.ix_(rows, cols)] for s in samples]


class NumericStage:
    """Straight-line code of the numeric stage for the default partition.

    Produces three code fragments for the template: ``qd`` (qd* from M_qq),
    ``ud`` (ud* from M_uu) and ``rest`` (K_c, K_v, A_full, B_full). Each sets
    its flag to 0 when a static pivot fails its check; the template then runs
    the general path instead.
    """

    def __init__(self, emitter, kinematic_identity, tau="PIVOT_TAU", rtol="SINGULAR_RTOL"):
        d = emitter.derivation
        self.emitter = emitter
        nq, nu, nr = len(d.q), len(d.u), len(d.r)
        nw = nu + len(d.lam)   # unknowns of the speed-level solve
        nc, nv = len(d.dependent_q), len(d.dependent_u)
        dep_q, dep_u = list(d.dependent_q), list(d.dependent_u)
        ind_q, ind_u = complement(nq, dep_q), complement(nu, dep_u)
        nx = len(ind_q) + len(ind_u)
        names = ["M_uu", "J_c", "B_v"] + ([] if kinematic_identity else ["M_qq"])
        samples = sample_blocks(emitter, names)
        W = {name: _traced(emitter, name, f"w->{name}") for name in d.blocks}

        # qd*
        tq = Trace("fast_qq")
        if kinematic_identity:
            qd = [[tq.neg(W["kinematic_residual"][i][0])] for i in range(nq)]
            lu_q = None
        else:
            lu_q = TracedLU(tq, W["M_qq"], choose_pivots([s["M_qq"] for s in samples]),
                            tau, rtol, "qq")
            qd = lu_q.solve([[tq.neg(x[0])] for x in W["kinematic_residual"]])
        tq.store("fast_qq", "w->qd", [row[0] for row in qd])

        # ud*
        tu = tq
        tu.next_section("fast_uu")
        lu_u = TracedLU(tu, W["M_uu"], choose_pivots([s["M_uu"] for s in samples]), tau, rtol, "uu")
        ud = lu_u.solve([[tu.neg(x[0])] for x in W["speed_residual"]])
        tu.store("fast_uu", "w->ud", [row[0] for row in ud])

        # the rest: K_c, K_v, C products, block solve
        tr = tq
        tr.next_section("fast_rest")
        J_c, J_vq, B_v = W["J_c"], W["J_vq"], W["B_v"]
        if nc:
            order = choose_pivots(_submatrix(samples, "J_c", list(range(nc)), dep_q))
            lu_c = TracedLU(tr, [[J_c[i][k] for k in dep_q] for i in range(nc)], order, tau, rtol, "c",
                            [x for row in J_c for x in row])
            K_c = lu_c.solve([[J_c[i][k] for k in ind_q] for i in range(nc)])
        else:
            K_c = []
        if nv:
            order = choose_pivots(_submatrix(samples, "B_v", list(range(nv)), dep_u))
            lu_v = TracedLU(tr, [[B_v[i][k] for k in dep_u] for i in range(nv)], order, tau, rtol, "v",
                            [x for row in B_v for x in row])
            K_v = lu_v.solve([J_vq[i] + [B_v[i][k] for k in ind_u] for i in range(nv)])
        else:
            K_v = []
        K_q = [row[:nq] for row in K_v]
        K_u = [row[nq:] for row in K_v]

        def plus_times_C_1(A_xq, A_xu):
            rows = []
            for i in range(len(A_xq)):
                row = list(A_xq[i])
                for a in range(nv):
                    for j in range(nq):
                        row[j] = tr.sub_mul(row[j], A_xu[i][dep_u[a]], K_q[a][j])
                rows.append(row)
            return rows

        def times_selection(X, independent, dependent, K):
            """X P_i - X P_d K: the product with C_0 (K = K_c) or C_2 (K = K_u)."""
            rows = []
            for i in range(len(X)):
                row = [X[i][k] for k in independent]
                for a, column in enumerate(dependent):
                    for k in range(len(independent)):
                        row[k] = tr.sub_mul(row[k], X[i][column], K[a][k])
                rows.append(row)
            return rows

        def times_C_0(T):
            return times_selection(T, ind_q, dep_q, K_c)

        def times_C_2(A_xu):
            return times_selection(A_xu, ind_u, dep_u, K_u)

        A_q = [x + y for x, y in zip(times_C_0(plus_times_C_1(W["A_qq"], W["A_qu"])),
                                     times_C_2(W["A_qu"]))]
        A_u = [x + y for x, y in zip(times_C_0(plus_times_C_1(W["A_uq"], W["A_uu"])),
                                     times_C_2(W["A_uu"]))]
        if lu_q is not None:
            A_q = lu_q.solve(A_q)
        M_uq = W["M_uq"]
        for i in range(nw):
            for k in range(nq):
                for j in range(nx):
                    A_u[i][j] = tr.sub_mul(A_u[i][j], M_uq[i][k], A_q[k][j])
        A_u = lu_u.solve(A_u)
        B_tilde = [[0.0] * nr for _ in range(nv)] + [list(row) for row in W["B_u"]]
        B_u = lu_u.solve(B_tilde) if nr else [[] for _ in range(nw)]
        # results straight into the caller's arrays; finite checks on what is asked for
        full = A_q + A_u
        B_rows = [[0.0] * nr for _ in range(nq)] + B_u
        rows = ind_q + [nq + i for i in ind_u]
        for label, matrix, selected, width in (("A", full, rows, nx), ("B", B_rows, rows, nr),
                                               ("A_full", full, range(nq + nu), nx),
                                               ("B_full", B_rows, range(nq + nu), nr)):
            if width == 0:
                continue
            tr.emit(f"if (fast_rest && {label}) {{")
            for k, i in enumerate(selected):
                for j in range(width):
                    tr.emit(f"    {label}[{k * width + j}] = {_c(matrix[i][j])};")
            size = len(selected) * width
            tr.emit(f"    if (!all_finite({label}, {size})) return NONFINITE_RESULT;")
            tr.emit("}")
        self.qd_code, self.ud_code, self.rest_code = tq.code()
        # state_derivative stops after ud*: drop what only the rest needed
        self.rates_code = tq.code(sections=2)
        self.independent_q = ind_q
        self.independent_u = ind_u
