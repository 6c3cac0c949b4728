"""The measurement store: one SQLite file, safe for several processes writing at once.

Every measurement is appended with an id, the run that took it and its kind (search, seed,
remeasure, baseline, verify, import), never overwritten, so evidence can cite what it saw.
Views give the latest row per config, the best row per config and the best config per
context. Run journals let an interrupted or finished tune resume spending only what is left
of its budget; claims let two processes tuning one problem measure each config once.

    store = Store()                        # $ABDUCTUNE_STORE or the user cache dir; ":memory:"
    ctx = Context.of(problem, space, toolchain="triton=3.6")
    rows = store.put_many(ctx, measurements, run_id=run, kind="search")   # rows carry ids

Tables (schema version 2; `meta` holds `schema_version`; a v1 store is migrated on open, in one
transaction, every v1 row kept as a 'search' row): `contexts` (what a measurement is *of*, with
the classification as columns), `measurements`, `runs`, `claims`, `theories`; views
`measurement_rows`, `latest_measurements`, `config_best`, `best_configs`. Connection handling
and the schema live in `_sqlite.py`.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import socket
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from ..errors import SpaceError, StoreError
from ..measurement import KINDS, Measurement
from ..problem import Problem
from ..space import Space
from ._sqlite import ENV_VAR, SCHEMA_VERSION, TABLES, Connection

log = logging.getLogger(__name__)

RUN_STATUSES = ("running", "done", "interrupted")
# kinds whose rows a strategy saw as its own answers (what a resumed run replays and counts)
SEARCH_KINDS = ("search", "seed", "remeasure")

__all__ = ["Store", "Context", "BestConfig", "Run", "config_key", "config_json", "default_path",
           "ENV_VAR", "SCHEMA_VERSION", "RUN_STATUSES", "SEARCH_KINDS"]


def default_path() -> Path:
    """`$ABDUCTUNE_STORE` if set, else `<user cache dir>/abductune/store.sqlite`."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("abductune")) / "store.sqlite"


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


def _classification(problem_like: Mapping[str, Any]) -> dict[str, str]:
    """kernel class, variant, dtype family, fallback category and shape bucket of a problem,
    from the one shared classifier."""
    from ..classify import classify
    p = Problem(kernel=problem_like.get("kernel", ""), kernel_class=problem_like.get("kernel_class") or "other",
                dims=dict(problem_like.get("dims") or {}), dtypes=dict(problem_like.get("dtypes") or {}))
    try:
        c = classify(p)
        return {"kernel_class": c.kernel_class, "variant": c.variant, "dtype_family": c.dtype_family,
                "fallback": c.fallback, "bucket": c.bucket}
    except Exception as e:  # noqa: BLE001 - classification is descriptive; never block a store write
        log.warning("classifying %s failed: %s", p.kernel, e)
        return {"kernel_class": p.kernel_class, "variant": "", "dtype_family": "", "fallback": "",
                "bucket": ""}


# ----------------------------------------------------------------------------- records

EVIDENCE_RUNS = 50  # run ids kept as provenance of a theory's evidence


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

    def __hash__(self) -> int:
        return hash(self.identity)

    @classmethod
    def of(cls, problem: Problem, space: Space, toolchain: Mapping[str, Any] | str = "") -> "Context":
        return cls(kernel=problem.kernel, source_hash=problem.source_hash,
                   space_fingerprint=space.fingerprint(), problem_key=problem.key(),
                   dims=dict(problem.dims), hardware=problem.hardware.name if problem.hardware else "",
                   toolchain=_toolchain_str(toolchain), kernel_class=problem.kernel_class,
                   dtypes=dict(problem.dtypes))

    @property
    def identity(self) -> tuple[str, str, str, str, str, str]:
        return (self.kernel, self.source_hash, self.space_fingerprint, self.problem_key,
                self.hardware, self.toolchain)

    @property
    def classification(self) -> dict[str, str]:
        return _classification({"kernel": self.kernel, "kernel_class": self.kernel_class,
                                "dims": self.dims, "dtypes": self.dtypes})

    @property
    def shape_bucket(self) -> str:
        return self.classification["bucket"]


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
    heuristics: list[Any]
    pid: int | None
    host: str
    tune_key: str = ""
    resumes: int | None = None  # the run this one continued
    winner_id: int | None = None
    summary: dict[str, Any] = field(default_factory=dict)


_CTX_COLS = ("kernel, source_hash, space_fingerprint, problem_key, hardware, toolchain, "
             "kernel_class, dims, dtypes")
_M_COLS = ("config, status, time_ms, samples, compile_s, bench_s, registers, spills, smem_bytes, "
           "frac_peak_flops, frac_peak_bw, error, extra, id, run_id, kind")
_N_M = 16
_RUN_COLS = ("r.id, r.strategy, r.status, r.started, r.finished, r.options, r.heuristics, r.pid, "
             "r.host, r.tune_key, r.resumes, r.winner_id, r.summary")
_IDENTITY_WHERE = ("kernel = ? AND source_hash = ? AND space_fingerprint = ? AND problem_key = ? "
                   "AND hardware = ? AND toolchain = ?")

_INSERT = """
INSERT INTO measurements (context_id, config_key, config, status, time_ms, objective, samples,
    compile_s, bench_s, registers, spills, smem_bytes, frac_peak_flops, frac_peak_bw, error,
    extra, run_id, kind, created)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""


def _row_measurement(row: Sequence[Any]) -> Measurement:
    (cfg, status, time_ms, samples, compile_s, bench_s, registers, spills, smem, ff, fb, error,
     extra, mid, run_id, kind) = row
    return Measurement(config={k: _tuplify(v) for k, v in json.loads(cfg).items()},
                       status=status, time_ms=time_ms, samples_ms=tuple(json.loads(samples)),
                       compile_s=float(compile_s), bench_s=float(bench_s), registers=registers,
                       spills=spills, smem_bytes=smem, frac_peak_flops=ff, frac_peak_bw=fb,
                       error=error or "", extra=dict(json.loads(extra)), id=int(mid), run_id=run_id,
                       kind=kind)


def _row_context(row: Sequence[Any]) -> Context:
    (kernel, source_hash, fp, pkey, hardware, toolchain, kclass, dims, dtypes) = row
    return Context(kernel, source_hash, fp, pkey, json.loads(dims), hardware, toolchain, kclass,
                   json.loads(dtypes))


def _row_run(ctx: Context, r: Sequence[Any]) -> Run:
    return Run(int(r[0]), ctx, r[1], r[2], r[3], r[4], json.loads(r[5]), json.loads(r[6]), r[7],
               r[8] or "", r[9] or "", r[10], r[11], json.loads(r[12] or "{}"))


def _log2_distance(a: Mapping[str, int], b: Mapping[str, int]) -> float:
    d = 0.0
    for k in set(a) | set(b):
        x, y = a.get(k), b.get(k)
        if x is None or y is None or x < 1 or y < 1:
            d += 0.0 if x == y else 64.0
        else:
            d += abs(math.log2(x) - math.log2(y))
    return d


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ----------------------------------------------------------------------------- store

class Store:
    """SQLite measurement store. `Store()` opens the default path; `Store(path)` any file
    (":memory:" for a private in-memory store). Use as a context manager or call close().
    A file abductune cannot write (or `read_only=True`) is opened read-only: reads answer,
    and the first write raises StoreError at once, naming the file and the fix."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0,
                 must_exist: bool = False, read_only: bool = False):
        if path is not None and str(path) == ":memory:":
            self.path = ":memory:"
        else:
            self.path = str(default_path() if path is None else Path(path).expanduser())
            if must_exist and not Path(self.path).exists():
                raise StoreError(f"store {self.path} does not exist; check the path (a new store is "
                                 "only created where a tune writes)")
        self.timeout = float(timeout)
        self._c = Connection(self.path, timeout, _classification, read_only=read_only)
        self._host = socket.gethostname()

    @property
    def read_only(self) -> bool:
        """Whether this store only answers (a write raises StoreError at once)."""
        return self._c.read_only

    def read_only_error(self) -> StoreError:
        return StoreError(self._c.read_only_message())

    # -- plumbing
    def _write(self, body: Any) -> Any:
        return self._c.write(body)

    def _read(self, body: Any) -> Any:
        return self._c.read(body)

    def execute(self, sql: str, args: Sequence[Any] = ()) -> list[tuple]:
        """Run a read-only SQL query (for reports and ad-hoc questions); returns all rows."""
        return self._read(lambda db: db.execute(sql, tuple(args)).fetchall())

    def close(self) -> None:
        self._c.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.path!r})"

    # -- contexts
    @staticmethod
    def _ensure_context(db: sqlite3.Connection, ctx: Context) -> int:
        cid = Store._context_id(db, ctx)
        if cid is not None:
            return cid
        c = ctx.classification
        db.execute(f"INSERT OR IGNORE INTO contexts ({_CTX_COLS}, shape_bucket, variant, dtype_family, "
                   "fallback, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (*ctx.identity, ctx.kernel_class, _dumps(ctx.dims), _dumps(ctx.dtypes), c["bucket"],
                    c["variant"], c["dtype_family"], c["fallback"], time.time()))
        return Store._context_id(db, ctx)  # type: ignore[return-value]

    @staticmethod
    def _context_id(db: sqlite3.Connection, ctx: Context) -> int | None:
        row = db.execute(f"SELECT id FROM contexts WHERE {_IDENTITY_WHERE}", ctx.identity).fetchone()
        return None if row is None else int(row[0])

    # -- measurements
    def put(self, ctx: Context, measurement: Measurement, *, run_id: int | None = None,
            kind: str | None = None) -> Measurement:
        """Append one measurement; returns it with its id, run id and kind."""
        return self.put_many(ctx, [measurement], run_id=run_id, kind=kind)[0]

    def put_many(self, ctx: Context, measurements: Iterable[Measurement], *, run_id: int | None = None,
                 kind: str | None = None) -> list[Measurement]:
        """Append measurements in one transaction. `kind` (one of KINDS) overrides each
        measurement's own; returns them with ids assigned, in order."""
        ms = list(measurements)
        if kind is not None and kind not in KINDS:
            raise StoreError(f"measurement kind {kind!r} is not one of {KINDS}")
        if not ms:
            return []
        now = time.time()
        rows = []
        for m in ms:
            cj = config_json(m.config)
            rows.append((hashlib.sha256(cj.encode()).hexdigest()[:20], cj, m.status.value, m.time_ms,
                         m.time_ms if m.ok else None, _dumps(list(m.samples_ms)), float(m.compile_s),
                         float(m.bench_s), m.registers, m.spills, m.smem_bytes, m.frac_peak_flops,
                         m.frac_peak_bw, m.error or "", _dumps(dict(m.extra)),
                         run_id if run_id is not None else m.run_id, kind or m.kind, now))

        def body(db: sqlite3.Connection) -> list[int]:
            cid = self._ensure_context(db, ctx)
            ids = []
            for r in rows:
                ids.append(int(db.execute(_INSERT, (cid, *r)).lastrowid))  # type: ignore[arg-type]
            return ids
        ids = self._write(body)
        return [m.replace(id=i, run_id=r[15], kind=r[16]) for m, i, r in zip(ms, ids, rows)]

    def _rows(self, ctx: Context, where: str = "", args: Sequence[Any] = (), view: str = "measurements",
              order: str = "id") -> list[Measurement]:
        def body(db: sqlite3.Connection) -> list[Measurement]:
            cid = self._context_id(db, ctx)
            if cid is None:
                return []
            sql = f"SELECT {_M_COLS} FROM {view} WHERE context_id = ? {where} ORDER BY {order}"
            return [_row_measurement(r) for r in db.execute(sql, (cid, *args))]
        return self._read(body)

    def get(self, ctx: Context, config: Mapping[str, Any], *, which: str = "latest") -> Measurement | None:
        """The latest (or with which="best", the fastest) row of `config`, or None."""
        view = {"latest": "latest_measurements", "best": "config_best"}.get(which)
        if view is None:
            raise StoreError(f"get(which={which!r}): use 'latest' or 'best'")
        rows = self._rows(ctx, "AND config_key = ?", (config_key(config),), view=view)
        return rows[0] if rows else None

    def measurements(self, ctx: Context, *, kinds: Sequence[str] | None = None,
                     run_ids: Sequence[int] | None = None, after_id: int = 0) -> list[Measurement]:
        """Every row of `ctx` in the order they were appended (optionally only some kinds,
        some runs, or rows newer than `after_id`)."""
        where, args = "AND id > ?", [after_id]
        if kinds is not None:
            where += f" AND kind IN ({','.join('?' * len(kinds))})"
            args += list(kinds)
        if run_ids is not None:
            where += f" AND run_id IN ({','.join('?' * len(run_ids))})"
            args += list(run_ids)
        return self._rows(ctx, where, args)

    def latest(self, ctx: Context) -> list[Measurement]:
        """The latest row of every config of `ctx` (the `latest_measurements` view)."""
        return self._rows(ctx, view="latest_measurements")

    def by_id(self, ids: Iterable[int]) -> list[Measurement]:
        ids = [int(i) for i in ids]
        if not ids:
            return []
        rows = self._read(lambda db: db.execute(
            f"SELECT {_M_COLS} FROM measurements WHERE id IN ({','.join('?' * len(ids))})", ids).fetchall())
        got = {int(r[13]): _row_measurement(r) for r in rows}
        return [got[i] for i in ids if i in got]

    def memo(self, ctx: Context, space: Space, *, exclude_statuses: Iterable[str] = (),
             kinds: Sequence[str] = SEARCH_KINDS + ("baseline", "import")) -> dict[tuple, Measurement]:
        """The first row of each config of `ctx`, keyed by `space.key(config)`: the answers a
        search saw, so a resumed run replays its path and re-measures nothing. Statuses in
        `exclude_statuses` (e.g. "timeout") are left out so they get measured again."""
        skip = set(exclude_statuses)
        out: dict[tuple, Measurement] = {}
        for m in self.measurements(ctx, kinds=kinds):
            if m.status in skip:
                continue
            try:
                k = space.key(m.config)
            except SpaceError:
                if "impl" not in m.config:  # an implementation baseline is not a config
                    log.warning("store %s: config %s of %s does not fit the space; not reused",
                                self.path, m.config, ctx.kernel)
                continue
            out.setdefault(k, m)
        return out

    def best(self, ctx: Context) -> Measurement | None:
        """The fastest ok row of `ctx` (failures never count), or None."""
        rows = self._rows(ctx, "AND objective IS NOT NULL", order="objective, id DESC LIMIT 1")
        return rows[0] if rows else None

    def best_configs(self, kernel: str | None = None, hardware: str | None = None, *,
                     like: Context | None = None, kernel_class: str | None = None,
                     fallback: str | None = None, dtype_family: str | None = None) -> list[BestConfig]:
        """The best config of every context with an ok measurement, filtered by kernel name,
        hardware (a prefix: "H100" matches "H100-SXM"), class, fallback category or dtype
        family. With `like`, only contexts in its group (source hash, space, shape bucket,
        hardware, toolchain, dtypes), nearest shapes first (log2 distance of dims)."""
        where, args = [], []
        for col, val in (("kernel", kernel), ("kernel_class", kernel_class), ("fallback", fallback),
                         ("dtype_family", dtype_family)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        if hardware is not None:
            where.append("(hardware = ? OR hardware LIKE ?)")
            args += [hardware, hardware + "%"]
        if like is not None:
            where.append("source_hash = ? AND space_fingerprint = ? AND shape_bucket = ? AND "
                         "hardware = ? AND toolchain = ? AND dtypes = ?")
            args += [like.source_hash, like.space_fingerprint, like.shape_bucket, like.hardware,
                     like.toolchain, _dumps(like.dtypes)]
        sql = (f"SELECT {_CTX_COLS}, {_M_COLS}, measured FROM best_configs"
               + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY kernel, hardware, shape_bucket, problem_key, toolchain")

        def body(db: sqlite3.Connection) -> list[BestConfig]:
            return [BestConfig(_row_context(r[:9]), _row_measurement(r[9:9 + _N_M]), int(r[9 + _N_M]))
                    for r in db.execute(sql, args)]
        rows = self._read(body)
        if like is not None:
            rows.sort(key=lambda b: _log2_distance(b.context.dims, like.dims))
        return rows

    def best_nearby(self, ctx: Context) -> BestConfig | None:
        """The best config of `ctx` itself if measured, else of the nearest shape in its group."""
        rows = self.best_configs(like=ctx)
        exact = [b for b in rows if b.context.identity == ctx.identity]
        return exact[0] if exact else (rows[0] if rows else None)

    # -- claims: two processes tuning one problem measure each config once
    def claim(self, ctx: Context, configs: Sequence[Mapping[str, Any]], run_id: int) -> list[bool]:
        """Try to claim each config for `run_id`; True where this run should measure it. A
        config that already has a row (another process measured it since this run read its
        memo) is not claimed; a claim held by a dead process on this host, or older than an
        hour, is taken over."""
        keys = [config_key(c) for c in configs]
        pid, now = os.getpid(), time.time()

        def body(db: sqlite3.Connection) -> list[bool]:
            cid = self._ensure_context(db, ctx)
            out = []
            for k in keys:
                if db.execute("SELECT 1 FROM measurements WHERE context_id = ? AND config_key = ? LIMIT 1",
                              (cid, k)).fetchone() is not None:
                    out.append(False)
                    continue
                row = db.execute("SELECT run_id, pid, host, claimed FROM claims WHERE context_id = ? AND "
                                 "config_key = ?", (cid, k)).fetchone()
                stale = row is not None and (row[0] == run_id or now - row[3] > 3600
                                             or (row[2] == self._host and not pid_alive(row[1])))
                if row is None or stale:
                    db.execute("INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?, ?, ?)",
                               (cid, k, run_id, pid, self._host, now))
                    out.append(True)
                else:
                    out.append(False)
            return out
        return self._write(body)

    def release(self, ctx: Context, configs: Sequence[Mapping[str, Any]]) -> None:
        keys = [config_key(c) for c in configs]

        def body(db: sqlite3.Connection) -> None:
            cid = self._context_id(db, ctx)
            if cid is not None:
                db.executemany("DELETE FROM claims WHERE context_id = ? AND config_key = ?",
                               [(cid, k) for k in keys])
        self._write(body)

    def claim_holder_alive(self, ctx: Context, config: Mapping[str, Any]) -> bool:
        """Whether the process holding `config`'s claim may still measure it."""
        def body(db: sqlite3.Connection) -> tuple | None:
            cid = self._context_id(db, ctx)
            if cid is None:
                return None
            return db.execute("SELECT pid, host, claimed FROM claims WHERE context_id = ? AND "
                              "config_key = ?", (cid, config_key(config))).fetchone()
        row = self._read(body)
        if row is None:
            return False
        return not (time.time() - row[2] > 3600 or (row[1] == self._host and not pid_alive(row[0])))

    # -- run journal
    def start_run(self, ctx: Context, strategy: str, options: Mapping[str, Any] | None = None,
                  heuristics: Sequence[Any] = (), *, tune_key: str = "", resumes: int | None = None) -> int:
        """Record that a tune of `ctx` started; returns the run id."""
        def body(db: sqlite3.Connection) -> int:
            cid = self._ensure_context(db, ctx)
            cur = db.execute("INSERT INTO runs (context_id, strategy, status, started, options, heuristics, "
                             "pid, host, tune_key, resumes) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?)",
                             (cid, strategy, time.time(), _dumps(dict(options or {})),
                              _dumps(list(heuristics)), os.getpid(), self._host, tune_key, resumes))
            return int(cur.lastrowid)  # type: ignore[arg-type]
        return self._write(body)

    def finish_run(self, run_id: int, status: str = "done", *, winner_id: int | None = None,
                   summary: Mapping[str, Any] | None = None) -> None:
        """Mark a run done or interrupted (with its winner's measurement id and a summary)."""
        if status not in RUN_STATUSES[1:]:
            raise StoreError(f"finish_run status {status!r}: use 'done' or 'interrupted'")

        def body(db: sqlite3.Connection) -> int:
            n = db.execute("UPDATE runs SET status = ?, finished = ?, winner_id = COALESCE(?, winner_id), "
                           "summary = COALESCE(?, summary) WHERE id = ?",
                           (status, time.time(), winner_id, _dumps(dict(summary)) if summary else None,
                            int(run_id))).rowcount
            db.execute("DELETE FROM claims WHERE run_id = ?", (int(run_id),))
            return n
        if self._write(body) == 0:
            raise StoreError(f"store {self.path} has no run with id {run_id}")

    @contextlib.contextmanager
    def journal(self, ctx: Context, strategy: str, options: Mapping[str, Any] | None = None,
                heuristics: Sequence[Any] = ()) -> Iterator[int]:
        """`with store.journal(ctx, ...) as run_id:` marks the run done on a normal exit and
        interrupted on any exception (KeyboardInterrupt included). A killed process leaves it
        'running' until `reap_dead_runs` (called by every Session) marks it interrupted."""
        run_id = self.start_run(ctx, strategy, options, heuristics)
        try:
            yield run_id
        except BaseException:
            with contextlib.suppress(Exception):
                self.finish_run(run_id, "interrupted")
            raise
        self.finish_run(run_id, "done")

    def runs(self, ctx: Context | None = None, *, unfinished: bool = False,
             tune_key: str | None = None) -> list[Run]:
        """Journal entries (of `ctx`, or all), oldest first."""
        where, args = [], []
        if ctx is not None:
            where.append(" AND ".join(f"c.{w}" for w in _IDENTITY_WHERE.split(" AND ")))
            args += list(ctx.identity)
        if unfinished:
            where.append("r.status != 'done'")
        if tune_key is not None:
            where.append("r.tune_key = ?")
            args.append(tune_key)
        cols = ", ".join(f"c.{c.strip()}" for c in _CTX_COLS.split(","))
        sql = (f"SELECT {cols}, {_RUN_COLS} FROM runs r JOIN contexts c ON c.id = r.context_id"
               + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY r.id")

        def body(db: sqlite3.Connection) -> list[Run]:
            return [_row_run(_row_context(r[:9]), r[9:]) for r in db.execute(sql, args)]
        return self._read(body)

    def unfinished_runs(self, ctx: Context | None = None) -> list[Run]:
        """Runs still 'running' (killed, or alive in another process) or 'interrupted'."""
        return self.runs(ctx, unfinished=True)

    def reap_dead_runs(self) -> list[int]:
        """Mark 'running' runs of processes on this host that no longer exist as interrupted
        (a `kill -9` leaves no chance to do it); returns their ids."""
        rows = self._read(lambda db: db.execute(
            "SELECT id, pid FROM runs WHERE status = 'running' AND host = ?", (self._host,)).fetchall())
        dead = [int(i) for i, pid in rows if pid != os.getpid() and not pid_alive(pid)]
        for i in dead:
            self.finish_run(i, "interrupted")
        return dead

    def spent(self, run_ids: Sequence[int]) -> int:
        """How many distinct configs the given runs measured as their own search answers
        (search, seed and remeasure rows): what a resumed tune has already used."""
        if not run_ids:
            return 0
        q = ",".join("?" * len(run_ids))
        return int(self._read(lambda db: db.execute(
            f"SELECT COUNT(*) FROM measurements WHERE run_id IN ({q}) AND kind IN ('search', 'seed', "
            "'remeasure')", list(run_ids)).fetchone()[0]))

    # -- theories (generic rows; typed access lives in theory/store.py)
    def put_theory(self, theory: Mapping[str, Any]) -> str:
        """Insert or replace a theory row; returns its id. Keys: kernel_class (required), id
        (default: a hash of class, regime, families and rule), regime, dtype_family,
        hardware_family, rule, support, refute, provenance; other keys are kept in `extra`."""
        t = dict(theory)
        if not t.get("kernel_class"):
            raise StoreError(f"a theory needs a kernel_class; got keys {sorted(t)}")
        regime, rule = t.pop("regime", {}), t.pop("rule", {})
        dfam, hfam = str(t.pop("dtype_family", "") or ""), str(t.pop("hardware_family", "") or "")
        kclass = str(t.pop("kernel_class"))
        tid = t.pop("id", None) or hashlib.sha256(_dumps([kclass, regime, dfam, hfam, rule]).encode()).hexdigest()[:16]
        support, refute = int(t.pop("support", 0) or 0), int(t.pop("refute", 0) or 0)
        provenance = t.pop("provenance", {})
        t.pop("updated", None)
        row = (str(tid), kclass, _dumps(regime), dfam, hfam, _dumps(rule), support, refute,
               _dumps(provenance), _dumps(t), time.time())
        self._write(lambda db: db.execute(
            "INSERT OR REPLACE INTO theories (id, kernel_class, regime, dtype_family, hardware_family, rule, "
            "support, refute, provenance, extra, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row))
        return str(tid)

    def theories(self, kernel_class: str | None = None, hardware_family: str | None = None,
                 dtype_family: str | None = None) -> list[dict[str, Any]]:
        """Theory rows as dicts (what put_theory took, plus id and updated)."""
        fields = ("id", "kernel_class", "regime", "dtype_family", "hardware_family", "rule", "support",
                  "refute", "provenance", "updated")
        where, args = [], []
        for col, val in (("kernel_class", kernel_class), ("hardware_family", hardware_family),
                         ("dtype_family", dtype_family)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        sql = (f"SELECT {', '.join(fields)}, extra FROM theories"
               + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY kernel_class, id")

        def body(db: sqlite3.Connection) -> list[dict[str, Any]]:
            out = []
            for r in db.execute(sql, args):
                d = {**json.loads(r[10]), **dict(zip(fields, r[:10]))}
                for k in ("regime", "rule", "provenance"):
                    d[k] = json.loads(d[k])
                out.append(d)
            return out
        return self._read(body)

    # -- theory evidence: verdicts of earlier runs, per theory, class, GPU and dtype family
    def add_theory_evidence(self, ctx: Context, tallies: Mapping[str, Sequence[int]],
                            run_id: int | None = None) -> None:
        """Add one run's verdict counts (theory -> (supported, refuted, neutral)) to the
        running totals for the context's kernel class, GPU and dtype family (one transaction,
        so concurrent runs add up rather than overwrite each other)."""
        kclass = ctx.kernel_class or ctx.kernel
        dfam = ctx.classification.get("dtype_family", "")
        rows = []
        for name, counts in sorted(tallies.items()):
            s_, r_, n_ = (int(c) for c in (list(counts) + [0, 0, 0])[:3])
            if s_ + r_ + n_ == 0:
                continue
            tid = "evidence:" + hashlib.sha256(_dumps([kclass, ctx.hardware, dfam, name]).encode()).hexdigest()[:16]
            rows.append((tid, name, s_, r_, n_))

        def body(db: sqlite3.Connection) -> None:
            for tid, name, s_, r_, n_ in rows:
                old = db.execute("SELECT support, refute, extra, provenance FROM theories WHERE id = ?",
                                 (tid,)).fetchone()
                extra = json.loads(old[2]) if old else {"kind": "evidence"}
                prov = json.loads(old[3]) if old else {"runs": []}
                extra["neutral"] = int(extra.get("neutral", 0)) + n_
                if run_id is not None:
                    prov["runs"] = (list(prov.get("runs", [])) + [run_id])[-EVIDENCE_RUNS:]
                db.execute("INSERT OR REPLACE INTO theories (id, kernel_class, regime, dtype_family, "
                           "hardware_family, rule, support, refute, provenance, extra, updated) "
                           "VALUES (?, ?, '{}', ?, ?, ?, ?, ?, ?, ?, ?)",
                           (tid, kclass, dfam, ctx.hardware, _dumps({"theory": name}),
                            (old[0] if old else 0) + s_, (old[1] if old else 0) + r_, _dumps(prov),
                            _dumps(extra), time.time()))
        if rows:
            self._write(body)

    def theory_evidence(self, ctx: Context) -> dict[str, tuple[int, int, int]]:
        """theory -> (supported, refuted, neutral) over earlier runs of the context's kernel
        class on its GPU and dtype family ({} when none)."""
        out: dict[str, tuple[int, int, int]] = {}
        for t in self.theories(kernel_class=ctx.kernel_class or ctx.kernel, hardware_family=ctx.hardware,
                               dtype_family=ctx.classification.get("dtype_family", "")):
            if t.get("kind") == "evidence" and isinstance(t.get("rule"), dict) and "theory" in t["rule"]:
                out[t["rule"]["theory"]] = (int(t["support"]), int(t["refute"]), int(t.get("neutral", 0)))
        return out

    def delete_theory(self, theory_id: str) -> bool:
        return self._write(lambda db: db.execute("DELETE FROM theories WHERE id = ?",
                                                 (theory_id,)).rowcount) > 0

    # -- housekeeping
    def stats(self) -> dict[str, int]:
        """Row counts per table, plus ok measurements and unfinished runs."""
        def body(db: sqlite3.Connection) -> dict[str, int]:
            out = {t: int(db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0])
                   for t in TABLES if t not in ("meta", "claims")}
            out["ok_measurements"] = int(db.execute(
                "SELECT COUNT(*) FROM measurements WHERE objective IS NOT NULL").fetchone()[0])
            out["unfinished_runs"] = int(db.execute(
                "SELECT COUNT(*) FROM runs WHERE status != 'done'").fetchone()[0])
            return out
        return self._read(body)

    def integrity_check(self) -> str:
        return str(self._read(lambda db: db.execute("PRAGMA integrity_check").fetchone()[0]))

    def clear(self, kernel: str | None = None) -> int:
        """Delete the contexts, measurements, runs and claims of `kernel` (theories are per
        kernel class and stay), or with no kernel everything. Returns how many rows went."""
        def body(db: sqlite3.Connection) -> int:
            if kernel is None:
                n = db.execute("DELETE FROM measurements").rowcount
                for t in ("runs", "claims", "contexts", "theories"):
                    db.execute(f"DELETE FROM {t}")
                return n
            sub = "(SELECT id FROM contexts WHERE kernel = ?)"
            n = db.execute(f"DELETE FROM measurements WHERE context_id IN {sub}", (kernel,)).rowcount
            db.execute(f"DELETE FROM runs WHERE context_id IN {sub}", (kernel,))
            db.execute(f"DELETE FROM claims WHERE context_id IN {sub}", (kernel,))
            db.execute("DELETE FROM contexts WHERE kernel = ?", (kernel,))
            return n
        return self._write(body)
