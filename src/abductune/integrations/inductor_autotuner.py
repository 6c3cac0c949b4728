"""The autotuner Inductor builds for each kernel abductune plans: store lookup first, abductune's finish."""
from __future__ import annotations

import logging
import os
import time
from typing import Any, Mapping

from ..store import Store
from . import inductor_kernels as K
from . import inductor_report as R
from .inductor_measure import config_like
from .inductor_state import _LOCK, _live, check_torch

log = logging.getLogger(__package__ + ".inductor")  # the public module's logger, as before the split


def _describe(heuristic: str, size_hints: Any, config: Any, tmeta: Mapping[str, Any], meta: Mapping[str, Any],
              src_hash: str) -> K.KernelDesc:
    from torch._inductor.runtime.hints import TRITON_MAX_BLOCK

    try:
        from torch._inductor.runtime.hints import TRITON_MAX_TENSOR_NUMEL as max_numel
    except ImportError:  # torch 2.11
        max_numel = K.MAX_TENSOR_NUMEL
    device = tmeta.get("device")
    props = device._asdict() if hasattr(device, "_asdict") else dict(device or {})
    return K.describe(heuristic, size_hints, config.kwargs, meta, props, src_hash=src_hash,
                      dtype=K.first_dtype(tmeta.get("signature") or {}), reduction_hint=str(meta.get("reduction_hint")),
                      device_name=_device_name(props), max_block=TRITON_MAX_BLOCK, max_numel=max_numel)


_NAMES: dict[str, str | None] = {}


def _device_name(props: Mapping[str, Any]) -> str | None:
    """The GPU's name from NVML (no CUDA context, so the same in a compile worker as here)."""
    if props.get("type") != "cuda":
        return None
    if "cuda" not in _NAMES:
        try:
            from ..measure.target import visible_gpu

            seen = visible_gpu()
            _NAMES["cuda"] = seen[0] if seen and "MIG" not in seen[0] else None
        except Exception:  # noqa: BLE001 - then the properties name it
            _NAMES["cuda"] = None
    return _NAMES["cuda"]


# ----------------------------------------------------------------------------- the autotuner

class _KernelState:
    """What a kernel's autotuner keeps of the plan (it pickles with it): Inductor's own list,
    how many of abductune's candidates went ahead of it, what planning cost, and the launch
    time its traffic gave (`inductor_kernels.traffic_us`; None without one)."""

    def __init__(self, settings: K.Settings, heuristic: str, inductor: tuple, user_coordesc: bool,
                 candidates: int = 0, plan_s: float = 0.0, estimate_us: float | None = None):
        self.settings, self.heuristic, self.inductor, self.user_coordesc = settings, heuristic, inductor, user_coordesc
        self.candidates, self.plan_s, self.estimate_us = candidates, plan_s, estimate_us


def _make_autotuner(state: _KernelState, fn: Any, *args: Any, **kw: Any) -> Any:
    sig = (kw.get("triton_meta") or {}).get("signature") or {}
    dynamic = state.settings.per_shape and bool(K.numel_args(sig, getattr(fn, "src", "") or ""))
    cls = __getattr__("AbductuneDynamicAutotuner" if dynamic else "AbductuneAutotuner")
    return cls(fn, *args, abductune_state=state, **kw)


_STORES: dict[str, Store] = {}


def _store_for(settings: K.Settings) -> tuple[Store | None, str]:
    """The store to look a kernel up in: the live handle's in its own process, else the file
    opened read-only (a compile worker)."""
    h = _live(settings.token)
    if h is not None:
        return h.store, h.toolchain
    from ..hardware import toolchain_key

    if settings.store == ":memory:" or not os.path.exists(settings.store):
        return None, ""
    with _LOCK:
        if settings.store not in _STORES:
            _STORES[settings.store] = Store(settings.store, read_only=True)
    return _STORES[settings.store], toolchain_key()


def _classes() -> dict[str, type]:
    """The autotuner subclasses, made on first use so that importing this module needs no
    torch; pickles find them as this module's attributes (`__getattr__`)."""
    if "AbductuneAutotuner" in _CLASSES:
        return _CLASSES
    check_torch()
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    class AbductuneAutotuner(CachingAutotuner):
        """Inductor's autotuner, with the store looked up first and abductune's finish."""

        def __init__(self, fn: Any, *args: Any, abductune_state: _KernelState, **kw: Any):
            state = self._abt = abductune_state
            tmeta = kw.get("triton_meta") or {}
            self._abt_hash = K.source_hash(getattr(fn, "src", "") or "", tmeta.get("signature"), tmeta.get("configs"))
            self._abt_numels = K.numel_args(tmeta.get("signature") or {}, getattr(fn, "src", "") or "")
            self._abt_hints: dict[str, int] | None = None  # the bucket being launched (dynamic shapes)
            self._abt_buckets: dict[tuple, Any] = {}
            self._abt_stored = False
            self._abt_lookup = "no store"  # what the lookup at load time found (for the parent's log)
            self._abt_report: dict[str, Any] | None = None  # this kernel's entry in the handle's report
            configs = kw.get("configs") or []
            # everything Inductor compiles and times for it (abductune's candidates, then its list)
            self._abt_listed = tuple((dict(c.kwargs), int(c.num_warps)) for c in configs)
            t0 = time.perf_counter()
            try:
                store, toolchain = _store_for(state.settings)
                if store is not None and configs:
                    first = configs[0]
                    desc = _describe(state.heuristic, kw.get("size_hints"), first, tmeta, kw.get("inductor_meta") or {},
                                     self._abt_hash)
                    won = K.stored_winner(store, desc, toolchain, state.settings.min_us)
                    self._abt_lookup = f"{'hit' if won else 'miss'} {_key(desc, toolchain)}"
                    if won is not None:
                        cfg = config_like(first, *desc.kwargs_of(won, first.kwargs))
                        cfg.found_by_coordesc = True  # tuned before: no search
                        kw["configs"] = [cfg]
                        self._abt_stored = True
            except Exception as e:  # noqa: BLE001 - a failed lookup leaves Inductor's list
                self._abt_lookup = f"error {type(e).__name__}: {e}"
                log.warning("abductune.inductor: store lookup failed (%s: %s)", type(e).__name__, e)
            self._abt_lookup_s = time.perf_counter() - t0
            super().__init__(fn, *args, **kw)

        def __getstate__(self) -> dict[str, Any]:
            state = super().__getstate__()
            state["_abt_buckets"] = {}  # launchers do not pickle; the store keeps the configs
            state["_abt_report"] = None  # the parent's report stays in the parent
            return state

        def precompile(self, *args: Any, **kwargs: Any) -> Any:
            out = super().precompile(*args, **kwargs)
            if not (kwargs.get("warm_cache_only") or (args and args[0])):  # here, not in a worker
                try:
                    self._abt_loaded()
                except Exception as e:  # noqa: BLE001 - a report must never break a compile
                    log.debug("abductune.inductor: no report entry (%s: %s)", type(e).__name__, e)
            return out

        def _abt_loaded(self) -> None:
            """The kernel's entry in its live handle's report, made once (inductor_report.loaded)."""
            handle = _live(self._abt.settings.token)
            if handle is None or getattr(self, "_abt_report", None) is not None:
                return
            listed = 1 if self._abt_stored else len(getattr(self, "_abt_listed", ()))
            self._abt_report = R.loaded(str(self.inductor_meta.get("kernel_name")), self._abt.heuristic,
                                        self.size_hints, listed, getattr(self._abt, "candidates", 0),
                                        getattr(self._abt, "plan_s", 0.0), getattr(self, "_abt_lookup_s", 0.0),
                                        self._abt_stored, getattr(self._abt, "estimate_us", None))
            handle.report.append(self._abt_report)

        def coordinate_descent_tuning(self, launcher: Any, *args: Any, **kwargs: Any) -> Any:
            if self._abt_stored:  # its only config is the store's winner (a config's own mark,
                # found_by_coordesc, can be lost on the way from the compile worker)
                launcher.config.found_by_coordesc = True
                return launcher
            handle = _live(self._abt.settings.token)
            if handle is None:  # compiled under an enable() that has ended: Inductor's behaviour
                return super().coordinate_descent_tuning(launcher, *args, **kwargs) if self._abt.user_coordesc \
                    else launcher
            try:
                return handle.finish(self, launcher, args, kwargs)
            except Exception as e:  # noqa: BLE001 - never break the model: keep Inductor's winner
                log.warning("abductune.inductor: tuning %s failed (%s: %s); Inductor's config is kept",
                            self.inductor_meta.get("kernel_name"), type(e).__name__, e)
                handle.stats["failed"] += 1
                return launcher

    class AbductuneDynamicAutotuner(AbductuneAutotuner):
        """For a kernel compiled for dynamic shapes: a config per size-hint bucket. Inductor
        tunes such a kernel once, on its first launch, and keeps that config for every size."""

        def run(self, *args: Any, stream: Any, benchmark_run: bool = False, **kwargs: Any) -> Any:
            if not benchmark_run:
                hints = dict(self.size_hints or {})
                for pos, prefix in self._abt_numels:
                    if pos < len(args) and isinstance(args[pos], int):
                        hints[prefix] = K.next_pow2(args[pos])
                if hints != self._abt_hints:
                    self._abt_switch(hints, args, kwargs)
            return super().run(*args, stream=stream, benchmark_run=benchmark_run, **kwargs)

        def _abt_switch(self, hints: dict[str, int], args: tuple, kwargs: dict) -> None:
            old, self._abt_hints = self._abt_hints, hints
            if old is None or len(self.launchers) != 1:
                return  # the first launch: Inductor tunes it, and our finish keys it by `hints`
            self._abt_buckets[tuple(sorted(old.items()))] = self.launchers[0]
            key = tuple(sorted(hints.items()))
            launcher = self._abt_buckets.get(key)
            if launcher is None:
                launcher = self.launchers[0]
                handle = _live(self._abt.settings.token)
                if handle is not None:
                    try:
                        launcher = handle.finish(self, launcher, args, kwargs, first=False)
                    except Exception as e:  # noqa: BLE001 - as in coordinate_descent_tuning
                        log.warning("abductune.inductor: tuning %s for %s failed (%s: %s)",
                                    self.inductor_meta.get("kernel_name"), hints, type(e).__name__, e)
                self._abt_buckets[key] = launcher
            self.launchers = [launcher]
            if hasattr(self, "_cached_launcher"):  # torch 2.13's fast path holds the old one
                self._cached_launcher = None

    for cls in (AbductuneAutotuner, AbductuneDynamicAutotuner):
        cls.__module__, cls.__qualname__ = __name__, cls.__name__
    _CLASSES.update(AbductuneAutotuner=AbductuneAutotuner, AbductuneDynamicAutotuner=AbductuneDynamicAutotuner)
    return _CLASSES


_CLASSES: dict[str, type] = {}


def __getattr__(name: str) -> Any:
    if name in ("AbductuneAutotuner", "AbductuneDynamicAutotuner"):
        return _classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _key(desc: K.KernelDesc, toolchain: str) -> str:
    """The store key of a kernel, short, for logs."""
    p = desc.problem
    return (f"{p.kernel} {p.kernel_class} {p.dims} {p.hardware.name if p.hardware else '-'} "
            f"space {desc.space.fingerprint()} {toolchain}")
