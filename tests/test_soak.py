"""Soak: processes load and evaluate the disk while another force-rebuilds it.

Three loader slots run short-lived processes one after another (each a fresh
import of whatever build ``out/disk`` leads to at that moment): slot 0 with
``import out.disk``, slots 1 and 2 with ``codegen.load`` in a loop. Meanwhile a
process rebuilds the disk with ``force=True`` (one to three times, as
time allows). Every load and
every evaluation must succeed, and afterwards the output directory must hold
exactly the current build per key, with no temporaries.
"""

import json
import subprocess
import sys
import time

import numpy as np

import codegen
from codegen import compile as compile_stage
from codegen.pipeline import build_artifact

REBUILDS = 3               # at most; at least one, more while within the time budget
REBUILD_BUDGET = 12.0      # seconds after which no new rebuild starts (2 shared cores)
LOADER_SECONDS = 2.0       # lifetime of one loader process

LOADER = r"""
import importlib, json, os, sys, time
import numpy as np
import codegen

out, stop_file, mode, seconds, point = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), json.loads(sys.argv[5])
expected = 2 * (1 - 3 * 0.5 ** 2) ** 0.5 / 5 ** 0.5

def check(module):
    A, _ = module.linearize(point["q"], point["u"])
    values = np.sort(np.linalg.eigvals(A).real)
    assert abs(values[0] + expected) < 1e-9 and abs(values[-1] - expected) < 1e-9, values

count = 0
deadline = time.monotonic() + seconds
if mode == "import":
    sys.path.insert(0, os.path.dirname(out))
    module = importlib.import_module(os.path.basename(out) + ".disk")
while True:
    check(module if mode == "import" else codegen.load("disk", out))
    count += 1
    if time.monotonic() > deadline or os.path.exists(stop_file):
        break
    time.sleep(0.002)       # leave the rebuilding process some of the two cores
print(count)
"""

FORCER = r"""
import sys, time
from codegen.models import disk
from codegen.pipeline import build_artifact

started = time.monotonic()
model = disk.make_model()
done = 0
while done < int(sys.argv[2]) and (done == 0 or time.monotonic() - started < float(sys.argv[3])):
    build_artifact(model, sys.argv[1], force=True)
    done += 1
print(done)
"""


def test_loads_survive_forced_rebuilds(tmp_path, disk_model):
    started = time.monotonic()
    out = tmp_path / "soak"
    build_artifact(disk_model, out)
    first = (out / "disk").resolve()
    op = codegen.operating_point("disk", "upright", v=0.5)
    point = json.dumps({"q": op.q.tolist(), "u": op.u.tolist()})
    stop_file = tmp_path / "stop"

    def loader(mode):
        return subprocess.Popen([sys.executable, "-c", LOADER, str(out), str(stop_file), mode,
                                 str(LOADER_SECONDS), point],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    forcer = subprocess.Popen([sys.executable, "-c", FORCER, str(out), str(REBUILDS), str(REBUILD_BUDGET)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    modes = ["import", "load", "load"]
    slots = [loader(mode) for mode in modes]
    finished = []           # (mode, returncode, stdout, stderr)
    try:
        while forcer.poll() is None and time.monotonic() - started < 240:
            for i, process in enumerate(slots):
                if process.poll() is not None:
                    out_text, err_text = process.communicate()
                    finished.append((modes[i], process.returncode, out_text, err_text))
                    slots[i] = loader(modes[i])
            time.sleep(0.05)
        stop_file.write_text("")
        forced_out, forced_err = forcer.communicate(timeout=60)
        for i, process in enumerate(slots):
            out_text, err_text = process.communicate(timeout=60)
            finished.append((modes[i], process.returncode, out_text, err_text))
    finally:
        for process in [forcer, *slots]:
            if process.poll() is None:
                process.kill()
                process.wait()

    assert forcer.returncode == 0 and 1 <= int(forced_out) <= REBUILDS, forced_err
    failures = [(mode, code, err) for mode, code, _, err in finished if code != 0]
    assert failures == []
    assert len({mode for mode, *_ in finished}) == 2
    assert all(int(text.split()[-1]) >= 1 for _, _, text, _ in finished)
    assert len(finished) >= len(modes) * 2

    # the link leads to a complete build, not the first one; every build directory
    # is the target of its key link; no temporaries remain
    current = (out / "disk").resolve()
    assert current != first and not first.exists()
    record = json.loads((current / "build.json").read_text())
    assert compile_stage.build_problem(current, record) is None
    builds = out / ".builds"
    assert [p.name for p in builds.iterdir() if p.name.startswith(".")] == []
    directories = {p for p in builds.iterdir() if p.is_dir() and not p.is_symlink()}
    targets = {p.resolve() for p in builds.iterdir() if p.is_symlink()}
    assert directories == targets and current in directories
    A, _ = codegen.load("disk", out).linearize(op.q, op.u)
    assert np.isclose(np.sort(np.linalg.eigvals(A).real)[-1], 2 * np.sqrt(1 - 3 * 0.25) / np.sqrt(5))
    assert time.monotonic() - started < 240
