"""A user's later commands with `abductune daemon` (issue 10): each shape is one fresh
`abductune tune` process, timed from outside, run three ways side by side:

- *daemon*: the command is forwarded to a daemon started once at the beginning (its start is
  timed and reported on its own);
- *local*: the same command with `--no-daemon`, a fresh process that starts its own workers;
- *triton*: a fresh-process script that calls `@triton.autotune` on the kernel's own list once.

Every run starts from an empty Triton cache (the daemon's cache folder is emptied before each
command; the daemon's processes may still hold in memory what they compiled for earlier
shapes, which is reported) and a new store. The order of the three rotates per shape. After
the commands, the GPU memory the idle daemon holds is read with nvidia-smi.

    python3 benchmarks/gpu/daemon_bench.py --out daemon.json
    python3 benchmarks/gpu/daemon_bench.py --out daemon_cpu.json --no-gpu --rounds 3   # CPU: replay

`--no-gpu`: on a machine without one, `tune --mode auto` replays the bundled measurements, so
the figure is what the daemon saves a command outside the GPU's work (imports, process start);
the `triton.autotune` column is left out. `--rounds`: every shape that many times (after the
first round the daemon has seen the shape: read later rounds as warm).

Prints a table last.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from fresh_process_bench import autotune_script, timed  # the same two runs, timed the same way
DEFAULT_SHAPES = ("softmax_fp16:rows=4096,cols=32000;softmax_fp16:rows=16384,cols=1024;"
                  "rmsnorm_fp16:rows=1,cols=4096;rmsnorm_fp16:rows=4096,cols=14336;"
                  "gelu_mul_fp16:numel=917504;gelu_mul_fp16:numel=117440512;"
                  "matmul_fp16:M=4096,N=4096,K=4096;matmul_fp16:M=16,N=4096,K=14336;"
                  "matmul_fp16:M=512,N=4096,K=4096;matmul_fp16:M=8192,N=128,K=4096")


def empty(folder: str) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder, exist_ok=True)


def gpu_memory_by_pid() -> dict[int, int]:
    r = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                       capture_output=True, text=True)
    out = {}
    for line in r.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            out[int(parts[0])] = int(parts[1]) if parts[1].isdigit() else -1
    return out


def descendants(pid: int) -> set[int]:
    r = subprocess.run(["ps", "-eo", "pid,ppid"], capture_output=True, text=True)
    kids: dict[int, list[int]] = {}
    for line in r.stdout.splitlines()[1:]:
        a, b = line.split()
        kids.setdefault(int(b), []).append(int(a))
    seen, todo = {pid}, [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return seen


def tune_record(wall: float, r: subprocess.CompletedProcess, js: str) -> dict:
    rec: dict = {"process_s": wall, "rc": r.returncode,
                 "via_daemon": "running in the abductune daemon" in r.stderr}
    if r.returncode == 0:
        t = json.loads(Path(js).read_text())[0]
        rec.update(tune_s=t["wall_s"], evaluations=t["evaluations"], stopped_early=t["stopped_early"],
                   winner_ms=t["winner_ms"], fixed_best_ms=t["fixed_best_ms"], timing=t.get("timing"))
    else:
        rec["stderr"] = r.stderr[-1500:]
    return rec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="'kernel:dims;kernel:dims'")
    ap.add_argument("--budget", type=int, default=32)
    ap.add_argument("--no-gpu", action="store_true", help="replay on a machine without a GPU (see above)")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    if args.no_gpu and args.shapes == DEFAULT_SHAPES:  # the recorded shapes replay can answer
        args.shapes = ("softmax_fp16:rows=4096,cols=32000;softmax_fp16:rows=16384,cols=1024;"
                       "rmsnorm_fp16:rows=1,cols=4096;rmsnorm_fp16:rows=4096,cols=14336;"
                       "gelu_mul_fp16:numel=917504;gelu_mul_fp16:numel=117440512;"
                       "matmul_fp16:M=4096,N=4096,K=4096;matmul_fp16:M=16,N=4096,K=14336;"
                       "matmul_fp16:M=512,N=4096,K=4096;matmul_fp16:M=8192,N=128,K=4096")
    mode = "auto" if args.no_gpu else "live"
    tools = ["daemon", "local"] if args.no_gpu else ["daemon", "local", "triton"]
    py = sys.executable
    base = tempfile.mkdtemp(prefix="daemon-bench-")
    cache = os.path.join(base, "triton")
    env = dict(os.environ, TRITON_CACHE_DIR=cache, ABDUCTUNE_RUNTIME_DIR=os.path.join(base, "rt"))
    os.makedirs(env["ABDUCTUNE_RUNTIME_DIR"], mode=0o700)
    data: dict = {"rows": []}
    out = Path(args.out)
    wall, r = timed([py, "-m", "abductune.cli", "daemon", "start"], env)
    data["daemon_start"] = {"process_s": wall, "rc": r.returncode, "stdout": r.stdout, "stderr": r.stderr[-1500:]}
    print(f"daemon start: {wall:.1f} s: {r.stdout.strip()} {r.stderr.strip()[-300:]}", flush=True)
    st = subprocess.run([py, "-m", "abductune.cli", "daemon", "status"], capture_output=True, text=True, env=env)
    daemon_pid = int(st.stdout.split()[1].rstrip(":")) if st.stdout.startswith("pid") else None
    try:
        items = args.shapes.split(";") * args.rounds
        for i, item in enumerate(items):
            kernel, dims_text = item.split(":")
            dims = {k: int(v) for k, v in (kv.split("=") for kv in dims_text.split(","))}
            row: dict = {"kernel": kernel, "dims": dims, "round": i // len(args.shapes.split(";"))}
            order = tools[i % len(tools):] + tools[:i % len(tools)]
            for tool in order:
                if tool in ("daemon", "local"):
                    empty(cache)
                    d = tempfile.mkdtemp(prefix="run-", dir=base)
                    e = dict(env, ABDUCTUNE_STORE=os.path.join(d, "s.sqlite"))
                    js = os.path.join(d, "t.json")
                    cmd = [py, "-m", "abductune", "tune", "--mode", mode, "--kernel", kernel, "--shapes", dims_text,
                           "--budget", str(args.budget), "--json", js] + (["--no-daemon"] if tool == "local" else [])
                    wall, r = timed(cmd, e)
                    row[tool] = tune_record(wall, r, js)
                else:
                    e = dict(os.environ, TRITON_CACHE_DIR=os.path.join(tempfile.mkdtemp(prefix="tr-", dir=base), "c"))
                    row[tool] = autotune_script(kernel, dims, e)
            data["rows"].append(row)
            out.write_text(json.dumps(data, indent=1, default=str))
            dm, lo, tr = row["daemon"], row["local"], row.get("triton", {"process_s": float("nan")})
            print(f"{kernel} {dims_text}: daemon {dm['process_s']:.1f}s ({dm.get('evaluations')} ev, via daemon "
                  f"{dm['via_daemon']}) | local {lo['process_s']:.1f}s ({lo.get('evaluations')} ev)"
                  + (f" | triton script {tr['process_s']:.1f}s (first call {tr.get('first_call_s', float('nan')):.1f}s)"
                     if "triton" in row else ""), flush=True)
    except BaseException:  # never leave a daemon holding the GPU behind
        subprocess.run([py, "-m", "abductune.cli", "daemon", "stop"], env=env, capture_output=True)
        raise
    mem = {} if args.no_gpu else gpu_memory_by_pid()
    held = {p: m for p, m in mem.items() if daemon_pid and p in descendants(daemon_pid)}
    data["idle_daemon_gpu_mib"] = held
    data["gpu_memory_all"] = mem
    wall, r = timed([py, "-m", "abductune.cli", "daemon", "stop"], env)
    data["daemon_stop"] = {"process_s": wall, "stdout": r.stdout}
    out.write_text(json.dumps(data, indent=1, default=str))
    print(f"idle daemon holds GPU memory (MiB by pid): {held}; stop: {wall:.1f} s")

    def mean(key: str, tool: str, rows: list) -> str:
        v = [r[tool].get(key) for r in rows if r[tool].get(key) is not None]
        return f"{statistics.fmean(v):.1f}" if v else "-"
    print("\n| shape | daemon: process (tune), evaluations | local: process (tune), evaluations "
          "| triton.autotune script: process (first call) | daemon winner / local winner |")
    print("|---|---|---|---|---|")
    for r in data["rows"]:
        dm, lo, tr = r["daemon"], r["local"], r.get("triton", {"process_s": float("nan")})
        ratio = (dm["winner_ms"] / lo["winner_ms"]) if dm.get("winner_ms") and lo.get("winner_ms") else float("nan")
        print(f"| {r['kernel']} {','.join(f'{k}={v}' for k, v in r['dims'].items())} | {dm['process_s']:.1f} s "
              f"({dm.get('tune_s', float('nan')):.1f}), {dm.get('evaluations')} | {lo['process_s']:.1f} s "
              f"({lo.get('tune_s', float('nan')):.1f}), {lo.get('evaluations')} | "
              + (f"{tr['process_s']:.1f} s ({tr.get('first_call_s', float('nan')):.1f})" if "triton" in r else "-")
              + f" | {ratio:.3f} |")
    for group, pred in (("row kernels", lambda r: r["kernel"] != "matmul_fp16"),
                        ("matmul", lambda r: r["kernel"] == "matmul_fp16")):
        rows = [r for r in data["rows"] if pred(r)]
        if rows:
            print(f"| mean, {group} | {mean('process_s', 'daemon', rows)} s | {mean('process_s', 'local', rows)} s "
                  f"| {mean('process_s', 'triton', rows) if 'triton' in tools else '-'} s | |")


if __name__ == "__main__":
    main()
