"""Zero-shot configs (no measurement), leave-one-shape-out, on the bundled H100 datasets.

    python benchmarks/bench_zeroshot.py [--json benchmarks/results/zeroshot.json]

For each recorded shape, each source names one config without measuring anything, using only
knowledge from the other shapes; its recorded time over the shape's optimum is the score:
- theory: the theory store's prediction (rules learned without this shape);
- nearest shape: the best config of the nearest other shape of the same kernel (log2 distance
  of the dims), reused exactly: what caching schedules rather than rules does;
- observed: the observed database with this shape's rules left out (none left: "-");
- heuristics: the first registry heuristic that fires;
- fixed[0]: the first config of the kernel's own list; default: the space's default.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def nearest(problem, others):
    """The one of `others` (anything with a `.problem`) nearest `problem` in log2 of its dims."""
    def dist(x):
        return sum(abs(math.log2(max(1, x.problem.dims[k])) - math.log2(max(1, v))) for k, v in problem.dims.items())
    return min(others, key=dist) if others else None


def first_seed(report, source: str):
    """The config of the first seed `source` ("observed", "registry") put in a SeedReport."""
    return next((f.get("config") for f in report.fired if f.get("source") == source and f.get("status") == "seed"),
                None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from abductune.datasets.bundled import bundled_datasets
    from abductune.datasets.format import read_dataset
    from abductune.heuristics import seed_configs
    from abductune.heuristics.harvest import observation_from_dataset
    from abductune.theory.store import packaged_book, predict

    book = packaged_book()
    data = [read_dataset(p) for p in bundled_datasets()]
    obs = [observation_from_dataset(d) for d in data]
    rows = []
    for ds, o in zip(data, obs):
        space, pb = o.space, o.problem

        def ratio(cfg):
            if cfg is None:
                return None
            t = o.time_of(cfg)
            return (t / o.optimum) if t is not None and math.isfinite(t) else None
        p = predict(pb, space, book=book, exclude=pb)
        near = nearest(pb, [x for x in obs if x.problem.kernel == pb.kernel and x is not o])
        near_cfg = near.ranked(1)[0] if near else None
        rep = seed_configs(pb, space, pb.hardware, exclude=pb)
        observed, heur = first_seed(rep, "observed"), first_seed(rep, "registry")
        fixed = (ds.meta.get("fixed_configs") or [None])[0]
        default = ds.meta.get("default_config") or space.default()
        rows.append({"kernel": pb.kernel, "shape": ds.name,
                     "theory": ratio(p.config if p else None), "theory_rule": p.describe() if p else None,
                     "nearest_shape": ratio(near_cfg), "nearest": near.name if near else None,
                     "observed": ratio(observed), "heuristics": ratio(heur), "fixed_first": ratio(fixed),
                     "default": ratio(default)})
    cols = ["theory", "nearest_shape", "observed", "heuristics", "fixed_first", "default"]
    by_kernel: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_kernel[r["kernel"]].append(r)
    by_kernel["all"] = rows
    summary = {}
    print("| kernel | shapes | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for k, rs in by_kernel.items():
        cells = []
        summary[k] = {}
        for c in cols:
            xs = [r[c] for r in rs if r[c] is not None]
            if not xs:
                cells.append("-")
                continue
            g = math.exp(sum(map(math.log, xs)) / len(xs))
            summary[k][c] = {"geomean": g, "worst": max(xs), "covered": len(xs)}
            cells.append(f"{g:.3f} (worst {max(xs):.2f}" + (f", {len(xs)}/{len(rs)}" if len(xs) < len(rs) else "")
                         + ")")
        print(f"| {k} | {len(rs)} | " + " | ".join(cells) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
