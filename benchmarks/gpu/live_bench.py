"""Live tuning speed on the GPU (issue 10) and abduction vs pattern live (issue 8), side by
side with `triton.autotune` on the kernel's own config list, each shape cold (empty Triton cache).

    python benchmarks/gpu/live_bench.py --out results.json --kernel matmul_fp16 \
        --variants after:abduction,before:pattern --shapes 0-7 --budget 24 [--deadline-s 540]

Variants (name:strategy): "cold" (and any name starting with "cold") is "after" with the
compile pool and benchmark worker started anew for the shape (nothing compiled before survives anywhere); "before" is the evaluator as it was (compile pool and benchmark worker started per
shape, compile everything then benchmark, every config timed to a full median); "after" keeps
one pool and worker per process, overlaps compile with benchmarking and stops clearly slower
configs early. Seeds: theories and observed database with this shape's own knowledge left out
(both were learned from these very shapes). After each shape the winner(s), triton.autotune's
pick, the fixed list's best, the recorded optimum and the default are re-timed interleaved in
one worker, with torch, so the ratios come from one run. Prints a table last.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tune_bench import compare  # noqa: E402  (interleaved side-by-side re-timing, one worker)


def _autotuned_call(spec, dims: dict[str, int]):
    """@triton.autotune over the kernel's own list, as a user would write it, and a call of it
    on fresh inputs. Row kernels get ONE_CHUNK in each config (a per-shape constant there)."""
    import torch
    import triton

    from abductune.measure.target import local_hardware

    def configs(extra=lambda meta: {}):
        out = []
        for c in spec.fixed_configs():
            meta = {k: v for k, v in c.items() if k not in ("num_warps", "num_stages")}
            out.append(triton.Config({**meta, **extra(meta)}, num_warps=c["num_warps"], num_stages=c["num_stages"]))
        return out
    if spec.name.startswith("matmul"):
        from abductune.kernels.matmul import matmul_kernel

        tuned = triton.autotune(configs=configs(), key=["M", "N", "K"])(matmul_kernel)
        m, n, k = dims["M"], dims["N"], dims["K"]
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16) / k ** 0.5
        c = torch.empty(m, n, device="cuda", dtype=torch.float16)
        grid = lambda META: (triton.cdiv(m, META["BLOCK_M"]) * triton.cdiv(n, META["BLOCK_N"]),)  # noqa: E731
        return tuned, lambda: tuned[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                          c.stride(0), c.stride(1), EVEN_K=k % 64 == 0)
    problem = spec.problem(dims, local_hardware())
    inputs = spec.make_inputs(problem, "cuda", 0)
    out = spec.alloc_output(problem, inputs)
    if spec.name.startswith("gelu_mul"):
        from abductune.kernels.elementwise import gelu_mul_kernel

        x, g = inputs
        tuned = triton.autotune(configs=configs(), key=["numel"])(gelu_mul_kernel)
        return tuned, lambda: tuned[lambda META: (triton.cdiv(x.numel(), META["BLOCK"]),)](x, g, out, x.numel())
    one_chunk = lambda meta: {"ONE_CHUNK": meta["BLOCK"] >= dims["cols"]}  # noqa: E731
    rows, cols = dims["rows"], dims["cols"]
    grid = lambda META: (triton.cdiv(rows, META["ROWS_PER_PROGRAM"]),)  # noqa: E731
    if spec.name.startswith("softmax"):
        from abductune.kernels.softmax import softmax_kernel

        (x,) = inputs
        tuned = triton.autotune(configs=configs(one_chunk), key=["n_rows", "n_cols"])(softmax_kernel)
        return tuned, lambda: tuned[grid](x, out, rows, cols, x.stride(0), out.stride(0))
    from abductune.kernels.norm import EPS, rmsnorm_kernel

    x, w = inputs
    tuned = triton.autotune(configs=configs(one_chunk), key=["n_rows", "n_cols"])(rmsnorm_kernel)
    return tuned, lambda: tuned[grid](x, w, out, rows, cols, x.stride(0), out.stride(0), EPS)


def triton_autotune_cold(spec, dims: dict[str, int]) -> tuple[float, dict]:
    """First-call wall time of @triton.autotune over the kernel's own list, and its pick."""
    import torch

    tuned, call = _autotuned_call(spec, dims)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    call()
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    best = tuned.best_config
    pick = {k: v for k, v in best.kwargs.items() if k != "ONE_CHUNK"}
    pick.update(num_warps=best.num_warps, num_stages=best.num_stages)
    return wall, pick


def triton_autotune_cold_subprocess(spec_name: str, dims: dict[str, int]) -> tuple[float, dict]:
    """The same in a fresh process with an empty cache: truly cold (an in-process JIT cache
    would make every shape after the first a warm start). Process start-up is not counted."""
    import subprocess

    env = dict(os.environ, TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="tc-"))
    r = subprocess.run([sys.executable, __file__, "--out", os.devnull, "--autotune-child", spec_name,
                        json.dumps(dims)],
                       capture_output=True, text=True, env=env, timeout=300)
    line = [x for x in r.stdout.splitlines() if x.startswith("{")]
    if r.returncode != 0 or not line:
        raise RuntimeError(f"triton.autotune child failed: {r.stderr[-800:]}")
    d = json.loads(line[-1])
    return d["wall_s"], d["pick"]


def parse_range(text: str, n: int) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            out += list(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return [i for i in out if i < n]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--kernel", default="matmul_fp16")
    ap.add_argument("--variants", default="after:abduction,before:pattern")
    ap.add_argument("--shapes", default="0-15")
    ap.add_argument("--budget", type=int, default=24)
    ap.add_argument("--deadline-s", type=float, default=540)
    ap.add_argument("--no-autotune", action="store_true")
    ap.add_argument("--full-budget", action="store_true", help="abduction spends the whole budget "
                    "(default: it stops once settled, as `abductune tune` does)")
    ap.add_argument("--autotune-child", nargs=2, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    t_start = time.time()
    if args.autotune_child:
        from abductune import kernels

        wall, pick = triton_autotune_cold(kernels.get(args.autotune_child[0]), json.loads(args.autotune_child[1]))
        print(json.dumps({"wall_s": wall, "pick": pick}))
        return

    from abductune import kernels
    from abductune.datasets.bundled import find_bundled
    from abductune.datasets.format import read_dataset
    from abductune.hardware import local_hardware
    from abductune.measure.live import close_shared
    from abductune.search import Budget
    from abductune.tune import tune_one

    spec = kernels.get(args.kernel)
    hw = local_hardware()
    shapes = spec.suite_shapes()
    variants = [v.split(":") for v in args.variants.split(",")]
    out = Path(args.out)
    data = {"kernel": args.kernel, "budget": args.budget, "device": hw.name, "rows": []}
    for i in parse_range(args.shapes, len(shapes)):
        dims = shapes[i]
        if time.time() - t_start > args.deadline_s:
            print("deadline: stopping", flush=True)
            break
        problem = spec.problem(dims, hw)
        row: dict = {"dims": dims, "variants": {}}
        cfgs: dict[str, dict] = {}
        for name, strategy in variants:
            os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="tc-")  # cold: compile included
            live = {"shared": name != "before", "early_stop": name != "before", "overlap": name != "before"}
            if name == "before" or name.startswith("cold"):  # cold*: processes (and their caches) anew
                close_shared()
            o = tune_one(spec.name, dims, strategy=strategy, budget=Budget(args.budget), mode="live",
                         compile_workers=16, live_options=live, exclude=problem,
                         stop_early=not args.full_budget)
            row["variants"][name] = {"strategy": strategy, "wall_s": o.wall_s, "evaluations": o.evaluations,
                                     "stopped_early": o.stopped_early, "best_impl": o.best_impl,
                                     "winner": o.winner.config if o.winner else None,
                                     "timing": o.session.timing if o.session else {},
                                     "clocks": o.session.clocks if o.session else None,
                                     "pipeline": o.session.pipeline if o.session else None}
            if o.winner is not None:
                cfgs[name] = o.winner.config
            fixed_best = o.fixed_best
        if not args.no_autotune:
            wall, pick = triton_autotune_cold_subprocess(spec.name, dims)
            row["triton_autotune"] = {"wall_s": wall, "pick": pick}
            cfgs["triton_autotune"] = pick
        ds = read_dataset(find_bundled(spec.name, dims))
        cfgs.update(optimum=ds.optimum().config, default=spec.default_config())
        if fixed_best is not None:
            cfgs["fixed_best"] = fixed_best.config
        side = compare(spec, problem, cfgs)
        row["side_by_side_ms"] = side
        data["rows"].append(row)
        out.write_text(json.dumps(data, indent=1, default=str))
        v = " ".join(f"{n}:{row['variants'][n]['wall_s']:.1f}s/{row['variants'][n]['evaluations']}ev/"
                     f"{side.get(n, float('nan')) / side['optimum']:.3f}" for n, _ in variants)
        ta = row.get("triton_autotune", {})
        print(f"{dims} {v} triton.autotune:{ta.get('wall_s', float('nan')):.1f}s/"
              f"{side.get('triton_autotune', float('nan')) / side['optimum']:.3f} torch/opt "
              f"{side['torch'] / side['optimum']:.3f}", flush=True)
    close_shared()
    print(f"total {time.time() - t_start:.0f} s")


if __name__ == "__main__":
    main()
