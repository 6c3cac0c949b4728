"""Reading a tool's version string: the integrations check theirs (torch for Inductor, Helion)
before they import anything of it."""
from __future__ import annotations


def major_minor(version: str) -> tuple[int, int]:
    """(major, minor) of a version string ("2.13.0+cpu" -> (2, 13), "1.5.0rc1" -> (1, 5));
    ValueError when it has no such numbers (the caller names the tool in its own error)."""
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()))
