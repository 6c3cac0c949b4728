"""The theory book: rules in the observed database's lookup order, their predictions, its file, the packaged one."""
from __future__ import annotations

import dataclasses
import json
import logging
import math
from pathlib import Path
from typing import Any, Iterable, Mapping

from ...classify import Classification, classify, tile_dim_name
from ...errors import AbductuneError, InvalidSeed, SpaceError
from ...hardware import HardwareInfo
from ...heuristics.observed import ANY, hardware_keys
from ...problem import Holdout, Problem, kernel_family
from ...space import Space
from .. import resources
from . import scope
from .instantiate import _role_params, departures, instantiate, warpgroup_repair
from .rules import ALL, Prediction, TheoryRule

log = logging.getLogger(__name__)

FORMAT = "abductune-theories"
VERSION = 1
DATA_DIR = Path(__file__).parent.parent / "data"  # theory/data, beside this package (package data)
# confidence kept by a rule applied to a kernel it was never confirmed on (as for a rule learned
# on another GPU family, `TheoryBook.predictions`): a guess of how much less it is to be believed
UNSEEN_KERNEL_FACTOR = 0.6
UNREAD_WEIGHT = 0.25  # extrapolating a dim no form of the rule reads counts a quarter octave per octave


def _dims_read(rule: "TheoryRule", cls: Classification) -> set[str]:
    """The problem dims a rule's forms depend on: a fit tile's dim; with a grid or par form,
    every non-reduction tiled dim (the program count is their product)."""
    from ..diagnose import is_reduction_role

    out: set[str] = set()
    grid = any(f.kind in ("grid", "par") for f in rule.forms.values())
    for role, form in rule.forms.items():
        name = tile_dim_name(role, cls)
        if name is None:
            continue
        if form.kind in ("fit", "grid", "par") or (grid and not is_reduction_role(role, cls.kernel_class, cls.tile_axes)):
            out.add(name)
    return out


def declined_line(rule: TheoryRule, why: str) -> str:
    """One declined rule, as `predict` and `explain` say it (the same rule at each hardware
    level reads the same)."""
    return f"{rule.kernel_class}/{rule.regime}/{rule.dtype_family} declined: {why}"


def _hardware_levels(hw: HardwareInfo | None) -> list[tuple[str, str]]:
    """The observed database's lookup order (GPU name, family, any), each key with its level."""
    return [("any" if k == ANY else "family" if k.startswith("family:") else "name", k) for k in hardware_keys(hw)]


class TheoryBook:
    """A set of theory rules with the lookup order of the observed database."""

    def __init__(self, rules: Iterable[TheoryRule] = (), meta: Mapping[str, Any] | None = None,
                 held_out: Mapping[str, Iterable[TheoryRule]] | None = None):
        self.rules: dict[tuple[str, str, str, str], TheoryRule] = {r.key: r for r in rules}
        self.meta = dict(meta or {})
        # shape_id -> the rules learned without that problem (leave-one-shape-out), for the
        # problems the book was learned from: a replay of one of them uses these
        self.held_out: dict[str, TheoryBook] = {k: TheoryBook(v) for k, v in (held_out or {}).items()}

    def __len__(self) -> int:
        return len(self.rules)

    def __iter__(self):
        return iter(self.rules.values())

    def candidates(self, problem: Problem, space: Space, *, exclude: "Problem | Holdout | None" = None
                   ) -> list[tuple[str, TheoryRule]]:
        cls = classify(problem, space)
        out = []
        for level, hw_key in _hardware_levels(problem.hardware):
            for regime in (cls.fallback, ALL):
                for fam in (cls.dtype_family, "any"):
                    r = self.rules.get((hw_key, cls.kernel_class, regime, fam))
                    if r is not None and not (exclude is not None and r.learned_from_problem(exclude)):
                        out.append((level, r))
        return out

    def predict(self, problem: Problem, space: Space, *, exclude: "Problem | Holdout | None" = None) -> Prediction | None:
        """The first of `predictions`, or None."""
        got = self.predictions(problem, space, exclude=exclude)
        return got[0] if got else None

    def predictions(self, problem: Problem, space: Space, *, exclude: "Problem | Holdout | None" = None) -> list[Prediction]:
        """The applicable rules of the nearest hardware level that has one, instantiated on
        (problem, space), best first, one per distinct config (`judged`'s first part)."""
        return self.judged(problem, space, exclude=exclude)[0]

    def judged(self, problem: Problem, space: Space, *, exclude: "Problem | Holdout | None" = None
               ) -> tuple[list[Prediction], list[tuple[TheoryRule, str, Prediction]]]:
        """(predictions, rules declined: (rule, why, what it would have served)). The best
        prediction is the rule that extrapolates least. Rules are tried in lookup order
        (nearest hardware level first; within it the shape's regime before "all"); within one
        hardware level, a rule whose learned dims cover the shape beats a more specific one
        that would extrapolate by a whole octave more (a regime learned on large shapes says
        little about a shape outside it, the broader rule may have seen one), then one applied
        across fewer conditions it was not confirmed under (`scope.judge`). Dims no form of the
        rule reads (a constant tile over them) count a quarter (`UNREAD_WEIGHT`). A rule that
        would meet a kernel of another kind in a way none of its confirmations met theirs (the
        row held whole where it was only ever looped over, or the reverse) is declined."""
        cls = classify(problem, space)
        params = _role_params(space)
        ranked: list[tuple[tuple[int, int, int, int], Prediction]] = []
        declined: list[tuple[TheoryRule, str, Prediction]] = []
        levels = {"name": 0, "family": 1, "any": 2}
        for order, (level, rule) in enumerate(self.candidates(problem, space, exclude=exclude)):
            if ranked and levels[level] > ranked[0][0][0]:
                break  # a nearer hardware level already has an applicable rule
            if not any(r in params for r in rule.forms):
                continue
            try:
                cfg = instantiate(rule.forms, problem, space, cls)
            except (InvalidSeed, SpaceError) as e:
                log.debug("rule %s does not fit %s: %s", rule.key, problem.kernel, e)
                continue
            repairs: list[str] = departures(rule.forms, problem, space, cfg)
            repaired = warpgroup_repair(problem, space, cfg)
            if repaired is not None and space.key(repaired) != space.key(cfg):
                log.debug("rule %s on %s: %s raised to a warpgroup MMA tile: %s", rule.key, problem.kernel, cfg,
                          repaired)
                repairs += [f"warpgroup MMA: {k} {cfg[k]} -> {repaired[k]}" for k in cfg if cfg[k] != repaired[k]]
                cfg = repaired
            # feasible by construction: a config the resource model says cannot launch (or will
            # spill) is moved the least way into what fits; a rule with no such config is passed over
            fitted, changes = resources.fit(problem, space, cfg)
            if fitted is None:
                log.debug("rule %s on %s: %s does not fit (%s)", rule.key, problem.kernel, cfg,
                          resources.trouble(problem, space, cfg))
                continue
            repairs += [f"resource model: {c}" for c in changes]
            cfg = fitted
            reasons = []
            octaves = 0.0  # how far outside its learned dims, in powers of two
            reads = _dims_read(rule, cls)
            for k, v in cls.dims.items():
                lo, hi = rule.dims_range.get(k, [v, v])
                if v < lo or v > hi:
                    reasons.append(f"{k}={v} outside the {lo}..{hi} it was learned on")
                    # a dim none of its forms reads (a constant tile over it) matters less
                    octaves += abs(math.log2(max(v, 1) / max(lo if v < lo else hi, 1))) * \
                        (1.0 if k in reads else UNREAD_WEIGHT)
            if level != "name":
                reasons.append(f"learned on {rule.hardware}, applied to "
                               f"{problem.hardware.name if problem.hardware else 'unknown hardware'}")
            mapped = _role_params(space, cls, rule.forms)  # tiles found by the dim they cover
            missing = [r for r in rule.forms if r not in mapped]
            if missing:
                reasons.append(f"roles {', '.join(missing)} absent from this space")
            why, soft = scope.judge(rule, problem, space, cfg, cls)
            if why is not None:
                log.debug("rule %s on %s declined: %s", rule.key, problem.kernel, why)
                declined.append((rule, why, Prediction(cfg, rule, level, 0.0, True, (why,), tuple(repairs),
                                                       "declined")))
                continue
            reasons += soft
            conf = rule.confidence * (1.0 if level == "name" else 0.8 if level == "family" else 0.6)
            conf *= scope.SCOPE_FACTOR ** len(soft)
            # where it applies: the kernels it was confirmed on. A kernel it never saw (another
            # author's tiling, masks, fusions) is outside those conditions: said, and trusted less
            seen = rule.kernels()
            if seen and kernel_family(problem.kernel) not in seen:
                reasons.append(f"confirmed only on {', '.join(sorted(seen))}, not on {kernel_family(problem.kernel)}")
                conf *= UNSEEN_KERNEL_FACTOR
            outside = [f"{params[r].name}={f.value}" for r, f in rule.forms.items()
                       if f.kind == "const" and r in params and f.value not in params[r].values]
            if outside:
                reasons.append(f"values {', '.join(outside)} are not in this space")
            pred = Prediction(cfg, rule, level, round(conf, 3), bool(reasons), tuple(reasons), tuple(repairs))
            # a factor of 2 is near
            ranked.append(((levels[level], math.floor(octaves + 1e-9), len(soft), order), pred))
        said = tuple(dict.fromkeys(declined_line(r, why) for r, why, _ in declined))
        out: list[Prediction] = []
        for _, pred in sorted(ranked, key=lambda t: t[0]):
            if all(space.key(pred.config) != space.key(o.config) for o in out):
                out.append(dataclasses.replace(pred, declined=said) if said else pred)
        return out, declined

    # -- serialisation
    def to_dict(self) -> dict[str, Any]:
        rules = lambda b: [r.to_dict() for r in sorted(b.rules.values(), key=lambda r: r.key)]  # noqa: E731
        d: dict[str, Any] = {"format": FORMAT, "version": VERSION, "meta": self.meta, "rules": rules(self)}
        if self.held_out:
            d["held_out"] = {k: rules(b) for k, b in sorted(self.held_out.items())}
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], origin: str = "") -> "TheoryBook":
        if d.get("format") != FORMAT:
            raise AbductuneError(f"{origin or 'theory file'} is not an abductune theory file "
                                 f"(format {d.get('format')!r}); write one with `abductune learn`")
        held = {k: [TheoryRule.from_dict(r) for r in v] for k, v in (d.get("held_out") or {}).items()}
        return cls((TheoryRule.from_dict(r) for r in d.get("rules", [])), d.get("meta"), held)

    def save(self, path: str | Path) -> Path:
        from ...files import atomic_write_text

        atomic_write_text(path, json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n")
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> "TheoryBook":
        p = Path(path)
        try:
            return cls.from_dict(json.loads(p.read_text()), str(p))
        except FileNotFoundError:
            raise AbductuneError(f"theory file {p} does not exist") from None
        except (ValueError, KeyError, TypeError, IndexError) as e:
            raise AbductuneError(f"theory file {p} is corrupt ({type(e).__name__}: {e}); rebuild it with "
                                 "`abductune learn`") from None

    def merge(self, other: "TheoryBook") -> "TheoryBook":
        return TheoryBook([*self.rules.values(), *other.rules.values()], {**self.meta, **other.meta})


_CONFIRMED: set[str] | None = None


def confirmed_kernels() -> set[str]:
    """The kernel families the packaged theory rules were confirmed on (cached): the kernels
    the theories were built around."""
    global _CONFIRMED
    if _CONFIRMED is None:
        _CONFIRMED = set().union(*(r.kernels() for r in packaged_book()))
    return _CONFIRMED


def packaged_book() -> TheoryBook:
    """The theories learned from the bundled H100 data (empty if the package has none)."""
    p = DATA_DIR / "theories.json"
    return TheoryBook.load(p) if p.exists() else TheoryBook()
