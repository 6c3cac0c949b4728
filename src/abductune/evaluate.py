"""Comparing strategies on recorded datasets (replay), with the methodology of
Willemsen et al., "A methodology for comparing optimization algorithms for auto-tuning"
(FGCS 2024): a strategy's score at a budget is P = (B - F) / (B - optimum), where B is the
exact expected best of uniform random sampling without replacement at that budget and F the
strategy's median best. P = 1 finds the optimum, P = 0 is no better than random, P < 0 worse.

Failed configs count as the worst valid time, both for the random baseline and for a
strategy that found nothing valid (a random sampler that only drew failures reports nothing
useful; charging it the worst time keeps B finite and the comparison fair).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .datasets.format import Dataset, check_dataset_times
from .errors import AbductuneError
from .measure.replay import NoiseModel, ReplayEvaluator
from .search import Budget
from .session import Session


def expected_best_random(times: Sequence[float], n: int) -> float:
    """Exact E[min] of `n` draws without replacement from `times` (inf = failed, valued as
    the worst finite time). P(the i-th smallest is the min) = C(N-i, n-1) / C(N, n)."""
    finite = [t for t in times if math.isfinite(t)]
    if not finite:
        raise AbductuneError("no successful measurement: the random baseline is undefined")
    worst = max(finite)
    v = np.sort(np.array([t if math.isfinite(t) else worst for t in times], dtype=float))
    N = len(v)
    if n <= 0:
        raise AbductuneError(f"budget must be positive, got {n}")
    if n >= N:
        return float(v[0])
    i = np.arange(1, N - n + 2)  # 1-based ranks that can be the minimum
    # log C(N-i, n-1) - log C(N, n), via lgamma for exactness at large N
    lg = np.vectorize(math.lgamma)
    logp = (lg(N - i + 1) - lg(n) - lg(N - i - n + 2)) - (lg(N + 1) - lg(n + 1) - lg(N - n + 1))
    p = np.exp(logp)
    return float(np.dot(p, v[: len(i)]) / p.sum())  # p sums to 1 up to rounding


def methodology_score(baseline: float, found: float, optimum: float) -> float:
    """P = (B - F) / (B - optimum); 1.0 when the baseline already is the optimum and F is too."""
    if baseline - optimum <= 0:
        return 1.0 if found <= optimum else 0.0
    return (baseline - found) / (baseline - optimum)


@dataclass
class Cell:
    """One (dataset, strategy, budget) result over repeats."""

    dataset: str
    strategy: str
    budget: int
    optimum_ms: float
    bests_ms: list[float]
    evaluations: list[int]
    seconds: list[float]
    random_expected_ms: float

    @property
    def median_ms(self) -> float:
        return statistics.median(self.bests_ms)

    @property
    def median_ratio(self) -> float:
        return self.median_ms / self.optimum_ms

    def within(self, factor: float) -> float:
        return sum(b <= self.optimum_ms * factor for b in self.bests_ms) / len(self.bests_ms)

    @property
    def score(self) -> float:
        return methodology_score(self.random_expected_ms, self.median_ms, self.optimum_ms)

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "strategy": self.strategy, "budget": self.budget,
                "optimum_ms": self.optimum_ms, "median_best_ms": self.median_ms,
                "median_ratio": self.median_ratio, "within_1.02": self.within(1.02),
                "within_1.05": self.within(1.05), "score_P": self.score,
                "random_expected_ms": self.random_expected_ms,
                "mean_evaluations": statistics.fmean(self.evaluations),
                "mean_seconds": statistics.fmean(self.seconds), "bests_ms": self.bests_ms}


SeedFn = Callable[[Dataset], list[dict[str, Any]]]


def compare_on_dataset(ds: Dataset, strategies: Sequence[str], budgets: Sequence[int], repeats: int,
                       seed: int = 0, seconds: float | None = None, seeds_fn: SeedFn | None = None,
                       curves: dict[str, list[list[float]]] | None = None,
                       progress: Callable[[], None] | None = None,
                       noise: NoiseModel | None = None, label: str | None = None,
                       options: Mapping[str, Mapping[str, Any]] | None = None,
                       prior_fn: Callable[[Dataset], list[dict]] | None = None) -> list[Cell]:
    """Run each strategy `repeats` times, each run one Session on a private in-memory store.
    Strategies never see the budget (it only truncates), so one run at the largest budget gives
    the best-so-far at every smaller budget; with a seconds limit the runs are made per budget
    instead, and a measurement that ends past the limit is not counted (the search checks the
    clock between batches, so it can overshoot by one batch; the score never does). Each
    (dataset, strategy, repeat) gets its own seed, so datasets sharing a space
    do not draw the same configs. With `noise`, a strategy sees noisy times but is scored on
    the recorded (true) time of what it found.

    Every measurement a strategy asked for counts against the budget, re-measurements included,
    in the order made; after each, the strategy is credited with the config whose observed
    times so far average fastest (geometric mean), at its true time. `options`: per strategy
    name, options on top of FAIR_REPLAY_OPTIONS (local searches restart instead of stopping)."""
    check_dataset_times(ds)  # a Dataset built in code: files were checked when read
    opt = ds.optimum().time_ms
    assert opt is not None
    worst = max(m.time_ms for m in ds.ok_records())  # type: ignore[type-var]
    all_times = [m.objective for m in ds.records]
    seeds = seeds_fn(ds) if seeds_fn else []
    prior = prior_fn(ds) if prior_fn else []  # the ranker's order, as `heuristics.seeds.ranker_prior` gives it
    cells = []
    for name in strategies:
        per_budget: dict[int, tuple[list[float], list[int], list[float]]] = {
            b: ([], [], []) for b in budgets}
        for r in range(repeats):
            runs = ([(max(budgets), None)] if seconds is None else [(b, b) for b in budgets])
            for run_budget, only in runs:
                rseed = repeat_seed(label or ds.name, name, r, seed)
                ev = ReplayEvaluator(ds, noise=noise, seed=rseed)
                opts = {**FAIR_REPLAY_OPTIONS.get(name, {}), **dict((options or {}).get(name, {}))}
                with Session(ev, strategy=name, seed=rseed, options=opts, budget=Budget(run_budget, seconds),
                             seeds=seeds, judge=noise is not None, prior=prior) as session:
                    res = session.run()
                    spent = session.store.measurements(session.context, run_ids=[res.run_id],
                                                       kinds=("seed", "search", "remeasure"))
                # best so far (true time of the config that looks best) and clock after k evaluations
                bests, clocks = _best_so_far(spent, ev, seconds)
                if curves is not None and only in (None, max(budgets)):
                    curves.setdefault(name, []).append([b if math.isfinite(b) else worst for b in bests])
                for b in ([only] if only is not None else budgets):
                    k = min(b, len(bests))
                    found = bests[k - 1] if k else math.inf
                    per_budget[b][0].append(found if math.isfinite(found) else worst)
                    per_budget[b][1].append(k)
                    per_budget[b][2].append(clocks[k - 1] if k else 0.0)
            if progress:
                progress()
        for b in budgets:
            bests_b, evals_b, secs_b = per_budget[b]
            cells.append(Cell(label or ds.name, name, b, opt, bests_b, evals_b, secs_b,
                              expected_best_random(all_times, b)))
    return cells


# Fair replay: local searches restart from random configs instead of stopping with budget left.
FAIR_REPLAY_OPTIONS: dict[str, dict[str, Any]] = {"coordesc": {"restarts": True}, "pattern": {"restarts": True},
                                                   "beam": {"restarts": True}}


def _best_so_far(rows: Sequence[Any], ev: ReplayEvaluator,
                 seconds: float | None = None) -> tuple[list[float], list[float]]:
    """After each measurement (re-measurements included, in the order made): the true time of
    the config whose observed times so far have the lowest geometric mean (first seen on ties),
    and the clock. The search stops only between batches, so its last batch can run past a
    seconds limit; what finished after the limit does not count (seconds are a hard cap)."""
    sums: dict[tuple, list[float]] = {}  # config key -> [sum of log times, count]
    best, bests, clocks, clock = math.inf, [], [], 0.0
    for m in rows:
        clock += m.bench_s if m.kind == "remeasure" else m.cost_s  # a re-measurement skips compiling
        if seconds is not None and clock > seconds:
            break
        if m.ok:
            acc = sums.setdefault(ev.space.key(m.config), [0.0, 0])
            acc[0] += math.log(m.time_ms)
            acc[1] += 1
            pick = min(sums, key=lambda k: sums[k][0] / sums[k][1])
            best = ev.true_time(ev.space.from_key(pick))
        bests.append(best)
        clocks.append(clock)
    return bests, clocks


def repeat_seed(dataset: str, strategy: str, repeat: int, base: int = 0) -> int:
    """A seed per (dataset, strategy, repeat), stable across runs and Python versions."""
    import hashlib

    h = hashlib.sha256(f"{dataset}|{strategy}|{repeat}|{base}".encode()).digest()
    return int.from_bytes(h[:4], "little")


def aggregate(cells: Sequence[Cell]) -> list[dict[str, Any]]:
    """Per (strategy, budget): mean score P over datasets, geomean of median ratio, and the
    mean fractions within 1.02x and 1.05x."""
    groups: dict[tuple[str, int], list[Cell]] = {}
    for c in cells:
        groups.setdefault((c.strategy, c.budget), []).append(c)
    out = []
    for (s, b), cs in sorted(groups.items()):
        out.append({"strategy": s, "budget": b, "datasets": len(cs),
                    "mean_score_P": statistics.fmean(c.score for c in cs),
                    "geomean_median_ratio": math.exp(statistics.fmean(math.log(c.median_ratio) for c in cs)),
                    "mean_within_1.02": statistics.fmean(c.within(1.02) for c in cs),
                    "mean_within_1.05": statistics.fmean(c.within(1.05) for c in cs)})
    return out


def require_matplotlib() -> None:
    """AbductuneError unless matplotlib can be imported: `replay --plot` asks this before the
    replay starts, so a missing extra never costs the run."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise AbductuneError("plotting needs matplotlib: pip install abductune[plot]")


def plot_curves(curves: dict[str, dict[str, list[list[float]]]], optima: dict[str, float], path: str) -> None:
    """Median best-so-far / optimum vs evaluations, one panel per dataset."""
    require_matplotlib()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise AbductuneError("plotting needs matplotlib: pip install abductune[plot]") from None
    n = len(curves)
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, (ds_name, per_strat) in zip(axes.flat, curves.items()):
        for strat, runs in sorted(per_strat.items()):
            L = max(len(r) for r in runs)
            med = [statistics.median(r[min(i, len(r) - 1)] for r in runs) / optima[ds_name]
                   for i in range(L)]
            ax.plot(range(1, L + 1), med, label=strat)
        ax.set_title(ds_name, fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("evaluations")
        ax.set_ylabel("best / optimum")
        ax.set_ylim(bottom=1.0)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
