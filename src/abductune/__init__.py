"""abductune: an autotuner for Triton kernels that explains why a config is slow.

What a library user needs, in one import:

    import abductune as at
    space = at.Space([at.Pow2("BLOCK", 64, 1024, role="tile:X"), at.Choice("num_warps", [2, 4, 8])])
    with at.Session(at.ReplayEvaluator(at.load_dataset("my.jsonl.gz")), strategy="pattern",
                    budget=at.Budget(32)) as s:
        print(s.run().winner)

See docs/LIBRARY.md. torch and triton are imported only by the live evaluator, the kernels
and the decorator, never here.
"""
from .errors import AbductuneError, DatasetError, SpaceError, StoreError

# Exported names load on first use (PEP 562): `abductune tune` sent to a daemon imports this
# package to reach its small client, and the eager imports (numpy, spaces, strategies) were
# most of that command's 0.4 s.
_LAZY = {
    "Dataset": ".datasets.format", "read_dataset": ".datasets.format",
    "load_dataset": (".datasets.public", "load_any"),
    "HardwareInfo": ".hardware", "Evaluator": ".measure.base",
    "NoiseModel": ".measure.replay", "ReplayEvaluator": ".measure.replay",
    "Measurement": ".measurement", "Status": ".measurement", "Problem": ".problem",
    "STRATEGIES": ".search", "Budget": ".search", "Strategy": ".search", "make_strategy": ".search",
    "Seed": ".search.base", "Session": ".session", "SessionResult": ".session",
    "Bool": ".space", "Choice": ".space", "IntRange": ".space", "Param": ".space", "Pow2": ".space",
    "Space": ".space", "Context": ".store", "Store": ".store",
}

__version__ = "0.2.0"

__all__ = [
    "AbductuneError", "DatasetError", "SpaceError", "StoreError",
    "Space", "Param", "Pow2", "IntRange", "Choice", "Bool",
    "Problem", "HardwareInfo", "Measurement", "Status",
    "Session", "SessionResult", "Budget", "Seed", "Strategy", "STRATEGIES", "make_strategy",
    "Evaluator", "ReplayEvaluator", "NoiseModel",
    "Dataset", "read_dataset", "load_dataset",
    "Store", "Context",
]


def __getattr__(name: str):
    import importlib

    if name in ("autotune", "patch_triton"):  # the decorator imports triton: only when asked for
        module = importlib.import_module(".autotune", __name__)
        # the submodule `abductune.autotune` would shadow the decorator of the same name
        globals().update(autotune=module.autotune, patch_triton=module.patch_triton)
        return globals()[name]
    if name in ("inductor", "helion"):  # abductune inside torch.compile / Helion (the integration modules)
        module = importlib.import_module(f".integrations.{name}", __name__)
        globals()[name] = module
        return module
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'abductune' has no attribute {name!r}")
    module_name, attr = (where, name) if isinstance(where, str) else where
    value = getattr(importlib.import_module(module_name, __name__), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | {"autotune", "patch_triton", "inductor", "helion"})
