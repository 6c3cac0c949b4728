"""Import Kernel Tuner cache files (`.json` or `.json.gz`) as abductune datasets.

A Kernel Tuner cache is one JSON object:

    {"device_name": ..., "kernel_name": ..., "problem_size": [...] | int,
     "tune_params_keys": [names in order], "tune_params": {name: [values]},
     "objective": "time" (sometimes absent), "cache": {"v1,v2,...": record}}

Each record holds the parameter values, `time` (mean of `times` in ms, or a failure string),
`times` (the samples, ms) and `compile_time`, `verification_time`, `benchmark_time`,
`framework_time`, `strategy_time` (ms). Conventions of this importer:

- `time_ms` is Kernel Tuner's `time`, the **mean** of the samples (not their median, which
  is what our live evaluator reports); `samples_ms` are the `times`.
- Failure strings: `CompilationFailedConfig` -> `compile_error`, `RuntimeFailedConfig` ->
  `runtime_error`, `InvalidConfig` -> `pruned`; any other ErrorConfig class name (`...Config`),
  and the `1e20` that old Kernel Tuner versions wrote for failures, -> `runtime_error`. Any
  other `time` (negative, zero, NaN, infinite, other text) and any such sample in `times` is
  refused (DatasetError naming the file and the config key): it would be replayed as a time.
- Cost, as Kernel Tuner accounts it: `compile_s = compile_time / 1000` and
  `bench_s = (benchmark_time + verification_time + framework_time) / 1000`. `strategy_time`
  is left out: it is the cost of the search strategy that recorded the data, not of the
  config. Failed configs keep their recorded times, so a replayed failure still costs its
  compile time (plus the little framework time it took). A missing time field counts as 0.
- The space has one `Choice` per tuning parameter with the values as listed (ordered when all
  are numbers) and `restricted_to_records=True`: a cache holds only configs that pass Kernel
  Tuner's restrictions, which are Python code we cannot recover, so the valid set is the
  recorded one.
- An unclosed cache (a tuning run that was interrupted: no final `}}`) is read the way Kernel
  Tuner reads it, by closing it; a cache cut inside a record is an error.
"""
from __future__ import annotations

import gzip
import json
import logging
import math
import re
import zlib
from pathlib import Path
from typing import Any, Mapping

from ..classify import guess_kernel_class  # noqa: F401 (t4.py imports it from here)
from ..errors import DatasetError
from ..hardware import KNOWN_GPUS, HardwareInfo, candidates, lookup
from ..measurement import Measurement
from ..problem import KERNEL_CLASSES, Problem
from ..space import Choice, Space
from .format import Dataset, check_times

log = logging.getLogger(__name__)

FAILURES = {
    "CompilationFailedConfig": "compile_error",
    "RuntimeFailedConfig": "runtime_error",
    "InvalidConfig": "pruned",
}

# Kernel Tuner writes a failed config's `time` as the name of its ErrorConfig class
_FAILURE_NAME = re.compile(r"[A-Z][A-Za-z]*Config")

_TIME_FIELDS = ("time", "times", "compile_time", "verification_time", "benchmark_time",
                "framework_time", "strategy_time", "timestamp")

_DIM_NAMES = ("x", "y", "z")


def guess_vendor(device_name: str) -> str:
    if re.search(r"AMD|Radeon|Instinct|\bMI\d|gfx\d", device_name, re.IGNORECASE):
        return "amd"
    if re.search(r"NVIDIA|GeForce|RTX|GTX|TITAN|Tesla|Quadro|\b[AHBLTV]\d{2,3}\b",
                 device_name, re.IGNORECASE):
        return "nvidia"
    if re.search(r"Intel|Arc\b", device_name, re.IGNORECASE):
        return "intel"
    return "unknown"


def resolve_hardware(device_name: str, fallback: str) -> HardwareInfo:
    """The known GPU matching `device_name` (or, when the file names none, `fallback`: the
    file stem, e.g. "MI250X"), else a bare HardwareInfo named after it. A name that does not
    say which variant it is ("A100") is not guessed: it gives a bare HardwareInfo."""
    name = device_name or fallback
    hw = lookup(name, strict=False) if name else None
    if hw is not None:
        return hw
    if name and candidates(name):
        log.info("%r does not say which variant it is (%s); no hardware peaks are used", name,
                 ", ".join(candidates(name)))
    return HardwareInfo(name=name, vendor=guess_vendor(name))


def file_stem(path: str | Path) -> str:
    base = Path(path).name
    for ext in (".gz", ".json", ".jsonl"):
        base = base.removesuffix(ext)
    return base


# ------------------------------------------------------------------------ reading JSON

def read_json(path: str | Path, *, allow_unclosed: bool = False) -> Any:
    """Parse a whole `.json` / `.json.gz` file. Every failure (missing file, truncated gzip,
    bad UTF-8, bad JSON) is a DatasetError naming the file and the line. With
    `allow_unclosed`, an object cut right after a complete entry is closed the way Kernel
    Tuner closes an interrupted cache file."""
    path = str(path)
    chunks: list[bytes] = []
    try:
        opener = gzip.open if _is_gzip(path) else open
        with opener(path, "rb") as f:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
    except FileNotFoundError:
        raise DatasetError(f"dataset file {path} does not exist") from None
    except IsADirectoryError:
        raise DatasetError(f"{path} is a directory, not a dataset file") from None
    except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as e:
        line = sum(c.count(b"\n") for c in chunks) + 1
        raise DatasetError(f"{path}:{line}: cannot read ({e or type(e).__name__}); the file is "
                           "corrupt or truncated") from None
    raw = b"".join(chunks)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise DatasetError(f"{path}:{line}: not UTF-8 text ({e.reason}); the file is corrupt") from None
    if not text.strip():
        raise DatasetError(f"{path}: empty file, expected a JSON object")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        if allow_unclosed:
            closed = _close_unclosed(text)
            if closed is not None:
                try:
                    return json.loads(closed)
                except json.JSONDecodeError:
                    pass
        raise DatasetError(f"{path}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno}); "
                           "the file is corrupt or truncated") from None


def _is_gzip(path: str) -> bool:
    if path.endswith(".gz"):
        return True
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"\x1f\x8b"
    except OSError:
        return False


def _close_unclosed(text: str) -> str | None:
    """Kernel Tuner appends one record per line while tuning and closes the object at the end;
    an interrupted run leaves `...}` or `...},` at the end. Close it like Kernel Tuner does."""
    s = text.rstrip()
    if not s.endswith(("}", "},")):
        return None
    return s.rstrip(",") + "\n}\n}"


# ---------------------------------------------------------------------------- import

def import_kernel_tuner(path: str | Path, *, kernel_class: str | None = None,
                        dims: Mapping[str, int] | None = None,
                        hardware: HardwareInfo | str | None = None,
                        dtypes: Mapping[str, str] | None = None,
                        kernel: str | None = None) -> Dataset:
    """Read a Kernel Tuner cache file into a Dataset (see the module docstring for the
    conventions). Overrides: `kernel_class` (default: guessed from the kernel name), `dims`
    (default: `problem_size` as x, y, z), `hardware` (a HardwareInfo or a name to look up;
    default: looked up from `device_name`, else named after it or the file stem), `dtypes`,
    `kernel` (the kernel name)."""
    obj = read_json(path, allow_unclosed=True)
    return from_cache_dict(obj, path=path, kernel_class=kernel_class, dims=dims,
                           hardware=hardware, dtypes=dtypes, kernel=kernel)


def from_cache_dict(obj: Any, *, path: str | Path = "<kernel tuner cache>",
                    kernel_class: str | None = None, dims: Mapping[str, int] | None = None,
                    hardware: HardwareInfo | str | None = None,
                    dtypes: Mapping[str, str] | None = None, kernel: str | None = None) -> Dataset:
    """Build a Dataset from an already parsed Kernel Tuner cache object."""
    where = str(path)
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: not a Kernel Tuner cache (expected a JSON object, got "
                           f"{type(obj).__name__})")
    for k in ("tune_params", "cache"):
        if k not in obj:
            raise DatasetError(f"{where}: not a Kernel Tuner cache: missing key {k!r}")
    tune_params = obj["tune_params"]
    cache = obj["cache"]
    if not isinstance(tune_params, dict) or not tune_params:
        raise DatasetError(f"{where}: key 'tune_params' must be a non-empty object of name -> values")
    if not isinstance(cache, dict):
        raise DatasetError(f"{where}: key 'cache' must be an object of config key -> record")
    names = list(obj.get("tune_params_keys") or tune_params)
    missing = [n for n in names if n not in tune_params]
    if missing:
        raise DatasetError(f"{where}: key 'tune_params' lacks parameter(s) {', '.join(missing)} "
                           "listed in 'tune_params_keys'")
    kname = kernel or obj.get("kernel_name") or file_stem(where)

    try:
        params = [Choice(n, _as_values(tune_params[n], n, where)) for n in names]
        space = Space(params, name=str(kname))
    except (DatasetError, ValueError) as e:  # SpaceError is a ValueError
        raise DatasetError(f"{where}: key 'tune_params' does not describe a space: {e}") from None
    by_text = [{_key_text(v): v for v in p.values} for p in space.params]

    records: list[Measurement] = []
    for key, rec in cache.items():
        if not isinstance(rec, dict):
            raise DatasetError(f"{where}: cache entry {key!r} is not an object")
        records.append(_record(key, rec, names, space, by_text, where))

    problem = Problem(kernel=str(kname),
                      kernel_class=_check_class(kernel_class or guess_kernel_class(str(kname)), where),
                      dims=_check_dims(dims, where) if dims is not None else _dims(obj.get("problem_size")),
                      dtypes=dict(dtypes or {}),
                      hardware=_hardware(hardware, str(obj.get("device_name") or ""), file_stem(where)))
    objective = obj.get("objective", "time")
    toolchain = {"tuner": "kernel_tuner", "device_name": obj.get("device_name", ""),
                 "objective": objective}
    for k in ("schema_version", "kernel_string", "objective_higher_is_better"):
        if k in obj and isinstance(obj[k], (str, int, float, bool)):
            toolchain[k] = obj[k]
    note = ("imported from a Kernel Tuner cache; time_ms is the mean of samples; "
            "bench_s = benchmark + verification + framework time")
    if not isinstance(obj.get("problem_size"), list) and dims is None:
        note += f"; problem_size {obj.get('problem_size')!r}"
    return Dataset(problem, space.to_dict(), records, toolchain, restricted_to_records=True,
                   source=f"kernel_tuner:{Path(where).name}", note=note, path=where)


def _as_values(vals: Any, name: str, where: str) -> list[Any]:
    if not isinstance(vals, list) or not vals:
        raise DatasetError(f"{where}: tune_params[{name!r}] must be a non-empty list of values")
    out = []
    for v in vals:
        if isinstance(v, list):  # JSON has no tuples; keep values hashable
            v = tuple(v)
        out.append(v)
    return out


def _key_text(v: Any) -> str:
    return str(v)


def _record(key: str, rec: dict[str, Any], names: list[str], space: Space,
            by_text: list[dict[str, Any]], where: str) -> Measurement:
    try:  # fast path: every value present, hashable and in its domain
        cfg = {n: rec[n] for n in names}
        if not all(p.contains(cfg[p.name]) for p in space.params):
            cfg = _slow_config(key, rec, names, space, by_text, where)
    except (KeyError, TypeError):
        cfg = _slow_config(key, rec, names, space, by_text, where)
    if "time" not in rec:
        raise DatasetError(f"{where}: cache entry {key!r} lacks key 'time'")
    t = rec["time"]
    compile_s = _num(rec, "compile_time", key, where) / 1000.0
    bench_s = (_num(rec, "benchmark_time", key, where) + _num(rec, "verification_time", key, where)
               + _num(rec, "framework_time", key, where)) / 1000.0
    extra = {k: v for k, v in rec.items()
             if k not in cfg and k not in _TIME_FIELDS and type(v) in (int, float)}
    if isinstance(t, str) and (t in FAILURES or _FAILURE_NAME.fullmatch(t)):
        return Measurement(cfg, FAILURES.get(t, "runtime_error"), compile_s=compile_s,
                           bench_s=bench_s, error=t, extra=extra)
    if isinstance(t, (int, float)) and not isinstance(t, bool) and t >= 1e20 and math.isfinite(t):
        return Measurement(cfg, "runtime_error", compile_s=compile_s, bench_s=bench_s,
                           error=f"recorded time {t!r} (failure marker)", extra=extra)
    # a successful record: its time and samples must be positive milliseconds (a negative,
    # zero, NaN, infinite or text time would be replayed as the optimum, or crash the score)
    samples = rec.get("times") or []
    check_times(t, samples, f"{where}: cache entry {key!r}", field="'time'", samples_field="'times'",
                samples_suffice=False)
    return Measurement(cfg, "ok", time_ms=float(t), samples_ms=list(samples), compile_s=compile_s,
                       bench_s=bench_s, extra=extra)


def _slow_config(key: str, rec: dict[str, Any], names: list[str], space: Space,
                 by_text: list[dict[str, Any]], where: str) -> dict[str, Any]:
    """The config of a record whose values are missing (old caches: parse the key "v1,v2,..."),
    lists (made tuples) or outside the domain (an error)."""
    cfg: dict[str, Any] = {}
    parts: list[str] | None = None
    for i, (n, p) in enumerate(zip(names, space.params)):
        if n in rec:
            v = rec[n]
            if isinstance(v, list):
                v = tuple(v)
            if not p.contains(v):
                raise DatasetError(f"{where}: cache entry {key!r}: value {v!r} of {n!r} is not "
                                   f"one of tune_params[{n!r}] {list(p.values)}")
        else:
            if parts is None:
                parts = str(key).split(",")
                if len(parts) != len(names):
                    raise DatasetError(f"{where}: cache entry {key!r} lacks parameter {n!r} and its "
                                       f"key does not have {len(names)} comma-separated values")
            try:
                v = by_text[i][parts[i].strip()]
            except KeyError:
                raise DatasetError(f"{where}: cache entry {key!r}: value {parts[i]!r} of {n!r} is "
                                   f"not one of tune_params[{n!r}]") from None
        cfg[n] = v
    return cfg


def _num(rec: Mapping[str, Any], k: str, key: str, where: str) -> float:
    v = rec.get(k)
    if type(v) is float:
        return v if math.isfinite(v) else 0.0
    if v is None:
        return 0.0
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise DatasetError(f"{where}: cache entry {key!r}: {k!r} is {v!r}, expected milliseconds")
    return float(v) if math.isfinite(v) else 0.0


def _dims(problem_size: Any) -> dict[str, int]:
    if isinstance(problem_size, bool):
        return {}
    if isinstance(problem_size, int):
        return {"x": problem_size}
    if isinstance(problem_size, list) and len(problem_size) <= len(_DIM_NAMES) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in problem_size):
        return dict(zip(_DIM_NAMES, problem_size))
    return {}


def _check_class(kc: str, where: str) -> str:
    if kc not in KERNEL_CLASSES:
        raise DatasetError(f"{where}: unknown kernel_class {kc!r}; known kernel classes: "
                           f"{', '.join(KERNEL_CLASSES)}")
    return kc


def _check_dims(dims: Mapping[str, int], where: str) -> dict[str, int]:
    """Problem dimensions given by a user: names to non-negative integers."""
    if not isinstance(dims, Mapping):
        raise DatasetError(f"{where}: dims must map names to integers, like {{'M': 64, 'N': 4096}}")
    out = {}
    for k, v in dims.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise DatasetError(f"{where}: dimension name {k!r} is not a name; write dims like M=64,N=4096")
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise DatasetError(f"{where}: dimension {k}={v!r} must be a non-negative integer")
        out[k] = v
    return out


def _hardware(hw: HardwareInfo | str | None, device_name: str, stem: str) -> HardwareInfo:
    """The hardware of an imported file: `hw` when given (a HardwareInfo, or a name looked up
    in the table), else what the file's device name (or its stem) says.

    A given name that does not say which variant it is ("A100") takes the variant the file's
    own device name names ("NVIDIA A100-PCIE-40GB"), with a logged note; when the file does
    not settle it, AbductuneError lists the variants. A given name the table does not know
    becomes a bare HardwareInfo (no peaks), with a warning listing the known GPUs."""
    if isinstance(hw, HardwareInfo):
        return hw
    if isinstance(hw, str):
        if not hw.strip():
            raise DatasetError("hardware name is empty; give a GPU name such as 'RTX 3090'")
        found = candidates(hw)
        if len(found) == 1:
            return KNOWN_GPUS[found[0]]
        if found:
            named = [k for k in (candidates(device_name) if device_name else ())
                     + (candidates(stem) if stem else ()) if k in found]
            if len(set(named)) == 1:
                log.info("hardware %r taken as %s, the variant the file's device name %r names",
                         hw, named[0], device_name or stem)
                return KNOWN_GPUS[named[0]]
            lookup(hw)  # ambiguous and not settled by the file: raises, listing the variants
        log.warning("GPU %r is not in the hardware table (known GPUs: %s); its peaks are "
                    "unknown, so nothing hardware-specific applies", hw, ", ".join(KNOWN_GPUS))
        return HardwareInfo(name=hw, vendor=guess_vendor(hw))
    return resolve_hardware(device_name, stem)
