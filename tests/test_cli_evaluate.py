"""The methodology score against hand-computed cases, and the CLI end to end on recorded data."""
from __future__ import annotations

import itertools
import json
import math
import statistics

import pytest
from click.testing import CliRunner

from abductune.cli import main
from abductune.datasets.bundled import bundled_datasets
from abductune.evaluate import expected_best_random, methodology_score


def test_expected_best_random_matches_enumeration():
    # values 1..4, two draws without replacement: minima 1,1,1,2,2,3 -> 10/6
    assert expected_best_random([4.0, 2.0, 1.0, 3.0], 2) == pytest.approx(10 / 6)
    vals = [5.0, 3.0, 9.0, 1.0, 7.0, 2.0]
    for n in range(1, 7):
        brute = statistics.fmean(min(c) for c in itertools.combinations(vals, n))
        assert expected_best_random(vals, n) == pytest.approx(brute)


def test_failures_count_as_the_worst_valid_time():
    # inf -> 3.0 (worst finite): same as [1, 3, 3]
    assert expected_best_random([1.0, 3.0, math.inf], 1) == pytest.approx(7 / 3)


def test_methodology_score_hand_case():
    assert methodology_score(baseline=2.0, found=1.5, optimum=1.0) == pytest.approx(0.5)
    assert methodology_score(2.0, 1.0, 1.0) == pytest.approx(1.0)
    assert methodology_score(2.0, 3.0, 1.0) == pytest.approx(-1.0)


def test_replay_cli_writes_json_and_table(tmp_path):
    path = bundled_datasets(kernel="gelu_mul_fp16")[0]
    out = tmp_path / "r.json"
    r = CliRunner().invoke(main, ["replay", str(path), "--strategy", "random,exhaustive", "--budget", "4,64",
                                  "--repeats", "3", "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert "exhaustive" in r.output and "score P" in r.output
    data = json.loads(out.read_text())
    cells = {(c["strategy"], c["budget"]): c for c in data["cells"]}
    assert cells[("exhaustive", 64)]["median_ratio"] == pytest.approx(1.0)  # 64 configs: whole space
    assert cells[("random", 4)]["median_ratio"] >= 1.0
    assert len(cells[("random", 4)]["bests_ms"]) == 3


def test_replay_cli_rejects_unknown_strategy_clearly(tmp_path):
    path = bundled_datasets(kernel="gelu_mul_fp16")[0]
    r = CliRunner().invoke(main, ["replay", str(path), "--strategy", "nosuch"])
    assert r.exit_code == 2 and "unknown strategy 'nosuch'" in r.output


def test_tune_replay_mode_reports_winner_fixed_and_torch(tmp_path):
    out = tmp_path / "t.json"
    r = CliRunner().invoke(main, ["tune", "--mode", "replay", "--kernel", "matmul_fp16",
                                  "--shapes", "M=16,N=11008,K=4096", "--budget", "16", "--json", str(out)])
    assert r.exit_code == 0, r.output
    (row,) = json.loads(out.read_text())
    assert row["mode"] == "replay" and row["evaluations"] <= 16
    assert row["optimum_ms"] <= row["winner_ms"] <= row["default_ms"]
    assert row["fixed_best_ms"] is not None and row["torch_ms"] is not None
    assert any(h["status"] == "seed" for h in row["heuristics"])


def test_tune_unknown_shape_names_recorded_ones():
    r = CliRunner().invoke(main, ["tune", "--mode", "replay", "--kernel", "matmul_fp16", "--shapes", "M=3,N=3,K=3"])
    assert r.exit_code == 2 and "recorded shapes" in r.output


def test_bundled_datasets_are_complete():
    paths = bundled_datasets()
    kernels = {p.parent.name for p in paths}
    assert {"matmul_fp16", "softmax_fp16", "rmsnorm_fp16", "gelu_mul_fp16"} <= kernels
    assert sum(p.parent.name == "matmul_fp16" for p in paths) >= 12


def test_replay_cli_passes_strategy_options_and_checks_them_first(tmp_path):
    """--options reaches the named strategy's runs (abduction leaning its space-filling draws changes
    what it finds; the JSON records the options) and is checked before any replay."""
    from abductune.datasets.zoo import zoo_datasets

    path = str(zoo_datasets("fla_chunk_h_bf16")[0])  # no theory for it: space-filling draws from the start
    outs = []
    for opts in (None, '{"abduction": {"centre_roles": ["*"]}}'):
        out = tmp_path / f"r{len(outs)}.json"
        args = ["replay", path, "--strategy", "abduction", "--budget", "8", "--repeats", "4", "--json", str(out)]
        r = CliRunner().invoke(main, args + (["--options", opts] if opts else []))
        assert r.exit_code == 0, r.output
        outs.append(json.loads(out.read_text()))
    assert outs[0]["options"] == {} and outs[1]["options"] == {"abduction": {"centre_roles": ["*"]}}
    draws = [[c["bests_ms"] for c in o["cells"]] for o in outs]
    assert draws[0] != draws[1], "the option changed nothing the runs did"
    for bad, said in (("{", "--options is not JSON"), ('["abduction"]', "must be a JSON object"),
                      ('{"tpe": {}}', "which --strategy does not run"),
                      ('{"abduction": {"nosuch": 1}}', "unknown option(s): nosuch"),
                      ('{"abduction": {"centre_roles": "warps"}}', "centre_roles")):
        r = CliRunner().invoke(main, ["replay", path, "--strategy", "abduction", "--budget", "8", "--options", bad])
        assert r.exit_code == 2 and said in r.output, (bad, r.output)
