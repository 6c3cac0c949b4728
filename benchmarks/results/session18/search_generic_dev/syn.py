import sys, json, statistics, math
sys.path.insert(0, "/work/main/tests"); sys.path.insert(0, "/work/main/src")
import logging; logging.disable(logging.WARNING)
from test_generic_seeded import generic_dataset
from abductune.evaluate import compare_on_dataset
variants = json.loads(sys.argv[1]); strategies = sys.argv[2].split(",")
lands = range(int(sys.argv[3]), int(sys.argv[4])); reps = int(sys.argv[5])
got = {}
for s in lands:
    ds, seeds = generic_dataset(s)
    for name, o in variants.items():
        for st in strategies:
            if st != "abduction" and name != list(variants)[0]:
                continue
            for c in compare_on_dataset(ds, [st], [8, 16, 32], reps, seeds_fn=lambda d: seeds, options={st: o}):
                got.setdefault((name if st == "abduction" else st, c.budget), []).append(c.median_ratio)
for k in sorted(got): print(k, round(statistics.geometric_mean(got[k]), 4))
