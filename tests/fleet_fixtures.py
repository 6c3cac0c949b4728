"""Evaluators behind a fleet's workers in the CPU tests: the bundled recordings replayed, at the
pace of a GPU (`delay` seconds a config), on a GPU slower than its peers (`scale`), or on one
that a config kills (`poison`: the worker's process exits, as when a node dies under it)."""
from __future__ import annotations

import os
import time
from typing import Any, Mapping, Sequence

from abductune.datasets.bundled import find_bundled
from abductune.datasets.format import read_dataset
from abductune.measure.base import Evaluator
from abductune.measure.replay import ReplayEvaluator
from abductune.measurement import Measurement


class Paced(Evaluator):
    def __init__(self, inner: ReplayEvaluator, delay: float, scale: float, poison: Mapping[str, Any] | None):
        self.inner, self.delay, self.scale, self.poison = inner, delay, scale, poison
        self.space, self.problem = inner.space, inner.problem

    @property
    def clock(self) -> float:  # type: ignore[override]
        return self.inner.clock

    def _slow(self, ms: list[Measurement]) -> list[Measurement]:
        if self.scale == 1.0:
            return ms
        return [m.replace(time_ms=m.time_ms * self.scale, samples_ms=tuple(t * self.scale for t in m.samples_ms))
                if m.ok else m for m in ms]

    def _step(self, configs: Sequence[Mapping[str, Any]]) -> None:
        if self.poison is not None and any(dict(c) == dict(self.poison) for c in configs):
            os._exit(17)  # the worker dies with the job in hand
        time.sleep(self.delay * len(configs))

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        self._step(configs)
        return self._slow(self.inner.evaluate(configs))

    def remeasure(self, configs: Sequence[Mapping[str, Any]], *, rounds: int = 1) -> list[Measurement]:
        self._step(configs)
        cfgs = [c for c in configs if "impl" not in c]  # a live run-off re-times torch too: recorded here
        got = iter(self._slow(self.inner.remeasure(cfgs, rounds=rounds)))
        return [self.inner.vendor_baseline() if "impl" in c else next(got) for c in configs]

    def vendor_baseline(self) -> Measurement:
        return self.inner.vendor_baseline()


class Replayed:
    """A worker's evaluator factory: the target's bundled dataset, replayed (paced, scaled or
    poisoned as asked)."""

    def __init__(self, delay: float = 0.0, scale: float = 1.0, poison: Mapping[str, Any] | None = None):
        self.delay, self.scale, self.poison = delay, scale, dict(poison) if poison is not None else None

    def __call__(self, target: Any) -> Evaluator:
        ev = ReplayEvaluator(read_dataset(find_bundled(target.kernel, dict(target.dims))))
        return Paced(ev, self.delay, self.scale, self.poison)
