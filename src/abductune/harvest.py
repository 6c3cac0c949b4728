"""`abductune harvest`: build or update the observed-heuristics database from measurements.

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
best template misses the margin gives no rule (the report says why).
"""
from __future__ import annotations

import json
import logging
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import click
import numpy as np

from .errors import AbductuneError, SpaceError
from .hardware import HardwareInfo
from .heuristics.classify import Classification, classify
from .heuristics.observed import ANY, Database, Rule, Template, family_key
from .heuristics.registry import InvalidSeed, realize, template_keys, template_scope
from .measurement import Measurement
from .problem import Problem
from .space import Choice, Config, Space

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


def expand_dataset_args(items: Iterable[str]) -> list[Path]:
    """Files, folders, and the keywords 'public' and 'bundled'."""
    from .datasets.bundled import bundled_datasets
    from .datasets.public import list_public_datasets

    out: list[Path] = []
    for item in items:
        if item == "public":
            out += list_public_datasets()
        elif item == "bundled":
            out += bundled_datasets()
        else:
            p = Path(item)
            if p.is_dir():
                out += sorted(q for q in p.rglob("*") if q.is_file() and q.name.endswith(
                    (".json", ".json.gz", ".jsonl", ".jsonl.gz")) and q.name.lower() != "manifest.json"
                    and q.name != "compile_times.json")
            elif p.exists():
                out.append(p)
            else:
                raise AbductuneError(f"dataset {item} does not exist (give a file, a folder, "
                                     "'public' or 'bundled')")
    return out


def observations_from_datasets(items: Iterable[Any]) -> list[Observation]:
    """Observations from Dataset objects or paths (any format `load_any` reads)."""
    from .datasets.format import Dataset
    from .datasets.public import load_any

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
        from . import kernels
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
    from .hardware import lookup

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
        hw = lookup(ctx.hardware, strict=False) if ctx.hardware else None
        if hw is None and ctx.hardware:
            hw = HardwareInfo(name=ctx.hardware, vendor="unknown")
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
                        source={"harvest": {"shapes": [o.name for o in group],
                                            "kernels": sorted({o.kernel for o in group}),
                                            "margin": margin}})
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
        gm = math.exp(statistics.fmean(math.log(x) for x in got))
        p90 = float(np.percentile(got, 90))
        wins = sum(1 for i, x in enumerate(row) if x is not None and best_on[i] is not None
                   and x <= best_on[i] * WIN_TOLERANCE)
        vd = []
        for x, o in zip(row, group):
            dt = o.default_time()
            if x is not None and dt:
                vd.append(x * o.optimum / dt)
        vs_default = math.exp(statistics.fmean(math.log(max(v, 1e-12)) for v in vd)) if vd else None
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


# ----------------------------------------------------------------------------- evaluation

@dataclass
class SeedCheck:
    """What the database seeds for one observation, against its optimum and default."""

    name: str
    kernel: str
    hardware: str
    kernel_class: str
    bucket: str
    fallback: str
    level: str  # "<hardware key>/<exact|bucket|fallback>" or "none"
    seed_ratio: float | None  # seed time / optimum (None: no seed, or seed not measured)
    default_ratio: float | None  # default time / optimum

    @property
    def kind(self) -> str:
        return self.level.rsplit("/", 1)[-1] if self.level != "none" else "none"

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.name, "kernel": self.kernel, "hardware": self.hardware,
                "kernel_class": self.kernel_class, "bucket": self.bucket, "fallback": self.fallback,
                "level": self.level, "seed_over_optimum": self.seed_ratio,
                "default_over_optimum": self.default_ratio}


def check_seed(db: Database, o: Observation, granularity: int = 2) -> SeedCheck:
    c = o.classification(granularity)
    hit = db.lookup(o.problem, o.space, o.hardware, base=o.default, cls=c)
    ratio = None
    if hit is not None:
        t = o.time_of(hit.config)
        if t is not None:
            ratio = (t if math.isfinite(t) else o.worst) / o.optimum
    dt = o.default_time()
    return SeedCheck(o.name, o.kernel, o.hardware.name if o.hardware else "", c.kernel_class,
                     c.bucket, c.fallback, hit.level if hit else "none", ratio,
                     dt / o.optimum if dt else None)


def coverage(db: Database, observations: Sequence[Observation],
             granularity: int = 2) -> list[SeedCheck]:
    """One SeedCheck per observation: which rule answers it and how good its seed is."""
    return [check_seed(db, o, granularity) for o in observations]


def same_shape(a: Observation, b: Observation, scope: str = "kernel") -> bool:
    """Whether b is the held-out shape of a: the same dims on the same hardware, of the same
    kernel (scope "kernel") or of any kernel (scope "class")."""
    hw = (a.hardware.name if a.hardware else "", b.hardware.name if b.hardware else "")
    if hw[0] != hw[1] or dict(a.problem.dims) != dict(b.problem.dims):
        return False
    return scope == "class" or a.kernel == b.kernel


def leave_one_out(observations: Sequence[Observation], *, scope: str = "kernel",
                  granularity: int = 2, **harvest_kw: Any) -> list[SeedCheck]:
    """For every observation S: harvest from the others of its class without S (and without
    every other observation of S's shape on S's hardware, for its kernel or, with scope
    "class", for any kernel), then look S up. Says how well the database generalises to a
    shape it has never seen."""
    if scope not in ("kernel", "class"):
        raise AbductuneError(f"leave-one-out scope must be 'kernel' or 'class', got {scope!r}")
    out = []
    for s in observations:
        cls = s.classification(granularity).kernel_class
        train = [o for o in observations if o is not s and not same_shape(s, o, scope)
                 and o.classification(granularity).kernel_class == cls]
        db = harvest(train, granularity=granularity, **harvest_kw).database
        out.append(check_seed(db, s, granularity))
    return out


def summarize(checks: Sequence[SeedCheck]) -> list[dict[str, Any]]:
    """Per (hardware, kernel): shapes, fractions answered by an exact/bucket/fallback rule,
    geomean seed / optimum over the shapes with a measured seed, and default / optimum."""
    groups: dict[tuple[str, str], list[SeedCheck]] = {}
    for c in checks:
        groups.setdefault((c.hardware, c.kernel), []).append(c)
    rows = []
    for (hw, k), cs in sorted(groups.items()):
        n = len(cs)
        seeds = [c.seed_ratio for c in cs if c.seed_ratio]
        dfl = [c.default_ratio for c in cs if c.default_ratio]
        rows.append({"hardware": hw, "kernel": k, "shapes": n,
                     "bucket_rule": sum(c.kind in ("bucket", "exact") for c in cs) / n,
                     "fallback_rule": sum(c.kind == "fallback" for c in cs) / n,
                     "no_rule": sum(c.kind == "none" for c in cs) / n,
                     "seed_over_optimum_geomean": _geomean(seeds),
                     "default_over_optimum_geomean": _geomean(dfl)})
    return rows


def _geomean(xs: Sequence[float]) -> float | None:
    return math.exp(statistics.fmean(math.log(x) for x in xs)) if xs else None


# ----------------------------------------------------------------------------- CLI

def _fmt(x: float | None, nd: int = 3) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


@click.command(name="harvest")
@click.argument("datasets", nargs=-1)
@click.option("--from-store", "from_store", is_flag=True,
              help="Harvest the measurements in the store as well.")
@click.option("--store", "store_path", type=click.Path(dir_okay=False), default=None,
              help="Store file (default: $ABDUCTUNE_STORE or the user cache).")
@click.option("--out", "out", type=click.Path(), default=None,
              help="Database to build or update: a .json file, or a folder (one file per "
                   "hardware). Rules already there stay unless a harvested rule has their key.")
@click.option("--replace", is_flag=True, help="Start from an empty database instead of updating --out.")
@click.option("--margin", type=float, default=0.05, show_default=True,
              help="Keep a template only when it alone is at least this much faster than the "
                   "space's default config (0.05: at most 0.95x the default's time).")
@click.option("--top", type=int, default=8, show_default=True,
              help="Candidate templates: the fastest N configs of each shape.")
@click.option("--keep", type=int, default=3, show_default=True, help="Templates kept per rule.")
@click.option("--granularity", type=int, default=2, show_default=True,
              help="Shape buckets: dims rounded up to powers of 2**granularity.")
@click.option("--levels", default="name,family,any", show_default=True,
              help="Hardware levels to write rules for: the GPU's name, its family, any GPU.")
@click.option("--exact", is_flag=True, help="Also write one exact-dims rule per shape (for --vllm-export).")
@click.option("--vllm-import", "vllm_import", multiple=True, type=click.Path(exists=True),
              help="vLLM fused-MoE config files or folders to import as rules (repeatable).")
@click.option("--vllm-export", "vllm_export", type=click.Path(file_okay=False), default=None,
              help="Write the database's exact E/N/M rules as vLLM config files into this folder.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None,
              help="Write the coverage report to this JSON file.")
def harvest_cmd(datasets: tuple[str, ...], from_store: bool, store_path: str | None, out: str | None,
                replace: bool, margin: float, top: int, keep: int, granularity: int, levels: str,
                exact: bool, vllm_import: tuple[str, ...], vllm_export: str | None,
                json_out: str | None) -> None:
    """Build or update the observed-heuristics database from recorded datasets (files,
    folders, 'public', 'bundled'), the store, and vLLM config files; report coverage."""
    from rich.console import Console
    from rich.table import Table

    from .heuristics.vllm import export_vllm, import_vllm

    console = Console()
    if not datasets and not from_store and not vllm_import:
        raise click.UsageError("give datasets, --from-store, or --vllm-import")
    db = Database()
    if out and not replace and Path(out).exists():
        db = Database.load(out)
        console.print(f"updating {out}: {len(db)} rule(s) there")
    obs: list[Observation] = []
    if datasets:
        paths = expand_dataset_args(datasets)
        with console.status(f"reading {len(paths)} dataset(s)"):
            obs += observations_from_datasets(paths)
    if from_store:
        from .store import Store
        with Store(store_path) as store:
            obs += observations_from_store(store)
    n_before = len(db)
    result = None
    if obs:
        with console.status(f"harvesting {len(obs)} observation(s)"):
            result = harvest(obs, margin=margin, top=top, keep=keep, granularity=granularity,
                             levels=_split(levels), exact=exact, database=db)
    if vllm_import:
        import_vllm(vllm_import, db)
    checks = coverage(db, obs, granularity) if obs else []
    if result is not None:
        dropped = [g for g in result.groups if not g.kept]
        console.print(f"{len(obs)} observation(s): {result.rules_added} rule(s) kept, "
                      f"{len(dropped)} group(s) dropped (margin {margin:.0%})")
        for g in dropped[:20]:
            k = g.key
            console.print(f"  dropped {k['hardware']} {k['kernel_class']} {k['bucket']} "
                          f"{k['dtype_family']}: {g.reason}")
        if len(dropped) > 20:
            console.print(f"  ... and {len(dropped) - 20} more")
    if checks:
        table = Table(title="coverage (in-sample: what the database seeds for each recorded shape)")
        for col in ("hardware", "kernel", "shapes", "bucket rule", "fallback only", "no rule",
                    "seed/opt", "default/opt"):
            table.add_column(col, justify="right" if col not in ("hardware", "kernel") else "left")
        for r in summarize(checks):
            table.add_row(r["hardware"], r["kernel"], str(r["shapes"]), f"{r['bucket_rule']:.0%}",
                          f"{r['fallback_rule']:.0%}", f"{r['no_rule']:.0%}",
                          _fmt(r["seed_over_optimum_geomean"]), _fmt(r["default_over_optimum_geomean"]))
        console.print(table)
    console.print(f"database: {len(db)} rule(s) ({len(db) - n_before:+d})")
    if out:
        for p in db.save(out):
            console.print(f"wrote {p}")
    else:
        console.print("nothing written (give --out to save the database)")
    if vllm_export:
        for p in export_vllm(db, vllm_export):
            console.print(f"wrote {p}")
    if json_out:
        Path(json_out).write_text(json.dumps({
            "rules": len(db), "margin": margin, "granularity": granularity,
            "coverage": [c.to_dict() for c in checks], "summary": summarize(checks),
            "groups": [{"key": g.key, "shapes": g.shapes, "kept": g.kept, "reason": g.reason,
                        "best": g.best} for g in (result.groups if result else [])]},
            indent=1), encoding="utf-8")


def _split(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def harvest_datasets(items: Iterable[Any], **kw: Any) -> HarvestResult:
    """Shortcut: observations from datasets (objects or paths), then `harvest`."""
    return harvest(observations_from_datasets(items), **kw)


__all__ = ["Observation", "HarvestResult", "SeedCheck", "harvest", "harvest_cmd", "harvest_datasets",
           "observations_from_datasets", "observations_from_store", "coverage", "leave_one_out",
           "summarize", "check_seed", "expand_dataset_args"]
