"""User-input errors outside the CLI (issue 11, items 2, 4, 9, 10 and 15): constraints that raise
or explode, datasets that cannot be trusted, torn sweep files, importer overrides and GPU names.
Each error is an AbductuneError whose message names the thing to fix."""
from __future__ import annotations

import dataclasses
import gzip
import json
import logging
import re
import time

import pytest

from abductune.datasets.bundled import bundled_datasets
from abductune.datasets.format import (RESTRICTED_MIN_CONFIGS, Dataset, append_records,
                                       read_dataset, require_exhaustive, write_dataset)
from abductune.datasets.kernel_tuner import import_kernel_tuner, read_json
from abductune.datasets.public import list_public_datasets, load_any
from abductune.errors import AbductuneError, DatasetError, SpaceError
from abductune.hardware import KNOWN_GPUS, candidates, lookup
from abductune.measurement import Measurement
from abductune.problem import KERNEL_CLASSES, Problem
from abductune.space import Choice, Pow2, Space, callable_constraint, parse_constraint
from abductune.sweep import read_partial
from public_data import load_public, require_public_data

# ------------------------------------------------------------ item 2: constraints that raise


def _space(expr, lo=16, hi=256):
    return Space([Pow2("BLOCK", lo, hi), Choice("num_warps", [2, 4, 8])], [expr])


@pytest.mark.parametrize("expr, err", [
    ("BLOCK % (num_warps - 4) == 0", "ZeroDivisionError"),
    ("log2(BLOCK - 128) > 1", "ValueError"),
    ("BLOCK < 'a'", "TypeError"),
    ("int(1e400) > BLOCK", "OverflowError"),
])
def test_constraint_that_raises_names_constraint_and_config(expr, err):
    space = _space(expr)
    with pytest.raises(SpaceError) as e:
        space.valid_configs()
    msg = str(e.value)
    assert repr(expr) in msg and err in msg and "'BLOCK': " in msg and "'num_warps': " in msg
    # every other path that evaluates constraints says the same
    with pytest.raises(SpaceError, match="cannot be evaluated for config"):
        space.is_valid({"BLOCK": 16 if "log2" in expr else 32, "num_warps": 4})


def test_guarded_constraint_is_fine():
    space = _space("num_warps != 4 and BLOCK % (num_warps - 4) == 0")
    assert {c["num_warps"] for c in space.valid_configs()} == {2, 8}


@pytest.mark.parametrize("expr, what", [
    ("BLOCK < (1 << (1 << 36))", "shift by 68719476736 exceeds 64"),
    ("BLOCK < 1 << 65", "shift by 65 exceeds 64"),
    ("BLOCK < 9 ** 9 ** 9", "exponent 387420489 exceeds 64"),
    ("BLOCK < 2 ** 64 * 2 ** 64 * 2", "integer beyond 2\\*\\*128"),
    ("BLOCK * 3 ** 40 * 3 ** 40 > 0", "integer beyond 2\\*\\*128"),
    ("len((0,) * (1 << 40)) > 0", None),  # len is not whitelisted: refused when parsed
    ("(0,) * (1 << 40) != () or BLOCK > 0", "sequence longer than 4096"),
    ("'a' * (1 << 30) != 'b'", "sequence longer than 4096"),
])
def test_constraint_evaluation_is_bounded(expr, what):
    t0 = time.perf_counter()
    with pytest.raises(SpaceError) as e:
        _space(expr).valid_configs()
    assert time.perf_counter() - t0 < 2.0
    assert repr(expr) in str(e.value)
    if what:
        assert "unbounded" in str(e.value)
        assert re.search(what, str(e.value))


def test_huge_literal_is_refused_when_parsed():
    with pytest.raises(SpaceError, match="beyond 2\\*\\*128"):
        parse_constraint("BLOCK < " + "9" * 60, ["BLOCK"])


def test_bounded_operators_still_work():
    space = Space([Pow2("BLOCK", 16, 256), Choice("num_warps", [2, 4, 8])],
                  ["BLOCK == 2 ** int(log2(BLOCK))", "1 << 5 <= BLOCK * num_warps",
                   "BLOCK * num_warps <= 1024", "(BLOCK >> 4) * 2 ** 2 >= 4"])
    got = {(c["BLOCK"], c["num_warps"]) for c in space.valid_configs()}
    assert got == {(b, w) for b in (16, 32, 64, 128, 256) for w in (2, 4, 8) if b * w <= 1024}


def test_callable_constraint_that_raises():
    def bad(cfg):
        return cfg["BLOCK"] // (cfg["num_warps"] - 4) > 0

    space = Space([Pow2("BLOCK", 16, 64), Choice("num_warps", [4, 8])],
                  [callable_constraint(bad, key="bad")])
    with pytest.raises(SpaceError, match="constraint 'bad' raised ZeroDivisionError.*'num_warps': 4"):
        space.valid_configs()


def _header_dataset(tmp_path, constraints, records=None, name="d.jsonl"):
    space = Space([Pow2("BLOCK", 16, 64), Choice("num_warps", [4, 8])])
    d = space.to_dict()
    d["constraints"] = constraints
    recs = records if records is not None else [
        Measurement({"BLOCK": b, "num_warps": w}, time_ms=b / w) for b in (16, 32, 64) for w in (4, 8)]
    p = tmp_path / name
    write_dataset(Dataset(Problem("k", dims={"n": 8}), d, recs), p)
    return p


def test_dataset_header_constraint_that_raises(tmp_path):
    p = _header_dataset(tmp_path, ["BLOCK % (num_warps - 4) == 0"])
    with pytest.raises(SpaceError) as e:
        read_dataset(p)
    msg = str(e.value)
    assert str(p) in msg and "'BLOCK % (num_warps - 4) == 0'" in msg and "'num_warps': 4" in msg
    p2 = _header_dataset(tmp_path, ["BLOCK < (1 << (1 << 36))"], name="bomb.jsonl")
    with pytest.raises(SpaceError, match="unbounded"):
        load_any(p2)


# ------------------------------------------------------- item 4: what a dataset covers

def test_records_outside_the_space_are_dropped_and_never_the_optimum(tmp_path, caplog):
    recs = [Measurement({"BLOCK": b, "num_warps": w}, time_ms=float(b * w)) for b in (16, 32) for w in (4, 8)]
    recs += [Measurement({"BLOCK": 48, "num_warps": 4}, time_ms=0.001),   # not a value of BLOCK
             Measurement({"BLOCK": 64, "num_warps": 8}, time_ms=0.002),   # fails the constraint
             Measurement({"BLOCK": 16, "num_warps": 4}, time_ms=99.0)]    # a duplicate
    p = _header_dataset(tmp_path, ["BLOCK * num_warps <= 256"], recs)
    with caplog.at_level(logging.WARNING):
        ds = read_dataset(p)
    assert ds.optimum().time_ms == 64.0
    assert "dropped 1 record(s) outside the space's values" in caplog.text
    assert "dropped 1 record(s) failing the space's constraints" in caplog.text
    cov = ds.coverage()
    assert (cov.records, cov.distinct, cov.duplicates, cov.outside_values, cov.failing_constraints) == \
        (5, 4, 1, 1, 1)
    assert (cov.valid, cov.covered) == (5, 4)  # 64x4 is valid and missing
    assert not ds.is_exhaustive and ds.coverage_fraction == pytest.approx(0.8)
    assert "cover 4/5 valid configs (80.0%)" in cov.describe()
    with pytest.raises(DatasetError, match=f"{p}: not exhaustive.*4/5.*needs at least 100%"):
        require_exhaustive(ds)
    assert require_exhaustive(ds, min_fraction=0.75).covered == 4
    with pytest.raises(DatasetError, match=f"{p}:6: config .*'BLOCK': 48.* outside the space's values"):
        read_dataset(p, strict=True)
    with pytest.raises(DatasetError, match="outside the space's values"):
        load_any(p, strict=True)


def _cut_copy(src, dst_dir, n=50):
    """The first `n` records of a dataset file, in its own format, uncompressed."""
    name = src.name.removesuffix(".gz")
    dst = dst_dir / name
    if src.name.endswith(".jsonl.gz"):
        with gzip.open(src, "rt") as f:
            lines = f.read().splitlines()[: n + 1]
        dst.write_text("\n".join(lines) + "\n")
        return dst
    obj = read_json(src)
    if "cache" in obj:
        obj["cache"] = dict(list(obj["cache"].items())[:n])
    else:
        obj["results"] = obj["results"][:n]
    dst.write_text(json.dumps(obj))
    return dst


@pytest.mark.parametrize("path", bundled_datasets()[::4], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_bundled_datasets_are_exhaustive_and_their_cuts_are_not(tmp_path, path):
    ds = load_any(path)
    cov = require_exhaustive(ds)
    assert cov.fraction == 1.0 and ds.is_exhaustive and not cov.restricted_to_records
    cut = load_any(_cut_copy(path, tmp_path))
    assert not cut.is_exhaustive
    with pytest.raises(DatasetError, match="not exhaustive: 50 records"):
        require_exhaustive(cut)


def test_public_datasets_pass_and_their_cuts_fail(tmp_path):
    root = require_public_data()
    paths = list_public_datasets(root)
    assert len(paths) == 15
    fractions = {}
    for p in paths:
        rel = p.relative_to(root).as_posix()
        ds = load_public(rel)
        cov = require_exhaustive(ds)  # trusted, though restricted and partly failed
        assert cov.restricted_to_records and cov.covered >= RESTRICTED_MIN_CONFIGS
        fractions[rel] = round(cov.fraction, 3)
        if ds.source.startswith("kernel_tuner:"):
            # a Kernel Tuner cache states every value in tune_params: cutting the records is
            # the same as cutting the file
            cut = dataclasses.replace(ds, records=ds.records[:50], _space=None)
        else:  # a T4 file builds its space from the values its results hold
            cut = load_any(_cut_copy(p, tmp_path))
        with pytest.raises(DatasetError, match="not exhaustive"):
            require_exhaustive(cut)
        # item 15: the hardware is known wherever the data names it
        if rel != "t4_examples/benchmark_hub_convolution_milo_A100_T4.json.gz":
            assert ds.hardware is not None and ds.hardware.name in KNOWN_GPUS, (rel, ds.hardware)
    assert min(fractions.values()) == 0.216  # CLBlast GEMM: Kernel Tuner's restrictions prune 78%
    assert fractions["kernel_tuner_benchmark_hub/pnpoly/RTX_3090.json.gz"] == 1.0
    # no device name and a file name saying only "A100": the variant is not guessed
    t4 = load_public("t4_examples/benchmark_hub_convolution_milo_A100_T4.json.gz")
    assert t4.hardware.name not in KNOWN_GPUS


# ------------------------------------------------------ item 9: torn last line of a sweep

def _partial(tmp_path, n=3):
    space = Space([Pow2("BLOCK", 16, 1024)])
    p = tmp_path / "n8.jsonl"
    p.write_text(json.dumps(Dataset(Problem("k", dims={"n": 8}), space.to_dict(), []).header()) + "\n")
    append_records(p, [Measurement({"BLOCK": 16 << i}, time_ms=float(i + 1)) for i in range(n)])
    return p


def test_torn_last_line_is_truncated_before_appending(tmp_path):
    p = _partial(tmp_path)
    whole = p.read_bytes()
    with open(p, "a") as f:
        f.write('{"config": {"BLOCK": 128}, "status": "o')  # killed mid-write
    head, recs = read_partial(p)
    assert head["format"] == "abductune-dataset" and [m.time_ms for m in recs] == [1.0, 2.0, 3.0]
    assert p.read_bytes() == whole  # the fragment is gone, the complete lines are untouched
    append_records(p, [Measurement({"BLOCK": 128}, time_ms=4.0), Measurement({"BLOCK": 256}, time_ms=5.0)])
    head, recs = read_partial(p)  # a second resume sees everything, nothing glued to a fragment
    assert [m.config["BLOCK"] for m in recs] == [16, 32, 64, 128, 256]
    assert [m.time_ms for m in read_dataset(p).records] == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_torn_utf8_and_unterminated_complete_line(tmp_path):
    p = _partial(tmp_path, 1)
    with open(p, "ab") as f:
        f.write('{"config": {"BLOCK": 32}, "status": "ok", "error": "é'.encode()[:-1])  # cut inside é
    assert len(read_partial(p)[1]) == 1 and p.read_bytes().endswith(b"\n")
    with open(p, "a") as f:
        f.write(json.dumps(Measurement({"BLOCK": 32}, time_ms=2.0).to_dict()))  # killed before "\n"
    assert [m.time_ms for m in read_partial(p)[1]] == [1.0, 2.0]  # complete: kept
    append_records(p, [Measurement({"BLOCK": 64}, time_ms=3.0)])
    assert [m.time_ms for m in read_partial(p)[1]] == [1.0, 2.0, 3.0]


def test_torn_header_and_corrupt_middle_line(tmp_path, caplog):
    p = tmp_path / "h.jsonl"
    p.write_text('{"format": "abductune-da')
    assert read_partial(p) == (None, []) and p.read_bytes() == b""
    p = _partial(tmp_path, 1)
    with open(p, "a") as f:
        f.write('{"config": {"BLOCK": 3\n')  # an old glued fragment, now in the middle
    append_records(p, [Measurement({"BLOCK": 64}, time_ms=3.0)])
    with caplog.at_level(logging.WARNING):
        head, recs = read_partial(p)
    assert [m.time_ms for m in recs] == [1.0, 3.0] and "skipped a corrupt line" in caplog.text


# ------------------------------------------------------------ item 10: importer overrides

def _kt_file(tmp_path, device="NVIDIA A100-PCIE-40GB"):
    cache = {f"{b},{w}": {"BLOCK": b, "num_warps": w, "time": b / w, "times": [b / w] * 3,
                          "compile_time": 10.0}
             for b in (16, 32) for w in (4, 8)}
    p = tmp_path / "kt.json"
    p.write_text(json.dumps({"device_name": device, "kernel_name": "my_gemm", "problem_size": [64, 64],
                             "tune_params_keys": ["BLOCK", "num_warps"],
                             "tune_params": {"BLOCK": [16, 32], "num_warps": [4, 8]}, "cache": cache}))
    return p


def test_unknown_kernel_class_names_the_known_ones(tmp_path):
    kt = _kt_file(tmp_path)
    for fn in (lambda: import_kernel_tuner(kt, kernel_class="banana"),
               lambda: load_any(kt, kernel_class="banana"),
               lambda: load_any(_header_dataset(tmp_path, []), kernel_class="banana")):
        with pytest.raises(DatasetError) as e:
            fn()
        assert "'banana'" in str(e.value) and ", ".join(KERNEL_CLASSES) in str(e.value)
    with pytest.raises(DatasetError, match="unknown override.*accepted: kernel_class"):
        load_any(kt, kernel_klass="matmul")


def test_dims_cannot_override_an_abductune_dataset(tmp_path):
    own = _header_dataset(tmp_path, [])
    with pytest.raises(DatasetError, match="carries its own problem .*dims.*overrides dims are not accepted"):
        load_any(own, dims={"n": 16})
    assert load_any(own).problem.dims == {"n": 8}
    with pytest.raises(DatasetError, match="dimension M='64' must be a non-negative integer"):
        import_kernel_tuner(_kt_file(tmp_path), dims={"M": "64"})


def test_hardware_names_resolve_or_name_the_known_gpus(tmp_path, caplog):
    kt = _kt_file(tmp_path)
    assert import_kernel_tuner(kt, hardware="RTX 3090").hardware.name == "RTX 3090"
    assert load_any(kt, hardware="rtx_3090").hardware.sms == 82
    # a bare "A100" takes the variant the file's own device name says, with a note
    with caplog.at_level(logging.INFO):
        assert import_kernel_tuner(kt, hardware="A100").hardware.name == "A100-PCIe-40GB"
    assert "taken as A100-PCIe-40GB" in caplog.text
    # ... and is refused, listing the variants, when the file does not settle it
    with pytest.raises(AbductuneError, match="'A100' does not say which variant.*A100-SXM, A100-PCIe"):
        import_kernel_tuner(_kt_file(tmp_path, device="NVIDIA RTX A4000"), hardware="A100")
    with pytest.raises(AbductuneError) as e:
        lookup("banana GPU")
    assert "unknown GPU 'banana GPU'" in str(e.value) and "RTX 3090" in str(e.value)
    assert "HardwareInfo" not in str(e.value)
    assert lookup("banana GPU", strict=False) is None and lookup("A100", strict=False) is None


# ---------------------------------------------------------- item 15: the hardware table

@pytest.mark.parametrize("name, key", [
    ("NVIDIA GeForce RTX 3090", "RTX 3090"), ("RTX_3090", "RTX 3090"), ("RTX 3090", "RTX 3090"),
    ("NVIDIA GeForce RTX 2080 Ti", "RTX 2080 Ti"), ("RTX_2080_Ti", "RTX 2080 Ti"),
    ("NVIDIA TITAN RTX", "TITAN RTX"), ("RTX_Titan", "TITAN RTX"),
    ("NVIDIA RTX A4000", "RTX A4000"), ("NVIDIA RTX A6000", "RTX A6000"),
    ("NVIDIA GeForce RTX 3060 Laptop GPU", "RTX 3060 Laptop"), ("NVIDIA GeForce RTX 4090", "RTX 4090"),
    ("NVIDIA GeForce GTX 1080 Ti", "GTX 1080 Ti"), ("Tesla V100-SXM2-16GB", "V100-SXM2"),
    ("MI250X", "MI250X"), ("AMD Radeon PRO W7800", "W7800"),
    ("NVIDIA A100-PCIE-40GB", "A100-PCIe-40GB"), ("NVIDIA A100-SXM4-80GB", "A100-SXM"),
    ("NVIDIA H100 80GB HBM3", "H100-SXM"), ("NVIDIA H100 PCIe", "H100-PCIe"),
])
def test_gpu_names_resolve(name, key):
    assert lookup(name) is KNOWN_GPUS[key]


@pytest.mark.parametrize("name", ["A100", "H100", "V100"])
def test_bare_family_names_are_ambiguous(name):
    assert len(candidates(name)) >= 2
    with pytest.raises(AbductuneError, match=f"'{name}' does not say which variant.*{candidates(name)[1]}"):
        lookup(name)


def test_table_entries_have_public_specs():
    for hw in KNOWN_GPUS.values():
        assert hw.sms > 0 and hw.smem_per_sm > 0 and hw.regs_per_sm > 0 and hw.mem_bandwidth > 0, hw.name
        assert hw.peak("fp32") > 0 and hw.peak("fp16") > 0, hw.name
        assert lookup(hw.name) is hw
    assert KNOWN_GPUS["RTX 3090"].peak("fp16") == pytest.approx(71e12)
    assert KNOWN_GPUS["A100-PCIe-40GB"].mem_bandwidth == pytest.approx(1.555e12)


# ------------------------------------------- issue 28, item 3: times are refused where read

BAD = [-46.81, 0, 0.0, float("nan"), float("inf"), "fast", "0.5", True, None]


@pytest.mark.parametrize("bad", BAD, ids=repr)
def test_bad_times_are_refused_where_each_format_is_read(tmp_path, bad):
    """A negative, zero, NaN, infinite, text or missing time in a successful record is refused
    by every reader with the file and the line (or config), never replayed or fitted."""
    recs = [Measurement({"BLOCK": b, "num_warps": w}, time_ms=b / w) for b in (16, 32, 64) for w in (4, 8)]
    p = _header_dataset(tmp_path, [], recs)
    lines = p.read_text().splitlines()
    rec = json.loads(lines[3])
    rec["time_ms"] = bad
    p.write_text("\n".join([*lines[:3], json.dumps(rec), *lines[4:]]) + "\n")
    with pytest.raises(DatasetError, match=rf"{p}:4: time_ms is (missing|{re.escape(repr(bad))});"
                                           " a recorded time must be a positive, finite number"):
        load_any(p)
    kt = json.loads(_kt_file(tmp_path).read_text())
    kt["cache"]["32,4"]["time"] = bad
    (tmp_path / "kt.json").write_text(json.dumps(kt))
    with pytest.raises(DatasetError, match=r"kt.json: cache entry '32,4': 'time' is .*; a recorded time must"):
        import_kernel_tuner(tmp_path / "kt.json")
    from abductune.datasets.t4 import from_t4_dict, to_t4_dict

    t4 = to_t4_dict(import_kernel_tuner(_kt_file(tmp_path)))
    t4["results"][1]["measurements"][0]["value"] = bad
    if bad is None:  # no time at all: neither the measurement nor runtimes
        t4["results"][1]["times"]["runtimes"] = []
    with pytest.raises(DatasetError, match=r"t4.json: results\[1\]: measurement 'time' is .*; a recorded time"):
        from_t4_dict(json.loads(json.dumps(t4)), path=tmp_path / "t4.json")


def test_bad_samples_are_refused_and_failures_keep_their_markers(tmp_path):
    recs = [Measurement({"BLOCK": 16, "num_warps": w}, time_ms=1.0, samples_ms=(1.0, 1.0)) for w in (4, 8)]
    p = _header_dataset(tmp_path, [], recs)
    lines = p.read_text().splitlines()
    rec = json.loads(lines[1])
    rec["samples_ms"] = [1.0, -1.0]
    p.write_text("\n".join([lines[0], json.dumps(rec), *lines[2:]]) + "\n")
    with pytest.raises(DatasetError, match=r":2: samples_ms holds -1.0; a recorded time must"):
        read_dataset(p)
    kt = json.loads(_kt_file(tmp_path).read_text())
    kt["cache"]["16,4"]["times"] = [0.5, float("nan")]
    kt["cache"]["16,8"]["time"] = "CompilationFailedConfig"  # Kernel Tuner's failure markers stay
    kt["cache"]["32,4"]["time"] = "TimeoutFailedConfig"      # failures: any ErrorConfig class name
    kt["cache"]["32,8"]["time"] = 1e20                        # old Kernel Tuner's failure time
    (tmp_path / "kt.json").write_text(json.dumps(kt))
    with pytest.raises(DatasetError, match=r"cache entry '16,4': 'times' holds nan"):
        import_kernel_tuner(tmp_path / "kt.json")
    kt["cache"]["16,4"]["times"] = [0.5]
    (tmp_path / "kt.json").write_text(json.dumps(kt))
    ds = import_kernel_tuner(tmp_path / "kt.json")
    assert [m.status.value for m in ds.records] == ["ok", "compile_error", "runtime_error", "runtime_error"]
    # a failed record's time is not a time: never checked
    bad_fail = [Measurement({"BLOCK": 16, "num_warps": 4}, "runtime_error", time_ms=-1.0),
                Measurement({"BLOCK": 16, "num_warps": 8}, time_ms=2.0)]
    assert len(read_dataset(_header_dataset(tmp_path, [], bad_fail, name="f.jsonl")).records) == 2


def test_a_dataset_built_in_code_with_a_bad_time_is_refused_by_replay():
    from abductune.evaluate import compare_on_dataset

    space = Space([Choice("BLOCK", [16, 32])])
    ds = Dataset(Problem("k", dims={"n": 8}), space.to_dict(),
                 [Measurement({"BLOCK": 16}, time_ms=1.0), Measurement({"BLOCK": 32}, time_ms=-1.0)])
    with pytest.raises(DatasetError, match=r"record 2: time_ms is -1.0; a recorded time must"):
        compare_on_dataset(ds, ["random"], [2], 1)


# ------------------------------ issue 28, item 25: small complete spaces are exhaustive

def test_a_complete_small_restricted_space_is_exhaustive_and_a_cut_or_self_described_one_is_not(tmp_path):
    from abductune.datasets.t4 import export_t4, from_t4_dict, import_t4, to_t4_dict

    ds = import_kernel_tuner(_kt_file(tmp_path))  # 4 configs: 2 values x 2 values, all recorded
    cov = require_exhaustive(ds)
    assert cov.covered == cov.valid == 4 < RESTRICTED_MIN_CONFIGS and cov.complete and ds.is_exhaustive
    cut = dataclasses.replace(ds, records=ds.records[:3], _space=None)
    with pytest.raises(DatasetError, match=r"not exhaustive: 3 records.*cover 3/4 .*needs at least 20% "
                                           r"and 100 configs, or every combination of its values"):
        require_exhaustive(cut)
    # a T4 file without our header states no space: its values come from its records, so a
    # file cut to a whole product of fewer values would look complete: the floor stays
    t4 = to_t4_dict(ds)
    t4["metadata"].pop("abductune")
    bare = from_t4_dict(t4, path=tmp_path / "bare_T4.json")
    assert bare.values_from_records and bare.coverage().complete and not bare.is_exhaustive
    with pytest.raises(DatasetError, match="its space was read off its own records"):
        require_exhaustive(bare)
    # ... and says so through an export and an import as an abductune dataset
    write_dataset(bare, tmp_path / "bare.jsonl")
    again = read_dataset(tmp_path / "bare.jsonl")
    assert again.values_from_records and not again.is_exhaustive
    export_t4(again, tmp_path / "again_T4.json")
    assert import_t4(tmp_path / "again_T4.json").values_from_records


# ------------------------------------------- issue 28, item 5: the one --shapes parser

@pytest.mark.parametrize("text, error", [
    ("M=0,N=8", "bad shape 'M=0,N=8': every dim must be positive, got M=0"),
    ("M=-16,N=8", "every dim must be positive, got M=-16"),
    ("M=16,M=32,N=8", "bad shape 'M=16,M=32,N=8': dim M is given twice; give each dim once"),
    ("M=16,N=8; M=1,N=2,N=2", "bad shape 'M=1,N=2,N=2': dim N is given twice"),
    ("M=16,,N=8", "bad shape 'M=16,,N=8': write dims as M=16,N=4096,K=4096"),
    ("M=1.5", "bad shape 'M=1.5': write dims"),
    ("=4", "bad shape '=4': write dims"),
    ("M 4", "bad shape 'M 4': write dims"),
    (" ; ;", "--shapes ' ; ;' names no shape"),
])
def test_parse_shapes_refuses_what_the_text_shows(text, error):
    from abductune.sweep import parse_shapes

    with pytest.raises(AbductuneError) as e:
        parse_shapes(text)
    assert error in str(e.value) and "\n" not in str(e.value)


def test_parse_shapes_keeps_good_shapes():
    from abductune.sweep import parse_shapes

    assert parse_shapes(" M=16, N=4096 ;K=1;") == [{"M": 16, "N": 4096}, {"K": 1}]


# ------------------------------- issue 28, item 2: built-in specs without Triton

def test_kernel_specs_without_triton_hash_and_refuse_to_launch_like_triton():
    """The stand-in `@triton.jit` keeps the source as Triton cuts it, so a spec's source hash
    (and so the store's key) is the same with or without Triton; launching it says triton is
    missing, which the CLI turns into 'pip install abductune[gpu]'."""
    pytest.importorskip("triton")
    from abductune import kernels
    from abductune.kernels._triton import UnlaunchableKernel
    from abductune.kernels.base import source_hash

    for name in kernels.names():
        fn = kernels.get(name).triton_fn
        stand_in = UnlaunchableKernel(fn.fn)
        assert stand_in.src == fn.src and source_hash(stand_in) == source_hash(fn), name
        with pytest.raises(ModuleNotFoundError) as e:
            stand_in[(1,)](1, 2)
        assert e.value.name == "triton"
