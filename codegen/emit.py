"""Stage 3 of the pipeline: emit C and Cython source text from a derivation.

All structurally non-zero entries of all blocks go through one common
subexpression elimination, so a subexpression shared by, say, the mass matrix
and a Jacobian block is computed once per call. Each generated C function
evaluates the blocks it needs stage by stage (kinematics, then dynamics after
qd* is known, then the Jacobian blocks after ud* is known); a temporary is
emitted in the first stage that needs it and reused by later ones.

Templates in ``templates/`` lay out the files; this module only fills them.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import sympy as sm

from . import __version__
from .printer import ModelCodePrinter
from .status import STATUSES
from .unroll import NumericStage



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
GENERATOR_MODULES = ("__init__.py", "model.py", "derive.py", "emit.py", "unroll.py", "printer.py", "partition.py",
                     "status.py")

# templates of the tools around the pipeline, not of the generated package
TOOL_TEMPLATES = ("bench_driver.c.jinja",)


def generator_fingerprint():
    """Changes whenever the code or templates that write the generated files change."""
    h = hashlib.sha256(__version__.encode())
    here = Path(__file__).resolve().parent
    templates = [path for path in sorted(template_dir().glob("*.jinja")) if path.name not in TOOL_TEMPLATES]
    for path in [here / name for name in GENERATOR_MODULES] + templates:
        h.update(path.name.encode())
        h.update(path.read_bytes())
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
    timings: dict = field(default_factory=dict)        # "CSE", "emission": seconds


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
    """One CSE over every block; C statements for any sequence of stages."""

    def __init__(self, derivation, progress=None, skip=()):
        say = progress or (lambda message: None)
        self.derivation = derivation
        self.skip = set(skip)   # blocks the C does not need (e.g. an identity M_qq)
        self.blocks = {name: _Block(name, matrix) for name, matrix in derivation.blocks.items()}
        outputs = [expr for block in self.blocks.values() for _, expr in block.entries]
        say(f"common subexpression elimination over {len(outputs)} non-zero entries")
        temporaries = sm.numbered_symbols("x", real=True)
        replacements, reduced = sm.cse(outputs, symbols=temporaries, list=True)
        self.temporaries = [symbol for symbol, _ in replacements]
        self.temporary_expr = dict(replacements)
        position = {symbol: k for k, symbol in enumerate(self.temporaries)}
        self._position = position
        # temporaries each expression uses directly
        self._uses = {symbol: {s for s in expr.free_symbols if s in position}
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
        self.operation_count = sum(sm.count_ops(expr) for _, expr in replacements) + \
            sum(sm.count_ops(expr) for exprs in self.reduced.values() for expr in exprs)

    def _closure(self, block_names):
        """Temporaries the given blocks need, directly or through others."""
        needed = set()
        for name in block_names:
            for expr in self.reduced[name]:
                needed |= {s for s in expr.free_symbols if s in self._position}
        stack = list(needed)
        while stack:
            for used in self._uses[stack.pop()]:
                if used not in needed:
                    needed.add(used)
                    stack.append(used)
        return needed

    def zero_tables(self):
        """C tables of the structural zeros of each sparse matrix block."""
        lines = []
        for block in self.blocks.values():
            zeros = self.structural_zeros(block.name)
            if zeros and block.name not in self.skip:
                lines.append(f"static const int zeros_{block.name}[{len(zeros)}] = "
                             f"{{ {', '.join(map(str, zeros))} }};")
        return lines

    def structural_zeros(self, name):
        block = self.blocks[name]
        nonzero = {index for index, _ in block.entries}
        return [k for k in range(block.size) if k not in nonzero]

    def zero_fill(self, stage_names, targets):
        """Statements writing 0 at the structural zeros of the stages' blocks,
        for code emitted with ``fill=False`` that then needs the dense arrays."""
        lines = []
        for stage in stage_names:
            for name in self.derivation.stages[stage]:
                zeros = self.structural_zeros(name)
                if zeros and name not in self.skip:
                    lines.append(f"zero_at({targets[name]}, zeros_{name}, {len(zeros)});")
        return lines

    def stages(self, stage_names, targets, shared=True, fill=True):
        """C statements for each stage, in order.

        ``targets`` maps a block name to the C array it is written to. With
        ``shared`` the stages run in one scope and a temporary computed by an
        earlier stage is not computed again; otherwise each stage stands alone.
        Without ``fill`` only the structural non-zeros are written (see
        :meth:`zero_fill`).
        """
        emitted = set()
        code = []
        for stage in stage_names:
            block_names = [b for b in self.derivation.stages[stage] if b not in self.skip]
            needed = self._closure(block_names)
            if shared:
                needed -= emitted
                emitted |= needed
            lines = [f"const double {symbol} = {self.printer.doprint(self.temporary_expr[symbol])};"
                     for symbol in sorted(needed, key=self._position.get)]
            for name in block_names:
                block = self.blocks[name]
                if block.size == 0:
                    continue
                target = targets[name]
                if not block.dense and fill:
                    lines.append(f"fill_zero({target}, {block.size});")
                for (index, _), expr in zip(block.entries, self.reduced[name]):
                    lines.append(f"{target}[{index}] = {self.printer.doprint(expr)};")
            code.append(lines)
        return code


def environment():
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _c_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def emit(derivation, progress=None):
    """Generate the C source, header, Cython wrapper and package init."""
    d = derivation
    sizes = d.sizes
    kinematic_identity = d.blocks["M_qq"] == sm.eye(sizes["nq"])
    started = time.perf_counter()
    emitter = StageEmitter(derivation, progress, skip=["M_qq"] if kinematic_identity else [])
    cse_seconds = time.perf_counter() - started
    started = time.perf_counter()
    workspace = {name: f"w->{name}" for name in d.blocks}
    say = progress or (lambda message: None)
    say("straight-line numeric stage for the default partition")
    numeric = NumericStage(emitter, kinematic_identity)
    context = dict(
        name=d.name,
        NAME=d.name.upper(),
        description=d.description,
        version=__version__,
        sizes=sizes,
        nqi=sizes["nq"] - sizes["nc"],
        nui=sizes["nu"] - sizes["nv"],
        nx=sizes["nq"] - sizes["nc"] + sizes["nu"] - sizes["nv"],
        q_names=d.q_names, u_names=d.u_names, r_names=d.r_names, p_names=d.p_names,
        parameter_values=[repr(float(v)) for v in d.parameter_values],
        dependent_q=d.dependent_q, dependent_u=d.dependent_u,
        independent_q=numeric.independent_q, independent_u=numeric.independent_u,
        fast_qd_code=numeric.qd_code, fast_ud_code=numeric.ud_code,
        fast_rest_code=numeric.rest_code, fast_rates_code=numeric.rates_code,
        c_string=_c_string,
        statuses=STATUSES,
        operation_count=emitter.operation_count,
        kinematic_identity=kinematic_identity,
        residual_code=emitter.stages(["residuals"], {"f_c": "f_c", "f_v": "f_v"})[0],
        configuration_code=emitter.stages(["configuration"], workspace)[0],
        velocity_code=emitter.stages(["velocity"], workspace)[0],
        rates_code=emitter.stages(["kinematics", "dynamics"], workspace, fill=False),
        linearize_code=emitter.stages(["residuals", "kinematics", "dynamics", "jacobians"], workspace,
                                      fill=False),
        zero_tables=emitter.zero_tables(),
        zero_residuals=emitter.zero_fill(["residuals"], workspace),
        zero_kinematics=emitter.zero_fill(["kinematics"], workspace),
        zero_dynamics=emitter.zero_fill(["dynamics"], workspace),
        zero_jacobians=emitter.zero_fill(["jacobians"], workspace),
    )
    env = environment()
    files = {
        f"{d.name}.h": env.get_template("model.h.jinja").render(context),
        f"{d.name}.c": env.get_template("model.c.jinja").render(context),
        f"_{d.name}.pyx": env.get_template("module.pyx.jinja").render(context),
        "__init__.py": env.get_template("module_init.py.jinja").render(context),
        "Makefile": env.get_template("Makefile.jinja").render(context),
        "CMakeLists.txt": env.get_template("CMakeLists.txt.jinja").render(context),
    }
    return GeneratedSources(
        name=d.name, files=files, operation_count=emitter.operation_count,
        temporary_count=len(emitter.temporaries),
        timings={"CSE": cse_seconds, "emission": time.perf_counter() - started},
        nonzero_count={name: len(block.entries) for name, block in emitter.blocks.items()})
