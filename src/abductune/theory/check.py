"""Zero-shot predictions checked by compiling them, with no GPU: Triton compiles a config for
the target's architecture on the CPU and ptxas reports its registers and spills
(`measure.static.compile_one`), about a second per config once Triton's cache holds it.

A rule that scales tiles or warps past the shapes it was learned on can name a config that
spills: on an H100, the "all" matmul rule's 64x256x64 tile with 4 warps spills 2.8 KB per
thread at K=700 (15x the tuned config's time) and not at K=768 -- the spills came where K
is not a multiple of the K tile. Only the compiler knows, so a prediction served without
measuring is compiled first: a spilling config is retried with more warps or a smaller K
tile (fewer registers per thread), then the runner-up rule's config is tried."""
from __future__ import annotations

import dataclasses
import importlib.util
from typing import Any, Callable, Sequence

from ..hardware import HardwareInfo
from .resources import output_tiles_larger_first


def unavailable(hw: HardwareInfo | None) -> str:
    """Why predictions for `hw` cannot be compile-checked here, or '' when they can."""
    if importlib.util.find_spec("triton") is None:
        return "Triton is not installed (pip install 'abductune[gpu]')"
    if hw is None or hw.vendor != "nvidia" or not hw.arch:
        return f"compile checks are for NVIDIA GPUs; {getattr(hw, 'name', 'no GPU')} is not one"
    return ""


# spill stores (bytes per thread, as ptxas reports them) from which a config counts as spilling:
# 64 registers' worth, a quarter of a thread's 255. Below it ptxas spills a few values out of the
# hot loop and such configs are often the fastest; from it on, none was. Chosen in session 31
# after looking at every recorded config of the zoo and the bundled data
# (`benchmarks/spill_table.py`): configs spilling 1-255 bytes include shape optima (1-4% of
# them within 5% of the optimum), configs spilling 256 bytes or more are all at least 1.08x the
# optimum (median 3x). In-sample there, so the figures that use it say so.
HEAVY_SPILL_BYTES = 256


def verdict(facts: dict[str, Any]) -> str:
    """What is wrong with a compiled config ('' when nothing is): an error, or spills of at
    least `HEAVY_SPILL_BYTES`."""
    if facts["status"] != "ok":
        return str(facts["error"] or facts["status"])
    spilled = facts["spills"] or 0
    return f"spills {spilled} bytes" if spilled >= HEAVY_SPILL_BYTES else ""


def first_clean(spec: Any, problem: Any, preds: Sequence[Any],
                echo: Callable[[str], None] = lambda _s: None,
                compile_fn: Callable[..., dict[str, Any]] | None = None) -> Any:
    """The first of `preds` (theory-store Predictions, best first) whose config compiles for
    the problem's GPU without spilling heavily (`HEAVY_SPILL_BYTES`) and can launch there; a
    spilling config is retried with fewer registers per thread (`relief`) before the next
    prediction. Where every config tried compiles but spills heavily, the one with the fewest
    spill bytes is served (local memory traffic grows with them), its Prediction saying so.
    Returns the Prediction (its config replaced where it was relieved) or None when nothing
    tried compiles; `echo` hears each config passed over and why. The kernel's own config (source "default", served where nothing
    learned was trusted) is not relieved of spills: only a compile failure passes it over."""
    from ..format import format_config
    from ..measure.static import compile_one

    compile_fn = compile_fn or compile_one
    space = spec.space()
    least: tuple[int, Any, dict[str, Any]] | None = None  # (spill bytes, prediction, config) of the lightest spill
    for p in preds:
        first = dict(p.config)
        todo = [first]
        first_bad = ""
        while todo:
            cfg = todo.pop(0)
            facts = compile_fn(spec, cfg, problem.to_dict(), problem.hardware.arch)
            bad = verdict(facts)
            spilled = bool(bad) and facts["status"] == "ok"  # it compiled, and spills heavily
            if spilled and getattr(p, "source", "") == "default":
                # the kernel's own config, served because nothing learned was trusted: its author
                # chose it, so it moves only to a neighbour that compiles clean (`_clean_relief`);
                # where none does, it is served spills and all. Only a config that cannot compile
                # is passed over
                moved = _clean_relief(spec, problem, space, cfg, bad, compile_fn, echo)
                if moved is not None:
                    return dataclasses.replace(p, config=moved[0], repairs=(*p.repairs, moved[1]))
                echo(f"checked: the kernel's own config compiles for {problem.hardware.arch}; it {bad}, "
                     "and no config near it compiles clean: served as its author chose it")
                return p
            if not bad:
                light = f", {facts['spills']} bytes of spills (light)" if facts.get("spills") else ", no spills"
                echo(f"checked: compiles for {problem.hardware.arch} with {facts['registers']} registers{light}")
                if cfg is first:
                    return p
                moved = ", ".join(f"{k} {first[k]} -> {cfg[k]}" for k in cfg if first.get(k) != cfg[k])
                return dataclasses.replace(p, config=cfg, repairs=(
                    *p.repairs, f"compile check: {moved} (with the values before, it {first_bad})"))
            if cfg is first:
                first_bad = bad
            if spilled and (least is None or facts["spills"] < least[0]):
                least = (facts["spills"], p, cfg)
            echo(f"passed over {format_config(cfg)}: {bad}")
            if spilled and cfg is first:  # relief configs differ from it and from each other
                todo += relief(space, cfg)
    if least is None:
        return None
    spilled, p, cfg = least
    echo(f"every config tried spills: served {format_config(cfg)}, the lightest ({spilled} bytes)")
    return dataclasses.replace(p, config=cfg, repairs=(
        *p.repairs, f"compile check: every config tried spills; this one the least ({spilled} bytes)"))


def _clean_relief(spec: Any, problem: Any, space: Any, cfg: dict[str, Any], bad: str,
                  compile_fn: Callable[..., dict[str, Any]],
                  echo: Callable[[str], None]) -> tuple[dict[str, Any], str] | None:
    """The first of `relief(cfg)` that compiles with no heavy spill, and the repair that names
    the move; None where every one fails or spills. For the kernel's own config, which spills
    `bad`: of every config recorded on the zoo and the bundled data, none spilling
    `HEAVY_SPILL_BYTES` or more ran within 8% of its shape's optimum (session 31's spill
    table), so a clean neighbour is the better bet; a neighbour that spills less is not, and
    the author's choice stands (FlagGems' kron at 4,096 x 4,096: its own BLOCK_N 2,048 on 16
    warps spills 488 bytes at 2.9x its optimum, BLOCK_N 1,024 none at 2.0x; fla's chunked GLA dv
    backward: its own spills 896 bytes at 1.53x, and every neighbour spills too, the least at 1.62x)."""
    from ..format import format_config

    for c in relief(space, cfg):
        facts = compile_fn(spec, c, problem.to_dict(), problem.hardware.arch)
        why = verdict(facts)
        if why:
            echo(f"passed over {format_config(c)}: {why}")
            continue
        moved = ", ".join(f"{k} {cfg[k]} -> {c[k]}" for k in c if cfg.get(k) != c[k])
        echo(f"checked: the kernel's own config {bad}; {moved} compiles clean for {problem.hardware.arch}")
        return c, f"compile check: {moved} (the kernel's own values {bad})"
    return None


def relief(space: Any, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """Configs near a spilling one that hold fewer registers per thread, most alike first: more
    warps (the accumulator tile spread over more threads), a smaller K tile (fewer operand
    registers; compiled for sm_90, a 64x128x128 tile spills at K=4321 with 4 or 8 warps and a
    64x128x64 one does not), then both; then a smaller accumulator: the larger output tile
    halved, once and then twice (`RELIEF_HALVINGS`), as `resources.fit` shrinks it last. Where
    more warps and a smaller K tile still spill (or the warps are at the space's end), only the
    accumulator is left to give: the zoo's split-K matmul at 512 x 5,000 x 3,000 (its K and N
    off Triton's divisibility by 16, the operand tiles held in registers) spilled 1,680 to
    2,320 bytes on each of the three answers the check was given, all 128 x 256 tiles at 8
    warps, and was served the lightest of them at 3.2x its optimum; 128 x 128 spilled 328
    bytes there, 128 x 64 none."""
    out = []
    warps, tile_k = space.by_role("warps"), space.by_role("tile:K")
    more = warps.step(cfg[warps.name], +1) if warps is not None else None
    less = tile_k.step(cfg[tile_k.name], -1) if tile_k is not None else None
    for change in ({warps.name: more} if more is not None else None,
                   {tile_k.name: less} if less is not None else None,
                   {warps.name: more, tile_k.name: less} if more is not None and less is not None else None):
        if change is not None and space.is_valid({**cfg, **change}):
            out.append({**cfg, **change})
    smaller = dict(cfg)
    for _ in range(RELIEF_HALVINGS):
        smaller = halve_larger_tile(space, smaller)
        if smaller is None:
            break
        if space.is_valid(smaller) and smaller not in out:
            out.append(dict(smaller))
    return out


# output-tile halvings `relief` offers: a quarter of the accumulator is as far as a repair of
# a prediction goes before the next prediction is asked (a move, not a new answer)
RELIEF_HALVINGS = 2


def halve_larger_tile(space: Any, cfg: dict[str, Any]) -> dict[str, Any] | None:
    """`cfg` with the larger of its M and N output tiles one step smaller (N on a tie: the
    order `resources.fit` shrinks them in), or the other where that one cannot shrink, or None."""
    for p in output_tiles_larger_first(space, cfg):
        v = p.step(cfg[p.name], -1)
        if v is not None:
            return {**cfg, p.name: v}
    return None
