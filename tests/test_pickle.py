"""Generated modules pickle by reference to their build (issue 12 item 4).

A pickle holds where the build is (its key link and directory) and its key,
never the compiled bytes; unpickling imports the build in that process. Where
the build is not on disk, the error says how to make it available (build on
the workers from the model, or ship the build), and both ways are exercised
here in fresh interpreters, as on a cluster's workers.
"""

import os
import pickle
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import codegen
from codegen.errors import BuildError
from codegen.runtime import CompiledModel, GeneratedPackage


def run_python(code, env=None, timeout=300):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def test_pickles_are_small_references_and_load_the_same_objects(disk):
    assert isinstance(disk, GeneratedPackage) and isinstance(disk.model, CompiledModel)
    extension = Path(disk._kernel.__file__).stat().st_size
    for obj in (disk, disk.model, disk.linearize, disk.state_space):
        data = pickle.dumps(obj)
        assert len(data) < 2000 < extension              # a reference, not the bytes
        assert disk.build_record["key"].encode() in data
    assert pickle.loads(pickle.dumps(disk)) is disk
    assert pickle.loads(pickle.dumps(disk.model)) is disk.model
    op = codegen.operating_point("disk", "upright", v=0.5)
    linearize = pickle.loads(pickle.dumps(disk.linearize))
    assert np.array_equal(linearize(op.q, op.u)[0], disk.linearize(op.q, op.u)[0])


def test_another_process_loads_the_build_and_computes_the_same(disk, tmp_path):
    op = codegen.operating_point("disk", "steady_turn", lean=0.3, spin_rate=-3.0)
    expected, _ = disk.linearize(op.q, op.u)
    (tmp_path / "job.pkl").write_bytes(pickle.dumps((disk, disk.model.linearize, op.q, op.u)))
    cloudpickle = pytest.importorskip("cloudpickle")
    (tmp_path / "closure.pkl").write_bytes(cloudpickle.dumps(lambda q, u: disk.linearize(q, u)[0]))
    result = run_python(f"""
        import pickle, sys
        import numpy as np
        module, linearize, q, u = pickle.loads(open({str(tmp_path / "job.pkl")!r}, "rb").read())
        closure = pickle.loads(open({str(tmp_path / "closure.pkl")!r}, "rb").read())
        assert "sympy" not in sys.modules                 # loading a build needs no SymPy
        print(type(module).__name__, module.name, module.__name__)
        np.save({str(tmp_path / "A.npy")!r}, module.linearize(q, u)[0])
        np.save({str(tmp_path / "A2.npy")!r}, linearize(q, u)[0])
        np.save({str(tmp_path / "A3.npy")!r}, closure(q, u))
        """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["GeneratedPackage", "disk",
                                     f"codegen_build_disk_{disk.build_record['key']}"]
    for name in ("A.npy", "A2.npy", "A3.npy"):
        assert np.array_equal(np.load(tmp_path / name), expected)


def _copy_build(module, output_dir):
    """Copy ``module``'s build (its directory, key link and name link) into
    ``output_dir``, links kept relative, as rsync -a of generated/ would."""
    build_dir = Path(module.__file__).resolve().parent
    builds = output_dir / ".builds"
    builds.mkdir(parents=True)
    shutil.copytree(build_dir, builds / build_dir.name)
    key_link = f"{module.name}-{module.build_record['key']}"
    os.symlink(build_dir.name, builds / key_link)
    os.symlink(os.path.join(".builds", key_link), output_dir / module.name)


def test_a_missing_build_says_how_to_make_it_available_and_both_ways_work(disk, tmp_path):
    # a build that this test process has not imported, pickled by another process
    original = tmp_path / "original"
    _copy_build(disk, original)
    pickled = tmp_path / "disk.pkl"
    result = run_python(f"""
        import pickle, codegen
        disk = codegen.load("disk", output_dir={str(original)!r})
        assert {str(original)!r} in disk.__file__
        open({str(pickled)!r}, "wb").write(pickle.dumps(disk))
        """)
    assert result.returncode == 0, result.stderr
    shipped = tmp_path / "shipped"
    original.rename(shipped)                        # the path in the pickle no longer exists
    empty = tmp_path / "empty"
    empty.mkdir()
    load = f"""
        import pickle, numpy as np
        disk = pickle.loads(open({str(pickled)!r}, "rb").read())
        print(disk.__file__)
        print(np.linalg.eigvals(disk.linearize([0, 0, 0, 0, 0, -1.0], [0, -0.5, 0, 0.5, 0, 0])[0]).real.max())
        """

    # nothing on this "worker": the error says what to do
    failed = run_python(load, env={"CODEGEN_OUTPUT_DIR": str(empty)})
    assert failed.returncode != 0
    message = failed.stderr.strip().splitlines()[-1]
    assert message.startswith("codegen.errors.BuildError: cannot load the generated model 'disk'")
    for advice in (str(original / ".builds"), "does not exist here", "build on the workers from "
                   "the model", "codegen.build(make_model())", "ship the build",
                   "CODEGEN_OUTPUT_DIR"):
        assert advice in message, advice

    # the build shipped to the worker (a copy of the output directory, found
    # through CODEGEN_OUTPUT_DIR)
    loaded = run_python(load, env={"CODEGEN_OUTPUT_DIR": str(shipped)})
    assert loaded.returncode == 0, loaded.stderr
    path, growth = loaded.stdout.split()
    assert path.startswith(str(shipped))
    assert abs(float(growth) - 2 * np.sqrt(1 - 3 * 0.25) / np.sqrt(5)) < 1e-12

    # built on the worker from the model: the same key, found in its output directory
    build_here = """
        import codegen
        from codegen.models import disk as model
        codegen.build(model.make_model())
        """
    built = run_python(textwrap.dedent(build_here) + textwrap.dedent(load),
                       env={"CODEGEN_OUTPUT_DIR": str(empty)})
    assert built.returncode == 0, built.stderr
    path, growth = built.stdout.split()
    assert path.startswith(str(empty))
    assert abs(float(growth) - 2 * np.sqrt(1 - 3 * 0.25) / np.sqrt(5)) < 1e-12


def test_a_different_build_of_the_name_is_not_taken_for_it(disk, tmp_path, monkeypatch):
    """Another model built under the same name (another key, another
    fingerprint) in the worker's output directory is not loaded in its place;
    the same model built with another key (another compiler) is."""
    from codegen.runtime import _package_from_build

    own = disk.model._build_reference()
    output_dir = Path(own["key_link"]).parent.parent     # where generated/disk leads from
    monkeypatch.setenv("CODEGEN_OUTPUT_DIR", str(output_dir))
    other = {**own, "key": "0" * 20, "fingerprint": "another model",
             "key_link": str(tmp_path / "gone"), "build_dir": str(tmp_path / "gone")}
    with pytest.raises(BuildError, match="cannot load the generated model 'disk'"):
        _package_from_build(other)
    assert _package_from_build({**other, "fingerprint": own["fingerprint"]}) is disk


def test_the_same_key_from_a_removed_folder_is_imported_from_the_new_one(disk, tmp_path):
    """One process imports a build from one output folder, that folder is
    removed (the bench's and scaling's temporary builds), and the same model
    is loaded from another folder: the module comes from the new folder, so
    its record and pickles find their files (it used to be the module of the
    removed folder: 'cannot pickle this model: ... no build.json beside it')."""
    _copy_build(disk, tmp_path / "a")
    _copy_build(disk, tmp_path / "b")
    result = run_python(f"""
        import pickle, shutil
        from pathlib import Path
        import codegen
        first = codegen.load("disk", {str(tmp_path / "a")!r})
        assert codegen.load("disk", {str(tmp_path / "b")!r}) is first   # its folder is still there
        shutil.rmtree({str(tmp_path / "a")!r})
        second = codegen.load("disk", {str(tmp_path / "b")!r})
        assert second is not first and codegen.load("disk", {str(tmp_path / "b")!r}) is second
        print(Path(second.__file__).resolve().parent.parent.parent)
        print(second.build_record["key"] == first.build_record["key"])
        again = pickle.loads(pickle.dumps(second))
        assert again is second, (again, second)
        q, u = second.complete([0.0] * 6, [0.0] * 6)
        print(second.linearize(q, u)[0][0, 0])
        """, env={"CODEGEN_OUTPUT_DIR": str(tmp_path / "b")})
    assert result.returncode == 0, result.stderr
    home, same_key, _ = result.stdout.split()
    assert Path(home) == (tmp_path / "b").resolve() and same_key == "True"
