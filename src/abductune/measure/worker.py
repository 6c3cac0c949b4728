"""Code that runs inside worker processes: the benchmark server and the compile task.

Everything here imports torch/triton; the parent (bench_client.py, compile_pool.py) only talks to
it over a pipe or a process pool, so a crash, hang or sticky CUDA error here never takes the tuner
down.
"""
from __future__ import annotations

import math
import os
import statistics
import time
import traceback
from typing import Any, Sequence

from .replies import BenchReply, CompileResult, InterleavedReply, SetupReply

# A CUDA error after which the context is unusable: the worker reports it, then exits so the
# parent starts a fresh one.
_STICKY = ("illegal memory access", "illegal address", "unspecified launch failure", "misaligned address",
           "an illegal instruction", "device-side assert", "CUDA error", "cudaErrorLaunchFailure",
           "hardware stack error", "uncorrectable ECC", "operation not permitted when stream is capturing")


def classify_error(exc: BaseException) -> tuple[str, bool]:
    """(status, sticky) for an exception raised while compiling or running a config."""
    name = type(exc).__name__
    mod = type(exc).__module__ or ""
    text = f"{name}: {exc}"
    if name == "OutOfResources" or "out of resource" in text.lower():
        return "resource_error", False
    if "CompilationError" in name or mod.startswith("triton.compiler") or "PTXAS error" in text \
            or "ptxas" in text.lower() and "error" in text.lower():
        return "compile_error", False
    sticky = any(s.lower() in text.lower() for s in _STICKY)
    return "runtime_error", sticky


def _short(exc: BaseException, limit: int = 2000) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return text[-limit:]


# ---------------------------------------------------------------------------- compile

_COMPILE_STATE: dict[str, Any] = {}


class TargetOnlyDriver:
    """Stands in for Triton's CUDA driver in a compile worker: it names the GPU target and
    nothing else. Launches then go through Triton's own JIT path (so the on-disk cache key is
    exactly the one the benchmark worker's real launch computes) without torch.cuda, a CUDA
    context or GPU buffers: a worker starts in the time of `import torch`."""

    def __init__(self, arch: int, warp_size: int = 32):
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget("cuda", arch, warp_size)

    def get_current_target(self) -> Any:
        return self.target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def is_active(self) -> bool:
        return True


def _adopt(env: dict[str, str] | None, path: list[str] | None) -> None:
    """Take the parent's environment and sys.path as they are now (a worker forked from the
    fork server holds the ones the server started with)."""
    import sys

    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    if path is not None:
        sys.path[:] = path


def _init_compile_worker(target: tuple[int, int] | None = None, env: dict[str, str] | None = None,
                         path: list[str] | None = None) -> None:
    """Make every Triton launch in this process compile only (warmup), capturing the kernel.
    `target` (arch, warp size): compile offline for it (`TargetOnlyDriver`, meta tensors);
    None: create a CUDA context and compile with real buffers (the fallback). `env`, `path`:
    the parent's environment and sys.path now (a fork server holds the ones it started with;
    TRITON_CACHE_DIR and friends must be the parent's current ones)."""
    _adopt(env, path)
    from triton.runtime.jit import JITFunction

    if target is not None:
        from triton.runtime import driver

        driver.set_active(TargetOnlyDriver(*target))
        _COMPILE_STATE["target"] = target
    orig = JITFunction.run

    def run_compile_only(self, *args, grid, warmup, **kwargs):  # noqa: ANN001
        kernel = orig(self, *args, grid=grid, warmup=True, **kwargs)
        _COMPILE_STATE["kernel"] = kernel
        return kernel

    JITFunction.run = run_compile_only  # type: ignore[method-assign]


def warm_task() -> bool:
    """Start-up work of a compile worker, done before the first real compile."""
    from .. import kernels  # noqa: F401 - imports triton and the kernels' modules

    if "target" not in _COMPILE_STATE:
        import torch

        torch.cuda.init()
    return True


class _DType:
    """A dtype as Triton's specialisation reads it: by name ("torch.float16")."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __str__(self) -> str:
        return f"torch.{self.name}"

    __repr__ = __str__


class DuckTensor:
    """A contiguous tensor's shape and dtype and a 16-byte-aligned null pointer: all that a
    compile-only launch of a built-in kernel reads, so offline workers need no torch (a third
    of their start-up). Checked at a worker's first compile; meta tensors otherwise."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: Sequence[int], dtype: str):
        from ..kernels.base import TORCH_DTYPES

        self.shape = tuple(int(d) for d in shape)
        self.dtype = _DType(TORCH_DTYPES[dtype])

    def data_ptr(self) -> int:
        return 0

    def stride(self, dim: int | None = None) -> Any:
        out, step = [], 1
        for d in reversed(self.shape):
            out.append(step)
            step *= d
        out.reverse()
        return tuple(out) if dim is None else out[dim]

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)


def _compile_inputs(spec: Any, problem: Any) -> tuple:
    """The buffers a compile-only launch passes: offline, stand-in tensors (`DuckTensor`, or
    meta tensors when the kernel gives no `tensor_shapes` or duck tensors failed here); with a
    CUDA context, uninitialised GPU memory."""
    pkey = (spec.name, problem.key())
    if _COMPILE_STATE.get("pkey") != pkey:
        _COMPILE_STATE.pop("io", None)
        shapes = spec.tensor_shapes(problem) if "target" in _COMPILE_STATE and \
            not _COMPILE_STATE.get("no_duck") else None
        if shapes is not None:
            io = (tuple(DuckTensor(s, spec.dtype) for s in shapes[0]), DuckTensor(shapes[1], spec.dtype))
        else:
            import torch

            if "target" in _COMPILE_STATE:
                inputs = spec.make_inputs(problem, "meta", 0)
            else:
                torch.cuda.empty_cache()
                inputs = tuple(torch.empty_like(t) for t in spec.make_inputs(problem, "cuda", 0))
            io = (inputs, spec.alloc_output(problem, inputs))
        _COMPILE_STATE["io"] = io
        _COMPILE_STATE["pkey"] = pkey
    return _COMPILE_STATE["io"]


def compile_task(kernel_name: str, config: dict, problem_dict: dict, facts: str = "ptxas") -> CompileResult:
    """Compile one config for the problem's specialisation (fills Triton's cache) and read
    its static facts. Runs in a pool process started with `_init_compile_worker`.
    `facts`: "ptxas" (registers and spill-store bytes from a second ptxas run, as datasets
    record them), "triton" (what is free: shared memory offline, plus Triton's register and
    spill counts when the worker holds a CUDA context; the benchmark worker reads the rest at
    the first launch), "none" (a prefetch: the cache is the point)."""
    from .. import kernels
    from ..problem import Problem

    spec = kernels.get(kernel_name)
    problem = Problem.from_dict(problem_dict)
    res = _compile(spec, config, problem, facts)
    duck = isinstance(_COMPILE_STATE["io"][1], DuckTensor)
    if duck and not _COMPILE_STATE.get("duck_ok"):
        if res.ok:
            _COMPILE_STATE["duck_ok"] = True
        else:  # perhaps this Triton (or this kernel's launch) wants real tensor objects
            _COMPILE_STATE["no_duck"] = True
            _COMPILE_STATE.pop("pkey", None)
            res = _compile(spec, config, problem, facts)
    return res


def _compile(spec: Any, config: dict, problem: Any, facts: str) -> CompileResult:
    inputs, out = _compile_inputs(spec, problem)
    offline = "target" in _COMPILE_STATE
    _COMPILE_STATE["kernel"] = None
    t0 = time.perf_counter()
    try:
        spec.launch(config, inputs, out)
        k = _COMPILE_STATE["kernel"]
        compile_s = time.perf_counter() - t0
        if k is None or facts == "none":
            return CompileResult("ok", compile_s)
        smem = int(getattr(k.metadata, "shared", 0) or 0)
        if offline:
            from .static import prune_reason  # registers are unknown until a launch: smem only

            why = prune_reason({"smem_bytes": smem}, config, problem.hardware) if problem.hardware else ""
            if why:
                return CompileResult("resource_error", compile_s, None, smem, error=f"out of resource: {why}")
            regs = spills = None
        else:
            k._init_handles()  # loads the module: raises OutOfResources if it cannot fit
            regs = int(getattr(k, "n_regs", 0) or 0)
            spills = _spill_bytes(k)
        if facts == "triton":
            return CompileResult("ok", compile_s, regs, smem, spills, "triton")
        # spills as the static evaluator reports them (ptxas spill-store bytes), not Triton's
        # n_spills (local memory / 4), so live and static facts agree
        try:
            from .static import run_ptxas

            pf = run_ptxas(k.asm["ptx"], _capability(), timeout_s=60)
            regs = regs if regs is not None else pf.get("registers")
            return CompileResult("ok", compile_s, regs, smem, pf.get("spill_stores"), "ptxas", pf.get("stack_bytes"))
        except Exception as e:  # noqa: BLE001 - facts are optional
            return CompileResult("ok", compile_s, regs, smem, None, "ptxas", error=f"ptxas: {str(e)[-300:]}")
    except Exception as e:  # noqa: BLE001 - every failure becomes a measurement
        status, _ = classify_error(e)
        if status == "runtime_error":
            status = "compile_error"
        return CompileResult(status, time.perf_counter() - t0, error=_short(e))


def _spill_bytes(kernel: Any) -> int:
    """Spills of a loaded binary in bytes: Triton counts local memory in 4-byte words."""
    return int(getattr(kernel, "n_spills", 0) or 0) * 4


def _capability() -> int:
    if "target" in _COMPILE_STATE:
        return int(_COMPILE_STATE["target"][0])
    import torch

    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


# -------------------------------------------------------------------------- benchmark

def _first_launch(fn: Any) -> dict[str, Any]:
    """Run a config's first launch and read, from the binary Triton loaded for it, what
    offline compile workers cannot: registers and spills; and whether Triton had to compile
    it here (a cache miss: the compile workers' binaries were not reused)."""
    from triton.runtime.jit import JITFunction

    try:
        from triton import knobs
        comp = knobs.compilation
    except (ImportError, AttributeError):  # triton without compile listeners: no miss signal
        comp = None
    got: dict[str, Any] = {"kernel": None, "compiled": False}
    orig = JITFunction.run

    def run(self, *args, **kwargs):  # noqa: ANN001
        kernel = orig(self, *args, **kwargs)
        got["kernel"] = kernel
        return kernel

    def listener(**kw: Any) -> None:
        if not kw.get("cache_hit", True):
            got["compiled"] = True
    old = getattr(comp, "listener", None) if comp is not None else None
    JITFunction.run = run  # type: ignore[method-assign]
    if comp is not None:
        comp.listener = listener
    try:
        fn()
    finally:
        JITFunction.run = orig  # type: ignore[method-assign]
        if comp is not None:
            comp.listener = old
    k = got["kernel"]
    facts: dict[str, Any] = {"compiled_here": got["compiled"]}
    if k is not None and hasattr(k, "n_regs"):
        facts["registers"] = int(getattr(k, "n_regs", 0) or 0) or None
        facts["spills"] = _spill_bytes(k)
        facts["smem_bytes"] = int(getattr(k.metadata, "shared", 0) or 0)
    return facts


# An idle GPU sits at its lowest clock (345 MHz on an H100) and boosts only once it has been
# under load for a while: a config timed in that window looks slow for no fault of its own,
# and the search keeps the wrong incumbent. After an idle spell the worker keeps the GPU busy
# for a moment before it times anything.
IDLE_S = 2.0
WARMUP_S = 0.3


class _Bench:
    """State of the benchmark server: one problem's inputs, reference and flush buffer."""

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.spec = None
        self.problem = None
        # larger than any L2 we know (H100: 50 MB) so each timed run starts cold
        self.flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda")
        self.graph_ok = True  # CUDA-graph timing works here (set False at its first failure)
        self.last_busy = -math.inf  # perf_counter when the GPU last finished work for us
        self.warmups = 0

    def warm_up(self, seconds: float = WARMUP_S) -> None:
        """Keep the GPU busy for `seconds` (L2-flush writes: any kernel raises its clocks)."""
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in range(16):
                self.flush.zero_()
            self.torch.cuda.synchronize()
        self.warmups += 1

    def _awake(self) -> None:
        if time.perf_counter() - self.last_busy > IDLE_S:
            self.warm_up()

    def setup(self, kernel_name: str, problem_dict: dict, seed: int) -> SetupReply:
        from .. import kernels
        from ..problem import Problem

        torch = self.torch
        self.spec = kernels.get(kernel_name)
        self.problem = Problem.from_dict(problem_dict)
        self.inputs = self.out = self.ref = None
        torch.cuda.empty_cache()
        self.inputs = self.spec.make_inputs(self.problem, "cuda", seed)
        self.ref = self.spec.reference(self.inputs)
        self.out = self.spec.alloc_output(self.problem, self.inputs)
        torch.cuda.synchronize()
        return SetupReply(torch.cuda.get_device_name())

    def release(self) -> SetupReply:
        """Drop the problem's inputs, output and reference (an idle daemon keeps only the
        context and the flush buffer)."""
        self.spec = self.problem = None
        self.inputs = self.out = self.ref = None
        self.torch.cuda.empty_cache()
        return SetupReply(self.torch.cuda.get_device_name())

    def _poison(self) -> None:
        if self.out.dtype.is_floating_point:
            self.out.fill_(math.nan)
        else:
            self.out.fill_(-1)

    def _time(self, fn, reps: int) -> list[float]:
        torch = self.torch
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            self.flush.zero_()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]

    def _call(self, config: dict | None):
        """One launch of `config`; None or {"impl": ...}: the torch implementation (cuBLAS for
        matmul), so the vendor is timed by the same code as the configs."""
        if config is None or "impl" in config:
            return lambda: self.spec.torch_baseline(self.inputs, self.out)
        return lambda: self.spec.launch(config, self.inputs, self.out)

    def _time_graph(self, fn, reps: int) -> list[float] | None:
        """Like `_time`, but the reps (flush, start event, launch, end event) are captured in
        one CUDA graph and replayed at once: no host launch between the GPU's work, so a
        microsecond kernel is timed without launch gaps or the host's jitter. Events are
        `external` (recorded as graph nodes). None where this torch or driver cannot: the
        caller times with plain events."""
        torch = self.torch
        try:
            starts = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(reps)]
            ends = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(reps)]
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for i in range(reps):
                    self.flush.zero_()
                    starts[i].record()
                    fn()
                    ends[i].record()
            g.replay()
            torch.cuda.synchronize()
            out = [s.elapsed_time(e) for s, e in zip(starts, ends)]
            del g
            return out
        except Exception:  # noqa: BLE001 - no graph timing here; events still work
            self.graph_ok = False
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001 - a poisoned context surfaces at the next call
                pass
            return None

    def _samples(self, fn, reps: int, est_ms: float, graph_below_ms: float | None) -> tuple[list[float], str]:
        """Timed samples and how they were taken ("graph" for kernels under `graph_below_ms`)."""
        if graph_below_ms is not None and est_ms < graph_below_ms and self.graph_ok:
            got = self._time_graph(fn, reps)
            if got is not None:
                return got, "graph"
        return self._time(fn, reps), "events"

    def bench(self, config: dict | None, target_ms: float = 25.0, min_reps: int = 5,
              max_reps: int = 100, check: bool = True, stop_above_ms: float | None = None,
              graph_below_ms: float | None = None) -> BenchReply:
        torch = self.torch
        t_start = time.perf_counter()
        fn = self._call(config)
        res: dict[str, Any] = {}
        try:
            self._awake()
            return self._bench(fn, config, target_ms, min_reps, max_reps, check, stop_above_ms, t_start, res,
                               graph_below_ms)
        except Exception as e:  # noqa: BLE001
            status, sticky = classify_error(e)
            if not sticky:
                try:
                    torch.cuda.synchronize()
                except Exception:  # noqa: BLE001 - the context is gone
                    sticky = True
            return BenchReply(status, bench_s=time.perf_counter() - t_start, error=_short(e), sticky=sticky,
                              first_call_s=res.get("first_call_s"))
        finally:
            self.last_busy = time.perf_counter()

    def _bench(self, fn, config, target_ms, min_reps, max_reps, check, stop_above_ms, t_start,
               res: dict[str, Any], graph_below_ms: float | None = None) -> BenchReply:
        """One timing: poison, first call, correctness check, a 3-run estimate (early stop),
        then a full median (in a CUDA graph for kernels under `graph_below_ms`). Raises what the
        kernel raises (bench() turns it into a reply)."""
        torch = self.torch
        self._poison()
        t0 = time.perf_counter()
        facts: dict[str, Any] = {}
        if config is None:
            fn()
        else:
            facts = _first_launch(fn)
        torch.cuda.synchronize()
        res["first_call_s"] = time.perf_counter() - t0  # includes a JIT compile on a cache miss
        rel_err = None
        if check and config is not None:  # torch baselines may not write `out` (no out=)
            passed, rel = self.spec.check(self.out, self.ref)
            rel_err = rel if math.isfinite(rel) else None
            if not passed:
                return BenchReply("wrong_result", bench_s=time.perf_counter() - t_start,
                                  first_call_s=res["first_call_s"], rel_err=rel_err,
                                  error=f"relative error {rel:.3g} above tolerance", **facts)
        first = self._time(fn, 3)
        est = statistics.median(first)
        if stop_above_ms is not None and est > stop_above_ms:
            # clearly slower than the incumbent: a full median would decide nothing
            return BenchReply("ok", est, tuple(first), time.perf_counter() - t_start, res["first_call_s"],
                              rel_err, early_stop=True, **facts)
        reps = int(min(max_reps, max(min_reps, target_ms / max(est, 1e-4))))
        samples, how = self._samples(fn, reps, est, graph_below_ms)
        return BenchReply("ok", statistics.median(samples), tuple(samples), time.perf_counter() - t_start,
                          res["first_call_s"], rel_err, timing=how, **facts)

    def interleaved(self, configs: list[dict], rounds: int, reps: int,
                    graph_below_ms: float | None = None) -> list[list[float]]:
        """Re-time configs round-robin so drift (clocks, heat, neighbours) hits all alike;
        microsecond kernels in CUDA graphs, as `bench` times them."""
        samples: list[list[float]] = [[] for _ in configs]
        est: list[float] = [math.inf] * len(configs)
        self._awake()
        for _ in range(rounds):
            for i, cfg in enumerate(configs):
                fn = self._call(cfg)
                if graph_below_ms is not None and not math.isfinite(est[i]):
                    est[i] = statistics.median(self._time(fn, 3))  # graph or events: decided once
                samples[i] += self._samples(fn, reps, est[i], graph_below_ms)[0]
        self.last_busy = time.perf_counter()
        return samples


def bench_server(conn: Any, env: dict[str, str] | None = None, path: list[str] | None = None) -> None:  # noqa: C901
    """Main loop of the benchmark worker process. `env`, `path`: the parent's environment and
    sys.path when it started us (a fork server holds older ones), set before CUDA starts."""
    _adopt(env, path)
    try:
        bench = _Bench()
    except Exception as e:  # noqa: BLE001
        conn.send({"status": "runtime_error", "error": f"cannot start the benchmark worker: {_short(e)}",
                   "sticky": True})
        return
    conn.send({"ready": True, "pid": os.getpid()})
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        op = msg.get("op")
        try:
            if op == "stop":
                return
            if op == "setup":
                reply = bench.setup(msg["kernel"], msg["problem"], msg.get("seed", 0))
            elif op == "release":
                reply = bench.release()
            elif op == "bench":
                reply = bench.bench(msg.get("config"), **msg.get("opts", {}))
            elif op == "interleaved":
                reply = InterleavedReply(bench.interleaved(msg["configs"], msg["rounds"], msg["reps"],
                                                           msg.get("graph_below_ms")))
            else:
                reply = BenchReply("runtime_error", error=f"unknown op {op!r}")
        except Exception as e:  # noqa: BLE001
            status, sticky = classify_error(e)
            reply = (InterleavedReply(status=status, error=_short(e), sticky=sticky) if op == "interleaved"
                     else BenchReply(status, error=_short(e), sticky=sticky))
        conn.send(reply)
        if getattr(reply, "sticky", False):
            os._exit(3)  # the CUDA context is poisoned; the parent restarts us
