"""The theory store: rules over roles learned from measured problems predict a config for a
held-back shape, transfer to another matmul kernel with a different space, round-trip
through JSON, and the CLI learns, predicts and explains."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from abductune.cli import main
from abductune.hardware import lookup
from abductune.heuristics.harvest import Observation
from abductune.problem import Problem
from abductune.space import Choice, Pow2, Space
from abductune.theory.store import (Form, TheoryBook, bundled_observations, instantiate, learn, packaged_book,
                                    predict, shape_id, warpgroup_repair)

H100 = lookup("H100-SXM")


@pytest.fixture(scope="module")
def matmul_obs():
    return [o for o in bundled_observations() if o.problem.kernel == "matmul_fp16"]


def test_held_back_shapes_get_good_predictions(matmul_obs):
    """Leave one shape out, learn from the rest, predict it: most shapes land near the optimum
    with no measurement, and clearly better than the space's default config."""
    ratios, defaults = [], []
    for o in matmul_obs[::3]:  # a third of them keeps the test quick
        book = learn(matmul_obs, exclude=o.problem, only=o.classification())
        assert not any(r.learned_from_problem(o.problem) for r in book)
        p = book.predict(o.problem, o.space)
        assert p is not None and o.space.is_valid(p.config)
        ratios.append(o.time_of(p.config) / o.optimum)
        defaults.append(o.default_time() / o.optimum)
    g = math.exp(sum(map(math.log, ratios)) / len(ratios))
    gd = math.exp(sum(map(math.log, defaults)) / len(defaults))
    assert g < gd and g <= 1.15, (ratios, defaults)
    assert sum(r <= 1.05 for r in ratios) >= len(ratios) // 2


def test_packaged_book_ships_held_out_rules_for_every_bundled_shape():
    book = packaged_book()
    obs = bundled_observations()
    assert len(book) > 0 and set(book.held_out) == {shape_id(o.problem) for o in obs}
    for o in obs:
        p = predict(o.problem, o.space, book=book, exclude=o.problem, ranker=False)
        assert p is not None and not p.rule.learned_from_problem(o.problem)


def _renamed(o: Observation) -> Observation:
    """The same matmul behind a different space: other names, fewer values, warps as a choice
    (the kernel's physical limits, its constraints, come along under the new names)."""
    import re

    names = {"BLOCK_M": "BM", "BLOCK_N": "BN", "BLOCK_K": "BK", "GROUP_M": "GM", "num_warps": "nw",
             "num_stages": "ns"}
    limits = [re.sub(r"[A-Za-z_]+", lambda m: names.get(m.group(0), m.group(0)), c)
              for c in o.space.to_dict()["constraints"]]
    space = Space([Pow2("BM", 16, 128, role="tile:M"), Pow2("BN", 32, 256, role="tile:N"),
                   Pow2("BK", 32, 128, role="tile:K"), Choice("GM", [1, 8], role="group"),
                   Choice("nw", [4, 8], role="warps"), Choice("ns", [3, 4, 5], role="stages")], limits)
    problem = Problem("my_matmul", "matmul", dict(o.problem.dims), dict(o.problem.dtypes), o.problem.flops,
                      o.problem.min_bytes, H100, "mine")
    times = {}
    for k, t in o.times.items():
        cfg = {names[n]: v for n, v in o.space.from_key(k).items()}
        if space.is_valid(cfg):
            times[space.key(cfg)] = t
    return Observation("my_" + o.name, problem, space, times, None)


def test_a_second_matmul_kernel_gets_a_useful_prediction(matmul_obs):
    """Rules learned on matmul_fp16 speak of roles, so they apply to a matmul of our own with
    other parameter names and domains."""
    book = learn(matmul_obs)
    ratios = []
    for o in matmul_obs:
        mine = _renamed(o)
        p = book.predict(mine.problem, mine.space)
        assert p is not None and mine.space.is_valid(p.config)
        assert set(p.config) == set(mine.space.names)
        t = mine.time_of(p.config)
        ratios.append(t / mine.optimum if t else 3.0)
    g = math.exp(sum(map(math.log, ratios)) / len(ratios))
    assert g <= 1.15, ratios


def test_forms_instantiate_by_role():
    space = Space([Pow2("BM", 16, 256, role="tile:M"), Pow2("BN", 16, 256, role="tile:N"),
                   Pow2("BK", 16, 128, role="tile:K"), Choice("nw", [4, 8], role="warps")])
    decode = Problem("mm", "matmul", {"M": 1, "N": 4096, "K": 4096}, {"a": "fp16"}, hardware=H100)
    cfg = instantiate({"tile:M": Form("fit"), "tile:N": Form("grid", 1.0), "tile:K": Form("const", 128),
                       "warps": Form("const", 4)}, decode, space)
    assert cfg["BM"] == 16  # covers M=1 as far as the space allows
    assert 4096 // cfg["BN"] in range(66, 264)  # about one program per SM (132 SMs)
    square = Problem("mm", "matmul", {"M": 1024, "N": 1024, "K": 16384}, {"a": "fp16"}, hardware=H100)
    par = {"tile:M": Form("par", (256, 1.0)), "tile:N": Form("par", (256, 1.0)), "tile:K": Form("const", 64)}
    cfg = instantiate(par, square, space)
    assert (1024 // cfg["BM"]) * (1024 // cfg["BN"]) >= 132  # shrunk until every SM has a program
    big = Problem("mm", "matmul", {"M": 8192, "N": 8192, "K": 8192}, {"a": "fp16"}, hardware=H100)
    assert instantiate(par, big, space)["BM"] == 256  # enough work: the tile stays big


def test_predictions_keep_the_warpgroup_mma_on_hopper():
    """A rule learned on big tiles shrinks a small square matmul to a 32-row tile with 2 warps;
    on Hopper that leaves wgmma (64 rows, 4 warps) for mma.sync, so the prediction is raised to
    a warpgroup tile. Where M has fewer rows, or the GPU has no warpgroup MMA, it stays."""
    space = Space([Pow2("BM", 16, 256, role="tile:M"), Pow2("BN", 16, 256, role="tile:N"),
                   Pow2("BK", 16, 128, role="tile:K"), Choice("nw", [2, 4, 8], role="warps")])
    small = {"BM": 32, "BN": 128, "BK": 128, "nw": 2}
    square = Problem("mm", "matmul", {"M": 768, "N": 768, "K": 768}, {"a": "fp16"}, hardware=H100)
    fixed = warpgroup_repair(square, space, small)
    assert fixed is not None and fixed["BM"] == 64 and fixed["nw"] == 4 and fixed["BN"] == 128
    wide = warpgroup_repair(square, space, {"BM": 128, "BN": 128, "BK": 64, "nw": 2})
    assert wide is not None and wide["BM"] == 128 and wide["nw"] == 4  # enough rows, too few warps
    decode = Problem("mm", "matmul", {"M": 16, "N": 4096, "K": 4096}, {"a": "fp16"}, hardware=H100)
    assert warpgroup_repair(decode, space, {"BM": 16, "BN": 64, "BK": 128, "nw": 2}) is None
    ampere = Problem("mm", "matmul", {"M": 768, "N": 768, "K": 768}, {"a": "fp16"}, hardware=lookup("A100-SXM"))
    assert warpgroup_repair(ampere, space, small) is None
    assert lookup("A100-SXM").warpgroup_mma is None and H100.warpgroup_mma == (4, 64)
    # the theory store's prediction for that square shape carries the repair: the rule alone
    # gives a 16-row tile with 2 warps in this space
    p = predict(square, space, book=packaged_book(), ranker=False)
    assert p is not None and instantiate(p.rule.forms, square, space)["BM"] < 64
    assert p.config["BM"] >= 64 and p.config["nw"] % 4 == 0


def test_warps_per_thread_follow_the_tile():
    """A `per` form sizes warps to the tile: e tile elements per thread, so a row kernel whose
    tile shrank to 1024 elements does not get the 16 warps a 16384-element tile wanted."""
    space = Space([Pow2("BLOCK", 128, 16384, role="tile:R"), Choice("R", [1, 2, 4], role="tile:X"),
                   Pow2("nw", 1, 16, role="warps")])
    forms = {"tile:R": Form("fit"), "tile:X": Form("const", 1), "warps": Form("per", 32)}
    wide = Problem("sm", "row_reduction", {"rows": 4096, "cols": 16384}, {"x": "fp16"}, hardware=H100)
    narrow = Problem("sm", "row_reduction", {"rows": 4096, "cols": 1024}, {"x": "fp16"}, hardware=H100)
    assert instantiate(forms, wide, space)["nw"] == 16  # 16384 / (32 * 32)
    assert instantiate(forms, narrow, space)["nw"] == 1  # 1024 / (32 * 32)
    assert "per thread" in Form("per", 32).describe("warps")


def test_a_rule_that_covers_the_shape_beats_one_that_extrapolates():
    """Within one hardware level the regime rule comes first, unless it would extrapolate
    further than the broader rule: a regime learned on big shapes says little about a small one."""
    from abductune.theory.store import TheoryRule

    space = Space([Pow2("BM", 16, 256, role="tile:M"), Pow2("BN", 16, 256, role="tile:N"),
                   Pow2("BK", 16, 128, role="tile:K")])
    small = Problem("mm", "matmul", {"M": 1024, "N": 1024, "K": 1024}, {"a": "fp16"}, hardware=H100)
    from abductune.classify import classify

    regime = classify(small, space).fallback
    tile = lambda v: {"tile:M": Form("const", v), "tile:N": Form("const", v), "tile:K": Form("const", 32)}  # noqa: E731
    specific = TheoryRule("H100-SXM", "matmul", regime, "fp16", tile(256),
                          dims_range={"M": [8192, 16384], "N": [8192, 16384], "K": [1024, 4096]})
    broad = TheoryRule("H100-SXM", "matmul", "all", "fp16", tile(64),
                       dims_range={"M": [512, 16384], "N": [512, 16384], "K": [512, 4096]})
    p = TheoryBook([specific, broad]).predict(small, space)
    assert p is not None and p.rule is broad and p.config["BM"] == 64 and not p.extrapolates
    inside = Problem("mm", "matmul", {"M": 8192, "N": 8192, "K": 2048}, {"a": "fp16"}, hardware=H100)
    assert classify(inside, space).fallback == regime  # both cover it: the specific rule wins
    assert TheoryBook([specific, broad]).predict(inside, space).rule is specific
    # a rule for this very GPU beats a covering one learned on any GPU
    anywhere = TheoryRule("*", "matmul", "all", "fp16", tile(32),
                          dims_range={"M": [16, 65536], "N": [16, 65536], "K": [16, 65536]})
    assert TheoryBook([specific, anywhere]).predict(small, space).rule is specific


def test_extrapolating_a_dim_the_rule_does_not_read_matters_less():
    """A small-M rule (M tile fits M, N tile sized by the grid, constant K tile) learned at
    K = 4096 still applies at K = 14336: K only sets the loop length. Extrapolating M or N,
    which its forms read, by a factor of 4 hands the shape to the broader rule instead."""
    from abductune.theory.store import TheoryRule

    space = Space([Pow2("BM", 16, 256, role="tile:M"), Pow2("BN", 16, 256, role="tile:N"),
                   Pow2("BK", 16, 128, role="tile:K")])
    from abductune.classify import classify

    decode = Problem("mm", "matmul", {"M": 16, "N": 4096, "K": 14336}, {"a": "fp16"}, hardware=H100)
    regime = classify(decode, space).fallback
    forms = {"tile:M": Form("fit"), "tile:N": Form("grid", 0.5), "tile:K": Form("const", 128)}
    small = TheoryRule("H100-SXM", "matmul", regime, "fp16", forms,
                       dims_range={"M": [1, 64], "N": [4096, 14336], "K": [4096, 4096]})
    broad = TheoryRule("H100-SXM", "matmul", "all", "fp16", {**forms, "tile:K": Form("const", 64)},
                       dims_range={"M": [1, 16384], "N": [128, 16384], "K": [256, 16384]})
    p = TheoryBook([small, broad]).predict(decode, space)
    assert p.rule is small and p.extrapolates and any("K=14336" in r for r in p.reasons)
    narrow = Problem("mm", "matmul", {"M": 16, "N": 1024, "K": 4096}, {"a": "fp16"}, hardware=H100)
    assert classify(narrow, space).fallback == regime
    assert TheoryBook([small, broad]).predict(narrow, space).rule is broad  # N read, 2 octaves out


def test_constant_roles_give_way_to_the_tile_a_rule_sized():
    """A constant K tile and stage count learned beside small tiles may not fit in shared
    memory beside the tile a parallelism form chose: K and stages give way, not that tile."""
    space = Space([Pow2("BM", 16, 256, role="tile:M"), Pow2("BN", 16, 256, role="tile:N"),
                   Pow2("BK", 16, 128, role="tile:K"), Choice("ns", [2, 3, 4], role="stages")],
                  constraints=["ns * (BM * BK + BK * BN) * 2 <= 232448"])
    forms = {"tile:M": Form("par", (128, 0.8)), "tile:N": Form("par", (128, 0.8)), "tile:K": Form("const", 128),
             "stages": Form("const", 4)}
    big = Problem("mm", "matmul", {"M": 8192, "N": 8192, "K": 4096}, {"a": "fp16"}, hardware=H100)
    cfg = instantiate(forms, big, space)
    assert cfg["BM"] == 128 and cfg["BN"] == 128  # the sized tiles stay
    assert cfg["BK"] * cfg["ns"] < 128 * 4 and space.is_valid(cfg)  # the constants shrank to fit


def test_the_runner_up_rule_is_a_second_seed():
    """A tune's seeds: the best theory prediction, then the runner-up rule's config when it
    differs (a hedge against one rule extrapolating badly)."""
    from abductune.datasets.bundled import bundled_datasets
    from abductune.datasets.format import read_dataset
    from abductune.theory.store import predictions
    from abductune.tune import seed_list

    [path] = [p for p in bundled_datasets(kernel="matmul_fp16") if p.name.startswith("M1024_N1024_K16384.")]
    ds = read_dataset(path)
    space = ds.space()
    preds = predictions(ds.problem, space, exclude=ds.problem)
    assert len(preds) >= 2 and preds[0].config != preds[1].config
    seeds, fired = seed_list(ds.problem, space, space.default(), None, True, None, exclude=ds.problem)
    assert [s.config for s in seeds[:2]] == [dict(p.config) for p in preds[:2]]
    assert seeds[1].source.endswith(":runner-up") and any(f["name"] == "theory runner-up" for f in fired)


def test_book_round_trips_and_refuses_garbage(tmp_path: Path, matmul_obs):
    book = learn(matmul_obs[:4])
    path = book.save(tmp_path / "t.json")
    again = TheoryBook.load(path)
    assert again.to_dict() == book.to_dict() and len(again) == len(book)
    (tmp_path / "bad.json").write_text('{"format": "something"}')
    with pytest.raises(Exception, match="not an abductune theory file"):
        TheoryBook.load(tmp_path / "bad.json")


def test_prediction_says_when_it_extrapolates(matmul_obs):
    book = learn(matmul_obs)
    far = Problem("matmul_fp16", "matmul", {"M": 65536, "N": 65536, "K": 65536}, {"a": "fp16", "b": "fp16"},
                  hardware=H100)
    p = book.predict(far, matmul_obs[0].space)
    assert p is not None and p.extrapolates and any("outside" in r for r in p.reasons)
    a100 = Problem("matmul_fp16", "matmul", dict(matmul_obs[0].problem.dims), {"a": "fp16", "b": "fp16"},
                   hardware=lookup("A100-SXM"))
    q = book.predict(a100, matmul_obs[0].space)
    assert q is not None and q.level == "any" and q.confidence < p.rule.confidence


def test_cli_learn_predict_explain(tmp_path: Path):
    runner = CliRunner()
    out = tmp_path / "t.json"
    r = runner.invoke(main, ["learn", "bundled", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "rules from 27 problems" in r.output and out.exists()
    r = runner.invoke(main, ["predict", "--kernel", "matmul_fp16", "--shapes", "M=16,N=8192,K=4096",
                             "--theories", str(out), "--no-ranker"])
    assert r.exit_code == 0 and "BLOCK_M=16" in r.output and "because matmul/small_m" in r.output
    store = tmp_path / "s.sqlite"
    r = runner.invoke(main, ["tune", "--kernel", "softmax_fp16", "--shapes", "rows=16384,cols=1024",
                             "--budget", "6", "--store", str(store)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["explain", "1", "--store", str(store), "--plot", str(tmp_path / "p.png")])
    assert r.exit_code == 0, r.output
    assert "seed [theory:" in r.output and "winner #" in r.output and (tmp_path / "p.png").exists()
    r = runner.invoke(main, ["explain", "99", "--store", str(store)])
    assert r.exit_code == 2 and "has no run 99" in r.output


def test_predict_check_passes_over_a_spilling_prediction(monkeypatch):
    """`predict` compiles the prediction for sm_90 on the CPU by default: the "all" matmul
    rule's 64x256x64 tile with 4 warps spills at K=700, and the same tile over 8 warps does not;
    `--no-check` serves the rule's config as it is."""
    pytest.importorskip("triton")
    runner = CliRunner()
    r = runner.invoke(main, ["predict", "--kernel", "matmul_fp16", "--shapes", "M=200,N=5000,K=700", "--no-ranker"])
    assert r.exit_code == 0, r.output  # checked by default where Triton is installed
    lines = r.output.splitlines()
    passed = [ln for ln in lines if ln.strip().startswith("passed over")]
    assert passed and "num_warps=4" in passed[0] and "spills" in passed[0]
    answer = next(ln for ln in lines if ln.startswith("matmul_fp16 M=200") and "BLOCK_M=" in ln)
    assert "num_warps=8" in answer and any("checked: compiles for sm_90" in ln and "no spills" in ln for ln in lines)
    r = runner.invoke(main, ["predict", "--kernel", "matmul_fp16", "--shapes", "M=200,N=5000,K=700", "--no-check",
                             "--no-ranker"])
    assert r.exit_code == 0 and "passed over" not in r.output
    assert "num_warps=4" in next(ln for ln in r.output.splitlines() if ln.startswith("matmul_fp16 M=200"))
    # without triton, --check says what to install instead of failing deep inside
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "triton" else real(name, *a))
    r = runner.invoke(main, ["predict", "--kernel", "matmul_fp16", "--shapes", "M=200,N=5000,K=700", "--check"])
    assert r.exit_code != 0 and "Triton is not installed" in r.output
    # by default the prediction goes unchecked then, and says so
    r = runner.invoke(main, ["predict", "--kernel", "matmul_fp16", "--shapes", "M=200,N=5000,K=700", "--no-ranker"])
    assert r.exit_code == 0 and "predictions unchecked: Triton is not installed" in r.output
    assert "num_warps=4" in r.output
    r = runner.invoke(main, ["predict", "bundled", "--check"])
    assert r.exit_code != 0 and "use it with --kernel and --shapes" in r.output


def test_first_clean_adds_warps_to_a_spilling_config_then_tries_the_runner_up():
    """`theory.check.first_clean` with a stand-in compiler: a prediction that fails to compile
    is passed over for the next; one that spills is retried with more warps, and the first
    config that compiles cleanly is served with its rule's reasoning kept."""
    from abductune import kernels
    from abductune.hardware import lookup
    from abductune.theory.check import first_clean
    from abductune.theory.store import predictions

    spec = kernels.get("matmul_fp16")
    problem = spec.problem({"M": 200, "N": 5000, "K": 700}, lookup("H100-SXM"))
    import dataclasses

    [pred] = predictions(problem, spec.space())[:1]
    first = dict(pred.config)
    second = {**first, "BLOCK_N": 128, "num_warps": 4}  # a runner-up rule's config, made up
    preds = [pred, dataclasses.replace(pred, config=second)]
    seen: list[dict] = []

    def fake(_spec, cfg, _problem, arch):
        seen.append(dict(cfg))
        assert arch == "sm_90"
        ok = {"status": "ok", "error": "", "registers": 200, "spills": 0}
        if cfg == first:
            return {**ok, "status": "compile_error", "error": "out of resources"}
        if cfg["num_warps"] < 8:
            return {**ok, "spills": 1024}
        return ok

    heard: list[str] = []
    got = first_clean(spec, problem, preds, echo=heard.append, compile_fn=fake)
    assert seen[0] == first and seen[1] == second  # the failure is not retried with more warps
    assert got is not None and got.reasons == preds[1].reasons and got.config == {**second, "num_warps": 8}
    assert seen[2:] == [got.config]  # 4 warps spilled, 8 did not
    assert "out of resources" in heard[0] and "spills 1024 bytes" in heard[1] and "no spills" in heard[2]
    # where more warps still spill, a smaller K tile is tried (operands held in registers)
    def k_bound(_spec, cfg, _problem, _arch):
        seen.append(dict(cfg))
        return {"status": "ok", "error": "", "registers": 255, "spills": 0 if cfg["BLOCK_K"] <= 64 else 562}

    seen.clear()
    big_k = {**first, "BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 4}
    got = first_clean(spec, problem, [dataclasses.replace(pred, config=big_k)], compile_fn=k_bound)
    assert [c["num_warps"] for c in seen] == [4, 8, 4] and got.config == {**big_k, "BLOCK_K": 64}
    # a light spill (under HEAVY_SPILL_BYTES) is no reason to move: ptxas spills a few values off the hot loop
    from abductune.theory.check import HEAVY_SPILL_BYTES
    light = lambda *_a: {"status": "ok", "error": "", "registers": 255, "spills": HEAVY_SPILL_BYTES - 1}  # noqa: E731
    assert first_clean(spec, problem, preds, compile_fn=light) is preds[0]
    assert first_clean(spec, problem, preds, compile_fn=lambda *a: {"status": "compile_error", "error": "x",
                                                                   "registers": None, "spills": None}) is None


def test_first_clean_halves_the_accumulator_where_warps_and_the_k_tile_give_nothing():
    """At the space's most warps, a config that spills however small its K tile is retried with
    the larger output tile halved, once and then twice (`check.RELIEF_HALVINGS`): the zoo's
    split-K matmul at 512 x 5,000 x 3,000 spilled on every answer, all 128 x 256 tiles at 8
    warps, and was served the lightest spill at 3.2x its optimum."""
    import dataclasses

    from abductune import kernels
    from abductune.hardware import lookup
    from abductune.theory.check import RELIEF_HALVINGS, first_clean, relief
    from abductune.theory.store import predictions

    spec = kernels.get("matmul_fp16")
    space = spec.space()
    problem = spec.problem({"M": 512, "N": 5000, "K": 3000}, lookup("H100-SXM"))
    [pred] = predictions(problem, space)[:1]
    big = {**pred.config, "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8}
    assert space.is_valid(big) and space["num_warps"].step(8, +1) is None  # no more warps to give
    seen: list[dict] = []

    def acc_bound(_spec, cfg, _problem, _arch):  # spills while the accumulator passes 128 x 64
        seen.append(dict(cfg))
        heavy = cfg["BLOCK_M"] * cfg["BLOCK_N"] > 128 * 64
        return {"status": "ok", "error": "", "registers": 255, "spills": 1680 if heavy else 0}
    got = first_clean(spec, problem, [dataclasses.replace(pred, config=big)], compile_fn=acc_bound)
    # the K tile first (most alike), then 128 x 128, then 128 x 64: the larger tile each time
    assert [(c["BLOCK_N"], c["BLOCK_K"]) for c in seen] == [(256, 64), (256, 32), (128, 64), (64, 64)]
    assert got.config == {**big, "BLOCK_N": 64} and "BLOCK_N 256 -> 64" in got.repairs[-1]
    # halvings stop at RELIEF_HALVINGS: a quarter of the accumulator, then the next prediction
    tiles = [(c["BLOCK_M"], c["BLOCK_N"]) for c in relief(space, {**big, "BLOCK_M": 256})]
    assert tiles[-RELIEF_HALVINGS:] == [(256, 128), (128, 128)]  # N first on a tie, as resources.fit


def test_first_clean_serves_the_lightest_spill_where_every_config_spills():
    """Where every prediction and relief compiles but spills, the config with the fewest spill
    bytes is served (not nothing), and its repairs say so; one that fails to compile is never it."""
    import dataclasses

    from abductune import kernels
    from abductune.hardware import lookup
    from abductune.theory.check import first_clean
    from abductune.theory.store import predictions

    spec = kernels.get("matmul_fp16")
    problem = spec.problem({"M": 200, "N": 5000, "K": 700}, lookup("H100-SXM"))
    [pred] = predictions(problem, spec.space())[:1]
    first = dict(pred.config)
    second = {**first, "BLOCK_N": 64, "num_warps": 4}
    preds = [pred, dataclasses.replace(pred, config=second)]

    def fake(_spec, cfg, _problem, _arch):
        if cfg == first:  # fails outright: never served, however the others spill
            return {"status": "compile_error", "error": "x", "registers": None, "spills": None}
        return {"status": "ok", "error": "", "registers": 255, "spills": 300 if cfg == second else 700}
    heard: list[str] = []
    got = first_clean(spec, problem, preds, echo=heard.append, compile_fn=fake)
    assert got is not None and got.config == second
    assert "every config tried spills" in got.repairs[-1] and "300 bytes" in got.repairs[-1]
    assert "the lightest (300 bytes)" in heard[-1]


def test_first_clean_serves_the_kernels_own_config_spills_and_all_but_not_a_failure():
    """A prediction with source "default" (the kernel's own config, served where nothing learned
    was trusted) is served though it spills where no config near it compiles clean, moved to one
    that does otherwise; a default that does not compile is passed over."""
    import dataclasses

    from abductune import kernels
    from abductune.hardware import lookup
    from abductune.theory.check import first_clean
    from abductune.theory.store import predictions

    spec = kernels.get("matmul_fp16")
    problem = spec.problem({"M": 200, "N": 5000, "K": 700}, lookup("H100-SXM"))
    [pred] = predictions(problem, spec.space())[:1]
    own = dataclasses.replace(pred, source="default")
    spilling = lambda *_a: {"status": "ok", "error": "", "registers": 255, "spills": 512}  # noqa: E731
    heard: list[str] = []
    got = first_clean(spec, problem, [own], echo=heard.append, compile_fn=spilling)
    assert got is own and "served as its author chose it" in heard[-1]  # every neighbour spills as much
    # a neighbour that compiles clean takes its place (none spilling 256 bytes or more was within
    # 8% of its optimum); its repair names the move
    first = dict(own.config)
    clean_near = lambda _s, cfg, *_a: {"status": "ok", "error": "", "registers": 200,  # noqa: E731
                                       "spills": 512 if cfg == first else 0}
    got = first_clean(spec, problem, [own], compile_fn=clean_near)
    assert got.config != first and got.source == "default" and "the kernel's own values spills 512" in got.repairs[-1]
    # a learned prediction that spills as much is relieved (every relief spills too: the lightest)
    got = first_clean(spec, problem, [pred], compile_fn=spilling)
    assert got is not pred and "every config tried spills" in got.repairs[-1]
    failing = lambda *_a: {"status": "compile_error", "error": "x", "registers": None, "spills": None}  # noqa: E731
    assert first_clean(spec, problem, [own], compile_fn=failing) is None


def test_a_rule_says_it_was_never_confirmed_on_a_new_kernel_and_is_trusted_less():
    """Theories say where they apply (issue 27): a rule learned on the built-in matmul, asked
    about another kernel of the class, says so and lowers its confidence; the built-in
    kernel's own dtype variant is the same kernel."""
    from abductune.datasets.bundled import bundled_datasets
    from abductune.datasets.format import read_dataset
    from abductune.problem import Problem
    from abductune.theory.store import UNSEEN_KERNEL_FACTOR, packaged_book

    ds = read_dataset(bundled_datasets(kernel="matmul_fp16")[0])
    book = packaged_book()
    p = ds.problem
    own = book.predictions(Problem("matmul_bf16", p.kernel_class, p.dims, p.dtypes, p.flops, p.min_bytes,
                                   p.hardware), ds.space())[0]
    new = book.predictions(Problem("their_matmul", p.kernel_class, p.dims, p.dtypes, p.flops, p.min_bytes,
                                   p.hardware), ds.space())[0]
    assert not any("confirmed only on" in r for r in own.reasons)
    said = [r for r in new.reasons if "confirmed only on" in r]
    assert said and "their_matmul" in said[0] and new.extrapolates
    assert new.confidence == pytest.approx(own.confidence * UNSEEN_KERNEL_FACTOR, abs=2e-3)
