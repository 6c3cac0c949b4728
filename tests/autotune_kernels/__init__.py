"""Kernels of the kinds people write, each under @abductune.autotune, for the decorator tests,
and the helper that runs those tests in a process of their own.

Triton's interpreter must be chosen before `import triton` (its own library functions, such
as `tl.cdiv`, are decorated then, process-wide), while other test modules compile kernels for
real in the same pytest process. So the tests of a decorator test module (marked
`@interpreted`) run in a fresh pytest process with TRITON_INTERPRET=1, once per module, and
each test of the ordinary run reports its own outcome there: passed when it passed in the
child, failed with the child's report when it failed, skipped (with the child's reason) only
when the child skipped it.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Callable

import pytest

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
ROOT = Path(__file__).resolve().parents[2]


def env(**extra: str) -> dict[str, str]:
    """The environment of an interpreted child process: TRITON_INTERPRET=1, src and tests importable."""
    paths = [str(ROOT / "src"), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(p for p in paths if p), **extra}


# test file -> ({test name: (outcome, text)}, the child's output tail); one child run per file
_CHILD_RUNS: dict[str, tuple[dict[str, tuple[str, str]], str]] = {}


def child_outcomes(test_file: str, timeout: float = 300) -> tuple[dict[str, tuple[str, str]], str]:
    """Every test of `test_file` run once in a fresh interpreted pytest process: per test name
    its outcome ("passed", "failed" or "skipped") and text (the failure, or the skip reason),
    read from the child's JUnit XML report; and the tail of the child's output."""
    if test_file not in _CHILD_RUNS:
        with tempfile.TemporaryDirectory(prefix="abductune-interpreted-") as tmp:
            report = Path(tmp) / "report.xml"
            r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                                f"--junitxml={report}", test_file], cwd=ROOT, env=env(), capture_output=True,
                               text=True, timeout=timeout)
            outcomes: dict[str, tuple[str, str]] = {}
            if report.is_file():
                for case in ET.parse(report).iter("testcase"):
                    bad = next((c for c in case if c.tag in ("failure", "error")), None)
                    skip = case.find("skipped")
                    if bad is not None:
                        outcomes[case.get("name", "")] = ("failed", bad.text or bad.get("message", ""))
                    elif skip is not None:
                        outcomes[case.get("name", "")] = ("skipped", skip.get("message", ""))
                    else:
                        outcomes[case.get("name", "")] = ("passed", "")
        _CHILD_RUNS[test_file] = (outcomes, (r.stdout + r.stderr)[-8000:])
    return _CHILD_RUNS[test_file]


def interpreted(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A test that runs in the interpreted child process. There it is the test itself; in an
    ordinary run it is a test with the same name whose outcome is the child's outcome for it
    (the child runs the whole module once, when the first such test runs)."""
    if INTERPRET:
        return fn
    test_file = fn.__code__.co_filename

    def in_interpreted_child(request: pytest.FixtureRequest) -> None:
        pytest.importorskip("torch")
        pytest.importorskip("triton")
        outcomes, tail = child_outcomes(test_file)
        name = request.node.name
        if name not in outcomes:
            pytest.fail(f"the interpreted child process did not report {name}:\n{tail}")
        outcome, text = outcomes[name]
        if outcome == "skipped":
            pytest.skip(f"skipped in the interpreted child process: {text}")
        if outcome == "failed":
            pytest.fail(f"failed in the interpreted child process (TRITON_INTERPRET=1):\n{text}", pytrace=False)

    in_interpreted_child.__name__ = fn.__name__
    in_interpreted_child.__qualname__ = fn.__qualname__
    in_interpreted_child.__doc__ = fn.__doc__
    in_interpreted_child.__module__ = fn.__module__
    return in_interpreted_child


def interpreted_suite(test_file: str, module_globals: dict[str, Any]) -> None:
    """Formerly the one test that re-ran a decorator module in a child and hid its tests as
    skipped; each `@interpreted` test now reports its own outcome from the child (see
    `interpreted`), so this adds no test. Kept so the modules' `test_all_in_an_interpreted_process
    = interpreted_suite(__file__, globals())` lines need no change."""
    return None
