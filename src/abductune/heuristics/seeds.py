"""`seed_configs`: the one entry point tuning code calls for seeds, and the `SeedReport`.

Seeds come from the observed database first (its best template for the problem's class,
shape bucket and dtype family), then from the registry heuristics in registration order.
Every proposal goes through `realize`, so a seed is always a full, valid config; seeds are
de-duplicated. A heuristic that raises, or proposes something that cannot be read (an
unknown parameter name, a value of the wrong kind), is skipped with a logged reason; tuning
never fails because of one. `SeedReport.fired` says what each source did ("seed", "noop",
"ineligible", "error", "invalid", and "excluded" for the observed rules left out under
leave-one-shape-out) and is JSON-ready for the run journal.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..classify import Classification, classify
from ..errors import InvalidSeed, SpaceError
from ..hardware import HardwareInfo, as_hardware
from ..problem import Problem
from ..space import Config, Space
from ..theory.resources import fit, trouble
from .base import REGISTRY, HeuristicRegistry
from .observed import Database, Exclude, load_database
from .realize import realize

log = logging.getLogger(__name__)

STATUSES = ("seed", "noop", "ineligible", "error", "invalid", "excluded")


@dataclass
class SeedReport:
    """Seeds in priority order and what every source did (JSON-ready)."""

    configs: list[Config] = field(default_factory=list)
    fired: list[dict[str, Any]] = field(default_factory=list)
    classification: dict[str, Any] = field(default_factory=dict)

    def names(self) -> list[str]:
        """Sources that contributed a seed of their own (duplicates left out)."""
        return [f["name"] for f in self.fired if f["status"] == "seed" and not f.get("duplicate_of")]

    def to_json(self) -> list[dict[str, Any]]:
        return [dict(f) for f in self.fired]

    def __len__(self) -> int:
        return len(self.configs)


def _entry(name: str, source: str, status: str, reason: str = "",
           config: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name, "source": source, "status": status, "reason": reason,
                         "config": dict(config) if config is not None else None}
    d.update({k: v for k, v in extra.items() if v is not None})
    return d


def _jsonable(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in cfg.items()}


def seed_configs(problem: Problem, space: Space, hardware: HardwareInfo | str | None = None,
                 backend: str = "triton", database: Any = None, *,
                 registry: HeuristicRegistry | None = None, base: Mapping[str, Any] | None = None,
                 limit: int | None = None, use_registry: bool = True,
                 exclude: Exclude = None) -> SeedReport:
    """Seed configs for one tuning run, best bets first.

    `database`: None for the packaged observed database, False for none, a `Database`, or a
    path to a JSON file or folder. `exclude`: Problems (or `Problem.key()`s) whose own
    observed rules must not seed this run (leave-one-shape-out: pass the replayed dataset's
    problem); the report says how many rules that left out. `registry`: the heuristics
    (default: the global one); `use_registry=False` leaves them out. `base`: what partial
    configs are merged onto (the space default when None). `limit`: at most that many seeds."""
    hw = as_hardware(hardware) if hardware is not None else problem.hardware
    try:
        cls = classify(problem, space)
    except Exception as e:  # noqa: BLE001 - a classifier bug must not stop tuning
        log.warning("classifying %s failed: %s", problem.kernel, e)
        cls = Classification("other")
    report = SeedReport(classification=cls.to_dict())
    seen: dict[tuple, str] = {}

    def add(name: str, source: str, cfg: Config, reason: str = "", **extra: Any) -> None:
        # feasible by construction: a seed the resource model says cannot launch (or will
        # spill badly) is moved the least way into what fits, or dropped with its reason
        fitted, changes = fit(problem, space, cfg)
        if fitted is None:
            report.fired.append(_entry(name, source, "invalid", "resource model: "
                                       + str(trouble(problem, space, cfg)), cfg, **extra))
            return
        if changes:
            reason = (f"{reason}; " if reason else "") + "resource model: " + ", ".join(changes)
            cfg = fitted
        k = space.key(cfg)
        cfg = _jsonable(cfg)
        if k in seen:
            why = f"same config as {seen[k]}" + (f"; {reason}" if reason else "")
            report.fired.append(_entry(name, source, "seed", why, cfg, duplicate_of=seen[k], **extra))
            return
        seen[k] = name
        report.configs.append(cfg)
        report.fired.append(_entry(name, source, "seed", reason, cfg, **extra))

    if database is not False:
        _observed(report, add, database, problem, space, hw, cls, base, exclude)
    if use_registry:
        _registry(report, add, registry or REGISTRY, backend, problem, space, hw, cls, base)
    if limit is not None:
        report.configs = report.configs[:max(0, int(limit))]
    return report


def _observed(report: SeedReport, add: Any, database: Any, problem: Problem, space: Space,
              hw: HardwareInfo | None, cls: Classification, base: Mapping[str, Any] | None,
              exclude: Exclude) -> None:
    try:
        db = database if isinstance(database, Database) else load_database(database)
        if exclude is not None:
            left = db.left_out(problem, space, hw, cls, exclude=exclude)
            report.fired.append(_entry(
                "observed", "observed", "excluded",
                f"left out {len(left)} rule(s) learned from "
                + ("this kernel (leave-one-kernel-out)" if getattr(exclude, "level", "shape") == "kernel"
                   else "this shape (leave-one-shape-out)"),
                left_out=[r.key_dict() for r in left]))
        hit = db.lookup(problem, space, hw, base=base, cls=cls, exclude=exclude)
        if hit is None:
            report.fired.append(_entry("observed", "observed", "noop",
                                       f"no rule for {cls.kernel_class} {cls.bucket} "
                                       f"({cls.fallback}, {cls.dtype_family}) on "
                                       f"{hw.name if hw else 'unknown hardware'}"))
        else:
            add("observed", "observed", hit.config, reason=hit.describe(), rule=hit.rule.key_dict(),
                level=hit.level, template=hit.template.to_dict(),
                learned_from=[f"{o.kernel}/{o.shape}" for o in hit.rule.learned_from] or None)
    except Exception as e:  # noqa: BLE001 - contained
        log.warning("observed-heuristics lookup failed for %s: %s: %s", problem.kernel,
                    type(e).__name__, e)
        report.fired.append(_entry("observed", "observed", "error", f"{type(e).__name__}: {e}"))


def _registry(report: SeedReport, add: Any, registry: HeuristicRegistry, backend: str,
              problem: Problem, space: Space, hw: HardwareInfo | None, cls: Classification,
              base: Mapping[str, Any] | None) -> None:
    for h in registry.heuristics(backend):
        name = h.name
        try:
            if not h.is_eligible(problem, hw):
                report.fired.append(_entry(name, "registry", "ineligible"))
                continue
            partial = h.get_seed_config(problem, hw, space)
        except Exception as e:  # noqa: BLE001 - contained and recorded
            log.warning("heuristic %s raised %s: %s; skipped", name, type(e).__name__, e)
            report.fired.append(_entry(name, "registry", "error", f"{type(e).__name__}: {e}"))
            continue
        if partial is None or (isinstance(partial, Mapping) and not partial):
            report.fired.append(_entry(name, "registry", "noop", "no opinion for this problem"))
            continue
        try:
            cfg = realize(space, partial, problem, base=base, cls=cls)
        except (InvalidSeed, SpaceError, TypeError, ValueError, KeyError) as e:
            log.warning("heuristic %s proposed an invalid config %r: %s; skipped", name,
                        partial, e)
            report.fired.append(_entry(name, "registry", "invalid", str(e),
                                       partial=_safe_partial(partial)))
            continue
        add(name, "registry", cfg, partial=_safe_partial(partial))


def _safe_partial(partial: Any) -> Any:
    if isinstance(partial, Mapping):
        return {str(k): (v.item() if isinstance(v, np.generic) else
                         v if isinstance(v, (int, float, str, bool, type(None), list, tuple)) else repr(v))
                for k, v in partial.items()}
    return repr(partial)


def fired_names(fired: Sequence[Mapping[str, Any]]) -> list[str]:
    """`name:status` strings, for logs and one-line summaries."""
    return [f"{f['name']}:{f['status']}" for f in fired]
