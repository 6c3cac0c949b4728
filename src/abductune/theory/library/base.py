"""What every theory is made of: the `Theory` and `Hypothesis` records, shared thresholds and role helpers."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from ...problem import Problem
from ...space import Config, Space
from ..diagnose import Diagnosis, tiled_dims

Applies = Callable[[Diagnosis, Problem, Space, Config], bool]
Propose = Callable[[Diagnosis, Problem, Space, Config], "list[Config]"]
Gain = Callable[[Diagnosis, Problem, Space, Config, Config], float]


@dataclass(frozen=True)
class Theory:
    """One explanation of slowness: a precondition, role moves, and a predicted effect."""

    name: str
    reasoning: str  # one line: why the moves should help
    applies: Applies = field(repr=False)
    propose: Propose = field(repr=False)
    expected_gain: Gain = field(repr=False)
    # its moves are interactions (two roles at once, effects that cancel one by one): a model
    # that adds per-parameter effects cannot rank them, so the engine takes the prior alone
    interaction: bool = False


@dataclass(frozen=True)
class Hypothesis:
    """A test the engine may run: `to_config` should beat `from_config` by `expected_gain`."""

    theory: str
    from_config: dict[str, Any] = field(hash=False)
    to_config: dict[str, Any] = field(hash=False)
    expected_gain: float = 0.0
    reason: str = ""

    @property
    def changes(self) -> dict[str, tuple[Any, Any]]:
        """name -> (from, to) for every parameter the hypothesis moves."""
        return {k: (self.from_config.get(k), v) for k, v in self.to_config.items()
                if self.from_config.get(k) != v}


# ----------------------------------------------------------------------------- thresholds

PADDING_MIN = 0.10        # below 10% padding the masked lanes are not worth a tile change
PADDING_BUSY_FLOOR = 0.10  # masked lanes cost issue slots and registers even when memory binds
WAVE_EFF_MIN = 0.80       # a last wave under 80% full wastes more than a tile change risks
NEAR_ROOF = 0.75          # within 75% of the roof, deeper pipelines have little left to hide
GROUP_MIN_TILES = 4       # grouping needs several tile rows and columns to reorder
DEFAULT_HEADROOM = 1.0    # when no roofline is known, assume up to 2x can be gained
# Elements of the tile each thread should own: matmul accumulators below 16 leave warps waiting
# on one small MMA, above 64 crowd registers (128 is ptxas's spill edge with 255 registers);
# row and elementwise kernels want one or two 16-byte vectors per thread and not much more.
ELEMS_PER_THREAD = {"matmul": (16, 64), "quantized_matmul": (16, 64), "attention": (16, 64)}
ELEMS_PER_THREAD_OTHER = (4, 16)


# ----------------------------------------------------------------------------- role helpers

def step_roles(space: Space, config: Mapping[str, Any], steps: Mapping[str, int],
               adjust: Sequence[str] = ("warps",)) -> Config | None:
    """`config` with each role's parameter moved `steps[role]` positions; None when a role is
    absent or would step past its end. When the result breaks a constraint, the first of
    `adjust` roles' steps (+1, -1, +2, -2) that makes it valid is taken; None if none does."""
    cfg = dict(config)
    for role, delta in steps.items():
        p = space.by_role(role)
        if p is None or p.name not in cfg:
            return None
        v = p.step(cfg[p.name], delta)
        if v is None:
            return None
        cfg[p.name] = v
    if space.is_valid(cfg):
        return cfg
    for role in adjust:
        p = space.by_role(role)
        if p is None or role in steps or p.name not in cfg:
            continue
        for delta in (+1, -1, +2, -2):
            v = p.step(cfg[p.name], delta)
            if v is not None and space.is_valid({**cfg, p.name: v}):
                return {**cfg, p.name: v}
    return None


def set_role(space: Space, config: Mapping[str, Any], role: str, value: Any,
             adjust: Sequence[str] = ("warps",)) -> Config | None:
    """`config` with `role` set to `value` (which must be one of its values), repaired like
    `step_roles`; None when the role is absent or no repair is valid."""
    p = space.by_role(role)
    if p is None or not p.contains(value):
        return None
    return step_roles(space, {**config, p.name: value}, {}, [r for r in adjust if r != role])


def _keep(configs: Iterable[Config | None], space: Space, config: Mapping[str, Any]) -> list[Config]:
    """Valid, distinct configs other than `config`, in order."""
    out, seen = [], {space.key(config)}
    for c in configs:
        if c is not None and space.is_valid(c):
            k = space.key(c)
            if k not in seen:
                seen.add(k)
                out.append(c)
    return out


def headroom(diag: Diagnosis) -> float:
    """Most any change can gain: the distance to the roof that binds (1/f - 1, f the larger
    achieved fraction of peak)."""
    f = diag.roof_fraction
    return DEFAULT_HEADROOM if not f else max(0.0, 1.0 / min(f, 1.0) - 1.0)


def _capped(diag: Diagnosis, gain: float) -> float:
    return min(gain, headroom(diag))


def _grid_roles(problem: Problem, space: Space) -> list[str]:
    return [r for r, (_n, _d, red) in tiled_dims(problem, space).items() if not red]
