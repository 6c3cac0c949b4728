"""abductune inside `torch.compile`: it tunes the Triton kernels TorchInductor generates.

    import abductune
    with abductune.inductor.enable(store="tune.sqlite"):
        model = torch.compile(model)
        model(x)                      # compiles, tunes, and stores what it learned

Off by default, reversible (`handle.undo()`, or leaving the `with`), scoped (only kernels
compiled while it is on are touched). `ABDUCTUNE_INDUCTOR=1` turns it on for a script that
cannot be edited: the variable is read when this module is imported, so run the script as
`python -m abductune.integrations.inductor train.py ARGS` (or import this module from a
sitecustomize). docs/INDUCTOR.md has the details and the versions.

The seam, the same in torch 2.11 and 2.13 (`check_torch` refuses other versions in one line):

1. `async_compile._load_triton_kernel_from_source`, the function Inductor pickles into its
   compile workers to load a generated kernel module, is replaced in this process by a
   `_Loader` that carries the settings. Inductor sends the loader to its workers itself, so the
   next step happens wherever the kernel is loaded: in a worker, or in this process.
2. While the loader runs, `triton_heuristics.cached_autotune` (which `pointwise`, `reduction`,
   `persistent_reduction` and `cooperative_reduction` all call with their config list) is
   wrapped: abductune's candidates for the kernel go ahead of Inductor's list (where its bytes
   at the GPU's bandwidth reach `min_us`: `inductor_kernels.worth_candidates`), the kernel's
   autotuner becomes an `AbductuneAutotuner` (through `cached_autotune`'s own
   `caching_autotuner_cls` argument), and the kernel asks for a finish (the metadata flag
   Inductor's coordinate descent reads). The wrap is undone when the load ends.
3. `AbductuneAutotuner.__init__` looks the kernel up in the store first: a kernel tuned before
   gets its winner as its only config, so nothing is searched or compiled twice.
   `AbductuneAutotuner.coordinate_descent_tuning`, where Inductor would run coordinate
   descent, runs abductune's Session from Inductor's winner instead, with the store, if the
   kernel is worth it: a pick Inductor timed under `min_us` is kept, and stored as kept.
   Under dynamic shapes (`AbductuneDynamicAutotuner`), a launch whose sizes fall in another
   size-hint bucket gets that bucket's config (from the store, else tuned once).

torch 2.13's `CachingAutotunerPlugin` (pre_compile / pre_dispatch / pre_autotune) is not the
seam: torch 2.11 lacks it, torch 2.13 builds its plugin list from a private function with no
registration, `pre_autotune` fires only with more than one launcher (so never after a store
hit), and it cannot change the config list before the worker compiles it.

The parts: this module (enable and its handle, the seam, the finish, `ABDUCTUNE_INDUCTOR` and
the `python -m` runner); `inductor_state` (the version check, the live enables);
`inductor_report` (what each kernel cost, and why);
`inductor_autotuner` (the autotuner subclasses and the store lookup); `inductor_kernels` (the
store key, the space, the candidates; no torch); `inductor_measure` (the finish's evaluator);
`inductor_templates` (the matmul seam: Inductor's Triton mm template for memory-bound matmuls,
`enable(gemm=N)`) and `inductor_gemm` (its picks; no torch).
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import sys
import threading
import time
import uuid
from collections import Counter
from typing import Any, Mapping

from ..errors import AbductuneError
from ..measure.ptxas_watch import watching
from ..search import Budget, make_strategy
from ..search.base import Seed
from ..session import NEAREST_SEEDS, Session
from ..store import Store
from . import inductor_gemm as G
from . import inductor_kernels as K
from . import inductor_templates as T
from . import inductor_report as R
# the modules this one is split into; their names used by callers and tests are this module's too
from .inductor_autotuner import _STORES, _KernelState, _classes, _describe, _key, _make_autotuner  # noqa: F401
from .inductor_measure import AheadLaunchEvaluator, LaunchEvaluator, config_like
from .inductor_state import (SUPPORTED, InductorVersionError, _live, _LOCK, _ORIGINAL, _STACK,  # noqa: F401
                             active, check_torch, torch_version)

log = logging.getLogger(__name__)

ENV_VAR = "ABDUCTUNE_INDUCTOR"
DEFAULT_BUDGET = 8  # evaluations per kernel and shape (Inductor's coordinate descent takes 10 to 40)


# ----------------------------------------------------------------------------- enable / undo

_ACTIVE = threading.local()  # the settings of the kernel load under way in this thread
_DEPTH = 0  # loads under way in this process (the cached_autotune wrap is in place while > 0)


class Handle:
    """One `enable()`: `undo()` (or leaving its `with`) puts Inductor back as it was. Its
    `stats` count what the finishes in this process did."""

    def __init__(self, settings: K.Settings, store: Store, own_store: bool):
        self.settings = settings
        self.store = store
        self._own_store = own_store
        from ..hardware import toolchain_key

        self.toolchain = toolchain_key()
        self.stats: Counter = Counter()
        self.report: list[dict[str, Any]] = []  # per kernel: what it cost and why (inductor_report)
        self.gemm: list[dict[str, Any]] = []  # per matmul lowered: the template configs picked (inductor_gemm)
        self.closed = False

    def undo(self) -> None:
        with _LOCK:
            if self.closed:
                return
            self.closed = True
            if self in _STACK:
                _STACK.remove(self)
            _install_loader()
            T.install()
        if self._own_store:
            self.store.close()

    close = undo

    def __enter__(self) -> "Handle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.undo()

    def finish(self, tuner: Any, launcher: Any, args: tuple, kwargs: dict, first: bool = True) -> Any:
        """The finish (`_finish`) of one of this enable's kernels, which its autotuner asks for."""
        return _finish(tuner, self, launcher, args, kwargs, first)

    def summary(self) -> dict[str, Any]:
        """The report's totals: kernels per decision, seconds per phase (inductor_report), and the
        matmuls lowered with the template seam per decision (`gemm`: template, aten, inductor,
        store_aten, store_template), and what Inductor's timing of the templated ones chose
        (`matmuls_won`: template or aten)."""
        out = R.summarize(self.report, self.settings.min_us)
        out["matmuls"] = dict(Counter(str(e.get("decision")) for e in self.gemm))
        out["matmuls_won"] = dict(Counter(str(e["won"]) for e in self.gemm if e.get("won")))
        out["matmul_pick_s"] = round(sum(float(e.get("pick_s") or 0.0) for e in self.gemm), 4)
        return out

    def __repr__(self) -> str:
        return (f"<abductune.inductor handle {'off' if self.closed else 'on'}: store {self.store.path}, "
                f"{self.settings.strategy}, {dict(self.stats)}>")


def enable(store: Store | str | os.PathLike[str] | None = None, strategy: str = "abduction",
           budget: Budget | int | None = DEFAULT_BUDGET, *, seed: int = 0, candidates: int = 2,
           per_shape: bool = True, compile_ahead: bool = False, min_us: float | None = K.DEFAULT_MIN_US,
           options: Mapping[str, Any] | None = None, gemm: int = G.DEFAULT_LIMIT) -> Handle:
    """Turn abductune on for the Triton kernels Inductor generates from now on, in this
    process (module docstring). `store`: a Store or a path (None: the default store,
    `$ABDUCTUNE_STORE`); a file lets every process share what was tuned. `budget`:
    evaluations (an int) or a `Budget` per kernel and shape. `candidates`: how many of
    abductune's configs go ahead of Inductor's list, for a kernel whose bytes at the GPU's
    bandwidth take `min_us` or more (`inductor_kernels.worth_candidates`). `per_shape`: under dynamic shapes, a
    config per size-hint bucket. `compile_ahead`: compile the finish's configs in Inductor's
    compile workers, ahead of the search (experimental: no gain measured yet, see
    docs/INDUCTOR.md). `min_us`: search only kernels whose pick Inductor timed at this many
    microseconds or more (K.DEFAULT_MIN_US says why 100); a faster kernel keeps Inductor's pick
    among its list and the candidates, stored as it is (0 or None: search every kernel).
    `options`: the strategy's (abduction: stop_early=True). `gemm`: how many Triton matmul-template
    configs each 16-bit mm and addmm gets, chosen by the ranker with no measurement
    (`inductor_gemm`), where the matmul is memory-bound on this GPU; Inductor times them beside
    ATen (cuBLAS) and keeps the fastest (`inductor_templates`: the seam), and the store keeps
    what won, so a later process lowers that matmul with the winner alone, timing nothing. 0
    leaves matmuls to Inductor's own settings."""
    check_torch()
    b = budget if isinstance(budget, Budget) else Budget(DEFAULT_BUDGET if budget is None else budget)
    opts = dict(options if options is not None else ({"stop_early": True} if strategy == "abduction" else {}))
    make_strategy(strategy, seed=seed, **opts)  # a bad name or option fails here, not mid-compile
    if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 0:
        raise AbductuneError(f"candidates must be an integer >= 0, got {candidates!r}")
    if min_us is not None and (isinstance(min_us, bool) or not isinstance(min_us, (int, float))
                               or not min_us >= 0 or min_us == float("inf")):
        raise AbductuneError(f"min_us must be a number of microseconds >= 0 (or None), got {min_us!r}")
    if isinstance(gemm, bool) or not isinstance(gemm, int) or gemm < 0:
        raise AbductuneError(f"gemm must be an integer >= 0 (configs per matmul; 0: Inductor's choice), got {gemm!r}")
    if gemm:
        T.seam()  # an Inductor without the seam fails here, in one line, not mid-compile
    own = not isinstance(store, Store)
    st = store if isinstance(store, Store) else Store(store)
    settings = K.Settings(st.path, strategy, b.evaluations, b.seconds, seed=seed, candidates=candidates,
                          per_shape=bool(per_shape), compile_ahead=bool(compile_ahead), min_us=float(min_us or 0.0),
                          token=uuid.uuid4().hex, options=K.as_options(opts), gemm=gemm)
    handle = Handle(settings, st, own)
    with _LOCK:
        _STACK.append(handle)
        _install_loader()
        T.install()
    log.info("abductune.inductor on: store %s, %s, %s, search from %s us", st.path, strategy, b, settings.min_us)
    return handle


# ----------------------------------------------------------------------------- the seam

def _install_loader() -> None:
    """Point Inductor's loader at the innermost enable's, or back at Inductor's own."""
    from torch._inductor import async_compile

    current = async_compile._load_triton_kernel_from_source
    if "loader" not in _ORIGINAL:
        if not _STACK:
            return
        _ORIGINAL["loader"] = current
    elif not isinstance(current, _Loader):
        log.warning("abductune.inductor: Inductor's kernel loader was replaced by someone else (%r); "
                    "abductune leaves it as it is", current)
        if not _STACK:
            _ORIGINAL.pop("loader")
        return
    if _STACK:
        async_compile._load_triton_kernel_from_source = _Loader(_STACK[-1].settings, _ORIGINAL["loader"])
    else:
        async_compile._load_triton_kernel_from_source = _ORIGINAL.pop("loader")


class _Loader:
    """Loads a generated kernel module as Inductor does, with `cached_autotune` wrapped for the
    duration. It pickles (settings and Inductor's own loader, by reference), so Inductor sends
    it to its compile workers with each kernel."""

    def __init__(self, settings: K.Settings, original: Any):
        self.settings = settings
        self.original = original

    def __call__(self, kernel_name: str, source_code: str) -> Any:
        with _wrapped(self.settings):
            return self.original(kernel_name, source_code)


@contextlib.contextmanager
def _wrapped(settings: K.Settings):
    """`triton_heuristics.cached_autotune` wrapped while kernels load, put back after the last
    (identity restored, exceptions included); the settings are per thread."""
    global _DEPTH
    from torch._inductor.runtime import triton_heuristics as th

    with _LOCK:
        if _DEPTH == 0:
            _ORIGINAL["cached_autotune"] = th.cached_autotune
            th.cached_autotune = _cached_autotune
        _DEPTH += 1
    before = getattr(_ACTIVE, "settings", None)
    _ACTIVE.settings = settings
    try:
        yield
    finally:
        _ACTIVE.settings = before
        with _LOCK:
            _DEPTH -= 1
            if _DEPTH == 0:
                th.cached_autotune = _ORIGINAL.pop("cached_autotune")


# ----------------------------------------------------------------------------- candidates

@functools.lru_cache(maxsize=4)
def _signature(fn: Any) -> inspect.Signature:
    return inspect.signature(fn)


def _cached_autotune(*args: Any, **kwargs: Any) -> Any:
    """Inductor's `cached_autotune`, with abductune's plan for the kernels it tunes."""
    original = _ORIGINAL["cached_autotune"]
    settings = getattr(_ACTIVE, "settings", None)
    if settings is None:
        return original(*args, **kwargs)
    meta = kwargs.get("inductor_meta")
    flag = meta.get("coordinate_descent_tuning") if isinstance(meta, dict) else None
    try:
        arguments = dict(_signature(original).bind(*args, **kwargs).arguments)
        planned = _plan(arguments, settings)
        if planned is not None:
            return original(**planned)
    except Exception as e:  # noqa: BLE001 - abductune must never break a compile
        log.warning("abductune.inductor: kept Inductor's configs (%s: %s)", type(e).__name__, e)
        if isinstance(meta, dict):  # as Inductor wrote it
            meta["coordinate_descent_tuning"] = flag
            if flag is None:
                del meta["coordinate_descent_tuning"]
    return original(*args, **kwargs)


def _plan(a: dict[str, Any], settings: K.Settings) -> dict[str, Any] | None:
    """The arguments with abductune's candidates ahead of Inductor's list, its autotuner
    class and the finish requested; None for kernels abductune leaves alone (templates, user
    kernels, split scans, native matmuls, anything under deterministic algorithms, whose
    configs must not move)."""
    heuristic = getattr(a.get("heuristic_type"), "name", str(a.get("heuristic_type"))).lower()
    meta = a.get("inductor_meta")
    tmeta = a.get("triton_meta") or {}
    configs = list(a.get("configs") or ())
    if heuristic not in K.TUNED or not configs or meta is None or a.get("custom_kernel"):
        return None
    if any(meta.get(k) for k in ("profile_bandwidth", "deterministic", "are_deterministic_algorithms_enabled",
                                 "batch_invariant")) or tmeta.get("native_matmul"):
        return None
    t0 = time.perf_counter()
    first = configs[0]
    desc = _describe(heuristic, a.get("size_hints"), first, tmeta, meta, "0" * 16)
    ours = []
    base = desc.config_of(first.kwargs, first.num_warps)
    estimate = K.traffic_us(a.get("size_hints"), tmeta.get("signature") or {}, meta, desc.problem.hardware)
    limit = settings.candidates if K.worth_candidates(estimate, settings.min_us) else 0
    for cfg, source in K.candidates(desc, base, limit):
        ours.append(config_like(first, *desc.kwargs_of(cfg, first.kwargs)))
        log.debug("abductune.inductor: %s candidate %s (%s)", meta.get("kernel_name"), cfg, source)
    state = _KernelState(settings, heuristic, tuple((dict(c.kwargs), int(c.num_warps)) for c in configs),
                         bool(meta.get("coordinate_descent_tuning")), len(ours), time.perf_counter() - t0,
                         estimate)
    meta["coordinate_descent_tuning"] = True  # where Inductor would run coordinate descent, we finish
    return {**a, "configs": ours + configs, "caching_autotuner_cls": functools.partial(_make_autotuner, state)}


# ----------------------------------------------------------------------------- the autotuner

def __getattr__(name: str) -> Any:
    """The autotuner subclasses (`inductor_autotuner`), made on first use."""
    if name in ("AbductuneAutotuner", "AbductuneDynamicAutotuner"):
        return _classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ----------------------------------------------------------------------------- the finish

def _finish(tuner: Any, handle: Handle, launcher: Any, args: tuple, kwargs: dict, first: bool = True) -> Any:
    """Where Inductor would run coordinate descent: the store's winner if this kernel (and
    size-hint bucket) was tuned before; else, if Inductor's pick runs under `min_us`, that pick,
    kept and stored (`_keep`); else a Session from Inductor's pick, seeded with abductune's
    candidates, Inductor's list as the baseline, the store keeping everything. `first`: the
    shape Inductor tuned (its timings answer for free); False for another size bucket of a
    dynamic kernel, which starts from the current bucket's winner. Every finish fills its
    kernel's entry in `handle.report` (inductor_report)."""
    entry = getattr(tuner, "_abt_report", None) if first else None
    if entry is None:  # a kernel this process did not see loading (a test), or another bucket
        entry = R.loaded(str(tuner.inductor_meta.get("kernel_name")), tuner._abt.heuristic, tuner.size_hints,
                         len(getattr(tuner, "_abt_listed", ())), getattr(tuner._abt, "candidates", 0),
                         getattr(tuner._abt, "plan_s", 0.0) if first else 0.0,
                         getattr(tuner, "_abt_lookup_s", 0.0) if first else 0.0, False,
                         getattr(tuner._abt, "estimate_us", None))
        handle.report.append(entry)
        if first:
            tuner._abt_report = entry
    entry["decision"] = "failed"  # until the finish says otherwise
    if first:  # Inductor's own compile and timing of its list on this launch
        entry["inductor_autotune_s"] = getattr(tuner, "autotune_time_taken_ns", 0) / 1e9
    t0 = time.perf_counter()
    try:
        return _finish_kernel(tuner, handle, launcher, args, kwargs, first, entry)
    finally:
        entry["finish_s"] = time.perf_counter() - t0


def _finish_kernel(tuner: Any, handle: Handle, launcher: Any, args: tuple, kwargs: dict, first: bool,
                   entry: dict[str, Any]) -> Any:
    if getattr(tuner.fn, "fn", True) is None:  # compiled in a worker: load the function here
        tuner.fn = tuner._reload_kernel().fn
    settings = handle.settings
    hints = tuner._abt_hints or tuner.size_hints
    desc = _describe(tuner._abt.heuristic, hints, launcher.config, _triton_meta(tuner), tuner.inductor_meta,
                     tuner._abt_hash)
    entry.update(kernel=desc.problem.kernel, kernel_class=desc.problem.kernel_class, size_hints=dict(hints or {}))
    start = desc.config_of(launcher.config.kwargs, launcher.config.num_warps)
    if start is None:
        log.info("abductune.inductor: %s's config %s is outside its space; kept", desc.problem.kernel,
                 launcher.config.kwargs)
        entry["decision"] = "outside_space"
        return launcher
    t0 = time.perf_counter()
    won = K.stored_winner(handle.store, desc, handle.toolchain, settings.min_us)
    evaluator = AheadLaunchEvaluator if settings.compile_ahead and won is None else LaunchEvaluator
    alone = _alone_timer(tuner, args, kwargs) if won is None else None
    ev = evaluator(tuner, launcher, desc, args, kwargs, reuse=first, alone=alone)
    entry["timing"] = "alone" if alone is not None else "inductor's bench"
    if won is not None:
        handle.stats["store_hits"] += 1
        if first:  # the load-time lookup should have answered: say what it saw
            log.info("abductune.inductor: %s answered by the store at launch, not at load (load: %s; launch: %s)",
                     desc.problem.kernel, getattr(tuner, "_abt_lookup", "?"), _key(desc, handle.toolchain))
        best = won
        entry["decision"] = "store_at_launch"
    else:
        # Inductor's time of its pick: its own benchmark of its list (free), else one run
        pick = ev.evaluate([start])[0]
        ev.remember(pick)
        entry["inductor_us"] = pick.time_ms * 1e3 if pick.ok else None
        if not K.worth_searching(pick.time_ms if pick.ok else None, settings.min_us):
            _keep(ev, desc, tuner, handle, start, pick)
            entry.update(decision="kept", winner_us=entry["inductor_us"], answered=ev.answered,
                         bench_s=ev.bench_s)
            handle.stats["kept"] += 1
            launcher.config.found_by_coordesc = True
            return launcher
        if settings.compile_ahead:  # Inductor's compile workers, for the search's configs only
            ev.warm = _warmer(tuner)
        seeds = [Seed(start, "inductor")] + [Seed(c, s) for c, s in K.candidates(desc, start, settings.candidates)]
        inductor = [c for c in (desc.config_of(kw, w) for kw, w in tuner._abt.inductor) if c is not None]
        with watching(), Session(ev, strategy=settings.strategy, seed=settings.seed,  # a ptxas stuck for minutes is killed
                                 options=dict(settings.options), budget=Budget(settings.evaluations, settings.seconds),
                                 seeds=seeds, store=handle.store, toolchain=handle.toolchain,
                                 nearest=NEAREST_SEEDS) as session:  # this kernel's winners on other shapes first
            res = session.run(baselines={"inductor": inductor, "start": [start]})
        best = res.winner.config if res.winner is not None and res.winner.ok else start
        handle.stats["searches"] += 1
        handle.stats["evaluations"] += res.evaluations
        handle.stats["compiled"] += ev.compiled
        handle.stats["compiled_ahead"] += ev.warmed
        entry.update(decision="searched", evaluations=res.evaluations, compiled=ev.compiled, answered=ev.answered,
                     compiled_ahead=ev.warmed, compile_s=ev.compile_s, bench_s=ev.bench_s,
                     judge_s=res.timing.get("judge", 0.0), store_s=res.timing.get("store", 0.0),
                     winner_us=res.winner.time_ms * 1e3 if res.winner is not None and res.winner.ok else None,
                     new=best != start)
        log.info("abductune.inductor: %s %s: %s (%s) after %d evaluations", desc.problem.kernel, hints,
                 K.describe_config(best, desc.fields), "Inductor's" if best == start else "new", res.evaluations)
    winner = ev.launcher(best)
    winner.config.found_by_coordesc = True
    entry["compile_s"] = ev.compile_s  # the store's winner, or the search's, compiled here if new
    if tuner.save_cache_hook:  # Inductor's own autotune cache learns it too
        tuner.save_cache_hook(winner.config, int((time.perf_counter() - t0) * 1e9), found_by_coordesc=True)
    return winner


def _keep(ev: LaunchEvaluator, desc: K.KernelDesc, tuner: Any, handle: Handle, start: Any, pick: Any) -> None:
    """Store Inductor's pick of a kernel not worth a search, with Inductor's own timings of its
    list and the candidates (nothing compiled or run for them), as a finished run marked
    `K.KEPT`: the next process is answered by the store (one config, nothing timed), as long
    as it asks for no search of a kernel that fast."""
    listed = [c for c in (desc.config_of(kw, w) for kw, w in getattr(tuner, "_abt_listed", ())) if c is not None]
    rows = [pick] + ev.answers([c for c in listed if desc.space.key(c) != desc.space.key(start)])
    settings = handle.settings
    with Session(ev, strategy=settings.strategy, seed=settings.seed, options=dict(settings.options),
                 store=handle.store, toolchain=handle.toolchain) as session:
        with session.recording(K.KEPT):
            session.record(rows, kind="baseline")
    log.info("abductune.inductor: %s %s: Inductor's %s kept (%.1f us, under %s us; %d configs stored)",
             desc.problem.kernel, desc.size_hints, K.describe_config(start, desc.fields),
             (pick.time_ms or 0.0) * 1e3, handle.settings.min_us, len(rows))


# the share of the GPU's free memory a kernel's mutated arguments may take when cloned once to
# time it alone (`_alone_timer`); past it they are timed through Inductor's bench, which copies
# them to the CPU instead where a clone would raise its peak memory
ALONE_MEMORY_SHARE = 0.5
# Inductor's own limit on a config's spilled registers before its bench refuses it (CUDA's)
SPILL_THRESHOLD = 16


def _alone_timer(tuner: Any, args: tuple, kwargs: Mapping[str, Any]) -> Any:
    """A function that times a launcher of `tuner`'s kernel by itself, for
    `LaunchEvaluator(alone=)`, or None where it cannot (then Inductor's `bench` times it).

    Why: Inductor's `bench` clones every argument the kernel mutates inside each timed call
    (and where a clone would raise the peak memory, copies it back from pinned CPU memory
    there instead). On an H200 (session 34) the kernels the `min_us` gate searched read 109 to
    198 us a launch through it while the step's profile had them at 6 to 17 us: the copies
    and their launches, not the configs, set the times compared. Here the mutated arguments
    are cloned once, out of the timed call, and the launcher alone runs on the clones (a kernel
    writing in place then runs on its own output again: the values change, the work does not).
    Not where Inductor zeroes arguments before each run, nor where the clones would take more
    than ALONE_MEMORY_SHARE of the free GPU memory. A config past Inductor's spill limit goes to
    `bench`, which refuses it without timing, as it would."""
    if getattr(tuner, "reset_to_zero_arg_names", None):
        return None
    try:
        import torch
        from torch._inductor.runtime.benchmarking import benchmarker

        mutated = set(getattr(tuner, "mutated_arg_names", None) or ())
        named = list(zip(tuner.fn.arg_names, args)) + list(kwargs.items())
        need = sum(a.untyped_storage().nbytes() for n, a in named if n in mutated and isinstance(a, torch.Tensor))
        if need and need > ALONE_MEMORY_SHARE * torch.cuda.mem_get_info()[0]:
            return None
        cargs, ckwargs = tuner.maybe_clone_args(set(), *args, **kwargs)
        device = tuner.get_device_interface()
        stream = device.get_raw_stream(device.current_device())
    except Exception as e:  # noqa: BLE001 - no GPU, or an Inductor without these: its bench times
        log.debug("abductune.inductor: timing through Inductor's bench: %s: %s", type(e).__name__, e)
        return None
    threshold = (getattr(tuner, "inductor_meta", None) or {}).get("spill_threshold", SPILL_THRESHOLD)

    def alone(launcher: Any) -> float:
        if not getattr(tuner, "custom_kernel", False) and (getattr(launcher, "n_spills", 0) or 0) > threshold:
            return float(tuner.bench(launcher, *args, **kwargs))

        def call() -> None:
            launcher(*cargs, **ckwargs, stream=stream)
        try:  # what Inductor's bench passes (torch 2.13); an older benchmarker takes no such keywords
            return float(benchmarker.benchmark(fn=call, device="cuda", rep=40, is_vetted_benchmarking=True))
        except TypeError:
            return float(benchmarker.benchmark_gpu(call))
    return alone


def _warmer(tuner: Any) -> Any:
    """A function that compiles configs of this kernel in Inductor's compile workers, into
    Triton's cache (what those workers do for Inductor's own config lists), so the finish's
    compiles run in parallel and ahead of the search; None where Inductor compiles in this
    process (compile_threads=1) or the kernel's module file is gone."""
    try:
        from torch._inductor import config as ic
        from torch._inductor.async_compile import AsyncCompile

        name = tuner.inductor_meta.get("kernel_name")
        if not (name and tuner.filename and os.path.exists(tuner.filename) and AsyncCompile.use_process_pool()):
            return None
        pool = AsyncCompile.process_pool()
    except Exception:  # noqa: BLE001 - then the finish compiles here
        return None
    env = {v: os.environ[v] for v in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TRITON_LIBDEVICE_PATH")
           if v in os.environ}
    extra = {k: getattr(ic, k) for k in ("use_static_triton_launcher",) if hasattr(ic, k)}
    path = tuner.filename

    def warm(configs: list[Any]) -> list[Any]:
        return [pool.submit(_compile_in_worker, name, path, (dict(c.kwargs), int(c.num_warps), int(c.num_stages)),
                            env, extra) for c in configs]
    return warm


def _compile_in_worker(kernel_name: str, path: str, config: tuple, extra_env: dict, extra_config: dict) -> None:
    """In one of Inductor's compile workers: compile one config of a kernel into Triton's cache,
    as `compile_tasks._worker_compile_triton` does for Inductor's list (a fresh module: the one
    Inductor's cache holds has given its function away when it was pickled to the parent)."""
    from torch._inductor import config as ic
    from torch._inductor.runtime import compile_tasks
    from torch._inductor.runtime.triton_heuristics import Config

    getattr(compile_tasks, "_set_triton_ptxas_path", lambda: None)()
    os.environ.update(extra_env)
    with ic.patch(extra_config):
        kernel = getattr(compile_tasks._reload_python_module(f"abductune_{uuid.uuid4().hex}", path,
                                                            set_sys_modules=False), kernel_name)
        kw, warps, stages = config
        kernel.compile_results, kernel.launchers = [], []
        kernel.configs = [Config(kw, num_warps=warps, num_stages=stages)]
        kernel.precompile(warm_cache_only=True)


def _triton_meta(tuner: Any) -> dict[str, Any]:
    """The autotuner's triton_meta with the device properties (Inductor keeps only the index)."""
    return {**tuner.triton_meta, "device": tuner.device_props}


# ----------------------------------------------------------------------------- ABDUCTUNE_INDUCTOR

def from_env(environ: Mapping[str, str] | None = None) -> Handle | None:
    """`enable()` when ABDUCTUNE_INDUCTOR is 1 (budget from ABDUCTUNE_INDUCTOR_BUDGET, strategy from
    ABDUCTUNE_INDUCTOR_STRATEGY, min_us from ABDUCTUNE_INDUCTOR_MIN_US, gemm from
    ABDUCTUNE_INDUCTOR_GEMM, the store from ABDUCTUNE_STORE); None when it is unset or 0."""
    env = os.environ if environ is None else environ
    value = env.get(ENV_VAR, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return None
    if value not in ("1", "true", "yes", "on"):
        raise AbductuneError(f"{ENV_VAR}={value!r}: use 1 to tune torch.compile's kernels with abductune, 0 not to")
    budget = env.get("ABDUCTUNE_INDUCTOR_BUDGET", "").strip()
    if budget and not budget.isdigit():
        raise AbductuneError(f"ABDUCTUNE_INDUCTOR_BUDGET={budget!r}: give a number of evaluations per kernel")
    min_us = env.get("ABDUCTUNE_INDUCTOR_MIN_US", "").strip()
    try:
        floor = float(min_us) if min_us else K.DEFAULT_MIN_US
    except ValueError:
        floor = -1.0
    if not 0 <= floor < float("inf"):
        raise AbductuneError(f"ABDUCTUNE_INDUCTOR_MIN_US={min_us!r}: give the microseconds a kernel must run to be "
                             "searched (0: every kernel)")
    gemm = env.get("ABDUCTUNE_INDUCTOR_GEMM", "").strip()
    if gemm and not gemm.isdigit():
        raise AbductuneError(f"ABDUCTUNE_INDUCTOR_GEMM={gemm!r}: give the Triton matmul-template configs per matmul "
                             "(0: leave matmuls to Inductor)")
    return enable(strategy=env.get("ABDUCTUNE_INDUCTOR_STRATEGY", "abduction") or "abduction",
                  budget=int(budget) if budget else DEFAULT_BUDGET, min_us=floor,
                  gemm=int(gemm) if gemm else G.DEFAULT_LIMIT)


def _in_compile_worker() -> bool:
    """Inductor's compile workers import this module to unpickle the loader; they never enable."""
    return "compile_worker" in (sys.argv[0] if sys.argv else "")


def main(argv: list[str] | None = None) -> int:
    """`python -m abductune.integrations.inductor SCRIPT [ARGS]` (or `-m MODULE [ARGS]`): run a
    script that cannot be edited with abductune on (unless ABDUCTUNE_INDUCTOR=0)."""
    import runpy

    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        print("usage: python -m abductune.integrations.inductor SCRIPT [ARGS] | -m MODULE [ARGS]")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    os.environ.setdefault(ENV_VAR, "1")
    # the importable module reads the variable (its classes must pickle under that name, not __main__)
    from abductune.integrations import inductor as module

    if module.active() is None:  # imported before the variable was set
        module._ENV_HANDLE = module.from_env()

    if argv[0] == "-m":
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        runpy.run_path(argv[0], run_name="__main__")
    return 0


_ENV_HANDLE = None if __name__ == "__main__" or _in_compile_worker() else from_env()

if __name__ == "__main__":
    sys.exit(main())
