"""A measurement: what happened when one config was compiled and run. Failures are data."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Mapping

STATUSES = ("ok", "compile_error", "resource_error", "runtime_error", "timeout", "wrong_result",
            "pruned")


@dataclass
class Measurement:
    config: dict[str, Any]
    status: str = "ok"
    time_ms: float | None = None  # median of samples
    samples_ms: list[float] = field(default_factory=list)
    compile_s: float = 0.0
    bench_s: float = 0.0
    registers: int | None = None
    spills: int | None = None
    smem_bytes: int | None = None
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # achieved FLOP/s, bytes/s, fractions ...

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown measurement status {self.status!r}; one of {STATUSES}")
        if self.time_ms is None and self.samples_ms and self.status == "ok":
            self.time_ms = statistics.median(self.samples_ms)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.time_ms is not None and math.isfinite(self.time_ms)

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

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"config": self.config, "status": self.status}
        for k in ("time_ms", "registers", "spills", "smem_bytes"):
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
        return cls(config=config, status=d.get("status", "ok"), time_ms=d.get("time_ms"),
                   samples_ms=list(d.get("samples_ms") or []), compile_s=float(d.get("compile_s", 0.0)),
                   bench_s=float(d.get("bench_s", 0.0)), registers=d.get("registers"),
                   spills=d.get("spills"), smem_bytes=d.get("smem_bytes"), error=d.get("error", ""),
                   extra=dict(d.get("extra") or {}))
