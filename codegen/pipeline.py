"""The pipeline end to end: model -> derive -> emit -> build -> load.

Each stage is its own module; this one only runs them in order, times them,
and consults the build cache first: for a model from a file (a built-in model,
or ``path/to/model.py:function``) by its recipe, without forming the
equations (:mod:`codegen.recipes`), else by the fingerprint of the equations.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.machinery
import importlib.util
import inspect
import os
import sys
import time
from collections import namedtuple
from pathlib import Path

import numpy as np

from . import recipes
from .compile import (KernelObject, build_lock, cache_key, check_name, compile_package,
                      install_cached, read_record, resolve_output_dir)
from .errors import InputError, ModelError
from .load import load_package

# derive, emit and model load SymPy: imported where a model is formed, so that
# a cached build is found and loaded without it (codegen.recipes)

OperatingPoint = namedtuple("OperatingPoint", "q u r p t")


def terminal_progress(prefix=""):
    """A progress callback printing to a terminal; None in CI or when piped."""
    if os.environ.get("CI") or not sys.stderr.isatty():
        return None
    started = time.perf_counter()

    def say(message):
        print(f"  [{time.perf_counter() - started:6.1f} s] {prefix}{message}", file=sys.stderr, flush=True)
    return say


def generator_fingerprint():
    """:func:`codegen.emit.generator_fingerprint` (imported when needed)."""
    from .emit import generator_fingerprint as fingerprint
    return fingerprint()


@functools.lru_cache(maxsize=None)
def _builtin_fingerprint(name, source_sha256):
    """Fingerprint of the built-in model ``name`` as its source (of that hash) makes it."""
    from .models import builtin_module
    return builtin_module(name).make_model().fingerprint()


def _check_builtin_name(model, fingerprint, key, output_dir):
    """Refuse to replace a built-in model's build with another model of its name.

    ``output_dir/<name>`` is what ``codegen.load(name)``, ``import generated.<name>``
    and the CLI's ``build``/``sweep``/``export <name>`` reach; once ``build_builtin``
    (``python -m codegen build <name>``) has put the built-in there, a user's model
    of the same name would silently take its place. The built-in model itself is
    fine however it is built (``codegen.build(codegen.models.disk.make_model())``):
    it is recognized by its fingerprint, recorded in build.json, or else formed
    from the built-in's source (only in this rare case). Elsewhere a user's model
    may use any name.
    """
    current = read_record((output_dir / model.name).resolve())
    if current is None or current.get("key") == key or current.get("fingerprint") == fingerprint:
        return
    builtin = None      # the built-in whose build the link leads to (its recipe says)
    for index in (output_dir / ".builds").glob("*.recipe-*"):
        found = recipes.builtin_of_index(index, current.get("key"))
        if found == model.name:
            builtin = found
    if builtin is None:
        return
    from .models import builtin_module
    source = hashlib.sha256(Path(builtin_module(builtin).__file__).read_bytes()).hexdigest()
    if fingerprint == _builtin_fingerprint(builtin, source):
        return
    raise ModelError(f"{output_dir / model.name} is the built-in model {builtin!r} "
                     f"(python -m codegen build {builtin}); a different model named {model.name!r} "
                     f"would replace it: choose another name, e.g. Model(..., name='my_{model.name}'), "
                     "or another output directory")


def start_kernel(output_dir=None):
    """The Python kernel (the same for every model: codegen.compile.KernelObject),
    made in the background unless this output directory or the compile cache
    has it."""
    from .emit import emit_kernel
    return KernelObject(*emit_kernel(), output_dir)


def build_artifact(model, output_dir=None, force=False, progress=None, builtin=False, kernel=None):
    """Derive, emit and compile ``model`` unless a cached build exists.

    Returns a :class:`codegen.compile.BuiltArtifact` whose ``timings`` holds the
    seconds spent in each stage of this call. ``builtin=True`` says that ``model``
    is the built-in model of its name (as :func:`build_builtin` passes); otherwise
    it may not replace a built-in model's build (see :func:`_check_builtin_name`).
    ``kernel``: the Python kernel, started already (:func:`start_kernel`,
    while the caller formed the equations); this call finishes or cancels it.
    """
    try:
        artifact = _build_artifact(model, output_dir, force, progress, builtin, kernel)
    except BaseException:
        if kernel is not None:
            kernel.cancel()
        raise
    if kernel is not None and artifact.cached:
        kernel.cancel()
    return artifact


def _build_artifact(model, output_dir, force, progress, builtin, kernel):
    from .derive import derive
    from .emit import emit
    from .model import Model

    if not isinstance(model, Model):
        raise ModelError(f"expected a codegen.Model, got {type(model).__name__}")
    check_name(model.name)
    output_dir = resolve_output_dir(output_dir)
    timings = {}
    started = time.perf_counter()
    fingerprint = model.fingerprint()
    key = cache_key(fingerprint, generator_fingerprint())
    if not builtin:
        _check_builtin_name(model, fingerprint, key, output_dir)
    timings["cache lookup"] = time.perf_counter() - started
    if not force:
        artifact = install_cached(output_dir, model.name, key, progress)
        if artifact is not None:
            artifact.timings = timings
            return artifact

    with build_lock(output_dir, model.name, key, progress) as waited:
        if waited and not force:        # another process has built it meanwhile
            artifact = install_cached(output_dir, model.name, key, progress)
            if artifact is not None:
                artifact.timings = timings
                return artifact

        # the Python kernel, made meanwhile (unless it is made already)
        if kernel is None:
            kernel = start_kernel(output_dir)
        try:
            started = time.perf_counter()
            derivation = derive(model, progress)
            timings["derivation"] = time.perf_counter() - started
            sources = emit(derivation, progress)
        except BaseException:
            kernel.cancel()
            raise
        timings.update(sources.timings)

        artifact = compile_package(sources, output_dir, key, kernel, progress, replace=force,
                                   extra_record={"sizes": derivation.sizes, "fingerprint": fingerprint})
    timings.update(artifact.timings)
    artifact.timings = timings
    return artifact


def build_builtin(name, output_dir=None, force=False, progress=None, **options):
    """Build the built-in model ``name``, as ``make_model(**options)`` makes it
    (e.g. ``sensitivities="all"``, ``n=32, closed=True``); returns
    ``(artifact, seconds spent forming its equations)``.

    A built-in model is determined by its source file, codegen's and the
    options, so a cached build is found from its recipe (:mod:`codegen.recipes`)
    without forming the equations: a cached rebuild of the bicycle takes a
    fraction of a second instead of the seconds SymPy needs for its equations.
    Options must be JSON values (strings, numbers, booleans, None, lists).
    """
    from .models import builtin_module

    recipe = recipes.builtin_recipe(name, options)

    def make():
        make_model = builtin_module(name).make_model
        signature = inspect.signature(make_model)
        try:
            signature.bind(**options)
        except TypeError as error:
            raise InputError(f"the built-in model {name!r}: {error} (make_model's options: "
                             f"{', '.join(signature.parameters) or 'none'})") from None
        return make_model(**options)
    return _build_recipe(recipe, make, output_dir, force, progress)


def build_file(spec, output_dir=None, force=False, progress=None):
    """Build the model that ``function`` of ``path/to/file.py`` returns
    (``spec`` = ``"path/to/file.py:function"``); returns ``(artifact, seconds
    spent forming its equations)``.

    The build records what the model's equations depended on (the file, the
    local modules it imported, the versions of the packages it used: see
    :mod:`codegen.recipes`); while all of that is unchanged, a later call finds
    the build without running the file (0 seconds forming). ``force``: form
    the equations and build again whatever the cache holds.
    """
    path, function = _model_file(spec)
    return _build_recipe(recipes.file_recipe(path, function), functools.partial(load_model_file, spec),
                         output_dir, force, progress)


def _build_recipe(recipe, make, output_dir, force, progress):
    """The build of the model ``make()`` returns, found by ``recipe`` where
    its recorded dependencies are unchanged (``make`` is not called then),
    else formed, built (or found by its fingerprint) and recorded."""
    say = progress or (lambda message: None)
    output_dir = resolve_output_dir(output_dir)
    started = time.perf_counter()
    identity = recipe.identity()
    recorded = None if force else recipe.read(output_dir, identity)
    if recorded is not None:
        found, change = recipe.lookup(recorded)
        if found is not None:
            artifact = install_cached(output_dir, *found, progress)
            if artifact is not None:
                artifact.timings = {"cache lookup": time.perf_counter() - started}
                return artifact, 0.0
        else:
            say(f"forming the equations again: {change}")
    # local modules of an earlier run are imported afresh (they may have changed)
    if recorded is None:
        recorded = recipe.read(output_dir, identity) or {}
    earlier = recorded.get("dependencies", {}).get("files", ())
    recipes.forget_local_modules(recipe, earlier)
    model_file = recipes.file_hash(recipe.path)
    # the Python kernel, made while the equations are formed (if it is not made already)
    kernel = start_kernel(output_dir)
    say(f"forming the equations: {recipe.path.name}, {recipe.function}()")
    started = time.perf_counter()
    try:
        with recipes.ImportWatch(recipe.path, recipe.package) as watch:
            model = make()
    except BaseException:
        kernel.cancel()
        raise
    formed = time.perf_counter() - started
    dependencies = watch.dependencies()
    artifact = build_artifact(model, output_dir, force, progress, builtin=recipe.plain_builtin is not None,
                              kernel=kernel)
    # recorded only if nothing changed while the model ran and was built
    if dependencies.files.get(str(recipe.path)) == model_file and dependencies.problem() is None:
        recipe.write(output_dir, dependencies, model.name, artifact.record["key"], identity)
    return artifact, formed


def is_builtin(spec, options=None):
    """Whether ``spec`` names a built-in model; ``options`` (make_model's
    arguments) with anything else are an InputError."""
    from .models import BUILTIN
    if isinstance(spec, str) and spec in BUILTIN:
        return True
    if options:
        raise InputError(f"options ({', '.join(options)}) are a built-in model's make_model() "
                         f"arguments; {spec!r} is not the name of one (built-in models: "
                         f"{', '.join(sorted(BUILTIN))})")
    return False


def build(model, output_dir=None, force=False, progress=None, **options):
    """The whole pipeline: returns the imported generated module.

    ``model`` is a :class:`codegen.Model`; or ``"path/to/file.py:function"``
    (a str or path) naming the function that returns one; or the name of a
    built-in model (``"bicycle"``), with ``options`` its ``make_model``
    keyword arguments (``codegen.build("bicycle", sensitivities="all")``).
    For the last two, a build whose recorded dependencies are unchanged is
    found without running the file or forming the equations
    (:func:`build_file`, :func:`build_builtin`), where a Model must be
    formed to be fingerprinted.
    """
    if is_builtin(model, options):
        artifact, _ = build_builtin(model, output_dir, force, progress, **options)
    elif isinstance(model, (str, os.PathLike)):
        artifact, _ = build_file(model, output_dir, force, progress)
    else:
        artifact = build_artifact(model, output_dir, force, progress)
    module = load_package(artifact.package_dir)
    return module


def load_model_file(spec):
    """The Model returned by ``function`` in ``path/to/file.py:function``.

    Whatever goes wrong on the way (no such file, a directory, a syntax error,
    an exception while the file runs or the function runs, a function that
    needs arguments) is a :class:`ModelError` naming the file, the function and
    what to do; the original exception is its ``__cause__``."""
    path, function = _model_file(spec)
    with _folder_on_path(path):
        module = _run_model_file(path)
        return _call_model_function(spec, path, module, function)


def _model_file(spec):
    """``(path, function)`` of ``path/to/file.py:function``, the file checked
    to exist (a ModelError says what is wrong)."""
    path, _, function = str(spec).rpartition(":")
    if not path or not function:
        from .models import BUILTIN
        raise ModelError(f"expected path/to/file.py:function or the name of a built-in model "
                         f"({', '.join(sorted(BUILTIN))}), got {spec!r}")
    path = Path(path)
    if not path.exists():
        raise ModelError(f"model file {path} does not exist")
    if not path.is_file():
        what = "a directory" if path.is_dir() else "not a regular file"
        raise ModelError(f"model file {path} is {what}: give the Python file that defines "
                         f"{function}(), as path/to/file.py:{function}")
    return path, function


@contextlib.contextmanager
def _folder_on_path(path):
    """The model file's folder first on sys.path while it runs (as for a script
    run with python): it may import modules that lie beside it."""
    folder = str(Path(path).resolve().parent)
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        try:
            sys.path.remove(folder)
        except ValueError:
            pass


def _call_model_function(spec, path, module, function):
    """The Model of ``module``'s ``function`` (see load_model_file)."""
    try:
        make = getattr(module, function)
    except AttributeError:
        raise ModelError(f"{path} has no function {function!r}") from None
    if not callable(make):
        raise ModelError(f"{path}: {function!r} is not a function (it is of type "
                         f"{type(make).__name__}): give a function that returns a codegen.Model")
    try:
        inspect.signature(make).bind()
    except TypeError:
        raise ModelError(f"{path}: {function}{inspect.signature(make)} needs arguments, but it is "
                         "called without any: give its arguments defaults, or write a function "
                         "without arguments that calls it") from None
    except ValueError:      # no signature to inspect (a builtin): let the call decide
        pass
    from .model import Model

    try:
        model = make()
    except Exception as error:
        raise ModelError(f"{spec}: {function}() raised {_where(error, path)}") from error
    if not isinstance(model, Model):
        raise ModelError(f"{spec} returned {type(model).__name__}, expected codegen.Model")
    return model


def _run_model_file(path):
    """Execute the model file ``path`` as a module of its own (not in sys.modules)."""
    module_name = f"codegen_user_model_{abs(hash(str(path.resolve())))}"
    # an explicit loader: the file need not end in .py
    loader = importlib.machinery.SourceFileLoader(module_name, str(path))
    module_spec = importlib.util.spec_from_file_location(module_name, path, loader=loader)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except SyntaxError as error:
        if error.filename and Path(error.filename).resolve() != path.resolve():
            raise ModelError(f"model file {path} could not be run: SyntaxError in a file it "
                             f"imports, {error.filename}, line {error.lineno}: {error.msg}"
                             ) from error
        raise ModelError(f"model file {path} is not valid Python: {error.msg} (line {error.lineno})"
                         ) from error
    except ModuleNotFoundError as error:
        raise ModelError(f"model file {path} could not be run: {_where(error, path)}"
                         + (f"; install {error.name} or correct the import" if error.name else "")
                         ) from error
    except Exception as error:
        raise ModelError(f"model file {path} could not be run: {_where(error, path)}") from error
    return module


def _where(error, path):
    """``"TypeName: message (file.py, line N)"``: the exception and the last line
    of ``path`` its traceback passed through."""
    import traceback

    text = f"{type(error).__name__}: {error}"
    lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__)
             if Path(frame.filename) == path or Path(frame.filename) == path.resolve()]
    return text + (f" ({path.name}, line {lines[-1]})" if lines else "")


def operating_point(model_name, point_name, parameters=None, t=0.0, **kwargs):
    """A consistent operating point of a built-in model.

    ``parameters`` maps parameter names (or SymPy symbols) to values that
    replace the defaults; ``kwargs`` are the arguments of the point (e.g.
    ``v=0.5``), finite real numbers. Returns ``OperatingPoint(q, u, r, p, t)``,
    so ``module.linearize(*op)`` works. Bad arguments raise
    :class:`codegen.errors.InputError` naming the model, the point and the
    argument.
    """
    import inspect
    import math
    import numbers

    from .errors import CodegenError, InputError
    from .models import BUILTIN, builtin_module

    if model_name not in BUILTIN:
        raise InputError(f"no built-in model {model_name!r}; built-in models: "
                         f"{', '.join(sorted(BUILTIN))}")
    module = builtin_module(model_name)
    if point_name not in module.OPERATING_POINTS:
        raise InputError(f"model {model_name!r} has no operating point {point_name!r}; "
                         f"it has: {', '.join(module.OPERATING_POINTS)}")
    maker = module.OPERATING_POINTS[point_name]
    where = f"{model_name} operating point {point_name!r}"

    def shown(value):
        text = repr(value)
        return text if len(text) <= 40 else text[:30] + "..."

    def real(value, label):
        """A finite real number (a bool is a flag, e.g. closed=True: kept)."""
        if isinstance(value, bool):
            return value
        if not isinstance(value, numbers.Real):    # also refuses complex values
            raise InputError(f"{where}: {label} must be a real number, got {shown(value)}")
        try:
            finite = math.isfinite(value)
        except OverflowError:                      # an int too large for a double
            finite = False
        if not finite:
            raise InputError(f"{where}: {label} must be finite, got {shown(value)}")
        return value

    if parameters is not None and not isinstance(parameters, dict):
        raise InputError(f"{where}: parameters must be a dict of name: value, got {parameters!r}")
    values = dict(module.DEFAULT_PARAMETERS)
    for key, value in (parameters or {}).items():
        name = key if isinstance(key, str) else getattr(key, "name", key)   # a SymPy Symbol
        if name not in values:
            raise InputError(f"model {model_name!r} has no parameter {name!r}; "
                             f"parameters: {', '.join(values)}")
        values[name] = float(real(value, f"parameter {name!r}"))
    t = float(real(t, "t"))

    # the arguments the point takes: all but the first (the parameters)
    signature = inspect.signature(maker).parameters
    accepted = list(signature)[1:]
    takes_any = any(a.kind is inspect.Parameter.VAR_KEYWORD for a in signature.values())
    unknown = [key for key in kwargs if key not in accepted]
    if unknown and not takes_any:
        raise InputError(f"{where} has no argument {unknown[0]!r}; its arguments: "
                         f"{', '.join(accepted) or '(none)'}")
    for key, value in kwargs.items():
        real(value, key)

    described = ", ".join(f"{k}={shown(v)}" for k, v in [*kwargs.items(), *(parameters or {}).items()])
    try:
        point = maker(values, **kwargs)
    except CodegenError:
        raise
    except (ArithmeticError, ValueError, TypeError, LookupError, RuntimeError) as error:
        # e.g. a division by a zero radius, no steady turn at that lean
        raise InputError(f"{where} cannot be formed for {described or 'the defaults'}: "
                         f"{type(error).__name__}: {error}") from error
    q, u = np.array(point[0], dtype=float), np.array(point[1], dtype=float)
    r = np.array(point[2] if len(point) > 2 else [], dtype=float)
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(u)) and np.all(np.isfinite(r))):
        raise InputError(f"{where} is not finite for {described or 'the defaults'}")
    return OperatingPoint(q, u, r, np.array(list(values.values()), dtype=float), t)


def resolve_model(spec):
    """``(model, model_module, seconds)`` for a built-in name or
    ``path/to/file.py:function``: the one place where a model named on the
    command line (or in the benchmark) becomes a :class:`Model`. ``model_module``
    is the built-in's module, None for a user's file; ``seconds`` is the time to
    form the equations."""
    from .models import BUILTIN, builtin_module

    started = time.perf_counter()
    if spec in BUILTIN:
        model_module = builtin_module(spec)
        model = model_module.make_model()
    elif ":" in str(spec):
        model_module = None
        model = load_model_file(spec)
    else:
        raise ModelError(f"unknown model {spec!r}: give a built-in name "
                         f"({', '.join(sorted(BUILTIN))}) or path/to/file.py:function")
    return model, model_module, time.perf_counter() - started


def default_point(module, spec=None, model_module=None):
    """``(label, OperatingPoint)``: where the CLI and the benchmark linearize a
    model by default. A built-in model's ``DEFAULT_OPERATING_POINT``; for a
    user's model the zero state with the dependent coordinates completed onto
    the constraints by Newton's method from 0, or from 1 or -1 where the
    constraint Jacobian is singular at 0 (a pendulum's x = 0, say)."""
    from .errors import EvaluationError

    if model_module is not None:
        name, kwargs = model_module.DEFAULT_OPERATING_POINT
        args = ", ".join(f"{k}={v}" for k, v in kwargs.items())
        return f"{name}({args})", operating_point(spec, name, **kwargs)
    failure = None
    for start in (0.0, 1.0, -1.0):
        q = np.zeros(module.nq)
        q[list(module.dependent_q)] = start
        try:
            q, u = module.complete(q, np.zeros(module.nu))
        except EvaluationError as error:
            failure = error
            continue
        label = "q_i = 0, u_i = 0" + (" (dependent ones completed)" if module.nc or module.nv else "")
        return label, OperatingPoint(q, u, np.zeros(module.nr), np.array(module.default_parameters), 0.0)
    raise failure
