"""Builds outside the happy path (issue 9): relative output directories, the
compiler lookup, forced rebuilds that keep the link complete, the cache key's
NumPy/Cython versions, damaged cached builds, what killed builds leave behind,
read-only output directories, model names, export errors and the import hint.

Two builds are shared by the module: a tiny pendulum (user model) and the
built-in disk; the tests that need a fresh compile force one of the pendulum.
"""

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import sympy as sm
import sympy.physics.mechanics as me

import codegen
from codegen import Model
from codegen import compile as compile_stage
from codegen.errors import BuildError, ModelError
from codegen.pipeline import build_artifact, build_builtin

HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
HOUR = 3600.0


def make_pendulum(name="pendulum"):
    """A point mass on a rod of length l; gravity along N.x, so q = 0 hangs."""
    q, u = me.dynamicsymbols("q u")
    m, l, g = sm.symbols("m l g")
    N = me.ReferenceFrame("N")
    A = N.orientnew("A", "Axis", [q, N.z])
    A.set_ang_vel(N, u * N.z)
    O = me.Point("O")
    O.set_vel(N, 0)
    P = O.locatenew("P", l * A.x)
    P.v2pt_theory(O, N, A)
    kane = me.KanesMethod(N, q_ind=[q], u_ind=[u], kd_eqs=[q.diff() - u])
    kane.kanes_equations([me.Particle("bob", P, m)], [(P, m * g * N.x)])
    return Model(kane, parameters={m: 1.0, l: 2.0, g: 9.81}, name=name)


PENDULUM_A = [[0.0, 1.0], [-9.81 / 2.0, 0.0]]


@pytest.fixture(scope="module", autouse=True)
def pinned_generator():
    """Other people may edit the generator while this module runs: keep one key."""
    from codegen import pipeline
    fingerprint = pipeline.generator_fingerprint()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline, "generator_fingerprint", lambda: fingerprint)
        yield


@pytest.fixture(scope="module")
def pendulum():
    return make_pendulum()


@pytest.fixture(scope="module")
def out(tmp_path_factory, pendulum):
    """An output directory holding a build of the pendulum."""
    directory = tmp_path_factory.mktemp("robust") / "out"
    build_artifact(pendulum, directory)
    return directory


@pytest.fixture(scope="module")
def disk_out(tmp_path_factory):
    """An output directory holding the built-in disk, built as the CLI does."""
    directory = tmp_path_factory.mktemp("robust_disk") / "models"
    build_builtin("disk", directory)
    return directory


def run_cli(*args, cwd=None, env=None):
    return subprocess.run([sys.executable, "-m", "codegen", *args], capture_output=True, text=True,
                          env=dict(os.environ, CI="true", **(env or {})), cwd=cwd)


def complete_build(link):
    """The build directory ``link`` leads to, if it holds a complete build (the
    files build.json lists, with their sizes; the package and its extension),
    else None."""
    target = Path(link).resolve()
    try:
        record = json.loads((target / "build.json").read_text())
    except (OSError, ValueError):
        return None
    sizes = {name: facts["size"] for name, facts in record.get("files", {}).items()}
    sizes.setdefault("__init__.py", None)
    sizes.setdefault(record["extension"], None)
    for name, size in sizes.items():
        path = target / name
        if not path.is_file() or size not in (None, path.stat().st_size):
            return None
    return target


def assert_pendulum(module):
    A, _ = module.linearize([0.0], [0.0])
    np.testing.assert_allclose(A, PENDULUM_A, atol=1e-12)


# 1. relative output directories ---------------------------------------------------------

def test_relative_output_dir(out, pendulum, monkeypatch):
    monkeypatch.chdir(out.parent)
    artifact = build_artifact(pendulum, out.name, force=True)     # a real compile, not the cache
    assert not artifact.cached and artifact.link == out / "pendulum"
    assert complete_build(out / "pendulum") is not None
    assert_pendulum(codegen.load("pendulum", out.name))
    monkeypatch.setenv("CODEGEN_OUTPUT_DIR", out.name)
    assert compile_stage.default_output_dir() == out
    assert codegen.load("pendulum").nx == 2


# 2. the compiler: $CC, then cc, then others; a clear error without one -----------------

def test_compiler_found_as_cc_only(out, pendulum, monkeypatch, tmp_path):
    only_cc = tmp_path / "bin"
    only_cc.mkdir()
    # gcc runs the assembler and linker from PATH too
    for name, program in (("cc", "gcc"), ("as", "as"), ("ld", "ld")):
        (only_cc / name).symlink_to(shutil.which(program))
    monkeypatch.setenv("PATH", str(only_cc))
    monkeypatch.delenv("CC", raising=False)
    assert compile_stage.compiler() == "cc"
    artifact = build_artifact(pendulum, out, force=True)
    assert not artifact.cached and complete_build(artifact.link) is not None


def test_no_compiler_is_a_build_error_that_says_what_to_do(pendulum, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))          # nothing in it
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(BuildError, match="apt-get install gcc.*set CC"):
        compile_stage.compiler()
    with pytest.raises(BuildError, match="no C compiler found"):
        build_artifact(pendulum, tmp_path / "out", force=True)
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(BuildError, match="CC="):
        compile_stage.compiler()


# 3. --force: at every instant the link leads to a complete build --------------------------

def test_forced_rebuild_swaps_atomically(out, pendulum, monkeypatch):
    link = out / "pendulum"
    before = complete_build(link)
    assert before is not None
    module = codegen.load("pendulum", out)
    seen = []

    def checked(function):
        def call(*args, **kwargs):
            result = function(*args, **kwargs)
            seen.append((function.__name__, complete_build(link)))
            return result
        return call

    monkeypatch.setattr(os, "rename", checked(os.rename))
    monkeypatch.setattr(os, "replace", checked(os.replace))
    artifact = build_artifact(pendulum, out, force=True)
    monkeypatch.undo()
    assert seen and all(target is not None for _, target in seen), seen
    after = complete_build(link)
    assert after is not None and after != before and not before.exists()
    assert not artifact.cached
    # one build per key, nothing hidden left; the loaded module still works
    builds = out / ".builds"
    assert [p.name for p in builds.iterdir() if p.name.startswith(".")] == []
    assert [p for p in builds.iterdir()
            if p.is_dir() and not p.is_symlink() and p.name != compile_stage.KERNELS] == [after]
    assert_pendulum(module)
    # the same key in one process: the new build imported beside the old one,
    # whose folder is gone (what reads the files beside a module finds them)
    reloaded = codegen.load("pendulum", out)
    assert reloaded is not module and Path(reloaded.__file__).resolve().parent == after.resolve()
    assert codegen.load("pendulum", out) is reloaded
    assert_pendulum(reloaded)


# 4. the cache key follows NumPy and Cython ---------------------------------------------

def test_cache_key_includes_numpy_and_cython(monkeypatch):
    import Cython
    key = compile_stage.cache_key("model", "generator")
    monkeypatch.setattr(np, "__version__", "1.0.0")
    numpy_key = compile_stage.cache_key("model", "generator")
    monkeypatch.setattr(Cython, "__version__", "0.29.0")
    cython_key = compile_stage.cache_key("model", "generator")
    assert len({key, numpy_key, cython_key}) == 3


# 5. a damaged cached build is rebuilt ----------------------------------------------------

def test_damaged_cached_build_is_rebuilt(out, pendulum):
    damaged = complete_build(out / "pendulum")
    record = json.loads((damaged / "build.json").read_text())
    extension = damaged / record["extension"]
    data = extension.read_bytes()
    # a truncated copy under the same name (a new inode: this process has the
    # original mapped, and truncating that in place would crash it)
    truncated = extension.with_name("truncated")
    truncated.write_bytes(data[: len(data) // 2])
    os.replace(truncated, extension)

    artifact = build_artifact(pendulum, out)
    assert not artifact.cached
    rebuilt = complete_build(out / "pendulum")
    assert rebuilt is not None and rebuilt != damaged and not damaged.exists()
    script = ("import sys, codegen; m = codegen.load('pendulum', sys.argv[1]); "
              "print(m.linearize([0.0], [0.0])[0].tolist())")
    result = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == PENDULUM_A
    assert build_artifact(pendulum, out).cached


def test_missing_file_is_damage(out, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(complete_build(out / "pendulum"), copy)
    record = compile_stage.read_record(copy)
    assert compile_stage.build_problem(copy, record) is None
    (copy / "pendulum.h").unlink()
    assert compile_stage.build_problem(copy, record) == "pendulum.h is missing"


# 6. what killed builds leave behind is swept ---------------------------------------------

def test_sweep_removes_abandoned_temporaries(out, pendulum):
    builds = out / ".builds"
    key = complete_build(out / "pendulum").name.split(".")[0]
    dead = subprocess.Popen(["true"])
    dead.wait()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        entries = {
            "dead": builds / f".{key}.tmp.{dead.pid}.{HOST}.abcd1234",
            "live": builds / f".{key}.tmp.{sleeper.pid}.{HOST}.abcd1234",
            "mine": builds / f".{key}.tmp.{os.getpid()}.{HOST}.abcd1234",
            "other host, recent": builds / f".{key}.tmp.{dead.pid}.0badc0de.abcd1234",
            "other host, old": builds / f".{key}.tmp.{dead.pid}.0badc0de.ef567890",
            "old version, old": builds / f".{key}-k3j2x9",
            "old version, recent": builds / f".{key}-m4n5b6",
            "unlinked build, old": builds / f"{key}.0123abcd",
            "unlinked build, recent": builds / f"{key}.4567cdef",
        }
        for path in entries.values():
            path.mkdir()
            (path / "pendulum.c").write_bytes(b"x" * 1000)
        long_ago = time.time() - 2 * HOUR
        for label in ("other host, old", "old version, old", "unlinked build, old"):
            os.utime(entries[label], (long_ago, long_ago))
        assert build_artifact(pendulum, out).cached       # a cached build sweeps too
        gone = {label for label, path in entries.items() if not path.exists()}
        assert gone == {"dead", "other host, old", "old version, old", "unlinked build, old"}
    finally:
        sleeper.kill()
        sleeper.wait()
        for path in entries.values():
            shutil.rmtree(path, ignore_errors=True)


def test_sigkilled_build_leaves_nothing_after_the_next_build(out, pendulum):
    builds = out / ".builds"
    script = ("import sys; sys.path.insert(0, sys.argv[2]); import test_build_robustness as t; "
              "from codegen.pipeline import build_artifact; "
              "build_artifact(t.make_pendulum(), sys.argv[1], force=True)")
    # its own process group: SIGKILL takes Cython and the compiler with it, as a
    # killed terminal session would; without the compile cache, which would
    # leave almost no time to kill it in
    env = {k: v for k, v in os.environ.items() if k != compile_stage.COMPILE_CACHE_ENV}
    process = subprocess.Popen([sys.executable, "-c", script, str(out), str(Path(__file__).parent)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True, env=env)
    deadline = time.monotonic() + 120
    temporaries = []
    while not temporaries and time.monotonic() < deadline and process.poll() is None:
        temporaries = [p for p in builds.iterdir() if f".tmp.{process.pid}." in p.name and p.is_dir()]
        time.sleep(0.01)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass                # it ended on its own: the assertion below says so
    process.wait()
    assert temporaries, "the build finished before it could be killed"
    assert all(p.exists() for p in temporaries)
    build_artifact(pendulum, out)
    assert not any(p.exists() for p in temporaries)
    assert complete_build(out / "pendulum") is not None


# 6b. the compile cache ($CODEGEN_COMPILE_CACHE) -----------------------------------------

def test_compile_cache_gives_the_same_module_and_refuses_a_damaged_entry(pendulum, tmp_path, monkeypatch):
    """A second output directory takes the module from the compile cache: the
    same bytes, the same results; a damaged entry is not used (compiled
    again, and the entry repaired); a different compile (another wrapper
    optimization) is another entry."""
    cache = tmp_path / "compile-cache"
    monkeypatch.setenv(compile_stage.COMPILE_CACHE_ENV, str(cache))
    first = build_artifact(pendulum, tmp_path / "a")
    second = build_artifact(pendulum, tmp_path / "b")
    assert first.record["compiled"] == "here" and second.record["compiled"] == "compile cache"
    assert second.timings["kernel"] == 0.0
    extension = first.record["extension"]
    assert (first.package_dir / extension).read_bytes() == (second.package_dir / extension).read_bytes()
    assert_pendulum(codegen.load("pendulum", tmp_path / "b"))

    entries = list((cache / "extensions").iterdir())
    assert len(entries) == 1 and len(list((cache / "kernels").iterdir())) == 1
    entries[0].write_bytes(entries[0].read_bytes()[:-100])       # truncated
    third = build_artifact(pendulum, tmp_path / "c")
    assert third.record["compiled"] == "here"
    assert_pendulum(codegen.load("pendulum", tmp_path / "c"))
    fourth = build_artifact(pendulum, tmp_path / "d")             # the entry was written again
    assert fourth.record["compiled"] == "compile cache"

    level = "-O1" if os.environ.get("CODEGEN_WRAPPER_OPTIMIZATION") == "-O0" else "-O0"
    monkeypatch.setenv("CODEGEN_WRAPPER_OPTIMIZATION", level)
    fifth = build_artifact(pendulum, tmp_path / "e")
    assert fifth.record["compiled"] == "here" and len(list((cache / "extensions").iterdir())) == 2
    assert_pendulum(codegen.load("pendulum", tmp_path / "e"))


# 6c. the Python kernel, made once per output directory -----------------------------------

def test_kernel_is_made_once_per_output_directory(pendulum, disk_model, tmp_path, monkeypatch):
    """The second model built into an output directory links the kernel the
    first build made (no Cython, no compile of it); a damaged kernel is made
    again; two models loaded into one process with RTLD_GLOBAL each call
    their own C (the kernel's names are hidden symbols of each module)."""
    monkeypatch.delenv(compile_stage.COMPILE_CACHE_ENV, raising=False)
    made = []
    original = compile_stage.KernelObject._make
    monkeypatch.setattr(compile_stage.KernelObject, "_make", lambda self: (made.append(1), original(self)))
    out = tmp_path / "out"
    build_artifact(pendulum, out)
    store = out / ".builds" / compile_stage.KERNELS
    [entry] = list(store.iterdir())
    assert made == [1]
    written = entry.read_bytes()
    second = build_artifact(disk_model, out)
    assert made == [1] and second.record["compiled"] == "here"
    assert list(store.iterdir()) == [entry] and entry.read_bytes() == written

    entry.write_bytes(entry.read_bytes()[:-100])                   # truncated
    # kernels of other versions: one unused for 40 days, one for a day
    (store / "old").write_bytes(b"x")
    (store / "recent").write_bytes(b"x")
    os.utime(store / "old", (time.time() - 40 * 86400,) * 2)
    os.utime(store / "recent", (time.time() - 86400,) * 2)
    build_artifact(pendulum, out, force=True)
    assert made == [1, 1]
    assert sorted(p.name for p in store.iterdir()) == sorted([entry.name, "recent"])   # the old one pruned
    assert_pendulum(codegen.load("pendulum", out))
    assert compile_stage._cache_read(compile_stage.KERNELS, entry.name, store) is not None   # repaired

    script = f"""
import os, sys
sys.setdlopenflags(os.RTLD_GLOBAL | os.RTLD_NOW)
import numpy as np
import codegen
pendulum = codegen.load("pendulum", {str(out)!r})
disk = codegen.load("disk", {str(out)!r})
for module in (pendulum, disk):
    assert module._kernel.MODEL_NAME == module.name, module._kernel.MODEL_NAME
    assert module._kernel.SIZES["nq"] == module.nq
point = codegen.operating_point("disk", "upright", v=0.5)
A, B = disk.linearize(point.q, point.u, p=point.p)
print(max(np.linalg.eigvals(A).real))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert float(result.stdout) == pytest.approx(2 * np.sqrt(1 - 3 * 0.25) / np.sqrt(5), rel=1e-12)


# 7. a read-only output directory with a finished build -----------------------------------

def _refuse_writes(monkeypatch):
    """Make every file-system write raise PermissionError, as in a read-only
    directory (the tests run as root, which chmod does not stop)."""
    import builtins
    import io

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied (simulated read-only directory)")

    for name in ("symlink", "replace", "rename", "mkdir", "makedirs", "unlink", "remove", "rmdir",
                 "chmod", "link", "utime"):
        monkeypatch.setattr(os, name, refuse)
    real_open, real_os_open = builtins.open, os.open

    def open_for_reading(file, mode="r", *args, **kwargs):
        if any(flag in mode for flag in "wax+"):
            refuse()
        return real_open(file, mode, *args, **kwargs)

    def os_open_for_reading(path, flags, *args, **kwargs):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            refuse()
        return real_os_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", open_for_reading)
    monkeypatch.setattr(io, "open", open_for_reading)
    monkeypatch.setattr(os, "open", os_open_for_reading)


def test_read_only_output_dir_with_a_finished_build(out, pendulum, disk_out, disk_model, monkeypatch):
    build_artifact(pendulum, out)                      # settle the pendulum's links
    links = [out / "pendulum", disk_out / "disk"]
    links += [p for p in (out / ".builds").iterdir() if p.is_symlink()]
    links += [p for p in (disk_out / ".builds").iterdir() if p.is_symlink()]
    before = {p: (os.lstat(p).st_ino, os.lstat(p).st_mtime_ns) for p in links}
    _refuse_writes(monkeypatch)
    assert build_artifact(pendulum, out).cached
    artifact, formed = build_builtin("disk", disk_out)
    assert artifact.cached and formed == 0.0
    assert build_artifact(disk_model, disk_out).cached
    monkeypatch.undo()
    assert {p: (os.lstat(p).st_ino, os.lstat(p).st_mtime_ns) for p in links} == before
    assert_pendulum(codegen.load("pendulum", out))


def test_read_only_output_dir_without_the_build_is_a_build_error(tmp_path, monkeypatch):
    _refuse_writes(monkeypatch)
    with pytest.raises(BuildError, match="cannot write to .*choose a writable output directory"):
        build_artifact(make_pendulum(), tmp_path / "elsewhere")


# 8. names: built-in names, keywords, length ----------------------------------------------

def test_user_model_may_not_replace_a_builtin(disk_out, disk_model, tmp_path):
    """Where ``python -m codegen build disk`` put the built-in, a user's model named
    ``disk`` is refused; the built-in itself, however built, is not."""
    link_before = os.readlink(disk_out / "disk")
    with pytest.raises(ModelError, match="is the built-in model 'disk'.*choose another name"):
        build_artifact(make_pendulum("disk"), disk_out)
    assert os.readlink(disk_out / "disk") == link_before
    from codegen.pipeline import _check_builtin_name
    # the built-in under another key (another NumPy, say): recognized by its fingerprint
    fingerprint = disk_model.fingerprint()
    _check_builtin_name(disk_model, fingerprint, "0" * 20, disk_out)
    with pytest.raises(ModelError, match="built-in"):
        _check_builtin_name(make_pendulum("disk"), "a user's", "0" * 20, disk_out)
    # where the built-in is not, the name is free
    _check_builtin_name(make_pendulum("disk"), "a user's", "0" * 20, tmp_path)
    assert build_artifact(disk_model, disk_out).cached


def test_keyword_and_overlong_names_are_refused(tmp_path):
    with pytest.raises(ModelError, match="keyword"):
        build_artifact(make_pendulum("import"), tmp_path)
    with pytest.raises(ModelError, match="300 characters; at most 64"):
        build_artifact(make_pendulum("p" * 300), tmp_path)
    assert not (tmp_path / ".builds").exists()


# 9. export to a place that cannot be written ---------------------------------------------

def test_export_to_an_unwritable_place(disk_out, tmp_path):
    from codegen.export import export_c
    blocker = tmp_path / "somefile"
    blocker.write_text("a file, not a directory")
    with pytest.raises(BuildError, match="cannot export disk to .*somefile/sub"):
        export_c(disk_out / "disk", blocker / "sub", "disk", "zero", 0.0, [0.0] * 6, [0.0] * 6, None)
    result = run_cli("export", "disk", "--dir", str(blocker / "sub"), "--output-dir", str(disk_out))
    assert result.returncode == 1
    assert "error: cannot export disk to" in result.stderr and "Traceback" not in result.stderr


# 10. the hint says how to use a build from anywhere --------------------------------------

def test_cli_hint_and_load_from_anywhere(disk_out, tmp_path):
    # a relative --output-dir, from the directory holding it
    result = run_cli("build", "disk", "--output-dir", disk_out.name, cwd=disk_out.parent)
    assert result.returncode == 0, result.stderr
    assert (f"use: codegen.load('disk', output_dir={str(disk_out)!r}) from any directory, "
            f"or import models.disk with {disk_out.parent} on sys.path") in result.stdout
    assert "import generated.disk" not in result.stdout
    script = ("import sys, codegen; print(codegen.load('disk', output_dir=sys.argv[1]).nx); "
              "sys.path.insert(0, sys.argv[2]); import models.disk; print(models.disk.nx)")
    result = subprocess.run([sys.executable, "-c", script, str(disk_out), str(disk_out.parent)],
                            cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["8", "8"]
