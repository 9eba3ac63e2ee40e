"""Self-tests of the independent benchmark bicycle reference (tests/bicycle_benchmark.py)
against the numbers printed in Meijaard et al. (2007)."""

import numpy as np
import pytest

import bicycle_benchmark as bench

PAR = bench.benchmark_parameters()

# Appendix / Section 4 of the paper: canonical matrices for the benchmark values.
PUBLISHED_M = [[80.81722, 2.31941332208709], [2.31941332208709, 0.29784188199686]]
PUBLISHED_C1 = [[0.0, 33.86641391492494], [-0.85035641456978, 1.68540397397560]]
PUBLISHED_K0 = [[-80.95, -2.59951685249872], [-2.59951685249872, -0.80329488458618]]
PUBLISHED_K2 = [[0.0, 76.59734589573222], [0.0, 2.65431523794604]]

# Table 2 of the paper (eigenvalues of the roll/steer system).
PUBLISHED_EIGENVALUES = {
    0.0: [-5.53094371765393, -3.13164324790656, 3.13164324790656, 5.53094371765393],
    4.0: [-12.15861426576447, -1.42944427361326,
          0.41325331521125 - 3.07910818603206j, 0.41325331521125 + 3.07910818603206j],
    5.0: [-14.07838969279822, -0.32286642900409,
          -0.77534188219585 - 4.46486771378823j, -0.77534188219585 + 4.46486771378823j],
    10.0: [-24.62459635017404, 0.16105338653172,
           -3.72016840437287 - 10.90681139476287j, -3.72016840437287 + 10.90681139476287j],
}


def test_parameter_count():
    assert len(PAR) == 26


def test_canonical_matrices_match_paper():
    for got, want in zip(bench.canonical_matrices(PAR),
                         (PUBLISHED_M, PUBLISHED_C1, PUBLISHED_K0, PUBLISHED_K2)):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_weave_and_capsize_speeds():
    assert bench.weave_speed(PAR) == pytest.approx(4.29238253634111, abs=1e-12)
    assert bench.capsize_speed(PAR) == pytest.approx(6.02426201538837, abs=1e-12)


@pytest.mark.parametrize("v", sorted(PUBLISHED_EIGENVALUES))
def test_published_eigenvalues(v):
    np.testing.assert_allclose(bench.eigenvalues(PAR, v),
                               np.sort_complex(PUBLISHED_EIGENVALUES[v]), rtol=0, atol=1e-12)
