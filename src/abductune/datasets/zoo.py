"""The kernel zoo's recorded datasets, shipped inside the package (zoo_data/<gpu>/<kernel>/).

The zoo is recorded data for kernels the tuner was not built around (see
`abductune.kernels.zoo` and docs/ZOO.md). The CLI names it `zoo` (every zoo dataset),
`zoo:<class>` (one kernel class, e.g. `zoo:matmul`, `zoo:row_reduction`) or `zoo:<kernel>`
(one kernel, e.g. `zoo:zoo_mm_persistent_fp16`).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..errors import AbductuneError
from .format import iter_lines

ZOO_DIR = Path(__file__).parent / "zoo_data"


def _all(gpu: str | None = None) -> list[Path]:
    root = ZOO_DIR / gpu if gpu else ZOO_DIR
    return sorted(root.rglob("*.jsonl.gz")) if root.exists() else []


@lru_cache(maxsize=None)
def _header(path: Path) -> dict:
    return next(iter_lines(path))[1]  # the first line; a bad one names the file and line


def kernel_class(path: Path) -> str:
    """The kernel class a zoo dataset's header states."""
    return str(_header(path).get("kernel", {}).get("class", "other"))


def zoo_kernels(gpu: str | None = None) -> dict[str, list[Path]]:
    """Zoo kernel name -> its datasets."""
    out: dict[str, list[Path]] = {}
    for p in _all(gpu):
        out.setdefault(p.parent.name, []).append(p)
    return out


def zoo_datasets(selector: str = "", gpu: str | None = None) -> list[Path]:
    """Every zoo dataset, or those of one kernel class or one kernel (`selector`)."""
    paths = _all(gpu)
    if not selector:
        return paths
    by_kernel = [p for p in paths if p.parent.name == selector]
    if by_kernel:
        return by_kernel
    by_class = [p for p in paths if kernel_class(p) == selector]
    if by_class:
        return by_class
    classes = sorted({kernel_class(p) for p in paths})
    raise AbductuneError(f"zoo:{selector} names no zoo kernel or class; classes: {', '.join(classes) or 'none'}; "
                         f"kernels: {', '.join(sorted(zoo_kernels(gpu))) or 'none recorded'}")
