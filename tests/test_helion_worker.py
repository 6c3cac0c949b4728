"""Helion's benchmark worker kept across abductune's searches (helion_worker.py), on a CPU: the
keeper with stand-in workers (reuse, what it drops, idle expiry, forked children, a worker that
will not take the search's cache directory), the environment jobs in a bare interpreter, one
real Helion BenchmarkWorker kept and reused (its start-up paid once, our forget jobs run in it,
the next search's Triton cache directory set in it), and two searches in a row through Helion's
local provider handing one worker from the first search to the second."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time

import pytest

from abductune.integrations import helion_worker as HW


class Stand:
    """A BenchmarkWorker stand-in: alive until shut down (or `dead`), runs jobs in this process."""

    def __init__(self, fail: bool = False):
        self.up, self.fail, self.jobs, self.shutdowns = True, fail, [], 0
        self._fatal_error = None

    def alive(self) -> bool:
        return self.up

    def run(self, job, timeout):
        if self.fail:
            raise RuntimeError("worker pipe closed")
        self.jobs.append(job)
        return job()  # in this process: the environment jobs see this process's (unchanged) values

    def shutdown(self) -> None:
        self.shutdowns += 1
        self.up = False


@pytest.fixture
def no_forget(monkeypatch):
    jobs = [lambda: "args", lambda: "baseline"]
    monkeypatch.setattr(HW, "forget_jobs", lambda: jobs)
    return jobs


def test_a_kept_worker_is_reused_not_respawned(no_forget):
    k = HW.Keeper(idle_s=60)
    made = []

    def spawn():
        made.append(Stand())
        return made[-1]

    w, reused = k.take(spawn)
    assert (reused, made) == (False, [w])
    assert k.give(w) and k.kept() and w.jobs == no_forget  # the search's state dropped before it waits
    w2, reused = k.take(spawn)
    assert w2 is w and reused and len(made) == 1 and not k.kept()
    assert k.stats["spawned"] == 1 and k.stats["reused"] == 1 and k.stats["kept"] == 1
    k.give(w2)
    assert k.release() and w.shutdowns == 1 and not k.kept() and not k.release()


@pytest.mark.parametrize("why", ["dead", "fatal", "forget fails", "idle 0"])
def test_a_worker_not_worth_keeping_is_shut_down(no_forget, why):
    w = Stand(fail=why == "forget fails")
    w.up = why != "dead"
    if why == "fatal":
        w._fatal_error = "did not exit after SIGKILL"
    k = HW.Keeper(idle_s=0 if why == "idle 0" else 60)
    assert k.give(w) is False and not k.kept()
    assert k.stats["dropped"] == 1 and w.shutdowns == 1


def test_unused_worker_is_kept_without_waiting_for_it(no_forget):
    w = Stand(fail=True)  # would fail any job: give(used=False) sends none
    k = HW.Keeper(idle_s=60)
    assert k.give(w, used=False) and w.jobs == []
    k.release()


def test_an_idle_worker_expires(no_forget):
    k = HW.Keeper(idle_s=0.05)
    w = Stand()
    assert k.give(w)
    deadline = time.time() + 5
    while k.kept() and time.time() < deadline:
        time.sleep(0.02)
    assert not k.kept() and w.shutdowns == 1 and k.stats["expired"] == 1
    w2, reused = k.take(Stand)
    assert not reused and w2 is not w


def test_a_second_worker_replaces_the_first(no_forget):
    k = HW.Keeper(idle_s=60)
    a, b = Stand(), Stand()
    k.give(a)
    k.give(b)
    assert a.shutdowns == 1 and k.take(Stand) == (b, True)


def test_a_forked_child_never_touches_the_parents_worker(no_forget, monkeypatch):
    k = HW.Keeper(idle_s=60)
    w = Stand()
    k.give(w)
    monkeypatch.setattr(HW.os, "getpid", lambda: -1)  # as seen from a forked child
    assert k.release() is False and w.shutdowns == 0
    mine, reused = k.take(Stand)
    assert not reused and mine is not w  # a fresh one
    assert w.shutdowns == 0 and w.jobs == no_forget  # the parent's untouched


@pytest.mark.parametrize("takes", [True, False])
def test_a_reused_worker_must_take_the_searchs_cache_directory(no_forget, takes):
    """A kept worker is handed this process's cache directories before reuse; one that will not
    take them is shut down and a fresh one spawned (it would compile every config itself)."""
    k = HW.Keeper(idle_s=60)
    old, asked = Stand(), []
    k.give(old)

    def sync(w):
        asked.append(w)
        return takes

    w, reused = k.take(Stand, sync=sync)
    assert asked == [old] and reused is takes and (w is old) is takes
    assert old.shutdowns == (0 if takes else 1)
    assert (k.stats["synced"], k.stats["unsynced"]) == ((1, 0) if takes else (0, 1))
    assert k.stats["spawned"] == (0 if takes else 1)


def test_sync_environ_reads_the_values_back(monkeypatch):
    """With a stand-in running jobs here: set, unset, read back; a worker that answers
    otherwise (or fails) is reported as not synced."""
    monkeypatch.setenv("TRITON_CACHE_DIR", "/tmp/search-2/triton")
    monkeypatch.delenv("CUTE_DSL_CACHE_DIR", raising=False)
    w = Stand()
    assert HW.sync_environ(w) and len(w.jobs) == 1 + len(HW.SYNCED_ENV)
    assert os.environ["TRITON_CACHE_DIR"] == "/tmp/search-2/triton" and "CUTE_DSL_CACHE_DIR" not in os.environ

    class Deaf(Stand):
        def run(self, job, timeout):
            self.jobs.append(job)
            return None  # never reads back what it was given

    assert not HW.sync_environ(Deaf())
    assert not HW.sync_environ(Stand(fail=True))


def test_environment_jobs_need_nothing_of_abductunes():
    """The jobs, pickled, run in a bare interpreter without abductune on its path (as in
    Helion's spawned worker, whatever it can import): they set, unset and read back."""
    put, reads = HW.environ_jobs({"TRITON_CACHE_DIR": "/tmp/search-2/triton", "CUTE_DSL_CACHE_DIR": None})
    code = ("import os, pickle, sys\n"
            "put, reads = pickle.loads(sys.stdin.buffer.read())\n"
            "put()\n"
            "print([r() for r in reads], 'abductune' in sys.modules)\n")
    env = {"PATH": os.environ.get("PATH", ""), "TRITON_CACHE_DIR": "/tmp/search-1/triton",
           "CUTE_DSL_CACHE_DIR": "/tmp/search-1/cute"}
    r = subprocess.run([sys.executable, "-I", "-c", code], input=pickle.dumps((put, reads)), capture_output=True,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    assert r.stdout.decode().strip() == "['/tmp/search-2/triton', None] False"


def test_idle_seconds_from_the_environment():
    assert HW.idle_seconds({}) == HW.DEFAULT_IDLE_S
    assert HW.idle_seconds({HW.IDLE_ENV: "0"}) == 0.0
    assert HW.idle_seconds({HW.IDLE_ENV: "12.5"}) == 12.5
    assert HW.idle_seconds({HW.IDLE_ENV: "soon"}) == HW.DEFAULT_IDLE_S


# ----------------------------------------------------------------------------- with Helion

def _helion():
    pytest.importorskip("torch", reason="Helion needs torch")
    try:
        import helion  # noqa: F401
        from helion.autotuner.benchmark_worker import BenchmarkWorker  # noqa: F401
    except ImportError as e:
        if os.environ.get("ABDUCTUNE_REQUIRE_HELION") == "1":
            raise
        pytest.skip(f"Helion (with its BenchmarkWorker) does not import here ({type(e).__name__}: {e})")


def test_forget_jobs_are_helions_caches_then_cuda_memory():
    _helion()
    from helion.autotuner.benchmark_job import _load_trusted_baseline_output
    from helion.autotuner.kernel_args import load_trusted_kernel_args
    import torch

    jobs = HW.forget_jobs()
    assert jobs[:2] == [load_trusted_kernel_args.cache_clear, _load_trusted_baseline_output.cache_clear]
    assert jobs[2] is torch.cuda.empty_cache


def test_a_real_worker_starts_once_and_forgets_in_between(monkeypatch, tmp_path):
    """Helion's own BenchmarkWorker: the first answer waits for its start-up; kept, it runs
    our forget jobs (pickled into it) and answers the next search at once, with the next
    search's Triton cache directory (Helion's per-search ephemeral one) in its environment."""
    _helion()
    import functools

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "search-1"))
    k = HW.Keeper(idle_s=60)
    w, reused = k.take(HW.spawn_worker)
    try:
        assert w is not None and not reused
        first = HW.first_answer_s(w)
        read = functools.partial(os.getenv, "TRITON_CACHE_DIR")
        assert w.run(read, timeout=60) == str(tmp_path / "search-1")  # inherited at its spawn
        assert k.give(w)  # the forget jobs ran in the worker
        monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "search-2"))  # as Helion does for the next search
        w2, reused = k.take(HW.spawn_worker)
        assert w2 is w and reused and w.alive()
        assert w.run(read, timeout=60) == str(tmp_path / "search-2")
        again = HW.first_answer_s(w)
        assert again < first / 5, (first, again)
        assert k.stats["spawned"] == 1 and k.stats["synced"] == 1
    finally:
        k.give(w)
        k.release()
    assert not w.alive()


def test_two_searches_share_one_worker(monkeypatch):
    """Two AbductuneSearch runs through Helion's local provider (less its GPU baseline): the
    first spawns the worker; Helion's cleanup does not shut it; the second's provider gets it."""
    _helion()
    import sys
    from pathlib import Path

    from helion.autotuner import benchmark_worker
    from helion.autotuner.benchmark_provider import LocalBenchmarkProvider

    import abductune.integrations.helion  # noqa: F401
    from abductune.integrations import helion_measure as HM
    from abductune.integrations import helion_search as HS
    from abductune.integrations.helion_search import AbductuneSearch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_helion_search import Model, _kernel, _provider, _tiles

    made: list = []

    class Worker(Stand):
        def __init__(self, device=None):
            super().__init__()
            made.append(self)

        def _start(self):
            pass

    monkeypatch.setattr(benchmark_worker, "BenchmarkWorker", Worker)
    keeper = HW.Keeper(idle_s=60)
    monkeypatch.setattr(HM, "KEEPER", keeper)
    monkeypatch.setattr(HS, "KEEPER", keeper)
    given: list = []
    base = _provider(Model(lambda c: 1.0 + _tiles(c)), base=LocalBenchmarkProvider)

    class Local(base):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self._benchmark_worker = None

        def _subprocess_benchmark_enabled(self):
            return True

        def take_effective_source_repairs(self):
            return {}

        def setup(self):
            given.append(self._benchmark_worker)

        def cleanup(self):  # Helion's: shut down whatever worker the provider still holds
            if self._benchmark_worker is not None:
                self._benchmark_worker.shutdown()

    reports = []
    for _ in range(2):
        bound, args = _kernel("mm")
        s = AbductuneSearch(bound, args, benchmark_provider_cls=Local, max_evaluations=6)
        s.autotune(skip_cache=True)
        reports.append(s.report["timing"])
    assert len(made) == 1 and given == [made[0], made[0]] and made[0].up  # one worker, both searches, still up
    assert [r["worker_reused"] for r in reports] == [False, True]
    assert [r["worker_kept"] for r in reports] == [True, True]
    # each search's state dropped after it, and the second search's cache directories set before it
    n_forget, n_sync = len(HW.forget_jobs()), 1 + len(HW.SYNCED_ENV)
    assert len(made[0].jobs) == 2 * n_forget + n_sync and keeper.stats["synced"] == 1
    assert keeper.release() and made[0].shutdowns == 1
