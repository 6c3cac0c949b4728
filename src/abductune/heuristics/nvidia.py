"""NVIDIA's analytic GEMM model (nvMatmulHeuristics) as a seed source and a zero-shot baseline.

    from abductune.heuristics.nvidia import nvidia_topk
    top = nvidia_topk(problem, space, 8)     # 8 distinct valid configs, the model's order
    top.fired                                # what became of each model candidate

The model (`pip install 'abductune[nvidia]'`, the `nvidia-matmul-heuristics` package) ranks
GEMM kernel configurations for a GPU, a precision and an operand layout with an analytic
timing model and no measurement. It is NVIDIA proprietary software: abductune imports it when
installed and never ships, copies or vendors any of it. Without it the seed heuristic is
ineligible and says nothing; `nvidia_topk` raises `AbductuneError` naming the extra.

How a problem is put to the model (target TRITON, flag PERF_MODEL_BASED_AUTO_TUNING: the
candidates are ranked by the timing model, as NVIDIA's CUTLASS and PyTorch's integrations ask):

- **GPU**: the problem's (or the given) `HardwareInfo` by table name (`GPU_ENUMS`: H100-SXM,
  H100-PCIe, H200, A100-SXM / -PCIe (80 GB), L40S, B200, RTX 3090 / 4090 / A6000), else a
  name spelling one of the model's GPUs (e.g. "L4", "H20_SXM"). Anything else is ineligible:
  the model would describe a different chip. The 40 GB A100s are left out (the model knows
  only the 80 GB boards, whose bandwidth differs).
- **Shape**: M, N, K as `abductune.classify` reads them, and the batch size of a batched matmul
  (a dim named batch; else 1). A MoE matmul (an E
  dim) is ineligible: its per-expert M depends on the routing.
- **Precision** (`precision_string`): the model's letters per operand (H fp16, T bf16, S fp32,
  Q fp8 e4m3, R fp8 e5m2, B int8), accumulation in fp32 (S), int32 (I) for int8:
  fp16 -> "HSH", bf16 -> "TST" (fp32 output: "HSS" / "TSS"), fp32 -> "SFS" (tl.dot's default
  TF32), fp8 x fp8 (W8A8) -> five letters A B C S D with C = D = the output ("QQTST" for a
  bf16 output, "QQHSH" fp16, "QQSSS" fp32), int8 x int8 (W8A8) -> "BII" (Triton's int8 dot
  accumulates int32). Weight-only quantization (a 16-bit activation with an int8 / int4 / fp8
  weight, dequantized before the dot) is modelled as the 16-bit GEMM: an approximation, the
  model does not see the narrower weight reads. fp4, int16 and anything else: ineligible.
  Operands are the first two `problem.dtypes` entries that are not scales, zero points or
  index tensors (int32/int64); the output is the entry named c/out/y/o/d/output, if any.
- **Layout**: NN row-major (A (M, K) and B (K, N), both row-major, as in the Triton tutorial)
  unless the problem or space says otherwise: dims `trans_a` / `trans_b` (0/1), or a `layout`
  constant of the space ("NT", "NT_ROW_MAJOR", ...), or the `layout` argument. On the H100 the
  model's top candidates for fp16 did not change between NN and NT on the shapes tried.

What the model is told about the kernel: with a space at hand, no split-K unless the space
has @split:K (the backend's SPLIT_K_KIND set to NONE, so it ranks tiles for a kernel without
one) and, through its validity callback, only CTA tiles and warp counts the space allows.
When that leaves fewer candidates than asked (the model's candidate sets are small: 1 to 13
on the bundled H100 shapes), its unrestricted ranking follows, split-K dropped; `fired` says
which pass each came from.

How a model candidate becomes a config (`model_partial`), by role, so any kernel that declares
the roles is served whatever its parameter names: CTA tile -> @tile:M / @tile:N / @tile:K;
load stages -> @stages; warps = (CTA tile / warp tile) along M x N x K, the warps the model's
own warp tiling uses (when it gives no warp tile: 8 for a tile of 128 x 256 or more, else 4,
the Triton tutorial's rule); split-K -> @split:K when the space has it (dropped otherwise);
the grid swizzle (the model's GROUP_M, "matching Triton's definition") -> @group when the space
has it. Cluster shape and CTA order have no Triton-config counterpart and are not used.
Each proposal goes through `realize` (clamped into the space, capped at the problem) and the
resource model's `fit` (no config that cannot launch), exactly as every seed does; a
candidate that still cannot run is dropped with its reason, and duplicates after realization
are skipped, so `nvidia_topk` asks the model for more candidates than it returns.
"""
from __future__ import annotations

import ctypes
import dataclasses
import importlib
import inspect
import math
import os
import re
import threading
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..classify import batch_dims, classify, dtype_family
from ..costs import OUTPUT_NAMES, SIDE_WORDS, bare_name
from ..errors import AbductuneError, InvalidSeed, SpaceError
from ..hardware import HardwareInfo, as_hardware
from ..problem import Problem
from ..space import Config, Space
from ..theory.resources import fit, trouble
from .base import AutotunerHeuristic, register_heuristic
from .realize import realize

MISSING = "the NVIDIA matmul model needs nvidia-matmul-heuristics: pip install 'abductune[nvidia]'"
NAME = "nvidia_model"

# HardwareInfo table name -> the model's NvMatmulHeuristicsNvidiaGpu member
GPU_ENUMS: dict[str, str] = {
    "H100-SXM": "H100_SXM", "H100-PCIe": "H100_PCIE", "H200": "H200_SXM",
    "A100-SXM": "A100_SXM_80GB", "A100-PCIe": "A100_PCIE_80GB", "L40S": "L40S", "B200": "B200",
    "RTX 3090": "RTX_3090", "RTX 4090": "RTX_4090", "RTX A6000": "RTX_A6000",
}

# model candidates asked for per config returned (duplicates after realization are common:
# stages 6-8 all clamp to a space's largest)
OVERASK = 4
MIN_ASK = 16

_LETTERS = {"fp16": "H", "float16": "H", "half": "H", "f16": "H", "bf16": "T", "bfloat16": "T",
            "fp32": "S", "float32": "S", "f32": "S", "float": "S", "tf32": "S",
            "int8": "B", "i8": "B", "s8": "B"}


def _module() -> Any | None:
    """The nvMatmulHeuristics module, or None when it is not installed (no log: absence is
    the normal case and must stay quiet)."""
    global _MOD
    if _MOD is _UNSET:
        try:
            _MOD = importlib.import_module("nvMatmulHeuristics")
        except Exception:  # noqa: BLE001 - ImportError, or an .so that cannot load
            _MOD = None
    return _MOD


_UNSET = object()
_MOD: Any = _UNSET


def available() -> bool:
    """Whether the NVIDIA model can be used here."""
    return _module() is not None


def _require() -> Any:
    mod = _module()
    if mod is None:
        raise AbductuneError(MISSING)
    return mod


# ------------------------------------------------------------------------ mapping the problem

def _squash(s: str) -> str:
    return re.sub(r"[\s_\-]+", "", str(s)).lower()


def gpu_enum_name(hardware: HardwareInfo | str | None) -> str | None:
    """The model's GPU name for `hardware` (see `GPU_ENUMS`), None when it has none."""
    hw = as_hardware(hardware)
    if hw is None or hw.vendor not in ("nvidia", "unknown"):
        return None
    if hw.name in GPU_ENUMS:
        return GPU_ENUMS[hw.name]
    mod = _module()
    members = ([m for m in mod.NvMatmulHeuristicsNvidiaGpu.__members__ if m != "END"] if mod else
               sorted(set(GPU_ENUMS.values())))
    want = _squash(hw.name)
    return next((m for m in members if _squash(m) == want), None)


def _letter(dtype: str) -> str | None:
    d = str(dtype).lower().replace("torch.", "")
    if d in _LETTERS:
        return _LETTERS[d]
    if "e5m2" in d:
        return "R"
    if dtype_family(d) == "fp8":
        return "Q"  # e4m3 (fp8, float8_e4m3fn, ...)
    return None


def _operands(problem: Problem) -> tuple[list[str], str | None]:
    """(dtypes of the two GEMM operands, dtype of the output or None)."""
    ins: list[str] = []
    out = None
    for name, dt in problem.dtypes.items():
        n = bare_name(name)  # the names `costs` reads a product's operands by, so both agree
        if n in OUTPUT_NAMES:
            out = dt
        elif any(w in n for w in SIDE_WORDS) or dtype_family(dt) in ("int32", "int64"):
            continue
        elif len(ins) < 2:
            ins.append(dt)
    return ins, out


def precision_string(problem: Problem) -> str | None:
    """The model's precision string for `problem` (see the module docstring), None when the
    model does not cover its dtypes."""
    ins, out = _operands(problem)
    if not ins:
        return None
    la = _letter(ins[0])
    lb = _letter(ins[1]) if len(ins) > 1 else la
    lo = _letter(out) if out is not None else None
    if la is None or lb is None:
        # weight-only quantization: the dot runs on the 16-bit activation's type
        la = lb = next((x for x in (la, lb) if x in ("H", "T")), None)
        if la is None:
            return None
    if la in ("H", "T") and lb in ("H", "T"):
        if la != lb:
            return None
        return f"{la}S{'S' if lo == 'S' else la}"
    if la in ("H", "T") or lb in ("H", "T"):  # 16-bit activation x 8-bit weight
        a = la if la in ("H", "T") else lb
        return f"{a}S{'S' if lo == 'S' else a}"
    if la == lb == "S":
        return "SFS"
    if la == lb == "B":
        return "BII"
    if la in ("Q", "R") and lb in ("Q", "R") and not (la == lb == "R"):
        c = lo if lo in ("T", "H", "S") else "T"
        return f"{la}{lb}{c}S{c}"
    return None


_LAYOUTS = ("NN", "NT", "TN", "TT")


def layout_name(problem: Problem, space: Space | None = None, layout: Any = None) -> str:
    """The model's layout member name ("NN_ROW_MAJOR", ...): the `layout` argument, else the
    problem's `trans_a` / `trans_b` dims, else the space's `layout` constant, else NN."""
    if layout is None and space is not None:
        layout = space.constants.get("layout")
    if layout is not None:
        s = str(getattr(layout, "name", layout)).upper().replace("-", "_")
        if s in _LAYOUTS:
            return f"{s}_ROW_MAJOR"
        if s[:2] in _LAYOUTS and s.endswith(("_ROW_MAJOR", "_COL_MAJOR")):
            return s
        raise AbductuneError(f"layout {layout!r}: give NN, NT, TN or TT (optionally with "
                             "_ROW_MAJOR or _COL_MAJOR)")
    d = {k.lower().replace("_", ""): v for k, v in problem.dims.items()}
    ta, tb = bool(d.get("transa", 0)), bool(d.get("transb", 0))
    return f"{'T' if ta else 'N'}{'T' if tb else 'N'}_ROW_MAJOR"


def _mnk(problem: Problem) -> tuple[int, int, int] | None:
    c = classify(problem)
    d = c.dims
    if c.variant == "moe" or "E" in d:
        return None
    if all(x in d for x in "MNK"):
        return int(d["M"]), int(d["N"]), int(d["K"])
    return None


def batch_of(problem: Problem) -> int:
    """The number of independent products a batched matmul computes (`classify.batch_dims`, as
    `theory.diagnose.grid_tiles` counts them), else 1: the model takes a batch size."""
    c = classify(problem)
    return math.prod(int(c.dims[k]) for k in batch_dims(c))


def why_not(problem: Problem, hardware: HardwareInfo | str | None = None) -> str | None:
    """Why the model cannot serve `problem` (None when it can), module presence aside."""
    cls = classify(problem).kernel_class
    if cls not in ("matmul", "quantized_matmul"):
        return f"the NVIDIA model covers matmuls, not {cls} kernels"
    if _mnk(problem) is None:
        return ("a MoE matmul (its per-expert M depends on the routing)" if "E" in classify(problem).dims
                else "no M, N, K dims")
    hw = as_hardware(hardware) if hardware is not None else problem.hardware
    if gpu_enum_name(hw) is None:
        return f"the NVIDIA model has no description of GPU {hw.name if hw else '(unknown)'!r}"
    if precision_string(problem) is None:
        return f"the NVIDIA model has no precision for dtypes {dict(problem.dtypes)}"
    return None


# ------------------------------------------------------------------------ the model

_LOCK = threading.Lock()
_HANDLES: dict[str, Any] = {}


def _handle(gpu: str) -> tuple[Any, Any]:
    """(interface, hardware descriptor or None) for `gpu`, made once per GPU. The 0.1.0.27
    interface takes the GPU at construction (`load_discovery_implicitly`); later versions
    take a hardware descriptor per call (not tried here: only 0.1.0.27 was at hand)."""
    mod = _require()
    with _LOCK:
        if gpu not in _HANDLES:
            Ex = mod.NvMatmulHeuristicsInterfaceEx
            flags = mod.NvMatmulHeuristicsFlags.PERF_MODEL_BASED_AUTO_TUNING
            target = mod.NvMatmulHeuristicsTarget.TRITON
            member = mod.NvMatmulHeuristicsNvidiaGpu[gpu]
            params = inspect.signature(Ex.__init__).parameters
            if "load_discovery_implicitly" in params:
                _HANDLES[gpu] = (Ex(backend=target, flags=flags, load_discovery_implicitly=True,
                                    gpu=member), None)
            else:  # pragma: no cover - newer API shape, untested
                lh = Ex(backend=target, flags=flags)
                desc = lh.createHardwareDescriptor()
                lh.setHardwarePredefinedGpu(desc, member)
                _HANDLES[gpu] = (lh, desc)
        return _HANDLES[gpu]


@dataclass(frozen=True)
class ModelConfig:
    """One candidate of the model, in its own terms."""

    rank: int
    cta: tuple[int, int, int]
    warp: tuple[int, int, int]
    stages: int
    split_k: int
    swizzle: int
    cta_order: int
    runtime_s: float
    restricted: bool = True  # asked with what the space can express (see `model_configs`)

    @property
    def warps(self) -> int:
        """Warps of the model's warp tiling; 8 for tiles of 128 x 256 or more and 4 otherwise
        when it gives no warp tile (the Triton tutorial's rule)."""
        if all(self.warp) and all(c % w == 0 for c, w in zip(self.cta, self.warp)):
            return max(1, (self.cta[0] // self.warp[0]) * (self.cta[1] // self.warp[1])
                       * (self.cta[2] // self.warp[2]))
        return 8 if self.cta[0] * self.cta[1] >= 128 * 256 else 4

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "cta": list(self.cta), "warp": list(self.warp),
                "stages": self.stages, "split_k": self.split_k, "swizzle": self.swizzle,
                "cta_order": self.cta_order, "warps": self.warps,
                "est_runtime_us": round(self.runtime_s * 1e6, 3),
                "pass": "expressible" if self.restricted else "unrestricted"}


def _allowed(space: Space | None) -> tuple:
    """What the space can express, for the model's validity callback: the allowed values of
    @tile:M, @tile:N, @tile:K and @warps (None where the space lacks the role), and whether
    it has @split:K."""
    if space is None:
        return (None, None, None, None, True)
    vals = []
    for role in ("tile:M", "tile:N", "tile:K", "warps"):
        p = space.by_role(role)
        vals.append(tuple(sorted(int(v) for v in p.values)) if p is not None and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in p.values) else None)
    return (*vals, space.by_role("split:K") is not None)


def model_configs(problem: Problem, count: int, *, hardware: HardwareInfo | str | None = None,
                  layout: Any = None, space: Space | None = None) -> list[ModelConfig]:
    """The model's best candidates for `problem` (at most `count`; the model may have fewer),
    in its order. With `space`, the model is told what the kernel can express: no split-K
    unless the space has @split:K, and (through its validity callback) only CTA tiles and
    warp counts the space allows. Raises AbductuneError when the package is absent or the
    problem is outside the model."""
    _require()
    reason = why_not(problem, hardware)
    if reason:
        raise AbductuneError(reason)
    hw = as_hardware(hardware) if hardware is not None else problem.hardware
    gpu = gpu_enum_name(hw)
    m, n, k = _mnk(problem)  # type: ignore[misc]
    return _query(gpu, precision_string(problem), layout_name(problem, space, layout), m, n, k,
                  max(1, int(count)), _allowed(space), batch_of(problem))


def _to_model_config(rank: int, r: Mapping[str, Any]) -> ModelConfig:
    kc = r["kernel"]
    return ModelConfig(
        rank=rank, cta=(int(kc.cta_tile_m), int(kc.cta_tile_n), int(kc.cta_tile_k)),
        warp=(int(kc.warp_tile_m or 0), int(kc.warp_tile_n or 0), int(kc.warp_tile_k or 0)),
        stages=int(kc.stages), split_k=max(1, int(kc.split_k or 1)),
        swizzle=max(1, int(kc.swizzle_factor or 1)), cta_order=int(kc.cta_order or 0),
        runtime_s=float(r.get("runtime") or 0.0))


def _query(gpu: str, precision: str, layout: str, m: int, n: int, k: int, count: int,
           allowed: tuple, batch: int = 1) -> list[ModelConfig]:
    key = (gpu, precision, layout, m, n, k, count, allowed, batch)
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
    mod = _require()
    lh, desc = _handle(gpu)
    lay = mod.NvMatmulHeuristicsMatmulLayout[layout]
    tm, tn, tk, warps, has_split = allowed

    def expressible(cfg_p: Any, _prob: Any) -> int:
        try:
            c = cfg_p.contents
            cta, wt = tuple(c.cta), tuple(c.warp)
            for allow, v in ((tm, cta[0]), (tn, cta[1]), (tk, cta[2])):
                if allow is not None and v not in allow:
                    return 0
            if warps is not None and all(wt):
                w = (cta[0] // wt[0]) * (cta[1] // wt[1]) * max(1, cta[2] // wt[2])
                if w not in warps:
                    return 0
            return 1
        except Exception:  # noqa: BLE001 - never raise into C
            return 1

    with _LOCK:  # one handle per GPU, not documented as thread-safe
        prob = lh.makeNvMatmulHeuristicsProblem(m, n, k, lay, batch)
        backend = lh.createBackend(mod.NvMatmulHeuristicsTarget.TRITON)
        try:
            if not has_split:
                none = ctypes.c_int(int(mod.NvMatmulHeuristicsSplitKKind.NONE))
                lh.setBackendValueProperty(backend, mod.NvMatmulHeuristicsBackendProperty.SPLIT_K_KIND,
                                           ctypes.byref(none), ctypes.sizeof(none))
            lh.setBackendCallbackProperty(
                backend, mod.NvMatmulHeuristicsBackendPropertyCallbackKind.KERNEL_ADDITIONAL_VALIDITY_CHECK,
                expressible)
            raw = (lh.getEx(prob, count, backend, precision=precision) if desc is None
                   else lh.getEx(prob, count, backend, desc))  # pragma: no cover - newer API shape
        finally:
            lh.destroyBackend(backend)
    out = [_to_model_config(i + 1, r) for i, r in enumerate(raw)]
    with _LOCK:
        if len(_CACHE) > 4096:
            _CACHE.clear()
        _CACHE[key] = out
    return out


_CACHE: dict[tuple, list[ModelConfig]] = {}


def model_partial(mc: ModelConfig, space: Space) -> dict[str, Any]:
    """A model candidate as a partial config keyed by role (roles the space lacks left out)."""
    p: dict[str, Any] = {"@tile:M": mc.cta[0], "@tile:N": mc.cta[1], "@tile:K": mc.cta[2],
                         "@stages": mc.stages, "@warps": mc.warps}
    if space.by_role("split:K") is not None:
        p["@split:K"] = mc.split_k
    if space.by_role("group") is not None:
        p["@group"] = mc.swizzle
    return {k: v for k, v in p.items() if space.by_role(k[1:]) is not None}


class TopK(list):
    """The realized configs (a list, best first) with what became of each model candidate:
    `fired` entries {rank, model, status: "seed" / "duplicate" / "invalid", reason, config},
    JSON-ready, and the `precision`, `layout` and `gpu` the model was asked with."""

    def __init__(self, configs: list[Config], fired: list[dict[str, Any]], precision: str,
                 layout: str, gpu: str):
        super().__init__(configs)
        self.fired = fired
        self.precision, self.layout, self.gpu = precision, layout, gpu


def _plain(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in cfg.items()}


def _realized(problem: Problem, space: Space, k: int, hardware: Any, layout: Any,
              base: Mapping[str, Any] | None) -> TopK:
    hw = as_hardware(hardware) if hardware is not None else problem.hardware
    cls = classify(problem, space)
    want = max(1, int(k))
    ask = max(MIN_ASK, OVERASK * want)
    mcs = model_configs(problem, ask, hardware=hw, layout=layout, space=space)
    if len(mcs) < ask:
        # the model knows few candidates the kernel can express: its unrestricted ranking
        # follows (split-K dropped where the space has none), after those
        first = {(m.cta, m.warps, m.stages) for m in mcs}
        extra = [m for m in model_configs(problem, ask, hardware=hw, layout=layout, space=None)
                 if (m.cta, m.warps, m.stages) not in first]
        mcs = mcs + [dataclasses.replace(m, rank=len(mcs) + i + 1, restricted=False)
                     for i, m in enumerate(extra)]
    configs: list[Config] = []
    fired: list[dict[str, Any]] = []
    seen: dict[tuple, int] = {}
    for mc in mcs:
        if len(configs) >= want:
            break
        partial = model_partial(mc, space)
        entry: dict[str, Any] = {"rank": mc.rank, "model": mc.to_dict(), "partial": partial}
        try:
            cfg = realize(space, partial, problem, base=base, cls=cls)
        except (InvalidSeed, SpaceError, TypeError, ValueError, KeyError) as e:
            fired.append({**entry, "status": "invalid", "reason": str(e), "config": None})
            continue
        fitted, changes = fit(problem, space, cfg)
        if fitted is None:
            fired.append({**entry, "status": "invalid", "config": _plain(cfg),
                          "reason": "resource model: " + str(trouble(problem, space, cfg))})
            continue
        cfg = _plain(fitted)
        reason = ("resource model: " + ", ".join(changes)) if changes else ""
        if mc.split_k > 1 and space.by_role("split:K") is None:
            reason = (reason + "; " if reason else "") + f"split-K {mc.split_k} dropped (no @split:K)"
        key = space.key(cfg)
        if key in seen:
            fired.append({**entry, "status": "duplicate", "config": cfg,
                          "reason": f"same config as model rank {seen[key]}"})
            continue
        seen[key] = mc.rank
        configs.append(cfg)
        fired.append({**entry, "status": "seed", "config": cfg, "reason": reason})
    return TopK(configs, fired, precision_string(problem) or "",
                layout_name(problem, space, layout), gpu_enum_name(hw) or "")


def nvidia_topk(problem: Problem, space: Space, k: int = 8, *,
                hardware: HardwareInfo | str | None = None, layout: Any = None,
                base: Mapping[str, Any] | None = None) -> TopK:
    """The NVIDIA model's `k` best configs for `problem`, realized in `space` (distinct,
    valid, and within the resource model), in the model's order; fewer when the model runs
    out of candidates that survive realization. `.fired` says what became of each candidate.
    Raises AbductuneError when nvidia-matmul-heuristics is absent or the problem is outside
    the model (not a matmul, an unknown GPU, unsupported dtypes)."""
    return _realized(problem, space, k, hardware, layout, base)


SEED_ENV = "ABDUCTUNE_NVIDIA_SEED"


@register_heuristic
class NvidiaMatmulModel(AutotunerHeuristic):
    """Seed: the first of NVIDIA's analytic-model candidates (nvMatmulHeuristics, target
    TRITON) that realizes into the space and fits the resource model, keyed by role.
    Ineligible, quietly, without the package, off matmuls, on GPUs the model does not
    describe and for dtypes it does not cover (see the module docstring)."""

    name = NAME
    backend = "triton"
    kernel_classes = ("matmul", "quantized_matmul")

    def is_eligible(self, problem: Problem, hardware: HardwareInfo | None) -> bool:
        # Off unless asked for (ABDUCTUNE_NVIDIA_SEED=1): one more seed moves every seeded
        # matmul search, and whether it helps leave-one-kernel-out is not measured yet
        # (docs/PERFORMANCE.md); `nvidia_topk` and the zero-shot tables use the model directly.
        if os.environ.get(SEED_ENV) != "1":
            return False
        if not available() or not super().is_eligible(problem, None):
            return False
        return why_not(problem, hardware if hardware is not None else problem.hardware) is None

    def get_seed_config(self, problem: Problem, hardware: HardwareInfo | None,
                        space: Space) -> Mapping[str, Any] | None:
        if space.by_role("tile:M") is None and space.by_role("tile:N") is None:
            return None
        top = _realized(problem, space, 1, hardware, None, None)
        first = next((f for f in top.fired if f["status"] == "seed"), None)
        return first["partial"] if first else None
