"""What the commands check and parse of what the user gave, before any work is spent: comma
lists, output paths, dataset arguments, the gpu extra."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from ..errors import AbductuneError


def csv_list(value: str, cast=str) -> list[Any]:
    try:
        return [cast(v.strip()) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"expected a comma-separated list, got {value!r}") from None


def require_gpu_stack() -> None:
    """Live work needs torch and triton: say which extra to install before anything starts."""
    import importlib.util

    missing = [m for m in ("torch", "triton") if importlib.util.find_spec(m) is None]
    if missing:
        raise AbductuneError(f"{' and '.join(missing)} not installed: live tuning and sweeps need the gpu "
                             "extra (pip install 'abductune[gpu]')")


def outputs_writable(*paths: str | None) -> None:
    """Check where results go before any work is spent on them."""
    from ..files import check_writable

    for p in paths:
        if p:
            check_writable(p)


def expand_datasets(items: tuple[str, ...]) -> list[Path]:
    from ..datasets.public import public_data_dir
    from ..datasets.paths import expand_dataset_args

    if "public" in items and public_data_dir() is None:
        raise AbductuneError("the public datasets folder was not found: put shared/datasets/"
                             "public beside the repository or set ABDUCTUNE_PUBLIC_DATA")
    paths = expand_dataset_args(items)
    if not paths:
        raise AbductuneError(f"no dataset files in {', '.join(items)}")
    return paths


def dir_creatable(path: str, what: str) -> Path:
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
