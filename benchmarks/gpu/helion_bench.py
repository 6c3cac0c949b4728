"""Helion's own search against abductune's inside Helion (issue 29, item 2): for Helion's example
kernels, three shapes each, the wall time to a ready kernel and the kernel's time, side by side in
one run.

    PYTHONPATH=src python3 benchmarks/gpu/helion_bench.py --full-budget-s 600 --deadline-s 5400 \
        --retime --out benchmarks/out/helion_bench.json
    PYTHONPATH=src python3 benchmarks/gpu/helion_bench.py --smoke --out /tmp/helion_smoke.json
    PYTHONPATH=src python3 benchmarks/gpu/helion_bench.py --kernels matmul,softmax,layer_norm --shapes 1 \
        --modes none,quick,abductune --retime --deadline-s 500 --timeout-s 200 --out $OUT/helion.json
    python3 benchmarks/gpu/helion_bench.py --dry-run --retime --kernels softmax --shapes 1   # no GPU: the driver

Kernels (written here in our words after Helion's examples; the installed Helion ships none):
matmul (fp16 [M, K] x [K, N], `hl.tile` over M and N with an `addmm` K loop), softmax and layer
norm (fp16 rows, one row tile and the whole row as a reduction), attention (fp16 [B, H, S, D],
Helion's online-softmax loop) and an int4 matmul (bf16 activations, int8 weights packed two a
byte, unpacked and summed by hand as Helion's int4 example does).

Modes (each in its own process, with empty Triton, Inductor and Helion caches, so no mode finds
what another compiled; `HELION_SKIP_CACHE` is not needed):
- `none`: `autotune_effort="none"`, Helion's default config (its promoted heuristic seed where one
  fires); `none+abductune`: the same with abductune's heuristics installed and promoted where
  Helion promoted none (`install(promote=True)`), so the config run is abductune's zero-shot seed
  (theory, else observed) on the kernels Helion's heuristics leave to the fragment defaults;
  `none+abductune-always`: abductune's seed wherever one fires (`promote="always"`);
- `quick` and `full`: Helion's default search (LFBO) at that effort; `full` is capped by
  `autotune_budget_seconds` (`--full-budget-s`, recorded in each row: a full run of 400-1800 s per
  kernel does not fit a device session); `quick+seeds` / `full+seeds`: the same with abductune's
  heuristics in Helion's registry (their seeds join Helion's initial population);
- `abductune`: `@helion.kernel(autotuner_fn=abductune.integrations.helion.autotuner_with(...))`,
  abductune's search with its seeds; `abductune-noseeds`: without them (no heuristics registered,
  `abductune_seeds=False`): Helion's default and compiler seeds only.
Wall time: the first call of a fresh kernel object (bind, search, compile, run) to a synchronised
result. Kernel time: `triton.testing.do_bench` median (ms) of the ready kernel. Every row also
records the output's largest error against a PyTorch reference, the chosen config, abductune's
evaluations and report, the GPU and the versions.

Kernel times of about 10 us differ by several percent between processes (the same config timed
in two mode processes: 0.0103 and 0.0109 ms on the H100), so `--retime [ROUNDS]` compiles every
mode's final config of a kernel and shape in one more process and times them side by side
(`triton.testing.do_bench` medians in ROUNDS rotated rounds, PyTorch's op among them): the
ratios in the table use those times where every row has one. `--reuse-quick JSON` takes quick's
rows from an earlier run of this script (its wall and config; rows with an error are measured
again) and needs `--retime`, which then measures that config's kernel time beside the others:
quick's search is the costliest part of a run and its wall time does not change between runs on
one kind of machine (a row from another GPU is marked `device_mismatch`).

Writes `--out` after every row; `--deadline-s`: no process runs past it (each gets what is left,
capped by `--timeout-s`; a row that cannot get 30 s is not started). Prints the table last: per
kernel and shape, each mode's kernel ms (re-timed) and wall s, abductune against quick (time
ratio, wall fraction) and against none, then where abductune's search time went (its report's
`timing`: Helion's compiles, its benchmarking and the first config's wait for its benchmark
worker, run-offs, the final verification, and abductune's own work). Every row records
`elapsed_s`, the whole process (interpreter, imports and CUDA start, which `wall_s` is not).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

MODES = ("none", "none+abductune", "none+abductune-always", "quick", "quick+seeds", "full", "full+seeds",
         "abductune", "abductune-noseeds")
SMOKE_MODES = ["none", "none+abductune", "none+abductune-always", "abductune"]
SHAPES: dict[str, list[tuple[int, ...]]] = {
    "matmul": [(1024, 1024, 1024), (128, 4096, 4096), (2048, 256, 8192)],  # M, N, K
    "softmax": [(4096, 1024), (1024, 8192), (256, 32768)],  # rows, cols
    "layer_norm": [(4096, 768), (2048, 4096), (8192, 8192)],
    "attention": [(4, 16, 1024, 64), (1, 32, 4096, 128), (8, 8, 512, 128)],  # B, H, S, D
    "int4_matmul": [(16, 4096, 4096), (256, 4096, 4096), (2048, 8192, 2048)],  # M, N, K
}


# ----------------------------------------------------------------------------- the kernels (undecorated)

if "--child" in sys.argv or __name__ != "__main__":  # the kernels need torch and Helion; the driver neither
    import torch

    import helion.language as hl


def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            acc = torch.addmm(acc, x[tm, tk], y[tk, tn])
        out[tm, tn] = acc.to(x.dtype)
    return out


def softmax(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tr in hl.tile(x.size(0)):
        out[tr, :] = torch.nn.functional.softmax(x[tr, :], dim=1)
    return out


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tr in hl.tile(x.size(0)):
        row = x[tr, :].to(torch.float32)
        centred = row - row.mean(dim=-1, keepdim=True)
        var = (centred * centred).mean(dim=-1, keepdim=True)
        y = centred * torch.rsqrt(var + 1e-5) * w[:].to(torch.float32) + b[:].to(torch.float32)
        out[tr, :] = y.to(x.dtype)
    return out


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    sq, skv = q.size(-2), k.size(-2)
    d = hl.specialize(q.size(-1))
    qv, kv, vv = q.reshape([-1, sq, d]), k.reshape([-1, skv, d]), v.reshape([-1, skv, d])
    out = torch.empty_like(qv)
    scale = 1.44269504 / math.sqrt(d)
    for tb, tm in hl.tile([qv.size(0), sq]):
        m_i = hl.full([tb, tm], float("-inf"), dtype=torch.float32)
        l_i = torch.full_like(m_i, 1.0)
        acc = hl.zeros([tb, tm, d], dtype=torch.float32)
        qt = qv[tb, tm, :]
        for tn in hl.tile(skv):
            s = torch.bmm(qt, kv[tb, tn, :].transpose(1, 2), torch.float32) * scale  # scores in fp32
            m_new = torch.maximum(m_i, torch.amax(s, -1))
            p = torch.exp2(s - m_new[:, :, None])
            alpha = torch.exp2(m_i - m_new)
            l_i = l_i * alpha + torch.sum(p, -1)
            acc = torch.baddbmm(acc * alpha[:, :, None], p.to(vv.dtype), vv[tb, tn, :])
            m_i = m_new
        out[tb, tm, :] = (acc / l_i[:, :, None]).to(out.dtype)
    return out.view(q.size())


def int4_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    _, n = b.shape
    c = torch.empty(m, n, dtype=torch.bfloat16, device=a.device)
    bk = hl.register_block_size(k // 2)
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tkp in hl.tile(k // 2, block_size=bk):
            a_t = a[tm, tkp.begin * 2: tkp.begin * 2 + bk * 2].to(torch.float32)
            packed = b[tkp, tn]
            w = torch.stack([((packed << 4) >> 4).to(torch.int8), (packed >> 4).to(torch.int8)], dim=1)
            w = w.reshape(tkp.block_size * 2, tn.block_size).to(torch.float32)
            acc = acc + (a_t.unsqueeze(2) * w.unsqueeze(0)).sum(dim=1)
        c[tm, tn] = acc.to(torch.bfloat16)
    return c


def _unpack(packed: torch.Tensor) -> torch.Tensor:
    lo, hi = ((packed << 4) >> 4).to(torch.int8), (packed >> 4).to(torch.int8)
    return torch.stack([lo, hi], dim=1).reshape(packed.shape[0] * 2, packed.shape[1])


def _pack(w: torch.Tensor) -> torch.Tensor:
    r = w.reshape(w.shape[0] // 2, 2, w.shape[1]).permute(1, 0, 2)
    return ((r[0] & 0xF) | (r[1] << 4)).to(torch.int8)


def kernels(dev: str = "cuda") -> dict[str, Any]:
    """name -> (function, make_args(shape), reference(*args) in fp32 for the error,
    baseline(*args): PyTorch's own op in the kernel's dtype, timed beside it)."""
    f16 = torch.float16
    F = torch.nn.functional

    def ln(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, fp32: bool) -> torch.Tensor:
        t = (lambda v: v.float()) if fp32 else (lambda v: v)
        return F.layer_norm(t(x), (x.shape[1],), t(w), t(b), 1e-5).to(x.dtype)

    return {
        "matmul": (matmul, lambda s: (torch.randn(s[0], s[2], dtype=f16, device=dev),
                                      torch.randn(s[2], s[1], dtype=f16, device=dev)),
                   lambda x, y: (x.float() @ y.float()).to(x.dtype), lambda x, y: x @ y),
        "softmax": (softmax, lambda s: (torch.randn(*s, dtype=f16, device=dev),),
                    lambda x: torch.softmax(x.float(), dim=1).to(x.dtype), lambda x: torch.softmax(x, dim=1)),
        "layer_norm": (layer_norm, lambda s: (torch.randn(*s, dtype=f16, device=dev),
                                              torch.randn(s[1], dtype=f16, device=dev),
                                              torch.randn(s[1], dtype=f16, device=dev)),
                       lambda x, w, b: ln(x, w, b, True), lambda x, w, b: ln(x, w, b, False)),
        "attention": (attention, lambda s: tuple(torch.randn(*s, dtype=f16, device=dev) for _ in range(3)),
                      lambda q, k, v: F.scaled_dot_product_attention(q.float(), k.float(), v.float()).to(q.dtype),
                      lambda q, k, v: F.scaled_dot_product_attention(q, k, v)),
        "int4_matmul": (int4_matmul, lambda s: (torch.randn(s[0], s[2], dtype=torch.bfloat16, device=dev),
                                                _pack(torch.randint(-8, 8, (s[2], s[1]), dtype=torch.int8,
                                                                    device=dev))),
                        lambda a, b: (a.float() @ _unpack(b).float()).to(torch.bfloat16),
                        lambda a, b: a @ _unpack(b).to(torch.bfloat16)),
    }


# ----------------------------------------------------------------------------- one measurement (a child process)

def child(kernel: str, shape: tuple[int, ...], mode: str, opts: dict[str, Any]) -> dict[str, Any]:
    import triton

    import helion

    fn, make_args, reference, baseline = kernels()[kernel]
    settings: dict[str, Any] = {"static_shapes": True, "autotune_effort": "quick"}
    searches: list[Any] = []
    if mode.startswith("none"):
        settings["autotune_effort"] = "none"
    elif mode.startswith("full"):
        settings.update(autotune_effort="full", autotune_budget_seconds=int(opts["full_budget_s"]))
    if "abductune" in mode or mode.endswith("+seeds"):
        import abductune.integrations.helion as ath

        promote = {"none+abductune": True, "none+abductune-always": "always"}.get(mode, False)
        ath.install(promote=promote, with_heuristics=mode != "abductune-noseeds")
        if mode.startswith("abductune"):
            make = ath.autotuner_with(abductune_seeds=mode == "abductune", strategy=opts["strategy"],
                                      **({"max_evaluations": opts["evaluations"]} if opts["evaluations"] else {}))

            def autotuner_fn(bound: Any, args: Any, **kw: Any) -> Any:
                tuner = make(bound, args, **kw)
                searches.append(tuner.autotuner)
                return tuner
            settings["autotuner_fn"] = autotuner_fn
    k = helion.kernel(**settings)(fn)
    torch.manual_seed(0)
    args = make_args(shape)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = k(*args)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    ref = reference(*args)
    err = float((out.float() - ref.float()).abs().max())
    ms = float(triton.testing.do_bench(lambda: k(*args), warmup=50, rep=200, return_mode="median"))
    ref_ms = float(triton.testing.do_bench(lambda: baseline(*args), warmup=50, rep=200, return_mode="median"))
    bound = k.bind(args)
    cfg = getattr(bound, "_config", None)
    row = {"kernel": kernel, "shape": list(shape), "mode": mode, "wall_s": round(wall, 3), "kernel_ms": ms,
           "torch_ms": ref_ms, "max_err": err, "config": repr(cfg),
           "config_json": cfg.to_json() if hasattr(cfg, "to_json") else None,
           "effort": settings["autotune_effort"], "budget_s": settings.get("autotune_budget_seconds"),
           "device": torch.cuda.get_device_name(), "versions": _versions()}
    if searches:
        rep = searches[-1].report
        row["abductune"] = {k2: rep.get(k2) for k2 in ("evaluations", "winner_ms", "search_s", "timing", "final",
                                                        "pinned", "phases", "seeds")}
    if opts.get("probe_worker"):
        row["worker_start_s"] = probe_worker()
    if "abductune" in mode or mode.endswith("+seeds"):
        import abductune.integrations.helion as ath

        row["fired"] = [f for f in ath.fired() if f["status"] == "seed"]
    return row


def probe_worker() -> float | None:
    """Seconds from spawning Helion's benchmark worker to its first answer (a CUDA
    synchronize: the worker's imports and CUDA start), the start-up every search on this
    machine waits for on its first benchmark; None where this Helion has no such worker."""
    try:
        from helion.autotuner.benchmark_worker import BenchmarkWorker
    except ImportError:
        return None
    w = BenchmarkWorker(device=None)
    t0 = time.perf_counter()
    try:
        w.run(torch.cuda.synchronize, timeout=300)
        return round(time.perf_counter() - t0, 3)
    finally:
        w.shutdown()


def _config(text: str) -> Any:
    """A helion.Config from a row: its JSON, else its repr (rows written before config_json)."""
    import helion

    return helion.Config.from_json(text) if text.lstrip().startswith("{") else eval(text, {"helion": helion})  # noqa: S307 - our own rows


def retime(kernel: str, shape: tuple[int, ...], configs: dict[str, str], rounds: int) -> dict[str, Any]:
    """Every mode's final config (and PyTorch's op) compiled in one process and timed side by side:
    `rounds` rounds of `triton.testing.do_bench` medians, each round in a rotated order; the
    median over rounds per mode. Two modes with one config show the noise floor."""
    import statistics

    import triton

    import helion

    fn, make_args, _, baseline = kernels()[kernel]
    torch.manual_seed(0)
    args = make_args(shape)
    calls = {}
    for mode, text in configs.items():
        k = helion.kernel(static_shapes=True, config=_config(text))(fn)
        k(*args)  # compile before any timing
        calls[mode] = (lambda k=k: k(*args))
    calls["torch"] = lambda: baseline(*args)
    torch.cuda.synchronize()
    names = list(calls)
    samples: dict[str, list[float]] = {m: [] for m in names}
    for r in range(rounds):
        for m in names[r % len(names):] + names[:r % len(names)]:
            samples[m].append(float(triton.testing.do_bench(calls[m], warmup=25, rep=100, return_mode="median")))
    return {"retimed_ms": {m: statistics.median(v) for m, v in samples.items()}, "samples_ms": samples,
            "rounds": rounds}


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for p in ("helion", "torch", "triton", "abductune"):
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = "?"
    return out


# ----------------------------------------------------------------------------- the driver

def run_child(job: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One job (a measurement, or with "retime" the side-by-side re-timing) in a fresh process
    with empty Triton, Inductor and Helion caches; `elapsed_s`: the process's whole life
    (interpreter, imports and CUDA start included, which `wall_s` is not)."""
    head = {"kernel": job["kernel"], "shape": list(job["shape"]), "mode": job.get("mode", "retime")}
    with tempfile.TemporaryDirectory(prefix="helion_bench_") as tmp:
        env = {**os.environ, "TRITON_CACHE_DIR": f"{tmp}/triton", "TORCHINDUCTOR_CACHE_DIR": f"{tmp}/inductor",
               "HELION_CACHE_DIR": f"{tmp}/helion", "PYTHONUNBUFFERED": "1",
               "HELION_AUTOTUNE_LOG_LEVEL": os.environ.get("HELION_AUTOTUNE_LOG_LEVEL", "30")}
        cmd = [sys.executable, __file__, "--child", json.dumps(job)]
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return {**head, "error": f"timed out after {timeout:.0f} s", "elapsed_s": round(timeout, 1)}
        elapsed = round(time.perf_counter() - t0, 1)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        if p.returncode != 0 or not lines:
            tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
            return {**head, "error": " | ".join(tail)[-600:], "elapsed_s": elapsed}
        return {**json.loads(lines[-1]), "elapsed_s": elapsed}


def dry_row(job: dict[str, Any], timeout: float) -> dict[str, Any]:
    """--dry-run: a made-up answer for a job, no GPU (tests the driver's plumbing on a CPU)."""
    head = {"kernel": job["kernel"], "shape": list(job["shape"]), "mode": job.get("mode", "retime"), "elapsed_s": 0.0}
    if "retime" in job:
        return {**head, "retimed_ms": {m: 0.01 * (1 + i / 100) for i, m in enumerate([*job["retime"], "torch"])},
                "rounds": job["rounds"]}
    ms = {"none": 0.0103, "quick": 0.0080}.get(job["mode"], 0.0100)
    row = {**head, "wall_s": {"none": 3.0, "quick": 60.0}.get(job["mode"], 12.0), "kernel_ms": ms, "torch_ms": 0.01,
           "max_err": 0.0, "config": f"helion.Config(num_warps={4 if job['mode'] == 'none' else 2})",
           "config_json": None, "device": "dry-run", "versions": {}}
    if job["opts"].get("probe_worker"):
        row["worker_start_s"] = 9.0
    if job["mode"].startswith("abductune"):
        row["abductune"] = {"evaluations": 24, "timing": {"prepare_s": 1.0, "search_s": 8.0, "compile_s": 3.0,
                                                          "bench_s": 2.0, "first_bench_s": 1.0, "runoff_s": 0.5,
                                                          "final_s": 0.5, "ours_s": 2.0, "timed": 24, "batches": 5}}
    return row


def reused(path: str | None) -> dict[tuple[str, tuple[int, ...]], dict[str, Any]]:
    """(kernel, shape) -> a quick row measured earlier (--reuse-quick)."""
    if not path:
        return {}
    rows = json.loads(Path(path).read_text())["rows"]
    return {(r["kernel"], tuple(r["shape"])): {**r, "reused_from": path, "kernel_ms_then": r.get("kernel_ms")}
            for r in rows if r.get("mode") == "quick" and "error" not in r}


def _ms(r: dict[str, Any] | None, retimed: bool) -> float | None:
    if r is None or "error" in r:
        return None
    return r.get("retimed_ms") if retimed else r.get("kernel_ms")


def table(rows: list[dict[str, Any]], modes: list[str]) -> str:
    """Per kernel and shape: each mode's kernel ms (retimed side by side, where it was) and wall
    s (* reused from an earlier run), abductune against quick and against none, then where
    abductune's time went."""
    by: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        by.setdefault((r["kernel"], tuple(r["shape"])), {})[r["mode"]] = r

    def cell(r: dict[str, Any] | None) -> str:
        if r is None or "error" in r:
            return "error" if r is not None else "-"
        rt = f" ({r['retimed_ms']:.4f})" if r.get("retimed_ms") is not None else ""
        return f"{r['kernel_ms']:.4f}{rt} / {r['wall_s']:.0f}s" + ("*" if r.get("reused_from") else "")

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:.3f}" if a and b else "-"

    head = ["kernel", "shape", "torch ms", *modes, "abd/quick ms", "abd/quick wall", "abd/none ms"]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    notes = []
    for (kernel, shape), got in by.items():
        a, q, n = got.get("abductune"), got.get("quick"), got.get("none")
        rt = all(x is None or "error" in x or x.get("retimed_ms") is not None for x in (a, q, n))
        torch_ms = next((f"{r['torch_ms']:.4f}" for r in got.values() if "torch_ms" in r), "-")
        lines.append(" | ".join([kernel, "x".join(map(str, shape)), torch_ms, *(cell(got.get(m)) for m in modes),
                                 ratio(_ms(a, rt), _ms(q, rt)),
                                 ratio(a and a.get("wall_s"), q and q.get("wall_s")), ratio(_ms(a, rt), _ms(n, rt))]))
        t = ((a or {}).get("abductune") or {}).get("timing")
        if t:
            notes.append(f"{kernel} {'x'.join(map(str, shape))}: abductune prepare {t['prepare_s']:.1f} s, search "
                         f"{t['search_s']:.1f} s = Helion compile {t['compile_s']:.1f} + bench {t['bench_s']:.1f} "
                         f"(first {t['first_bench_s']:.1f}) + run-offs {t['runoff_s']:.1f} + final "
                         f"{t['final_s']:.1f} + ours {t['ours_s']:.1f}; {t['timed']} timed in {t['batches']} batches")
    probes = [f"{r['kernel']} {r['worker_start_s']:.1f} s" for r in rows if r.get("worker_start_s")]
    if probes:
        notes.append("Helion's benchmark worker, spawn to first answer: " + ", ".join(probes))
    return "\n".join(lines + ["", "ratios use the side-by-side re-timing where every row has one; "
                               "* wall from an earlier run (--reuse-quick)", *notes])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--kernels", default=None,
                    help=f"comma-separated (default: all; --smoke: matmul): {', '.join(SHAPES)}")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--shapes", type=int, default=3, help="shapes per kernel (the first N)")
    ap.add_argument("--smoke", action="store_true",
                    help=f"the first shape of each kernel (matmul unless --kernels), modes {', '.join(SMOKE_MODES)}")
    ap.add_argument("--full-budget-s", type=int, default=600, help="autotune_budget_seconds of full")
    ap.add_argument("--strategy", default="abduction")
    ap.add_argument("--evaluations", type=int, default=0, help="abductune's budget (0: by effort)")
    ap.add_argument("--retime", type=int, nargs="?", const=7, default=0, metavar="ROUNDS",
                    help="after each kernel and shape, time every mode's config side by side in one process "
                         "(ROUNDS rotated rounds, default 7)")
    ap.add_argument("--reuse-quick", default=None, metavar="JSON",
                    help="take quick's rows (wall, config) from an earlier run of this script instead of "
                         "searching again; its kernel time is then the --retime one (required)")
    ap.add_argument("--timeout-s", type=float, default=2400.0, help="per process")
    ap.add_argument("--deadline-s", type=float, default=0.0,
                    help="no process runs past this many seconds from the start (rows not started are skipped)")
    ap.add_argument("--probe-worker", action="store_true",
                    help="the first none row also times Helion's benchmark worker start (spawn to first answer)")
    ap.add_argument("--dry-run", action="store_true", help="made-up rows, no GPU: the driver's plumbing only")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "out" / "helion_bench.json"))
    a = ap.parse_args()
    if a.child:
        job = json.loads(a.child)
        if "retime" in job:
            print(json.dumps(retime(job["kernel"], tuple(job["shape"]), job["retime"], job["rounds"])))
        else:
            print(json.dumps(child(job["kernel"], tuple(job["shape"]), job["mode"], job["opts"])))
        return 0
    names = [k for k in (a.kernels or ("matmul" if a.smoke else ",".join(SHAPES))).split(",") if k]
    modes = SMOKE_MODES if a.smoke else [m for m in a.modes.split(",") if m]
    bad = [k for k in names if k not in SHAPES] + [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"unknown kernel or mode: {', '.join(bad)} (kernels {', '.join(SHAPES)}; modes {', '.join(MODES)})")
    if a.reuse_quick and not a.retime:
        ap.error("--reuse-quick needs --retime: a reused quick row's kernel time must be measured again beside the others")
    earlier = reused(a.reuse_quick)
    opts = {"full_budget_s": a.full_budget_s, "strategy": a.strategy, "evaluations": a.evaluations}
    runner = dry_row if a.dry_run else run_child
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    t_start = time.perf_counter()

    def timeout() -> float:  # what is left before the deadline, capped by --timeout-s
        left = a.deadline_s - (time.perf_counter() - t_start) if a.deadline_s else math.inf
        return min(a.timeout_s, left)

    def save() -> None:
        out.write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=1) + "\n")

    for kernel in names:
        for shape in SHAPES[kernel][: 1 if a.smoke else a.shapes]:
            group = []
            for mode in modes:
                if mode == "quick" and (kernel, shape) in earlier:
                    row = dict(earlier[(kernel, shape)])
                elif timeout() < 30:
                    break
                else:
                    probe = a.probe_worker and mode == "none" and not any(r.get("mode") == "none" for r in rows)
                    row = runner({"kernel": kernel, "shape": shape, "mode": mode,
                                  "opts": {**opts, "probe_worker": probe}}, timeout())
                rows.append(row)
                group.append(row)
                print(json.dumps({k: row.get(k) for k in ("kernel", "shape", "mode", "wall_s", "kernel_ms",
                                                          "max_err", "elapsed_s", "error")}), flush=True)
                save()
            configs = {r["mode"]: r.get("config_json") or r["config"] for r in group if "error" not in r}
            if a.retime and configs and timeout() >= 30:
                res = runner({"kernel": kernel, "shape": shape, "retime": configs, "rounds": a.retime}, timeout())
                for r in group:
                    if "retimed_ms" in res and r["mode"] in res["retimed_ms"]:
                        r["retimed_ms"] = res["retimed_ms"][r["mode"]]
                        r["retimed_torch_ms"] = res["retimed_ms"].get("torch")
                    elif "error" in res:
                        r["retime_error"] = res["error"]
                devices = {r.get("device") for r in group if "error" not in r and not r.get("reused_from")}
                for r in group:
                    if r.get("reused_from") and devices and r.get("device") not in devices:
                        r["device_mismatch"] = sorted(d for d in devices if d)
                save()
    print(table(rows, modes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
