"""Weight-only int4 matmul (W4A16): fp16 activations times group-quantised 4-bit weights.

The AWQ / GPTQ serving pattern. Weights W (K, N) are stored as unsigned 4-bit codes q in
[0, 15], symmetric around 8, with one fp16 scale per group of 128 consecutive K rows and
output column:

    W[k, n] = (q[k, n] - 8) * scales[k // 128, n]          C = X @ W   (fp16 out, fp32 accumulate)

Packing (our choice): 8 codes per int32 word along K, GPTQ-style, `qweight` is (K // 8, N)
int32 and word (r, n) holds rows 8r .. 8r+7 of column n, row 8r + j in bits 4j .. 4j+3.
`scales` is (K // 128, N) fp16. X is (M, K) fp16, C (M, N) fp16. The group size is a property
of the checkpoint, not tuned; K must be a multiple of it.

Style: short tile names (BM, BN, BK), a 3-D grid (N tiles, M tiles, K splits) with no tile
swizzle, dequantisation inside the K loop from a packed (BK // 8, BN) tile that is widened by
broadcasting shifts and reshaping (no redundant loads of the same word), and split-K over
interleaved K tiles whose fp32 partials are summed by torch in `launch` (what the user pays).
A K tile either lies inside one quantisation group (BK <= 128: one scale row per tile) or
spans whole groups (BK > 128: one scale row per group, and the K tail masked).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import triton
import triton.language as tl

from ...errors import AbductuneError
from ...hardware import HardwareInfo
from ...problem import Problem
from ...space import Choice, Pow2, Space
from ..base import Constexpr, KernelSpec, cdiv

if TYPE_CHECKING:
    import torch

QUANT_GROUP = 128  # K rows per fp16 scale (AWQ/GPTQ default)
PACK = 8  # int4 codes per int32 word


@triton.jit(do_not_specialize=["M"])
def _w4a16_gemm(x_ptr, qw_ptr, scales_ptr, y_ptr,
                M, N, K,
                stride_xm, stride_xk, stride_qk, stride_qn, stride_sg, stride_sn,
                stride_ys, stride_ym, stride_yn,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SPLIT_K: tl.constexpr,
                QGROUP: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_k = tl.program_id(2)

    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    rw = tl.arange(0, BK // 8)  # packed rows of one K tile
    m_in = rm < M
    n_in = rn < N
    nibble_shift = tl.arange(0, 8) * 4

    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kt in range(pid_k, tl.cdiv(K, BK), SPLIT_K):
        k0 = kt * BK
        x_ptrs = x_ptr + rm[:, None] * stride_xm + (k0 + rk)[None, :] * stride_xk
        q_ptrs = qw_ptr + (k0 // 8 + rw)[:, None] * stride_qk + rn[None, :] * stride_qn
        if BK <= QGROUP:
            # the whole tile lies in group k0 // QGROUP: one row of scales
            x = tl.load(x_ptrs, mask=m_in[:, None], other=0.0)
            q = tl.load(q_ptrs, mask=n_in[None, :], other=0)
            s = tl.load(scales_ptr + (k0 // QGROUP) * stride_sg + rn * stride_sn, mask=n_in, other=0.0)[None, :]
        else:
            # the tile spans BK // QGROUP groups; K need only be a multiple of QGROUP, so mask the tail
            k_in = (k0 + rk) < K
            x = tl.load(x_ptrs, mask=m_in[:, None] & k_in[None, :], other=0.0)
            q = tl.load(q_ptrs, mask=((k0 // 8 + rw) < K // 8)[:, None] & n_in[None, :], other=0)
            g = k0 // QGROUP + tl.arange(0, BK // QGROUP)
            s = tl.load(scales_ptr + g[:, None] * stride_sg + rn[None, :] * stride_sn,
                        mask=(g < K // QGROUP)[:, None] & n_in[None, :], other=0.0)
        # (BK//8, BN) words -> (BK//8, 8, BN) codes -> (BK, BN), row 8r + j from bits 4j..4j+3
        codes = (q[:, None, :] >> nibble_shift[None, :, None]) & 0xF
        w = tl.reshape(codes, (BK, BN)).to(tl.float16) - 8.0
        if BK <= QGROUP:
            w = w * s
        else:  # one scale row per group of QGROUP rows
            w = tl.reshape(tl.reshape(w, (BK // QGROUP, QGROUP, BN)) * s[:, None, :], (BK, BN))
        acc = tl.dot(x, w, acc)

    y_ptrs = y_ptr + pid_k * stride_ys + rm[:, None] * stride_ym + rn[None, :] * stride_yn
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_in[:, None] & n_in[None, :])


_SMEM_BYTES = 232448  # H100 opt-in shared memory per block


class W4A16Matmul(KernelSpec):
    """zoo_mm_w4a16: C = X @ dequant(qweight, scales), int4 weights in groups of 128 along K."""

    origin = ("abductune zoo (ours), after AWQ (Lin et al. 2024) / GPTQ (Frantar et al. 2023) "
              "weight-only int4 GEMM with group-wise scales, dequantised in the K loop")
    name = "zoo_mm_w4a16"
    kernel_class = "quantized_matmul"
    dims = ("M", "N", "K")
    dtype = "fp16"  # activations and output; the weights are packed uint4
    no_specialize = ("M",)
    group_size = QUANT_GROUP

    @property
    def triton_fn(self) -> Any:
        return _w4a16_gemm

    # ------------------------------------------------------------------ tuning surface
    def space(self) -> Space:
        return Space(
            [Pow2("BM", 16, 128, default=16), Pow2("BN", 32, 256, default=128), Pow2("BK", 32, 256, default=64),
             Choice("SPLIT_K", [1, 2, 4], default=1), Choice("num_warps", [4, 8], default=4),
             Choice("num_stages", [2, 3, 4], default=3)],
            constraints=[
                # a K tile lies inside one quantisation group or covers whole groups
                "BK % QGROUP == 0 or QGROUP % BK == 0",
                # pipelined buffers: the fp16 X tile, the packed weight tile (half a byte per code)
                # and the fp16 scale rows of the groups the tile covers
                f"num_stages * (BM * BK * 2 + BK * BN // 2 + 2 * BN * max(1, BK // QGROUP)) <= {_SMEM_BYTES}",
                # fp32 accumulator per thread: at most 128, at least 8
                "BM * BN <= 128 * 32 * num_warps",
                "BM * BN >= 8 * 32 * num_warps",
                # the dequantised fp16 weight tile lives in registers too: at most 64 codes a thread
                "BK * BN <= 64 * 32 * num_warps",
            ],
            constants={"QGROUP": QUANT_GROUP},
            name=self.name,
        )

    def fixed_configs(self) -> list[dict]:
        # what an AWQ/GPTQ Triton author ships: skinny-M tiles with split-K for decode,
        # square-ish tiles for prefill
        rows = [(16, 64, 128, 4, 4, 3), (16, 128, 64, 2, 4, 3), (16, 64, 64, 4, 4, 4), (32, 64, 128, 2, 4, 3),
                (32, 128, 64, 1, 4, 4), (64, 128, 64, 1, 4, 3), (64, 64, 128, 1, 4, 3), (128, 128, 64, 1, 8, 3),
                (128, 64, 128, 1, 8, 3), (64, 256, 32, 1, 8, 4)]
        return [{"BM": m, "BN": n, "BK": k, "SPLIT_K": sk, "num_warps": w, "num_stages": s}
                for m, n, k, sk, w, s in rows]

    def default_config(self) -> dict:
        return {"BM": 16, "BN": 128, "BK": 64, "SPLIT_K": 1, "num_warps": 4, "num_stages": 3}

    def suite_shapes(self) -> list[dict[str, int]]:
        return [{"M": m, "N": n, "K": k} for m, n, k in [
            (1, 4096, 4096),        # single-token decode, attention output projection
            (16, 14336, 4096),      # batched decode, Llama-3-8B gate/up
            (64, 4096, 14336),      # batched decode, Llama-3-8B down
            (512, 18944, 3584),     # short prefill, Qwen2-7B up (N = 2^8 * 74, K = 28 groups)
            (2048, 6144, 4096),     # prefill, Llama-3-8B fused qkv
        ]]

    # ------------------------------------------------------------------ problem
    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        m, n, k = d["M"], d["N"], d["K"]
        if k % QUANT_GROUP:
            raise AbductuneError(f"{self.name}: K={k} must be a multiple of the quantisation group {QUANT_GROUP}")
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"a": "fp16", "b": "uint4", "b_scale": "fp16", "c": "fp16"},
                       flops=2.0 * m * n * k,
                       # fp16 X, 4-bit codes, one fp16 scale per group and column, fp16 C
                       min_bytes=float(2 * m * k + k * n // 2 + 2 * (k // QUANT_GROUP) * n + 2 * m * n),
                       hardware=hardware, source_hash=self.source_hash)

    # ------------------------------------------------------------------ running
    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        d = problem.dims
        m, n, k = d["M"], d["N"], d["K"]
        if device == "meta":
            return (torch.empty(m, k, dtype=torch.float16, device="meta"),
                    torch.empty(k // PACK, n, dtype=torch.int32, device="meta"),
                    torch.empty(k // QUANT_GROUP, n, dtype=torch.float16, device="meta"))
        g = self._generator(device, seed)
        x = torch.randn(m, k, generator=g, device=device).to(torch.float16)
        codes = torch.randint(0, 16, (k // PACK, PACK, n), generator=g, device=device, dtype=torch.int64)
        shifts = (torch.arange(PACK, device=device, dtype=torch.int64) * 4)[None, :, None]
        words = (codes << shifts).sum(dim=1)  # 0 .. 2^32 - 1
        qweight = torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)
        # codes - 8 have variance ~21: scales ~ 1 / (4.6 sqrt(K)) keep W ~ N(0, 1/K), C = O(1)
        scales = ((0.5 + torch.rand(k // QUANT_GROUP, n, generator=g, device=device)) / (4.6 * k ** 0.5)
                  ).to(torch.float16)
        return x, qweight, scales

    @staticmethod
    def _dequantize(qweight: torch.Tensor, scales: torch.Tensor, dtype: Any) -> torch.Tensor:
        import torch
        kp, n = qweight.shape
        shifts = torch.arange(0, 4 * PACK, 4, device=qweight.device, dtype=torch.int32)
        codes = (qweight[:, None, :] >> shifts[None, :, None]) & 0xF  # (K/8, 8, N)
        w = codes.reshape(kp * PACK, n).to(dtype) - 8
        group = (kp * PACK) // scales.shape[0]
        return w * scales.to(dtype).repeat_interleave(group, dim=0)

    def reference(self, inputs: tuple) -> torch.Tensor:
        import torch
        x, qweight, scales = inputs
        return x.float() @ self._dequantize(qweight, scales, torch.float32)

    def alloc_output(self, problem: Problem, inputs: tuple) -> torch.Tensor:
        import torch
        x, qweight = inputs[0], inputs[1]
        return torch.empty(x.shape[0], qweight.shape[1], dtype=torch.float16, device=x.device)

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        import torch
        x, qweight, scales = inputs
        m, k = x.shape
        n = qweight.shape[1]
        bm, bn, bk, split = config["BM"], config["BN"], config["BK"], config["SPLIT_K"]
        qgroup = k // scales.shape[0]
        # split-K writes fp32 partials, one (M, N) slab per split, summed afterwards
        y = out if split == 1 else torch.empty(split, m, n, dtype=torch.float32, device=out.device)
        ys = (0, y.stride(0), y.stride(1)) if split == 1 else (y.stride(0), y.stride(1), y.stride(2))
        grid = (cdiv(n, bn), cdiv(m, bm), split)
        _w4a16_gemm[grid](x, qweight, scales, y, m, n, k,
                          x.stride(0), x.stride(1), qweight.stride(0), qweight.stride(1),
                          scales.stride(0), scales.stride(1), *ys,
                          BM=bm, BN=bn, BK=bk, SPLIT_K=split, QGROUP=qgroup,
                          num_warps=config["num_warps"], num_stages=config["num_stages"])
        if split > 1:
            out.copy_(y.sum(dim=0))

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        import torch
        x, qweight, scales = inputs
        # without the kernel: dequantise the weights to fp16 on every call, then a dense GEMM
        torch.matmul(x, self._dequantize(qweight, scales, torch.float16), out=out)

    # ------------------------------------------------------------------ compiling
    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        m, n, k = (problem.dims[x] for x in "MNK")
        split = config["SPLIT_K"]
        return {"x_ptr": "*fp16", "qw_ptr": "*i32", "scales_ptr": "*fp16", "y_ptr": "*fp16" if split == 1 else "*fp32",
                "M": m, "N": n, "K": k,
                "stride_xm": k, "stride_xk": 1, "stride_qk": n, "stride_qn": 1, "stride_sg": n, "stride_sn": 1,
                "stride_ys": 0 if split == 1 else m * n, "stride_ym": n, "stride_yn": 1,
                **{p: Constexpr(config[p]) for p in ("BM", "BN", "BK", "SPLIT_K")},
                "QGROUP": Constexpr(QUANT_GROUP)}
