"""The worker side of `isolate=True` (measure/isolated.py): the main loop of the measuring
process, the framing, and `TensorCopy`. What rebuilds the caller's call in the worker is
given to `serve` by the entry point the caller names (the decorator's:
abductune/autotune/isolated_worker.py), so this layer imports no front door. It imports torch
and triton only when it runs, so the caller can import this module for the framing.
"""
from __future__ import annotations

import os
import pickle
import struct
import sys
from dataclasses import dataclass
from typing import Any, Callable, Mapping


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


def decode(v: Any, memo: dict) -> Any:
    """An argument as the worker uses it (a `TensorCopy` rebuilt once, however often it is passed)."""
    if isinstance(v, TensorCopy):
        if id(v) not in memo:
            memo[id(v)] = v.rebuild()
        return memo[id(v)]
    return v


def serve(build: Callable[[Mapping[str, Any]], Any]) -> None:
    """The worker's main loop: "ready" once torch and triton are imported, the setup, then one
    config per request, one answer each (length-prefixed pickles on stdin/stdout). Anything
    the kernel or the hooks print goes to stderr, which the caller shows. `build(setup)`
    rebuilds the call; it has `measure(request) -> Measurement` and `broken(measurement)`
    (whether the worker must restart)."""
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
        worker = build(read_frame(inp))
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
