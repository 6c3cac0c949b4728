"""Put a library kernel's compile-time assertions into recorded datasets' headers, as space constraints.

A kernel's `tl.static_assert(BLOCK_N <= HEAD_DIM)` fails every config with a key tile wider than
the head at compile time. Live, the decorator and `patch_triton` read such assertions from the
kernel's source with the call's values (`abductune.autotune.asserts`) and record mode writes them
into a new dataset's header; datasets recorded before that (FlagGems' attention, session 23)
carry none, so a replay or a zero-shot judged on them could pick a config that the live path
never would. This reads the kernel's source from an unpacked copy of the library (the function
each header's `meta.origin` names, as `source_facts.py` does; read, never copied), fills each
assertion with the call's values taken from the problem's dims, and writes the constraints into
each header. Records that fail them are taken out of the file (a record outside its header's
space is dropped, with a warning, on every read), only where each one is a recorded failure,
which the assertion explains; their count goes into the header (`meta.asserts`). A measured
record that fails a constraint stops the script: the assertion would not be what failed.

    python benchmarks/zoo_asserts.py LIBSRC --value HEAD_DIM=head_dim \
        src/abductune/datasets/zoo_data/h100/flaggems_attn_fwd_bf16/*.jsonl.gz

LIBSRC holds the unpacked libraries (flag_gems/, ...), as for `source_facts.py`.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from abductune.autotune.asserts import assert_constraints, kernel_asserts  # noqa: E402
from abductune.datasets.format import read_dataset, write_dataset  # noqa: E402
from abductune.space import parse_constraint  # noqa: E402
from abductune.theory.store.scope import kernel_def  # noqa: E402
from source_facts import origin_source  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("libsrc", help="the unpacked libraries (flag_gems/, ...)")
    ap.add_argument("datasets", nargs="+")
    ap.add_argument("--value", action="append", default=[], metavar="NAME=DIM",
                    help="an argument of the call and the problem dim it equals (HEAD_DIM=head_dim)")
    ap.add_argument("--dry-run", action="store_true", help="print the constraints, write nothing")
    a = ap.parse_args()
    pairs = [v.split("=", 1) for v in a.value]
    for path in a.datasets:
        ds = read_dataset(path)
        src = origin_source(Path(a.libsrc), ds.meta, path)
        conds = kernel_asserts(src)
        if not conds:
            raise SystemExit(f"{path}: the kernel has no top-level tl.static_assert")
        values = {name: int(ds.problem.dims[dim]) for name, dim in pairs}
        found = assert_constraints(conds, ds.space(), values)
        have = list(ds.space_dict.get("constraints") or [])
        new = [c for c in found if c not in have]
        checks = [parse_constraint(c, ds.space().names) for c in new]
        kept, failing = [], []
        for m in ds.records:
            (kept if all(chk(m.config) for chk in checks) else failing).append(m)
        print(f"{path}: {values} -> {new or 'nothing new'}" + (f" ({len(failing)} records fail it)" if new else ""))
        measured = [m for m in failing if m.time_ms is not None]
        if measured:
            raise SystemExit(f"{path}: {len(measured)} measured records fail {new}, e.g. {measured[0].config}: "
                             "the assertion is not what failed; nothing written")
        if new and not a.dry_run:
            meta = {**ds.meta, "asserts": {"constraints": have + new, "records_removed": len(failing),
                                           "from": f"{kernel_def(src).name}'s tl.static_assert, {dict(pairs)}",
                                           "command": "benchmarks/zoo_asserts.py"}}
            write_dataset(replace(ds, space_dict={**ds.space_dict, "constraints": have + new}, records=kept,
                                  meta=meta), path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
