"""@abductune.autotune(isolate=True): configs are measured in a worker process, so a config that
kills its process (SIGSEGV) or hangs is a failed measurement and the caller goes on; the worker
runs the hooks and the reference on its copies; the winner is stored for other processes; what
the worker cannot import or receive is refused before measuring. Runs under Triton's
interpreter on the CPU (autotune_kernels/crashy.py crashes and hangs on purpose)."""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from autotune_kernels import INTERPRET, env, interpreted

if INTERPRET:  # in the interpreted child process: TRITON_INTERPRET=1 was set before triton is imported
    torch = pytest.importorskip("torch")
    triton = pytest.importorskip("triton")
    import triton.language as tl

    from autotune_kernels import crashy, vouched

    import abductune
    from abductune.autotune import Autotuner
    from abductune.errors import AbductuneError
    from abductune.store import Store

ROOT = Path(__file__).resolve().parents[1]

def second_process(store: Path) -> dict:
    code = ("import json, sys; from autotune_kernels import crashy; "
            "print('RESULT' + json.dumps(crashy.main(sys.argv[1], 256)))")
    r = subprocess.run([sys.executable, "-c", code, str(store)], cwd=ROOT, env=env(), capture_output=True, text=True,
                       timeout=240)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert r.returncode == 0 and line, r.stderr[-4000:]
    return json.loads(line[len("RESULT"):])


@interpreted
def test_crashing_and_hanging_configs_fail_alone_and_the_tune_finishes(tmp_path: Path):
    store = tmp_path / "s.sqlite"
    k = crashy.make(store=store, isolate_timeout_s=8)
    x = torch.arange(256.0)
    out = torch.ones(256)  # not zero: every trial must start from reset_to_zero, in the worker
    got = crashy.accumulate(k, x, out)  # this process survives a SIGSEGV and a hang of the worker
    assert got is out and torch.equal(out, 2 * x)  # reset after tuning, then the winner launched here
    [choice] = k.choices.values()
    assert choice.config["BLOCK"] == 128 and choice.source == "tuned"  # the fastest config that ran
    assert k.best_config.kwargs == {"BLOCK": 128} and k.stats["tunes"] == 1
    with Store(store) as s:
        ctx = s.runs()[0].context
        rows = s.measurements(ctx)
    first = {m.config["BLOCK"]: m for m in rows if m.kind != "verify"}
    assert sorted(first) == [16, 32, 64, 128]
    crashed, hung = first[16], first[32]
    assert crashed.status == "runtime_error", crashed
    assert crashed.error.startswith("worker killed by SIGSEGV while running this config"), crashed.error
    assert hung.status == "timeout" and "within 8s (isolate_timeout_s)" in hung.error, hung
    # the configs after a crash ran in fresh workers, checked against the reference: had a trial
    # run without reset_to_zero (or on the caller's tensor), it would be wrong_result
    assert first[64].ok and first[128].ok and first[128].time_ms == 1.0 and first[64].time_ms == 2.0
    assert all(m.ok for m in rows if m.config["BLOCK"] in (64, 128))
    # a second process reads the winner from the store and measures nothing (starts no worker)
    other = second_process(store)
    assert other["ok"] and other["source"] == "store" and other["winner"] == choice.config
    assert other["stats"]["evaluations"] == 0 and other["stats"]["store_hits"] == 1
    with Store(store) as s:
        assert len(s.measurements(ctx)) == len(rows)
    # and a hit here launches the winner in this process
    again = crashy.accumulate(k, x, torch.zeros(256))
    assert torch.equal(again, 2 * x) and k.stats["tunes"] == 1


@interpreted
def test_configs_beyond_the_list_are_checked_against_the_list_in_the_worker_too(tmp_path: Path):
    """isolate=True with `budget=` and no `reference=`: the worker runs the list's own config
    (BLOCK 64, with its own grid) and a config beyond the list that writes something else
    (BLOCK 32: 3x, the fastest) is `wrong_result` there, as in-process; one that computes what
    the list's does (BLOCK 128) is measured and wins. With `reference=`, the worker checks
    against that instead and the list is not sent."""
    x = torch.arange(600.0)
    k = vouched.make(store=tmp_path / "a.sqlite")
    out = vouched.double(k, x, torch.zeros(600))
    assert torch.equal(out, 2 * x) and k.best_config.kwargs == {"BLOCK": 128}
    with Store(tmp_path / "a.sqlite") as s:
        ms = s.measurements(s.runs()[0].context)
    by = {}
    for m in ms:
        by.setdefault(m.config["BLOCK"], []).append(m)
    assert by[32] and all(m.status == "wrong_result" for m in by[32]), [(m.status, m.error) for m in by[32]]
    assert "differ from the kernel's own config" in by[32][0].error
    # 128 is grown too, and right; had the list's config run with another config's grid, the
    # check would have expected zeros where it wrote nothing and called every right config wrong
    assert by[128] and all(m.ok for m in by[128]) and all(m.ok for m in by[64])
    checked = vouched.make(store=tmp_path / "b.sqlite", reference=vouched.reference)
    torch.testing.assert_close(vouched.double(checked, x, torch.zeros(600)), 2 * x)
    with Store(tmp_path / "b.sqlite") as s:
        wrong = [m for m in s.measurements(s.runs()[0].context) if m.status == "wrong_result"]
    assert wrong and {m.config["BLOCK"] for m in wrong} == {32}
    assert not any("kernel's own config" in m.error for m in wrong)  # the reference judged them


@interpreted
def test_a_kernel_decorated_in_place_is_found_and_restore_value_applies_in_the_worker(tmp_path, monkeypatch):
    monkeypatch.setenv("ABDUCTUNE_STORE", str(tmp_path / "default.sqlite"))
    k = crashy.scale_kernel  # the module-level name is the autotuner; the worker launches what it wraps
    x = torch.arange(64.0)
    out = torch.full((64,), 3.0)
    k[lambda meta: (triton.cdiv(64, meta["BLOCK"]),)](x, out, 64)
    assert torch.equal(out, 3 * x)  # one launch here; the trials ran on the worker's copies
    assert k.stats["tunes"] == 1 and k.stats["evaluations"] == 2
    with Store(tmp_path / "default.sqlite") as s:
        rows = s.measurements(s.runs()[0].context)
    # in place (out *= x): trials after the first would be wrong without restore_value in the worker
    assert rows and all(m.ok for m in rows), [(m.config, m.status, m.error) for m in rows]


@interpreted
def test_what_the_worker_cannot_import_or_receive_is_refused_before_measuring():
    x = torch.zeros(8)

    @triton.jit
    def local_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        tl.store(out_ptr, tl.load(x_ptr))

    k = abductune.autotune(configs=crashy.CONFIGS[2:], key=["n"], isolate=True, store=":memory:")(local_kernel)
    with pytest.raises(AbductuneError, match=r"imports the kernel .*local_kernel: it is defined inside a function; "
                                             r"move the kernel .* or use isolate=False"):
        k[(1,)](x, x.clone(), 8)
    ns: dict = {"__name__": "__main__"}  # a script or a notebook
    exec("def script_kernel(x_ptr, n):\n    pass\n", ns)
    main_kernel = Autotuner(ns["script_kernel"], ["x_ptr", "n"], [triton.Config({"BLOCK": 16}),
                                                                  triton.Config({"BLOCK": 32})], ["n"],
                            isolate=True, store=":memory:")
    with pytest.raises(AbductuneError, match=r"script_kernel: it is defined in __main__"):
        main_kernel[(1,)](x, 8)

    def local_timer(cfg, launch):
        return 1.0

    hooks = [("post_hook", {"post_hook": lambda nargs, exception: None}, "it is a lambda"),
             ("timer", {"timer": local_timer}, "it is defined inside a function"),
             ("do_bench", {"do_bench": functools.partial(crashy.timer)}, "it has no module-level name")]
    for what, option, why in hooks:
        k = crashy.make(store=":memory:", **option)
        with pytest.raises(AbductuneError, match=rf"cannot import the {what} .*: {why}.*; define it at module level"):
            crashy.accumulate(k, x, x.clone())
    cfgs = [triton.Config({"BLOCK": 64}, pre_hook=lambda nargs: None), triton.Config({"BLOCK": 128})]
    k = abductune.autotune(configs=cfgs, key=["n"], isolate=True, store=":memory:")(crashy.accumulate_kernel)
    with pytest.raises(AbductuneError, match=r"pre_hook of config \{'BLOCK': 64, .*it is a lambda"):
        crashy.accumulate(k, x, x.clone())
    # an argument that is neither a tensor nor a plain value: named, before a worker starts
    k = crashy.make(store=":memory:")
    with pytest.raises(AbductuneError, match=r"argument 'n' is a Fraction, which cannot be sent"):
        k[(1,)](x, x.clone(), Fraction(8))
    for bad in ({"isolate": "yes"}, {"isolate_timeout_s": 0}):
        with pytest.raises(AbductuneError, match=next(iter(bad))):
            crashy.make(store=":memory:", **bad)
    assert os.getpid()  # still here
