"""Zoo kernels zoo_mm_int8, zoo_mm_w4a16 and zoo_moe_gemm_bf16: spaces, classification,
correctness under Triton's interpreter, and compiles for sm_90 on the CPU.

The interpreter (TRITON_INTERPRET=1) must be set before triton is imported, and the compile
checks need the real compiler, so each runs in its own child process (as test_kernels.py does).
"""
from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from abductune import kernels  # noqa: E402
from abductune.classify import classify  # noqa: E402
from zoo_fixtures import LAUNCH_SCRIPT, run_child  # noqa: E402

NAMES = ("zoo_mm_int8", "zoo_mm_w4a16", "zoo_moe_gemm_bf16")

I8 = dict(GROUP_SIZE_M=8, num_warps=4, num_stages=2)
W4 = dict(num_warps=4, num_stages=2)
MOE = dict(num_warps=4, num_stages=2)
# ragged dims on purpose (not multiples of the tiles); w4a16's K is a multiple of its group (128)
CASES = {
    "zoo_mm_int8": [({"M": 37, "N": 72, "K": 100},
                     [dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=32, BLOCK_SIZE_K=64, **I8),
                      dict(BLOCK_SIZE_M=32, BLOCK_SIZE_N=64, BLOCK_SIZE_K=128, GROUP_SIZE_M=1, num_warps=4,
                           num_stages=3)])],
    "zoo_mm_w4a16": [({"M": 19, "N": 72, "K": 384},
                      [dict(BM=16, BN=32, BK=32, SPLIT_K=1, **W4),      # inside one group
                       dict(BM=32, BN=64, BK=256, SPLIT_K=1, **W4),     # two groups per tile, K tail masked
                       dict(BM=16, BN=32, BK=128, SPLIT_K=2, **W4)])],  # split-K partials summed
    "zoo_moe_gemm_bf16": [({"M": 37, "N": 72, "K": 100, "E": 5},
                           [dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32, GROUP_SIZE_M=1, **MOE),
                            dict(BLOCK_SIZE_M=32, BLOCK_SIZE_N=64, BLOCK_SIZE_K=64, GROUP_SIZE_M=16, **MOE)]),
                          # fewer pairs than experts: empty experts, programs past the last tile
                          ({"M": 3, "N": 40, "K": 64, "E": 12},
                           [dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32, GROUP_SIZE_M=16, **MOE)])],
}

INTERPRET_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    from interpreter_bf16 import widen_bf16_dot
    widen_bf16_dot()  # bf16 tl.dot is exact on the CPU

    from abductune import kernels
    from zoo_fixtures import check_configs
    results = []
    for name, groups in json.loads(sys.argv[1]).items():
        spec = kernels.get(name)
        for dims, configs in groups:
            problem = spec.problem(dims)
            inputs = spec.make_inputs(problem, device="cpu", seed=1)
            results += check_configs(spec, problem, inputs, configs, kernel=name, dims=dims)
    print("RESULTS" + json.dumps(results))
""")


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    return run_child(INTERPRET_SCRIPT, CASES, tmp_path_factory.mktemp("interp"), TRITON_INTERPRET="1")


@pytest.mark.parametrize("name", NAMES)
def test_correct_under_interpreter(interpreted, name):
    rows = [r for r in interpreted if r["kernel"] == name]
    assert len(rows) == sum(len(cfgs) + 1 for _, cfgs in CASES[name])  # + the torch baseline
    want = {"zoo_moe_gemm_bf16": "torch.bfloat16"}.get(name, "torch.float16")
    for r in rows:
        what = "torch baseline" if r["config"] is None else r["config"]
        assert r["ok"], f"{name} {r['dims']} {what}: relative error {r['rel_err']}"
        assert r["dtype"] == want


@pytest.mark.parametrize("name", NAMES)
def test_space_fixed_configs_and_shapes(name):
    spec = kernels.get(name)
    assert spec.name == name and spec.origin.startswith("abductune zoo (ours), after ")
    space = spec.space()
    assert 150 <= len(space.valid_configs()) <= 800
    fixed = spec.fixed_configs()
    assert 6 <= len(fixed) <= 12 and len({space.key(c) for c in fixed}) == len(fixed)
    for cfg in fixed + [spec.default_config()]:
        assert space.is_valid(cfg), cfg
    shapes = spec.suite_shapes()
    assert 4 <= len(shapes) <= 6
    for s in shapes:
        p = spec.problem(s)
        assert p.dims == s and p.flops > 0 and p.min_bytes > 0
        # meta inputs: shapes only, and an output of the right shape
        inputs = spec.make_inputs(p, "meta", 0)
        assert all(t.device.type == "meta" for t in inputs)
        assert spec.alloc_output(p, inputs).device.type == "meta"


@pytest.mark.parametrize("name,kclass,variant", [("zoo_mm_int8", "quantized_matmul", "int8"),
                                                 ("zoo_mm_w4a16", "quantized_matmul", "int4"),
                                                 ("zoo_moe_gemm_bf16", "matmul", "moe")])
def test_classification(name, kclass, variant):
    spec = kernels.get(name)
    for s in spec.suite_shapes():
        c = classify(spec.problem(s), spec.space())
        assert (c.kernel_class, c.variant) == (kclass, variant), (s, c)


def test_moe_routing_is_deterministic_and_consistent():
    spec = kernels.get("zoo_moe_gemm_bf16")
    ids, pairs, start = spec.route(300, 60, seed=3)
    ids2, pairs2, start2 = spec.route(300, 60, seed=3)
    assert torch.equal(ids, ids2) and torch.equal(pairs, pairs2) and torch.equal(start, start2)
    assert not torch.equal(ids, spec.route(300, 60, seed=4)[0])
    assert int(start[-1]) == 600 and sorted(pairs.tolist()) == list(range(600))
    flat = ids.reshape(-1)
    for e in range(60):  # every expert's slice holds exactly its pairs
        mine = pairs[int(start[e]):int(start[e + 1])].long()
        assert bool((flat[mine] == e).all()) and int((flat == e).sum()) == mine.numel()
    assert (ids[:, 0] != ids[:, 1]).all()  # two distinct experts per token


def test_compile_for_sm90_offline(tmp_path):
    # the compile pool's path: offline sm_90 target, meta tensors (no data: MoE routing and
    # w4a16's split-K partial buffer must work on them); int8 is compiled in the next test
    moe = kernels.get("zoo_moe_gemm_bf16")
    jobs = [["zoo_moe_gemm_bf16", moe.suite_shapes()[0], moe.fixed_configs()[0]],
            ["zoo_mm_w4a16", {"M": 512, "N": 18944, "K": 3584},
             dict(BM=64, BN=64, BK=256, SPLIT_K=2, num_warps=4, num_stages=2)]]
    got = run_child(LAUNCH_SCRIPT, jobs, tmp_path)
    assert len(got) == len(jobs)
    for (name, dims, cfg), g in zip(jobs, got):
        assert g["compiled_here"], (name, dims, cfg, g)


def test_compile_one_reports_static_facts():
    from abductune.measure.static import compile_one

    spec = kernels.get("zoo_mm_int8")
    p = spec.problem({"M": 2048, "N": 6144, "K": 4096})
    r = compile_one(spec, spec.default_config(), p.to_dict(), arch="sm_90")
    assert r["status"] == "ok", r["error"]
    assert r["spills"] == 0 and r["smem_bytes"] > 0 and r["mma"] == "wgmma"
