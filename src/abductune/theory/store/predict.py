"""Zero-shot predictions from the packaged book, with a replay's own problem left out (re-learned without it)."""
from __future__ import annotations

import dataclasses
import logging
from typing import Any

from ...classify import Classification, classify
from ...problem import Holdout, Problem, as_holdout
from ...space import Space
from .book import TheoryBook, declined_line, packaged_book
from .learn import learn, shape_id
from .rules import Prediction, TheoryRule

log = logging.getLogger(__name__)

FALLBACK_SEEDS = 2  # as many as tune takes from the theory store (tune.THEORY_SEEDS)

_BUNDLED_OBS: list[Any] | None = None


def bundled_observations() -> list[Any]:
    """The bundled datasets as observations (cached): what the packaged theories came from."""
    global _BUNDLED_OBS
    if _BUNDLED_OBS is None:
        from ...datasets.bundled import bundled_datasets
        from ...heuristics.harvest import observations_from_datasets

        _BUNDLED_OBS = observations_from_datasets(bundled_datasets())
    return _BUNDLED_OBS


def predict(problem: Problem, space: Space, *, book: TheoryBook | None = None,
            exclude: "Problem | Holdout | None" = None) -> Prediction | None:
    """Zero-shot config for (problem, space). With `exclude` (a replay of a recorded problem),
    rules learned from it are re-learned without it from the bundled data when that is where
    they came from, so no prediction is scored with its own answer."""
    got = predictions(problem, space, book=book, exclude=exclude)
    return got[0] if got else None


def predictions(problem: Problem, space: Space, *, book: TheoryBook | None = None,
                exclude: "Problem | Holdout | None" = None, fallback: bool = True) -> list[Prediction]:
    """Every applicable rule's distinct config, best first (see `TheoryBook.judged`);
    `exclude` as in `predict`. Where rules of the class exist but every one is outside the
    conditions it was confirmed under (`scope.judge`), `fallback` serves the next sources a
    tune would seed from (the observed database, then the heuristics), as predictions that
    say which rules were declined and why, rather than a rule extrapolated past its reason."""
    book = book if book is not None else packaged_book()
    hold = as_holdout(exclude)
    if hold is not None and any(r.learned_from_problem(hold) for _, r in book.candidates(problem, space)):
        held = book.held_out.get(shape_id(hold.problem)) if hold.level == "shape" else None
        book = held if held is not None else _relearned(hold, classify(problem, space))
    got, declined = book.judged(problem, space, exclude=hold)
    if got or not declined or not fallback:
        return got
    return _next_source(problem, space, hold, declined)


def _next_source(problem: Problem, space: Space, hold: "Holdout | None",
                 declined: list[tuple[TheoryRule, str, Prediction]]) -> list[Prediction]:
    """The next source's first seed, then the first declined rule's config (at most
    `FALLBACK_SEEDS` in all), each carrying the declined rules. The zero-shot answer is the
    next source's; the declined rule's config comes second, as a seed a search may test (a
    measurement settles whether the rule transfers after all, which a zero-shot cannot): the
    other next-source seeds are what `tune` seeds from the heuristics anyway. [] when there is
    nothing; never raises: a fallback is a bet."""
    from ...heuristics import seed_configs

    said = tuple(dict.fromkeys(declined_line(r, why) for r, why, _ in declined))
    out: list[Prediction] = []
    try:
        rep = seed_configs(problem, space, problem.hardware, exclude=hold)
        first = next((f for f in rep.fired if f.get("status") == "seed" and not f.get("duplicate_of")
                      and f.get("config") is not None), None)
    except Exception as e:  # noqa: BLE001 - a fallback must never stop a prediction
        log.warning("no fallback for %s: %s: %s", problem.kernel, type(e).__name__, e)
        first = None
    if first is not None:
        out.append(Prediction(dict(first["config"]), declined[0][0], "-", 0.0, True,
                              (str(first.get("reason") or ""),) if first.get("reason") else (), (),
                              f"{first.get('source', '')}:{first.get('name', '')}", said))
    for _, _, pred in declined:
        if len(out) >= FALLBACK_SEEDS:
            break
        if all(space.key(pred.config) != space.key(o.config) for o in out):
            out.append(dataclasses.replace(pred, declined=said))
    return out


_RELEARNED: dict[tuple, "TheoryBook"] = {}


def _relearned(hold: Holdout, cls: Classification) -> "TheoryBook":
    """The bundled data's rules learned without what `hold` covers (cached per holdout)."""
    k = (hold.level, hold.problem.kernel, tuple(sorted(hold.problem.dims.items())) if hold.level == "shape" else (),
         cls.kernel_class)
    if k not in _RELEARNED:
        _RELEARNED[k] = learn(bundled_observations(), exclude=hold, only=cls)
    return _RELEARNED[k]
