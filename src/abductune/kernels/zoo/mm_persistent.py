"""C = A @ B in fp16 with a persistent grid: one program per SM, each walking many tiles.

A is (M, K), B is (K, N), both row-major; C is (M, N) fp16, fp32 accumulation. The grid is
min(NUM_SMS, number of output tiles) programs; program p computes tiles p, p + NUM_SMS,
p + 2 NUM_SMS, ... so launch overhead and tail waves are paid once, not per tile. A tile id
is turned into (tile row, tile col) through bands of GROUP_SIZE tile-rows (down the band first), so
the programs that are live at one moment share A and B panels in L2. NUM_SMS is the device's
multiprocessor count read at launch (a compile-time constant, not tuned; 132 on an H100 SXM).
Edges use masks on M, N and the K tail.
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

H100_SMS = 132  # what compile-only launches (no GPU to ask) and CPU runs use
_SMS: dict = {}  # torch device -> multiprocessor count


@triton.jit
def persistent_mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                         stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_SIZE: tl.constexpr,
                         NUM_SMS: tl.constexpr):
    n_rows = tl.cdiv(M, BM)
    n_cols = tl.cdiv(N, BN)
    n_tiles = n_rows * n_cols
    n_k = tl.cdiv(K, BK)
    band = GROUP_SIZE * n_cols  # tiles in one band of GROUP_SIZE tile-rows
    i = tl.arange(0, BM)
    j = tl.arange(0, BN)
    kk = tl.arange(0, BK)

    for t in range(tl.program_id(0), n_tiles, NUM_SMS):
        band_start = (t // band) * GROUP_SIZE
        band_rows = tl.minimum(n_rows - band_start, GROUP_SIZE)
        r = band_start + (t % band) % band_rows
        q = (t % band) // band_rows

        rows = r * BM + i
        cols = q * BN + j
        row_ok = rows < M
        col_ok = cols < N
        pa = a_ptr + rows[:, None].to(tl.int64) * stride_am + kk[None, :] * stride_ak
        pb = b_ptr + kk[:, None] * stride_bk + cols[None, :] * stride_bn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for s in range(n_k):
            k_ok = kk < K - s * BK
            a = tl.load(pa, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
            b = tl.load(pb, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
            acc = tl.dot(a, b, acc)
            pa += BK * stride_ak
            pb += BK * stride_bk
        pc = c_ptr + rows[:, None].to(tl.int64) * stride_cm + cols[None, :] * stride_cn
        tl.store(pc, acc.to(tl.float16), mask=row_ok[:, None] & col_ok[None, :])


SMEM_BYTES = 232448  # H100 per-block opt-in shared memory


class PersistentMatmulFp16(KernelSpec):
    origin = ("abductune zoo (ours), after persistent-CTA (stream-style, one CTA per SM) GEMM "
              "scheduling as in CUTLASS's persistent tile schedulers and Triton's persistent matmul")
    name = "zoo_mm_persistent_fp16"
    kernel_class = "matmul"
    dims = ("M", "N", "K")
    dtype = "fp16"
    cpu_sms = H100_SMS  # programs for launches off a GPU (tests shrink it to walk several tiles each)

    @property
    def triton_fn(self) -> Any:
        return persistent_mm_kernel

    def space(self) -> Space:
        return Space(
            [Pow2("BM", 32, 256, default=128), Pow2("BN", 32, 256, default=128), Pow2("BK", 32, 128, default=64),
             Choice("GROUP_SIZE", [1, 8, 16], default=8),
             Choice("num_warps", [4, 8], default=8), Choice("num_stages", [2, 3, 4, 5], default=3)],
            constraints=[
                f"num_stages * (BM + BN) * BK * 2 <= {SMEM_BYTES}",
                # accumulator values per thread: at most 128 (register file), at least 32 (a
                # persistent program should hold a real tile, not a sliver)
                "BM * BN <= 128 * 32 * num_warps",
                "BM * BN >= 32 * 32 * num_warps",
            ],
            name=self.name,
        )

    def fixed_configs(self) -> list[dict]:
        rows = [(128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 128, 8, 3),
                (128, 256, 128, 8, 2), (64, 128, 64, 4, 4), (128, 64, 64, 4, 4), (64, 64, 64, 4, 5),
                (64, 256, 64, 8, 4)]
        return [{"BM": m, "BN": n, "BK": k, "GROUP_SIZE": 8, "num_warps": w, "num_stages": s} for m, n, k, w, s in rows]

    def default_config(self) -> dict:
        return {"BM": 128, "BN": 128, "BK": 64, "GROUP_SIZE": 8, "num_warps": 8, "num_stages": 3}

    def suite_shapes(self) -> list[dict[str, int]]:
        shapes = [(8, 4096, 4096),      # decode: a handful of tokens, 32-128 tiles: one wave or less
                  (512, 4096, 4096),    # short prefill: a few waves of tiles
                  (4096, 4096, 4096),   # square prefill
                  (2048, 14336, 4096),  # up/gate projection
                  (8192, 1024, 8192),   # narrow N, long K
                  (1536, 2560, 3000)]   # awkward: K not a multiple of 64 and tile counts off the SM count
        return [{"M": m, "N": n, "K": k} for m, n, k in shapes]

    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        m, n, k = d["M"], d["N"], d["K"]
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"a": "fp16", "b": "fp16", "c": "fp16"},
                       flops=2.0 * m * n * k, min_bytes=2.0 * (m * k + k * n + m * n),
                       hardware=hardware, source_hash=self.source_hash)

    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        d, g = problem.dims, self._generator(device, seed)
        a = torch.randn(d["M"], d["K"], generator=g, device=device).to(torch.float16)
        b = (torch.randn(d["K"], d["N"], generator=g, device=device) / d["K"] ** 0.5).to(torch.float16)
        return a, b

    def tensor_shapes(self, problem: Problem) -> tuple[list[tuple[int, ...]], tuple[int, ...]]:
        d = problem.dims
        return [(d["M"], d["K"]), (d["K"], d["N"])], (d["M"], d["N"])

    def reference(self, inputs: tuple) -> torch.Tensor:
        a, b = inputs
        return a.float() @ b.float()

    def alloc_output(self, problem: Problem, inputs: tuple) -> torch.Tensor:
        import torch
        a, b = inputs
        return torch.empty(a.shape[0], b.shape[1], dtype=torch.float16, device=a.device)

    def num_sms(self, tensor: Any) -> int:
        """The multiprocessor count of the GPU holding `tensor`; `cpu_sms` off a GPU (CPU and
        meta tensors, compile-only stand-ins)."""
        dev = getattr(tensor, "device", None)
        if getattr(dev, "type", None) != "cuda":
            return int(self.cpu_sms)
        if dev not in _SMS:  # read once per device: launches are timed
            import torch
            _SMS[dev] = int(torch.cuda.get_device_properties(dev).multi_processor_count)
        return _SMS[dev]

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        a, b = inputs
        (m, k), n = a.shape, b.shape[1]
        meta, opts = launch_options(config)
        sms = self.num_sms(a)
        grid = (min(sms, cdiv(m, meta["BM"]) * cdiv(n, meta["BN"])),)
        persistent_mm_kernel[grid](a, b, out, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                   out.stride(0), out.stride(1), NUM_SMS=sms, **meta, **opts)

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        import torch
        torch.matmul(inputs[0], inputs[1], out=out)

    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        m, n, k = (problem.dims[x] for x in "MNK")
        return {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": m, "N": n, "K": k,
                "stride_am": k, "stride_ak": 1, "stride_bk": n, "stride_bn": 1, "stride_cm": n, "stride_cn": 1,
                **{p: Constexpr(config[p]) for p in ("BM", "BN", "BK", "GROUP_SIZE")},
                "NUM_SMS": Constexpr(self.problem_sms(problem))}

    def problem_sms(self, problem: Problem) -> int:
        """NUM_SMS a launch for `problem` passes: its hardware's SM count when known."""
        hw = problem.hardware
        return int(hw.sms) if hw is not None and getattr(hw, "sms", 0) else int(self.cpu_sms)
