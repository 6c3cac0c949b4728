"""The recorded-dataset format: round trips, atomic writes, header and record validation."""
from __future__ import annotations

import gzip
import json
import os

import pytest

from abductune.datasets import Dataset, read_dataset, write_dataset
from abductune.datasets.format import FORMAT, VERSION, append_records
from abductune.errors import DatasetError
from abductune.hardware import KNOWN_GPUS
from abductune.measurement import Measurement
from abductune.problem import Problem
from abductune.space import Bool, Choice, IntRange, Pow2, Space


def _space() -> Space:
    return Space([Pow2("BLOCK_M", 16, 128), Pow2("BLOCK_N", 16, 128), Choice("num_warps", [2, 4, 8]),
                  IntRange("num_stages", 1, 4), Bool("EVEN_K"), Choice("order", ["row", "col"])],
                 ["BLOCK_M * BLOCK_N <= 64 * 128", "num_warps * 32 <= BLOCK_M * 4 or EVEN_K"],
                 constants={"K": 64}, name="mm")


def _dataset(restricted: bool = False, every: int = 3) -> Dataset:
    space = _space()
    recs = []
    statuses = ["ok", "ok", "compile_error", "ok", "resource_error", "runtime_error", "timeout",
                "wrong_result", "pruned"]
    for i, cfg in enumerate(space.valid_configs()[::every]):
        st = statuses[i % len(statuses)]
        if st == "ok":
            recs.append(Measurement(cfg, "ok", time_ms=1.0 + i * 0.123456789,
                                    samples_ms=[1.0 + i * 0.1, 1.1 + i * 0.1, 1.05 + i * 0.1],
                                    compile_s=0.5 + i / 1000, bench_s=0.02 * (i % 5),
                                    registers=96, spills=i % 2, smem_bytes=16384,
                                    extra={"flops_frac": 0.5}))
        else:
            recs.append(Measurement(cfg, st, compile_s=0.3, bench_s=0.0, error=f"{st} #{i}"))
    prob = Problem("matmul_kernel", "matmul", {"M": 4096, "N": 4096, "K": 64},
                   {"a": "fp16", "b": "fp16"}, flops=2 * 4096 * 4096 * 64.0, min_bytes=3e7,
                   hardware=KNOWN_GPUS["H100-SXM"], source_hash="deadbeef")
    return Dataset(prob, space.to_dict(), recs, {"triton": "3.4.0", "torch": "2.8"},
                   restricted_to_records=restricted, source="unit test", note="synthetic")


def _same(a: Dataset, b: Dataset) -> None:
    assert b.problem == a.problem
    assert b.space_dict == json.loads(json.dumps(a.space_dict))
    assert Space.from_dict(b.space_dict).fingerprint() == Space.from_dict(a.space_dict).fingerprint()
    assert [m.to_dict() for m in b.records] == [m.to_dict() for m in a.records]
    assert (b.toolchain, b.restricted_to_records, b.source, b.note) == \
        (a.toolchain, a.restricted_to_records, a.source, a.note)


@pytest.mark.parametrize("name", ["d.jsonl", "d.jsonl.gz"])
@pytest.mark.parametrize("restricted", [False, True])
def test_round_trip(tmp_path, name, restricted):
    ds = _dataset(restricted)
    p = tmp_path / name
    write_dataset(ds, p)
    if name.endswith(".gz"):
        with gzip.open(p, "rt") as f:
            assert json.loads(f.readline())["format"] == FORMAT
    else:
        assert json.loads(p.read_text().splitlines()[0])["version"] == VERSION
    back = read_dataset(p)
    _same(ds, back)
    assert back.path == str(p) and back.name == "d"
    assert back.optimum().config == ds.optimum().config
    assert len(back.space()) == (len(ds.records) if restricted else len(ds.space()))
    # the round trip is a fixed point
    q = tmp_path / ("again_" + name)
    write_dataset(back, q)
    _same(back, read_dataset(q))


def test_atomic_write_leaves_no_temp_and_keeps_old_file_on_failure(tmp_path):
    ds = _dataset()
    p = tmp_path / "d.jsonl"
    write_dataset(ds, p)
    assert sorted(os.listdir(tmp_path)) == ["d.jsonl"]
    before = p.read_bytes()
    bad = _dataset()
    bad.records[5].extra["oops"] = object()  # not JSON: the write dies halfway
    with pytest.raises(TypeError):
        write_dataset(bad, p)
    assert p.read_bytes() == before  # the old dataset is intact
    _same(ds, read_dataset(p))


def test_append_records_then_read(tmp_path):
    ds = _dataset()
    head, tail = ds.records[:5], ds.records[5:]
    p = tmp_path / "growing.jsonl"
    write_dataset(Dataset(ds.problem, ds.space_dict, head, ds.toolchain), p)
    append_records(p, tail)
    assert [m.to_dict() for m in read_dataset(p).records] == [m.to_dict() for m in ds.records]


def _write_lines(p, objs):
    p.write_text("".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs))


def test_header_errors(tmp_path):
    ds = _dataset()
    head = ds.header()
    rec = ds.records[0].to_dict()
    p = tmp_path / "h.jsonl"

    _write_lines(p, [{**head, "format": "something-else"}, rec])
    with pytest.raises(DatasetError, match=rf"{p}:1: not an abductune dataset"):
        read_dataset(p)

    _write_lines(p, [{**head, "version": VERSION + 1}, rec])
    with pytest.raises(DatasetError, match=rf"{p}:1: format version {VERSION + 1} is newer"):
        read_dataset(p)

    _write_lines(p, [{k: v for k, v in head.items() if k != "problem"}, rec])
    with pytest.raises(DatasetError, match=rf"{p}:1: malformed header"):
        read_dataset(p)

    bad_space = {**head, "space": {**head["space"], "constraints": ["__import__('os')"]}}
    _write_lines(p, [bad_space, rec])
    with pytest.raises(DatasetError, match=rf"{p}:1: malformed header"):
        read_dataset(p)

    p.write_text("")
    with pytest.raises(DatasetError, match="empty file"):
        read_dataset(p)
    with pytest.raises(DatasetError, match="does not exist"):
        read_dataset(tmp_path / "missing.jsonl")


@pytest.mark.parametrize("bad, message", [
    ({"status": "ok"}, "malformed record"),  # no config
    ({"config": {"BLOCK_M": 16}, "status": "ok"}, "config lacks parameter"),
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ("STATUS", "malformed record"),  # unknown status, filled in below
])
def test_malformed_record_names_path_and_line(tmp_path, bad, message):
    ds = _dataset()
    recs = [m.to_dict() for m in ds.records[:6]]
    if bad == "STATUS":
        bad = {**recs[0], "status": "exploded"}
    lines = [ds.header(), *recs[:4], bad, *recs[4:]]
    p = tmp_path / "r.jsonl"
    _write_lines(p, lines)
    with pytest.raises(DatasetError, match=rf"{p}:6: {message}"):
        read_dataset(p)


def test_blank_lines_are_skipped_but_counted(tmp_path):
    ds = _dataset()
    p = tmp_path / "b.jsonl"
    _write_lines(p, [ds.header(), ds.records[0].to_dict(), "", "   ", "{oops"])
    with pytest.raises(DatasetError, match=rf"{p}:5:"):
        read_dataset(p)


def test_truncated_gzip_names_path(tmp_path):
    ds = _dataset(every=1)
    p = tmp_path / "t.jsonl.gz"
    write_dataset(ds, p)
    raw = p.read_bytes()
    p.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(DatasetError, match=rf"{p}:\d+: .*(corrupt|truncated)"):
        read_dataset(p)


def test_restricted_to_records_space_admits_only_recorded_configs():
    ds = _dataset(restricted=True, every=4)
    full = Space.from_dict(ds.space_dict)
    space = ds.space()
    recorded = {full.key(m.config) for m in ds.records}
    assert {space.key(c) for c in space.valid_configs()} == recorded
    assert len(space) == len(ds.records) < len(full)
    absent = next(c for c in full.valid_configs() if full.key(c) not in recorded)
    assert absent in full and absent not in space
    assert all(m.config in space for m in ds.records)
    for c in space.valid_configs()[:20]:
        assert all(n in space for n in space.neighbours(c, radius=2))
    assert space.fingerprint() != full.fingerprint()
    # unrestricted: the space's own constraints decide
    free = _dataset(restricted=False, every=4)
    assert len(free.space()) == len(full) and absent in free.space()


def test_optimum_needs_a_success():
    ds = _dataset()
    ds.records = [m for m in ds.records if not m.ok]
    with pytest.raises(DatasetError, match="no successful measurement"):
        ds.optimum()


def test_tuple_valued_choice_round_trip(tmp_path):
    space = Space([Choice("layout", [(1, 2), (2, 1)]), Pow2("BLOCK", 16, 32)])
    recs = [Measurement(c, "ok", time_ms=1.0) for c in space.valid_configs()]
    ds = Dataset(Problem("k"), space.to_dict(), recs)
    p = tmp_path / "tuple.jsonl"
    write_dataset(ds, p)
    back = read_dataset(p)
    assert [m.config for m in back.records] == [m.config for m in recs]
    assert len(back.space()) == 4


def test_a_fixed_sample_of_a_large_space_is_trusted_once_recorded_whole(tmp_path):
    """`sweep` records spaces past 1,000 valid configs as a fixed sample (plus the kernel's own
    list); replay trusts its optimum when every sampled config has a record, and says it is a sample."""
    from abductune.datasets.format import Dataset, read_dataset, require_exhaustive, write_dataset
    from abductune.errors import DatasetError
    from abductune.measurement import Measurement
    from abductune.problem import Problem
    from abductune.space import Pow2, Space
    from abductune.sweep import sample_configs

    space = Space([Pow2("A", 1, 64), Pow2("B", 1, 64), Pow2("C", 1, 64), Pow2("D", 1, 4)])  # 1,029 configs
    own = [{"A": 64, "B": 64, "C": 64, "D": 4}]
    chosen, sample = sample_configs(space, own, size=50, seed=3)
    assert sample is not None and sample["valid_in_space"] == 1029 and len(chosen) == sample["size"]
    assert space.key(own[0]) in {space.key(c) for c in chosen}
    assert chosen == sample_configs(space, own, size=50, seed=3)[0]  # fixed: same for every shape and strategy
    recs = [Measurement(c, "ok", time_ms=1.0 + i / 100) for i, c in enumerate(chosen)]
    ds = Dataset(Problem("k", "other", {"n": 1}), space.to_dict(), recs, restricted_to_records=True,
                 meta={"sample": sample})
    path = tmp_path / "s.jsonl.gz"
    write_dataset(ds, path)
    back = read_dataset(path)
    cov = require_exhaustive(back)
    assert cov.trusted() and cov.valid == len(chosen) and "fixed sample of the space's 1029" in cov.describe()
    assert len(back.space().valid_configs()) == len(chosen)  # the search space is the sample
    back.records = back.records[:-1]
    with pytest.raises(DatasetError, match="not exhaustive"):
        require_exhaustive(back)
