"""Issue 24's last "Done when" on the H100: `patch_triton` on Liger-Kernel, fla and FlagGems, in one run.

    python3 -m pip install -q --no-index --no-deps --target /tmp/lib .whl_lib/*.whl
    PYTHONPATH=src:/tmp/lib python3 benchmarks/gpu/library_ops.py --deadline-s 480 --out $OUT/library_ops.json
    PYTHONPATH=src python3 benchmarks/gpu/library_ops.py --smoke --out /tmp/lo.json   # the CPU path

.whl_lib/ (git-excluded: carry it to the GPU machine) holds the three libraries' wheels and the
pure-Python ones they import that a bare machine may lack (einops for fla, SQLAlchemy for
FlagGems); a library whose imports are missing is named before any child starts, and its rows
say "missing module".

1. Reach: per library, two fresh processes import it (every submodule under library_op_cases.
   REACH_ROOTS that imports; failures counted apart), one plainly, one under `patch_triton()`:
   the Triton autotuners alive afterwards (the plain one's count is the library's total), how many
   became abductune's, by class, and what was left alone and why.
2. Ops (library_op_cases.OPS, in order): each op in each mode in its own fresh process, with an
   empty TRITON_CACHE_DIR, FlagGems cache and store: `triton` (no patch, the library's own
   autotuners), `patch` (patch_triton(), no budget), `patch32` (patch_triton(budget=32)). Per
   process: the first call to a synchronised result (tuning and compiles included: the cold
   time), the error against a torch reference, do_bench's median (3 times), and the autotuners
   the op went through (abductune's evaluations and configs beyond the list; Triton's picks).
3. Warm rounds (--rounds): again a fresh process per op and mode, in alternating mode order,
   each reusing that op and mode's caches and store (Triton's autotuning cache is kept with
   TRITON_CACHE_AUTOTUNING=1), to time the op only; per mode the median and spread over every
   process (cold and warm), and the patch/triton, patch32/triton ratios.

Ops go in groups of --group: the group's cold children are started side by side (the child
code is library_ops_child.py) and wait, imported and with their inputs built, until the parent
lets one run, one at a time, so nothing else works while one is timed; then the group's warm
children, every round, the same way. --deadline-s: a group is planned to fit the time left (the
op estimates in library_op_cases; an op that does not fit is skipped and said so), and no child
is let run past it; the JSON is rewritten after every child, the table printed last ("spread":
(max - min) / median of a mode's op times over its processes).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = ROOT / "benchmarks" / "out"
sys.path.insert(0, str(HERE))

from library_op_cases import LIBRARIES, NEEDS, OPS, SMOKE_LIB  # noqa: E402

MODES = ("triton", "patch", "patch32")
# planning guesses for an H100 host with 16 cores: a warm child's timed part (first call from the
# caches, do_bench x3, exit); a batch's import phase (children import side by side); the first
# one, beside the reach children
WARM_CHILD_S = 2.5
IMPORT_S = 12.0
REACH_S = 30.0
READY_TIMEOUT_S = 240.0


# ============================================================================= the parent
class Child:
    """A child process started in its own session (so it and its compile workers end together)."""

    def __init__(self, job: dict[str, Any], run_dir: Path, env: dict[str, str]):
        self.job = job
        base = run_dir / job["id"]
        spec = {**job, "ready": f"{base}.ready", "result": f"{base}.result.json"}
        Path(f"{base}.spec.json").write_text(json.dumps(spec))
        self.ready_path, self.result_path, self.log = Path(spec["ready"]), Path(spec["result"]), Path(f"{base}.log")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([sys.executable, str(HERE / "library_ops_child.py"), f"{base}.spec.json"],
                                         stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env,
                                         cwd=ROOT, start_new_session=True, text=True)

    def ready(self) -> bool:
        return self.ready_path.exists()

    def done(self) -> bool:
        return self.proc.poll() is not None

    def _say(self, word: str) -> None:
        try:
            self.proc.stdin.write(word + "\n")
            self.proc.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def wait(self, timeout: float) -> dict[str, Any]:
        try:
            self.proc.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            self.kill()
            return self.result(f"timed out after {timeout:.0f}s (killed)")
        self.kill()  # what it started and left behind (compile workers) must not run beside the next one
        return self.result()

    def run(self, timeout: float) -> dict[str, Any]:
        self._say("go")
        return self.wait(timeout)

    def quit(self) -> None:
        self._say("quit")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the child's session: it and its workers
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def result(self, why: str | None = None) -> dict[str, Any]:
        res = {k: self.job.get(k) for k in ("id", "role", "op", "library", "mode", "round")}
        if self.result_path.exists():
            res.update(json.loads(self.result_path.read_text()))
        else:
            tail = self.log.read_text(errors="replace")[-1500:] if self.log.exists() else ""
            res["error"] = why or f"no result (exit code {self.proc.returncode}); log tail: {tail}"
        return res


class Runner:
    def __init__(self, args: argparse.Namespace):
        self.args, self.smoke = args, args.smoke
        self.t0 = time.monotonic()
        self.deadline = self.t0 + args.deadline_s
        self.work = Path(args.work_dir or tempfile.mkdtemp(prefix="library_ops-"))
        self.runs_dir = self.work / "runs"
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.out = Path(args.out)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.data: dict[str, Any] = {"meta": {"argv": sys.argv[1:], "work_dir": str(self.work), "modes": args.modes,
                                              "rounds": args.rounds, "deadline_s": args.deadline_s},
                                     "reach": {}, "runs": [], "skipped": [], "summary": []}
        self.env = dict(os.environ)
        paths = [str(ROOT / "src"), str(HERE)]
        if self.smoke:
            lib = self.work / "smoke_lib"
            for rel, text in SMOKE_LIB.items():
                (lib / rel).parent.mkdir(parents=True, exist_ok=True)
                (lib / rel).write_text(text)
            paths.append(str(lib))
            self.env["TRITON_INTERPRET"] = "1"
        self.env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [os.environ.get("PYTHONPATH")] if p])
        self.live: list[Child] = []

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def save(self) -> None:
        self.data["meta"]["elapsed_s"] = round(time.monotonic() - self.t0, 1)
        self.data["summary"] = summarize(self.data)
        tmp = self.out.with_suffix(self.out.suffix + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str))
        os.replace(tmp, self.out)

    def spawn(self, job: dict[str, Any]) -> Child:
        d = self.work / "state" / f"{job.get('op') or job['library']}" / job["mode"]
        d.mkdir(parents=True, exist_ok=True)
        env = dict(self.env, TRITON_CACHE_DIR=str(d / "triton"), FLAGGEMS_CACHE_DIR=str(d / "flaggems"),
                   ABDUCTUNE_STORE=str(d / "store.sqlite"))
        if job["mode"] == "triton":
            env["TRITON_CACHE_AUTOTUNING"] = "1"  # the warm rounds reuse Triton's picks, as fla's cache_results does
        c = Child({**job, "store": str(d / "store.sqlite"), "smoke": self.smoke}, self.runs_dir, env)
        self.live.append(c)
        return c

    def record(self, res: dict[str, Any]) -> None:
        self.data["runs"].append(res)
        self.save()
        if res["role"] != "reach":
            err = res.get("error")
            print(f"[{time.monotonic() - self.t0:6.1f}s] {res['role']:4} {res['op']:24} {res['mode']:8} "
                  + (f"ERROR {err[:160]}" if err else f"first call {res.get('first_call_s', 0):7.2f}s  "
                     f"op {res.get('op_ms', math.nan):.4g} ms  err {res.get('rel_err', math.nan):.2g}"), flush=True)

    def skip(self, job: dict[str, Any], why: str) -> None:
        self.data["skipped"].append({k: job.get(k) for k in ("role", "op", "mode", "round")} | {"why": why})

    def batch(self, jobs: list[dict[str, Any]], first: list[Child] = ()) -> None:
        """Start `jobs` side by side; once they (and `first`, the reach children) are ready or
        done, let them run one at a time."""
        kids = [self.spawn(j) for j in jobs]
        end = time.monotonic() + min(READY_TIMEOUT_S, max(5.0, self.left()))
        for c in list(first):
            self.reach_result(c, c.wait(max(1.0, end - time.monotonic())))
        while time.monotonic() < end and not all(c.ready() or c.done() for c in kids):
            time.sleep(0.05)
        for c in kids:
            job = c.job
            if not (c.ready() or c.done()):
                c.kill()
                self.record(c.result(f"not ready after {READY_TIMEOUT_S:.0f}s of importing and setting up"))
            elif c.done():
                self.record(c.result())
            elif self.left() < job["est_s"]:
                c.quit()
                self.skip(job, f"deadline: {self.left():.0f}s left, about {job['est_s']:.0f}s needed")
            else:
                self.record(c.run(min(job["timeout_s"], self.left() + 30)))
            self.live.remove(c)

    def reach_result(self, c: Child, res: dict[str, Any]) -> None:
        self.data["reach"].setdefault(res["library"], {})[res["mode"]] = res
        if c in self.live:
            self.live.remove(c)
        self.save()

    def run(self) -> None:
        args = self.args
        reach_libs = ["smoke"] if self.smoke else ["fla", "flaggems", "liger"]
        libs = sorted({OPS[o].library for o in args.ops} | (set(reach_libs) if args.reach != "no" else set()))
        self.data["meta"]["ops"] = {o: {"library": OPS[o].library, "shape": OPS[o].shape, "kernels": OPS[o].kernels,
                                        "est_s": dict(zip(MODES, OPS[o].est_s))} for o in args.ops}
        self.data["meta"]["missing_modules"] = missing = preflight(libs)
        for lib, names in missing.items():
            print(f"{lib}: missing module(s) {', '.join(names)}: its imports will fail "
                  f"(put their wheels in .whl_lib and install them with the libraries)", flush=True)
        reach = []
        if args.reach != "no":
            for lib in reach_libs:
                for mode in ("triton", "patch"):
                    reach.append(self.spawn({"id": f"reach-{lib}-{mode}", "role": "reach", "library": lib,
                                             "mode": mode}))
        if args.reach == "only":
            for c in reach:
                self.reach_result(c, c.wait(max(5.0, self.left())))
            return
        pending = list(args.ops)
        while pending:
            group = self.plan(pending, first=bool(reach))
            if not group:
                break
            self.cold(group, reach)
            reach = []
            self.warm(group)

    def cost(self, ops: list[str], first: bool) -> float:
        """Seconds a group is expected to take: two import phases (the first beside the reach
        children), the cold children's estimates, the warm children."""
        n = len(ops) * len(self.args.modes)
        return (REACH_S if first else IMPORT_S) + IMPORT_S + sum(sum(OPS[o].est_s) for o in ops) \
            + self.args.rounds * n * WARM_CHILD_S

    def plan(self, pending: list[str], first: bool) -> list[str]:
        """The next --group ops, in order, that fit the time left beside each other; an op that does
        not fit beside them waits for a later group, one that does not fit alone is skipped."""
        group: list[str] = []
        later: list[str] = []
        for name in pending:
            if len(group) < self.args.group and self.cost(group + [name], first) <= self.left():
                group.append(name)
            elif self.cost([name], first) > self.left():
                self.skip({"role": "cold", "op": name}, f"its estimate (cold {sum(OPS[name].est_s):.0f}s, and its "
                          f"warm rounds) does not fit the {self.left():.0f}s left")
            else:
                later.append(name)
        pending[:] = later
        return group

    def cold(self, group: list[str], reach: list[Child]) -> None:
        jobs = []
        for name in group:
            est = dict(zip(MODES, OPS[name].est_s))
            flip = list(OPS).index(name) % 2  # alternate which mode goes first
            for mode in (self.args.modes[::-1] if flip else self.args.modes):
                jobs.append({"id": f"cold-{name}-{mode}", "role": "cold", "op": name, "library": OPS[name].library,
                             "mode": mode, "round": -1, "est_s": est[mode],
                             "timeout_s": min(300.0, max(60.0, 4 * est[mode]))})
        self.batch(jobs, first=reach)

    def warm(self, group: list[str]) -> None:
        """Every warm round of the group in one batch: per round, op by op, the modes in an order
        that flips each round."""
        cold_ok = {(x["op"], x["mode"]) for x in self.data["runs"] if x["role"] == "cold" and "first_call_s" in x}
        jobs = [{"id": f"warm{r}-{op}-{mode}", "role": "warm", "op": op, "library": OPS[op].library, "mode": mode,
                 "round": r, "est_s": WARM_CHILD_S, "timeout_s": 90.0}
                for r in range(self.args.rounds) for op in group
                for mode in (self.args.modes if r % 2 == 0 else self.args.modes[::-1]) if (op, mode) in cold_ok]
        if jobs and self.left() < WARM_CHILD_S + IMPORT_S:
            for j in jobs:
                self.skip(j, "deadline")
        elif jobs:
            self.batch(jobs)

    def close(self) -> None:
        for c in list(self.live):
            c.kill()


def preflight(libs: list[str]) -> dict[str, list[str]]:
    import importlib.util

    missing = {}
    for lib in libs:
        names = [n for n in [LIBRARIES[lib]] + NEEDS[lib] if lib != "smoke" and importlib.util.find_spec(n) is None]
        if names:
            missing[lib] = names
    return missing


# ============================================================================= summary and table
def _spread(xs: list[float]) -> float:
    return (max(xs) - min(xs)) / statistics.median(xs) if xs else math.nan


def noise_verdict(ratio: float | None, spreads: list[float]) -> str | None:
    """"faster" or "slower" where a mode's op time against Triton's pick (`ratio`) moved by more
    than either mode's spread over its processes, else "level"; None where a ratio or a spread
    is unknown (a mode timed in one process has no spread)."""
    if ratio is None or not spreads or any(x is None or math.isnan(x) for x in spreads):
        return None
    noise = max(spreads)
    return "faster" if 1.0 - ratio > noise else "slower" if ratio - 1.0 > noise else "level"


def picks_of(run: dict[str, Any]) -> dict[str, frozenset[str]]:
    """A child's pick per kernel tuned (the `best` config each tuner reported, as its "name:
    value" parts: the two modes print a config's fields in different orders)."""
    return {t["kernel"]: frozenset(x.strip() for x in str(t["best"]).split(","))
            for t in run.get("tuners", []) if t.get("best")}


def summarize(data: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    ops = list(dict.fromkeys(x["op"] for x in data["runs"] if x.get("role") in ("cold", "warm")))
    for op in ops:
        runs = [x for x in data["runs"] if x.get("op") == op]
        row: dict[str, Any] = {"op": op, "library": OPS[op].library, "shape": OPS[op].shape, "kernels": OPS[op].kernels,
                               "modes": {}}
        for mode in MODES:
            mine = [x for x in runs if x["mode"] == mode]
            if not mine:
                continue
            cold = next((x for x in mine if x["role"] == "cold"), {})
            ms = [x["op_ms"] for x in mine if x.get("op_ms") is not None]
            warm = [x for x in mine if x["role"] == "warm"]
            m: dict[str, Any] = {"cold_s": cold.get("first_call_s"), "op_ms": statistics.median(ms) if ms else None,
                                 "op_ms_each": ms, "spread": _spread(ms), "processes": len(ms),
                                 "ok": all(x.get("ok") for x in mine) and not any(x.get("error") for x in mine),
                                 "max_rel_err": max((x.get("rel_err", math.nan) for x in mine), default=math.nan),
                                 "errors": [x["error"][:300] for x in mine if x.get("error")][:3],
                                 "warm_first_call_s": [x.get("first_call_s") for x in warm],
                                 "kernels_tuned": sorted({t["kernel"].rsplit(".", 1)[-1]
                                                          for t in cold.get("tuners", [])})}
            if mode != "triton":
                ts = cold.get("tuners", [])
                m.update(evaluations=sum(t["evaluations"] for t in ts), beyond_list=sum(t["beyond_list"] for t in ts),
                         beyond_failed=sum(t.get("beyond_failed") or 0 for t in ts),
                         won_beyond_list=sum(t["won_beyond_list"] for t in ts),
                         kept_listed=sum(t.get("kept_listed") or 0 for t in ts),
                         gain_beyond_list=max((t["gain_beyond_list"] for t in ts), default=1.0),
                         warm_retuned=sum(t["tunes"] for x in warm for t in x.get("tuners", [])),
                         phases=cold_phases(ts), pool=cold.get("pool"), setup_s=cold.get("setup_s"))
            else:
                m["configs_timed"] = sum(t["timed"] for t in cold.get("tuners", []))
                m["bench_time_s"] = sum(t.get("bench_s") or 0.0 for t in cold.get("tuners", []))
            row["modes"][mode] = m
        for key, name in (("op_ms", ""), ("cold_s", "cold ")):
            t = row["modes"].get("triton", {}).get(key)
            for mode in ("patch", "patch32"):
                v = row["modes"].get(mode, {}).get(key)
                row[f"{name}{mode}/triton"] = v / t if v and t else None
        cold = {x["mode"]: x for x in runs if x.get("role") == "cold"}
        for mode in ("patch", "patch32"):
            if mode in row["modes"] and "triton" in row["modes"]:
                row[f"{mode}_verdict"] = noise_verdict(row[f"{mode}/triton"], [row["modes"][x]["spread"]
                                                                               for x in ("triton", mode)])
                # the very kernel Triton picked: any difference is between processes, not configs
                # (session 44: two such ops read 0.2% "slower" past spreads of 0.0-0.2%)
                mine, theirs = picks_of(cold.get(mode, {})), picks_of(cold.get("triton", {}))
                if row[f"{mode}_verdict"] is not None and mine and mine == theirs:
                    row[f"{mode}_verdict"] = "same config"
        rows.append(row)
    return rows


PHASES = ("first_launch_s", "bench_s", "runoff_s", "store_s", "session_other_s")
COMPILES = ("sent", "from_workers", "withdrawn", "waited", "compiled_here", "helped", "worker_misses")


def cold_phases(tuners: list[dict[str, Any]]) -> dict[str, Any]:
    """abductune's phases (autotune/phases.py) over every tune of a cold child, summed: where its
    first call went, what the compile workers did, and how old the pool was at the first tune."""
    ps = [p for t in tuners for p in t.get("phases", [])]
    out: dict[str, Any] = {k: round(sum(p.get(k, 0.0) for p in ps), 3) for k in PHASES}
    out["other_s"] = round(sum(p.get("lookup_s", 0.0) + p.get("before_session_s", 0.0) + p.get("after_session_s", 0.0)
                               for p in ps), 3)
    comp = [p.get("compile", {}) for p in ps]
    out.update({k: sum(c.get(k, 0) for c in comp) for k in COMPILES})
    out["plans"] = sorted({c.get("plan", "?") for c in comp})
    out["pool_age_s"] = next((round(c["pool_age_s"], 2) for c in comp if c.get("pool_age_s") is not None), None)
    out["runoff_rounds"] = [p.get("runoff_rounds") for p in ps if p.get("runoff_rounds")]
    return out


def phase_table(data: dict[str, Any]) -> list[str]:
    lines = ["", "cold first call (s): Triton's bench_time (compiles and timing of its list); abductune's phases: first "
             "launches (compile, cache load or wait), timing, run-off, store, session, other; compiles: sent to workers "
             "/ found compiled by them / withdrawn / waited for / compiled here / compiled here while waiting / "
             "compiled again at launch (pool age at the first tune); when the pool had imported the library, "
             "from its start, beside the child's own import and set-up",
             "| op | T cold | T bench_time | P cold | first launch | bench | run-off | store | session | other | "
             "compiles |", "|---" * 11 + "|"]
    for row in data["summary"]:
        t, p = row["modes"].get("triton", {}), row["modes"].get("patch", {})
        ph = p.get("phases") or {}
        pool = p.get("pool") or {}
        comp = "/".join(str(ph.get(k, "-")) for k in COMPILES) + f" ({ph.get('pool_age_s', '-')})" if ph else "-"
        if pool:  # how long the pool took to import the library, beside the child's own import and set-up
            comp += f"; pool warm {pool.get('warm_s', '-')} s, set-up {p.get('setup_s', '-')} s"
        lines.append(f"| {row['op']} | {_f(t.get('cold_s'), '.2f')} | {_f(t.get('bench_time_s'), '.2f')} | "
                     f"{_f(p.get('cold_s'), '.2f')} | " + " | ".join(_f(ph.get(k), ".2f") for k in PHASES) +
                     f" | {_f(ph.get('other_s'), '.2f')} | {comp} |")
    return lines


def _f(v: Any, fmt: str) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def table(data: dict[str, Any]) -> str:
    lines = []
    for lib, r in sorted(data["reach"].items()):
        p, t = r.get("patch", {}), r.get("triton", {})
        why = "; ".join(f"{n} {w}" for w, n in p.get("left_alone_why", {}).items()) or "none"
        kinds = sorted(p.get("failure_kinds", {}).items(), key=lambda kv: -kv[1])[:3]
        lines.append(f"reach {lib}: {p.get('reached', '-')} of {p.get('total', '-')} reached under the patch "
                     f"(plain import: {t.get('total', '-')} autotuners); left alone: {why}; modules "
                     f"{p.get('modules', '-')}, import failures {p.get('import_failures', '-')} "
                     f"({', '.join(f'{n} {k}' for k, n in kinds)})"
                     + (f"; ERROR {p['error'][:200]}" if p.get("error") else ""))
    lines += phase_table(data)
    lines += ["", "| op | library | kernels tuned | cold s T / P / P32 | op ms T / P / P32 (median) | P/T | P32/T "
              "| spread T / P / P32 | P32 evals, beyond list (failed, won, list kept) | correct |", "|---" * 10 + "|"]
    for row in data["summary"]:
        m = row["modes"]
        get = lambda k, fmt: " / ".join(_f(m.get(x, {}).get(k), fmt) for x in MODES)  # noqa: E731
        p32 = m.get("patch32", {})
        kern = sorted({k for x in m.values() for k in x.get("kernels_tuned", [])})
        ok = " / ".join("ok" if m[x]["ok"] else "FAIL" for x in MODES if x in m)
        lines.append(f"| {row['op']} | {row['library']} | {', '.join(kern)[:60] or '-'} | {get('cold_s', '.1f')} | "
                     f"{get('op_ms', '.4g')} | {_f(row.get('patch/triton'), '.3f')} | "
                     f"{_f(row.get('patch32/triton'), '.3f')} | {get('spread', '.1%')} | "
                     f"{_f(p32.get('evaluations'), 'd')}, {_f(p32.get('beyond_list'), 'd')} "
                     f"({_f(p32.get('beyond_failed'), 'd')}, {_f(p32.get('won_beyond_list'), 'd')}, "
                     f"{_f(p32.get('kept_listed'), 'd')}) | {ok} |")
    lines += verdict_lines(data["summary"])
    if data["skipped"]:
        lines.append(f"skipped: {len(data['skipped'])} child(ren), e.g. {data['skipped'][0]}")
    return "\n".join(lines)


def verdict_lines(summary: list[dict[str, Any]]) -> list[str]:
    """Per patch mode, the ops faster, slower and level against Triton's pick beyond noise
    (`noise_verdict`), and those that ran Triton's own pick ("same config"): the issue's
    "faster on at least half, never slower beyond noise"."""
    lines = []
    for mode, name in (("patch", "P"), ("patch32", "P32")):
        got = [(row["op"], row.get(f"{mode}_verdict")) for row in summary if f"{mode}_verdict" in row]
        if not got:
            continue
        kinds = ("slower", "level", "same config", None)
        by = {v: [op for op, w in got if w == v] for v in ("faster", *kinds)}
        lines.append(f"{name} / T beyond noise (the change past both modes' spreads): faster on {len(by['faster'])} "
                     f"of {len(got)}" + "".join(f"; {v if v else 'no spread'} {len(by[v])} ({', '.join(by[v])})"
                                              for v in kinds if by[v]))
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(OUT / "library_ops.json"))
    ap.add_argument("--deadline-s", type=float, default=480.0, help="no child is let run past this")
    ap.add_argument("--ops", default=None, help="comma list (default: every default op of library_op_cases)")
    ap.add_argument("--modes", default=",".join(MODES), help="comma list of triton, patch, patch32")
    ap.add_argument("--rounds", type=int, default=2, help="warm rounds after the cold pass")
    # 1 by default: with 4, twelve children waited side by side, each patched one with its own
    # compile workers starting, and op times came out bimodal across processes (session 17:
    # fla l2norm 0.095 or 0.168 ms for the same pick); one op at a time, spreads were 0-1.4%
    ap.add_argument("--group", type=int, default=1, help="ops per group: their cold children are started side "
                    "by side, then their warm children (every round); a deadline cut leaves whole groups; "
                    "more than 1 saves import time but disturbs the op times")
    ap.add_argument("--reach", choices=("yes", "no", "only"), default="yes")
    ap.add_argument("--work-dir", default=None, help="caches and logs (default: a new temporary folder)")
    ap.add_argument("--smoke", action="store_true", help="the CPU path: our own small library, TRITON_INTERPRET=1")
    args = ap.parse_args(argv)
    args.modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in args.modes if m not in MODES] + [o for o in (args.ops or "").split(",") if o and o not in OPS]
    if bad:
        raise SystemExit(f"unknown mode or op: {', '.join(bad)} (ops: {', '.join(OPS)}; modes: {', '.join(MODES)})")
    args.ops = [o for o in args.ops.split(",") if o] if args.ops else \
        [o.name for o in OPS.values() if (o.library == "smoke") == args.smoke and (o.default or args.smoke)]
    runner = Runner(args)
    try:
        runner.run()
    finally:
        runner.close()
        runner.save()
    print("\n" + table(runner.data), flush=True)


if __name__ == "__main__":
    main()
