"""Compile planning and the compile pool: whether worker processes can import the kernel, and a
pool of them that fills Triton's cache with the next configs while this process measures."""
from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any, Callable, Mapping, Sequence

from ..space import Config
from ..store import config_key
from .configs import LAUNCH_KW, launch_kwargs
from .keys import python_fn

log = logging.getLogger(__name__)


def interpreted(fn: Any) -> bool:
    for _ in range(16):
        if fn is None:
            return False
        if type(fn).__name__ == "InterpretedFunction":
            return True
        fn = getattr(fn, "fn", None)
    return False


def compile_plan(autotuner: Any, requested: str = "auto") -> tuple[str, str]:
    """("parallel", "module:qualname") when worker processes can import the kernel and warm
    Triton's cache, else ("serial", why). Decided at the first miss: by then the module-level
    name is bound, so a worker can look it up."""
    if requested == "serial":
        return "serial", "compile='serial'"
    if interpreted(autotuner.fn):
        return "serial", "Triton's interpreter (TRITON_INTERPRET=1) compiles nothing"
    base = autotuner.base_fn
    mod, qual = base.__module__, base.__qualname__
    if mod in (None, "__main__") or "<locals>" in qual:
        where = "inside a function" if "<locals>" in qual else "in __main__ (a script or a notebook)"
        return "serial", f"{base.__name__} is defined {where}, where worker processes cannot import it"
    module = sys.modules.get(mod)
    if module is None or not getattr(module, "__file__", None):
        return "serial", f"module {mod} has no file that worker processes could import"
    obj: Any = module
    for part in qual.split("."):
        obj = getattr(obj, part, None)
    if python_fn(obj) is not base:
        return "serial", f"{mod}.{qual} does not name this kernel"
    return "parallel", f"{mod}:{qual}"


def _encode(v: Any) -> Any:
    """An argument as something a worker can rebuild for a compile-only call (a tensor as its
    dtype, which Triton's `warmup` accepts); raises TypeError when it cannot."""
    if hasattr(v, "data_ptr") and hasattr(v, "dtype"):
        return ("__dtype__", str(v.dtype))
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise TypeError(f"argument of type {type(v).__name__} cannot be sent to a compile worker")


def _decode(v: Any) -> Any:
    if isinstance(v, (tuple, list)) and len(v) == 2 and v[0] == "__dtype__":  # JSON turns tuples to lists
        import torch

        return getattr(torch, v[1].replace("torch.", ""))
    return v


def _warm_worker(target: str, args: list[Any], kwargs: dict[str, Any], config: dict[str, Any]) -> None:
    """In a worker process: compile one config (Triton's `warmup`), filling Triton's cache."""
    import importlib

    mod, qual = target.split(":")
    obj: Any = importlib.import_module(mod)
    for part in qual.split("."):
        obj = getattr(obj, part)
    while type(obj).__name__ == "Autotuner":  # ours or Triton's: compile what it wraps
        obj = obj.fn
    obj.warmup(*[_decode(a) for a in args], grid=(1,), **{k: _decode(v) for k, v in kwargs.items()}, **config)


def compile_server() -> None:
    """A compile worker's main loop: "ready" once Triton is imported, then one JSON job per
    stdin line and one JSON answer per line. Started as `python -c` (not multiprocessing,
    whose spawn would re-run the caller's unguarded script in every worker); anything the
    compiler prints goes to stderr."""
    import importlib
    import json

    importlib.import_module("triton")  # the slow part of starting, done before saying ready

    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    answer.write('{"ready": true}\n')
    answer.flush()
    for line in sys.stdin:
        job = json.loads(line)
        try:
            _warm_worker(job["target"], job["args"], job["kwargs"], job["config"])
            out: dict[str, Any] = {"ok": True}
        except Exception as e:  # noqa: BLE001 - reported to the caller, who compiles it itself
            out = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}
        answer.write(json.dumps(out) + "\n")
        answer.flush()


class CompilePool:
    """`workers` compile processes, started at once, fed from one queue; `submit(job)` returns
    a Future at once; `ready` counts the workers that have finished starting."""

    def __init__(self, workers: int):
        import queue

        self.jobs: Any = queue.Queue()
        self.procs: list[Any] = []
        self.ready = 0
        self._lock = threading.Lock()
        for i in range(workers):
            threading.Thread(target=self._serve, name=f"abductune-compile-{i}", daemon=True).start()

    def submit(self, job: Mapping[str, Any]) -> Any:
        from concurrent.futures import Future

        f: Any = Future()
        self.jobs.put((dict(job), f))
        return f

    def _start(self) -> Any:
        import subprocess

        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        proc = subprocess.Popen([sys.executable, "-c", "from abductune.autotune.compiling import compile_server; "
                                 "compile_server()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env, text=True)
        with self._lock:
            self.procs.append(proc)
        if not proc.stdout.readline():  # "ready", or the worker could not start
            raise RuntimeError(f"compile worker exited ({proc.wait()})")
        return proc

    def _serve(self) -> None:
        import json

        try:
            proc = self._start()
        except Exception as e:  # noqa: BLE001 - without workers every config compiles in the caller
            log.info("compile worker did not start: %s", e)
            return
        with self._lock:
            self.ready += 1
        while True:
            job, f = self.jobs.get()
            if not f.set_running_or_notify_cancel():
                continue
            try:
                proc.stdin.write(json.dumps(job) + "\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"compile worker exited ({proc.wait()})")
                f.set_result(json.loads(line))
            except Exception as e:  # noqa: BLE001 - the config compiles in the caller instead
                f.set_exception(e)
                if proc.poll() is not None:
                    with self._lock:
                        self.ready -= 1
                    return

    def close(self) -> None:
        with self._lock:
            for p in self.procs:
                if p.poll() is None:
                    p.kill()


_POOL: CompilePool | None = None
_POOL_LOCK = threading.Lock()


def compile_pool() -> CompilePool:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            import atexit

            _POOL = CompilePool(max(1, min(8, (os.cpu_count() or 2) - 1)))
            atexit.register(_POOL.close)
        return _POOL


def parallel_warm(target: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Callable[[list[Config]], None] | None:
    """A `warm(configs)` that hands each config to a compile worker and returns at once: the
    measuring loop goes on in this process, and each config's first launch finds Triton's
    cache filled by a worker, or compiles it here if the worker is not done (so a pool that
    is still starting never makes the first call slower than compiling serially)."""
    try:
        a = [_encode(x) for x in args]
        kw = {k: _encode(v) for k, v in kwargs.items() if k not in LAUNCH_KW}
    except TypeError as e:
        log.info("compiling serially: %s", e)
        return None

    def done(f: Any) -> None:
        err = f.exception() or (None if f.result().get("ok") else f.result().get("error"))
        if err:  # the config's own launch reports the error
            log.debug("compile worker: %s", err)

    submitted: set[str] = set()

    def warm(configs: list[Config]) -> None:
        pool = compile_pool()
        if not pool.ready:  # still starting: this config compiles here, later ones may not
            return
        for c in configs:
            k = config_key(c)
            if k not in submitted:
                submitted.add(k)
                job = {"target": target, "args": a, "kwargs": kw, "config": launch_kwargs(c)}
                pool.submit(job).add_done_callback(done)
    return warm
