"""The SQLite measurement store: round trips, append-only rows with ids and kinds, memo, best configs, run journal,
theories, errors, and several processes writing (and being killed) at once."""
from __future__ import annotations

import math
import multiprocessing as mp
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import platformdirs
import pytest

from abductune.errors import StoreError
from abductune.hardware import KNOWN_GPUS
from abductune.measure.base import Evaluator
from abductune.measurement import Measurement
from abductune.problem import Problem
from abductune.search.base import Budget, run
from abductune.search.exhaustive import Exhaustive
from abductune.space import Bool, Choice, IntRange, Pow2, Space
from abductune.store import ENV_VAR, SCHEMA_VERSION, Context, Store, config_key, default_path

H100 = KNOWN_GPUS["H100-SXM"]


def make_space() -> Space:
    return Space([Pow2("BLOCK_M", 16, 128), Pow2("BLOCK_N", 16, 128), Choice("num_warps", [4, 8]),
                  Choice("order", ["row", "col"]), Bool("EVEN_K")],
                 ["BLOCK_M * BLOCK_N <= 8192"])


def make_problem(M: int = 64, N: int = 4096, K: int = 4096, hw=H100,
                 dtype: str = "fp16") -> Problem:
    return Problem("matmul_kernel", "matmul", {"M": M, "N": N, "K": K}, {"a": dtype, "b": dtype},
                   flops=2.0 * M * N * K, min_bytes=2.0 * (M * K + K * N + M * N), hardware=hw,
                   source_hash="abc123")


@pytest.fixture
def store(tmp_path: Path):
    with Store(tmp_path / "s.sqlite") as s:
        yield s


@pytest.fixture
def space() -> Space:
    return make_space()


@pytest.fixture
def ctx(space: Space) -> Context:
    return Context.of(make_problem(), space, toolchain={"triton": "3.4.0", "cuda": "12.8"})


def full_measurement(cfg: dict) -> Measurement:
    return Measurement(dict(cfg), "ok", time_ms=0.123456789, samples_ms=[0.1234, 0.123456789, 0.13],
                       compile_s=1.25, bench_s=0.5, registers=168, spills=4, smem_bytes=65536,
                       error="", extra={"tflops": 412.5, "frac": [0.1, 0.9], "nested": {"x": True},
                                        "inf": math.inf})


# ----------------------------------------------------------------------------- basics

def bare(m: Measurement) -> Measurement:
    """A stored row without what the store added (id, run id), to compare with what went in."""
    return m.replace(id=None, run_id=None)


def test_classification_is_stored_as_columns(store: Store, space: Space):
    cfg = space.valid_configs()[0]
    for M, dtype, hw in ((16, "fp16", H100), (4096, "fp16", H100), (32, "fp32", H100),
                         (8, "bf16", KNOWN_GPUS["A100-SXM"])):
        store.put(Context.of(make_problem(M=M, dtype=dtype, hw=hw), space), Measurement(dict(cfg), time_ms=1.0))
    # "every skinny-M fp16 matmul on an H100" is one query on plain columns
    rows = store.execute("SELECT json_extract(dims, '$.M') FROM contexts WHERE kernel_class = 'matmul' AND "
                         "fallback = 'small_m' AND dtype_family = 'fp16' AND hardware LIKE 'H100%'")
    assert rows == [(16,)]
    assert [b.context.dims["M"] for b in store.best_configs(kernel_class="matmul", fallback="small_m",
                                                            dtype_family="fp16", hardware="H100")] == [16]


def test_context_of_problem(space: Space):
    p = make_problem()
    c = Context.of(p, space, toolchain={"triton": "3.4.0", "cuda": "12.8"})
    assert (c.kernel, c.source_hash, c.problem_key, c.hardware) == \
        ("matmul_kernel", "abc123", p.key(), "H100-SXM")
    assert c.space_fingerprint == space.fingerprint()
    assert c.dims == {"M": 64, "N": 4096, "K": 4096} and c.kernel_class == "matmul"
    # toolchain dicts are canonical: key order does not change the context
    c2 = Context.of(p, space, toolchain={"cuda": "12.8", "triton": "3.4.0"})
    assert c2.identity == c.identity
    assert Context.of(p, space, toolchain="triton 3.3").identity != c.identity
    assert Context.of(make_problem(hw=None), space).hardware == ""


def test_round_trip_all_fields_including_failures(tmp_path: Path, ctx: Context, space: Space):
    cfgs = space.valid_configs()
    ok = full_measurement(cfgs[0])
    fail = Measurement(dict(cfgs[1]), "compile_error", compile_s=3.5,
                       error="triton.CompilationError: out of resource: shared memory\n  line 2",
                       extra={"phase": "compile"})
    timeout = Measurement(dict(cfgs[2]), "timeout", bench_s=10.0, registers=255, spills=0,
                          smem_bytes=0)
    path = tmp_path / "rt.sqlite"
    with Store(path) as s:
        s.put(ctx, ok)
        s.put_many(ctx, [fail, timeout])
    with Store(path) as s:  # reopened: everything came from the file
        for m in (ok, fail, timeout):
            got = s.get(ctx, m.config)
            assert bare(got) == m, (got, m)
            assert got.id is not None and got.kind == "search"
        assert s.get(ctx, cfgs[3]) is None
        assert [bare(m) for m in s.measurements(ctx)] == [ok, fail, timeout]
        assert [m.id for m in s.measurements(ctx)] == sorted(m.id for m in s.measurements(ctx))
        assert s.get(ctx, ok.config).extra["inf"] == math.inf
        assert s.get(ctx, ok.config).spread == ok.spread
        other = Context.of(make_problem(M=128), space)
        assert s.measurements(other) == [] and s.get(other, ok.config) is None


def test_config_key_independent_of_order_and_tuples_survive(store: Store, ctx: Context):
    assert config_key({"a": 1, "b": 2}) == config_key({"b": 2, "a": 1})
    assert config_key({"a": 1}) != config_key({"a": 2})
    m = Measurement({"shape": (16, 32), "a": 1}, samples_ms=[1.0])
    store.put(ctx, m)
    got = store.get(ctx, {"a": 1, "shape": (16, 32)})
    assert got is not None and got.config == {"shape": (16, 32), "a": 1}
    assert isinstance(got.config["shape"], tuple)


def test_rows_are_appended_never_overwritten(store: Store, ctx: Context, space: Space):
    cfg = space.valid_configs()[0]
    a = store.put(ctx, Measurement(dict(cfg), samples_ms=[1.0, 1.1]))
    b = store.put(ctx, Measurement(dict(cfg), samples_ms=[2.0, 2.2], extra={"rerun": 1}), kind="remeasure",
                  run_id=7)
    c = store.put(ctx, Measurement(dict(cfg), "runtime_error", error="illegal address"), kind="verify")
    assert a.id < b.id < c.id and (b.kind, b.run_id, c.kind) == ("remeasure", 7, "verify")
    ms = store.measurements(ctx)
    assert [m.id for m in ms] == [a.id, b.id, c.id] and ms[0].time_ms == pytest.approx(1.05)
    assert store.get(ctx, cfg).status == "runtime_error"  # latest
    assert store.get(ctx, cfg, which="best").time_ms == pytest.approx(1.05)  # fastest ok row
    assert [m.id for m in store.latest(ctx)] == [c.id]
    assert [m.kind for m in store.measurements(ctx, kinds=["remeasure"])] == ["remeasure"]
    assert store.by_id([c.id, a.id]) == [c, a]
    assert store.stats()["measurements"] == 3
    with pytest.raises(StoreError, match="kind"):
        store.put(ctx, Measurement(dict(cfg), time_ms=1.0), kind="guess")
    with pytest.raises(StoreError, match="which"):
        store.get(ctx, cfg, which="oldest")


def test_memo_answers_with_the_first_row_a_search_saw(store: Store, ctx: Context, space: Space):
    cfg = space.valid_configs()[0]
    first = store.put(ctx, Measurement(dict(cfg), time_ms=2.0))
    store.put(ctx, Measurement(dict(cfg), time_ms=1.0), kind="verify")  # a run-off is not an answer
    store.put(ctx, Measurement(dict(cfg), time_ms=3.0), kind="remeasure")
    assert store.memo(ctx, space)[space.key(cfg)] == first


# ------------------------------------------------------------------ memo and resume

class CountingEvaluator(Evaluator):
    """time = BLOCK_M + BLOCK_N / 100 + warps; counts what it was asked."""

    def __init__(self, space: Space):
        self.space = space
        self.problem = make_problem()
        self.clock = 0.0
        self.asked: list[tuple] = []

    def evaluate(self, configs):
        out = []
        for c in configs:
            self.asked.append(self.space.key(c))
            self.clock += 1.0
            t = c["BLOCK_M"] + c["BLOCK_N"] / 100 + c["num_warps"] + (0.5 if c["EVEN_K"] else 0)
            out.append(Measurement(dict(c), samples_ms=[t], compile_s=0.5, bench_s=0.5))
        return out


def test_memo_keys_match_space_key_and_resume_remeasures_nothing(store: Store, ctx: Context,
                                                                 space: Space):
    ev = CountingEvaluator(space)
    first = run(Exhaustive(), ev, Budget(evaluations=20), memo=store.memo(ctx, space),
                on_batch=lambda ms: store.put_many(ctx, ms))
    assert first.evaluations == 20
    memo = store.memo(ctx, space)
    assert set(memo) == set(ev.asked) and len(memo) == 20
    for k, m in memo.items():
        assert k == space.key(m.config)
    # a resumed run answers the 20 from the store and measures only the rest
    ev2 = CountingEvaluator(space)
    second = run(Exhaustive(), ev2, memo=memo, on_batch=lambda ms: store.put_many(ctx, ms))
    n = len(space.valid_configs())
    assert second.evaluations == n - 20 == len(ev2.asked)
    assert not set(ev2.asked) & set(ev.asked)
    assert len(store.memo(ctx, space)) == n
    assert store.best(ctx).objective == min(m.objective for m in store.measurements(ctx))
    # statuses can be left out of the memo so they get measured again
    other = Context.of(make_problem(M=128), space)
    store.put(other, Measurement(dict(space.valid_configs()[0]), "timeout"))
    assert len(store.memo(other, space)) == 1
    assert len(store.memo(other, space, exclude_statuses=["timeout"])) == 0


def test_best_ignores_failures(store: Store, ctx: Context, space: Space):
    cfgs = space.valid_configs()
    assert store.best(ctx) is None
    store.put_many(ctx, [
        Measurement(dict(cfgs[0]), "wrong_result", time_ms=0.01, samples_ms=[0.01]),
        Measurement(dict(cfgs[1]), "compile_error", error="boom"),
        Measurement(dict(cfgs[2]), "timeout", time_ms=0.001),
    ])
    assert store.best(ctx) is None
    assert store.best_configs() == []  # a context with only failures has no best config
    store.put_many(ctx, [Measurement(dict(cfgs[3]), time_ms=2.0),
                         Measurement(dict(cfgs[4]), time_ms=1.0),
                         Measurement(dict(cfgs[5]), "ok", time_ms=math.inf)])
    assert store.best(ctx).config == cfgs[4]
    [row] = store.best_configs()
    assert row.config == cfgs[4] and row.measured == 6 and row.context.identity == ctx.identity


def test_best_configs_filters_and_buckets(store: Store, space: Space):
    near = Context.of(make_problem(M=60), space)  # bucket M=64
    exact = Context.of(make_problem(M=64), space)
    far = Context.of(make_problem(M=40), space)  # bucket M=64 too, but farther from 64
    other_bucket = Context.of(make_problem(M=256), space)
    fp32 = Context.of(make_problem(M=64, dtype="fp32"), space)
    a100 = Context.of(make_problem(M=64, hw=KNOWN_GPUS["A100-SXM"]), space)
    cfgs = space.valid_configs()
    contexts = [near, exact, far, other_bucket, fp32, a100]
    for i, c in enumerate(contexts):
        store.put(c, Measurement(dict(cfgs[i + 10]), time_ms=5.0 + i))
        store.put(c, Measurement(dict(cfgs[i]), time_ms=1.0 + i))
    rows = store.best_configs()
    assert len(rows) == 6 and all(r.measured == 2 for r in rows)
    index = {c.identity: i for i, c in enumerate(contexts)}
    assert all(r.config == cfgs[index[r.context.identity]] for r in rows)
    assert [r.context.hardware for r in store.best_configs(hardware="A100-SXM")] == ["A100-SXM"]
    assert len(store.best_configs(kernel="matmul_kernel", hardware="H100-SXM")) == 5
    assert store.best_configs(kernel="nope") == []
    query = Context.of(make_problem(M=63), space)  # not measured itself
    grouped = store.best_configs(like=query)
    assert [r.context.dims["M"] for r in grouped] == [64, 60, 40]  # nearest shape first
    assert all(r.shape_bucket == "K=4096,M=64,N=4096" for r in grouped)
    assert store.best_nearby(query).context.dims["M"] == 64
    assert store.best_nearby(near).context.identity == near.identity  # exact context wins
    assert store.best_nearby(Context.of(make_problem(M=1000), space)) is None


# ------------------------------------------------------------------ runs and theories

def test_run_journal(store: Store, ctx: Context):
    rid = store.start_run(ctx, "abduction", {"budget": 64, "seed": 1}, heuristics=["mm_skinny"])
    [r] = store.unfinished_runs(ctx)
    assert (r.id, r.strategy, r.status, r.options, r.heuristics, r.pid) == \
        (rid, "abduction", "running", {"budget": 64, "seed": 1}, ["mm_skinny"], os.getpid())
    assert r.finished is None and r.context.identity == ctx.identity
    store.finish_run(rid, "done")
    assert store.unfinished_runs(ctx) == []
    assert store.runs(ctx)[0].status == "done" and store.runs(ctx)[0].finished >= r.started
    with pytest.raises(RuntimeError):
        with store.journal(ctx, "random", {"seed": 2}):
            raise RuntimeError("evaluator died")
    [r2] = store.unfinished_runs()
    assert r2.status == "interrupted" and r2.strategy == "random"
    with store.journal(ctx, "coordesc") as rid3:
        pass
    assert [r.status for r in store.runs(ctx)] == ["done", "interrupted", "done"]
    assert store.runs(ctx)[-1].id == rid3
    with pytest.raises(StoreError, match="done"):
        store.finish_run(rid3, "running")
    with pytest.raises(StoreError, match="no run"):
        store.finish_run(10_000, "done")


def test_theories_round_trip(store: Store):
    t = {"kernel_class": "matmul", "regime": {"M": [1, 64]}, "dtype_family": "fp16",
         "hardware_family": "hopper", "rule": {"tile:M": "min(64, pow2ceil(M))"}, "support": 5,
         "refute": 1, "provenance": {"measurements": [1, 2]}, "name": "skinny-M tile"}
    tid = store.put_theory(t)
    assert store.put_theory(dict(t)) == tid  # same content, same id: replaced, not duplicated
    store.put_theory({"kernel_class": "row_reduction", "rule": {"warps": 8},
                      "hardware_family": "ampere"})
    [got] = store.theories(kernel_class="matmul")
    assert got["id"] == tid and got["updated"] > 0
    assert {k: got[k] for k in t} == t  # dict in, dict out (extra keys too)
    assert len(store.theories()) == 2
    ampere = store.theories(hardware_family="ampere")
    assert [x["kernel_class"] for x in ampere] == ["row_reduction"]
    assert store.theories(kernel_class="matmul", dtype_family="fp32") == []
    store.put_theory({**t, "id": tid, "support": 6})
    assert store.theories(kernel_class="matmul")[0]["support"] == 6
    assert store.delete_theory(tid) and not store.delete_theory(tid)
    with pytest.raises(StoreError, match="kernel_class"):
        store.put_theory({"rule": {}})


def test_stats_and_clear(store: Store, ctx: Context, space: Space):
    other = Context("softmax", "s1", "fp", "pk", {"rows": 4096, "cols": 1000}, "H100-SXM")
    cfgs = space.valid_configs()
    store.put_many(ctx, [Measurement(dict(c), time_ms=1.0) for c in cfgs[:3]])
    store.put(ctx, Measurement(dict(cfgs[3]), "timeout"))
    store.put(other, Measurement({"XBLOCK": 1024}, time_ms=0.5))
    store.start_run(ctx, "random")
    store.put_theory({"kernel_class": "matmul", "rule": {}})
    assert store.stats() == {"contexts": 2, "measurements": 5, "runs": 1, "theories": 1,
                             "ok_measurements": 4, "unfinished_runs": 1}
    assert store.clear(kernel="matmul_kernel") == 4
    assert store.stats() == {"contexts": 1, "measurements": 1, "runs": 0, "theories": 1,
                             "ok_measurements": 1, "unfinished_runs": 0}
    assert store.measurements(ctx) == [] and len(store.measurements(other)) == 1
    assert store.clear() == 1
    assert set(store.stats().values()) == {0}


# ------------------------------------------------------------------ errors and paths

def test_not_a_database_names_the_path(tmp_path: Path):
    bad = tmp_path / "notes.sqlite"
    bad.write_text("these are my notes, not a database\n" * 50)
    with pytest.raises(StoreError) as e:
        Store(bad)
    assert str(bad) in str(e.value) and "another path" in str(e.value)
    assert bad.read_text().startswith("these are my notes")  # left untouched


def test_newer_schema_names_the_path(tmp_path: Path):
    path = tmp_path / "new.sqlite"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    db.commit()
    db.close()
    with pytest.raises(StoreError) as e:
        Store(path)
    assert str(path) in str(e.value) and "upgrade abductune" in str(e.value)


def _newer_store(path: Path) -> bytes:
    """A store of a future schema in rollback-journal mode; returns its bytes."""
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = DELETE")
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    db.commit()
    db.close()
    return path.read_bytes()


def test_a_refused_newer_store_is_left_byte_for_byte_unchanged(tmp_path: Path):
    """Issue 28 item 11: the version is read before any pragma that changes the file (WAL is
    recorded in the file's header), so a refused store keeps its bytes and gets no journal."""
    path = tmp_path / "new.sqlite"
    before = _newer_store(path)
    for read_only in (False, True):
        with pytest.raises(StoreError, match="newer than this abductune understands"):
            Store(path, read_only=read_only)
        assert path.read_bytes() == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["new.sqlite"]


def test_a_refused_foreign_database_is_left_unchanged(tmp_path: Path):
    path = tmp_path / "app.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users (name TEXT)")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not an abductune store"):
        Store(path)
    assert path.read_bytes() == before


def test_a_read_only_store_answers_reads_and_refuses_writes_at_once(tmp_path: Path, ctx: Context):
    """Issue 28 item 12: opened read-only (SQLite mode=ro), reads answer, and the first write
    fails at once with one line naming the file and the fix; the file is unchanged."""
    path = tmp_path / "s.sqlite"
    with Store(path) as s:
        s.put(ctx, Measurement({"a": 1}, time_ms=1.0))
    before = path.read_bytes()
    with Store(path, read_only=True) as s:
        assert s.read_only and s.best(ctx).time_ms == 1.0
        t0 = time.perf_counter()
        with pytest.raises(StoreError) as e:
            s.put(ctx, Measurement({"a": 2}, time_ms=2.0))
        assert time.perf_counter() - t0 < 1.0
        msg = str(e.value)
        assert str(path) in msg and "read-only" in msg and "chmod u+w" in msg and "\n" not in msg
        with pytest.raises(StoreError, match="read-only"):
            s.start_run(ctx, "pattern")
    assert path.read_bytes() == before


def test_a_store_the_user_cannot_write_is_opened_read_only(tmp_path: Path, ctx: Context,
                                                          monkeypatch: pytest.MonkeyPatch):
    from abductune.store import _sqlite

    path = tmp_path / "s.sqlite"
    with Store(path) as s:
        s.put(ctx, Measurement({"a": 1}, time_ms=1.0))
    monkeypatch.setattr(_sqlite, "read_only_reason", lambda p: "the file is not writable")
    with Store(path) as s:
        assert s.read_only and len(s.measurements(ctx)) == 1
        with pytest.raises(StoreError, match="the file is not writable"):
            s.put(ctx, Measurement({"a": 2}, time_ms=2.0))


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write a file whatever its mode")
def test_a_chmod_read_only_store_is_detected(tmp_path: Path, ctx: Context):
    path = tmp_path / "s.sqlite"
    with Store(path) as s:
        s.put(ctx, Measurement({"a": 1}, time_ms=1.0))
    path.chmod(0o444)
    with Store(path) as s:
        assert s.read_only and s.best(ctx).time_ms == 1.0


def test_tests_never_open_the_real_default_store(tmp_path: Path, ctx: Context):
    """Issue 28 item 7: tests/conftest.py gives every test a temporary default store, so
    `Store()`, the decorator without store= and `cache` without --store stay in tmp_path."""
    from click.testing import CliRunner
    from conftest import REAL_DEFAULT_STORE

    from abductune.autotune.keys import _STORES, open_store
    from abductune.cli import main

    def state() -> tuple:
        return tuple(q.stat().st_mtime_ns if q.exists() else None
                     for q in (REAL_DEFAULT_STORE, Path(f"{REAL_DEFAULT_STORE}-wal")))
    before = state()
    assert default_path().is_relative_to(tmp_path) and default_path() != REAL_DEFAULT_STORE
    with Store() as s:
        s.put(ctx, Measurement({"a": 1}, time_ms=1.0))
        assert Path(s.path).is_relative_to(tmp_path)
    opened = open_store(None)
    try:
        assert Path(opened.path).is_relative_to(tmp_path)
    finally:
        _STORES.pop(opened.path, None)
        opened.close()
    r = CliRunner().invoke(main, ["cache", "ls"])
    assert r.exit_code == 0, r.output + r.stderr
    assert state() == before  # the real default store was neither created nor written


def test_foreign_sqlite_database_is_refused(tmp_path: Path):
    path = tmp_path / "app.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users (name TEXT)")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="not an abductune store"):
        Store(path)


def test_env_var_and_default_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ctx: Context):
    target = tmp_path / "deep" / "dir" / "env.sqlite"
    monkeypatch.setenv(ENV_VAR, str(target))
    assert default_path() == target
    with Store() as s:
        assert s.path == str(target)
        s.put(ctx, Measurement({"a": 1}, time_ms=1.0))
    assert target.exists()
    with Store(target) as s:
        assert len(s.measurements(ctx)) == 1
    monkeypatch.delenv(ENV_VAR)
    assert default_path() == Path(platformdirs.user_cache_dir("abductune")) / "store.sqlite"


def test_closed_store_and_memory_store(ctx: Context):
    s = Store(":memory:")
    s.put(ctx, Measurement({"a": 1}, time_ms=1.0))
    assert s.best(ctx).time_ms == 1.0
    s.close()
    s.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        s.best(ctx)


# ------------------------------------------------------------------ several processes

def _writer(path: str, who: int, n: int, barrier) -> None:
    ctx = Context("matmul_kernel", "abc", "fp", "pk", {"M": 64}, "H100-SXM", "triton 3.4")
    barrier.wait(30)  # both open (and so create) the file at once ...
    with Store(path) as s:
        barrier.wait(30)  # ... and both write at once
        rid = s.start_run(ctx, f"writer{who}")
        for i in range(n):
            s.put(ctx, Measurement({"who": who, "i": i}, samples_ms=[1.0 + i, 1.5 + i]), run_id=rid)
            if i % 50 == 0:
                s.best(ctx)
            time.sleep(0.0005)
        s.finish_run(rid, "done")


def test_two_processes_write_concurrently(tmp_path: Path):
    path = str(tmp_path / "shared.sqlite")  # created by the two writers at once
    spawn = mp.get_context("spawn")
    barrier = spawn.Barrier(2)
    procs = [spawn.Process(target=_writer, args=(path, who, 200, barrier)) for who in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    ctx = Context("matmul_kernel", "abc", "fp", "pk", {"M": 64}, "H100-SXM", "triton 3.4")
    with Store(path) as s:
        ms = s.measurements(ctx)
        assert len(ms) == 400
        assert {(m.config["who"], m.config["i"]) for m in ms} == \
            {(w, i) for w in (0, 1) for i in range(200)}
        assert all(m.time_ms == 1.25 + m.config["i"] for m in ms)
        assert sorted(r.strategy for r in s.runs(ctx)) == ["writer0", "writer1"]
        assert s.unfinished_runs() == []
        assert s.stats()["contexts"] == 1
    # the two really wrote at the same time: their commit intervals overlap
    db = sqlite3.connect(path)
    spans = db.execute("SELECT MIN(created), MAX(created) FROM measurements "
                       "GROUP BY json_extract(config, '$.who')").fetchall()
    db.close()
    assert max(a for a, _ in spans) < min(b for _, b in spans), spans


_CHILD = textwrap.dedent("""
    import sys, time
    from abductune.measurement import Measurement
    from abductune.store import Context, Store
    ctx = Context("matmul_kernel", "abc", "fp", "pk", {"M": 64}, "H100-SXM", "")
    s = Store(sys.argv[1])
    rid = s.start_run(ctx, "exhaustive", {"budget": 10000})
    print("run", rid, flush=True)
    for i in range(10000):
        s.put(ctx, Measurement({"i": i}, samples_ms=[float(i)], compile_s=0.1), run_id=rid)
        print(i, flush=True)
        time.sleep(0.002)
""")


def test_killed_process_keeps_committed_measurements_and_run_is_unfinished(tmp_path: Path):
    path = str(tmp_path / "killed.sqlite")
    child = subprocess.Popen([sys.executable, "-c", _CHILD, path], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        head = child.stdout.readline().split()
        assert head[0] == "run", child.stderr.read()
        rid = int(head[1])
        last = -1
        while last < 60:
            line = child.stdout.readline()
            assert line, child.stderr.read()
            last = int(line)
        os.kill(child.pid, signal.SIGKILL)
        rest = child.stdout.read().split()
        last = max([last, *map(int, rest)])
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(10)
    assert child.returncode == -signal.SIGKILL
    ctx = Context("matmul_kernel", "abc", "fp", "pk", {"M": 64}, "H100-SXM", "")
    space = Space([IntRange("i", 0, 9999)])
    with Store(path) as s:
        ms = s.measurements(ctx)
        n = len(ms)
        # every measurement reported committed is there; at most one more got in before the kill
        assert last + 1 <= n <= last + 2
        assert [m.config["i"] for m in ms] == list(range(n))
        assert all(m.time_ms == float(m.config["i"]) and m.compile_s == 0.1 for m in ms)
        [r] = s.unfinished_runs(ctx)
        assert (r.id, r.status, r.pid, r.strategy) == (rid, "running", child.pid, "exhaustive")
        assert r.options == {"budget": 10000}
        memo = s.memo(ctx, space)
        assert set(memo) == {(i,) for i in range(n)}
        s.put(ctx, Measurement({"i": n}, time_ms=1.0))  # the file is still writable
        s.finish_run(rid, "interrupted")
        assert s.unfinished_runs(ctx)[0].status == "interrupted"


def test_claims_go_to_one_run_and_never_to_a_measured_config(store: Store, ctx: Context, space: Space):
    a, b, done = (dict(c) for c in space.valid_configs()[:3])
    store.put(ctx, Measurement(done, time_ms=1.0))  # measured by someone since a memo was read
    assert store.claim(ctx, [a, b, done], run_id=1) == [True, True, False]
    assert store.claim(ctx, [a, b], run_id=2) == [False, False]  # held by a live process (this one)
    assert store.claim(ctx, [a], run_id=1) == [True]  # a run may re-claim its own
    store.release(ctx, [a])
    assert store.claim(ctx, [a], run_id=2) == [True]


def test_nearest_bests_take_a_sibling_gpus_winners_same_shape_first(store: Store, space: Space):
    """A kernel tuned on an H100 SXM seeds its search on an H200 (same architecture and SM count:
    `hardware.siblings`), the same shape's winner first; never across SM counts or families."""
    from abductune.hardware import siblings

    assert "H100-SXM" in siblings("H200") and "H200" in siblings("H100-SXM") and "H200" not in siblings("H200")
    assert "H100-PCIe" not in siblings("H100-SXM") and "H200" not in siblings("A100-SXM") and siblings("nope") == ()
    tc = {"triton": "3.4.0", "cuda": "12.8"}
    cfgs = space.valid_configs()
    on = {name: {m: Context.of(make_problem(M=m, hw=KNOWN_GPUS[name]), space, toolchain=tc) for m in (64, 256)}
          for name in ("H100-SXM", "H200", "H100-PCIe", "A100-SXM")}
    store.put(on["H100-SXM"][64], Measurement(dict(cfgs[1]), time_ms=1.0))  # the same shape, on the sibling
    store.put(on["H200"][256], Measurement(dict(cfgs[2]), time_ms=1.0))  # another shape, on this GPU
    store.put(on["H100-PCIe"][64], Measurement(dict(cfgs[3]), time_ms=1.0))  # 114 SMs: not a sibling
    store.put(on["A100-SXM"][64], Measurement(dict(cfgs[4]), time_ms=1.0))
    got = store.nearest_bests(on["H200"][64], 3)
    assert [(b.context.hardware, b.context.dims["M"]) for b in got] == [("H100-SXM", 64), ("H200", 256)]
    assert got[0].measurement.config == dict(cfgs[1])
    # at the same distance this GPU's winner comes first
    store.put(on["H100-SXM"][256], Measurement(dict(cfgs[5]), time_ms=1.0))
    got = store.nearest_bests(on["H200"][64], 3)
    assert [(b.context.hardware, b.context.dims["M"]) for b in got] == [("H100-SXM", 64), ("H200", 256),
                                                                       ("H100-SXM", 256)]
    assert store.nearest_bests(on["A100-SXM"][256], 3)[0].context.hardware == "A100-SXM"
    assert all(b.context.hardware == "A100-SXM" for b in store.nearest_bests(on["A100-SXM"][256], 3))
    # what a missed key serves while it is tuned (`on_miss="predict"`): this shape on this GPU, else
    # this shape on a sibling, else the nearest shape here
    assert store.best_nearby(on["H200"][64]).context == on["H100-SXM"][64]
    store.put(on["H200"][64], Measurement(dict(cfgs[6]), time_ms=1.0))
    assert store.best_nearby(on["H200"][64]).context == on["H200"][64]
    assert store.best_nearby(on["A100-SXM"][64]).context == on["A100-SXM"][64]
    got = store.best_nearby(on["H100-PCIe"][256])  # 114 SMs: the SXM's and H200's 256 are not its
    assert got is None or got.context.hardware == "H100-PCIe"


def test_nearest_bests_are_this_kernels_winners_on_its_nearest_other_shapes(store: Store, space: Space):
    """What a search of a new shape tries first (`session.NEAREST_SEEDS`): the winners of
    the same kernel (source, space, GPU, toolchain, dtypes) on other shapes, nearest first, in any
    shape bucket; never the shape itself, another kernel's, or the same kernel in other dtypes."""
    tc = {"triton": "3.4.0", "cuda": "12.8"}
    here = Context.of(make_problem(M=64), space, toolchain=tc)
    near, far = (Context.of(make_problem(M=m), space, toolchain=tc) for m in (128, 8192))
    assert near.shape_bucket != here.shape_bucket or far.shape_bucket != here.shape_bucket
    fp32 = Context.of(make_problem(M=64, dtype="fp32"), space, toolchain=tc)
    cfgs = space.valid_configs()
    for i, c in enumerate((here, near, far, fp32)):
        store.put_many(c, [Measurement(dict(cfgs[i]), time_ms=1.0), Measurement(dict(cfgs[i + 10]), time_ms=2.0)])
    got = store.nearest_bests(here, 2)
    assert [b.context.dims["M"] for b in got] == [128, 8192]
    assert [b.measurement.config for b in got] == [dict(cfgs[1]), dict(cfgs[2])]  # each shape's fastest
    assert store.nearest_bests(here, 1)[0].context == near and store.nearest_bests(here, 0) == []
    # a kernel with nothing else stored has no nearest shapes
    lone = Context.of(make_problem(M=64, dtype="bf16"), space, toolchain=tc)
    assert store.nearest_bests(lone, 2) == []
    # a shape whose space differs (Inductor's and Helion's spaces follow the shape) still counts:
    # its winner is offered, and a caller keeps it only where its own space holds it
    wider = Space([Pow2("BLOCK_M", 16, 256), Pow2("BLOCK_N", 16, 128), Choice("num_warps", [4, 8]),
                   Choice("order", ["row", "col"]), Bool("EVEN_K")], ["BLOCK_M * BLOCK_N <= 16384"])
    other_space = Context.of(make_problem(M=256), wider, toolchain=tc)
    assert other_space.space_fingerprint != here.space_fingerprint
    big = {"BLOCK_M": 256, "BLOCK_N": 64, "num_warps": 8, "order": "row", "EVEN_K": True}
    store.put(other_space, Measurement(big, time_ms=0.5))
    got = store.nearest_bests(here, 2)
    assert [b.context.dims["M"] for b in got] == [128, 256] and got[1].measurement.config == big
    assert not space.is_valid(big)  # what `session.nearest_first` then leaves out
