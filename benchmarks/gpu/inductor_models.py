"""torch.compile on real models, with and without abductune (issue 25, item 3): compile time with
cold and warm caches, and step time, for Inductor's default, `mode="max-autotune-no-cudagraphs"`,
`coordinate_descent_tuning=True` and abductune (`abductune.inductor.enable`), side by side in one
run; abductune also in a second process whose store is filled (fresh Inductor caches: only the
store remembers).

    PYTHONPATH=src python3 benchmarks/gpu/inductor_models.py --repeats 3 --deadline-s 1500 \
        --out benchmarks/out/inductor_models.json

One device call (at most 600 s): the compile-time targets of issue 25 need the cold and
store-filled rows only (`--phases cold,store`); `--dry-run` prints the rows and the expected
wall time (from session 14's H100 process times) without running anything:

    PYTHONPATH=src python3 benchmarks/gpu/inductor_models.py --models bert,llama_prefill \
        --variants default,coordesc,abductune --phases cold,store --repeats 2 --deadline-s 570 \
        --no-profile --out $OUT/inductor_models.json

Models (random weights, bf16, inference, CUDA graphs off):
- `llama_prefill` / `llama_decode`: one Llama decoder layer built from a `transformers`
  LlamaConfig with Llama-3-8B's shapes (hidden 4096, MLP 14336, 32 heads, 8 KV heads), on 1 x 2048
  tokens, and on 32 sequences of one token (no KV cache: the step's projections, norms and MLP);
- `bert`: a BERT-base encoder (transformers BertModel, default BertConfig), batch 32 x 128;
- `resnet50`: torchvision's ResNet-50, batch 64 x 3 x 224 x 224, channels-last;
- `vit_block`: one ViT-B/16 encoder block (torchvision), batch 64 x 197 x 768.

Every measurement is its own process (`--child`), so a compile time is a cold start's:
- `cold`: an empty Inductor cache directory (Triton's cache lives under it) and, for abductune,
  an empty store; compile time = the wall of the first call (compile + autotuning + tuning);
- `warm`: the same cache directory (and store) again: Inductor's FX graph and autotune caches hit;
- `store` (abductune only): a new empty Inductor cache directory and the store `cold` filled.
Step time: the median of `--steps` (100) CUDA-event-timed calls after `--warmup` calls (and at
least a second of calls: an idle GPU's clocks are low). Each child also records the largest
difference between the compiled and the eager output, and the GPU time of each kernel of a step
(torch.profiler; `--no-profile` skips it), to tell which kernels a variant made faster or slower.

abductune's records also keep where its compile time went (`abductune_summary`: kernels per
decision (stored, kept under min_us, searched), seconds per phase; `abductune_report`: one
entry per kernel), from `handle.summary()` and `handle.report` (integrations/inductor_report.py).

Writes `--out` (default benchmarks/out/inductor_models.json), after every child, so a run cut
short by `--deadline-s` keeps what it measured. Prints the tables last.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

MODELS = ("llama_prefill", "llama_decode", "bert", "resnet50")
OPTIONAL_MODELS = ("vit_block",)
# abductune: its defaults, which pick Inductor's matmul-template configs (`enable(gemm=4)`, session
# 38); abductune_nogemm: `gemm=0`, matmuls left to Inductor (the engine of sessions 14-37);
# abductune_profiled: the matmul choices judged on the profiler's kernel times
# (ABDUCTUNE_INDUCTOR_GEMM_JUDGE=profiler, experimental: inductor_templates.JUDGE_ENV)
VARIANTS = ("default", "max_autotune", "coordesc", "abductune", "abductune_nogemm", "abductune_profiled")
PHASES = {"default": ("cold", "warm"), "max_autotune": ("cold", "warm"), "coordesc": ("cold", "warm"),
          "abductune": ("cold", "warm", "store"), "abductune_nogemm": ("cold", "warm", "store"),
          "abductune_profiled": ("cold", "warm", "store")}
ALL_PHASES = ("cold", "warm", "store")
# seconds one child process took on the H100 in session 14 (benchmarks/results/session14/
# inductor_h100.json, one repeat; abductune at budget 8 before min_us): only for the estimate
# --dry-run and the driver print, never for a result
PRIOR_S = {("bert", "default", "cold"): 31.2, ("bert", "default", "warm"): 25.4,
           ("bert", "coordesc", "cold"): 44.9, ("bert", "coordesc", "warm"): 29.5,
           ("bert", "abductune", "cold"): 50.2, ("bert", "abductune", "warm"): 25.3,
           ("bert", "abductune", "store"): 31.9,
           ("llama_prefill", "default", "cold"): 27.5, ("llama_prefill", "coordesc", "cold"): 42.0,
           ("llama_prefill", "coordesc", "warm"): 26.7, ("llama_prefill", "abductune", "cold"): 43.6,
           ("llama_prefill", "abductune", "warm"): 26.7, ("llama_prefill", "abductune", "store"): 23.9}
PRIOR_DEFAULT_S = 45.0  # a row with no prior figure


# ----------------------------------------------------------------------------- one process

def build(name: str, device: str = "cuda"):
    """(module, inputs) of a model, random weights, bf16, eval mode."""
    import torch

    torch.manual_seed(0)
    with torch.device(device):  # weights made where they run: a process starts seconds sooner
        return _build(name, device, torch.bfloat16)


def _build(name: str, device: str, dt):
    import torch

    if name.startswith("llama"):
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

        cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                          max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=500000.0)
        cfg._attn_implementation = "sdpa"

        class Layer(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = LlamaDecoderLayer(cfg, layer_idx=0)
                self.rope = LlamaRotaryEmbedding(config=cfg)

            def forward(self, h, pos):
                out = self.layer(h, position_embeddings=self.rope(h, pos), position_ids=pos)
                return out[0] if isinstance(out, tuple) else out

        batch, seq = (1, 2048) if name == "llama_prefill" else (32, 1)
        h = torch.randn(batch, seq, cfg.hidden_size, device=device, dtype=dt)
        pos = torch.arange(seq, device=device).unsqueeze(0).expand(batch, -1)
        return Layer().to(device, dt).eval(), (h, pos)
    if name == "bert":
        from transformers import BertConfig, BertModel

        cfg = BertConfig()
        cfg._attn_implementation = "sdpa"
        ids = torch.randint(0, cfg.vocab_size, (32, 128), device=device)
        model = BertModel(cfg, add_pooling_layer=False).to(device, dt).eval()

        class Encoder(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.bert = model

            def forward(self, ids):
                return self.bert(input_ids=ids).last_hidden_state
        return Encoder(), (ids,)
    if name == "resnet50":
        import torchvision

        model = torchvision.models.resnet50(weights=None).to(device, dt).eval().to(memory_format=torch.channels_last)
        x = torch.randn(64, 3, 224, 224, device=device, dtype=dt).to(memory_format=torch.channels_last)
        return model, (x,)
    if name == "vit_block":
        import torchvision

        block = torchvision.models.vit_b_16(weights=None).encoder.layers[0].to(device, dt).eval()
        return block, (torch.randn(64, 197, 768, device=device, dtype=dt),)
    raise SystemExit(f"unknown model {name!r}; known: {', '.join(MODELS + OPTIONAL_MODELS)}")


def child(args: argparse.Namespace) -> None:
    """One model, one variant, one phase, in this fresh process: prints one JSON line."""
    import contextlib
    import faulthandler
    import logging

    c0 = time.perf_counter()
    spent: dict = {}  # the child's own seconds outside the compile (its process time is the driver's)

    def lap(name: str) -> None:
        nonlocal c0
        spent[name] = round(time.perf_counter() - c0, 3)
        c0 = time.perf_counter()

    import torch
    import torch._inductor.config as ic

    # where the time goes, for whoever reads a failed run: abductune's finishes, one line each,
    # and every thread's stack shortly before the driver's timeout
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("abductune.integrations").setLevel(logging.INFO)
    if args.timeout_s:
        faulthandler.dump_traceback_later(max(1.0, args.timeout_s - 15), exit=False)

    ic.triton.cudagraphs = False
    lap("import_s")
    model, inputs = build(args.model)
    torch.cuda.synchronize()
    lap("build_s")
    with torch.inference_mode():
        ref = model(*inputs)
    torch.cuda.synchronize()
    lap("reference_s")
    mode = None
    scope: contextlib.AbstractContextManager = contextlib.nullcontext()
    handle = None
    if args.variant == "max_autotune":
        mode = "max-autotune-no-cudagraphs"
    elif args.variant == "coordesc":
        ic.coordinate_descent_tuning = True
    elif args.variant in ("abductune", "abductune_nogemm", "abductune_profiled"):
        from abductune.integrations import inductor

        kw = {} if args.min_us is None else {"min_us": args.min_us}
        if args.variant == "abductune_nogemm":
            kw["gemm"] = 0
        if args.variant == "abductune_profiled":
            from abductune.integrations.inductor_templates import JUDGE_ENV

            os.environ[JUDGE_ENV] = "profiler"
        handle = inductor.enable(store=args.store, budget=args.budget, compile_ahead=args.compile_ahead, **kw)
        scope = handle
    lap("enable_s")  # abductune's import and enable (not in compile_s, as in session 14)
    rec: dict = {"model": args.model, "variant": args.variant, "phase": args.phase}
    with scope, torch.inference_mode():
        compiled = torch.compile(model, mode=mode)
        t0 = time.perf_counter()
        out = compiled(*inputs)
        torch.cuda.synchronize()
        rec["compile_s"] = time.perf_counter() - t0
        c0 = time.perf_counter()
        n = 0
        t1 = time.perf_counter()  # at least a second of work first: an idle GPU's clocks are low
        while time.perf_counter() - t1 < 1.0 or n < args.warmup:
            compiled(*inputs)
            torch.cuda.synchronize()
            n += 1
        times = []
        for _ in range(args.steps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            compiled(*inputs)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        lap("steps_s")
        if handle is not None:  # where the compile time went, kernel by kernel
            rec["abductune"] = dict(handle.stats)
            rec["abductune_summary"] = handle.summary()
            rec["abductune_report"] = [dict(e) for e in handle.report]
            rec["abductune_gemm"] = [dict(e) for e in handle.gemm]
        if args.profile:
            rec["kernels_us"] = kernel_times(compiled, inputs)
            lap("profile_s")
    rec["child_s"] = spent
    q = statistics.quantiles(times, n=10)
    rec.update(step_ms=statistics.median(times), step_p10_ms=q[0], step_p90_ms=q[-1],
               max_abs_diff=float((out.float() - ref.float()).abs().max()))
    print(json.dumps(rec), flush=True)


def kernel_times(fn, inputs, steps: int = 5, top: int = 30) -> dict[str, float]:
    """GPU time per step of each kernel the step launches (torch.profiler), the largest first:
    where a variant's step time went, kernel by kernel."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn(*inputs)
        torch.cuda.synchronize()
    times = {}
    for e in prof.key_averages():
        us = getattr(e, "self_device_time_total", None)
        if us is None:
            us = getattr(e, "self_cuda_time_total", 0.0)
        if us:
            times[e.key] = times.get(e.key, 0.0) + us / steps
    return dict(sorted(times.items(), key=lambda kv: -kv[1])[:top])


# ----------------------------------------------------------------------------- the driver

def environment() -> dict:
    import importlib.metadata as md

    import torch

    env = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0],
           "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None}
    for pkg in ("triton", "transformers", "torchvision"):
        try:
            env[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            env[pkg] = None
    try:
        env["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                       cwd=ROOT).stdout.strip() or None
    except OSError:
        env["commit"] = None
    return env


def run_child(model: str, variant: str, phase: str, cache: Path, store: Path, args: argparse.Namespace,
              timeout: float) -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT / "src") + os.pathsep
               + os.environ.get("PYTHONPATH", ""), PYTHONUNBUFFERED="1")
    env.pop("TRITON_CACHE_DIR", None)  # Triton's cache then lives under Inductor's: cold means cold
    env.pop("ABDUCTUNE_INDUCTOR", None)
    cmd = [sys.executable, __file__, "--child", "--model", model, "--variant", variant, "--phase", phase,
           "--store", str(store), "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--budget", str(args.budget)]
    if not args.profile:
        cmd.append("--no-profile")
    if args.compile_ahead:
        cmd.append("--compile-ahead")
    if args.min_us is not None:
        cmd += ["--min-us", str(args.min_us)]
    t0 = time.perf_counter()
    cmd += ["--timeout-s", f"{timeout:.0f}"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=max(1.0, timeout), cwd=ROOT)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return {"model": model, "variant": variant, "phase": phase, "error": f"timed out after {timeout:.0f} s",
                "stderr": err[-6000:]}
    lines = [x for x in r.stdout.splitlines() if x.startswith("{")]
    if r.returncode != 0 or not lines:
        return {"model": model, "variant": variant, "phase": phase, "error": r.stderr[-6000:] or f"rc {r.returncode}"}
    rec = json.loads(lines[-1])
    rec["log"] = [x for x in r.stderr.splitlines() if "abductune" in x][-50:]
    rec["process_s"] = time.perf_counter() - t0
    return rec


def table(runs: list[dict]) -> str:
    """Per model and variant: medians over repeats of cold and warm compile seconds and of the
    step time; abductune's second process (store filled) as its own row."""
    out = [f"{'model':<14} {'variant':<24} {'cold compile s':>15} {'warm compile s':>15} {'step ms':>10} "
           f"{'vs default':>11} {'GPU us':>8} {'n':>3}"]
    models = sorted({r["model"] for r in runs}, key=lambda m: (MODELS + OPTIONAL_MODELS).index(m))
    for m in models:
        base = [r["step_ms"] for r in runs if r["model"] == m and r["variant"] == "default" and "step_ms" in r]
        base_ms = statistics.median(base) if base else None
        rows = [(v, ("cold", "warm")) for v in VARIANTS] + [(v, ("store",)) for v in VARIANTS if v.startswith("abductune")]
        for v, phases in rows:
            got = {p: [r for r in runs if r["model"] == m and r["variant"] == v and r["phase"] == p and "step_ms" in r]
                   for p in phases}
            if not any(got.values()):
                continue
            med = lambda rs, k: statistics.median(r[k] for r in rs) if rs else float("nan")  # noqa: E731
            steps = [r for p in phases for r in got[p]]
            step = med(steps, "step_ms")
            label = v if phases != ("store",) else f"{v}, store filled"
            cold = med(got.get("cold") or got.get("store") or [], "compile_s")
            warm = med(got.get("warm", []), "compile_s")
            rel = f"{step / base_ms:.3f}x" if base_ms else "-"
            # the profiled kernels' GPU time per step: steadier than the wall step between processes
            gpu = [sum(r["kernels_us"].values()) for r in steps if r.get("kernels_us")]
            gpu_us = statistics.median(gpu) if gpu else float("nan")
            out.append(f"{m:<14} {label:<24} {cold:>15.1f} {warm:>15.1f} {step:>10.3f} {rel:>11} "
                       f"{gpu_us:>8.0f} {len(steps):>3}")
    tuned = [r for r in runs if r.get("abductune_summary")]
    if tuned:
        out.append("")
        out.append(f"{'abductune':<14} {'variant':<17} {'phase':<6} {'rep':>3} {'compile s':>9} {'finish s':>9} "
                   f"{'search s':>9} {'stored':>6} {'kept':>5} {'searched':>8} {'evals':>5} {'compiled':>8} "
                   f"{'matmuls t/a/i':>13} {'stored t/a':>10}")
        for r in tuned:
            sm = r["abductune_summary"]
            d = sm.get("decisions", {})
            mm = sm.get("matmuls") or {}  # template, ATen alone, Inductor's own (inductor_templates)
            search_s = sum(e.get("finish_s") or 0.0 for e in r.get("abductune_report", [])
                           if e.get("decision") == "searched")
            out.append(f"{r['model']:<14} {r['variant']:<17} {r['phase']:<6} {r.get('repeat', 0):>3} "
                       f"{r.get('compile_s', float('nan')):>9.1f} "
                       f"{sm.get('finish_s', 0.0):>9.2f} {search_s:>9.2f} {d.get('stored', 0):>6} {d.get('kept', 0):>5} "
                       f"{d.get('searched', 0):>8} {sm.get('evaluations', 0):>5} {sm.get('compiled', 0):>8} "
                       f"{mm.get('template', 0):>5}/{mm.get('aten', 0)}/{mm.get('inductor', 0)} "
                       f"{mm.get('store_template', 0):>8}/{mm.get('store_aten', 0)}")
    errors = [r for r in runs if "error" in r]
    if errors:
        out.append(f"{len(errors)} run(s) failed: " + "; ".join(f"{r['model']}/{r['variant']}/{r['phase']}"
                                                             for r in errors))
    return "\n".join(out)


def plan(models: list[str], variants: list[str], phases: list[str], repeats: int) -> list[dict]:
    """The children in the order they run: per repeat, per model, per variant, its phases (a
    variant's store phase right after its cold one, whose store it reads)."""
    rows = []
    for rep in range(repeats):
        for m in models:
            for v in variants:  # side by side: every variant of a model before the next model
                for phase in PHASES[v]:
                    if phase in phases:
                        rows.append({"model": m, "variant": v, "phase": phase, "repeat": rep,
                                     "expected_s": PRIOR_S.get((m, v, phase), PRIOR_DEFAULT_S)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help=f"of {', '.join(MODELS + OPTIONAL_MODELS)}")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--phases", default=",".join(ALL_PHASES),
                    help="of cold, warm, store (store: abductune only, needs cold, which fills its store)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--budget", type=int, default=8, help="abductune's evaluations per kernel and shape")
    ap.add_argument("--min-us", type=float, default=None,
                    help="abductune searches kernels whose Inductor pick runs at least this long (default: "
                         "abductune's, 100; 0: every kernel)")
    ap.add_argument("--compile-ahead", action="store_true", help="abductune compiles in Inductor's workers")
    ap.add_argument("--deadline-s", type=float, default=1500.0, help="start no child after this many seconds")
    ap.add_argument("--no-profile", dest="profile", action="store_false",
                    help="skip the per-kernel GPU times (torch.profiler, 5 steps after the timed ones)")
    ap.add_argument("--dry-run", action="store_true", help="print the rows and the expected time; run nothing")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "out" / "inductor_models.json"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    ap.add_argument("--store", help=argparse.SUPPRESS)
    ap.add_argument("--timeout-s", type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    t_start = time.time()
    deadline = t_start + args.deadline_s
    models = [m for m in args.models.split(",") if m]
    variants = [v for v in args.variants.split(",") if v]
    phases = [p for p in args.phases.split(",") if p]
    for m in models:
        if m not in MODELS + OPTIONAL_MODELS:
            ap.error(f"unknown model {m!r}; known: {', '.join(MODELS + OPTIONAL_MODELS)}")
    for v in variants:
        if v not in VARIANTS:
            ap.error(f"unknown variant {v!r}; known: {', '.join(VARIANTS)}")
    for p in phases:
        if p not in ALL_PHASES:
            ap.error(f"unknown phase {p!r}; known: {', '.join(ALL_PHASES)}")
    if "store" in phases and "cold" not in phases:
        ap.error("the store phase reads the store its cold phase filled: add cold to --phases")
    rows = plan(models, variants, phases, args.repeats)
    expected = sum(r["expected_s"] for r in rows)
    # what abductune aims at since min_us: its cold process as long as Inductor's default one
    aim = sum(PRIOR_S.get((r["model"], "default", "cold"), r["expected_s"]) + 2.0
              if (r["variant"], r["phase"]) == ("abductune", "cold") else r["expected_s"] for r in rows)
    fits = sum(1 for i in range(len(rows)) if sum(r["expected_s"] for r in rows[:i]) < args.deadline_s - 60)
    print(f"{len(rows)} rows (each a fresh process), expected {expected:.0f} s from session 14's H100 process "
          f"times ({aim:.0f} s if abductune's cold compile now costs what Inductor's default does); the deadline "
          f"({args.deadline_s:.0f} s, no child starts in its last 60 s) starts at least {fits} of them", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.dry_run:
        out.write_text(json.dumps({"plan": rows, "expected_s": expected, "aim_s": aim, "deadline_s": args.deadline_s,
                                   "fits": fits}, indent=1))
        for r in rows:
            print(f"  {r['repeat']} {r['model']:<14} {r['variant']:<12} {r['phase']:<6} ~{r['expected_s']:.0f} s")
        return
    doc = {"env": environment(), "args": {k: v for k, v in vars(args).items() if k not in (
        "child", "model", "variant", "phase", "store")}, "expected_s": expected, "runs": []}
    print(json.dumps(doc["env"]), flush=True)
    work = Path(tempfile.mkdtemp(prefix="inductor-models-"))
    stopped = False
    try:
        for row in rows:
            m, v, phase, rep = row["model"], row["variant"], row["phase"], row["repeat"]
            left = deadline - time.time()
            if left < 60:
                stopped = True
                break
            cache, store = work / f"{m}-{v}-{rep}", work / f"{m}-{v}-{rep}.sqlite"
            c = work / f"{m}-{v}-{rep}-fresh" if phase == "store" else cache
            rec = run_child(m, v, phase, c, store, args, timeout=left)
            rec["repeat"] = rep
            doc["runs"].append(rec)
            out.write_text(json.dumps(doc, indent=1))
            print(json.dumps({k: rec.get(k) for k in ("model", "variant", "phase", "repeat", "compile_s", "step_ms",
                                                      "max_abs_diff", "abductune", "error", "process_s")}), flush=True)
            if rec.get("abductune_summary"):
                print("  abductune: " + json.dumps({k: rec["abductune_summary"].get(k) for k in (
                    "decisions", "finish_s", "compile_s", "bench_s", "judge_s", "inductor_autotune_s")}), flush=True)
            last = rows.index(row) == len(rows) - 1 or (rows[rows.index(row) + 1]["model"], rows[rows.index(row) + 1]
                                                         ["variant"], rows[rows.index(row) + 1]["repeat"]) != (m, v, rep)
            if last:  # this variant's phases are done: its caches go
                shutil.rmtree(cache, ignore_errors=True)
                shutil.rmtree(work / f"{m}-{v}-{rep}-fresh", ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc["stopped_at_deadline"] = stopped
    doc["wall_s"] = time.time() - t_start
    out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {out}" + (" (stopped at the deadline)" if stopped else ""))
    print(table(doc["runs"]))


if __name__ == "__main__":
    main()
