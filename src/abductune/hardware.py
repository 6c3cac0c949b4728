"""Hardware descriptions: the peaks and limits the diagnosis and heuristics reason with.

Figures are public datasheet values (dense, no sparsity). They are leads for the roofline,
not measurements: `HardwareInfo.with_measured` replaces them with measured ceilings.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from .errors import AbductuneError

T = 1e12


@dataclass(frozen=True)
class HardwareInfo:
    name: str
    vendor: str = "nvidia"
    compute_capability: tuple[int, int] = (0, 0)
    sms: int = 0
    smem_per_sm: int = 0  # bytes usable by blocks on one SM
    smem_per_block: int = 0  # max bytes one block may use (opt-in limit)
    regs_per_sm: int = 65536
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    warp_size: int = 32
    peak_flops: dict[str, float] = field(default_factory=dict)  # dtype -> dense FLOP/s
    mem_bandwidth: float = 0.0  # bytes/s
    l2_bytes: int = 0
    family: str = ""  # e.g. "hopper", "ampere", "cdna3"

    @property
    def arch(self) -> str:
        if self.vendor == "nvidia":
            return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"
        return self.family

    def peak(self, dtype: str) -> float:
        """Dense matrix peak for `dtype` (falls back to fp16, then the largest known)."""
        if dtype in self.peak_flops:
            return self.peak_flops[dtype]
        for alias in (_DTYPE_ALIASES.get(dtype), "fp16"):
            if alias and alias in self.peak_flops:
                return self.peak_flops[alias]
        return max(self.peak_flops.values(), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["compute_capability"] = list(self.compute_capability)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "HardwareInfo":
        known = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        if "compute_capability" in kw:
            kw["compute_capability"] = tuple(kw["compute_capability"])
        return cls(**kw)

    def with_measured(self, **overrides: Any) -> "HardwareInfo":
        return dataclasses.replace(self, **overrides)


_DTYPE_ALIASES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float8": "fp8",
                  "half": "fp16", "float": "fp32", "int8": "int8", "tf32": "tf32"}

KB = 1024

KNOWN_GPUS: dict[str, HardwareInfo] = {
    h.name: h
    for h in [
        HardwareInfo("H100-SXM", "nvidia", (9, 0), 132, 228 * KB, 227 * KB,
                     peak_flops={"fp16": 989 * T, "bf16": 989 * T, "tf32": 494 * T, "fp32": 67 * T,
                                 "fp8": 1979 * T, "int8": 1979 * T},
                     mem_bandwidth=3.35e12, l2_bytes=50 * 1024 * KB, family="hopper"),
        HardwareInfo("H100-PCIe", "nvidia", (9, 0), 114, 228 * KB, 227 * KB,
                     peak_flops={"fp16": 756 * T, "bf16": 756 * T, "tf32": 378 * T, "fp32": 51 * T,
                                 "fp8": 1513 * T, "int8": 1513 * T},
                     mem_bandwidth=2.0e12, l2_bytes=50 * 1024 * KB, family="hopper"),
        HardwareInfo("H200", "nvidia", (9, 0), 132, 228 * KB, 227 * KB,
                     peak_flops={"fp16": 989 * T, "bf16": 989 * T, "tf32": 494 * T, "fp32": 67 * T,
                                 "fp8": 1979 * T, "int8": 1979 * T},
                     mem_bandwidth=4.8e12, l2_bytes=50 * 1024 * KB, family="hopper"),
        HardwareInfo("A100-SXM", "nvidia", (8, 0), 108, 164 * KB, 163 * KB,
                     peak_flops={"fp16": 312 * T, "bf16": 312 * T, "tf32": 156 * T, "fp32": 19.5 * T,
                                 "int8": 624 * T},
                     mem_bandwidth=2.039e12, l2_bytes=40 * 1024 * KB, family="ampere"),
        HardwareInfo("A100-PCIe", "nvidia", (8, 0), 108, 164 * KB, 163 * KB,
                     peak_flops={"fp16": 312 * T, "bf16": 312 * T, "tf32": 156 * T, "fp32": 19.5 * T,
                                 "int8": 624 * T},
                     mem_bandwidth=1.935e12, l2_bytes=40 * 1024 * KB, family="ampere"),
        HardwareInfo("L40S", "nvidia", (8, 9), 142, 100 * KB, 99 * KB, max_threads_per_sm=1536,
                     max_blocks_per_sm=24,
                     peak_flops={"fp16": 362 * T, "bf16": 362 * T, "tf32": 183 * T, "fp32": 91.6 * T,
                                 "fp8": 733 * T, "int8": 733 * T},
                     mem_bandwidth=0.864e12, l2_bytes=96 * 1024 * KB, family="ada"),
        HardwareInfo("B200", "nvidia", (10, 0), 148, 228 * KB, 227 * KB,
                     peak_flops={"fp16": 2250 * T, "bf16": 2250 * T, "tf32": 1100 * T, "fp32": 80 * T,
                                 "fp8": 4500 * T, "fp4": 9000 * T, "int8": 4500 * T},
                     mem_bandwidth=8.0e12, l2_bytes=126 * 1024 * KB, family="blackwell"),
        HardwareInfo("MI300X", "amd", (9, 4), 304, 64 * KB, 64 * KB, max_threads_per_sm=2048,
                     warp_size=64, regs_per_sm=131072,
                     peak_flops={"fp16": 1307 * T, "bf16": 1307 * T, "tf32": 654 * T, "fp32": 163 * T,
                                 "fp8": 2615 * T, "int8": 2615 * T},
                     mem_bandwidth=5.3e12, l2_bytes=256 * 1024 * KB, family="cdna3"),
    ]
}

# Patterns over device names as drivers report them ("NVIDIA H100 80GB HBM3", ...).
_NAME_PATTERNS = [
    (r"H100.*PCIe", "H100-PCIe"),
    (r"H100", "H100-SXM"),
    (r"H200", "H200"),
    (r"A100.*PCI", "A100-PCIe"),
    (r"A100", "A100-SXM"),
    (r"L40S", "L40S"),
    (r"B200", "B200"),
    (r"MI300X", "MI300X"),
]


def lookup(name: str, *, strict: bool = True) -> HardwareInfo | None:
    """Find a known GPU by table name or by the device name a driver reports."""
    if name in KNOWN_GPUS:
        return KNOWN_GPUS[name]
    for pat, key in _NAME_PATTERNS:
        if re.search(pat, name, re.IGNORECASE):
            return KNOWN_GPUS[key]
    if strict:
        raise AbductuneError(
            f"unknown GPU {name!r}; known: {', '.join(KNOWN_GPUS)} (or pass a HardwareInfo)")
    return None


def matches(hw: HardwareInfo, *, vendor: str | None = None, min_cc: tuple[int, int] | None = None,
            max_cc: tuple[int, int] | None = None, family: str | None = None,
            name_pattern: str | None = None) -> bool:
    """Hardware predicate for heuristics and theories: every given criterion must hold."""
    if vendor is not None and hw.vendor != vendor:
        return False
    if min_cc is not None and tuple(hw.compute_capability) < tuple(min_cc):
        return False
    if max_cc is not None and tuple(hw.compute_capability) > tuple(max_cc):
        return False
    if family is not None and hw.family != family:
        return False
    if name_pattern is not None and not re.search(name_pattern, hw.name, re.IGNORECASE):
        return False
    return True
