"""@abductune.autotune and its store across processes: a second process measures nothing, two
processes missing one key agree on one winner, `abductune cache` export/import round trips
(Triton autotune JSON and vLLM config JSON), the source hash follows @triton.jit
dependencies, and the parallel-compile decision. Runs under Triton's interpreter on the CPU."""
from __future__ import annotations

import importlib.util
import json
import logging
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from autotune_kernels import INTERPRET, env, interpreted

if INTERPRET:  # in the interpreted child process: TRITON_INTERPRET=1 was set before triton is imported
    torch = pytest.importorskip("torch")
    triton = pytest.importorskip("triton")
    from click.testing import CliRunner

    from autotune_kernels import matmul as mm

    from abductune.autotune import Autotuner, CompilePool, compile_plan, kernel_source_hash
    from abductune.autotune.compiling import _encode, _warm_worker
    from abductune.cli import main
    from abductune.store import Store

ROOT = Path(__file__).resolve().parents[1]

def fixed_timer(cfg, launch):  # as in autotune_kernels/child.py "fixed"
    return [{16: 3.0, 32: 1.0}[cfg["BLOCK_SIZE_M"]] + (cfg["BLOCK_SIZE_N"] == 32)]


def child(store: Path, dims: tuple[int, int, int], mode: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "autotune_kernels.child", str(store), *map(str, dims), mode],
                            cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result(p: subprocess.Popen) -> dict:
    out, err = p.communicate(timeout=240)
    line = next((ln for ln in out.splitlines() if ln.startswith("RESULT")), None)
    assert p.returncode == 0 and line, err[-4000:]
    return json.loads(line[len("RESULT"):])


@interpreted
def test_a_second_process_reads_the_winner_and_measures_nothing(tmp_path: Path):
    store = tmp_path / "s.sqlite"
    k = mm.make(store=store, timer=fixed_timer)
    mm.matmul(k, torch.randn(40, 24), torch.randn(24, 36))
    assert k.stats["evaluations"] == 3
    with Store(store) as s:
        n_rows = s.stats()["measurements"]
    got = result(child(store, (40, 36, 24), "fixed"))
    assert got["ok"] and got["source"] == "store"
    assert got["stats"]["evaluations"] == 0 and got["stats"]["store_hits"] == 1
    assert got["winner"] == next(iter(k.choices.values())).config
    with Store(store) as s:
        assert s.stats()["measurements"] == n_rows  # nothing appended by the second process


@interpreted
def test_two_processes_missing_one_key_agree_on_one_winner(tmp_path: Path):
    store = tmp_path / "s.sqlite"
    # each process would pick its own winner (times drawn from its pid); they must agree
    a, b = child(store, (24, 24, 24), "own"), child(store, (24, 24, 24), "own")
    ra, rb = result(a), result(b)
    assert ra["ok"] and rb["ok"] and ra["winner"] == rb["winner"]
    assert sorted([ra["stats"]["evaluations"], rb["stats"]["evaluations"]]) == [0, 3]
    with Store(store) as s:
        ctx = s.runs()[0].context
        rows = s.measurements(ctx)
        # three configs measured once between them; a run-off (kind verify) may re-time some
        measured = [m for m in rows if m.kind != "verify"]
        keys = lambda ms: {json.dumps(m.config, sort_keys=True) for m in ms}  # noqa: E731
        assert len(measured) == 3 and len(keys(measured)) == 3
        assert keys(rows) == keys(measured)
        [winner] = [r for r in s.runs(ctx) if r.status == "done" and r.winner_id is not None][:1]
        assert s.by_id([winner.winner_id])[0].config == ra["winner"]


@interpreted
def test_cache_cli_exports_and_imports_triton_and_vllm_formats(tmp_path: Path):
    store, out, vout = tmp_path / "s.sqlite", tmp_path / "triton", tmp_path / "vllm"
    k = mm.make(store=store, timer=fixed_timer)
    for m in (16, 40):
        mm.matmul(k, torch.randn(m, 24), torch.randn(24, 36))
    winners = {key[0]: c.config for key, c in k.choices.items()}
    cli = CliRunner()
    run = lambda *a: cli.invoke(main, ["cache", "--store", str(store), *a])  # noqa: E731
    ls = run("ls")
    assert ls.exit_code == 0 and "matmul_kernel" in ls.output and "M=16" in ls.output and "M=40" in ls.output
    show = run("show", "matmul_kernel")
    assert show.exit_code == 0 and show.output.count("launches:") == 2
    assert run("show", "nope").exit_code == 2
    r = run("export", "--format", "triton", str(out))
    assert r.exit_code == 0, r.output
    files = sorted(out.glob("*.autotune.json"))
    assert len(files) == 2
    for f in files:  # Triton's cache_results format: Config(**config.__dict__) and min over timings
        obj = json.loads(f.read_text())
        timings = {triton.Config(**cfg): t for cfg, t in obj["configs_timings"]}
        best = min(timings, key=timings.get)
        m = int(obj["abductune"]["dims"]["M"])
        assert best.kwargs == {n: winners[m][n] for n in best.kwargs} and best.num_warps == winners[m]["num_warps"]
        assert obj["key"][:3] == ["24", str(m), "36"]  # K, M, N
    r = run("export", "--format", "vllm", str(vout))
    assert r.exit_code == 0, r.output
    [vf] = vout.glob("*.json")
    assert vf.name == "matmul_kernel,K=24,N=36,device_name=cpu-interpreter.json"
    vobj = json.loads(vf.read_text())
    assert list(vobj) == ["16", "40"]
    assert all(vobj[str(m)] == {n: v for n, v in winners[m].items()} for m in (16, 40))
    assert list(vobj["16"])[:4] == ["BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M"]  # vLLM's order
    assert run("clear", "--yes").exit_code == 0
    with Store(store) as s:
        assert s.stats()["measurements"] == 0
    r = run("import", str(out))
    assert r.exit_code == 0 and "imported 2 key(s)" in r.output, r.output
    assert "skipped 2" in run("import", str(out)).output
    fresh = mm.make(store=store, timer=lambda c, la: 1 / 0)  # must not measure
    for m in (16, 40):
        a, b = torch.randn(m, 24), torch.randn(24, 36)
        torch.testing.assert_close(mm.matmul(fresh, a, b), a @ b, atol=1e-4, rtol=1e-4)
    assert fresh.stats["evaluations"] == 0 and fresh.stats["store_hits"] == 2
    assert {key[0]: c.config for key, c in fresh.choices.items()} == winners
    plain = tmp_path / "plain.autotune.json"
    plain.write_text(json.dumps({"key": ["1"], "configs_timings": []}))
    r = run("import", str(plain))
    assert r.exit_code == 2 and "no 'abductune' block" in r.output


def _module(tmp_path: Path, name: str, helper: str, scale: int, above: str = "") -> object:
    src = "\n".join([
        "import triton", "import triton.language as tl", "", f"SCALE = tl.constexpr({scale})", above, "",
        "@triton.jit", "def helper(x):", f"    return {helper}", "", "",
        "@triton.jit", "def kern(x_ptr, BLOCK: tl.constexpr):", "    offs = tl.arange(0, BLOCK)",
        "    tl.store(x_ptr + offs, helper(tl.load(x_ptr + offs)))", ""])
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@interpreted
def test_source_hash_follows_jit_dependencies_not_line_numbers(tmp_path: Path):
    base = kernel_source_hash(_module(tmp_path, "m0", "x * SCALE", 2).kern)
    moved = _module(tmp_path, "m1", "x * SCALE", 2, above="def unrelated():\n    return 1\n\n\nZ = 3")
    assert kernel_source_hash(moved.kern) == base  # moved down the file: same kernel
    assert kernel_source_hash(_module(tmp_path, "m2", "x * SCALE + 0", 2).kern) != base  # a helper changed
    assert kernel_source_hash(_module(tmp_path, "m3", "x * SCALE", 3).kern) != base  # a constexpr global changed
    x = torch.ones(16)
    _module(tmp_path, "m4", "x * SCALE", 2).kern[(1,)](x, BLOCK=16)  # the kernel itself runs
    assert torch.equal(x, torch.full((16,), 2.0))


@interpreted
def test_parallel_compile_decision_and_worker(caplog):
    k = mm.make()
    assert compile_plan(k) == ("serial", "Triton's interpreter (TRITON_INTERPRET=1) compiles nothing")
    # a compiled (not interpreted) kernel defined in an importable module compiles in workers
    compiled = SimpleNamespace(fn=SimpleNamespace(fn=k.base_fn), base_fn=k.base_fn)
    assert compile_plan(compiled) == ("parallel", "autotune_kernels.matmul:matmul_kernel")
    assert compile_plan(compiled, "serial")[0] == "serial"
    # built over a wrapper made where it is called (triton.heuristics(...)(kernel)) while the
    # module names the bare kernel: a worker would compile it without the wrapper's values
    wrapped = SimpleNamespace(fn=SimpleNamespace(fn=SimpleNamespace(fn=k.base_fn)), base_fn=k.base_fn)
    plan = compile_plan(wrapped)
    assert plan[0] == "serial" and "cannot rebuild" in plan[1], plan
    ns: dict = {"__name__": "__main__"}
    exec("def script_kernel(x, BLOCK):\n    pass\n", ns)
    main_kernel = Autotuner(ns["script_kernel"], ["x", "BLOCK"], [triton.Config({"BLOCK": 16}),
                                                                  triton.Config({"BLOCK": 32})], ["x"])
    with caplog.at_level(logging.WARNING, logger="abductune.autotune"):
        assert main_kernel._compile_plan()[0] == "serial"
        main_kernel._compile_plan()
    notices = [r.getMessage() for r in caplog.records if "one by one" in r.getMessage()]
    assert len(notices) == 1 and "__main__" in notices[0]  # said once

    def local():  # defined inside a function: workers cannot import it either
        pass
    local_kernel = SimpleNamespace(fn=SimpleNamespace(fn=local), base_fn=local)
    assert compile_plan(local_kernel)[0] == "serial" and "inside a function" in compile_plan(local_kernel)[1]
    # what a worker does: import the module, find the kernel, compile-only call per config
    x = torch.zeros(2, dtype=torch.float16)
    args = [_encode(x), _encode(7), _encode(None)]
    assert args == [{"tensor": "torch.float16", "shape": [2], "align": x.data_ptr() % 16}, 7, None]
    with pytest.raises(TypeError):
        _encode(object())
    cfg = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 2, "num_warps": 2}
    args = [{"tensor": "torch.float32", "shape": [16, 16], "align": 0}] * 3 + [16] * 9  # as JSON carries them
    assert _warm_worker("autotune_kernels.matmul:matmul_kernel", args, {}, cfg) is None
    pool = CompilePool(1)  # a real worker process: imports the module, compiles, answers
    try:
        ok = pool.submit({"target": "autotune_kernels.matmul:matmul_kernel", "args": args, "kwargs": {},
                          "config": cfg})
        bad = pool.submit({"target": "autotune_kernels.nowhere:kernel", "args": [], "kwargs": {}, "config": {}})
        assert ok.result(timeout=120) == {"ok": True}
        got = bad.result(timeout=120)
        assert got["ok"] is False and "nowhere" in got["error"]
    finally:
        pool.close()
