"""A kernel's own `tl.static_assert`s over what it tunes become constraints of the key's space
(autotune/asserts.py): read from its source, the call's values put in; a listed config that
fails one is never tried, a grown space never holds one, and what cannot be expressed (a dtype,
a value the call does not pass, an assertion inside an `if`) is left to the compiler."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from autotune_kernels import INTERPRET, interpreted
from abductune.autotune.asserts import assert_constraints, failing, kernel_asserts, with_asserts
from abductune.space import Choice, Pow2, Space

if INTERPRET:
    torch = pytest.importorskip("torch")
    from autotune_kernels import asserted

SRC = textwrap.dedent('''
    @triton.jit
    def attn(Q, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
        tl.static_assert(BLOCK_N <= HEAD_DIM)
        tl.static_assert(BLOCK_M % BLOCK_N == 0, "whole key blocks per query block")
        tl.static_assert(Q.dtype.element_ty == tl.float16)
        tl.static_assert(HEAD_DIM >= 16)
        if CAUSAL:
            tl.static_assert(BLOCK_M >= 64)
        x = 1
''')


def space() -> Space:
    return Space([Pow2("BLOCK_M", 16, 256), Pow2("BLOCK_N", 8, 256), Choice("num_warps", [4, 8])])


def test_the_assertions_over_tuned_parameters_become_constraints_with_the_calls_values():
    conds = kernel_asserts(SRC)
    assert len(conds) == 4  # the one inside `if CAUSAL` holds on one path only: not read
    got = assert_constraints(conds, space(), {"HEAD_DIM": 64, "CAUSAL": False, "Q": object()})
    # the dtype check names no tuned parameter and reads an attribute; HEAD_DIM >= 16 tunes nothing
    assert got == ["BLOCK_N <= 64", "BLOCK_M % BLOCK_N == 0"]
    assert assert_constraints(conds, space(), {}) == ["BLOCK_M % BLOCK_N == 0"]  # HEAD_DIM unknown: left out
    sp = with_asserts(space(), got)
    assert not sp.is_valid({"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4})
    assert sp.is_valid({"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4})
    assert failing(got, space(), [{"BLOCK_M": 64, "BLOCK_N": 128}, {"BLOCK_M": 64, "BLOCK_N": 32}]) == [0]
    # a constraint that would leave no config is not added: the compiler says what is wrong
    assert with_asserts(space(), ["BLOCK_N <= 4"]) is not None
    assert len(with_asserts(space(), ["BLOCK_N <= 4"]).constraints) == 0


def test_unreadable_source_gives_nothing():
    assert kernel_asserts("def broken(:") == [] and kernel_asserts("x = 1") == []


def _timer(seen):
    def timer(cfg, launch):
        seen.append(dict(cfg))  # before the launch: a config that fails is seen too
        launch()
        return [{16: 3.0, 32: 2.0, 64: 1.0}.get(cfg["BLOCK"], 5.0)]
    return timer


@interpreted
def test_a_listed_config_that_fails_the_kernels_assert_is_never_tried(tmp_path: Path):
    seen: list[dict] = []
    k = asserted.make(store=tmp_path / "s.sqlite", timer=_timer(seen))
    x = torch.randn(6, 32)
    torch.testing.assert_close(asserted.copy(k, x), x)
    assert seen and all(c["BLOCK"] <= 32 for c in seen)  # BLOCK 64 (the fastest by the timer) fails the assert
    assert k.best_config.kwargs["BLOCK"] == 32
    from abductune.store import Store

    with Store(tmp_path / "s.sqlite") as st:
        [run] = st.runs()
        tried = [m.config["BLOCK"] for m in st.measurements(run.context)]
        assert sorted(tried) == [16, 32]  # not even compiled: the space itself excludes 64
    wide = torch.randn(3, 128)  # another key: the same list, and BLOCK 64 is fine there
    torch.testing.assert_close(asserted.copy(k, wide), wide)
    assert k.best_config.kwargs["BLOCK"] == 64


@interpreted
def test_a_grown_space_holds_nothing_the_assert_forbids(tmp_path: Path):
    seen: list[dict] = []
    k = asserted.make(store=tmp_path / "s.sqlite", timer=_timer(seen), budget=6)
    x = torch.randn(4, 32)
    torch.testing.assert_close(asserted.copy(k, x), x)
    from abductune.store import Store

    with Store(tmp_path / "s.sqlite") as st:
        [run] = st.runs()
        tried = [m.config["BLOCK"] for m in st.measurements(run.context)]
    assert tried and max(tried) <= 32 and k.best_config.kwargs["BLOCK"] == 32


def test_what_the_search_found_beyond_the_list_counts_its_failures():
    """A tuner's beyond-the-list stats (autotune/phases.count_beyond): configs measured there, of
    those the ones that failed (what the prune did not foresee), and the ones pruned unmeasured."""
    from types import SimpleNamespace

    from abductune.autotune.phases import count_beyond
    from abductune.measurement import Measurement

    sp = Space([Pow2("BLOCK", 16, 128), Choice("num_warps", [1, 2, 4])])
    listed = [{"BLOCK": 16, "num_warps": 1}, {"BLOCK": 32, "num_warps": 2}]
    stats = {"beyond_list": 0, "beyond_failed": 0, "beyond_pruned": 0, "won_beyond_list": 0, "gain_beyond_list": 1.0}
    tuner = SimpleNamespace(_list=listed, space=sp, stats=stats)
    history = [Measurement(listed[0], "ok", time_ms=2.0), Measurement(listed[1], "ok", time_ms=1.5),
               Measurement({"BLOCK": 64, "num_warps": 2}, "ok", time_ms=1.0),
               Measurement({"BLOCK": 128, "num_warps": 4}, "resource_error", error="out of shared memory"),
               Measurement({"BLOCK": 128, "num_warps": 1}, "pruned", error="resource model")]
    result = SimpleNamespace(history=history, winner=history[2], baselines={"configs": history[1]})
    count_beyond(tuner, result)
    assert (stats["beyond_list"], stats["beyond_failed"], stats["beyond_pruned"]) == (2, 1, 1)
    assert stats["won_beyond_list"] == 1 and stats["gain_beyond_list"] == pytest.approx(1.5)
