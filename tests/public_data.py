"""Test helper: the public exhaustive datasets beside the repository, or a clear skip.

Kept out of the package so that abductune never imports pytest. Set
ABDUCTUNE_REQUIRE_PUBLIC_DATA=1 (as CI should) to turn the skip into a failure.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from abductune.datasets.format import Dataset
from abductune.datasets.public import ENV_DIR, load_any, public_data_dir

REQUIRE_ENV = "ABDUCTUNE_REQUIRE_PUBLIC_DATA"


def require_public_data() -> Path:
    """The public data folder; skips the test when it is absent (fails instead when
    $ABDUCTUNE_REQUIRE_PUBLIC_DATA=1)."""
    d = public_data_dir()
    if d is not None:
        return d
    reason = ("public tuning data not found: set $%s to the folder holding MANIFEST.json, or place "
              "it at shared/datasets/public beside the repository" % ENV_DIR)
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(reason + f" (${REQUIRE_ENV}=1 makes this a failure)")
    pytest.skip(reason)


@functools.lru_cache(maxsize=None)
def load_public(rel: str) -> Dataset:
    """Import one public file (by its path relative to the folder) once per test session."""
    return load_any(require_public_data() / rel)
