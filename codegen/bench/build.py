"""The model under test and a fresh build of it, through the public pipeline."""

from __future__ import annotations

import shutil
import time
from pathlib import Path


def form_model(spec):
    """``(model, model_module, seconds)``: see :func:`codegen.pipeline.resolve_model`."""
    from ..pipeline import resolve_model

    return resolve_model(spec)


def forced_build(model, output_dir):
    """A fresh build (no cache) of ``model`` into ``output_dir``:
    ``(artifact, module, import_seconds)``."""
    from ..load import load_package
    from ..pipeline import build_artifact

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
    """Copy the build's ``name.c`` and ``name.h`` into ``c_dir``; returns their bytes."""
    c_dir.mkdir(parents=True, exist_ok=True)
    for suffix in (".c", ".h"):
        shutil.copyfile(Path(artifact.package_dir) / f"{name}{suffix}", c_dir / f"{name}{suffix}")
    return sum((c_dir / f"{name}{suffix}").stat().st_size for suffix in (".c", ".h"))
