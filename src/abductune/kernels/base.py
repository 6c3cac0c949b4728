"""The contract of a built-in kernel: its space, shapes, inputs, launch, check and compile spec.

A `KernelSpec` is everything the live evaluator, the static (compile-only) evaluator, the sweep
recorder and the CLI need to know about one Triton kernel. Subclasses stay small: they declare
the space and shapes, build inputs, launch the kernel, and list the runtime arguments the
launch passes (`kernel_args`), from which `compile_spec` derives what `triton.compile` needs,
specialised the way a real launch would be (ints equal to 1 become constants, pointers and
multiples of 16 get the divisibility hint).
"""
from __future__ import annotations

import hashlib
import inspect
import math
from abc import ABC, abstractmethod
from typing import Any

from ..errors import AbductuneError
from ..hardware import HardwareInfo
from ..problem import Problem
from ..space import Choice, Pow2, Space

# Relative-error tolerance ||out - ref|| / ||ref|| by output dtype. fp16 rounding alone is
# ~2^-11 per element and bf16 ~2^-8, so these leave room for a different summation order
# while still catching a wrong tile, a missed mask or a stale buffer (errors of order 1).
TOLERANCE = {"fp16": 1e-2, "bf16": 2e-2, "fp32": 1e-4, "fp64": 1e-8}

TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64"}

_I32_MAX = 2**31 - 1


def torch_dtype(name: str):
    import torch

    return getattr(torch, TORCH_DTYPES[name])


def source_hash(fn: Any) -> str:
    """sha256 (16 hex) of a Triton function's Python source; works on JIT and interpreted fns."""
    src = getattr(fn, "src", None)
    if not isinstance(src, str):
        src = inspect.getsource(getattr(fn, "fn", fn))
    return hashlib.sha256(src.encode()).hexdigest()[:16]


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class KernelSpec(ABC):
    name: str
    kernel_class: str  # "matmul" | "row_reduction" | "elementwise"
    dims: tuple[str, ...]
    dtype: str = "fp16"  # the element type of inputs and output
    no_specialize: tuple[str, ...] = ()  # int args the Triton function marks do_not_specialize

    # ------------------------------------------------------------------ tuning surface
    @abstractmethod
    def space(self) -> Space: ...

    @abstractmethod
    def fixed_configs(self) -> list[dict]:
        """What a `triton.autotune` user of this kernel would ship (6-12 configs)."""

    @abstractmethod
    def default_config(self) -> dict: ...

    @abstractmethod
    def suite_shapes(self) -> list[dict[str, int]]: ...

    # ------------------------------------------------------------------ problem
    @abstractmethod
    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem: ...

    def _check_dims(self, dims: dict[str, int]) -> dict[str, int]:
        missing = [d for d in self.dims if d not in dims]
        extra = [d for d in dims if d not in self.dims]
        if missing or extra:
            raise AbductuneError(f"kernel {self.name!r} takes dims {list(self.dims)}, got {dict(dims)}")
        out = {d: int(dims[d]) for d in self.dims}
        if any(v <= 0 for v in out.values()):
            raise AbductuneError(f"kernel {self.name!r}: every dim must be positive, got {out}")
        return out

    @property
    @abstractmethod
    def triton_fn(self) -> Any:
        """The @triton.jit function this spec launches."""

    @property
    def source_hash(self) -> str:
        return source_hash(self.triton_fn)

    # ------------------------------------------------------------------ running
    @abstractmethod
    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple: ...

    def tensor_shapes(self, problem: Problem) -> tuple[list[tuple[int, ...]], tuple[int, ...]] | None:
        """(input shapes, output shape) when every tensor is contiguous and of `dtype`: enough
        for a compile-only launch on stand-in tensors, without torch. None: compile workers
        build meta tensors with `make_inputs(problem, "meta")` instead."""
        return None

    @abstractmethod
    def reference(self, inputs: tuple) -> Any: ...

    @abstractmethod
    def alloc_output(self, problem: Problem, inputs: tuple) -> Any: ...

    @abstractmethod
    def launch(self, config: dict, inputs: tuple, out: Any) -> None: ...

    @abstractmethod
    def torch_baseline(self, inputs: tuple, out: Any) -> None: ...

    def check(self, out: Any, ref: Any) -> tuple[bool, float]:
        """(passed, relative error). NaN/inf in the output or a shape mismatch never passes."""
        import torch

        if tuple(out.shape) != tuple(ref.shape):
            return False, math.inf
        o = out.detach().to(torch.float64)
        r = ref.detach().to(torch.float64)
        if not bool(torch.isfinite(o).all()):
            return False, math.inf
        denom = float(torch.linalg.vector_norm(r))
        num = float(torch.linalg.vector_norm(o - r))
        rel = num / denom if denom > 0 else num
        tol = TOLERANCE.get(self.dtype, 1e-2)
        return (math.isfinite(rel) and rel <= tol), rel

    @staticmethod
    def _generator(device: str, seed: int):
        import torch

        if device == "meta":  # shapes and dtypes only (offline compiles): no random state
            return None

        g = torch.Generator(device=device)
        g.manual_seed(seed)
        return g

    # ------------------------------------------------------------------ compiling
    @abstractmethod
    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        """Every argument of `triton_fn` in order, as the launch for `problem` passes it:
        pointers as their Triton type ("*fp16"), ints and floats as values, constexprs
        (tuned meta-parameters and derived flags) as values wrapped in `Constexpr`."""

    def compile_spec(self, config: dict, problem: Problem) -> tuple[Any, dict, dict, dict]:
        """(jit_fn, signature, constexprs, options) for `triton.compile` without a launch."""
        args = self.kernel_args(config, problem)
        unknown = sorted(set(config) - set(args) - {"num_warps", "num_stages"})
        if unknown:
            raise AbductuneError(f"{self.name}: config keys {unknown} are not parameters of the kernel "
                                 f"(parameters: {', '.join(self.space().names)})")
        signature: dict[str, str] = {}
        constexprs: dict[str, Any] = {}
        for name, v in args.items():
            if isinstance(v, Constexpr):
                signature[name] = "constexpr"
                constexprs[name] = v.value
            elif isinstance(v, str):  # pointer type
                signature[name] = v
            elif isinstance(v, bool):
                signature[name] = "i1"
            elif isinstance(v, int):
                if v == 1 and name not in self.no_specialize:  # Triton specialises int arguments equal to 1 into constants
                    signature[name] = "constexpr"
                    constexprs[name] = 1
                else:
                    signature[name] = "i32" if -_I32_MAX - 1 <= v <= _I32_MAX else "i64"
            elif isinstance(v, float):
                signature[name] = "fp32"
            else:
                raise TypeError(f"{self.name}: argument {name}={v!r} has no Triton type")
        options = {"num_warps": int(config.get("num_warps", 4)),
                   "num_stages": int(config.get("num_stages", 3))}
        return self.triton_fn, signature, constexprs, options

    def compile_attrs(self, config: dict, problem: Problem) -> dict[str, int]:
        """Divisibility hints a launch would give: arg name -> 16 for pointers (torch
        allocations are 16-byte aligned) and for ints that are multiples of 16."""
        out = {}
        for name, v in self.kernel_args(config, problem).items():
            if isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool)
                                      and not isinstance(v, Constexpr) and v != 1 and v % 16 == 0
                                      and name not in self.no_specialize):
                out[name] = 16
        return out

    def __repr__(self) -> str:
        return f"<KernelSpec {self.name} ({self.kernel_class}, dims {','.join(self.dims)})>"


class Constexpr:
    """Marks a kernel argument that is a compile-time constant in `kernel_args`."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __repr__(self) -> str:
        return f"Constexpr({self.value!r})"


def row_reduction_space(name: str) -> Space:
    """The space shared by the row kernels (softmax, RMSNorm): a chunk width along the reduced
    axis (role tile:R, like Inductor's RBLOCK), rows per program (tile:X, like XBLOCK), warps
    and stages. It does not depend on the shape: rows longer than BLOCK are walked in chunks."""
    return Space(
        [Pow2("BLOCK", 128, 16384, role="tile:R", default=2048),
         Choice("ROWS_PER_PROGRAM", [1, 2, 4], role="tile:X", default=1),
         Pow2("num_warps", 1, 16, default=8), Choice("num_stages", [1, 2, 3], default=2)],
        constraints=[
            # every thread owns at least one element of a chunk ...
            "ROWS_PER_PROGRAM * BLOCK >= 32 * num_warps",
            # ... and at most 64 fp32 values, past which a chunk no longer fits in registers
            "ROWS_PER_PROGRAM * BLOCK <= 64 * 32 * num_warps",
        ],
        name=name,
    )


def launch_options(config: dict) -> tuple[dict, dict]:
    """Split a config into (meta-parameters, launch options num_warps/num_stages)."""
    meta = {k: v for k, v in config.items() if k not in ("num_warps", "num_stages")}
    opts = {"num_warps": int(config.get("num_warps", 4)), "num_stages": int(config.get("num_stages", 3))}
    return meta, opts
