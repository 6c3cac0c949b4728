"""What a blind sample of k configs finds on the recorded data when it leans one way or another,
with no search behind it: the expected best / optimum of k draws without replacement, per kernel
class (geomean over shapes), for

- `uniform`: every config as likely;
- `centre`: each ordered parameter of three values or more weighted by
  `search.abduction.model.centre_weights` (the middle of its range; `--roles` limits which
  parameters by role, as abduction's `centre_roles` option does; none set: every one);
- `learned`: num_warps and num_stages weighted by how much more often each value sits among a
  shape's configs within 10% of its optimum than in its space, learned on the other kernels
  (leave-one-kernel-out).

Used in session 35 to ask whether the space-filling draws should lean anywhere before changing
the engine (docs/PERFORMANCE.md). Datasets: the zoo and the bundled data by default, or
`--datasets GLOB ...` (Kernel Tuner caches included).

    python benchmarks/sampling_prior.py [--k 8] [--roles warps,stages] [--draws 400] [--json OUT]
"""
from __future__ import annotations

import argparse
import collections
import glob
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

LEARNED = ("num_warps", "num_stages")
GOOD = 1.10  # a config within this of its shape's optimum counts as good for `learned`


def _load(paths: list[Path]) -> dict[str, list[tuple[str, str, object, list]]]:
    from abductune.datasets.public import load_any

    out: dict[str, list] = collections.defaultdict(list)
    for p in paths:
        ds = load_any(p)
        out[ds.problem.kernel].append((p.name, ds.problem.kernel_class, ds.space(),
                                       [(dict(r.config), r.time_ms) for r in ds.records]))
    return out


def _lifts(data: dict, kernels: list[str]) -> dict[str, dict]:
    acc: dict[str, dict] = {p: collections.defaultdict(list) for p in LEARNED}
    for k in kernels:
        for _, _, _, recs in data[k]:
            ok = [(c, t) for c, t in recs if t]
            if not ok:
                continue
            best = min(t for _, t in ok)
            for p in LEARNED:
                vals = collections.Counter(c.get(p) for c, _ in recs if p in c)
                if len(vals) < 2:
                    continue
                good = collections.Counter(c.get(p) for c, t in ok if t <= GOOD * best and p in c)
                ng, n = sum(good.values()), sum(vals.values())
                for v, cnt in vals.items():  # smoothed log lift of the value among the good configs
                    acc[p][v].append(math.log(((good[v] + 0.5) / (ng + 0.5 * len(vals))) / (cnt / n)))
    return {p: {v: sum(x) / len(x) for v, x in d.items()} for p, d in acc.items()}


def _expected_best(times: np.ndarray, weights: np.ndarray, k: int, draws: int, rng: np.random.Generator) -> float:
    """Geomean over `draws` samples of the best of k configs drawn without replacement with
    probability proportional to `weights` (failed configs have time inf: 10x the optimum if
    nothing ran)."""
    best = np.nanmin(np.where(np.isfinite(times), times, np.nan))
    p = weights / weights.sum()
    k = min(k, len(times))
    out = []
    for _ in range(draws):
        idx = rng.choice(len(times), size=k, replace=False, p=p)
        got = times[idx]
        got = got[np.isfinite(got)]
        out.append((got.min() if len(got) else 10 * best) / best)
    return float(np.exp(np.mean(np.log(out))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="*", default=None)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--roles", default="", help="roles `centre` weights (default: every ordered parameter)")
    ap.add_argument("--draws", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    from abductune.search.abduction.model import centre_weights

    if a.datasets:
        paths = sorted({Path(p) for g in a.datasets for p in glob.glob(g, recursive=True)})
    else:
        from abductune.datasets.zoo import zoo_kernels

        paths = [p for ps in zoo_kernels().values() for p in ps]
        paths += sorted((ROOT / "src/abductune/datasets/data/h100").glob("*/*.jsonl.gz"))
    roles = {r for r in a.roles.split(",") if r}
    data = _load(paths)
    rng = np.random.default_rng(a.seed)
    rows = []
    for kernel in sorted(data):
        lifts = _lifts(data, [k for k in data if k != kernel])
        for name, cls, space, recs in data[kernel]:
            times = np.array([t if t else np.inf for _, t in recs], dtype=float)
            if not np.isfinite(times).any():
                continue
            centre = np.ones(len(recs))
            learned = np.ones(len(recs))
            for p in space.params:
                if p.ordered and len(p.values) >= 3 and (not roles or p.role in roles):
                    w = centre_weights(len(p.values))
                    centre *= np.array([w[p.index(c[p.name])] if p.name in c else 1.0 for c, _ in recs])
            for pname in LEARNED:
                learned *= np.exp([lifts[pname].get(c.get(pname), 0.0) for c, _ in recs])
            rows.append({"kernel": kernel, "shape": name, "class": cls,
                         **{label: _expected_best(times, w, a.k, a.draws, rng)
                            for label, w in (("uniform", np.ones(len(recs))), ("centre", centre),
                                             ("learned", learned))}})
    g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))  # noqa: E731
    print(f"best of {a.k} blind draws / optimum, geomean over shapes (centre roles: {a.roles or 'every'})")
    print("| class | shapes | uniform | centre | learned |\n|---|---|---|---|---|")
    classes = sorted({r["class"] for r in rows}) + ["all"]
    summary = {}
    for c in classes:
        rs = [r for r in rows if c == "all" or r["class"] == c]
        summary[c] = {m: g([r[m] for r in rs]) for m in ("uniform", "centre", "learned")}
        print(f"| {c} | {len(rs)} | " + " | ".join(f"{summary[c][m]:.3f}" for m in ("uniform", "centre", "learned")) + " |")
    if a.json:
        Path(a.json).write_text(json.dumps({"k": a.k, "roles": sorted(roles), "draws": a.draws, "seed": a.seed,
                                            "summary": summary, "rows": rows}, indent=1))
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
