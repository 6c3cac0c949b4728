"""The built-in kernel suite: spaces, problems, compile specs, and correctness on the CPU.

Correctness runs under Triton's interpreter (TRITON_INTERPRET=1), which must be set before the
kernels are decorated, while other test modules compile the same kernels for real. So the
interpreted launches run in one subprocess (a script below) and report JSON back.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import abductune.kernels as K  # noqa: E402
from abductune.errors import AbductuneError  # noqa: E402

# kernel -> [(dims, [configs])]; dims are ragged (not multiples of the blocks) on purpose.
MM = dict(GROUP_M=8, num_warps=4, num_stages=3)
ROW = dict(num_warps=4, num_stages=2)
CASES = {
    "matmul_fp16": [
        ({"M": 37, "N": 70, "K": 100}, [dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=32, GROUP_M=1, num_warps=2, num_stages=2),
                                        dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, **MM)]),
        # 19 tile-rows: two full groups of 8 and a ragged group of 3
        ({"M": 300, "N": 70, "K": 128}, [dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=5)]),
    ],
    "matmul_bf16": [({"M": 37, "N": 70, "K": 100}, [dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, **MM)]),
                    ({"M": 1, "N": 96, "K": 64}, [dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=32, GROUP_M=1, num_warps=2,
                                                       num_stages=4)])],
    # one chunk (BLOCK >= cols) and several chunks (BLOCK < cols), rows not a multiple of ROWS_PER_PROGRAM
    "softmax_fp16": [({"rows": 7, "cols": 300}, [dict(BLOCK=512, ROWS_PER_PROGRAM=1, **ROW),
                                                 dict(BLOCK=128, ROWS_PER_PROGRAM=2, num_warps=1, num_stages=3),
                                                 dict(BLOCK=256, ROWS_PER_PROGRAM=4, num_warps=8, num_stages=1)])],
    "rmsnorm_fp16": [({"rows": 7, "cols": 300}, [dict(BLOCK=512, ROWS_PER_PROGRAM=1, **ROW),
                                                 dict(BLOCK=128, ROWS_PER_PROGRAM=4, num_warps=2, num_stages=3)])],
    "rmsnorm_bf16": [({"rows": 5, "cols": 1000}, [dict(BLOCK=1024, ROWS_PER_PROGRAM=2, **ROW),
                                                  dict(BLOCK=256, ROWS_PER_PROGRAM=1, num_warps=1, num_stages=1)])],
    "gelu_mul_fp16": [({"numel": 3001}, [dict(BLOCK=128, num_warps=1, num_stages=1),
                                         dict(BLOCK=1024, num_warps=8, num_stages=2)])],
}

# Runs in a fresh interpreter with TRITON_INTERPRET=1 set before anything imports triton.
SCRIPT = textwrap.dedent("""
    import json, math, sys
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    from interpreter_bf16 import widen_bf16_dot
    widen_bf16_dot()  # bf16 tl.dot is exact on the CPU

    import torch
    import abductune.kernels as K
    cases = json.loads(sys.argv[1])
    results = []
    for name, groups in cases.items():
        spec = K.get(name)
        for dims, configs in groups:
            problem = spec.problem(dims)
            inputs = spec.make_inputs(problem, device="cpu", seed=1)
            ref = spec.reference(inputs)
            for cfg in configs:
                out = spec.alloc_output(problem, inputs)
                out.fill_(float("nan"))  # an element the kernel forgets to write fails the check
                spec.launch(cfg, inputs, out)
                ok, err = spec.check(out, ref)
                results.append({"kernel": name, "dims": dims, "config": cfg, "ok": ok,
                                "rel_err": err if math.isfinite(err) else None,
                                "dtype": str(out.dtype), "shape": list(out.shape)})
    print("RESULTS" + json.dumps(results))
""")


@pytest.fixture(scope="module")
def interpreted():
    tests = os.path.dirname(os.path.abspath(__file__))  # the child imports interpreter_bf16 from here
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH", "")) if p))
    r = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(CASES)], capture_output=True, text=True,
                       env=env, timeout=300)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULTS")), None)
    assert r.returncode == 0 and line, f"interpreter run failed:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    return json.loads(line[len("RESULTS"):])


@pytest.mark.parametrize("name", K.names())
def test_kernel_correct_under_interpreter(interpreted, name):
    rows = [r for r in interpreted if r["kernel"] == name]
    expected = sum(len(cfgs) for _, cfgs in CASES[name])
    assert len(rows) == expected
    spec = K.get(name)
    for r in rows:
        assert r["ok"], f"{name} {r['dims']} {r['config']}: relative error {r['rel_err']}"
        assert r["rel_err"] < 1e-2
        assert r["dtype"] == f"torch.{ {'fp16': 'float16', 'bf16': 'bfloat16'}[spec.dtype] }"


def test_every_kernel_is_exercised():
    assert set(CASES) == set(K.names())
    assert {"matmul_fp16", "matmul_bf16", "softmax_fp16", "rmsnorm_fp16", "rmsnorm_bf16", "gelu_mul_fp16"} <= set(K.names())


def test_names_do_not_import_triton():
    code = "import sys, abductune.kernels as K; K.names(); print('triton' in sys.modules, 'torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["False", "False"], r.stderr


def test_unknown_kernel_raises_naming_known_ones():
    with pytest.raises(AbductuneError, match="matmul_fp16"):
        K.get("no_such_kernel")


@pytest.mark.parametrize("name", K.names())
def test_fixed_and_default_configs_are_valid(name):
    spec = K.get(name)
    space = spec.space()
    fixed = spec.fixed_configs()
    assert 6 <= len(fixed) <= 12
    assert len({space.key(c) for c in fixed}) == len(fixed), "duplicate fixed configs"
    for cfg in fixed + [spec.default_config()]:
        assert space.is_valid(cfg), cfg
    assert spec.kernel_class in ("matmul", "row_reduction", "elementwise")
    shapes = spec.suite_shapes()
    assert shapes and all(set(s) == set(spec.dims) for s in shapes)
    for s in shapes:
        assert spec.problem(s).dims == s


def test_matmul_space_size_and_roles():
    space = K.get("matmul_fp16").space()
    n = len(space)
    print(f"matmul space: {n} valid of {space.cardinality}")
    assert 500 <= n <= 1200
    roles = space.roles()
    for role, pname in {"tile:M": "BLOCK_M", "tile:N": "BLOCK_N", "tile:K": "BLOCK_K", "group": "GROUP_M",
                        "warps": "num_warps", "stages": "num_stages"}.items():
        assert roles[role] == pname
    # the shared-memory estimate is enforced: 256x256x128 tiles cannot take 4 stages
    assert not space.is_valid(dict(BLOCK_M=256, BLOCK_N=256, BLOCK_K=128, GROUP_M=8, num_warps=8, num_stages=4))
    for c in space.valid_configs():
        assert c["num_stages"] * (c["BLOCK_M"] * c["BLOCK_K"] + c["BLOCK_K"] * c["BLOCK_N"]) * 2 <= 232448


def test_matmul_suite_shapes_cover_llm_regimes():
    shapes = K.get("matmul_fp16").suite_shapes()
    assert 14 <= len(shapes) <= 18
    ms = {s["M"] for s in shapes}
    assert {1, 16, 64} <= ms and {512, 2048, 8192, 16384} <= ms
    assert any(s["N"] <= 128 for s in shapes) and any(s["K"] <= 256 for s in shapes)
    assert any(s["K"] >= 16384 for s in shapes)
    assert {"M": 4096, "N": 4096, "K": 4096} in shapes and {"M": 8192, "N": 8192, "K": 8192} in shapes


def test_problem_flops_and_bytes():
    p = K.get("matmul_bf16").problem({"M": 64, "N": 4096, "K": 1024})
    assert p.flops == 2 * 64 * 4096 * 1024
    assert p.min_bytes == 2 * (64 * 1024 + 1024 * 4096 + 64 * 4096)
    assert p.kernel == "matmul_bf16" and p.kernel_class == "matmul" and p.dtype == "bf16"
    s = K.get("softmax_fp16").problem({"rows": 10, "cols": 300})
    assert s.min_bytes == 2 * 2 * 3000 and s.kernel_class == "row_reduction"
    r = K.get("rmsnorm_fp16").problem({"rows": 10, "cols": 300})
    assert r.min_bytes == 2 * (2 * 3000 + 300)
    e = K.get("gelu_mul_fp16").problem({"numel": 1000})
    assert e.min_bytes == 2 * 3 * 1000 and e.kernel_class == "elementwise"
    with pytest.raises(AbductuneError):
        K.get("matmul_fp16").problem({"M": 1, "N": 2})


def test_source_hash_tracks_the_triton_source():
    h = {n: K.get(n).problem(K.get(n).suite_shapes()[0]).source_hash for n in K.names()}
    assert all(len(v) == 16 for v in h.values())
    assert h["matmul_fp16"] == h["matmul_bf16"]  # one kernel, two dtypes
    assert len({h["matmul_fp16"], h["softmax_fp16"], h["rmsnorm_fp16"], h["gelu_mul_fp16"]}) == 4


def test_compile_spec_specialises_like_a_launch():
    spec = K.get("matmul_fp16")
    cfg = dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4)
    fn, sig, consts, opts = spec.compile_spec(cfg, spec.problem({"M": 1, "N": 4096, "K": 4100}))
    assert list(sig) == list(fn.arg_names)
    assert sig["a_ptr"] == sig["c_ptr"] == "*fp16" and sig["N"] == sig["K"] == "i32"
    # ints equal to 1 (unit strides) become constants, as in a real launch; M is marked
    # do_not_specialize so a decode step (M=1) shares the prefill shapes' compiled kernel
    assert sig["stride_ak"] == "constexpr" and consts["stride_bn"] == 1
    assert sig["M"] == "i32" and "M" not in consts
    assert {k: consts[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")} == \
        {k: cfg[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}
    assert consts["EVEN_K"] is False  # 4100 is not a multiple of 64
    assert opts == {"num_warps": 8, "num_stages": 4}
    attrs = spec.compile_attrs(cfg, spec.problem({"M": 1, "N": 4096, "K": 4100}))
    assert attrs["a_ptr"] == 16 and attrs["N"] == 16 and "K" not in attrs and "M" not in attrs
    _, sig, consts, _ = K.get("rmsnorm_bf16").compile_spec(K.get("rmsnorm_bf16").default_config(),
                                                           K.get("rmsnorm_bf16").problem({"rows": 8, "cols": 4096}))
    assert sig["x_ptr"] == "*bf16" and sig["eps"] == "fp32" and consts["ONE_CHUNK"] is True
    with pytest.raises(AbductuneError, match="BLOCK_Q"):
        spec.compile_spec({**cfg, "BLOCK_Q": 2}, spec.problem({"M": 8, "N": 8, "K": 8}))


def test_check_rejects_wrong_nan_and_misshapen_outputs():
    spec = K.get("matmul_fp16")
    ref = torch.randn(32, 48, dtype=torch.float32)
    good = ref.to(torch.float16)
    ok, err = spec.check(good, ref)
    assert ok and err < 1e-3
    bad = good.clone()
    bad[5:10, 7] += 3.0  # a few wrong elements (a missed edge tile)
    assert spec.check(bad, ref)[0] is False
    nan = good.clone()
    nan[0, 0] = float("nan")
    ok, err = spec.check(nan, ref)
    assert ok is False and math.isinf(err)
    inf = good.clone()
    inf[1, 1] = float("inf")
    assert spec.check(inf, ref)[0] is False
    assert spec.check(good[:, :40], ref)[0] is False


def test_inputs_are_random_deterministic_and_baselines_match_reference():
    for name, dims in [("matmul_fp16", {"M": 33, "N": 40, "K": 72}), ("softmax_fp16", {"rows": 9, "cols": 130}),
                       ("gelu_mul_fp16", {"numel": 777})]:
        spec = K.get(name)
        p = spec.problem(dims)
        a = spec.make_inputs(p, device="cpu", seed=3)
        b = spec.make_inputs(p, device="cpu", seed=3)
        c = spec.make_inputs(p, device="cpu", seed=4)
        assert all(torch.equal(x, y) for x, y in zip(a, b))
        assert not torch.equal(a[0], c[0])
        assert all(bool((x != 0).any()) and x.std() > 0.1 for x in a)
        out = spec.alloc_output(p, a)
        spec.torch_baseline(a, out)
        ok, err = spec.check(out, spec.reference(a))
        assert ok, (name, err)
