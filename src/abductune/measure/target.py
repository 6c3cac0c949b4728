"""Which GPU architecture the benchmark worker will run on, read without a CUDA context.

Compile workers compile offline for this target (measure/worker.py `TargetOnlyDriver`): they
never create a CUDA context, so the pool starts in the time of an import. The answer comes
from NVML (nvidia-ml-py), else `nvidia-smi`; when neither answers, or the visible GPUs differ
in architecture, it is None and the compile workers fall back to a CUDA context each.
`ABDUCTUNE_COMPILE_MODE=cuda` forces that fallback; `=offline` insists on the target.
"""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..hardware import HardwareInfo

log = logging.getLogger(__name__)


def _visible() -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as NVML indices or UUIDs (None: all devices)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is None:
        return None
    return [d.strip() for d in env.split(",") if d.strip()]


def _devices_nvml() -> list[tuple[str, int]] | None:
    """(name, arch) of each GPU CUDA can see, from NVML; None when NVML cannot say."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as e:  # noqa: BLE001 - no NVML here
        log.debug("NVML unavailable: %s", e)
        return None
    try:
        handles = []
        visible = _visible()
        if visible is None:
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        else:
            for d in visible:
                handles.append(pynvml.nvmlDeviceGetHandleByIndex(int(d)) if d.isdigit()
                               else pynvml.nvmlDeviceGetHandleByUUID(d))
        out = []
        for h in handles:
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            name = pynvml.nvmlDeviceGetName(h)
            out.append((name.decode() if isinstance(name, bytes) else str(name), int(major) * 10 + int(minor)))
        return out
    except Exception as e:  # noqa: BLE001 - an index or UUID NVML does not know
        log.debug("NVML could not read the compute capability: %s", e)
        return None


def _archs_smi() -> list[int] | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        r = subprocess.run([exe, "--query-gpu=compute_cap", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
        vals = [line.strip() for line in r.stdout.splitlines() if line.strip()]
        archs = [int(round(float(v) * 10)) for v in vals]
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    visible = _visible()
    if visible is not None and all(d.isdigit() for d in visible):
        archs = [archs[int(d)] for d in visible if int(d) < len(archs)]
    return archs or None


def _archs_nvml() -> list[int] | None:
    devs = _devices_nvml()
    return [a for _, a in devs] if devs else None


def visible_gpu() -> tuple[str, int] | None:
    """(name, arch) of the GPU CUDA will call device 0, when every visible GPU is the same
    model (so CUDA's device order cannot matter); None otherwise or without NVML."""
    devs = _devices_nvml()
    if not devs or len(set(devs)) > 1:
        return None
    return devs[0]


def gpu_arch() -> int | None:
    """The compute capability (90 for sm_90) of the GPU CUDA will use, or None when it cannot
    be known for sure without a CUDA context."""
    archs = _archs_nvml() or _archs_smi()
    if not archs:
        return None
    if len(set(archs)) > 1:
        # which one is device 0 depends on CUDA's device order; a wrong guess would compile
        # every config for the wrong GPU, so let the workers ask CUDA instead
        log.info("visible GPUs differ in architecture (%s): compile workers use CUDA", sorted(set(archs)))
        return None
    return archs[0]


def compile_target() -> tuple[int, int] | None:
    """(arch, warp size) for offline compile workers, or None for CUDA-context workers."""
    from ..errors import AbductuneError

    mode = os.environ.get("ABDUCTUNE_COMPILE_MODE", "auto").strip().lower()
    if mode not in ("auto", "cuda", "offline"):
        raise AbductuneError(f"ABDUCTUNE_COMPILE_MODE={mode!r}: use auto, cuda or offline")
    if mode == "cuda":
        return None
    arch = gpu_arch()
    if arch is None and mode == "offline":
        raise AbductuneError("ABDUCTUNE_COMPILE_MODE=offline, but the GPU's architecture cannot be read "
                             "(install nvidia-ml-py, or unset ABDUCTUNE_COMPILE_MODE)")
    return None if arch is None else (arch, 32)


def local_hardware() -> "HardwareInfo":
    """The local GPU as a HardwareInfo: a known GPU named by NVML needs no CUDA context in
    this process (the workers hold their own); anything else asks torch (hardware.py)."""
    from ..hardware import local_hardware as from_torch
    from ..hardware import lookup

    seen = visible_gpu()
    if seen is not None and "MIG" not in seen[0]:  # a MIG slice has fewer SMs than its GPU
        known = lookup(seen[0], strict=False)
        if known is not None:
            return known.with_measured(compute_capability=(seen[1] // 10, seen[1] % 10))
    return from_torch()
