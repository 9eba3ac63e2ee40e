"""Shared fixtures: every model is built once per test session into one
temporary output directory, so the derivation and the C compile are paid once."""

import os
import shutil
import tempfile

import pytest

import codegen

# Many tests build the same model into an output directory of their own (the
# cache, the CLI, the README's commands): with a compile cache for the session
# (codegen/compile.py), only the first runs Cython and the compiler. Made here
# by the first process (the xdist controller), whose environment the workers
# and the commands the tests run inherit; removed by it at the end.
_OWN_COMPILE_CACHE = None
if not os.environ.get("CODEGEN_COMPILE_CACHE"):
    _OWN_COMPILE_CACHE = tempfile.mkdtemp(prefix="codegen-compile-cache-")
    os.environ["CODEGEN_COMPILE_CACHE"] = _OWN_COMPILE_CACHE


def pytest_unconfigure(config):
    if _OWN_COMPILE_CACHE is not None:
        shutil.rmtree(_OWN_COMPILE_CACHE, ignore_errors=True)


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory, xdist_worker):
    """The session's output directory. Under pytest-xdist (``-n 2``) the workers
    share one, beside their own temporary directories: a model two workers ask
    for is built once (the second waits for the first: codegen.compile.build_lock)."""
    if xdist_worker == "master":
        return tmp_path_factory.mktemp("generated")
    shared = tmp_path_factory.getbasetemp().parent / "generated"
    shared.mkdir(exist_ok=True)
    return shared


@pytest.fixture(scope="session")
def xdist_worker(request):
    """xdist's worker name ("gw0", ...), or "master" without xdist."""
    return getattr(request.config, "workerinput", {}).get("workerid", "master")


@pytest.fixture(scope="session")
def disk_model():
    from codegen.models import disk
    return disk.make_model()


@pytest.fixture(scope="session")
def disk(build_dir, disk_model):
    """The compiled disk module."""
    return codegen.build(disk_model, output_dir=build_dir)


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite tests/golden/ from the current generator, then review the diff")


@pytest.fixture(scope="session")
def update_golden(request):
    return request.config.getoption("--update-golden")


@pytest.fixture(scope="session")
def disk_sources(disk_model):
    """The generated text of the disk (no compilation)."""
    from codegen.derive import derive
    from codegen.emit import emit
    return emit(derive(disk_model))


class Built:
    """A model, its compiled module and its SymPy/NumPy reference
    (codegen.reference.KaneReference), shared by the tests that compare with it."""

    def __init__(self, model, compiled):
        from codegen.reference import KaneReference
        self.model, self.compiled = model, compiled
        self.ref = KaneReference.from_model(model)

    @classmethod
    def build(cls, model, build_dir):
        return cls(model, codegen.build(model, output_dir=build_dir))

    def p(self, **values):
        return self.compiled.parameters(**values)


# The seed models with their references, shared by several test files
# (test_seed_models.py and test_reference_local.py define their own fixtures of
# these names, which take precedence there).
@pytest.fixture(scope="session")
def fourbar1(build_dir):
    from codegen.models import fourbar
    return Built.build(fourbar.make_model(1), build_dir)


@pytest.fixture(scope="session")
def pendulum(build_dir):
    from codegen.models import spencer_pendulum
    return Built.build(spencer_pendulum.make_model(), build_dir)


@pytest.fixture(scope="session")
def fivebar(build_dir):
    from codegen.models import five_bar
    return Built.build(five_bar.make_model(), build_dir)


@pytest.fixture(scope="session")
def disk_built(disk, disk_model):
    return Built(disk_model, disk)


MOVING_POINTS = ["pendulum", "fourbar", "disk_turn", "disk_upright", "fivebar"]


def moving_point(case, pendulum, fourbar1, disk_built, fivebar):
    """(built, p, q, u) of a moving (non-equilibrium) point of a seed model,
    ``case`` one of MOVING_POINTS."""
    from codegen.models import disk as disk_models
    from codegen.models import five_bar, fourbar, spencer_pendulum
    if case == "pendulum":
        built, p = pendulum, None
        q, u = spencer_pendulum.at_angle(spencer_pendulum.DEFAULT_PARAMETERS, 0.6, 1.3)
    elif case == "fourbar":
        built, p = fourbar1, fourbar1.p(c=1.0, gravity_angle=-1.3)
        q, u = fourbar.general(fourbar.DEFAULT_PARAMETERS, phi=1.2, omega=0.7)
    elif case == "disk_turn":
        built, p = disk_built, None
        q, u = disk_models.steady_turn(disk_models.DEFAULT_PARAMETERS, lean=0.3, spin_rate=-3.0)
    elif case == "disk_upright":
        built, p = disk_built, None
        q, u = disk_models.upright(disk_models.DEFAULT_PARAMETERS, v=0.5)
    else:
        built, p = fivebar, None
        q, u = five_bar.moving(dict(five_bar.DEFAULT_PARAMETERS))
    return built, p, q, u


@pytest.fixture(scope="session")
def bicycle(build_dir):
    """The compiled bicycle (built once per run, ~30 s; the CLI reuses it
    through the built-in recipe cache when given the same output dir)."""
    from codegen.load import load_package
    from codegen.pipeline import build_builtin
    artifact, _ = build_builtin("bicycle", build_dir)
    return load_package(artifact.package_dir)
