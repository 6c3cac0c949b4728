"""The resource model (theory/resources.py): hand-made configs that overflow shared memory or
registers, role-based reading of any kernel's names, and predictions feasible by construction."""
from __future__ import annotations

import math

from abductune.hardware import KNOWN_GPUS
from abductune.problem import Problem
from abductune.space import Choice, Pow2, Space
from abductune.theory import resources

H100 = KNOWN_GPUS["H100-SXM"]


def _space(names=("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")):
    m, n, k = names
    return Space([Pow2(m, 16, 256), Pow2(n, 16, 256), Pow2(k, 16, 256),
                  Choice("num_warps", [2, 4, 8, 16, 32, 64]), Choice("num_stages", [1, 2, 3, 4, 5])])


def _problem(dtypes=None, dims=None):
    return Problem("mm", "matmul", dims or {"M": 4096, "N": 4096, "K": 4096},
                   dtypes or {"a": "fp16", "b": "fp16", "c": "fp16"}, hardware=H100)


def cfg(m, n, k, w, s, names=("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")):
    return {names[0]: m, names[1]: n, names[2]: k, "num_warps": w, "num_stages": s}


def test_shared_memory_overflow_is_infeasible_whatever_the_names():
    sp, p = _space(), _problem()
    # 4 stages x (128x128 + 128x256) x 2 bytes = 384 KB: over the H100's 227 KB per block
    assert "shared memory" in resources.infeasible(p, sp, cfg(128, 256, 128, 8, 4))
    assert resources.infeasible(p, sp, cfg(128, 256, 64, 8, 3)) is None  # 144 KB fits
    other = ("BM", "BN", "BK")
    sp2 = _space(other)
    assert "shared memory" in resources.infeasible(p, sp2, cfg(128, 256, 128, 8, 4, other))


def test_a_kernel_that_fixes_its_m_tile_is_still_held_to_its_b_tile():
    """Liger's fused MoE tunes BLOCK_N, BLOCK_K, warps and stages; its M tile is in its code.
    The B tile's pipeline alone (plus the smallest M a dot takes) is a lower bound: what it
    calls infeasible cannot launch, and it claims nothing about the accumulator."""
    sp = Space([Pow2("BLOCK_N", 16, 256), Pow2("BLOCK_K", 16, 256), Choice("num_warps", [2, 4, 8]),
                Choice("num_stages", [1, 2, 3, 4, 5, 6])])
    p = Problem("moe", "matmul", {"M": 32768, "N": 2048, "K": 1024, "E": 64},
                {"x": "bf16", "w": "bf16", "y": "bf16"}, hardware=H100)
    big = {"BLOCK_N": 256, "BLOCK_K": 128, "num_warps": 8, "num_stages": 4}
    # 4 x (16 x 128 + 128 x 256) x 2 bytes = 272 KB: over 227 KB whatever the real M tile is
    assert "shared memory" in resources.infeasible(p, sp, big)
    fp = resources.footprint(p, sp, {**big, "num_stages": 2})
    assert fp.smem_bytes == 2 * (16 * 128 * 2 + 128 * 256 * 2) and fp.acc_per_thread is None
    assert resources.infeasible(p, sp, {"BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 5}) is None


def test_element_size_comes_from_the_dtypes():
    sp = _space()
    c = cfg(128, 256, 128, 8, 3)  # 3 x 48K elements: 288 KB in fp16, 144 KB in fp8
    assert resources.infeasible(_problem(), sp, c) is not None
    assert resources.infeasible(_problem({"a": "fp8", "b": "fp8", "c": "bf16"}), sp, c) is None
    # an int4 weight packs two per byte: the B tile costs half
    fp = resources.footprint(_problem({"a": "fp16", "b": "int4", "c": "fp16"}), sp, c)
    assert fp.smem_bytes == 3 * (128 * 128 * 2 + 128 * 256 * 0.5)


def test_register_overflow_spills_and_too_many_threads_cannot_launch():
    sp, p = _space(), _problem()
    assert "accumulator" in resources.spills(p, sp, cfg(256, 256, 32, 4, 2))  # 512 per thread
    assert resources.spills(p, sp, cfg(128, 256, 64, 8, 3)) is None  # 128: Hopper's usual best
    assert "threads" in resources.infeasible(p, sp, cfg(64, 64, 32, 64, 2))  # 2048 threads


def test_fit_moves_the_least_way_and_says_what_changed():
    sp, p = _space(), _problem()
    fixed, changes = resources.fit(p, sp, cfg(128, 256, 128, 8, 4))
    assert fixed is not None and resources.trouble(p, sp, fixed) is None
    assert changes and changes[0].startswith("num_stages")  # stages go first
    assert fixed["BLOCK_SIZE_M"] == 128 and fixed["BLOCK_SIZE_N"] == 256  # the output tile stays
    fixed2, ch2 = resources.fit(p, sp, cfg(256, 256, 32, 4, 2))  # too many accumulators: more warps
    assert fixed2 is not None and fixed2["num_warps"] > 4 and any("num_warps" in c for c in ch2)
    ok = cfg(64, 64, 32, 4, 3)
    assert resources.fit(p, sp, ok) == (ok, [])


def test_row_kernels_get_no_claim():
    sp = Space([Pow2("BLOCK", 128, 16384), Pow2("num_warps", 1, 16)])
    p = Problem("sm", "row_reduction", {"rows": 4096, "cols": 32000}, {"x": "fp16"}, hardware=H100)
    assert resources.footprint(p, sp, {"BLOCK": 16384, "num_warps": 1}).smem_bytes is None
    assert resources.infeasible(p, sp, {"BLOCK": 16384, "num_warps": 1}) is None


def test_no_theory_prediction_is_infeasible_on_a_space_without_the_bound():
    """A tutorial-style space that states no shared-memory constraint: every rule's served
    config fits, and a repaired one says what the model changed."""
    from abductune.theory.store import packaged_book

    sp = Space([Pow2("BLOCK_SIZE_M", 16, 256), Pow2("BLOCK_SIZE_N", 32, 256), Pow2("BLOCK_SIZE_K", 32, 256),
                Choice("GROUP_SIZE_M", [1, 8]), Choice("num_warps", [2, 4, 8]), Choice("num_stages", [2, 3, 4, 5, 6])])
    book = packaged_book()
    seen = 0
    for dims in ({"M": 8192, "N": 8192, "K": 8192}, {"M": 16, "N": 4096, "K": 4096}, {"M": 1000, "N": 3000, "K": 2000}):
        p = Problem("mm", "matmul", dims, {"a": "bf16", "b": "bf16", "c": "bf16"}, hardware=H100)
        for pred in book.predictions(p, sp):
            seen += 1
            assert resources.infeasible(p, sp, pred.config) is None, pred.config
            if any(r.startswith("resource model") for r in pred.repairs):
                assert "repaired:" in pred.describe()
    assert seen


def test_no_seed_is_infeasible_and_a_fitted_seed_says_so():
    from abductune.heuristics import seed_configs
    from abductune.heuristics.base import AutotunerHeuristic, HeuristicRegistry

    class Greedy(AutotunerHeuristic):  # proposes the biggest tiles and the deepest pipeline
        name = "greedy"

        def get_seed_config(self, problem, hardware, space):
            return {"BLOCK_SIZE_M": 256, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 256, "num_warps": 8, "num_stages": 6}

    reg = HeuristicRegistry()
    reg.register(Greedy())
    sp = Space([Pow2("BLOCK_SIZE_M", 16, 256), Pow2("BLOCK_SIZE_N", 32, 256), Pow2("BLOCK_SIZE_K", 32, 256),
                Choice("GROUP_SIZE_M", [1, 8]), Choice("num_warps", [2, 4, 8]), Choice("num_stages", [2, 3, 4, 5, 6])])
    for dims in ({"M": 8192, "N": 8192, "K": 8192}, {"M": 16, "N": 4096, "K": 4096}):
        p = Problem("mm", "matmul", dims, {"a": "bf16", "b": "bf16", "c": "bf16"}, hardware=H100)
        for registry in (None, reg):
            rep = seed_configs(p, sp, registry=registry)
            for c in rep.configs:
                assert resources.infeasible(p, sp, c) is None, c
        greedy = next(f for f in rep.fired if f["name"] == "greedy")
        assert greedy["status"] == "seed" and "resource model" in greedy["reason"]


def test_abduction_never_measures_a_config_the_model_says_cannot_launch():
    """A space with no shared-memory constraint whose times improve with bigger tiles and
    deeper pipelines until shared memory runs out (as big matmuls do on Hopper): abduction
    on an H100 problem pushes to the limit but proposes nothing over it, and logs what it
    pruned. (Without the guard it spends 4-6 of 48 evaluations on failing configs.)"""
    from strategy_fixtures import FakeEvaluator

    from abductune.search import Budget, make_strategy, run

    def fn(c):
        if c["num_stages"] * (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] * 2 > H100.smem_per_block:
            return None
        return 10.0 / math.log2(c["BLOCK_M"] * c["BLOCK_N"]) / (1 + 0.1 * c["num_stages"]) \
            / (1 + 0.05 * math.log2(c["BLOCK_K"])) * (1 + 0.05 * abs(math.log2(c["num_warps"]) - 2))

    sp = Space([Pow2("BLOCK_M", 16, 256), Pow2("BLOCK_N", 16, 256), Pow2("BLOCK_K", 16, 256),
                Choice("num_warps", [2, 4, 8]), Choice("num_stages", [1, 2, 3, 4, 5])])
    ev = FakeEvaluator(sp, fn)
    ev.problem = Problem("fake_matmul", "matmul", {"M": 4096, "N": 4096, "K": 4096},
                         {"a": "fp16", "b": "fp16", "c": "fp16"}, hardware=H100)
    res = run(make_strategy("abduction", seed=0), ev, Budget(48))
    assert len(ev.calls) == 48
    assert all(resources.infeasible(ev.problem, sp, c) is None for c in ev.calls)
    assert any(e["event"] == "prune" and "shared memory" in e["reason"] for e in res.events)


# ------------------------------------------------------------------ attention (FlashAttention-2 layout)

def _attn(head_dim=128, hw=H100, dtypes=None):
    p = Problem("fa", "attention", {"batch": 2, "heads": 16, "seq": 4096, "head_dim": head_dim},
                dtypes or {"q": "bf16", "k": "bf16", "v": "bf16", "o": "bf16"}, hardware=hw)
    sp = Space([Pow2("BLOCK_M", 16, 256), Pow2("BLOCK_N", 16, 256), Choice("num_warps", [2, 4, 8, 16]),
                Choice("num_stages", [1, 2, 3, 4])])
    return p, sp


def acfg(m, n, w, s):
    return {"BLOCK_M": m, "BLOCK_N": n, "num_warps": w, "num_stages": s}


def test_attention_shared_memory_is_the_query_tile_and_a_key_and_value_tile_per_stage():
    p, sp = _attn()
    fp = resources.footprint(p, sp, acfg(128, 64, 8, 3))
    assert fp.smem_bytes == 128 * 128 * 2 + 3 * 64 * 128 * (2 + 2)  # 128 KB
    # 256 x 128 keys at 2 stages: 64 KB + 2 x 64 KB = 192 KB fits; 3 stages (256 KB) does not
    assert resources.infeasible(p, sp, acfg(256, 128, 8, 2)) is None
    assert "shared memory" in resources.infeasible(p, sp, acfg(256, 128, 8, 3))
    # fp8 operands halve it
    p8, _ = _attn(dtypes={"q": "fp8", "k": "fp8", "v": "fp8", "o": "bf16"})
    assert resources.infeasible(p8, sp, acfg(256, 128, 8, 3)) is None
    # a smaller head dim, as the problem says it, holds less
    p64, _ = _attn(head_dim=64)
    assert resources.footprint(p64, sp, acfg(128, 64, 8, 3)).smem_bytes == 128 * 64 * 2 + 3 * 64 * 64 * 4


def test_attention_registers_a_warpgroup_mma_cannot_hold_do_not_compile():
    p, sp = _attn()
    # 16 warps: 512 threads share 64 K registers, 128 each; the 256 x 256 score tile alone is 128
    # fp32 values per thread, so ptxas cannot place one wgmma (the zoo's one failing config)
    why = resources.infeasible(p, sp, acfg(256, 256, 16, 1))
    assert why is not None and "ptxas" in why and "128" in why
    # 256 x 128 at 16 warps: S is 64 per thread and O + P 96: it compiles (and spills)
    assert resources.infeasible(p, sp, acfg(256, 128, 16, 1)) is None
    assert resources.spills(p, sp, acfg(256, 128, 16, 1)) is not None
    # 2 warps is no warpgroup (mma.sync): the same registers spill rather than fail
    assert resources.infeasible(p, sp, acfg(64, 256, 2, 1)) is None
    assert "spill" in resources.spills(p, sp, acfg(64, 256, 2, 1))
    # no warpgroup MMA off Hopper: an A100 spills what an H100 cannot compile (head dim 64, so
    # the 96 KB of tiles fit the A100's shared memory)
    h100, _ = _attn(head_dim=64)
    a100, _ = _attn(head_dim=64, hw=KNOWN_GPUS["A100-SXM"])
    assert "ptxas" in resources.infeasible(h100, sp, acfg(256, 256, 16, 1))
    assert resources.infeasible(a100, sp, acfg(256, 256, 16, 1)) is None
    assert resources.spills(a100, sp, acfg(256, 256, 16, 1)) is not None


def test_attention_spills_where_the_tiles_alone_fill_the_register_cap():
    p, sp = _attn()
    assert resources.reg_cap(H100, 512) == 128 and resources.reg_cap(H100, 256) == 255
    # 128 x 256 at 16 warps: O 32 + S 64 + P 32 = 128 registers: nothing left, it spills
    assert resources.footprint(p, sp, acfg(128, 256, 16, 1)).live_regs == 128
    assert resources.spills(p, sp, acfg(128, 256, 16, 1)) is not None
    # 256 x 64 at 16 warps: 64 + 32 + 16 = 112 < 128: kept (the zoo's fastest)
    assert resources.trouble(p, sp, acfg(256, 64, 16, 3)) is None
    assert resources.trouble(p, sp, acfg(128, 64, 8, 3)) is None  # FlashAttention's usual
    # fit moves a config that cannot run to one that can
    fixed, changes = resources.fit(p, sp, acfg(256, 256, 16, 1))
    assert fixed is not None and resources.trouble(p, sp, fixed) is None and changes


def test_attention_model_against_every_recorded_zoo_attention_config():
    """Held against the zoo's own recorded attention data, the two kernels it was written
    against (2,190 configs): what it calls infeasible is exactly what failed to compile, and it
    never counts less shared memory than Triton allocated. Held-out library attention kernels
    (FlagGems' `_attn_fwd`, session 23) are not its calibration data: their compile failures
    are their own (a `static_assert`, `tl.dot`'s smallest tile)."""
    from abductune.datasets.format import read_dataset
    from abductune.datasets.paths import expand_dataset_args

    failed = called = 0
    for path in expand_dataset_args(["zoo:zoo_attn_fwd_bf16", "zoo:zoo_attn_causal_fwd_bf16"]):
        ds = read_dataset(path)
        p, sp = ds.problem, ds.space()
        for m in ds.records:
            bad = resources.infeasible(p, sp, m.config) is not None
            assert bad == (not m.ok), (path.name, m.config, m.status)
            failed += not m.ok
            called += bad
            if m.ok and m.smem_bytes:
                assert resources.footprint(p, sp, m.config).smem_bytes >= m.smem_bytes
    assert failed == called == 10


def _moe_up():
    """Liger's fused gate-and-up projection as the zoo states it (its caller's BLOCK_M = 64 a
    one-valued parameter) and the tiles its K loop loads per step, as its source reads."""
    sp = Space([Pow2("BLOCK_N", 32, 256), Pow2("BLOCK_K", 16, 128), Choice("num_warps", [2, 4, 8]),
                Choice("num_stages", [1, 2, 3, 4, 5, 6]), Choice("BLOCK_M", [64])])
    p = Problem("moe_up_test", "matmul", {"M": 32768, "N": 2048, "K": 2048, "E": 64},
                {"x": "bf16", "w": "bf16", "y": "bf16"}, hardware=H100)
    return sp, p, [("BLOCK_K", "BLOCK_M"), ("BLOCK_K", "BLOCK_N"), ("BLOCK_K", "BLOCK_N")]


def test_a_kernel_whose_source_loads_two_weight_tiles_holds_both_per_stage():
    from abductune import kernel_facts

    sp, p, loads = _moe_up()
    c = {"BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 5, "BLOCK_M": 64}
    try:
        # A and B alone: 5 x (64x64 + 64x256) x 2 bytes = 200 KB, which fits 227 KB
        assert resources.infeasible(p, sp, c) is None
        kernel_facts.tell_loads(p.kernel, loads)
        # what ptxas asked for on the H100 (Liger's record): 5 x (64x64 + 2 x 64x256) x 2 = 368,640 bytes
        assert resources.footprint(p, sp, c).smem_bytes == 368640
        assert "shared memory" in resources.infeasible(p, sp, c)
        assert resources.infeasible(p, sp, {**c, "num_stages": 3}) is None  # 221,184 bytes fit
        # a load naming a tile the config does not set: the loads say nothing, A and B decide
        kernel_facts.tell_loads(p.kernel, [*loads, ("BLOCK_K", "BLOCK_Q")])
        assert resources.infeasible(p, sp, c) is None
    finally:
        kernel_facts.forget(p.kernel)


def test_off_the_warpgroup_mma_one_pipeline_copy_fewer():
    """Two warps cannot drive Hopper's warpgroup MMA; Triton then keeps stages - 1 copies (the
    two-warp configs of Liger's MoE that ran past the limit at `stages` copies)."""
    sp, p = _space(), _problem()
    on = cfg(128, 128, 64, 4, 5)  # 5 x (128x64 + 64x128) x 2 = 160 KB
    off = cfg(128, 128, 64, 2, 5)  # 4 copies: 128 KB
    assert resources.footprint(p, sp, on).smem_bytes == 5 * (128 * 64 + 64 * 128) * 2
    assert resources.footprint(p, sp, off).smem_bytes == 4 * (128 * 64 + 64 * 128) * 2
    # 128 x 256 x 64 fp16 at 5 stages: 240 KB at 5 copies (over 227 KB), 192 KB at 4
    big = cfg(128, 256, 64, 4, 5)
    assert "shared memory" in resources.infeasible(p, sp, big)
    assert resources.infeasible(p, sp, {**big, "num_warps": 2}) is None


def test_a_dot_needs_its_reduction_dim_whole_enough_to_compile():
    """Triton's tl.dot on NVIDIA takes K >= 16 for 16-bit inputs, 32 for 8-bit (its backend's
    `min_dot_size`): a product's K tile below it, or attention's key tile (the K of P.V), cannot
    compile, whatever the kernel calls them; M and N may be small."""
    sp = Space([Pow2("BM", 16, 128), Pow2("BN", 16, 128), Pow2("BK", 8, 128),
                Choice("num_warps", [4]), Choice("num_stages", [2])])
    half = _problem()
    assert "does not compile" in resources.infeasible(half, sp, {"BM": 16, "BN": 16, "BK": 8, "num_warps": 4,
                                                                 "num_stages": 2})
    assert resources.infeasible(half, sp, {"BM": 16, "BN": 16, "BK": 16, "num_warps": 4, "num_stages": 2}) is None
    fp8 = _problem({"a": "fp8", "b": "fp8", "c": "bf16"})
    assert resources.infeasible(fp8, sp, {"BM": 64, "BN": 64, "BK": 16, "num_warps": 4, "num_stages": 2})
    assert resources.infeasible(fp8, sp, {"BM": 64, "BN": 64, "BK": 32, "num_warps": 4, "num_stages": 2}) is None
    # a weight-only int4 product dequantises to the activations' type: 16 is enough
    w4 = _problem({"a": "bf16", "b": "int4", "c": "bf16"})
    assert resources.infeasible(w4, sp, {"BM": 64, "BN": 64, "BK": 16, "num_warps": 4, "num_stages": 2}) is None
    attn_sp = Space([Pow2("BLOCK_M", 16, 128), Pow2("BLOCK_N", 8, 128), Choice("num_warps", [4, 8]),
                     Choice("num_stages", [1, 2])])
    attn = Problem("attn", "attention", {"batch": 2, "heads": 16, "seq": 2048, "head_dim": 64},
                   {"q": "bf16", "k": "bf16", "v": "bf16", "o": "bf16"}, hardware=H100)
    assert "key tile" in resources.infeasible(attn, attn_sp, {"BLOCK_M": 64, "BLOCK_N": 8, "num_warps": 4,
                                                              "num_stages": 2})
    assert resources.infeasible(attn, attn_sp, {"BLOCK_M": 64, "BLOCK_N": 16, "num_warps": 4, "num_stages": 2}) is None


def test_the_operands_are_read_by_name_when_the_output_comes_first():
    """vLLM's and CUTLASS's signature `scaled_mm(out, a, b, a_scale, b_scale)`: read by position,
    the bf16 output was taken for A (FlagGems' fp8 per-token matmul, recorded on the H200, had 72
    of its configs refused for shared memory they do not need). By name: A and B are the fp8
    operands, the output and the fp32 scales are neither."""
    from abductune.costs import product_operand_bytes

    out_first = {"c_ptr": "bf16", "a_ptr": "float8_e4m3fn", "b_ptr": "float8_e4m3fn",
                 "a_scale_ptr": "fp32", "b_scale_ptr": "fp32"}
    assert product_operand_bytes(out_first) == (1, 1)
    assert product_operand_bytes({"x": "fp16", "w": "int8", "y": "fp16"}) == (2, 1)  # by position, as before
    assert product_operand_bytes({"out": "fp32"}) == (4, 4)  # nothing but an output: by position
    sp, p = _space(), _problem(dtypes=out_first)
    # 4 stages x (128x128 + 128x256) x 1 byte = 192 KB fits the H100's 227 KB; in 2-byte A it would not
    assert resources.infeasible(p, sp, cfg(128, 256, 128, 8, 4)) is None
    assert resources.footprint(p, sp, cfg(128, 256, 128, 8, 4)).smem_bytes == 4 * (128 * 128 + 128 * 256)


def test_an_accumulator_that_fills_the_register_file_of_its_threads_spills():
    """At 16 warps a thread has 128 registers (64 K shared by 512 threads): a 512 x 128 product
    tile puts 128 fp32 values in each, all of them, and spills (FlagGems' block-scaled fp8 matmul
    on the H200: 1.2 KB spilled, 11x its shape's optimum; every recorded zoo config so placed
    that ran spilled and was 4x or more). At 8 warps the same 128 values leave half the 255 free:
    not flagged (Hopper's 128 x 256 tiles on 8 warps are often the fastest)."""
    sp, p = _space(), _problem()
    sp = Space([Pow2("BLOCK_SIZE_M", 16, 512), Pow2("BLOCK_SIZE_N", 16, 256), Pow2("BLOCK_SIZE_K", 16, 256),
                Choice("num_warps", [4, 8, 16]), Choice("num_stages", [2, 3])])
    why = resources.spills(p, sp, cfg(512, 128, 64, 16, 2))
    assert why is not None and "128 registers a thread of 512" in why
    assert resources.spills(p, sp, cfg(128, 256, 64, 8, 2)) is None
    assert resources.spills(p, sp, cfg(256, 128, 64, 16, 2)) is None  # 64 values: half the file
    assert resources.trouble(p, sp, cfg(512, 128, 64, 16, 2)) is not None


def test_an_accumulator_with_its_operand_tiles_past_the_register_file_spills():
    """A skinny product tile with a long K tile keeps few accumulators but large A and B slices:
    16 x 256 x 128 bf16 on 4 warps is 32 accumulators and (16 x 128 + 128 x 256) x 2 bytes / 4 /
    128 threads = 136 operand registers a thread: 168, kept; on 2 warps 64 + 272 = 336 in bf16,
    past `LIVE_MAX`, and 64 + 136 = 200 in fp8 (a quarter of a register each), kept. `fit`
    shrinks the K tile for it (the operands' share), not the stages, which touch no register."""
    sp = Space([Pow2("BM", 16, 256), Pow2("BN", 16, 512), Pow2("BK", 16, 256),
                Choice("num_warps", [1, 2, 4, 8, 16]), Choice("num_stages", [2, 3, 4])])
    names = ("BM", "BN", "BK")
    bf16 = _problem({"a": "bf16", "b": "bf16", "c": "bf16"})
    fp = resources.footprint(bf16, sp, cfg(16, 256, 128, 4, 2, names))
    assert math.isclose(fp.operand_regs, (16 * 128 + 128 * 256) * 2 / 4 / 128) and fp.acc_per_thread == 32
    assert resources.spills(bf16, sp, cfg(16, 256, 128, 4, 2, names)) is None
    # 16 x 512 x 256 on 2 warps: 128 accumulators (at ACC_MAX, let through) + 1,056 operand registers
    heavy = cfg(16, 512, 256, 2, 2, names)
    assert resources._acc_spills(resources.footprint(bf16, sp, heavy)) is None
    why = resources.spills(bf16, sp, heavy)
    assert why is not None and "A and B tiles" in why and str(resources.LIVE_MAX) in why
    # the same 16 x 256 x 128 tile on 2 warps: 64 + 272 in bf16, past; 64 + 136 in fp8, kept
    fp8 = _problem({"a": "fp8", "b": "fp8", "c": "bf16"})
    assert "A and B tiles" in resources.spills(bf16, sp, cfg(16, 256, 128, 2, 2, names))
    assert resources.spills(fp8, sp, cfg(16, 256, 128, 2, 2, names)) is None
    # 3 stages of it fit in shared memory (209 KB): only the operands are in the way
    fixed, changes = resources.fit(bf16, sp, cfg(16, 256, 128, 2, 3, names))
    assert fixed == cfg(16, 256, 64, 2, 3, names) and changes == ["BK 128 -> 64"]
    # abduction's draws keep to the accumulator's bounds: the operand tiles' bound is for
    # predictions and seeds (`trouble`), not a deferral the kernel's own times cannot undo
    assert resources.trouble(bf16, sp, heavy) is not None and resources.spills_held(bf16, sp, heavy) is None
    # where the register file is not known (no hardware), the bound says nothing
    bare = Problem("mm", "matmul", {"M": 16, "N": 4096, "K": 4096}, {"a": "bf16", "b": "bf16", "c": "bf16"})
    assert resources.spills(bare, sp, heavy) is None


def test_output_tiles_shrink_larger_first_n_on_a_tie_and_relief_follows():
    """`fit` and the compile check's relief shrink the output tiles in one order, from one helper:
    the larger first, N on a tie; where that one is at its smallest, the relief halves the other."""
    from abductune.theory import check

    sp = _space(("BLOCK_M", "BLOCK_N", "BLOCK_K"))
    names = lambda cfg: [p.name for p in resources.output_tiles_larger_first(sp, cfg)]  # noqa: E731
    assert names({"BLOCK_M": 128, "BLOCK_N": 64}) == ["BLOCK_M", "BLOCK_N"]
    assert names({"BLOCK_M": 64, "BLOCK_N": 64}) == ["BLOCK_N", "BLOCK_M"]
    assert names({"BLOCK_M": 64}) == ["BLOCK_M"]
    cfg = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_warps": 4, "num_stages": 3}
    assert check.halve_larger_tile(sp, cfg) == {**cfg, "BLOCK_N": 64}
    assert check.halve_larger_tile(sp, {**cfg, "BLOCK_N": 16, "BLOCK_M": 16}) is None
    assert check.halve_larger_tile(sp, {**cfg, "BLOCK_N": 16, "BLOCK_M": 64}) == {**cfg, "BLOCK_N": 16, "BLOCK_M": 32}
