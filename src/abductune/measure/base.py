"""The evaluator interface every strategy and session talks to."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Mapping, Sequence

from ..measurement import Measurement
from ..problem import Problem
from ..space import Space


class Evaluator(ABC):
    """Measures configs. `clock` is the seconds spent so far (compile + benchmark), real for a
    live evaluator and simulated for replay, so budgets in seconds mean the same in both."""

    space: Space
    problem: Problem
    clock: float = 0.0

    @abstractmethod
    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        """One measurement per config, in order; never raises for a failing config."""

    def remeasure(self, configs: Sequence[Mapping[str, Any]], *, rounds: int = 1) -> list[Measurement]:
        """Time configs again (already compiled), interleaved over `rounds` when the evaluator
        can: the fresh rows a confirmation or a final run-off needs. Default: evaluate again."""
        return self.evaluate(configs)

    def prefetch_hint(self, configs: Sequence[Mapping[str, Any]]) -> None:
        """Configs that will be asked for later: an evaluator that compiles may start now."""

    def close(self) -> None:
        """Release workers or devices (no-op by default)."""
