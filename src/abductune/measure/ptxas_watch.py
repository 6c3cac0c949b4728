"""A watchdog over the ptxas runs of a tune: one running past a limit is killed, so its config
fails as a compile error and the search goes on.

Why: Triton runs NVIDIA's ptxas as a subprocess with no time limit, and on some configs ptxas
runs for minutes (a tile whose accumulator spills thousands of bytes a thread; a 3x3-tap conv
loop on one warp). Growth beyond a config list and record mode's samples reach such configs
where a hand-written list would not: on the H100 one FlagGems bmm config and one conv2d config
each held a whole recording past its 150-200 s limit (session 21), and twice before a conv2d
recording kept nothing. The resource model (`theory.resources.hopeless`) skips the configs it
can read; this catches the rest, whatever the kernel.

The watch runs in a daemon thread of the tuning process while a tune is on (`watching()`:
the decorator's key tunes, `abductune.inductor`'s and the Helion search's Sessions),
every `POLL_S` seconds looking at the process tree under this process (so the compile workers'
ptxas runs too), on Linux only (it reads /proc; elsewhere it does nothing). The limit is
`ABDUCTUNE_PTXAS_TIMEOUT_S` (default `DEFAULT_S`; 0 turns the watch off): three times the
slowest compile that finished in session 21's recordings on the H100 (29 s, a conv2d config
that spilled 23 KB a thread and ran 64x slower than the best), so a ptxas it kills was not going
to give a config anyone would keep."""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from pathlib import Path
from typing import Iterator

from ..errors import AbductuneError

log = logging.getLogger(__name__)

ENV = "ABDUCTUNE_PTXAS_TIMEOUT_S"
DEFAULT_S = 90.0
POLL_S = 2.0
NAME = "ptxas"
PROC = Path("/proc")


def limit_s() -> float | None:
    """The limit from `ABDUCTUNE_PTXAS_TIMEOUT_S` (None: off)."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return DEFAULT_S
    try:
        v = float(raw)
    except ValueError:
        raise AbductuneError(f"{ENV}={raw!r}: give seconds as a number (0 turns the ptxas watch off)") from None
    if v < 0:
        raise AbductuneError(f"{ENV}={raw!r}: give a number of seconds >= 0 (0 turns the ptxas watch off)")
    return v or None


def _stat(pid: str) -> tuple[str, int, float] | None:
    """(command name, parent pid, start time in clock ticks after boot) of a /proc entry."""
    try:
        text = (PROC / pid / "stat").read_text()
    except OSError:  # gone meanwhile, or not readable
        return None
    head, _, rest = text.rpartition(")")  # the name sits in parentheses and may hold spaces
    fields = rest.split()
    try:
        return head.partition("(")[2], int(fields[1]), float(fields[19])
    except (IndexError, ValueError):
        return None


def overdue(root: int, limit: float, name: str = NAME) -> list[tuple[int, float]]:
    """(pid, seconds running) of every process called `name` under `root` running longer than `limit`."""
    try:
        uptime = float((PROC / "uptime").read_text().split()[0])
        tick = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return []
    procs = {}
    for d in PROC.iterdir():
        if d.name.isdigit():
            st = _stat(d.name)
            if st is not None:
                procs[int(d.name)] = st
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        comm, _, start = procs[pid]
        age = uptime - start / tick
        if comm == name and age > limit:
            out.append((pid, age))
        todo.extend(children.get(pid, []))
    return out


class Watch:
    """The daemon thread (see the module): `kills` lists (pid, seconds) of what it killed."""

    def __init__(self, limit: float, poll: float = POLL_S, name: str = NAME):
        self.limit, self.poll, self.name = limit, poll, name
        self.kills: list[tuple[int, float]] = []
        self.users = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            self.users += 1
            if self._thread is None or not self._thread.is_alive():
                self._stop.clear()
                self._thread = threading.Thread(target=self._run, name="abductune-ptxas-watch", daemon=True)
                self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self.users = max(0, self.users - 1)
            if self.users == 0:
                self._stop.set()

    def check(self) -> None:
        for pid, age in overdue(os.getpid(), self.limit, self.name):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:  # finished meanwhile
                continue
            self.kills.append((pid, age))
            log.warning("killed %s (pid %d) after %.0f s: the config it compiled fails as a compile error and the "
                        "search goes on (%s sets the limit; 0 turns this off)", self.name, pid, age, ENV)

    def _run(self) -> None:
        while not self._stop.wait(self.poll):
            try:
                self.check()
            except Exception as e:  # noqa: BLE001 - a watchdog must never take the tune down
                log.debug("ptxas watch: %s", e)


_WATCH: Watch | None = None


@contextlib.contextmanager
def watching() -> Iterator[Watch | None]:
    """Watch ptxas runs under this process while the block runs (nested blocks share one thread)."""
    global _WATCH
    limit = limit_s()
    if limit is None or not PROC.is_dir():
        yield None
        return
    if _WATCH is None or _WATCH.limit != limit:
        _WATCH = Watch(limit)
    w = _WATCH
    w.start()
    try:
        yield w
    finally:
        w.stop()
