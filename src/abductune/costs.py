"""What a problem costs at best: its FLOPs and the minimum bytes it must move, from its kernel
class, its dims (under any spelling `classify` knows) and the element types of its tensors.

A recorded dataset states both (the kernel spec computes them); an imported Kernel Tuner or T4
file does not, and without them diagnosis has no roofline: it cannot tell a memory-bound config
from a compute-bound one, so `import --dtypes` fills them in here for the classes below. Each
tensor named in `dtypes` is read or written once, in the order inputs then output:

- matmul / quantized_matmul (M, N, K): 2·M·N·K FLOPs; A (M×K), B (K×N) and C (M×N) in the
  first, second and last dtype (one dtype: all three);
- attention (batch, heads, seq, head_dim): 4·b·h·s²·d FLOPs (QKᵀ and PV); Q, K, V and O of
  b·h·s·d elements each in the first dtype;
- row_reduction (rows, cols): 4 FLOPs per element (max or mean, exponent or square, sum,
  scale); the input and an output of the same size, in the first and last dtype;
- elementwise (numel): one FLOP per element; every named tensor of numel elements.
"""
from __future__ import annotations

from typing import Mapping

from .classify import canonical_dims
from .dtypes import canonical

# bytes per element, by dtype name (packed 4-bit types count half a byte)
ELEMENT_BYTES: dict[str, float] = {
    "fp64": 8, "fp32": 4, "tf32": 4, "int32": 4, "uint32": 4, "fp16": 2, "bf16": 2, "int16": 2,
    "fp8": 1, "e4m3": 1, "e5m2": 1, "fp8e4m3": 1, "fp8e5m2": 1, "int8": 1, "uint8": 1,
    "int4": 0.5, "uint4": 0.5, "fp4": 0.5, "e2m1": 0.5, "mxfp4": 0.5, "nvfp4": 0.5,
    "e8m0": 1, "ue8m0": 1,  # MX block scales (one byte each)
    "int64": 8, "uint64": 8, "uint16": 2, "bool": 1, "complex32": 4, "complex64": 8, "complex128": 16,
    "qint8": 1, "quint8": 1, "qint32": 4,
}
# when a problem names no dtype, tensors are taken as 16-bit
DEFAULT_BYTES = 2


def element_bytes(dtype: str | None) -> float:
    """Bytes an element of `dtype` takes, under any spelling `dtypes.canonical` reads (torch's
    "float8_e4m3fn" as the recordings' "fp8"); 16-bit for a name it does not know."""
    return ELEMENT_BYTES.get(canonical(dtype), DEFAULT_BYTES)


def known_dtype(name: str) -> bool:
    return canonical(name) in ELEMENT_BYTES


def tensor_dtypes(dtypes: Mapping[str, str]) -> dict[str, str]:
    """The dtypes of tensors: a live problem also names its non-integer key values
    ("key:NAME", `autotune.keys.key_problem`: a key on a dtype argument, a string flag), which
    no tensor of the problem holds and no size may be read from."""
    return {k: v for k, v in dtypes.items() if not k.startswith("key:")}


def operand_bytes(dtypes: Mapping[str, str]) -> tuple[float, float, float]:
    """Element sizes of the first input, the second (the first's when there is one dtype)
    and the last tensor (the output), in the dtypes' order; 16-bit when none is named."""
    sizes = [element_bytes(t) for t in tensor_dtypes(dtypes).values()] or [DEFAULT_BYTES]
    return sizes[0], sizes[1] if len(sizes) > 1 else sizes[0], sizes[-1]


# names a kernel gives the tensor a product writes (`c_ptr`, `out`, CUTLASS's `D`) and the side
# tensors it reads beside its two operands (scales, zero points, bias, routing indices): read off
# the public signatures of the libraries in the zoo, not fitted
OUTPUT_NAMES = frozenset({"c", "out", "output", "y", "o", "d", "dst", "result", "res"})
SIDE_WORDS = ("scale", "zero", "zp", "bias", "idx", "index", "indices", "offset", "sorted", "expert", "mask", "pair")


def bare_name(name: str) -> str:
    """A tensor argument's name, lower case, without a `_ptr` / `ptr` suffix."""
    n = name.lower()
    for suffix in ("_ptr", "ptr"):
        if n.endswith(suffix) and len(n) > len(suffix):
            return n[: -len(suffix)]
    return n


def product_operand_bytes(dtypes: Mapping[str, str]) -> tuple[float, float]:
    """Element sizes of a tiled product's A and B tiles: its first two tensors that are neither
    named as its output nor as a side input (a signature may put the output first, as vLLM's and
    CUTLASS's `scaled_mm(out, a, b, a_scale, b_scale)` do: read by position, a bf16 output was
    taken for an fp8 A, and the resource model refused fp8 configs that fit). By position where
    the names leave fewer than one operand."""
    t = tensor_dtypes(dtypes)
    ins = [n for n in t if bare_name(n) not in OUTPUT_NAMES and not any(w in bare_name(n) for w in SIDE_WORDS)]
    if not ins:
        sa, sb, _ = operand_bytes(dtypes)
        return sa, sb
    return element_bytes(t[ins[0]]), element_bytes(t[ins[1] if len(ins) > 1 else ins[0]])


def problem_costs(kernel_class: str, dims: Mapping[str, int], dtypes: Mapping[str, str]) -> tuple[float, float] | None:
    """(FLOPs, minimum bytes), or None when the class or its dims are not known here."""
    d = canonical_dims(kernel_class, dims)
    sizes = [element_bytes(t) for t in tensor_dtypes(dtypes).values()] or [DEFAULT_BYTES]
    first, second, last = operand_bytes(dtypes)
    if kernel_class in ("matmul", "quantized_matmul") and all(k in d for k in "MNK"):
        m, n, k = d["M"], d["N"], d["K"]
        return 2.0 * m * n * k, m * k * first + k * n * second + m * n * last
    if kernel_class == "attention" and all(k in d for k in ("batch", "heads", "seq", "head_dim")):
        bh, s, hd = d["batch"] * d["heads"], d["seq"], d["head_dim"]
        return 4.0 * bh * s * s * hd, 4.0 * bh * s * hd * first
    if kernel_class == "row_reduction" and "rows" in d and "cols" in d:
        n = d["rows"] * d["cols"]
        return 4.0 * n, n * (first + last)
    if kernel_class == "elementwise" and "numel" in d:
        return float(d["numel"]), d["numel"] * float(sum(sizes))
    return None


def parse_dtypes(text: str) -> dict[str, str]:
    """'a=fp16,b=fp16,c=fp16' -> {"a": "fp16", ...}; one clear error naming what is wrong."""
    from .errors import AbductuneError

    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        name, eq, dt = part.partition("=")
        name, dt = name.strip(), dt.strip().lower()
        if not eq or not name or not dt:
            raise AbductuneError(f"--dtypes must look like a=fp16,b=fp16,c=fp16, got {text!r}")
        if name in out:
            raise AbductuneError(f"--dtypes names tensor {name!r} twice")
        if not known_dtype(dt):
            raise AbductuneError(f"--dtypes: unknown dtype {dt!r} for {name}; known: {', '.join(ELEMENT_BYTES)}")
        out[name] = dt
    return out
