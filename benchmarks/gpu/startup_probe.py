"""Where a fresh process's first seconds of a live tune go: the workers' fork server (torch
and Triton imported once), the benchmark worker's CUDA start and setup, and each seed's
compile, for one softmax shape with an empty Triton cache. Prints a timeline.

    python3 benchmarks/gpu/startup_probe.py
"""
from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))


def main() -> None:
    t0 = time.perf_counter()
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="tc-")

    def at(msg: str) -> None:
        print(f"{time.perf_counter() - t0:6.2f}s {msg}", flush=True)
    from abductune.measure.live import BenchWorker, Compiler, prestart
    from abductune.measure.target import compile_target, local_hardware
    at("imports")
    prestart()  # what a live tune does first
    at("fork server started (its imports run in the background)")
    from abductune import kernels
    from abductune.tune import seed_list

    spec = kernels.get("softmax_fp16")
    prob = spec.problem({"rows": 4096, "cols": 32000}, local_hardware())
    c = Compiler(16, facts="triton", target=compile_target())
    c.warm()
    w = BenchWorker()

    def bench_start() -> None:
        w._setup_msg = {"op": "setup", "kernel": spec.name, "problem": prob.to_dict(), "seed": 0}
        w._start()
        at("benchmark worker started and set up")
    th = threading.Thread(target=bench_start)
    th.start()
    seeds, _ = seed_list(prob, spec.space(), spec.default_config(), None, True, None, exclude=prob)
    cfgs = [s.config for s in seeds]
    at(f"{len(cfgs)} seeds")
    c.compile(spec.name, cfgs, prob,
              on_done=lambda i, r: at(f"seed {i} compiled ({r.status}, {r.compile_s:.2f}s in its worker)"))
    th.join()
    at("first batch ready to time")
    w.close()
    c.shutdown()


if __name__ == "__main__":
    main()
