"""The launch grid a diagnosis counts with ABDUCTUNE_GRID_UNTILED=1 (`diagnose.GRID_UNTILED`, off
by default): independent dims no tile covers (attention's batch x heads, a row-wise kernel's
rows, a batched matmul's batch) multiply it, a loop tile (attention's keys) does not, a MoE
matmul tiles its tokens per expert, and a kernel that says none of this keeps the grid it had.
Off, the grid is the one before (tiled dims only). Numbers computed by hand for an H100 (132
SMs, 64K registers per SM)."""
from __future__ import annotations

import importlib
import math

import pytest

from abductune import classify as classify_module
from abductune.classify import classify, independent_dims, partitioned_dim, tile_dim_name
from abductune.measurement import Measurement
from abductune.problem import Problem
from abductune.space import Choice, Pow2, Space
from abductune.theory import diagnose
from abductune.theory.diagnose import grid_tiles, padding_waste, tile_padding
from abductune.theory.library import UNDERFILLED
from abductune.theory.library.base import _grid_roles
from theory_fixtures import DEFAULT_MM, H100, elementwise, elementwise_space, matmul, matmul_space, measured


def attention(batch: int, heads: int, seq: int, head_dim: int = 128) -> Problem:
    return Problem("fa_test", "attention", {"batch": batch, "heads": heads, "seq": seq, "head_dim": head_dim},
                   {"q": "bf16"}, flops=4.0 * batch * heads * seq * seq * head_dim,
                   min_bytes=8.0 * batch * heads * seq * head_dim, hardware=H100)


def attention_space() -> Space:
    # FlashAttention's names: BLOCK_M tiles the queries, BLOCK_N the keys each program loops over
    return Space([Pow2("BLOCK_M", 16, 256, default=128), Pow2("BLOCK_N", 16, 256, default=64),
                  Choice("num_warps", [2, 4, 8, 16], default=8), Choice("num_stages", [1, 2, 3, 4], default=3)],
                 name="attention_test")


ATTN = {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3}
diagnose_module = importlib.import_module("abductune.theory.diagnose")  # the package exports a function of that name


@pytest.fixture(autouse=True)
def untiled(monkeypatch):
    """The model on (the test of the switch turns it off itself)."""
    monkeypatch.setattr(diagnose_module, "GRID_UNTILED", True)


def column_blocks(rows: int, cols: int, cols_name: str = "N") -> tuple[Problem, Space]:
    """A row-wise map (Liger's DyT style): one program per row and column block, the row
    length spelt `cols_name`, its block parameter named for that spelling."""
    pb = Problem("rowwise_test", "elementwise", {"rows": rows, cols_name: cols}, {"x": "bf16", "y": "bf16"},
                 flops=float(rows * cols), min_bytes=4.0 * rows * cols, hardware=H100)
    sp = Space([Pow2(f"BLOCK_{cols_name.upper()}", 512, 8192, default=1024),
                Choice("num_warps", [2, 4, 8, 16], default=4), Choice("num_stages", [1, 2], default=1)],
               name="rowwise_test")
    return pb, sp


def test_attention_grid_is_query_tiles_times_batch_and_heads():
    pb, sp = attention(2, 16, 4096), attention_space()
    assert independent_dims(classify(pb, sp)) == ("batch", "heads")
    # registers: ceil(128*32/256)*256 = 4096 per warp -> 16 warps -> 2 blocks of 8 warps;
    # shared memory: 233472 // (65536 + 1024) = 3 -> registers limit at 2
    d = diagnose(measured(ATTN, frac_flops=0.4, registers=128, smem_bytes=65536), pb, sp)
    assert d.tiles == math.ceil(4096 / 128) * 2 * 16 == 1024
    assert d.tiles_along == {"tile:M": 32, "tile:N": 64}
    assert d.blocks_per_sm == 2
    assert d.waves == pytest.approx(1024 / (132 * 2))
    assert d.wave_efficiency == pytest.approx(1024 / (4 * 132 * 2))
    assert d.underfilled is False
    # the key tile is the loop each program runs: its trips, not programs
    assert d.k_trips == 4096 // 64
    assert _grid_roles(pb, sp) == ["tile:M"]
    # the key tile changes no program count; the query tile does
    assert grid_tiles(pb, sp, {**ATTN, "BLOCK_N": 16})[0] == 1024
    assert grid_tiles(pb, sp, {**ATTN, "BLOCK_M": 64})[0] == 2048
    # the score block a program holds is still both tiles (warps matched to it)
    assert d.tile_elems_per_thread == pytest.approx(128 * 64 / (32 * 8))


def test_one_head_of_attention_is_underfilled_and_only_the_query_tile_moves():
    pb, sp = attention(1, 1, 1024), attention_space()
    d = diagnose(measured(ATTN, frac_flops=0.05, frac_bw=0.05, registers=128, smem_bytes=65536), pb, sp)
    assert d.tiles == 8 and d.underfilled is True
    assert UNDERFILLED.applies(d, pb, sp, ATTN)
    moves = UNDERFILLED.propose(d, pb, sp, ATTN)
    assert moves and all(c["BLOCK_N"] == ATTN["BLOCK_N"] for c in moves)
    assert {c["BLOCK_M"] for c in moves} <= {64, 32}
    # 32 heads of the same sequence fill the GPU: nothing to fix there
    full = diagnose(measured(ATTN, frac_flops=0.05, frac_bw=0.05, registers=128, smem_bytes=65536),
                    attention(1, 32, 1024), sp)
    assert full.tiles == 256 and full.underfilled is False
    assert not UNDERFILLED.applies(full, attention(1, 32, 1024), sp, ATTN)


def test_row_wise_map_launches_rows_times_column_blocks():
    pb, sp = column_blocks(4096, 1024, "cols")
    assert tile_dim_name(sp["BLOCK_COLS"].role, classify(pb, sp)) == "cols"
    cfg = {"BLOCK_COLS": 512, "num_warps": 4, "num_stages": 1}
    # registers 32 on 4 warps: 16 blocks by registers and by threads, as many by the block cap
    d = diagnose(measured(cfg, frac_bw=0.5, registers=32), pb, sp)
    assert d.tiles == 4096 * 2
    assert d.blocks_per_sm == 16
    assert d.waves == pytest.approx(8192 / (132 * 16))
    assert d.wave_efficiency == pytest.approx(8192 / (4 * 132 * 16))
    assert d.underfilled is False and d.k_trips is None
    assert grid_tiles(pb, sp, {**cfg, "BLOCK_COLS": 8192})[0] == 4096  # a block past the row: one per row


def test_a_tile_named_as_the_problem_spells_a_renamed_dim_only_with_the_switch(monkeypatch):
    # Liger's DyT: dims rows and "N", which the elementwise class reads as numel
    pb, sp = column_blocks(4096, 1024, "N")
    cfg = {"BLOCK_N": 512, "num_warps": 4, "num_stages": 1}
    assert classify(pb, sp).spelled == {"N": "numel"}
    assert tile_dim_name("tile:N", classify(pb, sp)) is None  # off: no tile known, no grid, as before
    assert grid_tiles(pb, sp, cfg) == (None, {})
    monkeypatch.setattr(classify_module, "TILES_BY_SPELLING", True)
    assert tile_dim_name("tile:N", classify(pb, sp)) == "numel"
    assert grid_tiles(pb, sp, cfg) == (4096 * 2, {"tile:N": 2})


def test_moe_matmul_tiles_its_tokens_per_expert():
    sp = matmul_space()
    decode = Problem("moe_test", "matmul", {"M": 16, "N": 1280, "K": 3584, "E": 64}, {"a": "bf16"}, hardware=H100)
    assert partitioned_dim(classify(decode, sp)) == ("M", "E")
    cfg = {**DEFAULT_MM, "BLOCK_M": 64, "BLOCK_N": 64}
    # 16 tokens over 64 experts: at most 16 experts hold a token, each its own M tile
    programs, along = grid_tiles(decode, sp, cfg)
    assert along["tile:M"] == 16 and programs == 16 * 20
    # and pads in every expert: one token in a 64-row tile
    assert diagnose(measured(cfg), decode, sp).padding["tile:M"] == pytest.approx(1 - 16 / (16 * 64))
    prefill = Problem("moe_test", "matmul", {"M": 2048, "N": 3584, "K": 4096, "E": 8}, {"a": "bf16"}, hardware=H100)
    assert grid_tiles(prefill, sp, cfg)[0] == 8 * math.ceil(256 / 64) * 56
    assert "E" not in independent_dims(classify(prefill, sp))  # experts split M, they do not multiply it


def test_batched_matmul_multiplies_by_its_batch():
    sp = matmul_space()
    pb = Problem("bmm_test", "matmul", {"batch": 6, "M": 512, "N": 512, "K": 512}, {"a": "fp16"}, hardware=H100)
    assert grid_tiles(pb, sp, DEFAULT_MM)[0] == 6 * 4 * 4


def test_a_row_kernels_rows_are_its_only_count_of_programs():
    """A batch norm in the row class (FlagGems': one program per channel): `rows` are the
    channels and `cols` batch x height x width, with `batch` named beside them. The batch lies in
    the reduced columns, so the grid is one program per row, not rows x batch."""
    sp = Space([Pow2("BLOCK_N", 512, 8192, default=1024), Choice("num_warps", [4, 8], default=4)])
    dims = {"rows": 256, "cols": 64 * 56 * 56, "batch": 64, "height": 56, "width": 56}
    pb = Problem("batch_norm_test", "row_reduction", dims, {"x": "bf16"}, hardware=H100)
    assert independent_dims(classify(pb, sp)) == ("rows",)
    assert grid_tiles(pb, sp, {"BLOCK_N": 1024, "num_warps": 4})[0] == 256
    # a row problem spelt without `rows` (its batch read as the rows) still counts its tokens
    named = Problem("tokens_test", "row_reduction", {"batch": 4, "tokens": 512, "hidden": 4096}, hardware=H100)
    assert independent_dims(classify(named, sp)) == ("rows", "tokens")
    assert grid_tiles(named, sp, {"BLOCK_N": 1024, "num_warps": 4})[0] == 4 * 512


def test_kernels_without_that_information_keep_their_grid():
    # the built-in classes, every grid dim tiled: as before
    assert grid_tiles(matmul(4096, 4096, 4096), matmul_space(), DEFAULT_MM) == (
        1024, {"tile:M": 32, "tile:N": 32, "tile:K": 64})
    ragged = {**DEFAULT_MM, "BLOCK_M": 256}
    assert tile_padding(matmul(3000, 5120, 1000), matmul_space(), ragged) == {
        "tile:M": padding_waste(3000, 256), "tile:N": padding_waste(5120, 128), "tile:K": padding_waste(1000, 64)}
    flat = {"BLOCK": 1024, "num_warps": 4, "num_stages": 1}
    assert grid_tiles(elementwise(1 << 20), elementwise_space(), flat)[0] == 1024
    # a user's kernel whose other dim is of no known kind: not a multiplier
    sp = Space([Pow2("BLOCK_X", 64, 1024, default=256), Choice("num_warps", [4, 8], default=4)])
    pb = Problem("user_kernel", "other", {"x": 10000, "y": 64}, hardware=H100)
    assert grid_tiles(pb, sp, {"BLOCK_X": 256, "num_warps": 4})[0] == math.ceil(10000 / 256)
    # no tile covers a dim: unknown, as before; a row kernel still runs one program per row
    free = Space([Choice("a", [1, 2, 3]), Choice("b", ["x", "y"])])
    d = diagnose(Measurement(config={"a": 2, "b": "y"}, time_ms=1.0), Problem("foreign", "other", {"n": 100}), free)
    assert d.tiles is None and d.waves is None
    warps_only = Space([Choice("num_warps", [4, 8], default=4)])
    pb = Problem("rows_user", "row_reduction", {"rows": 300, "cols": 4096}, hardware=H100)
    assert grid_tiles(pb, warps_only, {"num_warps": 4})[0] == 300
    # an attention problem with no batch or heads named: the query tiles alone
    pb = Problem("fa_user", "attention", {"seq": 2048, "head_dim": 64}, hardware=H100)
    assert grid_tiles(pb, attention_space(), ATTN)[0] == 2048 // 128


def test_with_the_switch_off_the_grid_counts_tiled_dims_only(monkeypatch):
    """`diagnose.GRID_UNTILED` off (the default): the grid before session 15."""
    pb, sp = attention(2, 16, 4096), attention_space()
    moe = Problem("moe_test", "matmul", {"M": 16, "N": 1280, "K": 3584, "E": 64}, {"a": "bf16"}, hardware=H100)
    mm = {**DEFAULT_MM, "BLOCK_M": 64, "BLOCK_N": 64}
    rows_pb, rows_sp = column_blocks(4096, 1024, "cols")
    on = [grid_tiles(pb, sp, ATTN)[0], grid_tiles(moe, matmul_space(), mm)[0],
          grid_tiles(rows_pb, rows_sp, {"BLOCK_COLS": 512, "num_warps": 4, "num_stages": 1})[0]]
    assert on == [1024, 320, 8192]
    monkeypatch.setattr(diagnose_module, "GRID_UNTILED", False)
    assert grid_tiles(pb, sp, ATTN)[0] == 32 * 64  # both sequence tiles counted as grid tiles
    assert diagnose(measured(ATTN), pb, sp).k_trips is None
    assert grid_tiles(moe, matmul_space(), mm)[0] == 1 * 20
    assert grid_tiles(rows_pb, rows_sp, {"BLOCK_COLS": 512, "num_warps": 4, "num_stages": 1})[0] == 2
    # a row kernel whose only tile walks the row: one program per row, either way
    row_only = Space([Pow2("BLOCK_N", 128, 4096, default=1024), Choice("num_warps", [4, 8], default=4)])
    pb = Problem("rows_user", "row_reduction", {"rows": 300, "cols": 4096}, hardware=H100)
    assert grid_tiles(pb, row_only, {"BLOCK_N": 1024, "num_warps": 4})[0] == 300
    monkeypatch.setattr(diagnose_module, "GRID_UNTILED", True)
    assert grid_tiles(pb, row_only, {"BLOCK_N": 1024, "num_warps": 4})[0] == 300
    # a batched matmul counts its batch either way (session 21: a held-out bmm was read as one product)
    bmm = Problem("bmm_test", "matmul", {"batch": 6, "M": 512, "N": 512, "K": 512}, {"a": "fp16"}, hardware=H100)
    monkeypatch.setattr(diagnose_module, "GRID_UNTILED", False)
    assert grid_tiles(bmm, matmul_space(), DEFAULT_MM)[0] == 6 * 4 * 4
    assert diagnose(measured(DEFAULT_MM), bmm, matmul_space()).tiles == 6 * 4 * 4
