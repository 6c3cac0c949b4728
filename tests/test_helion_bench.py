"""benchmarks/gpu/helion_bench.py's driver on a CPU (`--dry-run`: made-up rows, no torch): the
side-by-side re-timing lands in every row of its kernel and shape, a reused quick row keeps its
wall and says where it came from, and the table's ratios use the re-timed kernel times."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu" / "helion_bench.py"


def _run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path / "b.json"), *extra],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_retime_and_reused_quick_rows(tmp_path):
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"rows": [
        {"kernel": "softmax", "shape": [4096, 1024], "mode": "quick", "wall_s": 55.7, "kernel_ms": 0.008,
         "torch_ms": 0.01, "config": "helion.Config(num_warps=1)", "device": "dry-run"},
        {"kernel": "matmul", "shape": [1024, 1024, 1024], "mode": "quick", "error": "timed out"}]}))
    r = _run(tmp_path, "--kernels", "matmul,softmax", "--shapes", "1", "--modes", "none,quick,abductune",
             "--retime", "3", "--reuse-quick", str(earlier), "--probe-worker")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads((tmp_path / "b.json").read_text())["rows"]
    by = {(x["kernel"], x["mode"]): x for x in rows}
    assert len(rows) == 6 and all(x.get("retimed_ms") for x in rows)
    q = by["softmax", "quick"]
    assert q["reused_from"] == str(earlier) and q["wall_s"] == 55.7 and q["kernel_ms_then"] == 0.008
    assert "device_mismatch" not in q
    assert "reused_from" not in by["matmul", "quick"]  # an earlier error is measured again, not reused
    # the table's abductune/quick kernel ratio is the re-timed one
    a = by["softmax", "abductune"]
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("softmax |"))
    assert f"{a['retimed_ms'] / q['retimed_ms']:.3f}" in line and "56s*" in line
    assert "Helion compile" in r.stdout  # where abductune's time went
    # the worker probe runs once, in the first none row
    assert [x["mode"] for x in rows if "worker_start_s" in x] == ["none"] and by["matmul", "none"]["worker_start_s"]
    assert "benchmark worker, spawn to first answer: matmul" in r.stdout


def test_reuse_quick_requires_retime(tmp_path):
    r = _run(tmp_path, "--kernels", "softmax", "--shapes", "1", "--reuse-quick", str(tmp_path / "x.json"))
    assert r.returncode != 0 and "--reuse-quick needs --retime" in r.stderr
