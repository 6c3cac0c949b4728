"""Recorded configs by how much they spill, against their shape's optimum: where spilling stops
being a config the fastest can be (`theory.check.HEAVY_SPILL_BYTES`).

    python benchmarks/spill_table.py [DATASETS ...] [--json OUT]

DATASETS as for `abductune replay` (default: zoo bundled). For every record that ran, its spill
stores (bytes per thread, from ptxas, as recorded) fall in a bin; per bin: how many, the
smallest, 10th-percentile and median time over the shape's optimum, and the share within 5% of
the optimum.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

EDGES = (0, 1, 64, 128, 256, 512, 1024, 4096)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("datasets", nargs="*", default=["zoo", "bundled"])
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    from abductune.datasets.format import read_dataset
    from abductune.datasets.paths import expand_dataset_args

    bins: dict[int, list[float]] = defaultdict(list)
    for path in expand_dataset_args(args.datasets):
        ds = read_dataset(path)
        ran = [m for m in ds.records if m.status == "ok" and m.time_ms]
        if not ran:
            continue
        best = min(m.time_ms for m in ran)
        for m in ran:
            spilled = m.spills or 0
            bins[max(e for e in EDGES if spilled >= e)].append(m.time_ms / best)
    rows = []
    print("| spill stores (bytes) | records | min | p10 | median | within 5% of the optimum |")
    print("|---|---|---|---|---|---|")
    for i, lo in enumerate(EDGES):
        xs = sorted(bins.get(lo, []))
        if not xs:
            continue
        hi = f"-{EDGES[i + 1] - 1}" if i + 1 < len(EDGES) else "+"
        row = {"from": lo, "records": len(xs), "min": xs[0], "p10": xs[len(xs) // 10],
               "median": xs[len(xs) // 2], "within_5pct": sum(x < 1.05 for x in xs) / len(xs)}
        rows.append(row)
        print(f"| {lo}{hi} | {len(xs)} | {row['min']:.3f} | {row['p10']:.3f} | {row['median']:.3f} | "
              f"{row['within_5pct']:.1%} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"datasets": args.datasets, "bins": rows}, indent=1))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
