"""What is tuned: a kernel, a shape, dtypes and the hardware, with the roofline numbers."""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from .hardware import HardwareInfo

KERNEL_CLASSES = ("matmul", "quantized_matmul", "row_reduction", "elementwise", "attention",
                  "convolution", "stencil", "other")


@dataclass(frozen=True)
class Problem:
    kernel: str
    kernel_class: str = "other"
    dims: dict[str, int] = field(default_factory=dict)
    dtypes: dict[str, str] = field(default_factory=dict)
    flops: float = 0.0
    min_bytes: float = 0.0  # each input read once, each output written once
    hardware: HardwareInfo | None = None
    source_hash: str = ""

    @property
    def dtype(self) -> str:
        """The dtype that sets the compute peak (the first input's, by convention)."""
        return next(iter(self.dtypes.values()), "fp32")

    def roofline_seconds(self) -> tuple[float, float]:
        """(compute floor, memory floor) in seconds on `hardware`; 0 when unknown."""
        hw = self.hardware
        if hw is None:
            return 0.0, 0.0
        peak = hw.peak(self.dtype)
        tc = self.flops / peak if peak and self.flops else 0.0
        tm = self.min_bytes / hw.mem_bandwidth if hw.mem_bandwidth and self.min_bytes else 0.0
        return tc, tm

    def __hash__(self) -> int:  # dims/dtypes are dicts: hash the identity instead
        return hash((self.key(), self.hardware.name if self.hardware else ""))

    def roofline(self, time_ms: float | None) -> tuple[float | None, float | None]:
        """Achieved fractions of peak FLOP/s and bytes/s at `time_ms` on `hardware`; the one
        place live and replay measurements get their roofline figures. None when unknown."""
        hw = self.hardware
        if hw is None or not time_ms or time_ms <= 0 or time_ms != time_ms or time_ms == float("inf"):
            return None, None
        s = time_ms / 1e3
        peak = hw.peak(self.dtype)
        ff = round(self.flops / s / peak, 6) if peak and self.flops else None
        fb = round(self.min_bytes / s / hw.mem_bandwidth, 6) if hw.mem_bandwidth and self.min_bytes else None
        return ff, fb

    def shape_key(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(self.dims.items()))

    def key(self) -> str:
        """Stable identity of the problem without its hardware (for stores and datasets)."""
        blob = json.dumps([self.kernel, self.source_hash, self.kernel_class, sorted(self.dims.items()),
                           sorted(self.dtypes.items())])
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "kernel_class": self.kernel_class, "dims": dict(self.dims),
                "dtypes": dict(self.dtypes), "flops": self.flops, "min_bytes": self.min_bytes,
                "source_hash": self.source_hash,
                "hardware": self.hardware.to_dict() if self.hardware else None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Problem":
        hw = d.get("hardware")
        return cls(kernel=d["kernel"], kernel_class=d.get("kernel_class", "other"),
                   dims={k: int(v) for k, v in (d.get("dims") or {}).items()},
                   dtypes=dict(d.get("dtypes") or {}), flops=float(d.get("flops") or 0.0),
                   min_bytes=float(d.get("min_bytes") or 0.0), source_hash=d.get("source_hash", ""),
                   hardware=HardwareInfo.from_dict(hw) if hw else None)


# a kernel's dtype variants are one kernel (matmul_fp16 and matmul_bf16 share their source)
_DTYPE_SUFFIX = re.compile(r"_(fp16|bf16|fp32|fp64|fp8|int8|int4)$")
HOLDOUT_LEVELS = ("shape", "kernel")


def kernel_family(name: str) -> str:
    """A kernel's name without its dtype suffix: "matmul_fp16" -> "matmul"."""
    return _DTYPE_SUFFIX.sub("", name)


@dataclass(frozen=True)
class Holdout:
    """What a figure must not know about the problem it is scored on: knowledge learned from
    the same shape (`level="shape"`, leave-one-shape-out, the in-sample figure) or from any
    shape of the same kernel (`level="kernel"`, leave-one-kernel-out: what a user who brings a
    kernel the project has never seen meets). The same kernel is the same name up to its
    dtype suffix, or the same source hash where both sides record one."""

    problem: Problem
    level: str = "shape"

    def __post_init__(self) -> None:
        if self.level not in HOLDOUT_LEVELS:
            from .errors import AbductuneError

            raise AbductuneError(f"holdout must be one of {', '.join(HOLDOUT_LEVELS)}, got {self.level!r}")

    def covers(self, kernel: str, dims: Mapping[str, int] | None = None, key: str = "",
               source_hash: str = "") -> bool:
        """Whether knowledge learned from (kernel, dims) must be left out."""
        p = self.problem
        if key and key == p.key():
            return True
        if self.level == "kernel":
            return (kernel_family(kernel) == kernel_family(p.kernel)
                    or bool(source_hash and p.source_hash and source_hash == p.source_hash))
        return kernel == p.kernel and dims is not None and dict(dims) == dict(p.dims)


def as_holdout(x: "Problem | Holdout | None") -> Holdout | None:
    """A Holdout from what callers pass as `exclude`: a Problem means its shape."""
    if x is None or isinstance(x, Holdout):
        return x
    return Holdout(x, "shape")


def holdouts(exclude: Any) -> tuple[Holdout, ...]:
    """The holdouts `exclude` names: a Problem (its shape), a Holdout, or several (nested
    leave-one-kernel-out scores a kernel without two: the one a choice is made for and the one
    it is judged on, `theory.store.choice_build`)."""
    if exclude is None:
        return ()
    items = [exclude] if isinstance(exclude, (Problem, Holdout)) else list(exclude)
    return tuple(h for h in (as_holdout(x) for x in items) if h is not None)
