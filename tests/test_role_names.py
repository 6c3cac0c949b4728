"""Tiles named for the dims they cover: a row kernel written with BLOCK_ROWS and BLOCK_COLS (or a
rope kernel with TOKENS_PER_PROGRAM) gets the same reasoning as one written with Inductor's
XBLOCK/RBLOCK names: its tiles map to their dims, the row tile is the reduction, theories fire
on it, and rules learned on tile:R and tile:X size it."""
from __future__ import annotations

import numpy as np

from abductune.classify import classify, tile_dim_name
from abductune.space import Choice, Pow2, Space, infer_role
from abductune.theory import diagnose, hypotheses
from abductune.theory.diagnose import tiled_dims
from abductune.theory.store.instantiate import instantiate
from abductune.theory.store.rules import Form
from theory_fixtures import measured, row_space, rows


def named_row_space() -> Space:
    """The layout of the zoo RMSNorm: no roles given, names only."""
    return Space([Pow2("BLOCK_ROWS", 1, 32, default=4), Pow2("BLOCK_COLS", 256, 16384, default=1024),
                  Pow2("num_warps", 1, 16, default=4), Choice("num_stages", [1, 2], default=1)],
                 constraints=["BLOCK_ROWS * BLOCK_COLS >= 32 * num_warps",
                              "BLOCK_ROWS * BLOCK_COLS <= 32 * 32 * num_warps"], name="named_rows")


def test_per_program_counts_are_tiles_of_their_dim():
    assert infer_role("ROWS_PER_PROGRAM") == "tile:ROWS"
    assert infer_role("TOKENS_PER_BLOCK") == "tile:TOKENS"
    assert infer_role("num_rows") is None  # a count that is not per program says nothing


def test_a_tile_named_for_a_dim_covers_it_in_any_class():
    pb, sp = rows(64, 8192), named_row_space()
    cls = classify(pb, sp)
    assert tile_dim_name("tile:COLS", cls) == "cols"
    assert tile_dim_name("tile:ROW", cls) == "rows"  # singular names its plural dim
    assert tile_dim_name("tile:R", cls) == "cols" and tile_dim_name("tile:X", cls) == "rows"  # aliases kept
    td = tiled_dims(pb, sp)
    assert td["tile:COLS"] == ("BLOCK_COLS", 8192, True)   # the row is the reduction
    assert td["tile:ROWS"] == ("BLOCK_ROWS", 64, False)


def test_the_one_row_theory_fires_on_named_tiles():
    pb, sp = rows(64, 8192), named_row_space()
    cfg = {"BLOCK_ROWS": 4, "BLOCK_COLS": 1024, "num_warps": 4, "num_stages": 1}
    hs = hypotheses(diagnose(measured(cfg, frac_bw=0.1), pb, sp), pb, sp, cfg)
    assert any(h.to_config["BLOCK_COLS"] >= 8192 for h in hs), [h.to_config for h in hs]
    assert any(h.to_config["BLOCK_ROWS"] < 4 for h in hs)  # 16 programs on 132 SMs: fewer rows per program


def test_a_rule_on_canonical_roles_sizes_named_tiles():
    pb = rows(64, 8192)
    forms = {"tile:R": Form("fit"), "tile:X": Form("const", 1), "warps": Form("const", 16)}
    named = instantiate(forms, pb, named_row_space())
    assert named["BLOCK_COLS"] == 8192 and named["BLOCK_ROWS"] == 1 and named["num_warps"] == 16
    # the space the rule was learned on answers as before
    canon = instantiate(forms, pb, row_space())
    assert canon["BLOCK"] == 8192 and canon["ROWS_PER_PROGRAM"] == 1


def test_two_tiles_over_one_dim_take_no_alias():
    pb = rows(64, 8192)
    sp = Space([Pow2("BLOCK_COLS", 256, 16384, default=1024), Pow2("TILE_COL", 256, 16384, default=512),
                Pow2("num_warps", 1, 16, default=4)], name="two_col_tiles")
    got = instantiate({"tile:R": Form("fit")}, pb, sp)
    assert (got["BLOCK_COLS"], got["TILE_COL"]) == (1024, 512)  # which would the rule mean? neither moves


def test_b_and_one_capital_is_a_tile_of_that_dim():
    """flash-linear-attention's BK and BV (and BT, BC): a block of the dim the letter names, so a
    value-dim tile is read as one, not left without a role."""
    assert infer_role("BV") == "tile:V" and infer_role("BT") == "tile:T" and infer_role("BK") == "tile:K"
    assert infer_role("bs") is None and infer_role("Bv") is None and infer_role("B") is None
    from abductune.problem import Problem

    pb = Problem("chunk_h", "other", {"batch": 2, "tokens": 4096, "heads": 16, "K": 128, "V": 256},
                 {"q": "bf16"})
    sp = Space([Pow2("BK", 16, 128), Pow2("BV", 32, 64), Pow2("num_warps", 1, 16)])
    assert tile_dim_name(sp["BV"].role, classify(pb, sp)) == "V"
    assert tiled_dims(pb, sp)["tile:V"][:2] == ("BV", 256)


def test_a_tile_named_dim_first_or_dim_between_block_and_size_is_a_tile_of_that_dim():
    """FlagGems' names: `M_BLOCK_SIZE` and `N_BLOCK_SIZE` (triu), `BLOCK_ROW_SIZE` and
    `BLOCK_COL_SIZE`, `BATCH_BLOCK_SIZE`: a block of the dim they name, so growth and the
    resource model see them (the recorded triu had them without a role, fixed at one value
    each); a count of blocks (`NUM_BLOCK`) and Inductor's `X_BLOCK` keep their readings."""
    assert infer_role("M_BLOCK_SIZE") == "tile:M" and infer_role("N_BLOCK_SIZE") == "tile:N"
    assert infer_role("BLOCK_ROW_SIZE") == "tile:ROW" and infer_role("BLOCK_COL_SIZE") == "tile:COL"
    assert infer_role("BATCH_BLOCK_SIZE") == "tile:BATCH" and infer_role("ROW_TILE") == "tile:ROW"
    assert infer_role("NUM_BLOCK") is None and infer_role("X_BLOCK") == "tile:X" and infer_role("R0_BLOCK") == "tile:R"
    from abductune.autotune.configs import grow_space

    listed = Space([Choice("M_BLOCK_SIZE", [1]), Choice("N_BLOCK_SIZE", [2048]), Choice("num_warps", [4, 8])])
    grown = grow_space(listed)  # what budget= / beyond= search: one step beyond the list, tiles x2 and /2
    assert 2 in grown["M_BLOCK_SIZE"].values and {1024, 2048, 4096} <= set(grown["N_BLOCK_SIZE"].values)


def test_names_from_public_kernels_that_are_no_grouping_or_no_tile_get_no_such_role():
    """A census of the tuning names in public Triton kernels (session 28): aiter's and vLLM's
    block-scaled GEMMs name the scales' block shape GROUP_K and GROUP_N, fixed by how the weights
    were quantised, so growth must not move them as it moves the L2 grouping (GROUP_M,
    GROUP_SIZE_M, kernl's GROUP_M_SIZE); FlagGems' TILE_MODE of 0, 1 or 2 selects a code path,
    and a tile is a size."""
    from abductune.autotune.configs import grow_space

    for name in ("GROUP_M", "GROUP_SIZE_M", "GROUP_M_SIZE", "GROUP_SIZE", "group"):
        assert infer_role(name) == "group", name
    for name in ("GROUP_K", "GROUP_N", "group_k", "group_n"):
        assert infer_role(name) is None, name
    listed = Space([Choice("GROUP_K", [128]), Choice("GROUP_SIZE_M", [8]), Choice("num_warps", [4, 8])])
    grown = grow_space(listed)
    assert grown["GROUP_K"].values == (128,) and {4, 8, 16} <= set(grown["GROUP_SIZE_M"].values)
    mode = Space([Choice("TILE_MODE", [0, 1, 2]), Choice("BLOCK_M", [16, 32])])
    assert mode["TILE_MODE"].role is None and mode["BLOCK_M"].role == "tile:M"
    assert grow_space(mode)["TILE_MODE"].values == (0, 1, 2)
    assert infer_role("TILE_MODE") == "tile:MODE"  # by its name alone, as before
    assert Choice("BLOCK_M", list(np.array([16, 32]))).role == "tile:M"  # numpy's ints are sizes too


def test_counts_of_splits_are_splits():
    """aiter's NUM_KSPLIT (split-K), vLLM decode attention's NUM_KV_SPLITS, Inductor's
    cooperative-reduction RSPLIT: a count of programs along a dim, like SPLIT_K."""
    assert infer_role("NUM_KSPLIT") == "split:K" and infer_role("NUM_SPLITS") == "split:K"
    assert infer_role("NUM_KV_SPLITS") == "split:KV" and infer_role("RSPLIT") == "split:R"
    assert infer_role("SPLIT_K") == "split:K" and infer_role("NUM_BLOCK") is None
