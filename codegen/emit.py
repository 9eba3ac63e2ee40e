"""Stage 3 of the pipeline: emit C and Cython source text from a derivation.

All structurally non-zero entries of all blocks go through one common
subexpression elimination, so a subexpression shared by, say, the mass matrix
and a Jacobian block is computed once per call. Each generated C function
evaluates the blocks it needs stage by stage (kinematics, then dynamics after
qd* is known, then the Jacobian blocks after ud* is known). Each stage is a C
function; a temporary is computed in the first stage that needs it, and
carried in the workspace to later stages that use it.

The stages and the numeric steps are those of :mod:`codegen.procedure`;
:mod:`codegen.straight_line` traces the steps for the default partition.
Templates in ``templates/`` lay out the files (``util.c.jinja`` holds the C
vocabulary); this module only hands them data.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import sympy as sm

from . import __version__
from .compile import KERNEL_HEADER, KERNEL_TABLE   # the kernel's header, the model's table
from . import entry_points as table      # read at each emission (a test adds a row)
from .entry_points import (FAMILIES, SIZE_NAMES, batch_signature, entry_doc, pyx_argument, pyx_pass,
                           forwarded, forwarded_batch, pyx_batch_signature, pyx_signature, signature,
                           size_expression, stage_guards,
                           workspace_layout)
from .differentiate import Differentiator
from .errors import ModelError
from .lanes import (KERNEL_OUTPUTS, KERNEL_PARAMETERS, LIBM_ARITIES, TANGENT_ORDER, direction_lane_code,
                    kernel_signature, lane_code, lane_doubles, point_lane_code, point_lane_doubles, solves)
from .ordering import band_of, swaps
from .printer import ModelCodePrinter, unprintable
from .procedure import (ARRAYS, CALLER_ARRAYS, GENERATION_THRESHOLDS, INDEX_SETS, PRODUCT_KINDS,
                        RUN_TIME_SIZES, THRESHOLDS, Factor, SVD, SparseRows, completion_steps,
                        procedure, sparse_key, with_bands, with_sparse_products)
from .status import STATUSES
from .straight_line import StraightLine
from .subexpressions import count_operations


def template_dir():
    """``templates/`` of the source tree, or its installed copy."""
    source_tree = Path(__file__).resolve().parent.parent / "templates"
    if (source_tree / "model.c.jinja").exists():
        return source_tree
    return Path(__file__).resolve().parent / "templates"


# The modules whose code decides the generated files. The others (the runtime
# the generated package imports, the build step whose flags are part of the
# cache key, the CLI, the sweep, the benchmarks) can change without
# invalidating builds.
GENERATOR_MODULES = ("__init__.py", "model.py", "derive.py", "emit.py", "procedure.py", "straight_line.py",
                     "lanes.py",
                     "entry_points.py", "differentiate.py", "printer.py", "partition.py", "status.py",
                     "ordering.py")

# templates of the tools around the pipeline, not of the generated package
TOOL_TEMPLATES = ("bench_driver.c.jinja",)


def generator_fingerprint():
    """Changes whenever the code or templates that write the generated files change."""
    h = hashlib.sha256(__version__.encode())
    here = Path(__file__).resolve().parent
    templates = [path for path in sorted(template_dir().glob("*.jinja")) if path.name not in TOOL_TEMPLATES]
    templates += [template_dir() / "helpers.c", template_dir() / "helpers_band.c",
                  template_dir() / "helpers_sparse.c"]
    for path in [here / name for name in GENERATOR_MODULES] + templates:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    h.update(repr(table.ENTRY_POINTS).encode())     # the table as emitted (rows added in memory)
    h.update(sm.__version__.encode())
    return h.hexdigest()


@dataclass
class GeneratedSources:
    """The text of every generated file, plus facts for people."""

    name: str
    files: dict                      # file name -> text
    operation_count: int             # arithmetic operations after CSE
    temporary_count: int
    nonzero_count: dict = field(default_factory=dict)  # block -> structural non-zeros
    # numeric stage -> ("straight-line", operations traced) or ("looped", why)
    renderings: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)        # "CSE", "emission": seconds
    # "lanes" where batches have lane code (<name>_lanes.c), else why not
    lanes: str = "lanes"
    fast_path: dict = field(default_factory=dict)
    # the evaluation's translation units besides the rest of <name>.c (0: one
    # translation unit; see SPLIT_STATEMENTS)
    units: int = 0


class _Block:
    def __init__(self, name, matrix):
        self.name = name
        self.rows, self.cols = matrix.shape
        self.entries = [(i * self.cols + j, matrix[i, j])
                        for i in range(self.rows) for j in range(self.cols) if matrix[i, j] != 0]

    @property
    def size(self):
        return self.rows * self.cols

    @property
    def dense(self):
        return len(self.entries) == self.size


class StageEmitter:
    """One CSE over every block; the statements of each stage, as data."""

    def __init__(self, derivation, progress=None, skip=()):
        say = progress or (lambda message: None)
        self.derivation = derivation
        self.skip = set(skip)   # blocks the C does not need (e.g. an identity M_qq)
        self.blocks = {name: _Block(name, matrix) for name, matrix in derivation.blocks.items()}
        outputs = [expr for block in self.blocks.values() for _, expr in block.entries]
        say(f"common subexpression elimination over {len(outputs)} non-zero entries")
        temporaries = sm.numbered_symbols("x", real=True)
        # order="none" keeps the order of the outputs: the same operations in half
        # the time of the canonical sort (and deterministic: see the tests)
        replacements, reduced = sm.cse(outputs, symbols=temporaries, list=True, order=CSE_ORDER)
        self.temporaries = [symbol for symbol, _ in replacements]
        self.temporary_expr = dict(replacements)
        self.position = {symbol: k for k, symbol in enumerate(self.temporaries)}
        # temporaries each expression uses directly
        self._uses = {symbol: {s for s in expr.free_symbols if s in self.position}
                      for symbol, expr in replacements}
        self.reduced = {}
        k = 0
        for block in self.blocks.values():
            self.reduced[block.name] = reduced[k:k + len(block.entries)]
            k += len(block.entries)

        d = derivation
        names = {d.t: "t"}
        for label, symbols in (("q", d.q), ("u", d.u), ("qd", d.qd), ("ud", d.ud + d.lam), ("r", d.r),
                               ("p", d.p)):
            names.update({symbol: f"{label}[{i}]" for i, symbol in enumerate(symbols)})
        names.update({symbol: str(symbol) for symbol in self.temporaries})
        self.printer = ModelCodePrinter(names)
        self.operation_count = sum(count_operations(expr) for _, expr in replacements) + \
            sum(count_operations(expr) for exprs in self.reduced.values() for expr in exprs)

    def closure(self, block_names):
        """Temporaries the given blocks need, directly or through others."""
        return self._closure([expr for name in block_names for expr in self.reduced[name]])

    def _closure(self, exprs):
        needed = set()
        for expr in exprs:
            needed |= {s for s in expr.free_symbols if s in self.position}
        stack = list(needed)
        while stack:
            for used in self._uses[stack.pop()]:
                if used not in needed:
                    needed.add(used)
                    stack.append(used)
        return needed

    def entries(self, block_names):
        """(block, index, reduced expression) of the structural non-zeros."""
        return [(name, index, expr) for name in block_names if name not in self.skip
                for (index, _), expr in zip(self.blocks[name].entries, self.reduced[name])]

    def split(self, entries, limit):
        """``entries`` in consecutive groups of about ``limit`` statements
        (entries plus the temporaries first needed there)."""
        groups, group, size, seen = [], [], 0, set()
        for entry in entries:
            new = self._closure([entry[2]]) - seen
            if group and size + len(new) + 1 > limit:
                groups.append(group)
                group, size = [], 0
            group.append(entry)
            size += len(new) + 1
            seen |= new
        return groups + [group] if group or not groups else groups

    def structural_zeros(self, name):
        block = self.blocks[name]
        nonzero = {index for index, _ in block.entries}
        return [k for k in range(block.size) if k not in nonzero]

    def zero_tables(self, stage_names):
        """(block, positions of its structural zeros) of each sparse block the stages write."""
        return [(name, self.structural_zeros(name)) for stage in stage_names
                for name in self.derivation.stages[stage]
                if name not in self.skip and self.structural_zeros(name)]

    def stage_statements(self, parts, printer=None, carried_format="carried[{}]"):
        """The statements of each part, as data, when the parts run in this order.

        ``parts`` are (name, entries): a stage, or a part of a large one, with
        the (block, index, expression) entries it writes (see :meth:`entries`).

        A temporary is computed by the first part that needs it; a later part
        that uses it loads it from a carried slot of the workspace, which the
        first part stores. Returns one dict per part (``temporaries``: (name,
        C expression, carried slot or None); ``stores``: how many are carried;
        ``entries``: (block, index, C expression)) and the number of carried
        slots, numbered in order. A carried temporary prints as
        ``carried[slot]`` in the parts that load it (``carried_format``: its format).
        ``printer``: the printer of the expressions (default: the scalar
        code's; :mod:`codegen.lanes` prints them again for a lane)."""
        defined_in = {}
        stages = []
        for k, (stage, entries) in enumerate(parts):
            new, loads = self._part_temporaries(entries, defined_in, k)
            stages.append(dict(name=stage, new=new, loads=loads, entries=entries))
        self._pair_across_parts(stages, defined_in)
        carried = sorted({s for stage in stages for s in stage["loads"]},
                         key=lambda s: (defined_in[s], self.position[s]))
        slot = {s: i for i, s in enumerate(carried)}
        self.carried_slots = slot     # for the tangent rendering of the same parts
        printer = printer or self.printer
        names = printer.names
        names.update({symbol: str(symbol) for symbol in self.temporaries})
        result = []
        for stage in stages:
            # a carried temporary is read where it is used (no long-lived local)
            names.update({s: carried_format.format(slot[s]) for s in stage["loads"]})
            doprint = printer.doprint
            # the scalar code: a sin and a cos of one argument in one call
            pairs = self._sine_cosine_pairs(stage["new"]) if printer is self.printer else {}
            partners = {second for second, _, _ in pairs.values()}

            def c_of(s):
                if s in pairs:          # the first of the two: both, the other kept in fused_
                    second, argument, helper = pairs[s]
                    return f"{helper}({doprint(argument)}, &fused_{second})"
                return f"fused_{s}" if s in partners else doprint(self.temporary_expr[s])
            result.append(dict(
                name=stage["name"],
                # (variable, helper) of each pair: the second's value, the first's call
                fused=[(f"fused_{second}", helper) for second, _, helper in pairs.values()],
                temporaries=[(str(s), c_of(s), slot.get(s)) for s in stage["new"]],
                stores=sum(1 for s in stage["new"] if s in slot),
                entries=[(name, index, doprint(expr)) for name, index, expr in stage["entries"]]))
            names.update({s: str(s) for s in stage["loads"]})
        return result, len(carried)

    def _sine_cosine_pairs(self, temporaries):
        """first -> (second, argument, helper) for the temporaries (in order) that are
        the sine and the cosine of one argument: the first of each pair
        computes both (sin_and_cos / cos_and_sin, the C library's sincos
        where it has one: the same bits as its sin and cos, for little more
        than the price of one)."""
        seen, pairs = {}, {}
        for s in temporaries:
            expr = self.temporary_expr[s]
            if isinstance(expr, (sm.sin, sm.cos)):
                other = seen.pop((sm.cos if isinstance(expr, sm.sin) else sm.sin, expr.args[0]), None)
                if other is not None:
                    helper = "cos_and_sin" if isinstance(expr, sm.sin) else "sin_and_cos"
                    pairs[other] = (s, expr.args[0], helper)
                else:
                    seen.setdefault((type(expr), expr.args[0]), s)
        return pairs

    def _pair_across_parts(self, stages, defined_in):
        """A sine or cosine that a part computes first where an earlier part
        computes the cosine or sine of the same argument: computed in the
        earlier part too (the scalar code's sin_and_cos pair there: one call
        of the C library for both) and carried to the later part, which
        loads it (the disk's cos(q1) in the residuals, sin(q1) in the
        constraint Jacobians: one call fewer a point). ``stages``: the parts'
        dicts of :meth:`stage_statements` (new, loads), changed in place;
        ``defined_in`` updated."""
        first = {}      # (sin or cos, argument) -> the part that computes it
        for k, stage in enumerate(stages):
            for s in list(stage["new"]):
                expr = self.temporary_expr[s]
                if not isinstance(expr, (sm.sin, sm.cos)):
                    continue
                # (CSE: each sine or cosine is one temporary, new in one part)
                earlier = first.get((sm.cos if isinstance(expr, sm.sin) else sm.sin, expr.args[0]), k)
                if earlier < k:
                    stage["new"].remove(s)
                    stage["loads"] = sorted(stage["loads"] + [s], key=self.position.get)
                    stages[earlier]["new"] = sorted(stages[earlier]["new"] + [s], key=self.position.get)
                    defined_in[s] = earlier
                first[(type(expr), expr.args[0])] = earlier

    def _part_temporaries(self, entries, defined_in, part):
        """The temporaries a part (its ``entries``) computes, in order, and
        those it loads (earlier parts computed them: ``defined_in``,
        temporary -> part, updated with this part's)."""
        exprs = [expr for _, _, expr in entries]
        new = sorted(self._closure(exprs) - defined_in.keys(), key=self.position.get)
        direct = set().union(*(self._uses[x] for x in new)) if new else set()
        for expr in exprs:
            direct |= {x for x in expr.free_symbols if x in self.position}
        loads = sorted((x for x in direct if x in defined_in), key=self.position.get)
        defined_in.update({x: part for x in new})
        return new, loads

    def tangent_statements(self, parts, active, names, carried_slots, hoist=True, slot_of=None):
        """The tangent rendering of the evaluation (forward mode): for each
        part, in the order of :meth:`stage_statements`, the temporaries the
        derivatives need (computed again, or loaded from ``carried``), then
        the tangent of every temporary and entry that depends on an
        ``active`` symbol: ``d x = sum over its symbols s of (d x / d s) d s``,
        each the derivative of one small CSE statement. ``names``: active
        symbol -> the C of its tangent (the seeds); ``carried_slots``: the
        primal's carried slots (a carried temporary's tangent is carried in
        the same slot of d_carried). Returns one dict per part:
        ``temporaries`` (C name, C expression), ``partials`` (slot of
        ``coef``, C expression), ``tangents`` (C name, C expression, carried
        slot or None), ``entries`` (block, index, C expression), ``seeds``
        (the active symbols its tangents depend on, through every temporary:
        in a direction where all of theirs are zero, so are its tangents).

        The partial derivatives d x / d s depend on the point only, not on
        the direction: each that is not a number or a value already in
        memory is computed once a point into a slot of ``coef`` (the
        ``partials``, with the temporaries they need), and the tangents,
        computed once a direction, are sums of products of those with the
        seeds' tangents. ``hoist`` False (one direction: nothing to share)
        leaves them inline, the temporaries in the tangents' function.

        ``slot_of``: the ``partials`` of an earlier rendering of the same parts
        with more symbols active (one list per part): this one's partials are
        among those and read their slots (it computes none of its own). Each
        part's ``reach`` counts, for each active symbol, the tangents and
        entries whose value depends on it."""
        defined_in, result = {}, []
        # temporary -> the active symbols its tangent depends on (none: the
        # temporary is not active)
        roots = {}
        coefficients = 0
        printer = self.printer
        primal_names = dict(printer.names)

        def partials(expr, what):
            found = []
            symbols = [symbol for symbol in sorted(expr.free_symbols, key=sm.default_sort_key)
                       if (bool(roots[symbol]) if symbol in roots else symbol in active)]
            # the textbook rules, memoized per node (SymPy's diff: 90 % of this
            # stage's time, the bicycle's 26 parameters 38 s, for the same derivatives)
            rules = Differentiator(symbols) if symbols else None
            for symbol in symbols:
                partial = rules(expr, symbol)
                if partial != 0:
                    bad = unprintable(partial, printer, set())
                    if bad:
                        raise ModelError(
                            f"sensitivities: the derivative of {what} with respect to {symbol} holds "
                            f"{bad[0]}, which has no C translation; leave the parameters it depends "
                            "on out of sensitivities")
                    found.append((symbol, partial))
            return found

        try:
            for k, (stage, entries) in enumerate(parts):
                new, loads = self._part_temporaries(entries, defined_in, k)
                derivatives = {}
                for x in new:
                    derivatives[x] = partials(self.temporary_expr[x], f"the common subexpression {x}")
                    roots[x] = frozenset().union(*(roots.get(s, {s}) for s, _ in derivatives[x]))
                entry_derivatives = [partials(expr, f"{block}[{index}]") for block, index, expr in entries]
                # the tangents needed: of the entries, the carried ones, and theirs
                needed = {x for x in new if roots[x] and x in carried_slots}
                for found in entry_derivatives:
                    needed |= {symbol for symbol, _ in found if symbol in derivatives}
                for x in reversed(new):
                    if x in needed:
                        needed |= {symbol for symbol, _ in derivatives[x] if symbol in derivatives}
                # the primal values they need: new temporaries (with theirs), or carried ones
                values = set()
                for found in [derivatives[x] for x in needed] + entry_derivatives:
                    for _, partial in found:
                        values |= {s for s in partial.free_symbols if s in self.position}
                stack = [x for x in values if x in derivatives]
                while stack:
                    for used in self._uses[stack.pop()]:
                        if used not in values:
                            values.add(used)
                            stack.append(used)
                printer.names.update({x: str(x) for x in new})
                printer.names.update({x: f"carried[{carried_slots[x]}]" for x in loads})
                tangent_of = dict(names)
                tangent_of.update({x: f"d_carried[{carried_slots[x]}]" for x in loads if roots[x]})
                tangent_of.update({x: f"d_{x}" for x in new})

                slots, new_set, expressions = {}, set(new), {}
                shared = None if slot_of is None else {code: slot for slot, code in slot_of[k]}

                def factor(partial):
                    # a number or a loaded value inline, else its slot of coef
                    code = printer.doprint(partial)
                    if not hoist or partial.is_Number or partial.is_Symbol and partial not in new_set:
                        return f"({code})"
                    if shared is not None:
                        return f"coef[{shared[code]}]"
                    if code not in slots:
                        slots[code] = coefficients + len(slots)
                        expressions[code] = partial
                    return f"coef[{slots[code]}]"

                def text(found):
                    return " + ".join(tangent_of[symbol] if partial == 1 else
                                      f"{factor(partial)} * {tangent_of[symbol]}"
                                      for symbol, partial in found) or "0.0"
                tangents = [(f"d_{x}", text(derivatives[x]), carried_slots.get(x)) for x in new if x in needed]
                entry_text = [(block, index, text(found))
                              for (block, index, _), found in zip(entries, entry_derivatives)]
                read = {s for found in [derivatives[x] for x in needed] + entry_derivatives for s, _ in found}
                reach = Counter()
                for x in needed:
                    reach.update(roots[x])
                for found in entry_derivatives:
                    reach.update(frozenset().union(*(roots.get(s, {s}) for s, _ in found)))
                result.append(dict(
                    name=stage,
                    temporaries=[(str(x), printer.doprint(self.temporary_expr[x])) for x in new if x in values],
                    partials=[(slot, code) for code, slot in slots.items()], hoisted=hoist,
                    # the same as SymPy expressions, for another printer (the point
                    # lanes': codegen.lanes.point_lane_code), with the carried
                    # temporaries the part loads (temporary -> slot)
                    temporary_exprs=[(x, self.temporary_expr[x]) for x in new if x in values],
                    partial_exprs=[(slot, expressions[code]) for code, slot in slots.items()],
                    loads={x: carried_slots[x] for x in loads},
                    tangents=tangents, entries=entry_text,
                    seeds=frozenset().union(*(roots.get(s, {s}) for s in read)), reach=reach))
                coefficients += len(slots)
                printer.names.update({x: str(x) for x in loads})
        finally:
            printer.names.clear()
            printer.names.update(primal_names)
        return result


def environment():
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["c_string"] = _c_string
    env.filters["c_double"] = _c_double
    env.filters["py"] = repr   # a Python literal
    env.filters["wrap_params"] = _wrap_params
    env.filters["runs"] = _runs
    env.globals["raise_error"] = _raise_error
    return env


def _runs(indices):
    """Ascending indices as runs of consecutive ones, flat: [start, length,
    start, length, ...] (the C's zero_runs: a block's structural zeros)."""
    flat = []
    for index in indices:
        if flat and flat[-2] + flat[-1] == index:
            flat[-1] += 1
        else:
            flat += [index, 1]
    return flat


def _array_size(shape, prefix):
    """The C expression of the size of a procedure array (rows x columns)."""
    def terms(names):
        text = " + ".join("1" if t == "one" else f"{prefix}_{t.upper()}" if t.isalpha() else t
                          for t in names)
        return f"({text})" if len(names) > 1 else text
    return f"{terms(shape[0])} * {terms(shape[1])}"


def _raise_error(message):
    """Stops the rendering: a template met data it cannot lay out (e.g. a step
    kind without a looped rendering)."""
    raise ValueError(f"generating C: {message}")


def _wrap_params(text, first=0, width=96, indent=8):
    """A C parameter list broken after commas (never inside a type): lines of
    at most ``width`` characters, the first after ``first`` characters of
    text before it, the others indented by ``indent``."""
    lines, line, used = [], "", first
    for k, parameter in enumerate(text.split(", ")):
        piece = parameter + ("," if k < text.count(", ") else "")
        if line and used + len(line) + 1 + len(piece) > width:
            lines.append(line)
            line, used = piece, indent
        else:
            line = f"{line} {piece}" if line else piece
    lines.append(line)
    return ("\n" + " " * indent).join(lines)


def _c_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _c_double(value):
    """An exact constant of the straight-line code, as C."""
    return f"({value!r})" if value < 0 else repr(value)


def _kernel_context():
    return dict(version=__version__, entry_points=table.ENTRY_POINTS, families=FAMILIES, sizes=SIZE_NAMES)


def kernel_header():
    """codegen-kernel.h: the names the Python kernel calls the model by (each
    model's codegen-table.c defines them); the same text for every model."""
    return environment().get_template("kernel.h.jinja").render(
        **_kernel_context(), statuses=STATUSES, signature=signature, batch_signature=batch_signature)


def emit_kernel():
    """The Python kernel's Cython source and its header (:func:`kernel_header`):
    the same text for every model, so the kernel is translated and compiled
    once (codegen.compile.KernelObject)."""
    pyx = environment().get_template("module.pyx.jinja").render(
        **_kernel_context(), pyx_batch_signature=pyx_batch_signature, pyx_signature=pyx_signature,
        pyx_argument=pyx_argument, pyx_pass=pyx_pass, size_expression=size_expression)
    return pyx, kernel_header()


SEPARATE_STAGE_STATEMENTS = 400
PART_STATEMENTS = 200
# A model whose evaluation parts hold at least this many statements is
# compiled as EVALUATION_UNITS + 1 translation units in parallel (compile.py):
# the parts split into EVALUATION_UNITS groups of about equal size, and the
# rest of the file; the C is still one file (<NAME>_UNIT chooses the part of
# it a compilation sees; undefined, the whole file).
SPLIT_STATEMENTS = 1500
EVALUATION_UNITS = 2
CSE_ORDER = "none"
# A numeric stage whose straight-line trace has more operations than this gets
# only the looped rendering (generic LU and solves over the workspace arrays).
# Straight-line code exploits the blocks' sparsity and saves the index
# arithmetic, but its size grows like the cube of the system's, and so does
# gcc's time on it, faster still (-O2 on a 2-core machine of 2026: the bicycle's
# largest stage, 1944 operations, with the rest of its C in 3.4 s; the 16-loop
# four-bar's ud*, 26 900 operations for the 69 x 69 augmented speed system, and
# its solution, 14 500, took 60 of its 67 s build). The disk, the bicycle and the
# four-bar up to 7 loops stay straight-line; the operations counted are those
# traced, before unused values are dropped (a stage stops tracing at the limit).
STRAIGHT_LINE_LIMIT = 4000


# linearize runs the straight-line partition and solution only after both
# straight-line rate stages (the solution reads the LU factors they keep in
# temporaries); the local chart only after the straight-line solution (it
# reads its K_c, K_v, A', B')
STRAIGHT_LINE_REQUIRES = {"partition": ("kinematic_rates", "dynamic_rates"),
                          "solution": ("kinematic_rates", "dynamic_rates", "partition"),
                          "local_chart": ("solution",)}


# straight-line stages that run only before another straight-line stage
STRAIGHT_LINE_CALLERS = {"partition": "solution"}

# the blocks and rates in the order a linearization evaluates them (the
# names of nonfinite_blocks' flags)
BLOCK_ORDER = ("f_c", "f_v", "J_c", "J_vq", "B_v", "M_qq", "kinematic_residual", "qd",
               "M_uu", "speed_residual", "ud", "A_qq", "A_qu", "M_uq", "A_uq", "A_uu", "B_u")

# extra C parameters of a stage's functions: the caller's output arrays
STAGE_OUTPUTS = {"solution": ", double *A, double *B, double *A_full, double *B_full",
                 "local_chart": ", double *A, double *B, double *T",
                 "descriptor": ", double *E, double *A, double *B"}
STRAIGHT_LINE_OUTPUTS = {"solution": STAGE_OUTPUTS["solution"],
                         "local_chart": ", double rank_tol, double *A, double *B, double *T"}


# the variable of a workspace in the generated functions
FAMILY_VARIABLES = {"base": "w", "local": "lw", "full": "fw", "sensitivity": "sw"}
# int fields of the workspaces beyond the base one
INT_FIELDS = {"rank_speed": "lw", "rank_rows_c": "lw", "rank_rows_v": "lw", "unknowns": "fw",
              "unknown_count": "fw"}


def _whole_block(emitter, view, default_columns):
    """``(block, columns)`` where ``view`` is a whole block the derivation
    evaluates (its structural non-zeros known), or its columns of the model's
    default partition (``default_columns``: index set -> the default's
    indices); else None."""
    block = emitter.blocks.get(view.array)
    if (block is None or view.array in emitter.skip or view.row_index or view.row_start
            or view.rows or view.col_start or view.cols or view.transposed
            or (view.index is not None and view.index not in default_columns)):
        return None
    return block, list(range(block.cols)) if view.index is None else list(default_columns[view.index])


def factor_bands(emitter, stages):
    """name -> Band of each factorization worth running banded: a matrix
    whose structural non-zeros the derivation knows (a whole block, or its
    columns of the model's default partition), of order at least
    BAND_MIN_ORDER, whose banded LU in the reverse Cuthill-McKee order costs
    at most BAND_FRACTION of the dense one (THRESHOLDS). Decided here, from
    the symbolic pattern, so the same model gives the same code."""
    d = emitter.derivation
    default_columns = {"dependent_q": d.dependent_q, "dependent_u": d.dependent_u}
    bands = {}
    for step in (step for stage in stages for step in _steps(stage.steps)):
        if not isinstance(step, Factor) or step.name in bands:
            continue
        found = _whole_block(emitter, step.matrix, default_columns)
        if found is None:
            continue
        block, columns = found
        n = len(columns)
        if n != block.rows or n < THRESHOLDS["BAND_MIN_ORDER"][0]:
            continue
        position = {column: j for j, column in enumerate(columns)}
        nonzeros = [(index // block.cols, position[index % block.cols]) for index, _ in block.entries
                    if index % block.cols in position]
        band = band_of(n, nonzeros)
        if band.width <= n and band.factor_cost() <= THRESHOLDS["BAND_FRACTION"][0] * band.dense_cost():
            bands[step.name] = band
    return bands


def sparse_products(emitter, stages):
    """sparse_key -> SparseRows of each left operand of a product worth
    iterating over its structural non-zeros: a whole block the derivation
    evaluates (or its columns of the model's default partition) of at least
    SPARSE_MIN_ENTRIES entries, at most SPARSE_FRACTION of them non-zero
    (THRESHOLDS). Decided here, from the symbolic pattern."""
    d = emitter.derivation
    default_columns = {"dependent_q": d.dependent_q, "dependent_u": d.dependent_u}
    patterns = {}
    for step in (step for stage in stages for step in _steps(stage.steps)):
        if step.kind not in PRODUCT_KINDS or sparse_key(step.a) in patterns:
            continue
        view = step.a
        found = _whole_block(emitter, view, default_columns)
        if found is None:
            continue
        block, columns = found
        position = {column: j for j, column in enumerate(columns)}
        rows = [[] for _ in range(block.rows)]
        for index, _ in block.entries:
            if index % block.cols in position:
                rows[index // block.cols].append((position[index % block.cols], index))
        count = sum(map(len, rows))
        entries = block.rows * len(columns)
        if entries < THRESHOLDS["SPARSE_MIN_ENTRIES"][0] or count > THRESHOLDS["SPARSE_FRACTION"][0] * entries:
            continue
        start, entry, inner = [0], [], []
        for row in rows:
            for column, index in sorted(row):
                inner.append(column)
                entry.append(index)
            start.append(len(entry))
        patterns[sparse_key(view)] = SparseRows(sparse_key(view), tuple(start), tuple(entry), tuple(inner))
    return patterns


def _steps(steps):
    """Every step, those inside branches too."""
    for step in steps:
        yield step
        if step.kind == "branch":
            yield from _steps(step.then + step.otherwise)


# the stages whose blocks are the constraints and the kinematic equations
KINEMATIC_STAGES = ("residuals", "constraint_jacobians", "kinematics")


def _tangent_evaluation(emitter, parts, d, progress):
    """The tangent rendering of the evaluation parts (stage -> parts, see
    StageEmitter.tangent_statements), for the sensitivities: the tangents of
    the coordinates, speeds, their rates and the multipliers are seeds, and
    of the parameters of the model's sensitivities; time and the inputs are
    held."""
    say = progress or (lambda message: None)
    say(f"tangents of the blocks for {len(d.sensitivity_indices)} parameter sensitivities")
    names = _tangent_names(d)
    tangents = emitter.tangent_statements([(name, entries) for name, _, entries in parts], set(names),
                                          names, emitter.carried_slots,
                                          hoist=len(d.sensitivity_indices) > 1)
    # the directions in which each part's tangents can be other than zero:
    # p_j's own; the multipliers' and the speeds' rates (every direction);
    # the coordinates', the speeds' and the coordinates' rates where p_j
    # enters the constraints or the kinematic equations (else the dependent
    # coordinates and speeds and the rates are held: J_c dq = -df_c/dp_j = 0,
    # B_v du = -(df_v/dp_j + J_vq dq) = 0, M_qq dqd = d(residual) - dM_qq qd
    # = 0). In a direction outside its table a part writes zeros instead of
    # evaluating (templates/model.c.jinja): the parameters of the dynamics
    # alone (masses, inertias, dampers) skip the kinematics' tangents and
    # every part they do not enter.
    return _by_stage(parts, tangents, _direction_seeds(d, parts, tangents))


def _tangent_names(d):
    """Each seed symbol -> the C of its tangent."""
    names = {}
    for label, symbols in (("d_q", d.q), ("d_u", d.u), ("d_qd", d.qd), ("d_ud", d.ud + d.lam)):
        names.update({symbol: f"{label}[{i}]" for i, symbol in enumerate(symbols)})
    names.update({d.p[k]: f"d_p[{k}]" for k in d.sensitivity_indices})
    return names


def _direction_seeds(d, parts, tangents):
    """The symbols whose tangents can be other than zero in each parameter
    direction of the sensitivities (see _tangent_evaluation), from a tangent
    rendering of the parts with every seed active."""
    parameters = [d.p[k] for k in d.sensitivity_indices]
    rates, moving = set(d.ud) | set(d.lam), set(d.q) | set(d.u) | set(d.qd)
    kinematic = [any(p in part["seeds"] for (_, stage, _), part in zip(parts, tangents)
                     if stage in KINEMATIC_STAGES) for p in parameters]
    return [{p} | rates | (moving if kinematic[j] else set()) for j, p in enumerate(parameters)]


def _by_stage(parts, tangents, seeds):
    """The parts' tangent renderings by stage, each with the directions it
    enters (``active``: 1 where the direction's seeds reach its tangents)."""
    grouped = {}
    for (_, stage, _), part in zip(parts, tangents):
        part["active"] = [int(bool(part["seeds"] & entered)) for entered in seeds]
        grouped.setdefault(stage, []).append(part)
    return grouped


# The parameter directions the lane code takes together (a multiple of every
# lane width, codegen.compile.LANE_TARGETS): its tangents of the blocks are
# rendered once a group, with only the seeds of the group's directions active.
DIRECTION_GROUP = 8


def _direction_groups(emitter, parts, d, tangent_evaluation, progress):
    """The sensitivities' directions in groups of DIRECTION_GROUP for the
    direction lanes, each with its own tangent rendering of the blocks
    (stage -> parts, as _tangent_evaluation's): [(directions, rendering)].

    A lane computes what any direction of its block needs: rendered once for
    every direction, a mass's lane would compute the kinematics' tangents
    and every other parameter's (on the bicycle, about 14,000 operations in
    each of the 21 directions of its dynamics alone, where its own are 100 to
    2,000). Rendered for its group, with the other parameters' tangents and,
    where no direction of the group enters the constraints or the kinematic
    equations, the coordinates', speeds' and rates' held at zero, a lane
    computes the group's own. The directions whose parameters enter the
    constraints or the kinematic equations come first (every seed active),
    the others after them by how many tangents they reach. The terms left
    out are exact zeros (x + 0 * y is x for finite y; a signed zero may
    differ) and the partials are the full rendering's (its slots of coef)."""
    say = progress or (lambda message: None)
    flat = [part for group in tangent_evaluation.values() for part in group]
    tangents = [(name, entries) for name, _, entries in parts]
    seeds = _direction_seeds(d, parts, flat)
    moving = set(d.q) | set(d.u) | set(d.qd)
    # the lanes run on the fast path only, the default partition's: there the
    # independent coordinates and speeds are held in every direction
    # (procedure.TANGENT_SEEDS writes the dependent rows of d_q, d_u alone)
    held = {d.q[i] for i in d.independent_q} | {d.u[i] for i in d.independent_u}
    seeds = [entered - held for entered in seeds]
    parameters = [d.p[k] for k in d.sensitivity_indices]
    reach = [sum(part["reach"].get(p, 0) for part in flat) for p in parameters]
    kinematic = [j for j, entered in enumerate(seeds) if entered & moving]
    others = sorted((j for j in range(len(seeds)) if j not in kinematic), key=lambda j: (-reach[j], j))
    order = kinematic + others
    groups = [order[start:start + DIRECTION_GROUP] for start in range(0, len(order), DIRECTION_GROUP)]
    # the partials are the full rendering's where it computes them once a
    # point (more than one direction); with one, the group's own
    hoisted = all(part["hoisted"] for part in flat)
    names, slot_of = _tangent_names(d), [part["partials"] for part in flat] if hoisted else None
    result = []
    for group in groups:
        active = set().union(*(seeds[j] for j in group))
        say(f"tangents of the blocks for directions {', '.join(str(parameters[j]) for j in group)}")
        rendering = emitter.tangent_statements(tangents, active, names, emitter.carried_slots, hoist=True,
                                               slot_of=slot_of)
        result.append((group, _by_stage(parts, rendering, seeds)))
    return result


# the extended fast path, for the outputs and the sensitivities: the partition
# path's stages, then the outputs' and the tangents, straight-line code of one
# trace (the later stages read the primal's values and factors, carried in
# the workspace)
EXTENDED_PRIMAL = ("kinematic_rates", "dynamic_rates", "partition", "solution")


def _extended_straight_line(emitter, stages, sizes, first_slot, limit):
    """(the straight-line code of the extended fast path, "") or (None, why
    there is none): the stages rendered "extended" (the outputs' where the
    model has outputs, the tangents where it has sensitivities) after the
    partition path's; every stage of it straight-line, or none (a later
    stage needs all the primal's values and factors)."""
    by_name = {stage.name: stage for stage in stages}
    wanted = [stage.name for stage in stages if stage.renderings == "extended"
              and (sizes["nout"] or "outputs" not in stage.name)
              and (sizes["nsens"] or not stage.name.startswith("tangent_"))]
    names = EXTENDED_PRIMAL + tuple(wanted)
    line = StraightLine(emitter, [by_name[name] for name in names], sizes, first_slot=first_slot,
                        limit=limit, requires={name: names[:k] for k, name in enumerate(names)},
                        tangents=bool(sizes["nsens"]))
    if line.looped:
        name, why = next(iter(line.looped.items()))
        return None, f"{name}: {why}"
    return line, ""


def evaluation_units(evaluation, tangent_evaluation):
    """The translation unit (1 to EVALUATION_UNITS) of each function of the
    symbolic blocks' evaluation (a part, the partials or the tangents of a
    part), where the parts hold SPLIT_STATEMENTS statements or more; else {}.
    Contiguous groups of about equal size, in the file's order."""
    def measure(name, *groups):
        """(function, statements, C text): the text is the compile time's measure;
        a statement's C is its second field, an entry's (block, index, C) its third"""
        return (name, sum(len(group) for group, _ in groups),
                sum(len(statement[at]) for group, at in groups for statement in group))

    functions = [measure(f"evaluate_{part['name']}", (part["temporaries"], 1), (part["entries"], 2))
                 for group in evaluation.values() for part in group]
    for group in tangent_evaluation.values():
        for part in group:
            if part["hoisted"]:
                functions.append(measure(f"partials_evaluate_{part['name']}", (part["temporaries"], 1),
                                         (part["partials"], 1)))
            temporaries = [] if part["hoisted"] else part["temporaries"]
            functions.append(measure(f"tangent_evaluate_{part['name']}", (part["tangents"], 1),
                                     (part["entries"], 2), (temporaries, 1)))
    if sum(count for _, count, _ in functions) < SPLIT_STATEMENTS or EVALUATION_UNITS < 1:
        return {}
    total = sum(size for _, _, size in functions)
    units, done = {}, 0
    for function, _, size in functions:
        units[function] = min(EVALUATION_UNITS, 1 + (2 * done + size) * EVALUATION_UNITS // (2 * total))
        done += size
    return units


def emit(derivation, progress=None, straight_line_limit=None):
    """Generate the C source, header, the table that connects them to the
    Python kernel (codegen-table.c, codegen-kernel.h: :func:`emit_kernel`) and
    the package init.

    ``straight_line_limit``: the largest straight-line stage, in operations
    (default :data:`STRAIGHT_LINE_LIMIT`); larger ones are looped only."""
    d = derivation
    sizes = d.sizes
    NAME = d.name.upper()
    kinematic_identity = d.kinematic_identity
    started = time.perf_counter()
    emitter = StageEmitter(derivation, progress, skip=["M_qq"] if kinematic_identity else [])
    cse_seconds = time.perf_counter() - started
    started = time.perf_counter()
    say = progress or (lambda message: None)
    stages = procedure(kinematic_identity, multipliers=sizes["nw"] > sizes["nu"])
    # large sparse factorizations: banded, in an order chosen from their patterns
    bands = factor_bands(emitter, stages)
    stages = with_bands(stages, bands)
    # products with a large sparse left operand: over its non-zeros
    sparse = sparse_products(emitter, stages)
    stages = with_sparse_products(stages, sparse)
    # a large stage is evaluated in parts of about PART_STATEMENTS statements,
    # each a function of its own: compile time grows faster than linearly with
    # a function's size
    parts = []
    for stage in [stage.evaluates for stage in stages if stage.evaluates]:
        groups = [emitter.entries(d.stages[stage])]
        if stage != "residuals":
            groups = emitter.split(groups[0], PART_STATEMENTS)
        for k, entries in enumerate(groups):
            parts.append((f"{stage}_{k + 1}" if len(groups) > 1 else stage, stage, entries))
    statements, carried_by_evaluation = emitter.stage_statements([(name, entries) for name, _, entries in parts])
    evaluation = {}
    for (name, stage, _), part in zip(parts, statements):
        evaluation.setdefault(stage, []).append(part)
    tangent_evaluation = _tangent_evaluation(emitter, parts, d, progress) if sizes["nsens"] else {}
    say("straight-line numeric stage for the default partition")
    # a stage whose straight-line code would be too large gets only the looped one
    limit = STRAIGHT_LINE_LIMIT if straight_line_limit is None else straight_line_limit
    straight = StraightLine(emitter, [stage for stage in stages if stage.renderings == "both"], sizes,
                            first_slot=carried_by_evaluation, limit=limit,
                            requires=STRAIGHT_LINE_REQUIRES)
    # a straight-line stage only another straight-line one calls is dropped with it
    for stage, caller in STRAIGHT_LINE_CALLERS.items():
        if stage in straight.sections and caller not in straight.sections:
            del straight.sections[stage]
            straight.looped[stage] = f"its caller, {caller}, is looped"
    extended, extended_why = (_extended_straight_line(emitter, stages, sizes, carried_by_evaluation, limit)
                              if sizes["nout"] or sizes["nsens"] else (None, "no outputs or sensitivities"))
    if extended is None and (sizes["nout"] or sizes["nsens"]):
        say(f"outputs and sensitivities: looped code only ({extended_why})")
    # the lane rendering of the fast path (batches), where there is one
    lanes, lanes_why = lane_code(emitter, parts, straight, d, d.name.upper())
    if lanes_why:
        say(f"no lane code for batches ({lanes_why})")
    renderings = {stage.name: ("looped", straight.looped.get(stage.name, "the rank-revealing half"))
                  if stage.name not in straight.sections
                  else ("straight-line", straight.operation_counts[stage.name])
                  for stage in stages if stage.steps}
    for name in (stage.name for stage in stages if stage.renderings == "extended"):
        renderings[name] = (("straight-line", extended.operation_counts[name])
                            if extended and name in extended.sections
                            else ("looped", extended_why or "not in this model"))
    for name, why in straight.looped.items():
        say(f"{name}: looped code only ({why})")
    # stages larger than this many statements stay separate functions in the
    # compiled code (noinline): compile time grows faster than linearly with a
    # function's size; smaller ones the compiler may inline, saving the calls
    sizes_of = {s["name"]: len(s["temporaries"]) + len(s["entries"]) for s in statements}
    sizes_of.update({stage: sum(sizes_of[s["name"]] for s in group) for stage, group in evaluation.items()})
    sizes_of.update({name: len(ops) for name, ops in straight.sections.items()})
    separate = {name: size > SEPARATE_STAGE_STATEMENTS for name, size in sizes_of.items()}
    separate.update({part["name"]: True for group in evaluation.values() if len(group) > 1 for part in group})
    unit_of = evaluation_units(evaluation, tangent_evaluation)
    units = max(unit_of.values(), default=0)
    evaluated = sorted(set(BLOCK_ORDER) & (set(d.blocks) | {"qd", "ud"}), key=BLOCK_ORDER.index)
    # the output blocks are evaluated into the base workspace too (not
    # nonfinite_blocks' flags: a linearization does not evaluate them)
    family_arrays, stage_family, array_family = workspace_layout(
        stages, evaluated + list(d.stages["outputs"]))
    # the seeds and the blocks' tangents the tangent evaluation writes (no
    # step of a tangent stage may read some of them): the sensitivity workspace's
    written = {"d_q", "d_u", "d_qd", "d_ud", "d_p"} | {
        f"d_{block}" for blocks in d.stages.values() for block in blocks if block not in emitter.skip}
    for array in ARRAYS:
        if array in written and array not in array_family:
            array_family[array] = "sensitivity"
    family_arrays["sensitivity"] = [array for array in ARRAYS if array_family.get(array) == "sensitivity"]
    # the sensitivities' tangents for W parameter directions at once, in the lane code
    directions, directions_why = (direction_lane_code(lambda: _direction_groups(emitter, parts, d, tangent_evaluation,
                                                                                 progress), extended.sections,
                                                      family_arrays["sensitivity"], d.name.upper(),
                                                      sizes["nsens"])
                                  if lanes and extended and sizes["nsens"] else (None, "no lane code"))
    if sizes["nsens"] > 1 and directions_why:
        say(f"sensitivities: one direction at a time ({directions_why})")
    # batches of sensitivities: W points at once, a direction at a time (the same groups)
    point_lanes, point_why = (point_lane_code(lanes, directions, tangent_evaluation, extended.sections, d, NAME)
                              if directions else (None, directions_why))
    if sizes["nsens"] and point_why:
        say(f"sensitivities' batches: one point at a time ({point_why})")
    if directions and not directions["one_point"]:
        directions = None       # one direction: a point's call takes it alone
    if directions:
        # the doubles of one direction (its arrays, the evaluation's carried
        # tangents, the tangent stages' carried values, its flags)
        directions["doubles"] = " + ".join([f"({size})" for _, size in directions["arrays"]] + [
            f"{carried_by_evaluation} + 1", f"{len(directions['carried'])} + 1", "3"])
    factors_by_name = {step.name: step for stage in stages for step in stage.steps if isinstance(step, Factor)}
    all_steps = [step for stage in stages for step in _steps(stage.steps)]
    context = dict(
        separate=separate,
        unit_of=unit_of,
        units=units,
        name=d.name,
        NAME=d.name.upper(),
        description=d.description,
        version=__version__,
        sizes=sizes,
        q_names=d.q_names, u_names=d.u_names, r_names=d.r_names, p_names=d.p_names,
        y_names=d.y_names,
        parameter_values=[repr(float(v)) for v in d.parameter_values],
        dependent_q=d.dependent_q, dependent_u=d.dependent_u,
        independent_q=straight.index["independent_q"], independent_u=straight.index["independent_u"],
        statuses=STATUSES,
        operation_count=emitter.operation_count,
        kinematic_identity=kinematic_identity,
        stages={stage.name: stage for stage in stages},
        evaluation=evaluation,
        # the helpers of sines and cosines of one argument the scalar evaluation calls
        sine_cosine=sorted({helper for part in statements for _, helper in part["fused"]}),
        tangent_evaluation=tangent_evaluation,
        sensitivity_indices=d.sensitivity_indices,
        sensitivity_names=[d.p_names[k] for k in d.sensitivity_indices],
        straight_line=straight.sections,   # the stages with a straight-line function
        renderings=renderings,
        factors={step.name: step for stage in stages for step in stage.steps if isinstance(step, Factor)},
        completion=completion_steps(stages),
        # the lanes': the sensitivities' primal carries more (the extended fast path's)
        carried_count=carried_by_evaluation + max(straight.carried_count,
                                                  extended.carried_count if point_lanes else 0),
        # the workspace's: the sensitivities' fast path carries more
        workspace_carried_count=carried_by_evaluation + max(
            straight.carried_count, extended.carried_count if extended else 0),
        # the extended fast path: stage -> its operations (primal, outputs, tangent stages)
        extended_line=extended.sections if extended else {},
        extended_primal=EXTENDED_PRIMAL,
        carried_by_evaluation=carried_by_evaluation,
        tangent_coefficients=sum(len(part["partials"]) for parts in tangent_evaluation.values()
                                 for part in parts),
        carried_by_residuals=sum(part["stores"] for part in evaluation["residuals"]),
        zero_tables={stage: emitter.zero_tables([stage]) for stage in d.stages},
        derivation_stages=d.stages,
        index_sets=INDEX_SETS,
        model_name=d.name,
        thresholds=[(name, default, doc) for name, (default, doc) in THRESHOLDS.items()
                    if name not in GENERATION_THRESHOLDS],
        run_time_sizes=RUN_TIME_SIZES,
        helpers_c=(template_dir() / "helpers.c").read_text(),
        # the linearization's fast path runs the dense kernels (a large model):
        # they are also compiled for x86-64-v4 (templates/helpers.c)
        wide_clones="solution" not in straight.sections,
        # the banded factorizations: (name, band, its size, row and column
        # reorderings as interchanges); their helpers only where there are some
        bands=[(name, band, _array_size((factors_by_name[name].matrix.row_count, ("one",)), NAME),
                swaps(band.rows), swaps(band.cols)) for name, band in sorted(bands.items())],
        helpers_band_c=(template_dir() / "helpers_band.c").read_text() if bands else "",
        # the products over non-zeros: their tables and helper, only where used
        sparse_products=[sparse[key] for key in sorted(sparse)],
        # whether a band or a list of non-zeros is for the default partition's
        # columns (then checked against the workspace's partition)
        same_indices=any((step.kind == "factor" and step.band is not None and step.matrix.index)
                         or (step.kind in PRODUCT_KINDS and step.sparse is not None and step.a.index)
                         for step in all_steps),
        helpers_sparse_c=(template_dir() / "helpers_sparse.c").read_text() if sparse else "",
        stage_outputs=STAGE_OUTPUTS,
        stage_outputs_straight=STRAIGHT_LINE_OUTPUTS,
        svds={step.name: step for step in all_steps if isinstance(step, SVD)},
        caller_arrays=CALLER_ARRAYS,
        entry_points=table.ENTRY_POINTS,
        families=FAMILIES,
        entry_doc=entry_doc,
        signature=lambda entry: signature(entry, d.name),
        batch_signature=lambda entry: batch_signature(entry, d.name),
        # the workspace of each family: its arrays with their C sizes
        family_arrays={family: [(name, _array_size(ARRAYS[name], NAME)) for name in names]
                       for family, names in family_arrays.items()},
        pivots=[(step.name, _array_size((step.matrix.row_count, ("one",)), NAME))
                for step in all_steps if isinstance(step, Factor)],
        stage_family=stage_family,
        family_var=FAMILY_VARIABLES,
        array_owner={**{name: FAMILY_VARIABLES[family] for name, family in array_family.items()
                        if family != "base"}, **INT_FIELDS},
        blocks=evaluated,
        arrays=ARRAYS,
        stage_guards=lambda entry: stage_guards(
            entry, stages, {**{stage: d.stages[stage] for stage in d.stages}}),
        # the stages the generated entry point bodies run (a run_<stage> function each)
        lanes=lanes,
        directions=directions,
        tangent_order=TANGENT_ORDER,
        kernel_outputs=KERNEL_OUTPUTS,
        kernel_signature=lambda kernel: kernel_signature(d.name, kernel),
        solves=solves,
        arities=LIBM_ARITIES,
        # the default partition's independent rates, as lane code (steadiness)
        rates=[f"w->qd[{i}][k]" for i in straight.index["independent_q"]]
        + [f"w->ud[{i}][k]" for i in straight.index["independent_u"]],
        # doubles of one lane of the batch workspace (1: no lane code)
        lane_doubles=lane_doubles(lanes, sizes, carried_by_evaluation + max(
            straight.carried_count, extended.carried_count if point_lanes else 0)) if lanes else 1,
        point_lanes=point_lanes,
        kernel_parameters=KERNEL_PARAMETERS,
        # doubles of one lane of the point lanes' tangents (0: none)
        point_lane_doubles=point_lane_doubles(point_lanes, carried_by_evaluation) if point_lanes else "0",
        run_stages=[stage.name for stage in stages
                    if any(stage.name in entry.stages for entry in table.ENTRY_POINTS if entry.body == "stages")],
    )
    env = environment()
    files = {
        f"{d.name}.h": env.get_template("model.h.jinja").render(context),
        f"{d.name}.c": env.get_template("model.c.jinja").render(context),
        KERNEL_HEADER: kernel_header(),
        KERNEL_TABLE: env.get_template("kernel_table.c.jinja").render(
            name=d.name, NAME=NAME, version=__version__, sizes=SIZE_NAMES, families=FAMILIES,
            entry_points=table.ENTRY_POINTS, forwarded=forwarded, forwarded_batch=forwarded_batch,
            generic_signature=lambda entry: signature(entry, "codegen"),
            generic_batch_signature=lambda entry: batch_signature(entry, "codegen")),
        "__init__.py": env.get_template("module_init.py.jinja").render(context),
        "Makefile": env.get_template("Makefile.jinja").render(context),
        "CMakeLists.txt": env.get_template("CMakeLists.txt.jinja").render(context),
    }
    if lanes:
        files[f"{d.name}_lanes.c"] = env.get_template("lanes.c.jinja").render(context)
    return GeneratedSources(
        name=d.name, files=files, operation_count=emitter.operation_count,
        temporary_count=len(emitter.temporaries),
        timings={"CSE": cse_seconds, "emission": time.perf_counter() - started}, renderings=renderings,
        lanes=lanes_why or "lanes",
        # linearize's fast path per point: the CSE'd blocks' operations and the
        # straight-line sections', and its math function calls
        fast_path={"operations": emitter.operation_count + lanes.numeric_operations,
                   "math_calls": lanes.math_calls} if lanes else {},
        nonzero_count={name: len(block.entries) for name, block in emitter.blocks.items()},
        units=units)
