"""Strategies and the loop that drives them.

A strategy is written as a generator: it yields a batch of configs and receives their
measurements back, in order. `Search` turns that into ask/tell (memoisation, seeds first,
budget truncation), and `run` ties a Search to an Evaluator. So a strategy never counts
budget or deduplicates: it just proposes, and configs already measured are answered free.
"""
from __future__ import annotations

import logging
import math
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Iterable, Mapping, Sequence

import numpy as np

from ..errors import AbductuneError
from ..measure.base import Evaluator
from ..measurement import Measurement
from ..space import Config, Space

log = logging.getLogger(__name__)

Proposals = Generator[list[Config], list[Measurement], None]

# A strategy that keeps proposing only configs it has already seen is done.
_MAX_STALLED_BATCHES = 10_000


@dataclass(frozen=True)
class Budget:
    """Stop after `evaluations` new measurements and/or `seconds` of evaluator clock."""

    evaluations: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        if self.evaluations is not None and self.evaluations < 0:
            raise AbductuneError(f"budget evaluations must be >= 0, got {self.evaluations}")
        if self.seconds is not None and self.seconds < 0:
            raise AbductuneError(f"budget seconds must be >= 0, got {self.seconds}")


class SearchContext:
    """What a strategy may look at: the space, its rngs, seeds, and what is known so far."""

    def __init__(self, space: Space, seed: int, seeds: Sequence[Config], memo: dict[tuple, Measurement],
                 batch_size: int):
        self.space = space
        self.seed = seed
        self.rng = random.Random(seed)
        self.np_rng = np.random.default_rng(seed)
        self.seeds = [dict(s) for s in seeds]
        self.batch_size = batch_size
        self._memo = memo
        self.history: list[Measurement] = []  # this search's answers, first-time ones only
        self.best: Measurement | None = None

    def known(self, cfg: Mapping[str, Any]) -> Measurement | None:
        return self._memo.get(self.space.key(cfg))

    def is_known(self, cfg: Mapping[str, Any]) -> bool:
        return self.space.key(cfg) in self._memo

    def objective(self, cfg: Mapping[str, Any]) -> float:
        m = self.known(cfg)
        return math.inf if m is None else m.objective

    def _record(self, m: Measurement) -> None:
        self.history.append(m)
        if m.ok and (self.best is None or m.objective < self.best.objective):
            self.best = m


class Strategy(ABC):
    """Base class. Subclasses set `name` and implement `propose(ctx)` as a generator."""

    name = "strategy"

    def __init__(self, seed: int = 0, **options: Any):
        self.seed = seed
        self.options = options
        if options:
            raise AbductuneError(f"strategy {self.name!r} got unknown option(s): {', '.join(options)}")

    @abstractmethod
    def propose(self, ctx: SearchContext) -> Proposals:
        """Yield batches of configs; each `yield` returns their measurements in order."""


@dataclass
class SearchResult:
    strategy: str
    best: Measurement | None
    history: list[Measurement]
    evaluations: int
    seconds: float
    trace: list[tuple[int, float, float]] = field(default_factory=list)  # (evals, seconds, best ms)
    seeds_used: int = 0


class Search:
    """Ask/tell over a strategy. `ask()` returns configs that still need measuring (never
    more than the evaluation budget allows); `tell()` takes their measurements."""

    def __init__(self, strategy: Strategy, space: Space, seeds: Iterable[Mapping[str, Any]] = (),
                 budget: Budget | None = None, memo: dict[tuple, Measurement] | None = None,
                 batch_size: int = 8):
        self.strategy = strategy
        self.space = space
        self.budget = budget or Budget()
        self.memo: dict[tuple, Measurement] = memo if memo is not None else {}
        valid_seeds = []
        seen: set[tuple] = set()
        for s in seeds:
            if not space.is_valid(s):
                log.warning("seed config %s is not valid in the space; skipped", dict(s))
                continue
            k = space.key(s)
            if k not in seen:
                seen.add(k)
                valid_seeds.append(dict(s))
        self.ctx = SearchContext(space, strategy.seed, valid_seeds, self.memo, batch_size)
        self.evaluations = 0
        self._gen: Proposals | None = None
        self._pending: list[Config] | None = None  # the batch the generator is waiting on
        self._asked: list[Config] = []
        self._seed_queue = list(valid_seeds)
        self._queue: list[Config] = []  # unmeasured configs of the current batch, not yet asked
        self.batch_size = max(1, batch_size)
        self.done = False
        self.exhausted_budget = False

    @property
    def best(self) -> Measurement | None:
        return self.ctx.best

    def _remaining(self) -> float:
        b = self.budget.evaluations
        return math.inf if b is None else b - self.evaluations

    def ask(self) -> list[Config]:
        if self.done:
            return []
        if self._remaining() <= 0:
            self.done = self.exhausted_budget = True
            return []
        if self._queue:  # the rest of a batch larger than batch_size
            return self._take(self._queue)
        if self._seed_queue:
            batch = [s for s in self._seed_queue if not self.ctx.is_known(s)]
            for s in self._seed_queue:
                m = self.ctx.known(s)
                if m is not None:
                    self.ctx._record(m)
            self._seed_queue = []
            if batch:
                return self._take(batch)
        if self._gen is None:
            self._gen = self.strategy.propose(self.ctx)
            to_send = None
        else:
            to_send = self._answers()
        stalled = 0
        while True:
            try:
                batch = self._gen.send(to_send) if to_send is not None else next(self._gen)
            except StopIteration:
                self.done = True
                return []
            if not batch:
                raise AbductuneError(f"strategy {self.strategy.name!r} yielded an empty batch")
            self._pending = [dict(c) for c in batch]
            new: list[Config] = []
            keys: set[tuple] = set()
            for c in self._pending:
                k = self.space.key(c)
                if k not in self.memo and k not in keys:
                    keys.add(k)
                    new.append(c)
            if new:
                return self._take(new)
            stalled += 1
            if stalled > _MAX_STALLED_BATCHES:
                log.info("strategy %s keeps proposing measured configs; stopping", self.strategy.name)
                self.done = True
                return []
            to_send = self._answers()

    def _take(self, configs: list[Config]) -> list[Config]:
        """Ask for at most batch_size configs (and never past the evaluation budget)."""
        n = int(min(len(configs), self.batch_size, self._remaining()))
        self._asked, self._queue = configs[:n], configs[n:]
        return list(self._asked)

    def _answers(self) -> list[Measurement]:
        assert self._pending is not None
        answers = [self.memo[self.space.key(c)] for c in self._pending]
        for m in answers:  # configs measured earlier (memo, resumed run) still count for best
            if m.ok and (self.ctx.best is None or m.objective < self.ctx.best.objective):
                self.ctx.best = m
        return answers

    def tell(self, measurements: Sequence[Measurement]) -> None:
        if len(measurements) != len(self._asked):
            raise AbductuneError(f"tell() got {len(measurements)} measurements for "
                                 f"{len(self._asked)} asked configs")
        for c, m in zip(self._asked, measurements):
            k = self.space.key(c)
            if k not in self.memo:
                self.memo[k] = m
                self.evaluations += 1
                self.ctx._record(m)
        self._asked = []
        if self._remaining() <= 0 and (self._queue or (self._pending is not None and any(
                self.space.key(c) not in self.memo for c in self._pending))):
            # budget cut the batch short: the strategy cannot be answered, so it ends here
            self.done = self.exhausted_budget = True


def run(strategy: Strategy, evaluator: Evaluator, budget: Budget | None = None,
        seeds: Iterable[Mapping[str, Any]] = (), memo: dict[tuple, Measurement] | None = None,
        batch_size: int = 8, on_batch: Callable[[list[Measurement]], None] | None = None) -> SearchResult:
    """Drive `strategy` against `evaluator` until the strategy ends or the budget is spent."""
    budget = budget or Budget()
    search = Search(strategy, evaluator.space, seeds, budget, memo, batch_size)
    t0 = evaluator.clock
    trace: list[tuple[int, float, float]] = []
    n_seeds = len(search.ctx.seeds)
    while True:
        if budget.seconds is not None and evaluator.clock - t0 >= budget.seconds:
            break
        batch = search.ask()
        if not batch:
            break
        ms = evaluator.evaluate(batch)
        search.tell(ms)
        best = search.best.objective if search.best else math.inf
        trace.append((search.evaluations, evaluator.clock - t0, best))
        if on_batch is not None:
            on_batch(ms)
    return SearchResult(strategy.name, search.best, search.ctx.history, search.evaluations,
                        evaluator.clock - t0, trace, n_seeds)
