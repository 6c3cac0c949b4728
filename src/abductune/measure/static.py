"""Compile-only evaluator: registers, spills and shared memory of each config, no GPU needed.

Triton compiles for an NVIDIA target on a CPU-only machine. For each config we compile the
kernel for the problem's shape (`KernelSpec.compile_spec`, specialised like a real launch),
read the dynamic shared memory from the compiled metadata, and run Triton's own bundled ptxas
with `-v` on the generated PTX to read "Used N registers" and "N bytes spill stores/loads"
(the cubin records registers but not spills, and Triton's own ptxas log is lost on a cache hit).
A config that cannot launch on the target (shared memory over the per-block limit, or more
registers than an SM holds for its threads) is `pruned` before any GPU time is spent.

Compiles run in spawned worker processes, at most `workers` at a time so each one's start time
is known; one that runs past `timeout_s` is recorded as `timeout` and the pool is replaced
(the other in-flight compiles are resubmitted). A worker that dies (a crash inside MLIR or
ptxas) is retried alone once, then recorded as `compile_error`. Nothing here raises for a
config: every outcome is a Measurement.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import math
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import deque
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..errors import AbductuneError
from ..hardware import KNOWN_GPUS, HardwareInfo
from ..measurement import Measurement
from ..problem import Problem
from .base import Evaluator

if TYPE_CHECKING:
    from ..kernels.base import KernelSpec

# The GPU whose limits judge a config when the problem names no hardware.
ARCH_HARDWARE = {80: "A100-SXM", 89: "L40S", 90: "H100-SXM", 100: "B200"}
_ERROR_CHARS = 4000  # keep the tail of long compiler messages (the part that names the cause)


def capability(arch: str) -> int:
    """'sm_90' / 'sm_90a' / '90' -> 90."""
    m = re.fullmatch(r"(?:sm_)?(\d+)a?", str(arch).strip())
    if not m:
        raise AbductuneError(f"arch {arch!r} is not an NVIDIA compute capability like 'sm_90'")
    return int(m.group(1))


def default_hardware(arch: str) -> HardwareInfo:
    cap = capability(arch)
    if cap not in ARCH_HARDWARE:
        raise AbductuneError(f"no default GPU for {arch!r} (known: "
                             f"{', '.join(f'sm_{c}' for c in ARCH_HARDWARE)}); give the Problem a hardware")
    return KNOWN_GPUS[ARCH_HARDWARE[cap]]


# ------------------------------------------------------------------------- ptxas

def ptxas_path(cap: int) -> str:
    """The ptxas Triton itself uses for this capability, across Triton 3.3 - 3.9 layouts."""
    try:
        from triton.backends.nvidia import compiler as nv
    except ImportError:  # pragma: no cover - triton without the NVIDIA backend
        nv = None
    tool: Any = None
    if nv is not None and hasattr(nv, "get_ptxas"):
        try:
            tool = nv.get_ptxas(cap)  # 3.5+: picks ptxas or ptxas-blackwell by arch
        except TypeError:
            tool = nv.get_ptxas()  # 3.4: one ptxas
    if tool is None:
        with contextlib.suppress(ImportError, AttributeError):
            from triton import knobs

            tool = knobs.nvidia.ptxas
    if tool is None and nv is not None and hasattr(nv, "_path_to_binary"):
        tool = nv._path_to_binary("ptxas")  # <= 3.3: (path, version)
    path = getattr(tool, "path", None) or (tool[0] if isinstance(tool, tuple) else tool)
    path = path or shutil.which("ptxas")
    if not path:
        raise RuntimeError("no ptxas found (neither Triton's bundled one nor one on PATH)")
    return str(path)


def ptxas_arch(cap: int) -> str:
    """The --gpu-name Triton passes: arch-specific features ('a') from Hopper on."""
    with contextlib.suppress(ImportError, AttributeError):
        from triton.backends.nvidia.compiler import sm_arch_from_capability

        return sm_arch_from_capability(cap)
    return f"sm_{cap}{'a' if cap >= 90 else ''}"


_RE_REGS = re.compile(r"Used (\d+) registers")
_RE_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_RE_STACK = re.compile(r"(\d+) bytes stack frame")
_RE_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas_log(log: str) -> dict[str, int | None]:
    """registers, spill_stores, spill_loads, stack_bytes, static_smem from `ptxas -v` output
    (the maximum over entry functions; None when the log does not say)."""
    def biggest(rx: re.Pattern[str], group: int = 1) -> int | None:
        vals = [int(m.group(group)) for m in rx.finditer(log)]
        return max(vals) if vals else None

    return {"registers": biggest(_RE_REGS), "spill_stores": biggest(_RE_SPILL, 1),
            "spill_loads": biggest(_RE_SPILL, 2), "stack_bytes": biggest(_RE_STACK),
            "static_smem": biggest(_RE_SMEM)}


def run_ptxas(ptx: str, cap: int, timeout_s: float | None = None) -> dict[str, int | None]:
    with tempfile.TemporaryDirectory(prefix="abductune-ptxas-") as tmp:
        src = os.path.join(tmp, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        # -lineinfo as Triton passes it; the output cubin is thrown away, we want the log.
        cmd = [ptxas_path(cap), "-v", "-lineinfo", f"--gpu-name={ptxas_arch(cap)}", src,
               "-o", os.path.join(tmp, "k.cubin")]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        if r.returncode != 0:
            raise RuntimeError(f"ptxas failed ({r.returncode}): {r.stderr[-_ERROR_CHARS:]}")
        return parse_ptxas_log(r.stdout + r.stderr)


# ------------------------------------------------------------------- one compile

class _CompileTimeout(BaseException):
    """Raised by the alarm inside a compile (BaseException so compiler code cannot swallow it)."""


@contextlib.contextmanager
def _alarm(timeout_s: float | None):
    """Best-effort in-process deadline (only in a main thread; a long C++ pass finishes first —
    the evaluator's pool kill is the hard limit)."""
    usable = (timeout_s and timeout_s > 0 and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def fire(signum, frame):
        raise _CompileTimeout()

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, float(timeout_s))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def _captured_output():
    """Send fds 1 and 2 (Python prints, MLIR diagnostics, Triton's dump of failing PTX) to a
    temporary file; yields a callable returning what was written."""
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        for s in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                s.flush()
        saved = [os.dup(1), os.dup(2)]
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        text: list[str] = []

        def read() -> str:
            return "".join(text)

        try:
            yield read
        finally:
            for s in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    s.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            tmp.seek(0)
            text.append(tmp.read().decode(errors="replace"))


def prune_reason(facts: Mapping[str, Any], config: Mapping[str, Any], hw: HardwareInfo) -> str:
    """Why a compiled config cannot launch on `hw`, or '' when it can."""
    smem = facts.get("smem_bytes")
    if smem is not None and hw.smem_per_block and smem > hw.smem_per_block:
        return (f"shared memory {smem} B exceeds the per-block limit {hw.smem_per_block} B "
                f"of {hw.name}")
    regs = facts.get("registers")
    threads = int(config.get("num_warps", 4)) * hw.warp_size
    if regs and hw.regs_per_sm:
        alloc = math.ceil(regs / 8) * 8  # registers are allocated per thread in units of 8
        if alloc * threads > hw.regs_per_sm:
            return (f"{regs} registers x {threads} threads = {alloc * threads} exceeds the "
                    f"{hw.regs_per_sm} registers of one {hw.name} SM")
    return ""


def compile_one(kernel_name: "str | KernelSpec", config: dict, problem_dict: dict, arch: str = "sm_90",
                timeout_s: float | None = None) -> dict[str, Any]:
    """Compile one config for `arch` and read its static facts. Never raises.

    Returns {"status": "ok" | "compile_error" | "pruned" | "timeout", "registers", "spills"
    (bytes of spill stores), "smem_bytes" (dynamic shared memory Triton requests plus ptxas's
    static), "compile_s" (triton.compile seconds), "error", and the extras "spill_loads",
    "stack_bytes", "triton_n_spills" (stack_bytes // 4, what CompiledKernel.n_spills says after
    a launch), "analysis_s" (ptxas -v seconds), "hardware", "mma" (the tensor-core instruction in
    the PTX: "wgmma", "mma.sync", or None)}.
    """
    out: dict[str, Any] = {"status": "compile_error", "registers": None, "spills": None,
                           "smem_bytes": None, "compile_s": 0.0, "error": "", "spill_loads": None,
                           "stack_bytes": None, "triton_n_spills": None, "analysis_s": 0.0, "hardware": None,
                           "mma": None}
    t0 = time.perf_counter()
    try:
        cap = capability(arch)
        problem = Problem.from_dict(problem_dict)
        hw = problem.hardware or default_hardware(arch)
        out["hardware"] = hw.name
        if isinstance(kernel_name, str):
            from .. import kernels

            spec = kernels.get(kernel_name)
        else:
            spec = kernel_name
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        fn, signature, constexprs, options = spec.compile_spec(dict(config), problem)
        hints = spec.compile_attrs(dict(config), problem) if hasattr(spec, "compile_attrs") else {}
        attrs = {(fn.arg_names.index(n),): [["tt.divisibility", d]] for n, d in hints.items()}
        src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
        with _alarm(timeout_s), _captured_output() as logged, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                kernel = triton.compile(src, target=GPUTarget("cuda", cap, 32), options=options)
            except _CompileTimeout:
                raise
            except Exception as e:  # any compiler failure is data
                out["compile_s"] = time.perf_counter() - t0
                out["error"] = f"{type(e).__name__}: {e}"[-_ERROR_CHARS:]
                kernel = None
        if kernel is None:
            extra = logged().strip()
            if extra and extra not in out["error"]:
                out["error"] = (out["error"] + "\n" + extra)[-_ERROR_CHARS:]
            return out
        out["compile_s"] = time.perf_counter() - t0

        t1 = time.perf_counter()
        left = None if not timeout_s else max(1.0, timeout_s - out["compile_s"])
        ptx = kernel.asm["ptx"]
        out["mma"] = "wgmma" if "wgmma" in ptx else "mma.sync" if "mma.sync" in ptx else None
        facts = run_ptxas(ptx, cap, timeout_s=left)
        out["analysis_s"] = time.perf_counter() - t1
        out["registers"] = facts["registers"]
        out["spills"] = facts["spill_stores"]
        out["spill_loads"] = facts["spill_loads"]
        out["stack_bytes"] = facts["stack_bytes"]
        # what a launched kernel's CompiledKernel.n_spills reports: local-memory bytes / 4
        # (checked equal to the launched kernel's on an H100 with Triton 3.6)
        out["triton_n_spills"] = None if facts["stack_bytes"] is None else facts["stack_bytes"] // 4
        out["smem_bytes"] = int(getattr(kernel.metadata, "shared", 0) or 0) + int(facts["static_smem"] or 0)
        reason = prune_reason(out, config, hw)
        out["status"] = "pruned" if reason else "ok"
        out["error"] = reason
    except (_CompileTimeout, subprocess.TimeoutExpired):
        out.update(status="timeout", compile_s=time.perf_counter() - t0,
                   error=f"compile did not finish within {timeout_s} s")
    except Exception as e:  # a bad config key, a missing ptxas: still a measurement
        out.update(status="compile_error", compile_s=time.perf_counter() - t0,
                   error=f"{type(e).__name__}: {e}"[-_ERROR_CHARS:])
    return out


def _warm_worker(kernel: "str | KernelSpec") -> None:
    """Pool initializer: import Triton and the kernel once per worker, not per config."""
    with contextlib.suppress(Exception):
        import triton  # noqa: F401

        if isinstance(kernel, str):
            from .. import kernels

            kernels.get(kernel)


# --------------------------------------------------------------------- evaluator

class StaticEvaluator(Evaluator):
    """Compile-only evaluator: Measurements with static facts and time_ms None."""

    def __init__(self, kernel: "KernelSpec | str", problem: Problem, arch: str = "sm_90",
                 workers: int | None = os.cpu_count(), timeout_s: float | None = 120):
        from .. import kernels

        self.kernel = kernels.get(kernel) if isinstance(kernel, str) else kernel
        # workers look a registered kernel up by name; anything else travels pickled
        self._kernel_ref: Any = self.kernel.name if self.kernel.name in kernels.names() else self.kernel
        self.space = self.kernel.space()
        self.problem = problem
        self.arch = arch
        self.hardware = problem.hardware or default_hardware(arch)
        self.workers = max(1, int(workers or 1))
        self.timeout_s = timeout_s
        self.clock = 0.0
        self._problem_dict = problem.to_dict()
        self._pool: cf.ProcessPoolExecutor | None = None

    # -- pool
    def _get_pool(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            self._pool = cf.ProcessPoolExecutor(max_workers=self.workers,
                                                mp_context=multiprocessing.get_context("spawn"),
                                                initializer=_warm_worker, initargs=(self._kernel_ref,))
            # Start every worker (and its imports) now, so a config's deadline counts its own
            # compile and not the start-up of a fresh process.
            pings = [self._pool.submit(os.getpid) for _ in range(self.workers)]
            cf.wait(pings, timeout=max(60.0, self.timeout_s or 0.0))
        return self._pool

    def _kill_pool(self) -> None:
        """Stop every worker now (a hung compile does not end on its own)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for p in list((getattr(pool, "_processes", None) or {}).values()):
            with contextlib.suppress(Exception):
                p.kill()
        with contextlib.suppress(Exception):
            pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "StaticEvaluator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- evaluation
    def _measurement(self, config: Mapping[str, Any], r: Mapping[str, Any]) -> Measurement:
        extra = {k: r[k] for k in ("spill_loads", "stack_bytes", "triton_n_spills", "analysis_s", "hardware")
                 if r.get(k) is not None}
        extra["arch"] = self.arch
        return Measurement(config=dict(config), status=r["status"], compile_s=float(r.get("compile_s") or 0.0),
                           registers=r.get("registers"), spills=r.get("spills"),
                           smem_bytes=r.get("smem_bytes"), error=r.get("error") or "", extra=extra)

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        t0 = time.perf_counter()
        results: list[Measurement | None] = [None] * len(configs)
        todo: deque[int] = deque(range(len(configs)))
        running: dict[cf.Future, tuple[int, float]] = {}
        crashes: dict[int, int] = {}
        solo: set[int] = set()  # suspects of a worker crash, retried with nothing beside them

        def submit_ready() -> None:
            while todo and len(running) < self.workers:
                i = todo[0]
                if any(j in solo for j, _ in running.values()) or (i in solo and running):
                    return
                todo.popleft()
                f = self._get_pool().submit(compile_one, self._kernel_ref, dict(configs[i]),
                                            self._problem_dict, self.arch, self.timeout_s)
                running[f] = (i, time.perf_counter())

        try:
            while todo or running:
                submit_ready()
                done, _ = cf.wait(list(running), timeout=0.25, return_when=cf.FIRST_COMPLETED)
                broken = False
                for f in done:
                    i, start = running.pop(f)
                    try:
                        results[i] = self._measurement(configs[i], f.result())
                    except BrokenProcessPool:
                        broken = True
                        running[f] = (i, start)  # handled with the other victims below
                    except Exception as e:  # pickling trouble and the like
                        results[i] = Measurement(dict(configs[i]), "compile_error",
                                                 compile_s=time.perf_counter() - start,
                                                 error=f"worker failed: {type(e).__name__}: {e}")
                if broken:
                    # A worker died and took the pool with it. Every in-flight config is a
                    # suspect: retry each alone; one that kills its worker alone is the culprit.
                    for f, (i, start) in running.items():
                        crashes[i] = crashes.get(i, 0) + 1
                        if crashes[i] >= 2 or len(running) == 1:
                            results[i] = Measurement(dict(configs[i]), "compile_error",
                                                     compile_s=time.perf_counter() - start,
                                                     error="the compiler process crashed on this config")
                        else:
                            solo.add(i)
                            todo.appendleft(i)
                    running.clear()
                    self._kill_pool()
                    continue
                now = time.perf_counter()
                late = [f for f, (_, start) in running.items()
                        if self.timeout_s and now - start > self.timeout_s]
                if late:
                    for f in late:
                        i, start = running.pop(f)
                        results[i] = Measurement(dict(configs[i]), "timeout", compile_s=now - start,
                                                 error=f"compile did not finish within {self.timeout_s} s",
                                                 extra={"arch": self.arch})
                    # killing the hung worker kills the pool; the others start again
                    for f, (i, _) in running.items():
                        todo.appendleft(i)
                    running.clear()
                    self._kill_pool()
        finally:
            self.clock += time.perf_counter() - t0  # wall seconds: parallel compiles overlap
        assert all(m is not None for m in results)
        return results  # type: ignore[return-value]

    def prune(self, configs: Sequence[Mapping[str, Any]]) -> tuple[list[dict], list[Measurement]]:
        """(configs that compiled and fit the hardware, measurements of the rest)."""
        kept: list[dict] = []
        dropped: list[Measurement] = []
        for cfg, m in zip(configs, self.evaluate(configs)):
            if m.status == "ok":
                kept.append(dict(cfg))
            else:
                dropped.append(m)
        return kept, dropped
