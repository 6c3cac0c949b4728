"""Generic mode: for spaces whose parameters have no roles (public Kernel Tuner / T4 spaces),
learn from the measurements so far which parameters and pairs of parameters matter, and
propose moves along those first.

Sensitivity is a variance decomposition of log-time (times spread over orders of magnitude and
matter as ratios): a parameter's share is the correlation ratio eta^2 = between-group variance
/ total variance when the measurements are grouped by its value, adjusted for the number of
groups like an adjusted R^2, so a parameter with many values does not look important by chance
on a few samples. A pair's interaction is what grouping by both values explains beyond the two
parameters alone. Numpy only.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..errors import AbductuneError
from ..measurement import Measurement
from ..space import Config, Space

def _observations(space: Space, measurements: Iterable[Any]) -> tuple[list[tuple], np.ndarray]:
    """(config keys, log times) of the successful observations: Measurements (ok ones) or
    (config, time) pairs with a finite positive time."""
    keys: list[tuple] = []
    ys: list[float] = []
    for m in measurements:
        if isinstance(m, Measurement):
            if not m.ok:
                continue
            cfg, t = m.config, m.time_ms
        else:
            try:
                cfg, t = m
            except (TypeError, ValueError):
                raise AbductuneError(f"a measurement for importance() must be a Measurement or a "
                                     f"(config, time) pair, got {m!r}") from None
        if t is None or not math.isfinite(t) or t <= 0:
            continue
        keys.append(space.key(cfg))
        ys.append(math.log(t))
    return keys, np.asarray(ys, dtype=float)


def _explained(groups: Sequence[Any], y: np.ndarray) -> float:
    """Adjusted share of the variance of `y` explained by grouping on `groups` (eta^2 with the
    adjusted-R^2 correction for the number of groups); 0 when it explains nothing."""
    n = len(y)
    if n < 3:
        return 0.0
    total = float(((y - y.mean()) ** 2).sum())
    if total <= 0.0:
        return 0.0
    index: dict[Any, int] = {}
    inv = np.fromiter((index.setdefault(g, len(index)) for g in groups), dtype=np.int64, count=n)
    k = len(index)
    if k < 2 or n - k < 1:
        return 0.0
    sums = np.bincount(inv, weights=y, minlength=k)
    counts = np.bincount(inv, minlength=k)
    between = float((counts * (sums / counts - y.mean()) ** 2).sum())
    eta2 = between / total
    return max(0.0, 1.0 - (1.0 - eta2) * (n - 1) / (n - k))


def importance(space: Space, measurements: Iterable[Any]) -> dict[str, float]:
    """Per parameter, the adjusted share of log-time variance explained by its value alone
    (0 = no visible effect, 1 = it decides the time). Needs a few successful measurements;
    every parameter is 0 before that."""
    keys, y = _observations(space, measurements)
    return {name: _explained([k[i] for k in keys], y) for i, name in enumerate(space.names)}


def interactions(space: Space, measurements: Iterable[Any],
                 names: Sequence[str] | None = None) -> dict[tuple[str, str], float]:
    """Per pair of parameters (in space order), the share of log-time variance that grouping by
    both explains beyond what each explains alone (0 = additive effects). `names` restricts the
    pairs to those parameters (e.g. the most important ones, to save time on wide spaces)."""
    keys, y = _observations(space, measurements)
    chosen = [n for n in space.names if names is None or n in set(names)]
    idx = {n: space.names.index(n) for n in chosen}
    single = {n: _explained([k[idx[n]] for k in keys], y) for n in chosen}
    out: dict[tuple[str, str], float] = {}
    for a, b in itertools.combinations(chosen, 2):
        joint = _explained([(k[idx[a]], k[idx[b]]) for k in keys], y)
        out[(a, b)] = max(0.0, joint - single[a] - single[b])
    return out


def _moves(space: Space, name: str, value: Any) -> list[Any]:
    """Values to try for one parameter: ±1 and ±2 steps when ordered (nearest first), every
    other value otherwise."""
    p = space[name]
    if not p.ordered:
        return [v for v in p.values if v != value]
    out = [p.step(value, d) for d in (-1, +1, -2, +2)]
    return [v for v in out if v is not None]


def generic_moves(space: Space, incumbent: Mapping[str, Any], importance: Mapping[str, float],
                  interactions: Mapping[tuple[str, str], float] | None = None,
                  k: int = 8) -> list[Config]:
    """Up to `k` valid configs near `incumbent`: single-parameter moves along the important
    parameters and pairwise moves along interacting (or jointly important) pairs, ranked by
    importance (a pair: its interaction plus the weaker of its two importances), nearest steps
    first. Parameters with no measured importance come last, so nothing is ruled out."""
    inc = dict(incumbent)
    inter = dict(interactions or {})
    # a floor keeps unmeasured parameters in play, in space order
    imp = {n: float(importance.get(n, 0.0)) for n in space.names}
    scored: list[tuple[float, int, Config]] = []
    seq = itertools.count()
    for n in space.names:
        for rank, v in enumerate(_moves(space, n, inc[n])):
            # nearer steps first: each further step costs a quarter of the score
            scored.append((imp[n] * (1.0 - 0.25 * min(rank // 2, 3)), next(seq), {**inc, n: v}))
    pairs = sorted(itertools.combinations(space.names, 2),
                   key=lambda ab: -(inter.get(ab, inter.get(ab[::-1], 0.0)) + min(imp[ab[0]], imp[ab[1]])))
    for a, b in pairs[: max(4, 2 * k)]:
        s = inter.get((a, b), inter.get((b, a), 0.0)) + min(imp[a], imp[b])
        if s <= 0.0:
            continue
        ma, mb = _moves(space, a, inc[a])[:2], _moves(space, b, inc[b])[:2]
        for va, vb in itertools.product(ma, mb):
            scored.append((s, next(seq), {**inc, a: va, b: vb}))
    scored.sort(key=lambda t: (-t[0], t[1]))
    out: list[Config] = []
    seen = {space.key(inc)}
    for _s, _i, cfg in scored:
        key = space.key(cfg)
        if key in seen or not space.is_valid(cfg):
            continue
        seen.add(key)
        out.append(cfg)
        if len(out) >= k:
            break
    return out
