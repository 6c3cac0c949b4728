"""What kind of kernel a problem is: the one classifier that heuristics, the observed
database, the store and theories share.

`classify(problem, space)` answers with a `Classification`:

- `kernel_class`: the problem's own class when it names one, else inferred from its dims
  (M/N/K -> matmul, rows/cols -> row_reduction, numel -> elementwise, seq/head_dim ->
  attention), from the space's roles (tile:M + tile:N + tile:K -> matmul, tile:R ->
  row_reduction) or from the kernel name; "other" when nothing tells.
- `variant`: finer kinds inside a class. Quantized matmuls are told apart by their element
  types and packing: "int4" (int4/uint4 elements, or 8 packed per 32-bit word, 2 per byte),
  "fp4" (fp4/e2m1/mxfp4/nvfp4, or 4-bit packing with an e8m0/ue8m0/fp8 scale), "int16"
  (16-bit packing: two values per 32-bit word), "int8", "fp8". Matmuls with an expert dim
  (E) are "moe".
- `dims`: the dims under canonical names (M, N, K / rows, cols / numel / batch, heads, seq,
  head_dim), whatever the problem calls them.
- `dtype_family`: "fp16" (fp16, bf16), "fp32" (fp32, tf32), "fp64", "fp8", "int8", "int4",
  "fp4", "int16", or "any" when the problem names no dtype (public Kernel Tuner data).
- `bucket`: the shape bucket (`shape_bucket`): every canonical dim rounded up to a power
  of 2**granularity (granularity 2: 1, 4, 16, 64, 256, 1024, 4096, ...), "K=4096,M=64,N=4096".
- `fallback`: the per-class category used when no bucket rule matches:
  matmul small_m / small_n / small_k / rect / balanced; rows short / narrow / wide / square;
  elementwise tiny / mid / huge; attention small_head / short_seq / long_seq / mid_seq; every
  other class (or a class whose dims are not known) "all".

For the launch grid (`theory.diagnose.grid_tiles`): `tile_dim_name` says which dim a tile
covers, `independent_dims` which dims give every index programs of their own when no tile
covers them (attention's batch and heads, a row kernel's rows, tokens), `partitioned_dim` a
dim split among groups tiled apart (a MoE matmul's tokens among its experts).
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from . import kernel_facts
from .problem import Problem
from .space import Space

# ------------------------------------------------------------------------ thresholds
# Fallback categories. Matmul: M <= 64 is decode (one M tile); N <= 256 or K <= 512 leaves
# one or two tiles along that axis; a ratio >= 8 between M and N is the skinny regime.
SMALL_M = 64
SMALL_N = 256
SMALL_K = 512
RECT_RATIO = 8
# Rows: fewer rows than about an SM count cannot fill the GPU (short); rows up to 1024
# elements fit one small block (narrow); from 16384 they are walked in many chunks (wide).
SHORT_ROWS = 128
NARROW_COLS = 1024
WIDE_COLS = 16384
# Elementwise: up to 2^20 elements the launch and tail dominate (tiny); from 2^26 the
# kernel runs many waves at full bandwidth (huge).
TINY_NUMEL = 1 << 20
HUGE_NUMEL = 1 << 26
# Attention: head dims under 64 (small_head), sequences up to 512 (short) or from 8192 (long).
SMALL_HEAD = 64
SHORT_SEQ = 512
LONG_SEQ = 8192

# A tile named as the problem spells a dim the class renames (BLOCK_N where "N" is read as an
# elementwise numel) covers that dim. Off by default: on Liger's DyT it makes the elementwise
# rules, learned on one GELU kernel, fire there and lose (zero-shot 1.007 -> 1.112).
TILES_BY_SPELLING = os.environ.get("ABDUCTUNE_TILES_BY_SPELLING", "0") == "1"

FALLBACKS: dict[str, tuple[str, ...]] = {
    "matmul": ("small_m", "small_n", "small_k", "rect", "balanced"),
    "quantized_matmul": ("small_m", "small_n", "small_k", "rect", "balanced"),
    "row_reduction": ("short", "narrow", "wide", "square"),
    "elementwise": ("tiny", "mid", "huge"),
    "attention": ("small_head", "short_seq", "long_seq", "mid_seq"),
}

# canonical dim -> accepted spellings (compared lower-case, without underscores)
_ALIASES: dict[str, dict[str, tuple[str, ...]]] = {
    "matmul": {"M": ("m", "batch", "bs", "tokens", "numtokens"), "N": ("n",), "K": ("k",),
               "E": ("e", "experts", "numexperts")},
    "row_reduction": {"rows": ("rows", "nrows", "m", "numrows", "batch", "tokens"),
                      "cols": ("cols", "ncols", "n", "numcols", "hidden", "hiddensize", "d")},
    "elementwise": {"numel": ("numel", "n", "size", "nelements", "x")},
    "attention": {"batch": ("batch", "b", "z", "bs"), "heads": ("heads", "h", "nheads", "numheads"),
                  "seq": ("seq", "seqlen", "nctx", "s", "n", "ctx", "seqq"),
                  "head_dim": ("headdim", "d", "dhead", "dim", "hd")},
}
_ALIASES["quantized_matmul"] = _ALIASES["matmul"]

# dtype name (lower-case) -> family
_FAMILIES: list[tuple[str, str]] = [
    (r"^(fp16|f16|float16|half|bf16|bfloat16)$", "fp16"),
    (r"^(fp32|f32|float32|float|tf32)$", "fp32"),
    (r"^(fp64|f64|float64|double)$", "fp64"),
    (r"(fp4|e2m1|mxfp4|nvfp4)", "fp4"),
    (r"(fp8|e4m3|e5m2|float8)", "fp8"),
    (r"^(u?int4|[su]4|i4|w4.*)$", "int4"),
    (r"^(u?int8|[su]8|i8)$", "int8"),
    (r"^(u?int16|i16)$", "int16"),
    (r"^(u?int32|i32)$", "int32"),
]
_CONTAINER_BITS = {"int32": 32, "uint32": 32, "i32": 32, "int8": 8, "uint8": 8, "i8": 8,
                   "int16": 16, "uint16": 16, "i16": 16, "int64": 64, "uint64": 64}
_PACK_DIMS = ("pack", "packing", "pack_factor", "packfactor", "elems_per_int", "per_word")


def dtype_family(dtype: str | None) -> str:
    if not dtype:
        return "any"
    d = str(dtype).lower().replace("torch.", "")
    for pat, fam in _FAMILIES:
        if re.search(pat, d):
            return fam
    return d


def next_pow2(v: int | float) -> int:
    v = int(math.ceil(v))
    return 1 if v <= 1 else 1 << (v - 1).bit_length()


def bucket_value(v: int, granularity: int = 2) -> int:
    """`v` rounded up to a power of 2**granularity (granularity 1: the next power of two)."""
    if v < 1:
        return int(v)
    g = max(1, int(granularity))
    e = (int(v) - 1).bit_length()  # log2 of the next power of two
    return 1 << (-(-e // g) * g)


def shape_bucket(dims: Mapping[str, int], granularity: int = 2) -> str:
    """The shape bucket of `dims`: each dim rounded up to a power of 2**granularity, in name
    order, "K=4096,M=64,N=4096". The one bucket function of the package (store, heuristics,
    theories); dims below 1 are kept as they are."""
    return ",".join(f"{k}={bucket_value(v, granularity)}" for k, v in sorted(dims.items()))


@dataclass(frozen=True)
class Classification:
    kernel_class: str
    variant: str = ""
    dims: dict[str, int] = field(default_factory=dict)  # canonical names
    dtype_family: str = "any"
    fallback: str = "all"
    granularity: int = 2
    # the problem's own name of each canonical dim that it spells otherwise ("N" -> "numel")
    spelled: dict[str, str] = field(default_factory=dict, compare=False)
    # tile axis -> the dim it covers, where the kernel's loops say so against the class's aliases
    # (`loop_tiles`): a row kernel whose BLOCK_M walks the row and BLOCK_N counts rows
    tile_axes: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def bucket(self) -> str:
        return shape_bucket(self.dims, self.granularity)

    def to_dict(self) -> dict[str, Any]:
        return {"kernel_class": self.kernel_class, "variant": self.variant, "dims": dict(self.dims),
                "dtype_family": self.dtype_family, "bucket": self.bucket, "fallback": self.fallback}


# ------------------------------------------------------------------------ inference

def _norm(name: str) -> str:
    return name.lower().replace("_", "")


def canonical_dims(kernel_class: str, dims: Mapping[str, int]) -> dict[str, int]:
    """The dims under the class's canonical names; dims the class does not name keep theirs.
    A class whose canonical dims are not all found keeps the problem's dims as they are."""
    return _canonical(kernel_class, dims)[0]


def _canonical(kernel_class: str, dims: Mapping[str, int]) -> tuple[dict[str, int], dict[str, str]]:
    """(`canonical_dims`, the problem's spelling -> canonical name, for the dims renamed)."""
    aliases = _ALIASES.get(kernel_class)
    if not aliases:
        return {k: int(v) for k, v in dims.items()}, {}
    by_norm = {_norm(k): k for k in dims}
    out: dict[str, int] = {}
    used: dict[str, str] = {}
    for canon, names in aliases.items():
        for n in (_norm(canon), *names):
            k = by_norm.get(n)
            if k is not None and k not in used:
                out[canon] = int(dims[k])
                used[k] = canon
                break
    required = {"matmul": ("M", "N", "K"), "quantized_matmul": ("M", "N", "K"),
                "row_reduction": ("rows", "cols"), "elementwise": ("numel",),
                "attention": ("seq", "head_dim")}[kernel_class]
    if not all(r in out for r in required):
        if kernel_class == "matmul" and all(r in out for r in ("M", "N")) and "E" in out:
            pass  # a MoE config keyed by tokens, N and experts (K unknown) is still a matmul
        else:
            return {k: int(v) for k, v in dims.items()}, {}
    for k, v in dims.items():  # extra dims (e.g. a packing factor) ride along
        if k not in used and _norm(k) not in _PACK_DIMS:
            out.setdefault(k, int(v))
    return out, {k: c for k, c in used.items() if k != c}


def has_canonical_dims(kernel_class: str, dims: Mapping[str, int]) -> bool:
    need = {"matmul": ("M", "N"), "quantized_matmul": ("M", "N"), "row_reduction": ("rows", "cols"),
            "elementwise": ("numel",), "attention": ("seq", "head_dim")}.get(kernel_class)
    return bool(need) and all(n in dims for n in need)


_CLASS_PATTERNS = [  # kernel name -> kernel class, first match wins
    (r"q(uant)?.*(gemm|matmul)|(gemm|matmul).*(int4|int8|fp8|quant)", "quantized_matmul"),
    (r"gemm|matmul|\bmm\b|_mm_|gemv", "matmul"),
    (r"attn|attention", "attention"),
    (r"conv", "convolution"),
    (r"stencil|diffusion|hotspot|jacobi", "stencil"),
    # the ops' own words, so that a library kernel keyed by bare M and N is read live as its
    # recording's header reads it (FlagGems' var_mean, amax, addmv; reglu, triu, upsampling:
    # `patch_triton` had them as "other", session 28); not a bare max or min (max_pool2d)
    (r"softmax|norm|reduc|sum_rows|argm(ax|in)|(^|_)(var|mean|var_mean|amax|amin|cumsum|cumprod|logsumexp)(_|$)"
     r"|(^|_)(add)?mv(_|$)|cross_?entropy", "row_reduction"),
    (r"(^|_)(add|mul|relu|gelu|silu|axpy|copy|triu|tril)(_|$)|glu(_|$)|upsample|elementwise", "elementwise"),
]


def guess_kernel_class(kernel_name: str) -> str:
    """A kernel class from a kernel's name ("Xgemm" -> matmul), "other" when unsure."""
    for pat, cls in _CLASS_PATTERNS:
        if re.search(pat, kernel_name, re.IGNORECASE):
            return cls
    return "other"


def infer_kernel_class(problem: Problem, space: Space | None = None) -> str:
    """The problem's class if it names one, else from dims, dtypes, space roles and name."""
    if problem.kernel_class and problem.kernel_class != "other":
        return problem.kernel_class
    names = {_norm(k) for k in problem.dims}
    roles = set(space.roles()) if space is not None else set()
    q = _quant_variant(problem)
    quant = bool(q) and not (q == "fp8" and _fp8_operands(problem))
    guess = guess_kernel_class(problem.kernel)
    # M, N and K are also what reductions over a middle dim call their outer, reduced and inner
    # extents (FlagGems' softmax and log-softmax over a dim that is not the last, keyed by M, N
    # and K): without tiles of all three, a name that says which kind of kernel it is decides
    named_other = guess not in ("other", "matmul", "quantized_matmul")
    if (not named_other and {"m", "n", "k"} <= names) or {"tile:M", "tile:N", "tile:K"} <= roles or \
            ({"m", "n"} <= names and names & {"e", "experts", "numexperts"}):
        return "quantized_matmul" if quant else "matmul"
    if names & {"seq", "seqlen", "nctx", "seqq"} and names & {"headdim", "dhead", "d"}:
        return "attention"
    if {"rows", "cols"} <= names or "tile:R" in roles:
        return "row_reduction"
    if names == {"numel"}:
        return "elementwise"
    if guess == "matmul" and quant:
        return "quantized_matmul"
    return guess


# names of a matmul's output (any dtype) and of its scales and zero points: not its operands
_NOT_OPERAND = re.compile(r"^(c|d|o|y|out|output|dst|res|result)(_?ptr)?$|scale|zero|^key:", re.IGNORECASE)


def _fp8_operands(problem: Problem) -> bool:
    """Whether every operand of the problem (its output, scales and zero points aside) is fp8.
    An fp8 x fp8 matmul is a matmul, as an explicit "matmul" keeps it (`classify`), as the zoo's
    recordings name their fp8 kernel and as vLLM's fp8_w8a8 tables are read
    (`heuristics.vllm`): what was learned under that class meets a live fp8 call under it too.
    fp8 against a wider type (weight-only) and integer or sub-byte types stay quantized."""
    fams = {dtype_family(str(v).lower()) for k, v in problem.dtypes.items() if not _NOT_OPERAND.search(k)}
    return fams == {"fp8"}


def _quant_variant(problem: Problem) -> str:
    """int4 / fp4 / int16 / int8 / fp8 from element types and packing; "" when none."""
    dts = {k.lower(): str(v).lower() for k, v in problem.dtypes.items()}
    fams = {k: dtype_family(v) for k, v in dts.items()}
    hint = " ".join([problem.kernel.lower(), *dts.values()])
    scale_fams = {fams[k] for k in fams if "scale" in k}
    scale_e8m0 = any(re.search(r"e8m0", dts[k]) for k in dts if "scale" in k)
    # declared narrow element types
    vals = set(fams.values())
    if "fp4" in vals or re.search(r"fp4|e2m1|nvfp4|mxfp4", hint):
        return "fp4"
    if "int4" in vals or re.search(r"(^|[^a-z0-9])(w4a\d+|int4|awq|gptq)", hint):
        return "int4"
    # packed containers: element bits = container bits / pack factor
    pack = next((int(v) for k, v in problem.dims.items() if _norm(k) in _PACK_DIMS and int(v) > 1), 0)
    if pack:
        container = next((_CONTAINER_BITS[dts[k]] for k in dts
                          if dts[k] in _CONTAINER_BITS and "scale" not in k and "zero" not in k
                          and fams[k] in ("int32", "int8", "int16")), 32)
        bits = container // pack
        if bits == 4:
            return "fp4" if (scale_e8m0 or "fp8" in scale_fams) else "int4"
        if bits == 16:
            return "int16"
        if bits == 8:
            return "int8"
    if "int16" in vals or re.search(r"w16a|int16", hint):
        return "int16"
    weight_like = {fams[k] for k in fams if not re.search(r"^(a|x|c|out|y|acc)$|scale|zero", k)}
    if "fp8" in weight_like:
        return "fp8"
    if "int8" in weight_like:
        return "int8"
    return ""


# the last few answers, by the identity of the (frozen) Problem and the Space asked about: one
# ranking of a grown space asks about the same pair ~20,000 times (per config, through the
# diagnosis and the resource model), which cost 8 of 11 s on the 2,800 configs grown around the
# fp8 matmul's list (session 30). The kernel's told loop facts are part of the answer (a
# kernel's source may tell them after a first look)
_MEMO: dict[tuple[int, int, int], tuple[Problem, Any, dict[str, str], Classification]] = {}
_MEMO_LEN = 32


def classify(problem: Problem, space: Space | None = None, granularity: int = 2) -> Classification:
    key = (id(problem), id(space), granularity)
    facts = kernel_facts.told(problem.kernel)
    hit = _MEMO.get(key)
    if hit is not None and hit[0] is problem and hit[1] is space and hit[2] == facts:
        return hit[3]
    got = _classify(problem, space, granularity)
    if len(_MEMO) >= _MEMO_LEN:
        _MEMO.clear()
    _MEMO[key] = (problem, space, facts, got)
    return got


def _classify(problem: Problem, space: Space | None, granularity: int) -> Classification:
    kclass = infer_kernel_class(problem, space)
    dims, spelled = _canonical(kclass, problem.dims)
    variant = ""
    if kclass in ("matmul", "quantized_matmul"):
        q = _quant_variant(problem)
        if q and kclass == "matmul" and q in ("int4", "fp4", "int16"):
            kclass = "quantized_matmul"
        if kclass == "quantized_matmul":
            variant = q or "int8"
        elif "E" in dims:
            variant = "moe"
    fam = variant if kclass == "quantized_matmul" else dtype_family(problem.dtype if problem.dtypes else None)
    axes = loop_tiles(kclass, dims, space, kernel_facts.told(problem.kernel)) if space is not None else {}
    return Classification(kclass, variant, dims, fam, fallback_category(kclass, dims), granularity, spelled, axes)


def loop_tiles(kernel_class: str, dims: Mapping[str, int], space: Space,
               reduction: Mapping[str, str]) -> dict[str, str]:
    """Tile axes whose dim the kernel's loops tell, where the class's aliases would guess it.

    A row kernel's two tiles named only by letters (BLOCK_M, BLOCK_N) are taken by convention
    as rows (M) and the row's columns (N). A kernel's source can say otherwise: the tile that
    the reduction loop steps by covers the columns, whatever its letter (FlagGems' GEMV loops
    over each row in BLOCK_M columns and gives each program BLOCK_N rows). Only a plain
    answer counts: exactly one of the two tiles loops (`loop` or `either`) and the other is
    held `whole`; anything else keeps the convention."""
    if kernel_class != "row_reduction" or "cols" not in dims or "rows" not in dims or not reduction:
        return {}
    alias = {}
    for p in space.params:
        axis = p.role.split(":", 1)[1] if p.role and p.role.startswith("tile:") else None
        if axis in ("M", "N", "R", "X") and _dim_named(axis, dims) is None:
            alias[axis] = reduction.get(p.name)
    if len(alias) != 2 or None in alias.values():
        return {}
    looping = [a for a, r in alias.items() if r in ("loop", "either")]
    whole = [a for a, r in alias.items() if r == "whole"]
    if len(looping) != 1 or len(whole) != 1:
        return {}
    return {looping[0]: "cols", whole[0]: "rows"}


def fallback_category(kernel_class: str, dims: Mapping[str, int]) -> str:
    """The per-class fallback category (see the module docstring); "all" when unknown."""
    if kernel_class in ("matmul", "quantized_matmul") and "M" in dims and "N" in dims:
        m, n, k = dims["M"], dims["N"], dims.get("K")
        if m <= SMALL_M:
            return "small_m"
        if n <= SMALL_N:
            return "small_n"
        if k is not None and k <= SMALL_K:
            return "small_k"
        if max(m, n) >= RECT_RATIO * min(m, n):
            return "rect"
        return "balanced"
    if kernel_class == "row_reduction" and "rows" in dims and "cols" in dims:
        rows, cols = dims["rows"], dims["cols"]
        if rows < SHORT_ROWS:
            return "short"
        if cols <= NARROW_COLS:
            return "narrow"
        if cols >= WIDE_COLS:
            return "wide"
        return "square"
    if kernel_class == "elementwise" and "numel" in dims:
        n = dims["numel"]
        return "tiny" if n <= TINY_NUMEL else ("huge" if n >= HUGE_NUMEL else "mid")
    if kernel_class == "attention" and "seq" in dims:
        if dims.get("head_dim", SMALL_HEAD) < SMALL_HEAD:
            return "small_head"
        s = dims["seq"]
        return "short_seq" if s <= SHORT_SEQ else ("long_seq" if s >= LONG_SEQ else "mid_seq")
    return "all"


# ------------------------------------------------------------------------ roles and dims

def tile_dim(role: str | None, cls: Classification) -> int | None:
    """The problem dim a tile parameter of `role` covers, None when not known.
    tile:M/N/K -> M/N/K; rows: tile:R -> cols, tile:X -> rows; elementwise: tile / tile:X
    -> numel; otherwise tile:D -> the dim named D (case-insensitive) if there is one."""
    name = tile_dim_name(role, cls)
    return None if name is None or cls.dims.get(name) is None else int(cls.dims[name])


def tile_dim_name(role: str | None, cls: Classification) -> str | None:
    """The name of the problem dim a tile parameter of `role` covers (see `tile_dim`)."""
    if not role or not (role == "tile" or role.startswith("tile:")):
        return None
    axis = role.split(":", 1)[1] if ":" in role else ""
    d = cls.dims
    named = _dim_named(axis, d)
    if named is None and TILES_BY_SPELLING:  # or as the problem spells it (`TILES_BY_SPELLING`)
        spelt = _dim_named(axis, cls.spelled)
        named = cls.spelled[spelt] if spelt is not None and cls.spelled[spelt] in d else None
    if named is not None:  # a tile named for a dim covers that dim, whatever the class's aliases say
        return named
    if axis in cls.tile_axes:  # the kernel's loops say which dim this tile walks
        return cls.tile_axes[axis]
    if cls.kernel_class == "row_reduction" and "cols" in d:
        if axis in ("R", "N", ""):
            return "cols"
        if axis in ("X", "M"):
            return "rows" if "rows" in d else None
        return None
    if cls.kernel_class == "elementwise" and "numel" in d:
        return "numel" if axis in ("", "X") else None
    if cls.kernel_class == "attention":
        if axis in ("M", "N"):
            return "seq" if "seq" in d else None
        if axis in ("D", "K"):
            return "head_dim" if "head_dim" in d else None
    return None


def _dim_named(axis: str, dims: Mapping[str, Any]) -> str | None:
    """The dim an axis names: the same word (BLOCK_K: K; BLOCK_HEADS: heads), or its singular
    or plural (BLOCK_ROW, ROWS_PER_PROGRAM: rows), else the output's extent along it where the
    problem names an input's and an output's (BLOCK_H: out_h beside in_h, a pooling or
    convolution window's output; a Triton kernel's programs tile what they write); None when
    the axis names no dim."""
    if not axis:
        return None
    a = axis.lower()
    for want in (a, a + "s", a[:-1] if len(a) > 2 and a.endswith("s") else None):
        for k in dims:
            if want is not None and k.lower() == want:
                return k
    for k in dims:
        if k.lower() in (f"out_{a}", f"{a}_out", f"output_{a}"):
            return k
    return None


# ------------------------------------------------------------------------ the launch grid

# Dims whose indices are independent work items: where no tile covers one, a Triton kernel gives
# each index programs of its own (attention's batch and heads, a row kernel's rows, a token-wise
# kernel's tokens). Per class under canonical names, and for any class by these spellings. A dim
# not named here and covered by no tile is held or walked inside a program (a head_dim, a row's
# columns, a matmul's K), or its role is unknown: it launches nothing.
_INDEPENDENT: dict[str, tuple[str, ...]] = {"attention": ("batch", "heads"), "row_reduction": ("rows",)}
_INDEPENDENT_NAMES = ("batch", "batches", "heads", "nheads", "numheads", "tokens", "ntokens",
                      "numtokens", "rows", "nrows", "numrows")
# Classes whose own dims, named so by the problem, count every independent program: a row
# kernel's `rows` are all its rows, and its other dims only factor its rows or its columns (a
# batch norm's `batch` lies in the columns it reduces, with the spatial dims), so a batch-like
# name beside them is no second count. Where `rows` is another name read as it (`batch` of
# batch x tokens rows), the other names still count.
_COUNTED_WHOLE = ("row_reduction",)
# A dim that splits another among groups tiled apart: a MoE matmul's tokens (M) are split
# among its experts (E), and each expert's rows are tiled on their own.
_PARTITIONS: dict[str, dict[str, str]] = {"matmul": {"E": "M"}, "quantized_matmul": {"E": "M"}}


def independent_dims(cls: Classification) -> tuple[str, ...]:
    """The dims of `cls.dims` whose every index runs in programs of its own when no tile covers
    it (see `_INDEPENDENT`), in the problem's order; () when none is known."""
    own = _INDEPENDENT.get(cls.kernel_class, ())
    renamed = set(cls.spelled) | set(cls.spelled.values())
    if cls.kernel_class in _COUNTED_WHOLE and all(k in cls.dims and k not in renamed for k in own):
        return tuple(k for k in cls.dims if k in own and int(cls.dims[k]) > 0)
    partitions = _PARTITIONS.get(cls.kernel_class, {})
    return tuple(k for k in cls.dims if k not in partitions
                 and (k in own or _norm(k) in _INDEPENDENT_NAMES) and int(cls.dims[k]) > 0)


# a tiled product's dims that count a batch of independent products (a bmm: the batch on the
# grid's third axis), whatever else the launch grid counts (`theory.diagnose.grid_tiles`)
_BATCHED: dict[str, tuple[str, ...]] = {"matmul": ("batch", "batches"), "quantized_matmul": ("batch", "batches")}


def batch_dims(cls: Classification) -> tuple[str, ...]:
    """The dims of `cls.dims` that count a batch of independent products (`_BATCHED`); ()
    for every other class and for a product without one."""
    names = _BATCHED.get(cls.kernel_class, ())
    return tuple(k for k in independent_dims(cls) if _norm(k) in names)


def partitioned_dim(cls: Classification) -> tuple[str, str] | None:
    """(dim, group dim) when the class splits a dim among groups tiled apart (a MoE matmul:
    ("M", "E"), its tokens among its experts) and the problem names both; None otherwise."""
    for group, dim in _PARTITIONS.get(cls.kernel_class, {}).items():
        if cls.dims.get(group) and cls.dims.get(dim):
            return dim, group
    return None
