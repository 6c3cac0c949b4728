"""Helion's own search against abductune's inside Helion (issue 29, item 2): for Helion's example
kernels, the wall time to a ready kernel and the kernel's time, side by side in one run.

    # one H100, one device call: quick's rows (wall, config) from session 16, its configs re-timed;
    # abductune-nokeep (a fresh worker per search) is the control for the kept worker
    PYTHONPATH=src python3 benchmarks/gpu/helion_bench.py --kernels matmul,softmax,layer_norm,attention \
        --shapes 1 --modes none,abductune,abductune-nokeep,quick --retime 3 --reuse-quick \
        benchmarks/results/session16/helion_h100.json --deadline-s 560 --out $OUT/helion.json
    # two H100s of one host: quick searched again (one lane per kernel), side by side with the rest
    PYTHONPATH=src python3 benchmarks/gpu/helion_bench.py --gpus 2 --kernels matmul,softmax,layer_norm,attention \
        --shapes 1 --modes none,abductune,quick --retime 3 --deadline-s 560 --out $OUT/helion.json
    python3 benchmarks/gpu/helion_bench.py --cpu --out /tmp/helion_cpu.json     # no GPU: Triton's interpreter
    python3 benchmarks/gpu/helion_bench.py --dry-run --retime --kernels softmax   # no torch: the driver only

The kernels are `helion_bench_kernels.py` (matmul, softmax, layer_norm, attention, int4_matmul).
Each mode runs in its own process (a *lane*: empty Triton, Inductor and Helion caches), which
runs that mode's searches one after another, as a program that tunes several kernels would
(abductune keeps Helion's benchmark worker across them, Helion's own searches start one each).
Every lane first runs one small kernel with `autotune_effort="none"`, so the process's first-use
costs fall on no search. Every row records its place in its process (`search_index`), the
workers started during it (`worker_starts`) and where its wall time went (`account`: Helion's
baseline, codegen, parallel compiles, timing and accuracy jobs in its worker, run-offs, final
verification, the rest: `abductune.integrations.helion_account`), for every mode alike.

Modes:
- `none`: `autotune_effort="none"`, Helion's default config; `none+abductune` /
  `none+abductune-always`: abductune's zero-shot seed promoted (`install(promote=True|"always")`);
- `quick`, `full`: Helion's default search at that effort (`full` capped by `--full-budget-s`,
  Helion's `autotune_budget_seconds`: an uncapped full run takes 400-1800 s per kernel on the
  H100); `+seeds`: with abductune's heuristics in Helion's registry;
- `abductune`: abductune's search (`autotuner_with(...)`), its worker kept across searches;
  `abductune-full`: the same at Helion's `full` effort (64 evaluations);
  `abductune-noseeds`: without abductune's seeds; `abductune-nokeep`: no worker kept
  (ABDUCTUNE_HELION_WORKER_IDLE_S=0); `abductune-inproc`: Helion's
  `autotune_benchmark_subprocess=False`, no worker at all (no protection from a config that
  hangs or faults the GPU).
Wall time: the first call of a fresh kernel object (bind, search, compile, run) to a synchronised
result. Kernel time: `triton.testing.do_bench` median (ms). `--retime [ROUNDS]` compiles every
mode's final config of a kernel and shape in one more process and times them side by side in
rotated rounds (PyTorch's op among them); the table's ratios use those times where every row has
one. `--reuse-quick JSON` takes quick's rows (wall, config) from an earlier run (needs --retime);
`--reuse MODE=JSON` does the same for any mode (an uncapped `full`'s rows, say).
`--deadline-s`: no process runs past it (a lane is killed there, keeping its finished rows; a
lane starts no search with less than 30 s left; `--retime` keeps `--retime-reserve-s` for the
re-timing). Writes `--out` after every row and prints the table last.
"""
from __future__ import annotations

import argparse
import json
import lzma
import math
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(HERE))

if "--child" in sys.argv and os.environ.get("HELION_BENCH_CPUS"):  # this lane's share of the host's CPUs
    os.sched_setaffinity(0, {int(c) for c in os.environ["HELION_BENCH_CPUS"].split(",")})

MODES = ("none", "none+abductune", "none+abductune-always", "quick", "quick+seeds", "full", "full+seeds",
         "abductune", "abductune-full", "abductune-noseeds", "abductune-nokeep", "abductune-inproc")
SMOKE_MODES = ["none", "none+abductune", "none+abductune-always", "abductune"]
SHAPES: dict[str, list[tuple[int, ...]]] = {
    "matmul": [(1024, 1024, 1024), (128, 4096, 4096), (2048, 256, 8192)],  # M, N, K
    "softmax": [(4096, 1024), (1024, 8192), (256, 32768)],  # rows, cols
    "layer_norm": [(4096, 768), (2048, 4096), (8192, 8192)],
    "attention": [(4, 16, 1024, 64), (1, 32, 4096, 128), (8, 8, 512, 128)],  # B, H, S, D
    "int4_matmul": [(16, 4096, 4096), (256, 4096, 4096), (2048, 8192, 2048)],  # M, N, K
}
CPU_SHAPES = {"matmul": [(64, 64, 32), (32, 64, 64), (64, 32, 64)], "int4_matmul": [(16, 32, 32)]}
CPU_ENV = {"HELION_BENCH_CPU": "1", "TRITON_INTERPRET": "1", "HELION_AUTOTUNE_PRECOMPILE": "0"}
MIN_START_S = 30.0

if "--child" in sys.argv or __name__ != "__main__":  # the kernels need torch and Helion; the driver neither
    import torch

    from helion_bench_kernels import (CPU, GRAPH_FALLBACKS, attention, bench_ms, cpu_benchmark_fn,  # noqa: F401
                                      device_name, int4_matmul, kernels, layer_norm, matmul, softmax, sync,
                                      timer_name, versions)


# ----------------------------------------------------------------------------- one search (in a lane)

def _uncached(search_cls: Any, **options: Any) -> Callable[..., Any]:
    """An autotuner_fn without Helion's cache, whose key needs a GPU (the --cpu path)."""
    def fn(bound: Any, args: Any, **kw: Any) -> Any:
        from helion.autotuner.effort_profile import get_effort_profile

        prof = search_cls.get_kwargs_from_profile(get_effort_profile(bound.settings.autotune_effort), bound.settings)
        return search_cls(bound, args, **{**prof, **options, **kw})
    return fn


def search_row(kernel: str, shape: tuple[int, ...], mode: str, opts: dict[str, Any], account: Any = None
               ) -> dict[str, Any]:
    """One search, its first call timed; `account`: a HelionAccount whose share of that call
    (where the wall time went) goes into the row."""
    import helion

    fn, make_args, reference, baseline = kernels()[kernel]
    settings: dict[str, Any] = {"static_shapes": True, "autotune_effort": "quick"}
    if mode.startswith("none"):
        settings["autotune_effort"] = "none"
    elif mode.startswith("full"):
        settings.update(autotune_effort="full", autotune_budget_seconds=int(opts["full_budget_s"]))
    elif mode == "abductune-full":  # our search at full's effort: its 64 evaluations, no seconds cap
        settings["autotune_effort"] = "full"
    if mode == "abductune-inproc":
        settings["autotune_benchmark_subprocess"] = False
    if CPU:
        settings.update(autotune_benchmark_fn=cpu_benchmark_fn, autotune_progress_bar=False)
    searches: list[Any] = []
    if "abductune" in mode or mode.endswith("+seeds"):
        import abductune.integrations.helion as ath

        promote = {"none+abductune": True, "none+abductune-always": "always"}.get(mode, False)
        ath.install(promote=promote, with_heuristics=mode != "abductune-noseeds")
        ath.fired(clear=True)  # this search's seeds only, not an earlier search's in this lane
    if mode.startswith("abductune"):
        kw = {"abductune_seeds": mode != "abductune-noseeds", "strategy": opts["strategy"],
              **({"max_evaluations": opts["evaluations"]} if opts["evaluations"] else {})}
        make = _uncached(ath.AbductuneSearch, **kw) if CPU else ath.autotuner_with(**kw)

        def autotuner_fn(bound: Any, args: Any, **k2: Any) -> Any:
            tuner = make(bound, args, **k2)
            searches.append(getattr(tuner, "autotuner", tuner))
            return tuner
        settings["autotuner_fn"] = autotuner_fn
    elif CPU and not mode.startswith("none"):
        from helion.autotuner import LFBOTreeSearch

        settings["autotuner_fn"] = _uncached(LFBOTreeSearch)
    k = helion.kernel(**settings)(fn)
    torch.manual_seed(0)
    args = make_args(shape)
    sync()
    before = account.snapshot() if account is not None else None
    t0 = time.perf_counter()
    out = k(*args)
    sync()
    wall = time.perf_counter() - t0
    err = float((out.float() - reference(*args).float()).abs().max())
    ms, ref_ms = bench_ms(lambda: k(*args)), bench_ms(lambda: baseline(*args))
    bound = k.bind(args)
    cfg = getattr(bound, "_config", None)
    # what Helion's heuristics promoted (None: none did): session 42 found every none+abductune row
    # of sessions 18 and 20 running Helion's default, although our seeds had fired
    promoted = getattr(getattr(bound, "config_spec", None), "compiler_default_config", None)
    row = {"kernel": kernel, "shape": list(shape), "mode": mode, "wall_s": round(wall, 3), "kernel_ms": ms,
           "torch_ms": ref_ms, "max_err": err, "config": repr(cfg),
           "config_json": cfg.to_json() if hasattr(cfg, "to_json") else None,
           "effort": settings["autotune_effort"], "budget_s": settings.get("autotune_budget_seconds"),
           "device": device_name(), "versions": versions(), "timer": timer_name(),
           "compiler_default": None if promoted is None else repr(promoted)}
    if GRAPH_FALLBACKS:
        row["timer_fallbacks"] = list(GRAPH_FALLBACKS)
        del GRAPH_FALLBACKS[:]
    if account is not None:
        row["account"] = account.since(before, wall)
    if searches:
        rep = searches[-1].report
        row["abductune"] = {k2: rep.get(k2) for k2 in ("evaluations", "winner_ms", "search_s", "timing", "final",
                                                        "pinned", "phases", "seeds", "seed_screen", "graph_timing")}
        row["keeper"] = ath.worker_stats()
    if "abductune" in mode or mode.endswith("+seeds"):
        row["fired"] = [f for f in ath.fired() if f["status"] == "seed"]
    return row


def probe_worker() -> float | None:
    """Seconds from spawning Helion's benchmark worker to its first answer (a job that
    imports Helion there): the start-up a search waits for where no worker is kept."""
    from abductune.integrations.helion_worker import first_answer_s, shutdown, spawn_worker

    w = spawn_worker()
    if w is None:
        return None
    try:
        return round(first_answer_s(w), 3)
    finally:
        shutdown(w)


def lane(job: dict[str, Any]) -> None:
    """One mode's searches in this process, a JSON line each (module docstring)."""
    import helion

    from abductune.integrations.helion_account import HelionAccount

    account = HelionAccount().__enter__()  # for the lane's life: where each search's time went
    t0 = time.perf_counter()
    fn, make_args, _, _ = kernels()["matmul"]
    helion.kernel(static_shapes=True, autotune_effort="none")(fn)(*make_args((32, 32, 32)))
    sync()
    warmup_s = round(time.perf_counter() - t0, 3)
    for i, (kernel, shape) in enumerate(job["items"]):
        if job.get("deadline_at") and time.time() > job["deadline_at"] - MIN_START_S:
            print(json.dumps({"skipped": [kernel, shape], "mode": job["mode"], "why": "deadline"}), flush=True)
            continue
        before = account.totals["worker_starts"]
        try:
            row = search_row(kernel, tuple(shape), job["mode"], job["opts"], account)
        except Exception as e:  # noqa: BLE001 - one failed search is a row; the lane goes on
            row = {"kernel": kernel, "shape": list(shape), "mode": job["mode"],
                   "error": f"{type(e).__name__}: {e}"[:600]}
        row.update(lane=job["lane"], search_index=i, worker_starts=account.totals["worker_starts"] - before,
                   warmup_s=warmup_s)
        if job["opts"].get("probe_worker") and i == 0:
            row["worker_start_s"] = probe_worker()
        print(json.dumps(row), flush=True)


def _config(text: str) -> Any:
    """A helion.Config from a row: its JSON, else its repr (rows written before config_json)."""
    import helion

    return helion.Config.from_json(text) if text.lstrip().startswith("{") else eval(text, {"helion": helion})  # noqa: S307 - our own rows


def retime(kernel: str, shape: tuple[int, ...], configs: dict[str, str], rounds: int) -> dict[str, Any]:
    """Every mode's final config (and PyTorch's op) compiled in one process and timed side by side:
    `rounds` rounds of `bench_ms` medians, each round in a rotated order; the median over rounds
    per mode. Two modes with one config show the noise floor."""
    import statistics

    import helion

    fn, make_args, _, baseline = kernels()[kernel]
    torch.manual_seed(0)
    args = make_args(shape)
    calls = {}
    for mode, text in configs.items():
        k = helion.kernel(static_shapes=True, config=_config(text))(fn)
        k(*args)  # compile before any timing
        calls[mode] = (lambda k=k: k(*args))
    calls["torch"] = lambda: baseline(*args)
    sync()
    names = list(calls)
    samples: dict[str, list[float]] = {m: [] for m in names}
    for r in range(rounds):
        for m in names[r % len(names):] + names[:r % len(names)]:
            samples[m].append(bench_ms(calls[m], warmup=25, rep=100))
    cold = cold_ms(calls, rounds)
    return {"kernel": kernel, "shape": list(shape), "retimed_ms": {m: statistics.median(v) for m, v in samples.items()},
            "samples_ms": samples, "rounds": rounds, "timer": timer_name(), **cold,
            **({"timer_fallbacks": list(GRAPH_FALLBACKS)} if GRAPH_FALLBACKS else {})}


def cold_ms(calls: dict[str, Any], rounds: int) -> dict[str, Any]:
    """The same calls timed as Helion's searches time a config: Helion's `interleaved_bench` with
    CUDA graphs, each call after an L2 flush (short calls batched in one graph with the flushes,
    the flush-only graph's time subtracted), interleaved; `rounds` such passes, the median of
    each mode's per-pass medians. Why beside the warm re-timing: `do_bench_cudagraph` replays a
    kernel back to back with its inputs left in L2, which rewards a config that keeps them there
    (no eviction hint) on inputs of a few MB, while Helion `quick`, `full` and our search all
    rank configs cold; the two timers disagreed by 3-4% on layer_norm and softmax (session 44,
    45). Empty where this Helion has no such timer or it fails."""
    import statistics

    try:
        from helion.autotuner.benchmarking import interleaved_bench
    except ImportError as e:
        return {"cold_error": f"{type(e).__name__}: {e}"[:300]}
    names = list(calls)
    passes: dict[str, list[float]] = {m: [] for m in names}
    try:
        for _ in range(max(1, rounds)):
            for m, t in zip(names, interleaved_bench([calls[m] for m in names], repeat=200, default_cudagraph=True)):
                passes[m].append(float(t))
    except Exception as e:  # noqa: BLE001 - the warm figures stand without it
        return {"cold_error": f"{type(e).__name__}: {e}"[:300]}
    return {"retimed_cold_ms": {m: statistics.median(v) for m, v in passes.items()}, "cold_samples_ms": passes}


# ----------------------------------------------------------------------------- the driver

def estimate_s(mode: str, n: int, opts: dict[str, Any]) -> float:
    """A lane's rough seconds on the H100 (session 15's figures), to order and plan lanes."""
    start = 20.0  # interpreter, imports, the warm-up kernel
    if mode.startswith("none"):
        return start + 4 * n
    if mode.startswith("full"):
        return start + (opts["full_budget_s"] + 40) * n
    if mode.startswith("quick"):
        return start + 100 * n
    if mode in ("abductune-nokeep",):
        return start + 28 * n
    return start + 15 * n + (0 if mode == "abductune-inproc" else 14)


def build_lanes(items: dict[str, list[tuple[str, tuple[int, ...]]]], opts: dict[str, Any], gpus: int) -> list[dict]:
    """Lanes (a mode's items in one process). On several GPUs a searching mode gets one lane per
    kernel (abductune's only where each kernel has several shapes, so that a lane still shows
    the worker kept across its searches), and the longest lanes go first; on one GPU the modes
    run in the order given."""
    lanes = []
    for mode, its in items.items():
        kernels_n = len({k for k, _ in its})
        split = gpus > 1 and (mode.startswith(("quick", "full")) or
                              (mode.startswith("abductune") and len(its) >= 2 * kernels_n))
        groups = [[it for it in its if it[0] == k] for k in dict.fromkeys(k for k, _ in its)] if split else [its]
        for j, g in enumerate(x for x in groups if x):
            lanes.append({"lane": f"{mode}#{j}", "mode": mode, "items": [[k, list(s)] for k, s in g],
                          "estimate_s": estimate_s(mode, len(g), opts)})
    return sorted(lanes, key=lambda ln: -ln["estimate_s"]) if gpus > 1 else lanes


def slots(gpus: int) -> list[dict[str, str]]:
    """Per GPU: the environment of a process that runs on it alone, with its share of CPUs."""
    if gpus <= 1:
        return [{}]
    cpus = sorted(os.sched_getaffinity(0))
    per = max(1, len(cpus) // gpus)
    return [{"CUDA_VISIBLE_DEVICES": str(g), "HELION_BENCH_CPUS": ",".join(map(str, cpus[g * per:(g + 1) * per])),
             "HELION_AUTOTUNE_PRECOMPILE_JOBS": str(per)} for g in range(gpus)]


OnLine = Callable[[dict], None]


def run_child(job: dict[str, Any], env_extra: dict[str, str], timeout: float, on_line: OnLine) -> str | None:
    """A child process (a lane, or the re-timing) with empty caches; each JSON line it prints goes
    to `on_line` as it comes. Killed at `timeout`; returns an error text, or None."""
    with tempfile.TemporaryDirectory(prefix="helion_bench_") as tmp:
        env = {**os.environ, "TRITON_CACHE_DIR": f"{tmp}/triton", "TORCHINDUCTOR_CACHE_DIR": f"{tmp}/inductor",
               "HELION_CACHE_DIR": f"{tmp}/helion", "PYTHONUNBUFFERED": "1",
               "HELION_AUTOTUNE_LOG_LEVEL": os.environ.get("HELION_AUTOTUNE_LOG_LEVEL", "30"), **env_extra}
        with open(f"{tmp}/stderr", "w+") as err:
            p = subprocess.Popen([sys.executable, __file__, "--child", json.dumps(job)], stdout=subprocess.PIPE,
                                 stderr=err, text=True, env=env, start_new_session=True)
            killed = threading.Event()

            def kill() -> None:  # the child, Helion's compile processes and its worker (which dies with it)
                killed.set()
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            timer = threading.Timer(max(1.0, timeout), kill)
            timer.start()
            try:
                for line in p.stdout:  # type: ignore[union-attr]
                    if line.startswith("{"):
                        on_line(json.loads(line))
                p.wait()
            finally:
                timer.cancel()
            if killed.is_set():
                return f"killed at its deadline ({timeout:.0f} s)"
            if p.returncode != 0:
                err.seek(0)
                return " | ".join(err.read().strip().splitlines()[-3:])[-600:] or f"exit {p.returncode}"
    return None


def dry_child(job: dict[str, Any], env_extra: dict[str, str], timeout: float, on_line: OnLine) -> str | None:
    """--dry-run: made-up lines for a job, no GPU (the driver's plumbing on a CPU)."""
    if "retime" in job:
        for kernel, shape, configs in job["retime"]:
            on_line({"kernel": kernel, "shape": shape, "rounds": job["rounds"],
                     "retimed_ms": {m: 0.01 * (1 + i / 100) for i, m in enumerate([*configs, "torch"])},
                     "retimed_cold_ms": {m: 0.012 * (1 - i / 100) for i, m in enumerate([*configs, "torch"])},
                     "timer": "cuda graph" if os.environ.get("HELION_BENCH_TIMER") == "graph" else "do_bench"})
        return None
    for i, (kernel, shape) in enumerate(job["items"]):
        mode = job["mode"]
        row = {"kernel": kernel, "shape": shape, "mode": mode, "wall_s": {"none": 3.0, "quick": 60.0}.get(mode, 12.0),
               "kernel_ms": {"none": 0.0103, "quick": 0.0080}.get(mode, 0.0100), "torch_ms": 0.01, "max_err": 0.0,
               "config": f"helion.Config(num_warps={4 if mode == 'none' else 2})", "config_json": None,
               "device": "dry-run", "versions": {}, "lane": job["lane"], "search_index": i,
               "worker_starts": int(mode.startswith("quick") or (mode.startswith("abductune") and i == 0))}
        if job["opts"].get("probe_worker") and i == 0:
            row["worker_start_s"] = 9.0
        if mode.startswith("abductune"):
            row["abductune"] = {"evaluations": 24, "timing": {
                "prepare_s": 1.0, "search_s": 8.0, "compile_s": 3.0, "bench_s": 2.0, "first_bench_s": 1.0,
                "runoff_s": 0.5, "final_s": 0.5, "ours_s": 2.0, "timed": 24, "batches": 5, "worker_reused": i > 0}}
        n = 24 if mode.startswith("abductune") else 96  # an account as helion_account.since writes it
        row["account"] = {"wall_s": row["wall_s"], "baseline_s": 0.5, "setup_s": 0.1, "batch_s": row["wall_s"] / 2,
                          "codegen_s": 1.0, "precompile_s": 2.0, "bench_s": 0.07 * n, "first_bench_s": 0.1,
                          "bench_median_s": 0.07, "bench_max_s": 0.2, "bench_job_s": 0.05 * n, "accuracy_s": 0.01 * n,
                          "rebench_s": 0.5, "final_s": 1.0, "cleanup_s": 0.1, "other_s": 1.0, "batches": 4,
                          "configs": n, "timed": n, "worker_starts": row["worker_starts"]}
        on_line(row)
    return None


def reused(specs: list[tuple[str, str]]) -> dict[tuple[str, tuple[int, ...], str], dict[str, Any]]:
    """(kernel, shape, mode) -> a row of that mode measured earlier, for each (mode, path) of
    --reuse MODE=JSON (--reuse-quick JSON: quick's); a later spec of a mode wins."""
    out: dict[tuple[str, tuple[int, ...], str], dict[str, Any]] = {}
    for mode, path in specs:
        raw = lzma.open(path, "rt").read() if path.endswith(".xz") else Path(path).read_text()  # results are kept .xz
        rows = json.loads(raw)["rows"]
        # its old re-timing is dropped: only times taken side by side in this run are compared
        out.update({(r["kernel"], tuple(r["shape"]), mode): {**{k: v for k, v in r.items() if not k.startswith("retime")},
                                                             "reused_from": path, "kernel_ms_then": r.get("kernel_ms")}
                    for r in rows if r.get("mode") == mode and "error" not in r})
    return out


def _ms(r: dict[str, Any] | None, retimed: bool) -> float | None:
    if r is None or "error" in r:
        return None
    return r.get("retimed_ms") if retimed else r.get("kernel_ms")


def _cold(r: dict[str, Any] | None) -> float | None:
    return None if r is None or "error" in r else r.get("retimed_cold_ms")


def _geomean(xs: list[float]) -> float | None:
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def table(rows: list[dict[str, Any]], modes: list[str]) -> str:
    """Per kernel and shape: each mode's kernel ms (retimed side by side, where it was), wall s
    and place in its process (#i; * reused from an earlier run), abductune against quick and
    none; then the geomeans, where abductune's time went and the workers each mode started."""
    by: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        by.setdefault((r["kernel"], tuple(r["shape"])), {})[r["mode"]] = r

    def cell(r: dict[str, Any] | None) -> str:
        if r is None or "error" in r:
            return "error" if r is not None else "-"
        rt = f" ({r['retimed_ms']:.4f})" if r.get("retimed_ms") is not None else ""
        at = f" #{r['search_index']}" if "search_index" in r else ""
        return f"{r['kernel_ms']:.4f}{rt} / {r['wall_s']:.0f}s{at}" + ("*" if r.get("reused_from") else "")

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:.3f}" if a and b else "-"

    vs_full = "full" in modes  # the other comparison: abductune against an (uncapped) full
    head = ["kernel", "shape", "torch ms", *modes, "abd/quick ms", "cold", "abd/quick wall", "abd/none ms",
            *(["abd/full ms", "abd/full wall"] if vs_full else [])]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    from abductune.integrations.helion_account import describe

    notes, accounts, walls = [], [], {"all": [], "later": []}
    for (kernel, shape), got in by.items():
        a, q, n, f = got.get("abductune"), got.get("quick"), got.get("none"), got.get("full")
        rt = all(x is None or "error" in x or x.get("retimed_ms") is not None for x in (a, q, n, f))
        torch_ms = next((f"{r['torch_ms']:.4f}" for r in got.values() if "torch_ms" in r), "-")
        lines.append(" | ".join([kernel, "x".join(map(str, shape)), torch_ms, *(cell(got.get(m)) for m in modes),
                                 ratio(_ms(a, rt), _ms(q, rt)), ratio(_cold(a), _cold(q)),
                                 ratio(a and a.get("wall_s"), q and q.get("wall_s")), ratio(_ms(a, rt), _ms(n, rt)),
                                 *([ratio(_ms(a, rt), _ms(f, rt)), ratio(a and a.get("wall_s"), f and f.get("wall_s"))]
                                   if vs_full else [])]))
        if a and q and "error" not in a and "error" not in q:
            walls["all"].append(a["wall_s"] / q["wall_s"])
            if a.get("search_index", 0) > 0:
                walls["later"].append(a["wall_s"] / q["wall_s"])
        t = ((a or {}).get("abductune") or {}).get("timing")
        if t:
            notes.append(f"{kernel} {'x'.join(map(str, shape))}: abductune prepare {t['prepare_s']:.1f} s, search "
                         f"{t['search_s']:.1f} s = Helion compile {t['compile_s']:.1f} (codegen "
                         f"{t.get('codegen_s', 0):.1f}) + bench {t['bench_s']:.1f} (first {t['first_bench_s']:.1f}, "
                         f"slowest {t.get('bench_max_s', 0):.2f}) + run-offs {t['runoff_s']:.1f} + final "
                         f"{t['final_s']:.1f} + ours {t['ours_s']:.1f}; {t['timed']} timed in {t['batches']} batches"
                         f"; worker {'kept from an earlier search' if t.get('worker_reused') else 'started'}")
        accounts += [f"{kernel} {'x'.join(map(str, shape))} {m}: {describe(r['account'])}"
                     for m, r in got.items() if r.get("account") and not m.startswith("none")]
    for name, xs in walls.items():
        g = _geomean(xs)
        if g is not None:
            what = "every kernel and shape" if name == "all" else "searches after the first in their process"
            notes.append(f"abductune / quick wall, geomean over {what}: {g:.3f} ({len(xs)})")
    for m in modes:
        mine = [r for r in rows if r.get("mode") == m and "worker_starts" in r and "error" not in r]
        if mine:
            notes.append(f"{m}: {sum(r['worker_starts'] for r in mine)} benchmark worker(s) started in {len(mine)} "
                         f"search(es)")
    probes = [f"{r['kernel']} {r['worker_start_s']:.1f} s" for r in rows if r.get("worker_start_s")]
    if probes:
        notes.append("Helion's benchmark worker, spawn to first answer: " + ", ".join(probes))
    if accounts:
        notes += ["where each search's wall time went (helion_account.py):", *accounts]
    return "\n".join(lines + ["", "ratios use the side-by-side re-timing where every row has one (cold: the same "
                               "configs timed as Helion's searches time them, each call after an L2 flush); #i: the "
                               "search's place in its process; * wall from an earlier run (--reuse-quick, --reuse)", *notes])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--kernels", default=None, help=f"comma-separated (default: all; --smoke, --cpu: matmul): "
                                                   f"{', '.join(SHAPES)}")
    ap.add_argument("--modes", default=None, help=f"comma-separated, run in this order (default: all; --cpu: "
                                                 f"none,abductune): {', '.join(MODES)}")
    ap.add_argument("--shapes", type=int, default=3, help="shapes per kernel (the first N)")
    ap.add_argument("--pick", default="", metavar="KERNEL=I,...",
                    help="for the kernels named, only their shape I (0-based) in place of the first N")
    ap.add_argument("--smoke", action="store_true",
                    help=f"the first shape of each kernel (matmul unless --kernels), modes {', '.join(SMOKE_MODES)}")
    ap.add_argument("--cpu", action="store_true", help="no GPU: Triton's interpreter, small matmul shapes, a CPU "
                                                       "timer in place of Helion's (helion_bench_kernels.py)")
    ap.add_argument("--gpus", type=int, default=1, help="run lanes side by side, one per GPU of this host")
    ap.add_argument("--full-budget-s", type=int, default=240, help="autotune_budget_seconds of full")
    ap.add_argument("--strategy", default="abduction")
    ap.add_argument("--evaluations", type=int, default=0, help="abductune's budget (0: by effort; --cpu: 4)")
    ap.add_argument("--retime", type=int, nargs="?", const=7, default=0, metavar="ROUNDS",
                    help="time every mode's config of each kernel and shape side by side (ROUNDS rotated rounds)")
    ap.add_argument("--timer", choices=("do_bench", "graph"), default="do_bench",
                    help="how a ready kernel is timed (the row's kernel_ms and --retime): Triton's do_bench, or "
                         "graph: replayed as a CUDA graph, for kernels of a few microseconds whose Python call "
                         "costs more than they run (falls back to do_bench where a call cannot be captured, "
                         "said in the row)")
    ap.add_argument("--retime-reserve-s", type=float, default=60.0, help="seconds before the deadline kept for it")
    ap.add_argument("--reuse-quick", default=None, metavar="JSON",
                    help="take quick's rows (wall, config) from an earlier run of this script (needs --retime)")
    ap.add_argument("--reuse", action="append", default=[], metavar="MODE=JSON",
                    help="the same for any mode, e.g. full=benchmarks/results/session42/helion_full_h200.json.xz "
                         "(repeatable; needs --retime)")
    ap.add_argument("--timeout-s", type=float, default=3600.0, help="per process")
    ap.add_argument("--deadline-s", type=float, default=0.0, help="no process runs past this many seconds")
    ap.add_argument("--probe-worker", action="store_true",
                    help="the first none search also times Helion's benchmark worker start (spawn to first answer)")
    ap.add_argument("--dry-run", action="store_true", help="made-up rows, no GPU: the driver's plumbing only")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "out" / "helion_bench.json"))
    a = ap.parse_args()
    if a.child:
        job = json.loads(a.child)
        if "retime" in job:
            for kernel, shape, configs in job["retime"]:
                print(json.dumps(retime(kernel, tuple(shape), configs, job["rounds"])), flush=True)
        else:
            lane(job)
        return 0
    if a.timer == "graph":  # the children read it (helion_bench_kernels.bench_ms)
        os.environ["HELION_BENCH_TIMER"] = "graph"
    shapes = CPU_SHAPES if a.cpu else SHAPES
    names = [k for k in (a.kernels or ("matmul" if a.smoke or a.cpu else ",".join(SHAPES))).split(",") if k]
    modes = SMOKE_MODES if a.smoke else [m for m in (a.modes or ("none,abductune" if a.cpu else ",".join(MODES)))
                                         .split(",") if m]
    bad = [k for k in names if k not in shapes] + [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"unknown kernel or mode: {', '.join(bad)} (kernels {', '.join(shapes)}; modes {', '.join(MODES)})")
    specs = [("quick", a.reuse_quick)] if a.reuse_quick else []
    for spec in a.reuse:
        mode, _, path = spec.partition("=")
        if mode not in MODES or not path:
            ap.error(f"--reuse takes MODE=JSON with a mode of {', '.join(MODES)} (got {spec!r})")
        specs.append((mode, path))
    if specs and not a.retime:
        ap.error(f"{'--reuse-quick' if a.reuse_quick else '--reuse'} needs --retime: a reused row's kernel time must "
                 "be measured again beside the others")
    earlier = reused(specs)
    opts = {"full_budget_s": a.full_budget_s, "strategy": a.strategy,
            "evaluations": a.evaluations or (4 if a.cpu else 0)}
    try:
        picks = {k: int(i) for k, i in (p.split("=") for p in a.pick.split(",") if p)}
    except ValueError:
        ap.error(f"--pick takes KERNEL=INDEX pairs, e.g. attention=1 (got {a.pick!r})")
    wrong = [f"{k}={i}" for k, i in picks.items() if k not in shapes or not 0 <= i < len(shapes[k])]
    if wrong:
        ap.error(f"--pick names no shape: {', '.join(wrong)}")
    pairs = [(k, s) for k in names
             for s in ([shapes[k][picks[k]]] if k in picks else shapes[k][: 1 if a.smoke else a.shapes])]
    items = {m: [p for p in pairs if (*p, m) not in earlier] for m in modes}
    lanes = build_lanes(items, opts, a.gpus)
    child = dry_child if a.dry_run else run_child
    base_env = dict(CPU_ENV) if a.cpu else {}
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = [dict(earlier[(*p, m)]) for m in modes for p in pairs if (*p, m) in earlier]
    meta: dict[str, Any] = {"lanes": [], "not_reached": []}
    lock = threading.Lock()
    t_start, wall_start = time.perf_counter(), time.time()
    reserve = a.retime_reserve_s if a.retime else 0.0

    def left(keep: float = 0.0) -> float:  # what is left before the deadline (less `keep`), capped by --timeout-s
        return min(a.timeout_s, a.deadline_s - keep - (time.perf_counter() - t_start) if a.deadline_s else math.inf)

    def save() -> None:
        out.write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows, **meta}, indent=1) + "\n")

    for ln in lanes:
        print(f"plan: {ln['lane']}: {len(ln['items'])} search(es), about {ln['estimate_s']:.0f} s on an H100",
              flush=True)
    todo: queue.Queue = queue.Queue()
    for ln in lanes:
        todo.put(ln)

    def on_line(ln: dict[str, Any], line: dict[str, Any]) -> None:
        with lock:
            if "skipped" in line:
                meta["not_reached"].append({"mode": ln["mode"], "item": line["skipped"], "why": line["why"]})
            else:
                rows.append(line)
                print(json.dumps({k: line.get(k) for k in ("kernel", "shape", "mode", "search_index", "wall_s",
                                                           "kernel_ms", "worker_starts", "error")}), flush=True)
            save()

    def worker(env: dict[str, str]) -> None:
        while True:
            try:
                ln = todo.get_nowait()
            except queue.Empty:
                return
            budget = left(reserve)
            env_extra = {**base_env, **env, **({"ABDUCTUNE_HELION_WORKER_IDLE_S": "0"}
                                               if ln["mode"] == "abductune-nokeep" else {})}
            job = {**ln, "opts": {**opts, "probe_worker": a.probe_worker and ln["mode"] == "none"},
                   "deadline_at": wall_start + a.deadline_s - reserve if a.deadline_s else None}
            seen = len(rows)
            t0 = time.perf_counter()
            err = child(job, env_extra, budget, lambda line, ln=ln: on_line(ln, line)) if budget >= MIN_START_S \
                else "not started: the deadline"
            with lock:
                done = {(r["kernel"], tuple(r["shape"])) for r in rows[seen:] if r.get("mode") == ln["mode"]}
                noted = {(x["item"][0], tuple(x["item"][1])) for x in meta["not_reached"] if x["mode"] == ln["mode"]}
                if err:
                    meta["not_reached"] += [{"mode": ln["mode"], "item": it, "why": err} for it in ln["items"]
                                            if (it[0], tuple(it[1])) not in done | noted]
                meta["lanes"].append({"lane": ln["lane"], "seconds": round(time.perf_counter() - t0, 1),
                                      "estimate_s": ln["estimate_s"], "gpu": env.get("CUDA_VISIBLE_DEVICES"),
                                      "error": err})
                save()

    threads = [threading.Thread(target=worker, args=(env,)) for env in slots(a.gpus)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    if a.retime:
        groups: dict[tuple, dict[str, str]] = {}
        for r in rows:
            if "error" not in r:
                groups.setdefault((r["kernel"], tuple(r["shape"])), {})[r["mode"]] = r.get("config_json") or r["config"]
        jobs = [[k, list(s), c] for (k, s), c in groups.items()]
        per = slots(min(a.gpus, max(1, len(jobs))))
        chunks = [jobs[i::len(per)] for i in range(len(per))]

        def apply(line: dict[str, Any]) -> None:
            with lock:
                for r in rows:
                    if (r["kernel"], list(r["shape"])) == (line["kernel"], list(line["shape"])) \
                            and r["mode"] in line["retimed_ms"]:
                        r["retimed_ms"] = line["retimed_ms"][r["mode"]]
                        r["retimed_torch_ms"] = line["retimed_ms"].get("torch")
                        if r["mode"] in (line.get("retimed_cold_ms") or {}):
                            r["retimed_cold_ms"] = line["retimed_cold_ms"][r["mode"]]
                        elif line.get("cold_error"):
                            r["cold_error"] = line["cold_error"]
                        r["retime_timer"] = line.get("timer")
                        if line.get("timer_fallbacks"):
                            r["retime_timer_fallbacks"] = line["timer_fallbacks"]
                save()

        def run_retime(env: dict[str, str], chunk: list) -> None:
            err = child({"retime": chunk, "rounds": a.retime}, {**base_env, **env}, left(), apply) \
                if chunk and left() >= MIN_START_S else ("not started: the deadline" if chunk else None)
            if err:
                with lock:
                    meta.setdefault("retime_errors", []).append(err)
        threads = [threading.Thread(target=run_retime, args=(env, ch)) for env, ch in zip(per, chunks)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        devices = {r.get("device") for r in rows if "error" not in r and not r.get("reused_from")}
        for r in rows:
            if r.get("reused_from") and devices and r.get("device") not in devices:
                r["device_mismatch"] = sorted(d for d in devices if d)
        save()
    print(table(rows, modes))
    if meta["not_reached"]:
        print("not reached: " + "; ".join(f"{x['mode']} {x['item'][0]} {'x'.join(map(str, x['item'][1]))} ({x['why']})"
                                          for x in meta["not_reached"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
