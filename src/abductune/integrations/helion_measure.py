"""How abductune's search inside Helion measures: Helion's benchmarking and run-offs, and where the time goes.

Helion is imported only inside `start_worker`; everything else is handed Helion's objects.

Every time is Helion's: `make_unbenchmarked` / `benchmark_population` for a batch (codegen in
this process, Triton compiles in parallel forked children, each config timed and checked for
accuracy in Helion's long-lived benchmark worker) and `rebenchmark` for a run-off. Three
choices here are abductune's, each for the same reason (time to a ready kernel):

- run-offs are Helion's *interleaved in-process* rebenchmark with a short target, the mode its
  own final verification uses on Triton, not the isolated per-candidate default of
  `rebenchmark` (one worker job per contender plus a confirmation pass, seconds each);
- Helion's benchmark worker is a spawned interpreter that imports torch and Helion before its
  first job (14-15 s on the H100; Helion's own searches pay it on each search's first batch):
  one is kept across abductune's searches in a process (`helion_worker`: `start_worker` takes
  it and gives it this search's compile-cache directory, `return_worker` keeps it after the
  search), and where none is kept `start_worker`
  spawns it before Helion computes its accuracy baseline, so that start-up overlaps the
  baseline and the first batch's compiles instead of following them;
- `Timing` records where the wall time goes (Helion's codegen and parallel compiles, its
  worker's timing and accuracy jobs, run-offs, the rest is abductune's), per phase and in
  total, for the search's report.
"""
from __future__ import annotations

import contextlib
import inspect
import math
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..measure.base import Evaluator
from ..measurement import Measurement
from .helion_space import HelionMap
from .helion_worker import KEEPER, spawn_worker, usable

RUNOFF_TARGET_MS = 100.0  # per contender, the run-off that closes each phase
# Helion's switch for timing each config as a replayed CUDA graph (its `do_bench` in the
# benchmark worker, its interleaved run-offs in this process; off by default in Helion)
GRAPH_TIMING_ENV = "HELION_BENCHMARK_CUDAGRAPH"
_STATUS = {"timeout": "timeout", "accuracy_error": "wrong_result", "filtered": "pruned",
           "source_rejected": "pruned"}


# ----------------------------------------------------------------------------- where the time goes

@dataclass
class Timing:
    """Wall seconds by where they went. `compile_s`: Helion's codegen and parallel Triton
    compiles of each batch (a batch's time less its benchmarking), `codegen_s` of it Helion
    generating each config's Triton code in this process, one config after another (the rest,
    `precompile_s` in `to_dict`, is waiting for the parallel compiles); `bench_s`: Helion timing
    and accuracy-checking each new config, `first_bench_s` of it the first config's (which
    waits for the benchmark worker to finish starting), `bench_job_s` and `accuracy_s` of it
    the worker's timing and accuracy jobs (round trips included; the rest, `bench_other_s`,
    is this process's side); `bench_each`: each config's bench seconds in order (`bench_max_s`
    in `to_dict`: the slowest; a config the worker had to compile itself stands out);
    `runoff_s`: interleaved re-timing; `timed`: configs Helion compiled and timed, `free`:
    configs answered without a compile (normalised to one measured, or source-identical to one
    measured); `batches`: calls of `benchmark_population` (each one round of parallel
    compiles)."""

    compile_s: float = 0.0
    codegen_s: float = 0.0
    bench_s: float = 0.0
    first_bench_s: float = 0.0
    bench_job_s: float = 0.0
    accuracy_s: float = 0.0
    runoff_s: float = 0.0
    timed: int = 0
    free: int = 0
    batches: int = 0
    bench_each: list[float] = field(default_factory=list)

    def snapshot(self) -> "Timing":
        return Timing(**asdict(self))

    def since(self, before: "Timing") -> dict[str, Any]:
        """What was spent after `before` (a snapshot), with the derived splits of `to_dict`."""
        now, then = asdict(self), asdict(before)
        out = {k: (v - then[k]) for k, v in now.items() if k != "bench_each"}
        return _derived({**out, "bench_each": self.bench_each[len(before.bench_each):]})

    def to_dict(self) -> dict[str, Any]:
        return _derived(asdict(self))


def _derived(t: dict[str, Any]) -> dict[str, Any]:
    """Rounded, with `precompile_s` (compile less codegen), `bench_other_s` (bench less the
    worker's jobs) and `bench_max_s` added."""
    each = [round(x, 4) for x in t.pop("bench_each")]
    t = dict(t, precompile_s=max(0.0, t["compile_s"] - t["codegen_s"]),
             bench_other_s=max(0.0, t["bench_s"] - t["bench_job_s"] - t["accuracy_s"]),
             bench_max_s=max(each, default=0.0))
    return {**{k: (round(v, 4) if isinstance(v, float) else v) for k, v in t.items()}, "bench_each": each}


@dataclass
class Shared:
    """What every phase's evaluator shares: Helion config -> its member, the clock, the timing."""

    members: dict[Any, Any] = field(default_factory=dict)
    clock: float = 0.0
    timing: Timing = field(default_factory=Timing)


def _wrap(owner: Any, name: str, count: Callable[[float], None], counts: Callable[[], bool] = lambda: True,
          inside: list[int] | None = None) -> tuple[Any, str, Any] | None:
    """Put a wrapper of `owner.name` on the instance (the class's method untouched) that
    passes each call's seconds to `count` where `counts()` says so at the call, and keeps
    `inside[0]` the number of its calls under way. Returns what `_unwrap` restores; None where
    `owner` has no such callable."""
    inner = getattr(owner, name, None)
    if inner is None or not callable(inner):
        return None

    def counted(*args: Any, **kwargs: Any) -> Any:
        if not counts():
            return inner(*args, **kwargs)
        if inside is not None:
            inside[0] += 1
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            if inside is not None:
                inside[0] -= 1
            count(time.perf_counter() - t0)

    own = vars(owner).get(name) if hasattr(owner, "__dict__") else None
    setattr(owner, name, counted)
    return owner, name, own


def _unwrap(saved: tuple[Any, str, Any] | None) -> None:
    if saved is None:
        return
    owner, name, own = saved
    if own is not None:
        setattr(owner, name, own)
    else:
        with contextlib.suppress(AttributeError):
            delattr(owner, name)


@contextlib.contextmanager
def timed_benchmarks(provider: Any, timing: Timing) -> Iterator[None]:
    """While the block runs, count the seconds Helion's provider spends timing single configs
    (its `_benchmark_function`) into `timing.bench_s` (and `first_bench_s`, `bench_each`),
    its worker's timing and accuracy jobs into `bench_job_s` and `accuracy_s`, and its kernel's
    codegen (`compile_config`, outside a config's timing) into `codegen_s`. Where the provider
    lacks one of these, that figure stays 0."""
    if provider is None:
        yield
        return
    benching = [0]

    def bench(dt: float) -> None:
        if timing.bench_s == 0.0:
            timing.first_bench_s = dt
        timing.bench_s += dt
        timing.bench_each.append(dt)

    def add(attr: str) -> Callable[[float], None]:
        return lambda dt: setattr(timing, attr, getattr(timing, attr) + dt)

    saved = [_wrap(provider, "_benchmark_function", bench, inside=benching),
             _wrap(provider, "_run_subprocess_benchmark_job", add("bench_job_s")),
             _wrap(provider, "_run_subprocess_accuracy_check_job", add("accuracy_s"))]
    kernel = getattr(provider, "kernel", None)
    if kernel is not None:
        saved.append(_wrap(kernel, "compile_config", add("codegen_s"), counts=lambda: benching[0] == 0))
    try:
        yield
    finally:
        for s in reversed(saved):
            _unwrap(s)


# ----------------------------------------------------------------------------- Helion's benchmark worker

@contextlib.contextmanager
def graph_timing(env: Any = None) -> Iterator[bool]:
    """While abductune's search runs, Helion times each config as a replayed CUDA graph
    (`GRAPH_TIMING_ENV` set to 1 in this process, which the benchmark worker spawned or kept
    for the search takes: `helion_worker.SYNCED_ENV`), unless the user set the variable, whose
    choice stands. Yields whether it is on.

    Why: Helion's worker times a config one Python call at a time, and a call of a Helion
    kernel costs the host 10-20 us, so kernels of a few microseconds all read as the call
    (session 43, H200: configs that replay in 4-7 us read 10-26 us in the search, and the
    search's matmul 1024^3 winner was 1.18x `full`'s once both were replayed side by side).
    With the switch on, Helion replays the call as a graph and, under 64 us, times a batch of
    calls against the same batch of cache flushes, which takes the launch out."""
    env = os.environ if env is None else env
    if GRAPH_TIMING_ENV in env:
        yield env[GRAPH_TIMING_ENV] not in ("", "0", "false", "False")
        return
    env[GRAPH_TIMING_ENV] = "1"
    try:
        yield True
    finally:
        env.pop(GRAPH_TIMING_ENV, None)


def start_worker(search: Any) -> tuple[Any, bool]:
    """(worker, reused): the benchmark worker kept from an earlier search in this process
    (`helion_worker.KEEPER`), else one spawned now (its interpreter imports while the caller
    goes on), where the search's provider would use one; (None, False) where it would not
    or cannot."""
    settings = search.settings
    if not getattr(settings, "autotune_benchmark_subprocess", False):
        return None, False
    try:
        from helion.autotuner.benchmark_provider import LocalBenchmarkProvider
        import torch.distributed as dist
    except ImportError:  # a Helion without the worker: nothing to start early
        return None, False
    provider_cls = getattr(search, "_benchmark_provider_cls", None)
    if not (isinstance(provider_cls, type) and issubclass(provider_cls, LocalBenchmarkProvider)):
        return None, False
    if dist.is_available() and dist.is_initialized():
        return None, False
    supports = getattr(search.kernel, "supports_subprocess_benchmark", None)
    if supports is not None and not supports():
        return None, False
    return KEEPER.take(spawn_worker)


def adopt_worker(provider: Any, worker: Any) -> bool:
    """Hand a worker to the provider (True), or, where the provider will not benchmark in a
    worker, keep it for a later search (it ran nothing of this one)."""
    if worker is None:
        return False
    enabled = getattr(provider, "_subprocess_benchmark_enabled", None)
    if getattr(provider, "_benchmark_worker", False) is None and enabled is not None and enabled():
        provider._benchmark_worker = worker
        return True
    KEEPER.give(worker, used=False)
    return False


def return_worker(provider: Any) -> bool:
    """At a search's end: take the provider's worker, where it is usable, before Helion's
    cleanup would shut it down, and keep it for the next search (`helion_worker`). True
    where it is kept. An unusable one stays with the provider, whose cleanup reports it as
    Helion does."""
    worker = getattr(provider, "_benchmark_worker", None)
    if worker is None or not usable(worker):
        return False
    provider._benchmark_worker = None
    return KEEPER.give(worker)


def accepted(fn: Callable[..., Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of `wanted` that `fn` takes (all of them where it takes `**kwargs`):
    a Helion version lacking one keeps its default."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(wanted)
    return {k: v for k, v in wanted.items() if k in params}


def rebenchmark_options(search: Any, target_ms: float) -> dict[str, Any]:
    """Keyword arguments for Helion's `rebenchmark`: interleaved in this process, short,
    no isolated confirmation pass (those Helion versions lacking a keyword get its default)."""
    return accepted(search.rebenchmark, {"target_ms": float(target_ms), "use_isolated": False,
                                         "confirm_suspicious": False, "use_interleaved": True})


# ----------------------------------------------------------------------------- the evaluator

def _no_raise(search: Any) -> dict[str, Any]:
    """Ask Helion for failed rows instead of its compile error when a whole batch fails, where
    it can (Helion 1.5; 1.4 raises, as its own searches do)."""
    params = inspect.signature(search.benchmark_population).parameters
    return {"raise_if_no_viable_config": False} if "raise_if_no_viable_config" in params else {}


class HelionEvaluator(Evaluator):
    """Measures configs of `space` through the Helion search `search` (module docstring).
    `to_full`: a config of `space` -> a config of the HelionMap's full space."""

    def __init__(self, search: Any, hmap: HelionMap, space: Any, problem: Any,
                 to_full: Callable[[Mapping[str, Any]], dict[str, Any]], shared: Shared):
        self.search, self.hmap, self.space, self.problem = search, hmap, space, problem
        self.to_full = to_full
        self.shared = shared

    @property
    def clock(self) -> float:  # type: ignore[override]
        return self.shared.clock

    def member(self, cfg: Mapping[str, Any]) -> tuple[Any, Measurement | None]:
        """(Helion's member for cfg, None) or (None, the measurement that says why there is none)."""
        try:
            flat = self.hmap.to_flat(self.to_full(cfg))
            m = self.search.make_unbenchmarked(flat)
        except Exception as e:  # noqa: BLE001 - a config Helion cannot read is a failed measurement
            return None, Measurement(dict(cfg), "compile_error", error=f"{type(e).__name__}: {e}"[:2000])
        if m is None:
            return None, Measurement(dict(cfg), "pruned", error="Helion rejects this config for this kernel "
                                                                "(InvalidConfig or not viable on its backend)")
        return self.shared.members.get(m.config, m), None

    def row(self, cfg: Mapping[str, Any], m: Any, compile_s: float = 0.0, bench_s: float = 0.0) -> Measurement:
        perf = m.perf if m.perfs else math.inf
        extra = {"helion_config": repr(m.config), "helion_status": str(m.status)}
        if math.isfinite(perf) and m.status not in _STATUS and m.status != "error":
            return Measurement(dict(cfg), "ok", time_ms=float(perf), samples_ms=(float(perf),),
                               compile_s=compile_s, bench_s=bench_s, extra=extra)
        status = _STATUS.get(m.status, "runtime_error" if m.compile_time is not None else "compile_error")
        return Measurement(dict(cfg), status, compile_s=compile_s, bench_s=bench_s, extra=extra,
                           error=f"Helion status {m.status}")

    def benchmark(self, batch: list[Any]) -> float:
        """Helion benchmarks a batch of new members; returns its wall seconds (into the timing)."""
        if not batch:
            return 0.0
        t = self.shared.timing
        bench0 = t.bench_s
        t0 = time.perf_counter()
        with timed_benchmarks(getattr(self.search, "benchmark_provider", None), t):
            self.search.benchmark_population(batch, desc="abductune", **_no_raise(self.search))
        spent = time.perf_counter() - t0
        self.shared.clock += spent
        t.compile_s += max(0.0, spent - (t.bench_s - bench0))
        t.batches += 1
        for m in batch:
            if m.status in ("deduplicated", "source_rejected"):  # Helion matched its source: no compile, no timing
                t.free += 1
            else:
                t.timed += 1
        return spent

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        out: list[Measurement | None] = []
        todo: list[tuple[int, Any]] = []
        fresh: dict[Any, Any] = {}
        for i, cfg in enumerate(configs):
            m, failed = self.member(cfg)
            out.append(failed)
            if failed is None:
                key = m.config
                if key not in self.shared.members:  # measured in an earlier batch: answered for free
                    m = fresh.setdefault(key, m)
                todo.append((i, m))
        batch = list(fresh.values())
        self.shared.timing.free += len(todo) - len(batch)  # normalised onto one measured or one in this batch
        spent = self.benchmark(batch)
        for key, m in fresh.items():
            self.shared.members[key] = m
            self.shared.members[m.config] = m  # Helion may hand back a normalized config
        share = spent / max(1, len(batch))
        for i, m in todo:
            new = any(m is b for b in batch)
            c = (m.compile_time or 0.0) if new else 0.0
            out[i] = self.row(configs[i], m, c, max(0.0, share - c) if new else 0.0)
        return out  # type: ignore[return-value]

    def remeasure(self, configs: Sequence[Mapping[str, Any]], *, rounds: int = 1) -> list[Measurement]:
        """Helion's interleaved re-benchmark of the configs (already measured: no compile)."""
        pairs = [self.member(c) for c in configs]
        unknown = [c for c, (m, f) in zip(configs, pairs) if f is None and m.config not in self.shared.members]
        if unknown:
            self.evaluate(unknown)
            pairs = [self.member(c) for c in configs]
        live = list({id(m): m for m, f in pairs if f is None and m.perfs and math.isfinite(m.perf)}.values())
        t0 = time.perf_counter()
        if len(live) >= 2:
            self.search.rebenchmark(live, desc="abductune run-off", **rebenchmark_options(self.search, RUNOFF_TARGET_MS))
        spent = time.perf_counter() - t0
        self.shared.clock += spent
        self.shared.timing.runoff_s += spent
        return [f if f is not None else self.row(c, m) for c, (m, f) in zip(configs, pairs)]
