"""Where a learned zero-shot source would extrapolate on a kernel's space: tiles it needs that the space does not tune.

Rules and the ranker were learned on spaces that tune the tiles a class is built from, and
the resource model reads those tiles to say whether a config can launch. A kernel that fixes
one of them inside its code (Liger's fused MoE GEMMs: BLOCK_M is a constant, only BLOCK_N,
BLOCK_K, warps and stages are tuned) is outside every space they were confirmed on: the
served config would be read against the wrong tile (the ranker takes a 32-wide N tile for the
whole output tile), and a shared-memory overflow cannot be seen. `zero_shot` then serves the
kernel's own default (its author's choice for the tile they fixed) and says why.

Two checks, both from the space's roles alone (never from recorded times):

- `space_gap` (every learned source): the class's main tiles, the dims a program of the class
  is sized by (a matmul's M, N and K; attention's query and key tiles over the sequence; the
  reduced dim of a row kernel; some dim of an elementwise kernel), are each tuned by a tile
  role; and where the resource model has a claim for the class (matmul and attention: shared
  memory from the tiles), it can make it for the space's default config.
- `rule_gap` (one theory rule): every tile role the rule sizes is tuned by this space, found
  by the dim it covers as `instantiate` finds it. A dim that the class runs one index per
  program when untiled (`classify.independent_dims`: a row kernel's rows, attention's batch
  and heads) is not a gap: the kernel's value there is known (1) and the grid model counts it.
  A role other than a tile (warps, stages, a group size) left untuned keeps the launcher's
  documented default, which the rule's lower confidence already covers (`book.judged`).
"""
from __future__ import annotations

from typing import Any

from ...classify import Classification, classify, independent_dims, tile_dim_name
from ...problem import Problem
from ...errors import SpaceError
from ...space import Space
from .. import resources
from ..diagnose import tiled_dims
from .instantiate import _role_params

# the dims a program of the class is sized by: every one must be tuned by a tile role
MAIN_DIMS = {"matmul": ("M", "N", "K"), "quantized_matmul": ("M", "N", "K")}
# classes where the resource model claims shared memory from the tiles (`resources.footprint`)
RESOURCE_CLASSES = ("matmul", "quantized_matmul", "attention")


def _covered(problem: Problem, space: Space, cls: Classification) -> dict[str, list[str]]:
    """problem dim -> the tile roles of the space that cover it."""
    out: dict[str, list[str]] = {}
    for role in tiled_dims(problem, space):
        d = tile_dim_name(role, cls)
        if d is not None:
            out.setdefault(d, []).append(role)
    return out


def space_gap(problem: Problem, space: Space, cls: Classification | None = None) -> str | None:
    """Why every learned source would extrapolate on this space (module docstring), or None."""
    cls = cls or classify(problem, space)
    kc = cls.kernel_class
    covered = _covered(problem, space, cls)
    missing: list[str] = []
    if kc in MAIN_DIMS:
        missing = [d for d in MAIN_DIMS[kc] if d in cls.dims and d not in covered]
    elif kc == "attention" and "seq" in cls.dims:
        roles = set(covered.get("seq", ()))
        missing = [f"seq ({r}, the {what} tile)" for r, what in (("tile:M", "query"), ("tile:N", "key"))
                   if r not in roles]
    elif kc == "row_reduction" and "cols" in cls.dims and "cols" not in covered:
        missing = ["cols (the reduced dim)"]
    elif kc == "elementwise" and cls.dims and not covered:
        missing = [f"any of {', '.join(cls.dims)}"]
    out = []
    if missing:
        tuned = ", ".join(f"{p.name} ({p.role})" for p in space.params if p.role) or "no role"
        out.append(f"no tile of this space covers {', '.join(missing)} (it tunes {tuned}): every {kc} rule and "
                   "the ranker size that tile, which this kernel fixes inside")
    if kc in RESOURCE_CLASSES and not missing:
        try:
            fp = resources.footprint(problem, space, space.default())
        except SpaceError:
            fp = None
        if fp is None or fp.smem_bytes is None:
            out.append("the resource model cannot tell whether a config fits in shared memory: it reads the "
                       + ("tile:M, tile:N and tile:K roles" if kc != "attention"
                          else "tile:M and tile:N roles, warps and the head dim"))
    elif kc in RESOURCE_CLASSES:
        out.append("nor can the resource model tell whether a config fits in shared memory without it")
    return "; ".join(out) or None


def rule_gap(rule: Any, problem: Problem, space: Space, cls: Classification | None = None) -> str | None:
    """Why `rule` (a `TheoryRule`) would extrapolate on this space: the tile roles it sizes
    that the space does not tune (module docstring); None when there are none."""
    cls = cls or classify(problem, space)
    mapped = _role_params(space, cls, rule.forms)
    free = set(independent_dims(cls))
    gone = []
    for role in rule.forms:
        if not (role == "tile" or role.startswith("tile:")) or role in mapped:
            continue
        d = tile_dim_name(role, cls)
        if d is not None and d in free:
            continue  # untiled, one index per program: a value the rule's grid reasoning knows
        gone.append(f"{role} over {d}, which this space does not tune (the kernel fixes it inside)" if d is not None
                    else f"{role}, which covers no dim of this problem (its tiles are not the rule's)")
    if not gone:
        return None
    return f"sizes {'; '.join(gone)}: the rule's other values were confirmed beside its own tiles"
