"""The store's schema: tables, indexes and views of version 2, made on a new file, and the
migration that brings a v1 store to it (in one transaction, every v1 row kept)."""
from __future__ import annotations

import json
import sqlite3
import time
from typing import Callable

SCHEMA_VERSION = 2

# Schema v2. Measurements are appended, never updated: each has an id (evidence cites it), the
# run that took it and why (kind). Contexts carry the classification as columns so a query
# such as "every skinny-M fp16 matmul on an H100" needs no JSON parsing:
#   SELECT * FROM best_configs WHERE kernel_class = 'matmul' AND fallback = 'small_m'
#          AND dtype_family = 'fp16' AND hardware LIKE 'H100%'
# (dims stay JSON too: json_extract(dims, '$.M') <= 64 works as well).
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS contexts (
    id INTEGER PRIMARY KEY,
    kernel TEXT NOT NULL, source_hash TEXT NOT NULL, space_fingerprint TEXT NOT NULL,
    problem_key TEXT NOT NULL, hardware TEXT NOT NULL, toolchain TEXT NOT NULL,
    kernel_class TEXT NOT NULL DEFAULT '', dims TEXT NOT NULL DEFAULT '{}',
    dtypes TEXT NOT NULL DEFAULT '{}', shape_bucket TEXT NOT NULL DEFAULT '',
    variant TEXT NOT NULL DEFAULT '', dtype_family TEXT NOT NULL DEFAULT '',
    fallback TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    UNIQUE (kernel, source_hash, space_fingerprint, problem_key, hardware, toolchain));
CREATE INDEX IF NOT EXISTS contexts_bucket
    ON contexts (source_hash, space_fingerprint, shape_bucket, hardware, toolchain);
CREATE INDEX IF NOT EXISTS contexts_class
    ON contexts (kernel_class, fallback, dtype_family, hardware);
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    context_id INTEGER NOT NULL REFERENCES contexts (id),
    config_key TEXT NOT NULL, config TEXT NOT NULL, status TEXT NOT NULL,
    time_ms REAL, objective REAL, samples TEXT NOT NULL DEFAULT '[]',
    compile_s REAL NOT NULL DEFAULT 0, bench_s REAL NOT NULL DEFAULT 0,
    registers INTEGER, spills INTEGER, smem_bytes INTEGER,
    frac_peak_flops REAL, frac_peak_bw REAL,
    error TEXT NOT NULL DEFAULT '', extra TEXT NOT NULL DEFAULT '{}',
    run_id INTEGER, kind TEXT NOT NULL DEFAULT 'search', created REAL NOT NULL);
CREATE INDEX IF NOT EXISTS measurements_config ON measurements (context_id, config_key, id);
CREATE INDEX IF NOT EXISTS measurements_best ON measurements (context_id, objective);
CREATE INDEX IF NOT EXISTS measurements_run ON measurements (run_id, kind);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    context_id INTEGER NOT NULL REFERENCES contexts (id),
    strategy TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'done', 'interrupted')),
    started REAL NOT NULL, finished REAL,
    options TEXT NOT NULL DEFAULT '{}', heuristics TEXT NOT NULL DEFAULT '[]',
    pid INTEGER, host TEXT NOT NULL DEFAULT '',
    tune_key TEXT NOT NULL DEFAULT '', resumes INTEGER, winner_id INTEGER,
    summary TEXT NOT NULL DEFAULT '{}');
CREATE INDEX IF NOT EXISTS runs_context ON runs (context_id, status);
CREATE INDEX IF NOT EXISTS runs_tune ON runs (context_id, tune_key);
CREATE TABLE IF NOT EXISTS claims (
    context_id INTEGER NOT NULL, config_key TEXT NOT NULL, run_id INTEGER NOT NULL,
    pid INTEGER NOT NULL, host TEXT NOT NULL, claimed REAL NOT NULL,
    PRIMARY KEY (context_id, config_key));
CREATE TABLE IF NOT EXISTS theories (
    id TEXT PRIMARY KEY, kernel_class TEXT NOT NULL, regime TEXT NOT NULL DEFAULT '{}',
    dtype_family TEXT NOT NULL DEFAULT '', hardware_family TEXT NOT NULL DEFAULT '',
    rule TEXT NOT NULL DEFAULT '{}', support INTEGER NOT NULL DEFAULT 0,
    refute INTEGER NOT NULL DEFAULT 0, provenance TEXT NOT NULL DEFAULT '{}',
    extra TEXT NOT NULL DEFAULT '{}', updated REAL NOT NULL);
CREATE INDEX IF NOT EXISTS theories_class ON theories (kernel_class, hardware_family);
CREATE VIEW IF NOT EXISTS measurement_rows AS
    SELECT c.kernel, c.source_hash, c.space_fingerprint, c.problem_key, c.dims, c.dtypes,
           c.kernel_class, c.variant, c.dtype_family, c.fallback, c.shape_bucket, c.hardware,
           c.toolchain, m.*
    FROM measurements m JOIN contexts c ON c.id = m.context_id;
CREATE VIEW IF NOT EXISTS latest_measurements AS
    SELECT * FROM (SELECT m.*, ROW_NUMBER() OVER (PARTITION BY m.context_id, m.config_key
                                                  ORDER BY m.id DESC) AS rnk
                   FROM measurements m) WHERE rnk = 1;
CREATE VIEW IF NOT EXISTS config_best AS
    SELECT * FROM (SELECT m.*, ROW_NUMBER() OVER (PARTITION BY m.context_id, m.config_key
                                                  ORDER BY m.objective IS NULL, m.objective,
                                                           m.id DESC) AS rnk
                   FROM measurements m) WHERE rnk = 1;
CREATE VIEW IF NOT EXISTS best_configs AS
    SELECT c.kernel, c.source_hash, c.space_fingerprint, c.problem_key, c.dims, c.dtypes,
           c.kernel_class, c.variant, c.dtype_family, c.fallback, c.shape_bucket, c.hardware,
           c.toolchain, b.*,
           (SELECT COUNT(DISTINCT config_key) FROM measurements x
            WHERE x.context_id = b.context_id) AS measured
    FROM (SELECT m.*,
                 ROW_NUMBER() OVER (PARTITION BY m.context_id
                                    ORDER BY m.objective IS NULL, m.objective, m.id DESC) AS rnk
          FROM measurements m) b
    JOIN contexts c ON c.id = b.context_id
    WHERE b.rnk = 1 AND b.objective IS NOT NULL;
"""

TABLES = ("meta", "contexts", "measurements", "runs", "claims", "theories")
_VIEWS = ("measurement_rows", "latest_measurements", "config_best", "best_configs")


def _statements(sql: str) -> list[str]:
    return [s for s in sql.split(";") if s.strip()]


def create(db: sqlite3.Connection) -> None:
    """Make the schema in an empty database, inside the caller's write transaction."""
    # one statement at a time: executescript() would commit the open transaction first
    for stmt in _statements(SCHEMA):
        db.execute(stmt)
    db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
               (str(SCHEMA_VERSION),))
    db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('created', ?)", (repr(time.time()),))


def migrate_v1(db: sqlite3.Connection, classify_context: Callable[[dict], dict]) -> None:
    """v1 kept one row per (context, config), overwritten in place. Every v1 row becomes one
    v2 row of kind 'search' with a fresh id (rowid order kept); runs and contexts gain their
    new columns, contexts get their classification. One transaction: all or nothing."""
    for v in _VIEWS:
        db.execute(f"DROP VIEW IF EXISTS {v}")
    db.execute("ALTER TABLE measurements RENAME TO measurements_v1")
    db.execute("DROP INDEX IF EXISTS measurements_best")
    for col in ("variant", "dtype_family", "fallback"):
        db.execute(f"ALTER TABLE contexts ADD COLUMN {col} TEXT NOT NULL DEFAULT ''")
    for col, decl in (("tune_key", "TEXT NOT NULL DEFAULT ''"), ("resumes", "INTEGER"),
                      ("winner_id", "INTEGER"), ("summary", "TEXT NOT NULL DEFAULT '{}'")):
        db.execute(f"ALTER TABLE runs ADD COLUMN {col} {decl}")
    for stmt in _statements(SCHEMA):
        db.execute(stmt)  # IF NOT EXISTS: creates the new tables, indexes and views only
    db.execute("""INSERT INTO measurements (context_id, config_key, config, status, time_ms,
                      objective, samples, compile_s, bench_s, registers, spills, smem_bytes,
                      error, extra, run_id, kind, created)
                  SELECT context_id, config_key, config, status, time_ms, objective, samples,
                         compile_s, bench_s, registers, spills, smem_bytes, error, extra,
                         run_id, 'search', created
                  FROM measurements_v1 ORDER BY rowid""")
    db.execute("DROP TABLE measurements_v1")
    rows = db.execute("SELECT id, kernel, kernel_class, dims, dtypes FROM contexts").fetchall()
    for cid, kernel, kclass, dims, dtypes in rows:
        c = classify_context({"kernel": kernel, "kernel_class": kclass, "dims": json.loads(dims),
                              "dtypes": json.loads(dtypes)})
        db.execute("UPDATE contexts SET variant = ?, dtype_family = ?, fallback = ?, shape_bucket = ? "
                   "WHERE id = ?", (c["variant"], c["dtype_family"], c["fallback"], c["bucket"], cid))
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
    db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('migrated_from_v1', ?)",
               (repr(time.time()),))
