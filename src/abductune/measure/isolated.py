"""`@abductune.autotune(isolate=True)`: measure candidate configs in a worker process, so a
config that crashes (a segfault, an abort, a sticky CUDA error) or hangs kills only the
worker, never the caller.

Caller side (`IsolatedEvaluator`, same interface as `InProcessEvaluator`): the call's
arguments are copied to host memory once per tune (`encode`); a worker (`python -c`, like the
compile workers, so an unguarded user script is not re-run) runs the entry point the caller
names, which imports the kernel by `module:qualname` (`kernel_target`), rebuilds the arguments
on their devices and rebuilds the caller's autotuner around them, so each trial runs exactly
as in-process (the decorator's side: abductune/autotune/isolation.py and isolated_worker.py;
this layer imports neither). Per config the caller sends the config and what `trial(config)`
adds (its config-level pre_hook and its concrete grid: grids are usually closures, which
cannot be sent), and waits at most `timeout_s`. A worker that dies or does not answer is a
failed measurement of that config; the next config gets a fresh worker. Callables cross the
pipe by reference (pickle), so they must be importable module-level names (`importable`);
that is checked once, before the first tune. The worker's loop is measure/isolated_worker.py.
"""
from __future__ import annotations

import collections
import logging
import os
import pickle
import select
import signal
import statistics
import struct
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Mapping, Sequence

from ..errors import AbductuneError
from ..measurement import Measurement, Status
from ..problem import Problem
from ..space import Config, Space
from .base import Evaluator
from .inprocess import status_of
from .isolated_worker import TensorCopy, frame

log = logging.getLogger(__name__)

START_TIMEOUT_S = 120.0  # importing torch and triton, rebuilding the arguments, initialising CUDA
_TAIL_LINES = 20  # the worker's last stderr lines quoted in a crash's error
_FIX = "define it at module level in an importable module (a .py file on sys.path), or use isolate=False"


# ----------------------------------------------------------------------------- what may cross

def _why_not_importable(mod: str | None, qual: str | None, same: Callable[[Any], bool]) -> str | None:
    if not mod or not qual:
        return "it has no module-level name (a partial or a callable object?)"
    if mod == "__main__":
        return "it is defined in __main__ (a script or a notebook), which the worker does not run"
    if "<lambda>" in qual:
        return "it is a lambda"
    if "<locals>" in qual:
        return "it is defined inside a function"
    module = sys.modules.get(mod)
    if module is None or not getattr(module, "__file__", None):
        return f"module {mod} has no file the worker could import"
    found: Any = module
    for part in qual.split("."):
        found = getattr(found, part, None)
    return None if same(found) else f"{mod}.{qual} does not name it"


def importable(obj: Any, what: str) -> str:
    """`module:qualname` of a callable the worker can import (it is then sent by reference),
    else AbductuneError naming `what` and why."""
    why = _why_not_importable(getattr(obj, "__module__", None), getattr(obj, "__qualname__", None),
                              lambda found: found is obj)
    if why:
        raise AbductuneError(f"isolate=True: the measuring worker cannot import the {what} {obj!r}: {why}; {_FIX}")
    return f"{obj.__module__}:{obj.__qualname__}"


def kernel_target(tuner: Any) -> tuple[str, int]:
    """(module:qualname, hops): the module-level name the worker imports and how many `.fn`
    steps lead from it to what the autotuner launches (0: the @triton.jit function itself,
    1: an autotuner decorating it in place)."""
    base = tuner.base_fn
    hops: list[int] = []

    def same(found: Any) -> bool:
        for i in range(16):
            if found is tuner.fn:
                hops.append(i)
                return True
            if found is None:
                return False
            found = getattr(found, "fn", None)
        return False
    why = _why_not_importable(base.__module__, base.__qualname__, same)
    if why:
        raise AbductuneError(f"isolate=True: the measuring worker imports the kernel by module and name, but "
                             f"{base.__name__}: {why}; move the kernel (with its decorators) into a module the "
                             "script imports, or use isolate=False")
    return f"{base.__module__}:{base.__qualname__}", hops[0]


def encode(name: str, v: Any, memo: dict) -> Any:
    """An argument as the worker receives it; AbductuneError for what cannot be sent. A tensor
    passed twice (the same view) is one tensor in the worker too."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(v, torch.dtype):
        return v
    if torch is not None and isinstance(v, torch.Tensor):
        key = (v.data_ptr(), v.dtype, tuple(v.shape), v.stride(), str(v.device))
        if key not in memo:
            data = torch.empty(tuple(v.shape), dtype=v.dtype).copy_(v.detach())
            memo[key] = TensorCopy(data, tuple(v.stride()), str(v.device))
        return memo[key]
    raise AbductuneError(f"isolate=True: argument {name!r} is a {type(v).__name__}, which cannot be sent to the "
                         "measuring worker (it takes tensors, numbers, strings and None); use isolate=False")


class _Lost(Exception):
    """The worker died (`what`: how) or did not answer; `tail`: its last stderr lines."""

    def __init__(self, status: Status, what: str, tail: str = ""):
        super().__init__(what)
        self.status = status
        self.what = what
        self.tail = tail

    def text(self, doing: str) -> str:
        return f"{self.what} {doing}" + (f"; its last output:\n{self.tail}" if self.tail else "")


# ----------------------------------------------------------------------------- caller side

class IsolatedEvaluator(Evaluator):
    """Times configs of one kernel call in a worker process (see the module docstring).
    `entry`: the worker's entry point, `module:function` (it calls `isolated_worker.serve`
    with what rebuilds the call); `setup`: what that rebuilds the call from (sent once per
    worker); `trial(config)`: what a request adds to the config; `prune`, `warm` and `calls`
    as in `InProcessEvaluator`."""

    remeasures_impls = True  # an {"impl": name} config re-times like any other (the Session's run-off)

    def __init__(self, problem: Problem, space: Space, setup: Mapping[str, Any], trial: Callable[[Config], dict],
                 *, entry: str, prune: Callable[[Config], str | None] | None = None, timeout_s: float = 120.0):
        self.problem = problem
        self.entry = entry
        self.space = space
        self.trial = trial
        self.prune = prune
        self.warm: Callable[[list[Config]], None] | None = None
        self.timeout_s = timeout_s
        self.clock = 0.0
        self.calls = 0
        self.starts = 0  # workers started: 1 + one per crash
        try:
            self._setup = frame(dict(setup))  # pickled once: restarts reuse it
        except Exception as e:  # noqa: BLE001 - validated names make this rare; say what failed
            raise AbductuneError(f"isolate=True: this call cannot be sent to the measuring worker: "
                                 f"{type(e).__name__}: {e}") from None
        self._proc: Any = None
        self._tee: Any = None
        self._tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self._start()  # a worker that cannot start is the user's error, raised before measuring

    # -- the worker's lifetime
    def _start(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self._tail.clear()
        module, function = self.entry.split(":")
        self._proc = subprocess.Popen([sys.executable, "-c", f"from {module} import {function}; {function}()"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      env=env, bufsize=0)
        self._tee = threading.Thread(target=_tee, args=(self._proc.stderr, self._tail), daemon=True,
                                     name="abductune-isolated-stderr")
        self._tee.start()
        deadline = time.monotonic() + max(self.timeout_s, START_TIMEOUT_S)
        try:
            self._recv(deadline)  # "ready": imports done, it reads now, so the setup write cannot block
            self._send_bytes(self._setup)
            answer = self._recv(deadline)
        except _Lost as e:
            self.close()
            raise AbductuneError(f"isolate=True: the measuring worker did not start: {e.text('while starting')}"
                                 ) from None
        if "error" in answer:
            self.close()
            raise AbductuneError(f"isolate=True: the measuring worker could not set up this call: {answer['error']}")
        self.starts += 1

    def close(self) -> None:
        p, self._proc = self._proc, None
        if p is None:
            return
        try:
            p.stdin.close()  # the worker's loop ends at end of input
            p.wait(2)
        except Exception:  # noqa: BLE001 - still busy (or stuck): end it
            p.kill()
            p.wait()
        p.stdout.close()
        self._tee.join(1.0)  # it closes stderr at end of input

    # -- the pipe
    def _send_bytes(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._proc.stdin.fileno(), view):]
        except (BrokenPipeError, OSError):
            raise self._died() from None

    def _recv(self, deadline: float) -> Any:
        (n,) = struct.unpack("<Q", self._read(8, deadline))
        return pickle.loads(self._read(n, deadline))

    def _read(self, n: int, deadline: float) -> bytes:
        fd = self._proc.stdout.fileno()
        buf = bytearray()
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self._proc.kill()
                self._proc.wait()
                raise _Lost(Status.TIMEOUT, "worker killed after no answer")
            chunk = os.read(fd, n - len(buf))
            if not chunk:
                raise self._died()
            buf += chunk
        return bytes(buf)

    def _died(self) -> _Lost:
        try:
            rc = self._proc.wait(10)
        except subprocess.TimeoutExpired:  # closed its output but lives on: end it
            self._proc.kill()
            rc = self._proc.wait()
        if rc < 0:
            try:
                what = f"worker killed by {signal.Signals(-rc).name}"
            except ValueError:
                what = f"worker killed by signal {-rc}"
        else:
            what = f"worker exited with code {rc}"
        self._tee.join(1.0)  # its last lines (a segfault's Python stack) are the crash's context
        return _Lost(Status.RUNTIME_ERROR, what, "".join(self._tail).strip())

    # -- measuring
    def _ask(self, op: str, cfg: Config) -> Measurement:
        """One request for one config; a lost worker is this config's failure."""
        try:
            extra = self.trial(cfg)
        except Exception as e:  # noqa: BLE001 - a grid that fails for a config fails that config, as in-process
            return Measurement(cfg, status_of(e), error=f"{type(e).__name__}: {e}"[:2000])
        if self._proc is None:
            log.info("%s: starting a fresh measuring worker", self.problem.kernel)
            self._start()
        t0 = time.perf_counter()
        try:
            self._send_bytes(frame({"op": op, "config": cfg, **extra}))
            reply = self._recv(time.monotonic() + self.timeout_s)
        except _Lost as e:
            dt = time.perf_counter() - t0
            self.clock += dt
            self.close()
            if e.status is Status.TIMEOUT:
                e.what += f" within {self.timeout_s:g}s (isolate_timeout_s)"
            text = e.text("while running this config")
            log.warning("%s: config %s: %s while running it; a fresh worker measures the next one",
                        self.problem.kernel, cfg, e.what)
            return Measurement(cfg, e.status, bench_s=dt, error=text[:2000])
        self.clock += time.perf_counter() - t0
        if reply.get("restart"):  # the CUDA context is poisoned: the next config gets a fresh worker
            self.close()
        return reply["measurement"]

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        cfgs = [dict(c) for c in configs]
        out = []
        for i, c in enumerate(cfgs):
            later = [x for x in cfgs[i + 1:] if "impl" not in x]
            if self.warm is not None and later:  # compile workers fill Triton's cache, which the worker reads
                try:
                    self.warm(later)
                except Exception as e:  # noqa: BLE001 - an optimisation
                    log.info("parallel compile failed (%s: %s)", type(e).__name__, e)
                    self.warm = None
            self.calls += 1
            why = self.prune(c) if self.prune is not None and "impl" not in c else None
            out.append(Measurement(c, Status.PRUNED, error=why) if why else self._ask("evaluate", c))
        return out

    def remeasure(self, configs: Sequence[Mapping[str, Any]], *, rounds: int = 1) -> list[Measurement]:
        """Interleaved re-timing as in-process (A, B, C, A, B, C, ...), one request per timing
        so that a crash is charged to the config that caused it."""
        cfgs = [dict(c) for c in configs]
        times: list[list[float]] = [[] for _ in cfgs]
        failed: list[Measurement | None] = [None] * len(cfgs)
        t0 = time.perf_counter()
        for _ in range(max(1, rounds)):
            for i, c in enumerate(cfgs):
                if failed[i] is None:
                    m = self._ask("remeasure", c)
                    if m.ok:
                        times[i].append(m.time_ms)  # type: ignore[arg-type]
                    else:
                        failed[i] = m
        each = (time.perf_counter() - t0) / max(1, len(cfgs))
        self.calls += len(cfgs)
        return [f.replace(bench_s=each) if f is not None else
                Measurement(c, time_ms=statistics.median(ts), samples_ms=tuple(ts), bench_s=each)
                for c, ts, f in zip(cfgs, times, failed)]


def _tee(stream: Any, tail: collections.deque) -> None:
    """The worker's stderr (and its prints) go where the caller's would; the last lines are
    kept for a crash's error."""
    with stream:
        for line in iter(stream.readline, b""):
            text = line.decode(errors="replace")
            tail.append(text)
            try:
                sys.stderr.write(text)
            except Exception:  # noqa: BLE001 - the caller closed its stderr
                pass
