"""NVIDIA's analytic GEMM model asked about any config of a space: its runtime estimate, not only its own top-k.

    from abductune.heuristics.nvidia_estimate import estimates
    us = estimates(problem, space, configs)    # seconds per config, None where the model cannot say

`heuristics.nvidia` asks the model for its best candidates; here the same model (same GPU,
precision and layout as `nvidia.model_configs` puts the problem) estimates the runtime of
configs it did not propose, so its opinion can be read beside the ranker's for every config a
space allows. A config is put to it by role, as `nvidia.model_partial` reads a candidate back:
@tile:M / @tile:N / @tile:K -> CTA tile, @stages -> load stages (3 where the space has none),
@split:K -> split-K, @group -> grid swizzle, and the warps become a warp tiling (warps along M
first, each warp at least 16 rows, the rest along N). The instruction tile is the one the
model's own first candidate uses. On the H100 the estimate does not move with stages, warp
tiling or swizzle (checked with nvidia-matmul-heuristics 0.1.0.27): it tells tile shapes,
split-K and wave quantization apart, with plateaus of exact ties among large tiles.

The package's `estimateRuntime` wrapper fails in 0.1.0.27 (it calls a method its base class
lacks), so the library's estimate is called the way the package's own `getEx` calls it, with
the handle's hardware descriptor; any failure of it gives None, never an exception.
"""
from __future__ import annotations

import ctypes
import logging
import math
from typing import Any, Mapping, Sequence

from ..errors import AbductuneError
from ..problem import Problem
from ..space import Space
from . import nvidia

log = logging.getLogger(__name__)

DEFAULT_STAGES = 3
MIN_WARP_ROWS = 16  # an mma tile's rows: a warp covers at least this many along M
MIN_WARP_COLS = 8


def _int(space: Space, config: Mapping[str, Any], role: str) -> int | None:
    p = space.by_role(role)
    v = config.get(p.name) if p is not None else None
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def warp_tile(cta: tuple[int, int, int], warps: int) -> tuple[int, int, int] | None:
    """A warp tiling of `cta` for `warps` warps: along M while each warp keeps `MIN_WARP_ROWS`
    rows, the rest along N; None when the warps cannot all be placed."""
    along_m = 1
    while along_m * 2 <= warps and cta[0] // (along_m * 2) >= MIN_WARP_ROWS:
        along_m *= 2
    along_n = max(1, warps // along_m)
    if along_m * along_n != warps or cta[1] // along_n < MIN_WARP_COLS:
        return None
    return cta[0] // along_m, cta[1] // along_n, cta[2]


def estimates(problem: Problem, space: Space, configs: Sequence[Mapping[str, Any]], *,
              layout: Any = None) -> list[float | None]:
    """The NVIDIA model's runtime estimate (seconds) of each config, None where the model
    cannot say (no tile roles, a tiling it rejects). Raises AbductuneError when the package is
    absent or the problem is outside the model (`nvidia.why_not`)."""
    mod = nvidia._require()
    reason = nvidia.why_not(problem)
    if reason:
        raise AbductuneError(reason)
    gpu = nvidia.gpu_enum_name(problem.hardware)
    lh, _ = nvidia._handle(gpu)  # type: ignore[arg-type]
    m, n, k = nvidia._mnk(problem)  # type: ignore[misc]
    precision = nvidia.precision_string(problem)
    lay = mod.NvMatmulHeuristicsMatmulLayout[nvidia.layout_name(problem, space, layout)]
    Kc = mod.NvMatmulHeuristicsInterface.nvmmhKernelConfiguration
    instr = _first_instr(lh, mod, m, n, k, lay, precision)  # (its getEx loads the precision's data)
    fn = getattr(lh, "nvMatmulHeuristicsEstimateRuntime", None)
    desc = getattr(lh, "hardware_descriptor", None)
    if fn is None or instr is None:
        return [None] * len(configs)
    out: list[float | None] = []
    with nvidia._LOCK:
        prob = lh.makeNvMatmulHeuristicsProblem(m, n, k, lay)
        for cfg in configs:
            kc = _kernel_config(Kc, space, cfg, instr)
            if kc is None:
                out.append(None)
                continue
            try:
                t = float(fn(lh.handle, precision.encode("ascii"), lh.target, ctypes.byref(prob),
                             ctypes.byref(kc), desc if desc else lh.nullptr))
            except Exception as e:  # noqa: BLE001 - a foreign library: a failure is "no estimate"
                log.info("NVIDIA estimate failed for %s: %s", dict(cfg), e)
                t = 0.0
            out.append(t if t > 0 and math.isfinite(t) else None)
    return out


def _first_instr(lh: Any, mod: Any, m: int, n: int, k: int, lay: Any, precision: str) -> list[int] | None:
    """The instruction tile of the model's first candidate for the problem."""
    with nvidia._LOCK:
        backend = lh.createBackend(mod.NvMatmulHeuristicsTarget.TRITON)
        try:
            raw = lh.getEx(lh.makeNvMatmulHeuristicsProblem(m, n, k, lay), 1, backend, precision=precision)
        finally:
            lh.destroyBackend(backend)
    return list(raw[0]["nvmmhKernelConfiguration"].instr) if raw else None


def _kernel_config(Kc: Any, space: Space, cfg: Mapping[str, Any], instr: list[int]) -> Any | None:
    bm, bn, bk = (_int(space, cfg, r) for r in ("tile:M", "tile:N", "tile:K"))
    if not (bm and bn and bk):
        return None
    cta = (bm, bn, bk)
    warps = _int(space, cfg, "warps") or 4
    wt = warp_tile(cta, warps)
    if wt is None:
        return None
    kc = Kc()
    kc.cta[:] = list(cta)
    kc.warp[:] = list(wt)
    kc.instr[:] = instr
    kc.splitK = _int(space, cfg, "split:K") or 1
    kc.loadStages = min(255, _int(space, cfg, "stages") or DEFAULT_STAGES)
    kc.gridSwizzle = min(255, _int(space, cfg, "group") or 1)
    kc.ctaOrder = 0
    kc.cluster[:] = [1, 1]
    return kc


def reranked(problem: Problem, space: Space, k: int = 8, *, exclude: Any = None) -> list[dict[str, Any]]:
    """NVIDIA's top `k` (`nvidia.nvidia_topk`: realized, within the resource model) ordered by
    the shipped ranker (refitted without what `exclude` covers): the model proposes, the ranker
    learned across kernels chooses among its proposals. [] when either cannot serve the problem
    (no package, not a matmul the model describes, a space the ranker cannot read)."""
    from . import ranker_shipped

    if not nvidia.available() or nvidia.why_not(problem) is not None:
        return []
    if ranker_shipped.why_not(problem, space) is not None:
        return []
    try:
        top = list(nvidia.nvidia_topk(problem, space, k))
        ranker, _ = ranker_shipped.shipped_ranker(exclude)
        return [dict(c) for c in ranker.rank(problem, space, top)] if top else []
    except AbductuneError as e:
        log.info("no NVIDIA re-ranking for %s: %s", problem.kernel, e)
        return []
