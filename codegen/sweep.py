"""Eigenvalues versus an operating-point parameter (e.g. speed), for people.

``python -m codegen sweep bicycle --param v --from 0 --to 10 --num 201`` writes
a CSV of the eigenvalues, a PNG of their real and imaginary parts (the classic
figure of the Whipple bicycle benchmark) and prints where stability changes,
located by bisection on the generated module's output.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import InputError

# eigenvalues smaller than this (relative to the largest) are structural zeros
# (ignorable coordinates) and do not decide stability
ZERO_EIGENVALUE = 1e-7
UNSTABLE = 1e-12


@dataclass
class Transition:
    value: float          # parameter value where stability changes
    mode: str             # "oscillatory" or "real": the mode that is unstable on one side
    unstable_side: str    # "below" or "above": smaller or larger values, whichever way the sweep ran
    name: str = ""        # model's name for the mode, e.g. "weave"


@dataclass
class Sweep:
    param: str
    values: np.ndarray          # (num,)
    eigenvalues: np.ndarray     # (num, k) complex, sorted by real part then imaginary
    states: tuple
    transitions: list


class _Subsystem:
    """A built model, an operating-point family and the states whose A block counts."""

    def __init__(self, module, make_point, param, states, fixed):
        self.module = module
        self.make_point = make_point
        self.param = param
        self.fixed = fixed
        names = list(module.state_names)
        missing = [s for s in states if s not in names]
        if missing:
            raise InputError(f"unknown states {missing}; states are {names}")
        self.states = tuple(states) if states else tuple(names)
        self.rows = [names.index(s) for s in self.states]

    def matrices(self, values):
        points = [self.make_point(**{**self.fixed, self.param: float(v)}) for v in values]
        q = np.array([p.q for p in points])
        u = np.array([p.u for p in points])
        r = np.array([p.r for p in points])
        p = np.array([p.p for p in points])
        A, _ = self.module.linearize(q, u, r if r.size else None, p)
        return A[:, self.rows][:, :, self.rows]

    def eigenvalues(self, values):
        return np.linalg.eigvals(self.matrices(values))

    def growth(self, value):
        """(largest real part of a non-zero eigenvalue, that eigenvalue)."""
        eigenvalues = self.eigenvalues([value])[0]
        scale = max(1.0, np.abs(eigenvalues).max())
        relevant = eigenvalues[np.abs(eigenvalues) > ZERO_EIGENVALUE * scale]
        if relevant.size == 0:
            return 0.0, 0j
        k = int(np.argmax(relevant.real))
        return float(relevant[k].real), complex(relevant[k])


def _transitions(system, values, growth, mode_names):
    transitions = []
    unstable = [g > UNSTABLE for g, _ in growth]
    for i in range(len(values) - 1):
        if unstable[i] == unstable[i + 1]:
            continue
        low, high = float(values[i]), float(values[i + 1])
        for _ in range(200):
            middle = 0.5 * (low + high)
            if middle in (low, high):
                break
            if (system.growth(middle)[0] > UNSTABLE) == unstable[i]:
                low = middle
            else:
                high = middle
        # below/above are about the parameter's values, not the sweep's direction
        unstable_below = unstable[i] if values[i] < values[i + 1] else unstable[i + 1]
        side = "below" if unstable_below else "above"
        witness = growth[i][1] if unstable[i] else growth[i + 1][1]
        mode = "oscillatory" if abs(witness.imag) > 1e-9 * max(1.0, abs(witness)) else "real"
        value = 0.5 * (low + high)
        # Eigenvalues near zero do not count in the bisection (structural zeros
        # are indistinguishable from them), so a real mode crossing zero is
        # located only where it leaves that band. Follow the crossing
        # eigenvalue itself to its zero instead, when it can be followed.
        stable_end = values[i + 1] if unstable[i] else values[i]
        value = _follow_to_zero(system, low if unstable[i] else high, float(stable_end), value)
        transitions.append(Transition(value, mode, side, mode_names.get(mode, "")))
    return transitions


def _follow_to_zero(system, unstable_value, stable_value, fallback):
    """Parameter where the eigenvalue that is unstable at ``unstable_value``
    has zero real part, by bisection on that eigenvalue (the one nearest to it
    as the parameter moves); ``fallback`` if it cannot be followed to a sign
    change (e.g. a real pair turning into an oscillatory one at zero)."""
    _, witness = system.growth(unstable_value)

    def real_part(value):
        eigenvalues = system.eigenvalues([value])[0]
        return float(eigenvalues[np.argmin(np.abs(eigenvalues - witness))].real)

    low, high = unstable_value, stable_value
    if not (real_part(low) > 0 > real_part(high)):
        return fallback
    for _ in range(200):
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        if real_part(middle) > 0:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)


def sweep(module, make_point, param, start, stop, num, states=(), fixed=None, mode_names=None):
    """Eigenvalues of the ``states`` block of A for ``param`` from start to stop."""
    if isinstance(num, bool) or not isinstance(num, (int, np.integer)) or num < 1:
        raise InputError(f"the number of points must be a whole number >= 1, got {num!r}")
    if not (np.isfinite(start) and np.isfinite(stop)):
        raise InputError(f"the range of {param} must be finite, got {start!r} to {stop!r}")
    system = _Subsystem(module, make_point, param, states, fixed or {})
    values = np.linspace(start, stop, num)
    eigenvalues = system.eigenvalues(values)
    order = np.lexsort((eigenvalues.imag, eigenvalues.real), axis=-1)
    eigenvalues = np.take_along_axis(eigenvalues, order, axis=-1)
    growth = [system.growth(v) for v in values]
    transitions = _transitions(system, values, growth, mode_names or {})
    return Sweep(param, values, eigenvalues, system.states, transitions)


def write_csv(result, path):
    path = Path(path)
    k = result.eigenvalues.shape[1]
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([result.param] + [f"{part}{i}" for i in range(k) for part in ("re", "im")])
        for value, row in zip(result.values, result.eigenvalues):
            writer.writerow([repr(float(value))] + [repr(float(x)) for z in row for x in (z.real, z.imag)])
    return path


def _stable_intervals(result):
    """(start, stop) ranges of the parameter where no eigenvalue that is not a
    structural zero has a positive real part: between the transitions, judged
    at the sample nearest each range's middle."""
    edges = [float(result.values.min())] + sorted(t.value for t in result.transitions) + \
        [float(result.values.max())]
    intervals = []
    for low, high in zip(edges[:-1], edges[1:]):
        i = int(np.argmin(np.abs(result.values - 0.5 * (low + high))))
        eigenvalues = result.eigenvalues[i]
        scale = max(1.0, float(np.abs(eigenvalues).max()))
        relevant = eigenvalues[np.abs(eigenvalues) > ZERO_EIGENVALUE * scale]
        if high > low and (relevant.size == 0 or relevant.real.max() <= UNSTABLE):
            intervals.append((low, high))
    return intervals


def write_png(result, path, title, param_label=None, unit=""):
    """The figure of :func:`sweep_figure` as a PNG; None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig = sweep_figure(result, title, param_label, unit)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return Path(path)


def sweep_figure(result, title, param_label=None, unit=""):
    """Real parts (dots) and |imaginary parts| (crosses) versus the parameter,
    the ranges without a growing mode shaded, where stability changes marked;
    eigenvalues that are zero at every value are counted, not drawn.

    ``param_label`` describes the parameter on the x axis (default: its name),
    ``unit`` its unit (e.g. "m/s"). Returns the matplotlib figure."""
    import matplotlib.pyplot as plt

    label = param_label or result.param
    units = f" [{unit}]" if unit else ""
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=120)
    k = result.eigenvalues.shape[1]
    values = np.repeat(result.values[:, None], k, axis=1)
    # structural zeros (ignorable coordinates) are not drawn: the legend counts them
    scale = max(1.0, float(np.abs(result.eigenvalues).max()))
    shown = np.abs(result.eigenvalues) > ZERO_EIGENVALUE * scale
    zeros = int((~shown).sum(axis=1).min()) if shown.size else 0
    for low, high in _stable_intervals(result):
        ax.axvspan(low, high, color="tab:green", alpha=0.12, linewidth=0)
    ax.axhline(0, color="black", linewidth=0.8)
    real = result.eigenvalues.real
    ax.plot(values[shown], real[shown], "o", markersize=3, color="tab:blue",
            label="real part: growth rate [1/s] (> 0: unstable)")
    imag = np.abs(result.eigenvalues.imag)
    oscillatory = shown & (imag > 1e-6)
    ax.plot(values[oscillatory], imag[oscillatory], "x", markersize=3.5, color="tab:orange",
            label="|imaginary part|: angular frequency [rad/s]")
    if zeros:
        ax.plot([], [], " ", label=f"not drawn: {zeros} eigenvalue{'s' if zeros > 1 else ''} "
                f"that {'are' if zeros > 1 else 'is'} 0 at every {result.param}")
    if _stable_intervals(result):
        ax.fill_between([], [], color="tab:green", alpha=0.12,
                        label="stable: no eigenvalue with positive real part")
    lowest, highest = float(result.values.min()), float(result.values.max())
    span = (highest - lowest) or 1.0
    for i, t in enumerate(sorted(result.transitions, key=lambda t: t.value)):
        ax.axvline(t.value, color="dimgrey", linewidth=1.0, linestyle="--")
        right = (t.value - lowest) / span > 0.75     # label left of the line
        what = f"{t.name} speed" if t.name else f"{t.mode} mode"
        what += f": unstable {t.unstable_side}"
        ax.text(t.value, 0.98 - 0.1 * (i % 2),     # neighbours' labels alternate in height
                f" {what} \n {result.param} = {t.value:.4g}{' ' + unit if unit else ''} ",
                transform=ax.get_xaxis_transform(), ha="right" if right else "left", va="top",
                fontsize=8,
                bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=1))
    data = np.concatenate([real[shown], imag[oscillatory], [0.0]])
    low, high = float(data.min()), float(data.max())
    margin = 0.08 * max(high - low, 1e-9)
    room = 2.5 if len(result.transitions) < 2 else 4.0   # for the labels at the top
    ax.set_ylim(low - margin, high + room * margin)
    if highest > lowest:      # the axis increases also for a descending sweep
        ax.set_xlim(lowest, highest)
    ax.set_xlabel(f"{label}{units}")
    ax.set_ylabel("eigenvalue: real part [1/s], |imaginary part| [rad/s]")
    ax.set_title(title, fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=8, frameon=False)
    return fig
