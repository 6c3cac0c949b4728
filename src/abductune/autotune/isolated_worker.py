"""The measuring worker of isolate=True, the autotuner's side: the caller's call rebuilt around an
autotuner in the worker process. measure/isolated_worker.py runs the loop (framing, requests,
restarts); this module is what the caller names as the worker's entry point (WORKER_ENTRY in
isolation.py), so the measure layer never imports the autotuner."""
from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping

from ..measure import isolated_worker as loop
from ..measurement import Measurement, Status
from ..space import config_id
from .autotuner import Autotuner
from .evaluation import call_evaluator


class WorkerTuner(Autotuner):
    """The caller chooses each trial's config hook and grid. A launch of a config the caller has
    sent (or the list's first, which the list check launches between requests) takes that
    config's own; any other the current request's."""

    hook: Any = None
    grid: Any = None
    trials: dict[str, dict[str, Any]]  # config -> its hook and grid

    def _config_hook(self, config: Mapping[str, Any]) -> Callable | None:
        t = getattr(self, "trials", {}).get(config_id(config))  # set by _Worker once the tuner is built
        if t is None:
            return self.hook
        self.grid = t["grid"]  # read when the launch runs, which follows this at once
        return t["hook"]


class _Worker:
    """The caller's call rebuilt in the worker: arguments on their devices, the autotuner's
    hooks, timer and reference, and `call_evaluator` measuring as in-process."""

    def __init__(self, setup: Mapping[str, Any]):
        import os

        import torch

        from .compile_workers import POOL_ENV

        os.environ[POOL_ENV] = "miss"  # the kernel's module, imported here, must not start a compile pool
        mod, qual = setup["target"].split(":")
        fn: Any = importlib.import_module(mod)
        for part in qual.split("."):
            fn = getattr(fn, part)
        for _ in range(setup["hops"]):
            fn = fn.fn
        if setup["device"] is not None:
            torch.cuda.set_device(setup["device"])
        memo: dict = {}
        args = tuple(loop.decode(a, memo) for a in setup["args"])
        call_kw = {k: loop.decode(v, memo) for k, v in setup["kwargs"].items()}
        self.cuda = any(isinstance(t, torch.Tensor) and t.is_cuda for t in memo.values())
        self.tuner = tuner = WorkerTuner(fn, configs=None, key=(), store=":memory:", compile="serial",
                                         **setup["tuner"])
        # the caller's list, sent where the list check runs (no reference of the user's: `ListCheck`
        # as in-process, isolation.py); else none: the tuner built here has a one-config default
        # list of its own, which the check would take for the author's
        tuner._list = [dict(d) for d in setup.get("list") or ()]
        tuner.trials = {config_id(tuner._list[0]): setup["first_trial"]} if tuner._list else {}
        nargs = dict(zip(tuner.arg_names, args))
        full = {**nargs, **call_kw}
        saved = {n: full[n].clone() for n in tuner.restore_value if full.get(n) is not None}
        kwargs = {**call_kw, "grid": lambda meta: tuner.grid, "warmup": setup["warmup"]}
        self.ev = call_evaluator(tuner, setup["problem"], args, kwargs, nargs, saved)

    def measure(self, msg: Mapping[str, Any]) -> Measurement:
        self.tuner.hook, self.tuner.grid = msg["hook"], msg["grid"]
        self.tuner.trials[config_id(msg["config"])] = {"hook": msg["hook"], "grid": msg["grid"]}
        if msg["op"] == "remeasure":
            return self.ev.remeasure([msg["config"]])[0]
        return self.ev.evaluate([msg["config"]])[0]

    def broken(self, m: Measurement) -> bool:
        """Whether a failed config left the CUDA context unusable (later configs would fail too)."""
        if m.status is not Status.RUNTIME_ERROR or not self.cuda:
            return False
        from ..measure.worker import _STICKY

        if any(s.lower() in m.error.lower() for s in _STICKY):
            return True
        import torch

        try:
            torch.cuda.synchronize()
            return False
        except Exception:  # noqa: BLE001
            return True


def serve() -> None:
    """The worker process's entry point: measure/isolated_worker's loop around `_Worker`."""
    loop.serve(_Worker)
