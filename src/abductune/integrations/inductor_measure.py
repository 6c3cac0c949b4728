"""The evaluator of the Inductor integration: it measures a config through Inductor's own
autotuner, the way Inductor's coordinate descent does (`CachingAutotuner._precompile_config`
then `bench`), on the arguments of the launch that triggered tuning.

No torch import here: the autotuner is used through the four things every supported Inductor
has (`_precompile_config(cfg).make_launcher()`, `bench(launcher, *args)`, `lock`, and
`coordesc_tuner`'s cache of timings), so the tests drive it with a stand-in autotuner on a CPU.

Why through Inductor and not abductune's live evaluator: Inductor's `bench` already clones the
arguments a kernel mutates, zeroes what must be zeroed, and times with its benchmarker; the
kernel is compiled with Inductor's compile options (the same binary the model will launch);
and the launchers it makes are the ones Inductor keeps. Timings Inductor took before the
finish (its own config list) answer for free, as they do for Inductor's coordinate descent.

Compiles run ahead, in parallel, where a `warm` function is given (inductor.py gives one that
compiles in Inductor's own compile workers, into Triton's cache, as Inductor's workers do for
its config lists): a batch's configs and the ones the strategy expects next (`expect`) are sent
out at once, and the compile here is then a cache hit. Without it, configs compile here, one
after another, as in Inductor's coordinate descent.
"""
from __future__ import annotations

import copy
import logging
import math
import statistics
import time
from typing import Any, Callable, Mapping, Sequence

from ..measure.base import Evaluator
from ..measurement import Measurement
from .inductor_kernels import KernelDesc

log = logging.getLogger(__name__)

# how many of the configs a strategy expects next are compiled ahead
LOOKAHEAD = 16


def config_like(base: Any, kwargs: Mapping[str, Any], num_warps: int) -> Any:
    """A copy of Inductor's config `base` (a triton.Config, or Inductor's subclass of it) with
    other kwargs and warps; num_stages, num_ctas and any backend field stay as they were."""
    cfg = copy.copy(base)
    cfg.kwargs = dict(kwargs)
    cfg.num_warps = int(num_warps)
    for attr in ("found_by_coordesc", "found_by_combo_autotune"):
        if attr in getattr(cfg, "__dict__", {}):
            delattr(cfg, attr)
    return cfg


class LaunchEvaluator(Evaluator):
    """Measures space configs of one kernel through its Inductor autotuner (module docstring).
    `start`: the launcher Inductor picked (its config is the base every config is built on).
    `reuse`: answer from the timings Inductor took on this launch's shape (False for another
    size bucket of a dynamic kernel: Inductor's cache is keyed by config alone).
    `alone`: times a launcher by itself (`inductor._alone_timer`: on arguments cloned once, out
    of the timed call) instead of Inductor's `bench`, whose timed call clones or copies back
    from the CPU every argument the kernel mutates (session 34 read 6-20x a kernel's own time
    through it on an H200). Its times are not Inductor's: with it, nothing is answered from
    Inductor's timings or written into its cache, so every config compared was timed alike."""

    def __init__(self, tuner: Any, start: Any, desc: KernelDesc, args: Sequence[Any],
                 kwargs: Mapping[str, Any] | None = None, reuse: bool = True,
                 warm: Callable[[list[Any]], list[Any]] | None = None,
                 alone: Callable[[Any], float] | None = None):
        self.tuner = tuner
        self.alone = alone
        self.desc = desc
        self.space = desc.space
        self.problem = desc.problem
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        self.base = start.config
        self.clock = 0.0
        self.reuse = reuse and alone is None
        self.warm = warm
        self.compiled = 0  # configs compiled here (Inductor's own timings cost nothing)
        self.warmed = 0  # of those, compiled ahead in a worker (a cache hit here)
        self.compile_s = 0.0  # seconds compiling here (waiting for a compile ahead included)
        self.bench_s = 0.0  # seconds timing here (the judge's re-timing included)
        self.answered = 0  # configs answered by Inductor's own timings: nothing compiled or run
        self._launchers: dict[tuple, Any] = {}
        self._pending: dict[tuple, Any] = {}  # config key -> the future of its compile ahead
        self._known: dict[tuple, Measurement] = {}  # rows taken before the search, answered once
        first = desc.config_of(start.config.kwargs, start.config.num_warps)
        if first is not None:
            self._launchers[self.space.key(first)] = start

    def triton_config(self, cfg: Mapping[str, Any]) -> Any:
        kw, warps = self.desc.kwargs_of(cfg, self.base.kwargs)
        return config_like(self.base, kw, warps)

    def _ahead(self, configs: Sequence[Mapping[str, Any]]) -> None:
        """Send the configs not compiled yet to the compile workers, where there are some."""
        if self.warm is None:
            return
        todo = []
        for c in configs:
            k = self.space.key(c)
            if k not in self._launchers and k not in self._pending and self.space.is_valid(c):
                todo.append((k, c))
        if not todo:
            return
        try:
            futures = self.warm([self.triton_config(c) for _, c in todo])
        except Exception as e:  # noqa: BLE001 - then they compile here
            log.debug("compiling ahead failed: %s: %s", type(e).__name__, e)
            self.warm = None
            return
        for (k, _), f in zip(todo, futures):
            self._pending[k] = f

    def launcher(self, cfg: Mapping[str, Any]) -> Any:
        """The launcher of `cfg`, compiled on first use (under the autotuner's lock, as
        Inductor's coordinate descent compiles); a Triton cache hit when it was compiled ahead."""
        k = self.space.key(cfg)
        if k not in self._launchers:
            t0 = time.perf_counter()  # waiting for a compile ahead counts as compiling
            pending = self._pending.pop(k, None)
            ahead = pending is not None
            if ahead:
                try:
                    pending.result()
                except Exception as e:  # noqa: BLE001 - the compile here reports the error
                    log.debug("compiling %s ahead failed: %s", dict(cfg), e)
                    ahead = False
            tc = self.triton_config(cfg)
            try:
                with self.tuner.lock:
                    self._launchers[k] = self.tuner._precompile_config(tc).make_launcher()
            finally:
                self.compile_s += time.perf_counter() - t0
            self.compiled += 1
            self.warmed += ahead
        return self._launchers[k]

    def _bench(self, launcher: Any) -> float:
        if self.alone is not None:
            return float(self.alone(launcher))
        return float(self.tuner.bench(launcher, *self.args, **self.kwargs))

    def _failed(self, cfg: Mapping[str, Any], e: BaseException, stage: str) -> Measurement:
        text = f"{type(e).__name__}: {e}"
        out_of = "OutOfResources" in type(e).__name__ or "out of resource" in str(e).lower()
        status = "resource_error" if out_of else ("compile_error" if stage == "compile" else "runtime_error")
        return Measurement(dict(cfg), status, error=text[:2000])

    def _row(self, cfg: Mapping[str, Any], launcher: Any, t: float, compile_s: float, bench_s: float,
             samples: Sequence[float] = ()) -> Measurement:
        facts = {"registers": getattr(launcher, "n_regs", None), "spills": getattr(launcher, "n_spills", None),
                 "smem_bytes": getattr(launcher, "shared", None)}
        facts = {k: (int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None)
                 for k, v in facts.items()}
        if not (isinstance(t, float) and math.isfinite(t)):
            # Inductor's bench answers inf for a config it refuses (spills past its threshold)
            reasons = getattr(self.tuner, "benchmark_failure_reasons", {}) or {}
            why = reasons.get(launcher)
            return Measurement(dict(cfg), "resource_error", compile_s=compile_s, bench_s=bench_s,
                               error=f"Inductor's benchmark refused it ({getattr(why, 'value', why) or 'inf'})",
                               **facts)
        return Measurement(dict(cfg), "ok", time_ms=t, samples_ms=tuple(samples) or (t,), compile_s=compile_s,
                           bench_s=bench_s, **facts)

    def inductor_ms(self, cfg: Mapping[str, Any]) -> float | None:
        """The time Inductor itself took of `cfg` on this launch (its benchmark of its list, our
        candidates included), or None: free to read, nothing compiled or run."""
        if not self.reuse:
            return None
        try:
            t = self.tuner.coordesc_tuner.lookup_in_cache(self.triton_config(cfg))
        except Exception:  # noqa: BLE001 - then it is measured
            return None
        return None if t is None else float(t)

    def _answer(self, cfg: Mapping[str, Any], t: float) -> Measurement:
        """A row from Inductor's own timing of `cfg` (the launcher's facts where it is here)."""
        self.answered += 1
        launcher = self._launchers.get(self.space.key(cfg))
        return self._row(cfg, launcher, t, 0.0, 0.0)

    def answers(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        """Rows for those of `configs` Inductor timed itself; the others are left out."""
        out = []
        for cfg in configs:
            t = self.inductor_ms(cfg)
            if t is not None:
                out.append(self._answer(cfg, t))
        return out

    def remember(self, m: Measurement) -> None:
        """A row measured before the search (the finish's look at Inductor's pick): the search's
        first ask for that config gets it instead of timing it again."""
        self._known[self.space.key(m.config)] = m

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        # rows taken before, then Inductor's own timings: a config timed is not compiled or run again
        known = {i: self._known.pop(self.space.key(c), None) for i, c in enumerate(configs)}
        answered = {i: None if known[i] is not None else self.inductor_ms(c) for i, c in enumerate(configs)}
        self._ahead([c for i, c in enumerate(configs) if known[i] is None and answered[i] is None])
        out: list[Measurement] = []
        for i, cfg in enumerate(configs):
            if known[i] is not None:
                out.append(known[i])
                continue
            if answered[i] is not None:
                out.append(self._answer(cfg, answered[i]))
                continue
            c0 = self.compile_s
            try:
                launcher = self.launcher(cfg)
            except Exception as e:  # noqa: BLE001 - a failing config is a measurement, never an exception
                self.clock += self.compile_s - c0
                out.append(self._failed(cfg, e, "compile"))
                continue
            compile_s = self.compile_s - c0
            t1 = time.perf_counter()
            try:
                t = self._bench(launcher)
            except Exception as e:  # noqa: BLE001 - as above
                self._benched(compile_s, time.perf_counter() - t1)
                out.append(self._failed(cfg, e, "run"))
                continue
            bench_s = time.perf_counter() - t1
            if self.reuse:
                self.tuner.coordesc_tuner.cache_benchmark_result(launcher.config, t)
            self._benched(compile_s, bench_s)
            out.append(self._row(cfg, launcher, t, compile_s, bench_s))
        return out

    def _benched(self, compile_s: float, bench_s: float) -> None:
        self.bench_s += bench_s
        self.clock += compile_s + bench_s

    def remeasure(self, configs: Sequence[Mapping[str, Any]], *, rounds: int = 1) -> list[Measurement]:
        """Time the configs again, interleaved over `rounds` (a confirmation or the final run-off
        of the Session's judge): fresh timings, never the cached ones."""
        samples: dict[int, list[float]] = {i: [] for i in range(len(configs))}
        launchers: dict[int, Any] = {}
        errors: dict[int, Measurement] = {}
        t0, c0 = time.perf_counter(), self.compile_s
        for _ in range(max(1, rounds)):
            for i, cfg in enumerate(configs):
                if i in errors:
                    continue
                try:
                    launchers[i] = launchers.get(i) or self.launcher(cfg)
                    samples[i].append(self._bench(launchers[i]))
                except Exception as e:  # noqa: BLE001 - as in evaluate
                    errors[i] = self._failed(cfg, e, "run")
        spent = time.perf_counter() - t0
        self.clock += spent
        self.bench_s += spent - (self.compile_s - c0)  # a contender compiled here is a compile
        out = []
        for i, cfg in enumerate(configs):
            if i in errors:
                out.append(errors[i])
                continue
            s = samples[i]
            ok = [x for x in s if math.isfinite(x)]
            t = statistics.median(ok) if ok and len(ok) == len(s) else math.inf
            out.append(self._row(cfg, launchers[i], t, 0.0, spent / max(1, len(configs)), ok))
        return out


class AheadLaunchEvaluator(LaunchEvaluator):
    """A LaunchEvaluator that also compiles what the strategy expects to propose next (a
    strategy computes those only for an evaluator with `expect`)."""

    def expect(self, configs: Sequence[Mapping[str, Any]]) -> None:
        """What the strategy expects next: compiled ahead while this batch is timed."""
        self._ahead(list(configs)[:LOOKAHEAD])
