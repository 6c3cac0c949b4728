"""The ranker's `unaligned` features (heuristics/features.py, session 37): a tiled product whose
row strides (K, N) are not multiples of Triton's divisibility of 16 gets its register-heavy
features switched on; every other problem gets zeros there, whatever its names."""
from __future__ import annotations

import math

from abductune.hardware import KNOWN_GPUS
from abductune.heuristics.features import NAMES, UNALIGNED_OF, config_features, feature_matrix, unaligned
from abductune.problem import Problem
from abductune.space import Choice, Pow2, Space

H100 = KNOWN_GPUS["H100-SXM"]
SPACE = Space([Pow2("BM", 16, 256), Pow2("BN", 16, 256), Pow2("BK", 16, 128),
               Choice("num_warps", [4, 8]), Choice("num_stages", [2, 3, 4])])
CFG = {"BM": 128, "BN": 256, "BK": 64, "num_warps": 8, "num_stages": 4}
COLS = [NAMES.index(f"unaligned*{n}") for n in UNALIGNED_OF]


def _mm(m, n, k):
    return Problem("mm", "matmul", {"M": m, "N": n, "K": k}, {"a": "bf16", "b": "bf16", "c": "bf16"},
                   hardware=H100)


def test_strides_off_sixteen_are_unaligned_and_m_does_not_count():
    assert not unaligned(_mm(4096, 4096, 4096), SPACE)
    assert not unaligned(_mm(1000, 3008, 1008), SPACE)  # M is no row stride of a row-major product
    assert unaligned(_mm(4096, 4096, 1000), SPACE)  # K: A's row stride
    assert unaligned(_mm(4096, 3000, 4096), SPACE)  # N: B's and the output's
    assert unaligned(_mm(4000, 5000, 1000), SPACE)


def test_the_flag_switches_on_the_register_features_and_nothing_else():
    aligned = config_features(_mm(4096, 3008, 1008), SPACE, CFG)
    off = config_features(_mm(4096, 3000, 1000), SPACE, CFG)
    assert all(aligned[i] == 0.0 for i in COLS)
    acc = 128 * 256 / 256  # fp32 accumulator values per thread on 8 warps
    operand = (128 * 64 + 64 * 256) * 2 / 4 / 256  # bf16 A and B tiles in 32-bit registers per thread
    got = dict(zip(UNALIGNED_OF, (off[i] for i in COLS)))
    assert got["stages"] == 4 and got["warps"] == 3
    assert math.isclose(got["operand_regs"], math.log2(operand))
    assert got["acc_frac"] > 0 and math.isclose(got["acc_frac"] * 128, acc)
    assert len(aligned) == len(off) == len(NAMES)
    # on one problem, the flag moves its own columns and no other
    on_flag = config_features(_mm(4096, 3000, 1000), SPACE, CFG, off=True)
    off_flag = config_features(_mm(4096, 3000, 1000), SPACE, CFG, off=False)
    assert on_flag == off
    assert [v for i, v in enumerate(on_flag) if i not in COLS] == [v for i, v in enumerate(off_flag) if i not in COLS]
    assert all(off_flag[i] == 0.0 for i in COLS) and any(on_flag[i] != 0.0 for i in COLS)


def test_a_space_without_k_and_n_tiles_is_never_unaligned():
    rows = Problem("ln", "row_reduction", {"rows": 3000, "cols": 1000}, {"x": "bf16"}, hardware=H100)
    sp = Space([Pow2("BLOCK_N", 128, 4096), Choice("num_warps", [4, 8])])
    assert not unaligned(rows, sp)
    m = feature_matrix(rows, sp, [{"BLOCK_N": 1024, "num_warps": 4}])
    assert (m[:, COLS] == 0).all()


def test_the_rankers_reason_says_when_the_strides_are_misaligned():
    from abductune.heuristics.ranker_shipped import rank

    off = rank(_mm(4000, 3000, 1000), SPACE)
    on = rank(_mm(4096, 4096, 4096), SPACE)
    assert off.unaligned and not on.unaligned
    assert "not a multiple of 16" in off.why() and "not a multiple" not in on.why()
    # the flag moves the ranking: the misaligned shape's first pick holds fewer registers
    first_off, first_on = off.configs[0], on.configs[0]
    regs = lambda c: c["BM"] * c["BN"] / (32 * c["num_warps"]) + (c["BM"] + c["BN"]) * c["BK"] / (64 * c["num_warps"])
    assert regs(first_off) <= regs(first_on)
