"""Re-time a few configs of one built-in kernel and shape side by side (interleaved, one worker),
with torch: a quick live check of configs named elsewhere (e.g. `predict --check`'s answer).

    python benchmarks/gpu/check_configs.py --kernel matmul_fp16 --dims M=200,N=5000,K=700 \
        --config 'tuned={"BLOCK_M": 64, ...}' --config 'checked={...}' [--out out.json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--dims", required=True, help="e.g. M=200,N=5000,K=700")
    ap.add_argument("--config", action="append", required=True, help="name=JSON config (repeatable)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default="")
    args = ap.parse_args()

    from abductune import kernels
    from abductune.hardware import local_hardware
    from tune_bench import compare

    spec = kernels.get(args.kernel)
    dims = {k: int(v) for k, v in (kv.split("=") for kv in args.dims.split(","))}
    configs = {n: json.loads(c) for n, c in (item.split("=", 1) for item in args.config)}
    ms = compare(spec, spec.problem(dims, local_hardware()), configs, rounds=args.rounds)
    best = min(v for k, v in ms.items() if k != "torch")
    print("| config | ms | / best |")
    print("|---|---|---|")
    for name, v in ms.items():
        print(f"| {name} | {v:.4f} | {v / best:.3f} |")
    if args.out:
        Path(args.out).write_text(json.dumps({"kernel": args.kernel, "dims": dims, "configs": configs, "ms": ms}, indent=1))


if __name__ == "__main__":
    main()
