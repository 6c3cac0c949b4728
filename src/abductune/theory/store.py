"""The theory store: what tuning confirmed, kept as parametric rules over parameter roles, so
a new shape (or a new kernel of the same class) gets a good config with no measurement.

A *rule* is keyed like the observed database (`heuristics.observed`): hardware level (the
GPU's name, its family, any GPU), kernel class, regime (the class's fallback category, e.g.
matmul "small_m" for M <= 64, or "all"), dtype family. Its body gives each role a *form*:

- `const v`: the role takes value v (tile roles are still capped at the dim's next power of
  two when the problem is smaller: a 128 tile on M = 16 becomes 16, never 128 of padding);
- `fit`: the tile covers its whole dim (next power of two of the dim), as far as the space
  allows: "one block per row", "one M tile for decode";
- `grid t`: this tile is chosen so the grid launches about t programs per SM on the target
  GPU: parallelism, not a size, is what transfers between shapes and GPUs;
- `par (v, t)`: the tile is v, halved (largest grid tile first) until the grid launches at
  least t programs per SM: big tiles where there is work enough, smaller ones where a big
  tile would leave SMs idle (few tiles, long K);
- `per e` (warps): as many warps as give each thread about e tile elements (the product of
  the tile sizes over the block's threads): what a thread holds in registers is what
  transfers, so a rule learned on big tiles does not put 16 warps on a tile a smaller shape
  shrank to 1024 elements.

`learn(observations)` builds rules from measured problems: candidates are the top configs of
every problem of a group re-expressed in these forms, each instantiated on every problem of
the group and scored by the geomean of its time over each problem's optimum; a greedy pass
then swaps single roles' forms while that improves the score. Support counts the problems
where the rule's config is within `SUPPORT_TOLERANCE` of the optimum, refute the rest, and
the rule lists where it was learned from (provenance), so a replay leaves its own shape out.

`predict(problem, space)` walks the lookup order (GPU name, family, any; regime, then "all";
dtype family, then any) and instantiates the first rule over the target space's roles, with
a confidence and whether it extrapolates (dims outside the range it saw, another GPU).
"""
from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..classify import Classification, classify, next_pow2, tile_dim, tile_dim_name
from ..errors import AbductuneError, InvalidSeed, SpaceError
from ..hardware import HardwareInfo
from ..heuristics.harvest import geomean
from ..heuristics.observed import ANY, hardware_keys
from ..problem import Holdout, Problem, as_holdout, kernel_family
from ..space import Config, Space
from . import resources

log = logging.getLogger(__name__)

FORMAT = "abductune-theories"
VERSION = 1
DATA_DIR = Path(__file__).parent / "data"
ALL = "all"
SUPPORT_TOLERANCE = 1.05  # a prediction within 5% of the optimum supports its rule
# confidence kept by a rule applied to a kernel it was never confirmed on (as for a rule learned
# on another GPU family, `TheoryBook.predictions`): a guess of how much less it is to be believed
UNSEEN_KERNEL_FACTOR = 0.6
MISSING_PENALTY = 3.0  # a config not measured for a problem counts as 3x its optimum
TOP = 4  # candidate templates from each problem's fastest configs
MIN_GROUP = 2  # a regime needs two problems to say anything beyond "all"
UNREAD_WEIGHT = 0.25  # extrapolating a dim no form of the rule reads counts a quarter octave per octave


def _fill_floor() -> float:
    from .library import WAVE_EFF_MIN

    return WAVE_EFF_MIN


FILL_FLOOR = _fill_floor()  # programs per SM a parallelism floor asks for


@dataclass(frozen=True)
class Form:
    """How one role's value is chosen: kind const (value), fit, or grid (programs per SM)."""

    kind: str
    value: Any = None

    def to_json(self) -> list[Any]:
        return [self.kind, self.value]

    @classmethod
    def from_json(cls, v: Sequence[Any]) -> "Form":
        kind, value = v[0], v[1]
        return cls(str(kind), tuple(value) if isinstance(value, list) else value)

    def describe(self, role: str) -> str:
        if self.kind == "fit":
            return f"{role} covers its dim"
        if self.kind == "grid":
            return f"{role} sized for ~{self.value:g} programs/SM"
        if self.kind == "par":
            return f"{role}={self.value[0]}, smaller until >= {self.value[1]:g} programs/SM"
        if self.kind == "per":
            return f"{role} for ~{self.value:g} tile elements per thread"
        return f"{role}={self.value}"


@dataclass
class TheoryRule:
    hardware: str  # GPU name, "family:vendor/family" or "*"
    kernel_class: str
    regime: str  # the class's fallback category, or "all"
    dtype_family: str
    forms: dict[str, Form]
    geomean: float = 1.0  # predicted / optimum over the problems it was learned from
    worst: float = 1.0
    support: int = 0
    refute: int = 0
    learned_from: list[dict[str, Any]] = field(default_factory=list)  # {key, kernel, dims, hardware}
    dims_range: dict[str, list[int]] = field(default_factory=dict)  # canonical dim -> [min, max]

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.hardware, self.kernel_class, self.regime, self.dtype_family)

    @property
    def confidence(self) -> float:
        """Share of the problems it was learned from that it predicted within tolerance (Laplace)."""
        return (self.support + 1) / (self.support + self.refute + 2)

    def describe(self) -> str:
        return "; ".join(f.describe(r) for r, f in sorted(self.forms.items()))

    def kernels(self) -> set[str]:
        """The kernels (by family: dtype suffix dropped) this rule was confirmed on."""
        return {kernel_family(str(o.get("kernel", ""))) for o in self.learned_from if o.get("kernel")}

    def learned_from_problem(self, problem: "Problem | Holdout") -> bool:
        """Whether a dataset this rule was learned from is one the holdout (a Problem: its
        shape) must not know."""
        h = as_holdout(problem)
        assert h is not None
        return any(h.covers(str(o.get("kernel", "")), o.get("dims"), str(o.get("key", "")),
                            str(o.get("source_hash", ""))) for o in self.learned_from)

    def to_dict(self) -> dict[str, Any]:
        return {"hardware": self.hardware, "kernel_class": self.kernel_class, "regime": self.regime,
                "dtype_family": self.dtype_family, "forms": {r: f.to_json() for r, f in self.forms.items()},
                "geomean": round(self.geomean, 4), "worst": round(self.worst, 4), "support": self.support,
                "refute": self.refute, "learned_from": self.learned_from, "dims_range": self.dims_range}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TheoryRule":
        return cls(d["hardware"], d["kernel_class"], d["regime"], d["dtype_family"],
                   {r: Form.from_json(v) for r, v in d["forms"].items()}, float(d.get("geomean", 1.0)),
                   float(d.get("worst", 1.0)), int(d.get("support", 0)), int(d.get("refute", 0)),
                   list(d.get("learned_from") or []), {k: list(v) for k, v in (d.get("dims_range") or {}).items()})


@dataclass(frozen=True)
class Prediction:
    config: Config
    rule: TheoryRule
    level: str  # which hardware level matched: name, family or any
    confidence: float
    extrapolates: bool
    reasons: tuple[str, ...]
    # what moved the rule's own config to the one served ("warpgroup MMA: BLOCK_M 32 -> 64",
    # "resource model: num_stages 4 -> 3"), in order; empty when served as the rule gave it
    repairs: tuple[str, ...] = ()

    def describe(self) -> str:
        r = self.rule
        return (f"{r.kernel_class}/{r.regime}/{r.dtype_family} on {r.hardware} ({self.level}): {r.describe()}; "
                f"confidence {self.confidence:.2f} (support {r.support}, refute {r.refute})"
                + ("; extrapolates: " + ", ".join(self.reasons) if self.extrapolates else "")
                + ("; repaired: " + ", ".join(self.repairs) if self.repairs else ""))


# ----------------------------------------------------------------------------- instantiation

def _role_params(space: Space) -> dict[str, Any]:
    """role -> param, for roles held by exactly one parameter (the portable ones)."""
    counts: dict[str, int] = {}
    for p in space.params:
        if p.role:
            counts[p.role] = counts.get(p.role, 0) + 1
    return {p.role: p for p in space.params if p.role and counts[p.role] == 1}


def _nearest_value(param: Any, want: float) -> Any:
    nums = [v for v in param.values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not nums:
        return param.values[0]
    return min(nums, key=lambda v: (abs(math.log2(max(v, 1e-9)) - math.log2(max(want, 1e-9))), -v))


def _const_value(param: Any, value: Any) -> Any:
    """A rule's constant for `param`: itself when the space has it, else the nearest number
    it has (the first value for a non-numeric one)."""
    if value in param.values:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _nearest_value(param, float(value))
    return param.values[0]


def instantiate(rule_forms: Mapping[str, Form], problem: Problem, space: Space,
                cls: Classification | None = None) -> Config:
    """The config these forms give on (problem, space): roles the space lacks are skipped,
    values realized into the space (tile caps, nearest valid config)."""
    from ..heuristics.realize import realize
    from .diagnose import grid_tiles

    cls = cls or classify(problem, space)
    params = _role_params(space)
    partial: dict[str, Any] = {}
    grid: list[tuple[str, float]] = []
    for role, form in rule_forms.items():
        p = params.get(role)
        if p is None:
            continue
        if form.kind == "const":
            partial[p.name] = _const_value(p, form.value)
        elif form.kind == "fit":
            d = tile_dim(role, cls)
            partial[p.name] = _nearest_value(p, next_pow2(d)) if d else p.default_value()
        elif form.kind == "grid":
            grid.append((role, float(form.value)))
        elif form.kind == "par":
            v = form.value[0]
            partial[p.name] = v if v in p.values else _nearest_value(p, float(v))
    cfg = realize(space, partial, problem, cls=cls)
    hw = problem.hardware
    par = [(r, f.value[1]) for r, f in rule_forms.items() if f.kind == "par" and r in params]
    if par and hw is not None and hw.sms:
        need = max(t for _, t in par) * hw.sms
        for _ in range(16):  # halve the largest par tile until the grid is wide enough
            programs, _ = grid_tiles(problem, space, cfg)
            if not programs or programs >= need:
                break
            shrinkable = [(cfg[params[r].name], r) for r, _ in par
                          if params[r].step(cfg[params[r].name], -1) is not None]
            if not shrinkable:
                break
            _, r = max(shrinkable)
            p = params[r]
            partial[p.name] = p.step(cfg[p.name], -1)
            cfg = realize(space, partial, problem, cls=cls)
    for role, per_sm in grid:  # choose the tile whose grid is closest to per_sm programs per SM
        p = params[role]
        if hw is None or not hw.sms:
            continue
        best, best_d = None, math.inf
        for v in p.values:
            c = {**cfg, p.name: v}
            programs, _ = grid_tiles(problem, space, c)
            if not programs:
                continue
            d = abs(math.log2(programs / hw.sms) - math.log2(per_sm))
            if d < best_d - 1e-9:
                best, best_d = v, d
        if best is not None:
            partial[p.name] = best
            cfg = realize(space, partial, problem, cls=cls)
    for role, form in rule_forms.items():  # warps last: they follow the tiles chosen above
        p = params.get(role)
        elems = tile_elements(problem, space, cfg)
        if form.kind == "per" and p is not None and elems and hw is not None and hw.warp_size:
            partial[p.name] = _nearest_value(p, elems / (hw.warp_size * float(form.value)))
            cfg = realize(space, partial, problem, cls=cls)
    # tiles a rule sized for parallelism or to cover a dim stay; when constant roles (K tile,
    # stages) do not fit beside them, those give way (realize prefers every given key alike)
    pinned = {params[r].name: partial[params[r].name] for r, f in rule_forms.items()
              if f.kind in ("fit", "grid", "par") and r in params and params[r].name in partial}
    if any(cfg[n] != v for n, v in pinned.items()):
        kept = space.nearest_valid({**cfg, **partial}, prefer=pinned)
        if all(kept[n] == v for n, v in pinned.items()):
            cfg = kept
    return cfg


def departures(rule_forms: Mapping[str, Form], problem: Problem, space: Space,
               config: Mapping[str, Any]) -> list[str]:
    """Where `instantiate` served another value than the rule's own (a constant role, or warps
    per tile elements) to satisfy the space's constraints, as one repair line naming the
    constraints the rule's values together break; [] when it served the rule's values."""
    params = _role_params(space)
    hw = problem.hardware
    want: dict[str, Any] = {}
    for role, form in rule_forms.items():
        p = params.get(role)
        if p is None:
            continue
        if form.kind == "const":
            want[p.name] = _const_value(p, form.value)
        elif form.kind == "per" and hw is not None and hw.warp_size:
            elems = tile_elements(problem, space, config)
            if elems:
                want[p.name] = _nearest_value(p, elems / (hw.warp_size * float(form.value)))
    moved = {n: v for n, v in want.items() if config.get(n) != v}
    if not moved:
        return []
    intended = {**config, **want}
    broken = []
    for c in getattr(space, "constraints", ()):
        try:
            ok = bool(c(intended))
        except Exception:  # noqa: BLE001 - a constraint that cannot judge it says nothing here
            ok = True
        if not ok:
            broken.append(getattr(c, "source", None) or getattr(c, "__name__", "a constraint"))
    why = ("the rule's values break " + " and ".join(broken)) if broken else \
        "the nearest valid config to the rule's values"
    return ["space constraints: " + ", ".join(f"{n} {v} -> {config[n]}" for n, v in moved.items()) + f" ({why})"]


def warpgroup_repair(problem: Problem, space: Space, config: Mapping[str, Any]) -> Config | None:
    """A predicted matmul config moved onto the hardware's warpgroup MMA (Hopper's wgmma: 64
    rows, 4 warps), where the M dim has the rows and the config falls short of either; None
    when nothing applies or the space has no such config. Rules learned on big tiles scale
    tiles and warps down on small shapes past what wgmma needs, and Triton then falls back to
    mma.sync (a 768^3 matmul: 32x128 tile, 2 warps, 2.2x the best tile measured). Applied to
    predictions, not while learning: the recorded shapes' rules stay as they were learned."""
    from .diagnose import on_warpgroup_mma, tiled_dims

    if on_warpgroup_mma(problem, space, config) is not False:
        return None  # already on it, or the question does not arise
    warps_needed, rows = problem.hardware.warpgroup_mma  # type: ignore[union-attr]
    m_name = tiled_dims(problem, space)["tile:M"][0]
    w = space.by_role("warps")
    assert w is not None
    cfg = dict(config)
    if int(cfg[m_name]) < rows:
        ok = sorted(v for v in space[m_name].values if isinstance(v, int) and v >= rows)
        if not ok:
            return None
        cfg[m_name] = ok[0]
    if cfg[w.name] % warps_needed:
        ok = sorted(v for v in w.values if isinstance(v, int) and v >= cfg[w.name] and v % warps_needed == 0)
        if not ok:
            return None
        cfg[w.name] = ok[0]
    if space.is_valid(cfg):
        return cfg
    fixed = space.nearest_valid(cfg, prefer={m_name: cfg[m_name], w.name: cfg[w.name]})
    return fixed if fixed[m_name] >= rows and fixed[w.name] % warps_needed == 0 else None


def tile_elements(problem: Problem, space: Space, config: Mapping[str, Any]) -> int | None:
    """Product of the config's tile sizes (what one program holds or streams per step), or
    None when the space has no tile the problem names."""
    from .diagnose import tiled_dims

    tiles = tiled_dims(problem, space)
    if not tiles:
        return None
    return math.prod(int(config[name]) for name, _, _ in tiles.values())


def forms_of(config: Mapping[str, Any], problem: Problem, space: Space,
             cls: Classification | None = None) -> list[dict[str, Form]]:
    """The ways one measured config can be expressed as role forms: every role const; tiles
    that cover their dim as fit; the largest grid tile as grid (its programs per SM)."""
    from .diagnose import grid_tiles, tiled_dims

    cls = cls or classify(problem, space)
    params = _role_params(space)
    base = {role: Form("const", config[p.name]) for role, p in params.items() if p.name in config}
    out = [base]
    hw = problem.hardware
    elems = tile_elements(problem, space, config)
    warps = config.get(params["warps"].name) if "warps" in params else None
    if elems and isinstance(warps, int) and warps > 0 and hw is not None and hw.warp_size:
        out.append({**base, "warps": Form("per", round(elems / (hw.warp_size * warps), 3))})
    fit = dict(base)
    tiles = tiled_dims(problem, space)
    for role, (name, dim, _) in tiles.items():
        if role in params and isinstance(config.get(name), int) and config[name] >= dim:
            fit[role] = Form("fit")
    if fit != base:
        out.append(fit)
    grid_roles = [(dim, role) for role, (name, dim, red) in tiles.items() if not red and role in params]
    programs, _ = grid_tiles(problem, space, config)
    if grid_roles and programs and hw is not None and hw.sms:
        _, role = max(grid_roles)
        g = dict(fit)
        g[role] = Form("grid", round(programs / hw.sms, 3))
        out.append(g)
        # parallelism floors: this shape's own, and a first wave filled as far as the theory
        # library deems worth a tile change (WAVE_EFF_MIN of the SMs busy)
        for t in sorted({round(programs / hw.sms, 3), FILL_FLOOR}):
            pf = dict(fit)
            for _, r in grid_roles:
                if pf[r].kind == "const":
                    pf[r] = Form("par", (pf[r].value, t))
            if pf != fit:
                out.append(pf)
    return out


# ----------------------------------------------------------------------------- learning

def _dims_read(rule: "TheoryRule", cls: Classification) -> set[str]:
    """The problem dims a rule's forms depend on: a fit tile's dim; with a grid or par form,
    every non-reduction tiled dim (the program count is their product)."""
    from .diagnose import is_reduction_role

    out: set[str] = set()
    grid = any(f.kind in ("grid", "par") for f in rule.forms.values())
    for role, form in rule.forms.items():
        name = tile_dim_name(role, cls)
        if name is None:
            continue
        if form.kind in ("fit", "grid", "par") or (grid and not is_reduction_role(role, cls.kernel_class)):
            out.add(name)
    return out


def _hardware_levels(hw: HardwareInfo | None) -> list[tuple[str, str]]:
    """The observed database's lookup order (GPU name, family, any), each key with its level."""
    return [("any" if k == ANY else "family" if k.startswith("family:") else "name", k) for k in hardware_keys(hw)]


def _score(forms: Mapping[str, Form], group: Sequence[Any], cache: dict) -> list[float]:
    """Time of the instantiated config over the optimum, per observation of the group."""
    ratios = []
    for o in group:
        k = (id(o), tuple(sorted((r, f) for r, f in forms.items())))
        if k not in cache:
            try:
                cfg = instantiate(forms, o.problem, o.space, o.classification())
                t = o.time_of(cfg)
            except (InvalidSeed, SpaceError, KeyError, ValueError) as e:
                log.debug("instantiating %s on %s failed: %s", forms, o.name, e)
                t = None
            opt = o.optimum
            cache[k] = (MISSING_PENALTY if t is None or not math.isfinite(t) else t / opt) if math.isfinite(opt) \
                else 1.0
        ratios.append(cache[k])
    return ratios


def _fit_group(group: Sequence[Any]) -> tuple[dict[str, Form], list[float]] | None:
    cache: dict = {}
    cands: list[dict[str, Form]] = []
    for o in group:
        cls = o.classification()
        for cfg in o.ranked(TOP):
            for f in forms_of(cfg, o.problem, o.space, cls):
                if f and f not in cands:
                    cands.append(f)
    if not cands:
        return None

    def specific(f: Mapping[str, Form]) -> int:
        # among rules that fit the group equally, prefer the one that says why (a parallelism
        # floor holds wherever there is enough work, warps sized to the tile follow it when it
        # shrinks; a constant tile or warp count only where it was seen)
        return sum(form.kind == "const" for r, form in f.items() if r.startswith("tile") or r == "warps") \
            - sum(form.kind == "par" and form.value[1] == FILL_FLOOR for form in f.values())
    scored = sorted(((round(geomean(_score(f, group, cache)), 4), specific(f), i) for i, f in enumerate(cands)))
    best = dict(cands[scored[0][2]])
    best_g = geomean(_score(best, group, cache))
    pool: dict[str, list[Form]] = {}
    for f in cands:
        for r, form in f.items():
            if form not in pool.setdefault(r, []):
                pool[r].append(form)
    for _ in range(2):  # greedy: swap one role's form while it helps
        improved = False
        for role, options in pool.items():
            for form in options:
                if best.get(role) == form:
                    continue
                trial = {**best, role: form}
                g = geomean(_score(trial, group, cache))
                if g < best_g * (1 - 1e-4) or (g <= best_g * (1 + 1e-4) and specific(trial) < specific(best)):
                    best, best_g, improved = trial, g, True
        if not improved:
            break
    return best, _score(best, group, cache)


def learn(observations: Iterable[Any], *, exclude: "Problem | Holdout | None" = None,
          only: Classification | None = None,
          progress: Callable[[int, int], None] | None = None) -> "TheoryBook":
    """Rules from observations (`heuristics.harvest.Observation`: a problem, its space and the
    times of its configs), one per (hardware level, class, regime, dtype family) group that
    has problems with roles; `exclude` leaves out what a `Holdout` covers (a Problem: its
    shape, leave-one-shape-out); `only` learns just the groups a lookup for that
    classification visits. `progress(done, total)` hears each group fitted (a CLI bar)."""
    groups: dict[tuple[str, str, str, str], list[Any]] = {}
    hold = as_holdout(exclude)
    for o in observations:
        if only is not None and o.classification().kernel_class != only.kernel_class:
            continue
        if hold is not None and hold.covers(o.problem.kernel, o.problem.dims, o.problem.key(),
                                            o.problem.source_hash):
            continue
        if not _role_params(o.space) or not math.isfinite(o.optimum):
            continue
        cls = o.classification()
        for _, hw_key in _hardware_levels(o.problem.hardware):
            for regime in (cls.fallback, ALL):
                if only is not None and regime not in (only.fallback, ALL):
                    continue
                groups.setdefault((hw_key, cls.kernel_class, regime, cls.dtype_family), []).append(o)
    rules = []
    fits: dict[frozenset, Any] = {}  # the GPU, its family and "any" often hold the same problems
    todo = [(key, group) for key, group in sorted(groups.items()) if key[2] == ALL or len(group) >= MIN_GROUP]
    for done, ((hw_key, kclass, regime, fam), group) in enumerate(todo, 1):
        if progress is not None:
            progress(done - 1, len(todo))
        ident = frozenset(id(o) for o in group)
        if ident not in fits:
            fits[ident] = _fit_group(group)
        fitted = fits[ident]
        if fitted is None:
            continue
        forms, ratios = fitted
        dims: dict[str, list[int]] = {}
        for o in group:
            for k, v in o.classification().dims.items():
                lo, hi = dims.get(k, [v, v])
                dims[k] = [min(lo, v), max(hi, v)]
        rules.append(TheoryRule(hw_key, kclass, regime, fam, forms, geomean(ratios), max(ratios),
                                sum(r <= SUPPORT_TOLERANCE for r in ratios),
                                sum(r > SUPPORT_TOLERANCE for r in ratios),
                                [{"key": o.problem.key(), "kernel": o.problem.kernel, "dims": dict(o.problem.dims),
                                  "hardware": o.problem.hardware.name if o.problem.hardware else "",
                                  **({"source_hash": o.problem.source_hash} if o.problem.source_hash else {})}
                                 for o in group], dims))
    if progress is not None:
        progress(len(todo), len(todo))
    return TheoryBook(rules)


# ----------------------------------------------------------------------------- the book

class TheoryBook:
    """A set of theory rules with the lookup order of the observed database."""

    def __init__(self, rules: Iterable[TheoryRule] = (), meta: Mapping[str, Any] | None = None,
                 held_out: Mapping[str, Iterable[TheoryRule]] | None = None):
        self.rules: dict[tuple[str, str, str, str], TheoryRule] = {r.key: r for r in rules}
        self.meta = dict(meta or {})
        # shape_id -> the rules learned without that problem (leave-one-shape-out), for the
        # problems the book was learned from: a replay of one of them uses these
        self.held_out: dict[str, TheoryBook] = {k: TheoryBook(v) for k, v in (held_out or {}).items()}

    def __len__(self) -> int:
        return len(self.rules)

    def __iter__(self):
        return iter(self.rules.values())

    def candidates(self, problem: Problem, space: Space, *, exclude: "Problem | Holdout | None" = None
                   ) -> list[tuple[str, TheoryRule]]:
        cls = classify(problem, space)
        out = []
        for level, hw_key in _hardware_levels(problem.hardware):
            for regime in (cls.fallback, ALL):
                for fam in (cls.dtype_family, "any"):
                    r = self.rules.get((hw_key, cls.kernel_class, regime, fam))
                    if r is not None and not (exclude is not None and r.learned_from_problem(exclude)):
                        out.append((level, r))
        return out

    def predict(self, problem: Problem, space: Space, *, exclude: "Problem | Holdout | None" = None) -> Prediction | None:
        """The first of `predictions`, or None."""
        got = self.predictions(problem, space, exclude=exclude)
        return got[0] if got else None

    def predictions(self, problem: Problem, space: Space, *, exclude: "Problem | Holdout | None" = None) -> list[Prediction]:
        """The applicable rules of the nearest hardware level that has one, instantiated on
        (problem, space), best first, one per distinct config. The best is the rule that
        extrapolates least. Rules are tried in lookup order (nearest hardware level first; within it the
        shape's regime before "all"); within one hardware level, a rule whose learned dims
        cover the shape beats a more specific one that would extrapolate by a whole octave more
        (a regime learned on large shapes says little about a shape outside it, the broader rule
        may have seen one). Dims no form of the rule reads (a constant tile over them) count a
        quarter (`UNREAD_WEIGHT`)."""
        cls = classify(problem, space)
        params = _role_params(space)
        ranked: list[tuple[tuple[int, int, int], Prediction]] = []
        levels = {"name": 0, "family": 1, "any": 2}
        for order, (level, rule) in enumerate(self.candidates(problem, space, exclude=exclude)):
            if ranked and levels[level] > ranked[0][0][0]:
                break  # a nearer hardware level already has an applicable rule
            if not any(r in params for r in rule.forms):
                continue
            try:
                cfg = instantiate(rule.forms, problem, space, cls)
            except (InvalidSeed, SpaceError) as e:
                log.debug("rule %s does not fit %s: %s", rule.key, problem.kernel, e)
                continue
            repairs: list[str] = departures(rule.forms, problem, space, cfg)
            repaired = warpgroup_repair(problem, space, cfg)
            if repaired is not None and space.key(repaired) != space.key(cfg):
                log.debug("rule %s on %s: %s raised to a warpgroup MMA tile: %s", rule.key, problem.kernel, cfg,
                          repaired)
                repairs += [f"warpgroup MMA: {k} {cfg[k]} -> {repaired[k]}" for k in cfg if cfg[k] != repaired[k]]
                cfg = repaired
            # feasible by construction: a config the resource model says cannot launch (or will
            # spill) is moved the least way into what fits; a rule with no such config is passed over
            fitted, changes = resources.fit(problem, space, cfg)
            if fitted is None:
                log.debug("rule %s on %s: %s does not fit (%s)", rule.key, problem.kernel, cfg,
                          resources.trouble(problem, space, cfg))
                continue
            repairs += [f"resource model: {c}" for c in changes]
            cfg = fitted
            reasons = []
            octaves = 0.0  # how far outside its learned dims, in powers of two
            reads = _dims_read(rule, cls)
            for k, v in cls.dims.items():
                lo, hi = rule.dims_range.get(k, [v, v])
                if v < lo or v > hi:
                    reasons.append(f"{k}={v} outside the {lo}..{hi} it was learned on")
                    # a dim none of its forms reads (a constant tile over it) matters less
                    octaves += abs(math.log2(max(v, 1) / max(lo if v < lo else hi, 1))) * \
                        (1.0 if k in reads else UNREAD_WEIGHT)
            if level != "name":
                reasons.append(f"learned on {rule.hardware}, applied to "
                               f"{problem.hardware.name if problem.hardware else 'unknown hardware'}")
            missing = [r for r in rule.forms if r not in params]
            if missing:
                reasons.append(f"roles {', '.join(missing)} absent from this space")
            conf = rule.confidence * (1.0 if level == "name" else 0.8 if level == "family" else 0.6)
            # where it applies: the kernels it was confirmed on. A kernel it never saw (another
            # author's tiling, masks, fusions) is outside those conditions: said, and trusted less
            seen = rule.kernels()
            if seen and kernel_family(problem.kernel) not in seen:
                reasons.append(f"confirmed only on {', '.join(sorted(seen))}, not on {kernel_family(problem.kernel)}")
                conf *= UNSEEN_KERNEL_FACTOR
            outside = [f"{params[r].name}={f.value}" for r, f in rule.forms.items()
                       if f.kind == "const" and r in params and f.value not in params[r].values]
            if outside:
                reasons.append(f"values {', '.join(outside)} are not in this space")
            pred = Prediction(cfg, rule, level, round(conf, 3), bool(reasons), tuple(reasons), tuple(repairs))
            ranked.append(((levels[level], math.floor(octaves + 1e-9), order), pred))  # a factor of 2 is near
        out: list[Prediction] = []
        for _, pred in sorted(ranked, key=lambda t: t[0]):
            if all(space.key(pred.config) != space.key(o.config) for o in out):
                out.append(pred)
        return out

    # -- serialisation
    def to_dict(self) -> dict[str, Any]:
        rules = lambda b: [r.to_dict() for r in sorted(b.rules.values(), key=lambda r: r.key)]  # noqa: E731
        d: dict[str, Any] = {"format": FORMAT, "version": VERSION, "meta": self.meta, "rules": rules(self)}
        if self.held_out:
            d["held_out"] = {k: rules(b) for k, b in sorted(self.held_out.items())}
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], origin: str = "") -> "TheoryBook":
        if d.get("format") != FORMAT:
            raise AbductuneError(f"{origin or 'theory file'} is not an abductune theory file "
                                 f"(format {d.get('format')!r}); write one with `abductune learn`")
        held = {k: [TheoryRule.from_dict(r) for r in v] for k, v in (d.get("held_out") or {}).items()}
        return cls((TheoryRule.from_dict(r) for r in d.get("rules", [])), d.get("meta"), held)

    def save(self, path: str | Path) -> Path:
        from ..files import atomic_write_text

        atomic_write_text(path, json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n")
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> "TheoryBook":
        p = Path(path)
        try:
            return cls.from_dict(json.loads(p.read_text()), str(p))
        except FileNotFoundError:
            raise AbductuneError(f"theory file {p} does not exist") from None
        except (ValueError, KeyError, TypeError, IndexError) as e:
            raise AbductuneError(f"theory file {p} is corrupt ({type(e).__name__}: {e}); rebuild it with "
                                 "`abductune learn`") from None

    def merge(self, other: "TheoryBook") -> "TheoryBook":
        return TheoryBook([*self.rules.values(), *other.rules.values()], {**self.meta, **other.meta})


_CONFIRMED: set[str] | None = None


def confirmed_kernels() -> set[str]:
    """The kernel families the packaged theory rules were confirmed on (cached): the kernels
    the theories were built around."""
    global _CONFIRMED
    if _CONFIRMED is None:
        _CONFIRMED = set().union(*(r.kernels() for r in packaged_book()))
    return _CONFIRMED


def packaged_book() -> TheoryBook:
    """The theories learned from the bundled H100 data (empty if the package has none)."""
    p = DATA_DIR / "theories.json"
    return TheoryBook.load(p) if p.exists() else TheoryBook()


_BUNDLED_OBS: list[Any] | None = None


def bundled_observations() -> list[Any]:
    """The bundled datasets as observations (cached): what the packaged theories came from."""
    global _BUNDLED_OBS
    if _BUNDLED_OBS is None:
        from ..datasets.bundled import bundled_datasets
        from ..heuristics.harvest import observations_from_datasets

        _BUNDLED_OBS = observations_from_datasets(bundled_datasets())
    return _BUNDLED_OBS


def predict(problem: Problem, space: Space, *, book: TheoryBook | None = None,
            exclude: "Problem | Holdout | None" = None) -> Prediction | None:
    """Zero-shot config for (problem, space). With `exclude` (a replay of a recorded problem),
    rules learned from it are re-learned without it from the bundled data when that is where
    they came from, so no prediction is scored with its own answer."""
    got = predictions(problem, space, book=book, exclude=exclude)
    return got[0] if got else None


def predictions(problem: Problem, space: Space, *, book: TheoryBook | None = None,
                exclude: "Problem | Holdout | None" = None) -> list[Prediction]:
    """Every applicable rule's distinct config, best first (see `TheoryBook.predictions`);
    `exclude` as in `predict`."""
    book = book if book is not None else packaged_book()
    hold = as_holdout(exclude)
    if hold is not None and any(r.learned_from_problem(hold) for _, r in book.candidates(problem, space)):
        held = book.held_out.get(shape_id(hold.problem)) if hold.level == "shape" else None
        book = held if held is not None else _relearned(hold, classify(problem, space))
    return book.predictions(problem, space, exclude=hold)


_RELEARNED: dict[tuple, "TheoryBook"] = {}


def _relearned(hold: Holdout, cls: Classification) -> "TheoryBook":
    """The bundled data's rules learned without what `hold` covers (cached per holdout)."""
    k = (hold.level, hold.problem.kernel, tuple(sorted(hold.problem.dims.items())) if hold.level == "shape" else (),
         cls.kernel_class)
    if k not in _RELEARNED:
        _RELEARNED[k] = learn(bundled_observations(), exclude=hold, only=cls)
    return _RELEARNED[k]


def shape_id(problem: Problem) -> str:
    """Kernel and dims: what 'the same shape' means for leave-one-shape-out (a changed kernel
    source hash does not make a recorded shape new)."""
    return problem.kernel + ":" + ",".join(f"{k}={v}" for k, v in sorted(problem.dims.items()))


def learn_with_held_out(observations: Sequence[Any], meta: Mapping[str, Any] | None = None,
                        progress: Callable[[int, int], None] | None = None) -> TheoryBook:
    """A book from every observation, plus for each one the rules its lookup would use when
    that observation is left out: what ships, so replays never re-learn. `progress(done,
    total)` hears each of the 1 + len(observations) books learned."""
    total = 1 + len(observations)
    book = learn(observations)
    book.meta = dict(meta or {})
    for i, o in enumerate(observations, 1):
        if progress is not None:
            progress(i, total)
        held = learn(observations, exclude=o.problem, only=o.classification())
        book.held_out[shape_id(o.problem)] = held
    if progress is not None:
        progress(total, total)
    return book
