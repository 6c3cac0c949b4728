"""Zoo kernels: FlashAttention-2-style forward (plain and causal) and rotate-half RoPE, on the CPU.

Correctness runs under Triton's interpreter, which must be switched on before Triton decorates
the kernels while other test modules compile the same kernels for real; so, as in
test_kernels.py, the interpreted launches run in a child process (TRITON_INTERPRET=1) that
reports JSON back. Compiling for sm_90 needs no GPU: once through the static evaluator
(compile_one, ptxas facts) and once through the compile workers' launch path (a stand-in driver
and stand-in tensors, as the live evaluator uses).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

import abductune.kernels as K  # noqa: E402
from abductune.classify import classify, tile_dim_name  # noqa: E402

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src"

ATTN = ("zoo_attn_fwd_bf16", "zoo_attn_causal_fwd_bf16")
ROPE = "zoo_rope_bf16"
NAMES = (*ATTN, ROPE)

# kernel -> [(dims, [configs])]. Ragged on purpose: seq 50 is not a multiple of any block (a
# masked last key block, query rows past the end, and for causal a diagonal that crosses
# blocks of unequal size); 9 tokens leave the last program of 4 with one live token, and
# kv_heads 2 < BLOCK_HEADS 4 masks heads.
_ATTN_CASES = [
    ({"batch": 1, "heads": 2, "seq": 50, "head_dim": 32},
     [dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1),
      dict(BLOCK_M=32, BLOCK_N=16, num_warps=4, num_stages=2),
      dict(BLOCK_M=16, BLOCK_N=32, num_warps=2, num_stages=3)]),
    ({"batch": 2, "heads": 1, "seq": 64, "head_dim": 16},
     [dict(BLOCK_M=32, BLOCK_N=32, num_warps=4, num_stages=2)]),
]
CASES = {
    ATTN[0]: _ATTN_CASES,
    ATTN[1]: _ATTN_CASES,
    ROPE: [({"tokens": 9, "heads": 6, "kv_heads": 2, "head_dim": 16},
            [dict(BLOCK_HEADS=2, TOKENS_PER_PROGRAM=1, num_warps=1, num_stages=1),
             dict(BLOCK_HEADS=4, TOKENS_PER_PROGRAM=4, num_warps=2, num_stages=2)]),
           ({"tokens": 3, "heads": 4, "kv_heads": 1, "head_dim": 32},
            [dict(BLOCK_HEADS=8, TOKENS_PER_PROGRAM=2, num_warps=4, num_stages=1)])],
}

SCRIPT = textwrap.dedent("""
    import json, math, sys
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    from interpreter_bf16 import widen_bf16_dot
    widen_bf16_dot()  # bf16 tl.dot is exact on the CPU

    import abductune.kernels as K
    results = []
    for name, groups in json.loads(sys.argv[1]).items():
        spec = K.get(name)
        for dims, configs in groups:
            problem = spec.problem(dims)
            inputs = spec.make_inputs(problem, device="cpu", seed=3)
            ref = spec.reference(inputs)
            for cfg in configs:
                out = spec.alloc_output(problem, inputs)
                for o in (out if isinstance(out, tuple) else (out,)):
                    o.fill_(float("nan"))  # an element the kernel forgets to write fails the check
                spec.launch(cfg, inputs, out)
                ok, err = spec.check(out, ref)
                results.append({"kernel": name, "dims": dims, "config": cfg, "ok": ok,
                                "rel_err": err if math.isfinite(err) else None})
            base = spec.alloc_output(problem, inputs)
            spec.torch_baseline(inputs, base)
            if name == "zoo_rope_bf16":  # the only baseline here that writes `out`
                ok, err = spec.check(base, ref)
                results.append({"kernel": name, "dims": dims, "config": "torch_baseline", "ok": ok,
                                "rel_err": err})
    print("RESULTS" + json.dumps(results))
""")


def _env(**extra: str) -> dict:
    here = str(Path(__file__).resolve().parent)  # the child imports interpreter_bf16 from here
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), here, os.environ.get("PYTHONPATH", "")]), **extra}


@pytest.fixture(scope="module")
def interpreted():
    r = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(CASES)], capture_output=True, text=True,
                       env=_env(TRITON_INTERPRET="1"), timeout=300)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULTS")), None)
    assert r.returncode == 0 and line, f"interpreter run failed:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    return json.loads(line[len("RESULTS"):])


@pytest.mark.parametrize("name", NAMES)
def test_correct_under_interpreter(interpreted, name):
    rows = [r for r in interpreted if r["kernel"] == name and r["config"] != "torch_baseline"]
    assert len(rows) == sum(len(cfgs) for _, cfgs in CASES[name])
    for r in rows:
        assert r["ok"], f"{name} {r['dims']} {r['config']}: relative error {r['rel_err']}"
        assert r["rel_err"] < 1e-2  # bf16 rounding of the output and of P, not a wrong tile


def test_rope_torch_baseline_computes_the_same(interpreted):
    rows = [r for r in interpreted if r["kernel"] == ROPE and r["config"] == "torch_baseline"]
    assert rows and all(r["ok"] for r in rows), rows


def test_causal_reference_differs_from_plain():
    # the interpreter check above would not catch a causal flag that does nothing otherwise
    plain, causal = K.get(ATTN[0]), K.get(ATTN[1])
    p = plain.problem({"batch": 1, "heads": 1, "seq": 40, "head_dim": 16})
    inputs = plain.make_inputs(p, "cpu", 0)
    ok, _ = plain.check(causal.reference(inputs), plain.reference(inputs))
    assert not ok


@pytest.mark.parametrize("name", NAMES)
def test_spec_surface(name):
    spec = K.get(name)
    assert spec.name == name and spec.origin.startswith("abductune zoo (ours)")
    space = spec.space()
    n_valid = len(space.valid_configs())
    assert (150 <= n_valid <= 800) if name in ATTN else (60 <= n_valid <= 400), n_valid
    fixed = spec.fixed_configs()
    assert 6 <= len(fixed) <= 12
    assert len({space.key(c) for c in fixed}) == len(fixed), "duplicate fixed configs"
    for cfg in fixed + [spec.default_config()]:
        assert space.is_valid(cfg), cfg
    shapes = spec.suite_shapes()
    assert 4 <= len(shapes) <= 6 and all(set(s) == set(spec.dims) for s in shapes)
    for s in shapes:
        p = spec.problem(s)
        assert p.dims == s and p.flops > 0 and p.min_bytes > 0
        assert classify(p, space).kernel_class == spec.kernel_class
        meta = spec.make_inputs(p, "meta")  # compile workers build these: no data needed
        assert all(t.device.type == "meta" for t in meta)


def test_roles_and_flops():
    plain, causal, rope = (K.get(n) for n in NAMES)
    assert plain.space().roles().keys() >= {"tile:M", "tile:N", "warps", "stages"}
    dims = {"batch": 2, "heads": 3, "seq": 256, "head_dim": 64}
    cls = classify(plain.problem(dims), plain.space())
    assert (cls.kernel_class, tile_dim_name("tile:M", cls), tile_dim_name("tile:N", cls)) == ("attention", "seq", "seq")
    assert plain.problem(dims).flops == 4 * 2 * 3 * 256 * 256 * 64 == 2 * causal.problem(dims).flops
    assert plain.problem(dims).min_bytes == 4 * 2 * (2 * 3 * 256 * 64)
    rdims = {"tokens": 10, "heads": 32, "kv_heads": 8, "head_dim": 128}
    rcls = classify(rope.problem(rdims), rope.space())
    assert rope.space()["BLOCK_HEADS"].role == "tile:HEADS" and tile_dim_name("tile:HEADS", rcls) == "heads"
    assert rcls.fallback == "all"  # no numel dim: see rope.py's docstring


# one shipped config per kernel on a suite shape, compiled for sm_90 through ptxas
COMPILE = {
    ATTN[0]: ({"batch": 8, "heads": 16, "seq": 512, "head_dim": 64},
              {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 3}),
    ATTN[1]: ({"batch": 2, "heads": 16, "seq": 3000, "head_dim": 128},
              {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3}),
    ROPE: ({"tokens": 3000, "heads": 32, "kv_heads": 8, "head_dim": 128},
           {"BLOCK_HEADS": 8, "TOKENS_PER_PROGRAM": 2, "num_warps": 4, "num_stages": 1}),
}


@pytest.mark.parametrize("name", NAMES)
def test_compiles_for_sm90(name):
    from abductune.measure.static import compile_one

    spec = K.get(name)
    dims, cfg = COMPILE[name]
    assert cfg in spec.fixed_configs()
    r = compile_one(spec, cfg, spec.problem(dims).to_dict(), arch="sm_90")
    assert r["status"] == "ok", r["error"]
    assert r["registers"] and r["spills"] == 0
    if name in ATTN:
        assert r["mma"] == "wgmma"  # Hopper tensor cores for both dots


def test_compile_workers_launch_path(tmp_path):
    """What the live evaluator does: a compile worker compiles via a real launch on stand-in
    tensors (duck tensors for attention, meta tensors for RoPE, whose inputs mix dtypes), and
    the benchmark worker's first launch then finds that binary in the cache."""
    code = textwrap.dedent(f"""
        import json, sys
        from abductune import kernels
        from abductune.measure.worker import _init_compile_worker, _first_launch, _compile_inputs, compile_task
        _init_compile_worker((90, 32))  # launches compile only: no GPU here
        out = []
        for name, (dims, cfg) in json.loads(sys.argv[1]).items():
            spec = kernels.get(name)
            problem = spec.problem(dims)
            res = compile_task(name, cfg, problem.to_dict(), facts="triton")
            inputs, o = _compile_inputs(spec, problem)
            first = _first_launch(lambda: spec.launch(cfg, inputs, o))
            out.append([name, res.status, res.error, first["compiled_here"]])
        print("RESULTS" + json.dumps(out))
    """)
    # the causal kernel is the same Triton function with another constexpr: one of the two suffices
    cases = {n: COMPILE[n] for n in (ATTN[0], ROPE)}
    r = subprocess.run([sys.executable, "-c", code, json.dumps(cases)], capture_output=True, text=True,
                       env=_env(TRITON_CACHE_DIR=str(tmp_path)), timeout=600)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULTS")), None)
    assert r.returncode == 0 and line, r.stderr[-3000:]
    for name, status, error, compiled_here in json.loads(line[len("RESULTS"):]):
        assert status == "ok", (name, error)
        assert compiled_here is False, name  # the compile worker's binary was reused
