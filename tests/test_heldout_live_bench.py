"""benchmarks/gpu/heldout_live.py (issue 27), its CPU paths, so the H100 run is one command that has
run before: `--device compile` (every launch compiles for sm_90 and nothing runs: the cold first
calls time the compiles, the compile pool and abductune's machinery) on the LayerNorm kernel,
whose autotuner is built over a `triton.heuristics` wrapper made where it is called; `--device
cpu --smoke` (Triton's interpreter: launchers, arguments, results, the re-timing)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu" / "heldout_live.py"

pytest.importorskip("torch")
pytest.importorskip("triton")


def _run(tmp_path: Path, *args: str) -> tuple[dict, str]:
    out = tmp_path / "h.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("TRITON_INTERPRET", None)
    r = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--out", str(out), "--deadline-s", "400", *args],
                       capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(out.read_text()), r.stdout


def test_compile_only_layernorm_compiles_in_workers_and_records_its_phases(tmp_path):
    data, stdout = _run(tmp_path, "--device", "compile", "--kernels", "zoo_layernorm_fwd_bf16")
    variants = data["kernels"]["zoo_layernorm_fwd_bf16"]["variants"]
    assert set(variants) == {"triton", "abductune_b16", "abductune_list"}
    assert variants["triton"]["shapes"][0]["bench_time_s"] > 0
    for v in ("abductune_b16", "abductune_list"):
        [shape] = variants[v]["shapes"]
        [p] = shape["phases"]
        # the heuristics wrapper no longer sends every config to the caller: workers compile them
        assert p["compile"]["plan"] == "parallel", p["compile"]
        assert p["evaluations"] == (16 if v == "abductune_b16" else 8)
        assert p["first_launch_s"] > 0 and p["wall_s"] <= shape["cold_s"]
    b16 = variants["abductune_b16"]["shapes"][0]["phases"][0]["compile"]
    assert b16["sent"] > 0 and b16["from_workers"] > 0 and b16["worker_failed"] == 0, b16
    assert b16["worker_misses"] == 0, b16  # every binary a worker compiled was found at its launch here
    assert b16["offline_target"] == [90, 32] and b16["pool_age_s"] > 0  # started at decoration, compiling for sm_90
    rows = {r["variant"]: r for r in data["phases"]}
    assert rows["triton"]["cold_vs_triton"] == 1.0 and rows["abductune_b16"]["cold_s"] > 0
    assert "cold first call, summed over shapes" in stdout and stdout.rstrip().endswith("smoke: PASS")


def test_interpreted_smoke_checks_launchers_results_and_retiming(tmp_path):
    data, stdout = _run(tmp_path, "--device", "cpu", "--kernels", "zoo_rmsnorm_bf16")
    kr = data["kernels"]["zoo_rmsnorm_bf16"]
    assert all(s["correct"] for v in kr["variants"].values() for s in v["shapes"])
    [row] = kr["rows"]
    assert row["abductune_b16_correct"] and row["triton_correct"]
    assert data["targets"]["zoo_rmsnorm_bf16"]["all_correct"]
    assert stdout.rstrip().endswith("smoke: PASS")
