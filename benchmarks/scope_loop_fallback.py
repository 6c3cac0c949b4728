"""Would rules learned on other kernels of the same kind (`reduction`: loop or either) serve row
kernels better than the observed database where every packaged theory rule is declined? Judged
by nested leave-one-kernel-out over the zoo's row kernels (the two session-19 held-out kernels
excluded): for each kernel, the choice between the two next sources is made on the other
kernels' declined shapes (each scored by a book learned without it and without the outer
kernel), then applied to the kernel's own. In-sample: every kernel here was looked at before.

    python benchmarks/scope_loop_fallback.py [--json benchmarks/results/session19/zeroshot_scope_loop_fallback.json]
"""
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from abductune.datasets.paths import expand_dataset_args
from abductune.datasets.format import read_dataset
from abductune.heuristics.harvest import observation_from_dataset
from abductune.problem import Holdout
from abductune.theory.store import packaged_book, predict, learn
from abductune.theory.store import scope
HELD = {"flaggems_var_mean_bf16", "flaggems_softmax_bwd_bf16"}
data = [read_dataset(p) for p in expand_dataset_args(["zoo:row_reduction"])]
data = [d for d in data if d.problem.kernel not in HELD]
obs = [observation_from_dataset(d) for d in data]
kind = {o.problem.kernel: scope.structure(o.problem, o.space) for o in obs}
book = packaged_book()
rows = []  # declined problems: (kernel, current ratio, {excluded kernel set -> ratio of same-kind book})
cache = {}
def samekind(o, excl):
    key = (kind[o.problem.kernel], frozenset(excl))
    if key not in cache:
        cache[key] = learn([x for x in obs if x.problem.kernel not in excl and kind[x.problem.kernel] == key[0]])
    p = cache[key].predict(o.problem, o.space)
    if p is None: return None
    t = o.time_of(p.config)
    return t / o.optimum if t else None
for ds, o in zip(data, obs):
    cur = predict(o.problem, o.space, book=book, exclude=Holdout(o.problem, "kernel"), default=ds.meta.get("default_config"))
    if cur.source == "theory" or not cur.declined:  # a rule served: nothing declined it all
        continue
    rows.append((o, o.time_of(cur.config) / o.optimum))
kernels = sorted({o.problem.kernel for o, _ in rows})
print("declined:", [(o.problem.kernel, o.problem.dims, round(r, 3)) for o, r in rows])
g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
out_cur, out_new, report = [], [], []
for k in kernels:
    inner = [(o, r) for o, r in rows if o.problem.kernel != k]
    if inner:
        a = g([r for _, r in inner])
        b = g([samekind(o, {k, o.problem.kernel}) or r for o, r in inner])
    else:
        a = b = None
    choose = b is not None and b < a
    for o, r in rows:
        if o.problem.kernel != k: continue
        s = samekind(o, {k})
        out_cur.append(r); out_new.append((s or r) if choose else r)
    report.append({"kernel": k, "inner_observed": a, "inner_same_kind": b, "chosen": "same_kind" if choose else "observed",
                   "shapes": [[o.problem.dims, r, samekind(o, {k})] for o, r in rows if o.problem.kernel == k]})
    print(k, "inner cur", a and round(a, 3), "inner samekind", b and round(b, 3), "->", "samekind" if choose else "observed")
print("declined problems:", len(out_cur), "served now", round(g(out_cur), 3), "nested choice", round(g(out_new), 3))
summary = {"declined_problems": len(out_cur), "served_now": g(out_cur), "nested_choice": g(out_new), "kernels": report,
           "kinds": kind}
if "--json" in sys.argv:
    p = Path(sys.argv[sys.argv.index("--json") + 1])
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(summary, indent=1, default=str))
    print("wrote", p)
