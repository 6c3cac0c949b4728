"""The nvidia-matmul-heuristics extra in tests: skipped with a reason when absent, a failure when
ABDUCTUNE_REQUIRE_NVIDIA=1 (CI installs what it tests)."""
from __future__ import annotations

import os

import pytest


def require_nvidia() -> None:
    try:
        import nvMatmulHeuristics  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure means the extra is unusable here
        reason = f"nvidia-matmul-heuristics not installed ({type(e).__name__}: {e})"
        if os.environ.get("ABDUCTUNE_REQUIRE_NVIDIA") == "1":
            pytest.fail(f"{reason} (and ABDUCTUNE_REQUIRE_NVIDIA=1)")
        pytest.skip(reason)
