"""Zoo row and elementwise kernels: cross-entropy, online softmax, LayerNorm forward and backward,
SwiGLU. Correctness under Triton's interpreter (in a child process: TRITON_INTERPRET=1 must be set
before triton is imported), spaces and shipped configs, meta inputs, and compiles for sm_90 on the
CPU, both the static path (`compile_one`) and the compile workers' launch path."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import abductune.kernels as K  # noqa: E402
from abductune.classify import classify  # noqa: E402

SRC = Path(__file__).resolve().parent.parent / "src"
NAMES = ["zoo_cross_entropy_bf16", "zoo_softmax_online_fp16", "zoo_layernorm_fwd_bf16", "zoo_layernorm_bwd_bf16",
         "zoo_swiglu_bf16"]
CLASSES = {"zoo_cross_entropy_bf16": "row_reduction", "zoo_softmax_online_fp16": "row_reduction",
           "zoo_layernorm_fwd_bf16": "row_reduction", "zoo_layernorm_bwd_bf16": "row_reduction",
           "zoo_swiglu_bf16": "elementwise"}

# kernel -> [(dims, [configs])]: ragged sizes; one-chunk and several-chunk configs where the kernel has both
CASES = {
    "zoo_cross_entropy_bf16": [({"rows": 20, "cols": 1000}, [
        dict(BLOCK_SIZE=256, num_warps=1, num_stages=1),    # 4 chunks, the last ragged
        dict(BLOCK_SIZE=2048, num_warps=8, num_stages=2),   # one chunk
        dict(BLOCK_SIZE=512, num_warps=4, num_stages=3)])],
    "zoo_softmax_online_fp16": [({"rows": 7, "cols": 300}, [
        dict(BLOCK_N=128, num_warps=1, num_stages=1),
        dict(BLOCK_N=512, num_warps=4, num_stages=2),       # lanes past the row never see data
        dict(BLOCK_N=1024, num_warps=1, num_stages=4)])],
    "zoo_layernorm_fwd_bf16": [({"rows": 7, "cols": 300}, [
        dict(BLOCK_SIZE=128, num_warps=1, num_stages=1),    # shifted sums over 3 chunks
        dict(BLOCK_SIZE=512, num_warps=4, num_stages=2),    # whole row
        dict(BLOCK_SIZE=256, num_warps=2, num_stages=3)])],
    "zoo_layernorm_bwd_bf16": [({"rows": 37, "cols": 600}, [
        dict(BLOCK_SIZE=512, GROUP_SIZE_M=32, num_warps=2, num_stages=1),   # chunked, 19 groups of 2 rows
        dict(BLOCK_SIZE=2048, GROUP_SIZE_M=64, num_warps=8, num_stages=1),  # whole row, one row per group
        dict(BLOCK_SIZE=2048, GROUP_SIZE_M=32, num_warps=4, num_stages=2)])],
    "zoo_swiglu_bf16": [({"tokens": 5, "hidden": 100}, [
        dict(BLOCK_TOKENS=1, BLOCK_HIDDEN=64, num_warps=1),
        dict(BLOCK_TOKENS=4, BLOCK_HIDDEN=128, num_warps=4),
        dict(BLOCK_TOKENS=32, BLOCK_HIDDEN=64, num_warps=2)]),
        ({"tokens": 1, "hidden": 300}, [dict(BLOCK_TOKENS=2, BLOCK_HIDDEN=256, num_warps=2)])],
}

SCRIPT = textwrap.dedent("""
    import json, math, sys
    import torch
    import abductune.kernels as K
    results = []
    for name, groups in json.loads(sys.argv[1]).items():
        spec = K.get(name)
        for dims, configs in groups:
            problem = spec.problem(dims)
            inputs = spec.make_inputs(problem, device="cpu", seed=1)
            ref = spec.reference(inputs)
            for cfg in configs:
                out = spec.alloc_output(problem, inputs)
                out.fill_(float("nan"))  # as the benchmark worker poisons: an unwritten element fails
                spec.launch(cfg, inputs, out)
                ok, err = spec.check(out, ref)
                # a wrong answer must fail: perturb the first output and check again
                out.view(-1)[: max(1, out.numel() // 4)] += 1.0
                bad_ok, _ = spec.check(out, ref)
                results.append({"kernel": name, "dims": dims, "config": cfg, "ok": ok, "bad_ok": bad_ok,
                                "rel_err": err if math.isfinite(err) else None})
    print("RESULTS" + json.dumps(results))
""")


@pytest.fixture(scope="module")
def interpreted():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(
        p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)}
    r = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(CASES)], capture_output=True, text=True,
                       env=env, timeout=300)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULTS")), None)
    assert r.returncode == 0 and line, f"interpreter run failed:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    return json.loads(line[len("RESULTS"):])


@pytest.mark.parametrize("name", NAMES)
def test_correct_under_interpreter(interpreted, name):
    rows = [r for r in interpreted if r["kernel"] == name]
    assert len(rows) == sum(len(cfgs) for _, cfgs in CASES[name])
    for r in rows:
        assert r["ok"], f"{name} {r['dims']} {r['config']}: relative error {r['rel_err']}"
        assert not r["bad_ok"], f"{name}: the check passed a perturbed output"


@pytest.mark.parametrize("name", NAMES)
def test_space_configs_and_problems(name):
    spec = K.get(name)
    assert spec.name == name and spec.kernel_class == CLASSES[name] and spec.origin.startswith("abductune zoo (ours)")
    space = spec.space()
    n = len(space.valid_configs())
    assert 60 <= n <= 400, n
    fixed = spec.fixed_configs()
    assert 6 <= len(fixed) <= 12 and all(space.is_valid(c) for c in fixed)
    assert space.is_valid(spec.default_config())
    assert all(space.is_valid(c) for _, cfgs in CASES[name] for c in cfgs)
    assert not any(p.role is None for p in space.params)  # every name is one inference reads
    shapes = spec.suite_shapes()
    assert 4 <= len(shapes) <= 6
    for dims in shapes:
        p = spec.problem(dims)
        assert p.flops > 0 and p.min_bytes > 0
        assert classify(p, space).kernel_class == CLASSES[name]
        # meta inputs: shapes only, and an output can be allocated for them
        inputs = spec.make_inputs(p, "meta")
        assert all(t.device.type == "meta" for t in inputs)
        # one output tensor: the benchmark worker poisons (fill_) and checks exactly one
        assert isinstance(spec.alloc_output(p, inputs), torch.Tensor)
        args = spec.kernel_args(spec.default_config(), p)
        assert list(args) == list(spec.triton_fn.arg_names)


def test_compile_for_sm90_static(tmp_path, monkeypatch):
    from abductune.measure.static import compile_one

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # compile for real, not from a cache
    picks = {  # a corner of each space, on an awkward shape (the launch-path test compiles a shipped config)
        "zoo_cross_entropy_bf16": ({"rows": 2731, "cols": 151936}, [dict(BLOCK_SIZE=32768, num_warps=16, num_stages=4)]),
        "zoo_softmax_online_fp16": ({"rows": 3000, "cols": 5000}, [dict(BLOCK_N=128, num_warps=4, num_stages=1)]),
        "zoo_layernorm_fwd_bf16": ({"rows": 3000, "cols": 5120}, [dict(BLOCK_SIZE=1024, num_warps=1, num_stages=3)]),
        "zoo_layernorm_bwd_bf16": ({"rows": 3000, "cols": 5120}, [dict(BLOCK_SIZE=512, GROUP_SIZE_M=32, num_warps=1,
                                                                       num_stages=2)]),
        "zoo_swiglu_bf16": ({"tokens": 4000, "hidden": 5461}, [dict(BLOCK_TOKENS=64, BLOCK_HIDDEN=64, num_warps=4)]),
    }
    for name, (dims, extra) in picks.items():
        spec = K.get(name)
        problem = spec.problem(dims)
        for cfg in extra:
            assert spec.space().is_valid(cfg)
            r = compile_one(name, cfg, problem.to_dict(), arch="sm_90")
            assert r["status"] == "ok", (name, cfg, r["error"])
            assert r["registers"] and r["spills"] == 0, (name, cfg, r)


def test_compile_worker_launch_path(tmp_path):
    """Launch as the live evaluator's compile pool does: stand-in driver for sm_90, stand-in
    tensors (duck tensors, or meta tensors for kernels with int64/fp32 buffers)."""
    cases = [(name, K.get(name).suite_shapes()[-1], K.get(name).fixed_configs()[:1]) for name in NAMES]
    code = textwrap.dedent(f"""
        import json
        from abductune import kernels
        from abductune.measure.worker import _init_compile_worker, _first_launch, _compile_inputs
        _init_compile_worker((90, 32))  # launches compile only: no GPU here
        out = []
        for name, dims, cfgs in {cases!r}:
            spec = kernels.get(name)
            inputs, buf = _compile_inputs(spec, spec.problem(dims))
            out.append([_first_launch(lambda c=c: spec.launch(c, inputs, buf)) for c in cfgs])
        print(json.dumps(out))
    """)
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(SRC)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert [[g["compiled_here"] for g in per] for per in got] == [[True]] * len(NAMES)


def test_layernorm_bwd_groups_cover_every_row():
    spec = K.get("zoo_layernorm_bwd_bf16")
    for rows in (1, 5, 37, 512, 3000, 16384):
        for g in spec.space()["GROUP_SIZE_M"].values:
            groups, per = spec._groups(rows, g)
            assert groups <= g and (groups - 1) * per < rows <= groups * per
            assert per == math.ceil(rows / g)  # what the kernel computes from GROUP_SIZE_M
