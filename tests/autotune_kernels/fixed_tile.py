"""The grouped matmul of `matmul`, with its M tile passed by the caller (as Liger's fused MoE
passes BLOCK_M) and only BLOCK_SIZE_N, BLOCK_SIZE_K, warps and stages in the list."""
import triton

import abductune

from .matmul import matmul_kernel

CONFIGS = [
    triton.Config({"BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 2}, num_warps=2, num_stages=2),
    triton.Config({"BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 2}, num_warps=4, num_stages=2),
]


def make(**options):
    return abductune.autotune(configs=CONFIGS, key=["M", "N", "K"], **options)(matmul_kernel)


def matmul(kernel, a, b, block_m: int = 16):
    M, K = a.shape
    _, N = b.shape
    c = a.new_empty((M, N))
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),)  # noqa: E731
    kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                 BLOCK_SIZE_M=block_m)
    return c
