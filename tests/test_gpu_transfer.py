"""benchmarks/gpu_transfer.py: pairing one kernel's recordings on two GPUs and what it reports."""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from abductune.datasets.format import read_dataset
from abductune.datasets.zoo import zoo_datasets
from abductune.heuristics.harvest import observation_from_dataset

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_transfer.py"
H200 = ROOT / "benchmarks" / "results" / "session32" / "h200_datasets"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_transfer", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_spearman_ranks_with_ties():
    gt = _module()
    assert gt.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert gt.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert gt.spearman([1, 1, 2, 3], [5, 5, 6, 7]) == pytest.approx(1.0)  # tied at their mean rank
    assert math.isnan(gt.spearman([1, 2], [2, 1]))


def test_pairs_shapes_and_prices_the_other_gpus_winner():
    gt = _module()
    there = observation_from_dataset(read_dataset(zoo_datasets("zoo_rmsnorm_bf16")[0]))
    keys = sorted((k for k in there.times if math.isfinite(there.times[k])), key=there.times.get)
    # here: every config twice as fast, except there's winner, now 3x its old time
    times = {k: t / 2 for k, t in there.times.items()}
    times[keys[0]] = there.times[keys[0]] * 3
    here = dataclasses.replace(there, times=times)
    (row,) = gt.pair_rows([here], [there])
    assert row["kernel"] == "zoo_rmsnorm_bf16" and row["shape"] == there.name
    here_opt = min(t for t in times.values() if math.isfinite(t))
    assert row["there_best"] == pytest.approx(there.times[keys[0]] * 3 / here_opt)
    assert row["here_best_there"] == pytest.approx(there.times[keys[1]] / there.times[keys[0]])
    assert row["speedup"] == pytest.approx(there.times[keys[0]] / here_opt)
    assert -1.0 <= row["spearman"] < 1.0
    other = dataclasses.replace(there, name="no such shape")
    assert gt.pair_rows([other], [there]) == []


@pytest.mark.skipif(not H200.is_dir(), reason="session 32's H200 recordings are not in this checkout")
def test_cli_on_the_h200_recordings(tmp_path):
    out = tmp_path / "t.json"
    got = subprocess.run([sys.executable, str(SCRIPT), str(H200 / "zoo_rmsnorm_bf16"), "--json", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert got.returncode == 0, got.stderr
    assert "here H200, there H100-SXM: 5 shapes" in got.stdout and "| zoo_rmsnorm_bf16 | 5 |" in got.stdout
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 5 and all(r["there_best"] >= 1.0 and r["here_best_there"] >= 1.0 for r in rows)
    nothing = subprocess.run([sys.executable, str(SCRIPT), str(H200 / "zoo_rmsnorm_bf16"), "--there", "bundled"],
                             capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert nothing.returncode != 0 and "no shape is recorded in both" in nothing.stderr
