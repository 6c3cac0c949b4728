"""How good a database's seeds are: for each recorded shape, which rule answers it and its
seed's time over the shape's optimum (`coverage`, in-sample), the same with the shape held
out of the harvest (`leave_one_out`), and one summary row per (hardware, kernel)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from ..errors import AbductuneError
from .harvest import Observation, geomean, harvest
from .observed import Database


@dataclass
class SeedCheck:
    """What the database seeds for one observation, against its optimum and default."""

    name: str
    kernel: str
    hardware: str
    kernel_class: str
    bucket: str
    fallback: str
    level: str  # "<hardware key>/<exact|bucket|fallback>" or "none"
    seed_ratio: float | None  # seed time / optimum (None: no seed, or seed not measured)
    default_ratio: float | None  # default time / optimum

    @property
    def kind(self) -> str:
        return self.level.rsplit("/", 1)[-1] if self.level != "none" else "none"

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.name, "kernel": self.kernel, "hardware": self.hardware,
                "kernel_class": self.kernel_class, "bucket": self.bucket, "fallback": self.fallback,
                "level": self.level, "seed_over_optimum": self.seed_ratio,
                "default_over_optimum": self.default_ratio}


def check_seed(db: Database, o: Observation, granularity: int = 2) -> SeedCheck:
    c = o.classification(granularity)
    hit = db.lookup(o.problem, o.space, o.hardware, base=o.default, cls=c)
    ratio = None
    if hit is not None:
        t = o.time_of(hit.config)
        if t is not None:
            ratio = (t if math.isfinite(t) else o.worst) / o.optimum
    dt = o.default_time()
    return SeedCheck(o.name, o.kernel, o.hardware.name if o.hardware else "", c.kernel_class,
                     c.bucket, c.fallback, hit.level if hit else "none", ratio,
                     dt / o.optimum if dt else None)


def coverage(db: Database, observations: Sequence[Observation],
             granularity: int = 2) -> list[SeedCheck]:
    """One SeedCheck per observation: which rule answers it and how good its seed is."""
    return [check_seed(db, o, granularity) for o in observations]


def same_shape(a: Observation, b: Observation, scope: str = "kernel") -> bool:
    """Whether b is the held-out shape of a: the same dims on the same hardware, of the same
    kernel (scope "kernel") or of any kernel (scope "class")."""
    hw = (a.hardware.name if a.hardware else "", b.hardware.name if b.hardware else "")
    if hw[0] != hw[1] or dict(a.problem.dims) != dict(b.problem.dims):
        return False
    return scope == "class" or a.kernel == b.kernel


def leave_one_out(observations: Sequence[Observation], *, scope: str = "kernel",
                  granularity: int = 2, **harvest_kw: Any) -> list[SeedCheck]:
    """For every observation S: harvest from the others of its class without S (and without
    every other observation of S's shape on S's hardware, for its kernel or, with scope
    "class", for any kernel), then look S up. Says how well the database generalises to a
    shape it has never seen."""
    if scope not in ("kernel", "class"):
        raise AbductuneError(f"leave-one-out scope must be 'kernel' or 'class', got {scope!r}")
    out = []
    for s in observations:
        cls = s.classification(granularity).kernel_class
        train = [o for o in observations if o is not s and not same_shape(s, o, scope)
                 and o.classification(granularity).kernel_class == cls]
        db = harvest(train, granularity=granularity, **harvest_kw).database
        out.append(check_seed(db, s, granularity))
    return out


def summarize(checks: Sequence[SeedCheck]) -> list[dict[str, Any]]:
    """Per (hardware, kernel): shapes, fractions answered by an exact/bucket/fallback rule,
    geomean seed / optimum over the shapes with a measured seed, and default / optimum."""
    groups: dict[tuple[str, str], list[SeedCheck]] = {}
    for c in checks:
        groups.setdefault((c.hardware, c.kernel), []).append(c)
    rows = []
    for (hw, k), cs in sorted(groups.items()):
        n = len(cs)
        seeds = [c.seed_ratio for c in cs if c.seed_ratio]
        dfl = [c.default_ratio for c in cs if c.default_ratio]
        rows.append({"hardware": hw, "kernel": k, "shapes": n,
                     "bucket_rule": sum(c.kind in ("bucket", "exact") for c in cs) / n,
                     "fallback_rule": sum(c.kind == "fallback" for c in cs) / n,
                     "no_rule": sum(c.kind == "none" for c in cs) / n,
                     "seed_over_optimum_geomean": geomean(seeds),
                     "default_over_optimum_geomean": geomean(dfl)})
    return rows
