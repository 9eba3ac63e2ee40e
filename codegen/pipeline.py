"""The pipeline end to end: model -> derive -> emit -> build -> load.

Each stage is its own module; this one only runs them in order, times them,
and consults the build cache first.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections import namedtuple
from pathlib import Path

import numpy as np

from .compile import WrapperTranslation, cache_key, compile_package, default_output_dir, install_cached
from .derive import derive
from .emit import emit, emit_wrapper, generator_fingerprint
from .errors import ModelError
from .load import load_package
from .model import Model

OperatingPoint = namedtuple("OperatingPoint", "q u r p t")


def terminal_progress(prefix=""):
    """A progress callback printing to a terminal; None in CI or when piped."""
    if os.environ.get("CI") or not sys.stderr.isatty():
        return None
    started = time.perf_counter()

    def say(message):
        print(f"  [{time.perf_counter() - started:6.1f} s] {prefix}{message}", file=sys.stderr, flush=True)
    return say


def build_artifact(model, output_dir=None, force=False, progress=None):
    """Derive, emit and compile ``model`` unless a cached build exists.

    Returns a :class:`codegen.compile.BuiltArtifact` whose ``timings`` holds the
    seconds spent in each stage of this call.
    """
    if not isinstance(model, Model):
        raise ModelError(f"expected a codegen.Model, got {type(model).__name__}")
    output_dir = Path(output_dir) if output_dir is not None else default_output_dir()
    timings = {}
    started = time.perf_counter()
    key = cache_key(model.fingerprint(), generator_fingerprint())
    timings["cache lookup"] = time.perf_counter() - started
    if not force:
        artifact = install_cached(output_dir, model.name, key)
        if artifact is not None:
            artifact.timings = timings
            return artifact

    started = time.perf_counter()
    derivation = derive(model, progress)
    timings["derivation"] = time.perf_counter() - started

    wrapper = WrapperTranslation(derivation.name, emit_wrapper(derivation), output_dir)
    try:
        sources = emit(derivation, progress)
    except BaseException:
        wrapper.cancel()
        raise
    timings.update(sources.timings)

    artifact = compile_package(sources, output_dir, key, progress, replace=force,
                               extra_record={"sizes": derivation.sizes}, wrapper=wrapper)
    timings.update(artifact.timings)
    artifact.timings = timings
    return artifact


def build_builtin(name, output_dir=None, force=False, progress=None):
    """Build the built-in model ``name``; returns ``(artifact, seconds spent
    forming its equations)``.

    A built-in model is fully determined by its source file, so a cached build
    is found from that file's hash (with the generator's and the compiler's)
    without forming the equations: a cached rebuild of the bicycle takes a
    fraction of a second instead of the seconds SymPy needs for its equations.
    """
    from .models import builtin_module

    module = builtin_module(name)
    output_dir = Path(output_dir) if output_dir is not None else default_output_dir()
    started = time.perf_counter()
    recipe = cache_key(Path(module.__file__).read_bytes().decode(), generator_fingerprint())
    index = output_dir / ".builds" / f"{name}.recipe-{recipe}"
    if not force and index.exists():
        model_name, _, key = index.read_text().strip().partition(" ")
        artifact = install_cached(output_dir, model_name, key)
        if artifact is not None:
            artifact.timings = {"cache lookup": time.perf_counter() - started}
            return artifact, 0.0
    started = time.perf_counter()
    model = module.make_model()
    formed = time.perf_counter() - started
    artifact = build_artifact(model, output_dir, force, progress)
    tmp = index.with_name(f".{index.name}.{os.getpid()}")
    tmp.write_text(f"{model.name} {artifact.record['key']}\n")
    os.replace(tmp, index)
    return artifact, formed


def build(model, output_dir=None, force=False, progress=None):
    """The whole pipeline: returns the imported generated module."""
    artifact = build_artifact(model, output_dir, force, progress)
    module = load_package(artifact.package_dir)
    return module


def load_model_file(spec):
    """The Model returned by ``function`` in ``path/to/file.py:function``."""
    path, _, function = str(spec).rpartition(":")
    if not path or not function:
        raise ModelError(f"expected path/to/file.py:function, got {spec!r}")
    path = Path(path)
    if not path.exists():
        raise ModelError(f"model file {path} does not exist")
    module_name = f"codegen_user_model_{abs(hash(str(path.resolve())))}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    try:
        make = getattr(module, function)
    except AttributeError:
        raise ModelError(f"{path} has no function {function!r}") from None
    model = make()
    if not isinstance(model, Model):
        raise ModelError(f"{spec} returned {type(model).__name__}, expected codegen.Model")
    return model


def operating_point(model_name, point_name, parameters=None, t=0.0, **kwargs):
    """A consistent operating point of a built-in model.

    ``parameters`` maps parameter names to values that replace the defaults.
    Returns ``OperatingPoint(q, u, r, p, t)``, so ``module.linearize(*op)`` works.
    """
    from .models import builtin_module

    module = builtin_module(model_name)
    try:
        maker = module.OPERATING_POINTS[point_name]
    except KeyError:
        raise KeyError(f"model {model_name!r} has no operating point {point_name!r}; "
                       f"it has: {', '.join(module.OPERATING_POINTS)}") from None
    values = dict(module.DEFAULT_PARAMETERS)
    for key, value in (parameters or {}).items():
        if key not in values:
            raise KeyError(f"model {model_name!r} has no parameter {key!r}; "
                           f"parameters: {', '.join(values)}")
        values[key] = float(value)
    point = maker(values, **kwargs)
    q, u = point[0], point[1]
    r = point[2] if len(point) > 2 else []
    return OperatingPoint(np.array(q, dtype=float), np.array(u, dtype=float),
                          np.array(r, dtype=float), np.array(list(values.values()), dtype=float),
                          float(t))
