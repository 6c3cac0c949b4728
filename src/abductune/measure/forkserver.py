"""How the live evaluator's worker processes start: forked from one server that imported torch,
Triton and the kernels once (the benchmark worker and every compile worker come from it)."""
from __future__ import annotations

import multiprocessing as mp
from typing import Any


def _server_context() -> Any:
    """Workers fork from a server that imported torch, Triton and the kernels once and never
    touched CUDA (forkserver with preload): 16 compile workers and the benchmark worker start
    in about one import's time instead of 17 imports contending for the CPU. Each gets the
    parent's current environment and sys.path at start (the server holds the ones it started
    with). Spawn where there is no forkserver (Windows)."""
    try:
        ctx = mp.get_context("forkserver")
    except ValueError:
        return mp.get_context("spawn")
    ctx.set_forkserver_preload(["abductune.measure.worker_preload"])
    return ctx


def prestart() -> None:
    """Start the workers' fork server now, so its imports run while this process does its
    own (a live tune calls this first thing when a GPU is visible)."""
    ctx = _server_context()
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()
