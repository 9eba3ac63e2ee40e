"""The results of a generated model's methods that carry more than arrays.

:class:`PartitionedResult` (``"auto"`` partitions: which partition each point
used), :class:`DescriptorForm` (``linearize_descriptor``: the names of the
variables, the ranks) and :class:`LocalLinearization` (``linearize_local``:
bases, ranks, singular values, the chart). Each pickles with its metadata
(and the model: by reference to its build).
"""

from __future__ import annotations

import math

import numpy as np

from .arguments import batch_index


def same_rows(a):
    """Whether every row of the 2-d array ``a`` (at least one row) equals its
    first: as 64-bit words where a row is a whole number of them (a batch's
    ranks or charts, rows of 32-bit integers: a tenth of the time of an
    elementwise comparison, 4 against 54 us for 10^4 points' ranks)."""
    if a.shape[1] and a.flags.c_contiguous and a.shape[1] * a.itemsize % 8 == 0:
        words = a.view(np.int64)
        return bool((words == words[0]).all())
    return bool((a == a[0]).all())


def flagged_rows(a):
    """The indices of the rows of the 2-d integer array ``a`` with an entry
    other than zero: its columns OR-ed together, as 64-bit words where a row
    is a whole number of them (a batch's steadiness flags: 10^4 points of
    the disk's 8 states, a row with a flag in every second point, in 58
    against 112 us for a product with ones, which was twice as fast as
    any(axis=1))."""
    if a.shape[1] and a.flags.c_contiguous and a.shape[1] * a.itemsize % 8 == 0:
        a = a.view(np.int64)
    if not a.shape[1]:
        return np.zeros(0, dtype=np.intp)
    any_set = a[:, 0].copy()
    for j in range(1, a.shape[1]):
        np.bitwise_or(any_set, a[:, j], out=any_set)
    return np.flatnonzero(any_set)


def per_point(values, shape):
    """Per-point integers (e.g. ranks): a Python int when every point has the
    same value, else an int array of the batch shape."""
    values = np.asarray(values).reshape(shape)
    if values.size and np.all(values == values.flat[0]):
        return int(values.flat[0])
    return values.astype(int)


class PartitionedResult(tuple):
    """A result tuple, ``(A, B)`` of ``linearize``/``linearize_full`` or
    ``(q, u)`` of ``complete``, with the partition each point used (returned
    when ``dependent_q`` or ``dependent_u`` is ``"auto"``).

    One point: ``dependent_q``, ``dependent_u`` and ``state_names`` are tuples
    of names. A batch: ``dependent_q`` and ``dependent_u`` are int index arrays
    of shape ``batch + (nc,)`` and ``batch + (nv,)`` (ascending in each row);
    ``uniform`` says whether every point used the same partition, and then
    ``dependent_q_names``, ``dependent_u_names`` and ``state_names`` name it
    (else they are None: the rows of A belong to different states at
    different points; ``point_state_names(i)`` names those of one point).
    """

    def __new__(cls, model, values, shape, dependent_q, dependent_u):
        self = super().__new__(cls, values)
        n = math.prod(shape)
        dq = cls._per_point_indices(dependent_q, model.dependent_q, n, shape, model.nc)
        du = cls._per_point_indices(dependent_u, model.dependent_u, n, shape, model.nv)
        self._model = model
        flat_q, flat_u = dq.reshape(n, model.nc), du.reshape(n, model.nv)
        self.uniform = bool(n == 0 or (np.all(flat_q == flat_q[0]) and np.all(flat_u == flat_u[0])))
        if shape:
            self.dependent_q, self.dependent_u = dq, du
            names = self.uniform and n > 0
            self.dependent_q_names = self._names(flat_q[0], model.q_names) if names else None
            self.dependent_u_names = self._names(flat_u[0], model.u_names) if names else None
            self.state_names = (model.independent_state_names(list(flat_q[0]), list(flat_u[0]))
                                if names else None)
        else:
            self.dependent_q = self.dependent_q_names = self._names(dq, model.q_names)
            self.dependent_u = self.dependent_u_names = self._names(du, model.u_names)
            self.state_names = model.independent_state_names(list(dq), list(du))
        return self

    @staticmethod
    def _per_point_indices(indices, default, n, shape, count):
        """The dependent indices of every point, ascending: ``batch + (count,)``
        from one shared partition (None: the default) or one row per point."""
        indices = np.sort(np.asarray(default if indices is None else indices, dtype=int), axis=-1)
        rows = indices[None] if indices.ndim == 1 else indices
        return np.broadcast_to(rows, (n, count)).reshape(shape + (count,)).copy()

    @staticmethod
    def _names(indices, names):
        return tuple(names[int(i)] for i in indices)

    def point_state_names(self, index):
        """The independent state names (rows of A) of one point of the batch
        (``index``: a tuple of batch indices or a flat int index)."""
        if not isinstance(self.dependent_q, np.ndarray):
            batch_index(index, ())   # refuses anything but () and the flat index 0
            return self.state_names
        index = batch_index(index, self.dependent_q.shape[:-1])
        return self._model.independent_state_names(list(self.dependent_q[index]),
                                                   list(self.dependent_u[index]))

    def __reduce__(self):
        """Pickles with its metadata (and the model: by reference to its build)."""
        return (_rebuild_tuple, (type(self), tuple(self), self.__dict__))


class DescriptorForm(tuple):
    """``(E, A, B)`` of ``linearize_descriptor``: ``E w' = A w + B r``.
    ``variables``: the names of w (coordinates, speeds, ``lambda0``...,
    ``mu0``..., ``nu0``...); ``rank_c``, ``rank_v``: the ranks of J_c and
    B_v (ints when equal at every point of a batch, else int arrays of the
    batch shape)."""

    def __new__(cls, values, variables, rank_c, rank_v):
        self = super().__new__(cls, values)
        self.variables, self.rank_c, self.rank_v = variables, rank_c, rank_v
        return self

    def __reduce__(self):
        """Pickles with its metadata."""
        return (_rebuild_tuple, (type(self), tuple(self), self.__dict__))


def _rebuild_tuple(cls, values, state):
    """A result tuple subclass from its values and attributes (unpickling)."""
    self = tuple.__new__(cls, values)
    self.__dict__.update(state)
    return self


class LocalLinearization:
    """The local state-space form of ``linearize_local``.

    ``A`` (nx x nx), ``B`` (nx x nr): ``d x/dt = A x + B r`` for the local
    coordinates x = [y; z]; ``N_q`` (nq x (nq - rank_c)), ``N_u``
    (nu x (nu - rank_v)): orthonormal bases of the admissible coordinate and
    speed perturbations (null spaces of J_c and B_v at the point);
    ``embedding`` T ((nq + nu) x nx): [delta q; delta u] = T x, with
    T = [[N_q, 0], [C_1 N_q, N_u]]; ``rank_c``, ``rank_v``: the ranks of J_c
    and B_v; ``dof = nu - rank_v`` (degrees of freedom: independent speeds);
    ``nx = (nq - rank_c) + (nu - rank_v)``; ``sigma_c``, ``sigma_v``: the
    singular values of J_c and B_v (descending; for a batch computed when
    first read, from a copy of the points); ``rank_tol``: the relative
    tolerance that decided the ranks.

    The bases: where the model's default partition is well conditioned and
    both ranks are certainly full, N_q and N_u are the Gram-Schmidt
    orthonormalization of the partition's independent directions (C_0 =
    d q / d q_i and C_2, in the order of the independent coordinates and
    speeds), which varies smoothly along a path; elsewhere they come from the
    SVDs of J_c and B_v. Both are orthonormal bases of the same spaces.

    Batches: where every point has the same ranks (``uniform``), the arrays
    stack along the batch axes (A: ``batch + (nx, nx)``) and the ranks are
    ints. Where the ranks differ (a batch that crosses a singular
    configuration), each array is padded with NaN to the largest size in
    the batch (A: ``batch + (max nx, max nx)``, the point's own A in its
    leading ``nx x nx`` block; in ``embedding`` and ``B`` its leading
    ``nx`` columns/rows; N_q and N_u their leading columns), ``uniform`` is
    False, and ``rank_c``, ``rank_v``, ``dof`` and ``nx`` are int arrays of
    the batch shape. ``point(i)`` gives the result of one point, trimmed.
    """

    def __init__(self, *, A, B, N_q, N_u, embedding, rank_c, rank_v, dof, nx, rank_tol,
                 sigma_c=None, sigma_v=None, singular_values=None, uniform=True, shape=(),
                 chart="partition", dependent_q=None, dependent_u=None, charts=None,
                 chart_names=None):
        """``singular_values``: instead of sigma_c and sigma_v, a function
        giving them, called when they are first asked for. ``charts``: per
        point, the dependent indices of the chart's partition (-1: the null
        spaces'), into ``chart_names`` (q_names, u_names)."""
        self.A, self.B, self.N_q, self.N_u, self.embedding = A, B, N_q, N_u, embedding
        self.rank_c, self.rank_v, self.dof, self.nx = rank_c, rank_v, dof, nx
        self._singular_values = singular_values
        self._sigma = (sigma_c, sigma_v) if singular_values is None else None
        self.rank_tol = rank_tol
        self.uniform, self.shape = uniform, shape
        self.chart, self.dependent_q, self.dependent_u = chart, dependent_q, dependent_u
        self._charts, self._chart_names = charts, chart_names

    def __getstate__(self):
        """Pickles with its singular values (computed now if not yet read)."""
        self._sigmas()
        state = dict(self.__dict__)
        state["_singular_values"] = None
        return state

    def _sigmas(self):
        if self._sigma is None:     # computed once, when first asked for
            self._sigma = self._singular_values()
            self._singular_values = None
        return self._sigma

    @property
    def sigma_c(self):
        """The singular values of J_c (descending), per point."""
        return self._sigmas()[0]

    @property
    def sigma_v(self):
        """The singular values of B_v (descending), per point."""
        return self._sigmas()[1]

    @classmethod
    def _from_point(cls, model, one, rank_tol):
        """From the kernel's result at one point: (A, B, T, rank_c, rank_v,
        sigma, chart), the arrays trimmed to the point's size."""
        A, B, T, rank_c, rank_v, sigma, chart = one
        y, z = model.nq - rank_c, model.nu - rank_v
        return cls(A=A, B=B, N_q=T[:model.nq, :y], N_u=T[model.nq:, y:], embedding=T,
                   rank_c=rank_c, rank_v=rank_v, dof=z, nx=y + z, sigma_c=sigma[:model.nc],
                   sigma_v=sigma[model.nc:], rank_tol=rank_tol,
                   **chart_names(model, chart[None], ()))

    @classmethod
    def _from_kernel(cls, model, shape, A, B, T, ranks, sigma, rank_tol, chart):
        """From the kernel's rows (each point's A, B, T packed with its own nx
        in a row at least that large; ranks (n, 2); sigma: a function giving
        the (n, nc + nv) singular values, called when they are asked for)."""
        nq, nu, nr, ns = model.nq, model.nu, model.nr, model.nq + model.nu
        n = math.prod(shape)
        uniform = n == 0 or same_rows(ranks)
        if uniform:      # the common case, and every single point: no padding
            pairs = [(0, 0) if n == 0 else (int(ranks[0, 0]), int(ranks[0, 1]))]
        else:
            pairs = sorted(set(map(tuple, ranks.tolist())))
        sizes = [(nq - rank_c, nu - rank_v) for rank_c, rank_v in pairs]
        width = max(y + z for y, z in sizes)
        wide_y, wide_z = max(y for y, _ in sizes), max(z for _, z in sizes)
        if uniform:      # views of the kernel's rows: no copies
            (y, z), k = sizes[0], width
            A_out, B_out = A[:, :k * k].reshape(n, k, k), B[:, :k * nr].reshape(n, k, nr)
            T_out = T[:, :ns * k].reshape(n, ns, k)
            N_q, N_u = T_out[:, :nq, :y], T_out[:, nq:, y:]
        else:            # padded with NaN to the largest size
            def fill(size):
                return np.full(size, np.nan)
            A_out, B_out = fill((n, width, width)), fill((n, width, nr))
            T_out = fill((n, ns, width))
            N_q, N_u = fill((n, nq, wide_y)), fill((n, nu, wide_z))
        for (rank_c, rank_v), (y, z) in zip(pairs, sizes) if not uniform else ():
            rows = np.nonzero((ranks[:, 0] == rank_c) & (ranks[:, 1] == rank_v))[0]
            count = len(rows)           # explicit: -1 is ambiguous for empty rows
            k = y + z
            A_out[rows, :k, :k] = A[rows, :k * k].reshape(count, k, k)
            B_out[rows, :k] = B[rows, :k * nr].reshape(count, k, nr)
            T_k = T[rows, :ns * k].reshape(count, ns, k)
            T_out[rows, :, :k] = T_k
            N_q[rows, :, :y] = T_k[:, :nq, :y]
            N_u[rows, :, :z] = T_k[:, nq:, y:]

        def batch(array):
            return array.reshape(shape + array.shape[1:])

        if uniform:
            (rank_c, rank_v), (y, z) = pairs[0], sizes[0]
            counts = dict(rank_c=rank_c, rank_v=rank_v, dof=z, nx=y + z)
        else:
            rank_c, rank_v = ranks[:, 0].astype(int), ranks[:, 1].astype(int)
            counts = dict(rank_c=rank_c, rank_v=rank_v, dof=nu - rank_v,
                          nx=(nq - rank_c) + (nu - rank_v))
            counts = {key: value.reshape(shape) for key, value in counts.items()}
        def singular_values():
            values = sigma()
            return batch(values[:, :model.nc]), batch(values[:, model.nc:])

        return cls(A=batch(A_out), B=batch(B_out), N_q=batch(N_q), N_u=batch(N_u),
                   embedding=batch(T_out), singular_values=singular_values, rank_tol=rank_tol,
                   uniform=uniform, shape=shape, **counts, **chart)

    def point(self, index):
        """The result at one point of the batch (``index``: a tuple of batch
        indices, or an int: a flat index in C order), trimmed to its size."""
        index = batch_index(index, self.shape)

        def at(value):
            return value[index] if isinstance(value, np.ndarray) else value

        nx, dof = int(at(self.nx)), int(at(self.dof))
        ny = nx - dof
        chart = dict(chart=self.chart, dependent_q=self.dependent_q, dependent_u=self.dependent_u)
        if self._charts is not None:
            row = self._charts[index]
            q_names, u_names, nc = self._chart_names
            if row.size and np.any(row < 0):
                chart = dict(chart="null space", dependent_q=None, dependent_u=None)
            else:
                chart = dict(chart="partition", dependent_q=tuple(q_names[i] for i in row[:nc]),
                             dependent_u=tuple(u_names[i] for i in row[nc:]))
        return LocalLinearization(
            A=self.A[index][:nx, :nx], B=self.B[index][:nx], N_q=self.N_q[index][:, :ny],
            N_u=self.N_u[index][:, :dof], embedding=self.embedding[index][:, :nx],
            rank_c=int(at(self.rank_c)), rank_v=int(at(self.rank_v)), dof=dof, nx=nx,
            singular_values=lambda: (self.sigma_c[index], self.sigma_v[index]),
            rank_tol=self.rank_tol, **chart)

    def __repr__(self):
        where = f"batch of shape {self.shape}, " if self.shape else ""
        return (f"<LocalLinearization: {where}nx={self.nx}, rank_c={self.rank_c}, "
                f"rank_v={self.rank_v}, dof={self.dof}{'' if self.uniform else ', not uniform'}>")


def is_partition_chart(chart):
    """Whether a local form's chart row (dependent indices, -1: none) is a partition's."""
    return not (np.any(chart < 0)) if chart.size else True


def local_chart(model, chart, ranks):
    """(state names, description) of a local form's chart (a kernel row of
    dependent indices, and the point's ranks), formed once per chart and
    model (each warning of a moving point says it)."""
    return per_model(model, "_local_chart_texts", (tuple(chart.tolist()), int(ranks[0]), int(ranks[1])),
                     lambda: _local_chart(model, chart, ranks))


def per_model(model, cache, key, make):
    """``make()``, kept per model in its cache of that name by ``key`` (at
    most 64 kept: a batch may visit many charts)."""
    found = model.__dict__.setdefault(cache, {})
    value = found.get(key)
    if value is None:
        if len(found) > 64:
            found.clear()
        value = found[key] = make()
    return value


def _local_chart(model, chart, ranks):
    if not is_partition_chart(chart):
        names = tuple(f"y{k}" for k in range(model.nq - int(ranks[0]))) + \
            tuple(f"z{k}" for k in range(model.nu - int(ranks[1])))
        return names, ("the null spaces of J_c and B_v at a singular configuration, states "
                       "y = N_q^T q, z = N_u^T u")
    dq = [model.q_names[i] for i in chart[:model.nc]]
    du = [model.u_names[i] for i in chart[model.nc:]]
    names = model.independent_state_names(dq, du)
    return names, (f"the partition with dependent coordinates {dq} and speeds {du}, "
                   f"states {', '.join(names)}")


def _point_chart(model, row):
    """chart, dependent_q, dependent_u (names) of one point's chart row."""
    if any(i < 0 for i in row):
        return dict(chart="null space", dependent_q=None, dependent_u=None)
    return dict(chart="partition", dependent_q=tuple(model.q_names[i] for i in row[:model.nc]),
                dependent_u=tuple(model.u_names[i] for i in row[model.nc:]))


def chart_names(model, charts, shape):
    """The chart of a LocalLinearization: ``chart``, ``dependent_q``,
    ``dependent_u`` (names) where every point has the same chart, and the
    per-point rows (dependent indices, -1: the null spaces') with the names
    they index, for ``point(i)``."""
    n = charts.shape[0]
    info = dict(charts=charts.reshape(shape + (charts.shape[1],)),
                chart_names=(model.q_names, model.u_names, model.nc))
    if n == 1:              # one point (a single call): its chart's names formed once per model
        return dict(info, **per_model(model, "_chart_names", tuple(charts[0].tolist()),
                                      lambda: _point_chart(model, charts[0].tolist())))
    if n and (charts.size == 0 or charts.min() >= 0 and same_rows(charts)):
        return dict(info, **_point_chart(model, charts[0].tolist()))
    if n and (charts < 0).any(axis=1).all():
        return dict(info, chart="null space", dependent_q=None, dependent_u=None)
    return dict(info, chart="mixed" if n else "partition", dependent_q=None, dependent_u=None)


class EntryResult(tuple):
    """The outputs of an entry point of the kernel (``model.call(name, ...)``,
    codegen/entry_points.py), in the table's order, each an array of the
    batch shape followed by its own shape (rows, cols; a vector: rows); also
    by name (``result.J_c``). Pickles with its names."""

    def __new__(cls, model, names, values, options=None):
        self = super().__new__(cls, values)
        self.names = tuple(names)
        return self

    def __getattr__(self, name):
        names = self.__dict__.get("names", ())
        if name in names:
            return self[names.index(name)]
        raise AttributeError(f"{type(self).__name__} has no {name!r}; it has {', '.join(names)}")

    def __reduce__(self):
        return (_rebuild_tuple, (type(self), tuple(self), self.__dict__))


class ConstraintMaps(EntryResult):
    """The constraint Jacobians and a partition's maps at each point
    (:meth:`CompiledModel.constraint_maps <codegen.runtime.CompiledModel.constraint_maps>`):
    ``J_c``, ``J_vq``, ``B_v``, ``K_c``, ``K_v`` as the generated C computes
    them, the partition (``dependent_q``, ``dependent_u``: the order of K's
    rows; ``independent_q``, ``independent_u``: ascending, the order of
    their columns), and the maps of the admissible perturbations formed from
    them: ``dq = C_0 dq_i``, ``du = C_1 dq + C_2 du_i`` and, together, the
    ``embedding`` of the independent states x = [q_i, u_i] into all
    coordinates and speeds, ``[dq; du] = embedding @ x``."""

    def __new__(cls, model, names, values, options=None):
        self = super().__new__(cls, model, names, values)
        from ..partition import complement
        dq, du = (options or {}).get("dependent_q"), (options or {}).get("dependent_u")
        self.dependent_q = tuple(int(i) for i in (model.dependent_q if dq is None else dq))
        self.dependent_u = tuple(int(i) for i in (model.dependent_u if du is None else du))
        self.independent_q = tuple(complement(model.nq, self.dependent_q))
        self.independent_u = tuple(complement(model.nu, self.dependent_u))
        self.nq, self.nu = model.nq, model.nu
        return self

    @property
    def C_0(self):
        """d q / d q_i (nq x nqi): the identity in the rows of the independent
        coordinates, -K_c in those of the dependent ones."""
        K_c = self.K_c
        C = np.zeros(K_c.shape[:-2] + (self.nq, len(self.independent_q)))
        C[..., _ints(self.independent_q), _ints(range(len(self.independent_q)))] = 1.0
        C[..., _ints(self.dependent_q), :] = -K_c
        return C + 0.0     # no -0.0

    @property
    def C_1(self):
        """d u / d q at fixed independent speeds (nu x nq): -K_q in the rows
        of the dependent speeds (K_v = [K_q, K_u])."""
        K_q = self.K_v[..., :self.nq]
        C = np.zeros(K_q.shape[:-2] + (self.nu, self.nq))
        C[..., _ints(self.dependent_u), :] = -K_q
        return C + 0.0

    @property
    def C_2(self):
        """d u / d u_i at fixed coordinates (nu x nui): the identity in the
        rows of the independent speeds, -K_u in those of the dependent ones."""
        K_u = self.K_v[..., self.nq:]
        C = np.zeros(K_u.shape[:-2] + (self.nu, len(self.independent_u)))
        C[..., _ints(self.independent_u), _ints(range(len(self.independent_u)))] = 1.0
        C[..., _ints(self.dependent_u), :] = -K_u
        return C + 0.0

    @property
    def embedding(self):
        """[[C_0, 0], [C_1 C_0, C_2]] ((nq + nu) x nx): the change of every
        coordinate and speed (rows q, then u) per change of the independent
        states x = [q_i, u_i] on the constraint manifold."""
        C_0, C_1, C_2 = self.C_0, self.C_1, self.C_2
        nqi = C_0.shape[-1]
        T = np.zeros(C_0.shape[:-2] + (self.nq + self.nu, nqi + C_2.shape[-1]))
        T[..., :self.nq, :nqi] = C_0
        T[..., self.nq:, :nqi] = C_1 @ C_0
        T[..., self.nq:, nqi:] = C_2
        return T + 0.0


def _ints(indices):
    return np.array(list(indices), dtype=int)


class OutputLinearization(EntryResult):
    """The model's outputs and their linearization at each point
    (:meth:`CompiledModel.outputs <codegen.runtime.CompiledModel.outputs>`):
    ``(y, C, D)`` with ``y = C x + D r`` on the constraint manifold; the rows
    are ``y_names``, the columns of C ``state_names`` (the independent
    states of the partition), those of D ``r_names``."""

    def __new__(cls, model, names, values, options=None):
        self = super().__new__(cls, model, names, values)
        dq, du = (options or {}).get("dependent_q"), (options or {}).get("dependent_u")
        self.y_names = model.y_names
        self.r_names = model.r_names
        self.state_names = model.independent_state_names(
            None if dq is None else [int(i) for i in dq], None if du is None else [int(i) for i in du])
        return self


class Sensitivities(EntryResult):
    """The parameter sensitivities at each point
    (:meth:`CompiledModel.sensitivities <codegen.runtime.CompiledModel.sensitivities>`):
    ``A``, ``B`` (linearize's) and ``dA``, ``dB``: ``dA[..., j, :, :]`` is
    dA/dp_j for the j-th of ``p_names`` (the model's sensitivity parameters,
    in the order of its parameters), after the batch axes; with outputs also
    ``C``, ``D``, ``dC``, ``dD``. ``state_names``: the rows of A (the
    partition's independent states)."""

    def __new__(cls, model, names, values, options=None):
        self = super().__new__(cls, model, names, values)
        dq, du = (options or {}).get("dependent_q"), (options or {}).get("dependent_u")
        self.p_names = tuple(model.sensitivity_names)
        self.y_names = model.y_names
        self.state_names = model.independent_state_names(
            None if dq is None else [int(i) for i in dq], None if du is None else [int(i) for i in du])
        return self

    def eigenvalues(self):
        """The eigenvalues of A and their derivatives with respect to the
        parameters, for simple eigenvalues: ``(lam, dlam)``, ``lam`` of shape
        batch + (nx,) (numpy.linalg.eig's order), ``dlam`` batch + (nsens,
        nx) with dlam_k/dp_j = w_k^H dA_j v_k / (w_k^H v_k) (v_k, w_k: right
        and left eigenvectors). NaN where an eigenvalue is not simple (w^H v
        near zero: its derivative is not defined)."""
        return eigenvalue_sensitivities(self.A, self.dA)


def eigenvalue_sensitivities(A, dA):
    """Eigenvalues of ``A`` (batch + (n, n)) and their derivatives along
    ``dA`` (batch + (k, n, n)): ``(lam, dlam)``, ``lam`` in numpy.linalg.eig's
    order, ``dlam[..., j, i] = w_i^T dA_j v_i / (w_i^T v_i)`` (v_i, w_i: the
    right and left eigenvectors of lam_i). NaN where lam_i is not simple:
    closer than 1e-8 of A's largest entry to another eigenvalue, or its
    eigenvectors nearly orthogonal to each other's (|w^T v| below 1e-8 of
    |w| |v|): there the derivative is not defined."""
    A, dA = np.asarray(A, dtype=float), np.asarray(dA, dtype=float)
    lam, V = np.linalg.eig(A)
    lam_left, W_left = np.linalg.eig(np.swapaxes(A, -1, -2))   # A^T w = lam w: w^T A = lam w^T
    match = np.argmin(np.abs(lam[..., :, None] - lam_left[..., None, :]), axis=-1)
    W = np.take_along_axis(W_left, match[..., None, :], axis=-1)
    pairing = np.einsum("...ki,...ki->...i", W, V)
    projected = np.einsum("...ki,...jkl,...li->...ji", W, dA.astype(complex), V)
    with np.errstate(divide="ignore", invalid="ignore"):
        dlam = projected / pairing[..., None, :]
    n = A.shape[-1]
    gaps = np.abs(lam[..., :, None] - lam[..., None, :]) + np.where(np.eye(n, dtype=bool), np.inf, 0.0)
    scale = np.maximum(np.abs(A).max(axis=(-1, -2), initial=0.0), 1.0)[..., None]
    simple = (gaps.min(axis=-1, initial=np.inf) > 1e-8 * scale) & \
        (np.abs(pairing) > 1e-8 * np.linalg.norm(W, axis=-2) * np.linalg.norm(V, axis=-2))
    dlam = np.where(simple[..., None, :], dlam, np.nan)
    if not np.iscomplexobj(lam) or np.all(lam.imag == 0):
        lam, dlam = lam.real, dlam.real
    return lam, dlam


# the result class of an entry point (by name) that is not an EntryResult
ENTRY_RESULTS = {"constraint_maps": ConstraintMaps, "outputs": OutputLinearization,
                 "sensitivities": Sensitivities}
