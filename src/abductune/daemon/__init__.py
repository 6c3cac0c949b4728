"""A warm process that runs later `abductune tune` commands (`abductune daemon start`).

Why: a fresh `abductune tune` spends 4-7 s before its first measurement on `import torch` in
the workers' fork server and on the benchmark worker's CUDA context; the tune of a row-kernel
shape itself takes 1-3 s. The daemon pays that start once and keeps the workers (and their
CUDA context, about 1 GB of GPU memory: 938-1,102 MiB measured on the H100) until it has
been idle for a while.

How: the daemon (`server`) listens on a Unix socket that only its user can reach. A `tune`
command whose environment matches the daemon's (same Python, same abductune source, same
GPU/Triton/abductune variables: a *fingerprint*, `base`) sends its arguments, working folder
and store setting (`client`); the daemon runs the command in-process and streams stdout and
stderr back, then the exit code. Ctrl-C in the client cancels the command in the daemon (its
workers are restarted, since a cancelled benchmark may leave a reply in flight). Commands run
one at a time (one GPU); a command naming a user kernel (`module:Class`) runs locally (the
daemon would hold a stale import of the user's module), and `--no-daemon` or
`ABDUCTUNE_DAEMON=0` always runs locally.
"""
from __future__ import annotations

from .base import DEFAULT_IDLE_S, DaemonError, fingerprint, fingerprint_items, runtime_dir
from .client import forward, forward_or_start, forwardable, start, status, stop
from .server import run_request, serve_forever

__all__ = ["DEFAULT_IDLE_S", "DaemonError", "fingerprint", "fingerprint_items", "runtime_dir", "forward",
           "forward_or_start", "forwardable", "start", "status", "stop", "run_request", "serve_forever"]
