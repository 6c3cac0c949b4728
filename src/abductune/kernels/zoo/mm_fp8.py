"""Y = (sx * X) @ (sw * W)^T with fp8 e4m3 inputs, per-tensor scales, bf16 output.

X is (M, K) fp8 row-major activations, W an (N, K) fp8 row-major weight (the layout a linear
layer stores, and the K-major operand Hopper's fp8 tensor cores want for both sides); sx and
sw are fp32 scalars held in one-element tensors and read by the kernel (so the same binary
serves every scale, as in dynamic per-tensor quantisation). The grid is 2-D, tile columns
fastest: (N tiles, M tiles), no grouping. Tiles accumulate in fp32 through tl.dot (on sm_90
Triton lets the tensor cores accumulate fp8 products at their fast, reduced precision, as
cuBLAS's fast-accumulation mode does); both scales are applied once in the epilogue.
Edges use masks on M, N and the K tail.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import triton
import triton.language as tl

from ...hardware import HardwareInfo
from ...problem import Problem
from ...space import Choice, Pow2, Space
from ..base import Constexpr, KernelSpec, cdiv, launch_options

if TYPE_CHECKING:
    import torch

E4M3_MAX = 448.0
TOLERANCE = 2e-2  # bf16 output (base.TOLERANCE knows no fp8): ~2^-8 rounding plus fp8 accumulation order


@triton.jit
def fp8_scaled_mm_kernel(x_ptr, w_ptr, y_ptr, x_scale_ptr, w_scale_ptr, M, N, K,
                         stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn,
                         TILE_M: tl.constexpr, TILE_N: tl.constexpr, TILE_K: tl.constexpr):
    pn = tl.program_id(0)
    pm = tl.program_id(1)
    rm = pm * TILE_M + tl.arange(0, TILE_M)
    rn = pn * TILE_N + tl.arange(0, TILE_N)
    rk = tl.arange(0, TILE_K)
    in_m = rm < M
    in_n = rn < N
    xp = x_ptr + rm[:, None] * stride_xm + rk[None, :] * stride_xk
    wp = w_ptr + rn[:, None] * stride_wn + rk[None, :] * stride_wk  # a (TILE_N, TILE_K) slab of W

    acc = tl.zeros((TILE_M, TILE_N), dtype=tl.float32)
    for k0 in range(0, K, TILE_K):
        in_k = rk[None, :] < K - k0
        x = tl.load(xp, mask=in_m[:, None] & in_k, other=0.0)
        w = tl.load(wp, mask=in_n[:, None] & in_k, other=0.0)
        acc = tl.dot(x, tl.trans(w), acc)
        xp += TILE_K * stride_xk
        wp += TILE_K * stride_wk

    scale = tl.load(x_scale_ptr) * tl.load(w_scale_ptr)
    yp = y_ptr + rm[:, None] * stride_ym + rn[None, :] * stride_yn
    tl.store(yp, (acc * scale).to(tl.bfloat16), mask=in_m[:, None] & in_n[None, :])


SMEM_BYTES = 232448  # H100 per-block opt-in shared memory


class Fp8Matmul(KernelSpec):
    origin = ("abductune zoo (ours), after per-tensor-scaled FP8 GEMM (Micikevicius et al. 2022, "
              "'FP8 Formats for Deep Learning'; Hopper fp8 wgmma)")
    name = "zoo_mm_fp8"
    kernel_class = "matmul"
    dims = ("M", "N", "K")
    dtype = "fp8"  # the inputs' type; the output is bf16 (see check, alloc_output)

    @property
    def triton_fn(self) -> Any:
        return fp8_scaled_mm_kernel

    def space(self) -> Space:
        return Space(
            [Pow2("TILE_M", 16, 256, default=128), Pow2("TILE_N", 32, 256, default=128),
             Pow2("TILE_K", 64, 256, default=128),
             Choice("num_warps", [4, 8], default=8), Choice("num_stages", [2, 3, 4, 5], default=3)],
            constraints=[
                # 1-byte operands: A and B tiles of every stage
                f"num_stages * (TILE_M + TILE_N) * TILE_K <= {SMEM_BYTES}",
                "TILE_M * TILE_N <= 128 * 32 * num_warps",  # fp32 accumulator fits in registers
                "TILE_M * TILE_N >= 16 * 32 * num_warps",
            ],
            name=self.name,
        )

    def fixed_configs(self) -> list[dict]:
        rows = [(128, 256, 128, 8, 3), (256, 128, 128, 8, 3), (128, 128, 128, 8, 4), (128, 128, 256, 8, 3),
                (64, 256, 128, 4, 4), (128, 64, 128, 4, 4), (64, 128, 256, 4, 3), (64, 64, 256, 4, 4),
                (32, 128, 256, 4, 4), (16, 128, 256, 4, 5)]
        return [{"TILE_M": m, "TILE_N": n, "TILE_K": k, "num_warps": w, "num_stages": s} for m, n, k, w, s in rows]

    def default_config(self) -> dict:
        return {"TILE_M": 128, "TILE_N": 128, "TILE_K": 128, "num_warps": 8, "num_stages": 3}

    def suite_shapes(self) -> list[dict[str, int]]:
        shapes = [(16, 14336, 4096),    # decode through an up/gate projection: weight-read bound
                  (128, 4096, 4096),    # decode batch
                  (2048, 8192, 4096),   # prefill
                  (4096, 4096, 14336),  # prefill through a down projection, long K
                  (1000, 3008, 2000)]   # awkward: non-power-of-two everywhere, N off the 128-tile grid
        return [{"M": m, "N": n, "K": k} for m, n, k in shapes]

    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        m, n, k = d["M"], d["N"], d["K"]
        # fp8 operands read once (1 byte), two fp32 scales, the bf16 output written once
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"x": "fp8", "w": "fp8", "x_scale": "fp32", "w_scale": "fp32", "y": "bf16"},
                       flops=2.0 * m * n * k, min_bytes=1.0 * (m * k + n * k) + 2.0 * m * n + 8.0,
                       hardware=hardware, source_hash=self.source_hash)

    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        d, g = problem.dims, self._generator(device, seed)
        x = torch.randn(d["M"], d["K"], generator=g, device=device)
        w = torch.randn(d["N"], d["K"], generator=g, device=device) / d["K"] ** 0.5
        # per-tensor scales from each tensor's absolute maximum (tensor ops only: meta-safe)
        sx = (x.abs().amax() / E4M3_MAX).to(torch.float32).reshape(())
        sw = (w.abs().amax() / E4M3_MAX).to(torch.float32).reshape(())
        return (x / sx).to(torch.float8_e4m3fn), (w / sw).to(torch.float8_e4m3fn), sx, sw

    def reference(self, inputs: tuple) -> torch.Tensor:
        x, w, sx, sw = inputs
        return (x.float() * sx) @ (w.float() * sw).t()

    def alloc_output(self, problem: Problem, inputs: tuple) -> torch.Tensor:
        import torch
        x, w = inputs[0], inputs[1]
        return torch.empty(x.shape[0], w.shape[0], dtype=torch.bfloat16, device=x.device)

    def check(self, out: Any, ref: Any) -> tuple[bool, float]:
        import torch
        if tuple(out.shape) != tuple(ref.shape):
            return False, math.inf
        o, r = out.detach().to(torch.float64), ref.detach().to(torch.float64)
        if not bool(torch.isfinite(o).all()):
            return False, math.inf
        denom = float(torch.linalg.vector_norm(r))
        num = float(torch.linalg.vector_norm(o - r))
        rel = num / denom if denom > 0 else num
        return (math.isfinite(rel) and rel <= TOLERANCE), rel

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        x, w, sx, sw = inputs
        (m, k), n = x.shape, w.shape[0]
        meta, opts = launch_options(config)
        grid = (cdiv(n, meta["TILE_N"]), cdiv(m, meta["TILE_M"]))
        fp8_scaled_mm_kernel[grid](x, w, out, sx, sw, m, n, k, x.stride(0), x.stride(1), w.stride(0), w.stride(1),
                                   out.stride(0), out.stride(1), **meta, **opts)

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        import torch
        x, w, sx, sw = inputs
        k, n = x.shape[1], w.shape[0]
        if hasattr(torch, "_scaled_mm") and k % 16 == 0 and n % 16 == 0:
            # cuBLASLt fp8: row-major X, column-major W^T (a view of the (N, K) weight), fast
            # accumulation like the kernel's tl.dot on sm_90
            torch._scaled_mm(x, w.t(), sx, sw, out_dtype=torch.bfloat16, use_fast_accum=True, out=out)
        else:  # shapes cuBLASLt's fp8 path refuses: upcast (exact for e4m3), bf16 GEMM, scale
            torch.matmul(x.to(torch.bfloat16), w.to(torch.bfloat16).t(), out=out)
            out.mul_(sx * sw)

    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        m, n, k = (problem.dims[x] for x in "MNK")
        return {"x_ptr": "*fp8e4nv", "w_ptr": "*fp8e4nv", "y_ptr": "*bf16", "x_scale_ptr": "*fp32",
                "w_scale_ptr": "*fp32", "M": m, "N": n, "K": k,
                "stride_xm": k, "stride_xk": 1, "stride_wn": k, "stride_wk": 1, "stride_ym": n, "stride_yn": 1,
                **{p: Constexpr(config[p]) for p in ("TILE_M", "TILE_N", "TILE_K")}}
