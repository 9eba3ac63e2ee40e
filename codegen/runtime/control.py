"""A generated model's linearization as a python-control ``StateSpace``.

A and B come from ``linearize``; the rows of C that map the states to a
dependent coordinate or speed are rows of the embedding the generated C's
``constraint_maps`` gives (the constraint Jacobians and the partition's
K_c, K_v: exact, no differences); those of the model's outputs (``Model(...,
outputs=...)``) and their rows of D come from its ``outputs`` (exact too).
python-control is optional and imported only here, when asked for.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from . import arguments
from .results import PartitionedResult

# The largest coupling (relative to max(1, |A|)) a dropped state may have
# with the kept ones in state_space(states=...).
DECOUPLED = 1e-10


def state_space(model, q, u, r=None, p=None, t=0.0, outputs=None, *, states=None, inputs=None,
                dependent_q=None, dependent_u=None, tol=1e-8, name=None):
    """:meth:`CompiledModel.state_space <codegen.runtime.CompiledModel.state_space>`."""
    try:
        import control
    except ImportError:
        raise ImportError(f"{model.name}: state_space needs python-control, which is not "
                          "installed: pip install control (or pip install -e \".[control]\" "
                          "in a codegen checkout)") from None
    batch = arguments.batch(model, q, u, r, p, t)
    if batch.shape != ():
        raise InputError(f"{model.name}: state_space takes one operating point (q of shape "
                         f"({model.nq},), u of shape ({model.nu},), a scalar t); got a batch of "
                         f"shape {batch.shape}: call it once per point")
    result = model.linearize(q, u, r, p, t, dependent_q=dependent_q, dependent_u=dependent_u,
                             tol=tol)
    A, B = result
    if isinstance(result, PartitionedResult):     # "auto": the partition chosen here
        dependent_q, dependent_u = result.dependent_q, result.dependent_u
    all_states = model.independent_state_names(dependent_q, dependent_u)
    kept = (list(range(len(all_states))) if states is None else arguments.indices_of(
        model, states, all_states, "states", indices=False, at_least_one=True,
        unknown=lambda item: (f"states: {item!r} is not an independent state of this "
                              f"partition; they are {', '.join(all_states)}"),
        not_once=lambda given: f"states must name at least one state, each once; got {given!r}"))
    dropped = [i for i in range(len(all_states)) if i not in kept]
    columns = (list(range(model.nr)) if inputs is None else arguments.indices_of(
        model, inputs, model.r_names, "inputs",
        unknown=lambda item: (f"inputs: {item!r} is not an input; inputs are "
                              f"{', '.join(model.r_names) or '(none)'}"),
        not_once=lambda given: f"inputs repeats an input: {given!r}"))
    if outputs is None:
        output_names = [all_states[i] for i in kept]
    else:
        full = model.full_state_names
        known = full + tuple(model.y_names)
        measured = (f"; the model's outputs are {', '.join(model.y_names)}" if model.y_names
                    else "")
        output_names = [known[i] for i in arguments.indices_of(
            model, outputs, known, "outputs", indices=False, at_least_one=True,
            unknown=lambda item: (f"outputs: {item!r} is not a coordinate or speed, nor an "
                                  f"output of the model; coordinates and speeds are "
                                  f"{', '.join(full)}" + measured),
            not_once=lambda given: ("outputs must name at least one coordinate, speed or output, "
                                    f"each once; got {given!r}"))]
    C_full, D_full = _output_rows(model, output_names, batch, dependent_q, dependent_u)

    scale = max(1.0, float(np.max(np.abs(A), initial=0.0)))
    if dropped:
        coupling = np.abs(A[np.ix_(kept, dropped)])
        if coupling.size and coupling.max() > DECOUPLED * scale:
            i, j = np.unravel_index(int(np.argmax(coupling)), coupling.shape)
            raise InputError(
                f"{model.name}: states={[all_states[k] for k in kept]} leaves out states that "
                f"enter their equations at this point: d({all_states[kept[i]]})/dt depends on "
                f"{all_states[dropped[j]]} (A entry {A[kept[i], dropped[j]]:.3e}); keep it, "
                "or pass states=None for all states")
        coupling = np.abs(C_full[:, dropped])
        if coupling.size and coupling.max() > DECOUPLED * max(1.0, np.abs(C_full).max()):
            i, j = np.unravel_index(int(np.argmax(coupling)), coupling.shape)
            raise InputError(
                f"{model.name}: output {output_names[i]} depends on the state "
                f"{all_states[dropped[j]]}, which states= leaves out; keep it or choose "
                "other outputs")
    A_kept = A[np.ix_(kept, kept)]
    B_kept = B[np.ix_(kept, columns)]
    C = C_full[:, kept]
    D = D_full[:, columns]
    try:
        return control.ss(A_kept, B_kept, C, D, states=[all_states[i] for i in kept],
                          inputs=[model.r_names[j] for j in columns],
                          outputs=list(output_names), name=model.name if name is None else name)
    except control.ControlDimension:
        if len(output_names) != 1 or columns:
            raise
        # python-control 0.10.2 turns a D of shape (1, 0) into (0, 0) and refuses it
        raise InputError(f"{model.name}: python-control {control.__version__} cannot hold a "
                         "system with one output and no inputs (its issue #1176, fixed after "
                         "0.10.2): ask for two outputs, or choose an input") from None


def _output_rows(model, output_names, batch, dependent_q=None, dependent_u=None):
    """Rows of C (outputs x independent states) and D (outputs x inputs) for
    coordinates, speeds and the model's outputs by name. A coordinate or
    speed: its row of the embedding of the states into all coordinates and
    speeds, as the generated C forms it (:meth:`constraint_maps`), and a zero
    row of D (the constraints hold no inputs). An output of the model: its
    rows of the generated C's ``outputs`` (C, D). Exact."""
    dq = arguments.partition(model, dependent_q, "q")
    du = arguments.partition(model, dependent_u, "u")
    point = batch.row(0)
    args = (point["q"], point["u"], point["r"], point["p"], float(point["t"]))
    maps = model.constraint_maps(*args, dependent_q=dq, dependent_u=du)
    full = model.full_state_names
    C = np.zeros((len(output_names), maps.embedding.shape[-1]))
    D = np.zeros((len(output_names), model.nr))
    states = [k for k, name in enumerate(output_names) if name in full]
    C[states] = maps.embedding[[full.index(output_names[k]) for k in states]]
    measured = [k for k, name in enumerate(output_names) if name not in full]
    if measured:
        # tol=None: linearize checked this point already
        result = model.outputs(*args, dependent_q=dq, dependent_u=du, tol=None)
        rows = [model.y_names.index(output_names[k]) for k in measured]
        C[measured] = result.C[rows]
        D[measured] = result.D[rows]
    return C, D
