"""Element types under the spellings a live call uses (torch's, through `autotune.keys.dtype_name`)
are sized and peaked as the recordings' short names are (`abductune.dtypes`, `costs`,
`HardwareInfo.peak`), and a live call's Problem carries its FLOPs and bytes as a recording's
header does (`autotune.keys.key_problem`). Session 29: live, a float8_e4m3fn matmul was sized at
2 bytes an element and had no roofline, so the resource model pruned configs that ran on the
H100 and diagnosis saw every config as "bound unknown", where the replays saw fp8 and a roofline."""
from __future__ import annotations

import types

import pytest

from abductune.costs import element_bytes, operand_bytes, problem_costs
from abductune.dtypes import canonical
from abductune.hardware import KNOWN_GPUS
from abductune.problem import Problem
from abductune.space import Choice, Pow2, Space
from abductune.theory import resources

H100 = KNOWN_GPUS["H100-SXM"]

# torch dtype name -> bytes an element takes in a tensor
TORCH_SIZES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "float8_e4m3fn": 1, "float8_e5m2": 1,
               "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1, "int8": 1, "uint8": 1,
               "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "bool": 1,
               "complex64": 8, "complex128": 16}


def test_spellings_of_one_type_read_alike():
    assert canonical("torch.bfloat16") == canonical("bfloat16") == "bf16"
    assert {canonical(n) for n in ("float8_e4m3fn", "float8_e5m2", "fp8e4nv", "fp8e5", "fp8e4b15", "FP8")} == {"fp8"}
    assert canonical("float8_e8m0fnu") == "e8m0" and canonical("float4_e2m1fn_x2") == "fp4"
    assert canonical("long") == "int64" and canonical("half") == "fp16"
    assert canonical("my_own_label") == "my_own_label"  # unknown names survive, lowered


def test_every_common_torch_dtype_is_sized_as_torch_stores_it():
    torch = pytest.importorskip("torch")
    from abductune.autotune.keys import dtype_name

    checked = 0
    for name, size in TORCH_SIZES.items():
        dt = getattr(torch, name, None)
        if dt is None:
            continue  # an older torch without this type
        assert torch.empty(0, dtype=dt).element_size() == size  # the table above is torch's own
        assert element_bytes(dtype_name(dt)) == size, name
        checked += 1
    assert checked >= 15


def test_an_fp8_peak_is_the_fp8_peak_under_any_spelling():
    assert H100.peak("float8_e4m3fn") == H100.peak("fp8") > 1.9 * H100.peak("bf16")
    assert H100.peak("torch.float16") == H100.peak("fp16")


def _fp8_problem(spelling: str) -> Problem:
    return Problem("mm_fp8", "matmul", {"M": 2048, "N": 8192, "K": 4096},
                   {"x": spelling, "w": spelling, "x_scale": "fp32", "w_scale": "fp32", "y": "bf16"}, hardware=H100)


def test_the_resource_model_judges_an_fp8_matmul_alike_under_torchs_name():
    sp = Space([Pow2("TILE_M", 16, 256), Pow2("TILE_N", 32, 256), Pow2("TILE_K", 64, 256),
                Choice("num_warps", [4, 8]), Choice("num_stages", [2, 3, 4, 5])])
    for stages, fits in ((3, True), (4, True), (5, False)):  # 4 stages: 192 KB of the H100's 227 KB, and it ran
        cfg = {"TILE_M": 256, "TILE_N": 128, "TILE_K": 128, "num_warps": 8, "num_stages": stages}
        short, live = (resources.infeasible(_fp8_problem(s), sp, cfg) for s in ("fp8", "float8_e4m3fn"))
        assert (short is None) == (live is None) == fits, (stages, short, live)


def test_key_values_are_not_tensors():
    # a live problem names non-integer key values as "key:NAME"; their text is not an operand's type
    assert operand_bytes({"key:ACT": "gelu", "x": "fp8", "w": "fp8", "y": "bf16"}) == (1, 1, 2)
    got = problem_costs("matmul", {"M": 64, "N": 64, "K": 64}, {"key:dt": "torch.float32", "a": "fp8", "b": "fp8",
                                                                 "c": "bf16"})
    assert got == (2.0 * 64 ** 3, 64 * 64 * (1 + 1 + 2))


def test_a_live_problem_carries_its_flops_and_bytes():
    torch = pytest.importorskip("torch")
    from abductune.autotune.keys import key_problem

    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8_e4m3fn")
    space = Space([Pow2("BLOCK_M", 16, 128), Pow2("BLOCK_N", 16, 128), Pow2("BLOCK_K", 16, 128),
                   Choice("num_warps", [4, 8])])
    tuner = types.SimpleNamespace(_key_spec=[(3, "M", None), (4, "N", None), (5, "K", None)],
                                  arg_names=["a", "b", "c", "M", "N", "K"], _source_hash="0" * 16, fn=None,
                                  name="mm_fp8_kernel", kernel_class=None, space=space)
    m, n, k = 64, 96, 128
    a = torch.empty(m, k, dtype=torch.float8_e4m3fn)
    b = torch.empty(k, n, dtype=torch.float8_e4m3fn)
    c = torch.empty(m, n, dtype=torch.bfloat16)
    p = key_problem(tuner, {"a": a, "b": b, "c": c, "M": m, "N": n, "K": k}, {})
    assert p.kernel_class in ("matmul", "quantized_matmul")
    assert p.flops == 2.0 * m * n * k and p.min_bytes == m * k + k * n + m * n * 2
