"""Stage 2 of the pipeline: derive the linearization blocks.

From a :class:`codegen.Model` this forms, symbolically and once, every matrix
the numeric stage needs, with the names of Peterson's thesis chapter (the
design's table; the chapter is authoritative, the short paper has typos):

    M_qq  = d f_k/d qd           A_qq  = -d f_k/d q       A_qu  = -d f_k/d u
    M_uqc = d f_a/d qd           A_uqc = -d f_a/d q       A_uuc = -d f_a/d u
    M_uuc = d f_a/d ud
    M_uqd = d f_d/d qd           A_uqd = -d f_d/d q       A_uud = -d f_d/d u
    M_uud = d f_d/d ud           B_u   = -d f_d/d r

where ``f_k = f_0 + f_1`` (kinematic residual), ``f_d = f_2 + f_3`` (dynamic
residual) and ``f_a = d f_v/dt`` (acceleration constraints, formed here as the
total time derivative of ``f_v``). Also the constraint Jacobians
``J_c = d f_c/d q``, ``J_vq = d f_v/d q``, ``B_v = d f_v/d u``, and the
residuals needed to compute qd* and ud* at an operating point:

    f_k(q, qd=0, u, t) = -M_qq qd*                       (kinematic equations)
    [f_a; f_d](q, qd*, u, ud=0, r, t) = -[M_uuc; M_uud] ud*

Only Jacobians and substitutions of zero happen here: no solve, no inverse,
no simplify. The speed blocks are stacked as the numeric stage uses them:
``M_uq = [M_uqc; M_uqd]``, ``M_uu = [M_uuc; M_uud]``, ``A_uq = [A_uqc; A_uqd]``,
``A_uu = [A_uuc; A_uud]``.

With velocity constraints in the multiplier form (``Model.reduction ==
"multipliers"``), ``f_d`` is the unconstrained ``F`` (o rows) plus
``B_v^T lambda``, and the multipliers lambda join ud as unknowns of the
speed-level system: ``M_uu`` is (o + m) x (o + m) and the solve gives ud* and
lambda* together; the lambda rows of the solution are simply not reported.
This is the same linearization as the reduced equations (premultiplying by
the null-space basis of B_v removes lambda), without SymPy's symbolic
elimination of the dependent speeds.

The result is a :class:`Derivation`: plain symbols for every input vector and,
for every stage of the numeric procedure, the named matrices that stage needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sm

from .differentiate import Differentiator
from .errors import ModelError
from .model import multipliers
from .partition import complement
from .printer import ModelCodePrinter, unprintable
from .subexpressions import replace as _replace


@dataclass
class Derivation:
    """Named symbolic matrices in plain symbols, ready for emission."""

    name: str
    description: str
    # plain symbols standing for the inputs of the generated functions
    t: sm.Symbol
    q: list
    u: list
    qd: list
    ud: list
    r: list
    p: list
    lam: list   # Lagrange multipliers of the velocity constraints (multiplier form), else []
    # names and defaults carried through to the generated code
    q_names: list
    u_names: list
    r_names: list
    p_names: list
    parameter_values: list
    dependent_q: list  # default partition: indices into q
    dependent_u: list  # indices into u
    y_names: list = field(default_factory=list)   # the model's outputs, in the order of y
    # the parameters of the sensitivities: indices into p, ascending
    sensitivity_indices: list = field(default_factory=list)
    # name -> sympy Matrix, in the order the numeric stage computes them
    blocks: dict = field(default_factory=dict)
    # which blocks each stage of the numeric procedure evaluates
    stages: dict = field(default_factory=dict)

    @property
    def sizes(self):
        """Every size the generated code uses (the one place they are counted)."""
        nq, nu, nc, nv = len(self.q), len(self.u), len(self.dependent_q), len(self.dependent_u)
        return dict(nq=nq, nu=nu, nr=len(self.r), np=len(self.p), nc=nc, nv=nv,
                    nl=len(self.lam), nw=nu + len(self.lam), nqi=nq - nc, nui=nu - nv,
                    nx=nq - nc + nu - nv, nd=nu + len(self.lam) - nv, nout=len(self.y_names),
                    nsens=len(self.sensitivity_indices),
                    # rows of the sensitivities' dA, dB (NSENS x NX) and dC, dD (NSENS x NOUT)
                    nsx=len(self.sensitivity_indices) * (nq - nc + nu - nv),
                    nsy=len(self.sensitivity_indices) * len(self.y_names))

    @property
    def independent_q(self):
        """The default independent coordinates: the complement of dependent_q."""
        return complement(len(self.q), self.dependent_q)

    @property
    def independent_u(self):
        return complement(len(self.u), self.dependent_u)

    @property
    def kinematic_identity(self):
        """Whether M_qq = d f_k/d qd is the identity (qd = u form): no solve for qd*."""
        return self.blocks["M_qq"] == sm.eye(len(self.q))


# the name tests/test_model_checks.py imports (the class lives in codegen.differentiate)
_Differentiator = Differentiator


def _plain_symbols(prefix, count):
    return list(sm.symbols(f"{prefix}_0:{count}", real=True)) if count else []


def _zero_at(matrix, symbols):
    return _replace(matrix, {s: sm.S.Zero for s in symbols})


def _check_free(label, matrix, allowed, model_name):
    """Structural assumption check: ``matrix`` may depend only on ``allowed``."""
    extra = set().union(*(e.free_symbols for e in matrix)) - set(allowed) if len(matrix) else set()
    if extra:
        raise ModelError(
            f"model {model_name!r}: {label} depends on {sorted(map(str, extra))}; "
            "the equations must be linear in qd (kinematic) and in ud (dynamic and constraints)")


def _check_printable(blocks, model_name):
    """No unevaluated object (Derivative, Subs, ...) or function without a C
    translation may reach the printer: refuse the model here, naming the
    block, the entry and the offending subexpression."""
    printer = ModelCodePrinter({})
    seen = set()   # shared: subexpressions common to several blocks are walked once
    for name, matrix in blocks.items():
        rows, cols = matrix.shape
        for i in range(rows):
            for j in range(cols):
                bad = unprintable(matrix[i, j], printer, seen)
                if bad:
                    expr = str(matrix[i, j])
                    expr = expr if len(expr) <= 300 else expr[:300] + " ..."
                    raise ModelError(
                        f"model {model_name!r}: block {name}[{i}, {j}] contains {bad[0]} "
                        f"(a {type(bad[0]).__name__}), which has no C translation: a derivative "
                        "or substitution SymPy left unevaluated, or a function (or constant) the "
                        f"C printer does not know; entry: {expr}")


def derive(model, progress=None):
    """Form every block of the linearization of ``model``.

    ``progress(message)`` is called before each step, for people at a terminal.
    """
    say = progress or (lambda message: None)
    n, o, s = model.n, model.o, model.s
    t = sm.Symbol("t", real=True)
    q, u = _plain_symbols("q", n), _plain_symbols("u", o)
    qd, ud = _plain_symbols("qd", n), _plain_symbols("ud", o)
    r, p = _plain_symbols("r", s), _plain_symbols("p", len(model.parameters))

    # Derivatives first: xreplace swaps whole Derivative nodes before their
    # arguments are visited.
    to_plain = {}
    to_plain.update(zip(model.qd, qd))
    to_plain.update(zip(model.ud, ud))
    to_plain.update(zip(model.q, q))
    to_plain.update(zip(model.u, u))
    to_plain.update(zip(model.inputs, r))
    to_plain.update(zip(model.parameters, p))
    to_plain[model.time] = t

    def plain(matrix):
        return _replace(matrix, to_plain)

    say("converting equations to plain symbols")
    f_k = plain(model.kinematic)
    f_c = plain(model.f_c)
    f_v = plain(model.f_v)
    f_d = plain(model.dynamic)
    lam = _plain_symbols("lam", model.multipliers)
    # the outputs may hold the multipliers (codegen.multipliers): the unknowns lam
    to_plain.update(zip(multipliers(model.multipliers), lam))
    y = plain(model.outputs)
    leftover = set()
    for matrix in (f_k, f_c, f_v, f_d, y):
        for expr in matrix:
            leftover |= {a for a in expr.atoms(sm.Function, sm.Derivative)
                         if isinstance(a, sm.Derivative) or isinstance(a.func, sm.core.function.UndefinedFunction)}
    if leftover:
        raise ModelError(f"model {model.name!r}: equations contain {sorted(map(str, leftover))}, "
                         "which are neither coordinates, speeds, their first derivatives nor inputs")

    say("constraint Jacobians")
    differentiate = Differentiator(q + u + qd + ud + lam + r + [t])
    _jacobian = differentiate.jacobian
    J_c = _jacobian(f_c, q)
    J_vq = _jacobian(f_v, q)
    B_v = _jacobian(f_v, u)
    f_vt = _jacobian(f_v, [t]) if len(f_v) else sm.zeros(0, 1)
    # Acceleration constraints: total time derivative of f_v.
    f_a = J_vq * sm.Matrix(qd) + B_v * sm.Matrix(ud) + f_vt if len(f_v) else sm.zeros(0, 1)

    say("kinematic blocks")
    M_qq = _jacobian(f_k, qd)
    A_qq = -_jacobian(f_k, q)
    A_qu = -_jacobian(f_k, u)
    _check_free("M_qq = d f_k/d qd", M_qq, q + p + [t], model.name)
    if any(e.has(*ud) for e in f_k):
        raise ModelError(f"model {model.name!r}: kinematic equations must not contain ud")

    say("dynamic blocks")
    # Multiplier form: the unconstrained equations F plus the constraint forces
    # B_v^T lambda; lambda joins ud among the unknowns of the speed-level solve.
    if lam:
        f_d = f_d + B_v.T * sm.Matrix(lam)
    unknowns = ud + lam
    f_u = f_a.col_join(f_d)          # [f_a; f_d]: o equations (o + m with multipliers)
    M_uq = _jacobian(f_u, qd)        # [M_uqc; M_uqd]
    M_uu = _jacobian(f_u, unknowns)  # [M_uuc; M_uud]
    A_uq = -_jacobian(f_u, q)        # [A_uqc; A_uqd]
    A_uu = -_jacobian(f_u, u)        # [A_uuc; A_uud]
    B_u = -_jacobian(f_d, r)
    _check_free("M_uu = d [f_a; f_d]/d ud", M_uu, q + qd + u + p + r + [t], model.name)
    if any(e.has(*unknowns) for e in M_uu):
        raise ModelError(f"model {model.name!r}: dynamic equations must be linear in ud")

    say("output blocks")
    # y = h(q, qd, u, ud, r, t) and its Jacobians; the numeric stage forms
    # C = H_q C_0 + H_u [C_1 C_0, C_2] + H_rates A', D = H_r + H_rates B'
    # (H_rates = dh/d[qd; ud; lambda]: the rows of all rates of A', B')
    output_blocks = {
        "y": y,
        "H_q": _jacobian(y, q), "H_u": _jacobian(y, u),
        "H_rates": _jacobian(y, qd + unknowns), "H_r": _jacobian(y, r),
    }

    kinematic_residual = _zero_at(f_k, qd)        # = -M_qq qd*
    speed_residual = _zero_at(f_u, unknowns)      # = -M_uu [ud*; lambda*]

    blocks = {
        "f_c": f_c, "f_v": f_v,
        "J_c": J_c, "B_v": B_v, "J_vq": J_vq,
        "M_qq": M_qq, "kinematic_residual": kinematic_residual,
        "M_uu": M_uu, "speed_residual": speed_residual,
        "A_qq": A_qq, "A_qu": A_qu, "M_uq": M_uq, "A_uq": A_uq, "A_uu": A_uu, "B_u": B_u,
        **output_blocks,
    }
    stages = {
        # in the order a call evaluates them (codegen/procedure.py); each needs
        # what the earlier ones computed
        "residuals": ["f_c", "f_v"],                         # q, u, t, p
        "constraint_jacobians": ["J_c", "J_vq", "B_v"],      # q, u, t, p
        "kinematics": ["M_qq", "kinematic_residual"],        # qd*: q, u, t, p
        "dynamics": ["M_uu", "speed_residual"],              # ud*: needs qd* as well
        # the Jacobian blocks at (q, qd*, u, ud*, r, t, p)
        "jacobians": ["A_qq", "A_qu", "M_uq", "A_uq", "A_uu", "B_u"],
        # the outputs and their Jacobians at the same point
        "outputs": list(output_blocks),
    }
    say("checking every block is printable C")
    _check_printable(blocks, model.name)
    index = {symbol: i for i, symbol in enumerate(model.q)}
    dependent_q = [index[symbol] for symbol in model.q_dependent]
    index = {symbol: i for i, symbol in enumerate(model.u)}
    dependent_u = [index[symbol] for symbol in model.u_dependent]
    return Derivation(
        name=model.name, description=model.description, t=t, q=q, u=u, qd=qd, ud=ud, r=r, p=p,
        lam=lam,
        q_names=model.q_names, u_names=model.u_names, r_names=model.r_names, p_names=model.p_names,
        parameter_values=list(model.parameter_values),
        dependent_q=dependent_q, dependent_u=dependent_u, blocks=blocks, stages=stages,
        y_names=list(model.y_names),
        sensitivity_indices=[list(model.parameters).index(s)
                             for s in getattr(model, "sensitivity_parameters", [])])
