"""Datasets recorded by us on real GPUs and shipped inside the package (data/<gpu>/<kernel>/)."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from ..errors import AbductuneError

DATA_DIR = Path(__file__).parent / "data"


# longest shape name used whole: file systems cap a file name at 255 bytes, and the name gets a
# dtype tag and ".jsonl.gz" appended (a conv3d's key of 22 dims spells 280 characters)
MAX_SHAPE_NAME = 160


def shape_name(dims: Mapping[str, int]) -> str:
    """The file stem of a recorded shape, in the dims' own order: "M16_N4096_K4096". Past
    `MAX_SHAPE_NAME` characters, its start and a hash of the whole (distinct shapes keep
    distinct names; the dims themselves are in the dataset's header)."""
    name = "_".join(f"{k}{v}" for k, v in dims.items())
    if len(name) <= MAX_SHAPE_NAME:
        return name
    import hashlib

    digest = hashlib.sha1(name.encode()).hexdigest()[:12]
    return f"{name[:MAX_SHAPE_NAME - 14].rstrip('_')}_h{digest}"


def bundled_datasets(gpu: str | None = None, kernel: str | None = None) -> list[Path]:
    """Every finished bundled dataset, optionally for one GPU folder and/or one kernel."""
    root = DATA_DIR / gpu if gpu else DATA_DIR
    if not root.exists():
        return []
    out = sorted(root.rglob("*.jsonl.gz"))
    if kernel:
        out = [p for p in out if p.parent.name == kernel]
    return out


def _stem_dims(p: Path) -> list[tuple[str, int]] | None:
    import re

    parts = re.findall(r"([A-Za-z]+)(\d+)", p.name.removesuffix(".jsonl.gz"))
    return sorted((k, int(v)) for k, v in parts) if parts else None


def find_bundled(kernel: str, dims: dict[str, int], gpu: str | None = None) -> Path:
    """The bundled dataset of `kernel` for exactly these dims, or a clear error listing shapes."""
    want = shape_name(dims)
    cands = bundled_datasets(gpu, kernel)
    target = sorted((k, int(v)) for k, v in dims.items())
    for p in cands:  # dims match in any order: K=4096,N=4096,M=1 is M=1,N=4096,K=4096
        if p.name == f"{want}.jsonl.gz" or _stem_dims(p) == target:
            return p
    have = ", ".join(p.name.removesuffix(".jsonl.gz") for p in cands) or "none"
    raise AbductuneError(f"no bundled dataset for {kernel} at {want}; recorded shapes: {have}")
