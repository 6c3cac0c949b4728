"""Offline compile workers: Triton's own launch path with a stand-in driver naming the GPU
target and stand-in tensors, so no worker needs a CUDA context (or torch) and the binary lands
under the very cache key a real launch computes. On the CPU: Triton compiles for sm_90 here."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from abductune.errors import AbductuneError
from abductune.measure import target
from abductune.measure.live import Compiler, LiveEvaluator

kernels = pytest.importorskip("abductune.kernels")
pytest.importorskip("triton")

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src"


def _launch_in_child(cache: Path, kernel: str, dims: dict, configs: list[dict]) -> list[dict]:
    """In a fresh process (the stand-in driver is process-wide): launch each config as the
    benchmark worker does, on CPU torch tensors, and report whether Triton compiled it there."""
    code = textwrap.dedent(f"""
        import json, torch
        from abductune import kernels
        from abductune.measure.worker import _init_compile_worker, _first_launch
        _init_compile_worker((90, 32))  # launches compile only: no GPU here
        spec = kernels.get({kernel!r})
        problem = spec.problem({dims!r})
        inputs = tuple(torch.empty(s, dtype=torch.float16) for s in spec.tensor_shapes(problem)[0])
        out = torch.empty(spec.tensor_shapes(problem)[1], dtype=torch.float16)
        print(json.dumps([_first_launch(lambda c=c: spec.launch(c, inputs, out)) for c in {configs!r}]))
    """)
    env = {**os.environ, "TRITON_CACHE_DIR": str(cache), "PYTHONPATH": os.pathsep.join([str(SRC), str(TESTS)])}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_offline_workers_compile_under_the_key_a_real_launch_computes(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # the workers get the parent's env
    spec = kernels.get("gelu_mul_fp16")
    dims = {"numel": 1 << 16}
    problem = spec.problem(dims)
    cfgs = spec.space().valid_configs()[:2]
    c = Compiler(2, target=(90, 32), facts="triton")
    try:
        res = c.compile(spec.name, cfgs, problem)
    finally:
        c.shutdown()
    assert [r.status for r in res] == ["ok", "ok"], [r.error for r in res]
    assert all(r.smem_bytes is not None and r.registers is None for r in res)  # registers: at launch
    other = spec.space().valid_configs()[5]
    got = _launch_in_child(tmp_path, spec.name, dims, cfgs + [other])
    assert [g["compiled_here"] for g in got] == [False, False, True]


def test_a_launch_that_needs_real_tensor_objects_falls_back_to_meta_tensors(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    spec = kernels.get("offline_fixtures:GeluNeedsDevice")
    problem = spec.problem({"numel": 1 << 16})
    c = Compiler(1, target=(90, 32), facts="triton")
    try:
        res = c.compile(spec.name, spec.space().valid_configs()[:2], problem)
    finally:
        c.shutdown()
    assert [r.status for r in res] == ["ok", "ok"], [r.error for r in res]


def test_a_compile_error_stays_a_compile_error_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    spec = kernels.get("gelu_mul_fp16")
    problem = spec.problem({"numel": 1 << 16})
    bad = dict(spec.space().default(), BLOCK=3)  # not a power of two: tl.arange refuses it
    c = Compiler(1, target=(90, 32), facts="triton")
    try:
        [r] = c.compile(spec.name, [bad], problem)
    finally:
        c.shutdown()
    assert r.status == "compile_error" and r.error


def test_the_target_comes_from_nvml_and_mixed_gpus_or_cuda_mode_mean_none(monkeypatch):
    monkeypatch.delenv("ABDUCTUNE_COMPILE_MODE", raising=False)
    monkeypatch.setattr(target, "_devices_nvml", lambda: [("NVIDIA H100 80GB HBM3", 90)] * 2)
    assert target.gpu_arch() == 90 and target.compile_target() == (90, 32)
    assert target.visible_gpu() == ("NVIDIA H100 80GB HBM3", 90)
    monkeypatch.setenv("ABDUCTUNE_COMPILE_MODE", "cuda")
    assert target.compile_target() is None
    monkeypatch.setenv("ABDUCTUNE_COMPILE_MODE", "sometimes")
    with pytest.raises(AbductuneError, match="auto, cuda or offline"):
        target.compile_target()
    monkeypatch.setenv("ABDUCTUNE_COMPILE_MODE", "auto")
    monkeypatch.setattr(target, "_devices_nvml", lambda: [("NVIDIA A100-SXM4-80GB", 80), ("NVIDIA H100 80GB HBM3", 90)])
    assert target.gpu_arch() is None and target.visible_gpu() is None
    monkeypatch.setattr(target, "_devices_nvml", lambda: None)
    monkeypatch.setattr(target, "_archs_smi", lambda: None)
    assert target.compile_target() is None
    monkeypatch.setenv("ABDUCTUNE_COMPILE_MODE", "offline")
    with pytest.raises(AbductuneError, match="nvidia-ml-py"):
        target.compile_target()


def test_binaries_compiled_again_at_launch_switch_the_pool_to_cuda_workers():
    from test_live_policy import FakeCompiler, FakeWorker
    from abductune.hardware import lookup
    from abductune.measure.replies import BenchReply

    class Recompiling(FakeWorker):
        def request(self, msg, timeout):
            r = super().request(msg, timeout)
            return BenchReply(r.status, r.time_ms, r.samples_ms, r.bench_s, compiled_here=True) \
                if msg["op"] == "bench" else r

    class Offline(FakeCompiler):
        target = (90, 32)

        def use_cuda(self):
            self.target = None

    log: list = []
    spec = kernels.get("gelu_mul_fp16")
    problem = spec.problem({"numel": 1 << 20}, lookup("H100-SXM"))
    ev = LiveEvaluator(spec, problem, worker=Recompiling(log, lambda c: 1.0), compiler=Offline(log))
    cfgs = ev.space.valid_configs()
    [m] = ev.evaluate(cfgs[:1])
    assert m.extra.get("compiled_at_launch") and ev.compiler.target == (90, 32)  # once may be chance
    ev.evaluate(cfgs[1:2])
    assert ev.compiler.target is None and ev.compile_misses == 2
