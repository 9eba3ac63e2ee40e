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
