"""abductune.inductor's matmul seam: Inductor's Triton mm template, with abductune's configs, where it can win.

While an `enable(gemm=N)` is live (the innermost enable's N counts), three things in Inductor are
replaced, and put back exactly when the last such enable ends (`install`):

1. The lowerings of `aten.mm` and `aten.addmm` (every key of Inductor's `lowerings` table that
   holds them). A static 16-bit matmul that is memory-bound on this GPU (`inductor_gemm.memory_bound`)
   is lowered with Inductor's template switch on for that one lowering (`GEMM_CONFIG`:
   `max_autotune_gemm`, backends ATEN and TRITON); every other matmul is lowered exactly as
   Inductor would. The switch is not turned on for the whole process: it also changes how ATen's
   own addmm is lowered (a bias copied into the output, then a GEMM that adds it), which on
   BERT's compute-bound addmm cost 11% more of the step's GPU time with no template chosen (H200,
   session 38, one repeat: 2,951 against 2,650 us).
2. `BaseConfigHeuristic.preprocess_mm_configs`, which turns a template heuristic's config list
   into the configs Inductor compiles: inside such a lowering, for the plain mm and addmm
   heuristics, `inductor_gemm.pick`'s N configs stand in for Inductor's list. Outside it (the
   user's own max-autotune), Inductor's list is untouched.
3. `config.post_grad_custom_post_pass`, where the user has none: a pass that does nothing, so that
   Inductor's FX graph cache keeps graphs lowered with the seam apart (`_salt`).

4. A feedback function and a preprocessing function in Inductor's algorithm selector, while the
   seam is in place. The preprocessing has a switched matmul's choices timed from CUDA graphs
   where Inductor can (`_in_graphs`: the GPU's time, not the launches'). The feedback puts
   Inductor's timings of a switched matmul's picks and ATen into the enable's store
   (`inductor_gemm.record`). A matmul the store has a verdict for (`inductor_gemm.verdict`) is
   lowered from it: ATen's as Inductor would, nothing timed; a pick's with that config alone
   (backend TRITON only: a single choice, which Inductor takes untimed).

Each static 16-bit CUDA matmul lowered while the seam is in place leaves an entry in the enable's
`handle.gemm` (its sizes, the decision, the picks, the seconds the pick took). Lowering runs in the process that calls
`torch.compile`, so nothing here travels to Inductor's compile workers.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import os
import threading
import time
from typing import Any

from . import inductor_gemm as G
from .inductor_state import _LOCK, _ORIGINAL, InductorVersionError, active

log = logging.getLogger(__name__)

# Inductor's heuristics whose `preprocess_mm_configs` makes the plain mm and addmm template's list
# (not the persistent-TMA, scaled, int8 or mm-plus-mm ones, which have their own templates)
GEMM_HEURISTICS = ("CUDAMMTemplateConfigHeuristic", "CUDAAddMMTemplateConfigHeuristic")
GEMM_OPS = ("mm", "addmm")
# Inductor's config inside the lowering of a matmul abductune picks for: the Triton template
# beside ATen, and never the C++ GEMM template, which the same switch turns on for CPU matmuls
GEMM_CONFIG = {"max_autotune_gemm": True, "max_autotune_gemm_backends": "ATEN,TRITON"}
# how the choices of a switched matmul are timed (`judge`), kept with each stored verdict: a
# verdict reached by another judge is not taken
JUDGES = ("cuda_graph", "inductor", "profiler")
# experimental, for an Inductor without CUDA-graph timing (torch 2.11): "profiler" has the
# feedback re-time a switched matmul's choices under the profiler (kernel time only) and
# Inductor choose on those times (`_feedback`); on the H200 it did not close decode's gap and
# cost compile time (docs/INDUCTOR.md), so it stays off unless asked for
JUDGE_ENV = "ABDUCTUNE_INDUCTOR_GEMM_JUDGE"
# ... and for a matmul whose stored verdict is a pick: that config alone, so nothing is timed
STORED_CONFIG = {"max_autotune_gemm": True, "max_autotune_gemm_backends": "TRITON"}

# .sizes: the matmul being lowered under GEMM_CONFIG in this thread; .forced: its stored pick
_SCOPE = threading.local()
# switched matmuls whose timings are still to come: (op, (m, n, k), dtype) -> (handle, limit). Inductor
# may time a template's choices after the lowering (when it schedules, to weigh epilogue fusion),
# so the feedback finds its matmul here rather than in the lowering's scope
_PENDING: dict[tuple, tuple[Any, int]] = {}
_ON_ANY_DEVICE = False  # tests: judge a CPU matmul as if it ran on the GPU (`_hardware`), to drive the seam


def seam() -> tuple[Any, Any, Any]:
    """Inductor's config, template heuristics module and lowerings table, where they have what
    the seam replaces; else InductorVersionError, one line."""
    import torch
    from torch._inductor import config

    try:
        from torch._inductor import lowering
        from torch._inductor.template_heuristics import triton as tt
    except ImportError as e:
        raise InductorVersionError(f"this torch's Inductor has no {e.name or e}, which abductune's matmul picks "
                                   "hook: pass gemm=0 to leave matmuls to Inductor") from None
    missing = [n for n in ("BaseConfigHeuristic", *GEMM_HEURISTICS) if not hasattr(tt, n)]
    missing += [k for k in GEMM_CONFIG if not hasattr(config, k)]
    if not hasattr(getattr(tt, "BaseConfigHeuristic", None), "preprocess_mm_configs"):
        missing.append("BaseConfigHeuristic.preprocess_mm_configs")
    table = getattr(lowering, "lowerings", None)
    aten = torch.ops.aten
    if not isinstance(table, dict) or aten.mm not in table or aten.addmm not in table:
        missing.append("lowerings[aten.mm / aten.addmm]")
    if missing:
        raise InductorVersionError(f"this torch's Inductor lacks {missing[0]}, which abductune's matmul picks "
                                   "hook: pass gemm=0 to leave matmuls to Inductor")
    return config, tt, table


def _limit() -> int:
    h = active()
    return h.settings.gemm if h is not None else 0


def install() -> None:
    """Put the seam in place while the innermost live enable asks for `gemm`, Inductor's own
    functions back otherwise (under the state lock, as the loader's)."""
    with _LOCK:
        want = _limit() > 0
        if want and "gemm_lowerings" not in _ORIGINAL:
            import torch

            _, tt, table = seam()
            aten = torch.ops.aten
            saved: dict[Any, Any] = {}
            for op, name in ((aten.mm, "mm"), (aten.addmm, "addmm")):
                fn = table[op]
                wrapped = _lowering(fn, name)
                for key, value in list(table.items()):
                    if value is fn:  # the packet and each of its overloads
                        saved[key] = value
                        table[key] = wrapped
            _ORIGINAL["gemm_lowerings"] = saved
            _ORIGINAL["preprocess_mm_configs"] = tt.BaseConfigHeuristic.preprocess_mm_configs
            tt.BaseConfigHeuristic.preprocess_mm_configs = _preprocess_mm_configs
            _salt(True)
        elif not want and "gemm_lowerings" in _ORIGINAL:
            _salt(False)
            _selector_hooks(False)
            _PENDING.clear()
            _, tt, table = seam()
            for key, fn in _ORIGINAL.pop("gemm_lowerings").items():
                if getattr(table.get(key), "_abt_original", None) is fn:
                    table[key] = fn
                else:
                    log.warning("abductune.inductor: the lowering of %s was replaced by someone else; left as it is",
                                key)
            tt.BaseConfigHeuristic.preprocess_mm_configs = _ORIGINAL.pop("preprocess_mm_configs")


def _salt(on: bool) -> None:
    """Inductor's FX graph cache keys a compiled graph by its config, which the seam does not
    change: a graph compiled without the seam would be loaded from the cache and never lowered
    again, keeping its matmuls as they were (and one compiled with it would serve a process
    without it). A post-grad pass that does nothing, whose uuid names the seam, goes into the key
    while it is in place; only where the user has no pass of their own there (theirs is left
    alone, and the cache is then shared: logged)."""
    from torch._inductor import config

    if on:
        if config.post_grad_custom_post_pass is None:
            config.post_grad_custom_post_pass = _salt_type()()
        else:
            log.info("abductune.inductor: a post-grad pass of your own is set, so graphs Inductor cached before "
                     "the matmul seam can be loaded without it")
    elif isinstance(config.post_grad_custom_post_pass, _salt_type()):
        config.post_grad_custom_post_pass = None


@functools.lru_cache(maxsize=1)
def _salt_type() -> type:
    """The do-nothing post-grad pass `_salt` sets (made on first use: it subclasses Inductor's)."""
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class GemmSalt(CustomGraphPass):
        """Changes nothing; its uuid keeps graphs lowered with the matmul seam apart in Inductor's
        FX graph cache (`_salt`)."""

        def __call__(self, graph: Any) -> None:
            return None

        def uuid(self) -> Any:
            from .. import __version__

            return f"abductune.inductor matmul seam {__version__}"

    return GemmSalt


def _selector_hooks(on: bool) -> bool:
    """Put `_feedback` among the feedback functions of Inductor's algorithm selector (True where
    it is there), and `_in_graphs` among its preprocessing functions where it has them; or take
    both out. Checked at each switched lowering, not once: Inductor makes its selector anew when
    its caches are cleared, and the new one has none of them."""
    try:
        from torch._inductor import select_algorithm as sa

        cache = sa.get_algorithm_selector_cache()
        fns = cache.feedback_saver_fns
    except (ImportError, AttributeError) as e:  # an Inductor without feedback: nothing is recorded
        log.info("abductune.inductor: Inductor's timings of the matmul picks cannot be kept (%s)", e)
        return False
    pre = getattr(cache, "preprocessing_fns", None)
    for hook, lst in ((_feedback, fns), (_in_graphs, pre)):
        if lst is None:
            continue
        if on and hook not in lst:
            lst.append(hook)
        elif not on:
            while hook in lst:
                lst.remove(hook)
    return True


def judge() -> str:
    """"cuda_graph" where this Inductor can time a selection's choices replayed from CUDA graphs
    (its `benchmark_with_cudagraphs`, which `_in_graphs` turns on: torch 2.13 has it, 2.11 does
    not); else "profiler" where `JUDGE_ENV` asks for it; else "inductor" (its eager timing)."""
    if _graph_judge():
        return JUDGES[0]
    return JUDGES[2] if os.environ.get(JUDGE_ENV, "").strip().lower() == JUDGES[2] else JUDGES[1]


@functools.lru_cache(maxsize=1)
def _graph_judge() -> bool:
    import inspect

    try:
        from torch._inductor.select_algorithm import AlgorithmSelectorCache

        params = inspect.signature(AlgorithmSelectorCache.__call__).parameters
    except (ImportError, AttributeError, TypeError, ValueError):
        return False
    return "benchmark_with_cudagraphs" in params


def _in_graphs(choices: Any) -> Any:
    """Inductor's preprocessing of a matmul's choices: inside a lowering the seam switched on, each
    is timed replayed from a CUDA graph (Inductor's own `benchmark_with_cudagraphs`), so the judge
    sees the GPU's time. Timed as Inductor times them by default (eager launches, each wrapped in
    Python), a decode projection read 0.03 to 0.07 ms for ATen where the same cuBLAS kernels ran
    in about 0.02 ms in the model, and the picks won 6 or 7 of 7 matmuls with a step 3% slower on
    the GPU than cuBLAS's (H200, session 39; docs/INDUCTOR.md). Anything else is left as it is."""
    if getattr(_SCOPE, "sizes", None) is None or getattr(_SCOPE, "forced", None) is not None \
            or judge() != "cuda_graph":
        return choices
    out = list(choices)
    for c in out:
        if hasattr(c, "_benchmark_with_cudagraphs"):
            c._benchmark_with_cudagraphs = True
    return out


def _choice(caller: Any) -> dict[str, int] | None:
    """The template config of one of Inductor's Triton template choices (from what it logs of
    it: tile_shape is (BLOCK_M, BLOCK_K, BLOCK_N)); None for ATen or anything unreadable."""
    info = getattr(caller, "log_info", None)
    if not isinstance(info, dict) or "tile_shape" not in info:
        return None
    try:
        bm, bk, bn = (int(v) for v in str(info["tile_shape"]).strip("()").split(","))
        return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": int(info.get("GROUP_M", G.GROUP_M)),
                "num_warps": int(info["num_warps"]), "num_stages": int(info["num_stages"])}
    except (KeyError, TypeError, ValueError):
        return None


def _feedback(timings: Any, name: Any, input_nodes: Any, *rest: Any) -> None:
    """Inductor's feedback after timing a matmul's choices: for a matmul the seam switched on
    (`_PENDING`), its picks' and ATen's times go into the enable's store (`inductor_gemm.record`).
    Anything else is not ours; a failure is logged, never raised into the compile."""
    if name not in GEMM_OPS:
        return
    try:
        sizes, dtype = _sizes(name, tuple(input_nodes))
        pending = _PENDING.pop((name, tuple(sizes), dtype), None)
        if pending is None:
            return
        handle, limit = pending
        how = judge()
        if how == "profiler":
            _reprofile(timings, rest[1] if len(rest) >= 2 else None)
        picks, aten = [], []
        for caller, ms in dict(timings).items():
            cfg = _choice(caller)
            if cfg is not None:
                picks.append((cfg, float(ms)))
            elif "extern" in str(getattr(caller, "info_dict", lambda: {})().get("backend", "")).lower():
                aten.append(float(ms))
        aten_ms = min(aten) if aten else None
        got = G.record(handle.store, handle.toolchain, *sizes, dtype, _hardware(), limit, picks,  # type: ignore[arg-type]
                       aten_ms, judge=how)
        timed = {"won": got["won"], "config": got["config"], "aten_ms": aten_ms, "picks_ms": [ms for _, ms in picks]}
        for entry in reversed(handle.gemm):  # the lowering's entry gets what the timing found
            if (entry["op"], entry["M"], entry["N"], entry["K"], entry["dtype"]) == (name, *sizes, dtype) \
                    and entry.get("decision") == "template":
                entry.update(timed)
                break
    except Exception as e:  # noqa: BLE001 - abductune must never break a compile
        log.warning("abductune.inductor: Inductor's timings of %s were not kept (%s: %s)", name, type(e).__name__, e)


def _reprofile(timings: Any, profiled: Any) -> None:
    """The "profiler" judge: `profiled` (Inductor's thunk that times the same choices under the
    profiler, kernel time only) replaces each finite time in `timings`, in place: Inductor chooses
    from that dict once its feedback functions return. Left as it is where the thunk is missing
    or fails (logged)."""
    if not callable(profiled) or not isinstance(timings, dict):
        return
    try:
        got = dict(profiled())
    except Exception as e:  # noqa: BLE001 - the eager timings stand
        log.warning("abductune.inductor: the profiler's timing of a matmul's choices failed (%s: %s)",
                    type(e).__name__, e)
        return
    for caller, ms in got.items():
        if caller in timings and math.isfinite(timings[caller]) and (t := G.usable_ms(ms)) is not None:
            timings[caller] = t


@functools.lru_cache(maxsize=1)
def _hardware() -> Any:
    from ..hardware import local_hardware

    return local_hardware()


def _dtype(node: Any) -> str | None:
    """The picks' dtype name for a 16-bit float IR node (`inductor_gemm.DTYPES`), else None."""
    try:
        dt = node.get_dtype()
    except Exception:  # noqa: BLE001 - an IR node without a dtype is not ours to judge
        return None
    return G.DTYPES.get(getattr(dt, "itemsize", 0)) if getattr(dt, "is_floating_point", False) else None


def _sizes(op: str, args: tuple) -> tuple[list[int | None], str | None]:
    """([m, n, k], dtype) of an mm(mat1, mat2) or addmm(inp, mat1, mat2) being lowered on a CUDA
    device; dtype None for anything else (a CPU matmul has no Triton template to pick for)."""
    mats = args[:2] if op == "mm" else args[1:3]
    try:
        (m, k), (_, n) = (list(x.get_size()) for x in mats)
        cuda = all(getattr(x.get_device(), "type", None) == "cuda" for x in mats)
    except Exception:  # noqa: BLE001 - not two matrices: leave it to Inductor
        return [None, None, None], None
    return [G.as_int(v) for v in (m, n, k)], (_dtype(mats[0]) if cuda or _ON_ANY_DEVICE else None)


def _lowering(original: Any, op: str) -> Any:
    """`original` (Inductor's lowering of `op`), run with the template switch on for a static,
    memory-bound 16-bit matmul, as it is for anything else."""

    @functools.wraps(original)
    def lower(*args: Any, **kwargs: Any) -> Any:
        from torch._inductor import config

        handle = active()
        if handle is None or handle.settings.gemm <= 0 or getattr(_SCOPE, "sizes", None) is not None:
            return original(*args, **kwargs)
        sizes, dtype = _sizes(op, args)
        if dtype is None or None in sizes:
            return original(*args, **kwargs)
        try:
            bound = G.memory_bound(*sizes, dtype, _hardware())  # type: ignore[arg-type]
        except Exception as e:  # noqa: BLE001 - abductune must never break a compile
            log.warning("abductune.inductor: %s %s left to Inductor (%s: %s)", op, sizes, type(e).__name__, e)
            return original(*args, **kwargs)
        if not bound:
            handle.gemm.append({"op": op, "M": sizes[0], "N": sizes[1], "K": sizes[2], "dtype": dtype,
                                "decision": "inductor", "why": "compute-bound", "picks": []})
            return original(*args, **kwargs)
        limit = handle.settings.gemm
        try:
            stored = G.verdict(handle.store, handle.toolchain, *sizes, dtype, _hardware(), limit,  # type: ignore[arg-type]
                               judge=judge())
        except Exception as e:  # noqa: BLE001 - a store that cannot answer: time the picks again
            log.warning("abductune.inductor: no stored verdict for %s %s (%s: %s)", op, sizes, type(e).__name__, e)
            stored = None
        entry = {"op": op, "M": sizes[0], "N": sizes[1], "K": sizes[2], "dtype": dtype}
        if stored is not None and stored["won"] == "aten":
            handle.gemm.append({**entry, "decision": "store_aten", "picks": []})
            return original(*args, **kwargs)
        if stored is not None:
            handle.gemm.append({**entry, "decision": "store_template", "picks": [stored["config"]]})
            try:
                with lowering_scope(op, sizes, dtype, forced=stored["config"]), \
                        config.patch(STORED_CONFIG):  # type: ignore[arg-type]
                    return original(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - checked by name below, re-raised otherwise
                # the template refused this matmul (its layout, its alignment) and ATen was not
                # allowed: Inductor raises before it builds anything, so the matmul is lowered again
                # with ATen beside the picks, as if nothing were stored
                if type(e).__name__ != "NoValidChoicesError":
                    raise
                handle.gemm[-1].update(decision="store_template_refused", why=str(e).splitlines()[0][:200])
                log.warning("abductune.inductor: the stored pick for %s %s was refused (%s); timing again",
                            op, sizes, str(e).splitlines()[0][:120])
        if _selector_hooks(True):
            _PENDING[(op, tuple(sizes), dtype)] = (handle, limit)
        with lowering_scope(op, sizes, dtype), config.patch(GEMM_CONFIG):  # type: ignore[arg-type]
            return original(*args, **kwargs)

    lower._abt_original = original  # type: ignore[attr-defined]
    return lower


def _preprocess_mm_configs(self: Any, m: Any, n: Any, k: Any, configs: Any, *args: Any, **kwargs: Any) -> Any:
    """Inductor's `preprocess_mm_configs`; inside a lowering the seam switched on (`_lowering`),
    for the plain mm and addmm heuristics, with `inductor_gemm.pick`'s configs in place of
    Inductor's list. Any other template's list inside such a lowering (a persistent-TMA one the
    user turned on) is emptied: the switch was abductune's, not the user's. Where the pick
    fails, Inductor's own list (logged: a pick must never break a compile)."""
    original = _ORIGINAL.get("preprocess_mm_configs")
    if original is None:  # undone since this call was dispatched here: Inductor's own is back in place
        from torch._inductor.template_heuristics import triton as tt

        return tt.BaseConfigHeuristic.preprocess_mm_configs(self, m, n, k, configs, *args, **kwargs)
    scope = getattr(_SCOPE, "sizes", None)
    handle = active()
    if scope is None or handle is None or not configs:
        return original(self, m, n, k, configs, *args, **kwargs)
    op, sizes, dtype = scope
    entry = {"op": op, "M": sizes[0], "N": sizes[1], "K": sizes[2], "dtype": dtype, "inductor_configs": len(configs)}
    if type(self).__name__ not in GEMM_HEURISTICS or kwargs.get("op_name", "mm") not in GEMM_OPS:
        handle.gemm.append({**entry, "decision": "aten", "why": f"{type(self).__name__} is not abductune's to fill",
                            "picks": []})
        return iter(())
    forced = getattr(_SCOPE, "forced", None)
    if forced is not None:  # the stored verdict's pick, alone (recorded by `_lowering`)
        return original(self, m, n, k, [_as_inductor(configs[0], forced)], *args, **kwargs)
    t0 = time.perf_counter()
    try:
        picks = G.pick(*sizes, dtype, _hardware(), handle.settings.gemm)
        ours = [_as_inductor(configs[0], c) for c in picks]
    except Exception as e:  # noqa: BLE001 - abductune must never break a compile
        log.warning("abductune.inductor: Inductor's matmul-template list for %s %s (%s: %s)",
                    op, sizes, type(e).__name__, e)
        handle.gemm.append({**entry, "decision": "inductor", "why": f"the pick failed ({type(e).__name__}: {e})",
                            "picks": []})
        return original(self, m, n, k, configs, *args, **kwargs)
    handle.gemm.append({**entry, "decision": "template", "picks": picks,
                        "pick_s": round(time.perf_counter() - t0, 4)})
    log.info("abductune.inductor: %s %s: %d template configs in place of Inductor's %d", op, sizes, len(ours),
             len(configs))
    return original(self, m, n, k, ours, *args, **kwargs)


def _as_inductor(like: Any, c: dict[str, int]) -> Any:
    """Config `c` as Inductor's own config object (`like`, one of its list, gives the type and
    the fields abductune does not choose)."""
    return dataclasses.replace(like, block_m=c["BLOCK_M"], block_n=c["BLOCK_N"], block_k=c["BLOCK_K"],
                               num_stages=c["num_stages"], num_warps=c["num_warps"], group_m=c["GROUP_M"])


@contextlib.contextmanager
def lowering_scope(op: str, sizes: list[int], dtype: str, forced: dict[str, int] | None = None):
    """The state `_lowering` sets around a matmul it switched the template on for, which
    `_preprocess_mm_configs` reads (tests that call a heuristic directly set it too); `forced`:
    the one config a stored verdict names, in place of the picks."""
    _SCOPE.sizes, _SCOPE.forced = (op, sizes, dtype), forced
    try:
        yield
    finally:
        _SCOPE.sizes = _SCOPE.forced = None
