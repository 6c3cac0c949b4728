"""predict serves its learned sources only where they beat the kernels' own defaults on the other
kernels of the class, judged by nested leave-one-kernel-out (theory/store/choice.py, choice_build.py),
and says so where it serves the default instead."""
from __future__ import annotations

import json
import math

from abductune.datasets.bundled import bundled_datasets
from abductune.datasets.format import read_dataset
from abductune.datasets.zoo import zoo_datasets, zoo_kernels
from abductune.problem import Holdout, Problem
from abductune.theory.store import choice, choice_build, predict, predictions
from abductune.theory.store.predict import UntrustedPrediction, chain, holdouts

CHAIN = ("ranker", "theory")


def entry(ranker, theory, default):
    return {"shapes": [f"s{i}" for i in range(len(default))],
            "ratios": {"ranker": list(ranker), "theory": list(theory), "default": list(default)}}


def evidence(tmp_path, kernels, all_, without=None, name="sources.json"):
    d = {"command": choice.COMMAND, "data": ["zoo"], "learned": list(choice.LEARNED),
         "kernels": {k: {"class": c, "source_hash": h} for k, (c, h) in kernels.items()},
         "all": all_, "without": without or {}}
    p = tmp_path / name
    p.write_text(json.dumps(d))
    return p


def holdout(kernel, source_hash=""):
    return Holdout(Problem(kernel, "matmul", {"M": 1}, {}, source_hash=source_hash), "kernel")


def test_the_chain_serves_only_where_it_beat_the_defaults(tmp_path):
    ks = {"mm_a_fp16": ("matmul", "a"), "mm_b_fp16": ("matmul", "b")}
    won = evidence(tmp_path, ks, {"mm_a_fp16": entry([1.1, 1.0], [1.5, 1.5], [1.3, 1.2]),
                                  "mm_b_fp16": entry([1.0], [2.0], [1.4])}, name="won.json")
    c = choice.order_for("matmul", (), CHAIN, path=won)
    assert c.sources == CHAIN and c.kernels == ("mm_a_fp16", "mm_b_fp16")
    # each kernel counts once: exp(mean(mean(log 1.1, log 1.0), log 1.0))
    assert math.isclose(c.score["ranker > theory"], math.exp(0.5 * (0.5 * math.log(1.1))), rel_tol=1e-9)
    assert "beat the kernels' own defaults" in c.said()[0] and "2 other matmul kernels" in c.said()[0]
    lost = evidence(tmp_path, ks, {"mm_a_fp16": entry([1.5, 1.5], [None, None], [1.1, 1.0]),
                                   "mm_b_fp16": entry([1.2], [None], [1.2])}, name="lost.json")
    c = choice.order_for("matmul", (), CHAIN, path=lost)
    assert c.sources == () and "did not beat" in c.note()
    assert "(1.122x)" in c.note()  # the defaults: exp(mean(mean(log 1.1, log 1.0), log 1.2))
    # a source with no answer falls to the next, then to the default: a tie is the default's
    tie = evidence(tmp_path, ks, {"mm_a_fp16": entry([None, None], [None, 1.0], [1.1, 1.0]),
                                  "mm_b_fp16": entry([1.2], [9.0], [1.2])}, name="tie.json")
    assert choice.served(CHAIN, json.loads(tie.read_text())["all"]["mm_a_fp16"]["ratios"]) == [1.1, 1.0]
    assert choice.order_for("matmul", (), CHAIN, path=tie).sources == ()
    # a lead inside the noise band (`TIE_MARGIN`, 0.5%) is a tie too: 0.3% ahead serves the default,
    # 1% ahead the chain
    for lead, served in ((1.003, ()), (1.01, CHAIN)):
        close = evidence(tmp_path, ks, {"mm_a_fp16": entry([1.0], [None], [lead]),
                                        "mm_b_fp16": entry([1.0], [None], [lead])}, name=f"close{lead}.json")
        assert choice.order_for("matmul", (), CHAIN, path=close).sources == served
    assert choice.order_for("attention", (), CHAIN, path=tie) is None  # a class it does not know
    assert choice.order_for("matmul", (), CHAIN, path=tmp_path / "absent.json") is None


def test_one_kernel_with_a_poor_default_cannot_carry_the_choice_alone(tmp_path):
    # session 25: one kernel whose own default is 2.9x its optimum put the learned chain ahead on
    # the mean while it lost on the others; the chain must also win on more kernels than it loses
    ks = {f"ew_{c}": ("elementwise", c) for c in "abc"}
    carried = evidence(tmp_path, ks, {"ew_a": entry([2.0], [None], [2.9]), "ew_b": entry([1.06], [None], [1.02]),
                                      "ew_c": entry([1.05], [None], [1.01])}, name="carried.json")
    c = choice.order_for("elementwise", (), CHAIN, path=carried)
    assert c.score["ranker > theory"] < c.score["default"] / 1.005  # ahead on the mean ...
    assert c.sources == ()  # ... but behind on two of three kernels: the default is served
    # and the note says that, not that the chain did not beat the defaults
    assert c.won_lost == (1, 2) and "did not beat" not in c.note()
    assert "on the mean over 3 other elementwise kernels" in c.note() and "on 1 of them and lost on 2" in c.note()
    assert choice.ranker_trusted("elementwise", (), path=carried) is False
    # ahead on two of three, the same poor default among them: the chain is served
    most = evidence(tmp_path, ks, {"ew_a": entry([2.0], [None], [2.9]), "ew_b": entry([1.00], [None], [1.02]),
                                   "ew_c": entry([1.05], [None], [1.01])}, name="most.json")
    assert choice.order_for("elementwise", (), CHAIN, path=most).sources == CHAIN
    assert choice.ranker_trusted("elementwise", (), path=most) is True


def test_a_kernel_holdout_is_judged_on_answers_learned_without_it_and_its_group(tmp_path):
    """Holding out mm_a_fp16 takes the "without" entry (answers learned without it) and leaves
    out mm_a_bf16 (the same kernel up to its dtype); a new kernel gets every kernel's answers."""
    ks = {"mm_a_fp16": ("matmul", "a"), "mm_a_bf16": ("matmul", "a2"), "mm_b_fp16": ("matmul", "b"),
          "mm_c_fp16": ("matmul", "c")}
    good, bad = entry([1.0], [1.0], [1.5]), entry([2.0], [2.0], [1.0])
    p = evidence(tmp_path, ks, {"mm_a_fp16": good, "mm_a_bf16": good, "mm_b_fp16": good, "mm_c_fp16": good},
                 {"mm_a_fp16": {"mm_b_fp16": bad, "mm_c_fp16": bad},
                  "mm_a_bf16": {"mm_b_fp16": bad, "mm_c_fp16": bad},
                  "mm_b_fp16": {"mm_a_fp16": good, "mm_a_bf16": good, "mm_c_fp16": good},
                  "mm_c_fp16": {"mm_a_fp16": good, "mm_a_bf16": good, "mm_b_fp16": bad}})
    held = choice.order_for("matmul", (holdout("mm_a_fp16"),), CHAIN, path=p)
    assert held.kernels == ("mm_b_fp16", "mm_c_fp16") and held.sources == ()
    fresh = choice.order_for("matmul", (holdout("mm_new_fp16"),), CHAIN, path=p)
    assert len(fresh.kernels) == 4 and fresh.sources == CHAIN
    # a shape holdout (in-sample) judges on every kernel's answers learned without itself
    assert choice.order_for("matmul", (Holdout(holdout("mm_a_fp16").problem, "shape"),), CHAIN,
                            path=p).sources == CHAIN
    # by source hash too: another name, the same source as mm_c_fp16 takes its "without" entry
    renamed = choice.order_for("matmul", (holdout("renamed", "c"),), CHAIN, path=p)
    assert renamed.kernels == ("mm_a_bf16", "mm_a_fp16", "mm_b_fp16") and renamed.sources == CHAIN
    assert renamed.score["ranker > theory"] < renamed.score["default"]


def test_no_other_kernel_of_the_class_left_means_nothing_is_trusted(tmp_path):
    p = evidence(tmp_path, {"attn_fwd_bf16": ("attention", "x"), "attn_causal_bf16": ("attention", "x")},
                 {"attn_fwd_bf16": entry([1.0], [None], [1.5]), "attn_causal_bf16": entry([1.0], [None], [1.5])},
                 {"attn_fwd_bf16": {}, "attn_causal_bf16": {}})
    c = choice.order_for("attention", (holdout("attn_fwd_bf16", "x"),), ("theory", "ranker"), path=p)
    assert c.sources == () and c.kernels == () and "no other attention kernel is left" in c.note()


def test_predict_says_why_it_serves_the_default_and_why_a_source():
    # a class whose learned sources lose to the defaults by far on the others (fla's chunked
    # recurrences, class "other": about 2x against 1.3x), so a refit with more kernels keeps it
    fla = read_dataset(zoo_datasets("fla_chunk_h_bf16")[0])
    got = predict(fla.problem, fla.space(), exclude=Holdout(fla.problem, "kernel"),
                  default=fla.meta.get("default_config"))
    assert isinstance(got, UntrustedPrediction) and got.source == "default" and got.confidence == 0.0
    assert got.config == fla.meta.get("default_config")
    assert "no learned source is trusted" in got.describe() and "other other kernels" in got.describe()
    mm = read_dataset(next(p for p in zoo_datasets("zoo_mm_tutorial_bf16") if "M32_" in p.name))
    q = predict(mm.problem, mm.space(), exclude=Holdout(mm.problem, "kernel"))
    assert q.source == "ranker" and "beat the kernels' own defaults" in q.describe()
    assert chain("matmul") == ("ranker", "theory") and chain("row_reduction") == ("theory", "ranker")


def test_predictions_leave_out_every_holdout_given():
    """Two holdouts (what the evidence needs: the kernel a choice is for and the one judged):
    no rule served was learned from either."""
    sm = read_dataset(bundled_datasets(kernel="softmax_fp16")[0])
    rm = read_dataset(bundled_datasets(kernel="rmsnorm_fp16")[0])
    both = [Holdout(sm.problem, "kernel"), Holdout(rm.problem, "kernel")]
    assert holdouts(both) == tuple(both) and holdouts(None) == () and holdouts(sm.problem)[0].level == "shape"
    one = predictions(sm.problem, sm.space(), exclude=both[0])
    two = predictions(sm.problem, sm.space(), exclude=both)
    for p in two:
        if p.rule is not None and p.source == "theory":
            assert not p.rule.learned_from_problem(both[0]) and not p.rule.learned_from_problem(both[1])
    learned = {o.get("kernel") for p in one if p.rule is not None and p.source == "theory" for o in p.rule.learned_from}
    assert "rmsnorm_fp16" in learned  # the second holdout is what took it out


def test_the_packaged_evidence_knows_every_zoo_and_bundled_kernel():
    d = choice.load()
    assert d is not None and d["data"] == list(choice.DATA)
    stale = f"stale: regenerate it with `{choice.COMMAND}`"
    bundled = {read_dataset(p).problem.kernel for p in bundled_datasets()}
    assert set(d["kernels"]) == set(zoo_kernels()) | bundled, stale
    for k, e in d["all"].items():
        assert set(e["ratios"]) == {*choice.LEARNED, "default"}
        n = len(e["shapes"])
        assert n >= 1 and all(len(v) == n for v in e["ratios"].values())
        assert all(x is None or x >= 1.0 for v in e["ratios"].values() for x in v)
        for j in d["without"][k]:  # judged without k: never k's own group
            assert not Holdout(Problem(k, "x", {}, {}, source_hash=d["kernels"][k]["source_hash"]), "kernel").covers(
                j, None, "", d["kernels"][j]["source_hash"])


def test_the_builder_scores_each_kernel_without_itself_and_without_each_other(tmp_path):
    got = choice_build.build(["zoo:zoo_swiglu_bf16", "zoo:zoo_rope_bf16"])
    assert set(got["kernels"]) == {"zoo_swiglu_bf16", "zoo_rope_bf16"}
    assert set(got["without"]["zoo_swiglu_bf16"]) == {"zoo_rope_bf16"}
    assert set(got["without"]["zoo_rope_bf16"]) == {"zoo_swiglu_bf16"}
    for k, e in got["all"].items():
        assert len(e["shapes"]) == len(zoo_datasets(k)) and all(x >= 1.0 for x in e["ratios"]["default"])
        assert any(x is not None for x in e["ratios"]["ranker"])  # the ranker reads these spaces
    p = tmp_path / "s.json"
    p.write_text(json.dumps(got))
    c = choice.order_for("elementwise", (), chain("elementwise"), path=p)
    assert c is not None and set(c.kernels) == set(got["kernels"])


def test_a_ranked_answer_that_leaves_most_sms_idle_gives_way_to_the_first_that_fills_them():
    """`heuristics.fill.filling_first`: where the ranker's first pick launches programs for fewer than
    half the SMs and a later ranked config launches one for every SM, that one is served first
    (its reason says why); a problem with less work than a launch costs, or no config that
    fills the GPU, keeps the ranker's order."""
    from abductune import kernels
    from abductune.hardware import lookup
    from abductune.theory.diagnose import grid_tiles
    from abductune.heuristics.fill import LAUNCH_FLOOR_S, UNDERFILL
    from abductune.heuristics.fill import filling_first as _filling_first

    spec = kernels.get("matmul_fp16")
    space = spec.space()
    base = {"BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3}
    big, mid, small = ({**base, "BLOCK_M": m, "BLOCK_N": n} for m, n in ((256, 128), (128, 64), (64, 64)))
    hw = lookup("H100-SXM")
    problem = spec.problem({"M": 512, "N": 512, "K": 65536}, hw)  # 35 GFLOP: far past a launch
    assert max(problem.roofline_seconds()) > LAUNCH_FLOOR_S
    progs = [grid_tiles(problem, space, c)[0] for c in (big, mid, small)]
    assert progs == [8, 32, 64] and progs[0] < UNDERFILL * hw.sms  # all short of 132 SMs
    assert _filling_first(problem, space, [big, mid, small]) == ([big, mid, small], ())  # none fills
    wide = spec.problem({"M": 1024, "N": 1024, "K": 32768}, hw)
    assert [grid_tiles(wide, space, c)[0] for c in (big, mid, small)] == [32, 128, 256]
    order, note = _filling_first(wide, space, [big, mid, small])
    assert order == [small, big, mid]  # 128 programs still leave SMs idle: the first past 132
    assert "launches 32 programs on 132 SMs" in note[0] and "256 programs, rank 3" in note[0]
    assert _filling_first(wide, space, [small, big]) == ([small, big], ())  # the first fills already
    tiny = spec.problem({"M": 1024, "N": 1024, "K": 64}, hw)  # about 1 us of work: a launch's time
    assert max(tiny.roofline_seconds()) < LAUNCH_FLOOR_S
    assert _filling_first(tiny, space, [big, mid, small]) == ([big, mid, small], ())
