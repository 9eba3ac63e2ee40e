from setuptools import setup

setup(
    name="codegen",
    version="0.1.0",
    description="Linearized equations of motion of constrained multibody systems, "
                "generated as C and compiled for Python",
    python_requires=">=3.9",
    packages=["codegen", "codegen.bench", "codegen.models", "codegen.runtime", "codegen.templates"],
    # templates/ lives at the top of the source tree; installed as codegen/templates
    package_dir={"codegen.templates": "templates"},
    package_data={"codegen.templates": ["*.jinja", "helpers.c", "helpers_band.c", "helpers_sparse.c"]},
    install_requires=[
        "sympy>=1.14,<1.15",   # the versions tested (codegen/sympy_adapter.py checks)
        "numpy>=1.22",
        "cython>=3.0",
        "setuptools",
        "jinja2>=3.0",
    ],
    extras_require={
        # CSE output (and so the golden files) depends on the SymPy version
        # dask: the test that sweeps through dask.array; casadi: the peer the
        # benchmark compares with (its test skips without it); control:
        # module.state_space; distributed: the sweep on a cluster of processes;
        # pytest-xdist: the suite on every core (pytest.ini), models built once
        "test": ["pytest>=7", "pytest-xdist>=3", "hypothesis", "scipy", "sympy==1.14.0", "matplotlib", "dask[array]",
                 "casadi", "control>=0.10", "dask[distributed]"],
        # module.state_space(...): a python-control StateSpace
        "control": ["control>=0.10"],
        # the PNG of `python -m codegen sweep`
        "plot": ["matplotlib"],
        # python -m codegen bench: CasADi, the strongest peer
        "bench": ["casadi", "matplotlib"],
    },
)
