"""The centre of a kernel's own config list as its zero-shot default, judged as `predict` judges
its sources: by the choice's nested leave-one-kernel-out evidence (issue 27; session 30).

For every recorded kernel with a list (`meta.fixed_configs`) the centre is the listed config
nearest (in log2, summed over parameters) to each parameter's middle listed value. For each
held-out kernel K, on the other kernels of its class (their answers learned without K,
`theory/data/sources.json`'s "without" pool), the centre replaces the kernel's own default where
it beat the defaults as `choice._won` requires (by more than 0.5% on the mean, and on more of
those kernels than it lost on); the learned chain is then judged against that fallback as
`choice.order_for` judges it against the default. What is served on K's shapes is compared with
what today's choice serves. No constant is fitted.

    python benchmarks/list_centre_choice.py [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def centre(listed: list[dict]) -> dict:
    """The listed config nearest the middle of each numeric parameter's listed values."""
    mid: dict[str, float] = {}
    for k in sorted({k for c in listed for k in c}):
        vals = sorted({c[k] for c in listed if isinstance(c.get(k), (int, float)) and not isinstance(c.get(k), bool)})
        if vals:
            n = len(vals)
            mid[k] = vals[(n - 1) // 2] if n % 2 else math.sqrt(vals[n // 2 - 1] * vals[n // 2])

    def dist(c: dict) -> float:
        return sum(abs(math.log2(c[k]) - math.log2(m)) for k, m in mid.items()
                   if isinstance(c.get(k), (int, float)) and c[k] > 0 and m > 0)
    return min(listed, key=dist)


def centre_ratios() -> dict[tuple[str, str], float]:
    """(kernel, shape) -> the centre's recorded time over the shape's optimum."""
    from abductune.datasets.format import read_dataset
    from abductune.datasets.paths import expand_dataset_args
    from abductune.heuristics.harvest import observation_from_dataset

    out = {}
    for p in expand_dataset_args(["zoo", "bundled"]):
        ds = read_dataset(p)
        listed = ds.meta.get("fixed_configs") or []
        if len(listed) < 2:
            continue
        o = observation_from_dataset(ds)
        t = o.time_of(centre(listed))
        if t is not None:
            out[(o.kernel, o.name)] = (t if math.isfinite(t) else o.worst) / o.optimum
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    from abductune.theory.store import choice as ch
    from abductune.theory.store.predict import RANKER_CLASSES

    rat = centre_ratios()
    d = ch.load()

    def with_fallback(pool: dict, fb: str) -> dict:
        """The evidence with `fb` ("default" or "centre": the centre where the kernel has one) as the default."""
        out = {}
        for k, e in pool.items():
            r = dict(e["ratios"])
            if fb == "centre":
                r["default"] = [rat.get((k, s), x) for s, x in zip(e["shapes"], r["default"])]
            out[k] = {**e, "ratios": r}
        return out

    rows, per_class = [], {}
    for k, info in sorted(d["kernels"].items()):
        cls = info["class"]
        mine = d["all"].get(k)
        if not mine or not mine["ratios"][ch.DEFAULT]:
            continue
        chain = ("ranker", "theory") if cls in RANKER_CLASSES else ("theory", "ranker")
        others = {j: v for j, v in d["without"].get(k, {}).items() if d["kernels"][j]["class"] == cls}

        def served(fb: str) -> list[float]:
            ev = with_fallback(others, fb)
            order = chain if ev and ch._won(ch._kernel_logs(chain, ev), ch._kernel_logs((), ev)) else ()
            return ch.served(order, with_fallback({k: mine}, fb)[k]["ratios"])
        use_centre = bool(others) and ch._won(ch._kernel_logs((), with_fallback(others, "centre")),
                                              ch._kernel_logs((), others))
        today, new = served("default"), served("centre" if use_centre else "default")
        g0, g1 = statistics.geometric_mean(today), statistics.geometric_mean(new)
        rows.append({"kernel": k, "class": cls, "centre_served": use_centre, "today": g0, "with_centre": g1})
        per_class.setdefault(cls, []).append((math.log(g0), math.log(g1)))
    print("| class | kernels | today (served, geomean over kernels) | with the centre as a fallback |")
    print("|---|---|---|---|")
    for cls, v in sorted(per_class.items()):
        print(f"| {cls} | {len(v)} | {math.exp(statistics.fmean(x for x, _ in v)):.3f} | "
              f"{math.exp(statistics.fmean(y for _, y in v)):.3f} |")
    if a.json:
        Path(a.json).write_text(json.dumps({"protocol": "nested leave-one-kernel-out", "rows": rows}, indent=1))
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
