"""The parent's handle on the benchmark worker process (worker.py's `bench_server`): request and
reply over a pipe with a timeout; a crash or a hang kills only the worker, which restarts."""
from __future__ import annotations

import os
import sys
from typing import Any

from ..errors import AbductuneError
from .forkserver import _server_context


class WorkerLost(Exception):
    def __init__(self, status: str, error: str):
        super().__init__(error)
        self.status = status
        self.error = error


class BenchWorker:
    """Parent-side handle of the benchmark process: request/reply with a timeout, restart."""

    def __init__(self, start_timeout: float = 120.0):
        self._ctx = _server_context()
        self.proc: Any = None
        self.conn: Any = None
        self.start_timeout = start_timeout
        self.restarts = 0
        self._setup_msg: dict | None = None

    def _start(self) -> None:
        from .worker import bench_server

        parent, child = self._ctx.Pipe()
        self.proc = self._ctx.Process(target=bench_server, args=(child, dict(os.environ), list(sys.path)),
                                      daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent
        if not parent.poll(self.start_timeout):
            self.kill()
            raise AbductuneError("the benchmark worker did not start (no GPU, or CUDA hangs?)")
        try:
            hello = parent.recv()
        except EOFError:
            code = self.proc.exitcode
            self.kill()
            raise AbductuneError(f"the benchmark worker exited while starting (exit code {code}); "
                                 "a script that starts workers needs an `if __name__ == '__main__':` "
                                 "guard") from None
        if not hello.get("ready"):
            self.kill()
            raise AbductuneError(f"the benchmark worker failed to start: {hello.get('error')}")
        if self._setup_msg is not None:
            self._call(self._setup_msg, self.start_timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
        if self.proc is not None and self.proc.pid is not None:
            self.proc.join(5)
        self.proc = None

    def _call(self, msg: dict, timeout: float) -> dict:
        try:
            self.conn.send(msg)
            if not self.conn.poll(timeout):
                self.kill()
                raise WorkerLost("timeout", f"no answer within {timeout:.0f} s (hang?); worker restarted")
            reply = self.conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            code = self.proc.exitcode if self.proc is not None else None
            self.kill()
            raise WorkerLost("runtime_error", f"benchmark worker died (exit code {code}); restarted") from None
        if getattr(reply, "sticky", False):
            self.proc.join(10)
            self.kill()
        return reply

    def ensure_started(self) -> None:
        """Start the process now (torch, a CUDA context and the flush buffer) rather than at
        the first request."""
        if self.proc is None or not self.proc.is_alive():
            self._start()

    def request(self, msg: dict, timeout: float) -> dict:
        if self.proc is None or not self.proc.is_alive():
            if self.proc is not None or self.conn is not None:
                self.restarts += 1
            self._start()
        if msg["op"] == "setup":
            self._setup_msg = msg
        return self._call(msg, timeout)

    def close(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send({"op": "stop"})
                self.proc.join(5)
            except (BrokenPipeError, OSError):
                pass
        self.kill()

