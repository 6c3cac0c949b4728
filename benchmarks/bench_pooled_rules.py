"""Zero-shot theory predictions on the zoo when the rules are learned from the built-in suite
*and* the other zoo kernels (leave-one-kernel-out), against learning from the built-in suite
alone (what ships). A one-off question: do rules pooled over different tilings transfer?

    python benchmarks/bench_pooled_rules.py      # CPU, about 6 minutes

Prints, per zoo kernel, the geomean and worst of the recorded time of the first prediction over
the shape's optimum, and the geomean over every shape a rule answers.
"""
from __future__ import annotations

import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def main() -> None:
    from abductune.datasets.bundled import bundled_datasets
    from abductune.datasets.zoo import zoo_datasets
    from abductune.heuristics.harvest import observations_from_datasets
    from abductune.problem import Holdout, kernel_family
    from abductune.theory.store import learn

    zoo = observations_from_datasets(zoo_datasets())
    pool = observations_from_datasets(bundled_datasets()) + zoo
    books: dict[tuple, object] = {}
    ratios: dict[str, list[float]] = defaultdict(list)
    for o in zoo:
        cls = o.classification()
        key = (kernel_family(o.problem.kernel), cls.kernel_class)
        if key not in books:
            books[key] = learn(pool, exclude=Holdout(o.problem, "kernel"), only=cls)
        preds = books[key].predictions(o.problem, o.space)
        if preds:
            t = o.time_of(preds[0].config)
            ratios[o.problem.kernel].append(t / o.optimum if t is not None and math.isfinite(t) else math.inf)
    every = []
    for k, rs in sorted(ratios.items()):
        fin = [r for r in rs if math.isfinite(r)]
        every += fin
        print(f"{k:28s} {len(rs)} shapes  geomean {math.exp(sum(map(math.log, fin)) / len(fin)):.3f}  worst {max(rs):.2f}")
    print(f"all: {len(every)} shapes, geomean {math.exp(sum(map(math.log, every)) / len(every)):.3f}")


if __name__ == "__main__":
    main()
