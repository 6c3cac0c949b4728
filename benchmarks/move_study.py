"""Does a candidate theory's move win on the recorded H100 matmul data? Checked before a
theory is written, so that only moves the measurements support become theories.

Studies:
- `ktile-stages`: from a near-best config (within 3% of the shape's optimum), halve BLOCK_K
  and deepen the pipeline (stages+1 .. 2x stages; the best of those), i.e. the same bytes in
  flight in finer steps.
- `pad-tile`: a config whose M, N or K tile is larger than the smallest tile value covering the
  whole dimension, against the same config with that covering tile (one tile either way, less
  padded work).

    python benchmarks/move_study.py ktile-stages
    python benchmarks/move_study.py pad-tile

Prints per shape: pairs, moves that win / lose by more than 1%, geomean old/new time.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def pairs_ktile_stages(ds, index):
    opt = ds.optimum().time_ms
    for m in ds.ok_records():
        c = m.config
        if m.time_ms > opt * 1.03 or c["BLOCK_K"] < 32:
            continue
        moved = [index.get(_key(dict(c, BLOCK_K=c["BLOCK_K"] // 2, num_stages=s)))
                 for s in range(c["num_stages"] + 1, 2 * c["num_stages"] + 1)]
        moved = [x for x in moved if x is not None]
        if moved:
            yield m, min(moved, key=lambda x: x.time_ms)


def pairs_pad_tile(ds, index):
    dims = ds.problem.dims
    values = {p.name: sorted(p.values) for p in ds.space().params}
    for m in ds.ok_records():
        for tile, dim in (("BLOCK_M", "M"), ("BLOCK_N", "N"), ("BLOCK_K", "K")):
            cover = [v for v in values[tile] if v >= dims[dim]]
            if cover and m.config[tile] > min(cover):
                q = index.get(_key(dict(m.config, **{tile: min(cover)})))
                if q is not None:
                    yield m, q


def _key(cfg):
    return tuple(sorted(cfg.items()))


def main() -> None:
    from abductune.datasets.bundled import bundled_datasets
    from abductune.datasets.format import read_dataset

    ap = argparse.ArgumentParser()
    ap.add_argument("study", choices=["ktile-stages", "pad-tile"])
    args = ap.parse_args()
    make = pairs_ktile_stages if args.study == "ktile-stages" else pairs_pad_tile
    total = [0, 0, 0]
    print("| shape | pairs | move wins >1% | move loses >1% | geomean old/new |\n|---|---|---|---|---|")
    for path in bundled_datasets(kernel="matmul_fp16"):
        ds = read_dataset(path)
        index = {_key(m.config): m for m in ds.ok_records()}
        ratios = [old.time_ms / new.time_ms for old, new in make(ds, index)]
        if not ratios:
            continue
        win, lose = sum(r > 1.01 for r in ratios), sum(r < 0.99 for r in ratios)
        total = [total[0] + len(ratios), total[1] + win, total[2] + lose]
        print(f"| {path.name.split('.')[0]} | {len(ratios)} | {win} "
              f"| {lose} | {statistics.geometric_mean(ratios):.3f} |")
    print(f"| all | {total[0]} | {total[1]} | {total[2]} | |")


if __name__ == "__main__":
    main()
