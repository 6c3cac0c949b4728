"""`abductune daemon start | stop | status`: a warm process for later `tune` commands."""
from __future__ import annotations

import time

import click

from .daemon import DEFAULT_IDLE_S


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
    from .daemon import start
    from .errors import AbductuneError

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
    from .daemon import stop

    pids = stop(every)
    if pids:
        click.echo(f"stopped daemon pid {', '.join(map(str, pids))}")
    else:
        click.echo("no daemon running" if every else "no daemon serves this environment")


@daemon.command(name="status")
def status_cmd() -> None:
    """List this user's daemons: alive, serving this environment, commands served, log."""
    from .daemon import status

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
