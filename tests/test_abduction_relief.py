"""A seed that ran but spilled heavily is relieved once (issue 27): abduction tests the same
config with fewer registers per thread (`theory.check.relief`: more warps, a smaller K tile,
...) ahead of its first batch, as its time says nothing of the region without the spill. Replayed
on the zoo's persistent matmul at 512 x 5,000 x 3,000 (H200), the shape that showed it."""
from __future__ import annotations

from pathlib import Path

from abductune.datasets.public import load_any
from abductune.measure.replay import ReplayEvaluator
from abductune.search import Budget
from abductune.search.abduction.moves import RELIEF
from abductune.search.base import Seed
from abductune.session import Session
from abductune.theory.check import HEAVY_SPILL_BYTES, relief

DATA = (Path(__file__).resolve().parents[1] / "src/abductune/datasets/zoo_data/h200/zoo_mm_persistent_fp16"
        / "M512_N5000_K3000.jsonl.gz")
WIDE = {"BM": 128, "BN": 256, "BK": 64, "GROUP_SIZE": 8, "num_warps": 8, "num_stages": 4}  # spills 792 B
SQUARE = {"BM": 128, "BN": 128, "BK": 64, "GROUP_SIZE": 8, "num_warps": 8, "num_stages": 5}  # 372 B, faster
LIGHT = {"BM": 64, "BN": 256, "BK": 32, "GROUP_SIZE": 16, "num_warps": 4, "num_stages": 2}  # 228 B, 7.5x


def _tests(seeds, budget=6):
    ds = load_any(DATA)
    with Session(ReplayEvaluator(ds), strategy="abduction", seed=0, budget=Budget(budget),
                 seeds=[Seed(dict(c), f"s{i}") for i, c in enumerate(seeds)]) as s:
        res = s.run()
    return ds, res, [e for e in res.events if e["event"] == "test" and e.get("kind") != "remeasure"]


def test_a_heavily_spilling_seed_is_relieved_before_the_first_batch():
    ds, res, tests = _tests([WIDE, SQUARE])
    rec = {ds.space().key(r.config): r for r in ds.records}
    assert rec[ds.space().key(WIDE)].spills >= HEAVY_SPILL_BYTES
    assert rec[ds.space().key(WIDE)].time_ms > rec[ds.space().key(SQUARE)].time_ms  # not the incumbent
    first = tests[0]
    # the space has no more than 8 warps: the first relief is the K tile halved, the same 128 x 256 tile
    assert first["theory"] == RELIEF and first["config"] == relief(ds.space(), WIDE)[0] == dict(WIDE, BK=32)
    assert sum(t["theory"] == RELIEF for t in tests) == 1  # once per run
    hyp = [e for e in res.events if e["event"] == "hypothesis" and e.get("theory") == RELIEF]
    assert hyp and "792 bytes" in hyp[0]["reason"] and hyp[0]["from_config"] == WIDE
    # it found the region the spill hid: within 1% of the shape's optimum
    assert res.winner.time_ms <= 1.01 * ds.optimum().time_ms


def test_no_relief_for_the_incumbent_or_a_light_spill():
    # the spilling seed is the incumbent: the register-pressure theory's moves are for it
    _, _, tests = _tests([SQUARE])
    assert not any(t["theory"] == RELIEF for t in tests)
    # a seed that spills less than the heavy threshold keeps its time as its region's
    ds, _, tests = _tests([LIGHT, dict(WIDE, BK=32)])
    assert 0 < next(r for r in ds.records if r.config == LIGHT).spills < HEAVY_SPILL_BYTES
    assert not any(t["theory"] == RELIEF for t in tests)
