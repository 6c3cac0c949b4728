"""The ranker shipped in the package (heuristics/data/ranker/ranker.json) and its refits without a held-out problem.

    python -m abductune.heuristics.ranker_shipped      # regenerate the file (about 30 s)

The file (a folder of its own: heuristics/data/ is the observed database) is `Ranker.fit` on
the zoo's and the bundled datasets (both inside the package): the model as `Ranker.to_dict`
gives it, the kernels it learned from (name -> source hash), every training shape's
sufficient statistics (`ranker.ShapeStats`, per objective and clip of the grid), and each
family's clip, ridge and objective (`ranker.choose_constants`) chosen on all of it and, for every group
of kernels a kernel holdout leaves out together, chosen without that group. A caller scored
on a recorded problem passes it as `exclude` (a Problem, a Holdout of level kernel or shape,
or several); where that covers training shapes, the ranker is refitted from the statistics
without them, with the constants chosen without them (`refit_constants`), as
`Ranker.fit(..., exclude=...)` on the data would give it (cached per set of shapes left out),
so no figure is scored with its own answer, nor with constants chosen by looking at it.
Regenerate the file whenever the features, the fit, the grid or the packaged data change:
`load` refuses a file over other features or another grid.

`rank(..., nvidia=True)` puts first the configs with the output tile of NVIDIA's analytic
model's top-1 (`nvidia_tile`; with the `nvidia` extra, on the problems it describes), in the
ranker's order. `predict` does not serve it: leave-one-kernel-out on the 16 older zoo kernels
and the bundled matmul it tied the ranker alone on the zoo and lost on the bundled matmul
(1.097 -> 1.137; benchmarks/results/session16/issue27_zeroshot/README.md), so the ranker
alone is served, with or without the extra; `bench_zeroshot.py` keeps it as a column.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import AbductuneError
from ..hardware import HardwareInfo
from ..problem import Problem
from ..space import Config, Space
from ..theory.resources import trouble
from .features import NAMES, TRITON_DIVISIBILITY, unaligned, usable
from .ranker import (CLIPS, RIDGES, SELECT_MIN_KERNELS, TAUS, Ranker, ShapeStats, choose_constants, constants_of,
                     family, holdout_groups)

log = logging.getLogger(__name__)

PATH = Path(__file__).parent / "data" / "ranker" / "ranker.json"
SOURCES = ("zoo", "bundled")
COMMAND = "python -m abductune.heuristics.ranker_shipped"
# cost bounds, not tuned: ranking costs about 0.6 ms a config the resource model accepts (a
# diagnosis each, on one CPU core), so past RANK_MAX of them one pick costs more than the
# seconds a measurement does; the resource check costs about 10 us a config of the space
RANK_MAX = 8192
ENUMERATE_MAX = 200_000


# "0" turns NVIDIA's tile off in `rank(..., nvidia=True)` (for comparisons in one tree)
NVIDIA_TILE_ENV = "ABDUCTUNE_NVIDIA_TILE"


@dataclass(frozen=True)
class Ranked:
    """A ranking and what it was learned from (for a prediction's or a seed's reason)."""

    configs: list[Config]  # feasible configs, best first
    family: str  # the model that ranked them (a kernel class family, or "all")
    kernels: tuple[str, ...]  # what that model learned from
    left_out: tuple[str, ...]  # training kernels whose shapes the holdout left out
    nvidia_tile: dict[str, Any] | None = None  # NVIDIA's output tile, put first (`rank`)
    in_tile: int = 0  # how many of `configs` (the first) have it
    unaligned: bool = False  # a product's K or N off Triton's divisibility (`features.unaligned`)

    def why(self, i: int = 0) -> str:
        out = (f"rank {i + 1} of {len(self.configs)} feasible configs by the ranker's {self.family} model, "
               f"learned across {len(self.kernels)} kernels")
        if self.left_out:
            out += f", refitted without {', '.join(self.left_out)} (the holdout)"
        if self.nvidia_tile is not None and i < self.in_tile:
            tile = ", ".join(f"{k}={v}" for k, v in self.nvidia_tile.items())
            out += f", within NVIDIA's model's output tile ({tile})"
        if self.unaligned:
            out += (f"; K or N is not a multiple of {TRITON_DIVISIBILITY}, so Triton cannot prove the loads aligned "
                    "and the operand tiles pass through registers: ranked with the misaligned-stride features")
        return out


def build(sources: tuple[str, ...] = SOURCES) -> dict[str, Any]:
    """The contents of ranker.json, fitted on `sources` (dataset arguments as the CLI reads them)."""
    from ..datasets.paths import expand_dataset_args
    from .harvest import observations_from_datasets
    from .ranker import shape_data

    obs = observations_from_datasets(expand_dataset_args(list(sources)))
    shapes, skipped = [], []
    for o in obs:
        s = shape_data(o)
        (shapes.append(s) if s is not None else skipped.append(f"{o.kernel}:{o.name}"))
    stats = [ShapeStats.of(s) for s in shapes]
    chosen = choose_constants(shapes)
    # nested: for every group a kernel holdout can leave out, the constants chosen without it
    without = {"+".join(sorted(g)): choose_constants([s for s in shapes if s.kernel not in g])
               for g in holdout_groups(shapes)}
    model = Ranker.from_stats(stats, skipped=skipped, constants=chosen)
    return {"command": COMMAND, "sources": list(sources), "features": list(NAMES), "clips": list(CLIPS),
            "ridges": list(RIDGES), "taus": list(TAUS), "select_min_kernels": SELECT_MIN_KERNELS,
            "constants": {"all": _as_json(chosen), "without": {k: _as_json(v) for k, v in without.items()}},
            "kernels": {s.kernel: s.source_hash for s in sorted(stats, key=lambda s: s.kernel)},
            "model": model.to_dict(), "shapes": [s.to_dict() for s in stats]}


def _as_json(constants: dict[str, tuple[float, float, float]]) -> dict[str, list[float]]:
    return {g: list(c) for g, c in sorted(constants.items())}


def _from_json(d: dict[str, Any]) -> dict[str, tuple[float, float, float]]:
    return {g: constants_of(v) for g, v in d.items()}


def write(path: Path = PATH) -> Path:
    path.write_text(json.dumps(build(), indent=None, separators=(",", ":")) + "\n")
    return path


@dataclass
class Shipped:
    ranker: Ranker
    stats: list[ShapeStats]
    kernels: dict[str, str]
    # holdout group (its kernels) -> each family's (clip, ridge) chosen without it (`build`)
    without: dict[frozenset[str], dict[str, tuple[float, float, float]]] = dataclasses.field(default_factory=dict)


@lru_cache(maxsize=1)
def load(path: Path = PATH) -> Shipped:
    """The shipped ranker (its full fit and the statistics refits come from)."""
    if not path.exists():
        raise AbductuneError(f"no shipped ranker at {path}: regenerate it with `{COMMAND}`")
    d = json.loads(path.read_text())
    if list(d.get("features") or []) != list(NAMES) or d.get("clips") != list(CLIPS) \
            or d.get("ridges") != list(RIDGES) or d.get("taus") != list(TAUS) \
            or d.get("select_min_kernels") != SELECT_MIN_KERNELS:
        raise AbductuneError(f"{path} was fitted over other features or constants: regenerate it with `{COMMAND}`")
    stats = [ShapeStats.from_dict(s) for s in d["shapes"]]
    without = {frozenset(k.split("+")): _from_json(v) for k, v in d["constants"]["without"].items()}
    # the full fit from the statistics (what the file's "model" shows, to 6 decimals): one path for
    # the shipped ranker and its refits
    return Shipped(Ranker.from_stats(stats, skipped=d["model"].get("skipped") or (),
                                     constants=_from_json(d["constants"]["all"])), stats, dict(d["kernels"]), without)


_REFITS: dict[frozenset[int], Ranker] = {}


def shipped_ranker(exclude: Any = None) -> tuple[Ranker, tuple[str, ...]]:
    """The shipped ranker, or where `exclude` covers training shapes, the ranker refitted
    without them; and the training kernels left out (sorted)."""
    from .observed import _exclusions

    sh = load()
    keys, holds = _exclusions(exclude)
    gone = frozenset(i for i, s in enumerate(sh.stats)
                     if s.key in keys or any(s.covered_by(h) for h in holds))
    if not gone:
        return sh.ranker, ()
    left = frozenset(sh.stats[i].kernel for i in gone)
    if gone not in _REFITS:
        _REFITS[gone] = Ranker.from_stats([s for i, s in enumerate(sh.stats) if i not in gone],
                                          skipped=sh.ranker.skipped, constants=refit_constants(sh, left))
    return _REFITS[gone], tuple(sorted(left))


def refit_constants(sh: Shipped, left: frozenset[str]) -> dict[str, tuple[float, float, float]]:
    """Each family's (clip, ridge, tau) for a refit without the training kernels `left`: those
    chosen without the holdout group that holds them all (`build`: nested, so never chosen
    with the kernel a figure is scored on); where no group holds them all (a holdout of
    several kernels), the hand-set `ranker.HAND_SET`, which no figure chose."""
    got = next((c for g, c in sh.without.items() if left <= g), None)
    if got is None:
        log.info("ranker refit without %s: no constants chosen without them all; the hand-set ones",
                 ", ".join(sorted(left)))
        return {}
    return got


def why_not(problem: Problem, space: Space, hardware: HardwareInfo | None = None) -> str | None:
    """Why the shipped ranker cannot rank this problem's configs, or None (`rank` may still
    refuse a space with more than `RANK_MAX` configs the resource model accepts)."""
    p = problem if hardware is None else dataclasses.replace(problem, hardware=hardware)
    why = usable(p, space)
    if why is None and space.cardinality > ENUMERATE_MAX:
        why = f"{space.cardinality} configs, more than the {ENUMERATE_MAX} it reads"
    return why


def rank(problem: Problem, space: Space, *, exclude: Any = None, hardware: HardwareInfo | None = None,
         nvidia: bool = False) -> Ranked:
    """The space's feasible configs ranked by the shipped ranker (refitted without what
    `exclude` covers). With `nvidia`, where NVIDIA's model serves the problem (`nvidia_tile`),
    the configs with its top-1's output tile (@tile:M x @tile:N) come first, in the ranker's
    order, then the rest: the model chooses the tile, the ranker the K tile, warps, stages and
    the rest, which the model's estimate does not tell apart. Raises AbductuneError where it
    cannot (`why_not`, more than `RANK_MAX` feasible configs, or a stale file)."""
    why = why_not(problem, space, hardware)
    if why is not None:
        raise AbductuneError(f"the ranker cannot rank {problem.kernel}: {why}")
    p = problem if hardware is None else dataclasses.replace(problem, hardware=hardware)
    cands = [c for c in space.valid_configs() if trouble(p, space, c) is None]
    if len(cands) > RANK_MAX:
        raise AbductuneError(f"the ranker cannot rank {problem.kernel}: {len(cands)} configs fit the resource "
                             f"model, more than the {RANK_MAX} it ranks (about 0.6 ms each)")
    ranker, left = shipped_ranker(exclude)
    fam = family(problem, space)
    g = fam if fam in ranker.models else "all"
    ordered = ranker.rank(p, space, cands)
    tile = nvidia_tile(p, space) if nvidia else None
    first = [c for c in ordered if tile is not None and all(c.get(k) == v for k, v in tile.items())]
    off = unaligned(p, space)
    if not first:
        return Ranked(ordered, g, tuple(ranker.trained_on.get(g, ())), left, unaligned=off)
    rest = [c for c in ordered if not all(c.get(k) == v for k, v in tile.items())]  # type: ignore[union-attr]
    return Ranked(first + rest, g, tuple(ranker.trained_on.get(g, ())), left, tile, len(first), unaligned=off)


def nvidia_tile(problem: Problem, space: Space) -> dict[str, Any] | None:
    """{@tile:M name: value, @tile:N name: value} of NVIDIA's top-1 realized in `space`
    (`nvidia.nvidia_topk`), None without the package (pip install 'abductune[nvidia]'), off
    the model, without both roles, or with ABDUCTUNE_NVIDIA_TILE=0."""
    from . import nvidia as nv

    if os.environ.get(NVIDIA_TILE_ENV, "1") == "0" or not nv.available() or nv.why_not(problem) is not None:
        return None
    names = [space.by_role(r) for r in ("tile:M", "tile:N")]
    if any(q is None for q in names):
        return None
    try:
        top = nv.nvidia_topk(problem, space, 1)
    except AbductuneError as e:
        log.info("no NVIDIA tile for %s: %s", problem.kernel, e)
        return None
    return {q.name: top[0][q.name] for q in names} if top else None  # type: ignore[union-attr]


if __name__ == "__main__":
    out = write()
    got = load.__wrapped__(out)
    print(f"wrote {out}: {len(got.stats)} shapes of {len(got.kernels)} kernels; "
          f"{len(got.ranker.skipped)} left out (features cannot describe them)")
