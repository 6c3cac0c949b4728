"""Core speed: enumerating constrained spaces, importing and enumerating a public Kernel Tuner
space, and the cost of a replayed evaluation and of a search step.

    python benchmarks/bench_core.py [--json PATH] [--repeat 5] [--quick]

Writes JSON to --json (default: benchmarks/out/core.json, an untracked folder; the figures kept
in docs are benchmarks/results/core.json, written only when --json names it).

Targets: enumerating a ~20,000-config space in well under a second; a replayed evaluation
in microseconds. Every figure is the best of `--repeat` runs (time.perf_counter).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable

from abductune.datasets.public import load_any, public_data_dir
from abductune.measure.replay import ReplayEvaluator
from abductune.search import Budget, run
from abductune.search.random import RandomSearch
from abductune.space import Bool, Choice, IntRange, Pow2, Space

GEMM = "kernel_tuner_benchmark_hub/gemm_clblast/RTX_3090.json.gz"

CONSTRAINT_SETS: dict[str, list[str]] = {
    "no constraints": [],
    "1 simple constraint": ["BLOCK_M * BLOCK_N <= 128 * 128"],
    "4 realistic constraints": [
        "(BLOCK_M + BLOCK_N) * BLOCK_K * 2 * num_stages <= 232448",  # shared memory
        "num_warps * 32 <= BLOCK_M * BLOCK_N // 16",  # enough work per thread
        "BLOCK_K <= 128 or num_stages <= 3",
        "GROUP_SIZE_M <= max(1, 1024 // BLOCK_M)",
    ],
    "8 mixed constraints": [
        "(BLOCK_M + BLOCK_N) * BLOCK_K * 2 * num_stages <= 232448",
        "num_warps * 32 <= BLOCK_M * BLOCK_N // 16",
        "BLOCK_K <= 128 or num_stages <= 3",
        "GROUP_SIZE_M <= max(1, 1024 // BLOCK_M)",
        "not EVEN_K or BLOCK_K >= 32",
        "min(BLOCK_M, BLOCK_N) * 8 >= max(BLOCK_M, BLOCK_N)",
        "log2(BLOCK_M) + log2(BLOCK_N) + log2(BLOCK_K) <= 20",
        "(BLOCK_M * BLOCK_N) % (num_warps * 32) == 0",
    ],
}


def matmul_space(constraints: list[str]) -> Space:
    """5 x 5 x 5 x 5 x 4 x 4 x 2 = 20,000 configs before constraints."""
    return Space([Pow2("BLOCK_M", 16, 256), Pow2("BLOCK_N", 16, 256), Pow2("BLOCK_K", 16, 256),
                  Pow2("num_warps", 1, 16), IntRange("num_stages", 1, 4),
                  Choice("GROUP_SIZE_M", [1, 2, 4, 8]), Bool("EVEN_K")], constraints, name="mm20k")


def best_of(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def bench_enumeration(repeat: int) -> list[dict[str, Any]]:
    rows = []
    for label, cons in CONSTRAINT_SETS.items():
        secs, n = best_of(lambda: len(matmul_space(cons).valid_configs()), repeat)
        space = matmul_space(cons)
        rows.append({"case": f"enumerate 20k space, {label}", "configs": space.cardinality,
                     "valid": n, "seconds": secs, "us_per_config": secs / space.cardinality * 1e6})
    space = matmul_space(CONSTRAINT_SETS["4 realistic constraints"])
    configs = space.valid_configs()
    sample = configs[:: max(1, len(configs) // 200)]
    for radius in (1, 2):
        secs, _ = best_of(lambda: [space.neighbours(c, radius) for c in sample], repeat)
        rows.append({"case": f"neighbours radius {radius} (4 realistic constraints)", "calls": len(sample),
                     "seconds": secs, "us_per_call": secs / len(sample) * 1e6})
    return rows


def bench_public(repeat: int, quick: bool) -> list[dict[str, Any]]:
    root = public_data_dir()
    if root is None:
        print("public data not found: skipping (b) and (c) (set ABDUCTUNE_PUBLIC_DATA)", file=sys.stderr)
        return []
    rows = []
    path = root / GEMM
    secs, ds = best_of(lambda: load_any(path), 1 if quick else min(repeat, 3))
    rows.append({"case": "import gemm_clblast RTX_3090 (KT cache, 17,956 records)",
                 "records": len(ds.records), "seconds": secs})

    def enum():
        fresh = dataclasses.replace(ds, _space=None)
        return len(fresh.space().valid_configs())
    secs, n = best_of(enum, repeat)
    rows.append({"case": "enumerate gemm_clblast space (restricted_to_records)",
                 "configs": Space.from_dict(ds.space_dict).cardinality, "valid": n, "seconds": secs})

    # (c) replay: one config per call, first-time (clock moves) and repeated (memoised)
    configs = [m.config for m in ds.records]
    random.Random(0).shuffle(configs)
    ev = ReplayEvaluator(ds)

    def first_time():
        ev.reset()
        for c in configs:
            ev.evaluate([c])
    secs, _ = best_of(first_time, repeat)
    rows.append({"case": "ReplayEvaluator.evaluate([cfg]), first time", "calls": len(configs),
                 "seconds": secs, "us_per_call": secs / len(configs) * 1e6})

    def repeated():
        for c in configs:
            ev.evaluate([c])
    secs, _ = best_of(repeated, repeat)
    rows.append({"case": "ReplayEvaluator.evaluate([cfg]), repeat", "calls": len(configs),
                 "seconds": secs, "us_per_call": secs / len(configs) * 1e6})

    ds.space().valid_configs()  # enumerate once (cached on the dataset), outside the timings
    n_evals = 2000 if quick else len(configs)
    for batch in (1, 8):
        def search():
            return run(RandomSearch(seed=0), ReplayEvaluator(ds), Budget(evaluations=n_evals), batch_size=batch)
        secs, res = best_of(search, repeat)
        rows.append({"case": f"run(random, replay), batch {batch}", "evaluations": res.evaluations,
                     "steps": len(res.trace), "seconds": secs,
                     "us_per_evaluation": secs / res.evaluations * 1e6,
                     "us_per_step": secs / len(res.trace) * 1e6})
    return rows


# results go where --out says, else to the untracked benchmarks/out/ (never over a tracked file)
OUT = Path(__file__).resolve().parent / "out"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=str(OUT / "core.json"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="fewer evaluations (smoke run)")
    args = ap.parse_args(argv)
    rows = bench_enumeration(args.repeat) + bench_public(args.repeat, args.quick)
    print(f"{'case':58s} {'seconds':>9s}  per item")
    for r in rows:
        per = next((f"{r[k]:9.2f} {k.split('_per_')[0]}/{k.split('_per_')[1]}"
                    for k in ("us_per_call", "us_per_evaluation", "us_per_config") if k in r), "")
        extra = f"  valid {r['valid']:,}/{r['configs']:,}" if "valid" in r else ""
        print(f"{r['case']:58s} {r['seconds']:9.4f} {per}{extra}")
    out = {"benchmark": "core", "repeat": args.repeat, "quick": args.quick,
           "python": platform.python_version(), "platform": platform.platform(),
           "cpus": os.cpu_count(), "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "rows": rows}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
