"""Row softmax: y[r, :] = softmax(x[r, :]), fp16 in and out, fp32 math.

A program owns ROWS_PER_PROGRAM rows and walks each row in chunks of BLOCK columns, so every
BLOCK is valid for every row length (the space does not depend on the shape). Rows that fit
in one chunk are read once (ONE_CHUNK, derived from the shape); longer rows take an online
pass (running max and rescaled sum) and a second pass that writes the output.
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


# row counts are not specialised: decode (1 row) and prefill shapes share one compile
@triton.jit(do_not_specialize=["n_rows"])
def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y,
                   BLOCK: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr, ONE_CHUNK: tl.constexpr):
    rows = tl.program_id(0) * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)
    row_ok = rows[:, None] < n_rows
    # Rows past the end re-read the last row (no NaN from all-masked rows) and are not stored.
    safe = tl.minimum(rows, n_rows - 1).to(tl.int64)[:, None]
    x_row = x_ptr + safe * stride_x
    y_row = y_ptr + rows.to(tl.int64)[:, None] * stride_y
    cols = tl.arange(0, BLOCK)[None, :]

    if ONE_CHUNK:
        in_row = cols < n_cols
        x = tl.load(x_row + cols, mask=in_row, other=-float("inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=1)[:, None])
        inv = 1.0 / tl.sum(e, axis=1)
        tl.store(y_row + cols, (e * inv[:, None]).to(y_ptr.dtype.element_ty), mask=row_ok & in_row)
    else:
        # pass 1: running max m and sum s of exp(x - m), rescaled whenever m grows
        m = tl.full((ROWS_PER_PROGRAM,), -float("inf"), tl.float32)
        s = tl.zeros((ROWS_PER_PROGRAM,), tl.float32)
        for start in range(0, n_cols, BLOCK):
            in_row = start + cols < n_cols
            x = tl.load(x_row + start + cols, mask=in_row, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, axis=1))
            s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new[:, None]), axis=1)
            m = m_new
        inv = 1.0 / s
        # pass 2: normalise and write
        for start in range(0, n_cols, BLOCK):
            in_row = start + cols < n_cols
            x = tl.load(x_row + start + cols, mask=in_row, other=-float("inf")).to(tl.float32)
            y = tl.exp(x - m[:, None]) * inv[:, None]
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=row_ok & in_row)


class SoftmaxSpec(KernelSpec):
    kernel_class = "row_reduction"
    no_specialize = ("n_rows",)
    dims = ("rows", "cols")

    def __init__(self, dtype: str = "fp16"):
        self.dtype = dtype
        self.name = f"softmax_{dtype}"

    @property
    def triton_fn(self) -> Any:
        return softmax_kernel

    def space(self) -> Space:
        return row_reduction_space(self.name)

    def fixed_configs(self) -> list[dict]:
        # what one ships without tuning: a few chunk widths, warps growing with the chunk
        rows = [(1024, 1, 4, 1), (2048, 1, 8, 1), (4096, 1, 8, 2), (4096, 1, 16, 2), (8192, 1, 16, 2),
                (1024, 4, 8, 1), (512, 4, 4, 1), (2048, 2, 8, 2)]
        return [{"BLOCK": b, "ROWS_PER_PROGRAM": r, "num_warps": w, "num_stages": s} for b, r, w, s in rows]

    def default_config(self) -> dict:
        return {"BLOCK": 2048, "ROWS_PER_PROGRAM": 1, "num_warps": 8, "num_stages": 2}

    def suite_shapes(self) -> list[dict[str, int]]:
        # LM-head softmax over vocabularies (Llama-2 32000, Llama-3 128256) and attention-score
        # rows (sequence 4096, head dim-sized 1024 rows of many heads)
        return [{"rows": 4096, "cols": 32000}, {"rows": 8192, "cols": 128256},
                {"rows": 32768, "cols": 4096}, {"rows": 16384, "cols": 1024}]

    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        n = d["rows"] * d["cols"]
        # max, subtract, exp, sum, multiply: ~5 flops per element
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"x": self.dtype, "y": self.dtype}, flops=5.0 * n, min_bytes=2.0 * 2 * n,
                       hardware=hardware, source_hash=self.source_hash)

    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        d = problem.dims
        # scale 4 spreads the logits so the max really matters (exp of unshifted values overflows)
        x = torch.randn(d["rows"], d["cols"], generator=self._generator(device, seed), device=device) * 4
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
        grid = (cdiv(rows, meta["ROWS_PER_PROGRAM"]),)
        softmax_kernel[grid](x, out, rows, cols, x.stride(0), out.stride(0),
                             ONE_CHUNK=meta["BLOCK"] >= cols, **meta, **opts)

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        import torch
        torch.softmax(inputs[0], dim=-1, out=out)

    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        rows, cols = problem.dims["rows"], problem.dims["cols"]
        ptr = f"*{self.dtype}"
        return {"x_ptr": ptr, "y_ptr": ptr, "n_rows": rows, "n_cols": cols, "stride_x": cols, "stride_y": cols,
                "BLOCK": Constexpr(config["BLOCK"]), "ROWS_PER_PROGRAM": Constexpr(config["ROWS_PER_PROGRAM"]),
                "ONE_CHUNK": Constexpr(config["BLOCK"] >= cols)}
