"""The public exhaustive tuning data that lives beside the project, and a loader for any
dataset file whatever its format.

The data (Kernel Tuner caches and T4 files measured by others on real GPUs) is not part of
the repository: it sits in `shared/datasets/public/` next to the checkout. `public_data_dir`
finds it (the environment variable `ABDUCTUNE_PUBLIC_DATA` overrides the search).
"""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

from ..errors import DatasetError
from .format import FORMAT, Dataset, read_dataset
from .kernel_tuner import _check_class, from_cache_dict, read_json
from .t4 import from_t4_dict, is_t4

ENV_DIR = "ABDUCTUNE_PUBLIC_DATA"
_REL = Path("shared") / "datasets" / "public"


def public_data_dir() -> Path | None:
    """The public data folder: `$ABDUCTUNE_PUBLIC_DATA` when set (None if that is not a
    folder), else the first `shared/datasets/public` found in the current directory, this
    file's folder, or any of their parents; None when there is none."""
    env = os.environ.get(ENV_DIR)
    if env:
        p = Path(env).expanduser()
        return p.resolve() if p.is_dir() else None
    starts = []
    try:
        starts.append(Path.cwd().resolve())
    except OSError:
        pass
    starts.append(Path(__file__).resolve().parent)
    for start in starts:
        for d in (start, *start.parents):
            cand = d / _REL
            if cand.is_dir():
                return cand
    return None


def list_public_datasets(root: str | Path | None = None) -> list[Path]:
    """Every Kernel Tuner cache and T4 file under the public data folder (or `root`), sorted;
    empty when there is no folder."""
    base = Path(root) if root is not None else public_data_dir()
    if base is None or not base.is_dir():
        return []
    out = [p for p in base.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz"))
           and p.name.lower() != "manifest.json"]
    return sorted(out)


def load_manifest(root: str | Path | None = None) -> list[dict[str, Any]]:
    """The public folder's MANIFEST.json (per-file counts), [] when absent."""
    base = Path(root) if root is not None else public_data_dir()
    if base is None or not (base / "MANIFEST.json").is_file():
        return []
    return json.loads((base / "MANIFEST.json").read_text(encoding="utf-8"))


def detect_format(obj: Any) -> str | None:
    """'abductune', 'kernel_tuner' or 't4' for a parsed JSON object (a header line or a whole
    file), None when it is none of them."""
    if not isinstance(obj, dict):
        return None
    if obj.get("format") == FORMAT:
        return "abductune"
    if "cache" in obj and "tune_params" in obj:
        return "kernel_tuner"
    if is_t4(obj):
        return "t4"
    return None


OVERRIDES = ("kernel_class", "dims", "hardware", "dtypes", "kernel", "timeunit")


def load_any(path: str | Path, *, strict: bool = False, **overrides: Any) -> Dataset:
    """Read an abductune dataset, a Kernel Tuner cache or a T4 file, deciding by content.
    `overrides` (kernel_class, dims, hardware, dtypes, kernel; timeunit for T4) go to the
    importer; they are refused for our own format, which carries everything. `strict`
    refuses an abductune dataset holding records outside its space instead of dropping them."""
    path = str(path)
    overrides = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(overrides) - set(OVERRIDES))
    if unknown:
        raise DatasetError(f"unknown override(s) {', '.join(unknown)}; accepted: {', '.join(OVERRIDES)}")
    if "kernel_class" in overrides:
        _check_class(overrides["kernel_class"], path)  # names the known classes
    first: Any = None
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            line = f.readline()
        first = json.loads(line)
    except FileNotFoundError:
        raise DatasetError(f"dataset file {path} does not exist") from None
    except (ValueError, OSError, EOFError):
        first = None  # a multi-line JSON object, or unreadable: read_json says which
    if detect_format(first) == "abductune":
        if overrides:
            raise DatasetError(f"{path}: an abductune dataset carries its own problem (dims, "
                               f"kernel class, dtypes) and hardware; overrides "
                               f"{', '.join(overrides)} are not accepted for it")
        return read_dataset(path, strict=strict)
    obj = first if isinstance(first, dict) else read_json(path, allow_unclosed=True)
    kind = detect_format(obj)
    if kind == "kernel_tuner":
        overrides.pop("timeunit", None)
        return _with_costs(from_cache_dict(obj, path=path, **overrides))
    if kind == "t4":
        return _with_costs(from_t4_dict(obj, path=path, **overrides))
    keys = ", ".join(sorted(obj)[:8]) if isinstance(obj, dict) else type(obj).__name__
    raise DatasetError(f"{path}: not a dataset abductune knows (an abductune dataset has a "
                       f"header with \"format\": \"{FORMAT}\", a Kernel Tuner cache has \"cache\" "
                       f"and \"tune_params\", a T4 file has \"results\"); found: {keys}")


_SAID_NO_DTYPES: list[bool] = []  # said once per process, not once per file


def _with_costs(ds: Dataset) -> Dataset:
    """An imported dataset with FLOPs and minimum bytes filled in where its class, dims and
    dtypes allow (`costs.problem_costs`). One without dtypes says once per process what
    diagnosis cannot do without them."""
    import dataclasses
    import logging

    from ..costs import problem_costs

    p = ds.problem
    if not p.dtypes:
        if not _SAID_NO_DTYPES:
            _SAID_NO_DTYPES.append(True)
            logging.getLogger(__name__).warning(
                "%s has no dtypes: diagnosis has no roofline (FLOPs, bytes), so it cannot tell whether a "
                "config is memory- or compute-bound, and abduction searches it in generic mode; import it "
                "with --dtypes a=fp16,b=fp16,c=fp16 (the tensors' element types)", ds.path or ds.name)
        return ds
    if p.flops > 0 and p.min_bytes > 0:
        return ds
    got = problem_costs(p.kernel_class, p.dims, p.dtypes)
    if got is not None:
        ds.problem = dataclasses.replace(p, flops=got[0], min_bytes=got[1])
    return ds
