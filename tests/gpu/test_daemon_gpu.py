"""The daemon on a GPU: a live `tune` runs in it (winner as good as a local run's within the
judged noise), the idle daemon frees the problem's buffers between commands, a cancelled
live command leaves a daemon that serves the next one. Run on a GPU machine:
pytest -m gpu tests/gpu/test_daemon_gpu.py -s"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from abductune import daemon  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "gpu"))
from daemon_bench import descendants, gpu_memory_by_pid  # noqa: E402  (the benchmark's own count)

EXE = [sys.executable, "-m", "abductune.cli"]


@pytest.fixture
def env(tmp_path, monkeypatch):
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    e = {"ABDUCTUNE_RUNTIME_DIR": str(rt), "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    for k, v in e.items():
        monkeypatch.setenv(k, v)
    yield dict(os.environ)
    daemon.stop(every=True)


def run(args, env, **kw):
    return subprocess.run([*EXE, *args], capture_output=True, text=True, env=env, timeout=300, **kw)


def daemon_gpu_mib(pid: int) -> int:
    """GPU memory held by the daemon and every process under it (the benchmark worker is a
    grandchild: the daemon's fork server starts it)."""
    tree = descendants(pid)
    return sum(m for p, m in gpu_memory_by_pid().items() if p in tree)


def test_live_tune_in_the_daemon(env, tmp_path):
    t0 = time.perf_counter()
    r = run(["daemon", "start"], env)
    assert r.returncode == 0 and "workers warm on" in r.stdout, r.stdout + r.stderr
    print(f"daemon start {time.perf_counter() - t0:.1f} s")
    pid = daemon.status()[0]["pid"]
    shape = "rows=4096,cols=14336"
    js = tmp_path / "a.json"
    t0 = time.perf_counter()
    via = run(["tune", "--kernel", "rmsnorm_fp16", "--shapes", shape, "--json", str(js)],
              dict(env, ABDUCTUNE_STORE=str(tmp_path / "a.sqlite")))
    wall = time.perf_counter() - t0
    assert via.returncode == 0, via.stderr
    assert f"running in the abductune daemon, pid {pid}" in via.stderr
    a = json.loads(js.read_text())[0]
    print(f"via the daemon: process {wall:.1f} s, tune {a['wall_s']:.1f} s, {a['evaluations']} evaluations")
    assert a["winner_ms"] <= a["fixed_best_ms"] * 1.03  # never slower than the list's best beyond noise
    held = daemon_gpu_mib(pid)
    print(f"idle daemon holds {held} MiB of GPU memory")
    assert 0 < held < 2048  # the context and flush buffer, not the 4096x14336 inputs kept
    # cancel a live command: the daemon restarts its workers and serves the next one
    p = subprocess.Popen([*EXE, "tune", "--kernel", "matmul_fp16", "--full-budget"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(4)
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=120)
    assert p.returncode == 130
    again = run(["tune", "--kernel", "gelu_mul_fp16", "--shapes", "numel=14680064"], env)
    assert again.returncode == 0 and f"pid {pid}" in again.stderr, again.stderr
