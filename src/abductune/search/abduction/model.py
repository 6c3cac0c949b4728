"""The additive model of log-time that ranks the engine's moves, and generic mode's space-filling start."""
from __future__ import annotations

import math
from typing import Collection, Sequence

import numpy as np

from ...space import Config, Space
from ...theory.generic import importance, interactions

PAIR_TERMS = 4  # interaction terms in the additive model
PAIR_MIN = 0.02  # share of variance a pair must explain beyond its parts to get a term


class Additive:
    """log time ~ mu + sum of per-parameter value effects + a few pairwise effects, fitted by
    backfitting with shrinkage (a value seen n times keeps n/(n+1) of its mean residual). An
    ordered parameter's unseen value takes the effect interpolated between its nearest seen
    values (times are smooth in tile sizes and counts), or with `unimodal` the better of them
    (`_fill_unseen`); an unordered one's takes 0."""

    def __init__(self, space: Space, rows: Sequence[tuple[Config, float]],
                 pairs: Sequence[tuple[str, str]] = (), sweeps: int = 4, shrink: float = 1.0,
                 unimodal: bool = False):
        self.space = space
        self.params = list(space.params)
        pos = {p.name: i for i, p in enumerate(self.params)}
        self.pairs = [(pos[a], pos[b]) for a, b in pairs]
        X = np.array([[p.index(c[p.name]) for p in self.params] for c, _ in rows], dtype=np.int64)
        y = np.array([t for _, t in rows], dtype=float)
        self.mu = float(y.mean()) if len(y) else 0.0
        self.main = [np.zeros(len(p.values)) for p in self.params]
        self.seen = [np.zeros(len(p.values), dtype=bool) for p in self.params]
        self.pair_fx = [np.zeros((len(self.params[a].values), len(self.params[b].values))) for a, b in self.pairs]
        if not len(y):
            return
        for j in range(len(self.params)):
            self.seen[j][np.unique(X[:, j])] = True
        for _ in range(sweeps):
            for j, p in enumerate(self.params):
                r = y - self._fit(X, skip_main=j)
                n = np.bincount(X[:, j], minlength=len(p.values))
                self.main[j] = np.bincount(X[:, j], weights=r, minlength=len(p.values)) / (n + shrink)
            for q, (a, b) in enumerate(self.pairs):
                r = y - self._fit(X, skip_pair=q)
                nb = len(self.params[b].values)
                idx = X[:, a] * nb + X[:, b]
                size = len(self.params[a].values) * nb
                n = np.bincount(idx, minlength=size)
                self.pair_fx[q] = (np.bincount(idx, weights=r, minlength=size) / (n + shrink)).reshape(-1, nb)
        for j, p in enumerate(self.params):
            if p.ordered and self.seen[j].any() and not self.seen[j].all():
                at = np.flatnonzero(self.seen[j])
                self.main[j] = _fill_unseen(self.main[j], self.seen[j]) if unimodal else \
                    np.interp(np.arange(len(p.values)), at, self.main[j][at])

    def _fit(self, X: np.ndarray, skip_main: int = -1, skip_pair: int = -1) -> np.ndarray:
        f = np.full(len(X), self.mu)
        for j in range(len(self.params)):
            if j != skip_main:
                f += self.main[j][X[:, j]]
        for q, (a, b) in enumerate(self.pairs):
            if q != skip_pair:
                f += self.pair_fx[q][X[:, a], X[:, b]]
        return f

    def predict(self, configs: Sequence[Config]) -> np.ndarray:
        if not configs:
            return np.zeros(0)
        X = np.array([[p.index(c[p.name]) for p in self.params] for c in configs], dtype=np.int64)
        return self._fit(X)


def _fill_unseen(effects: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """Effects of an ordered parameter with its unseen values filled: each takes the lower
    (faster) effect of its nearest seen values on either side, the one seen value where it has
    one side only. A profile along a tile size or a count is often unimodal, and its minimum
    may lie anywhere between two seen values, so an unseen value between them is as promising
    as the better of the two. Interpolating between them (session 17) made a coarse probe that
    lost rank the finer step before it as half a loss: after a tile of 32 measured slower than
    128, the model ranked 64 behind every untried move, where pattern search would try it next,
    and on a zoo matmul the optimum was that step. The engine assumes this where the diagnosis
    explains the space (tiles, warps and stages by role); generic mode, which knows nothing of
    its parameters, interpolates (`ModelFit._fit_model`)."""
    idx = np.arange(len(effects))
    left = np.maximum.accumulate(np.where(seen, idx, -1))
    right = np.minimum.accumulate(np.where(seen, idx, len(idx))[::-1])[::-1]
    from_left = np.where(left >= 0, effects[np.clip(left, 0, None)], np.inf)
    from_right = np.where(right < len(idx), effects[np.clip(right, None, len(idx) - 1)], np.inf)
    return np.where(seen, effects, np.minimum(from_left, from_right))


def latin_hypercube(space: Space, n: int, rng: np.random.Generator,
                    centre: Collection[str] = ()) -> list[Config]:
    """n valid configs spread over every parameter's range: each parameter's probability mass
    is cut into n strata, one draw per stratum, strata shuffled independently per parameter; a
    combination that breaks a constraint moves to the nearest valid config. Duplicates after
    that repair are replaced by uniform draws from the valid configs. A parameter whose role is
    in `centre` ("*": every parameter; ordered, three values or more) puts more of its mass at
    the middle of its range (`centre_weights`); any other spreads it evenly over its values."""
    valid = space.valid_configs()
    if n >= len(valid):
        return [dict(c) for c in valid]
    cols = []
    for p in space.params:
        u = (rng.permutation(n) + rng.random(n)) / n
        weighted = p.ordered and (p.role in centre or "*" in centre)
        cum = np.cumsum(centre_weights(len(p.values)) if weighted else np.ones(len(p.values)))
        cols.append(np.minimum(np.searchsorted(cum / cum[-1], u, side="right"), len(p.values) - 1))
    out: list[Config] = []
    seen: set[tuple] = set()
    for i in range(n):
        cfg = {p.name: p.values[int(cols[j][i])] for j, p in enumerate(space.params)}
        if not space.satisfies(cfg):
            cfg = space.nearest_valid(cfg)
        k = space.key(cfg)
        if k not in seen:
            seen.add(k)
            out.append(cfg)
    while len(out) < n:
        cfg = dict(valid[int(rng.integers(len(valid)))])
        k = space.key(cfg)
        if k not in seen:
            seen.add(k)
            out.append(cfg)
    return out


def centre_weights(m: int) -> np.ndarray:
    """The share of a space-filling sample each value of an ordered parameter of m values gets:
    exp(-(2x)^2) with x the value's position in its range from -1/2 to 1/2, so each end gets
    0.37 of the middle's share (5 values: 11%, 24%, 30%, 24%, 11%); every value can still be
    drawn. The constant was set once, not fitted (see `Abduction`'s `centre_roles`)."""
    if m < 3:
        return np.ones(m)
    x = np.arange(m) / (m - 1) - 0.5
    return np.exp(-(2 * x) ** 2)


class ModelFit:
    """The engine's additive model of this run's measurements (a part of `strategy._Engine`,
    whose state it reads: `measured`, `space`, `ctx`, the model cache and interaction terms)."""

    def _model(self) -> Additive:
        if self._model_cache is not None and self._model_cache[0] == len(self.measured):
            return self._model_cache[1]
        model = self._fit_model()
        self._model_cache = (len(self.measured), model)
        return model

    def _rows(self) -> list[tuple[Config, float]]:
        """(config, log time) of every first measurement, for the additive model."""
        ok = [(m.config, math.log(m.time_ms)) for m in self.measured if m.ok]  # type: ignore[arg-type]
        if ok:  # failures sit a doubling above the slowest success, so the model avoids them
            worst = max(t for _, t in ok) + math.log(2.0)
            ok += [(m.config, worst) for m in self.measured if not m.ok and m.status != "pruned"]
        return ok

    def _fit_model(self) -> Additive:
        ok = self._rows()
        imp = importance(self.space, [m for m in self.measured if m.ok])
        top = [n for n, v in sorted(imp.items(), key=lambda kv: -kv[1]) if v > 0][:5]
        inter = interactions(self.space, [m for m in self.measured if m.ok], names=top) if len(top) > 1 else {}
        pairs = [p for p, v in sorted(inter.items(), key=lambda kv: -kv[1]) if v >= PAIR_MIN][:PAIR_TERMS]
        self._imp, self._inter, self._pairs = imp, inter, pairs
        return Additive(self.space, ok, pairs, shrink=self._shrink(ok), unimodal=not self.generic)

    def _shrink(self, rows: list[tuple[Config, float]]) -> float:
        """The additive model's shrinkage, as a ridge penalty is set: the variance of one
        measurement's noise over the variance of the effects to be learned, estimated by the
        spread of the log-times measured (noise: the ledger's floor, or the repeat noise where
        larger). With shrinkage 1 (what generic mode keeps) a value seen once kept half its
        effect, so on a kernel where one config was 3x slower the other half of that effect was
        booked to the parameters it shared with others, and the model ranked a move 1% faster
        that a measured pair showed 12% slower. Where times differ by little more than noise
        the shrinkage stays near 1."""
        if self.generic or len(rows) < 2:
            return 1.0
        noise = max(self.ledger.floor, self.ledger.repeat_noise() or 0.0)
        spread = float(np.var([t for _, t in rows]))
        return min(1.0, noise ** 2 / spread) if spread > 0 else 1.0

    def _sampled_model(self) -> Additive:
        """The additive model (same interaction terms as `_model`) fitted to a bootstrap
        resample of the measurements: one draw from the model's uncertainty."""
        self._model()  # chooses the interaction terms (self._pairs) on all the measurements
        rows = self._rows()
        pick = self.ctx.np_rng.integers(len(rows), size=len(rows))
        return Additive(self.space, [rows[int(i)] for i in pick], self._pairs, unimodal=not self.generic)
