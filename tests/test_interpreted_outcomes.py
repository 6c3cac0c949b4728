"""Issue 28, item 22: the decorator tests that run in an interpreted child process report the
child's outcome as their own. A test that passed in the child passes (it used to show as one
of 22 "skipped"), one that failed fails with the child's report, and only one the child
skipped is skipped."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def test_each_interpreted_test_reports_its_outcome_in_the_child(tmp_path: Path):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    (tmp_path / "test_three.py").write_text(textwrap.dedent('''
        import os
        import pytest
        from autotune_kernels import INTERPRET, interpreted

        @interpreted
        def test_passes(tmp_path):
            assert os.environ["TRITON_INTERPRET"] == "1" and tmp_path.is_dir()

        @interpreted
        def test_fails():
            assert 1 + 1 == 3, "arithmetic in the child"

        @interpreted
        def test_skips():
            pytest.skip("no such device in the child")

        def test_in_the_parent():
            assert not INTERPRET
    '''))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS.parent / "src"), str(TESTS)]))
    env.pop("TRITON_INTERPRET", None)
    r = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "-o", "addopts=",
                        str(tmp_path / "test_three.py")], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    out = r.stdout + r.stderr
    assert re.search(r"1 failed, 2 passed, 1 skipped", out), out[-4000:]
    assert re.search(r"PASSED .*::test_passes", out) and re.search(r"PASSED .*::test_in_the_parent", out)
    assert re.search(r"FAILED .*::test_fails", out) and "arithmetic in the child" in out
    assert re.search(r"SKIPPED .*skipped in the interpreted child process: no such device in the child", out)


def test_decorator_modules_have_no_test_that_only_skips_in_the_parent():
    """The three decorator modules mark their tests `@interpreted`, which no longer skips: the
    old `test_all_in_an_interpreted_process` runner (and its skipped shadows) is gone."""
    for name in ("test_autotune.py", "test_autotune_store.py", "test_autotune_isolated.py"):
        src = (TESTS / name).read_text()
        assert "@interpreted" in src and "interpreted_suite(" not in src, name
