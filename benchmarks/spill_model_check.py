"""How well the resource model's register estimate tells which recorded matmul configs spilled.

    python benchmarks/spill_model_check.py

For every recorded config (zoo and bundled, matmul classes, spaces with M/N/K tiles and warps,
configs that ran) whose record keeps the compiler's spill count: whether it spilled heavily
(more than 1 KB a thread), whether `theory.resources.spills` says it will (the fp32 accumulator
per thread past `ACC_MAX`), and whether a variant would, that adds the A and B operand tiles per
thread (in 32-bit registers) to the accumulator and compares with 255 registers. Session 21
checked that variant after a split-K config whose operands are not pipelined spilled 4.9 KB a
thread: it was not built (docs/PERFORMANCE.md, "Twenty-first session").
"""
from __future__ import annotations

import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from abductune.classify import classify  # noqa: E402
from abductune.costs import operand_bytes  # noqa: E402
from abductune.datasets.format import read_dataset  # noqa: E402
from abductune.datasets.paths import expand_dataset_args  # noqa: E402
from abductune.theory.resources import MAX_REGS_PER_THREAD, spills  # noqa: E402

HEAVY_BYTES = 1024


def main() -> None:
    per: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for path in expand_dataset_args(["zoo", "bundled"]):
        ds = read_dataset(path)
        pb, sp = ds.problem, ds.space()
        if classify(pb, sp).kernel_class not in ("matmul", "quantized_matmul"):
            continue
        tm, tn, tk, w = (sp.by_role(r) for r in ("tile:M", "tile:N", "tile:K", "warps"))
        if not (tm and tn and tk and w):
            continue
        sa, sb, _ = operand_bytes(pb.dtypes)
        for r in ds.records:
            if r.spills is None or not r.ok:
                continue
            c = r.config
            threads = c[w.name] * 32
            acc = c[tm.name] * c[tn.name] / threads
            operands = (c[tm.name] * c[tk.name] * sa + c[tk.name] * c[tn.name] * sb) / 4 / threads
            per[pb.kernel][(r.spills > HEAVY_BYTES, spills(pb, sp, c) is not None,
                            acc + operands > MAX_REGS_PER_THREAD)] += 1
    total: collections.Counter = collections.Counter()
    print("| kernel | heavy spillers / records | model: caught, false alarms | with operands: caught, false alarms |")
    print("|---|---|---|---|")
    for kernel, n in sorted(per.items()):
        total.update(n)
        print(_row(kernel, n))
    print(_row("all", total))


def _row(name: str, n: collections.Counter) -> str:
    def count(pred) -> int:
        return sum(v for k, v in n.items() if pred(*k))
    return (f"| {name} | {count(lambda h, a, b: h)} / {sum(n.values())} | "
            f"{count(lambda h, a, b: h and a)}, {count(lambda h, a, b: a and not h)} | "
            f"{count(lambda h, a, b: h and b)}, {count(lambda h, a, b: b and not h)} |")


if __name__ == "__main__":
    main()
