"""The resource model: what a config costs in shared memory and registers, read from its
roles and the problem's dtypes and held against the hardware's limits. No compile, no GPU.

It answers two questions before a measurement is spent:

- **Can it launch?** (`infeasible`) A tiled matmul's software pipeline keeps `stages` copies
  of its A tile (tile:M x tile:K) and B tile (tile:K x tile:N) in shared memory, in the
  inputs' element sizes (an int4 operand packs two per byte); more than the hardware's
  per-block shared memory fails at launch, whatever the kernel's names. This is the idea of
  Triton's `early_config_prune` for its matmuls, stated over roles so it holds for any kernel
  whose parameters carry them. Too many threads (warps x warp size over the per-block
  maximum) cannot launch either.
- **Will it spill badly?** (`spills`) The fp32 accumulator of an M x N output tile is spread
  over the program's threads; past `ACC_MAX` values per thread, a thread's 255 registers
  cannot hold it beside addresses and operands, and ptxas spills most of it to local memory:
  the config runs, slowly. Predictions and seeds avoid it; abduction's draws and moves take it only after every
  other candidate.
  At exactly `ACC_MAX` ptxas spills a little, and on Hopper those configs (a 128 x 256 tile
  on 8 warps) are often the fastest: they are not avoided. But a block's threads share 64 K
  registers (`reg_cap`: 128 each at 16 warps), and an accumulator that fills a thread's share
  leaves nothing for operands and addresses: it spills, whatever `ACC_MAX` allows (session 33:
  FlagGems' block-scaled fp8 matmul at 512 x 128 on 16 warps spilled 1.2 KB and ran 11x its
  optimum; every zoo and bundled record so placed that ran spilled, the best 4x its optimum).
  Beside the accumulator, a product keeps slices of its A and B tiles in registers: where the
  accumulator and both tiles (packed into 32-bit registers) come past `LIVE_MAX` a thread (a 16
  x 256 output tile with a K tile of 128, bf16, on 2 warps: 64 + 272), no recorded config ran
  within 10% of its optimum. Predictions and seeds avoid those too (`trouble`); abduction's
  draws and moves do not defer them (`spills_held` keeps to the accumulator): deferring them
  there moved no search figure, and where every claim points the wrong way (the bundled matmul
  with its times inverted, `tests/test_abduction_trust.py`) it put abduction 6% behind seeded
  random at 16 evaluations.
  A's and B's element sizes are read by name where the signature says (`costs.product_operand_bytes`:
  an output-first `scaled_mm(out, a, b, ...)` read by position took the bf16 output for A).

- **Attention** (the class's query tile @tile:M and key tile @tile:N over the sequence, the
  whole head dim per program): the query tile stays in shared memory, and each pipeline stage
  holds a key and a value tile; per thread, the fp32 output accumulator (query tile x head
  dim) and the fp32 score tile S (query x key tile) live in registers beside P, the scores cast
  to the value's type for the P.V product. A thread has at most 255 registers, and a block's
  threads share 64 K (`reg_cap`: 128 each at 16 warps). Where the tiles alone fill the cap,
  nothing is left for addresses and loop state, and the program spills (`spills`). On a
  warpgroup MMA (Hopper's wgmma) one instruction keeps its whole accumulator and any register
  operand resident, so where S alone, or the output accumulator with P, fills the cap, ptxas
  cannot compile the kernel at all (`infeasible`; it asks for a higher register target).

Kernels whose tile roles do not say what is buffered (row kernels, anything the classifier
cannot read) get no shared-memory or register claim: the model says nothing rather than guess,
and the compile check (`theory.check`) or the measurement decides.

Where the kernel's source is known to load more per step than one A and one B tile (a fused
gate-and-up projection loads two weight tiles: `kernel_facts.loads`, read from the source by
`theory.store.scope.kernel_loads`), the stage holds every 2-D tile its reduction loop loads.

The figures were read off the built-in matmul's recorded H100 data only (never the zoo): Triton
3.6 allocated stages - 1 or stages copies of the per-stage tiles (the estimate keeps the larger,
so it never calls a launchable config impossible by undercounting); session 22 refined this on
Liger's fused MoE records (in-sample there): `stages` copies on the warpgroup MMA, one fewer
off it (its 32 two-warp configs that ran with more than the limit allows at `stages` copies ran
with one fewer; the model now calls all 320 of its out-of-shared-memory failures infeasible and
none of the configs that ran); across the zoo and the bundled data the change moves no failure
to a pass. Recorded configs with
128 accumulator values per thread spilled up to 1.2 KB yet were often the fastest (the built-in
space allows no more than 128, so past it there is no data: the bound is the register file's).
The attention model states the FlashAttention-2 layout and NVIDIA's documented register limits;
its one choice, that tiles which fill the cap (>=) spill or fail, was made after looking at the
zoo's two attention kernels (session 16, 2,190 records), so it is in-sample there: its shared
memory is never below what Triton allocated
and equals the kernels' own space bound; the records it calls infeasible are exactly the 10
ptxas refused (256 x 256 at 16 warps); 128 of the 132 it says spill did, but it misses lighter
spills (370 spilling records it passes, such as 64 x 64 tiles on 2 warps, on mma.sync).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .. import kernel_facts
from ..classify import classify
from ..costs import element_bytes, operand_bytes, product_operand_bytes
from ..hardware import HardwareInfo
from ..problem import Problem
from ..space import Config, Space
from .diagnose import on_warpgroup_mma

# Triton's num_stages default, for a space that does not tune stages
DEFAULT_STAGES = 3
# fp32 accumulator values per thread past which most of the accumulator spills (module docstring)
ACC_MAX = 128
# the smallest M a Triton tl.dot takes (its documented minimum tile side), for a kernel whose
# space has no M tile
MIN_DOT_M = 16
# bytes of reduction dim Triton's tl.dot takes at least on NVIDIA GPUs: K >= 16 for 16-bit inputs,
# 32 for 8-bit, 8 for 32-bit (`min_dot_size` of Triton's NVIDIA backend, 3.x; M and N pad down to
# 1): a K tile below it does not compile. Every recorded product and attention kernel agrees
# (FlagGems' attention: all 640 key tiles of 8 failed to compile, all of 16 compiled)
MIN_DOT_K_BYTES = 32
# pipeline depth `fit` keeps while it can shrink the K tile instead
STAGES_KEPT = 3
# NVIDIA's limits (CUDA programming guide, compute capability 3.x and later): registers one
# thread may have, and 32-bit registers one block's threads share; ptxas allocates in 8s
MAX_REGS_PER_THREAD = 255
REGS_PER_BLOCK = 65536
REG_GRANULE = 8
# `hopeless`: an accumulator past this many times a thread's registers is not worth a compile
HOPELESS_REGS_X = 2
# a tiled product's fp32 accumulator plus its A and B tiles (packed into 32-bit registers) per
# thread past which no recorded config ran within 10% of its shape's optimum (`_spills`): read
# off the zoo's, the bundled and the fp8 matmul records (session 35, in-sample there), then
# judged on a kernel recorded after it was set, fla's bf16 matmul (session 36: 89 configs past
# it ran, none within 10%, the closest 2.35x; 37 of them the accumulator bounds let through)
LIVE_MAX = 320


@dataclass(frozen=True)
class Footprint:
    """What one program of a config holds. None where the model cannot tell."""

    smem_bytes: int | None  # pipeline buffers in shared memory
    acc_per_thread: float | None  # fp32 accumulator values per thread
    threads: int | None
    # registers per thread the model expects live at the program's heaviest point, what one
    # warpgroup MMA keeps resident (None off such an MMA), and the cap (attention only)
    live_regs: float | None = None
    mma_regs: float | None = None
    reg_cap: int | None = None
    # a tiled product's A and B tiles per thread, in 32-bit registers (None off a product)
    operand_regs: float | None = None

    @property
    def held_regs(self) -> float | None:
        """Registers per thread the model holds live: attention's tiles (`live_regs`), or a tiled
        product's fp32 accumulator and its A and B tiles; None where it models neither."""
        if self.live_regs is not None:
            return self.live_regs
        if self.acc_per_thread is None:
            return None
        return self.acc_per_thread + (self.operand_regs or 0.0)


def reg_cap(hw: HardwareInfo | None, threads: int | None) -> int | None:
    """Registers a thread of a `threads`-thread block can have on `hw` (NVIDIA: the per-block
    register file shared out, at most 255, in ptxas's granule); None where unknown."""
    if hw is None or hw.vendor != "nvidia" or not threads:
        return None
    return min(MAX_REGS_PER_THREAD, (REGS_PER_BLOCK // threads) // REG_GRANULE * REG_GRANULE)


def _value(space: Space, config: Mapping[str, Any], role: str) -> int | None:
    p = space.by_role(role)
    if p is None or p.name not in config:
        return None
    v = config[p.name]
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def footprint(problem: Problem, space: Space, config: Mapping[str, Any]) -> Footprint:
    bm, bn, bk = (_value(space, config, r) for r in ("tile:M", "tile:N", "tile:K"))
    warps = _value(space, config, "warps")
    hw = problem.hardware
    warp = hw.warp_size if hw is not None and hw.warp_size else 32
    threads = warps * warp if warps else None
    smem = acc = None
    if bn and bk and (bm or space.by_role("tile:M") is None):
        # a tiled product: A and B tiles stream through the pipeline. A kernel that fixes its M
        # tile in its code (Liger's fused MoE) still buffers the B tile: with M at the smallest
        # tile a tensor-core dot takes, the estimate is a lower bound, so what it calls
        # infeasible is; the accumulator is not estimated without the real M tile.
        stages = _value(space, config, "stages") or DEFAULT_STAGES
        if on_warpgroup_mma(problem, space, config) is False:
            stages = max(stages - 1, 1)  # off the warpgroup MMA Triton keeps one copy fewer (docstring)
        sa, sb = product_operand_bytes(problem.dtypes)  # A and B, by name where it says
        smem = int(math.ceil(max(stages, 1) * ((bm or MIN_DOT_M) * bk * sa + bk * bn * sb)))
        staged = _staged_bytes(problem, space, config, sa, sb)
        if staged is not None:  # the kernel loads more per step than A and B (its source says)
            smem = max(smem, int(math.ceil(max(stages, 1) * staged)))
        if threads and bm:
            acc = bm * bn / threads
            # the register file a thread of this block can have: an accumulator that fills it
            # leaves nothing for operands and addresses (as attention's tiles, `_spills`)
            return Footprint(smem, acc, threads, reg_cap=reg_cap(hw, threads),
                             operand_regs=(bm * bk * sa + bk * bn * sb) / 4 / threads)
    elif bm and bn and not bk and warps:
        got = _attention(problem, space, config, bm, bn, warps, threads)
        if got is not None:
            return got
    return Footprint(smem, acc, threads)


def _staged_bytes(problem: Problem, space: Space, config: Mapping[str, Any], sa: float, sb: float) -> float | None:
    """Bytes one pipeline stage holds by the kernel's source (`kernel_facts.loads`: the tiles
    each 2-D load of its reduction loop reads), each load in its operand's element size (A's for
    an M x K tile, B's for a K x N one, the larger otherwise); None where the loads are not
    known or name a tile the config does not set."""
    loads = kernel_facts.loads(problem.kernel)
    if not loads:
        return None
    total = 0.0
    for tile in loads:
        vals = [config.get(n) for n in tile]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
            return None
        roles = {space[n].role for n in tile if n in space.names}
        size = sa if roles == {"tile:M", "tile:K"} else sb if roles == {"tile:K", "tile:N"} else max(sa, sb)
        total += math.prod(vals) * size  # type: ignore[arg-type]
    return total


def _attention(problem: Problem, space: Space, config: Mapping[str, Any], bq: int, bk: int,
               warps: int, threads: int) -> Footprint | None:
    """An attention program's footprint (module docstring): query tile `bq`, key tile `bk`."""
    cls = classify(problem, space)
    hd = cls.dims.get("head_dim")
    if cls.kernel_class != "attention" or not hd:
        return None
    hd = int(_value(space, config, "tile:D") or hd)  # a kernel that tiles the head dim holds a slice
    stages = _value(space, config, "stages") or DEFAULT_STAGES
    sq, sk, sv = _qkv_bytes(problem)
    smem = int(math.ceil(bq * hd * sq + max(stages, 1) * bk * hd * (sk + sv)))
    out_acc, scores = bq * hd / threads, bq * bk / threads  # fp32, one register each
    p = scores * sv / 4  # P in the value's type, packed into 32-bit registers
    hw = problem.hardware
    wg = hw.warpgroup_mma if hw is not None else None
    on_wgmma = wg is not None and warps % wg[0] == 0 and bq >= wg[1]
    return Footprint(smem, out_acc + scores, threads, live_regs=out_acc + scores + p,
                     mma_regs=max(scores, out_acc + p) if on_wgmma else None, reg_cap=reg_cap(hw, threads))


def _qkv_bytes(problem: Problem) -> tuple[float, float, float]:
    """Element sizes of Q, K and V: the first three inputs (fewer named: the last repeats)."""
    names = [n for n in problem.dtypes if n.lower() not in ("o", "out", "output", "y")]
    sizes = [element_bytes(problem.dtypes[n]) for n in names] or list(operand_bytes(problem.dtypes)[:1])
    sizes += [sizes[-1]] * (3 - len(sizes))
    return sizes[0], sizes[1], sizes[2]


def infeasible(problem: Problem, space: Space, config: Mapping[str, Any]) -> str | None:
    """Why `config` cannot launch on the problem's hardware, or None when the model sees no
    reason (which is not a promise that it can)."""
    hw = problem.hardware
    if hw is None:
        return None
    short = _dot_k_short(problem, space, config) if hw.vendor == "nvidia" else None
    if short is not None:
        return short
    fp = footprint(problem, space, config)
    limit = hw.smem_per_block
    if fp.smem_bytes is not None and limit and fp.smem_bytes > limit:
        return (f"needs about {fp.smem_bytes // 1024} KB of shared memory for its pipeline, over the "
                f"{limit // 1024} KB a block can have on {hw.name}")
    if fp.threads is not None and fp.threads > 1024:
        return f"{fp.threads} threads per program, over the 1024 a block can have"
    if fp.mma_regs is not None and fp.reg_cap is not None and fp.mma_regs >= fp.reg_cap:
        return (f"one warpgroup MMA keeps about {fp.mma_regs:g} registers per thread resident, as many as "
                f"the {fp.reg_cap} a thread of {fp.threads} can have: ptxas cannot compile it")
    return None


def _dot_k_short(problem: Problem, space: Space, config: Mapping[str, Any]) -> str | None:
    """Why the config's dot has a reduction dim Triton will not compile (`MIN_DOT_K_BYTES`), or
    None: a product's K tile (in the wider operand's type: a dequantised operand is at least as
    wide as the other), attention's key tile (the K of P.V, in the value's type)."""
    bm, bn, bk = (_value(space, config, r) for r in ("tile:M", "tile:N", "tile:K"))
    if bn and bk:
        sa, sb = product_operand_bytes(problem.dtypes)
        k, size, what = bk, max(sa, sb), "K tile"
    elif bm and bn and not bk and classify(problem, space).kernel_class == "attention":
        k, size, what = bn, _qkv_bytes(problem)[2], "key tile (the K of P.V)"
    else:
        return None
    least = MIN_DOT_K_BYTES / size if size else 0
    if k < least:
        return f"has a {what} of {k}, below the {least:g} a tl.dot of {size:g}-byte inputs takes: it does not compile"
    return None


def spills(problem: Problem, space: Space, config: Mapping[str, Any]) -> str | None:
    """Why `config` will spill registers, or None."""
    return _spills(footprint(problem, space, config))


def _spills(fp: Footprint) -> str | None:
    """`spills` of a computed footprint: the accumulator's bounds (`_acc_spills`), then a tiled
    product's accumulator with both operand tiles past `LIVE_MAX` registers a thread (NVIDIA
    only, where the register file is known): more than a thread's 255 can hold at once, and no
    recorded config past it ran within 10% of its shape's optimum."""
    why = _acc_spills(fp)
    if why is not None:
        return why
    if fp.acc_per_thread is not None and fp.operand_regs is not None and fp.reg_cap is not None:
        live = fp.acc_per_thread + fp.operand_regs
        if live > LIVE_MAX:
            return (f"about {live:.0f} registers per thread for its accumulator and A and B tiles, past the "
                    f"{LIVE_MAX} beyond which no recorded product ran within 10% of its optimum")
    return None


def _acc_spills(fp: Footprint) -> str | None:
    """Why the accumulator (with attention's scores and P) alone spills, or None."""
    if fp.live_regs is not None and fp.reg_cap is not None:
        if fp.live_regs >= fp.reg_cap:  # the tiles alone leave no register for addresses and loop state
            return (f"about {fp.live_regs:g} registers per thread live (accumulator, scores and P), as many as "
                    f"the {fp.reg_cap} a thread of {fp.threads} can have: registers spill to local memory")
        return None
    if fp.acc_per_thread is not None and fp.acc_per_thread > ACC_MAX:
        return (f"{fp.acc_per_thread:g} accumulator values per thread (past {ACC_MAX}, registers spill to "
                "local memory)")
    if fp.acc_per_thread is not None and fp.reg_cap is not None and fp.acc_per_thread >= fp.reg_cap:
        return (f"{fp.acc_per_thread:g} accumulator values per thread, as many as the {fp.reg_cap} registers a "
                f"thread of {fp.threads} can have: registers spill to local memory")
    return None


def hopeless(problem: Problem, space: Space, config: Mapping[str, Any]) -> str | None:
    """Why `config` is not worth compiling, or None: the fp32 accumulator alone (with attention's
    scores and P) needs more than `HOPELESS_REGS_X` times the registers a thread can have, so
    most of it lives in local memory. Such configs run many times slower than their neighbours
    and ptxas takes tens of seconds to minutes on them (on the H100 a 128 x 256 bf16 product tile
    on 2 warps, 512 values a thread, compiled in 17 s and spilled 4.6 KB; a larger one did not
    finish compiling in 150 s). Where the model knows no accumulator (an elementwise block, a
    pooled tile, a row block), the largest 2-D tile the program holds counts instead
    (`tile_values_per_thread`). The bound is the register file's, not fitted: growth beyond a
    config list and record mode's samples skip them; a config the user listed is still tried."""
    fp = footprint(problem, space, config)
    cap = fp.reg_cap or MAX_REGS_PER_THREAD
    need = fp.live_regs if fp.live_regs is not None else fp.acc_per_thread
    if need is not None and need > HOPELESS_REGS_X * cap:
        return (f"about {need:g} accumulator registers per thread, over {HOPELESS_REGS_X} times the {cap} a "
                "thread can have: most would spill, and ptxas takes minutes on such configs")
    if (held := _held_per_thread(space, config, fp)) is not None and held > HOPELESS_REGS_X * cap:
        return (f"a tile of about {held:g} values per thread, over {HOPELESS_REGS_X} times the {cap} registers a "
                "thread can have: most would spill, and ptxas takes minutes on such configs")
    return None


def _held_per_thread(space: Space, config: Mapping[str, Any], fp: Footprint) -> float | None:
    """`tile_values_per_thread` where the footprint models no accumulator (nor live registers),
    else None: the held tile counts only where nothing better is known (`hopeless`, `spills_held`)."""
    if fp.live_regs is not None or fp.acc_per_thread is not None:
        return None
    return tile_values_per_thread(space, config, fp.threads)


def tile_values_per_thread(space: Space, config: Mapping[str, Any], threads: int | None) -> float | None:
    """Values of the largest 2-D tile a program holds, per thread: where the resource model
    knows no product or attention (`footprint`: no accumulator estimate), a program holds its
    tile in registers while it works on it (an elementwise block, a pooled window's outputs, a
    row block), one value at least a register. With one or two tile parameters (kron's
    BLOCK_M x BLOCK_N, a pool's BLOCK_H x BLOCK_W, fla's chunked BK x BV) that is their
    product; with three or more (a product tiled under names the model does not read as M, N
    and K) only the largest pair is held at once, as a product's accumulator is: a lower
    bound either way. None without tiles or threads. Session 25: FlagGems' kron at 16 x 4,096
    on two warps (1,024 values a thread) held ptxas for minutes while recording (so did its max
    pool's 64 x 128 on one warp, 256 a thread, with an int64 index beside each value: the bound
    does not catch every slow compile); across the zoo's and the bundled kernels without an
    accumulator estimate, no config past twice the register file ran within 7x of its shape's
    optimum."""
    tiles = [int(config[p.name]) for p in space.params
             if p.role and (p.role == "tile" or p.role.startswith("tile:")) and p.name in config
             and isinstance(config[p.name], (int, float)) and not isinstance(config[p.name], bool)
             and config[p.name] > 0]
    if not tiles or not threads:
        return None
    if len(tiles) <= 2:
        held = math.prod(tiles)
    else:
        held = max(a * b for i, a in enumerate(tiles) for b in tiles[i + 1:])
    return held / threads


def spills_held(problem: Problem, space: Space, config: Mapping[str, Any]) -> str | None:
    """`spills` but for the operand tiles' bound (`LIVE_MAX`), and where the model knows no
    accumulator (`footprint`), a held tile of more values per thread than a thread has
    registers (`tile_values_per_thread`): why a cold start's
    draw from the whole space (abduction's, before anything is measured) should not spend a
    measurement on `config`. The bound is the register file's, not fitted. Checked (session 27) on the zoo's
    and the bundled data: on no shape of any kernel was a config it names within 9% of the
    shape's optimum (the closest, 1.098x, on an fla backward kernel; most 2x or worse)."""
    fp = footprint(problem, space, config)
    why = _acc_spills(fp)  # the accumulator's bounds, not the operand tiles' (module docstring)
    if why is not None:
        return why
    cap = fp.reg_cap or MAX_REGS_PER_THREAD
    held = _held_per_thread(space, config, fp)
    if held is not None and held > cap:
        return f"a tile of about {held:g} values per thread, over the {cap} registers a thread can have: it spills"
    return None


def trouble(problem: Problem, space: Space, config: Mapping[str, Any]) -> str | None:
    """`infeasible` or `spills`: why a prediction or seed should not be this config."""
    return infeasible(problem, space, config) or spills(problem, space, config)


def output_tiles_larger_first(space: Space, config: Mapping[str, Any]) -> list[Any]:
    """The output tiles `config` sets (the parameters with roles tile:N and tile:M), the larger
    first, N on a tie: the order in which `fit` and the compile check's relief shrink them (a
    smaller output tile lowers the accumulator each thread holds, and the larger of the two
    frees the most)."""
    tiles = [p for p in (space.by_role("tile:N"), space.by_role("tile:M")) if p is not None and p.name in config]
    return sorted(tiles, key=lambda q: -config[q.name])  # stable: N before M on a tie


def fit(problem: Problem, space: Space, config: Mapping[str, Any]) -> tuple[Config | None, list[str]]:
    """`config` moved the least way into what the model accepts: fewer pipeline stages first
    (down to `STAGES_KEPT`), then a smaller K tile, then fewer stages still, then more warps
    (for the accumulator), then smaller M/N tiles, the larger first. Returns (config or None when nothing fits, what changed)."""
    cfg = dict(config)
    changes: list[str] = []
    if trouble(problem, space, cfg) is None:
        return cfg, changes
    # (role, direction, lowest value this pass may reach): a pipeline keeps three stages
    # before the K tile shrinks (two leave the loads exposed), then gives them up too
    order = [("stages", -1, STAGES_KEPT), ("tile:K", -1, 0), ("stages", -1, 0), ("warps", +1, 0),
             ("tile:N", -1, 0), ("tile:M", -1, 0)]
    for _ in range(24):
        if trouble(problem, space, cfg) is None:
            return cfg, changes
        moved = False
        for role, direction, floor in order:
            p = space.by_role(role)
            if p is None or p.name not in cfg:
                continue
            if direction < 0 and floor and cfg[p.name] <= floor:
                continue
            if role in ("tile:N", "tile:M"):
                first = output_tiles_larger_first(space, cfg)[0]
                if first is not p and cfg[first.name] > cfg[p.name]:
                    continue  # shrink the larger of the two output tiles first
            nxt = p.step(cfg[p.name], direction)
            if nxt is None:
                continue
            if role == "warps" and infeasible(problem, space, {**cfg, p.name: nxt}):
                continue
            if role in ("stages", "tile:K") and infeasible(problem, space, cfg) is None \
                    and (role == "stages" or _acc_spills(footprint(problem, space, cfg)) is not None):
                continue  # stages touch no register; the K tile touches the operands, not the accumulator
            cand = {**cfg, p.name: nxt}
            if not space.is_valid(cand):
                try:
                    cand = space.nearest_valid(cand, prefer={p.name: nxt})
                except Exception:  # noqa: BLE001 - no valid neighbour: try the next role
                    continue
                if cand[p.name] != nxt:
                    continue
            changes.append(f"{p.name} {cfg[p.name]} -> {nxt}")
            cfg = cand
            moved = True
            break
        if not moved:
            break
    return (cfg, changes) if trouble(problem, space, cfg) is None else (None, changes)


def runnable_default(problem: Problem, space: Space, cfg: Config,
                     listed: Sequence[Config] = ()) -> tuple[Config, tuple[str, ...]]:
    """The kernel's own config, or where the resource model says it cannot launch on this GPU
    (a list written for another GPU: FlagGems' attention list starts with a 288 KB pipeline, over
    the H100's 227 KB), the first config of the kernel's own list it lets launch (what Triton's
    autotuner ends up running: it skips what fails), else the config moved the least way into
    what it accepts (`fit`); with what was done, said. Unchanged where the model sees
    no reason or knows nothing better."""
    bad = infeasible(problem, space, cfg)
    if bad is None:
        return cfg, ()
    for c in listed:
        if space.is_valid(c) and infeasible(problem, space, c) is None:
            return dict(c), (f"the kernel's first config {bad}: served its first listed config that can launch",)
    fitted, changes = fit(problem, space, cfg)
    if fitted is not None and infeasible(problem, space, fitted) is None:
        return fitted, (f"the kernel's first config {bad}: served it with {', '.join(changes)}",)
    return cfg, (f"the kernel's first config {bad}, and no listed or nearby config is known to launch",)
