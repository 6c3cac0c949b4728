"""The seed-heuristic contract: `AutotunerHeuristic`, a registry per backend, and
`register_heuristic` (after Helion's `autotuner_heuristics/registry.py`).

A heuristic looks at a problem (and the hardware) and proposes at most one *partial* config,
addressing parameters by role ("@tile:M", "@warps") or by name; `seeds.seed_configs` turns
it into a full valid config and records what every heuristic did.
"""
from __future__ import annotations

from typing import Any, Mapping

from ..classify import classify
from ..errors import AbductuneError
from ..hardware import HardwareInfo, hardware_matches
from ..problem import Problem
from ..space import Space


class AutotunerHeuristic:
    """Base class. Set `name` (unique within a backend) and `backend`, and override
    `get_seed_config`. The default `is_eligible` checks the class attributes
    `kernel_classes` (a tuple of classes, empty = any) and the hardware criteria `vendor`,
    `min_cc`, `max_cc`, `family`, `name_pattern` (unset = any; with any set, unknown
    hardware is ineligible)."""

    name: str = ""
    backend: str = "triton"
    kernel_classes: tuple[str, ...] = ()
    vendor: str | None = None
    min_cc: tuple[int, int] | None = None
    max_cc: tuple[int, int] | None = None
    family: str | None = None
    name_pattern: str | None = None

    def is_eligible(self, problem: Problem, hardware: HardwareInfo | None) -> bool:
        if self.kernel_classes and classify(problem).kernel_class not in self.kernel_classes:
            return False
        return hardware_matches(hardware, vendor=self.vendor, min_cc=self.min_cc,
                                max_cc=self.max_cc, family=self.family,
                                name_pattern=self.name_pattern)

    def get_seed_config(self, problem: Problem, hardware: HardwareInfo | None,
                        space: Space) -> Mapping[str, Any] | None:
        """A partial config (keys: parameter names or "@role"), or None for no opinion."""
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.backend}:{self.name}>"


class HeuristicRegistry:
    """Heuristics per backend, in registration order (earlier ones seed first)."""

    def __init__(self) -> None:
        self._by_backend: dict[str, list[AutotunerHeuristic]] = {}

    def register(self, heuristic: AutotunerHeuristic | type, *, replace: bool = False) -> Any:
        """Add a heuristic (an instance, or a class made with no arguments). A second one of
        the same name and backend is refused unless `replace`. Returns what was passed, so
        it works as a class decorator."""
        h = heuristic() if isinstance(heuristic, type) else heuristic
        if not isinstance(h, AutotunerHeuristic):
            raise AbductuneError(f"{heuristic!r} is not an AutotunerHeuristic")
        if not h.name:
            raise AbductuneError(f"heuristic {type(h).__name__} has no name: set its `name`")
        lst = self._by_backend.setdefault(h.backend, [])
        for i, old in enumerate(lst):
            if old.name == h.name:
                if not replace:
                    raise AbductuneError(f"a heuristic named {h.name!r} is already registered "
                                         f"for backend {h.backend!r}; pass replace=True")
                lst[i] = h
                return heuristic
        lst.append(h)
        return heuristic

    def unregister(self, name: str, backend: str = "triton") -> bool:
        lst = self._by_backend.get(backend, [])
        n = len(lst)
        lst[:] = [h for h in lst if h.name != name]
        return len(lst) < n

    def heuristics(self, backend: str = "triton") -> list[AutotunerHeuristic]:
        return list(self._by_backend.get(backend, []))

    def get(self, name: str, backend: str = "triton") -> AutotunerHeuristic | None:
        return next((h for h in self._by_backend.get(backend, []) if h.name == name), None)

    def backends(self) -> list[str]:
        return sorted(self._by_backend)

    def copy(self) -> "HeuristicRegistry":
        r = HeuristicRegistry()
        r._by_backend = {b: list(v) for b, v in self._by_backend.items()}
        return r


REGISTRY = HeuristicRegistry()


def register_heuristic(heuristic: Any = None, *, registry: HeuristicRegistry | None = None,
                       replace: bool = False) -> Any:
    """Register into the global registry; usable as `@register_heuristic` on a class."""
    reg = registry or REGISTRY
    if heuristic is None:
        return lambda h: reg.register(h, replace=replace)
    return reg.register(heuristic, replace=replace)
