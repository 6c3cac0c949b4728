"""The dataset arguments that `replay` and `harvest` accept: files, folders, and the
keywords 'public' (the public exhaustive datasets), 'bundled' (our H100 recordings of the
built-in suite) and 'zoo' / 'zoo:<class or kernel>' (our recordings of the kernel zoo)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ..errors import AbductuneError
from .bundled import bundled_datasets
from .public import list_public_datasets
from .zoo import zoo_datasets

# files in a dataset folder that are not datasets
_NOT_DATASETS = ("manifest.json", "compile_times.json")
_SUFFIXES = (".json", ".json.gz", ".jsonl", ".jsonl.gz")


def expand_dataset_args(items: Iterable[str]) -> list[Path]:
    """Files, folders (every dataset file under them), and the keywords 'public', 'bundled',
    'zoo' and 'zoo:<class or kernel>'."""
    out: list[Path] = []
    for item in items:
        if item == "public":
            out += list_public_datasets()
        elif item == "bundled":
            out += bundled_datasets()
        elif item == "zoo" or item.startswith("zoo:"):
            found = zoo_datasets(item.partition(":")[2])
            if not found:
                raise AbductuneError("no zoo datasets are installed with this copy of abductune")
            out += found
        else:
            p = Path(item)
            if p.is_dir():
                out += sorted(q for q in p.rglob("*") if q.is_file() and q.name.endswith(_SUFFIXES)
                              and q.name.lower() not in _NOT_DATASETS)
            elif p.exists():
                out.append(p)
            else:
                raise AbductuneError(f"dataset {item} does not exist (give a file, a folder, "
                                     "'public', 'bundled', 'zoo' or 'zoo:<class or kernel>')")
    return out
