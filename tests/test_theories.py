"""The theory library: each theory's precondition holds where it should and not where it should
not, its moves step the right role in the right direction and give valid configs; hypotheses
are ranked and de-duplicated; and on the bundled H100 matmul data the top-5 hypotheses from the
default config contain a faster config on most shapes."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from abductune.datasets.format import read_dataset
from abductune.theory import LIBRARY, Hypothesis, diagnose, hypotheses
from abductune.theory import library as lib
from abductune.theory.diagnose import grid_tiles, wave_stats
from theory_fixtures import (DEFAULT_MM, elementwise, elementwise_space, matmul, matmul_space, measured, row_space,
                             rows)

MATMUL_DATA = Path(__file__).resolve().parents[1] / "src/abductune/datasets/data/h100/matmul_fp16"


def _case(problem, space, config, **kw):
    diag = diagnose(measured(config, **kw), problem, space)
    return diag, problem, space, dict(config)


def _square(**kw):  # 4096^3, 60% of the compute roof: compute-bound, full waves
    kw = {"frac_flops": 0.6, "frac_bw": 0.1, "registers": 200, "smem_bytes": 98304, **kw}
    return _case(matmul(4096, 4096, 4096), matmul_space(), DEFAULT_MM, **kw)


def _decode(space=None, config=None, **kw):  # M=1: latency-bound, 32 tiles on 132 SMs
    kw = {"frac_flops": 0.001, "frac_bw": 0.2, "registers": 200, "smem_bytes": 98304, **kw}
    return _case(matmul(1, 4096, 4096), space or matmul_space(), config or DEFAULT_MM, **kw)


def _moved(space, before, after):
    """{role: (before, after)} of the parameters a move changed."""
    return {p.role: (before[p.name], after[p.name]) for p in space.params if before[p.name] != after[p.name]}


def _check_valid(space, config, proposals):
    assert proposals, "expected at least one proposal"
    keys = [space.key(c) for c in proposals]
    assert len(set(keys)) == len(keys) and space.key(config) not in keys
    assert all(space.is_valid(c) for c in proposals)


def test_library_is_readable():
    names = [t.name for t in LIBRARY]
    assert len(set(names)) == len(names) >= 9
    for t in LIBRARY:
        assert t.reasoning and "\n" not in t.reasoning and len(t.reasoning) < 160


def test_padding_waste():
    th = lib.PADDING
    case = _decode()
    assert th.applies(*case)
    assert not th.applies(*_square())
    props = th.propose(*case)
    _check_valid(case[2], case[3], props)
    for c in props:
        mv = _moved(case[2], case[3], c)
        assert mv["tile:M"][1] < mv["tile:M"][0]  # shrinks the padded dim
        assert set(mv) <= {"tile:M", "warps"}
    assert 16 in [c["BLOCK_M"] for c in props]  # the tightest fit for M=1
    assert all(th.expected_gain(*case, c) > 0 for c in props)


def test_underfilled_gpu_and_split_k():
    th = lib.UNDERFILLED
    case = _decode()
    assert th.applies(*case) and not th.applies(*_square())
    props = th.propose(*case)
    _check_valid(case[2], case[3], props)
    for c in props:
        assert grid_tiles(case[1], case[2], c)[0] > case[0].tiles
        assert all(new <= old for role, (old, new) in _moved(case[2], case[3], c).items() if role.startswith("tile"))
    # 128 programs on 132 SMs: a few idle SMs are not worth smaller tiles
    nearly = _case(matmul(1024, 2048, 4096), matmul_space(), DEFAULT_MM, frac_flops=0.3, frac_bw=0.1,
                   registers=200, smem_bytes=98304)
    assert nearly[0].tiles == 128 and nearly[0].underfilled and not th.applies(*nearly)
    split_case = _decode(space=matmul_space(split_k=True), config={**DEFAULT_MM, "SPLIT_K": 1})
    split_props = th.propose(*split_case)
    assert any(c["SPLIT_K"] > 1 and c["BLOCK_N"] == 128 for c in split_props)
    assert all(th.expected_gain(*split_case, c) > 0 for c in split_props)


def test_tile_shape_reshapes_at_equal_area():
    th = lib.TILE_SHAPE
    case = _square()
    assert th.applies(*case) and th.interaction
    props = th.propose(*case)
    _check_valid(case[2], case[3], props)
    area = DEFAULT_MM["BLOCK_M"] * DEFAULT_MM["BLOCK_N"]
    for c in props:  # one tile side doubles, the other halves; nothing else moves
        assert c["BLOCK_M"] * c["BLOCK_N"] == area and c["BLOCK_M"] != DEFAULT_MM["BLOCK_M"]
        assert {k for k in c if c[k] != DEFAULT_MM[k]} == {"BLOCK_M", "BLOCK_N"}
        assert 0 < th.expected_gain(*case, c) <= lib.SHAPE_GAIN
    assert not th.applies(*_square(frac_flops=0.9))  # near the roof: nothing to find
    row = _case(rows(4096, 4096), row_space(), {"BLOCK": 4096, "ROWS_PER_PROGRAM": 1, "num_warps": 8,
                                                 "num_stages": 2}, frac_bw=0.3)
    assert not th.applies(*row)  # one grid tile: no shape to change


def test_wave_quantization():
    th = lib.WAVES
    # 2304^2: 18 x 18 = 324 tiles on 264 slots -> 1.23 waves, the second one 23% full
    case = _case(matmul(2304, 2304, 4096), matmul_space(), DEFAULT_MM, frac_flops=0.5, registers=200,
                 smem_bytes=98304)
    assert case[0].wave_efficiency == pytest.approx(324 / 528)
    assert th.applies(*case) and not th.applies(*_square())
    props = th.propose(*case)
    _check_valid(case[2], case[3], props)
    slots = 132 * case[0].blocks_per_sm
    for c in props:
        assert wave_stats(grid_tiles(case[1], case[2], c)[0], slots)[1] > case[0].wave_efficiency
        assert th.expected_gain(*case, c) > 0


def test_memory_latency_deepens_the_pipeline():
    th = lib.LATENCY
    case = _decode()
    assert th.applies(*case)
    props = th.propose(*case)
    _check_valid(case[2], case[3], props)
    for c in props:
        mv = _moved(case[2], case[3], c)
        assert set(mv) <= {"stages", "tile:K"} and all(new > old for old, new in mv.values())
        assert th.expected_gain(*case, c) > 0
    # at the roof there is no latency left to hide
    assert not th.applies(*_square(frac_flops=0.85))
    # a pipeline as deep as the loop: K=128 with BLOCK_K=64 is 2 trips under 3 stages
    short = _case(matmul(4096, 4096, 128), matmul_space(), DEFAULT_MM, frac_flops=0.1, frac_bw=0.2)
    assert short[0].k_trips == 2 and not th.applies(*short)


def test_a_pipeline_deeper_than_its_loop_gets_fewer_stages():
    th = lib.SHALLOW_LOOP
    # K=128 with BLOCK_K=64: 2 trips under 3 stages
    short = _case(matmul(4096, 4096, 128), matmul_space(), DEFAULT_MM, frac_flops=0.1, frac_bw=0.2)
    assert th.applies(*short)
    props = th.propose(*short)
    _check_valid(short[2], short[3], props)
    for c in props:
        mv = _moved(short[2], short[3], c)
        assert set(mv) <= {"stages", "tile:K"} and all(new < old for old, new in mv.values())
        assert 0 < th.expected_gain(*short, c) <= 0.15
    assert not th.applies(*_square())  # 4096 / 64 = 64 trips: the pipeline has work


def test_one_more_block_when_shared_memory_keeps_it_out():
    th = lib.ONE_MORE_BLOCK
    # 128x128x64 with 4 stages: 4 x 32 KB = 128 KB, one block per SM; K = 256 is 4 trips,
    # so pipeline fill and tile store are much of each block's time
    cfg = {**DEFAULT_MM, "num_warps": 8, "num_stages": 4}
    case = _case(matmul(4096, 4096, 256), matmul_space(), cfg, frac_flops=0.3, frac_bw=0.4,
                 registers=114, smem_bytes=131072)
    assert case[0].blocks_per_sm == 1
    assert th.applies(*case)
    props = th.propose(*case)
    _check_valid(case[2], case[3], props)
    assert {**cfg, "num_stages": 3} in props  # 96 KB: two fit in 228 KB
    for c in props:
        mv = _moved(case[2], case[3], c)
        assert all(new < old for old, new in mv.values()), mv  # only ever lighter
        per_stage = (c["BLOCK_M"] * c["BLOCK_K"] + c["BLOCK_K"] * c["BLOCK_N"]) * 2
        assert 2 * (per_stage * c["num_stages"] + 1024) <= 228 * 1024
        assert lib.OCCUPANCY_MIN_GAIN <= th.expected_gain(*case, c) <= lib.OCCUPANCY_GAIN
    # stages 2 keeps fewer loads in flight per SM than 1 block x 3: predicted below stages 3
    gains = {c["num_stages"]: th.expected_gain(*case, c) for c in props if c["BLOCK_N"] == 128
             and c["BLOCK_M"] == 128 and c["BLOCK_K"] == 64}
    assert gains.get(3, 0) > gains.get(2, 0)
    # a long loop hides its own fill and store: K = 4096 is 64 trips
    assert not th.applies(*_case(matmul(4096, 4096, 4096), matmul_space(), cfg, frac_flops=0.6,
                                 frac_bw=0.1, registers=114, smem_bytes=131072))
    # registers, not shared memory, bind (255 x 256 threads): fewer stages free nothing
    regs = _case(matmul(4096, 4096, 256), matmul_space(), {**cfg, "num_stages": 2}, frac_flops=0.3,
                 frac_bw=0.4, registers=255, smem_bytes=65536)
    assert not th.applies(*regs)
    # no shared-memory figure (a foreign kernel): nothing to say
    assert not th.applies(*_case(matmul(4096, 4096, 256), matmul_space(), cfg, frac_flops=0.3,
                                 frac_bw=0.4, registers=114, smem_bytes=None))


def test_one_more_block_predicts_wins_on_recorded_h100_matmuls():
    """Over every recorded config of every bundled matmul shape where the theory applies, most
    of its proposals are faster by more than 1%: the rule holds beyond the shapes a search
    happens to visit."""
    if not MATMUL_DATA.is_dir():
        pytest.skip(f"bundled matmul data missing at {MATMUL_DATA}")
    th, wins, n = lib.ONE_MORE_BLOCK, 0, 0
    for path in sorted(MATMUL_DATA.glob("*.jsonl.gz")):
        ds = read_dataset(path)
        sp, pb = ds.space(), ds.problem
        times = {sp.key(m.config): m.time_ms for m in ds.ok_records()}
        for m in ds.ok_records():
            d = diagnose(m, pb, sp)
            if not th.applies(d, pb, sp, m.config):
                continue
            for to in th.propose(d, pb, sp, m.config):
                t = times.get(sp.key(to))
                n += 1
                wins += t is not None and m.time_ms / t > 1.01
    assert n > 1000, n
    assert wins / n > 0.5, (wins, n)


def test_compute_bound_undertiled_grows_tiles():
    th = lib.UNDERTILED
    case = _square()
    assert th.applies(*case)
    assert not th.applies(*_decode())  # not compute-bound
    assert not th.applies(*_square(frac_flops=0.9))  # at the roof
    props = th.propose(*case)
    _check_valid(case[2], case[3], props)
    for c in props:
        mv = _moved(case[2], case[3], c)
        assert any(r in mv and mv[r][1] > mv[r][0] for r in ("tile:M", "tile:N"))
        assert all(new >= old for role, (old, new) in mv.items() if role in ("tile:M", "tile:N", "warps"))
        assert grid_tiles(case[1], case[2], c)[0] >= 132
    # 128x256 needs 8 warps under the accumulator constraint: the move brings them along
    widest = max(props, key=lambda c: c["BLOCK_N"])
    assert (widest["BLOCK_N"], widest["num_warps"]) == (256, 8)


def test_undertiled_reaches_a_compute_bound_problem_far_from_both_roofs():
    """At 20% of the compute roof and 10% of bandwidth a config is "latency"-bound, but the
    problem's FLOPs per byte put it under the compute roof: small tiles are still a reason
    (`problem_bound`); a memory-bound problem as far from both roofs is not offered bigger tiles."""
    from abductune.theory.diagnose import problem_bound

    th = lib.UNDERTILED
    far = _square(frac_flops=0.2, frac_bw=0.1)
    assert far[0].bound == "latency" and problem_bound(far[1]) == "compute"
    assert th.applies(*far) and th.propose(*far)
    decode = _decode(frac_bw=0.1)
    assert decode[0].bound == "latency" and problem_bound(decode[1]) == "memory"
    assert not th.applies(*decode)


def test_spills_and_low_occupancy():
    th = lib.PRESSURE
    case = _square(spills=40)
    assert th.applies(*case) and not th.applies(*_square())
    props = th.propose(*case)
    _check_valid(case[2], case[3], props)
    for c in props:
        mv = _moved(case[2], case[3], c)
        lighter = [r for r, (old, new) in mv.items() if (r == "warps" and new > old) or
                   (r != "warps" and new < old)]
        assert lighter, mv  # fewer stages, a smaller tile, or the tile over more warps
    failed = _case(matmul(4096, 4096, 4096), matmul_space(), DEFAULT_MM, status="resource_error")
    assert th.applies(*failed) and th.expected_gain(*failed, th.propose(*failed)[0]) == 1.0


def test_row_fits_one_block():
    th = lib.ONE_BLOCK_ROW
    sp, pb = row_space(), rows(4096, 1000)
    chunked = _case(pb, sp, {"BLOCK": 512, "ROWS_PER_PROGRAM": 1, "num_warps": 4, "num_stages": 1}, frac_bw=0.4)
    assert th.applies(*chunked)
    props = th.propose(*chunked)
    _check_valid(sp, chunked[3], props)
    assert {c["BLOCK"] for c in props} == {1024}  # the smallest power of two >= 1000
    assert props[0]["num_warps"] == 4  # 1024 elements at 8 per thread
    assert th.expected_gain(*chunked, props[0]) > 0
    fitted = _case(pb, sp, {"BLOCK": 1024, "ROWS_PER_PROGRAM": 1, "num_warps": 4, "num_stages": 1}, frac_bw=0.4)
    assert not th.applies(*fitted)
    # an oversized block also moves to the tight one
    assert th.applies(*_case(pb, sp, {"BLOCK": 4096, "ROWS_PER_PROGRAM": 1, "num_warps": 8, "num_stages": 1},
                             frac_bw=0.4))
    assert not th.applies(*_square()) and not th.applies(*_huge_elementwise())


def _huge_elementwise(config=None):
    return _case(elementwise(1 << 28), elementwise_space(), config or {"BLOCK": 1024, "num_warps": 4, "num_stages": 1},
                 frac_flops=0.005, frac_bw=0.9, registers=32)


def test_l2_grouping():
    th = lib.L2_GROUPING
    ungrouped = _case(matmul(4096, 4096, 4096), matmul_space(), {**DEFAULT_MM, "GROUP_M": 1}, frac_flops=0.6)
    assert th.applies(*ungrouped)
    props = th.propose(*ungrouped)
    _check_valid(ungrouped[2], ungrouped[3], props)
    assert [c["GROUP_M"] for c in props] == [8]
    assert not th.applies(*_square())  # already at the largest group
    decode = _decode(config={**DEFAULT_MM, "GROUP_M": 1})
    assert not th.applies(*decode)  # one tile row: nothing to group
    small = _case(matmul(1024, 1024, 1024), matmul_space(), {**DEFAULT_MM, "GROUP_M": 1}, frac_flops=0.5)
    assert not th.applies(*small)  # 6 MB of operands stay in the 50 MB L2 anyway


def test_warps_matched_to_the_tile():
    th = lib.WARPS_MATCHED
    case = _square()  # 128x128 on 4 warps: 128 accumulators per thread
    assert th.applies(*case)
    props = th.propose(*case)
    _check_valid(case[2], case[3], props)
    assert all(c["num_warps"] > 4 for c in props)
    matched = _case(matmul(4096, 4096, 4096), matmul_space(), {**DEFAULT_MM, "BLOCK_M": 64, "BLOCK_N": 64},
                    frac_flops=0.5)
    assert not th.applies(*matched)  # 32 per thread
    tiny = _huge_elementwise({"BLOCK": 128, "num_warps": 4, "num_stages": 1})  # 1 element per thread
    assert th.applies(*tiny)
    tiny_props = th.propose(*tiny)
    _check_valid(tiny[2], tiny[3], tiny_props)
    assert all(c["num_warps"] < 4 for c in tiny_props)
    assert all(th.expected_gain(*tiny, c) > 0 for c in tiny_props)


def test_hypotheses_are_ranked_and_distinct():
    diag, pb, sp, cfg = _decode()
    hs = hypotheses(diag, pb, sp, cfg)
    assert hs and all(isinstance(h, Hypothesis) for h in hs)
    gains = [h.expected_gain for h in hs]
    assert gains == sorted(gains, reverse=True)
    keys = [sp.key(h.to_config) for h in hs]
    assert len(set(keys)) == len(keys) and sp.key(cfg) not in keys
    assert all(sp.is_valid(h.to_config) and h.changes and h.theory in h.reason for h in hs)
    assert {"padding_waste", "underfilled_gpu", "memory_latency"} <= {h.theory for h in hs}
    # a library of one theory gives only its hypotheses
    only = hypotheses(diag, pb, sp, cfg, library=(lib.LATENCY,))
    assert only and {h.theory for h in only} == {"memory_latency"}


def test_step_roles_repairs_with_warps():
    sp = matmul_space()
    # 128x256 on 4 warps breaks the accumulator limit; the repair takes 8 warps
    moved = lib.step_roles(sp, DEFAULT_MM, {"tile:N": +1})
    assert moved == {**DEFAULT_MM, "BLOCK_N": 256, "num_warps": 8}
    assert lib.step_roles(sp, DEFAULT_MM, {"tile:N": +1}, adjust=()) is None
    assert lib.step_roles(sp, DEFAULT_MM, {"split:K": +1}) is None  # no such role
    assert lib.step_roles(sp, {**DEFAULT_MM, "num_stages": 5}, {"stages": +1}) is None  # past the end


@pytest.mark.skipif(not MATMUL_DATA.is_dir(), reason="bundled H100 matmul data not present")
def test_top5_hypotheses_beat_the_default_on_recorded_h100_matmuls():
    """Measured when written: 16 of 16 shapes have a strictly faster config among the top 5."""
    files = sorted(MATMUL_DATA.glob("*.jsonl.gz"))
    assert len(files) == 16
    wins = 0
    for f in files:
        ds = read_dataset(f)
        sp = ds.space()
        recs = {sp.key(m.config): m for m in ds.records}
        default = ds.meta["default_config"]
        base = recs[sp.key(default)]
        hs = hypotheses(diagnose(base, ds.problem, sp), ds.problem, sp, default)
        times = [recs[sp.key(h.to_config)].objective for h in hs[:5] if sp.key(h.to_config) in recs]
        wins += any(t < base.time_ms for t in times if math.isfinite(t))
    assert wins >= 14, f"top-5 hypotheses beat the default on only {wins} of 16 shapes"


def test_no_hypothesis_leaves_the_warpgroup_mma_on_hopper():
    """A 768^3 matmul on 64x128 tiles under-fills the GPU; the smaller tiles underfilled_gpu
    would try include 32- and 16-row ones, which on Hopper leave wgmma for mma.sync. Those
    are not tested there; on an A100 (no warpgroup MMA) they are."""
    from abductune import kernels
    from abductune.hardware import lookup
    from abductune.measurement import Measurement

    spec = kernels.get("matmul_fp16")
    space = spec.space()
    cfg = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8, "num_warps": 4, "num_stages": 4}

    def proposed(gpu):
        pb = spec.problem({"M": 768, "N": 768, "K": 768}, lookup(gpu))
        return hypotheses(diagnose(Measurement(cfg, "ok", time_ms=0.02), pb, space), pb, space, cfg)
    hopper, ampere = proposed("H100-SXM"), proposed("A100-SXM")
    assert hopper and all(h.to_config["BLOCK_M"] >= 64 and h.to_config["num_warps"] % 4 == 0 for h in hopper)
    assert any(h.to_config["BLOCK_M"] < 64 for h in ampere)


def test_spills_alone_move_against_registers():
    """A config that spills and keeps its warps resident has registers as its only trouble: a
    shallower pipeline frees shared memory, not registers, so it is not proposed, and the tile
    moves rank by the share of the live registers (accumulator and operand tiles per thread) they
    free: halving the N tile of a 128 x 256 x 64 tile frees more than halving its K tile. Where
    the config cannot launch, fewer stages is still a move."""
    th = lib.PRESSURE
    wide = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3}
    case = _case(matmul(4096, 4096, 4096), matmul_space(), wide, frac_flops=0.05, frac_bw=0.02, registers=255,
                 spills=1180, smem_bytes=147456)
    d, pb, sp, cfg = case
    assert d.spills and d.occupancy is not None and d.occupancy >= 1 / 16
    props = th.propose(*case)
    _check_valid(sp, cfg, props)
    assert not any(set(_moved(sp, cfg, c)) == {"stages"} for c in props)
    gain = {tuple(sorted(_moved(sp, cfg, c))): th.expected_gain(*case, c) for c in props}
    assert gain[("tile:N",)] > gain[("tile:K",)] > 0
    assert th.expected_gain(*case, {**cfg, "num_stages": 2}) == 0.0  # frees no register
    failed = _case(matmul(4096, 4096, 4096), matmul_space(), wide, status="resource_error")
    assert set(_moved(sp, cfg, th.propose(*failed)[0])) == {"stages"}
