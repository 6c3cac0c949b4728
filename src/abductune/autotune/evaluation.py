"""A kernel call as an evaluator: one `Launch` per config with the autotuner's hooks around it,
the reference check and the timer; what `Autotuner._tune` measures with, in this process or
(isolate=True) in the measuring worker, which rebuilds the call and measures with this too."""
from __future__ import annotations

import os
from typing import Any, Callable, Mapping

from ..errors import AbductuneError
from ..measure.base import Evaluator
from ..measure.inprocess import InProcessEvaluator, Launch, bench_timer, wall_clock_bench
from ..problem import Problem
from ..space import Config, Space
from ..theory.resources import infeasible
from .configs import LAUNCH_KW, launch_kwargs, triton_config
from .keys import dtype_name, interpreted

PRINT_ENV = "ABDUCTUNE_PRINT_AUTOTUNING"


def printing() -> bool:
    """Whether to print each measurement and the chosen config (Triton's TRITON_PRINT_AUTOTUNING)."""
    return os.environ.get(PRINT_ENV, "") == "1" or os.environ.get("TRITON_PRINT_AUTOTUNING", "") == "1"


def call_evaluator(tuner: Any, problem: Problem, args: tuple, kwargs: dict, nargs: dict[str, Any],
                   saved: Mapping[str, Any], space: Space | None = None) -> Evaluator:
    """The caller's call as an evaluator over `space` (the autotuner's, or a missed key's own):
    one Launch per config, the hooks around it (with isolate=True, the same built in a worker
    process on copies of the arguments). A config beyond the list is measured only when the
    resource model sees no reason it cannot launch and the kernel's `early_config_prune` keeps it."""
    space = tuner.space if space is None else space

    def prune(cfg: Config) -> str | None:
        if "impl" in cfg or any(cfg == d for d in tuner._list):
            return None  # the list was pruned before it became the seeds
        why = infeasible(problem, space, cfg)
        if why:
            return f"the resource model: {why}"
        if tuner.early_config_prune is not None and not tuner.early_config_prune(
                [triton_config(cfg)], dict(nargs), **kwargs):
            return "early_config_prune rejected it"
        return None
    if tuner.isolate:
        from .isolation import evaluator_for

        return evaluator_for(tuner, problem, args, kwargs, nargs, prune, space)
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

        def before() -> None:
            if hook is not None:
                hook(full)
            tuner.pre_hook(full)
        return Launch(lambda: tuner.fn.run(*args, **kwargs, **ckw), before, lambda e: tuner._post(full, e, saved))

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
    timer, retimer = timers(tuner)
    return InProcessEvaluator(problem, space, launch, timer, check=check, prune=prune,
                              remeasure_timer=retimer, verbose=printing())


def timers(tuner: Any) -> tuple[Callable, Callable]:
    """(timer, run-off timer): the injected timer, the user's do_bench, warmup/rep, or
    Triton's benchmarker (a shorter one for the interleaved run-off rounds)."""
    if tuner._timer is not None:
        return tuner._timer, tuner._timer
    if tuner._do_bench is not None:
        return bench_timer(tuner._do_bench), bench_timer(tuner._do_bench)
    if interpreted(tuner.fn):
        return bench_timer(wall_clock_bench), bench_timer(wall_clock_bench)
    import triton.testing as tt

    if tuner.use_cuda_graph:
        cg = lambda f, quantiles: tt.do_bench_cudagraph(f, rep=tuner.num_reps or 100, quantiles=quantiles)  # noqa: E731
        return bench_timer(cg), bench_timer(cg)
    full = lambda f, quantiles: tt.do_bench(f, warmup=tuner.num_warmups or 25, rep=tuner.num_reps or 100,  # noqa: E731
                                            quantiles=quantiles)
    short = lambda f, quantiles: tt.do_bench(f, warmup=5, rep=20, quantiles=quantiles)  # noqa: E731
    return bench_timer(full), bench_timer(short)


_TOL = {"fp16": 1e-2, "bf16": 2e-2, "fp32": 1e-4, "fp64": 1e-8}


def _compare(name: str, out: Any, expected: Any, tol: float | None) -> str | None:
    """Why `out` differs from `expected` (relative L2 error over the tolerance of its dtype)."""
    import torch

    exp = torch.as_tensor(expected).to(out.device)
    if tuple(exp.shape) != tuple(out.shape):
        return f"{name}: shape {tuple(out.shape)}, expected {tuple(exp.shape)}"
    a, b = out.double(), exp.double()
    err = float((a - b).norm() / b.norm().clamp_min(1e-30))
    limit = tol if tol is not None else _TOL.get(dtype_name(out.dtype), 1e-2)
    if not err <= limit:  # NaN counts as wrong
        return f"{name}: relative error {err:.3g} > {limit:g}"
    return None
