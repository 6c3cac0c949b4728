"""W8A8 matmul: int8 activations times int8 weights, int32 accumulation, scaled fp16 output.

The SmoothQuant / W8A8 serving pattern: activations are quantised per token (one fp32 scale
per row of A), weights per output channel (one fp32 scale per row of W), the product is
accumulated exactly in int32 on the integer tensor cores, and both scales are applied once in
the epilogue:

    C[m, n] = fp16( sum_k A[m, k] * W[n, k]  *  a_scale[m] * w_scale[n] )

Layouts are the ones a serving stack keeps: A (M, K) int8 row-major, W (N, K) int8 row-major
(the nn.Linear layout, so both operands are K-contiguous, which is what 8-bit MMA wants), the
scales as fp32 vectors, C (M, N) fp16.

Style: vLLM / SmoothQuant-like naming (BLOCK_SIZE_M/N/K, GROUP_SIZE_M), one program per output
tile, tiles visited in column-major bands of GROUP_SIZE_M tile-rows, both operands always masked
on every edge (no even-K fast path: K-tail masking is cheap next to int8 MMA throughput).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import triton
import triton.language as tl

from ...hardware import HardwareInfo
from ...problem import Problem
from ...space import Choice, Pow2, Space
from ..base import Constexpr, KernelSpec, cdiv

if TYPE_CHECKING:
    import torch


@triton.jit(do_not_specialize=["M"])
def _w8a8_scaled_mm(a_ptr, w_ptr, a_scale_ptr, w_scale_ptr, c_ptr,
                    M, N, K,
                    stride_am, stride_ak, stride_wn, stride_wk, stride_cm, stride_cn,
                    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                    GROUP_SIZE_M: tl.constexpr):
    # program -> (tile row, tile col): bands of GROUP_SIZE_M tile-rows, walked column by column
    pid = tl.program_id(axis=0)
    n_row_tiles = tl.cdiv(M, BLOCK_SIZE_M)
    n_col_tiles = tl.cdiv(N, BLOCK_SIZE_N)
    band = pid // (GROUP_SIZE_M * n_col_tiles)
    band_first = band * GROUP_SIZE_M
    band_height = tl.minimum(n_row_tiles - band_first, GROUP_SIZE_M)
    within = pid % (GROUP_SIZE_M * n_col_tiles)
    tile_m = band_first + within % band_height
    tile_n = within // band_height

    offs_m = tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_n = tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    row_ok = offs_m < M
    col_ok = offs_n < N
    # W is (N, K): the (K, N) operand tile is read transposed, K fastest in memory
    a_tile = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    w_tile = w_ptr + offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.int32)
    for k0 in range(0, K, BLOCK_SIZE_K):
        k_ok = (k0 + offs_k) < K
        a = tl.load(a_tile, mask=row_ok[:, None] & k_ok[None, :], other=0)
        w = tl.load(w_tile, mask=k_ok[:, None] & col_ok[None, :], other=0)
        acc = tl.dot(a, w, acc, out_dtype=tl.int32)
        a_tile += BLOCK_SIZE_K * stride_ak
        w_tile += BLOCK_SIZE_K * stride_wk

    # epilogue: dequantise with the per-token and per-channel scales, round to fp16
    sa = tl.load(a_scale_ptr + offs_m, mask=row_ok, other=0.0)
    sw = tl.load(w_scale_ptr + offs_n, mask=col_ok, other=0.0)
    res = acc.to(tl.float32) * sa[:, None] * sw[None, :]
    c_tile = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_tile, res.to(tl.float16), mask=row_ok[:, None] & col_ok[None, :])


# H100 opt-in shared memory per block; int8 operand tiles are one byte per element
_SMEM_BYTES = 232448


class Int8Matmul(KernelSpec):
    """zoo_mm_int8: C = (A_int8 @ W_int8^T) * a_scale[:, None] * w_scale[None, :] -> fp16."""

    origin = ("abductune zoo (ours), after SmoothQuant (Xiao et al. 2023) W8A8 GEMM: int8 x int8 "
              "-> int32 with per-token and per-channel scales in the epilogue")
    name = "zoo_mm_int8"
    kernel_class = "quantized_matmul"
    dims = ("M", "N", "K")
    dtype = "int8"  # element type of the operands; the output is fp16 (checked at the default 1e-2)
    no_specialize = ("M",)

    @property
    def triton_fn(self) -> Any:
        return _w8a8_scaled_mm

    # ------------------------------------------------------------------ tuning surface
    def space(self) -> Space:
        # K tiles start at 64: a 32-element int8 row is only 32 bytes, too narrow for the
        # 128-byte swizzled shared-memory rows the int8 MMA reads
        return Space(
            [Pow2("BLOCK_SIZE_M", 16, 256, default=128), Pow2("BLOCK_SIZE_N", 32, 256, default=128),
             Pow2("BLOCK_SIZE_K", 64, 256, default=128), Choice("GROUP_SIZE_M", [1, 8], default=8),
             Choice("num_warps", [4, 8], default=4), Choice("num_stages", [2, 3, 4, 5], default=3)],
            constraints=[
                # pipelined A and B tiles, one byte per element, must fit shared memory
                f"num_stages * (BLOCK_SIZE_M + BLOCK_SIZE_N) * BLOCK_SIZE_K <= {_SMEM_BYTES}",
                # int32 accumulator: at most 128 per thread (the register file), at least 8
                "BLOCK_SIZE_M * BLOCK_SIZE_N <= 128 * 32 * num_warps",
                "BLOCK_SIZE_M * BLOCK_SIZE_N >= 8 * 32 * num_warps",
            ],
            name=self.name,
        )

    def fixed_configs(self) -> list[dict]:
        # an int8 @triton.autotune list: wide K tiles (int8 is half the bytes of fp16)
        rows = [(128, 256, 128, 8, 3), (256, 128, 128, 8, 3), (128, 128, 128, 4, 4), (128, 128, 64, 4, 5),
                (64, 128, 128, 4, 4), (128, 64, 128, 4, 4), (64, 64, 64, 4, 5), (32, 64, 64, 4, 5),
                (16, 128, 128, 4, 4), (16, 64, 256, 4, 3)]
        return [{"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8,
                 "num_warps": w, "num_stages": s} for m, n, k, w, s in rows]

    def default_config(self) -> dict:
        return {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 8,
                "num_warps": 4, "num_stages": 4}

    def suite_shapes(self) -> list[dict[str, int]]:
        return [{"M": m, "N": n, "K": k} for m, n, k in [
            (16, 4096, 4096),       # decode batch through a square projection (torch._int_mm refuses M<=16)
            (64, 14336, 4096),      # decode batch through Llama-3-8B gate/up
            (512, 4096, 14336),     # short prefill through down
            (2048, 6144, 4096),     # prefill through Llama-3-8B fused qkv (GQA)
            (3000, 5120, 13824),    # ragged token count through Llama-2-13B down
        ]]

    # ------------------------------------------------------------------ problem
    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        m, n, k = d["M"], d["N"], d["K"]
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"a": "int8", "b": "int8", "a_scale": "fp32", "b_scale": "fp32", "c": "fp16"},
                       flops=2.0 * m * n * k,
                       # int8 A and W, fp32 scales, fp16 C
                       min_bytes=float(m * k + n * k + 4 * (m + n) + 2 * m * n),
                       hardware=hardware, source_hash=self.source_hash)

    # ------------------------------------------------------------------ running
    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        d = problem.dims
        m, n, k = d["M"], d["N"], d["K"]
        if device == "meta":
            return (torch.empty(m, k, dtype=torch.int8, device="meta"),
                    torch.empty(n, k, dtype=torch.int8, device="meta"),
                    torch.empty(m, dtype=torch.float32, device="meta"),
                    torch.empty(n, dtype=torch.float32, device="meta"))
        g = self._generator(device, seed)
        a = torch.randint(-127, 128, (m, k), generator=g, device=device, dtype=torch.int8)
        w = torch.randint(-127, 128, (n, k), generator=g, device=device, dtype=torch.int8)
        # scales as symmetric quantisers would give them (absmax / 127), sized so C is O(1)
        a_scale = (0.5 + torch.rand(m, generator=g, device=device)) / 127.0
        w_scale = (0.5 + torch.rand(n, generator=g, device=device)) / (127.0 * k ** 0.5)
        return a, w, a_scale, w_scale

    def reference(self, inputs: tuple) -> torch.Tensor:
        a, w, a_scale, w_scale = inputs
        # exact in fp64 (int8 products summed over K stay far below 2^53)
        acc = a.double() @ w.double().t()
        return acc * a_scale.double()[:, None] * w_scale.double()[None, :]

    def alloc_output(self, problem: Problem, inputs: tuple) -> torch.Tensor:
        import torch
        a, w = inputs[0], inputs[1]
        return torch.empty(a.shape[0], w.shape[0], dtype=torch.float16, device=a.device)

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        a, w, a_scale, w_scale = inputs
        m, k = a.shape
        n = w.shape[0]
        bm, bn = config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"]
        grid = (cdiv(m, bm) * cdiv(n, bn),)
        _w8a8_scaled_mm[grid](a, w, a_scale, w_scale, out, m, n, k,
                              a.stride(0), a.stride(1), w.stride(0), w.stride(1), out.stride(0), out.stride(1),
                              BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=config["BLOCK_SIZE_K"],
                              GROUP_SIZE_M=config["GROUP_SIZE_M"],
                              num_warps=config["num_warps"], num_stages=config["num_stages"])

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        import torch
        a, w, a_scale, w_scale = inputs
        m, k = a.shape
        n = w.shape[0]
        if a.is_cuda and m > 16 and k % 8 == 0 and n % 8 == 0:
            acc = torch._int_mm(a, w.t()).float()  # cuBLASLt int8 GEMM (both operands K-major)
        else:  # what _int_mm refuses (few rows, odd sizes): an fp32 GEMM of the widened operands
            acc = a.float() @ w.float().t()
        torch.mul(acc * a_scale[:, None], w_scale[None, :], out=out)

    # ------------------------------------------------------------------ compiling
    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        m, n, k = (problem.dims[x] for x in "MNK")
        return {"a_ptr": "*i8", "w_ptr": "*i8", "a_scale_ptr": "*fp32", "w_scale_ptr": "*fp32", "c_ptr": "*fp16",
                "M": m, "N": n, "K": k,
                "stride_am": k, "stride_ak": 1, "stride_wn": k, "stride_wk": 1, "stride_cm": n, "stride_cn": 1,
                **{p: Constexpr(config[p]) for p in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M")}}
