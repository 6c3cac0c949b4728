"""bf16 x int16 matmul: bf16 activations times int16 weights, converted to bf16 in the K loop.

The "int16" class of the observed-heuristics seed (Helion's `matmul_int16`) is this kernel:
Helion tells it by its second operand being int16, and its example and the TritonBench
operator it mirrors (`bf16xint16_gemm`, "a stepping stone to a fast int4_gemm") compute

    C = bf16( X @ bf16(W) )       X (M, K) bf16, W (K, N) int16, fp32 accumulation

with no scales: each int16 weight is rounded to bf16 (8 significant bits, so magnitudes above
256 lose their low bits, exactly as the published references do) and fed to the bf16 MMA.

Hopper has no 16-bit integer MMA (wgmma takes s8/u8 integers only), so the int16 tile costs a
conversion per element on top of a bf16 GEMM and saves no bytes (int16 is as wide as bf16);
the converted tile, being the MMA's B operand, goes back through shared memory each K step.
In the TritonBench table of pytorch/helion#794 (GPU not stated) TritonBench's Triton kernel
runs at 0.84x the speed of its bf16 x bf16 baseline at M, N, K = 65536, 1280, 8192. It is in
the zoo as the published workload that class names, not as a fast way to multiply.

Style: TILE_M/N/K names, a 2-D launch grid remapped by `tl.swizzle2d` into bands of GROUP_M
tile-rows (GROUP_M = 1 is the plain row-major order), masked M/N edges, and an EVEN_K flag
derived from the shape (not tuned) that drops the K mask when TILE_K divides K.
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
def _bf16_x_int16_gemm(x_ptr, w_ptr, y_ptr,
                       M, N, K,
                       stride_xm, stride_xk, stride_wk, stride_wn, stride_ym, stride_yn,
                       TILE_M: tl.constexpr, TILE_N: tl.constexpr, TILE_K: tl.constexpr,
                       GROUP_M: tl.constexpr, EVEN_K: tl.constexpr):
    pid_m, pid_n = tl.swizzle2d(tl.program_id(0), tl.program_id(1), tl.num_programs(0), tl.num_programs(1),
                                GROUP_M)
    rows = pid_m * TILE_M + tl.arange(0, TILE_M)
    cols = pid_n * TILE_N + tl.arange(0, TILE_N)
    ks = tl.arange(0, TILE_K)
    row_ok = rows < M
    col_ok = cols < N
    x_ptrs = x_ptr + rows[:, None] * stride_xm + ks[None, :] * stride_xk
    w_ptrs = w_ptr + ks[:, None] * stride_wk + cols[None, :] * stride_wn

    acc = tl.zeros((TILE_M, TILE_N), dtype=tl.float32)
    for k0 in range(0, K, TILE_K):
        if EVEN_K:
            x = tl.load(x_ptrs, mask=row_ok[:, None], other=0.0)
            w = tl.load(w_ptrs, mask=col_ok[None, :], other=0)
        else:
            k_ok = (k0 + ks) < K
            x = tl.load(x_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
            w = tl.load(w_ptrs, mask=k_ok[:, None] & col_ok[None, :], other=0)
        # no int16 MMA: round the weights to bf16 (as the published kernels do) and use the bf16 one
        acc = tl.dot(x, w.to(tl.bfloat16), acc)
        x_ptrs += TILE_K * stride_xk
        w_ptrs += TILE_K * stride_wk

    y_ptrs = y_ptr + rows[:, None] * stride_ym + cols[None, :] * stride_yn
    tl.store(y_ptrs, acc.to(tl.bfloat16), mask=row_ok[:, None] & col_ok[None, :])


_SMEM_BYTES = 232448  # H100 opt-in shared memory per block


class Bf16Int16Matmul(KernelSpec):
    """zoo_mm_bf16_int16: C = X @ bf16(W), X bf16 (M, K), W int16 (K, N), bf16 out."""

    origin = ("abductune zoo (ours), after TritonBench's bf16xint16_gemm operator (pytorch/benchmark) and "
              "Helion's bf16xint16_gemm example, the matmul_int16 class of Helion's observed heuristics: "
              "int16 weights rounded to bf16 in the K loop, fp32 accumulation")
    name = "zoo_mm_bf16_int16"
    kernel_class = "quantized_matmul"
    dims = ("M", "N", "K")
    dtype = "bf16"  # activations and output; the weights are int16
    no_specialize = ("M",)

    @property
    def triton_fn(self) -> Any:
        return _bf16_x_int16_gemm

    # ------------------------------------------------------------------ tuning surface
    def space(self) -> Space:
        return Space(
            [Pow2("TILE_M", 16, 256, default=128), Pow2("TILE_N", 32, 256, default=128),
             Pow2("TILE_K", 32, 128, default=64), Choice("GROUP_M", [1, 8], default=8),
             Choice("num_warps", [4, 8], default=8), Choice("num_stages", [2, 3, 4, 5], default=3)],
            constraints=[
                # pipelined bf16 X and int16 W tiles (two bytes each), plus an allowance for
                # the converted bf16 W tile (the MMA reads its B operand from shared memory)
                f"num_stages * (TILE_M + TILE_N) * TILE_K * 2 + 2 * TILE_K * TILE_N <= {_SMEM_BYTES}",
                # fp32 accumulator per thread: at most 128, at least 8
                "TILE_M * TILE_N <= 128 * 32 * num_warps",
                "TILE_M * TILE_N >= 8 * 32 * num_warps",
                # the int16 -> bf16 conversion holds the W tile in registers: at most 64 a thread
                "TILE_K * TILE_N <= 64 * 32 * num_warps",
            ],
            name=self.name,
        )

    def fixed_configs(self) -> list[dict]:
        # an @triton.autotune list in the tutorial's manner, which TritonBench's kernel keeps
        rows = [(128, 256, 64, 8, 8, 3), (64, 256, 32, 8, 4, 4), (128, 128, 32, 8, 4, 4), (128, 64, 32, 8, 4, 4),
                (64, 128, 32, 8, 4, 4), (128, 32, 32, 8, 4, 4), (64, 32, 32, 8, 4, 5), (32, 64, 32, 8, 4, 5)]
        return [{"TILE_M": m, "TILE_N": n, "TILE_K": k, "GROUP_M": g, "num_warps": w, "num_stages": s}
                for m, n, k, g, w, s in rows]

    def default_config(self) -> dict:
        return {"TILE_M": 128, "TILE_N": 128, "TILE_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3}

    def suite_shapes(self) -> list[dict[str, int]]:
        # TritonBench's shapes: Llama-2-70B with 8-way tensor parallelism, (K, N) of
        # attn.wqkv (8192, 1280), attn.w0 (1024, 8192), ffn.w13 (8192, 7168), ffn.w2 (3584, 8192)
        return [{"M": m, "N": n, "K": k} for m, n, k in [
            (1, 1280, 8192),        # decode through wqkv
            (16, 7168, 8192),       # batched decode through w13
            (256, 8192, 3584),      # short prefill through w2 (K = 2^9 * 7)
            (3000, 8192, 1024),     # ragged token count through w0
            (65536, 1280, 8192),    # TritonBench's default shape (wqkv, 2^16 tokens)
        ]]

    # ------------------------------------------------------------------ problem
    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        m, n, k = d["M"], d["N"], d["K"]
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"a": "bf16", "b": "int16", "c": "bf16"},
                       flops=2.0 * m * n * k,
                       min_bytes=float(2 * (m * k + k * n + m * n)),  # every tensor two bytes an element
                       hardware=hardware, source_hash=self.source_hash)

    # ------------------------------------------------------------------ running
    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        d = problem.dims
        m, n, k = d["M"], d["N"], d["K"]
        if device == "meta":
            return (torch.empty(m, k, dtype=torch.bfloat16, device="meta"),
                    torch.empty(k, n, dtype=torch.int16, device="meta"))
        g = self._generator(device, seed)
        # TritonBench's inputs: standard normal activations, int16 weights over the whole range
        x = torch.randn(m, k, generator=g, device=device).to(torch.bfloat16)
        w = torch.randint(-(2**15), 2**15 - 1, (k, n), generator=g, device=device, dtype=torch.int16)
        return x, w

    def reference(self, inputs: tuple) -> torch.Tensor:
        import torch
        x, w = inputs
        return x.double() @ w.to(torch.bfloat16).double()

    def alloc_output(self, problem: Problem, inputs: tuple) -> torch.Tensor:
        import torch
        x, w = inputs
        return torch.empty(x.shape[0], w.shape[1], dtype=torch.bfloat16, device=x.device)

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        x, w = inputs
        m, k = x.shape
        n = w.shape[1]
        tm, tn, tk = config["TILE_M"], config["TILE_N"], config["TILE_K"]
        grid = (cdiv(m, tm), cdiv(n, tn))
        _bf16_x_int16_gemm[grid](x, w, out, m, n, k,
                                 x.stride(0), x.stride(1), w.stride(0), w.stride(1), out.stride(0), out.stride(1),
                                 TILE_M=tm, TILE_N=tn, TILE_K=tk, GROUP_M=config["GROUP_M"], EVEN_K=k % tk == 0,
                                 num_warps=config["num_warps"], num_stages=config["num_stages"])

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        import torch
        x, w = inputs
        # TritonBench's "casted" way: convert the weights to bf16 on every call, then a bf16 GEMM
        torch.matmul(x, w.to(torch.bfloat16), out=out)

    # ------------------------------------------------------------------ compiling
    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        m, n, k = (problem.dims[x] for x in "MNK")
        return {"x_ptr": "*bf16", "w_ptr": "*i16", "y_ptr": "*bf16",
                "M": m, "N": n, "K": k,
                "stride_xm": k, "stride_xk": 1, "stride_wk": n, "stride_wn": 1, "stride_ym": n, "stride_yn": 1,
                **{p: Constexpr(config[p]) for p in ("TILE_M", "TILE_N", "TILE_K", "GROUP_M")},
                "EVEN_K": Constexpr(k % config["TILE_K"] == 0)}
