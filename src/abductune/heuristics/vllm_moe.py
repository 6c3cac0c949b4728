"""vLLM fused-MoE tables as vLLM reads them: the file name, the JSON reader and writer, the
nearest-batch lookup and vLLM's default config, with configs mapped to a kernel by role.

The rules below restate vLLM's (vllm/model_executor/layers/fused_moe/fused_moe.py and
benchmarks/kernels/benchmark_moe.py, read in late 2025) in our own words:

- File name: `E={E},N={N},device_name={GPU}[,dtype={sel}][,block_shape=[n,k]].json`. The GPU is
  the CUDA device name with spaces turned into underscores, and any GPU of the H200 family is
  written `NVIDIA_H200`. N is the intermediate size per shard after the activation (w2's last
  dim), so the gate+up GEMM of such a layer has 2N output columns. The dtype selector is absent
  for fp16 and bf16, `float32` for fp32, and names the quantization otherwise (`fp8_w8a8`, ...).
- Content: a JSON object mapping the batch size (tokens, a decimal string) to a config dict
  with BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M, num_warps and num_stages; the
  tuner adds a top-level "triton_version" that the reader drops. Every other key is read as an
  integer, so any other top-level key would make vLLM fail: `read_table` refuses it.
- Lookup: the entry whose batch size is nearest the number of tokens (smallest |key - M|);
  on a tie the key met first in the file wins (Python's min over the dict's keys).
- No file: the default config. For an unquantized layer, BLOCK_SIZE_M=16, BLOCK_SIZE_N=32,
  BLOCK_SIZE_K=64, GROUP_SIZE_M=1 when the batch has no more tokens than there are experts,
  else 64, 64, 32 and 8. It names no warps or stages, so the launch gets Triton's defaults
  (4 warps, 3 stages on NVIDIA GPUs). Block-quantized fp8 takes BLOCK_SIZE_M=64, the block
  shape as BLOCK_SIZE_N and BLOCK_SIZE_K, GROUP_SIZE_M=32, 4 warps, 3 stages.

Our kernels name their parameters as they like: a config goes to and from vLLM's keys through
the parameters' roles (BLOCK_SIZE_M is the parameter with role tile:M, GROUP_SIZE_M the one
with role group, ...; heuristics/vllm.py holds the mapping). A parameter with no vLLM role
keeps its own name in the file, and a vLLM key with no parameter of its role is refused.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..errors import AbductuneError
from ..files import atomic_write_text
from ..space import Space
from .vllm import VLLM_TO_ROLE, filename, read_json_object

# vLLM's benchmark_moe.py batch grid (tokens), the keys a full table holds
DEFAULT_BATCH_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048,
                                        3072, 4096)
# vLLM's key order in a written config (its benchmark's sort_config)
VLLM_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")
VERSION_KEY = "triton_version"
# what a Triton launch uses for a key the config leaves out (NVIDIA GPUs)
TRITON_LAUNCH_DEFAULTS = {"num_warps": 4, "num_stages": 3}
_ROLE = {k: v.lstrip("@") for k, v in VLLM_TO_ROLE.items()}  # BLOCK_SIZE_M -> tile:M, ...
_VLLM_OF_ROLE = {v: k for k, v in _ROLE.items()}
# our dtype -> vLLM's dtype selector in the file name (None: no selector)
_DTYPE_SELECTOR = {"bf16": None, "fp16": None, "fp32": "float32", "fp8": "fp8_w8a8", "int8": "int8_w8a16",
                   "int4": "int4_w4a16"}


def device_name(gpu: str) -> str:
    """The device part of a vLLM file name for a GPU name as CUDA reports it."""
    name = "_".join(gpu.split())
    return "NVIDIA_H200" if "H200" in name.split("_") else name


def dtype_selector(dtype: str) -> str | None:
    """vLLM's dtype selector for one of our dtype names (bf16 and fp16 have none)."""
    if dtype in _DTYPE_SELECTOR:
        return _DTYPE_SELECTOR[dtype]
    raise AbductuneError(f"no vLLM dtype selector for {dtype!r}; known: {', '.join(_DTYPE_SELECTOR)}")


def table_file_name(E: int, N: int, gpu: str, selector: str | None = None,
                    block_shape: Iterable[int] | None = None) -> str:
    """The file name vLLM looks for (N: the intermediate size per shard, see the module doc)."""
    return filename(int(E), int(N), device_name(gpu), selector, block_shape)


# ---------------------------------------------------------------------------- configs by role
def to_vllm(config: Mapping[str, Any], space: Space) -> dict[str, Any]:
    """A kernel config under vLLM's keys (by role), in vLLM's key order; a parameter without
    a vLLM role keeps its name, after them."""
    roles = {p.name: p.role for p in space.params}
    out: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for name, value in config.items():
        key = _VLLM_OF_ROLE.get(roles.get(name) or "")
        if key is None:
            rest[name] = value
        elif key in out:
            raise AbductuneError(f"two parameters of {space.name or 'the kernel'} have role {roles[name]}; "
                                 "a vLLM config has one key per role")
        else:
            out[key] = value
    ordered = {k: out[k] for k in VLLM_KEYS if k in out}
    ordered.update({k: v for k, v in out.items() if k not in ordered})
    ordered.update(rest)
    return ordered


def from_vllm(config: Mapping[str, Any], space: Space) -> dict[str, Any]:
    """A vLLM config as the kernel's parameters (by role); num_warps and num_stages the config
    leaves out get Triton's launch defaults, and SPLIT_K=1 (no split) is dropped when the
    kernel has no split parameter."""
    by_role = {p.role: p.name for p in space.params if p.role}
    names = set(space.names)
    out: dict[str, Any] = {}
    for key, value in {**TRITON_LAUNCH_DEFAULTS, **config}.items():
        role = _ROLE.get(key)
        if role is not None and role in by_role:
            out[by_role[role]] = value
        elif key in names:
            out[key] = value
        elif key == "SPLIT_K" and value == 1:
            continue
        else:
            raise AbductuneError(f"vLLM key {key}={value!r} has no parameter in {space.name or 'the kernel'} "
                                 f"(by role {role or '-'} or by name); its parameters: {', '.join(space.names)}")
    return {n: out[n] for n in space.names if n in out}


# ---------------------------------------------------------------------------- the file
def write_table(path: str | os.PathLike[str], table: Mapping[int, Mapping[str, Any]],
                triton_version: str | None = None) -> Path:
    """Write a table (batch size -> vLLM config) as vLLM's tuner does: "triton_version" first
    when given, then the batch sizes ascending, 4-space indent, a final newline; atomically."""
    obj: dict[str, Any] = {VERSION_KEY: triton_version} if triton_version else {}
    for bs in sorted(int(b) for b in table):
        if bs < 1:
            raise AbductuneError(f"batch size {bs} in a vLLM table: batch sizes are token counts >= 1")
        obj[str(bs)] = dict(table[bs])
    p = Path(path)
    atomic_write_text(p, json.dumps(obj, indent=4) + "\n")
    return p


def read_table(path: str | os.PathLike[str]) -> dict[int, dict[str, Any]]:
    """A vLLM config file as vLLM reads it: batch size -> config, in the file's order, with
    "triton_version" dropped; a key vLLM could not read as an integer is refused here."""
    p = Path(path)
    obj = read_json_object(p)
    obj.pop(VERSION_KEY, None)
    out: dict[int, dict[str, Any]] = {}
    for key, cfg in obj.items():
        try:
            bs = int(key)
        except ValueError:
            raise AbductuneError(f"{p}: key {key!r} is not a batch size (vLLM reads every key but "
                                 f"{VERSION_KEY} as an integer, and would fail on it)") from None
        if not isinstance(cfg, dict):
            raise AbductuneError(f"{p}: batch size {key} maps to {cfg!r}, not a config")
        out[bs] = cfg
    return out


# ---------------------------------------------------------------------------- lookup and default
def nearest_key(keys: Iterable[int], m: int) -> int:
    """The batch size vLLM picks for `m` tokens: smallest |key - m|, the first such key in
    `keys`' order on a tie."""
    best: int | None = None
    for k in keys:
        if best is None or abs(k - m) < abs(best - m):
            best = k
    if best is None:
        raise AbductuneError("an empty vLLM table has no config to look up")
    return best


def lookup(table: Mapping[int, Mapping[str, Any]], m: int) -> dict[str, Any]:
    """The config vLLM uses for `m` tokens from a table read by `read_table`."""
    return dict(table[nearest_key(table, m)])


def default_config(M: int, E: int, N: int, K: int, top_k: int, selector: str | None = None,
                   block_shape: list[int] | None = None) -> dict[str, Any]:
    """vLLM's `get_default_config` (outside its batch-invariant mode): block-quantized fp8
    has its own rule; weight-only int4/int8 with a block shape (vLLM's wna16 path, which sizes
    the tiles later) is not reimplemented and is refused; every other case, unquantized
    included, goes by tokens against experts. N, K and top_k do not enter these cases; they
    are taken so calls read like vLLM's."""
    del N, K, top_k
    if selector == "fp8_w8a8" and block_shape:
        return {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": int(block_shape[0]), "BLOCK_SIZE_K": int(block_shape[1]),
                "GROUP_SIZE_M": 32, "num_warps": 4, "num_stages": 3}
    if selector in ("int4_w4a16", "int8_w8a16") and block_shape:
        raise AbductuneError(f"vLLM's default config for {selector} with a block shape (its wna16 path) is "
                             "not reimplemented here")
    if M <= E:
        return {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}
    return {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}
