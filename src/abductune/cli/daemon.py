"""`abductune daemon start | stop | status`: a warm process for later `tune` commands; and the
tip that suggests one after a short live `tune`."""
from __future__ import annotations

import os
import time

import click

# the daemon's client side only: the package (`abductune.daemon`) holds its server, which runs
# commands through `cli.inprocess`, and an import of it here would close that circle
from ..daemon.base import DEFAULT_IDLE_S
from . import output


@click.group(name="daemon")
def daemon() -> None:
    """Keep the GPU workers warm between commands: a `tune` command then starts measuring at
    once instead of after 4-7 s of `import torch` and CUDA start. The daemon holds a CUDA
    context (about 1 GB of GPU memory) until it has been idle for --idle-minutes."""


@daemon.command(name="start")
@click.option("--idle-minutes", type=float, default=DEFAULT_IDLE_S / 60, show_default=True,
              help="Exit after this long without a command (frees the GPU memory it holds).")
def start_cmd(idle_minutes: float) -> None:
    """Start a daemon for this environment (Python, abductune source, GPU and Triton settings)
    and wait until its workers are warm."""
    from ..daemon.client import start
    from ..errors import AbductuneError

    if not idle_minutes > 0:
        raise AbductuneError(f"--idle-minutes must be positive, got {idle_minutes:g}")
    t0 = time.monotonic()
    info = start(idle_s=idle_minutes * 60)  # a DaemonError names the log to read
    if info.get("already"):
        click.echo(f"a daemon already serves this environment (pid {info.get('pid')})")
        return
    if info.get("replaced"):
        click.echo(f"stopped daemon pid {', '.join(map(str, info['replaced']))}: it ran older abductune code")
    gpu = info.get("gpu")
    click.echo(f"daemon ready in {time.monotonic() - t0:.1f} s (pid {info['pid']}; "
               + (f"workers warm on {gpu}" if gpu else "no GPU found: commands run in it without GPU workers")
               + f"); it exits after {idle_minutes:g} min idle, or `abductune daemon stop`")


@daemon.command(name="stop")
@click.option("--all", "every", is_flag=True, help="Stop every daemon of this user, whatever environment "
              "it serves.")
def stop_cmd(every: bool) -> None:
    """Stop the daemon serving this environment (a command it is running ends as after a
    crash: what it measured is in the store)."""
    from ..daemon.client import stop

    pids = stop(every)
    if pids:
        click.echo(f"stopped daemon pid {', '.join(map(str, pids))}")
    else:
        click.echo("no daemon running" if every else "no daemon serves this environment")


@daemon.command(name="status")
def status_cmd() -> None:
    """List this user's daemons: alive, serving this environment, commands served, log."""
    from ..daemon.client import status

    rows = status()
    if not rows:
        click.echo("no daemon")
        return
    now = time.time()
    for r in rows:
        state = r.get("state") if r["alive"] else "dead (stale files)"
        here = "serves this environment" if r["serves_here"] else \
            f"another environment (differs in: {', '.join(r['differs'][:4]) or '?'})"
        click.echo(f"pid {r.get('pid')}: {state}, {here}; up {now - r.get('started', now):.0f} s, "
                   f"{r.get('served', 0)} command(s), idle timeout {r.get('idle_s', 0) / 60:g} min; "
                   f"GPU {r.get('gpu') or '-'}; log {r.get('log')}")


def daemon_tip(mode: str, shapes: int) -> str | None:
    """A hint after a short live command that started its own workers: most of its time was
    their start, which a daemon pays once. Not inside a daemon, not when ABDUCTUNE_DAEMON is
    set either way (the user has chosen), not for long commands (the start is a small part)."""
    from ..daemon.client import platform_supported

    if mode != "live" or shapes > 3 or output.served or not platform_supported():
        return None
    if os.environ.get("ABDUCTUNE_DAEMON", "").strip():
        return None
    return ("tip: a fresh `abductune tune` spends 4-7 s starting torch and CUDA in its workers; "
            "`abductune daemon start` keeps them warm, so later commands skip that (it holds about 1 GB "
            "of GPU memory until 15 idle minutes; ABDUCTUNE_DAEMON=0 silences this tip)")
