"""A config the search found replaces the best of the user's list only on a lead every round of
the final run-off agrees on (`Session._listed_unless_beaten`, session 40: FlagGems' weight norm
shipped a config beyond its list whose lead was noise under the tune's timer and 15% slower
with its data in L2)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import pytest

from abductune.measure.base import Evaluator
from abductune.measurement import Measurement
from abductune.problem import Problem
from abductune.search import Budget
from abductune.session import Session, beat_every_round, winner_never_slower
from abductune.space import Choice, Space

LISTED, FOUND = {"B": 1}, {"B": 2}


class Rounds(Evaluator):
    """First timings from `first`; a run-off returns `rounds[B]`, one sample a round, marked as
    aligned rounds where `aligned` (as the in-process evaluators mark theirs)."""

    def __init__(self, first: Mapping[int, float], rounds: Mapping[int, Sequence[float]], aligned: bool = True):
        self.space = Space([Choice("B", [1, 2])], name="listed")
        self.problem = Problem("listed_probe", "other", {"n": 1})
        self.first, self.rounds, self.aligned = dict(first), dict(rounds), aligned

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        return [Measurement(dict(c), time_ms=self.first[c["B"]], samples_ms=(self.first[c["B"]],)) for c in configs]

    def remeasure(self, configs: Sequence[Mapping[str, Any]], *, rounds: int = 1) -> list[Measurement]:
        out = []
        for c in configs:
            ts = tuple(self.rounds[c["B"]][:rounds])
            out.append(Measurement(dict(c), time_ms=sorted(ts)[len(ts) // 2], samples_ms=ts,
                                   extra={"rounds": len(ts)} if self.aligned else {}))
        return out


def _winner(tmp_path: Path, ev: Rounds) -> dict:
    with Session(ev, strategy="exhaustive", budget=Budget(2), store=tmp_path / "s.sqlite") as s:
        res = s.run(baselines={"configs": [LISTED]})
    measured = [m for m in res.history] + list(res.runoff)
    assert winner_never_slower(res, [m for m in res.runoff])  # within the judged noise either way
    assert any(m.config == FOUND for m in measured)  # the search did find the other config
    return dict(res.winner.config)


def test_a_lead_one_round_reverses_keeps_the_listed_config(tmp_path):
    ev = Rounds({1: 1.00, 2: 0.99}, {1: [0.99] * 5, 2: [0.98, 1.00, 0.98, 0.98, 0.98]})
    assert _winner(tmp_path, ev) == LISTED


def test_a_lead_in_every_round_wins(tmp_path):
    ev = Rounds({1: 1.00, 2: 0.99}, {1: [0.99] * 5, 2: [0.98] * 5})
    assert _winner(tmp_path, ev) == FOUND


def test_without_aligned_rounds_the_fastest_median_wins(tmp_path):
    # a replay's samples are not rounds in step with each other: nothing to compare round by round
    ev = Rounds({1: 1.00, 2: 0.99}, {1: [0.99] * 5, 2: [0.98, 1.00, 0.98, 0.98, 0.98]}, aligned=False)
    assert _winner(tmp_path, ev) == FOUND


def test_a_listed_config_far_behind_is_not_kept_for_one_lucky_round(tmp_path):
    # the listed config won one round, but its median is beyond the judged noise of the winner's
    ev = Rounds({1: 1.00, 2: 0.99}, {1: [1.10, 0.97, 1.10, 1.10, 1.10], 2: [0.98] * 5})
    assert _winner(tmp_path, ev) == FOUND


@pytest.mark.parametrize("a, b, swept", [
    ((1.0, 1.0), (1.1, 1.1), True),
    ((1.0, 1.2), (1.1, 1.1), False),
    ((1.0, 1.1), (1.1, 1.1), False),  # a tie in a round is no lead
])
def test_beat_every_round(a, b, swept):
    ra = Measurement({"B": 1}, time_ms=a[0], samples_ms=a, extra={"rounds": len(a)})
    rb = Measurement({"B": 2}, time_ms=b[0], samples_ms=b, extra={"rounds": len(b)})
    assert beat_every_round(ra, rb) is swept
    # rows without aligned rounds, or with rounds that do not match: the medians decide
    assert beat_every_round(Measurement({"B": 1}, time_ms=1.0, samples_ms=a), rb)
    assert beat_every_round(ra, Measurement({"B": 2}, time_ms=1.0, samples_ms=b[:1], extra={"rounds": 1}))


def test_the_autotuner_counts_keys_where_the_list_was_kept(tmp_path):
    """`phases.count_beyond`: a key whose winner is the list's best while a config beyond the list
    ran a faster run-off median counts as `kept_listed` (what `patch.report()` and the library
    benchmark show), not as a win beyond the list."""
    from types import SimpleNamespace

    from abductune.autotune.phases import count_beyond

    ev = Rounds({1: 1.00, 2: 0.99}, {1: [0.99] * 5, 2: [0.98, 1.00, 0.98, 0.98, 0.98]})
    with Session(ev, strategy="exhaustive", budget=Budget(2), store=tmp_path / "s.sqlite") as s:
        res = s.run(baselines={"configs": [LISTED]})
    stats = {"beyond_pruned": 0, "beyond_list": 0, "beyond_failed": 0, "won_beyond_list": 0,
             "gain_beyond_list": 1.0, "kept_listed": 0}
    tuner = SimpleNamespace(_list=[LISTED], space=ev.space, stats=stats)
    count_beyond(tuner, res)
    assert stats["kept_listed"] == 1 and stats["won_beyond_list"] == 0 and stats["beyond_list"] == 1
    # a lead in every round: a win beyond the list, nothing kept
    ev = Rounds({1: 1.00, 2: 0.99}, {1: [0.99] * 5, 2: [0.98] * 5})
    with Session(ev, strategy="exhaustive", budget=Budget(2), store=tmp_path / "t.sqlite") as s:
        res = s.run(baselines={"configs": [LISTED]})
    stats.update(kept_listed=0, won_beyond_list=0)
    count_beyond(tuner, res)
    assert stats["kept_listed"] == 0 and stats["won_beyond_list"] == 1
