"""Restate recorded datasets of a kernel whose caller passes a tile (a constexpr the call fixes,
not the config list) with that tile as a one-valued parameter, as record mode writes it since
session 22 (`abductune.autotune.fixed`): Liger's fused MoE GEMMs were recorded in session 14
with BLOCK_M passed by `LigerFusedMoEFunction` (BLOCK_M_TOKEN = 64 in liger_kernel/ops/fused_moe.py,
0.8.5) and absent from their space. Every record, the default and the list get the value; the
times are left as recorded (they were measured with it).

    python benchmarks/restate_call_fixed.py NAME=VALUE DATASET...
"""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from abductune.autotune.fixed import with_fixed  # noqa: E402
from abductune.datasets.format import read_dataset, write_dataset  # noqa: E402
from abductune.space import Space  # noqa: E402


def restate(path: Path, fixed: dict[str, int]) -> None:
    ds = read_dataset(path)
    space = Space.from_dict(ds.space_dict)
    if all(n in space.names for n in fixed):
        print(f"{path}: already has {', '.join(fixed)}")
        return
    aug = with_fixed(space, fixed)
    meta = dict(ds.meta)
    for k in ("default_config",):
        if meta.get(k):
            meta[k] = {**meta[k], **fixed}
    if meta.get("fixed_configs"):
        meta["fixed_configs"] = [{**c, **fixed} for c in meta["fixed_configs"]]
    meta["call_fixed"] = {**meta.get("call_fixed", {}), **fixed}
    records = [replace(m, config={**m.config, **fixed}) if "impl" not in m.config else m for m in ds.records]
    write_dataset(replace(ds, space_dict=aug.to_dict(), records=records, meta=meta), path)
    print(f"{path}: {len(records)} records restated with {fixed}")


def main() -> None:
    name, value = sys.argv[1].split("=")
    for p in sys.argv[2:]:
        restate(Path(p), {name: int(value)})


if __name__ == "__main__":
    main()
