"""benchmarks/zoo_search_loko.py's store-seeded rerun (`--store-seeded`): the seeds it puts first
are the fastest configs of the kernel's nearest other recorded shapes, as the decorator seeds a new
shape of a kernel tuned before (`session.NEAREST_SEEDS`, `Store.nearest_bests`)."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from bench_scripts import load_benchmark

from abductune.datasets.public import load_any
from abductune.datasets.zoo import zoo_datasets

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "zoo_search_loko.py"


def _module():
    return load_benchmark("zoo_search_loko")


def test_the_nearest_other_shapes_winners_nearest_first():
    paths = zoo_datasets("zoo_rmsnorm_bf16")
    here = next(p for p in paths if "rows4096_cols4096" in p.name)
    ds = load_any(here)
    got = _module()._nearest_bests(ds, here, 2)
    others = [load_any(p) for p in paths if p != here]

    def dist(o):
        return sum(abs(math.log2(o.problem.dims[k]) - math.log2(v)) for k, v in ds.problem.dims.items())
    want = [o.optimum().config for o in sorted(others, key=dist)[:2]]
    assert got == want and len(got) == 2


def test_the_store_seeded_rerun_is_written_beside_the_plain_one(tmp_path: Path):
    paths = [str(p) for p in zoo_datasets("zoo_rmsnorm_bf16")[:2]]
    out = tmp_path / "s.json"
    subprocess.run([sys.executable, str(SCRIPT), str(out), "--datasets", *paths, "--strategy", "random",
                    "--store-seeded", "random", "--budget", "4", "--repeats", "2", "--procs", "1"],
                   check=True, capture_output=True, text=True, timeout=600)
    d = json.loads(out.read_text())
    assert d["strategies"] == ["random", "random+store"]
    cells = {(c["dataset"], c["strategy"]) for c in d["cells"]}
    assert len(cells) == 4 and all(c["median_ratio"] >= 1.0 for c in d["cells"])


def test_strategy_options_reach_the_runs_and_the_json(tmp_path: Path):
    """`--options` is passed to every run of the strategy it names and written into the JSON; it
    is read as `abductune replay --options` reads it, so a bad option or malformed JSON is refused
    in one line, naming it, before any replay."""
    paths = [str(p) for p in zoo_datasets("zoo_rmsnorm_bf16")[:1]]
    out = tmp_path / "o.json"
    opts = {"abduction": {"centre_roles": []}}
    subprocess.run([sys.executable, str(SCRIPT), str(out), "--datasets", *paths, "--strategy", "abduction",
                    "--budget", "4", "--repeats", "1", "--procs", "1", "--options", json.dumps(opts)],
                   check=True, capture_output=True, text=True, timeout=600)
    assert json.loads(out.read_text())["options"] == opts
    bad = subprocess.run([sys.executable, str(SCRIPT), str(out), "--datasets", *paths, "--strategy", "abduction",
                          "--budget", "4", "--repeats", "1", "--procs", "1",
                          "--options", json.dumps({"abduction": {"centre_roles": "warps"}})],
                         capture_output=True, text=True, timeout=600)
    assert bad.returncode != 0 and "centre_roles" in bad.stderr
    worse = subprocess.run([sys.executable, str(SCRIPT), str(out), "--options", "[1]"],
                           capture_output=True, text=True, timeout=600)
    assert worse.returncode == 2 and "--options must be a JSON object" in worse.stderr
