"""How much do seeds help? Measured on every recorded dataset available (public and bundled).

For each dataset S, the observed database is harvested *without* S (leave-one-shape-out: from
the other datasets of S's kernel class, minus every dataset of S's shape on S's hardware for
S's kernel -- or for any kernel with --scope class), and `seed_configs` gives S's seeds from
that database plus the registry heuristics. Then:

1. no search: each seed's time / S's optimum (the observed-database seed, each registry
   heuristic's seed, the first seed, the best seed) next to the default config's;
2. replay: every strategy with and without those seeds at budgets 8, 16, 32 (20 repeats);
   the gain is median best without seeds / median best with seeds (> 1: seeds helped), and
   the methodology score P of both (see abductune.evaluate);
3. leave-one-shape-out: which rule of the held-out database answered S (exact / bucket /
   fallback, at which hardware level) and its seed's time / optimum.

    python benchmarks/bench_seeds.py                      # public + bundled, everything
    python benchmarks/bench_seeds.py --datasets bundled --strategies coordesc,random --jobs 2
    python benchmarks/bench_seeds.py --no-replay          # seeds and leave-one-out only

Writes JSON to --out (default: benchmarks/out/seeds.json, an untracked folder) and prints the
tables (Markdown, ready for docs/PERFORMANCE.md).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from abductune.datasets.public import load_any  # noqa: E402
from abductune.datasets.paths import expand_dataset_args  # noqa: E402
from abductune.heuristics.coverage import check_seed, same_shape  # noqa: E402
from abductune.heuristics.harvest import Observation, harvest, observation_from_dataset  # noqa: E402
from abductune.heuristics import seed_configs  # noqa: E402


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and math.isfinite(x)]
    return math.exp(statistics.fmean(math.log(x) for x in xs)) if xs else None


def _ratio(o: Observation, cfg: dict | None) -> float | None:
    if cfg is None:
        return None
    t = o.time_of(cfg)
    if t is None:
        return None
    return (t if math.isfinite(t) else o.worst) / o.optimum


def dataset_paths(items: list[str]) -> list[Path]:
    out: list[Path] = []
    for it in items:
        try:
            out += expand_dataset_args([it])
        except Exception as e:  # noqa: BLE001 - a keyword with no data is not an error here
            print(f"skipping {it}: {e}", file=sys.stderr)
    seen: set[str] = set()
    return [p for p in out if not (str(p) in seen or seen.add(str(p)))]


def seeds_for(obs: list[Observation], i: int, scope: str, harvest_kw: dict[str, Any]) -> dict[str, Any]:
    s = obs[i]
    cls = s.classification(harvest_kw.get("granularity", 2)).kernel_class
    train = [o for o in obs if o is not s and not same_shape(s, o, scope)
             and o.classification(harvest_kw.get("granularity", 2)).kernel_class == cls]
    db = harvest(train, **harvest_kw).database
    chk = check_seed(db, s, harvest_kw.get("granularity", 2))
    rep = seed_configs(s.problem, s.space, s.hardware, database=db, base=s.default)
    per_source = {}
    for f in rep.fired:
        if f["status"] == "seed":
            per_source[f["name"]] = _ratio(s, f["config"])
    ratios = [_ratio(s, c) for c in rep.configs]
    dr = s.default_time()
    return {"dataset": s.name, "path": s.source, "kernel": s.kernel,
            "hardware": s.hardware.name if s.hardware else "", "kernel_class": cls,
            "dims": dict(s.problem.dims), "configs": len(s.times), "train_datasets": len(train),
            "seeds": rep.configs, "fired": rep.fired, "n_seeds": len(rep.configs),
            "loo_level": chk.level, "loo_seed_over_opt": chk.seed_ratio,
            "first_seed_over_opt": ratios[0] if ratios else None,
            "best_seed_over_opt": min((r for r in ratios if r), default=None),
            "per_source_over_opt": per_source,
            "default_over_opt": dr / s.optimum if dr else None}


def replay_one(path: str, seeds: list[dict], strategies: list[str], budgets: list[int],
               repeats: int, seed: int) -> dict[str, Any]:
    from abductune.evaluate import compare_on_dataset

    ds = load_any(path)
    t0 = time.time()
    without = compare_on_dataset(ds, strategies, budgets, repeats, seed)
    with_ = compare_on_dataset(ds, strategies, budgets, repeats, seed, seeds_fn=lambda _d: seeds) \
        if seeds else without
    out = []
    for a, b in zip(without, with_):
        assert (a.strategy, a.budget) == (b.strategy, b.budget)
        out.append({"strategy": a.strategy, "budget": a.budget,
                    "without_ratio": a.median_ratio, "with_ratio": b.median_ratio,
                    "gain": a.median_ms / b.median_ms, "without_P": a.score, "with_P": b.score,
                    "without_within_1.05": a.within(1.05), "with_within_1.05": b.within(1.05)})
    return {"path": path, "cells": out, "seconds": time.time() - t0}


def fmt(x: float | None, nd: int = 3) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    from abductune.search.registry import STRATEGIES

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="public,bundled",
                    help="comma-separated: 'public', 'bundled', files or folders")
    ap.add_argument("--strategies", default="all", help="comma-separated names, or 'all' (registered)")
    ap.add_argument("--budgets", default="8,16,32")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scope", choices=("kernel", "class"), default="kernel",
                    help="leave-one-out holds out S's shape for its kernel, or for every kernel")
    ap.add_argument("--margin", type=float, default=0.05)
    ap.add_argument("--granularity", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 0))
    ap.add_argument("--no-replay", action="store_true")
    # results go where --out says, else to the untracked benchmarks/out/ (never over a tracked file)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "out" / "seeds.json"))
    args = ap.parse_args()

    strategies = sorted(STRATEGIES) if args.strategies == "all" else \
        [s.strip() for s in args.strategies.split(",") if s.strip()]
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        sys.exit(f"unknown strategies {unknown}; registered: {sorted(STRATEGIES)}")
    budgets = sorted({int(b) for b in args.budgets.split(",")})
    paths = dataset_paths([x.strip() for x in args.datasets.split(",") if x.strip()])
    if not paths:
        sys.exit("no datasets found")
    t0 = time.time()
    obs = []
    prints: dict[int, str] = {}
    for p in paths:
        ds = load_any(p)
        if not ds.ok_records():
            continue
        o = observation_from_dataset(ds)
        o.source = str(p)
        o.name = f"{p.parent.name}/{o.name}"
        # the same measurements under two names (e.g. a Kernel Tuner cache and its T4 export)
        # would leak the held-out dataset into its own leave-one-out database: keep the first
        fp = hash(tuple(sorted((repr(k), round(t, 9)) for k, t in o.times.items())))
        if fp in prints:
            print(f"skipping {p}: the same measurements as {prints[fp]}", file=sys.stderr)
            continue
        prints[fp] = str(p)
        obs.append(o)
    print(f"{len(obs)} dataset(s) loaded in {time.time() - t0:.1f} s", file=sys.stderr)
    hkw = {"margin": args.margin, "granularity": args.granularity}
    t0 = time.time()
    seeds = [seeds_for(obs, i, args.scope, hkw) for i in range(len(obs))]
    print(f"seeds (leave-one-out, scope {args.scope}) in {time.time() - t0:.1f} s", file=sys.stderr)

    replays: list[dict[str, Any]] = []
    if not args.no_replay:
        t0 = time.time()
        jobs = [(s["path"], s["seeds"], strategies, budgets, args.repeats, args.seed) for s in seeds]
        if args.jobs > 1:
            with ProcessPoolExecutor(args.jobs) as ex:
                futs = [ex.submit(replay_one, *j) for j in jobs]
                for f in futs:
                    replays.append(f.result())
                    print(f"  replayed {Path(replays[-1]['path']).name} "
                          f"({replays[-1]['seconds']:.0f} s)", file=sys.stderr)
        else:
            for j in jobs:
                replays.append(replay_one(*j))
                print(f"  replayed {Path(j[0]).name} ({replays[-1]['seconds']:.0f} s)", file=sys.stderr)
        print(f"replay in {time.time() - t0:.1f} s", file=sys.stderr)

    # ------------------------------------------------------------------ tables
    out_md = []
    heur = sorted({k for s in seeds for k in s["per_source_over_opt"]})
    rows = []
    for s in seeds:
        rows.append([s["dataset"], s["kernel"], s["hardware"], str(s["n_seeds"]),
                     s["loo_level"], fmt(s["loo_seed_over_opt"])]
                    + [fmt(s["per_source_over_opt"].get(h)) for h in heur if h != "observed"]
                    + [fmt(s["best_seed_over_opt"]), fmt(s["default_over_opt"])])
    heads = (["dataset", "kernel", "hardware", "seeds", "observed rule (LOO)", "observed/opt"]
             + [f"{h}/opt" for h in heur if h != "observed"] + ["best seed/opt", "default/opt"])
    out_md.append("### Seeds without search (database harvested without the dataset)\n\n"
                  + md_table(heads, rows))
    gm = {"observed/opt": _geomean([s["loo_seed_over_opt"] for s in seeds]),
          "best seed/opt": _geomean([s["best_seed_over_opt"] for s in seeds]),
          "default/opt": _geomean([s["default_over_opt"] for s in seeds])}
    out_md.append("geomeans over the datasets that have each: " +
                  ", ".join(f"{k} {fmt(v)}" for k, v in gm.items()))

    agg: list[dict[str, Any]] = []
    if replays:
        per: dict[tuple[str, int], list[dict]] = {}
        for r in replays:
            for c in r["cells"]:
                per.setdefault((c["strategy"], c["budget"]), []).append(c)
        rows = []
        for (st, b), cs in sorted(per.items()):
            a = {"strategy": st, "budget": b, "datasets": len(cs),
                 "geomean_gain": _geomean([c["gain"] for c in cs]),
                 "geomean_without_ratio": _geomean([c["without_ratio"] for c in cs]),
                 "geomean_with_ratio": _geomean([c["with_ratio"] for c in cs]),
                 "mean_without_P": statistics.fmean(c["without_P"] for c in cs),
                 "mean_with_P": statistics.fmean(c["with_P"] for c in cs),
                 "improved": sum(c["gain"] > 1.005 for c in cs), "worse": sum(c["gain"] < 0.995 for c in cs)}
            agg.append(a)
            rows.append([st, str(b), str(len(cs)), fmt(a["geomean_without_ratio"]), fmt(a["geomean_with_ratio"]),
                         fmt(a["geomean_gain"]), fmt(a["mean_without_P"], 2), fmt(a["mean_with_P"], 2),
                         f"{a['improved']}/{a['worse']}"])
        out_md.append(f"### Replay with vs without seeds ({args.repeats} repeats; ratio = median best / "
                      "optimum, geomean over datasets; gain = without / with)\n\n"
                      + md_table(["strategy", "budget", "datasets", "without", "with", "gain", "P without",
                                  "P with", "better/worse"], rows))
        rows = []
        for r, s in zip(replays, seeds):
            for c in r["cells"]:
                rows.append([s["dataset"], s["kernel"], s["hardware"], c["strategy"], str(c["budget"]),
                             fmt(c["without_ratio"]), fmt(c["with_ratio"]), fmt(c["gain"])])
        out_md.append("### Replay per dataset\n\n" + md_table(
            ["dataset", "kernel", "hardware", "strategy", "budget", "without", "with", "gain"], rows))

    text = "\n\n".join(out_md)
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({
        "datasets": [o.source for o in obs], "strategies": strategies, "budgets": budgets,
        "repeats": args.repeats, "seed": args.seed, "scope": args.scope, "margin": args.margin,
        "granularity": args.granularity, "seeds": seeds, "replay": replays, "aggregate": agg,
        "markdown": text}, indent=1, default=repr), encoding="utf-8")
    print(f"\nwrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
