"""The built-in kernel suite, by name. Kernel modules import triton (and torch inside the methods
that make tensors), so they are only imported when `get` is called; `names()` needs neither."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..errors import AbductuneError

if TYPE_CHECKING:
    from .base import KernelSpec

# name -> (module, class, constructor argument: the element dtype)
_REGISTRY: dict[str, tuple[str, str, str]] = {
    "matmul_fp16": ("matmul", "MatmulSpec", "fp16"),
    "matmul_bf16": ("matmul", "MatmulSpec", "bf16"),
    "softmax_fp16": ("softmax", "SoftmaxSpec", "fp16"),
    "rmsnorm_fp16": ("norm", "RMSNormSpec", "fp16"),
    "rmsnorm_bf16": ("norm", "RMSNormSpec", "bf16"),
    "gelu_mul_fp16": ("elementwise", "GeluMulSpec", "fp16"),
}
_CACHE: dict[str, "KernelSpec"] = {}


def names() -> list[str]:
    return list(_REGISTRY)


def get(name: str) -> "KernelSpec":
    """The built-in kernel called `name` (one instance per process)."""
    if name not in _CACHE and ":" in name:  # "package.module:Class", a user's own KernelSpec
        mod_name, _, cls_name = name.partition(":")
        try:
            spec = getattr(importlib.import_module(mod_name), cls_name)()
        except (ImportError, AttributeError) as e:
            raise AbductuneError(f"cannot load kernel {name!r}: {e}") from None
        spec.name = name  # worker processes find it again by this name
        _CACHE[name] = spec
    if name not in _CACHE:
        try:
            module, cls, dtype = _REGISTRY[name]
        except KeyError:
            raise AbductuneError(f"unknown kernel {name!r}; known kernels: {', '.join(_REGISTRY)}") from None
        mod = importlib.import_module(f"{__name__}.{module}")
        _CACHE[name] = getattr(mod, cls)(dtype)
    return _CACHE[name]


__all__ = ["get", "names"]
