"""How well the decorator's in-tune timings rank configs of a small kernel (issue 24: under
`patch_triton(beyond=16)` FlagGems' weight norm, a 12 us kernel, came out 1.09x slower than
Triton's pick while its tune said its pick was 2.78x faster than the list's best).

One op of `library_op_cases.py` per process, in one of two modes:
- `patch`: under `abductune.patch_triton(beyond=N)`; every first-time measurement the tune
  makes is kept (config, time, seconds since the tune began, compile jobs still running in the
  workers at that moment); after the tune, each config measured is timed again, quiet, with
  Triton's do_bench (3 interleaved rounds) and as a CUDA graph, plus its launch's CPU cost.
- `triton`: under Triton's own autotuner; its `configs_timings` after the tune, and the same
  quiet re-timing of each config through the kernel's JITFunction.

    PYTHONPATH=src:/tmp/lib python3 benchmarks/gpu/intune_timing.py --op flaggems_weight_norm \
        --mode patch --out $OUT/wn_patch.json

Prints a short table: the rank correlation of in-tune and quiet times, and the configs the two
disagree on most.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _spearman(a: list[float], b: list[float]) -> float:
    def ranks(x: list[float]) -> list[float]:
        order = sorted(range(len(x)), key=lambda i: x[i])
        r = [0.0] * len(x)
        for k, i in enumerate(order):
            r[i] = float(k)
        return r
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.mean(ra), statistics.mean(rb)
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    den = (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5
    return num / den if den else float("nan")


def _quiet(launches: list[tuple[str, Any]], rounds: int = 3) -> dict[str, dict[str, Any]]:
    """Each launch re-timed: do_bench over interleaved rounds, one CUDA-graph timing, and the CPU
    cost of one launch (200 launches enqueued back to back, then one sync)."""
    import torch
    from triton.testing import do_bench, do_bench_cudagraph

    out: dict[str, dict[str, Any]] = {k: {"bench": []} for k, _ in launches}
    for _ in range(rounds):
        for k, fn in launches:
            try:
                out[k]["bench"].append(float(do_bench(fn, warmup=25, rep=100, return_mode="median")))
            except Exception as e:  # noqa: BLE001
                out[k]["error"] = f"{type(e).__name__}: {e}"[:200]
    for k, fn in launches:
        try:
            out[k]["graph"] = float(do_bench_cudagraph(fn, rep=100, return_mode="median"))
        except Exception as e:  # noqa: BLE001
            out[k]["graph_error"] = f"{type(e).__name__}: {e}"[:200]
        try:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(200):
                fn()
            cpu = (time.perf_counter() - t0) / 200
            torch.cuda.synchronize()
            out[k]["cpu_launch_us"] = cpu * 1e6
        except Exception as e:  # noqa: BLE001
            out[k]["cpu_error"] = f"{type(e).__name__}: {e}"[:200]
    return out


def _first_call(op: str) -> float:
    """Set the op up and call it once (the tune happens here); seconds the call took."""
    from library_op_cases import OPS
    import torch

    case = OPS[op].setup("cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    case.call()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def run_patch(op: str, beyond: int) -> dict[str, Any]:
    import abductune
    from abductune.measure import inprocess

    kept: list[dict[str, Any]] = []
    evaluators: list[Any] = []
    t_start = [None]
    one = inprocess.InProcessEvaluator._one

    def spy(self: Any, cfg: Any) -> Any:
        if t_start[0] is None:
            t_start[0] = time.perf_counter()
        if self not in evaluators:
            evaluators.append(self)
        warm = getattr(self, "warm", None)
        jobs = getattr(warm, "jobs", {}) or {}
        busy = sum(1 for f in jobs.values() if f is not None and not f.done())
        t = time.perf_counter() - t_start[0]
        m = one(self, cfg)
        kept.append({"config": dict(cfg), "time_ms": m.time_ms, "status": str(m.status), "t_s": round(t, 3),
                     "busy_jobs": busy, "samples": list(m.samples_ms or ()), "compile_s": m.compile_s})
        return m
    inprocess.InProcessEvaluator._one = spy
    store = tempfile.mkdtemp(prefix="intune-")
    patch = abductune.patch_triton(store=os.path.join(store, "s.db"), beyond=beyond)
    first_s = _first_call(op)
    inprocess.InProcessEvaluator._one = one
    report = patch.report(census=False)
    time.sleep(2.0)  # the workers' last jobs end; the quiet timing has the machine to itself
    launches = []
    ev = evaluators[-1] if evaluators else None
    seen = set()
    for k in kept:
        key = json.dumps(k["config"], sort_keys=True)
        if k["time_ms"] is None or key in seen or ev is None:
            continue
        seen.add(key)
        launches.append((key, ev.launch(k["config"])))
    quiet = _quiet(launches)
    return {"op": op, "mode": "patch", "beyond": beyond, "first_call_s": first_s, "intune": kept,
            "quiet": quiet, "report": report[-3000:]}


def _autotuners() -> list[Any]:
    import gc

    from triton.runtime.autotuner import Autotuner

    return [o for o in gc.get_objects() if isinstance(o, Autotuner) and getattr(o, "configs_timings", None)]


def run_triton(op: str) -> dict[str, Any]:
    first_s = _first_call(op)
    tuners = _autotuners()
    rows = []
    for tu in tuners:
        for cfg, ts in tu.configs_timings.items():
            t = ts[0] if isinstance(ts, (list, tuple)) else ts
            key = json.dumps({**cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}, sort_keys=True)
            rows.append({"kernel": getattr(tu.fn, "__name__", str(tu.fn)), "config": json.loads(key),
                         "time_ms": float(t), "best": cfg is tu.best_config})
    return {"op": op, "mode": "triton", "first_call_s": first_s, "intune": rows}


def table(res: dict[str, Any]) -> str:
    rows = [r for r in res["intune"] if r.get("time_ms")]
    lines = [f"{res['op']} ({res['mode']}): {len(rows)} configs timed in the tune, first call {res['first_call_s']:.1f} s"]
    if res["mode"] != "patch" or not rows:
        if rows:
            best = min(rows, key=lambda r: r["time_ms"])
            lines.append(f"  Triton's best in its tune: {best['time_ms'] * 1e3:.1f} us {best['config']}")
        return "\n".join(lines)
    q = res["quiet"]
    pairs = []
    for r in rows:
        k = json.dumps(r["config"], sort_keys=True)
        if k in q and q[k]["bench"]:
            pairs.append((r, statistics.median(q[k]["bench"]), q[k].get("graph"), q[k].get("cpu_launch_us")))
    if not pairs:
        return "\n".join(lines + ["  no quiet timing"])
    lines.append(f"  spearman(in-tune, quiet do_bench) = {_spearman([p[0]['time_ms'] for p in pairs], [p[1] for p in pairs]):.3f}")
    g = [p for p in pairs if p[2]]
    if g:
        lines.append(f"  spearman(in-tune, quiet graph) = {_spearman([p[0]['time_ms'] for p in g], [p[2] for p in g]):.3f}"
                     f"; spearman(quiet do_bench, quiet graph) = {_spearman([p[1] for p in g], [p[2] for p in g]):.3f}")
    best_in = min(pairs, key=lambda p: p[0]["time_ms"])
    best_q = min(pairs, key=lambda p: p[1])
    best_g = min(g, key=lambda p: p[2]) if g else None
    for name, p in (("in-tune best", best_in), ("quiet best", best_q), ("graph best", best_g)):
        if p:
            lines.append(f"  {name:13s} in-tune {p[0]['time_ms'] * 1e3:7.1f} us  quiet {p[1] * 1e3:7.1f} us  "
                         f"graph {(p[2] or 0) * 1e3:7.1f} us  cpu {p[3] or 0:6.1f} us  t={p[0]['t_s']}s busy={p[0]['busy_jobs']}  {p[0]['config']}")
    worst = sorted(pairs, key=lambda p: -p[0]["time_ms"] / p[1])[:5]
    lines.append("  most inflated in the tune (in-tune / quiet):")
    for p in worst:
        lines.append(f"    {p[0]['time_ms'] / p[1]:5.2f}x  t={p[0]['t_s']:6.2f}s busy={p[0]['busy_jobs']:2d}  {p[0]['config']}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--op", required=True)
    ap.add_argument("--mode", choices=["patch", "triton"], default="patch")
    ap.add_argument("--beyond", type=int, default=16)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    res = run_patch(a.op, a.beyond) if a.mode == "patch" else run_triton(a.op)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1, default=str))
    print(table(res))


if __name__ == "__main__":
    main()
