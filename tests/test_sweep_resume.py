"""A sweep killed mid-write resumes from its partial file: the torn last line is dropped,
every complete record is kept (no GPU needed: this is the file logic)."""
from __future__ import annotations

import json

from abductune.datasets.format import Dataset, append_records
from abductune.measurement import Measurement
from abductune.problem import Problem
from abductune.space import Pow2, Space
from abductune.sweep import parse_shapes, read_partial, shape_name

import pytest


def test_read_partial_drops_a_torn_line_and_keeps_the_rest(tmp_path):
    space = Space([Pow2("BLOCK", 16, 128)])
    ds = Dataset(Problem("k", dims={"n": 8}), space.to_dict(), [])
    p = tmp_path / "n8.jsonl"
    p.write_text(json.dumps(ds.header()) + "\n")
    append_records(p, [Measurement({"BLOCK": 16}, time_ms=1.0), Measurement({"BLOCK": 32}, time_ms=2.0)])
    with open(p, "a") as f:
        f.write('{"config": {"BLOCK": 64}, "status": "o')  # killed mid-write
    head, recs = read_partial(p)
    assert head["format"] == "abductune-dataset"
    assert [m.config["BLOCK"] for m in recs] == [16, 32] and recs[1].time_ms == 2.0


def test_read_partial_of_a_missing_file_is_empty(tmp_path):
    assert read_partial(tmp_path / "nope.jsonl") == (None, [])


def test_shapes_parse_and_name():
    shapes = parse_shapes("M=16,N=4096,K=4096; M=1,N=8,K=16")
    assert shapes == [{"M": 16, "N": 4096, "K": 4096}, {"M": 1, "N": 8, "K": 16}]
    assert shape_name(shapes[0]) == "M16_N4096_K4096"
    from abductune.errors import AbductuneError
    with pytest.raises(AbductuneError, match="M=16,N=4096"):
        parse_shapes("M16")


def test_a_long_key_gets_a_file_name_a_file_system_takes_and_keeps_shapes_apart():
    """A conv3d's key of 22 dims spells 280 characters, past the 255 a file name may have: the
    name is cut and a hash of the whole appended, so two shapes that differ at the end differ."""
    from abductune.datasets.bundled import MAX_SHAPE_NAME

    dims = {f"dim_number_{i}": 4096 + i for i in range(22)}
    other = {**dims, "dim_number_21": 1}
    a, b = shape_name(dims), shape_name(other)
    assert len(a) <= MAX_SHAPE_NAME and len(b) <= MAX_SHAPE_NAME and a != b
    assert a.startswith("dim_number_04096_dim_number_14097")
    assert shape_name({"M": 1, "N": 2}) == "M1_N2"
