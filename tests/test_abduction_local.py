"""The abduction engine's local moves (issue 27): a winning move is offered once more in the
same direction, moves the model cannot rank go coarse first, and a config that differs from a
measured one only in parameters that made no difference comes last."""
from __future__ import annotations

from strategy_fixtures import FakeEvaluator, abduction_engine

from abductune.search import Budget, make_strategy, run
from abductune.search.abduction import COARSE_STEP, EXTEND, POLL
from abductune.search.abduction.moves import _continuation
from abductune.search.abduction.strategy import _Engine
from abductune.space import Choice, IntRange, Pow2, Space

SPACE = Space([Pow2("BLOCK", 16, 1024), Pow2("GROUP", 1, 64), Choice("layout", ["row", "col"]),
               IntRange("num_stages", 1, 4)])


def _engine(times: dict[tuple, float]) -> _Engine:
    """An engine that has measured `times` (config key -> ms) and nothing else."""
    return abduction_engine(times, SPACE)


def _key(block, group, layout, stages):
    return SPACE.key({"BLOCK": block, "GROUP": group, "layout": layout, "num_stages": stages})


def test_continuation_steps_each_ordered_parameter_again_and_stops_at_the_range():
    a = {"BLOCK": 64, "GROUP": 4, "layout": "row", "num_stages": 2}
    b = {"BLOCK": 256, "GROUP": 2, "layout": "col", "num_stages": 2}
    # BLOCK moved two values up, GROUP one down: each again; the unordered layout keeps b's value
    assert _continuation(SPACE, a, b) == {"BLOCK": 1024, "GROUP": 1, "layout": "col", "num_stages": 2}
    # a parameter at the end of its range keeps its value; the others still step
    c = {"BLOCK": 1024, "GROUP": 1, "layout": "col", "num_stages": 3}
    assert _continuation(SPACE, b, c) == {"BLOCK": 1024, "GROUP": 1, "layout": "col", "num_stages": 4}
    # nothing can step again (or only an unordered parameter moved): no continuation
    assert _continuation(SPACE, {**c, "BLOCK": 512}, c) is None
    assert _continuation(SPACE, {**b, "layout": "row"}, b) is None


LINE = Space([IntRange("X", 1, 40), IntRange("Y", 1, 40)])


def _slope(c):
    """Faster with every step of X up to 40; Y best at 20."""
    return 1.0 + 0.05 * (40 - c["X"]) + 0.05 * abs(c["Y"] - 20)


def test_a_winning_move_is_offered_once_more_and_pays_on_a_slope():
    res = run(make_strategy("abduction", seed=0), FakeEvaluator(LINE, _slope), Budget(30))
    events = res.events
    extends = [i for i, e in enumerate(events) if e["event"] == "test" and e.get("theory") == EXTEND
               and "kind" not in e]
    assert extends, "a winning local move should have been offered once more"
    for i in extends:
        # the move it continues is the last one before it, and it is that move once more
        mv = [e for e in events[:i] if e["event"] == "move"][-1]
        assert events[i]["config"] == _continuation(LINE, mv["from_config"], mv["to_config"])
    won = [e for e in events if e["event"] == "verdict" and e["theory"] == EXTEND and e["outcome"] == "supported"]
    assert won, "on a slope a continuation should win"


def test_no_continuation_after_a_jump_of_the_global_proposals():
    eng = _engine({_key(64, 4, "row", 1): 2.0, _key(1024, 1, "col", 4): 1.0})
    from abductune.search.abduction.moves import MODEL, TPE_TEST, _Test

    for theory in (TPE_TEST, MODEL):
        eng._extend(SPACE.from_key(_key(64, 4, "row", 1)), _Test(theory, SPACE.from_key(_key(256, 2, "row", 1))))
        assert eng.extension is None and eng._extensions() == []
    eng._extend(SPACE.from_key(_key(64, 4, "row", 1)), _Test(POLL, SPACE.from_key(_key(1024, 1, "col", 4))))
    assert eng.extension is None  # nothing can step again (1024 and 1 are the ends, stages too)


def test_moves_the_model_cannot_rank_go_coarse_first():
    """One measurement: the model predicts every move level, so the first probes move a single
    ordered parameter COARSE_STEP values (both directions where the range allows), then one."""
    inc = {"BLOCK": 128, "GROUP": 4, "layout": "row", "num_stages": 2}
    eng = _engine({SPACE.key(inc): 1.0})
    tests = eng._local(inc)
    assert tests and all(t.theory == POLL and t.gain == 0.0 for t in tests)

    def step(cfg):
        changed = [p for p in SPACE.params if cfg[p.name] != inc[p.name]]
        if len(changed) != 1 or not changed[0].ordered:
            return None
        p = changed[0]
        return abs(p.index(cfg[p.name]) - p.index(inc[p.name]))
    steps = [step(t.config) for t in tests]
    coarse = steps.count(COARSE_STEP)
    assert coarse == 5  # BLOCK 32 and 512, GROUP 1 and 16, num_stages 4 (0 is out of range)
    assert steps[:coarse] == [COARSE_STEP] * coarse
    fine = steps.count(1)
    assert steps[coarse:coarse + fine] == [1] * fine and fine == 6  # then one value, every ordered parameter
    # a move the model can rank still goes by the model: a measured slower BLOCK puts its side last
    eng = _engine({SPACE.key(inc): 1.0, SPACE.key({**inc, "BLOCK": 64}): 2.0})
    first = eng._local(inc)[0].config
    assert first["BLOCK"] >= 128


def test_a_coarse_probe_that_only_failed_hands_its_place_to_the_step_short_of_it():
    """Pattern search halves its step where the coarse poll fails. Four stages failed to run
    at another block (the only measurement with that value): at the new incumbent one stage up
    ranks with the coarse probes, ahead of the other fine steps. A value that also ran once, or
    a probe that ran slow, leaves the order as it was."""
    inc = {"BLOCK": 128, "GROUP": 4, "layout": "row", "num_stages": 2}
    up = SPACE.key({**inc, "num_stages": 3})

    def order(times):
        eng = _engine({SPACE.key(inc): 1.0, **times})
        return [SPACE.key(t.config) for t in eng._local(inc)], eng

    keys, eng = order({_key(64, 4, "row", 4): None})
    assert eng._halved(inc) == frozenset({up})
    coarse = [k for k in keys[:6] if k != up]
    assert up in keys[:5], "the step short of a failed value ranks with the coarse probes"
    assert len(coarse) >= 4
    # the failed value is no place of a fine step where it also ran somewhere
    keys, eng = order({_key(64, 4, "row", 4): None, _key(64, 8, "row", 4): 1.5})
    assert eng._halved(inc) == frozenset() and keys.index(up) > 5
    # nor where the probe ran and was only slow
    _, eng = order({_key(64, 4, "row", 4): 1.5})
    assert eng._halved(inc) == frozenset()
    # a pruned config (the resource model's) is no evidence either way
    from abductune.measurement import Measurement
    eng = _engine({SPACE.key(inc): 1.0})
    m = Measurement(SPACE.from_key(_key(64, 4, "row", 4)), "pruned", error="resource model")
    eng.ctx._memo[_key(64, 4, "row", 4)] = m
    eng._note([m])
    assert eng._halved(inc) == frozenset()


def test_a_parameter_that_made_no_difference_is_inert_and_its_moves_come_last():
    eng = _engine({_key(128, 4, "row", 1): 1.000, _key(128, 4, "row", 2): 1.003,  # stages: within noise
                   _key(256, 4, "row", 1): 1.300})  # BLOCK: a real difference
    assert eng._inert() == frozenset({"num_stages"})
    key = eng._same_time()
    assert key({"BLOCK": 128, "GROUP": 4, "layout": "row", "num_stages": 4}) == key(SPACE.from_key(_key(128, 4, "row", 1)))
    assert key({"BLOCK": 128, "GROUP": 8, "layout": "row", "num_stages": 1}) != key(SPACE.from_key(_key(128, 4, "row", 1)))
    # one pair beyond noise is enough to keep a parameter live; none at all says nothing
    eng = _engine({_key(128, 4, "row", 1): 1.0, _key(128, 4, "row", 2): 1.0, _key(128, 4, "row", 3): 1.2})
    assert eng._inert() == frozenset()
    assert _engine({_key(128, 4, "row", 1): 1.0})._inert() == frozenset()


def test_a_batch_takes_no_near_duplicate_while_other_moves_remain():
    """num_stages made no difference: a stages move ranked first would measure a known time
    again, and so would two configs in one batch that differ only in stages; the batch takes
    other moves instead."""
    inc = {"BLOCK": 128, "GROUP": 4, "layout": "row", "num_stages": 1}
    eng = _engine({SPACE.key(inc): 1.0, SPACE.key({**inc, "num_stages": 2}): 1.0,
                   SPACE.key({**inc, "BLOCK": 64}): 1.2, SPACE.key({**inc, "layout": "col"}): 1.1})
    assert eng._inert() == frozenset({"num_stages"})
    key = eng._same_time()
    measured = {key(m.config) for m in eng.measured}
    ranked = [t.config for t in sorted(eng._local(inc), key=lambda t: -t.gain)]
    assert key(ranked[0]) in measured  # what the model's order alone would measure first
    batch = [t.config for t in eng._next_tests()]
    keys = [key(c) for c in batch]
    assert len(batch) == eng.s.batch and not set(keys) & measured and len(set(keys)) == len(keys)


def test_an_unseen_value_between_two_seen_ones_is_as_promising_as_the_better():
    """The additive model holds an unseen ordered value level with the faster of its nearest
    seen values on either side (a unimodal profile may dip anywhere between them), and an edge
    value with its one neighbour. After a coarse probe BLOCK 128 -> 32 measured 2x slower, the
    step between them, 64, is a tie with the incumbent, not half a loss (interpolation, which
    session 17 did, ranked it behind every untried move), and it comes with the other single
    moves, before any two-parameter move."""
    import numpy as np

    from abductune.search.abduction.model import _fill_unseen

    fx = np.array([0.0, 0.3, 0.0, -0.2, 0.0, 0.5])
    seen = np.array([False, True, False, True, False, True])
    assert np.allclose(_fill_unseen(fx, seen), [0.3, 0.3, -0.2, -0.2, -0.2, 0.5])
    inc = {"BLOCK": 128, "GROUP": 4, "layout": "row", "num_stages": 2}
    eng = _engine({SPACE.key(inc): 1.0, SPACE.key({**inc, "BLOCK": 32}): 2.0})
    model = eng._model()
    at = {b: float(model.predict([{**inc, "BLOCK": b}])[0]) for b in (16, 32, 64, 128)}
    assert at[64] == at[128] and at[32] > at[128] and at[16] == at[32]
    tests = eng._local(inc)
    moved = [sum(t.config[n] != inc[n] for n in SPACE.names) for t in tests]
    step = next(i for i, t in enumerate(tests) if t.config == {**inc, "BLOCK": 64})
    assert tests[step].gain == 0.0 and step < moved.index(2)  # among the single moves, before any pair


def test_a_step_a_theory_names_takes_the_coarse_probes_place():
    """Where the model cannot rank the moves, a one-value step a theory names at the incumbent
    (one its per-batch cap left out of the hypotheses) takes the place of the blind coarse probe
    of that parameter in that direction: the diagnosis has said how far (issue 27: a spilling
    128-wide tile was probed at 32 while the theory's 64 waited). The other parameters' coarse
    probes keep their turn, and at another incumbent the names do not apply."""
    inc = {"BLOCK": 128, "GROUP": 4, "layout": "row", "num_stages": 2}
    eng = _engine({SPACE.key(inc): 1.0})
    coarse = 5  # BLOCK 32 and 512, GROUP 1 and 16, num_stages 4 (`test_moves_the_model_cannot_rank_go_coarse_first`)
    assert {t.config["BLOCK"] for t in eng._local(inc)[:coarse]} >= {32, 512}
    half = {**inc, "BLOCK": 64}
    eng._named_at = (SPACE.key(inc), frozenset({SPACE.key(half)}))
    lead = [t.config for t in eng._local(inc)[:coarse]]
    assert half in lead and {**inc, "BLOCK": 32} not in lead and {**inc, "BLOCK": 512} in lead
    assert {**inc, "GROUP": 1} in lead and {**inc, "GROUP": 16} in lead
    eng.inc = inc
    ranked = [t.config for t in eng._ranked(eng._local(inc))]
    assert ranked.index(half) < ranked.index({**inc, "BLOCK": 32})
    other = {**inc, "GROUP": 8}
    assert {**other, "BLOCK": 64} not in [t.config for t in eng._local(other)[:coarse]]  # named at `inc` only


def test_a_coarse_probe_the_resource_model_rules_out_also_hands_its_place_on():
    """The same halving where the coarse probe was never measured because the resource model
    says it cannot launch here (a pipeline two stages deeper over the shared memory): the step
    short of it ranks with the coarse probes. Seen on Helion's matmul at 2048 x 256 x 8192 on the
    H200, where eight stages of its tile did not fit and seven did (session 45)."""
    inc = {"BLOCK": 128, "GROUP": 4, "layout": "row", "num_stages": 2}
    up = SPACE.key({**inc, "num_stages": 3})
    eng = _engine({SPACE.key(inc): 1.0})
    assert eng._halved(inc) == frozenset()
    eng._runnable = lambda cfg: cfg["num_stages"] < 4
    assert eng._halved(inc) == frozenset({up})
    assert up in [SPACE.key(t.config) for t in eng._local(inc)][:5]
    # a block the model rules out at its coarse probe names the block one step up instead
    eng = _engine({SPACE.key(inc): 1.0})
    eng._runnable = lambda cfg: cfg["BLOCK"] <= 256
    assert eng._halved(inc) == frozenset({SPACE.key({**inc, "BLOCK": 256})})
