"""The recorded-dataset format: JSON Lines (optionally gzip), one header line, one line per
config. The header carries everything needed to replay and to reason about the data:

    {"format": "abductune-dataset", "version": 1, "kernel": {...}, "problem": {...},
     "hardware": {...}, "toolchain": {...}, "space": {...}, "restricted_to_records": bool,
     "source": "...", "note": "..."}

`restricted_to_records` says the space's true restrictions are not expressible (e.g. Kernel
Tuner caches store only the surviving configs), so the valid set is exactly the recorded one.

`meta.source_facts` (optional, versioned) holds what was read from the kernel's Triton source
when it was recorded, never the source itself (third-party code stays out of datasets):

    {"version": 1, "reduction": {"TILE_N": "loop"}}

`reduction` maps a tile parameter to how the kernel walks the dim it covers (`whole`, `loop`
or `either`; see `theory.store.scope`), so a replay judges the kernel as the live one would be.
`loads` (optional, e.g. `[["BLOCK_K", "BLOCK_M"], ["BLOCK_K", "BLOCK_N"]]`) lists the tiles each
2-D load of its reduction loop reads (`theory.store.scope.kernel_loads`), which the resource
model holds in shared memory per pipeline stage; an older reader ignores it.
"""
from __future__ import annotations

import gzip
import json
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from .. import kernel_facts
from ..errors import DatasetError, SpaceError
from ..files import atomic_writer
from ..hardware import HardwareInfo
from ..measurement import Measurement
from ..problem import Problem
from ..space import Space, callable_constraint

log = logging.getLogger(__name__)

FORMAT = "abductune-dataset"
VERSION = 1

# How much of its space a dataset must cover before replay trusts its optimum (see
# `require_exhaustive`). A header that states its whole space (our sweeps) must cover all of
# it: every bundled dataset does, and one cut to 50 records covers 6-78%. A dataset restricted
# to its records (Kernel Tuner, T4) hides its true restrictions, so only plausibility can be
# checked: its density in the product of its values (public data: 0.216 for CLBlast GEMM to
# 1.0 for pnpoly; a Kernel Tuner file cut to 50 records: at most 0.012) and its size (public
# data: 210 to 17,956 configs). A T4 file without our header builds its space from the values
# it holds, so a cut one stays dense (0.52 and 0.69 at 50 records); the size floor catches it.
SOURCE_FACTS = "source_facts"  # the meta key (module docstring)
SOURCE_FACTS_VERSION = 1
REDUCTIONS = kernel_facts.REDUCTIONS
# a header's facts go to the process's one registry (`abductune.kernel_facts`), where the
# classifier and the scope checks ask by kernel name when the source is not at hand (replay)

STATED_MIN_FRACTION = 1.0
RESTRICTED_MIN_FRACTION = 0.2
RESTRICTED_MIN_CONFIGS = 100


@dataclass(frozen=True)
class Coverage:
    """What a dataset's records cover of its space.

    `valid` counts the configs the header's space allows (its values and constraints, not the
    restriction to the recorded configs); `covered` the valid configs with at least one
    record; `outside_values` / `failing_constraints` the records dropped on reading because
    they lie outside the space (they can never be the optimum)."""

    records: int
    distinct: int
    duplicates: int
    valid: int
    covered: int
    outside_values: int = 0
    failing_constraints: int = 0
    restricted_to_records: bool = False
    # a fixed sample (the header's meta.sample): `valid` counts the sample, this the whole space
    sampled_from: int = 0
    # the space's values were read off the records (a T4 file without our header): a cut file
    # still covers "all" of them, so completeness proves nothing and the size floor applies
    values_from_records: bool = False

    @property
    def fraction(self) -> float:
        """covered / valid: 1.0 when every valid config has a record."""
        return self.covered / self.valid if self.valid else 0.0

    @property
    def min_fraction(self) -> float:
        """The default threshold for this kind of dataset: a fixed sample must be recorded whole."""
        if self.sampled_from:
            return STATED_MIN_FRACTION
        return RESTRICTED_MIN_FRACTION if self.restricted_to_records else STATED_MIN_FRACTION

    @property
    def complete(self) -> bool:
        """Every valid config of the stated values has a record (whatever the space's size)."""
        return self.valid > 0 and self.covered >= self.valid

    def trusted(self, min_fraction: float | None = None) -> bool:
        """Can replay trust the optimum? With `min_fraction`, the coverage must reach it; by
        default a stated space must be covered whole, and a restricted dataset must reach
        RESTRICTED_MIN_FRACTION and hold RESTRICTED_MIN_CONFIGS distinct configs, unless it
        holds every combination of the values it states (a complete Kernel Tuner cache of a
        small space is exhaustive whatever its size; a truncated one lacks combinations)."""
        if self.records == 0:
            return False
        if min_fraction is not None:
            return self.fraction >= min_fraction
        if self.restricted_to_records and not self.sampled_from and self.covered < RESTRICTED_MIN_CONFIGS:
            return self.complete and not self.values_from_records
        return self.fraction >= self.min_fraction

    def describe(self) -> str:
        """One line for a report: '864 records, 864 distinct, cover 864/864 valid configs (100.0%)'."""
        kind = (f" of a fixed sample of the space's {self.sampled_from}" if self.sampled_from else
                " of the product of recorded values (true restrictions unknown)"
                if self.restricted_to_records else "")
        parts = [f"{self.records} records, {self.distinct} distinct configs, cover {self.covered}/"
                 f"{self.valid} valid configs{kind} ({100 * self.fraction:.1f}%)"]
        if self.duplicates:
            parts.append(f"{self.duplicates} duplicate records")
        if self.outside_values:
            parts.append(f"{self.outside_values} records outside the parameter values dropped")
        if self.failing_constraints:
            parts.append(f"{self.failing_constraints} records failing the constraints dropped")
        return "; ".join(parts)


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
    # records dropped on reading because they lie outside the space: reason -> count
    dropped: dict[str, int] = field(default_factory=dict)
    # the space's values were read off the records (T4 without our header): see Coverage
    values_from_records: bool = False
    _space: Space | None = field(default=None, repr=False, compare=False)
    _stated_valid: tuple[str, int] | None = field(default=None, repr=False, compare=False)

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

    def stated_space(self) -> Space:
        """The space the header states: its values and constraints, without the restriction
        to the recorded configs."""
        return Space.from_dict(self.space_dict)

    def coverage(self) -> Coverage:
        """What the records cover of the stated space (see `Coverage`)."""
        base = self.stated_space()
        where = self.path or self.name
        try:
            fp = base.fingerprint()
            if self._stated_valid is None or self._stated_valid[0] != fp:
                # without constraints the count is the product: no enumeration of a huge space
                self._stated_valid = (fp, base.cardinality if not base.constraints else
                                      sum(1 for _ in base.iter_configs()))
            keys = []
            for m in self.records:
                try:
                    keys.append(base.key(m.config))
                except SpaceError:
                    continue
            distinct = set(keys)
            covered = sum(1 for k in distinct if base.is_valid(base.from_key(k)))
        except SpaceError as e:
            raise SpaceError(f"{where}: {e}") from None
        sample = self.meta.get("sample") if isinstance(self.meta.get("sample"), dict) else None
        valid, sampled_from = self._stated_valid[1], 0
        if sample and isinstance(sample.get("size"), int) and sample["size"] > 0:
            # a fixed sample of a large space (`abductune sweep` past 1,000 valid configs): the
            # optimum is the sample's, trusted once every sampled config has a record
            valid, sampled_from = sample["size"], self._stated_valid[1]
        return Coverage(records=len(self.records), distinct=len(distinct),
                        duplicates=len(keys) - len(distinct), valid=valid,
                        covered=covered, outside_values=self.dropped.get("outside_values", 0),
                        failing_constraints=self.dropped.get("failing_constraints", 0),
                        restricted_to_records=self.restricted_to_records, sampled_from=sampled_from,
                        values_from_records=self.values_from_records)

    @property
    def coverage_fraction(self) -> float:
        return self.coverage().fraction

    @property
    def is_exhaustive(self) -> bool:
        """True when replay can trust the optimum: the records cover the whole stated space,
        or, for a dataset restricted to its records, reach RESTRICTED_MIN_FRACTION of the
        product of its values (its true restrictions cannot be checked)."""
        return self.coverage().trusted()

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
                "note": self.note, "baselines": self.baselines, "meta": self.meta,
                **({"values_from_records": True} if self.values_from_records else {})}


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


TIME_RULE = "a recorded time must be a positive, finite number of milliseconds"


def bad_time(value: Any) -> bool:
    """True unless `value` can be a recorded time: a finite number above zero (not a bool)."""
    return (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or value <= 0)


def check_times(time_ms: Any, samples: Any, at: str, *, field: str = "time_ms",
                samples_field: str = "samples_ms", samples_suffice: bool = True) -> None:
    """DatasetError naming `at` (file and line, or file and config) unless a successful
    record's time and samples are positive, finite numbers. Every reader of recorded times
    (our datasets, Kernel Tuner caches, T4 files) calls this where it reads them, so a
    negative, zero, NaN, infinite or text time never reaches a replay or a fit. A record
    without a time is an error too, unless it has samples and `samples_suffice` (the time is
    then their median or mean)."""
    if time_ms is None:
        if not (samples_suffice and samples):
            raise DatasetError(f"{at}: {field} is missing; {TIME_RULE}: fix or remove the record")
    elif bad_time(time_ms):
        raise DatasetError(f"{at}: {field} is {time_ms!r}; {TIME_RULE}: fix or remove the record")
    if samples is None:
        return
    if not isinstance(samples, (list, tuple)):
        raise DatasetError(f"{at}: {samples_field} is {samples!r}, expected a list of times; {TIME_RULE}")
    for s in samples:
        if bad_time(s):
            raise DatasetError(f"{at}: {samples_field} holds {s!r}; {TIME_RULE}: fix or remove the record")


def check_dataset_times(ds: "Dataset") -> None:
    """The same check for a Dataset built in code (files are checked when read)."""
    for i, m in enumerate(ds.records):
        if m.status.value == "ok":
            check_times(m.time_ms, list(m.samples_ms), f"{ds.path or ds.name} record {i + 1}")


def screen_records(records: Sequence[Measurement], space_dict: Mapping[str, Any], where: str, *,
                   strict: bool = False,
                   linenos: Sequence[int] | None = None) -> tuple[list[Measurement], dict[str, int]]:
    """The records whose configs lie inside the stated space (values and constraints), and
    the count dropped per reason ("outside_values", "failing_constraints"). Such records
    would otherwise be replayable and could become the optimum. Dropping is logged as a
    warning; with `strict` the first one raises DatasetError naming it."""
    base = Space.from_dict(space_dict)
    names = set(base.names)
    kept: list[Measurement] = []
    dropped: dict[str, int] = {}
    first: dict[str, str] = {}
    for i, m in enumerate(records):
        at = f"{where}:{linenos[i]}" if linenos is not None else f"{where} record {i + 1}"
        cfg = m.config
        if set(cfg) != names or not all(p.contains(cfg[p.name]) for p in base.params):
            reason, why = "outside_values", f"config {dict(cfg)!r} is outside the space's values"
        else:
            try:
                ok = base.satisfies(cfg)
            except SpaceError as e:
                raise SpaceError(f"{where}:1: the header's constraints cannot be evaluated: {e}") from None
            if ok:
                kept.append(m)
                continue
            reason, why = "failing_constraints", f"config {dict(cfg)!r} fails the space's constraints"
        if strict:
            raise DatasetError(f"{at}: {why}; fix or remove the record (or read without strict)")
        dropped[reason] = dropped.get(reason, 0) + 1
        first.setdefault(reason, f"{at}: {why}")
    for reason, n in dropped.items():
        log.warning("%s: dropped %d record(s) %s, e.g. %s", where, n,
                    "outside the space's values" if reason == "outside_values"
                    else "failing the space's constraints", first[reason])
    return kept, dropped


def require_exhaustive(ds: Dataset, min_fraction: float | None = None) -> Coverage:
    """The dataset's coverage, or DatasetError when it covers less than `min_fraction` of its
    space (default: all of a stated space; RESTRICTED_MIN_FRACTION of a restricted one, with
    at least RESTRICTED_MIN_CONFIGS configs), so a replay does not report an optimum the
    data cannot support. `min_fraction=0` accepts any non-empty dataset."""
    cov = ds.coverage()
    if not cov.trusted(min_fraction):
        need = cov.min_fraction if min_fraction is None else min_fraction
        floor = ""
        if min_fraction is None and cov.restricted_to_records and not cov.sampled_from:
            # small and complete is exhaustive; the floor is there to catch truncated files
            floor = (f" and {RESTRICTED_MIN_CONFIGS} configs (its space was read off its own "
                     "records, so a truncated file looks complete)" if cov.values_from_records else
                     f" and {RESTRICTED_MIN_CONFIGS} configs, or every combination of its values")
        raise DatasetError(f"{ds.path or ds.name}: not exhaustive: {cov.describe()}; replay needs at "
                           f"least {100 * need:.0f}%{floor}: record the missing configs or lower "
                           "the required fraction")
    return cov


def read_dataset(path: str | Path, *, strict: bool = False) -> Dataset:
    """Read a dataset file. Records outside the header's space (values or constraints) are
    dropped with a warning, or raise DatasetError when `strict`."""
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
    linenos: list[int] = []
    for lineno, obj in lines:
        try:
            m = Measurement.from_dict(obj)
        except (KeyError, TypeError, ValueError) as e:
            raise DatasetError(f"{path}:{lineno}: malformed record ({type(e).__name__}: {e})") from None
        missing = [n for n in names if n not in m.config]
        if missing:
            raise DatasetError(f"{path}:{lineno}: config lacks parameter(s) {', '.join(missing)}")
        if m.status.value == "ok":  # the file's values: from_dict passes a text time through
            check_times(obj.get("time_ms"), obj.get("samples_ms"), f"{path}:{lineno}")
        records.append(m)
        linenos.append(lineno)
    records, dropped = screen_records(records, space_dict, str(path), strict=strict, linenos=linenos)
    meta = dict(head.get("meta") or {})
    told = source_facts(meta, f"{path}:1")
    if told:
        kernel_facts.note_read(problem.kernel, told)
    kernel_facts.note_read_loads(problem.kernel, source_loads(meta, f"{path}:1"))
    return Dataset(problem, space_dict, records, dict(head.get("toolchain") or {}),
                   bool(head.get("restricted_to_records")), head.get("source", ""),
                   head.get("note", ""), str(path), dict(head.get("baselines") or {}),
                   meta, dropped, bool(head.get("values_from_records")))


def source_facts(meta: Mapping[str, Any], where: str = "") -> dict[str, str]:
    """The `reduction` facts of a header's meta (tile parameter -> whole/loop/either); {} when
    absent, of a newer version (logged: an older abductune reads the rest of the file), or
    malformed (logged)."""
    got = meta.get(SOURCE_FACTS)
    if got is None:
        return {}
    if not isinstance(got, dict) or not isinstance(got.get("reduction", {}), dict):
        log.warning("%s: meta.%s is not an object with a 'reduction' object; ignored", where, SOURCE_FACTS)
        return {}
    if not isinstance(got.get("version"), int) or got["version"] > SOURCE_FACTS_VERSION:
        log.info("%s: meta.%s version %r is not one this abductune reads (%d); ignored", where, SOURCE_FACTS,
                 got.get("version"), SOURCE_FACTS_VERSION)
        return {}
    out = {str(k): v for k, v in got.get("reduction", {}).items() if v in REDUCTIONS}
    if len(out) < len(got.get("reduction", {})):
        log.warning("%s: meta.%s.reduction values must be one of %s; others ignored", where, SOURCE_FACTS,
                    "/".join(REDUCTIONS))
    return out


def source_loads(meta: Mapping[str, Any], where: str = "") -> list[list[str]] | None:
    """The `loads` fact of a header's meta (the tiles each load of the kernel's reduction loop
    reads: `theory.store.scope.staged_tiles`); None when absent or malformed (logged)."""
    got = meta.get(SOURCE_FACTS)
    if not isinstance(got, dict) or "loads" not in got:
        return None
    loads = got["loads"]
    if not isinstance(loads, list) or not all(isinstance(t, list) and all(isinstance(x, str) for x in t)
                                              for t in loads):
        log.warning("%s: meta.%s.loads must be a list of lists of tile parameter names; ignored", where,
                    SOURCE_FACTS)
        return None
    return [list(t) for t in loads]


def make_source_facts(reduction: Mapping[str, str], loads: Sequence[Sequence[str]] | None = None) -> dict[str, Any]:
    """The `meta.source_facts` value for these facts (values outside REDUCTIONS dropped), with
    the reduction loop's loads where they are known."""
    out: dict[str, Any] = {"version": SOURCE_FACTS_VERSION,
                           "reduction": {str(k): v for k, v in sorted(reduction.items()) if v in REDUCTIONS}}
    if loads is not None:
        out["loads"] = [list(t) for t in loads]
    return out


def facts_read(kernel: str) -> dict[str, str]:
    """The `reduction` facts the last header read for `kernel` carried ({} when none did)."""
    return kernel_facts.read_from_header(kernel)


def write_dataset(ds: Dataset, path: str | Path) -> None:
    """Write atomically (temp file + rename, the user's umask) so a crash never leaves half a
    dataset; gzip when the name ends in .gz."""
    path = str(path)
    with atomic_writer(path, binary=True) as raw:
        # the gzip header names the final file, not the temporary one; mtime 0 keeps the
        # bytes reproducible
        gz = (gzip.GzipFile(filename=os.path.basename(path).removesuffix(".gz"), mode="wb",
                            fileobj=raw, mtime=0) if path.endswith(".gz") else None)
        out = gz if gz is not None else raw
        try:
            out.write((json.dumps(ds.header(), separators=(",", ":")) + "\n").encode("utf-8"))
            for m in ds.records:
                out.write((json.dumps(m.to_dict(), separators=(",", ":")) + "\n").encode("utf-8"))
        finally:
            if gz is not None:
                gz.close()


def append_records(path: str | Path, records: Iterable[Measurement]) -> None:
    """Append to an uncompressed dataset being recorded (resumable sweeps)."""
    with open(path, "a", encoding="utf-8") as f:
        for m in records:
            f.write(json.dumps(m.to_dict(), separators=(",", ":")) + "\n")
        f.flush()
        os.fsync(f.fileno())
