"""Where a rule applies: the facts of the problems it was confirmed on, and a new kernel judged against them.

A rule holds for a reason that lives in the kernels it was confirmed on, not only in their
class and dtypes. "One block covers the whole row" pays on a row kernel that has a path with no
loop over the row (the row read once, held in registers: the built-in softmax's ONE_CHUNK); on a
kernel that walks the row in steps of its tile on every path (an online softmax that reads the
row twice whatever the tile) the same tile size means something else. So each problem a rule is
learned from records, at the rule's own config:

- `reduction`: how the kernel treats its reduced dim (a row's columns, matmul's K), read from
  its Triton source: `whole` (no path loops over it: a single-block kernel), `loop` (every path
  walks it in tile steps) or `either` (a path without the loop, taken when the tile covers it);
- `held`: what the config did at that shape: `whole` (held whole, no loop), `one trip` (a loop
  kernel whose tile covers the dim: the looping code, run once) or `loop` (several trips);
- `bound`: memory or compute (the problem's FLOPs per byte against the GPU's ridge point);

and the rule records the roles its spaces had, with their ranges. A prediction compares the new
kernel's facts at the rule's config with these (`judge`). A kernel of another kind (`reduction`)
met in a way no confirmation met it (`held`) is outside what the rule was confirmed under: the
rule is declined and the next source serves. Either alone lowers the confidence, with its
reason: a `held` never seen on the same kind of kernel is a shape that forces another path (a
row longer than any tile), an extrapolation in dims; a `reduction` never seen, met the way the
confirmations met it, is the same path in another author's code. So do an unseen bound, a role
no confirming space tuned, and a kernel whose loops cannot be read.

Where the source cannot be read (a replayed dataset of a library's kernel: third-party code is
never copied), the `reduction` facts recorded with the dataset (its header's `meta.source_facts`,
read from the source when `sweep --call` recorded it; `source_facts`) stand in for it, so a
replay judges the kernel as the live one would be.

Why the source and not the space: the built-in softmax and the zoo's online softmax have the
same space (a chunk width 128..16384 that does not depend on the shape), yet only the first has
a path without a loop. The space says only what a shape forces: where every tile value is
smaller than the dim, the kernel must loop there, whatever its source.
"""
from __future__ import annotations

import ast
import logging
import math
import textwrap
from functools import lru_cache
from typing import Any, Iterable, Mapping

from ... import kernel_facts
from ...classify import Classification, classify, tile_dim_name
from ...problem import Problem, kernel_family
from ...space import Space

log = logging.getLogger(__name__)

WHOLE, ONE_TRIP, LOOP, EITHER = "whole", "one trip", "loop", "either"
_BUILTIN_CALLS = {"range", "min", "max", "len", "int", "float", "abs", "print", "isinstance"}
_RANGES = {"range", "static_range"}  # range, tl.range, tl.static_range
_SOURCES: dict[str, str] = {}  # kernel name -> Triton source told by a caller (`note_source`)


# ----------------------------------------------------------------------------- the source

def note_source(kernel: str, source: str) -> None:
    """Tell the scope checks a kernel's Triton source (a kernel not in `kernels`, e.g. one a
    decorator wraps): its loops are then read like a built-in kernel's."""
    _SOURCES[kernel] = textwrap.dedent(source)
    _structure_cached.cache_clear()
    kernel_counted_tiles.cache_clear()


def note_facts(kernel: str, reduction: Mapping[str, str]) -> None:
    """Tell the scope checks a kernel's `reduction` facts (tile parameter -> whole/loop/
    either) where its source is not at hand; a source, when readable, still wins."""
    kernel_facts.tell(kernel, reduction)


def told_facts(kernel: str) -> dict[str, str]:
    """The `reduction` facts told for `kernel` (`note_facts`), else those the last dataset
    header read for it carried; {} when none."""
    return kernel_facts.told(kernel)


def source_facts(source: str, space: Space) -> dict[str, str]:
    """What a dataset records of its kernel's source (`meta.source_facts`): each tile
    parameter's `reduction` (`loop_structure`), those that can be told."""
    out = {}
    for p in space.params:
        if p.role and p.role.split(":")[0] == "tile":
            got = loop_structure(source, p.name)
            if got is not None:
                out[p.name] = got
    return out


def kernel_source(kernel: str) -> str | None:
    """The Triton source of a named kernel (told, built-in or zoo), None when unknown."""
    if kernel in _SOURCES:
        return _SOURCES[kernel]
    try:
        from ... import kernels

        fn = kernels.get(kernel).triton_fn
        src = getattr(fn, "src", None)
        if not src:
            import inspect

            src = inspect.getsource(getattr(fn, "fn", fn))
        return textwrap.dedent(src)
    except Exception as e:  # noqa: BLE001 - a kernel we cannot read is one we know less about
        log.debug("no source for kernel %s: %s: %s", kernel, type(e).__name__, e)
        return None


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _is_range(call: ast.AST) -> bool:
    if not isinstance(call, ast.Call):
        return False
    f = call.func
    return (isinstance(f, ast.Name) and f.id in _RANGES) or (isinstance(f, ast.Attribute) and f.attr in _RANGES)


def loop_structure(source: str, tile: str) -> str | None:
    """How the kernel in `source` (one `def`) walks the dim its parameter `tile` covers: `loop`
    when every path runs a loop whose bounds read `tile` (directly or through a name computed
    from it: `k_tiles = tl.cdiv(K, BLOCK_K)`), `either` when some path has no such loop (a
    branch that holds the dim whole), `whole` when no loop reads it. None when it cannot be
    told: the source does not parse or never names `tile`, or no loop was found and the kernel
    calls helpers that might hold one. A branch that returns before any loop is an exit, not a
    path that holds the dim whole."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None
    fn = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if fn is None or tile not in _names(fn):
        return None
    derived = {tile}
    assigns = [n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value]
    for _ in range(len(assigns) + 1):  # names computed from the tile, to a fixed point
        grown = False
        for a in assigns:
            targets = a.targets if isinstance(a, ast.Assign) else [a.target]
            if _names(a.value) & derived:  # type: ignore[arg-type]
                for t in targets:
                    new = _names(t) - derived
                    if new:
                        derived |= new
                        grown = True
        if not grown:
            break

    def steps(node: ast.AST) -> bool:  # a loop statement whose bounds read the tile
        if isinstance(node, ast.For):
            return _is_range(node.iter) and bool(_names(node.iter) & derived)
        return isinstance(node, ast.While) and bool(_names(node.test) & derived)

    def always(stmts: list[ast.stmt]) -> bool:  # every path through `stmts` runs such a loop
        for s in stmts:
            if steps(s):
                return True
            if isinstance(s, ast.Return):
                return True  # an exit before any work: not a path that holds the dim whole
            if isinstance(s, ast.If) and always(s.body) and always(s.orelse):
                return True
            if isinstance(s, (ast.For, ast.While)) and always(s.body):
                return True
            if isinstance(s, ast.With) and always(s.body):
                return True
        return False

    has_loop = any(steps(n) for n in ast.walk(fn))
    if always(fn.body):
        return LOOP
    if has_loop:
        return EITHER
    helpers = {n.func.id for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return None if helpers - _BUILTIN_CALLS else WHOLE


def _arange_tiles(call: ast.AST, tiles: set[str]) -> set[str]:
    """Tiles named in `tl.arange(...)` calls within `call` (the dims an offsets vector spans)."""
    out: set[str] = set()
    for n in ast.walk(call):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name == "arange":
                out |= {x for a in n.args for x in _names(a)} & tiles
    return out


# where a block pointer's or a tensor descriptor's block shape is passed by position
_BLOCK_SHAPE_ARG = {"make_block_ptr": 4, "make_tensor_descriptor": 3}


def _block_shape(call: ast.AST, tiles: set[str]) -> tuple[str, ...] | None:
    """The tiles of the block shape of `tl.make_block_ptr` / `tl.make_tensor_descriptor`
    (by keyword or by position)."""
    if not isinstance(call, ast.Call):
        return None
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    shape = next((kw.value for kw in call.keywords if kw.arg == "block_shape"), None)
    if shape is None and name in _BLOCK_SHAPE_ARG and len(call.args) > _BLOCK_SHAPE_ARG[name]:
        shape = call.args[_BLOCK_SHAPE_ARG[name]]
    if isinstance(shape, (ast.List, ast.Tuple)):
        return tuple(sorted({x for e in shape.elts for x in _names(e)} & tiles))
    return None


def staged_tiles(source: str, tiles: Iterable[str]) -> list[tuple[str, ...]] | None:
    """The tiles each 2-D load inside a reduction loop of the kernel in `source` reads, one
    entry per load: the tile parameters whose `tl.arange` reaches its pointer (through the names
    computed from it), or the `block_shape` of its block pointer or tensor descriptor. A tiled
    product's software pipeline keeps `stages` copies of these in shared memory, so where a
    kernel loads more than the A and B tiles (a fused gate-and-up projection loads two weight
    tiles per step) this is what the resource model counts (`theory.resources.footprint`).
    A reduction loop is one whose bounds read a tile (directly or through a name computed from
    it). None when the source does not parse or has no such loop."""
    fn = kernel_def(source)
    return _staged(fn, set(tiles)) if fn is not None else None


def kernel_def(source: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The first function defined in `source`, None where it does not parse or defines none."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None
    return next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)


def _staged(fn: ast.FunctionDef | ast.AsyncFunctionDef, tiles: set[str]) -> list[tuple[str, ...]] | None:
    """`staged_tiles` over a parsed kernel."""
    if not tiles:
        return None
    assigns = [n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value]
    spans: dict[str, set[str]] = {}  # name -> tiles whose arange reaches it
    blocks: dict[str, tuple[str, ...]] = {}  # name -> block_shape of the block pointer / descriptor it holds
    derived = set(tiles)  # names computed from a tile (loop bounds)
    for _ in range(len(assigns) + 1):
        grown = False
        for a in assigns:
            targets = [t for t0 in (a.targets if isinstance(a, ast.Assign) else [a.target])
                       for t in ast.walk(t0) if isinstance(t, ast.Name)]
            got = _arange_tiles(a.value, tiles)  # type: ignore[arg-type]
            for n in _names(a.value):  # type: ignore[arg-type]
                got |= spans.get(n, set())
            shape = _block_shape(a.value, tiles)
            if shape is None and isinstance(a.value, ast.Call) and a.value.args:
                first = a.value.args[0]  # tl.advance(ptr, ...) keeps the block pointer's shape
                shape = blocks.get(first.id) if isinstance(first, ast.Name) else None
            bounded = bool(_names(a.value) & derived)  # type: ignore[arg-type]
            for t in targets:
                if not got <= spans.get(t.id, set()):
                    spans[t.id] = spans.get(t.id, set()) | got
                    grown = True
                if shape and t.id not in blocks:
                    blocks[t.id] = shape
                    grown = True
                if bounded and t.id not in derived:
                    derived.add(t.id)
                    grown = True
        if not grown:
            break
    loops = [n for n in ast.walk(fn) if (isinstance(n, ast.For) and _is_range(n.iter)
                                          and _names(n.iter) & derived)
             or (isinstance(n, ast.While) and _names(n.test) & derived)]
    if not loops:
        return None
    out: list[tuple[str, ...]] = []
    seen: set[int] = set()
    for loop in loops:
        for n in ast.walk(loop):
            if id(n) in seen or not isinstance(n, ast.Call):
                continue
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name != "load":
                continue
            seen.add(id(n))
            ptr = n.args[0] if n.args else None
            if isinstance(ptr, ast.Call) and ptr.args and isinstance(ptr.args[0], ast.Name) \
                    and ptr.args[0].id in blocks:
                ptr = ptr.args[0]  # tl.load(tl.advance(block_ptr, ...))
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in blocks:
                got = set(blocks[f.value.id])  # desc.load([...])
            elif isinstance(ptr, ast.Name) and ptr.id in blocks:
                got = set(blocks[ptr.id])  # tl.load(block_ptr)
            elif ptr is not None:
                got = _arange_tiles(ptr, tiles)
                for x in _names(ptr):
                    got |= spans.get(x, set())
            else:
                continue
            if len(got) >= 2:
                out.append(tuple(sorted(got)))
    return out


def kernel_loads(source: str) -> list[tuple[str, ...]] | None:
    """`staged_tiles` over the kernel's parameters whose names read as tiles (`space.infer_role`):
    those of its config list and any its caller passes (`autotune.fixed`) alike."""
    from ...space import infer_role

    fn = kernel_def(source)
    if fn is None:
        return None
    args = fn.args.args + fn.args.kwonlyargs
    return _staged(fn, {a.arg for a in args if (infer_role(a.arg) or "").startswith("tile")})


def counted_tiles(source: str) -> frozenset[str]:
    """Parameters the kernel in `source` iterates as a count: a `for` over `range(T)` or
    `range(0, T)` (`tl.range`, `tl.static_range` alike) whose bound is the bare name T. A
    program so written owns T items of a dim and handles them one per trip (RoPE's
    TOKENS_PER_PROGRAM): T adds serial trips, not vector width, unlike a tile that is the
    step of `range(0, n, T)` (a vector walked over a dim) or a bound computed from a dim
    (`tl.cdiv(K, BLOCK_K)`). Empty where the source does not parse."""
    fn = kernel_def(source)
    if fn is None:
        return frozenset()
    out: set[str] = set()
    for n in ast.walk(fn):
        if not (isinstance(n, ast.For) and _is_range(n.iter)) or n.iter.keywords:  # type: ignore[attr-defined]
            continue
        args = n.iter.args  # type: ignore[attr-defined]
        if len(args) == 2 and isinstance(args[0], ast.Constant) and args[0].value == 0:
            args = args[1:]
        if len(args) == 1 and isinstance(args[0], ast.Name):
            out.add(args[0].id)
    return frozenset(out)


@lru_cache(maxsize=256)
def kernel_counted_tiles(kernel: str) -> frozenset[str]:
    """`counted_tiles` of a named kernel's source (told, built-in or zoo); empty when the
    source is not at hand (a replayed third-party dataset: nothing is assumed)."""
    src = kernel_source(kernel)
    return counted_tiles(src) if src else frozenset()


@lru_cache(maxsize=256)
def _structure_cached(kernel: str, tile: str) -> str | None:
    src = kernel_source(kernel)
    return loop_structure(src, tile) if src else None


# ----------------------------------------------------------------------------- one problem's facts

def reduction_tile(problem: Problem, space: Space, cls: Classification | None = None
                   ) -> tuple[str, str, int] | None:
    """(role, parameter name, dim) of the space's one tile over a reduced dim (a row's columns,
    matmul's K), None when it has none or several."""
    from ..diagnose import tiled_dims

    cls = cls or classify(problem, space)
    red = [(role, name, dim) for role, (name, dim, is_red) in tiled_dims(problem, space).items() if is_red]
    if len(red) != 1:
        return None
    return red[0]  # a split:K factor is a config value: `held` divides the extent by it


def structure(problem: Problem, space: Space) -> str | None:
    """The kernel's `reduction` fact (module docstring), None when unknown."""
    got = reduction_tile(problem, space)
    if not got:
        return None
    read = _structure_cached(problem.kernel, got[1])
    return read if read is not None else told_facts(problem.kernel).get(got[1])


def held(problem: Problem, space: Space, config: Mapping[str, Any], kernel_structure: str | None) -> str | None:
    """The `held` fact of `config` on this problem: whole, one trip or loop; None when unknown
    (no reduction tile, or a tile that covers the dim of a kernel whose loops are not known)."""
    got = reduction_tile(problem, space)
    if got is None:
        return None
    _, name, dim = got
    tile = config.get(name)
    if not isinstance(tile, int) or isinstance(tile, bool) or tile <= 0:
        return None
    split = space.by_role("split:K")
    if split is not None and isinstance(config.get(split.name), int) and config[split.name] > 1:
        dim = math.ceil(dim / int(config[split.name]))
    covers = tile >= dim
    if kernel_structure == WHOLE:
        return WHOLE
    if kernel_structure == EITHER:
        return WHOLE if covers else LOOP
    if kernel_structure == LOOP:
        return ONE_TRIP if covers else LOOP
    return None if covers else LOOP  # a kernel that handles a dim longer than its tile loops


def bound(problem: Problem) -> str | None:
    """memory or compute: the problem's FLOPs per byte against the GPU's ridge point."""
    from ..diagnose import problem_bound

    return problem_bound(problem)


def facts(problem: Problem, space: Space, config: Mapping[str, Any]) -> dict[str, Any]:
    """What a prediction (or one problem a rule is learned from) records: reduction, held,
    bound; a fact that cannot be told is left out."""
    s = structure(problem, space)
    out = {"reduction": s, "held": held(problem, space, config, s), "bound": bound(problem)}
    return {k: v for k, v in out.items() if v is not None}


def space_roles(space: Space, cls: Classification) -> dict[str, list[Any]]:
    """role -> [min, max] of its numeric values ([] when not numeric), tile roles under the
    dim they cover (`tile:cols` for BLOCK over a row's columns), so two kernels that name
    their tiles differently compare."""
    out: dict[str, list[Any]] = {}
    counts: dict[str, int] = {}
    for p in space.params:
        if p.role:
            counts[p.role] = counts.get(p.role, 0) + 1
    for p in space.params:
        if not p.role or counts[p.role] != 1:
            continue
        name = tile_dim_name(p.role, cls)
        key = f"tile:{name}" if name else p.role
        nums = [v for v in p.values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        out[key] = [min(nums), max(nums)] if nums else []
    return out


def merge_roles(spaces: Iterable[Mapping[str, list[Any]]]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for roles in spaces:
        for r, rng in roles.items():
            if r not in out:
                out[r] = list(rng)
            elif rng and out[r]:
                out[r] = [min(out[r][0], rng[0]), max(out[r][1], rng[1])]
    return out


def _phrase(s: str | None, dim: str) -> str:
    return {WHOLE: f"no loop over {dim}", LOOP: f"{dim} walked in tile steps on every path",
            EITHER: f"{dim} held whole when the tile covers it, else looped"}.get(s or "", "loops not known")


# ----------------------------------------------------------------------------- a rule's conditions

SCOPE_FACTOR = 0.8  # confidence kept per condition a rule applies across unconfirmed (as for a GPU's family)


@lru_cache(maxsize=4096)
def _migrated(kernel: str, dims: tuple, hardware: str, forms: tuple) -> tuple[dict, dict]:
    """(facts, roles) of one problem an older rule was learned from, rebuilt from the kernel's
    spec (a built-in or zoo kernel) at the rule's config; ({}, {}) when the kernel is unknown."""
    from ... import kernels
    from ...hardware import lookup
    from .instantiate import instantiate

    try:
        spec = kernels.get(kernel)
        problem = spec.problem(dict(dims), lookup(hardware, strict=False) if hardware else None)
        space = spec.space()
        cfg = instantiate(dict(forms), problem, space)
        return facts(problem, space, cfg), space_roles(space, classify(problem, space))
    except Exception as e:  # noqa: BLE001 - a kernel we cannot rebuild says nothing
        log.debug("no facts for %s %s: %s: %s", kernel, dims, type(e).__name__, e)
        return {}, {}


def confirmed(rule: Any) -> dict[str, Any]:
    """What `rule` was confirmed under: `held`, `reduction`, `bound` (value -> problems),
    `unknown` (problems whose facts could not be told), `roles`, and `kernels` by `held`.
    Facts an older file lacks are rebuilt from the kernels' specs (cached on the rule)."""
    got = rule.__dict__.get("_confirmed")
    if got is not None:
        return got
    forms = tuple(sorted(rule.forms.items()))
    out: dict[str, Any] = {"held": {}, "reduction": {}, "bound": {}, "unknown": 0, "unknown_reduction": 0,
                           "kernels": {}, "by_reduction": {}}
    roles = [rule.roles] if rule.roles is not None else []
    for e in rule.learned_from:
        if "facts" in e:
            f = dict(e["facts"])
        else:
            f, r = _migrated(str(e.get("kernel", "")), tuple(sorted((e.get("dims") or {}).items())),
                             str(e.get("hardware", "")), forms)
            if rule.roles is None and r:
                roles.append(r)
        for k in ("held", "reduction", "bound"):
            if k in f:
                out[k][f[k]] = out[k].get(f[k], 0) + 1
        out["unknown"] += "held" not in f
        out["unknown_reduction"] += "reduction" not in f
        fam = kernel_family(str(e.get("kernel", "")))
        if "held" in f:
            out["kernels"].setdefault(f["held"], set()).add(fam)
        if "reduction" in f:
            out["by_reduction"].setdefault(f["reduction"], set()).add(fam)
    out["roles"] = merge_roles(roles)
    rule.__dict__["_confirmed"] = out
    return out


def _role_key(role: str, cls: Classification) -> str:
    name = tile_dim_name(role, cls)
    return f"tile:{name}" if name else role


def judge(rule: Any, problem: Problem, space: Space, config: Mapping[str, Any],
          cls: Classification | None = None) -> tuple[str | None, list[str]]:
    """(why the rule is outside what it was confirmed under, or None; reasons it applies
    across a condition it was not confirmed under, each costing `SCOPE_FACTOR`)."""
    cls = cls or classify(problem, space)
    seen = confirmed(rule)
    mine = facts(problem, space, config)
    tile = reduction_tile(problem, space, cls)
    dim = tile_dim_name(tile[0], cls) if tile else None
    soft: list[str] = []
    helds = seen["held"]
    fam = kernel_family(problem.kernel)
    if tile is not None and helds:
        h, s = mine.get("held"), mine.get("reduction")
        structs = seen["reduction"]
        d = dim or "the reduced dim"
        where = ", ".join(f"{n} problem{'s' if n > 1 else ''} where {d} was "
                          + ("held whole" if k == WHOLE else "walked in one trip" if k == ONE_TRIP else "looped")
                          + f" ({', '.join(sorted(seen['kernels'].get(k, ())))})" for k, n in sorted(helds.items()))
        kinds = "; ".join(f"{', '.join(sorted(seen['by_reduction'][k]))}: {_phrase(k, d)}" for k in sorted(structs))
        here = (f"{fam}: {_phrase(s, d)}, and {tile[1]}={config.get(tile[1])} "
                + ("holds it whole" if h == WHOLE else "covers it in one trip of the loop" if h == ONE_TRIP
                   else "loops over it"))
        new_path = h is not None and h not in helds
        new_kind = s is not None and bool(structs) and s not in structs
        if new_path and new_kind and not seen["unknown"] and not seen["unknown_reduction"]:
            # the kernel is of another kind and meets the dim in a way no confirmation did
            return f"confirmed on {where}, in kernels of another kind ({kinds}); here {here}", soft
        if new_path:  # the same kind of kernel, where this shape forces another path: a dims extrapolation
            soft.append(f"confirmed on {where}; here {here}")
        elif new_kind:  # the path was seen, in kernels of another kind
            soft.append(f"confirmed on kernels of another kind ({kinds}); here {fam}: {_phrase(s, d)}")
        elif h is None and helds.keys() != {LOOP}:
            soft.append(f"whether {fam} holds {d} whole when {tile[1]}={config.get(tile[1])} covers it is "
                        f"not known (its source cannot be read); confirmed on {where}")
    b = mine.get("bound")
    if b is not None and seen["bound"] and b not in seen["bound"]:
        soft.append(f"{b}-bound here, confirmed only on {'/'.join(sorted(seen['bound']))}-bound problems")
    roles = seen["roles"]
    if roles:
        new = space_roles(space, cls)
        names = {_role_key(p.role, cls): p.name for p in space.params if p.role}
        unseen = [f"{names.get(k, k)} ({k})" for k in new if k not in roles]
        apart = [f"{names.get(k, k)} {v[0]}..{v[1]} (confirmed over {roles[k][0]}..{roles[k][1]})"
                 for k, v in new.items() if v and roles.get(k) and (v[1] < roles[k][0] or v[0] > roles[k][1])]
        if unseen:
            soft.append(f"tunes {', '.join(unseen)}, which no space it was confirmed on had")
        if apart:
            soft.append(f"values outside every space it was confirmed on: {', '.join(apart)}")
    return None, soft
