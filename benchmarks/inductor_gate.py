"""Where a search past a list of configs paid, by kernel time: the table behind abductune.inductor's
`min_us` (DEFAULT_MIN_US in src/abductune/integrations/inductor_kernels.py).

    PYTHONPATH=src python3 benchmarks/inductor_gate.py

For every bundled H100 sweep of an elementwise or row-reduction kernel (the classes Inductor's
pointwise and reduction kernels fall in; matmuls are not Inductor's Triton kernels here), the
exhaustive best against the best of the kernel's fixed config list (what a heuristic list, as
Inductor's, offers without a search): a gain counts when it passes both 2% and 1 us a launch.
The threshold is half the fastest kernel time at which a gain counted. In-sample on these
sweeps; never on the models issue 25 reports.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from abductune.datasets.bundled import bundled_datasets  # noqa: E402
from abductune.datasets.format import read_dataset  # noqa: E402
from abductune.store import config_key  # noqa: E402

REL, ABS_US = 0.02, 1.0  # a gain counts past both


def rows() -> list[dict]:
    out = []
    for path in bundled_datasets("h100"):
        ds = read_dataset(path)
        if ds.problem.kernel_class not in ("elementwise", "row_reduction"):
            continue
        times = {config_key(m.config): m.time_ms * 1e3 for m in ds.records if m.ok}
        fixed = [times[k] for k in (config_key(c) for c in ds.meta.get("fixed_configs", ())) if k in times]
        if not times or not fixed:
            continue
        best, listed = min(times.values()), min(fixed)
        gain = listed - best
        out.append({"dataset": f"{path.parent.name}/{ds.name}", "best_us": best, "list_us": listed, "gain_us": gain,
                    "gain": gain / listed, "counts": gain > ABS_US and gain / listed > REL})
    return sorted(out, key=lambda r: r["best_us"])


def main() -> None:
    table = rows()
    print(f"{'sweep':<40} {'best us':>9} {'list us':>9} {'gain us':>8} {'gain':>6}  counts")
    for r in table:
        print(f"{r['dataset']:<40} {r['best_us']:>9.1f} {r['list_us']:>9.1f} {r['gain_us']:>8.2f} "
              f"{r['gain']:>6.1%}  {'yes' if r['counts'] else ''}")
    paid = [r["best_us"] for r in table if r["counts"]]
    if paid:
        print(f"fastest kernel where a search past the list paid: {min(paid):.0f} us; half of it: "
              f"{min(paid) / 2:.0f} us (abductune.inductor's min_us is 100)")
    else:
        print("no sweep where a search past the list paid")


if __name__ == "__main__":
    main()
