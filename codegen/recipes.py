"""Finding a model's build without forming its equations.

A build's key hashes the model's equations (:meth:`codegen.Model.fingerprint`),
so finding it in the cache means forming them: 28 s for a bicycle-rider model
of SymPy's System API. A model that comes from a file, a user's
``path/to/model.py:function`` or a built-in model (``codegen/models/<name>.py``,
``make_model``), is determined by what it depends on, so each build of one
records those dependencies in a *recipe* beside the builds
(``.builds/<stem>.recipe-<id>``, JSON):

* the model file and every *local* module it imported (any Python file that is
  not part of the standard library or of an installed distribution: modules
  beside the model file, packages on ``PYTHONPATH``, editable installs), each
  with its SHA-256;
* the files that would have shadowed an import had they existed beside the
  model file (``helper.py`` next to the model, where ``import helper`` found
  an installed module): they must still not exist;
* the versions of the installed distributions whose modules it imported, and
  always SymPy's, mpmath's, NumPy's and Cython's, and Python's;
* codegen's own sources and templates (inside the recipe's ``<id>``, with
  the compiler, its flags and the Python ABI: what :func:`codegen.compile.cache_key`
  hashes besides the model);
* the model's name and the key of its build.

A later build of the same file and function looks the recipe up first and,
when every recorded file has the same hash, no shadowing file appeared and
every version is the same, uses that key's build without running the model
file (:func:`lookup`). Anything else forms the equations again, and the
equations' fingerprint decides whether to compile.

Modules are found two ways, both recorded: the modules that were first
imported while the model ran (``sys.modules`` before and after), and the
``import`` statements of the model file and of each local module (so a
helper imported earlier in the same process is found too). Before the model
runs again, its local modules (those an earlier run recorded, and those
beside it that it imports) are removed from ``sys.modules``, so that an
edited helper is imported afresh, not taken from the previous import.

Not tracked (``--force``, or ``force=True``, forms the equations again): data
files the model reads (a parameter file, a CSV), environment variables, the
working directory and ``sys.path`` (a module found elsewhere because the model
runs from another directory), modules imported through ``importlib`` by a
module that was imported before the model ran, and randomness or the clock.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import site
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from .compile import _temporary_name, cache_key, file_sha256
from .errors import InputError

RECIPE_FORMAT = 2
# always recorded: what forming any model's equations depends on
BASE_DISTRIBUTIONS = ("sympy", "mpmath", "numpy", "Cython")


def file_hash(path):
    try:
        return file_sha256(path)
    except OSError:
        return None


def _package_dir():
    return Path(__file__).resolve().parent


def pipeline_sources():
    """codegen's files that decide a build, for a model of given equations:
    ``codegen/pipeline.py`` and every module of the package it imports,
    directly or through others (the stages, the model's classes and
    formation, the generator), the package's ``__init__.py``, and every
    template. Found from the ``import`` statements, without importing
    anything (so a cached build is found without loading SymPy)."""
    package = _package_dir()
    found, pending = set(), [package / "__init__.py", package / "pipeline.py"]
    while pending:
        path = pending.pop()
        if path in found or not path.is_file():
            continue
        found.add(path)
        relative = path.relative_to(package.parent).with_suffix("")
        parts = list(relative.parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package_name = module if parts[-1] == "__init__" else module.rpartition(".")[0]
        for name in _imported_names(path, package_name):
            head, _, rest = name.partition(".")
            if head != package.name:
                continue
            target = package.joinpath(*rest.split(".")) if rest else package
            for candidate in (target.with_suffix(".py"), target / "__init__.py"):
                if candidate.is_file():
                    pending.append(candidate)
    files = sorted(found)
    for templates in (package.parent / "templates", package / "templates"):
        if templates.is_dir():
            files += sorted(p for p in templates.iterdir() if p.is_file())
    return files


def _codegen_identity():
    """One hash of :func:`pipeline_sources` (paths relative to the package's
    parent, and contents) and of the SymPy version (CSE output depends on it)."""
    package = _package_dir()
    h = hashlib.sha256(f"sympy {_version('sympy')}".encode())
    for path in pipeline_sources():
        try:
            relative = path.relative_to(package.parent)
        except ValueError:
            relative = path
        h.update(str(relative).encode())
        h.update(b"\x00")
        h.update(path.read_bytes())
    return h.hexdigest()


def _version(distribution):
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


# -- where a module comes from --------------------------------------------------------------


def _installed_roots():
    """Folders of installed distributions and of the standard library."""
    paths = sysconfig.get_paths()
    sites = {paths.get("purelib"), paths.get("platlib")}
    try:
        sites |= set(site.getsitepackages())
    except AttributeError:       # virtualenvs of old setups
        pass
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user_site:
        sites.add(user_site)
    sites = [Path(p).resolve() for p in sites if p]
    stdlib = [Path(p).resolve() for p in {paths.get("stdlib"), paths.get("platstdlib")} if p]
    return sites, stdlib


def _within(path, roots):
    return any(path == root or root in path.parents for root in roots)


def _module_file(module):
    """The resolved source (or extension) file of a module, or None."""
    name = getattr(module, "__file__", None)
    if not name:
        return None
    path = Path(name)
    if path.suffix == ".pyc":               # a module imported from bytecode only
        return None
    try:
        return path.resolve()
    except OSError:
        return None


def _imported_names(path, package=None):
    """Every module name an ``import`` statement of the Python file ``path``
    may bind (``import a.b`` -> a, a.b; ``from a import b`` -> a, a.b),
    relative imports resolved against ``package``."""
    try:
        tree = ast.parse(Path(path).read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                names |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            if node.level:
                if not package:
                    continue
                try:
                    base = importlib.util.resolve_name(base, package)
                except (ImportError, ValueError):
                    continue
            parts = base.split(".")
            names |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
            names |= {f"{base}.{alias.name}" for alias in node.names if alias.name != "*"}
    return names


@dataclass
class Dependencies:
    """What a model's equations depend on (see the module docstring)."""

    files: dict            # path -> SHA-256
    absent: list           # paths that must not exist
    packages: dict         # distribution -> version (None: not installed)
    python: str

    def as_json(self):
        return {"files": self.files, "absent": self.absent, "packages": self.packages,
                "python": self.python}

    @classmethod
    def from_json(cls, data):
        return cls(dict(data["files"]), list(data["absent"]), dict(data["packages"]), data["python"])

    def problem(self):
        """None if every recorded dependency is as recorded, else what changed."""
        if self.python != _python():
            return f"Python {self.python} became {_python()}"
        for distribution, version in self.packages.items():
            now = _version(distribution)
            if now != version:
                return f"{distribution} {version} became {now}"
        for path in self.absent:
            if os.path.lexists(path):
                return f"{path} appeared"
        for path, digest in self.files.items():
            if file_hash(path) != digest:
                return f"{path} changed"
        return None


def _python():
    return f"{platform.python_implementation()} {platform.python_version()}"


class ImportWatch:
    """Records the modules a model imports while it runs (``with``), and
    turns them into :class:`Dependencies` (:meth:`dependencies`)."""

    def __init__(self, model_file, package=None):
        self.model_file = Path(model_file).resolve()
        self.folder = self.model_file.parent
        self.package = package          # of the model file, for its relative imports
        self.before = None
        self.new = []

    def __enter__(self):
        self.before = set(sys.modules)
        return self

    def __exit__(self, *exc):
        self.new = [name for name in list(sys.modules) if name not in self.before]
        return False

    def dependencies(self):
        sites, stdlib = _installed_roots()
        pipeline = set(pipeline_sources())      # in the recipe's id
        files = {self.model_file: None}
        absent = set()
        distributions = set(BASE_DISTRIBUTIONS)
        unmapped = []                       # installed modules of no known distribution
        visited = set()

        def classify(name):
            module = sys.modules.get(name)
            path = _module_file(module) if module is not None else None
            if path is None or path in visited:
                return
            visited.add(path)
            if _within(path, sites):
                top = name.partition(".")[0]
                found = _distributions_of(top)
                if found:
                    distributions.update(found)
                else:
                    unmapped.append(path)
            elif _within(path, stdlib) or path in pipeline:
                return
            else:
                files[path] = None
                if path.suffix == ".py":
                    scan(path, module.__name__ if path.name == "__init__.py"
                         else module.__name__.rpartition(".")[0])

        def scan(path, package):
            for name in sorted(_imported_names(path, package)):
                if name in sys.modules:
                    classify(name)
                if "." not in name and path == self.model_file:
                    self._shadowing(name, absent)

        scan(self.model_file, self.package)
        for name in self.new:
            classify(name)
        for path in unmapped:
            files[path] = None
        recorded = {str(path): file_hash(path) for path in files}
        return Dependencies(
            files=dict(sorted(recorded.items())),
            absent=sorted(absent - set(recorded)),
            packages={d: _version(d) for d in sorted(distributions, key=str.lower)},
            python=_python())

    def _shadowing(self, name, absent):
        """The files beside the model that ``import name`` would find first."""
        module = sys.modules.get(name)
        path = _module_file(module) if module is not None else None
        candidates = [self.folder / f"{name}.py", self.folder / name]
        if path is not None and (path == candidates[0] or candidates[1] in path.parents):
            return                      # it is beside the model: recorded as a file
        absent.update(str(c) for c in candidates)


_DISTRIBUTIONS = None


def _distributions_of(top_level):
    """The installed distributions that provide the top-level package ``top_level``."""
    global _DISTRIBUTIONS
    if _DISTRIBUTIONS is None:
        try:
            _DISTRIBUTIONS = importlib.metadata.packages_distributions()
        except Exception:               # broken metadata somewhere: hash the files instead
            _DISTRIBUTIONS = {}
    return _DISTRIBUTIONS.get(top_level, [])


def forget_local_modules(recipe, recorded_files=()):
    """Remove from ``sys.modules`` the local modules a run of ``recipe``'s
    model would import, so that running it again imports their current text:
    the Python files beside the model that it imports, and ``recorded_files``
    (the local modules an earlier run recorded). Installed modules and
    codegen's are kept; so are extension modules (a build cannot be imported
    twice)."""
    folder = recipe.path.parent
    recorded = {Path(p) for p in recorded_files}
    imported = _imported_names(recipe.path, recipe.package)
    sites, stdlib = _installed_roots()
    package_root = _package_dir()
    for name, module in list(sys.modules.items()):
        path = _module_file(module)
        if path is None or path.suffix != ".py":
            continue
        beside = name in imported and folder in path.parents
        if not (beside or path in recorded):
            continue
        if _within(path, sites) or _within(path, stdlib) or package_root in path.parents:
            continue
        del sys.modules[name]


# -- recipes ----------------------------------------------------------------------------------


@dataclass
class Recipe:
    """Where a model comes from: ``function`` of the Python file ``path``;
    ``builtin`` is the built-in model's name (its module file and
    ``make_model``), else None."""

    path: Path
    function: str
    builtin: str | None = None
    package: str | None = None      # the model file's package (a built-in's: codegen.models)
    # a built-in's make_model() keyword arguments, as canonical JSON ("" for none)
    options: str = ""

    @property
    def stem(self):
        return self.builtin or self.path.stem

    @property
    def plain_builtin(self):
        """The built-in model of this name itself (no options), or None."""
        return None if self.options else self.builtin

    def identity(self):
        """The recipe's ``<id>``: the model's file and function (and a
        built-in's options), codegen's sources and templates, and what a build
        key hashes besides the model (compiler, flags, Python ABI, NumPy and Cython)."""
        origin = f"recipe {RECIPE_FORMAT} {self.builtin or ''} {self.path}:{self.function}"
        if self.options:
            origin += f" {self.options}"
        return cache_key(origin, _codegen_identity())

    def index(self, output_dir, identity=None):
        identity = identity or self.identity()
        return Path(output_dir) / ".builds" / f"{self.stem}.recipe-{identity}"

    def read(self, output_dir, identity=None):
        """The recipe's record in ``output_dir`` (for codegen's ``identity``,
        default the current one), or None."""
        try:
            data = json.loads(self.index(output_dir, identity).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("format") != RECIPE_FORMAT:
            return None
        return data

    def lookup(self, data):
        """``((model name, build key), None)`` of the recipe's record ``data``
        (see :meth:`read`) if the recorded dependencies are all unchanged,
        else ``(None, what changed)``."""
        try:
            change = Dependencies.from_json(data["dependencies"]).problem()
            found = str(data["name"]), str(data["key"])
        except (KeyError, TypeError, ValueError):
            return None, "the recipe is damaged"
        return (None, change) if change else (found, None)

    def write(self, output_dir, dependencies, name, key, identity):
        """Record the recipe under codegen's ``identity`` (the one the build was
        looked up with), atomically; only if codegen did not change meanwhile,
        and quietly not where the directory cannot be written (the recipe
        only saves forming the equations next time)."""
        if identity != self.identity():
            return
        index = self.index(output_dir, identity)
        # "builtin": the built-in model itself, whose build its name leads to
        # (with options it is another model: see codegen.pipeline._check_builtin_name)
        data = {"format": RECIPE_FORMAT, "model_file": str(self.path), "function": self.function,
                "builtin": self.plain_builtin, "name": name, "key": key,
                "dependencies": dependencies.as_json()}
        if self.options:
            data["options"] = json.loads(self.options)
        text = json.dumps(data, indent=1) + "\n"
        try:
            if index.exists() and index.read_text() == text:
                return          # a finished build may sit in a read-only directory
            tmp = index.with_name(_temporary_name(index.name, "tmp"))
            tmp.write_text(text)
            os.replace(tmp, index)
        except OSError:
            pass


def builtin_options(options):
    """A built-in's make_model() keyword arguments as canonical JSON (sorted
    keys, "" for none): what its recipe records. Only JSON values (strings,
    numbers, booleans, None, lists and dicts of them; a tuple is recorded as
    a list) are allowed: the recipe tells one call from another by its text."""
    if not options:
        return ""
    try:
        text = json.dumps(options, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise InputError(f"the options of a built-in model must be JSON values (strings, numbers, "
                         f"booleans, None, lists): {error}") from None
    return text


def builtin_recipe(name, options=None):
    """The recipe of the built-in model ``name``, made by ``make_model(**options)``
    (its module is not imported)."""
    from .models import BUILTIN
    spec = importlib.util.find_spec(BUILTIN[name])
    return Recipe(Path(spec.origin).resolve(), "make_model", builtin=name,
                  package=BUILTIN[name].rpartition(".")[0], options=builtin_options(options))


def file_recipe(path, function):
    return Recipe(Path(path).resolve(), function)


def builtin_of_index(index, key):
    """The built-in model whose recipe ``index`` (a path) records ``key``, or None."""
    stem = index.name.partition(".recipe-")[0]
    try:
        text = index.read_text()
    except OSError:
        return None
    try:
        data = json.loads(text)
    except ValueError:          # the first format: "<model name> <key>", named after the built-in
        _, _, recorded = text.strip().partition(" ")
        return stem if recorded == key else None
    if isinstance(data, dict) and data.get("builtin") and data.get("key") == key:
        return data["builtin"]
    return None
