"""Search.ask/tell on its own: partial batches, budget cuts, memo answers, seeds first, and
explicit re-measurement requests that count against the budget."""
from __future__ import annotations

import pytest

from abductune.errors import AbductuneError
from abductune.measurement import Measurement
from abductune.search.base import Budget, Search, Seed, Strategy
from abductune.space import Pow2, Space

SPACE = Space([Pow2("A", 1, 64), Pow2("B", 1, 8)])  # 7 x 4 = 28 configs


def t(cfg) -> float:
    return cfg["A"] * 10 + cfg["B"]


def answer(batch) -> list[Measurement]:
    return [Measurement(dict(c), time_ms=t(c)) for c in batch]


class Scripted(Strategy):
    """Yields fixed batches and records what it was sent back."""

    name = "scripted"

    def __init__(self, batches, remeasure_after=None):
        super().__init__(0)
        self.batches = batches
        self.got: list[list[Measurement]] = []
        self.remeasure_after = remeasure_after

    def propose(self, ctx):
        for i, b in enumerate(self.batches):
            self.got.append((yield b))
            if self.remeasure_after == i:
                self.got.append((yield ctx.remeasure(b[:2])))


def cfgs(n: int):
    return SPACE.valid_configs()[:n]


def test_a_batch_larger_than_batch_size_is_asked_in_parts():
    s = Scripted([cfgs(10)])
    search = Search(s, SPACE, batch_size=4)
    sizes = []
    while batch := search.ask():
        sizes.append(len(batch))
        search.tell(answer(batch))
    assert sizes == [4, 4, 2]
    assert [m.config for m in s.got[0]] == cfgs(10)  # the strategy got the whole batch back, in order
    assert search.evaluations == 10


def test_budget_cuts_a_batch_and_ends_the_strategy():
    s = Scripted([cfgs(10), cfgs(20)[10:]])
    search = Search(s, SPACE, budget=Budget(6), batch_size=4)
    asked = []
    while batch := search.ask():
        asked += batch
        search.tell(answer(batch))
    assert len(asked) == 6 and search.exhausted_budget and search.done
    assert s.got == []  # never answered a cut batch


def test_memo_answers_are_free_and_reach_the_strategy():
    memo = {SPACE.key(c): Measurement(dict(c), time_ms=0.5) for c in cfgs(3)}
    s = Scripted([cfgs(5)])
    search = Search(s, SPACE, memo=memo, batch_size=8)
    batch = search.ask()
    assert batch == cfgs(5)[3:] and batch.kind == "search"
    search.tell(answer(batch))
    assert search.ask() == [] and search.evaluations == 2
    assert [m.time_ms for m in s.got[0]][:3] == [0.5] * 3
    assert search.best.time_ms == 0.5  # memo answers count for the best


def test_seeds_first_with_kind_seed():
    seed = SPACE.valid_configs()[-1]
    s = Scripted([cfgs(2)])
    search = Search(s, SPACE, seeds=[Seed(seed, "observed"), {"A": 3, "B": 1}], batch_size=8)
    first = search.ask()
    assert first == [seed] and first.kind == "seed"  # the invalid seed (A=3) was dropped
    assert search.ctx.knowledge.seeds == [Seed(seed, "observed")]
    search.tell(answer(first))
    assert search.ask().kind == "search"


def test_remeasure_is_measured_again_and_counted():
    s = Scripted([cfgs(3), cfgs(6)[3:]], remeasure_after=0)
    search = Search(s, SPACE, batch_size=8)
    kinds = []
    while batch := search.ask():
        kinds.append((batch.kind, len(batch)))
        search.tell([m.replace(time_ms=m.time_ms + (0.25 if batch.kind == "remeasure" else 0))
                     for m in answer(batch)])
    assert kinds == [("search", 3), ("remeasure", 2), ("search", 3)]
    assert search.evaluations == 8  # 3 + 2 re-measured + 3
    assert [m.time_ms for m in s.got[1]] == [t(c) + 0.25 for c in cfgs(2)]  # fresh rows came back
    assert len(search.ctx.remeasured) == 2 and len(search.ctx.history) == 6


def test_remeasure_cut_by_budget_ends_the_search():
    s = Scripted([cfgs(3), cfgs(6)[3:]], remeasure_after=0)
    search = Search(s, SPACE, budget=Budget(4), batch_size=8)
    while batch := search.ask():
        search.tell(answer(batch))
    assert search.evaluations == 4 and search.done and len(s.got) == 1


def test_tell_must_match_ask_and_empty_batches_are_refused():
    search = Search(Scripted([cfgs(2)]), SPACE)
    search.ask()
    with pytest.raises(AbductuneError, match="2 asked"):
        search.tell(answer(cfgs(1)))
    with pytest.raises(AbductuneError, match="empty batch"):
        Search(Scripted([[]]), SPACE).ask()


def test_context_gives_problem_and_hardware():
    from abductune.hardware import lookup
    from abductune.problem import Problem

    p = Problem("k", "matmul", {"M": 1, "N": 2, "K": 3}, hardware=lookup("H100-SXM"))
    search = Search(Scripted([cfgs(1)]), SPACE, problem=p)
    assert search.ctx.problem is p and search.ctx.hardware.sms == 132
