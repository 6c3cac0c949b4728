"""Weight-only MXFP4 matmul: bf16 activations times E2M1 weights with E8M0 block scales.

The OCP Microscaling (MX) v1.0 MXFP4 format: each element is a 4-bit E2M1 float (1 sign, 2
exponent, 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives), and each block of 32
consecutive elements along K shares one 8-bit E8M0 scale, the power of two 2^(e - 127). As in
gpt-oss's MXFP4 checkpoints the weights keep the nn.Linear layout, W (N, K), and only the
weights are quantised (the activations stay bf16):

    W[n, k] = e2m1(code[n, k]) * 2^(scales[n, k // 32] - 127)      C = X @ W^T  (bf16 out, fp32 accumulate)

Packing (gpt-oss / OCP order): `w_packed` is (N, K // 2) uint8, byte (n, j) holds element
k = 2j in its low nibble and k = 2j + 1 in its high nibble; `w_scales` is (N, K // 32) uint8.
X is (M, K) bf16, C (M, N) bf16. K must be a multiple of the block (32); the block is a
property of the format, not tuned.

Style: triton_kernels-like names (BLOCK_M/N/K, SPLIT_K), one program per output tile on a
row-major tile order, split-K over *contiguous* runs of K tiles whose fp32 partials are added
with atomics into a zeroed workspace (rounded to bf16 by torch in `launch`, what the user
pays). The weight tile is decoded in registers by bit arithmetic, no lookup table: the three
magnitude bits of a code are moved into an fp16's exponent and mantissa (exponent bias 15, so
the code's value times 2^-14, the 0.5 code landing on an fp16 subnormal, which the fp16->fp32
conversion keeps exact); the 2^14 is folded into the block scale, which is built as an fp32
from its exponent bits (E8M0's 0 and 255, 2^-127 and NaN, read as 0 and inf; a quantiser
does not emit them and neither does `make_inputs`). Every decoded value is a power-of-two
multiple of a 2-bit significand, so the bf16 tile fed to `tl.dot` is exact.

`tl.dot_scaled` (Triton's MX dot) is not used: Hopper has no MX MMA instruction, so Triton can
only lower it by decomposing it into a dequantisation and a bf16 dot, and whether Triton 3.6
does that for a bf16 x e2m1 pair on sm_90 is not established (its fallback for 16-bit lhs
operands was reported broken in 3.6 on sm_120, triton-lang/triton#9558). This kernel needs
only the plain bf16 MMA.
"""
from __future__ import annotations

import math
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

MX_BLOCK = 32  # elements per E8M0 scale (OCP MX v1.0)
E8M0_BIAS = 127
# the 16 E2M1 values by code (sign bit 3), for the torch reference and baseline
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


@triton.jit(do_not_specialize=["M"])
def _mxfp4_weight_only_gemm(x_ptr, wq_ptr, ws_ptr, y_ptr,
                            M, N, K,
                            stride_xm, stride_xk, stride_wn, stride_wk, stride_sn, stride_sg,
                            stride_ym, stride_yn,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                            SPLIT_K: tl.constexpr, MX: tl.constexpr):
    tile = tl.program_id(0)
    split = tl.program_id(1)
    n_tiles_n = tl.cdiv(N, BLOCK_N)
    tile_m = tile // n_tiles_n
    tile_n = tile % n_tiles_n

    offs_m = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    offs_byte = tl.arange(0, BLOCK_K // 2)  # packed columns of one K tile
    offs_blk = tl.arange(0, BLOCK_K // MX)  # scale columns of one K tile
    m_ok = offs_m < M
    n_ok = offs_n < N

    # this split's contiguous run of K tiles
    k_tiles = tl.cdiv(K, BLOCK_K)
    per_split = tl.cdiv(k_tiles, SPLIT_K)
    kt_first = split * per_split
    kt_last = tl.minimum(kt_first + per_split, k_tiles)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(kt_first, kt_last):
        k0 = kt * BLOCK_K
        # K is a multiple of MX, not of BLOCK_K: mask the tail in whole bytes and blocks
        k_ok = (k0 + offs_k) < K
        byte_ok = (k0 // 2 + offs_byte) < K // 2
        blk_ok = (k0 // MX + offs_blk) < K // MX
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + (k0 + offs_k)[None, :] * stride_xk,
                    mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        packed = tl.load(wq_ptr + offs_n[:, None] * stride_wn + (k0 // 2 + offs_byte)[None, :] * stride_wk,
                         mask=n_ok[:, None] & byte_ok[None, :], other=0)
        e8m0 = tl.load(ws_ptr + offs_n[:, None] * stride_sn + (k0 // MX + offs_blk)[None, :] * stride_sg,
                       mask=n_ok[:, None] & blk_ok[None, :], other=127)
        # (BLOCK_N, BLOCK_K // 2) bytes -> (BLOCK_N, BLOCK_K) codes, element 2j + t from nibble t
        codes = tl.reshape(tl.join(packed & 0xF, packed >> 4), (BLOCK_N, BLOCK_K)).to(tl.uint16)
        # sign to bit 15, exponent and mantissa bits to fp16 bits 10..11 and 9: value * 2^-14
        half = (((codes & 8) << 12) | ((codes & 7) << 9)).to(tl.float16, bitcast=True)
        # 2^(e - 127) as fp32 exponent bits, times the 2^14 the fp16 placement took away
        scale = (e8m0.to(tl.int32) << 23).to(tl.float32, bitcast=True) * 16384.0
        w = tl.reshape(half.to(tl.float32), (BLOCK_N, BLOCK_K // MX, MX)) * scale[:, :, None]
        w = tl.reshape(w, (BLOCK_N, BLOCK_K)).to(tl.bfloat16)
        acc = tl.dot(x, tl.trans(w), acc)

    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
    y_ok = m_ok[:, None] & n_ok[None, :]
    if SPLIT_K == 1:
        tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=y_ok)
    else:  # fp32 workspace, zeroed by the launch; the splits meet here
        tl.atomic_add(y_ptrs, acc, mask=y_ok, sem="relaxed")


_SMEM_BYTES = 232448  # H100 opt-in shared memory per block


class MxFp4Matmul(KernelSpec):
    """zoo_mm_mxfp4: C = X @ dequant(w_packed, w_scales)^T, E2M1 weights in blocks of 32 along K."""

    origin = ("abductune zoo (ours), after the OCP Microscaling (MX) v1.0 MXFP4 format (Rouhani et al. "
              "2023, 'Microscaling Data Formats for Deep Learning'): E2M1 weights with one E8M0 scale "
              "per 32 along K, weight-only as in gpt-oss's MXFP4 checkpoints, dequantised in the K loop")
    name = "zoo_mm_mxfp4"
    kernel_class = "quantized_matmul"
    dims = ("M", "N", "K")
    dtype = "bf16"  # activations and output; the weights are packed E2M1 with E8M0 scales
    no_specialize = ("M",)
    block = MX_BLOCK

    @property
    def triton_fn(self) -> Any:
        return _mxfp4_weight_only_gemm

    # ------------------------------------------------------------------ tuning surface
    def space(self) -> Space:
        return Space(
            [Pow2("BLOCK_M", 16, 128, default=16), Pow2("BLOCK_N", 32, 256, default=128),
             Pow2("BLOCK_K", 32, 256, default=64), Choice("SPLIT_K", [1, 2, 4], default=1),
             Choice("num_warps", [4, 8], default=4), Choice("num_stages", [2, 3, 4], default=3)],
            constraints=[
                # pipelined buffers: the bf16 X tile, the packed weight tile (half a byte a code)
                # and its scale bytes; plus an allowance for a bf16 copy of the decoded tile
                # (the MMA reads its B operand from shared memory)
                f"num_stages * (BLOCK_M * BLOCK_K * 2 + BLOCK_N * BLOCK_K // 2 + BLOCK_N * BLOCK_K // MX)"
                f" + 2 * BLOCK_N * BLOCK_K <= {_SMEM_BYTES}",
                # fp32 accumulator per thread: at most 128, at least 8
                "BLOCK_M * BLOCK_N <= 128 * 32 * num_warps",
                "BLOCK_M * BLOCK_N >= 8 * 32 * num_warps",
                # the decode goes through fp32: at most 64 weight values a thread
                "BLOCK_N * BLOCK_K <= 64 * 32 * num_warps",
            ],
            constants={"MX": MX_BLOCK},
            name=self.name,
        )

    def fixed_configs(self) -> list[dict]:
        # what an MXFP4 weight-only author ships: skinny-M tiles with split-K for decode,
        # wider tiles without split for prefill
        rows = [(16, 64, 128, 4, 4, 3), (16, 128, 128, 2, 8, 3), (32, 64, 256, 2, 8, 2), (32, 128, 64, 1, 4, 4),
                (64, 128, 64, 1, 4, 3), (64, 64, 128, 1, 4, 3), (128, 128, 64, 1, 8, 3), (128, 64, 128, 1, 8, 3)]
        return [{"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "SPLIT_K": s, "num_warps": w, "num_stages": st}
                for m, n, k, s, w, st in rows]

    def default_config(self) -> dict:
        return {"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 1, "num_warps": 4, "num_stages": 3}

    def suite_shapes(self) -> list[dict[str, int]]:
        return [{"M": m, "N": n, "K": k} for m, n, k in [
            (1, 5760, 2880),        # decode, gpt-oss-120b expert gate/up (K = 90 MX blocks, not a power of two)
            (16, 14336, 4096),      # batched decode, Llama-3-8B gate/up
            (128, 2880, 2880),      # short prefill, gpt-oss expert down
            (2048, 5760, 2880),     # prefill, gpt-oss expert gate/up
            (4096, 4096, 4096),     # square, training-sized
        ]]

    # ------------------------------------------------------------------ problem
    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        m, n, k = d["M"], d["N"], d["K"]
        if k % MX_BLOCK:
            raise AbductuneError(f"{self.name}: K={k} must be a multiple of the MX block {MX_BLOCK}")
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"a": "bf16", "b": "e2m1", "b_scale": "e8m0", "c": "bf16"},
                       flops=2.0 * m * n * k,
                       # bf16 X, 4-bit codes, one scale byte per 32 weights, bf16 C
                       min_bytes=float(2 * m * k + n * k // 2 + n * (k // MX_BLOCK) + 2 * m * n),
                       hardware=hardware, source_hash=self.source_hash)

    # ------------------------------------------------------------------ running
    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        d = problem.dims
        m, n, k = d["M"], d["N"], d["K"]
        if device == "meta":
            return (torch.empty(m, k, dtype=torch.bfloat16, device="meta"),
                    torch.empty(n, k // 2, dtype=torch.uint8, device="meta"),
                    torch.empty(n, k // MX_BLOCK, dtype=torch.uint8, device="meta"))
        g = self._generator(device, seed)
        x = torch.randn(m, k, generator=g, device=device).to(torch.bfloat16)
        codes = torch.randint(0, 16, (n, k), generator=g, device=device, dtype=torch.int32)
        packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8)
        # uniform codes have rms ~2.9: exponents around -log2(2.9 sqrt(K)) keep W ~ 1/sqrt(K), C = O(1)
        centre = E8M0_BIAS - round(math.log2(2.93 * k ** 0.5))
        scales = torch.randint(centre - 1, centre + 2, (n, k // MX_BLOCK), generator=g, device=device,
                               dtype=torch.int32).to(torch.uint8)
        return x, packed, scales

    @staticmethod
    def _dequantize(packed: torch.Tensor, scales: torch.Tensor, dtype: Any) -> torch.Tensor:
        """W (N, K) in `dtype` from the packed codes and E8M0 scales (exact in fp32 and bf16)."""
        import torch
        n, kh = packed.shape
        p = packed.to(torch.int64)
        codes = torch.stack([p & 0xF, p >> 4], dim=-1).reshape(n, 2 * kh)  # element 2j + t
        table = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=packed.device)
        pow2 = torch.ldexp(torch.ones(scales.shape, device=packed.device), scales.to(torch.int32) - E8M0_BIAS)
        w = table[codes] * pow2.repeat_interleave(MX_BLOCK, dim=1)
        return w.to(dtype)

    def reference(self, inputs: tuple) -> torch.Tensor:
        import torch
        x, packed, scales = inputs
        return x.double() @ self._dequantize(packed, scales, torch.float32).double().t()

    def alloc_output(self, problem: Problem, inputs: tuple) -> torch.Tensor:
        import torch
        x, packed = inputs[0], inputs[1]
        return torch.empty(x.shape[0], packed.shape[0], dtype=torch.bfloat16, device=x.device)

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        import torch
        x, packed, scales = inputs
        m, k = x.shape
        n = packed.shape[0]
        bm, bn, split = config["BLOCK_M"], config["BLOCK_N"], config["SPLIT_K"]
        # split-K adds fp32 partials into a zeroed workspace, rounded to bf16 afterwards
        y = out if split == 1 else torch.zeros(m, n, dtype=torch.float32, device=out.device)
        grid = (cdiv(m, bm) * cdiv(n, bn), split)
        _mxfp4_weight_only_gemm[grid](x, packed, scales, y, m, n, k,
                                      x.stride(0), x.stride(1), packed.stride(0), packed.stride(1),
                                      scales.stride(0), scales.stride(1), y.stride(0), y.stride(1),
                                      BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=config["BLOCK_K"], SPLIT_K=split,
                                      MX=MX_BLOCK, num_warps=config["num_warps"], num_stages=config["num_stages"])
        if split > 1:
            out.copy_(y)

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        import torch
        x, packed, scales = inputs
        # without the kernel: dequantise the weights to bf16 on every call, then a dense GEMM
        torch.matmul(x, self._dequantize(packed, scales, torch.bfloat16).t(), out=out)

    # ------------------------------------------------------------------ compiling
    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        m, n, k = (problem.dims[x] for x in "MNK")
        split = config["SPLIT_K"]
        return {"x_ptr": "*bf16", "wq_ptr": "*u8", "ws_ptr": "*u8", "y_ptr": "*bf16" if split == 1 else "*fp32",
                "M": m, "N": n, "K": k,
                "stride_xm": k, "stride_xk": 1, "stride_wn": k // 2, "stride_wk": 1,
                "stride_sn": k // MX_BLOCK, "stride_sg": 1, "stride_ym": n, "stride_yn": 1,
                **{p: Constexpr(config[p]) for p in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K")},
                "MX": Constexpr(MX_BLOCK)}
