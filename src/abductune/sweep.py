"""Recording exhaustive datasets on a GPU (`abductune sweep`), resumable after a crash.

Each (kernel, shape) goes to `<out>/<kernel>/<shape>.jsonl` while it is being measured: a
header line, then one line per config appended and fsync'ed as soon as it is measured. A
killed sweep resumes where it stopped; a finished shape is compressed to `.jsonl.gz`.
Compile seconds are the cost of a real compile: a config compiled once for one shape is a
cache hit for the next, so the first real compile time is kept (`compile_times.json`).
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Callable

from .datasets.bundled import shape_name
from .datasets.format import Dataset, append_records, write_dataset
from .errors import AbductuneError
from .files import atomic_write_text
from .hardware import HardwareInfo, local_hardware, toolchain, toolchain_key
from .measurement import Measurement

log = logging.getLogger(__name__)


def parse_shapes(text: str) -> list[dict[str, int]]:
    """'M=16,N=4096,K=4096;M=1,N=...' -> list of dims. The one parser of `--shapes` (tune,
    predict, sweep): what the text alone shows to be wrong is refused here, in one line, before
    anything is looked up: a malformed dim, a dim given twice in one shape (`M=16,M=32` would
    silently take the last), a dim that is not a positive integer, and a text with no shape.
    Whether the names are the kernel's is checked against its spec (`KernelSpec.problem`)."""
    shapes = []
    for part in text.split(";"):
        if not part.strip():
            continue
        shape = part.strip()
        dims: dict[str, int] = {}
        for kv in part.split(","):
            name, eq, value = kv.partition("=")
            name = name.strip()
            try:
                n = int(value)
            except ValueError:
                n = None
            if not eq or not name.isidentifier() or n is None:
                raise AbductuneError(f"bad shape {shape!r}: write dims as M=16,N=4096,K=4096 and "
                                     "separate shapes with ';'")
            if name in dims:
                raise AbductuneError(f"bad shape {shape!r}: dim {name} is given twice; give each dim once")
            if n <= 0:
                raise AbductuneError(f"bad shape {shape!r}: every dim must be positive, got {name}={n}")
            dims[name] = n
        shapes.append(dims)
    if not shapes:
        raise AbductuneError(f"--shapes {text!r} names no shape; write M=16,N=4096,K=4096;...")
    return shapes


def read_partial(path: Path) -> tuple[dict | None, list[Measurement]]:
    """Header and records of an in-progress file, ready to be appended to.

    A sweep appends one fsync'ed line per config, so a kill can only tear the last line. That
    fragment is dropped and the file is truncated back to the end of the last complete line,
    so the next append starts a fresh line instead of gluing onto the fragment. A last line
    that is complete but lost its newline is kept and terminated. A corrupt line elsewhere is
    skipped with a warning; every readable record is kept."""
    if not path.exists():
        return None, []
    data = path.read_bytes()
    head: dict | None = None
    recs: list[Measurement] = []
    pieces = data.split(b"\n")
    tail = pieces.pop()  # what follows the last newline: b"" unless the last line is torn
    offset = 0
    for lineno, raw in enumerate(pieces, 1):
        offset += len(raw) + 1
        if not raw.strip():
            continue
        obj = _parse_line(raw, path, lineno)
        if obj is None:
            continue
        if head is None:
            head = obj
            continue
        try:
            recs.append(Measurement.from_dict(obj))
        except (KeyError, TypeError, ValueError) as e:
            log.warning("%s:%d: skipped a malformed record (%s)", path, lineno, e)
    if tail.strip():
        obj = _parse_line(tail, path, len(pieces) + 1, torn=True)
        m = None
        if obj is not None and head is not None:
            try:
                m = Measurement.from_dict(obj)
            except (KeyError, TypeError, ValueError):
                m = None
        if obj is not None and (head is None or m is not None):
            # complete but unterminated: keep it and end the line
            with open(path, "ab") as f:
                f.write(b"\n")
                f.flush()
                os.fsync(f.fileno())
            if head is None:
                head = obj
            else:
                recs.append(m)  # type: ignore[arg-type]
        else:
            log.warning("%s:%d: dropped a torn last line (the sweep was killed while writing "
                        "it); keeping the %d records before it", path, len(pieces) + 1, len(recs))
            with open(path, "r+b") as f:
                f.truncate(offset)
                f.flush()
                os.fsync(f.fileno())
    return head, recs


def _parse_line(raw: bytes, path: Path, lineno: int, torn: bool = False) -> dict | None:
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        if not torn:
            log.warning("%s:%d: skipped a corrupt line (%s)", path, lineno, e)
        return None
    if not isinstance(obj, dict):
        if not torn:
            log.warning("%s:%d: skipped a line that is not a JSON object", path, lineno)
        return None
    return obj


def _read_compile_times(path: Path) -> dict[str, float]:
    """The first real compile seconds per config; an unreadable file only costs that memory."""
    if not path.exists():
        return {}
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        log.warning("%s is unreadable (%s); compile times start afresh", path, e)
        return {}
    return obj if isinstance(obj, dict) else {}


def make_out_dir(path: Path) -> Path:
    """Create the sweep's output folder, or say in one line which folder cannot be made."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise AbductuneError(f"cannot create folder {path}: a file of that name (or of one of its "
                             "parents) is in the way; give --out a folder path") from None
    except OSError as e:
        raise AbductuneError(f"cannot create folder {path}: {e.strerror or type(e).__name__}; give "
                             "--out a writable folder") from None
    return path


# Spaces up to this many valid configs are recorded whole; larger ones as a fixed sample.
EXHAUSTIVE_MAX = 1000
SAMPLE_SIZE = 400


def sample_configs(space: Any, fixed: list[dict], *, size: int = SAMPLE_SIZE, seed: int = 0,
                   exhaustive_max: int | None = None) -> tuple[list[dict], dict[str, Any] | None]:
    """(configs to record, the header's sample description or None when recorded whole).

    A space of at most `exhaustive_max` valid configs is recorded whole. A larger one gets a
    fixed random sample of `size` valid configs (seeded, so every shape and every strategy
    sees the same sample) plus the kernel's own list, in the space's order (a `size` that
    covers the space records it whole). `exhaustive_max` defaults to `EXHAUSTIVE_MAX` as it is
    when called."""
    if exhaustive_max is None:
        exhaustive_max = EXHAUSTIVE_MAX
    configs = space.valid_configs()
    if len(configs) <= exhaustive_max or size >= len(configs):
        return configs, None
    import random

    picked = set(random.Random(seed).sample(range(len(configs)), size))
    keys = {space.key(c) for i, c in enumerate(configs) if i in picked}
    own = [c for c in fixed if space.is_valid(c)]
    keys |= {space.key(c) for c in own}
    chosen = [c for c in configs if space.key(c) in keys]
    return chosen, {"valid_in_space": len(configs), "size": len(chosen), "random": size, "seed": seed,
                    "includes": "the kernel's own config list"}


def sweep_plan(spec: Any, space: Any, *, limit: int | None, seed: int, sample_size: int,
               exhaustive_max: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """What a sweep of `spec` measures per shape (every valid config, or the fixed sample past
    `exhaustive_max`; the first `limit`) and the dataset header's meta that says so."""
    configs, sample = sample_configs(space, spec.fixed_configs(), size=sample_size, seed=seed,
                                     exhaustive_max=exhaustive_max)
    if limit:
        configs = configs[:limit]
    meta: dict[str, Any] = {"fixed_configs": spec.fixed_configs(), "default_config": spec.default_config(),
                            "origin": getattr(spec, "origin", "abductune built-in suite")}
    if sample:
        meta["sample"] = sample
    return configs, meta


def sweep(kernel_name: str, shapes: list[dict[str, int]], out_dir: str | Path, *,
          compile_workers: int | None = None, limit: int | None = None, seed: int = 0,
          hardware: HardwareInfo | None = None, target_ms: float = 10.0, max_reps: int = 50,
          on_progress: Callable[[str, int, int], None] | None = None, store: Any = None,
          sample_size: int = SAMPLE_SIZE, exhaustive_max: int = EXHAUSTIVE_MAX) -> list[Path]:
    """Measure every valid config of `kernel_name` for each shape (or, past `exhaustive_max`
    valid configs, a fixed sample of them: `sample_configs`); returns the dataset paths.
    Every measurement also goes through a Session into `store` (a Store or a path; default
    the user's store), so a sweep's rows feed harvest, learn and later tunes."""
    from .session import Session
    from .store import Store
    from . import kernels
    from .measure.live import BenchWorker, Compiler, LiveEvaluator

    spec = kernels.get(kernel_name)
    space = spec.space()
    configs, meta = sweep_plan(spec, space, limit=limit, seed=seed, sample_size=sample_size,
                               exhaustive_max=exhaustive_max)
    hw = hardware or local_hardware()
    out = make_out_dir(Path(out_dir) / spec.name)
    ctimes_path = out / "compile_times.json"
    ctimes = _read_compile_times(ctimes_path)
    tc = toolchain()
    worker = BenchWorker()
    done_paths = []
    try:
        for dims in shapes:
            problem = spec.problem(dims, hw)
            final = out / f"{shape_name(problem.dims)}.jsonl.gz"
            partial = out / f"{shape_name(problem.dims)}.jsonl"
            if final.exists():
                done_paths.append(final)
                continue
            head, recs = read_partial(partial)
            ds = Dataset(problem, space.to_dict(), [], tc, source=f"abductune sweep {spec.name}",
                         restricted_to_records="sample" in meta, meta=dict(meta))
            if head is not None:
                ds.baselines = dict(head.get("baselines") or {})
            else:
                worker.request({"op": "setup", "kernel": spec.name, "problem": problem.to_dict(),
                                "seed": seed}, 600)
                base = worker.request({"op": "bench", "config": None}, 120)
                if base.status == "ok":
                    ds.baselines["torch_ms"] = base.time_ms
                atomic_write_text(partial, json.dumps(ds.header(), separators=(",", ":")) + "\n")
            seen = {space.key(m.config) for m in recs}
            todo = [c for c in configs if space.key(c) not in seen]
            if todo:
                compiler = Compiler(compile_workers)
                ev = LiveEvaluator(spec, problem, compiler=compiler, worker=worker, seed=seed, early_stop=False,
                                   target_ms=target_ms, max_reps=max_reps)
                try:
                    comps = compiler.compile(spec.name, todo, problem)
                finally:
                    compiler.shutdown()  # frees the pool's GPU buffers before timing
                st = store if isinstance(store, Store) else Store(store)
                with Session(ev, strategy="exhaustive", store=st, toolchain=toolchain_key()) as session, \
                        session.recording("sweep"):
                    for i, (cfg, comp) in enumerate(zip(todo, comps)):
                        ck = json.dumps(space.key(cfg))
                        if comp.ok:
                            # a cache hit reports ms: keep the first real compile's seconds
                            ctimes[ck] = max(ctimes.get(ck, 0.0), float(comp.compile_s))
                            comp = comp.with_compile_s(ctimes[ck])
                        m = ev.bench_compiled(dict(cfg), comp)
                        append_records(partial, [m])
                        session.record([m])
                        recs.append(m)
                        if on_progress:
                            on_progress(f"{spec.name} {shape_name(problem.dims)}", len(recs), len(configs))
                if not isinstance(store, Store):
                    st.close()
                atomic_write_text(ctimes_path, json.dumps(ctimes))
            ds.records = recs
            write_dataset(ds, final)
            partial.unlink()
            done_paths.append(final)
    finally:
        worker.close()
    return done_paths


def noise_study(kernel_name: str, dataset_paths: list[str | Path], *, top: int = 10, n_random: int = 10,
                repeats: int = 5, reps: int = 20, seed: int = 0) -> list[dict[str, Any]]:
    """Re-measure the top configs and random ones of recorded datasets `repeats` times,
    interleaved, and report each config's spread across repeats."""
    import random
    import statistics

    from . import kernels
    from .datasets.format import read_dataset
    from .measure.live import BenchWorker

    spec = kernels.get(kernel_name)
    rng = random.Random(seed)
    worker = BenchWorker()
    rows = []
    try:
        for p in dataset_paths:
            ds = read_dataset(p)
            ok = sorted(ds.ok_records(), key=lambda m: m.objective)
            rest = ok[top:]
            chosen = ok[:top] + rng.sample(rest, min(n_random, len(rest)))
            worker.request({"op": "setup", "kernel": spec.name, "problem": ds.problem.to_dict(),
                            "seed": seed}, 600)
            per_round: list[list[float]] = [[] for _ in chosen]
            for _ in range(repeats):
                r = worker.request({"op": "interleaved", "configs": [m.config for m in chosen],
                                    "rounds": 1, "reps": reps}, 600)
                for i, s in enumerate(r.samples):
                    per_round[i].append(statistics.median(s))
            for i, m in enumerate(chosen):
                meds = per_round[i]
                mid = statistics.median(meds)
                rows.append({"dataset": ds.name, "config": m.config, "rank": ok.index(m),
                             "group": "top" if i < top else "random", "sweep_ms": m.time_ms,
                             "medians_ms": meds, "spread": (max(meds) - min(meds)) / mid,
                             "vs_sweep": mid / m.time_ms})  # type: ignore[operator]
    finally:
        worker.close()
    return rows
