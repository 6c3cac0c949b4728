"""Kernels of the kinds people write, each under @abductune.autotune, for the decorator tests,
and the helper that runs those tests in a process of their own.

Triton's interpreter must be chosen before `import triton` (its own library functions, such
as `tl.cdiv`, are decorated then, process-wide), while other test modules compile kernels for
real in the same pytest process. So a decorator test module, collected in an ordinary pytest
run, re-runs itself in a fresh pytest process with TRITON_INTERPRET=1 and reports that run.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
ROOT = Path(__file__).resolve().parents[2]


def env(**extra: str) -> dict[str, str]:
    """The environment of an interpreted child process: TRITON_INTERPRET=1, src and tests importable."""
    paths = [str(ROOT / "src"), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(p for p in paths if p), **extra}


def run_module_in_interpreter(test_file: str, expected: int, timeout: float = 300) -> str:
    """Run `test_file`'s tests in a fresh interpreted pytest process; fail with its report."""
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                        "--durations=5", test_file], cwd=ROOT, env=env(), capture_output=True, text=True,
                       timeout=timeout)
    out = r.stdout + r.stderr
    m = re.search(r"(\d+) passed", out)
    assert r.returncode == 0 and m and int(m.group(1)) == expected, out[-8000:]
    return out


# a test that only makes sense in the interpreted child process
interpreted = pytest.mark.skipif(not INTERPRET, reason="run by test_all_in_an_interpreted_process")


def interpreted_suite(test_file: str, module_globals: dict[str, Any]) -> Callable[[], None]:
    """The one test an ordinary pytest run sees in a decorator test module: it re-runs the
    module in an interpreted child and expects every other `test_` function to pass there."""
    @pytest.mark.skipif(INTERPRET, reason="this is the interpreted process")
    def test_all_in_an_interpreted_process() -> None:
        pytest.importorskip("torch")
        pytest.importorskip("triton")
        run_module_in_interpreter(test_file, expected=sum(n.startswith("test_") for n in module_globals) - 1)
    return test_all_in_an_interpreted_process
