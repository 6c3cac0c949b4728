"""The zoo's leave-one-kernel-out search figures in one command, datasets in parallel: what
`abductune replay <datasets> --strategy ... --seeds heuristics --holdout kernel --json OUT`
computes (the same seeds, the same ranker prior, the same per-repeat seeds), written in the same
JSON layout (`benchmarks/zoo_search_table.py` reads it), plus optional "fair" baselines that
are given the ranker's head as extra seeds (`--ranker-seeded random,tpe`): abduction's
exploring share draws from the ranker's order (`Knowledge.prior`), and these say what a blind
search makes of the same knowledge, spent first.

    python benchmarks/zoo_search_loko.py OUT.json [--datasets GLOB ...] [--strategy abduction,random,tpe,pattern]
        [--budget 8,16,64] [--repeats 20] [--procs 2] [--ranker-seeded random,tpe] [--options JSON]

Without --datasets: every zoo kernel's shapes (`abductune.datasets.zoo`) and the bundled data.
"""
from __future__ import annotations

import argparse
import functools
import glob
import json
import sys
from multiprocessing import Pool
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

RANKER_SEEDS = 4  # the ranker's head given as seeds to a "+ranker" baseline (PRIOR_DRAWS)


def _nearest_bests(ds, path: Path, n: int) -> list:
    """The fastest config of each of the `n` other recorded shapes of the same kernel (its
    folder) nearest `ds` in log2 of the dims: what the decorator seeds a new shape with once the
    kernel was tuned on those (`session.NEAREST_SEEDS`, `Store.nearest_bests`)."""
    from abductune.datasets.public import load_any
    from abductune.store.views import _log2_distance  # the store's own nearness, as the decorator's

    others = [load_any(p) for p in sorted(path.parent.glob("*.jsonl.gz")) if p.resolve() != path.resolve()]
    others.sort(key=lambda o: _log2_distance(o.problem.dims, ds.problem.dims))
    return [o.optimum().config for o in others[:n]]


def _one(job: tuple) -> list[dict]:
    path, label, strategies, budgets, repeats, fair, stored, options = job
    from abductune.cli.replay import _replay_prior, _replay_seeds
    from abductune.datasets.public import load_any
    from abductune.evaluate import compare_on_dataset
    from abductune.search.base import Seed

    ds = load_any(Path(path))
    seeds_fn = functools.partial(_replay_seeds, holdout="kernel")
    prior_fn = functools.partial(_replay_prior, holdout="kernel")
    cells = compare_on_dataset(ds, strategies, budgets, repeats, 0, seeds_fn=seeds_fn, prior_fn=prior_fn,
                               label=label, options=options) if strategies else []
    out = [c.to_dict() for c in cells]
    seeds = seeds_fn(ds) if fair or stored else []
    if fair:
        known = {ds.space().key(s.config) for s in seeds}
        head = [c for c in prior_fn(ds) if ds.space().key(c) not in known][:RANKER_SEEDS]
        more = seeds + [Seed(c, "ranker") for c in head]
        for name in fair:
            # the same per-repeat seeds as the plain strategy: the label carries no suffix
            for c in compare_on_dataset(ds, [name], budgets, repeats, 0, seeds_fn=lambda _d: more, label=label):
                d = c.to_dict()
                d["strategy"] = f"{name}+ranker"
                out.append(d)
    if stored:
        from abductune.session import NEAREST_SEEDS

        space = ds.space()
        near = [Seed(dict(c), "store:nearest shape") for c in _nearest_bests(ds, Path(path), NEAREST_SEEDS)
                if space.is_valid(c)]
        taken = {space.key(s.config) for s in near}
        first = near + [s for s in seeds if space.key(s.config) not in taken]
        for name in stored:
            for c in compare_on_dataset(ds, [name], budgets, repeats, 0, seeds_fn=lambda _d: first,
                                        prior_fn=prior_fn, label=label):
                d = c.to_dict()
                d["strategy"] = f"{name}+store"
                out.append(d)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--datasets", nargs="*", default=None, help="glob(s) of dataset files")
    ap.add_argument("--strategy", default="abduction,random,tpe,pattern")
    ap.add_argument("--budget", default="8,16,64")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--ranker-seeded", default="", help="baselines to rerun with the ranker's head as seeds")
    ap.add_argument("--store-seeded", default="",
                    help="strategies to rerun with the winners of the kernel's nearest other recorded shapes "
                         "as the first seeds (what the decorator does for a kernel tuned before)")
    ap.add_argument("--options", default="{}",
                    help='strategy options as JSON, per strategy name: \'{"abduction": {"centre_roles": []}}\'')
    a = ap.parse_args()
    from abductune.cli.replay import _strategy_options, _unique_labels
    from abductune.datasets.zoo import zoo_kernels
    from abductune.errors import AbductuneError

    if a.datasets:
        paths = sorted({Path(p).resolve() for g in a.datasets for p in glob.glob(g, recursive=True)})
    else:
        paths = [p.resolve() for ps in zoo_kernels().values() for p in ps]
        paths += sorted(p.resolve() for p in (ROOT / "src/abductune/datasets/data/h100").glob("*/*.jsonl.gz"))
    labels = _unique_labels(paths)
    strategies = [s for s in a.strategy.split(",") if s]
    try:  # `abductune replay --options`'s reading: each strategy named is run, each option checked
        options = _strategy_options(a.options, strategies)
    except AbductuneError as e:
        ap.error(str(e))
    budgets = sorted(int(b) for b in a.budget.split(","))
    fair = [s for s in a.ranker_seeded.split(",") if s]
    stored = [s for s in a.store_seeded.split(",") if s]
    jobs = [(str(p), labels[p], strategies, budgets, a.repeats, fair, stored, options) for p in paths]
    cells: list[dict] = []
    with Pool(a.procs) as pool:
        for i, got in enumerate(pool.imap(_one, jobs)):
            cells += got
            print(f"{i + 1}/{len(jobs)} {jobs[i][1]}", file=sys.stderr, flush=True)
    names = strategies + [f"{s}+ranker" for s in fair] + [f"{s}+store" for s in stored]
    Path(a.out).write_text(json.dumps(
        {"datasets": [str(p) for p in paths], "labels": [labels[p] for p in paths], "strategies": names,
         "budgets": budgets, "repeats": a.repeats, "seed": 0, "seconds": None, "noise": False,
         "seeds": "heuristics", "holdout": "kernel", "options": options, "cells": cells}, indent=1))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
