"""benchmarks/sampling_prior.py: the expected best of k blind draws, uniform or leaning, on
recorded data (session 35's question whether abduction's space-filling draws should lean)."""
from __future__ import annotations

import math

import numpy as np
from bench_scripts import load_benchmark

from abductune.datasets.zoo import zoo_datasets


def test_expected_best_of_k_draws():
    mod = load_benchmark("sampling_prior")
    rng = np.random.default_rng(0)
    times = np.array([1.0, 2.0, 4.0, np.inf])
    # every config drawn: the optimum is always found
    assert mod._expected_best(times, np.ones(4), 4, 20, rng) == 1.0
    # all the weight on the slowest runnable config: 4x, every draw
    assert math.isclose(mod._expected_best(times, np.array([1e-12, 1e-12, 1.0, 1e-12]), 1, 20, rng), 4.0, rel_tol=1e-6)
    # uniform single draws over the runnable and the failed one (10x): the geomean of 1, 2, 4, 10 in the limit
    got = mod._expected_best(times, np.ones(4), 1, 4000, rng)
    assert abs(math.log(got) - math.log(80) / 4) < 0.05


def test_learned_lifts_favour_the_values_of_good_configs():
    mod = load_benchmark("sampling_prior")
    data = mod._load(zoo_datasets("zoo_rmsnorm_bf16")[:2])
    lifts = mod._lifts(data, list(data))
    warps = lifts["num_warps"]
    assert len(warps) >= 3
    # some warps value is over-represented among the near-optimal configs, some under
    assert max(warps.values()) > 0 > min(warps.values())
