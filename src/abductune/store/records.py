"""The store's records (Context, BestConfig, Run), config keys, and how each is written to and
read back from a row (canonical JSON, column lists, row decoders)."""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..measurement import Measurement
from ..problem import Problem
from ..space import Space

# the package's logger, as before the split: the CLI's `WARNING abductune.store: ...` lines stay
log = logging.getLogger("abductune.store")

RUN_STATUSES = ("running", "done", "interrupted")
# kinds whose rows a strategy saw as its own answers (what a resumed run replays and counts)
SEARCH_KINDS = ("search", "seed", "remeasure")


# ----------------------------------------------------------------------------- JSON

def _json_default(o: Any) -> Any:
    if hasattr(o, "item") and callable(o.item):  # numpy scalars
        return o.item()
    if isinstance(o, (tuple, set, frozenset)):
        return list(o)
    if hasattr(o, "tolist"):  # numpy arrays
        return o.tolist()
    return repr(o)


def _dumps(o: Any) -> str:
    return json.dumps(o, sort_keys=True, separators=(",", ":"), default=_json_default)


def _tuplify(v: Any) -> Any:
    """JSON turns tuples into lists; config values must be hashable, so turn them back."""
    return tuple(_tuplify(x) for x in v) if isinstance(v, list) else v


def config_json(config: Mapping[str, Any]) -> str:
    """Canonical JSON of a config (sorted keys): what the store keeps and hashes."""
    return _dumps(dict(config))


def config_key(config: Mapping[str, Any]) -> str:
    """Stable hash of a config, independent of key order."""
    return hashlib.sha256(config_json(config).encode()).hexdigest()[:20]


def _toolchain_str(toolchain: Mapping[str, Any] | str | None) -> str:
    if toolchain is None:
        return ""
    if isinstance(toolchain, str):
        return toolchain
    return _dumps(dict(toolchain))


def _classification(problem_like: Mapping[str, Any]) -> dict[str, str]:
    """kernel class, variant, dtype family, fallback category and shape bucket of a problem,
    from the one shared classifier."""
    from ..classify import classify
    p = Problem(kernel=problem_like.get("kernel", ""), kernel_class=problem_like.get("kernel_class") or "other",
                dims=dict(problem_like.get("dims") or {}), dtypes=dict(problem_like.get("dtypes") or {}))
    try:
        c = classify(p)
        return {"kernel_class": c.kernel_class, "variant": c.variant, "dtype_family": c.dtype_family,
                "fallback": c.fallback, "bucket": c.bucket}
    except Exception as e:  # noqa: BLE001 - classification is descriptive; never block a store write
        log.warning("classifying %s failed: %s", p.kernel, e)
        return {"kernel_class": p.kernel_class, "variant": "", "dtype_family": "", "fallback": "",
                "bucket": ""}


# ----------------------------------------------------------------------------- records

@dataclass(frozen=True)
class Context:
    """What measurements are of. Identity: kernel, source_hash, space_fingerprint,
    problem_key, hardware, toolchain; the other fields describe the problem."""

    kernel: str
    source_hash: str
    space_fingerprint: str
    problem_key: str
    dims: dict[str, int] = field(default_factory=dict)
    hardware: str = ""
    toolchain: str = ""  # canonical JSON (sorted keys) when given as a dict
    kernel_class: str = ""
    dtypes: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.toolchain, str):
            object.__setattr__(self, "toolchain", _toolchain_str(self.toolchain))
        object.__setattr__(self, "dims", {k: int(v) for k, v in dict(self.dims).items()})
        object.__setattr__(self, "dtypes", dict(self.dtypes))

    def __hash__(self) -> int:
        return hash(self.identity)

    @classmethod
    def of(cls, problem: Problem, space: Space, toolchain: Mapping[str, Any] | str = "") -> "Context":
        return cls(kernel=problem.kernel, source_hash=problem.source_hash,
                   space_fingerprint=space.fingerprint(), problem_key=problem.key(),
                   dims=dict(problem.dims), hardware=problem.hardware.name if problem.hardware else "",
                   toolchain=_toolchain_str(toolchain), kernel_class=problem.kernel_class,
                   dtypes=dict(problem.dtypes))

    @property
    def identity(self) -> tuple[str, str, str, str, str, str]:
        return (self.kernel, self.source_hash, self.space_fingerprint, self.problem_key,
                self.hardware, self.toolchain)

    @property
    def classification(self) -> dict[str, str]:
        return _classification({"kernel": self.kernel, "kernel_class": self.kernel_class,
                                "dims": self.dims, "dtypes": self.dtypes})

    @property
    def shape_bucket(self) -> str:
        return self.classification["bucket"]


@dataclass(frozen=True)
class BestConfig:
    """The fastest ok measurement of one context, with how many configs it has measured."""

    context: Context
    measurement: Measurement
    measured: int

    @property
    def shape_bucket(self) -> str:
        return self.context.shape_bucket

    @property
    def config(self) -> dict[str, Any]:
        return self.measurement.config


@dataclass(frozen=True)
class Run:
    """One entry of the run journal."""

    id: int
    context: Context
    strategy: str
    status: str
    started: float
    finished: float | None
    options: dict[str, Any]
    heuristics: list[Any]
    pid: int | None
    host: str
    tune_key: str = ""
    resumes: int | None = None  # the run this one continued
    winner_id: int | None = None
    summary: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- rows

_CTX_COLS = ("kernel, source_hash, space_fingerprint, problem_key, hardware, toolchain, "
             "kernel_class, dims, dtypes")
_M_COLS = ("config, status, time_ms, samples, compile_s, bench_s, registers, spills, smem_bytes, "
           "frac_peak_flops, frac_peak_bw, error, extra, id, run_id, kind")
_N_M = 16
_RUN_COLS = ("r.id, r.strategy, r.status, r.started, r.finished, r.options, r.heuristics, r.pid, "
             "r.host, r.tune_key, r.resumes, r.winner_id, r.summary")
_IDENTITY_WHERE = ("kernel = ? AND source_hash = ? AND space_fingerprint = ? AND problem_key = ? "
                   "AND hardware = ? AND toolchain = ?")


def _row_measurement(row: Sequence[Any]) -> Measurement:
    (cfg, status, time_ms, samples, compile_s, bench_s, registers, spills, smem, ff, fb, error,
     extra, mid, run_id, kind) = row
    return Measurement(config={k: _tuplify(v) for k, v in json.loads(cfg).items()},
                       status=status, time_ms=time_ms, samples_ms=tuple(json.loads(samples)),
                       compile_s=float(compile_s), bench_s=float(bench_s), registers=registers,
                       spills=spills, smem_bytes=smem, frac_peak_flops=ff, frac_peak_bw=fb,
                       error=error or "", extra=dict(json.loads(extra)), id=int(mid), run_id=run_id,
                       kind=kind)


def _row_context(row: Sequence[Any]) -> Context:
    (kernel, source_hash, fp, pkey, hardware, toolchain, kclass, dims, dtypes) = row
    return Context(kernel, source_hash, fp, pkey, json.loads(dims), hardware, toolchain, kclass,
                   json.loads(dtypes))


def _row_run(ctx: Context, r: Sequence[Any]) -> Run:
    return Run(int(r[0]), ctx, r[1], r[2], r[3], r[4], json.loads(r[5]), json.loads(r[6]), r[7],
               r[8] or "", r[9] or "", r[10], r[11], json.loads(r[12] or "{}"))
