"""The tiles a kernel's reduction loop loads per step (`theory.store.scope.staged_tiles` /
`kernel_loads`), read from its source, carried by a dataset header (`meta.source_facts.loads`)
and held in the process's registry (`kernel_facts.loads`), for the resource model."""
from __future__ import annotations

import logging

from abductune import kernel_facts
from abductune.datasets import format as fmt
from abductune.theory.store.scope import kernel_loads, staged_tiles

MATMUL = '''
def mm(a_ptr, b_ptr, c_ptr, M, N, K, sa, sb, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.cdiv(N, BLOCK_N)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * sa + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * sb + offs_n[None, :]
    scale = tl.load(c_ptr + offs_n)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        s = tl.load(c_ptr + offs_n)  # a 1-D load: not a staged tile
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * sb
'''

GATE_UP = '''
def up(x_ptr, w_ptr, idx_ptr, H, I, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.arange(0, BLOCK_M)
    tok = tl.load(idx_ptr + rows)
    n_idx = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    k_offs = tl.arange(0, BLOCK_K)
    for k in tl.range(0, H, BLOCK_K):
        k_idx = k + k_offs
        x = tl.load(x_ptr + tok[:, None] * H + k_idx[None, :])
        g_ptrs = w_ptr + n_idx[:, None] * H + k_idx[None, :]
        g = tl.load(g_ptrs)
        u = tl.load(g_ptrs + I * H)
'''

BLOCK_PTRS = '''
def chunk(k, v, h, T, K, V, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr):
    b_h = tl.zeros([BK, BV], dtype=tl.float32)
    for i_t in range(tl.cdiv(T, BT)):
        p_k = tl.make_block_ptr(k, (K, T), (1, K), (0, i_t * BT), (BK, BT), (0, 1))
        p_v = tl.make_block_ptr(v, (T, V), (V, 1), (i_t * BT, 0), block_shape=(BT, BV), order=(1, 0))
        b_k = tl.load(p_k)
        b_v = tl.load(tl.advance(p_v, (0, 0)))
        d = tl.make_tensor_descriptor(h, [K, V], [V, 1], [BK, BV])
        b_d = d.load([0, 0])
'''


def test_a_matmul_stages_its_a_and_b_tiles_only():
    assert staged_tiles(MATMUL, ["BLOCK_M", "BLOCK_N", "BLOCK_K"]) == [("BLOCK_K", "BLOCK_M"), ("BLOCK_K", "BLOCK_N")]
    assert kernel_loads(MATMUL) == [("BLOCK_K", "BLOCK_M"), ("BLOCK_K", "BLOCK_N")]  # tiles from the names


def test_a_fused_gate_and_up_projection_stages_two_weight_tiles():
    # the gathered token rows come from a load of an arange over BLOCK_M: the x tile is M x K
    assert kernel_loads(GATE_UP) == [("BLOCK_K", "BLOCK_M"), ("BLOCK_K", "BLOCK_N"), ("BLOCK_K", "BLOCK_N")]


def test_block_pointers_and_descriptors_give_their_block_shapes():
    tiles = ["BT", "BK", "BV"]
    # by position and by keyword; a desc.load reads the descriptor's shape; tl.advance keeps it
    assert staged_tiles(BLOCK_PTRS, tiles) == [("BK", "BT"), ("BT", "BV"), ("BK", "BV")]


def test_no_reduction_loop_or_no_source_says_nothing():
    src = "def f(x_ptr, BLOCK_M: tl.constexpr):\n    x = tl.load(x_ptr + tl.arange(0, BLOCK_M))\n"
    assert staged_tiles(src, ["BLOCK_M"]) is None
    assert kernel_loads("def broken(:") is None
    assert staged_tiles(MATMUL, []) is None


def test_a_header_carries_the_loads_and_the_registry_holds_them(caplog):
    meta = {fmt.SOURCE_FACTS: fmt.make_source_facts({"BLOCK_K": "loop"}, [("BLOCK_K", "BLOCK_M"), ("BLOCK_K", "BLOCK_N")])}
    assert meta[fmt.SOURCE_FACTS]["loads"] == [["BLOCK_K", "BLOCK_M"], ["BLOCK_K", "BLOCK_N"]]
    assert fmt.source_loads(meta) == [["BLOCK_K", "BLOCK_M"], ["BLOCK_K", "BLOCK_N"]]
    assert "loads" not in fmt.make_source_facts({"BLOCK_K": "loop"})  # unknown: not written
    assert fmt.source_loads({fmt.SOURCE_FACTS: fmt.make_source_facts({"BLOCK_K": "loop"})}) is None
    with caplog.at_level(logging.WARNING):
        assert fmt.source_loads({fmt.SOURCE_FACTS: {"version": 1, "reduction": {}, "loads": "AB"}}) is None
    assert "loads must be a list" in caplog.text
    try:
        kernel_facts.note_read_loads("k_test", [["BLOCK_K", "BLOCK_M"], ["BLOCK_N"]])
        assert kernel_facts.loads("k_test") == [("BLOCK_K", "BLOCK_M")]  # 1-D entries dropped
        kernel_facts.tell_loads("k_test", [("A", "B")])  # the kernel's own source wins
        assert kernel_facts.loads("k_test") == [("A", "B")]
        kernel_facts.tell_loads("k_test", None)  # a source that says nothing changes nothing
        assert kernel_facts.loads("k_test") == [("A", "B")]
    finally:
        kernel_facts.forget("k_test")
    assert kernel_facts.loads("k_test") is None


def test_the_zoo_moe_up_header_says_it_stages_two_weight_tiles():
    from abductune.datasets.public import load_any
    from abductune.datasets.zoo import zoo_kernels

    ds = load_any(zoo_kernels()["liger_moe_up_swiglu_bf16"][0])
    assert fmt.source_loads(ds.meta) == [["BLOCK_K", "BLOCK_M"], ["BLOCK_K", "BLOCK_N"], ["BLOCK_K", "BLOCK_N"]]
    assert kernel_facts.loads(ds.problem.kernel) == [("BLOCK_K", "BLOCK_M"), ("BLOCK_K", "BLOCK_N"),
                                                      ("BLOCK_K", "BLOCK_N")]
