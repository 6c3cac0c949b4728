"""Helion's config space as abductune sees it: typed parameters with roles, and the views a search walks.

No Helion import here: `helion_search.py` hands over Helion's flat spec (the list of
`ConfigSpecFragment`s a `ConfigGeneration` walks) and its key layout, and the fragments are
read by their class names and fields, so the mapping is tested against Helion's own fragment
classes where Helion imports, and stays readable where it does not.

Two spaces and a list of changes come out of one Helion kernel:

- the *full* space (`HelionMap.full`): one abductune parameter per element of Helion's flat
  config (a block size, a loop order, one memory op's indexing), so every Helion config maps
  to an abductune config and back (`from_flat`, `to_flat`) without loss. Nothing enumerates
  it: it is where seeds are measured exactly as given.
- *views* (`HelionMap.view`): a few units searched around an anchor config, every other
  element held at the anchor's value. A list field (indexing, eviction policies) is one
  uniform unit ("every op the same value"), with "@anchor" standing for the anchor's own
  list where that is mixed. Strategies enumerate a view, so `plan` splits the units into
  groups of at most `VIEW_CAP` combinations, roles first (tiles, warps, stages, group), then
  the fields that matter most to Helion kernels (pid type, indexing, loop orders, ...).
- the *sweep* (`HelionMap.sweep`): one-unit changes of an anchor, every value of each small
  unit, in an order that touches every unit before completing any; `sweep_hints` says which
  unit leads and which value of a unit comes first, from the kernel's facts.
- *coupled moves* (`coupled_moves`): every tile one power of two up (or down) at once, the
  warps following so each thread keeps the anchor's share of the tile: the move a search that
  changes one or two parameters at a time cannot make (three or more change together).
"""
from __future__ import annotations

import hashlib
import itertools
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from ..classify import classify, independent_dims, next_pow2
from ..errors import AbductuneError
from ..problem import Problem
from ..space import Config, Param, Space
# the elements one program holds, as the warps_matched theory counts them (a matmul's output
# tile, attention's score block): one definition for the band it judges and the moves here
from ..theory.diagnose import _output_tile_elems as held_elements
from ..theory.diagnose import GRID_UNTILED, grid_tiles, tiled_dims
from ..theory.library.base import ELEMS_PER_THREAD, ELEMS_PER_THREAD_OTHER
from ..theory.resources import fit

# the most combinations one view may hold (strategies enumerate a view's valid configs)
VIEW_CAP = 100_000
# a loop order is searched as one choice among all permutations, up to this many loops
MAX_PERMUTATION = 6
ANCHOR = "@anchor"  # a uniform unit's value that keeps the anchor's own (mixed) list
# a unit of at most this many values is swept one value at a time on the incumbent
# (`HelionMap.sweep`): eviction policies, indexing, pid type, range settings, an L2 grouping
SWEEP_MAX_VALUES = 8

# the order in which fields without a role join a view: what moves a Helion kernel's time
# most first (tiles without a role, then launch shape, memory access, loops)
_PRIORITY = {"block_sizes": 2, "reduction_loops": 2, "pid_type": 3, "indexing": 4, "loop_orders": 5,
             "num_sm_multiplier": 6, "range_num_stages": 7, "range_unroll_factors": 8,
             "range_multi_buffers": 9, "range_flattens": 10, "range_warp_specializes": 11,
             "load_eviction_policies": 12, "l2_groupings": 13}


# the order in which roles join a view: tiles, then warps and stages, then the rest (an L2
# grouping), so the first view holds warps and stages where tiles, warps, stages and grouping
# together exceed VIEW_CAP (a matmul's: 7 x 7 x 7 tiles x 6 warps x 8 stages x 7 groupings);
# a role left out of that view is swept instead (`sweep`)
_ROLE_PRIORITY = {"tile": 0, "warps": 1, "stages": 1}

# Hopper's tensor memory accelerator: Helion offers this indexing only on a device that has
# it (sm_90 on); it moves a whole tile per load without the threads' address arithmetic
TMA_INDEXING = "tensor_descriptor"
# classes whose tile:M feeds a tensor-core MMA (the resource model's matmul and attention
# footprints): on a warpgroup MMA their warps come in groups (HardwareInfo.warpgroup_mma), and
# their input tiles are read by several programs (a matmul's A tile by every N tile,
# attention's K and V tiles by every query tile)
MMA_CLASSES = ("matmul", "quantized_matmul", "attention")
# PTX's cache eviction priorities: evict_last for data likely reused, evict_first for data
# read once (Helion's load_eviction_policies values "last" and "first")
EVICT_REUSED = "last"


class HelionError(AbductuneError):
    """Helion is missing, of a version abductune does not support, or its config space holds
    something abductune cannot map; the message names which."""


# ----------------------------------------------------------------------------- slots

@dataclass(frozen=True)
class Slot:
    """One position of Helion's flat config. `item`: its index inside a sequence field
    (block_sizes[1]), None for a scalar field; `is_list`: a ListOf slot of `length` elements
    (maybe none); `values`: the domain of one value (of one element of a list)."""

    index: int
    key: str
    item: int | None
    kind: str  # pow2, int, enum, bool, perm, threads
    values: tuple[Any, ...]
    default: Any
    length: int = 0
    block_ids: tuple[int, ...] = ()
    is_list: bool = False

    @property
    def name(self) -> str:
        return self.key if self.item is None else f"{self.key}_{self.item}"

    def element_names(self) -> list[str]:
        return [f"{self.name}_{j}" for j in range(self.length)] if self.is_list else [self.name]


def _class_names(obj: Any) -> set[str]:
    return {c.__name__ for c in type(obj).__mro__}


def fragment_domain(fragment: Any) -> tuple[str, tuple[Any, ...], Any]:
    """(kind, values, default) of one scalar Helion fragment, from its class and fields."""
    names = _class_names(fragment)
    if "PowerOfTwoFragment" in names:
        lo, hi = int(fragment.low), int(fragment.high)
        vals = tuple(1 << k for k in range(lo.bit_length() - 1, hi.bit_length()))
        return "pow2", vals, fragment.default()
    if "IntegerFragment" in names or "BaseIntegerFragment" in names:
        return "int", tuple(range(int(fragment.low), int(fragment.high) + 1)), fragment.default()
    if "EnumFragment" in names:
        return "enum", tuple(fragment.choices), fragment.default()
    if "BooleanFragment" in names:
        return "bool", (False, True), fragment.default()
    if "PermutationFragment" in names:
        n = int(fragment.length)
        if n > MAX_PERMUTATION:
            raise HelionError(f"a Helion loop order over {n} loops has {math.factorial(n)} permutations; "
                              f"abductune maps at most {MAX_PERMUTATION} loops")
        return "perm", tuple(itertools.permutations(range(n))), tuple(range(n))
    if "NumThreadsFragment" in names:
        hi = int(fragment.high)
        return "threads", (0, *(1 << k for k in range(hi.bit_length()))), 0
    values = fragment.search_values(4096) if hasattr(fragment, "search_values") else None
    if values:
        return "enum", tuple(values), fragment.default()
    raise HelionError(f"Helion's config fragment {type(fragment).__name__} is not one abductune can map "
                      "(update abductune, or leave this kernel to Helion's own search)")


def read_slots(flat_spec: Sequence[Any], layout: Sequence[tuple[str, int, bool]],
               block_ids: Mapping[str, Sequence[Sequence[int]]] | None = None) -> list[Slot]:
    """The slots of a flat spec. `layout`: Helion's (key, flat entries, is_sequence) per
    field, in flat order (`ConfigSpec.flat_key_layout`); `block_ids`: per sequence key, the
    block ids of each of its items (block_sizes[i].block_ids)."""
    total = sum(int(n) for _, n, _ in layout)
    if total != len(flat_spec):
        raise HelionError(f"Helion's key layout names {total} flat entries but its flat spec has "
                          f"{len(flat_spec)}: this Helion version lays out configs in a way abductune "
                          "does not know")
    slots: list[Slot] = []
    i = 0
    for key, count, is_sequence in layout:
        for item in range(int(count)):
            frag = flat_spec[i]
            ids = tuple((block_ids or {}).get(key, [()] * (item + 1))[item]) if is_sequence else ()
            if "ListOf" in _class_names(frag):
                kind, values, _ = fragment_domain(frag.inner)
                default = tuple(_hashable(v) for v in frag.default())
                slots.append(Slot(i, key, item if is_sequence else None, kind, values, default,
                                  int(frag.length), ids, True))
            else:
                kind, values, default = fragment_domain(frag)
                slots.append(Slot(i, key, item if is_sequence else None, kind, values, _hashable(default),
                                  0, ids))
            i += 1
    return slots


def _hashable(v: Any) -> Any:
    return tuple(_hashable(x) for x in v) if isinstance(v, (list, tuple)) else v


def _flat_value(slot: Slot, v: Any) -> Any:
    """A config value as Helion's flat config holds it (lists, not tuples)."""
    return list(v) if slot.kind == "perm" else v


# ----------------------------------------------------------------------------- the map

@dataclass(frozen=True)
class Unit:
    """What a view searches as one parameter: one element (`elements` has one name), or a
    whole list held uniform (every element the same value; ANCHOR keeps the anchor's list)."""

    name: str
    elements: tuple[str, ...]
    values: tuple[Any, ...]
    role: str | None
    uniform: bool
    priority: int
    default: Any = None
    key: str = ""  # the Helion field ("indexing", "block_sizes")


class HelionMap:
    """Helion's flat config <-> abductune configs for one kernel (module docstring). `roles`:
    slot name ("block_sizes_0", "num_warps", "l2_groupings_0") -> abductune role."""

    def __init__(self, slots: Sequence[Slot], roles: Mapping[str, str] | None = None, name: str = "helion"):
        self.slots = list(slots)
        if not self.slots:
            raise HelionError("Helion's config space has no tunable field")
        self.roles = {k: v for k, v in (roles or {}).items() if v}
        unknown = set(self.roles) - {s.name for s in self.slots}
        if unknown:
            raise HelionError(f"roles name slots this kernel does not have: {', '.join(sorted(unknown))}")
        params: list[Param] = []
        for s in self.slots:
            ordered = s.kind in ("pow2", "int", "threads")
            kind = "pow2" if s.kind == "pow2" else ("int" if ordered else ("bool" if s.kind == "bool" else "choice"))
            for j, n in enumerate(s.element_names()):
                default = s.default[j] if s.is_list else s.default
                # an explicit "" keeps names like num_sm_multiplier from taking a role by their spelling
                role = self.roles.get(s.name, "") if not s.is_list else ""
                params.append(Param(n, s.values, role, default if default in s.values else None, ordered, kind))
        self.full = Space(params, name=f"{name}-full")

    # -- the lossless codec
    def from_flat(self, flat: Sequence[Any]) -> Config:
        """The full-space config of a Helion flat config."""
        if len(flat) != len(self.slots):
            raise HelionError(f"a Helion flat config of {len(flat)} entries for a space of {len(self.slots)}")
        cfg: Config = {}
        for s in self.slots:
            v = flat[s.index]
            if s.is_list:
                if len(v) != s.length:
                    raise HelionError(f"Helion's {s.name} holds {len(v)} values where its spec has {s.length}")
                cfg.update(zip(s.element_names(), (_hashable(x) for x in v)))
            else:
                cfg[s.name] = _hashable(v)
        for p in self.full.params:
            if not p.contains(cfg[p.name]):
                raise HelionError(f"Helion config value {cfg[p.name]!r} of {p.name} is outside its spec "
                                  f"({list(p.values)})")
        return cfg

    def to_flat(self, cfg: Mapping[str, Any]) -> list[Any]:
        """Helion's flat config of a full-space config."""
        out: list[Any] = [None] * len(self.slots)
        for s in self.slots:
            if s.is_list:
                out[s.index] = [_flat_value(s, cfg[n]) for n in s.element_names()]
            else:
                out[s.index] = _flat_value(s, cfg[s.name])
        return out

    # -- views
    def units(self, anchor: Mapping[str, Any]) -> list[Unit]:
        """Every searchable unit around `anchor` (a full config), in priority order."""
        out: list[Unit] = []
        for s in self.slots:
            role = self.roles.get(s.name)
            if role:
                prio = _ROLE_PRIORITY.get(role.split(":")[0], 1.5)
            else:
                prio = _PRIORITY.get(s.key, 20)
            # inner loops first: a sequence's later items are the deeper loops in Helion's order
            tie = -(s.item or 0)
            if s.is_list and not s.length:
                continue  # an empty list (no atomic ops): nothing to search
            if s.is_list:
                cur = tuple(anchor[n] for n in s.element_names())
                vals = tuple(s.values) if len(set(cur)) == 1 else (ANCHOR, *s.values)
                default = cur[0] if len(set(cur)) == 1 else ANCHOR
                out.append(Unit(s.name, tuple(s.element_names()), vals, None, True, int(prio * 100) + tie, default,
                                s.key))
            else:
                out.append(Unit(s.name, (s.name,), tuple(s.values), role, False, int(prio * 100) + tie, anchor[s.name],
                                s.key))
        return sorted(out, key=lambda u: u.priority)

    def plan(self, anchor: Mapping[str, Any], cap: int = VIEW_CAP, only: Iterable[str] | None = None) -> list[list[str]]:
        """Unit names in groups of at most `cap` combinations, highest priority first; a unit
        of one value is never searched. `only`: plan these units (names) and no others."""
        keep = None if only is None else set(only)
        rest = [u for u in self.units(anchor) if len(u.values) > 1 and (keep is None or u.name in keep)]
        groups: list[list[str]] = []
        while rest:
            group: list[str] = []
            left: list[Unit] = []
            card = 1
            for u in rest:
                if card * len(u.values) <= cap or not group:
                    group.append(u.name)
                    card *= len(u.values)
                else:
                    left.append(u)
            groups.append(group)
            rest = left
        return groups

    def sweep(self, anchor: Mapping[str, Any], max_values: int = SWEEP_MAX_VALUES,
              only: Iterable[str] | None = None, first: Mapping[str, Any] | None = None,
              lead: Iterable[str] = ()) -> list[tuple[str, Any, Config]]:
        """One-unit changes of `anchor` (unit name, value, full config) for every unit of at
        most `max_values` values among `only` (names; default: the units without a role).
        Order: each unit's first alternative (units in priority order, those of the fields in
        `lead` before the others), then the rest of each unit, the units with the fewest
        values left first; an ordered unit's values nearest the anchor's first, and a field's
        value in `first` (field -> value) before its others. A budget that cuts the list short
        has still tried every unit, and completed the smallest."""
        per_unit: list[tuple[Unit, list[Any]]] = []
        keep = None if only is None else set(only)
        leading = set(lead)
        for u in sorted(self.units(anchor), key=lambda u: u.key not in leading):  # stable: priority order kept
            if (u.role if keep is None else u.name not in keep) or not 2 <= len(u.values) <= max_values:
                continue
            alts = [v for v in u.values if v != u.default and v != ANCHOR]
            if not u.uniform and self.full[u.name].ordered and u.default in u.values:
                at = u.values.index(u.default)
                alts.sort(key=lambda v: (abs(u.values.index(v) - at), u.values.index(v)))
            if first and u.key in first and first[u.key] in alts:
                alts.sort(key=lambda v: v != first[u.key])
            if alts:
                per_unit.append((u, alts))
        order = [(u, alts[0]) for u, alts in per_unit]
        rest = sorted(per_unit, key=lambda ua: len(ua[1]))  # stable: priority order among equals
        order += [(u, v) for u, alts in rest for v in alts[1:]]
        out: list[tuple[str, Any, Config]] = []
        for u, v in order:
            cfg = dict(anchor)
            cfg.update({n: v for n in u.elements})
            out.append((u.name, v, cfg))
        return out

    def view(self, anchor: Mapping[str, Any], names: Iterable[str]) -> "View":
        wanted = set(names)
        units = [u for u in self.units(anchor) if u.name in wanted]
        missing = wanted - {u.name for u in units}
        if missing:
            raise HelionError(f"no unit named {', '.join(sorted(missing))} in this Helion space")
        return View(self, dict(anchor), units)


@dataclass
class View:
    """A searched subset of the full space around `anchor` (see the module docstring)."""

    hmap: HelionMap
    anchor: dict[str, Any]
    units: list[Unit]
    space: Space = field(init=False)

    def __post_init__(self) -> None:
        if not self.units:
            raise HelionError("a Helion view needs at least one unit to search")
        params = []
        for u in self.units:
            full = self.hmap.full[u.elements[0]]
            kind = "choice" if u.uniform and ANCHOR in u.values else full.kind
            ordered = full.ordered and not (u.uniform and ANCHOR in u.values)
            params.append(Param(u.name, u.values, u.role or "", u.default if u.default in u.values else None,
                                ordered, kind))
        # the anchor is part of the view's identity: two views of the same units around
        # different anchors are different spaces (their configs are different kernels)
        anchor_key = hashlib.sha256(repr(self.hmap.full.key(self.anchor)).encode()).hexdigest()[:16]
        self.space = Space(params, name=f"{self.hmap.full.name[:-5]}-view", constants={"helion_anchor": anchor_key})

    def to_full(self, cfg: Mapping[str, Any]) -> Config:
        out = dict(self.anchor)
        for u in self.units:
            v = cfg[u.name]
            if u.uniform:
                if v != ANCHOR:
                    out.update({n: v for n in u.elements})
            else:
                out[u.name] = v
        return out

    def project(self, full: Mapping[str, Any], lossy: bool = False) -> Config | None:
        """The view config of a full config; None when the full config differs from the anchor
        outside the view, or (unless `lossy`) holds a mixed list the view cannot express."""
        searched = {n for u in self.units for n in u.elements}
        if any(full[n] != self.anchor[n] for n in self.hmap.full.names if n not in searched):
            if not lossy:
                return None
        out: Config = {}
        for u in self.units:
            if not u.uniform:
                out[u.name] = full[u.name]
                continue
            cur = [full[n] for n in u.elements]
            if len(set(cur)) == 1 and cur[0] in u.values:
                out[u.name] = cur[0]
            elif ANCHOR in u.values and cur == [self.anchor[n] for n in u.elements]:
                out[u.name] = ANCHOR
            elif lossy:
                out[u.name] = Counter(cur).most_common(1)[0][0]
            else:
                return None
        return out if self.space.is_valid(out) else None


# ----------------------------------------------------------------------------- what the kernel's facts order

def sweep_hints(hmap: HelionMap, problem: Problem,
                anchor: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """(first, lead) for `HelionMap.sweep`: the value of a field tried before its others,
    and the fields swept first. Tensor-descriptor indexing, where Helion offers it (a device
    with a TMA) on a kernel with tiles, leads the sweep and is its indexing's first value: it
    changes how every tiled load moves. An MMA-class kernel whose grid has two or more tiles
    along a tiled dim reads each input tile from several programs, so its loads try
    evict_last before evict_first."""
    first: dict[str, Any] = {}
    lead: list[str] = []
    keys = {s.key: s for s in hmap.slots}
    tiled = any(s.key in ("block_sizes", "reduction_loops") and len(s.values) > 1 for s in hmap.slots)
    idx = keys.get("indexing")
    if idx is not None and tiled and TMA_INDEXING in idx.values and idx.length > 0:
        first["indexing"] = TMA_INDEXING
        lead.append("indexing")
    ev = keys.get("load_eviction_policies")
    if ev is not None and EVICT_REUSED in ev.values and problem.kernel_class in MMA_CLASSES:
        try:
            _, along = grid_tiles(problem, hmap.full, anchor)
        except Exception:  # noqa: BLE001 - a grid the model cannot read orders nothing
            along = {}
        if any(n >= 2 for n in along.values()):
            first["load_eviction_policies"] = EVICT_REUSED
    return first, tuple(lead)


def _nearest(values: Sequence[Any], want: float) -> Any:
    """The value nearest `want` in octaves (the larger of two as near)."""
    nums = [v for v in values if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    return min(nums, key=lambda v: (abs(math.log2(v) - math.log2(max(want, 1e-9))), -v)) if nums else None


def coupled_moves(hmap: HelionMap, problem: Problem, anchor: Mapping[str, Any],
                  directions: Sequence[int] = (+1, -1)) -> list[tuple[str, Config]]:
    """For each direction (+1: up), the anchor with its tiles one power of two that way
    together, and its warps set so that each thread keeps the anchor's share of the tile (the
    theory's `per e` form: what a thread holds in registers is what a tile change must keep;
    a share outside the range the `warps_matched` theory holds for the class is brought to
    its nearest end, as that theory would move it), in warpgroups where the hardware has a
    warpgroup MMA and the M tile its rows (Triton falls back to mma.sync otherwise:
    `HardwareInfo.warpgroup_mma`); a move never takes a config off the warpgroup MMA it is on
    (`theory.store.warpgroup_repair` records what that fallback cost a matmul).

    Every tile moves first, then the grid tiles alone (a matmul's K tile kept), whichever
    first the resource model accepts (`resources.fit`, allowed to lower the stages and nothing
    else) and, going up, still launches a program for every SM (as the `compute_undertiled`
    theory asks of a larger tile) where the grid model counts them all. A tile goes no higher
    than its dim's next power of two. Returns (label, full config) per direction that has one."""
    space = hmap.full
    hw = problem.hardware
    warps = space.by_role("warps")
    tiles = tiled_dims(problem, space)
    if warps is None or not tiles or hw is None or not hw.warp_size:
        return []
    elems = held_elements(problem, space, anchor)
    if not elems:
        return []
    lo, hi = ELEMS_PER_THREAD.get(problem.kernel_class, ELEMS_PER_THREAD_OTHER)
    per_thread = min(max(elems / (int(anchor[warps.name]) * hw.warp_size), lo), hi)
    groups = [sorted(tiles)]
    grid = sorted(r for r, (_, _, red) in tiles.items() if not red)
    if grid and len(grid) < len(tiles):
        groups.append(grid)
    out: list[tuple[str, Config]] = []
    for d in directions:
        for roles in groups:
            cfg = _scaled(space, problem, anchor, tiles, roles, d, per_thread, warps)
            if cfg is None:
                continue
            fitted = _fitted_by_stages(problem, space, cfg)
            if fitted is None:
                continue
            if d > 0 and _underfills(problem, space, fitted):
                continue
            out.append((f"{'up' if d > 0 else 'down'}:{'+'.join(roles)}", fitted))
            break
    return out


def trade_moves(hmap: HelionMap, problem: Problem, anchor: Mapping[str, Any],
                directions: Sequence[int] = (+1, -1)) -> list[tuple[str, Config]]:
    """For each direction (+1: the M tile up), the anchor with its M tile one power of two that
    way and its N tile one the other way: the block a thread's registers hold (M x N: a
    matmul's accumulator, attention's scores) keeps its size, so the warps stay, while the grid
    and the reuse change. A long key tile with a short query tile spends each step of
    attention's key loop on more keys and launches more programs; Helion's `full` ended on a
    query tile of 64 and a key tile of 256 on attention 1 x 32 x 4096 x 128, from the default's
    256 and 32 (session 42), a move neither the coupled moves (both tiles one way) nor the
    roles' one-parameter steps make. Kept only where the resource model accepts it (fewer
    stages allowed) and, where the grid tile grows, every SM still gets a program. Returns
    (label, full config) per direction that has one."""
    space = hmap.full
    tiles = tiled_dims(problem, space)
    m, n = tiles.get("tile:M"), tiles.get("tile:N")
    if m is None or n is None or problem.hardware is None:
        return []
    out: list[tuple[str, Config]] = []
    for d in directions:
        cfg = dict(anchor)
        moved = True
        for (name, dim, _), step in ((m, d), (n, -d)):
            v = _tile_step(space, cfg, name, dim, step)
            if v is None:
                moved = False
                break
            cfg[name] = v
        if not moved or not space.is_valid(cfg) or _leaves_warpgroup_mma(problem, anchor, cfg, m[0], space):
            continue
        fitted = _fitted_by_stages(problem, space, cfg)
        if fitted is None:
            continue
        if _underfills(problem, space, fitted) and not _underfills(problem, space, anchor):
            continue  # a trade that leaves SMs idle where the anchor filled them
        out.append((f"trade:tile:M{'+' if d > 0 else '-'}tile:N{'-' if d > 0 else '+'}", fitted))
    return out


def _tile_step(space: Space, cfg: Mapping[str, Any], name: str, dim: int, step: int) -> Any:
    """The tile `name` one step of `step` from its value in `cfg`, or None where it is at its
    end, or a step up where it already covers its dim (`dim`, to the next power of two)."""
    v = space[name].step(cfg[name], step)
    return None if v is None or (step > 0 and int(cfg[name]) >= next_pow2(dim)) else v


def _fitted_by_stages(problem: Problem, space: Space, cfg: Config) -> Config | None:
    """`cfg` as the resource model accepts it (`resources.fit`) where only fewer stages make it
    fit, else None: a coupled move or a trade itself stays as it is or is not made."""
    fitted, _ = fit(problem, space, cfg)
    stages = space.by_role("stages")
    kept = [n for n in space.names if stages is None or n != stages.name]
    return None if fitted is None or any(fitted[n] != cfg[n] for n in kept) else fitted


def _leaves_warpgroup_mma(problem: Problem, anchor: Mapping[str, Any], cfg: Mapping[str, Any], m_name: str,
                          space: Space) -> bool:
    """Whether `cfg` takes an MMA-class kernel off the warpgroup MMA the anchor is on (an M tile
    below a warpgroup's rows, or warps not in whole warpgroups: Triton falls back to mma.sync)."""
    wg = problem.hardware.warpgroup_mma if problem.hardware is not None else None
    warps = space.by_role("warps")
    if wg is None or warps is None or problem.kernel_class not in MMA_CLASSES:
        return False
    on = int(anchor[m_name]) >= wg[1] and int(anchor[warps.name]) % wg[0] == 0
    return on and (int(cfg[m_name]) < wg[1] or int(cfg[warps.name]) % wg[0] != 0)


def _underfills(problem: Problem, space: Space, config: Mapping[str, Any]) -> bool:
    """Whether `config` launches fewer programs than the GPU has SMs; False where unknown: the
    grid model (`grid_tiles`) counts independent dims no tile covers (attention's batch and
    heads) only with GRID_UNTILED, so there it would undercount."""
    hw = problem.hardware
    if hw is None or not hw.sms or (not GRID_UNTILED and independent_dims(classify(problem, space))):
        return False
    programs, _ = grid_tiles(problem, space, config)
    return bool(programs) and programs < hw.sms


def _scaled(space: Space, problem: Problem, anchor: Mapping[str, Any], tiles: Mapping[str, tuple[str, int, bool]],
            roles: Sequence[str], d: int, per_thread: float, warps: Param) -> Config | None:
    cfg = dict(anchor)
    moved = False
    for role in roles:
        name, dim, _ = tiles[role]
        v = _tile_step(space, cfg, name, dim, d)
        if v is None:
            continue  # it stays
        cfg[name], moved = v, True
    if not moved:
        return None
    hw = problem.hardware
    assert hw is not None
    elems = held_elements(problem, space, cfg)
    w = _nearest(warps.values, elems / (per_thread * hw.warp_size)) if elems else None
    if w is None:
        return None
    wg = hw.warpgroup_mma
    m = tiles.get("tile:M")
    if wg is not None and m is not None and problem.kernel_class in MMA_CLASSES:
        if int(cfg[m[0]]) >= wg[1] and w % wg[0]:
            w = next((v for v in sorted(warps.values) if v >= w and v % wg[0] == 0), w)
        if _leaves_warpgroup_mma(problem, anchor, {**cfg, warps.name: w}, m[0], space):
            return None
    cfg[warps.name] = w
    return cfg if cfg != dict(anchor) and space.is_valid(cfg) else None
