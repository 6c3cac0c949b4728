"""What abductune's search inside Helion tries first: coupled tile moves, and the sweep's order (helion_space.py,
helion_search.py), on a CPU.

Helion binds kernels here as on the GPU, but a CPU has no hardware for the resource model and
no tensor-memory accelerator, so these tests hand the search an H100 (`HardwareInfo`) and, where
the sweep's order is under test, make Helion offer tensor-descriptor indexing as it does on
sm_90 (its own `_supports_tensor_descriptor` switch, which Helion's tests patch the same way).
Kernel times come from a made-up model with a known optimum (no GPU figure is claimed).
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="Helion needs torch")
from helion_fixtures import import_helion  # noqa: E402

helion = import_helion()
import helion._compat as helion_compat  # noqa: E402

import abductune.integrations.helion  # noqa: E402,F401 - registers abductune with Helion
from abductune.hardware import lookup  # noqa: E402
from abductune.integrations import helion_search as HS  # noqa: E402
from abductune.integrations.helion_kernel import facts_of  # noqa: E402
from abductune.integrations.helion_space import (TMA_INDEXING, coupled_moves, held_elements,  # noqa: E402
                                                 sweep_hints, trade_moves)
from helion_fixtures import stand_in_provider  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "gpu"))
import helion_bench  # noqa: E402

F16 = torch.float16
H100 = lookup("H100-SXM")
A100 = lookup("A100-SXM")


@pytest.fixture
def tma(monkeypatch):
    """Helion's config space as on sm_90: tensor-descriptor indexing offered."""
    monkeypatch.setattr(helion_compat, "_supports_tensor_descriptor", lambda: True)


def _mapped(fn, args, name, hardware=H100):
    bound = helion.kernel(static_shapes=True)(fn).bind(args)
    spec = bound.config_spec
    facts = facts_of(spec, HS.tensors_of(args), name=name, hardware=hardware)
    return HS.kernel_map(spec.create_config_generation(), spec, facts.roles, name=name), facts.problem


def _attention(hardware=H100, seq=1024):
    return _mapped(helion_bench.attention, tuple(torch.randn(4, 16, seq, 64, dtype=F16) for _ in range(3)),
                   "attention", hardware)


def _matmul(n: int, hardware=H100):
    return _mapped(helion_bench.matmul, (torch.randn(n, n, dtype=F16), torch.randn(n, n, dtype=F16)), "matmul",
                   hardware)


def _at(hmap, **values):
    return {**hmap.full.default(), **values}


def _per_thread(hmap, problem, cfg) -> float:
    return held_elements(problem, hmap.full, cfg) / (32 * cfg["num_warps"])


# ----------------------------------------------------------------------------- coupled moves

def test_attention_tiles_grow_together_with_their_warps():
    hmap, problem = _attention()
    assert hmap.roles["block_sizes_1"] == "tile:M" and hmap.roles["block_sizes_2"] == "tile:N"
    # the small tiles on 2 warps abductune's search ended in on the H100 (session 16)
    anchor = _at(hmap, block_sizes_1=64, block_sizes_2=32, num_warps=2, num_stages=6)
    moves = dict(coupled_moves(hmap, problem, anchor))
    up, down = moves["up:tile:M+tile:N"], moves["down:tile:M+tile:N"]
    assert (up["block_sizes_1"], up["block_sizes_2"], up["num_warps"]) == (128, 64, 8)
    assert (down["block_sizes_1"], down["block_sizes_2"], down["num_warps"]) == (32, 16, 1)
    # each thread keeps its share of the score block; nothing else moves
    assert _per_thread(hmap, problem, up) == _per_thread(hmap, problem, anchor) == 32
    for cfg in (up, down):
        assert {k for k in cfg if cfg[k] != anchor[k]} == {"block_sizes_1", "block_sizes_2", "num_warps"}


def test_a_share_outside_the_warps_matched_range_is_brought_into_it():
    hmap, problem = _attention()
    # 64 x 16 on 4 warps gives each thread 8 scores, below attention's 16 to 64
    anchor = _at(hmap, block_sizes_1=64, block_sizes_2=16, num_warps=4, num_stages=3)
    up = dict(coupled_moves(hmap, problem, anchor))["up:tile:M+tile:N"]
    assert (up["block_sizes_1"], up["block_sizes_2"], up["num_warps"]) == (128, 32, 8)
    assert _per_thread(hmap, problem, up) == 16


def test_warps_come_in_warpgroups_where_the_hardware_has_them():
    anchor_tiles = dict(block_sizes_0=128, block_sizes_1=64, block_sizes_2=128, num_warps=4, num_stages=4)
    hopper, p_h = _matmul(4096, H100)
    ampere, p_a = _matmul(4096, A100)
    down_h = dict(coupled_moves(hopper, p_h, _at(hopper, **anchor_tiles)))["down:tile:K+tile:M+tile:N"]
    down_a = dict(coupled_moves(ampere, p_a, _at(ampere, **anchor_tiles)))["down:tile:K+tile:M+tile:N"]
    assert (down_h["block_sizes_0"], down_h["block_sizes_1"]) == (down_a["block_sizes_0"], down_a["block_sizes_1"]) \
        == (64, 32)
    # the share alone asks for one warp; a 64-row M tile on Hopper's wgmma needs a warpgroup
    assert down_a["num_warps"] == 1 and down_h["num_warps"] == 4


def test_a_move_never_leaves_the_warpgroup_mma_it_is_on():
    # Helion's quick pick for its 1024^3 matmul on the H100: a 64-row M tile on 4 warps
    anchor_tiles = dict(block_sizes_0=64, block_sizes_1=128, block_sizes_2=128, num_warps=4, num_stages=4)
    hopper, p_h = _matmul(1024, H100)
    ampere, p_a = _matmul(1024, A100)
    # up leaves SMs idle (32 programs); down would put 32 rows on mma.sync: no move on Hopper
    assert coupled_moves(hopper, p_h, _at(hopper, **anchor_tiles)) == []
    assert [label for label, _ in coupled_moves(ampere, p_a, _at(ampere, **anchor_tiles))] == \
        ["down:tile:K+tile:M+tile:N"]


def test_a_larger_tile_must_still_fill_the_gpu():
    anchor_tiles = dict(block_sizes_0=128, block_sizes_1=64, block_sizes_2=64, num_warps=4, num_stages=3)
    small, p_small = _matmul(1024)
    big, p_big = _matmul(8192)
    # 1024^3: 256 x 128 tiles launch 32 programs for 132 SMs; 8192^3 has room
    assert [label for label, _ in coupled_moves(small, p_small, _at(small, **anchor_tiles))] == \
        ["down:tile:K+tile:M+tile:N"]
    up = dict(coupled_moves(big, p_big, _at(big, **anchor_tiles)))
    assert any(label.startswith("up:") for label in up)


def test_a_move_the_resource_model_refuses_is_left_out():
    hmap, problem = _attention()
    # 512 query rows: up, the tiles and the warps a share keeps cannot launch; only down remains
    anchor = _at(hmap, block_sizes_1=512, block_sizes_2=64, num_warps=16, num_stages=3)
    assert [label for label, _ in coupled_moves(hmap, problem, anchor)] == ["down:tile:M+tile:N"]


def test_no_hardware_no_coupled_moves():
    hmap, problem = _attention(hardware=None)
    assert coupled_moves(hmap, problem, _at(hmap, block_sizes_1=64, block_sizes_2=32, num_warps=2)) == []


# ----------------------------------------------------------------------------- the sweep's order

def test_tensor_descriptors_lead_the_sweep_where_helion_offers_them(tma):
    hmap, problem = _attention()
    anchor = _at(hmap, block_sizes_1=64, block_sizes_2=32, num_warps=2, num_stages=6)
    first, lead = sweep_hints(hmap, problem, anchor)
    assert lead == ("indexing",) and first["indexing"] == TMA_INDEXING
    order = hmap.sweep(anchor, first=first, lead=lead)
    assert order[0][:2] == ("indexing", TMA_INDEXING)
    assert all(v == TMA_INDEXING for k, v in order[0][2].items() if k.startswith("indexing_"))
    # K and V tiles are read by every query tile's program: evict_last is tried before evict_first
    evictions = [v for n, v, _ in order if n == "load_eviction_policies"]
    assert evictions == ["last", "first"]
    # without hints, Helion's order: pid type first, evict_first first
    plain = hmap.sweep(anchor)
    assert plain[0][0] == "pid_type" and [v for n, v, _ in plain if n == "load_eviction_policies"][0] == "first"


def test_no_tensor_descriptor_offered_no_lead():
    hmap, problem = _attention()  # a CPU: Helion offers pointer indexing only
    assert hmap.full["indexing_0"].values == ("pointer",)
    first, lead = sweep_hints(hmap, problem, hmap.full.default())
    assert lead == () and "indexing" not in first


def test_a_streaming_kernel_keeps_helions_eviction_order(tma):
    soft, problem = _mapped(helion_bench.softmax, (torch.randn(4096, 1024, dtype=F16),), "softmax")
    first, lead = sweep_hints(soft, problem, soft.full.default())
    assert lead == ("indexing",) and "load_eviction_policies" not in first  # a row is read once: no reuse


# ----------------------------------------------------------------------------- the search, through Helion's provider seam

def _cost(config) -> float:
    """A made-up attention time with its optimum at 128 x 64 tiles on 8 warps: K/V reloads fall
    with the query tile, scores past a thread's share spill, warps without 16 rows idle, a
    warpgroup MMA needs groups of 4 warps, and tensor descriptors on the loads help a little."""
    c = config.config
    _, bq, bk = c["block_sizes"]
    w, s = c["num_warps"], c["num_stages"]
    live = (bq * 64 + bq * bk) / (32 * w)
    t = (1.0 + 64.0 / bq) * (1 + max(0.0, live - 96) / 16) * (1 + max(0.0, 16 * w / bq - 1) * 0.5)
    t *= 0.7 if bq >= 64 and w % 4 == 0 else 1.0
    t *= (1 + 0.08 * abs(s - 3) + (0.3 if s == 1 else 0)) * (1 + 0.1 * abs(math.log2(bk / 64)))
    t *= 1.3 if bq >= 256 else 1.0  # too few programs per SM
    return t * (0.93 if (c.get("indexing") or ["pointer"])[0] == TMA_INDEXING else 1.0)


StandIn = stand_in_provider(_cost)  # Helion's BenchmarkProvider contract, answering from `_cost`


def _attention_search(monkeypatch, provider, seed: dict):
    """abductune's search of attention 4 x 16 x 1024 x 64 on a stand-in H100 from the user's
    `seed`, timed by `provider` (a `stand_in_provider`): (the search, its winner)."""
    monkeypatch.setattr(HS, "device_hardware", lambda args: H100)
    provider.seen = []
    args = tuple(torch.randn(4, 16, 1024, 64, dtype=F16) for _ in range(3))
    kernel = helion.kernel(static_shapes=True, autotune_progress_bar=False, autotune_log_level=40,
                           autotune_seed_configs=[helion.Config(**seed)],
                           autotune_benchmark_fn=lambda fns, *, repeat=1, desc=None: [f() for f in fns])(
        helion_bench.attention)
    search = HS.AbductuneSearch(kernel.bind(args), args, benchmark_provider_cls=provider, max_evaluations=24)
    return search, search.autotune(skip_cache=True)


def test_search_takes_the_coupled_move_from_small_tiles(tma, monkeypatch):
    # the small-tile config Helion's heuristics seeded on the H100, given as the user's seed
    search, best = _attention_search(monkeypatch, StandIn, dict(block_sizes=[1, 64, 32], num_warps=2, num_stages=6))
    phases = [p["phase"] for p in search.report["phases"]]
    assert phases[:2] == ["seeds", "coupled"]
    coupled = search.report["phases"][1]
    assert coupled["units"][0] == "up:tile:M+tile:N"
    # the move measured right after the seeds: 128 x 64 on 8 warps, the seed's stages kept
    after_seeds = StandIn.seen[len(search.report["seeds"])]
    assert (after_seeds.config["block_sizes"], after_seeds.config["num_warps"], after_seeds.config["num_stages"]) \
        == ([1, 128, 64], 8, 6)
    # the report says what each phase measured, as changes of the incumbent it started from
    assert coupled["measured"][0] == {"ms": round(_cost(after_seeds), 6),
                                      "changed": {"block_sizes": [1, 128, 64], "num_warps": 8}}
    assert sum(len(p["measured"]) for p in search.report["phases"]) == len(StandIn.seen)
    seed_best = min(_cost(c) for c in StandIn.seen[:len(search.report["seeds"])])
    assert _cost(best) < 0.6 * seed_best
    assert best.config["block_sizes"][1] >= 128 and best.config["num_warps"] >= 8
    # the sweep's first change of its incumbent is its indexing, on every load and store alike:
    # tensor descriptors where it had none (the roles' strategy may have found them already,
    # jumping several parameters at once; the sweep then tries pointers)
    first_change = search.report["phases"][phases.index("sweep")]["measured"][0]["changed"]
    assert set(first_change) == {"indexing"} and len(set(first_change["indexing"])) == 1
    assert best.config["indexing"][0] == TMA_INDEXING  # and it pays here
    assert search.report["evaluations"] <= 24 and len(set(StandIn.seen)) == len(StandIn.seen)


# ----------------------------------------------------------------------------- trades: the M and N tiles opposite ways

def _held(hmap, problem, cfg) -> float:
    return held_elements(problem, hmap.full, cfg)


def test_attention_trades_the_query_tile_for_the_key_tile_at_the_same_score_block():
    hmap, problem = _attention()
    anchor = _at(hmap, block_sizes_1=128, block_sizes_2=64, num_warps=4, num_stages=3)
    moves = dict(trade_moves(hmap, problem, anchor))
    longer_keys, wider_queries = moves["trade:tile:M-tile:N+"], moves["trade:tile:M+tile:N-"]
    assert (longer_keys["block_sizes_1"], longer_keys["block_sizes_2"]) == (64, 128)
    assert (wider_queries["block_sizes_1"], wider_queries["block_sizes_2"]) == (256, 32)
    for cfg in moves.values():  # the block a thread holds keeps its size: the warps stay
        assert _held(hmap, problem, cfg) == _held(hmap, problem, anchor)
        assert {k for k in cfg if cfg[k] != anchor[k]} == {"block_sizes_1", "block_sizes_2"}
    assert [label for label, _ in trade_moves(hmap, problem, anchor, (-1,))] == ["trade:tile:M-tile:N+"]


def test_a_trade_the_resource_model_refuses_is_left_out():
    # head dim 128: a 256-row query tile on 4 warps holds 256 x 128 outputs, 256 a thread
    hmap, problem = _mapped(helion_bench.attention, tuple(torch.randn(1, 32, 4096, 128, dtype=F16) for _ in range(3)),
                            "attention")
    anchor = _at(hmap, block_sizes_1=128, block_sizes_2=64, num_warps=4, num_stages=1)
    assert [label for label, _ in trade_moves(hmap, problem, anchor)] == ["trade:tile:M-tile:N+"]


def test_a_matmul_trade_never_leaves_the_warpgroup_mma():
    anchor_tiles = dict(block_sizes_0=64, block_sizes_1=128, block_sizes_2=64, num_warps=4, num_stages=4)
    hopper, p_h = _matmul(1024, H100)
    ampere, p_a = _matmul(1024, A100)
    # 32 rows would put Hopper's MMA on mma.sync; on the A100 (no warpgroup MMA) both ways are open
    assert [label for label, _ in trade_moves(hopper, p_h, _at(hopper, **anchor_tiles))] == ["trade:tile:M+tile:N-"]
    assert sorted(label for label, _ in trade_moves(ampere, p_a, _at(ampere, **anchor_tiles))) == \
        ["trade:tile:M+tile:N-", "trade:tile:M-tile:N+"]
    assert trade_moves(*_attention(hardware=None), _at(hopper, **anchor_tiles)) == []


def _long_keys_cost(config) -> float:
    """A made-up attention time whose optimum is a short query tile with a long key tile at the
    seed's score block (64 x 256 on 8 warps; Helion's `full` found 64 x 256 on the H200); any change of
    the warps or of the score block's size costs more than it gains."""
    c = config.config
    _, bq, bk = c["block_sizes"]
    w = c["num_warps"]
    t = (1 + abs(math.log2(bq / 64)) * 0.15) * (1 + abs(math.log2(bk / 256)) * 0.15)
    t *= 1 + abs(math.log2(bq * bk / (256 * 64))) * 0.6 + abs(math.log2(w / 8)) * 0.6
    return t


def test_search_trades_towards_long_keys_and_takes_the_winning_trade_again(monkeypatch):
    search, best = _attention_search(monkeypatch, stand_in_provider(_long_keys_cost),
                                     dict(block_sizes=[1, 256, 64], num_warps=8, num_stages=3))
    coupled = [p for p in search.report["phases"] if p["phase"] == "coupled"]
    labels = [u for p in coupled for u in p["units"]]
    assert "trade:tile:M-tile:N+" in labels
    # the trade won (128 x 128), and was taken once more (64 x 256)
    measured = [m["changed"].get("block_sizes") for p in coupled for m in p["measured"]]
    assert [1, 128, 128] in measured and [1, 64, 256] in measured
    assert best.config["block_sizes"] == [1, 64, 256] and best.config["num_warps"] == 8


# ----------------------------------------------------------------------------- Helion's compiler seeds, screened

def test_compiler_seeds_the_resource_model_rules_out_are_moved_or_dropped_never_measured(tma, monkeypatch):
    """Helion's compiler seeds go through the resource model as abductune's own do
    (`helion_search.screen_seed`): one that needs more shared memory than an H100 block has is
    measured with fewer stages, or not at all where the fewer-stage config is already a seed;
    one that fits is measured as given; Helion's default and the user's seed are never touched."""
    from abductune.theory.resources import infeasible
    from helion.autotuner.config_generation import ConfigGeneration

    hmap, problem = _attention()
    over = [dict(block_sizes=[1, 64, 512], num_warps=8, num_stages=3),   # K and V tiles: 3 x 128 KB
            dict(block_sizes=[1, 128, 256], num_warps=8, num_stages=4),  # 4 x 64 KB
            dict(block_sizes=[1, 64, 512], num_warps=8, num_stages=1)]   # fits: where the first one lands
    fits = dict(block_sizes=[1, 64, 32], num_warps=2, num_stages=3)
    for c in over[:2]:
        assert infeasible(problem, hmap.full, _at(hmap, block_sizes_1=c["block_sizes"][1],
                                                  block_sizes_2=c["block_sizes"][2], num_warps=8,
                                                  num_stages=c["num_stages"])) is not None

    def compiler_seeds(self, log_func=None):
        return [(self.flatten(helion.Config(**c)), helion.Config(**c)) for c in [*over, fits]]

    monkeypatch.setattr(ConfigGeneration, "seed_flat_config_pairs", compiler_seeds)
    user = dict(block_sizes=[1, 64, 512], num_warps=8, num_stages=4)  # the user's, out of memory too
    search, _ = _attention_search(monkeypatch, StandIn, user)
    screen = {(e["source"], e["why"].split(":")[0]) for e in search.report["seed_screen"]}
    assert screen == {("helion:heuristic", "moved")}
    assert len(search.report["seed_screen"]) == 2
    seeds = [c.config for c in StandIn.seen[:len(search.report["seeds"])]]
    tiles = [(c["block_sizes"][1], c["block_sizes"][2], c["num_warps"], c["num_stages"]) for c in seeds]
    assert tiles[0] == (64, 512, 8, 4)  # the user's seed, as given
    assert (64, 512, 8, 3) not in tiles and (128, 256, 8, 4) not in tiles
    assert (128, 256, 8, 3) in tiles  # one stage fewer fits
    assert tiles.count((64, 512, 8, 1)) == 1  # the first moved onto the third: measured once
    assert (64, 32, 2, 3) in tiles
    assert [s["source"] for s in search.report["seeds"]][:2] == ["user", "helion:default"]


def test_a_failed_seed_of_ours_is_measured_again_with_less_to_hold(tma, monkeypatch):
    """A seed of ours the resource model accepts fails (the stand-in answers None for a key
    tile of 256 on three stages or more, as a compile error): it is measured once more one
    stage shorter (attention has no K tile role), and that with its larger output tile halved,
    in a "seed_relief" phase right after the seeds, and such a config can win. Helion's
    compiler seed and the user's seed, failing the same way, are not eased."""
    from helion.autotuner.config_generation import ConfigGeneration

    theirs = dict(block_sizes=[1, 64, 256], num_warps=4, num_stages=3)

    def cost(c):
        bk, s = c.config["block_sizes"][2], c.config["num_stages"]
        return None if bk == 256 and s >= 3 else (0.5 if bk == 256 else _cost(c))

    def compiler_seeds(self, log_func=None):
        return [(self.flatten(helion.Config(**theirs)), helion.Config(**theirs))]

    def our_seeds(hmap, problem, default):  # ours: 128 x 256 tiles, 8 warps, 3 stages
        return [({**default, "block_sizes_1": 128, "block_sizes_2": 256, "num_warps": 8, "num_stages": 3},
                 "registry:test")]

    monkeypatch.setattr(ConfigGeneration, "seed_flat_config_pairs", compiler_seeds)
    monkeypatch.setattr(HS, "abductune_seeds", our_seeds)
    provider = stand_in_provider(cost)
    search, best = _attention_search(monkeypatch, provider, dict(block_sizes=[1, 32, 256], num_warps=4, num_stages=4))
    assert [s["source"] for s in search.report["seeds"]] == ["user", "helion:default", "registry:test",
                                                              "helion:heuristic"]
    phases = [p["phase"] for p in search.report["phases"]]
    assert phases[:2] == ["seeds", "seed_relief"]
    relief = search.report["phases"][1]["measured"]
    assert relief[0]["ms"] == 0.5 and len(relief) == 2
    seen = [(c.config["block_sizes"], c.config["num_warps"], c.config["num_stages"]) for c in provider.seen]
    n = len(search.report["seeds"])
    # ours eased, then with its larger output tile halved; the other two failures not eased
    assert seen[n:n + 2] == [([1, 128, 256], 8, 2), ([1, 128, 128], 8, 2)]
    assert best.config["num_stages"] <= 2
