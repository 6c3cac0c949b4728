"""Replay evaluator: answers from a recorded dataset with a simulated clock.

The first evaluation of a config adds its recorded compile + benchmark seconds to the clock
(a failure costs what it cost when recorded, usually its compile time); repeats are free,
as they would be with a memoising tuner. A config absent from the dataset is `pruned`.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..datasets.format import Dataset
from ..measurement import Measurement
from .base import Evaluator


class ReplayEvaluator(Evaluator):
    def __init__(self, dataset: Dataset):
        self.dataset = dataset
        self.space = dataset.space()
        self.problem = dataset.problem
        key = self.space.key
        self._table: dict[tuple, Measurement] = {key(m.config): m for m in dataset.records}
        self._seen: set[tuple] = set()
        self.clock = 0.0
        self.evaluations = 0

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        out = []
        for cfg in configs:
            k = self.space.key(cfg)
            m = self._table.get(k)
            if m is None:
                out.append(Measurement(dict(cfg), "pruned", error="config not in the recorded dataset"))
                continue
            if k not in self._seen:
                self._seen.add(k)
                self.clock += m.cost_s
                self.evaluations += 1
            out.append(m)
        return out

    def reset(self) -> None:
        self._seen.clear()
        self.clock = 0.0
        self.evaluations = 0
