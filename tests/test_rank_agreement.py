"""Rank agreement across machines (issue 26, item 4): the ranks of a torch.distributed job (gloo on
localhost, a TCPStore the test hosts), each with a store file of its own as on a machine of its own,
agree through the job's c10d store: one rank times a key, the others time nothing and launch its
winner, recorded in their own store; a claimer that dies leaves the others to time out and tune
here; ranks meeting keys in different orders do not deadlock. The ranks run the interpreted
tutorial matmul (TRITON_INTERPRET=1) with an injected timer."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from abductune.autotune.ranks import ENV, agreement_mode, job_store, rank_key
from abductune.errors import AbductuneError
from abductune.store import Context
from autotune_kernels import env

ROOT = Path(__file__).resolve().parents[1]


def job(tmp_path: Path, timer: str, wait_s: float, shapes: list[str],
        machines: list[int] | None = None) -> list[tuple[int, dict | None, str]]:
    """Run one rank per entry of `shapes` (its shapes, in order), rank r with the store file of
    machine `machines[r]` (default: its own); (exit code, RESULT, stderr) each."""
    machines = machines or list(range(len(shapes)))
    dist = pytest.importorskip("torch.distributed")
    pytest.importorskip("triton")
    if not dist.is_available():
        pytest.skip("torch.distributed is not available in this torch build")
    master = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)  # outlives any rank
    procs = [subprocess.Popen([sys.executable, "-m", "autotune_kernels.rank_child", str(master.port), str(r),
                               str(len(shapes)), str(tmp_path / f"machine{machines[r]}.sqlite"), timer, str(wait_s), s],
                              cwd=ROOT, env=env(GLOO_SOCKET_IFNAME="lo"), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r, s in enumerate(shapes)]
    out = []
    try:
        for p in procs:
            o, e = p.communicate(timeout=180)
            line = next((ln for ln in o.splitlines() if ln.startswith("RESULT")), None)
            out.append((p.returncode, json.loads(line[len("RESULT"):]) if line else None, e))
    finally:
        for p in procs:  # a rank stuck waiting must not outlive the test
            if p.poll() is None:
                p.kill()
                p.wait()
    return out


def local_winner(path: Path) -> tuple[dict, list[str]]:
    """The winner the store file of one rank holds, and the strategies of its finished runs."""
    from abductune.autotune import stored_winner
    from abductune.store import Store

    with Store(path) as s:
        runs = s.runs()
        return stored_winner(s, runs[-1].context).config, [r.strategy for r in runs if r.status == "done"]


def test_one_rank_tunes_and_every_rank_launches_its_winner(tmp_path: Path):
    got = job(tmp_path, "own", 120, ["24.24.24"] * 3)
    for code, res, err in got:
        assert code == 0 and res is not None, err[-3000:]
    rows = [res["shapes"]["24.24.24"] for _, res, _ in got]
    assert all(r["ok"] for r in rows)
    timed = sorted(r["timed"] for r in rows)
    assert timed[0] == timed[1] == 0 and timed[2] >= 3  # one rank timed the three configs, the others none
    tuner = next(r for r, row in enumerate(rows) if row["timed"])
    assert rows[tuner]["source"] == "tuned"
    # each rank would pick its own winner from its own random timings: they launch the tuner's
    assert all(r["winner"] == rows[tuner]["winner"] for r in rows)
    for r, (_, res, _) in enumerate(got):
        if r != tuner:
            assert rows[r]["source"] == "store" and res["stats"]["evaluations"] == 0
            assert res["stats"]["waited_s"] > 0
        # every machine's own store holds the winner: a later process there measures nothing
        winner, strategies = local_winner(tmp_path / f"machine{r}.sqlite")
        assert winner == rows[tuner]["winner"]
        assert ("import" in strategies) == (r != tuner)


def test_the_store_file_claim_and_the_job_claim_compose(tmp_path: Path):
    # ranks 0 and 1 share machine 0's store file, rank 2 is machine 1: one rank of the three times
    # the configs, and each machine's store file gets the winner once (no second import)
    got = job(tmp_path, "own", 120, ["24.24.24"] * 3, machines=[0, 0, 1])
    for code, res, err in got:
        assert code == 0 and res is not None, err[-3000:]
    rows = [res["shapes"]["24.24.24"] for _, res, _ in got]
    assert sorted(r["timed"] > 0 for r in rows) == [False, False, True]
    assert len({json.dumps(r["winner"], sort_keys=True) for r in rows}) == 1
    tuned_on = [0, 0, 1][next(r for r, row in enumerate(rows) if row["timed"])]
    for m in (0, 1):
        winner, strategies = local_winner(tmp_path / f"machine{m}.sqlite")
        assert winner == rows[0]["winner"]
        assert strategies.count("import") == (0 if m == tuned_on else 1), strategies


def test_a_claimer_that_dies_leaves_the_others_to_tune_here(tmp_path: Path):
    marker = tmp_path / "died"
    got = job(tmp_path, f"die:{marker}", 5, ["24.24.24"] * 2)
    assert marker.exists()
    dead = [r for r, (code, _, _) in enumerate(got) if code == 7]
    assert len(dead) == 1, [(c, e[-2000:]) for c, _, e in got]
    [(code, res, err)] = [g for r, g in enumerate(got) if r != dead[0]]
    assert code == 0 and res is not None, err[-3000:]
    row = res["shapes"]["24.24.24"]
    assert row["ok"] and row["source"] == "tuned" and row["timed"] >= 3
    assert "waited 5s for rank" in err and "tuning here" in err  # the warning names the claimer
    # the fixed timer's fastest config: BLOCK_SIZE_M 32, BLOCK_SIZE_N 16
    assert (row["winner"]["BLOCK_SIZE_M"], row["winner"]["BLOCK_SIZE_N"]) == (32, 16)


def test_ranks_meeting_keys_in_different_orders_do_not_deadlock(tmp_path: Path):
    a, b, c = "24.24.24", "40.36.24", "16.48.32"
    got = job(tmp_path, "own", 60, [f"{a},{b}", f"{b},{a}", f"{c},{a}"])
    for code, res, err in got:
        assert code == 0 and res is not None, err[-3000:]
    for shape in (a, b, c):
        rows = [res["shapes"][shape] for _, res, _ in got if shape in res["shapes"]]
        assert all(r["ok"] for r in rows)
        assert sum(r["timed"] > 0 for r in rows) == 1, (shape, rows)  # tuned once in the job
        assert len({json.dumps(r["winner"], sort_keys=True) for r in rows}) == 1, (shape, rows)
    for _, res, _ in got:
        assert res["stats"]["waited_s"] < 50  # nobody sat out the 60 s timeout


def test_the_mode_comes_from_the_environment_and_a_wrong_one_says_what_to_set(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert agreement_mode() == "auto"
    monkeypatch.setenv(ENV, " File ")
    assert agreement_mode() == "file" and job_store("file") is None and job_store("off") is None
    monkeypatch.setenv(ENV, "ray")
    with pytest.raises(AbductuneError, match="ABDUCTUNE_RANK_AGREEMENT='ray'.*auto, file, dist, off"):
        agreement_mode()


def test_without_a_process_group_auto_agrees_through_the_file_and_dist_refuses():
    dist = pytest.importorskip("torch.distributed")
    if dist.is_available() and dist.is_initialized():
        pytest.skip("a process group is initialised in this test process")
    assert job_store("auto") is None
    with pytest.raises(AbductuneError, match="init_process_group"):
        job_store("dist")


def test_ranks_on_different_gpus_or_toolchains_never_share_a_key():
    ctx = Context("mm", "src1", "fp1", "pk1", {"M": 16}, "H100-SXM", "triton=3.6", "matmul", {"a": "fp16"})
    key = rank_key(ctx, "tk", None)
    assert key.startswith("abductune/mm/")
    assert rank_key(Context(**{**ctx.__dict__}), "tk", None) == key  # the same identity: the same key
    for change in ({"hardware": "H200"}, {"toolchain": "triton=3.5"}, {"source_hash": "src2"},
                   {"space_fingerprint": "fp2"}, {"problem_key": "pk2"}):
        assert rank_key(Context(**{**ctx.__dict__, **change}), "tk", None) != key, change
    assert rank_key(ctx, "tk2", None) != key and rank_key(ctx, "tk", None, ["torch"]) != key
