"""Record mode after a CUDA illegal memory access: the config that faulted is recorded with the
error torch raised at its synchronisation (AcceleratorError), and every config after it in the same
process fails before launching (`RuntimeError: Triton Error [CUDA]: an illegal memory access`): the
context is dead, so those were never measured. This drops those records and turns the key's file
back into a partial `.jsonl`, so that a rerun into the same --out measures them in a fresh process.
Prints the LIBRARY_CALLS_PICK indices of the shapes still to record (space separated).

    python3 strip_poisoned.py DIR/chunk_fwd_kernel_o [--total 225]"""
import gzip
import json
import sys
from pathlib import Path

POISON = "Triton Error [CUDA]: an illegal memory access"
SHAPES = {"H16_HV16_K128_V128": 0, "H16_HV32_K128_V128": 1, "H32_HV32_K64_V64": 2, "H8_HV8_K256_V256": 3}


def main() -> None:
    d = Path(sys.argv[1])
    total = int(sys.argv[3]) if len(sys.argv) > 3 else 225
    todo = set()
    for f in sorted(d.iterdir()):
        if not f.name.endswith((".jsonl", ".jsonl.gz")):
            continue
        idx = next(i for k, i in SHAPES.items() if f.name.startswith(k + "_"))
        text = (gzip.open(f, "rt") if f.name.endswith(".gz") else open(f)).read()
        lines = [l for l in text.splitlines() if l.strip()]
        keep = [lines[0]] + [l for l in lines[1:] if POISON not in (json.loads(l).get("error") or "")]
        dropped = len(lines) - len(keep)
        if dropped or f.name.endswith(".jsonl") or len(keep) - 1 < total:
            todo.add(idx)
            part = f.with_name(f.name.removesuffix(".gz"))
            part.write_text("\n".join(keep) + "\n")
            if f != part:
                f.unlink()
        print(f"{f.name}: {len(keep) - 1} kept, {dropped} unmeasured dropped", file=sys.stderr)
    print(" ".join(str(i) for i in sorted(todo, key=[3, 1, 2, 0].index)))  # unfinished first


if __name__ == "__main__":
    main()
