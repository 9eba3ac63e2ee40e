"""Stage 4 of the pipeline: compile generated sources into an importable package.

Layout of an output directory (default: ``generated/`` of the source tree;
always used as an absolute path, see :func:`resolve_output_dir`)::

    generated/
        __init__.py                   makes ``import generated.disk`` work (with the
                                      directory holding generated/ on sys.path)
        disk -> .builds/disk-<key>    symbolic link to the current build's key link
        .builds/
            disk-<key> -> disk-<key>.<nonce>   key link: the current build of <key>
            disk-<key>.<nonce>/       one finished build: disk.c, disk.h (disk_lanes.c),
                                      codegen-table.c, codegen-kernel.h, __init__.py,
                                      the extension module _kernel.*.so, build.json
            disk.recipe-<id>          what a model file's equations depend on, and the
                                      key of its build (codegen.recipes): found
                                      without forming the equations
            kernels/<digest>          the Python kernel, compiled once for every model
                                      (KernelObject)
            .disk-<key>.tmp.<pid>.<host>.<random>/   a build in progress

``<key>`` hashes the model's content, the generator's code and templates, the
compiler, the Python ABI, and the NumPy and Cython versions (an extension built
against one NumPy does not import under another).

Every build happens in a hidden temporary directory named after the creating
process and host; when complete it is renamed to its own ``<name>-<key>.<nonce>``
and only then linked, by an atomic ``rename`` of a symbolic link: a forced
rebuild (``replace``) swaps the key link to the new build and removes the old
one afterwards, so at every instant ``generated/<name>`` leads to a complete
build. ``build.json`` records the size and SHA-256 of every file; a cached build
that no longer matches (truncated, missing file) is rebuilt. Temporaries of
processes that died (SIGKILL) and builds whose removal was interrupted are
swept by later builds (:func:`_sweep`). Links already pointing at the right build
are left alone, so a finished build in a read-only directory can still be used.
"""

from __future__ import annotations

import functools
import hashlib
import json
import keyword
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .errors import BuildError, ModelError

# codegen.emit's names of the files that connect a model to the kernel
# (not imported from there: this module does not load SymPy)
KERNEL_HEADER = "codegen-kernel.h"
KERNEL_TABLE = "codegen-table.c"

BUILD_RECORD = "build.json"

# Flags of the model's own C: it must compile cleanly under these (see tests).
C_STANDARD_FLAGS = ["-std=c99", "-Wall", "-Wextra", "-pedantic"]
OPTIMIZATION_FLAGS = ["-O2"]
# The Python kernel (argument handling and the batch loops around the model's
# functions; the same for every model: KernelObject) compiles in 60% of the
# time at -O1, with no measurable difference per call.
WRAPPER_OPTIMIZATION_FLAGS = ["-O1"]
# CODEGEN_WRAPPER_OPTIMIZATION=-O0 compiles it in 40% of that time. Only the
# Python glue is affected (the model's C and its lane code keep their flags:
# the same bits).
WRAPPER_OPTIMIZATION_LEVELS = ("-O0", "-O1", "-O2")


def wrapper_optimization_flags():
    """The kernel's optimization flags: WRAPPER_OPTIMIZATION_FLAGS, or the
    level CODEGEN_WRAPPER_OPTIMIZATION names (part of the cache key)."""
    wanted = os.environ.get("CODEGEN_WRAPPER_OPTIMIZATION", "").strip()
    if not wanted:
        return list(WRAPPER_OPTIMIZATION_FLAGS)
    if wanted not in WRAPPER_OPTIMIZATION_LEVELS:
        raise BuildError(f"CODEGEN_WRAPPER_OPTIMIZATION={wanted!r} is not one of "
                         f"{', '.join(WRAPPER_OPTIMIZATION_LEVELS)} (unset: {WRAPPER_OPTIMIZATION_FLAGS[0]})")
    return [wanted]


def dense_defines(name):
    """-D flags of the model's C in the Python module: the LU kernels of the
    looped stages also compiled for AVX2, and for x86-64-v4 where the
    linearization's fast path is looped (templates/helpers.c, DENSE_CLONES;
    the same bits). The exported C for a controller leaves them out by default."""
    return [f"-D{name.upper()}_DENSE_CLONES"]


# The lane code (<name>_lanes.c, codegen/lanes.py): the flags that make its
# loops vector instructions while keeping every lane's result the scalar
# code's, bit for bit: no contraction into fused multiply-adds, no
# reassociation (no -ffast-math); -fno-math-errno lets sqrt be an instruction
# (errno only: the same values).
LANE_FLAGS = ["-O3", "-fopenmp-simd", "-ffp-contract=off", "-fno-math-errno"]
# GCC's limit of memory references of a loop it vectorizes is below the
# largest evaluation parts (the bicycle's Jacobians): raised where the
# compiler takes it. No memset calls for runs of zeros a stage stores (the
# structural zeros of A): in a loop over the lanes, one vector store each; as
# "rep stos", tens of cycles each (a third of the disk's solution stage). And
# no loop distribution or predictive commoning: a lane loop is one vector
# iteration with thousands of memory references, which those passes only
# search (the bicycle's lane code compiles in 9.7 s instead of 12.3 s, as fast).
LANE_GCC_FLAGS = ["--param", "loop-max-datarefs-for-datadeps=100000", "-fno-tree-loop-distribute-patterns",
                  "-fno-tree-loop-distribution", "-fno-predictive-commoning"]
# Instruction selection and scheduling tuned for the CPU that builds: -mtune
# changes no instruction set (that is -march's, in the cache key: a build
# cache shared by other CPUs runs correctly there, tuned for this one) and no
# arithmetic (the same bits). GCC 12's generic tuning compiles the lanes'
# per-lane check flags through vector permutes and blends; tuned for an AMD
# Zen (znver3, what GCC 12 calls a Zen 5), through mask registers: the lane
# batch 62.3 -> 55.1 ns a point on the disk, 608 -> 561 ns on the bicycle
# (bit-identical). Not for the scalar C: the same tuning made the disk's
# one-point call slower there (140 -> 158 ns).
LANE_TUNE_FLAGS = ["-mtune=native"]
# The instruction sets the lane code is compiled for: (name, flags, lanes W,
# x86-64 level the C checks at run time before it calls them). W is the
# vector width in doubles: every value of a lane loop is one register, the
# loop one vector iteration (W = 8 on AVX2, two iterations, compiled in 35 s
# against 12 s for the bicycle, and ran no faster).
LANE_TARGETS = {
    "avx512": (["-march=x86-64-v4", "-mprefer-vector-width=512"], 8, 4),
    "avx2": (["-march=x86-64-v3"], 4, 3),
    "portable": ([], 2, None),      # the compiler's default target (SSE2 on x86-64)
}
# glibc's vector math library for sin, cos, exp, log, pow in the lanes
# (CODEGEN_VECTOR_MATH=1): faster, a few ulps from the scalar libm
VECTOR_MATH_FLAGS = ["-ffp-contract=fast"]

# A model's name becomes file names (".builds/.<name>-<key>.tmp.<pid>.<host>.<random>"
# must stay under the usual 255-byte limit) and C identifiers.
MAX_NAME_LENGTH = 64

# A temporary entry older than this is abandoned even if its pid is alive (the
# pid may have been reused, or belong to another host sharing the directory).
# Builds take seconds to minutes and touch their directory all along.
STALE_SECONDS = 3600

# Names of the hidden temporaries in .builds/: ".<base>.<kind>.<pid>.<host>.<random>"
_TEMPORARY = re.compile(r"^\.(?P<base>.+)\.(?P<kind>tmp|old|link)\.(?P<pid>\d+)\.(?P<host>[0-9a-f]{8})\.[^.]+$")
# A finished build directory: "<name>-<key>.<nonce>"
_BUILD_DIR = re.compile(r"^(?P<base>[A-Za-z_][A-Za-z0-9_]*-[0-9a-f]{20})\.[0-9a-f]+$")
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def default_output_dir():
    """``$CODEGEN_OUTPUT_DIR``, else ``generated/`` beside the ``codegen`` package (absolute)."""
    env = os.environ.get("CODEGEN_OUTPUT_DIR")
    if env:
        return Path(env).expanduser().resolve()
    return Path(__file__).resolve().parent.parent / "generated"


def resolve_output_dir(output_dir=None):
    """``output_dir`` as an absolute path (default :func:`default_output_dir`).

    Absolute because the build runs Cython and the compiler in its temporary
    directory, where a relative path would point elsewhere."""
    if output_dir is None:
        return default_output_dir()
    return Path(output_dir).expanduser().resolve()


def check_name(name):
    """Refuse model names that cannot name a build (raises ModelError)."""
    if len(name) > MAX_NAME_LENGTH:
        raise ModelError(f"model name {name[:20]}... has {len(name)} characters; at most "
                         f"{MAX_NAME_LENGTH} are allowed (it names files and C symbols): choose a shorter one")
    if keyword.iskeyword(name):
        raise ModelError(f"model name {name!r} is a Python keyword, so 'import generated.{name}' "
                         "would be a syntax error: choose another name")


def compiler():
    """The C compiler, as the README says: ``$CC``, else ``cc``, else the compiler
    Python was built with, ``gcc`` or ``clang``, whichever is on PATH first."""
    env = os.environ.get("CC")
    if env:
        if shutil.which(env):
            return env
        raise BuildError(f"CC={env!r} is not an executable program (on PATH or as a path); "
                         "set CC to a C compiler, e.g. CC=gcc, or unset it to use cc")
    python_cc = (sysconfig.get_config_var("CC") or "").split()[:1]
    for candidate in ["cc", *python_cc, "gcc", "clang"]:
        if shutil.which(candidate):
            return candidate
    raise BuildError("no C compiler found (looked for $CC, cc, gcc and clang on PATH). Install one, "
                     "e.g. 'apt-get install gcc' (Debian/Ubuntu), 'dnf install gcc' (Fedora), "
                     "'xcode-select --install' (macOS), or set CC=/path/to/a/c/compiler")


_COMPILER_IDENTITY = {}


def _compiler_identity():
    """The first line of ``$CC --version`` (once a process for each compiler:
    the cache key, the kernel's and the compile cache's digests read it)."""
    cc = compiler()
    if cc not in _COMPILER_IDENTITY:
        _COMPILER_IDENTITY[cc] = _run_version(cc)
    return _COMPILER_IDENTITY[cc]


def _run_version(cc):
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
        return out.stdout.splitlines()[0] if out.stdout else cc
    except (OSError, subprocess.SubprocessError):
        return cc


def _numpy_and_cython():
    """The versions an extension module depends on besides Python: built against
    one NumPy, it fails to import under another ("numpy.dtype size changed")."""
    import Cython
    import numpy
    return f"numpy {numpy.__version__} cython {Cython.__version__}"


@dataclass(frozen=True)
class LaneTarget:
    """What the lane code is compiled for (see :func:`lane_target`)."""

    name: str           # "avx512", "avx2", "portable" or "off"
    flags: tuple        # compiler flags of <name>_lanes.c
    lanes: int          # points per block (the C's <NAME>_LANES)
    level: int | None   # the x86-64 level the model's C checks before calling the lanes
    vector_math: bool

    def defines(self, name):
        """-D flags of every file of the build (the header's batch workspace
        depends on the lane count)."""
        upper = name.upper()
        flags = [f"-D{upper}_LANES={self.lanes}"]
        if self.name != "off":
            flags.append(f"-D{upper}_LANES_KERNELS")
            if self.level:
                flags.append(f"-D{upper}_LANES_ISA={self.level}")
        return flags

    def key(self):
        return f"lanes {self.name} {' '.join(self.flags)} vector_math={self.vector_math}"


_LANE_TARGET = {}


def _accepts(cc, flags):
    """Whether the compiler compiles an empty file with these flags."""
    try:
        result = subprocess.run([cc, *flags, "-x", "c", "-c", "-o", os.devnull, "-"], input="int x;\n",
                                capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0


def _host_macros(cc):
    """The predefined macros of ``-march=native`` (the CPU's instruction
    sets, as the compiler knows them), or an empty set."""
    try:
        result = subprocess.run([cc, "-march=native", "-dM", "-E", "-x", "c", "-"], input="",
                                capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return set()
    return {line.split()[1] for line in result.stdout.splitlines() if line.startswith("#define ")}


@functools.lru_cache(maxsize=None)
def _gnu_compatible(cc):
    """Whether the compiler is GCC or clang (defines __GNUC__): hidden
    symbols between a model's translation units (emit.SPLIT_STATEMENTS)."""
    try:
        result = subprocess.run([cc, "-dM", "-E", "-x", "c", "-"], input="", capture_output=True, text=True,
                                timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return any(line.startswith("#define __GNUC__ ") for line in result.stdout.splitlines())


def lane_target():
    """The instruction set of the lane code on this machine: the best of
    :data:`LANE_TARGETS` the CPU has and the compiler takes (AVX-512, then
    AVX2, else the compiler's default target). ``$CODEGEN_LANES`` chooses one
    (``avx512``, ``avx2``, ``portable``, or ``off``: no lane code), e.g. for a
    build cache shared by machines with different CPUs. It is part of the
    build's cache key, and the C checks the CPU before it runs the lanes.
    ``$CODEGEN_VECTOR_MATH=1``: glibc's vector sin, cos, exp, log and pow in
    the lanes (not bit-identical: a few ulps)."""
    cc = compiler()
    wanted = os.environ.get("CODEGEN_LANES", "").strip().lower() or None
    vector_math = os.environ.get("CODEGEN_VECTOR_MATH", "").strip() not in ("", "0")
    memo = (cc, wanted, vector_math)
    if memo in _LANE_TARGET:
        return _LANE_TARGET[memo]
    if wanted is not None and wanted not in (*LANE_TARGETS, "off"):
        raise BuildError(f"CODEGEN_LANES={wanted!r}: choose one of {', '.join(LANE_TARGETS)} or off")
    if wanted == "off":
        target = LaneTarget("off", (), LANE_TARGETS["portable"][1], None, False)
    else:
        if wanted is None:
            macros = _host_macros(cc)
            wanted = ("avx512" if {"__AVX512F__", "__AVX512DQ__", "__AVX512VL__", "__AVX512BW__"} <= macros
                      else "avx2" if {"__AVX2__", "__FMA__"} <= macros else "portable")
        flags, lanes, level = LANE_TARGETS[wanted]
        while flags and not _accepts(cc, flags):      # an older compiler: the next target down
            wanted = "avx2" if wanted == "avx512" else "portable"
            flags, lanes, level = LANE_TARGETS[wanted]
        flags = LANE_FLAGS + flags + (VECTOR_MATH_FLAGS if vector_math else [])
        if _accepts(cc, flags + LANE_GCC_FLAGS):
            flags += LANE_GCC_FLAGS
        if _accepts(cc, flags + LANE_TUNE_FLAGS):
            flags += LANE_TUNE_FLAGS
        if not _accepts(cc, flags):
            wanted, flags, level = "portable", [f for f in LANE_FLAGS if _accepts(cc, [f])], None
        target = LaneTarget(wanted, tuple(flags), lanes, level, vector_math)
    _LANE_TARGET[memo] = target
    return target


def cache_key(model_fingerprint, generator_fingerprint):
    h = hashlib.sha256()
    for part in (model_fingerprint, generator_fingerprint, _compiler_identity(),
                 " ".join(C_STANDARD_FLAGS + OPTIMIZATION_FLAGS + wrapper_optimization_flags()),
                 lane_target().key(),
                 sysconfig.get_config_var("EXT_SUFFIX"), _numpy_and_cython()):
        h.update(str(part).encode())
        h.update(b"\x00")
    return h.hexdigest()[:20]


@dataclass
class BuiltArtifact:
    """A finished build on disk."""

    name: str
    package_dir: Path       # .builds/<name>-<key>: the key link, leads to this key's current build
    link: Path              # output_dir/<name>, pointing at package_dir
    cached: bool
    timings: dict           # stage -> seconds (this build; empty when cached)
    record: dict            # contents of build.json


# -- temporaries and their sweeping -----------------------------------------------------

def _temporary_name(base, kind):
    """Hidden name of a temporary in .builds/ that says who made it (see _sweep)."""
    return f".{base}.{kind}.{os.getpid()}.{_HOST}.{secrets.token_hex(4)}"


def _alive(pid):
    if os.name != "posix" or pid <= 0:
        return True         # cannot tell: only the age decides
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True         # exists, another user's
    return True


def _remove(path):
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except OSError:
            pass


def _discard(build_dir):
    """Remove a finished build that nothing links to any more. Renamed to a hidden
    temporary first, so an interrupted removal leaves something _sweep recognizes."""
    trash = build_dir.parent / _temporary_name(build_dir.name, "old")
    try:
        os.rename(build_dir, trash)
    except OSError:
        return              # already gone (or not ours to remove)
    _remove(trash)


def _readlink(path):
    try:
        return os.readlink(path)
    except OSError:
        return None


def _sweep(builds):
    """Remove what killed or crashed builds left in ``builds`` (.builds/):
    temporaries whose process is dead (same host) or that are older than
    STALE_SECONDS (also those of older versions, which carry no pid), and finished
    build directories that no key link leads to for that long (a crash between
    renaming a build into place and linking it, or before removing a replaced one).
    Errors are ignored: sweeping is housekeeping, and the directory may be read-only."""
    now = time.time()
    try:
        entries = list(os.scandir(builds))
    except OSError:
        return
    for entry in entries:
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        temporary = _TEMPORARY.match(entry.name)
        if temporary:
            dead = temporary["host"] == _HOST and not _alive(int(temporary["pid"]))
            abandoned = dead or age > STALE_SECONDS
        elif entry.name.startswith("."):
            abandoned = age > STALE_SECONDS
        else:
            build = _BUILD_DIR.match(entry.name)
            abandoned = (build is not None and age > STALE_SECONDS
                         and _readlink(Path(builds) / build["base"]) != entry.name)
        if abandoned:
            _remove(Path(entry.path))


# -- verification ------------------------------------------------------------------------

def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _file_facts(directory):
    """Size and SHA-256 of every file of a build (build.json lists them)."""
    return {p.name: {"size": p.stat().st_size, "sha256": file_sha256(p)}
            for p in sorted(Path(directory).iterdir()) if p.name != BUILD_RECORD and p.is_file()}


def read_record(package_dir):
    """The contents of ``package_dir``/build.json, or None if missing or unreadable."""
    try:
        return json.loads((Path(package_dir) / BUILD_RECORD).read_text())
    except (OSError, ValueError):
        return None


def build_problem(package_dir, record):
    """None if the build in ``package_dir`` is complete and unchanged since it was
    built, else what is wrong (a file missing, truncated or altered)."""
    files = (record or {}).get("files")
    if not files:
        return f"{BUILD_RECORD} lists no files"
    for file_name, facts in files.items():
        try:
            size = (Path(package_dir) / file_name).stat().st_size
        except OSError:
            return f"{file_name} is missing"
        if size != facts["size"]:
            return f"{file_name} has {size} bytes, {facts['size']} when built"
    for file_name, facts in files.items():
        if file_sha256(Path(package_dir) / file_name) != facts["sha256"]:
            return f"{file_name} changed since it was built"
    return None


# -- installation ------------------------------------------------------------------------

def _write_atomically(path, text, temporary_dir):
    fd, tmp = tempfile.mkstemp(dir=temporary_dir, prefix=_temporary_name(path.name, "tmp"))
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


@contextmanager
def _writing(output_dir):
    """An OSError while writing into the output directory becomes a BuildError that
    says where and what to do (a read-only or full disk, a path through a file)."""
    try:
        yield
    except OSError as error:
        raise BuildError(f"cannot write to {output_dir}: {error.strerror or error}"
                         + (f" ({error.filename})" if error.filename else "")
                         + "; choose a writable output directory (--output-dir, output_dir= "
                         "or $CODEGEN_OUTPUT_DIR)") from error


def _ensure_output_dir(output_dir):
    # check before creating: nothing is written when all exists (read-only directories)
    builds = output_dir / ".builds"
    if not builds.is_dir():
        builds.mkdir(parents=True, exist_ok=True)
    marker = output_dir / "__init__.py"
    if not marker.exists():
        _write_atomically(marker, '"""Models built by codegen (python -m codegen build NAME)."""\n', builds)


def _link(output_dir, name, key_link):
    """Point output_dir/name at key_link with one atomic rename, unless it already does."""
    link = output_dir / name
    target = os.path.relpath(key_link, output_dir)
    if _readlink(link) == target:
        return link
    if link.exists() and not link.is_symlink():
        raise BuildError(f"{link} exists and is not a link made by codegen; move it away")
    tmp = output_dir / ".builds" / _temporary_name(name, "link")
    os.symlink(target, tmp)
    os.replace(tmp, link)
    return link


def find_build(output_dir, name, key, progress=None):
    """``(key link, record)`` of the build of ``key`` if it is complete and
    undamaged, else ``(None, None)``."""
    key_link = resolve_output_dir(output_dir) / ".builds" / f"{name}-{key}"
    package_dir = key_link.resolve()    # once: a concurrent --force may swap the link
    record = read_record(package_dir)
    if record is None:
        return None, None
    problem = build_problem(package_dir, record)
    if problem:
        if progress:
            progress(f"the cached build {package_dir.name} is damaged ({problem}); rebuilding")
        return None, None
    return key_link, record


@contextmanager
def build_lock(output_dir, name, key, progress=None):
    """Hold the right to build ``name`` with ``key`` in ``output_dir``: a second
    process (another test worker, another job of a cluster on a shared file
    system) asking for the same build meanwhile waits here, and then finds it
    in the cache instead of deriving and compiling it again. Yields whether it
    waited. Where no lock can be taken (a read-only directory, no flock) it
    yields False at once: concurrent builds stay correct (see _install), they
    only repeat the work."""
    try:
        import fcntl
        builds = resolve_output_dir(output_dir) / ".builds"
        builds.mkdir(parents=True, exist_ok=True)
        path = builds / f".{name}-{key}.lock"
        handle = open(path, "a")
    except (ImportError, OSError):
        yield False
        return
    with handle:
        waited = False
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if progress:
                    progress(f"waiting for another process that is building {name} here")
                fcntl.flock(handle, fcntl.LOCK_EX)
                waited = True
        except OSError:
            pass                            # no locking on this file system
        try:
            yield waited
        finally:
            # removed while held (if it is still the file this process
            # locked): a process that opened it meanwhile locks it next and
            # finds the build in the cache; one that comes later makes a new one
            try:
                if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                    os.unlink(path)
            except OSError:
                pass


def install_cached(output_dir, name, key, progress=None):
    """The finished build for this key, linked as output_dir/name, or None."""
    output_dir = resolve_output_dir(output_dir)
    key_link, record = find_build(output_dir, name, key, progress)
    if key_link is None:
        return None
    _sweep(output_dir / ".builds")
    with _writing(output_dir):
        _ensure_output_dir(output_dir)
        link = _link(output_dir, name, key_link)
    return BuiltArtifact(name, key_link, link, True, {}, record)


def _install(builds, base, build_dir, record, replace):
    """Make the key link ``builds/base`` lead to ``build_dir``; returns the record of
    the build it leads to then. Without ``replace`` a complete build already linked
    (by a concurrent build of the same key) is kept and ``build_dir`` discarded."""
    key_link = builds / base
    if not replace:
        try:
            os.symlink(build_dir.name, key_link)    # creating is atomic: one process wins
            return record
        except FileExistsError:
            pass
        existing = read_record(key_link.resolve())
        if existing is not None and build_problem(key_link.resolve(), existing) is None:
            _discard(build_dir)
            return existing
    old = _readlink(key_link)
    tmp = builds / _temporary_name(base, "link")
    os.symlink(build_dir.name, tmp)
    os.replace(tmp, key_link)                       # atomic: always leads to a complete build
    if old and old != build_dir.name:
        _discard(builds / old)                      # only now: nothing leads to it any more
    return record


# CODEGEN_COMPILE_CACHE=<dir>: a content-addressed store of compiled extension
# modules and of Cython's translations, shared by every output directory (as
# ccache is for object files). An entry is found by the SHA-256 of everything
# its compile reads: every generated file, every command line, the compiler's
# identity, the Python ABI and the NumPy and Cython versions. A build that
# finds its module there (another output directory built the same model with
# the same tools: a test suite, CI jobs, a forced rebuild) copies it instead of
# running Cython and the compiler. Off unless set; never cleaned (remove the
# directory to empty it). Entries are written atomically and checked on read.
COMPILE_CACHE_ENV = "CODEGEN_COMPILE_CACHE"
_CACHE_MAGIC = b"codegen compile cache 1 "


def compile_cache_dir():
    """The compile cache's directory ($CODEGEN_COMPILE_CACHE), or None."""
    value = os.environ.get(COMPILE_CACHE_ENV, "").strip()
    return Path(value).expanduser().resolve() if value else None


def _digest(*parts):
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\x00")
    return h.hexdigest()


def _cache_read(kind, digest, directory=None):
    """The contents of the compile cache's entry ``kind/digest``; None where
    there is none (or no cache), or it does not match its checksum.
    ``directory``: a store of the same format instead (``<directory>/digest``,
    the kernels of an output directory)."""
    if directory is not None:
        directory, kind = Path(directory).parent, Path(directory).name
    else:
        directory = compile_cache_dir()
    if directory is None:
        return None
    try:
        data = (directory / kind / digest).read_bytes()
    except OSError:
        return None
    header, _, payload = data.partition(b"\n")
    if header != _CACHE_MAGIC + hashlib.sha256(payload).hexdigest().encode():
        return None         # damaged (or written by another version): compiled again, and replaced
    return payload


def _cache_get(kind, digest, destination):
    """Write the compile cache's entry ``kind/digest`` (see _cache_read) to
    ``destination``; False where there is none."""
    payload = _cache_read(kind, digest)
    if payload is None:
        return False
    Path(destination).write_bytes(payload)
    return True


def _cache_put(kind, digest, source, directory=None):
    """Store ``source`` as the entry ``kind/digest`` (atomically: a reader sees
    the whole entry or none); a cache that cannot be written is skipped.
    ``directory``: a store of the same format instead (see _cache_read)."""
    if directory is not None:
        directory, kind = Path(directory).parent, Path(directory).name
    else:
        directory = compile_cache_dir()
    if directory is None:
        return
    try:
        payload = Path(source).read_bytes()
        folder = directory / kind
        folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{digest}.", dir=folder)
        try:
            with os.fdopen(handle, "wb") as f:
                f.write(_CACHE_MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
            os.chmod(temporary, 0o644)
            os.replace(temporary, folder / digest)
        except BaseException:
            _remove(Path(temporary))
            raise
    except OSError:
        pass


def _run(command, cwd, label):
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise BuildError(f"{label} failed ({' '.join(map(str, command))}):\n{result.stdout}{result.stderr}")
    return result


# The Python kernel (templates/module.pyx.jinja): one module for every model,
# which calls the model through codegen-kernel.h (codegen.emit.emit_kernel).
KERNEL_MODULE = "_kernel"
KERNELS = "kernels"        # .builds/kernels/: the compiled kernels of this output directory
# A kernel of .builds/kernels/ unused this long (another generator version,
# compiler or Python) is removed when another is made there.
KERNEL_KEEP_SECONDS = 30 * 24 * 3600


class KernelObject:
    """The Python kernel as an object file, made once for every model.

    Its text does not depend on the model, so Cython translates it and the
    compiler compiles it once per generator version, compiler, flags, Python,
    NumPy and Cython (its digest); each model's module links it with the
    model's C and codegen-table.c. Found in ``$CODEGEN_COMPILE_CACHE`` or in
    ``<output_dir>/.builds/kernels/`` (entries written atomically and checked
    on read), else made in the background: the pipeline starts it before the
    derivation, so the first build of an output directory translates and
    compiles it while SymPy works."""

    def __init__(self, pyx_text, header_text, output_dir):
        output_dir = resolve_output_dir(output_dir)
        self.header_text = header_text
        self.dir = self.process = self.thread = self.digest = self.payload = None
        self.error = None
        self.cancelled = False
        try:
            cc = compiler()
        except BuildError as error:
            self.error = str(error)     # said by finish(), if the kernel is needed
            return
        self.cython = [sys.executable, "-m", "cython", "-3", "--fast-fail", "--module-name", KERNEL_MODULE,
                       "-o", f"{KERNEL_MODULE}.c", f"{KERNEL_MODULE}.pyx"]
        self.cc = [cc, *wrapper_optimization_flags(), "-fPIC", "-I", sysconfig.get_paths()["include"],
                   "-I", _numpy_include(), "-I", ".", "-DNPY_NO_DEPRECATED_API=NPY_1_7_API_VERSION", "-c",
                   f"{KERNEL_MODULE}.c", "-o", f"{KERNEL_MODULE}.o"]
        # everything the object depends on
        self.digest = _digest("kernel", _compiler_identity(), sys.version, _numpy_and_cython(),
                              sysconfig.get_config_var("EXT_SUFFIX"), " ".join(self.cython[1:]),
                              " ".join(self.cc), pyx_text, header_text)
        self.store = output_dir / ".builds" / KERNELS
        self.output_dir = output_dir
        # the object file, where it was made already (checked: read whole and
        # compared with its checksum)
        self.payload = _cache_read(KERNELS, self.digest, self.store)
        if self.payload is not None:
            try:
                os.utime(self.store / self.digest)      # used: kept (see _prune)
            except OSError:
                pass
            return
        self.payload = _cache_read(KERNELS, self.digest)
        if self.payload is not None:
            return
        try:
            with _writing(output_dir):
                _ensure_output_dir(output_dir)
                self.dir = Path(tempfile.mkdtemp(prefix=_temporary_name("kernel", "tmp"),
                                                 dir=output_dir / ".builds"))
                (self.dir / f"{KERNEL_MODULE}.pyx").write_text(pyx_text)
                (self.dir / KERNEL_HEADER).write_text(header_text)
        except BuildError as error:
            # said by finish(), if the kernel is needed: a cached model's
            # build in a read-only directory is found without it
            self.error = str(error)
            return
        self.thread = threading.Thread(target=self._make, name="codegen kernel", daemon=True)
        self.thread.start()

    def _make(self):
        # one process at a time makes it here (test workers, the jobs of a
        # cluster): the others wait, then find it
        with build_lock(self.output_dir, "kernel", self.digest[:20]):
            # made by another process meanwhile
            self.payload = _cache_read(KERNELS, self.digest, self.store) or _cache_read(KERNELS, self.digest)
            if self.payload is not None:
                return
            for command, label in ((self.cython, "Cython"), (self.cc, "compiling the kernel")):
                if self.cancelled:
                    return
                self.process = subprocess.Popen(command, cwd=self.dir, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE, text=True)
                if self.cancelled:      # cancelled while it started
                    self.process.kill()
                out, err = self.process.communicate()
                if self.process.returncode != 0:
                    if not self.cancelled:
                        self.error = f"{label} failed ({' '.join(command)}):\n{out}{err}"
                    return
            made = self.dir / f"{KERNEL_MODULE}.o"
            _cache_put(KERNELS, self.digest, made, self.store)
            _cache_put(KERNELS, self.digest, made)
            self.payload = made.read_bytes()
            self._prune()

    def _prune(self):
        """Remove the kernels of this output directory unused for
        KERNEL_KEEP_SECONDS (a build links its kernel into its module: none
        needs them once built)."""
        now = time.time()
        try:
            entries = list(os.scandir(self.store))
        except OSError:
            return
        for entry in entries:
            try:
                if entry.name != self.digest and now - entry.stat().st_mtime > KERNEL_KEEP_SECONDS:
                    os.unlink(entry.path)
            except OSError:
                pass

    def finish(self, destination):
        """Wait for the kernel to be made (or take it from where it was
        found); write its object file to ``destination``."""
        try:
            if self.error:
                raise BuildError(self.error)
            if self.thread is not None:
                self.thread.join()
                if self.error:
                    raise BuildError(self.error)
            if self.payload is None:
                raise BuildError("the Python kernel was not made (its build was cancelled)")
            Path(destination).write_bytes(self.payload)
        finally:
            self.cancel()

    def cancel(self):
        """Stop making it (if it is being made) and remove the temporaries.
        A thread still waiting for another process's lock is not waited for:
        it returns without running anything once it has the lock."""
        self.cancelled = True
        if self.thread is not None:
            process = self.process
            if process is not None and process.poll() is None:
                process.kill()
            self.thread.join(timeout=1.0)
            self.thread = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


def _numpy_include():
    import numpy
    return numpy.get_include()


def compile_package(sources, output_dir, key, kernel, progress=None, extra_record=None, replace=False):
    """Write ``sources`` (a GeneratedSources) and compile them with ``kernel``
    (a KernelObject, started by the caller) into the model's module; returns
    a BuiltArtifact.

    With ``replace`` an existing build of the same key is replaced (``--force``);
    so is a damaged one."""
    say = progress or (lambda message: None)
    try:
        output_dir = resolve_output_dir(output_dir)
        check_name(sources.name)
        cc = compiler()     # before any work: says how to get one if there is none
        builds = output_dir / ".builds"
        with _writing(output_dir):
            _ensure_output_dir(output_dir)
            _sweep(builds)
            work = Path(tempfile.mkdtemp(prefix=_temporary_name(f"{sources.name}-{key}", "tmp"),
                                         dir=builds))
    except BaseException:
        kernel.cancel()
        raise
    name = sources.name
    base = f"{name}-{key}"
    timings = {}
    try:
        for file_name, text in sources.files.items():
            (work / file_name).write_text(text)
        if sources.files.get(KERNEL_HEADER) != kernel.header_text:
            raise BuildError(f"{name}'s {KERNEL_HEADER} is not the kernel's (sources and kernel "
                             "of different generator versions)")

        started = time.perf_counter()
        lanes = lane_target()
        has_lanes = lanes.name != "off" and f"{name}_lanes.c" in sources.files
        if not has_lanes:
            lanes = LaneTarget("off", (), lanes.lanes, None, False)
        defines = lanes.defines(name)
        model_flags = [cc, *OPTIMIZATION_FLAGS, "-fPIC", *C_STANDARD_FLAGS, *defines, *dense_defines(name)]
        # a large model's C as translation units compiled in parallel
        # (emit.SPLIT_STATEMENTS); not beside lane code, which takes a core of its own
        # for longer than the model's C (the units would slow it); and only with
        # GCC or clang (hidden symbols between the units)
        units = 0 if has_lanes or not sources.units or not _gnu_compatible(cc) else sources.units
        model_objects = ([f"{name}.o"] if not units else [f"{name}.unit{unit}.o" for unit in range(units + 1)])
        model_commands = ([[*model_flags, "-c", f"{name}.c", "-o", f"{name}.o"]] if not units else
                          [[*model_flags, f"-D{name.upper()}_UNIT={unit}", "-c", f"{name}.c", "-o", objects]
                           for unit, objects in enumerate(model_objects)])
        # the model under the kernel's names (the same defines: the batch
        # workspace's size depends on the lane count)
        table_command = [cc, *OPTIMIZATION_FLAGS, "-fPIC", *C_STANDARD_FLAGS, *defines, "-c", KERNEL_TABLE,
                         "-o", "codegen-table.o"]
        commands = [*model_commands, table_command]
        # the lane code beside it (the bicycle's takes longer than the rest);
        # with the sensitivities' point lanes, its two parts as two
        # translation units compiled in parallel (<NAME>_LANES_PART)
        split = has_lanes and f"{name.upper()}_LANES_PART" in sources.files[f"{name}_lanes.c"]
        lane_objects = ([] if not has_lanes else [f"{name}_lanes.o"] if not split else
                        [f"{name}_lanes.part{part}.o" for part in (1, 2)])
        for part, lane_object in enumerate(lane_objects, start=1):
            commands.insert(0, [cc, *lanes.flags, "-fPIC", *C_STANDARD_FLAGS, *defines,
                                f"-D{name.upper()}_LANES_SIMD",
                                *([f"-D{name.upper()}_VECTOR_MATH"] if lanes.vector_math else []),
                                *([f"-D{name.upper()}_LANES_PART={part}"] if split else []),
                                "-c", f"{name}_lanes.c", "-o", lane_object])
        kernel_object = f"{KERNEL_MODULE}.o"
        extension = f"{KERNEL_MODULE}{sysconfig.get_config_var('EXT_SUFFIX')}"
        objects = [*model_objects, "codegen-table.o", kernel_object, *lane_objects]
        link_command = [cc, "-shared", *objects, "-o", extension, *(["-lmvec"] if lanes.vector_math else []),
                        "-lm"]
        # everything the compile reads (the compile cache's key)
        compiled_digest = _digest("extension", _compiler_identity(), sys.version, _numpy_and_cython(),
                                  kernel.digest,
                                  *(" ".join(command) for command in (*commands, link_command)),
                                  *(f"{file_name}\x00{sources.files[file_name]}"
                                    for file_name in sorted(sources.files)))
        from_cache = _cache_get("extensions", compiled_digest, work / extension)
        if from_cache:
            kernel.cancel()
            say(f"compile cache: {name}'s module, compiled from the same files with the same tools")
            timings["kernel"] = 0.0
            timings["compile"] = time.perf_counter() - started
        else:
            # The model's C does not depend on the kernel: it compiles while
            # the kernel is made (if it is not made already).
            parts = f" ({units + 1} translation units in parallel)" if units else ""
            if kernel.thread is not None:
                say(f"cython: translating and compiling the Python kernel (once for every model), "
                    f"while {cc} compiles {name}.c{parts}")
            else:
                say(f"compiling {name}.c with {cc}{parts}")
            compiling = [(command, subprocess.Popen(command, cwd=work, stdout=subprocess.PIPE,
                                                    stderr=subprocess.PIPE, text=True)) for command in commands]
            try:
                waited = time.perf_counter()
                kernel.finish(work / kernel_object)
                timings["kernel"] = time.perf_counter() - waited
                for command, process in compiling:
                    out, err = process.communicate()
                    if process.returncode != 0:
                        raise BuildError(f"C compilation failed ({' '.join(command)}):\n{out}{err}")
            finally:
                for _, process in compiling:
                    if process.poll() is None:
                        process.kill()
                        process.wait()
            _run(link_command, work, "linking")
            timings["compile"] = time.perf_counter() - started - timings["kernel"]
            for leftover in objects:
                (work / leftover).unlink()
            _cache_put("extensions", compiled_digest, work / extension)

        record = {"name": name, "key": key, "extension": extension,
                  "operation_count": sources.operation_count,
                  "temporary_count": sources.temporary_count,
                  # the lane code of batches: its target and flags, or why there is none
                  "lanes": {"target": lanes.name, "lanes": lanes.lanes, "flags": list(lanes.flags),
                            "vector_math": lanes.vector_math, **sources.fast_path} if has_lanes else
                           {"target": "off", "lanes": lanes.lanes, "why": sources.lanes
                            if sources.lanes != "lanes" else "CODEGEN_LANES=off"},
                  # the module compiled here, or copied from $CODEGEN_COMPILE_CACHE
                  "compiled": "compile cache" if from_cache else "here",
                  # <name>.c's translation units besides the rest (0: one)
                  "evaluation_units": units,
                  "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        record.update(extra_record or {})
        record["files"] = _file_facts(work)
        (work / BUILD_RECORD).write_text(json.dumps(record, indent=2) + "\n")
        # Its own directory, never reused: a forced rebuild does not touch the
        # build that generated/<name> leads to until the new one is linked.
        build_dir = builds / f"{base}.{secrets.token_hex(4)}"
        os.chmod(work, 0o755)   # mkdtemp's 0700 would hide a shared directory's builds from others
        os.rename(work, build_dir)
    except BaseException:
        kernel.cancel()
        shutil.rmtree(work, ignore_errors=True)
        raise
    with _writing(output_dir):
        record = _install(builds, base, build_dir, record, replace)
        link = _link(output_dir, name, builds / base)
    return BuiltArtifact(name, builds / base, link, False, timings, record)
