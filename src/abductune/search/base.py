"""Strategies and the loop that drives them.

A strategy is written as a generator: it yields a batch of configs and receives their
measurements back, in order. `Search` turns that into ask/tell (memoisation, seeds first,
budget truncation), and `run` ties a Search to a measuring function. So a strategy never
counts budget or deduplicates: it just proposes, and configs already measured are answered
free. To see a config again on purpose (confirm a close call), a strategy yields
`ctx.remeasure(configs)`: those are measured afresh and counted against the budget.

What a strategy may look at is its `SearchContext`: the space, the problem (dims, FLOPs,
bytes, dtypes), the hardware, the seeds with where each came from, what earlier runs stored
about this problem, and this run's answers so far.
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
from ..hardware import HardwareInfo
from ..measurement import Measurement, Status
from ..problem import Problem
from ..space import Config, Space

log = logging.getLogger(__name__)

Proposals = Generator[list[Config], list[Measurement], None]

# A strategy that keeps proposing only configs it has already seen is done.
_MAX_STALLED_BATCHES = 10_000
# Configs the evaluator refused before compiling them (status pruned: the resource model, the
# kernel's early_config_prune) cost nothing and do not count against the evaluation budget, up to
# this many in a run; past it they count, so a strategy that proposes nothing else still ends.
# Live on the H100 (session 29) pattern search under `budget=16` proposed 4 such configs of the 6
# it had beyond a list of 10, and measured 2.
PRUNED_FREE = 64


@dataclass(frozen=True)
class Budget:
    """Stop after `evaluations` new measurements and/or `seconds` of evaluator clock."""

    evaluations: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        e, s = self.evaluations, self.seconds
        if e is not None and (isinstance(e, bool) or not isinstance(e, int) or e < 0):
            raise AbductuneError(f"budget evaluations must be an integer >= 0, got {e!r}")
        if s is not None and (isinstance(s, bool) or not isinstance(s, (int, float)) or not s >= 0
                              or math.isnan(s)):
            raise AbductuneError(f"budget seconds must be a number >= 0, got {s!r}")

    def minus(self, evaluations: int = 0, seconds: float = 0.0) -> "Budget":
        """What is left after spending `evaluations` and `seconds` (never below zero)."""
        return Budget(None if self.evaluations is None else max(0, self.evaluations - evaluations),
                      None if self.seconds is None else max(0.0, self.seconds - seconds))


@dataclass(frozen=True)
class Seed:
    """A config to measure first, and where it came from (heuristic, observed, theory, fixed,
    user, ...) so a strategy and the run journal can tell a prediction from a guess."""

    config: Config
    source: str = "user"


class Remeasure(list):
    """A batch to measure again even if already measured (`yield ctx.remeasure(configs)`)."""


class Batch(list):
    """What `Search.ask` returns: configs plus why they are measured (`kind`: search, seed or
    remeasure), so the store records each row with its reason."""

    def __init__(self, configs: Iterable[Config] = (), kind: str = "search"):
        super().__init__(configs)
        self.kind = kind


@dataclass
class Knowledge:
    """What was known about this problem before the run: stored rows of earlier runs (oldest
    first) and the seeds with their provenance."""

    history: list[Measurement] = field(default_factory=list)
    seeds: list[Seed] = field(default_factory=list)
    # theory -> (supported, refuted, neutral) over earlier runs of this kernel class and GPU
    theory_evidence: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    # configs of the space best first by a model learned on other kernels (the ranker,
    # `heuristics.ranker_shipped`), never measured for that alone: a strategy may draw from it
    # where it would otherwise draw at random (abduction's exploring share)
    prior: list[Config] = field(default_factory=list)


class SearchContext:
    """What a strategy may look at: the space, problem, hardware, rngs, seeds, knowledge, and
    what is known so far."""

    def __init__(self, space: Space, seed: int, seeds: Sequence[Config], memo: dict[tuple, Measurement],
                 batch_size: int, problem: Problem | None = None, knowledge: Knowledge | None = None):
        self.space = space
        self.seed = seed
        self.rng = random.Random(seed)
        self.np_rng = np.random.default_rng(seed)
        self.seeds = [dict(s) for s in seeds]
        self.batch_size = batch_size
        self.problem = problem
        self.hardware: HardwareInfo | None = problem.hardware if problem is not None else None
        self.knowledge = knowledge or Knowledge()
        self._memo = memo
        self.history: list[Measurement] = []  # this search's answers: first-time and seeds
        self.remeasured: list[Measurement] = []  # fresh rows from remeasure requests
        self.best: Measurement | None = None
        self.events: list[dict[str, Any]] = []  # provenance log, stored with the run (explain)
        self.expected: list[Config] = []  # what the strategy expects to propose next (see expect)
        self.lookahead = False  # whether anyone listens to `expect` (a live evaluator does)

    def expect(self, configs: Iterable[Mapping[str, Any]]) -> None:
        """Say which configs are likely to be proposed after the coming batch, most likely
        first. Free and without effect on the search: a live evaluator compiles them on idle
        workers while the batch is measured, so the next batch waits less."""
        self.expected = [dict(c) for c in configs if not self.is_known(c)]

    def log(self, event: str, **fields: Any) -> None:
        """Record a step of the search's reasoning (observation, hypothesis, test, verdict),
        citing measurement ids where it can; the Session stores it with the run."""
        self.events.append({"event": event, **fields})

    def known(self, cfg: Mapping[str, Any]) -> Measurement | None:
        return self._memo.get(self.space.key(cfg))

    def is_known(self, cfg: Mapping[str, Any]) -> bool:
        return self.space.key(cfg) in self._memo

    def objective(self, cfg: Mapping[str, Any]) -> float:
        m = self.known(cfg)
        return math.inf if m is None else m.objective

    def remeasure(self, configs: Sequence[Mapping[str, Any]]) -> Remeasure:
        """`ms = yield ctx.remeasure(cfgs)`: fresh measurements, counted against the budget."""
        return Remeasure(dict(c) for c in configs)

    def measure(self, configs: Sequence[Config]) -> Generator[list[Config], list[Measurement], list[Measurement]]:
        """Propose `configs` in batches of batch_size (so a budget in seconds overshoots by at
        most one batch); return all their measurements: `ms = yield from ctx.measure(cs)`."""
        out: list[Measurement] = []
        for i in range(0, len(configs), self.batch_size):
            out += yield list(configs[i: i + self.batch_size])
        return out

    def note(self, m: Measurement) -> None:
        """Count `m` for `best` (the one place the running best is kept)."""
        if m.ok and (self.best is None or m.objective < self.best.objective):
            self.best = m


# kept for strategies written against the old helper name
def measure(ctx: SearchContext, configs: Sequence[Config]) -> Generator[list[Config], list[Measurement],
                                                                         list[Measurement]]:
    return (yield from ctx.measure(configs))


class Strategy(ABC):
    """Base class. Subclasses set `name` and implement `propose(ctx)` as a generator; options
    are validated with `search.options`."""

    name = "strategy"

    def __init__(self, seed: int = 0, **options: Any):
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise AbductuneError(f"strategy {self.name!r}: seed must be an integer, got {seed!r}")
        self.seed = int(seed)
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
    remeasured: list[Measurement] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)


class Search:
    """Ask/tell over a strategy. `ask()` returns a `Batch` of configs that still need measuring
    (never more than the evaluation budget allows); `tell()` takes their measurements."""

    def __init__(self, strategy: Strategy, space: Space, seeds: Iterable[Mapping[str, Any] | Seed] = (),
                 budget: Budget | None = None, memo: dict[tuple, Measurement] | None = None,
                 batch_size: int = 8, problem: Problem | None = None, knowledge: Knowledge | None = None):
        self.strategy = strategy
        self.space = space
        self.budget = budget or Budget()
        self.memo: dict[tuple, Measurement] = memo if memo is not None else {}
        valid: list[Seed] = []
        seen: set[tuple] = set()
        for s in seeds:
            seed = s if isinstance(s, Seed) else Seed(dict(s))
            if not space.is_valid(seed.config):
                log.warning("seed config %s (%s) is not valid in the space; skipped", dict(seed.config),
                            seed.source)
                continue
            k = space.key(seed.config)
            if k not in seen:
                seen.add(k)
                valid.append(Seed(dict(seed.config), seed.source))
        knowledge = knowledge or Knowledge()
        knowledge.seeds = valid
        self.batch_size = max(1, int(batch_size))
        self.ctx = SearchContext(space, strategy.seed, [s.config for s in valid], self.memo, self.batch_size,
                                 problem, knowledge)
        self.evaluations = 0
        self.pruned_free = PRUNED_FREE  # pruned answers that may still go uncounted (`PRUNED_FREE`)
        self._gen: Proposals | None = None
        self._pending: list[Config] | None = None  # the batch the generator is waiting on
        self._remeasure = False  # whether _pending is a remeasure request
        self._fresh: list[Measurement] = []  # answers to a remeasure request so far
        self._asked: Batch = Batch()
        self._seed_queue = [s.config for s in valid]
        self._queue: list[Config] = []  # the rest of the current batch, not yet asked
        self.done = False
        self.exhausted_budget = False

    @property
    def best(self) -> Measurement | None:
        return self.ctx.best

    def _remaining(self) -> float:
        b = self.budget.evaluations
        return math.inf if b is None else b - self.evaluations

    def ask(self) -> Batch:
        if self.done:
            return Batch()
        if self._remaining() <= 0:
            self.done = self.exhausted_budget = True
            return Batch()
        if self._queue:  # the rest of a batch larger than batch_size
            return self._take(self._queue, self._asked.kind)
        if self._seed_queue:
            batch = [s for s in self._seed_queue if not self.ctx.is_known(s)]
            for s in self._seed_queue:
                m = self.ctx.known(s)
                if m is not None:
                    self.ctx.history.append(m)
                    self.ctx.note(m)
            self._seed_queue = []
            if batch:
                return self._take(batch, "seed")
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
                return Batch()
            if not batch:
                raise AbductuneError(f"strategy {self.strategy.name!r} yielded an empty batch")
            self._pending = [dict(c) for c in batch]
            self._remeasure = isinstance(batch, Remeasure)
            if self._remeasure:
                self._fresh = []
                return self._take(self._pending, "remeasure")
            new: list[Config] = []
            keys: set[tuple] = set()
            for c in self._pending:
                k = self.space.key(c)
                if k not in self.memo and k not in keys:
                    keys.add(k)
                    new.append(c)
            if new:
                return self._take(new, "search")
            stalled += 1
            if stalled > _MAX_STALLED_BATCHES:
                log.info("strategy %s keeps proposing measured configs; stopping", self.strategy.name)
                self.done = True
                return Batch()
            to_send = self._answers()

    def _take(self, configs: list[Config], kind: str) -> Batch:
        """Ask for at most batch_size configs (and never past the evaluation budget)."""
        n = int(min(len(configs), self.batch_size, self._remaining()))
        self._asked, self._queue = Batch(configs[:n], kind), configs[n:]
        return Batch(self._asked, kind)

    def _answers(self) -> list[Measurement]:
        assert self._pending is not None
        if self._remeasure:
            return list(self._fresh)
        answers = [self.memo[self.space.key(c)] for c in self._pending]
        for m in answers:  # configs measured earlier (memo, resumed run) still count for best
            self.ctx.note(m)
        return answers

    def tell(self, measurements: Sequence[Measurement]) -> None:
        if len(measurements) != len(self._asked):
            raise AbductuneError(f"tell() got {len(measurements)} measurements for "
                                 f"{len(self._asked)} asked configs")
        if self._asked.kind == "remeasure":
            self._fresh += list(measurements)
            self.ctx.remeasured += list(measurements)
            self.evaluations += len(measurements)
        else:
            for c, m in zip(self._asked, measurements):
                k = self.space.key(c)
                if k not in self.memo:
                    self.memo[k] = m
                    if m.status is Status.PRUNED and self.pruned_free > 0:
                        self.pruned_free -= 1  # refused unmeasured: no evaluation spent
                    else:
                        self.evaluations += 1
                    self.ctx.history.append(m)
                    self.ctx.note(m)
        self._asked = Batch((), self._asked.kind)
        if self._remaining() <= 0 and (self._queue or (self._pending is not None and not self._remeasure and any(
                self.space.key(c) not in self.memo for c in self._pending))):
            # budget cut the batch short: the strategy cannot be answered, so it ends here
            self.done = self.exhausted_budget = True


Measure = Callable[[Batch], list[Measurement]]


def run(strategy: Strategy, evaluator: Any, budget: Budget | None = None,
        seeds: Iterable[Mapping[str, Any] | Seed] = (), memo: dict[tuple, Measurement] | None = None,
        batch_size: int = 8, on_batch: Callable[[list[Measurement]], None] | None = None, *,
        measure: Measure | None = None, problem: Problem | None = None,
        knowledge: Knowledge | None = None, clock: Callable[[], float] | None = None) -> SearchResult:
    """Drive `strategy` until it ends or the budget is spent. Each batch is measured by
    `measure` (a Session passes one that records and judges) or by `evaluator` directly."""
    budget = budget or Budget()
    search = Search(strategy, evaluator.space, seeds, budget, memo, batch_size,
                    problem if problem is not None else getattr(evaluator, "problem", None), knowledge)
    now = clock or (lambda: evaluator.clock)
    search.ctx.lookahead = hasattr(evaluator, "expect")
    if measure is None:
        def measure(b: Batch) -> list[Measurement]:
            return evaluator.remeasure(b) if b.kind == "remeasure" else evaluator.evaluate(b)
    t0 = now()
    trace: list[tuple[int, float, float]] = []
    n_seeds = len(search.ctx.seeds)
    while True:
        if budget.seconds is not None and now() - t0 >= budget.seconds:
            break
        batch = search.ask()
        if not batch:
            break
        if search.ctx.expected and hasattr(evaluator, "expect"):
            evaluator.expect(search.ctx.expected)
        search.ctx.expected = []
        ms = measure(batch)
        search.tell(ms)
        best = search.best.objective if search.best else math.inf
        trace.append((search.evaluations, now() - t0, best))
        if on_batch is not None:
            on_batch(ms)
    return SearchResult(strategy.name, search.best, search.ctx.history, search.evaluations, now() - t0,
                        trace, n_seeds, search.ctx.remeasured, search.ctx.events)
