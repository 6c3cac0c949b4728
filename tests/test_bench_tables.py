"""The replay benchmark's summary over several base seeds: each cell is the mean over seeds
with its range, so a figure is never one seed's luck (public mean P moves by up to 0.13 at 50
evaluations with the seed alone)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_abduction as ba  # noqa: E402


def _result(seed: int, p20: float, p50: float) -> dict:
    cells = [{"strategy": "abduction", "budget": b, "median_ratio": 1.1, "score_P": p, "within_1.02": 0.5,
              "mean_evaluations": b} for b, p in ((20, p20), (50, p50))]
    return {"suite": "public", "path": "x/a.json.gz", "kernel": "k", "noise": False, "seed": seed, "cells": cells}


def test_several_seeds_give_mean_and_range_per_cell():
    summary = ba.summarise([_result(0, 0.2, 0.5), _result(1, 0.4, 0.7)])
    rows = [s for s in summary if s["kernel"] == "all" and s["budget"] == 20]
    assert sorted(s["seed"] for s in rows) == [0, 1]  # one row per seed, not pooled
    table = ba.tables(summary, ["abduction"])
    line = next(ln for ln in table.splitlines() if ln.startswith("| abduction"))
    assert "0.300 (0.200-0.400)" in line and "0.600 (0.500-0.700)" in line
    assert "mean over base seeds 0,1" in table


def test_one_seed_prints_plain_figures():
    table = ba.tables(ba.summarise([_result(3, 0.25, 0.55)]), ["abduction"])
    line = next(ln for ln in table.splitlines() if ln.startswith("| abduction"))
    assert line == "| abduction | 0.250 | 0.550 |"
