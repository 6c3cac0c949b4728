"""The store's writes: contexts, measurements appended (never overwritten), claims that let two
processes measure each config once, the run journal, theory rows and evidence tallies, and
clearing. Each write is one transaction."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import time
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from ..errors import StoreError
from ..measurement import KINDS, Measurement
from .records import _CTX_COLS, RUN_STATUSES, Context, _dumps, config_json, config_key
from .views import Views

EVIDENCE_RUNS = 50  # run ids kept as provenance of a theory's evidence

_INSERT = """
INSERT INTO measurements (context_id, config_key, config, status, time_ms, objective, samples,
    compile_s, bench_s, registers, spills, smem_bytes, frac_peak_flops, frac_peak_bw, error,
    extra, run_id, kind, created)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""


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


class Writes:
    """The writes of `Store` (a mixin: `Store` gives `_write`, one transaction retried while the
    file is locked, `_read`, `path`, `_host` and, from `Views`, `_context_id`)."""

    path: str
    _host: str
    _write: Callable[[Callable[[sqlite3.Connection], Any]], Any]
    _read: Callable[[Callable[[sqlite3.Connection], Any]], Any]
    _context_id: Callable[[sqlite3.Connection, Context], int | None]

    # -- contexts
    @staticmethod
    def _ensure_context(db: sqlite3.Connection, ctx: Context) -> int:
        cid = Views._context_id(db, ctx)
        if cid is not None:
            return cid
        c = ctx.classification
        db.execute(f"INSERT OR IGNORE INTO contexts ({_CTX_COLS}, shape_bucket, variant, dtype_family, "
                   "fallback, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (*ctx.identity, ctx.kernel_class, _dumps(ctx.dims), _dumps(ctx.dtypes), c["bucket"],
                    c["variant"], c["dtype_family"], c["fallback"], time.time()))
        return Views._context_id(db, ctx)  # type: ignore[return-value]

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

    def reap_dead_runs(self) -> list[int]:
        """Mark 'running' runs of processes on this host that no longer exist as interrupted
        (a `kill -9` leaves no chance to do it); returns their ids."""
        rows = self._read(lambda db: db.execute(
            "SELECT id, pid FROM runs WHERE status = 'running' AND host = ?", (self._host,)).fetchall())
        dead = [int(i) for i, pid in rows if pid != os.getpid() and not pid_alive(pid)]
        for i in dead:
            self.finish_run(i, "interrupted")
        return dead

    # -- theories (generic rows; typed access lives in theory/store/)
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

    def delete_theory(self, theory_id: str) -> bool:
        return self._write(lambda db: db.execute("DELETE FROM theories WHERE id = ?",
                                                 (theory_id,)).rowcount) > 0

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

    # -- housekeeping
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
