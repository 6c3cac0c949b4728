"""A copy kernel that misbehaves on request (MODE), for the live evaluator's fault tests.

MODE 0 copies correctly; 1 hangs; 2 writes far out of bounds (illegal address, a sticky
CUDA error); 3 fails to compile; 4 asks for more shared memory than any GPU has; 5 computes
a wrong result.
"""
from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from abductune.kernels.base import Constexpr, KernelSpec, cdiv, launch_options
from abductune.problem import Problem
from abductune.space import Choice, Pow2, Space


@triton.jit
def faulty_kernel(x_ptr, y_ptr, flag_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
    tl.static_assert(MODE != 3, "MODE 3 is a planted compile error")
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if MODE == 1:  # spin on a flag nobody sets
        while tl.load(flag_ptr, volatile=True) == 0:
            pass
    if MODE == 2:
        offs = offs.to(tl.int64) + (1 << 40)
    if MODE == 4:  # a 256x256 fp16 dot stages both operands in shared memory: 256 KB > 227 KB
        r = tl.arange(0, 256)
        a = tl.load(x_ptr + r[:, None] * 256 + r[None, :]).to(tl.float16)
        x = x + tl.sum(tl.sum(tl.dot(a, a), axis=1), axis=0) * 0
    if MODE == 5:
        x = x * 2
    tl.store(y_ptr + offs, x, mask=mask)


class FaultySpec(KernelSpec):
    name = "faulty"
    kernel_class = "elementwise"
    dims = ("n",)
    dtype = "fp32"

    def __init__(self, dtype: str = "fp32"):
        pass

    @property
    def triton_fn(self) -> Any:
        return faulty_kernel

    def space(self) -> Space:
        return Space([Pow2("BLOCK", 128, 1024), Choice("MODE", [0, 1, 2, 3, 4, 5], ordered=False),
                      Choice("num_warps", [4]), Choice("num_stages", [1])])

    def fixed_configs(self) -> list[dict]:
        return [self.default_config()]

    def default_config(self) -> dict:
        return {"BLOCK": 256, "MODE": 0, "num_warps": 4, "num_stages": 1}

    def suite_shapes(self) -> list[dict[str, int]]:
        return [{"n": 1 << 20}]

    def problem(self, dims: dict[str, int], hardware: Any = None) -> Problem:
        d = self._check_dims(dims)
        return Problem(self.name, self.kernel_class, d, {"x": "fp32"}, 0.0, 8.0 * d["n"], hardware,
                       self.source_hash)

    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch

        g = self._generator(device, seed)
        return (torch.randn(problem.dims["n"], generator=g, device=device),
                torch.zeros(1, dtype=torch.int32, device=device))

    def reference(self, inputs: tuple) -> Any:
        return inputs[0].clone()

    def alloc_output(self, problem: Problem, inputs: tuple) -> Any:
        import torch

        return torch.empty_like(inputs[0])

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        x, flag = inputs
        meta, opts = launch_options(config)
        faulty_kernel[(cdiv(x.numel(), meta["BLOCK"]),)](x, out, flag, x.numel(), **meta, **opts)

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        out.copy_(inputs[0])

    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        return {"x_ptr": "*fp32", "y_ptr": "*fp32", "flag_ptr": "*i32", "n": problem.dims["n"],
                "BLOCK": Constexpr(config["BLOCK"]), "MODE": Constexpr(config["MODE"])}
