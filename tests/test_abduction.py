"""The abduction engine on replay: determinism, budgets (respected and fully used), provenance
through a Session's store, confirmation of close calls under replay noise, generic mode on
public data, and bundled matmul; plus item 7's fair-replay fixes for coordesc, pattern and TPE."""
from __future__ import annotations

import statistics

import pytest

from abductune.datasets.bundled import bundled_datasets
from abductune.datasets.format import read_dataset
from abductune.errors import AbductuneError
from abductune.evaluate import compare_on_dataset
from abductune.measure.replay import NoiseModel, ReplayEvaluator
from abductune.search import Budget, Strategy, make_strategy, run
from abductune.search.abduction import Additive, latin_hypercube
from abductune.session import Session
from abductune.tune import seed_list
from public_data import load_public
from strategy_fixtures import FakeEvaluator, matmul_space

SPACE = matmul_space()


def bundled(shape: str):
    [path] = [p for p in bundled_datasets(kernel="matmul_fp16") if p.name.startswith(shape + ".")]
    return read_dataset(path)


def loo_seeds(ds):
    """Leave-one-shape-out seeds: heuristics and the observed database minus this shape."""
    space = ds.space()
    seeds, _ = seed_list(ds.problem, space, ds.meta.get("default_config") or space.default(), None, True,
                         None, exclude=ds.problem)
    return seeds


def session_run(ds, budget, *, seeds=(), noise=None, seed=1, options=None):
    ev = ReplayEvaluator(ds, noise=noise, seed=seed)
    s = Session(ev, strategy="abduction", seed=seed, budget=Budget(budget), seeds=seeds, judge=False,
                options=options)
    res = s.run()
    rows = s.store.measurements(s.context, run_ids=[res.run_id])
    s.close()
    return ev, res, rows


# ------------------------------------------------------------------------------ contract

def test_same_seed_same_sequence_in_both_modes():
    a = run(make_strategy("abduction", seed=3), FakeEvaluator(SPACE), Budget(evaluations=50))
    b = run(make_strategy("abduction", seed=3), FakeEvaluator(SPACE), Budget(evaluations=50))
    assert [m.config for m in a.history] == [m.config for m in b.history] and len(a.history) >= 45
    ds = bundled("M512_N4096_K4096")
    runs = [session_run(ds, 24, seeds=loo_seeds(ds))[1] for _ in range(2)]
    assert [m.config for m in runs[0].history] == [m.config for m in runs[1].history]
    assert runs[0].events == runs[1].events


@pytest.mark.parametrize("budget", [1, 7, 40, 120])
def test_budget_is_respected_and_used_to_the_last_evaluation(budget):
    ev = FakeEvaluator(SPACE)
    res = run(make_strategy("abduction", seed=1), ev, Budget(evaluations=budget))
    assert res.evaluations == budget  # re-measurements included
    assert len(res.history) + len(res.remeasured) == budget
    assert len(ev.measured) == len(res.history)


def test_ends_only_when_the_whole_space_is_measured():
    from abductune.space import Choice, Pow2, Space

    space = Space([Pow2("BLOCK_M", 16, 128), Choice("num_warps", [2, 4, 8])], ["BLOCK_M * num_warps <= 512"])
    ev = FakeEvaluator(space, lambda c: 1.0 + abs(c["BLOCK_M"] - 64) / 64 + c["num_warps"] / 100)
    res = run(make_strategy("abduction", seed=0), ev)
    assert len(ev.measured) == len(space) and res.best.config == {"BLOCK_M": 64, "num_warps": 2}


def test_bad_options_are_rejected():
    for opts in ({"batch": 0}, {"batch": 9}, {"confidence": 0}, {"noise_floor": 0.9}, {"startup": -1},
                 {"seeded_startup": -1}, {"patience": 0}, {"tpe_slots": 9}, {"model_slots": 9}):
        with pytest.raises(AbductuneError, match=next(iter(opts))):
            make_strategy("abduction", **opts)


# ------------------------------------------------------------------------------ provenance

def test_every_verdict_cites_stored_measurement_ids():
    ds = bundled("M1024_N1024_K16384")  # no seed fires here: it starts from the default (2.2x)
    _ev, res, rows = session_run(ds, 32)
    stored = {m.id: m for m in rows}
    verdicts = [e for e in res.events if e["event"] == "verdict"]
    tests = [e for e in res.events if e["event"] == "test"]
    moves = [e for e in res.events if e["event"] == "move"]
    assert verdicts and moves and {e["event"] for e in res.events} >= {"observe", "hypothesis", "test",
                                                                      "verdict", "move"}
    for v in verdicts:
        assert v["ids"] and all(i in stored for i in v["ids"])
        assert {stored[i].config == v["candidate"] or stored[i].config == v["incumbent"] for i in v["ids"]} == {True}
        assert v["outcome"] in ("supported", "refuted", "neutral", "failed")
    assert all(t["ids"] and all(i in stored for i in t["ids"]) for t in tests)
    for mv in moves[1:]:
        assert all(i in stored for i in mv["ids"])
    # the theories spoke: library theories were tested and at least one was supported
    theories = {v["theory"] for v in verdicts if v["outcome"] == "supported"}
    assert theories - {"poll", "tpe", "model", "compose"}


def test_close_calls_are_confirmed_by_interleaved_remeasurement_under_noise():
    ds = bundled("M4096_N4096_K4096")
    noise = NoiseModel.from_study()
    confirmed = 0
    for seed in range(3):
        _ev, res, rows = session_run(ds, 32, seeds=loo_seeds(ds), noise=noise, seed=seed)
        # a noise probe (`_noise_probe`: the incumbent once, when the search first stalls) is
        # one row; every other re-measurement confirms a close call
        probes = {i for e in res.events if e["event"] == "test" and "noise probe" in e.get("reason", "")
                  for i in e["ids"]}
        re_rows = [m for m in rows if m.kind == "remeasure" and m.id not in probes]
        confirms = [e for e in res.events if e["event"] == "test" and e.get("kind") == "remeasure"
                    and "close call" in e.get("reason", "")]
        # the incumbent and the candidate, each time; a request the budget cut after its first
        # row is the run's last row and logs no test
        cut = len(re_rows) - 2 * len(confirms)
        assert cut == 0 or (cut == 1 and re_rows[-1].id == max(m.id for m in rows)), (len(re_rows), len(confirms))
        re_rows = re_rows[:2 * len(confirms)]
        for e in confirms:
            a, b = [m for m in re_rows if m.id in e["ids"]]
            assert a.id + 1 == b.id  # interleaved: one request, back to back
        confirmed += sum(1 for e in res.events if e["event"] == "verdict" and e["confirmed"])
        assert res.evaluations == 32
    assert confirmed > 0


# ------------------------------------------------------------------------------ quality

def test_bundled_matmul_reaches_two_percent_of_the_optimum_within_16_evaluations():
    for shape in ("M8192_N128_K4096", "M512_N4096_K4096"):
        ds = bundled(shape)
        seeds = loo_seeds(ds)
        assert seeds, "the heuristics should seed this shape"
        ev, res, rows = session_run(ds, 16, seeds=seeds)
        best = min((m for m in rows if m.ok), key=lambda m: m.time_ms)
        assert ev.true_time(best.config) <= 1.02 * ds.optimum().time_ms, shape
    ds = bundled("M1024_N1024_K16384")  # from the default, 2.2x slower than the optimum
    ev, res, rows = session_run(ds, 16)
    best = min((m for m in rows if m.ok), key=lambda m: m.time_ms)
    assert ev.true_time(best.config) <= 1.02 * ds.optimum().time_ms


def test_a_stalled_search_still_sweeps_the_nearest_moves():
    """4096x4096x256 from its theory seed: the model-ranked moves stall at 128x256; the optimum
    (128x128, one stage fewer) is a two-parameter move the sweep reaches within 32."""
    ds = bundled("M4096_N4096_K256")
    ev, res, rows = session_run(ds, 32, seeds=loo_seeds(ds))
    events = res.events
    swept = [e for e in events if e["event"] == "fallback" and "sweeping" in e.get("reason", "")]
    assert swept and all(e["swept"] for e in swept), "the local search should have stalled and swept"
    best = min((m for m in rows if m.ok), key=lambda m: m.time_ms)
    assert ev.true_time(best.config) <= 1.005 * ds.optimum().time_ms


def test_with_theories_a_search_stalled_twice_over_restarts_in_another_basin():
    """Two skinny matmul shapes from their leave-one-out seeds, where the theories and the
    stalled sweep beside TPE sit in one basin: only after that sweep (a second round of
    `patience`; pattern search's poll around the incumbent is not exhausted by then in these
    six-parameter spaces) does the search restart, from a config more than one local move away,
    and in most runs the restart ends faster than the basin it left, unless that basin already
    held a config within 0.5% of the optimum (the M16 x 11008 shape since the additive model's
    shrinkage follows the spread of the times: `_shrink`)."""
    from abductune.search.abduction import LOCAL_REACH

    runs = better = 0
    for shape in ("M16_N11008_K4096", "M16_N4096_K14336"):
        ds = bundled(shape)
        for seed in range(1, 7):
            ev, res, rows = session_run(ds, 64, seeds=loo_seeds(ds), seed=seed)
            restarts = [e for e in res.events if e["event"] == "move" and "restart" in e.get("reason", "")]
            assert restarts, f"{shape} seed {seed}: the basin should stall the search"
            first = res.events.index(restarts[0])
            assert any(e["event"] == "fallback" and "sweeping" in e.get("reason", "")
                       for e in res.events[:first]), "the stalled sweep comes before a restart"
            left, to = restarts[0]["from_config"], restarts[0]["to_config"]
            assert sum(left[n] != to[n] for n in ds.space().names) > LOCAL_REACH
            best = min((m for m in rows if m.ok), key=lambda m: m.time_ms)
            runs += 1
            better += ev.true_time(best.config) < ev.true_time(left) or \
                ev.true_time(left) <= 1.005 * ds.optimum().time_ms
    assert better * 2 > runs, f"restarts beat the basin they left in {better} of {runs} runs"


def test_generic_mode_probes_the_noise_once_when_nothing_says_how_noisy_times_are():
    """Noisy single-sample times (replay noise): the best start is re-measured once, right
    after the start; with recorded spread (the public data's repetitions) it is not."""
    ds = load_public("kernel_tuner_benchmark_hub/pnpoly/RTX_3090.json.gz")

    def probes(noise):
        res = run(make_strategy("abduction", seed=3), ReplayEvaluator(ds, noise=noise, seed=3),
                  Budget(evaluations=30))
        return [e for e in res.events if e["event"] == "test" and "noise probe" in e.get("reason", "")], res
    noisy, res = probes(NoiseModel.from_study())
    assert len(noisy) == 1 and noisy[0]["kind"] == "remeasure" and len(noisy[0]["time_ms"]) == 1
    starts = [e for e in res.events if e["event"] == "test" and e.get("theory") == "start" and "kind" not in e]
    first_after_start = res.events.index(starts[-1]) < res.events.index(noisy[0])
    assert first_after_start and res.evaluations == 30
    assert probes(None)[0] == []  # recorded repetitions already say how noisy times are


def test_seeded_startup_sizes_the_space_filling_start_only_when_seeds_ran():
    """`seeded_startup` sets the space-filling start after measured seeds (at least half of it
    fresh); without seeds the start keeps `startup`."""
    ds = load_public("kernel_tuner_benchmark_hub/pnpoly/RTX_3090.json.gz")
    seed = ds.optimum().config

    def fresh_starts(opts, seeds):
        res = run(make_strategy("abduction", seed=3, **opts), ReplayEvaluator(ds, seed=3), Budget(evaluations=30),
                  seeds=seeds)
        return sum(len(e.get("configs") or []) for e in res.events if e["event"] == "fallback"), res
    assert fresh_starts({}, [seed])[0] == 7  # 8 - 1 seed
    n, res = fresh_starts({"seeded_startup": 2}, [seed])
    assert n == 1 and res.evaluations == 30
    assert fresh_starts({"seeded_startup": 2}, [])[0] == 8  # no seed: `startup` as before


def test_generic_mode_on_public_data_beats_random_at_50_evaluations():
    ds = load_public("kernel_tuner_benchmark_hub/pnpoly/RTX_3090.json.gz")
    cells = {c.strategy: c for c in compare_on_dataset(ds, ["abduction", "random"], [50], repeats=5)}
    assert cells["abduction"].median_ms < cells["random"].median_ms
    assert cells["abduction"].score > 0  # the methodology score: better than random sampling
    res = run(make_strategy("abduction", seed=2), ReplayEvaluator(ds), Budget(evaluations=30))
    assert any(e["event"] == "fallback" and "generic" in e["reason"] for e in res.events)


def _trap_space():
    from abductune.space import Choice, Space

    return Space([Choice(n, [0, 1, 2, 3]) for n in "abcde"])  # no roles: generic mode


def _trap_time(c):
    """A broad basin around all zeros (2 ms and up) and a needle at all threes (1 ms): a local
    search that reaches the zeros stalls there."""
    return 1.0 if all(v == 3 for v in c.values()) else 2.0 + 0.1 * sum(c.values())


def test_generic_mode_restarts_the_local_search_outside_the_basins_it_exhausted():
    from abductune.search.abduction import LOCAL_REACH

    space = _trap_space()
    ev = FakeEvaluator(space, _trap_time)
    res = run(make_strategy("abduction", seed=0), ev, Budget(evaluations=120))
    assert res.evaluations == 120 == len(ev.measured)  # the whole budget, no re-measurement needed
    assert any(e["event"] == "fallback" and "generic" in e["reason"] for e in res.events)
    restarts = [e for e in res.events if e["event"] == "move" and "restart" in e.get("reason", "")]
    assert restarts, "the zeros basin should stall the local search"
    stalled = []
    for e in restarts:
        stalled.append(e["from_config"])
        # the new start is more than one local move away from every basin searched so far
        assert all(sum(e["to_config"][n] != s[n] for n in space.names) > LOCAL_REACH for s in stalled)


def test_generic_mode_mixes_tpe_thompson_model_and_local_tests_and_tells_tpe_no_local_move():
    ds = load_public("kernel_tuner_benchmark_hub/pnpoly/RTX_3090.json.gz")
    strat = make_strategy("abduction", seed=4)
    told: list = []
    from abductune.search.abduction import planning as ab  # where the engine's TPE is made

    add = ab.TPEModel.add

    def spy(self, m):
        told.append(dict(m.config))
        return add(self, m)

    ab.TPEModel.add = spy
    try:
        res = run(strat, ReplayEvaluator(ds), Budget(evaluations=200))
    finally:
        ab.TPEModel.add = add
    assert res.evaluations == 200  # every evaluation spent
    tests = [e for e in res.events if e["event"] == "hypothesis"]
    kinds = {e["theory"] for e in tests}
    assert {"tpe", "model", "poll", "start"} <= kinds
    models = [e["config"] for e in tests if e["theory"] == "model"]
    # Thompson sampling: the model's proposals spread out instead of repeating one region
    assert len(models) >= 20 and len({tuple(sorted(c.items())) for c in models}) == len(models)
    # TPE hears the start, its own and the model's proposals and the incumbents -- never a
    # local move that did not become the incumbent
    incumbents = [e["to_config"] for e in res.events if e["event"] == "move"]
    for e in tests:
        if e["theory"] == "poll" and e["config"] not in incumbents:
            assert e["config"] not in told


# ------------------------------------------------------------------------------ pieces

def test_additive_model_learns_main_effects_and_fills_unseen_ordered_values():
    import math

    rows = [(c, math.log(1 + c["BLOCK_M"] / 16 + (c["num_warps"] == 8))) for c in SPACE.valid_configs()[::7]]
    model = Additive(SPACE, rows)
    pred = model.predict([{**SPACE.default(), "BLOCK_M": 16}, {**SPACE.default(), "BLOCK_M": 256}])
    assert pred[0] < pred[1]
    sparse = Additive(SPACE, [(c, t) for c, t in rows if c["BLOCK_M"] in (16, 256)])
    mid = sparse.predict([{**SPACE.default(), "BLOCK_M": 64}])[0]
    lo, hi = sparse.predict([{**SPACE.default(), "BLOCK_M": 16}, {**SPACE.default(), "BLOCK_M": 256}])
    assert lo < mid < hi  # interpolated (generic mode)
    # unimodal (the engine where the diagnosis explains the space): level with the faster of
    # the two, since a profile along a tile may dip anywhere between them (`model._fill_unseen`)
    uni = Additive(SPACE, [(c, t) for c, t in rows if c["BLOCK_M"] in (16, 256)], unimodal=True)
    lo, mid, hi = uni.predict([{**SPACE.default(), "BLOCK_M": b} for b in (16, 64, 256)])
    assert mid == pytest.approx(lo) and mid < hi


def test_latin_hypercube_covers_every_parameter_with_valid_distinct_configs():
    import numpy as np

    cs = latin_hypercube(SPACE, 10, np.random.default_rng(0))
    assert len(cs) == 10 and len({SPACE.key(c) for c in cs}) == 10 and all(SPACE.is_valid(c) for c in cs)
    assert len({c["BLOCK_M"] for c in cs}) >= 4 and len({c["num_stages"] for c in cs}) >= 4


def test_latin_hypercube_leans_to_the_middle_only_for_the_roles_asked():
    """With `centre`, a warps parameter of five values gets its ends drawn about 0.37 as often as
    its middle (`centre_weights`), never not at all; a parameter whose role is not asked for
    stays even; without `centre` every parameter is even."""
    import numpy as np

    from abductune.search.abduction.model import centre_weights
    from abductune.space import Choice, Space

    w = centre_weights(5) / centre_weights(5).sum()
    assert w[0] == pytest.approx(w[-1]) and w[0] / w[2] == pytest.approx(np.exp(-1))
    assert list(centre_weights(2)) == [1.0, 1.0]
    space = Space([Choice("BLOCK", [16, 32, 64, 128, 256]), Choice("num_warps", [1, 2, 4, 8, 16]),
                   Choice("num_stages", [1, 2, 3, 4, 5])])
    assert space["num_warps"].role == "warps" and space["BLOCK"].role != "warps"

    def shares(centre):
        got = {n: np.zeros(5) for n in space.names}
        for seed in range(40):
            for c in latin_hypercube(space, 20, np.random.default_rng(seed), centre):
                for n in space.names:
                    got[n][space[n].index(c[n])] += 1
        return {n: v / v.sum() for n, v in got.items()}

    plain, leaning = shares(()), shares(("warps",))
    assert all(abs(x - 0.2) < 0.03 for x in plain["num_warps"])
    assert leaning["num_warps"][0] < 0.15 and leaning["num_warps"][4] < 0.15 and leaning["num_warps"][2] > 0.25
    assert leaning["num_warps"][0] > 0.05  # still drawn
    assert all(abs(x - 0.2) < 0.03 for x in leaning["num_stages"]) and all(abs(x - 0.2) < 0.03 for x in leaning["BLOCK"])
    with pytest.raises(AbductuneError, match="centre_roles"):
        make_strategy("abduction", centre_roles="warps")


# ------------------------------------------------------------------------------ item 7: fair replay

@pytest.mark.parametrize("name", ["coordesc", "pattern", "beam"])
def test_local_searches_restart_and_spend_the_whole_budget(name):
    ev = FakeEvaluator(SPACE)
    stops = run(make_strategy(name, seed=1), FakeEvaluator(SPACE), Budget(evaluations=300))
    assert stops.evaluations < 300  # converges and stops without restarts
    res = run(make_strategy(name, seed=1, restarts=True), ev, Budget(evaluations=300))
    assert res.evaluations == 300 == len(ev.measured)
    again = run(make_strategy(name, seed=1, restarts=True), FakeEvaluator(SPACE), Budget(evaluations=300))
    assert [m.config for m in again.history] == [m.config for m in res.history]
    other = run(make_strategy(name, seed=2, restarts=True), FakeEvaluator(SPACE), Budget(evaluations=300))
    assert [m.config for m in other.history] != [m.config for m in res.history]


class Recorded(Strategy):
    """Records every batch the wrapped strategy proposes (memo answers included)."""

    def __init__(self, inner: Strategy):
        self.inner, self.seed, self.name, self.batches = inner, inner.seed, inner.name, []

    def propose(self, ctx):
        gen, ms = self.inner.propose(ctx), None
        while True:
            try:
                batch = next(gen) if ms is None else gen.send(ms)
            except StopIteration:
                return
            self.batches.append([dict(c) for c in batch])
            ms = yield batch


@pytest.mark.parametrize("name", ["coordesc", "pattern"])  # beam: every seed is in its first beam
def test_restarts_start_from_the_other_seeds_first(name):
    seeds = [{"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "num_warps": 2, "num_stages": 1},
             {"BLOCK_M": 256, "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 8, "num_stages": 1}]
    rec = Recorded(make_strategy(name, restarts=True))
    res = run(rec, FakeEvaluator(SPACE), Budget(evaluations=400), seeds=seeds)
    starts = [b[0] for b in rec.batches if len(b) == 1 and b[0] in seeds]
    assert len(starts) == 2 and starts[0] != starts[1]  # one descent from each seed
    assert res.evaluations == 400


def test_seeded_tpe_keeps_its_random_startup_trials_and_uses_the_whole_budget():
    seed = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 128, "num_warps": 8, "num_stages": 1}  # a poor seed
    ev = FakeEvaluator(SPACE)
    res = run(make_strategy("tpe", seed=0, n_startup_trials=8), ev, Budget(evaluations=40), seeds=[seed])
    startup = [m.config for m in res.history[1:9]]
    # random startup trials: spread over the space, not around the seed
    assert statistics.fmean(SPACE.distance(c, seed) for c in startup) > 4
    assert res.evaluations == 40
    small = run(make_strategy("tpe", seed=0, max_stalled_trials=3), FakeEvaluator(SPACE), Budget(evaluations=400))
    assert small.evaluations == 400  # stalled TPE measures the rest instead of stopping


def test_replay_comparison_counts_remeasurements_and_restarts_local_searches():
    ds = bundled("M4096_N4096_K4096")
    cells = compare_on_dataset(ds, ["abduction", "coordesc"], [8, 64], repeats=2,
                               noise=NoiseModel.from_study())
    for c in cells:
        assert all(k == c.budget for k in c.evaluations)  # every measurement counted, budget used
