"""`@abductune.autotune`: a drop-in for `@triton.autotune`, readable in one file like Triton's
`runtime/autotuner.py`. The two-line change:

    import abductune                                   # was: (nothing)
    @abductune.autotune(configs=[...], key=["M", "N", "K"])   # was: @triton.autotune(...)
    @triton.jit
    def matmul_kernel(...): ...

Same call shape and semantics as `triton.autotune` (configs, key, prune_configs_by,
reset_to_zero, restore_value, pre_hook, post_hook, config-level pre_hook, do_bench,
cache_results, warmup/rep); in addition:

- every key is tuned once per *store*, not once per process: a second process (another rank,
  the next run of the script) reads the winner from the store and measures nothing;
- `bucket=` maps key values to buckets ("exact", "pow2", ("align", N), a callable), so two
  sizes in one bucket tune once;
- `space=` / `strategy=` / `budget=` search around the given configs instead of measuring
  only the list (with a list only and no budget, the list is measured, as Triton does);
- `reference=` rejects configs with wrong outputs; `implementations=` lets torch / cuBLAS /
  another kernel compete per key; `on_miss="predict"` serves a stored neighbour's winner at
  once and tunes in a background thread; `isolate=True` measures in a restartable worker
  process, so a config that crashes or hangs is a failed measurement, not a dead caller
  (measure/isolated.py).

Where things happen (a reader should not need another file to follow the mechanism):
`Autotuner.run` builds the in-memory key and launches (the hit path, one dict lookup);
`Autotuner._miss` builds the Problem and Context, reads the store (`_stored_choice`), and
otherwise `_tune`s: one `Session` over an `InProcessEvaluator` on the caller's tensors, so
every measurement is stored and the winner is judged in one place (session.py).
"""
from __future__ import annotations

import ast
import contextlib
import hashlib
import inspect
import itertools
import logging
import math
import numbers
import os
import re
import statistics
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from .errors import AbductuneError
from .hardware import HardwareInfo
from .measure.base import Evaluator
from .measure.inprocess import InProcessEvaluator, Launch, bench_timer, wall_clock_bench
from .measurement import Measurement
from .problem import Problem
from .search import Budget
from .search.base import Seed
from .session import Session, SessionResult
from .space import Choice as ChoiceParam
from .space import Config, IntRange, Param, Pow2, Space
from .store import Context, Store, config_key, default_path

log = logging.getLogger(__name__)

__all__ = ["autotune", "Autotuner", "Choice", "patch_triton", "space_from_configs", "kernel_source_hash",
           "bucket_function", "compile_plan", "pick", "stored_winner", "triton_config_json"]

# Options of a triton.Config besides its kwargs, with Triton's defaults (a param only when a
# config in the list sets a non-default value; num_warps and num_stages always).
OPTIONS = {"num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None, "ir_override": None}
_ALWAYS = ("num_warps", "num_stages")
_LAUNCH_KW = ("grid", "warmup")  # what KernelInterface.__getitem__ adds to every call
PRINT_ENV = "ABDUCTUNE_PRINT_AUTOTUNING"
_HULL_MAX = 64  # an integer range wider than this is not filled in (only powers of two are)


# ----------------------------------------------------------------------------- buckets

def _pow2(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 1:
        return v
    return 1 << (v - 1).bit_length()


def bucket_function(spec: Any, name: str = "") -> Callable[[Any], Any] | None:
    """A key argument's bucket: "exact" (None: the value itself), "pow2" (next power of two),
    ("align", N) (next multiple of N) or a callable value -> bucket."""
    if spec is None or spec == "exact":
        return None
    if spec == "pow2":
        return _pow2
    if isinstance(spec, tuple) and len(spec) == 2 and spec[0] == "align":
        n = spec[1]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise AbductuneError(f"bucket for {name!r}: ('align', N) needs an integer N >= 1, got {n!r}")
        return lambda v: -(-v // n) * n if isinstance(v, int) and not isinstance(v, bool) else v
    if callable(spec):
        return spec
    raise AbductuneError(f"bucket for {name!r} is {spec!r}; use 'exact', 'pow2', ('align', N) or a callable")


# an empty list searches nothing and launches with no meta-parameters: refused when decorating
_NOTHING_TO_TUNE = ("@abductune.autotune with {what} has nothing to tune: give at least one triton.Config "
                    "(triton.Config({{}}) launches with Triton's defaults), or space= to search (budget= "
                    "alone gives no space)")
_KEY_TEXT_MAX = 120  # a key value stored by its text longer than this is data, not a key


def key_value(v: Any, name: str = "") -> Any:
    """A key argument's value as the key (and the store) holds it. A tensor (anything with a
    shape and a dtype) is keyed by its shape and dtype, as a user keying on it means: never by
    its contents, which would retune for every new tensor and put the user's data in the
    store. Numbers, strings, None, dtypes and short tuples of them stay as they are; anything
    whose text is long is refused (AbductuneError naming the argument)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, numbers.Number):  # a numpy scalar: its plain value
        return v.item() if hasattr(v, "item") else v
    shape, dtype = getattr(v, "shape", None), getattr(v, "dtype", None)
    if shape is not None and dtype is not None:
        return ("tensor", tuple(int(d) for d in shape), _dtype_name(dtype))
    if len(str(v)) > _KEY_TEXT_MAX:
        raise AbductuneError(f"key argument {name!r} is a {type(v).__name__} whose value is "
                             f"{len(str(v))} characters of text; key on ints, strings, dtypes or tensors "
                             "(a tensor is keyed by its shape and dtype), or drop it from key=")
    return v


# ----------------------------------------------------------------------------- identity

_MISSING = object()


def _python_fn(obj: Any, any_wrapper: bool = False) -> Any:
    """The Python function under a Triton JIT object (JITFunction, InterpretedFunction, an
    Autotuner or Heuristics wrapping one), or None for anything else (with `any_wrapper`,
    under any object whose `.fn` chain ends in a function)."""
    if inspect.isfunction(obj):
        return obj
    if not any_wrapper and not (type(obj).__module__ or "").startswith(("triton", "abductune")):
        return None
    fn = getattr(obj, "fn", None)
    for _ in range(16):
        if fn is None or inspect.isfunction(fn):
            return fn
        fn = getattr(fn, "fn", None)
    return None


def _is_constexpr(v: Any) -> bool:
    return type(v).__name__ == "constexpr" and (type(v).__module__ or "").startswith("triton")


def _resolve(node: ast.AST, scope: Mapping[str, Any]) -> Any:
    """The object a Name or a module attribute chain (`mod.helper`) refers to."""
    if isinstance(node, ast.Name):
        return scope.get(node.id, _MISSING)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, scope)
        if inspect.ismodule(base):
            return getattr(base, node.attr, _MISSING)
    return _MISSING


def _function_source(f: Any) -> str:
    try:
        src = textwrap.dedent(inspect.getsource(f))
    except (OSError, TypeError):  # no source file: hash the bytecode instead
        return repr((f.__code__.co_code, f.__code__.co_consts))
    i = src.find("def ")  # from the `def` on, as Triton does: decorators are not the kernel
    return src[i:] if i >= 0 else src


def kernel_source_hash(fn: Any) -> str:
    """sha256 (16 hex) of a kernel's source and of every `@triton.jit` function it calls,
    transitively, plus the constexpr globals they read: what Triton's `JITFunction.cache_key`
    covers, without its line numbers (moving a kernel in its file keeps its winners). Works
    on compiled and interpreted kernels alike."""
    base = _python_fn(fn, any_wrapper=True)
    if base is None:
        raise AbductuneError(f"{fn!r} is not a @triton.jit function; put @abductune.autotune above @triton.jit")
    parts: list[str] = []
    seen: set[int] = set()
    stack = [base]
    while stack:
        f = stack.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        src = _function_source(f)
        try:
            nonlocals = inspect.getclosurevars(f).nonlocals
        except (TypeError, ValueError):
            nonlocals = {}
        scope = {**f.__globals__, **nonlocals}
        consts: set[tuple[str, str]] = set()
        try:
            tree = ast.parse(src)
        except SyntaxError:
            tree = ast.parse("")
        for node in ast.walk(tree):
            val = _resolve(node, scope)
            if val is _MISSING or inspect.ismodule(val):
                continue
            if _is_constexpr(val):
                consts.add((ast.unparse(node), repr(getattr(val, "value", val))))
                continue
            dep = _python_fn(val) if not inspect.isfunction(val) else None  # plain Python helpers are not kernels
            if dep is not None:
                stack.append(dep)
        parts.append(src + "\n" + repr(sorted(consts)))
    return hashlib.sha256("\n--\n".join(sorted(parts)).encode()).hexdigest()[:16]


def _dtype_name(dt: Any) -> str:
    s = str(dt).replace("torch.", "")
    return {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64"}.get(s, s)


# ----------------------------------------------------------------------------- spaces

def config_dict(cfg: Any) -> dict[str, Any]:
    """A triton.Config (or a plain dict) as one flat dict: its kwargs plus its options."""
    if isinstance(cfg, Mapping):
        return dict(cfg)
    kwargs = getattr(cfg, "kwargs", None)
    if not isinstance(kwargs, Mapping):
        raise AbductuneError(f"config {cfg!r} is neither a triton.Config nor a dict")
    out = dict(kwargs)
    for k, default in OPTIONS.items():
        out[k] = getattr(cfg, k, default)
    return out


def _param(name: str, values: list[Any], default: Any) -> Param:
    """The domain of one parameter: the list's values and the hull between them (every power
    of two between min and max when all are powers of two, else every integer when the span
    is small, else the powers of two in between)."""
    uniq = list(dict.fromkeys(values))
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in uniq)
    if ints and all(v > 0 and v & (v - 1) == 0 for v in uniq):
        return Pow2(name, min(uniq), max(uniq), default=default)
    if ints:
        lo, hi = min(uniq), max(uniq)
        if hi - lo <= _HULL_MAX:
            return IntRange(name, lo, hi, default=default)
        pows = [1 << k for k in range(max(lo, 1).bit_length(), hi.bit_length()) if lo < 1 << k < hi]
        return ChoiceParam(name, sorted(set(uniq) | set(pows)), default=default)
    return ChoiceParam(name, uniq, default=default, ordered=False)


def space_from_configs(configs: Sequence[Any], name: str = "") -> Space:
    """A space grown around a `triton.autotune` config list: one parameter per kwarg, plus
    num_warps and num_stages (and num_ctas / maxnreg / ir_override where a config sets them);
    the first config is the default. A kwarg missing from some configs takes None there."""
    dicts = [config_dict(c) for c in configs]
    if not dicts:
        raise AbductuneError("an empty config list grows no space; give configs or space=")
    names = list(dict.fromkeys(itertools.chain.from_iterable(dicts)))
    params = []
    for n in names:
        if n in OPTIONS and n not in _ALWAYS and all(d.get(n, OPTIONS[n]) == OPTIONS[n] for d in dicts):
            continue  # an option nobody sets stays out of the space (and of its fingerprint)
        vals = [d.get(n, OPTIONS.get(n)) for d in dicts]
        params.append(_param(n, vals, vals[0]))
    return Space(params, name=name)


def _fill(space: Space, d: Mapping[str, Any]) -> dict[str, Any]:
    """A list config as a full config of `space` (options it leaves out at their defaults)."""
    return {n: d.get(n, OPTIONS.get(n)) for n in space.names}


def launch_kwargs(config: Mapping[str, Any]) -> dict[str, Any]:
    """What a config adds to the kernel call (None: not passed, Triton's default applies)."""
    return {k: v for k, v in config.items() if v is not None}


def triton_config(config: Mapping[str, Any], pre_hook: Callable | None = None) -> Any:
    """A triton.Config for a space config (what `best_config` and exports show)."""
    import triton

    opts = {k: config[k] for k in OPTIONS if config.get(k) is not None}
    accepted = inspect.signature(triton.Config.__init__).parameters
    kw = {k: v for k, v in config.items() if k not in OPTIONS}
    return triton.Config(kw, **{k: v for k, v in opts.items() if k in accepted},
                         **({"pre_hook": pre_hook} if pre_hook is not None else {}))


def triton_config_json(config: Mapping[str, Any]) -> dict[str, Any]:
    """A config as `triton.Config.__dict__`, the shape Triton's `cache_results` file holds."""
    out: dict[str, Any] = {"kwargs": {k: v for k, v in config.items() if k not in OPTIONS}}
    for k, default in OPTIONS.items():
        out[k] = config.get(k, default)
    out["pre_hook"] = None
    return out


# ----------------------------------------------------------------------------- compiling

def _interpreted(fn: Any) -> bool:
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
    if _interpreted(autotuner.fn):
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
    if _python_fn(obj) is not base:
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
        proc = subprocess.Popen([sys.executable, "-c", "from abductune.autotune import compile_server; "
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


def _pool() -> CompilePool:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            import atexit

            _POOL = CompilePool(max(1, min(8, (os.cpu_count() or 2) - 1)))
            atexit.register(_POOL.close)
        return _POOL


def _parallel_warm(target: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Callable[[list[Config]], None] | None:
    """A `warm(configs)` that hands each config to a compile worker and returns at once: the
    measuring loop goes on in this process, and each config's first launch finds Triton's
    cache filled by a worker, or compiles it here if the worker is not done (so a pool that
    is still starting never makes the first call slower than compiling serially)."""
    try:
        a = [_encode(x) for x in args]
        kw = {k: _encode(v) for k, v in kwargs.items() if k not in _LAUNCH_KW}
    except TypeError as e:
        log.info("compiling serially: %s", e)
        return None

    def done(f: Any) -> None:
        err = f.exception() or (None if f.result().get("ok") else f.result().get("error"))
        if err:  # the config's own launch reports the error
            log.debug("compile worker: %s", err)

    submitted: set[str] = set()

    def warm(configs: list[Config]) -> None:
        pool = _pool()
        if not pool.ready:  # still starting: this config compiles here, later ones may not
            return
        for c in configs:
            k = config_key(c)
            if k not in submitted:
                submitted.add(k)
                job = {"target": target, "args": a, "kwargs": kw, "config": launch_kwargs(c)}
                pool.submit(job).add_done_callback(done)
    return warm


# ----------------------------------------------------------------------------- choices

@dataclass(frozen=True)
class Choice:
    """What a key launches: a config of the space (or {"impl": name}), the kwargs it adds to
    the call, its config-level pre_hook, and where it came from (tuned, store, predicted,
    single)."""

    config: dict[str, Any]
    kwargs: dict[str, Any]
    pre_hook: Callable | None = None
    impl: Callable | None = None
    source: str = "tuned"
    time_ms: float | None = None
    triton_config: Any = None

    @property
    def name(self) -> str:
        return f"impl {self.config['impl']}" if "impl" in self.config else str(self.config)


def _median_ms(rows: Iterable[Measurement]) -> float:
    ok = [m.time_ms for m in rows if m.ok]
    return statistics.median(ok) if ok else math.inf


def pick(winner: Measurement | None, rows: Sequence[Measurement], impls: Iterable[str]) -> tuple[dict | None, float]:
    """(config, ms) a key launches: the judged Triton winner, unless one of the implementations
    `impls` is faster. Where the winner and every implementation ran in one run-off (kind
    "verify", same run), that side-by-side timing decides; else the median of every ok row of
    each (a first timing of cuBLAS can be several % off its run-off time). It reads only the
    store, so every process (and `abductune cache`) decides alike."""
    best = dict(winner.config) if winner is not None else None
    names = [{"impl": n} for n in impls]
    cands = ([best] if best is not None else []) + names
    mine = {config_key(c): [m for m in rows if config_key(m.config) == config_key(c)] for c in cands}
    runs = [{m.run_id for m in ms if m.ok and m.kind == "verify"} for ms in mine.values()]
    shared = set.intersection(*runs) if runs else set()
    if shared:  # the latest run-off that timed them all, side by side
        rid = max(r for r in shared if r is not None) if any(r is not None for r in shared) else None
        mine = {k: [m for m in ms if m.kind == "verify" and m.run_id == rid] for k, ms in mine.items()}
    best_t = _median_ms(mine[config_key(best)]) if best is not None else math.inf
    for c in names:
        t = _median_ms(mine[config_key(c)])
        if t < best_t:
            best, best_t = dict(c), t
    return best, best_t


def stored_winner(store: Store, ctx: Context) -> Measurement | None:
    """The winner a finished tune (or an import) recorded for `ctx`, the latest first; else
    the fastest ok row; None when nothing ran."""
    runs = [r for r in store.runs(ctx) if r.status == "done" and r.winner_id is not None]
    if runs:
        got = store.by_id([runs[-1].winner_id])
        if got:
            return got[0]
    return store.best(ctx)


_STORES: dict[str, Store] = {}
_STORES_LOCK = threading.Lock()


def _theory_predictions(problem: Problem, space: Space) -> list[Any]:
    """The theory store's zero-shot configs for this problem, best first, at most as many as
    `tune` seeds (the best rule's and the runner-up's: a hedge against one rule extrapolating
    badly); [] where none applies. Never raises: a prediction is a bet, not a requirement."""
    try:
        from .theory.store import predictions
        from .tune import THEORY_SEEDS

        return predictions(problem, space)[:THEORY_SEEDS]
    except Exception as e:  # noqa: BLE001
        log.debug("no theory prediction for %s: %s", problem.kernel, e)
        return []


def _theory_prediction(problem: Problem, space: Space) -> Any:
    """The best theory prediction for this problem, or None (what a miss serves at once)."""
    got = _theory_predictions(problem, space)
    return got[0] if got else None


def _observed_prediction(problem: Problem, space: Space, database: Any = None) -> Any:
    """The observed database's config for this problem (a `Lookup`: rules harvested from
    recorded bests, or imported from vLLM tables), or None; never raises."""
    try:
        from .heuristics.observed import load_database

        return load_database(database).lookup(problem, space)
    except Exception as e:  # noqa: BLE001
        log.debug("no observed-database prediction for %s: %s", problem.kernel, e)
        return None


def _open_store(spec: Any) -> Store:
    """One Store per path per process (kernels share a connection)."""
    if isinstance(spec, Store):
        return spec
    path = str(default_path() if spec is None else spec)
    with _STORES_LOCK:
        if path not in _STORES:
            if path != ":memory:":
                Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            _STORES[path] = Store(path)
        return _STORES[path]


_HW: dict[str, HardwareInfo] = {}


def _hardware(tensor: Any) -> HardwareInfo:
    """The device the caller's tensors live on (cached per device type)."""
    kind = getattr(getattr(tensor, "device", None), "type", "cpu")
    if kind not in _HW:
        if kind == "cuda":
            from .hardware import local_hardware

            _HW[kind] = local_hardware()
        else:
            _HW[kind] = HardwareInfo(name=f"{kind}-interpreter" if kind == "cpu" else kind, vendor=kind)
    return _HW[kind]


def _toolchain() -> str:
    import triton

    return f"triton={triton.__version__}"


def _printing() -> bool:
    return os.environ.get(PRINT_ENV, "") == "1" or os.environ.get("TRITON_PRINT_AUTOTUNING", "") == "1"


# ----------------------------------------------------------------------------- the autotuner

_TOL = {"fp16": 1e-2, "bf16": 2e-2, "fp32": 1e-4, "fp64": 1e-8}


class Autotuner:
    """The object `@abductune.autotune` returns. Launch it like the kernel: `kernel[grid](...)`.

    Compatible attributes: `fn`, `base_fn`, `arg_names`, `configs`, `keys`, `cache` (key ->
    Choice), `best_config` (a triton.Config), `configs_timings`, `bench_time`, `nargs`.
    Added: `stats` (tunes, store hits, predictions, evaluations the budget counted, re-timings
    on top), `last_result` (the last SessionResult), `wait()` (join background tunes)."""

    def __init__(self, fn: Any, arg_names: Sequence[str], configs: Sequence[Any] | None, key: Sequence[str],
                 reset_to_zero: Sequence[str] | None = None, restore_value: Sequence[str] | None = None,
                 pre_hook: Callable | None = None, post_hook: Callable | None = None,
                 prune_configs_by: Mapping[str, Any] | None = None, warmup: int | None = None,
                 rep: int | None = None, use_cuda_graph: bool = False, do_bench: Callable | None = None,
                 cache_results: bool = False, *, space: Space | None = None, strategy: str = "pattern",
                 strategy_options: Mapping[str, Any] | None = None, seed: int = 0,
                 budget: int | Budget | None = None, bucket: Any = None,
                 reference: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None,
                 reference_tol: float | None = None, on_miss: str = "tune", store: Any = None,
                 implementations: Mapping[str, Callable] | None = None, timer: Callable | None = None,
                 compile: str = "auto", judge: bool = True, name: str | None = None,
                 kernel_class: str | None = None, wait_timeout_s: float = 3600.0, isolate: bool = False,
                 isolate_timeout_s: float = 120.0, database: Any = None, record: Any = None):
        import triton

        self.fn = fn
        self.base_fn = _python_fn(fn, any_wrapper=True)
        if self.base_fn is None:
            raise AbductuneError(f"@abductune.autotune decorates a @triton.jit function, got {fn!r}")
        self.arg_names = list(arg_names)
        if configs is not None and not list(configs) and space is None:
            raise AbductuneError(_NOTHING_TO_TUNE.format(what="configs=[]"))
        self.configs = list(configs) if configs else ([] if space is not None else [triton.Config({})])
        self.keys = list(key or ())
        self.reset_to_zero = list(reset_to_zero or ())
        self.restore_value = list(restore_value or ())
        # like Triton >= 3.9: a misspelt name would silently never re-tune; say so now
        for what, names in (("key", self.keys), ("reset_to_zero", self.reset_to_zero),
                            ("restore_value", self.restore_value)):
            unknown = [n for n in names if n not in self.arg_names]
            if unknown:
                raise AbductuneError(f"{what} names {', '.join(unknown)}, which are not arguments of "
                                     f"{self.base_fn.__name__}; its arguments are {', '.join(self.arg_names)}")
        if on_miss not in ("tune", "predict"):
            raise AbductuneError(f"on_miss={on_miss!r}: use 'tune' (block and tune) or 'predict' (serve a "
                                 "prediction at once and tune in the background)")
        if compile not in ("auto", "serial", "parallel"):
            raise AbductuneError(f"compile={compile!r}: use 'auto', 'parallel' or 'serial'")
        if not isinstance(isolate, bool):
            raise AbductuneError(f"isolate={isolate!r}: use True (measure in a worker process) or False")
        if isinstance(isolate_timeout_s, bool) or not isinstance(isolate_timeout_s, (int, float)) \
                or not isolate_timeout_s > 0:
            raise AbductuneError(f"isolate_timeout_s={isolate_timeout_s!r}: seconds per config, a number > 0")
        self.name = name or self.base_fn.__name__
        self.kernel_class = kernel_class
        self.on_miss = on_miss
        self.strategy = strategy
        self.strategy_options = dict(strategy_options or {})
        self.seed = seed
        self._tk: str | None = None
        self._tune_key()  # an unknown strategy or option fails here, not at the first launch
        self.budget = budget if budget is None or isinstance(budget, Budget) else Budget(budget)
        self.reference = reference
        self.reference_tol = reference_tol
        self.store_spec = store
        self.cache_results = cache_results  # accepted for Triton compatibility: the store always persists
        self.implementations = dict(implementations or {})
        self.compile = compile
        self.judge = judge
        self.wait_timeout_s = wait_timeout_s
        self.isolate = isolate
        self.isolate_timeout_s = float(isolate_timeout_s)
        self.database = database  # observed-heuristics database: a path, a Database, None (packaged)
        if database is not None:
            from .heuristics.observed import load_database

            self.database = load_database(database)  # a bad path fails here, not at the first miss
        self._isolatable = False  # checked at the first key that must be tuned

        # hooks: Triton's semantics (a user hook replaces the default one)
        self.user_defined_pre_hook = pre_hook is not None
        self.user_defined_post_hook = post_hook is not None
        self.pre_hook = pre_hook or self._default_pre_hook
        self.post_hook = post_hook
        self.perf_model = self.early_config_prune = None
        self.configs_top_k: float | int = 1.0
        if prune_configs_by:
            self.perf_model = prune_configs_by.get("perf_model")
            self.configs_top_k = prune_configs_by.get("top_k", 1.0)
            self.early_config_prune = prune_configs_by.get("early_config_prune")

        # timing: an injected timer(config, launch), else do_bench (Triton's, or warmup/rep's)
        self._timer = timer
        self._do_bench = do_bench
        self.num_warmups, self.num_reps, self.use_cuda_graph = warmup, rep, use_cuda_graph
        if warmup is not None or rep is not None or use_cuda_graph:
            import warnings

            warnings.warn("warmup, rep and use_cuda_graph are deprecated in triton.autotune; pass do_bench",
                          DeprecationWarning, stacklevel=3)

        # the space: given, or grown around the list (whose configs are the seeds)
        self.space = space if space is not None else space_from_configs(self.configs, self.name)
        self._grown = space is None
        self._list = [self._as_space_config(c) for c in self.configs]
        # record mode (`abductune sweep --call`): a key that must be tuned measures the whole
        # space instead (or a fixed sample past 1,000 valid configs, with the list in it) and
        # writes it as a dataset under `record`/<kernel>/, as `abductune sweep` does for a spec
        self.record = Path(record) if record else None
        self.recorded: list[Path] = []  # datasets written in record mode
        self._record_sample: dict[str, Any] | None = None
        if self.record is not None:
            from .sweep import sample_configs

            todo, self._record_sample = sample_configs(self.space, self._list)
            self.strategy, self.strategy_options = "fixed", {"configs": todo}
            self.budget, self.on_miss, self._tk = Budget(len(todo)), "tune", None
            self._tune_key()
        self._hooks = [(d, getattr(c, "pre_hook", None)) for d, c in zip(self._list, self.configs)]
        for d in self._list:
            clash = set(d) & set(_LAUNCH_KW)
            if clash:
                raise AbductuneError(f"config {d} sets {', '.join(clash)}, which the launch itself passes")
        bad = [n for n in (bucket if isinstance(bucket, Mapping) else {}) if n not in self.keys]
        if bad:
            raise AbductuneError(f"bucket names {', '.join(bad)}, which are not in key={self.keys}")
        self._key_spec = [(self.arg_names.index(n), n,
                           bucket_function(bucket.get(n) if isinstance(bucket, Mapping) else bucket, n))
                          for n in self.keys]
        # one config, no search, no alternatives: Triton launches it without tuning; so do we
        self._single: Choice | None = None
        if len(self._list) == 1 and self._grown and not self.implementations and self.budget is None:
            self._single = self._choice(self._list[0], "single")

        self.cache: dict[tuple, Choice] = {}
        self.best_config: Any = None
        self.configs_timings: dict[Any, Any] = {}
        self.bench_time = 0.0
        self.nargs: dict[str, Any] | None = None
        # evaluations: what the budget counted (as in `abductune tune`); retimed: the final
        # run-off and the competing implementations, timed on top of it
        self.stats = {"tunes": 0, "store_hits": 0, "predicted": 0, "evaluations": 0, "retimed": 0,
                      "waited_s": 0.0}
        self.last_result: SessionResult | None = None
        self._lock = threading.RLock()
        self._threads: list[threading.Thread] = []
        self._source_hash: str | None = None
        self._plan: tuple[str, str] | None = None

    # -- launching: the hit path is the key, one dict lookup and the launch
    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        choice = self._single
        if choice is None:
            key = self._key(args, kwargs)
            choice = self.cache.get(key)
            if choice is None:
                choice = self._miss(key, args, kwargs)
        self.best_config = choice.triton_config
        if choice.pre_hook is not None:
            choice.pre_hook({**dict(zip(self.arg_names, args)), **kwargs, **choice.kwargs})
        if choice.impl is not None:
            return choice.impl(*args, **{k: v for k, v in kwargs.items() if k not in _LAUNCH_KW})
        return self.fn.run(*args, **kwargs, **choice.kwargs)

    def _key(self, args: tuple, kwargs: dict) -> tuple:
        """Triton's key (the key arguments, then the dtype of every argument that has one),
        with each key value in its bucket."""
        n = len(args)
        key = []
        for i, name, b in self._key_spec:
            v = args[i] if i < n else kwargs.get(name)
            v = v if b is None else b(v)
            key.append(v if type(v) is int else key_value(v, name))  # a tensor: (shape, dtype)
        for a in args:
            if hasattr(a, "dtype"):
                key.append(a.dtype)
        if len(kwargs) > 2:  # more than grid and warmup: arguments passed by name
            for k, a in kwargs.items():
                if hasattr(a, "dtype"):
                    key.append((k, a.dtype))
        return tuple(key)

    def warmup(self, *args: Any, **kwargs: Any) -> list[Any]:
        """Compile every config of the (pruned) list, as Triton's `Autotuner.warmup`."""
        self.nargs = dict(zip(self.arg_names, args))
        out = [self.fn.warmup(*args, **kwargs, **launch_kwargs(c)) for c in self.prune_configs(kwargs)]
        self.nargs = None
        return out

    def wait(self, timeout: float | None = None) -> None:
        """Join the background tunes started by on_miss="predict"."""
        for t in list(self._threads):
            t.join(timeout)
        self._threads = [t for t in self._threads if t.is_alive()]

    # -- hooks (Triton's defaults; restore_value is saved once per tune instead of per trial)
    def _default_pre_hook(self, nargs: dict[str, Any], reset_only: bool = False) -> None:
        for n in self.reset_to_zero:
            if nargs.get(n) is not None:
                nargs[n].zero_()

    def _post(self, nargs: dict[str, Any], exception: BaseException | None, saved: Mapping[str, Any]) -> None:
        if self.post_hook is not None:
            self.post_hook(nargs, exception=exception)
        else:
            for n, v in saved.items():
                nargs[n].copy_(v)

    # -- pruning: Triton's prune_configs over the list
    def prune_configs(self, kwargs: Mapping[str, Any], nargs: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """The list after `early_config_prune` and `perf_model`/`top_k`, as space configs."""
        nargs = dict(self.nargs or {}) if nargs is None else dict(nargs)
        pruned = list(self.configs)
        if self.early_config_prune and pruned:
            pruned = list(self.early_config_prune(pruned, nargs, **kwargs))
            if not pruned:
                raise AbductuneError("early_config_prune returned no config; it must keep at least one")
        if self.perf_model:
            top_k = self.configs_top_k
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = max(1, int(len(pruned) * top_k))
            elif isinstance(top_k, bool) or not isinstance(top_k, int):
                raise AbductuneError(f"prune_configs_by top_k must be a float <= 1.0 or an int, got {top_k!r}")
            if len(pruned) > top_k:
                est = [self.perf_model(**nargs, **kwargs, **launch_kwargs(config_dict(c))) for c in pruned]
                order = sorted(range(len(pruned)), key=lambda i: est[i])
                pruned = [pruned[i] for i in order[:top_k]]
        return [self._as_space_config(c) for c in pruned]

    def _as_space_config(self, cfg: Any) -> dict[str, Any]:
        """A list config as a config of the space (with space=, every kwarg it sets must be a
        parameter; options left at Triton's defaults may be left out of the space)."""
        d = config_dict(cfg)
        if self._grown:
            return _fill(self.space, d)
        extra = [k for k, v in d.items() if k not in self.space.names and not (k in OPTIONS and v == OPTIONS[k])]
        if extra:
            raise AbductuneError(f"config {d} sets {', '.join(extra)}, which space= has no parameter for; add "
                                 "them to the space (a one-value Choice fixes a value) or leave them out")
        return {n: d[n] if n in d else self.space[n].default_value for n in self.space.names}

    def _choice(self, config: Mapping[str, Any], source: str, time_ms: float | None = None) -> Choice:
        config = dict(config)
        if "impl" in config:
            impl = self.implementations.get(config["impl"])
            if impl is None:
                raise AbductuneError(f"the store chose implementation {config['impl']!r}, which this "
                                     f"autotuner does not offer (implementations: {list(self.implementations)})")
            return Choice(config, {}, None, impl, source, time_ms, None)
        hook = self._config_hook(config)
        return Choice(config, launch_kwargs(config), hook, None, source, time_ms, triton_config(config, hook))

    def _config_hook(self, config: Mapping[str, Any]) -> Callable | None:
        """A list config's own pre_hook; a config the search found takes its nearest list
        config's (hooks such as `init_to_zero` are usually the same for the whole list)."""
        hooks = [(d, h) for d, h in self._hooks if self.space.is_valid(d)]
        if not hooks:
            return None
        for d, h in hooks:
            if d == dict(config):
                return h
        return min(hooks, key=lambda dh: self.space.distance(dh[0], config))[1]

    # -- a missed key
    def _miss(self, key: tuple, args: tuple, kwargs: dict) -> Choice:
        with self._lock:
            got = self.cache.get(key)
            if got is not None:
                return got
            t0 = time.perf_counter()
            nargs = dict(zip(self.arg_names, args))
            clash = set(kwargs) & set(self.space.names)
            if clash:
                raise AbductuneError(f"conflicting meta-parameters: {', '.join(sorted(clash))} are passed to "
                                     f"{self.name} and tuned; do not pass tuned parameters yourself")
            seeds = self.prune_configs(kwargs, nargs)
            if len(seeds) == 1 and self._grown and not self.implementations and self.budget is None:
                choice = self._choice(seeds[0], "single")  # Triton: one config left, nothing to time
                self.cache[key] = choice
                return choice
            problem = self._problem(nargs, kwargs)
            store = _open_store(self.store_spec)
            ctx = Context.of(problem, self.space, _toolchain())
            budget = self._budget(len(seeds))
            choice, why = self._stored_choice(store, ctx, budget)
            if choice is not None:
                self.stats["store_hits"] += 1
                self._report(key, choice, time.perf_counter() - t0, "from the store, 0 evaluations")
                self.cache[key] = choice
                return choice
            log.info("%s: key %s missed: %s", self.name, key, why)
            if self.isolate and not self._isolatable:  # in the caller, before any (background) tune
                from .measure.isolated import worker_spec

                worker_spec(self)
                self._isolatable = True
            if self.on_miss == "predict":
                choice = self._predict(store, ctx, seeds, problem)
                self.stats["predicted"] += 1
                self.cache[key] = choice
                clones = tuple(_clone(a) for a in args)
                ckw = {k: _clone(v) for k, v in kwargs.items()}
                t = threading.Thread(target=self._tune_in_background, name=f"abductune-{self.name}",
                                     args=(key, clones, ckw, problem, ctx, seeds, budget), daemon=True)
                self._threads.append(t)
                t.start()
                return choice
            choice = self._tune(key, args, kwargs, problem, ctx, seeds, budget)
            if choice.source != "failed":
                self.cache[key] = choice
            return choice

    def _budget(self, n_seeds: int) -> Budget:
        if self.budget is not None:
            return self.budget
        # a list only: measure the list, as triton.autotune does (the same cold cost)
        return Budget(n_seeds if self._grown else max(32, n_seeds))

    def _problem(self, nargs: Mapping[str, Any], kwargs: Mapping[str, Any]) -> Problem:
        every = {**nargs, **{k: v for k, v in kwargs.items() if k in self.arg_names}}
        dims: dict[str, int] = {}
        dtypes: dict[str, str] = {}
        for _, name, b in self._key_spec:
            v = every.get(name)
            v = key_value(v if b is None else b(v), name)
            if isinstance(v, (bool, int)):
                dims[name] = int(v)
            elif isinstance(v, tuple) and len(v) == 3 and v[0] == "tensor":  # shape and dtype, no data
                dims.update({f"{name}.dim{j}": d for j, d in enumerate(v[1])})
                dtypes[f"key:{name}"] = v[2]
            else:
                dtypes[f"key:{name}"] = str(v)
        tensor = None
        for name in self.arg_names:
            a = every.get(name)
            if hasattr(a, "dtype") and hasattr(a, "data_ptr"):
                dtypes[name] = _dtype_name(a.dtype)
                tensor = tensor if tensor is not None else a
        if self._source_hash is None:
            self._source_hash = kernel_source_hash(self.fn)
        p = Problem(kernel=self.name, kernel_class=self.kernel_class or "other", dims=dims, dtypes=dtypes,
                    hardware=_hardware(tensor), source_hash=self._source_hash)
        if self.kernel_class is None:
            from .classify import infer_kernel_class

            p = Problem(p.kernel, infer_kernel_class(p, self.space), p.dims, p.dtypes, hardware=p.hardware,
                        source_hash=p.source_hash)
        return p

    def _tune_key(self) -> str:
        """The Session's identity of this tune (strategy, seed, options), computed once."""
        if self._tk is None:
            from .search import make_strategy
            from .session import tune_key

            self._tk = tune_key(make_strategy(self.strategy, seed=self.seed, **self.strategy_options),
                                self.strategy_options)
        return self._tk

    def _stored_choice(self, store: Store, ctx: Context, budget: Budget) -> tuple[Choice | None, str]:
        """A finished tune of this context (same strategy and options, budget at least ours) or
        an imported winner: read it, measure nothing. Else None and why the key missed."""
        runs = [r for r in store.runs(ctx) if r.status == "done" and r.winner_id is not None]
        tk = self._tune_key()

        def enough(r: Any) -> bool:
            b = (r.options.get("budget") or [None])[0]
            return b is None or (budget.evaluations is not None and b >= budget.evaluations)
        mine = [r for r in runs if r.tune_key == tk and enough(r)]
        src = mine[-1] if mine else next((r for r in reversed(runs) if r.strategy == "import"), None)
        if src is None:
            return None, self._why_missed(store, ctx, runs)
        [winner] = store.by_id([src.winner_id]) or [None]
        if winner is None:
            return None, f"run {src.id} names winner {src.winner_id}, which is not in the store"
        rows = store.measurements(ctx)
        if any(not any(m.config == {"impl": n} for m in rows) for n in self.implementations):
            return None, "an implementation offered now was never timed for this key"
        return self._decide(winner, rows, "store"), ""

    def _why_missed(self, store: Store, ctx: Context, runs: Sequence[Any]) -> str:
        """Observability: name what differs from the nearest stored context of this kernel."""
        if runs:
            return "the stored tune used another strategy, options or a smaller budget"
        same = store.execute("SELECT source_hash, space_fingerprint, hardware, toolchain FROM contexts "
                             "WHERE kernel = ? AND dims = ?",
                             (ctx.kernel, _json(ctx.dims)))
        for sh, fp, hw, tc in same:
            diffs = [n for n, a, b in (("kernel source", sh, ctx.source_hash), ("space", fp, ctx.space_fingerprint),
                                       ("device", hw, ctx.hardware), ("toolchain", tc, ctx.toolchain)) if a != b]
            if diffs:
                return f"the store has this shape with another {', '.join(diffs)} ({store.path})"
        return f"no stored winner for this kernel, key, device and toolchain in {store.path}"

    def _decide(self, winner: Measurement | None, rows: Sequence[Measurement], source: str) -> Choice:
        """The Triton winner, unless an offered implementation is faster (see `pick`)."""
        cfg, t = pick(winner, rows, self.implementations)
        if cfg is None:
            raise AbductuneError(f"{self.name}: no config ran (see the log for each config's error)")
        return self._choice(cfg, source, t if math.isfinite(t) else None)

    def _predict(self, store: Store, ctx: Context, seeds: Sequence[Config], problem: Problem | None = None) -> Choice:
        """What a missed key launches while it is tuned: the store's best config for the
        nearest shape of this kernel (same space, device, toolchain, dtypes, bucket group),
        else the theory store's zero-shot prediction for the kernel's class and regime, else
        the observed database's config (harvested bests, imported vLLM tables), else the
        first config of the list."""
        near = store.best_nearby(ctx)
        if near is not None and self.space.is_valid(near.config):
            log.info("%s: serving %s from the nearest stored shape %s while tuning", self.name, near.config,
                     near.context.dims)
            return self._choice(near.config, "predicted")
        pred = _theory_prediction(problem, self.space) if problem is not None else None
        if pred is not None:
            log.info("%s: serving the theory prediction %s while tuning (%s)", self.name, pred.config,
                     pred.describe())
            return self._choice(dict(pred.config), "predicted")
        seen = _observed_prediction(problem, self.space, self.database) if problem is not None else None
        if seen is not None:
            log.info("%s: serving the observed database's config %s while tuning (%s)", self.name, seen.config,
                     seen.describe())
            return self._choice(dict(seen.config), "predicted")
        first = seeds[0] if seeds else self.space.default()
        return self._choice(first, "predicted")

    def _tune_in_background(self, key: tuple, args: tuple, kwargs: dict, *rest: Any) -> None:
        try:
            choice = self._tune(key, args, kwargs, *rest)
            if choice.source != "failed":
                self.cache[key] = choice  # swap the winner in
        except Exception:  # noqa: BLE001 - a background tune must not kill the program
            log.exception("%s: background tune of key %s failed; keeping the prediction", self.name, key)

    # -- tuning: one Session on the caller's arguments
    def _tune(self, key: tuple, args: tuple, kwargs: dict, problem: Problem, ctx: Context,
              seeds: Sequence[Config], budget: Budget) -> Choice:
        t0 = time.perf_counter()
        store = _open_store(self.store_spec)
        with self._tuning_lock(store, ctx):
            choice, _ = self._stored_choice(store, ctx, budget)  # another process may have finished it
            if choice is not None:
                self.stats["store_hits"] += 1
                self._report(key, choice, time.perf_counter() - t0, "tuned by another process, 0 evaluations")
                return choice
            nargs = dict(zip(self.arg_names, args))
            full = {**nargs, **kwargs}
            saved = {n: full[n].clone() for n in self.restore_value if full.get(n) is not None}
            ev = None
            try:
                ev = self._evaluator(problem, args, kwargs, nargs, saved)
                plan = self._compile_plan()
                if plan[0] == "parallel":
                    _pool()  # workers start now; configs go to them once they are ready
                    ev.warm = _parallel_warm(plan[1], args, kwargs)
                baselines = {"configs": list(seeds)} if seeds and (budget.evaluations is None or
                                                                   budget.evaluations >= len(seeds)) else {}
                seed_list = [Seed(s, "configs") for s in seeds]
                if (budget.evaluations is None or budget.evaluations > len(seeds)) and self.record is None:
                    # room beyond the user's list: the theory store's predictions are the first
                    # bets (the best rule's, then the runner-up's), then the observed database's
                    bets = [Seed(dict(p.config), f"theory:{p.rule.regime}" + (":runner-up" if i else ""))
                            for i, p in enumerate(_theory_predictions(problem, self.space))]
                    seen = _observed_prediction(problem, self.space, self.database)
                    if seen is not None:
                        bets.append(Seed(dict(seen.config), f"observed:{seen.level}"))
                    given = [dict(s) for s in seeds]
                    fresh = []
                    for b in bets:
                        if b.config not in given and b.config not in [f.config for f in fresh]:
                            fresh.append(b)
                    seed_list = fresh + seed_list
                with Session(ev, strategy=self.strategy, seed=self.seed, options=self.strategy_options,
                             budget=budget, seeds=seed_list, store=store,
                             toolchain=ctx.toolchain, batch_size=max(8, len(seeds)), judge=self.judge,
                             wait_timeout_s=self.wait_timeout_s) as session:
                    # the implementations are timed as baselines and join the final run-off
                    result = session.run(baselines=baselines, impls=list(self.implementations))
            finally:
                if ev is not None:
                    ev.close()  # an isolated evaluator's worker ends here
                # Triton resets reset_to_zero after tuning; restore_value is restored as well
                self.pre_hook({**full}, reset_only=True)
                for n, v in saved.items():
                    full[n].copy_(v)
        self.last_result = result
        if self.record is not None:
            self._write_record(problem, result)
        self.stats["tunes"] += 1
        self.stats["evaluations"] += result.evaluations
        self.stats["retimed"] += len(result.runoff)
        self.bench_time = time.perf_counter() - t0
        self.configs_timings = {triton_config(m.config): list(m.samples_ms) or [m.objective]
                                for m in result.history if "impl" not in m.config}
        rows = store.measurements(ctx)
        try:
            choice = self._decide(result.winner, rows, "tuned")
        except AbductuneError:
            errors = sorted({m.error.splitlines()[0] for m in rows if not m.ok and m.error})[:3]
            log.error("%s: no config of key %s ran: %s", self.name, key, "; ".join(errors))
            return self._choice(seeds[0] if seeds else self.space.default(), "failed")
        log.info("%s: tuned key %s in %.2fs: %d evaluations (%d seeds from the config list, strategy %s, "
                 "%d spent before), %s at %.4g ms", self.name, key, self.bench_time, result.evaluations,
                 len(seeds), result.strategy, result.spent_before, choice.name, choice.time_ms or math.nan)
        self._report(key, choice, self.bench_time, f"{ev.calls} evaluations")
        return choice

    def _write_record(self, problem: Problem, result: Any) -> Path:
        """The recorded key as a dataset (`abductune sweep --call`): every config measured,
        once each, with the kernel's own list, where it came from and the sample, if any."""
        from .datasets.bundled import shape_name
        from .datasets.format import Dataset, write_dataset
        from .hardware import toolchain

        seen: dict[tuple, Any] = {}
        for m in result.history:
            if "impl" not in m.config and self.space.is_valid(m.config):
                seen.setdefault(self.space.key(m.config), m)
        origin = f"{getattr(self.base_fn, '__module__', '?')}.{self.base_fn.__qualname__} (through patch_triton)"
        meta: dict[str, Any] = {"fixed_configs": self._list, "default_config": self._list[0] if self._list else
                                self.space.default(), "origin": origin}
        if self._record_sample:
            meta["sample"] = self._record_sample
        ds = Dataset(problem, self.space.to_dict(), list(seen.values()), toolchain(),
                     restricted_to_records=self._record_sample is not None,
                     source=f"abductune sweep --call ({self.name})", meta=meta)
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.name)
        path = self.record / safe / f"{shape_name(problem.dims) or 'all'}.jsonl.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_dataset(ds, path)
        self.recorded.append(path)
        log.info("%s: recorded %d configs to %s", self.name, len(seen), path)
        return path

    def _evaluator(self, problem: Problem, args: tuple, kwargs: dict, nargs: dict[str, Any],
                   saved: Mapping[str, Any]) -> Evaluator:
        """The caller's call as an evaluator: one Launch per config, the hooks around it
        (with isolate=True, the same built in a worker process on copies of the arguments)."""
        prune: Callable[[Config], str | None] | None = None
        if self.early_config_prune is not None:
            def user_prune(cfg: Config) -> str | None:
                if "impl" in cfg or any(cfg == d for d in self._list):
                    return None  # the list was pruned before it became the seeds
                kept = self.early_config_prune([triton_config(cfg)], dict(nargs), **kwargs)
                return None if kept else "early_config_prune rejected it"
            prune = user_prune
        if self.isolate:
            from .measure.isolated import evaluator_for

            return evaluator_for(self, problem, args, kwargs, nargs, prune)
        call_kw = {k: v for k, v in kwargs.items() if k not in _LAUNCH_KW}

        def launch(cfg: Config) -> Launch:
            if "impl" in cfg:
                impl = self.implementations[cfg["impl"]]
                full = {**nargs, **kwargs}
                return Launch(lambda: impl(*args, **call_kw), lambda: self.pre_hook(full),
                              lambda e: self._post(full, e, saved))
            ckw = launch_kwargs(cfg)
            full = {**nargs, **kwargs, **ckw}
            hook = self._config_hook(cfg)

            def before() -> None:
                if hook is not None:
                    hook(full)
                self.pre_hook(full)
            return Launch(lambda: self.fn.run(*args, **kwargs, **ckw), before, lambda e: self._post(full, e, saved))

        check: Callable[[Config], str | None] | None = None
        if self.reference is not None:
            full0 = {**nargs, **kwargs}
            self.pre_hook(dict(full0), reset_only=True)
            expected = self.reference(dict(full0))
            if not isinstance(expected, Mapping) or not set(expected) <= set(self.arg_names):
                raise AbductuneError(f"reference must return a dict of output argument name -> expected value "
                                     f"(names among {self.arg_names}), got {type(expected).__name__}")

            def compare(cfg: Config) -> str | None:
                for n, exp in expected.items():
                    why = _compare(n, full0[n], exp, self.reference_tol)
                    if why:
                        return why
                return None
            check = compare
        timer, retimer = self._timers()
        return InProcessEvaluator(problem, self.space, launch, timer, check=check, prune=prune,
                                  remeasure_timer=retimer, verbose=_printing())

    def _timers(self) -> tuple[Callable, Callable]:
        """(timer, run-off timer): the injected timer, the user's do_bench, warmup/rep, or
        Triton's benchmarker (a shorter one for the interleaved run-off rounds)."""
        if self._timer is not None:
            return self._timer, self._timer
        if self._do_bench is not None:
            return bench_timer(self._do_bench), bench_timer(self._do_bench)
        if _interpreted(self.fn):
            return bench_timer(wall_clock_bench), bench_timer(wall_clock_bench)
        import triton.testing as tt

        if self.use_cuda_graph:
            cg = lambda f, quantiles: tt.do_bench_cudagraph(f, rep=self.num_reps or 100, quantiles=quantiles)  # noqa: E731
            return bench_timer(cg), bench_timer(cg)
        full = lambda f, quantiles: tt.do_bench(f, warmup=self.num_warmups or 25, rep=self.num_reps or 100,  # noqa: E731
                                                quantiles=quantiles)
        short = lambda f, quantiles: tt.do_bench(f, warmup=5, rep=20, quantiles=quantiles)  # noqa: E731
        return bench_timer(full), bench_timer(short)

    def _compile_plan(self) -> tuple[str, str]:
        if self._plan is None:
            self._plan = compile_plan(self, self.compile)
            if self._plan[0] == "serial" and self.compile != "serial":
                log.warning("%s: compiling configs one by one in this process: %s", self.name, self._plan[1])
        return self._plan

    @contextlib.contextmanager
    def _tuning_lock(self, store: Store, ctx: Context) -> Any:
        """One process tunes a context, the others wait and then read its winner (ranks of one
        job agree). A claim in the store, taken over when its holder died."""
        if store.path == ":memory:":
            yield
            return
        token = [{"__autotune__": ctx.problem_key}]
        me = -os.getpid()
        t0 = time.perf_counter()
        delay = 0.02
        told = False
        while not store.claim(ctx, token, me)[0]:
            if time.perf_counter() - t0 > self.wait_timeout_s:
                log.warning("%s: waited %.0fs for another process tuning this key; tuning here", self.name,
                            self.wait_timeout_s)
                break
            if not told:
                log.info("%s: another process is tuning this key; waiting for its winner", self.name)
                told = True
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
        if told:
            self.stats["waited_s"] += time.perf_counter() - t0
        try:
            yield
        finally:
            store.release(ctx, token)

    def _report(self, key: tuple, choice: Choice, seconds: float, how: str) -> None:
        if _printing():
            print(f"abductune autotuning for function {self.name},\nwith key as {key},\n"
                  f"finished after {seconds:.2f}s ({how}),\nbest config selected: {choice.name};")


def _json(d: Mapping[str, Any]) -> str:
    import json

    return json.dumps(dict(d), sort_keys=True, separators=(",", ":"))


def _clone(v: Any) -> Any:
    """A copy of a tensor argument for a background tune (the caller may reuse or free its own)."""
    return v.clone() if hasattr(v, "clone") and hasattr(v, "data_ptr") else v


def _compare(name: str, out: Any, expected: Any, tol: float | None) -> str | None:
    """Why `out` differs from `expected` (relative L2 error over the tolerance of its dtype)."""
    import torch

    exp = torch.as_tensor(expected).to(out.device)
    if tuple(exp.shape) != tuple(out.shape):
        return f"{name}: shape {tuple(out.shape)}, expected {tuple(exp.shape)}"
    a, b = out.double(), exp.double()
    err = float((a - b).norm() / b.norm().clamp_min(1e-30))
    limit = tol if tol is not None else _TOL.get(_dtype_name(out.dtype), 1e-2)
    if not err <= limit:  # NaN counts as wrong
        return f"{name}: relative error {err:.3g} > {limit:g}"
    return None


# ----------------------------------------------------------------------------- the decorator

def autotune(configs: Sequence[Any] | None = None, key: Sequence[str] = (), prune_configs_by: Mapping[str, Any] | None = None,
             reset_to_zero: Sequence[str] | None = None, restore_value: Sequence[str] | None = None,
             pre_hook: Callable | None = None, post_hook: Callable | None = None, warmup: int | None = None,
             rep: int | None = None, use_cuda_graph: bool = False, do_bench: Callable | None = None,
             cache_results: bool = False, **options: Any) -> Callable[[Any], Autotuner]:
    """Decorator for a `@triton.jit` function, with `triton.autotune`'s arguments and meaning.

    abductune's own keyword options: `space` (a Space to search; the configs become seeds),
    `strategy` ("pattern"; any registered name), `strategy_options`, `seed`, `budget` (int
    evaluations or a Budget; default: the list's length with a list only, else 32), `bucket`
    (per key argument: "exact", "pow2", ("align", N) or a callable; a dict name -> bucket, or
    one for all), `reference` (args dict -> {output name: expected}; a config whose outputs
    differ is `wrong_result` and never wins), `reference_tol`, `on_miss` ("tune" or "predict"),
    `store` (a path or a Store; default $ABDUCTUNE_STORE or the user cache dir),
    `implementations` ({name: callable(*args, **kwargs)} competing with the kernel), `timer`
    (config, launch -> ms; for tests), `compile` ("auto", "parallel", "serial"), `judge`
    (re-time close contenders, default True), `name`, `kernel_class`, `wait_timeout_s`,
    `isolate` (measure in a worker process that a crashing config may kill; the kernel and
    every callable option must be importable module-level names), `isolate_timeout_s`
    (seconds a config may take there before it counts as a timeout; default 120), `database`
    (observed-heuristics database path or Database; default the packaged one), `record` (a
    folder: a key that must be tuned measures the whole space grown around the list instead, or
    a fixed sample of it past 1,000 valid configs, and writes it there as a dataset; what
    `abductune sweep --call` sets through `patch_triton`).
    """
    if isinstance(configs, (list, tuple, type(None))) and not configs and options.get("space") is None:
        raise AbductuneError(_NOTHING_TO_TUNE.format(what="no configs" if configs is None else "configs=[]"))

    def decorator(fn: Any) -> Autotuner:
        arg_names = getattr(fn, "arg_names", None)
        if arg_names is None:
            base = _python_fn(fn, any_wrapper=True)
            if base is None:
                raise AbductuneError(f"@abductune.autotune decorates a @triton.jit function, got {fn!r}")
            arg_names = list(inspect.signature(base).parameters)
        return Autotuner(fn, arg_names, configs, key, reset_to_zero, restore_value, pre_hook=pre_hook,
                         post_hook=post_hook, prune_configs_by=prune_configs_by, warmup=warmup, rep=rep,
                         use_cuda_graph=use_cuda_graph, do_bench=do_bench, cache_results=cache_results, **options)
    return decorator


# ----------------------------------------------------------------------------- patch_triton

@dataclass
class TritonPatch:
    """`triton.autotune` replaced by abductune's (with `options` as defaults) until `undo()`
    or the end of the `with` block. Patches nest; undo them in reverse order."""

    options: dict[str, Any] = field(default_factory=dict)
    _saved: list[tuple[Any, str, Any]] = field(default_factory=list)
    autotuners: list[Autotuner] = field(default_factory=list)  # built while the patch was on

    def apply(self) -> "TritonPatch":
        import triton
        import triton.runtime
        import triton.runtime.autotuner

        opts = dict(self.options)

        def patched(configs: Sequence[Any] | None = None, key: Sequence[str] = (), *a: Any, **kw: Any) -> Any:
            decorate = autotune(configs, key, *a, **{**opts, **kw})

            def built(fn: Any) -> Autotuner:
                tuner = decorate(fn)
                self.autotuners.append(tuner)
                return tuner
            return built
        patched.__doc__ = autotune.__doc__
        for mod in (triton, triton.runtime, triton.runtime.autotuner):
            if hasattr(mod, "autotune"):
                self._saved.append((mod, "autotune", mod.autotune))
                mod.autotune = patched
        return self

    def undo(self) -> None:
        while self._saved:
            mod, attr, old = self._saved.pop()
            setattr(mod, attr, old)

    def __enter__(self) -> "TritonPatch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.undo()


def patch_triton(**options: Any) -> TritonPatch:
    """Make `triton.autotune` (and `triton.runtime.autotuner.autotune`) build abductune
    autotuners, so third-party `@triton.autotune` kernels get the store, bucketing and search
    without edits. Kernels decorated while the patch is active are affected (import their
    modules after patching). Reversible: `p = patch_triton(); ...; p.undo()`, or
    `with abductune.patch_triton(store=...): import their_kernels`."""
    return TritonPatch(dict(options)).apply()


class _CallableModule(type(sys)):  # type: ignore[misc]
    """`import abductune.autotune` makes Python bind the *module* to `abductune.autotune`
    (after the package bound the decorator there); calling the module calls the decorator,
    so `@abductune.autotune(...)` works whichever import ran first."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return autotune(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
