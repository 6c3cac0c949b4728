"""A test the engine may run (a config and the claim it tests), the kinds of test, and moves between configs."""
from __future__ import annotations

from dataclasses import dataclass

from ...space import Config, Space

# The kinds of test that are not a theory's (a theory's tests carry its name).
# A composed hypothesis (two supported moves at once) is expected to gain what both did.
COMPOSE = "compose"
POLL = "poll"  # finish: multi-parameter moves around the incumbent
TPE_TEST = "tpe"  # model-based fallback proposal
START = "start"
MODEL = "model"  # generic mode: a Thompson-sampled proposal of the additive model, whole space
EXTEND = "extend"  # a local move that won, taken once more in the same direction
EXPLORE = "explore"  # the exploring share of a batch: a proposal from the whole space
LOCAL = "local"  # the other side of a batch, for sizing the exploring share: theories' tests and local moves
# a seed that ran but spilled heavily, relieved of registers (`theory.check.relief`): what its
# region runs at without the spill (`_Engine._relieve_seed`)
RELIEF = "seed_relief"
GLOBAL_KINDS = (TPE_TEST, MODEL, START, EXPLORE, RELIEF)  # tests that are no move from the incumbent
JUMPS = (EXPLORE, RELIEF)  # tested beside the local moves, yet a jump across the space: composed with none
LOCAL_REACH = 2  # parameters one local move changes at most (single and pairwise moves)
COARSE_STEP = 2  # values a first probe along an unknown parameter moves: pattern search's largest step


@dataclass
class _Test:
    """One config to measure and the claim it tests."""

    theory: str
    config: Config
    gain: float = 0.0  # expected relative gain that ranked it
    reason: str = ""


def _composition(inc: Config, a: Config, b: Config) -> Config | None:
    """Move a plus move b, both from `inc`, where they change different parameters (None
    where b changes nothing or shares a parameter with a)."""
    mine = {k for k, v in a.items() if inc.get(k) != v}
    theirs = {k: v for k, v in b.items() if inc.get(k) != v}
    if not theirs or mine & set(theirs):
        return None
    return {**a, **theirs}


def _continuation(space: Space, a: Config, b: Config) -> Config | None:
    """The move a -> b taken once more from b (a pattern move, as in Hooke and Jeeves): each
    ordered parameter steps again by the same number of values; one that would leave its range,
    and every unordered one, keeps b's value. None when no parameter can step again."""
    out, moved = dict(b), False
    for p in space.params:
        if a[p.name] == b[p.name] or not p.ordered:
            continue
        v = p.step(b[p.name], p.index(b[p.name]) - p.index(a[p.name]))
        if v is not None:
            out[p.name], moved = v, True
    return out if moved else None


def _changed(space: Space, a: Config, b: Config) -> int:
    """How many parameters differ between a and b."""
    return sum(a[n] != b[n] for n in space.names)


def _describe(space: Space, a: Config, b: Config) -> str:
    return ", ".join(f"{n} {a.get(n)}->{b.get(n)}" for n in space.names if a.get(n) != b.get(n))
