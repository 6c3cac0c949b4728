"""The kernel zoo's shipped datasets: complete headers, records inside their space, replayable
by name, and listed in docs/ZOO.md."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from abductune.datasets.format import read_dataset
from abductune.datasets.zoo import zoo_datasets, zoo_kernels
from abductune.errors import AbductuneError
from abductune.space import Space

ROOT = Path(__file__).resolve().parents[1]
PATHS = zoo_datasets()


def test_the_zoo_ships_data():
    assert PATHS, "no zoo datasets under src/abductune/datasets/zoo_data"


@pytest.mark.parametrize("path", PATHS, ids=[f"{p.parent.name}/{p.name}" for p in PATHS])
def test_zoo_header_is_complete_and_records_lie_in_its_space(path):
    ds = read_dataset(path, strict=True)  # strict: a record outside the space fails here
    p = ds.problem
    # "other": a kernel no class fits (fla's chunked GLA), searched and predicted in generic mode
    assert p.kernel_class in {"matmul", "quantized_matmul", "attention", "row_reduction", "elementwise", "other"}
    assert p.dims and all(isinstance(v, int) and v > 0 for v in p.dims.values())
    assert p.dtypes and all(isinstance(v, str) and v for v in p.dtypes.values())
    assert p.flops > 0 and math.isfinite(p.flops)
    assert p.min_bytes > 0 and math.isfinite(p.min_bytes)
    assert p.hardware is not None and p.hardware.sms > 0
    assert ds.toolchain.get("triton") and ds.toolchain.get("torch")
    assert ds.meta.get("origin"), "the header must say where the kernel came from"
    space = ds.stated_space()
    # a listed config may fail only the kernel's own assertions at this shape (meta.asserts:
    # FlagGems' attention lists BLOCK_N 128, past a head dim of 64), never the values
    asserted = Space(space.params, [c.source for c in space.constraints
                                    if c.source not in ds.meta.get("asserts", {}).get("constraints", ())],
                     space.constants, name=space.name)
    for c in ds.meta["fixed_configs"]:
        assert asserted.is_valid(c), f"the kernel's own config {c} is not in its space"
    keys = [space.key(m.config) for m in ds.records]
    assert len(keys) == len(set(keys)), "a config recorded twice"
    assert all(space.is_valid(m.config) for m in ds.records)
    sample = ds.meta.get("sample")
    if sample:  # a fixed sample, stated in the header, with the kernel's own list in it
        assert ds.restricted_to_records
        assert sample["size"] == len(ds.records) and sample["valid_in_space"] > 1000
        assert {space.key(c) for c in ds.meta["fixed_configs"]} <= set(keys)
    else:  # recorded whole
        assert len(ds.records) == len(space.valid_configs())
    ok = ds.ok_records()
    assert ok, "no config ran"
    for m in ok:
        assert m.time_ms > 0 and m.samples_ms, "each record keeps its timed runs (its spread)"
        assert m.registers is not None and m.smem_bytes is not None
    for m in ds.records:
        assert m.status in {"ok", "compile_error", "resource_error", "runtime_error", "timeout",
                            "wrong_result", "pruned"}


def test_zoo_names_select_by_class_and_kernel():
    kernels = zoo_kernels()
    name = sorted(kernels)[0]
    assert zoo_datasets(name) == kernels[name]
    cls = read_dataset(kernels[name][0]).problem.kernel_class
    assert set(kernels[name]) <= set(zoo_datasets(cls))
    with pytest.raises(AbductuneError, match="names no zoo kernel or class"):
        zoo_datasets("no_such_kernel")


def test_zoo_md_lists_every_shipped_kernel_with_its_shapes():
    doc = (ROOT / "docs" / "ZOO.md").read_text(encoding="utf-8")
    for kernel, paths in zoo_kernels().items():
        row = next((line for line in doc.splitlines() if line.startswith(f"| `{kernel}`")), None)
        assert row is not None, f"docs/ZOO.md has no row for {kernel}"
        m = re.search(r"\| (\d+): ", row)
        assert m and int(m.group(1)) == len(paths), f"docs/ZOO.md's shape count for {kernel} is stale"


def test_replay_zoo_runs_on_the_cpu(tmp_path):
    from click.testing import CliRunner

    from abductune.cli import main

    name = sorted(zoo_kernels())[0]
    out = tmp_path / "r.json"
    r = CliRunner().invoke(main, ["replay", f"zoo:{name}", "--strategy", "random", "--budget", "16",
                                  "--repeats", "2", "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert out.exists()
