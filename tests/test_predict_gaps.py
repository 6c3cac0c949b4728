"""predict never extrapolates on a kernel's space (issue 27, item 5; theory/store/gaps.py): where a
tile every learned source sizes is not tuned (a matmul whose M tile the kernel fixes inside, as
Liger's fused MoE GEMMs do), or a rule sizes a tile the space lacks, the kernel's own default is
served with the reason, or nothing where there is no default; a row kernel without a rows-per-
program tile (one row per program: a known value) still gets the rule."""
from __future__ import annotations

import pytest

from abductune.problem import Problem
from abductune.space import Choice, Pow2, Space
from abductune.theory import resources
from abductune.theory.store import gaps, predict, predictions
from abductune.theory.store.predict import DefaultPrediction, zero_shot

from theory_fixtures import H100, matmul, matmul_space, row_space, rows


def no_m_tile(defaults: bool = True) -> Space:
    """A matmul space whose M tile is fixed inside the kernel: N and K tiles, warps, stages."""
    d = (lambda v: v) if defaults else (lambda v: None)
    return Space([Pow2("BLOCK_N", 32, 256, default=d(64)), Pow2("BLOCK_K", 16, 128, default=d(32)),
                  Choice("num_warps", [2, 4, 8, 16], default=d(4)), Choice("num_stages", [1, 2, 3, 4], default=d(2))],
                 name="moe_no_m")


def test_a_matmul_space_without_an_m_tile_gets_its_default_and_the_reason():
    p, sp = matmul(4096, 2048, 1408), no_m_tile()
    assert sp.by_role("tile:M") is None and sp.by_role("tile:N") is not None
    why = gaps.space_gap(p, sp)
    assert why is not None and "covers M" in why and "resource model" in why
    got = predict(p, sp)
    assert isinstance(got, DefaultPrediction) and got.source == "default" and got.rule is None
    assert got.config == sp.default() == {"BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}
    assert got.confidence == 0.0 and "covers M" in got.describe() and "default" in got.describe()
    # every zero-shot candidate is the default: no ranker or rule config behind it to fall back on
    assert [q.config for q in zero_shot(p, sp)] == [got.config]
    # a default the caller names (a dataset's recorded one, a decorator's first config) wins
    mine = {"BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}
    assert predict(p, sp, default=mine).config == mine
    # tune's seeds stay the theory's (a search measures them): the guard is on the zero-shot answer
    seeds = predictions(p, sp)
    assert seeds and all(q.source == "theory" for q in seeds) and got.config not in [q.config for q in seeds]


def test_without_a_default_to_serve_it_answers_nothing():
    p, sp = matmul(4096, 2048, 1408), no_m_tile(defaults=False)
    assert sp.declared_default() is None
    assert predict(p, sp) is None and zero_shot(p, sp) == []
    bad = {"BLOCK_N": 48, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}  # not in the space: not served
    assert predict(p, sp, default=bad) is None


def test_the_same_kernel_with_its_m_tile_is_served_as_before():
    p, sp = matmul(4096, 2048, 1408), matmul_space()
    assert gaps.space_gap(p, sp) is None
    got = predict(p, sp)
    assert got is not None and got.source in ("ranker", "theory")


def test_the_resource_model_must_be_able_to_judge_the_space():
    """Tiles the classifier finds by the dim they cover, but under role names the resource model
    does not read (tile:m): nothing learned is served, since nothing could be checked."""
    p = matmul(4096, 4096, 4096)
    sp = Space([Pow2("BM", 16, 256, role="tile:m", default=128), Pow2("BN", 32, 256, role="tile:n", default=128),
                Pow2("BK", 32, 128, role="tile:k", default=64), Choice("num_warps", [4, 8], default=4),
                Choice("num_stages", [2, 3], default=3)])
    why = gaps.space_gap(p, sp)
    assert why is not None and "resource model cannot tell" in why and "covers" not in why
    assert predict(p, sp).source == "default"


def test_attention_needs_both_its_query_and_key_tiles():
    p = Problem("attn_x", "attention", {"batch": 1, "heads": 32, "seq": 4096, "head_dim": 128},
                {"q": "bf16", "k": "bf16", "v": "bf16", "o": "bf16"}, flops=1e12, min_bytes=1e8, hardware=H100)
    both = Space([Pow2("BLOCK_M", 32, 256, default=128), Pow2("BLOCK_N", 32, 256, default=64),
                  Choice("num_warps", [4, 8], default=4), Choice("num_stages", [2, 3], default=2)])
    only_q = Space([Pow2("BLOCK_M", 32, 256, default=128), Choice("num_warps", [4, 8], default=4),
                    Choice("num_stages", [2, 3], default=2)])
    assert gaps.space_gap(p, both) is None
    why = gaps.space_gap(p, only_q)
    assert why is not None and "key tile" in why and "query" not in why


def test_a_row_kernel_with_one_row_per_program_still_gets_the_rule():
    """The bundled row rules size tile:X (rows per program); a kernel without it runs one row per
    program (rows are independent), a value the rule's grid reasoning knows: not a gap."""
    p = rows(16384, 4096)
    sp = Space([Pow2("BLOCK", 128, 16384, role="tile:R", default=2048), Pow2("num_warps", 1, 16, default=8),
                Choice("num_stages", [1, 2, 3], default=2)])
    theory = predictions(p, sp)
    assert theory and any("tile:X" in q.rule.forms for q in theory)
    assert all(gaps.rule_gap(q.rule, p, sp) is None for q in theory)
    got = predict(p, sp)
    assert got is not None and got.source == "theory" and got.config == theory[0].config
    assert gaps.space_gap(p, row_space()) is None


def test_a_rule_whose_tile_has_no_counterpart_is_passed_over_for_the_default():
    """An elementwise rule learned on a flat kernel sizes tile:X over numel; a kernel over
    (tokens, hidden) has no such dim: the rule's tile is not this kernel's, so its default serves."""
    p = Problem("swiglu_like", "elementwise", {"tokens": 16384, "hidden": 4096}, {"x": "bf16", "y": "bf16"},
                flops=5.0 * 16384 * 4096, min_bytes=6.0 * 16384 * 4096, hardware=H100)
    sp = Space([Pow2("BLOCK_TOKENS", 1, 64, role="tile:TOKENS", default=4),
                Pow2("BLOCK_HIDDEN", 128, 4096, role="tile:HIDDEN", default=1024),
                Pow2("num_warps", 1, 16, default=4)])
    assert gaps.space_gap(p, sp) is None  # its tiles cover its dims: the class gap does not fire
    theory = predictions(p, sp)
    assert theory and all(gaps.rule_gap(q.rule, p, sp) is not None for q in theory if q.rule is not None)
    # the theory's alone (session 16's fixed order): the rule is passed over, the default serves
    got = predict(p, sp, ranker=False)
    assert isinstance(got, DefaultPrediction) and got.config == sp.default()
    assert "tile:X" in got.describe() and "covers no dim of this problem" in got.describe()
    # served: what the class's evidence chose (theory/store/choice.py): the default where no
    # learned source beat the elementwise kernels' own defaults, else the ranker, which needs no
    # named dim (with session 27's four fresh kernels in the evidence, the ranker won for the class)
    from abductune.theory.store.choice import order_for

    chosen = order_for("elementwise", (), ("theory", "ranker"))
    served = predict(p, sp)
    if chosen is None or not chosen.sources:
        assert isinstance(served, DefaultPrediction) and served.config == sp.default()
    else:
        assert not isinstance(served, DefaultPrediction) and type(served).__name__ == "RankedPrediction"
        assert sp.is_valid(served.config) and "ranker" in chosen.sources


@pytest.mark.parametrize("kernel", ["zoo_mm_tutorial_bf16", "zoo_moe_gemm_bf16", "zoo_attn_fwd_bf16",
                                    "zoo_softmax_online_fp16", "zoo_rmsnorm_bf16"])
def test_the_zoo_spaces_the_sources_were_built_on_have_no_class_gap(kernel):
    from abductune.datasets.format import read_dataset
    from abductune.datasets.zoo import zoo_datasets

    ds = read_dataset(zoo_datasets(kernel)[0])
    assert gaps.space_gap(ds.problem, ds.space()) is None


def test_a_default_that_cannot_launch_here_gives_way_to_the_first_listed_one_that_can():
    """A list written for another GPU (FlagGems' attention list starts with a 288 KB pipeline,
    over the H100's 227 KB): where the kernel's own config is served, one the resource model
    says cannot launch is replaced by the first listed config it lets launch, else by the same
    config with fewer stages (`resources.fit`), and the reason is said."""
    p, sp = matmul(4096, 2048, 1408), no_m_tile()
    # B tile 128 x 256 bf16 over 4 stages (with the smallest M a dot takes): 272 KB, over 227 KB
    big = {"BLOCK_N": 256, "BLOCK_K": 128, "num_warps": 8, "num_stages": 4}
    fits = {"BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 3}
    assert resources.infeasible(p, sp, big) and resources.infeasible(p, sp, fits) is None
    got = predict(p, sp, default=big, listed=[big, {**big, "num_stages": 5}, fits])
    assert got.config == fits and "first listed config that can launch" in got.describe()
    alone = predict(p, sp, default=big)
    assert alone.config["num_stages"] < 4 and resources.infeasible(p, sp, alone.config) is None
    assert {k: v for k, v in alone.config.items() if k != "num_stages"} == \
        {k: v for k, v in big.items() if k != "num_stages"}  # the least move: stages only
    assert predict(p, sp, default=fits, listed=[big]).config == fits  # one that launches is kept
