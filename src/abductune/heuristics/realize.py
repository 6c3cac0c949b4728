"""From a proposal to a config: role keys resolved, values read, tiles capped at the problem.

A seed (a heuristic's partial config or an observed template) addresses parameters by name
or by "@role". `realize` merges it onto the space's default, moves each value to its
parameter's nearest allowed value, caps tiles at the next power of two of the dim they cover
(unless the space allows nothing that small), and, if a constraint still rejects it, takes
`Space.nearest_valid` under the same caps, keeping the proposal's own values where it can.
So a seed is always a full, valid config. `template_keys` goes the other way: a measured
config re-keyed by role so that it transfers to other kernels of the class.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from ..classify import Classification, classify, next_pow2, tile_dim
from ..errors import InvalidSeed
from ..problem import Problem
from ..space import Config, Param, Space


def resolve_keys(space: Space, partial: Mapping[str, Any]) -> tuple[dict[str, Any], list[str], list[str]]:
    """(values by parameter name, role keys the space lacks or holds twice, unknown names).
    Keys are parameter names or "@role"; a name given explicitly wins over its role."""
    out: dict[str, Any] = {}
    dropped: list[str] = []
    unknown: list[str] = []
    items = list(partial.items())
    for k, v in items:  # roles first, so explicit names override them
        if isinstance(k, str) and k.startswith("@"):
            ps = [p for p in space.params if p.role == k[1:]]
            if len(ps) == 1:
                out[ps[0].name] = v
            else:
                dropped.append(k)
    for k, v in items:
        if isinstance(k, str) and k.startswith("@"):
            continue
        if isinstance(k, str) and k in space.names:
            out[k] = v
        else:
            unknown.append(str(k))
    return out, dropped, unknown


def template_keys(space: Space, config: Mapping[str, Any]) -> dict[str, Any]:
    """A full config re-keyed for transfer: "@role" where the parameter's role is unique in
    the space, the parameter name otherwise."""
    counts: dict[str, int] = {}
    for p in space.params:
        if p.role:
            counts[p.role] = counts.get(p.role, 0) + 1
    out = {}
    for p in space.params:
        if p.name in config:
            key = f"@{p.role}" if p.role and counts[p.role] == 1 else p.name
            out[key] = config[p.name]
    return out


def template_scope(space: Space) -> str:
    """"" when every parameter has a role of its own (templates transfer between kernels
    by role), else "names:" + the sorted parameter names (templates bind to this set)."""
    roles = [p.role for p in space.params]
    if all(roles) and len(set(roles)) == len(roles):
        return ""
    return "names:" + ",".join(sorted(space.names))


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _coerce(p: Param, v: Any) -> Any:
    """`v` if allowed, the nearest allowed number for a numeric ordered parameter, else
    InvalidSeed (unlike `Param.clamp`, an unreadable choice is an error, not the default)."""
    if isinstance(v, np.generic):
        v = v.item()
    if p.contains(v):
        return v
    numeric = p.ordered and all(_is_number(x) for x in p.values)
    if numeric and _is_number(v) and math.isfinite(float(v)):
        return p.clamp(v)
    raise InvalidSeed(f"value {v!r} for parameter {p.name!r} is not one of {list(p.values)}")


def problem_caps(space: Space, cls: Classification | None) -> dict[str, Any]:
    """Largest allowed value of each tile parameter: the largest value not above the next
    power of two of its dim, or the smallest value when the space allows none that small."""
    if cls is None:
        return {}
    caps: dict[str, Any] = {}
    for p in space.params:
        d = tile_dim(p.role, cls)
        if d is None or d < 1 or not p.ordered or not all(_is_number(x) for x in p.values):
            continue
        cap = next_pow2(d)
        allowed = [v for v in p.values if v <= cap]
        caps[p.name] = max(allowed) if allowed else min(p.values)
    return caps


def realize(space: Space, partial: Mapping[str, Any], problem: Problem | None = None, *,
            base: Mapping[str, Any] | None = None, cls: Classification | None = None) -> Config:
    """A full valid config from a partial one: merged onto `base` (the space default when
    None or invalid), clamped into the domains and under the problem's tile caps, then the
    nearest valid config when constraints still reject it. Raises InvalidSeed when a key is
    an unknown parameter name or a value cannot be read."""
    if not isinstance(partial, Mapping):
        raise InvalidSeed(f"expected a dict of parameter values, got {type(partial).__name__}")
    values, _, unknown = resolve_keys(space, partial)
    if unknown:
        raise InvalidSeed(f"unknown parameter(s) {', '.join(unknown)} (parameters: "
                          f"{', '.join(space.names)}; roles: "
                          f"{', '.join('@' + r for r in space.roles())})")
    values = {n: _coerce(space[n], v) for n, v in values.items()}
    b = dict(base) if base is not None else None
    if b is None or not space.is_valid(b):
        b = space.default()
    if cls is None and problem is not None:
        cls = classify(problem, space)
    return space.complete(values, base=b, caps=problem_caps(space, cls))
