"""Stage 5 of the pipeline: import a built package.

A build is imported from its own directory under a module name unique to the
build (``codegen_build_<name>_<key>``), so builds of models that share a name
but live in different output directories, or a rebuilt model in a running
process, never collide. A build of a key already imported in this process
returns that module while the build it came from is still on disk (the same
key: the same code); once that build is gone (a forced rebuild replaced it,
its folder was removed, or its build.json), the new build is imported beside
it under a name of its own (``..._<hash of its folder>``), so that what reads
the files beside a module (pickling, the build record) finds them. ``import generated.disk`` is the same
code reached through the ``generated/disk`` link; it needs the directory that
holds ``generated/`` on ``sys.path``, while ``codegen.load("disk")`` works from
any directory.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

from .compile import BUILD_RECORD, build_problem, read_record, resolve_output_dir
from .errors import BuildError

# A concurrent forced rebuild may remove the build a link led to between
# resolving the link and importing from it; the link then leads to the new one.
_ATTEMPTS = 3


def _import_build(package_dir):
    record = read_record(package_dir)
    if record is None:
        raise BuildError(f"{package_dir} is not a finished build (no readable {BUILD_RECORD})")
    module_name = f"codegen_build_{record['name']}_{record['key']}"
    loaded = sys.modules.get(module_name)
    if loaded is not None:
        home = _home(loaded)
        if home == package_dir or (home is not None and read_record(home) is not None):
            return loaded
        module_name += "_" + hashlib.sha1(str(package_dir).encode()).hexdigest()[:12]
        if module_name in sys.modules:
            return sys.modules[module_name]
    _refuse_damaged(package_dir, record)
    spec = importlib.util.spec_from_file_location(
        module_name, package_dir / "__init__.py", submodule_search_locations=[str(package_dir)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except ImportError as error:
        del sys.modules[module_name]
        # a damaged build (a file altered since) says so, and how to rebuild
        # it; a binary that is intact but does not load, why
        problem = build_problem(package_dir, record)
        raise _unusable(package_dir, record, f"damaged ({problem})" if problem
                        else f"not importable here ({error})") from error
    except BaseException:
        del sys.modules[module_name]
        raise
    module.build_record = record
    return module


def _home(module):
    """The folder a module was imported from (resolved), or None."""
    file = getattr(module, "__file__", None)
    return Path(file).resolve().parent if file else None


def _unusable(package_dir, record, what):
    name = record["name"]
    return BuildError(
        f"the build of {name!r} in {package_dir} is {what}: rebuild it with python -m codegen "
        f"build {name} --force (a user model: python -m codegen build path/to/file.py:function "
        "--force, or codegen.build(model, force=True))")


def _refuse_damaged(package_dir, record):
    """A file of the build missing or of another size than when it was built
    (a truncated shared library would crash the process when loaded, SIGBUS)
    is refused before the import; the sizes only, no hashing on every load."""
    for file_name, facts in (record.get("files") or {}).items():
        try:
            size = (Path(package_dir) / file_name).stat().st_size
        except OSError:
            raise _unusable(package_dir, record, f"damaged ({file_name} is missing)") from None
        if size != facts.get("size"):
            raise _unusable(package_dir, record, f"damaged ({file_name} has {size} bytes, "
                            f"{facts.get('size')} when built)")


def load_package(package_dir):
    """Import the generated package in ``package_dir`` (a finished build, or a
    link to one such as ``generated/disk`` or ``.builds/disk-<key>``)."""
    package_dir = Path(package_dir).absolute()
    for attempt in range(_ATTEMPTS):
        target = package_dir.resolve()
        try:
            return _import_build(target)
        except (OSError, ImportError, BuildError):
            if attempt == _ATTEMPTS - 1 or package_dir.resolve() == target:
                raise


def load(name, output_dir=None):
    """Import the model ``name`` last built into ``output_dir`` (default ``generated/``)."""
    output_dir = resolve_output_dir(output_dir)
    link = output_dir / name
    if not link.exists():
        raise BuildError(f"no built model {name!r} in {output_dir}; run: python -m codegen build {name}"
                         + (f" --output-dir {output_dir}" if output_dir != resolve_output_dir() else ""))
    return load_package(link)
