"""benchmarks/gpu/library_ops.py (issue 24), its CPU path: `--smoke` runs the whole orchestration
(reach children, cold and warm children per mode, the JSON, the summary and the table) on a small
library of our own under Triton's interpreter, so the H100 run is one command that has run before."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu" / "library_ops.py"


def _run(tmp_path: Path, *extra: str) -> tuple[dict, str]:
    out = tmp_path / "lo.json"
    r = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--out", str(out), "--work-dir", str(tmp_path / "work"),
                        *extra], capture_output=True, text=True, timeout=180, cwd=ROOT, env=dict(os.environ))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return json.loads(out.read_text()), r.stdout


def test_smoke_reach_cold_and_warm_children(tmp_path):
    data, stdout = _run(tmp_path, "--ops", "smoke_add", "--rounds", "1")

    # reach: the plain import counts the library's three autotuners; under the patch the
    # triton.autotune one and the library's own Autotuner subclass become abductune's, the one
    # with no configs is left alone with the patch's reason; the module that fails is counted apart
    plain, patched = data["reach"]["smoke"]["triton"], data["reach"]["smoke"]["patch"]
    assert (plain["total"], plain["reached"]) == (3, 0)
    assert (patched["total"], patched["reached"], patched["left_alone"]) == (3, 2, 1)
    [(why, n)] = patched["left_alone_why"].items()
    assert n == 1 and "nothing to tune" in why
    assert patched["by_class"]["abt_smoke_lib.CountingTuner"] == 1
    assert patched["import_failures"] == 1 and list(patched["failures"]) == ["abt_smoke_lib.ops.vendor"]

    runs = {(r["role"], r["mode"]): r for r in data["runs"] if r["role"] != "reach"}
    assert set(runs) == {(role, m) for role in ("cold", "warm") for m in ("triton", "patch", "patch32")}
    for r in runs.values():
        assert not r.get("error") and r["ok"] and r["rel_err"] == 0.0, r
        assert r["first_call_s"] > 0 and r["op_ms"] > 0 and len(r["op_ms_all"]) == 3
    # cold: Triton timed its list of two; the patch measured the list; budget=32 went beyond it
    [t] = runs["cold", "triton"]["tuners"]
    assert (t["class"], t["list"], t["timed"]) == ("CountingTuner", 2, 2)
    [t] = runs["cold", "patch"]["tuners"]
    assert (t["tunes"], t["evaluations"], t["beyond_list"]) == (1, 2, 0)
    [t] = runs["cold", "patch32"]["tuners"]
    assert t["tunes"] == 1 and t["evaluations"] > 2 and t["beyond_list"] >= 1
    # warm: each patch mode read its own store and measured nothing
    for mode in ("patch", "patch32"):
        [t] = runs["warm", mode]["tuners"]
        assert (t["tunes"], t["store_hits"], t["evaluations"]) == (0, 1, 0)

    [row] = data["summary"]
    m = row["modes"]
    assert row["op"] == "smoke_add" and all(m[x]["processes"] == 2 and m[x]["ok"] for x in m)
    assert row["patch32/triton"] == m["patch32"]["op_ms"] / m["triton"]["op_ms"]
    assert m["patch32"]["evaluations"] == runs["cold", "patch32"]["tuners"][0]["evaluations"]
    assert m["patch32"]["warm_retuned"] == 0 and not data["skipped"]
    # where the cold first call went: abductune's phases (interpreted: compiled here, one tune of 2 configs)
    ph = m["patch"]["phases"]
    assert ph["plans"] == ["serial"] and ph["compiled_here"] == 0 and ph["bench_s"] > 0 and ph["first_launch_s"] > 0
    assert sum(ph[k] for k in ("first_launch_s", "bench_s", "runoff_s", "store_s", "session_other_s", "other_s")) \
        <= m["patch"]["cold_s"] + 0.05
    assert m["triton"]["bench_time_s"] > 0
    assert any(line.startswith("| smoke_add | ") and line.count("|") == 12 for line in stdout.splitlines())
    lines = stdout.strip().splitlines()
    # the table is printed last, then a line per patch mode sorting the ops by the noise verdict
    assert lines[-3].startswith("| smoke_add | smoke | _add |") and lines[-3].endswith("| ok / ok / ok |")
    for mode, name, line in (("patch", "P", lines[-2]), ("patch32", "P32", lines[-1])):
        ratio, spreads = row[f"{mode}/triton"], [m["triton"]["spread"], m[mode]["spread"]]
        want = "faster" if 1 - ratio > max(spreads) else "slower" if ratio - 1 > max(spreads) else "level"
        same = {t["kernel"]: set(t["best"].split(", ")) for t in runs["cold", mode]["tuners"]} == \
            {t["kernel"]: set(t["best"].split(", ")) for t in runs["cold", "triton"]["tuners"]}
        want = "same config" if same else want
        assert row[f"{mode}_verdict"] == want
        assert line.startswith(f"{name} / T beyond noise") and f"faster on {int(want == 'faster')} of 1" in line
        assert (f"; {want} 1 (smoke_add)" in line) == (want != "faster")


def test_noise_verdict_needs_the_change_past_both_spreads():
    sys.path.insert(0, str(SCRIPT.parent))
    from library_ops import noise_verdict, verdict_lines

    assert noise_verdict(0.95, [0.01, 0.03]) == "faster" and noise_verdict(0.98, [0.01, 0.03]) == "level"
    assert noise_verdict(1.05, [0.04, 0.01]) == "slower" and noise_verdict(1.03, [0.04, 0.01]) == "level"
    assert noise_verdict(0.5, [float("nan"), 0.0]) is None and noise_verdict(None, [0.0, 0.0]) is None
    rows = [{"op": "a", "patch32_verdict": "faster"}, {"op": "b", "patch32_verdict": "slower"},
            {"op": "c", "patch32_verdict": "level"}, {"op": "d", "patch32_verdict": "faster"}]
    [line] = verdict_lines(rows)
    assert line.startswith("P32 / T beyond noise") and "faster on 2 of 4; slower 1 (b); level 1 (c)" in line


def test_the_very_kernel_triton_picked_is_no_verdict_of_faster_or_slower():
    """Where a mode ran Triton's own pick (fields in another order), a difference past the
    spreads is between processes: the verdict says "same config" (session 44: bicubic and
    var_mean read 0.2% "slower" so); another pick keeps the noise verdict."""
    sys.path.insert(0, str(SCRIPT.parent))
    from library_ops import summarize, verdict_lines

    def run(mode, role, ms, best):
        return {"op": "smoke_add", "mode": mode, "role": role, "op_ms": ms, "ok": True, "first_call_s": 1.0,
                "tuners": [{"kernel": "m.add_kernel", "best": best, "timed": 2, "evaluations": 2, "beyond_list": 0,
                            "won_beyond_list": 0, "gain_beyond_list": 1.0, "tunes": int(role == "cold"),
                            "phases": []}]}

    def rows(patch_best):
        runs = [run("triton", r, t, "BLOCK: 64, num_warps: 4") for r, t in (("cold", 1.000), ("warm", 1.000))]
        runs += [run("patch", r, t, patch_best) for r, t in (("cold", 1.002), ("warm", 1.002))]
        return summarize({"runs": runs})

    [row] = rows("num_warps: 4, BLOCK: 64")
    assert row["patch_verdict"] == "same config"
    assert "same config 1 (smoke_add)" in verdict_lines([row])[0]
    [row] = rows("BLOCK: 128, num_warps: 4")
    assert row["patch_verdict"] == "slower"


def test_deadline_skips_what_does_not_fit_and_still_writes_the_json(tmp_path):
    data, stdout = _run(tmp_path, "--reach", "no", "--deadline-s", "1")
    assert data["runs"] == [] and data["summary"] == []
    assert [s["op"] for s in data["skipped"]] == ["smoke_scale", "smoke_add"]
    assert all("does not fit" in s["why"] for s in data["skipped"])
    assert "skipped: 2 child(ren)" in stdout
