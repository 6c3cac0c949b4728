"""Zoo kernels zoo_mm_mxfp4 (bf16 x MXFP4 weights) and zoo_mm_bf16_int16 (bf16 x int16 weights):
correctness under Triton's interpreter, the spec surface (space, own list, shapes, FLOPs and
bytes, classification) and compiles for sm_90 on the CPU.

The interpreter (TRITON_INTERPRET=1) must be set before triton is imported, and the compile
checks need the real compiler, so each runs in its own child process (as test_kernels.py does).
Two interpreter gaps are filled in the child, never in the kernels: bf16 `tl.dot` (widened to
fp32, `interpreter_bf16`) and integer -> bf16 casts, which the interpreter does as a raw
integer copy into bf16's bit pattern; the child converts through fp32 with round-to-nearest-even,
as the GPU's cvt.rn does.
"""
from __future__ import annotations

import math
import textwrap

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from abductune import kernels  # noqa: E402
from abductune.classify import classify  # noqa: E402
from abductune.costs import parse_dtypes, problem_costs  # noqa: E402
from abductune.errors import AbductuneError  # noqa: E402
from zoo_fixtures import LAUNCH_SCRIPT, run_child  # noqa: E402

NAMES = ("zoo_mm_mxfp4", "zoo_mm_bf16_int16")

FP4 = dict(num_warps=4, num_stages=2)
I16 = dict(num_warps=4, num_stages=2)
# ragged dims on purpose; the fp4 K is a multiple of its block (32) but not of every BLOCK_K
CASES = {
    "zoo_mm_mxfp4": [
        ({"M": 19, "N": 72, "K": 160},
         [dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=32, SPLIT_K=1, **FP4),    # one MX block per tile
          dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=128, SPLIT_K=1, **FP4),   # four blocks, K tail masked
          dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=64, SPLIT_K=2, **FP4),    # split-K through the atomics
          dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=32, SPLIT_K=4, **FP4)]),  # 5 K tiles in runs of 2: one split idle
        ({"M": 1, "N": 40, "K": 64},  # decode: one row, a partial N tile
         [dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=64, SPLIT_K=1, **FP4)]),
    ],
    "zoo_mm_bf16_int16": [
        ({"M": 37, "N": 70, "K": 100},  # EVEN_K off: K masked
         [dict(TILE_M=16, TILE_N=32, TILE_K=32, GROUP_M=1, **I16),
          dict(TILE_M=16, TILE_N=32, TILE_K=64, GROUP_M=8, **I16)]),    # 3 x 3 tiles swizzled in bands
        ({"M": 1, "N": 96, "K": 128},  # EVEN_K on
         [dict(TILE_M=16, TILE_N=32, TILE_K=32, GROUP_M=8, **I16)]),
    ],
}

INTERPRET_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    from interpreter_bf16 import widen_bf16_dot
    widen_bf16_dot()  # bf16 tl.dot is exact on the CPU

    cast = interpreter.InterpreterBuilder.cast_impl

    def int_to_bf16_through_fp32(self, src, dst_type):
        if dst_type.scalar != tl.bfloat16 or not src.dtype.scalar.is_int():
            return cast(self, src, dst_type)
        bits = src.data.astype(np.float32).view(np.uint32).astype(np.uint64)
        rne = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
        return interpreter.TensorHandle(rne, tl.bfloat16)

    interpreter.InterpreterBuilder.cast_impl = int_to_bf16_through_fp32

    import torch
    from abductune import kernels
    from zoo_fixtures import check_configs
    results = []
    for name, groups in json.loads(sys.argv[1]).items():
        spec = kernels.get(name)
        for dims, configs in groups:
            problem = spec.problem(dims)
            for wide in ([False, True] if name == "zoo_mm_mxfp4" else [False]):
                inputs = spec.make_inputs(problem, device="cpu", seed=1)
                if wide:  # block scales over 2^-20 .. 2^20, not only the ones make_inputs draws
                    g = torch.Generator().manual_seed(2)
                    e = torch.randint(107, 148, inputs[2].shape, generator=g, dtype=torch.int32)
                    inputs = (inputs[0], inputs[1], e.to(torch.uint8))
                results += check_configs(spec, problem, inputs, configs, kernel=name, dims=dims, wide=wide)
    print("RESULTS" + json.dumps(results))
""")


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    return run_child(INTERPRET_SCRIPT, CASES, tmp_path_factory.mktemp("interp"), TRITON_INTERPRET="1")


@pytest.mark.parametrize("name", NAMES)
def test_correct_under_interpreter(interpreted, name):
    rows = [r for r in interpreted if r["kernel"] == name]
    runs = 2 if name == "zoo_mm_mxfp4" else 1  # fp4: make_inputs' scales, then wide ones
    assert len(rows) == runs * sum(len(cfgs) + 1 for _, cfgs in CASES[name])  # + the torch baseline
    for r in rows:
        what = "torch baseline" if r["config"] is None else r["config"]
        assert r["ok"], f"{name} {r['dims']} {what} (wide scales: {r['wide']}): relative error {r['rel_err']}"
        assert r["dtype"] == "torch.bfloat16"
        # the weights are dequantised exactly: what is left is bf16 output rounding (~2^-9),
        # and for int16 the interpreter's bf16 rounding of the output, far under the 2e-2 check
        assert r["rel_err"] < 1e-2


def test_e2m1_table_and_dequantisation_follow_the_format():
    from abductune.kernels.zoo.mm_mxfp4 import E2M1_VALUES, MxFp4Matmul

    for code, v in enumerate(E2M1_VALUES):  # 1 sign, 2 exponent (bias 1), 1 mantissa bit
        s, e, m = code >> 3, (code >> 1) & 3, code & 1
        mag = m * 0.5 if e == 0 else 2.0 ** (e - 1) * (1 + m / 2)
        assert v == (-mag if s else mag) and math.copysign(1, v) == (-1 if s else 1)
    # byte (n, j): element 2j in the low nibble, 2j + 1 in the high one; one scale per 32
    packed = torch.zeros(2, 32, dtype=torch.uint8)
    packed[0, 0] = 0x72  # k=0: code 2 (1.0), k=1: code 7 (6.0)
    packed[1, 20] = 0x9F  # k=40: code 15 (-6.0), k=41: code 9 (-0.5)
    scales = torch.tensor([[127, 130], [120, 125]], dtype=torch.uint8)  # 1, 8 / 2^-7, 1/4
    w = MxFp4Matmul._dequantize(packed, scales, torch.float32)
    assert w.shape == (2, 64)
    assert w[0, 0] == 1.0 and w[0, 1] == 6.0 and w[1, 40] == -6.0 / 4 and w[1, 41] == -0.5 / 4
    assert int((w != 0).sum()) == 4


@pytest.mark.parametrize("name", NAMES)
def test_space_own_list_and_shapes(name):
    spec = kernels.get(name)
    assert spec.name == name and spec.origin.startswith("abductune zoo (ours), after ")
    assert spec.kernel_class == "quantized_matmul" and spec.dims == ("M", "N", "K") and spec.dtype == "bf16"
    space = spec.space()
    n_valid = len(space.valid_configs())
    assert 150 <= n_valid <= 1000, n_valid  # recorded whole
    roles = space.roles()  # no hand-given roles: every parameter's comes from its name
    assert all(p.role is not None for p in space.params)
    assert {"tile:M", "tile:N", "tile:K", "warps", "stages"} <= set(roles)
    assert ("split:K" if name == "zoo_mm_mxfp4" else "group") in roles
    fixed = spec.fixed_configs()
    assert 4 <= len(fixed) <= 8 and len({space.key(c) for c in fixed}) == len(fixed)
    for cfg in fixed + [spec.default_config()]:
        assert space.is_valid(cfg), cfg
    shapes = spec.suite_shapes()
    assert 4 <= len(shapes) <= 6
    assert any(s["M"] <= 16 for s in shapes) and any(s["M"] >= 2048 for s in shapes)
    assert any(any(v & (v - 1) for v in s.values()) for s in shapes)  # a non-power-of-two shape
    for s in shapes:
        p = spec.problem(s)
        assert p.dims == s and p.flops == 2.0 * s["M"] * s["N"] * s["K"] and p.min_bytes > 0
        assert p.dtype == "bf16"  # the roofline's peak: both kernels run the bf16 MMA
        inputs = spec.make_inputs(p, "meta", 0)
        assert all(t.device.type == "meta" for t in inputs)
        out = spec.alloc_output(p, inputs)
        assert out.device.type == "meta" and tuple(out.shape) == (s["M"], s["N"])


def test_problem_dtypes_and_bytes():
    m, n, k = 64, 5760, 2880
    fp4 = kernels.get("zoo_mm_mxfp4").problem({"M": m, "N": n, "K": k})
    assert fp4.dtypes == {"a": "bf16", "b": "e2m1", "b_scale": "e8m0", "c": "bf16"}
    assert fp4.min_bytes == 2 * m * k + n * k / 2 + n * k / 32 + 2 * m * n
    # the generic cost model (what `import --dtypes` computes) counts A, B and C only
    flops, nbytes = problem_costs(fp4.kernel_class, fp4.dims, fp4.dtypes)
    assert flops == fp4.flops and nbytes == fp4.min_bytes - n * k / 32
    i16 = kernels.get("zoo_mm_bf16_int16").problem({"M": m, "N": n, "K": k})
    assert i16.dtypes == {"a": "bf16", "b": "int16", "c": "bf16"}
    assert i16.min_bytes == 2 * (m * k + k * n + m * n) == problem_costs(i16.kernel_class, i16.dims, i16.dtypes)[1]
    # an imported MXFP4 cache can name its scale dtype too
    assert parse_dtypes("a=bf16,b=e2m1,b_scale=e8m0,c=bf16") == fp4.dtypes
    with pytest.raises(AbductuneError, match="multiple of the MX block 32"):
        kernels.get("zoo_mm_mxfp4").problem({"M": 4, "N": 64, "K": 100})


@pytest.mark.parametrize("name,variant,helion", [("zoo_mm_mxfp4", "fp4", "matmul_fp4"),
                                                 ("zoo_mm_bf16_int16", "int16", "matmul_int16")])
def test_classified_as_the_seed_classes(name, variant, helion):
    from abductune.integrations.helion_observed import helion_class

    spec = kernels.get(name)
    for s in spec.suite_shapes():
        c = classify(spec.problem(s), spec.space())
        assert (c.kernel_class, c.variant, c.dtype_family) == ("quantized_matmul", variant, variant), (s, c)
        assert helion_class(c.kernel_class, c.variant) == helion


def test_compile_spec_follows_split_and_even_k():
    fp4 = kernels.get("zoo_mm_mxfp4")
    p = fp4.problem({"M": 1, "N": 5760, "K": 2880})
    _, sig1, consts1, _ = fp4.compile_spec(fp4.default_config(), p)
    _, sig4, consts4, _ = fp4.compile_spec(dict(fp4.default_config(), SPLIT_K=4), p)
    assert sig1["wq_ptr"] == sig1["ws_ptr"] == "*u8" and sig1["x_ptr"] == "*bf16"
    assert sig1["y_ptr"] == "*bf16" and sig4["y_ptr"] == "*fp32" and consts4["SPLIT_K"] == 4
    assert consts1["MX"] == 32 and sig1["M"] == "i32"  # M is not specialised, even at 1
    i16 = kernels.get("zoo_mm_bf16_int16")
    q = i16.problem({"M": 3000, "N": 8192, "K": 1000})
    _, sig, consts, _ = i16.compile_spec(dict(i16.default_config(), TILE_K=64), q)
    assert sig["w_ptr"] == "*i16" and consts["EVEN_K"] is False
    _, _, consts, _ = i16.compile_spec(dict(i16.default_config(), TILE_K=64), i16.problem({"M": 1, "N": 64, "K": 1024}))
    assert consts["EVEN_K"] is True


def test_compiles_for_sm90_offline(tmp_path):
    """The static evaluator (compile_one) and the compile pool's launch path (meta tensors,
    stand-in driver, child process) both build the kernels for sm_90 on the CPU."""
    from abductune.measure.static import compile_one

    static = [("zoo_mm_mxfp4", {"M": 2048, "N": 5760, "K": 2880},
               dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, SPLIT_K=1, num_warps=4, num_stages=3)),
              ("zoo_mm_bf16_int16", {"M": 3000, "N": 8192, "K": 1024},
               dict(TILE_M=128, TILE_N=128, TILE_K=64, GROUP_M=8, num_warps=8, num_stages=3))]
    for name, dims, cfg in static:
        spec = kernels.get(name)
        r = compile_one(spec, cfg, spec.problem(dims).to_dict(), arch="sm_90")
        assert r["status"] == "ok", (name, r["error"])
        assert 0 < r["registers"] <= 255 and r["spills"] == 0 and r["smem_bytes"] > 0, (name, r)
        assert r["mma"] == "wgmma", (name, r)  # 64+ rows a warpgroup: Hopper's MMA
    # the launch path: fp4 split-K (a zeroed fp32 workspace on meta tensors, K tail masked),
    # int16 with the K mask on
    jobs = [["zoo_mm_mxfp4", {"M": 1, "N": 5760, "K": 2880},
             dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=128, SPLIT_K=4, num_warps=4, num_stages=3)],
            ["zoo_mm_bf16_int16", {"M": 256, "N": 8192, "K": 3000},
             dict(TILE_M=64, TILE_N=128, TILE_K=64, GROUP_M=8, num_warps=4, num_stages=4)]]
    got = run_child(LAUNCH_SCRIPT, jobs, tmp_path)
    assert len(got) == len(jobs)
    for (name, dims, cfg), g in zip(jobs, got):
        assert g["compiled_here"], (name, dims, cfg, g)
