"""Imported once by the compile pool's fork server (live.py `_pool_context`), so every
compile worker forked from it starts with Triton and the built-in kernels loaded. Not torch:
offline workers compile on stand-in tensors (worker.DuckTensor); the rest import it then.
Nothing here may touch CUDA: the workers compile offline or create their own context."""
from __future__ import annotations

import contextlib

with contextlib.suppress(ImportError):
    from abductune import kernels
    from abductune.measure import worker  # noqa: F401

    for _name in kernels.names():
        with contextlib.suppress(Exception):
            kernels.get(_name)
