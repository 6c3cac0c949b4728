"""abductune.inductor's process state: the torch version check, the live enables, what the seam replaced."""
from __future__ import annotations

import inspect
import threading
from typing import Any

from ..errors import AbductuneError
from .versions import major_minor

SUPPORTED = ((2, 11), (2, 13))  # torch minor versions, both ends included


class InductorVersionError(AbductuneError):
    """This torch is outside the versions whose Inductor abductune knows how to hook."""


def torch_version(version: str) -> tuple[int, int]:
    """(major, minor) of a torch version string ("2.13.0+cpu" -> (2, 13))."""
    try:
        return major_minor(version)
    except ValueError:
        raise InductorVersionError(f"cannot read the torch version {version!r}") from None


def check_torch(version: str | None = None) -> Any:
    """Inductor's modules when this torch is supported; else InductorVersionError, one line."""
    lo, hi = SUPPORTED
    want = f"torch {lo[0]}.{lo[1]} to {hi[0]}.{hi[1]}"
    if version is None:
        try:
            import torch
        except ImportError:
            raise InductorVersionError(f"abductune.inductor needs torch ({want}); torch is not installed") from None
        version = torch.__version__
    if not lo <= torch_version(version) <= hi:
        raise InductorVersionError(f"abductune.inductor supports {want}; this is torch {version}: install one of "
                                   "those, or leave abductune.inductor off")
    from torch._inductor import async_compile
    from torch._inductor.runtime import hints, triton_heuristics

    cached_autotune = _ORIGINAL.get("cached_autotune", triton_heuristics.cached_autotune)  # ours while loading
    methods = ("coordinate_descent_tuning", "_precompile_config", "bench")
    missing = [name for name, ok in (
        ("async_compile._load_triton_kernel_from_source",
         callable(getattr(async_compile, "_load_triton_kernel_from_source", None))),
        ("cached_autotune(caching_autotuner_cls=...)",
         "caching_autotuner_cls" in inspect.signature(cached_autotune).parameters),
        ("CachingAutotuner.coordinate_descent_tuning",
         all(hasattr(triton_heuristics.CachingAutotuner, m) for m in methods)),
        ("hints.TRITON_MAX_BLOCK", hasattr(hints, "TRITON_MAX_BLOCK")),
    ) if not ok]
    if missing:
        raise InductorVersionError(f"torch {version}'s Inductor has no {missing[0]}, which abductune.inductor hooks "
                                   f"(supported: {want})")
    return triton_heuristics


# ----------------------------------------------------------------------------- the live enables

_LOCK = threading.RLock()
_STACK: list[Any] = []  # the live enables (inductor.Handle) of this process, innermost last
_ORIGINAL: dict[str, Any] = {}  # what the seam replaced, to put back


def active() -> Any:
    """The innermost live `enable()` of this process (an inductor.Handle), or None."""
    with _LOCK:
        return _STACK[-1] if _STACK else None


def _live(token: str) -> Any:
    """The live enable whose settings carry `token`, or None (in a compile worker, always)."""
    with _LOCK:
        return next((h for h in _STACK if h.settings.token == token), None)
