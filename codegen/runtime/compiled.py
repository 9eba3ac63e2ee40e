"""The Python face of a generated module: :class:`CompiledModel`.

A generated package (``generated/<name>/``) holds a compiled kernel (Cython
loops over the C functions) and builds one :class:`CompiledModel` from it.
Each method does the same four things, each in its own module: check the
options and arguments and broadcast them into a batch (:mod:`.arguments`),
call the kernel (:mod:`.kernel`), turn a failure into an exception that says
what is wrong at which point, or warn of a result at risk
(:mod:`.diagnostics`), and wrap the result (:mod:`.results`). It imports only
NumPy, so loading a generated module does not load SymPy.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..errors import InputError
from ..partition import complement
from . import arguments, control, diagnostics, kernel, pickling
from .arguments import (ITERATIONS, MAX_STEP, NEWTON_TOL, RANK_TOL, STEADY, STEADY_TOL, THREADS,
                        TOL, accepts_old_order, indices_of, option, plain_number)
from .diagnostics import explain_memory, point_partition, raise_status
from .kernel import OK
from .results import (ENTRY_RESULTS, DescriptorForm, EntryResult, LocalLinearization,
                      PartitionedResult, chart_names, local_chart, per_point)

# the scalar options of call's entry points: name -> (rule, the methods' default)
CALL_OPTIONS = {"tol": (TOL, 1e-8), "steady_tol": (STEADY, STEADY_TOL), "rank_tol": (RANK_TOL, None)}


class CompiledModel:
    """Validated, broadcasting access to a generated kernel.

    Every method takes the point as ``(q, u, r, p, t)``: coordinates, speeds,
    inputs (None: zero), parameters (None: the defaults; a dict: by name) and
    time, each a vector along its last axis (t a number) whose leading axes
    are batch axes (see :meth:`linearize`)."""

    # a constraint Jacobian of full rank whose smallest singular value is below
    # this (relative) makes the speed mass matrix singular to working
    # precision: a point near a singular configuration, named as such in errors
    NEAR_RANK_RTOL = diagnostics.NEAR_RANK_RTOL

    def __init__(self, kernel_module, *, name, description, generator_version, q_names,
                 u_names, r_names, p_names, default_parameters, dependent_q, dependent_u,
                 operation_count, y_names=(), sensitivity_names=()):
        """``kernel_module``: the generated package's Cython module ``_<name>``."""
        self._kernel = kernel_module
        self.name = name
        self.description = description
        self.generator_version = generator_version
        self.q_names = tuple(q_names)
        self.u_names = tuple(u_names)
        self.r_names = tuple(r_names)
        self.p_names = tuple(p_names)
        self.y_names = tuple(y_names)      # the outputs of Model(..., outputs=...)
        # the parameters of Model(..., sensitivities=...), in the order of p_names
        self.sensitivity_names = tuple(sensitivity_names)
        self.default_parameters = np.array(default_parameters, dtype=float)
        self.default_parameters.setflags(write=False)
        self.dependent_q = tuple(dependent_q)
        self.dependent_u = tuple(dependent_u)
        self.operation_count = operation_count
        sizes = kernel.sizes(kernel_module)
        self.nq, self.nu, self.nr, self.np = sizes["nq"], sizes["nu"], sizes["nr"], sizes["np"]
        self.nc, self.nv, self.nx = sizes["nc"], sizes["nv"], sizes["nx"]
        expected = (len(q_names), len(u_names), len(r_names), len(p_names),
                    len(dependent_q), len(dependent_u), len(self.y_names), len(self.sensitivity_names))
        if expected != (self.nq, self.nu, self.nr, self.np, self.nc, self.nv,
                        sizes.get("nout", 0), sizes.get("nsens", 0)):
            raise ImportError(f"generated module {name!r}: kernel and metadata disagree; rebuild it")
        missing = kernel.missing_function(kernel_module)
        if missing:
            raise ImportError(f"generated module {name!r} was built by an older codegen (its kernel "
                              f"has no {missing}); rebuild it: python -m codegen build "
                              f"{name} --force (or codegen.build(model, force=True))")
        # kernel.linearize_one without its wrapper's frame (a single call's cost is its overhead)
        self._linearize_one = kernel.linearize_one_function(kernel_module)
        # linearize_local's batches: the size of the local state the last batch
        # had throughout (a guess for the next; nx unless constraints are redundant)
        self._local_width = self.nx
        # condition estimate of a partition block above which IllConditionedWarning
        # is raised: the C estimates it where a pivot is below CONDITION_RTOL
        # times the Jacobian's largest entry (the straight-line code's pivots above
        # it are not estimated), so the threshold is the C's
        self.ill_conditioned = 1.0 / kernel.condition_rtol(kernel_module)
        self.state_names = self.independent_state_names()
        # (state names, description) of the default partition's chart: the
        # single-point calls' NotSteadyWarning says it without forming it again
        self._default_chart = diagnostics.partition_chart(self, None, None, 0)
        pickling.extend_package(self)

    # -- names -----------------------------------------------------------------
    def independent_state_names(self, dependent_q=None, dependent_u=None):
        """Names of x = [q_i, u_i] for a partition (default: the model's)."""
        dq = arguments.partition(self, dependent_q, "q")
        du = arguments.partition(self, dependent_u, "u")
        dq = self.dependent_q if dq is None else tuple(dq)
        du = self.dependent_u if du is None else tuple(du)
        return tuple([self.q_names[i] for i in complement(self.nq, dq)] +
                     [self.u_names[i] for i in complement(self.nu, du)])

    @property
    def full_state_names(self):
        return self.q_names + self.u_names

    @property
    def descriptor_variables(self):
        """Names of the descriptor variables w of :meth:`linearize_descriptor`."""
        nl = kernel.sizes(self._kernel)["nl"]
        return (self.q_names + self.u_names + tuple(f"lambda{i}" for i in range(nl))
                + tuple(f"mu{i}" for i in range(self.nc)) + tuple(f"nu{i}" for i in range(self.nv)))

    def parameters(self, **values):
        """The default parameter vector with some entries replaced by name."""
        return arguments.parameter_vector(self, values)

    # relative singular value below which a constraint Jacobian counts as rank
    # deficient in error messages: <NAME>_RANK_RTOL of the generated C (the
    # default tolerance of linearize_local, linearize_descriptor and "auto")
    @property
    def RANK_RTOL(self):
        return kernel.rank_rtol(self._kernel)

    def __repr__(self):
        return (f"<generated model {self.name!r}: {self.nq} coordinates ({self.nc} dependent), "
                f"{self.nu} speeds ({self.nv} dependent), {self.nr} inputs, {self.np} parameters>")

    # -- linearizations ------------------------------------------------------------
    def linearize(self, q, u, r=None, p=None, t=0.0, *, dependent_q=None, dependent_u=None,
                  tol=1e-8, steady_tol=STEADY_TOL, threads=None):
        """``(A, B)`` of ``d x/dt = A x + B r`` for the independent states x = [q_i, u_i].

        Batches: q, u, r and p are vectors along their last axis; their leading
        axes and all axes of t are batch axes, and the batch shape is
        ``np.broadcast_shapes(q.shape[:-1], u.shape[:-1], r.shape[:-1],
        p.shape[:-1], t.shape)``: A has shape ``batch + (nx, nx)``. So any
        argument may be shared by all points (one vector, a scalar t), or
        given per point, e.g. q and u of shape (k, nq) and (k, nu) with p of
        shape (np,) or (k, np) and t scalar or of shape (k,). t holds one time
        per point: when q, u, r or p have batch axes, t may not have more axes
        than they have (t of shape (k, 1) beside q of shape (k, nq) would
        broadcast to k x k points and is refused; pass t of shape (k,)). For a
        grid, give the axes explicitly: q[None] and t[:, None].

        p may also be a dict of parameter values by name (others default).
        ``dependent_q``/``dependent_u`` choose the partition (indices or names),
        or ``"auto"``: chosen at each point by column-pivoted QR of J_c (B_v),
        the best-conditioned dependent set there; the result is then a
        :class:`PartitionedResult` ``(A, B)`` that names the partition each
        point used (``.dependent_q``, ``.dependent_u``, ``.state_names``).
        An :class:`~codegen.errors.IllConditionedWarning` says when a partition
        block is so ill-conditioned (condition estimate above
        ``ill_conditioned``, the generated C's 1/CONDITION_RTOL) that digits of
        A are at risk. The point must satisfy the constraints to
        ``tol`` (max-norm); pass ``tol=None`` to skip that check. Batches of
        at least ``PARALLEL_THRESHOLD`` points run on ``threads`` threads
        (default: all cores).

        **Chart.** A is the linearization in the partition's chart (its
        independent states). ``"auto"`` keeps the model's default partition
        wherever its blocks are well conditioned and switches only where they
        are not, so results along a path stay in one chart where they can. At
        a point that is not steady in the chart (an essential state, one the
        equations depend on, changes along the motion: ``steady_tol``), A's
        eigenvalues depend on the chart and do not describe stability: a
        :class:`~codegen.errors.NotSteadyWarning` names the states
        (``steady_tol=None`` skips the check).
        """
        # one point with the default partition and options as option() passes
        # them (the common call, its checks inline): checked and evaluated in
        # the kernel where it can
        if steady_tol is None:
            steady = -1.0
        elif type(steady_tol) is float and 0.0 <= steady_tol < math.inf:
            steady = steady_tol
        else:
            steady = None
        if (steady is not None and dependent_q is None and dependent_u is None and threads is None
                and type(t) is float and type(tol) is float and tol >= 0.0 and not isinstance(p, dict)):
            result = self._linearize_one(q, u, r, p, t, tol, self.ill_conditioned, steady)
            if result is not None:
                if result[2] is not None:
                    self._warn_one_point(result[2])
                return result[0], result[1]
        return self._linearize_checked(q, u, r, p, t, dependent_q, dependent_u, tol, steady_tol, threads)

    @explain_memory(name="linearize")
    def _linearize_checked(self, q, u, r, p, t, dependent_q, dependent_u, tol, steady_tol, threads):
        """linearize with its options checked (the single point again where
        the kernel can take it, else the batch path)."""
        tolerance = option(self, tol, TOL)
        steady = option(self, steady_tol, STEADY)
        threads = option(self, threads, THREADS)
        dq, du = arguments.kernel_partitions(self, dependent_q, dependent_u)
        if dq is None and du is None and not isinstance(p, dict) and plain_number(t):
            # one point, default partition, well conditioned, steady: checked
            # and evaluated in the kernel
            result = self._linearize_one(q, u, r, p, float(t), tolerance, self.ill_conditioned, steady)
            if result is not None:
                if result[2] is not None:
                    self._warn_one_point(result[2])
                return result[0], result[1]
        return self._linearize(q, u, r, p, t, dq, du, tol, tolerance, steady, threads, False)

    def _warn_one_point(self, unsteady):
        """linearize's warning of a single point that is not steady in the
        default partition's chart (``unsteady``: the kernel's flags)."""
        diagnostics.warn_not_steady(self, unsteady[None], diagnostics.ONE_POINT, "linearize",
                                    lambda index: self._default_chart)

    @explain_memory
    def linearize_full(self, q, u, r=None, p=None, t=0.0, *, dependent_q=None, dependent_u=None,
                       tol=1e-8, steady_tol=STEADY_TOL, threads=None):
        """``(A', B')``: derivatives of all coordinates and speeds (rows q, then u)
        with respect to the independent states and the inputs. Arguments,
        batches, ``"auto"`` partitions and warnings as for :meth:`linearize`."""
        tolerance = option(self, tol, TOL)
        steady = option(self, steady_tol, STEADY)
        threads = option(self, threads, THREADS)
        dq, du = arguments.kernel_partitions(self, dependent_q, dependent_u)
        return self._linearize(q, u, r, p, t, dq, du, tol, tolerance, steady, threads, True)

    def _linearize(self, q, u, r, p, t, dq, du, tol, tolerance, steady, threads, full):
        """``dq``, ``du``: partitions from :func:`arguments.kernel_partitions`;
        ``tol``: as given (for messages), ``tolerance``, ``steady``: the
        kernel's values of tol and steady_tol."""
        batch = arguments.batch(self, q, u, r, p, t)
        nx, nr, ns = self.nx, self.nr, self.nq + self.nu
        batch.check_fits(self.name, (ns if full else nx) * (nx + nr) + 3 + nx)
        status, index, out = kernel.linearize(
            self._kernel, batch, full=full, dependent_q=dq, dependent_u=du, tol=tolerance,
            steady_tol=steady, threads=threads, work=self.operation_count)
        if status != OK:
            raise_status(self, status, index, batch, point_partition(out.dependent_q, index),
                         point_partition(out.dependent_u, index), tol)
        diagnostics.warn_conditioning(self, out.condition, batch, out.dependent_q,
                                      out.dependent_u)
        diagnostics.warn_not_steady(
            self, out.unsteady, batch, "linearize_full" if full else "linearize",
            lambda index: diagnostics.partition_chart(self, out.dependent_q, out.dependent_u,
                                                      index))
        rows = ns if full else nx
        result = (batch.reshape(out.A, rows, nx), batch.reshape(out.B, rows, nr))
        if isinstance(dq, str) or isinstance(du, str):      # "auto": name the partitions
            return PartitionedResult(self, result, batch.shape, out.dependent_q, out.dependent_u)
        return result

    @explain_memory
    def linearize_local(self, q, u, r=None, p=None, t=0.0, *, rank_tol=None, tol=1e-8,
                        steady_tol=STEADY_TOL, threads=None):
        """The local state-space form at each point: a :class:`LocalLinearization`.

        The states are coordinates x = [y; z] in orthonormal bases of the
        admissible perturbations at the point, delta q = N_q y (N_q: null
        space of J_c = d f_c/d q) and delta u = N_u z + C_1 delta q (N_u: null
        space of B_v = d f_v/d u; C_1 = -B_v^+ d f_v/d q, the minimum-norm
        map), with the ranks of J_c and B_v decided with ``rank_tol``
        (relative to the largest singular value; default ``RANK_RTOL`` =
        1e-9).

        **Chart** (``.chart``, ``.dependent_q``, ``.dependent_u``): where J_c
        and B_v have full rank, A is a partition's linearization (that of
        :meth:`linearize`) written in these bases, ``A = G A_p G^-1``: the
        same eigenvalues, at steady motions too. The partition is the model's
        default wherever its blocks are well conditioned, else the one
        ``dependent_q="auto"`` chooses, and N_q, N_u are the Gram-Schmidt
        orthonormalization of its independent directions (smooth along a
        path). Where a rank drops (a singular configuration: no partition
        exists), the chart is the null spaces' (SVDs, minimum-norm
        multipliers), with (nq - rank_c) + (nu - rank_v) states. A point that
        is not steady in the chart gets a
        :class:`~codegen.errors.NotSteadyWarning` (``steady_tol``, as for
        :meth:`linearize`). Arguments, batches, ``tol`` and ``threads`` as for
        :meth:`linearize`. Where the ranks differ within a batch, the arrays
        are padded with NaN (see :class:`LocalLinearization`).
        """
        tolerance = option(self, tol, TOL)
        steady = option(self, steady_tol, STEADY)
        threads = option(self, threads, THREADS)
        rank = option(self, rank_tol, RANK_TOL)
        reported_tol = self.RANK_RTOL if rank_tol is None else rank
        if not isinstance(p, dict) and plain_number(t):
            # one point, steady in its chart: checked and evaluated in the kernel
            one = kernel.linearize_local_one(self._kernel, q, u, r, p, float(t), rank, tolerance,
                                             steady)
            if one is not None:
                *result, unsteady = one
                if unsteady is not None:
                    diagnostics.warn_not_steady(
                        self, unsteady[None], diagnostics.ONE_POINT, "linearize_local",
                        lambda index: local_chart(self, result[6], result[3:5]))
                return LocalLinearization._from_point(self, result, reported_tol)
        batch = arguments.batch(self, q, u, r, p, t)
        nr, ns = self.nr, self.nq + self.nu
        batch.check_fits(self.name, self.nx * (self.nx + nr + ns) + 2 + self.nc + self.nv + ns)
        status, index, out = kernel.linearize_local(
            self._kernel, batch, width=self._local_width, rank_tol=rank, tol=tolerance,
            steady_tol=steady, threads=threads, work=self.operation_count)
        if status != OK:
            raise_status(self, status, index, batch, tol=tol, partitioned=False)
        result = LocalLinearization._from_kernel(
            self, batch.shape, out.A, out.B, out.T, out.ranks,
            self._singular_values(batch, rank), reported_tol,
            chart_names(self, out.charts, batch.shape))
        if result.uniform and batch.size:
            self._local_width = int(result.nx)
        diagnostics.warn_not_steady(self, out.unsteady, batch, "linearize_local",
                                    lambda index: local_chart(self, out.charts[index],
                                                              out.ranks[index]))
        return result

    def _singular_values(self, batch, rank_tol):
        """A function giving the (n, nc + nv) singular values of J_c and B_v
        of the batch's points, computed when first called."""
        compute = kernel.singular_values(self._kernel, batch, rank_tol)

        def singular_values():
            status, index, sigma = compute()
            if status != OK:   # the same points linearize_local accepted
                raise diagnostics.singular_values_failed(self, status, index)
            return sigma
        return singular_values

    @explain_memory
    def linearize_descriptor(self, q, u, r=None, p=None, t=0.0, *, rank_tol=None, tol=1e-8,
                             steady_tol=STEADY_TOL, threads=None):
        """``(E, A, B)`` of the linearized descriptor form ``E w' = A w + B r``
        (González et al., eqs. 7-8: the index-reduced DAE in all coordinates,
        speeds and multipliers), a :class:`DescriptorForm`.

        ``w = [delta q (nq), delta u (nu), delta lambda (nl), mu (nc), nu (nv)]``
        (names in ``.variables``): the coordinates, the speeds, the increments
        of the multipliers of the velocity constraints, and the multipliers
        that keep the perturbations on the constraints. Defined at singular
        configurations too. Its chart is that of all coordinates and speeds:
        its finite generalized eigenvalues (of the pencil ``A - s E``) are
        those of :meth:`linearize` and :meth:`linearize_local` at equilibria
        and at motions steady in every coordinate and speed; elsewhere they
        differ (the rolling disk's speeds measured in the spinning wheel
        change along a steady roll), and a
        :class:`~codegen.errors.NotSteadyWarning` names the coordinates and
        speeds that change (``steady_tol``, as for :meth:`linearize`). The
        others are infinite. ``.rank_c``, ``.rank_v``: the ranks of J_c and
        B_v (``rank_tol`` as for :meth:`linearize_local`). Arguments,
        batches, ``tol`` and ``threads`` as for :meth:`linearize`.
        """
        tolerance = option(self, tol, TOL)
        steady = option(self, steady_tol, STEADY)
        threads = option(self, threads, THREADS)
        rank = option(self, rank_tol, RANK_TOL)
        batch = arguments.batch(self, q, u, r, p, t)
        size, nr = kernel.sizes(self._kernel)["ndesc"], self.nr
        batch.check_fits(self.name, size * (2 * size + nr) + 2 + self.nq + self.nu)
        status, index, out = kernel.linearize_descriptor(
            self._kernel, batch, rank_tol=rank, tol=tolerance, steady_tol=steady,
            threads=threads, work=self.operation_count)
        if status != OK:
            raise_status(self, status, index, batch, tol=tol, partitioned=False)
        diagnostics.warn_not_steady(self, out.unsteady, batch, "linearize_descriptor",
                                    lambda index: (self.full_state_names,
                                                   "all coordinates and speeds"))
        return DescriptorForm((batch.reshape(out.E, size, size), batch.reshape(out.A, size, size),
                               batch.reshape(out.B, size, nr)),
                              self.descriptor_variables, per_point(out.ranks[:, 0], batch.shape),
                              per_point(out.ranks[:, 1], batch.shape))

    # -- points -------------------------------------------------------------------------
    @explain_memory
    def equilibrium(self, q_guess, u=None, r=None, p=None, t=0.0, *, fixed=None,
                    free_speeds=None, tol=1e-10, max_iter=100, rank_tol=None, max_step=1.0,
                    periodic=None):
        """``(q, u)``: a consistent point near the guess where the independent
        accelerations vanish: a static equilibrium (``u=None``: u = 0) or a
        steady motion (the speeds ``u`` given).

        Gauss-Newton in the generated C on the residual ``R = [f_c; f_v;
        the chart's independent accelerations]`` with the generated Jacobians:
        the chart is the one :meth:`linearize_local` takes at the guess (a
        partition's at a regular point, the model's where it is well
        conditioned: the accelerations of its independent speeds, so the
        motion found is steady there and :meth:`linearize` describes its
        stability; the null spaces' where J_c or B_v lost rank, ``N_u^T
        ud*``). Minimum-norm steps where the equations are underdetermined
        (families of equilibria, ignorable coordinates: the step leaves them
        near the guess), pseudo-inverses where the constraint Jacobians lose
        rank. Unknowns: every coordinate except those in ``fixed`` (names or
        indices, held at the guess), and the speeds named in ``free_speeds``
        (default: none; the speeds are held as given, and must satisfy the
        velocity constraints with the coordinates found).

        **Staying near the guess.** The model does not know which
        coordinates are angles: no unknown moves by more than ``max_step``
        in one iteration (in its own units: radians for an angle, metres for
        a position; None: no bound), and the coordinates named in
        ``periodic`` (angles) are returned within half a turn of the guess
        (q + 2 pi k, the same configuration).

        Converged when ``max|R| <= tol``;
        :class:`~codegen.errors.ConvergenceError` after ``max_iter`` (at most
        ``MAX_ITER``) iterations, or as soon as the residual stops decreasing
        (no step along the Gauss-Newton direction decreases it, or it fell by
        less than 1 % in 10 iterations), with max|R|, the number of
        iterations and what to try. Ctrl-C stops it. Batches of guesses as
        for :meth:`linearize` (solved one by one).
        """
        tolerance = option(self, tol, NEWTON_TOL)
        max_iter = option(self, max_iter, ITERATIONS)
        rank = option(self, rank_tol, RANK_TOL)
        step = option(self, max_step, MAX_STEP)
        vary_q = vary_u = None
        if fixed is not None:
            vary_q = np.ones(self.nq, dtype=np.intc)
            vary_q[indices_of(self, fixed, self.q_names, "fixed")] = 0
        if free_speeds is not None:
            vary_u = np.zeros(self.nu, dtype=np.intc)
            vary_u[indices_of(self, free_speeds, self.u_names, "free_speeds")] = 1
        wrapped = [] if periodic is None else indices_of(self, periodic, self.q_names, "periodic")
        batch = arguments.batch(self, q_guess, np.zeros(self.nu) if u is None else u, r, p, t)
        batch.check_fits(self.name, self.nq + self.nu + 2)
        status, index, out = kernel.equilibrium(
            self._kernel, batch, vary_q=vary_q, vary_u=vary_u, rank_tol=rank, tol=tolerance,
            max_step=step, max_iter=max_iter, work=self.operation_count)
        if status != OK:
            raise_status(self, status, index, batch, tol=tol, blocks=(), partitioned=False,
                         detail=diagnostics.equilibrium_detail(self, status, index, batch, out,
                                                               tol, vary_u))
        if wrapped:      # the periodic coordinates within half a turn of the guess
            guess = batch.all_rows("q")[:, wrapped]
            out.q[:, wrapped] = guess + (out.q[:, wrapped] - guess + math.pi) % (2 * math.pi) - math.pi
        return batch.reshape(out.q, self.nq), batch.reshape(out.u, self.nu)

    @explain_memory
    def state_derivative(self, q, u, r=None, p=None, t=0.0, *, threads=None):
        """``(qd, ud)``: time derivatives of all coordinates and speeds.
        Arguments and batches as for :meth:`linearize`."""
        threads = option(self, threads, THREADS)
        batch = arguments.batch(self, q, u, r, p, t)
        batch.check_fits(self.name, self.nq + self.nu)
        status, index, out = kernel.state_derivative(self._kernel, batch, threads=threads,
                                                     work=self.operation_count)
        if status != OK:
            raise_status(self, status, index, batch)
        return batch.reshape(out.qd, self.nq), batch.reshape(out.ud, self.nu)

    @explain_memory
    @accepts_old_order
    def constraint_residuals(self, q, u, r=None, p=None, t=0.0):
        """``(f_c, f_v)``: configuration and velocity constraint residuals.
        Arguments and batches as for :meth:`linearize`; ``r`` is checked and
        broadcast like every argument but not used (the constraints hold no
        inputs). The old order ``(q, u, p, t)`` is still read, with a
        DeprecationWarning, where only it fits the call (README, "Using a
        generated model")."""
        batch = arguments.batch(self, q, u, r, p, t)
        self._check_unused_inputs(batch, r)
        batch.check_fits(self.name, self.nc + self.nv)
        status, index, out = kernel.constraint_residuals(self._kernel, batch,
                                                         work=self.operation_count)
        if status != OK:
            raise_status(self, status, index, batch, blocks=("f_c", "f_v"))
        return batch.reshape(out.f_c, self.nc), batch.reshape(out.f_v, self.nv)

    @explain_memory
    @accepts_old_order
    def complete(self, q, u, r=None, p=None, t=0.0, *, dependent_q=None, dependent_u=None,
                 tol=1e-12, max_iter=50):
        """``(q, u)`` with the dependent coordinates solved from f_c = 0 (Newton's
        method from the given values, at most ``max_iter`` steps, until
        |f_c|_inf <= tol) and the dependent speeds from f_v = 0. Arguments and
        batches as for :meth:`linearize`; ``r`` is checked and broadcast like
        every argument but not used (the constraints hold no inputs). The old
        order ``(q, u, p, t)`` is still read, with a DeprecationWarning, where
        only it fits the call (README, "Using a generated model").
        ``"auto"`` partitions are chosen at the given point (the result is then
        a :class:`PartitionedResult` ``(q, u)``). A
        :class:`~codegen.errors.MultipleRootWarning` says when it converged to
        a multiple root of f_c (J_c P_qd nearly singular there), where the
        coordinates are only accurate to about sqrt(tol)."""
        tolerance = option(self, tol, NEWTON_TOL)
        max_iter = option(self, max_iter, ITERATIONS)
        batch = arguments.batch(self, q, u, r, p, t)
        self._check_unused_inputs(batch, r)
        dq, du = arguments.kernel_partitions(self, dependent_q, dependent_u)
        batch.check_fits(self.name, self.nq + self.nu + 1 + self.nc + self.nv)
        status, index, out = kernel.complete(
            self._kernel, batch, dependent_q=dq, dependent_u=du, tol=tolerance,
            max_iter=max_iter, work=self.operation_count)
        if status != OK:
            # blocks=(): Newton's iterates are not the given point, so the
            # blocks evaluated there say nothing sure about the failure
            raise_status(self, status, index, batch, point_partition(out.dependent_q, index),
                         point_partition(out.dependent_u, index), tol,
                         diagnostics.complete_detail(self, status, index, batch, out, tol,
                                                     max_iter), blocks=())
        diagnostics.warn_multiple_root(self, out.condition, batch, out.dependent_q, tol)
        result = (batch.reshape(out.q, self.nq), batch.reshape(out.u, self.nu))
        if isinstance(dq, str) or isinstance(du, str):      # "auto": name the partitions
            return PartitionedResult(self, result, batch.shape, out.dependent_q, out.dependent_u)
        return result

    @explain_memory
    def constraint_maps(self, q, u, r=None, p=None, t=0.0, *, dependent_q=None, dependent_u=None,
                        threads=None):
        """The constraint Jacobians and a partition's maps at each point, as the
        generated C computes them (a :class:`~codegen.runtime.results.ConstraintMaps`):
        ``J_c``, ``J_vq``, ``B_v``, ``K_c``, ``K_v`` and, formed from them
        exactly, ``C_0``, ``C_1``, ``C_2`` and the ``embedding`` of the
        independent states into all coordinates and speeds. ``dependent_q``,
        ``dependent_u``: the partition (names or indices; default: the
        model's), whose order is that of K's rows. The point is not checked
        against the constraints. Arguments and batches as for :meth:`linearize`."""
        dq = arguments.partition(self, dependent_q, "q")
        du = arguments.partition(self, dependent_u, "u")
        return self.call("constraint_maps", q, u, r, p, t, threads=threads,
                         dependent_q=None if dq is None else np.array(dq, dtype=np.intc),
                         dependent_u=None if du is None else np.array(du, dtype=np.intc))

    @explain_memory
    def outputs(self, q, u, r=None, p=None, t=0.0, *, dependent_q=None, dependent_u=None,
                tol=1e-8, threads=None):
        """The model's outputs ``y = h(q, u, q', u', r, t, p)`` (``y_names``,
        from ``Model(..., outputs=...)``) at each point, and their
        linearization ``y = C x + D r`` on the constraint manifold in the
        independent states x of the partition (``independent_state_names``),
        as the generated C computes them (a
        :class:`~codegen.runtime.results.OutputLinearization` ``(y, C,
        D)``): exact, from the same stages as :meth:`linearize_full` (q' and
        u' are qd*, ud* at the point; their changes the rows of A', B').
        ``dependent_q``, ``dependent_u``: the partition (names or indices;
        default: the model's). The point must satisfy the constraints to
        ``tol`` (None: not checked). Arguments and batches as for
        :meth:`linearize`."""
        dq, du, options = self._partition_options(dependent_q, dependent_u, tol)
        threads = option(self, threads, THREADS)
        batch = arguments.batch(self, q, u, r, p, t)
        nout = len(self.y_names)
        batch.check_fits(self.name, nout * (1 + self.nx + self.nr))
        status, index, out = kernel.call(self._kernel, "outputs", batch, options, threads=threads,
                                         work=self.operation_count)
        if status != OK:
            raise_status(self, status, index, batch, dq, du, tol)
        values = [batch.reshape(out.y, nout), batch.reshape(out.C, nout, self.nx),
                  batch.reshape(out.D, nout, self.nr)]
        return ENTRY_RESULTS["outputs"](self, ["y", "C", "D"], values, options)

    @explain_memory
    def outputs_local(self, q, u, r=None, p=None, t=0.0, *, rank_tol=None, tol=1e-8, threads=None):
        """The outputs ``y`` and their linearization ``y = C x + D r`` in the
        states x of :meth:`linearize_local` at each point (the same
        ``rank_tol``: its chart, its bases and its nx), an
        :class:`~codegen.runtime.results.OutputLinearization` ``(y, C, D)``
        whose ``state_names`` are the local states ``y0, y1, ..., z0, ...``,
        from the generated C (``<model>_outputs_local``), exact (no
        differences): in a partition's chart C = C_p H, with C_p, y and D
        those of :meth:`outputs` for that partition and H the rows of the
        local form's embedding T at its independent states; at a singular
        configuration (the null spaces' chart) C = H_q T_q + H_u T_u +
        H_rates A', D = H_r + H_rates B' with T = [T_q; T_u] and A', B' the
        rates of every coordinate, speed and multiplier in its states, the
        minimum-norm solution's, as linearize_local's (outputs that hold
        multipliers are those of the minimum-norm multipliers). Where nx differs within a
        batch, C is padded with NaN to the largest and ``state_names`` are
        the largest chart's. Arguments and batches as for :meth:`linearize`."""
        if not self.y_names:
            raise InputError(f"{self.name}: the model has no outputs; build it with "
                             "Model(..., outputs={name: expression})")
        options = dict(rank_tol=option(self, rank_tol, RANK_TOL), tol=option(self, tol, TOL))
        threads = option(self, threads, THREADS)
        batch = arguments.batch(self, q, u, r, p, t)
        n, nq, nu, nout, nr = batch.size, self.nq, self.nu, len(self.y_names), self.nr
        batch.check_fits(self.name, nout * (1 + nq + nu + nr) + 2 + self.nc + self.nv)
        status, index, out = kernel.call(self._kernel, "outputs_local", batch, options,
                                         threads=threads, work=self.operation_count)
        if status != OK:
            raise_status(self, status, index, batch, tol=tol, partitioned=False)
        ranks = out.ranks.reshape(n, 2)
        widths = (nq - ranks[:, 0]) + (nu - ranks[:, 1])
        width = int(widths.max()) if n else self.nx
        C = np.full((n, nout, width), np.nan)
        for k in np.unique(widths):
            points = np.flatnonzero(widths == k)
            C[points, :, :k] = out.C[points, :nout * k].reshape(len(points), nout, k)
        values = [batch.reshape(out.y, nout), batch.reshape(C, nout, width), batch.reshape(out.D, nout, nr)]
        result = ENTRY_RESULTS["outputs"](self, ["y", "C", "D"], values)
        widest = int(np.argmax(widths)) if n else None
        ny = nq - (int(ranks[widest, 0]) if n else self.nc)
        result.state_names = tuple(f"y{k}" for k in range(ny)) + tuple(f"z{k}" for k in range(width - ny))
        return result

    def _partition_options(self, dependent_q, dependent_u, tol):
        """A partition (names or indices) and tol as the kernel's options of
        an entry point: (dq, du, options)."""
        dq = arguments.partition(self, dependent_q, "q")
        du = arguments.partition(self, dependent_u, "u")
        options = dict(tol=option(self, tol, TOL),
                       dependent_q=None if dq is None else np.array(dq, dtype=np.intc),
                       dependent_u=None if du is None else np.array(du, dtype=np.intc))
        return dq, du, options

    @explain_memory
    def sensitivities(self, q, u, r=None, p=None, t=0.0, *, dependent_q=None, dependent_u=None,
                      tol=1e-8, steady_tol=STEADY_TOL, outputs=True, threads=None):
        """The derivatives of A and B (and of the outputs' C and D) with
        respect to the parameters of the model's sensitivities
        (``Model(..., sensitivities=...)``: ``sensitivity_names``) at each
        point, exact to rounding: the forward mode (tangents) of every stage
        of the linearization, in the generated C (a
        :class:`~codegen.runtime.results.Sensitivities`: ``.A``, ``.B``,
        ``.dA`` of shape batch + (nsens, nx, nx), ``.dB``, and with outputs
        ``.C``, ``.D``, ``.dC``, ``.dD``; ``.eigenvalues()`` gives the
        eigenvalues' derivatives). The independent coordinates and speeds, r
        and t are held; the dependent ones move with the parameter on the
        constraint manifold, as re-solving the point at the new value does.
        ``dependent_q``, ``dependent_u``: the partition (names or indices;
        default: the model's). Arguments, batches and warnings as for
        :meth:`linearize`: A, its derivatives and the eigenvalues' are the
        partition's chart's, so at a point that is not steady in it a
        :class:`~codegen.errors.NotSteadyWarning` says that they describe
        no stability (``steady_tol=None`` skips the check). ``outputs=False``:
        without the outputs' C, D and their derivatives (the C skips their
        tangents)."""
        if not isinstance(outputs, (bool, np.bool_)):
            raise InputError(f"{self.name}.sensitivities: outputs must be True or False, "
                             f"not {outputs!r}")
        if not self.sensitivity_names:
            raise InputError(f"{self.name}: the model has no sensitivities; build it with "
                             "Model(..., sensitivities=[...] or 'all'), or model.with_sensitivities"
                             "([...]) (a built-in model: make_model(sensitivities=[...]))")
        dq, du, options = self._partition_options(dependent_q, dependent_u, tol)
        options["steady_tol"] = steady = option(self, steady_tol, STEADY)
        threads = option(self, threads, THREADS)
        batch = arguments.batch(self, q, u, r, p, t)
        k, nx, nr = len(self.sensitivity_names), self.nx, self.nr
        nout = len(self.y_names) if outputs else 0
        batch.check_fits(self.name, (1 + k) * (nx * (nx + nr) + nout * (nx + nr)) + 2 + nx)
        wanted = (("A", "B", "dA", "dB", "condition") + (("C", "D", "dC", "dD") if nout else ())
                  + (("unsteady",) if steady >= 0.0 and nx else ()))
        status, index, out = kernel.call(self._kernel, "sensitivities", batch, options,
                                         wanted=wanted, threads=threads,
                                         work=self.operation_count * (1 + 3 * k))
        if status != OK:
            raise_status(self, status, index, batch, dq, du, tol)
        shared_q, shared_u = options["dependent_q"], options["dependent_u"]
        diagnostics.warn_conditioning(self, out.condition, batch, shared_q, shared_u)
        diagnostics.warn_not_steady(
            self, out.unsteady, batch, "sensitivities",
            lambda index: diagnostics.partition_chart(self, shared_q, shared_u, index))
        names = ["A", "B", "dA", "dB"]
        values = [batch.reshape(out.A, nx, nx), batch.reshape(out.B, nx, nr),
                  batch.reshape(out.dA, k, nx, nx), batch.reshape(out.dB, k, nx, nr)]
        if nout:
            names += ["C", "D", "dC", "dD"]
            values += [batch.reshape(out.C, nout, nx), batch.reshape(out.D, nout, nr),
                       batch.reshape(out.dC, k, nout, nx), batch.reshape(out.dD, k, nout, nr)]
        return ENTRY_RESULTS["sensitivities"](self, names, values, options)

    @explain_memory
    def call(self, name, q, u, r=None, p=None, t=0.0, *, threads=None, **options):
        """Any entry point of the generated kernel that maps each point to
        its outputs (its ``batch`` is ``"map"`` in codegen/entry_points.py),
        by name: ``options`` by the table's parameter names, checked as the
        methods check them (a partition by names or indices, left out: the
        model's; a scalar option left out: the methods' default, tol 1e-8,
        steady_tol 1e-6, rank_tol the C's). Returns the entry point's result
        type (:data:`~codegen.runtime.results.ENTRY_RESULTS`, else an
        :class:`~codegen.runtime.results.EntryResult`: its outputs in the
        table's order, also by name), each output of the batch's shape
        followed by its own. Arguments and batches as for :meth:`linearize`.
        Every such entry point is also a method: ``model.<name>(q, u, ...)``."""
        spec = kernel.map_entry_point(self._kernel, name)
        if spec is None:
            raise InputError(f"{self.name}: the kernel has no entry point {name!r} that maps points "
                             f"to outputs; it has {', '.join(kernel.map_entry_points(self._kernel))}")
        known = [parameter for parameter, role, *_ in spec["parameters"]
                 if role in ("option", "partition", "flags")]
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise InputError(f"{self.name}.{name}: unknown option {', '.join(unknown)} "
                             f"(it takes {', '.join(known) or 'none'})")
        threads = option(self, threads, THREADS)
        options = self._call_options(name, spec, options)
        batch = arguments.batch(self, q, u, r, p, t)
        outputs = [(parameter, shape) for parameter, role, _, shape, _ in spec["parameters"]
                   if role == "output"]
        batch.check_fits(self.name, sum(math.prod(shape) for _, shape in outputs))
        status, index, out = kernel.call(self._kernel, name, batch, options, threads=threads,
                                         work=self.operation_count)
        if status != OK:
            raise_status(self, status, index, batch, options.get("dependent_q"),
                         options.get("dependent_u"))
        values = []
        for parameter, shape in outputs:
            values.append(getattr(out, parameter).reshape(batch.shape + shape))
        return ENTRY_RESULTS.get(name, EntryResult)(self, [p for p, _ in outputs], values, options)

    def _call_options(self, name, spec, given):
        """The options of :meth:`call` as the kernel takes them, checked like
        the methods' (a scalar left out: the methods' default; a partition
        by names or indices)."""
        options = {}
        for parameter, role, ctype, _, _ in spec["parameters"]:
            value = given.get(parameter)
            if role == "partition":
                indices = arguments.partition(self, value, "q" if parameter.endswith("_q") else "u")
                options[parameter] = None if indices is None else np.array(indices, dtype=np.intc)
            elif role == "option" and "*" not in ctype:
                rule, default = CALL_OPTIONS.get(parameter, (None, None))
                if rule is not None:
                    options[parameter] = option(self, given.get(parameter, default), rule)
                elif value is None:
                    raise InputError(f"{self.name}.{name}: the option {parameter} is needed")
                else:
                    options[parameter] = value
            elif role in ("option", "flags"):
                options[parameter] = value
        return options

    def __getattr__(self, name):
        """``model.<name>(q, u, r, p, t, **options)`` for every entry point
        of the kernel that maps points to outputs (:meth:`call`)."""
        found = self.__dict__.get("_kernel")
        if found is not None and not name.startswith("_") and kernel.map_entry_point(found, name):
            return functools.partial(self.call, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _check_unused_inputs(self, batch, r):
        """r, which the kernels of complete and constraint_residuals do not
        read, is refused where it holds NaN or Inf, as everywhere else."""
        if r is not None:
            error = diagnostics.nonfinite_argument(self, batch, keys=("r",))
            if error is not None:
                raise error

    # -- control design (python-control) -------------------------------------------------
    def state_space(self, q, u, r=None, p=None, t=0.0, outputs=None, *, states=None, inputs=None,
                    dependent_q=None, dependent_u=None, tol=1e-8, name=None):
        """The linearization at one operating point as a ``control.StateSpace``
        (python-control, an optional dependency: ``pip install control``).

        ``d x/dt = A x + B r``, ``y = C x + D r`` with named states (the
        independent states of the partition, ``independent_state_names``),
        inputs (``r_names``) and outputs. ``outputs`` names coordinates or
        speeds, dependent ones included, or the model's outputs (``y_names``,
        ``Model(..., outputs=...)``: their rows of :meth:`outputs`' C and D,
        exact) (default: the states): ``y_k`` is the change of that
        quantity, so its row of C maps the states to it on the constraint
        manifold. For an independent coordinate or speed that is a unit row;
        for a dependent coordinate it is ``d q_d/d q_i = -(J_c P_qd)^-1 J_c
        P_qi``, for a dependent speed ``d u_d/d (q_i, u_i)`` from the
        velocity constraints: rows of ``constraint_maps(...).embedding``,
        exact, with a zero row of D (the constraints hold no inputs).
        Their time derivatives are the rows of :meth:`linearize_full`: where
        the constraint Jacobians do not change along the motion (equilibria,
        steady motions), ``C_y A = A_full[y]`` and ``C_y B = B_full[y]``.

        ``states`` keeps only these states (names), e.g. the roll/steer block
        of a bicycle: allowed when the dropped states do not enter the kept
        states' equations nor the outputs at this point (else InputError).
        ``inputs`` keeps only these inputs (names or indices), e.g.
        ``["T_steer"]``. ``dependent_q``, ``dependent_u`` (``"auto"`` too) and
        ``tol`` are passed to :meth:`linearize`; ``name`` names the system (default: the
        model's name). Arguments as for :meth:`linearize`, for one point.
        """
        return control.state_space(self, q, u, r, p, t, outputs, states=states, inputs=inputs,
                                   dependent_q=dependent_q, dependent_u=dependent_u, tol=tol,
                                   name=name)

    # -- pickling: by reference to the build, for worker processes -----------------------
    def _build_reference(self):
        """Where this model's build is (see :func:`pickling.build_reference`)."""
        return pickling.build_reference(self)

    def __reduce__(self):
        """Pickled by reference to its build (a path and its key), not by value:
        unpickling imports the build from its directory (see
        :func:`pickling._package_from_build`), so worker processes of a cluster
        load the compiled module from the shared file system."""
        return (pickling._model_from_build, (self._build_reference(),))
