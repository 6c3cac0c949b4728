"""The autotuner's side of isolate=True (measure/isolated.py measures in a worker process): what
the worker rebuilds the autotuner from, each trial's config hook and grid, and the evaluator of
one call. The worker runs `abductune.autotune.isolated_worker:serve`, named here as data: the
measure layer starts the process it is given and imports nothing from the front door."""
from __future__ import annotations

import inspect
import sys
from typing import Any, Callable, Mapping

from ..measure.isolated import IsolatedEvaluator, encode, importable, kernel_target
from ..problem import Problem
from ..space import Config, Space
from .configs import launch_kwargs

# the worker process's entry point (module:function): it rebuilds the autotuner around the call
WORKER_ENTRY = "abductune.autotune.isolated_worker:serve"


def worker_spec(tuner: Any) -> dict[str, Any]:
    """What the worker rebuilds the autotuner from; raises AbductuneError for the kernel or a
    callable it cannot import. Pruning (`prune_configs_by`) stays in the caller."""
    target, hops = kernel_target(tuner)
    user_pre = tuner.pre_hook if tuner.user_defined_pre_hook else None
    options = {"pre_hook": user_pre, "post_hook": tuner.post_hook, "do_bench": tuner._do_bench,
               "timer": tuner._timer, "reference": tuner.reference}
    for what, f in options.items():
        if f is not None:
            importable(f, what)
    for n, f in tuner.implementations.items():
        importable(f, f"implementation {n!r}")
    for d, h in tuner._hooks:
        if h is not None:
            importable(h, f"pre_hook of config {d}")
    return {"target": target, "hops": hops, "tuner": {
        **options, "arg_names": list(tuner.arg_names), "reset_to_zero": list(tuner.reset_to_zero),
        "restore_value": list(tuner.restore_value), "warmup": tuner.num_warmups, "rep": tuner.num_reps,
        "use_cuda_graph": tuner.use_cuda_graph, "reference_tol": tuner.reference_tol,
        "implementations": dict(tuner.implementations), "name": tuner.name}}


def trials(tuner: Any, nargs: Mapping[str, Any], kwargs: Mapping[str, Any]) -> Callable[[Config], dict]:
    """config -> what the worker needs besides it: the config-level pre_hook and the grid,
    evaluated here as Triton would (arguments with defaults, the config's meta-parameters,
    then any @triton.heuristics values between the autotuner and the kernel)."""
    grid = kwargs.get("grid")
    call_kw = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
    params = inspect.signature(tuner.base_fn).parameters.values()
    defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
    heuristics, f = [], tuner.fn
    for _ in range(16):
        if f is None:
            break
        if type(f).__name__ == "Heuristics" and isinstance(getattr(f, "values", None), Mapping):
            heuristics.append(f.values)
        f = getattr(f, "fn", None)

    def trial(cfg: Config) -> dict:
        if "impl" in cfg:
            return {"hook": None, "grid": None}
        g = grid
        if callable(grid):
            meta = {**defaults, **nargs, **call_kw, **launch_kwargs(cfg)}
            for values in heuristics:
                for n, h in values.items():
                    meta[n] = h(meta)
            g = grid(meta)
        return {"hook": tuner._config_hook(cfg), "grid": g}
    return trial


def evaluator_for(tuner: Any, problem: Problem, args: tuple, kwargs: Mapping[str, Any], nargs: Mapping[str, Any],
                  prune: Callable[[Config], str | None] | None, space: Space | None = None) -> IsolatedEvaluator:
    """The isolated evaluator of one call of `tuner` (whose `worker_spec` was checked)."""
    memo: dict = {}
    names = list(tuner.arg_names)
    enc_args = [encode(names[i] if i < len(names) else f"#{i}", a, memo) for i, a in enumerate(args)]
    enc_kw = {k: encode(k, v, memo) for k, v in kwargs.items() if k not in ("grid", "warmup")}
    device = None
    torch = sys.modules.get("torch")
    if torch is not None and any(isinstance(a, torch.Tensor) and a.is_cuda for a in (*args, *kwargs.values())):
        device = torch.cuda.current_device()  # the caller's current device, where Triton launches
    setup = {**worker_spec(tuner), "problem": problem, "args": enc_args, "kwargs": enc_kw,
             "warmup": kwargs.get("warmup", False), "device": device}
    trial = trials(tuner, nargs, kwargs)
    if tuner.reference is None and tuner._list:
        # the worker checks configs beyond the list against the list's first config (`ListCheck`),
        # as in-process: it needs the list, and that config's own hook and grid to launch it with
        setup["list"] = [dict(d) for d in tuner._list]
        setup["first_trial"] = trial(tuner._list[0])
    return IsolatedEvaluator(problem, tuner.space if space is None else space, setup, trial,
                             entry=WORKER_ENTRY, prune=prune, timeout_s=tuner.isolate_timeout_s)
