"""benchmarks/bench_zeroshot.py on two recorded shapes: leave-one-kernel-out by default, a row
per kernel and per kernel class, and the NVIDIA columns only where the package is there."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from abductune.datasets.bundled import bundled_datasets
from abductune.heuristics import nvidia

ROOT = Path(__file__).resolve().parents[1]


def test_rows_per_kernel_and_class_and_nvidia_columns(tmp_path):
    mm = next(p for p in bundled_datasets(kernel="matmul_fp16") if p.name.startswith("M4096_N4096_K4096."))
    sm = bundled_datasets(kernel="softmax_fp16")[0]
    out = tmp_path / "z.json"
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_zeroshot.py"), str(mm), str(sm),
                          "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    d = json.loads(out.read_text())
    assert d["holdout"] == "kernel"
    assert {"matmul_fp16", "softmax_fp16", "class matmul", "class row_reduction", "all"} <= set(d["summary"])
    rows = {r["kernel"]: r for r in d["rows"]}
    assert rows["matmul_fp16"]["theory"] >= 1.0 and rows["matmul_fp16"]["state"]["theory"] == "ok"
    assert rows["softmax_fp16"]["nvidia"] is None and rows["softmax_fp16"]["nvidia_tile"] is None
    if nvidia.available():
        for c in ("nvidia", "nvidia_top8", "nvidia_reranked", "nvidia_tile"):
            assert rows["matmul_fp16"][c] >= 1.0 and rows["matmul_fp16"]["state"][c] == "ok", c
        assert rows["matmul_fp16"]["nvidia_top8"] <= rows["matmul_fp16"]["nvidia"]
    assert "| class matmul | 1 |" in run.stdout


def test_groups_summarize_named_kernels_and_skip_leaves_kernels_out(tmp_path):
    """--group LABEL=... adds per-class and all rows over those kernels only; --skip drops a
    kernel from every row (how development figures leave out kernels recorded later)."""
    mm = next(p for p in bundled_datasets(kernel="matmul_fp16") if p.name.startswith("M4096_N4096_K4096."))
    sm = bundled_datasets(kernel="softmax_fp16")[0]
    rms = bundled_datasets(kernel="rmsnorm_fp16")[0]
    out = tmp_path / "g.json"
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_zeroshot.py"), str(mm), str(sm), str(rms),
                          "--group", "dev=matmul_fp16,softmax_fp16", "--skip", "rmsnorm_fp16", "--json", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    d = json.loads(out.read_text())
    assert {r["kernel"] for r in d["rows"]} == {"matmul_fp16", "softmax_fp16"} and d["skipped"] == ["rmsnorm_fp16"]
    assert d["groups"] == {"dev": ["matmul_fp16", "softmax_fp16"]}
    assert {"dev class matmul", "dev class row_reduction", "dev all"} <= set(d["summary"])
    assert d["summary"]["dev all"]["theory"]["covered"] == 2
    sm_row = next(r for r in d["rows"] if r["kernel"] == "softmax_fp16")
    assert sm_row["theory_at_nvidia"] is None  # no NVIDIA answer for a row kernel: not compared
    bad = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_zeroshot.py"), str(mm), "--group", "dev"],
                         capture_output=True, text=True, timeout=600)
    assert bad.returncode != 0 and "LABEL=KERNEL" in bad.stderr


def test_the_checked_column_passes_over_a_config_its_dataset_records_as_spilling(tmp_path):
    """The "checked" column is `predict --kernel`'s compile check with the dataset's records as
    the compiler: on a shape where learned answers spill as recorded, it serves a config the
    records say compiled without spills."""
    from abductune.datasets.format import read_dataset
    from abductune.datasets.paths import expand_dataset_args

    path = next(p for p in expand_dataset_args(["zoo:zoo_mm_splitk_fp16"]) if "M40_N3000_K7000" in str(p))
    out = tmp_path / "c.json"
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_zeroshot.py"), str(path),
                          "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    [row] = json.loads(out.read_text())["rows"]
    spills = {tuple(sorted(m.config.items())): m.spills for m in read_dataset(path).records}
    checked = row["checked_config"]
    assert checked is not None and spills[tuple(sorted(checked.items()))] == 0
    assert row["state"]["checked"] == "ok" and row["checked"] >= 1.0
    assert "checked" in run.stdout.splitlines()[0]


def test_spill_table_bins_every_record_that_ran(tmp_path):
    """benchmarks/spill_table.py: every record that ran falls in exactly one bin, and each bin's
    figures are times over the shape's optimum (>= 1)."""
    from abductune.datasets.format import read_dataset

    path = next(p for p in bundled_datasets(kernel="matmul_fp16") if p.name.startswith("M4096_N4096_K4096."))
    out = tmp_path / "s.json"
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "spill_table.py"), str(path), "--json", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    bins = json.loads(out.read_text())["bins"]
    ran = [m for m in read_dataset(path).records if m.status == "ok" and m.time_ms]
    assert sum(b["records"] for b in bins) == len(ran)
    assert all(1.0 <= b["min"] <= b["p10"] <= b["median"] for b in bins) and bins[0]["from"] == 0
