"""How to time microsecond kernels: CUDA events around each launch (after an L2 flush) against
the same reps captured in one CUDA graph (events as graph nodes, flush kept), and Triton's
`do_bench_cudagraph` style (a graph of back-to-back launches, no flush, mean per launch) for
reference. Same configs, methods interleaved round by round in one process on one GPU.

    python benchmarks/gpu/timing_probe.py --out probe.json [--rounds 5] [--reps 100]

Per kernel and method: median time per config, the spread of each config's median across
rounds (max/min), how often two rounds rank the configs alike (Kendall tau), and the wall
seconds a timing costs. Prints a table last.
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

CASES = [("rmsnorm_fp16", {"rows": 1, "cols": 4096}), ("rmsnorm_fp16", {"rows": 256, "cols": 8192}),
         ("gelu_mul_fp16", {"numel": 917504}), ("softmax_fp16", {"rows": 16384, "cols": 1024}),
         ("rmsnorm_fp16", {"rows": 16384, "cols": 4096})]


def kendall(a: list[float], b: list[float]) -> float:
    s = n = 0
    for i, j in itertools.combinations(range(len(a)), 2):
        x, y = a[i] - a[j], b[i] - b[j]
        if x and y:
            s += 1 if (x > 0) == (y > 0) else -1
            n += 1
    return s / n if n else 1.0


def nograph_flushless(bench, fn, reps: int) -> list[float]:
    """Triton's do_bench_cudagraph idea: reps back-to-back launches in one graph, no flush."""
    torch = bench.torch
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    out = []
    for _ in range(3):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e) / reps)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=100)
    args = ap.parse_args()
    from abductune import kernels
    from abductune.measure.target import local_hardware
    from abductune.measure.worker import _Bench

    bench = _Bench()
    hw = local_hardware()
    results = []
    for kname, dims in CASES:
        spec = kernels.get(kname)
        problem = spec.problem(dims, hw)
        bench.setup(kname, problem.to_dict(), 0)
        configs = [c for c in spec.fixed_configs() if spec.space().is_valid(c)]
        fns = [(lambda c=c: spec.launch(c, bench.inputs, bench.out)) for c in configs]
        for f in fns:
            f()
        bench.torch.cuda.synchronize()
        methods = {"events": lambda f: bench._time(f, args.reps),
                   "graph": lambda f: bench._time_graph(f, args.reps),
                   "graph_noflush": lambda f: nograph_flushless(bench, f, args.reps)}
        med = {m: [[0.0] * len(fns) for _ in range(args.rounds)] for m in methods}
        wall = {m: 0.0 for m in methods}
        for r in range(args.rounds):
            for m, timer in methods.items():
                for i, f in enumerate(fns):
                    t0 = time.perf_counter()
                    xs = timer(f)
                    wall[m] += time.perf_counter() - t0
                    med[m][r][i] = statistics.median(xs) if xs else float("nan")
        row = {"kernel": kname, "dims": dims, "configs": configs, "graph_ok": bench.graph_ok, "methods": {}}
        for m in methods:
            per_cfg = [statistics.median(med[m][r][i] for r in range(args.rounds)) for i in range(len(fns))]
            spread = [max(med[m][r][i] for r in range(args.rounds)) / min(med[m][r][i] for r in range(args.rounds))
                      for i in range(len(fns))]
            taus = [kendall(med[m][a], med[m][b]) for a, b in itertools.combinations(range(args.rounds), 2)]
            row["methods"][m] = {"median_ms": per_cfg, "spread": spread, "tau": statistics.fmean(taus),
                                 "wall_s_per_timing": wall[m] / (args.rounds * len(fns)), "rounds": med[m]}
        results.append(row)
        Path(args.out).write_text(json.dumps(results, indent=1))
    print(f"{'kernel':28} {'method':14} {'best us':>8} {'mean us':>8} {'spread':>7} {'tau':>5} {'ms/timing':>9}")
    for row in results:
        shape = ",".join(f"{k}={v}" for k, v in row["dims"].items())
        for m, d in row["methods"].items():
            print(f"{row['kernel'][:12] + ' ' + shape:28} {m:14} {min(d['median_ms']) * 1e3:8.2f} "
                  f"{statistics.fmean(d['median_ms']) * 1e3:8.2f} {max(d['spread']):7.3f} {d['tau']:5.2f} "
                  f"{d['wall_s_per_timing'] * 1e3:9.1f}")


if __name__ == "__main__":
    main()
