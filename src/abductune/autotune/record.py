"""Record mode (`abductune sweep --call`, through `patch_triton(record=...)`): a key that had to be
tuned is written as a dataset, every config measured once, beside the kernel's own list."""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from ..problem import Problem

log = logging.getLogger(__name__)


def write_record(tuner: Any, problem: Problem, result: Any) -> Path:
    """The recorded key as a dataset (`abductune sweep --call`): every config measured,
    once each, with the kernel's own list, where it came from and the sample, if any."""
    from ..datasets.bundled import shape_name
    from ..datasets.format import SOURCE_FACTS, Dataset, make_source_facts, write_dataset
    from ..hardware import toolchain

    from dataclasses import replace

    from ..costs import problem_costs

    if not problem.flops:  # a known class's FLOPs and bytes, so diagnosis has its roofline
        costs = problem_costs(problem.kernel_class, problem.dims, problem.dtypes)
        if costs:
            problem = replace(problem, flops=costs[0], min_bytes=costs[1])
    seen: dict[tuple, Any] = {}
    for m in result.history:
        if "impl" not in m.config and tuner.space.is_valid(m.config):
            seen.setdefault(tuner.space.key(m.config), m)
    origin = f"{getattr(tuner.base_fn, '__module__', '?')}.{tuner.base_fn.__qualname__} (through patch_triton)"
    meta: dict[str, Any] = {"fixed_configs": tuner._list, "default_config": tuner._list[0] if tuner._list else
                            tuner.space.default(), "origin": origin}
    if tuner._grown:
        meta["space_from"] = "the kernel's own config list, grown one step beyond its hull along roles"
    if tuner._record_sample:
        meta["sample"] = tuner._record_sample
    facts = _source_facts(tuner)
    if facts:
        meta[SOURCE_FACTS] = make_source_facts(facts)
    ds = Dataset(problem, tuner.space.to_dict(), list(seen.values()), toolchain(),
                 restricted_to_records=tuner._record_sample is not None,
                 source=f"abductune sweep --call ({tuner.name})", meta=meta)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", tuner.name)
    path = tuner.record / safe / f"{shape_name(problem.dims) or 'all'}.jsonl.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_dataset(ds, path)
    tuner.recorded.append(path)
    log.info("%s: recorded %d configs to %s", tuner.name, len(seen), path)
    return path


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


def _source_facts(tuner: Any) -> dict[str, str]:
    """What the kernel's source says of its tiles (`theory.store.scope.source_facts`), for the
    dataset's header: a replay cannot read a library's source, and never copies it."""
    from ..theory.store.scope import source_facts

    try:
        src = source_text(tuner)
        return source_facts(src, tuner.space) if src else {}
    except Exception as e:  # noqa: BLE001 - a source we cannot read records no facts, never fails the record
        log.debug("%s: no source facts: %s: %s", tuner.name, type(e).__name__, e)
        return {}
