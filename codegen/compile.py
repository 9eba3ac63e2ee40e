"""Stage 4 of the pipeline: compile generated sources into an importable package.

Layout of an output directory (default: ``generated/`` of the source tree)::

    generated/
        __init__.py                 makes ``import generated.disk`` work
        disk -> .builds/disk-<key>  symbolic link, replaced atomically
        .builds/disk-<key>/         one finished build: disk.c, disk.h, _disk.pyx,
                                    __init__.py, the extension module, build.json

``<key>`` hashes the model's content, the generator's code and templates, the
compiler and the Python ABI. A build happens in a private temporary directory
and is renamed into ``.builds/`` only when complete, and the link is swapped
with one ``rename``: an interrupted build leaves no trace that could be
imported, and concurrent builds of the same model agree on the result.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import BuildError

BUILD_RECORD = "build.json"

# Flags of the model's own C: it must compile cleanly under these (see tests).
C_STANDARD_FLAGS = ["-std=c99", "-Wall", "-Wextra", "-pedantic"]
OPTIMIZATION_FLAGS = ["-O2"]
# The Cython wrapper (argument handling and the batch loops around the model's
# functions) compiles in 60% of the time at -O1, with no measurable difference
# per call; it is the longest step of a cold build otherwise.
WRAPPER_OPTIMIZATION_FLAGS = ["-O1"]


def default_output_dir():
    """``$CODEGEN_OUTPUT_DIR``, else ``generated/`` beside the ``codegen`` package."""
    env = os.environ.get("CODEGEN_OUTPUT_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent / "generated"


def compiler():
    return os.environ.get("CC") or sysconfig.get_config_var("CC").split()[0] or "cc"


def _compiler_identity():
    try:
        out = subprocess.run([compiler(), "--version"], capture_output=True, text=True, timeout=30)
        return out.stdout.splitlines()[0] if out.stdout else compiler()
    except (OSError, subprocess.SubprocessError):
        return compiler()


def cache_key(model_fingerprint, generator_fingerprint):
    h = hashlib.sha256()
    for part in (model_fingerprint, generator_fingerprint, _compiler_identity(),
                 " ".join(C_STANDARD_FLAGS + OPTIMIZATION_FLAGS + WRAPPER_OPTIMIZATION_FLAGS),
                 sysconfig.get_config_var("EXT_SUFFIX")):
        h.update(str(part).encode())
        h.update(b"\x00")
    return h.hexdigest()[:20]


@dataclass
class BuiltArtifact:
    """A finished build on disk."""

    name: str
    package_dir: Path       # the build's own directory (.builds/<name>-<key>)
    link: Path              # output_dir/<name>, pointing at package_dir
    cached: bool
    timings: dict           # stage -> seconds (this build; empty when cached)
    record: dict            # contents of build.json


def _ensure_output_dir(output_dir):
    output_dir.mkdir(parents=True, exist_ok=True)
    marker = output_dir / "__init__.py"
    if not marker.exists():
        _write_atomically(marker, '"""Models built by codegen (python -m codegen build NAME)."""\n')
    (output_dir / ".builds").mkdir(exist_ok=True)


def _write_atomically(path, text):
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def _link(output_dir, name, target):
    """Point output_dir/name at target with one atomic rename."""
    link = output_dir / name
    if link.exists() and not link.is_symlink():
        raise BuildError(f"{link} exists and is not a link made by codegen; move it away")
    tmp = output_dir / f".{name}.link-{os.getpid()}-{time.monotonic_ns()}"
    os.symlink(os.path.relpath(target, output_dir), tmp)
    os.replace(tmp, link)
    return link


def find_build(output_dir, name, key):
    package_dir = Path(output_dir) / ".builds" / f"{name}-{key}"
    record = package_dir / BUILD_RECORD
    if record.exists():
        return package_dir, json.loads(record.read_text())
    return None, None


def install_cached(output_dir, name, key):
    """The finished build for this key, linked as output_dir/name, or None."""
    output_dir = Path(output_dir)
    package_dir, record = find_build(output_dir, name, key)
    if package_dir is None:
        return None
    _ensure_output_dir(output_dir)
    link = _link(output_dir, name, package_dir)
    return BuiltArtifact(name, package_dir, link, True, {}, record)


def _run(command, cwd, label):
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise BuildError(f"{label} failed ({' '.join(map(str, command))}):\n{result.stdout}{result.stderr}")
    return result


class WrapperTranslation:
    """Cython translating the wrapper ``_<name>.pyx`` to C in the background.

    The wrapper depends only on the model's name, so the pipeline starts this
    as soon as the derivation is done, and Cython runs while the CSE and the
    emission of the model's C do."""

    def __init__(self, name, pyx_text, output_dir):
        output_dir = Path(output_dir)
        _ensure_output_dir(output_dir)
        self.name = name
        self.pyx_text = pyx_text
        self.dir = Path(tempfile.mkdtemp(prefix=f".{name}-cython-", dir=output_dir / ".builds"))
        pyx = self.dir / f"_{name}.pyx"
        pyx.write_text(pyx_text)
        self.output = self.dir / f"_{name}_wrapper.c"
        self.command = [sys.executable, "-m", "cython", "-3", "--fast-fail", "--module-name", f"_{name}",
                        "-o", str(self.output), str(pyx)]
        self.process = subprocess.Popen(self.command, cwd=self.dir, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)

    def finish(self, destination):
        """Wait for Cython; move its C to ``destination``."""
        try:
            out, err = self.process.communicate()
            if self.process.returncode != 0:
                raise BuildError(f"Cython failed ({' '.join(self.command)}):\n{out}{err}")
            shutil.move(str(self.output), str(destination))
        finally:
            self.cancel()

    def cancel(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()
        shutil.rmtree(self.dir, ignore_errors=True)


def compile_package(sources, output_dir, key, progress=None, extra_record=None, replace=False,
                    wrapper=None):
    """Write ``sources`` (a GeneratedSources) and compile them; returns a BuiltArtifact.

    With ``replace`` an existing build of the same key is replaced (``--force``).
    ``wrapper``: the WrapperTranslation of the sources' wrapper, if started
    already."""
    say = progress or (lambda message: None)
    output_dir = Path(output_dir)
    _ensure_output_dir(output_dir)
    name = sources.name
    final_dir = output_dir / ".builds" / f"{name}-{key}"
    timings = {}
    work = Path(tempfile.mkdtemp(prefix=f".{name}-{key}-", dir=output_dir / ".builds"))
    try:
        for file_name, text in sources.files.items():
            (work / file_name).write_text(text)

        # The model's C does not depend on the wrapper: it compiles while
        # Cython translates the wrapper, and then beside the wrapper's C.
        started = time.perf_counter()
        cc = compiler()
        pyx_text = sources.files[f"_{name}.pyx"]
        if wrapper is None or wrapper.pyx_text != pyx_text:
            if wrapper is not None:
                wrapper.cancel()
            wrapper = WrapperTranslation(name, pyx_text, output_dir)
        say(f"compiling {name}.c with {compiler()}; cython: translating the wrapper")
        model_command = [cc, *OPTIMIZATION_FLAGS, "-fPIC", *C_STANDARD_FLAGS, "-c", f"{name}.c",
                         "-o", f"{name}.o"]
        compiling = [(model_command, subprocess.Popen(model_command, cwd=work, stdout=subprocess.PIPE,
                                                      stderr=subprocess.PIPE, text=True))]
        try:
            wrapper_c = work / f"_{name}_wrapper.c"
            wrapper.finish(wrapper_c)
            timings["cython"] = time.perf_counter() - started

            started = time.perf_counter()
            include = sysconfig.get_paths()["include"]
            import numpy
            numpy_include = numpy.get_include()
            wrapper_command = [cc, *WRAPPER_OPTIMIZATION_FLAGS, "-fPIC", "-I", include, "-I", numpy_include,
                               "-I", ".", "-DNPY_NO_DEPRECATED_API=NPY_1_7_API_VERSION", "-c",
                               wrapper_c.name, "-o", f"_{name}_wrapper.o"]
            compiling.append((wrapper_command, subprocess.Popen(
                wrapper_command, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
            for command, process in compiling:
                out, err = process.communicate()
                if process.returncode != 0:
                    raise BuildError(f"C compilation failed ({' '.join(command)}):\n{out}{err}")
        finally:
            for _, process in compiling:
                if process.poll() is None:
                    process.kill()
                    process.wait()
        extension = f"_{name}{sysconfig.get_config_var('EXT_SUFFIX')}"
        _run([cc, "-shared", f"{name}.o", f"_{name}_wrapper.o", "-o", extension, "-lm"], work, "linking")
        timings["compile"] = time.perf_counter() - started
        for leftover in (wrapper_c, work / f"{name}.o", work / f"_{name}_wrapper.o"):
            leftover.unlink()

        record = {"name": name, "key": key, "extension": extension,
                  "operation_count": sources.operation_count,
                  "temporary_count": sources.temporary_count,
                  "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        record.update(extra_record or {})
        (work / BUILD_RECORD).write_text(json.dumps(record, indent=2) + "\n")
        if replace and final_dir.exists():
            trash = Path(tempfile.mkdtemp(prefix=f".{name}-old-", dir=output_dir / ".builds"))
            os.rename(final_dir, trash / "build")
            shutil.rmtree(trash, ignore_errors=True)
        try:
            os.rename(work, final_dir)
        except OSError:
            # a concurrent build of the same key finished first: use it
            if not (final_dir / BUILD_RECORD).exists():
                raise
            shutil.rmtree(work, ignore_errors=True)
            record = json.loads((final_dir / BUILD_RECORD).read_text())
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    link = _link(output_dir, name, final_dir)
    return BuiltArtifact(name, final_dir, link, False, timings, record)
