"""Which of Helion `quick`'s config fields carry its gain over Helion's default config, on one
kernel and shape (issue 29): by default attention (1, 32, 4096, 128) (B, H, S, D), where the
default config took 1.18 ms and quick's winner 0.72 ms on the H100 (session 20).

    PYTHONPATH=src python3 benchmarks/gpu/helion_ablate.py --deadline-s 130 --out $OUT/helion_ablate.json

Both configs come from an earlier `helion_bench.py` JSON (`--from`, rows of mode `none` and
`quick` for `--kernel` and `--shape`). The configs timed:
- the default and quick's winner;
- quick's winner with each field that differs reverted to the default's value, one at a time
  (`quick-FIELD`), and the default with each such field taken from quick's winner (`default+FIELD`);
- a grid on the default: `block_sizes` with the last (key) block 64 and 128, each with `maxnreg`
  None / 128 / 256 and `pid_type` flat / persistent_blocked.
Each config is normalised by the bound kernel's `ConfigSpec` as a user's config is; where Helion
rejects it (`maxnreg` with a flat pid, say) it is normalised as Helion's autotuner does
(`_fix_invalid`: the offending field dropped), and the row keeps Helion's message (`fixed`) and
the config it actually ran (`normalized`). Configs that normalise to the same config are timed
once. Each is compiled, checked against PyTorch's op in fp32 (`max_err`), its generated Triton
kernel's `n_regs` / `n_spills` read from Triton's in-memory cache, and all are then timed side by
side in rotated rounds by `helion_bench.retime` (PyTorch's op among them). Writes `--out`, prints
a table sorted by time.
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(HERE))

import torch  # noqa: E402

import helion  # noqa: E402
from helion.exc import InvalidConfig  # noqa: E402
from helion_bench import retime  # noqa: E402
from helion_bench_kernels import device_name, kernels, sync, versions  # noqa: E402

SESSION20 = ROOT / "benchmarks" / "results" / "session20" / "helion_attn_h100.json"


def earlier_configs(path: Path, kernel: str, shape: list[int]) -> dict[str, dict[str, Any]]:
    """mode -> config dict, for the `none` and `quick` rows of `kernel` at `shape`."""
    rows = json.loads(path.read_text())["rows"]
    out = {}
    for r in rows:
        if r.get("kernel") == kernel and list(r.get("shape", [])) == shape and r.get("mode") in ("none", "quick"):
            out[r["mode"]] = json.loads(r["config_json"])
    missing = {"none", "quick"} - set(out)
    if missing:
        raise SystemExit(f"{path}: no {', '.join(sorted(missing))} row for {kernel} {shape}")
    return out


def normalized(spec: Any, cfg: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The config Helion runs for `cfg`, and Helion's message where it had to fix it."""
    c = helion.Config(**copy.deepcopy(cfg))
    try:
        spec.normalize(c)
        return dict(c.config), None
    except InvalidConfig as e:
        c = helion.Config(**copy.deepcopy(cfg))
        spec.normalize(c, _fix_invalid=True)
        return dict(c.config), str(e)


def registers(run: Any) -> list[dict[str, Any]]:
    """n_regs / n_spills of the Triton kernels a compiled Helion config launches (Triton's
    in-memory cache of the `_helion_*` JIT functions in its module)."""
    out = []
    for name, fn in getattr(run, "__globals__", {}).items():
        caches = getattr(fn, "device_caches", None)
        if not name.startswith("_helion_") or caches is None:
            continue
        for entry in caches.values():
            for ck in (entry[0] if isinstance(entry, tuple) else entry).values():
                if getattr(ck, "n_regs", None) is None and hasattr(ck, "_init_handles"):
                    ck._init_handles()
                out.append({"kernel": name, "n_regs": getattr(ck, "n_regs", None),
                            "n_spills": getattr(ck, "n_spills", None)})
    return out


def variants(default: dict[str, Any], quick: dict[str, Any], diffs: list[str], key_blocks: list[int]
             ) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, group, requested config) in priority order (the first ones run if time is short)."""
    def with_field(base: dict[str, Any], src: dict[str, Any], field: str) -> dict[str, Any]:
        c = copy.deepcopy(base)
        if field in src:
            c[field] = copy.deepcopy(src[field])
        else:
            c.pop(field, None)
        return c

    out = [("default", "ends", default), ("quick", "ends", quick)]
    out += [(f"quick-{f}", "quick, one field reverted", with_field(quick, default, f)) for f in diffs]
    out += [(f"default+{f}", "default, one field from quick", with_field(default, quick, f)) for f in diffs]
    for b in key_blocks:
        for pid in ("flat", "persistent_blocked"):
            for reg in (None, 128, 256):
                c = copy.deepcopy(default)
                c["block_sizes"] = [*default["block_sizes"][:-1], b]
                c["pid_type"], c["maxnreg"] = pid, reg
                out.append((f"default bs..{b} {pid} maxnreg={reg}", "grid", c))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", default="attention")
    ap.add_argument("--shape", default="1,32,4096,128")
    ap.add_argument("--from", dest="source", default=str(SESSION20), help="a helion_bench.py JSON with none/quick rows")
    ap.add_argument("--key-blocks", default="64,128", help="the last block size's values in the grid")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--deadline-s", type=float, default=0.0, help="compile no more configs, and fit the rounds, by then")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "out" / "helion_ablate.json"))
    a = ap.parse_args()
    t_start = time.perf_counter()
    left = (lambda: a.deadline_s - (time.perf_counter() - t_start)) if a.deadline_s else (lambda: float("inf"))
    shape = [int(x) for x in a.shape.split(",")]
    ends = earlier_configs(Path(a.source), a.kernel, shape)

    fn, make_args, reference, _ = kernels()[a.kernel]
    torch.manual_seed(0)
    args = make_args(tuple(shape))
    want = reference(*args).float()
    bound = helion.kernel(static_shapes=True, autotune_effort="none")(fn).bind(args)
    spec = bound.config_spec
    default, _ = normalized(spec, ends["none"])
    quick, _ = normalized(spec, ends["quick"])
    diffs = sorted(f for f in set(default) | set(quick) if default.get(f) != quick.get(f))
    print(f"fields where quick's winner differs from the default: {diffs}", flush=True)

    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"command": " ".join(sys.argv), "kernel": a.kernel, "shape": shape, "source": a.source,
                           "device": device_name(), "versions": versions(), "default": default, "quick": quick,
                           "differing_fields": diffs, "rows": [], "not_reached": []}
    uniq: dict[str, dict[str, Any]] = {}  # normalised config JSON -> what it compiled to
    for name, group, cfg in variants(default, quick, diffs, [int(b) for b in a.key_blocks.split(",")]):
        if left() < 10.0 + (len(uniq) + 1) * (0.5 + 0.25 * a.rounds):  # kept for the timing rounds
            doc["not_reached"].append(name)
            continue
        row: dict[str, Any] = {"name": name, "group": group,
                               "changed": {f: cfg.get(f) for f in set(cfg) | set(default)
                                           if cfg.get(f) != default.get(f)}}
        try:
            norm, fixed = normalized(spec, cfg)
        except Exception as e:  # noqa: BLE001 - a config Helion cannot take at all is a row
            row["error"] = f"{type(e).__name__}: {e}"[:400]
            doc["rows"].append(row)
            continue
        key = json.dumps(norm, sort_keys=True)
        row.update(normalized=norm, fixed=fixed)
        if key not in uniq:
            u: dict[str, Any] = {"uid": f"c{len(uniq)}"}
            t0 = time.perf_counter()
            try:
                run = bound.compile_config(helion.Config(**copy.deepcopy(norm)))
                got = run(*args)
                sync()
                u["max_err"] = float((got.float() - want).abs().max())
                u["regs"] = registers(run)
            except Exception as e:  # noqa: BLE001
                u["error"] = f"{type(e).__name__}: {e}"[:400]
            u["compile_s"] = round(time.perf_counter() - t0, 2)
            uniq[key] = u
        row.update({k: v for k, v in uniq[key].items()})
        doc["rows"].append(row)
        print(json.dumps({k: row.get(k) for k in ("name", "uid", "fixed", "max_err", "regs", "compile_s", "error")}),
              flush=True)
        out.write_text(json.dumps(doc, indent=1) + "\n")

    timed = {u["uid"]: json.dumps(json.loads(k)) for k, u in uniq.items() if "error" not in u}
    per_round = 0.25 * (len(timed) + 1)
    rounds = max(1, min(a.rounds, int((left() - 5 - 0.5 * len(timed)) / per_round))) if a.deadline_s else a.rounds
    print(f"timing {len(timed)} distinct configs and PyTorch's op, {rounds} rotated rounds", flush=True)
    rt = retime(a.kernel, tuple(shape), timed, rounds)
    doc.update(rounds=rounds, torch_ms=rt["retimed_ms"].get("torch"), samples_ms=rt["samples_ms"])
    ms = rt["retimed_ms"]
    d_ms, q_ms = ms.get(doc["rows"][0].get("uid")), ms.get(doc["rows"][1].get("uid"))
    for row in doc["rows"]:
        row["ms"] = ms.get(row.get("uid"))
        if row["ms"] and d_ms and q_ms:
            row["vs_default"] = round(row["ms"] / d_ms, 4)
            row["vs_quick"] = round(row["ms"] / q_ms, 4)
            gap = d_ms - q_ms
            row["gain_share"] = round((d_ms - row["ms"]) / gap, 3) if gap else None  # 1: all of quick's gain
    doc["seconds"] = round(time.perf_counter() - t_start, 1)
    out.write_text(json.dumps(doc, indent=1) + "\n")

    def regs(r: dict[str, Any]) -> str:
        return ",".join(f"{x['n_regs']}/{x['n_spills']}" for x in r.get("regs") or []) or "-"

    lines = ["name | ms | /default | /quick | share of quick's gain | regs/spills | uid | fixed by Helion",
             "--- | --- | --- | --- | --- | --- | --- | ---"]
    for r in sorted(doc["rows"], key=lambda r: r.get("ms") or float("inf")):
        lines.append(" | ".join([r["name"], f"{r['ms']:.4f}" if r.get("ms") else r.get("error", "-")[:60],
                                 str(r.get("vs_default", "-")), str(r.get("vs_quick", "-")),
                                 str(r.get("gain_share", "-")), regs(r), r.get("uid", "-"),
                                 (r.get("fixed") or "")[:70]]))
    print("\n".join(lines))
    print(f"torch {doc['torch_ms'] or float('nan'):.4f} ms; {len(timed)} distinct configs; {rounds} rounds; "
          f"{doc['seconds']} s; not reached: {doc['not_reached'] or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
