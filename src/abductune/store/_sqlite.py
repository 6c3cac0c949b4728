"""SQLite plumbing for the store: connection, WAL, retries, transactions, opening a file
(what it holds: a store, an empty database, or something to refuse).

Concurrency: WAL journal, `busy_timeout`, `synchronous=NORMAL` (a committed transaction
survives a killed process; only a power loss may drop the last few), every write one short
`BEGIN IMMEDIATE` transaction, retried with jittered back-off while SQLite answers "database
is locked". A connection opened before a fork is reopened in the child. WAL needs a local
filesystem (not NFS).
"""
from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

from ..errors import StoreError
from .schema import SCHEMA_VERSION, create, migrate_v1

T = TypeVar("T")
ENV_VAR = "ABDUCTUNE_STORE"


def read_only_reason(path: str) -> str | None:
    """Why abductune cannot write the existing store file at `path` (None: it can, or the
    file does not exist yet). SQLite also writes journal files beside the store."""
    if path == ":memory:":
        return None
    p = Path(path)
    if not p.is_file():
        return None
    if not os.access(p, os.W_OK):
        return "the file is not writable"
    if not os.access(p.resolve().parent, os.W_OK):
        return f"its folder {p.resolve().parent} is not writable"
    return None


def is_busy(e: sqlite3.Error) -> bool:
    msg = str(e).lower()
    return isinstance(e, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg)


class Connection:
    """One SQLite connection per process (reopened after a fork), with retrying transactions."""

    def __init__(self, path: str, timeout: float, classify_context: Callable[[dict], dict],
                 read_only: bool = False):
        self.path = path
        self.timeout = float(timeout)
        self._classify = classify_context  # used by the v1 -> v2 migration
        self.lock = threading.RLock()
        self._stale: list[sqlite3.Connection] = []  # connections inherited over a fork
        self._pid = os.getpid()
        self._closed = False
        why = read_only_reason(path)
        self.read_only = bool(read_only or why)
        self.read_only_why = why or "opened read-only"
        if path != ":memory:" and not self.read_only:
            p = Path(path)
            if p.is_dir():
                raise StoreError(f"store path {path} is a directory; pass a file path (or set {ENV_VAR})")
            try:
                p.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create the folder for store {path}: {e}; pass another path "
                                 f"or set {ENV_VAR}") from None
        self._db: sqlite3.Connection | None = self._open()

    def _open(self) -> sqlite3.Connection:
        try:
            if self.read_only:  # never a write, never a journal file: SQLite's own read-only mode
                uri = Path(self.path).resolve().as_uri() + "?mode=ro"
                if not os.access(Path(self.path).resolve().parent, os.W_OK):
                    uri += "&immutable=1"  # no -shm file can be made beside it
                db = sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None,
                                     check_same_thread=False)
            else:
                db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None,
                                     check_same_thread=False)
        except sqlite3.Error as e:
            raise StoreError(f"cannot open store {self.path}: {e}; check the path and its "
                             f"permissions, or pass another path (or set {ENV_VAR})") from None
        try:
            db.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            # what the file is, read before anything that changes it (the journal mode is kept
            # in the file): a newer or foreign database is refused with its bytes unchanged
            version = self.retry(lambda: self._inspect(db))
            if self.read_only:
                if version != SCHEMA_VERSION:
                    raise StoreError(self.read_only_message(
                        "it holds no store yet" if version is None else f"it needs migrating from schema "
                        f"version {version}"))
                return db
            self.retry(lambda: db.execute("PRAGMA journal_mode = WAL").fetchone())
            db.execute("PRAGMA synchronous = NORMAL")
            self.in_tx(db, self._init_schema)
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

    def _inspect(self, db: sqlite3.Connection) -> int | None:
        """The store's schema version (None: an empty database), by reading only; StoreError
        for a newer store, a foreign database or one without a readable version."""
        tables = {r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
        if "meta" in tables:
            row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            try:
                version = int(row[0]) if row else None
            except ValueError:
                version = None
            if version is None:
                raise StoreError(f"{self.path} has no readable schema_version in its meta table; it "
                                 f"is not an abductune store: move it away or pass another path (or set "
                                 f"{ENV_VAR})")
            if version > SCHEMA_VERSION:
                raise StoreError(f"store {self.path} has schema version {version}, newer than this "
                                 f"abductune understands ({SCHEMA_VERSION}); upgrade abductune, or pass "
                                 f"another store path (or set {ENV_VAR})")
            return version
        if tables:
            raise StoreError(f"{self.path} is a SQLite database but not an abductune store (tables: "
                             f"{', '.join(sorted(tables))}); pass another path (or set {ENV_VAR})")
        return None

    def read_only_message(self, what: str = "this needs to write to it") -> str:
        return (f"store {self.path} is read-only ({self.read_only_why}) and {what}; make it writable "
                f"(chmod u+w), or pass another store path (or set {ENV_VAR})")

    def _init_schema(self, db: sqlite3.Connection) -> None:
        version = self._inspect(db)  # again inside the write transaction: another process may have made it
        if version is not None:
            if version == 1:
                migrate_v1(db, self._classify)
            return
        create(db)

    def conn(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"store {self.path} is closed")
        if os.getpid() != self._pid:  # forked: never use the parent's connection here
            if self._db is not None:
                self._stale.append(self._db)
            self._pid = os.getpid()
            self._db = self._open()
        assert self._db is not None
        return self._db

    def retry(self, fn: Callable[[], T]) -> T:
        """Run fn, retrying with jittered back-off while SQLite says the file is locked."""
        deadline = time.monotonic() + self.timeout
        delay = 0.005
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as e:
                if not is_busy(e):
                    raise
                if time.monotonic() >= deadline:
                    raise StoreError(f"store {self.path} stayed locked for {self.timeout:g} s (another "
                                     "process holds a long transaction?); retry, or pass a larger "
                                     "timeout") from None
                time.sleep(delay * random.uniform(0.5, 1.5))
                delay = min(delay * 2, 0.25)

    def in_tx(self, db: sqlite3.Connection, body: Callable[[sqlite3.Connection], T]) -> T:
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
        return self.retry(attempt)

    def write(self, body: Callable[[sqlite3.Connection], T]) -> T:
        if self.read_only:  # at once: never after a wait for a lock that cannot help
            raise StoreError(self.read_only_message())
        with self.lock:
            db = self.conn()
            try:
                return self.in_tx(db, body)
            except sqlite3.DatabaseError as e:
                raise StoreError(f"store {self.path}: {e}") from e

    def read(self, body: Callable[[sqlite3.Connection], T]) -> T:
        with self.lock:
            db = self.conn()
            try:
                return self.retry(lambda: body(db))
            except sqlite3.DatabaseError as e:
                raise StoreError(f"store {self.path}: {e}") from e

    def close(self) -> None:
        with self.lock:
            if not self._closed and self._db is not None and os.getpid() == self._pid:
                self._db.close()
            self._db = None
            self._closed = True
