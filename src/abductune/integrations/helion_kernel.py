"""What a Helion kernel is to abductune: a `Problem` and the roles of its config fields, from its ConfigSpec.

No Helion import: `facts_of` reads the ConfigSpec's documented fields (`block_sizes[i]`'s
`block_ids` and `size_hint`, `reduction_loops`, `matmul_facts`) and plain (shape, dtype)
pairs of the kernel's tensor arguments, so the search (real tensors) and the heuristics
(Helion's fake inputs at bind time) classify a kernel the same way.

The classes, each with the roles its tiles get:
- one matmul fact (`hl.dot`, `torch.addmm`, ...) whose M, N and K blocks are tiled:
  "matmul", tile:M / tile:N / tile:K on those blocks (a quantized one by its dtypes);
- a bf16/fp16 left operand and an int8 right operand packed two values per byte (its first
  dim is half the left's last), with three tiles and no matmul fact (Helion's int4 example
  unpacks and sums by hand): "quantized_matmul" with an int4 weight, tiles matched to M, N
  and the packed K by their size hints;
- two or more matmul facts on a 3-D or 4-D first argument: "attention" (batch, heads, seq,
  head_dim), tile:M on the query block and tile:N on the key block of the first fact;
- one tile and one reduction loop, no matmul: "row_reduction" (rows, cols), tile:X on the
  rows and tile:R on the reduction loop (a loop at least the row's length is persistent);
- one tile and nothing else: "elementwise" (numel), role tile;
- anything else: "other", its tiles' size hints as dims d0, d1, ...
num_warps, num_stages and the first L2 grouping take warps, stages and group everywhere.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..costs import problem_costs
from ..hardware import HardwareInfo
from ..problem import Problem

# torch dtype names -> abductune's
_DTYPES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32",
           "float64": "fp64", "int8": "int8", "uint8": "uint8", "int16": "int16", "int32": "int32",
           "int64": "int64", "float8_e4m3fn": "fp8e4m3", "float8_e5m2": "fp8e5m2", "bool": "bool"}


def dtype_name(dtype: Any) -> str:
    """abductune's name of a torch dtype ("torch.bfloat16" -> "bf16")."""
    s = str(dtype).replace("torch.", "")
    return _DTYPES.get(s, s)


@dataclass(frozen=True)
class Tile:
    """One tiled loop of the kernel: its position in the config field and its extent."""

    field: str  # "block_sizes" or "reduction_loops"
    item: int
    block_ids: tuple[int, ...]
    size_hint: int

    @property
    def name(self) -> str:
        return f"{self.field}_{self.item}"


@dataclass(frozen=True)
class MatmulFact:
    m_block: int | None
    n_block: int | None
    k_block: int | None
    m: int | None = None
    n: int | None = None
    k: int | None = None
    lhs: str = ""
    rhs: str = ""


@dataclass
class KernelFacts:
    """The problem abductune tunes, and slot name -> role for the config fields."""

    problem: Problem
    roles: dict[str, str] = field(default_factory=dict)


def tiles_of(config_spec: Any) -> list[Tile]:
    """The tiled loops of a ConfigSpec: block sizes, then reduction loops."""
    out = []
    for fld in ("block_sizes", "reduction_loops"):
        for i, spec in enumerate(getattr(config_spec, fld, ()) or ()):
            out.append(Tile(fld, i, tuple(int(b) for b in getattr(spec, "block_ids", ())),
                            int(getattr(spec, "size_hint", 0) or 0)))
    return out


def matmul_facts_of(config_spec: Any) -> list[MatmulFact]:
    out = []
    for f in getattr(config_spec, "matmul_facts", ()) or ():
        def get(name: str) -> Any:
            return getattr(f, name, None)
        out.append(MatmulFact(get("m_block_id"), get("n_block_id"), get("k_block_id"), get("static_m"),
                              get("static_n"), get("static_k"), dtype_name(get("lhs_dtype") or ""),
                              dtype_name(get("rhs_dtype") or "")))
    return out


def source_hash(name: str, source: str) -> str:
    return hashlib.sha256(f"{name}\n{source}".encode()).hexdigest()[:16]


def facts_of(config_spec: Any, tensors: Sequence[tuple[Sequence[int], Any]], *, name: str = "helion_kernel",
             source: str = "", hardware: HardwareInfo | None = None) -> KernelFacts:
    """The kernel's problem and roles (module docstring). `tensors`: (shape, dtype) of each
    tensor argument in order."""
    tiles = tiles_of(config_spec)
    mms = matmul_facts_of(config_spec)
    shapes = [tuple(int(d) for d in s) for s, _ in tensors]
    dts = [dtype_name(d) for _, d in tensors]
    kclass, dims, dtypes, roles = _classify(tiles, mms, shapes, dts)
    roles.update(_launch_roles(config_spec))
    costs = problem_costs(kclass, dims, dtypes) if kclass != "other" else None
    flops, nbytes = costs if costs else (0.0, 0.0)
    problem = Problem(name, kclass, dims, dtypes, flops, nbytes, hardware, source_hash(name, source))
    return KernelFacts(problem, roles)


def _launch_roles(config_spec: Any) -> dict[str, str]:
    roles = {"num_warps": "warps", "num_stages": "stages"}
    if len(getattr(config_spec, "l2_groupings", ()) or ()) > 0:
        roles["l2_groupings_0"] = "group"
    return roles


def _by_block(tiles: Sequence[Tile], block: int | None) -> Tile | None:
    return next((t for t in tiles if block is not None and block in t.block_ids), None)


def _classify(tiles: list[Tile], mms: list[MatmulFact], shapes: list[tuple[int, ...]],
              dts: list[str]) -> tuple[str, dict[str, int], dict[str, str], dict[str, str]]:
    blocks = [t for t in tiles if t.field == "block_sizes"]
    loops = [t for t in tiles if t.field == "reduction_loops"]
    first = dts[0] if dts else "fp32"
    if len(mms) == 1:
        f = mms[0]
        tm, tn, tk = _by_block(tiles, f.m_block), _by_block(tiles, f.n_block), _by_block(tiles, f.k_block)
        if tm and tn and tk and len({tm, tn, tk}) == 3:
            dims = {"M": f.m or tm.size_hint, "N": f.n or tn.size_hint, "K": f.k or tk.size_hint}
            dtypes = {"a": f.lhs or first, "b": f.rhs or (dts[1] if len(dts) > 1 else first)}
            dtypes["c"] = dtypes["a"]
            return "matmul", dims, dtypes, {tm.name: "tile:M", tn.name: "tile:N", tk.name: "tile:K"}
    if len(mms) >= 2 and shapes and len(shapes[0]) >= 3:
        f = mms[0]
        tm, tn = _by_block(tiles, f.m_block), _by_block(tiles, f.n_block)
        q = shapes[0]
        kv = shapes[1] if len(shapes) > 1 and len(shapes[1]) == len(q) else q
        dims = {"batch": math.prod(q[:-3]) if len(q) > 3 else 1, "heads": q[-3], "seq": q[-2], "head_dim": q[-1]}
        if kv[-2] != q[-2]:
            dims["kv_seq"] = kv[-2]
        roles = {t.name: r for t, r in ((tm, "tile:M"), (tn, "tile:N")) if t is not None}
        return "attention", dims, {"q": first}, roles
    if not mms and len(blocks) == 3 and _packed_int4(shapes, dts):
        (m, k), n = shapes[0], shapes[1][1]
        roles = _match_hints(blocks, {"tile:M": m, "tile:N": n, "tile:K": k // 2})
        return "quantized_matmul", {"M": m, "N": n, "K": k}, {"a": dts[0], "b": "int4", "c": dts[0]}, roles
    if not mms and len(blocks) == 1 and len(loops) == 1:
        rows, cols = blocks[0].size_hint, loops[0].size_hint
        return "row_reduction", {"rows": rows, "cols": cols}, {"x": first, "y": first}, \
            {blocks[0].name: "tile:X", loops[0].name: "tile:R"}
    if not mms and len(blocks) == 1 and not loops:
        return "elementwise", {"numel": blocks[0].size_hint}, {"x": first, "y": first}, {blocks[0].name: "tile"}
    dims = {f"d{i}": t.size_hint for i, t in enumerate(tiles)}
    return "other", dims, {"x": first}, {}


def _packed_int4(shapes: list[tuple[int, ...]], dts: list[str]) -> bool:
    """A 16-bit float [M, K] operand and an int8 [K/2, N] operand: two int4 weights a byte."""
    return (len(shapes) >= 2 and len(shapes[0]) == 2 and len(shapes[1]) == 2 and dts[0] in ("bf16", "fp16")
            and dts[1] in ("int8", "uint8") and shapes[1][0] * 2 == shapes[0][1])


def _match_hints(blocks: list[Tile], want: Mapping[str, int]) -> dict[str, str]:
    """Roles for tiles by their size hints (each extent claimed once, in block order); tiles
    whose hint matches no extent left without a role, and ties decided by order M, N, K."""
    roles: dict[str, str] = {}
    free = dict(want)
    for t in blocks:
        role = next((r for r, v in free.items() if v == t.size_hint), None)
        if role is not None:
            roles[t.name] = role
            del free[role]
    return roles
