"""A measurement: what happened when one config was compiled and run. Failures are data.

A `Measurement` is frozen: a re-measurement is a new record (kind "remeasure" or "verify"),
never an edit of an old one, so evidence can cite what it saw by id.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Mapping


class Status(str, Enum):
    """Why a config has (or has no) time. A `str` so `m.status == "ok"` reads naturally."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"
    RESOURCE_ERROR = "resource_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    WRONG_RESULT = "wrong_result"
    PRUNED = "pruned"

    def __str__(self) -> str:
        return self.value


STATUSES = tuple(s.value for s in Status)

# What a row of the store says about why it was measured.
KINDS = ("search", "seed", "remeasure", "baseline", "verify", "import")


@dataclass(frozen=True)
class Measurement:
    config: dict[str, Any]
    status: Status = Status.OK
    time_ms: float | None = None  # median of samples
    samples_ms: tuple[float, ...] = ()
    compile_s: float = 0.0
    bench_s: float = 0.0
    registers: int | None = None
    spills: int | None = None
    smem_bytes: int | None = None
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # anything untyped (rel_err, arch, ...)
    # roofline: achieved fraction of the hardware's peak FLOP/s and bytes/s (Problem.roofline)
    frac_peak_flops: float | None = None
    frac_peak_bw: float | None = None
    # provenance, set by the store: row id, run id, and why it was measured (KINDS)
    id: int | None = None
    run_id: int | None = None
    kind: str = "search"

    def __post_init__(self) -> None:
        try:
            status = Status(self.status)
        except ValueError:
            from .errors import AbductuneError

            raise AbductuneError(f"unknown measurement status {self.status!r}; one of {STATUSES}") from None
        set_ = object.__setattr__
        set_(self, "status", status)
        if not isinstance(self.samples_ms, tuple):
            set_(self, "samples_ms", tuple(float(s) for s in self.samples_ms))
        if self.time_ms is None and self.samples_ms and status is Status.OK:
            set_(self, "time_ms", statistics.median(self.samples_ms))

    @property
    def ok(self) -> bool:
        return self.status is Status.OK and self.time_ms is not None and math.isfinite(self.time_ms)

    @property
    def objective(self) -> float:
        """Time to minimise: +inf for anything that failed."""
        return self.time_ms if self.ok else math.inf  # type: ignore[return-value]

    @property
    def cost_s(self) -> float:
        """Seconds this measurement cost the tuner (compile + benchmark)."""
        return self.compile_s + self.bench_s

    @property
    def spread(self) -> float | None:
        """Relative spread (max - min) / median of the samples, None without samples."""
        if len(self.samples_ms) < 2 or not self.time_ms:
            return None
        return (max(self.samples_ms) - min(self.samples_ms)) / self.time_ms

    def replace(self, **changes: Any) -> "Measurement":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"config": self.config, "status": self.status.value}
        for k in ("time_ms", "registers", "spills", "smem_bytes", "frac_peak_flops", "frac_peak_bw"):
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        if self.samples_ms:
            d["samples_ms"] = [round(s, 6) for s in self.samples_ms]
        d["compile_s"] = round(self.compile_s, 6)
        d["bench_s"] = round(self.bench_s, 6)
        if self.error:
            d["error"] = self.error
        if self.extra:
            d["extra"] = self.extra
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Measurement":
        # JSON turns tuple values into lists; configs must stay hashable
        config = {k: tuple(v) if isinstance(v, list) else v for k, v in dict(d["config"]).items()}
        extra = dict(d.get("extra") or {})
        # datasets written before the roofline became typed kept it in extra
        fpf = d.get("frac_peak_flops", extra.pop("frac_peak_flops", None))
        fpb = d.get("frac_peak_bw", extra.pop("frac_peak_bw", None))
        return cls(config=config, status=d.get("status", "ok"), time_ms=d.get("time_ms"),
                   samples_ms=tuple(d.get("samples_ms") or ()), compile_s=float(d.get("compile_s", 0.0)),
                   bench_s=float(d.get("bench_s", 0.0)), registers=d.get("registers"),
                   spills=d.get("spills"), smem_bytes=d.get("smem_bytes"), error=d.get("error", ""),
                   extra=extra, frac_peak_flops=fpf, frac_peak_bw=fpb)

