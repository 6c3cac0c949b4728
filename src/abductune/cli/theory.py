"""`abductune learn | predict | explain`: build the theory store, predict a config with no
measurement, and tell the story of a run (observation -> theory -> test -> verdict)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click

from ..errors import AbductuneError
from . import output


def _shape_list(text: str) -> list[dict[str, int]]:
    from ..sweep import parse_shapes

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
    from ..files import check_writable
    from ..theory.store import learn, learn_with_held_out

    if not datasets and not from_store:
        raise AbductuneError("give datasets (files, folders, 'bundled', 'public') or --from-store")
    check_writable(out)
    obs: list[Any] = []
    paths: list[Any] = []
    if datasets:
        from ..datasets.paths import expand_dataset_args

        paths = expand_dataset_args(datasets)
        if not paths:
            raise AbductuneError(f"no dataset files in {', '.join(datasets)}")
    meta = {"sources": list(datasets) + (["store"] if from_store else [])}
    with output.progress_bar() as bar:  # reading and fitting take 15-30 s for 'bundled': say what runs
        if paths:
            from ..heuristics.harvest import observations_from_datasets

            task = bar.add_task("reading datasets", total=len(paths))
            for p in paths:
                bar.update(task, description=f"reading {Path(p).name}")
                obs += observations_from_datasets([p])
                bar.advance(task)
            bar.update(task, description=f"read {len(paths)} dataset(s)")
        if from_store:
            from ..heuristics.harvest import observations_from_store
            from ..store import Store

            with Store(store_path, must_exist=True) as st:
                obs += observations_from_store(st)
        fit = bar.add_task(f"fitting rules to {len(obs)} problems", total=None)

        def step(done: int, total: int) -> None:
            bar.update(fit, completed=done, total=total)
        book = learn_with_held_out(obs, meta, progress=step) if held_out else learn(obs, progress=step)
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
@click.option("--holdout", type=click.Choice(["kernel", "shape"]), default="kernel", show_default=True,
              help="With datasets: what the prediction for each may not have learned from. kernel: any shape of "
              "its kernel (leave-one-kernel-out); shape: that shape only (leave-one-shape-out, in-sample).")
@click.option("--check/--no-check", default=None, help="Compile each prediction for the GPU (no GPU needed, "
              "about a second each once cached, needs triton) and pass over one that spills registers or cannot "
              "launch. Default: check where Triton is installed and the GPU is NVIDIA's.")
@click.option("--ranker/--no-ranker", default=True, show_default=True, help="Serve the ranker learned across "
              "kernels for matmuls (where it beat the theory leave-one-kernel-out) and where no rule applies, "
              "where the learned sources beat the kernels' own defaults on the class's other kernels (else the "
              "kernel's default is served, and said); --no-ranker: the theory store's rules alone.")
def predict_cmd(datasets: tuple[str, ...], kernel: str | None, shapes: str | None, hardware: str,
                theories: str | None, holdout: str, check: bool | None, ranker: bool) -> None:
    """Zero-shot config for a kernel and shapes, or for datasets (scored against their
    optimum, leaving each dataset's kernel, or with --holdout shape its shape, out of what the
    prediction knows). Each answer names its source: theory, ranker, or the next source where
    every rule was declined."""
    from ..format import format_config
    from ..theory.store import TheoryBook, packaged_book, predict
    from ..theory.store.predict import zero_shot

    book = TheoryBook.load(theories) if theories else packaged_book()
    if kernel:
        from .. import kernels
        from ..hardware import lookup

        if not shapes:
            raise AbductuneError("--kernel needs --shapes (e.g. 'M=16,N=4096,K=4096')")
        from ..theory.check import first_clean, unavailable

        spec = kernels.get(kernel)  # a built-in spec imports without Triton (kernels/_triton.py)
        hw = lookup(hardware)
        # every shape is checked against the kernel's dims before anything is printed
        problems = [(dims, spec.problem(dims, hw)) for dims in _shape_list(shapes)]
        why = unavailable(hw)
        if check and why:
            raise AbductuneError(f"--check compiles each prediction for the GPU, but {why}: "
                                 "fix that or leave --check out")
        if check is None:
            check = not why
            if why:
                click.echo(f"predictions unchecked: {why}")
        elif not check:
            click.echo("predictions unchecked (--no-check): served as the rules give them, not compiled "
                       "for the GPU, so one may spill registers")
        for dims, problem in problems:
            shape = ",".join(f"{k}={v}" for k, v in dims.items())
            if check:
                click.echo(f"{kernel} {shape}: compiling the predictions for {hw.arch} ...")
            p = first_clean(spec, problem, zero_shot(problem, spec.space(), book=book, ranker=ranker),
                            echo=lambda line: click.echo(f"  {line}")) if check \
                else predict(problem, spec.space(), book=book, ranker=ranker)
            if p is None:
                click.echo(f"{kernel} {shape}: no rule applies" + (" that compiles cleanly" if check else ""))
                continue
            click.echo(f"{kernel} {shape}: {format_config(p.config)}  [{p.source}]")
            for line in explain_prediction(p):
                click.echo(f"  {line}")
        return
    if not datasets:
        raise AbductuneError("give --kernel and --shapes, or datasets to score predictions on")
    if check:
        raise AbductuneError("--check compiles a built-in kernel's predictions: use it with --kernel and --shapes "
                             "(datasets are scored on their recorded times instead)")
    from ..datasets.paths import expand_dataset_args
    from ..heuristics.harvest import observations_from_datasets

    from ..problem import Holdout

    rows = []
    sources: dict[str, int] = {}
    for o in observations_from_datasets(expand_dataset_args(datasets)):
        p = predict(o.problem, o.space, book=book, exclude=Holdout(o.problem, holdout), ranker=ranker)
        t = o.time_of(p.config) if p else None
        ratio = t / o.optimum if t is not None and math.isfinite(t) else None
        rows.append(ratio)
        if p is not None:
            sources[p.source] = sources.get(p.source, 0) + 1
        click.echo(f"{o.name}: " + (f"{ratio:.3f}x optimum  {format_config(p.config)}  [{p.source}]" if ratio else
                                    "no prediction" if p is None else
                                    f"predicted config failed or unmeasured  [{p.source}]"))
    ok = [r for r in rows if r]
    if ok:
        g = math.exp(sum(map(math.log, ok)) / len(ok))
        click.echo(f"geomean {g:.3f}, worst {max(ok):.3f} over {len(ok)} of {len(rows)} datasets "
                   f"(leave-one-{holdout}-out)")
    if sources:  # which source answered (the ranker or the theory in predict's order, or the default
        # where theory/store/choice.py found the learned sources no better than the defaults)
        click.echo("answered by: " + ", ".join(f"{k} {v}" for k, v in sorted(sources.items())))


def explain_prediction(p: Any) -> list[str]:
    """Why a served prediction is what it is: the rule as learned (its own values, by role),
    then each repair that moved the served config away from them, in order. The rule alone
    would contradict the config printed above it (`warps=4` over `num_warps=2`)."""
    import dataclasses

    lines = [f"because {dataclasses.replace(p, repairs=()).describe()}"]
    if p.repairs:
        lines.append("what is served differs from the rule's values, changed by (in order):")
        lines += [f"  {r}" for r in p.repairs]
    return lines


@click.command(name="explain")
@click.argument("run_id", type=int)
@click.option("--store", "store_path", type=click.Path(dir_okay=False), default=None,
              help="Store holding the run (default: $ABDUCTUNE_STORE or the user cache).")
@click.option("--plot", "plot_out", type=click.Path(dir_okay=False), default=None,
              help="Draw each measured config against the roofline, with the moves between incumbents (PNG).")
def explain_cmd(run_id: int, store_path: str | None, plot_out: str | None) -> None:
    """Tell how run RUN_ID reached its winner: seeds, observations, hypotheses, tests, verdicts."""
    from ..format import format_config
    from ..store import Store

    if plot_out:
        from ..files import check_writable

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
    for line in event_lines(s.get("events", []), {m.id: m for m in rows}):
        click.echo(f"  {line}")
    kinds: dict[str, int] = {}
    for m in rows:
        kinds[m.kind] = kinds.get(m.kind, 0) + 1
    click.echo("  measured: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    if winner is not None:
        click.echo(f"  winner #{winner.id} ({winner.kind}): {format_config(winner.config)}; "
                   f"{_ms(winner.time_ms) if winner.time_ms is not None else '-'}")
    if s.get("won") in ("aten", "template"):  # a matmul's template configs timed by Inductor beside ATen
        aten, best = s.get("aten_ms"), s.get("best_template_ms")
        click.echo(f"  Inductor's timing: ATen {_ms(aten) if aten is not None else '-'}, fastest template config "
                   f"{_ms(best) if best is not None else '-'}: {'ATen' if s['won'] == 'aten' else 'the template'} won")
    if plot_out:
        _plot_run(rows, winner, plot_out, f"run {run.id}: {run.strategy} on {c.kernel}")
        click.echo(f"wrote {plot_out}")


# ----------------------------------------------------------------------------- explain's lines

_CONFIGS = ("config", "candidate", "to_config")  # printed as NAME=value, ...
_PERCENT = ("threshold", "frac_peak_flops", "frac_peak_bw", "occupancy", "padding")
_GAINS = ("expected_gain", "best_expected_gain")
_SHOWN_AS_CHANGE = ("from_config", "incumbent")  # printed as the change to the config beside them
_LABELS = {"time_ms": "time", "frac_peak_bw": "share of peak bandwidth", "frac_peak_flops": "share of peak FLOP/s",
           "k_trips": "K-loop trips", "to_config": "to"}


def _ms(v: float) -> str:
    return f"{v * 1e3:.4g} µs" if v < 1 else f"{v:.4g} ms"


def _value(key: str, v: Any) -> str:
    """One field of an event, for a reader: configs as `A=1, B=2`, times in µs or ms, shares
    and gains in percent, other numbers to 4 significant digits."""
    from ..format import format_config

    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if isinstance(v, int) and key not in _PERCENT:
            return str(v)
        if not math.isfinite(v):
            return str(v)
        if key in _GAINS:
            return f"{v:+.1%}"
        if key in _PERCENT:
            return f"{v:.1%}"
        if key == "time_ms":
            return _ms(v)
        if key == "ratio":
            return f"{v:.3f}x"
        if key == "credibility":
            return f"{v:.2f}"
        return f"{v:.4g}"
    if isinstance(v, dict):
        if key in _CONFIGS or key.endswith("config"):
            return format_config(v)
        return ", ".join(f"{k} {_value(key, x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        if v and all(isinstance(x, dict) for x in v):  # a list of configs
            shown = "; ".join(f"({format_config(x)})" for x in v[:4])
            return f"{len(v)}: {shown}" + (f"; and {len(v) - 4} more" if len(v) > 4 else "")
        return "[" + ", ".join(_value(key, x) for x in v) + "]"
    return str(v)


def _change(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
    if not a or not b:
        return ""
    return ", ".join(f"{k} {a.get(k)}->{b[k]}" for k in b if a.get(k) != b[k])


def why_tested(e: dict[str, Any], swept: list[dict[str, Any]]) -> str:
    """Why abduction measured a hypothesis it expected to lose on (`search/abduction/`): its
    ranking (`expected_gain`: the theory's gain times its credibility, plus the speed-up the
    additive model of the run's measurements predicts) puts theories and local moves on one
    scale, and each batch takes the best-ranked untested moves whatever their sign, until the
    search settles (`stop_early`: `patience` tests without a win and nothing expected to gain
    beyond the noise) or the budget is spent; once stalled it sweeps the nearest moves."""
    if any(e.get("config") == c for c in swept):
        return ("the local search had stalled, so the nearest untested moves are swept whatever the "
                "model predicts of them (it had just been wrong `patience` times)")
    from ..search.abduction import COMPOSE, POLL

    if e.get("theory") == POLL:
        return ("no untested move was expected to gain and this one ranked best; the search tests the "
                "best-ranked moves until it settles or the budget is spent, since the expected gain is a "
                "model's estimate from the measurements so far that only a measurement can check")
    if e.get("theory") == COMPOSE:
        return "two moves that each won are combined and tested together"
    return ("its theory predicts a gain, but the additive model of this run's measurements predicts a "
            "loss that outweighs it; it still ranked among the best untested moves, and a measurement "
            "settles which of the two is right")


def event_lines(events: list[dict[str, Any]], by_id: dict[int, Any]) -> list[str]:
    """`explain`'s story: one line per logged step, readable (no raw dicts, times rounded),
    the measurements it cites with their times, and the reason for testing a hypothesis
    expected to lose."""
    out = []
    swept: list[dict[str, Any]] = []
    told: set[str] = set()  # each reason for testing an expected loss in full once, then briefly
    for e in events:
        kind = e.get("event", "?")
        rest = {k: v for k, v in e.items() if k != "event"}
        ids = rest.pop("ids", None) or rest.pop("measurements", None)
        if kind == "fallback":
            swept = list(rest.get("swept") or [])
        base = next((rest[k] for k in _SHOWN_AS_CHANGE if isinstance(rest.get(k), dict)), None)
        target = next((rest[k] for k in _CONFIGS if isinstance(rest.get(k), dict)), None)
        fields = []
        change = _change(base, target)
        if change:
            fields.append(f"change: {change}")
        for k, v in rest.items():
            if k in _SHOWN_AS_CHANGE and change:
                continue
            if v is None:
                continue
            fields.append(f"{_LABELS.get(k, k.replace('_', ' '))}: {_value(k, v)}")
        gain = rest.get("expected_gain")
        if kind == "hypothesis" and isinstance(gain, (int, float)) and gain < 0:
            why = why_tested(rest, swept)
            fields.append("tested although a loss is expected: " + (why if why not in told else
                                                                   why.split(";")[0] + " (as above)"))
            told.add(why)
        line = "; ".join(fields)
        if ids:
            times = [f"#{i} {_ms(by_id[i].time_ms)}" for i in ids if i in by_id and by_id[i].ok]
            line += f"  [{', '.join(times) or ', '.join(f'#{i}' for i in ids)}]"
        out.append(f"{kind:10} {line}")
    return out


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
