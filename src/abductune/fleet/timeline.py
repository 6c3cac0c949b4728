"""Where a fleet tune's seconds went, from its timeline (`FleetRun.timeline`): each worker's busy,
benchmark and compile-wait share of the wall time, the searches open over time, and how long the
workers had fewer open searches than job slots (the tail where a GPU can idle)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence


def _overlap(spans: Sequence[tuple[float, float]], lo: float, hi: float) -> float:
    return sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in spans)


def open_curve(searches: Sequence[Sequence[float]]) -> list[tuple[float, int]]:
    """(time, searches open from then on), at every start and end."""
    events = sorted([(float(a), 1) for a, _ in searches] + [(float(b), -1) for _, b in searches],
                    key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
    out: list[tuple[float, int]] = []
    n = 0
    for t, d in events:
        n += d
        if out and out[-1][0] == t:
            out[-1] = (t, n)
        else:
            out.append((t, n))
    return out


def open_at(curve: Sequence[tuple[float, int]], t: float) -> int:
    n = 0
    for at, k in curve:
        if at > t:
            break
        n = k
    return n


def occupancy(timeline: Mapping[str, Any], samples: int = 12) -> dict[str, Any]:
    """Per worker: `busy` (its jobs' seconds over the wall), `gpu` (benchmarking), `compile_wait`
    (waiting inside its jobs for compiles), `idle_s`; then the searches open over time
    (`open`, sampled at `samples` even instants), `short_s` (seconds after the first search
    opened with fewer open searches than the workers have job slots) and `short_idle_s` (worker
    seconds idle in that time). Busy time is each job's own `job_s` (a probe's `probe_s`), ending
    when it landed on the driver."""
    wall = float(timeline.get("wall_s") or 0.0)
    n = int(timeline.get("workers") or 0)
    slots = int(timeline.get("slots") or n)
    spans: list[list[tuple[float, float]]] = [[] for _ in range(n)]
    sums: list[dict[str, float]] = [{} for _ in range(n)]
    for t, i, _configs, _probe, stats in timeline.get("jobs", []):
        busy = float(stats.get("job_s", stats.get("probe_s", 0.0)))
        spans[i].append((max(0.0, t - busy), t))
        for k in ("job_s", "probe_s", "bench_s", "compile_wait_s", "switch_s"):
            if k in stats:
                sums[i][k] = sums[i].get(k, 0.0) + float(stats[k])
    curve = open_curve(timeline.get("searches", []))
    first = curve[0][0] if curve else 0.0
    short = []  # intervals with fewer open searches than slots, after the first opened
    for (a, k), (b, _) in zip(curve, curve[1:] + [(wall, 0)]):
        if a >= first and k < slots and b > a:
            short.append((a, min(b, wall)))
    short_s = sum(b - a for a, b in short)
    workers = []
    for i in range(n):
        busy = _overlap(spans[i], 0.0, wall)
        workers.append({
            "busy": busy / wall if wall else 0.0,
            "gpu": sums[i].get("bench_s", 0.0) / wall if wall else 0.0,
            "compile_wait": sums[i].get("compile_wait_s", 0.0) / wall if wall else 0.0,
            "idle_s": wall - busy,
            "short_idle_s": short_s - sum(_overlap(spans[i], a, b) for a, b in short)})
    step = wall / samples if samples and wall else 0.0
    return {"wall_s": wall, "slots": slots, "calibration_s": float(timeline.get("calibration_s") or 0.0),
            "workers": workers, "max_open": max((k for _, k in curve), default=0),
            "open": [open_at(curve, (j + 0.5) * step) for j in range(samples)] if step else [],
            "short_s": short_s, "short_idle_s": sum(w["short_idle_s"] for w in workers)}


def describe(occ: Mapping[str, Any]) -> list[str]:
    """Lines for a report: one per worker, then the open searches."""
    lines = [f"worker {i}: busy {w['busy']:.0%}, GPU (benchmarking) {w['gpu']:.0%}, waiting for compiles "
             f"{w['compile_wait']:.0%}, idle {w['idle_s']:.1f} s" for i, w in enumerate(occ["workers"])]
    lines.append(f"searches open over time ({len(occ['open'])} even instants): "
                 f"{' '.join(str(k) for k in occ['open'])}; at most {occ['max_open']}; fewer than the "
                 f"{occ['slots']} job slots for {occ['short_s']:.1f} s, the workers idle "
                 f"{occ['short_idle_s']:.1f} worker-s of it")
    return lines
