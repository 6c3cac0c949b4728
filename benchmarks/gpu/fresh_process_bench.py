"""A user's first command, timed from outside (issue 10): `abductune tune` on one shape in a
fresh process against a fresh-process script that calls `@triton.autotune` on the kernel's own
list once, alternating, each with an empty Triton cache (and, for abductune, a new store).
Both walls are whole processes: interpreter start, `import torch`, CUDA start, compiles,
timing. `import torch` alone is timed first, three times, to show what the operating system's
file cache does to the start of a process.

    python3 benchmarks/gpu/fresh_process_bench.py --out fresh.json --rounds 2 \
        --shapes 'softmax_fp16:rows=4096,cols=32000;rmsnorm_fp16:rows=1,cols=4096'

Prints a table last.
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

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SHAPES = ("softmax_fp16:rows=4096,cols=32000;softmax_fp16:rows=16384,cols=1024;"
                  "rmsnorm_fp16:rows=1,cols=4096;rmsnorm_fp16:rows=4096,cols=14336;"
                  "gelu_mul_fp16:numel=917504;gelu_mul_fp16:numel=117440512")


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    return time.perf_counter() - t0, r


def autotune_script(kernel: str, dims: dict[str, int], env: dict[str, str]) -> dict:
    """One fresh process of the `triton.autotune` script (`live_bench.py --autotune-child`):
    its process wall and the wall of its first call (the tune), or its stderr."""
    wall, r = timed([sys.executable, "benchmarks/gpu/live_bench.py", "--out", os.devnull, "--autotune-child",
                     kernel, json.dumps(dims)], env)
    rec: dict = {"process_s": wall, "rc": r.returncode}
    line = [x for x in r.stdout.splitlines() if x.startswith("{")]
    if r.returncode == 0 and line:
        rec["first_call_s"] = json.loads(line[-1])["wall_s"]
    else:
        rec["stderr"] = r.stderr[-1500:]
    return rec


def fresh_env() -> dict[str, str]:
    d = tempfile.mkdtemp(prefix="fresh-")
    return dict(os.environ, TRITON_CACHE_DIR=os.path.join(d, "triton"), ABDUCTUNE_STORE=os.path.join(d, "s.sqlite"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="'kernel:dims;kernel:dims'")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--budget", type=int, default=32)
    ap.add_argument("--variant-env", default=None, metavar="NAME=VALUE",
                    help="also run abductune with this environment variable set (an A/B of a switch)")
    args = ap.parse_args()
    py = sys.executable
    data: dict = {"import_torch_s": [], "rows": []}
    for _ in range(3):
        w, r = timed([py, "-c", "import torch"], dict(os.environ))
        data["import_torch_s"].append(w)
    print("import torch, three fresh processes:", " ".join(f"{w:.2f}s" for w in data["import_torch_s"]), flush=True)
    out = Path(args.out)
    for rnd in range(args.rounds):
        for item in args.shapes.split(";"):
            kernel, dims_text = item.split(":")
            dims = {k: int(v) for k, v in (kv.split("=") for kv in dims_text.split(","))}
            row: dict = {"round": rnd, "kernel": kernel, "dims": dims}
            # abductune first in even rounds, triton first in odd ones: neither always warms the other
            order = ["abductune", "triton"] + (["abductune_variant"] if args.variant_env else [])
            order = order if rnd % 2 == 0 else order[::-1]
            for tool in order:
                env = fresh_env()
                if tool == "abductune_variant":
                    name, _, val = args.variant_env.partition("=")
                    env[name] = val
                if tool.startswith("abductune"):
                    js = os.path.join(tempfile.mkdtemp(prefix="js-"), "t.json")
                    wall, r = timed([py, "-m", "abductune.cli", "tune", "--mode", "live", "--kernel", kernel,
                                     "--shapes", dims_text, "--budget", str(args.budget), "--json", js], env)
                    rec: dict = {"process_s": wall, "rc": r.returncode}
                    if r.returncode == 0:
                        t = json.loads(Path(js).read_text())[0]
                        waits = (t.get("pipeline") or {}).get("batch_wait_s") or [None]
                        rec.update(tune_s=t["wall_s"], evaluations=t["evaluations"], stopped_early=t["stopped_early"],
                                   winner_ms=t["winner_ms"], fixed_best_ms=t["fixed_best_ms"],
                                   first_batch_wait_s=waits[0], timing=t.get("timing"))
                    else:
                        rec["stderr"] = r.stderr[-1500:]
                else:
                    rec = autotune_script(kernel, dims, env)
                row[tool] = rec
            data["rows"].append(row)
            out.write_text(json.dumps(data, indent=1, default=str))
            a, t = row["abductune"], row["triton"]
            vr = row.get("abductune_variant")
            extra = f" | {args.variant_env} {vr['process_s']:.1f}s (tune {vr.get('tune_s', float('nan')):.1f}s)" if vr else ""
            print(f"round {rnd} {kernel} {dims_text}: abductune {a['process_s']:.1f}s "
                  f"(tune {a.get('tune_s', float('nan')):.1f}s, {a.get('evaluations')} ev, first batch waited "
                  f"{a.get('first_batch_wait_s') or float('nan'):.1f}s) | triton.autotune script "
                  f"{t['process_s']:.1f}s (first call {t.get('first_call_s', float('nan')):.1f}s)" + extra, flush=True)
    variant = bool(args.variant_env)
    print("\n| shape | abductune process (tune) | triton.autotune script process (first call) |"
          + (f" abductune, {args.variant_env} |" if variant else ""))
    print("|---|---|---|" + ("---|" if variant else ""))
    keys = sorted({(r["kernel"], json.dumps(r["dims"])) for r in data["rows"]})
    for k, d in keys:
        rs = [r for r in data["rows"] if (r["kernel"], json.dumps(r["dims"])) == (k, d)]
        ap_ = [r["abductune"]["process_s"] for r in rs]
        at = [r["abductune"].get("tune_s", float("nan")) for r in rs]
        tp = [r["triton"]["process_s"] for r in rs]
        tf = [r["triton"].get("first_call_s", float("nan")) for r in rs]
        line = (f"| {k} {d} | {statistics.fmean(ap_):.1f} s ({statistics.fmean(at):.1f}) range {min(ap_):.1f}-{max(ap_):.1f} "
                f"| {statistics.fmean(tp):.1f} s ({statistics.fmean(tf):.1f}) range {min(tp):.1f}-{max(tp):.1f} |")
        if variant:
            np_ = [r["abductune_variant"]["process_s"] for r in rs]
            nt = [r["abductune_variant"].get("tune_s", float("nan")) for r in rs]
            line += f" {statistics.fmean(np_):.1f} s ({statistics.fmean(nt):.1f}) range {min(np_):.1f}-{max(np_):.1f} |"
        print(line)


if __name__ == "__main__":
    main()
