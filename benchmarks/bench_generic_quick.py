"""Quick A/B of the abduction strategy's generic mode on the 13 public benchmark-hub spaces
(no seeds, or with `--transfer` the other GPUs' seeds): mean methodology score P at 20 and 50 evaluations (`--budgets`), per space and
overall, for one set of strategy options. Smaller than `bench_abduction.py` (two budgets, one strategy),
so a knob can be judged over several base seeds in about a minute per seed.

    python benchmarks/bench_generic_quick.py --options '{}' --seeds 1,2,3 --repeats 10
    python benchmarks/bench_generic_quick.py --options '{"batch": 2, "tpe_slots": 1}' --seeds 1,2,3

Prints one line per space (P20, P50, mean over seeds) and the overall mean last.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

def one(job: tuple[str, str, dict, int, int, tuple[int, ...], bool]) -> tuple[str, dict[int, float]]:
    from abductune.datasets.public import load_any
    from abductune.evaluate import compare_on_dataset
    from bench_abduction import transfer_seeds

    path, strategy, options, seed, repeats, budgets, transfer = job
    p = Path(path)
    seeds = transfer_seeds(path)[0] if transfer else []
    cells = compare_on_dataset(load_any(path), [strategy], list(budgets), repeats, seed,
                               seeds_fn=(lambda _d: seeds) if seeds else None,
                               options={strategy: options} if options else None, label=f"{p.parent.name}/{p.name}")
    return f"{p.parent.name}/{p.name}", {c.budget: c.score for c in cells}


def main() -> None:
    from bench_abduction import datasets

    ap = argparse.ArgumentParser()
    ap.add_argument("--strategy", default="abduction")
    ap.add_argument("--options", default="{}", help="strategy options as JSON")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--budgets", default="20,50")
    ap.add_argument("--kernels", default="", help="comma-separated public kernels to keep (default all)")
    ap.add_argument("--transfer", action="store_true", help="seed each space from the same kernel on the other "
                    "GPUs (bench_abduction's transfer suite) instead of no seeds")
    args = ap.parse_args()
    budgets = tuple(int(b) for b in args.budgets.split(","))
    keep = [k for k in args.kernels.split(",") if k]
    opts = json.loads(args.options)
    seeds = [int(s) for s in args.seeds.split(",")]
    t0 = time.time()
    paths = [p for p in datasets("public", False) if not keep or p.parent.name in keep]
    jobs = [(str(p), args.strategy, opts, s, args.repeats, budgets, args.transfer) for s in seeds for p in paths]
    with ProcessPoolExecutor(args.jobs) as ex:
        results = list(ex.map(one, jobs))
    per: dict[str, list[dict[int, float]]] = {}
    for name, scores in results:
        per.setdefault(name, []).append(scores)
    means = {b: [] for b in budgets}
    for name, runs in per.items():
        m = {b: statistics.fmean(r[b] for r in runs) for b in budgets}
        for b in budgets:
            means[b].append(m[b])
        print(f"{name:40s} " + " ".join(f"P{b} {m[b]:.2f}" for b in budgets))
    print(f"mean {args.strategy} {opts}: " + ", ".join(f"P{b} {statistics.fmean(means[b]):.3f}" for b in budgets)
          + f" (seeds {args.seeds}, {args.repeats} repeats, {time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
