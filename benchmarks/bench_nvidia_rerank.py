"""NVIDIA's analytic GEMM model and the ranker together, zero-shot, leave-one-kernel-out, on tiled matmuls.

    python benchmarks/bench_nvidia_rerank.py [DATASETS ...] [--train DATASETS ...]
                                             [--not-trained-on KERNEL ...] [--json out.json]

DATASETS (scored; default 'zoo' and 'bundled'): their matmul-family shapes (`ranker.family`
"gemm") that NVIDIA's model describes are scored; --train (default the same) is what the
ranker's gemm model learns from, refitted for each scored kernel without it (and without any
kernel of the same source); --not-trained-on drops kernels from training altogether (held-out
kernels while developing). Needs nvidia-matmul-heuristics (`pip install 'abductune[nvidia]'`).

Columns (the recorded time of the named config over the shape's optimum):
- ranker: the linear ranker's top-1 among the configs the resource model accepts;
- ranker_nvfeat: the same ranker with one more feature, NVIDIA's runtime estimate of the config
  (`nvidia_estimate.estimates`) as log(estimate / the shape's best estimate), clipped as the
  targets are, fitted jointly (shapes NVIDIA does not describe carry it as 0);
- nvidia / nvidia_best8: NVIDIA's top-1 and the best of its top 8 (`nvidia.nvidia_topk`);
- nvidia_top8_ranked: NVIDIA's top 8 ordered by the ranker;
- nvidia_tile: the ranker's best config with NVIDIA's top-1 output tile (@tile:M x @tile:N);
- borda: the least sum of the config's rank by the ranker and by NVIDIA's estimate.
Rows: each kernel, then all shapes (geomean) and all kernels (geomean of kernel geomeans).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

COLS = ("ranker", "ranker_nvfeat", "nvidia", "nvidia_best8", "nvidia_top8_ranked", "nvidia_tile", "borda")


def shape_rows(obs, with_nvidia: bool) -> list[dict]:
    """Per gemm-family shape: features, targets, ratios, feasibility, NVIDIA's estimates and top 8."""
    from abductune.heuristics import nvidia
    from abductune.heuristics.nvidia_estimate import estimates
    from abductune.heuristics.ranker import family, shape_data
    from abductune.theory.resources import trouble

    rows = []
    for o in obs:
        if family(o.problem, o.space) != "gemm":
            continue
        s = shape_data(o)
        if s is None:
            continue
        keys = sorted(o.times, key=repr)  # shape_data's order
        cfgs = [o.space.from_key(k) for k in keys]
        row = {"kernel": o.kernel, "shape": o.name, "src": o.problem.source_hash, "X": s.X, "y": s.y,
               "where": s.where, "feas": np.array([trouble(o.problem, o.space, c) is None for c in cfgs]),
               "ratio": np.array([o.times[k] / o.optimum if math.isfinite(o.times[k]) else math.inf for k in keys]),
               "est": None, "top": [], "tile": []}
        pm, pn = o.space.by_role("tile:M"), o.space.by_role("tile:N")
        row["tile"] = [(c.get(pm.name) if pm else None, c.get(pn.name) if pn else None) for c in cfgs]
        if with_nvidia and nvidia.why_not(o.problem) is None:
            row["est"] = np.array([t if t is not None else np.nan for t in estimates(o.problem, o.space, cfgs)])
            pos = {o.space.key(c): i for i, c in enumerate(cfgs)}
            row["top"] = [pos[o.space.key(c)] for c in nvidia.nvidia_topk(o.problem, o.space, 8)
                          if o.space.key(c) in pos]
        rows.append(row)
    return rows


def nv_feature(r: dict) -> np.ndarray:
    from abductune.heuristics.ranker import CLIP

    if r["est"] is None:
        return np.zeros(len(r["y"]))
    e = r["est"]
    f = np.log(e / np.nanmin(e[r["feas"]]))
    return np.minimum(np.where(np.isnan(f), CLIP, f), CLIP)


def fit(train: list[dict], extra: bool):
    from abductune.heuristics.ranker import Shape, ShapeStats, _fit_linear, _weights

    stats = [ShapeStats.of(Shape(r["shape"], r["kernel"], "gemm", np.column_stack([r["X"], nv_feature(r)])
                                 if extra else r["X"], r["y"], r["where"])) for r in train]
    return _fit_linear(stats, _weights([r["kernel"] for r in train]))


def score(r: dict, plain, joint) -> dict[str, float]:
    idx = np.where(r["feas"])[0]
    ratio = r["ratio"]

    def best(ix, s):
        ix = list(ix)
        return ratio[ix[int(np.argmin(np.round(s[ix], 9)))]] if ix else None

    s0 = plain.scores(r["X"], r["where"])
    s1 = joint.scores(np.column_stack([r["X"], nv_feature(r)]), r["where"])
    top = [j for j in r["top"] if r["feas"][j]]
    est = np.where(np.isnan(r["est"]), np.inf, r["est"])
    order_rk = np.argsort(np.argsort(np.round(s0[idx], 9), kind="stable"), kind="stable")
    order_nv = np.argsort(np.argsort(est[idx], kind="stable"), kind="stable")
    tile = r["tile"][top[0]] if top else None
    return {"ranker": best(idx, s0), "ranker_nvfeat": best(idx, s1),
            "nvidia": ratio[top[0]] if top else None, "nvidia_best8": min(ratio[top]) if top else None,
            "nvidia_top8_ranked": best(top, s0),
            "nvidia_tile": best([j for j in idx if r["tile"][j] == tile], s0),
            "borda": ratio[idx[int(np.argmin(order_rk + order_nv))]]}


def geo(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("datasets", nargs="*", default=["zoo", "bundled"])
    ap.add_argument("--train", nargs="*", default=None, help="default: the scored datasets")
    ap.add_argument("--not-trained-on", nargs="*", default=[], help="kernels left out of every fit")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from abductune.datasets.paths import expand_dataset_args
    from abductune.heuristics import nvidia
    from abductune.heuristics.harvest import observations_from_datasets

    if not nvidia.available():
        sys.exit(f"error: {nvidia.MISSING}")
    rows = shape_rows(observations_from_datasets(expand_dataset_args(args.datasets)), True)
    scored = [r for r in rows if r["est"] is not None]
    train = rows if args.train is None else \
        shape_rows(observations_from_datasets(expand_dataset_args(args.train)), True)
    gone = set(args.not_trained_on)
    gone_src = {r["src"] for r in train if r["kernel"] in gone}
    train = [r for r in train if r["kernel"] not in gone and r["src"] not in gone_src]
    fits, out = {}, []
    for r in scored:
        if r["kernel"] not in fits:
            rest = [t for t in train if t["kernel"] != r["kernel"] and t["src"] != r["src"]]
            fits[r["kernel"]] = (fit(rest, False), fit(rest, True))
        out.append({"kernel": r["kernel"], "shape": r["shape"], **score(r, *fits[r["kernel"]])})
    groups: dict[str, list[dict]] = defaultdict(list)
    for x in out:
        groups[x["kernel"]].append(x)
    print("| rows | shapes | " + " | ".join(COLS) + " |")
    print("|---|---|" + "---|" * len(COLS))
    summary = {}
    kernels = list(groups)
    groups["all shapes"] = out
    for g, xs in groups.items():
        cells, summary[g] = [], {}
        for c in COLS:
            v = [x[c] for x in xs if x[c] is not None]
            ok = [x for x in v if math.isfinite(x)]
            summary[g][c] = {"geomean": geo(ok), "worst": max(ok), "infeasible": len(v) - len(ok)} if ok else None
            bad = f", {len(v) - len(ok)} infeasible" if len(v) > len(ok) else ""
            cells.append(f"{geo(ok):.3f} ({max(ok):.2f}){bad}" if ok else "-")
        print(f"| {g} | {len(xs)} | " + " | ".join(cells) + " |")
    per_kernel = {c: geo([summary[k][c]["geomean"] for k in kernels if summary[k][c]]) for c in COLS}
    summary["all kernels"] = per_kernel
    print(f"| all kernels (each once) | {len(kernels)} | " + " | ".join(f"{per_kernel[c]:.3f}" for c in COLS) + " |")
    if args.json:
        command = "python benchmarks/bench_nvidia_rerank.py " + " ".join(sys.argv[1:])
        Path(args.json).write_text(json.dumps({"command": command, "summary": summary, "rows": out},
                                              indent=1, default=float))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
