"""Static facts of matmul configs compiled for a GPU on the CPU (no GPU needed): which tensor-core
instruction Triton emits (wgmma or mma.sync) and ptxas's registers and spills.

    python benchmarks/mma_facts.py [--arch sm_90] [--dims 200,5000,700]

The default configs are the ones the tenth session's notes cite: the warpgroup-MMA check behind
`theory.store.warpgroup_repair` and the spilling 64x256x64 / 4-warp prediction.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

CONFIGS = [  # BLOCK_M, BLOCK_N, BLOCK_K, warps, stages
    (64, 128, 64, 2, 3), (64, 128, 64, 4, 3), (32, 128, 64, 4, 3), (128, 128, 64, 2, 3), (128, 32, 64, 8, 3),
    (64, 256, 64, 4, 4), (64, 256, 64, 8, 4), (128, 256, 64, 8, 4), (64, 128, 32, 4, 3),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--dims", default="200,5000,700", help="M,N,K")
    args = ap.parse_args()

    import triton

    from abductune import kernels
    from abductune.hardware import lookup
    from abductune.measure.static import compile_one

    m, n, k = (int(x) for x in args.dims.split(","))
    problem = kernels.get("matmul_fp16").problem({"M": m, "N": n, "K": k}, lookup("H100-SXM"))
    print(f"matmul_fp16 M={m} N={n} K={k}, triton {triton.__version__}, {args.arch}")
    print("| BLOCK_M x N x K | warps | stages | MMA | registers | spill bytes |")
    print("|---|---|---|---|---|---|")
    for bm, bn, bk, w, s in CONFIGS:
        cfg = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "num_warps": w, "num_stages": s}
        f = compile_one("matmul_fp16", cfg, problem.to_dict(), args.arch)
        print(f"| {bm}x{bn}x{bk} | {w} | {s} | {f['mma'] or f['status']} | {f['registers']} | {f['spills']} |")


if __name__ == "__main__":
    main()
