"""`abductune tune-moe`: tune a fused-MoE kernel over vLLM's batch grid for a routing
distribution and write vLLM's config JSON, one line of progress per batch size."""
from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from ..errors import AbductuneError
from ..format import format_config
from . import output
from .args import csv_list, require_gpu_stack
from .output import Interrupted

_GRID = ",".join(str(b) for b in (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096))


def _us(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1e3:.1f} µs"


@click.command(name="tune-moe")
@click.option("-E", "--experts", type=int, required=True, help="Number of experts (E).")
@click.option("--n", "n", type=int, required=True,
              help="The GEMM's output width N (gate+up: 2 x the intermediate size per shard).")
@click.option("--k", "k", type=int, required=True, help="The GEMM's reduction size K (gate+up: the hidden size).")
@click.option("--dtype", default="bf16", show_default=True, help="Element type (the kernel's: bf16).")
@click.option("--batch", "batch", default=_GRID, show_default=True,
              help="Comma-separated batch sizes (tokens); the default is vLLM's benchmark_moe.py grid.")
@click.option("--routing", default="uniform", show_default=True,
              help="How tokens pick experts: uniform, zipf:S (expert e weighted 1/(e+1)^S, e.g. zipf:1.2), "
                   "or trace:FILE (a JSON file of per-expert counts, or of expert ids per token).")
@click.option("--budget", type=int, default=16, show_default=True,
              help="Evaluations per batch size (seeds included).")
@click.option("--seconds", type=float, default=None, help="Seconds per batch size (compile + benchmark).")
@click.option("--out", "out_dir", default=".", show_default=True,
              help="Folder for the vLLM JSON (E=..,N=..,device_name=...json) and its tune-moe log.")
@click.option("--device-name", default=None,
              help="GPU name for the file name (default: the local GPU's, as CUDA reports it).")
@click.option("--projection", type=click.Choice(["up", "down"]), default="up", show_default=True,
              help="Which GEMM this is, for the file's N: up (gate+up, file N = N/2) or down (file N = K).")
@click.option("--vllm-n", type=int, default=None, help="The file name's N, overriding --projection.")
@click.option("--strategy", default="abduction", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--full-budget", is_flag=True, help="Spend the whole budget at every batch size (abduction "
              "otherwise stops once its search has settled).")
@click.option("--no-heuristics", is_flag=True, help="Seed only with the neighbours' winners.")
@click.option("--store", "store_path", default=None,
              help="SQLite store for every measurement (default: the user cache).")
@click.option("--fresh", is_flag=True, help="Start the table over, overwriting an earlier one (configs the store "
              "has measured for the same problem are answered from it, not timed again).")
@click.option("--dry-run", is_flag=True, help="Print the plan and measure nothing (no GPU needed).")
def tune_moe_cmd(experts: int, n: int, k: int, dtype: str, batch: str, routing: str, budget: int,
                 seconds: float | None, out_dir: str, device_name: str | None, projection: str, vllm_n: int | None,
                 strategy: str, seed: int, full_budget: bool, no_heuristics: bool, store_path: str | None,
                 fresh: bool, dry_run: bool) -> None:
    """Tune a fused-MoE kernel for vLLM: one search per batch size, seeded by its neighbours."""
    from ..moe import plan_moe, tune_moe
    from ..search import Budget

    if seconds is not None and not seconds > 0:
        raise AbductuneError(f"--seconds must be positive, got {seconds:g}")
    batches = csv_list(batch, int)
    if device_name is None:  # the local GPU's name, read from NVML without starting CUDA (None without one)
        from ..measure.target import visible_gpu

        seen = visible_gpu()
        device_name = seen[0] if seen else None
    plan = plan_moe(experts, n, k, dtype, batches, routing=routing, budget=Budget(budget, seconds),
                    strategy=strategy, out_dir=out_dir, device_name=device_name, projection=projection,
                    vllm_n=vllm_n, fresh=fresh)
    if dry_run:
        click.echo("tune-moe plan (dry run: nothing measured)")
        for line in plan.lines():
            click.echo(line)
        if device_name is None:
            click.echo("no GPU seen here: the file name's device comes from the GPU tune-moe runs on "
                       "(or --device-name)")
        return
    require_gpu_stack()
    from ..store import Store
    from ..tune import gpu_available

    if not gpu_available():
        raise AbductuneError("tune-moe measures the kernel on a GPU and found none here; "
                             "--dry-run prints the plan without one")
    store = Store(store_path) if store_path else Store()
    done: list[int] = []
    table: Any = None

    def progress(e: dict[str, Any]) -> None:
        head = f"[{e['index']}/{e['total']}] M={e['batch']}"
        if e["event"] == "kept":
            click.echo(f"{head}: kept from the earlier run, {_us(e['entry'].time_ms)}")
        elif e["event"] == "start":
            near = ", ".join(f"M={b}" for b in e["neighbours"])
            output.err_console.print(f"{head}: tuning" + (f", seeded from {near}" if near else ""),
                                     markup=False, highlight=False)
        else:
            ent = e["entry"]
            done.append(ent.batch)
            click.echo(f"{head}: {_us(ent.time_ms)} (kernel default {_us(ent.default_ms)}), "
                       f"{ent.evaluations} evals, {ent.wall_s:.1f} s; {format_config(ent.config)}"
                       + (f" -> {e['path']}" if e.get("path") else ""))
    try:
        table = tune_moe(experts, n, k, dtype, batches, routing=routing, budget=Budget(budget, seconds),
                         strategy=strategy, seed=seed, out_dir=out_dir, device_name=device_name,
                         projection=projection, vllm_n=vllm_n, store=store, heuristics=not no_heuristics,
                         stop_early=not full_budget, fresh=fresh, on_progress=progress)
    except KeyboardInterrupt:
        where = plan.path.parent if plan.path is not None else out_dir
        raise Interrupted(f"{len(done)} batch size(s) tuned this run are in the table in {where}; rerun the "
                          "same command to tune the rest (finished batch sizes are kept)") from None
    finally:
        store.close()
    _print_table(table)


def _print_table(table: Any) -> None:
    t = Table(title=f"tune-moe: {table.settings['kernel']} E={table.settings['E']} N={table.settings['N']} "
                    f"K={table.settings['K']}, routing {table.settings['routing_label']}")
    for c in ("M", "time", "kernel default", "evals", "seeded from", "BLOCK_SIZE_M,N,K / GROUP / warps / stages"):
        t.add_column(c, justify="left" if c.startswith("BLOCK") else "right")
    for b in sorted(table.entries):
        e = table.entries[b]
        v = e.vllm
        cfg = "{}x{}x{} / {} / {} / {}".format(*(v.get(x, "-") for x in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K",
                                                                         "GROUP_SIZE_M", "num_warps", "num_stages")))
        t.add_row(str(b), _us(e.time_ms), _us(e.default_ms), str(e.evaluations),
                  ",".join(map(str, e.seeded_from)) or "-", cfg)
    output.console.print(t)
    if table.path is not None:
        click.echo(f"wrote {table.path} (vLLM reads it from VLLM_TUNED_CONFIG_FOLDER or its configs folder)")
