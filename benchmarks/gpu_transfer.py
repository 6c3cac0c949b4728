"""How a kernel's recorded landscape moves between two GPUs: the same kernel, shapes and configs recorded on each.

    python benchmarks/gpu_transfer.py HERE [--there zoo] [--json OUT]

HERE: datasets recorded on one GPU (files or folders, as the CLI reads them); THERE (default: the
shipped zoo): the same kernels recorded on another. Shapes are paired by kernel and shape name;
a pair needs both recordings to hold the config compared. Per shape:
- there_best: the other GPU's fastest config, timed here, over here's optimum (what reusing a
  winner tuned on the other GPU costs: a store or a table keyed without the GPU);
- here_best_there: the reverse, here's fastest config timed there over there's optimum;
- spearman: the rank correlation of the configs' times on the two GPUs (over configs that ran on
  both): how much of the ordering a model learned on one GPU can keep on the other;
- speedup: there's optimum over here's (above 1: here is faster).
Rows per kernel (geomean over its shapes, worst), then all. Nothing is measured: it reads records.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def spearman(xs: list[float], ys: list[float]) -> float:
    """Rank correlation (ties at their mean rank); nan with fewer than 3 points."""
    import numpy as np

    if len(xs) < 3:
        return math.nan

    def ranks(v: list[float]) -> "np.ndarray":
        a = np.asarray(v, dtype=float)
        order = a.argsort(kind="stable")
        r = np.empty(len(a))
        r[order] = np.arange(len(a), dtype=float)
        for u in np.unique(a):  # ties share their mean rank
            tie = a == u
            if tie.sum() > 1:
                r[tie] = r[tie].mean()
        return r
    return float(np.corrcoef(ranks(xs), ranks(ys))[0, 1])


def pair_rows(here: list, there: list) -> list[dict]:
    """One row per shape recorded on both (observations from `harvest`), paired by kernel and name."""
    by = {(o.kernel, o.name): o for o in there}
    rows = []
    for h in here:
        t = by.get((h.kernel, h.name))
        if t is None:
            continue
        both = [k for k in h.times if k in t.times and math.isfinite(h.times[k]) and math.isfinite(t.times[k])]
        if not both:
            continue
        hb, tb = min(both, key=h.times.get), min(both, key=t.times.get)
        rows.append({
            "kernel": h.kernel, "shape": h.name,
            "here": h.hardware.name if h.hardware else "?", "there": t.hardware.name if t.hardware else "?",
            "configs": len(both),
            "there_best": h.times[tb] / h.times[hb], "here_best_there": t.times[hb] / t.times[tb],
            "spearman": spearman([h.times[k] for k in both], [t.times[k] for k in both]),
            "speedup": t.times[tb] / h.times[hb],
            "there_best_config": dict(h.space.from_key(tb)), "here_best_config": dict(h.space.from_key(hb)),
        })
    return rows


def summary(rows: list[dict], col: str) -> str:
    xs = [r[col] for r in rows if not math.isnan(r[col])]
    if not xs:
        return "-"
    if col == "spearman":
        return f"{sum(xs) / len(xs):.2f} (min {min(xs):.2f})"
    return f"{math.exp(sum(map(math.log, xs)) / len(xs)):.3f} (worst {max(xs):.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("here", nargs="+")
    ap.add_argument("--there", nargs="+", default=["zoo"])
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    from abductune.datasets.paths import expand_dataset_args
    from abductune.heuristics.harvest import observations_from_datasets

    here = observations_from_datasets(expand_dataset_args(a.here))
    kernels = {o.kernel for o in here}
    there = [o for o in observations_from_datasets(expand_dataset_args(a.there)) if o.kernel in kernels]
    rows = pair_rows(here, there)
    if not rows:
        sys.exit("gpu_transfer: no shape is recorded in both HERE and THERE (paired by kernel and shape name)")
    cols = ("there_best", "here_best_there", "spearman", "speedup")
    print(f"here {rows[0]['here']}, there {rows[0]['there']}: {len(rows)} shapes")
    print("| kernel | shapes | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    groups = {}
    for r in rows:
        groups.setdefault(r["kernel"], []).append(r)
    for k, rs in sorted(groups.items()) + [("all", rows)]:
        print(f"| {k} | {len(rs)} | " + " | ".join(summary(rs, c) for c in cols) + " |")
    if a.json:
        Path(a.json).write_text(json.dumps({"here": a.here, "there": a.there, "rows": rows}, indent=1))
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
