"""The decorator's first bet on a missed key: the theory store's prediction, for a kernel of
the user's with its own parameter names (roles inferred from BLOCK_SIZE_M, ...)."""
from __future__ import annotations

import pytest

pytest.importorskip("triton")

from abductune.autotune import space_from_configs  # noqa: E402
from abductune.autotune.choices import theory_prediction  # noqa: E402
from abductune.hardware import lookup  # noqa: E402
from abductune.problem import Problem  # noqa: E402

# a tutorial-style list, as users write it
CONFIGS = [{"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8, "num_warps": w,
            "num_stages": s}
           for m, n, k, s, w in [(128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4),
                                 (64, 128, 32, 4, 4), (32, 64, 32, 5, 2), (16, 64, 64, 4, 4)]]


def test_a_users_matmul_gets_a_role_based_prediction():
    space = space_from_configs(CONFIGS, "user_matmul")
    assert space.by_role("tile:M") is not None and space.by_role("tile:K") is not None
    decode = Problem("user_matmul", "matmul", {"M": 8, "N": 8192, "K": 4096}, {"a": "fp16", "b": "fp16"},
                     hardware=lookup("H100-SXM"))
    p = theory_prediction(decode, space)
    assert p is not None and space.is_valid(p.config)
    assert p.config["BLOCK_SIZE_M"] == min(space["BLOCK_SIZE_M"].values)  # decode: the smallest M tile
    big = Problem("user_matmul", "matmul", {"M": 8192, "N": 8192, "K": 8192}, {"a": "fp16", "b": "fp16"},
                  hardware=lookup("H100-SXM"))
    q = theory_prediction(big, space)
    assert q is not None and q.config["BLOCK_SIZE_M"] * q.config["BLOCK_SIZE_N"] > \
        p.config["BLOCK_SIZE_M"] * p.config["BLOCK_SIZE_N"]  # big shapes get big tiles
    assert theory_prediction(Problem("x", "other", {}), space) is None  # nothing applies: no bet


def test_the_observed_database_is_the_bet_where_no_theory_applies(tmp_path):
    """A class the theory store has no rule for (say a vLLM MoE kernel whose tables were
    imported into the observed database) is served the database's config on a missed key."""
    import triton
    import triton.language as tl

    from abductune.autotune import Autotuner
    from abductune.autotune.choices import observed_prediction
    from abductune.errors import AbductuneError
    from abductune.heuristics.observed import Database, Rule, Template
    from abductune.store import Context, Store

    @triton.jit
    def moe_kernel(x, M, N, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
        pass

    configs = [triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n}) for m, n in [(16, 32), (64, 64), (32, 128)]]
    db = Database([Rule(kernel_class="fused_moe", bucket="fallback:all", dtype_family="fp16",
                        templates=[Template({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128})])])
    k = Autotuner(moe_kernel, ["x", "M", "N"], configs, ["M", "N"], budget=8, database=db, on_miss="predict",
                  kernel_class="fused_moe", store=str(tmp_path / "s.sqlite"))
    problem = Problem("moe_kernel", "fused_moe", {"M": 64, "N": 1024}, {"x": "fp16"}, hardware=lookup("H100-SXM"))
    assert theory_prediction(problem, k.space) is None
    seen = observed_prediction(problem, k.space, db)
    assert seen is not None and seen.config["BLOCK_SIZE_M"] == 64 and seen.config["BLOCK_SIZE_N"] == 128
    with Store(tmp_path / "s.sqlite") as store:
        choice = k._predict(store, Context.of(problem, k.space), k._list, problem)
    assert choice.source == "predicted" and (choice.config["BLOCK_SIZE_M"], choice.config["BLOCK_SIZE_N"]) == (64, 128)
    # without the rule: the list's first config, as before
    k.database = Database()
    with Store(tmp_path / "s.sqlite") as store:
        first = k._predict(store, Context.of(problem, k.space), k._list, problem)
    assert first.config["BLOCK_SIZE_M"] == 16
    with pytest.raises(AbductuneError):  # a database path that does not exist fails at decoration
        Autotuner(moe_kernel, ["x", "M", "N"], configs, ["M", "N"], database=tmp_path / "missing.json")


def test_a_missed_key_is_seeded_with_the_best_rule_and_the_runner_up_like_tune():
    from abductune.autotune.choices import theory_predictions
    from abductune.theory.store import predictions
    from abductune.tune import THEORY_SEEDS

    space = space_from_configs(CONFIGS, "user_matmul")
    for dims in ({"M": 8, "N": 8192, "K": 4096}, {"M": 4096, "N": 4096, "K": 4096}):
        prob = Problem("user_matmul", "matmul", dims, {"a": "fp16", "b": "fp16"}, hardware=lookup("H100-SXM"))
        got = theory_predictions(prob, space)
        ranked = predictions(prob, space)
        assert [p.config for p in got] == [p.config for p in ranked[:THEORY_SEEDS]] and got
        assert theory_prediction(prob, space).config == got[0].config
        assert len({tuple(sorted(p.config.items())) for p in got}) == len(got)  # distinct bets


def test_a_missed_key_never_serves_a_first_config_this_gpu_cannot_launch(tmp_path):
    """A list written for another GPU may open with a config this one cannot launch: the
    fallback bet is the first listed config the resource model lets launch."""
    import triton
    import triton.language as tl

    from abductune.autotune import Autotuner
    from abductune.heuristics.observed import Database
    from abductune.store import Context, Store
    from abductune.theory import resources

    @triton.jit
    def mm_kernel(a, b, M, N, K, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                  BLOCK_SIZE_K: tl.constexpr):
        pass

    big = {"BLOCK_SIZE_M": 256, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128}  # 5 stages: 640 KB of bf16 tiles
    small = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64}
    configs = [triton.Config(big, num_warps=8, num_stages=5), triton.Config(small, num_warps=4, num_stages=3)]
    k = Autotuner(mm_kernel, ["a", "b", "M", "N", "K"], configs, ["M", "N", "K"], budget=8, database=Database(),
                  on_miss="predict", kernel_class="fused_moe", store=str(tmp_path / "s.sqlite"))
    problem = Problem("mm_kernel", "fused_moe", {"M": 64, "N": 1024, "K": 512}, {"a": "bf16", "b": "bf16"},
                      hardware=lookup("H100-SXM"))
    assert resources.infeasible(problem, k.space, k._list[0]) is not None
    with Store(tmp_path / "s.sqlite") as store:
        first = k._predict(store, Context.of(problem, k.space), k._list, problem)
    assert first.source == "predicted" and first.config["BLOCK_SIZE_M"] == 64 and first.config["num_stages"] == 3
