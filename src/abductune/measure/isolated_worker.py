"""The worker side of `isolate=True` (measure/isolated.py): the main loop of the measuring
process and what it rebuilds. It imports torch and triton only when it runs, so the caller
can import this module for the framing and `TensorCopy`.
"""
from __future__ import annotations

import os
import pickle
import struct
import sys
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..measurement import Measurement, Status


def frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return struct.pack("<Q", len(data)) + data


def read_frame(f: Any) -> Any:
    head = f.read(8)
    if len(head) < 8:
        return None
    (n,) = struct.unpack("<Q", head)
    return pickle.loads(f.read(n))


@dataclass(frozen=True)
class TensorCopy:
    """A tensor argument in host memory (dense), rebuilt in the worker with its strides on its device."""

    data: Any
    stride: tuple[int, ...]
    device: str

    def rebuild(self) -> Any:
        import torch

        t = torch.empty_strided(tuple(self.data.shape), self.stride, dtype=self.data.dtype, device=self.device)
        try:
            return t.copy_(self.data)
        except RuntimeError:  # overlapping strides (an expanded tensor): a dense copy behaves alike
            return self.data.to(self.device)


def _decode(v: Any, memo: dict) -> Any:
    if isinstance(v, TensorCopy):
        if id(v) not in memo:
            memo[id(v)] = v.rebuild()
        return memo[id(v)]
    return v


class _Worker:
    """The caller's call rebuilt in the worker: arguments on their devices, the autotuner's
    hooks, timer and reference, and `Autotuner._evaluator` measuring as in-process."""

    def __init__(self, setup: Mapping[str, Any]):
        import importlib

        import torch

        from ..autotune import Autotuner

        class WorkerTuner(Autotuner):
            """The caller chooses each trial's config hook and grid."""

            hook: Any = None
            grid: Any = None

            def _config_hook(self, config: Mapping[str, Any]) -> Callable | None:
                return self.hook

        mod, qual = setup["target"].split(":")
        fn: Any = importlib.import_module(mod)
        for part in qual.split("."):
            fn = getattr(fn, part)
        for _ in range(setup["hops"]):
            fn = fn.fn
        if setup["device"] is not None:
            torch.cuda.set_device(setup["device"])
        memo: dict = {}
        args = tuple(_decode(a, memo) for a in setup["args"])
        call_kw = {k: _decode(v, memo) for k, v in setup["kwargs"].items()}
        self.cuda = any(isinstance(t, torch.Tensor) and t.is_cuda for t in memo.values())
        self.tuner = tuner = WorkerTuner(fn, configs=None, key=(), store=":memory:", compile="serial",
                                         **setup["tuner"])
        nargs = dict(zip(tuner.arg_names, args))
        full = {**nargs, **call_kw}
        saved = {n: full[n].clone() for n in tuner.restore_value if full.get(n) is not None}
        kwargs = {**call_kw, "grid": lambda meta: tuner.grid, "warmup": setup["warmup"]}
        self.ev = tuner._evaluator(setup["problem"], args, kwargs, nargs, saved)

    def measure(self, msg: Mapping[str, Any]) -> Measurement:
        self.tuner.hook, self.tuner.grid = msg["hook"], msg["grid"]
        if msg["op"] == "remeasure":
            return self.ev.remeasure([msg["config"]])[0]
        return self.ev.evaluate([msg["config"]])[0]

    def broken(self, m: Measurement) -> bool:
        """Whether a failed config left the CUDA context unusable (later configs would fail too)."""
        if m.status is not Status.RUNTIME_ERROR or not self.cuda:
            return False
        from .worker import _STICKY

        if any(s.lower() in m.error.lower() for s in _STICKY):
            return True
        import torch

        try:
            torch.cuda.synchronize()
            return False
        except Exception:  # noqa: BLE001
            return True


def serve() -> None:
    """The worker's main loop: "ready" once torch and triton are imported, the setup, then one
    config per request, one answer each (length-prefixed pickles on stdin/stdout). Anything
    the kernel or the hooks print goes to stderr, which the caller shows."""
    import faulthandler

    faulthandler.enable()  # a segfault prints the Python stack the caller quotes
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    import torch  # noqa: F401 - the slow part of starting, done before saying ready
    import triton  # noqa: F401

    def send(obj: Any) -> None:
        out.write(frame(obj))
        out.flush()
    send({"ready": True})
    inp = sys.stdin.buffer
    try:
        worker = _Worker(read_frame(inp))
    except Exception as e:  # noqa: BLE001 - reported to the caller, who raises it
        send({"error": f"{type(e).__name__}: {e}"[:4000]})
        return
    send({"ok": True})
    while (msg := read_frame(inp)) is not None:
        m = worker.measure(msg)
        restart = worker.broken(m)
        send({"measurement": m, "restart": restart})
        if restart:
            return
