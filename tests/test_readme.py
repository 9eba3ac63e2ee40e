"""Every code example in README.md runs as printed.

The README is read top to bottom and each fenced block is run in order, as a
newcomer would, in a scratch directory that stands in for the repository root
(the current directory of every command):

* ```` ```bash ````: each line is one shell command (``pip install`` steps are
  skipped, the package under test is installed already; the test command itself
  is not run from inside the tests; the benchmark's command is run as printed
  by tests/test_bench.py, ``RUN_ELSEWHERE``);
* ```` ```python ```` whose first line is ``# name.py``: written to that file
  (the user's model file of "Bringing your own model"), in the root and in the
  other folder below;
* any other ```` ```python ````: run twice, each time in a fresh interpreter with
  the root as the current directory: saved in the root (``python block.py``),
  and saved in another folder (``python /elsewhere/example.py``), as a newcomer
  who saves the example anywhere: then that folder, not the current directory,
  is first on ``sys.path``;
* ```` ```text ```` after a command: exactly what that command (each run of it)
  printed on stdout, trailing spaces and blank lines at the ends aside; where
  the prose before the block says the command prints it "among other lines",
  each line shown must be one of the printed lines, in this order.

At the end, every file the examples left in the root must be ignored by the
repository's ``.gitignore`` (``out/``, ``sweep_*``, ``bicycle_lqr.png``...).

The root's ``generated/`` is the session's build directory, and
``CODEGEN_OUTPUT_DIR`` points at it, so ``import generated.disk`` works there
exactly as from the repository root, and the bicycle the other tests built is
found in the cache instead of being built again.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parent.parent
README = REPOSITORY / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
SOME_LINES = "among other lines"


def blocks(text=None):
    """``(kind, body, prose)`` of every fenced block; ``prose`` is the README's
    text between the previous block and this one."""
    text = README.read_text() if text is None else text
    found, end = [], 0
    for match in FENCE.finditer(text):
        found.append((match.group(1), match.group(2), text[end:match.start()]))
        end = match.end()
    return found


# README commands another test runs as printed, not run here a second time:
# the benchmark (minutes of builds and timing) is tests/test_bench.py's disk_bench
RUN_ELSEWHERE = ("python -m codegen bench disk --quick --json bench_disk.json",)


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


def _lines(text):
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def output_mismatch(shown, prose, printed):
    """Why the ```text block ``shown`` is not what a command ``printed`` (None
    if it is): exactly, or, where ``prose`` says "among other lines", as a
    subsequence of the printed lines (each compared without its indentation)."""
    wanted, got = _lines(shown), _lines(printed)
    if SOME_LINES not in " ".join(prose.split()):
        if wanted == got:
            return None
        return "the README shows:\n" + "\n".join(wanted) + "\nbut it printed:\n" + "\n".join(got)
    remaining = iter(line.strip() for line in got)
    for line in wanted:
        if line.strip() and line.strip() not in remaining:
            return f"{line!r} is not printed (in this order):\n" + "\n".join(got)
    return None


def test_output_blocks_are_checked_exactly_unless_the_prose_says_otherwise():
    assert output_mismatch("a\n  b\n", "", "a\n  b  \n\n") is None
    assert output_mismatch("a\n", "prints:", "a\nb\n") is not None           # b is not shown
    assert output_mismatch("a\nc\n", "prints, among\nother lines,", "a\nb\nc\n") is None
    assert output_mismatch("c\na\n", "prints, among other lines,", "a\nb\nc\n") is not None
    kinds = [(kind, prose) for kind, _, prose in blocks("x\n```bash\nls\n```\nit prints\n```text\na\n```\n")]
    assert kinds == [("bash", "x\n"), ("text", "\nit prints\n")]


def test_readme_has_the_examples_this_test_expects():
    kinds = [kind for kind, _, _ in blocks()]
    assert kinds.count("bash") >= 2 and kinds.count("python") >= 2 and "text" in kinds
    first = shell_commands(blocks()[0][1])
    assert first[0].startswith("python -m codegen build disk")


def _run(command, where, cwd, env):
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"{where}: {command}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _untracked_and_not_ignored(root, written):
    """Paths under ``root`` that the repository's .gitignore does not ignore,
    without those in ``written`` (what this test put there itself)."""
    shutil.copyfile(REPOSITORY / ".gitignore", root / ".gitignore")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root,
                            check=True, capture_output=True, text=True).stdout
    paths = [line[3:] for line in status.splitlines()]
    return [path for path in paths if path.split("/")[0] not in written]


def test_readme_examples_run_as_printed(tmp_path, build_dir, bicycle):
    root = tmp_path / "reader"              # stands in for the repository root
    elsewhere = tmp_path / "elsewhere"      # where a newcomer may save an example
    root.mkdir()
    elsewhere.mkdir()
    (root / "generated").symlink_to(build_dir, target_is_directory=True)
    env = dict(os.environ, CODEGEN_OUTPUT_DIR=str(root / "generated"),
               OPENBLAS_NUM_THREADS="1", MPLBACKEND="Agg")
    env.pop("PYTHONPATH", None)   # as a reader's shell: the installed package only
    written = {"generated", ".gitignore", ".git"}
    outputs = None                # what the last command printed (each run of it)
    for number, (kind, body, prose) in enumerate(blocks()):
        where = f"README block {number} ({kind})"
        if kind == "bash":
            commands = [command for command in shell_commands(body)
                        if not command.startswith(RUN_ELSEWHERE)]
            outputs = ["".join(_run(["bash", "-c", command], where, root, env)
                               for command in commands)] if commands else outputs
        elif kind == "python":
            first = body.splitlines()[0].strip()
            match = re.fullmatch(r"#\s*([\w.]+\.py)", first)
            if match:
                for folder in (root, elsewhere):
                    (folder / match.group(1)).write_text(body)
                written.add(match.group(1))
                continue
            script = root / f"readme_block_{number}.py"
            script.write_text(body)
            written.add(script.name)
            example = elsewhere / "example.py"
            example.write_text(body)
            outputs = [_run([sys.executable, script.name], f"{where}, saved in the root", root,
                            env),
                       _run([sys.executable, str(example)], f"{where}, saved in {elsewhere} and "
                            "run from the root", root, env)]
        elif kind == "text":
            assert outputs is not None, f"{where}: output block before any command"
            for printed in outputs:
                mismatch = output_mismatch(body, prose, printed)
                assert mismatch is None, f"{where}: {mismatch}"
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the outputs were not checked against .gitignore")
    left = _untracked_and_not_ignored(root, written)
    assert left == [], f"the README's examples leave files that .gitignore does not ignore: {left}"
