"""Element-type names as the package spells them ("fp16", "bf16", "fp8", "int64", ...), from the
spellings callers and files use: torch's ("float8_e4m3fn", "torch.bfloat16", "long"), Triton's
("fp8e4nv", "fp8e5"), NumPy's ("float32", "uint8").

A live call names its tensors' dtypes the way torch prints them (`autotune.keys.dtype_name`
keeps that spelling, so a stored context keeps its identity); the sizes and peaks read through
`canonical`, so a live kernel is judged as its recording is. Session 29 found the gap: a
float8_e4m3fn matmul was sized at 2 bytes an element live (the fp8 of its recording is 1), and
the resource model called configs that ran on the H100 (256 x 128 x 128 at 3 and 4 stages) over
its shared memory, so `budget=` never measured the fastest config of the shape.
"""
from __future__ import annotations

import re

_PLAIN = {
    "float16": "fp16", "half": "fp16", "f16": "fp16",
    "bfloat16": "bf16",
    "float32": "fp32", "float": "fp32", "f32": "fp32",
    "float64": "fp64", "double": "fp64", "f64": "fp64",
    "float8": "fp8",
    "long": "int64", "int": "int32", "short": "int16",
    "bool": "bool", "boolean": "bool", "int1": "bool",
    "chalf": "complex32", "cfloat": "complex64", "cdouble": "complex128",
}
# the 8-bit floats under any spelling (torch's float8_e4m3fn / e4m3fnuz / e5m2 / e5m2fnuz,
# Triton's fp8e4nv / fp8e5 / fp8e4b15 / fp8e4b8 / fp8e5b16): one byte each; the e8m0 block
# scales are kept apart (a scale, not an operand's element type)
_FP8 = re.compile(r"^(float8_?e[45]m[23]\w*|fp8e\w*|fp8_\w+|f8e\w*)$")
_E8M0 = re.compile(r"^(float8_?e8m0\w*|fp8e8m0\w*)$")
# torch's packed 4-bit float (two values a byte)
_FP4 = re.compile(r"^(float4_e2m1\w*|fp4_\w+)$")


def canonical(name: str | None) -> str:
    """The package's spelling of an element type; a name it does not know comes back lowered
    (without a "torch." prefix), so a caller's own label survives."""
    s = (name or "").strip().lower()
    if s.startswith("torch."):
        s = s[len("torch."):]
    if s in _PLAIN:
        return _PLAIN[s]
    if _E8M0.match(s):
        return "e8m0"
    if _FP8.match(s):
        return "fp8"
    if _FP4.match(s):
        return "fp4"
    return s
