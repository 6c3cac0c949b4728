"""GeGLU-style gate: out = x * gelu(g), fp16, with the tanh approximation of GELU.

gelu_tanh(g) = 0.5 g (1 + tanh(u)), u = sqrt(2/pi) (g + 0.044715 g^3), which equals
g * sigmoid(2u); we compute it as g / (1 + exp(-2u)), which needs no tanh intrinsic and stays
finite at both ends (exp overflow gives g / inf = -0 for very negative g). This is PyTorch's
gelu(approximate="tanh") as used by GeGLU MLPs (Gemma).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..hardware import HardwareInfo
from ..problem import Problem
from ..space import Choice, Pow2, Space
from .base import Constexpr, KernelSpec, cdiv, launch_options, torch_dtype
from ._triton import tl, triton  # stand-ins without Triton: the spec still imports

if TYPE_CHECKING:
    import torch


@triton.jit
def gelu_mul_kernel(x_ptr, g_ptr, y_ptr, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = 0.7978845608028654 * (g + 0.044715 * g * g * g)
    y = x * g / (1.0 + tl.exp(-2.0 * u))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class GeluMulSpec(KernelSpec):
    kernel_class = "elementwise"
    dims = ("numel",)

    def __init__(self, dtype: str = "fp16"):
        self.dtype = dtype
        self.name = f"gelu_mul_{dtype}"

    @property
    def triton_fn(self) -> Any:
        return gelu_mul_kernel

    def space(self) -> Space:
        return Space([Pow2("BLOCK", 128, 8192, role="tile:X", default=1024),
                      Pow2("num_warps", 1, 16, default=4), Choice("num_stages", [1, 2], default=1)],
                     # no idle threads: a block has at least one element per thread
                     constraints=["BLOCK >= 32 * num_warps"], name=self.name)

    def fixed_configs(self) -> list[dict]:
        rows = [(256, 2), (512, 4), (1024, 4), (1024, 8), (2048, 8), (4096, 8), (4096, 16), (8192, 16)]
        return [{"BLOCK": b, "num_warps": w, "num_stages": 1} for b, w in rows]

    def default_config(self) -> dict:
        return {"BLOCK": 1024, "num_warps": 4, "num_stages": 1}

    def suite_shapes(self) -> list[dict[str, int]]:
        # tokens x FFN width 14336 (Llama-3-8B / Mistral-7B): decode batch 64, 1k- and 8k-token prefill
        return [{"numel": 64 * 14336}, {"numel": 1024 * 14336}, {"numel": 8192 * 14336}]

    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        n = d["numel"]
        # cube, fma, exp, add, divide, multiplies: ~10 flops per element (memory bound anyway)
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"x": self.dtype, "g": self.dtype, "y": self.dtype},
                       flops=10.0 * n, min_bytes=2.0 * 3 * n, hardware=hardware, source_hash=self.source_hash)

    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        n, g, dt = problem.dims["numel"], self._generator(device, seed), torch_dtype(self.dtype)
        x = torch.randn(n, generator=g, device=device).to(dt)
        gate = (3 * torch.randn(n, generator=g, device=device)).to(dt)  # reaches both GELU tails
        return x, gate

    def tensor_shapes(self, problem: Problem) -> tuple[list[tuple[int, ...]], tuple[int, ...]]:
        n = problem.dims["numel"]
        return [(n,), (n,)], (n,)

    def reference(self, inputs: tuple) -> torch.Tensor:
        import torch
        x, g = (t.double() for t in inputs)
        return (x * torch.nn.functional.gelu(g, approximate="tanh")).float()

    def alloc_output(self, problem: Problem, inputs: tuple) -> torch.Tensor:
        import torch
        return torch.empty_like(inputs[0])

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        x, g = inputs
        meta, opts = launch_options(config)
        gelu_mul_kernel[(cdiv(x.numel(), meta["BLOCK"]),)](x, g, out, x.numel(), **meta, **opts)

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        import torch
        x, g = inputs
        torch.mul(x, torch.nn.functional.gelu(g, approximate="tanh"), out=out)

    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        ptr = f"*{self.dtype}"
        return {"x_ptr": ptr, "g_ptr": ptr, "y_ptr": ptr, "numel": problem.dims["numel"],
                "BLOCK": Constexpr(config["BLOCK"])}
