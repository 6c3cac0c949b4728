"""Dev: abduction variant on the zoo kernels that start with no seed (seeded as replay does), base seed 1."""
import sys, json, math, statistics, logging, time; logging.disable(logging.WARNING)
from pathlib import Path
sys.path.insert(0, "/work/main/src")
from abductune.datasets.zoo import zoo_kernels
from abductune.datasets.public import load_any
from abductune.cli.replay import _replay_seeds
from abductune.evaluate import compare_on_dataset
name, opts, reps, kernels = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(",")
strategy = sys.argv[5] if len(sys.argv) > 5 else "abduction"
HELD = {"flaggems_var_mean_bf16", "flaggems_softmax_bwd_bf16"}
zk = zoo_kernels()
out = {}
t0 = time.time()
for k in kernels:
    assert k not in HELD
    for p in zk[k]:
        ds = load_any(p)
        cells = compare_on_dataset(ds, [strategy], [8, 16, 64], reps, 1, seeds_fn=_replay_seeds,
                                   label=f"{k}/{p.name}", options={strategy: opts})
        out[f"{k}/{p.name}"] = {str(c.budget): [b / c.optimum_ms for b in c.bests_ms] for c in cells}
json.dump(out, open(Path(__file__).parent / f"{name}.json", "w"))
for b in ("8", "16", "64"):
    g = math.exp(statistics.fmean(math.log(statistics.median(v[b])) for v in out.values()))
    print(name, b, round(g, 4), f"{time.time()-t0:.0f}s")
