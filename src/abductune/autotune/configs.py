"""Configs and spaces: a `triton.Config` as one flat dict, the space grown around a config list,
and a space config back as what a launch adds, a `triton.Config` or its JSON."""
from __future__ import annotations

import inspect
import itertools
from typing import Any, Callable, Mapping, Sequence

from ..errors import AbductuneError
from ..space import Choice as ChoiceParam
from ..space import IntRange, Param, Pow2, Space

# Options of a triton.Config besides its kwargs, with Triton's defaults (a param only when a
# config in the list sets a non-default value; num_warps and num_stages always).
OPTIONS = {"num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None, "ir_override": None}
ALWAYS = ("num_warps", "num_stages")
LAUNCH_KW = ("grid", "warmup")  # what KernelInterface.__getitem__ adds to every call
_HULL_MAX = 64  # an integer range wider than this is not filled in (only powers of two are)


def config_dict(cfg: Any) -> dict[str, Any]:
    """A triton.Config (or a plain dict) as one flat dict: its kwargs plus its options."""
    if isinstance(cfg, Mapping):
        return dict(cfg)
    kwargs = getattr(cfg, "kwargs", None)
    if not isinstance(kwargs, Mapping):
        raise AbductuneError(f"config {cfg!r} is neither a triton.Config nor a dict")
    out = dict(kwargs)
    for k, default in OPTIONS.items():
        out[k] = getattr(cfg, k, default)
    return out


def _param(name: str, values: list[Any], default: Any) -> Param:
    """The domain of one parameter: the list's values and the hull between them (every power
    of two between min and max when all are powers of two, else every integer when the span
    is small, else the powers of two in between)."""
    uniq = list(dict.fromkeys(values))
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in uniq)
    if ints and all(v > 0 and v & (v - 1) == 0 for v in uniq):
        return Pow2(name, min(uniq), max(uniq), default=default)
    if ints:
        lo, hi = min(uniq), max(uniq)
        if hi - lo <= _HULL_MAX:
            return IntRange(name, lo, hi, default=default)
        pows = [1 << k for k in range(max(lo, 1).bit_length(), hi.bit_length()) if lo < 1 << k < hi]
        return ChoiceParam(name, sorted(set(uniq) | set(pows)), default=default)
    return ChoiceParam(name, uniq, default=default, ordered=False)


def space_from_configs(configs: Sequence[Any], name: str = "") -> Space:
    """A space grown around a `triton.autotune` config list: one parameter per kwarg, plus
    num_warps and num_stages (and num_ctas / maxnreg / ir_override where a config sets them);
    the first config is the default. A kwarg missing from some configs takes None there."""
    dicts = [config_dict(c) for c in configs]
    if not dicts:
        raise AbductuneError("an empty config list grows no space; give configs or space=")
    names = list(dict.fromkeys(itertools.chain.from_iterable(dicts)))
    params = []
    for n in names:
        if n in OPTIONS and n not in ALWAYS and all(d.get(n, OPTIONS[n]) == OPTIONS[n] for d in dicts):
            continue  # an option nobody sets stays out of the space (and of its fingerprint)
        vals = [d.get(n, OPTIONS.get(n)) for d in dicts]
        params.append(_param(n, vals, vals[0]))
    return Space(params, name=name)


# what growth beyond the list's hull may move: tiles, warps, stages, the program grouping (roles
# that change how work is split, never what is computed); a parameter with another role or none
# (a chunk length the algorithm depends on, a split that changes rounding) keeps the list's values
_GROWS = ("tile", "warps", "stages", "group")
_WARPS_MAX = 32  # 1024 threads of 32 lanes, the most a block can have
_STAGES_MAX = 8


def grows(p: Param) -> bool:
    """Whether growth beyond the hull moves `p`: an ordered integer parameter whose role is a
    tile, warps, stages or the grouping."""
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in p.values)
    return p.ordered and ints and bool(p.role) and p.role.split(":")[0] in _GROWS


def _beyond(p: Param, steps: int) -> list[int]:
    """`steps` values beyond each end of `p` along its role: tiles, warps and the grouping x2
    and /2 (powers of two), stages +1 and -1, within what can launch."""
    lo, hi = min(p.values), max(p.values)
    pow2 = all(v > 0 and v & (v - 1) == 0 for v in p.values)
    top = _WARPS_MAX if p.role == "warps" else _STAGES_MAX if p.role == "stages" else None
    out = []
    for i in range(1, steps + 1):
        if pow2 and p.role != "stages":
            down, up = lo >> i, hi << i
        else:
            down, up = lo - i, hi + i
        if down >= 1:
            out.append(down)
        if top is None or up <= top:
            out.append(up)
    return out


def with_values(p: Param, extra: Sequence[int]) -> Param:
    """`p` with `extra` values added (same name, role and default)."""
    add = [v for v in extra if not p.contains(v)]
    if not add:
        return p
    vals = sorted(set(p.values) | set(add))
    if all(v > 0 and v & (v - 1) == 0 for v in vals) and all(b == 2 * a for a, b in zip(vals, vals[1:])):
        return Pow2(p.name, vals[0], vals[-1], role=p.role, default=p.default)
    if all(b == a + 1 for a, b in zip(vals, vals[1:])):
        return IntRange(p.name, vals[0], vals[-1], role=p.role, default=p.default)
    return ChoiceParam(p.name, vals, role=p.role, default=p.default)


def grow_space(space: Space, steps: int = 1) -> Space:
    """A config list is a hint, not a cage: `space` (grown around a list) with every ordered
    parameter whose role is a tile, warps, stages or the grouping extended `steps` values beyond
    each end (tiles x2 and /2, warps x2 and /2 up to 32, stages +1 and -1). What cannot launch on
    a problem's hardware is pruned when measuring (the resource model), as is what the kernel's
    own `early_config_prune` rejects. `steps=1` is what `budget=` searches; the theory store's
    predictions are read on a wider grown space (`theory_values`)."""
    params = [with_values(p, _beyond(p, steps)) if grows(p) else p for p in space.params]
    return Space(params, space.constraints, space.constants, name=space.name)


def fill_options(space: Space, d: Mapping[str, Any]) -> dict[str, Any]:
    """A list config as a full config of `space` (options it leaves out at their defaults)."""
    return {n: d.get(n, OPTIONS.get(n)) for n in space.names}


def launch_kwargs(config: Mapping[str, Any]) -> dict[str, Any]:
    """What a config adds to the kernel call (None: not passed, Triton's default applies)."""
    return {k: v for k, v in config.items() if v is not None}


def triton_config(config: Mapping[str, Any], pre_hook: Callable | None = None) -> Any:
    """A triton.Config for a space config (what `best_config` and exports show)."""
    import triton

    opts = {k: config[k] for k in OPTIONS if config.get(k) is not None}
    accepted = inspect.signature(triton.Config.__init__).parameters
    kw = {k: v for k, v in config.items() if k not in OPTIONS}
    return triton.Config(kw, **{k: v for k, v in opts.items() if k in accepted},
                         **({"pre_hook": pre_hook} if pre_hook is not None else {}))


def triton_config_json(config: Mapping[str, Any]) -> dict[str, Any]:
    """A config as `triton.Config.__dict__`, the shape Triton's `cache_results` file holds."""
    out: dict[str, Any] = {"kwargs": {k: v for k, v in config.items() if k not in OPTIONS}}
    for k, default in OPTIONS.items():
        out[k] = config.get(k, default)
    out["pre_hook"] = None
    return out
