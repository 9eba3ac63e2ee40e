"""Properties of the Python API of a generated module, over inputs drawn by
hypothesis: shapes (0 to 2 batch dimensions of 0 to 3 points), dtypes,
memory layouts, broadcasting of t, r and p, NaN and Inf anywhere, points off
the constraints, and partitions (valid, invalid, by name, by index, the
default given explicitly).

The property: every call of linearize, linearize_full, state_derivative,
constraint_residuals and complete either returns what one call per batch
point returns (to the bit), or raises a codegen.errors exception, of the type
the first failing point raises on its own. Never another exception, never a
hang. Inputs that are wrong as a whole (complex values, shapes that do not
broadcast, t with more dimensions than the batch, a bad partition) must give
InputError. derandomize=True: the same examples in every run (CI).
"""

import contextlib
import signal

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import codegen
from codegen.errors import CodegenError, InputError

# consistent points of the disk (q, u): two integer-valued (upright at integer
# speeds), so that int and bool dtypes can also give consistent points
POINTS = [codegen.operating_point("disk", "upright", v=v) for v in (0.0, 1.0, 0.5)] + [
    codegen.operating_point("disk", "steady_turn", lean=0.4, spin_rate=-3.0),
    codegen.operating_point("disk", "steady_turn", lean=-0.2, spin_rate=-4.0, branch=1)]
Q = np.array([p.q for p in POINTS])
U = np.array([p.u for p in POINTS])
P = POINTS[0].p                                      # m, r, g = 1, 1, 1

# (dependent_q, dependent_u, valid): names, indices, other orders, other
# partitions (q2 dependent is singular upright, u1..u3 always), invalid ones
PARTITIONS = [
    (None, None, True),
    (["q6"], ["u4", "u5", "u6"], True),
    ([5], [5, 3, 4], True),
    (np.array([5]), None, True),
    (["q2"], None, True),
    (None, ["u1", "u4", "u5"], True),
    (None, ["u1", "u2", "u3"], True),
    (["q7"], None, False),
    ([6], None, False),
    ([4, 5], None, False),
    (["u1"], None, False),
    ([5.0], None, False),
    (None, [3, 3, 4], False),
]

DTYPES = ["float64", "float32", "int", "bool", "object", "complex", "complex_object"]
LAYOUTS = ["C", "F", "strided", "reversed"]


@contextlib.contextmanager
def time_limit(seconds):
    """A hang fails the example instead of stalling the run."""
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def alarm(signum, frame):
        raise TimeoutError(f"call did not return within {seconds} s")
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def with_dtype(values, dtype):
    """(raw argument, the real numbers it holds, or None if it is complex)."""
    if dtype == "float64":
        raw = values.astype(np.float64)
    elif dtype == "float32":
        raw = values.astype(np.float32)
    elif dtype == "int":
        raw = values.astype(int)
    elif dtype == "bool":
        raw = values != 0
    elif dtype == "object":
        raw = values.astype(object)
    elif dtype == "complex":
        return values + 0j, None
    else:                                         # Python complex numbers in an object array
        raw = (values + 0j).astype(object)
        return raw, (None if raw.size else values.astype(float))   # empty: nothing complex
    return raw, np.asarray(raw, dtype=float)


def with_layout(raw, layout):
    """The same values in another memory layout."""
    if layout == "F":
        return np.asfortranarray(raw)
    if layout == "strided":                      # every other element of a larger array
        wide = np.repeat(raw, 2, axis=-1) if raw.ndim else raw
        return wide[..., ::2] if raw.ndim else raw
    if layout == "reversed":                     # negative strides
        return np.flip(np.flip(raw).copy())
    return raw


@st.composite
def batch_shapes(draw):
    return tuple(draw(st.lists(st.integers(0, 3), min_size=0, max_size=2)))


@st.composite
def sub_shape(draw, shape):
    """A shape that broadcasts to ``shape``: a suffix, with some sizes 1."""
    kept = shape[draw(st.integers(0, len(shape))):]
    return tuple(1 if draw(st.booleans()) else n for n in kept)


@st.composite
def calls(draw):
    shape = draw(batch_shapes())
    q_shape = draw(sub_shape(shape))
    # u mostly from the same points as q (consistent), else independent ones
    same = draw(st.booleans()) or draw(st.booleans())
    u_shape = q_shape if same else draw(sub_shape(shape))
    q_index = draw(st.lists(st.integers(0, len(POINTS) - 1), min_size=int(np.prod(q_shape)),
                            max_size=int(np.prod(q_shape))))
    q_index = np.array(q_index, dtype=int).reshape(q_shape)
    if same:
        u_index = q_index
    else:
        u_index = np.array(draw(st.lists(st.integers(0, len(POINTS) - 1),
                                         min_size=int(np.prod(u_shape)),
                                         max_size=int(np.prod(u_shape)))), dtype=int).reshape(u_shape)
    values = {"q": Q[q_index].copy(), "u": U[u_index].copy()}

    # p: default vector, m and g changed (the constraints do not depend on
    # them), r changed (off the constraints), per point or shared, or a dict
    p_kind = draw(st.sampled_from(["none", "vector", "per_point", "dict", "r_changed"]))
    if p_kind == "per_point":
        p_shape = draw(sub_shape(shape))
        factors = draw(st.lists(st.sampled_from([1.0, 2.0, 0.5]), min_size=int(np.prod(p_shape)),
                                max_size=int(np.prod(p_shape))))
        values["p"] = P * np.array([[f, 1.0, f] for f in factors]).reshape(p_shape + (3,))
    elif p_kind == "vector":
        values["p"] = P * [2.0, 1.0, 1.0]
    elif p_kind == "r_changed":
        values["p"] = P * [1.0, 1.5, 1.0]
    p_dict = {"m": 3.0} if p_kind == "dict" else None

    # t: scalar forms, one per point, or with a trailing axis (refused)
    t_kind = draw(st.sampled_from(["default", "float", "int", "zero_dim", "per_point", "column"]))
    t = {"default": None, "float": 0.25, "int": 2, "zero_dim": np.array(1.5)}.get(t_kind)
    if t_kind == "per_point":
        t = np.linspace(0.0, 1.0, int(np.prod(shape))).reshape(shape) if shape else np.array(0.5)
    elif t_kind == "column":
        t = np.zeros(q_shape + (1,))
    r_kind = draw(st.sampled_from(["none", "empty", "per_point"]))
    r = {"none": None, "empty": np.zeros(0)}.get(r_kind)
    if r_kind == "per_point":
        r = np.zeros(draw(sub_shape(shape)) + (0,))

    # damage: NaN or Inf somewhere, or a point off the configuration constraint
    damage = draw(st.sampled_from(["none", "none", "nan", "inf", "off"]))
    if damage in ("nan", "inf"):
        target = draw(st.sampled_from(["q", "u", "p", "t"]))
        bad = np.nan if damage == "nan" else -np.inf
        if target == "t":
            t = np.array(t if t is not None else 0.0, dtype=float)
            if t.size:
                t.reshape(-1)[draw(st.integers(0, t.size - 1))] = bad
        else:
            if target == "p" and "p" not in values:
                values["p"] = P.copy()
            array = values[target]
            if array.size:
                array.reshape(-1)[draw(st.integers(0, array.size - 1))] = bad
    elif damage == "off" and values["q"].size:
        values["q"].reshape(-1, 6)[draw(st.integers(0, values["q"].size // 6 - 1)), 5] += 0.1

    # the representation of q (and sometimes u)
    dtype = draw(st.sampled_from(DTYPES)) if draw(st.booleans()) else "float64"
    layout = draw(st.sampled_from(LAYOUTS))
    raw, real = {}, {}
    for key in values:
        use = dtype if key == "q" or (key == "u" and draw(st.booleans())) else "float64"
        if np.any(~np.isfinite(values[key])) and use in ("int", "bool"):
            use = "float64"                      # NaN has no integer form
        raw[key], real[key] = with_dtype(values[key], use)
        raw[key] = with_layout(raw[key], layout if key in ("q", "u") else "C")
    if p_dict is not None:
        raw["p"], real["p"] = p_dict, p_dict
    usable = [p for p in PARTITIONS if p[2]] if draw(st.integers(0, 3)) else PARTITIONS
    dependent_q, dependent_u, valid = draw(st.sampled_from(usable))
    function = draw(st.sampled_from(["linearize", "linearize_full", "state_derivative",
                                     "constraint_residuals", "complete"]))
    return dict(function=function, raw=raw, real=real, t=t, r=r, valid_partition=valid,
                partition=dict(dependent_q=dependent_q, dependent_u=dependent_u))


def arguments(function, q, u, r, p, t, partition):
    """Positional and keyword arguments of ``function``: every one takes
    (q, u, r, p, t); only some take a partition."""
    kwargs = {} if t is None else {"t": t}
    args = (q, u, r, p)
    if function in ("linearize", "linearize_full", "complete"):
        kwargs.update(partition)
    return args, kwargs


def batch_shape_or_none(case):
    """The batch shape the arguments broadcast to, or None if the call as a
    whole is wrong (and must raise InputError)."""
    real, t, r, function = case["real"], case["t"], case["r"], case["function"]
    if any(v is None for v in real.values()):
        return None                              # complex values
    if function != "state_derivative" and function != "constraint_residuals" \
            and not case["valid_partition"]:
        return None
    vectors = [real["q"].shape[:-1], real["u"].shape[:-1]]
    if isinstance(real.get("p"), np.ndarray):
        vectors.append(real["p"].shape[:-1])
    if r is not None:
        vectors.append(r.shape[:-1])
    t_shape = np.shape(t) if t is not None else ()
    try:
        shape = np.broadcast_shapes(*vectors, t_shape)
    except ValueError:
        return None
    dims = max(len(s) for s in vectors)
    if 0 < dims < len(t_shape):
        return None                              # t with more dimensions than the batch
    return shape


def one_point(array, shape, index, trailing):
    if array is None or isinstance(array, dict):
        return array
    array = np.asarray(array, dtype=float)
    return np.broadcast_to(array, shape + array.shape[len(array.shape) - trailing:])[index]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(case=calls())
def test_batch_calls_equal_point_calls_or_raise_codegen_errors(disk, case):
    function = getattr(disk, case["function"])
    raw, real = case["raw"], case["real"]
    args, kwargs = arguments(case["function"], raw["q"], raw["u"], case["r"], raw.get("p"),
                             case["t"], case["partition"])
    shape = batch_shape_or_none(case)
    with time_limit(30):
        try:
            result = function(*args, **kwargs)
            error = None
        except CodegenError as raised:
            result, error = None, raised
    # the mix of outcomes: pytest --hypothesis-show-statistics
    event(f"{case['function']}: {type(error).__name__ if error else 'result'}")
    if shape is None:
        assert isinstance(error, InputError), f"expected InputError, got {error!r}"
        return

    # one call per point, with plain float vectors
    expected, first_error = {}, None
    for index in np.ndindex(shape):
        t = case["t"]
        t_point = None if t is None else float(np.broadcast_to(np.asarray(t, dtype=float), shape)[index])
        point = arguments(case["function"], one_point(real["q"], shape, index, 1),
                          one_point(real["u"], shape, index, 1),
                          one_point(case["r"], shape, index, 1),
                          one_point(real.get("p"), shape, index, 1), t_point, case["partition"])
        try:
            expected[index] = function(*point[0], **point[1])
        except CodegenError as raised:
            first_error = raised
            break
    if first_error is not None:
        assert error is not None, f"the batch succeeded where a point raises {first_error!r}"
        assert type(error) is type(first_error), (error, first_error)
        return
    assert error is None, f"the batch raised {error!r} where every point succeeds"
    for part, batch_part in enumerate(result):
        assert batch_part.shape[:len(shape)] == shape
        for index, value in expected.items():
            assert np.array_equal(batch_part[index], value[part]), (case["function"], index)


@settings(max_examples=200, deadline=None)
@given(rows=st.integers(1, 6), cols=st.integers(0, 5), dtype=st.sampled_from([np.intc, np.int64, np.int8]),
       changed=st.one_of(st.none(), st.tuples(st.integers(0, 5), st.integers(0, 4))),
       fortran=st.booleans(), data=st.data())
def test_same_rows_is_the_elementwise_comparison(rows, cols, dtype, changed, fortran, data):
    """results.same_rows (ranks and charts of a batch compared as 64-bit
    words where a row is whole words) says what the elementwise comparison says."""
    from codegen.runtime.results import same_rows
    row = np.array(data.draw(st.lists(st.integers(-1, 60), min_size=cols, max_size=cols)), dtype=dtype)
    a = np.tile(row, (rows, 1))
    if changed is not None and cols:
        i, j = changed[0] % rows, changed[1] % cols
        a[i, j] += 1
    if fortran:
        a = np.asfortranarray(a)
    assert same_rows(a) == bool((a == a[0]).all())


@settings(max_examples=200, deadline=None)
@given(rows=st.integers(1, 7), cols=st.integers(0, 11), dtype=st.sampled_from([np.intc, np.int64, np.int8]),
       fortran=st.booleans(), data=st.data())
def test_flagged_rows_are_the_rows_with_a_flag(rows, cols, dtype, fortran, data):
    """results.flagged_rows (a batch's steadiness flags, columns OR-ed as
    64-bit words where a row is whole words) gives the rows any() finds."""
    from codegen.runtime.results import flagged_rows
    a = np.array(data.draw(st.lists(st.lists(st.sampled_from([0, 0, 0, 1, -1, 2 ** 6]), min_size=cols,
                                             max_size=cols), min_size=rows, max_size=rows)),
                 dtype=dtype).reshape(rows, cols)
    if fortran:
        a = np.asfortranarray(a)
    np.testing.assert_array_equal(flagged_rows(a), np.flatnonzero(a.any(axis=1)))
