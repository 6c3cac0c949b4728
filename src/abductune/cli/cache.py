"""`abductune cache ls | show | export | import | clear`: what the decorator's store holds.

    abductune cache ls                              # kernels, keys, winners
    abductune cache show matmul_kernel              # every key: runs, configs, times
    abductune cache export --format triton out/     # Triton autotune JSON, one file per key
    abductune cache export --format vllm out/       # vLLM config JSON: batch size -> config
    abductune cache import out/                     # files written by `export --format triton`
    abductune cache clear [KERNEL]

Triton files hold what Triton's `cache_results` writes (`{"key": [...], "configs_timings":
[[Config.__dict__, [median, p20, p80]], ...]}`) plus an "abductune" block with the context
(kernel source hash, space, key, device, toolchain) and every config's row, so an imported
file is found by the decorator exactly as the tune that produced it.
"""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any, Iterable

import click
from rich.table import Table

from ..autotune.choices import pick, stored_winner
from ..autotune.configs import ALWAYS, OPTIONS, triton_config_json
from ..errors import AbductuneError
from ..files import atomic_write_text
from ..measurement import Measurement
from ..store import Context, Store, config_key
from . import output

FORMAT_VERSION = 1


def _open(ctx: click.Context, must_exist: bool = True) -> Store:
    """The store named by `--store`, given before the subcommand (`cache --store F ls`) or after
    it (`cache ls --store F`, like every other command); both only when they agree."""
    before, after = ctx.obj.get("store"), ctx.params.get("store_path")
    if before and after and Path(before) != Path(after):
        raise AbductuneError(f"--store is given twice ({before} before `{ctx.info_name}`, {after} after it); "
                             "give it once")
    return Store(after or before, must_exist=must_exist)


_STORE_HELP = "Store file (default: $ABDUCTUNE_STORE or the user cache dir)."


def _store_option(f: Any) -> Any:
    """`--store` on each subcommand too, so it goes after the subcommand as everywhere else."""
    return click.option("--store", "store_path", default=None, type=click.Path(dir_okay=False),
                        help=_STORE_HELP + " May also come before the subcommand.")(f)


def _stored_kernels(store: Store) -> list[str]:
    return [k for (k,) in store.execute("SELECT DISTINCT kernel FROM contexts ORDER BY kernel")]


def _check_kernel(store: Store, kernel: str) -> None:
    """An unknown kernel name is a mistake, for every subcommand that takes one."""
    known = _stored_kernels(store)
    if kernel not in known:
        raise AbductuneError(f"no kernel named {kernel!r} in {store.path}; stored kernels: "
                             f"{', '.join(known) or 'none'} (see `abductune cache ls`)")


def _contexts(store: Store, kernel: str | None = None) -> list[Context]:
    rows = store.execute("SELECT DISTINCT c.kernel, c.source_hash, c.space_fingerprint, c.problem_key, c.hardware, "
                         "c.toolchain, c.kernel_class, c.dims, c.dtypes FROM contexts c JOIN measurements m "
                         "ON m.context_id = c.id" + (" WHERE c.kernel = ?" if kernel else "") +
                         " ORDER BY c.kernel, c.hardware, c.dims", (kernel,) if kernel else ())
    return [Context(k, sh, fp, pk, json.loads(d), hw, tc, kc, json.loads(dt)) for k, sh, fp, pk, hw, tc, kc, d, dt in rows]


def _per_config(rows: Iterable[Measurement]) -> list[Measurement]:
    """One row per config: the median of its ok rows (samples of the latest ok row), else its
    latest failure; fastest first."""
    groups: dict[str, list[Measurement]] = {}
    for m in rows:
        groups.setdefault(config_key(m.config), []).append(m)
    out = []
    for ms in groups.values():
        ok = [m for m in ms if m.ok]
        if ok:
            out.append(ok[-1].replace(time_ms=statistics.median(m.time_ms for m in ok)))
        else:
            out.append(ms[-1])
    return sorted(out, key=lambda m: (m.objective, config_key(m.config)))


def _decision(store: Store, ctx: Context) -> tuple[dict[str, Any] | None, float, Measurement | None, list[Measurement]]:
    """(what the decorator launches for ctx, its ms, the judged Triton winner, all rows)."""
    rows = store.measurements(ctx)
    winner = stored_winner(store, ctx)
    impls = sorted({m.config["impl"] for m in rows if "impl" in m.config})
    cfg, t = pick(winner, rows, impls)
    return cfg, t, winner, rows


def _key_text(ctx: Context) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(ctx.dims.items())) or "-"


def _cfg_text(cfg: dict[str, Any] | None) -> str:
    if cfg is None:
        return "-"
    return " ".join(f"{k}={v}" for k, v in cfg.items() if v is not None)


@click.group(name="cache")
@click.option("--store", "store_path", default=None, type=click.Path(dir_okay=False),
              help=_STORE_HELP + " May also come after the subcommand.")
@click.pass_context
def cache(ctx: click.Context, store_path: str | None) -> None:
    """What @abductune.autotune stored: list, show, export, import, clear."""
    ctx.obj = {"store": store_path}


@cache.command(name="ls")
@_store_option
@click.pass_context
def ls_cmd(ctx: click.Context, store_path: str | None) -> None:
    """Kernels, keys and winners."""
    with _open(ctx) as store:
        table = Table(title=f"store {store.path}")
        for col in ("kernel", "key", "dtypes", "device", "toolchain", "winner", "ms", "configs"):
            table.add_column(col, justify="right" if col in ("ms", "configs") else "left")
        for c in _contexts(store):
            cfg, t, _, rows = _decision(store, c)
            table.add_row(c.kernel, _key_text(c), ",".join(sorted(set(c.dtypes.values()))), c.hardware, c.toolchain,
                          _cfg_text(cfg), f"{t:.4g}" if math.isfinite(t) else "-",
                          str(len({config_key(m.config) for m in rows})))
        output.cache_console.print(table)


@cache.command(name="show")
@click.argument("kernel")
@click.option("--top", default=10, show_default=True, help="Configs shown per key.")
@_store_option
@click.pass_context
def show_cmd(ctx: click.Context, kernel: str, top: int, store_path: str | None) -> None:
    """Every stored key of KERNEL: its context, runs and fastest configs."""
    with _open(ctx) as store:
        _check_kernel(store, kernel)
        for c in _contexts(store, kernel):
            cfg, t, _, rows = _decision(store, c)
            output.cache_console.print(f"[bold]{c.kernel}[/] {_key_text(c)}  dtypes {c.dtypes}  "
                                       f"device {c.hardware}  {c.toolchain}  source {c.source_hash}  "
                                       f"space {c.space_fingerprint}")
            for r in store.runs(c):
                s = r.summary
                output.cache_console.print(f"  run {r.id}: {r.strategy} {r.status}, "
                                           f"{s.get('evaluations', '?')} evaluations, "
                                           f"{s.get('wall_s', 0.0):.2f}s, winner id {r.winner_id}")
            output.cache_console.print(f"  launches: {_cfg_text(cfg)}"
                                       + (f" at {t:.4g} ms" if math.isfinite(t) else ""))
            table = Table()
            for col in ("config", "status", "ms", "rows"):
                table.add_column(col)
            counts: dict[str, int] = {}
            for m in rows:
                counts[config_key(m.config)] = counts.get(config_key(m.config), 0) + 1
            for m in _per_config(rows)[:top]:
                table.add_row(_cfg_text(m.config), m.status.value, f"{m.time_ms:.4g}" if m.ok else "-",
                              str(counts[config_key(m.config)]))
            output.cache_console.print(table)


# ----------------------------------------------------------------------------- export

def _timings(m: Measurement) -> list[float]:
    """Triton's do_bench answer [median, p20, p80] for a row (inf for a failure)."""
    if not m.ok:
        return [math.inf] * 3
    s = list(m.samples_ms)
    if len(s) == 3:
        return [m.time_ms, s[1], s[2]]
    return [m.time_ms, min(s or [m.time_ms]), max(s or [m.time_ms])]


def triton_file(store: Store, ctx: Context) -> dict[str, Any]:
    """One context as Triton's autotune JSON (plus the abductune block)."""
    _, _, winner, rows = _decision(store, ctx)
    per = _per_config(rows)
    return {
        "key": [str(v) for _, v in sorted(ctx.dims.items())] + [str(v) for _, v in sorted(ctx.dtypes.items())],
        "configs_timings": [[triton_config_json(m.config), _timings(m)] for m in per if "impl" not in m.config],
        "abductune": {"format": FORMAT_VERSION, "kernel": ctx.kernel, "source_hash": ctx.source_hash,
                      "space_fingerprint": ctx.space_fingerprint, "problem_key": ctx.problem_key,
                      "dims": ctx.dims, "dtypes": ctx.dtypes, "hardware": ctx.hardware, "toolchain": ctx.toolchain,
                      "kernel_class": ctx.kernel_class, "winner": winner.config if winner is not None else None,
                      "rows": [m.to_dict() for m in per]}}


def export_triton(store: Store, out: Path, kernel: str | None = None) -> list[Path]:
    written = []
    for c in _contexts(store, kernel):
        path = out / f"{c.kernel}-{c.problem_key[:12]}-{c.hardware.replace(' ', '_')}.autotune.json"
        atomic_write_text(path, json.dumps(triton_file(store, c), indent=1) + "\n")
        written.append(path)
    return written


def _vllm_config(cfg: dict[str, Any]) -> dict[str, Any]:
    from ..heuristics.vllm import from_template

    return from_template({k: v for k, v in cfg.items()
                          if v is not None and (k not in OPTIONS or k in ALWAYS or v != OPTIONS[k])})


def export_vllm_files(store: Store, out: Path, kernel: str | None = None, dim: str | None = None,
                      device_name: str | None = None) -> list[Path]:
    """vLLM's layout: one file per kernel, device and every dim but `dim` (default "M", else
    the dim that varies), mapping that dim's value (the batch size) to the winning config."""
    from ..heuristics.vllm import filename

    groups: dict[str, dict[str, Any]] = {}
    by_kernel: dict[str, list[Context]] = {}
    for c in _contexts(store, kernel):
        by_kernel.setdefault(c.kernel, []).append(c)
    for k, ctxs in by_kernel.items():
        names = sorted(set().union(*(c.dims for c in ctxs)))
        d = dim or ("M" if "M" in names else next((n for n in names if len({c.dims.get(n) for c in ctxs}) > 1),
                                                  names[0] if names else None))
        if d is None or any(d not in c.dims for c in ctxs):
            raise AbductuneError(f"kernel {k}: no key dimension {dim or 'M'} to index a vLLM file by; "
                                 f"give --dim (its dims: {', '.join(names) or 'none'})")
        for c in ctxs:
            winner = stored_winner(store, c)
            if winner is None or "impl" in winner.config:
                continue
            dev = (device_name or c.hardware).replace(" ", "_")
            rest = {n: v for n, v in sorted(c.dims.items()) if n != d}
            if {"E", "N"} <= set(rest) and len(rest) == 2:
                name = filename(rest["E"], rest["N"], dev)
            else:
                sel = "".join(f",{n}={v}" for n, v in rest.items())
                name = f"{k}{sel},device_name={dev}.json"
            groups.setdefault(name, {})[int(c.dims[d])] = _vllm_config(winner.config)
    written = []
    for name, configs in sorted(groups.items()):
        path = out / name
        atomic_write_text(path, json.dumps({str(b): configs[b] for b in sorted(configs)}, indent=4) + "\n")
        written.append(path)
    return written


@cache.command(name="export")
@click.option("--format", "fmt", type=click.Choice(["triton", "vllm"]), default="triton", show_default=True)
@click.argument("path", type=click.Path(file_okay=False))
@click.option("--kernel", default=None, help="Only this kernel.")
@click.option("--dim", default=None, help="vLLM: the key dimension files are indexed by (default M).")
@click.option("--device-name", default=None, help="vLLM: device name in file names (default: the store's).")
@_store_option
@click.pass_context
def export_cmd(ctx: click.Context, fmt: str, path: str, kernel: str | None, dim: str | None,
               device_name: str | None, store_path: str | None) -> None:
    """Write stored winners as Triton autotune JSON or vLLM config JSON into PATH."""
    out = Path(path)
    with _open(ctx) as store:
        if kernel:
            _check_kernel(store, kernel)
        out.mkdir(parents=True, exist_ok=True)
        files = export_triton(store, out, kernel) if fmt == "triton" else \
            export_vllm_files(store, out, kernel, dim, device_name)
    if not files:
        raise AbductuneError(f"nothing to export{f' for kernel {kernel!r}' if kernel else ''}; `abductune cache ls` "
                             "lists what the store holds")
    for p in files:
        click.echo(f"wrote {p}")


# ----------------------------------------------------------------------------- import

def import_triton_file(store: Store, path: Path) -> bool:
    """Add one exported file's rows (kind "import") and a finished "import" run naming its
    winner; False when the store already has a finished tune of that context."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise AbductuneError(f"{path}: not a readable JSON file ({e})") from None
    blk = obj.get("abductune") if isinstance(obj, dict) else None
    if not isinstance(blk, dict) or not blk.get("rows"):
        raise AbductuneError(f"{path}: no 'abductune' block; only files written by `abductune cache export "
                             "--format triton` carry the kernel source hash, space, key and device the decorator "
                             "looks up (Triton's own cache files do not)")
    if blk.get("format") != FORMAT_VERSION:
        raise AbductuneError(f"{path}: export format {blk.get('format')!r}, this abductune reads {FORMAT_VERSION}")
    try:
        ctx = Context(blk["kernel"], blk["source_hash"], blk["space_fingerprint"], blk["problem_key"], blk["dims"],
                      blk["hardware"], blk["toolchain"], blk.get("kernel_class", ""), blk.get("dtypes", {}))
        rows = [Measurement.from_dict(r) for r in blk["rows"]]
    except (KeyError, TypeError, ValueError) as e:
        raise AbductuneError(f"{path}: the abductune block is incomplete ({e})") from None
    if any(r.status == "done" for r in store.runs(ctx)):
        return False
    run_id = store.start_run(ctx, "import", {"file": path.name}, tune_key="import")
    stored = store.put_many(ctx, rows, run_id=run_id, kind="import")
    want = blk.get("winner")
    winner = next((m for m in stored if want is not None and config_key(m.config) == config_key(want)), None)
    store.finish_run(run_id, "done", winner_id=winner.id if winner else None, summary={"imported_from": str(path)})
    return True


@cache.command(name="import")
@click.argument("path", type=click.Path(exists=True))
@_store_option
@click.pass_context
def import_cmd(ctx: click.Context, path: str, store_path: str | None) -> None:
    """Read files written by `abductune cache export --format triton` (a file or a folder)."""
    p = Path(path)
    files = sorted(p.rglob("*.autotune.json")) if p.is_dir() else [p]
    if not files:
        raise AbductuneError(f"no *.autotune.json files in {p}")
    added = 0
    with _open(ctx, must_exist=False) as store:
        for f in files:
            added += import_triton_file(store, f)
    click.echo(f"imported {added} key(s), skipped {len(files) - added} already stored")


@cache.command(name="clear")
@click.argument("kernel", required=False)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@_store_option
@click.pass_context
def clear_cmd(ctx: click.Context, kernel: str | None, yes: bool, store_path: str | None) -> None:
    """Delete the stored measurements and runs of KERNEL (or of every kernel)."""
    with _open(ctx) as store:
        if kernel is not None:
            _check_kernel(store, kernel)
        if not yes:
            click.confirm(f"delete {'kernel ' + kernel if kernel else 'everything'} from {store.path}?", abort=True)
        n = store.clear(kernel)
    click.echo(f"deleted {n} measurement(s)")
