"""Import and export the T4 community format for auto-tuning results.

T4 (schema_version 1.0.0) is one JSON object (`.json` or `.json.gz`):

    {"schema_version": "1.0.0", "metadata": {"timeunit": "milliseconds", ...},
     "results": [{"configuration": {...}, "objectives": ["time"],
                  "times": {"compilation_time" | "compilation": t, "runtimes": [t, ...],
                            "framework": t, "search_algorithm": t, "validation": t},
                  "invalidity": "correct" | "compile" | "runtime" | "correctness"
                                | "constraints" | "timeout",
                  "correctness": 0 | 1,
                  "measurements": [{"name": ..., "value": ..., "unit": ...}, ...]}, ...]}

Conventions of this importer:

- Units. Times are in `timeunit`: the `timeunit=` argument if given, else
  `metadata.timeunit`, else the unit of the objective's measurement (KTT writes
  "Microseconds" there and has no metadata), else **milliseconds** (what Kernel Tuner writes).
  A measurement with its own recognised unit is converted with that unit.
- `time_ms` is the objective measurement (`objectives[0]`, default "time") when it is a
  number, else the mean of `runtimes`; `samples_ms` are the `runtimes`.
- Invalidity: correct -> ok, compile -> compile_error, runtime -> runtime_error,
  correctness -> wrong_result, constraints -> pruned, timeout -> timeout.
- Cost: `compile_s` is the compilation time; `bench_s` is the benchmark time (our extension
  key `times.benchmark` when present, else the sum of `runtimes`) plus `framework` and
  `validation`. `search_algorithm` is left out: it is the recording tuner's cost, not the
  config's (the same choice as the Kernel Tuner importer).
- Measurements named registers / spills / smem_bytes fill those fields; other numeric
  measurements (e.g. KTT's profiler counters) go to `extra`.
- The space has one `Choice` per configuration key with the values seen, and
  `restricted_to_records=True` (T4 does not carry the space's restrictions).

`export_t4` writes a valid T4 file and keeps what T4 cannot say in extension keys that T4
readers ignore: `metadata.abductune` (our dataset header: problem, hardware, space),
`times.benchmark`, and a per-result `abductune` object with the status when T4's invalidity
cannot express it (resource_error) and the error text. So export then import gives back the
same problem, space, configs, statuses, times and costs.
"""
from __future__ import annotations

import gzip
import json
import math
import os
import statistics
from pathlib import Path
from typing import Any, Mapping

from ..errors import DatasetError
from ..files import atomic_writer
from ..hardware import HardwareInfo
from ..measurement import Measurement
from ..problem import Problem
from ..space import Choice, Space
from .format import Dataset, check_times, screen_records
from .kernel_tuner import (_check_class, _check_dims, _hardware, file_stem, guess_kernel_class,
                           read_json, resolve_hardware)

SCHEMA_VERSION = "1.0.0"

INVALIDITY = {
    "correct": "ok",
    "compile": "compile_error",
    "runtime": "runtime_error",
    "correctness": "wrong_result",
    "constraints": "pruned",
    "timeout": "timeout",
}
_INVALIDITY_OF = {v: k for k, v in INVALIDITY.items()} | {"resource_error": "compile"}
_FAILURE_TEXT = {"compile_error": "CompilationFailedConfig", "runtime_error": "RuntimeFailedConfig",
                 "pruned": "InvalidConfig"}

# unit name (lower case) -> milliseconds per unit
_UNITS = {
    "ns": 1e-6, "nanosecond": 1e-6, "nanoseconds": 1e-6,
    "us": 1e-3, "µs": 1e-3, "μs": 1e-3, "microsecond": 1e-3, "microseconds": 1e-3,
    "ms": 1.0, "millisecond": 1.0, "milliseconds": 1.0, "milisecond": 1.0, "miliseconds": 1.0,
    "s": 1000.0, "sec": 1000.0, "second": 1000.0, "seconds": 1000.0,
}
_STATIC = ("registers", "spills", "smem_bytes")


def unit_ms(unit: str) -> float | None:
    """Milliseconds per `unit` ("microseconds" -> 0.001), None if the name is unknown."""
    return _UNITS.get(str(unit).strip().lower())


def is_t4(obj: Any) -> bool:
    """Does a parsed JSON object look like a T4 results file?"""
    if not isinstance(obj, dict) or not isinstance(obj.get("results"), list):
        return False
    if "schema_version" in obj:
        return True
    first = obj["results"][0] if obj["results"] else None
    return isinstance(first, dict) and "configuration" in first


# ---------------------------------------------------------------------------- import

def import_t4(path: str | Path, *, timeunit: str | None = None, kernel: str | None = None,
              kernel_class: str | None = None, dims: Mapping[str, int] | None = None,
              hardware: HardwareInfo | str | None = None,
              dtypes: Mapping[str, str] | None = None) -> Dataset:
    """Read a T4 file into a Dataset (see the module docstring for the conventions).
    Overrides: `timeunit`, `kernel` (default: from our export header, else the file stem),
    `kernel_class` (default: guessed from the kernel name), `dims`, `hardware` (a
    HardwareInfo or a device name to look up), `dtypes`."""
    return from_t4_dict(read_json(path), path=path, timeunit=timeunit, kernel=kernel,
                        kernel_class=kernel_class, dims=dims, hardware=hardware, dtypes=dtypes)


def from_t4_dict(obj: Any, *, path: str | Path = "<T4>", timeunit: str | None = None,
                 kernel: str | None = None, kernel_class: str | None = None,
                 dims: Mapping[str, int] | None = None, hardware: HardwareInfo | str | None = None,
                 dtypes: Mapping[str, str] | None = None) -> Dataset:
    """Build a Dataset from an already parsed T4 object."""
    where = str(path)
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: not a T4 file (expected a JSON object, got {type(obj).__name__})")
    results = obj.get("results")
    if not isinstance(results, list):
        raise DatasetError(f"{where}: not a T4 file: missing key 'results' (a list)")
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict):
        raise DatasetError(f"{where}: key 'metadata' must be an object")
    for i, r in enumerate(results):
        if not isinstance(r, dict):
            raise DatasetError(f"{where}: results[{i}] is not an object")
        if not isinstance(r.get("configuration"), dict):
            raise DatasetError(f"{where}: results[{i}] lacks key 'configuration' (an object)")
        if "invalidity" not in r:
            raise DatasetError(f"{where}: results[{i}] lacks key 'invalidity'")
        if not isinstance(r.get("times", {}), dict):
            raise DatasetError(f"{where}: results[{i}]: key 'times' must be an object")

    scale = _resolve_unit(timeunit, meta, results, where)
    head = meta.get("abductune") if isinstance(meta.get("abductune"), dict) else None

    # -- the space
    if head is not None and isinstance(head.get("space"), dict):
        try:
            # JSON turned tuple values into lists: make them tuples again
            space_dict = {**head["space"], "params": [
                {**p, "values": [_hashable(v) for v in p["values"]]} for p in head["space"]["params"]]}
            space = Space.from_dict(space_dict)
        except (ValueError, TypeError, KeyError) as e:
            raise DatasetError(f"{where}: metadata.abductune.space is malformed ({e})") from None
        restricted = bool(head.get("restricted_to_records", True))
        from_records = bool(head.get("values_from_records"))
    else:
        space = _space_from_results(results, where, kernel or _default_kernel(meta, where))
        space_dict = space.to_dict()
        restricted = True
        from_records = True
    names = space.names

    records = [_record(i, r, names, scale, where) for i, r in enumerate(results)]
    dropped: dict[str, int] = {}
    if head is not None:
        # a space from our own header may reject configs the results hold: drop those
        records, dropped = screen_records(records, space_dict, where)

    # -- the problem
    if head is not None and isinstance(head.get("problem"), dict):
        try:
            pd = dict(head["problem"])
            pd["hardware"] = head.get("hardware")
            base = Problem.from_dict(pd)
        except (KeyError, TypeError, ValueError) as e:
            raise DatasetError(f"{where}: metadata.abductune.problem is malformed ({e})") from None
    else:
        kname = _default_kernel(meta, where)
        base = Problem(kernel=kname, kernel_class=guess_kernel_class(kname),
                       hardware=resolve_hardware(_device_name(meta), file_stem(where).removesuffix("_T4")))
    problem = Problem(
        kernel=kernel or base.kernel,
        kernel_class=_check_class(kernel_class, where) if kernel_class else
        (base.kernel_class if head is not None or kernel is None else guess_kernel_class(kernel)),
        dims=_check_dims(dims, where) if dims is not None else dict(base.dims),
        dtypes=dict(dtypes) if dtypes is not None else dict(base.dtypes),
        flops=base.flops, min_bytes=base.min_bytes,
        hardware=(_hardware(hardware, _device_name(meta) or (base.hardware.name if base.hardware
                                                               else ""), file_stem(where))
                  if hardware is not None else base.hardware),
        source_hash=base.source_hash)
    toolchain = dict(head.get("toolchain") or {}) if head else {}
    toolchain.setdefault("t4_schema_version", str(obj.get("schema_version", "")))
    return Dataset(problem, space_dict, records, toolchain, restricted_to_records=restricted,
                   source=(head.get("source") if head and head.get("source") else
                           f"t4:{Path(where).name}"),
                   note=(head.get("note", "") if head else
                         "imported from T4; bench_s = sum(runtimes) + framework + validation"),
                   path=where, dropped=dropped, values_from_records=from_records)


def _default_kernel(meta: Mapping[str, Any], where: str) -> str:
    for k in ("kernel_name", "kernel"):
        if isinstance(meta.get(k), str) and meta[k]:
            return meta[k]
    return file_stem(where).removesuffix("_T4").removesuffix("-T4")


def _device_name(meta: Mapping[str, Any]) -> str:
    for get in (lambda m: m.get("device_name"), lambda m: m.get("device"),
                lambda m: (m.get("hardware") or {}).get("device_name"),
                lambda m: ((m.get("environment") or {}).get("device_query") or {}).get("name")):
        try:
            v = get(meta)
        except AttributeError:
            continue
        if isinstance(v, str) and v:
            return v
    return ""


def _resolve_unit(timeunit: str | None, meta: Mapping[str, Any], results: list[dict[str, Any]],
                  where: str) -> float:
    if timeunit is not None:
        s = unit_ms(timeunit)
        if s is None:
            raise DatasetError(f"unknown timeunit {timeunit!r}; one of {', '.join(sorted(_UNITS))}")
        return s
    if meta.get("timeunit"):
        s = unit_ms(meta["timeunit"])
        if s is None:
            raise DatasetError(f"{where}: metadata.timeunit {meta['timeunit']!r} is not a unit "
                               f"this importer knows ({', '.join(sorted(_UNITS))}); pass timeunit=")
        return s
    for r in results:
        obj = _objective_name(r)
        for m in r.get("measurements") or []:
            if isinstance(m, dict) and m.get("name") == obj:
                s = unit_ms(m.get("unit", ""))
                if s is not None:
                    return s
    return 1.0  # milliseconds, Kernel Tuner's unit


def _objective_name(r: Mapping[str, Any]) -> str:
    objs = r.get("objectives")
    if isinstance(objs, list) and objs and isinstance(objs[0], str):
        return objs[0]
    return "time"


def _hashable(v: Any) -> Any:
    return tuple(_hashable(x) for x in v) if isinstance(v, list) else v


def _space_from_results(results: list[dict[str, Any]], where: str, name: str) -> Space:
    if not results:
        raise DatasetError(f"{where}: T4 file has no results, so no space can be built")
    values: dict[str, dict[Any, None]] = {}
    for r in results:
        for k, v in r["configuration"].items():
            values.setdefault(k, {})[_hashable(v)] = None
    try:
        return Space([Choice(k, list(vs)) for k, vs in values.items()], name=name)
    except (ValueError, TypeError) as e:
        raise DatasetError(f"{where}: configurations do not describe a space: {e}") from None


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _record(i: int, r: Mapping[str, Any], names: tuple[str, ...], scale: float,
            where: str) -> Measurement:
    conf = r["configuration"]
    missing = [n for n in names if n not in conf]
    if missing:
        raise DatasetError(f"{where}: results[{i}] configuration lacks {', '.join(missing)}")
    cfg = {n: _hashable(conf[n]) for n in names}
    inv = r["invalidity"]
    if inv not in INVALIDITY:
        raise DatasetError(f"{where}: results[{i}]: invalidity {inv!r} is not one of "
                           f"{', '.join(INVALIDITY)}")
    ext = r.get("abductune") if isinstance(r.get("abductune"), dict) else {}
    status = ext.get("status") or INVALIDITY[inv]
    times = r.get("times") or {}

    def t(key: str) -> float:
        v = _num(times.get(key))
        return 0.0 if v is None else v

    compile_ms = (t("compilation_time") if "compilation_time" in times else t("compilation")) * scale
    runtimes = times.get("runtimes") or []
    if not isinstance(runtimes, list):
        raise DatasetError(f"{where}: results[{i}]: times.runtimes must be a list")
    objective = _objective_name(r)
    if status == "ok":  # a correct result's time and runtimes must be positive milliseconds
        raw = next((m.get("value") for m in r.get("measurements") or []
                    if isinstance(m, dict) and m.get("name") == objective), None)
        check_times(raw, runtimes, f"{where}: results[{i}]", field=f"measurement {objective!r}",
                    samples_field="times.runtimes")
    samples = [x * scale for x in (_num(v) for v in runtimes) if x is not None]
    bench = t("benchmark") * scale if "benchmark" in times else sum(samples)
    bench_ms = bench + (t("framework") + t("validation")) * scale

    time_ms: float | None = None
    static: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for m in r.get("measurements") or []:
        if not isinstance(m, dict):
            continue
        name, value = m.get("name"), m.get("value")
        if name == objective:
            v = _num(value)
            if v is not None:
                u = unit_ms(m.get("unit", "") or "")
                time_ms = v * (u if u is not None else scale)
        elif name in _STATIC and _num(value) is not None:
            static[name] = int(value)
        elif isinstance(name, str) and _num(value) is not None:
            extra[name] = value
    if status == "ok" and time_ms is None and samples:
        time_ms = statistics.fmean(samples)
    if status != "ok":
        time_ms = None
    error = ext.get("error") or ("" if status == "ok" else f"T4 invalidity {inv!r}")
    try:
        return Measurement(cfg, status, time_ms=time_ms, samples_ms=samples if status == "ok" else [],
                           compile_s=compile_ms / 1000.0, bench_s=bench_ms / 1000.0, error=error,
                           extra=extra, **static)
    except ValueError as e:
        raise DatasetError(f"{where}: results[{i}]: {e}") from None


# ---------------------------------------------------------------------------- export

def to_t4_dict(ds: Dataset) -> dict[str, Any]:
    """The T4 object for a dataset (times in milliseconds)."""
    head = ds.header()
    head.pop("format", None)
    head.pop("version", None)
    results = []
    for m in ds.records:
        meas: list[dict[str, Any]] = [{
            "name": "time",
            "value": m.time_ms if m.ok else _FAILURE_TEXT.get(m.status, m.status),
            "unit": "milliseconds"}]
        for k in _STATIC:
            v = getattr(m, k)
            if v is not None:
                meas.append({"name": k, "value": v, "unit": ""})
        for k, v in m.extra.items():
            if _num(v) is not None and k not in _STATIC and k != "time":
                meas.append({"name": k, "value": v, "unit": ""})
        res: dict[str, Any] = {
            "configuration": {k: (list(v) if isinstance(v, tuple) else v) for k, v in m.config.items()},
            "objectives": ["time"],
            "times": {"compilation_time": m.compile_s * 1000.0,
                      "runtimes": list(m.samples_ms),
                      "framework": 0.0, "search_algorithm": 0.0, "validation": 0.0,
                      "benchmark": m.bench_s * 1000.0},
            "invalidity": _INVALIDITY_OF[m.status],
            "correctness": 1 if m.status == "ok" else 0,
            "measurements": meas,
        }
        ext = {}
        if INVALIDITY[res["invalidity"]] != m.status:
            ext["status"] = m.status
        if m.error:
            ext["error"] = m.error
        if ext:
            res["abductune"] = ext
        results.append(res)
    return {"schema_version": SCHEMA_VERSION,
            "metadata": {"timeunit": "milliseconds", "abductune": head},
            "results": results}


def export_t4(ds: Dataset, path: str | Path) -> None:
    """Write `ds` as a T4 file (gzip if the name ends in .gz), atomically."""
    path = str(path)
    try:
        blob = json.dumps(to_t4_dict(ds), separators=(",", ":"), allow_nan=False)
    except ValueError as e:  # NaN or infinity: T4 is strict JSON
        raise DatasetError(f"cannot export {ds.path or ds.name} to T4 {path}: {e}") from None
    data = blob.encode("utf-8")
    with atomic_writer(path, binary=True) as f:
        if path.endswith(".gz"):
            with gzip.GzipFile(filename=os.path.basename(path).removesuffix(".gz"), mode="wb",
                               fileobj=f, mtime=0) as gz:
                gz.write(data)
        else:
            f.write(data)
