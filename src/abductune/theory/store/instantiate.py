"""Forms to configs and back: a rule's forms realized on (problem, space), and a measured config as forms."""
from __future__ import annotations

import math
from typing import Any, Mapping

from ...classify import Classification, classify, next_pow2, tile_dim, tile_dim_name
from ...problem import Problem
from ...space import Config, Space
from .rules import Form


def _fill_floor() -> float:
    from ..library import WAVE_EFF_MIN

    return WAVE_EFF_MIN


FILL_FLOOR = _fill_floor()  # programs per SM a parallelism floor asks for


def _role_params(space: Space, cls: Classification | None = None,
                 wanted: Any = ()) -> dict[str, Any]:
    """role -> param, for roles held by exactly one parameter (the portable ones). With `cls`,
    a wanted tile role the space does not hold goes to the parameter tiling the same problem
    dim: a rule learned on tile:R and tile:X of one row kernel sizes BLOCK_COLS and BLOCK_ROWS
    of another, since both name what they cover (classify.tile_dim_name)."""
    counts: dict[str, int] = {}
    for p in space.params:
        if p.role:
            counts[p.role] = counts.get(p.role, 0) + 1
    out = {p.role: p for p in space.params if p.role and counts[p.role] == 1}
    if cls is not None:
        by_dim: dict[str, Any] = {}
        for role, p in out.items():
            d = tile_dim_name(role, cls)
            if d is not None:
                by_dim[d] = None if d in by_dim else p  # two tiles over one dim: neither is "the" tile
        taken = {p.name for r, p in out.items() if r in wanted}
        for role in wanted:
            d = tile_dim_name(role, cls) if role not in out else None
            p = by_dim.get(d) if d is not None else None
            if p is not None and p.name not in taken:
                out[role] = p
                taken.add(p.name)
    return out


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
    from ...heuristics.realize import realize
    from ..diagnose import grid_tiles

    cls = cls or classify(problem, space)
    params = _role_params(space, cls, rule_forms)
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
    params = _role_params(space, classify(problem, space), rule_forms)
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
    from ..diagnose import on_warpgroup_mma, tiled_dims

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
    from ..diagnose import tiled_dims

    tiles = tiled_dims(problem, space)
    if not tiles:
        return None
    return math.prod(int(config[name]) for name, _, _ in tiles.values())


def forms_of(config: Mapping[str, Any], problem: Problem, space: Space,
             cls: Classification | None = None) -> list[dict[str, Form]]:
    """The ways one measured config can be expressed as role forms: every role const; tiles
    that cover their dim as fit; the largest grid tile as grid (its programs per SM)."""
    from ..diagnose import grid_tiles, tiled_dims

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
