"""A warm process that runs later `abductune tune` commands (`abductune daemon start`).

Why: a fresh `abductune tune` spends 4-7 s before its first measurement on `import torch` in
the workers' fork server and on the benchmark worker's CUDA context; the tune of a row-kernel
shape itself takes 1-3 s. The daemon pays that start once and keeps the workers (and their
CUDA context, about 0.5 GB of GPU memory) until it has been idle for a while.

How: the daemon listens on a Unix socket that only its user can reach. A `tune` command whose
environment matches the daemon's (same Python, same abductune source, same GPU/Triton/
abductune variables: a *fingerprint*) sends its arguments, working directory and store
setting; the daemon runs the command in-process and streams stdout and stderr back, then the
exit code. Ctrl-C in the client cancels the command in the daemon (its workers are restarted,
since a cancelled benchmark may leave a reply in flight). Commands run one at a time (one GPU),
a command naming a user kernel (`module:Class`) runs locally (the daemon would hold a stale
import of the user's module), and `--no-daemon` or `ABDUCTUNE_DAEMON=0` always runs locally.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import select
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from .errors import AbductuneError

log = logging.getLogger("abductune.daemon")

DEFAULT_IDLE_S = 15 * 60.0
WAIT_NOTE_S = 1.0  # a command that hears nothing this long says what it is waiting for
# variables that change what a command does in ways fixed when the daemon's workers started
_FINGERPRINT_PREFIXES = ("ABDUCTUNE_", "TRITON_", "CUDA_", "NVIDIA_", "PYTORCH_")
_FINGERPRINT_NAMES = ("HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "PYTHONPATH", "LD_LIBRARY_PATH")
# read per command, so the daemon takes them from each request instead
_PER_REQUEST = ("ABDUCTUNE_STORE",)
_CLIENT_ONLY = ("ABDUCTUNE_DAEMON", "ABDUCTUNE_RUNTIME_DIR")

# frames: one type byte, a 4-byte big-endian length, the payload
_OUT, _ERR, _EXIT, _CANCEL, _REQUEST = b"o", b"e", b"x", b"c", b"r"


class DaemonError(AbductuneError):
    """The daemon could not be started, reached or stopped."""


class _Terminate(BaseException):
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
    from . import __version__

    items = {"python": sys.executable, "version": __version__, "package": str(Path(__file__).parent),
             "source": _source_stamp()}
    for k in sorted(env):
        if k in _PER_REQUEST or k in _CLIENT_ONLY:
            continue
        if k.startswith(_FINGERPRINT_PREFIXES) or k in _FINGERPRINT_NAMES:
            items[f"env:{k}"] = env[k]
    return items


def fingerprint(env: dict[str, str] | None = None) -> str:
    blob = json.dumps(fingerprint_items(env), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _paths(fp: str, create: bool = False) -> tuple[Path, Path, Path]:
    d = runtime_dir(create)
    return d / f"d-{fp}.sock", d / f"d-{fp}.json", d / f"d-{fp}.log"


# --- framing ------------------------------------------------------------------------------

def _send(sock: socket.socket, kind: bytes, payload: bytes) -> None:
    sock.sendall(kind + struct.pack(">I", len(payload)) + payload)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def _recv(sock: socket.socket) -> tuple[bytes, bytes] | None:
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
                    _send(self._sock, self._kind, data)
            except OSError:
                self.lost = True  # the client went away; the watcher cancels the command
        return len(data)


def _text_stream(sock: socket.socket, kind: bytes, tty: bool, lock: threading.Lock) -> io.TextIOWrapper:
    return io.TextIOWrapper(_FrameWriter(sock, kind, tty, lock), encoding="utf-8", errors="replace",
                            write_through=True, line_buffering=True)


# --- the client side ----------------------------------------------------------------------

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


def forwardable(argv: list[str]) -> bool:
    """Whether this command line may run in a daemon: `tune` (live or auto), no user kernel,
    no --no-daemon, ABDUCTUNE_DAEMON not 0."""
    if _setting() == "off":
        return False
    args = [a for a in argv if a not in ("-v", "--verbose")]
    if not args or args[0] != "tune" or "--no-daemon" in args:
        return False
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


def read_info(fp: str) -> dict[str, Any] | None:
    try:
        _, info, _ = _paths(fp)
        return json.loads(info.read_text())
    except (OSError, ValueError, DaemonError):
        return None


def _connect(fp: str) -> socket.socket | None:
    """A connection to the live daemon for `fp`, or None (a stale socket is removed)."""
    try:
        sock_path, info, _ = _paths(fp)
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


def forward(argv: list[str], stdout: Any = None, stderr: Any = None) -> int | None:
    """Run `argv` in the daemon that serves this environment and relay its output; the exit
    code, or None when no daemon serves it (the caller runs the command itself)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    fp = fingerprint()
    s = _connect(fp)
    if s is None:
        return None
    info = read_info(fp) or {}
    rid = uuid.uuid4().hex
    req = {"id": rid, "argv": argv, "cwd": os.getcwd(), "env": {k: os.environ.get(k) for k in _PER_REQUEST},
           "tty_out": _isatty(out), "tty_err": _isatty(err), "columns": _columns()}
    try:
        _send(s, _REQUEST, json.dumps(req).encode())
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
                frame = _recv(s)
            except socket.timeout:  # only after a cancel: left the queue, or slow to stop
                return 130
            except KeyboardInterrupt:
                if cancelled:  # a second Ctrl-C: stop waiting for the daemon's answer
                    return 130
                cancelled = True
                with contextlib.suppress(OSError):
                    _send(s, _CANCEL, b"")
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
            if kind == _EXIT:
                return int(body.decode() or 1)
            try:
                _write(out if kind == _OUT else err, body)
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


# --- the server side ----------------------------------------------------------------------

def _warm() -> dict[str, Any]:
    """Start what a live tune waits for: the fork server (torch imported), the benchmark
    worker (a CUDA context) and the compile pool; import the modules a command uses."""
    t0 = time.perf_counter()
    import importlib

    from . import cli, kernels, session, tune  # noqa: F401 - imported once, here
    from .theory import store as _theory_store  # noqa: F401

    # a cancel that lands inside an import leaves a module half-initialised; import the heavy
    # ones now so that a command rarely imports anything (see `_Server._handle`)
    for name in ("torch", "triton", "optuna"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)

    facts: dict[str, Any] = {"gpu": None}
    from .measure.target import visible_gpu

    gpu = visible_gpu()
    if gpu is not None and tune.gpu_available():
        from .measure.live import prestart, shared_processes

        prestart()
        worker, compiler = shared_processes()
        compiler.warm()
        worker.ensure_started()
        facts["gpu"] = gpu[0]
    facts["warm_s"] = round(time.perf_counter() - t0, 2)
    return facts


def _release_workers() -> None:
    """Between commands: the benchmark worker frees the last problem's GPU buffers."""
    if "abductune.measure.live" in sys.modules:
        from .measure import live

        live.release_shared()


def _reset_workers() -> None:
    """After a cancelled command: its benchmark may still be running, so start anew."""
    from .measure import live

    live.close_shared(kill=True)


class _Server:
    def __init__(self, idle_s: float, warm: bool = True):
        self.fp = fingerprint()
        self.sock_path, self.info_path, self.log_path = _paths(self.fp, create=True)
        self.idle_s = idle_s
        self.warm = warm
        self.served = 0
        self.started = time.time()
        self.sock: socket.socket | None = None
        self.facts: dict[str, Any] = {}

    def _write_info(self, state: str, argv: list[str] | None = None, request: str | None = None) -> None:
        from .files import atomic_write_text

        info = {"pid": os.getpid(), "fingerprint": self.fp, "items": fingerprint_items(), "state": state,
                "argv": argv, "request": request,
                "started": self.started, "idle_s": self.idle_s, "served": self.served,
                "last_used": time.time(), "log": str(self.log_path), **self.facts}
        atomic_write_text(self.info_path, json.dumps(info, indent=1))

    def bind(self) -> None:
        existing = _connect(self.fp)
        if existing is not None:
            existing.close()
            raise DaemonError(f"a daemon already serves this environment ({self.sock_path})")
        with contextlib.suppress(FileNotFoundError):
            self.sock_path.unlink()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is created 0600: only this user connects
        try:
            s.bind(str(self.sock_path))
        finally:
            os.umask(old)
        s.listen(16)
        self.sock = s
        self._write_info("starting")

    def cleanup(self) -> None:
        if self.sock is not None:
            self.sock.close()
        # only our own files: a new daemon may already have taken the name
        info = read_info(self.fp)
        if info is None or info.get("pid") == os.getpid():
            for p in (self.sock_path, self.info_path):
                with contextlib.suppress(OSError):
                    p.unlink()

    def serve(self) -> None:
        assert self.sock is not None
        if self.warm:
            self.facts = _warm()
        self._write_info("ready")
        while True:
            self.sock.settimeout(self.idle_s)
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                log.info("idle for %.0f s: exiting", self.idle_s)
                return
            with conn:
                self._handle(conn)
            self._write_info("ready")

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        try:
            frame = _recv(conn)
        except OSError:
            return
        if frame is None or frame[0] != _REQUEST:
            return  # a probe (status, start) that only checked we are alive
        conn.settimeout(None)
        req = json.loads(frame[1])
        if _client_gone(conn):
            log.info("skipped %s: its client left while it waited", req.get("argv"))
            return
        self.served += 1
        self._write_info("busy", argv=req.get("argv"), request=req.get("id"))
        _INTERRUPTED_IMPORT.clear()
        code = run_request(conn, req)
        log.info("served %s: exit %s", req.get("argv"), code)
        if _INTERRUPTED_IMPORT:
            # the cancel landed inside an import: a module may be half-initialised
            log.info("cancelled inside an import of %s: exiting (the next command runs without this "
                     "daemon)", _INTERRUPTED_IMPORT[0])
            raise _Terminate()


def _client_gone(conn: socket.socket) -> bool:
    """Whether a queued client has hung up or cancelled before its command started."""
    try:
        head = conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
    return head in (b"", _CANCEL)


def run_request(conn: socket.socket, req: dict[str, Any],
                run: Callable[[list[str], dict[str, Any]], int] | None = None) -> int:
    """Run one command (in the main thread) with its output going to `conn`; cancel it when
    the client says so or goes away. Returns the exit code (also sent to the client)."""
    lock = threading.Lock()
    state = {"done": False, "cancelled": False}
    main_id = threading.main_thread().ident

    def watch() -> None:
        try:
            while True:
                frame = _recv(conn)
                if frame is None or frame[0] == _CANCEL:
                    break
        except OSError:
            pass
        with lock:
            if not state["done"] and main_id is not None:
                state["cancelled"] = True
                # a real SIGINT, not interrupt_main(): it also wakes a wait in a system call
                signal.pthread_kill(main_id, signal.SIGINT)

    out = _text_stream(conn, _OUT, bool(req.get("tty_out")), lock)
    err = _text_stream(conn, _ERR, bool(req.get("tty_err")), lock)
    root = logging.getLogger()
    saved = (sys.stdout, sys.stderr, os.getcwd(), {k: os.environ.get(k) for k in _PER_REQUEST},
             list(root.handlers), root.level)

    def restore() -> None:
        sys.stdout, sys.stderr = saved[0], saved[1]
        root.handlers[:] = saved[4]
        root.setLevel(saved[5])
        os.chdir(saved[2])
        for k, v in saved[3].items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    code = 1
    terminate: _Terminate | None = None
    watcher = threading.Thread(target=watch, daemon=True, name="abductune-daemon-watch")
    try:
        try:
            sys.stdout, sys.stderr = out, err
            os.chdir(req.get("cwd") or saved[2])
            for k, v in (req.get("env") or {}).items():
                if k in _PER_REQUEST:
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            watcher.start()
            code = (run or _run_cli)(list(req["argv"]), req)
        except KeyboardInterrupt:
            code = 130
        except _Terminate as e:
            terminate, code = e, 143
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:  # noqa: BLE001 - a bug in one command must not end the daemon
            import traceback

            traceback.print_exc(file=err)
            code = 1
        finally:
            with lock:
                state["done"] = True
            restore()
    except KeyboardInterrupt:  # the cancel's signal landed just after the command ended
        restore()
    if state["cancelled"]:
        _reset_workers()
        code = 130
    else:
        _release_workers()
    with contextlib.suppress(OSError), lock:
        _send(conn, _EXIT, str(code).encode())
    if terminate is not None:
        raise terminate
    return code


def _run_cli(argv: list[str], req: dict[str, Any]) -> int:
    """The command as the `abductune` entry point would run it, on this request's streams."""
    from rich.console import Console

    from . import cli

    root = logging.getLogger()
    for h in list(root.handlers):  # `main` installs one on the current stderr
        root.removeHandler(h)
    cols = req.get("columns")
    cli.console = Console(stderr=False, width=cols if req.get("tty_out") and cols else 180,
                          force_terminal=bool(req.get("tty_out")))
    cli.err_console = Console(stderr=True, width=cols or 120, force_terminal=bool(req.get("tty_err")))
    try:
        cli.main.main(args=argv, prog_name="abductune", standalone_mode=True)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


_INTERRUPTED_IMPORT: list[str] = []  # set when a cancel's SIGINT lands inside an import


def _on_sigint(signum: int, frame: Any) -> None:
    """KeyboardInterrupt, noting whether it interrupts an import (importlib's frames on the
    stack): a half-imported module would break every later command in this process."""
    f = frame
    while f is not None:
        if f.f_code.co_filename.startswith("<frozen importlib"):
            _INTERRUPTED_IMPORT.append(str(frame.f_code.co_filename))
            break
        f = f.f_back
    raise KeyboardInterrupt


def serve_forever(idle_s: float = DEFAULT_IDLE_S, warm: bool = True) -> None:
    """The daemon's main: bind, warm up, serve until idle or SIGTERM, clean up."""
    server = _Server(idle_s, warm)

    def on_term(signum: int, frame: Any) -> None:
        raise _Terminate()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, _on_sigint)
    server.bind()
    try:
        server.serve()
    except _Terminate:
        log.info("stopped (SIGTERM)")
    finally:
        server.cleanup()


# --- start, stop, status ------------------------------------------------------------------

def start(idle_s: float = DEFAULT_IDLE_S, wait_s: float = 300.0,
          on_wait: Callable[[float], None] | None = None) -> dict[str, Any]:
    """Start a detached daemon for this environment and wait until it is warm. Returns its
    info; raises DaemonError with its log's tail when it fails."""
    import subprocess

    fp = fingerprint()
    s = _connect(fp)
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
    _, info_path, log_path = _paths(fp, create=True)
    with contextlib.suppress(FileNotFoundError):
        info_path.unlink()
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


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _alive(pid: int) -> bool:
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


def _terminate(pid: int, wait_s: float) -> None:
    os.kill(pid, signal.SIGTERM)
    t0 = time.monotonic()
    while _alive(pid) and time.monotonic() - t0 < wait_s:
        time.sleep(0.05)
    if _alive(pid):
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
        alive = _alive(int(info.get("pid", -1))) and (d / f"d-{info.get('fingerprint')}.sock").exists()
        diff = sorted(k for k in set(here) | set(info.get("items", {}))
                      if here.get(k) != info.get("items", {}).get(k))
        out.append({**info, "alive": alive, "serves_here": info.get("fingerprint") == mine, "differs": diff})
    return out


def _main(argv: list[str] | None = None) -> None:
    import argparse

    p = argparse.ArgumentParser(prog="python -m abductune.daemon", description="Run the abductune daemon "
                                "in this process (`abductune daemon start` runs it detached).")
    p.add_argument("--idle", type=float, default=DEFAULT_IDLE_S, help="seconds idle before exiting")
    p.add_argument("--no-warm", action="store_true", help="do not start the GPU workers at start")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        serve_forever(a.idle, warm=not a.no_warm)
    except DaemonError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:  # Ctrl-C on a daemon run in a terminal: a stop, not a crash
        log.info("stopped (Ctrl-C)")


if __name__ == "__main__":  # run from the imported module, not a second copy named __main__
    from abductune.daemon import _main as _daemon_main

    _daemon_main()
