"""Cold live tunes on the GPU, compared side by side with the fixed list, the exhaustive
optimum (from the bundled sweep) and torch, plus compile throughput.

    python benchmarks/gpu/tune_bench.py --out results.json [--deadline-s 500] [--throughput]

Each shape is tuned with an empty Triton cache (compile time included), strategy pattern,
budget 32 evaluations (seeds included), seeds from the built-in heuristics only (no observed
database: it would have been harvested from these very shapes). Afterwards the winner, the
fixed list's best, the recorded optimum and the default are re-timed interleaved in one
worker, with torch, so the ratios come from one run. Resumable: finished shapes are skipped.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))


def compare(spec, problem, configs: dict[str, dict], rounds: int = 5, reps: int = 10) -> dict[str, float]:
    from abductune.measure.live import GRAPH_BELOW_MS, BenchWorker

    w = BenchWorker()
    try:
        w.request({"op": "setup", "kernel": spec.name, "problem": problem.to_dict(), "seed": 1}, 600)
        names = list(configs)
        r = w.request({"op": "interleaved", "configs": [configs[n] for n in names], "rounds": rounds,
                       "reps": reps, "graph_below_ms": GRAPH_BELOW_MS}, 600)
        out = {n: statistics.median(s) for n, s in zip(names, r.samples)}
        torch_ms = []
        for _ in range(rounds):
            b = w.request({"op": "bench", "config": None, "opts": {"target_ms": 5, "min_reps": reps,
                                                                   "max_reps": reps,
                                                                   "graph_below_ms": GRAPH_BELOW_MS}}, 120)
            torch_ms.append(b.time_ms)
        out["torch"] = statistics.median(torch_ms)
        return out
    finally:
        w.close()


def throughput(spec, problem, counts: dict[int, int]) -> list[dict]:
    from abductune.measure.live import Compiler

    configs = spec.space().valid_configs()
    rows = []
    for workers, n in counts.items():
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="tc-")  # cold; workers inherit it
        c = Compiler(workers)
        t0 = time.perf_counter()  # pool start-up included: a real tune pays it too
        res = c.compile(spec.name, configs[100:100 + n], problem)
        wall = time.perf_counter() - t0
        c.shutdown()
        rows.append({"workers": workers, "configs": n, "wall_s": wall, "configs_per_s": n / wall,
                     "mean_compile_s": statistics.fmean(r.compile_s for r in res),
                     "ok": sum(r.status == "ok" for r in res)})
        print("throughput", rows[-1], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline-s", type=float, default=500)
    ap.add_argument("--budget", type=int, default=32)
    ap.add_argument("--strategy", default="pattern")
    ap.add_argument("--throughput", action="store_true")
    ap.add_argument("--skip-tunes", action="store_true")
    args = ap.parse_args()
    t_start = time.time()

    from abductune import kernels
    from abductune.datasets.bundled import find_bundled
    from abductune.datasets.format import read_dataset
    from abductune.search import Budget
    from abductune.hardware import local_hardware
    from abductune.tune import tune_one

    spec = kernels.get("matmul_fp16")
    hw = local_hardware()
    out = Path(args.out)
    data = json.loads(out.read_text()) if out.exists() else {"tunes": [], "throughput": []}
    done = {json.dumps(r["dims"]) for r in data["tunes"]}
    for dims in ([] if args.skip_tunes else spec.suite_shapes()):
        if json.dumps(dims) in done:
            continue
        if time.time() - t_start > args.deadline_s:
            print("deadline: stopping (resumable)", flush=True)
            break
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="tc-")  # cold: compile included
        o = tune_one(spec.name, dims, strategy=args.strategy, budget=Budget(args.budget), mode="live",
                     database=False, compile_workers=16)
        ds = read_dataset(find_bundled(spec.name, dims))
        cfgs = {"winner": o.winner.config, "fixed_best": o.fixed_best.config,
                "optimum": ds.optimum().config, "default": spec.default_config()}
        side = compare(spec, spec.problem(dims, hw), cfgs)
        row = {**o.to_dict(), "side_by_side_ms": side, "winner_vs_fixed": side["winner"] / side["fixed_best"],
               "winner_vs_optimum": side["winner"] / side["optimum"], "winner_vs_torch": side["winner"] / side["torch"]}
        data["tunes"].append(row)
        out.write_text(json.dumps(data, indent=1))
        print(f"{dims} wall {o.wall_s:5.1f}s evals {o.evaluations} winner/fixed {row['winner_vs_fixed']:.3f} "
              f"winner/opt {row['winner_vs_optimum']:.3f} winner/torch {row['winner_vs_torch']:.3f}", flush=True)
    if args.throughput:
        data["throughput"] = throughput(spec, spec.problem({"M": 4096, "N": 4096, "K": 4096}, hw),
                                        {1: 8, 4: 32, 16: 64})
        out.write_text(json.dumps(data, indent=1))
    print(f"total {time.time() - t_start:.0f} s")


if __name__ == "__main__":
    main()
