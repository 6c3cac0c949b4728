"""A tiny kernel a compile worker compiles once at start-up, before any real config.

A fresh process's first Triton compile pays one-time costs (Triton's compiler modules, LLVM's
target set-up, the ptxas version probe): on a row kernel 0.4-0.6 s of a 0.55-0.7 s first
compile, against 0.12-0.15 s for each compile after it (triton 3.9, sm_90, offline). A live
tune's first shape lands most of its compiles on fresh workers, so each worker pays that
cost here, in parallel, while the benchmark worker starts its CUDA context."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _copy16(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def compile_once() -> None:
    """Compile `_copy16` in this worker (its JIT launch is compile-only there)."""
    from .worker import DuckTensor

    _copy16[(1,)](DuckTensor((16,), "fp16"), 16, BLOCK=16)
