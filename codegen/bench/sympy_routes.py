"""SymPy's routes to A and B, each timed in a subprocess with a time limit.

The routes come from :mod:`codegen.reference` (shared with the tests), used as
users would: ``kane.to_linearizer()`` without the tests' fix of its double
counting of rheonomic terms (the table marks a disagreement with ours by "!").
They receive qd* and ud* (from our ``state_derivative``) with each point for
free. Parent and child talk through pickled messages: the parent writes one
job ``dict(spec, route, points, settings)`` to the child's stdin; the child
forms the model again and writes, as they come,

``("ready",)``                    the model is formed: the time limit starts;
``("setup", label, seconds)``     something paid once;
``("check", A, B)``               A, B at the first point;
``("times", [seconds, ...])``     per-point times so far;
``("done",)`` or ``("error", text)``.
"""

from __future__ import annotations

import os
import pickle
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from .common import kill_group, min_median
from .report import Row


def _rates(point):
    return point["qd"], point["ud"]


def _linearization_args(point):
    return (point["t"], point["q"], point["u"], point["qd"], point["ud"], point["r"], point["p"])


def _timed_calls(function, points, repeats, seconds):
    """Per-call seconds of ``function(point)`` cycling through points (repeats)."""
    def loop(number):
        started = time.perf_counter()
        for k in range(number):
            function(points[k % len(points)])
        return time.perf_counter() - started

    number = 1
    while True:
        elapsed = loop(number)
        if elapsed >= seconds or number >= 1 << 20:
            break
        number *= 2
    return [elapsed / number] + [loop(number) / number for _ in range(repeats - 1)]


def _check_and_time(send, evaluate, points, settings):
    A, B = evaluate(points[0])
    send(("check", A, B))
    send(("times", _timed_calls(evaluate, points, settings.lambdified_repeats,
                                settings.lambdified_repeat_seconds)))


def _route_linearizer(send, ref, points, settings):
    """SymPy's Linearizer at fully numeric operating points."""
    started = time.perf_counter()
    ref.linearizer(fix_double_count=False)
    send(("setup", "to_linearizer", time.perf_counter() - started))

    def evaluate(point):
        return ref.linearizer_AB(point["q"], point["u"], point["r"], point["p"], point["t"],
                                 fix_double_count=False, rates=_rates(point))

    started = time.perf_counter()
    A, B = evaluate(points[0])
    send(("setup", "first call (incl. Linearizer setup)", time.perf_counter() - started))
    send(("check", A, B))
    samples = []
    for i in range(settings.linearizer_repeats):
        started = time.perf_counter()
        evaluate(points[1 + i % (len(points) - 1)])
        samples.append(time.perf_counter() - started)
        send(("times", list(samples)))


def _route_symbolic_AB(send, ref, points, settings):
    """Symbolic A, B once (``linearize(A_and_B=True)``), lambdified."""
    started = time.perf_counter()
    A, B = ref.linearizer(fix_double_count=False).linearize(A_and_B=True)
    send(("setup", "symbolic linearize(A_and_B=True)", time.perf_counter() - started))
    started = time.perf_counter()
    function = ref.lambdified_AB(A, B)
    send(("setup", "lambdify (cse=True)", time.perf_counter() - started))
    _check_and_time(send, lambda point: function(*_linearization_args(point)), points, settings)


def _route_symbolic_MAB(send, ref, points, settings):
    """Symbolic M, A, B once (``linearize(A_and_B=False)``, no solve),
    lambdified, then ``numpy.linalg.solve`` per point."""
    started = time.perf_counter()
    lin = ref.linearizer(fix_double_count=False)
    M, A, B = lin.linearize(A_and_B=False)
    send(("setup", "symbolic linearize(A_and_B=False)", time.perf_counter() - started))
    started = time.perf_counter()
    function = ref.lambdified_MAB(lin, M, A, B)
    send(("setup", "lambdify (cse=True)", time.perf_counter() - started))
    _check_and_time(send, lambda point: function(*_linearization_args(point)), points, settings)


def _route_finite_differences(send, ref, points, settings):
    """Constrained central differences on the lambdified KanesMethod right-hand side."""
    started = time.perf_counter()
    ref.equations()
    send(("setup", "mass_matrix_full, forcing_full", time.perf_counter() - started))
    started = time.perf_counter()
    ref.functions()
    send(("setup", "lambdify (cse=True)", time.perf_counter() - started))

    def evaluate(point):
        return ref.constrained_fd_AB(point["q"], point["u"], point["r"], point["p"], point["t"],
                                     h=1e-6, richardson=False)

    _check_and_time(send, evaluate, points, settings)


SYMPY_ROUTES = {
    "linearizer": ("SymPy Linearizer, numeric op point", _route_linearizer),
    "symbolic_AB": ("SymPy symbolic A, B + lambdify", _route_symbolic_AB),
    "symbolic_MAB": ("SymPy symbolic M, A, B + lambdify + solve", _route_symbolic_MAB),
    "finite_differences": ("constrained central FD, lambdified RHS", _route_finite_differences),
}


def route_main():
    """Entry point of a route's subprocess (see the module docstring)."""
    from ..reference import KaneReference
    from .build import form_model

    job = pickle.load(sys.stdin.buffer)
    channel = sys.stdout.buffer
    sys.stdout = sys.stderr        # stray prints must not corrupt the messages

    def send(message):
        pickle.dump(message, channel)
        channel.flush()

    try:
        model, _, _ = form_model(job["spec"])
        reference = KaneReference.from_model(model)
        send(("ready",))
        SYMPY_ROUTES[job["route"]][1](send, reference, job["points"], job["settings"])
        send(("done",))
    except BaseException as error:  # report to the parent, which prints it
        send(("error", f"{type(error).__name__}: {error}"))


def _child_environment():
    """The environment of a route's subprocess: codegen importable as here."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _start(spec, route, points, settings):
    """The route's subprocess, its stderr log, and a queue of its messages."""
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(
        [sys.executable, "-c", "from codegen.bench.sympy_routes import route_main; route_main()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=_child_environment(),
        start_new_session=True)
    messages = queue.Queue()

    def reader():
        while True:
            try:
                messages.put(pickle.load(process.stdout))
            except Exception:  # EOF or a broken frame: the child is gone
                messages.put(("eof",))
                return

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    process.stdin.write(pickle.dumps(dict(spec=str(spec), route=route, points=points,
                                          settings=settings)))
    process.stdin.close()
    return process, log, messages, thread


def _died(process, log):
    process.wait()
    log.seek(0)
    tail = log.read().decode(errors="replace").strip().splitlines()[-3:]
    return (f"the route's process died (exit code {process.returncode})"
            + (": " + " | ".join(tail) if tail else ""))


def run_sympy_route(spec, route, points, settings, ready_timeout=600.0):
    """Run one SymPy route in a subprocess; the time limit starts once the child
    has formed the model. Returns (Row, A, B) with A, B at points[0] or None."""
    row = Row(route, SYMPY_ROUTES[route][0])
    process, log, messages, thread = _start(spec, route, points, settings)
    A = B = None
    deadline = None
    ready_by = time.monotonic() + ready_timeout
    times = []
    try:
        while True:
            wait = (deadline if deadline is not None else ready_by) - time.monotonic()
            try:
                message = messages.get(timeout=max(wait, 0.0)) if wait > 0 else None
            except queue.Empty:
                message = None
            if message is None:
                row.status = "timeout"
                row.note = (f"> {settings.sympy_limit:g} s limit" if deadline is not None
                            else "the model was not formed in time")
                break
            kind = message[0]
            if kind == "ready":
                deadline = time.monotonic() + settings.sympy_limit
            elif kind == "setup":
                row.setup[message[1]] = message[2]
            elif kind == "check":
                A, B = message[1], message[2]
            elif kind == "times":
                times = message[1]
            elif kind in ("error", "eof"):
                row.status = "error"
                row.note = message[1] if kind == "error" else _died(process, log)
                break
            elif kind == "done":
                break
    finally:
        if process.poll() is None:
            kill_group(process)
        process.wait()
        thread.join(5)
        process.stdout.close()
        log.close()
    if times:
        row.min, row.median = min_median(times)
        row.samples = len(times)
        if row.status == "timeout":
            row.note += f" (after {len(times)} timed point(s))"
    if A is not None and not (np.all(np.isfinite(A)) and np.all(np.isfinite(B))):
        row.note = (row.note + "; " if row.note else "") + "A or B holds NaN/Inf"
    return row, A, B
