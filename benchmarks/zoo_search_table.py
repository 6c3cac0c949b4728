"""Per-kernel and per-class tables from `abductune replay ... --json` output (the zoo's
leave-one-kernel-out search figures), and where abduction is behind the best baseline.

    python benchmarks/zoo_search_table.py benchmarks/out/zoo_seeded_loko.json [--classes]

Cells: median best / optimum, geomean over the kernel's (or class's) shapes. "behind" lists
every kernel and budget where abduction's geomean is more than 0.5% above the best other
strategy's (the issue-27 target), and the worst single shape per strategy and budget.
Each "behind" line also says whether it is beyond the noise of the repeats: a bootstrap
(`BOOT` draws, seed 0) resamples each shape's repeats for both strategies, recomputes the
medians and geomeans, and calls it beyond noise where abduction is behind in at least 95% of
the draws (`beyond_noise`). The best other strategy is picked on the observed figures, so
this still flatters the baseline a little.
"""
from __future__ import annotations

import argparse
import json
import lzma
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


BOOT = 2000


def geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def _boot_geomeans(shapes: list[tuple[list[float], float]], rng) -> "np.ndarray":
    """BOOT bootstrap geomeans of median best / optimum over shapes (each shape's repeats
    resampled with replacement)."""
    import numpy as np

    logs = np.zeros(BOOT)
    for bests, opt in shapes:
        b = np.asarray(bests)
        draws = b[rng.integers(0, len(b), size=(BOOT, len(b)))]
        logs += np.log(np.median(draws, axis=1) / opt)
    return np.exp(logs / len(shapes))


def beyond_noise(mine: list[tuple[list[float], float]], other: list[tuple[list[float], float]],
                 seed: int = 0) -> float:
    """The share of bootstrap draws in which `mine`'s geomean is above `other`'s."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return float(np.mean(_boot_geomeans(mine, rng) > _boot_geomeans(other, rng)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--classes", action="store_true", help="group by kernel class instead of kernel")
    args = ap.parse_args()
    from abductune.datasets.zoo import kernel_class, zoo_kernels

    cls = {k: kernel_class(v[0]) for k, v in zoo_kernels().items()}
    path = Path(args.json)
    # results kept compressed (benchmarks/results/session26/*.json.xz) read the same
    d = json.loads(lzma.decompress(path.read_bytes()) if path.suffix == ".xz" else path.read_text())
    cells = d["cells"]
    # a dataset's label is its shape alone where that is unique: its kernel is its folder
    kernel_of = {lab: Path(path).parent.name for path, lab in zip(d["datasets"], d["labels"])}
    strategies = list(dict.fromkeys(c["strategy"] for c in cells))
    budgets = sorted({c["budget"] for c in cells})
    group = defaultdict(list)  # (group, strategy, budget) -> ratios
    reps = defaultdict(list)  # (group, strategy, budget) -> (each repeat's best, optimum) per shape
    worst = defaultdict(lambda: (0.0, ""))
    for c in cells:
        k = kernel_of.get(c["dataset"], c["dataset"].split("/")[0])
        g = cls.get(k, "?") if args.classes else k
        group[(g, c["strategy"], c["budget"])].append(c["median_ratio"])
        if c.get("bests_ms"):
            reps[(g, c["strategy"], c["budget"])].append((c["bests_ms"], c["optimum_ms"]))
        w = worst[(c["strategy"], c["budget"])]
        if c["median_ratio"] > w[0]:
            worst[(c["strategy"], c["budget"])] = (c["median_ratio"], f"{k} {c['dataset'].split('/')[-1]}")
    names = sorted({g for g, _, _ in group})
    print("| " + ("class" if args.classes else "kernel") + " | " +
          " | ".join(f"{s} {b}" for b in budgets for s in strategies) + " |")
    print("|---" * (1 + len(budgets) * len(strategies)) + "|")
    behind, real = [], 0
    for g in names:
        row = []
        for b in budgets:
            vals = {s: geomean(group[(g, s, b)]) for s in strategies if group[(g, s, b)]}
            for s in strategies:
                row.append(f"{vals[s]:.3f}" if s in vals else "-")
            others = [v for s, v in vals.items() if s != "abduction"]
            if "abduction" in vals and others and vals["abduction"] > min(others) * 1.005:
                best = min((v, s) for s, v in vals.items() if s != "abduction")[1]
                mine, theirs = reps[(g, "abduction", b)], reps[(g, best, b)]
                note = ""
                if mine and theirs and len(mine) == len(theirs):
                    share = beyond_noise(mine, theirs)
                    real += share >= 0.95
                    note = f" ({'beyond noise' if share >= 0.95 else 'within noise'}: behind in {share:.0%} of draws)"
                behind.append(f"{g} at {b}: abduction {vals['abduction']:.3f}, best other {min(others):.3f} "
                              f"({best}){note}")
        print(f"| {g} | " + " | ".join(row) + " |")
    print("\nbehind the best baseline by more than 0.5%:" + (f" {len(behind)} cells, {real} beyond noise"
                                                             if behind else " none"))
    for line in behind:
        print(f"- {line}")
    print("\nworst shape:")
    for (s, b), (r, ds) in sorted(worst.items(), key=lambda t: (t[0][1], t[0][0])):
        print(f"- {s} at {b}: {r:.3f} ({ds})")


if __name__ == "__main__":
    main()
