"""Imported by a compile worker in tests: its import fails unless the worker has turned off the
compile pool's early start, which a module decorated with @abductune.autotune would otherwise
trigger inside every worker (a pool of pools)."""
import os

if os.environ.get("ABDUCTUNE_COMPILE_POOL") != "miss":
    raise ImportError("a compile worker must not start a compile pool of its own")
