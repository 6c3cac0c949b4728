"""Where a missed key's tune spent its time (the decorator's `phases`: one dict per tune, what the
GPU benchmarks record beside Triton's cold call), and what the search found beyond the list."""
from __future__ import annotations

import time
from typing import Any, Mapping

from ..measurement import Status
from ..store import config_key
from .fixed import own


def tune_phases(result: Any, marks: Mapping[str, float], warm: Any, plan: tuple[str, str], evaluator: Any) -> dict:
    """Seconds per phase of one tune, from the marks `_tune` took (perf_counter: "start", "session"
    when the Session began, "session_end", "end") and the rows the run measured:

    - before_session_s: the claim on the key, the store's second look, the evaluator and the
      compile workers' set-up (the key's Problem and the store's first look come before it);
    - first_launch_s: every config's first launch here (a compile, a cache load, or the wait
      for a worker compiling it), bench_s: timing them (do_bench or the injected timer);
      (raced: how many were timed by the short probe alone, `evaluation.CallEvaluator`);
    - runoff_s: judging, with the interleaved re-timing of the close contenders (runoff_rounds);
    - store_s: the Session's reads and writes (claims excluded: they count in search_other_s);
    - session_other_s: the rest of the Session (strategy, claims, theory evidence, journal);
    - after_session_s: choosing what to launch, the record, the report.
    `compile`: the plan, and the workers' part (compiling.Warmer.stats; the pool's start: its age at
    this tune, when its first worker was ready and when one had paid its one-time costs, each
    worker's [torch import, first compile] seconds)."""
    rows = [m for m in result.history if "impl" not in m.config]
    evaluator = getattr(evaluator, "inner", evaluator)  # a FixedEvaluator measures through its inner one
    first = sum(m.compile_s or 0.0 for m in rows)
    bench = sum(m.bench_s or 0.0 for m in rows)
    timing = result.timing or {}
    session = marks["session_end"] - marks["session"]
    runoff = timing.get("judge", 0.0)
    store = timing.get("store", 0.0)
    out: dict[str, Any] = {
        "wall_s": marks["end"] - marks["start"], "before_session_s": marks["session"] - marks["start"],
        "first_launch_s": first, "bench_s": bench, "runoff_s": runoff,
        "runoff_contenders": len(result.runoff), "runoff_rounds": getattr(evaluator, "runoff_rounds", None),
        "raced": getattr(evaluator, "raced", None),
        "store_s": store, "session_other_s": max(0.0, session - first - bench - runoff - store),
        "after_session_s": marks["end"] - marks["session_end"], "evaluations": result.evaluations,
        "compile": {"plan": plan[0], "why": plan[1] if plan[0] == "serial" else None}}
    if warm is not None:
        out["compile"].update(dict(warm.stats))
        from .compile_workers import pool_started

        pool = pool_started()
        if pool is not None:
            s = pool.stats
            out["compile"].update(pool_age_s=marks["start"] - s["started"], first_ready_s=s["first_ready_s"],
                                  first_prepared_s=s.get("first_prepared_s"), prepare_s=s.get("prepare_s"),
                                  workers=s["workers"], ready=pool.ready, hot=pool.hot(warm.module),
                                  offline_target=s["target"], preload_s=s["preloads"].get(warm.module))
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}


def now() -> float:
    return time.perf_counter()


def count_beyond(tuner: Any, result: Any) -> None:
    """What the search found beyond the list (the autotuner's stats): configs measured there (and
    of those, failed), pruned there, and whether the winner is one of them, with its gain over the
    list's best, or the list's best was kept over one with a faster median that some round of the
    final run-off reversed."""
    listed = {config_key(d) for d in tuner._list}

    def key(cfg: Any) -> str:  # as the list holds it: without the tiles the caller fixes
        return config_key(own(cfg, tuner.space))
    outside = {key(m.config): m for m in result.history if "impl" not in m.config and key(m.config) not in listed}
    pruned = sum(m.status is Status.PRUNED for m in outside.values())
    tuner.stats["beyond_pruned"] += pruned
    tuner.stats["beyond_list"] += len(outside) - pruned
    # measured and failed (out of shared memory, a compile error): what the prune did not foresee
    tuner.stats["beyond_failed"] += sum(not m.ok and m.status is not Status.PRUNED for m in outside.values())
    w, base = result.winner, result.baselines.get("configs")
    if w is None or not w.ok or "impl" in w.config:
        return
    if key(w.config) not in listed:
        tuner.stats["won_beyond_list"] += 1
        if base is not None and base.ok and w.time_ms > 0:
            tuner.stats["gain_beyond_list"] = max(tuner.stats["gain_beyond_list"], base.time_ms / w.time_ms)
    elif any(m.ok and "impl" not in m.config and key(m.config) not in listed and m.objective < w.objective
             for m in result.runoff):
        # a config beyond the list ran faster on the run-off's median, on a lead its rounds did
        # not agree on: the list's best was kept (`Session._listed_unless_beaten`)
        tuner.stats["kept_listed"] += 1
