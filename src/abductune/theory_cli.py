"""`abductune learn | predict | explain`: build the theory store, predict a config with no
measurement, and tell the story of a run (observation -> theory -> test -> verdict)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click

from .errors import AbductuneError


def _shape_list(text: str) -> list[dict[str, int]]:
    from .sweep import parse_shapes

    return parse_shapes(text)


@click.command(name="learn")
@click.argument("datasets", nargs=-1)
@click.option("--from-store", "from_store", is_flag=True, help="Learn from the measurements in the store too.")
@click.option("--store", "store_path", type=click.Path(dir_okay=False), default=None,
              help="Store to read (default: $ABDUCTUNE_STORE or the user cache).")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Theory file (.json) to write.")
@click.option("--held-out", is_flag=True, help="Also store, per problem, the rules learned without it "
              "(what a replay of that problem uses; the packaged file has them).")
def learn_cmd(datasets: tuple[str, ...], from_store: bool, store_path: str | None, out: str, held_out: bool) -> None:
    """Build a theory file from recorded datasets and/or the store."""
    from .files import check_writable
    from .theory.store import learn, learn_with_held_out

    if not datasets and not from_store:
        raise AbductuneError("give datasets (files, folders, 'bundled', 'public') or --from-store")
    check_writable(out)
    obs: list[Any] = []
    if datasets:
        from .datasets.paths import expand_dataset_args
        from .heuristics.harvest import observations_from_datasets

        paths = expand_dataset_args(datasets)
        if not paths:
            raise AbductuneError(f"no dataset files in {', '.join(datasets)}")
        obs += observations_from_datasets(paths)
    if from_store:
        from .heuristics.harvest import observations_from_store
        from .store import Store

        with Store(store_path, must_exist=True) as st:
            obs += observations_from_store(st)
    meta = {"sources": list(datasets) + (["store"] if from_store else [])}
    book = learn_with_held_out(obs, meta) if held_out else learn(obs)
    book.meta = meta
    book.save(out)
    click.echo(f"wrote {out}: {len(book)} rules from {len(obs)} problems")
    for r in sorted(book, key=lambda r: r.key):
        if r.hardware.startswith("family:") or r.hardware == "*":
            continue
        click.echo(f"  {r.kernel_class}/{r.regime}/{r.dtype_family} on {r.hardware}: {r.describe()} "
                   f"(geomean {r.geomean:.3f}, support {r.support}, refute {r.refute})")


@click.command(name="predict")
@click.argument("datasets", nargs=-1)
@click.option("--kernel", default=None, help="Built-in kernel (with --shapes).")
@click.option("--shapes", default=None, help="e.g. 'M=16,N=4096,K=4096;M=1,N=4096,K=4096'.")
@click.option("--hardware", default="H100-SXM", show_default=True, help="GPU to predict for (with --kernel).")
@click.option("--theories", default=None, type=click.Path(dir_okay=False, exists=True),
              help="Theory file (default: the packaged one).")
@click.option("--check/--no-check", default=None, help="Compile each prediction for the GPU (no GPU needed, "
              "about a second each once cached, needs triton) and pass over one that spills registers or cannot "
              "launch. Default: check where Triton is installed and the GPU is NVIDIA's.")
def predict_cmd(datasets: tuple[str, ...], kernel: str | None, shapes: str | None, hardware: str,
                theories: str | None, check: bool | None) -> None:
    """Zero-shot config for a kernel and shapes, or for datasets (scored against their
    optimum, leaving each dataset's own knowledge out)."""
    from .cli import format_config
    from .theory.store import TheoryBook, packaged_book, predict, predictions

    book = TheoryBook.load(theories) if theories else packaged_book()
    if kernel:
        from . import kernels
        from .hardware import lookup

        if not shapes:
            raise AbductuneError("--kernel needs --shapes (e.g. 'M=16,N=4096,K=4096')")
        from .theory.check import first_clean, unavailable

        spec = kernels.get(kernel)
        hw = lookup(hardware)
        why = unavailable(hw)
        if check and why:
            raise AbductuneError(f"--check compiles each prediction for the GPU, but {why}: "
                                 "fix that or leave --check out")
        if check is None:
            check = not why
            if why:
                click.echo(f"predictions unchecked: {why}")
        for dims in _shape_list(shapes):
            problem = spec.problem(dims, hw)
            shape = ",".join(f"{k}={v}" for k, v in dims.items())
            if check:
                click.echo(f"{kernel} {shape}: compiling the predictions for {hw.arch} ...")
            p = first_clean(spec, problem, predictions(problem, spec.space(), book=book),
                            echo=lambda line: click.echo(f"  {line}")) if check \
                else predict(problem, spec.space(), book=book)
            if p is None:
                click.echo(f"{kernel} {shape}: no rule applies" + (" that compiles cleanly" if check else ""))
                continue
            click.echo(f"{kernel} {shape}: {format_config(p.config)}")
            click.echo(f"  because {p.describe()}")
        return
    if not datasets:
        raise AbductuneError("give --kernel and --shapes, or datasets to score predictions on")
    if check:
        raise AbductuneError("--check compiles a built-in kernel's predictions: use it with --kernel and --shapes "
                             "(datasets are scored on their recorded times instead)")
    from .datasets.paths import expand_dataset_args
    from .heuristics.harvest import observations_from_datasets

    rows = []
    for o in observations_from_datasets(expand_dataset_args(datasets)):
        p = predict(o.problem, o.space, book=book, exclude=o.problem)
        t = o.time_of(p.config) if p else None
        ratio = t / o.optimum if t is not None and math.isfinite(t) else None
        rows.append(ratio)
        click.echo(f"{o.name}: " + (f"{ratio:.3f}x optimum  {format_config(p.config)}" if ratio else
                                    "no prediction" if p is None else "predicted config failed or unmeasured"))
    ok = [r for r in rows if r]
    if ok:
        g = math.exp(sum(map(math.log, ok)) / len(ok))
        click.echo(f"geomean {g:.3f}, worst {max(ok):.3f} over {len(ok)} of {len(rows)} datasets "
                   "(leave-one-shape-out)")


@click.command(name="explain")
@click.argument("run_id", type=int)
@click.option("--store", "store_path", type=click.Path(dir_okay=False), default=None,
              help="Store holding the run (default: $ABDUCTUNE_STORE or the user cache).")
@click.option("--plot", "plot_out", type=click.Path(dir_okay=False), default=None,
              help="Draw each measured config against the roofline, with the moves between incumbents (PNG).")
def explain_cmd(run_id: int, store_path: str | None, plot_out: str | None) -> None:
    """Tell how run RUN_ID reached its winner: seeds, observations, hypotheses, tests, verdicts."""
    from .cli import format_config
    from .store import Store

    if plot_out:
        from .files import check_writable

        check_writable(plot_out)
    with Store(store_path, must_exist=True) as st:
        runs = [r for r in st.runs() if r.id == run_id]
        if not runs:
            ids = [r.id for r in st.runs()]
            raise AbductuneError(f"store {st.path} has no run {run_id}; runs: "
                                 f"{', '.join(map(str, ids[-20:])) or 'none'}")
        run = runs[0]
        rows = st.measurements(run.context, run_ids=[run.id])
        winner = st.by_id([run.winner_id])[0] if run.winner_id else None
    s = run.summary or {}
    c = run.context
    click.echo(f"run {run.id}: {run.strategy} on {c.kernel} {','.join(f'{k}={v}' for k, v in c.dims.items())} "
               f"({c.hardware or 'unknown GPU'}), {run.status}"
               + (f", resumes run {run.resumes}" if run.resumes else ""))
    for seed in s.get("seeds", []):
        click.echo(f"  seed [{seed['source']}]: {format_config(seed['config'])}")
    by_id = {m.id: m for m in rows}
    for e in s.get("events", []):
        kind = e.get("event", "?")
        rest = {k: v for k, v in e.items() if k != "event"}
        ids = rest.pop("ids", None) or rest.pop("measurements", None)
        line = "; ".join(f"{k}={_short(v)}" for k, v in rest.items())
        if ids:
            times = [f"#{i}:{by_id[i].time_ms:.4g}ms" for i in ids if i in by_id and by_id[i].ok]
            line += f"  [{', '.join(times) or ', '.join(map(str, ids))}]"
        click.echo(f"  {kind:10} {line}")
    kinds: dict[str, int] = {}
    for m in rows:
        kinds[m.kind] = kinds.get(m.kind, 0) + 1
    click.echo("  measured: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    if winner is not None:
        click.echo(f"  winner #{winner.id} ({winner.kind}): {format_config(winner.config)} "
                   f"{winner.time_ms:.4g} ms")
    if plot_out:
        _plot_run(rows, winner, plot_out, f"run {run.id}: {run.strategy} on {c.kernel}")
        click.echo(f"wrote {plot_out}")


def _short(v: Any) -> str:
    s = json.dumps(v, default=str) if not isinstance(v, str) else v
    return s if len(s) <= 120 else s[:117] + "..."


def _plot_run(rows: list[Any], winner: Any, path: str, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise AbductuneError("plots need matplotlib: pip install 'abductune[plot]'") from None
    ok = [m for m in rows if m.ok]
    if not ok:
        raise AbductuneError("the run measured nothing that ran: nothing to plot")
    frac = [max(m.frac_peak_flops or 0.0, m.frac_peak_bw or 0.0) for m in ok]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    colors = {"seed": "tab:green", "search": "tab:blue", "remeasure": "tab:orange", "verify": "tab:red",
              "baseline": "tab:gray"}
    for kind in colors:
        xs = [i for i, m in enumerate(ok) if m.kind == kind]
        ax.scatter(xs, [frac[i] for i in xs], s=18, color=colors[kind], label=kind)
    best, path_x, path_y = math.inf, [], []
    for i, m in enumerate(ok):  # the incumbent's moves
        if m.kind in ("seed", "search") and m.time_ms < best:
            best = m.time_ms
            path_x.append(i)
            path_y.append(frac[i])
    ax.plot(path_x, path_y, "-", color="black", lw=1, label="incumbent moves")
    ax.axhline(1.0, color="tab:red", ls="--", lw=1, label="roofline (binding peak)")
    ax.set_xlabel("measurement (in order)")
    ax.set_ylabel("fraction of the binding roofline peak")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
