"""Device-machine driver for the kernel zoo: smoke-test every zoo kernel, then record the ones
that work, in the order given, until a deadline (resumable: rerun with the same --out).

Run on the GPU machine from the repository root:
    PYTHONPATH=src python3 benchmarks/gpu/record_zoo.py --out zoo_raw/h100 --deadline-s 500 \
        [--kernels zoo_mm_tutorial_bf16,...] [--shapes first:N]

Smoke: the first suite shape, the kernel's first three configs of its own list and torch,
through the live evaluator (compile pool, benchmark worker, output check). A kernel none of
whose smoke configs runs is skipped with its error printed. Recording is `abductune sweep`
(`abductune.sweep.sweep`): every valid config when the space has at most 1,000, else a fixed
sample of 400 plus the kernel's own list. The last lines are a table of what is recorded.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline-s", type=float, default=500)
    ap.add_argument("--kernels", default="", help="comma-separated zoo names (default: the whole zoo)")
    ap.add_argument("--shapes", default="suite", help="'suite' or 'first:N'")
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--no-smoke", action="store_true")
    ap.add_argument("--smoke", default="", help="comma-separated kernels to smoke-test (default: all given)")
    args = ap.parse_args()
    t_start = time.time()
    deadline = t_start + args.deadline_s

    import torch
    import triton

    from abductune import kernels
    from abductune.hardware import local_hardware
    from abductune.kernels import zoo
    from abductune.measure.live import LiveEvaluator

    print(f"torch {torch.__version__} triton {triton.__version__} cuda {torch.version.cuda} "
          f"device {torch.cuda.get_device_name()} cpus {os.cpu_count()}", flush=True)
    print(subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,"
                          "temperature.gpu,power.draw", "--format=csv"], capture_output=True,
                         text=True).stdout, flush=True)
    hw = local_hardware()
    names = [n for n in args.kernels.split(",") if n] or zoo.names()
    store = Path(tempfile.mkdtemp()) / "zoo_store.sqlite"  # the device is bare: a throwaway store

    good = []
    for name in names:
        if args.no_smoke or (args.smoke and name not in args.smoke.split(",")):
            good.append(name)
            continue
        try:
            spec = kernels.get(name)
            prob = spec.problem(spec.suite_shapes()[0], hw)
            ev = LiveEvaluator(spec, prob, compile_workers=min(args.workers, 4))
            t0 = time.time()
            ms = ev.evaluate(spec.fixed_configs()[:3])
            base = ev.baseline()
            ev.close()
        except Exception as e:  # noqa: BLE001 - a broken kernel is reported, the rest go on
            print(f"SMOKE {name}: FAILED {type(e).__name__}: {str(e)[:400]}", flush=True)
            continue
        for m in ms:
            print(f"SMOKE {name} {m.config} {m.status} {m.time_ms} regs={m.registers} spills={m.spills} "
                  f"{m.error[:300]}", flush=True)
        print(f"SMOKE {name} torch {base.status} {base.time_ms} ({time.time() - t0:.1f} s)", flush=True)
        if any(m.ok for m in ms):
            good.append(name)

    record_until(good, args.out, deadline, t_start, shapes=args.shapes, workers=args.workers, hardware=hw,
                 store=store)
    print_recorded(args.out)
    print(f"total {time.time() - t_start:.0f} s", flush=True)


def record_until(names: list[str], out: str, deadline: float, t_start: float, *, shapes: str = "suite",
                 workers: int = 16, hardware=None, store=None) -> None:
    """`sweep` each kernel in turn until `deadline` (time.time()); a kernel cut short resumes
    on the next call with the same `out`. Shared with record_bundled.py."""
    from abductune import kernels
    from abductune.sweep import sweep

    for name in names:
        if time.time() > deadline:
            print(f"{name}: not started (deadline)", flush=True)
            continue
        todo = kernels.get(name).suite_shapes()
        if shapes.startswith("first:"):
            todo = todo[: int(shapes.split(":")[1])]
        last = [0.0]

        def progress(label: str, done: int, total: int) -> None:
            if time.time() - last[0] > 30:
                last[0] = time.time()
                print(f"  {label}: {done}/{total} ({time.time() - t_start:.0f} s)", flush=True)
            if time.time() > deadline:
                raise TimeoutError("deadline")

        t0 = time.time()
        try:
            paths = sweep(name, todo, out, compile_workers=workers, hardware=hardware,
                          on_progress=progress, store=store)
            print(f"{name}: done {len(paths)} shapes in {time.time() - t0:.0f} s", flush=True)
        except TimeoutError:
            print(f"{name}: stopped at the deadline (resumable)", flush=True)
        except Exception as e:  # noqa: BLE001 - a broken kernel is reported, the rest go on
            print(f"{name}: FAILED {type(e).__name__}: {str(e)[:400]}", flush=True)


def print_recorded(out: str, best_config: bool = False) -> None:
    """The table of what is recorded under `out` (with each optimum's config, if asked)."""
    from abductune.datasets.format import read_dataset

    print(f"{'dataset':52} {'configs':>7} {'ok':>5} {'best ms':>9} {'torch ms':>9}" + (" best cfg" if best_config else ""))
    for p in sorted(Path(out).rglob("*.jsonl.gz")):
        ds = read_dataset(p)
        b = ds.optimum()
        print(f"{p.parent.name + '/' + ds.name:52} {len(ds.records):7d} {len(ds.ok_records()):5d} "
              f"{b.time_ms:9.4f} {ds.baselines.get('torch_ms', float('nan')):9.4f}"
              + (f" {b.config}" if best_config else ""))


if __name__ == "__main__":
    main()
