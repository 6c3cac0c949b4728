"""Zero-shot configs on shapes no recording has seen, live (issue 8's central claim, on the GPU).

    python benchmarks/gpu/zeroshot_live.py --out zeroshot.json [--deadline-s 540] [--budget 64]
    python benchmarks/gpu/zeroshot_live.py --dry-run        # candidates only, no GPU
    python benchmarks/gpu/zeroshot_live.py --set b ...      # the second held-out set (c: the third)

The shapes are LLM projection and row-kernel shapes of models the bundled data does not
cover (Llama-3-70B, Qwen2-7B, Phi-3-mini) at batch sizes it does not cover, plus a few odd
dims; the script refuses any that is a recorded shape. For each shape, every source names one
config without measuring anything, with the package's shipped knowledge (learned from the 27
recorded H100 shapes, none of them this one):
- theory: the theory store's prediction; checked: the same compiled for the GPU first, a
  config that spills or fails passed over (what `abductune predict` serves by default);
- observed: the observed database's seed;
- heuristics: the first registry heuristic that fires;
- nearest: the best recorded config of the nearest recorded shape, reused exactly;
- fixed[0]: the kernel's own list's first config; default: the space's default.
The reference is the best of a live abduction tune at `--budget` evaluations (no early stop)
and every config of the kernel's own list (what `triton.autotune` would pick from). All
candidates, the reference's configs and torch are then re-timed interleaved in one worker, so
each ratio comes from one run. The reference is not an exhaustive optimum: a zero-shot ratio
below 1 means the prediction beat the tune. Resumable: finished shapes are skipped.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench_zeroshot's helpers

# (kernel, dims): unseen by the bundled recordings (checked at start)
SHAPES = [
    ("matmul_fp16", {"M": 1, "N": 28672, "K": 8192}),      # Llama-3-70B up/gate, decode
    ("matmul_fp16", {"M": 32, "N": 8192, "K": 28672}),     # Llama-3-70B down, batch 32
    ("matmul_fp16", {"M": 256, "N": 18944, "K": 3584}),    # Qwen2-7B up/gate
    ("matmul_fp16", {"M": 2048, "N": 3584, "K": 18944}),   # Qwen2-7B down, prefill
    ("matmul_fp16", {"M": 64, "N": 9216, "K": 3072}),      # Phi-3-mini qkv
    ("matmul_fp16", {"M": 5000, "N": 3072, "K": 3072}),    # odd M
    ("matmul_fp16", {"M": 8192, "N": 8192, "K": 1024}),    # large, short K
    ("matmul_fp16", {"M": 768, "N": 768, "K": 768}),       # small square: under-filled GPU
    ("matmul_fp16", {"M": 1000, "N": 1000, "K": 2000}),    # nothing a power of two
    ("matmul_fp16", {"M": 128, "N": 152064, "K": 3584}),   # Qwen2 LM head
    ("matmul_fp16", {"M": 16384, "N": 2048, "K": 512}),
    ("matmul_fp16", {"M": 4, "N": 4096, "K": 128}),        # tiny: launch-latency bound
    ("softmax_fp16", {"rows": 2048, "cols": 152064}),
    ("softmax_fp16", {"rows": 65536, "cols": 512}),
    ("softmax_fp16", {"rows": 8, "cols": 28672}),
    ("rmsnorm_fp16", {"rows": 1, "cols": 8192}),
    ("rmsnorm_fp16", {"rows": 32768, "cols": 3584}),
    ("rmsnorm_fp16", {"rows": 512, "cols": 5120}),
    ("gelu_mul_fp16", {"numel": 32 * 18944}),
    ("gelu_mul_fp16", {"numel": 2048 * 28672}),
    ("gelu_mul_fp16", {"numel": 1_000_003}),
]
# a second held-out set, fixed before any change made after seeing set A's results
SHAPES_B = [
    ("matmul_fp16", {"M": 1024, "N": 3072, "K": 768}),     # GPT-2 small MLP up
    ("matmul_fp16", {"M": 1024, "N": 768, "K": 768}),      # GPT-2 small attention out
    ("matmul_fp16", {"M": 4096, "N": 4096, "K": 1024}),    # BERT-large FFN-like
    ("matmul_fp16", {"M": 1, "N": 6144, "K": 4096}),       # Llama-3-8B qkv, decode
    ("matmul_fp16", {"M": 16, "N": 128256, "K": 4096}),    # Llama-3-8B LM head, batch 16
    ("matmul_fp16", {"M": 512, "N": 14336, "K": 4096}),    # Mixtral expert up
    ("matmul_fp16", {"M": 96, "N": 12288, "K": 4096}),
    ("matmul_fp16", {"M": 2560, "N": 2560, "K": 2560}),    # Phi-2 hidden
    ("matmul_fp16", {"M": 384, "N": 1536, "K": 384}),      # a tiny model
    ("matmul_fp16", {"M": 200, "N": 5000, "K": 700}),      # odd
    ("softmax_fp16", {"rows": 512, "cols": 50257}),        # GPT-2 vocab
    ("softmax_fp16", {"rows": 16, "cols": 4096}),
    ("rmsnorm_fp16", {"rows": 8, "cols": 4096}),
    ("rmsnorm_fp16", {"rows": 65536, "cols": 1024}),
    ("gelu_mul_fp16", {"numel": 256 * 11008}),
    ("gelu_mul_fp16", {"numel": 30_000_001}),
]
# a third, fixed (eleventh session) before the compile check served predictions by default
# and before any of these shapes was measured: the first held-out test of `checked`
SHAPES_C = [
    ("matmul_fp16", {"M": 8, "N": 14336, "K": 4096}),      # Llama-3-8B up/gate, batch 8
    ("matmul_fp16", {"M": 4096, "N": 1024, "K": 4096}),    # Llama-3-8B k/v projection, prefill
    ("matmul_fp16", {"M": 128, "N": 4096, "K": 14336}),    # Llama-3-8B down, batch 128
    ("matmul_fp16", {"M": 3072, "N": 3072, "K": 3072}),
    ("matmul_fp16", {"M": 1536, "N": 6144, "K": 1536}),
    ("matmul_fp16", {"M": 300, "N": 4000, "K": 1000}),     # odd
    ("matmul_fp16", {"M": 48, "N": 2560, "K": 10240}),     # Phi-2 down, batch 48
    ("matmul_fp16", {"M": 10000, "N": 512, "K": 512}),     # tall, narrow
    ("matmul_fp16", {"M": 2048, "N": 2048, "K": 8192}),
    ("matmul_fp16", {"M": 32, "N": 32000, "K": 4096}),     # Llama-2 LM head, batch 32
    ("matmul_fp16", {"M": 777, "N": 1234, "K": 4321}),     # nothing aligned
    ("matmul_fp16", {"M": 6144, "N": 4096, "K": 512}),
    ("softmax_fp16", {"rows": 1024, "cols": 256000}),      # Gemma vocab
    ("softmax_fp16", {"rows": 128, "cols": 131072}),
    ("rmsnorm_fp16", {"rows": 2048, "cols": 2560}),
    ("gelu_mul_fp16", {"numel": 4096 * 14336}),
]
SETS = {"a": SHAPES, "b": SHAPES_B, "c": SHAPES_C}
# checked: the theory store's predictions compiled for the GPU, the first that neither spills
# nor fails served (`theory.check.first_clean`, what `abductune predict` serves by default)
SOURCES = ["theory", "checked", "observed", "heuristics", "nearest", "fixed_first", "default"]


def recorded(kernel: str) -> list:
    from abductune.datasets.bundled import bundled_datasets
    from abductune.datasets.format import read_dataset

    return [d for d in (read_dataset(p) for p in bundled_datasets()) if d.problem.kernel == kernel]


def candidates(spec, problem, space, data) -> dict[str, dict | None]:
    """One config per zero-shot source (None where a source has nothing to say)."""
    from abductune.heuristics import seed_configs
    from abductune.theory.check import first_clean
    from abductune.theory.store import predictions

    from bench_zeroshot import first_seed, nearest

    preds = predictions(problem, space)
    p = preds[0] if preds else None
    c = first_clean(spec, problem, preds)
    rep = seed_configs(problem, space, problem.hardware)
    near = nearest(problem, data)
    return {"theory": dict(p.config) if p else None, "checked": dict(c.config) if c else None,
            "observed": first_seed(rep, "observed"), "heuristics": first_seed(rep, "registry"),
            "nearest": dict(near.optimum().config) if near else None, "fixed_first": spec.fixed_configs()[0],
            "default": spec.default_config(), "_theory_rule": p.describe() if p else None,
            "_nearest_shape": near.name if near else None}


def main() -> None:
    ap = argparse.ArgumentParser()
    # results go where --out says, else to the untracked benchmarks/out/ (never over a tracked file)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "out" / "zeroshot_live.json"))
    ap.add_argument("--budget", type=int, default=64)
    ap.add_argument("--deadline-s", type=float, default=540)
    ap.add_argument("--only", default="", help="comma-separated kernels to keep")
    ap.add_argument("--set", choices=sorted(SETS), default="a",
                    help="which held-out shapes (a: first, b: second, c: third)")
    ap.add_argument("--dry-run", action="store_true", help="print the candidates, measure nothing")
    args = ap.parse_args()
    t_start = time.time()

    from abductune import kernels
    from abductune.hardware import lookup
    from abductune.theory.check import unavailable

    why = unavailable(lookup("H100-SXM"))
    if why:
        sys.exit(f"the checked source compiles predictions: {why}")
    keep = {k for k in args.only.split(",") if k}
    shapes = [(k, d) for k, d in SETS[args.set] if not keep or k in keep]
    data = {k: recorded(k) for k in {k for k, _ in shapes}}
    for k, d in shapes:
        seen = [x.name for x in data[k] if dict(x.problem.dims) == d]
        if seen:
            sys.exit(f"{k} {d} is a recorded shape ({seen}): the figure would not be zero-shot")
    if args.dry_run:
        hw = lookup("H100-SXM")
        for k, d in shapes:
            spec = kernels.get(k)
            c = candidates(spec, spec.problem(d, hw), spec.space(), data[k])
            print(k, d, c.pop("_theory_rule"), "| nearest", c.pop("_nearest_shape"))
            for s in SOURCES:
                print(f"   {s:12s} {c[s]}")
        return

    from abductune.hardware import local_hardware
    from abductune.measure.live import Compiler, close_shared
    from abductune.search import Budget
    from abductune.tune import tune_one
    from tune_bench import compare

    hw = local_hardware()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    res = json.loads(out.read_text()) if out.exists() else {"device": hw.name, "budget": args.budget, "rows": []}
    done = {json.dumps([r["kernel"], r["dims"]]) for r in res["rows"]}
    for k, dims in shapes:
        if json.dumps([k, dims]) in done:
            continue
        if time.time() - t_start > args.deadline_s:
            print("deadline: stopping (resumable)", flush=True)
            break
        spec = kernels.get(k)
        problem, space = spec.problem(dims, hw), spec.space()
        cand = candidates(spec, problem, space, data[k])
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="tc-")  # the tune is cold
        close_shared()
        t0 = time.perf_counter()
        o = tune_one(k, dims, strategy="abduction", budget=Budget(args.budget), mode="live", compile_workers=16,
                     stop_early=False)
        tune_s = time.perf_counter() - t0
        configs: dict[str, dict] = {}
        keys: dict[tuple, str] = {}
        aliases: dict[str, str] = {}

        def add(name, cfg):  # one timing per distinct config; aliases share it
            if cfg is None:
                return
            key = space.key(space.nearest_valid(cfg) if not space.is_valid(cfg) else cfg)
            if key not in keys:
                keys[key] = name
                configs[name] = cfg
            aliases[name] = keys[key]
        if o.winner is not None:
            add("tuned", o.winner.config)
        for i, c in enumerate(spec.fixed_configs()):
            add(f"fixed_{i}", c)
        for s in SOURCES:
            add(s, cand[s])
        close_shared()
        pool = Compiler(16)  # warm the cache in parallel: the worker below compiles one at a time
        pool.compile(spec.name, list(configs.values()), problem)
        pool.shutdown()
        side = compare(spec, problem, configs)
        t = {n: side[a] for n, a in aliases.items()}
        fixed = [v for n, v in t.items() if n.startswith("fixed_")]
        ref = min([t.get("tuned", math.inf), *fixed])
        row = {"kernel": k, "dims": dims, "tune_s": tune_s, "evaluations": o.evaluations,
               "theory_rule": cand["_theory_rule"], "nearest_shape": cand["_nearest_shape"],
               "configs": configs, "aliases": aliases, "ms": t, "torch_ms": side["torch"], "reference_ms": ref,
               "ratio": {s: t[s] / ref for s in SOURCES if s in t},
               "fixed_best_ratio": min(fixed) / ref, "tuned_ratio": t.get("tuned", math.nan) / ref}
        res["rows"].append(row)
        out.write_text(json.dumps(res, indent=1, default=str))
        print(f"{k} {dims} tune {tune_s:.0f}s/{o.evaluations}ev  " + " ".join(
            f"{s}:{row['ratio'].get(s, math.nan):.3f}" for s in SOURCES) +
            f"  fixed_best:{row['fixed_best_ratio']:.3f} torch:{side['torch'] / ref:.3f}", flush=True)
    close_shared()
    summary(res)
    print(f"total {time.time() - t_start:.0f} s")


def summary(res: dict) -> None:
    """Geomean (worst) of each source's time over the reference, per kernel and over all."""
    rows = res["rows"]
    groups = {k: [r for r in rows if r["kernel"] == k] for k in dict.fromkeys(r["kernel"] for r in rows)}
    groups["all"] = rows
    cols = [*SOURCES, "fixed_best"]
    print("| kernel | shapes | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for k, rs in groups.items():
        cells = []
        for c in cols:
            xs = [r["fixed_best_ratio"] if c == "fixed_best" else r["ratio"].get(c) for r in rs]
            xs = [x for x in xs if x is not None and math.isfinite(x)]
            cells.append(f"{math.exp(statistics.fmean(map(math.log, xs))):.3f} ({max(xs):.2f})" if xs else "-")
        print(f"| {k} | {len(rs)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
