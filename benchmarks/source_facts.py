"""Write a library kernel's source facts into its zoo datasets' headers (`meta.source_facts`):
what `sweep --call` records now, for kernels recorded before it did. The facts (each tile
parameter's `reduction`: whole / loop / either, read by `theory.store.scope.source_facts`; and
the tiles each load of the reduction loop reads, `loads`, by `theory.store.scope.kernel_loads`) are
read from the library's jit function named in the header's `meta.origin`; the source itself is
never written anywhere. Only the header line changes: the records are copied byte for byte,
unread.

    python benchmarks/source_facts.py [--dry-run] LIBSRC KERNEL [KERNEL ...]

LIBSRC holds the unpacked libraries (flag_gems/, fla/, liger_kernel/); each KERNEL is a zoo
kernel name (src/abductune/datasets/zoo_data/h100/KERNEL/).
"""
from __future__ import annotations

import ast
import gzip
import json
import os
import re
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from abductune.datasets.format import SOURCE_FACTS, make_source_facts  # noqa: E402
from abductune.datasets.zoo import ZOO_DIR  # noqa: E402
from abductune.space import Space  # noqa: E402
from abductune.theory.store.scope import kernel_loads, source_facts  # noqa: E402

# "<Library> <version> (<licence>): pkg.module.function, recorded through ..."
_ORIGIN = re.compile(r":\s*([A-Za-z_][\w.]*)\.([A-Za-z_]\w*),")


def function_source(libsrc: Path, dotted_module: str, name: str) -> str:
    """The source of top-level function `name` in `dotted_module` under `libsrc` (in memory only)."""
    base = libsrc.joinpath(*dotted_module.split("."))
    path = base.with_suffix(".py") if base.with_suffix(".py").exists() else base / "__init__.py"
    text = path.read_text()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return textwrap.dedent(ast.get_source_segment(text, node) or "")
    raise SystemExit(f"{path}: no top-level function {name}")


def origin_source(libsrc: Path, meta: dict, where: object) -> str:
    """The source of the library function a dataset's `meta.origin` names, read under `libsrc`."""
    m = _ORIGIN.search(str(meta.get("origin", "")))
    if not m:
        raise SystemExit(f"{where}: meta.origin names no module.function")
    return function_source(libsrc, m.group(1), m.group(2))


def header_lines(path: Path) -> tuple[dict, bytes]:
    """(the header, the rest of the file's bytes, unparsed)."""
    with gzip.open(path, "rb") as f:
        first = f.readline()
        rest = f.read()
    return json.loads(first), rest


def rewrite(path: Path, head: dict, rest: bytes) -> None:
    """The file again, with `head` as its first line, written as `write_dataset` writes one."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as raw:
        with gzip.GzipFile(filename=path.name.removesuffix(".gz"), mode="wb", fileobj=raw, mtime=0) as gz:
            gz.write((json.dumps(head, separators=(",", ":")) + "\n").encode("utf-8"))
            gz.write(rest)
    os.replace(tmp, path)


def fill(libsrc: Path, kernel: str, gpu: str = "h100", write: bool = True) -> dict[str, str]:
    """Write the facts into every dataset of `kernel` (with `write`); returns them."""
    paths = sorted((ZOO_DIR / gpu / kernel).glob("*.jsonl.gz"))
    if not paths:
        raise SystemExit(f"no zoo datasets for {kernel}")
    got: dict[str, str] | None = None
    for p in paths:
        head, rest = header_lines(p)
        src = origin_source(libsrc, head.get("meta", {}), p)
        facts = source_facts(src, Space.from_dict(head["space"]))
        if got is not None and facts != got:
            raise SystemExit(f"{p}: facts {facts} differ from the kernel's other datasets' {got}")
        got = facts
        loads = kernel_loads(src)
        head.setdefault("meta", {})[SOURCE_FACTS] = make_source_facts(facts, loads)
        print(f"  {p.name}: loads {loads}")
        if write:
            rewrite(p, head, rest)
    return got or {}


def main(argv: list[str]) -> None:
    dry = "--dry-run" in argv
    argv = [a for a in argv if a != "--dry-run"]
    if len(argv) < 2:
        raise SystemExit(__doc__)
    libsrc = Path(argv[0])
    for k in argv[1:]:
        print(f"{k}: {fill(libsrc, k, write=not dry)}")


if __name__ == "__main__":
    main(sys.argv[1:])
