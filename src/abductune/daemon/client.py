"""The command line's side of the daemon: whether a command goes to one, sending it and
relaying its output; start, stop and status."""
from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from ..errors import AbductuneError
from .base import (CANCEL, DEFAULT_IDLE_S, EXIT, OUT, PER_REQUEST, REQUEST, WAIT_NOTE_S, DaemonError, alive,
                   connect, fingerprint, fingerprint_items, read_info, recv_frame, runtime_dir, send_frame,
                   state_paths)


def _option_value(argv: list[str], name: str) -> str | None:
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def _setting() -> str:
    """ABDUCTUNE_DAEMON: 'off' (never forward), 'auto' (start one when none runs), else 'on'."""
    v = os.environ.get("ABDUCTUNE_DAEMON", "").strip().lower()
    return "off" if v in ("0", "no", "off", "false") else "auto" if v == "auto" else "on"


def platform_supported() -> bool:
    """Whether this platform has what a daemon needs: Unix sockets and user ids (not Windows)."""
    return hasattr(socket, "AF_UNIX") and hasattr(os, "getuid")


def forwardable(argv: list[str]) -> bool:
    """Whether this command line may run in a daemon: `tune` (live or auto), no user kernel,
    no --no-daemon, no --ray, ABDUCTUNE_DAEMON not 0."""
    if _setting() == "off" or not platform_supported():
        return False  # off, or a platform without Unix sockets (Windows): always local
    args = [a for a in argv if a not in ("-v", "--verbose")]
    if not args or args[0] != "tune" or "--no-daemon" in args:
        return False
    if any(a == "--ray" or a.startswith("--ray=") for a in args):
        return False  # a fleet's driver runs here: its workers are the cluster's, not a daemon's
    if any(a in ("--help", "-h") for a in args):
        return False
    if (_option_value(args, "--mode") or "auto") == "replay":
        return False
    kernel = _option_value(args, "--kernel") or ""
    return ":" not in kernel


def forward_or_start(argv: list[str]) -> int | None:
    """The command line's entry: forward a forwardable command to the daemon serving this
    environment; with `tune --daemon` (or ABDUCTUNE_DAEMON=auto) start one first when none
    does. None: run the command here."""
    if not forwardable(argv):
        return None
    code = forward(argv)
    if code is not None or not ("--daemon" in argv or _setting() == "auto"):
        return code
    print("(starting the abductune daemon for this environment; `abductune daemon stop` ends it)",
          file=sys.stderr, flush=True)
    try:
        start()
    except AbductuneError as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr, flush=True)
        return 2
    return forward(argv)


def forward(argv: list[str], stdout: Any = None, stderr: Any = None) -> int | None:
    """Run `argv` in the daemon that serves this environment and relay its output; the exit
    code, or None when no daemon serves it (the caller runs the command itself)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    fp = fingerprint()
    s = connect(fp)
    if s is None:
        return None
    info = read_info(fp) or {}
    rid = uuid.uuid4().hex
    req = {"id": rid, "argv": argv, "cwd": os.getcwd(), "env": {k: os.environ.get(k) for k in PER_REQUEST},
           "tty_out": _isatty(out), "tty_err": _isatty(err), "columns": _columns()}
    try:
        send_frame(s, REQUEST, json.dumps(req).encode())
    except OSError:
        s.close()
        return None
    print(f"(running in the abductune daemon, pid {info.get('pid', '?')}; --no-daemon runs it here)",
          file=err, flush=True)
    cancelled = False
    waited = False
    try:
        while True:
            try:
                if not waited:  # nothing this soon: say whether another command holds the daemon
                    waited = True
                    if not select.select([s], [], [], WAIT_NOTE_S)[0]:
                        busy = read_info(fp) or {}
                        if busy.get("state") == "busy" and busy.get("request") != rid:
                            print(f"(waiting: the daemon is running another command, `abductune "
                                  f"{' '.join(busy.get('argv') or [])}`; Ctrl-C leaves the queue)",
                                  file=err, flush=True)
                frame = recv_frame(s)
            except socket.timeout:  # only after a cancel: left the queue, or slow to stop
                return 130
            except KeyboardInterrupt:
                if cancelled:  # a second Ctrl-C: stop waiting for the daemon's answer
                    return 130
                cancelled = True
                with contextlib.suppress(OSError):
                    send_frame(s, CANCEL, b"")
                s.settimeout(30)  # the daemon answers once the command has stopped
                continue
            except OSError:
                frame = None
            if frame is None:
                if cancelled:
                    return 130
                print("error: the abductune daemon stopped during the command (see `abductune daemon "
                      "status` for its log)", file=err, flush=True)
                return 1
            kind, body = frame
            s.settimeout(30 if cancelled else None)
            if kind == EXIT:
                return int(body.decode() or 1)
            try:
                _write(out if kind == OUT else err, body)
            except BrokenPipeError:  # `abductune tune | head`: the reader left; stop the command
                return 1
    finally:
        s.close()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _columns() -> int | None:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return None


def _write(stream: Any, data: bytes) -> None:
    buf = getattr(stream, "buffer", None)
    if buf is not None:
        buf.write(data)
        buf.flush()
    else:
        stream.write(data.decode("utf-8", "replace"))
        stream.flush()


def start(idle_s: float = DEFAULT_IDLE_S, wait_s: float = 300.0,
          on_wait: Callable[[float], None] | None = None) -> dict[str, Any]:
    """Start a detached daemon for this environment and wait until it is warm. Returns its
    info; raises DaemonError with its log's tail when it fails."""
    import subprocess

    fp = fingerprint()
    s = connect(fp)
    if s is not None:
        s.close()
        info = read_info(fp) or {}
        return {**info, "already": True}
    # a daemon of this Python and checkout that imported older code can never serve again
    here = fingerprint_items()
    stale = [r for r in status() if r["alive"] and not r["serves_here"]
             and all(r.get("items", {}).get(k) == here[k] for k in ("python", "package"))
             and set(r["differs"]) <= {"source", "version"}]
    for r in stale:
        _terminate(int(r["pid"]), 15.0)
    _, info_path, log_path = state_paths(fp, create=True)
    with contextlib.suppress(FileNotFoundError):
        info_path.unlink()
    _trim_log(log_path)
    with open(log_path, "ab") as logf:
        proc = subprocess.Popen([sys.executable, "-m", "abductune.daemon", "--idle", str(idle_s)],
                                stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, start_new_session=True,
                                env=dict(os.environ))
    t0 = time.monotonic()
    while True:
        info = read_info(fp)
        if info is not None and info.get("pid") == proc.pid and info.get("state") == "ready":
            return {**info, "replaced": [int(r["pid"]) for r in stale]}
        if proc.poll() is not None:
            raise DaemonError(f"the daemon exited while starting (code {proc.returncode}); its log "
                              f"{log_path} ends:\n{_tail(log_path)}")
        if time.monotonic() - t0 > wait_s:
            proc.terminate()
            raise DaemonError(f"the daemon did not get ready within {wait_s:.0f} s; its log: {log_path}")
        if on_wait:
            on_wait(time.monotonic() - t0)
        time.sleep(0.1)


LOG_KEEP_BYTES = 256 * 1024


def _trim_log(path: Path, limit: int = 4 * LOG_KEEP_BYTES) -> None:
    """A daemon's log gains a line per command and lives as long as the environment: past
    `limit` bytes, a new daemon keeps only the last LOG_KEEP_BYTES (from a line start)."""
    try:
        if path.stat().st_size <= limit:
            return
        with open(path, "rb") as f:
            f.seek(-LOG_KEEP_BYTES, os.SEEK_END)
            tail = f.read()
    except OSError:
        return
    cut = tail.find(b"\n")
    tmp = path.with_name(path.name + ".trim")
    tmp.write_bytes(b"(earlier lines trimmed)\n" + tail[cut + 1:])
    os.replace(tmp, path)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _terminate(pid: int, wait_s: float) -> None:
    os.kill(pid, signal.SIGTERM)
    t0 = time.monotonic()
    while alive(pid) and time.monotonic() - t0 < wait_s:
        time.sleep(0.05)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)


def stop(every: bool = False, wait_s: float = 15.0) -> list[int]:
    """Stop the daemon serving this environment, or `every` daemon of this user: SIGTERM,
    which ends a running command as a crash would (the store keeps what was measured).
    Returns the pids stopped."""
    rows = [r for r in status() if r["alive"] and (every or r["serves_here"])]
    for r in rows:
        _terminate(int(r["pid"]), wait_s)
    return [int(r["pid"]) for r in rows]


def status() -> list[dict[str, Any]]:
    """Every daemon this user has in the runtime folder, with whether it is alive and whether
    it serves the current environment (and if not, which settings differ)."""
    mine = fingerprint()
    here = fingerprint_items()
    out = []
    try:
        d = runtime_dir()
    except DaemonError:
        return out
    for p in sorted(d.glob("d-*.json")) if d.is_dir() else []:
        try:
            info = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        running = alive(int(info.get("pid", -1))) and (d / f"d-{info.get('fingerprint')}.sock").exists()
        diff = sorted(k for k in set(here) | set(info.get("items", {}))
                      if here.get(k) != info.get("items", {}).get(k))
        out.append({**info, "alive": running, "serves_here": info.get("fingerprint") == mine, "differs": diff})
    return out
