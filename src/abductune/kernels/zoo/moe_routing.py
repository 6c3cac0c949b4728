"""Routing distributions for the fused-MoE kernel's inputs: uniform, Zipf-skewed, or the expert
loads of a recorded trace, carried by the Problem so every process builds the same tokens.

A MoE GEMM's time depends on how many (token, slot) pairs each expert gets: a hot expert makes
long m-tile runs, cold experts leave partial tiles. So a table tuned for uniform routing may not
be the best for a trained router's skewed loads. A routing is written as one canonical string:

    uniform          every expert equally likely
    zipf:S           expert e (0-based) weighted 1 / (e + 1) ** S: expert 0 the hottest
    loads:c0,c1,...  expert e weighted c_e (from a recorded trace: `read_trace`)

Each token draws TOP_K distinct experts, each draw proportional to the weights of the experts
not drawn yet (Gumbel top-k on the log weights), from a seeded CPU generator. A trace is kept
as its per-expert loads, not its token rows: every batch size draws its own tokens from those
loads, so which experts a token pairs is not preserved (the GEMM's time does not depend on it).

The string rides in `Problem.dtypes["routing"]` (the one free-text map a Problem carries to
benchmark workers): a problem without it is the zoo's recorded default routing, unchanged.
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ...errors import AbductuneError
from ...problem import Problem

if TYPE_CHECKING:
    import torch

ROUTING_KEY = "routing"
FORMS = "uniform, zipf:S (S >= 0, e.g. zipf:1.2) or trace:FILE (a JSON file of expert loads or ids)"


def canonical(text: str, num_experts: int, base: str | Path | None = None) -> str:
    """The canonical routing string for what a user wrote (`trace:FILE` is read here, relative
    to `base` when given); raises AbductuneError naming what to fix."""
    t = (text or "").strip()
    if t == "uniform":
        return "uniform"
    kind, _, arg = t.partition(":")
    if kind == "zipf":
        try:
            s = float(arg)
        except ValueError:
            raise AbductuneError(f"routing {text!r}: the Zipf exponent must be a number, e.g. zipf:1.2") from None
        if not (s >= 0 and math.isfinite(s)):
            raise AbductuneError(f"routing {text!r}: the Zipf exponent must be finite and >= 0")
        return f"zipf:{s:g}"
    if kind == "trace":
        if not arg:
            raise AbductuneError(f"routing {text!r}: name the trace file, e.g. trace:router_loads.json")
        path = Path(arg) if base is None or Path(arg).is_absolute() else Path(base) / arg
        return loads_routing(read_trace(path, num_experts))
    if kind == "loads":
        weights(t, num_experts)  # validated against E
        return t
    raise AbductuneError(f"unknown routing {text!r}; use {FORMS}")


def loads_routing(loads: Sequence[int]) -> str:
    return "loads:" + ",".join(str(int(c)) for c in loads)


def read_trace(path: str | Path, num_experts: int) -> list[int]:
    """Per-expert loads from a recorded trace: a JSON object with "counts" (one number per
    expert), "topk_ids" (one list of expert ids per token) or "expert_ids" (a flat list of
    ids); a bare list is read as topk_ids when its items are lists, else as expert ids."""
    p = Path(path)
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AbductuneError(f"routing trace {p} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise AbductuneError(f"cannot read routing trace {p}: {e}") from None
    except json.JSONDecodeError as e:
        raise AbductuneError(f"routing trace {p}:{e.lineno}: not valid JSON ({e.msg})") from None
    if isinstance(obj, list):
        obj = {"topk_ids": obj} if obj and all(isinstance(r, list) for r in obj) else {"expert_ids": obj}
    if not isinstance(obj, dict) or not ({"counts", "topk_ids", "expert_ids"} & set(obj)):
        raise AbductuneError(f"routing trace {p}: expected a JSON object with counts (one per expert), "
                             "topk_ids (expert ids per token) or expert_ids (a flat list)")
    if "counts" in obj:
        counts = obj["counts"]
        if not isinstance(counts, list) or len(counts) != num_experts:
            raise AbductuneError(f"routing trace {p}: counts must list one number per expert "
                                 f"({num_experts}), got {len(counts) if isinstance(counts, list) else counts!r}")
        if any(isinstance(c, bool) or not isinstance(c, (int, float)) or not c >= 0 or c != int(c)
               for c in counts):
            raise AbductuneError(f"routing trace {p}: counts must be whole numbers >= 0")
        loads = [int(c) for c in counts]
    else:
        key = "topk_ids" if "topk_ids" in obj else "expert_ids"
        rows = obj[key]
        ids = [i for r in rows for i in r] if key == "topk_ids" and isinstance(rows, list) and \
            all(isinstance(r, list) for r in rows) else rows
        if not isinstance(ids, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
            raise AbductuneError(f"routing trace {p}: {key} must hold integer expert ids")
        bad = sorted({i for i in ids if not 0 <= i < num_experts})
        if bad:
            raise AbductuneError(f"routing trace {p}: expert ids {bad[:5]} are outside 0..{num_experts - 1} "
                                 f"(E={num_experts})")
        loads = [0] * num_experts
        for i in ids:
            loads[i] += 1
    if sum(loads) == 0:
        raise AbductuneError(f"routing trace {p}: no expert has any load")
    return loads


def weights(routing: str, num_experts: int) -> list[float]:
    """Each expert's relative weight under a canonical routing string."""
    kind, _, arg = routing.partition(":")
    if kind == "uniform":
        return [1.0] * num_experts
    if kind == "zipf":
        s = float(arg)
        return [1.0 / (e + 1) ** s for e in range(num_experts)]
    if kind == "loads":
        try:
            w = [float(int(c)) for c in arg.split(",")]
        except ValueError:
            raise AbductuneError(f"routing {routing[:60]!r}: loads must be whole numbers") from None
        if len(w) != num_experts:
            raise AbductuneError(f"routing lists loads for {len(w)} experts; the problem has E={num_experts}")
        if any(x < 0 for x in w):
            raise AbductuneError("routing loads must be >= 0")
        return w
    raise AbductuneError(f"unknown routing {routing[:60]!r}; use {FORMS}")


def sample_topk(m: int, num_experts: int, top_k: int, routing: str, seed: int) -> "torch.Tensor":
    """(M, top_k) int32 expert ids: per token, top_k distinct experts drawn without replacement
    in proportion to `weights` (Gumbel top-k), deterministic for a seed."""
    import torch

    w = torch.tensor(weights(routing, num_experts), dtype=torch.float64)
    if int((w > 0).sum()) < top_k:
        raise AbductuneError(f"routing {describe(routing)} gives load to fewer than {top_k} experts; "
                             f"each token needs {top_k} distinct experts")
    g = torch.Generator(device="cpu")
    g.manual_seed(seed)
    u = torch.rand(m, num_experts, generator=g, dtype=torch.float64).clamp_(1e-300, 1.0 - 1e-16)
    keys = torch.log(w) - torch.log(-torch.log(u))  # log weight + Gumbel noise; log 0 = -inf: never drawn
    return keys.topk(top_k, dim=1).indices.to(torch.int32)


def routed(problem: Problem, routing: str | None) -> Problem:
    """`problem` carrying a canonical routing (None: the kernel's default routing)."""
    dtypes = {k: v for k, v in problem.dtypes.items() if k != ROUTING_KEY}
    if routing is not None:
        dtypes[ROUTING_KEY] = routing
    return dataclasses.replace(problem, dtypes=dtypes)


def routing_of(problem: Problem) -> str | None:
    return problem.dtypes.get(ROUTING_KEY)


def describe(routing: str) -> str:
    """A short label: a trace's loads are summarised, not listed."""
    if routing.startswith("loads:"):
        n = routing.count(",") + 1
        return f"trace loads over {n} experts"
    return routing
