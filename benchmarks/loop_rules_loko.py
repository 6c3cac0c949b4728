"""Would theory rules learned from the zoo's loop row kernels serve a loop kernel they never saw?

The packaged theory book is learned from the built-in kernels, whose row kernels hold the row
whole; on a kernel that walks the row in tile steps those rules are declined and the observed
database serves. This script learns rules from the zoo's *loop* row kernels only (each tile
over the row `loop` in the kernels' source facts), leaving one kernel out at a time, and scores
the held-out kernel's first prediction against what `predict` serves today (the theory column
of a `bench_zeroshot.py zoo bundled` JSON). Nothing ships from it: it is the check that says
whether learning such rules is worth building.

    python benchmarks/loop_rules_loko.py benchmarks/results/session20/zeroshot_all_final.json
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from abductune.datasets.bundled import shape_name  # noqa: E402
from abductune.datasets.paths import expand_dataset_args  # noqa: E402
from abductune.heuristics.harvest import observations_from_datasets  # noqa: E402
from abductune.theory.store import learn, scope  # noqa: E402


def main() -> None:
    served = {(r["kernel"], r["shape"]): r["theory"] for r in json.loads(Path(sys.argv[1]).read_text())["rows"]}
    obs = observations_from_datasets(expand_dataset_args(["zoo:row_reduction"]))
    loop = [o for o in obs if scope.structure(o.problem, o.space) == scope.LOOP]
    new, cur = [], []
    print("| held-out kernel | shape | loop rules, leave-one-kernel-out | served today |\n|---|---|---|---|")
    for held in sorted({o.problem.kernel for o in loop}):
        book = learn([o for o in loop if o.problem.kernel != held])
        for o in (o for o in loop if o.problem.kernel == held):
            preds = book.judged(o.problem, o.space)[0]
            t = o.time_of(preds[0].config) if preds else None
            r = t / o.optimum if t else None
            c = served.get((held, shape_name(o.problem.dims)))
            print(f"| {held} | {shape_name(o.problem.dims)} | {r and round(r, 3)} | {c and round(c, 3)} |")
            if r and c:
                new.append(math.log(r))
                cur.append(math.log(c))
    if new:
        print(f"\ngeomean over {len(new)} shapes: loop rules {math.exp(sum(new) / len(new)):.3f}, "
              f"served today {math.exp(sum(cur) / len(cur)):.3f}")


if __name__ == "__main__":
    main()
