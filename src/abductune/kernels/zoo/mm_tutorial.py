"""Y = X @ W^T in bf16, written the way people write a first Triton matmul from a tutorial.

X is (M, K) activations, W an nn.Linear weight (N, K) stored row-major; the kernel is handed
W^T as a strided (K, N) view, so B reads walk K with unit stride. The launch is a 1-D grid over
output tiles; tiles are visited in bands of GROUP_SIZE_M tile-rows (inside a band, consecutive
programs go down the band's rows before moving to the next tile-column, the ordering the
well-known tutorial uses: a row-major walk of a GROUP_SIZE_M x all-N band is just the plain
row-major order, so grouping would do nothing). Edge handling is the tutorial habit: row and
column offsets are wrapped with `% M` / `% N` so loads never leave the tensors and need no
mask (edge tiles recompute valid rows and drop them at the store); only the K tail is masked.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import triton
import triton.language as tl

from ...hardware import HardwareInfo
from ...problem import Problem
from ...space import Choice, Pow2, Space
from ..base import Constexpr, KernelSpec, cdiv, launch_options

if TYPE_CHECKING:
    import torch


@triton.jit
def tutorial_matmul_kernel(
        a_ptr, b_ptr, c_ptr,
        M, N, K,
        stride_am, stride_ak,
        stride_bk, stride_bn,
        stride_cm, stride_cn,
        BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
        GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    # which band of GROUP_SIZE_M tile-rows this program is in, and where inside it
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)  # the last band may be short
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # wrapped offsets: rows past M (columns past N) alias valid ones instead of being masked
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(tl.bfloat16)

    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


# Per-block shared memory an H100 grants (227 KB): early_config_prune's test, A and B tiles of
# every stage at 2 bytes per bf16 element.
SMEM_BYTES = 232448


class TutorialMatmulBf16(KernelSpec):
    origin = "abductune zoo (ours), after the grouped-ordering GEMM of the Triton matmul tutorial"
    name = "zoo_mm_tutorial_bf16"
    kernel_class = "matmul"
    dims = ("M", "N", "K")
    dtype = "bf16"

    @property
    def triton_fn(self) -> Any:
        return tutorial_matmul_kernel

    def space(self) -> Space:
        return Space(
            [Pow2("BLOCK_SIZE_M", 16, 256, default=128), Pow2("BLOCK_SIZE_N", 32, 256, default=128),
             Pow2("BLOCK_SIZE_K", 32, 128, default=64), Choice("GROUP_SIZE_M", [1, 4, 8, 16], default=8),
             Choice("num_warps", [4, 8], default=4), Choice("num_stages", [3, 4, 5], default=4)],
            constraints=[
                f"num_stages * (BLOCK_SIZE_M + BLOCK_SIZE_N) * BLOCK_SIZE_K * 2 <= {SMEM_BYTES}",
                # fp32 accumulator per thread between 16 and 128 values: below, warps idle on a
                # tiny tile; above, the 255-register budget is gone and ptxas spills
                "BLOCK_SIZE_M * BLOCK_SIZE_N >= 16 * 32 * num_warps",
                "BLOCK_SIZE_M * BLOCK_SIZE_N <= 128 * 32 * num_warps",
            ],
            name=self.name,
        )

    def fixed_configs(self) -> list[dict]:
        # the tutorial's hand-written autotune list (its 2-warp rows moved to 4 warps) and
        # the 64-deep K tiles people add for bf16
        rows = [(128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
                (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 5, 4), (32, 64, 32, 5, 4),
                (256, 128, 64, 3, 8), (64, 64, 64, 4, 4), (128, 128, 64, 4, 4), (256, 64, 64, 4, 4)]
        return [{"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8,
                 "num_warps": w, "num_stages": s} for m, n, k, s, w in rows]

    def default_config(self) -> dict:
        return {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8,
                "num_warps": 4, "num_stages": 4}

    def suite_shapes(self) -> list[dict[str, int]]:
        shapes = [(1, 14336, 4096),     # decode, Llama-3-8B up/gate projection
                  (32, 4096, 4096),     # small decode batch, attention projection
                  (256, 28672, 4096),   # batched decode through a 70B-class up/gate (fused)
                  (2048, 4096, 4096),   # prefill, square-ish
                  (4096, 1024, 4096),   # prefill, narrow N (GQA k/v projection)
                  (1000, 3000, 2000)]   # awkward: nothing a power of two, N not a multiple of 8
        return [{"M": m, "N": n, "K": k} for m, n, k in shapes]

    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        m, n, k = d["M"], d["N"], d["K"]
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"a": "bf16", "w": "bf16", "c": "bf16"},
                       flops=2.0 * m * n * k, min_bytes=2.0 * (m * k + n * k + m * n),
                       hardware=hardware, source_hash=self.source_hash)

    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        d, g = problem.dims, self._generator(device, seed)
        x = torch.randn(d["M"], d["K"], generator=g, device=device).to(torch.bfloat16)
        # an nn.Linear weight (out_features, in_features), scaled so outputs stay O(1)
        w = (torch.randn(d["N"], d["K"], generator=g, device=device) / d["K"] ** 0.5).to(torch.bfloat16)
        return x, w

    def tensor_shapes(self, problem: Problem) -> tuple[list[tuple[int, ...]], tuple[int, ...]]:
        d = problem.dims
        return [(d["M"], d["K"]), (d["N"], d["K"])], (d["M"], d["N"])

    def reference(self, inputs: tuple) -> torch.Tensor:
        x, w = inputs
        return x.float() @ w.float().t()

    def alloc_output(self, problem: Problem, inputs: tuple) -> torch.Tensor:
        import torch
        x, w = inputs
        return torch.empty(x.shape[0], w.shape[0], dtype=torch.bfloat16, device=x.device)

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        x, w = inputs
        (m, k), n = x.shape, w.shape[0]
        meta, opts = launch_options(config)
        grid = (cdiv(m, meta["BLOCK_SIZE_M"]) * cdiv(n, meta["BLOCK_SIZE_N"]),)
        # W^T as a view: (K, N) with strides (1, K)
        tutorial_matmul_kernel[grid](x, w, out, m, n, k, x.stride(0), x.stride(1), w.stride(1), w.stride(0),
                                     out.stride(0), out.stride(1), **meta, **opts)

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        import torch
        x, w = inputs
        torch.matmul(x, w.t(), out=out)  # what F.linear(x, w) computes, into `out`

    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        m, n, k = (problem.dims[x] for x in "MNK")
        return {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "M": m, "N": n, "K": k,
                "stride_am": k, "stride_ak": 1, "stride_bk": 1, "stride_bn": k, "stride_cm": n, "stride_cn": 1,
                **{p: Constexpr(config[p]) for p in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K",
                                                     "GROUP_SIZE_M")}}
