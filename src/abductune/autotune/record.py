"""Record mode (`abductune sweep --call`, through `patch_triton(record=...)`): a key that had to be
tuned is written as a dataset, every config measured once, beside the kernel's own list.

As `abductune sweep` does for a spec, each config measured is appended (and fsync'ed) to
`<record>/<kernel>/<shape>.jsonl`, a header line first (`sweep.read_partial` reads it), the moment
it is measured; the finished key becomes `<shape>.jsonl.gz` and the partial file goes. A killed
run keeps every config it measured, and a rerun into the same folder measures only the rest
(`Recorder`: the evaluator answers the configs already there from the file). While a key is
recorded, a progress line goes out at its start, at most every `PROGRESS_EVERY_S` seconds, and at
its end (the `record_progress` option, else the log at INFO)."""
from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..measurement import Measurement
from ..problem import Problem

log = logging.getLogger(__name__)

PROGRESS_EVERY_S = 10.0  # record mode's progress lines: at most one per this many seconds per key


def record_dataset(tuner: Any, problem: Problem, records: Sequence[Measurement], space: Any = None) -> Any:
    """The recorded key as a dataset: its records with the kernel's own list, where it came
    from and the sample, if any (the header of the partial file is this with no records).
    `space`: the key's (the kernel's own, with any tile the call fixes: `autotune.fixed`)."""
    from ..datasets.format import SOURCE_FACTS, Dataset, make_source_facts
    from ..hardware import toolchain

    # `problem` is the key's (`keys.key_problem`): it carries its class's FLOPs and bytes already
    origin = f"{getattr(tuner.base_fn, '__module__', '?')}.{tuner.base_fn.__qualname__} (through patch_triton)"
    space = space if space is not None else tuner.space
    fixed = {p.name: p.values[0] for p in space.params if p.name not in tuner.space.names}
    listed = [{**c, **fixed} for c in tuner._list]
    meta: dict[str, Any] = {"fixed_configs": listed, "default_config": listed[0] if listed else
                            space.default(), "origin": origin}
    if fixed:
        meta["call_fixed"] = fixed
    if tuner._grown:
        meta["space_from"] = "the kernel's own config list, grown one step beyond its hull along roles"
    if tuner._record_sample:
        meta["sample"] = tuner._record_sample
    facts, loads = tile_facts(tuner), tile_loads(tuner)
    if facts or loads is not None:
        meta[SOURCE_FACTS] = make_source_facts(facts, loads)
    return Dataset(problem, space.to_dict(), list(records), toolchain(),
                   restricted_to_records=tuner._record_sample is not None,
                   source=f"abductune sweep --call ({tuner.name})", meta=meta)


def record_paths(tuner: Any, problem: Problem) -> tuple[Path, Path]:
    """(the partial `.jsonl` being appended to, the finished `.jsonl.gz`) of a recorded key:
    `<kernel>/<shape>`, or `<kernel>/<shape>_<dtypes>` where that name already records the same
    shape in other dtypes (a bf16 and an fp16 call of one shape are two keys, two files)."""
    from ..datasets.bundled import shape_name

    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", tuner.name)
    base = tuner.record / safe / (shape_name(problem.dims) or "all")
    tag = re.sub(r"[^A-Za-z0-9_.-]+", "_", "_".join(sorted({str(v) for v in problem.dtypes.values()})))
    for stem in (base, base.with_name(f"{base.name}_{tag}")):
        partial, final = stem.with_name(stem.name + ".jsonl"), stem.with_name(stem.name + ".jsonl.gz")
        there = _recorded_dtypes(partial) if partial.exists() else _recorded_dtypes(final)
        if not tag or there is None or there == {k: str(v) for k, v in problem.dtypes.items()}:
            return partial, final
    return partial, final


def _recorded_dtypes(path: Path) -> dict[str, str] | None:
    """The dtypes the dataset or partial file at `path` records (its header line), None where
    there is no such file or no readable header."""
    from ..datasets.format import DatasetError, iter_lines

    if not path.exists():
        return None
    try:
        _, head = next(iter_lines(path))
        return {k: str(v) for k, v in (head.get("problem") or {}).get("dtypes", {}).items()}
    except (DatasetError, StopIteration, AttributeError):
        return None


def write_record(tuner: Any, problem: Problem, result: Any, kept: Sequence[Measurement] = (),
                 space: Any = None) -> Path:
    """The recorded key as a dataset (`abductune sweep --call`): every config measured, once
    each (`kept`, those an earlier run recorded, first; then the run's history), in the key's
    `space` (default: the kernel's own)."""
    from ..datasets.format import write_dataset

    space = space if space is not None else tuner.space
    seen: dict[tuple, Any] = {}
    for m in [*kept, *result.history]:
        if "impl" not in m.config and space.is_valid(m.config):
            seen.setdefault(space.key(m.config), m)
    ds = record_dataset(tuner, problem, list(seen.values()), space)
    _, path = record_paths(tuner, problem)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_dataset(ds, path)
    tuner.recorded.append(path)
    log.info("%s: recorded %d configs to %s", tuner.name, len(seen), path)
    return path


class Recorder:
    """One key in record mode: the partial file, what an earlier run kept, the progress lines.

    Built before the key's Session: it reads what is already recorded for this key (the partial
    `.jsonl`, else a finished `.jsonl.gz`, when its header names the same problem and space) and
    what the store would answer for free, writes the partial file's header (and those rows), and
    says so. `evaluator(ev)` wraps the key's evaluator: each config is appended as it is
    measured, and a config the file already holds is answered from it, not measured again.
    `finish(result)` writes the dataset and removes the partial file."""

    def __init__(self, tuner: Any, problem: Problem, space: Any, memo: Mapping[tuple, Measurement],
                 plan: Sequence[Mapping[str, Any]]):
        from ..datasets.bundled import shape_name
        from ..files import atomic_write_text

        self.tuner, self.problem, self.space = tuner, problem, space
        self.partial, self.final = record_paths(tuner, problem)
        self.label = f"{tuner.name} {shape_name(problem.dims) or 'all'}"
        self.plan = {space.key(c) for c in plan if space.is_valid(c)}
        header = json.loads(json.dumps(record_dataset(tuner, problem, [], space).header(), default=str))
        kept = self._kept(header)
        self.known: dict[tuple, Measurement] = {}
        for m in kept:
            if "impl" not in m.config and space.is_valid(m.config):
                self.known.setdefault(space.key(m.config), m)
        # what the store already holds of this key is answered by the Session without measuring:
        # into the file too, so the folder alone holds the whole key
        kept_n = sum(1 for k in self.known if k in self.plan)
        stored = [m for k, m in memo.items() if k in self.plan and k not in self.known]
        self.partial.parent.mkdir(parents=True, exist_ok=True)
        if not self.partial.exists():
            atomic_write_text(self.partial, "".join(json.dumps(d, separators=(",", ":")) + "\n" for d in
                                                    [header, *(m.to_dict() for m in self.known.values())]))
        self._append(stored)
        for m in stored:
            self.known[space.key(m.config)] = m
        self.done = {k for k in self.known if k in self.plan}
        self.failed = sum(1 for k in self.done if not self.known[k].ok)
        self.measured = 0  # configs measured by this run
        self.t0 = self.last = time.monotonic()
        again = [f"{kept_n} recorded earlier under {self.partial.parent}"] if kept_n else []
        again += [f"{len(stored)} answered from the store"] if stored else []
        self.say(f"record {self.label}: {len(self.plan)} configs to record" +
                 (f", {' and '.join(again)} ({self.failed} failed): measuring the other "
                  f"{len(self.plan) - len(self.done)}" if again else "") + f"; appending to {self.partial}")

    def _kept(self, header: dict) -> list[Measurement]:
        """What an earlier run recorded for this key: its partial file, else its finished dataset
        (a file of another problem or space under the same name is moved aside, not read)."""
        from ..sweep import read_partial

        head, recs = read_partial(self.partial)
        if head is not None and _same_key(head, header):
            return recs
        if head is not None or self.partial.exists():
            aside = self.partial.with_name(self.partial.name + ".other")
            self.partial.replace(aside)
            log.warning("%s: %s records another problem or space (or has no header); moved to %s and "
                        "recording afresh", self.tuner.name, self.partial, aside)
            return []
        if not self.final.exists():
            return []
        from ..datasets.format import DatasetError, read_dataset

        try:
            ds = read_dataset(self.final)
        except (DatasetError, OSError, ValueError) as e:
            log.warning("%s: %s is unreadable (%s); recording afresh", self.tuner.name, self.final, e)
            return []
        head = json.loads(json.dumps(ds.header(), default=str))
        return list(ds.records) if _same_key(head, header) else []

    # -- progress
    def say(self, line: str) -> None:
        hook: Callable[[str], None] | None = getattr(self.tuner, "record_progress", None)
        if hook is not None:
            hook(line)
        else:
            log.info("%s", line)

    def _line(self, what: str = "") -> str:
        elapsed = time.monotonic() - self.t0
        left = len(self.plan) - len(self.done)
        eta = (f"about {_clock(elapsed / self.measured * left)} left" if self.measured and left else
               "time left unknown" if left else "")
        parts = [f"{len(self.done)}/{len(self.plan)} configs", f"{self.failed} failed", f"{_clock(elapsed)} elapsed"]
        return f"record {self.label}: {what}" + ", ".join(parts + ([eta] if eta else []))

    def _note(self, m: Measurement) -> None:
        k = self.space.key(m.config) if "impl" not in m.config and self.space.is_valid(m.config) else None
        if k is None:
            return
        if k in self.plan and k not in self.done:
            self.done.add(k)
            self.failed += not m.ok
        self.known.setdefault(k, m)
        now = time.monotonic()
        if now - self.last >= PROGRESS_EVERY_S:
            self.last = now
            self.say(self._line())

    def _append(self, ms: Sequence[Measurement]) -> None:
        from ..datasets.format import append_records

        if ms:
            append_records(self.partial, ms)

    # -- the evaluator
    def evaluator(self, ev: Any) -> "RecordingEvaluator":
        return RecordingEvaluator(ev, self)

    def measured_now(self, m: Measurement) -> None:
        self._append([m])
        self.measured += 1
        self._note(m)

    def answer(self, cfg: Mapping[str, Any]) -> Measurement | None:
        """The earlier run's measurement of `cfg`, None when it must be measured."""
        if "impl" in cfg or not self.space.is_valid(cfg):
            return None
        m = self.known.get(self.space.key(cfg))
        return None if m is None else m.replace(config=dict(cfg), id=None, run_id=None, kind="search")

    def finish(self, result: Any) -> Path:
        path = write_record(self.tuner, self.problem, result, list(self.known.values()), self.space)
        self.partial.unlink(missing_ok=True)
        self.say(self._line("done, ") + f"; wrote {path}")
        return path


class RecordingEvaluator:
    """The key's evaluator, as it is, except that each config measured first goes to the
    recorder as it lands (`stream`: the Session stores each one as it lands too) and a config
    the recorder already holds is answered from it. Anything else is the wrapped evaluator's."""

    def __init__(self, inner: Any, recorder: Recorder):
        self.inner = inner
        self.recorder = recorder

    def __getattr__(self, name: str) -> Any:
        if name in ("inner", "recorder"):  # not set yet (a copy being built): never recurse
            raise AttributeError(name)
        return getattr(self.inner, name)

    def stream(self, configs: Sequence[Mapping[str, Any]]) -> Iterator[tuple[list[int], list[Measurement]]]:
        cfgs = [dict(c) for c in configs]
        # which configs the recorder holds, asked once (not once per config still to come)
        held = [self.recorder.answer(c) is not None for c in cfgs]
        for i, c in enumerate(cfgs):
            old = self.recorder.answer(c)
            if old is not None:
                yield [i], [old]
                continue
            # as the evaluators do within a batch: compile workers get the configs still to come
            later = [x for x, h in zip(cfgs[i + 1:], held[i + 1:]) if "impl" not in x and not h]
            if getattr(self.inner, "warm", None) is not None and later:
                try:
                    self.inner.warm(later)
                except Exception as e:  # noqa: BLE001 - an optimisation; each launch compiles anyway
                    log.info("parallel compile failed (%s: %s); compiling in this process", type(e).__name__, e)
                    self.inner.warm = None
            [m] = self.inner.evaluate([c])
            self.recorder.measured_now(m)
            yield [i], [m]

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        out: list[Measurement] = []
        for _, ms in self.stream(configs):
            out += ms
        return out


def _same_key(head: Mapping[str, Any], header: Mapping[str, Any]) -> bool:
    """Whether a file's header records the same problem in the same space as this key's."""
    return all(head.get(k) == header.get(k) for k in ("kernel", "problem", "space"))


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s" if s >= 3600 else \
        f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def source_text(tuner: Any) -> str | None:
    """The Triton source of the tuner's kernel (the jit function's `src`, else Python's
    `inspect`), None when it cannot be read."""
    import inspect

    for obj in (tuner.fn, getattr(tuner.fn, "fn", None)):
        got = getattr(obj, "src", None)
        if isinstance(got, str) and got:
            return got
    try:
        return inspect.getsource(tuner.base_fn)
    except (OSError, TypeError) as e:
        log.debug("%s: no source: %s: %s", tuner.name, type(e).__name__, e)
        return None


def tile_loads(tuner: Any) -> list[tuple[str, ...]] | None:
    """The tiles each load of the kernel's reduction loop reads (`theory.store.scope.kernel_loads`),
    for the dataset's header and the resource model: read once per autotuner, kept on it."""
    if "_loads" in tuner.__dict__:
        return tuner._loads
    from ..theory.store.scope import kernel_loads

    try:
        src = source_text(tuner)
        got = kernel_loads(src) if src else None
    except Exception as e:  # noqa: BLE001 - a source we cannot read records no loads, never fails the record
        log.debug("%s: no loads read: %s: %s", tuner.name, type(e).__name__, e)
        got = None
    tuner._loads = got
    return got


def tile_facts(tuner: Any) -> dict[str, str]:
    """What the kernel's source says of its tiles (`theory.store.scope.source_facts`), for the
    dataset's header (a replay cannot read a library's source, and never copies it) and the
    classifier (`autotuner._note_source`): read once per autotuner, kept on it."""
    got = tuner.__dict__.get("_facts")
    if got is not None:
        return dict(got)
    from ..theory.store.scope import source_facts

    try:
        src = source_text(tuner)
        got = source_facts(src, tuner.space) if src else {}
    except Exception as e:  # noqa: BLE001 - a source we cannot read records no facts, never fails the record
        log.debug("%s: no source facts: %s: %s", tuner.name, type(e).__name__, e)
        got = {}
    tuner._facts = got
    return dict(got)
