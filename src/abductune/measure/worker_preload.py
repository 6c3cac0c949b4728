"""Imported once by the fork server the workers start from (forkserver.py `_server_context`), so
every compile worker and the benchmark worker start with torch, Triton and the built-in
kernels loaded: one import in all, not one per worker contending for the CPU (Triton 3.6
imports torch at a worker's first compile even on stand-in tensors). Nothing here may touch
CUDA: workers compile offline or create their own context after the fork."""
from __future__ import annotations

import contextlib

with contextlib.suppress(ImportError):
    import torch  # noqa: F401

with contextlib.suppress(ImportError):
    from abductune import kernels
    from abductune.measure import worker  # noqa: F401

    for _name in kernels.names():
        with contextlib.suppress(Exception):
            kernels.get(_name)
