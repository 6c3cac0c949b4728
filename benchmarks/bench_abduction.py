"""Abduction against every baseline strategy, on replay, with the same seeds for all.

Two suites:
- bundled: our H100 recordings (matmul, softmax, rmsnorm, gelu_mul), budgets 8/16/32/64, each
  shape seeded leave-one-shape-out (`tune.seed_list(..., exclude=problem)`: heuristics plus the
  observed database without the rules learned from that shape). Figure: median best/optimum
  per shape over repeats, geometric mean over the shapes of a kernel.
- public: the 13 Kernel Tuner benchmark-hub spaces, no seeds, budgets 20/50/100/200. Figure:
  the methodology score P (0 = random sampling, 1 = optimum; see abductune.evaluate), mean
  over the spaces.
- transfer: the same spaces and figure, each seeded from the same kernel on the *other* GPUs
  (leave-one-GPU-out): an observed database harvested (`harvest_datasets`, any-GPU level)
  from the sibling files only, looked up the way `tune` seeds a run. What cross-hardware
  knowledge buys on kernels with no roles.

Each suite runs without and with replay noise (`NoiseModel.from_study()`, the spread measured
on the H100). Every (dataset, strategy, repeat) has its own seed; coordinate descent and
pattern search restart instead of stopping (FAIR_REPLAY_OPTIONS); every measurement counts,
re-measurements included.

    python benchmarks/bench_abduction.py                 # everything, 20 repeats
    python benchmarks/bench_abduction.py --quick         # 3 repeats, one space per public kernel
    python benchmarks/bench_abduction.py --suites bundled --noise off --repeats 5 --jobs 2
    python benchmarks/bench_abduction.py --suites public --strategies abduction,tpe --seeds 0,1,2,3

`--seeds`: the whole comparison once per base seed; the tables then give the mean over seeds
and the range. On the public spaces mean P moves by up to 0.13 at 50 evaluations with the
base seed alone, so a single seed cannot judge a change there.

Writes JSON to --out (default: benchmarks/out/abduction.json, an untracked folder; the figures
kept in docs live in benchmarks/results/, written only when --out names them) and prints
Markdown tables.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

BASELINES = ["random", "coordesc", "pattern", "beam", "genetic", "tpe"]
STRATEGIES = ["abduction", *BASELINES]
BUDGETS = {"bundled": [8, 16, 32, 64], "public": [20, 50, 100, 200], "transfer": [20, 50, 100, 200]}
# results go where --out says, else to the untracked benchmarks/out/ (never over a tracked file)
OUT = Path(__file__).resolve().parent / "out"


def datasets(suite: str, quick: bool) -> list[Path]:
    from abductune.datasets.paths import expand_dataset_args

    if suite == "bundled":
        return [p for p in expand_dataset_args(["bundled"])]
    # public and transfer: the benchmark-hub spaces
    paths = [p for p in expand_dataset_args(["public"]) if "kernel_tuner_benchmark_hub" in str(p)]
    if quick:  # one space per public kernel
        seen: set[str] = set()
        paths = [p for p in paths if not (p.parent.name in seen or seen.add(p.parent.name))]
    return paths


def kernel_of(suite: str, path: Path) -> str:
    name = path.parent.name
    return name.removesuffix("_fp16") if suite == "bundled" else name


def loo_seeds(ds: Any) -> tuple[list[Any], str]:
    """Leave-one-shape-out seeds for a bundled dataset, and a note when `exclude` is missing."""
    from abductune.tune import seed_list

    space = ds.space()
    default = ds.meta.get("default_config") or space.default()
    try:
        seeds, _ = seed_list(ds.problem, space, default, None, True, None, exclude=ds.problem)
        return seeds, ""
    except TypeError as e:  # an older seed_list without `exclude`
        seeds, _ = seed_list(ds.problem, space, default, None, True, None)
        return seeds, f"seed_list has no exclude ({e}): seeds may know this shape"


def transfer_seeds(path: str) -> tuple[list[Any], str]:
    """Seeds for a public space from the same kernel on the other GPUs only (leave-one-GPU-out):
    the replayed file itself never enters the database."""
    from abductune.datasets.public import load_any
    from abductune.heuristics.harvest import harvest_datasets
    from abductune.tune import seed_list

    here = Path(path)
    siblings = sorted(p for p in here.parent.glob("*.json*") if p.name != here.name)
    if not siblings:
        return [], "no other GPU's data for this kernel"
    db = harvest_datasets([load_any(p) for p in siblings], levels=("any",)).database
    ds = load_any(path)
    space = ds.space()
    seeds, _ = seed_list(ds.problem, space, ds.meta.get("default_config") or space.default(), None, True, db)
    return seeds, f"learned from {', '.join(p.name.split('.')[0] for p in siblings)}"


def run_one(suite: str, path: str, noise: bool, strategies: list[str], repeats: int, seed: int) -> dict[str, Any]:
    from abductune.datasets.public import load_any
    from abductune.evaluate import compare_on_dataset
    from abductune.measure.replay import NoiseModel

    t0 = time.time()
    ds = load_any(path)
    seeds, note = (loo_seeds(ds) if suite == "bundled" else transfer_seeds(path) if suite == "transfer"
                   else ([], ""))
    cells = compare_on_dataset(ds, strategies, BUDGETS[suite], repeats, seed,
                               seeds_fn=(lambda _d: seeds) if seeds else None,
                               noise=NoiseModel.from_study() if noise else None,
                               label=f"{Path(path).parent.name}/{Path(path).name}")
    return {"suite": suite, "path": path, "kernel": kernel_of(suite, Path(path)), "noise": noise, "seed": seed,
            "seeds": [{"config": s.config, "source": s.source} for s in seeds], "note": note,
            "seconds": time.time() - t0, "cells": [c.to_dict() for c in cells]}


def geomean(xs: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in xs))


def summarise(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (suite, kernel or 'all', noise, strategy, budget, base seed): geomean of the median
    ratio, mean P, mean share of repeats within 1.02x."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in results:
        for c in r["cells"]:
            for kern in (r["kernel"], "all"):
                key = (r["suite"], kern, r["noise"], c["strategy"], c["budget"], r.get("seed", 0))
                groups.setdefault(key, []).append(c)
    out = []
    for (suite, kern, noise, strat, budget, seed), cs in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        out.append({"suite": suite, "kernel": kern, "noise": noise, "strategy": strat, "budget": budget,
                    "seed": seed, "datasets": len(cs),
                    "geomean_median_ratio": geomean([c["median_ratio"] for c in cs]),
                    "mean_score_P": statistics.fmean(c["score_P"] for c in cs),
                    "mean_within_1.02": statistics.fmean(c["within_1.02"] for c in cs),
                    "mean_evaluations": statistics.fmean(c["mean_evaluations"] for c in cs)})
    return out


def tables(summary: list[dict[str, Any]], strategies: list[str]) -> str:
    """Markdown tables; with several base seeds each cell is the mean over seeds and its range."""
    lines: list[str] = []
    keys = sorted({(s["suite"], s["kernel"], s["noise"]) for s in summary}, key=lambda k: (k[0], k[1] == "all", k))
    for suite, kern, noise in keys:
        rows = [s for s in summary if (s["suite"], s["kernel"], s["noise"]) == (suite, kern, noise)]
        budgets = sorted({s["budget"] for s in rows})
        seeds = sorted({s.get("seed", 0) for s in rows})
        metric = "geomean_median_ratio" if suite == "bundled" else "mean_score_P"
        label = "median best/optimum, geomean over shapes" if suite == "bundled" else "mean methodology score P"
        n = max(s["datasets"] for s in rows)
        over = f"; mean over base seeds {','.join(map(str, seeds))} (range)" if len(seeds) > 1 else ""
        lines.append(f"\n{suite} / {kern} / noise {'on' if noise else 'off'} ({n} datasets; {label}{over})\n")
        lines.append("| strategy | " + " | ".join(str(b) for b in budgets) + " |")
        lines.append("|---|" + "---|" * len(budgets))
        nd = 4 if suite == "bundled" else 3
        for strat in strategies:
            vals: dict[int, list[float]] = {}
            for s in rows:
                if s["strategy"] == strat:
                    vals.setdefault(s["budget"], []).append(s[metric])
            if not vals:
                continue
            cells = []
            for b in budgets:
                v = vals.get(b)
                if not v:
                    cells.append("-")
                elif len(v) == 1:
                    cells.append(f"{v[0]:.{nd}f}")
                else:
                    cells.append(f"{statistics.fmean(v):.{nd}f} ({min(v):.{nd}f}-{max(v):.{nd}f})")
            lines.append(f"| {strat} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suites", default="bundled,public")
    ap.add_argument("--noise", choices=("off", "on", "both"), default="both")
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--kernels", default="", help="comma-separated kernel folder names to keep (default all)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="3 repeats, one public space per kernel")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", default="", help="comma-separated base seeds (overrides --seed): the "
                    "comparison is run once per seed and the tables give mean and range")
    ap.add_argument("--jobs", type=int, default=max(1, os.cpu_count() or 1))
    ap.add_argument("--out", default="")
    args = ap.parse_args()

    repeats = 3 if args.quick and args.repeats == 20 else args.repeats
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    noises = {"off": [False], "on": [True], "both": [False, True]}[args.noise]
    kernels = {k.strip() for k in args.kernels.split(",") if k.strip()}
    base_seeds = [int(x) for x in args.seeds.split(",") if x.strip()] if args.seeds else [args.seed]
    work = [(suite, str(p), nz, sd) for sd in base_seeds for suite in suites for p in datasets(suite, args.quick)
            for nz in noises if not kernels or p.parent.name in kernels or kernel_of(suite, p) in kernels]
    if not work:
        sys.exit("no datasets found (public data: set $ABDUCTUNE_PUBLIC_DATA or place it at shared/datasets/public)")
    # the slowest first (public, larger spaces) so the pool stays busy
    work.sort(key=lambda w: (w[0] == "bundled", "gemm" not in w[1]))
    t0 = time.time()
    results: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futs = [pool.submit(run_one, s, p, nz, strategies, repeats, sd) for s, p, nz, sd in work]
        for i, f in enumerate(futs, 1):
            r = f.result()
            results.append(r)
            print(f"[{i}/{len(futs)}] {r['suite']} {Path(r['path']).parent.name}/{Path(r['path']).name} "
                  f"noise={'on' if r['noise'] else 'off'} seed={r['seed']} {r['seconds']:.0f}s"
                  + (f" NOTE: {r['note']}" if r["note"] and r["suite"] != "transfer" else ""), file=sys.stderr)
    summary = summarise(results)
    out = Path(args.out) if args.out else OUT / ("abduction_quick.json" if args.quick else "abduction.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": " ".join(sys.argv), "repeats": repeats, "strategies": strategies,
                               "base_seeds": base_seeds,
                               "budgets": BUDGETS, "seconds": time.time() - t0, "summary": summary,
                               "results": results}, indent=1, default=str))
    print(tables(summary, strategies))
    print(f"\nwrote {out} ({time.time() - t0:.0f}s)", file=sys.stderr)


if __name__ == "__main__":
    main()
