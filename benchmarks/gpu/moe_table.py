"""Issue 24, item 6, live on a GPU: a fused-MoE table tuned with `tune_moe`, read back with the
vLLM-format reader, and its configs timed beside vLLM's default config, in one process:

    PYTHONPATH=src python3 benchmarks/gpu/moe_table.py --out $OUT/moe_table.json
    TRITON_INTERPRET=1 PYTHONPATH=src:tests python3 benchmarks/gpu/moe_table.py --smoke   # the CPU path

The kernel is the zoo's fused-MoE grouped GEMM (`zoo_moe_gemm_bf16`, top-2 routing, one
launch), on a Mixtral-8x7B gate+up shard at tensor parallel 8: E=8, N=3584 (2 x 14336 / 8),
K=4096, bf16; vLLM files that table as N=1792. Steps:

1. `tune_moe` at 16, 256 and 2048 tokens, budget 16 evaluations per batch size (the Session's
   search, neighbours' winners as the first seeds), writing the vLLM JSON under --out's folder.
2. The JSON is read back with `heuristics.vllm_moe.read_table` (vLLM's reader, restated), and
   each config is mapped to the kernel's parameters by role.
3. Side by side, interleaved, `--repeats` rounds of Triton's do_bench (median per round, then
   the median of the rounds), on the same routed inputs, at each tuned batch size: the tuned
   config, the table's nearest *other* key (what vLLM would use had this batch size not been
   tuned) and vLLM's default config (`get_default_config`'s rule; 4 warps and 3 stages, the
   Triton launch defaults it leaves to); and at a batch size not tuned (512): the table's
   nearest key and vLLM's default. Every config's output is checked against the reference.

JSON to --out; the table is printed last.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
OUT = ROOT / "benchmarks" / "out"


def _timer_ms(smoke: bool) -> Any:
    """fn -> milliseconds: Triton's do_bench (L2 flushed between runs) on a GPU, wall clock in
    the interpreter."""
    if smoke:
        from abductune.measure.inprocess import wall_clock_bench

        return lambda fn: wall_clock_bench(fn, reps=2)
    from triton.testing import do_bench

    return lambda fn: do_bench(fn, quantiles=[0.5, 0.2, 0.8])[0]


def side_by_side(spec: Any, settings: dict, m: int, configs: dict[str, dict], repeats: int, smoke: bool,
                 seed: int) -> dict[str, Any]:
    """Time each named config at m tokens, interleaved over `repeats` rounds; check each once."""
    from abductune.kernels.zoo.moe_routing import routed

    device = "cpu" if smoke else "cuda"
    dims = {"M": m, "N": settings["N"], "K": settings["K"], "E": settings["E"]}
    problem = routed(spec.problem(dims), settings["routing"])
    inputs = spec.make_inputs(problem, device, seed)
    ref = spec.reference(inputs)
    out = spec.alloc_output(problem, inputs)
    bench = _timer_ms(smoke)
    rows: dict[str, Any] = {}
    for name, cfg in configs.items():
        out.fill_(float("nan"))
        spec.launch(cfg, inputs, out)
        ok, err = spec.check(out, ref)
        rows[name] = {"config": cfg, "ok": ok, "rel_err": err, "rounds_ms": []}
    names = [n for n in configs if rows[n]["ok"]]
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)] if names else []:  # rotate who goes first
            cfg = configs[name]
            rows[name]["rounds_ms"].append(bench(lambda cfg=cfg: spec.launch(cfg, inputs, out)))
    for name in names:
        t = rows[name]["rounds_ms"]
        rows[name]["ms"] = statistics.median(t)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(OUT / "moe_table.json"), help="JSON results (the vLLM table goes beside it)")
    ap.add_argument("--experts", "-E", type=int, default=8)
    ap.add_argument("--n", type=int, default=3584)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--batch", default="16,256,2048", help="batch sizes to tune")
    ap.add_argument("--probe", type=int, default=512, help="a batch size not tuned, looked up by nearest key")
    ap.add_argument("--routing", default="uniform")
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--smoke", action="store_true", help="tiny shape on the CPU under TRITON_INTERPRET=1")
    args = ap.parse_args()

    from abductune import kernels
    from abductune.heuristics.vllm_moe import default_config, from_vllm, lookup, nearest_key, read_table
    from abductune.moe import KERNEL, tune_moe

    if args.smoke:  # the interpreter's bf16 dot needs widening to be exact on the CPU (tests/interpreter_bf16.py)
        if os.environ.get("TRITON_INTERPRET") != "1":
            sys.exit("--smoke runs under TRITON_INTERPRET=1")
        sys.path.insert(0, str(ROOT / "tests"))
        from interpreter_bf16 import widen_bf16_dot

        widen_bf16_dot()
        args.experts, args.n, args.k, args.batch, args.probe, args.budget = 4, 64, 64, "2,8,32", 12, 3
        args.repeats = 2
    out_path = Path(args.out)
    table_dir = out_path.parent / (out_path.stem + "_configs")
    batches = [int(b) for b in args.batch.split(",") if b.strip()]
    spec = kernels.get(KERNEL)
    t0 = time.perf_counter()

    def progress(e: dict[str, Any]) -> None:
        if e["event"] == "done":
            ent = e["entry"]
            print(f"tuned M={ent.batch}: {ent.time_ms * 1e3:.1f} us, {ent.evaluations} evals, {ent.wall_s:.1f} s, "
                  f"seeded from {ent.seeded_from or '-'}: {ent.vllm}", flush=True)
    kw: dict[str, Any] = {}  # measurements kept in memory: a rerun tunes afresh
    if args.smoke:
        from abductune.measure.inprocess import bench_timer, wall_clock_bench

        kw = {"timer": bench_timer(lambda fn, quantiles=None: wall_clock_bench(fn, quantiles, reps=2)),
              "device_name": "cpu-interpreter", "heuristics": False}
    table = tune_moe(args.experts, args.n, args.k, "bf16", batches, routing=args.routing, budget=args.budget,
                     seed=args.seed, out_dir=table_dir, fresh=True, on_progress=progress, **kw)
    tune_s = time.perf_counter() - t0
    vllm = read_table(table.path)  # as vLLM reads it
    s = table.settings
    space = spec.space()

    def default(m: int) -> dict:
        return from_vllm(default_config(m, s["E"], s["file_n"], s["K"], s["top_k"], s["dtype_selector"]), space)
    results = []
    for m in batches + [args.probe]:
        tuned = m in vllm
        configs: dict[str, dict] = {}
        if tuned:
            configs["tuned"] = from_vllm(vllm[m], space)
            others = {b: c for b, c in vllm.items() if b != m}
            if others:
                configs[f"nearest other key (M={nearest_key(others, m)})"] = from_vllm(lookup(others, m), space)
        else:
            configs[f"nearest key (M={nearest_key(vllm, m)})"] = from_vllm(lookup(vllm, m), space)
        configs["vLLM default"] = default(m)
        rows = side_by_side(spec, s, m, configs, args.repeats, args.smoke, args.seed)
        base = rows["vLLM default"].get("ms")
        for name, r in rows.items():
            results.append({"M": m, "tuned": tuned, "what": name, **r,
                            "vs_vllm_default": (base / r["ms"]) if base and r.get("ms") else None})
    import torch
    import triton

    report = {"command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
              "device": "cpu (interpreter)" if args.smoke else torch.cuda.get_device_name(),
              "torch": torch.__version__, "triton": triton.__version__, "settings": s,
              "table_file": str(table.path), "tune_s": tune_s, "table": table.to_dict(), "timings": results}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(f"\nwrote {out_path}; table {table.path}")
    print(f"{'M':>6}  {'config':<32} {'us':>9} {'x vs vLLM default':>18}  BM,BN,BK,G,warps,stages")
    for r in results:
        c = r["config"]
        cfg = ",".join(str(c[k]) for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M",
                                           "num_warps", "num_stages"))
        us = f"{r['ms'] * 1e3:.1f}" if r.get("ms") else ("wrong" if not r["ok"] else "-")
        sp = f"{r['vs_vllm_default']:.2f}" if r.get("vs_vllm_default") else "-"
        print(f"{r['M']:>6}  {r['what']:<32} {us:>9} {sp:>18}  {cfg}")


if __name__ == "__main__":
    main()
