"""Harvest: build or update the observed-heuristics database from measurements (the
algorithm behind `abductune harvest`; `coverage` checks what a database seeds).

Input is a list of *observations*: one (problem, space, hardware) with the times of the
configs measured for it, from recorded datasets (`observations_from_datasets`) or from the
measurement store (`observations_from_store`). For every rule key -- hardware level (the
GPU, its family, any), kernel class + variant, shape bucket or per-class fallback, dtype
family, template scope -- the observations that fall in it form a group; the candidate
templates are the `top` fastest configs of each observation, re-keyed by role; each
candidate is realized in every observation's space exactly as a lookup would realize it
(merged onto that space's default, clamped to the problem) and scored:

- `geomean_slowdown`, `p90_slowdown`: its time over each shape's optimum;
- `wins`: shapes where it is the best candidate (within 0.5%);
- `coverage`: fraction of shapes where it was measured successfully;
- `vs_default`: geomean of its time over the default config's time (a failed default
  counts as the shape's worst time).

Templates are ranked by geomean slowdown (coverage >= `min_coverage` first) and kept only
when `vs_default <= 1 - margin`: a seed must beat the space's default by the margin on its
own, or it is not worth a measurement. A rule keeps up to `keep` templates; a group whose
best template misses the margin gives no rule (the report says why). Every rule lists the
datasets it was `learned_from` (`observed.Origin`), so a replay can leave its own shape out.
"""
from __future__ import annotations

import json
import logging
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..classify import Classification, classify
from ..datasets.format import Dataset
from ..datasets.public import load_any
from ..errors import AbductuneError, InvalidSeed, SpaceError
from ..hardware import HardwareInfo, as_hardware
from ..measurement import Measurement
from ..problem import Problem
from ..space import Choice, Config, Space
from .observed import ANY, Database, Origin, Rule, Template, family_key
from .realize import realize, template_keys, template_scope

log = logging.getLogger(__name__)

LEVELS = ("name", "family", "any")
WIN_TOLERANCE = 1.005


# ----------------------------------------------------------------------------- observations

@dataclass
class Observation:
    """Times of the configs measured for one problem (inf = failed)."""

    name: str
    problem: Problem
    space: Space
    times: dict[tuple, float]
    default: Config | None = None
    source: str = ""
    _cls: Classification | None = field(default=None, repr=False)

    @property
    def kernel(self) -> str:
        return self.problem.kernel

    @property
    def hardware(self) -> HardwareInfo | None:
        return self.problem.hardware

    @property
    def optimum(self) -> float:
        finite = [t for t in self.times.values() if math.isfinite(t)]
        return min(finite) if finite else math.inf

    @property
    def worst(self) -> float:
        finite = [t for t in self.times.values() if math.isfinite(t)]
        return max(finite) if finite else math.inf

    def classification(self, granularity: int = 2) -> Classification:
        if self._cls is None or self._cls.granularity != granularity:
            self._cls = classify(self.problem, self.space, granularity)
        return self._cls

    def time_of(self, cfg: Mapping[str, Any]) -> float | None:
        """Its time, inf when it failed, None when it was not measured."""
        try:
            return self.times.get(self.space.key(cfg))
        except SpaceError:
            return None

    def ranked(self, n: int | None = None) -> list[Config]:
        ok = sorted((t, k) for k, t in self.times.items() if math.isfinite(t))
        return [self.space.from_key(k) for _, k in (ok if n is None else ok[:n])]

    def default_time(self) -> float | None:
        if self.default is None:
            return None
        t = self.time_of(self.default)
        if t is None:
            return None
        return t if math.isfinite(t) else self.worst

    @classmethod
    def from_measurements(cls, name: str, problem: Problem, space: Space,
                          records: Iterable[Measurement], default: Mapping[str, Any] | None = None,
                          source: str = "") -> "Observation":
        times: dict[tuple, float] = {}
        for m in records:
            try:
                k = space.key(m.config)
            except SpaceError:
                continue
            t = m.objective
            times[k] = min(times.get(k, math.inf), t)
        d = dict(default) if default is not None and space.is_valid(default) else None
        if d is None:
            try:
                d = space.default()
            except SpaceError:
                d = None
        return cls(name, problem, space, times, d, source)


def observation_from_dataset(ds: Any) -> Observation:
    space = ds.space()
    default = (ds.meta or {}).get("default_config")
    return Observation.from_measurements(ds.name, ds.problem, space, ds.records, default,
                                         source=str(ds.path or ds.source))


def observations_from_datasets(items: Iterable[Any]) -> list[Observation]:
    """Observations from Dataset objects or paths (any format `load_any` reads)."""
    obs = []
    for it in items:
        ds = it if isinstance(it, Dataset) else load_any(it)
        if not ds.ok_records():
            log.warning("dataset %s has no successful measurement; skipped", ds.path or ds.name)
            continue
        obs.append(observation_from_dataset(ds))
    return obs


def _builtin_space(kernel: str, fingerprint: str) -> tuple[Space, Config] | None:
    try:
        from .. import kernels  # late: kernels import triton, which is optional here
        if kernel not in kernels.names():
            return None
        spec = kernels.get(kernel)
        space = spec.space()
    except Exception as e:  # noqa: BLE001 - triton missing, ...
        log.debug("no built-in space for %s: %s", kernel, e)
        return None
    if space.fingerprint() != fingerprint:
        return None
    return space, spec.default_config()


def observations_from_store(store: Any, *, kernel: str | None = None, hardware: str | None = None,
                            spaces: Mapping[str, Space] | None = None) -> list[Observation]:
    """One observation per store context. The space is `spaces[kernel]` when given, else the
    built-in kernel's when its fingerprint matches, else one inferred from the measured
    values (no roles, no default: such contexts give rules only if the default config, the
    first measured value of each parameter, was measured)."""
    obs = []
    for b in store.best_configs(kernel, hardware):
        ctx = b.context
        ms = store.measurements(ctx)
        got = None
        if spaces and ctx.kernel in spaces:
            sp = spaces[ctx.kernel]
            got = (sp, sp.default())
        if got is None:
            got = _builtin_space(ctx.kernel, ctx.space_fingerprint)
        if got is None:
            names: list[str] = []
            values: dict[str, list[Any]] = {}
            for m in ms:
                for k, v in m.config.items():
                    if k not in values:
                        names.append(k)
                        values[k] = []
                    if v not in values[k]:
                        values[k].append(v)
            try:
                sp = Space([Choice(n, values[n]) for n in names], name=ctx.kernel)
            except (SpaceError, TypeError) as e:
                log.warning("store context %s: cannot rebuild its space (%s); skipped", ctx.kernel, e)
                continue
            got = (sp, None)
        space, default = got
        hw = as_hardware(ctx.hardware) if ctx.hardware else None
        problem = Problem(kernel=ctx.kernel, kernel_class=ctx.kernel_class or "other",
                          dims=dict(ctx.dims), dtypes=dict(ctx.dtypes), hardware=hw,
                          source_hash=ctx.source_hash)
        obs.append(Observation.from_measurements(f"{ctx.kernel}[{ctx.shape_bucket}]@{ctx.hardware}",
                                                 problem, space, ms, default,
                                                 source=f"store:{store.path}"))
    return obs


# ----------------------------------------------------------------------------- harvest

@dataclass
class GroupReport:
    key: dict[str, Any]
    shapes: int
    kept: bool
    reason: str = ""
    best: dict[str, Any] | None = None


@dataclass
class HarvestResult:
    database: Database
    groups: list[GroupReport]
    observations: int

    @property
    def rules_added(self) -> int:
        return sum(g.kept for g in self.groups)


def _hw_keys(hw: HardwareInfo | None, levels: Sequence[str]) -> list[str]:
    out = []
    if hw is not None and "name" in levels:
        out.append(hw.name)
    if hw is not None and hw.family and "family" in levels:
        out.append(family_key(hw))
    if "any" in levels:
        out.append(ANY)
    return out


def _origins(group: Sequence[Observation]) -> list[Origin]:
    """Provenance of a rule: each dataset of its group once, in group order."""
    out: dict[str, Origin] = {}
    for o in group:
        org = Origin.of(o.problem)
        out.setdefault(org.key, org)
    return list(out.values())


def _tkey(t: Mapping[str, Any]) -> str:
    return json.dumps(sorted(t.items()), default=repr)


def harvest(observations: Sequence[Observation], *, margin: float = 0.05, top: int = 8,
            keep: int = 3, granularity: int = 2, levels: Sequence[str] = LEVELS,
            fallbacks: bool = True, buckets: bool = True, exact: bool = False,
            min_coverage: float = 0.5, database: Database | None = None) -> HarvestResult:
    """Rules from observations (see the module docstring); added to `database` (a new one
    when None), replacing rules with the same key."""
    if not 0 <= margin < 1:
        raise AbductuneError(f"margin must be in [0, 1), got {margin}")
    bad = [lv for lv in levels if lv not in LEVELS]
    if bad:
        raise AbductuneError(f"unknown hardware level(s) {bad}; use {', '.join(LEVELS)}")
    db = database if database is not None else Database()
    groups: dict[tuple, list[Observation]] = {}
    for o in observations:
        if not math.isfinite(o.optimum):
            continue
        c = o.classification(granularity)
        scope = template_scope(o.space)
        for hk in _hw_keys(o.hardware, levels):
            base = (hk, c.kernel_class, c.variant, c.dtype_family, scope)
            if buckets:
                groups.setdefault(base + (c.bucket, ()), []).append(o)
            if fallbacks:
                groups.setdefault(base + (f"fallback:{c.fallback}", ()), []).append(o)
            if exact and hk != ANY:
                groups.setdefault(base + (f"exact:{o.problem.shape_key()}",
                                          tuple(sorted(c.dims.items()))), []).append(o)
    cache: dict[tuple[int, str], float | None] = {}
    reports = []
    for key, group in groups.items():
        hk, kclass, variant, fam, scope, bucket, ex = key
        rep_key = {"hardware": hk, "kernel_class": kclass, "variant": variant, "bucket": bucket,
                   "dtype_family": fam, "scope": scope}
        templates, reason, best = _score_group(group, top=top, keep=keep, margin=margin,
                                               granularity=granularity, min_coverage=min_coverage,
                                               cache=cache)
        if templates:
            rule = Rule(kernel_class=kclass, bucket=bucket, dtype_family=fam, hardware=hk,
                        variant=variant, scope=scope, exact=dict(ex) or None,
                        granularity=granularity, templates=templates,
                        source={"harvest": {"kernels": sorted({o.kernel for o in group}),
                                            "margin": margin}},
                        learned_from=_origins(group))
            db.add(rule)
        reports.append(GroupReport(rep_key, len(group), bool(templates), reason, best))
    return HarvestResult(db, reports, len(observations))


def _score_group(group: list[Observation], *, top: int, keep: int, margin: float, granularity: int,
                 min_coverage: float, cache: dict) -> tuple[list[Template], str, dict | None]:
    cands: dict[str, dict[str, Any]] = {}
    for o in group:
        for cfg in o.ranked(top):
            t = template_keys(o.space, cfg)
            cands.setdefault(_tkey(t), t)
    if not cands:
        return [], "no successful measurement", None
    # raw[c][i]: time of candidate c realized in shape i (None: not measured, inf: failed)
    raw: dict[str, list[float | None]] = {}
    for ck, t in cands.items():
        row: list[float | None] = []
        for o in group:
            ckey = (id(o), ck)
            if ckey not in cache:
                try:
                    cfg = realize(o.space, t, o.problem, base=o.default,
                                  cls=o.classification(granularity))
                    cache[ckey] = o.time_of(cfg)
                except (InvalidSeed, SpaceError):
                    cache[ckey] = None
            row.append(cache[ckey])
        raw[ck] = row
    n = len(group)
    # failures count as the shape's worst time
    sl = {ck: [None if tm is None else (tm if math.isfinite(tm) else o.worst) / o.optimum
               for tm, o in zip(row, group)] for ck, row in raw.items()}
    best_on = [min((sl[c][i] for c in sl if sl[c][i] is not None), default=None) for i in range(n)]
    scored = []
    for ck, row in sl.items():
        got = [x for x in row if x is not None]
        if not got:
            continue
        cov = sum(1 for tm in raw[ck] if tm is not None and math.isfinite(tm)) / n
        gm = geomean(got)
        p90 = float(np.percentile(got, 90))
        wins = sum(1 for i, x in enumerate(row) if x is not None and best_on[i] is not None
                   and x <= best_on[i] * WIN_TOLERANCE)
        vd = []
        for x, o in zip(row, group):
            dt = o.default_time()
            if x is not None and dt:
                vd.append(x * o.optimum / dt)
        vs_default = geomean([max(v, 1e-12) for v in vd])
        scored.append((cov < min_coverage, gm, -wins, p90, ck,
                       Template(dict(cands[ck]), wins, cov, gm, p90, vs_default, n)))
    scored.sort(key=lambda s: s[:5])
    best = scored[0][5] if scored else None
    kept = [s[5] for s in scored if s[5].vs_default is not None and s[5].vs_default <= 1 - margin
            and s[5].coverage >= min_coverage][:keep]
    if kept:
        return kept, "", best.to_dict() if best else None
    if best is None:
        return [], "no candidate could be measured in these shapes", None
    if best.vs_default is None:
        return [], "the default config was never measured, so the margin cannot be checked", best.to_dict()
    return [], (f"best template is {best.vs_default:.3f}x the default's time; the margin needs "
                f"<= {1 - margin:.3f}x"), best.to_dict()


def geomean(xs: Sequence[float]) -> float | None:
    """Geometric mean of positive numbers; None for none."""
    return math.exp(statistics.fmean(math.log(x) for x in xs)) if xs else None


def harvest_datasets(items: Iterable[Any], **kw: Any) -> HarvestResult:
    """Shortcut: observations from datasets (objects or paths), then `harvest`."""
    return harvest(observations_from_datasets(items), **kw)
