"""Which of Inductor's Triton matmul templates to compile and time, chosen with no measurement.

    picks = pick(m, n, k, "bf16", hardware, limit=4)   # [{"BLOCK_M": 64, ..., "num_stages": 4}, ...]

Under `max-autotune`, Inductor lowers every matmul (mm, addmm, bmm) to a choice between ATen
(cuBLAS) and its Triton `mm` template at about twenty configs, scaled to the shape; it compiles
and times them all, for every matmul shape of the model, which is most of max-autotune's compile
time. Without max-autotune the Triton template is never tried, and a small-batch matmul (a
decoder's decode step) keeps cuBLAS, which max-autotune beats there (docs/INDUCTOR.md, "Llama
decode and max-autotune").

`abductune.inductor.enable(gemm=N)` turns the template on for the matmuls below, one lowering
at a time, and puts `pick`'s N configs in place of Inductor's list: the shipped ranker (`heuristics.ranker_shipped`, learned across the zoo's
matmul kernels, one of which, the tutorial grouped matmul, is Inductor's template's design)
orders the configs of `SPACE` for the shape, and the first config of each of the N best output
tiles is kept (the tile sets the grid, the padding and the reuse; stages and warps move a config
less, and N near-copies of one tile would spend the timings on one guess), among the configs
Inductor compiles as they are (`as_compiled`). Inductor then compiles,
times and caches these beside ATen as it does its own list, so cuBLAS stays the answer where it
is faster.

Only a memory-bound matmul (`memory_bound`: below the GPU's ridge point, as a decode step's
are) gets the template; a compute-bound one keeps ATen alone, so its compile pays nothing. There
the time is the tensor cores' and cuBLAS, tuned by NVIDIA per architecture, runs near their peak;
where the time is the bytes, the tile and the grid that fill the GPU decide it, which is what a
config choice can win. Measured before the rule, on the H200 (session 38, one repeat each): BERT
(4,096 x 768 x 768 and its like, compute-bound) gave the template 35.6 s of cold compile against
12.8 s without, and max-autotune's full list did not beat the default's step (3.26 against 3.21
ms); the Llama decode step (32 rows) went from 0.404 ms (default) to 0.348 (0.338 under
max-autotune).

`SPACE` is the range the ranker was trained on (the zoo's tutorial matmul: tiles 16 to 256 by 32
to 256 by 32 to 128, 4 or 8 warps, 3 to 5 stages), not Inductor's exhaustive list: a ranking
outside its data is an extrapolation. No torch here: the seam (`inductor_templates`) converts.

What Inductor's timing of the picks and ATen found is kept in abductune's store (`record`), and a
later process with the same store asks it first (`verdict`): where ATen won, the matmul is lowered
as Inductor would, with nothing compiled or timed; where a pick won, that one config alone is
lowered, which Inductor takes without timing anything (a single choice). Inductor's own caches
remember a choice too, but in its cache folder, keyed by its own version and config; a process
with fresh caches (a new machine, a new container, a cleared /tmp) would compile and time every
pick again.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping

from ..costs import element_bytes
from ..errors import AbductuneError
from ..hardware import HardwareInfo
from ..measurement import Measurement, Status
from ..problem import Problem
from ..space import Param, Space


# Inductor's mm template's parameters, named as its config kwargs are
NAMES = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages")
GROUP_M = 8  # Inductor's template groups eight M tiles (its GemmConfig default)
SPACE = Space([
    Param("BLOCK_M", (16, 32, 64, 128, 256), "tile:M", kind="pow2"),
    Param("BLOCK_N", (32, 64, 128, 256), "tile:N", kind="pow2"),
    Param("BLOCK_K", (32, 64, 128), "tile:K", kind="pow2"),
    Param("GROUP_M", (GROUP_M,), "group"),
    Param("num_warps", (4, 8), "warps"),
    Param("num_stages", (3, 4, 5), "stages"),
])
# element sizes the picks are made for: the 16-bit float matmuls the ranker learned on; int8 and
# fp8 templates have their own heuristics, and fp32 runs on another peak (TF32 or not, Inductor's
# allow_tf32 decides), so those are lowered as Inductor would
DTYPES = {2: "bf16"}
DEFAULT_LIMIT = 4
_PICKED: dict[tuple, list[dict[str, int]]] = {}  # this process's picks, by shape, dtype, GPU and limit


def problem(m: int, n: int, k: int, dtype: str, hardware: HardwareInfo | None) -> Problem:
    """The matmul as the ranker reads it: a row-major (m x k) @ (k x n)."""
    size = element_bytes(dtype)
    return Problem("inductor_mm", "matmul", {"M": m, "N": n, "K": k}, {"a": dtype, "w": dtype, "c": dtype},
                   flops=2.0 * m * n * k, min_bytes=float(size * (m * k + k * n + m * n)),
                   hardware=hardware)


def memory_bound(m: int, n: int, k: int, dtype: str, hardware: HardwareInfo | None) -> bool:
    """Whether the matmul's FLOPs per byte (each operand read once, the output written once) sit
    below the hardware's ridge point (its peak for `dtype` over its memory bandwidth). False
    where the roofline is unknown (either floor 0)."""
    compute, memory = problem(m, n, k, dtype, hardware).roofline_seconds()
    return 0 < compute < memory


def pick(m: int, n: int, k: int, dtype: str, hardware: HardwareInfo | None,
         limit: int = DEFAULT_LIMIT) -> list[dict[str, int]]:
    """`limit` configs of `SPACE` for this matmul, best first: the ranker's first config of each
    of its `limit` best output tiles (module docstring). Raises AbductuneError where the ranker
    cannot rank (unknown hardware, a stale shipped file)."""
    from ..heuristics.ranker_shipped import rank

    if min(m, n, k) < 1:
        raise AbductuneError(f"a matmul of {m} x {n} x {k} has nothing to tile")
    key = (m, n, k, dtype, hardware.name if hardware is not None else None, limit)
    if key in _PICKED:  # a model lowers the same matmul once per layer
        return [dict(c) for c in _PICKED[key]]
    ordered = rank(problem(m, n, k, dtype, hardware), SPACE).configs
    out = [{n_: int(c[n_]) for n_ in NAMES}
           for c in first_of_each_tile(ordered, limit, lambda c: (c["BLOCK_M"], c["BLOCK_N"]),
                                       lambda c: as_compiled(c, m, n, k))]
    _PICKED[key] = [dict(c) for c in out]
    return out


def first_of_each_tile(ranked: Iterable[Mapping[str, Any]], limit: int, tile: Callable[[Mapping[str, Any]], Any],
                       keep: Callable[[Mapping[str, Any]], bool] = lambda c: True) -> list[Mapping[str, Any]]:
    """The first config of each of the first `limit` output tiles (`tile` of a config) in the
    `ranked` order, among those `keep` accepts: the picks' rule, also what
    benchmarks/inductor_gemm_picks.py scores on recorded matmuls."""
    out: list[Mapping[str, Any]] = []
    seen: set = set()
    for c in ranked:
        if len(out) >= limit:
            break
        if not keep(c):
            continue
        t = tile(c)
        if t not in seen:
            seen.add(t)
            out.append(c)
    return out


def _ceil_pow2(v: int) -> int:
    return 1 << max(0, (v - 1).bit_length())


def as_compiled(c: dict[str, Any], m: int, n: int, k: int) -> bool:
    """Whether Inductor compiles `c` as it is: its template list is scaled to the shape (each
    block at most the next power of two of its dim, at least 16) and its warps cut to one per 256
    output elements (`_scale_mm_configs`, `_finalize_mm_configs`). A config it would change was
    not the one ranked, and two picks could become one."""
    return (c["BLOCK_M"] <= max(16, _ceil_pow2(m)) and c["BLOCK_N"] <= max(16, _ceil_pow2(n))
            and c["BLOCK_K"] <= max(16, _ceil_pow2(k)) and c["num_warps"] <= c["BLOCK_M"] * c["BLOCK_N"] // 256)


def as_int(v: Any) -> int | None:
    """A size Inductor hands over (an int, a sympy Integer) as an int; None for a symbol (a
    dynamic size: its picks would be for one value of it)."""
    try:
        if getattr(v, "free_symbols", None):
            return None
        got = int(v)
    except (TypeError, ValueError):
        return None
    return got if got > 0 and math.isfinite(got) else None


# the note of a store run that holds Inductor's timings of the picks and ATen for one matmul
VERDICT = "inductor mm template: picks and ATen timed by Inductor"


def _context(m: int, n: int, k: int, dtype: str, hardware: HardwareInfo | None, toolchain: str) -> Any:
    from ..store import Context

    return Context.of(problem(m, n, k, dtype, hardware), SPACE, toolchain)


def usable_ms(ms: Any) -> float | None:
    """A time Inductor reported, as a float, where it is one a choice can be judged on (finite
    and positive); None for a failure (Inductor's inf) or anything else."""
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not math.isfinite(ms) or ms <= 0:
        return None
    return float(ms)


def record(store: Any, toolchain: str, m: int, n: int, k: int, dtype: str, hardware: HardwareInfo | None,
           limit: int, timings: Iterable[tuple[Mapping[str, int], float]], aten_ms: float | None,
           judge: str = "") -> dict[str, Any]:
    """Keep Inductor's timings of one matmul's template configs (config, ms; not finite: it
    failed) and of ATen (None: ATen was not among the choices) as a finished store run; its
    winner is the fastest template config where that beat ATen, none where ATen won. `judge`
    names how they were timed. Returns the verdict `verdict` will give for it."""
    rows = []
    for cfg, ms in timings:
        cfg = {n_: int(cfg[n_]) for n_ in NAMES}
        t = usable_ms(ms)
        rows.append(Measurement(cfg, Status.OK if t is not None else Status.RUNTIME_ERROR, t,
                                (t,) if t is not None else (), extra={"timed_by": "inductor"}, kind="search"))
    aten = usable_ms(aten_ms)
    ctx = _context(m, n, k, dtype, hardware, toolchain)
    run_id = store.start_run(ctx, "inductor", {"note": VERDICT, "limit": int(limit), "aten_ms": aten, "judge": judge})
    saved = store.put_many(ctx, rows, run_id=run_id)
    good = [r for r in saved if r.ok]
    best = min(good, key=lambda r: r.time_ms) if good else None
    won = "aten" if best is None or (aten is not None and aten <= best.time_ms) else "template"
    # the run's winner is the config Inductor went on to use: none of this space's where ATen won
    store.finish_run(run_id, winner_id=best.id if best is not None and won == "template" else None,
                     summary={"won": won, "aten_ms": aten, "best_template_ms": best.time_ms if best else None})
    return {"won": won, "config": dict(best.config) if best is not None and won == "template" else None}


def verdict(store: Any, toolchain: str, m: int, n: int, k: int, dtype: str, hardware: HardwareInfo | None,
            limit: int, judge: str = "") -> dict[str, Any] | None:
    """What a finished `record` of this matmul (same GPU, toolchain and dtype) found, if it
    timed at least `limit` picks beside ATen with the same `judge`: {"won": "aten"} or {"won":
    "template", "config": the fastest pick}; None where nothing was recorded (or only with fewer
    picks, or without ATen, or timed otherwise: a process asking for more is not answered by less)."""
    ctx = _context(m, n, k, dtype, hardware, toolchain)
    for run in reversed(store.runs(ctx)):
        opts = run.options or {}
        if run.status != "done" or opts.get("note") != VERDICT or int(opts.get("limit") or 0) < limit \
                or opts.get("aten_ms") is None or opts.get("judge", "") != judge:
            continue
        won = (run.summary or {}).get("won")
        if won == "aten":
            return {"won": "aten", "config": None}
        rows = store.by_id([run.winner_id]) if run.winner_id is not None else []
        if won == "template" and rows and rows[0].ok and SPACE.is_valid(rows[0].config):
            return {"won": "template", "config": {n_: int(rows[0].config[n_]) for n_ in NAMES}}
    return None
