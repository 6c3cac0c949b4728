"""Command line: `abductune replay | import | strategies | tune | sweep ...`."""
from __future__ import annotations

import functools
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from .errors import AbductuneError
from .format import format_config

# wide enough for the result tables when output goes to a file or a pipe (rich assumes 80); on
# a terminal its width (or COLUMNS), where the tune table has a compact layout for 80 columns
console = Console(stderr=False, width=None if sys.stdout.isatty() else 180)
err_console = Console(stderr=True)


def _csv(value: str, cast=str) -> list[Any]:
    try:
        return [cast(v.strip()) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"expected a comma-separated list, got {value!r}") from None


def error_line(message: str) -> None:
    """One plain line on stderr: no markup (a `[gpu]` extra or a `[/x]` path stays as it is),
    no hard wrapping."""
    print(f"error: {' '.join(str(message).split())}", file=sys.stderr)


class _Group(click.Group):
    """Every mistake a user can make ends as one plain line on stderr and exit code 2: our
    AbductuneError, click's usage errors (which would print a usage block), a missing gpu
    extra, and an OS error on a path the user gave."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:  # a caller driving click itself gets click's behaviour
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        if args is None:  # the real command line: a warm daemon may run it (`abductune daemon`)
            from .daemon import forward_or_start

            code = forward_or_start(sys.argv[1:])
            if code is not None:
                sys.exit(code)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except click.UsageError as e:
            cmd = e.ctx.command_path if e.ctx is not None else "abductune"
            error_line(f"{e.format_message()} (see `{cmd} --help`)")
            sys.exit(2)
        except click.ClickException as e:
            error_line(e.format_message())
            sys.exit(2)
        except click.Abort as e:
            if isinstance(e.__cause__, KeyboardInterrupt):  # Ctrl-C before a command ran
                print("interrupted", file=sys.stderr)
                sys.exit(130)
            error_line("aborted")
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)  # --help and --version return their code

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as e:  # Ctrl-C: exit 130 (the shell's), saying what was kept
            note = getattr(e, "note", "") or _INTERRUPT_NOTES.get(ctx.invoked_subcommand or "", "")
            print(f"interrupted: {note}" if note else "interrupted", file=sys.stderr)
            sys.exit(130)
        except AbductuneError as e:
            error_line(str(e))
            sys.exit(2)
        except ModuleNotFoundError as e:
            if e.name in ("torch", "triton"):
                error_line(f"{e.name} is not installed: live tuning and sweeps need the gpu extra "
                           "(pip install 'abductune[gpu]')")
                sys.exit(2)
            raise
        except OSError as e:
            if e.filename is None:  # not about a path the user gave: a bug worth its traceback
                raise
            error_line(f"cannot use {e.filename}: {e.strerror or type(e).__name__}")
            sys.exit(2)


# what a command interrupted without a note of its own kept (`tune` and `sweep` count theirs)
_INTERRUPT_NOTES = {"replay": "replay measures nothing and keeps nothing (it reads recorded datasets): "
                              "rerun it to start again"}


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a command, with what it kept and how a rerun goes on (`note`): the CLI
    prints `interrupted: NOTE` on stderr and exits 130."""

    def __init__(self, note: str):
        super().__init__(note)
        self.note = note


def _require_gpu_stack() -> None:
    """Live work needs torch and triton: say which extra to install before anything starts."""
    import importlib.util

    missing = [m for m in ("torch", "triton") if importlib.util.find_spec(m) is None]
    if missing:
        raise AbductuneError(f"{' and '.join(missing)} not installed: live tuning and sweeps need the gpu "
                             "extra (pip install 'abductune[gpu]')")


def _quiet_bar() -> bool:
    """No progress bar when stderr is not a terminal: a bar stopped by an error would leave a
    stray line before the one-line error message (and a log file wants no bars)."""
    return not err_console.is_terminal


def _outputs_writable(*paths: str | None) -> None:
    """Check where results go before any work is spent on them."""
    from .files import check_writable

    for p in paths:
        if p:
            check_writable(p)


def _version() -> str:
    from . import __version__

    return __version__


@click.group(cls=_Group)
@click.version_option(_version(), "--version", prog_name="abductune")
@click.option("-v", "--verbose", is_flag=True, help="Log debug messages.")
def main(verbose: bool) -> None:
    """abductune: find fast Triton launch configs with few measurements."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")


def _expand_datasets(items: tuple[str, ...]) -> list[Path]:
    from .datasets.public import public_data_dir
    from .datasets.paths import expand_dataset_args

    if "public" in items and public_data_dir() is None:
        raise AbductuneError("the public datasets folder was not found: put shared/datasets/"
                             "public beside the repository or set ABDUCTUNE_PUBLIC_DATA")
    paths = expand_dataset_args(items)
    if not paths:
        raise AbductuneError(f"no dataset files in {', '.join(items)}")
    return paths


@main.command()
def strategies() -> None:
    """List the search strategies."""
    from .search import STRATEGIES

    for name, cls in sorted(STRATEGIES.items()):
        doc = (sys.modules[cls.__module__].__doc__ or "").strip().split("\n\n")[0]
        first = " ".join(doc.split())
        first = first.split(". ")[0].rstrip(".") + "."  # the first sentence, whole
        click.echo(f"{name:12} {first}")


@main.command(name="replay")
@click.argument("datasets", nargs=-1, required=True)
@click.option("--strategy", "strategy_list", default="random,coordesc,pattern,beam,genetic,tpe",
              show_default=True, help="Comma-separated strategy names (see `abductune strategies`).")
@click.option("--budget", "budget_list", default="16,32,64,128", show_default=True,
              help="Comma-separated evaluation budgets.")
@click.option("--seconds", type=float, default=None, help="Also stop at this many simulated seconds (the "
              "recorded compile and benchmark costs of the configs measured, not wall time).")
@click.option("--repeats", type=int, default=20, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None,
              help="Write every figure to this JSON file.")
@click.option("--plot", "plot_out", type=click.Path(dir_okay=False), default=None,
              help="Write a best-so-far plot (PNG).")
@click.option("--noise", is_flag=True, help="Add measurement noise drawn from the bundled H100 noise study; "
              "strategies see noisy times and are scored on the recorded ones.")
@click.option("--seeds", "seed_source", type=click.Choice(["none", "heuristics"]), default="none",
              show_default=True, help="Seed every run like `tune` does (theory predictions, heuristics and "
              "the observed database), leaving out what --holdout says.")
@click.option("--holdout", type=click.Choice(["kernel", "shape"]), default="kernel", show_default=True,
              help="With --seeds: what the seeds may not have learned from. kernel: any shape of the replayed "
              "dataset's kernel (leave-one-kernel-out, what a user with a new kernel meets); shape: that shape "
              "only (leave-one-shape-out, the in-sample figure).")
def replay_cmd(datasets: tuple[str, ...], strategy_list: str, budget_list: str, seconds: float | None,
               repeats: int, seed: int, json_out: str | None, plot_out: str | None, noise: bool,
               seed_source: str, holdout: str) -> None:
    """Compare strategies by replaying recorded datasets (files, folders, 'public', 'bundled').

    score P = (B - F) / (B - optimum) (Willemsen et al., FGCS 2024): F is the median best time
    found over the repeats, B the expected best of random sampling at that budget. 1 means the
    optimum was found, 0 no better than random sampling, below 0 worse than random."""
    from .datasets.format import require_exhaustive
    from .datasets.public import load_any
    from .evaluate import aggregate, compare_on_dataset, plot_curves, require_matplotlib
    from .measure.replay import NoiseModel
    from .search import STRATEGIES

    names = list(dict.fromkeys(_csv(strategy_list)))
    for n in names:
        if n not in STRATEGIES:
            raise AbductuneError(f"unknown strategy {n!r}; known: {', '.join(sorted(STRATEGIES))}")
    budgets = sorted(set(_csv(budget_list, int)))
    if not budgets or budgets[0] <= 0:
        raise AbductuneError(f"budgets must be positive integers, got {budget_list!r}")
    if repeats <= 0:
        raise AbductuneError(f"--repeats must be positive, got {repeats}")
    if seconds is not None and not seconds > 0:
        raise AbductuneError(f"--seconds must be positive, got {seconds:g}")
    _outputs_writable(json_out, plot_out)
    if plot_out:
        require_matplotlib()  # before the replay, not after it
    paths = list(dict.fromkeys(p.resolve() for p in _expand_datasets(datasets)))  # `bundled bundled` once
    noise_model = NoiseModel.from_study() if noise else None
    seeds_fn = functools.partial(_replay_seeds, holdout=holdout) if seed_source == "heuristics" else None
    cells = []
    curves: dict[str, dict[str, list[list[float]]]] = {}
    optima: dict[str, float] = {}
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console, transient=True, disable=_quiet_bar()) as bar:
        task = bar.add_task("replaying", total=len(paths) * len(names) * repeats)
        labels = _unique_labels(paths)
        for p in paths:
            ds = load_any(p)
            label = labels[p]
            require_exhaustive(ds)  # names what is missing, and what replay would accept
            bar.update(task, description=f"replaying {label}")
            c: dict[str, list[list[float]]] = {}
            cells += compare_on_dataset(ds, names, budgets, repeats, seed, seconds, curves=c, seeds_fn=seeds_fn,
                                        progress=lambda: bar.advance(task), noise=noise_model, label=label)
            curves[label] = c
            optima[label] = ds.optimum().time_ms  # type: ignore[assignment]
    agg = aggregate(cells)
    table = Table(title=f"replay: {len(paths)} dataset(s), {repeats} repeats, seed {seed}"
                  + (f", {seconds:g} s limit" if seconds else "") + (", with noise" if noise else "")
                  + (f", seeded (leave-one-{holdout}-out)" if seeds_fn else ""))
    table.caption = ("score P = (B - F) / (B - optimum): F the median best found, B the expected best of "
                     "random sampling at that budget; 1 = optimum, 0 = random, below 0 = worse than random")
    for col in ("strategy", "budget", "score P", "median best/opt", "≤1.02×", "≤1.05×"):
        table.add_column(col, justify="right" if col != "strategy" else "left")
    for row in agg:
        table.add_row(row["strategy"], str(row["budget"]), f"{row['mean_score_P']:.3f}",
                      f"{row['geomean_median_ratio']:.3f}", f"{row['mean_within_1.02']:.0%}",
                      f"{row['mean_within_1.05']:.0%}")
    console.print(table)
    if json_out:
        from .files import atomic_write_text

        atomic_write_text(json_out, json.dumps(
            {"datasets": [str(p) for p in paths], "labels": [labels[p] for p in paths], "strategies": names,
             "budgets": budgets, "repeats": repeats, "seed": seed, "seconds": seconds, "noise": noise,
             "seeds": seed_source, "holdout": holdout if seeds_fn else None,
             "cells": [c.to_dict() for c in cells], "aggregate": agg}, indent=1))
        console.print(f"wrote {json_out}")
    if plot_out:
        plot_curves(curves, optima, plot_out)
        console.print(f"wrote {plot_out}")


def _unique_labels(paths: list[Path]) -> dict[Path, str]:
    """A label per dataset: its file stem, with parent folders added until labels are unique
    (`convolution_milo/A100` and `dedispersion_milo/A100` stay apart)."""
    def stem(p: Path) -> str:
        name = p.name
        for ext in (".gz", ".jsonl", ".json"):
            name = name.removesuffix(ext)
        return name
    depth = {p: 0 for p in paths}
    while True:
        labels = {p: "/".join([*p.parent.parts[len(p.parent.parts) - depth[p]:], stem(p)]) for p in paths}
        seen: dict[str, list[Path]] = {}
        for p, lab in labels.items():
            seen.setdefault(lab, []).append(p)
        clashes = [ps for ps in seen.values() if len(ps) > 1]
        if not clashes:
            return labels
        for ps in clashes:
            for p in ps:
                if depth[p] >= len(p.parent.parts):
                    return {q: str(q) for q in paths}
                depth[p] += 1


def _replay_seeds(ds: Any, holdout: str = "kernel") -> list[Any]:
    """Seeds for a replayed dataset as `tune` would give them, never learned from the dataset
    itself (`holdout="shape"`) nor, by default, from any shape of its kernel."""
    from .problem import Holdout
    from .tune import seed_list

    space = ds.space()
    default = ds.meta.get("default_config") or space.default()
    seeds, _ = seed_list(ds.problem, space, default, None, True, None, exclude=Holdout(ds.problem, holdout))
    return seeds


@main.command(name="import")
@click.argument("source", type=click.Path(exists=True, dir_okay=False))
@click.argument("out", type=click.Path(dir_okay=False))
@click.option("--kernel-class", default=None, help="Kernel class, when the source lacks it.")
@click.option("--dims", default=None, help="Problem dims, e.g. M=64,N=4096,K=4096.")
@click.option("--hardware", default=None, help="GPU name (e.g. H100-SXM), when the source lacks it.")
@click.option("--dtypes", default=None, help="Element types of the kernel's tensors, inputs then output, "
              "e.g. a=fp16,b=fp16,c=fp16: with them FLOPs and bytes are computed for known classes, so "
              "diagnosis has a roofline.")
def import_cmd(source: str, out: str, kernel_class: str | None, dims: str | None,
               hardware: str | None, dtypes: str | None) -> None:
    """Convert a Kernel Tuner cache or T4 file into an abductune dataset."""
    from .costs import parse_dtypes
    from .datasets.format import write_dataset
    from .datasets.public import load_any

    dtype_map = parse_dtypes(dtypes) if dtypes else None
    _outputs_writable(out)
    dim_map = None
    if dims:
        try:
            pairs = [(k.strip(), int(v)) for k, v in (kv.split("=") for kv in dims.split(","))]
        except ValueError:
            raise AbductuneError(f"--dims must look like M=64,N=4096, got {dims!r}") from None
        dim_map = dict(pairs)
        if len(dim_map) != len(pairs):  # M=16,M=32 would silently take the last
            twice = next(k for k, _ in pairs if sum(k == j for j, _ in pairs) > 1)
            raise AbductuneError(f"--dims {dims!r} gives dim {twice} twice; give each dim once")
    ds = load_any(source, kernel_class=kernel_class, dims=dim_map, hardware=hardware, dtypes=dtype_map)
    write_dataset(ds, out)
    p = ds.problem
    costs = (f"; {p.flops:.4g} FLOPs, {p.min_bytes:.4g} bytes at least" if p.flops and p.min_bytes else
             f"; FLOPs and bytes unknown for class {p.kernel_class!r}" if p.dtypes else "")
    console.print(f"wrote {out}: {len(ds.records)} configs, optimum {ds.optimum().time_ms:.4g} ms{costs}")


def _shapes_for(kernel: str, shapes: str | None, mode: str) -> list[dict[str, int]]:
    """Shapes to tune: given ones, else the bundled datasets' shapes (replay) or the suite's.
    Given shapes are checked against the kernel's dims (names, each once, positive) before
    any dataset is looked up; a built-in spec imports without Triton (kernels/_triton.py)."""
    from . import kernels
    from .sweep import parse_shapes

    given = parse_shapes(shapes) if shapes else None
    if mode == "replay" and ":" in kernel:
        raise AbductuneError(f"{kernel} is a user kernel: replay needs its recorded dataset; tune it live "
                             "on a GPU, or `abductune replay` a dataset you swept for it")
    if mode == "replay":
        from .datasets.bundled import bundled_datasets

        if not bundled_datasets(kernel=kernel):
            raise AbductuneError(no_replay_data(kernel))
    if given is not None:
        spec = kernels.get(kernel)
        for dims in given:
            spec.problem(dims)  # `kernel 'K' takes dims [...]` / `every dim must be positive`
        return given
    if mode == "replay":
        from .datasets.format import read_dataset

        return [read_dataset(p).problem.dims for p in bundled_datasets(kernel=kernel)]
    return kernels.get(kernel).suite_shapes()


def replay_kernels() -> dict[str, list[Any]]:
    """Built-in kernel -> its bundled (replayable) datasets; empty for a kernel that has none."""
    from . import kernels
    from .datasets.bundled import bundled_datasets

    found: dict[str, list[Any]] = {}
    for p in bundled_datasets():
        found.setdefault(p.parent.name, []).append(p)
    return {n: found.get(n, []) for n in kernels.names()}


def no_replay_data(kernel: str) -> str:
    """Why `kernel` cannot be tuned by replay, and what can."""
    have = [k for k, ps in replay_kernels().items() if ps]
    return (f"{kernel} has no bundled replay data, so it can only be tuned live on a GPU (--mode live); "
            f"without a GPU, tune one that has: {', '.join(have)} (see `abductune kernels`)")


@main.command(name="tune")
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
def tune_cmd(kernel_list: str, shapes: str | None, strategy: str, budget: int, full_budget: bool,
             seconds: float | None, no_heuristics: bool, database: str | None, mode: str, seed: int,
             store_path: str | None, json_out: str | None, no_daemon: bool, use_daemon: bool) -> None:
    """Tune built-in kernels: live on a GPU, else by replaying bundled H100 measurements."""
    from . import kernels
    from .search import STRATEGIES, Budget
    from .store import Store
    from .tune import gpu_available, tune_one

    if budget < 1:
        raise AbductuneError(f"--budget must be at least 1 evaluation, got {budget}")
    if seconds is not None and not seconds > 0:
        raise AbductuneError(f"--seconds must be positive, got {seconds:g}")
    if strategy not in STRATEGIES:
        raise AbductuneError(f"unknown strategy {strategy!r}; known: {', '.join(sorted(STRATEGIES))}")
    names = _csv(kernel_list)
    unknown = [k for k in names if ":" not in k and k not in kernels.names()]
    if unknown:
        raise AbductuneError(f"unknown kernel(s) {', '.join(unknown)}; known: {', '.join(kernels.names())}")
    _outputs_writable(json_out)
    if mode == "live":
        _require_gpu_stack()
    no_gpu_replay = False
    if mode == "auto":
        mode = "live" if gpu_available() else "replay"
        if mode == "replay":
            import importlib.util

            if importlib.util.find_spec("torch") is None and _nvidia_gpu_present():
                _require_gpu_stack()  # a GPU without torch: say so rather than replay H100 data
            no_gpu_replay = True
    # shapes are checked (text, the kernel's dims, replay data) before anything is opened or said
    jobs = [(k, d) for k in names for d in _shapes_for(k, shapes, mode)]
    if not jobs:
        raise AbductuneError("nothing to tune: no shapes given and none recorded for "
                             f"{kernel_list}")
    if no_gpu_replay:
        err_console.print("no GPU found: replaying measurements recorded on an H100 (bundled datasets); "
                          "times are those recorded, not measured now", style="yellow", markup=False, soft_wrap=True)
    db = None
    if database:
        from .heuristics import load_database

        db = load_database(database)
    if store_path:
        store: Any = Store(store_path)
    else:
        store = Store() if mode == "live" else None
    outcomes = []
    last_id = _last_measurement_id(store)
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[evals]}"), TimeElapsedColumn(), console=err_console,
                      transient=True, disable=_quiet_bar()) as bar:
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
                                         stop_early=not full_budget, on_batch=on_batch))
                bar.advance(task)
    except KeyboardInterrupt:
        raise Interrupted(_tune_interrupted_note(store, last_id, len(outcomes), len(jobs))) from None
    if store is not None:
        store.close()
    _print_outcomes(outcomes, mode, explain_hint(outcomes, store_path, store))
    tip = None if no_daemon else daemon_tip(mode, len(jobs))
    if tip:
        err_console.print(tip, style="dim", markup=False, soft_wrap=True)
    if json_out:
        from .files import atomic_write_text

        atomic_write_text(json_out, json.dumps([o.to_dict() for o in outcomes], indent=1, default=str))
        console.print(f"wrote {json_out}")


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


def daemon_tip(mode: str, shapes: int) -> str | None:
    """A hint after a short live command that started its own workers: most of its time was
    their start, which a daemon pays once. Not inside a daemon, not when ABDUCTUNE_DAEMON is
    set either way (the user has chosen), not for long commands (the start is a small part)."""
    from .daemon.client import platform_supported

    server = sys.modules.get("abductune.daemon.server")
    if mode != "live" or shapes > 3 or getattr(server, "SERVING", False) or not platform_supported():
        return None
    if os.environ.get("ABDUCTUNE_DAEMON", "").strip():
        return None
    return ("tip: a fresh `abductune tune` spends 4-7 s starting torch and CUDA in its workers; "
            "`abductune daemon start` keeps them warm, so later commands skip that (it holds about 1 GB "
            "of GPU memory until 15 idle minutes; ABDUCTUNE_DAEMON=0 silences this tip)")


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
        table.add_row(str(i), o.kernel, ",".join(f"{a}={b}" for a, b in o.dims.items()),
                      *map(_fmt_ms, times), d["best_impl"], *map(_fmt_ms, opt),
                      str(o.evaluations), f"{o.seconds:.1f}")
    natural = console.measure(table, options=console.options.update_width(10_000)).maximum
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
        if o.kernel != kernel:
            kernel = o.kernel
            compact.add_row("", Text(kernel, style="bold"))
        compact.add_row(str(i), ", ".join(f"{a}={b}" for a, b in o.dims.items()), *map(_fmt_us, times), ship,
                        *map(_fmt_us, opt), str(o.evaluations), f"{o.seconds:.1f}")
    return compact


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


def _print_outcomes(outcomes: list[Any], mode: str, hint: str | None = None) -> None:
    console.print(tune_table(outcomes, mode, console.width))
    # the winners on their own lines, never cut: a user pastes them into code
    for i, o in enumerate(outcomes, 1):
        click.echo(f"#{i} {o.kernel} {','.join(f'{a}={b}' for a, b in o.dims.items())}: "
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
        click.echo(f"wall {wall:.1f} s: {parts} (search includes measure and store)")
    pipes = [o.session.pipeline for o in outcomes if o.session and o.session.pipeline]
    if pipes:
        tot = {k: sum(p.get(k, 0) for p in pipes) for k in ("batches", "configs", "ready", "under_way", "new")}
        click.echo(f"compiles: {tot['configs']} configs in {tot['batches']} batches; compiled ahead and ready "
                   f"{tot['ready']}, under way {tot['under_way']}, started when asked {tot['new']}")


@main.command(name="kernels")
def kernels_cmd() -> None:
    """List the built-in kernels, their dims, and which have bundled replay data (what
    `abductune tune` uses on a machine without a GPU)."""
    from . import kernels

    table = Table(title="built-in kernels", box=None, pad_edge=False)
    for col in ("kernel", "dims", "without a GPU (replay of bundled H100 data)"):
        table.add_column(col, no_wrap=col != "without a GPU (replay of bundled H100 data)")
    for n, paths in replay_kernels().items():
        dims = ",".join(kernels.get(n).dims)
        table.add_row(n, dims, f"yes: {len(paths)} recorded shapes" if paths else
                      "no: live only (--mode live on a GPU)")
    console.print(table)
    click.echo("Without a GPU, `abductune tune` replays the bundled data, so only the kernels marked yes "
               "can be tuned there; on a GPU every kernel is tuned live.")


@main.command(name="sweep")
@click.option("--kernel", default=None, help="Built-in or zoo kernel name, or module:Class of your own KernelSpec.")
@click.option("--call", default=None, help="module:function that calls third-party @triton.autotune kernels (a "
              "library's public op on your shapes): it runs under patch_triton, and every key that would be tuned "
              "records the space grown around the kernel's own config list instead.")
@click.option("--shapes", default=None, help="'M=16,N=4096,K=4096;...' (default: the suite's shapes).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False))
@click.option("--workers", type=int, default=None, help="Parallel compile processes (default: CPUs).")
@click.option("--limit", type=int, default=None, help="Only the first N configs (for a quick look).")
def sweep_cmd(kernel: str | None, call: str | None, shapes: str | None, out_dir: str, workers: int | None,
              limit: int | None) -> None:
    """Measure every config of a kernel for a list of shapes into datasets (resumable)."""
    _require_gpu_stack()  # before anything: without torch and triton nothing below can run
    if (kernel is None) == (call is None):
        raise AbductuneError("sweep needs one of --kernel (a kernel spec) or --call (module:function calling "
                             "@triton.autotune kernels)")
    if call is not None:
        if shapes or workers or limit:
            raise AbductuneError("--shapes, --workers and --limit go with --kernel; with --call the function's "
                                 "own calls choose the shapes")
        _sweep_call(call, out_dir)
        return
    from . import kernels
    from .hardware import local_hardware
    from .sweep import parse_shapes, sweep

    for opt, v in (("--workers", workers), ("--limit", limit)):
        if v is not None and v < 1:
            raise AbductuneError(f"{opt} must be at least 1, got {v}")
    spec = kernels.get(kernel)
    shape_list = parse_shapes(shapes) if shapes else spec.suite_shapes()
    if not shape_list:
        raise AbductuneError(f"--shapes {shapes!r} names no shape; write M=16,N=4096,K=4096;...")
    for dims in shape_list:
        spec.problem(dims)  # a wrong or missing dim fails now, not after the first shape
    _dir_creatable(out_dir, "--out")
    hw = local_hardware()  # no visible GPU: one line before any folder or file is made
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console, transient=True, disable=_quiet_bar()) as bar:
        task = bar.add_task("sweeping", total=None)

        def progress(label: str, done: int, total: int) -> None:
            bar.update(task, description=label, completed=done, total=total)

        try:
            paths = sweep(kernel, shape_list, out_dir, compile_workers=workers, limit=limit, hardware=hw,
                          on_progress=progress)
        except KeyboardInterrupt:
            raise Interrupted(_sweep_interrupted_note(out_dir)) from None
    for p in paths:
        console.print(f"wrote {p}")


def _sweep_call(call: str, out_dir: str) -> None:
    """`sweep --call`: import and run `module:function` under `patch_triton(record=out_dir)`."""
    from .autotune import patch_triton
    from .kernels import _import_user_module

    mod_name, _, fn_name = call.partition(":")
    if not mod_name or not fn_name:
        raise AbductuneError(f"--call {call!r}: write it as module:function")
    _dir_creatable(out_dir, "--out")
    with patch_triton(record=out_dir) as patch:  # the module (and the library it imports) is decorated now
        try:
            fn = getattr(_import_user_module(mod_name), fn_name)
        except (ImportError, AttributeError) as e:
            raise AbductuneError(f"--call {call!r}: {e} (run from the folder holding {mod_name.split('.')[0]}.py, "
                                 "or put it on PYTHONPATH)") from None
        try:
            fn()
        except KeyboardInterrupt:
            raise Interrupted(_sweep_interrupted_note(out_dir)) from None
    paths = [p for tuner in patch.autotuners for p in tuner.recorded]
    if not paths:
        raise AbductuneError(f"--call {call!r} ran, but no @triton.autotune kernel was tuned: import the library "
                             "inside the function or its module (after the patch), and call an op that reaches one "
                             "with a key not already stored")
    for p in sorted(set(paths)):
        console.print(f"wrote {p}")


def _sweep_interrupted_note(out_dir: str) -> str:
    """What a Ctrl-C'd sweep kept: every measured config is already appended to its shape's
    `.jsonl` under --out, and a rerun skips them."""
    from .sweep import read_partial

    n = 0
    for f in Path(out_dir).rglob("*.jsonl"):
        try:
            n += len(read_partial(f)[1])
        except Exception:  # noqa: BLE001 - a torn file is repaired by the rerun
            continue
    done = len(list(Path(out_dir).rglob("*.jsonl.gz")))
    return (f"{done} shape(s) finished and {n} measurement(s) of unfinished shapes kept under {out_dir}: "
            "rerun the same command to resume (measured configs are not measured again)")


def _dir_creatable(path: str, what: str) -> Path:
    """Raise one line naming `path` unless it is a folder, or one can be made there, that
    accepts new files. Creates nothing: a run that fails later leaves no empty folder."""
    import errno
    import tempfile

    p = Path(path)
    if p.exists() and not p.is_dir():
        raise AbductuneError(f"{what} {p} is a file, not a folder; give a folder path")
    base = p
    while not base.exists():  # the nearest folder that exists is where mkdir would start
        base = base.parent
    if not base.is_dir():
        raise AbductuneError(f"cannot create folder {p} ({what}): {base} is a file, not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".abductune-", suffix=".check", dir=base)
    except OSError as e:
        why = "read-only file system" if e.errno == errno.EROFS else (e.strerror or type(e).__name__).lower()
        raise AbductuneError(f"cannot create or write folder {p} ({what}): {base} does not accept "
                             f"new files ({why}); choose a writable location") from None
    os.close(fd)
    os.unlink(probe)
    return p


def _register_harvest() -> None:
    """Add `abductune harvest` (the algorithm is `heuristics.harvest`, the report
    `heuristics.coverage`; this is only the command line around them)."""

    @main.command(name="harvest")
    @click.argument("datasets", nargs=-1)
    @click.option("--from-store", "from_store", is_flag=True,
                  help="Harvest the measurements in the store as well.")
    @click.option("--store", "store_path", type=click.Path(dir_okay=False), default=None,
                  help="Store file (default: $ABDUCTUNE_STORE or the user cache).")
    @click.option("--out", "out", type=click.Path(), default=None,
                  help="Database to build or update: a .json file, or a folder (one file per "
                       "hardware). Rules already there stay unless a harvested rule has their key.")
    @click.option("--replace", is_flag=True, help="Start from an empty database instead of updating --out.")
    @click.option("--margin", type=float, default=0.05, show_default=True,
                  help="Keep a template only when it alone is at least this much faster than the "
                       "space's default config (0.05: at most 0.95x the default's time).")
    @click.option("--top", type=int, default=8, show_default=True,
                  help="Candidate templates: the fastest N configs of each shape.")
    @click.option("--keep", type=int, default=3, show_default=True, help="Templates kept per rule.")
    @click.option("--granularity", type=int, default=2, show_default=True,
                  help="Shape buckets: dims rounded up to powers of 2**granularity.")
    @click.option("--levels", default="name,family,any", show_default=True,
                  help="Hardware levels to write rules for: the GPU's name, its family, any GPU.")
    @click.option("--exact", is_flag=True, help="Also write one exact-dims rule per shape (for --vllm-export).")
    @click.option("--vllm-import", "vllm_import", multiple=True, type=click.Path(exists=True),
                  help="vLLM fused-MoE config files or folders to import as rules (repeatable).")
    @click.option("--vllm-export", "vllm_export", type=click.Path(file_okay=False), default=None,
                  help="Write the database's exact E/N/M rules as vLLM config files into this folder.")
    @click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None,
                  help="Write the coverage report to this JSON file.")
    def harvest_cmd(datasets: tuple[str, ...], from_store: bool, store_path: str | None,
                    out: str | None, replace: bool, margin: float, top: int, keep: int,
                    granularity: int, levels: str, exact: bool, vllm_import: tuple[str, ...],
                    vllm_export: str | None, json_out: str | None) -> None:
        """Build or update the observed-heuristics database from recorded datasets (files,
        folders, 'public', 'bundled'), the store, and vLLM config files; report coverage."""
        from .heuristics.coverage import coverage, summarize
        from .heuristics.harvest import harvest, observations_from_datasets, observations_from_store
        from .heuristics.observed import Database
        from .heuristics.vllm import export_vllm, import_vllm

        if not datasets and not from_store and not vllm_import:
            raise click.UsageError("give datasets, --from-store, or --vllm-import")
        _check_harvest_options(top, keep, granularity, margin, levels, from_store, store_path)
        # everything the run writes is checked before any dataset is read
        if out:
            _database_out_writable(out)
        _outputs_writable(json_out)
        if vllm_export:
            _dir_creatable(vllm_export, "--vllm-export")
        paths = _expand_datasets(datasets) if datasets else []  # an empty folder is an error
        old = Database()
        if out and not replace and Path(out).exists():
            old = Database.load(out)
            console.print(f"updating {out}: {len(old)} rule(s) there")
        store = None
        if from_store:  # a mistyped --store must not create an empty store, and fails now
            from .store import Store
            store = Store(store_path, must_exist=True)
        new = Database()  # only what this run learns: merged into --out under a lock when saved
        obs = []
        try:
            if paths:
                with console.status(f"reading {len(paths)} dataset(s)"):
                    obs += observations_from_datasets(paths)
            if store is not None:
                obs += observations_from_store(store)
        finally:
            if store is not None:
                store.close()
        result = None
        if obs:
            with console.status(f"harvesting {len(obs)} observation(s)"):
                result = harvest(obs, margin=margin, top=top, keep=keep, granularity=granularity,
                                 levels=_csv(levels), exact=exact, database=new)
        if vllm_import:
            import_vllm(vllm_import, new)
        if result is not None:  # how to rebuild it, saved with the database
            new.meta["harvest"] = {"datasets": list(datasets), "from_store": from_store,
                                   "margin": margin, "top": top, "keep": keep,
                                   "granularity": granularity, "levels": levels, "exact": exact}
        n_before = len(old)
        db = Database(old, old.meta).merge(new)  # what --out will hold (barring a concurrent harvest)
        db.meta.update(new.meta)
        checks = coverage(db, obs, granularity) if obs else []
        if result is not None:
            dropped = [g for g in result.groups if not g.kept]
            console.print(f"{len(obs)} observation(s): {result.rules_added} rule(s) kept, "
                          f"{len(dropped)} group(s) dropped (margin {margin:.0%})")
            for g in dropped[:20]:
                k = g.key
                console.print(f"  dropped {k['hardware']} {k['kernel_class']} {k['bucket']} "
                              f"{k['dtype_family']}: {g.reason}")
            if len(dropped) > 20:
                console.print(f"  ... and {len(dropped) - 20} more")
        if checks:
            fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
            table = Table(title="coverage (in-sample: what the database seeds for each recorded shape)")
            for col in ("hardware", "kernel", "shapes", "bucket rule", "fallback only", "no rule",
                        "seed/opt", "default/opt"):
                table.add_column(col, justify="left" if col in ("hardware", "kernel") else "right")
            for r in summarize(checks):
                table.add_row(r["hardware"], r["kernel"], str(r["shapes"]), f"{r['bucket_rule']:.0%}",
                              f"{r['fallback_rule']:.0%}", f"{r['no_rule']:.0%}",
                              fmt(r["seed_over_optimum_geomean"]), fmt(r["default_over_optimum_geomean"]))
            console.print(table)
        console.print(f"database: {len(db)} rule(s) ({len(db) - n_before:+d})")
        if out:
            # re-read --out under its lock and add this run's rules: a concurrent harvest into
            # the same database keeps its rules too (--replace: this run's rules only)
            for p in new.save(out, merge=not replace):
                console.print(f"wrote {p}")
        else:
            console.print("nothing written (give --out to save the database)")
        if vllm_export:
            for p in export_vllm(db, vllm_export):
                console.print(f"wrote {p}")
        if json_out:
            from .files import atomic_write_text

            atomic_write_text(json_out, json.dumps({
                "rules": len(db), "margin": margin, "granularity": granularity,
                "coverage": [c.to_dict() for c in checks], "summary": summarize(checks),
                "groups": [{"key": g.key, "shapes": g.shapes, "kept": g.kept, "reason": g.reason,
                            "best": g.best} for g in (result.groups if result else [])]},
                indent=1))
            console.print(f"wrote {json_out}")


def _check_harvest_options(top: int, keep: int, granularity: int, margin: float, levels: str,
                           from_store: bool, store_path: str | None) -> None:
    """Numbers and names that would silently give an empty database (or hang) are errors."""
    from .heuristics.harvest import LEVELS

    for opt, v in (("--top", top), ("--keep", keep), ("--granularity", granularity)):
        if v < 1:
            raise AbductuneError(f"{opt} must be at least 1, got {v}")
    if not 0 <= margin < 1:
        raise AbductuneError(f"--margin must be in [0, 1), got {margin:g}")
    names = _csv(levels)
    bad = [lv for lv in names if lv not in LEVELS]
    if bad or not names:
        raise AbductuneError(f"--levels {levels!r}: use a comma-separated subset of {','.join(LEVELS)}")
    if store_path and not from_store:
        raise AbductuneError("--store is only read with --from-store; add --from-store or drop --store")


def _database_out_writable(out: str) -> None:
    """`harvest --out`: a .json file (its folders may be created) or a folder of files."""
    from .files import check_writable

    p = Path(out)
    if p.suffix == ".json":
        if p.is_dir():
            raise AbductuneError(f"--out {p} is a folder; a database file must be a .json file")
        if p.parent.is_dir():
            check_writable(p)
        else:
            _dir_creatable(str(p.parent), "--out")
    else:
        if p.exists() and not p.is_dir():
            raise AbductuneError(f"--out {p} is a file without .json suffix; give a .json file or a folder")
        _dir_creatable(out, "--out")


_register_harvest()


from .cache_cli import cache  # noqa: E402  (the decorator's store: abductune cache ...)
from .daemon_cli import daemon  # noqa: E402
from .theory_cli import explain_cmd, learn_cmd, predict_cmd  # noqa: E402

main.add_command(cache)
main.add_command(daemon)
for _cmd in (learn_cmd, predict_cmd, explain_cmd):
    main.add_command(_cmd)

if __name__ == "__main__":  # pragma: no cover
    main()
