"""Where a fresh `abductune tune` process spends the time outside its tune (issue 10): the
interpreter's start, imports before the command, the command, closing the workers, and the
interpreter's exit.

    python3 benchmarks/gpu/exit_probe.py --out exit.json --runs 3

Each run is `abductune tune --mode live --kernel K --shapes S` in a fresh process (empty
Triton cache, new store) started through a small wrapper that stamps the wall clock: wrapper
start, CLI imported, command returned, `close_shared` start and end, and the last atexit
handler; the process is timed from outside, so what follows the last handler is the
interpreter's own exit. Variant `killed` (in the wrapper only, nothing in the package): after
the command, the workers are killed instead of stopped and joined, and the process leaves
with `os._exit` after flushing, to show what a faster exit could save. Variants alternate.

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
DEFAULT_SHAPES = "rmsnorm_fp16:rows=4096,cols=14336;softmax_fp16:rows=16384,cols=1024"

WRAPPER = r"""
import atexit, json, os, sys, time
T = {"start": time.time()}
OUT = os.environ["EXIT_PROBE_OUT"]
def dump():
    T.setdefault("last_atexit", time.time())
    with open(OUT, "w") as f:
        json.dump(T, f)
atexit.register(dump)  # registered first, so it runs last
from abductune import cli
from abductune.measure import live
T["cli_imported"] = time.time()
original = live.close_shared
def close_shared():
    T["close_start"] = time.time()
    original()
    T["close_end"] = time.time()
live.close_shared = close_shared  # shared_processes registers the module's name at first use
code = 0
try:
    cli.main.main(sys.argv[1:], standalone_mode=False)
except SystemExit as e:
    code = e.code or 0
T["command_done"] = time.time()
if os.environ.get("EXIT_PROBE_KILL") == "1":
    w, c = live._SHARED.pop("worker", None), live._SHARED.pop("compiler", None)
    T["close_start"] = time.time()
    if w is not None:
        w.kill()
    if c is not None:
        c.shutdown(kill=True)
    T["close_end"] = time.time()
    sys.stdout.flush(); sys.stderr.flush()
    T["last_atexit"] = time.time()
    dump()
    os._exit(code)
sys.exit(code)
"""


def run_once(kernel: str, dims: str, budget: int, kill: bool) -> dict:
    d = tempfile.mkdtemp(prefix="exitprobe-")
    stamps, js = os.path.join(d, "stamps.json"), os.path.join(d, "t.json")
    env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(d, "triton"), ABDUCTUNE_STORE=os.path.join(d, "s.sqlite"),
               EXIT_PROBE_OUT=stamps, EXIT_PROBE_KILL="1" if kill else "0")
    cmd = [sys.executable, "-c", WRAPPER, "tune", "--mode", "live", "--kernel", kernel, "--shapes", dims,
           "--budget", str(budget), "--json", js]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    t1 = time.time()
    rec: dict = {"kernel": kernel, "dims": dims, "variant": "killed" if kill else "normal", "rc": r.returncode,
                 "process_s": t1 - t0}
    if r.returncode != 0 or not os.path.exists(stamps):
        rec["stderr"] = r.stderr[-1500:]
        return rec
    s = json.loads(Path(stamps).read_text())
    tune = json.loads(Path(js).read_text())[0]
    rec.update(
        interpreter_s=s["start"] - t0,  # process start to the wrapper's first line
        imports_s=s["cli_imported"] - s["start"],
        command_s=s["command_done"] - s["cli_imported"],
        tune_s=tune["wall_s"],
        close_s=(s["close_end"] - s["close_start"]) if "close_end" in s else None,
        atexit_s=s["last_atexit"] - s["command_done"],  # every handler, close_shared included
        exit_s=t1 - s["last_atexit"],  # the interpreter's own exit, and reaping the children
        evaluations=tune["evaluations"])
    return rec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="'kernel:dims;kernel:dims'")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--budget", type=int, default=32)
    args = ap.parse_args()
    rows: list[dict] = []
    for i in range(args.runs):
        for item in args.shapes.split(";"):
            kernel, dims = item.split(":")
            for kill in ((False, True) if i % 2 == 0 else (True, False)):
                rec = run_once(kernel, dims, args.budget, kill)
                rows.append(rec)
                Path(args.out).write_text(json.dumps(rows, indent=1))
                print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in rec.items()
                                  if k != "stderr"}), flush=True)
                if "stderr" in rec:
                    print(rec["stderr"], file=sys.stderr)
    cols = ["process_s", "interpreter_s", "imports_s", "command_s", "tune_s", "close_s", "atexit_s", "exit_s"]
    print("\n| variant | runs | " + " | ".join(c.removesuffix("_s") for c in cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for variant in ("normal", "killed"):
        rs = [r for r in rows if r["variant"] == variant and r["rc"] == 0 and "tune_s" in r]
        if not rs:
            continue
        cells = []
        for c in cols:
            xs = [r[c] for r in rs if r.get(c) is not None]
            cells.append(f"{statistics.fmean(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})" if xs else "-")
        print(f"| {variant} | {len(rs)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
