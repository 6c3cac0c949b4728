"""`abductune replay`: compare search strategies on recorded datasets, scored against random
sampling and the optimum."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from ..errors import AbductuneError
from . import output
from .args import csv_list, expand_datasets, outputs_writable


@click.command(name="replay")
@click.argument("datasets", nargs=-1, required=True)
@click.option("--strategy", "strategy_list", default="random,coordesc,pattern,beam,genetic,tpe",
              show_default=True, help="Comma-separated strategy names (see `abductune strategies`).")
@click.option("--budget", "budget_list", default="16,32,64,128", show_default=True,
              help="Comma-separated evaluation budgets.")
@click.option("--seconds", type=float, default=None, help="Also stop at this many simulated seconds (the "
              "recorded compile and benchmark costs of the configs measured, not wall time).")
@click.option("--repeats", type=int, default=20, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None,
              help="Write every figure to this JSON file.")
@click.option("--plot", "plot_out", type=click.Path(dir_okay=False), default=None,
              help="Write a best-so-far plot (PNG).")
@click.option("--noise", is_flag=True, help="Add measurement noise drawn from the bundled H100 noise study; "
              "strategies see noisy times and are scored on the recorded ones.")
@click.option("--seeds", "seed_source", type=click.Choice(["none", "heuristics"]), default="none",
              show_default=True, help="Seed every run like `tune` does (theory predictions, heuristics and "
              "the observed database), leaving out what --holdout says.")
@click.option("--holdout", type=click.Choice(["kernel", "shape"]), default="kernel", show_default=True,
              help="With --seeds: what the seeds may not have learned from. kernel: any shape of the replayed "
              "dataset's kernel (leave-one-kernel-out, what a user with a new kernel meets); shape: that shape "
              "only (leave-one-shape-out, the in-sample figure).")
@click.option("--options", "options_json", default=None, metavar="JSON",
              help='Strategy options, per strategy: \'{"abduction": {"centre_roles": ["warps", "stages"]}}\' '
              "(see `abductune strategies`); a strategy not named keeps its defaults.")
def replay_cmd(datasets: tuple[str, ...], strategy_list: str, budget_list: str, seconds: float | None,
               repeats: int, seed: int, json_out: str | None, plot_out: str | None, noise: bool,
               seed_source: str, holdout: str, options_json: str | None) -> None:
    """Compare strategies by replaying recorded datasets (files, folders, 'public', 'bundled').

    score P = (B - F) / (B - optimum) (Willemsen et al., FGCS 2024): F is the median best time
    found over the repeats, B the expected best of random sampling at that budget. 1 means the
    optimum was found, 0 no better than random sampling, below 0 worse than random."""
    from ..datasets.format import require_exhaustive
    from ..datasets.public import load_any
    from ..evaluate import aggregate, compare_on_dataset, plot_curves, require_matplotlib
    from ..measure.replay import NoiseModel
    from ..search import STRATEGIES

    names = list(dict.fromkeys(csv_list(strategy_list)))
    for n in names:
        if n not in STRATEGIES:
            raise AbductuneError(f"unknown strategy {n!r}; known: {', '.join(sorted(STRATEGIES))}")
    options = _strategy_options(options_json, names)
    budgets = sorted(set(csv_list(budget_list, int)))
    if not budgets or budgets[0] <= 0:
        raise AbductuneError(f"budgets must be positive integers, got {budget_list!r}")
    if repeats <= 0:
        raise AbductuneError(f"--repeats must be positive, got {repeats}")
    if seconds is not None and not seconds > 0:
        raise AbductuneError(f"--seconds must be positive, got {seconds:g}")
    outputs_writable(json_out, plot_out)
    if plot_out:
        require_matplotlib()  # before the replay, not after it
    paths = list(dict.fromkeys(p.resolve() for p in expand_datasets(datasets)))  # `bundled bundled` once
    noise_model = NoiseModel.from_study() if noise else None
    seeds_fn = functools.partial(_replay_seeds, holdout=holdout) if seed_source == "heuristics" else None
    prior_fn = functools.partial(_replay_prior, holdout=holdout) if seed_source == "heuristics" else None
    cells = []
    curves: dict[str, dict[str, list[list[float]]]] = {}
    optima: dict[str, float] = {}
    with output.progress_bar() as bar:
        task = bar.add_task("replaying", total=len(paths) * len(names) * repeats)
        labels = _unique_labels(paths)
        for p in paths:
            ds = load_any(p)
            label = labels[p]
            require_exhaustive(ds)  # names what is missing, and what replay would accept
            bar.update(task, description=f"replaying {label}")
            c: dict[str, list[list[float]]] = {}
            cells += compare_on_dataset(ds, names, budgets, repeats, seed, seconds, curves=c, seeds_fn=seeds_fn,
                                        prior_fn=prior_fn, options=options,
                                        progress=lambda: bar.advance(task), noise=noise_model, label=label)
            curves[label] = c
            optima[label] = ds.optimum().time_ms  # type: ignore[assignment]
    agg = aggregate(cells)
    table = Table(title=f"replay: {len(paths)} dataset(s), {repeats} repeats, seed {seed}"
                  + (f", {seconds:g} s limit" if seconds else "") + (", with noise" if noise else "")
                  + (f", seeded (leave-one-{holdout}-out)" if seeds_fn else ""))
    table.caption = ("score P = (B - F) / (B - optimum): F the median best found, B the expected best of "
                     "random sampling at that budget; 1 = optimum, 0 = random, below 0 = worse than random")
    for col in ("strategy", "budget", "score P", "median best/opt", "≤1.02×", "≤1.05×"):
        table.add_column(col, justify="right" if col != "strategy" else "left")
    for row in agg:
        table.add_row(row["strategy"], str(row["budget"]), f"{row['mean_score_P']:.3f}",
                      f"{row['geomean_median_ratio']:.3f}", f"{row['mean_within_1.02']:.0%}",
                      f"{row['mean_within_1.05']:.0%}")
    output.console.print(table)
    if json_out:
        from ..files import atomic_write_text

        atomic_write_text(json_out, json.dumps(
            {"datasets": [str(p) for p in paths], "labels": [labels[p] for p in paths], "strategies": names,
             "budgets": budgets, "repeats": repeats, "seed": seed, "seconds": seconds, "noise": noise,
             "seeds": seed_source, "holdout": holdout if seeds_fn else None, "options": options,
             "cells": [c.to_dict() for c in cells], "aggregate": agg}, indent=1))
        output.console.print(f"wrote {json_out}")
    if plot_out:
        plot_curves(curves, optima, plot_out)
        output.console.print(f"wrote {plot_out}")


def _strategy_options(text: str | None, names: list[str]) -> dict[str, dict[str, Any]]:
    """--options: a JSON object of strategy name -> its options, each strategy named in
    --strategy and each option checked by building the strategy once, before any replay."""
    from ..search import make_strategy

    if not text:
        return {}
    try:
        got = json.loads(text)
    except ValueError as e:
        raise AbductuneError(f"--options is not JSON ({e}): give an object such as "
                             '\'{"abduction": {"batch": 4}}\'') from None
    if not isinstance(got, dict) or not all(isinstance(v, dict) for v in got.values()):
        raise AbductuneError("--options must be a JSON object of strategy name -> options object, "
                             f"such as '{{\"abduction\": {{\"batch\": 4}}}}', got {text!r}")
    for name, opts in got.items():
        if name not in names:
            raise AbductuneError(f"--options names strategy {name!r}, which --strategy does not run "
                                 f"({', '.join(names)})")
        make_strategy(name, **opts)  # an unknown option or a bad value raises, naming it
    return got


def _unique_labels(paths: list[Path]) -> dict[Path, str]:
    """A label per dataset: its file stem, with parent folders added until labels are unique
    (`convolution_milo/A100` and `dedispersion_milo/A100` stay apart)."""
    def stem(p: Path) -> str:
        name = p.name
        for ext in (".gz", ".jsonl", ".json"):
            name = name.removesuffix(ext)
        return name
    depth = {p: 0 for p in paths}
    while True:
        labels = {p: "/".join([*p.parent.parts[len(p.parent.parts) - depth[p]:], stem(p)]) for p in paths}
        seen: dict[str, list[Path]] = {}
        for p, lab in labels.items():
            seen.setdefault(lab, []).append(p)
        clashes = [ps for ps in seen.values() if len(ps) > 1]
        if not clashes:
            return labels
        for ps in clashes:
            for p in ps:
                if depth[p] >= len(p.parent.parts):
                    return {q: str(q) for q in paths}
                depth[p] += 1


def _replay_seeds(ds: Any, holdout: str = "kernel") -> list[Any]:
    """Seeds for a replayed dataset as `tune` would give them, never learned from the dataset
    itself (`holdout="shape"`) nor, by default, from any shape of its kernel."""
    from ..problem import Holdout
    from ..tune import seed_list

    space = ds.space()
    default = ds.meta.get("default_config") or space.default()
    seeds, _ = seed_list(ds.problem, space, default, None, True, None, exclude=Holdout(ds.problem, holdout))
    return seeds


def _replay_prior(ds: Any, holdout: str = "kernel") -> list[dict]:
    """The ranker's order for a replayed dataset as `tune` gives it (`heuristics.seeds.ranker_prior`),
    refitted without the dataset (`holdout="shape"`) or, by default, without its kernel."""
    from ..heuristics.seeds import ranker_prior
    from ..problem import Holdout

    return ranker_prior(ds.problem, ds.space(), exclude=Holdout(ds.problem, holdout))
