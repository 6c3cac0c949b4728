"""The kernel's own list's medoid as a zero-shot answer, beside the kernel's default (issue 27, CPU).

    python benchmarks/bench_zeroshot.py zoo bundled benchmarks/results/session34/datasets \
        benchmarks/results/session36/datasets benchmarks/results/session37/datasets --json /tmp/zs.json
    PYTHONPATH=src python benchmarks/probe_list_medoid.py /tmp/zs.json

The medoid is the config of the kernel's list (`meta.fixed_configs`) nearest all the others: the
sum over its parameters of the distance in steps along an ordered parameter's values, divided by
that parameter's number of steps (1 for any other change). It learns nothing from any dataset,
so no holdout applies; `predict`'s default answers and which shapes it serves the default on come
from the leave-one-kernel-out zero-shot JSON given. Prints, per class, the geomean of recorded
time over each shape's optimum (worst, shapes) for the medoid, the default and `predict`, then
the same on the shapes where `predict` served the default, then per kernel there.
"""
from __future__ import annotations

import collections
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from abductune.datasets.public import load_any  # noqa: E402

DATASETS = ("src/abductune/datasets/zoo_data/*/*/*.jsonl.gz", "src/abductune/datasets/data/h100/*/*.jsonl.gz",
            "benchmarks/results/session3[467]/datasets/*/*.jsonl.gz")


def distance(space, a, b) -> float:
    total = 0.0
    for p in space.params:
        va, vb = a.get(p.name), b.get(p.name)
        if va == vb:
            continue
        vals = list(p.values)
        if p.ordered and va in vals and vb in vals:
            total += abs(vals.index(va) - vals.index(vb)) / max(1, len(vals) - 1)
        else:
            total += 1.0
    return total


def geo(xs):
    xs = [x for x in xs if x]
    return f"{math.exp(sum(map(math.log, xs)) / len(xs)):.3f} (worst {max(xs):.2f}, {len(xs)})" if xs else "-"


def main() -> int:
    zs = {(r["kernel"], r["shape"]): r for r in json.loads(Path(sys.argv[1]).read_text())["rows"]}
    root = Path(__file__).resolve().parents[1]
    by_class = collections.defaultdict(list)
    for pat in DATASETS:
        for f in sorted(root.glob(pat)):
            ds = load_any(f)
            fixed = ds.meta.get("fixed_configs") or []
            if len(fixed) < 2:
                continue
            sp = ds.space()
            times = {sp.key(m.config): m.time_ms for m in ds.records if m.ok}
            full = [{**sp.default(), **c} for c in fixed]
            med = min(full, key=lambda c: (sum(distance(sp, c, o) for o in full), full.index(c)))
            t = times.get(sp.key(med))
            z = zs.get((ds.problem.kernel, ds.name)) or {}
            by_class[ds.problem.kernel_class].append(
                (ds.problem.kernel, t / ds.optimum().time_ms if t else None, z.get("default"), z.get("theory"),
                 z.get("theory_source") == "default"))
    for cls, rows in sorted(by_class.items()):
        print(f"{cls}: medoid {geo([r[1] for r in rows])}, default {geo([r[2] for r in rows])}, "
              f"predict {geo([r[3] for r in rows])}")
        fb = [r for r in rows if r[4]]
        if fb:
            print(f"  where predict served the default: medoid {geo([r[1] for r in fb])}, "
                  f"default {geo([r[2] for r in fb])}")
            for k in sorted({r[0] for r in fb}):
                ks = [r for r in fb if r[0] == k]
                print(f"    {k}: medoid {geo([r[1] for r in ks])}, default {geo([r[2] for r in ks])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
