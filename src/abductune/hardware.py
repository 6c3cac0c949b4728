"""Hardware descriptions: the peaks and limits the diagnosis and heuristics reason with.

Figures are public datasheet values (dense, no sparsity). They are leads for the roofline,
not measurements: `HardwareInfo.with_measured` replaces them with measured ceilings.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from .dtypes import canonical
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

    @property
    def warpgroup_mma(self) -> tuple[int, int] | None:
        """(warps, M rows) a warpgroup tensor-core MMA needs, or None where there is none.
        Hopper's wgmma runs on groups of 4 warps over 64-row tiles; Triton falls back to the
        Ampere-style mma.sync otherwise (checked by compiling for sm_90: BLOCK_M 64 with 2
        warps, or BLOCK_M 32 with 4, gives mma.sync; 64 rows with 4 warps gives wgmma)."""
        if self.vendor == "nvidia" and self.compute_capability[0] == 9:
            return (4, 64)
        return None

    def peak(self, dtype: str) -> float:
        """Dense matrix peak for `dtype` (falls back to fp16, then the largest known)."""
        if dtype in self.peak_flops:
            return self.peak_flops[dtype]
        for alias in (canonical(dtype), "fp16"):
            if alias in self.peak_flops:
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
        # Workstation and consumer GPUs seen in the public datasets (shared/datasets/public) and
        # in issue reports. Dense peaks; "fp16" is the tensor-core rate with FP32 accumulation,
        # which is what tl.dot on fp16 inputs runs at (GeForce boards do it at half the FP16-
        # accumulate rate). Per-SM limits (shared memory, threads, blocks) are the CUDA C++
        # Programming Guide's "technical specifications per compute capability" table.
        # Source: NVIDIA Turing GPU Architecture whitepaper (2018), Appendix A (reference boards).
        HardwareInfo("RTX 2080 Ti", "nvidia", (7, 5), 68, 64 * KB, 64 * KB, max_threads_per_sm=1024,
                     max_blocks_per_sm=16,
                     peak_flops={"fp16": 53.8 * T, "fp32": 13.4 * T, "int8": 215.2 * T},
                     mem_bandwidth=616e9, l2_bytes=5632 * KB, family="turing"),
        # Source: Turing whitepaper and NVIDIA TITAN RTX product page (full-rate FP32 accumulate).
        HardwareInfo("TITAN RTX", "nvidia", (7, 5), 72, 64 * KB, 64 * KB, max_threads_per_sm=1024,
                     max_blocks_per_sm=16,
                     peak_flops={"fp16": 130.5 * T, "fp32": 16.3 * T, "int8": 261 * T},
                     mem_bandwidth=672e9, l2_bytes=6 * 1024 * KB, family="turing"),
        # Source: NVIDIA Ampere GA102 GPU Architecture whitepaper (2020), Appendix A.
        HardwareInfo("RTX 3090", "nvidia", (8, 6), 82, 100 * KB, 99 * KB, max_threads_per_sm=1536,
                     max_blocks_per_sm=16,
                     peak_flops={"fp16": 71 * T, "bf16": 71 * T, "tf32": 35.6 * T, "fp32": 35.6 * T,
                                 "int8": 284 * T},
                     mem_bandwidth=936e9, l2_bytes=6 * 1024 * KB, family="ampere"),
        # Source: GA102 whitepaper, Appendix A (RTX A6000 column).
        HardwareInfo("RTX A6000", "nvidia", (8, 6), 84, 100 * KB, 99 * KB, max_threads_per_sm=1536,
                     max_blocks_per_sm=16,
                     peak_flops={"fp16": 154.8 * T, "bf16": 154.8 * T, "tf32": 77.4 * T,
                                 "fp32": 38.7 * T, "int8": 309.7 * T},
                     mem_bandwidth=768e9, l2_bytes=6 * 1024 * KB, family="ampere"),
        # Source: NVIDIA RTX A4000 datasheet (2021): 19.2 TFLOPS FP32, 153.4 tensor TFLOPS with
        # sparsity (76.7 dense), 448 GB/s; 48 SMs of GA104.
        HardwareInfo("RTX A4000", "nvidia", (8, 6), 48, 100 * KB, 99 * KB, max_threads_per_sm=1536,
                     max_blocks_per_sm=16,
                     peak_flops={"fp16": 76.7 * T, "bf16": 76.7 * T, "tf32": 38.4 * T,
                                 "fp32": 19.2 * T, "int8": 153.4 * T},
                     mem_bandwidth=448e9, l2_bytes=4 * 1024 * KB, family="ampere"),
        # Source: NVIDIA GeForce RTX 3060 Laptop GPU specifications (30 SMs of GA106, boost up to
        # 1703 MHz depending on the laptop's power limit, 192-bit GDDR6 at 14 Gbps), with the
        # GA10x per-SM rates of the GA102 whitepaper; peaks are at the highest boost clock.
        HardwareInfo("RTX 3060 Laptop", "nvidia", (8, 6), 30, 100 * KB, 99 * KB,
                     max_threads_per_sm=1536, max_blocks_per_sm=16,
                     peak_flops={"fp16": 26.2 * T, "bf16": 26.2 * T, "tf32": 13.1 * T,
                                 "fp32": 13.1 * T, "int8": 104.6 * T},
                     mem_bandwidth=336e9, l2_bytes=3 * 1024 * KB, family="ampere"),
        # Source: NVIDIA Ada GPU Architecture whitepaper (2022), Appendix A.
        HardwareInfo("RTX 4090", "nvidia", (8, 9), 128, 100 * KB, 99 * KB, max_threads_per_sm=1536,
                     max_blocks_per_sm=24,
                     peak_flops={"fp16": 165.2 * T, "bf16": 165.2 * T, "tf32": 82.6 * T,
                                 "fp32": 82.6 * T, "fp8": 330.3 * T, "int8": 660.6 * T},
                     mem_bandwidth=1008e9, l2_bytes=72 * 1024 * KB, family="ada"),
        # Source: NVIDIA GeForce GTX 1080 Ti specifications and Pascal GP102 (no tensor cores;
        # FP16 runs at 1/64 of FP32; int8 is DP4A).
        HardwareInfo("GTX 1080 Ti", "nvidia", (6, 1), 28, 96 * KB, 48 * KB,
                     peak_flops={"fp16": 0.177 * T, "fp32": 11.3 * T, "int8": 45.2 * T},
                     mem_bandwidth=484e9, l2_bytes=2816 * KB, family="pascal"),
        # Source: NVIDIA Tesla V100 datasheet (2018).
        HardwareInfo("V100-SXM2", "nvidia", (7, 0), 80, 96 * KB, 96 * KB,
                     peak_flops={"fp16": 125 * T, "fp32": 15.7 * T},
                     mem_bandwidth=900e9, l2_bytes=6 * 1024 * KB, family="volta"),
        HardwareInfo("V100-PCIe", "nvidia", (7, 0), 80, 96 * KB, 96 * KB,
                     peak_flops={"fp16": 112 * T, "fp32": 14 * T},
                     mem_bandwidth=900e9, l2_bytes=6 * 1024 * KB, family="volta"),
        # Source: NVIDIA A100 datasheet (2021): the 40 GB boards have 1,555 GB/s.
        HardwareInfo("A100-PCIe-40GB", "nvidia", (8, 0), 108, 164 * KB, 163 * KB,
                     peak_flops={"fp16": 312 * T, "bf16": 312 * T, "tf32": 156 * T, "fp32": 19.5 * T,
                                 "int8": 624 * T},
                     mem_bandwidth=1.555e12, l2_bytes=40 * 1024 * KB, family="ampere"),
        HardwareInfo("A100-SXM-40GB", "nvidia", (8, 0), 108, 164 * KB, 163 * KB,
                     peak_flops={"fp16": 312 * T, "bf16": 312 * T, "tf32": 156 * T, "fp32": 19.5 * T,
                                 "int8": 624 * T},
                     mem_bandwidth=1.555e12, l2_bytes=40 * 1024 * KB, family="ampere"),
        # Datacenter boards common in clouds. Sources: NVIDIA's datasheets (dense figures, half of
        # the "with sparsity" ones): H100 NVL (2023), H20 (2024; its tensor rate is far below
        # what its SM count and clock would give, so no estimate could stand in for it), L4
        # (2023), L40 (2022), A10 (2021), A40 (2021), Tesla T4 (2019); SM counts and L2 sizes from
        # the architecture whitepapers.
        HardwareInfo("H100-NVL", "nvidia", (9, 0), 132, 228 * KB, 227 * KB,
                     peak_flops={"fp16": 835 * T, "bf16": 835 * T, "tf32": 417 * T, "fp32": 60 * T,
                                 "fp8": 1670 * T, "int8": 1670 * T},
                     mem_bandwidth=3.9e12, l2_bytes=50 * 1024 * KB, family="hopper"),
        HardwareInfo("H20", "nvidia", (9, 0), 78, 228 * KB, 227 * KB,
                     peak_flops={"fp16": 148 * T, "bf16": 148 * T, "tf32": 74 * T, "fp32": 44 * T,
                                 "fp8": 296 * T, "int8": 296 * T},
                     mem_bandwidth=4.0e12, l2_bytes=60 * 1024 * KB, family="hopper"),
        HardwareInfo("L4", "nvidia", (8, 9), 58, 100 * KB, 99 * KB, max_threads_per_sm=1536,
                     max_blocks_per_sm=24,
                     peak_flops={"fp16": 121 * T, "bf16": 121 * T, "tf32": 60 * T, "fp32": 30.3 * T,
                                 "fp8": 242 * T, "int8": 242 * T},
                     mem_bandwidth=300e9, l2_bytes=48 * 1024 * KB, family="ada"),
        HardwareInfo("L40", "nvidia", (8, 9), 142, 100 * KB, 99 * KB, max_threads_per_sm=1536,
                     max_blocks_per_sm=24,
                     peak_flops={"fp16": 181 * T, "bf16": 181 * T, "tf32": 90.5 * T, "fp32": 90.5 * T,
                                 "fp8": 362 * T, "int8": 362 * T},
                     mem_bandwidth=864e9, l2_bytes=96 * 1024 * KB, family="ada"),
        HardwareInfo("A10", "nvidia", (8, 6), 72, 100 * KB, 99 * KB, max_threads_per_sm=1536,
                     max_blocks_per_sm=16,
                     peak_flops={"fp16": 125 * T, "bf16": 125 * T, "tf32": 62.5 * T, "fp32": 31.2 * T,
                                 "int8": 250 * T},
                     mem_bandwidth=600e9, l2_bytes=6 * 1024 * KB, family="ampere"),
        HardwareInfo("A40", "nvidia", (8, 6), 84, 100 * KB, 99 * KB, max_threads_per_sm=1536,
                     max_blocks_per_sm=16,
                     peak_flops={"fp16": 149.7 * T, "bf16": 149.7 * T, "tf32": 74.8 * T,
                                 "fp32": 37.4 * T, "int8": 299.3 * T},
                     mem_bandwidth=696e9, l2_bytes=6 * 1024 * KB, family="ampere"),
        HardwareInfo("T4", "nvidia", (7, 5), 40, 64 * KB, 64 * KB, max_threads_per_sm=1024,
                     max_blocks_per_sm=16,
                     peak_flops={"fp16": 65 * T, "fp32": 8.1 * T, "int8": 130 * T},
                     mem_bandwidth=320e9, l2_bytes=4 * 1024 * KB, family="turing"),
        # Source: AMD Instinct MI250X product page and ROCm "GPU hardware specifications" table.
        # One process sees one of its two GCDs, so these are per-GCD figures (half the package):
        # 110 CUs, 64 KiB LDS, 8 MiB L2, 512 KiB VGPRs per CU, 1.64 TB/s.
        HardwareInfo("MI250X", "amd", (9, 0), 110, 64 * KB, 64 * KB, warp_size=64,
                     regs_per_sm=131072,
                     peak_flops={"fp16": 191.5 * T, "bf16": 191.5 * T, "fp32": 47.9 * T,
                                 "int8": 191.5 * T},
                     mem_bandwidth=1.6384e12, l2_bytes=8 * 1024 * KB, family="cdna2"),
        # Source: AMD Instinct MI325X and MI210 data sheets (dense peaks; the MI325X is the
        # MI300X's CDNA3 die with HBM3E at 6 TB/s; the MI210 one CDNA2 GCD with 104 CUs and
        # 1.6 TB/s); L2 as the MI300X's and MI250X's entries count it.
        HardwareInfo("MI325X", "amd", (9, 4), 304, 64 * KB, 64 * KB, max_threads_per_sm=2048,
                     warp_size=64, regs_per_sm=131072,
                     peak_flops={"fp16": 1307 * T, "bf16": 1307 * T, "tf32": 654 * T, "fp32": 163 * T,
                                 "fp8": 2615 * T, "int8": 2615 * T},
                     mem_bandwidth=6.0e12, l2_bytes=256 * 1024 * KB, family="cdna3"),
        HardwareInfo("MI210", "amd", (9, 0), 104, 64 * KB, 64 * KB, warp_size=64,
                     regs_per_sm=131072,
                     peak_flops={"fp16": 181 * T, "bf16": 181 * T, "fp32": 45.3 * T, "int8": 181 * T},
                     mem_bandwidth=1.6384e12, l2_bytes=8 * 1024 * KB, family="cdna2"),
        # Source: AMD Radeon PRO W7800 product page (70 CUs, 45.2 TFLOPS FP32, 90.5 FP16,
        # 576 GB/s, 64 MB Infinity Cache) and the ROCm hardware table (gfx1100, wave32, 6 MiB L2,
        # 384 KiB VGPRs per CU).
        HardwareInfo("W7800", "amd", (11, 0), 70, 64 * KB, 64 * KB, warp_size=32,
                     regs_per_sm=98304, max_threads_per_sm=1024,
                     peak_flops={"fp16": 90.5 * T, "bf16": 90.5 * T, "fp32": 45.2 * T},
                     mem_bandwidth=576e9, l2_bytes=6 * 1024 * KB, family="rdna3"),
    ]
}

# How a name as drivers, file names and users write it ("NVIDIA GeForce RTX 3090",
# "RTX_3090", "A100-PCIE-40GB") maps to table entries: the first matching rule wins; a tuple
# means the name does not say which variant, and `lookup` refuses to pick one. Matching is
# case-insensitive with '_' read as a space.
_NAME_RULES: list[tuple[str, str | tuple[str, ...]]] = [
    (r"\bH100\b.*PCI", "H100-PCIe"),
    (r"\bH100\b.*(SXM|HBM3)", "H100-SXM"),  # drivers call the SXM board "H100 80GB HBM3"
    (r"\bH100\b.*NVL", "H100-NVL"),
    (r"\bH100\b", ("H100-SXM", "H100-PCIe")),
    (r"(?<!G)H200", "H200"),  # a GH200 is an H100 (or H200-class) die with Grace: not listed
    (r"\bA100\b.*(PCI.*40\s*GB|40\s*GB.*PCI)", "A100-PCIe-40GB"),
    (r"\bA100\b.*PCI", "A100-PCIe"),
    (r"\bA100\b.*(SXM.*40\s*GB|40\s*GB.*SXM)", "A100-SXM-40GB"),
    (r"\bA100\b.*SXM", "A100-SXM"),
    (r"\bA100\b", ("A100-SXM", "A100-PCIe", "A100-SXM-40GB", "A100-PCIe-40GB")),
    (r"\bV100\b.*PCI", "V100-PCIe"),
    (r"\bV100\b.*SXM", "V100-SXM2"),
    (r"\bV100\b", ("V100-SXM2", "V100-PCIe")),
    (r"\bL40S\b", "L40S"),
    (r"\bL40\b", "L40"),  # not "L40S": S is a word character, so no boundary follows "L40"
    (r"\bL4\b", "L4"),
    (r"\bH20\b", "H20"),
    (r"\bA10\b", "A10"),  # not A100 nor AWS's A10G, a different board
    (r"\bA40\b", "A40"),
    (r"\bT4\b", "T4"),
    (r"\bB200\b", "B200"),
    (r"\bMI300X\b", "MI300X"),
    (r"\bMI250X\b", "MI250X"),
    (r"\bMI325X\b", "MI325X"),
    (r"\bMI210\b", "MI210"),
    (r"\bW7800\b", "W7800"),
    (r"\bRTX[\s-]*2080[\s-]*Ti\b", "RTX 2080 Ti"),
    (r"\bTITAN[\s-]*RTX\b|\bRTX[\s-]*TITAN\b", "TITAN RTX"),
    (r"\bRTX[\s-]*3090\b(?![\s-]*Ti)", "RTX 3090"),
    (r"\bRTX[\s-]*3060\b.*\b(Laptop|Mobile)\b", "RTX 3060 Laptop"),
    (r"\bRTX[\s-]*4090\b(?![\s-]*D\b)", "RTX 4090"),
    (r"\bA6000\b", "RTX A6000"),
    (r"\bA4000\b", "RTX A4000"),
    (r"\bGTX[\s-]*1080[\s-]*Ti\b", "GTX 1080 Ti"),
]


def _squash(name: str) -> str:
    return re.sub(r"[\s_-]+", "", name).lower()


_BY_SQUASHED = {_squash(k): k for k in KNOWN_GPUS}


def candidates(name: str) -> tuple[str, ...]:
    """The table entries `name` may mean: one when it names a GPU, several when it names a
    family without saying which variant ("A100"), none when it is unknown."""
    key = _BY_SQUASHED.get(_squash(name))
    if key is not None:
        return (key,)
    text = name.replace("_", " ")
    for pat, target in _NAME_RULES:
        if re.search(pat, text, re.IGNORECASE):
            return (target,) if isinstance(target, str) else target
    return ()


def lookup(name: str, *, strict: bool = True) -> HardwareInfo | None:
    """Find a known GPU by table name or by the device name a driver reports. A name that is
    unknown, or that does not say which variant it is ("A100": SXM or PCIe, 40 or 80 GB),
    raises AbductuneError listing the choices; with `strict=False` it gives None instead."""
    found = candidates(str(name))
    if len(found) == 1:
        return KNOWN_GPUS[found[0]]
    if not strict:
        return None
    if found:
        raise AbductuneError(f"GPU name {name!r} does not say which variant it is: give one of "
                             f"{', '.join(found)}")
    raise AbductuneError(f"unknown GPU {name!r}; known GPUs: {', '.join(KNOWN_GPUS)} (driver names "
                         "such as 'NVIDIA GeForce RTX 3090' also work)")

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


# ----------------------------------------------------------------------------- predicates
# Heuristics and theories ask "is this Hopper?" of a HardwareInfo, a driver name or nothing.

def as_hardware(hw: HardwareInfo | str | None) -> HardwareInfo | None:
    """A HardwareInfo from itself, a known name / driver device name, or None. An unknown
    name becomes a bare HardwareInfo of unknown vendor (so no vendor criterion matches it)."""
    if hw is None or isinstance(hw, HardwareInfo):
        return hw
    found = lookup(str(hw), strict=False)
    return found if found is not None else HardwareInfo(name=str(hw), vendor="unknown")


def hardware_matches(hw: HardwareInfo | str | None, *, vendor: str | None = None,
                     min_cc: tuple[int, int] | None = None, max_cc: tuple[int, int] | None = None,
                     family: str | None = None, name_pattern: str | None = None) -> bool:
    """`matches` that accepts a name and answers False for unknown hardware when any
    criterion is given (True when none is)."""
    crit = (vendor, min_cc, max_cc, family, name_pattern)
    h = as_hardware(hw)
    if h is None:
        return all(c is None for c in crit)
    return matches(h, vendor=vendor, min_cc=min_cc, max_cc=max_cc, family=family,
                   name_pattern=name_pattern)


def is_nvidia(hw: HardwareInfo | str | None) -> bool:
    return hardware_matches(hw, vendor="nvidia")


def is_amd(hw: HardwareInfo | str | None) -> bool:
    return hardware_matches(hw, vendor="amd")


def is_hopper(hw: HardwareInfo | str | None) -> bool:
    """NVIDIA sm_90 (H100, H200, GH200)."""
    return hardware_matches(hw, vendor="nvidia", min_cc=(9, 0), max_cc=(9, 9))


def siblings(name: str) -> tuple[str, ...]:
    """The known GPUs that share `name`'s architecture family, vendor and SM count (the H200 for
    an H100 SXM, and back), itself left out; () for a name not in `KNOWN_GPUS`. Measured once
    (session 32, six zoo kernels, 32 shapes, every config on both): an H100 SXM's winner timed on an
    H200 was 1.022x the H200's optimum (worst 1.13), the configs' orders correlated 0.95, while
    memory-bound kernels ran up to 1.4x faster. The SM count is kept equal as that is all this
    measured: another count moves waves and fill, which nothing here has seen."""
    me = KNOWN_GPUS.get(name)
    if me is None or not me.family:
        return ()
    return tuple(n for n, h in KNOWN_GPUS.items()
                 if n != name and h.family == me.family and h.vendor == me.vendor and h.sms == me.sms)


def sm_count(hw: HardwareInfo | None, default: int = 108) -> int:
    """The SM count, or `default` (an A100's) when the hardware is unknown."""
    return hw.sms if hw is not None and hw.sms else default


# ----------------------------------------------------------------------------- this machine

def local_hardware(index: int | None = None) -> HardwareInfo:
    """The CUDA device `index` (the current one when None) as a HardwareInfo: the table's entry
    for a GPU it lists (SM count and compute capability as the device reports them), else one
    made from the device's own properties (`from_properties`)."""
    try:
        import torch
    except ImportError:
        raise AbductuneError("torch is not installed: live measurement needs "
                             "`pip install abductune[gpu]`") from None
    if not torch.cuda.is_available():
        raise AbductuneError("no CUDA GPU is visible: live measurement needs one")
    index = torch.cuda.current_device() if index is None else int(index)
    props = torch.cuda.get_device_properties(index)
    extra: dict[str, Any] = {}
    try:  # Triton's driver reads the opt-in shared memory limit and the clocks from CUDA itself
        import triton

        extra = dict(triton.runtime.driver.active.utils.get_device_properties(index))
    except Exception:  # noqa: BLE001 - no Triton, or a backend without these: torch's alone
        pass
    return from_properties(
        props.name, (props.major, props.minor), props.multi_processor_count,
        # torch on CUDA fills gcnArchName too: ROCm is told by the build, not by that field
        vendor="amd" if getattr(torch.version, "hip", None) else "nvidia",
        arch_name=getattr(props, "gcnArchName", "") if getattr(torch.version, "hip", None) else "",
        smem_per_block=extra.get("max_shared_mem") or getattr(props, "shared_memory_per_block_optin", 0),
        smem_per_sm=getattr(props, "shared_memory_per_multiprocessor", 0),
        regs_per_sm=getattr(props, "regs_per_multiprocessor", 0) or extra.get("max_num_regs", 0),
        max_threads_per_sm=getattr(props, "max_threads_per_multi_processor", 0),
        warp_size=getattr(props, "warp_size", 0) or extra.get("warpSize", 0),
        l2_bytes=getattr(props, "L2_cache_size", 0),
        sm_clock_khz=extra.get("sm_clock_rate") or getattr(props, "clock_rate", 0),
        mem_clock_khz=extra.get("mem_clock_rate") or getattr(props, "memory_clock_rate", 0),
        mem_bus_bits=extra.get("mem_bus_width") or getattr(props, "memory_bus_width", 0))


# ----------------------------------------------------------------------------- GPUs not in the table
# A GPU the table does not list (a newer board, a cloud variant such as the A10G, an L4) still
# gets the limits and rough peaks the resource model, the roofline and the theories reason with:
# limits from the device's properties, peaks from its SM count and clock and its architecture's
# throughput per SM per clock. Without them every diagnosis on such a GPU is "unknown" and no
# theory applies. The estimates are leads, as the table's datasheet peaks are.

# dense tensor-core FLOPs per SM per clock for fp16 inputs (datacenter and workstation rate), and
# FP32 FLOPs per SM per clock, by compute capability: tensor cores per SM x FMAs per tensor core
# per clock x 2, and FP32 lanes x 2, from NVIDIA's architecture whitepapers (V100: 8 x 64;
# Turing: 8 x 64; A100: 4 x 256; GA10x and Ada: 4 x 128; H100: 4 x 512; B200: 4 x 1024).
# From SMs x the boost clock CUDA reports they give the table's datasheet peaks to within 1% on
# most boards, 6-8% high on the B200 and H100 SXM (whose datasheets use a lower tensor clock) and
# 16% on the power-limited H100 NVL; boards that run FP32 accumulation at half rate without being
# GeForce (the L40) or whose tensor rate is capped (the H20) are listed in the table for that.
_PER_SM_CLOCK: dict[tuple[int, int], tuple[int, int]] = {
    (7, 0): (1024, 128), (7, 2): (1024, 128), (7, 5): (1024, 128),
    (8, 0): (2048, 128), (8, 6): (1024, 256), (8, 7): (1024, 256), (8, 9): (1024, 256),
    (9, 0): (4096, 256), (10, 0): (8192, 256), (10, 3): (8192, 256),
    (12, 0): (1024, 256), (12, 1): (1024, 256),
}
# the rate of other input types relative to fp16, from the compute capability that has them
_RELATIVE_RATE: tuple[tuple[str, tuple[int, int], float], ...] = (
    ("bf16", (8, 0), 1.0), ("tf32", (8, 0), 0.5), ("int8", (7, 5), 2.0), ("fp8", (8, 9), 2.0),
    ("fp4", (10, 0), 4.0),
)
# per-SM limits where the properties do not give them: the CUDA C++ Programming Guide's table of
# technical specifications per compute capability (shared memory per SM and per block opt-in in
# KiB, resident blocks and threads per SM)
_LIMITS: dict[tuple[int, int], tuple[int, int, int, int]] = {
    (7, 0): (96, 96, 32, 2048), (7, 5): (64, 64, 16, 1024), (8, 0): (164, 163, 32, 2048),
    (8, 6): (100, 99, 16, 1536), (8, 7): (164, 163, 16, 1536), (8, 9): (100, 99, 24, 1536),
    (9, 0): (228, 227, 32, 2048), (10, 0): (228, 227, 32, 2048), (12, 0): (100, 99, 32, 1536),
}
# AMD CDNA matrix cores: dense fp16 FLOPs per CU per clock and FP32 matrix FLOPs per CU per clock,
# from the MI250X's and MI300X's data sheets (peak / (CUs x peak engine clock)): CDNA2 1024 and
# 256, CDNA3 2048 and 256; CDNA3 runs fp8 and int8 at twice fp16, tf32 at half; CDNA2 int8 at fp16's
_AMD_PER_CU_CLOCK = {"cdna2": (1024, 256, {"bf16": 1.0, "int8": 1.0}),
                     "cdna3": (2048, 256, {"bf16": 1.0, "tf32": 0.5, "fp8": 2.0, "int8": 2.0})}
_FAMILY = {7: "volta", 8: "ampere", 9: "hopper", 10: "blackwell", 12: "blackwell"}
_AMD_FAMILY = (("gfx94", "cdna3"), ("gfx95", "cdna4"), ("gfx90a", "cdna2"), ("gfx908", "cdna"),
               ("gfx11", "rdna3"), ("gfx12", "rdna4"))


def _nearest(table: dict[tuple[int, int], Any], cc: tuple[int, int]) -> Any:
    """The entry for `cc`, else the one of the same major version nearest below it, else None."""
    if cc in table:
        return table[cc]
    same = [k for k in table if k[0] == cc[0] and k <= cc]
    return table[max(same)] if same else None


def estimated_peaks(cc: tuple[int, int], sms: int, sm_clock_hz: float, *, geforce: bool = False) -> dict[str, float]:
    """Dense peak FLOP/s per input type of an NVIDIA GPU of compute capability `cc` with `sms`
    SMs at `sm_clock_hz`, from its architecture's rates per SM per clock; {} where either is
    unknown. GeForce boards run fp16 inputs with FP32 accumulation (what tl.dot does) at half
    their workstation rate from Turing on."""
    rates = _nearest(_PER_SM_CLOCK, tuple(cc))
    if rates is None or sms <= 0 or sm_clock_hz <= 0:
        return {}
    tensor, fp32 = rates
    full = tensor * sms * sm_clock_hz
    half = 0.5 if geforce and tuple(cc) >= (7, 5) else 1.0  # int8 accumulates in int32 at full rate
    out = {"fp16": full * half, "fp32": fp32 * sms * sm_clock_hz}
    for dtype, since, rel in _RELATIVE_RATE:
        if tuple(cc) >= since:
            out[dtype] = full * rel * (1.0 if dtype == "int8" else half)
    return out


def estimated_amd_peaks(family: str, cus: int, clock_hz: float) -> dict[str, float]:
    """Dense peak FLOP/s per input type of an AMD GPU of `family` with `cus` compute units at
    `clock_hz`, from the family's matrix rates per CU per clock (`_AMD_PER_CU_CLOCK`); {} where
    the family has none listed or either figure is unknown."""
    rates = _AMD_PER_CU_CLOCK.get(family)
    if rates is None or cus <= 0 or clock_hz <= 0:
        return {}
    fp16, fp32, relative = rates
    return {"fp16": fp16 * cus * clock_hz, "fp32": fp32 * cus * clock_hz,
            **{d: fp16 * cus * clock_hz * rel for d, rel in relative.items()}}


def from_properties(name: str, cc: tuple[int, int], sms: int, *, vendor: str = "nvidia",
                    arch_name: str = "", smem_per_block: int = 0, smem_per_sm: int = 0,
                    regs_per_sm: int = 0, max_threads_per_sm: int = 0, warp_size: int = 0,
                    l2_bytes: int = 0, sm_clock_khz: int = 0, mem_clock_khz: int = 0,
                    mem_bus_bits: int = 0) -> HardwareInfo:
    """A HardwareInfo from what a device reports (CUDA's attributes, as torch and Triton give
    them). A GPU the table lists is its entry, with the SM count and compute capability the
    device reports (a MIG slice or a cut-down board has fewer SMs). Any other keeps its driver
    name (the store keeps it apart from every other GPU) and gets: the limits it reports, else
    its compute capability's (`_LIMITS`); peaks estimated from its SM count and clock
    (`estimated_peaks`, `estimated_amd_peaks`); memory bandwidth from its memory clock and bus
    width (double data rate, as CUDA reports the clock of HBM and GDDR alike); the family of
    its architecture."""
    cc = (int(cc[0]), int(cc[1]))
    known = lookup(name, strict=False)
    if known is not None:
        return known.with_measured(sms=sms or known.sms, compute_capability=cc)
    limits = _nearest(_LIMITS, cc) if vendor == "nvidia" else None
    smem_sm, smem_block, blocks, threads = ((limits[0] * KB, limits[1] * KB, limits[2], limits[3]) if limits
                                            else (0, 0, 32, 2048))
    if vendor == "amd":
        family = next((f for p, f in _AMD_FAMILY if arch_name.startswith(p)), "")
        smem_sm = smem_block = 64 * KB  # LDS per workgroup on CDNA and RDNA
        peaks = estimated_amd_peaks(family, sms, sm_clock_khz * 1e3)
    else:
        family = "turing" if cc == (7, 5) else "ada" if cc == (8, 9) else _FAMILY.get(cc[0], "")
        peaks = estimated_peaks(cc, sms, sm_clock_khz * 1e3, geforce="geforce" in name.lower())
    return HardwareInfo(
        name=name, vendor=vendor, compute_capability=cc, sms=int(sms),
        smem_per_sm=int(smem_per_sm or smem_sm), smem_per_block=int(smem_per_block or smem_block),
        regs_per_sm=int(regs_per_sm or 65536), max_threads_per_sm=int(max_threads_per_sm or threads),
        max_blocks_per_sm=blocks, warp_size=int(warp_size or (64 if vendor == "amd" else 32)),
        peak_flops=peaks, mem_bandwidth=mem_clock_khz * 1e3 * 2 * mem_bus_bits / 8,
        l2_bytes=int(l2_bytes), family=family)


# the toolchain entries that change what a compiled kernel does; the rest (date, driver,
# device name) describe a recording but must not split the store's contexts
TOOLCHAIN_KEY_FIELDS = ("torch", "triton")


def toolchain() -> dict[str, Any]:
    """Versions of what compiles and runs kernels here (python, torch, triton, cuda, and with
    a GPU its name and driver), plus the date, for dataset headers and the store."""
    import datetime as dt
    import platform

    info: dict[str, Any] = {"python": platform.python_version(),
                            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    try:
        import torch
        import triton
    except ImportError:
        return info
    info.update(torch=torch.__version__, triton=triton.__version__, cuda=torch.version.cuda)
    if torch.cuda.is_available():
        info["device_name"] = torch.cuda.get_device_name()
        try:
            import pynvml  # nvidia-ml-py

            pynvml.nvmlInit()
            info["driver"] = pynvml.nvmlSystemGetDriverVersion()
        except Exception:  # noqa: BLE001 - optional
            pass
    return info


def toolchain_key(info: dict[str, Any] | None = None) -> str:
    """"torch=2.4.1;triton=3.4.0" from `toolchain()` (or `info`): the versions that decide
    whether a stored measurement still holds; "" without torch and triton. Without `info` the
    versions come from the installed packages' metadata: no import, no CUDA."""
    if info is None:
        info = installed_versions()
        if len(info) < len(TOOLCHAIN_KEY_FIELDS):
            info = toolchain()
    return ";".join(f"{k}={info[k]}" for k in TOOLCHAIN_KEY_FIELDS if info.get(k))


def installed_versions() -> dict[str, str]:
    """torch and triton versions as installed (package metadata), those that are."""
    from importlib import metadata

    out = {}
    for name in TOOLCHAIN_KEY_FIELDS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out
