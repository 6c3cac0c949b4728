"""What the command line prints through: its consoles, its progress bar, its one-line errors,
and the switch that points the consoles at a daemon client's streams while its command runs."""
from __future__ import annotations

import contextlib
import sys
from typing import Any, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

# Commands read these through the module (`output.console`), never by name: `serving` swaps
# them for a daemon client's streams, and a name bound at import would keep the old console.

# wide enough for the result tables when output goes to a file or a pipe (rich assumes 80); on
# a terminal its width (or COLUMNS), where the tune table has a compact layout for 80 columns
console = Console(stderr=False, width=None if sys.stdout.isatty() else 180)
err_console = Console(stderr=True)
# `abductune cache`'s tables: 200 columns off a terminal (a row holds a whole config)
cache_console = Console(width=None if sys.stdout.isatty() else 200)

served = False  # True while a daemon runs a client's command in this process (`serving`)


@contextlib.contextmanager
def serving(tty_out: bool = False, tty_err: bool = False, columns: int | None = None) -> Iterator[None]:
    """Print as a daemon client's terminal would while its command runs in this process: the
    consoles take the client's width and whether its stdout and stderr are terminals (they
    write to whatever sys.stdout and sys.stderr are, which the daemon points at the client).
    The consoles are put back after the command."""
    global console, err_console, served
    saved = console, err_console, served
    console = Console(stderr=False, width=columns if tty_out and columns else 180, force_terminal=tty_out)
    err_console = Console(stderr=True, width=columns or 120, force_terminal=tty_err)
    served = True
    try:
        yield
    finally:
        console, err_console, served = saved


def error_line(message: str) -> None:
    """One plain line on stderr: no markup (a `[gpu]` extra or a `[/x]` path stays as it is),
    no hard wrapping."""
    print(f"error: {' '.join(str(message).split())}", file=sys.stderr)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a command, with what it kept and how a rerun goes on (`note`): the CLI
    prints `interrupted: NOTE` on stderr and exits 130."""

    def __init__(self, note: str):
        super().__init__(note)
        self.note = note


def quiet_bar() -> bool:
    """No progress bar when stderr is not a terminal: a bar stopped by an error would leave a
    stray line before the one-line error message (and a log file wants no bars)."""
    return not err_console.is_terminal


class PlainProgress:
    """Progress as plain lines on stderr where the bar is off (stderr is not a terminal: a log
    file, a remote machine's output): a task's first update, then at most one line every
    `every_s` seconds, and its last (done == total), so a long sweep in `nohup` or under
    `timeout` says how far it got."""

    def __init__(self, every_s: float = 10.0, clock: Any = None):
        import time

        self.every_s, self.clock = every_s, clock or time.monotonic
        self._said: dict[str, float] = {}  # label -> when its last line went out
        self._start: dict[str, float] = {}

    def __call__(self, label: str, done: int, total: int) -> None:
        now = self.clock()
        start = self._start.setdefault(label, now)
        last = self._said.get(label)
        if last is not None and done < total and now - last < self.every_s:
            return
        self._said[label] = now
        elapsed = now - start
        left = f", about {elapsed / done * (total - done):.0f}s left" if 0 < done < total and elapsed > 0 else ""
        err_console.print(f"{label}: {done}/{total}, {elapsed:.0f}s elapsed{left}", markup=False, highlight=False,
                          soft_wrap=True)


def progress_bar(*columns: Any) -> Progress:
    """The progress bar of the long commands (`tune`, `replay`, `sweep`, `learn`), on stderr:
    what runs, the bar, done/total, any `columns` given, the time elapsed; none when stderr is
    not a terminal."""
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), *columns,
                    TimeElapsedColumn(), console=err_console, transient=True, disable=quiet_bar())
