"""The observed-heuristics database: what measurements say is a good first config.

A *rule* is keyed by hardware, kernel class (+ variant), shape bucket and dtype family, and
holds ranked config *templates* with their statistics over the shapes the rule was
harvested from: `wins` (shapes where the template was the best template), `coverage`
(fraction of shapes where it was measured successfully), `geomean_slowdown` and
`p90_slowdown` (its time over each shape's optimum), `vs_default` (geomean of its time over
the space default's time; harvest keeps a template only when this is at most 1 - margin).

Buckets: a rule's `bucket` is either a shape bucket ("K=4096,M=64,N=4096": canonical dims
rounded up to powers of 2**granularity, see `classify.shape_bucket`) or a per-class fallback
("fallback:small_m", ...) used when no bucket rule matches. Rules with `exact` dims
(imported vLLM configs) match problems with those dims, the nearest M (rows, numel) winning,
the way vLLM picks the nearest batch size.

Hardware: a rule's `hardware` is a GPU name ("H100-SXM"), a family ("family:nvidia/hopper")
or "*" (any). Lookup tries the problem's GPU first, then its family, then any; at each level
exact rules, then the bucket, then the fallback; within each, the problem's dtype family
before "any".

Templates are keyed by "@role" (kernels whose spaces give every parameter a role of its own:
a template then transfers to any kernel of the class) or by parameter name (spaces without
full roles, e.g. Kernel Tuner data: such rules carry a `scope` naming the parameter set, and
apply only to spaces with exactly those parameters).

Provenance: a harvested rule lists the datasets it was `learned_from` (each one's
`Problem.key()`, kernel, readable shape name and hardware). `lookup(..., exclude=problem)`
leaves out every rule learned from that problem (leave-one-shape-out), so a replay of a
recorded shape is never seeded with its own answer.

On disk: one JSON file per hardware key under `heuristics/data/` (`h100-sxm.json`,
`family-nvidia-hopper.json`, `any.json`), or any single file holding several. The packaged
files are harvested from the bundled H100 datasets; rebuild them (settings in their `meta`) with
`abductune harvest bundled --levels name,family --replace --out src/abductune/heuristics/data`.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from ..classify import Classification, classify, shape_bucket
from ..datasets.bundled import shape_name
from ..errors import AbductuneError, InvalidSeed
from ..files import atomic_write_text
from ..hardware import HardwareInfo, as_hardware
from ..problem import Holdout, Problem, as_holdout
from ..space import Config, Space
from .realize import realize, resolve_keys, template_scope

try:
    import fcntl
except ImportError:  # not POSIX: writes stay atomic, concurrent merges are not serialised
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

FORMAT = "abductune-observed-heuristics"
VERSION = 1
DATA_DIR = Path(__file__).parent / "data"
ANY = "*"

# the dim whose nearest value wins among exact rules (vLLM: the batch size)
_NEAREST_AXIS = {"matmul": "M", "quantized_matmul": "M", "row_reduction": "rows",
                 "elementwise": "numel"}


@dataclass
class Template:
    config: dict[str, Any]
    wins: int = 0
    coverage: float = 1.0
    geomean_slowdown: float = 1.0
    p90_slowdown: float = 1.0
    vs_default: float | None = None
    shapes: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = {"config": dict(self.config), "wins": self.wins, "coverage": round(self.coverage, 4),
             "geomean_slowdown": round(self.geomean_slowdown, 4),
             "p90_slowdown": round(self.p90_slowdown, 4), "shapes": self.shapes}
        if self.vs_default is not None:
            d["vs_default"] = round(self.vs_default, 4)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Template":
        cfg = {k: (tuple(v) if isinstance(v, list) else v) for k, v in dict(d["config"]).items()}
        return cls(cfg, int(d.get("wins", 0)), float(d.get("coverage", 1.0)),
                   float(d.get("geomean_slowdown", 1.0)), float(d.get("p90_slowdown", 1.0)),
                   None if d.get("vs_default") is None else float(d["vs_default"]),
                   int(d.get("shapes", 0)))


@dataclass(frozen=True)
class Origin:
    """One dataset a rule was harvested from: its problem's identity and a readable name."""

    key: str  # Problem.key(): kernel, source hash, class, dims, dtypes
    kernel: str
    shape: str  # "M16_N4096_K4096"
    dims: Mapping[str, int] = field(default_factory=dict)
    hardware: str = ""

    @classmethod
    def of(cls, problem: Problem) -> "Origin":
        return cls(problem.key(), problem.kernel, shape_name(problem.dims), dict(problem.dims),
                   problem.hardware.name if problem.hardware else "")

    def to_dict(self) -> dict[str, Any]:
        d = {"key": self.key, "kernel": self.kernel, "shape": self.shape, "dims": dict(self.dims)}
        if self.hardware:
            d["hardware"] = self.hardware
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Origin":
        return cls(str(d["key"]), str(d.get("kernel", "")), str(d.get("shape", "")),
                   {k: int(v) for k, v in dict(d.get("dims") or {}).items()},
                   str(d.get("hardware", "")))


Exclude = Problem | Holdout | str | Iterable[Problem | Holdout | str] | None


def _exclusions(exclude: Exclude) -> tuple[set[str], list[Holdout]]:
    """(problem keys, holdouts) named by `exclude`: a Problem (its shape), a `Holdout` (a
    shape or a whole kernel), a `Problem.key()`, or several."""
    if exclude is None:
        return set(), []
    items = [exclude] if isinstance(exclude, (Problem, Holdout, str)) else list(exclude)
    keys: set[str] = set()
    holds: list[Holdout] = []
    for it in items:
        if isinstance(it, (Problem, Holdout)):
            h = as_holdout(it)
            assert h is not None
            holds.append(h)
            keys.add(h.problem.key())
        elif isinstance(it, str):
            keys.add(it)
        else:
            raise AbductuneError(f"exclude takes Problems, Holdouts or Problem.key() strings, got "
                                 f"{type(it).__name__}")
    return keys, holds


@dataclass
class Rule:
    kernel_class: str
    bucket: str
    dtype_family: str = "any"
    hardware: str = ANY
    variant: str = ""
    scope: str = ""
    kernel: str = ""  # only for this kernel when set
    exact: dict[str, int] | None = None
    granularity: int = 2
    templates: list[Template] = field(default_factory=list)
    source: dict[str, Any] = field(default_factory=dict)
    learned_from: list[Origin] = field(default_factory=list)

    @property
    def is_fallback(self) -> bool:
        return self.bucket.startswith("fallback:")

    def learned_from_any(self, exclude: Exclude) -> bool:
        """Whether any dataset this rule was learned from is one `exclude` names."""
        keys, holds = _exclusions(exclude)
        return any(o.key in keys or any(h.covers(o.kernel, o.dims, o.key) for h in holds)
                   for o in self.learned_from)

    @property
    def kind(self) -> str:
        return "exact" if self.exact else ("fallback" if self.is_fallback else "bucket")

    def key(self) -> tuple:
        return (self.hardware, self.kernel_class, self.variant, self.bucket, self.dtype_family,
                self.scope, self.kernel,
                tuple(sorted(self.exact.items())) if self.exact else ())

    def key_dict(self) -> dict[str, Any]:
        d = {"hardware": self.hardware, "kernel_class": self.kernel_class, "bucket": self.bucket,
             "dtype_family": self.dtype_family}
        for k in ("variant", "scope", "kernel"):
            if getattr(self, k):
                d[k] = getattr(self, k)
        if self.exact:
            d["exact"] = dict(self.exact)
        return d

    def to_dict(self) -> dict[str, Any]:
        d = self.key_dict()
        if self.granularity != 2:
            d["granularity"] = self.granularity
        d["templates"] = [t.to_dict() for t in self.templates]
        if self.source:
            d["source"] = self.source
        if self.learned_from:
            d["learned_from"] = [o.to_dict() for o in self.learned_from]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Rule":
        try:
            return cls(kernel_class=d["kernel_class"], bucket=d["bucket"],
                       dtype_family=d.get("dtype_family", "any"), hardware=d.get("hardware", ANY),
                       variant=d.get("variant", ""), scope=d.get("scope", ""),
                       kernel=d.get("kernel", ""),
                       exact={k: int(v) for k, v in d["exact"].items()} if d.get("exact") else None,
                       granularity=int(d.get("granularity", 2)),
                       templates=[Template.from_dict(t) for t in d.get("templates", [])],
                       source=dict(d.get("source") or {}),
                       learned_from=[Origin.from_dict(o) for o in d.get("learned_from") or []])
        except (KeyError, TypeError, ValueError) as e:
            raise AbductuneError(f"malformed observed-heuristics rule {dict(d)!r}: "
                                 f"{type(e).__name__}: {e}") from None


@dataclass
class Lookup:
    rule: Rule
    template: Template
    config: Config
    level: str  # "<hardware key>/<exact|bucket|fallback>"

    def describe(self) -> str:
        t = self.template
        return (f"{self.level} rule {self.rule.kernel_class}"
                f"{'/' + self.rule.variant if self.rule.variant else ''} {self.rule.bucket} "
                f"{self.rule.dtype_family}: template won {t.wins}/{t.shapes}, geomean "
                f"{t.geomean_slowdown:.3f}x optimum"
                + (f", {t.vs_default:.3f}x default" if t.vs_default is not None else ""))


def hardware_keys(hw: HardwareInfo | None) -> list[str]:
    """Lookup order: the GPU's name, its family ("family:vendor/family"), then "*"."""
    keys = []
    if hw is not None:
        keys.append(hw.name)
        if hw.family:
            keys.append(family_key(hw))
    keys.append(ANY)
    return keys


def family_key(hw: HardwareInfo) -> str:
    return f"family:{hw.vendor}/{hw.family}"


def hardware_slug(key: str) -> str:
    if key == ANY:
        return "any"
    return re.sub(r"[^a-z0-9]+", "-", key.lower()).strip("-") or "unnamed"


class Database:
    """A set of rules (one per key; adding a rule with an existing key replaces it)."""

    def __init__(self, rules: Iterable[Rule] = (), meta: Mapping[str, Any] | None = None):
        self._rules: dict[tuple, Rule] = {}
        self.meta: dict[str, Any] = dict(meta or {})
        for r in rules:
            self.add(r)

    # -- contents
    def add(self, rule: Rule) -> None:
        self._rules[rule.key()] = rule

    def remove(self, rule: Rule) -> bool:
        return self._rules.pop(rule.key(), None) is not None

    def merge(self, other: "Database") -> "Database":
        """Add every rule of `other` (replacing rules with the same key); returns self."""
        for r in other:
            self.add(r)
        return self

    def __iter__(self) -> Iterator[Rule]:
        return iter(list(self._rules.values()))

    def __len__(self) -> int:
        return len(self._rules)

    @property
    def rules(self) -> list[Rule]:
        return list(self._rules.values())

    def find(self, **match: Any) -> list[Rule]:
        """Rules whose attributes equal every given value (kernel_class=..., hardware=...)."""
        return [r for r in self._rules.values() if all(getattr(r, k) == v for k, v in match.items())]

    # -- lookup
    def candidates(self, problem: Problem, space: Space, hardware: HardwareInfo | None = None,
                   cls: Classification | None = None, *,
                   exclude: Exclude = None) -> list[tuple[str, Rule]]:
        """Matching rules in lookup order, each with its level; rules learned from a problem
        `exclude` names are left out."""
        out = self._matching(problem, space, hardware, cls)
        if exclude is not None:
            out = [(lv, r) for lv, r in out if not r.learned_from_any(exclude)]
        return out

    def left_out(self, problem: Problem, space: Space, hardware: HardwareInfo | str | None = None,
                 cls: Classification | None = None, *, exclude: Exclude = None) -> list[Rule]:
        """The rules a `lookup` with the same arguments leaves out because of `exclude`
        (what leave-one-shape-out costs this problem)."""
        if exclude is None:
            return []
        hw = as_hardware(hardware) if hardware is not None else problem.hardware
        return [r for _, r in self._matching(problem, space, hw, cls) if r.learned_from_any(exclude)]

    def _matching(self, problem: Problem, space: Space, hardware: HardwareInfo | None,
                  cls: Classification | None) -> list[tuple[str, Rule]]:
        cls = cls or classify(problem, space)
        scope = template_scope(space)
        fams = [cls.dtype_family] + ([] if cls.dtype_family == "any" else ["any"])
        pool = [r for r in self._rules.values()
                if r.kernel_class == cls.kernel_class and r.variant == cls.variant
                and r.scope == scope and (not r.kernel or r.kernel == problem.kernel)]
        out: list[tuple[str, Rule]] = []
        for hwk in hardware_keys(hardware):
            here = [r for r in pool if r.hardware == hwk]
            if not here:
                continue
            for fam in fams:
                out += [(f"{hwk}/exact", r) for r in self._exact(here, cls, fam)]
            for fam in fams:
                out += [(f"{hwk}/bucket", r) for r in here if not r.exact and not r.is_fallback
                        and r.dtype_family == fam and r.bucket == shape_bucket(cls.dims, r.granularity)]
            for fam in fams:
                out += [(f"{hwk}/fallback", r) for r in here if r.is_fallback and not r.exact
                        and r.dtype_family == fam and r.bucket == f"fallback:{cls.fallback}"]
        return out

    @staticmethod
    def _exact(rules: list[Rule], cls: Classification, fam: str) -> list[Rule]:
        axis = _NEAREST_AXIS.get(cls.kernel_class)
        scored = []
        for r in rules:
            if not r.exact or r.dtype_family != fam:
                continue
            if not all(k in cls.dims for k in r.exact):
                continue
            if any(cls.dims[k] != v for k, v in r.exact.items() if k != axis):
                continue
            if axis in r.exact:
                a, b = max(1, r.exact[axis]), max(1, cls.dims[axis])
                d = abs(math.log2(a) - math.log2(b))
            else:
                d = 0.0
            scored.append((d, r.exact.get(axis, 0) if axis else 0, r))
        scored.sort(key=lambda t: (t[0], t[1]))
        return [r for _, _, r in scored]

    def lookup(self, problem: Problem, space: Space, hardware: HardwareInfo | str | None = None, *,
               base: Mapping[str, Any] | None = None, cls: Classification | None = None,
               exclude: Exclude = None) -> Lookup | None:
        """The best applicable template of the first matching rule, realized as a full valid
        config of `space` (merged onto `base`, clamped like a heuristic seed); None when no
        rule applies. `exclude` (Problems or `Problem.key()`s) leaves out every rule learned
        from those problems."""
        hw = as_hardware(hardware) if hardware is not None else problem.hardware
        cls = cls or classify(problem, space)
        for level, rule in self.candidates(problem, space, hw, cls, exclude=exclude):
            for t in rule.templates:
                values, _, unknown = resolve_keys(space, t.config)
                if unknown or not values:
                    continue
                try:
                    cfg = realize(space, t.config, problem, base=base, cls=cls)
                except InvalidSeed as e:
                    log.debug("template %s of %s does not fit: %s", t.config, rule.key_dict(), e)
                    continue
                return Lookup(rule, t, cfg, level)
        return None

    # -- serialisation
    def to_dict(self, hardware: str | None = None) -> dict[str, Any]:
        rules = [r for r in self._rules.values() if hardware is None or r.hardware == hardware]
        rules.sort(key=lambda r: (r.hardware, r.kernel_class, r.variant, r.is_fallback, r.bucket,
                                  r.dtype_family, r.scope, r.kernel, sorted((r.exact or {}).items())))
        d: dict[str, Any] = {"format": FORMAT, "version": VERSION}
        if hardware is not None:
            d["hardware"] = hardware
        if self.meta:
            d["meta"] = self.meta
        d["rules"] = [r.to_dict() for r in rules]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], origin: str = "") -> "Database":
        if d.get("format") != FORMAT:
            raise AbductuneError(f"{origin or 'object'}: not an observed-heuristics database "
                                 f"(format {d.get('format')!r}, expected {FORMAT!r})")
        version, rules = d.get("version", 0), d.get("rules", [])
        if not isinstance(version, int) or not isinstance(rules, list) or \
                not all(isinstance(r, dict) for r in rules) or not isinstance(d.get("meta") or {}, dict):
            raise AbductuneError(f"{origin or 'object'}: malformed observed-heuristics database "
                                 "(version must be an integer, rules a list of objects, meta an object)")
        if version > VERSION:
            raise AbductuneError(f"{origin}: database version {version} is newer than "
                                 f"this abductune understands ({VERSION})")
        return cls([Rule.from_dict(r) for r in rules], d.get("meta"))

    def save(self, path: str | os.PathLike[str], *, merge: bool = False) -> list[Path]:
        """Write to a `.json` file (all rules), or to a folder: one file per hardware key.
        Atomic per file, under an exclusive lock on a sidecar file, so writers take turns.
        `merge`: re-read what `path` holds now (under that lock) and write it with this
        database's rules added (replacing rules with the same key): two harvests updating one
        database each keep their rules. Returns the paths written."""
        p = Path(path)
        with _locked(p):
            db = self
            if merge and p.exists():
                db = Database.load(p)
                db.merge(self)
                db.meta.update(self.meta)
            return db._write(p)

    def _write(self, p: Path) -> list[Path]:
        if p.suffix == ".json":
            _atomic_write(p, self.to_dict())
            return [p]
        written = []
        for hwk in sorted({r.hardware for r in self._rules.values()}):
            f = p / f"{hardware_slug(hwk)}.json"
            _atomic_write(f, self.to_dict(hwk))
            written.append(f)
        return written

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "Database":
        """Read a database file, or every database file in a folder (merged)."""
        p = Path(path)
        if p.is_dir():
            db = cls()
            for f in sorted(p.glob("*.json")):
                part = cls.load(f)
                db.merge(part)
                db.meta.update(part.meta)  # one harvest writes the same meta to every file
            return db
        try:
            obj = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise AbductuneError(f"observed-heuristics database {p} does not exist") from None
        except json.JSONDecodeError as e:
            raise AbductuneError(f"{p}:{e.lineno}: not valid JSON ({e.msg}); the database is "
                                 "corrupt or truncated") from None
        except UnicodeDecodeError:
            raise AbductuneError(f"{p}: not a text file; an observed-heuristics database is JSON") from None
        except OSError as e:
            raise AbductuneError(f"cannot read database {p}: {e.strerror or type(e).__name__}") from None
        if not isinstance(obj, dict):
            raise AbductuneError(f"{p}: not an observed-heuristics database (a JSON "
                                 f"{type(obj).__name__}, expected an object)")
        return cls.from_dict(obj, str(p))

    def summary(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self._rules.values():
            k = f"{r.hardware} {r.kernel_class} {r.kind}"
            out[k] = out.get(k, 0) + 1
        return out


def _atomic_write(path: Path, obj: Any) -> None:
    # a unique temporary name per writer (a fixed `.tmp` lets two writers tear each other's file)
    atomic_write_text(path, json.dumps(obj, indent=1, sort_keys=False) + "\n")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the sidecar file of a database file (`.NAME.lock` beside it)
    or folder (`.lock` inside it), creating the folder. The sidecar is never removed: removing
    a lock file while another process waits on it would let a third one in."""
    folder = path.parent if path.suffix == ".json" else path
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / (f".{path.name}.lock" if folder != path else ".lock"),
                     os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as e:
        raise AbductuneError(f"cannot write database {path}: {e.strerror or type(e).__name__} "
                             f"({e.filename or folder}); choose a writable location") from None
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


_PACKAGED: dict[str, tuple[float, Database]] = {}


def packaged_database() -> Database:
    """The database shipped in `heuristics/data/` (re-read when a file there changes)."""
    key = str(DATA_DIR)
    stamp = max((f.stat().st_mtime for f in DATA_DIR.glob("*.json")), default=0.0) \
        if DATA_DIR.is_dir() else 0.0
    got = _PACKAGED.get(key)
    if got is None or got[0] != stamp:
        db = Database.load(DATA_DIR) if DATA_DIR.is_dir() else Database()
        _PACKAGED[key] = (stamp, db)
        got = _PACKAGED[key]
    return got[1]


def load_database(spec: Any = None) -> Database:
    """None -> the packaged database; a Database -> itself; a path -> that file or folder."""
    if spec is None:
        return packaged_database()
    if isinstance(spec, Database):
        return spec
    return Database.load(spec)
