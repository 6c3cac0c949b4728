"""Measure a user's kernel in the caller's process, on the caller's tensors (like Triton's
`Autotuner._bench`): what `@abductune.autotune` measures with.

The evaluator knows nothing about Triton's call shape. It is given, per config, a `Launch`
(how to run that config once, with the caller's side-effect hooks around it) and a timer
(`do_bench`-like, or an injected deterministic one in tests). For each config it:

1. asks `prune` whether the config may run at all (the user's `early_config_prune`);
2. runs it once: this compiles it (or loads Triton's cache) and, with a reference, checks
   its outputs between the launch and the post hook (restore_value would undo them);
3. times it with the timer; every timed call is one full trial (hooks included), so a
   trial never leaves an accumulator or an in-place output corrupted.

A failure is a measurement with a reason (compile_error, resource_error, runtime_error,
wrong_result, pruned), never an exception that ends the run. Configs {"impl": name} are
other implementations (torch, cuBLAS, another kernel) timed the same way.
"""
from __future__ import annotations

import logging
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ..measurement import Measurement, Status
from ..problem import Problem
from ..space import Config, Space
from .base import Evaluator

log = logging.getLogger(__name__)

# Triton's quantiles: median first, then the 20th and 80th percentiles (the spread)
QUANTILES = (0.5, 0.2, 0.8)

# Exception class names (anywhere in the MRO) -> status; names, not imports, so this works
# on every Triton version without importing it
_RESOURCE = {"OutOfResources", "OutOfMemoryError"}
_COMPILE = {"CompilationError", "CompileTimeAssertionFailure", "PTXASError", "UnsupportedLanguageConstruct"}
_TIMEOUT = {"CompileTimeout"}  # autotune.compiling: a worker's compile ran past its wait


def _noop(*_: Any) -> None:
    return None


@dataclass
class Launch:
    """One config's launch on the caller's arguments, with the hooks Triton runs around each
    benchmark call: `before` (config pre_hook, then the autotuner's pre_hook: reset_to_zero)
    and `after(exception)` (post_hook: restore_value)."""

    run: Callable[[], Any]
    before: Callable[[], Any] = _noop
    after: Callable[[BaseException | None], Any] = _noop

    def __call__(self) -> None:
        """One trial: Triton's `kernel_call`."""
        self.checked(lambda: None)

    def checked(self, check: Callable[[], str | None]) -> str | None:
        """One trial that inspects the outputs before the post hook restores anything."""
        self.before()
        try:
            self.result = self.run()  # a Triton launch returns its CompiledKernel: static facts
            why = check()
        except Exception as e:
            try:
                self.after(e)
            finally:
                raise
        self.after(None)
        return why


Timer = Callable[[Config, Launch], "float | Sequence[float]"]


def status_of(e: BaseException) -> Status:
    names = {c.__name__ for c in type(e).__mro__}
    if names & _TIMEOUT:
        return Status.TIMEOUT
    if names & _RESOURCE:
        return Status.RESOURCE_ERROR
    if names & _COMPILE:
        return Status.COMPILE_ERROR
    return Status.RUNTIME_ERROR


def wall_clock_bench(fn: Callable[[], Any], quantiles: Sequence[float] | None = None, *, reps: int = 5
                     ) -> float | list[float]:
    """A do_bench for where no GPU benchmarker exists (Triton's interpreter on the CPU):
    wall-clock milliseconds of `reps` calls, as quantiles when asked."""
    times = []
    for _ in range(max(1, reps)):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    if not quantiles:
        return statistics.median(times)
    s = sorted(times)
    return [s[min(len(s) - 1, int(q * len(s)))] for q in quantiles]


def bench_timer(do_bench: Callable[..., Any], quantiles: Sequence[float] = QUANTILES) -> Timer:
    """A Timer from a Triton-style `do_bench(fn, quantiles=...)`."""
    return lambda cfg, launch: do_bench(launch, quantiles=tuple(quantiles))


def _samples(t: float | Sequence[float]) -> tuple[float, tuple[float, ...]]:
    """(median, samples) from what a timer returned: one number, or [median, lo, hi, ...]."""
    if isinstance(t, (int, float)):
        return float(t), (float(t),)
    vals = tuple(float(x) for x in t)
    if not vals:
        raise ValueError("the timer returned no value")
    return vals[0], vals


def static_facts(kernel: Any) -> dict[str, int]:
    """Registers, spill bytes and shared memory of the binary a launch ran, read from the
    CompiledKernel a Triton launch returns (spills: Triton counts local memory in 4-byte words);
    nothing for a launch that returns something else (a wrapper, another implementation, the
    interpreter), so a record made through the decorator carries what a sweep's does."""
    regs = getattr(kernel, "n_regs", None)
    if not isinstance(regs, int) or isinstance(regs, bool) or regs <= 0:
        return {}
    meta = getattr(kernel, "metadata", None)
    shared = getattr(meta, "shared", None) if meta is not None else None
    spills = getattr(kernel, "n_spills", None)
    return {"registers": regs, "spills": int(spills) * 4 if isinstance(spills, int) else None,
            "smem_bytes": int(shared) if isinstance(shared, int) else None}


class InProcessEvaluator(Evaluator):
    """Times configs of one kernel call in this process.

    `launch(config)` builds the Launch of a config (an {"impl": name} config included);
    `timer(config, launch)` returns milliseconds (a number, or Triton's [median, p20, p80]);
    `check(config)` (optional) compares the outputs of a launch with a reference and returns
    why they differ, or None; `prune(config)` returns why a config may not run, or None;
    `warm(configs)` (optional) starts compiling the configs still to come, e.g. in worker
    processes, and returns at once (it is offered them again before each config).
    `remeasure_timer` (default: `timer`) re-times contenders in the final run-off.
    """

    remeasures_impls = True  # an {"impl": name} config re-times like any other (the Session's run-off)

    def __init__(self, problem: Problem, space: Space, launch: Callable[[Config], Launch], timer: Timer, *,
                 check: Callable[[Config], str | None] | None = None,
                 prune: Callable[[Config], str | None] | None = None,
                 warm: Callable[[list[Config]], None] | None = None,
                 remeasure_timer: Timer | None = None, verbose: bool = False):
        self.problem = problem
        self.space = space
        self.launch = launch
        self.timer = timer
        self.remeasure_timer = remeasure_timer or timer
        self.check = check
        self.prune = prune
        self.warm = warm
        self.verbose = verbose
        self.clock = 0.0
        self.calls = 0  # configs measured (first-time and re-timed): what tests count

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        cfgs = [dict(c) for c in configs]
        out = []
        for i, c in enumerate(cfgs):
            if self.warm is not None:  # offer the configs still to come (compilers may have started since)
                later = [x for x in cfgs[i + 1:] if "impl" not in x]
                if later:
                    try:
                        self.warm(later)
                    except Exception as e:  # noqa: BLE001 - an optimisation; each launch compiles anyway
                        log.info("parallel compile failed (%s: %s); compiling in this process", type(e).__name__, e)
                        self.warm = None
            out.append(self._one(c))
        return out

    def _one(self, cfg: Config) -> Measurement:
        self.calls += 1
        if self.verbose:
            print(f"Autotuning kernel {self.problem.kernel} with config {cfg}")
        if self.prune is not None and "impl" not in cfg:
            why = self.prune(cfg)
            if why:
                return Measurement(cfg, Status.PRUNED, error=why)
        launch = self.launch(cfg)
        t0 = time.perf_counter()
        try:
            # the first launch compiles (or loads the cache); its outputs are checked here
            why = launch.checked(lambda: self.check(cfg)) if self.check is not None else launch()
        except Exception as e:  # noqa: BLE001 - a failing config is data
            dt = time.perf_counter() - t0
            self.clock += dt
            if self.verbose:
                print(f"Autotuning failed with {type(e).__name__}: {e}")
            return Measurement(cfg, status_of(e), compile_s=dt, error=f"{type(e).__name__}: {e}"[:2000])
        compile_s = time.perf_counter() - t0
        if why:
            self.clock += compile_s
            return Measurement(cfg, Status.WRONG_RESULT, compile_s=compile_s, error=str(why)[:2000])
        t1 = time.perf_counter()
        try:
            median, samples, extra = self._time(cfg, launch)
        except Exception as e:  # noqa: BLE001
            bench_s = time.perf_counter() - t1
            self.clock += compile_s + bench_s
            return Measurement(cfg, status_of(e), compile_s=compile_s, bench_s=bench_s,
                               error=f"{type(e).__name__}: {e}"[:2000])
        bench_s = time.perf_counter() - t1
        self.clock += compile_s + bench_s
        if not median < float("inf"):  # Triton's do_bench answers inf for a failed launch
            return Measurement(cfg, Status.RUNTIME_ERROR, compile_s=compile_s, bench_s=bench_s,
                               error="the timer returned inf")
        return Measurement(cfg, time_ms=median, samples_ms=samples, compile_s=compile_s, bench_s=bench_s,
                           extra=extra, **static_facts(getattr(launch, "result", None)))

    def _time(self, cfg: Config, launch: Launch) -> tuple[float, tuple[float, ...], dict[str, Any]]:
        """(median, samples, extra) of a config's first timing, after its first launch."""
        median, samples = _samples(self.timer(cfg, launch))
        return median, samples, {}

    def remeasure(self, configs: Sequence[Mapping[str, Any]], *, rounds: int = 1) -> list[Measurement]:
        """Re-time already measured configs, interleaved over `rounds` (config A, B, C, A, B,
        C, ...) so a drift in clocks or temperature hits every contender alike."""
        cfgs = [dict(c) for c in configs]
        launches = [self.launch(c) for c in cfgs]
        times: list[list[float]] = [[] for _ in cfgs]
        errors: list[BaseException | None] = [None] * len(cfgs)
        t0 = time.perf_counter()
        for _ in range(max(1, rounds)):
            for i, (c, la) in enumerate(zip(cfgs, launches)):
                if errors[i] is not None:
                    continue
                try:
                    times[i].append(_samples(self.remeasure_timer(c, la))[0])
                except Exception as e:  # noqa: BLE001
                    errors[i] = e
        each = (time.perf_counter() - t0) / max(1, len(cfgs))
        self.clock += each * len(cfgs)
        self.calls += len(cfgs)
        out = []
        for c, ts, e in zip(cfgs, times, errors):
            if e is not None:
                out.append(Measurement(c, status_of(e), bench_s=each, error=f"{type(e).__name__}: {e}"[:2000]))
            else:
                # each sample is one round, in step with every other contender's: the judge may
                # read them round by round (`session.beat_every_round`)
                out.append(Measurement(c, time_ms=statistics.median(ts), samples_ms=tuple(ts), bench_s=each,
                                       extra={"rounds": len(ts)} if rounds > 1 and len(cfgs) > 1 else {}))
        return out
