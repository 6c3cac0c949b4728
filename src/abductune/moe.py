"""Tuning a fused-MoE kernel's vLLM config table: one Session per batch size, each seeded with
its tuned neighbours' winners, for a routing distribution, the table rewritten after each.

    table = tune_moe(E=8, N=3584, K=4096, batch_sizes=[16, 256, 2048], routing="zipf:1.2",
                     budget=16, out_dir="configs")
    table.path      # configs/E=8,N=1792,device_name=NVIDIA_H100_80GB_HBM3.json, as vLLM reads it

What vLLM's `benchmark_moe.py --tune` does is time every config of a fixed grid at every batch
size, under uniform random routing. Here each batch size is a search (abduction by default)
under a budget, started from the winners of the nearest batch sizes already tuned (nearest in
log scale, one on each side, the nearer first: tiles that suit 16 tokens mostly suit 24), and
the inputs follow the routing asked for (`kernels/zoo/moe_routing.py`: uniform, Zipf, or a
recorded trace's expert loads). Batch sizes are tuned in ascending order. After each one the
vLLM JSON and a log beside it (`tune-moe.<file name>`, with the settings and every entry's
time, evaluations and seeds) are written atomically, so a crash loses at most the batch size
under way and a rerun with the same settings keeps what the log holds and tunes the rest.

The kernel's N is the GEMM's output width. vLLM names its file by the intermediate size per
shard instead (the N of w2's last dim): for the gate+up projection (`projection="up"`, the
default) that is N / 2, for the down projection it is K; `vllm_n` overrides both.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from .errors import AbductuneError
from .heuristics.vllm_moe import (DEFAULT_BATCH_SIZES, dtype_selector, read_table, table_file_name,
                                  to_vllm, write_table)
from .measurement import Measurement
from .search import Budget
from .search.base import Seed

log = logging.getLogger(__name__)

KERNEL = "zoo_moe_gemm_bf16"
PROJECTIONS = ("up", "down")
LOG_PREFIX = "tune-moe."  # the log beside the table; not `E=*.json`, so vLLM and `harvest` skip it
LOG_FORMAT = 1
# what must match for a rerun to keep an earlier run's entries
_SAME_TUNE = ("kernel", "source_hash", "E", "N", "K", "dtype", "top_k", "routing", "device_name", "file_n")


@dataclass
class MoeEntry:
    """One batch size of the table: the winner (kernel names and vLLM keys) and its cost."""

    batch: int
    config: dict[str, Any]
    vllm: dict[str, Any]
    time_ms: float | None
    default_ms: float | None  # the kernel's own default config, measured in the same run
    evaluations: int
    seeded_from: list[int] = field(default_factory=list)  # neighbour batch sizes whose winners seeded it
    wall_s: float = 0.0
    run_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "MoeEntry":
        return cls(int(d["batch"]), dict(d["config"]), dict(d["vllm"]), d.get("time_ms"), d.get("default_ms"),
                   int(d.get("evaluations", 0)), [int(b) for b in d.get("seeded_from", ())],
                   float(d.get("wall_s", 0.0)), d.get("run_id"))


@dataclass
class MoeTable:
    """What `tune_moe` produced: the entries by batch size, the settings, and the files."""

    settings: dict[str, Any]
    entries: dict[int, MoeEntry]
    path: Path | None = None  # the vLLM JSON
    log_path: Path | None = None
    kept: list[int] = field(default_factory=list)  # batch sizes kept from an earlier run

    def vllm_table(self) -> dict[int, dict[str, Any]]:
        return {b: dict(self.entries[b].vllm) for b in sorted(self.entries)}

    def to_dict(self) -> dict[str, Any]:
        return {"format": LOG_FORMAT, "settings": self.settings,
                "entries": {str(b): self.entries[b].to_dict() for b in sorted(self.entries)}}


@dataclass
class MoePlan:
    """What a `tune_moe` call would do, worked out without measuring anything (`--dry-run`)."""

    settings: dict[str, Any]
    batch_sizes: list[int]  # in the order they would be tuned
    kept: list[int]  # already in the table's log: kept, not tuned again
    path: Path | None
    budget: Budget
    strategy: str
    measure: str  # "live" (the GPU) or "in-process" (an injected timer)

    def lines(self) -> list[str]:
        s = self.settings
        up = s["projection"] == "up"
        why = ("the intermediate size per shard: the gate+up GEMM's N / 2" if up else
               "the intermediate size per shard: the down GEMM's K")
        if s.get("vllm_n_given"):
            why = "given"
        b = self.budget
        per = f"{b.evaluations} evaluations" if b.evaluations is not None else "no evaluation limit"
        if b.seconds is not None:
            per += f", {b.seconds:g} s"
        todo = [x for x in self.batch_sizes if x not in self.kept]
        out = [f"kernel       {s['kernel']} ({s['dtype']}, top-{s['top_k']} routing)",
               f"GEMM         M = tokens, N={s['N']}, K={s['K']}, E={s['E']}",
               f"routing      {s['routing_label']}",
               f"vLLM file    {self.path if self.path is not None else s['file_name']} (N={s['file_n']}: {why})",
               f"batch sizes  {','.join(map(str, todo)) or 'none left'} ({len(todo)}, ascending; each "
               "seeded with the winners of its nearest tuned neighbours)",
               f"search       {self.strategy}, {per} per batch size (seeds included), plus the kernel's "
               "default config as a baseline",
               f"measured     {'on the GPU (live)' if self.measure == 'live' else 'in this process (given timer)'}"]
        if self.kept:
            out.append(f"kept         {','.join(map(str, self.kept))}: already in {self.path} (--fresh re-tunes)")
        return out


# ---------------------------------------------------------------------------- settings and files
def _settings(E: int, N: int, K: int, dtype: str, routing: str, device_name: str | None, projection: str,
              vllm_n: int | None, kernel: str, trace_base: str | Path | None) -> tuple[Any, dict[str, Any]]:
    from . import kernels
    from .kernels.zoo import moe_routing

    spec = kernels.get(kernel)
    for name, v in (("E", E), ("N", N), ("K", K)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise AbductuneError(f"tune-moe: {name} must be a whole number >= 1, got {v!r}")
    top_k = int(getattr(spec, "top_k", 0) or 0)
    if not top_k or set(getattr(spec, "dims", ())) != {"M", "N", "K", "E"}:
        raise AbductuneError(f"tune-moe needs a fused-MoE kernel with dims M, N, K, E and a top_k "
                             f"(such as {KERNEL}); {kernel} is not one")
    if E < top_k:
        raise AbductuneError(f"tune-moe: E={E} experts is fewer than the {top_k} each token is routed to")
    if dtype != spec.dtype:
        raise AbductuneError(f"tune-moe: {kernel} computes in {spec.dtype}, not {dtype}; give --dtype {spec.dtype}")
    if projection not in PROJECTIONS:
        raise AbductuneError(f"projection must be one of {', '.join(PROJECTIONS)}, got {projection!r}")
    if vllm_n is not None:
        if isinstance(vllm_n, bool) or not isinstance(vllm_n, int) or vllm_n < 1:
            raise AbductuneError(f"vllm_n must be a whole number >= 1, got {vllm_n!r}")
        file_n = vllm_n
    elif projection == "up":
        if N % 2:
            raise AbductuneError(f"N={N} is odd: the gate+up GEMM's N is twice vLLM's intermediate size; "
                                 "give the down projection (--projection down) or --vllm-n")
        file_n = N // 2
    else:
        file_n = K
    canon = moe_routing.canonical(routing, E, trace_base)
    selector = dtype_selector(dtype)
    name = table_file_name(E, file_n, device_name or "<gpu>", selector)
    return spec, {"kernel": spec.name, "source_hash": spec.source_hash, "E": E, "N": N, "K": K, "dtype": dtype,
                  "top_k": top_k, "routing": canon, "routing_given": routing,
                  "routing_label": moe_routing.describe(canon), "device_name": device_name, "projection": projection,
                  "file_n": file_n, "vllm_n_given": vllm_n is not None, "dtype_selector": selector,
                  "file_name": name}


def _batch_list(batch_sizes: Iterable[int]) -> list[int]:
    out = []
    for b in batch_sizes:
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise AbductuneError(f"batch sizes are token counts >= 1, got {b!r}")
        if b not in out:
            out.append(b)
    if not out:
        raise AbductuneError("no batch sizes to tune")
    return sorted(out)


def _paths(out_dir: str | Path | None, settings: Mapping[str, Any]) -> tuple[Path | None, Path | None]:
    if out_dir is None:
        return None, None
    d = Path(out_dir)
    return d / settings["file_name"], d / (LOG_PREFIX + settings["file_name"])


def _earlier(path: Path | None, log_path: Path | None, settings: Mapping[str, Any], fresh: bool) -> dict[int, MoeEntry]:
    """Entries an earlier run with the same settings left in the log (none when `fresh`). A
    table that exists without this tune's log, or with other settings, is not overwritten."""
    import json

    if path is None or log_path is None or fresh:
        return {}
    if not log_path.exists():
        if path.exists():
            raise AbductuneError(f"{path} exists and was not written by tune-moe (no {log_path.name} beside it); "
                                 "give another output folder, or --fresh to overwrite it")
        return {}
    try:
        obj = json.loads(log_path.read_text(encoding="utf-8"))
        got = obj["settings"]
        entries = {int(b): MoeEntry.from_dict(e) for b, e in obj["entries"].items()}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise AbductuneError(f"{log_path}: unreadable tune-moe log ({type(e).__name__}: {e}); "
                             "delete it or give --fresh") from None
    diff = [k for k in _SAME_TUNE if got.get(k) != settings.get(k)]
    if diff:
        k = diff[0]
        was, now = got.get(k), settings.get(k)
        if k == "routing":
            was, now = got.get("routing_label", was), settings.get("routing_label", now)
        raise AbductuneError(f"{path} was tuned with {k}={was}, not {now}; give another output folder, "
                             "or --fresh to start over")
    return entries


def _save(table: MoeTable) -> None:
    """The log first, then the table: the log is what a rerun trusts."""
    import json

    if table.path is None or table.log_path is None:
        return
    from .files import atomic_write_text

    atomic_write_text(table.log_path, json.dumps(table.to_dict(), indent=1) + "\n")
    write_table(table.path, table.vllm_table(), _triton_version())


def _triton_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("triton")
    except metadata.PackageNotFoundError:
        return None


def load_table(path: str | Path) -> dict[int, dict[str, Any]]:
    """A written table read back as vLLM reads it (`heuristics.vllm_moe.read_table`)."""
    return read_table(path)


# ---------------------------------------------------------------------------- seeding
def neighbours(batch: int, tuned: Iterable[int]) -> list[int]:
    """The nearest tuned batch sizes below and above `batch`, the nearer (in log scale) first;
    an equal distance goes to the smaller batch size."""
    below = [b for b in tuned if b < batch]
    above = [b for b in tuned if b > batch]
    near = ([max(below)] if below else []) + ([min(above)] if above else [])
    return sorted(near, key=lambda b: (abs(math.log(b / batch)), b))


def neighbour_seeds(batch: int, entries: Mapping[int, MoeEntry]) -> list[Seed]:
    """The winners of `batch`'s neighbours (`neighbours`), the nearer first: the configs its
    search measures before any other."""
    return [Seed(dict(entries[b].config), f"neighbour:M={b}") for b in neighbours(batch, entries)]


# ---------------------------------------------------------------------------- measuring
def _inprocess_evaluator(spec: Any, problem: Any, timer: Callable[..., Any], seed: int) -> Any:
    """Time configs in this process with `timer(config, launch)` (a test's injected timer, or
    a do_bench), each config's first launch checked against the reference."""
    from .measure.inprocess import InProcessEvaluator, Launch

    try:
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        raise AbductuneError("tune-moe needs torch and triton (pip install 'abductune[gpu]')") from None
    inputs = spec.make_inputs(problem, device, seed)
    ref = spec.reference(inputs)
    out = spec.alloc_output(problem, inputs)

    def launch(cfg: Mapping[str, Any]) -> Launch:
        out.fill_(float("nan"))  # an element the config forgets to write fails its check
        return Launch(run=lambda: spec.launch(dict(cfg), inputs, out))

    def check(cfg: Mapping[str, Any]) -> str | None:
        ok, err = spec.check(out, ref)
        return None if ok else f"relative error {err:.3g} against the reference"
    return InProcessEvaluator(problem, spec.space(), launch, timer, check=check)


def plan_moe(E: int, N: int, K: int, dtype: str = "bf16", batch_sizes: Iterable[int] = DEFAULT_BATCH_SIZES, *,
             routing: str = "uniform", budget: int | Budget = 16, strategy: str = "abduction",
             out_dir: str | Path | None = None, device_name: str | None = None, projection: str = "up",
             vllm_n: int | None = None, fresh: bool = False, kernel: str = KERNEL, timer: Any = None,
             trace_base: str | Path | None = None) -> MoePlan:
    """Check every setting and say what `tune_moe` would do, measuring nothing (no GPU needed).
    Without `device_name` the file name holds `<gpu>` and no earlier run is looked for."""
    budget, batches = _search_settings(strategy, budget, batch_sizes)
    _, settings = _settings(E, N, K, dtype, routing, device_name, projection, vllm_n, kernel, trace_base)
    path, log_path = _paths(out_dir, settings)
    kept = sorted(_earlier(path, log_path, settings, fresh)) if device_name else []
    return MoePlan(settings, batches, [b for b in kept if b in batches], path, budget, strategy,
                   "in-process" if timer is not None else "live")


def _search_settings(strategy: str, budget: int | Budget, batch_sizes: Iterable[int]) -> tuple[Budget, list[int]]:
    from .search import STRATEGIES

    if strategy not in STRATEGIES:
        raise AbductuneError(f"unknown strategy {strategy!r}; known: {', '.join(sorted(STRATEGIES))}")
    budget = budget if isinstance(budget, Budget) else Budget(budget)
    if budget.evaluations is not None and budget.evaluations < 1:
        raise AbductuneError(f"the budget must be at least 1 evaluation per batch size, got {budget.evaluations}")
    return budget, _batch_list(batch_sizes)


def tune_moe(E: int, N: int, K: int, dtype: str = "bf16", batch_sizes: Iterable[int] = DEFAULT_BATCH_SIZES, *,
             routing: str = "uniform", budget: int | Budget = 16, strategy: str = "abduction", seed: int = 0,
             out_dir: str | Path | None = None, device_name: str | None = None, projection: str = "up",
             vllm_n: int | None = None, store: Any = None, timer: Callable[..., Any] | None = None,
             heuristics: bool = True, database: Any = None, stop_early: bool = True, fresh: bool = False,
             kernel: str = KERNEL, compile_workers: int | None = None, trace_base: str | Path | None = None,
             on_progress: Callable[[dict[str, Any]], None] | None = None) -> MoeTable:
    """Tune `kernel` (a fused-MoE GEMM, dims M, N, K, E) at each batch size and write vLLM's
    table to `out_dir` (nothing written when None). `routing`: uniform, zipf:S or trace:FILE.
    `budget`: evaluations (or a Budget) per batch size. Live on the local GPU, unless `timer`
    (config, launch) -> ms is given: then in this process (tests under TRITON_INTERPRET=1).
    `store`: a Store or a path for every measurement (default: in memory per batch size).
    `on_progress(event)`: {"event": "start" | "done" | "kept", "batch": M, ...} per batch size."""
    # every setting checked before a GPU is looked for or a file touched
    budget, batches = _search_settings(strategy, budget, batch_sizes)
    _settings(E, N, K, dtype, routing, device_name, projection, vllm_n, kernel, trace_base)
    hardware = None
    if timer is None:
        from .measure.target import visible_gpu
        from .tune import gpu_available

        if not gpu_available():
            raise AbductuneError("tune-moe measures the kernel on a GPU and found none here; "
                                 "`abductune tune-moe --dry-run` prints the plan without one")
        seen = visible_gpu()
        if device_name is None:
            device_name = seen[0] if seen else _cuda_device_name()
    elif device_name is None:
        raise AbductuneError("tune_moe with a timer measures no GPU: give device_name for the file name")
    spec, settings = _settings(E, N, K, dtype, routing, device_name, projection, vllm_n, kernel, trace_base)
    path, log_path = _paths(out_dir, settings)
    if path is not None:
        from .files import check_writable

        path.parent.mkdir(parents=True, exist_ok=True)
        check_writable(path)
    earlier = _earlier(path, log_path, settings, fresh)
    table = MoeTable(settings, dict(earlier), path, log_path, kept=sorted(earlier))
    todo = [b for b in batches if b not in earlier]
    for b in sorted(set(batches) & set(earlier)):
        _emit(on_progress, {"event": "kept", "batch": b, "entry": earlier[b], "index": batches.index(b) + 1,
                            "total": len(batches)})
    own_store = isinstance(store, (str, Path))
    if own_store:
        from .store import Store

        store = Store(store)
    try:
        from .hardware import toolchain_key

        toolchain = toolchain_key()
        if timer is None:
            from .measure.live import prestart
            from .measure.target import local_hardware

            prestart()
            hardware = local_hardware()
        if table.path is not None and earlier:
            _save(table)  # the table as the log has it (a crash between the two writes)
        for b in todo:
            _emit(on_progress, {"event": "start", "batch": b, "index": batches.index(b) + 1, "total": len(batches),
                                "neighbours": neighbours(b, table.entries)})
            entry = _tune_batch(spec, settings, b, table.entries, budget, strategy, seed, store, timer, hardware,
                                toolchain, heuristics, database, stop_early, compile_workers)
            table.entries[b] = entry
            _save(table)
            _emit(on_progress, {"event": "done", "batch": b, "entry": entry, "index": batches.index(b) + 1,
                                "total": len(batches), "path": table.path})
    finally:
        if own_store:
            store.close()
    return table


def _tune_batch(spec: Any, settings: Mapping[str, Any], batch: int, entries: Mapping[int, MoeEntry], budget: Budget,
                strategy: str, seed: int, store: Any, timer: Any, hardware: Any, toolchain: str, heuristics: bool,
                database: Any, stop_early: bool, compile_workers: int | None) -> MoeEntry:
    """One batch size: the routed problem, its evaluator, the seeds (neighbours first), one Session."""
    from .kernels.zoo.moe_routing import routed
    from .session import Session
    from .tune import seed_list

    t0 = time.perf_counter()
    dims = {"M": batch, "N": settings["N"], "K": settings["K"], "E": settings["E"]}
    problem = routed(spec.problem(dims, hardware), settings["routing"])
    if timer is not None:
        ev = _inprocess_evaluator(spec, problem, timer, seed)
    else:
        from .measure.live import LiveEvaluator

        ev = LiveEvaluator(spec, problem, compile_workers=compile_workers, seed=seed, shared=True)
    try:
        near = neighbour_seeds(batch, entries)
        rest, fired = seed_list(problem, ev.space, spec.default_config(), None, heuristics, database)
        fired = [{"name": "neighbour", "source": "tune-moe", "status": "seed", "reason": s.source,
                  "config": dict(s.config)} for s in near] + list(fired)
        options = {"stop_early": True} if stop_early and strategy == "abduction" else {}
        with Session(ev, strategy=strategy, seed=seed, options=options, budget=budget, seeds=near + rest,
                     store=store, toolchain=toolchain, heuristics=fired) as session:
            res = session.run(baselines={"default": [spec.default_config()]})
    finally:
        ev.close()
    w: Measurement | None = res.winner
    if w is None or not w.ok:
        failed = [m for m in res.history if not m.ok]
        why = f": {failed[0].status.value}: {failed[0].error}" if failed else ""
        raise AbductuneError(f"tune-moe: no config of {spec.name} ran correctly at M={batch} "
                             f"({len(res.history)} tried{why})"[:600])
    d = res.baselines.get("default")
    return MoeEntry(batch, dict(w.config), to_vllm(w.config, ev.space), w.time_ms,
                    d.time_ms if d is not None and d.ok else None, res.evaluations,
                    neighbours(batch, entries), time.perf_counter() - t0, res.run_id)


def _emit(on_progress: Callable[[dict[str, Any]], None] | None, event: dict[str, Any]) -> None:
    log.info("tune-moe %s M=%s", event["event"], event["batch"])
    if on_progress is not None:
        on_progress(event)


def _cuda_device_name() -> str:
    import torch

    return torch.cuda.get_device_name()


__all__ = ["DEFAULT_BATCH_SIZES", "MoeEntry", "MoePlan", "MoeTable", "load_table", "neighbour_seeds", "neighbours",
           "plan_moe", "tune_moe"]
