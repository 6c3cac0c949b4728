"""A stand-in for `measure.ptxas_watch.watching` that notes when a search enters and leaves it."""
from __future__ import annotations

import contextlib
from typing import Any, Callable


def recording_watch(entered: list[str], watch: Any = None) -> Callable[[], Any]:
    """A `watching()` that appends "in" and "out" to `entered` and yields `watch`."""
    @contextlib.contextmanager
    def watching():
        entered.append("in")
        yield watch
        entered.append("out")
    return watching
