"""Builds theory/data/sources.json: each zero-shot source's answers on every recorded kernel, learned without it.

    python -m abductune.theory.store.choice_build [DATASETS ...]   # default: zoo bundled (minutes)

What `choice.order_for` chooses from (see `choice`). For every recorded kernel K' and each of
its shapes: the recorded time over the shape's optimum of the first answer of each learned
source (`predict.source_answers`: the ranker, the theory; none where the source has none, or
where the space has a gap every learned source would extrapolate over, `gaps.space_gap`) and
of the kernel's own default (the dataset's recorded default, else its first listed config,
else the space's), all learned without K' ("all") and, for every other kernel K of K''s class
(or of the class of a kernel a holdout of K takes out with it), without K' and K ("without",
keyed by K). A pick that failed counts as the shape's slowest recorded config; a shape where
some answer was not recorded (a sampled dataset) is left out for every source. Regenerate
whenever the packaged data, the ranker or the theory store changes (a test says when the
kernels no longer match).
"""
from __future__ import annotations

import json
import logging
import math
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from ...problem import Holdout
from .choice import DATA, DEFAULT, LEARNED, PATH

log = logging.getLogger(__name__)


def _shapes(data: Sequence[str]) -> dict[str, list[tuple[Any, Any, Any]]]:
    """kernel -> [(observation, classification, its default config)] over the datasets."""
    from ...classify import classify
    from ...datasets.format import read_dataset
    from ...datasets.paths import expand_dataset_args
    from ...heuristics.harvest import observation_from_dataset
    from .predict import _kernel_default

    out: dict[str, list[tuple[Any, Any, Any]]] = {}
    for p in expand_dataset_args(list(data)):
        ds = read_dataset(p)
        o = observation_from_dataset(ds)
        mine = ds.meta.get("default_config") or (ds.meta.get("fixed_configs") or [None])[0]
        got = _kernel_default(o.problem, o.space, mine, (), listed=ds.meta.get("fixed_configs") or ())
        out.setdefault(o.kernel, []).append((o, classify(o.problem, o.space), got[0].config if got else None))
    return out


def _ratio(o: Any, cfg: Any) -> float | str | None:
    """cfg's time over the optimum; a failed config the slowest recorded; "?" where unrecorded."""
    if cfg is None:
        return None
    t = o.time_of(cfg)
    if t is None:
        return "?"
    return (t if math.isfinite(t) else o.worst) / o.optimum


class Answers:
    """Each source's answers, cached where the holdouts cannot change them."""

    def __init__(self) -> None:
        from ...heuristics.ranker_shipped import load
        from .predict import bundled_observations

        self.ranker_kernels = dict(load().kernels)  # name -> source hash
        self.theory_kernels = {o.problem.kernel: o.problem.source_hash for o in bundled_observations()}
        self.cache: dict[tuple, Any] = {}

    def _moved(self, holds: Sequence[Holdout], kernels: dict[str, str]) -> tuple[str, ...]:
        """The training kernels (name -> source hash) the holdouts take out: what an answer depends on."""
        return tuple(k for k in sorted(kernels) if any(h.covers(k, None, "", kernels[k]) for h in holds))

    def of(self, o: Any, c: Any, default: Any, holds: Sequence[Holdout]) -> dict[str, Any]:
        from . import gaps
        from .predict import source_answers

        got: dict[str, Any] = {DEFAULT: _ratio(o, default)}
        gap = gaps.space_gap(o.problem, o.space, c) is not None
        for src in LEARNED:
            if gap:
                got[src] = None
                continue
            dep = {"ranker": self._moved(holds, self.ranker_kernels),
                   "theory": self._moved(holds, self.theory_kernels)}.get(src, ())
            key = (src, o.kernel, o.name, dep)
            if key not in self.cache:
                ans, _ = source_answers(src, o.problem, o.space, c, exclude=list(holds))
                self.cache[key] = _ratio(o, ans[0].config if ans else None)
            got[src] = self.cache[key]
        return got


def _entry(rows: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    keep = [i for i, r in enumerate(rows) if "?" not in r.values() and r[DEFAULT] is not None]
    return {"shapes": [names[i] for i in keep],
            "ratios": {s: [_round(rows[i][s]) for i in keep] for s in (*LEARNED, DEFAULT)}}


def _round(x: float | None) -> float | None:
    return None if x is None else float(f"{x:.6g}")


def build(data: Sequence[str] = DATA, echo: Any = None) -> dict[str, Any]:
    """The contents of sources.json (module docstring)."""
    say = echo or (lambda line: None)
    shapes = _shapes(data)
    ans = Answers()
    kernels = {k: {"class": v[0][1].kernel_class, "source_hash": v[0][0].problem.source_hash}
               for k, v in sorted(shapes.items())}
    hold = {k: Holdout(v[0][0].problem, "kernel") for k, v in shapes.items()}

    def entry(k: str, holds: Sequence[Holdout]) -> dict[str, Any]:
        rows = [ans.of(o, c, d, holds) for o, c, d in shapes[k]]
        return _entry(rows, [o.name for o, _, _ in shapes[k]])

    t0 = time.time()
    out_all = {k: entry(k, (hold[k],)) for k in kernels}
    say(f"without each kernel: {len(out_all)} kernels ({time.time() - t0:.0f} s)")
    without: dict[str, dict[str, Any]] = {}
    for k in kernels:
        # the kernels a holdout of k takes out with it (a family, a source) may be of other classes
        gone = [j for j in kernels if hold[k].covers(j, None, "", kernels[j]["source_hash"])]
        classes = {kernels[j]["class"] for j in gone}
        others = [j for j in kernels if kernels[j]["class"] in classes and j not in gone]
        without[k] = {j: entry(j, (hold[j], hold[k])) for j in others}
        say(f"without {k}: {len(others)} other {'/'.join(sorted(classes))} kernels ({time.time() - t0:.0f} s)")
    return {"command": "python -m abductune.theory.store.choice_build", "data": list(data), "learned": list(LEARNED),
            "kernels": kernels, "all": out_all, "without": without}


def write(path: Path = PATH, data: Sequence[str] = DATA, echo: Any = None) -> Path:
    path.write_text(json.dumps(build(data, echo), indent=None, separators=(",", ":")) + "\n")
    return path


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    got = write(data=tuple(sys.argv[1:]) or DATA, echo=print)
    print(f"wrote {got}")
