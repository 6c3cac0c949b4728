"""Which dim a row kernel's letter-named tile covers, from the kernel's loops (classify.loop_tiles).

By convention a row kernel's BLOCK_M counts rows and BLOCK_N walks the row. A GEMV written the
other way round (each program BLOCK_N rows, a loop over the row in BLOCK_M columns) was read
backwards: every rule sized the wrong tile (FlagGems' addmv, zero-shot 3.6x the optimum).
"""
from __future__ import annotations

import pytest

from abductune import kernel_facts
from abductune.classify import classify, loop_tiles, tile_dim_name
from abductune.datasets.format import read_dataset
from abductune.datasets.paths import expand_dataset_args
from abductune.problem import Problem
from abductune.space import IntRange, Pow2, Space
from abductune.theory.store import scope

GEMV = Space([Pow2("BLOCK_M", 16, 256, role="tile:M"), Pow2("BLOCK_N", 1, 16, role="tile:N"),
              Pow2("num_warps", 2, 16, role="warps"), IntRange("num_stages", 2, 5, role="stages")], name="gemv")


def _problem(kernel: str = "gemv_probe_bf16") -> Problem:
    return Problem(kernel, "row_reduction", {"rows": 14336, "cols": 4096}, {"A": "bf16", "x": "bf16"})


@pytest.fixture
def forget():
    yield
    kernel_facts.forget("gemv_probe_bf16")


def test_without_facts_the_convention_holds(forget):
    cls = classify(_problem(), GEMV)
    assert cls.tile_axes == {}
    assert tile_dim_name("tile:M", cls) == "rows" and tile_dim_name("tile:N", cls) == "cols"


def test_the_tile_the_loop_steps_by_covers_the_columns(forget):
    kernel_facts.tell("gemv_probe_bf16", {"BLOCK_M": "loop", "BLOCK_N": "whole"})
    cls = classify(_problem(), GEMV)
    assert cls.tile_axes == {"M": "cols", "N": "rows"}
    assert tile_dim_name("tile:M", cls) == "cols" and tile_dim_name("tile:N", cls) == "rows"
    # the scope checks follow: the reduction tile is BLOCK_M, and this kernel loops over it
    assert scope.reduction_tile(_problem(), GEMV)[1] == "BLOCK_M"
    assert scope.structure(_problem(), GEMV) == scope.LOOP


@pytest.mark.parametrize("facts", [
    {"BLOCK_M": "whole", "BLOCK_N": "loop"},  # the convention, confirmed: nothing to override
    {"BLOCK_M": "loop", "BLOCK_N": "loop"},  # both loop: no plain answer
    {"BLOCK_M": "loop"},  # one tile unknown
    {},
])
def test_only_a_plain_answer_against_the_convention_moves_a_tile(facts):
    got = loop_tiles("row_reduction", {"rows": 8, "cols": 8}, GEMV, facts)
    assert got in ({}, {"N": "cols", "M": "rows"})
    if facts != {"BLOCK_M": "whole", "BLOCK_N": "loop"}:
        assert got == {}


def test_tiles_named_for_their_dims_and_other_classes_are_left_alone():
    named = Space([Pow2("BLOCK_ROWS", 1, 8, role="tile:rows"), Pow2("BLOCK_COLS", 64, 1024, role="tile:cols")])
    assert loop_tiles("row_reduction", {"rows": 8, "cols": 8}, named, {"BLOCK_ROWS": "loop", "BLOCK_COLS": "whole"}) == {}
    assert loop_tiles("matmul", {"M": 8, "N": 8, "K": 8}, GEMV, {"BLOCK_M": "loop", "BLOCK_N": "whole"}) == {}


def test_a_header_read_tells_the_classifier_and_a_source_wins(forget, tmp_path):
    kernel_facts.note_read("gemv_probe_bf16", {"BLOCK_M": "whole", "BLOCK_N": "loop"})
    assert classify(_problem(), GEMV).tile_axes == {"M": "rows", "N": "cols"}  # the convention, told
    kernel_facts.tell("gemv_probe_bf16", {"BLOCK_M": "loop", "BLOCK_N": "whole"})  # read from its source
    assert classify(_problem(), GEMV).tile_axes == {"M": "cols", "N": "rows"}
    assert kernel_facts.read_from_header("gemv_probe_bf16") == {"BLOCK_M": "whole", "BLOCK_N": "loop"}


def test_the_recorded_gemv_is_read_the_right_way_round():
    """FlagGems' addmv in the zoo: its header's facts say BLOCK_M loops, so BLOCK_M covers the
    row's columns."""
    paths = expand_dataset_args(["zoo:flaggems_addmv_bf16"])
    ds = read_dataset(paths[0])
    cls = classify(ds.problem, ds.space())
    assert tile_dim_name("tile:M", cls) == "cols" and tile_dim_name("tile:N", cls) == "rows"
    assert scope.reduction_tile(ds.problem, ds.space())[1] == "BLOCK_M"


def test_the_decorator_tells_the_classifier_its_kernels_loops():
    """Live, the decorator reads the jit function: a GEMV written with BLOCK_M along the row
    is classified the right way round without any dataset."""
    triton = pytest.importorskip("triton")
    import triton.language as tl

    import abductune

    @triton.jit
    def gemv_loop_probe_kernel(a_ptr, x_ptr, out_ptr, rows, cols, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr):
        r = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_N, BLOCK_M), tl.float32)
        for c0 in range(0, cols, BLOCK_M):
            c = c0 + tl.arange(0, BLOCK_M)
            acc += tl.load(a_ptr + r[:, None] * cols + c[None, :]) * tl.load(x_ptr + c)[None, :]
        tl.store(out_ptr + r, tl.sum(acc, 1))

    tuned = abductune.autotune(configs=[triton.Config({"BLOCK_M": 64, "BLOCK_N": 4})],
                               key=["rows", "cols"])(gemv_loop_probe_kernel)
    try:
        assert kernel_facts.told(tuned.name) == {"BLOCK_M": "loop", "BLOCK_N": "whole"}
        p = Problem(tuned.name, "row_reduction", {"rows": 4096, "cols": 4096}, {"a": "bf16"})
        cls = classify(p, tuned.space)
        assert tile_dim_name(tuned.space["BLOCK_M"].role, cls) == "cols"
    finally:
        kernel_facts.forget(tuned.name)
        scope._SOURCES.pop(tuned.name, None)


def test_a_source_that_tells_nothing_leaves_the_headers_facts(forget):
    kernel_facts.note_read("gemv_probe_bf16", {"BLOCK_M": "loop", "BLOCK_N": "whole"})
    kernel_facts.tell("gemv_probe_bf16", {})
    assert kernel_facts.told("gemv_probe_bf16") == {"BLOCK_M": "loop", "BLOCK_N": "whole"}


def test_a_tile_named_for_an_axis_covers_the_outputs_extent_along_it():
    """BLOCK_H over a problem that names in_h and out_h tiles the output (what a program
    writes); a dim named for the axis itself still wins, and an axis with neither is unread."""
    sp = Space([Pow2("BLOCK_H", 4, 64, role="tile:H"), Pow2("BLOCK_W", 4, 64, role="tile:W"),
                Pow2("num_warps", 1, 8, role="warps")])
    pool = Problem("pool_probe", "pool", {"batch": 8, "in_h": 56, "in_w": 56, "out_h": 28, "out_w": 28},
                   {"x": "bf16"})
    cls = classify(pool, sp)
    assert tile_dim_name("tile:H", cls) == "out_h" and tile_dim_name("tile:W", cls) == "out_w"
    plain = Problem("pool_probe", "pool", {"H": 30, "out_h": 28, "W": 30, "out_w": 28}, {"x": "bf16"})
    assert tile_dim_name("tile:H", classify(plain, sp)) == "H"
    bare = Problem("pool_probe", "pool", {"in_h": 56, "in_w": 56}, {"x": "bf16"})
    assert tile_dim_name("tile:H", classify(bare, sp)) is None
