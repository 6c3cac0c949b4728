"""A built-in kernel whose launch reads what stand-in tensors lack (`.device`), for the
offline compile workers' fall-back to meta tensors (tests/test_offline_compile.py)."""
from __future__ import annotations

from abductune.kernels.elementwise import GeluMulSpec


class GeluNeedsDevice(GeluMulSpec):
    def __init__(self, dtype: str = "fp16"):
        super().__init__(dtype)
        self.name = "offline_fixtures:GeluNeedsDevice"

    def launch(self, config, inputs, out):
        assert inputs[0].device is not None  # DuckTensor has no device: meta tensors do
        super().launch(config, inputs, out)
