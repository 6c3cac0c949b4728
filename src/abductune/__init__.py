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
from .datasets.format import Dataset, read_dataset
from .datasets.public import load_any as load_dataset
from .errors import AbductuneError, DatasetError, SpaceError, StoreError
from .hardware import HardwareInfo
from .measure.base import Evaluator
from .measure.replay import NoiseModel, ReplayEvaluator
from .measurement import Measurement, Status
from .problem import Problem
from .search import STRATEGIES, Budget, Strategy, make_strategy
from .search.base import Seed
from .session import Session, SessionResult
from .space import Bool, Choice, IntRange, Param, Pow2, Space
from .store import Context, Store

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


def __getattr__(name: str):  # the decorator imports triton: load it only when asked for
    if name in ("autotune", "patch_triton"):
        import importlib

        module = importlib.import_module(".autotune", __name__)
        # the submodule `abductune.autotune` would shadow the decorator of the same name
        globals().update(autotune=module.autotune, patch_triton=module.patch_triton)
        return globals()[name]
    raise AttributeError(f"module 'abductune' has no attribute {name!r}")
