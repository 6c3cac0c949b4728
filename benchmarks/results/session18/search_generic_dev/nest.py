import json, sys, statistics, math
names = sys.argv[1:]
d = {n: json.load(open(f"/tmp/gdev/{n}.json")) for n in names}
ks = list(d[names[0]])
def group(k):
    for g in ("convolution", "dedispersion", "gemm", "pnpoly", "coulomb"):
        if g in k: return g
    return {"RTX_2080_Ti": "gemm", "RTX_Titan": "gemm", "RTX_3060_laptop": "pnpoly"}[k]
groups = sorted({group(k) for k in ks})
B = ("8", "16", "64")
def score(n, keys):  # mean log over datasets, repeats, budgets
    return statistics.fmean(math.log(x) for k in keys for b in B for x in d[n][k][b])
held = {}
for g in groups:
    train = [k for k in ks if group(k) != g]
    best = min(names, key=lambda n: score(n, train))
    held[g] = best
    print("held out", g, "->", best, {n: round(math.exp(score(n, train)), 4) for n in names})
for b in B:
    nested = math.exp(statistics.fmean(math.log(statistics.median(d[held[group(k)]][k][b])) for k in ks))
    per = {n: round(math.exp(statistics.fmean(math.log(statistics.median(d[n][k][b])) for k in ks)), 4) for n in names}
    print(b, "nested", round(nested, 4), per)
