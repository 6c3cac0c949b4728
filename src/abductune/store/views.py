"""The store's reads: rows of a context (latest, best, by id, a search's memo), the best config
of every context (winners, nearest shapes first), the run journal, theory rows and evidence,
table counts. Nothing here writes."""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import sqlite3
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..errors import SpaceError, StoreError
from ..measurement import Measurement
from ..space import Space
from .records import (_CTX_COLS, _IDENTITY_WHERE, _M_COLS, _N_M, _RUN_COLS, SEARCH_KINDS, BestConfig,
                      Context, Run, _dumps, _row_context, _row_measurement, _row_run, config_key)
from .schema import TABLES

# the package's logger, as before the split: the CLI's `WARNING abductune.store: ...` lines stay
log = logging.getLogger("abductune.store")


def _log2_distance(a: Mapping[str, int], b: Mapping[str, int]) -> float:
    d = 0.0
    for k in set(a) | set(b):
        x, y = a.get(k), b.get(k)
        if x is None or y is None or x < 1 or y < 1:
            d += 0.0 if x == y else 64.0
        else:
            d += abs(math.log2(x) - math.log2(y))
    return d


def _on_siblings(ctx: Context) -> list[Context]:
    """`ctx` on each of its GPU's siblings (`hardware.siblings`: the same architecture and SM count)."""
    from ..hardware import siblings

    return [dataclasses.replace(ctx, hardware=hw) for hw in siblings(ctx.hardware)]


def nearest(rows: Sequence[BestConfig], ctx: Context, n: int) -> list[BestConfig]:
    """The `n` of `rows` (best configs of `ctx`'s group) nearest `ctx` in log2 of the dims,
    `ctx` itself left out."""
    if n <= 0:
        return []
    others = [b for b in rows if b.context.identity != ctx.identity]
    others.sort(key=lambda b: _log2_distance(b.context.dims, ctx.dims))
    return others[:n]


class NearestOutside:
    """`nearest_from` for a command that tunes many shapes (`abductune tune`, a fleet): the
    winners on a shape's nearest other shapes, leaving out every shape the command itself
    tunes (`jobs`: (kernel, dims) pairs). The shapes seed from what earlier commands tuned,
    never from each other, so their order, the order in which they finish, and an interrupt
    and resume change no search's seeds: a fleet gives what a serial run gives."""

    def __init__(self, store: Any, jobs: Iterable[tuple[str, Mapping[str, int]]]):
        self.store = store
        self.jobs = [(k, dict(d)) for k, d in jobs]

    def _tuned_here(self, ctx: Context) -> bool:
        return any(k == ctx.kernel and all(ctx.dims.get(a) == v for a, v in d.items()) for k, d in self.jobs)

    def __call__(self, ctx: Context, n: int) -> list[BestConfig]:
        return self.store.nearest_bests(ctx, n, leave_out=self._tuned_here)


class Views:
    """The reads of `Store` (a mixin: `Store` gives `_read`, one read under the connection's
    lock, retried while the file is locked, and `path`)."""

    path: str
    _read: Callable[[Callable[[sqlite3.Connection], Any]], Any]

    # -- contexts
    @staticmethod
    def _context_id(db: sqlite3.Connection, ctx: Context) -> int | None:
        row = db.execute(f"SELECT id FROM contexts WHERE {_IDENTITY_WHERE}", ctx.identity).fetchone()
        return None if row is None else int(row[0])

    # -- measurements
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
                     fallback: str | None = None, dtype_family: str | None = None,
                     any_bucket: bool = False, any_space: bool = False) -> list[BestConfig]:
        """The best config of every context with an ok measurement, filtered by kernel name,
        hardware (a prefix: "H100" matches "H100-SXM"), class, fallback category or dtype
        family. With `like`, only contexts in its group (source hash, space, shape bucket,
        hardware, toolchain, dtypes; `any_bucket`: every shape bucket; `any_space`: every
        space, where the space follows the shape), nearest shapes first (log2 distance of dims)."""
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
            where.append("source_hash = ? AND hardware = ? AND toolchain = ? AND dtypes = ?"
                         + ("" if any_space else " AND space_fingerprint = ?")
                         + ("" if any_bucket else " AND shape_bucket = ?"))
            args += [like.source_hash, like.hardware, like.toolchain, _dumps(like.dtypes)]
            args += [] if any_space else [like.space_fingerprint]
            args += [] if any_bucket else [like.shape_bucket]
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

    def nearest_bests(self, ctx: Context, n: int,
                      leave_out: Callable[[Context], bool] | None = None) -> list[BestConfig]:
        """The best configs of the `n` shapes of `ctx`'s kernel measured before (the same
        source, GPU, toolchain and dtypes; any shape bucket, and any space: Inductor's and
        Helion's spaces follow the shape, and a caller keeps only what its space holds)
        nearest `ctx` in log2 of the dims, `ctx` itself and contexts `leave_out` names left
        out: what a search of a new shape of a kernel tuned before tries first
        (`session.NEAREST_SEEDS`). Winners on the GPU's siblings (`hardware.siblings`: the same
        architecture and SM count, an H200 for an H100 SXM) count too, nearest first, a tie going
        to this GPU's: the same shape tuned on a sibling is a better first guess than a
        neighbouring shape tuned here (session 32: 1.022x the optimum against about 1.14x)."""
        if n <= 0:
            return []
        rows = self.best_configs(like=ctx, any_bucket=True, any_space=True)
        for twin in _on_siblings(ctx):
            rows += self.best_configs(like=twin, any_bucket=True, any_space=True)
        rows = [b for b in rows if leave_out is None or not leave_out(b.context)]
        rows.sort(key=lambda b: b.context.hardware != ctx.hardware)  # stable: this GPU's first on a tie
        return nearest(rows, ctx, n)

    def best_nearby(self, ctx: Context) -> BestConfig | None:
        """The best config of `ctx` itself if measured, else of the same shape on a sibling GPU
        (`hardware.siblings`; the reason is `nearest_bests`'), else of the nearest shape in its group."""
        rows = self.best_configs(like=ctx)
        exact = [b for b in rows if b.context.identity == ctx.identity]
        if exact:
            return exact[0]
        for twin in _on_siblings(ctx):
            same = [b for b in self.best_configs(like=twin) if b.context.identity == twin.identity]
            if same:
                return same[0]
        return rows[0] if rows else None

    # -- run journal
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

    def spent(self, run_ids: Sequence[int]) -> int:
        """How many distinct configs the given runs measured as their own search answers
        (search, seed and remeasure rows): what a resumed tune has already used."""
        if not run_ids:
            return 0
        q = ",".join("?" * len(run_ids))
        return int(self._read(lambda db: db.execute(
            f"SELECT COUNT(*) FROM measurements WHERE run_id IN ({q}) AND kind IN ('search', 'seed', "
            "'remeasure')", list(run_ids)).fetchone()[0]))

    # -- theories (generic rows; typed access lives in theory/store/)
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
    def theory_evidence(self, ctx: Context) -> dict[str, tuple[int, int, int]]:
        """theory -> (supported, refuted, neutral) over earlier runs of the context's kernel
        class on its GPU and dtype family ({} when none)."""
        out: dict[str, tuple[int, int, int]] = {}
        for t in self.theories(kernel_class=ctx.kernel_class or ctx.kernel, hardware_family=ctx.hardware,
                               dtype_family=ctx.classification.get("dtype_family", "")):
            if t.get("kind") == "evidence" and isinstance(t.get("rule"), dict) and "theory" in t["rule"]:
                out[t["rule"]["theory"]] = (int(t["support"]), int(t["refute"]), int(t.get("neutral", 0)))
        return out

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
