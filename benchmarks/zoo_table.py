"""The table of docs/ZOO.md, from the zoo datasets shipped in the package.

    python benchmarks/zoo_table.py            # prints the markdown table
    python benchmarks/zoo_table.py --json F   # also writes the rows as JSON

Per kernel: origin, class, the GPU it was recorded on, dtypes, shapes, the space's valid configs, how many were recorded
(all, or a fixed sample), failures, and the time spread of the records (median over records
of (max - min) / median of its timed runs).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def rows() -> list[dict]:
    from abductune.datasets.format import read_dataset
    from abductune.datasets.zoo import zoo_kernels

    out = []
    for kernel, paths in sorted(zoo_kernels().items()):
        dss = [read_dataset(p) for p in paths]
        d0 = dss[0]
        spreads = []
        for ds in dss:
            for m in ds.ok_records():
                s = [x for x in (m.samples_ms or []) if x > 0]
                if len(s) >= 3:
                    spreads.append((max(s) - min(s)) / statistics.median(s))
        sample = d0.meta.get("sample")
        valid = sample["valid_in_space"] if sample else len(d0.stated_space().valid_configs())
        recorded = sample["size"] if sample else valid
        out.append({
            "kernel": kernel, "origin": d0.meta.get("origin", ""), "class": d0.problem.kernel_class,
            "gpu": ", ".join(sorted({ds.problem.hardware.name for ds in dss if ds.problem.hardware})),
            "dtypes": ",".join(sorted(set(d0.problem.dtypes.values()))),
            "shapes": [ds.name for ds in dss], "valid": valid, "recorded": recorded,
            "sampled": bool(sample),
            "failed": sum(len(ds.records) - len(ds.ok_records()) for ds in dss),
            "records": sum(len(ds.records) for ds in dss),
            "spread_median": statistics.median(spreads) if spreads else None,
        })
    return out


def markdown(rs: list[dict]) -> str:
    lines = ["| kernel | origin | class | GPU | dtypes | shapes | valid configs | recorded per shape | "
             "failed records | spread (median) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rs:
        rec = f"sample of {r['recorded']}" if r["sampled"] else f"all {r['recorded']}"
        spread = f"{100 * r['spread_median']:.1f}%" if r["spread_median"] is not None else "-"
        lines.append(f"| `{r['kernel']}` | {r['origin']} | {r['class']} | {r['gpu']} | {r['dtypes']} | "
                     f"{len(r['shapes'])}: {', '.join(r['shapes'])} | {r['valid']} | {rec} | "
                     f"{r['failed']} of {r['records']} | {spread} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rs = rows()
    if args.json:
        Path(args.json).write_text(json.dumps(rs, indent=1))
    print(markdown(rs))
    print(f"\n{len(rs)} kernels, {sum(len(r['shapes']) for r in rs)} shapes")


if __name__ == "__main__":
    main()
