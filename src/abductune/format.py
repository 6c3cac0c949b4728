"""How records read in text: one place for the forms every command and layer prints.

A records-layer module (it imports nothing of abductune), so the theory layer and the
command line print a config the same way without the theory layer importing the CLI.
"""
from __future__ import annotations

from typing import Any, Mapping


def format_config(cfg: Mapping[str, Any] | None) -> str:
    """A config as `NAME=value, ...`: readable, and pasteable as Python keyword arguments."""
    if not cfg:
        return "-"
    return ", ".join(f"{k}={v!r}" for k, v in cfg.items())
