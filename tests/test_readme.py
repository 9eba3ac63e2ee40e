"""Every code example in README.md runs as printed.

The README is read top to bottom and each fenced block is run in one scratch
directory, in order, as a reader pasting it would:

* ```` ```bash ````: each line is one shell command (``pip install`` steps are
  skipped, the package under test is installed already; the test command itself
  is not run from inside the tests);
* ```` ```python ```` whose first line is ``# name.py``: written to that file
  (the user's model file of "Bringing your own model");
* any other ```` ```python ````: run as a script in a fresh interpreter;
* ```` ```text ```` right after a command: every line of it must appear in what
  that command printed (the eigenvalues of the first command).

The scratch directory's ``generated/`` is the session's build directory, and
``CODEGEN_OUTPUT_DIR`` points at it, so ``import generated.disk`` works there
exactly as from the repository root, and the bicycle the other tests built is
found in the cache instead of being built again.
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def blocks():
    return [(kind, body) for kind, body in FENCE.findall(README.read_text())]


def shell_commands(body):
    """The commands of a bash block, without install steps or the test run."""
    commands = []
    for line in body.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split("&&")]
        parts = [p for p in parts if not p.startswith("pip install")]
        if any(shlex.split(p, comments=True)[:1] == ["pytest"] for p in parts):
            continue
        if parts:
            commands.append(" && ".join(parts))
    return commands


def test_readme_has_the_examples_this_test_expects():
    kinds = [kind for kind, _ in blocks()]
    assert kinds.count("bash") >= 2 and kinds.count("python") >= 2 and "text" in kinds
    first = shell_commands(blocks()[0][1])
    assert first[0].startswith("python -m codegen build disk")


def test_readme_examples_run_as_printed(tmp_path, build_dir, bicycle):
    scratch = tmp_path / "reader"
    scratch.mkdir()
    (scratch / "generated").symlink_to(build_dir, target_is_directory=True)
    env = dict(os.environ, CODEGEN_OUTPUT_DIR=str(scratch / "generated"),
               OPENBLAS_NUM_THREADS="1", MPLBACKEND="Agg")
    env.pop("PYTHONPATH", None)   # as a reader's shell: the installed package only
    last_output = None
    for number, (kind, body) in enumerate(blocks()):
        where = f"README block {number} ({kind})"
        if kind == "bash":
            for command in shell_commands(body):
                result = subprocess.run(["bash", "-c", command], cwd=scratch, env=env,
                                        capture_output=True, text=True, timeout=900)
                assert result.returncode == 0, f"{where}: {command}\n{result.stdout}\n{result.stderr}"
                last_output = result.stdout
        elif kind == "python":
            first = body.splitlines()[0].strip()
            match = re.fullmatch(r"#\s*([\w.]+\.py)", first)
            if match:
                (scratch / match.group(1)).write_text(body)
                continue
            script = scratch / f"readme_block_{number}.py"
            script.write_text(body)
            result = subprocess.run([sys.executable, script.name], cwd=scratch, env=env,
                                    capture_output=True, text=True, timeout=900)
            assert result.returncode == 0, f"{where}:\n{body}\n{result.stdout}\n{result.stderr}"
            last_output = result.stdout
        elif kind == "text":
            assert last_output is not None, f"{where}: output block before any command"
            for line in body.splitlines():
                if line.strip():
                    assert line.strip() in last_output, f"{where}: {line!r} not printed:\n{last_output}"
