"""CasADi, the strongest peer: the same linearization built with CasADi (optional).

The blocks of :mod:`codegen.derive` are converted expression by expression to
CasADi ``SX``; qd*, ud*, C_0, C_1, C_2 and the block-triangular solve are
written with ``casadi.solve`` for the model's default partition; CasADi's code
generator writes the C (in a forked child with a time limit), compiled with
the pipeline's compiler and flags. Two builds: from the blocks of our
derivation (multiplier form), and from the blocks of the KanesMethod's
symbolically reduced equations. Nothing in the pipeline uses this module.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import time

import sympy as sm

from ..partition import complement
from .common import NPOINTS


def _converter(casadi, mapping):
    """Function sympy expression -> SX, with ``mapping`` for the symbols."""
    functions = {
        sm.sin: casadi.sin, sm.cos: casadi.cos, sm.tan: casadi.tan,
        sm.asin: casadi.asin, sm.acos: casadi.acos, sm.atan: casadi.atan,
        sm.sinh: casadi.sinh, sm.cosh: casadi.cosh, sm.tanh: casadi.tanh,
        sm.exp: casadi.exp, sm.log: casadi.log, sm.Abs: casadi.fabs,
        sm.sign: casadi.sign,
    }
    cache = {}

    def convert(expr):
        try:
            return cache[expr]
        except KeyError:
            pass
        if expr in mapping:
            value = mapping[expr]
        elif expr.is_Number or expr.is_NumberSymbol:
            value = casadi.SX(float(expr))
        elif expr.is_Add:
            args = [convert(a) for a in expr.args]
            value = args[0]
            for a in args[1:]:
                value = value + a
        elif expr.is_Mul:
            args = [convert(a) for a in expr.args]
            value = args[0]
            for a in args[1:]:
                value = value * a
        elif expr.is_Pow:
            base = convert(expr.base)
            if expr.exp == -1:
                value = 1 / base
            elif expr.exp == sm.Rational(1, 2):
                value = casadi.sqrt(base)
            elif expr.exp.is_Integer:
                value = casadi.constpow(base, int(expr.exp))
            else:
                value = casadi.power(base, convert(expr.exp))
        elif expr.func == sm.atan2:
            value = casadi.atan2(convert(expr.args[0]), convert(expr.args[1]))
        elif expr.func in functions:
            value = functions[expr.func](convert(expr.args[0]))
        else:
            raise NotImplementedError(f"no CasADi conversion for {expr.func}")
        cache[expr] = value
        return value

    return convert


def build_function(derivation, name="casadi_lin"):
    """``casadi.Function`` (t, q, u, r, p) -> (A, B) of the default partition."""
    import casadi

    d = derivation
    nq, nu, nr, npar = len(d.q), len(d.u), len(d.r), len(d.p)
    nc, nv = len(d.dependent_q), len(d.dependent_u)
    t = casadi.SX.sym("t")
    q, u = casadi.SX.sym("q", nq), casadi.SX.sym("u", nu)
    r, p = casadi.SX.sym("r", nr), casadi.SX.sym("p", npar)
    base = {d.t: t}
    base.update({s: q[i] for i, s in enumerate(d.q)})
    base.update({s: u[i] for i, s in enumerate(d.u)})
    base.update({s: r[i] for i, s in enumerate(d.r)})
    base.update({s: p[i] for i, s in enumerate(d.p)})

    def matrix(block, mapping):
        convert = _converter(casadi, mapping)
        rows, cols = block.shape
        out = casadi.SX.zeros(rows, cols)
        for i in range(rows):
            for j in range(cols):
                if block[i, j] != 0:
                    out[i, j] = convert(block[i, j])
        return out

    b = d.blocks
    zero_rates = dict(base)
    zero_rates.update({s: casadi.SX(0) for s in d.qd + d.ud + d.lam})
    M_qq = matrix(b["M_qq"], zero_rates)
    qd = casadi.solve(M_qq, -matrix(b["kinematic_residual"], zero_rates))
    with_qd = dict(zero_rates)
    with_qd.update({s: qd[i] for i, s in enumerate(d.qd)})
    M_uu = matrix(b["M_uu"], with_qd)
    ud = casadi.solve(M_uu, -matrix(b["speed_residual"], with_qd))   # [ud*; lambda*]
    point = dict(with_qd)
    point.update({s: ud[i] for i, s in enumerate(d.ud + d.lam)})
    blocks = {key: matrix(b[key], point)
              for key in ("J_c", "J_vq", "B_v", "A_qq", "A_qu", "M_uq", "A_uq", "A_uu", "B_u")}

    dep_q, dep_u = d.dependent_q, d.dependent_u
    ind_q, ind_u = complement(nq, dep_q), complement(nu, dep_u)
    eye_q, eye_u = casadi.SX.eye(nq), casadi.SX.eye(nu)
    P_qd, P_qi = eye_q[:, dep_q], eye_q[:, ind_q]
    P_ud, P_ui = eye_u[:, dep_u], eye_u[:, ind_u]
    J_c, J_vq, B_v = blocks["J_c"], blocks["J_vq"], blocks["B_v"]
    C_0 = P_qi - P_qd @ casadi.solve(J_c @ P_qd, J_c @ P_qi) if nc else P_qi
    C_1 = -P_ud @ casadi.solve(B_v @ P_ud, J_vq) if nv else casadi.SX.zeros(nu, nq)
    C_2 = P_ui - P_ud @ casadi.solve(B_v @ P_ud, B_v @ P_ui) if nv else P_ui
    A_qq, A_qu, A_uq, A_uu = blocks["A_qq"], blocks["A_qu"], blocks["A_uq"], blocks["A_uu"]
    A_tilde = casadi.vertcat(
        casadi.horzcat((A_qq + A_qu @ C_1) @ C_0, A_qu @ C_2),
        casadi.horzcat((A_uq + A_uu @ C_1) @ C_0, A_uu @ C_2))
    nw = nu + len(d.lam)
    B_tilde = (casadi.vertcat(casadi.SX.zeros(nq + nv, nr), blocks["B_u"]) if nr
               else casadi.SX.zeros(nq + nw, 0))
    M_qq_p = matrix(b["M_qq"], point)
    M = casadi.vertcat(casadi.horzcat(M_qq_p, casadi.SX.zeros(nq, nw)),
                       casadi.horzcat(blocks["M_uq"], matrix(b["M_uu"], point)))
    A_full = casadi.solve(M, A_tilde)
    B_full = casadi.solve(M, B_tilde) if nr else B_tilde
    rows = ind_q + [nq + i for i in ind_u]
    return casadi.Function(name, [t, q, u, r, p], [A_full[rows, :], B_full[rows, :]],
                           ["t", "q", "u", "r", "p"], ["A", "B"])


# -- CasADi's code generation and compilation ---------------------------------------------

VARIANTS = {
    "casadi": "CasADi, our blocks (multiplier form)",
    "casadi_kane": "CasADi, SymPy-reduced Kane blocks",
}


def casadi_available():
    return importlib.util.find_spec("casadi") is not None


def _generate(conn, derivation, name, work):
    """Child process: CasADi function and C code (sends timings and file sizes)."""
    try:
        import casadi

        started = time.perf_counter()
        function = build_function(derivation, name=name)
        built = time.perf_counter() - started
        started = time.perf_counter()
        generator = casadi.CodeGenerator(f"{name}.c", {"with_header": True})
        generator.add(function)
        # CasADi's own batch: its map over the benchmark's points (a loop in its C)
        generator.add(function.map(f"{name}_map", "serial", NPOINTS, [], []))
        generator.generate(str(work) + os.sep)
        generated = time.perf_counter() - started
        conn.send(("ok", dict(build=built, generate=generated,
                              instructions=int(function.n_instructions()))))
    except BaseException as error:  # report, never hang the parent
        conn.send(("error", f"{type(error).__name__}: {error}"))
    finally:
        conn.close()


def generate_casadi(derivation, name, work, limit):
    """Run :func:`build_function` and CasADi's code generator in a forked child
    with a time limit. Returns (status, info)."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_generate, args=(send, derivation, name, work), daemon=True)
    started = time.perf_counter()
    process.start()
    send.close()
    try:
        if not receive.poll(limit):
            process.kill()
            process.join()
            return "timeout", {"seconds": time.perf_counter() - started}
        status, info = receive.recv()
    except EOFError:
        status, info = "error", f"the CasADi process died (exit code {process.exitcode})"
    process.join()
    return status, info


def casadi_sources(model, artifact):
    """(key, label, derivation maker) of each CasADi build: the derivation of our
    build, and, when the model has velocity constraints (multiplier form), the
    derivation of its KanesMethod's symbolically reduced equations (the blocks
    of Peterson's chapter as SymPy's KanesMethod gives them)."""
    from .build import derivation_of

    sources = [("casadi", VARIANTS["casadi"], lambda: derivation_of(model, artifact))]
    if getattr(model, "kane", None) is not None and getattr(model, "multipliers", 0):
        from ..derive import derive
        from ..model import Model

        def reduced():
            parameters = dict(zip(model.parameters, model.parameter_values))
            return derive(Model(model.kane, parameters=parameters, inputs=model.inputs,
                                name=model.name, description=model.description, reduction="kane"))
        sources.append(("casadi_kane", VARIANTS["casadi_kane"], reduced))
    return sources


def casadi_variant(key, label, source, casadi_name, c_dir, settings, progress, name):
    """Generate and compile one CasADi build from ``source()`` (a derivation);
    a dict describing the outcome."""
    from .c_driver import compile_object
    from .common import say

    variant = {"key": key, "label": label, "name": casadi_name, "ok": False, "note": "",
               "status": "skipped", "code": {"bytes": None, "generate": None, "compile": None}}
    if not settings.casadi:
        variant["note"] = "CasADi skipped (--no-casadi)"
        return variant
    if not casadi_available():
        variant["note"] = "CasADi not installed (pip install casadi): skipped"
        return variant
    say(progress, f"{name}: {label}: deriving")
    derivation = source()
    say(progress, f"{name}: {label}: building the mathematics in SX and generating C")
    status, info = generate_casadi(derivation, casadi_name, c_dir, settings.casadi_limit)
    if status == "timeout":
        variant["status"] = "timeout"
        variant["note"] = f"{label}: code generation did not finish within {settings.casadi_limit:g} s"
        return variant
    if status != "ok":
        variant["status"] = "error"
        variant["note"] = f"{label} failed: {info}"
        return variant
    files = [c_dir / f"{casadi_name}.c", c_dir / f"{casadi_name}.h"]
    variant["code"] = {"bytes": sum(f.stat().st_size for f in files),
                       "generate": info["build"] + info["generate"],
                       "instructions": info["instructions"], "compile": None}
    say(progress, f"{name}: {label}: compiling {variant['code']['bytes']:,} bytes of C")
    try:
        seconds, _ = compile_object(c_dir / f"{casadi_name}.c", c_dir, settings.casadi_limit)
    except RuntimeError as error:
        variant["status"] = "error"
        variant["note"] = f"{label}: its C did not compile: {error}"
        return variant
    if seconds is None:
        variant["status"] = "timeout"
        variant["note"] = (f"{label}: its C ({variant['code']['bytes']:,} bytes) did not compile "
                           f"within {settings.casadi_limit:g} s: not timed")
        return variant
    variant["code"]["compile"] = seconds
    variant.update(ok=True, status="ok")
    return variant
