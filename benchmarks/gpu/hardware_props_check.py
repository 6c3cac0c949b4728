"""What abductune would assume about this GPU if the hardware table did not list it, beside what the
table says (or, for an unlisted GPU, what it assumes): limits, peaks and bandwidth from CUDA's
properties (`hardware.local_hardware` -> `from_properties`), read through torch and Triton.

    PYTHONPATH=src python3 benchmarks/gpu/hardware_props_check.py [--json OUT]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    import torch
    import triton

    from abductune import hardware

    props = torch.cuda.get_device_properties(0)
    drv = dict(triton.runtime.driver.active.utils.get_device_properties(0))
    listed = hardware.local_hardware(0)
    # the same device under a name no table holds: every figure from its properties
    real_lookup = hardware.lookup
    hardware.lookup = lambda name, strict=True: None
    try:
        unlisted = hardware.local_hardware(0)
    finally:
        hardware.lookup = real_lookup
    raw = {a: getattr(props, a, None) for a in (
        "name", "major", "minor", "multi_processor_count", "shared_memory_per_block_optin",
        "shared_memory_per_multiprocessor", "regs_per_multiprocessor", "max_threads_per_multi_processor",
        "warp_size", "L2_cache_size", "clock_rate", "memory_clock_rate", "memory_bus_width")}
    out = {"torch_props": raw, "triton_driver": drv, "listed": dataclasses.asdict(listed),
           "from_properties": dataclasses.asdict(unlisted)}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    print(f"{'field':22s} {'table':>14s} {'from properties':>16s} {'ratio':>7s}")
    for f in ("sms", "smem_per_sm", "smem_per_block", "regs_per_sm", "max_threads_per_sm", "max_blocks_per_sm",
              "l2_bytes", "mem_bandwidth"):
        a, b = getattr(listed, f), getattr(unlisted, f)
        print(f"{f:22s} {a:>14.4g} {b:>16.4g} {b / a if a else float('nan'):7.3f}")
    for d in sorted(set(listed.peak_flops) | set(unlisted.peak_flops)):
        a, b = listed.peak_flops.get(d, 0.0), unlisted.peak_flops.get(d, 0.0)
        print(f"peak {d:17s} {a:>14.4g} {b:>16.4g} {b / a if a else float('nan'):7.3f}")
    print("family", listed.family, unlisted.family, "| name", listed.name, "|", unlisted.name)


if __name__ == "__main__":
    main()
