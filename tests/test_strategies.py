"""Search strategies: shared contracts (determinism, budgets, validity, seeds, options,
termination) for every registered strategy, specific semantics per strategy, and replay on
a recorded dataset and on public Kernel Tuner data."""
from __future__ import annotations

import math
import os
import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from abductune.datasets import Dataset, read_dataset, write_dataset
from abductune.errors import AbductuneError
from abductune.measure.replay import ReplayEvaluator
from abductune.problem import Problem
from abductune.search import STRATEGIES, Budget, make_strategy, run
from abductune.space import Bool, Choice, IntRange, Pow2, Space
from strategy_fixtures import (OPTIMUM, FakeEvaluator, Watched, matmul_space, matmul_time, measurement,
                               smem_overflow)

NAMES = sorted(STRATEGIES)
SPACE = matmul_space()
ONE_CONFIG_COST = 0.75  # COMPILE_S + BENCH_S


def configs(result):
    return [m.config for m in result.history]


# ------------------------------------------------------------------- shared contracts

def test_registry_lists_every_strategy():
    assert {"exhaustive", "random", "fixed", "coordesc", "beam", "genetic", "pattern", "tpe"} <= set(STRATEGIES)
    for name, cls in STRATEGIES.items():
        assert cls.name == name


@pytest.mark.parametrize("name", NAMES)
def test_deterministic_for_a_seed(name):
    runs = [run(make_strategy(name, seed=7), FakeEvaluator(SPACE), Budget(evaluations=40)) for _ in range(2)]
    assert configs(runs[0]) == configs(runs[1])
    assert runs[0].history, "a strategy must measure something"


@pytest.mark.parametrize("name", NAMES)
def test_evaluation_budget(name):
    ev = FakeEvaluator(SPACE)
    res = run(make_strategy(name, seed=1), ev, Budget(evaluations=17), batch_size=8)
    assert res.evaluations <= 17
    assert len(ev.measured) <= 17


class PruningEvaluator(FakeEvaluator):
    """Refuses every config whose tiles overflow shared memory before compiling it (status
    pruned, as the decorator's evaluator answers for the resource model or early_config_prune)."""

    def evaluate(self, configs):
        from abductune.measurement import Measurement, Status

        out = []
        for cfg in configs:
            if smem_overflow(cfg):
                self.calls.append(dict(cfg))
                out.append(Measurement(dict(cfg), Status.PRUNED, error="the resource model: shared memory"))
            else:
                out.append(super().evaluate([cfg])[0])
        return out


@pytest.mark.parametrize("name", ["random", "pattern", "tpe", "abduction"])
def test_configs_refused_unmeasured_do_not_spend_the_budget(name):
    ev = PruningEvaluator(SPACE)
    res = run(make_strategy(name, seed=3), ev, Budget(evaluations=24), batch_size=8)
    pruned = [m for m in res.history if m.status.value == "pruned"]
    ran = [m for m in res.history if m.status.value != "pruned"]
    assert res.evaluations == len(ran) == 24  # every evaluation of the budget measured a config
    assert len(ev.measured) == 24
    if name == "random":  # a blind draw from this space hits the refused region often
        assert pruned


def test_past_the_free_allowance_refused_configs_count():
    from abductune.search import base

    ev = PruningEvaluator(SPACE)
    every = [c for c in SPACE.valid_configs() if smem_overflow(c)][:base.PRUNED_FREE + 10]
    res = run(make_strategy("fixed", configs=every), ev, Budget(evaluations=5), batch_size=8)
    assert res.evaluations == 5 and len(res.history) == base.PRUNED_FREE + 5


@pytest.mark.parametrize("name", NAMES)
def test_seconds_budget_stops_within_one_batch(name):
    ev = FakeEvaluator(SPACE)
    limit, batch = 6.0, 4
    res = run(make_strategy(name, seed=1), ev, Budget(seconds=limit), batch_size=batch)
    assert ev.clock <= limit + batch * ONE_CONFIG_COST
    assert res.seconds == pytest.approx(ev.clock)


@pytest.mark.parametrize("name", NAMES)
def test_never_proposes_invalid_configs(name):
    ev = FakeEvaluator(SPACE, check_valid=True)  # asserts inside evaluate()
    res = run(make_strategy(name, seed=2), ev, Budget(evaluations=60))
    assert ev.calls and all(SPACE.is_valid(c) for c in configs(res))


@pytest.mark.parametrize("name", NAMES)
def test_seeds_are_measured_first(name):
    seeds = [{"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 64, "num_warps": 8, "num_stages": 2},
             {"BLOCK_M": 32, "BLOCK_N": 128, "BLOCK_K": 16, "num_warps": 2, "num_stages": 4}]
    ev = FakeEvaluator(SPACE)
    res = run(make_strategy(name, seed=3), ev, Budget(evaluations=20), seeds=seeds)
    assert configs(res)[:2] == seeds
    assert ev.calls[:2] == seeds


@pytest.mark.parametrize("name", NAMES)
def test_unknown_option_is_rejected(name):
    with pytest.raises(AbductuneError, match="bogus_option"):
        make_strategy(name, bogus_option=1)


def tiny_space() -> Space:
    # 5 valid configs out of 6
    return Space([Pow2("BLOCK_M", 16, 64), Choice("num_warps", [4, 8])], ["BLOCK_M * num_warps <= 256"])


def tiny_time(c):
    return None if c["BLOCK_M"] == 64 else 1.0 + c["BLOCK_M"] / 64 + (c["num_warps"] == 8) * 0.1


@pytest.mark.parametrize("name", NAMES)
def test_terminates_on_its_own_without_budget(name):
    space = tiny_space()
    w = Watched(make_strategy(name, seed=0))
    res = run(w, FakeEvaluator(space, tiny_time))
    assert w.finished, f"{name} only stopped because the driver gave up on it"
    assert w.batches < 500
    assert res.evaluations <= len(space) == 5


# --------------------------------------------------------------- strategy semantics

def test_exhaustive_finds_the_optimum():
    res = run(make_strategy("exhaustive"), FakeEvaluator(SPACE))
    assert res.best.config == OPTIMUM and res.best.time_ms == pytest.approx(1.0)
    assert res.evaluations == len(SPACE) == 1440
    failed = [m.config for m in res.history if m.status == "compile_error"]
    assert failed and all(smem_overflow(c) for c in failed)  # the failing region is there


@pytest.mark.parametrize("name", ["coordesc", "pattern", "beam"])
def test_local_strategies_reach_the_optimum_of_a_smooth_bowl(name):
    res = run(make_strategy(name), FakeEvaluator(SPACE))
    assert res.best.config == OPTIMUM
    assert res.evaluations < 250  # far fewer than exhaustive's 1440


@pytest.mark.parametrize("name, options", [("random", {}), ("genetic", {}), ("tpe", {}),
                                           ("tpe", {"encoding": "int"})])
def test_global_strategies_get_close_with_a_budget(name, options):
    res = run(make_strategy(name, seed=0, **options), FakeEvaluator(SPACE), Budget(evaluations=120))
    assert res.best.time_ms < 1.25


def test_fixed_list_completes_partial_configs_and_defaults_to_the_space_default():
    ev = FakeEvaluator(SPACE)
    res = run(make_strategy("fixed", configs=[{"BLOCK_M": 128}, OPTIMUM, {"BLOCK_M": 128}]), ev)
    assert configs(res) == [{**SPACE.default(), "BLOCK_M": 128}, OPTIMUM]
    assert configs(run(make_strategy("fixed"), FakeEvaluator(SPACE))) == [SPACE.default()]
    with pytest.raises(AbductuneError, match="configs"):
        make_strategy("fixed", configs={"BLOCK_M": 128})
    with pytest.raises(AbductuneError, match="BLOCK_Q"):
        run(make_strategy("fixed", configs=[{"BLOCK_Q": 1}]), FakeEvaluator(SPACE))


def one_param_times(gain):
    """XBLOCK 1, 2, 4, 8: doubling once gains `gain` (relative), doubling twice halves the time."""
    space = Space([Pow2("XBLOCK", 1, 8)])
    times = {1: 1.0, 2: 1.0 - gain, 4: 0.5, 8: 2.0}
    return space, lambda c: times[c["XBLOCK"]]


def test_coordesc_threshold_rejects_a_tiny_gain_and_accepts_a_real_one():
    space, fn = one_param_times(0.0005)  # 0.05% < 0.1%: rejected, descent stops at once
    ev = FakeEvaluator(space, fn)
    run(make_strategy("coordesc", threshold=0.001), ev)
    assert [c["XBLOCK"] for c in ev.calls] == [1, 2]  # 4 (twice as fast) is never reached
    space, fn = one_param_times(0.01)  # 1%: accepted, and the same direction is followed
    ev = FakeEvaluator(space, fn)
    res = run(make_strategy("coordesc", threshold=0.001), ev)
    assert res.best.config == {"XBLOCK": 4}
    assert [c["XBLOCK"] for c in ev.calls] == [1, 2, 4, 8]
    space, fn = one_param_times(0.0005)  # threshold 0 accepts any gain
    assert run(make_strategy("coordesc", threshold=0.0), FakeEvaluator(space, fn)).best.config == {"XBLOCK": 4}


def test_coordesc_field_limits_are_never_exceeded():
    ev = FakeEvaluator(SPACE)
    res = run(make_strategy("coordesc", field_limits={"BLOCK_M": 64, "num_stages": 2},
                            check_all_directions=True), ev)
    assert all(c["BLOCK_M"] <= 64 and c["num_stages"] <= 2 for c in ev.calls)
    assert res.best.config["BLOCK_M"] == 64 and res.best.config["num_stages"] == 2  # pushed to the limit


def test_coordesc_field_order_restricts_the_tuned_fields():
    ev = FakeEvaluator(SPACE)
    run(make_strategy("coordesc", field_order=["num_warps"]), ev)
    start = SPACE.default()
    assert len(ev.calls) > 1
    assert all({k: v for k, v in c.items() if k != "num_warps"} ==
               {k: v for k, v in start.items() if k != "num_warps"} for c in ev.calls)
    with pytest.raises(AbductuneError, match="BLOCK_Q"):
        run(make_strategy("coordesc", field_order=["BLOCK_Q"]), FakeEvaluator(SPACE))
    with pytest.raises(AbductuneError, match="BLOCK_Q"):
        run(make_strategy("coordesc", field_limits={"BLOCK_Q": 64}), FakeEvaluator(SPACE))


def ridge():
    """Time falls along the diagonal BLOCK_M == BLOCK_N, but any single move off the diagonal
    costs more than the diagonal gains: single-axis descent is stuck at the start."""
    space = Space([Pow2("BLOCK_M", 16, 256), Pow2("BLOCK_N", 16, 256)])

    def fn(c):
        a, b = (int(math.log2(c[x])) - 4 for x in ("BLOCK_M", "BLOCK_N"))
        return 1.0 + (a - b) ** 2 + 0.1 * (8 - a - b)
    return space, fn


def test_coordesc_all_directions_escapes_what_single_moves_cannot():
    space, fn = ridge()
    corner = {"BLOCK_M": 256, "BLOCK_N": 256}
    assert run(make_strategy("coordesc"), FakeEvaluator(space, fn)).best.config == {"BLOCK_M": 16, "BLOCK_N": 16}
    res = run(make_strategy("coordesc", check_all_directions=True, radius=2), FakeEvaluator(space, fn))
    assert res.best.config == corner
    assert run(make_strategy("pattern"), FakeEvaluator(space, fn)).best.config == corner  # tile pair moves


def test_coordesc_starts_from_the_best_seed():
    seed = {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}
    ev = FakeEvaluator(SPACE)
    res = run(make_strategy("coordesc"), ev, seeds=[SPACE.default(), seed])
    assert res.best.config == OPTIMUM
    # a sweep around the seed, one step on, then a confirming sweep around the optimum
    assert all(SPACE.distance(c, seed) <= 2 for c in ev.calls[2:])
    assert len(ev.measured) <= 2 + 2 * (2 * len(SPACE.names) + 1)


def test_genetic_proposes_only_unmeasured_configs_until_the_space_runs_out():
    ev = FakeEvaluator(SPACE)
    run(make_strategy("genetic", seed=4), ev, Budget(evaluations=200))
    assert len(ev.calls) == len({SPACE.key(c) for c in ev.calls}) == 200


def test_bad_option_values_are_rejected():
    bad = [("coordesc", {"threshold": 1.5}), ("coordesc", {"radius": 0}), ("coordesc", {"field_order": "BLOCK_M"}),
           ("coordesc", {"field_limits": {"BLOCK_M": "big"}}), ("beam", {"beam_width": 0}),
           ("genetic", {"population": 1}), ("genetic", {"elite": 16}), ("genetic", {"mutation_rate": 2}),
           ("genetic", {"repair": "magic"}), ("pattern", {"max_step": 0}), ("tpe", {"n_startup_trials": -1}),
           ("tpe", {"multivariate": "yes"}), ("tpe", {"encoding": "onehot"}), ("fixed", {"configs": []})]
    for name, opts in bad:
        with pytest.raises(AbductuneError, match=next(iter(opts))):
            make_strategy(name, **opts)


def test_tpe_without_optuna_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # makes `import optuna` raise ImportError
    with pytest.raises(AbductuneError, match=r"TPE needs optuna.*pip install optuna"):
        run(make_strategy("tpe"), FakeEvaluator(SPACE), Budget(evaluations=5))


# --------------------------------------------------------------------------- replay

@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The synthetic space recorded as a dataset, with some configs left out (as Kernel Tuner
    caches leave out restricted configs): the valid set is exactly the recorded one."""
    records = [measurement(c, matmul_time(c)) for c in SPACE.valid_configs() if c["BLOCK_K"] != 64]
    ds = Dataset(Problem("fake_matmul", "matmul", {"M": 1024, "N": 1024, "K": 1024}), SPACE.to_dict(),
                 records, restricted_to_records=True, source="test")
    path = tmp_path_factory.mktemp("ds") / "fake.jsonl.gz"
    write_dataset(ds, path)
    return read_dataset(path)


@pytest.mark.parametrize("name", NAMES)
def test_replay_on_a_recorded_dataset(name, recorded):
    ev = ReplayEvaluator(recorded)
    res = run(make_strategy(name, seed=5), ev, Budget(evaluations=40))
    assert 0 < res.evaluations <= 40
    assert not any(m.status == "pruned" for m in res.history), "proposed a config outside the recording"
    assert res.best.time_ms >= recorded.optimum().time_ms
    # a re-measurement costs its benchmark again, not a compile
    assert ev.clock == pytest.approx(sum(m.cost_s for m in res.history) + sum(m.bench_s for m in res.remeasured))


PUBLIC = Path(__file__).parents[2] / "shared/datasets/public"


@pytest.fixture(scope="module")
def pnpoly():
    """Real exhaustive data (Kernel Tuner benchmark hub, pnpoly on an RTX 3090). Skips when
    absent, unless ABDUCTUNE_REQUIRE_PUBLIC_DATA=1, which turns the skip into a failure."""
    def unavailable(reason: str):
        if os.environ.get("ABDUCTUNE_REQUIRE_PUBLIC_DATA") == "1":
            pytest.fail(f"{reason} (and ABDUCTUNE_REQUIRE_PUBLIC_DATA=1)")
        pytest.skip(reason)
    path = PUBLIC / "kernel_tuner_benchmark_hub/pnpoly/RTX_3090.json.gz"
    if not path.is_file():
        unavailable(f"public dataset {path} is absent")
    try:
        from abductune.datasets.kernel_tuner import import_kernel_tuner
    except ImportError as e:
        unavailable(f"the Kernel Tuner importer is not importable ({e})")
    return import_kernel_tuner(path)


@pytest.mark.parametrize("name", NAMES)
def test_replay_on_public_kernel_tuner_data(name, pnpoly):
    res = run(make_strategy(name, seed=0), ReplayEvaluator(pnpoly), Budget(evaluations=60))
    again = run(make_strategy(name, seed=0), ReplayEvaluator(pnpoly), Budget(evaluations=60))
    assert configs(res) == configs(again)
    assert 0 < res.evaluations <= 60
    assert not any(m.status == "pruned" for m in res.history)
    assert res.best.time_ms >= pnpoly.optimum().time_ms
    if name == "exhaustive":
        full = run(make_strategy(name), ReplayEvaluator(pnpoly))
        assert full.best.time_ms == pnpoly.optimum().time_ms


# ------------------------------------------------------------------ random small spaces

def random_problem(seed: int):
    """A small random space (ordered, unordered, single-valued and bool parameters, a random
    constraint) with random times and failures, all derived from `seed`."""
    rng = random.Random(seed)
    kinds = [lambda i: Pow2(f"BLOCK_{'MNK'[i % 3]}{i}", 16, 16 * 2 ** rng.randrange(4)),
             lambda i: IntRange(f"num_stages{i}", 1, rng.randrange(1, 5)),
             lambda i: Choice(f"mode{i}", ["a", "b", "c"][: rng.randrange(1, 4)]),
             lambda i: Bool(f"flag{i}")]
    params = [rng.choice(kinds)(i) for i in range(rng.randrange(1, 4))]
    full = Space(params)
    kept = {full.key(c) for c in full.valid_configs() if rng.random() < 0.7} or {full.key(full.default())}
    space = Space(params, [lambda c: full.key(c) in kept])
    times = {space.key(c): (None if rng.random() < 0.2 else rng.uniform(1, 2)) for c in space.valid_configs()}
    return space, (lambda c: times[space.key(c)])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000))
def test_every_strategy_ends_validly_on_random_small_spaces(seed):
    space, fn = random_problem(seed)
    for name in NAMES:
        w = Watched(make_strategy(name, seed=seed))
        ev = FakeEvaluator(space, fn, check_valid=True)
        res = run(w, ev, batch_size=3)
        assert w.finished, name
        # every evaluation is a distinct config, or an explicit re-measurement (abduction)
        assert res.evaluations == len(ev.measured) + len(res.remeasured) and len(ev.measured) <= len(space)
        ok = [m.time_ms for m in ev.measured.values() if m.ok]
        assert (res.best.time_ms if res.best else None) == (min(ok) if ok else None)
