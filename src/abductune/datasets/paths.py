"""The dataset arguments that `replay` and `harvest` accept: files, folders, and the
keywords 'public' (the public exhaustive datasets) and 'bundled' (our H100 recordings)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ..errors import AbductuneError
from .bundled import bundled_datasets
from .public import list_public_datasets

# files in a dataset folder that are not datasets
_NOT_DATASETS = ("manifest.json", "compile_times.json")
_SUFFIXES = (".json", ".json.gz", ".jsonl", ".jsonl.gz")


def expand_dataset_args(items: Iterable[str]) -> list[Path]:
    """Files, folders (every dataset file under them), and the keywords 'public' and 'bundled'."""
    out: list[Path] = []
    for item in items:
        if item == "public":
            out += list_public_datasets()
        elif item == "bundled":
            out += bundled_datasets()
        else:
            p = Path(item)
            if p.is_dir():
                out += sorted(q for q in p.rglob("*") if q.is_file() and q.name.endswith(_SUFFIXES)
                              and q.name.lower() not in _NOT_DATASETS)
            elif p.exists():
                out.append(p)
            else:
                raise AbductuneError(f"dataset {item} does not exist (give a file, a folder, "
                                     "'public' or 'bundled')")
    return out
