"""Result files are written atomically, with the user's umask, and an unwritable location is an
AbductuneError naming the path (checked before long work by `check_writable`)."""
from __future__ import annotations

import errno
import gzip
import json
import os
import stat
import tempfile

import pytest

from abductune.datasets.format import Dataset, read_dataset, write_dataset
from abductune.datasets.t4 import export_t4, import_t4
from abductune.errors import AbductuneError
from abductune.files import (atomic_write_bytes, atomic_write_text, atomic_writer, check_writable,
                             current_umask)
from abductune.measurement import Measurement
from abductune.problem import Problem
from abductune.space import Pow2, Space


@pytest.fixture
def umask():
    """Set a umask for one test and restore the old one."""
    old = os.umask(0o022)
    os.umask(old)
    yield lambda m: os.umask(m)
    os.umask(old)


def _mode(p) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def _dataset() -> Dataset:
    space = Space([Pow2("BLOCK", 16, 64)])
    return Dataset(Problem("k", dims={"n": 8}), space.to_dict(),
                   [Measurement({"BLOCK": b}, time_ms=float(b)) for b in (16, 32, 64)])


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_permissions_follow_the_umask(tmp_path, umask, mask):
    umask(mask)
    assert current_umask() == mask
    p = tmp_path / "out.json"
    atomic_write_text(p, "{}")
    assert _mode(p) == 0o666 & ~mask
    d = tmp_path / "d.jsonl.gz"
    write_dataset(_dataset(), d)  # the dataset writer used mkstemp's 0600 before
    assert _mode(d) == 0o666 & ~mask
    t = tmp_path / "t4.json"
    export_t4(_dataset(), t)
    assert _mode(t) == 0o666 & ~mask


def test_write_replaces_content_and_leaves_no_temporary_file(tmp_path):
    p = tmp_path / "a.txt"
    atomic_write_text(p, "old")
    atomic_write_bytes(p, b"new")
    assert p.read_bytes() == b"new"
    assert sorted(os.listdir(tmp_path)) == ["a.txt"]


def test_failed_write_leaves_the_old_file_intact(tmp_path):
    p = tmp_path / "a.json"
    atomic_write_text(p, '{"kept": true}')
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_writer(p) as f:
            f.write('{"half": ')
            raise RuntimeError("boom")
    assert json.loads(p.read_text()) == {"kept": True}
    assert sorted(os.listdir(tmp_path)) == ["a.json"]
    # a dataset writer that fails halfway (a record that is not JSON) keeps the old dataset
    d = tmp_path / "d.jsonl"
    write_dataset(_dataset(), d)
    before = d.read_bytes()
    bad = _dataset()
    bad.records.append(Measurement({"BLOCK": 16}, time_ms=1.0, extra={"x": object()}))
    with pytest.raises(TypeError):
        write_dataset(bad, d)
    assert d.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["a.json", "d.jsonl"]


def test_gzip_dataset_round_trips_and_names_the_final_file(tmp_path):
    p = tmp_path / "n8.jsonl.gz"
    write_dataset(_dataset(), p)
    assert [m.config["BLOCK"] for m in read_dataset(p).records] == [16, 32, 64]
    raw = p.read_bytes()
    assert raw[:2] == b"\x1f\x8b" and b".tmp" not in raw[:64]  # gzip header: no temporary name
    t = tmp_path / "x_T4.json.gz"
    export_t4(_dataset(), t)
    assert len(import_t4(t).records) == 3
    with gzip.open(t) as f:
        assert json.load(f)["schema_version"]


@pytest.mark.parametrize("fn", [check_writable, lambda p: atomic_write_text(p, "x")],
                         ids=["check_writable", "atomic_write_text"])
def test_proc_path_is_an_error_naming_it(fn):
    with pytest.raises(AbductuneError, match=r"cannot write /proc/x\.json: .*"):
        fn("/proc/x.json")


def test_missing_folder_and_folder_target(tmp_path):
    missing = tmp_path / "no" / "such" / "x.json"
    for fn in (check_writable, lambda p: atomic_write_text(p, "x"), lambda p: write_dataset(_dataset(), p)):
        with pytest.raises(AbductuneError, match=f"{missing.parent}.*does not exist"):
            fn(missing)
    with pytest.raises(AbductuneError, match="is a folder"):
        check_writable(tmp_path)
    with pytest.raises(AbductuneError, match="is a folder"):
        atomic_write_text(tmp_path, "x")
    assert check_writable(tmp_path / "ok.json") == tmp_path / "ok.json"
    assert os.listdir(tmp_path) == []  # the check leaves nothing behind


def test_read_only_folder(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "old.json").write_text("old")
    ro.chmod(0o555)
    try:
        if os.access(ro, os.W_OK):  # root ignores permission bits
            pytest.skip("running as root: a read-only folder is still writable")
        with pytest.raises(AbductuneError, match=f"cannot write {ro}/x.json: permission denied"):
            check_writable(ro / "x.json")
        with pytest.raises(AbductuneError, match=f"cannot write {ro}/old.json"):
            atomic_write_text(ro / "old.json", "new")
        assert (ro / "old.json").read_text() == "old"
    finally:
        ro.chmod(0o755)


def test_read_only_file_system_is_named(tmp_path, monkeypatch):
    """A read-only mount (which root cannot write either), simulated at the one system call."""
    def refuse(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    for fn in (check_writable, lambda p: atomic_write_text(p, "x"), lambda p: write_dataset(_dataset(), p)):
        with pytest.raises(AbductuneError, match=f"cannot write {tmp_path}/x.json: the file system is read-only"):
            fn(tmp_path / "x.json")


def test_disk_full_during_write_keeps_old_file(tmp_path, monkeypatch):
    p = tmp_path / "a.json"
    atomic_write_text(p, "old")
    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(AbductuneError, match=f"cannot write {p}: no space left"):
        atomic_write_text(p, "new")
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert p.read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["a.json"]
