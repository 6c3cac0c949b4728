"""Tile sizes the caller fixes: a tile-like constexpr passed in the call (Liger's fused MoE
passes BLOCK_M itself and lists only BLOCK_N, BLOCK_K, warps and stages) joins the key's space
as a one-valued parameter with its role, so diagnosis, the resource model, the ranker, the
theory store and NVIDIA's model see the whole tile (without it a matmul has no tile along M and
none of them can size the rest). Nothing more is searched; the launch still gets the value
from the caller, never twice (`FixedEvaluator` takes it out of each config before launching and
puts it back in what it answers)."""
from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Mapping, Sequence

from ..measurement import Measurement
from ..space import Choice, Space, infer_role
from .configs import LAUNCH_KW, OPTIONS


def _constexpr(tuner: Any, name: str) -> bool:
    """Whether `name` is a constexpr parameter of the kernel (True where the kernel does not say)."""
    params = getattr(getattr(tuner, "base_fn", None), "params", None)
    if not params:
        return True
    p = next((p for p in params if getattr(p, "name", None) == name), None)
    return p is not None and bool(getattr(p, "is_constexpr", True))


def call_fixed(tuner: Any, space: Space, kwargs: Mapping[str, Any]) -> dict[str, int]:
    """The call's keyword arguments that fix a tile: a positive int passed by name, that no
    parameter of `space` tunes, whose name reads as a tile (`space.infer_role`), and that the
    kernel takes as a constexpr."""
    out = {}
    for name, v in kwargs.items():
        if name in space.names or name in LAUNCH_KW or name in OPTIONS:
            continue
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            continue
        role = infer_role(name)
        if role is not None and role.startswith("tile") and space.by_role(role) is None and _constexpr(tuner, name):
            out[name] = v
    return out


def with_fixed(space: Space, fixed: Mapping[str, int]) -> Space:
    """`space` with each call-fixed tile as a one-valued parameter (role from its name)."""
    if not fixed:
        return space
    params = [*space.params, *(Choice(n, [v], default=v) for n, v in fixed.items())]
    return Space(params, space.constraints, space.constants, name=space.name)


def fixed_of(space: Space, base: Space) -> dict[str, Any]:
    """What `with_fixed` added to `base` to make `space` (empty when nothing was)."""
    return {p.name: p.values[0] for p in space.params if p.name not in base.names}


def without(space: Space, fixed: Mapping[str, Any]) -> Space:
    """`space` less the call-fixed parameters (the kernel's own space, which the launch fills in)."""
    return Space([p for p in space.params if p.name not in fixed], space.constraints, space.constants,
                 name=space.name)


def own(cfg: Mapping[str, Any], base: Space) -> dict[str, Any]:
    """A config of a key's space as the kernel's own space `base` holds it (an implementation's
    `{"impl": name}` as it is): without the tiles the caller fixes, whatever they were."""
    return {k: v for k, v in cfg.items() if k in base.names or k == "impl"}


def strip(cfg: Mapping[str, Any], fixed: Mapping[str, Any]) -> dict[str, Any]:
    """A config of the augmented space as the launch takes it (the caller passes the rest)."""
    return {k: v for k, v in cfg.items() if k not in fixed}


class FixedEvaluator:
    """An evaluator over the augmented space (`with_fixed`) that measures through `inner`, an
    evaluator of the kernel's own space: configs lose the call-fixed values on the way in and
    get them back on the way out. Everything else is `inner`'s."""

    # methods that take configs: forwarded only where `inner` has them (callers test hasattr)
    _TRANSLATED = ("stream", "expect")

    def __init__(self, inner: Any, space: Space, fixed: Mapping[str, Any]):
        self.inner, self.space, self.fixed = inner, space, dict(fixed)
        self.problem = inner.problem
        if hasattr(inner, "stream"):
            self.stream = self._stream
        if hasattr(inner, "expect"):
            self.expect = self._expect

    def _in(self, configs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return [dict(c) if "impl" in c else strip(c, self.fixed) for c in configs]

    @staticmethod
    def _out(ms: Sequence[Measurement], configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        return [dataclasses.replace(m, config=dict(c)) for m, c in zip(ms, configs)]

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        return self._out(self.inner.evaluate(self._in(configs)), configs)

    def remeasure(self, configs: Sequence[Mapping[str, Any]], *, rounds: int = 1) -> list[Measurement]:
        return self._out(self.inner.remeasure(self._in(configs), rounds=rounds), configs)

    def prefetch_hint(self, configs: Sequence[Mapping[str, Any]]) -> None:
        self.inner.prefetch_hint(self._in(configs))

    def _expect(self, configs: Sequence[Mapping[str, Any]]) -> None:
        self.inner.expect(self._in(list(configs)))

    def _stream(self, configs: Sequence[Mapping[str, Any]]) -> Iterator[tuple[list[int], list[Measurement]]]:
        configs = list(configs)
        for idx, ms in self.inner.stream(self._in(configs)):
            yield idx, self._out(ms, [configs[i] for i in idx])

    def close(self) -> None:
        self.inner.close()

    @property
    def clock(self) -> float:
        return self.inner.clock

    @property
    def warm(self) -> Any:
        """`inner`'s compile warmer (a recorder hands it the configs to come), taking configs of
        the augmented space; None where `inner` has none."""
        w = getattr(self.inner, "warm", None)
        return None if w is None else (lambda configs: w(self._in(configs)))

    @warm.setter
    def warm(self, value: Any) -> None:
        self.inner.warm = value

    def __getattr__(self, name: str) -> Any:
        if name in self._TRANSLATED or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.inner, name)
