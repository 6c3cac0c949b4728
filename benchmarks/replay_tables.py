"""Markdown tables from an `abductune replay --json` file (aggregate, then per dataset).

    python benchmarks/replay_tables.py benchmarks/results/replay_public.json [--per-dataset]
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--per-dataset", action="store_true")
    args = ap.parse_args()
    d = json.load(open(args.path))
    print("| strategy | budget | mean P | median best/opt | ≤1.02× | ≤1.05× |")
    print("|---|---|---|---|---|---|")
    for r in d["aggregate"]:
        print(f"| {r['strategy']} | {r['budget']} | {r['mean_score_P']:.2f} | {r['geomean_median_ratio']:.3f} | "
              f"{r['mean_within_1.02']:.0%} | {r['mean_within_1.05']:.0%} |")
    if args.per_dataset:
        cells = defaultdict(dict)
        for c in d["cells"]:
            cells[(c["dataset"], c["strategy"])][c["budget"]] = c
        budgets = d["budgets"]
        print("\n| dataset | strategy | " + " | ".join(f"B={b}" for b in budgets) + " |")
        print("|---|---|" + "---|" * len(budgets))
        for (ds, st), per in sorted(cells.items()):
            row = [f"{per[b]['median_ratio']:.3f} ({per[b]['score_P']:.2f})" if b in per else "-" for b in budgets]
            print(f"| {ds} | {st} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
