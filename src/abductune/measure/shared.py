"""One benchmark worker and one compile pool per process, kept across tunes (the daemon's API:
start them, free the worker's buffers between commands, stop them)."""
from __future__ import annotations

import logging
from typing import Any

from .bench_client import BenchWorker, WorkerLost
from .compile_pool import Compiler

# the logger keeps live.py's name from before the split: the CLI's `WARNING name:` lines stay
log = logging.getLogger("abductune.measure.live")

_SHARED: dict[str, Any] = {}


def shared_processes(compile_workers: int | None = None) -> tuple["BenchWorker", "Compiler"]:
    """One benchmark worker and one compile pool per process, kept across shapes and kernels
    (starting them costs seconds: a CUDA context each). Closed at exit."""
    if "worker" not in _SHARED:
        import atexit

        _SHARED["worker"] = BenchWorker()
        _SHARED["compiler"] = Compiler(compile_workers)
        atexit.register(close_shared)
    return _SHARED["worker"], _SHARED["compiler"]


def release_shared() -> None:
    """Free the shared benchmark worker's problem buffers (GPU memory) and keep the worker:
    what a daemon does between commands. The next tune's setup allocates its own."""
    w = _SHARED.get("worker")
    if w is not None and w.proc is not None and w.proc.is_alive():
        try:
            w.request({"op": "release"}, timeout=30)
            w._setup_msg = None  # a restart must not set the released problem up again
        except WorkerLost as e:
            log.warning("releasing the benchmark worker's buffers failed: %s", e.error)


def close_shared(kill: bool = False) -> None:
    """Stop the shared workers; `kill`: without waiting for a benchmark or compile under way
    (a cancelled command's). The next live tune starts new ones."""
    w, c = _SHARED.pop("worker", None), _SHARED.pop("compiler", None)
    if w is not None and kill:
        w.kill()
    elif w is not None:
        w.close()
    if c is not None:
        c.shutdown(kill=kill)
