"""Generated models pickle by reference to their build, for worker processes.

A pickle holds where the build is (its key link and directory), its key and
its model's fingerprint, never the compiled bytes; unpickling imports the
build in that process (:func:`_package_from_build`). A generated package
(``generated/<name>``) becomes a :class:`GeneratedPackage` when its model is
made, so that it pickles the same way.
"""

from __future__ import annotations

import pickle
import sys
import types

from . import kernel



class GeneratedPackage(types.ModuleType):
    """The type of a generated package (``generated/<name>``): a module that
    pickles by reference to its build, like its model."""

    def __reduce__(self):
        from .compiled import CompiledModel

        model = vars(self).get("_model") or vars(self).get("model")
        if not isinstance(model, CompiledModel):
            raise pickle.PicklingError(f"generated package {self.__name__} is not fully imported")
        return (_package_from_build, (build_reference(model),))


def build_reference(model):
    """Where a model's build is: a dict of its name, key, fingerprint, key
    link (``.builds/<name>-<key>``, survives a forced rebuild of the same key)
    and build directory, for :func:`_package_from_build`."""
    from pathlib import Path

    from ..compile import read_record

    kernel_file = kernel.module_file(model._kernel)
    record = None
    if kernel_file is not None:
        build_dir = Path(kernel_file).resolve().parent
        record = read_record(build_dir)
    if record is None:
        raise pickle.PicklingError(f"{model.name}: cannot pickle this model: its kernel is not "
                                   "a codegen build on disk (no build.json beside it)")
    key_link = build_dir.parent / f"{record['name']}-{record['key']}"
    return {"name": record["name"], "key": record["key"],
            "fingerprint": record.get("fingerprint"),
            "key_link": str(key_link), "build_dir": str(build_dir)}


def _package_from_build(reference):
    """The generated package of a pickled reference (see
    :func:`build_reference`), imported in this process.

    Looks, in order, at the build's key link and directory as they were where
    it was pickled (a shared file system), at ``.builds/<name>-<key>`` of this
    process's output directory (``$CODEGEN_OUTPUT_DIR`` or ``generated/``:
    a shipped build, or one built here from the same model with the same
    compiler), and at ``<output dir>/<name>`` if it is a build of the same
    model (same fingerprint: built here by another compiler or codegen).
    Raises BuildError saying how to make the build available otherwise."""
    import socket
    from pathlib import Path

    from ..compile import read_record, resolve_output_dir
    from ..errors import BuildError
    from ..load import load_package

    name, key, fingerprint = reference["name"], reference["key"], reference.get("fingerprint")
    output_dir = resolve_output_dir()
    candidates = [(Path(reference["key_link"]), True), (Path(reference["build_dir"]), True),
                  (output_dir / ".builds" / f"{name}-{key}", True), (output_dir / name, False)]
    for directory, same_key in candidates:
        record = read_record(directory)
        if record is None or record.get("name") != name:
            continue
        if record.get("key") == key or (not same_key and fingerprint is not None
                                         and record.get("fingerprint") == fingerprint):
            return load_package(directory)
    raise BuildError(
        f"cannot load the generated model {name!r} (build {key}) in this process on "
        f"{socket.gethostname()}: {reference['key_link']} does not exist here, nor a build of "
        f"it in {output_dir}. A pickled generated model refers to its build on disk, not to "
        "its bytes, so every process that unpickles it needs the build: share the output "
        "directory at the same path; or build on the workers from the model (e.g. with "
        "dask.distributed: client.run(lambda: codegen.build(make_model())), which builds into "
        "$CODEGEN_OUTPUT_DIR or generated/ there); or ship the build: copy the output "
        "directory (generated/, with its links: rsync -a or tar) to the workers and set "
        "CODEGEN_OUTPUT_DIR to where it lands")


def _model_from_build(reference):
    """The CompiledModel of a pickled reference (see :func:`_package_from_build`)."""
    return _package_from_build(reference).model


def extend_package(model):
    """Make the generated package that is creating ``model`` picklable. The
    package is the one whose ``_kernel`` is the model's kernel, still being
    imported. (The model's other methods reach the package through its
    module ``__getattr__``; a package of an older template is refused by
    :func:`kernel.missing_function` before this.)"""
    package = sys.modules.get(kernel.module_name(model._kernel).rpartition(".")[0])
    if package is None or getattr(package, "_kernel", None) is not model._kernel:
        return
    if type(package) is types.ModuleType:
        package.__class__ = GeneratedPackage
