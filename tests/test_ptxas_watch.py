"""The ptxas watch: a process of the watched name under this one, running past the limit, is
killed (its config then fails as a compile error); the limit comes from the environment."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from abductune.measure import ptxas_watch
from abductune.errors import AbductuneError

linux = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the watch reads /proc (Linux only)")


def _fake_ptxas(tmp_path: Path, name: str) -> list[str]:
    """A long-running process whose command name is `name` (a copy of `sleep` under that name)."""
    sleep = shutil.which("sleep")
    if sleep is None:
        pytest.skip("no sleep binary to stand in for ptxas")
    exe = tmp_path / name
    if not exe.exists():  # copied once: a running copy cannot be written over
        shutil.copy(sleep, exe)
    return [str(exe), "30"]


@linux
def test_an_overdue_process_of_the_watched_name_under_this_one_is_killed_a_young_one_is_not(tmp_path):
    old = subprocess.Popen(_fake_ptxas(tmp_path, "fakeptxas"))
    try:
        time.sleep(1.2)
        young = subprocess.Popen(_fake_ptxas(tmp_path, "fakeptxas"))
        other = subprocess.Popen([shutil.which("sleep"), "30"])
        try:
            got = ptxas_watch.overdue(os.getpid(), 1.0, "fakeptxas")
            assert [p for p, _ in got] == [old.pid]
            w = ptxas_watch.Watch(1.0, name="fakeptxas")
            w.check()
            assert old.wait(timeout=5) == -9 and [p for p, _ in w.kills] == [old.pid]
            assert young.poll() is None and other.poll() is None  # too young; another name
        finally:
            young.kill()
            other.kill()
    finally:
        old.kill()


@linux
def test_a_grandchild_is_watched_too(tmp_path):
    # a compile worker's ptxas is this process's grandchild
    cmd = _fake_ptxas(tmp_path, "fakeptxas")
    mid = subprocess.Popen([sys.executable, "-c", f"import subprocess; subprocess.run({cmd!r})"])
    try:
        deadline = time.time() + 10
        got = []
        while time.time() < deadline and not got:
            time.sleep(0.3)
            got = ptxas_watch.overdue(os.getpid(), 0.5, "fakeptxas")
        assert got and got[0][1] > 0.5
    finally:
        for pid, _ in ptxas_watch.overdue(os.getpid(), 0.0, "fakeptxas"):
            os.kill(pid, 9)
        mid.wait(timeout=10)


def test_the_limit_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(ptxas_watch.ENV, raising=False)
    assert ptxas_watch.limit_s() == ptxas_watch.DEFAULT_S
    monkeypatch.setenv(ptxas_watch.ENV, "0")
    assert ptxas_watch.limit_s() is None
    with ptxas_watch.watching() as w:
        assert w is None
    monkeypatch.setenv(ptxas_watch.ENV, "12.5")
    assert ptxas_watch.limit_s() == 12.5
    for bad in ("soon", "-3"):
        monkeypatch.setenv(ptxas_watch.ENV, bad)
        with pytest.raises(AbductuneError, match=ptxas_watch.ENV):
            ptxas_watch.limit_s()


@linux
def test_nested_watches_share_one_thread_which_stops_with_the_last(monkeypatch):
    monkeypatch.setenv(ptxas_watch.ENV, "77")
    with ptxas_watch.watching() as a:
        with ptxas_watch.watching() as b:
            assert a is b and a.users == 2 and a._thread.is_alive()
        assert a.users == 1 and not a._stop.is_set()
    assert a.users == 0 and a._stop.is_set()
