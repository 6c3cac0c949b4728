"""Zero-shot predictions from the packaged book, with a replay's own problem left out (re-learned without it)."""
from __future__ import annotations

from typing import Any

from ...classify import Classification, classify
from ...problem import Holdout, Problem, as_holdout
from ...space import Space
from .book import TheoryBook, packaged_book
from .learn import learn, shape_id
from .rules import Prediction

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
                exclude: "Problem | Holdout | None" = None) -> list[Prediction]:
    """Every applicable rule's distinct config, best first (see `TheoryBook.predictions`);
    `exclude` as in `predict`."""
    book = book if book is not None else packaged_book()
    hold = as_holdout(exclude)
    if hold is not None and any(r.learned_from_problem(hold) for _, r in book.candidates(problem, space)):
        held = book.held_out.get(shape_id(hold.problem)) if hold.level == "shape" else None
        book = held if held is not None else _relearned(hold, classify(problem, space))
    return book.predictions(problem, space, exclude=hold)


_RELEARNED: dict[tuple, "TheoryBook"] = {}


def _relearned(hold: Holdout, cls: Classification) -> "TheoryBook":
    """The bundled data's rules learned without what `hold` covers (cached per holdout)."""
    k = (hold.level, hold.problem.kernel, tuple(sorted(hold.problem.dims.items())) if hold.level == "shape" else (),
         cls.kernel_class)
    if k not in _RELEARNED:
        _RELEARNED[k] = learn(bundled_observations(), exclude=hold, only=cls)
    return _RELEARNED[k]
