"""Row softmax, fp16, one program per row, with per-lane online statistics.

Each program reads its row twice. Pass 1 walks the row in chunks of BLOCK_N columns and keeps,
for every lane of the chunk, its own running maximum m and running sum s of exp(x - m): lane i
sees columns i, i + BLOCK_N, i + 2 BLOCK_N, ... No reduction across lanes happens inside the
loop; the lanes are merged once after it (the row maximum is the maximum of the lane maxima and
each lane's sum is rescaled to it), as in the online normaliser of Milakov & Gimelshein (2018)
applied element-wise. Each update costs one exponential: with e = exp(-|x - m|), a new maximum
gives s = s e + 1, otherwise s = s + e. Pass 2 reads the row again and writes exp(x - M) / S.

Lanes start at a large finite negative maximum rather than -inf, so a lane that only ever sees
masked columns (x = -inf) keeps s = 0 and never forms inf - inf.
Unlike the built-in softmax there is no rows-per-program tile and no single-chunk special case.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import triton
import triton.language as tl

from ...hardware import HardwareInfo
from ...problem import Problem
from ...space import Choice, Pow2, Space
from ..base import Constexpr, KernelSpec, launch_options, torch_dtype

if TYPE_CHECKING:
    import torch


@triton.jit
def softmax_lanes_kernel(in_ptr, out_ptr, n_cols, in_row_stride, out_row_stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    src = in_ptr + row * in_row_stride
    dst = out_ptr + row * out_row_stride
    lane = tl.arange(0, BLOCK_N)

    m = tl.full((BLOCK_N,), -1.0e30, tl.float32)
    s = tl.zeros((BLOCK_N,), tl.float32)
    for c0 in range(0, n_cols, BLOCK_N):
        col = c0 + lane
        x = tl.load(src + col, mask=col < n_cols, other=-float("inf")).to(tl.float32)
        e = tl.exp(-tl.abs(x - m))
        s = tl.where(x > m, s * e + 1.0, s + e)
        m = tl.maximum(m, x)
    row_max = tl.max(m, axis=0)
    scale = 1.0 / tl.sum(s * tl.exp(m - row_max), axis=0)

    for c0 in range(0, n_cols, BLOCK_N):
        col = c0 + lane
        ok = col < n_cols
        x = tl.load(src + col, mask=ok, other=-float("inf")).to(tl.float32)
        tl.store(dst + col, (tl.exp(x - row_max) * scale).to(out_ptr.dtype.element_ty), mask=ok)


class OnlineSoftmaxFp16(KernelSpec):
    origin = ("abductune zoo (ours), after the online normaliser for softmax (Milakov & Gimelshein 2018), "
              "kept per lane and merged once per row")
    kernel_class = "row_reduction"
    dims = ("rows", "cols")
    dtype = "fp16"

    def __init__(self) -> None:
        self.name = "zoo_softmax_online_fp16"

    @property
    def triton_fn(self) -> Any:
        return softmax_lanes_kernel

    def space(self) -> Space:
        return Space(
            [Pow2("BLOCK_N", 128, 16384, default=2048), Pow2("num_warps", 1, 16, default=8),
             Choice("num_stages", [1, 2, 3, 4], default=2)],
            constraints=[
                "BLOCK_N >= 32 * num_warps",  # every thread holds a lane of the chunk
                # three fp32 values per lane (x, m, s): at most 32 lanes per thread
                "BLOCK_N <= 32 * 32 * num_warps",
            ],
            name=self.name)

    def fixed_configs(self) -> list[dict]:
        rows = [(512, 4, 1), (1024, 4, 2), (1024, 8, 1), (2048, 4, 3), (2048, 8, 2), (4096, 8, 2),
                (4096, 16, 3), (8192, 16, 2)]
        return [{"BLOCK_N": b, "num_warps": w, "num_stages": s} for b, w, s in rows]

    def default_config(self) -> dict:
        return {"BLOCK_N": 2048, "num_warps": 8, "num_stages": 2}

    def suite_shapes(self) -> list[dict[str, int]]:
        # LM-head rows (Llama-2 32000 vocabulary; Qwen2 151936 for a short batch), attention-score
        # rows (16384 x 1024, 32768 x 4096) and a ragged 3000 x 5000
        return [{"rows": 4096, "cols": 32000}, {"rows": 16384, "cols": 1024}, {"rows": 1024, "cols": 151936},
                {"rows": 32768, "cols": 4096}, {"rows": 3000, "cols": 5000}]

    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        n = d["rows"] * d["cols"]
        # pass 1: subtract, abs, exp, compare, multiply-add, max; pass 2: subtract, exp, multiply
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"x": self.dtype, "y": self.dtype}, flops=9.0 * n, min_bytes=2.0 * 2 * n,
                       hardware=hardware, source_hash=self.source_hash)

    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        d = problem.dims
        g = self._generator(device, seed)
        # a spread of 5 plus a per-row offset: the maximum matters and rows differ in level
        x = 5.0 * torch.randn(d["rows"], d["cols"], generator=g, device=device) \
            + 10.0 * torch.randn(d["rows"], 1, generator=g, device=device)
        return (x.to(torch_dtype(self.dtype)),)

    def tensor_shapes(self, problem: Problem) -> tuple[list[tuple[int, ...]], tuple[int, ...]]:
        d = problem.dims
        return [(d["rows"], d["cols"])], (d["rows"], d["cols"])

    def reference(self, inputs: tuple) -> torch.Tensor:
        import torch
        return torch.softmax(inputs[0].double(), dim=-1).float()

    def alloc_output(self, problem: Problem, inputs: tuple) -> torch.Tensor:
        import torch
        return torch.empty_like(inputs[0])

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        (x,) = inputs
        rows, cols = x.shape
        meta, opts = launch_options(config)
        softmax_lanes_kernel[(rows,)](x, out, cols, x.stride(0), out.stride(0), **meta, **opts)

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        import torch
        torch.softmax(inputs[0], dim=-1, out=out)

    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        cols = problem.dims["cols"]
        ptr = f"*{self.dtype}"
        return {"in_ptr": ptr, "out_ptr": ptr, "n_cols": cols, "in_row_stride": cols, "out_row_stride": cols,
                "BLOCK_N": Constexpr(config["BLOCK_N"])}
