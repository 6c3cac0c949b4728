"""`abductune sweep --call` keeps what it measured when it is killed (SIGTERM from `timeout`),
says how far it got on stderr, resumes, and takes `--sample N`. Run on the CPU under Triton's
interpreter, in a child process, as tests/test_sweep_call.py does."""
from __future__ import annotations

import gzip
import json
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("triton")
pytest.importorskip("torch")

from test_sweep_call import LIBRARY, _sweep  # noqa: E402

# the library's own do_bench (a @triton.autotune option) sends this process SIGTERM, as `timeout`
# does, at its call number STOP_AT; times are the config's, so every run is alike
LIBRARY_TIMED = LIBRARY.replace('key=["n"])', 'key=["n"], do_bench=_bench)').replace(
    "import triton.language as tl\n", textwrap.dedent('''\
    import triton.language as tl
    import os
    import signal

    CALLS = [0]


    def _bench(fn, quantiles=None):
        CALLS[0] += 1
        if CALLS[0] == int(os.environ.get("STOP_AT", "0")):
            os.kill(os.getpid(), signal.SIGTERM)
        fn()
        return [1.0, 1.0, 1.0] if quantiles else 1.0
    '''))

CALLER = textwrap.dedent('''
    import torch


    def run():
        import thirdparty
        x, y = torch.randn(1000), torch.randn(1000)
        assert torch.allclose(thirdparty.add(x, y), x + y)


    def run_sampled():  # a limit of 10 valid configs: the grown space (45) is sampled
        from abductune import sweep
        sweep.EXHAUSTIVE_MAX = 10
        run()
''')


def _setup(tmp_path: Path) -> None:
    assert "do_bench=_bench" in LIBRARY_TIMED and "def _bench" in LIBRARY_TIMED
    (tmp_path / "thirdparty.py").write_text(LIBRARY_TIMED)
    (tmp_path / "caller.py").write_text(CALLER)


def _records(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f][1:]


def test_a_sweep_call_killed_by_sigterm_keeps_its_configs_and_a_rerun_measures_the_rest(tmp_path, monkeypatch):
    from abductune.sweep import read_partial

    _setup(tmp_path)
    out = tmp_path / "out"
    monkeypatch.setenv("STOP_AT", "8")
    r = _sweep(tmp_path, "--call", "caller:run", "--out", str(out))
    assert r.returncode == 130, r.stdout + r.stderr
    assert "interrupted:" in r.stderr and "7 measurement(s) of unfinished shapes kept" in r.stderr
    assert "Traceback" not in r.stderr
    assert "record add_kernel n1000: 45 configs to record; appending to" in r.stderr  # the start line
    partial = out / "add_kernel" / "n1000.jsonl"
    head, recs = read_partial(partial)
    assert head is not None and len(recs) == 7

    monkeypatch.setenv("STOP_AT", "0")
    r = _sweep(tmp_path, "--call", "caller:run", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "7 recorded earlier under" in r.stderr and "measuring the other 38" in r.stderr
    assert "record add_kernel n1000: done, 45/45 configs, 0 failed" in r.stderr
    final = out / "add_kernel" / "n1000.jsonl.gz"
    assert final.exists() and not partial.exists() and f"wrote {final}" in r.stdout
    keys = [json.dumps(m["config"], sort_keys=True) for m in _records(final)]
    assert len(keys) == len(set(keys)) == 45
    assert {json.dumps(dict(m.config), sort_keys=True) for m in recs} <= set(keys)


def test_sweep_call_sample_sets_the_sample_size_and_must_be_positive(tmp_path):
    _setup(tmp_path)
    out = tmp_path / "out"
    r = _sweep(tmp_path, "--call", "caller:run_sampled", "--out", str(out), "--sample", "5")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = _records(out / "add_kernel" / "n1000.jsonl.gz")
    assert 5 <= len(rows) <= 5 + 3  # the sample and the kernel's own list of 3
    for bad in ("0", "-1"):
        r = _sweep(tmp_path, "--call", "caller:run", "--out", str(tmp_path / "o"), "--sample", bad)
        assert r.returncode == 2, r.stdout + r.stderr
        assert r.stderr.strip() == f"error: --sample must be at least 1 (configs sampled from a space past 1,000 " \
                                   f"valid configs), got {bad}"
        r = _sweep(tmp_path, "--kernel", "matmul", "--out", str(tmp_path / "o"), "--sample", bad)
        assert r.returncode == 2 and "--sample must be at least 1" in r.stderr
