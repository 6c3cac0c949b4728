"""The zero-shot ranker learned across kernels (heuristics/ranker.py, heuristics/features.py):
it learns only from what the holdout allows, proposes nothing the resource model rejects, is
deterministic, reads roles rather than names, and beats a random pick where the answer is known."""
from __future__ import annotations

import math

import numpy as np
import pytest

from abductune.datasets.bundled import bundled_datasets
from abductune.datasets.zoo import zoo_datasets
from abductune.errors import AbductuneError
from abductune.hardware import KNOWN_GPUS
from abductune.heuristics.features import NAMES, feature_matrix
from abductune.heuristics.harvest import Observation, observations_from_datasets
from abductune.heuristics.ranker import Ranker
from abductune.problem import Holdout, Problem
from abductune.space import Choice, Pow2, Space
from abductune.theory.resources import trouble

H100 = KNOWN_GPUS["H100-SXM"]
FP16 = {"a": "fp16", "b": "fp16", "c": "fp16"}
NAMINGS = {"synth_a": ("BLOCK_M", "BLOCK_N", "BLOCK_K"), "synth_b": ("BM", "BN", "BK"),
           "synth_c": ("TILE_M", "TILE_N", "TILE_K"), "synth_d": ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")}
SHAPES = ({"M": 16, "N": 4096, "K": 4096}, {"M": 1000, "N": 3000, "K": 2000}, {"M": 4096, "N": 4096, "K": 1024})


def mm_space(names, hi=128, k_hi=64, stages=(2, 3)):
    m, n, k = names
    return Space([Pow2(m, 16, hi), Pow2(n, 32, hi), Pow2(k, 32, k_hi), Choice("num_warps", [4, 8]),
                  Choice("num_stages", list(stages))])


def known_log_time(problem, space, configs):
    """The synthetic truth: a function of the ranker's own features (unfilled SMs, padding,
    and elements per thread away from 32), so the best config is known exactly."""
    X = feature_matrix(problem, space, configs)
    f = {n: X[:, i] for i, n in enumerate(NAMES)}
    return -0.15 * f["fill"] - 0.4 * f["useful"] + 0.04 * (f["elems_per_thread"] - 5.0) ** 2


def synthetic(kernel, dims, truth=known_log_time, source_hash="", space=None):
    space = space or mm_space(NAMINGS[kernel])
    p = Problem(kernel, "matmul", dict(dims), dict(FP16), flops=2.0 * dims["M"] * dims["N"] * dims["K"],
                min_bytes=2.0 * (dims["M"] * dims["K"] + dims["K"] * dims["N"] + dims["M"] * dims["N"]),
                hardware=H100, source_hash=source_hash or kernel)
    cfgs = space.valid_configs()
    logt = truth(p, space, cfgs)
    times = {space.key(c): float(math.exp(v)) for c, v in zip(cfgs, logt)}
    return Observation(f"{kernel}:{dims['M']}", p, space, times)


@pytest.fixture(scope="module")
def synth():
    return [synthetic(k, d) for k in NAMINGS for d in SHAPES]


def test_leave_one_kernel_out_leaves_every_shape_of_the_kernel_out(synth):
    held = synth[0].problem
    loko = Ranker.fit(synth, exclude=Holdout(held, "kernel"))
    assert all("synth_a" not in ks for ks in loko.trained_on.values())
    assert loko.trained_on["gemm"] == ["synth_b", "synth_c", "synth_d"]
    loso = Ranker.fit(synth, exclude=Holdout(held, "shape"))
    assert "synth_a" in loso.trained_on["gemm"]  # its other shapes stay
    # the same source under another name is the same kernel (the zoo's two attention kernels)
    twin = [synthetic("synth_b", d, source_hash="synth_a") for d in SHAPES]
    both = Ranker.fit(synth[:3] + twin + synth[6:], exclude=Holdout(held, "kernel"))
    assert both.trained_on["gemm"] == ["synth_c", "synth_d"]


def test_beats_random_where_the_optimum_is_a_known_function_of_the_features(synth):
    for kind in ("linear", "knn"):
        for held in ("synth_a", "synth_c"):
            test = [o for o in synth if o.kernel == held]
            r = Ranker.fit(synth, exclude=Holdout(test[0].problem, "kernel"), kind=kind)
            for o in test:
                top = r.rank(o.problem, o.space)[0]
                rand = math.exp(np.mean([math.log(t / o.optimum) for t in o.times.values()]))
                assert o.time_of(top) / o.optimum < 1.03, (kind, o.name, top)
                assert rand > 1.1  # the test means something: a random pick is far off


def test_never_proposes_a_config_the_resource_model_rejects(synth):
    # a truth where bigger tiles always win: the model is pushed towards configs that cannot launch
    def bigger_is_better(p, space, cfgs):
        X = feature_matrix(p, space, cfgs)
        return -0.1 * X[:, NAMES.index("reuse")] - 0.05 * X[:, NAMES.index("stages")]

    wide = mm_space(("BM", "BN", "BK"), hi=256, k_hi=128, stages=(2, 3, 4, 5))
    train = [synthetic(k, d, bigger_is_better, space=wide) for k in ("synth_b", "synth_c") for d in SHAPES]
    r = Ranker.fit(train)
    o = synthetic("synth_a", SHAPES[2], bigger_is_better, space=mm_space(NAMINGS["synth_a"], 256, 128, (2, 3, 4, 5)))
    ranked = r.rank(o.problem, o.space)
    rejected = [c for c in o.space.valid_configs() if trouble(o.problem, o.space, c)]
    assert rejected and ranked
    assert all(trouble(o.problem, o.space, c) is None for c in ranked)
    assert len(ranked) == o.space.cardinality - len(rejected)
    # the winner is the largest tile that still fits, not the largest tile
    assert ranked[0]["BLOCK_M"] * ranked[0]["BLOCK_N"] >= 128 * 128


def test_deterministic_and_blind_to_parameter_names(synth):
    a = Ranker.fit(synth, exclude=Holdout(synth[0].problem, "kernel"))
    b = Ranker.fit(synth, exclude=Holdout(synth[0].problem, "kernel"))
    assert a.to_dict() == b.to_dict()
    o = synth[1]
    assert a.rank(o.problem, o.space) == b.rank(o.problem, o.space)
    # the same problem and configs under other names: the same features, the same order
    renamed = synthetic("synth_b", SHAPES[1])
    rank_a = [tuple(c.values()) for c in a.rank(o.problem, o.space)]
    rank_b = [tuple(c.values()) for c in a.rank(renamed.problem, renamed.space)]
    assert rank_a == rank_b


def test_a_space_it_cannot_read_is_left_out_or_refused(synth):
    blind = Space([Choice("block_size_x", [32, 64, 128]), Choice("tile_size_x", [1, 2, 4])])
    p = Problem("cuda_kernel", "other", {"x": 4096}, {}, hardware=H100)
    obs = Observation("cuda", p, blind, {blind.key(c): 1.0 + i for i, c in enumerate(blind.valid_configs())})
    r = Ranker.fit(synth + [obs])
    assert r.skipped == ["cuda_kernel:cuda"]
    with pytest.raises(AbductuneError, match="warps role"):
        r.rank(p, blind)
    with pytest.raises(AbductuneError, match="nothing to learn"):
        Ranker.fit([obs])
    with pytest.raises(AbductuneError, match="kind"):
        Ranker.fit(synth, kind="forest")


def test_fits_on_recorded_datasets_and_ranks_another_kernels_shape():
    paths = bundled_datasets(kernel="gelu_mul_fp16") + zoo_datasets("zoo_swiglu_bf16")[:2]
    r = Ranker.fit(paths)  # paths are read like any dataset
    assert r.trained_on["elementwise"] == ["gelu_mul_fp16", "zoo_swiglu_bf16"]
    (rope,) = observations_from_datasets(zoo_datasets("zoo_rope_bf16")[:1])
    ranked = r.rank(rope.problem, rope.space)
    assert sorted(map(repr, ranked)) == sorted(repr(c) for c in rope.space.valid_configs()
                                               if trouble(rope.problem, rope.space, c) is None)
    assert len(r.rank(rope.problem, rope.space, ranked[:5])) == 5


def test_a_saved_linear_ranker_ranks_as_the_fitted_one(synth):
    r = Ranker.fit(synth[3:])
    back = Ranker.from_dict(r.to_dict())
    o = synth[0]
    assert [tuple(c.values()) for c in back.rank(o.problem, o.space)][:10] == \
        [tuple(c.values()) for c in r.rank(o.problem, o.space)][:10]
    assert back.trained_on == r.trained_on
    with pytest.raises(AbductuneError, match="refit"):
        Ranker.from_dict({**r.to_dict(), "features": ["warps"]})
