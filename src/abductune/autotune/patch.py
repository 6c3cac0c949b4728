"""`patch_triton`: make `triton.autotune` build abductune autotuners, so third-party
`@triton.autotune` kernels get the store, bucketing and search without edits (reversible)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from .autotuner import Autotuner, autotune


@dataclass
class TritonPatch:
    """`triton.autotune` replaced by abductune's (with `options` as defaults) until `undo()`
    or the end of the `with` block. Patches nest; undo them in reverse order."""

    options: dict[str, Any] = field(default_factory=dict)
    _saved: list[tuple[Any, str, Any]] = field(default_factory=list)
    autotuners: list[Autotuner] = field(default_factory=list)  # built while the patch was on

    def apply(self) -> "TritonPatch":
        import triton
        import triton.runtime
        import triton.runtime.autotuner

        opts = dict(self.options)

        def patched(configs: Sequence[Any] | None = None, key: Sequence[str] = (), *a: Any, **kw: Any) -> Any:
            decorate = autotune(configs, key, *a, **{**opts, **kw})

            def built(fn: Any) -> Autotuner:
                tuner = decorate(fn)
                self.autotuners.append(tuner)
                return tuner
            return built
        patched.__doc__ = autotune.__doc__
        for mod in (triton, triton.runtime, triton.runtime.autotuner):
            if hasattr(mod, "autotune"):
                self._saved.append((mod, "autotune", mod.autotune))
                mod.autotune = patched
        return self

    def undo(self) -> None:
        while self._saved:
            mod, attr, old = self._saved.pop()
            setattr(mod, attr, old)

    def __enter__(self) -> "TritonPatch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.undo()


def patch_triton(**options: Any) -> TritonPatch:
    """Make `triton.autotune` (and `triton.runtime.autotuner.autotune`) build abductune
    autotuners, so third-party `@triton.autotune` kernels get the store, bucketing and search
    without edits. Kernels decorated while the patch is active are affected (import their
    modules after patching). Reversible: `p = patch_triton(); ...; p.undo()`, or
    `with abductune.patch_triton(store=...): import their_kernels`."""
    return TritonPatch(dict(options)).apply()
