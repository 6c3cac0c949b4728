"""Zero-shot predictions: the packaged book's rules, the shipped ranker's pick, or the kernel's own default.

`predict` serves the class's learned sources in turn (the ranker learned across kernels,
`heuristics.ranker_shipped`, first for `RANKER_CLASSES`, where its top-1 beat the theory
leave-one-kernel-out; the theory first elsewhere) where they beat the kernels' own defaults on
the other kernels of the class by nested leave-one-kernel-out evidence (`choice`), and the
kernel's own default otherwise, saying why; `predictions` stays the theory's (what tune seeds
from: where every rule is declined, the observed database's seed and the declined rule's config,
which `predict` does not serve, the chain's next source answering instead). Where the learned
sources would extrapolate on the kernel's space (`gaps`: a tile they size that it does not
tune), the kernel's own default is served instead, saying why."""
from __future__ import annotations

import dataclasses
import logging
from typing import Any, Sequence

from ...classify import Classification, classify
from ...errors import AbductuneError
from ...problem import Holdout, Problem, holdouts
from ...space import Config, Space
from .. import resources
from . import gaps
from .book import TheoryBook, declined_line, packaged_book
from .learn import learn, shape_id
from .rules import Prediction, TheoryRule

log = logging.getLogger(__name__)

FALLBACK_SEEDS = 2  # as many as tune takes from the theory store (tune.THEORY_SEEDS)
# where the ranker's top-1 beat the theory's prediction leave-one-kernel-out on the zoo
# (benchmarks/results/session14/ranker_loko.json: matmul 1.201 against 1.229, quantized_matmul
# 1.250 where no rule applies); the theory kept row_reduction (1.14 against 1.42) and
# elementwise (1.09 against 1.81)
RANKER_CLASSES = ("matmul", "quantized_matmul")

# why the ranker's pooled model is not served (`_ranked`), as measured now: session 16,
# benchmarks/results/session16/ranker_loko.json and zeroshot_zoo_loko.json, attention rows
POOLED_NOT_SERVED = ("the model pooled over other families ranked the zoo's attention kernels, held out, "
                     "1.232x the optimum at top-1 (0 of 10 infeasible) against 1.052x for the kernels' own defaults")

_BUNDLED_OBS: list[Any] | None = None


def bundled_observations() -> list[Any]:
    """The bundled datasets as observations (cached): what the packaged theories came from."""
    global _BUNDLED_OBS
    if _BUNDLED_OBS is None:
        from ...datasets.bundled import bundled_datasets
        from ...heuristics.harvest import observations_from_datasets

        _BUNDLED_OBS = observations_from_datasets(bundled_datasets())
    return _BUNDLED_OBS


@dataclasses.dataclass(frozen=True)
class RankedPrediction(Prediction):
    """The ranker's pick served as a prediction: `rule` is None, `source` "ranker"."""

    why: str = ""

    def describe(self) -> str:
        return ("ranker: " + self.why + ("; " + "; ".join(self.reasons) if self.reasons else "")
                + ("; passed over as outside their conditions: " + "; ".join(self.declined) if self.declined else ""))


@dataclasses.dataclass(frozen=True)
class DefaultPrediction(Prediction):
    """The kernel's own default served where every learned source would extrapolate on its
    space (`gaps`): `rule` is None, `source` "default", `reasons` why nothing learned served."""

    def describe(self) -> str:
        return ("the kernel's own default config (confidence 0), served instead of a learned config that would "
                "extrapolate on this space: " + "; ".join(self.reasons))


@dataclasses.dataclass(frozen=True)
class UntrustedPrediction(DefaultPrediction):
    """The kernel's own default served where no learned source has earned trust on the
    kernel's class (`choice`: none beat the kernels' own defaults leave-one-kernel-out), or
    where those trusted had no answer: a legitimate answer, not a failure."""

    def describe(self) -> str:
        return ("the kernel's own default config (confidence 0): no learned source is trusted for this kernel "
                "class; " + "; ".join(self.reasons))


def predict(problem: Problem, space: Space, *, book: TheoryBook | None = None,
            exclude: "Problem | Holdout | None" = None, ranker: bool = True,
            default: Config | None = None, listed: Sequence[Config] = ()) -> Prediction | None:
    """Zero-shot config for (problem, space), from the source `zero_shot` puts first. With
    `exclude` (a replay of a recorded problem), rules learned from it are re-learned without it
    from the bundled data when that is where they came from, and the ranker is refitted without
    it, so no prediction is scored with its own answer. `ranker=False`: the theory's alone.
    `default`: the kernel's own config (a decorator's first, a dataset's recorded default),
    served where the learned sources would extrapolate on the space or have not earned trust
    on its class (`zero_shot`). `listed`: the kernel's own list in order (a decorator's configs, a
    dataset's), from which a runnable config stands in for a default the resource model says
    cannot launch on this GPU (`runnable_default`)."""
    got = zero_shot(problem, space, book=book, exclude=exclude, ranker=ranker, default=default, listed=listed)
    return got[0] if got else None


def zero_shot(problem: Problem, space: Space, *, book: TheoryBook | None = None,
              exclude: "Problem | Holdout | None" = None, ranker: bool = True,
              default: Config | None = None, listed: Sequence[Config] = ()) -> list[Prediction]:
    """What `predict` chooses from, best first (a compile check takes the first that passes).

    The learned sources in the class's order (`chain`: for `RANKER_CLASSES` the ranker's first
    `FALLBACK_SEEDS` configs, then the theory's `predictions`; for other classes the theory's,
    then the ranker's), each source tried in turn until one answers, are served only where
    they beat the kernels' own defaults on the other kernels of the class by nested
    leave-one-kernel-out evidence (`choice`: each judged without the kernel scored here, and
    without the kernel judged). Where they did not, or where the holdout leaves no other
    kernel of the class to judge them on, or where none answers, the kernel's own default is
    served (`default`, else the space's declared default: a decorator's first config) with
    the reason; with no default to serve, the learned answers after all. A class the evidence
    does not know, and `ranker=False` (the theory's alone), keep session 16's `fixed_order`.

    Never an extrapolation on the space (`gaps`): where the space lacks a tile the class's
    learned sources all size (`gaps.space_gap`), nothing learned is served; a theory rule that
    sizes a tile this space does not tune (`gaps.rule_gap`) is passed over."""
    from . import choice

    c = classify(problem, space)
    gap = gaps.space_gap(problem, space, c)
    if gap is not None:
        return _kernel_default(problem, space, default, (gap,), listed=listed)
    picked = choice.order_for(c.kernel_class, holdouts(exclude), chain(c.kernel_class)) if ranker else None
    if picked is None:
        return fixed_order(problem, space, c, book=book, exclude=exclude, ranker=ranker, default=default,
                           listed=listed)
    out: list[Prediction] = []
    passed: list[str] = []
    for src in picked.sources:  # the first that answers serves; the rest stay for a compile check
        got, why = source_answers(src, problem, space, c, book=book, exclude=exclude, said=picked.said())
        if not out and passed:  # a later source serves: it says which rules were passed over, and why
            got = [dataclasses.replace(p, declined=tuple(dict.fromkeys((*p.declined, *passed)))) for p in got]
        out += got
        passed += why
    if out:
        return out
    served = _kernel_default(problem, space, default, (*dict.fromkeys(passed), picked.note()), trusted=False,
                             listed=listed)
    # no default to serve: rather the learned answers than nothing
    return served or fixed_order(problem, space, c, book=book, exclude=exclude, ranker=ranker, default=default,
                                 listed=listed)


def chain(kernel_class: str) -> tuple[str, ...]:
    """The learned sources `zero_shot` tries for a class, in turn (module docstring)."""
    return ("ranker", "theory") if kernel_class in RANKER_CLASSES else ("theory", "ranker")


def source_answers(source: str, problem: Problem, space: Space, c: Classification, *,
                   book: TheoryBook | None = None, exclude: Any = None,
                   said: tuple[str, ...] = ()) -> tuple[list[Prediction], list[str]]:
    """One learned source's zero-shot answers, best first, and the rules it passed over as
    extrapolating on the space (`gaps.rule_gap`): "ranker" (its first `FALLBACK_SEEDS`,
    refitted without `exclude`; the model pooled over families too, where the holdout took
    the problem's: the evidence judges it like any answer), "theory" (`predictions`, less
    rules with a gap). `exclude`: as `predictions` takes it (one holdout or several). `said`:
    why this source is served (the choice's record). Nothing where it has no answer."""
    if source == "ranker":
        return _ranked(problem, space, exclude, c.kernel_class, said=said, pooled=True), []
    if source != "theory":
        raise AbductuneError(f"unknown zero-shot source {source!r}: ranker or theory")
    theory: list[Prediction] = []
    got, declined = _judged(problem, space, book, exclude)
    # every rule declined is no answer: the chain's next source answers, not the seeds a tune
    # falls back on (`predictions`' fallback: the observed database, learned on other kernels with
    # no record of the conditions it held under); the rules' reasons go with what is served
    passed = [] if got else [declined_line(r, why) for r, why, _ in declined]
    for p in got:
        why = gaps.rule_gap(p.rule, problem, space, c) if p.rule else None
        (passed.append(declined_line(p.rule, why)) if why else theory.append(p))
    passed = list(dict.fromkeys(passed))
    if passed:
        theory = [dataclasses.replace(p, declined=tuple(dict.fromkeys((*p.declined, *passed)))) for p in theory]
    return theory, passed


def fixed_order(problem: Problem, space: Space, c: Classification, *, book: TheoryBook | None = None,
                exclude: Any = None, ranker: bool = True, default: Config | None = None,
                listed: Sequence[Config] = ()) -> list[Prediction]:
    """Session 16's order, for classes the evidence does not know and for `ranker=False`: for
    `RANKER_CLASSES` the ranker's first `FALLBACK_SEEDS` configs, then the theory's; for other
    classes the theory's, and where it is empty the ranker's (never the pooled model alone,
    `POOLED_NOT_SERVED`); where every rule was passed over, the kernel's own default."""
    cls = c.kernel_class
    said = (f"chosen over the theory for {cls}, where it won leave-one-kernel-out",)
    lead = _ranked(problem, space, exclude, cls, said=said) if ranker and cls in RANKER_CLASSES else []
    theory, passed = source_answers("theory", problem, space, c, book=book, exclude=exclude)
    if lead or theory:
        return lead + theory
    if passed:
        return _kernel_default(problem, space, default, tuple(passed), listed=listed)
    said = ("no theory rule or next source has a config for this problem",)
    return _ranked(problem, space, exclude, cls, said=said) if ranker else []


def _kernel_default(problem: Problem, space: Space, default: Config | None,
                    why: tuple[str, ...], trusted: bool = True, listed: Sequence[Config] = ()) -> list[Prediction]:
    cfg = dict(default) if default is not None and space.is_valid(default) else space.declared_default()
    if cfg is None:
        log.info("no prediction for %s: %s; no default config to serve instead", problem.kernel, "; ".join(why))
        return []
    cfg, moved = resources.runnable_default(problem, space, cfg, listed)
    cls = DefaultPrediction if trusted else UntrustedPrediction
    return [cls(cfg, None, "-", 0.0, False, (*why, *moved), source="default")]  # type: ignore[arg-type]


def _ranked(problem: Problem, space: Space, exclude: Any, cls: str, *, said: tuple[str, ...] = (),
            pooled: bool = False) -> list[Prediction]:
    from ...heuristics.ranker_shipped import rank, why_not

    if why_not(problem, space) is not None:
        return []
    try:
        got = rank(problem, space, exclude=exclude)
    except AbductuneError as e:  # too many feasible configs to rank, or a stale file
        log.info("no ranker prediction for %s: %s", problem.kernel, e)
        return []
    except Exception as e:  # noqa: BLE001 - a feature bug must not stop a prediction
        log.warning("ranker prediction for %s failed: %s: %s", problem.kernel, type(e).__name__, e)
        return []
    if got.family == "all" and not pooled:
        # only the model pooled over other families is left (the holdout took every kernel of
        # this one): it orders seeds a search then measures, but is not served alone. Measured
        # on the zoo's attention kernels, the one family it is left for (session 16,
        # leave-one-kernel-out): its top-1 runs everywhere (0 of 10 infeasible, with attention's
        # resource model) but is 1.232x the optimum, where the kernels' own defaults are 1.052x
        log.info("no ranker prediction for %s: no kernel of its family left to learn from (%s)", problem.kernel,
                 POOLED_NOT_SERVED)
        return []
    from ...heuristics.fill import filling_first_or_order

    order, note = filling_first_or_order(problem, space, got.configs)
    return [RankedPrediction(dict(c), None, "-", 0.0, False, (*said, *(note if c is order[0] else ())),
                             source="ranker", why=got.why(got.configs.index(c)))  # type: ignore[arg-type]
            for c in order[:FALLBACK_SEEDS]]


def predictions(problem: Problem, space: Space, *, book: TheoryBook | None = None,
                exclude: "Problem | Holdout | None" = None, fallback: bool = True) -> list[Prediction]:
    """Every applicable rule's distinct config, best first (see `TheoryBook.judged`);
    `exclude` as in `predict`. Where rules of the class exist but every one is outside the
    conditions it was confirmed under (`scope.judge`), `fallback` serves the next sources a
    tune would seed from (the observed database, then the heuristics), as predictions that
    say which rules were declined and why, rather than a rule extrapolated past its reason."""
    got, declined = _judged(problem, space, book, exclude)
    if got or not declined or not fallback:
        return got
    return _next_source(problem, space, holdouts(exclude), declined)


def _judged(problem: Problem, space: Space, book: TheoryBook | None, exclude: Any
            ) -> tuple[list[Prediction], list[tuple[TheoryRule, str, Prediction]]]:
    """`TheoryBook.judged` on the book that may answer under `exclude` (the packaged one, or
    its rules learned without what the holdouts cover)."""
    book = book if book is not None else packaged_book()
    holds = holdouts(exclude)
    hold = holds[0] if len(holds) == 1 else None
    if holds and any(r.learned_from_problem(h) for _, r in book.candidates(problem, space) for h in holds):
        held = book.held_out.get(shape_id(hold.problem)) if hold is not None and hold.level == "shape" else None
        book = held if held is not None else _relearned(holds, classify(problem, space))
    return book.judged(problem, space, exclude=hold)


def _next_source(problem: Problem, space: Space, hold: "tuple[Holdout, ...]",
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
        # the ranker answers separately (`zero_shot`): here the sources that seeded before it
        rep = seed_configs(problem, space, problem.hardware, exclude=list(hold) or None, ranker=False)
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


def _relearned(holds: "tuple[Holdout, ...]", cls: Classification) -> "TheoryBook":
    """The bundled data's rules learned without what `holds` cover (cached per holdouts)."""
    k = (tuple((h.level, h.problem.kernel, h.problem.source_hash,
                tuple(sorted(h.problem.dims.items())) if h.level == "shape" else ()) for h in holds), cls.kernel_class)
    if k not in _RELEARNED:
        obs = [o for o in bundled_observations() if not any(
            h.covers(o.problem.kernel, o.problem.dims, o.problem.key(), o.problem.source_hash) for h in holds[1:])]
        _RELEARNED[k] = learn(obs, exclude=holds[0], only=cls)
    return _RELEARNED[k]
