"""Zoo RMSNorm forward (Gemma-style weight, 2-D row tiles): correctness under Triton's interpreter
(in a child process: TRITON_INTERPRET=1 must be set before triton is imported) on ragged tiny
shapes for the one-tile and the chunked paths, the space and shipped configs, meta inputs, and
compiles for sm_90 on the CPU by both the static path (`compile_one`) and the compile workers'
launch path."""
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
NAME = "zoo_rmsnorm_bf16"


def _cfg(r, c, w, s):
    return {"BLOCK_ROWS": r, "BLOCK_COLS": c, "num_warps": w, "num_stages": s}


# ragged sizes: rows not a multiple of BLOCK_ROWS, cols not a multiple of BLOCK_COLS
CASES = [
    ({"rows": 7, "cols": 300}, [
        _cfg(2, 256, 1, 1),   # chunked: two column chunks, the last ragged
        _cfg(4, 512, 4, 1),   # one tile covers the row
        _cfg(8, 256, 2, 2)]),  # chunked, one program, 1 masked row
    ({"rows": 1, "cols": 1000}, [_cfg(1, 256, 1, 1)]),  # decode: four chunks
]

SCRIPT = textwrap.dedent("""
    import json, math, sys
    import torch
    import abductune.kernels as K
    spec = K.get(sys.argv[1])
    results = []
    for dims, configs in json.loads(sys.argv[2]):
        problem = spec.problem(dims)
        inputs = spec.make_inputs(problem, device="cpu", seed=1)
        ref = spec.reference(inputs)
        for cfg in configs:
            out = spec.alloc_output(problem, inputs)
            out.fill_(float("nan"))  # as the benchmark worker poisons: an unwritten element fails
            spec.launch(cfg, inputs, out)
            ok, err = spec.check(out, ref)
            # the Llama form (w instead of 1 + w) must not pass
            x, w = (t.double() for t in inputs)
            llama = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w).float()
            llama_ok, _ = spec.check(llama, ref)
            out.view(-1)[: max(1, out.numel() // 4)] += 1.0  # a wrong answer must fail
            bad_ok, _ = spec.check(out, ref)
            results.append({"dims": dims, "config": cfg, "ok": ok, "bad_ok": bad_ok, "llama_ok": llama_ok,
                            "rel_err": err if math.isfinite(err) else None})
    print("RESULTS" + json.dumps(results))
""")


def test_correct_under_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(
        p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)}
    r = subprocess.run([sys.executable, "-c", SCRIPT, NAME, json.dumps(CASES)], capture_output=True, text=True,
                       env=env, timeout=300)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULTS")), None)
    assert r.returncode == 0 and line, f"interpreter run failed:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    rows = json.loads(line[len("RESULTS"):])
    assert len(rows) == sum(len(cfgs) for _, cfgs in CASES)
    for row in rows:
        assert row["ok"], f"{row['dims']} {row['config']}: relative error {row['rel_err']}"
        assert not row["bad_ok"] and not row["llama_ok"], row


def test_space_configs_and_problems():
    spec = K.get(NAME)
    assert spec.name == NAME and spec.kernel_class == "row_reduction"
    assert spec.origin.startswith("abductune zoo (ours)")
    space = spec.space()
    n = len(space.valid_configs())
    assert 60 <= n <= 300, n
    fixed = spec.fixed_configs()
    assert 6 <= len(fixed) <= 12 and all(space.is_valid(c) for c in fixed)
    assert space.is_valid(spec.default_config())
    assert all(space.is_valid(c) for _, cfgs in CASES for c in cfgs)
    assert not any(p.role is None for p in space.params)  # every name is one inference reads
    shapes = spec.suite_shapes()
    assert 4 <= len(shapes) <= 6
    for dims in shapes:
        p = spec.problem(dims)
        assert p.flops == 4.0 * dims["rows"] * dims["cols"]
        assert p.min_bytes == 2.0 * (2 * dims["rows"] * dims["cols"] + dims["cols"])
        assert classify(p, space).kernel_class == "row_reduction"
        inputs = spec.make_inputs(p, "meta")  # shapes only
        assert all(t.device.type == "meta" for t in inputs)
        out = spec.alloc_output(p, inputs)
        assert isinstance(out, torch.Tensor) and tuple(out.shape) == (dims["rows"], dims["cols"])
        args = spec.kernel_args(spec.default_config(), p)
        assert list(args) == list(spec.triton_fn.arg_names)


def test_torch_baseline_matches_reference():
    spec = K.get(NAME)
    p = spec.problem({"rows": 5, "cols": 96})
    x, w = spec.make_inputs(p, "cpu", seed=2)
    xf = x.float()
    y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * (1.0 + w.float())).to(x.dtype)
    assert spec.check(y, spec.reference((x, w)))[0]
    spec.torch_baseline((x, w), spec.alloc_output(p, (x, w)))  # runs


def test_compile_for_sm90_static(tmp_path, monkeypatch):
    from abductune.measure.static import compile_one

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # compile for real, not from a cache
    spec = K.get(NAME)
    problem = spec.problem({"rows": 3000, "cols": 14336})
    for cfg in (_cfg(1, 16384, 16, 1), _cfg(32, 256, 8, 2)):  # one tile, and the chunked corner
        assert spec.space().is_valid(cfg)
        r = compile_one(NAME, cfg, problem.to_dict(), arch="sm_90")
        assert r["status"] == "ok", (cfg, r["error"])
        assert r["registers"] and r["spills"] == 0, (cfg, r)


def test_compile_worker_launch_path(tmp_path):
    """Launch as the live evaluator's compile pool does: stand-in driver for sm_90, stand-in tensors."""
    spec = K.get(NAME)
    cases = [(spec.suite_shapes()[-1], spec.fixed_configs()[:2]), ({"rows": 1, "cols": 4096}, [_cfg(1, 256, 1, 2)])]
    code = textwrap.dedent(f"""
        import json
        from abductune import kernels
        from abductune.measure.worker import _init_compile_worker, _first_launch, _compile_inputs
        _init_compile_worker((90, 32))  # launches compile only: no GPU here
        spec = kernels.get({NAME!r})
        out = []
        for dims, cfgs in {cases!r}:
            inputs, buf = _compile_inputs(spec, spec.problem(dims))
            out.append([_first_launch(lambda c=c: spec.launch(c, inputs, buf))["compiled_here"] for c in cfgs])
        print(json.dumps(out))
    """)
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(SRC)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got == [[True, True], [True]]
