"""benchmarks/gpu/helion_bench.py on a CPU. The driver (`--dry-run`: made-up rows, no torch): the
side-by-side re-timing lands in every row of its kernel and shape, a reused quick row keeps its
wall and says where it came from, the table's ratios use the re-timed kernel times, lanes spread
over GPUs, a child past its deadline is killed with its rows kept. The `--cpu` smoke path: real
searches in Triton's interpreter, one benchmark worker for two searches (given the second
search's cache directory), and where each search's wall time went (helion_account.py)."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu" / "helion_bench.py"


def _run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path / "b.json"), *extra],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_retime_and_reused_quick_rows(tmp_path):
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"rows": [
        {"kernel": "softmax", "shape": [4096, 1024], "mode": "quick", "wall_s": 55.7, "kernel_ms": 0.008,
         "torch_ms": 0.01, "config": "helion.Config(num_warps=1)", "device": "dry-run"},
        {"kernel": "matmul", "shape": [1024, 1024, 1024], "mode": "quick", "error": "timed out"}]}))
    r = _run(tmp_path, "--kernels", "matmul,softmax", "--shapes", "1", "--modes", "none,quick,abductune",
             "--retime", "3", "--reuse-quick", str(earlier), "--probe-worker")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads((tmp_path / "b.json").read_text())["rows"]
    by = {(x["kernel"], x["mode"]): x for x in rows}
    assert len(rows) == 6 and all(x.get("retimed_ms") for x in rows)
    q = by["softmax", "quick"]
    assert q["reused_from"] == str(earlier) and q["wall_s"] == 55.7 and q["kernel_ms_then"] == 0.008
    assert "device_mismatch" not in q
    assert "reused_from" not in by["matmul", "quick"]  # an earlier error is measured again, not reused
    # the table's abductune/quick kernel ratio is the re-timed one
    a = by["softmax", "abductune"]
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("softmax |"))
    assert f"{a['retimed_ms'] / q['retimed_ms']:.3f}" in line and "56s*" in line
    assert "Helion compile" in r.stdout  # where abductune's time went
    # the worker probe runs once, in the first none row
    assert [x["mode"] for x in rows if "worker_start_s" in x] == ["none"] and by["matmul", "none"]["worker_start_s"]
    assert "benchmark worker, spawn to first answer: matmul" in r.stdout


def test_reuse_quick_requires_retime(tmp_path):
    r = _run(tmp_path, "--kernels", "softmax", "--shapes", "1", "--reuse-quick", str(tmp_path / "x.json"))
    assert r.returncode != 0 and "--reuse-quick needs --retime" in r.stderr


def test_lanes_on_several_gpus(tmp_path):
    """--gpus 2: Helion's long searches get a lane per kernel, abductune's searches (one shape a
    kernel) share one process (their place in it recorded), each lane has a GPU; the table
    counts the workers each mode started."""
    r = _run(tmp_path, "--kernels", "matmul,softmax", "--shapes", "1", "--modes", "none,abductune,quick",
             "--gpus", "2", "--retime", "3")
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads((tmp_path / "b.json").read_text())
    lanes = {x["lane"]: x for x in d["lanes"]}
    assert set(lanes) == {"quick#0", "quick#1", "abductune#0", "none#0"}
    assert {x["gpu"] for x in d["lanes"]} == {"0", "1"} and not d["not_reached"]
    abd = sorted((x for x in d["rows"] if x["mode"] == "abductune"), key=lambda x: x["search_index"])
    assert [x["search_index"] for x in abd] == [0, 1] and len({x["lane"] for x in abd}) == 1
    assert all(x.get("retimed_ms") for x in d["rows"]) and len(d["rows"]) == 6
    assert "abductune: 1 benchmark worker(s) started in 2 search(es)" in r.stdout
    assert "quick: 2 benchmark worker(s) started in 2 search(es)" in r.stdout
    assert "geomean over searches after the first in their process: 0.200 (1)" in r.stdout


def _bench_module():
    pytest.importorskip("torch", reason="Helion needs torch")
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import helion_bench
    except ImportError as e:
        pytest.skip(f"Helion does not import here ({type(e).__name__}: {e})")
    return helion_bench


def test_a_child_past_its_deadline_is_killed_and_its_rows_kept(tmp_path, monkeypatch):
    hb = _bench_module()
    fake = tmp_path / "child.py"
    fake.write_text("import json, time\nprint(json.dumps({'kernel': 'matmul', 'shape': [1], 'mode': 'quick'}), "
                    "flush=True)\ntime.sleep(60)\n")
    monkeypatch.setattr(hb, "__file__", str(fake))
    got: list = []
    t0 = time.perf_counter()
    err = hb.run_child({}, {}, 3.0, got.append)
    assert time.perf_counter() - t0 < 30
    assert err == "killed at its deadline (3 s)" and got == [{"kernel": "matmul", "shape": [1], "mode": "quick"}]


def test_cpu_smoke_keeps_one_worker_across_searches(tmp_path):
    """The real thing on a CPU: Triton's interpreter, Helion's own benchmark worker (timed by
    the injected CPU timer), two abductune searches in one process: one worker started."""
    _bench_module()
    r = subprocess.run([sys.executable, str(SCRIPT), "--cpu", "--modes", "abductune", "--shapes", "2",
                        "--evaluations", "2", "--out", str(tmp_path / "c.json")],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads((tmp_path / "c.json").read_text())["rows"]
    assert [x.get("error") for x in rows] == [None, None], rows
    assert [x["search_index"] for x in rows] == [0, 1] and [x["worker_starts"] for x in rows] == [1, 0]
    t = [x["abductune"]["timing"] for x in rows]
    assert [x["worker_reused"] for x in t] == [False, True] and t[0]["worker_kept"]
    assert rows[1]["keeper"]["spawned"] == 1 and rows[1]["keeper"]["reused"] == 1
    assert all(x["max_err"] < 1e-3 and x["device"].startswith("cpu") for x in rows)
    assert "abductune: 1 benchmark worker(s) started in 2 search(es)" in r.stdout
    # the kept worker was given the second search's Triton cache directory (read back from it)
    assert rows[1]["keeper"]["synced"] == 1 and rows[1]["keeper"]["unsynced"] == 0
    # where each search's wall went, from Helion's own classes: the same configs and batches as
    # the search's report, the worker's timing and accuracy jobs, parts that add up to the wall
    from abductune.integrations.helion_account import TOP

    for row, ti in zip(rows, t):
        a = row["account"]
        assert (a["timed"], a["batches"], a["worker_starts"]) == (ti["timed"], ti["batches"], row["worker_starts"])
        assert a["bench_job_s"] > 0 and a["accuracy_s"] > 0 and a["codegen_s"] > 0 and a["final_s"] > 0
        assert a["bench_job_s"] + a["accuracy_s"] <= a["bench_s"] + 1e-3 and a["bench_s"] <= a["batch_s"] + 1e-3
        assert abs(a["wall_s"] - row["wall_s"]) < 1e-3
        assert abs(sum(a[k] for k in TOP) + a["other_s"] - a["wall_s"]) < 0.01
    assert rows[0]["account"]["first_bench_s"] > rows[1]["account"]["first_bench_s"]  # the worker's start-up
    assert "where each search's wall time went" in r.stdout


def test_the_account_puts_helions_classes_back():
    """HelionAccount wraps Helion's methods only inside its block (a static method stays static)."""
    _bench_module()
    from helion.autotuner.base_search import PopulationBasedSearch
    from helion.autotuner.benchmark_provider import LocalBenchmarkProvider
    from helion.autotuner.precompile_future import PrecompileFuture

    from abductune.integrations.helion_account import HelionAccount

    names = [(LocalBenchmarkProvider, "benchmark"), (LocalBenchmarkProvider, "__init__"),
             (PrecompileFuture, "wait_for_all"), (PopulationBasedSearch, "rebenchmark")]
    before = [cls.__dict__[n] for cls, n in names]
    with HelionAccount() as acc:
        assert all(cls.__dict__[n] is not b for (cls, n), b in zip(names, before))
        assert isinstance(PrecompileFuture.__dict__["wait_for_all"], staticmethod)
        assert PrecompileFuture.wait_for_all([]) == []  # still Helion's, through the wrapper
        snap = acc.snapshot()
    assert [cls.__dict__[n] for cls, n in names] == before
    a = acc.since(snap, wall_s=2.0)
    assert a["other_s"] == 2.0 and a["batches"] == 0 and a["precompile_s"] == 0.0  # outside a batch: not counted


def test_abductune_lanes_split_by_kernel_only_with_several_shapes(tmp_path):
    r = _run(tmp_path, "--kernels", "matmul,softmax", "--shapes", "2", "--modes", "abductune,quick", "--gpus", "4")
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads((tmp_path / "b.json").read_text())
    assert {x["lane"] for x in d["lanes"]} == {"quick#0", "quick#1", "abductune#0", "abductune#1"}
    for lane in ("abductune#0", "abductune#1"):  # each still two searches in one process
        assert sorted(x["search_index"] for x in d["rows"] if x["lane"] == lane) == [0, 1]


def test_pick_takes_one_shape_of_a_kernel_and_names_a_wrong_one(tmp_path):
    """--pick attention=1: attention's second shape alone, the other kernels' first N as before;
    a kernel or index with no shape is one clear error."""
    r = _run(tmp_path, "--kernels", "matmul,attention", "--shapes", "1", "--pick", "attention=1",
             "--modes", "none,abductune-full")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads((tmp_path / "b.json").read_text())["rows"]
    assert sorted({(x["kernel"], tuple(x["shape"])) for x in rows}) == [
        ("attention", (1, 32, 4096, 128)), ("matmul", (1024, 1024, 1024))]
    assert {x["mode"] for x in rows} == {"none", "abductune-full"}
    bad = _run(tmp_path, "--kernels", "attention", "--pick", "attention=7")
    assert bad.returncode != 0 and "--pick names no shape: attention=7" in bad.stderr
    bad = _run(tmp_path, "--kernels", "attention", "--pick", "attention")
    assert bad.returncode != 0 and "KERNEL=INDEX" in bad.stderr


def test_timer_graph_reaches_the_retiming_and_falls_back_where_a_call_cannot_be_captured(tmp_path, monkeypatch):
    """--timer graph: the children time kernels as CUDA graphs (the re-timing says so on every
    row); a call that cannot be captured is timed by do_bench instead, and the reason is kept."""
    r = _run(tmp_path, "--kernels", "softmax", "--shapes", "1", "--modes", "none,abductune", "--retime", "3",
             "--timer", "graph")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads((tmp_path / "b.json").read_text())["rows"]
    assert rows and {x.get("retime_timer") for x in rows} == {"cuda graph"}
    r = _run(tmp_path, "--kernels", "softmax", "--shapes", "1", "--modes", "none", "--retime", "3")
    assert {x.get("retime_timer") for x in json.loads((tmp_path / "b.json").read_text())["rows"]} == {"do_bench"}

    _bench_module()  # skips where Helion cannot import
    import helion_bench_kernels as hk
    import triton.testing

    def no_graph(fn, **kw):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(hk, "CPU", False)
    monkeypatch.setenv("HELION_BENCH_TIMER", "graph")
    monkeypatch.setattr(triton.testing, "do_bench_cudagraph", no_graph)
    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, **kw: 1.5)
    monkeypatch.setattr(hk.torch.cuda, "synchronize", lambda: None)
    hk.GRAPH_FALLBACKS.clear()
    assert hk.timer_name() == "cuda graph"
    assert hk.bench_ms(lambda: None) == 1.5
    assert hk.GRAPH_FALLBACKS == ["RuntimeError: operation not permitted when stream is capturing"]
    monkeypatch.setattr(triton.testing, "do_bench_cudagraph", lambda fn, **kw: 0.25)
    assert hk.bench_ms(lambda: None) == 0.25
    hk.GRAPH_FALLBACKS.clear()


def test_reuse_takes_any_modes_rows_and_retimes_them_beside_the_new(tmp_path):
    """--reuse full=JSON(.xz): an uncapped full's rows are not searched again but re-timed beside
    the modes run now; a bad spec is one clear error."""
    import lzma

    earlier = tmp_path / "full.json.xz"
    with lzma.open(earlier, "wt") as f:
        json.dump({"rows": [{"kernel": "softmax", "shape": [4096, 1024], "mode": "full", "wall_s": 513.0,
                             "kernel_ms": 0.0085, "config": "helion.Config(num_warps=4)", "device": "dry-run",
                             "retimed_ms": 9.9, "retime_timer": "do_bench"}]}, f)
    r = _run(tmp_path, "--kernels", "softmax", "--shapes", "1", "--modes", "full,abductune", "--retime", "3",
             "--reuse", f"full={earlier}")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads((tmp_path / "b.json").read_text())["rows"]
    by = {x["mode"]: x for x in rows}
    assert set(by) == {"full", "abductune"} and by["full"]["reused_from"] == str(earlier)
    assert by["full"]["wall_s"] == 513.0 and by["full"]["kernel_ms_then"] == 0.0085
    assert all(x.get("retimed_ms") for x in rows)
    assert by["full"]["retimed_ms"] != 9.9  # the old re-timing is not mixed with this run's
    # the table's abductune / full columns: re-timed kernel, and wall
    head = next(ln for ln in r.stdout.splitlines() if ln.startswith("kernel |"))
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("softmax |"))
    assert head.endswith("abd/full ms | abd/full wall")
    a, f = by["abductune"], by["full"]
    assert line.endswith(f"{a['retimed_ms'] / f['retimed_ms']:.3f} | {a['wall_s'] / 513.0:.3f}")
    bad = _run(tmp_path, "--kernels", "softmax", "--retime", "3", "--reuse", "fastest=x.json")
    assert bad.returncode != 0 and "--reuse takes MODE=JSON" in bad.stderr
    bad = _run(tmp_path, "--kernels", "softmax", "--reuse", f"full={earlier}")
    assert bad.returncode != 0 and "--reuse needs --retime" in bad.stderr


def test_the_cold_retiming_reaches_the_rows_and_its_own_column(tmp_path, monkeypatch):
    """The re-timing's second timer (Helion's own: each call after an L2 flush) lands in every
    row as `retimed_cold_ms` and in the table's `cold` column; `cold_ms` takes the median over
    passes of Helion's `interleaved_bench` and says why where that timer fails."""
    r = _run(tmp_path, "--kernels", "softmax", "--shapes", "1", "--modes", "quick,abductune", "--retime", "3")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads((tmp_path / "b.json").read_text())["rows"]
    by = {x["mode"]: x for x in rows}
    assert all(x.get("retimed_cold_ms") for x in rows)
    head = next(ln for ln in r.stdout.splitlines() if ln.startswith("kernel |")).split(" | ")
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("softmax |")).split(" | ")
    cold = by["abductune"]["retimed_cold_ms"] / by["quick"]["retimed_cold_ms"]
    warm = by["abductune"]["retimed_ms"] / by["quick"]["retimed_ms"]
    assert line[head.index("cold")] == f"{cold:.3f}" and cold != warm

    hb = _bench_module()
    import helion.autotuner.benchmarking as hbm

    passes = iter([[2.0, 1.0], [4.0, 1.5], [3.0, 0.5]])
    seen = []

    def bench(fns, *, repeat, default_cudagraph=False, **kw):
        seen.append((len(fns), default_cudagraph))
        return next(passes)

    monkeypatch.setattr(hbm, "interleaved_bench", bench)
    got = hb.cold_ms({"a": lambda: None, "b": lambda: None}, 3)
    assert got["retimed_cold_ms"] == {"a": 3.0, "b": 1.0} and seen == [(2, True)] * 3

    def broken(fns, **kw):
        raise RuntimeError("capture failed")

    monkeypatch.setattr(hbm, "interleaved_bench", broken)
    assert hb.cold_ms({"a": lambda: None}, 2) == {"cold_error": "RuntimeError: capture failed"}
