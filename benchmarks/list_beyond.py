"""What a search beyond a library kernel's own config list finds (issue 24, item 5: "a config
list is a hint, not a cage"), by replay of the zoo's library kernels, leave-one-kernel-out.

The zoo's library kernels were recorded over their `triton.autotune` list grown the way
`budget=` grows it (`meta.fixed_configs` is the list), so a replay plays what
`patch_triton(budget=len(list) + EXTRA)` does on a shape: the decorator's first bets (the
theory store's predictions, the observed database's config: learned without the kernel), then
the whole list, then the strategy in what room is left, abduction with the ranker's order as
its exploring prior (learned without the kernel). `triton.autotune` measures the list and
keeps its best. Every strategy gets the same seeds.

    python benchmarks/list_beyond.py OUT.json [--extra 8,16,32] [--strategy abduction,random,tpe,pattern@max_step=1]
        [--repeats 20] [--procs 2] [--kernels PREFIX,...]

Per kernel and budget: the geomean over its shapes of the median (over repeats) of winner /
list's best (below 1: the search found a faster config than Triton's pick), and the count of
kernels where that is below 0.99 (faster beyond noise-sized margins). A kernel whose list is
its whole recorded space has nothing beyond it and is left out (said so).
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import sys
from multiprocessing import Pool
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

LIBRARIES = ("flaggems_", "fla_", "liger_")  # the zoo's kernels recorded from third-party libraries
FASTER = 0.99  # "faster than Triton's pick": at least 1% below the list's best


def _list_best(ds, fixed: list[dict]) -> float | None:
    space = ds.space()
    times = {space.key(r.config): r.time_ms for r in ds.ok_records()}
    got = [times.get(space.key(c)) for c in fixed if space.is_valid(c)]
    got = [t for t in got if t]
    return min(got) if got else None


def _seeds(ds, fixed: list[dict]) -> list:
    """The decorator's order: theory and observed bets (learned without this kernel), then the
    list (`autotune.autotuner._tune`)."""
    from abductune.cli.replay import _replay_seeds
    from abductune.search.base import Seed

    space = ds.space()
    listed = [dict(c) for c in fixed if space.is_valid(c)]
    keys = {space.key(c) for c in listed}
    bets, seen = [], set()
    for s in _replay_seeds(ds, holdout="kernel"):
        k = space.key(s.config)
        if s.source.startswith(("theory", "observed")) and k not in keys and k not in seen:
            bets.append(Seed(dict(s.config), s.source))
            seen.add(k)
    return bets + [Seed(c, "configs") for c in listed]


def _one(job: tuple) -> dict:
    from abductune.datasets.public import load_any

    path, extras, strategies, repeats = job
    return run_dataset(load_any(Path(path)), path, extras, strategies, repeats)


def run_dataset(ds, path: str, extras: list[int], strategies: list[str], repeats: int) -> dict:
    """One shape: each strategy's winner / the list's best at each budget (the list and the
    bets, plus each of `extras`)."""
    from abductune.cli.replay import _replay_prior
    from abductune.evaluate import compare_on_dataset

    fixed = ds.meta.get("fixed_configs") or []
    space = ds.space()
    n_list = len({space.key(c) for c in fixed if space.is_valid(c)})
    n_space = len({space.key(r.config) for r in ds.records})
    best = _list_best(ds, fixed)
    out = {"dataset": path, "kernel": Path(path).parent.name, "shape": Path(path).name.split(".")[0],
           "list": n_list, "space": n_space, "list_best_ms": best, "optimum_ms": ds.optimum().time_ms, "cells": []}
    if best is None or n_space <= n_list:
        return out
    seeds = _seeds(ds, fixed)
    budgets = sorted({len(seeds) + e for e in extras})
    prior_fn = functools.partial(_replay_prior, holdout="kernel")
    label = f"{out['kernel']}/{out['shape']}"
    for entry in strategies:
        name, opts = strategy_entry(entry)
        for c in compare_on_dataset(ds, [name], budgets, repeats, 0, seeds_fn=lambda _d: seeds,
                                    prior_fn=prior_fn, label=label, options={name: opts}):
            d = c.to_dict()
            extra = d["budget"] - len(seeds)
            out["cells"].append({"strategy": entry, "extra": extra, "budget": d["budget"],
                                 "vs_list": statistics.median(d["bests_ms"]) / best,
                                 "vs_optimum": d["median_ratio"]})
    return out


def strategy_entry(entry: str) -> tuple[str, dict]:
    """'pattern@max_step=1' -> ("pattern", {"max_step": 1}): a strategy with options (integers,
    floats or words), named as given in the table."""
    name, _, rest = entry.partition("@")
    opts: dict = {}
    for kv in filter(None, rest.split("+")):
        k, _, v = kv.partition("=")
        try:
            opts[k] = json.loads(v)
        except json.JSONDecodeError:
            opts[k] = v
    return name, opts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--extra", default="8,16,32", help="evaluations beyond the list and the bets")
    ap.add_argument("--strategy", default="abduction,random,tpe,pattern",
                    help="comma-separated; options after '@' joined by '+' (pattern@max_step=1)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--kernels", default=",".join(LIBRARIES), help="kernel name prefixes")
    a = ap.parse_args()
    from abductune.datasets.zoo import zoo_kernels

    prefixes = tuple(p for p in a.kernels.split(",") if p)
    paths = [str(p.resolve()) for k, ps in sorted(zoo_kernels().items()) if k.startswith(prefixes) for p in ps]
    extras = sorted(int(e) for e in a.extra.split(","))
    strategies = [s for s in a.strategy.split(",") if s]
    jobs = [(p, extras, strategies, a.repeats) for p in paths]
    rows = []
    with Pool(a.procs) as pool:
        for i, got in enumerate(pool.imap(_one, jobs)):
            rows.append(got)
            print(f"{i + 1}/{len(jobs)} {got['kernel']}/{got['shape']}", file=sys.stderr, flush=True)
    Path(a.out).write_text(json.dumps({"extras": extras, "strategies": strategies, "repeats": a.repeats,
                                       "holdout": "kernel", "rows": rows}, indent=1))
    table(rows, extras, strategies)
    print(f"wrote {a.out}")


def table(rows: list[dict], extras: list[int], strategies: list[str]) -> None:
    kernels = sorted({r["kernel"] for r in rows})
    whole = [k for k in kernels if not any(r["cells"] for r in rows if r["kernel"] == k)]
    kernels = [k for k in kernels if k not in whole]
    cols = [(s, e) for e in extras for s in strategies]
    room = {}
    print("| kernel | list / space | list's best / optimum | " + " | ".join(f"{s} +{e}" for s, e in cols) + " |")
    print("|---" * (3 + len(cols)) + "|")
    faster = {c: 0 for c in cols}
    for k in kernels:
        rs = [r for r in rows if r["kernel"] == k and r["cells"]]
        room[k] = math.exp(statistics.fmean(math.log(r["list_best_ms"] / r["optimum_ms"]) for r in rs))
        vals = []
        for s, e in cols:
            xs = [c["vs_list"] for r in rs for c in r["cells"] if c["strategy"] == s and c["extra"] == e]
            g = math.exp(statistics.fmean(map(math.log, xs)))
            faster[(s, e)] += g < FASTER
            vals.append(f"{g:.3f}")
        sizes = f"{rs[0]['list']} / {rs[0]['space']}"
        print(f"| {k} | {sizes} | {room[k]:.3f} | " + " | ".join(vals) + " |")
    print(f"| faster than the list's best by 1% or more (of {len(kernels)}) | | "
          f"{sum(v >= 1 / FASTER for v in room.values())} could be | "
          + " | ".join(str(faster[c]) for c in cols) + " |")
    if whole:
        print(f"\nleft out (the list is the whole recorded space): {', '.join(whole)}")


if __name__ == "__main__":
    main()
