"""One kernel that TorchInductor generated, as abductune sees it: its identity in the store, its
search space, its `Problem`, and abductune's candidate configs for it.

Pure Python on purpose: no torch import. `inductor.py` (the only module that imports Inductor)
reads Inductor's objects and passes plain values here (size hints, the config's kwargs, the
metadata dict, the device properties as a mapping), so the tests call this with the very size
hints and metadata Inductor writes into a generated kernel, without a GPU.

The space follows Inductor's own coordinate descent (`coordinate_descent_tuner.CoordescTuner`),
so abductune searches exactly where Inductor would:

- the fields: a combo kernel's per-subkernel fields first, in Inductor's order
  (`combo_coordesc_field_order`, torch 2.13; derived from the `XBLOCK_<i>` keys where torch 2.11
  writes no order), then XBLOCK, YBLOCK, ZBLOCK, R0_BLOCK, R1_BLOCK as the config has them (a
  persistent reduction has no R0_BLOCK: the whole row is its block), NUM_STAGES for a mix-order
  reduction, and num_warps;
- each block field a power-of-two ladder up to Inductor's limit: the per-field limit of a combo
  kernel (`combo_coordesc_field_limits`), else min(TRITON_MAX_BLOCK, the size hint); at least
  `min_xblock` / `min_rblock` where Inductor sets them, and large enough that the grid's y and z
  dimensions stay under CUDA's 65535 blocks; num_warps up to max threads per block / warp size;
- constraints as expressions (so the space fingerprint, part of the store key, is the same in
  Inductor's compile workers and in the parent): one program's block holds at most
  TRITON_MAX_TENSOR_NUMEL elements and at most MAX_PER_THREAD per thread (Inductor's coordinate
  descent needs no such bound, as it moves one step at a time from Inductor's configs; a search
  that jumps does), and a mix-order reduction keeps XBLOCK <= RSPLIT_SIZE.

The store key of a kernel is its Context: the kernel's source hash (the Triton source with the
kernel's name stripped, as Inductor's own lookup table does, plus the argument types and
alignment), the size hints (the problem's dims), the device (the hardware name) and the
toolchain (torch and Triton versions). A kernel tuned once is found again by any process that
generates the same kernel for the same shapes on the same kind of GPU.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from ..classify import next_pow2
from ..costs import element_bytes
from ..hardware import KNOWN_GPUS, HardwareInfo, from_properties, lookup
from ..problem import Problem
from ..space import Choice, Config, Param, Pow2, Space

log = logging.getLogger(__name__)

# Inductor's heuristics abductune tunes (HeuristicType names, lower case). Templates (matmul,
# attention), user kernels, split scans and fixed configs keep Inductor's behaviour.
TUNED = ("pointwise", "reduction", "persistent_reduction")

# the block fields of a (non-combo) Inductor kernel, in Inductor's coordinate-descent order
BLOCK_FIELDS = ("XBLOCK", "YBLOCK", "ZBLOCK", "R0_BLOCK", "R1_BLOCK")
# CUDA's grid limit along y and z (Inductor's get_max_y_grid)
MAX_GRID_YZ = 65535
# what Triton allows one tensor to hold, when Inductor does not say (hints.TRITON_MAX_TENSOR_NUMEL)
MAX_TENSOR_NUMEL = 1 << 20
# Inductor's TRITON_MAX_BLOCK, for callers that do not pass it (hints.py, torch 2.11 and 2.13)
MAX_BLOCK = {"X": 4096, "Y": 1024, "Z": 1024, "R0_": 4096 * 16, "R1_": 4096 * 16}
# the deepest mix-order pipeline abductune tries (Inductor's configs use at most 3)
MAX_NUM_STAGES = 4
# the most configs a kernel's space may hold (strategies enumerate it)
SPACE_CAP = 50_000
# the most block elements one thread may hold. Inductor's own configs hold at most 128 (XBLOCK
# 4096 on one warp); past it, Triton's compile of a fused kernel ran for minutes on an H200
# (an fp32/bf16 BERT reduction tried with 16K elements per thread) and the code spills anyway
MAX_PER_THREAD = 128
# The finish searches a kernel only where Inductor's pick runs at least this long per launch
# (microseconds; Settings.min_us). Below it, Inductor's pick among its list and abductune's
# candidates (which Inductor compiled in its workers and timed itself) is kept and stored.
# Why 100: in the bundled H100 sweeps (gelu_mul, rmsnorm and softmax fp16, 11 shapes; never the
# models issue 25 reports), the best of the kernel's fixed config list was within 2% or 1 us of
# the exhaustive best on every shape faster than 190 us; the fastest shape where a search past
# the list paid ran 198 us (softmax 4096 x 32000: 23% faster than the list's best). 100 us is
# half of that. Small kernels are bound by launch latency and bandwidth, which a block size
# barely moves. `benchmarks/inductor_gate.py` prints the table (in-sample on those sweeps).
DEFAULT_MIN_US = 100.0

_COMBO_FIELD = re.compile(r"^([XYZ]|R[01]_)BLOCK_(\d+)$")
_NAME_LINE = re.compile(r"^def [^(]+\(", re.M)


# ----------------------------------------------------------------------------- settings

@dataclass(frozen=True)
class Settings:
    """What `enable()` asked for, in a form that pickles: it travels to Inductor's compile
    workers inside the kernel loader (inductor.py) and back inside each autotuner."""

    store: str  # a store file, or ":memory:" (then only the parent process can read it)
    strategy: str = "abduction"
    evaluations: int | None = 12
    seconds: float | None = None
    seed: int = 0
    candidates: int = 2  # abductune's configs placed ahead of Inductor's list
    per_shape: bool = True  # dynamic shapes: a config per size-hint bucket
    compile_ahead: bool = False  # the finish compiles in Inductor's workers, ahead of the search
    min_us: float = DEFAULT_MIN_US  # search only kernels whose Inductor pick runs at least this long
    token: str = ""  # the enable() in the parent process these settings belong to
    options: tuple[tuple[str, Any], ...] = ()  # strategy options, as sorted pairs
    gemm: int = 0  # Triton matmul-template configs per mm and addmm (inductor_gemm); 0: Inductor's choice


# ----------------------------------------------------------------------------- identity

def source_hash(src: str, signature: Mapping[str, Any] | None = None, extra: Any = None) -> str:
    """The kernel's identity: its Triton source without its name (Inductor names the same body
    triton_poi_fused_add_0 in one graph and _3 in another), plus the argument types and
    `extra` (the alignment facts), which change the compiled code but not the source."""
    body = _NAME_LINE.sub("(", src.strip(), count=1)
    blob = json.dumps([body, {str(k): str(v) for k, v in (signature or {}).items()}, repr(extra)])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def first_dtype(signature: Mapping[str, Any]) -> str:
    """The element type of the kernel's first input pointer ('*bf16' -> 'bf16'); it sets the
    dtype family the theories are looked up by. 'fp32' when no pointer is named."""
    ptrs = [(k, str(v)) for k, v in signature.items() if str(v).startswith("*")]
    ins = [v for k, v in ptrs if k.startswith("in_ptr")] or [v for _, v in ptrs]
    return ins[0].lstrip("*") if ins else "fp32"


def numel_args(signature: Mapping[str, Any], src: str) -> list[tuple[int, str]]:
    """(position among the launch arguments, size-hint prefix) of each numel argument whose
    value is known only at run time: a kernel compiled for dynamic shapes. Inductor passes
    xnumel, r0_numel, ... to every kernel, and a kernel for static shapes assigns the constant
    again in its body (`xnumel = 1024`); the launch arguments are the signature's non-constexpr
    entries, in order."""
    out = []
    pos = 0
    for name, typ in signature.items():
        if str(typ) == "constexpr":
            continue
        if name.endswith("numel") and name != "numel":
            prefix = name[: -len("numel")]
            if not re.search(rf"^\s+{re.escape(name)} = \d+\s*$", src, re.M):
                out.append((pos, prefix))
        pos += 1
    return out


def bucket(values: Mapping[str, int]) -> dict[str, int]:
    """The size hints Inductor would write for these extents: each rounded up to a power of two.
    Per-shape configs under dynamic shapes are kept per bucket."""
    return {k: next_pow2(v) for k, v in values.items()}


def _prev_pow2(v: int) -> int:
    return 1 if v <= 1 else 1 << (int(v).bit_length() - 1)


# ----------------------------------------------------------------------------- hardware

def hardware(device: Mapping[str, Any], name: str | None = None) -> HardwareInfo:
    """The GPU of Inductor's `DeviceProperties` (given as a mapping). `name`: the driver's
    device name (from NVML, no CUDA context), which tells an H100 from an H200 where the
    properties cannot (both sm_90 with 132 SMs); without it, a GPU is named from its
    properties, so the store still keeps different GPUs apart."""
    sms = int(device.get("multi_processor_count") or 0)
    cc_raw = int(device.get("cc") or 0)
    cc = (cc_raw // 10, cc_raw % 10) if cc_raw >= 10 else (int(device.get("major") or 0), 0)
    warp = int(device.get("warp_size") or 32)
    known = lookup(name, strict=False) if name else None
    if known is not None:
        return known.with_measured(sms=sms or known.sms, compute_capability=cc, warp_size=warp)
    label = name or f"{device.get('type', 'gpu')}-sm{cc[0]}{cc[1]}-{sms}sm"
    # a GPU of a known kind but no name (no NVML): its own label, a known GPU's limits and family
    same = [h for h in KNOWN_GPUS.values() if h.compute_capability == cc and (h.sms == sms or not sms)]
    if same:
        return same[0].with_measured(name=label, sms=sms or same[0].sms, warp_size=warp)
    # one the table does not list: its limits from its properties and its compute capability
    # (no clock here, so no peaks: the roofline stays unknown rather than guessed)
    return from_properties(label, cc, sms, vendor="amd" if device.get("type") == "hip" else "nvidia",
                           warp_size=warp,
                           max_threads_per_sm=int(device.get("max_threads_per_multi_processor") or 0),
                           regs_per_sm=int(device.get("regs_per_multiprocessor") or 0))


# ----------------------------------------------------------------------------- the kernel

@dataclass
class KernelDesc:
    """One Inductor kernel: its space, its problem and how a space config maps back onto
    Inductor's config (the kwargs the space does not tune are kept from Inductor's).
    `fixed`: parameters the space holds at one value so the theories and the resource model
    see them, but Inductor's config must not carry (a persistent reduction's R0_BLOCK)."""

    heuristic: str
    size_hints: dict[str, int]
    space: Space
    problem: Problem
    fields: tuple[str, ...]
    fixed: dict[str, int] = field(default_factory=dict)

    def config_of(self, kwargs: Mapping[str, Any], num_warps: int) -> Config | None:
        """The space config of an Inductor config, or None when it lies outside the space."""
        cfg = {f: (num_warps if f == "num_warps" else self.fixed.get(f, kwargs.get(f))) for f in self.fields}
        return cfg if self.space.is_valid(cfg) else None

    def kwargs_of(self, cfg: Mapping[str, Any], base_kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
        """(kwargs, num_warps) of a space config, on top of Inductor's config."""
        kw = dict(base_kwargs)
        kw.update({f: cfg[f] for f in self.fields if f != "num_warps" and f not in self.fixed})
        return kw, int(cfg["num_warps"])


def tunable_fields(heuristic: str, kwargs: Mapping[str, Any], meta: Mapping[str, Any],
                   size_hints: Mapping[str, int] | None = None) -> list[str]:
    """The fields abductune tunes, in Inductor's coordinate-descent order (module docstring),
    and a persistent reduction's R0_BLOCK, held at the row's extent (`persistent_block`)."""
    out: list[str] = []
    order = meta.get("combo_coordesc_field_order")
    if order:  # torch 2.13 writes the per-subkernel order, largest subkernels first
        out += [f for f in order if f in kwargs]
    else:  # torch 2.11: the suffixed block fields, subkernel by subkernel
        combo = [(int(m.group(2)), BLOCK_FIELDS.index(m.group(1) + "BLOCK"), k)
                 for k in kwargs if (m := _COMBO_FIELD.match(k))]
        out += [k for _, _, k in sorted(combo)]
    for f in BLOCK_FIELDS:
        if f not in kwargs:
            continue
        if f == "XBLOCK" and meta.get("no_x_dim"):
            continue  # fixed at 1 by the kernel's body
        if f == "R0_BLOCK" and heuristic == "persistent_reduction":
            continue  # the whole row is the block: never tuned (Inductor asserts the same)
        out.append(f)
    if persistent_block(heuristic, kwargs, meta, size_hints) is not None:
        out.append("R0_BLOCK")
    if "RSPLIT_SIZE" in kwargs and "NUM_STAGES" in kwargs:
        out.append("NUM_STAGES")
    out.append("num_warps")
    return out


def persistent_block(heuristic: str, kwargs: Mapping[str, Any], meta: Mapping[str, Any],
                     size_hints: Mapping[str, int] | None) -> int | None:
    """The R0_BLOCK a persistent reduction's body fixes (the row, rounded up to a power of two;
    one split of it in a cooperative reduction), or None for other kernels. The space holds it
    at that one value so the theories and the resource model know the tile each program holds;
    Inductor's config never carries it."""
    if heuristic != "persistent_reduction" or meta.get("combo_grid_meta") or "R0_BLOCK" in kwargs:
        return None
    r = (size_hints or {}).get("r0_")
    if not r:
        return None
    return next_pow2(max(1, int(r) // max(1, int(kwargs.get("RSPLIT", 1)))))


def _prefix(field_name: str) -> str:
    """'XBLOCK' -> 'x', 'R0_BLOCK' -> 'r0_', 'YBLOCK_1' -> 'y' (the size-hint key)."""
    m = _COMBO_FIELD.match(field_name)
    base = (m.group(1) if m else field_name[: -len("BLOCK")])
    return base.lower()


def _combo_hints(meta: Mapping[str, Any], field_name: str) -> Mapping[str, int] | None:
    m = _COMBO_FIELD.match(field_name)
    combo = meta.get("combo_grid_meta") or {}
    if not m:
        return None
    return combo.get(f"size_hints_{m.group(2)}")


def _ladder(name: str, current: int | None, size_hints: Mapping[str, int] | None,
            meta: Mapping[str, Any], max_block: Mapping[str, int]) -> list[int]:
    """The values of one block field: powers of two from Inductor's lower bound to its limit
    (module docstring), with the current value added where it lies outside."""
    prefix = _prefix(name)
    hints = _combo_hints(meta, name) if _COMBO_FIELD.match(name) else size_hints
    limits = meta.get("combo_coordesc_field_limits") or {}
    if name in limits:
        hi = int(limits[name])
    else:
        hi = int(max_block.get(prefix.upper(), MAX_BLOCK.get(prefix.upper(), 4096)))
        if hints and prefix in hints:
            hi = min(hi, int(hints[prefix]))
    lo = 1
    if name == "XBLOCK" and meta.get("min_xblock"):
        lo = int(meta["min_xblock"])
    if name == "R0_BLOCK" and meta.get("min_rblock"):
        lo = int(meta["min_rblock"])
    if prefix in ("y", "z") and hints and prefix in hints:  # the grid's y and z are capped
        lo = max(lo, -(-int(hints[prefix]) // MAX_GRID_YZ))
    lo, hi = next_pow2(max(lo, 1)), _prev_pow2(max(hi, 1))
    vals = [1 << k for k in range(lo.bit_length() - 1, hi.bit_length())] if lo <= hi else [lo]
    if current is not None and current >= 1 and current not in vals:
        vals = sorted(set(vals) | {int(current)})
    return vals


def _param(name: str, vals: Sequence[int]) -> Param:
    vals = sorted(vals)
    ladder = [vals[0] << i for i in range(len(vals))]
    if vals[0] & (vals[0] - 1) == 0 and list(vals) == ladder:
        return Pow2(name, vals[0], vals[-1])
    return Choice(name, vals)


def build_space(heuristic: str, kwargs: Mapping[str, Any], meta: Mapping[str, Any],
                size_hints: Mapping[str, int] | None, device: Mapping[str, Any], *,
                max_block: Mapping[str, int] = MAX_BLOCK, max_numel: int = MAX_TENSOR_NUMEL) -> tuple[Space, list[str]]:
    """The space of one kernel (module docstring) and its fields in order. `kwargs`: the
    kwargs of one of Inductor's configs for it (they say which fields the kernel has).

    Strategies enumerate a space, so one with more than SPACE_CAP configs (a combo kernel of
    many subkernels) keeps each block field to a window of steps around `kwargs`' value, the
    window shrinking until it fits: Inductor's coordinate descent moves one step at a time from
    there too. The window depends on the block values alone, which are the same in every
    config Inductor lists for one kernel, so the space is the same in the compile worker and
    in the parent."""
    names = tunable_fields(heuristic, kwargs, meta, size_hints)
    fixed = persistent_block(heuristic, kwargs, meta, size_hints)
    ladders: dict[str, list[int]] = {}
    for n in names:
        if n == "R0_BLOCK" and fixed is not None:
            ladders[n] = [fixed]
        elif n == "num_warps":
            warp = int(device.get("warp_size") or 32)
            hi = _prev_pow2(max(1, int(device.get("max_threads_per_block") or 1024) // warp))
            ladders[n] = [1 << k for k in range(hi.bit_length())]
        elif n == "NUM_STAGES":
            ladders[n] = list(range(1, MAX_NUM_STAGES + 1))
        else:
            cur = kwargs.get(n)
            ladders[n] = _ladder(n, int(cur) if isinstance(cur, int) else None, size_hints, meta, max_block)
    for radius in (None, 4, 3, 2, 1, 0):
        if radius is not None:
            for n in names:
                cur = kwargs.get(n)
                if n not in ("num_warps", "NUM_STAGES") and cur in ladders[n]:
                    i = ladders[n].index(cur)
                    ladders[n] = ladders[n][max(0, i - radius): i + radius + 1]
        if math.prod(len(v) for v in ladders.values()) <= SPACE_CAP:
            break
    params = [_param(n, ladders[n]) for n in names]
    constraints: list[str] = []
    constants: dict[str, Any] = {}
    groups: dict[str, list[str]] = {}
    for n in names:
        if n.endswith("BLOCK") or _COMBO_FIELD.match(n):
            m = _COMBO_FIELD.match(n)
            groups.setdefault(m.group(2) if m else "", []).append(n)
    warp = int(device.get("warp_size") or 32)
    for fields in groups.values():
        if math.prod(max(ladders[f]) for f in fields) > max_numel:
            constraints.append(" * ".join(fields) + f" <= {max_numel}")
        if math.prod(max(ladders[f]) for f in fields) > MAX_PER_THREAD * warp * min(ladders["num_warps"]):
            constraints.append(" * ".join(fields) + f" <= {MAX_PER_THREAD * warp} * num_warps")
    if "RSPLIT_SIZE" in kwargs and "XBLOCK" in names:
        constants["RSPLIT_SIZE"] = int(kwargs["RSPLIT_SIZE"])
        constraints.append("XBLOCK <= RSPLIT_SIZE")
    return Space(params, constraints, constants, name=f"inductor-{heuristic}"), names


def classify_kernel(heuristic: str, size_hints: Mapping[str, int] | None, reduction_hint: str | None,
                    kwargs: Mapping[str, Any], meta: Mapping[str, Any]) -> tuple[str, dict[str, int]]:
    """(kernel class, dims) for the theories and the heuristics. Only the shapes they were
    learned on get a class: 1-D pointwise kernels (elementwise, numel) and inner reductions
    over one axis (row_reduction, rows x cols). Tiled pointwise kernels, outer reductions and
    combo kernels are "other": searched, with no class knowledge to seed them."""
    hints = dict(size_hints or {})
    dims = {f"{k}numel": int(v) for k, v in hints.items()}
    if meta.get("combo_grid_meta") or not hints:
        return "other", dims
    if heuristic == "pointwise" and set(hints) == {"x"}:
        return "elementwise", {"numel": int(hints["x"])}
    inner = str(reduction_hint or "").rsplit(".", 1)[-1] in ("INNER", "DEFAULT", "")
    if heuristic in ("reduction", "persistent_reduction") and set(hints) == {"x", "r0_"} and inner:
        cols = int(hints["r0_"]) // max(1, int(kwargs.get("RSPLIT", 1)))  # cooperative: one split
        return "row_reduction", {"rows": int(hints["x"]), "cols": max(1, cols)}
    return "other", dims


def kernel_name(heuristic: str, src_hash: str, meta: Mapping[str, Any]) -> str:
    short = {"pointwise": "poi", "reduction": "red", "persistent_reduction": "per"}.get(heuristic, heuristic)
    if meta.get("combo_grid_meta"):
        short = "combo_" + short
    return f"inductor_{short}_{src_hash[:12]}"


def describe(heuristic: str, size_hints: Mapping[str, int] | None, kwargs: Mapping[str, Any],
             meta: Mapping[str, Any], device: Mapping[str, Any], *, src_hash: str, dtype: str,
             reduction_hint: str | None = None, device_name: str | None = None,
             max_block: Mapping[str, int] = MAX_BLOCK, max_numel: int = MAX_TENSOR_NUMEL) -> KernelDesc:
    """Everything abductune needs to know of one kernel (see the module docstring)."""
    space, names = build_space(heuristic, kwargs, meta, size_hints, device, max_block=max_block,
                               max_numel=max_numel)
    kclass, dims = classify_kernel(heuristic, size_hints, reduction_hint, kwargs, meta)
    problem = Problem(kernel_name(heuristic, src_hash, meta), kclass, dims, {"x": dtype},
                      hardware=hardware(device, device_name), source_hash=src_hash)
    pb = persistent_block(heuristic, kwargs, meta, size_hints)
    return KernelDesc(heuristic, dict(size_hints or {}), space, problem, tuple(names),
                      {"R0_BLOCK": pb} if pb is not None else {})


# ----------------------------------------------------------------------------- candidates

_BOOK: Any = None


def _book() -> Any:
    """The packaged theories, loaded once per process (a compile worker sees many kernels)."""
    global _BOOK
    if _BOOK is None:
        from ..theory.store import packaged_book

        _BOOK = packaged_book()
    return _BOOK


def candidates(desc: KernelDesc, base: Config | None, limit: int) -> list[tuple[Config, str]]:
    """abductune's configs for this kernel, best bets first, each with where it came from:
    the theory store's predictions for its class and size hints, then the seed heuristics
    (observed database, registry), every one passed through the resource model by those
    functions (as `tune.seed_list` does). Nothing for a kernel of class "other". Contained:
    a failing lookup gives no candidates, never a failed compile."""
    if limit <= 0 or desc.problem.kernel_class not in ("elementwise", "row_reduction"):
        return []
    out: list[tuple[Config, str]] = []
    seen = set()

    def add(cfg: Mapping[str, Any], source: str) -> None:
        cfg = dict(cfg)
        if not desc.space.is_valid(cfg):
            return
        k = desc.space.key(cfg)
        if k not in seen:
            seen.add(k)
            out.append((cfg, source))
    try:
        from ..theory.store import predictions

        for p in predictions(desc.problem, desc.space, book=_book())[:2]:
            add(p.config, f"theory:{p.rule.kernel_class}/{p.rule.regime}")
    except Exception as e:  # noqa: BLE001 - a prediction must never stop a compile
        log.warning("abductune: theory prediction for %s failed: %s: %s", desc.problem.kernel, type(e).__name__, e)
    try:
        from ..heuristics import seed_configs

        rep = seed_configs(desc.problem, desc.space, desc.problem.hardware, base=base)
        for cfg in rep.configs:
            src = next((f"{f.get('source')}:{f.get('name')}" for f in rep.fired
                        if f.get("status") == "seed" and f.get("config") == cfg), "heuristic")
            add(cfg, src)
    except Exception as e:  # noqa: BLE001 - contained, as above
        log.warning("abductune: seed heuristics for %s failed: %s: %s", desc.problem.kernel, type(e).__name__, e)
    return out[:limit]


# ----------------------------------------------------------------------------- the store

def stored_winner(store: Any, desc: KernelDesc, toolchain: str, min_us: float | None = None) -> Config | None:
    """The winner of a finished tuning run of this very kernel (same source, size hints,
    space, device and toolchain), or None: how a kernel tuned once is never tuned again.
    A run that kept Inductor's pick without searching (`KEPT`: the pick ran under the min_us
    of its process) answers only while the pick's time is under this `min_us` too: a process
    that asks for more searching does not take a kept pick for a search."""
    from ..store import Context

    ctx = Context.of(desc.problem, desc.space, toolchain)
    for run in reversed(store.runs(ctx)):
        if run.status == "done" and run.winner_id is not None:
            rows = store.by_id([run.winner_id])
            if not (rows and rows[0].ok and desc.space.is_valid(rows[0].config)):
                continue
            if (run.options or {}).get("note") == KEPT and min_us is not None and \
                    not float(rows[0].time_ms) * 1e3 < float(min_us):
                continue
            return dict(rows[0].config)
    return None


# the note of a run that kept Inductor's pick without searching (see DEFAULT_MIN_US)
KEPT = "inductor's pick kept: below min_us"


def traffic_us(size_hints: Mapping[str, int] | None, signature: Mapping[str, Any], meta: Mapping[str, Any],
               hw: HardwareInfo | None) -> float | None:
    """What one launch of a kernel takes at the GPU's memory bandwidth, known before anything
    runs: Inductor's own estimate of the bytes it moves (`kernel_num_gb`, present when Inductor
    benchmarks kernels), else its iteration space (the product of its size hints, which Inductor
    rounds up to powers of two) times one element of every pointer argument, each tensor counted
    as read or written in full (a broadcast or reduced tensor moves less, so this overstates the
    bytes). None without a bandwidth or a size."""
    bw = getattr(hw, "mem_bandwidth", None)
    if not bw or not finite(bw) or bw <= 0:
        return None
    gb = meta.get("kernel_num_gb")
    if finite(gb) and gb > 0:
        return float(gb) * 1e9 / bw * 1e6
    numel = math.prod(int(v) for v in (size_hints or {}).values() if isinstance(v, int) and v > 0)
    per = sum(element_bytes(str(t).lstrip("*")) for t in signature.values() if str(t).startswith("*"))
    if numel <= 0 or per <= 0:
        return None
    return numel * per / bw * 1e6


def worth_candidates(estimate_us: float | None, min_us: float | None) -> bool:
    """Whether to put abductune's candidates ahead of Inductor's list: each is one more config
    for Inductor's workers to compile and for its benchmark to time at the first launch, spent
    on every kernel of a model. Only where the finish could search (`worth_searching`): a kernel
    whose traffic at full bandwidth (`traffic_us`, an overstatement) stays under `min_us` keeps
    Inductor's list as it is. Without an estimate or a threshold, candidates are offered."""
    if not min_us or estimate_us is None:
        return True
    return estimate_us >= float(min_us)


def worth_searching(inductor_ms: float | None, min_us: float | None) -> bool:
    """Whether the finish should search a kernel whose pick Inductor timed at `inductor_ms`
    (None: not timed): only where the time is (DEFAULT_MIN_US says why). A kernel whose pick
    failed to time, or no threshold, is searched."""
    if not min_us or inductor_ms is None or not finite(inductor_ms):
        return True
    return float(inductor_ms) * 1e3 >= float(min_us)


def as_options(options: Mapping[str, Any] | Iterable[tuple[str, Any]] | None) -> tuple[tuple[str, Any], ...]:
    items = options.items() if isinstance(options, Mapping) else (options or ())
    return tuple(sorted((str(k), v) for k, v in items))


def describe_config(cfg: Mapping[str, Any], fields: Sequence[str]) -> str:
    return ", ".join(f"{f}={cfg[f]}" for f in fields if f in cfg)


def finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)
