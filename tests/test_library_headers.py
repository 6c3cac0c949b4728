"""benchmarks/library_headers.py: a sampled recording that ran out of device time keeps its
sample as the replay's space, the configs never recorded stated as timeouts saying why (session
25's FlagGems max pool), and a finished one is left as it is."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import library_headers as lh  # noqa: E402

from abductune.datasets.format import Dataset  # noqa: E402
from abductune.measurement import Measurement  # noqa: E402
from abductune.problem import Problem  # noqa: E402
from abductune.space import Choice, Space  # noqa: E402
from abductune.sweep import sample_configs  # noqa: E402


def _sampled(keep: int) -> tuple[Dataset, list[dict]]:
    space = Space([Choice("BLOCK_H", [4, 8, 16, 32, 64, 128], role="tile:H"),
                   Choice("BLOCK_W", [4, 8, 16, 32, 64, 128], role="tile:W"),
                   Choice("num_warps", [1, 2, 4, 8, 16], role="warps")], name="pool")
    listed = [{"BLOCK_H": 16, "BLOCK_W": 16, "num_warps": 4}]
    want, meta = sample_configs(space, listed, size=20, seed=0, exhaustive_max=0)
    records = [Measurement(c, "ok", time_ms=1.0 + i) for i, c in enumerate(want[:keep])]
    ds = Dataset(Problem("pool", "other", {"out_h": 28}, {}), space.to_dict(), records,
                 restricted_to_records=True, meta={"fixed_configs": listed, "sample": meta})
    return ds, want


def test_the_sample_configs_without_a_record_are_found_in_the_samples_order():
    ds, want = _sampled(keep=15)
    assert len(want) >= 20 and {"BLOCK_H": 16, "BLOCK_W": 16, "num_warps": 4} in want  # 20 drawn, the list's
    assert lh._unsampled(ds) == [dict(c) for c in want[15:]]
    finished, _ = _sampled(keep=len(want))
    assert lh._unsampled(finished) == []


def test_a_run_out_recording_gets_its_header_and_timeouts_for_the_rest(tmp_path, monkeypatch):
    from abductune.datasets.format import read_dataset, write_dataset

    ds, want = _sampled(keep=15)
    dims = {"out_h": 14, "out_w": 14, "kernel_h": 2, "kernel_w": 2, "stride_h": 2, "stride_w": 2}
    ds = Dataset(Problem("max_pool2d_forward_kernel", "other", dims, {"input_ptr": "bf16"}), ds.space_dict,
                 ds.records, restricted_to_records=True, meta=ds.meta)
    raw = tmp_path / "raw" / "max_pool2d_forward_kernel"
    raw.mkdir(parents=True)
    write_dataset(ds, raw / "shape.jsonl.gz")
    monkeypatch.setattr(sys, "argv", ["library_headers.py", str(tmp_path / "raw"), str(tmp_path / "out")])
    lh.main()
    out = read_dataset(next((tmp_path / "out" / "flaggems_max_pool2d_bf16").glob("*.jsonl.gz")))
    assert out.problem.dims["batch"] == 16 and out.problem.dims["channels"] == 512 and out.problem.flops > 0
    late = [m for m in out.records if m.status == "timeout"]
    assert len(late) == len(want) - 15 == out.meta["unfinished_compiles"]
    assert all(m.error == lh.UNFINISHED for m in late) and out.meta["call"]["padding"] == 0
