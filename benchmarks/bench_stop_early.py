"""What abduction's `stop_early` saves and costs on replay of the bundled H100 data: every
dataset, leave-one-shape-out seeds, the same searches with and without the stop rule.

    python benchmarks/bench_stop_early.py [--repeats 10] [--budget 32] [--noise on|off] [--json out.json]

Figure: mean evaluations spent, and winner true time / optimum (geomean over shapes and
repeats) per kernel; the worst single search's loss against its full-budget twin. Prints a
table last.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--budget", type=int, default=32)
    ap.add_argument("--noise", choices=("on", "off"), default="on")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    from bench_abduction import loo_seeds

    from abductune.datasets.paths import expand_dataset_args
    from abductune.datasets.format import read_dataset
    from abductune.measure.replay import NoiseModel, ReplayEvaluator
    from abductune.search import Budget, make_strategy, run

    rows: dict[str, list[dict]] = {}
    for path in expand_dataset_args(["bundled"]):
        ds = read_dataset(path)
        seeds, _ = loo_seeds(ds)
        opt = ds.optimum().time_ms
        for rep in range(args.repeats):
            out = {}
            for early in (False, True):
                noise = NoiseModel.from_study() if args.noise == "on" else None
                ev = ReplayEvaluator(ds, noise=noise, seed=rep)
                res = run(make_strategy("abduction", seed=rep, stop_early=early), ev, Budget(args.budget), seeds,
                          problem=ds.problem)
                best = min((m for m in res.history if m.ok), key=lambda m: m.time_ms)
                out["early" if early else "full"] = {"evaluations": res.evaluations,
                                                     "ratio": ev.true_time(best.config) / opt}
            rows.setdefault(ds.problem.kernel, []).append({"shape": path.stem, "repeat": rep, **out})
    gm = lambda xs: math.exp(statistics.fmean(math.log(x) for x in xs))  # noqa: E731
    table = []
    for kernel, rs in rows.items():
        table.append({"kernel": kernel, "shapes": len({r["shape"] for r in rs}),
                      "evals_full": statistics.fmean(r["full"]["evaluations"] for r in rs),
                      "evals_early": statistics.fmean(r["early"]["evaluations"] for r in rs),
                      "ratio_full": gm([r["full"]["ratio"] for r in rs]),
                      "ratio_early": gm([r["early"]["ratio"] for r in rs]),
                      "worst_loss": max(r["early"]["ratio"] / r["full"]["ratio"] for r in rs)})
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "table": table, "rows": rows}, indent=1))
    print(f"| kernel | shapes | evaluations full | stop_early | winner/opt full | stop_early | worst early/full |")
    print("|---|---|---|---|---|---|---|")
    for t in table:
        print(f"| {t['kernel']} | {t['shapes']} | {t['evals_full']:.1f} | {t['evals_early']:.1f} | "
              f"{t['ratio_full']:.4f} | {t['ratio_early']:.4f} | {t['worst_loss']:.3f} |")


if __name__ == "__main__":
    main()
