"""Issue 26 on a machine with two GPUs: the fleet's per-GPU workers tune the 27-shape suite live on
one GPU, then on two, and this reports evaluations per second and whether the winners agree.

    PYTHONPATH=src python3 benchmarks/gpu/fleet_throughput.py --deadline-s 420 --executor local --out $OUT/f.json
    python benchmarks/gpu/fleet_throughput.py --smoke        # the same path on the CPU (replay, 3 shapes)
    python benchmarks/gpu/fleet_throughput.py --sim          # the suite on simulated GPUs (CPU, `fleet.simulate`)

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
kept in the JSON (`stats.workers[].phases`), and so is where the wall time went
(`fleet.timeline.occupancy`): each worker's busy share, its GPU's (benchmarking) and its
wait for compiles inside its jobs, the slow-GPU probe's seconds, and the searches open over
time (with how long fewer were open than the workers' job slots, and the workers' idle then).
Variants: `1gpu`, `2gpu` (every search open at once, the driver's default), and `1gpu-window`,
`2gpu-window` (the window the driver used before: max(4, 2 x in flight x workers) searches).
`--sim` runs the variants on simulated GPUs on the CPU (threads answering from the bundled
recordings after their recorded compile and benchmark seconds, times --sim-scale, on a host of
--sim-cores compile cores): the dispatcher and searches are the real ones.
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
WEIGHT = {1: 2.0, 2: 1.0}  # a variant's share of the deadline by its GPUs (one GPU takes twice as long)
RETIME = 0.1  # of the deadline, kept for re-timing differing winners


def suite(smoke: bool, sim: bool = False) -> list[tuple[str, dict[str, int]]]:
    from abductune import kernels

    if sim:  # the 27 recorded shapes (the suite's, recorded on an H100)
        from abductune.datasets.bundled import bundled_datasets
        from abductune.datasets.format import read_dataset

        return [(ds.problem.kernel, dict(ds.problem.dims)) for ds in map(read_dataset, bundled_datasets())]
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

    import contextlib

    from abductune.fleet.timeline import describe, occupancy

    gpus = [g for g in args.child_gpus.split(",") if g]
    jobs = suite(args.smoke, args.sim)
    mode = "replay" if args.smoke or args.sim else "live"
    cached: Any = contextlib.nullcontext()
    deadline = float(args.child_deadline)
    executor, how = None, "local processes (--executor local): the FleetWorker code, one process per GPU"
    if args.sim:
        from abductune.fleet.simulate import Host, ThreadExecutor, datasets_from

        host = Host(args.sim_cores)
        executor = ThreadExecutor(len(gpus), host, scale=args.sim_scale)
        cached = datasets_from(host)
        how = (f"simulated GPUs (--sim: threads, recorded seconds x {args.sim_scale}, {args.sim_cores} "
               "compile cores shared)")
    elif args.executor in ("auto", "ray"):
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
    window = max(4, 2 * farm.in_flight * len(gpus)) if args.child.endswith("-window") else None
    try:  # stopped at the deadline, it returns at once with the shapes that finished (`run.stopped`)
        with cached:
            run = tune_fleet(farm, jobs, mode=mode, strategy=args.strategy, budget=Budget(args.budget),
                             store=args.child_store, on_done=finished_one, deadline=start_by, searches=window)
        stopped = run.stopped or None
    except FleetError as e:
        stopped = str(e)
    finally:
        finished.set()
    wall = time.perf_counter() - t1
    measured = sum(w.measurements for w in farm.workers)
    stats = run.stats if run is not None else farm.stats()
    for w in stats["workers"]:  # where each worker's seconds went: problem switches, compile wait, benchmark
        print(f"[{args.child}] {w['gpu']}: {w['jobs']} jobs, {w['measurements']} measurements, {w['phases']}",
              flush=True)
    occ = occupancy(run.timeline) if run is not None and run.timeline else None
    for line in describe(occ) if occ else []:
        print(f"[{args.child}] {line}", flush=True)
    # results are written before the farm closes: a worker stopped mid-job gets `grace_s` to
    # finish and is then killed with its compile pool and benchmark worker (the 2-GPU run of
    # session 14 lost both variants' results to a close that never returned)
    closer = threading.Thread(target=farm.close, kwargs={"grace_s": 10.0}, daemon=True)
    closer.start()
    outcomes = run.outcomes if run is not None else done
    res = {"variant": args.child, "gpus": gpus, "executor": how, "mode": mode, "setup_s": setup_s, "wall_s": wall,
           "measurements": measured, "per_s": measured / wall if wall > 0 else 0.0, "stopped": stopped,
           "shapes": len(jobs), "finished": len(outcomes), "stats": stats, "searches_open": window or len(jobs),
           "occupancy": occ, "timeline": run.timeline if run is not None else None,
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
    if not args.smoke and not args.sim:
        env["CUDA_VISIBLE_DEVICES"] = gpus
    cmd = [sys.executable, __file__, "--child", name, "--child-gpus", gpus, "--child-json", str(out),
           "--child-store", str(tmp / f"{name}.sqlite"), "--child-deadline", str(deadline),
           "--strategy", args.strategy, "--budget", str(args.budget), "--executor", args.executor,
           "--sim-scale", str(args.sim_scale), "--sim-cores", str(args.sim_cores)]
    if args.smoke:
        cmd.append("--smoke")
    if args.sim:
        cmd.append("--sim")
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
        if not row["same_config"] and not smoke and time.time() < deadline:  # (smoke: any CPU run)
            from abductune import kernels
            from abductune.measure.target import local_hardware
            from tune_bench import compare

            spec = kernels.get(o["kernel"])
            side = compare(spec, spec.problem(o["dims"], local_hardware()), {"one": row["one"], "two": row["two"]})
            row["ratio"] = side["two"] / side["one"]  # > 1: the two-GPU winner is slower
            row["side_by_side_ms"] = side
        rows.append(row)
    return rows


def _gpus(v: dict[str, Any]) -> int:
    return len(v.get("gpus") or [])


def table(variants: list[dict[str, Any]], winners: list[dict[str, Any]]) -> str:
    """Throughput per variant (speed-up over the 1-GPU variant of the same window), where each
    worker's time went, and the winners; the issue's target last."""
    lines = [f"{'variant':11} {'GPUs':>4} {'shapes':>7} {'open':>4} {'meas.':>6} {'wall s':>7} {'evals/s':>8} "
             f"{'speed-up':>8}  executor"]
    base = {v["variant"].replace("1gpu", ""): v.get("per_s") for v in variants
            if _gpus(v) == 1 and "error" not in v}
    for v in variants:
        if "error" in v:
            lines.append(f"{v['variant']:11} {_gpus(v):>4}  {v['error']}")
            continue
        group = v["variant"].replace("2gpu", "").replace("1gpu", "")
        b = base.get(group, base.get(""))  # over the 1-GPU run of the same window, else the 1gpu one
        up = f"{v['per_s'] / b:.2f}x" if b else "-"
        lines.append(f"{v['variant']:11} {_gpus(v):>4} {v['finished']:>3}/{v['shapes']:<3} "
                     f"{v.get('searches_open', '-'):>4} {v['measurements']:>6} {v['wall_s']:>7.1f} {v['per_s']:>8.2f} "
                     f"{up:>8}  {v['executor']}" + (f" (stopped: {v['stopped']})" if v.get("stopped") else ""))
    lines.append("where the wall time went (each worker: busy in jobs / GPU benchmarking / waiting for compiles "
                 "inside its jobs / idle s); searches open at 12 even instants; time with fewer open than job slots")
    for v in variants:
        occ = v.get("occupancy")
        if not occ:
            continue
        ws = "; ".join(f"{w['busy']:.0%}/{w['gpu']:.0%}/{w['compile_wait']:.0%}/{w['idle_s']:.1f}"
                       for w in occ["workers"])
        lines.append(f"  {v['variant']:11} {ws}; probe {occ['calibration_s']:.1f} s; open "
                     f"{' '.join(map(str, occ['open']))}; short {occ['short_s']:.1f} s "
                     f"(idle {occ['short_idle_s']:.1f} worker-s); set-up before the wall {v.get('setup_s', 0):.1f} s")
    same = sum(r["same_config"] for r in winners)
    near = sum(1 for r in winners if not r["same_config"] and r["ratio"] is not None and 1 / SAME <= r["ratio"] <= SAME)
    worse = sum(1 for r in winners if not r["same_config"] and r["ratio"] is not None and r["ratio"] > SAME)
    better = sum(1 for r in winners if not r["same_config"] and r["ratio"] is not None and r["ratio"] < 1 / SAME)
    untimed = sum(1 for r in winners if not r["same_config"] and r["ratio"] is None)
    lines.append(f"winners (1gpu vs 2gpu) over {len(winners)} shape(s) both finished: {same} same config, {near} "
                 f"within {(SAME - 1) * 100:.0f}% re-timed side by side, {worse} slower on 2 GPUs, {better} faster, "
                 f"{untimed} not re-timed")
    one, two = (next((v for v in variants if v["variant"] == n and "error" not in v), None) for n in ("1gpu", "2gpu"))
    if one and two and one.get("per_s"):
        lines.append(f"target: 2-GPU evals/s >= 1.8x one GPU's: {two['per_s'] / one['per_s']:.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(OUT / "fleet_throughput.json"), help="JSON results")
    ap.add_argument("--deadline-s", type=float, default=540.0,
                    help="stop cleanly after this long, writing what it has")
    ap.add_argument("--strategy", default="abduction")
    ap.add_argument("--budget", type=int, default=32)
    ap.add_argument("--gpus", default="0,1", help="the two GPUs (CUDA ids); the 1-GPU variants use the first")
    ap.add_argument("--variants", default="1gpu,2gpu",
                    help="of 1gpu, 2gpu (every search open), 1gpu-window, 2gpu-window (the old window)")
    ap.add_argument("--executor", choices=("auto", "ray", "local"), default="auto",
                    help="auto: Ray where it imports, else local processes")
    ap.add_argument("--smoke", action="store_true", help="CPU: replay 3 shapes on 1 then 2 CPU workers")
    ap.add_argument("--sim", action="store_true", help="CPU: the 27 recorded shapes on simulated GPUs")
    ap.add_argument("--sim-scale", type=float, default=0.25, help="--sim: recorded seconds times this")
    ap.add_argument("--sim-cores", type=int, default=32, help="--sim: the host's compile cores")
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
    names = [n for n in args.variants.split(",") if n]
    bad = [n for n in names if n not in ("1gpu", "2gpu", "1gpu-window", "2gpu-window")]
    if bad or not names:
        ap.error(f"--variants: unknown {', '.join(bad) or '(none)'}")
    # each variant may run until its share of the deadline (by its GPUs: one GPU takes twice as
    # long), the last tenth kept for re-timing; a variant that ends early leaves its time to the next
    weights = [WEIGHT[int(n[0])] for n in names]
    variants = []
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as d:
        tmp = Path(d)
        for k, name in enumerate(names):
            ids = gpus[:int(name[0])]
            end = t0 + (1 - RETIME) * args.deadline_s * sum(weights[:k + 1]) / sum(weights)
            print(f"{name}: GPUs {','.join(ids)}, until {end - t0:.0f} s", flush=True)
            variants.append(run_variant(name, ",".join(ids), args, end, tmp))
    by = {v["variant"]: v for v in variants if "error" not in v}
    winners = (retime(by["1gpu"], by["2gpu"], deadline, args.smoke or args.sim)
               if "1gpu" in by and "2gpu" in by else [])
    res = {"variants": variants, "winners": winners, "strategy": args.strategy, "budget": args.budget,
           "smoke": args.smoke, "sim": args.sim, "total_s": time.time() - t0}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1, default=str))
    print(f"wrote {out}")
    print(table(variants, winners))
    return 0


if __name__ == "__main__":
    sys.exit(main())
