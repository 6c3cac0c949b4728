"""What the daemon's client and server share: where its files live, which environment a
daemon serves (the fingerprint), and the frames on its socket."""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import socket
import struct
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from ..errors import AbductuneError

DEFAULT_IDLE_S = 15 * 60.0
WAIT_NOTE_S = 1.0  # a command that hears nothing this long says what it is waiting for
# variables that change what a command does in ways fixed when the daemon's workers started
_FINGERPRINT_PREFIXES = ("ABDUCTUNE_", "TRITON_", "CUDA_", "NVIDIA_", "PYTORCH_")
_FINGERPRINT_NAMES = ("HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "PYTHONPATH", "LD_LIBRARY_PATH")
# read per command, so the daemon takes them from each request instead
PER_REQUEST = ("ABDUCTUNE_STORE",)
_CLIENT_ONLY = ("ABDUCTUNE_DAEMON", "ABDUCTUNE_RUNTIME_DIR")

# frames: one type byte, a 4-byte big-endian length, the payload
OUT, ERR, EXIT, CANCEL, REQUEST = b"o", b"e", b"x", b"c", b"r"


class DaemonError(AbductuneError):
    """The daemon could not be started, reached or stopped."""


class Terminate(BaseException):
    """SIGTERM (`abductune daemon stop`): ends a running command and then the daemon."""


# --- where, and for which environment ---------------------------------------------------


def runtime_dir(create: bool = False) -> Path:
    """Private folder for sockets and state: $ABDUCTUNE_RUNTIME_DIR, else $XDG_RUNTIME_DIR/
    abductune, else <tmp>/abductune-<uid>. Created 0700; refused when another user owns it or
    others can write it (they could plant a socket)."""
    if os.environ.get("ABDUCTUNE_RUNTIME_DIR"):
        d = Path(os.environ["ABDUCTUNE_RUNTIME_DIR"])
    elif os.environ.get("XDG_RUNTIME_DIR") and Path(os.environ["XDG_RUNTIME_DIR"]).is_dir():
        d = Path(os.environ["XDG_RUNTIME_DIR"]) / "abductune"
    else:
        d = Path(tempfile.gettempdir()) / f"abductune-{os.getuid()}"
    if create:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
    if d.is_dir():
        st = d.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            raise DaemonError(f"{d} is not private to this user (owner uid {st.st_uid}, mode "
                              f"{oct(st.st_mode & 0o777)}); remove it or set ABDUCTUNE_RUNTIME_DIR")
    return d


def _source_stamp() -> str:
    """Newest modification time of the package's Python files: an edited checkout must not be
    served by a daemon that imported the old code."""
    pkg = Path(__file__).parent
    return str(max((p.stat().st_mtime_ns for p in pkg.rglob("*.py")), default=0))


def fingerprint_items(env: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if env is None else env)
    from .. import __version__

    # the interpreter's real file (`python3` and the console script's `python3.11` are one
    # interpreter) and its prefix (two virtual environments of one interpreter are not one)
    items = {"python": os.path.realpath(sys.executable), "prefix": sys.prefix, "version": __version__,
             "package": str(Path(__file__).parent),
             "source": _source_stamp()}
    for k in sorted(env):
        if k in PER_REQUEST or k in _CLIENT_ONLY:
            continue
        if k.startswith(_FINGERPRINT_PREFIXES) or k in _FINGERPRINT_NAMES:
            items[f"env:{k}"] = env[k]
    return items


def fingerprint(env: dict[str, str] | None = None, items: dict[str, str] | None = None) -> str:
    """Short digest of `fingerprint_items` (given, or read from `env`)."""
    blob = json.dumps(fingerprint_items(env) if items is None else items, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def state_paths(fp: str, create: bool = False) -> tuple[Path, Path, Path]:
    d = runtime_dir(create)
    return d / f"d-{fp}.sock", d / f"d-{fp}.json", d / f"d-{fp}.log"


# --- framing ------------------------------------------------------------------------------


def send_frame(sock: socket.socket, kind: bytes, payload: bytes) -> None:
    sock.sendall(kind + struct.pack(">I", len(payload)) + payload)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def recv_frame(sock: socket.socket) -> tuple[bytes, bytes] | None:
    head = _recv_exact(sock, 5)
    if head is None:
        return None
    (n,) = struct.unpack(">I", head[1:])
    body = _recv_exact(sock, n) if n else b""
    return None if body is None else (head[:1], body)


class _FrameWriter(io.RawIOBase):
    """stdout or stderr of a command run in the daemon: each write goes to the client."""

    def __init__(self, sock: socket.socket, kind: bytes, tty: bool, lock: threading.Lock):
        super().__init__()
        self._sock, self._kind, self._tty, self._lock = sock, kind, tty, lock
        self.lost = False

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._tty

    def write(self, b: Any) -> int:
        data = bytes(b)
        if data and not self.lost:
            try:
                with self._lock:
                    send_frame(self._sock, self._kind, data)
            except OSError:
                self.lost = True  # the client went away; the watcher cancels the command
        return len(data)


def text_stream(sock: socket.socket, kind: bytes, tty: bool, lock: threading.Lock) -> io.TextIOWrapper:
    return io.TextIOWrapper(_FrameWriter(sock, kind, tty, lock), encoding="utf-8", errors="replace",
                            write_through=True, line_buffering=True)


def read_info(fp: str) -> dict[str, Any] | None:
    try:
        _, info, _ = state_paths(fp)
        return json.loads(info.read_text())
    except (OSError, ValueError, DaemonError):
        return None


def connect(fp: str) -> socket.socket | None:
    """A connection to the live daemon for `fp`, or None (a stale socket is removed)."""
    try:
        sock_path, info, _ = state_paths(fp)
    except DaemonError:
        return None
    if not sock_path.exists():
        return None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(str(sock_path))
    except (ConnectionRefusedError, FileNotFoundError):
        s.close()
        with contextlib.suppress(OSError):
            sock_path.unlink()  # its daemon died without cleaning up
            info.unlink()
        return None
    except OSError:
        s.close()
        return None
    return s


def alive(pid: int) -> bool:
    """Whether `pid` runs; an exited daemon waiting to be reaped (a zombie: its parent, the
    `daemon start` command, is gone) counts as stopped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] != "Z"
    except (OSError, ValueError, IndexError):
        return True
