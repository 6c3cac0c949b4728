"""One search's view of a fleet: `FleetEvaluator`, an ordinary `Evaluator` for a Session whose
measurements are taken by the farm's workers of one GPU type, streamed as each job lands."""
from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping, Sequence

from ..measure.base import Evaluator
from ..measurement import Measurement
from ..problem import Problem
from ..space import Space
from .farm import Farm, _Request
from .worker import Target


class FleetEvaluator(Evaluator):
    """An `Evaluator` whose measurements are taken by a farm's workers of one pool (one GPU
    type). `stream` yields each job's measurements as they land (the Session stores them at
    once); a re-timing (`remeasure`) is one job, so its configs are timed side by side on one
    GPU. `clock` adds up the seconds the workers' evaluators spent for this search."""

    def __init__(self, farm: Farm, target: Target, problem: Problem, space: Space, *, pool: str | None = None,
                 lookahead: bool = False, remeasures_impls: bool = False, vendor: bool = True,
                 on_request: Callable[[], None] | None = None):
        self.farm = farm
        self._on_request = on_request  # called once, before the search's first request to the farm
        self.target = target
        self.problem = problem
        self.space = space
        self.pool = pool
        self.clock = 0.0
        self.incumbent_ms: float | None = None
        self.remeasures_impls = remeasures_impls
        self._expected: list[dict] = []
        self._later: list[dict] = []
        self.lookahead = lookahead
        if lookahead:  # only where the workers' evaluator listens (live): it changes nothing else
            self.expect = self._expect  # type: ignore[method-assign]
        if vendor:
            self.vendor_baseline = self._vendor  # type: ignore[method-assign]

    vendor_name = "torch"

    def _expect(self, configs: Sequence[Mapping[str, Any]]) -> None:
        self._expected = [dict(c) for c in configs]

    def prefetch_hint(self, configs: Sequence[Mapping[str, Any]]) -> None:
        """The baselines the Session measures at the end: sent with the next batch, so a live
        worker compiles them ahead as a serial tune does (where its evaluator listens)."""
        if self.lookahead:
            self._later += [dict(c) for c in configs]

    def _request(self, *args: Any, **kw: Any) -> _Request:
        if self._on_request is not None:
            call, self._on_request = self._on_request, None
            call()
        return self.farm.request(self.target, *args, pool=self.pool, **kw)

    def _collect(self, req: _Request) -> Iterator[tuple[list[int], list[Measurement]]]:
        got = 0
        while got < req.n:
            item = req.replies.get()
            if isinstance(item, BaseException):
                raise item
            idx, reply = item
            got += len(idx)
            self.clock += reply.clock
            for m in reply.measurements:
                if m.ok and not m.extra.get("early_stop") and (self.incumbent_ms is None
                                                               or m.time_ms < self.incumbent_ms):
                    self.incumbent_ms = m.time_ms
            yield idx, list(reply.measurements)

    def stream(self, configs: Sequence[Mapping[str, Any]]) -> Iterator[tuple[list[int], list[Measurement]]]:
        """(indices into `configs`, their measurements) per job, as each lands."""
        if not configs:
            return
        expect, self._expected = self._expected, []
        later, self._later = self._later, []
        req = self._request("evaluate", configs, expect=expect, incumbent_ms=self.incumbent_ms, later=later)
        yield from self._collect(req)

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        out: list[Measurement | None] = [None] * len(configs)
        for idx, ms in self.stream(configs):
            for i, m in zip(idx, ms):
                out[i] = m
        return out  # type: ignore[return-value]

    def remeasure(self, configs: Sequence[Mapping[str, Any]], *, rounds: int = 1) -> list[Measurement]:
        if not configs:
            return []
        req = self._request("remeasure", configs, rounds=rounds, split=False)
        out: list[Measurement | None] = [None] * len(configs)
        for idx, ms in self._collect(req):
            for i, m in zip(idx, ms):
                out[i] = m
        return out  # type: ignore[return-value]

    def _vendor(self) -> Measurement:
        req = self._request("vendor", [{"impl": "torch"}], split=False)
        [(_, [m])] = list(self._collect(req))
        return m
