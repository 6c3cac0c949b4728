"""Tuning built-in kernels end to end: pick an evaluator (live GPU or bundled replay), seed it,
and run one `Session`, which searches, measures the baselines (the kernel's fixed config list,
its default config, torch) once per problem, judges the winner and stores everything."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import AbductuneError
from .measurement import Measurement
from .search import Budget
from .search.base import Seed
from .session import NEAREST_SEEDS, Session, SessionResult

log = logging.getLogger(__name__)


def gpu_available() -> bool:
    """Whether live tuning can run here. NVML naming a GPU and a torch that is not a CPU build
    answer without importing torch (seconds) or starting CUDA in this process."""
    from .hardware import installed_versions
    from .measure.target import visible_gpu

    torch_version = installed_versions().get("torch")
    if torch_version is None:
        return False
    if visible_gpu() is not None and "+cpu" not in torch_version:
        return True
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
    session: SessionResult | None = None
    param_names: list[str] = field(default_factory=list)
    gpu: str = ""  # on a fleet: the GPU type this outcome is for (tuned per GPU type)

    @property
    def best_impl(self) -> str:
        """Which implementation to ship for this shape: the faster of the two times shown (the
        tuned Triton winner and the vendor library; Triton on a tie), the rule the decorator's
        `pick` uses, so the same numbers always give the same choice. Noise is dealt with
        before: where the evaluator can re-time the vendor library, both times come from the
        final side-by-side run-off (Session.judge)."""
        w = self.winner.time_ms if self.winner is not None and self.winner.ok else None
        if self.torch_ms is not None and (w is None or self.torch_ms < w):
            return "torch"
        return "triton" if w is not None else "-"

    @property
    def stopped_early(self) -> bool:
        """Whether the search ended before its budget because it had settled (`stop_early`)."""
        return bool(self.session and any(e.get("event") == "stop" for e in self.session.events or ()))

    def to_dict(self) -> dict[str, Any]:
        t = lambda m: m.time_ms if m is not None and m.ok else None  # noqa: E731
        s = self.session
        return {"kernel": self.kernel, "dims": self.dims, "mode": self.mode, "strategy": self.strategy,
                "winner": self.winner.config if self.winner else None, "winner_ms": t(self.winner),
                "evaluations": self.evaluations, "stopped_early": self.stopped_early, "seconds": self.seconds,
                "wall_s": self.wall_s,
                "best_impl": self.best_impl,
                "fixed_best_ms": t(self.fixed_best), "fixed_best": self.fixed_best.config if self.fixed_best else None,
                "default_ms": t(self.default), "torch_ms": self.torch_ms, "optimum_ms": self.optimum_ms,
                "heuristics": self.heuristics,
                "run_id": s.run_id if s else None, "spent_before": s.spent_before if s else 0,
                "resumed_from": s.resumed_from if s else None, "timing": s.timing if s else {},
                "runoff": [m.config for m in s.runoff] if s else [],
                "clocks": s.clocks if s else None, "pipeline": s.pipeline if s else None,
                **({"gpu": self.gpu} if self.gpu else {})}


# the best theory prediction and the runner-up rule's, when it gives another config: a hedge
# against one rule extrapolating badly, for one measurement
THEORY_SEEDS = 2


def seed_list(problem: Any, space: Any, default_cfg: dict, extra: list[dict] | None, heuristics: bool,
              database: Any, exclude: Any = None) -> tuple[list[Seed], list[dict]]:
    """Seed configs with their provenance (given ones first, then the observed database and
    the heuristics) and the record of which heuristics fired. `exclude`: leave out knowledge
    learned from this problem (replay of a recorded dataset must not use its own answer)."""
    seeds = [Seed(dict(c), "user") for c in (extra or [])]
    fired: list[dict] = []
    if heuristics:
        from .theory.store import predictions

        try:  # the theory store's zero-shot predictions are the first bets
            preds = predictions(problem, space, exclude=exclude)[:THEORY_SEEDS]
        except Exception as e:  # noqa: BLE001 - a prediction must never stop a tune
            log.warning("theory prediction for %s failed: %s: %s", problem.kernel, type(e).__name__, e)
            preds = []
        for i, pred in enumerate(preds):
            seeds.append(Seed(dict(pred.config), f"theory:{pred.rule.regime}" + (":runner-up" if i else "")))
            fired.append({"name": "theory" + (" runner-up" if i else ""), "source": "theory", "status": "seed",
                          "reason": pred.describe(), "config": dict(pred.config)})
        if not preds:
            fired.append({"name": "theory", "source": "theory", "status": "noop", "reason": "no rule applies"})
        from .heuristics import seed_configs

        kw: dict[str, Any] = {"database": database, "base": default_cfg}
        if exclude is not None:
            kw["exclude"] = exclude
        rep = seed_configs(problem, space, problem.hardware, **kw)
        fired = fired + rep.fired
        for cfg in rep.configs:
            src = next((f"{f.get('source', '')}:{f.get('name', '')}" for f in rep.fired
                        if f.get("status") == "seed" and f.get("config") == cfg and not f.get("duplicate_of")),
                       "heuristic")
            seeds.append(Seed(dict(cfg), src))
    return seeds, fired


def tune_one(kernel: str, dims: dict[str, int], *, strategy: str = "abduction", budget: Budget | None = None,
             seed: int = 0, mode: str = "auto", seeds: list[dict] | None = None, heuristics: bool = True,
             database: Any = None, store: Any = None, compile_workers: int | None = None,
             options: dict[str, Any] | None = None, live_options: dict[str, Any] | None = None,
             exclude: Any = None, stop_early: bool = False,
             on_batch: Callable[[list[Measurement]], None] | None = None,
             evaluator_for: Callable[[Any, Any], Any] | None = None, hardware: Any = None,
             toolchain: str | None = None, theory_evidence: Callable[[Any], Any] | None = None,
             nearest_from: Callable[[Any, int], Any] | None = None) -> TuneOutcome:
    """Tune one (kernel, shape). mode: 'live', 'replay' or 'auto' (live when a GPU is present).
    `store`: a Store (or path); replay uses a private in-memory store when none is given.
    `stop_early`: abduction may end before the budget once its search has settled (the CLI's
    default; see `Abduction`); other strategies ignore it.
    `evaluator_for(problem, space)`: measure elsewhere (a fleet's GPUs, `fleet.FleetEvaluator`)
    instead of here; a live tune then names the GPU (`hardware`, a HardwareInfo) and its
    `toolchain` key, and mode must be live or replay. `theory_evidence`: the Session's (where
    the run's theory-evidence prior comes from; default the store's tallies). With `heuristics`,
    the first seeds are this kernel's winners on its nearest shapes in the store
    (`session.NEAREST_SEEDS`), from `nearest_from(context, n)` where given (the Session's)."""
    from . import kernels

    if evaluator_for is not None and (mode not in ("live", "replay") or
                                      (mode == "live" and (hardware is None or toolchain is None))):
        raise AbductuneError("tune_one with evaluator_for needs mode live (with hardware and toolchain) "
                             "or replay")
    t0 = time.perf_counter()
    pre: dict[str, float] = {}  # where the seconds before and after the Session went

    def lap(phase: str, since: float) -> float:
        now = time.perf_counter()
        pre[f"tune.{phase}"] = pre.get(f"tune.{phase}", 0.0) + now - since
        return now
    if mode in ("auto", "live") and evaluator_for is None:
        from .measure.target import visible_gpu

        if visible_gpu() is not None:  # the workers' fork server imports while we do
            from .measure.live import prestart

            prestart()
            lap("prestart", t0)
    if mode == "auto":
        t = time.perf_counter()
        mode = "live" if gpu_available() else "replay"
        lap("gpu_check", t)
    if mode not in ("live", "replay"):
        raise AbductuneError(f"mode must be live, replay or auto, got {mode!r}")
    budget = budget or Budget(64)
    if stop_early and strategy == "abduction":
        options = {"stop_early": True, **(options or {})}
    optimum = None
    if mode == "replay":
        from .datasets.bundled import find_bundled
        from .datasets.format import read_dataset
        from .measure.replay import ReplayEvaluator

        if kernel in kernels.names():  # the kernel's dims, each positive, before any lookup
            kernels.get(kernel).problem(dims)
        ds = read_dataset(find_bundled(kernel, dims))
        ev: Any = ReplayEvaluator(ds)
        fixed = ds.meta.get("fixed_configs") or []
        default_cfg = ds.meta.get("default_config") or ev.space.default()
        optimum = ds.optimum().time_ms
        toolchain = ds.toolchain
        problem = ds.problem
        exclude: Any = problem  # never seed a replay with rules learned from this very dataset
    elif evaluator_for is not None:  # live on a fleet's GPU: nothing is started here
        spec = kernels.get(kernel)
        problem = spec.problem(dims, hardware)
        ev = None
        fixed, default_cfg = spec.fixed_configs(), spec.default_config()
    else:
        from .hardware import toolchain_key
        from .measure.live import LiveEvaluator
        from .measure.target import local_hardware

        spec = kernels.get(kernel)
        t = time.perf_counter()
        problem = spec.problem(dims, local_hardware())
        t = lap("hardware", t)
        ev = LiveEvaluator(spec, problem, compile_workers=compile_workers, seed=seed,
                           **{"shared": True, **(live_options or {})})
        lap("evaluator_start", t)
        fixed, default_cfg = spec.fixed_configs(), spec.default_config()
        toolchain = toolchain_key()
        # `exclude`: a benchmark on shapes the packaged knowledge was learned from leaves it out
    if evaluator_for is not None:
        ev = evaluator_for(problem, ev.space if ev is not None else spec.space())
    try:
        t = time.perf_counter()
        all_seeds, fired = seed_list(problem, ev.space, default_cfg, seeds, heuristics, database, exclude)
        from .heuristics.seeds import ranker_prior

        prior = ranker_prior(problem, ev.space, exclude=exclude) if heuristics and strategy == "abduction" else []
        lap("seeds", t)
        with Session(ev, strategy=strategy, seed=seed, options=options, budget=budget, seeds=all_seeds,
                     store=store, toolchain=toolchain, heuristics=fired, theory_evidence=theory_evidence,
                     prior=prior, nearest=NEAREST_SEEDS if heuristics else 0,
                     nearest_from=nearest_from) as session:
            res = session.run(baselines={"fixed": fixed, "default": [default_cfg]}, vendor=True,
                              on_batch=on_batch)
    finally:
        t = time.perf_counter()
        ev.close()
        lap("close", t)
    res.timing.update(pre)
    vendor = res.baselines.get("vendor")
    return TuneOutcome(kernel, dims, mode, strategy, res.winner, res.evaluations, res.seconds,
                       time.perf_counter() - t0, res.baselines.get("fixed"), res.baselines.get("default"),
                       vendor.time_ms if vendor is not None and vendor.ok else None, optimum, res.history,
                       fired, res, list(ev.space.names))
