"""Shared helpers for strategy tests: a synthetic matmul-like space, a deterministic fake
evaluator with a known optimum and a failing region, and a strategy wrapper that records
whether the wrapped strategy ended on its own."""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

from abductune.measure.base import Evaluator
from abductune.measurement import Measurement
from abductune.problem import Problem
from abductune.search.base import SearchContext, Strategy
from abductune.space import Choice, IntRange, Pow2, Space

COMPILE_S, BENCH_S = 0.5, 0.25  # simulated seconds per config (failures cost COMPILE_S only)


def matmul_space() -> Space:
    """1440 valid configs out of 1500."""
    return Space([Pow2("BLOCK_M", 16, 256), Pow2("BLOCK_N", 16, 256), Pow2("BLOCK_K", 16, 128),
                  Choice("num_warps", [2, 4, 8]), IntRange("num_stages", 1, 5)],
                 ["BLOCK_M * BLOCK_N <= 32768"], name="synthetic-matmul")


OPTIMUM = {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 3}


def smem_overflow(c: Mapping[str, Any]) -> bool:
    """The failing region: the pipelined tiles do not fit in 160 KB of shared memory."""
    return c["num_stages"] * (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] * 2 > 160 * 1024


def matmul_time(c: Mapping[str, Any]) -> float | None:
    """Smooth bowl in log2 space with its minimum (1.0 ms) at OPTIMUM; None = compile error.
    The (m - n - 1) term couples BLOCK_M and BLOCK_N, as tile area does on a real GPU."""
    if smem_overflow(c):
        return None
    m, n, k = (int(math.log2(c[x])) - 4 for x in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
    w = int(math.log2(c["num_warps"])) - 1
    s = c["num_stages"]
    return 1.0 + 0.08 * (m - 3) ** 2 + 0.08 * (n - 2) ** 2 + 0.05 * (k - 1) ** 2 + 0.1 * (w - 1) ** 2 \
        + 0.03 * (s - 3) ** 2 + 0.02 * (m - n - 1) ** 2


def measurement(cfg: Mapping[str, Any], t: float | None) -> Measurement:
    if t is None:
        return Measurement(dict(cfg), "compile_error", compile_s=COMPILE_S, error="out of shared memory")
    return Measurement(dict(cfg), "ok", time_ms=t, samples_ms=[t, t * 1.01, t * 0.99],
                       compile_s=COMPILE_S, bench_s=BENCH_S)


class FakeEvaluator(Evaluator):
    """Deterministic: `fn(config) -> ms or None (compile error)`. The clock adds a config's cost
    the first time it is measured. With `check_valid`, an invalid config fails the test."""

    def __init__(self, space: Space, fn: Callable[[Mapping[str, Any]], float | None] = matmul_time,
                 check_valid: bool = True):
        self.space = space
        self.problem = Problem("fake_matmul", "matmul", {"M": 1024, "N": 1024, "K": 1024})
        self.fn = fn
        self.check_valid = check_valid
        self.clock = 0.0
        self.calls: list[dict[str, Any]] = []  # every config asked, in order
        self.measured: dict[tuple, Measurement] = {}

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        out = []
        for cfg in configs:
            if self.check_valid:
                assert self.space.is_valid(cfg), f"strategy proposed an invalid config {dict(cfg)}"
            self.calls.append(dict(cfg))
            k = self.space.key(cfg)
            if k not in self.measured:
                self.measured[k] = measurement(cfg, self.fn(cfg))
                self.clock += self.measured[k].cost_s
            out.append(self.measured[k])
        return out


class Watched(Strategy):
    """Wraps a strategy to record whether its generator returned by itself, and how many
    batches it proposed (the driver would also stop a strategy stuck on measured configs)."""

    def __init__(self, inner: Strategy):
        self.inner, self.seed, self.name = inner, inner.seed, inner.name
        self.finished, self.batches = False, 0

    def propose(self, ctx: SearchContext):
        gen = self.inner.propose(ctx)
        ms = None
        while True:
            try:
                batch = next(gen) if ms is None else gen.send(ms)
            except StopIteration:
                self.finished = True
                return
            self.batches += 1
            ms = yield batch


def abduction_engine(times: Mapping[tuple, float], space: Space) -> Any:
    """Abduction's engine after measuring `times` (config key -> ms) in `space`, and nothing else;
    its incumbent the best of them."""
    from abductune.search.abduction import Abduction
    from abductune.search.abduction.strategy import _Engine

    ctx = SearchContext(space, 0, [], {}, 8)
    eng = _Engine(Abduction(seed=0), ctx)
    for key, t in times.items():
        m = measurement(space.from_key(key), t)
        ctx._memo[key] = m
        eng._note([m])
    eng.inc = eng._best()
    return eng
