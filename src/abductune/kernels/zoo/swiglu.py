"""SwiGLU gate of a fused gate/up projection: out = silu(gate) * up, bf16.

The input is the (tokens, 2 * hidden) output of one GEMM against the concatenated gate and up
weights (Llama / Mistral / Qwen MLPs): gate is columns [0, hidden), up is [hidden, 2 hidden),
out is (tokens, hidden). silu(g) = g * sigmoid(g) (Shazeer 2020, "GLU Variants Improve
Transformer"), computed in fp32 as g / (1 + exp(-g)).

The launch is a 2-D grid of BLOCK_TOKENS x BLOCK_HIDDEN tiles: axis 0 walks the hidden columns
(neighbouring programs touch neighbouring memory), axis 1 the tokens; the gate and up tiles of a
program are two loads at a distance of `hidden` columns in the same row. This differs from the
built-in gelu_mul, a 1-D launch over two separate flat tensors.

Class and dims: kernel_class "elementwise" (every output element depends on two input elements;
nothing is reduced). The dims are ("tokens", "hidden"), not ("numel",) nor ("rows", "cols"):
the 2-D grid needs both extents, and rows/cols is the row_reduction naming (classify.py's
alias table would read "hidden" as cols there). Under the named class "elementwise",
classify.canonical_dims does not find "numel" and keeps tokens/hidden as they are (fallback
category "all"); the tile parameters' roles, tile:TOKENS and tile:HIDDEN, name those dims.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import triton
import triton.language as tl

from ...hardware import HardwareInfo
from ...problem import Problem
from ...space import Pow2, Space
from ..base import Constexpr, KernelSpec, cdiv, launch_options, torch_dtype

if TYPE_CHECKING:
    import torch


@triton.jit
def swiglu_tiles(gate_up_ptr, out_ptr, n_tokens, hidden, in_row_stride, out_row_stride,
                 BLOCK_TOKENS: tl.constexpr, BLOCK_HIDDEN: tl.constexpr):
    tok = tl.program_id(1) * BLOCK_TOKENS + tl.arange(0, BLOCK_TOKENS)
    col = tl.program_id(0) * BLOCK_HIDDEN + tl.arange(0, BLOCK_HIDDEN)
    keep = (tok < n_tokens)[:, None] & (col < hidden)[None, :]
    tok64 = tok.to(tl.int64)[:, None]
    gate_at = gate_up_ptr + tok64 * in_row_stride + col[None, :]
    g = tl.load(gate_at, mask=keep, other=0.0).to(tl.float32)
    u = tl.load(gate_at + hidden, mask=keep, other=0.0).to(tl.float32)
    y = g / (1.0 + tl.exp(-g)) * u
    tl.store(out_ptr + tok64 * out_row_stride + col[None, :], y.to(out_ptr.dtype.element_ty), mask=keep)


class SwigluBf16(KernelSpec):
    origin = "abductune zoo (ours), after the SwiGLU feed-forward gate (Shazeer 2020) on a fused gate/up output"
    kernel_class = "elementwise"
    dims = ("tokens", "hidden")
    dtype = "bf16"

    def __init__(self) -> None:
        self.name = "zoo_swiglu_bf16"

    @property
    def triton_fn(self) -> Any:
        return swiglu_tiles

    def space(self) -> Space:
        return Space(
            [Pow2("BLOCK_TOKENS", 1, 64, default=4), Pow2("BLOCK_HIDDEN", 64, 4096, default=512),
             Pow2("num_warps", 1, 16, default=4)],
            constraints=[
                # every thread owns an element of the tile, and at most 32 (gate and up in fp32)
                "BLOCK_TOKENS * BLOCK_HIDDEN >= 32 * num_warps",
                "BLOCK_TOKENS * BLOCK_HIDDEN <= 32 * 32 * num_warps",
            ],
            name=self.name)

    def fixed_configs(self) -> list[dict]:
        rows = [(1, 1024, 4), (1, 2048, 8), (2, 1024, 4), (4, 512, 4), (4, 1024, 8), (8, 256, 4), (8, 512, 8),
                (16, 256, 8), (32, 128, 8)]
        return [{"BLOCK_TOKENS": t, "BLOCK_HIDDEN": h, "num_warps": w} for t, h, w in rows]

    def default_config(self) -> dict:
        return {"BLOCK_TOKENS": 4, "BLOCK_HIDDEN": 512, "num_warps": 4}

    def suite_shapes(self) -> list[dict[str, int]]:
        # FFN widths of Llama-3-8B / Mistral-7B (14336), Llama-2-7B (11008) and a 4096-wide MLP;
        # a 64-token decode batch up to 16k-token prefill; 5461 (= 2/3 of 8192, unrounded) is a
        # width whose `up` half starts off a 16-byte boundary
        return [{"tokens": 64, "hidden": 14336}, {"tokens": 2048, "hidden": 11008},
                {"tokens": 8192, "hidden": 14336}, {"tokens": 16384, "hidden": 4096},
                {"tokens": 4000, "hidden": 5461}]

    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        n = d["tokens"] * d["hidden"]
        # negate, exp, add, divide, multiply by g and by up: ~6 flops per output element
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"gate_up": self.dtype, "out": self.dtype}, flops=6.0 * n, min_bytes=2.0 * 3 * n,
                       hardware=hardware, source_hash=self.source_hash)

    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        t, h = problem.dims["tokens"], problem.dims["hidden"]
        # spread 3 reaches both tails of silu
        x = 3.0 * torch.randn(t, 2 * h, generator=self._generator(device, seed), device=device)
        return (x.to(torch_dtype(self.dtype)),)

    def tensor_shapes(self, problem: Problem) -> tuple[list[tuple[int, ...]], tuple[int, ...]]:
        t, h = problem.dims["tokens"], problem.dims["hidden"]
        return [(t, 2 * h)], (t, h)

    def reference(self, inputs: tuple) -> torch.Tensor:
        import torch
        gate, up = inputs[0].double().chunk(2, dim=-1)
        return (torch.nn.functional.silu(gate) * up).float()

    def alloc_output(self, problem: Problem, inputs: tuple) -> torch.Tensor:
        import torch
        x = inputs[0]
        return torch.empty(x.shape[0], x.shape[1] // 2, dtype=x.dtype, device=x.device)

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        (x,) = inputs
        tokens, hidden = out.shape
        meta, opts = launch_options(config)
        grid = (cdiv(hidden, meta["BLOCK_HIDDEN"]), cdiv(tokens, meta["BLOCK_TOKENS"]))
        swiglu_tiles[grid](x, out, tokens, hidden, x.stride(0), out.stride(0), **meta, **opts)

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        import torch
        gate, up = inputs[0].chunk(2, dim=-1)
        torch.mul(torch.nn.functional.silu(gate), up, out=out)

    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        t, h = problem.dims["tokens"], problem.dims["hidden"]
        ptr = f"*{self.dtype}"
        return {"gate_up_ptr": ptr, "out_ptr": ptr, "n_tokens": t, "hidden": h, "in_row_stride": 2 * h,
                "out_row_stride": h, "BLOCK_TOKENS": Constexpr(config["BLOCK_TOKENS"]),
                "BLOCK_HIDDEN": Constexpr(config["BLOCK_HIDDEN"])}
