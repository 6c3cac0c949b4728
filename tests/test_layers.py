"""The package's import graph, read from the source with ast: no cycles, and no import from a
lower layer into a higher one (docs/ARCHITECTURE.md draws the layers).

Every `import` statement counts, at any depth (a lazy import inside a function is still an
edge: it runs, and it ties the lower module to the higher one). An edge goes to the module
named: `from .x import y` is an edge to `x.y` when that is a module, else to `x`."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "src" / "abductune"

# Layer of each top-level name of the package (a module or a subpackage), lowest first.
LAYERS: dict[str, int] = {}
for _layer, _names in enumerate([
    # records: what every layer speaks of
    ("errors", "format", "files", "problem", "space", "measurement", "hardware", "classify", "kernel_facts", "dtypes",
     "costs", "kernels"),
    # the engine: measuring, searching, reasoning, seeding, data and storage
    ("measure", "search", "theory", "heuristics", "datasets", "store"),
    # one tuning run and the library calls made of it
    ("session", "tune", "evaluate", "sweep", "fleet", "moe"),
    # front doors
    ("autotune", "cli", "daemon", "integrations", "launch", "__init__", "__main__"),
]):
    for _name in _names:
        LAYERS[_name] = _layer
LAYER_NAMES = ("records", "engine", "session", "front doors")


def _modules() -> dict[str, Path]:
    """Dotted name (without the leading `abductune.`) of every module in the package."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(PKG).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The package module `name` names, or the nearest enclosing one; None if outside."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _edges(mod: str, path: Path, modules: dict[str, Path]) -> set[str]:
    is_pkg = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    package = mod if is_pkg else mod.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "abductune" or alias.name.startswith("abductune."):
                    target = _resolve(alias.name[len("abductune."):], modules)
                    if target:
                        found.add(target)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".") if package else []
                if node.level > 1:
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            elif node.module and (node.module == "abductune" or node.module.startswith("abductune.")):
                base = node.module[len("abductune."):] if node.module != "abductune" else ""
            else:
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}" if base else alias.name
                target = sub if sub in modules else _resolve(base, modules)
                if target:
                    found.add(target)
    found.discard(mod)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: _edges(m, p, modules) for m, p in modules.items()}


def _layer(mod: str) -> int:
    top = mod.split(".")[0]
    if top not in LAYERS:
        raise AssertionError(f"abductune.{mod} belongs to no layer: add {top!r} to LAYERS in "
                             f"tests/test_layers.py and to the drawing in docs/ARCHITECTURE.md")
    return LAYERS[top]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        comp.append(m)
                        if m == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_every_module_has_a_layer():
    for mod in _modules():
        _layer(mod)


def test_no_import_reaches_up_a_layer():
    bad = []
    for mod, targets in sorted(_graph().items()):
        for t in sorted(targets):
            if _layer(t) > _layer(mod):
                bad.append(f"abductune.{mod} ({LAYER_NAMES[_layer(mod)]}) imports abductune.{t} "
                           f"({LAYER_NAMES[_layer(t)]})")
    assert not bad, "imports from a lower layer into a higher one:\n" + "\n".join(bad)


def test_no_import_cycle():
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


# The checks themselves: a reader that misses edges would pass any package.
def test_reader_sees_lazy_relative_and_absolute_imports(tmp_path):
    modules = {"a": tmp_path / "a.py", "b": tmp_path / "b" / "__init__.py", "b.c": tmp_path / "b" / "c.py"}
    modules["a"].write_text("def f():\n    from .b import c\n    import abductune.b\n")
    assert _edges("a", modules["a"], modules) == {"b.c", "b"}
    modules["b.c"].parent.mkdir()
    modules["b.c"].write_text("from .. import a\nfrom . import nothing_here\n")
    assert _edges("b.c", modules["b.c"], modules) == {"a", "b"}


def test_cycle_finder_finds_a_cycle_and_only_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_reader_sees_the_real_package():
    graph = _graph()
    assert {"store", "search", "measure.base"} <= graph["session"]
    assert len(graph) > 60 and sum(map(len, graph.values())) > 150
