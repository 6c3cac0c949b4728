"""Generic mode: importance and interactions learned from measurements on spaces without roles,
and the moves proposed from them."""
from __future__ import annotations

import math
import random

import pytest

from abductune.errors import AbductuneError
from abductune.measurement import Measurement
from abductune.space import Bool, Choice, Pow2, Space
from abductune.theory import generic_moves, importance, interactions
from public_data import load_public

PNPOLY = "kernel_tuner_benchmark_hub/pnpoly/RTX_3090.json.gz"


def _space() -> Space:
    # names without roles, like a Kernel Tuner space; the constraint forbids part of the grid
    return Space([Pow2("a", 1, 128), Choice("b", [0, 1, 2, 3]), Choice("c", [0, 1, 2, 3]), Bool("d")],
                 constraints=["a <= 64 or d"])


def _sample(space: Space, objective, n: int = 120, seed: int = 0) -> list[tuple[dict, float]]:
    rng = random.Random(seed)
    configs = rng.sample(space.valid_configs(), n)
    return [(c, objective(c, rng)) for c in configs]


def _only_a(c, rng):  # time doubles with every step of a; the rest is 2% noise
    return 2.0 ** math.log2(c["a"]) * (1 + 0.02 * rng.random())


def _b_times_c(c, rng):  # slow when b and c have the same parity: no main effect, a pure pair effect
    return (3.0 if (c["b"] + c["c"]) % 2 == 0 else 1.0) * (1 + 0.02 * rng.random())


def test_importance_finds_the_one_parameter_that_matters():
    sp = _space()
    imp = importance(sp, _sample(sp, _only_a))
    assert set(imp) == set(sp.names)
    assert imp["a"] > 0.9
    assert all(imp[n] < 0.05 for n in ("b", "c", "d"))


def test_interactions_find_the_pair():
    sp = _space()
    obs = _sample(sp, _b_times_c)
    imp = importance(sp, obs)
    assert all(v < 0.1 for v in imp.values())  # no parameter matters on its own
    inter = interactions(sp, obs)
    assert set(inter) == {("a", "b"), ("a", "c"), ("a", "d"), ("b", "c"), ("b", "d"), ("c", "d")}
    assert inter[("b", "c")] > 0.8
    assert all(v < 0.1 for k, v in inter.items() if k != ("b", "c"))
    # restricted to two names: one pair
    assert set(interactions(sp, obs, names=["c", "b"])) == {("b", "c")}


def test_additive_effects_do_not_interact():
    sp = _space()
    obs = _sample(sp, lambda c, rng: c["a"] * (2.0 if c["d"] else 1.0) * (1 + 0.02 * rng.random()))
    inter = interactions(sp, obs)
    assert inter[("a", "d")] < 0.05  # log-time is additive in a and d


def test_measurements_failures_and_bad_input():
    sp = _space()
    ms = [Measurement(config=c, time_ms=t) for c, t in _sample(sp, _only_a, n=60)]
    ms += [Measurement(config=c, status="compile_error") for c, _ in _sample(sp, _only_a, n=10, seed=1)]
    imp = importance(sp, ms)
    assert max(imp, key=imp.get) == "a"
    assert importance(sp, ms[:2]) == {n: 0.0 for n in sp.names}  # too few to say anything
    with pytest.raises(AbductuneError, match="Measurement or a \\(config, time\\) pair"):
        importance(sp, [42])


def test_generic_moves_follow_importance_then_pairs():
    sp = _space()
    inc = {"a": 16, "b": 1, "c": 2, "d": False}
    moves = generic_moves(sp, inc, {"a": 0.9, "b": 0.0, "c": 0.0, "d": 0.0}, {}, k=6)
    assert 0 < len(moves) <= 6
    assert all(sp.is_valid(m) and m != inc for m in moves)
    assert len({sp.key(m) for m in moves}) == len(moves)
    # the first moves walk `a` alone, nearest steps first
    assert [m["a"] for m in moves[:2]] == [8, 32]
    assert all({k for k in inc if m[k] != inc[k]} == {"a"} for m in moves[:4])
    # with no single parameter mattering, the interacting pair moves together first
    pair_first = generic_moves(sp, inc, {n: 0.0 for n in sp.names}, {("b", "c"): 0.9}, k=4)
    assert all({k for k in inc if m[k] != inc[k]} == {"b", "c"} for m in pair_first)


def test_generic_moves_respect_constraints():
    sp = _space()
    inc = {"a": 64, "b": 0, "c": 0, "d": False}  # a=128 needs d
    moves = generic_moves(sp, inc, {"a": 1.0, "b": 0.1, "c": 0.1, "d": 0.5}, {("a", "d"): 0.5}, k=20)
    assert all(sp.is_valid(m) for m in moves)
    assert {"a": 128, "b": 0, "c": 0, "d": True} in moves  # reached only as a pair move


def test_importance_on_public_pnpoly_agrees_with_the_full_data():
    ds = load_public(PNPOLY)
    sp = ds.space()
    ok = ds.ok_records()
    full = importance(sp, ok)
    few = importance(sp, random.Random(0).sample(ok, 60))
    assert max(few, key=few.get) == max(full, key=full.get)
