"""The zero-shot ranker learned across kernels (heuristics/ranker.py, heuristics/features.py):
it learns only from what the holdout allows, proposes nothing the resource model rejects, is
deterministic, reads roles rather than names, and beats a random pick where the answer is known."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from abductune.datasets.bundled import bundled_datasets
from abductune.datasets.zoo import zoo_datasets
from abductune.errors import AbductuneError
from abductune.hardware import KNOWN_GPUS
from abductune.heuristics.features import NAMES, feature_matrix
from abductune.heuristics.harvest import Observation, observations_from_datasets
from abductune.heuristics.ranker import (CLIP, CLIPS, RIDGE, RIDGES, TAU, TAUS, Ranker, choose_constants, loko_score,
                                        shape_data)
from abductune.problem import Holdout, Problem
from abductune.space import Choice, Pow2, Space
from abductune.theory.resources import trouble

H100 = KNOWN_GPUS["H100-SXM"]
FP16 = {"a": "fp16", "b": "fp16", "c": "fp16"}
NAMINGS = {"synth_a": ("BLOCK_M", "BLOCK_N", "BLOCK_K"), "synth_b": ("BM", "BN", "BK"),
           "synth_c": ("TILE_M", "TILE_N", "TILE_K"), "synth_d": ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")}
SHAPES = ({"M": 16, "N": 4096, "K": 4096}, {"M": 1000, "N": 3000, "K": 2000}, {"M": 4096, "N": 4096, "K": 1024})


def mm_space(names, hi=128, k_hi=64, stages=(2, 3)):
    m, n, k = names
    return Space([Pow2(m, 16, hi), Pow2(n, 32, hi), Pow2(k, 32, k_hi), Choice("num_warps", [4, 8]),
                  Choice("num_stages", list(stages))])


def known_log_time(problem, space, configs):
    """The synthetic truth: a function of the ranker's own features (unfilled SMs, padding,
    and elements per thread away from 32), so the best config is known exactly."""
    X = feature_matrix(problem, space, configs)
    f = {n: X[:, i] for i, n in enumerate(NAMES)}
    return -0.15 * f["fill"] - 0.4 * f["useful"] + 0.04 * (f["elems_per_thread"] - 5.0) ** 2


def synthetic(kernel, dims, truth=known_log_time, source_hash="", space=None):
    space = space or mm_space(NAMINGS[kernel])
    p = Problem(kernel, "matmul", dict(dims), dict(FP16), flops=2.0 * dims["M"] * dims["N"] * dims["K"],
                min_bytes=2.0 * (dims["M"] * dims["K"] + dims["K"] * dims["N"] + dims["M"] * dims["N"]),
                hardware=H100, source_hash=source_hash or kernel)
    cfgs = space.valid_configs()
    logt = truth(p, space, cfgs)
    times = {space.key(c): float(math.exp(v)) for c, v in zip(cfgs, logt)}
    return Observation(f"{kernel}:{dims['M']}", p, space, times)


@pytest.fixture(scope="module")
def synth():
    return [synthetic(k, d) for k in NAMINGS for d in SHAPES]


def test_leave_one_kernel_out_leaves_every_shape_of_the_kernel_out(synth):
    held = synth[0].problem
    loko = Ranker.fit(synth, exclude=Holdout(held, "kernel"))
    assert all("synth_a" not in ks for ks in loko.trained_on.values())
    assert loko.trained_on["gemm"] == ["synth_b", "synth_c", "synth_d"]
    loso = Ranker.fit(synth, exclude=Holdout(held, "shape"))
    assert "synth_a" in loso.trained_on["gemm"]  # its other shapes stay
    # the same source under another name is the same kernel (the zoo's two attention kernels)
    twin = [synthetic("synth_b", d, source_hash="synth_a") for d in SHAPES]
    both = Ranker.fit(synth[:3] + twin + synth[6:], exclude=Holdout(held, "kernel"))
    assert both.trained_on["gemm"] == ["synth_c", "synth_d"]


def test_beats_random_where_the_optimum_is_a_known_function_of_the_features(synth):
    for kind in ("linear", "knn"):
        for held in ("synth_a", "synth_c"):
            test = [o for o in synth if o.kernel == held]
            r = Ranker.fit(synth, exclude=Holdout(test[0].problem, "kernel"), kind=kind)
            for o in test:
                top = r.rank(o.problem, o.space)[0]
                rand = math.exp(np.mean([math.log(t / o.optimum) for t in o.times.values()]))
                assert o.time_of(top) / o.optimum < 1.03, (kind, o.name, top)
                assert rand > 1.1  # the test means something: a random pick is far off


def test_never_proposes_a_config_the_resource_model_rejects(synth):
    # a truth where bigger tiles always win: the model is pushed towards configs that cannot launch
    def bigger_is_better(p, space, cfgs):
        X = feature_matrix(p, space, cfgs)
        return -0.1 * X[:, NAMES.index("reuse")] - 0.05 * X[:, NAMES.index("stages")]

    wide = mm_space(("BM", "BN", "BK"), hi=256, k_hi=128, stages=(2, 3, 4, 5))
    train = [synthetic(k, d, bigger_is_better, space=wide) for k in ("synth_b", "synth_c") for d in SHAPES]
    r = Ranker.fit(train)
    o = synthetic("synth_a", SHAPES[2], bigger_is_better, space=mm_space(NAMINGS["synth_a"], 256, 128, (2, 3, 4, 5)))
    ranked = r.rank(o.problem, o.space)
    rejected = [c for c in o.space.valid_configs() if trouble(o.problem, o.space, c)]
    assert rejected and ranked
    assert all(trouble(o.problem, o.space, c) is None for c in ranked)
    assert len(ranked) == o.space.cardinality - len(rejected)
    # the winner is the largest tile that still fits, not the largest tile
    assert ranked[0]["BLOCK_M"] * ranked[0]["BLOCK_N"] >= 128 * 128


def test_deterministic_and_blind_to_parameter_names(synth):
    a = Ranker.fit(synth, exclude=Holdout(synth[0].problem, "kernel"))
    b = Ranker.fit(synth, exclude=Holdout(synth[0].problem, "kernel"))
    assert a.to_dict() == b.to_dict()
    o = synth[1]
    assert a.rank(o.problem, o.space) == b.rank(o.problem, o.space)
    # the same problem and configs under other names: the same features, the same order
    renamed = synthetic("synth_b", SHAPES[1])
    rank_a = [tuple(c.values()) for c in a.rank(o.problem, o.space)]
    rank_b = [tuple(c.values()) for c in a.rank(renamed.problem, renamed.space)]
    assert rank_a == rank_b


def test_a_space_it_cannot_read_is_left_out_or_refused(synth):
    blind = Space([Choice("block_size_x", [32, 64, 128]), Choice("tile_size_x", [1, 2, 4])])
    p = Problem("cuda_kernel", "other", {"x": 4096}, {}, hardware=H100)
    obs = Observation("cuda", p, blind, {blind.key(c): 1.0 + i for i, c in enumerate(blind.valid_configs())})
    r = Ranker.fit(synth + [obs])
    assert r.skipped == ["cuda_kernel:cuda"]
    with pytest.raises(AbductuneError, match="warps role"):
        r.rank(p, blind)
    with pytest.raises(AbductuneError, match="nothing to learn"):
        Ranker.fit([obs])
    with pytest.raises(AbductuneError, match="kind"):
        Ranker.fit(synth, kind="forest")


def test_fits_on_recorded_datasets_and_ranks_another_kernels_shape():
    paths = bundled_datasets(kernel="gelu_mul_fp16") + zoo_datasets("zoo_swiglu_bf16")[:2]
    r = Ranker.fit(paths)  # paths are read like any dataset
    assert r.trained_on["elementwise"] == ["gelu_mul_fp16", "zoo_swiglu_bf16"]
    (rope,) = observations_from_datasets(zoo_datasets("zoo_rope_bf16")[:1])
    ranked = r.rank(rope.problem, rope.space)
    assert sorted(map(repr, ranked)) == sorted(repr(c) for c in rope.space.valid_configs()
                                               if trouble(rope.problem, rope.space, c) is None)
    assert len(r.rank(rope.problem, rope.space, ranked[:5])) == 5


def test_constants_are_chosen_leave_one_kernel_out_without_the_held_out_kernel(synth):
    """Each family's clip, ridge and objective are the grid's best by leave-one-kernel-out on the training
    data (`choose_constants`); fitted without a kernel, nothing of that kernel reaches the choice:
    its recorded times turned upside down give the same ranker."""
    held = Holdout(synth[0].problem, "kernel")
    r = Ranker.fit(synth, exclude=held)
    rest = [shape_data(o) for o in synth if o.kernel != "synth_a"]
    grid = [(c, x, t) for c in CLIPS for x in RIDGES for t in TAUS]
    assert r.constants == choose_constants(rest) and r.constants["gemm"] in grid
    best = min(loko_score(rest, c) for c in grid)
    assert loko_score(rest, r.constants["gemm"]) == pytest.approx(best, abs=1e-12)
    upside_down = [dataclasses.replace(o, times={k: 1.0 / t for k, t in o.times.items()}) if o.kernel == "synth_a"
                   else o for o in synth]
    assert Ranker.fit(upside_down, exclude=held).to_dict() == r.to_dict()
    assert Ranker.fit(upside_down).to_dict() != Ranker.fit(synth).to_dict()  # the test can tell them apart
    # two kernels left: too few to choose by (each inner fit would learn from one): hand-set
    two = Ranker.fit(synth[:6])
    assert two.constants == {} and two.to_dict()["models"] == Ranker.fit(synth[:6], select=False).to_dict()["models"]
    assert (CLIP, RIDGE, TAU) in grid


def test_a_saved_linear_ranker_ranks_as_the_fitted_one(synth):
    r = Ranker.fit(synth[3:])
    back = Ranker.from_dict(r.to_dict())
    assert back.constants == r.constants and r.constants
    o = synth[0]
    assert [tuple(c.values()) for c in back.rank(o.problem, o.space)][:10] == \
        [tuple(c.values()) for c in r.rank(o.problem, o.space)][:10]
    assert back.trained_on == r.trained_on
    with pytest.raises(AbductuneError, match="refit"):
        Ranker.from_dict({**r.to_dict(), "features": ["warps"]})


# ----------------------------------------------------------------------------- the shipped ranker, wired in

def _zoo(kernel, name):
    from abductune.datasets.format import read_dataset

    return next(ds for ds in map(read_dataset, zoo_datasets(kernel)) if ds.name == name)


@pytest.fixture(scope="module")
def splitk():
    """A zoo matmul shape whose ranking changes when its kernel is left out of the ranker."""
    return _zoo("zoo_mm_splitk_fp16", "M40_N3000_K7000")


def test_statistics_refit_equals_a_fit_on_the_data():
    from abductune.heuristics.ranker import ShapeStats, shape_data

    obs = observations_from_datasets(bundled_datasets(kernel="gelu_mul_fp16") + zoo_datasets("zoo_swiglu_bf16")[:2]
                                     + zoo_datasets("zoo_rmsnorm_bf16")[:2])
    stats = [ShapeStats.from_dict(ShapeStats.of(shape_data(o)).to_dict()) for o in obs]  # through the file format
    for hold in (None, Holdout(obs[0].problem, "kernel"), Holdout(obs[-1].problem, "shape")):
        for select in (False, True):
            a = Ranker.fit(obs, exclude=hold, select=select)
            b = Ranker.from_stats(stats, exclude=hold, constants=a.constants)
            assert a.trained_on == b.trained_on and a.constants == b.constants
            for g, m in a.models.items():
                assert np.allclose(m.coef, b.models[g].coef, rtol=1e-5, atol=1e-6), g  # 9 digits saved
    # every target clip of the grid is saved: a refit with another clip is a fit on the data
    other = {"elementwise": (CLIPS[0], RIDGES[2]), "rows": (CLIPS[2], RIDGES[0])}
    a, b = Ranker.fit(obs, select=False), Ranker.from_stats(stats, constants=other)
    c = Ranker.from_stats([ShapeStats.of(shape_data(o)) for o in obs], constants=other)
    assert not np.allclose(a.models["rows"].coef, b.models["rows"].coef)
    assert all(np.allclose(b.models[g].coef, c.models[g].coef, rtol=1e-5, atol=1e-6) for g in b.models)
    assert "gelu_mul_fp16" not in Ranker.from_stats(stats, exclude=Holdout(obs[0].problem, "kernel")).trained_on["all"]


def test_shipped_file_is_zoo_and_bundled_and_not_stale():
    """The file names every zoo and bundled kernel with its source hash, and its statistics are
    what the packaged data gives now (a sample of shapes, one per family: a full refit takes 30 s)."""
    import json

    from abductune.heuristics import ranker_shipped as rs
    from abductune.heuristics.ranker import ShapeStats, holdout_groups

    d = json.loads(rs.PATH.read_text())
    assert d["sources"] == ["zoo", "bundled"] and d["command"] == "python -m abductune.heuristics.ranker_shipped"
    obs = observations_from_datasets(list(zoo_datasets()) + list(bundled_datasets()))
    stale = f"stale: regenerate it with `{rs.COMMAND}`"
    # shapes the features cannot describe are named in the model's `skipped`, not fitted
    skipped = set(d["model"].get("skipped") or ())
    fitted = [o for o in obs if f"{o.kernel}:{o.name}" not in skipped]
    assert len(fitted) + len(skipped) == len(obs), stale
    assert d["kernels"] == {o.kernel: o.problem.source_hash for o in sorted(fitted, key=lambda o: o.kernel)}, stale
    assert len(d["shapes"]) == len(fitted) and {s["key"] for s in d["shapes"]} == {o.problem.key() for o in fitted}, stale
    saved = {s["key"]: ShapeStats.from_dict(s) for s in d["shapes"]}
    for fam in ("gelu_mul_fp16", "softmax_fp16", "zoo_mm_w4a16", "zoo_attn_fwd_bf16"):
        o = next(o for o in obs if o.kernel == fam)
        now, then = ShapeStats.of(shape_data(o)), saved[o.problem.key()]
        for x in ("mean", "cov", "xy"):
            assert np.allclose(getattr(now, x), getattr(then, x), rtol=1e-7, atol=1e-9), (fam, x, stale)
    sh = rs.load()
    for g, m in d["model"]["models"].items():  # the model shown in the file is the one served
        assert np.allclose(m["coef"], sh.ranker.models[g].coef, atol=2e-6), g
    # the constants: chosen for every group a kernel holdout leaves out, and as the code chooses
    # them now (the elementwise family alone: a full rechoice takes the minutes of the refit)
    assert set(sh.without) == set(holdout_groups(sh.stats)), stale
    # by the family the ranker files a shape under (`ranker.family`, from `classify`), not the
    # class a dataset's header declares: FlagGems' anti-aliased bicubic is declared "other" and
    # classified elementwise, and the shipped constants were chosen over the second
    mine = [s for s in (shape_data(o) for o in obs) if s is not None and s.family == "elementwise"]
    assert choose_constants(mine).get("elementwise") == tuple(d["constants"]["all"]["elementwise"]), stale
    assert sh.ranker.constants == {g: tuple(c) for g, c in d["constants"]["all"].items()}


def test_leave_one_kernel_out_refits_without_the_kernel(splitk):
    from abductune.heuristics import ranker_shipped as rs

    full, none_left = rs.shipped_ranker()
    assert none_left == () and "zoo_mm_splitk_fp16" in full.trained_on["gemm"]
    loko, left = rs.shipped_ranker(Holdout(splitk.problem, "kernel"))
    assert left == ("zoo_mm_splitk_fp16",) and "zoo_mm_splitk_fp16" not in loko.trained_on["all"]
    assert rs.shipped_ranker(Holdout(splitk.problem, "kernel"))[0] is loko  # cached per set left out
    loso, left = rs.shipped_ranker(splitk.problem)  # a Problem: its shape only
    assert left == ("zoo_mm_splitk_fp16",) and "zoo_mm_splitk_fp16" in loso.trained_on["gemm"]
    # nested: the refit's constants were chosen without the kernel (`build`), not on all data
    sh = rs.load()
    (group,) = [g for g in sh.without if "zoo_mm_splitk_fp16" in g]
    assert loko.constants == sh.without[group]  # (they may equal the full fit's: the data decides)
    # a holdout of kernels in two groups has no nested choice: the hand-set constants, chosen by no figure
    assert rs.refit_constants(sh, frozenset({"zoo_mm_splitk_fp16", "softmax_fp16"})) == {}
    sp = splitk.space()
    assert full.rank(splitk.problem, sp) != loko.rank(splitk.problem, sp)  # the test can tell them apart


def test_predict_serves_the_ranker_for_a_matmul_and_names_it(splitk):
    from abductune.heuristics import ranker_shipped as rs
    from abductune.theory.store import predict, predictions

    sp, hold = splitk.space(), Holdout(splitk.problem, "kernel")
    p = predict(splitk.problem, sp, exclude=hold)
    assert p is not None and p.source == "ranker" and p.rule is None
    assert p.config == rs.shipped_ranker(hold)[0].rank(splitk.problem, sp)[0]  # the refit's pick, not the full one's
    assert trouble(splitk.problem, sp, p.config) is None
    assert "ranker" in p.describe() and "refitted without zoo_mm_splitk_fp16" in p.describe()
    theory = predict(splitk.problem, sp, exclude=hold, ranker=False)
    assert theory is None or theory.source != "ranker"
    assert all(q.source != "ranker" for q in predictions(splitk.problem, sp, exclude=hold))  # tune's theory seeds
    rows = _zoo("zoo_rmsnorm_bf16", "rows3000_cols14336")  # a class where the theory won: it stays
    q = predict(rows.problem, rows.space(), exclude=Holdout(rows.problem, "kernel"))
    assert q is not None and q.source == "theory"
    # attention: a learned source serves only where it beat the attention kernels' own defaults
    # on the other attention kernels (theory/store/choice.py), else the default, saying why; the
    # packaged evidence decides which (since session 23 it holds FlagGems' attention, whose
    # default fails on one shape), and predict follows it with and without a kernel holdout
    from abductune.problem import holdouts
    from abductune.theory.store import choice
    from abductune.theory.store.predict import chain

    att = _zoo("zoo_attn_fwd_bf16", "batch8_heads16_seq512_head_dim64")
    for hold in (None, Holdout(att.problem, "kernel")):
        picked = choice.order_for("attention", holdouts(hold), chain("attention"))
        a = predict(att.problem, att.space(), exclude=hold)
        assert a is not None and picked is not None
        if picked.sources:
            assert a.source in picked.sources
        else:
            assert a.source == "default" and a.config == att.space().default()
            assert "own defaults" in a.describe() or "no other attention kernel is left" in a.describe()


def test_cli_predict_says_which_source_answered():
    from click.testing import CliRunner

    from abductune.cli import main

    r = CliRunner().invoke(main, ["predict", "zoo:zoo_mm_splitk_fp16", "--holdout", "kernel"])
    assert r.exit_code == 0, r.output
    lines = [ln for ln in r.output.splitlines() if "x optimum" in ln]
    assert len(lines) == len(zoo_datasets("zoo_mm_splitk_fp16")) and all(ln.endswith("[ranker]") for ln in lines)
    assert f"answered by: ranker {len(lines)}" in r.output
    r = CliRunner().invoke(main, ["predict", "zoo:zoo_mm_splitk_fp16", "--no-ranker"])
    assert r.exit_code == 0 and "[ranker]" not in r.output
    r = CliRunner().invoke(main, ["predict", "--kernel", "matmul_fp16", "--shapes", "M=16,N=4096,K=4096",
                                  "--no-check"])
    assert r.exit_code == 0 and "[ranker]" in r.output and "because ranker: rank 1 of" in r.output


def test_seeds_include_the_ranker_refitted_and_feasible(splitk, monkeypatch):
    from abductune.cli.replay import _replay_seeds
    from abductune.heuristics import ranker_shipped as rs
    from abductune.heuristics.seeds import RANKER_ENV, RANKER_SEEDS, ranker_seeds, seed_configs

    sp, hold = splitk.space(), Holdout(splitk.problem, "kernel")
    monkeypatch.delenv(RANKER_ENV, raising=False)  # off by default: the seeds are asked for
    assert not any(f["source"] == "ranker" for f in seed_configs(splitk.problem, sp, exclude=hold).fired)
    assert ranker_seeds(splitk.problem, sp) == []
    monkeypatch.setenv(RANKER_ENV, "1")
    rep = seed_configs(splitk.problem, sp, exclude=hold)
    assert rep.fired == seed_configs(splitk.problem, sp, exclude=hold, ranker=True).fired
    mine = [f for f in rep.fired if f["source"] == "ranker"]
    loko = rs.shipped_ranker(hold)[0].rank(splitk.problem, sp)[:RANKER_SEEDS]
    assert [f["config"] for f in mine] == loko and [f["rank"] for f in mine] == [1, 2, 3, 4]
    assert all("refitted without zoo_mm_splitk_fp16" in f["reason"] for f in mine)
    assert all(trouble(splitk.problem, sp, c) is None for c in rep.configs)
    assert [f["source"] for f in rep.fired].index("ranker") < [f["source"] for f in rep.fired].index("registry")
    # replay --seeds heuristics --holdout kernel: the refit's configs, never the full model's
    seeds = _replay_seeds(splitk, "kernel")
    ranked = [s.config for s in seeds if s.source.startswith("ranker:")]
    assert ranked and all(c in loko for c in ranked)
    full_order = rs.shipped_ranker()[0].rank(splitk.problem, sp)
    full = full_order[:RANKER_SEEDS]
    assert full_order != rs.shipped_ranker(hold)[0].rank(splitk.problem, sp)  # the two can be told apart
    # off for another backend, without the registry, and where ranker=False
    assert not any(f["source"] == "ranker" for f in seed_configs(splitk.problem, sp, backend="cuda").fired)
    assert not any(f["source"] == "ranker" for f in seed_configs(splitk.problem, sp, use_registry=False).fired)
    assert not any(f["source"] == "ranker" for f in seed_configs(splitk.problem, sp, ranker=False).fired)
    two = ranker_seeds(splitk.problem, sp, 2)  # the decorator's: the full model (nothing held out)
    assert [c for c, _ in two] == full[:2] and [s for _, s in two] == ["ranker:ranker#1", "ranker:ranker#2"]


def test_ranker_seeds_say_why_not_where_they_cannot_rank(monkeypatch):
    from abductune.heuristics import ranker_shipped as rs
    from abductune.heuristics.seeds import seed_configs

    big = Space([Pow2("BLOCK_M", 16, 256), Pow2("BLOCK_N", 16, 256), Pow2("BLOCK_K", 16, 256),
                 Choice("GROUP_M", list(range(1, 11))), Choice("num_warps", [1, 2, 4, 8, 16]),
                 Choice("num_stages", [1, 2, 3, 4, 5])])
    p = synthetic("synth_a", SHAPES[2]).problem
    assert big.cardinality > rs.RANK_MAX and rs.why_not(p, big) is None  # the space alone is not the cost
    monkeypatch.setattr(rs, "RANK_MAX", 50)  # what the resource model accepts is: here more than 50
    (f,) = [f for f in seed_configs(p, big, ranker=True).fired if f["source"] == "ranker"]
    assert f["status"] == "ineligible" and "fit the resource model, more than the 50" in f["reason"]
    monkeypatch.setattr(rs, "ENUMERATE_MAX", 1000)
    assert "more than the 1000 it reads" in rs.why_not(p, big)
    blind = Problem("x", "matmul", {"M": 64, "N": 64, "K": 64}, dict(FP16))  # no hardware
    (f,) = [f for f in seed_configs(blind, mm_space(NAMINGS["synth_a"]), ranker=True).fired
            if f["source"] == "ranker"]
    assert f["status"] == "ineligible" and "hardware unknown" in f["reason"]
    from abductune.theory.store import predict

    assert predict(blind, mm_space(NAMINGS["synth_a"])) is None or predict(blind, mm_space(
        NAMINGS["synth_a"])).source != "ranker"


def test_the_decorators_ranker_bets_are_valid_configs_of_a_users_list(monkeypatch):
    """What `Autotuner._tune` adds after its theory and observed bets when asked for
    (ABDUCTUNE_RANKER_SEEDS=1): configs of the key's space, roles read from the user's names."""
    from abductune.autotune import space_from_configs
    from abductune.heuristics.seeds import RANKER_ENV, ranker_seeds

    configs = [{"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8, "num_warps": w,
                "num_stages": s}
               for m, n, k, s, w in [(128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4),
                                     (64, 128, 32, 4, 4), (32, 64, 32, 5, 2), (16, 64, 64, 4, 4)]]
    space = space_from_configs(configs, "user_matmul")
    p = Problem("user_matmul", "matmul", {"M": 4096, "N": 4096, "K": 4096}, dict(FP16), flops=2.0 * 4096 ** 3,
                min_bytes=6.0 * 4096 ** 2, hardware=H100)
    monkeypatch.delenv(RANKER_ENV, raising=False)
    assert ranker_seeds(p, space) == []
    monkeypatch.setenv(RANKER_ENV, "1")
    got = ranker_seeds(p, space)
    assert [s for _, s in got] == [f"ranker:ranker#{i}" for i in range(1, 5)]
    assert all(space.is_valid(c) and trouble(p, space, c) is None for c, _ in got)
    assert len({space.key(c) for c, _ in got}) == 4


def test_a_space_without_a_tile_its_class_is_sized_by_is_neither_ranked_nor_learned_from():
    """A matmul whose M tile the kernel fixes inside (Liger's fused MoE GEMMs): the features
    would read its N tile as the whole output tile, so the ranker neither ranks nor learns it."""
    from abductune.heuristics import ranker_shipped as rs
    from abductune.heuristics.features import usable

    p = Problem("no_m_fp16", "matmul", {"M": 4096, "N": 2048, "K": 1408}, FP16, flops=2.0 * 4096 * 2048 * 1408,
                min_bytes=2.0 * (4096 * 1408 + 1408 * 2048 + 4096 * 2048), hardware=H100)
    sp = Space([Pow2("BLOCK_N", 32, 256, default=64), Pow2("BLOCK_K", 16, 128, default=32),
                Choice("num_warps", [4, 8], default=4), Choice("num_stages", [2, 3], default=2)])
    why = usable(p, sp)
    assert why is not None and "covers M" in why
    with pytest.raises(AbductuneError, match="covers M"):
        rs.rank(p, sp)
    cfgs = list(sp.valid_configs())
    obs = Observation("s", p, sp, {sp.key(c): 1.0 + i for i, c in enumerate(cfgs)})
    assert shape_data(obs) is None
    # nor did the shipped file learn from such a kernel of the zoo
    from abductune.theory.store import gaps

    with_gap = {o.kernel for o in observations_from_datasets(list(zoo_datasets()))
                if gaps.space_gap(o.problem, o.space) is not None}
    assert not with_gap & set(rs.load().kernels)


def test_ties_go_to_the_kernels_default_for_what_the_features_cannot_see():
    """EVICT has no role, so no feature reads it: configs differing only there tie exactly, and
    the one with the space's default value comes first (the author's choice), whatever the order
    the space lists them in."""
    from abductune.heuristics import ranker_shipped as rs

    p = Problem("tie_fp16", "matmul", {"M": 2048, "N": 2048, "K": 2048}, FP16, flops=2.0 * 2048 ** 3,
                min_bytes=2.0 * 3 * 2048 ** 2, hardware=H100)
    for default in (0, 2):
        sp = Space([Pow2("BLOCK_M", 64, 128, default=128), Pow2("BLOCK_N", 64, 128, default=128),
                    Pow2("BLOCK_K", 32, 64, default=64), Choice("num_warps", [4, 8], default=4),
                    Choice("num_stages", [2, 3], default=3), Choice("EVICT", [0, 1, 2], default=default)])
        assert sp.by_role("tile:M") is not None and sp["EVICT"].role in (None, "")
        ranked = rs.load().ranker.rank(p, sp)
        assert ranked[0]["EVICT"] == default
        # every group of configs alike but for EVICT is ranked together, its default first
        firsts = {}
        for c in ranked:
            firsts.setdefault(tuple((k, v) for k, v in sorted(c.items()) if k != "EVICT"), c["EVICT"])
        assert set(firsts.values()) == {default}
    from abductune.heuristics.ranker import off_default, tie_order

    assert off_default({"a": 1, "b": 2}, {"a": 1, "b": 3}) == 1 and off_default({"a": 1}, None) == 0
    assert list(tie_order(np.array([0.5, 0.1, 0.1]), np.array([0.0, 2.0, 1.0]))) == [2, 1, 0]
    assert list(tie_order(np.array([0.5, 0.1, 0.1]), None)) == [1, 2, 0]


# ----------------------------------------------------------------------------- session 18: objective, K-row bytes

def _landscape(kernel: str, shift: int):
    """One shape of a 1-D space (features x, x^2) whose optimum sits inside at x = 8 + shift:
    steep (and clipped) below it, gentle above it."""
    import math

    from abductune.heuristics.ranker import Shape

    x = np.arange(0, 13, dtype=float)
    opt = 8 + shift
    logr = np.where(x < opt, np.minimum(math.log(3), 0.25 * (opt - x)), 0.03 * (x - opt))
    return Shape(f"s{shift}", kernel, "gemm", np.stack([x, x ** 2], 1), np.minimum(logr, CLIP), np.zeros(2),
                 logr=logr, ok=np.ones(13, bool), off_default=np.zeros(13))


def test_the_top_weighted_objective_orders_the_top_where_a_uniform_fit_picks_the_corner():
    """A least-squares fit over every config learns the steep, clipped side of the landscape and
    picks the space's far corner; weighting configs by their nearness to the optimum (tau of
    `TAUS`) spends the fit on the top, and picks nearer the optimum, with every clip."""
    import math

    from abductune.heuristics.ranker import ShapeStats, _fit_linear, row_weights

    train = [_landscape(f"k{i}", s) for i, s in enumerate((-1, 0, 1))]
    new = _landscape("new", 0)
    stats = [ShapeStats.from_dict(ShapeStats.of(s).to_dict()) for s in train]  # through the file format
    picked = {}
    for tau in TAUS:
        for clip in CLIPS:
            m = _fit_linear(stats, np.ones(3), (clip, RIDGE, tau))
            picked[tau, clip] = math.exp(new.logr[int(np.argmin(m.scores(new.X, new.where)))])
    assert all(picked[TAUS[0], c] > 1.12 for c in CLIPS)  # uniform: the corner x = 12
    assert all(picked[TAUS[1], c] < 1.07 for c in CLIPS)  # top-weighted: x = 10
    w = row_weights(new, TAUS[1])
    assert w.sum() == pytest.approx(1.0) and w[8] == w.max() and w[0] < w[12] < w[8]
    assert np.allclose(row_weights(new, TAUS[0]), 1 / 13)


def test_k_row_bytes_features_judge_a_k_slice_in_bytes():
    """@tile:K times each operand's element size against a 128-byte row: 64 bf16 elements and
    128 fp8 elements both fill it; a space without a K tile gets 0 (it does not rank)."""
    from abductune.hardware import lookup
    from abductune.heuristics.features import NAMES, config_features
    from abductune.problem import Problem
    from abductune.space import Param, Space

    sp = Space([Param("BM", [64, 128], role="tile:M"), Param("BN", [64, 128], role="tile:N"),
                Param("BK", [32, 64, 128], role="tile:K"), Param("num_warps", [4, 8], role="warps"),
                Param("num_stages", [3, 4], role="stages")])
    hw = lookup("H100-SXM")

    def feats(dtypes, bk):
        p = Problem("mm", "matmul", {"M": 4096, "N": 4096, "K": 4096}, dtypes=dtypes, hardware=hw)
        f = dict(zip(NAMES, config_features(p, sp, {"BM": 128, "BN": 128, "BK": bk, "num_warps": 8, "num_stages": 3})))
        return f["k_bytes_a"], f["k_bytes_b"], f["k_bytes_a_off"], f["k_bytes_b_off"]

    assert feats({"a": "bfloat16", "b": "bfloat16", "c": "bfloat16"}, 64) == (0.0, 0.0, 0.0, 0.0)
    assert feats({"a": "fp8", "b": "fp8", "c": "bfloat16"}, 128) == (0.0, 0.0, 0.0, 0.0)
    assert feats({"a": "bfloat16", "b": "bfloat16", "c": "bfloat16"}, 32) == (-1.0, -1.0, 1.0, 1.0)
    assert feats({"a": "fp8", "b": "fp8", "c": "bfloat16"}, 64) == (-1.0, -1.0, 1.0, 1.0)
    no_k = Space([Param("BLOCK", [256, 1024], role="tile:R"), Param("num_warps", [4, 8], role="warps")])
    rows = Problem("sm", "row_reduction", {"rows": 4096, "cols": 4096}, dtypes={"x": "float16"}, hardware=hw)
    f = dict(zip(NAMES, config_features(rows, no_k, {"BLOCK": 1024, "num_warps": 4})))
    assert f["k_bytes_a"] == f["k_bytes_a_off"] == f["regime*k_bytes_a"] == 0.0


def test_row_whole_counts_only_where_the_kernel_has_a_path_without_the_row_loop():
    """A tile that covers the row holds it whole only in a kernel with a path that does not
    loop over it (told facts `whole` or `either`); in a kernel whose every path walks the row in
    tile steps, the same tile is one trip of that loop, and `row_whole` is 0. Unknown facts keep
    the tile's cover as before."""
    from abductune import kernel_facts
    from abductune.hardware import lookup
    from abductune.heuristics.features import NAMES, config_features, feature_matrix
    from abductune.space import Param, Space

    sp = Space([Param("BLOCK_M", [1, 4], role="tile:X"), Param("BLOCK_N", [1024, 4096], role="tile:R"),
                Param("num_warps", [4, 8], role="warps")])
    hw = lookup("H100-SXM")
    covers, short = {"BLOCK_M": 1, "BLOCK_N": 4096, "num_warps": 4}, {"BLOCK_M": 1, "BLOCK_N": 1024, "num_warps": 4}
    i = NAMES.index("row_whole")
    got = {}
    for facts in ("whole", "either", "loop", None):
        kernel = f"row_whole_probe_{facts}"
        if facts:
            kernel_facts.tell(kernel, {"BLOCK_M": "whole", "BLOCK_N": facts})
        try:
            p = Problem(kernel, "row_reduction", {"rows": 4096, "cols": 4096}, dtypes={"x": "bfloat16"}, hardware=hw)
            one = [config_features(p, sp, c)[i] for c in (covers, short)]
            assert list(feature_matrix(p, sp, [covers, short])[:, i]) == one  # per-problem facts read once, same answer
            got[facts] = one
        finally:
            kernel_facts.forget(kernel)
    assert got == {"whole": [1.0, 0.0], "either": [1.0, 0.0], "loop": [0.0, 0.0], None: [1.0, 0.0]}
