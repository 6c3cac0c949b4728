"""The first ten minutes (issue 28, item 1): the README's first line works on a fresh machine
because everything `abductune tune` needs is a core dependency, and CI runs the README's
quick-start lines exactly, in a new venv, before the tests."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    if sys.version_info < (3, 11):
        pytest.skip("tomllib needs Python 3.11")
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_what_the_default_tune_needs_is_a_core_dependency():
    core = " ".join(_pyproject()["project"]["dependencies"]).lower()
    for name in ("optuna", "numpy", "click", "rich"):  # TPE (the default's fallback), arrays, the CLI
        assert name in core, f"{name} must install with `pip install .`"
    for name in ("torch", "triton"):  # heavy: optional extras only
        assert name not in core


def test_ci_runs_the_readme_quick_start_lines_verbatim_in_a_new_venv():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Quick start\s+```bash\n(.*?)```", readme, re.S)
    assert block, "the README's quick start is a bash block"
    lines = [ln.split("#")[0].strip() for ln in block.group(1).splitlines() if ln.strip()]
    assert len(lines) == 2 and lines[0] == "pip install . && abductune tune"
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m venv" in ci
    positions = []
    for ln in lines:
        cmd = ln.replace("pip install", "pip install -q")
        assert cmd in ci, f".ci/run must run the README's line {ln!r}"
        positions.append(ci.index(cmd))
    assert positions == sorted(positions), "the main job runs before the tests"
