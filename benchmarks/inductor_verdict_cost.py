"""What one stored-verdict lookup costs a compile (`inductor_gemm.verdict`, issue 25): whether a
per-process cache of verdicts would pay.

    python benchmarks/inductor_verdict_cost.py [--calls 224]

Records four decode-shaped verdicts in a fresh SQLite store (a temporary folder), then times
`--calls` lookups of one of them (224: a 32-layer decoder's seven matmul lowerings) and prints
the total and the cost of one. CPU only; nothing is compiled.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=224)
    args = ap.parse_args()
    from abductune.hardware import lookup
    from abductune.integrations import inductor_gemm as G
    from abductune.store import Store

    hw = lookup("H100-SXM")
    pick = {"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4, "num_stages": 4}
    with tempfile.TemporaryDirectory() as d, Store(Path(d) / "s.sqlite") as st:
        for shape in [(32, 4096, 4096), (32, 1024, 4096), (32, 14336, 4096), (32, 4096, 14336)]:
            G.record(st, "toolchain", *shape, "bf16", hw, 4, [(pick, 0.02)], 0.03)
        t0 = time.perf_counter()
        for _ in range(args.calls):
            assert G.verdict(st, "toolchain", 32, 4096, 4096, "bf16", hw, 4) is not None
        s = time.perf_counter() - t0
    print(f"{args.calls} verdict lookups: {s * 1e3:.1f} ms ({s / args.calls * 1e3:.3f} ms each)")


if __name__ == "__main__":
    main()
