"""Learning rules from observations: candidate forms from each problem's fastest configs, scored on its group."""
from __future__ import annotations

import logging
import math
from typing import Any, Callable, Iterable, Mapping, Sequence

from ...classify import Classification
from ...errors import InvalidSeed, SpaceError
from ...heuristics.harvest import geomean
from ...problem import Holdout, Problem, as_holdout
from . import scope
from .book import TheoryBook, _hardware_levels
from .instantiate import FILL_FLOOR, _role_params, forms_of, instantiate
from .rules import ALL, Form, TheoryRule

log = logging.getLogger(__name__)

SUPPORT_TOLERANCE = 1.05  # a prediction within 5% of the optimum supports its rule
MISSING_PENALTY = 3.0  # a config not measured for a problem counts as 3x its optimum
TOP = 4  # candidate templates from each problem's fastest configs
MIN_GROUP = 2  # a regime needs two problems to say anything beyond "all"


def _score(forms: Mapping[str, Form], group: Sequence[Any], cache: dict) -> list[float]:
    """Time of the instantiated config over the optimum, per observation of the group."""
    ratios = []
    for o in group:
        k = (id(o), tuple(sorted((r, f) for r, f in forms.items())))
        if k not in cache:
            try:
                cfg = instantiate(forms, o.problem, o.space, o.classification())
                t = o.time_of(cfg)
            except (InvalidSeed, SpaceError, KeyError, ValueError) as e:
                log.debug("instantiating %s on %s failed: %s", forms, o.name, e)
                t = None
            opt = o.optimum
            cache[k] = (MISSING_PENALTY if t is None or not math.isfinite(t) else t / opt) if math.isfinite(opt) \
                else 1.0
        ratios.append(cache[k])
    return ratios


def _fit_group(group: Sequence[Any]) -> tuple[dict[str, Form], list[float]] | None:
    cache: dict = {}
    cands: list[dict[str, Form]] = []
    for o in group:
        cls = o.classification()
        for cfg in o.ranked(TOP):
            for f in forms_of(cfg, o.problem, o.space, cls):
                if f and f not in cands:
                    cands.append(f)
    if not cands:
        return None

    def specific(f: Mapping[str, Form]) -> int:
        # among rules that fit the group equally, prefer the one that says why (a parallelism
        # floor holds wherever there is enough work, warps sized to the tile follow it when it
        # shrinks; a constant tile or warp count only where it was seen)
        return sum(form.kind == "const" for r, form in f.items() if r.startswith("tile") or r == "warps") \
            - sum(form.kind == "par" and form.value[1] == FILL_FLOOR for form in f.values())
    scored = sorted(((round(geomean(_score(f, group, cache)), 4), specific(f), i) for i, f in enumerate(cands)))
    best = dict(cands[scored[0][2]])
    best_g = geomean(_score(best, group, cache))
    pool: dict[str, list[Form]] = {}
    for f in cands:
        for r, form in f.items():
            if form not in pool.setdefault(r, []):
                pool[r].append(form)
    for _ in range(2):  # greedy: swap one role's form while it helps
        improved = False
        for role, options in pool.items():
            for form in options:
                if best.get(role) == form:
                    continue
                trial = {**best, role: form}
                g = geomean(_score(trial, group, cache))
                if g < best_g * (1 - 1e-4) or (g <= best_g * (1 + 1e-4) and specific(trial) < specific(best)):
                    best, best_g, improved = trial, g, True
        if not improved:
            break
    return best, _score(best, group, cache)


def _facts(forms: Mapping[str, Form], o: Any) -> dict[str, Any]:
    """What the rule's config met on one problem it is learned from (`scope.facts`)."""
    try:
        return scope.facts(o.problem, o.space, instantiate(forms, o.problem, o.space, o.classification()))
    except (InvalidSeed, SpaceError, KeyError, ValueError) as e:
        log.debug("no facts for %s: %s", o.name, e)
        return {}


def learn(observations: Iterable[Any], *, exclude: "Problem | Holdout | None" = None,
          only: Classification | None = None,
          progress: Callable[[int, int], None] | None = None) -> "TheoryBook":
    """Rules from observations (`heuristics.harvest.Observation`: a problem, its space and the
    times of its configs), one per (hardware level, class, regime, dtype family) group that
    has problems with roles; `exclude` leaves out what a `Holdout` covers (a Problem: its
    shape, leave-one-shape-out); `only` learns just the groups a lookup for that
    classification visits. `progress(done, total)` hears each group fitted (a CLI bar)."""
    groups: dict[tuple[str, str, str, str], list[Any]] = {}
    hold = as_holdout(exclude)
    for o in observations:
        if only is not None and o.classification().kernel_class != only.kernel_class:
            continue
        if hold is not None and hold.covers(o.problem.kernel, o.problem.dims, o.problem.key(),
                                            o.problem.source_hash):
            continue
        if not _role_params(o.space) or not math.isfinite(o.optimum):
            continue
        cls = o.classification()
        for _, hw_key in _hardware_levels(o.problem.hardware):
            for regime in (cls.fallback, ALL):
                if only is not None and regime not in (only.fallback, ALL):
                    continue
                groups.setdefault((hw_key, cls.kernel_class, regime, cls.dtype_family), []).append(o)
    rules = []
    fits: dict[frozenset, Any] = {}  # the GPU, its family and "any" often hold the same problems
    todo = [(key, group) for key, group in sorted(groups.items()) if key[2] == ALL or len(group) >= MIN_GROUP]
    for done, ((hw_key, kclass, regime, fam), group) in enumerate(todo, 1):
        if progress is not None:
            progress(done - 1, len(todo))
        ident = frozenset(id(o) for o in group)
        if ident not in fits:
            fitted = _fit_group(group)
            fits[ident] = fitted and (*fitted, [_facts(fitted[0], o) for o in group],
                                      scope.merge_roles(scope.space_roles(o.space, o.classification()) for o in group))
        fitted = fits[ident]
        if fitted is None:
            continue
        forms, ratios, facts, roles = fitted
        dims: dict[str, list[int]] = {}
        for o in group:
            for k, v in o.classification().dims.items():
                lo, hi = dims.get(k, [v, v])
                dims[k] = [min(lo, v), max(hi, v)]
        rules.append(TheoryRule(hw_key, kclass, regime, fam, forms, geomean(ratios), max(ratios),
                                sum(r <= SUPPORT_TOLERANCE for r in ratios),
                                sum(r > SUPPORT_TOLERANCE for r in ratios),
                                [{"key": o.problem.key(), "kernel": o.problem.kernel, "dims": dict(o.problem.dims),
                                  "hardware": o.problem.hardware.name if o.problem.hardware else "",
                                  **({"source_hash": o.problem.source_hash} if o.problem.source_hash else {}),
                                  "facts": f}
                                 for o, f in zip(group, facts)], dims, roles))
    if progress is not None:
        progress(len(todo), len(todo))
    return TheoryBook(rules)


def shape_id(problem: Problem) -> str:
    """Kernel and dims: what 'the same shape' means for leave-one-shape-out (a changed kernel
    source hash does not make a recorded shape new)."""
    return problem.kernel + ":" + ",".join(f"{k}={v}" for k, v in sorted(problem.dims.items()))


def learn_with_held_out(observations: Sequence[Any], meta: Mapping[str, Any] | None = None,
                        progress: Callable[[int, int], None] | None = None) -> TheoryBook:
    """A book from every observation, plus for each one the rules its lookup would use when
    that observation is left out: what ships, so replays never re-learn. `progress(done,
    total)` hears each of the 1 + len(observations) books learned."""
    total = 1 + len(observations)
    book = learn(observations)
    book.meta = dict(meta or {})
    for i, o in enumerate(observations, 1):
        if progress is not None:
            progress(i, total)
        held = learn(observations, exclude=o.problem, only=o.classification())
        book.held_out[shape_id(o.problem)] = held
    if progress is not None:
        progress(total, total)
    return book
