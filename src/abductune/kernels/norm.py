"""RMSNorm forward: y = x / sqrt(mean(x^2) + eps) * w, rows of `cols` (the hidden size).

Same layout as the softmax kernel: ROWS_PER_PROGRAM rows per program, the row walked in chunks
of BLOCK columns so every BLOCK is valid. Rows that fit in one chunk are read once (ONE_CHUNK);
longer rows accumulate the sum of squares chunk-wise in a [ROWS, BLOCK] fp32 buffer (one
reduction at the end keeps the summation tree shallow), then normalise in a second pass.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..hardware import HardwareInfo
from ..problem import Problem
from ..space import Space
from .base import Constexpr, KernelSpec, cdiv, launch_options, row_reduction_space, torch_dtype
from ._triton import tl, triton  # stand-ins without Triton: the spec still imports

if TYPE_CHECKING:
    import torch

EPS = 1e-6


# row counts are not specialised: decode (1 row) and prefill shapes share one compile
@triton.jit(do_not_specialize=["n_rows"])
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y, eps,
                   BLOCK: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr, ONE_CHUNK: tl.constexpr):
    rows = tl.program_id(0) * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)
    row_ok = rows[:, None] < n_rows
    safe = tl.minimum(rows, n_rows - 1).to(tl.int64)[:, None]  # past-the-end rows: read, not stored
    x_row = x_ptr + safe * stride_x
    y_row = y_ptr + rows.to(tl.int64)[:, None] * stride_y
    cols = tl.arange(0, BLOCK)[None, :]

    if ONE_CHUNK:
        in_row = cols < n_cols
        x = tl.load(x_row + cols, mask=in_row, other=0.0).to(tl.float32)
        r = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
        w = tl.load(w_ptr + cols, mask=in_row, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (x * r[:, None] * w).to(y_ptr.dtype.element_ty), mask=row_ok & in_row)
    else:
        acc = tl.zeros((ROWS_PER_PROGRAM, BLOCK), tl.float32)
        for start in range(0, n_cols, BLOCK):
            x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=0.0).to(tl.float32)
            acc += x * x
        r = tl.rsqrt(tl.sum(acc, axis=1) / n_cols + eps)
        for start in range(0, n_cols, BLOCK):
            in_row = start + cols < n_cols
            x = tl.load(x_row + start + cols, mask=in_row, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + start + cols, mask=in_row, other=0.0).to(tl.float32)
            tl.store(y_row + start + cols, (x * r[:, None] * w).to(y_ptr.dtype.element_ty),
                     mask=row_ok & in_row)


class RMSNormSpec(KernelSpec):
    kernel_class = "row_reduction"
    no_specialize = ("n_rows",)
    dims = ("rows", "cols")

    def __init__(self, dtype: str):
        self.dtype = dtype
        self.name = f"rmsnorm_{dtype}"

    @property
    def triton_fn(self) -> Any:
        return rmsnorm_kernel

    def space(self) -> Space:
        return row_reduction_space(self.name)

    def fixed_configs(self) -> list[dict]:
        rows = [(1024, 1, 4, 1), (2048, 1, 8, 1), (4096, 1, 8, 1), (8192, 1, 16, 1), (16384, 1, 16, 1),
                (1024, 4, 8, 1), (2048, 2, 8, 2), (512, 4, 4, 2)]
        return [{"BLOCK": b, "ROWS_PER_PROGRAM": r, "num_warps": w, "num_stages": s} for b, r, w, s in rows]

    def default_config(self) -> dict:
        return {"BLOCK": 4096, "ROWS_PER_PROGRAM": 1, "num_warps": 8, "num_stages": 1}

    def suite_shapes(self) -> list[dict[str, int]]:
        # hidden sizes of Llama-7B (4096), Llama-70B (8192) and a 14336 FFN width; one decode token
        # up to a long prefill
        return [{"rows": 1, "cols": 4096}, {"rows": 256, "cols": 8192}, {"rows": 4096, "cols": 14336},
                {"rows": 16384, "cols": 4096}]

    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        rows, cols = d["rows"], d["cols"]
        # square, add, then multiply by r and by w: ~4 flops per element
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"x": self.dtype, "w": self.dtype, "y": self.dtype},
                       flops=4.0 * rows * cols, min_bytes=2.0 * (2 * rows * cols + cols),
                       hardware=hardware, source_hash=self.source_hash)

    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        d, g, dt = problem.dims, self._generator(device, seed), torch_dtype(self.dtype)
        x = torch.randn(d["rows"], d["cols"], generator=g, device=device).to(dt)
        w = (1.0 + 0.5 * torch.randn(d["cols"], generator=g, device=device)).to(dt)
        return x, w

    def tensor_shapes(self, problem: Problem) -> tuple[list[tuple[int, ...]], tuple[int, ...]]:
        d = problem.dims
        return [(d["rows"], d["cols"]), (d["cols"],)], (d["rows"], d["cols"])

    def reference(self, inputs: tuple) -> torch.Tensor:
        import torch
        x, w = (t.double() for t in inputs)
        return (x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + EPS) * w).float()

    def alloc_output(self, problem: Problem, inputs: tuple) -> torch.Tensor:
        import torch
        return torch.empty_like(inputs[0])

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        x, w = inputs
        rows, cols = x.shape
        meta, opts = launch_options(config)
        grid = (cdiv(rows, meta["ROWS_PER_PROGRAM"]),)
        rmsnorm_kernel[grid](x, w, out, rows, cols, x.stride(0), out.stride(0), EPS,
                             ONE_CHUNK=meta["BLOCK"] >= cols, **meta, **opts)

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        import torch
        # torch's rms_norm has no out=; the result is discarded rather than copied into `out`,
        # so the baseline is not charged for an extra copy kernel.
        x, w = inputs
        torch.nn.functional.rms_norm(x, (x.shape[-1],), w, EPS)

    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        rows, cols = problem.dims["rows"], problem.dims["cols"]
        ptr = f"*{self.dtype}"
        return {"x_ptr": ptr, "w_ptr": ptr, "y_ptr": ptr, "n_rows": rows, "n_cols": cols, "stride_x": cols,
                "stride_y": cols, "eps": EPS, "BLOCK": Constexpr(config["BLOCK"]),
                "ROWS_PER_PROGRAM": Constexpr(config["ROWS_PER_PROGRAM"]),
                "ONE_CHUNK": Constexpr(config["BLOCK"] >= cols)}
