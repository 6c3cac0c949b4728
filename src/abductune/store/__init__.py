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
`measurement_rows`, `latest_measurements`, `config_best`, `best_configs`.

Modules: `records.py` (Context, BestConfig, Run, config keys, rows), `schema.py` (tables, views,
the v1 migration), `_sqlite.py` (the connection: WAL, retries, transactions, opening a file),
`writes.py` and `views.py` (what `Store` writes and reads); `Store` here holds them together.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any, Sequence

from ..errors import StoreError
from ._sqlite import ENV_VAR, Connection
from .records import (RUN_STATUSES, SEARCH_KINDS, BestConfig, Context, Run, _classification, config_json,
                      config_key)
from .schema import SCHEMA_VERSION
from .views import NearestOutside, Views, nearest
from .writes import Writes

__all__ = ["Store", "Context", "BestConfig", "Run", "config_key", "config_json", "default_path",
           "ENV_VAR", "SCHEMA_VERSION", "RUN_STATUSES", "SEARCH_KINDS", "nearest", "NearestOutside"]


def default_path() -> Path:
    """`$ABDUCTUNE_STORE` if set, else `<user cache dir>/abductune/store.sqlite`."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("abductune")) / "store.sqlite"


# ----------------------------------------------------------------------------- store

class Store(Writes, Views):
    """SQLite measurement store. `Store()` opens the default path; `Store(path)` any file
    (":memory:" for a private in-memory store). Use as a context manager or call close().
    A file abductune cannot write (or `read_only=True`) is opened read-only: reads answer,
    and the first write raises StoreError at once, naming the file and the fix.

    Its methods live by what they do: `Writes` (writes.py) and `Views` (views.py); this class
    owns the connection they go through."""

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
