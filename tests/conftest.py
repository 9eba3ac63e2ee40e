"""Shared fixtures: every model is built once per test session into one
temporary output directory, so the derivation and the C compile are paid once."""

import pytest

import codegen


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("generated")


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


@pytest.fixture(scope="session")
def bicycle(build_dir):
    """The compiled bicycle (built once per run, ~30 s; the CLI reuses it
    through the built-in recipe cache when given the same output dir)."""
    from codegen.load import load_package
    from codegen.pipeline import build_builtin
    artifact, _ = build_builtin("bicycle", build_dir)
    return load_package(artifact.package_dir)
