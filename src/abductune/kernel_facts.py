"""What is known of a kernel's source, by kernel name: each tile parameter's `reduction`, how
the kernel walks the dim that tile covers (`whole`: no loop reads it; `loop`: every path loops
in steps of it; `either`: a path holds the dim whole when the tile covers it).

One registry for the whole process, at the lowest layer, because three layers need it: the
classifier (which dim a tile named only `M` or `N` covers), the theory store's scope checks
(whether a rule's kernels met the dim the way this one does) and the dataset reader (a recorded
header carries the facts where the library's source is not at hand). Two kinds of entry, the
first winning: facts *told* from a readable source (the decorator reads its kernel's loops) and
facts *read* from a dataset header (replay of a library kernel whose code is never copied).
"""
from __future__ import annotations

from typing import Mapping

REDUCTIONS = ("whole", "loop", "either")

_TOLD: dict[str, dict[str, str]] = {}  # kernel name -> {tile parameter: reduction}, from its source
_READ: dict[str, dict[str, str]] = {}  # kernel name -> the same, from the last dataset header read


def _clean(reduction: Mapping[str, str]) -> dict[str, str]:
    return {str(k): v for k, v in reduction.items() if v in REDUCTIONS}


def tell(kernel: str, reduction: Mapping[str, str]) -> None:
    """Facts read from the kernel's own source (they win over a header's); a source that
    tells nothing leaves what a header said."""
    got = _clean(reduction)
    if got:
        _TOLD[kernel] = got


def note_read(kernel: str, reduction: Mapping[str, str]) -> None:
    """Facts a dataset header carried for `kernel` (the last header read wins)."""
    got = _clean(reduction)
    if got:
        _READ[kernel] = got


def told(kernel: str) -> dict[str, str]:
    """The facts told for `kernel` from its source, else those a header carried; {} when none."""
    if kernel in _TOLD:
        return dict(_TOLD[kernel])
    return dict(_READ.get(kernel, {}))


def read_from_header(kernel: str) -> dict[str, str]:
    """Only what a dataset header carried for `kernel` ({} when none did)."""
    return dict(_READ.get(kernel, {}))


def forget(kernel: str | None = None) -> None:
    """Drop what is known of `kernel` (every kernel when None): for tests and long-lived daemons."""
    if kernel is None:
        _TOLD.clear()
        _READ.clear()
    else:
        _TOLD.pop(kernel, None)
        _READ.pop(kernel, None)
