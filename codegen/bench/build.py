"""The model under test and a fresh build of it, through the public pipeline."""

from __future__ import annotations

import os
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

from ..compile import COMPILE_CACHE_ENV


@contextmanager
def cold(**environment):
    """These environment variables set, and no compile cache
    ($CODEGEN_COMPILE_CACHE): the stages a benchmark reports are the
    compiler's and Cython's own, not a copy's."""
    changes = {COMPILE_CACHE_ENV: None, **environment}
    saved = {key: os.environ.get(key) for key in changes}
    for key, value in changes.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def form_model(spec):
    """``(model, model_module, seconds)``: see :func:`codegen.pipeline.resolve_model`."""
    from ..pipeline import resolve_model

    return resolve_model(spec)


def forced_build(model, output_dir):
    """A fresh build (no cache, no compile cache) of ``model`` into
    ``output_dir``: ``(artifact, module, import_seconds)``."""
    from ..load import load_package
    from ..pipeline import build_artifact

    with cold():
        artifact = build_artifact(model, output_dir, force=True)
    started = time.perf_counter()
    module = load_package(artifact.package_dir)
    return artifact, module, time.perf_counter() - started


def derivation_of(model, artifact=None):
    """The derivation (blocks) of ``model``: the build's, if it kept one, else
    derived again (the CasADi routes start from it)."""
    kept = getattr(artifact, "derivation", None)
    if kept is not None:
        return kept
    from ..derive import derive
    return derive(model)


def copy_c_sources(artifact, name, c_dir):
    """Copy the build's ``name.c`` and ``name.h`` (and ``name_lanes.c``, the
    lane code, where there is one) into ``c_dir``; returns the bytes of the
    first two."""
    c_dir.mkdir(parents=True, exist_ok=True)
    for suffix in (".c", ".h", "_lanes.c"):
        source = Path(artifact.package_dir) / f"{name}{suffix}"
        if source.exists():
            shutil.copyfile(source, c_dir / f"{name}{suffix}")
    return sum((c_dir / f"{name}{suffix}").stat().st_size for suffix in (".c", ".h"))


def build_with(model, output_dir, **environment):
    """The model built (forced, without the compile cache) with these
    environment variables set for the build (e.g. CODEGEN_LANES="off":
    batches one point at a time, as before the lanes; CODEGEN_VECTOR_MATH="1"):
    the loaded module."""
    from ..load import load_package
    from ..pipeline import build_artifact

    with cold(**environment):
        artifact = build_artifact(model, output_dir, force=True)
    return load_package(artifact.package_dir)
