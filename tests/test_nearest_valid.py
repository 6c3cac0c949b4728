"""`Space.nearest_valid` (vectorised) against a brute-force reference: the linear scan it
replaced, extended with the caps the heuristics' copy had."""
from __future__ import annotations

import math
import random

import pytest

from abductune.errors import SpaceError
from abductune.space import Bool, Choice, IntRange, Pow2, Space

from public_data import load_public


def reference(space: Space, cfg, prefer=(), caps=None):
    """The old linear scan: every valid config, index distance for ordered parameters, 0/1
    otherwise, `prefer` keys weighted above any distance over the others, first minimum
    wins; with caps, only configs within every cap, unless none is."""
    target = space.clamp({**{p.name: p.default_value for p in space.params}, **cfg})
    big = float(sum(len(p.values) for p in space.params) + 1)
    w = {n: (big if n in set(prefer) else 1.0) for n in space.names}
    pool = space.valid_configs()
    if caps:
        within = [c for c in pool if all(space[n].index(c[n]) <= space[n].index(v) for n, v in caps.items())]
        pool = within or pool
    best, best_d = None, math.inf
    for c in pool:
        d = sum(w[p.name] * (abs(p.index(c[p.name]) - p.index(target[p.name])) if p.ordered
                             else float(c[p.name] != target[p.name])) for p in space.params)
        if d < best_d:
            best, best_d = c, d
    return best


def random_space(rng: random.Random) -> Space:
    params = [Pow2("BLOCK_M", 16, 256), Pow2("BLOCK_N", 16, 256), IntRange("stages", 1, 5),
              Choice("layout", ["row", "col", "tiled"]), Bool("EVEN_K"), Choice("num_warps", [2, 4, 8])]
    cons = rng.sample(["BLOCK_M * BLOCK_N <= 64 * 64 * num_warps", "stages * BLOCK_M <= 512",
                       "layout != 'tiled' or BLOCK_M == BLOCK_N", "EVEN_K or stages <= 2",
                       "BLOCK_N >= 2 * num_warps * 4"], k=rng.randint(2, 5))
    return Space(params, cons, name="random")


def random_partial(space: Space, rng: random.Random) -> dict:
    names = rng.sample(list(space.names), k=rng.randint(1, len(space.names)))
    return {n: rng.choice(space[n].values) for n in names}


@pytest.mark.parametrize("seed", range(6))
def test_nearest_valid_agrees_with_brute_force_on_random_partial_configs(seed):
    rng = random.Random(seed)
    space = random_space(rng)
    repaired = 0
    for _ in range(60):
        partial = random_partial(space, rng)
        prefer = rng.sample(list(partial), k=rng.randint(0, len(partial)))
        caps = {"BLOCK_M": rng.choice(space["BLOCK_M"].values)} if rng.random() < 0.4 else None
        got = space.nearest_valid(partial, prefer=prefer, caps=caps)
        assert space.is_valid(got)
        assert got == reference(space, partial, prefer, caps), (partial, prefer, caps)
        repaired += got != {**{p.name: p.default_value for p in space.params}, **partial}
    assert repaired >= 10  # the repair path, not only the "already valid" shortcut


def test_nearest_valid_keeps_preferred_values_and_honours_caps():
    sp = Space([Pow2("BLOCK_M", 16, 128), Pow2("BLOCK_N", 16, 128)], ["BLOCK_M * BLOCK_N <= 2048"])
    # 128 x 128 is invalid; keeping BLOCK_M = 128 forces BLOCK_N down to 16
    assert sp.nearest_valid({"BLOCK_M": 128, "BLOCK_N": 128}, prefer=["BLOCK_M"]) == \
        {"BLOCK_M": 128, "BLOCK_N": 16}
    assert sp.nearest_valid({"BLOCK_M": 128, "BLOCK_N": 128}, prefer=["BLOCK_N"]) == \
        {"BLOCK_M": 16, "BLOCK_N": 128}
    # a cap that some valid config meets is a hard limit; one that none meets is ignored
    assert sp.nearest_valid({"BLOCK_M": 64, "BLOCK_N": 64}, caps={"BLOCK_M": 16})["BLOCK_M"] == 16
    tight = Space([Pow2("BLOCK_M", 16, 128)], ["BLOCK_M >= 64"])
    assert tight.nearest_valid({"BLOCK_M": 16}, caps={"BLOCK_M": 16}) == {"BLOCK_M": 64}
    with pytest.raises(SpaceError, match="BLOK"):
        sp.nearest_valid({"BLOCK_M": 64}, caps={"BLOK": 16})


def test_complete_caps_the_merge_before_repairing():
    sp = Space([Pow2("BLOCK_M", 16, 128, default=128), Pow2("BLOCK_N", 16, 128, default=16)],
               ["BLOCK_M * BLOCK_N <= 2048"])
    assert sp.complete({"BLOCK_N": 32}, caps={"BLOCK_M": 32}) == {"BLOCK_M": 32, "BLOCK_N": 32}
    # without the cap the kept BLOCK_N = 32 forces BLOCK_M to 64
    assert sp.complete({"BLOCK_N": 32}) == {"BLOCK_M": 64, "BLOCK_N": 32}


def test_nearest_valid_agrees_on_the_clblast_public_space():
    ds = load_public("kernel_tuner_benchmark_hub/gemm_clblast/RTX_3090.json.gz")
    space = ds.space()
    assert len(space) > 15000
    rng = random.Random(1)
    for _ in range(10):
        cfg = {p.name: rng.choice(p.values) for p in space.params}
        prefer = rng.sample(list(space.names), k=2)
        assert space.nearest_valid(cfg, prefer=prefer) == reference(space, cfg, prefer)
