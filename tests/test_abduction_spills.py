"""Abduction spends no measurement on a config the resource model says spills registers while
other candidates are left: the space-filling draws pass such a config over (it goes to the back
of the sample), and a local move or a theory's move that spills waits behind the others."""
from __future__ import annotations

from strategy_fixtures import measurement

from abductune.hardware import KNOWN_GPUS
from abductune.problem import Problem
from abductune.search.abduction import Abduction
from abductune.search.abduction.moves import POLL, _Test
from abductune.search.abduction.strategy import _Engine
from abductune.search.base import SearchContext
from abductune.space import Space
from abductune.theory.resources import spills_held

SPACE = {"name": "spill_test", "constraints": [], "constants": {}, "params": [
    {"name": "BLOCK_M", "kind": "pow2", "values": [32, 64, 128, 256], "role": "tile:M", "ordered": True},
    {"name": "BLOCK_N", "kind": "pow2", "values": [32, 64, 128, 256], "role": "tile:N", "ordered": True},
    {"name": "BLOCK_K", "kind": "pow2", "values": [16, 32, 64], "role": "tile:K", "ordered": True},
    {"name": "num_warps", "kind": "pow2", "values": [2, 4, 8], "role": "warps", "ordered": True},
    {"name": "num_stages", "kind": "int", "values": [2, 3], "role": "stages", "ordered": True}]}
# 256 x 256 fp32 accumulator values on 2 warps: 1,024 a thread, four times the register file
SPILLS = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 32, "num_warps": 2, "num_stages": 2}
FITS = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}
ALSO_FITS = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}


def _engine(with_problem: bool = True) -> tuple[_Engine, Space]:
    space = Space.from_dict(SPACE)
    problem = Problem("spill_test_bf16", "matmul", {"M": 4096, "N": 4096, "K": 4096},
                      {"a": "bf16", "b": "bf16", "c": "bf16"}, flops=2.0 * 4096 ** 3,
                      min_bytes=2.0 * 3 * 4096 ** 2, hardware=KNOWN_GPUS["H100-SXM"])
    ctx = SearchContext(space, 0, [], {}, 8, problem=problem if with_problem else None)
    eng = _Engine(Abduction(seed=0), ctx)
    inc = dict(FITS, num_stages=3)
    m = measurement(inc, 1.0)
    ctx._memo[space.key(inc)] = m
    eng._note([m])
    eng.inc = eng._best()
    return eng, space


def test_the_fixture_spills_by_the_register_file_and_the_others_do_not():
    eng, space = _engine()
    p = eng.ctx.problem
    assert spills_held(p, space, SPILLS) and not spills_held(p, space, FITS) and not spills_held(p, space, ALSO_FITS)


def test_a_space_filling_draw_that_spills_goes_to_the_back_and_is_drawn_last():
    eng, space = _engine()
    eng.explore_start = [dict(SPILLS), dict(FITS), dict(ALSO_FITS)]
    taken: set = set()
    assert eng._lhs_draw(taken) == FITS
    assert eng._lhs_draw(taken) == ALSO_FITS
    assert eng._lhs_draw(taken) == SPILLS  # nothing else is left: it is still drawn
    assert eng._lhs_draw(taken) is None
    skips = [e for e in eng.ctx.events if e["event"] == "skip"]
    assert len(skips) == 1 and skips[0]["config"] == SPILLS and "spills" in skips[0]["reason"]


def test_without_a_problem_to_judge_by_nothing_is_passed_over():
    eng, space = _engine(with_problem=False)
    eng.explore_start = [dict(SPILLS), dict(FITS)]
    assert eng._lhs_draw(set()) == SPILLS
    assert not [e for e in eng.ctx.events if e["event"] == "skip"]


def test_a_spilling_move_waits_behind_every_other_candidate():
    eng, space = _engine()
    cands = [_Test(POLL, dict(SPILLS), 0.5), _Test(POLL, dict(FITS), 0.0), _Test(POLL, dict(ALSO_FITS), 0.0)]
    got: list = []

    def take(t):
        got.append(t)
        return True
    eng._fill(cands, 2, take, got)
    assert [t.config for t in got] == [FITS, ALSO_FITS]  # ranked first, but it spills
    got.clear()
    eng._fill(cands, 3, take, got)
    assert [t.config for t in got] == [FITS, ALSO_FITS, SPILLS]  # taken once nothing else is left
