"""`@abductune.autotune`: a drop-in for `@triton.autotune`. The two-line change:

    import abductune                                   # was: (nothing)
    @abductune.autotune(configs=[...], key=["M", "N", "K"])   # was: @triton.autotune(...)
    @triton.jit
    def matmul_kernel(...): ...

Same call shape and semantics as `triton.autotune` (configs, key, prune_configs_by,
reset_to_zero, restore_value, pre_hook, post_hook, config-level pre_hook, do_bench,
cache_results, warmup/rep); in addition:

- every key is tuned once per *store*, not once per process: a second process (another rank,
  the next run of the script) reads the winner from the store and measures nothing;
- `bucket=` maps key values to buckets ("exact", "pow2", ("align", N), a callable), so two
  sizes in one bucket tune once;
- `space=` / `strategy=` / `budget=` search around the given configs instead of measuring
  only the list (with a list only and no budget, the list is measured, as Triton does; with a
  budget, one step beyond the list's hull and the theory store's predictions too);
- `reference=` rejects configs with wrong outputs; `implementations=` lets torch / cuBLAS /
  another kernel compete per key; `on_miss="predict"` serves a stored neighbour's winner at
  once and tunes in a background thread; `isolate=True` measures in a restartable worker
  process, so a config that crashes or hangs is a failed measurement, not a dead caller
  (measure/isolated.py).

The package, one concept a module (the mechanism reads in autotuner.py, as Triton's in its
`runtime/autotuner.py`):

- autotuner.py: the `Autotuner` and its call path (hit, miss, store, tune), and `autotune()`;
- arguments.py: the decorator's arguments, checked and set on an `Autotuner` when it is built;
- keys.py: key values and buckets, the kernel's source hash, the Problem and store context of
  a missed key, and the claim that lets one process tune it;
- ranks.py: the same claim across the machines of a torch.distributed job, through its c10d store;
- configs.py: `triton.Config` <-> space configs, the space grown around a config list;
- choices.py: what a key launches (`Choice`, `pick`, `stored_winner`) and the predictions a
  missed key serves or seeds its tune with;
- evaluation.py: a kernel call as an evaluator (launches, hooks, reference check, timer);
- compiling.py: whether worker processes can compile the kernel, and the `Warmer` that hands
  them the configs to come (heuristics under the autotuner computed here, sent as constexprs);
- compile_workers.py: the compile pool, started where a kernel is decorated, and its workers;
- phases.py: where a missed key's tune spent its time (`Autotuner.phases`);
- isolation.py, isolated_worker.py: isolate=True, the caller's side and the worker's;
- record.py: record mode (`abductune sweep --call`);
- patch.py: `patch_triton`, for third-party kernels: every Triton autotuner built under it
  (triton.autotune's, one built directly, a library's subclass) becomes abductune's.
"""
from __future__ import annotations

import sys
from typing import Any

# every public name of the single module this package was split from stays importable here; the
# autotuner and the patch import Triton (a subclass of its Autotuner), so they load on first use:
# `abductune cache` reads choices and configs without Triton installed
from .choices import Choice, pick, stored_winner
from .compiling import CompilePool, compile_plan, compile_server  # noqa: F401
from .configs import (OPTIONS, config_dict, grow_space, launch_kwargs, space_from_configs,  # noqa: F401
                      triton_config, triton_config_json)
from .evaluation import PRINT_ENV  # noqa: F401
from .keys import bucket_function, kernel_source_hash, key_value  # noqa: F401

__all__ = ["autotune", "Autotuner", "Choice", "patch_triton", "space_from_configs", "kernel_source_hash",
           "bucket_function", "compile_plan", "pick", "stored_winner", "triton_config_json"]

_LAZY = {"Autotuner": "autotuner", "autotune": "autotuner", "TritonPatch": "patch", "patch_triton": "patch"}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{where}", __name__), name)
    globals()[name] = value
    return value


class _CallableModule(type(sys)):  # type: ignore[misc]
    """`import abductune.autotune` makes Python bind the *module* to `abductune.autotune`
    (after the package bound the decorator there); calling the module calls the decorator,
    so `@abductune.autotune(...)` works whichever import ran first."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from .autotuner import autotune

        return autotune(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
