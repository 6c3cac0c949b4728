"""Record the torch baseline into bundled datasets that lack it (device machine):
    PYTHONPATH=src python3 benchmarks/gpu/add_baselines.py src/abductune/datasets/data/h100/rmsnorm_fp16"""
from __future__ import annotations

import sys
from pathlib import Path

from abductune.datasets.format import read_dataset, write_dataset
from abductune.measure.live import BenchWorker


def main() -> None:
    w = BenchWorker()
    try:
        for p in sorted(Path(sys.argv[1]).glob("*.jsonl.gz")):
            ds = read_dataset(p)
            if "torch_ms" in ds.baselines:
                continue
            w.request({"op": "setup", "kernel": ds.problem.kernel, "problem": ds.problem.to_dict(), "seed": 0}, 600)
            r = w.request({"op": "bench", "config": None}, 120)
            print(p.name, r.status, r.time_ms, r.error[:200], flush=True)
            if r.status == "ok":
                ds.baselines["torch_ms"] = r.time_ms
                write_dataset(ds, p)
    finally:
        w.close()


if __name__ == "__main__":  # spawn re-imports this module
    main()
