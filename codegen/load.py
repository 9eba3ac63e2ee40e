"""Stage 5 of the pipeline: import a built package.

A build is imported from its own directory under a module name unique to the
build (``codegen_build_<name>_<key>``), so builds of models that share a name
but live in different output directories, or a rebuilt model in a running
process, never collide. ``import generated.disk`` is the same code reached
through the ``generated/disk`` link.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from .compile import BUILD_RECORD, default_output_dir
from .errors import BuildError


def load_package(package_dir):
    """Import the generated package in ``package_dir`` (a finished build)."""
    package_dir = Path(package_dir).resolve()
    record_path = package_dir / BUILD_RECORD
    if not record_path.exists():
        raise BuildError(f"{package_dir} is not a finished build (no {BUILD_RECORD})")
    record = json.loads(record_path.read_text())
    module_name = f"codegen_build_{record['name']}_{record['key']}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(
        module_name, package_dir / "__init__.py", submodule_search_locations=[str(package_dir)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    module.build_record = record
    return module


def load(name, output_dir=None):
    """Import the model ``name`` last built into ``output_dir`` (default ``generated/``)."""
    output_dir = Path(output_dir) if output_dir is not None else default_output_dir()
    link = output_dir / name
    if not link.exists():
        raise BuildError(f"no built model {name!r} in {output_dir}; run: python -m codegen build {name}")
    return load_package(link.resolve())
