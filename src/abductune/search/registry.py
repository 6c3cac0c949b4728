"""Strategy names -> classes, for the CLI and the evaluation harness."""
from __future__ import annotations

from typing import Any

from ..errors import AbductuneError
from .abduction import Abduction
from .base import Strategy
from .beam import BeamSearch
from .coordesc import CoordinateDescent
from .exhaustive import Exhaustive
from .fixed import FixedList
from .genetic import GeneticAlgorithm
from .pattern import PatternSearch
from .random import RandomSearch
from .tpe import TPE

STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (Exhaustive, RandomSearch, FixedList, CoordinateDescent, BeamSearch,
                              GeneticAlgorithm, PatternSearch, TPE, Abduction)
}


def make_strategy(name: str, seed: int = 0, **options: Any) -> Strategy:
    try:
        cls = STRATEGIES[name]
    except KeyError:
        raise AbductuneError(f"unknown strategy {name!r}; known: {', '.join(sorted(STRATEGIES))}") from None
    return cls(seed=seed, **options)
