"""Progress as plain lines where the bar is off (a sweep's output going to a log file)."""
from __future__ import annotations

import io

from rich.console import Console

from abductune.cli import output


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_lines_at_the_start_every_ten_seconds_and_at_the_end(monkeypatch):
    buf = io.StringIO()
    monkeypatch.setattr(output, "err_console", Console(file=buf, width=200))
    clock = Clock()
    lines = output.PlainProgress(every_s=10.0, clock=clock)
    for done in range(0, 41):  # one config a second, 40 configs
        clock.t = float(done)
        lines("gelu_mul_fp16 numel4096", done, 40)
    got = buf.getvalue().splitlines()
    assert got[0].startswith("gelu_mul_fp16 numel4096: 0/40, 0s elapsed")
    assert [g.split(":")[1].split(",")[0].strip() for g in got] == ["0/40", "10/40", "20/40", "30/40", "40/40"]
    assert "about 30s left" in got[1]  # 10 done in 10 s, 30 to go
    assert got[-1] == "gelu_mul_fp16 numel4096: 40/40, 40s elapsed"


def test_each_task_has_its_own_clock(monkeypatch):
    buf = io.StringIO()
    monkeypatch.setattr(output, "err_console", Console(file=buf, width=200))
    clock = Clock()
    lines = output.PlainProgress(every_s=10.0, clock=clock)
    lines("a", 1, 5)
    clock.t = 3.0
    lines("b", 1, 5)  # another task's first update: said at once
    lines("a", 2, 5)  # 3 s after a's last line: quiet
    assert [x.split(":")[0] for x in buf.getvalue().splitlines()] == ["a", "b"]
