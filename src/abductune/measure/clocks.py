"""GPU clocks, power and throttle reasons, read-only through NVML (nvidia-ml-py).

A tuner must never set clocks or power limits; it can read them, flag measurements taken while
the GPU was throttled, and re-measure a decision that a throttle event could have swung.
Without nvidia-ml-py, or without an NVIDIA GPU, every reading is None.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# NVML throttle-reason bits that mean "slower than it could be": power cap, thermal, sync
# boost and hardware slowdowns. Idle and the application clock setting are not throttling.
_THROTTLES = {
    0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal",
    0x80: "hw_power_brake",
}


@dataclass(frozen=True)
class ClockState:
    sm_mhz: int | None
    max_sm_mhz: int | None
    power_w: float | None
    temperature_c: int | None
    throttle: tuple[str, ...]

    @property
    def throttled(self) -> bool:
        return bool(self.throttle)

    def to_dict(self) -> dict[str, Any]:
        return {"sm_mhz": self.sm_mhz, "max_sm_mhz": self.max_sm_mhz, "power_w": self.power_w,
                "temperature_c": self.temperature_c, "throttle": list(self.throttle)}


class Clocks:
    """Reads one GPU's state; `read()` is cheap (a few NVML calls)."""

    def __init__(self, index: int = 0):
        self._nvml: Any = None
        self._h: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._h = pynvml.nvmlDeviceGetHandleByIndex(index)
            self._nvml = pynvml
        except Exception as e:  # noqa: BLE001 - no NVML: readings are None
            log.debug("NVML unavailable: %s", e)

    @property
    def available(self) -> bool:
        return self._nvml is not None

    def read(self) -> ClockState | None:
        if self._nvml is None:
            return None
        n, h = self._nvml, self._h

        def get(fn: Any, *a: Any) -> Any:
            try:
                return fn(h, *a)
            except Exception:  # noqa: BLE001 - one missing reading is not an error
                return None
        sm = get(n.nvmlDeviceGetClockInfo, n.NVML_CLOCK_SM)
        mx = get(n.nvmlDeviceGetMaxClockInfo, n.NVML_CLOCK_SM)
        pw = get(n.nvmlDeviceGetPowerUsage)
        temp = get(n.nvmlDeviceGetTemperature, n.NVML_TEMPERATURE_GPU)
        fn = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            getattr(n, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        bits = get(fn) if fn is not None else None
        reasons = tuple(name for bit, name in _THROTTLES.items() if bits and bits & bit)
        return ClockState(sm, mx, pw / 1000.0 if pw is not None else None, temp, reasons)
