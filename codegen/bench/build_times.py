"""Build times of large models, cold, stage by stage; and a large user model's
cached build found without forming its equations.

    python -m codegen.bench.build_times                   # the four models below
    python -m codegen.bench.build_times --models cart_chain:32:closed fourbar:32
    python -m codegen.bench.build_times --user-file       # the n = 32 closed chain as a user file

Each model is built in a fresh Python process into a fresh output directory
(nothing of the model cached, SymPy's caches empty), as ``python -m codegen
build`` would build it, and the seconds of each stage are printed. The
Python kernel (the same for every model: codegen.compile.KernelObject) is
made first, timed on its own line, and each output directory gets a copy:
a model's first build where others were built before.

* ``sympy``: forming the equations in the model's own code (the
  KanesMethod or LagrangesMethod, its equations: SymPy's part, through
  :mod:`codegen.eom` where the model uses it);
* ``Model()``: codegen's model stage (checks, the multiplier form's
  unconstrained equations);
* ``lookup`` (the equations' fingerprint), ``derivation``, ``CSE``,
  ``emission``, ``kernel`` (what is left of making the Python kernel, the
  same for every model, after the emission: it runs meanwhile; 0 where the
  output directory has it), ``compile``;
* ``ours``: the sum of the stages codegen runs (Model() to compile), and
  ``total``: everything.

Times depend on the load of the machine: the load average (``uptime``) is
printed before and after. The targets of the issue ("The flexible double
pendulum, and large models that build and reload fast"): each model cold in
under 20 s, of which under 10 s ours.

``--user-file`` writes the 32-link closed chain on a cart as a user's model
file (``chain_model.py``, importing a local ``chain_helper.py``, formed with
SymPy's own ``kane.kanes_equations``) and runs ``python -m codegen build
chain_model.py:make_system`` as a user would: cold, then cached (the whole
command timed: the target is under a second), then after editing the helper
and after editing the model file (each forms the equations again).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

DEFAULT_MODELS = ("cart_chain:32", "cart_chain:32:closed", "fourbar:32", "flexible_pendulum:10")
STAGES = ("sympy", "Model()", "lookup", "derivation", "CSE", "emission", "kernel", "compile")
TARGET_TOTAL, TARGET_OURS = 20.0, 10.0

# run in a fresh process: form the model (Model() timed apart), build it cold
_COLD_BUILD = textwrap.dedent('''
    import json, sys, time
    import codegen.model as model_stage
    from codegen.models import builtin_module
    from codegen.pipeline import build_artifact

    name, args, closed, output_dir = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
    inside = {"Model()": 0.0}
    original = model_stage.Model.__init__

    def timed(self, *a, **k):
        started = time.perf_counter()
        original(self, *a, **k)
        inside["Model()"] += time.perf_counter() - started

    model_stage.Model.__init__ = timed
    started = time.perf_counter()
    options = {"closed": True} if closed else {}
    model = builtin_module(name).make_model(*args, **options)
    formed = time.perf_counter() - started
    artifact = build_artifact(model, output_dir, force=True)
    stages = {"sympy": formed - inside["Model()"], "Model()": inside["Model()"]}
    stages["lookup"] = artifact.timings.get("cache lookup", 0.0)
    for stage in ("derivation", "CSE", "emission", "kernel", "compile"):
        stages[stage] = artifact.timings.get(stage, 0.0)
    print(json.dumps({"name": model.name, "stages": stages, "nq": model.n, "nu": model.o,
                      "operations": artifact.record["operation_count"]}))
''')


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load average: " + ", ".join(f"{v:.2f}" for v in os.getloadavg())


def _cold_environment():
    """A build's environment here: quiet (CI), no compile cache (its stages
    are the ones timed)."""
    from codegen.compile import COMPILE_CACHE_ENV
    return {key: value for key, value in dict(os.environ, CI="true").items() if key != COMPILE_CACHE_ENV}


def make_kernel(work):
    """Make the Python kernel (the same for every model) in an output
    directory of its own; returns (its store, seconds)."""
    from codegen.compile import KERNELS
    from codegen.pipeline import start_kernel

    from .build import cold

    output_dir = Path(tempfile.mkdtemp(prefix="kernel-", dir=work))
    started = time.perf_counter()
    with cold():
        start_kernel(output_dir).finish(os.devnull)
    return output_dir / ".builds" / KERNELS, time.perf_counter() - started


def cold_build(spec, work, kernels=None):
    """``{"name", "stages", ...}`` of a cold build of ``name:size[:closed]``,
    into a fresh output directory (holding a copy of ``kernels``, the store
    of compiled Python kernels, if given: a model's first build in an output
    directory that has built others)."""
    name, _, rest = spec.partition(":")
    size, _, closed = rest.partition(":")
    args = [int(size)] if size else []
    output_dir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work))
    if kernels is not None:
        shutil.copytree(kernels, output_dir / ".builds" / kernels.name)
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", _COLD_BUILD, name, json.dumps(args),
                             "1" if closed == "closed" else "0", str(output_dir)],
                            capture_output=True, text=True, env=_cold_environment())
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"building {spec} failed:\n{result.stderr}")
    facts = json.loads(result.stdout.strip().splitlines()[-1])
    facts["wall"] = wall
    return facts


def print_table(rows):
    header = f"{'model':<22}{'n':>4}" + "".join(f"{s:>11}" for s in STAGES) + f"{'ours':>8}{'total':>8}"
    print(header)
    for row in rows:
        stages = row["stages"]
        ours = sum(stages[s] for s in STAGES if s != "sympy")
        total = sum(stages.values())
        verdict = "PASS" if total < TARGET_TOTAL and ours < TARGET_OURS else "MISS"
        print(f"{row['name']:<22}{row['nq']:>4}" + "".join(f"{stages[s]:>11.2f}" for s in STAGES)
              + f"{ours:>8.2f}{total:>8.2f}  {verdict} (targets: total < {TARGET_TOTAL:g} s, "
              f"ours < {TARGET_OURS:g} s; {row['operations']} operations)")


# -- the 32-link closed chain as a user's model file -------------------------------------------

USER_MODEL = textwrap.dedent('''
    """A user's model: the n-link pendulum on a cart closed into a loop, formed
    with SymPy's own kanes_equations; the sizes and parameters come from a local
    module."""
    import sympy as sm
    import sympy.physics.mechanics as me
    from codegen import Model
    from chain_helper import LINKS, PARAMETERS


    def make_system():
        n = LINKS
        x = me.dynamicsymbols("x")
        angles = list(me.dynamicsymbols(f"theta1:{n + 1}"))
        v = me.dynamicsymbols("v")
        rates = list(me.dynamicsymbols(f"omega1:{n + 1}"))
        F = me.dynamicsymbols("F")
        mc, m, l, g, x0 = sm.symbols("mc m l g x0")
        N = me.ReferenceFrame("N")
        origin = me.Point("O")
        origin.set_vel(N, 0)
        cart = origin.locatenew("cart", x * N.x)
        cart.set_vel(N, v * N.x)
        bodies = [me.Particle("cart", cart, mc)]
        loads = [(cart, F * N.x), (cart, mc * g * N.y)]
        joint = cart
        for k in range(n):
            frame = N.orientnew(f"L{k + 1}", "Axis", [angles[k], N.z])
            frame.set_ang_vel(N, rates[k] * N.z)
            centre = joint.locatenew(f"G{k + 1}", l / 2 * frame.y)
            centre.v2pt_theory(joint, N, frame)
            tip = joint.locatenew(f"P{k + 1}", l * frame.y)
            tip.v2pt_theory(joint, N, frame)
            bodies.append(me.RigidBody(f"link{k + 1}", centre, frame, m,
                                       (me.inertia(frame, 0, 0, m * l**2 / 12), centre)))
            loads.append((centre, m * g * N.y))
            joint = tip
        q, u = [x] + angles, [v] + rates
        kane = me.KanesMethod(N, q_ind=q[:-1], u_ind=u[:-1],
                              kd_eqs=[qi.diff() - ui for qi, ui in zip(q, u)],
                              q_dependent=q[-1:], u_dependent=u[-1:],
                              configuration_constraints=[joint.pos_from(origin).dot(N.x) - x0],
                              velocity_constraints=[joint.vel(N).dot(N.x)])
        kane.kanes_equations(bodies, loads)
        symbols = {"mc": mc, "m": m, "l": l, "g": g, "x0": x0}
        return Model(kane, parameters={symbols[k]: value for k, value in PARAMETERS.items()},
                     inputs=[F], name=f"user_chain{n}")
''')

USER_HELPER = 'LINKS = 32\nPARAMETERS = {"mc": 1.0, "m": 0.5, "l": 0.4, "g": 9.81, "x0": 0.0}\n'


def user_file_report(work):
    folder = Path(work) / "user_model"
    folder.mkdir()
    (folder / "chain_model.py").write_text(USER_MODEL)
    (folder / "chain_helper.py").write_text(USER_HELPER)
    output_dir = Path(work) / "user_out"
    spec = f"{folder / 'chain_model.py'}:make_system"

    def run(label):
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "codegen", "build", spec, "--output-dir",
                                 str(output_dir)], capture_output=True, text=True,
                                cwd=folder, env=_cold_environment())
        wall = time.perf_counter() - started
        if result.returncode != 0:
            raise RuntimeError(f"{label} failed:\n{result.stderr}")
        timings = result.stdout.split("timings:")[1].split("output:")[0]
        formed = float(timings.split("equations of motion")[1].split()[0])
        compiled = "compile" in timings
        print(f"  {label:<44} {wall:7.2f} s   equations formed: {'yes' if formed else 'no ':<4}"
              f"({formed:.2f} s)   compiled: {'yes' if compiled else 'no'}")
        return wall

    print(f"user model {spec} (32-link closed chain, SymPy's kanes_equations):")
    run("cold")
    cached = [run(f"cached, unchanged (run {i + 1})") for i in range(3)]
    (folder / "chain_helper.py").write_text(USER_HELPER.replace('"g": 9.81', '"g": 9.80'))
    run("after editing chain_helper.py (g)")
    run("cached again")
    (folder / "chain_model.py").write_text(USER_MODEL.replace("m * l**2 / 12", "m * l**2 / 12.5"))
    run("after editing chain_model.py (inertia)")
    run("cached again")
    print(f"  cached build of the user model: best {min(cached):.2f} s, worst {max(cached):.2f} s "
          f"({'PASS' if max(cached) < 1.0 else 'MISS'}: target under a second)")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m codegen.bench.build_times",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=list(DEFAULT_MODELS),
                        help="built-in models as name:size[:closed] (default: %(default)s)")
    parser.add_argument("--user-file", action="store_true",
                        help="only the cached build of the 32-link chain as a user's model file")
    parser.add_argument("--work", help="keep the builds in this folder (default: a temporary one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="build_times-") as temporary:
        work = args.work or temporary
        Path(work).mkdir(parents=True, exist_ok=True)
        print(uptime())
        if args.user_file:
            user_file_report(work)
        else:
            kernels, seconds = make_kernel(work)
            print(f"  the Python kernel (the same for every model; made once per output directory, "
                  f"while the first model's equations are formed): {seconds:.2f} s", flush=True)
            rows = []
            for spec in args.models:
                rows.append(cold_build(spec, work, kernels))
                print(f"  built {spec}: {uptime()}", flush=True)
            print_table(rows)
        print(uptime())
    return 0


if __name__ == "__main__":
    sys.exit(main())
