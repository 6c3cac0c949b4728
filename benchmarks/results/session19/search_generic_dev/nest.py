import json, sys, statistics, math
from pathlib import Path
names = sys.argv[1].split(","); refs = sys.argv[2].split(",") if len(sys.argv) > 2 else []
d = {n: json.load(open(Path(__file__).parent / f"{n}.json")) for n in names + refs}
ks = list(d[names[0]]); kern = lambda s: s.split("/")[0]
groups = sorted({kern(k) for k in ks}); B = ("8", "16", "64")
def score(n, keys): return statistics.fmean(math.log(x) for k in keys for b in B for x in d[n][k][b])
def gm(n, keys, b): return math.exp(statistics.fmean(math.log(statistics.median(d[n][k][b])) for k in keys))
held = {}
for g in groups:
    train = [k for k in ks if kern(k) != g]
    held[g] = min(names, key=lambda n: score(n, train))
    tk = [k for k in ks if kern(k) == g]
    print(f"held out {g:28s} -> {held[g]:5s}", " ".join(f"{n}:" + "/".join(f"{gm(n, tk, b):.3f}" for b in B) for n in names + refs))
for b in B:
    nested = math.exp(statistics.fmean(math.log(statistics.median(d[held[kern(k)]][k][b])) for k in ks))
    print(b, "nested", round(nested, 4), {n: round(gm(n, ks, b), 4) for n in names + refs})
