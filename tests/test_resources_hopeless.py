"""`resources.hopeless`: configs whose accumulator needs more than twice a thread's registers are
not compiled when growth beyond a list or record mode names them (ptxas spends minutes on them)."""
from __future__ import annotations

from abductune.hardware import lookup
from abductune.problem import Problem
from abductune.space import Choice, Space
from abductune.theory.resources import HOPELESS_REGS_X, MAX_REGS_PER_THREAD, hopeless, spills, trouble


def _mm():
    problem = Problem("mm", "matmul", {"M": 512, "N": 512, "K": 128}, dtypes={"A": "bf16", "B": "bf16"},
                      hardware=lookup("H100-SXM"))
    space = Space([Choice("TILE_M", [64, 128, 256], role="tile:M"), Choice("TILE_N", [64, 128, 256], role="tile:N"),
                   Choice("TILE_K", [16, 32, 64], role="tile:K"), Choice("num_warps", [1, 2, 4, 8], role="warps"),
                   Choice("num_stages", [1, 2], role="stages")])
    return problem, space


def test_an_accumulator_past_twice_the_register_file_is_hopeless_a_lighter_spill_is_not():
    problem, space = _mm()
    base = {"TILE_K": 32, "num_stages": 2}
    # 128 x 256 on 2 warps: 512 fp32 values a thread, past 2 x 255
    heavy = {**base, "TILE_M": 128, "TILE_N": 256, "num_warps": 2}
    assert 128 * 256 / 64 > HOPELESS_REGS_X * MAX_REGS_PER_THREAD
    why = hopeless(problem, space, heavy)
    assert why and "512 accumulator registers per thread" in why
    # 128 x 256 on 4 warps: 256 a thread spills (trouble says so) but is still worth a measurement
    light = {**base, "TILE_M": 128, "TILE_N": 256, "num_warps": 4}
    assert spills(problem, space, light) and hopeless(problem, space, light) is None
    ok = {**base, "TILE_M": 128, "TILE_N": 128, "num_warps": 4}
    assert trouble(problem, space, ok) is None and hopeless(problem, space, ok) is None


def test_a_space_without_roles_is_never_called_hopeless():
    problem, _ = _mm()
    bare = Space([Choice("A", [64, 128, 256]), Choice("B", [1, 2])])
    assert hopeless(problem, bare, {"A": 256, "B": 1}) is None


def test_a_tile_without_an_accumulator_past_twice_the_register_file_is_hopeless():
    # FlagGems' kron (session 25): a BLOCK_M x BLOCK_N tile of an elementwise map. 16 x 4,096 on
    # two warps holds 1,024 values a thread (ptxas ran for minutes on it); 1 x 512 holds 8
    hw = lookup("H100-SXM")
    problem = Problem("kron", "elementwise", {"M": 4096, "N": 4096}, dtypes={"c": "bf16"}, hardware=hw)
    space = Space([Choice("BLOCK_M", [1, 2, 4, 8, 16], role="tile:M"),
                   Choice("BLOCK_N", [512, 1024, 2048, 4096], role="tile:N"),
                   Choice("num_warps", [2, 4, 8, 16], role="warps")])
    why = hopeless(problem, space, {"BLOCK_M": 16, "BLOCK_N": 4096, "num_warps": 2})
    assert why and "1024 values per thread" in why
    assert hopeless(problem, space, {"BLOCK_M": 1, "BLOCK_N": 512, "num_warps": 2}) is None
    # just past twice the register file (512 values a thread) it is not compiled; 256 is tried
    assert hopeless(problem, space, {"BLOCK_M": 8, "BLOCK_N": 4096, "num_warps": 2}) is not None
    assert hopeless(problem, space, {"BLOCK_M": 8, "BLOCK_N": 2048, "num_warps": 2}) is None


def test_three_tiles_without_an_accumulator_count_the_largest_pair_held_at_once():
    # a chunked kernel tiling a product under its own names (BT x BK x BV): its registers hold 2-D
    # slices, so the product of all three (2 M values a thread here) would call every config hopeless
    hw = lookup("H100-SXM")
    problem = Problem("chunk", "other", {"T": 4096, "K": 128, "V": 128}, dtypes={"q": "bf16"}, hardware=hw)
    space = Space([Choice("BT", [64, 128], role="tile:T"), Choice("BK", [64, 128], role="tile:K2"),
                   Choice("BV", [64, 128], role="tile:V"), Choice("num_warps", [4, 8], role="warps")])
    assert hopeless(problem, space, {"BT": 128, "BK": 128, "BV": 128, "num_warps": 4}) is None  # 128 a thread
    assert hopeless(problem, space, {"BT": 128, "BK": 128, "BV": 128, "num_warps": 1}) is not None  # 512
