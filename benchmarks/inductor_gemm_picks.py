"""How good `abductune.inductor`'s matmul-template picks are, on recorded matmuls, leave-one-kernel-out.

    python benchmarks/inductor_gemm_picks.py [--limit 4] [--json OUT] [GLOB ...]

`inductor_gemm.pick` ranks Inductor's template configs with the shipped ranker and keeps the first
config of each of the `limit` best output tiles (`inductor_gemm.first_of_each_tile`, used here too). Inductor's template cannot be replayed, so this
applies the same rule to recorded matmul kernels of the same design: for each shape, the ranker
refitted without the shape's kernel (`Holdout(problem, "kernel")`) orders the dataset's own space
(with an L2 grouping of 8, Inductor's, where the space tunes one), the first config of each of
the `limit` best output tiles is kept, and the figure is the best recorded time among them over
the shape's optimum (and the first pick's alone). Default data: the bundled H100 matmul and the
zoo's tutorial grouped matmul (H100 and H200).
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

DEFAULT = ("src/abductune/datasets/data/h100/matmul_fp16/*.jsonl.gz",
           "src/abductune/datasets/zoo_data/*/zoo_mm_tutorial_bf16/*.jsonl.gz")
GROUP_M = 8


def picks_of(ds, limit: int) -> list[dict]:
    """The first config of each of the `limit` best output tiles, learned without the kernel."""
    from abductune.heuristics.ranker_shipped import rank
    from abductune.integrations.inductor_gemm import first_of_each_tile
    from abductune.problem import Holdout

    space, problem = ds.space(), ds.problem
    bm, bn, g = (space.by_role(r) for r in ("tile:M", "tile:N", "group"))
    return [dict(c) for c in first_of_each_tile(rank(problem, space, exclude=Holdout(problem, "kernel")).configs,
                                                limit, lambda c: (c[bm.name], c[bn.name]),
                                                lambda c: g is None or c[g.name] == GROUP_M)]


def main() -> None:
    from abductune.datasets import read_dataset

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("globs", nargs="*", default=list(DEFAULT))
    ap.add_argument("--limit", type=int, default=4)
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    for pattern in args.globs:
        for path in sorted(glob.glob(str(ROOT / pattern) if not Path(pattern).is_absolute() else pattern)):
            ds = read_dataset(path)
            space = ds.space()
            times = {space.key(m.config): m.time_ms for m in ds.ok_records()}
            best = min(times.values())
            got = [times.get(space.key(c)) for c in picks_of(ds, args.limit)]
            known = [t for t in got if t is not None]
            rows.append({"kernel": ds.problem.kernel, "shape": Path(path).name.split(".")[0],
                         "best_of_picks": min(known) / best if known else None,
                         "first_pick": got[0] / best if got and got[0] is not None else None,
                         "unrecorded": len(got) - len(known)})
    print(f"{'kernel':<24} {'shape':<28} {'best of picks':>13} {'first pick':>10}")
    for r in rows:
        f = lambda v: f"{v:.3f}" if v is not None else "-"  # noqa: E731
        print(f"{r['kernel']:<24} {r['shape']:<28} {f(r['best_of_picks']):>13} {f(r['first_pick']):>10}")
    summary = {}
    for k in sorted({r["kernel"] for r in rows}):
        mine = [r for r in rows if r["kernel"] == k and r["best_of_picks"] is not None]
        gm = lambda key: math.exp(sum(math.log(r[key]) for r in mine) / len(mine))  # noqa: E731
        summary[k] = {"shapes": len(mine), "best_of_picks": gm("best_of_picks"),
                      "worst": max(r["best_of_picks"] for r in mine),
                      "first_pick": gm("first_pick") if all(r["first_pick"] for r in mine) else None}
        print(f"{k}: {len(mine)} shapes, best of {args.limit} picks {summary[k]['best_of_picks']:.3f} "
              f"(worst {summary[k]['worst']:.3f}), first pick {summary[k]['first_pick'] or float('nan'):.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"limit": args.limit, "rows": rows, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
