"""codegen.lanes.fold_zeros: a tangent stage's straight-line operations with
the entries a group of directions holds at zero folded in by
codegen.straight_line.Trace's rules (the direction lanes' own rendering of a
tangent stage for a group). Property-tested
against the unfolded operations run on the same values: every stored value
the same where the unfolded one is finite (a zero's sign aside), the zeros it reports after the operations
exactly the stores of zero, no definition kept that nothing reads."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from codegen.lanes import fold_zeros
from codegen.straight_line import Element, Operation, Temp

EXPRESSIONS = {"neg": 1, "mul": 2, "sub": 2, "add": 2, "sub_mul": 3, "add_mul": 3, "reciprocal": 1}
INPUTS = 6


def run(operations, values):
    """The operations on values ((array, index) -> float): the stores in order."""
    temps, stored = {}, []

    def value(v):
        if isinstance(v, float):
            return v
        if isinstance(v, Temp):
            return temps[v]
        return values[(v.array, v.index)]

    for o in operations:
        if o.op == "define":
            a = [value(x) for x in o.args]
            temps[o.name] = {"neg": lambda: -a[0], "mul": lambda: a[0] * a[1], "sub": lambda: a[0] - a[1],
                             "add": lambda: a[0] + a[1], "sub_mul": lambda: a[0] - a[1] * a[2],
                             "add_mul": lambda: a[0] + a[1] * a[2],
                             "reciprocal": lambda: 1.0 / a[0] if a[0] else math.inf}[o.expr]()
        elif o.op == "store":
            v = value(o.value)
            values[(o.array, o.index)] = v
            stored.append(((o.array, o.index), v))
    return stored


@st.composite
def stages(draw):
    """Definitions over the inputs d_X[0..5] (primal values w_X too) and the
    temporaries before them, stores into d_Y and carried slots."""
    operations, temps = [], []
    for i in range(draw(st.integers(1, 25))):
        expr = draw(st.sampled_from(sorted(EXPRESSIONS)))
        operand = st.one_of(st.builds(Element, st.sampled_from(["d_X", "w_X"]), st.integers(0, INPUTS - 1)),
                            st.sampled_from(temps) if temps else st.builds(Element, st.just("d_X"),
                                                                           st.integers(0, INPUTS - 1)))
        # a reciprocal is of a primal value (a pivot) in the tangent stages
        primal = st.builds(Element, st.just("w_X"), st.integers(0, INPUTS - 1))
        args = tuple(draw(primal if expr == "reciprocal" else operand) for _ in range(EXPRESSIONS[expr]))
        temps.append(Temp(i))
        operations.append(Operation("define", 0, name=Temp(i), expr=expr, args=args))
        if draw(st.booleans()):
            array = draw(st.sampled_from(["d_Y", "carried"]))
            operations.append(Operation("store", 0, array=array, index=draw(st.integers(0, 3)), value=Temp(i)))
    return operations


@settings(max_examples=300, deadline=None)
@given(stages(), st.sets(st.integers(0, INPUTS - 1)), st.lists(st.floats(-3, 3), min_size=2 * INPUTS,
                                                               max_size=2 * INPUTS))
def test_folding_the_zeros_keeps_every_stored_value(operations, zero, numbers):
    values = {("d_X", i): (0.0 if i in zero else numbers[i]) for i in range(INPUTS)}
    values.update({("w_X", i): numbers[INPUTS + i] for i in range(INPUTS)})
    folded, after = fold_zeros(operations, {("d_X", i) for i in zero})
    expected = run(operations, dict(values))
    got = run(folded, dict(values))
    assert [key for key, _ in got] == [key for key, _ in expected]
    for (key, a), (_, b) in zip(got, expected):
        # where the unfolded value is finite; where it is not (an infinite
        # value times a zero), the lanes' checks fail and the scalar code
        # reports the point, while the folded value may be finite
        assert a == b or not math.isfinite(b), key
    # the zeros after: the inputs held at zero and every entry last stored as a folded zero
    last = dict(got)
    for key in after:
        assert key in {("d_X", i) for i in zero} or last.get(key) == 0.0
    # the operations as they are where no zero is read; else nothing defined that nothing reads
    reads_zero = any(isinstance(v, Element) and v.array == "d_X" and v.index in zero
                     for o in operations for v in (*o.args, o.value))
    assert (folded is operations) == (not reads_zero)
    if reads_zero:
        read = {v for o in folded for v in (*o.args, o.value) if isinstance(v, Temp)}
        assert all(o.name in read for o in folded if o.op == "define")
