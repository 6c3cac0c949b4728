"""Tuning built-in kernels end to end: pick an evaluator (live GPU or bundled replay), run a
strategy, and report the winner against the kernel's fixed config list, its default config
and torch (cuBLAS for matmul)."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import AbductuneError
from .measurement import Measurement
from .search import Budget, make_strategy, run

log = logging.getLogger(__name__)


def gpu_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@dataclass
class TuneOutcome:
    kernel: str
    dims: dict[str, int]
    mode: str  # "live" or "replay"
    strategy: str
    winner: Measurement | None
    evaluations: int
    seconds: float  # evaluator clock: real on a GPU, recorded costs in replay
    wall_s: float
    fixed_best: Measurement | None = None
    default: Measurement | None = None
    torch_ms: float | None = None
    optimum_ms: float | None = None  # known in replay (exhaustive data)
    history: list[Measurement] = field(default_factory=list)
    heuristics: list[dict] = field(default_factory=list)  # which seed heuristics fired

    def to_dict(self) -> dict[str, Any]:
        t = lambda m: m.time_ms if m is not None and m.ok else None  # noqa: E731
        return {"kernel": self.kernel, "dims": self.dims, "mode": self.mode, "strategy": self.strategy,
                "winner": self.winner.config if self.winner else None, "winner_ms": t(self.winner),
                "evaluations": self.evaluations, "seconds": self.seconds, "wall_s": self.wall_s,
                "fixed_best_ms": t(self.fixed_best), "fixed_best": self.fixed_best.config if self.fixed_best else None,
                "default_ms": t(self.default), "torch_ms": self.torch_ms, "optimum_ms": self.optimum_ms,
                "heuristics": self.heuristics}


def _best(ms: list[Measurement]) -> Measurement | None:
    ok = [m for m in ms if m.ok]
    return min(ok, key=lambda m: m.objective) if ok else None


def _seeds(problem: Any, space: Any, default_cfg: dict, extra: list[dict] | None,
           heuristics: bool, database: Any) -> tuple[list[dict], list[dict]]:
    """Seed configs (given ones first, then the observed database and the heuristics) and
    the record of which heuristics fired."""
    seeds = list(extra or [])
    fired: list[dict] = []
    if heuristics:
        from .heuristics import seed_configs

        rep = seed_configs(problem, space, problem.hardware, database=database, base=default_cfg)
        seeds += rep.configs
        fired = rep.fired
    return seeds, fired


def tune_one(kernel: str, dims: dict[str, int], *, strategy: str = "pattern", budget: Budget | None = None,
             seed: int = 0, mode: str = "auto", seeds: list[dict] | None = None, heuristics: bool = True,
             database: Any = None, store: Any = None,
             compile_workers: int | None = None,
             on_batch: Callable[[list[Measurement]], None] | None = None) -> TuneOutcome:
    """Tune one (kernel, shape). mode: 'live', 'replay' or 'auto' (live when a GPU is present)."""
    from . import kernels

    if mode == "auto":
        mode = "live" if gpu_available() else "replay"
    if mode not in ("live", "replay"):
        raise AbductuneError(f"mode must be live, replay or auto, got {mode!r}")
    budget = budget or Budget(64)
    spec = kernels.get(kernel) if mode == "live" else None
    t0 = time.perf_counter()
    if mode == "replay":
        from .datasets.bundled import find_bundled
        from .datasets.format import read_dataset
        from .measure.replay import ReplayEvaluator

        ds = read_dataset(find_bundled(kernel, dims))
        ev: Any = ReplayEvaluator(ds)
        space = ev.space
        fixed = ds.meta.get("fixed_configs") or []
        default_cfg = ds.meta.get("default_config") or space.default()
        all_seeds, fired = _seeds(ds.problem, space, default_cfg, seeds, heuristics, database)
        res = run(make_strategy(strategy, seed=seed), ev, budget, seeds=all_seeds, on_batch=on_batch)
        lookup = ReplayEvaluator(ds)  # separate clock: the reference rows cost the tune nothing
        return TuneOutcome(kernel, dims, mode, strategy, res.best, res.evaluations, res.seconds,
                           time.perf_counter() - t0, _best(lookup.evaluate(fixed)),
                           lookup.evaluate([default_cfg])[0], ds.baselines.get("torch_ms"),
                           ds.optimum().time_ms, res.history, fired)

    from .measure.live import LiveEvaluator
    from .sweep import local_hardware, toolchain

    assert spec is not None
    problem = spec.problem(dims, local_hardware())
    ev = LiveEvaluator(spec, problem, compile_workers=compile_workers, seed=seed)
    memo = None
    ctx = None
    if store is not None:
        from .store import Context

        ctx = Context.of(problem, ev.space, toolchain_key())
        memo = store.memo(ctx, ev.space)

    def record(ms: list[Measurement]) -> None:
        if store is not None and ctx is not None:
            store.put_many(ctx, ms)
        if on_batch:
            on_batch(ms)

    all_seeds, fired = _seeds(problem, ev.space, spec.default_config(), seeds, heuristics, database)
    run_id = store.start_run(ctx, strategy, {"budget": [budget.evaluations, budget.seconds], "seed": seed},
                             heuristics=fired) if store is not None else None
    try:
        res = run(make_strategy(strategy, seed=seed), ev, budget, seeds=all_seeds, memo=memo,
                  on_batch=record)
        ranked = ev.refine(res.history)
        winner = ranked[0] if ranked else res.best
        fixed = _best(ev.evaluate(spec.fixed_configs()))
        default = ev.evaluate([spec.default_config()])[0]
        torch_m = ev.baseline()
        if run_id is not None:
            store.finish_run(run_id, "done")
    except BaseException:
        if run_id is not None:
            store.finish_run(run_id, "interrupted")
        raise
    finally:
        ev.close()
    return TuneOutcome(kernel, dims, mode, strategy, winner, res.evaluations, res.seconds,
                       time.perf_counter() - t0, fixed, default, torch_m.time_ms if torch_m.ok else None,
                       None, res.history, fired)


def toolchain_key() -> str:
    try:
        import torch
        import triton

        return f"torch={torch.__version__};triton={triton.__version__}"
    except ImportError:
        return ""
