"""A zero-shot ranker learned across kernels, judged leave-one-kernel-out beside the other zero-shot sources.

    python benchmarks/bench_ranker.py [DATASETS ...] [--train zoo bundled public] [--holdout kernel]
                                      [--json benchmarks/results/session14/ranker_loko.json]

DATASETS (scored; default 'zoo'): files, folders, 'bundled', 'zoo' or 'zoo:<class or kernel>'.
--train: what the ranker learns from (default: the zoo, the bundled data and the public data);
for each scored shape it is refitted without the scored kernel (`--holdout kernel`: every shape
of it, and of any kernel with the same source; `shape`: that shape only, the in-sample figure).
Public datasets whose space the features cannot describe are read and left out (listed).

Columns, each the recorded time of what a source names over the shape's optimum:
- ranker / knn: the top-1 of `heuristics.ranker.Ranker` (linear, the headline; knn, the
  other model fixed beforehand) among the shape's configs the resource model accepts;
  *_top8: the best of its first eight (as seeds);
- theory: the theory store's prediction with the same holdout (`predict --holdout ... --no-ranker`;
  `predict` itself serves the ranker for the classes where this table shows it winning);
- nvidia / nvidia_top8: NVIDIA's analytic GEMM model (matmuls it describes, learns nothing);
- fixed_first: the kernel's own first config;
- random / random_top8: a config drawn uniformly from the feasible ones (the expectation, by
  geomean over all of them) and the best of 8 drawn without replacement (mean over 400 draws,
  seed 0).
Scoring as in bench_zeroshot.py: geomean (worst); "infeasible" counts configs recorded as
failed (for *_top8: shapes where all eight failed; the top-1 count is the one that must be 0).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_zeroshot import cell, nvidia_configs  # noqa: E402 - scored and tabled the same way

COLS = ("ranker", "ranker_top8", "knn", "knn_top8", "theory", "nvidia", "nvidia_top8", "fixed_first",
        "random", "random_top8")


def _paths(names):
    from abductune.datasets.paths import expand_dataset_args

    return [str(p) for p in expand_dataset_args(names)]


def _fmt(x):
    return "-" if x is None else f"{x:.3f}"


def _geo(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def score_row(o, ds, rankers, theory, nv8, rng):
    """One shape's ratios and states per column (None: the source names nothing)."""
    from abductune.theory.resources import trouble

    def ratio(cfg):
        t = o.time_of(cfg) if cfg is not None else None
        return t / o.optimum if t is not None and math.isfinite(t) else None

    def state(cfg):
        if cfg is None:
            return None
        t = o.time_of(cfg)
        return "unrecorded" if t is None else ("ok" if math.isfinite(t) else "infeasible")

    def top8(cfgs):
        rs = [r for r in map(ratio, cfgs) if r is not None]
        st = None if not cfgs else "ok" if rs else (
            "infeasible" if any(state(c) == "infeasible" for c in cfgs) else "unrecorded")
        return min(rs, default=None), st

    row, states = {}, {}
    for name, ranked in rankers.items():
        row[name], states[name] = ratio(ranked[0] if ranked else None), state(ranked[0] if ranked else None)
        row[name + "_top8"], states[name + "_top8"] = top8(ranked[:8])
        row[name + "_config"] = ranked[0] if ranked else None
        row[name + "_top8_failed"] = sum(state(c) == "infeasible" for c in ranked[:8])
    row["theory"], states["theory"] = ratio(theory), state(theory)
    row["nvidia"], states["nvidia"] = ratio(nv8[0] if nv8 else None), state(nv8[0] if nv8 else None)
    row["nvidia_top8"], states["nvidia_top8"] = top8(nv8)
    fixed = (ds.meta.get("fixed_configs") or [None])[0]
    row["fixed_first"], states["fixed_first"] = ratio(fixed), state(fixed)
    feas = [r for c in o.space.valid_configs() if trouble(o.problem, o.space, c) is None
            for r in [ratio(c)] if r is not None]
    fails = sum(1 for c in o.space.valid_configs() if state(c) == "infeasible")
    pool = feas + [math.inf] * fails  # a random draw may hit a failing config
    row["random"] = _geo(feas) if feas else None
    states["random"] = "ok" if feas else None
    if len(pool) >= 8:
        draws = [min(rng.choice(pool, 8, replace=False)) for _ in range(400)]
        row["random_top8"] = float(np.mean([d for d in draws if math.isfinite(d)]))
        states["random_top8"] = "ok"
    row["state"] = states
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("datasets", nargs="*", default=["zoo"])
    ap.add_argument("--train", nargs="*", default=["zoo", "bundled", "public"])
    ap.add_argument("--holdout", choices=["kernel", "shape"], default="kernel")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from abductune.datasets.format import read_dataset
    from abductune.errors import AbductuneError
    from abductune.heuristics.harvest import observation_from_dataset, observations_from_datasets
    from abductune.heuristics.ranker import Ranker
    from abductune.problem import Holdout
    from abductune.theory.store import packaged_book, predict

    t0 = time.time()
    scored_paths = _paths(args.datasets)
    data = [read_dataset(p) for p in scored_paths]
    scored = [observation_from_dataset(d) for d in data]
    train_paths = _paths(args.train)
    known = {str(Path(p).resolve()): o for p, o in zip(scored_paths, scored)}
    rest = [p for p in train_paths if str(Path(p).resolve()) not in known]
    train = [known[str(Path(p).resolve())] for p in train_paths if str(Path(p).resolve()) in known]
    train += observations_from_datasets(rest)
    print(f"read {len(scored)} scored and {len(train)} training datasets in {time.time() - t0:.0f}s", flush=True)

    book, cache, fits, rows = packaged_book(), {}, {}, []
    rng = np.random.default_rng(0)
    for ds, o in zip(data, scored):
        hold = Holdout(o.problem, args.holdout)
        left_out = frozenset(i for i, x in enumerate(train)
                             if hold.covers(x.kernel, x.problem.dims, x.problem.key(), x.problem.source_hash))
        rankers = {}
        for kind in ("linear", "knn"):
            if (left_out, kind) not in fits:
                fits[(left_out, kind)] = Ranker.fit([x for i, x in enumerate(train) if i not in left_out],
                                                    kind=kind, cache=cache)
            try:
                ranked = fits[(left_out, kind)].rank(o.problem, o.space)
            except AbductuneError as e:  # a space the features cannot read (DyT: no tile covers a dim)
                print(f"{o.kernel} {o.name}: {e}", flush=True)
                ranked = []
            rankers["ranker" if kind == "linear" else kind] = ranked
        p = predict(o.problem, o.space, book=book, exclude=hold, ranker=False)  # the theory's own answer
        row = score_row(o, ds, rankers, p.config if p else None, nvidia_configs(o.problem, o.space, 8), rng)
        lin = fits[(left_out, "linear")]
        row.update(kernel=o.kernel, kernel_class=o.problem.kernel_class, shape=o.name,
                   ranker_model=lin.model_for(o.problem, o.space)[0],
                   ranker_trained_on=lin.trained_on.get(lin.model_for(o.problem, o.space)[0]))
        rows.append(row)
        print(f"{o.kernel} {o.name}: " + " ".join(f"{c} {_fmt(row[c])}" for c in ("ranker", "knn", "theory"))
              + f" ({time.time() - t0:.0f}s)", flush=True)

    summary = table(rows)
    any_fit = next(iter(fits.values()))
    out = {"command": "python benchmarks/bench_ranker.py " + " ".join(sys.argv[1:]), "holdout": args.holdout,
           "scored": args.datasets, "train": args.train, "skipped_training": any_fit.skipped,
           "summary": summary, "rows": rows,
           "model_all_data": Ranker.fit(train, cache=cache).to_dict()}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
        print(f"wrote {args.json}")


def table(rows):
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[f"class {r['kernel_class']}"].append(r)
    for r in rows:
        groups[r["kernel"]].append(r)
    groups["all"] = rows
    print("| rows | shapes | " + " | ".join(COLS) + " |")
    print("|---|---|" + "---|" * len(COLS))
    summary = {}
    for g, rs in groups.items():
        cells, summary[g] = [], {}
        for c in COLS:
            text, stats = cell(rs, c, worst="")
            cells.append(text)
            if stats is not None:
                summary[g][c] = stats
        print(f"| {g} | {len(rs)} | " + " | ".join(cells) + " |")
    return summary


if __name__ == "__main__":
    main()
