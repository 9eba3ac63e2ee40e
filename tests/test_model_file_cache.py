"""A model file's cached build is found without forming its equations
(codegen.recipes), and only while what they depend on is unchanged.

The user's model (a pendulum in Cartesian coordinates, ``pendulum.py``) imports
a local module (``helper.py``, its parameters) and appends a line to
``calls.txt`` each time its function runs, so each test sees whether the
equations were formed:

* unchanged: ``codegen.build("pendulum.py:make_system")``, ``build_file`` and
  the CLI find the build without calling the function (and without loading
  SymPy);
* the model file edited, the helper edited (also within one process, where
  the helper is already imported), a module appearing beside the model that
  an import would now find, another version of a package, ``force``: the
  function runs again; where the equations changed, a new build, else the
  build of the same equations.
"""

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import codegen
from codegen import recipes
from codegen.pipeline import build_builtin, build_file

MODEL = textwrap.dedent('''
    import pathlib
    import sympy as sm
    import sympy.physics.mechanics as me
    from codegen import Model
    import helper

    try:
        import extra_terms          # optional: not there at first
        EXTRA = extra_terms.EXTRA
    except ImportError:
        EXTRA = 0


    def make_system():
        with open(pathlib.Path(__file__).with_name("calls.txt"), "a") as calls:
            calls.write("called\\n")
        x, y = me.dynamicsymbols("x y")
        ux, uy = me.dynamicsymbols("ux uy")
        F = me.dynamicsymbols("F")
        m, L, g = sm.symbols("m L g")
        N = me.ReferenceFrame("N")
        O = me.Point("O")
        O.set_vel(N, 0)
        bob = O.locatenew("bob", x * N.x + y * N.y)
        bob.set_vel(N, ux * N.x + uy * N.y)
        kane = me.KanesMethod(
            N, q_ind=[y], u_ind=[uy], kd_eqs=[x.diff() - ux, y.diff() - uy],
            q_dependent=[x], configuration_constraints=[x**2 + y**2 - L**2],
            u_dependent=[ux], velocity_constraints=[x * ux + y * uy])
        kane.kanes_equations([me.Particle("P", bob, m)],
                             [(bob, m * g * N.x + (F + EXTRA * uy) * N.y)])
        return Model(kane, parameters=dict(zip((m, L, g), helper.PARAMETERS)), inputs=[F],
                     name="cached_pendulum")
''')

HELPER = "PARAMETERS = (1.0, 1.0, 9.81)\n"


@pytest.fixture
def user(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "pendulum.py").write_text(MODEL)
    (folder / "helper.py").write_text(HELPER)
    output = tmp_path / "out"

    class User:
        spec = f"{folder / 'pendulum.py'}:make_system"
        model_file = folder / "pendulum.py"
        helper = folder / "helper.py"
        output_dir = output

        @staticmethod
        def calls():
            path = folder / "calls.txt"
            return len(path.read_text().splitlines()) if path.exists() else 0

        @staticmethod
        def build(**options):
            return build_file(User.spec, output, **options)

        @staticmethod
        def edit(path, text):
            """Write ``text`` to ``path``, with a new modification time even
            within the same clock tick (the hash decides, not the time)."""
            path.write_text(text)
            stamp = time.time() + 1
            os.utime(path, (stamp, stamp))

    yield User
    for name in [n for n, m in sys.modules.items() if getattr(m, "__file__", None)
                 and str(folder) in str(m.__file__)]:
        del sys.modules[name]


def eigenvalue(module):
    q, u = module.complete([0.0, 0.9], [0.0, 0.0])     # q = [y, x]: hanging, x from f_c
    A, _ = module.linearize(q, u)
    return np.abs(np.linalg.eigvals(A).imag).max()


def test_unchanged_model_is_not_run(user):
    first, formed = user.build()
    assert user.calls() == 1 and formed > 0
    again, formed = user.build()
    assert user.calls() == 1 and formed == 0.0 and again.cached
    assert again.package_dir == first.package_dir
    module = codegen.build(user.spec, output_dir=user.output_dir)
    assert user.calls() == 1
    assert abs(eigenvalue(module) - np.sqrt(9.81)) < 1e-9


def test_edited_helper_forms_again_in_the_same_process(user):
    first, _ = user.build()
    assert abs(eigenvalue(codegen.load("cached_pendulum", user.output_dir)) - np.sqrt(9.81)) < 1e-9
    user.edit(user.helper, "PARAMETERS = (1.0, 2.0, 9.81)\n")      # L = 2
    second, formed = user.build()
    assert user.calls() == 2 and formed > 0
    assert not second.cached and second.record["key"] != first.record["key"]
    module = codegen.load("cached_pendulum", user.output_dir)
    assert abs(eigenvalue(module) - np.sqrt(9.81 / 2.0)) < 1e-9   # the new helper's L
    user.build()
    assert user.calls() == 2


def test_edited_model_file_forms_again(user):
    first, _ = user.build()
    user.edit(user.model_file, MODEL.replace("EXTRA * uy", "(EXTRA - 0.5) * uy"))   # damping
    second, formed = user.build()
    assert user.calls() == 2 and formed > 0 and not second.cached
    assert second.record["key"] != first.record["key"]
    user.build()
    assert user.calls() == 2


def test_edit_that_keeps_the_equations_finds_their_build(user):
    first, _ = user.build()
    user.edit(user.model_file, MODEL + "\n# a comment\n")
    second, formed = user.build()
    assert user.calls() == 2 and formed > 0           # formed again: the file changed
    assert second.cached and second.record["key"] == first.record["key"]   # same equations


def test_a_module_that_would_now_be_imported_forms_again(user):
    user.build()
    (user.model_file.parent / "extra_terms.py").write_text("EXTRA = -0.25\n")
    second, _ = user.build()
    assert user.calls() == 2 and not second.cached


def test_another_package_version_forms_again(user):
    first, _ = user.build()
    recipe = recipes.file_recipe(user.model_file, "make_system")
    index = recipe.index(user.output_dir)
    data = json.loads(index.read_text())
    assert data["dependencies"]["packages"]["sympy"]
    assert str(user.helper.resolve()) in data["dependencies"]["files"]
    data["dependencies"]["packages"]["sympy"] = "0.0.1"       # as if SymPy had been upgraded
    index.write_text(json.dumps(data))
    second, formed = user.build()
    assert user.calls() == 2 and formed > 0 and second.record["key"] == first.record["key"]


def test_force_forms_again(user):
    user.build()
    forced, formed = user.build(force=True)
    assert user.calls() == 2 and formed > 0 and not forced.cached


def test_cli_finds_the_build_without_running_the_model_or_loading_sympy(user):
    env = dict(os.environ, CI="true")
    command = [sys.executable, "-m", "codegen", "build", user.spec, "--output-dir", str(user.output_dir)]
    first = subprocess.run(command, capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    assert user.calls() == 1
    again = subprocess.run(command, capture_output=True, text=True, env=env)
    assert again.returncode == 0, again.stderr
    assert user.calls() == 1 and "(cached build)" in again.stdout
    assert "0-3.13209j, 0+3.13209j" in again.stdout
    script = ("import sys, codegen; m = codegen.build(sys.argv[1], output_dir=sys.argv[2]); "
              "print(m.nx, 'sympy' in sys.modules)")
    loaded = subprocess.run([sys.executable, "-c", script, user.spec, str(user.output_dir)],
                            capture_output=True, text=True, env=env)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split() == ["2", "False"] and user.calls() == 1


def test_recipe_records_what_the_model_depends_on(user):
    user.build()
    data = recipes.file_recipe(user.model_file, "make_system").read(user.output_dir)
    dependencies = data["dependencies"]
    folder = user.model_file.parent.resolve()
    assert set(dependencies["files"]) == {str(folder / "pendulum.py"), str(folder / "helper.py")}
    assert str(folder / "extra_terms.py") in dependencies["absent"]
    assert {"sympy", "numpy", "mpmath", "Cython"} <= set(dependencies["packages"])
    assert data["name"] == "cached_pendulum" and data["function"] == "make_system"


def test_pipeline_sources_hold_the_generator():
    """The recipe's identity hashes codegen's pipeline sources without
    importing them: they include every module of the generator fingerprint
    and the model's formation."""
    from codegen.emit import GENERATOR_MODULES

    names = {path.name for path in recipes.pipeline_sources()}
    assert set(GENERATOR_MODULES) <= names
    assert {"eom.py", "differentiate.py", "sympy_adapter.py", "compile.py", "recipes.py"} <= names


def test_builtin_model_is_found_by_its_recipe(tmp_path):
    artifact, formed = build_builtin("spencer_pendulum", tmp_path)
    assert formed > 0
    again, formed = build_builtin("spencer_pendulum", tmp_path)
    assert formed == 0.0 and again.cached and again.package_dir == artifact.package_dir
    data = recipes.builtin_recipe("spencer_pendulum").read(tmp_path)
    assert data["builtin"] == "spencer_pendulum" and data["key"] == artifact.record["key"]


def test_builtin_model_with_options_has_a_recipe_of_its_own(tmp_path):
    """``codegen.build("disk", outputs=True)``: make_model's keyword arguments
    are part of the recipe. A fresh process finds that build without forming
    the equations (SymPy not loaded); without the options it is the plain
    disk's own recipe and build; the options' recipe does not claim the
    built-in's name."""
    env = dict(os.environ, CI="true")
    script = ("import json, sys, codegen; options = json.loads(sys.argv[2]); "
              "m = codegen.build('disk', output_dir=sys.argv[1], **options); "
              "print(m.name, m.nx, 'sympy' in sys.modules)")

    def build(options):
        done = subprocess.run([sys.executable, "-c", script, str(tmp_path), json.dumps(options)],
                              capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert build({"outputs": True})[:2] == ["disk_outputs", "8"]
    assert build({"outputs": True}) == ["disk_outputs", "8", "False"]    # not formed again
    with_options = recipes.builtin_recipe("disk", {"outputs": True})
    plain = recipes.builtin_recipe("disk")
    assert with_options.identity() != plain.identity()
    data = with_options.read(tmp_path)
    assert data["options"] == {"outputs": True} and data["builtin"] is None
    assert data["name"] == "disk_outputs" and plain.read(tmp_path) is None
    assert recipes.builtin_recipe("disk", {"outputs": False}).read(tmp_path) is None
    # the CLI's key=value options (JSON values): the same recipe, so the same build
    cli = subprocess.run([sys.executable, "-m", "codegen", "build", "disk", "outputs=true",
                          "--output-dir", str(tmp_path)], capture_output=True, text=True, env=env)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.startswith("model disk_outputs:") and "(cached build)" in cli.stdout
    assert "-0.894427, 0, 0, 0, 0, 0, 0, 0.894427" in cli.stdout     # at rest: +/- 2/sqrt(5)
    exported = subprocess.run([sys.executable, "-m", "codegen", "export", "disk", "outputs=true", "--dir",
                               str(tmp_path / "c"), "--output-dir", str(tmp_path)],
                              capture_output=True, text=True, env=env)
    assert exported.returncode == 0, exported.stderr
    assert (tmp_path / "c" / "disk_outputs.c").is_file() and (tmp_path / "c" / "disk_outputs.h").is_file()


def test_builtin_model_options_are_checked(tmp_path):
    with pytest.raises(codegen.errors.InputError, match=r"'wheels'.*options: sensitivities, outputs"):
        codegen.build("disk", output_dir=tmp_path, wheels=3)
    with pytest.raises(codegen.errors.InputError, match="must be JSON values"):
        codegen.build("disk", output_dir=tmp_path, outputs={1, 2})
    with pytest.raises(codegen.errors.InputError, match="'dsk' is not the name of one"):
        codegen.build("dsk", output_dir=tmp_path, outputs=True)
    with pytest.raises(codegen.errors.ModelError, match="or the name of a built-in model"):
        codegen.build("dsk", output_dir=tmp_path)
    assert not list(tmp_path.glob(".builds/*.recipe-*"))
    from codegen.__main__ import parse_options
    assert parse_options(["n=32", "closed=true", "sensitivities=all", 'names=["c", "lam"]']) == \
        {"n": 32, "closed": True, "sensitivities": "all", "names": ["c", "lam"]}
    for bad in ("n", "=3", "2n=3"):
        with pytest.raises(codegen.errors.InputError, match="expected key=value"):
            parse_options([bad])
