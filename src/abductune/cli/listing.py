"""`abductune kernels | strategies`: what can be tuned (and where, without a GPU), and how."""
from __future__ import annotations

import sys
from typing import Any

import click
from rich.table import Table

from . import output


@click.command()
def strategies() -> None:
    """List the search strategies."""
    from ..search import STRATEGIES

    for name, cls in sorted(STRATEGIES.items()):
        doc = (sys.modules[cls.__module__].__doc__ or "").strip().split("\n\n")[0]
        first = " ".join(doc.split())
        first = first.split(". ")[0].rstrip(".") + "."  # the first sentence, whole
        click.echo(f"{name:12} {first}")


def replay_kernels() -> dict[str, list[Any]]:
    """Built-in kernel -> its bundled (replayable) datasets; empty for a kernel that has none."""
    from .. import kernels
    from ..datasets.bundled import bundled_datasets

    found: dict[str, list[Any]] = {}
    for p in bundled_datasets():
        found.setdefault(p.parent.name, []).append(p)
    return {n: found.get(n, []) for n in kernels.names()}


def no_replay_data(kernel: str) -> str:
    """Why `kernel` cannot be tuned by replay, and what can."""
    have = [k for k, ps in replay_kernels().items() if ps]
    return (f"{kernel} has no bundled replay data, so it can only be tuned live on a GPU (--mode live); "
            f"without a GPU, tune one that has: {', '.join(have)} (see `abductune kernels`)")


@click.command(name="kernels")
def kernels_cmd() -> None:
    """List the built-in kernels, their dims, and which have bundled replay data (what
    `abductune tune` uses on a machine without a GPU)."""
    from .. import kernels

    table = Table(title="built-in kernels", box=None, pad_edge=False)
    for col in ("kernel", "dims", "without a GPU (replay of bundled H100 data)"):
        table.add_column(col, no_wrap=col != "without a GPU (replay of bundled H100 data)")
    for n, paths in replay_kernels().items():
        dims = ",".join(kernels.get(n).dims)
        table.add_row(n, dims, f"yes: {len(paths)} recorded shapes" if paths else
                      "no: live only (--mode live on a GPU)")
    output.console.print(table)
    click.echo("Without a GPU, `abductune tune` replays the bundled data, so only the kernels marked yes "
               "can be tuned there; on a GPU every kernel is tuned live.")
