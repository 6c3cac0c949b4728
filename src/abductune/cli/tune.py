"""`abductune tune`: tune built-in (or your own) kernels on shapes, live on a GPU or by replaying
bundled measurements, and print the winners with the figures beside them."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.progress import TextColumn
from rich.table import Table
from rich.text import Text

from ..errors import AbductuneError
from ..format import format_config
from . import output
from .args import csv_list, outputs_writable, require_gpu_stack
from .daemon import daemon_tip
from .listing import no_replay_data
from .output import Interrupted


def _shapes_for(kernel: str, shapes: str | None, mode: str) -> list[dict[str, int]]:
    """Shapes to tune: given ones, else the bundled datasets' shapes (replay) or the suite's.
    Given shapes are checked against the kernel's dims (names, each once, positive) before
    any dataset is looked up; a built-in spec imports without Triton (kernels/_triton.py)."""
    from .. import kernels
    from ..sweep import parse_shapes

    given = parse_shapes(shapes) if shapes else None
    if mode == "replay" and ":" in kernel:
        raise AbductuneError(f"{kernel} is a user kernel: replay needs its recorded dataset; tune it live "
                             "on a GPU, or `abductune replay` a dataset you swept for it")
    if mode == "replay":
        from ..datasets.bundled import bundled_datasets

        if not bundled_datasets(kernel=kernel):
            raise AbductuneError(no_replay_data(kernel))
    if given is not None:
        spec = kernels.get(kernel)
        for dims in given:
            spec.problem(dims)  # `kernel 'K' takes dims [...]` / `every dim must be positive`
        return given
    if mode == "replay":
        from ..datasets.format import read_dataset

        return [read_dataset(p).problem.dims for p in bundled_datasets(kernel=kernel)]
    return kernels.get(kernel).suite_shapes()

@click.command(name="tune")
@click.option("--kernel", "kernel_list", default="matmul_fp16,softmax_fp16,rmsnorm_fp16,gelu_mul_fp16",
              show_default=True,
              help="Comma-separated built-in kernels (see `abductune kernels`), or module:Class of your "
                   "own KernelSpec (see docs/TROUBLESHOOTING.md, 'Your own kernel').")
@click.option("--shapes", default=None, help="e.g. 'M=16,N=4096,K=4096;M=512,N=4096,K=4096' "
              "(default: every recorded shape in replay, the suite's shapes live).")
@click.option("--strategy", default="abduction", show_default=True)
@click.option("--budget", type=int, default=32, show_default=True,
              help="Evaluations per shape (seeds included).")
@click.option("--full-budget", is_flag=True,
              help="Spend the whole budget. By default abduction stops early once the search has "
                   "settled: the incumbent stood against `patience` tests and no untested move is "
                   "expected to gain more than the noise.")
@click.option("--no-heuristics", is_flag=True, help="Start without seed configs from heuristics.")
@click.option("--database", default=None, type=click.Path(exists=True),
              help="Observed-heuristics database (a file or folder written by `abductune harvest`) "
                   "instead of the packaged one.")
@click.option("--seconds", type=float, default=None, help="Seconds per shape (compile + benchmark).")
@click.option("--mode", type=click.Choice(["auto", "live", "replay"]), default="auto", show_default=True,
              help="live needs a GPU; auto replays bundled H100 measurements when there is none.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--store", "store_path", default=None, help="SQLite store. Live default: the user cache "
              "dir (every measurement recorded, reruns resume); replay default: in memory (nothing kept, "
              "so a rerun starts over and `explain` cannot read the runs: give --store to keep them).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None)
@click.option("--no-daemon", is_flag=True, help="Run here even when an `abductune daemon` serves this "
              "environment (ABDUCTUNE_DAEMON=0 does the same).")
@click.option("--daemon", "use_daemon", is_flag=True, help="Run in the daemon, starting one first if none serves "
              "this environment, so later commands start warm (ABDUCTUNE_DAEMON=auto does this for every tune).")
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
              help="Tune on a Ray cluster, one worker per GPU, every shape at once (docs/FLEET.md): 'local' "
                   "starts one on this machine, 'auto' joins the one `ray start` made, else its address. "
                   "Needs the fleet extra.")
@click.option("--ray-workers", type=int, default=None,
              help="With --ray: how many workers (default: one per GPU in the cluster; replay: up to 4 CPUs).")
def tune_cmd(kernel_list: str, shapes: str | None, strategy: str, budget: int, full_budget: bool,
             seconds: float | None, no_heuristics: bool, database: str | None, mode: str, seed: int,
             store_path: str | None, json_out: str | None, no_daemon: bool, use_daemon: bool,
             ray_address: str | None = None, ray_workers: int | None = None) -> None:
    """Tune built-in kernels: live on a GPU, else by replaying bundled H100 measurements."""
    from .. import kernels
    from ..search import STRATEGIES, Budget
    from ..store import NearestOutside, Store
    from ..tune import gpu_available, tune_one

    if budget < 1:
        raise AbductuneError(f"--budget must be at least 1 evaluation, got {budget}")
    if seconds is not None and not seconds > 0:
        raise AbductuneError(f"--seconds must be positive, got {seconds:g}")
    if strategy not in STRATEGIES:
        raise AbductuneError(f"unknown strategy {strategy!r}; known: {', '.join(sorted(STRATEGIES))}")
    names = csv_list(kernel_list)
    unknown = [k for k in names if ":" not in k and k not in kernels.names()]
    if unknown:
        raise AbductuneError(f"unknown kernel(s) {', '.join(unknown)}; known: {', '.join(kernels.names())}")
    outputs_writable(json_out)
    executor = None
    no_gpu_replay = False
    if ray_address is not None:  # the cluster decides live or replay; this process needs no GPU
        executor, mode, no_gpu_replay = _fleet_executor(ray_address, mode, ray_workers, use_daemon)
    elif mode == "live":
        require_gpu_stack()
    if mode == "auto":
        mode = "live" if gpu_available() else "replay"
        if mode == "replay":
            import importlib.util

            if importlib.util.find_spec("torch") is None and _nvidia_gpu_present():
                require_gpu_stack()  # a GPU without torch: say so rather than replay H100 data
            no_gpu_replay = True
    # shapes are checked (text, the kernel's dims, replay data) before anything is opened or said
    jobs = [(k, d) for k in names for d in _shapes_for(k, shapes, mode)]
    if not jobs:
        raise AbductuneError("nothing to tune: no shapes given and none recorded for "
                             f"{kernel_list}")
    if no_gpu_replay and executor is not None:
        output.err_console.print("no GPU in the Ray cluster: replaying measurements recorded on an H100 (bundled "
                                 "datasets) on its CPUs; times are those recorded, not measured now", style="yellow",
                                 markup=False, soft_wrap=True)
    elif no_gpu_replay:
        output.err_console.print("no GPU found: replaying measurements recorded on an H100 (bundled datasets); "
                          "times are those recorded, not measured now", style="yellow", markup=False, soft_wrap=True)
    db = None
    if database:
        from ..heuristics import load_database

        db = load_database(database)
    if store_path:
        store: Any = Store(store_path)
    else:
        store = Store() if mode == "live" else None
    outcomes = []
    last_id = _last_measurement_id(store)
    fleet_run = None
    try:
        if executor is not None:
            fleet_run = _tune_on_fleet(executor, jobs, mode=mode, strategy=strategy, budget=Budget(budget, seconds),
                                       seed=seed, store=store, heuristics=not no_heuristics, database=db,
                                       stop_early=not full_budget, done=outcomes)
            outcomes = fleet_run.outcomes
        else:
            # each shape's first seeds: its kernel's winners on the nearest shapes earlier commands
            # tuned (never this command's: their order changes no search, as on a fleet)
            near = NearestOutside(store, jobs) if store is not None else None
            with output.progress_bar(TextColumn("{task.fields[evals]}")) as bar:
                task = bar.add_task("tuning", total=len(jobs), evals="")
                for k, d in jobs:
                    shape = ",".join(f"{a}={b}" for a, b in d.items())
                    bar.update(task, description=f"{k} {shape}", evals="")
                    count = [0]

                    def on_batch(ms: list[Any], count: list[int] = count) -> None:
                        count[0] += len(ms)
                        bar.update(task, evals=f"{count[0]} evals")
                    outcomes.append(tune_one(k, d, strategy=strategy, budget=Budget(budget, seconds), seed=seed,
                                             mode=mode, store=store, heuristics=not no_heuristics, database=db,
                                             stop_early=not full_budget, on_batch=on_batch, nearest_from=near))
                    bar.advance(task)
    except KeyboardInterrupt:
        raise Interrupted(_tune_interrupted_note(store, last_id, len(outcomes), len(jobs))) from None
    if store is not None:
        store.close()
    _print_outcomes(outcomes, mode, explain_hint(outcomes, store_path, store),
                    fleet_run.wall_s if fleet_run is not None else None)
    if fleet_run is not None:
        click.echo(fleet_run.summary())
    tip = None if no_daemon or executor is not None else daemon_tip(mode, len(jobs))
    if tip:
        output.err_console.print(tip, style="dim", markup=False, soft_wrap=True)
    if json_out:
        from ..files import atomic_write_text

        atomic_write_text(json_out, json.dumps([o.to_dict() for o in outcomes], indent=1, default=str))
        output.console.print(f"wrote {json_out}")


def _fleet_executor(address: str, mode: str, workers: int | None, use_daemon: bool) -> tuple[Any, str, bool]:
    """`tune --ray`: the Ray executor, the mode the cluster gives (live where it has GPUs), and
    whether that is a replay for want of a GPU."""
    from ..integrations.ray import executor_for

    if use_daemon:
        raise AbductuneError("--ray runs the fleet's driver here; drop --daemon")
    if workers is not None and workers < 1:
        raise AbductuneError(f"--ray-workers must be at least 1, got {workers}")
    executor, resolved = executor_for(address, mode=mode, workers=workers)
    return executor, resolved, mode == "auto" and resolved == "replay"


def _tune_on_fleet(executor: Any, jobs: list[tuple[str, dict[str, int]]], *, done: list[Any], **kw: Any) -> Any:
    """Every job at once on the fleet's workers (`fleet.tune_fleet`), with one progress bar;
    `done` collects outcomes as they finish (what an interrupt reports)."""
    from ..fleet import Farm, tune_fleet

    with output.progress_bar(TextColumn("{task.fields[evals]}")) as bar:
        task = bar.add_task(f"tuning on {executor.name}", total=len(jobs), evals="")
        count = [0]

        def on_batch(ms: list[Any]) -> None:
            count[0] += len(ms)
            bar.update(task, evals=f"{count[0]} evals")

        def on_done(o: Any) -> None:
            done.append(o)
            bar.update(task, completed=len(done))
        with Farm(executor) as farm:
            bar.update(task, total=len(jobs) * max(1, len([p for p in farm.pools() if p != "cpu"])
                                                   if kw["mode"] == "live" else 1))
            return tune_fleet(farm, jobs, on_batch=on_batch, on_done=on_done, **kw)


def _last_measurement_id(store: Any) -> int:
    if store is None:
        return 0
    return int(store.execute("SELECT COALESCE(MAX(id), 0) FROM measurements")[0][0])


def _tune_interrupted_note(store: Any, last_id: int, done: int, total: int) -> str:
    """What a Ctrl-C'd tune kept: its measurements are in the store (each run is marked
    interrupted there), and a rerun of the same command resumes."""
    shapes = f"{done} of {total} shape(s) finished"
    if store is None:
        return (f"{shapes}; a replay tune without --store keeps its measurements in memory, so none were "
                "kept: rerun it, with --store FILE to make an interrupted rerun resume")
    try:
        n = int(store.execute("SELECT COUNT(*) FROM measurements WHERE id > ?", (last_id,))[0][0])
        store.close()
    except Exception:  # noqa: BLE001 - the interrupt is what the user must hear about
        n = None
    kept = "its measurements were" if n is None else f"{n} new measurement(s) were"
    return (f"{shapes}; {kept} kept in {store.path}: rerun the same command to resume (finished shapes "
            "answer from the store, the others spend only what is left of their budget)")


def _nvidia_gpu_present() -> bool:
    return any(Path(p).exists() for p in ("/dev/nvidia0", "/proc/driver/nvidia/version"))


def _fmt_ms(v: float | None) -> str:
    return "-" if v is None else (f"{v * 1e3:.1f} µs" if v < 1 else f"{v:.3f} ms")


def _fmt_us(v: float | None) -> str:
    """A time in ms as a bare number of µs (the compact table's unit is in its title)."""
    if v is None:
        return "-"
    us = v * 1e3
    return f"{us:.1f}" if us < 1000 else f"{us:.0f}"


def tune_table(outcomes: list[Any], mode: str, width: int | None = None) -> Table:
    """The result table of `tune`: one row per shape, wide where the terminal allows it; on a
    narrower one (80 columns) a compact layout -- kernels as section lines, times in µs with
    the unit in the title, shapes wrapped at their commas -- so no cell is cut."""
    seconds = "simulated s" if mode == "replay" else "seconds"  # replay: recorded compile + bench costs
    table = Table(title=f"abductune tune ({mode})")
    cols = ["#", "kernel", "shape", "time", "fixed list best", "default", "torch", "ship"]
    if mode == "replay":
        cols.append("optimum")
    cols += ["evals", seconds]
    for c in cols:
        table.add_column(c, justify="left" if c in ("kernel", "shape") else "right")
    rows = []
    for i, o in enumerate(outcomes, 1):
        d = o.to_dict()
        times = [d["winner_ms"], d["fixed_best_ms"], d["default_ms"], d["torch_ms"]]
        opt = [d["optimum_ms"]] if mode == "replay" else []
        rows.append((i, o, times, opt, d["best_impl"]))
        table.add_row(str(i), _kernel_label(o), ",".join(f"{a}={b}" for a, b in o.dims.items()),
                      *map(_fmt_ms, times), d["best_impl"], *map(_fmt_ms, opt),
                      str(o.evaluations), f"{o.seconds:.1f}")
    natural = output.console.measure(table, options=output.console.options.update_width(10_000)).maximum
    if width is None or natural <= width:
        return table
    note = ", seconds simulated from recorded costs" if mode == "replay" else ""
    compact = Table(title=f"abductune tune ({mode}): times in µs{note}", box=None, pad_edge=False,
                    padding=(0, 0, 0, 2), show_edge=False, header_style="bold")
    heads = ["#", "kernel, shape", "time", "fixed\nlist\nbest", "default", "torch", "ship"]
    heads += (["optimum"] if mode == "replay" else []) + ["evals", "sim.\ns" if mode == "replay" else "s"]
    for h in heads:
        # only the shape wraps (at its commas); a name longer than the column folds, never "…"
        compact.add_column(h, justify="left" if h == "kernel, shape" else "right",
                           no_wrap=h != "kernel, shape", overflow="fold")
    kernel = None
    for i, o, times, opt, ship in rows:
        if _kernel_label(o) != kernel:
            kernel = _kernel_label(o)
            compact.add_row("", Text(kernel, style="bold"))
        compact.add_row(str(i), ", ".join(f"{a}={b}" for a, b in o.dims.items()), *map(_fmt_us, times), ship,
                        *map(_fmt_us, opt), str(o.evaluations), f"{o.seconds:.1f}")
    return compact


def _kernel_label(o: Any) -> str:
    """The kernel's name, and the GPU type where a fleet tuned it for several."""
    gpu = getattr(o, "gpu", "")
    return f"{o.kernel} ({gpu})" if gpu else o.kernel


def explain_hint(outcomes: list[Any], store_path: str | None, store: Any) -> str | None:
    """One line: the run id(s) this tune stored and the `abductune explain` command that tells
    how each reached its winner; or, when the runs went to an in-memory store (replay without
    --store), how to keep them."""
    ids = [o.session.run_id if o.session else None for o in outcomes]
    if not outcomes:
        return None
    if store is None or getattr(store, "path", None) == ":memory:" or any(i is None for i in ids):
        return ("runs not kept: replay tunes in memory; add --store FILE to keep them, then "
                "`abductune explain RUN --store FILE` tells how each reached its winner")
    import shlex

    where = f" --store {shlex.quote(store_path)}" if store_path else ""
    if len(ids) == 1:
        return f"run {ids[0]}: `abductune explain {ids[0]}{where}` tells how it reached its winner"
    if ids == list(range(ids[0], ids[0] + len(ids))):
        which = f"runs {ids[0]}-{ids[-1]} (#1-#{len(ids)})"
    else:
        which = "runs " + ", ".join(f"{i} (#{n})" for n, i in enumerate(ids, 1))
    return f"{which}: `abductune explain RUN{where}` tells how each reached its winner"


def _print_outcomes(outcomes: list[Any], mode: str, hint: str | None = None, fleet_wall: float | None = None) -> None:
    output.console.print(tune_table(outcomes, mode, output.console.width))
    # the winners on their own lines, never cut: a user pastes them into code
    for i, o in enumerate(outcomes, 1):
        click.echo(f"#{i} {_kernel_label(o)} {','.join(f'{a}={b}' for a, b in o.dims.items())}: "
                   f"{format_config(o.winner.config if o.winner else None)}")
    if hint:
        click.echo(hint)
    settled = [o for o in outcomes if o.stopped_early]
    if settled:
        click.echo(f"{len(settled)} of {len(outcomes)} shape(s) stopped before the budget: the search "
                   "settled (no untested move expected to gain more than the noise); --full-budget spends it all")
    clocks = [o.session.clocks for o in outcomes if o.session and o.session.clocks]
    if clocks:
        lo = min((c["sm_mhz_min"] for c in clocks if c["sm_mhz_min"]), default=None)
        hi = max((c["sm_mhz_max"] for c in clocks if c["sm_mhz_max"]), default=None)
        thr = sum(c["throttled_batches"] for c in clocks)
        click.echo(f"GPU clocks (read-only): SM {lo}-{hi} MHz of {clocks[0]['max_sm_mhz']} max; "
                   f"{thr} batch(es) measured while throttled" + (" (their winners re-timed)" if thr else ""))
    timing: dict[str, float] = {}
    for o in outcomes:
        for k, v in (o.session.timing if o.session else {}).items():
            timing[k] = timing.get(k, 0.0) + v
    if timing:
        wall = sum(o.wall_s for o in outcomes)
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in sorted(timing.items(), key=lambda kv: -kv[1]))
        if fleet_wall is not None:  # searches ran at once: their phases add up to more than the wall
            click.echo(f"wall {fleet_wall:.1f} s; summed over the searches, which ran at once: {parts} "
                       "(search includes measure and store)")
        else:
            click.echo(f"wall {wall:.1f} s: {parts} (search includes measure and store)")
    pipes = [o.session.pipeline for o in outcomes if o.session and o.session.pipeline]
    if pipes:
        tot = {k: sum(p.get(k, 0) for p in pipes) for k in ("batches", "configs", "ready", "under_way", "new")}
        click.echo(f"compiles: {tot['configs']} configs in {tot['batches']} batches; compiled ahead and ready "
                   f"{tot['ready']}, under way {tot['under_way']}, started when asked {tot['new']}")
