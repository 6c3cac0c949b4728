"""Issue 26 on a machine with two GPUs: the fleet's per-GPU workers tune the 27-shape suite live on
one GPU, then on two, and this reports evaluations per second and whether the winners agree.

    PYTHONPATH=src python3 benchmarks/gpu/fleet_throughput.py --deadline-s 540
    python benchmarks/gpu/fleet_throughput.py --smoke        # the same path on the CPU (replay, 3 shapes)

Each variant (`1gpu`: CUDA_VISIBLE_DEVICES=0, then `2gpu`: 0,1) runs in a child process with an
empty Triton cache and an empty store, so compile time counts and nothing carries over. The child
runs `fleet.tune_fleet` (every shape at once, one worker per GPU, two jobs in flight each) under
Ray (a local cluster) where Ray imports, else the same `FleetWorker` code under
`fleet.ProcessExecutor` (one local process per GPU), and says which. Strategy abduction with
`--full-budget` semantics (no early stop), so both variants do the same work per shape.
Throughput is the workers' measurements (seeds, search, baselines, run-offs; the slow-GPU probe
not) over the wall time of `tune_fleet`. A variant past its share of the deadline is stopped:
its rate is still measured on what it did, and only shapes both variants finished are compared.
Each worker's account (jobs, problem switches, compile wait, benchmark seconds) is logged and
kept in the JSON (`stats.workers[].phases`).
Then each shape where the two winners differ is re-timed side by side on GPU 0 (`tune_bench.compare`,
interleaved) to tell "same within noise" from "worse".
Targets (issue 26): evals/s(2 GPUs) >= 1.8 x evals/s(1 GPU); winners the same or within 3%.
The table is printed last; the JSON goes to --out (default benchmarks/out/fleet_throughput.json).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

OUT = ROOT / "benchmarks" / "out"
KERNELS = ("matmul_fp16", "softmax_fp16", "rmsnorm_fp16", "gelu_mul_fp16")
SAME = 1.03  # winners re-timed within 3% of each other count as the same
# of the deadline, where each variant must be done (then re-timing): the same time for each, so
# a variant stopped at its share is measured over as long as the other (session 14 gave the
# 2-GPU variant what the 1-GPU one left, 12 s once that one had hung to its kill)
SHARES = {"1gpu": 0.45, "2gpu": 0.9}


def suite(smoke: bool) -> list[tuple[str, dict[str, int]]]:
    from abductune import kernels

    if smoke:  # replayable shapes on the CPU
        from abductune.datasets.bundled import bundled_datasets
        from abductune.datasets.format import read_dataset

        return [(k, dict(read_dataset(p).problem.dims)) for k in ("softmax_fp16", "gelu_mul_fp16")
                for p in bundled_datasets(kernel=k)[:2]][:3]
    return [(k, dict(d)) for k in KERNELS for d in kernels.get(k).suite_shapes()]


# ----------------------------------------------------------------------------- one variant (child)

def child(args: argparse.Namespace) -> None:
    from abductune.fleet import Farm, FleetError, ProcessExecutor, tune_fleet
    from abductune.search import Budget

    gpus = [g for g in args.child_gpus.split(",") if g]
    jobs = suite(args.smoke)
    mode = "replay" if args.smoke else "live"
    deadline = float(args.child_deadline)
    executor, how = None, "local processes (--executor local): the FleetWorker code, one process per GPU"
    if args.executor in ("auto", "ray"):
        try:
            import ray  # noqa: F401

            from abductune.integrations.ray import RayExecutor, connect

            connect("local")
            executor = RayExecutor(workers=len(gpus), resource="CPU" if args.smoke else "GPU")
            how = f"Ray {ray.__version__} (a local cluster)"
        except ImportError:
            if args.executor == "ray":
                raise
            how = "local processes (Ray is not importable here): the same FleetWorker code, one process per GPU"
    if executor is None:
        executor = (ProcessExecutor(workers=len(gpus)) if args.smoke else ProcessExecutor(gpus=gpus))
    print(f"[{args.child}] executor: {how}", flush=True)
    done: list[Any] = []
    t0 = time.perf_counter()
    farm = Farm(executor).start()
    setup_s = time.perf_counter() - t0
    stopped = None

    def stop_at_deadline() -> None:
        while time.time() < deadline and not finished.is_set():
            time.sleep(0.5)
        if not finished.is_set():
            farm.stop(FleetError("the benchmark's deadline"))
    finished = threading.Event()
    threading.Thread(target=stop_at_deadline, daemon=True).start()

    def finished_one(outcome: Any) -> None:  # progress in the log: a run cut short still shows how far it got
        done.append(outcome)
        print(f"[{args.child}] {len(done)}/{len(jobs)} shapes done at {time.perf_counter() - t1:.0f} s: "
              f"{outcome.kernel} {outcome.dims}", flush=True)
    t1 = time.perf_counter()
    run = None
    start_by = time.monotonic() + (deadline - time.time())  # no new shape after the deadline
    try:  # stopped at the deadline, it returns at once with the shapes that finished (`run.stopped`)
        run = tune_fleet(farm, jobs, mode=mode, strategy=args.strategy, budget=Budget(args.budget),
                         store=args.child_store, on_done=finished_one, deadline=start_by)
        stopped = run.stopped or None
    except FleetError as e:
        stopped = str(e)
    finally:
        finished.set()
    wall = time.perf_counter() - t1
    measured = sum(w.measurements for w in farm.workers)
    stats = farm.stats()
    for w in stats["workers"]:  # where each worker's seconds went: problem switches, compile wait, benchmark
        print(f"[{args.child}] {w['gpu']}: {w['jobs']} jobs, {w['measurements']} measurements, {w['phases']}",
              flush=True)
    # results are written before the farm closes: a worker stopped mid-job gets `grace_s` to
    # finish and is then killed with its compile pool and benchmark worker (the 2-GPU run of
    # session 14 lost both variants' results to a close that never returned)
    closer = threading.Thread(target=farm.close, kwargs={"grace_s": 10.0}, daemon=True)
    closer.start()
    outcomes = run.outcomes if run is not None else done
    res = {"variant": args.child, "gpus": gpus, "executor": how, "mode": mode, "setup_s": setup_s, "wall_s": wall,
           "measurements": measured, "per_s": measured / wall if wall > 0 else 0.0, "stopped": stopped,
           "shapes": len(jobs), "finished": len(outcomes), "stats": stats,
           "calibration": run.calibration if run is not None else [],
           "outcomes": [{"kernel": o.kernel, "dims": o.dims, "winner": o.winner.config if o.winner else None,
                         "winner_ms": o.winner.time_ms if o.winner and o.winner.ok else None,
                         "evaluations": o.evaluations, "wall_s": o.wall_s} for o in outcomes]}
    Path(args.child_json).write_text(json.dumps(res, indent=1, default=str))
    print(f"[{args.child}] {measured} measurements in {wall:.1f} s ({res['per_s']:.2f}/s), "
          f"{len(outcomes)}/{len(jobs)} shapes" + (f"; stopped: {stopped}" if stopped else ""), flush=True)
    closer.join(timeout=40)
    if closer.is_alive():  # a safety net only: `Farm.close` kills what is left after its grace
        print(f"[{args.child}] the farm did not close in 40 s; leaving its processes to the exit", flush=True)
        os._exit(0)


# ----------------------------------------------------------------------------- the parent

def run_variant(name: str, gpus: str, args: argparse.Namespace, deadline: float, tmp: Path) -> dict[str, Any]:
    out = tmp / f"{name}.json"
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp / f"triton-{name}"),
           "ABDUCTUNE_STORE": str(tmp / f"{name}.sqlite"), "ABDUCTUNE_DAEMON": "0",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    if not args.smoke:
        env["CUDA_VISIBLE_DEVICES"] = gpus
    cmd = [sys.executable, __file__, "--child", name, "--child-gpus", gpus, "--child-json", str(out),
           "--child-store", str(tmp / f"{name}.sqlite"), "--child-deadline", str(deadline),
           "--strategy", args.strategy, "--budget", str(args.budget), "--executor", args.executor]
    if args.smoke:
        cmd.append("--smoke")
    try:
        rc = subprocess.run(cmd, env=env, timeout=max(60.0, deadline - time.time() + 120)).returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    if not out.exists():
        return {"variant": name, "gpus": gpus.split(","), "error": f"child exited {rc} without results"}
    return json.loads(out.read_text())


def retime(one: dict[str, Any], two: dict[str, Any], deadline: float, smoke: bool) -> list[dict[str, Any]]:
    """Per shape both variants finished: same config, or the two winners re-timed side by side."""
    a = {json.dumps([o["kernel"], o["dims"]]): o for o in one.get("outcomes", [])}
    rows = []
    for o in two.get("outcomes", []):
        k = json.dumps([o["kernel"], o["dims"]])
        if k not in a or a[k]["winner"] is None or o["winner"] is None:
            continue
        row = {"kernel": o["kernel"], "dims": o["dims"], "one": a[k]["winner"], "two": o["winner"],
               "same_config": a[k]["winner"] == o["winner"], "ratio": None}
        if not row["same_config"] and not smoke and time.time() < deadline:
            from abductune import kernels
            from abductune.measure.target import local_hardware
            from tune_bench import compare

            spec = kernels.get(o["kernel"])
            side = compare(spec, spec.problem(o["dims"], local_hardware()), {"one": row["one"], "two": row["two"]})
            row["ratio"] = side["two"] / side["one"]  # > 1: the two-GPU winner is slower
            row["side_by_side_ms"] = side
        rows.append(row)
    return rows


def table(variants: list[dict[str, Any]], winners: list[dict[str, Any]]) -> str:
    lines = [f"{'variant':8} {'GPUs':>4} {'shapes':>7} {'meas.':>6} {'wall s':>7} {'evals/s':>8} {'speed-up':>8}"
             "  executor"]
    base = next((v.get("per_s") for v in variants if v["variant"] == "1gpu"), None)
    for v in variants:
        if "error" in v:
            lines.append(f"{v['variant']:8} {len(v['gpus']):>4}  {v['error']}")
            continue
        up = f"{v['per_s'] / base:.2f}x" if base else "-"
        lines.append(f"{v['variant']:8} {len(v['gpus']):>4} {v['finished']:>3}/{v['shapes']:<3} {v['measurements']:>6} "
                     f"{v['wall_s']:>7.1f} {v['per_s']:>8.2f} {up:>8}  {v['executor']}"
                     + (f" (stopped: {v['stopped']})" if v.get("stopped") else ""))
    same = sum(r["same_config"] for r in winners)
    near = sum(1 for r in winners if not r["same_config"] and r["ratio"] is not None and 1 / SAME <= r["ratio"] <= SAME)
    worse = sum(1 for r in winners if not r["same_config"] and r["ratio"] is not None and r["ratio"] > SAME)
    better = sum(1 for r in winners if not r["same_config"] and r["ratio"] is not None and r["ratio"] < 1 / SAME)
    untimed = sum(1 for r in winners if not r["same_config"] and r["ratio"] is None)
    lines.append(f"winners over {len(winners)} shape(s) both finished: {same} same config, {near} within "
                 f"{(SAME - 1) * 100:.0f}% re-timed side by side, {worse} slower on 2 GPUs, {better} faster, "
                 f"{untimed} not re-timed")
    if base and len(variants) > 1 and "per_s" in variants[-1]:
        lines.append(f"target: 2-GPU evals/s >= 1.8x one GPU's: {variants[-1]['per_s'] / base:.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(OUT / "fleet_throughput.json"), help="JSON results")
    ap.add_argument("--deadline-s", type=float, default=540.0,
                    help="stop cleanly after this long, writing what it has")
    ap.add_argument("--strategy", default="abduction")
    ap.add_argument("--budget", type=int, default=32)
    ap.add_argument("--gpus", default="0,1", help="the two GPUs (CUDA ids); the 1-GPU variant uses the first")
    ap.add_argument("--executor", choices=("auto", "ray", "local"), default="auto",
                    help="auto: Ray where it imports, else local processes")
    ap.add_argument("--smoke", action="store_true", help="CPU: replay 3 shapes on 1 then 2 CPU workers")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-gpus", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-json", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-store", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-deadline", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args)
        return 0
    t0 = time.time()
    deadline = t0 + args.deadline_s
    gpus = [g for g in args.gpus.split(",") if g]
    if len(gpus) < 2:
        ap.error("--gpus needs two GPU ids")
    variants = []
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as d:
        tmp = Path(d)
        for name, ids in (("1gpu", gpus[:1]), ("2gpu", gpus[:2])):
            end = t0 + SHARES[name] * args.deadline_s
            print(f"{name}: GPUs {','.join(ids)}, until {end - t0:.0f} s", flush=True)
            variants.append(run_variant(name, ",".join(ids), args, end, tmp))
    winners = retime(variants[0], variants[1], deadline, args.smoke) if all("error" not in v for v in variants) else []
    res = {"variants": variants, "winners": winners, "strategy": args.strategy, "budget": args.budget,
           "smoke": args.smoke, "total_s": time.time() - t0}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1, default=str))
    print(f"wrote {out}")
    print(table(variants, winners))
    return 0


if __name__ == "__main__":
    sys.exit(main())
