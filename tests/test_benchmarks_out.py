"""Issue 28, item 24: a benchmark writes where the user says (--out, --json, --noise-out), or,
by default, into benchmarks/out/, which git ignores; never over a tracked results file."""
from __future__ import annotations

import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py")) + sorted((ROOT / "benchmarks" / "gpu").glob("*.py"))
OUTPUT_OPTIONS = ("--out", "--json", "--noise-out")


def _output_defaults(path: Path) -> list[tuple[str, str]]:
    """(option, default expression as written) for each output option with a default."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
                and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in OUTPUT_OPTIONS):
            for kw in node.keywords:
                if kw.arg == "default":
                    found.append((node.args[0].value, ast.unparse(kw.value)))
    return found


def test_no_benchmark_writes_into_a_tracked_folder_by_default():
    assert len(SCRIPTS) > 10
    for path in SCRIPTS:
        src = path.read_text()
        for option, default in _output_defaults(path):
            if default in ("None", "''", '""'):
                continue  # nothing written unless asked, or a fallback checked below
            assert "results" not in default, f"{path.name} {option} defaults into benchmarks/results: {default}"
            assert "'out'" in default or "OUT" in default, f"{path.name} {option} default {default} is not benchmarks/out"
        # a computed fallback (`Path(args.out) if args.out else ...`) goes to benchmarks/out too
        tree = ast.parse(src)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "RESULTS" for t in node.targets):
                raise AssertionError(f"{path.name} still defines RESULTS = {ast.unparse(node.value)}")


def test_benchmarks_out_is_ignored_by_git_and_results_files_are_tracked():
    ignored = subprocess.run(["git", "check-ignore", "-q", "benchmarks/out/core.json"], cwd=ROOT)
    assert ignored.returncode == 0, "benchmarks/out/ is not in .gitignore"
    tracked = subprocess.run(["git", "ls-files", "benchmarks/results/core.json"], cwd=ROOT, capture_output=True,
                             text=True).stdout
    assert tracked.strip() == "benchmarks/results/core.json"  # what the old default overwrote


def test_bench_core_default_is_benchmarks_out(monkeypatch, tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_core_t", ROOT / "benchmarks" / "bench_core.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.OUT == ROOT / "benchmarks" / "out"
    written = []
    monkeypatch.setattr(mod, "bench_enumeration", lambda repeat: [])
    monkeypatch.setattr(mod, "bench_public", lambda repeat, quick: [])
    monkeypatch.setattr(Path, "write_text", lambda self, text, *a, **k: written.append(self))
    monkeypatch.setattr(Path, "mkdir", lambda self, *a, **k: None)
    assert mod.main([]) == 0
    assert written == [ROOT / "benchmarks" / "out" / "core.json"]
    written.clear()
    assert mod.main(["--json", str(tmp_path / "c.json")]) == 0
    assert written == [tmp_path / "c.json"]
