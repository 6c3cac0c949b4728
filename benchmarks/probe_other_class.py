"""What the pooled ranker would serve on a class where `predict` serves the kernels' own defaults.

    python benchmarks/probe_other_class.py [--class other] [--json OUT] [DATASETS ...]

For each recorded shape of the class, leave-one-kernel-out: what `zero_shot` serves first (for
"other", the kernel's default, as the nested evidence in `theory.store.choice` chose) beside the
pooled ranker's first config (`predict._ranked(..., pooled=True)`, refitted without the kernel),
each as recorded time over the shape's optimum (a failed config: infeasible, left out of the
geomean and counted). The question it answers: would serving the ranker on the class beat the
defaults, kernel by kernel? DATASETS default to the zoo and the held-out kernels of sessions 36
and 37 (`abductune.datasets.paths.expand_dataset_args`).
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def geomean(xs: list[float]) -> tuple[float | None, int, int]:
    ok = [x for x in xs if x is not None and math.isfinite(x)]
    bad = sum(1 for x in xs if x is not None and not math.isfinite(x))
    return (math.exp(sum(map(math.log, ok)) / len(ok)) if ok else None), len(ok), bad


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("datasets", nargs="*", default=["zoo", str(ROOT / "benchmarks/results/session36/datasets"),
                                                    str(ROOT / "benchmarks/results/session37/datasets")])
    ap.add_argument("--class", dest="cls", default="other")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from abductune.classify import classify
    from abductune.datasets.format import read_dataset
    from abductune.datasets.paths import expand_dataset_args
    from abductune.heuristics.harvest import observation_from_dataset
    from abductune.problem import Holdout
    from abductune.theory.store import packaged_book
    from abductune.theory.store.predict import _ranked, zero_shot

    book = packaged_book()
    per: dict[str, list[dict]] = collections.defaultdict(list)
    for path in expand_dataset_args(args.datasets):
        ds = read_dataset(path)
        o = observation_from_dataset(ds)
        pb, sp = o.problem, o.space
        if classify(pb, sp).kernel_class != args.cls:
            continue
        held = Holdout(pb, "kernel")
        fixed = (ds.meta.get("fixed_configs") or [None])[0]
        served = zero_shot(pb, sp, book=book, exclude=held, default=ds.meta.get("default_config") or fixed,
                           listed=ds.meta.get("fixed_configs") or ())
        ranked = _ranked(pb, sp, held, args.cls, pooled=True)

        def ratio(cfg):
            if cfg is None:
                return None
            t = o.time_of(cfg)
            return None if t is None else (t / o.optimum if math.isfinite(t) else math.inf)

        per[pb.kernel].append({"shape": Path(str(path)).name, "served": ratio(served[0].config if served else None),
                               "served_source": served[0].source if served else None,
                               "ranker": ratio(ranked[0].config if ranked else None),
                               "ranker_config": dict(ranked[0].config) if ranked else None})
    print(f"| kernel ({args.cls}) | shapes | served (source) | pooled ranker |\n|---|---|---|---|")
    every = {"served": [], "ranker": []}
    for k, rows in sorted(per.items()):
        cells = []
        for c in ("served", "ranker"):
            xs = [r[c] for r in rows]
            every[c] += xs
            g, n, bad = geomean(xs)
            cells.append("-" if g is None else f"{g:.3f}" + (f" ({n}/{len(rows)})" if n < len(rows) else "")
                         + (f", {bad} infeasible" if bad else ""))
        print(f"| {k} | {len(rows)} | {cells[0]} ({rows[0]['served_source']}) | {cells[1]} |")
    summary = {c: geomean(xs) for c, xs in every.items()}
    print("| all | " + str(sum(map(len, per.values()))) + " | " +
          " | ".join(f"{summary[c][0]:.3f} ({summary[c][1]} shapes, {summary[c][2]} infeasible)"
                     if summary[c][0] else "-" for c in ("served", "ranker")) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps({"class": args.cls, "kernels": per, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
