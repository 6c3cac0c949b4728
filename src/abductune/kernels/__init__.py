"""The built-in kernel suite, by name. Kernel modules import triton (and torch inside the methods
that make tensors), so they are only imported when `get` is called; `names()` needs neither."""
from __future__ import annotations

import importlib
import os
import sys
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
        _CACHE[name] = _user_spec(name)
    if name not in _CACHE and name not in _REGISTRY:
        from . import zoo  # the zoo's names need no triton; its modules are imported on use

        if name in zoo.REGISTRY:
            _CACHE[name] = zoo.load(name)
    if name not in _CACHE:
        try:
            module, cls, dtype = _REGISTRY[name]
        except KeyError:
            from . import zoo

            raise AbductuneError(f"unknown kernel {name!r}; known kernels: {', '.join(_REGISTRY)}; "
                                 f"zoo kernels: {', '.join(zoo.names())}") from None
        mod = importlib.import_module(f"{__name__}.{module}")
        _CACHE[name] = getattr(mod, cls)(dtype)
    return _CACHE[name]


def _import_user_module(mod_name: str):
    try:
        return importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        # `module:Class` names a file in the current folder, like `python -m` finds it; retry
        # with the cwd on sys.path, but only when the module itself (not one it imports) is missing
        if e.name is None or mod_name.split(".")[0] != e.name.split(".")[0] or os.getcwd() in sys.path:
            raise
        sys.path.insert(0, os.getcwd())
        return importlib.import_module(mod_name)


def _user_spec(name: str) -> "KernelSpec":
    """The user's KernelSpec subclass named "module:Class", instantiated with no arguments."""
    from .base import KernelSpec

    mod_name, _, cls_name = name.partition(":")
    if not mod_name or not cls_name:
        raise AbductuneError(f"cannot load kernel {name!r}: write it as module:Class")
    try:
        cls = getattr(_import_user_module(mod_name), cls_name)
    except ImportError as e:
        raise AbductuneError(f"cannot load kernel {name!r}: {e} (run from the folder holding "
                             f"{mod_name.split('.')[0]}.py, or put it on PYTHONPATH)") from None
    except AttributeError as e:
        raise AbductuneError(f"cannot load kernel {name!r}: {e}") from None
    if not (isinstance(cls, type) and issubclass(cls, KernelSpec)):
        raise AbductuneError(f"cannot load kernel {name!r}: {cls_name} is not a KernelSpec subclass "
                             "(see abductune.kernels.base.KernelSpec)")
    try:
        spec = cls()
    except TypeError as e:  # abstract methods left out, or a constructor that needs arguments
        raise AbductuneError(f"cannot load kernel {name!r}: {e}") from None
    spec.name = name  # worker processes find it again by this name
    return spec


__all__ = ["get", "names"]
