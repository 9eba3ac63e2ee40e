"""Export a built model as a self-contained C folder for embedding.

The folder holds ``<name>.c``, ``<name>.h`` (and ``<name>_lanes.c``, the
lane code of the batches, where the model has it), a ``Makefile`` and a
``CMakeLists.txt`` (both build a static library with only a C compiler and
libm) and an example ``main.c`` that linearizes at a consistent operating point
and prints A and B.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from . import __version__
from .emit import environment
from .errors import BuildError

C_FILES = ("{name}.c", "{name}.h", "Makefile", "CMakeLists.txt")
# the lane code of the batches, where the model has it
OPTIONAL_C_FILES = ("{name}_lanes.c",)


def export_c(package_dir, destination, name, point_label, t, q, u, r):
    """Copy the C side of the build in ``package_dir`` to ``destination`` and
    write ``main.c`` for the operating point (t, q, u, r)."""
    destination = Path(destination)
    text = environment().get_template("example_main.c.jinja").render(
        name=name, NAME=name.upper(), version=__version__, point_label=point_label,
        t=repr(float(t)), q=[repr(float(v)) for v in q], u=[repr(float(v)) for v in u],
        r=[repr(float(v)) for v in (r if r is not None else [])])
    try:
        destination.mkdir(parents=True, exist_ok=True)
        for pattern in C_FILES + OPTIONAL_C_FILES:
            file_name = pattern.format(name=name)
            if pattern in OPTIONAL_C_FILES and not (Path(package_dir) / file_name).exists():
                continue
            shutil.copyfile(Path(package_dir) / file_name, destination / file_name)
        (destination / "main.c").write_text(text)
    except OSError as error:
        # e.g. a read-only place, or a path through a regular file
        raise BuildError(f"cannot export {name} to {destination}: "
                         f"{error.strerror or error}" + (f" ({error.filename})" if error.filename else "")
                         + "; choose a writable directory with --dir") from error
    return sorted(p.name for p in destination.iterdir())
