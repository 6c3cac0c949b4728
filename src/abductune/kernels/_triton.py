"""`triton` and `triton.language` for the built-in kernel modules, or stand-ins where Triton is
not installed.

A kernel spec is more than its `@triton.jit` function: its space, default config, dims and
`problem()` (FLOPs, bytes) are plain Python, and `abductune predict --no-check`, `abductune
kernels` and the dims checks of `tune` need only those. So a machine without Triton can still
import the built-in kernel modules: the decorator keeps the Python function (and its source,
cut to the `def` line as Triton cuts it, so `source_hash` is the same with or without Triton),
and anything that would launch or compile it raises ModuleNotFoundError for `triton`, which
the CLI turns into "triton is not installed: ... pip install 'abductune[gpu]'".
"""
from __future__ import annotations

import inspect
import re
import textwrap
from typing import Any, Callable

try:
    import triton
    import triton.language as tl
except ModuleNotFoundError as _e:  # only Triton itself missing; a broken install still raises
    if _e.name is None or _e.name.split(".")[0] != "triton":
        raise
    triton = None  # type: ignore[assignment]
    tl = None  # type: ignore[assignment]

AVAILABLE = triton is not None


def _missing() -> ModuleNotFoundError:
    return ModuleNotFoundError("No module named 'triton'", name="triton")


class UnlaunchableKernel:
    """A `@triton.jit` function on a machine without Triton: its source, never a launch."""

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__module__ = fn.__module__
        src = textwrap.dedent(inspect.getsource(fn))
        match = re.search(r"^def\s+\w+\s*\(", src, re.MULTILINE)
        self.src = src[match.start():] if match else src

    def __getitem__(self, grid: Any) -> Any:
        raise _missing()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise _missing()

    def __getattr__(self, name: str) -> Any:  # run, warmup, cache, ...: all need Triton
        if name.startswith("__"):
            raise AttributeError(name)
        raise _missing()


class _NoTriton:
    """Just enough of the `triton` module for a kernel module to be imported."""

    @staticmethod
    def jit(fn: Callable[..., Any] | None = None, **_options: Any) -> Any:
        if fn is None:  # @triton.jit(do_not_specialize=[...])
            return UnlaunchableKernel
        return UnlaunchableKernel(fn)

    def __getattr__(self, name: str) -> Any:
        raise _missing()


if triton is None:
    triton = _NoTriton()  # type: ignore[assignment]

__all__ = ["AVAILABLE", "UnlaunchableKernel", "tl", "triton"]
