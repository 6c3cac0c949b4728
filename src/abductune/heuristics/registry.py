"""Seed heuristics: the `AutotunerHeuristic` contract, a registry per backend, and the one
entry point tuning code calls, `seed_configs`.

A heuristic looks at a problem (and the hardware) and proposes at most one *partial* config,
addressing parameters by role ("@tile:M", "@warps") or by name. Every proposal goes through
`realize`: merged onto the space's default, each value moved to its parameter's nearest
allowed value, tiles capped at the next power of two of the dim they cover (unless the space
allows nothing that small), and, if the result breaks a constraint, replaced by the nearest
valid config that keeps the proposal's own values where it can. So a seed is always a full,
valid config; seeds are de-duplicated, observed-database template first, then registry
heuristics in registration order.

A heuristic that raises, or proposes something that cannot be read (an unknown parameter
name, a value of the wrong kind), is skipped with a logged reason; tuning never fails
because of one. `SeedReport.fired` says what each one did ("seed", "noop", "ineligible",
"error", "invalid") and is JSON-ready for `Store.start_run(..., heuristics=report.fired)`.
"""
from __future__ import annotations

import logging
import math
import weakref
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..errors import AbductuneError, SpaceError
from ..hardware import HardwareInfo, lookup, matches
from ..problem import Problem
from ..space import Config, Param, Space
from .classify import Classification, classify, next_pow2, tile_dim

log = logging.getLogger(__name__)

STATUSES = ("seed", "noop", "ineligible", "error", "invalid")


class InvalidSeed(AbductuneError):
    """A proposed config that cannot be read against the space."""


# ----------------------------------------------------------------------------- hardware

def as_hardware(hw: HardwareInfo | str | None) -> HardwareInfo | None:
    """A HardwareInfo from itself, a known name / driver device name, or None."""
    if hw is None or isinstance(hw, HardwareInfo):
        return hw
    found = lookup(str(hw), strict=False)
    return found if found is not None else HardwareInfo(name=str(hw), vendor="unknown")


def hardware_matches(hw: HardwareInfo | str | None, *, vendor: str | None = None,
                     min_cc: tuple[int, int] | None = None, max_cc: tuple[int, int] | None = None,
                     family: str | None = None, name_pattern: str | None = None) -> bool:
    """`hardware.matches` that accepts a name and answers False for unknown hardware when any
    criterion is given (True when none is)."""
    crit = (vendor, min_cc, max_cc, family, name_pattern)
    h = as_hardware(hw)
    if h is None:
        return all(c is None for c in crit)
    return matches(h, vendor=vendor, min_cc=min_cc, max_cc=max_cc, family=family,
                   name_pattern=name_pattern)


def is_nvidia(hw: HardwareInfo | str | None) -> bool:
    return hardware_matches(hw, vendor="nvidia")


def is_amd(hw: HardwareInfo | str | None) -> bool:
    return hardware_matches(hw, vendor="amd")


def is_hopper(hw: HardwareInfo | str | None) -> bool:
    """NVIDIA sm_90 (H100, H200, GH200)."""
    return hardware_matches(hw, vendor="nvidia", min_cc=(9, 0), max_cc=(9, 9))


def sm_count(hw: HardwareInfo | None, default: int = 108) -> int:
    return hw.sms if hw is not None and hw.sms else default


# ----------------------------------------------------------------------------- heuristics

class AutotunerHeuristic:
    """Base class. Set `name` (unique within a backend) and `backend`, and override
    `get_seed_config`. The default `is_eligible` checks the class attributes
    `kernel_classes` (a tuple of classes, empty = any) and the hardware criteria `vendor`,
    `min_cc`, `max_cc`, `family`, `name_pattern` (unset = any; with any set, unknown
    hardware is ineligible)."""

    name: str = ""
    backend: str = "triton"
    kernel_classes: tuple[str, ...] = ()
    vendor: str | None = None
    min_cc: tuple[int, int] | None = None
    max_cc: tuple[int, int] | None = None
    family: str | None = None
    name_pattern: str | None = None

    def is_eligible(self, problem: Problem, hardware: HardwareInfo | None) -> bool:
        if self.kernel_classes and classify(problem).kernel_class not in self.kernel_classes:
            return False
        return hardware_matches(hardware, vendor=self.vendor, min_cc=self.min_cc,
                                max_cc=self.max_cc, family=self.family,
                                name_pattern=self.name_pattern)

    def get_seed_config(self, problem: Problem, hardware: HardwareInfo | None,
                        space: Space) -> Mapping[str, Any] | None:
        """A partial config (keys: parameter names or "@role"), or None for no opinion."""
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.backend}:{self.name}>"


class HeuristicRegistry:
    """Heuristics per backend, in registration order (earlier ones seed first)."""

    def __init__(self) -> None:
        self._by_backend: dict[str, list[AutotunerHeuristic]] = {}

    def register(self, heuristic: AutotunerHeuristic | type, *, replace: bool = False) -> Any:
        """Add a heuristic (an instance, or a class made with no arguments). A second one of
        the same name and backend is refused unless `replace`. Returns what was passed, so
        it works as a class decorator."""
        h = heuristic() if isinstance(heuristic, type) else heuristic
        if not isinstance(h, AutotunerHeuristic):
            raise AbductuneError(f"{heuristic!r} is not an AutotunerHeuristic")
        if not h.name:
            raise AbductuneError(f"heuristic {type(h).__name__} has no name")
        lst = self._by_backend.setdefault(h.backend, [])
        for i, old in enumerate(lst):
            if old.name == h.name:
                if not replace:
                    raise AbductuneError(f"a heuristic named {h.name!r} is already registered "
                                         f"for backend {h.backend!r}; pass replace=True")
                lst[i] = h
                return heuristic
        lst.append(h)
        return heuristic

    def unregister(self, name: str, backend: str = "triton") -> bool:
        lst = self._by_backend.get(backend, [])
        n = len(lst)
        lst[:] = [h for h in lst if h.name != name]
        return len(lst) < n

    def heuristics(self, backend: str = "triton") -> list[AutotunerHeuristic]:
        return list(self._by_backend.get(backend, []))

    def get(self, name: str, backend: str = "triton") -> AutotunerHeuristic | None:
        return next((h for h in self._by_backend.get(backend, []) if h.name == name), None)

    def backends(self) -> list[str]:
        return sorted(self._by_backend)

    def copy(self) -> "HeuristicRegistry":
        r = HeuristicRegistry()
        r._by_backend = {b: list(v) for b, v in self._by_backend.items()}
        return r


REGISTRY = HeuristicRegistry()


def register_heuristic(heuristic: Any = None, *, registry: HeuristicRegistry | None = None,
                       replace: bool = False) -> Any:
    """Register into the global registry; usable as `@register_heuristic` on a class."""
    reg = registry or REGISTRY
    if heuristic is None:
        return lambda h: reg.register(h, replace=replace)
    return reg.register(heuristic, replace=replace)


# ----------------------------------------------------------------------------- merge / clamp

def resolve_keys(space: Space, partial: Mapping[str, Any]) -> tuple[dict[str, Any], list[str], list[str]]:
    """(values by parameter name, role keys the space lacks or holds twice, unknown names).
    Keys are parameter names or "@role"; a name given explicitly wins over its role."""
    out: dict[str, Any] = {}
    dropped: list[str] = []
    unknown: list[str] = []
    items = list(partial.items())
    for k, v in items:  # roles first, so explicit names override them
        if isinstance(k, str) and k.startswith("@"):
            ps = [p for p in space.params if p.role == k[1:]]
            if len(ps) == 1:
                out[ps[0].name] = v
            else:
                dropped.append(k)
    for k, v in items:
        if isinstance(k, str) and k.startswith("@"):
            continue
        if isinstance(k, str) and k in space.names:
            out[k] = v
        else:
            unknown.append(str(k))
    return out, dropped, unknown


def template_keys(space: Space, config: Mapping[str, Any]) -> dict[str, Any]:
    """A full config re-keyed for transfer: "@role" where the parameter's role is unique in
    the space, the parameter name otherwise."""
    counts: dict[str, int] = {}
    for p in space.params:
        if p.role:
            counts[p.role] = counts.get(p.role, 0) + 1
    out = {}
    for p in space.params:
        if p.name in config:
            key = f"@{p.role}" if p.role and counts[p.role] == 1 else p.name
            out[key] = config[p.name]
    return out


def template_scope(space: Space) -> str:
    """"" when every parameter has a role of its own (templates transfer between kernels
    by role), else "names:" + the sorted parameter names (templates bind to this set)."""
    roles = [p.role for p in space.params]
    if all(roles) and len(set(roles)) == len(roles):
        return ""
    return "names:" + ",".join(sorted(space.names))


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _coerce(p: Param, v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if p.contains(v):
        return v
    numeric = p.ordered and all(_is_number(x) for x in p.values)
    if numeric and _is_number(v) and math.isfinite(float(v)):
        return p.clamp(v)
    raise InvalidSeed(f"value {v!r} for parameter {p.name!r} is not one of {list(p.values)}")


def problem_caps(space: Space, cls: Classification | None) -> dict[str, Any]:
    """Largest allowed value of each tile parameter: the largest value not above the next
    power of two of its dim, or the smallest value when the space allows none that small."""
    if cls is None:
        return {}
    caps: dict[str, Any] = {}
    for p in space.params:
        d = tile_dim(p.role, cls)
        if d is None or d < 1 or not p.ordered or not all(_is_number(x) for x in p.values):
            continue
        cap = next_pow2(d)
        allowed = [v for v in p.values if v <= cap]
        caps[p.name] = max(allowed) if allowed else min(p.values)
    return caps


_MATRICES: "weakref.WeakKeyDictionary[Space, tuple[list[Config], np.ndarray, np.ndarray]]" = \
    weakref.WeakKeyDictionary()


def _matrix(space: Space) -> tuple[list[Config], np.ndarray, np.ndarray]:
    """(valid configs, their value indices (n, P), ordered mask (P,)) cached per space."""
    got = _MATRICES.get(space)
    if got is None:
        valid = space.valid_configs()
        idx = np.array([[p.index(c[p.name]) for p in space.params] for c in valid], dtype=np.int32)
        ordered = np.array([p.ordered for p in space.params], dtype=bool)
        got = (valid, idx, ordered)
        _MATRICES[space] = got
    return got


def nearest_valid(space: Space, target: Mapping[str, Any], prefer: Iterable[str] = (),
                  caps: Mapping[str, Any] | None = None) -> Config:
    """The valid config closest to `target` (index distance for ordered parameters, 0/1
    otherwise; keys in `prefer` weigh 4x), among those within `caps` when any is."""
    valid, idx, ordered = _matrix(space)
    prefer = set(prefer)
    t = np.array([p.index(target[p.name]) for p in space.params], dtype=np.int32)
    w = np.array([4.0 if p.name in prefer else 1.0 for p in space.params])
    diff = np.where(ordered[None, :], np.abs(idx - t[None, :]), (idx != t[None, :]).astype(np.int32))
    dist = diff @ w
    if caps:
        ok = np.ones(len(valid), dtype=bool)
        for j, p in enumerate(space.params):
            if p.name in caps:
                ok &= idx[:, j] <= p.index(caps[p.name])
        if ok.any():
            dist = np.where(ok, dist, np.inf)
    return dict(valid[int(np.argmin(dist))])


def realize(space: Space, partial: Mapping[str, Any], problem: Problem | None = None, *,
            base: Mapping[str, Any] | None = None, cls: Classification | None = None) -> Config:
    """A full valid config from a partial one: merged onto `base` (the space default when
    None or invalid), clamped into the domains and under the problem's tile caps, then the
    nearest valid config when constraints still reject it. Raises InvalidSeed when a key is
    an unknown parameter name or a value cannot be read."""
    if not isinstance(partial, Mapping):
        raise InvalidSeed(f"expected a dict of parameter values, got {type(partial).__name__}")
    values, _, unknown = resolve_keys(space, partial)
    if unknown:
        raise InvalidSeed(f"unknown parameter(s) {', '.join(unknown)} (parameters: "
                          f"{', '.join(space.names)}; roles: "
                          f"{', '.join('@' + r for r in space.roles())})")
    values = {n: _coerce(space[n], v) for n, v in values.items()}
    b = dict(base) if base is not None else None
    if b is None or not space.is_valid(b):
        b = space.default()
    merged = {**b, **values}
    if cls is None and problem is not None:
        cls = classify(problem, space)
    caps = problem_caps(space, cls)
    for n, cap in caps.items():
        if merged[n] > cap:
            merged[n] = cap
    if space.is_valid(merged):
        return merged
    return nearest_valid(space, merged, prefer=values.keys(), caps=caps)


# ----------------------------------------------------------------------------- entry point

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
                 limit: int | None = None, use_registry: bool = True) -> SeedReport:
    """Seed configs for one tuning run, best bets first.

    `database`: None for the packaged observed database, False for none, a `Database`, or a
    path to a JSON file or folder. `registry`: the heuristics (default: the global one);
    `use_registry=False` leaves them out. `base`: what partial configs are merged onto (the
    space default when None). `limit`: at most that many seeds."""
    from .observed import Database, load_database  # late: observed imports this module

    hw = as_hardware(hardware) if hardware is not None else problem.hardware
    try:
        cls = classify(problem, space)
    except Exception as e:  # noqa: BLE001 - a classifier bug must not stop tuning
        log.warning("classifying %s failed: %s", problem.kernel, e)
        cls = Classification("other")
    report = SeedReport(classification=cls.to_dict())
    seen: dict[tuple, str] = {}

    def add(name: str, source: str, cfg: Config, reason: str = "", **extra: Any) -> None:
        k = space.key(cfg)
        cfg = _jsonable(cfg)
        if k in seen:
            why = f"same config as {seen[k]}" + (f"; {reason}" if reason else "")
            report.fired.append(_entry(name, source, "seed", why, cfg, duplicate_of=seen[k], **extra))
            return
        seen[k] = name
        report.configs.append(cfg)
        report.fired.append(_entry(name, source, "seed", reason, cfg, **extra))

    # 1. the observed database
    if database is not False:
        try:
            db = database if isinstance(database, Database) else load_database(database)
            hit = db.lookup(problem, space, hw, base=base, cls=cls)
            if hit is None:
                report.fired.append(_entry("observed", "observed", "noop",
                                           f"no rule for {cls.kernel_class} {cls.bucket} "
                                           f"({cls.fallback}, {cls.dtype_family}) on "
                                           f"{hw.name if hw else 'unknown hardware'}"))
            else:
                add("observed", "observed", hit.config, reason=hit.describe(), rule=hit.rule.key_dict(),
                    level=hit.level, template=hit.template.to_dict())
        except Exception as e:  # noqa: BLE001 - contained
            log.warning("observed-heuristics lookup failed for %s: %s: %s", problem.kernel,
                        type(e).__name__, e)
            report.fired.append(_entry("observed", "observed", "error", f"{type(e).__name__}: {e}"))

    # 2. registry heuristics
    if use_registry:
        for h in (registry or REGISTRY).heuristics(backend):
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
    if limit is not None:
        report.configs = report.configs[:max(0, int(limit))]
    return report


def _safe_partial(partial: Any) -> Any:
    if isinstance(partial, Mapping):
        return {str(k): (v.item() if isinstance(v, np.generic) else
                         v if isinstance(v, (int, float, str, bool, type(None), list, tuple)) else repr(v))
                for k, v in partial.items()}
    return repr(partial)


def fired_names(fired: Sequence[Mapping[str, Any]]) -> list[str]:
    """`name:status` strings, for logs and one-line summaries."""
    return [f"{f['name']}:{f['status']}" for f in fired]
