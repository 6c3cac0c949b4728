"""vLLM fused-MoE config files <-> observed-heuristics rules.

vLLM ships one JSON file per (experts E, intermediate size N, GPU, quantization, block
shape), named `E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3[,dtype=fp8_w8a8]
[,block_shape=[128,128]].json`, mapping batch size (tokens) to the best config of an
exhaustive search:

    {"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 256, "GROUP_SIZE_M": 16,
           "num_warps": 8, "num_stages": 5}, "2": {...}, ...}

`import_vllm` turns every (file, batch size) into an exact rule (dims E, N, M = batch size;
vLLM picks the nearest batch size, and so does lookup) whose one template is keyed by role
("@tile:M" for BLOCK_SIZE_M, "@group" for GROUP_SIZE_M, ...) so it seeds any MoE kernel
that declares those roles; keys without a role (ROCm's `waves_per_eu`, `kpack`, ...) are kept
by name. `export_vllm` writes rules back in that format; a file imported and exported again
gives the same file name and the same configs, key order and top-level extras included.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..errors import AbductuneError
from ..hardware import lookup
from .observed import Database, Rule, Template

VLLM_TO_ROLE = {"BLOCK_SIZE_M": "@tile:M", "BLOCK_SIZE_N": "@tile:N", "BLOCK_SIZE_K": "@tile:K",
                "GROUP_SIZE_M": "@group", "num_warps": "@warps", "num_stages": "@stages",
                "SPLIT_K": "@split:K"}
ROLE_TO_VLLM = {v: k for k, v in VLLM_TO_ROLE.items()}
_ORDER = list(VLLM_TO_ROLE)

# vLLM dtype selector -> (kernel class, variant, dtype family)
_DTYPES: dict[str | None, tuple[str, str, str]] = {
    None: ("matmul", "moe", "fp16"),
    "float32": ("matmul", "moe", "fp32"),
    "fp8_w8a8": ("matmul", "moe", "fp8"),  # fp8 x fp8: a matmul, as `classify` reads a live one
    "int8_w8a8": ("quantized_matmul", "int8", "int8"),
    "int8_w8a16": ("quantized_matmul", "int8", "int8"),
    "int4_w4a16": ("quantized_matmul", "int4", "int4"),
    "int4_w4a8": ("quantized_matmul", "int4", "int4"),
    "mxfp4_w4a4": ("quantized_matmul", "fp4", "fp4"),
    "nvfp4_w4a4": ("quantized_matmul", "fp4", "fp4"),
    "int16_w16a16": ("quantized_matmul", "int16", "int16"),
}

_NAME_RE = re.compile(r"^E=(?P<E>\d+),N=(?P<N>\d+),device_name=(?P<device>[^,]+)(?P<rest>.*)\.json$")


def parse_filename(name: str) -> dict[str, Any]:
    """E, N, device_name, dtype, block_shape (and any other `,key=value` selector) of a vLLM
    config file name."""
    m = _NAME_RE.match(os.path.basename(name))
    if not m:
        raise AbductuneError(f"{name}: not a vLLM fused-MoE config file name (expected "
                             "E=<experts>,N=<size>,device_name=<gpu>[,dtype=...][,block_shape=[n,k]].json)")
    out: dict[str, Any] = {"E": int(m["E"]), "N": int(m["N"]), "device_name": m["device"],
                           "dtype": None, "block_shape": None, "extra": []}
    rest = m["rest"]
    pos = 0
    tok = re.compile(r",([a-zA-Z_]+)=(\[[^\]]*\]|[^,\[]*)")
    while True:
        t = tok.match(rest, pos)
        if not t:
            break
        k, v = t.group(1), t.group(2)
        if k == "dtype" and out["dtype"] is None:
            out["dtype"] = v
        elif k == "block_shape" and out["block_shape"] is None:
            out["block_shape"] = [int(x) for x in v.strip("[]").split(",") if x.strip()]
        else:
            out["extra"].append(f"{k}={v}")
        pos = t.end()
    if pos < len(rest):  # e.g. sglang's "_down": kept verbatim, after the selectors
        out["suffix"] = rest[pos:]
    return out


def filename(E: int, N: int, device_name: str, dtype: str | None = None,
             block_shape: Iterable[int] | None = None, extra: Iterable[str] = (), suffix: str = "") -> str:
    """vLLM's `get_config_file_name` (plus verbatim extra selectors / suffix)."""
    sel = f",dtype={dtype}" if dtype else ""
    bs = list(block_shape) if block_shape else []
    if bs and all(bs):
        sel += f",block_shape=[{','.join(str(int(b)) for b in bs)}]"
    sel += "".join("," + e for e in extra)
    return f"E={E},N={N},device_name={device_name}{sel}{suffix}.json"


def _hardware_key(device_name: str) -> str:
    hw = lookup(device_name.replace("_", " "), strict=False)
    return hw.name if hw is not None else device_name


def to_template(config: Mapping[str, Any]) -> dict[str, Any]:
    return {VLLM_TO_ROLE.get(k, k): v for k, v in config.items()}


def from_template(config: Mapping[str, Any], order: Iterable[str] | None = None) -> dict[str, Any]:
    out = {ROLE_TO_VLLM.get(k, k.lstrip("@")): v for k, v in config.items()}
    keys = list(order or [])
    ordered = [k for k in keys if k in out] + [k for k in _ORDER if k in out and k not in keys] + \
        sorted(k for k in out if k not in keys and k not in _ORDER)
    return {k: out[k] for k in ordered}


def read_json_object(path: Path) -> dict[str, Any]:
    """A vLLM config file's JSON object (batch size -> config, and any other keys); one clear
    error for a missing file, bad JSON or another kind of value."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AbductuneError(f"vLLM config file {path} does not exist") from None
    except json.JSONDecodeError as e:
        raise AbductuneError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(obj, dict):
        raise AbductuneError(f"{path}: expected a JSON object of batch size -> config")
    return obj


def import_vllm(paths: Iterable[str | os.PathLike[str]], database: Database | None = None) -> Database:
    """Add one exact rule per (file, batch size); folders are searched for `E=*.json`."""
    db = database if database is not None else Database()
    files: list[Path] = []
    for p in paths:
        p = Path(p)
        files += sorted(p.glob("E=*.json")) if p.is_dir() else [p]
    if not files:
        raise AbductuneError("no vLLM config files given (E=...,N=...,device_name=....json)")
    for f in files:
        info = parse_filename(f.name)
        obj = read_json_object(f)
        dtype = info["dtype"]
        kclass, variant, fam = _DTYPES.get(dtype, ("quantized_matmul", "", dtype or "fp16"))
        if kclass == "quantized_matmul" and not variant:
            variant = fam
        file_extra = {k: v for k, v in obj.items() if not _is_batch(k)}
        for key, cfg in obj.items():
            if not _is_batch(key):
                continue
            if not isinstance(cfg, dict):
                raise AbductuneError(f"{f}: batch size {key} maps to {cfg!r}, not a config")
            src = {"file": f.name, "E": info["E"], "N": info["N"], "device_name": info["device_name"],
                   "dtype": dtype, "block_shape": info["block_shape"], "batch_size": int(key),
                   "keys": list(cfg)}
            for k in ("extra", "suffix"):
                if info.get(k):
                    src[k] = info[k]
            if file_extra:
                src["file_extra"] = file_extra
            db.add(Rule(kernel_class=kclass, variant=variant, dtype_family=fam,
                        bucket=f"vllm:E={info['E']},N={info['N']},M={int(key)}",
                        hardware=_hardware_key(info["device_name"]),
                        exact={"E": info["E"], "N": info["N"], "M": int(key)},
                        templates=[Template(to_template(cfg), wins=1, coverage=1.0, shapes=1)],
                        source={"vllm": src}))
    return db


def _is_batch(key: str) -> bool:
    return isinstance(key, str) and key.strip().isdigit()


def export_vllm(database: Database, out_dir: str | os.PathLike[str], *,
                hardware: str | None = None, device_name: str | None = None) -> list[Path]:
    """Write every rule with exact E, N and M dims (imported or harvested) as vLLM files,
    grouped by file; `hardware` keeps only rules of that hardware key, `device_name` names the
    GPU for rules that were not imported from vLLM (default: the rule's hardware key)."""
    groups: dict[str, dict[str, Any]] = {}
    for r in database:
        if hardware is not None and r.hardware != hardware:
            continue
        if not r.exact or not {"E", "N", "M"} <= set(r.exact) or not r.templates:
            continue
        src = dict(r.source.get("vllm") or {})
        if src:
            name = filename(src["E"], src["N"], src["device_name"], src.get("dtype"),
                            src.get("block_shape"), src.get("extra", ()), src.get("suffix", ""))
        else:
            dev = (device_name or r.hardware).replace(" ", "_")
            dtype = None if r.kernel_class == "matmul" and r.dtype_family == "fp16" else \
                next((k for k, v in _DTYPES.items() if k and v[2] == r.dtype_family), None)
            name = filename(r.exact["E"], r.exact["N"], dev, dtype)
        g = groups.setdefault(name, {"extra": dict(src.get("file_extra") or {}), "configs": {}})
        g["configs"][int(r.exact["M"])] = from_template(r.templates[0].config, src.get("keys"))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, g in sorted(groups.items()):
        obj: dict[str, Any] = dict(g["extra"])
        for bs in sorted(g["configs"]):
            obj[str(bs)] = g["configs"][bs]
        path = out / name
        tmp = path.with_suffix(".json.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(obj, fh, indent=4)
            fh.write("\n")
        os.replace(tmp, path)
        written.append(path)
    return written
