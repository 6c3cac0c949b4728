"""benchmarks/list_beyond.py (issue 24, item 5): the replay of `patch_triton(budget=...)` on the
zoo's library kernels seeds each search as the decorator does (bets learned without the kernel,
then the kernel's whole list), so no search can end slower than `triton.autotune`'s pick, and a
kernel whose list is its whole recorded space has nothing beyond it to find."""
from __future__ import annotations

import pytest
from bench_scripts import load_benchmark

from abductune.datasets.public import load_any
from abductune.datasets.zoo import zoo_datasets
from abductune.errors import AbductuneError


def _module():
    return load_benchmark("list_beyond")


def test_the_seeds_are_the_bets_then_the_whole_list_and_no_search_ends_behind_the_lists_best():
    mod = _module()
    path = zoo_datasets("flaggems_var_mean_bf16")[0]
    ds = load_any(path)
    fixed = ds.meta["fixed_configs"]
    seeds = mod._seeds(ds, fixed)
    space = ds.space()
    listed = [s for s in seeds if s.source == "configs"]
    assert [space.key(s.config) for s in listed] == [space.key(c) for c in fixed if space.is_valid(c)]
    assert seeds[-len(listed):] == listed  # the bets go first, the list after them, whole
    assert all(s.source.startswith(("theory", "observed")) for s in seeds[:-len(listed)])
    got = mod._one((str(path), [8], ["random", "abduction"], 2))
    assert got["list_best_ms"] >= got["optimum_ms"] and {c["strategy"] for c in got["cells"]} == {"random",
                                                                                                "abduction"}
    assert all(c["vs_list"] <= 1.0 and c["budget"] == len(seeds) + 8 for c in got["cells"])


def test_a_list_that_is_its_whole_space_is_left_out_and_the_table_says_so(capsys):
    mod = _module()
    path = zoo_datasets("flaggems_kron_bf16")[0]
    ds = load_any(path)
    kron = mod.run_dataset(ds, str(path), [8], ["random"], 1)
    assert kron["list"] == 24 and kron["space"] == 300 and kron["cells"]
    ds.meta["fixed_configs"] = [dict(r.config) for r in ds.records]  # a list that is the whole space
    whole = mod.run_dataset(ds, str(path), [8], ["random"], 1)
    assert whole["list"] == whole["space"] == 300 and whole["cells"] == []
    whole["kernel"] = "whole_list_kernel"
    mod.table([kron, whole], [8], ["random"])
    out = capsys.readouterr().out
    assert "left out (the list is the whole recorded space): whole_list_kernel" in out
    assert "| flaggems_kron_bf16 | 24 / 300 |" in out and "(of 1)" in out


def test_a_strategy_with_options_is_named_as_given_and_run_with_them():
    mod = _module()
    assert mod.strategy_entry("pattern") == ("pattern", {})
    assert mod.strategy_entry("pattern@max_step=1+restarts=true") == ("pattern", {"max_step": 1, "restarts": True})
    path = zoo_datasets("flaggems_var_mean_bf16")[0]
    got = mod._one((str(path), [8], ["pattern", "pattern@max_step=1"], 2))
    assert {c["strategy"] for c in got["cells"]} == {"pattern", "pattern@max_step=1"}
    with pytest.raises(AbductuneError, match="no_such_option"):  # an unknown option fails, naming it
        mod._one((str(path), [8], ["pattern@no_such_option=1"], 1))
