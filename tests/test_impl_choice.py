"""Which implementation a key launches (`autotune.pick`): the side-by-side run-off decides
where it timed the Triton winner and every implementation; otherwise the median of all rows."""
from __future__ import annotations

from abductune.autotune import pick
from abductune.measurement import Measurement

W = {"BLOCK": 64}
T = {"impl": "torch"}


def row(cfg, ms, kind, run_id, i):
    return Measurement(dict(cfg), "ok", time_ms=ms).replace(kind=kind, run_id=run_id, id=i)


def test_the_runoff_decides_over_a_stale_first_timing():
    winner = row(W, 0.36, "search", 1, 1)
    rows = [winner, row(W, 0.37, "verify", 1, 2), row(T, 0.38, "baseline", 1, 3), row(T, 0.35, "verify", 1, 4),
            row(W, 0.355, "search", 1, 5)]
    # medians of all rows: Triton 0.36 vs torch 0.365 -> Triton; side by side: torch 0.35 < 0.37
    assert pick(winner, rows, ["torch"]) == (T, 0.35)


def test_the_latest_shared_runoff_counts_and_without_one_all_rows_do():
    winner = row(W, 0.30, "search", 1, 1)
    old = [row(W, 0.30, "verify", 1, 2), row(T, 0.40, "verify", 1, 3)]
    new = [row(W, 0.33, "verify", 2, 4), row(T, 0.31, "verify", 2, 5)]
    assert pick(winner, [winner, *old, *new], ["torch"]) == (T, 0.31)
    assert pick(winner, [winner, *old], ["torch"]) == (W, 0.30)
    # torch never ran in a run-off with the winner: medians of every row
    rows = [winner, row(W, 0.34, "verify", 3, 6), row(T, 0.33, "baseline", 3, 7)]
    assert pick(winner, rows, ["torch"]) == (W, 0.32)
    assert pick(None, [row(T, 0.5, "baseline", 1, 1)], ["torch"]) == (T, 0.5)
