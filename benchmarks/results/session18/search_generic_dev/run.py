"""Dev harness: abduction variants on the public generic datasets; per-dataset median ratios."""
import json, sys, math, statistics
from pathlib import Path
sys.path.insert(0, "/work/main/src")
from abductune.datasets.public import load_any
from abductune.evaluate import compare_on_dataset
from abductune.cli.replay import _unique_labels
import logging; logging.disable(logging.WARNING)

name, opts, reps, base = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[5])
strategy = sys.argv[4]
root = Path("/work/shared/datasets/public")
paths = sorted(p.resolve() for p in root.rglob("*.json.gz"))
labels = _unique_labels(paths)
out = {}
for p in paths:
    ds = load_any(p)
    cells = compare_on_dataset(ds, [strategy], [8, 16, 64], reps, base, label=labels[p], options={strategy: opts})
    out[labels[p]] = {c.budget: [b / c.optimum_ms for b in c.bests_ms] for c in cells}
json.dump(out, open(f"/tmp/gdev/{name}.json", "w"))
for b in (8, 16, 64):
    g = math.exp(statistics.fmean(math.log(statistics.median(v[b])) for v in out.values()))
    print(name, b, round(g, 4))
