"""How good the shipped ranker's head is as a place to look, leave-one-kernel-out: per zoo
kernel, the geomean over its shapes of (the best of the ranker's first 3 configs, refitted
without the kernel) / the optimum, beside the expected best of 3 configs drawn at random from
the recorded ones. What abduction's exploring prior (`Knowledge.prior`) was judged on: the
shipped ranker as the prior uses it (`benchmarks/bench_ranker.py`'s *_top8 columns judge a
ranker fitted afresh, by its first eight).

    python benchmarks/ranker_head_check.py [--k 3] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    from abductune.datasets.public import load_any
    from abductune.datasets.zoo import zoo_kernels
    from abductune.errors import AbductuneError
    from abductune.evaluate import expected_best_random
    from abductune.heuristics import ranker_shipped
    from abductune.problem import Holdout

    gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))  # noqa: E731
    rows = {}
    for kernel, paths in sorted(zoo_kernels().items()):
        head, rand = [], []
        try:
            for p in paths:
                ds = load_any(p)
                sp = ds.space()
                opt = ds.optimum().time_ms
                times = {sp.key(m.config): m.time_ms for m in ds.ok_records()}
                worst = max(times.values())
                order = ranker_shipped.rank(ds.problem, sp, exclude=Holdout(ds.problem, "kernel")).configs
                head.append(min(times.get(sp.key(c), worst) for c in order[:a.k]) / opt)
                rand.append(expected_best_random(list(times.values()), a.k) / opt)
        except AbductuneError as e:
            print(f"{kernel:34s} not ranked: {e}")
            continue
        rows[kernel] = {"ranker_head": gm(head), "random": gm(rand)}
        print(f"{kernel:34s} ranker's best of {a.k} {gm(head):.3f}   random {a.k} {gm(rand):.3f}")
    wins = sum(r["ranker_head"] < r["random"] for r in rows.values())
    print(f"the ranker's head ahead on {wins} of {len(rows)} kernels")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
