"""RMSNorm forward (Zhang & Sennrich 2019), Gemma-style weight, bf16 in and out, fp32 math:

    y = bf16( x * rsqrt(mean(x^2) + eps) * (1 + w) )

Gemma stores the scale as an offset around zero and multiplies by (1 + w) (Llama multiplies by w);
everything is computed in fp32 from the bf16 inputs and rounded once, as the HF Gemma module does.

Tiling: a program owns BLOCK_ROWS whole rows and works on them as one [BLOCK_ROWS, BLOCK_COLS]
tile (a 2-D tl.arange, rows masked rather than clamped, the reduction along axis 1). The row
length N_COLS is a compile-time constant, so whether one column tile covers the row is decided in
the kernel: if it does, the tile is loaded once and normalised from registers; if not, the
columns are walked twice, first summing x^2 chunk by chunk into a per-row fp32 running sum
(one tree reduction per chunk), then reloading x with the matching slice of w to normalise and
store. The row count is not specialised: one compile serves decode and prefill.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import triton
import triton.language as tl

from ...hardware import HardwareInfo
from ...problem import Problem
from ...space import Choice, Pow2, Space
from ..base import Constexpr, KernelSpec, cdiv, launch_options, torch_dtype

if TYPE_CHECKING:
    import torch

EPS = 1e-6


@triton.jit(do_not_specialize=["n_rows"])
def rmsnorm_gemma_tiles(x_ptr, w_ptr, y_ptr, n_rows, x_stride, y_stride, eps,
                        N_COLS: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    r_idx = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    r_live = r_idx < n_rows
    r64 = r_idx.to(tl.int64)
    x_base = x_ptr + r64[:, None] * x_stride   # [BLOCK_ROWS, 1]
    y_base = y_ptr + r64[:, None] * y_stride
    c_idx = tl.arange(0, BLOCK_COLS)            # [BLOCK_COLS]
    inv_n = 1.0 / N_COLS

    if BLOCK_COLS >= N_COLS:
        c_live = c_idx < N_COLS
        live = r_live[:, None] & c_live[None, :]
        xt = tl.load(x_base + c_idx[None, :], mask=live, other=0.0).to(tl.float32)
        inv_rms = tl.rsqrt(tl.sum(xt * xt, axis=1) * inv_n + eps)
        scale = 1.0 + tl.load(w_ptr + c_idx, mask=c_live, other=0.0).to(tl.float32)
        yt = xt * inv_rms[:, None] * scale[None, :]
        tl.store(y_base + c_idx[None, :], yt.to(y_ptr.dtype.element_ty), mask=live)
    else:
        sq = tl.zeros((BLOCK_ROWS,), dtype=tl.float32)
        for c0 in range(0, N_COLS, BLOCK_COLS):
            cc = c0 + c_idx
            live = r_live[:, None] & (cc < N_COLS)[None, :]
            xt = tl.load(x_base + cc[None, :], mask=live, other=0.0).to(tl.float32)
            sq += tl.sum(xt * xt, axis=1)
        inv_rms = tl.rsqrt(sq * inv_n + eps)
        for c0 in range(0, N_COLS, BLOCK_COLS):
            cc = c0 + c_idx
            c_live = cc < N_COLS
            live = r_live[:, None] & c_live[None, :]
            xt = tl.load(x_base + cc[None, :], mask=live, other=0.0).to(tl.float32)
            scale = 1.0 + tl.load(w_ptr + cc, mask=c_live, other=0.0).to(tl.float32)
            yt = xt * inv_rms[:, None] * scale[None, :]
            tl.store(y_base + cc[None, :], yt.to(y_ptr.dtype.element_ty), mask=live)


class RMSNormBf16(KernelSpec):
    origin = ("abductune zoo (ours), after RMSNorm (Zhang & Sennrich 2019) with Gemma's (1 + w) scale, "
              "several rows per program as one 2-D tile")
    kernel_class = "row_reduction"
    dims = ("rows", "cols")
    dtype = "bf16"
    no_specialize = ("n_rows",)

    def __init__(self) -> None:
        self.name = "zoo_rmsnorm_bf16"

    @property
    def triton_fn(self) -> Any:
        return rmsnorm_gemma_tiles

    def space(self) -> Space:
        return Space(
            [Pow2("BLOCK_ROWS", 1, 32, default=4), Pow2("BLOCK_COLS", 256, 16384, default=1024),
             Pow2("num_warps", 1, 16, default=4), Choice("num_stages", [1, 2], default=1)],
            constraints=[
                # every thread owns at least one element of the tile, and at most 32 (held in fp32)
                "BLOCK_ROWS * BLOCK_COLS >= 32 * num_warps",
                "BLOCK_ROWS * BLOCK_COLS <= 32 * 32 * num_warps",
            ],
            name=self.name)

    def fixed_configs(self) -> list[dict]:
        rows = [(1, 4096, 8, 1), (1, 8192, 16, 1), (1, 16384, 16, 1), (2, 4096, 16, 1), (4, 1024, 4, 1),
                (4, 2048, 8, 1), (8, 512, 4, 1), (8, 1024, 8, 2), (16, 512, 8, 2)]
        return [{"BLOCK_ROWS": r, "BLOCK_COLS": c, "num_warps": w, "num_stages": s} for r, c, w, s in rows]

    def default_config(self) -> dict:
        return {"BLOCK_ROWS": 4, "BLOCK_COLS": 1024, "num_warps": 4, "num_stages": 1}

    def suite_shapes(self) -> list[dict[str, int]]:
        # one decode token at 4096; a small batch at 8192 (Llama-70B); prefill at 4096, at 5120
        # (Llama-2-13B / Qwen-14B) and an awkward 3000 tokens at Mistral-7B's 14336 FFN width
        return [{"rows": 1, "cols": 4096}, {"rows": 64, "cols": 8192}, {"rows": 4096, "cols": 4096},
                {"rows": 16384, "cols": 5120}, {"rows": 3000, "cols": 14336}]

    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        rows, cols = d["rows"], d["cols"]
        # square, add, then * rsqrt and * (1 + w): ~4 flops per element; x and w read once, y written once
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"x": self.dtype, "w": self.dtype, "y": self.dtype},
                       flops=4.0 * rows * cols, min_bytes=2.0 * (2 * rows * cols + cols),
                       hardware=hardware, source_hash=self.source_hash)

    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        rows, cols = problem.dims["rows"], problem.dims["cols"]
        g, dt = self._generator(device, seed), torch_dtype(self.dtype)
        # a residual stream with rows of different scale, so every row has its own rsqrt
        x = (torch.randn(rows, cols, generator=g, device=device)
             * (0.25 + 4.0 * torch.rand(rows, 1, generator=g, device=device))).to(dt)
        w = (0.3 * torch.randn(cols, generator=g, device=device)).to(dt)  # Gemma: an offset around 0
        return x, w

    def tensor_shapes(self, problem: Problem) -> tuple[list[tuple[int, ...]], tuple[int, ...]]:
        rows, cols = problem.dims["rows"], problem.dims["cols"]
        return [(rows, cols), (cols,)], (rows, cols)

    def reference(self, inputs: tuple) -> torch.Tensor:
        import torch
        x, w = (t.double() for t in inputs)
        return (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * (1.0 + w)).float()

    def alloc_output(self, problem: Problem, inputs: tuple) -> torch.Tensor:
        import torch
        return torch.empty_like(inputs[0])

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        x, w = inputs
        rows, cols = x.shape
        meta, opts = launch_options(config)
        grid = (cdiv(rows, meta["BLOCK_ROWS"]),)
        rmsnorm_gemma_tiles[grid](x, w, out, rows, x.stride(0), out.stride(0), EPS, N_COLS=cols, **meta, **opts)

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        import torch
        # the HF Gemma module's formula: fp32 throughout, cast back at the end (the result is
        # discarded rather than copied into `out`, so the baseline pays no extra copy)
        x, w = inputs
        xf = x.float()
        yf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)
        (yf * (1.0 + w.float())).to(x.dtype)

    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        rows, cols = problem.dims["rows"], problem.dims["cols"]
        ptr = f"*{self.dtype}"
        return {"x_ptr": ptr, "w_ptr": ptr, "y_ptr": ptr, "n_rows": rows, "x_stride": cols, "y_stride": cols,
                "eps": EPS, "N_COLS": Constexpr(cols), "BLOCK_ROWS": Constexpr(config["BLOCK_ROWS"]),
                "BLOCK_COLS": Constexpr(config["BLOCK_COLS"])}
