"""Where abductune.inductor's compile time went, kernel by kernel (`handle.report`, `handle.summary()`).

One entry per kernel Inductor loaded under abductune in this process (and one more per extra
size bucket of a dynamic kernel), filled in two places: when the kernel reaches this process
(`loaded`: what its compile worker spent planning and asking the store) and at its finish
(`finish` fills the decision and the seconds). Pure Python: the benchmark script writes the
entries into its JSON, so a GPU run shows what each kernel cost and why.

Decisions:
- `stored`: the store answered when the kernel loaded (one config, nothing timed or searched);
- `store_at_launch`: the store answered at launch (another kernel of the same source and size
  hints was tuned earlier in this process);
- `kept`: Inductor's pick ran under `min_us`, so it was kept (and stored) without a search;
- `searched`: abductune's Session searched from Inductor's pick;
- `outside_space`: Inductor's pick lies outside the space (kept);
- `failed`: the finish raised (Inductor's pick kept);
- `not_launched`: loaded, never launched in this process.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

DECISIONS = ("stored", "store_at_launch", "kept", "searched", "outside_space", "failed", "not_launched")
# the seconds an entry may carry; summed by `summarize`
SECONDS = ("worker_plan_s", "worker_lookup_s", "inductor_autotune_s", "finish_s", "compile_s", "bench_s",
           "judge_s", "store_s")
COUNTS = ("evaluations", "compiled", "answered")


def loaded(name: str, heuristic: str, size_hints: Mapping[str, int] | None, listed: int, candidates: int,
           plan_s: float, lookup_s: float, stored: bool, estimate_us: float | None = None) -> dict[str, Any]:
    """The entry of a kernel that reached this process: `listed` configs for Inductor to compile
    and time (`candidates` of them abductune's), what planning and the store lookup cost in the
    compile worker, whether the store answered there, and the launch time its traffic gave at
    full bandwidth (`estimate_us`, which decides whether candidates are offered)."""
    return {"name": name, "heuristic": heuristic, "size_hints": dict(size_hints or {}), "listed": int(listed),
            "candidates": int(candidates), "estimate_us": None if estimate_us is None else round(float(estimate_us), 3),
            "worker_plan_s": float(plan_s), "worker_lookup_s": float(lookup_s),
            "decision": "stored" if stored else "not_launched"}


def summarize(entries: Iterable[Mapping[str, Any]], min_us: float | None = None) -> dict[str, Any]:
    """Totals over the entries: how many kernels took each decision, and the seconds and
    counts summed (`finish_s` is the wall time of the finishes, in the process that launches;
    `worker_*` ran in Inductor's compile workers, in parallel)."""
    entries = list(entries)
    out: dict[str, Any] = {"kernels": len(entries), "min_us": min_us}
    out["decisions"] = {d: sum(e.get("decision") == d for e in entries) for d in DECISIONS}
    for k in SECONDS:
        out[k] = round(sum(float(e.get(k) or 0.0) for e in entries), 4)
    for k in COUNTS:
        out[k] = sum(int(e.get(k) or 0) for e in entries)
    searched = [e for e in entries if e.get("decision") == "searched" and e.get("inductor_us") and e.get("winner_us")]
    # what the searches bought: Inductor's pick over the winner, per launch, summed over kernels
    out["searched_us_before"] = round(sum(e["inductor_us"] for e in searched), 3)
    out["searched_us_after"] = round(sum(e["winner_us"] for e in searched), 3)
    return out


def table(entries: Iterable[Mapping[str, Any]]) -> str:
    """One line per kernel: decision, its bytes' time at full bandwidth and the candidates that
    bought, Inductor's time of its pick, the winner's, and the cost."""
    lines = [f"{'kernel':<34} {'hints':<24} {'decision':<16} {'bytes us':>8} {'cands':>5} {'pick us':>8} "
             f"{'won us':>8} {'evals':>5} {'compiled':>8} {'finish s':>8}"]
    for e in entries:
        hints = ",".join(f"{k}={v}" for k, v in (e.get("size_hints") or {}).items())
        num = lambda k, f: (f"{e[k]:{f}}" if isinstance(e.get(k), (int, float)) else "-")  # noqa: E731
        lines.append(f"{str(e.get('name'))[:34]:<34} {hints[:24]:<24} {str(e.get('decision')):<16} "
                     f"{num('estimate_us', '8.1f'):>8} {num('candidates', 'd'):>5} "
                     f"{num('inductor_us', '8.1f'):>8} {num('winner_us', '8.1f'):>8} {num('evaluations', 'd'):>5} "
                     f"{num('compiled', 'd'):>8} {num('finish_s', '8.2f'):>8}")
    return "\n".join(lines)
