"""`patch_triton` on kernel libraries (issue 24), on the CPU under Triton's interpreter, with small
kernels of our own that reproduce each failure met with Liger-Kernel, fla and FlagGems
(tests/autotune_kernels/libraries.py, worker_stub.py):

1. reach: Triton's Autotuner built directly or subclassed (fla's CachedAutotuner, FlagGems'
   LibTuner) becomes abductune's; what is left alone is reported with its reason;
2. wrappers: an `isinstance(x, triton.runtime.Autotuner)` wrapper (FlagGems' @libentry()),
   @triton.heuristics over the autotuner, Triton's attributes and protocol;
3. compile workers: heuristics over autotune (the "Conflicting meta-parameters" of fla), keyword
   tensors and dtype arguments ("failed to specialize ... torch.dtype"), descriptors; a failed
   job reported once;
4. identity: dtypes from tensor descriptors, hardware from the CUDA device, never the interpreter's
   name for a kernel that runs on a GPU;
5. growth beyond the list's hull with a budget, pruned by the resource model and the kernel's
   early_config_prune, reported per kernel.

Timing is an injected deterministic timer (config -> ms), as in tests/test_autotune.py."""
from __future__ import annotations

import importlib.util
import json
import logging
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace

import pytest

from autotune_kernels import INTERPRET, interpreted

if INTERPRET:  # in the interpreted child process: TRITON_INTERPRET=1 was set before triton is imported
    torch = pytest.importorskip("torch")
    triton = pytest.importorskip("triton")
    from autotune_kernels import matmul as mm

    import abductune
    from abductune.autotune import Autotuner, grow_space, space_from_configs
    from abductune.autotune import choices as choices_mod
    from abductune.autotune import compiling, keys
    from abductune.autotune.evaluation import call_evaluator
    from abductune.errors import AbductuneError
    from abductune.hardware import lookup
    from abductune.problem import Problem
    from abductune.store import Store

HERE = Path(__file__).resolve().parent


class Timer:
    """ms = table(config); each trial is launched once, so wrong launches fail the test."""

    def __init__(self, fn):
        self.fn, self.seen = fn, []

    def __call__(self, cfg, launch):
        launch()
        self.seen.append(dict(cfg))
        return [self.fn(cfg)]


def by_block(cfg):
    return {16: 2.0, 32: 1.0}.get(cfg.get("BLOCK", cfg.get("BM")), 3.0)


def _load(name: str, alias: str):
    spec = importlib.util.spec_from_file_location(alias, HERE / "autotune_kernels" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _library(tmp_path: Path, alias: str, **options):
    timer = Timer(by_block)
    with abductune.patch_triton(store=tmp_path / "s.sqlite", timer=timer, **options) as patch:
        lib = _load("libraries", alias)
    return lib, patch, timer


# ---------------------------------------------------------------- 1. reach, and what is left alone

@interpreted
def test_subclasses_built_without_triton_autotune_are_reached(tmp_path: Path):
    lib, patch, timer = _library(tmp_path, "lib_reach")
    cached, policy = lib.cached_scale_kernel, lib.policy_scale_kernel.fn
    # fla's CachedAutotuner and FlagGems' LibTuner: instances of their own class, of Triton's and of ours
    for k, cls in ((cached, lib.CachedTuner), (policy, lib.PolicyTuner)):
        assert isinstance(k, cls) and isinstance(k, triton.runtime.Autotuner) and isinstance(k, Autotuner)
        assert type(k).__name__ == cls.__name__ and type(k).__module__ == cls.__module__
    assert type(lib.entry_scale_kernel.fn) is Autotuner and type(lib.heur_scale_kernel.fn) is Autotuner
    assert cached.kernel_name == "cached_scale_kernel"  # the subclass's own __init__ ran

    x = torch.randn(50)
    torch.testing.assert_close(lib.cached_scale(x, 2.0), 2 * x)  # its run kept: it tunes through ours
    assert cached.stats["tunes"] == 1 and cached.best_config.kwargs == {"BLOCK": 32}
    # its run replaced (it re-implements tuning): its policy never runs, its strategy buckets keys
    for n in (40, 50, 64):  # one align32 bucket: 64
        torch.testing.assert_close(lib.policy_scale(torch.ones(n), 3.0), 3 * torch.ones(n))
    assert policy.policy_calls == 0 and policy.stats["tunes"] == 1 and policy.best_config.kwargs == {"BLOCK": 32}
    lib.policy_scale(torch.ones(70), 3.0)  # bucket 96
    assert policy.stats["tunes"] == 2
    with Store(tmp_path / "s.sqlite") as s:
        kernels = sorted({r.context.kernel for r in s.runs()})
        dims = sorted(r.context.dims["n"] for r in s.runs() if r.context.kernel == "policy_scale_kernel")
    assert kernels == ["cached_scale_kernel", "policy_scale_kernel"] and dims == [64, 96]

    thin = lib.thin_scale_kernel  # no __init__ of its own: abductune's runs under it
    assert isinstance(thin, lib.ThinTuner) and isinstance(thin, Autotuner) and thin.describe() == "2 configs"
    torch.testing.assert_close(lib.thin_scale(x, 2.0), 2 * x)
    assert thin.stats["tunes"] == 1
    named = lib.named_init_kernel  # its __init__ skips abductune's: it stays the library's class
    assert type(named) is lib.NamedInitTuner and not isinstance(named, Autotuner)
    text = patch.report()
    assert "reached 7 autotuner(s), left 2 alone" in text
    assert "named_init_kernel" not in text and "_scale_body: its __init__ calls Triton's Autotuner.__init__ by name" \
        in text
    assert "lib_reach.CachedTuner (a subclass of Triton's Autotuner: its run kept" in text
    assert "lib_reach.PolicyTuner (a subclass of Triton's Autotuner whose run re-implements tuning: abductune's " \
           "run; its per-key strategy kept as buckets)" in text
    assert "untuned_kernel: no configs: nothing to tune (Triton launches its default config) (it stays " \
           "triton.runtime.autotuner.Autotuner, as written)" in text
    assert "policy_scale_kernel: 2 key(s) tuned" in text and "the list only (give budget= or beyond= to search" in text


@interpreted
def test_what_cannot_be_taken_over_stays_as_written_and_is_reported(tmp_path: Path, capsys):
    before = _load("plain_triton", "plain_before_patch")  # built outside any patch
    lib, patch, _ = _library(tmp_path, "lib_left", exclude=["CachedTuner"])
    assert type(lib.untuned_kernel) is triton.runtime.autotuner.Autotuner  # configs=[]: Triton's, as written
    assert lib.untuned_kernel.configs[0].kwargs == {}  # Triton's own __init__ built it
    assert type(lib.cached_scale_kernel) is lib.CachedTuner  # excluded: the library's class itself
    left = dict(patch.left_alone)
    assert "excluded by patch_triton(exclude=...)" in left["lib_left.CachedTuner"]
    text = patch.report()
    assert "built outside the patch" in text and "scale_kernel" in text.split("built outside the patch")[1]
    assert type(before.scale_kernel) is triton.runtime.autotuner.Autotuner
    from abductune.autotune import patch as patch_mod

    patch.report_at_exit = True
    patch_mod._report_at_exit()  # what the process prints at exit when asked
    assert "abductune patch_triton: reached" in capsys.readouterr().err
    with pytest.raises(AbductuneError, match="unknown option budgett"):
        abductune.patch_triton(budgett=4)


@interpreted
def test_a_config_filed_in_cache_by_the_subclass_is_launched_untuned(tmp_path: Path):
    lib, _, timer = _library(tmp_path, "lib_files")
    lib.CachedTuner.FILES["cached_scale_kernel"] = triton.Config({"BLOCK": 16}, num_warps=1)
    try:
        x = torch.randn(40)
        torch.testing.assert_close(lib.cached_scale(x, 2.0), 2 * x)
    finally:
        lib.CachedTuner.FILES.clear()
    k = lib.cached_scale_kernel
    assert timer.seen == [] and k.stats["tunes"] == 0 and k.best_config.kwargs == {"BLOCK": 16}
    [choice] = k.choices.values()
    assert choice.source == "given"


# ------------------------------------------------------------------ 2. what wrappers expect

@interpreted
def test_libentry_accepts_it_and_reads_best_config(tmp_path: Path):
    lib, _, timer = _library(tmp_path, "lib_entry")
    x = torch.randn(70)
    torch.testing.assert_close(lib.entry_scale(x, 3.0), 3 * x)  # no "Invalid Runtime Function"
    torch.testing.assert_close(lib.entry_scale(x, 3.0), 3 * x)
    assert lib.entry_scale_kernel.seen[-1] == ("autotuner", {"BLOCK": 32}, 2, 3)
    assert len(timer.seen) == 2  # tuned once, launched twice
    # the failure: a wrapper that is not Triton's Autotuner is refused by @libentry()
    entry = lib.LibEntry(SimpleNamespace(fn=lib.entry_scale_kernel.fn, arg_names=[], run=lambda *a, **k: None))
    with pytest.raises(RuntimeError, match="Invalid Runtime Function"):
        entry.run(x, grid=(1,), warmup=False)


@interpreted
def test_triton_protocol_attributes_and_heuristics_over_it(tmp_path: Path):
    lib, _, timer = _library(tmp_path, "lib_proto")
    k = lib.heur_scale_kernel.fn  # @triton.heuristics over the autotuner
    assert isinstance(lib.heur_scale_kernel, triton.runtime.Heuristics) and isinstance(k, Autotuner)
    x, b = torch.randn(40), torch.randn(40)
    torch.testing.assert_close(lib.heur_scale(x, 2.0, b), 2 * x + b)
    torch.testing.assert_close(lib.heur_scale(x, 2.0), 2 * x)
    assert k.nargs is None and k.keys == ["n"] and k.arg_names[:2] == ["x_ptr", "bias_ptr"]
    assert k.base_fn.__name__ == "heur_scale_kernel" and k.stats["tunes"] == 2  # with and without a bias
    assert all(isinstance(c, triton.Config) for c in k.configs_timings) and k.configs_timings
    # Triton's cache: Triton's key (key values, then every argument's dtype text) -> a triton.Config
    assert sorted(k.cache) == [(40, "torch.float32", "torch.float32"), (40, "torch.float32", "torch.float32",
                                                                         "torch.float32")]
    assert all(c.kwargs == {"BLOCK": 32} for c in k.cache.values())
    k.nargs = {"n": 40}
    assert k.prune_configs({}) == k.configs  # Triton's: triton.Configs
    k.nargs = None
    assert k.user_defined_pre_hook is False and k.restore_copies == {} and k.cache_results is False
    # keyword tensors, do_not_specialize and a constexpr default (fla's swiglu)
    x, y = torch.randn(3, 8), torch.randn(3, 8)
    torch.testing.assert_close(lib.swiglu(x, y), torch.nn.functional.silu(x) * y, atol=1e-5, rtol=1e-5)
    assert lib.swiglu_kernel.stats["tunes"] == 1


# ---------------------------------------------------------------------- 3. compile workers

def _json(v):
    return json.loads(json.dumps(v))


@interpreted
def test_compile_worker_builds_the_launch_as_the_caller_makes_it():
    from triton.runtime.jit import MockTensor
    from triton.tools.tensor_descriptor import TensorDescriptor

    from autotune_kernels import worker_stub as ws

    x = torch.zeros(64, dtype=torch.float16)
    desc = TensorDescriptor.from_tensor(torch.zeros(32, 32), [16, 16])
    # what reached the autotuner's run in the caller: keyword tensors, the heuristics' value
    # (HAS_Y, computed above the autotuner), a torch dtype for a constexpr, a descriptor
    call = {"x": x, "y": x, "z": x, "desc": desc, "n": 64, "DTYPE": torch.float16, "HAS_Y": True}
    target = "autotune_kernels.worker_stub:fla_like_kernel"
    tuner = ws.fla_like_kernel.fn
    assert compiling.compile_plan(SimpleNamespace(fn=tuner, base_fn=tuner.base_fn)) == ("parallel", target)
    kw = _json({k: compiling._encode(v) for k, v in call.items()})
    ws.RecordingJit.calls.clear()
    compiling._warm_worker(target, [], kw, {"BLOCK": 16, "num_warps": 1})
    [got] = ws.RecordingJit.calls
    a = got["args"]
    assert got["warmup"] is True and a["BLOCK"] == 16 and a["num_warps"] == 1 and a["HAS_Y"] is True
    assert isinstance(a["x"], MockTensor) and a["x"].dtype == torch.float16 and got["types"]["x"] == "*fp16"
    assert a["DTYPE"] is torch.float16 and isinstance(a["desc"], TensorDescriptor)
    assert got["types"]["desc"] == "tensordesc<fp32[16, 16]>"
    # a descriptor's block shape comes from the config's pre_hook, as before the real launch
    dummy = _json({"desc": compiling._encode(TensorDescriptor.from_tensor(torch.zeros(64, 32), [8, 32])), "n": 64})
    compiling._warm_worker("autotune_kernels.worker_stub:desc_kernel", [], dummy,
                           {"BM": 32, "num_warps": 4, "num_stages": 3})
    assert ws.RecordingJit.calls[-1]["types"]["desc"] == "tensordesc<fp32[32, 32]>"
    # the workers of issue 24: the object named by the module (the heuristics) launched with the
    # config gave "Conflicting meta-parameters", and keyword tensors as dtypes failed to specialize
    with pytest.raises(ValueError, match="Conflicting meta-parameters: BLOCK"):
        ws.fla_like_kernel.warmup(grid=(1,), **{**call, "x": torch.float16}, BLOCK=16)
    with pytest.raises(TypeError, match="failed to specialize argument of type: dtype"):
        ws.fla_like_kernel.fn.fn.warmup(grid=(1,), **{**call, "x": torch.float16}, BLOCK=16)


class _FakePool:
    def __init__(self, answers):
        self.ready, self.answers, self.jobs = 1, list(answers), []

    def hot(self, module):
        return self.ready

    def failed(self, module):
        return None

    def submit(self, job):
        self.jobs.append(job)
        f = Future()
        f.set_result(self.answers.pop(0) if self.answers else {"ok": True})
        return f


@interpreted
def test_a_failed_worker_job_is_reported_once_and_the_rest_compile_here(monkeypatch, caplog):
    cfgs = [{"BLOCK": b} for b in (16, 32, 64, 128)]
    pool = _FakePool([{"ok": False, "error": "CompilationError: at 3:4", "config_error": True},
                      {"ok": False, "error": "TypeError: failed to specialize argument of type: torch.dtype",
                       "config_error": False}])
    monkeypatch.setattr(compiling, "compile_pool", lambda *module: pool)
    broken = []
    warm = compiling.parallel_warm("m:k", [torch.zeros(2)], {}, on_broken=broken.append)
    with caplog.at_level(logging.WARNING, logger="abductune.autotune"):
        warm(cfgs[:1])  # a config that does not compile: that config's own failure, nothing reported
        assert broken == [] and not caplog.records
        warm(cfgs[1:3])  # the workers cannot build the call: said once, the rest compile here
        warm(cfgs[3:])
    assert len(pool.jobs) == 2 and len(broken) == 1 and "failed to specialize" in broken[0]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "compile in this process" in warnings[0]
    k = mm.make(store=":memory:")
    k._workers_failed(broken[0])
    assert k._compile_plan() == ("serial", f"compile workers failed on it: {broken[0]}")


# ------------------------------------------------------------------------------ 4. identity

@interpreted
def test_descriptor_arguments_give_dtypes_and_keys(tmp_path: Path):
    lib, _, timer = _library(tmp_path, "lib_desc")
    x = torch.randn(64, 32)
    torch.testing.assert_close(lib.desc_scale(x), 2 * x)
    k = lib.desc_scale_kernel
    assert k.best_config.kwargs == {"BM": 32, "BN": 32} and len(timer.seen) == 2
    lib.desc_scale(x.half())  # another dtype behind the descriptors: another key
    assert k.stats["tunes"] == 2 and len(k.choices) == 2
    with Store(tmp_path / "s.sqlite") as s:
        dtypes = sorted(tuple(sorted(r.context.dtypes.items())) for r in s.runs())
        hardware = {r.context.hardware for r in s.runs()}
    assert dtypes == [(("in_desc", "fp16"), ("out_desc", "fp16")), (("in_desc", "fp32"), ("out_desc", "fp32"))]
    assert hardware == {"cpu-interpreter"}  # interpreted here: really the interpreter


@interpreted
def test_hardware_is_the_cuda_device_never_the_interpreter_on_a_gpu(monkeypatch):
    monkeypatch.setattr(keys, "_HW", {})
    props = SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0, multi_processor_count=132,
                            L2_cache_size=50 << 20)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    cuda_tensor = SimpleNamespace(device=SimpleNamespace(type="cuda", index=0), dtype=torch.float16)
    for t in (cuda_tensor, None, torch.zeros(1)):  # a CUDA tensor, only descriptors/ints, a host tensor
        hw = keys.hardware_of(t, interpreting=False)
        assert hw.name == "H100-SXM" and hw.compute_capability == (9, 0) and hw.sms == 132
    assert set(keys._HW) == {("cuda", 0), ("cuda", 1)}  # the tensor's device, else the current one
    assert keys.hardware_of(cuda_tensor, interpreting=True).name == "cpu-interpreter"
    desc = SimpleNamespace(base=cuda_tensor, block_shape=[16, 16])  # not a descriptor type: not read as one
    from triton.tools.tensor_descriptor import TensorDescriptor

    d = TensorDescriptor.from_tensor(torch.zeros(16, 16, dtype=torch.bfloat16), [16, 16])
    assert keys.tensor_of(d) is d.base and keys.tensor_of(desc) is None and keys.tensor_of(3) is None


# -------------------------------------------------------------- 5. beyond the list's hull

def mm_big():
    return [triton.Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8},
                          num_warps=4, num_stages=3),
            triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8},
                          num_warps=8, num_stages=4)]


@interpreted
def test_budget_grows_the_space_one_step_beyond_the_hull_and_none_keeps_the_list():
    hull = space_from_configs(mm.CONFIGS)
    assert mm.make(store=":memory:").space.fingerprint() == hull.fingerprint()  # budget=None: the list only
    grown = mm.make(store=":memory:", budget=16).space
    assert grown.fingerprint() == grow_space(hull).fingerprint() != hull.fingerprint()
    assert {n: grown[n].values for n in grown.names} == {
        "BLOCK_SIZE_M": (8, 16, 32, 64), "BLOCK_SIZE_N": (8, 16, 32, 64), "BLOCK_SIZE_K": (8, 16, 32, 64),
        "GROUP_SIZE_M": (1, 2, 4), "num_warps": (1, 2, 4, 8), "num_stages": (1, 2, 3, 4)}
    # roles it does not know keep the list's values; warps stop at 32
    other = grow_space(space_from_configs([triton.Config({"CHUNK": 64, "BLOCK": 128}, num_warps=32)]))
    assert other["CHUNK"].values == (64,) and other["BLOCK"].values == (64, 128, 256)
    assert other["num_warps"].values == (16, 32)


@interpreted
def test_the_search_wins_beyond_the_list_and_prunes_what_cannot_or_may_not_run(tmp_path: Path):
    def t(cfg):  # fastest: BLOCK_SIZE_M 64, one step beyond the list's 16..32
        return 1.0 + (cfg["BLOCK_SIZE_M"] != 64) + 0.5 * (cfg["BLOCK_SIZE_N"] != 16) + 0.1 * (cfg["BLOCK_SIZE_K"] != 16)

    def no_k64(configs, named_args, **kwargs):  # the kernel's own pruning sees the configs beyond the list too
        return [c for c in configs if c.kwargs["BLOCK_SIZE_K"] != 64]
    timer = Timer(t)
    k = mm.make(store=tmp_path / "s.sqlite", timer=timer, budget=24, prune_configs_by={"early_config_prune": no_k64})
    a, b = torch.randn(48, 32), torch.randn(32, 40)
    torch.testing.assert_close(mm.matmul(k, a, b), a @ b, atol=1e-4, rtol=1e-4)
    assert k.best_config.kwargs["BLOCK_SIZE_M"] == 64
    assert all(c["BLOCK_SIZE_K"] != 64 for c in timer.seen)
    s = k.stats
    assert s["won_beyond_list"] == 1 and s["beyond_list"] > 0 and s["gain_beyond_list"] == pytest.approx(2.0 / 1.0)
    with Store(tmp_path / "s.sqlite") as st:
        pruned = [m for m in st.measurements(st.runs()[0].context) if m.status.value == "pruned"]
    assert pruned and all("early_config_prune" in m.error for m in pruned)
    # the resource model: on an H100, what needs more shared memory than a block has is never measured
    big = abductune.autotune(configs=mm_big(), key=["M", "N", "K"], budget=8, store=":memory:")(mm.matmul_kernel)
    h100 = Problem("matmul_kernel", "matmul", {"M": 4096, "N": 4096, "K": 4096},
                   {"a_ptr": "fp16", "b_ptr": "fp16", "c_ptr": "fp16"}, hardware=lookup("H100-SXM"))
    ev = call_evaluator(big, h100, (), {}, {}, {}, big.space)
    huge = {"BLOCK_SIZE_M": 256, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 8, "num_warps": 8,
            "num_stages": 5}
    assert big.space.is_valid(huge) and "the resource model: needs about" in ev.prune(huge)
    assert ev.prune({**huge, "BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "num_stages": 2}) is None
    assert ev.prune(big._list[1]) is None  # the list itself is the user's: never pruned here
    # nor compiled where the accumulator alone needs more than twice a thread's registers (ptxas
    # takes minutes on such configs): 256 x 256 on 2 warps is 1,024 fp32 values a thread
    spill = {**huge, "BLOCK_SIZE_K": 32, "num_stages": 2, "num_warps": 2}
    assert big.space.is_valid(spill) and "accumulator registers per thread" in ev.prune(spill)


@interpreted
def test_theory_predictions_beyond_the_grown_space_are_searched(tmp_path: Path, monkeypatch):
    want = {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 256, "GROUP_SIZE_M": 2, "num_warps": 4,
            "num_stages": 2}
    asked = []

    def predictions(problem, space):
        asked.append(space["BLOCK_SIZE_K"].values)
        return [SimpleNamespace(config=dict(want), rule=SimpleNamespace(regime="test"))] \
            if space["BLOCK_SIZE_K"].contains(256) else []
    monkeypatch.setattr(choices_mod, "theory_predictions", predictions)
    from abductune.autotune import autotuner as at_mod

    monkeypatch.setattr(at_mod, "theory_predictions", predictions)
    timer = Timer(lambda c: 1.0 if c["BLOCK_SIZE_K"] == 256 else 2.0)
    k = mm.make(store=tmp_path / "s.sqlite", timer=timer, budget=6)
    a, b = torch.randn(16, 64), torch.randn(64, 16)
    torch.testing.assert_close(mm.matmul(k, a, b), a @ b, atol=1e-4, rtol=1e-4)
    assert asked[0][-1] == 512  # read on the space grown three steps further
    assert timer.seen[0] == want and k.best_config.kwargs["BLOCK_SIZE_K"] == 256  # the first bet, and the winner
    with Store(tmp_path / "s.sqlite") as s:
        [run] = s.runs()
    assert run.context.space_fingerprint != k.space.fingerprint()  # this key's space holds 256
    mm.matmul(k, a, b)
    assert k.stats["tunes"] == 1  # the hit path
    fresh = mm.make(store=tmp_path / "s.sqlite", timer=Timer(lambda c: 1.0), budget=6)
    mm.matmul(fresh, a, b)  # another process: the same key space, so the store's winner
    assert fresh.stats["store_hits"] == 1 and fresh.best_config.kwargs["BLOCK_SIZE_K"] == 256


@interpreted
def test_a_tune_runs_under_the_ptxas_watch(tmp_path: Path, monkeypatch):
    from watch_fixtures import recording_watch

    from abductune.autotune import autotuner as at_mod
    from abductune.autotune.patch import _beyond_line

    entered = []
    watch = SimpleNamespace(kills=[(1, 95.0)])  # one kill before this tune: not this tune's
    monkeypatch.setattr(at_mod, "watching", recording_watch(entered, watch))

    def t(cfg):
        if len(watch.kills) == 1:  # the watch kills a ptxas while this key tunes
            watch.kills.append((2, 91.0))
        return 1.0
    timer = Timer(t)
    k = mm.make(store=tmp_path / "s.sqlite", timer=timer, budget=4)
    a, b = torch.randn(16, 32), torch.randn(32, 16)
    mm.matmul(k, a, b)
    assert entered == ["in", "out"] and timer.seen  # measured inside the watch, which ended with the tune
    assert k.stats["ptxas_killed"] == 1 and "1 compile(s) killed by the ptxas watch" in _beyond_line(k)
    mm.matmul(k, a, b)
    assert entered == ["in", "out"]  # a hit tunes nothing and watches nothing
