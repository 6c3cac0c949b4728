"""A kernel call as an evaluator: one `Launch` per config with the autotuner's hooks around it,
the reference check and the timer; what `Autotuner._tune` measures with, in this process or
(isolate=True) in the measuring worker, which rebuilds the call and measures with this too."""
from __future__ import annotations

import logging
import os
import statistics
import time
from typing import Any, Callable, Mapping, Sequence

from ..errors import AbductuneError
from ..measure.base import Evaluator
from ..measure.inprocess import InProcessEvaluator, Launch, _samples, bench_timer, status_of, wall_clock_bench
from ..measurement import Measurement
from ..problem import Problem
from ..session import NOISE_CAP
from ..space import Config, Space, config_id
from ..theory.resources import hopeless, infeasible
from .configs import LAUNCH_KW, launch_kwargs, triton_config
from .fixed import with_fixed
from .keys import dtype_name, interpreted

log = logging.getLogger(__name__)

PRINT_ENV = "ABDUCTUNE_PRINT_AUTOTUNING"


def printing() -> bool:
    """Whether to print each measurement and the chosen config (Triton's TRITON_PRINT_AUTOTUNING)."""
    return os.environ.get(PRINT_ENV, "") == "1" or os.environ.get("TRITON_PRINT_AUTOTUNING", "") == "1"


def call_evaluator(tuner: Any, problem: Problem, args: tuple, kwargs: dict, nargs: dict[str, Any],
                   saved: Mapping[str, Any], space: Space | None = None, warm: Any = None,
                   fixed: Mapping[str, Any] | None = None) -> Evaluator:
    """The caller's call as an evaluator over `space` (the autotuner's, or a missed key's own):
    one Launch per config, the hooks around it (with isolate=True, the same built in a worker
    process on copies of the arguments). A config beyond the list is measured only when the
    resource model sees no reason it cannot launch and the kernel's `early_config_prune` keeps it.
    `warm` (compiling.Warmer): compile workers get the configs to come, and each config's first
    launch settles with them first (its job done, withdrawn, or waited for)."""
    space = tuner.space if space is None else space
    # the resource model judges a config with the tiles the call fixes (`autotune.fixed`), which
    # the launch leaves to the caller
    judged = with_fixed(space, fixed or {})

    def beyond(cfg: Config) -> bool:
        """A kernel config the list does not hold (what the search grew; not an implementation)."""
        return "impl" not in cfg and not any(cfg == d for d in tuner._list)

    def prune(cfg: Config) -> str | None:
        if not beyond(cfg):
            return None  # the list was pruned before it became the seeds
        full = {**cfg, **(fixed or {})}
        why = infeasible(problem, judged, full) or hopeless(problem, judged, full)
        if why:
            return f"the resource model: {why}"
        if tuner.early_config_prune is not None and not tuner.early_config_prune(
                [triton_config(cfg)], dict(nargs), **kwargs):
            return "early_config_prune rejected it"
        return None
    if tuner.isolate:
        from .isolation import evaluator_for

        ev = evaluator_for(tuner, problem, args, kwargs, nargs, prune, space)
        ev.warm = warm  # compile workers fill Triton's cache, which the measuring worker reads
        return ev
    call_kw = {k: v for k, v in kwargs.items() if k not in LAUNCH_KW}

    def launch(cfg: Config) -> Launch:
        if "impl" in cfg:
            impl = tuner.implementations[cfg["impl"]]
            full = {**nargs, **kwargs}
            return Launch(lambda: impl(*args, **call_kw), lambda: tuner.pre_hook(full),
                          lambda e: tuner._post(full, e, saved))
        ckw = launch_kwargs(cfg)
        full = {**nargs, **kwargs, **ckw}
        hook = tuner._config_hook(cfg)
        first = [warm is not None]

        def before() -> None:
            if hook is not None:
                hook(full)
            tuner.pre_hook(full)

        def run() -> Any:
            if first[0]:  # the first launch compiles: unless a worker has, or is about to
                first[0] = False
                return warm.first_launch(cfg, lambda: tuner.fn.run(*args, **kwargs, **ckw))
            return tuner.fn.run(*args, **kwargs, **ckw)
        return Launch(run, before, lambda e: tuner._post(full, e, saved))

    check: Callable[[Config], str | None] | None = None
    if tuner.reference is not None:
        full0 = {**nargs, **kwargs}
        tuner.pre_hook(dict(full0), reset_only=True)
        expected = tuner.reference(dict(full0))
        if not isinstance(expected, Mapping) or not set(expected) <= set(tuner.arg_names):
            raise AbductuneError(f"reference must return a dict of output argument name -> expected value "
                                 f"(names among {tuner.arg_names}), got {type(expected).__name__}")

        def compare(cfg: Config) -> str | None:
            for n, exp in expected.items():
                why = _compare(n, full0[n], exp, tuner.reference_tol)
                if why:
                    return why
            return None
        check = compare
    vouch = None
    if check is None and tuner._list:
        # no reference of the user's: a config beyond the list must give what the kernel's own
        # first config gives (`ListCheck`); the list itself is the author's, measured as Triton would
        vouch = ListCheck(tuner._list[0], beyond, launch, lambda: {**nargs, **kwargs}, tuner.reference_tol,
                          problem.kernel)
        check = vouch
    timer, retimer, probe, probed = timers(tuner)
    if getattr(tuner, "record", None) is not None:
        probe = None  # a recording times every config in full: a dataset's slow configs are data too
    return CallEvaluator(problem, space, launch, timer, check=check, prune=prune, warm=warm,
                         remeasure_timer=retimer, probe_timer=probe, probed_timer=probed, verbose=printing(),
                         vouch=vouch)


# a copy of the call's tensors twice (two runs of the vouching config) may take at most this share
# of the GPU's free memory; past it the check is off for the key, and says so. A bound, not fitted
VOUCH_MEMORY_SHARE = 0.25


class ListCheck:
    """Checks a config beyond the kernel's own list against the list's first config, with no
    reference from the user: growing a space past an author's list (`budget=`, `beyond=`) can
    reach configs the kernel computes wrongly with (FlagGems' block-scaled fp8 matmul applies one
    scale per 128 of K, so its TILE_K 256, a step past its list, gives outputs 25% off), and a
    fast wrong config must never win. Before the first config beyond the list runs, the list's
    first config runs twice on the call's arguments (hooks around each, as any trial), and every
    tensor argument is copied after each run; a tensor the two runs leave different (a kernel that
    accumulates into it with no `reset_to_zero`/`restore_value`, or nondeterminism past the
    tolerance) is not checked. A config beyond the list then has, after its first launch, every
    other tensor as that config left it, within the relative error of `reference_tol` (default:
    by dtype, as `reference=`), or it is `wrong_result`. Where the copy does not fit in
    `VOUCH_MEMORY_SHARE` of the free GPU memory, or the list's config fails, the check is off for
    the key and the log says why. `reference=` replaces it (`reference=lambda args: {}` checks
    nothing, for a kernel whose scratch buffers differ by config). Costs two launches and the copies,
    once per key that measures beyond its list."""

    def __init__(self, first: Config, beyond: Callable[[Config], bool], launch: Callable[[Config], Launch],
                 tensors: Callable[[], Mapping[str, Any]], tol: float | None, kernel: str = "") -> None:
        self.first, self.beyond, self.launch, self.tensors = dict(first), beyond, launch, tensors
        self.tol, self.kernel = tol, kernel
        self.expected: dict[str, Any] | None = None
        self.off: str | None = None  # why nothing is checked
        self.unstable: tuple[str, ...] = ()

    def _copy(self) -> dict[str, Any]:
        import torch

        return {n: v.detach().clone() for n, v in self.tensors().items() if isinstance(v, torch.Tensor)}

    def _fits(self) -> str | None:
        import torch

        ts = [v for v in self.tensors().values() if isinstance(v, torch.Tensor)]
        need = 2 * sum(t.numel() * t.element_size() for t in ts)
        if ts and any(t.is_cuda for t in ts) and torch.cuda.is_available():
            free = torch.cuda.mem_get_info()[0]
            if need > VOUCH_MEMORY_SHARE * free:
                return (f"two copies of the call's tensors ({need / 2**30:.1f} GiB) would take more than "
                        f"{VOUCH_MEMORY_SHARE:.0%} of the GPU's free memory")
        return None

    def prepare(self) -> None:
        """The list's config's outputs, once (before the first config beyond the list runs)."""
        if self.expected is not None or self.off is not None:
            return
        self.off = self._fits()
        if self.off is None:
            runs: list[dict[str, Any]] = []
            try:
                for _ in range(2):
                    self.launch(self.first).checked(lambda: runs.append(self._copy()))
            except Exception as e:  # noqa: BLE001 - the list's own config failing is the user's to see
                self.off = f"the kernel's own config {self.first} failed ({type(e).__name__}: {e})"[:500]
            else:
                try:
                    self.expected = {n: t for n, t in runs[0].items()
                                     if _differs(n, runs[1][n], t, self.tol) is None}
                except Exception as e:  # noqa: BLE001 - a tensor the check cannot compare ends the check, not the tune
                    self.off = f"its outputs could not be compared ({type(e).__name__}: {e})"[:500]
                else:
                    self.unstable = tuple(sorted(set(runs[0]) - set(self.expected)))
                if self.unstable:
                    log.info("abductune: %s: %s differ between two runs of the kernel's own config %s: configs "
                             "beyond the list are not checked on them", self.kernel, ", ".join(self.unstable),
                             self.first)
        if self.off is not None:
            log.warning("abductune: %s: configs beyond the list are not checked against the kernel's own config: "
                        "%s (pass reference= to check them)", self.kernel, self.off)

    def __call__(self, cfg: Config) -> str | None:
        """Why `cfg`'s outputs are wrong (None for a listed config: the author's, as Triton runs it)."""
        if self.expected is None or not self.beyond(cfg):
            return None
        now = self.tensors()
        for n, exp in list(self.expected.items()):
            try:
                why = _differs(n, now[n], exp, self.tol)
            except Exception as e:  # noqa: BLE001 - as in prepare: a tensor it cannot compare goes unchecked
                log.warning("abductune: %s: %s is no longer checked beyond the list: %s: %s", self.kernel, n,
                            type(e).__name__, e)
                del self.expected[n]
                continue
            if why:
                return f"beyond the list, its outputs differ from the kernel's own config {self.first}: {why}"
        return None


# a config whose short probe is this many times the fastest full timing so far is not timed in
# full: the widest window of the final run-off (contenders within 1 + 2 x noise of the best, the
# noise capped at 10%, `session.NOISE_CAP`), so a raced config is one no run-off could take. Not
# fitted (session 30 first tried 1.5: 3 to 18 of 48 configs raced live, saving little)
RACE_MARGIN = 1 + 2 * NOISE_CAP


class CallEvaluator(InProcessEvaluator):
    """The decorator's evaluator: the configs the Session names ahead (the list, as baselines)
    go to the compile workers at once, configs plainly slower than the fastest so far are timed
    only briefly, and the final run-off stops once it is decided.

    `probe_timer` (the run-off's short timer; None where the user brought a timer): once one
    config has a full timing, each later config is first timed by it, and one over `RACE_MARGIN`
    times the fastest full timing keeps that probe as its time (extra "raced"): Triton's full
    do_bench spends about 125 ms on every config whatever it is, most of a cold call on a small
    kernel, and a config that much slower than one already timed can never enter the run-off.
    Its probe time still ranks it for the strategy and the diagnosis. A config the probe keeps in
    the running is then timed by `probed_timer` (default: the full timer): the full timer less
    its warm-up, which the probe's own 25 ms of runs just did (Triton's do_bench warms up for 25
    ms so clocks and caches are as they will be while it times)."""

    def __init__(self, *a: Any, probe_timer: Callable | None = None, probed_timer: Callable | None = None,
                 vouch: ListCheck | None = None, **kw: Any):
        super().__init__(*a, **kw)
        self.vouch = vouch  # checks configs beyond the list against the list's first (`ListCheck`)
        if self.prune is not None:  # asked by `_one` here and in the base: the kernel's prune runs once a config
            ask, said = self.prune, {}

            def once(cfg: Config) -> str | None:
                k = config_id(cfg)
                if k not in said:
                    said[k] = ask(cfg)
                return said[k]
            self.prune = once
        self.probe_timer = probe_timer
        self.probed_timer = probed_timer or self.timer
        self.best_ms = float("inf")  # the fastest full first-time timing so far
        self.raced = 0  # configs timed by the probe alone

    def _one(self, cfg: Config) -> Measurement:
        if self.vouch is not None and self.vouch.beyond(cfg) and (self.prune is None or not self.prune(cfg)):
            self.vouch.prepare()  # the list's outputs, before the first config beyond it writes its own
        return super()._one(cfg)

    def _time(self, cfg: Config, launch: Any) -> tuple[float, tuple[float, ...], dict[str, Any]]:
        if self.probe_timer is not None and self.best_ms < float("inf"):
            median, samples = _samples(self.probe_timer(cfg, launch))
            if median > RACE_MARGIN * self.best_ms:
                self.raced += 1
                return median, samples, {"raced": round(median / self.best_ms, 3)}
            median, samples = _samples(self.probed_timer(cfg, launch))
            extra: dict[str, Any] = {}
        else:
            median, samples, extra = super()._time(cfg, launch)
        if median < self.best_ms:
            self.best_ms = median
        return median, samples, extra

    def prefetch_hint(self, configs: Sequence[Mapping[str, Any]]) -> None:
        if self.warm is not None:
            try:
                self.warm([dict(c) for c in configs if "impl" not in c])
            except Exception as e:  # noqa: BLE001 - an optimisation; each launch compiles anyway
                log.info("parallel compile failed (%s: %s); compiling in this process", type(e).__name__, e)
                self.warm = None

    def remeasure(self, configs: Sequence[Mapping[str, Any]], *, rounds: int = 1) -> list[Measurement]:
        """The interleaved re-timing (InProcessEvaluator.remeasure), stopped after round 2 or later
        once one contender was the fastest in every round so far: its median over the rounds
        taken is then the lowest, and more rounds would only re-time a run-off it has won against
        every other one. Between contenders that trade places every round is taken. Saves GPU
        time that Triton's autotuner never spends (it keeps its first timings)."""
        cfgs = [dict(c) for c in configs]
        if rounds <= 2 or len(cfgs) < 2:
            return super().remeasure(cfgs, rounds=rounds)
        launches = [self.launch(c) for c in cfgs]
        times: list[list[float]] = [[] for _ in cfgs]
        errors: list[BaseException | None] = [None] * len(cfgs)
        t0 = time.perf_counter()
        for r in range(rounds):
            for i, (c, la) in enumerate(zip(cfgs, launches)):
                if errors[i] is None:
                    try:
                        times[i].append(_samples(self.remeasure_timer(c, la))[0])
                    except Exception as e:  # noqa: BLE001
                        errors[i] = e
            if r >= 1 and decided(times, errors):
                break
        each = (time.perf_counter() - t0) / len(cfgs)
        self.clock += each * len(cfgs)
        self.calls += len(cfgs)
        self.runoff_rounds = r + 1
        return [Measurement(c, status_of(e), bench_s=each, error=f"{type(e).__name__}: {e}"[:2000]) if e is not None
                else Measurement(c, time_ms=statistics.median(ts), samples_ms=tuple(ts), bench_s=each,
                                 extra={"rounds": len(ts)})  # one sample a round, in step (InProcessEvaluator)
                for c, ts, e in zip(cfgs, times, errors)]


def decided(times: Sequence[Sequence[float]], errors: Sequence[BaseException | None]) -> bool:
    """Whether one contender (of those that ran) was faster than every other in every round."""
    ok = [ts for ts, e in zip(times, errors) if e is None and ts]
    if len(ok) < 2:
        return True
    n = min(len(ts) for ts in ok)
    for lead in ok:
        if all(all(lead[j] < other[j] for j in range(n)) for other in ok if other is not lead):
            return True
    return False


def timers(tuner: Any) -> tuple[Callable, Callable, Callable | None, Callable | None]:
    """(timer, run-off timer, probe timer, timer after a probe): the injected timer, the user's
    do_bench, warmup/rep, or Triton's benchmarker (a shorter one for the interleaved run-off
    rounds, which also probes each config first, then the full one less its warm-up:
    `CallEvaluator`). A timer the user brought is used as it is, with no probe."""
    if tuner._timer is not None:
        return tuner._timer, tuner._timer, None, None
    if tuner._do_bench is not None:
        return bench_timer(tuner._do_bench), bench_timer(tuner._do_bench), None, None
    if interpreted(tuner.fn):
        return bench_timer(wall_clock_bench), bench_timer(wall_clock_bench), None, None
    import triton.testing as tt

    if tuner.use_cuda_graph:
        cg = lambda f, quantiles: tt.do_bench_cudagraph(f, rep=tuner.num_reps or 100, quantiles=quantiles)  # noqa: E731
        return bench_timer(cg), bench_timer(cg), None, None
    rep = tuner.num_reps or 100
    full = lambda f, quantiles: tt.do_bench(f, warmup=tuner.num_warmups or 25, rep=rep,  # noqa: E731
                                            quantiles=quantiles)
    short = lambda f, quantiles: tt.do_bench(f, warmup=5, rep=20, quantiles=quantiles)  # noqa: E731
    # after a probe (25 ms of this config's runs): one warm-up run, as do_bench takes at least one
    warm = lambda f, quantiles: tt.do_bench(f, warmup=0, rep=rep, quantiles=quantiles)  # noqa: E731
    return bench_timer(full), bench_timer(short), bench_timer(short), bench_timer(warm)


_TOL = {"fp16": 1e-2, "bf16": 2e-2, "fp32": 1e-4, "fp64": 1e-8}


def _tolerance(dtype: Any, tol: float | None) -> float:
    """The relative error allowed: `tol` (the user's `reference_tol`), else by `dtype`."""
    return tol if tol is not None else _TOL.get(dtype_name(dtype), 1e-2)


def _differs(name: str, out: Any, expected: Any, tol: float | None) -> str | None:
    """`_compare` where non-finite values must match in place (a buffer's unwritten tail may
    hold NaN from before the call, the same for every config) and only finite ones are compared."""
    import torch

    if tuple(out.shape) != tuple(expected.shape):
        return f"{name}: shape {tuple(out.shape)}, expected {tuple(expected.shape)}"
    if out.numel() == 0:
        return None
    limit = _tolerance(out.dtype, tol)
    if out.dtype.is_floating_point and out.element_size() == 1:
        # fp8 has no isfinite, equal or arithmetic in torch: compared in fp32, at fp8's tolerance
        out, expected = out.float(), expected.float()
    fin = torch.isfinite(expected)
    if not torch.equal(torch.isfinite(out), fin):
        return f"{name}: non-finite values where the kernel's own config gives finite ones, or the reverse"
    if bool(fin.all()):
        return _compare(name, out, expected, limit)
    return _compare(name, out[fin], expected[fin], limit)


def _compare(name: str, out: Any, expected: Any, tol: float | None) -> str | None:
    """Why `out` differs from `expected` (relative L2 error over the tolerance of its dtype)."""
    import torch

    exp = torch.as_tensor(expected).to(out.device)
    if tuple(exp.shape) != tuple(out.shape):
        return f"{name}: shape {tuple(out.shape)}, expected {tuple(exp.shape)}"
    a, b = out.double(), exp.double()
    err = float((a - b).norm() / b.norm().clamp_min(1e-30))
    limit = _tolerance(out.dtype, tol)
    if not err <= limit:  # NaN counts as wrong
        return f"{name}: relative error {err:.3g} > {limit:g}"
    return None
