"""Where a cold live tune's compile time goes: pool start-up and compile throughput, offline
compile workers (a stand-in driver, meta tensors, no CUDA context) against CUDA-context ones,
and whether the benchmark worker reuses the offline binaries (Triton cache hits).

    python benchmarks/gpu/compile_probe.py --out probe.json [--configs 32] [--workers 16]

Each mode gets a fresh Triton cache and a fresh pool; the same configs (a seeded sample of
the matmul space at 4096^3) are compiled in both. Prints a table last.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))


def probe_mode(mode: str, spec, problem, configs: list[dict], workers: int) -> dict:
    from abductune.measure.live import BenchWorker, Compiler
    from abductune.measure.target import compile_target

    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"tc-{mode}-")  # workers inherit it
    target = compile_target() if mode == "offline" else None
    t0 = time.perf_counter()
    c = Compiler(workers, facts="triton", target=target)
    c.warm()
    for f in list(c._futures.values()):
        f.result()
    start_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    done_at: list[float] = []
    res = c.compile(spec.name, configs, problem, on_done=lambda i, r: done_at.append(time.perf_counter() - t1))
    wall = time.perf_counter() - t1
    c.shutdown()
    row = {"mode": mode, "target": target, "workers": workers, "pool_start_s": start_s, "compile_wall_s": wall,
           "configs": len(configs), "ok": sum(r.ok for r in res),
           "compile_s": [r.compile_s for r in res], "status": [r.status for r in res],
           "first_done_s": min(done_at) if done_at else None, "median_done_s": statistics.median(done_at) if done_at else None}
    # the benchmark worker on the same cache: a reused binary is a cache hit at first launch
    w = BenchWorker()
    try:
        t2 = time.perf_counter()
        w.request({"op": "setup", "kernel": spec.name, "problem": problem.to_dict(), "seed": 0}, 600)
        row["bench_setup_s"] = time.perf_counter() - t2
        firsts, misses, regs = [], 0, []
        for cfg, r in zip(configs, res):
            if not r.ok:
                continue
            b = w.request({"op": "bench", "config": cfg, "opts": {"target_ms": 5, "min_reps": 3, "max_reps": 10}}, 120)
            firsts.append(b.first_call_s or 0.0)
            misses += bool(b.compiled_here)
            regs.append(b.registers)
        row.update(first_call_s=firsts, cache_misses=misses, registers=regs)
    finally:
        w.close()
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--configs", type=int, default=32)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--modes", default="offline,cuda")
    a = ap.parse_args()
    from abductune import kernels

    spec = kernels.get("matmul_fp16")
    problem = spec.problem({"M": 4096, "N": 4096, "K": 4096})
    valid = spec.space().valid_configs()
    configs = random.Random(0).sample(valid, a.configs)
    rows = [probe_mode(m, spec, problem, configs, a.workers) for m in a.modes.split(",")]
    Path(a.out).write_text(json.dumps(rows, indent=1))
    print(f"{'mode':8} {'pool start':>10} {'compile wall':>12} {'ok':>4} {'mean cfg s':>10} {'max cfg s':>9} "
          f"{'1st done':>8} {'misses':>6} {'1st call med':>12}")
    for r in rows:
        cs = [s for s, st in zip(r["compile_s"], r["status"]) if st == "ok"] or [0.0]
        print(f"{r['mode']:8} {r['pool_start_s']:10.2f} {r['compile_wall_s']:12.2f} {r['ok']:4d} "
              f"{statistics.fmean(cs):10.2f} {max(cs):9.2f} {r['first_done_s'] or 0:8.2f} {r['cache_misses']:6d} "
              f"{statistics.median(r['first_call_s'] or [0]):12.3f}")


if __name__ == "__main__":
    main()
