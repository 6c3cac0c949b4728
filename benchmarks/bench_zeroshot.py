"""Zero-shot configs (no measurement), leave-one-kernel-out by default (`--holdout`), on recorded datasets.

    python benchmarks/bench_zeroshot.py [DATASETS ...] [--json benchmarks/results/zeroshot.json]

DATASETS: files, folders, 'bundled' (the default: our H100 recordings of the built-in suite),
'zoo' or 'zoo:<class or kernel>' (`abductune.datasets.paths.expand_dataset_args`).

For each recorded shape, each source names one config without measuring anything, using only
knowledge learned without the scored kernel (`--holdout kernel`, the default; `shape`: without
the scored shape); its recorded time over the shape's optimum is the score:
- theory: what `predict` serves (the theory store's rules, or the shipped ranker for matmuls;
  where those would extrapolate on the kernel's space, the kernel's recorded default, else its
  first listed config: `theory_source` "default");
- nearest shape: the best config of the nearest other shape of the same kernel (log2 distance
  of the dims), reused exactly: what caching schedules rather than rules does;
- observed: the observed database with this shape's rules left out (none left: "-");
- heuristics: the first registry heuristic that fires;
- fixed[0]: the first config of the kernel's own list; default: the space's default;
- nvidia: NVIDIA's analytic GEMM model's top-1 (nvMatmulHeuristics, target TRITON; matmuls on
  GPUs it describes, `heuristics/nvidia.py`), and nvidia_top8: the best recorded of its top 8.
  It learns nothing from any dataset. Without the package these columns are "-".
- nvidia_reranked: NVIDIA's top 8 ordered by the shipped ranker refitted under the same
  holdout (`heuristics.nvidia_estimate.reranked`): the model proposes, the ranker chooses;
  nvidia_tile: the ranker's first config with the output tile of NVIDIA's top-1
  (`ranker_shipped.rank(..., nvidia=True)`): the model chooses the tile, the ranker the rest.
- checked: the theory column after the compile check `predict --kernel` runs where the kernel
  is at hand (`theory.check.first_clean` over `zero_shot`'s answers: a config that spills
  heavily is relieved, one that fails to compile passed over for the next answer). The compiler here is the dataset's
  own record of the config (its registers, spills and compile status, which a compile-only run of
  the same toolchain reproduces); a config the dataset did not record passes, as nothing is known
  against it, and a config that failed only at run time (a wrong result) passes too, as a
  compile cannot see that. It measures nothing.
- theory_at_nvidia: the theory column on the shapes NVIDIA's model answers (the like-for-like
  comparison with its top-1).
Rows: each kernel, then each kernel class ("class matmul", ...), then all; with `--group
LABEL=KERNEL,KERNEL,...` (repeatable) also "LABEL class ..." and "LABEL all" over those kernels
(e.g. development and held-out kernels side by side); `--skip KERNEL,...` leaves kernels out.
A cell is the geomean of recorded time / the shape's optimum (worst); "n infeasible" counts
configs recorded as failing (for nvidia_top8: shapes where all eight failed), "n unrecorded"
configs the dataset has no time for (sampled zoo datasets).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def cell(rs: list[dict], c: str, worst: str = "worst ") -> tuple[str, dict | None]:
    """Column `c` over rows `rs`: the table's cell (geomean, then the worst, the shapes covered
    when not all, failed and unrecorded counts) and its summary (None where no row has a value)."""
    xs = [r[c] for r in rs if r.get(c) is not None]
    bad = sum(r["state"].get(c) == "infeasible" for r in rs)
    unrec = sum(r["state"].get(c) == "unrecorded" for r in rs)
    notes = (f", {bad} infeasible" if bad else "") + (f", {unrec} unrecorded" if unrec else "")
    if not xs:
        return "-" + (f" ({notes[2:]})" if notes else ""), None
    g = math.exp(sum(map(math.log, xs)) / len(xs))
    text = f"{g:.3f} ({worst}{max(xs):.2f}" + (f", {len(xs)}/{len(rs)}" if len(xs) < len(rs) else "") + notes + ")"
    return text, {"geomean": g, "worst": max(xs), "covered": len(xs), "infeasible": bad, "unrecorded": unrec}


def parse_groups(specs: list[str]) -> dict[str, set[str]]:
    """{label: kernel names} from "LABEL=K1,K2,..." arguments."""
    out: dict[str, set[str]] = {}
    for spec in specs:
        label, sep, names = spec.partition("=")
        if not sep or not label or not names:
            sys.exit(f"error: --group takes LABEL=KERNEL,KERNEL,... (got {spec!r})")
        out.setdefault(label, set()).update(k for k in names.split(",") if k)
    return out


# recorded statuses a compile-only check reproduces: the compiler refused it, it asked for more
# shared memory than the GPU has, or ptxas did not finish
COMPILE_VISIBLE = ("compile_error", "resource_error", "timeout")


def recorded_compiler(ds):
    """A `compile_fn` for `theory.check.first_clean` that answers from `ds`'s records."""
    from abductune.measurement import Status

    facts = {}
    for m in ds.records:
        st = Status(m.status).value
        facts[tuple(sorted(m.config.items()))] = {
            "status": st if st in COMPILE_VISIBLE else "ok", "registers": m.registers,
            "spills": m.spills or 0, "error": m.error or st}

    def compile_fn(_spec, cfg, _problem, _arch):
        return facts.get(tuple(sorted(cfg.items())), {"status": "ok", "registers": None, "spills": 0, "error": ""})
    return compile_fn


def nearest(problem, others):
    """The one of `others` (anything with a `.problem`) nearest `problem` in log2 of its dims."""
    def dist(x):
        return sum(abs(math.log2(max(1, x.problem.dims[k])) - math.log2(max(1, v))) for k, v in problem.dims.items())
    return min(others, key=dist) if others else None


def first_seed(report, source: str, skip=("nvidia_model",)):
    """The config of the first seed `source` ("observed", "registry") put in a SeedReport;
    the NVIDIA model (`skip`) has a column of its own, so "heuristics" stays our rules."""
    return next((f.get("config") for f in report.fired if f.get("source") == source
                 and f.get("status") == "seed" and f.get("name") not in skip), None)


def nvidia_configs(problem, space, k):
    """The NVIDIA model's top `k` realized in `space`, [] when it cannot serve the problem."""
    from abductune.errors import AbductuneError
    from abductune.heuristics import nvidia
    if not nvidia.available() or nvidia.why_not(problem) is not None:
        return []
    try:
        return list(nvidia.nvidia_topk(problem, space, k))
    except AbductuneError:
        return []


def ranked_in_nvidia_tile(problem, space, held):
    """The shipped ranker's first config within NVIDIA's top-1 output tile (None where NVIDIA's
    model or the ranker cannot serve the problem)."""
    from abductune.errors import AbductuneError
    from abductune.heuristics import ranker_shipped

    if ranker_shipped.why_not(problem, space) is not None:
        return None
    try:
        got = ranker_shipped.rank(problem, space, exclude=held, nvidia=True)
    except AbductuneError:
        return None
    return got.configs[0] if got.in_tile else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("datasets", nargs="*", default=["bundled"],
                    help="files, folders, 'bundled', 'zoo' or 'zoo:<class or kernel>'")
    ap.add_argument("--json", default=None)
    ap.add_argument("--group", action="append", default=[], metavar="LABEL=KERNEL,...",
                    help="also summarize these kernels under LABEL, per class and all (repeatable)")
    ap.add_argument("--skip", default="", metavar="KERNEL,...", help="kernels left out of every row")
    ap.add_argument("--holdout", choices=("kernel", "shape"), default="kernel",
                    help="what the theory, observed and ranker columns must not know: every shape of the "
                         "scored kernel (leave-one-kernel-out, the figure that counts) or only the scored shape")
    args = ap.parse_args()
    groups = parse_groups(args.group)
    skip = {k for k in args.skip.split(",") if k}

    from abductune.datasets.format import read_dataset
    from abductune.datasets.paths import expand_dataset_args
    from abductune.heuristics import seed_configs
    from abductune.heuristics.harvest import observation_from_dataset
    from abductune.heuristics.nvidia_estimate import reranked
    from abductune.problem import Holdout
    from abductune.theory.check import first_clean
    from abductune.theory.store import packaged_book
    from abductune.theory.store.predict import zero_shot

    book = packaged_book()
    from abductune.errors import AbductuneError
    try:
        data = [read_dataset(p) for p in expand_dataset_args(args.datasets or ["bundled"])]
    except AbductuneError as e:
        sys.exit(f"error: {e}")
    obs = [observation_from_dataset(d) for d in data]
    kept = [i for i, o in enumerate(obs) if o.problem.kernel not in skip]
    data, obs = [data[i] for i in kept], [obs[i] for i in kept]
    rows = []
    for ds, o in zip(data, obs):
        space, pb = o.space, o.problem

        def ratio(cfg):
            if cfg is None:
                return None
            t = o.time_of(cfg)
            return (t / o.optimum) if t is not None and math.isfinite(t) else None

        def state(cfg):
            if cfg is None:
                return None
            t = o.time_of(cfg)
            return "unrecorded" if t is None else ("ok" if math.isfinite(t) else "infeasible")
        held = Holdout(pb, args.holdout)
        fixed = (ds.meta.get("fixed_configs") or [None])[0]
        # the kernel's own config, served where the learned sources would extrapolate on its space
        # what `predict` serves is the first answer; the compile check takes the first that passes
        answers = zero_shot(pb, space, book=book, exclude=held, default=ds.meta.get("default_config") or fixed,
                            listed=ds.meta.get("fixed_configs") or ())
        p = answers[0] if answers else None
        chk = first_clean(type("Spec", (), {"space": staticmethod(lambda: space)}), pb, answers,
                          compile_fn=recorded_compiler(ds))
        chk_cfg = chk.config if chk is not None else None
        near = nearest(pb, [x for x in obs if x.problem.kernel == pb.kernel and x is not o])
        near_cfg = near.ranked(1)[0] if near else None
        rep = seed_configs(pb, space, pb.hardware, exclude=held)
        observed, heur = first_seed(rep, "observed"), first_seed(rep, "registry")
        nv8 = nvidia_configs(pb, space, 8)
        nv8_ratios = [r for r in map(ratio, nv8) if r is not None]
        nv8_state = (None if not nv8 else "ok" if nv8_ratios else
                     "infeasible" if any(state(c) == "infeasible" for c in nv8) else "unrecorded")
        rer = (reranked(pb, space, 8, exclude=held) or [None])[0]
        tiled = ranked_in_nvidia_tile(pb, space, held)
        default = ds.meta.get("default_config") or space.default()
        rows.append({"kernel": pb.kernel, "shape": ds.name,
                     "theory": ratio(p.config if p else None), "theory_rule": p.describe() if p else None,
                     "theory_source": p.source if p else None,
                     "checked": ratio(chk_cfg), "checked_config": chk_cfg,
                     "nearest_shape": ratio(near_cfg), "nearest": near.name if near else None,
                     "observed": ratio(observed), "heuristics": ratio(heur), "fixed_first": ratio(fixed),
                     "default": ratio(default),
                     "nvidia": ratio(nv8[0] if nv8 else None), "nvidia_top8": min(nv8_ratios, default=None),
                     "nvidia_config": nv8[0] if nv8 else None, "nvidia_k": len(nv8),
                     "nvidia_reranked": ratio(rer), "nvidia_reranked_config": rer,
                     "nvidia_tile": ratio(tiled), "nvidia_tile_config": tiled,
                     "kernel_class": pb.kernel_class,
                     "state": {"theory": state(p.config if p else None), "checked": state(chk_cfg),
                               "nearest_shape": state(near_cfg),
                               "observed": state(observed), "heuristics": state(heur),
                               "fixed_first": state(fixed), "default": state(default),
                               "nvidia": state(nv8[0] if nv8 else None), "nvidia_top8": nv8_state,
                               "nvidia_reranked": state(rer), "nvidia_tile": state(tiled)}})
        r = rows[-1]
        r["theory_at_nvidia"] = r["theory"] if r["nvidia"] is not None else None
        r["state"]["theory_at_nvidia"] = r["state"]["theory"] if r["nvidia"] is not None else None
    cols = ["theory", "checked", "nearest_shape", "observed", "heuristics", "fixed_first", "default", "nvidia",
            "nvidia_top8", "nvidia_reranked", "nvidia_tile", "theory_at_nvidia"]
    by_kernel: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_kernel[r["kernel"]].append(r)
    for r in rows:
        by_kernel[f"class {r['kernel_class']}"].append(r)
    by_kernel["all"] = rows
    for label, members in groups.items():
        mine = [r for r in rows if r["kernel"] in members]
        for r in mine:
            by_kernel[f"{label} class {r['kernel_class']}"].append(r)
        if mine:
            by_kernel[f"{label} all"] = mine
    summary = {}
    print("| kernel | shapes | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for k, rs in by_kernel.items():
        cells = []
        summary[k] = {}
        for c in cols:
            text, stats = cell(rs, c)
            cells.append(text)
            if stats is not None:
                summary[k][c] = stats
        print(f"| {k} | {len(rs)} | " + " | ".join(cells) + " |")
    if args.json:
        record = {"holdout": args.holdout, "groups": {k: sorted(v) for k, v in groups.items()},
                  "skipped": sorted(skip), "rows": rows, "summary": summary}
        Path(args.json).write_text(json.dumps(record, indent=1))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
