"""Compile planning and warming: whether worker processes can compile the kernel, and the
`Warmer` that hands them the configs this process will measure next (the pool itself is in
compile_workers.py).

A worker compiles with the call's arguments as stand-ins: a tensor as its dtype, shape and
pointer alignment, a tensor descriptor rebuilt around such a stand-in, torch and Triton dtypes as
themselves, and the values that @triton.heuristics computed in the caller: those above the
autotuner (in the call's kwargs), and, where only heuristics lie between the autotuner and the
@triton.jit function, those under it too, evaluated here per config on the real arguments (as the
launch evaluates them) and sent as constexprs, so the worker compiles the bare kernel whatever
its module names (a wrapper made where it is called, heuristics reading tensor strides). A job
that fails for a reason other than the config itself (the worker cannot build the call) is
reported once, and the kernel's configs compile in the caller from then on."""
from __future__ import annotations

import inspect
import logging
import sys
import time
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable, Mapping, Sequence

from ..space import Config
from ..store import config_key
from .compile_workers import (CompilePool, _config_error, _decode, _launched, _warm_worker,  # noqa: F401
                              compile_pool, compile_server, start_early)
from .configs import LAUNCH_KW, launch_kwargs
from .keys import interpreted, is_descriptor, python_fn

log = logging.getLogger(__name__)

WAIT_RUNNING_S = 120.0  # the longest a launch waits for a worker already compiling its config


class CompileTimeout(RuntimeError):
    """A config's compile ran in a worker past `WAIT_RUNNING_S`: it fails as a config does."""


def peelable(under: Any) -> bool:
    """Whether everything between an autotuner and its @triton.jit function is Triton's
    @triton.heuristics, whose values this process can compute per config (`peel`)."""
    from triton.runtime.autotuner import Heuristics

    obj = under
    for _ in range(16):
        if inspect.isfunction(getattr(obj, "fn", None)):
            return True  # the @triton.jit object
        if not isinstance(obj, Heuristics):
            return False
        obj = obj.fn
    return False


def peel(under: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The values the @triton.heuristics under an autotuner give this call (its arguments and
    one config's launch keywords in `kwargs`), computed as `Heuristics.run` computes them: each
    sees the arguments and the values before it, outermost first."""
    from triton.runtime.autotuner import Heuristics

    kw = dict(kwargs)
    values: dict[str, Any] = {}
    obj = under
    while isinstance(obj, Heuristics):
        for name, heur in obj.values.items():
            kw[name] = values[name] = heur({**dict(zip(obj.arg_names, args)), **kw})
        obj = obj.fn
    return values


def early_start(autotuner: Any) -> bool:
    """Start the compile pool while the kernel is being decorated, where workers could compile
    it: not interpreted, not compile="serial", its module importable by name (the name itself
    is bound only after decoration; compile_plan checks it at the first miss)."""
    if autotuner.compile == "serial" or interpreted(autotuner.fn):
        return False
    base = autotuner.base_fn
    mod, qual = getattr(base, "__module__", None), getattr(base, "__qualname__", "<locals>")
    module = sys.modules.get(mod) if mod else None
    if mod in (None, "__main__") or "<locals>" in qual or not getattr(module, "__file__", None):
        return False
    return start_early(mod)


def compile_only(tuner: Any, args: tuple, kwargs: Mapping[str, Any]) -> Callable[[Config], Any] | None:
    """A config's compile-only launch in this process (the config's pre_hook first: it may set
    what the compile reads, such as descriptors' block shapes; every real launch runs its own
    hook again); None with isolate=True (the measuring worker launches)."""
    if tuner.isolate:
        return None
    full, kw = {**dict(zip(tuner.arg_names, args)), **kwargs}, {**kwargs, "warmup": True}

    def launch(cfg: Config) -> Any:
        hook = tuner._config_hook(cfg)
        if hook is not None:
            hook({**full, **launch_kwargs(cfg)})
        return tuner.fn.run(*args, **kw, **launch_kwargs(cfg))
    return launch


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
    if _peelable(autotuner):
        return "parallel", f"{mod}:{qual}"  # the caller computes every heuristic: workers launch the bare kernel
    tuner, under = _launched(obj)
    if tuner is None and under is not autotuner.fn and not inspect.isfunction(getattr(autotuner.fn, "fn", None)):
        # the name is the bare kernel, and the autotuner was built over a wrapper of it that is
        # not Triton's heuristics: a worker would compile the kernel without it
        return "serial", (f"{mod}.{qual} is the kernel without the {type(autotuner.fn).__name__} this autotuner "
                          "launches, which worker processes cannot rebuild")
    return "parallel", f"{mod}:{qual}"


def _peelable(autotuner: Any) -> bool:
    try:
        return peelable(autotuner.fn)
    except ImportError:  # pragma: no cover - Triton without Heuristics
        return False


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


class Warmer:
    """`warm(configs)` hands each config to a compile worker and returns at once: the measuring
    loop goes on in this process. `settle(config)`, before a config's first launch here: its
    job done, the launch finds Triton's cache filled; still queued, it is withdrawn and compiles
    here; already compiling in a worker that had the module imported, the launch waits for it
    (the same work, started earlier) rather than compiling it a second time beside it, and while
    it waits, this process compiles the next configs still queued (`compile_here`, a
    compile-only launch), so where the workers are fewer than the configs ahead it is one more
    compiler rather than an idle one.

    Configs go to workers only once one is hot for the kernel's module (`CompilePool.hot`: it has
    paid its one-time costs and imported the module): before that (the pool still starting, as
    for a kernel decorated and called at once) each config compiles here, so a pool that is late
    never makes the first call slower than compiling serially; the configs named meanwhile and
    not launched yet are sent as soon as a launch finds a worker hot. A job that fails for its
    config (a compile error) is that config's: its launch here fails alike. A job that fails
    otherwise, or the module's import failing in the workers, means the workers cannot compile
    this kernel: it is reported once (a warning naming the error), no further config is sent,
    `on_broken(why)` is told, and every config compiles in this process at its launch. `stats`:
    what happened."""

    def __init__(self, target: str, args: Sequence[Any], kwargs: Mapping[str, Any], under: Any = None,
                 on_broken: Callable[[str], None] | None = None,
                 compile_here: Callable[[Config], Any] | None = None):
        self.target, self.module = target, target.split(":")[0]
        self.a = [_encode(x) for x in args]  # TypeError: this call cannot be sent (parallel_warm says so)
        self.kw = {k: _encode(v) for k, v in kwargs.items() if k not in LAUNCH_KW}
        self.args, self.kwargs, self.under = tuple(args), dict(kwargs), under
        self.on_broken, self.compile_here = on_broken, compile_here
        self.broken: list[str] = []
        self.jobs: dict[str, Any] = {}
        self.configs: dict[str, Config] = {}
        self._settled: set[str] = set()
        self.pending: dict[str, Config] = {}  # named while no worker was hot, not launched yet
        self.stats: dict[str, Any] = {"sent": 0, "from_workers": 0, "waited": 0, "waited_s": 0.0, "withdrawn": 0,
                                      "compiled_here": 0, "helped": 0, "worker_failed": 0, "pool_cold_calls": 0,
                                      "sent_late": 0, "worker_misses": 0, "compile_timeouts": 0}
        compile_pool(self.module)  # starts it (if the decoration did not) and has its workers import the module

    def _job(self, c: Config) -> dict[str, Any] | None:
        config = launch_kwargs(c)
        if self.under is not None:  # the caller computes the heuristics; the worker launches the bare kernel
            try:
                values = {k: _encode(v) for k, v in peel(self.under, self.args, {**self.kwargs, **config}).items()}
            except Exception as e:  # noqa: BLE001 - a heuristic this config breaks: it compiles here
                log.debug("%s: heuristics for %s: %s", self.target, c, e)
                return None
            config = {**config, **values}
        return {"target": self.target, "args": self.a, "kwargs": self.kw, "config": config,
                "bare": self.under is not None}

    def __call__(self, configs: list[Config]) -> None:
        if self.broken:
            return
        pool = compile_pool(self.module)
        if not pool.hot(self.module):
            why = pool.failed(self.module)
            if why:
                self._broken(f"importing {self.module} failed in the compile workers: {why}")
            else:  # still starting: these compile here, unless a worker is hot before their launch
                self.stats["pool_cold_calls"] += 1
                for c in configs:
                    self.pending.setdefault(config_key(c), dict(c))
            return
        self._send(pool, configs)

    def _send(self, pool: Any, configs: Sequence[Config]) -> int:
        sent = self.stats["sent"]
        for c in configs:
            k = config_key(c)
            if self.broken:
                break
            self.pending.pop(k, None)
            if k in self.jobs or k in self._settled:  # sent already, or compiled here already
                continue
            job = self._job(c)
            if job is None:
                self.jobs[k] = None
                continue
            f = pool.submit(job)
            self.jobs[k], self.configs[k] = f, dict(c)
            self.stats["sent"] += 1
            f.add_done_callback(self._done)
        return self.stats["sent"] - sent

    def first_launch(self, c: Config, launch: Callable[[], Any]) -> Any:
        """A config's first launch here, after settling with the workers; where a worker said it
        compiled the config, whether Triton found its binary (a compile here means the worker's
        landed under another cache key: counted, and said once)."""
        if not self.settle(c):
            return launch()
        try:
            from triton import knobs

            comp = knobs.compilation
            old = comp.listener
        except (ImportError, AttributeError):  # a Triton without compile listeners: no check
            return launch()
        missed: list[bool] = []

        def listener(**kw: Any) -> None:
            missed.append(not kw.get("cache_hit", True))
            if old is not None:
                old(**kw)
        comp.listener = listener
        try:
            return launch()
        finally:
            comp.listener = old
            if any(missed):
                self.stats["worker_misses"] += 1
                if self.stats["worker_misses"] == 1:
                    log.warning("%s: a config a compile worker compiled was compiled again at its launch (its binary "
                                "is under another cache key); the workers do not help this kernel", self.target)

    def settle(self, c: Config) -> bool:
        """Settle config `c` with the workers before its first launch here; whether a worker
        compiled it (see the class)."""
        k = config_key(c)
        if k in self._settled:  # a later launch of it (the run-off) finds it compiled by now
            return False
        self._settled.add(k)
        self.pending.pop(k, None)
        if self.pending and not self.broken:  # named while the pool was starting: sent once a worker is hot
            pool = compile_pool(self.module)
            if pool.hot(self.module):
                self.stats["sent_late"] += self._send(pool, list(self.pending.values()))
        f = self.jobs.get(k)
        if f is None or self.broken:
            self.stats["compiled_here"] += 1
            return False
        if not f.done() and f.cancel():  # still queued: compiling here is sooner
            self.stats["withdrawn"] += 1
            self.stats["compiled_here"] += 1
            return False
        if not f.done() and getattr(f, "cold", False):  # its worker is importing the module first
            self.stats["compiled_here"] += 1
            return False
        while not f.done() and self._help(k):
            pass
        t0 = time.perf_counter()
        waited = not f.done()
        try:
            res = f.result(timeout=WAIT_RUNNING_S)
        except FutureTimeout:
            # compiling it here would take as long again (ptxas on a config that spills
            # massively can take minutes): the config fails, the search goes on
            self.stats["waited"] += 1
            self.stats["waited_s"] += time.perf_counter() - t0
            self.stats["compile_timeouts"] += 1
            raise CompileTimeout(f"{self.target}: config {dict(c)} was still compiling in a worker after "
                                 f"{WAIT_RUNNING_S:g} s; left out of this search") from None
        except Exception:  # noqa: BLE001 - a dead worker: compile here
            res = None
        if waited:
            self.stats["waited"] += 1
            self.stats["waited_s"] += time.perf_counter() - t0
        ok = res is not None and bool(res.get("ok"))
        self.stats["from_workers" if ok else "compiled_here"] += 1
        return ok

    def _help(self, k: str) -> bool:
        """Compile here the first config after `k` whose job no worker has started (withdrawn
        from the queue); False when there is none (or nothing to compile with)."""
        if self.compile_here is None:
            return False
        keys = list(self.jobs)
        for j in keys[keys.index(k) + 1:]:
            f = self.jobs[j]
            if f is None or j in self._settled or f.done() or f.running() or not f.cancel():
                continue
            self.stats["helped"] += 1
            try:
                self.compile_here(self.configs[j])
            except Exception as e:  # noqa: BLE001 - the config's own launch will meet it and report it
                log.debug("%s: compiling %s here: %s", self.target, self.configs[j], e)
            return True
        return False

    def _done(self, f: Any) -> None:
        if f.cancelled():
            return
        err = f.exception()
        res = None if err is not None else f.result()
        if err is None and res.get("ok"):
            return
        self.stats["worker_failed"] += 1
        if err is None and res.get("config_error"):  # the config's own launch reports it
            log.debug("compile worker: %s", res.get("error"))
            return
        self._broken(str(err) if err is not None else str(res.get("error")))

    def _broken(self, why: str) -> None:
        if self.broken:
            return
        self.broken.append(why)
        log.warning("compile workers cannot compile %s (%s); its configs compile in this process instead",
                    self.target, why.splitlines()[0] if why else "no answer")
        if self.on_broken is not None:
            self.on_broken(why)


def parallel_warm(target: str, args: Sequence[Any], kwargs: Mapping[str, Any],
                  on_broken: Callable[[str], None] | None = None, under: Any = None,
                  compile_here: Callable[[Config], Any] | None = None) -> Warmer | None:
    """A `Warmer` for this call (see there), or None when its arguments cannot be sent to a
    worker (they compile in this process). `under`: what the autotuner launches, where only
    @triton.heuristics lie between it and the @triton.jit function (bare-kernel jobs);
    `compile_here(config)`: a compile-only launch in this process."""
    try:
        return Warmer(target, args, kwargs, under, on_broken, compile_here)
    except TypeError as e:
        log.info("%s: compiling serially: %s", target, e)
        return None
