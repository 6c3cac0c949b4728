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


# ------------------------------------------------------------- docs/TROUBLESHOOTING.md matches the code

TROUBLE = DOC.parent / "TROUBLESHOOTING.md"
SRC = DOC.parent.parent / "src" / "abductune"
# what varies in a documented message: …, ..., {…}, <…>, [i], a quoted value, a number, a
# capitalised stand-in (P, N, LINE), an option name (often the value of a shared check)
PLACEHOLDER = re.compile(r"--[a-z][a-z-]*|…|\.\.\.|\{[^}]*\}|<[^>]*>|\[\w\]|'[^']*'|\b\d+\b|\b[A-Z][A-Z0-9_]{0,5}\b")
# what varies in the source: an f-string's value (\x00 after parsing), %s / {name} in a template
_TEMPLATE = re.compile(r"%[-\d.]*[sdrfg]|\{[A-Za-z_][A-Za-z_0-9.]*(?:![rs])?(?::[^{}]*)?\}")


def documented_messages() -> list[str]:
    """Every message in the first column of TROUBLESHOOTING.md's message tables: the
    backticked spans outside parentheses (a parenthesis says where the message comes from)."""
    out = []
    for line in TROUBLE.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| ") or line.startswith("| message") or line.startswith("|---"):
            continue
        cell = line[2:].split(" | ")[0]
        parts = cell.split("`")
        depth = 0
        for i, part in enumerate(parts):
            if i % 2 == 0:
                depth = max(0, depth + part.count("(") - part.count(")"))
            elif depth == 0 and part.strip():
                out.append(part)
    return out


def _source_strings() -> list[str]:
    """Every string literal of the package and of click (usage errors are click's), f-strings
    with \\x00 where a value goes, adjacent literals joined as Python joins them."""
    import ast

    import click

    def text(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return _TEMPLATE.sub("\x00", node.value).replace("{{", "{").replace("}}", "}")
        if isinstance(node, ast.JoinedStr):
            return "".join(v.value if isinstance(v, ast.Constant) else "\x00" for v in node.values)
        if isinstance(node, ast.IfExp):  # "a" + (" b" if x else ""): the longer text
            return text(node.body)
        return None

    out = []
    files = list(SRC.rglob("*.py")) + list(Path(click.__file__).parent.rglob("*.py"))
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # "a " + f"b {x}"
                parts = [text(node.left), text(node.right)]
                if all(p is not None for p in parts):
                    out.append(" ".join("".join(parts).split()))
            t = text(node)
            if t is not None and (isinstance(node, ast.JoinedStr) or len(t) > 2):
                out.append(" ".join(t.split()))
    # a message quoting a command in backticks is documented without them (Markdown cannot nest them)
    return [s.replace("`", "") for s in out]


# usage errors click words itself (through gettext, so not as one literal)
CLICK = ("Invalid value for '…': '…' is not a valid integer", "Invalid value for '…': File '…' is a directory")


def _frag_pattern(frag: str) -> str:
    """A literal part of a documented message, or the part of it the source prints as a value
    (\x00): its first or last words may be what a value holds."""
    words = frag.split(" ")
    alts = [re.escape(frag)]
    for i in range(1, len(words)):
        head, tail = " ".join(words[:i]), " ".join(words[i:])
        alts += [f"\x00 ?{re.escape(tail)}", f"{re.escape(head)} ?\x00"]
    if len(words) == 1:  # one word (an exception's name) may be all value
        alts.append("\x00")
    return "(?:" + "|".join(alts) + ")"


def message_in_source(message: str, strings: list[str]) -> bool:
    """Whether the code can print `message`: its literal parts (between placeholders) in order
    in one string of the source, where the source may print a value in place of some of
    their words (at most a third of them); or one string of the source, its values as
    wildcards, found in it (a documented message may stop after a stable prefix)."""
    msg = " ".join(message.split())
    if msg in CLICK:
        return True
    frags = [f.strip(" ;:,.()'") for f in PLACEHOLDER.split(msg)]
    frags = [f for f in frags if len(re.sub(r"\W", "", f)) >= 3]
    total = sum(len(f) for f in frags)
    if not frags:  # nothing literal: a pointer such as "`--store` errors"
        return True
    if frags:
        pattern = re.compile(".*?".join(f"(?P<f{i}>{_frag_pattern(f)})" for i, f in enumerate(frags)), re.S)
        for s in strings:
            m = pattern.search(s)
            if m is None:
                continue
            got = 0
            for i, f in enumerate(frags):
                whole = m.group(f"f{i}")
                got += len(whole) if whole == f else len(whole.replace("\x00", "").strip())
            if got >= 2 * total / 3:
                return True
    for s in strings:
        pieces = s.split("\x00")
        if len(s) - len(pieces) + 1 < 15 or len(pieces) < 2:
            continue
        if re.search(".+?".join(re.escape(p) for p in pieces), msg):
            return True
    return False


def test_troubleshooting_lists_messages():
    assert len(documented_messages()) >= 100


def test_every_documented_message_exists_in_the_source():
    strings = _source_strings()
    missing = [m for m in documented_messages() if not message_in_source(m, strings)]
    assert not missing, "documented in docs/TROUBLESHOOTING.md but printed nowhere:\n" + "\n".join(missing)


def test_the_check_itself_tells_a_real_message_from_an_invented_one():
    strings = _source_strings()
    assert message_in_source("no kernel named '…' in P; stored kernels: …", strings)
    assert message_in_source("torch and triton not installed: live tuning and sweeps need the gpu extra "
                             "(pip install 'abductune[gpu]')", strings)
    assert not message_in_source("the flux capacitor of P is not charged", strings)
    assert not message_in_source("no kernel named '…' in P; known kernels: …", strings)
