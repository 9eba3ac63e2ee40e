"""The benchmark's operating points: consistent, not an equilibrium, few exact zeros.

The model's default operating point (zeros for a user model) with its
independent coordinates, speeds and inputs moved by about 0.1 and completed
onto the constraints by our module; 63 more points within about 1e-3 of it,
which the C loop and the batch cycle through so that nothing can be hoisted
out of the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..partition import complement
from .common import NPOINTS


@dataclass
class Points:
    """Consistent operating points (rows), with qd*, ud* from our module."""

    t: np.ndarray
    q: np.ndarray
    u: np.ndarray
    r: np.ndarray
    p: np.ndarray     # one parameter vector, shared
    qd: np.ndarray
    ud: np.ndarray

    def __len__(self):
        return len(self.t)

    def row(self, i):
        return dict(t=float(self.t[i]), q=self.q[i].tolist(), u=self.u[i].tolist(),
                    r=self.r[i].tolist(), p=self.p.tolist(), qd=self.qd[i].tolist(),
                    ud=self.ud[i].tolist())


def inputs_of(module, r):
    """``r`` for the module, or None for a model without inputs (an (n, 0) batch
    of inputs is refused by the runtime)."""
    return None if module.nr == 0 else r


def base_point(module, spec, model_module):
    """(q, u, r, p, t) of the model's default operating point
    (:func:`codegen.pipeline.default_point`); where that fails for a user's
    model, seeded random independent coordinates completed onto the constraints."""
    from ..pipeline import default_point

    try:
        _, op = default_point(module, spec, model_module)
        module.linearize(op.q, op.u, inputs_of(module, op.r), op.p)
        return op.q, op.u, op.r, op.p, op.t
    except Exception as error:  # singular or not converged there: try other guesses
        last = error
    rng = np.random.default_rng(1)
    for _ in range(20):
        try:
            q, u = module.complete(rng.uniform(-1, 1, module.nq), np.zeros(module.nu))
            module.linearize(q, u, None)
            return q, u, np.zeros(module.nr), np.array(module.default_parameters), 0.0
        except Exception as error:  # singular or not converged here: try another guess
            last = error
    raise RuntimeError(f"{module.name}: found no consistent operating point to benchmark at "
                       f"(last error: {last})")


def benchmark_points(module, base, count=NPOINTS, seed=0, spread=0.1, jitter=1e-3):
    """``count`` consistent points near ``base`` (see the module docstring)."""
    q0, u0, r0, p, t0 = base
    rng = np.random.default_rng(seed)
    ind_q = complement(module.nq, module.dependent_q)
    ind_u = complement(module.nu, module.dependent_u)
    q = np.tile(np.asarray(q0, float), (count, 1))
    u = np.tile(np.asarray(u0, float), (count, 1))
    r = np.tile(np.asarray(r0, float), (count, 1))
    centre_q = spread * rng.uniform(-1, 1, len(ind_q))
    centre_u = spread * rng.uniform(-1, 1, len(ind_u))
    centre_r = spread * rng.uniform(-1, 1, module.nr)
    q[:, ind_q] += centre_q + jitter * rng.uniform(-1, 1, (count, len(ind_q)))
    u[:, ind_u] += centre_u + jitter * rng.uniform(-1, 1, (count, len(ind_u)))
    r += centre_r + jitter * rng.uniform(-1, 1, (count, module.nr))
    q[0, ind_q] = np.asarray(q0, float)[ind_q] + centre_q
    u[0, ind_u] = np.asarray(u0, float)[ind_u] + centre_u
    r[0] = np.asarray(r0, float) + centre_r
    p = np.asarray(p, float)
    t = np.full(count, float(t0))
    q, u = module.complete(q, u, p=p, t=t)
    qd, ud = module.state_derivative(q, u, inputs_of(module, r), p, t)
    return Points(t, q, u, r, p, qd, ud)
