"""Fault injection (issue 11): a replay tune killed with SIGKILL at random points, then rerun,
ends with the same store content as a tune never interrupted: the same (config, kind) search
rows, each once, and the same winner. Nothing measured is lost, nothing is measured twice."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

from abductune.search import Budget
from abductune.store import Store, config_key
from abductune.tune import tune_one

SMALL = {"numel": 917504}  # gelu_mul: 64 configs
TUNE = dict(strategy="random", seed=3, budget=Budget(24), mode="replay")  # deterministic
DELAY_S = 0.03  # per config measured, so a kill lands in the middle of the work

# the same tune in a child process, slowed down so that a kill can land anywhere: inside a
# batch, between a batch and its store write, in the baselines or in the final run-off
_CHILD = textwrap.dedent("""
    import sys, time
    from abductune.measure.replay import ReplayEvaluator
    from abductune.search import Budget
    from abductune.tune import tune_one

    delay = float(sys.argv[2])
    evaluate, remeasure = ReplayEvaluator.evaluate, ReplayEvaluator.remeasure

    def slow_evaluate(self, configs):
        time.sleep(delay * len(configs))
        return evaluate(self, configs)

    def slow_remeasure(self, configs, *a, **kw):
        time.sleep(delay * len(configs))
        return remeasure(self, configs, *a, **kw)

    ReplayEvaluator.evaluate, ReplayEvaluator.remeasure = slow_evaluate, slow_remeasure
    print("ready", flush=True)
    out = tune_one("gelu_mul_fp16", {"numel": 917504}, strategy="random", seed=3,
                   budget=Budget(24), mode="replay", store=sys.argv[1])
    print("done", out.winner.id, flush=True)
""")


def _rows(path: Path) -> tuple[Counter, Counter, dict]:
    """(search/seed rows per (config, kind), baseline rows per config, the last run's winner)."""
    with Store(path) as s:
        runs = s.runs()
        assert s.integrity_check() == "ok"
        ctx = runs[0].context
        search = Counter((config_key(m.config), m.kind)
                         for m in s.measurements(ctx, kinds=("search", "seed")))
        base = Counter(config_key(m.config) for m in s.measurements(ctx, kinds=("baseline",)))
        assert runs[-1].status == "done" and runs[-1].winner_id is not None
        [winner] = s.by_id([runs[-1].winner_id])
        return search, base, winner.config


def _kill_at(path: Path, after_s: float) -> bool:
    """Run the slow tune and SIGKILL it `after_s` seconds after its imports; whether it was
    still running when killed."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(path), str(DELAY_S)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(after_s)
        alive = proc.poll() is None
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    return alive


def test_tune_killed_at_random_points_resumes_to_the_uninterrupted_result(tmp_path: Path):
    ref_path = tmp_path / "reference.sqlite"
    ref = tune_one("gelu_mul_fp16", SMALL, store=str(ref_path), **TUNE)
    ref_search, ref_base, ref_winner = _rows(ref_path)
    assert ref_winner == ref.winner.config
    assert sum(ref_search.values()) == 24 and max(ref_search.values()) == 1
    # the slowed child takes about DELAY_S per row it writes (search, baselines, run-off)
    with Store(ref_path) as s:
        span = DELAY_S * len(s.measurements(s.runs()[0].context))
    killed_mid_run = partial = 0
    for seed in range(5):
        rng = random.Random(seed)
        path = tmp_path / f"killed{seed}.sqlite"
        for _ in range(1 + seed % 2):  # seeds 1 and 3 are killed twice: a resume is killed too
            killed_mid_run += _kill_at(path, rng.uniform(0.0, 0.9 * span))
        with Store(path) as s:
            left = [s.spent([r.id]) for r in s.runs()]
        partial += 0 < sum(left) < 24  # the kill left part of the search done, to be resumed
        out = tune_one("gelu_mul_fp16", SMALL, store=str(path), **TUNE)  # finish uninterrupted
        search, base, winner = _rows(path)
        assert search == ref_search, f"seed {seed}: search rows differ from the uninterrupted run"
        assert max(base.values()) == 1 and set(base) == set(ref_base), f"seed {seed}: baselines"
        assert winner == ref_winner == out.winner.config, f"seed {seed}: another winner"
        assert out.evaluations + out.session.spent_before == 24
    assert killed_mid_run >= 5  # the kills landed while the tune was running, not after it
    assert partial >= 2  # and several of them after some rows were stored: resume was exercised
