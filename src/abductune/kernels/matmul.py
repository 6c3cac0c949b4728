"""C = A @ B for fp16 / bf16 inputs with fp32 accumulation.

A is (M, K), B is (K, N), C is (M, N), any strides. Programs walk output tiles in groups of
GROUP_M tile-rows so that consecutive programs share B tiles (and A tiles within a group)
while they are still in L2. Ragged edges are masked; when K is a multiple of BLOCK_K the
K-loop drops its masks (EVEN_K, derived from the shape, not tuned).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..hardware import HardwareInfo
from ..problem import Problem
from ..space import Choice, Pow2, Space
from .base import Constexpr, KernelSpec, cdiv, launch_options, torch_dtype
from ._triton import tl, triton  # stand-ins without Triton: the spec still imports

if TYPE_CHECKING:
    import torch


# row counts are not specialised: decode (1 row) and prefill shapes share one compile
@triton.jit(do_not_specialize=["M"])
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr, EVEN_K: tl.constexpr):
    # Map the flat program id to a tile, GROUP_M tile-rows at a time (column-major inside
    # a group), so a wave of programs touches few distinct A rows and B columns.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows_in_group = min(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (pid % per_group) % rows_in_group
    tile_n = (pid % per_group) // rows_in_group

    rm = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    mask_m = rm[:, None] < M
    mask_n = rn[None, :] < N

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs, mask=mask_m, other=0.0)
            b = tl.load(b_ptrs, mask=mask_n, other=0.0)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=mask_m & (rk[None, :] < k_left), other=0.0)
            b = tl.load(b_ptrs, mask=(rk[:, None] < k_left) & mask_n, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask_m & mask_n)


# H100's per-block shared-memory opt-in limit (227 KB); the estimate counts the A and B tiles
# of every pipeline stage at 2 bytes per element and ignores the epilogue, which Triton can
# alias onto the pipeline buffers.
SMEM_LIMIT = 232448


class MatmulSpec(KernelSpec):
    kernel_class = "matmul"
    no_specialize = ("M",)
    dims = ("M", "N", "K")

    def __init__(self, dtype: str):
        self.dtype = dtype
        self.name = f"matmul_{dtype}"

    @property
    def triton_fn(self) -> Any:
        return matmul_kernel

    def space(self) -> Space:
        return Space(
            [Pow2("BLOCK_M", 16, 256, default=128), Pow2("BLOCK_N", 32, 256, default=128),
             Pow2("BLOCK_K", 32, 128, default=64), Choice("GROUP_M", [1, 8], role="group", default=8),
             Choice("num_warps", [2, 4, 8], default=4), Choice("num_stages", [2, 3, 4, 5], default=3)],
            constraints=[
                f"num_stages * (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 2 <= {SMEM_LIMIT}",
                # fp32 accumulator elements per thread: above 128 ptxas spills (255-register cap
                # with addresses and operands besides the accumulator).
                "BLOCK_M * BLOCK_N <= 128 * 32 * num_warps",
                # below 16 accumulator elements per thread most warps wait on one small MMA tile.
                "BLOCK_M * BLOCK_N >= 16 * 32 * num_warps",
            ],
            name=self.name,
        )

    def fixed_configs(self) -> list[dict]:
        # The Triton tutorial style list (the configs people copy into @triton.autotune).
        rows = [(128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
                (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 5, 2), (32, 64, 32, 5, 2)]
        return [{"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8, "num_warps": w, "num_stages": s}
                for m, n, k, s, w in rows]

    def default_config(self) -> dict:
        return {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4, "num_stages": 3}

    def suite_shapes(self) -> list[dict[str, int]]:
        shapes = []
        # decode: a handful of tokens through Llama-style projections (qkv/o, up/gate, down)
        for m, (n, k) in [(1, (4096, 4096)), (16, (11008, 4096)), (64, (14336, 4096)), (16, (4096, 14336)),
                          (1, (14336, 4096))]:
            shapes.append((m, n, k))
        # prefill: long prompts through the same layers
        shapes += [(512, 4096, 4096), (2048, 11008, 4096), (8192, 4096, 14336), (16384, 4096, 4096),
                   (2048, 14336, 4096)]
        # odd aspect ratios: skinny N (LoRA / router), small K, large K, squares, ragged M (N and K
        # stay multiples of 16 so every suite shape shares one compiled specialisation)
        shapes += [(8192, 128, 4096), (4096, 4096, 256), (1024, 1024, 16384), (4096, 4096, 4096),
                   (8192, 8192, 8192), (3000, 5120, 1024)]
        return [{"M": m, "N": n, "K": k} for m, n, k in shapes]

    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        m, n, k = d["M"], d["N"], d["K"]
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"a": self.dtype, "b": self.dtype, "c": self.dtype},
                       flops=2.0 * m * n * k, min_bytes=2.0 * (m * k + k * n + m * n),
                       hardware=hardware, source_hash=self.source_hash)

    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        d, g, dt = problem.dims, self._generator(device, seed), torch_dtype(self.dtype)
        # B is scaled by 1/sqrt(K) so outputs stay O(1) whatever K is (no fp16 overflow).
        a = torch.randn(d["M"], d["K"], generator=g, device=device).to(dt)
        b = (torch.randn(d["K"], d["N"], generator=g, device=device) / d["K"] ** 0.5).to(dt)
        return a, b

    def tensor_shapes(self, problem: Problem) -> tuple[list[tuple[int, ...]], tuple[int, ...]]:
        d = problem.dims
        return [(d["M"], d["K"]), (d["K"], d["N"])], (d["M"], d["N"])

    def reference(self, inputs: tuple) -> torch.Tensor:
        import torch
        a, b = inputs
        return a.float() @ b.float()

    def alloc_output(self, problem: Problem, inputs: tuple) -> torch.Tensor:
        import torch
        a, b = inputs
        return torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        a, b = inputs
        (m, k), n = a.shape, b.shape[1]
        meta, opts = launch_options(config)
        grid = (cdiv(m, meta["BLOCK_M"]) * cdiv(n, meta["BLOCK_N"]),)
        matmul_kernel[grid](a, b, out, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            out.stride(0), out.stride(1), EVEN_K=k % meta["BLOCK_K"] == 0, **meta, **opts)

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        import torch
        torch.matmul(inputs[0], inputs[1], out=out)

    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        m, n, k = (problem.dims[x] for x in "MNK")
        ptr = f"*{self.dtype}"
        # contiguous row-major A, B, C: the strides make_inputs/alloc_output produce
        return {"a_ptr": ptr, "b_ptr": ptr, "c_ptr": ptr, "M": m, "N": n, "K": k,
                "stride_am": k, "stride_ak": 1, "stride_bk": n, "stride_bn": 1, "stride_cm": n, "stride_cn": 1,
                **{p: Constexpr(config[p]) for p in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")},
                "EVEN_K": Constexpr(k % config["BLOCK_K"] == 0)}
