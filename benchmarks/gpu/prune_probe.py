"""What `@abductune.autotune(configs=<list>, budget=16)` measured and refused on one shape of a
held-out zoo kernel (session 29: live, the fp8 matmul's 2048 x 8192 x 4096 missed a config one
step beyond its list that the replay finds): every row its store holds, with the status and the
reason a config was pruned unmeasured, then the autotuner's stats.

    PYTHONPATH=src python3 benchmarks/gpu/prune_probe.py --out $OUT/probe.json \
        [--kernel zoo_mm_fp8] [--dims '{"M": 2048, "N": 8192, "K": 4096}'] [--budget 16]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", default="zoo_mm_fp8")
    ap.add_argument("--dims", default='{"M": 2048, "N": 8192, "K": 4096}')
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import heldout_live as hl
    import torch
    import triton

    import abductune
    from abductune.kernels import get
    from abductune.store import Store

    fn, key, bind = hl.launcher(a.kernel)
    lst = [triton.Config({k: v for k, v in c.items() if k not in hl.LAUNCH_KW}, num_warps=c["num_warps"],
                         num_stages=c["num_stages"]) for c in get(a.kernel).fixed_configs()]
    store = os.path.join(tempfile.mkdtemp(prefix="prune-probe-"), "s.sqlite")
    tuned = abductune.autotune(configs=lst, key=key, budget=a.budget, store=store)(fn)
    case = hl.Case(a.kernel, json.loads(a.dims), "cuda", bind)
    case.launch(tuned)
    torch.cuda.synchronize()
    with Store(store) as s:
        rows = s.execute("SELECT config, status, time_ms, kind, error FROM measurements ORDER BY id")
    out = {"kernel": a.kernel, "dims": json.loads(a.dims), "budget": a.budget, "stats": dict(tuned.stats),
           "rows": [{"config": json.loads(c), "status": st, "time_ms": t, "kind": k, "error": e} for c, st, t, k, e in rows]}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1))
    for r in out["rows"]:
        t = "-" if r["time_ms"] is None else f"{r['time_ms']:.4f}"
        print(f"{r['kind']:8s} {r['status']:8s} {t:>8s} {json.dumps(r['config'])} {(r['error'] or '')[:100]}")
    print("stats", out["stats"])


if __name__ == "__main__":
    main()
