"""How an idle GPU's clock ramps under the benchmark worker's timing, with and without the
worker's warm-up (issue 10, item 6; issue 8's live figures).

    python3 benchmarks/gpu/clock_ramp_probe.py --out ramp.json --idle 15 --rounds 2

In one process, with the benchmark worker's own `_Bench` (flush buffer, event timing):
- *trace*: after `--idle` s without GPU work, the warm-up loop runs for 1 s while NVML's SM
  clock is read every 5 ms: how long the clock takes to reach its maximum under load;
- *cold* and *warmed*: after `--idle` s, ten bursts shaped like a search's timings (3 timed
  runs of a fixed torch matmul, then 0.2 s without GPU work, as while waiting on compiles),
  either at once or after `_Bench.warm_up()`. Each burst's median is divided by the median
  of the last five bursts: a first burst well above 1 is what a search would have mistaken
  for a slow config. Conditions alternate between rounds.

Clocks are only read, never set. Prints a table last.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--idle", type=float, default=15.0)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    import pynvml
    import torch

    from abductune.measure.worker import WARMUP_S, _Bench

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)

    def sm_mhz() -> int:
        return pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)

    bench = _Bench()
    shapes = {"gemv 1x4096x4096": (1, 4096, 4096), "gemm 4096^3": (4096, 4096, 4096)}
    ops = {}
    for name, (m, n, k) in shapes.items():
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        ops[name] = (lambda a=a, b=b: torch.matmul(a, b))
    data: dict = {"warmup_s": WARMUP_S, "idle_s": args.idle, "trace": [], "bursts": []}

    # the clock under continuous load, after an idle spell
    time.sleep(args.idle)
    t0, trace = time.perf_counter(), []
    while time.perf_counter() - t0 < 1.0:
        for _ in range(4):
            bench.flush.zero_()
        trace.append((time.perf_counter() - t0, sm_mhz()))
        time.sleep(0.005)
    torch.cuda.synchronize()
    top = max(c for _, c in trace)
    reach = next((t for t, c in trace if c >= 0.95 * top), None)
    data["trace"] = trace
    data["reach_95pct_s"] = reach
    print(f"idle {args.idle:.0f}s, then load: first clock {trace[0][1]} MHz, 95% of {top} MHz after "
          f"{reach if reach is None else round(reach, 3)} s", flush=True)

    for rnd in range(args.rounds):
        for cond in (("cold", "warmed") if rnd % 2 == 0 else ("warmed", "cold")):
            for name, fn in ops.items():
                time.sleep(args.idle)
                if cond == "warmed":
                    bench.warm_up()
                rows = []
                for _ in range(10):
                    mhz = sm_mhz()
                    med = statistics.median(bench._time(fn, 3))
                    rows.append({"sm_mhz": mhz, "median_ms": med})
                    time.sleep(0.2)
                ref = statistics.median(r["median_ms"] for r in rows[5:])
                rec = {"round": rnd, "condition": cond, "op": name, "first_ratio": rows[0]["median_ms"] / ref,
                       "max_ratio_first3": max(r["median_ms"] for r in rows[:3]) / ref,
                       "first_sm_mhz": rows[0]["sm_mhz"], "bursts": rows}
                data["bursts"].append(rec)
                Path(args.out).write_text(json.dumps(data, indent=1))
                print(f"round {rnd} {cond:6s} {name:18s} first burst / steady {rec['first_ratio']:.3f}, "
                      f"worst of first 3 {rec['max_ratio_first3']:.3f}, clock at first burst {rows[0]['sm_mhz']} MHz",
                      flush=True)

    print("\n| op | condition | first burst / steady, mean (range) | clock at first burst, MHz |")
    print("|---|---|---|---|")
    for name in ops:
        for cond in ("cold", "warmed"):
            rs = [r for r in data["bursts"] if r["op"] == name and r["condition"] == cond]
            fr = [r["first_ratio"] for r in rs]
            print(f"| {name} | {cond} | {statistics.fmean(fr):.3f} ({min(fr):.3f}-{max(fr):.3f}) | "
                  f"{', '.join(str(r['first_sm_mhz']) for r in rs)} |")


if __name__ == "__main__":
    main()
