"""The exploring share (issue 27): on a kernel whose seeds and theories are wrong and whose times
depend on parameters jointly, abduction draws part of each batch from the whole space (a
space-filling start, then TPE) until the theories earn trust, sizes that share by which side
found the faster configs, and never spends two measurements on a close call before the search
stalls."""
from __future__ import annotations

import itertools
import math
import statistics

import numpy as np
import pytest
from strategy_fixtures import FakeEvaluator, abduction_engine

from abductune.cli.replay import _replay_seeds
from abductune.datasets.format import Dataset
from abductune.evaluate import compare_on_dataset
from abductune.hardware import KNOWN_GPUS
from abductune.measure.replay import ReplayEvaluator
from abductune.measurement import Measurement
from abductune.problem import Problem
from abductune.search import Budget, make_strategy, run
from abductune.search.abduction.moves import EXPLORE, TPE_TEST
from abductune.search.abduction.moves import POLL, _Test
from abductune.session import Session
from abductune.space import Space

H100 = KNOWN_GPUS["H100-SXM"]
BASINS = 4
SPACE = {"name": "synthetic_joint", "constraints": [], "constants": {}, "params": [
    {"name": "BLOCK_M", "kind": "pow2", "values": [32, 64, 128, 256], "role": "tile:M", "ordered": True},
    {"name": "BLOCK_N", "kind": "pow2", "values": [32, 64, 128, 256], "role": "tile:N", "ordered": True},
    {"name": "BLOCK_K", "kind": "pow2", "values": [16, 32, 64, 128], "role": "tile:K", "ordered": True},
    {"name": "num_warps", "kind": "pow2", "values": [2, 4, 8, 16], "role": "warps", "ordered": True},
    {"name": "num_stages", "kind": "int", "values": [1, 2, 3, 4], "role": "stages", "ordered": True}]}


def _fails(problem: Problem, cfg) -> bool:
    """The landscape's own launch failures, fixed so the landscapes do not move when the resource
    model is refined: every pipeline stage holds a bf16 A and B tile (the model before session
    22, which keeps one copy fewer off the warpgroup MMA), over the H100's shared memory per block."""
    smem = cfg["num_stages"] * (cfg["BLOCK_M"] * cfg["BLOCK_K"] + cfg["BLOCK_K"] * cfg["BLOCK_N"]) * 2
    return smem > problem.hardware.smem_per_block


def joint_dataset(seed: int, m: int = 4096, n: int = 4096, k: int = 4096) -> Dataset:
    """A matmul-like space (1,024 configs) with BASINS basins: each a rotated bowl, the sum over
    every pair of parameters of w (d_i + s d_j)^2 with random weights w and signs s = +-1 (d: a
    value's distance from the basin's centre, as a share of the parameter's range), raised by the
    basin's offset; a config's log-time is its lowest basin's, plus 3% ruggedness. What a config
    costs depends on its values jointly, as tiles, warps and stages do on a GPU: the valleys run
    diagonally, so one-parameter moves and a model of one parameter at a time read them badly.
    The seeds `replay --seeds heuristics` gives sit in a basin 1.6x above the optimum's, whose
    centre lies as far from them as the space allows: the seeds, and the theories that chose
    them, are wrong. Configs the resource model says cannot launch failed, as they would on the
    GPU. The kernel name is one no theory was confirmed on."""
    problem = Problem("synthetic_joint_bf16", "matmul", {"M": m, "N": n, "K": k},
                      {"a": "bf16", "b": "bf16", "c": "bf16"}, flops=2.0 * m * n * k,
                      min_bytes=2.0 * (m * k + k * n + m * n), hardware=H100)
    space = Space.from_dict(SPACE)
    rng = np.random.default_rng(seed)
    span = [len(p.values) - 1 for p in space.params]

    def pos(cfg):
        return np.array([p.index(cfg[p.name]) / s for p, s in zip(space.params, span)])
    seeds = _replay_seeds(Dataset(problem, SPACE, [Measurement(space.default(), "ok", time_ms=1.0)]))
    at = [pos(s.config) for s in seeds if space.is_valid(s.config)] or [pos(space.default())]
    runs = [c for c in space.valid_configs() if not _fails(problem, c)]
    far = [pos(c) for c in runs if min(np.abs(pos(c) - a).sum() for a in at) >= 2.0]
    centres = [far[int(rng.integers(len(far)))], at[0]] + [pos(runs[int(rng.integers(len(runs)))])
                                                          for _ in range(BASINS - 2)]
    offsets = [0.0, math.log(1.6)] + list(rng.uniform(0.2, 0.6, BASINS - 2))
    bowls = [[(a, b, rng.uniform(0.1, 0.3), rng.choice([-1.0, 1.0])) for a, b in itertools.combinations(range(5), 2)]
             for _ in range(BASINS)]
    recs = []
    for cfg in space.valid_configs():
        if _fails(problem, cfg):
            recs.append(Measurement(dict(cfg), "compile_error", compile_s=0.5, error="out of resources"))
            continue
        x = pos(cfg)
        log = min(o + sum(w * ((x - c)[a] + s * (x - c)[b]) ** 2 for a, b, w, s in bowl)
                  for c, o, bowl in zip(centres, offsets, bowls)) + rng.normal(0.0, 0.03)
        t = 0.2 * math.exp(log)
        recs.append(Measurement(dict(cfg), "ok", time_ms=t, samples_ms=[t, t, t], compile_s=0.5, bench_s=0.1))
    return Dataset(problem, SPACE, recs)


def _geomeans(datasets, strategies, budgets, repeats):
    got: dict[tuple[str, int], list[float]] = {}
    for ds in datasets:
        seeds = _replay_seeds(ds, holdout="kernel")
        for c in compare_on_dataset(ds, strategies, budgets, repeats, seeds_fn=lambda d: seeds):
            got.setdefault((c.strategy, c.budget), []).append(c.median_ratio)
    return {k: statistics.geometric_mean(v) for k, v in got.items()}


def test_the_synthetic_landscape_is_joint_and_its_seeds_are_wrong():
    for seed in range(6):
        ds = joint_dataset(seed)
        space = ds.space()
        ok = {space.key(m.config): m.time_ms for m in ds.records if m.ok}
        assert len(ok) > 700 and any(not m.ok for m in ds.records)
        best = ds.optimum()
        seeds = [s.config for s in _replay_seeds(ds, holdout="kernel")]
        # every seed 1.4x the optimum or slower, and three or more parameters away from it
        assert seeds and all(ok.get(space.key(c), math.inf) >= 1.4 * best.time_ms for c in seeds)
        assert all(sum(c[n] != best.config[n] for n in space.names) >= 3 for c in seeds)
        # joint: for most pairs of parameters, one's best value moves with the other's
        moves = 0
        for i, j in itertools.permutations(range(5), 2):
            best_i = {min((c for c in ok if c[j] == v), key=ok.get)[i] for v in space.params[j].values}
            moves += len(best_i) > 1
        assert moves >= 10, moves


def test_wrong_seeds_and_theories_on_a_joint_landscape_track_seeded_random_and_tpe():
    """Six synthetic joint landscapes, seeds and theories wrong, the same seeds for every
    strategy, 3 repeats, geomean of the median best / optimum. Stated margins: at 32
    evaluations abduction is not behind the better of seeded random and TPE; at 16 within
    16% and at 8 (four tests after the seeds) within 10%. Measured when written (session 18):
    abduction 1.531 / 1.467 / 1.077 (8 / 16 / 32), random 1.490 / 1.270 / 1.214, TPE 1.498 /
    1.327 / 1.125; session 17's engine (unseen tile values interpolated in the additive model)
    1.531 / 1.454 / 1.120, within 15% at 16; session 16's, which explored by polling the incumbent's
    neighbourhood, 1.531 / 1.512 / 1.268, fails the margin at 32. At 16, twelve draws from the
    whole space still beat a search that gives a third of its tests to them: the seeds' basin
    is a local optimum no local test can leave, and a third is what the in-sample zoo kernels,
    whose seeds are good, can afford at 8 and 16 (half cost them 2% there)."""
    g = _geomeans([joint_dataset(s) for s in range(6)], ["abduction", "random", "tpe"], [8, 16, 32], 3)
    for b, margin in ((8, 1.10), (16, 1.16), (32, 1.0)):
        best = min(g[("random", b)], g[("tpe", b)])
        assert g[("abduction", b)] <= margin * best, (b, g)


def test_the_exploring_share_draws_from_the_whole_space_and_explain_cites_it(tmp_path):
    """On the synthetic kernel (no theory confirmed on it) the first batch already holds a
    draw from the whole space, logged as an "explore" test; the share is logged with its
    reason; and the exploring tests are not moves around the incumbent."""
    ds = joint_dataset(2)
    with Session(ReplayEvaluator(ds), strategy="abduction", seed=0, budget=Budget(16),
                 store=str(tmp_path / "s.sqlite"), seeds=_replay_seeds(ds, holdout="kernel")) as s:
        res = s.run()
    share = [e for e in res.events if e["event"] == "explore"]
    assert share and share[0]["slots"] >= 1 and "draw from the whole space" in share[0]["reason"]
    tests = [e for e in res.events if e["event"] == "test" and e.get("kind") != "remeasure"]
    explored = [e for e in tests if e["theory"] == EXPLORE]
    assert explored and tests.index(explored[0]) < 3
    space = ds.space()
    seeds = [s.config for s in _replay_seeds(ds, holdout="kernel")]
    # draws from the whole space: not local moves (one or two parameters) from a seed
    far = [e for e in explored[:3] if min(sum(e["config"][n] != s[n] for n in space.names) for s in seeds) > 2]
    assert len(far) >= 2, explored[:3]


def _share_engine():
    """An engine on FakeEvaluator's space with an incumbent measured at 1.0 ms, distrusted."""
    from strategy_fixtures import matmul_space

    space = matmul_space()
    inc = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}
    eng = abduction_engine({space.key(inc): 1.0}, space)
    eng.distrusted = True
    return eng, space, inc


def _measure(eng, space, cfg, t):
    m = Measurement(dict(cfg), "ok", time_ms=t, samples_ms=[t, t * 1.01, t * 0.99])
    eng.ctx._memo[space.key(cfg)] = m
    eng._note([m])


def _judged(eng, inc, tests):
    """Record each test against `inc` and count it for its side, as `_judge` does."""
    for t in tests:
        v = eng.ledger.record(t.theory, t.config, inc)
        eng._tally_sides(t, v.outcome)


def test_the_share_follows_each_sides_record():
    eng, space, inc = _share_engine()
    assert eng._global_slots(3) == 1  # half a batch, rounded down, before any test
    far = {"BLOCK_M": 256, "BLOCK_N": 32, "BLOCK_K": 128, "num_warps": 8, "num_stages": 4}
    near = dict(inc, num_stages=3)
    slow = dict(inc, num_warps=8)
    _measure(eng, space, far, 0.5)  # the exploring draw beat the incumbent twice over
    _measure(eng, space, near, 1.3)  # the theory's move lost
    _measure(eng, space, slow, 1.2)  # and so did a local move
    _judged(eng, inc, [_Test("memory_latency", near), _Test(POLL, slow), _Test(EXPLORE, far)])
    assert eng.sides == {"local": [0, 2], "explore": [1, 1]}
    # exploring 2/3, local 1/4: 3 x (2/3) / (2/3 + 1/4) = 2.18 -> two slots of three
    assert eng._global_slots(3) == 2
    e = [e for e in eng.ctx.events if e["event"] == "explore"][-1]
    assert e["slots"] == 2 and e["explore_won"] == 1 and e["local_tests"] == 2
    # TPE's and the model's proposals count for neither side
    _judged(eng, inc, [_Test(TPE_TEST, dict(far, num_warps=4))])
    assert eng.sides == {"local": [0, 2], "explore": [1, 1]}
    assert eng._global_slots(1) == 0 and eng._global_slots(3) == 2


def _converging_engine(local_wins: int, local_tests: int, explore_wins: int, explore_tests: int):
    eng, _space, _inc = _share_engine()
    eng.sides = {"local": [local_wins, local_tests], "explore": [explore_wins, explore_tests]}
    return eng


def test_while_local_tests_keep_winning_exploring_yields_and_it_grows_as_they_stall():
    """A local search that keeps finding wins (two of its first three tests) holds the batch
    but the one slot the distrusted theories owe exploring; once the same local search stalls
    (no win in its next seventeen tests) the exploring draws, which won one of four, take two
    slots of three. Session 17's duels scored only a batch where one side beat
    the incumbent, so a run of stalled batches left the share where it was."""
    converging = _converging_engine(2, 3, 1, 4)
    assert converging._global_slots(3) == 1 and converging._global_slots(4) == 1
    stalled = _converging_engine(2, 20, 1, 4)
    assert stalled._global_slots(3) == 2 and stalled._global_slots(4) == 2
    # and on a kernel whose theories earned trust, exploring that never won has no share
    trusted = _converging_engine(2, 20, 0, 4)
    trusted.distrusted = False
    assert trusted._global_slots(3) == 0


def test_a_close_call_waits_for_the_stall_and_is_run_off_there():
    """A candidate faster than the incumbent by less than the noise threshold is not re-measured
    while the search is still finding wins; when the local search stalls it is run off against
    the incumbent once, and the faster becomes the incumbent."""
    from strategy_fixtures import matmul_space, matmul_time

    space = matmul_space()
    opt = {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 3}
    twin = dict(opt, num_stages=4)  # 0.5% faster than the optimum: a close call

    def fn(c):
        return 0.995 if c == twin else matmul_time(c)
    ev = FakeEvaluator(space, fn)
    res = run(make_strategy("abduction", seed=0, explore_unseen=False), ev, Budget(48), seeds=[opt])
    remeasures = [i for i, e in enumerate(res.events) if e["event"] == "test" and e.get("kind") == "remeasure"]
    verdicts = [i for i, e in enumerate(res.events) if e["event"] == "verdict"]
    assert remeasures, "the close call was never run off"
    first = remeasures[0]
    patience = max(8, 2 * len(space.params))
    assert len([i for i in verdicts if i < first]) >= patience  # not before the stall
    e = res.events[first]
    assert e["config"] == twin and "run-off at the stall" in e["reason"]
    moves = [e for e in res.events if e["event"] == "move" and "run-off" in e.get("reason", "")]
    assert moves and moves[0]["to_config"] == twin
    assert ev.calls.count(twin) == 2 and ev.calls.count(opt) == 2  # each once more, never again


@pytest.mark.parametrize("seed", [0, 1])
def test_where_local_tests_win_the_share_stays_at_one_slot(seed):
    """FakeEvaluator's smooth bowl under a name no theory was confirmed on, seeded near its
    optimum: the local tests find the faster configs, so the exploring share never grows
    beyond one slot of three, and the search leaves the seed (1.13 ms) for 1.10 ms or better."""
    from strategy_fixtures import matmul_space

    ev = FakeEvaluator(matmul_space())
    ev.problem = Problem("bowl_matmul_fp16", "matmul", {"M": 4096, "N": 4096, "K": 4096}, {"a": "fp16"},
                         flops=2.0 * 4096 ** 3, min_bytes=6.0 * 4096 ** 2, hardware=H100)
    start = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}
    res = run(make_strategy("abduction", seed=seed), ev, Budget(24), seeds=[start])
    shares = [e["slots"] for e in res.events if e["event"] == "explore"]
    assert shares and max(shares) == 1, shares
    assert min(m.time_ms for m in res.history if m.ok) <= 1.10 + 1e-9


def test_once_the_theories_earn_trust_the_share_lasts_only_while_exploring_wins():
    """Two theory wins on a kernel no rule was confirmed on: the theories have earned trust.
    Exploring that never won then ends ("no exploring share" logged); exploring that won and
    still holds a slot by each side's record goes on, until the local tests out-win it."""
    eng, space, inc = _share_engine()
    eng.unseen_kernel = "synthetic"
    eng._pooled_trust()
    assert eng.distrusted and eng._global_slots(3) == 1
    tests = []
    for i in range(2):
        a, b = dict(inc, num_stages=3 + i), dict(inc, BLOCK_M=256, num_warps=8, BLOCK_K=128 - 64 * i)
        _measure(eng, space, a, 0.9 - 0.1 * i)
        _measure(eng, space, b, 1.5)
        tests += [_Test("memory_latency", a), _Test(EXPLORE, b)]
    _judged(eng, inc, tests)
    eng._pooled_trust()
    assert not eng.distrusted and eng.sides == {"local": [2, 2], "explore": [0, 2]}
    assert eng._global_slots(3) == 0
    trust = [e for e in eng.ctx.events if e["event"] == "trust"]
    assert trust[-1]["trusted"] is True and "earned trust" in trust[-1]["reason"]
    last = [e for e in eng.ctx.events if e["event"] == "explore"][-1]
    assert last["slots"] == 0 and "no exploring share" in last["reason"]
    eng.sides = {"local": [1, 4], "explore": [1, 2]}  # exploring wins as often: it keeps a slot under trust
    assert eng._global_slots(3) == 1
    eng.sides = {"local": [4, 5], "explore": [1, 6]}  # out-won: 3 x (2/8) / (2/8 + 5/7) rounds down to none
    assert eng._global_slots(3) == 0



def test_a_cold_start_does_not_spend_its_first_test_on_a_default_the_model_says_cannot_launch():
    """FlagGems' attention list (recorded in the zoo) opens with a 288 KB pipeline, over the
    H100's 227 KB: with no seed, the cold start measures the same config with the least move
    into what the resource model accepts, not the default that fails."""
    from abductune.datasets.format import read_dataset
    from abductune.datasets.zoo import zoo_kernels
    from abductune.theory import resources

    ds = read_dataset(zoo_kernels()["flaggems_attn_fwd_bf16"][0])
    space, pb = ds.space(), ds.problem
    assert resources.infeasible(pb, space, space.default()) is not None
    res = run(make_strategy("abduction", seed=0), ReplayEvaluator(ds, seed=0), Budget(4))
    first = res.history[0]
    assert first.ok and resources.infeasible(pb, space, first.config) is None
    assert {k: v for k, v in first.config.items() if k != "num_stages"} == \
        {k: v for k, v in space.default().items() if k != "num_stages"}  # stages only
    assert not [m for m in res.history if getattr(m.status, "value", m.status) == "resource_error"]


def test_explore_off_leaves_no_share_even_where_the_theories_are_distrusted(tmp_path):
    """`explore=False` (Helion's searched views, which refine the winner of a seeds phase that
    already spread over the space): no slot for the exploring share, distrusted or not, even
    after an exploring draw won; a whole search on the synthetic unseen kernel then draws no
    "explore" test, and the theories keep their one test per batch there."""
    from abductune.search.abduction import Abduction

    eng, _space, _inc = _share_engine()
    eng.sides = {"local": [0, 6], "explore": [3, 3]}
    assert eng._global_slots(3) == 2
    eng.s = Abduction(seed=0, explore=False)
    assert eng._global_slots(3) == 0 and eng._global_slots(8) == 0
    ds = joint_dataset(2)
    runs = {}
    for on in (True, False):
        with Session(ReplayEvaluator(ds), strategy="abduction", seed=0, budget=Budget(16),
                     options={"explore": on}, store=str(tmp_path / f"s{on}.sqlite"),
                     seeds=_replay_seeds(ds, holdout="kernel")) as s:
            runs[on] = s.run()
    tests = {on: [e for e in r.events if e["event"] == "test" and e.get("kind") != "remeasure"]
             for on, r in runs.items()}
    assert any(e["theory"] == EXPLORE for e in tests[True])
    assert tests[False] and not any(e["theory"] == EXPLORE for e in tests[False])
    from abductune.errors import AbductuneError

    with pytest.raises(AbductuneError, match="option 'explore' must be True or False"):
        make_strategy("abduction", explore="sometimes")
