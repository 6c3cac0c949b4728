"""The child processes of `library_ops.py` (issue 24): one reach census of a library, or one op in
one mode, in a fresh process. An op child imports, builds its inputs and reference, says it is
ready (a file), waits for "go" on stdin, then times the first call, checks it, runs do_bench and
writes its result (a JSON file). Started by library_ops.py as `library_ops_child.py SPEC.json`."""
from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from library_op_cases import LIBRARIES, OPS, REACH_ROOTS  # noqa: E402


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def _kernel(t: Any) -> str:
    f = getattr(t, "base_fn", None) or getattr(t, "fn", None)
    for _ in range(16):
        if f is None or (hasattr(f, "__code__") and hasattr(f, "__module__")):
            break
        f = getattr(f, "fn", None)
    return f"{f.__module__}.{f.__qualname__}" if f is not None else type(t).__name__


def _of(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _error(stage: str, e: BaseException) -> str:
    if isinstance(e, ModuleNotFoundError):
        return f"{stage}: missing module {e.name!r}"
    return f"{stage}: {type(e).__name__}: {str(e)[:400]}"


def _kind(why: str) -> str:
    """A failure's kind, to count them: the missing module, or the exception's type and first words."""
    text = why.split(": ", 1)[-1]
    return text if text.startswith("missing module") else " ".join(text.split()[:6])[:80]


def _census(prefix: str, patch: Any) -> dict[str, Any]:
    """The Triton autotuners alive in this process whose kernels live in the library: by class,
    abductune's or not, and why each left alone was (the patch's reasons)."""
    import gc
    import warnings

    from triton.runtime.autotuner import Autotuner as TritonAutotuner

    ours = sys.modules.get("abductune.autotune.autotuner")
    why = {what: reason for what, reason in (patch.left_alone if patch is not None else [])}
    found: dict[int, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for o in gc.get_objects():
            try:
                if isinstance(o, TritonAutotuner) and _of(_kernel(o), prefix):
                    found[id(o)] = o
            except Exception:  # noqa: BLE001 - an object whose class lookup fails is not an autotuner
                continue
    rec: dict[str, Any] = {"total": len(found), "reached": 0, "left_alone": 0, "by_class": {}, "left_alone_why": {}}
    for t in found.values():
        cls = type(t).__dict__.get("_abductune_original") or type(t)
        if ours is not None and isinstance(t, ours.Autotuner):
            rec["reached"] += 1
            cls = cls if cls is not ours.Autotuner else TritonAutotuner  # built where Triton's would be
        else:
            rec["left_alone"] += 1
            w = why.get(_kernel(t), "built outside the patch" if patch is not None else "no patch")
            rec["left_alone_why"][w] = rec["left_alone_why"].get(w, 0) + 1
        name = f"{cls.__module__.split('.')[0]}.{cls.__name__}"
        rec["by_class"][name] = rec["by_class"].get(name, 0) + 1
    return rec


def _walk(name: str, failures: dict[str, str], seen: set[str], recurse: bool = True) -> None:
    """Import `name` and, for a package, every submodule below it that imports."""
    import importlib
    import pkgutil

    if name in seen:
        return
    seen.add(name)
    try:
        mod = importlib.import_module(name)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - a module that needs what this machine lacks
        failures[name] = _error("import", e)
        return
    if recurse:
        for info in pkgutil.iter_modules(getattr(mod, "__path__", None) or []):
            _walk(f"{name}.{info.name}", failures, seen)


def child_reach(spec: dict[str, Any], res: dict[str, Any]) -> None:
    lib = spec["library"]
    patch = None
    if spec["mode"] == "patch":
        import abductune

        patch = abductune.patch_triton(store=spec["store"])
    failures: dict[str, str] = {}
    seen: set[str] = set()
    imports, walks = REACH_ROOTS[lib]
    for name in imports:
        _walk(name, failures, seen, recurse=False)
    for name in walks:
        _walk(name, failures, seen)
    if patch is not None:
        patch.undo()
        res["report"] = patch.report()[:3000]  # the patch's own account, by kind, with what it left alone
    kinds: dict[str, int] = {}
    for why in failures.values():
        kinds[_kind(why)] = kinds.get(_kind(why), 0) + 1
    res.update(_census(LIBRARIES[lib], patch), modules=len(seen) - len(failures), import_failures=len(failures),
               failure_kinds=kinds, failures=dict(sorted(failures.items())[:60]))
    if any(n in failures for n in imports):  # the library itself did not import: nothing below counts
        res["error"] = next(failures[n] for n in imports if n in failures)


def _tuners(prefix: str, patch: Any) -> list[dict[str, Any]]:
    """The library's autotuners this op went through: abductune's counts, or Triton's picks."""
    out = []
    if patch is not None:
        for t in patch.autotuners:
            s = t.stats
            if _of(_kernel(t), prefix) and (s["tunes"] or s["store_hits"] or s["predicted"]):
                out.append({"kernel": _kernel(t), "class": type(t).__qualname__, "list": len(t.configs),
                            "best": str(t.best_config), "compile": list(getattr(t, "_plan", None) or ()),
                            "phases": list(getattr(t, "phases", ())),  # where the cold call went (autotune/phases.py)
                            **{k: s[k] for k in ("tunes", "store_hits", "evaluations", "retimed", "beyond_list",
                                                 "beyond_failed", "beyond_pruned", "won_beyond_list",
                                                 "gain_beyond_list", "kept_listed") if k in s}})
        return out
    import gc

    from triton.runtime.autotuner import Autotuner as TritonAutotuner

    for o in gc.get_objects():
        try:
            hit = isinstance(o, TritonAutotuner) and getattr(o, "best_config", None) is not None
        except Exception:  # noqa: BLE001
            continue
        if hit and _of(_kernel(o), prefix):
            out.append({"kernel": _kernel(o), "class": type(o).__qualname__, "list": len(o.configs),
                        "timed": len(getattr(o, "configs_timings", None) or {}), "best": str(o.best_config),
                        "bench_s": round(float(getattr(o, "bench_time", 0.0) or 0.0), 3)})
    return out


def _rel_err(out: Any, ref: Any) -> float:
    import torch

    out = out[0] if isinstance(out, (tuple, list)) else out
    a, b = torch.as_tensor(out).float(), torch.as_tensor(ref).float().to(torch.as_tensor(out).device)
    if a.shape != b.shape:
        return math.inf
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def _op_ms(fn: Any, smoke: bool, res: dict[str, Any]) -> float:
    """The op's time: Triton's do_bench, or with LIBRARY_OPS_TIMER=graph the op replayed as a CUDA
    graph (`do_bench_cudagraph`), for ops of tens of microseconds whose launches from Python vary
    between processes more than the kernels differ; an op that cannot be captured falls back to
    do_bench. `res["timer"]` says which timed it."""
    if smoke:  # no GPU timer in the interpreter: wall clock
        from abductune.measure.inprocess import wall_clock_bench

        res["timer"] = "wall"
        return float(wall_clock_bench(fn, reps=3))
    from triton.testing import do_bench

    if os.environ.get("LIBRARY_OPS_TIMER") == "graph":
        from triton.testing import do_bench_cudagraph

        try:
            t = float(do_bench_cudagraph(fn, return_mode="median"))
            res["timer"] = "cuda graph"
            return t
        except Exception as e:  # noqa: BLE001 - not capturable (a host sync, an allocation the graph cannot hold)
            res["timer_fallback"] = _error("cuda graph", e)
    res["timer"] = "do_bench"
    return float(do_bench(fn, return_mode="median"))


def child_op(spec: dict[str, Any], res: dict[str, Any]) -> None:
    import logging

    seen: list[str] = []

    class Keep(logging.Handler):  # abductune's warnings (serial compiles, failed worker jobs) into the row
        def emit(self, record: logging.LogRecord) -> None:
            msg = record.getMessage().splitlines()[0][:300]
            if msg not in seen and len(seen) < 20:
                seen.append(msg)
    logging.getLogger("abductune").addHandler(Keep(logging.WARNING))
    op, smoke = OPS[spec["op"]], spec["smoke"]
    device = "cpu" if smoke else "cuda"
    patch, stage = None, "setup"
    try:
        t0 = time.perf_counter()
        if spec["mode"] != "triton":
            import abductune

            # LIBRARY_OPS_BUDGET: the "patch32" mode's budget, for a run that must reach beyond a 32-config list;
            # LIBRARY_OPS_BEYOND=N: that mode gives beyond=N instead (each list whole, then N more)
            budget = int(os.environ.get("LIBRARY_OPS_BUDGET", "32"))
            more = os.environ.get("LIBRARY_OPS_BEYOND")
            grow = {"beyond": int(more)} if more else {"budget": budget}
            patch = abductune.patch_triton(store=spec["store"], **(grow if spec["mode"] == "patch32" else {}))
        import torch
        import triton

        if not smoke:  # Triton's driver (its helper module, built once per cache dir) is not tuning
            triton.runtime.driver.active.get_current_target()
        case = op.setup(device)
        _sync(device)
        if spec["role"] == "cold":
            res["env"] = {"torch": torch.__version__, "triton": triton.__version__, "cpus": os.cpu_count(),
                          "device": torch.cuda.get_device_name() if device == "cuda" else "cpu (interpreter)"}
        res["setup_s"] = round(time.perf_counter() - t0, 3)
        res["pool"] = _settle_pool()
        _ready(spec)
        if sys.stdin.readline().strip() != "go":
            res["error"] = "not run: the parent said quit"
            return
        stage = "first call"
        with torch.no_grad():
            t0 = time.perf_counter()
            out = case.call()
            _sync(device)
            res["first_call_s"] = round(time.perf_counter() - t0, 4)
            res["rel_err"] = _rel_err(out, case.ref)
            res["tol"] = case.tol
            res["ok"] = bool(res["rel_err"] <= case.tol)
            del out
            stage = "timing"
            times = [_op_ms(case.call, smoke, res) for _ in range(3)]
        res["op_ms"], res["op_ms_all"] = statistics.median(times), times
    except Exception as e:  # noqa: BLE001 - every failure is a finding of the run, kept in the row
        res["error"] = _error(stage, e)
        res["traceback"] = traceback.format_exc()[-3000:]
    finally:
        prefix = LIBRARIES[op.library]
        try:
            res["tuners"] = _tuners(prefix, patch)
        except Exception as e:  # noqa: BLE001
            res["tuners_error"] = _error("tuners", e)
        if patch is not None:
            res["left_alone"] = [f"{w}: {r}" for w, r in patch.left_alone if _of(w, prefix)][:10]
            res["report"] = patch.report(census=False)[-4000:]
        res["warnings"] = seen


def _settle_pool(limit_s: float = 180.0) -> dict[str, Any] | None:
    """With the patch: wait (up to limit_s) until the compile pool, started as the library's
    kernels were decorated, has imported their modules, so no child's workers import beside the
    child being timed. Says how long after its start the pool was warm (`warm_s`, beside this
    child's import and set-up `setup_s`: whether a program doing the same would have found it
    warm at its first call; the last module it imported counts) and how long this child waited
    for it (`waited_s`)."""
    mod = sys.modules.get("abductune.autotune.compile_workers")
    pool = mod.pool_started() if mod is not None else None
    if pool is None:
        return None
    t0 = time.perf_counter()
    while not pool.settled() and time.perf_counter() - t0 < limit_s:
        time.sleep(0.05)
    return {"settled": pool.settled(), "waited_s": round(time.perf_counter() - t0, 3),
            "warm_s": pool.stats.get("settled_s"),
            "workers": pool.stats["workers"], "ready": pool.ready, "modules": len(pool.modules),
            "target": pool.stats["target"], "first_ready_s": pool.stats["first_ready_s"]}


def _ready(spec: dict[str, Any]) -> None:
    tmp = spec["ready"] + ".tmp"
    Path(tmp).write_text("ready")
    os.replace(tmp, spec["ready"])


def child_main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    res: dict[str, Any] = {k: spec[k] for k in ("id", "role", "op", "library", "mode", "round") if k in spec}
    t0 = time.perf_counter()
    try:
        (child_reach if spec["role"] == "reach" else child_op)(spec, res)
    except Exception as e:  # noqa: BLE001
        res["error"] = _error(spec["role"], e)
        res["traceback"] = traceback.format_exc()[-3000:]
    res["child_s"] = round(time.perf_counter() - t0, 3)
    tmp = spec["result"] + ".tmp"
    Path(tmp).write_text(json.dumps(res, default=str))
    os.replace(tmp, spec["result"])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # a library's atexit work (pools, reports) is not part of the run


if __name__ == "__main__":
    child_main(sys.argv[1])
