"""A sweep of 2^20 (> 10^6) points on a dask.distributed cluster of worker
processes (issue 12 item 4).

The generated module travels to the workers pickled by reference to its build
(codegen.runtime.GeneratedPackage.__reduce__) and is imported there from the
build directory; every chunk's result is checked against the direct call in
this process. The points are random configurations and speeds of the disk,
completed onto the constraints, generated from a seed per chunk on both sides.
"""

import os
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

POINTS = 2**20                 # 1,048,576
CHUNKS = 16
SAMPLE = 4099                  # every SAMPLE-th point's A comes back whole


def chunk_points(model, chunk):
    """The points of one chunk, completed onto the constraints."""
    rng = np.random.default_rng([2024, chunk])
    n = POINTS // CHUNKS
    return model.complete(rng.uniform(-1.5, 1.5, (n, model.nq)), rng.uniform(-3, 3, (n, model.nu)))


def chunk_summary(model, chunk):
    """What one task returns: sums over the chunk's A matrices (8 x 8 each),
    sampled points' A whole, the count of points, and which process ran it."""
    q, u = chunk_points(model, chunk)
    A, _ = model.linearize(q, u, threads=1)        # one thread per worker process
    return {"sum": A.sum(axis=0), "sum_abs": np.abs(A).sum(axis=0), "sample": A[::SAMPLE],
            "count": len(A), "pid": os.getpid(), "name": model.name}


def test_sweep_of_a_million_points_on_worker_processes_matches_direct_calls(disk):
    from distributed import Client, LocalCluster

    started = time.perf_counter()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=40) as cluster, Client(cluster) as client:
        setup = time.perf_counter() - started
        # the module itself is the argument: pickled by reference, loaded by the workers
        futures = client.map(chunk_summary, [disk] * CHUNKS, range(CHUNKS), pure=False)
        results = client.gather(futures)
        distributed_seconds = time.perf_counter() - started - setup
        worker_pids = set(client.run(os.getpid).values())
    assert sum(r["count"] for r in results) == POINTS >= 10**6
    pids = {r["pid"] for r in results}
    assert os.getpid() not in pids and pids <= worker_pids and len(pids) == 2
    assert {r["name"] for r in results} == {"disk"}

    started = time.perf_counter()
    for chunk, result in enumerate(results):
        q, u = chunk_points(disk, chunk)
        A, _ = disk.linearize(q, u)                 # the direct call, in this process
        # same code, same points: the same bits, whichever process ran them
        assert np.array_equal(result["sample"], A[::SAMPLE])
        assert np.array_equal(result["sum"], A.sum(axis=0))
        assert np.array_equal(result["sum_abs"], np.abs(A).sum(axis=0))
    direct_seconds = time.perf_counter() - started
    print(f"\n{POINTS} points: cluster start {setup:.1f} s, on 2 worker processes "
          f"{distributed_seconds:.1f} s, direct {direct_seconds:.1f} s")


def test_bound_functions_and_the_model_travel_too(disk):
    """disk.linearize (a bound method) and disk.model reach a worker process."""
    from distributed import Client, LocalCluster

    op_q = np.array([0.0, 0.0, 0.0, 0.0, 0.0, -1.0])
    op_u = np.array([0.0, -0.5, 0.0, 0.5, 0.0, 0.0])        # upright rolling, v = 0.5
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=40) as cluster, Client(cluster) as client:
        A_remote, _ = client.submit(disk.linearize, op_q, op_u).result()
        nx = client.submit(lambda model: model.nx, disk.model).result()
    A, _ = disk.linearize(op_q, op_u)
    assert np.array_equal(A_remote, A) and nx == 8
    lam = 2 * np.sqrt(1 - 3 * 0.25) / np.sqrt(5)             # Peterson's closed form
    np.testing.assert_allclose(np.sort(np.linalg.eigvals(A).real)[[0, -1]], [-lam, lam], rtol=1e-12)
