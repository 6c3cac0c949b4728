"""The compile pool: worker processes that fill Triton's cache with compile-only launches of the
configs this process will measure next, started early (when a kernel is decorated, where a GPU
is visible) and kept warm (the kernels' modules imported before any job needs them).

Why early: a worker's start is an import of Triton, then of the kernel's module, which for a
library (fla, FlagGems, Liger) imports torch and the library, seconds of work. Started at the
first key that must be tuned, the workers were still importing when the first tune ended, so
they never helped the first call. Started where the kernel is decorated, they import in the
time the caller spends importing and building its inputs. Where NVML or nvidia-smi names the
GPU's architecture, the workers compile for it without a CUDA context (measure/worker.py's
`TargetOnlyDriver`): no CUDA start-up and no GPU memory per worker. Anything else a library's
import asks of Triton's driver is answered by the real one.

A worker counts as hot for a module (`CompilePool.hot`) only once it can run its jobs at full
speed: torch imported (every tensor stand-in needs it) and Triton's once-per-process costs paid
by a compile of an empty kernel, then the module imported. Before, a fresh worker's first job
paid them (2-4 s: torch's import, Triton hashing its own library for the cache key), and the
caller waited for it on a kernel decorated and called at once (heldout_live, session 16).

ABDUCTUNE_COMPILE_POOL: "early" (the default: start at decoration where a GPU is visible),
"miss" (start at the first key that must be tuned, as before). ABDUCTUNE_COMPILE_WORKERS: how
many workers (default: one per core but one, at most 8)."""
from __future__ import annotations

import importlib
import inspect
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from ..measure.inprocess import _COMPILE, _RESOURCE

log = logging.getLogger(__name__)

POOL_ENV = "ABDUCTUNE_COMPILE_POOL"
_TARGET_ENV = "_ABDUCTUNE_COMPILE_ARCH"  # set by the pool for its workers: compile offline for this arch


# ----------------------------------------------------------------------------- the worker's side

def _offline_driver(arch: int) -> Any:
    """Triton's driver for a worker: the target named, no CUDA context; whatever else a
    library's import asks of the driver (device properties, utils) comes from the real one."""
    from triton.runtime import driver as drivers

    from ..measure.worker import TargetOnlyDriver

    class Offline(TargetOnlyDriver):
        def __getattr__(self, name: str) -> Any:  # only for names TargetOnlyDriver lacks
            return getattr(drivers.default, name)
    return Offline(arch, 32)


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


def jit_of(obj: Any) -> Any:
    """The @triton.jit object at the bottom of a wrapper chain (whose `.fn` is the function)."""
    for _ in range(16):
        nxt = getattr(obj, "fn", None)
        if nxt is None or inspect.isfunction(nxt):
            return obj
        obj = nxt
    return obj


def _config_pre_hook(tuner: Any, config: Mapping[str, Any]) -> Any:
    """The list config's own pre_hook for `config` (else the list's first hook: hooks such as
    setting descriptors' block shapes from the tile are the same for the whole list)."""
    hooked = [c for c in getattr(tuner, "configs", ()) if getattr(c, "pre_hook", None) is not None]
    for c in hooked:
        if {**c.kwargs, **{k: getattr(c, k, None) for k in config if k not in c.kwargs}} == dict(config):
            return c.pre_hook
    return hooked[0].pre_hook if hooked else None


def _resolve(target: str) -> Any:
    mod, qual = target.split(":")
    obj: Any = importlib.import_module(mod)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def _warm_worker(target: str, args: list[Any], kwargs: dict[str, Any], config: dict[str, Any],
                 bare: bool = False) -> None:
    """In a worker process: compile one config (a launch with warmup=True), filling Triton's
    cache. The arguments are stand-ins; the kwargs hold what heuristics above the autotuner
    computed in the caller. `bare`: the caller also computed the heuristics under the autotuner
    (their values are in `config`), so the @triton.jit function itself is launched, whatever
    wraps it here; else what the module's autotuner launches is (heuristics run on stand-ins).
    The config's pre_hook runs first on the stand-ins, as before the real launch (Liger and
    Triton's TMA tutorials set the descriptors' block shapes there); one that cannot (it
    zeroes a tensor) is skipped."""
    obj = _resolve(target)
    tuner, fn = _launched(obj)
    if bare:
        fn = jit_of(obj)
    a = [_decode(x) for x in args]
    kw = {k: _decode(v) for k, v in kwargs.items()}
    cfg = {k: _decode(v) for k, v in config.items()}
    hook = _config_pre_hook(tuner, cfg) if tuner is not None else None
    if hook is not None:
        try:
            hook({**dict(zip(getattr(fn, "arg_names", ()), a)), **kw, **cfg})
        except Exception:  # noqa: BLE001 - a hook that needs real tensors; the launch may still compile
            pass
    fn.run(*a, grid=(1,), warmup=True, **kw, **cfg)


def _config_error(e: BaseException) -> bool:
    """Whether a compile job failed because of its config (it does not compile, or needs more
    than the GPU has): the caller's own launch fails alike. Else the worker could not build the
    call, and the caller compiles the config itself."""
    return any(k.__name__ in _COMPILE | _RESOURCE for k in type(e).__mro__)


def import_root(module: str) -> str | None:
    """The folder that makes `module` importable by its name: where its top package sits. A
    library may put its own folders on `sys.path` when it is imported (FlagGems' per-GPU
    backends are imported as `hopper.ops.mm`), after the workers started with the caller's
    path; the workers add this folder before importing the module."""
    f = getattr(sys.modules.get(module), "__file__", None)
    if not f:
        return None
    p = Path(f).resolve()
    depth = len(module.split(".")) - (0 if p.name == "__init__.py" else 1)
    return str(p.parents[depth]) if depth < len(p.parents) else None


def _preload(module: str, root: str | None = None) -> dict[str, Any]:
    if root and root not in sys.path:
        sys.path.append(root)  # after the worker's own path: never shadows what it imports already
    try:
        importlib.import_module(module)
        return {"ok": True}
    except BaseException as e:  # noqa: BLE001 - reported; jobs for it fail and the caller compiles
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}


def _first_compile() -> None:
    """Compile a kernel that does nothing, for whatever target the driver names: Triton's
    once-per-process costs (hashing its own library and sources for the cache key, importing
    its backends, asking ptxas its version) are paid here rather than by a job."""
    import triton

    @triton.jit
    def _abductune_first_compile(n):  # noqa: ANN001 - a Triton kernel's argument
        pass
    _abductune_first_compile.run(7, grid=(1,), warmup=True)


def _prepare(torch_too: bool) -> dict[str, Any]:
    """A worker's one-time costs, before it takes any job: torch imported (`torch_too`: the
    caller has it, so its jobs' stand-ins need it) and the compiler's first use. A failure is
    reported, not fatal: the jobs then pay or report it themselves."""
    out: dict[str, Any] = {"ok": True}
    t0 = time.perf_counter()
    if torch_too:
        try:
            importlib.import_module("torch")
        except BaseException as e:  # noqa: BLE001 - reported; a job that needs torch fails alike
            out.update(ok=False, error=f"importing torch: {type(e).__name__}: {e}"[:2000])
    t1 = time.perf_counter()
    try:
        _first_compile()
    except BaseException as e:  # noqa: BLE001 - reported; a real job meets the same error and says so
        out.update(ok=False, error=f"the first compile: {type(e).__name__}: {e}"[:2000])
    out.update(torch_s=round(t1 - t0, 3), compiler_s=round(time.perf_counter() - t1, 3))
    return out


def compile_server() -> None:
    """A compile worker's main loop: "ready" once Triton is imported, then one JSON request per
    stdin line ({"prepare": true, "torch": bool}, {"preload": module} or a compile job) and one
    JSON answer per line. Started as `python -c` (not multiprocessing, whose spawn would re-run
    the caller's unguarded script in every worker); anything the compiler prints goes to stderr."""
    os.environ[POOL_ENV] = "miss"  # kernels decorated with abductune in the modules imported here start no pool
    importlib.import_module("triton")  # the slow part of starting, done before saying ready
    arch = os.environ.pop(_TARGET_ENV, "")
    if arch.isdigit():
        from triton.runtime import driver

        driver.set_active(_offline_driver(int(arch)))
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    answer.write('{"ready": true}\n')
    answer.flush()
    for line in sys.stdin:
        job = json.loads(line)
        if "prepare" in job:
            out = _prepare(bool(job.get("torch")))
        elif "preload" in job:
            out = _preload(job["preload"], job.get("root"))
        else:
            try:
                _warm_worker(job["target"], job["args"], job["kwargs"], job["config"], bool(job.get("bare")))
                out = {"ok": True}
            except Exception as e:  # noqa: BLE001 - reported to the caller, who compiles it itself
                out = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000], "config_error": _config_error(e)}
        answer.write(json.dumps(out) + "\n")
        answer.flush()


# ----------------------------------------------------------------------------- the caller's side

class CompilePool:
    """`workers` compile processes fed from one queue; `submit(job)` returns a Future at once
    (with `.cold`: whether the worker that took it had not imported the job's module yet).

    Each worker first pays its one-time costs (`_prepare`: torch, where this process has it, and
    Triton's first compile), then imports the modules asked for, then takes jobs.
    `preload(module)`: every worker imports it before taking another job, so jobs go to
    workers that have it (`hot(module)`: how many have). `target`: (arch, warp size) to compile
    for without a CUDA context; "auto" (default) asks NVML or nvidia-smi in the background
    (measure/target.py), None: each worker uses Triton's real driver. `stats`: when it started,
    when the first worker was ready and prepared, what it did."""

    def __init__(self, workers: int, target: Any = "auto", modules: tuple[str, ...] = ()):
        import queue

        self.jobs: Any = queue.Queue()
        self.procs: list[Any] = []
        self.ready = 0
        self.pid = os.getpid()
        self.modules: list[str] = list(dict.fromkeys(modules))
        self.roots: dict[str, str | None] = {m: import_root(m) for m in self.modules}
        self._have: dict[str, int] = {}  # module -> workers that imported it
        self._tried: dict[str, int] = {}  # module -> workers that tried to
        self._starting = workers  # workers neither prepared nor failed to start yet
        self._failed: dict[str, str] = {}  # module -> why its import failed in a worker
        self._lock = threading.Lock()
        self._closed = False
        self.stats: dict[str, Any] = {"workers": workers, "started": time.perf_counter(), "first_ready_s": None,
                                      "target": None, "jobs": 0, "preloads": {}, "settled_s": None,
                                      "first_prepared_s": None, "prepare_s": [], "prepare_error": None}
        threading.Thread(target=self._start_all, args=(workers, target), name="abductune-compile-start",
                         daemon=True).start()

    # -- the pool's own threads
    def _start_all(self, workers: int, target: Any) -> None:
        if target == "auto":
            try:
                from ..measure.target import compile_target

                target = compile_target()
            except Exception as e:  # noqa: BLE001 - ABDUCTUNE_COMPILE_MODE=offline without NVML: real drivers
                log.info("compile workers use CUDA: %s", e)
                target = None
        self.stats["target"] = target
        for i in range(workers):
            threading.Thread(target=self._serve, args=(target,), name=f"abductune-compile-{i}", daemon=True).start()

    def _start(self, target: Any) -> Any:
        import subprocess

        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        if target:
            env[_TARGET_ENV] = str(int(target[0]))
        proc = subprocess.Popen([sys.executable, "-c", "from abductune.autotune.compile_workers import "
                                 "compile_server; compile_server()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env, text=True)
        with self._lock:
            if self._closed:
                proc.kill()
            self.procs.append(proc)
        if not proc.stdout.readline():  # "ready", or the worker could not start
            raise RuntimeError(f"compile worker exited ({proc.wait()})")
        return proc

    def _ask(self, proc: Any, request: Mapping[str, Any]) -> dict[str, Any]:
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"compile worker exited ({proc.wait()})")
        return json.loads(line)

    def _serve(self, target: Any) -> None:
        import queue

        try:
            proc = self._start(target)
        except Exception as e:  # noqa: BLE001 - without workers every config compiles in the caller
            log.info("compile worker did not start: %s", e)
            with self._lock:
                self._starting -= 1
            return
        with self._lock:
            self.ready += 1
            if self.stats["first_ready_s"] is None:
                self.stats["first_ready_s"] = round(time.perf_counter() - self.stats["started"], 3)
        have: set[str] = set()
        try:
            try:  # before any module or job: a hot worker runs its first job as fast as its later ones
                prep = self._ask(proc, {"prepare": True, "torch": "torch" in sys.modules})
            finally:
                with self._lock:
                    self._starting -= 1
            with self._lock:
                self.stats["prepare_s"].append([prep.get("torch_s"), prep.get("compiler_s")])
                if self.stats["first_prepared_s"] is None:
                    self.stats["first_prepared_s"] = round(time.perf_counter() - self.stats["started"], 3)
                if not prep.get("ok") and self.stats["prepare_error"] is None:
                    self.stats["prepare_error"] = prep.get("error")
            while True:
                todo = [m for m in list(self.modules) if m not in have]
                if todo:  # imports first: a job then finds its module imported
                    t0 = time.perf_counter()
                    got = self._ask(proc, {"preload": todo[0], "root": self.roots.get(todo[0])})
                    have.add(todo[0])
                    with self._lock:
                        self.stats["preloads"].setdefault(todo[0], []).append(round(time.perf_counter() - t0, 3))
                        self._tried[todo[0]] = self._tried.get(todo[0], 0) + 1
                        if self.stats.get("settled_s") is None and self._all_tried():
                            self.stats["settled_s"] = round(time.perf_counter() - self.stats["started"], 3)
                        if got.get("ok"):
                            self._have[todo[0]] = self._have.get(todo[0], 0) + 1
                        else:
                            self._failed[todo[0]] = str(got.get("error"))
                    continue
                try:
                    job, f = self.jobs.get(timeout=0.05)
                except queue.Empty:
                    continue
                f.cold = job["target"].split(":")[0] not in have  # before it shows as running
                if not f.set_running_or_notify_cancel():
                    continue
                try:
                    f.set_result(self._ask(proc, job))
                except Exception as e:  # noqa: BLE001 - the config compiles in the caller instead
                    f.set_exception(e)
                    raise
                have.add(job["target"].split(":")[0])
        except Exception:  # noqa: BLE001 - a dead worker: the others go on
            with self._lock:
                self.ready -= 1

    # -- the caller's calls
    def preload(self, module: str) -> None:
        with self._lock:
            if module not in self.modules:
                self.roots[module] = import_root(module)
                self.modules.append(module)
                self.stats["settled_s"] = None  # warm again once this one is imported too

    def hot(self, module: str) -> int:
        """Workers that have imported `module` (0 while they start or import it)."""
        return self._have.get(module, 0)

    def settled(self) -> bool:
        """Whether every worker has started and tried to import every module asked for (then
        nothing runs in the pool until a job comes)."""
        with self._lock:
            return self._all_tried()

    def _all_tried(self) -> bool:
        return self._starting == 0 and all(self._tried.get(m, 0) >= self.ready for m in self.modules)

    def failed(self, module: str) -> str | None:
        """Why `module` could not be imported in a worker, or None."""
        return self._failed.get(module)

    def submit(self, job: Mapping[str, Any]) -> Any:
        from concurrent.futures import Future

        f: Any = Future()
        f.cold = False
        self.stats["jobs"] += 1
        self.jobs.put((dict(job), f))
        return f

    def close(self) -> None:
        if os.getpid() != self.pid:  # a forked child's copy: the workers are its parent's
            return
        with self._lock:
            self._closed = True
            for p in self.procs:
                if p.poll() is None:
                    p.kill()


_POOL: CompilePool | None = None
_POOL_LOCK = threading.Lock()


WORKERS_ENV = "ABDUCTUNE_COMPILE_WORKERS"


def workers_wanted() -> int:
    """ABDUCTUNE_COMPILE_WORKERS, else one per core but one, at most 8."""
    given = os.environ.get(WORKERS_ENV, "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given)
    return max(1, min(8, (os.cpu_count() or 2) - 1))


def compile_pool(module: str | None = None) -> CompilePool:
    """This process's pool (started now if it is not yet), with `module` to import in every worker."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL.pid != os.getpid():  # none yet, or a forked child's dead copy
            import atexit

            _POOL = CompilePool(workers_wanted())
            atexit.register(_POOL.close)
        pool = _POOL
    if module:
        pool.preload(module)
    return pool


def pool_started() -> CompilePool | None:
    return _POOL if _POOL is not None and _POOL.pid == os.getpid() else None


_EARLY_LOCK = threading.Lock()
_EARLY: dict[str, Any] = {"pid": None, "modules": []}  # the early start asked for in this process


def start_early(module: str) -> bool:
    """Start the pool now, in the background, importing `module` in its workers, where a GPU is
    visible (NVML or nvidia-smi: no CUDA call here, so a process that forks later holds no CUDA
    context) and ABDUCTUNE_COMPILE_POOL is not "miss". One look for a GPU per process; the
    modules of kernels decorated meanwhile are imported too. Whether a start was asked for."""
    if os.environ.get(POOL_ENV, "early").strip().lower() == "miss":
        return False
    with _EARLY_LOCK:
        pool = pool_started()
        if pool is not None:
            pool.preload(module)
            return True
        _EARLY["modules"].append(module)
        if _EARLY["pid"] == os.getpid():
            return True  # the look is under way (or found no GPU)
        _EARLY["pid"] = os.getpid()

    def start() -> None:
        from ..measure.target import gpu_arch

        try:
            seen = gpu_arch()
        except Exception:  # noqa: BLE001 - NVML or nvidia-smi misbehaving: leave it to the first miss
            seen = None
        with _EARLY_LOCK:
            mods, _EARLY["modules"] = list(_EARLY["modules"]), []
            if seen is None:
                return  # no GPU named here: the pool starts at the first miss, if ever
            pool = compile_pool()
        for m in mods:
            pool.preload(m)
    threading.Thread(target=start, name="abductune-compile-early", daemon=True).start()
    return True
