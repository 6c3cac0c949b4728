"""What is known of a kernel's source, by kernel name: each tile parameter's `reduction`, how
the kernel walks the dim that tile covers (`whole`: no loop reads it; `loop`: every path loops
in steps of it; `either`: a path holds the dim whole when the tile covers it); and the tiles its
reduction loop loads per step (`loads`: one tuple of tile parameters per 2-D load, which the
resource model counts in shared memory).

One registry for the whole process, at the lowest layer, because three layers need it: the
classifier (which dim a tile named only `M` or `N` covers), the theory store's scope checks
(whether a rule's kernels met the dim the way this one does) and the dataset reader (a recorded
header carries the facts where the library's source is not at hand). Two kinds of entry, the
first winning: facts *told* from a readable source (the decorator reads its kernel's loops) and
facts *read* from a dataset header (replay of a library kernel whose code is never copied).
"""
from __future__ import annotations

from typing import Mapping, Sequence

REDUCTIONS = ("whole", "loop", "either")

_TOLD: dict[str, dict[str, str]] = {}  # kernel name -> {tile parameter: reduction}, from its source
_READ: dict[str, dict[str, str]] = {}  # kernel name -> the same, from the last dataset header read
_LOADS_TOLD: dict[str, list[tuple[str, ...]]] = {}  # kernel name -> tiles per load in its reduction loop
_LOADS_READ: dict[str, list[tuple[str, ...]]] = {}  # the same, from the last dataset header read


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


def _clean_loads(loads: Sequence[Sequence[str]] | None) -> list[tuple[str, ...]] | None:
    if loads is None:
        return None
    return [tuple(str(x) for x in t) for t in loads if len(t) >= 2]


def tell_loads(kernel: str, loads: Sequence[Sequence[str]] | None) -> None:
    """The tiles each load of the kernel's reduction loop reads, from its own source (wins
    over a header's); None (the source said nothing) leaves what a header said."""
    got = _clean_loads(loads)
    if got is not None:
        _LOADS_TOLD[kernel] = got


def note_read_loads(kernel: str, loads: Sequence[Sequence[str]] | None) -> None:
    """The loads a dataset header carried for `kernel` (the last header read wins)."""
    got = _clean_loads(loads)
    if got is not None:
        _LOADS_READ[kernel] = got


def loads(kernel: str) -> list[tuple[str, ...]] | None:
    """The tiles per load of `kernel`'s reduction loop, told or read; None when unknown."""
    got = _LOADS_TOLD.get(kernel, _LOADS_READ.get(kernel))
    return list(got) if got is not None else None


def forget(kernel: str | None = None) -> None:
    """Drop what is known of `kernel` (every kernel when None): for tests and long-lived daemons."""
    regs = (_TOLD, _READ, _LOADS_TOLD, _LOADS_READ)
    for r in regs:
        if kernel is None:
            r.clear()
        else:
            r.pop(kernel, None)
