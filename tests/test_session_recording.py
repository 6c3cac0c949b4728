"""Callers that measure in their own order (the sweep) still record through a Session: a run
in the journal, ids and kinds on every row, done or interrupted."""
from __future__ import annotations

import pytest

from abductune.datasets.bundled import bundled_datasets
from abductune.datasets.format import read_dataset
from abductune.errors import AbductuneError
from abductune.measure.replay import ReplayEvaluator
from abductune.session import Session


def test_recording_journals_and_stores(tmp_path):
    ds = read_dataset(bundled_datasets(kernel="gelu_mul_fp16")[0])
    ev = ReplayEvaluator(ds)
    path = str(tmp_path / "s.sqlite")
    with Session(ev, strategy="exhaustive", store=path) as s:
        with pytest.raises(AbductuneError, match="outside"):
            s.record(ev.evaluate(ev.space.valid_configs()[:1]))
        with s.recording("sweep"):
            rows = s.record(ev.evaluate(ev.space.valid_configs()[:5]))
        assert all(r.id is not None and r.kind == "search" for r in rows)
        [run] = s.store.runs()
        assert run.status == "done"
        assert s.store.by_id([run.winner_id])[0].time_ms == min(r.objective for r in rows)
        with pytest.raises(RuntimeError):
            with s.recording("sweep"):
                s.record(ev.evaluate(ev.space.valid_configs()[5:6]))
                raise RuntimeError("GPU fell off the bus")
        assert [r.status for r in s.store.runs()] == ["done", "interrupted"]
        assert len(s.store.measurements(s.context)) == 6
