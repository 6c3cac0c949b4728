"""Importers of community formats (Kernel Tuner caches, T4) against the public data, the T4
exporter, the format-sniffing loader, and replay over imported data."""
from __future__ import annotations

import gzip
import json
import math
from collections import Counter
from pathlib import Path

import pytest

from abductune.datasets import Dataset, write_dataset
from abductune.datasets.kernel_tuner import FAILURES, import_kernel_tuner
from abductune.datasets.public import (detect_format, list_public_datasets, load_any,
                                       load_manifest, public_data_dir)
from abductune.datasets.t4 import INVALIDITY, export_t4, import_t4
from abductune.errors import DatasetError
from abductune.hardware import HardwareInfo
from abductune.measure.replay import ReplayEvaluator
from abductune.measurement import Measurement
from abductune.problem import Problem
from abductune.search import Budget, run
from abductune.search.random import RandomSearch
from abductune.space import Bool, Choice, Pow2, Space
from public_data import load_public, require_public_data

KT_CONV_A100 = "kernel_tuner_benchmark_hub/convolution_milo/A100.json.gz"
T4_CONV_A100 = "t4_examples/benchmark_hub_convolution_milo_A100_T4.json.gz"
T4_KTT = "t4_examples/ktt_coulombsum3d_RTX_2080_Ti_T4.json.gz"
PNPOLY = "kernel_tuner_benchmark_hub/pnpoly/RTX_3090.json.gz"


def _manifest() -> list[dict]:
    d = public_data_dir()
    return load_manifest(d) if d is not None else []


MANIFEST = _manifest()
MANIFEST_IDS = [e["file"] for e in MANIFEST] or ["<no public data>"]


def _entry(request_param):
    if request_param == "<no public data>":
        require_public_data()
    return next(e for e in MANIFEST if e["file"] == request_param)


# ------------------------------------------------------------------ the public files

def test_public_folder_lists_every_manifest_file():
    root = require_public_data()
    listed = {p.relative_to(root).as_posix() for p in list_public_datasets()}
    assert listed == {e["file"] for e in load_manifest(root)}
    assert len(listed) == 15


@pytest.mark.parametrize("rel", MANIFEST_IDS)
def test_public_file_imports_with_manifest_counts(rel):
    e = _entry(rel)
    ds = load_public(rel)
    assert isinstance(ds, Dataset)
    assert len(ds.records) == e["entries"]
    counts = Counter(m.status for m in ds.records)
    if e["fmt"] == "kernel_tuner_cache":
        expected = Counter({"ok": e["valid"]} if e["valid"] else {})
        for failure, n in e["invalid"].items():
            expected[FAILURES[failure]] += n
        assert counts == expected
        assert ds.optimum().time_ms == pytest.approx(e["best_ms"], abs=1e-4)
        ok_times = sorted(m.time_ms for m in ds.ok_records())
        assert float(sorted(ok_times)[len(ok_times) // 2]) == pytest.approx(e["median_ms"], rel=1e-3)
        assert {len(m.samples_ms) for m in ds.ok_records()} == set(e["samples_per_config"])
        assert len(ds.space_dict["params"]) == e["params"]
        assert Space.from_dict(ds.space_dict).cardinality == e["cartesian"]
        assert ds.problem.kernel == e["kernel"]
        if e["device"]:
            assert ds.toolchain["device_name"] == e["device"]
    else:
        expected = Counter()
        for inv, n in e["invalidity"].items():
            expected[INVALIDITY[inv]] += n
        assert counts == expected
    assert ds.restricted_to_records
    # every record is a valid config of the (record-restricted) space, and only those are
    space = ds.space()
    assert len(space.valid_configs()) == len({space.key(m.config) for m in ds.records})
    assert all(m.compile_s >= 0 and m.bench_s >= 0 for m in ds.records)
    assert all(m.cost_s > 0 for m in ds.records)
    assert all(m.time_ms is None for m in ds.records if not m.ok)


def test_every_listed_file_loads_through_load_any():
    require_public_data()
    for p in list_public_datasets():
        rel = p.relative_to(public_data_dir()).as_posix()
        assert load_public(rel).records


def test_kernel_tuner_problem_and_hardware():
    ds = load_public(KT_CONV_A100)
    assert ds.problem.kernel == "convolution_kernel"
    assert ds.problem.kernel_class == "convolution"
    assert ds.problem.dims == {"x": 4096, "y": 4096}
    assert ds.hardware is not None and ds.hardware.name == "A100-PCIe-40GB"  # looked up
    mi = load_public("kernel_tuner_benchmark_hub/convolution_milo/MI250X.json.gz")
    assert mi.hardware.name == "MI250X" and mi.hardware.vendor == "amd"  # empty device_name
    rtx = load_public("kernel_tuner_benchmark_hub/gemm_clblast/RTX_3090.json.gz")
    assert rtx.hardware.name == "RTX 3090" and rtx.hardware.sms == 82  # consumer GPUs are known
    assert rtx.problem.kernel_class == "matmul"
    assert "objective" not in json.dumps(rtx.toolchain) or rtx.toolchain["objective"] == "time"
    pn = load_public(PNPOLY)
    assert pn.problem.dims == {"x": 20000000}  # problem_size is a plain int there


def test_kernel_tuner_record_conventions():
    ds = load_public(KT_CONV_A100)
    first = ds.records[0]  # "16,1,1,1,0,0,0,1,15,15" in the cache
    assert first.config == {"block_size_x": 16, "block_size_y": 1, "tile_size_x": 1,
                            "tile_size_y": 1, "read_only": 0, "use_padding": 0, "use_shmem": 0,
                            "use_cmem": 1, "filter_height": 15, "filter_width": 15}
    assert first.time_ms == pytest.approx(3.8753279224038124)  # KT's mean, not the median
    assert len(first.samples_ms) == 32
    assert first.compile_s == pytest.approx(0.9185990339610726)
    assert first.bench_s == pytest.approx((126.3829180970788 + 0 + 105.24242906831205) / 1000)
    assert first.extra["GFLOP/s"] == pytest.approx(1948.1569950129526)
    failed = [m for m in ds.records if m.status == "compile_error"]
    assert failed and all(m.error == "CompilationFailedConfig" and m.compile_s > 0 for m in failed)


def test_t4_and_kernel_tuner_a100_convolution_agree():
    kt = load_public(KT_CONV_A100)
    t4 = load_public(T4_CONV_A100)
    assert kt.optimum().config == t4.optimum().config
    assert kt.optimum().time_ms == t4.optimum().time_ms
    assert Space.from_dict(kt.space_dict).names == Space.from_dict(t4.space_dict).names
    kts = {tuple(sorted(m.config.items())): m for m in kt.records}
    t4s = {tuple(sorted(m.config.items())): m for m in t4.records}
    assert kts.keys() == t4s.keys()
    for k, m in kts.items():
        o = t4s[k]
        assert m.status == o.status
        assert m.compile_s == pytest.approx(o.compile_s)
        if m.ok:
            assert m.time_ms == pytest.approx(o.time_ms)
            assert m.samples_ms == pytest.approx(o.samples_ms)
    assert t4.problem.kernel_class == "convolution"


def test_t4_ktt_file_in_microseconds_without_metadata():
    ds = load_public(T4_KTT)
    assert len(ds.records) == 210
    first = ds.records[0]
    assert first.config["WORK_GROUP_SIZE_X"] == 16
    assert first.time_ms == pytest.approx(3.037408)  # 3037.408 us
    assert first.compile_s == pytest.approx(1.0670012030000002)  # compilation_time in us
    assert first.bench_s == pytest.approx((3037.408 + 45836.648 + 10.363) / 1e6)
    assert first.extra["dram__sectors_read.sum"] == 2100194.0  # profiler counters kept
    assert ds.optimum().time_ms < first.time_ms
    # an explicit unit wins over what the file says for times without their own unit
    root = require_public_data()
    as_ms = import_t4(root / T4_KTT, timeunit="milliseconds")
    assert as_ms.records[0].compile_s == pytest.approx(1067.0012030000002)
    with pytest.raises(DatasetError, match="unknown timeunit"):
        import_t4(root / T4_KTT, timeunit="fortnights")


# -------------------------------------------------------------------------- replay

def test_replay_clock_over_imported_dataset():
    ds = load_public(KT_CONV_A100)
    ev = ReplayEvaluator(ds)
    ok = next(m for m in ds.records if m.ok)
    [m] = ev.evaluate([ok.config])
    assert m.time_ms == ok.time_ms
    assert ev.clock == pytest.approx(ok.compile_s + ok.bench_s)
    ev.evaluate([ok.config, dict(ok.config)])  # repeats are free
    assert ev.clock == pytest.approx(ok.compile_s + ok.bench_s)
    assert ev.evaluations == 1
    for status in ("compile_error", "runtime_error"):
        bad = next(m for m in ds.records if m.status == status)
        before = ev.clock
        [got] = ev.evaluate([bad.config])
        assert got.status == status and not got.ok and got.objective == math.inf
        assert bad.compile_s > 0
        assert ev.clock - before == pytest.approx(bad.compile_s + bad.bench_s)
        assert ev.clock - before >= bad.compile_s  # a failure still costs its compile time
    # a config of the Cartesian product that the cache does not hold is pruned, free
    space = Space.from_dict(ds.space_dict)
    held = {space.key(m.config) for m in ds.records}
    absent = next(c for c in space.iter_configs() if space.key(c) not in held)
    before = ev.clock
    [p] = ev.evaluate([absent])
    assert p.status == "pruned" and ev.clock == before
    assert absent not in ds.space()


def test_random_search_over_imported_dataset():
    ds = load_public(PNPOLY)
    ev = ReplayEvaluator(ds)
    res = run(RandomSearch(seed=3), ev, Budget(evaluations=60))
    assert res.evaluations == 60
    assert res.seconds == pytest.approx(sum(m.cost_s for m in res.history))
    assert res.best is not None and res.best.ok
    again = run(RandomSearch(seed=3), ReplayEvaluator(ds), Budget(evaluations=60))
    assert [m.config for m in again.history] == [m.config for m in res.history]
    full = run(RandomSearch(seed=1), ReplayEvaluator(ds))
    assert full.best.time_ms == ds.optimum().time_ms


# ---------------------------------------------------------- synthetic KT caches

def _kt_cache(records: dict[str, dict], **top) -> dict:
    base = {"device_name": "NVIDIA H100 80GB HBM3", "kernel_name": "my_matmul",
            "problem_size": [512, 256, 64], "tune_params_keys": ["BLOCK_M", "num_warps", "flag"],
            "tune_params": {"BLOCK_M": [16, 32, 64], "num_warps": [4, 8], "flag": ["a", "b"]},
            "objective": "time", "cache": records}
    base.update(top)
    return base


def _rec(bm, w, f, time, **kw):
    return {"BLOCK_M": bm, "num_warps": w, "flag": f, "time": time, **kw}


def _write_kt_pretty(path: Path, obj: dict) -> None:
    """One cache entry per line, the way Kernel Tuner writes caches."""
    head = {k: v for k, v in obj.items() if k != "cache"}
    lines = ["{"] + [f"{json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()] + ['"cache": {']
    items = list(obj["cache"].items())
    for i, (k, v) in enumerate(items):
        lines.append(f"{json.dumps(k)}: {json.dumps(v)}" + ("," if i < len(items) - 1 else ""))
    lines += ["}", "}"]
    text = "\n".join(lines) + "\n"
    if str(path).endswith(".gz"):
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)


def test_kernel_tuner_synthetic_statuses_and_missing_fields(tmp_path):
    recs = {
        "16,4,a": _rec(16, 4, "a", 1.5, times=[1.4, 1.6], compile_time=100.0, benchmark_time=20.0,
                       verification_time=5.0, framework_time=1.0, strategy_time=999.0),
        "32,4,a": _rec(32, 4, "a", "CompilationFailedConfig", compile_time=300.0),
        "64,4,a": _rec(64, 4, "a", "RuntimeFailedConfig", compile_time=50.0, benchmark_time=1.0),
        "16,8,a": _rec(16, 8, "a", "InvalidConfig"),
        "16,8,b": _rec(16, 8, "b", 2.0),  # no times, no time fields at all
        "32,8,b": _rec(32, 8, "b", 1e20),  # old-KT failure marker
        "64,8,b": {"time": 0.9, "times": [0.9]},  # old cache: values only in the key
    }
    obj = _kt_cache(recs)
    del obj["objective"]
    p = tmp_path / "cache.json"
    _write_kt_pretty(p, obj)
    ds = import_kernel_tuner(p)
    by = {(m.config["BLOCK_M"], m.config["num_warps"], m.config["flag"]): m for m in ds.records}
    ok = by[(16, 4, "a")]
    assert ok.status == "ok" and ok.time_ms == 1.5 and ok.samples_ms == (1.4, 1.6)
    assert ok.compile_s == pytest.approx(0.1) and ok.bench_s == pytest.approx(0.026)
    assert by[(32, 4, "a")].status == "compile_error" and by[(32, 4, "a")].compile_s == 0.3
    assert by[(64, 4, "a")].status == "runtime_error"
    assert by[(64, 4, "a")].bench_s == pytest.approx(0.001)
    assert by[(16, 8, "a")].status == "pruned"
    assert by[(16, 8, "b")].ok and by[(16, 8, "b")].cost_s == 0.0
    assert by[(32, 8, "b")].status == "runtime_error"
    assert by[(64, 8, "b")].ok and by[(64, 8, "b")].time_ms == 0.9
    assert ds.toolchain["objective"] == "time"
    assert ds.problem.dims == {"x": 512, "y": 256, "z": 64}
    assert ds.problem.kernel_class == "matmul"
    assert ds.hardware.name == "H100-SXM"
    space = Space.from_dict(ds.space_dict)
    assert space["BLOCK_M"].ordered and not space["flag"].ordered
    assert space["BLOCK_M"].role == "tile:M" and space["num_warps"].role == "warps"
    assert len(ds.space().valid_configs()) == len(recs)
    assert ds.optimum().config == {"BLOCK_M": 64, "num_warps": 8, "flag": "b"}


def test_kernel_tuner_overrides(tmp_path):
    p = tmp_path / "c.json.gz"
    _write_kt_pretty(p, _kt_cache({"16,4,a": _rec(16, 4, "a", 1.0)}))
    hw = HardwareInfo("my-gpu", "nvidia", (9, 0), sms=100)
    ds = import_kernel_tuner(p, kernel_class="attention", dims={"M": 7, "N": 9}, hardware=hw,
                             dtypes={"a": "fp16"}, kernel="other_name")
    assert ds.problem.kernel_class == "attention"
    assert ds.problem.dims == {"M": 7, "N": 9}
    assert ds.problem.hardware is hw
    assert ds.problem.dtypes == {"a": "fp16"} and ds.problem.dtype == "fp16"
    assert ds.problem.kernel == "other_name"
    by_name = import_kernel_tuner(p, hardware="NVIDIA A100-SXM4-80GB")
    assert by_name.hardware.name == "A100-SXM"
    unknown = import_kernel_tuner(p, hardware="Some Future GPU")
    assert unknown.hardware.name == "Some Future GPU"
    with pytest.raises(DatasetError, match="kernel_class"):
        import_kernel_tuner(p, kernel_class="not_a_class")
    # load_any forwards the same overrides
    assert load_any(p, dims={"K": 3}).problem.dims == {"K": 3}


def test_kernel_tuner_unclosed_cache_is_read(tmp_path):
    p = tmp_path / "open.json"
    _write_kt_pretty(p, _kt_cache({"16,4,a": _rec(16, 4, "a", 1.0), "32,4,a": _rec(32, 4, "a", 2.0)}))
    text = p.read_text().rstrip()
    assert text.endswith("}\n}")
    p.write_text(text[: -len("}\n}")].rstrip() + ",\n")  # as an interrupted run leaves it
    assert len(import_kernel_tuner(p).records) == 2


def test_truncated_gzip_names_file_and_line(tmp_path):
    src = tmp_path / "full.json.gz"
    recs = {f"{bm},{w},{f}": _rec(bm, w, f, 1.0 + bm / 100, times=[1.0] * 32)
            for bm in (16, 32, 64) for w in (4, 8) for f in ("a", "b")}
    _write_kt_pretty(src, _kt_cache(recs))
    raw = src.read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(raw[: len(raw) * 2 // 3])
    with pytest.raises(DatasetError) as e:
        import_kernel_tuner(cut)
    msg = str(e.value)
    assert f"{cut}:" in msg and "truncated" in msg
    line = int(msg.split(f"{cut}:")[1].split(":")[0])
    assert line >= 1
    with pytest.raises(DatasetError, match="truncated"):
        load_any(cut)


def test_corrupt_json_line_names_file_and_line(tmp_path):
    p = tmp_path / "bad.json"
    recs = {f"{bm},4,a": _rec(bm, 4, "a", 1.0) for bm in (16, 32, 64)}
    _write_kt_pretty(p, _kt_cache(recs))
    lines = p.read_text().splitlines()
    n = next(i for i, s in enumerate(lines) if s.startswith('"32,4,a"'))
    lines[n] = '"32,4,a": {"BLOCK_M": 32, "num_warps": 4, "flag": "a", "time": 1.0,,},'
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=rf"{p}:{n + 1}: not valid JSON"):
        import_kernel_tuner(p)
    with pytest.raises(DatasetError, match=rf"{p}:{n + 1}:"):
        load_any(p)


def test_kernel_tuner_structural_errors(tmp_path):
    p = tmp_path / "x.json"
    for key in ("cache", "tune_params"):
        obj = _kt_cache({"16,4,a": _rec(16, 4, "a", 1.0)})
        del obj[key]
        p.write_text(json.dumps(obj))
        with pytest.raises(DatasetError, match=rf"{p}.*missing key '{key}'"):
            import_kernel_tuner(p)
    p.write_text(json.dumps(_kt_cache({"16,4,a": {"BLOCK_M": 16, "num_warps": 4, "flag": "a"}})))
    with pytest.raises(DatasetError, match="lacks key 'time'"):
        import_kernel_tuner(p)
    p.write_text(json.dumps(_kt_cache({"16,4,a": _rec(99, 4, "a", 1.0)})))
    with pytest.raises(DatasetError, match="value 99 of 'BLOCK_M'"):
        import_kernel_tuner(p)
    p.write_text(json.dumps([1, 2, 3]))
    with pytest.raises(DatasetError, match="not a"):
        import_kernel_tuner(p)
    with pytest.raises(DatasetError, match="not a dataset abductune knows"):
        load_any(p)
    with pytest.raises(DatasetError, match="does not exist"):
        import_kernel_tuner(tmp_path / "nope.json")
    with pytest.raises(DatasetError, match="does not exist"):
        load_any(tmp_path / "nope.json")
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(DatasetError, match="empty"):
        import_kernel_tuner(tmp_path / "empty.json")


# -------------------------------------------------------------------- T4 export

def _synthetic_dataset(tuple_param: bool = True) -> Dataset:
    params = [Pow2("BLOCK_M", 16, 64), Choice("num_warps", [4, 8]), Bool("EVEN_K")]
    if tuple_param:  # T4 keeps tuple values (our JSONL format does not yet: see test_dataset_format)
        params.append(Choice("layout", [(1, 2), (2, 1)]))
    space = Space(params, ["BLOCK_M * num_warps <= 256"], name="mm")
    statuses = ["ok", "compile_error", "resource_error", "runtime_error", "timeout",
                "wrong_result", "pruned"]
    recs = []
    for i, cfg in enumerate(space.valid_configs()):
        st = statuses[i % len(statuses)]
        if st == "ok":
            m = Measurement(cfg, "ok", time_ms=0.1 + i / 7, samples_ms=[0.1 + i / 7, 0.2 + i / 7],
                            compile_s=0.5 + i / 100, bench_s=0.01 * i, registers=64 + i,
                            spills=0, smem_bytes=1024 * i, extra={"achieved_flops": 1e12 + i})
        else:
            m = Measurement(cfg, st, compile_s=0.25 * i, bench_s=0.001 * i, error=f"err {i}")
        recs.append(m)
    hw = HardwareInfo("H100-SXM", "nvidia", (9, 0), 132)
    prob = Problem("mm", "matmul", {"M": 128, "N": 256, "K": 64}, {"a": "fp16", "b": "fp16"},
                   flops=2 * 128 * 256 * 64, min_bytes=1e5, hardware=hw, source_hash="abc")
    return Dataset(prob, space.to_dict(), recs, {"triton": "3.4"}, restricted_to_records=False,
                   source="synthetic", note="n")


def _assert_same_records(a: Dataset, b: Dataset):
    assert len(a.records) == len(b.records)
    for x, y in zip(a.records, b.records):
        assert x.config == y.config
        assert x.status == y.status
        assert x.time_ms == pytest.approx(y.time_ms)
        assert x.samples_ms == pytest.approx(y.samples_ms)
        assert x.compile_s == pytest.approx(y.compile_s)
        assert x.bench_s == pytest.approx(y.bench_s)


@pytest.mark.parametrize("name", ["out.json", "out.json.gz"])
def test_t4_export_round_trip_synthetic(tmp_path, name):
    ds = _synthetic_dataset()
    p = tmp_path / name
    export_t4(ds, p)
    obj = json.loads(gzip.decompress(p.read_bytes()) if name.endswith(".gz") else p.read_text())
    assert obj["schema_version"] == "1.0.0" and detect_format(obj) == "t4"
    assert {r["invalidity"] for r in obj["results"]} <= set(INVALIDITY)
    back = import_t4(p)
    _assert_same_records(ds, back)
    for x, y in zip(ds.records, back.records):
        assert (x.registers, x.spills, x.smem_bytes, x.error) == (y.registers, y.spills,
                                                                  y.smem_bytes, y.error)
        assert x.extra == y.extra
    assert back.problem == ds.problem
    assert Space.from_dict(back.space_dict).fingerprint() == Space.from_dict(ds.space_dict).fingerprint()
    assert back.restricted_to_records is False and back.toolchain["triton"] == "3.4"
    assert load_any(p).records[2].status == "resource_error"
    # overrides still apply to our own export
    assert import_t4(p, dims={"M": 1}).problem.dims == {"M": 1}


def test_t4_export_round_trip_public(tmp_path):
    ds = load_public(PNPOLY)
    p = tmp_path / "pnpoly_T4.json.gz"
    export_t4(ds, p)
    back = import_t4(p)
    _assert_same_records(ds, back)
    assert back.optimum().config == ds.optimum().config
    assert back.problem == ds.problem and back.restricted_to_records
    # and the T4 file imported from the public T4 example re-exports to itself
    t4 = load_public(T4_CONV_A100)
    q = tmp_path / "conv.json"
    export_t4(t4, q)
    _assert_same_records(t4, import_t4(q))


def test_t4_errors(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"schema_version": "1.0.0"}))
    with pytest.raises(DatasetError, match="missing key 'results'"):
        import_t4(p)
    good = {"configuration": {"a": 1}, "times": {"runtimes": [1.0]}, "invalidity": "correct",
            "correctness": 1}
    p.write_text(json.dumps({"schema_version": "1.0.0", "results": [good, {**good, "invalidity": "meh"}]}))
    with pytest.raises(DatasetError, match=r"results\[1\].*invalidity 'meh'"):
        import_t4(p)
    p.write_text(json.dumps({"schema_version": "1.0.0", "results": [good, {"times": {}}]}))
    with pytest.raises(DatasetError, match=r"results\[1\] lacks key 'configuration'"):
        import_t4(p)
    p.write_text(json.dumps({"schema_version": "1.0.0", "metadata": {"timeunit": "eons"},
                             "results": [good]}))
    with pytest.raises(DatasetError, match="metadata.timeunit 'eons'"):
        import_t4(p)
    p.write_text(json.dumps({"schema_version": "1.0.0", "metadata": {"timeunit": "seconds"},
                             "results": [good]}))
    ds = import_t4(p)
    assert ds.records[0].time_ms == 1000.0 and ds.records[0].samples_ms == (1000.0,)


def test_load_any_reads_our_format(tmp_path):
    ds = _synthetic_dataset(tuple_param=False)
    p = tmp_path / "d.jsonl.gz"
    write_dataset(ds, p)
    back = load_any(p)
    assert back.problem == ds.problem and len(back.records) == len(ds.records)
    with pytest.raises(DatasetError, match="overrides"):
        load_any(p, dims={"M": 1})


def test_public_data_dir_env_override(tmp_path, monkeypatch):
    monkeypatch.setenv("ABDUCTUNE_PUBLIC_DATA", str(tmp_path))
    assert public_data_dir() == tmp_path.resolve()
    assert list_public_datasets() == []
    monkeypatch.setenv("ABDUCTUNE_PUBLIC_DATA", str(tmp_path / "missing"))
    assert public_data_dir() is None
    assert list_public_datasets() == [] and load_manifest() == []


def test_import_dtypes_fills_flops_and_bytes_for_a_kernel_tuner_cache_and_a_t4_file(tmp_path):
    """`import --dtypes` makes an imported matmul as complete as a recorded one: dtypes, FLOPs and
    minimum bytes in the header; a bad --dtypes is one line with exit 2; a dataset without dtypes
    says once what diagnosis cannot do."""
    import json as _json

    from click.testing import CliRunner

    from abductune.cli import main
    from abductune.datasets.format import read_dataset

    cache = {"device_name": "NVIDIA H100", "kernel_name": "gemm", "problem_size": [256, 256, 256],
             "tune_params_keys": ["BM", "BN"], "tune_params": {"BM": [16, 32], "BN": [16, 32]},
             "cache": {f"{m},{n}": {"BM": m, "BN": n, "time": 1.0 + m / 100 + n / 1000, "times": [1.0]}
                       for m in (16, 32) for n in (16, 32)}}
    src = tmp_path / "kt.json"
    src.write_text(_json.dumps(cache))
    before = src.read_bytes()
    out = tmp_path / "kt.jsonl.gz"
    r = CliRunner().invoke(main, ["import", str(src), str(out), "--kernel-class", "matmul", "--dims",
                                  "M=256,N=256,K=256", "--dtypes", "a=fp16,b=fp16,c=fp32"])
    assert r.exit_code == 0, r.output
    p = read_dataset(out).problem
    assert p.dtypes == {"a": "fp16", "b": "fp16", "c": "fp32"}
    assert p.flops == 2.0 * 256 ** 3
    assert p.min_bytes == 256 * 256 * (2 + 2 + 4)
    bad = CliRunner().invoke(main, ["import", str(src), str(tmp_path / "x.jsonl.gz"), "--dtypes", "a=fp99"])
    assert bad.exit_code == 2 and "unknown dtype 'fp99'" in bad.output
    assert src.read_bytes() == before

    from abductune.datasets import public

    public._SAID_NO_DTYPES.clear()
    import logging

    records: list[logging.LogRecord] = []
    h = logging.Handler()
    h.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("abductune.datasets.public").addHandler(h)
    try:
        for _ in range(2):
            public.load_any(src, kernel_class="matmul", dims={"M": 256, "N": 256, "K": 256})
    finally:
        logging.getLogger("abductune.datasets.public").removeHandler(h)
    said = [r for r in records if "has no dtypes" in r.getMessage()]
    assert len(said) == 1 and "roofline" in said[0].getMessage()


def test_import_dtypes_on_a_t4_file():
    from public_data import require_public_data

    from abductune.datasets.public import load_any

    t4 = require_public_data() / "t4_examples" / "ktt_coulombsum3d_RTX_2080_Ti_T4.json.gz"
    before = t4.read_bytes()
    ds = load_any(t4, kernel_class="elementwise", dims={"numel": 1 << 20}, dtypes={"x": "fp32", "y": "fp32"})
    assert ds.problem.dtypes == {"x": "fp32", "y": "fp32"}
    assert ds.problem.flops == float(1 << 20) and ds.problem.min_bytes == (1 << 20) * 8.0
    assert t4.read_bytes() == before
