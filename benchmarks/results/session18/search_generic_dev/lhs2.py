import sys, math, statistics, numpy as np
from pathlib import Path
sys.path.insert(0, "/work/main/src")
import logging; logging.disable(logging.WARNING)
from abductune.datasets.public import load_any
from abductune.search.abduction.model import latin_hypercube
root = Path("/work/shared/datasets/public")
agg = {"lhs": [], "unif": []}
for p in sorted(root.rglob("*.json.gz")):
    ds = load_any(p); sp = ds.space()
    t = {sp.key(m.config): m.objective for m in ds.records if m.ok}
    worst = max(t.values())
    opt = min(t.values())
    valid = sp.valid_configs()
    rng = np.random.default_rng(1)
    lr, rr = [], []
    for r in range(200):
        l = latin_hypercube(sp, 8, rng)
        lr.append(min(t.get(sp.key(c), worst) for c in l) / opt)
        idx = rng.choice(len(valid), 8, replace=False)
        rr.append(min(t.get(sp.key(valid[i]), worst) for i in idx) / opt)
    agg["lhs"].append(statistics.fmean(map(math.log, lr))); agg["unif"].append(statistics.fmean(map(math.log, rr)))
    print(f"{p.parent.name[:14]:14s} {p.name[:22]:22s} lhs {math.exp(agg['lhs'][-1]):.3f} unif {math.exp(agg['unif'][-1]):.3f}")
print({k: round(math.exp(statistics.fmean(v)), 4) for k, v in agg.items()})
