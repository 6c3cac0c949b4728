"""What a key launches and where it comes from: the `Choice`, the winner the store holds (`pick`
weighs it against competing implementations), and the predictions a missed key serves at once
or seeds its tune with (the theory store's, the observed database's)."""
from __future__ import annotations

import logging
import math
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from ..measurement import Measurement
from ..problem import Problem
from ..space import Space
from ..store import Context, Store, config_key

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Choice:
    """What a key launches: a config of the space (or {"impl": name}), the kwargs it adds to
    the call, its config-level pre_hook, and where it came from (tuned, store, predicted,
    single)."""

    config: dict[str, Any]
    kwargs: dict[str, Any]
    pre_hook: Callable | None = None
    impl: Callable | None = None
    source: str = "tuned"
    time_ms: float | None = None
    triton_config: Any = None

    @property
    def name(self) -> str:
        return f"impl {self.config['impl']}" if "impl" in self.config else str(self.config)


def _median_ms(rows: Iterable[Measurement]) -> float:
    ok = [m.time_ms for m in rows if m.ok]
    return statistics.median(ok) if ok else math.inf


def pick(winner: Measurement | None, rows: Sequence[Measurement], impls: Iterable[str]) -> tuple[dict | None, float]:
    """(config, ms) a key launches: the judged Triton winner, unless one of the implementations
    `impls` is faster. Where the winner and every implementation ran in one run-off (kind
    "verify", same run), that side-by-side timing decides; else the median of every ok row of
    each (a first timing of cuBLAS can be several % off its run-off time). It reads only the
    store, so every process (and `abductune cache`) decides alike."""
    best = dict(winner.config) if winner is not None else None
    names = [{"impl": n} for n in impls]
    cands = ([best] if best is not None else []) + names
    mine = {config_key(c): [m for m in rows if config_key(m.config) == config_key(c)] for c in cands}
    runs = [{m.run_id for m in ms if m.ok and m.kind == "verify"} for ms in mine.values()]
    shared = set.intersection(*runs) if runs else set()
    if shared:  # the latest run-off that timed them all, side by side
        rid = max(r for r in shared if r is not None) if any(r is not None for r in shared) else None
        mine = {k: [m for m in ms if m.kind == "verify" and m.run_id == rid] for k, ms in mine.items()}
    best_t = _median_ms(mine[config_key(best)]) if best is not None else math.inf
    for c in names:
        t = _median_ms(mine[config_key(c)])
        if t < best_t:
            best, best_t = dict(c), t
    return best, best_t


def stored_winner(store: Store, ctx: Context) -> Measurement | None:
    """The winner a finished tune (or an import) recorded for `ctx`, the latest first; else
    the fastest ok row; None when nothing ran."""
    runs = [r for r in store.runs(ctx) if r.status == "done" and r.winner_id is not None]
    if runs:
        got = store.by_id([runs[-1].winner_id])
        if got:
            return got[0]
    return store.best(ctx)


def theory_predictions(problem: Problem, space: Space) -> list[Any]:
    """The theory store's zero-shot configs for this problem, best first, at most as many as
    `tune` seeds (the best rule's and the runner-up's: a hedge against one rule extrapolating
    badly); [] where none applies. Never raises: a prediction is a bet, not a requirement."""
    try:
        from ..theory.store import predictions
        from ..tune import THEORY_SEEDS

        return predictions(problem, space)[:THEORY_SEEDS]
    except Exception as e:  # noqa: BLE001
        log.debug("no theory prediction for %s: %s", problem.kernel, e)
        return []


def key_space(problem: Problem, grown: Space) -> Space:
    """The space a missed key of a budgeted search tunes over: `grown` (the list's hull one step
    beyond each end, configs.grow_space) plus the values the theory store predicts for this
    shape beyond it, read on a space grown three steps further and kept only where the resource
    model says the predicted config can launch and will not spill. `grown` itself (the same
    fingerprint, so the same store context) when no prediction reaches beyond it."""
    from ..theory.resources import trouble
    from .configs import grow_space, grows, with_values

    wide = grow_space(grown, steps=3)
    extra: dict[str, set[Any]] = {}
    for pred in theory_predictions(problem, wide):
        cfg = dict(pred.config)
        if trouble(problem, wide, cfg) is not None:
            continue
        for p in grown.params:
            v = cfg.get(p.name)
            if grows(p) and v is not None and not p.contains(v):
                extra.setdefault(p.name, set()).add(v)
    if not extra:
        return grown
    log.info("%s: the theory store predicts %s beyond the grown list for this shape; searching them too",
             problem.kernel, {n: sorted(v) for n, v in extra.items()})
    params = [with_values(p, sorted(extra[p.name])) if p.name in extra else p for p in grown.params]
    return Space(params, grown.constraints, grown.constants, name=grown.name)


def theory_prediction(problem: Problem, space: Space) -> Any:
    """The best theory prediction for this problem, or None (what a miss serves at once)."""
    got = theory_predictions(problem, space)
    return got[0] if got else None


def observed_prediction(problem: Problem, space: Space, database: Any = None) -> Any:
    """The observed database's config for this problem (a `Lookup`: rules harvested from
    recorded bests, or imported from vLLM tables), or None; never raises."""
    try:
        from ..heuristics.observed import load_database

        return load_database(database).lookup(problem, space)
    except Exception as e:  # noqa: BLE001
        log.debug("no observed-database prediction for %s: %s", problem.kernel, e)
        return None

