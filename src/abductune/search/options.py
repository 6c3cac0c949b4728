"""One validator for every strategy's options (after Kernel Tuner's `common.get_options`):
each check names the strategy, the option, what it must be and what it got."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import AbductuneError


def _fail(strategy: str, name: str, must: str, got: Any) -> AbductuneError:
    return AbductuneError(f"{strategy}: option {name!r} must be {must}, got {got!r}")


def integer(strategy: str, name: str, v: Any, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = f" >= {lo}" if lo is not None and hi is None else f" in [{lo}, {hi}]" if hi is not None else ""
        raise _fail(strategy, name, f"an integer{rng}", v)
    return int(v)


def number(strategy: str, name: str, v: Any, lo: float | None = None, hi: float | None = None,
           hi_open: bool = False) -> float:
    bad = isinstance(v, bool) or not isinstance(v, (int, float)) or v != v
    if not bad and lo is not None and v < lo:
        bad = True
    if not bad and hi is not None and (v >= hi if hi_open else v > hi):
        bad = True
    if bad:
        end = ")" if hi_open else "]"
        raise _fail(strategy, name, f"a number in [{lo}, {hi}{end}", v)
    return float(v)


def boolean(strategy: str, name: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise _fail(strategy, name, "True or False", v)
    return v


def choice(strategy: str, name: str, v: Any, choices: Sequence[Any]) -> Any:
    if v not in choices:
        raise _fail(strategy, name, "one of " + ", ".join(map(repr, choices)), v)
    return v


def names(strategy: str, name: str, v: Any, *, allow_none: bool = True) -> list[str] | None:
    """A non-empty list of distinct parameter names (checked against the space later)."""
    if v is None and allow_none:
        return None
    if isinstance(v, str) or not isinstance(v, Sequence) or not v or not all(isinstance(x, str) for x in v) \
            or len(set(v)) != len(v):
        raise _fail(strategy, name, "a non-empty list of distinct parameter names", v)
    return list(v)


def roles(strategy: str, name: str, v: Any) -> tuple[str, ...]:
    """A list of parameter roles ("warps", "stages", "tile:M", ...), possibly empty."""
    if isinstance(v, str) or not isinstance(v, Sequence) or not all(isinstance(x, str) for x in v):
        raise _fail(strategy, name, "a list of parameter roles (e.g. ['warps', 'stages'], or [] for none)", v)
    return tuple(v)


def numeric_map(strategy: str, name: str, v: Any) -> dict[str, float]:
    if v is None:
        return {}
    if not isinstance(v, Mapping) or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                             for x in v.values()):
        raise _fail(strategy, name, "a dict of parameter name -> number", v)
    return dict(v)


def configs(strategy: str, name: str, v: Any) -> list[dict] | None:
    if v is None:
        return None
    if isinstance(v, Mapping) or not isinstance(v, Sequence) or not all(isinstance(c, Mapping) for c in v):
        raise _fail(strategy, name, "a list of dicts (parameter name -> value)", v)
    if not v:
        raise _fail(strategy, name, "a non-empty list of configs", v)
    return [dict(c) for c in v]
