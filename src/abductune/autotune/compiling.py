"""Compile planning and the compile pool: whether worker processes can import the kernel, and a
pool of them that fills Triton's cache with the next configs while this process measures.

A worker compiles what the autotuner launches (the object under the autotuner: the @triton.jit
function, or @triton.heuristics between them, which the worker applies as the launch would), with
the call's arguments as stand-ins: a tensor as its dtype, shape and pointer alignment, a tensor
descriptor rebuilt around such a stand-in, torch and Triton dtypes as themselves, and the values
that @triton.heuristics *above* the autotuner computed in the caller (never computed again). A job
that fails for a reason other than the config itself (the worker cannot build the call) is
reported once, and the kernel's configs compile in the caller from then on."""
from __future__ import annotations

import inspect
import logging
import os
import sys
import threading
from typing import Any, Callable, Mapping, Sequence

from ..measure.inprocess import _COMPILE, _RESOURCE
from ..space import Config
from ..store import config_key
from .configs import LAUNCH_KW, launch_kwargs
from .keys import interpreted, is_descriptor, python_fn

log = logging.getLogger(__name__)


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
    if python_fn(obj, any_wrapper=True) is not base:  # a library's own wrapper (@libentry) counts too
        return "serial", f"{mod}.{qual} does not name this kernel"
    tuner, under = _launched(obj)
    if tuner is None and under is not autotuner.fn and not inspect.isfunction(getattr(autotuner.fn, "fn", None)):
        # the name is the bare kernel, and the autotuner was built over a wrapper of it where it is
        # called (triton.heuristics(...)(kernel)): a worker would compile the kernel without it
        return "serial", (f"{mod}.{qual} is the kernel without the {type(autotuner.fn).__name__} this autotuner "
                          "launches, which worker processes cannot rebuild")
    return "parallel", f"{mod}:{qual}"


def _encode(v: Any) -> Any:
    """An argument as something a worker can rebuild for a compile-only call (JSON): a tensor as
    its dtype, shape and pointer alignment, a tensor descriptor as its fields around such a
    tensor, a torch or Triton dtype by name, tuples of these; raises TypeError when it cannot."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if hasattr(v, "data_ptr") and hasattr(v, "dtype"):
        shape = [int(d) for d in getattr(v, "shape", [1])]
        return {"tensor": str(v.dtype), "shape": shape, "align": int(v.data_ptr()) % 16}
    if is_descriptor(v):
        import dataclasses

        fields = {f.name: getattr(v, f.name) for f in dataclasses.fields(v)} if dataclasses.is_dataclass(v) else {}
        fields.pop("base", None)
        if any(not isinstance(x, (bool, int, float, str, list, tuple, type(None))) for x in fields.values()):
            raise TypeError(f"a {type(v).__module__}.{type(v).__name__} argument cannot be sent to a compile worker")
        return {"descriptor": f"{type(v).__module__}:{type(v).__qualname__}", "base": _encode(v.base),
                "fields": {k: list(x) if isinstance(x, tuple) else x for k, x in fields.items()}}
    kind = type(v)
    if kind.__name__ == "dtype" and kind.__module__ == "torch":
        return {"torch_dtype": str(v).replace("torch.", "")}
    if kind.__name__ == "dtype" and kind.__module__.startswith("triton"):
        return {"tl_dtype": str(v)}
    if isinstance(v, (tuple, list)):
        return {"tuple": [_encode(x) for x in v]}
    raise TypeError(f"an argument of type {kind.__name__} cannot be sent to a compile worker")


def _decode(v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    if "tensor" in v:
        import torch
        from triton.runtime.jit import MockTensor

        class StandIn(MockTensor):  # Triton's own stand-in, with the tensor's alignment
            def __init__(self, dtype: Any, shape: Any, align: int):
                super().__init__(dtype, list(shape))
                self.align = align

            def data_ptr(self) -> int:  # type: ignore[override]
                return self.align

        return StandIn(getattr(torch, v["tensor"].replace("torch.", "")), v["shape"], v["align"])
    if "descriptor" in v:
        import importlib

        mod, qual = v["descriptor"].split(":")
        cls: Any = importlib.import_module(mod)
        for part in qual.split("."):
            cls = getattr(cls, part)
        return cls(_decode(v["base"]), **v["fields"])
    if "torch_dtype" in v:
        import torch

        return getattr(torch, v["torch_dtype"])
    if "tl_dtype" in v:
        import triton.language as tl

        return tl.dtype(v["tl_dtype"])
    if "tuple" in v:
        return tuple(_decode(x) for x in v["tuple"])
    return v


def _launched(obj: Any) -> tuple[Any, Any]:
    """(autotuner, what it launches) in the chain from `obj` (a module-level name: the autotuner,
    a @triton.heuristics or a library's wrapper above it): the object under the autotuner."""
    from triton.runtime.autotuner import Autotuner

    for _ in range(16):
        if isinstance(obj, Autotuner):  # Triton's, a library's subclass, or abductune's
            return obj, obj.fn
        nxt = getattr(obj, "fn", None)
        if nxt is None or inspect.isfunction(nxt):
            break
        obj = nxt
    return None, obj


def _config_pre_hook(tuner: Any, config: Mapping[str, Any]) -> Any:
    """The list config's own pre_hook for `config` (else the list's first hook: hooks such as
    setting descriptors' block shapes from the tile are the same for the whole list)."""
    hooked = [c for c in getattr(tuner, "configs", ()) if getattr(c, "pre_hook", None) is not None]
    for c in hooked:
        if {**c.kwargs, **{k: getattr(c, k, None) for k in config if k not in c.kwargs}} == dict(config):
            return c.pre_hook
    return hooked[0].pre_hook if hooked else None


def _warm_worker(target: str, args: list[Any], kwargs: dict[str, Any], config: dict[str, Any]) -> None:
    """In a worker process: compile one config (a launch with warmup=True), filling Triton's
    cache: the arguments are stand-ins, the kwargs hold what heuristics above the autotuner
    computed in the caller, and heuristics below it run here as the launch runs them. The
    config's pre_hook runs first on the stand-ins, as before the real launch (Liger and Triton's
    TMA tutorials set the descriptors' block shapes there); one that cannot (it zeroes a tensor)
    is skipped."""
    import importlib

    mod, qual = target.split(":")
    obj: Any = importlib.import_module(mod)
    for part in qual.split("."):
        obj = getattr(obj, part)
    tuner, fn = _launched(obj)
    a = [_decode(x) for x in args]
    kw = {k: _decode(v) for k, v in kwargs.items()}
    hook = _config_pre_hook(tuner, config) if tuner is not None else None
    if hook is not None:
        try:
            hook({**dict(zip(getattr(fn, "arg_names", ()), a)), **kw, **config})
        except Exception:  # noqa: BLE001 - a hook that needs real tensors; the launch may still compile
            pass
    fn.run(*a, grid=(1,), warmup=True, **kw, **config)


def _config_error(e: BaseException) -> bool:
    """Whether a compile job failed because of its config (it does not compile, or needs more
    than the GPU has): the caller's own launch fails alike. Else the worker could not build the
    call, and the caller compiles the config itself."""
    return any(k.__name__ in _COMPILE | _RESOURCE for k in type(e).__mro__)


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
            out = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000], "config_error": _config_error(e)}
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


def parallel_warm(target: str, args: Sequence[Any], kwargs: Mapping[str, Any],
                  on_broken: Callable[[str], None] | None = None) -> Callable[[list[Config]], None] | None:
    """A `warm(configs)` that hands each config to a compile worker and returns at once: the
    measuring loop goes on in this process, and each config's first launch finds Triton's
    cache filled by a worker, or compiles it here if the worker is not done (so a pool that
    is still starting never makes the first call slower than compiling serially).

    A job that fails for its config (a compile error) is that config's: its launch here fails
    alike. A job that fails otherwise means the workers cannot compile this kernel: it is
    reported once (a warning naming the error), no further config is sent, `on_broken(why)` is
    told, and every config compiles in this process at its launch (the failed one included)."""
    try:
        a = [_encode(x) for x in args]
        kw = {k: _encode(v) for k, v in kwargs.items() if k not in LAUNCH_KW}
    except TypeError as e:
        log.info("%s: compiling serially: %s", target, e)
        return None
    broken: list[str] = []

    def done(f: Any) -> None:
        if f.cancelled():
            return
        err = f.exception()
        res = None if err is not None else f.result()
        if err is None and res.get("ok"):
            return
        if err is None and res.get("config_error"):  # the config's own launch reports it
            log.debug("compile worker: %s", res.get("error"))
            return
        why = str(err) if err is not None else str(res.get("error"))
        if not broken:
            broken.append(why)
            log.warning("compile workers cannot compile %s (%s); its configs compile in this process instead",
                        target, why.splitlines()[0] if why else "no answer")
            if on_broken is not None:
                on_broken(why)

    submitted: set[str] = set()

    def warm(configs: list[Config]) -> None:
        if broken:
            return
        pool = compile_pool()
        if not pool.ready:  # still starting: this config compiles here, later ones may not
            return
        for c in configs:
            k = config_key(c)
            if broken:
                return
            if k not in submitted:
                submitted.add(k)
                job = {"target": target, "args": a, "kwargs": kw, "config": launch_kwargs(c)}
                pool.submit(job).add_done_callback(done)
    return warm
