"""The recorded-dataset format: JSON Lines (optionally gzip), one header line, one line per
config. The header carries everything needed to replay and to reason about the data:

    {"format": "abductune-dataset", "version": 1, "kernel": {...}, "problem": {...},
     "hardware": {...}, "toolchain": {...}, "space": {...}, "restricted_to_records": bool,
     "source": "...", "note": "..."}

`restricted_to_records` says the space's true restrictions are not expressible (e.g. Kernel
Tuner caches store only the surviving configs), so the valid set is exactly the recorded one.
"""
from __future__ import annotations

import gzip
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..errors import DatasetError
from ..hardware import HardwareInfo
from ..measurement import Measurement
from ..problem import Problem
from ..space import Space, callable_constraint

FORMAT = "abductune-dataset"
VERSION = 1


@dataclass
class Dataset:
    problem: Problem
    space_dict: dict[str, Any]
    records: list[Measurement]
    toolchain: dict[str, Any] = field(default_factory=dict)
    restricted_to_records: bool = False
    source: str = ""
    note: str = ""
    path: str = ""
    baselines: dict[str, float] = field(default_factory=dict)  # e.g. {"torch_ms": 0.41}
    # the kernel's shipped config list and default ({"fixed_configs": [...], "default_config": {...}}),
    # so replay can compare against them without importing the kernel (no triton needed)
    meta: dict[str, Any] = field(default_factory=dict)
    _space: Space | None = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        if self.path:
            base = os.path.basename(self.path)
            for ext in (".gz", ".jsonl", ".json"):
                base = base.removesuffix(ext)
            return base
        return f"{self.problem.kernel}[{self.problem.shape_key()}]"

    @property
    def hardware(self) -> HardwareInfo | None:
        return self.problem.hardware

    def space(self) -> Space:
        """The space to search; restricted to the recorded configs when the header says so."""
        if self._space is None:
            base = Space.from_dict(self.space_dict)
            if self.restricted_to_records:
                keys = frozenset(base.key(m.config) for m in self.records)
                names = base.names
                member = callable_constraint(lambda c: tuple(c[n] for n in names) in keys,
                                             key=f"callable:recorded:{len(keys)}")
                base = Space(base.params, [*base.constraints, member], base.constants, base.name)
            self._space = base
        return self._space

    def ok_records(self) -> list[Measurement]:
        return [m for m in self.records if m.ok]

    def optimum(self) -> Measurement:
        ok = self.ok_records()
        if not ok:
            raise DatasetError(f"dataset {self.path or self.name} has no successful measurement")
        return min(ok, key=lambda m: m.time_ms)  # type: ignore[arg-type,return-value]

    def header(self) -> dict[str, Any]:
        p = self.problem
        return {"format": FORMAT, "version": VERSION,
                "kernel": {"name": p.kernel, "class": p.kernel_class, "source_hash": p.source_hash},
                "problem": {k: v for k, v in p.to_dict().items() if k != "hardware"},
                "hardware": p.hardware.to_dict() if p.hardware else None,
                "toolchain": self.toolchain, "space": self.space_dict,
                "restricted_to_records": self.restricted_to_records, "source": self.source,
                "note": self.note, "baselines": self.baselines, "meta": self.meta}


def _open(path: str | Path, mode: str):
    path = str(path)
    if path.endswith(".gz"):
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def iter_lines(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, parsed object) for each non-empty line; errors name file and line."""
    try:
        with _open(path, "r") as f:
            lineno = 0
            try:
                for lineno, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        obj = json.loads(line)
                    except json.JSONDecodeError as e:
                        raise DatasetError(f"{path}:{lineno}: not valid JSON ({e.msg} at column "
                                           f"{e.colno}); the file is corrupt or truncated") from None
                    if not isinstance(obj, dict):
                        raise DatasetError(f"{path}:{lineno}: expected a JSON object per line")
                    yield lineno, obj
            except (EOFError, gzip.BadGzipFile, OSError, UnicodeDecodeError) as e:
                raise DatasetError(f"{path}:{lineno + 1}: cannot read ({e}); the file is corrupt "
                                   "or truncated") from None
    except FileNotFoundError:
        raise DatasetError(f"dataset file {path} does not exist") from None


def read_dataset(path: str | Path) -> Dataset:
    lines = iter_lines(path)
    try:
        _, head = next(lines)
    except StopIteration:
        raise DatasetError(f"{path}: empty file, expected a dataset header line") from None
    if head.get("format") != FORMAT:
        raise DatasetError(f"{path}:1: not an abductune dataset (header 'format' is "
                           f"{head.get('format')!r}); import Kernel Tuner or T4 files with "
                           "`abductune import`")
    try:
        version = int(head.get("version", 0))
    except (TypeError, ValueError):
        raise DatasetError(f"{path}:1: header 'version' must be an integer, got "
                           f"{head.get('version')!r}") from None
    if version > VERSION:
        raise DatasetError(f"{path}:1: format version {head.get('version')} is newer than this "
                           f"abductune understands ({VERSION}); upgrade abductune")
    try:
        pd = dict(head["problem"])
        pd["hardware"] = head.get("hardware")
        problem = Problem.from_dict(pd)
        space_dict = dict(head["space"])
        Space.from_dict(space_dict)  # validate now so errors point at the header
    except (KeyError, TypeError, ValueError) as e:
        raise DatasetError(f"{path}:1: malformed header ({type(e).__name__}: {e})") from None
    names = [p["name"] for p in space_dict.get("params", [])]
    records: list[Measurement] = []
    for lineno, obj in lines:
        try:
            m = Measurement.from_dict(obj)
        except (KeyError, TypeError, ValueError) as e:
            raise DatasetError(f"{path}:{lineno}: malformed record ({type(e).__name__}: {e})") from None
        missing = [n for n in names if n not in m.config]
        if missing:
            raise DatasetError(f"{path}:{lineno}: config lacks parameter(s) {', '.join(missing)}")
        records.append(m)
    return Dataset(problem, space_dict, records, dict(head.get("toolchain") or {}),
                   bool(head.get("restricted_to_records")), head.get("source", ""),
                   head.get("note", ""), str(path), dict(head.get("baselines") or {}),
                   dict(head.get("meta") or {}))


def write_dataset(ds: Dataset, path: str | Path) -> None:
    """Write atomically (temp file + rename) so a crash never leaves half a dataset."""
    path = str(path)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp" +
                               (".gz" if path.endswith(".gz") else ""), dir=os.path.dirname(path) or ".")
    os.close(fd)
    try:
        with _open(tmp, "w") as f:
            f.write(json.dumps(ds.header(), separators=(",", ":")) + "\n")
            for m in ds.records:
                f.write(json.dumps(m.to_dict(), separators=(",", ":")) + "\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def append_records(path: str | Path, records: Iterable[Measurement]) -> None:
    """Append to an uncompressed dataset being recorded (resumable sweeps)."""
    with open(path, "a", encoding="utf-8") as f:
        for m in records:
            f.write(json.dumps(m.to_dict(), separators=(",", ":")) + "\n")
        f.flush()
        os.fsync(f.fileno())
