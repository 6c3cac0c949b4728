"""`abductune sweep | import | harvest`: record datasets on a GPU, convert others' files into
datasets, and harvest the observed-heuristics database from datasets and the store."""
from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import click
from rich.table import Table

from ..errors import AbductuneError
from . import output
from .args import csv_list, dir_creatable, expand_datasets, outputs_writable, require_gpu_stack
from .output import Interrupted


@click.command(name="import")
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
    from ..costs import parse_dtypes
    from ..datasets.format import write_dataset
    from ..datasets.public import load_any

    dtype_map = parse_dtypes(dtypes) if dtypes else None
    outputs_writable(out)
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
    output.console.print(f"wrote {out}: {len(ds.records)} configs, optimum {ds.optimum().time_ms:.4g} ms{costs}")


@click.command(name="sweep")
@click.option("--kernel", default=None, help="Built-in or zoo kernel name, or module:Class of your own KernelSpec.")
@click.option("--call", default=None, help="module:function that calls third-party @triton.autotune kernels (a "
              "library's public op on your shapes): it runs under patch_triton, and every key that would be tuned "
              "records the space grown around the kernel's own config list instead (past 1,000 valid configs a "
              "seeded sample of --sample configs plus the list). Each config is appended to "
              "OUT/<kernel>/<shape>.jsonl as it is measured and a progress line goes to stderr at a key's start, "
              "every ~10 s and at its end; a rerun with the same --out measures only the configs not yet there.")
@click.option("--only", default=None, metavar="NAMES", help="With --call: record only these kernels (their "
              "functions' names, comma-separated); the others tune their own list as usual.")
@click.option("--shapes", default=None, help="'M=16,N=4096,K=4096;...' (default: the suite's shapes).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False))
@click.option("--workers", type=int, default=None, help="Parallel compile processes (default: CPUs).")
@click.option("--limit", type=int, default=None, help="Only the first N configs (for a quick look).")
@click.option("--sample", type=int, default=None, metavar="N", help="A space of more than 1,000 valid configs is "
              "recorded as a seeded sample of N configs (default 400) plus the kernel's own list.")
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
              help="Sweep on a Ray cluster, one worker per GPU, every shape at once (docs/FLEET.md): 'local', "
                   "'auto' (the cluster `ray start` made) or its address. Needs the fleet extra.")
@click.option("--ray-workers", type=int, default=None, help="With --ray: how many GPU workers (default: all).")
def sweep_cmd(kernel: str | None, call: str | None, shapes: str | None, out_dir: str, workers: int | None,
              limit: int | None, ray_address: str | None = None, ray_workers: int | None = None,
              only: str | None = None, sample: int | None = None) -> None:
    """Measure every config of a kernel for a list of shapes into datasets (resumable)."""
    if ray_address is None:
        require_gpu_stack()  # before anything: without torch and triton nothing below can run
    elif call is not None:
        raise AbductuneError("--ray goes with --kernel; --call runs the function here")
    if (kernel is None) == (call is None):
        raise AbductuneError("sweep needs one of --kernel (a kernel spec) or --call (module:function calling "
                             "@triton.autotune kernels)")
    if sample is not None and sample < 1:
        raise AbductuneError(f"--sample must be at least 1 (configs sampled from a space past 1,000 valid "
                             f"configs), got {sample}")
    if call is not None:
        if shapes or workers or limit:
            raise AbductuneError("--shapes, --workers and --limit go with --kernel; with --call the function's "
                                 "own calls choose the shapes")
        _sweep_call(call, out_dir, only, sample)
        return
    if only is not None:
        raise AbductuneError("--only goes with --call (the kernels its function reaches); with --kernel the "
                             "kernel is already named")
    from .. import kernels
    from ..hardware import local_hardware
    from ..sweep import parse_shapes, sweep

    for opt, v in (("--workers", workers), ("--limit", limit)):
        if v is not None and v < 1:
            raise AbductuneError(f"{opt} must be at least 1, got {v}")
    spec = kernels.get(kernel)
    shape_list = parse_shapes(shapes) if shapes else spec.suite_shapes()
    if not shape_list:
        raise AbductuneError(f"--shapes {shapes!r} names no shape; write M=16,N=4096,K=4096;...")
    for dims in shape_list:
        spec.problem(dims)  # a wrong or missing dim fails now, not after the first shape
    dir_creatable(out_dir, "--out")
    if ray_address is not None:
        _sweep_on_fleet(ray_address, ray_workers, kernel, shape_list, out_dir, workers, limit, sample)
        return
    hw = local_hardware()  # no visible GPU: one line before any folder or file is made
    lines = output.PlainProgress() if output.quiet_bar() else None  # no bar: plain lines for the log
    with output.progress_bar() as bar:
        task = bar.add_task("sweeping", total=None)

        def progress(label: str, done: int, total: int) -> None:
            bar.update(task, description=label, completed=done, total=total)
            if lines is not None:
                lines(label, done, total)

        try:
            paths = sweep(kernel, shape_list, out_dir, compile_workers=workers, limit=limit, hardware=hw,
                          on_progress=progress, **({} if sample is None else {"sample_size": sample}))
        except KeyboardInterrupt:
            raise Interrupted(_sweep_interrupted_note(out_dir)) from None
    for p in paths:
        output.console.print(f"wrote {p}")


def _sweep_on_fleet(address: str, ray_workers: int | None, kernel: str, shape_list: list[dict[str, int]],
                    out_dir: str, workers: int | None, limit: int | None, sample: int | None = None) -> None:
    """`sweep --ray`: every shape's configs farmed out to the cluster's GPUs (`fleet.sweep_fleet`);
    the files and the store are written here, as each measurement lands."""
    from ..fleet import Farm, sweep_fleet
    from ..integrations.ray import executor_for

    if ray_workers is not None and ray_workers < 1:
        raise AbductuneError(f"--ray-workers must be at least 1, got {ray_workers}")
    executor, _ = executor_for(address, mode="live", workers=ray_workers)
    lines = output.PlainProgress() if output.quiet_bar() else None  # no bar: plain lines for the log
    with output.progress_bar() as bar:
        task = bar.add_task(f"sweeping on {executor.name}", total=None)
        done: dict[str, int] = {}

        def progress(label: str, n: int, total: int) -> None:
            done[label] = n
            bar.update(task, description=label, completed=sum(done.values()), total=total * len(shape_list))
            if lines is not None:
                lines(label, n, total)

        try:
            with Farm(executor) as farm:
                paths = sweep_fleet(farm, kernel, shape_list, out_dir, limit=limit, compile_workers=workers,
                                    on_progress=progress, sample_size=sample)
        except KeyboardInterrupt:
            raise Interrupted(_sweep_interrupted_note(out_dir)) from None
    for p in paths:
        output.console.print(f"wrote {p}")


def _sweep_call(call: str, out_dir: str, only: str | None = None, sample: int | None = None) -> None:
    """`sweep --call`: import and run `module:function` under `patch_triton(record=out_dir)`
    (recording only the kernels `only` names, when given; `sample`: record_sample), with record
    mode's progress lines as plain lines on stderr (a log file's, on a remote machine). SIGTERM
    (`timeout`) ends it as Ctrl-C does: what was measured is already in the `.jsonl` files."""
    from ..autotune import patch_triton
    from ..kernels import _import_user_module

    mod_name, _, fn_name = call.partition(":")
    if not mod_name or not fn_name:
        raise AbductuneError(f"--call {call!r}: write it as module:function")
    dir_creatable(out_dir, "--out")
    names = tuple(n.strip() for n in (only or "").split(",") if n.strip())
    if only is not None and not names:
        raise AbductuneError("--only names no kernel; write --only kernel_a,kernel_b")
    extra = {} if sample is None else {"record_sample": sample}
    with patch_triton(record=out_dir, record_only=names, record_progress=_progress_line, **extra) as patch, \
            _sigterm_interrupts():  # the module (and the library it imports) is decorated now
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
        if names:
            raise AbductuneError(f"--call {call!r} ran, but no kernel named {', '.join(names)} was tuned; the "
                                 "kernels it reached: " + (", ".join(sorted({t.base_fn.__name__ for t in
                                                                              patch.autotuners})) or "none"))
        raise AbductuneError(f"--call {call!r} ran, but no @triton.autotune kernel was tuned: import the library "
                             "inside the function or its module (after the patch), and call an op that reaches one "
                             "with a key not already stored")
    for p in sorted(set(paths)):
        output.console.print(f"wrote {p}")


def _progress_line(line: str) -> None:
    """One plain progress line on stderr, flushed (no bar: it goes to log files too)."""
    print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt while the call runs (main thread only), so a `timeout`
    ends it as Ctrl-C does: the store marks the run interrupted and the note says what was kept."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")
    old = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _sweep_interrupted_note(out_dir: str) -> str:
    """What a Ctrl-C'd sweep kept: every measured config is already appended to its shape's
    `.jsonl` under --out, and a rerun skips them."""
    from ..sweep import read_partial

    n = 0
    for f in Path(out_dir).rglob("*.jsonl"):
        try:
            n += len(read_partial(f)[1])
        except Exception:  # noqa: BLE001 - a torn file is repaired by the rerun
            continue
    done = len(list(Path(out_dir).rglob("*.jsonl.gz")))
    return (f"{done} shape(s) finished and {n} measurement(s) of unfinished shapes kept under {out_dir}: "
            "rerun the same command to resume (measured configs are not measured again)")


# the algorithm is `heuristics.harvest`, the report `heuristics.coverage`; this is only the
# command line around them
@click.command(name="harvest")
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
    from ..heuristics.coverage import coverage, summarize
    from ..heuristics.harvest import harvest, observations_from_datasets, observations_from_store
    from ..heuristics.observed import Database
    from ..heuristics.vllm import export_vllm, import_vllm

    if not datasets and not from_store and not vllm_import:
        raise click.UsageError("give datasets, --from-store, or --vllm-import")
    _check_harvest_options(top, keep, granularity, margin, levels, from_store, store_path)
    # everything the run writes is checked before any dataset is read
    if out:
        _database_out_writable(out)
    outputs_writable(json_out)
    if vllm_export:
        dir_creatable(vllm_export, "--vllm-export")
    paths = expand_datasets(datasets) if datasets else []  # an empty folder is an error
    old = Database()
    if out and not replace and Path(out).exists():
        old = Database.load(out)
        output.console.print(f"updating {out}: {len(old)} rule(s) there")
    store = None
    if from_store:  # a mistyped --store must not create an empty store, and fails now
        from ..store import Store
        store = Store(store_path, must_exist=True)
    new = Database()  # only what this run learns: merged into --out under a lock when saved
    obs = []
    try:
        if paths:
            with output.console.status(f"reading {len(paths)} dataset(s)"):
                obs += observations_from_datasets(paths)
        if store is not None:
            obs += observations_from_store(store)
    finally:
        if store is not None:
            store.close()
    result = None
    if obs:
        with output.console.status(f"harvesting {len(obs)} observation(s)"):
            result = harvest(obs, margin=margin, top=top, keep=keep, granularity=granularity,
                             levels=csv_list(levels), exact=exact, database=new)
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
        output.console.print(f"{len(obs)} observation(s): {result.rules_added} rule(s) kept, "
                      f"{len(dropped)} group(s) dropped (margin {margin:.0%})")
        for g in dropped[:20]:
            k = g.key
            output.console.print(f"  dropped {k['hardware']} {k['kernel_class']} {k['bucket']} "
                          f"{k['dtype_family']}: {g.reason}")
        if len(dropped) > 20:
            output.console.print(f"  ... and {len(dropped) - 20} more")
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
        output.console.print(table)
    output.console.print(f"database: {len(db)} rule(s) ({len(db) - n_before:+d})")
    if out:
        # re-read --out under its lock and add this run's rules: a concurrent harvest into
        # the same database keeps its rules too (--replace: this run's rules only)
        for p in new.save(out, merge=not replace):
            output.console.print(f"wrote {p}")
    else:
        output.console.print("nothing written (give --out to save the database)")
    if vllm_export:
        for p in export_vllm(db, vllm_export):
            output.console.print(f"wrote {p}")
    if json_out:
        from ..files import atomic_write_text

        atomic_write_text(json_out, json.dumps({
            "rules": len(db), "margin": margin, "granularity": granularity,
            "coverage": [c.to_dict() for c in checks], "summary": summarize(checks),
            "groups": [{"key": g.key, "shapes": g.shapes, "kept": g.kept, "reason": g.reason,
                        "best": g.best} for g in (result.groups if result else [])]},
            indent=1))
        output.console.print(f"wrote {json_out}")


def _check_harvest_options(top: int, keep: int, granularity: int, margin: float, levels: str,
                           from_store: bool, store_path: str | None) -> None:
    """Numbers and names that would silently give an empty database (or hang) are errors."""
    from ..heuristics.harvest import LEVELS

    for opt, v in (("--top", top), ("--keep", keep), ("--granularity", granularity)):
        if v < 1:
            raise AbductuneError(f"{opt} must be at least 1, got {v}")
    if not 0 <= margin < 1:
        raise AbductuneError(f"--margin must be in [0, 1), got {margin:g}")
    names = csv_list(levels)
    bad = [lv for lv in names if lv not in LEVELS]
    if bad or not names:
        raise AbductuneError(f"--levels {levels!r}: use a comma-separated subset of {','.join(LEVELS)}")
    if store_path and not from_store:
        raise AbductuneError("--store is only read with --from-store; add --from-store or drop --store")


def _database_out_writable(out: str) -> None:
    """`harvest --out`: a .json file (its folders may be created) or a folder of files."""
    from ..files import check_writable

    p = Path(out)
    if p.suffix == ".json":
        if p.is_dir():
            raise AbductuneError(f"--out {p} is a folder; a database file must be a .json file")
        if p.parent.is_dir():
            check_writable(p)
        else:
            dir_creatable(str(p.parent), "--out")
    else:
        if p.exists() and not p.is_dir():
            raise AbductuneError(f"--out {p} is a file without .json suffix; give a .json file or a folder")
        dir_creatable(out, "--out")
