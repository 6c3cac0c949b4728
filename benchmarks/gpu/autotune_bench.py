"""@abductune.autotune vs @triton.autotune on a GPU, side by side, on user kernels (the tutorial
grouped matmul and the small attention forward of tests/autotune_kernels) with the same config
list (the Triton tutorial's 8 matmul configs; 8 attention configs):

    python benchmarks/gpu/autotune_bench.py --kernel matmul --out benchmarks/results/autotune_matmul.json
    python benchmarks/gpu/autotune_bench.py --kernel attention --out benchmarks/results/autotune_attention.json

Each variant runs in its own process with an empty Triton cache (so compile time counts) and
tunes every shape in turn; per shape it records the cold first call (tuning included) and the
winner. Variants: `triton` (triton.autotune), `abductune` (the list only: same budget),
`abductune_torch` (+ torch/cuBLAS as a competing implementation), `abductune_search` (pattern
search of 3x the list's length in the space grown around it), `abductune_rerun` (a second
process on abductune's store and Triton cache: what the next run of a job pays). Then one
process re-times every variant's winner, the list's best and torch interleaved (bare launches,
do_bench), so all ratios come from one run. Steady dispatch overhead: benchmarks/bench_dispatch.py.
Targets: winner <= the list's best on every shape; cold first call no slower than triton's;
with torch competing, never slower than torch beyond noise.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

VARIANTS = ("triton", "abductune", "abductune_torch", "abductune_search", "abductune_rerun")
MATMUL_LIST = [(128, 256, 64, 8, 3), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
               (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 2, 5), (32, 64, 32, 2, 5)]  # BM BN BK warps stages
ATTN_LIST = [(m, n, s, w) for m in (64, 128) for n in (32, 64) for s, w in ((2, 4), (3, 8))]
ATTN_SHAPES = [{"H": 32, "S": 512, "D": 64}, {"H": 32, "S": 1024, "D": 64}, {"H": 16, "S": 2048, "D": 64},
               {"H": 8, "S": 4096, "D": 64}, {"H": 32, "S": 1024, "D": 128}]


def configs(kernel: str) -> list[Any]:
    import triton

    if kernel == "matmul":
        return [triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8},
                              num_warps=w, num_stages=s) for m, n, k, w, s in MATMUL_LIST]
    return [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s) for m, n, s, w in ATTN_LIST]


def shapes(kernel: str, n: int) -> list[dict[str, int]]:
    if kernel == "matmul":
        from abductune.kernels import get

        return get("matmul_fp16").suite_shapes()[:n]
    return ATTN_SHAPES[:n]


class Case:
    """One shape of one kernel: its tensors and how to launch a given kernel object on them."""

    def __init__(self, kernel: str, dims: dict[str, int]):
        import torch

        self.kernel, self.dims = kernel, dims
        if kernel == "matmul":
            M, N, K = dims["M"], dims["N"], dims["K"]
            self.a = torch.randn(M, K, device="cuda", dtype=torch.float16)
            self.b = torch.randn(K, N, device="cuda", dtype=torch.float16)
            self.c = torch.empty(M, N, device="cuda", dtype=torch.float16)
        else:
            H, S, D = dims["H"], dims["S"], dims["D"]
            self.q, self.k, self.v = (torch.randn(H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
            self.o = torch.empty_like(self.q)

    def launch(self, k: Any, **meta: Any) -> None:
        import triton

        if self.kernel == "matmul":
            a, b, c = self.a, self.b, self.c
            M, N, K = self.dims["M"], self.dims["N"], self.dims["K"]
            grid = lambda m: (triton.cdiv(M, m["BLOCK_SIZE_M"]) * triton.cdiv(N, m["BLOCK_SIZE_N"]),)  # noqa: E731
            k[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                    **meta)
        else:
            q, o = self.q, self.o
            H, S, D = q.shape
            grid = lambda m: (triton.cdiv(S, m["BLOCK_M"]), H)  # noqa: E731
            k[grid](q, self.k, self.v, o, D ** -0.5, q.stride(0), q.stride(1), S, D, **meta)

    def torch_impl(self) -> Any:
        import torch

        if self.kernel == "matmul":
            return lambda a, b, c, *rest: torch.matmul(a, b, out=c)
        return lambda q, k, v, o, *rest: o.copy_(torch.nn.functional.scaled_dot_product_attention(
            q[None], k[None], v[None])[0])

    def torch_call(self) -> None:
        self.torch_impl()(*((self.a, self.b, self.c) if self.kernel == "matmul" else (self.q, self.k, self.v, self.o)))


def jit_kernel(kernel: str) -> Any:
    if kernel == "matmul":
        from autotune_kernels.matmul import matmul_kernel
        return matmul_kernel
    from autotune_kernels.attention import attn_fwd
    return attn_fwd


def run_variant(kernel: str, variant: str, n_shapes: int) -> dict[str, Any]:
    """In this process: tune every shape with one variant; cold time and winner per shape."""
    import torch
    import triton

    import abductune

    fn, lst = jit_kernel(kernel), configs(kernel)
    key = ["M", "N", "K"] if kernel == "matmul" else ["N_CTX", "HEAD_DIM"]
    cases = [Case(kernel, d) for d in shapes(kernel, n_shapes)]
    if variant == "triton":
        tuned = triton.autotune(configs=lst, key=key)(fn)
    else:
        opts: dict[str, Any] = {}
        if variant == "abductune_torch":
            opts["implementations"] = {"torch": cases[0].torch_impl()}
        if variant == "abductune_search":
            opts["budget"] = 3 * len(lst)
        tuned = abductune.autotune(configs=lst, key=key, **opts)(fn)
    rows = []
    t_all = time.perf_counter()
    for case in cases:
        before = set(getattr(tuned, "cache", {}))
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        case.launch(tuned)
        torch.cuda.synchronize()
        cold = time.perf_counter() - t0
        if variant == "triton":
            cfg = tuned.best_config
            winner = {**cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
            timings = {json.dumps({**c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages}): t[0]
                       for c, t in tuned.configs_timings.items()}
            extra = {"list_timings": timings}
        else:
            new = [k for k in tuned.cache if k not in before]  # this shape's key (exact buckets)
            choice = tuned.cache[new[0]] if new else list(tuned.cache.values())[-1]
            winner = {k: v for k, v in choice.config.items() if v is not None}
            extra = {"source": choice.source, "stats": dict(tuned.stats), "choice_ms": choice.time_ms}
            if variant == "abductune_torch" and tuned.last_result is not None:  # why torch won or lost
                from abductune.store import Store

                with Store(os.environ["ABDUCTUNE_STORE"]) as st:
                    stored = st.measurements(st.runs()[-1].context)
                extra["impl_rows_ms"] = [m.time_ms for m in stored if "impl" in m.config]
                extra["winner_ms"] = tuned.last_result.winner.time_ms if tuned.last_result.winner else None
        rows.append({"dims": case.dims, "cold_s": cold, "winner": winner, **extra})
        print(f"{variant:17s} {case.dims} cold {cold:7.2f}s winner {winner}", flush=True)
    return {"variant": variant, "kernel": kernel, "total_s": time.perf_counter() - t_all, "shapes": rows,
            "triton": triton.__version__, "torch": torch.__version__, "device": torch.cuda.get_device_name()}


def retime(kernel: str, results: dict[str, Any], rounds: int = 3) -> list[dict[str, Any]]:
    """Every variant's winner, the list's best and torch, re-timed interleaved per shape."""
    import torch
    import triton.testing as tt

    fn = jit_kernel(kernel)
    out = []
    for i, trow in enumerate(results["triton"]["shapes"]):
        dims = trow["dims"]
        case = Case(kernel, dims)
        cands: dict[str, dict[str, Any]] = {}
        timings = trow["list_timings"]
        cands["list_best"] = json.loads(min(timings, key=timings.get))
        for v, res in results.items():
            cands[v] = res["shapes"][i]["winner"]
        uniq = {json.dumps(c, sort_keys=True): c for c in cands.values()}
        samples: dict[str, list[float]] = {k: [] for k in [*uniq, "torch"]}
        for _ in range(rounds):
            for k, c in uniq.items():
                call = case.torch_call if "impl" in c else (lambda c=c: case.launch(fn, **c))
                samples[k].append(tt.do_bench(call, warmup=10, rep=50))
            samples["torch"].append(tt.do_bench(case.torch_call, warmup=10, rep=50))
        ms = {k: statistics.median(s) for k, s in samples.items()}
        row = {"dims": dims, "torch_ms": ms["torch"],
               **{f"{v}_ms": ms[json.dumps(c, sort_keys=True)] for v, c in cands.items()},
               **{f"{v}_cold_s": results[v]["shapes"][i]["cold_s"] for v in results}}
        out.append(row)
        torch.cuda.synchronize()
    return out


def recorded_optimum(dims: dict[str, int]) -> float | None:
    """The exhaustive optimum of the built-in matmul_fp16 sweep on an H100, where recorded."""
    try:
        from abductune.datasets.bundled import find_bundled
        from abductune.datasets.format import read_dataset

        ds = read_dataset(find_bundled("matmul_fp16", dims, gpu="h100"))
        ok = [m.time_ms for m in ds.records if m.ok]
        return min(ok) if ok else None
    except Exception:  # noqa: BLE001 - a reference column only
        return None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", choices=("matmul", "attention"), default="matmul")
    ap.add_argument("--shapes", type=int, default=16, help="first N shapes")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--out", default=None)
    ap.add_argument("--variant", default=None, help=argparse.SUPPRESS)  # child mode
    ap.add_argument("--child-json", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.variant:
        Path(a.child_json).write_text(json.dumps(run_variant(a.kernel, a.variant.replace("_rerun", ""), a.shapes)))
        return
    variants = [v for v in a.variants.split(",") if v]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        for v in variants:
            shared = "abductune" if v == "abductune_rerun" else v  # the rerun reuses abductune's caches
            env = {**os.environ, "TRITON_CACHE_DIR": str(t / f"triton-{shared}"),
                   "ABDUCTUNE_STORE": str(t / f"store-{shared}.sqlite"), "PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'tests'}"}
            out = t / f"{v}.json"
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, __file__, "--kernel", a.kernel, "--shapes", str(a.shapes),
                                "--variant", v, "--child-json", str(out)], env=env, timeout=3000)
            if r.returncode != 0 or not out.exists():
                print(f"variant {v} failed (exit {r.returncode})", flush=True)
                continue
            results[v] = json.loads(out.read_text())
            results[v]["variant"] = v
            results[v]["process_s"] = time.perf_counter() - t0
    if "triton" not in results:
        raise SystemExit("the triton variant failed: nothing to compare against")
    rows = retime(a.kernel, results)
    print(f"\n{a.kernel}: ms per call (re-timed interleaved) and cold first call (s)")
    vs = list(results)
    print(f"{'shape':28s} {'list best':>9s} " + " ".join(f"{v[:16]:>16s}" for v in vs) + f" {'torch':>8s}"
          + (f" {'recorded opt':>12s}" if a.kernel == "matmul" else ""))
    for r in rows:
        opt = recorded_optimum(r["dims"]) if a.kernel == "matmul" else None
        r["recorded_optimum_ms"] = opt
        print(f"{json.dumps(r['dims']):28s} {r['list_best_ms']:9.4f} " +
              " ".join(f"{r[f'{v}_ms']:8.4f}/{r[f'{v}_cold_s']:6.1f}s" for v in vs) + f" {r['torch_ms']:8.4f}" +
              (f" {opt:12.4f}" if opt else (" " * 13 if a.kernel == "matmul" else "")))
    tot = {v: sum(r[f"{v}_cold_s"] for r in rows) for v in vs}
    print("cold total (s): " + ", ".join(f"{v} {s:.1f}" for v, s in tot.items()))
    checks = {
        "winner_le_list_best": all(r["abductune_ms"] <= r["list_best_ms"] * 1.02 for r in rows) if "abductune" in vs
        else None,
        "cold_le_triton": tot.get("abductune", 0) <= tot["triton"] if "abductune" in vs else None,
        "never_slower_than_torch": all(r["abductune_torch_ms"] <= r["torch_ms"] * 1.03 for r in rows)
        if "abductune_torch" in vs else None}
    print("targets (2% / 3% noise allowance):", checks)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps({"kernel": a.kernel, "rows": rows, "variants": results, "checks": checks},
                                          indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
