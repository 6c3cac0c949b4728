"""Record mode (`patch_triton(record=...)`, what `abductune sweep --call` sets) keeps what it
measured: each config is appended to `<record>/<kernel>/<shape>.jsonl` as it lands, a run killed
after k configs leaves those k for `sweep.read_partial`, and a rerun measures only the rest. It
says how far it got (progress lines) and takes a sample size (`record_sample`).

On the CPU under Triton's interpreter, in the interpreted child process (`autotune_kernels`),
with an injected timer (config -> ms) that can stop the run after k configs."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from autotune_kernels import INTERPRET, interpreted

if INTERPRET:  # in the interpreted child process: TRITON_INTERPRET=1 was set before triton is imported
    torch = pytest.importorskip("torch")
    triton = pytest.importorskip("triton")
    import triton.language as tl

    import abductune
    from abductune import sweep as sweep_mod
    from abductune.autotune import record as record_mod
    from abductune.errors import AbductuneError
    from abductune.sweep import read_partial

    @triton.jit
    def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)

    LIST = [triton.Config({"BLOCK": 32}, num_warps=1), triton.Config({"BLOCK": 64}, num_warps=2),
            triton.Config({"BLOCK": 128}, num_warps=1)]


class Timer:
    """ms from the config; KeyboardInterrupt at call number `stop_at` (1-based), as Ctrl-C or
    SIGTERM would land mid-run; configs of BLOCK `fail_block` raise (a failing config)."""

    def __init__(self, stop_at: int | None = None, fail_block: int | None = None):
        self.stop_at, self.fail_block, self.seen = stop_at, fail_block, []

    def __call__(self, cfg, launch):
        if self.stop_at is not None and len(self.seen) + 1 == self.stop_at:
            raise KeyboardInterrupt("stopped by the test")
        self.seen.append(dict(cfg))
        if cfg.get("BLOCK") == self.fail_block:
            raise RuntimeError("this config fails")
        return [1.0 + cfg["BLOCK"] / 1000 + cfg["num_warps"] / 100]


def _run(record: Path, store: Path, timer: Timer, n: int = 1000, **options) -> object:
    k = abductune.autotune(configs=LIST, key=["n"], record=record, store=store, timer=timer, judge=False,
                           **options)(add_kernel)
    x, y = torch.randn(n), torch.randn(n)
    out = torch.empty_like(x)
    k[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
    assert torch.allclose(out, x + y)
    return k


def _plan(k) -> list[tuple]:
    return [k.space.key(c) for c in k.strategy_options["configs"]]


def _final_records(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f][1:]


@interpreted
def test_a_killed_record_run_keeps_what_it_measured_and_a_rerun_measures_only_the_rest(tmp_path):
    rec = tmp_path / "rec"
    partial, final = rec / "add_kernel" / "n1000.jsonl", rec / "add_kernel" / "n1000.jsonl.gz"
    with pytest.raises(KeyboardInterrupt):
        _run(rec, tmp_path / "a.sqlite", Timer(stop_at=8))  # 7 configs measured, the 8th interrupted
    assert partial.exists() and not final.exists()
    head, recs = read_partial(partial)
    assert head is not None and head["kernel"]["name"] == "add_kernel" and head["problem"]["dims"] == {"n": 1000}
    assert len(recs) == 7 and len({json.dumps(m.config, sort_keys=True) for m in recs}) == 7
    kept = [dict(m.config) for m in recs]

    # the rerun, as on a fresh machine (another store): only the configs not in the file are measured
    timer = Timer()
    k = _run(rec, tmp_path / "b.sqlite", timer)
    plan = _plan(k)
    assert len(plan) > 10
    measured = [k.space.key(c) for c in timer.seen]
    assert len(measured) == len(set(measured)) == len(plan) - 7
    assert not set(measured) & {k.space.key(c) for c in kept}
    assert final.exists() and not partial.exists()
    rows = _final_records(final)
    keys = [k.space.key(r["config"]) for r in rows]
    assert len(keys) == len(set(keys)) == len(plan) and set(keys) == set(plan)  # every config once
    assert k.recorded == [final]
    # a finished key is read back as well: a third run (another fresh store) measures nothing of it
    timer = Timer()
    k = _run(rec, tmp_path / "c.sqlite", timer)
    assert timer.seen == [] and len(_final_records(final)) == len(plan) and not partial.exists()


@interpreted
def test_a_rerun_on_the_same_store_records_the_whole_key_again(tmp_path):
    """The store of the killed run answers its configs (the Session's memo): the dataset still
    holds every config, once, and nothing is measured twice."""
    rec, store = tmp_path / "rec", tmp_path / "s.sqlite"
    with pytest.raises(KeyboardInterrupt):
        _run(rec, store, Timer(stop_at=6))
    timer = Timer()
    k = _run(rec, store, timer)
    assert len(timer.seen) == len(_plan(k)) - 5
    keys = [k.space.key(r["config"]) for r in _final_records(rec / "add_kernel" / "n1000.jsonl.gz")]
    assert len(keys) == len(set(keys)) == len(_plan(k))
    # and a third run into another folder with that store: answered from the store, written whole
    timer = Timer()
    k = _run(tmp_path / "other", store, timer)
    assert timer.seen == []
    assert len(_final_records(tmp_path / "other" / "add_kernel" / "n1000.jsonl.gz")) == len(_plan(k))


@interpreted
def test_record_mode_says_how_far_it_got(tmp_path, monkeypatch):
    lines: list[str] = []
    monkeypatch.setattr(record_mod, "PROGRESS_EVERY_S", 0.0)  # a line per config
    k = _run(tmp_path / "rec", tmp_path / "s.sqlite", Timer(fail_block=256), record_progress=lines.append)
    total = len(_plan(k))
    failing = sum(1 for c in k.strategy_options["configs"] if c["BLOCK"] == 256)
    assert failing > 0
    assert lines[0].startswith(f"record add_kernel n1000: {total} configs to record; appending to ")
    middle = lines[1:-1]
    assert len(middle) == total
    assert middle[0].startswith(f"record add_kernel n1000: 1/{total} configs, ")
    assert all("failed" in s and "elapsed" in s for s in middle)
    assert any("left" in s for s in middle)
    assert lines[-1].startswith(f"record add_kernel n1000: done, {total}/{total} configs, {failing} failed, ")
    assert lines[-1].endswith(f"wrote {tmp_path / 'rec' / 'add_kernel' / 'n1000.jsonl.gz'}")


@interpreted
def test_progress_lines_are_throttled_and_go_to_the_log_by_default(tmp_path, caplog):
    import logging

    with caplog.at_level(logging.INFO, logger="abductune.autotune.record"):
        _run(tmp_path / "rec", tmp_path / "s.sqlite", Timer())
    got = [r.getMessage() for r in caplog.records if r.getMessage().startswith("record add_kernel")]
    assert len(got) == 2 and "configs to record" in got[0] and "done," in got[1]  # start and end: under 10 s


@interpreted
def test_record_sample_sets_the_sample_size_of_a_space_past_the_exhaustive_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep_mod, "EXHAUSTIVE_MAX", 10)  # the grown space (45 valid configs) is sampled
    timer = Timer()
    k = _run(tmp_path / "rec", tmp_path / "s.sqlite", timer, record_sample=5)
    rows = _final_records(tmp_path / "rec" / "add_kernel" / "n1000.jsonl.gz")
    own = {k.space.key(c) for c in k._list}
    keys = {k.space.key(r["config"]) for r in rows}
    assert 5 <= len(rows) <= 5 + len(LIST) and own <= keys and len(timer.seen) == len(rows)
    assert k._record_sample["random"] == 5 and k._record_sample["valid_in_space"] == 45


@interpreted
def test_a_bad_record_sample_is_refused_in_one_line(tmp_path):
    for bad in (0, -1, True, 2.5):
        with pytest.raises(AbductuneError, match="record_sample=.*must be a positive integer"):
            abductune.autotune(configs=LIST, key=["n"], record=tmp_path, record_sample=bad)(add_kernel)
        with pytest.raises(AbductuneError, match="patch_triton: record_sample=.*must be a positive integer"):
            abductune.patch_triton(record=tmp_path, record_sample=bad)
    with pytest.raises(AbductuneError, match="go with record=DIR"):
        abductune.patch_triton(record_sample=5)
    with pytest.raises(AbductuneError, match="record_progress"):
        abductune.patch_triton(record=tmp_path, record_progress="stderr")
