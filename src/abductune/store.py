"""The measurement store: one SQLite file, safe for several processes writing at once.

It keeps every measurement (one row per context and config, so adding a config costs one
benchmark), the best config per context (a view), theories (generic JSON rows) and run
journals, so an interrupted tune resumes without re-measuring anything it committed:

    store = Store()                                   # $ABDUCTUNE_STORE or the user cache dir
    ctx = Context.of(problem, space, toolchain={"triton": "3.4.0"})
    with store.journal(ctx, "abduction", {"budget": 64}):
        result = run(strategy, evaluator, memo=store.memo(ctx, space),
                     on_batch=store.recorder(ctx))

Tables (schema version 1; `meta` holds `schema_version`):

- `contexts`: what a measurement is *of*: kernel name, kernel source hash, space fingerprint,
  problem key (`Problem.key()`), hardware name and toolchain (canonical JSON or a string)
  are its identity; dims, dtypes, kernel class and the shape bucket ride along.
- `measurements`: one row per (context, config): config (JSON, sorted keys) and its key (a
  hash of that JSON), status, time_ms, objective (time_ms when ok, else NULL), samples,
  compile_s, bench_s, registers, spills, smem_bytes, error, extra (JSON), run id, created.
- `runs`: the run journal: id, context, strategy, status (running | done | interrupted),
  started, finished, options and heuristics fired (JSON), pid and host.
- `theories`: id, kernel_class, regime, dtype_family, hardware_family, rule, support,
  refute, provenance, extra (JSON for any other keys), updated.
- views `best_configs` (the fastest ok measurement of each context, with the context's
  columns and its measurement count) and `measurement_rows` (measurements with their
  context's columns), for ad-hoc SQL.

Concurrency: WAL journal, `busy_timeout`, `synchronous=NORMAL` (a committed transaction
survives a killed process; only a power loss may drop the last few), every write one short
`BEGIN IMMEDIATE` transaction, retried with jittered back-off when SQLite still answers
"database is locked". A Store opened before a fork reopens its connection in the child.
WAL needs a local filesystem (not NFS).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import random
import socket
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

from .errors import SpaceError, StoreError
from .measurement import Measurement
from .problem import Problem
from .space import Space

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
ENV_VAR = "ABDUCTUNE_STORE"
KEEP_POLICIES = ("latest", "best")
RUN_STATUSES = ("running", "done", "interrupted")

T = TypeVar("T")


def default_path() -> Path:
    """`$ABDUCTUNE_STORE` if set, else `<user cache dir>/abductune/store.sqlite`."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("abductune")) / "store.sqlite"


def shape_bucket(dims: Mapping[str, int]) -> str:
    """Each dim rounded up to the next power of two, in name order: "K=4096,M=64,N=4096".
    Dims below 1 are kept as they are."""
    def up(v: int) -> int:
        v = int(v)
        return v if v < 1 else 1 << (v - 1).bit_length()

    return ",".join(f"{k}={up(v)}" for k, v in sorted(dims.items()))


# ----------------------------------------------------------------------------- JSON

def _json_default(o: Any) -> Any:
    if hasattr(o, "item") and callable(o.item):  # numpy scalars
        return o.item()
    if isinstance(o, (tuple, set, frozenset)):
        return list(o)
    if hasattr(o, "tolist"):  # numpy arrays
        return o.tolist()
    return repr(o)


def _dumps(o: Any) -> str:
    return json.dumps(o, sort_keys=True, separators=(",", ":"), default=_json_default)


def _tuplify(v: Any) -> Any:
    """JSON turns tuples into lists; config values must be hashable, so turn them back."""
    return tuple(_tuplify(x) for x in v) if isinstance(v, list) else v


def config_json(config: Mapping[str, Any]) -> str:
    """Canonical JSON of a config (sorted keys): what the store keeps and hashes."""
    return _dumps(dict(config))


def config_key(config: Mapping[str, Any]) -> str:
    """Stable hash of a config, independent of key order."""
    return hashlib.sha256(config_json(config).encode()).hexdigest()[:20]


def _toolchain_str(toolchain: Mapping[str, Any] | str | None) -> str:
    if toolchain is None:
        return ""
    if isinstance(toolchain, str):
        return toolchain
    return _dumps(dict(toolchain))


# ----------------------------------------------------------------------------- records

@dataclass(frozen=True)
class Context:
    """What measurements are of. Identity: kernel, source_hash, space_fingerprint,
    problem_key, hardware, toolchain; the other fields describe the problem."""

    kernel: str
    source_hash: str
    space_fingerprint: str
    problem_key: str
    dims: dict[str, int] = field(default_factory=dict)
    hardware: str = ""
    toolchain: str = ""  # canonical JSON (sorted keys) when given as a dict
    kernel_class: str = ""
    dtypes: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.toolchain, str):
            object.__setattr__(self, "toolchain", _toolchain_str(self.toolchain))
        object.__setattr__(self, "dims", {k: int(v) for k, v in dict(self.dims).items()})
        object.__setattr__(self, "dtypes", dict(self.dtypes))

    @classmethod
    def of(cls, problem: Problem, space: Space,
           toolchain: Mapping[str, Any] | str = "") -> "Context":
        return cls(kernel=problem.kernel, source_hash=problem.source_hash,
                   space_fingerprint=space.fingerprint(), problem_key=problem.key(),
                   dims=dict(problem.dims),
                   hardware=problem.hardware.name if problem.hardware else "",
                   toolchain=_toolchain_str(toolchain), kernel_class=problem.kernel_class,
                   dtypes=dict(problem.dtypes))

    @property
    def identity(self) -> tuple[str, str, str, str, str, str]:
        return (self.kernel, self.source_hash, self.space_fingerprint, self.problem_key,
                self.hardware, self.toolchain)

    @property
    def shape_bucket(self) -> str:
        return shape_bucket(self.dims)


@dataclass(frozen=True)
class BestConfig:
    """The fastest ok measurement of one context, with how many configs it has measured."""

    context: Context
    measurement: Measurement
    measured: int

    @property
    def shape_bucket(self) -> str:
        return self.context.shape_bucket

    @property
    def config(self) -> dict[str, Any]:
        return self.measurement.config


@dataclass(frozen=True)
class Run:
    """One entry of the run journal."""

    id: int
    context: Context
    strategy: str
    status: str
    started: float
    finished: float | None
    options: dict[str, Any]
    heuristics: list[str]
    pid: int | None
    host: str


# ----------------------------------------------------------------------------- schema

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS contexts (
    id INTEGER PRIMARY KEY,
    kernel TEXT NOT NULL, source_hash TEXT NOT NULL, space_fingerprint TEXT NOT NULL,
    problem_key TEXT NOT NULL, hardware TEXT NOT NULL, toolchain TEXT NOT NULL,
    kernel_class TEXT NOT NULL DEFAULT '', dims TEXT NOT NULL DEFAULT '{}',
    dtypes TEXT NOT NULL DEFAULT '{}', shape_bucket TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    UNIQUE (kernel, source_hash, space_fingerprint, problem_key, hardware, toolchain));
CREATE INDEX IF NOT EXISTS contexts_bucket
    ON contexts (source_hash, space_fingerprint, shape_bucket, hardware, toolchain);
CREATE TABLE IF NOT EXISTS measurements (
    context_id INTEGER NOT NULL REFERENCES contexts (id),
    config_key TEXT NOT NULL, config TEXT NOT NULL, status TEXT NOT NULL,
    time_ms REAL, objective REAL, samples TEXT NOT NULL DEFAULT '[]',
    compile_s REAL NOT NULL DEFAULT 0, bench_s REAL NOT NULL DEFAULT 0,
    registers INTEGER, spills INTEGER, smem_bytes INTEGER,
    error TEXT NOT NULL DEFAULT '', extra TEXT NOT NULL DEFAULT '{}',
    run_id INTEGER, created REAL NOT NULL,
    PRIMARY KEY (context_id, config_key));
CREATE INDEX IF NOT EXISTS measurements_best ON measurements (context_id, objective);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    context_id INTEGER NOT NULL REFERENCES contexts (id),
    strategy TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'done', 'interrupted')),
    started REAL NOT NULL, finished REAL,
    options TEXT NOT NULL DEFAULT '{}', heuristics TEXT NOT NULL DEFAULT '[]',
    pid INTEGER, host TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS runs_context ON runs (context_id, status);
CREATE TABLE IF NOT EXISTS theories (
    id TEXT PRIMARY KEY, kernel_class TEXT NOT NULL, regime TEXT NOT NULL DEFAULT '{}',
    dtype_family TEXT NOT NULL DEFAULT '', hardware_family TEXT NOT NULL DEFAULT '',
    rule TEXT NOT NULL DEFAULT '{}', support INTEGER NOT NULL DEFAULT 0,
    refute INTEGER NOT NULL DEFAULT 0, provenance TEXT NOT NULL DEFAULT '{}',
    extra TEXT NOT NULL DEFAULT '{}', updated REAL NOT NULL);
CREATE INDEX IF NOT EXISTS theories_class ON theories (kernel_class, hardware_family);
CREATE VIEW IF NOT EXISTS measurement_rows AS
    SELECT c.kernel, c.source_hash, c.space_fingerprint, c.problem_key, c.dims, c.dtypes,
           c.kernel_class, c.shape_bucket, c.hardware, c.toolchain, m.*
    FROM measurements m JOIN contexts c ON c.id = m.context_id;
CREATE VIEW IF NOT EXISTS best_configs AS
    SELECT c.kernel, c.source_hash, c.space_fingerprint, c.problem_key, c.dims, c.dtypes,
           c.kernel_class, c.shape_bucket, c.hardware, c.toolchain, b.*
    FROM (SELECT m.*,
                 ROW_NUMBER() OVER (PARTITION BY m.context_id
                                    ORDER BY m.objective IS NULL, m.objective,
                                             m.created DESC) AS rnk,
                 COUNT(*) OVER (PARTITION BY m.context_id) AS measured
          FROM measurements m) b
    JOIN contexts c ON c.id = b.context_id
    WHERE b.rnk = 1 AND b.objective IS NOT NULL;
"""

_TABLES = ("meta", "contexts", "measurements", "runs", "theories")

_CTX_COLS = ("kernel, source_hash, space_fingerprint, problem_key, hardware, toolchain, "
             "kernel_class, dims, dtypes")
_M_COLS = ("config, status, time_ms, samples, compile_s, bench_s, registers, spills, "
           "smem_bytes, error, extra")

_UPSERT = """
INSERT INTO measurements (context_id, config_key, config, status, time_ms, objective, samples,
    compile_s, bench_s, registers, spills, smem_bytes, error, extra, run_id, created)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (context_id, config_key) DO UPDATE SET
    config = excluded.config, status = excluded.status, time_ms = excluded.time_ms,
    objective = excluded.objective, samples = excluded.samples,
    compile_s = excluded.compile_s, bench_s = excluded.bench_s,
    registers = excluded.registers, spills = excluded.spills,
    smem_bytes = excluded.smem_bytes, error = excluded.error, extra = excluded.extra,
    run_id = excluded.run_id, created = excluded.created
WHERE ? = 'latest'
   OR (excluded.objective IS NOT NULL
       AND (measurements.objective IS NULL OR excluded.objective <= measurements.objective))
   OR (excluded.objective IS NULL AND measurements.objective IS NULL)
"""

_THEORY_FIELDS = ("id", "kernel_class", "regime", "dtype_family", "hardware_family", "rule",
                  "support", "refute", "provenance", "updated")


def _is_busy(e: sqlite3.Error) -> bool:
    msg = str(e).lower()
    return isinstance(e, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg)


def _row_measurement(row: Sequence[Any]) -> Measurement:
    (cfg, status, time_ms, samples, compile_s, bench_s, registers, spills, smem, error,
     extra) = row
    return Measurement(config={k: _tuplify(v) for k, v in json.loads(cfg).items()},
                       status=status, time_ms=time_ms, samples_ms=list(json.loads(samples)),
                       compile_s=float(compile_s), bench_s=float(bench_s), registers=registers,
                       spills=spills, smem_bytes=smem, error=error or "",
                       extra=dict(json.loads(extra)))


def _row_context(row: Sequence[Any]) -> Context:
    (kernel, source_hash, fp, pkey, hardware, toolchain, kclass, dims, dtypes) = row
    return Context(kernel, source_hash, fp, pkey, json.loads(dims), hardware, toolchain,
                   kclass, json.loads(dtypes))


def _log2_distance(a: Mapping[str, int], b: Mapping[str, int]) -> float:
    d = 0.0
    for k in set(a) | set(b):
        x, y = a.get(k), b.get(k)
        if x is None or y is None or x < 1 or y < 1:
            d += 0.0 if x == y else 64.0
        else:
            d += abs(math.log2(x) - math.log2(y))
    return d


# ----------------------------------------------------------------------------- store

class Store:
    """SQLite measurement store. `Store()` opens the default path; `Store(path)` any file
    (":memory:" for a private in-memory store). Use as a context manager or call close()."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0):
        if path is not None and str(path) == ":memory:":
            self.path = ":memory:"
        else:
            self.path = str(default_path() if path is None else Path(path).expanduser())
        self.timeout = float(timeout)
        self._lock = threading.RLock()
        self._stale: list[sqlite3.Connection] = []  # connections inherited over a fork
        self._db: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._closed = False
        if self.path != ":memory:":
            p = Path(self.path)
            if p.is_dir():
                raise StoreError(f"store path {self.path} is a directory; pass a file path "
                                 f"(or set {ENV_VAR})")
            try:
                p.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create the folder for store {self.path}: {e}; pass "
                                 f"another path or set {ENV_VAR}") from None
        self._db = self._open()

    # -- connection and transactions
    def _open(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None,
                                 check_same_thread=False)
        except sqlite3.Error as e:
            raise StoreError(f"cannot open store {self.path}: {e}; check the path and its "
                             f"permissions, or pass another path (or set {ENV_VAR})") from None
        try:
            db.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            self._retry(lambda: db.execute("PRAGMA journal_mode = WAL").fetchone())
            db.execute("PRAGMA synchronous = NORMAL")
            self._in_tx(db, self._init_schema)
        except sqlite3.DatabaseError as e:
            db.close()
            msg = str(e).lower()
            if any(w in msg for w in ("not a database", "encrypted", "malformed", "corrupt")):
                raise StoreError(f"{self.path} is not an abductune store ({e}); move it away "
                                 f"or pass another path (or set {ENV_VAR})") from None
            raise StoreError(f"cannot open store {self.path}: {e}; check the file and its "
                             f"permissions, or pass another path (or set {ENV_VAR})") from None
        except BaseException:
            db.close()
            raise
        return db

    def _init_schema(self, db: sqlite3.Connection) -> None:
        tables = {r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
        if "meta" in tables:
            row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            try:
                version = int(row[0]) if row else None
            except ValueError:
                version = None
            if version is None:
                raise StoreError(f"{self.path} has no readable schema_version in its meta "
                                 "table; it is not an abductune store: move it away or pass "
                                 f"another path (or set {ENV_VAR})")
            if version > SCHEMA_VERSION:
                raise StoreError(f"store {self.path} has schema version {version}, newer than "
                                 f"this abductune understands ({SCHEMA_VERSION}); upgrade "
                                 "abductune, or pass another store path (or set "
                                 f"{ENV_VAR})")
            # version < SCHEMA_VERSION: migrations go here when there is more than one version
            return
        if tables:
            raise StoreError(f"{self.path} is a SQLite database but not an abductune store "
                             f"(tables: {', '.join(sorted(tables))}); pass another path (or set "
                             f"{ENV_VAR})")
        # one statement at a time: executescript() would commit the open transaction first
        for stmt in _SCHEMA.split(";"):
            if stmt.strip():
                db.execute(stmt)
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                   (str(SCHEMA_VERSION),))
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('created', ?)",
                   (repr(time.time()),))

    def _conn(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"store {self.path} is closed")
        if os.getpid() != self._pid:  # forked: never use the parent's connection here
            if self._db is not None:
                self._stale.append(self._db)
            self._pid = os.getpid()
            self._db = self._open()
        assert self._db is not None
        return self._db

    def _retry(self, fn: Callable[[], T]) -> T:
        """Run fn, retrying with jittered back-off while SQLite says the file is locked."""
        deadline = time.monotonic() + self.timeout
        delay = 0.005
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as e:
                if not _is_busy(e):
                    raise
                if time.monotonic() >= deadline:
                    raise StoreError(f"store {self.path} stayed locked for {self.timeout:g} s "
                                     "(another process holds a long transaction?); retry, or "
                                     "pass a larger timeout") from None
                time.sleep(delay * random.uniform(0.5, 1.5))
                delay = min(delay * 2, 0.25)

    def _in_tx(self, db: sqlite3.Connection, body: Callable[[sqlite3.Connection], T]) -> T:
        def attempt() -> T:
            db.execute("BEGIN IMMEDIATE")
            try:
                out = body(db)
                db.execute("COMMIT")
                return out
            except BaseException:
                if db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        db.execute("ROLLBACK")
                raise
        return self._retry(attempt)

    def _write(self, body: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            db = self._conn()
            try:
                return self._in_tx(db, body)
            except sqlite3.DatabaseError as e:
                raise StoreError(f"store {self.path}: {e}") from e

    def _read(self, body: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            db = self._conn()
            try:
                return self._retry(lambda: body(db))
            except sqlite3.DatabaseError as e:
                raise StoreError(f"store {self.path}: {e}") from e

    def close(self) -> None:
        with self._lock:
            if not self._closed and self._db is not None and os.getpid() == self._pid:
                self._db.close()
            self._db = None
            self._closed = True

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.path!r})"

    # -- contexts
    @staticmethod
    def _ensure_context(db: sqlite3.Connection, ctx: Context) -> int:
        db.execute(f"INSERT OR IGNORE INTO contexts ({_CTX_COLS}, shape_bucket, created) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (*ctx.identity, ctx.kernel_class, _dumps(ctx.dims), _dumps(ctx.dtypes),
                    ctx.shape_bucket, time.time()))
        return Store._context_id(db, ctx)  # type: ignore[return-value]

    @staticmethod
    def _context_id(db: sqlite3.Connection, ctx: Context) -> int | None:
        row = db.execute("SELECT id FROM contexts WHERE kernel = ? AND source_hash = ? AND "
                         "space_fingerprint = ? AND problem_key = ? AND hardware = ? AND "
                         "toolchain = ?", ctx.identity).fetchone()
        return None if row is None else int(row[0])

    # -- measurements
    def put(self, ctx: Context, measurement: Measurement, *, keep: str = "latest",
            run_id: int | None = None) -> None:
        """Store one measurement. A config already stored for `ctx` is replaced when
        keep="latest" (the default: a re-measurement is deliberate, e.g. a confirmation),
        or only when the new one is at least as good when keep="best" (ok beats any failure,
        then lower time; a failure replaces only a failure)."""
        self.put_many(ctx, [measurement], keep=keep, run_id=run_id)

    def put_many(self, ctx: Context, measurements: Iterable[Measurement], *,
                 keep: str = "latest", run_id: int | None = None) -> None:
        """Store several measurements in one transaction (see `put` for `keep`)."""
        if keep not in KEEP_POLICIES:
            raise StoreError(f"keep={keep!r} is not a store policy; use one of {KEEP_POLICIES}")
        now = time.time()
        rows = []
        for m in measurements:
            cj = config_json(m.config)
            rows.append((hashlib.sha256(cj.encode()).hexdigest()[:20], cj, m.status, m.time_ms,
                         m.time_ms if m.ok else None, _dumps(list(m.samples_ms)),
                         float(m.compile_s), float(m.bench_s), m.registers, m.spills,
                         m.smem_bytes, m.error or "", _dumps(dict(m.extra)), run_id, now, keep))
        if not rows:
            return

        def body(db: sqlite3.Connection) -> None:
            cid = self._ensure_context(db, ctx)
            db.executemany(_UPSERT, [(cid, *r) for r in rows])

        self._write(body)

    def recorder(self, ctx: Context, *, keep: str = "latest",
                 run_id: int | None = None) -> Callable[[Sequence[Measurement]], None]:
        """A callback for `search.base.run(on_batch=...)` that stores each batch."""
        return lambda ms: self.put_many(ctx, ms, keep=keep, run_id=run_id)

    def get(self, ctx: Context, config: Mapping[str, Any]) -> Measurement | None:
        def body(db: sqlite3.Connection) -> Measurement | None:
            row = db.execute(f"SELECT {_M_COLS} FROM measurements m JOIN contexts c ON "
                             "c.id = m.context_id WHERE c.kernel = ? AND c.source_hash = ? AND "
                             "c.space_fingerprint = ? AND c.problem_key = ? AND c.hardware = ? "
                             "AND c.toolchain = ? AND m.config_key = ?",
                             (*ctx.identity, config_key(config))).fetchone()
            return None if row is None else _row_measurement(row)
        return self._read(body)

    def measurements(self, ctx: Context) -> list[Measurement]:
        """Every measurement of `ctx`, in the order their configs were first stored."""
        def body(db: sqlite3.Connection) -> list[Measurement]:
            cid = self._context_id(db, ctx)
            if cid is None:
                return []
            cur = db.execute(f"SELECT {_M_COLS} FROM measurements WHERE context_id = ? "
                             "ORDER BY rowid", (cid,))
            return [_row_measurement(r) for r in cur]
        return self._read(body)

    def memo(self, ctx: Context, space: Space, *,
             exclude_statuses: Iterable[str] = ()) -> dict[tuple, Measurement]:
        """Measurements of `ctx` keyed by `space.key(config)`: the `memo` that
        `search.base.run` / `Search` take, so a resumed run re-measures nothing. Statuses in
        `exclude_statuses` (e.g. "timeout") are left out so they get measured again."""
        skip = set(exclude_statuses)
        out: dict[tuple, Measurement] = {}
        for m in self.measurements(ctx):
            if m.status in skip:
                continue
            try:
                out[space.key(m.config)] = m
            except SpaceError:
                log.warning("store %s: config %s of %s does not fit the space; not reused",
                            self.path, m.config, ctx.kernel)
        return out

    def best(self, ctx: Context) -> Measurement | None:
        """The fastest ok measurement of `ctx` (failures never count), or None."""
        def body(db: sqlite3.Connection) -> Measurement | None:
            cid = self._context_id(db, ctx)
            if cid is None:
                return None
            row = db.execute(f"SELECT {_M_COLS} FROM measurements WHERE context_id = ? AND "
                             "objective IS NOT NULL ORDER BY objective, created DESC LIMIT 1",
                             (cid,)).fetchone()
            return None if row is None else _row_measurement(row)
        return self._read(body)

    def best_configs(self, kernel: str | None = None, hardware: str | None = None, *,
                     like: Context | None = None) -> list[BestConfig]:
        """The best config of every context (that has an ok measurement), optionally only
        for a kernel name and/or hardware name. With `like`, only contexts in its group
        (source hash, space fingerprint, shape bucket, hardware, toolchain, dtypes), nearest
        shapes first (log2 distance of dims); otherwise ordered by kernel, hardware, bucket."""
        where, args = [], []
        if kernel is not None:
            where.append("kernel = ?")
            args.append(kernel)
        if hardware is not None:
            where.append("hardware = ?")
            args.append(hardware)
        if like is not None:
            where.append("source_hash = ? AND space_fingerprint = ? AND shape_bucket = ? AND "
                         "hardware = ? AND toolchain = ? AND dtypes = ?")
            args += [like.source_hash, like.space_fingerprint, like.shape_bucket, like.hardware,
                     like.toolchain, _dumps(like.dtypes)]
        sql = (f"SELECT {_CTX_COLS}, {_M_COLS}, measured FROM best_configs"
               + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY kernel, hardware, shape_bucket, problem_key, toolchain")

        def body(db: sqlite3.Connection) -> list[BestConfig]:
            return [BestConfig(_row_context(r[:9]), _row_measurement(r[9:20]), int(r[20]))
                    for r in db.execute(sql, args)]
        rows = self._read(body)
        if like is not None:
            rows.sort(key=lambda b: _log2_distance(b.context.dims, like.dims))
        return rows

    def best_nearby(self, ctx: Context) -> BestConfig | None:
        """The best config of `ctx` itself if measured, else of the nearest shape in its
        group (same kernel source, space, shape bucket, hardware, toolchain, dtypes)."""
        rows = self.best_configs(like=ctx)
        exact = [b for b in rows if b.context.identity == ctx.identity]
        return exact[0] if exact else (rows[0] if rows else None)

    # -- run journal
    def start_run(self, ctx: Context, strategy: str, options: Mapping[str, Any] | None = None,
                  heuristics: Sequence[str] = ()) -> int:
        """Record that a tune of `ctx` started; returns the run id."""
        def body(db: sqlite3.Connection) -> int:
            cid = self._ensure_context(db, ctx)
            cur = db.execute("INSERT INTO runs (context_id, strategy, status, started, options, "
                             "heuristics, pid, host) VALUES (?, ?, 'running', ?, ?, ?, ?, ?)",
                             (cid, strategy, time.time(), _dumps(dict(options or {})),
                              _dumps(list(heuristics)), os.getpid(), socket.gethostname()))
            return int(cur.lastrowid)  # type: ignore[arg-type]
        return self._write(body)

    def finish_run(self, run_id: int, status: str = "done") -> None:
        """Mark a run done or interrupted."""
        if status not in RUN_STATUSES[1:]:
            raise StoreError(f"finish_run status {status!r}: use 'done' or 'interrupted'")

        def body(db: sqlite3.Connection) -> int:
            return db.execute("UPDATE runs SET status = ?, finished = ? WHERE id = ?",
                              (status, time.time(), int(run_id))).rowcount
        if self._write(body) == 0:
            raise StoreError(f"store {self.path} has no run with id {run_id}")

    @contextlib.contextmanager
    def journal(self, ctx: Context, strategy: str, options: Mapping[str, Any] | None = None,
                heuristics: Sequence[str] = ()) -> Iterator[int]:
        """`with store.journal(ctx, ...) as run_id:` marks the run done on a normal exit and
        interrupted on any exception (KeyboardInterrupt included). A killed process leaves
        it 'running', which `unfinished_runs` reports as well."""
        run_id = self.start_run(ctx, strategy, options, heuristics)
        try:
            yield run_id
        except BaseException:
            with contextlib.suppress(Exception):
                self.finish_run(run_id, "interrupted")
            raise
        self.finish_run(run_id, "done")

    def runs(self, ctx: Context | None = None, *, unfinished: bool = False) -> list[Run]:
        """Journal entries (of `ctx`, or all), oldest first."""
        where, args = [], []
        if ctx is not None:
            where.append("c.kernel = ? AND c.source_hash = ? AND c.space_fingerprint = ? AND "
                         "c.problem_key = ? AND c.hardware = ? AND c.toolchain = ?")
            args += list(ctx.identity)
        if unfinished:
            where.append("r.status != 'done'")
        cols = ", ".join(f"c.{c.strip()}" for c in _CTX_COLS.split(","))
        sql = (f"SELECT {cols}, r.id, r.strategy, r.status, r.started, r.finished, r.options, "
               "r.heuristics, r.pid, r.host FROM runs r JOIN contexts c ON c.id = r.context_id"
               + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY r.id")

        def body(db: sqlite3.Connection) -> list[Run]:
            return [Run(int(r[9]), _row_context(r[:9]), r[10], r[11], r[12], r[13],
                        json.loads(r[14]), json.loads(r[15]), r[16], r[17] or "")
                    for r in db.execute(sql, args)]
        return self._read(body)

    def unfinished_runs(self, ctx: Context | None = None) -> list[Run]:
        """Runs still 'running' (killed, or alive in another process) or 'interrupted'."""
        return self.runs(ctx, unfinished=True)

    # -- theories
    def put_theory(self, theory: Mapping[str, Any]) -> str:
        """Insert or replace a theory row; returns its id. Keys: kernel_class (required),
        id (default: a hash of class, regime, families and rule), regime, dtype_family,
        hardware_family, rule, support, refute, provenance; any other key is kept too and
        given back by `theories()`."""
        t = dict(theory)
        if not t.get("kernel_class"):
            raise StoreError(f"a theory needs a kernel_class; got keys {sorted(t)}")
        regime, rule = t.pop("regime", {}), t.pop("rule", {})
        dfam, hfam = str(t.pop("dtype_family", "") or ""), str(t.pop("hardware_family", "") or "")
        kclass = str(t.pop("kernel_class"))
        tid = t.pop("id", None) or hashlib.sha256(
            _dumps([kclass, regime, dfam, hfam, rule]).encode()).hexdigest()[:16]
        support, refute = int(t.pop("support", 0) or 0), int(t.pop("refute", 0) or 0)
        provenance = t.pop("provenance", {})
        t.pop("updated", None)
        row = (str(tid), kclass, _dumps(regime), dfam, hfam, _dumps(rule), support, refute,
               _dumps(provenance), _dumps(t), time.time())
        self._write(lambda db: db.execute(
            "INSERT OR REPLACE INTO theories (id, kernel_class, regime, dtype_family, "
            "hardware_family, rule, support, refute, provenance, extra, updated) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row))
        return str(tid)

    def theories(self, kernel_class: str | None = None, hardware_family: str | None = None,
                 dtype_family: str | None = None) -> list[dict[str, Any]]:
        """Theory rows as dicts (what put_theory took, plus id and updated)."""
        where, args = [], []
        for col, val in (("kernel_class", kernel_class), ("hardware_family", hardware_family),
                         ("dtype_family", dtype_family)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        sql = ("SELECT id, kernel_class, regime, dtype_family, hardware_family, rule, support, "
               "refute, provenance, updated, extra FROM theories"
               + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY kernel_class, id")

        def body(db: sqlite3.Connection) -> list[dict[str, Any]]:
            out = []
            for r in db.execute(sql, args):
                d = {**json.loads(r[10]), **dict(zip(_THEORY_FIELDS, r[:10]))}
                for k in ("regime", "rule", "provenance"):
                    d[k] = json.loads(d[k])
                out.append(d)
            return out
        return self._read(body)

    def delete_theory(self, theory_id: str) -> bool:
        return self._write(lambda db: db.execute("DELETE FROM theories WHERE id = ?",
                                                 (theory_id,)).rowcount) > 0

    # -- housekeeping
    def stats(self) -> dict[str, int]:
        """Row counts per table, plus ok measurements and unfinished runs."""
        def body(db: sqlite3.Connection) -> dict[str, int]:
            out = {t: int(db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0])
                   for t in _TABLES[1:]}
            out["ok_measurements"] = int(db.execute(
                "SELECT COUNT(*) FROM measurements WHERE objective IS NOT NULL").fetchone()[0])
            out["unfinished_runs"] = int(db.execute(
                "SELECT COUNT(*) FROM runs WHERE status != 'done'").fetchone()[0])
            return out
        return self._read(body)

    def clear(self, kernel: str | None = None) -> int:
        """Delete the contexts, measurements and runs of `kernel` (theories are per kernel
        class and stay), or with no kernel everything, theories included. Returns how many
        measurements went."""
        def body(db: sqlite3.Connection) -> int:
            if kernel is None:
                n = db.execute("DELETE FROM measurements").rowcount
                for t in ("runs", "contexts", "theories"):
                    db.execute(f"DELETE FROM {t}")
                return n
            sub = "(SELECT id FROM contexts WHERE kernel = ?)"
            n = db.execute(f"DELETE FROM measurements WHERE context_id IN {sub}",
                           (kernel,)).rowcount
            db.execute(f"DELETE FROM runs WHERE context_id IN {sub}", (kernel,))
            db.execute("DELETE FROM contexts WHERE kernel = ?", (kernel,))
            return n
        return self._write(body)
