"""Device-machine driver for the bundled H100 datasets (src/abductune/datasets/data/README.md) and
the noise study (docs/PERFORMANCE.md, "Noise on the H100"): smoke-test the live path, then
record datasets until a deadline.

Run on the GPU machine from the repository root:
    python benchmarks/gpu/record_bundled.py --out DIR --deadline-s 480 [--kernels matmul_fp16,...]
It prints the environment, a smoke test (4 configs + torch baseline) and sweep progress;
the sweep is resumable, so a second call with the same DIR continues where this one stopped.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline-s", type=float, default=480)
    ap.add_argument("--kernels", default="matmul_fp16")
    ap.add_argument("--shapes", default="suite", help="'suite' or 'first:N'")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--noise", default="", help="comma-separated matmul_fp16 shape names for the noise study")
    # results go where --noise-out says, else to the untracked benchmarks/out/
    ap.add_argument("--noise-out", default=str(Path(__file__).resolve().parents[1] / "out" / "noise.json"))
    args = ap.parse_args()
    t_start = time.time()

    import torch
    import triton

    from abductune import kernels
    from abductune.measure.live import LiveEvaluator
    from abductune.hardware import local_hardware

    print(f"torch {torch.__version__} triton {triton.__version__} cuda {torch.version.cuda} "
          f"device {torch.cuda.get_device_name()} cpus {os.cpu_count()}", flush=True)
    print(subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,"
                          "temperature.gpu,power.draw", "--format=csv"], capture_output=True,
                         text=True).stdout, flush=True)
    hw = local_hardware()
    if args.smoke:
        spec = kernels.get("matmul_fp16")
        prob = spec.problem({"M": 512, "N": 4096, "K": 4096}, hw)
        ev = LiveEvaluator(spec, prob, compile_workers=4)
        cfgs = spec.fixed_configs()[:4]
        t0 = time.time()
        for m in ev.evaluate(cfgs):
            print("smoke", m.config, m.status, m.time_ms, m.registers, m.spills, m.smem_bytes,
                  m.compile_s, m.error[:300], m.extra, flush=True)
        print("baseline", ev.baseline().time_ms, "smoke s", time.time() - t0, flush=True)
        ev.close()

    # stop the sweep (cleanly, between configs) before the deadline; the loop is record_zoo's
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from record_zoo import print_recorded, record_until

    record_until(args.kernels.split(","), args.out, t_start + args.deadline_s, t_start, shapes=args.shapes,
                 workers=args.workers, hardware=hw)
    if args.noise:
        from abductune.sweep import noise_study

        paths = [Path(args.out) / "matmul_fp16" / f"{n}.jsonl.gz" for n in args.noise.split(",")]
        rows = noise_study("matmul_fp16", [p for p in paths if p.exists()])
        Path(args.noise_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.noise_out).write_text(json.dumps(rows, indent=1))
        for grp in ("top", "random"):
            sp = sorted(r["spread"] for r in rows if r["group"] == grp)
            vs = sorted(r["vs_sweep"] for r in rows if r["group"] == grp)
            if sp:
                print(f"noise {grp}: spread median {sp[len(sp)//2]:.3f} max {sp[-1]:.3f}; "
                      f"re-measured/sweep median {vs[len(vs)//2]:.3f} range {vs[0]:.3f}-{vs[-1]:.3f}")

    print_recorded(args.out, best_config=True)
    print(f"total {time.time() - t_start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
