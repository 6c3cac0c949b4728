"""The examples in docs/LIBRARY.md run as written (and assert what they promise)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "LIBRARY.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_page_has_examples():
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_library_example_runs(code: str, capsys):
    exec(compile(code, str(DOC), "exec"), {"__name__": "__doc_example__"})
    assert capsys.readouterr().out.strip()  # every example prints what it found


def test_public_api_is_importable_without_torch():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "import sys, abductune as at; at.Session, at.Space, at.Store; "
                          "print(sorted(m for m in ('torch', 'triton') if m in sys.modules))"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
