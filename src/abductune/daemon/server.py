"""The daemon process: warm the workers, accept commands one at a time, run each in-process
with its output sent to its client, cancel on request, exit when idle or told to."""
from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from typing import Any, Callable

from .base import (CANCEL, DEFAULT_IDLE_S, ERR, EXIT, OUT, PER_REQUEST, REQUEST, DaemonError, Terminate,
                   connect, fingerprint, fingerprint_items, read_info, recv_frame, send_frame, state_paths,
                   text_stream)

log = logging.getLogger("abductune.daemon")


def _warm() -> dict[str, Any]:
    """Start what a live tune waits for: the fork server (torch imported), the benchmark
    worker (a CUDA context) and the compile pool; import the modules a command uses."""
    t0 = time.perf_counter()
    import importlib

    from .. import kernels, session, tune  # noqa: F401 - imported once, here
    from ..cli import inprocess  # noqa: F401 - the command line, every command family
    from ..theory import store as _theory_store  # noqa: F401

    # a cancel that lands inside an import leaves a module half-initialised; import the heavy
    # ones now so that a command rarely imports anything (see `_Server._handle`)
    for name in ("torch", "triton", "optuna", "numpy.random", "numpy.ma", "secrets", "rich._emoji_codes"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    _import_package()

    facts: dict[str, Any] = {"gpu": None}
    from ..measure.target import visible_gpu

    gpu = visible_gpu()
    if gpu is not None and tune.gpu_available():
        from ..measure.live import prestart, shared_processes

        prestart()
        worker, compiler = shared_processes()
        compiler.warm()
        worker.ensure_started()
        facts["gpu"] = gpu[0]
    facts["warm_s"] = round(time.perf_counter() - t0, 2)
    return facts


# not imported ahead: integrations load optional libraries, a fleet's driver never runs here
_NOT_AHEAD = ("abductune.integrations", "abductune.fleet", "abductune.daemon", "abductune.__main__")


def _import_package() -> None:
    """Import every module a command may reach (kernels, replay, sweep, strategies...) so
    that a cancel almost never lands inside an import, which would end the daemon."""
    import importlib
    import pkgutil

    from .. import __path__ as pkg_path

    for m in pkgutil.walk_packages(pkg_path, "abductune."):
        if m.name.startswith(_NOT_AHEAD) or m.name.endswith(".__main__"):
            continue
        try:
            importlib.import_module(m.name)
        except Exception as e:  # an optional dependency missing: the command imports it then
            log.debug("not imported ahead: %s (%s)", m.name, e)


def _release_workers() -> None:
    """Between commands: the benchmark worker frees the last problem's GPU buffers."""
    if "abductune.measure.live" in sys.modules:
        from ..measure import live

        live.release_shared()


def _reset_workers() -> None:
    """After a cancelled command: its benchmark may still be running, so start anew."""
    from ..measure import live

    live.close_shared(kill=True)


class _Server:
    def __init__(self, idle_s: float, warm: bool = True):
        # what it started with, kept: `status` compares it with a caller's environment, and an
        # edited checkout must show as a difference rather than be re-read here
        self.items = fingerprint_items()
        self.fp = fingerprint(items=self.items)
        self.sock_path, self.info_path, self.log_path = state_paths(self.fp, create=True)
        self.idle_s = idle_s
        self.warm = warm
        self.served = 0
        self.started = time.time()
        self.sock: socket.socket | None = None
        self.facts: dict[str, Any] = {}

    def _write_info(self, state: str, argv: list[str] | None = None, request: str | None = None) -> None:
        from ..files import atomic_write_text

        info = {"pid": os.getpid(), "fingerprint": self.fp, "items": self.items, "state": state,
                "argv": argv, "request": request,
                "started": self.started, "idle_s": self.idle_s, "served": self.served,
                "last_used": time.time(), "log": str(self.log_path), **self.facts}
        atomic_write_text(self.info_path, json.dumps(info, indent=1))

    def bind(self) -> None:
        existing = connect(self.fp)
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
            frame = recv_frame(conn)
        except OSError:
            return
        if frame is None or frame[0] != REQUEST:
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
            raise Terminate()


def _client_gone(conn: socket.socket) -> bool:
    """Whether a queued client has hung up or cancelled before its command started."""
    try:
        head = conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
    return head in (b"", CANCEL)


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
                frame = recv_frame(conn)
                if frame is None or frame[0] == CANCEL:
                    break
        except OSError:
            pass
        with lock:
            if not state["done"] and main_id is not None:
                state["cancelled"] = True
                # a real SIGINT, not interrupt_main(): it also wakes a wait in a system call
                signal.pthread_kill(main_id, signal.SIGINT)

    out = text_stream(conn, OUT, bool(req.get("tty_out")), lock)
    err = text_stream(conn, ERR, bool(req.get("tty_err")), lock)
    root = logging.getLogger()
    saved = (sys.stdout, sys.stderr, os.getcwd(), {k: os.environ.get(k) for k in PER_REQUEST},
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
    terminate: Terminate | None = None
    watcher = threading.Thread(target=watch, daemon=True, name="abductune-daemon-watch")
    try:
        try:
            sys.stdout, sys.stderr = out, err
            os.chdir(req.get("cwd") or saved[2])
            for k, v in (req.get("env") or {}).items():
                if k in PER_REQUEST:
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            watcher.start()
            code = (run or _run_cli)(list(req["argv"]), req)
        except KeyboardInterrupt:
            code = 130
        except Terminate as e:
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
        send_frame(conn, EXIT, str(code).encode())
    if terminate is not None:
        raise terminate
    return code


def _run_cli(argv: list[str], req: dict[str, Any]) -> int:
    """The command as the `abductune` entry point would run it, on this request's streams
    (`run_request` points sys.stdout and sys.stderr at them), printed as on the client's
    terminal."""
    from ..cli.inprocess import run_command

    root = logging.getLogger()
    for h in list(root.handlers):  # `main` installs one on the current stderr
        root.removeHandler(h)
    return run_command(argv, tty_out=bool(req.get("tty_out")), tty_err=bool(req.get("tty_err")),
                       columns=req.get("columns"))


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
        raise Terminate()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, _on_sigint)
    server.bind()
    try:
        server.serve()
    except Terminate:
        log.info("stopped (SIGTERM)")
    finally:
        server.cleanup()


def main(argv: list[str] | None = None) -> None:
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
