"""Theory evidence carries across runs: a Session adds each run's verdict counts to the store,
per kernel class, GPU and dtype family, and the next run on a problem of that class starts its
theories' credibility from them (scaled to a few tests, so this problem's verdicts decide)."""
from __future__ import annotations

from pathlib import Path

import pytest

from abductune.search import Budget
from abductune.session import verdict_tallies
from abductune.store import Store
from abductune.theory.evidence import PRIOR_WEIGHT, Ledger, Tally, credibility
from abductune.tune import tune_one


def test_priors_are_scaled_to_a_few_tests_and_this_runs_verdicts_override_them():
    led = Ledger(lambda c: tuple(sorted(c.items())))
    led.set_priors({"a": (40, 0, 0), "b": (1, 1, 0), "c": (0, 0, 0)})
    assert led.credibility("a") == pytest.approx((PRIOR_WEIGHT + 1) / (PRIOR_WEIGHT + 2))
    assert led.credibility("b") == pytest.approx(0.5)
    assert "c" not in led.priors and led.credibility("c") == pytest.approx(0.5)
    # three refutations in this run outweigh forty supports elsewhere, scaled to PRIOR_WEIGHT
    led.tallies["a"] = Tally(refuted=int(PRIOR_WEIGHT) + 1)
    assert led.credibility("a") < 0.5
    assert led.credibility("a") == pytest.approx(credibility(PRIOR_WEIGHT, PRIOR_WEIGHT + 1, 0))


def test_verdict_tallies_count_outcomes_per_theory():
    events = [{"event": "verdict", "theory": "t", "outcome": "supported"},
              {"event": "verdict", "theory": "t", "outcome": "failed"},
              {"event": "verdict", "theory": "t", "outcome": "neutral"},
              {"event": "verdict", "theory": "u", "outcome": "refuted"},
              {"event": "test", "theory": "t", "outcome": "supported"}]
    assert verdict_tallies(events) == {"t": [1, 1, 1], "u": [0, 1, 0]}


def run_events(path: str, dims: dict) -> list[dict]:
    """The events of the last run on `dims`, as the store journals them."""
    with Store(path) as s:
        return [r for r in s.runs() if r.context.dims == dims][-1].summary["events"]


def test_the_next_run_of_the_class_starts_from_the_stored_evidence(tmp_path: Path):
    path = str(tmp_path / "s.sqlite")
    a, b = {"M": 4096, "N": 4096, "K": 4096}, {"M": 512, "N": 4096, "K": 4096}
    tune_one("matmul_fp16", a, mode="replay", budget=Budget(16), store=path)
    first = run_events(path, a)
    got = verdict_tallies(first)
    assert got, "the first run judged no hypothesis"
    assert not any(e["event"] == "prior" for e in first)  # nothing stored before it
    with Store(path) as s:
        assert s.theory_evidence(s.runs()[0].context) == {k: tuple(v) for k, v in got.items()}
    tune_one("matmul_fp16", b, mode="replay", budget=Budget(16), store=path)
    second = run_events(path, b)
    [prior] = [e for e in second if e["event"] == "prior"]
    assert prior["evidence"] == {k: list(v) for k, v in sorted(got.items())}
    # evidence accumulates: the store now holds both runs' counts
    more = verdict_tallies(second)
    both = {k: tuple(x + y for x, y in zip(got.get(k, [0, 0, 0]), more.get(k, [0, 0, 0])))
            for k in set(got) | set(more)}
    with Store(path) as s:
        assert s.theory_evidence(s.runs()[-1].context) == both
    # another kernel class on the same store starts from nothing and keeps its own counts
    g = {"numel": 917504}
    tune_one("gelu_mul_fp16", g, mode="replay", budget=Budget(6), store=path)
    gelu = run_events(path, g)
    assert not any(e["event"] == "prior" for e in gelu)
    with Store(path) as s:
        ctx = [r for r in s.runs() if r.context.dims == g][0].context
        assert s.theory_evidence(ctx) == {k: tuple(v) for k, v in verdict_tallies(gelu).items()}
