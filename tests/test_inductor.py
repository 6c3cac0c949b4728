"""abductune inside torch.compile (src/abductune/integrations/inductor.py), on a CPU.

The kernels here are what Inductor writes: a module with `@triton_heuristics.<heuristic>(size_hints,
triton_meta, inductor_meta)` over a `@triton.jit` function, the metadata copied from kernels
torch 2.11 generated on an H100/H200 (`KERNELS`). They are loaded through Inductor's own loader
(`async_compile._load_triton_kernel_from_source`, the seam), so Inductor's config providers run
with their own size hints and metadata. Compiling and timing a config needs a GPU: `FakeGPU`
stands in for `_precompile_config` and `bench` with a time model whose optimum is known, so the
finish, the store and the per-shape dispatch run end to end. GPU tests are marked `gpu`.
"""
from __future__ import annotations

import functools
import inspect
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the Inductor integration needs torch")
pytest.importorskip("triton", reason="Inductor's Triton kernels need triton")

from abductune.errors import AbductuneError  # noqa: E402
from abductune.integrations import inductor  # noqa: E402
from abductune.integrations import inductor_kernels as K  # noqa: E402
from abductune.integrations import inductor_report as R  # noqa: E402
from abductune.store import Context, Store  # noqa: E402

if inductor.torch_version(torch.__version__) < inductor.SUPPORTED[0] or \
        inductor.torch_version(torch.__version__) > inductor.SUPPORTED[1]:
    pytest.skip(f"torch {torch.__version__} is outside the versions abductune.inductor supports",
                allow_module_level=True)

from torch._inductor import async_compile  # noqa: E402
from torch._inductor.runtime import triton_helpers, triton_heuristics  # noqa: E402

H100 = ("DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, "
        "regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, "
        "warp_size=32)")
META = ("'autotune_hints': set(), 'mutated_arg_names': [], 'optimize_mem': True, 'atomic_add_found': False, "
        "'num_load': 1, 'num_store': 1, 'num_reduction': 1, 'assert_indirect_indexing': True, "
        "'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, "
        "'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, "
        "'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, "
        "'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, "
        "'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False")


def kernel_source(name: str, heuristic: str, size_hints: dict, signature: dict, body: str,
                  reduction_hint: str | None = "INNER", extra_meta: str = "") -> str:
    """A kernel module as Inductor's codegen writes it (torch 2.11 and 2.13 write this form)."""
    params = ", ".join(f"{k} : tl.constexpr" if v == "constexpr" else k for k, v in signature.items())
    hint = f"\n    reduction_hint=ReductionHint.{reduction_hint}," if heuristic != "pointwise" else ""
    return textwrap.dedent(f'''
import triton
import triton.language as tl
from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.{heuristic}(
    size_hints={size_hints!r},{hint}
    filename=__file__,
    triton_meta={{'signature': {signature!r}, 'device': {H100}, 'constants': {{}}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]]}}]}},
    inductor_meta={{'grid_type': 'Grid1D', 'kernel_name': '{name}', 'no_x_dim': False, {META}{extra_meta}}}
)
@triton.jit
def {name}({params}):
''') + textwrap.indent(textwrap.dedent(body).strip(), "    ") + "\n"


# what torch 2.11 generated for a bf16 LayerNorm (256 x 768), an fp32 row max (64 x 4096), a
# GELU (1M elements) and a sum over rows under dynamic shapes (ks0 and xnumel only known at run time)
KERNELS = {
    "triton_per_fused_0": kernel_source(
        "triton_per_fused_0", "persistent_reduction", {"x": 256, "r0_": 1024},
        {"in_ptr0": "*bf16", "in_ptr1": "*bf16", "out_ptr3": "*fp32", "xnumel": "i32", "r0_numel": "i32",
         "XBLOCK": "constexpr"},
        """
        xnumel = 256
        r0_numel = 768
        R0_BLOCK: tl.constexpr = 1024
        xoffset = tl.program_id(0) * XBLOCK
        """),
    "triton_red_fused_1": kernel_source(
        "triton_red_fused_1", "reduction", {"x": 64, "r0_": 4096},
        {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32", "r0_numel": "i32", "XBLOCK": "constexpr",
         "R0_BLOCK": "constexpr"},
        """
        xnumel = 64
        r0_numel = 4096
        xoffset = tl.program_id(0) * XBLOCK
        """),
    "triton_poi_fused_gelu_2": kernel_source(
        "triton_poi_fused_gelu_2", "pointwise", {"x": 1048576},
        {"in_ptr0": "*bf16", "out_ptr0": "*bf16", "xnumel": "i32", "XBLOCK": "constexpr"},
        """
        xnumel = 1048576
        xoffset = tl.program_id(0) * XBLOCK
        """),
    "triton_red_fused_mul_sum_0": kernel_source(
        "triton_red_fused_mul_sum_0", "reduction", {"x": 128, "r0_": 512},
        {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "ks0": "i64", "xnumel": "i32", "r0_numel": "i32",
         "XBLOCK": "constexpr", "R0_BLOCK": "constexpr"},
        """
        rnumel = r0_numel
        xoffset = tl.program_id(0) * XBLOCK
        """),
}


# ----------------------------------------------------------------------------- fixtures

class FakeLauncher:
    """What Inductor's launcher offers the autotuner: a config, the compiled kernel's facts."""

    def __init__(self, config, regs: int = 32):
        self.config = config
        self.n_regs, self.n_spills, self.shared = regs, 0, 0
        self.cache_hash, self.store_cubin = "fake", False
        self.calls = 0

    def __call__(self, *args, stream=None, **kwargs):
        self.calls += 1


class FakeGPU:
    """Compiles and times configs without a GPU: time = 1 + distances (in octaves) from the
    optimum, registers from the block, so every test knows what the best config is."""

    def __init__(self, optimum: dict, regs=lambda cfg: 32):
        self.optimum = optimum
        self.regs = regs
        self.benched: list = []  # (config kwargs, num_warps, the launch's numel arguments)
        self.compiled: list = []

    def time(self, cfg, args) -> float:
        fields = {**cfg.kwargs, "num_warps": cfg.num_warps}
        t = 1.0
        for k, v in self.optimum.items():
            want = v(args) if callable(v) else v
            if k in fields:
                t += 0.1 * abs(math.log2(fields[k]) - math.log2(want))
        return t

    def install(self, monkeypatch) -> "FakeGPU":
        gpu = self

        class Result:
            def __init__(self, cfg):
                self.config = cfg

            def make_launcher(self):
                gpu.compiled.append(({**self.config.kwargs}, self.config.num_warps))
                return FakeLauncher(self.config, gpu.regs(self.config))

        def bench(tuner, launcher, *args, **kwargs):
            gpu.benched.append(({**launcher.config.kwargs}, launcher.config.num_warps,
                                tuple(a for a in args if isinstance(a, int))))
            return gpu.time(launcher.config, args)

        for cls in inductor._classes().values():
            monkeypatch.setattr(cls, "_precompile_config", lambda self, cfg: Result(cfg))
            monkeypatch.setattr(cls, "bench", bench)
        # every config is timed by `bench` above (on a GPU a kernel is timed alone instead)
        monkeypatch.setattr(inductor, "_alone_timer", lambda tuner, args, kwargs: None)
        return self


def prime(tuner, gpu: FakeGPU | None = None):
    """As if Inductor had precompiled the autotuner's configs (that needs a GPU)."""
    tuner.launchers = [FakeLauncher(c, gpu.regs(c) if gpu else 32) for c in tuner.configs]
    tuner._cache_eligible = False  # torch 2.13's fast launcher needs a real binary
    return tuner


@pytest.fixture(autouse=True)
def _inductor_here(tmp_path, monkeypatch):
    """Inductor's caches in the test's folder; no GPU driver needed to load a kernel module."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setattr(triton_helpers, "set_driver_to_gpu", lambda: None)
    from torch._inductor.codecache import PyCodeCache

    PyCodeCache.cache_clear()
    yield
    while inductor.active() is not None:  # a failed test must not leave abductune on
        inductor.active().undo()


def load(name: str, salt: str = "") -> object:
    """Load a kernel through Inductor's loader (abductune's while it is on). `salt` changes the
    module text, not the kernel, as another graph's module would."""
    return async_compile._load_triton_kernel_from_source(name, KERNELS[name] + salt)


def plain_configs(name: str) -> list:
    """Inductor's own config list for a kernel, with abductune off."""
    assert inductor.active() is None
    return [(dict(c.kwargs), c.num_warps) for c in load(name, "\n# plain\n").configs]


# ----------------------------------------------------------------------------- the version

def test_supported_versions_and_the_one_line_refusal():
    assert inductor.check_torch() is triton_heuristics  # this torch passes
    for bad in ("2.9.1", "2.10.0+cu128", "2.14.1", "3.0.0"):
        with pytest.raises(inductor.InductorVersionError) as e:
            inductor.check_torch(bad)
        msg = str(e.value)
        assert "\n" not in msg and f"torch {bad}" in msg and "2.11 to 2.13" in msg
        assert isinstance(e.value, AbductuneError)
    assert inductor.torch_version("2.11.0+cu130") == (2, 11)
    assert inductor.torch_version("2.13.0a0+git1234") == (2, 13)


def test_an_inductor_without_the_seam_is_refused(monkeypatch):
    monkeypatch.delattr(async_compile, "_load_triton_kernel_from_source")
    with pytest.raises(inductor.InductorVersionError, match="_load_triton_kernel_from_source"):
        inductor.enable(store=":memory:")


# ----------------------------------------------------------------------------- enable / undo

def _seam():
    return async_compile._load_triton_kernel_from_source, triton_heuristics.cached_autotune


def test_enable_and_undo_leave_inductor_exactly_as_it_was(tmp_path):
    before = _seam()
    h = inductor.enable(store=tmp_path / "s.sqlite")
    assert async_compile._load_triton_kernel_from_source is not before[0]
    assert triton_heuristics.cached_autotune is before[1]  # wrapped only while a kernel loads
    t = load("triton_red_fused_1")
    assert type(t).__name__ == "AbductuneAutotuner"
    assert triton_heuristics.cached_autotune is before[1]
    h.undo()
    assert _seam() == before and _seam()[0] is before[0] and _seam()[1] is before[1]
    assert type(load("triton_red_fused_1", "\n# after\n")).__name__ == "CachingAutotuner"
    h.undo()  # twice is harmless
    assert _seam()[0] is before[0]


def test_the_context_manager_restores_after_an_exception(tmp_path):
    before = _seam()
    with pytest.raises(RuntimeError, match="inside"):
        with inductor.enable(store=tmp_path / "s.sqlite") as h:
            assert inductor.active() is h
            raise RuntimeError("inside")
    assert inductor.active() is None
    assert _seam()[0] is before[0] and _seam()[1] is before[1]


def test_a_load_that_fails_puts_cached_autotune_back(tmp_path):
    before = _seam()
    with inductor.enable(store=tmp_path / "s.sqlite"):
        with pytest.raises(ValueError, match="after the decorator"):  # the module fails once loading
            async_compile._load_triton_kernel_from_source(
                "triton_red_fused_1", KERNELS["triton_red_fused_1"] + "\nraise ValueError('after the decorator')\n")
        assert triton_heuristics.cached_autotune is before[1]
    assert _seam()[0] is before[0]


def test_nested_enables_unwind_in_any_order(tmp_path):
    before = _seam()[0]
    a = inductor.enable(store=tmp_path / "a.sqlite")
    b = inductor.enable(store=tmp_path / "b.sqlite", budget=3)
    assert async_compile._load_triton_kernel_from_source.settings.token == b.settings.token
    a.undo()  # the outer one first: the inner stays on
    assert async_compile._load_triton_kernel_from_source.settings.token == b.settings.token
    b.undo()
    assert async_compile._load_triton_kernel_from_source is before


def test_bad_arguments_fail_before_anything_is_patched():
    before = _seam()[0]
    with pytest.raises(AbductuneError, match="unknown strategy"):
        inductor.enable(store=":memory:", strategy="nope")
    with pytest.raises(AbductuneError, match="budget"):
        inductor.enable(store=":memory:", budget=-1)
    with pytest.raises(AbductuneError, match="candidates"):
        inductor.enable(store=":memory:", candidates=-2)
    assert _seam()[0] is before and inductor.active() is None


def test_the_package_exposes_the_module():
    import abductune

    assert abductune.inductor is inductor


# ----------------------------------------------------------------------------- candidates

@pytest.mark.parametrize("name", ["triton_per_fused_0", "triton_red_fused_1", "triton_poi_fused_gelu_2"])
def test_candidates_go_ahead_of_inductors_list(tmp_path, name):
    own = plain_configs(name)
    with inductor.enable(store=tmp_path / "s.sqlite", candidates=2, min_us=0):  # these kernels are small
        t = load(name)
    got = [(dict(c.kwargs), c.num_warps) for c in t.configs]
    assert got[len(got) - len(own):] == own, "Inductor's own list is kept, after abductune's"
    ours = got[:len(got) - len(own)]
    assert 1 <= len(ours) <= 2 and not any(c in own for c in ours)
    heuristic = {"per": "persistent_reduction", "red": "reduction", "poi": "pointwise"}[name.split("_")[1]]
    tm = {**t.triton_meta, "device": t.device_props._asdict()}
    desc = K.describe(heuristic, t.size_hints, t.configs[-1].kwargs, t.inductor_meta, tm["device"],
                      src_hash="0" * 16, dtype=K.first_dtype(tm["signature"]),
                      reduction_hint=str(t.inductor_meta.get("reduction_hint")))
    expect = [desc.kwargs_of(c, t.configs[-1].kwargs) for c, _ in K.candidates(desc, None, 2)]
    assert [(kw, w) for kw, w in expect if (kw, w) not in own] == ours
    if heuristic == "persistent_reduction":  # the row is the block: never in the config
        assert all("R0_BLOCK" not in kw for kw, _ in got)
    assert t.inductor_meta["coordinate_descent_tuning"] is True  # the finish is asked for


def test_candidates_only_where_a_kernels_traffic_reaches_min_us(tmp_path):
    """Each candidate is one more compile and one more timing at the first launch: a kernel whose
    bytes at the GPU's bandwidth take less than `min_us` keeps Inductor's list alone; Inductor's
    own byte estimate (`kernel_num_gb`) counts where it gives one; the report says which."""
    hw = K.hardware({"type": "cuda", "multi_processor_count": 132, "cc": 90}, "NVIDIA H100 80GB HBM3")
    sig = {"in_ptr0": "*bf16", "out_ptr0": "*bf16", "xnumel": "i32", "XBLOCK": "constexpr"}
    gelu = K.traffic_us({"x": 1 << 20}, sig, {}, hw)
    assert gelu == pytest.approx((1 << 20) * 4 / hw.mem_bandwidth * 1e6)  # 4 MB: about 1.25 us on an H100
    assert K.traffic_us({"x": 1 << 20}, sig, {"kernel_num_gb": 1.0}, hw) == pytest.approx(1e15 / hw.mem_bandwidth)
    assert K.traffic_us({"x": 1 << 20}, sig, {}, None) is None
    assert not K.worth_candidates(gelu, 100.0) and K.worth_candidates(gelu, 0.0) and K.worth_candidates(None, 100.0)
    assert K.worth_candidates(K.traffic_us({"x": 1 << 28}, sig, {}, hw), 100.0)  # 1 GB: about 320 us
    own = plain_configs("triton_poi_fused_gelu_2")
    with inductor.enable(store=tmp_path / "s.sqlite", candidates=2):  # min_us 100 by default
        t = load("triton_poi_fused_gelu_2")
        assert [(dict(c.kwargs), c.num_warps) for c in t.configs] == own
        assert t._abt.candidates == 0 and t._abt.estimate_us == pytest.approx(gelu)
    with inductor.enable(store=tmp_path / "s.sqlite", candidates=2, min_us=1.0):
        assert len(load("triton_poi_fused_gelu_2", "\n# again\n").configs) > len(own)  # 1.25 us >= 1 us
    entry = R.loaded("k", "pointwise", {"x": 1}, 1, 0, 0.0, 0.0, False, gelu)
    assert entry["estimate_us"] == round(gelu, 3)


def test_candidates_read_the_kernels_class_and_size_hints():
    dev = {"type": "cuda", "multi_processor_count": 132, "cc": 90, "max_threads_per_block": 1024, "warp_size": 32}
    small = K.describe("pointwise", {"x": 4096}, {"XBLOCK": 1024}, {}, dev, src_hash="a" * 16, dtype="bf16")
    big = K.describe("pointwise", {"x": 1 << 24}, {"XBLOCK": 1024}, {}, dev, src_hash="a" * 16, dtype="bf16")
    assert small.problem.kernel_class == big.problem.kernel_class == "elementwise"
    s, b = K.candidates(small, None, 1)[0][0], K.candidates(big, None, 1)[0][0]
    assert s["XBLOCK"] < b["XBLOCK"], "a small tensor gets smaller blocks, to fill the GPU"
    outer = K.describe("reduction", {"x": 2048, "r0_": 128}, {"XBLOCK": 16, "R0_BLOCK": 32}, {}, dev,
                       src_hash="a" * 16, dtype="fp32", reduction_hint="ReductionHint.OUTER")
    assert outer.problem.kernel_class == "other" and K.candidates(outer, None, 2) == []


def test_kernels_abductune_must_not_move_keep_inductors_list(monkeypatch):
    seen = []

    real = triton_heuristics.cached_autotune
    sig = inspect.signature(real)

    @functools.wraps(real)  # Inductor's signature, so abductune's wrapper reads the call as it would
    def spy(*args, **kwargs):
        seen.append(sig.bind(*args, **kwargs).arguments)
        return "decorator"
    monkeypatch.setattr(triton_heuristics, "cached_autotune", spy)
    settings = K.Settings(":memory:", token="t")
    cfg = triton_heuristics.Config({"XBLOCK": 1, "R0_BLOCK": 2048}, num_warps=16, num_stages=1)
    dev = {"device": triton_heuristics.DeviceProperties("cuda", 0, 132, 90, 9, 65536, 2048, 1024, 32),
           "signature": {"in_ptr0": "*fp32"}}
    with inductor._wrapped(settings):
        for meta, kind in ((dict(deterministic=True), triton_heuristics.HeuristicType.REDUCTION),
                           ({}, triton_heuristics.HeuristicType.TEMPLATE),
                           ({}, triton_heuristics.HeuristicType.USER_AUTOTUNE)):
            triton_heuristics.cached_autotune({"x": 64, "r0_": 4096}, [cfg], triton_meta=dev, heuristic_type=kind,
                                              filename="f.py", inductor_meta=meta)
    assert triton_heuristics.cached_autotune is spy
    assert len(seen) == 3
    for kw in seen:
        assert kw["configs"] == [cfg] and "caching_autotuner_cls" not in kw
        assert "coordinate_descent_tuning" not in kw["inductor_meta"]


def test_a_plan_inductor_rejects_falls_back_to_inductors_own(tmp_path, monkeypatch):
    own = plain_configs("triton_red_fused_1")

    def bad_plan(a, settings):
        a["inductor_meta"]["coordinate_descent_tuning"] = True
        return {**a, "configs": ["not a config"]}
    monkeypatch.setattr(inductor, "_plan", bad_plan)
    with inductor.enable(store=tmp_path / "s.sqlite"):
        t = load("triton_red_fused_1")
    assert type(t).__name__ == "CachingAutotuner"
    assert [(dict(c.kwargs), c.num_warps) for c in t.configs] == own
    assert "coordinate_descent_tuning" not in t.inductor_meta  # the metadata as Inductor wrote it


# ----------------------------------------------------------------------------- the finish and the store

ARGS_RED = ("in", "out", 64, 4096)  # triton_red_fused_1's launch: two tensors, xnumel, r0_numel


def test_the_finish_searches_from_inductors_winner_and_never_loses(tmp_path, monkeypatch):
    gpu = FakeGPU({"XBLOCK": 2, "R0_BLOCK": 512, "num_warps": 4}).install(monkeypatch)
    own = plain_configs("triton_red_fused_1")
    with inductor.enable(store=tmp_path / "s.sqlite", budget=16) as h:
        t = prime(load("triton_red_fused_1"))
        t.run(*ARGS_RED, stream=0)
        assert h.stats["searches"] == 1 and 0 < h.stats["evaluations"] <= 16
    (w,) = t.launchers
    assert w.config.found_by_coordesc and w.calls == 1
    best = gpu.time(w.config, ARGS_RED)
    inductor_best = min(gpu.time(triton_heuristics.Config(kw, num_warps=n), ARGS_RED) for kw, n in own)
    assert best <= inductor_best
    with Store(tmp_path / "s.sqlite") as store:
        runs = store.runs()
        assert len(runs) == 1 and runs[0].status == "done"
        ctx = runs[0].context
        for kw, warps in own:  # Inductor's list is the baseline, timed once (its own timing, free)
            row = store.get(ctx, {**kw, "num_warps": warps})
            assert row is not None and row.ok and row.compile_s == 0.0
        assert runs[0].context.dims == {"rows": 64, "cols": 4096}
        assert runs[0].context.kernel_class == "row_reduction"


def test_the_store_key_is_source_size_hints_device_and_toolchain(tmp_path, monkeypatch):
    FakeGPU({"XBLOCK": 2, "R0_BLOCK": 512, "num_warps": 4}).install(monkeypatch)
    with inductor.enable(store=tmp_path / "s.sqlite") as h:
        t = prime(load("triton_red_fused_1"))
        t.run(*ARGS_RED, stream=0)
        toolchain = h.toolchain
    with Store(tmp_path / "s.sqlite") as store:
        (run,) = store.runs()
    ctx = run.context
    assert ctx.source_hash == K.source_hash(t.fn.src, t.triton_meta["signature"], t.triton_meta.get("configs"))
    assert ctx.hardware.startswith("cuda-sm90") or ctx.hardware in ("H100-SXM", "H200")
    assert ctx.toolchain == toolchain and f"torch={torch.__version__.split('+')[0]}" in toolchain
    # the name of the kernel does not enter the key, its body does
    renamed = KERNELS["triton_red_fused_1"].replace("triton_red_fused_1", "triton_red_fused_7")
    other_body = KERNELS["triton_red_fused_1"].replace("xnumel = 64\n", "xnumel = 64\n    pass\n")
    fn = lambda src, name: async_compile._load_triton_kernel_from_source(name, src).fn.src  # noqa: E731
    sig = t.triton_meta["signature"]
    assert K.source_hash(fn(renamed, "triton_red_fused_7"), sig) == K.source_hash(t.fn.src, sig)
    assert K.source_hash(fn(other_body, "triton_red_fused_1"), sig) != K.source_hash(t.fn.src, sig)
    assert K.source_hash(t.fn.src, {**sig, "in_ptr0": "*bf16"}) != K.source_hash(t.fn.src, sig)


def test_a_kernel_tuned_once_is_answered_by_the_store_in_a_new_session(tmp_path, monkeypatch):
    gpu = FakeGPU({"XBLOCK": 2, "R0_BLOCK": 512, "num_warps": 4}).install(monkeypatch)
    with inductor.enable(store=tmp_path / "s.sqlite"):
        first = prime(load("triton_red_fused_1"))
        first.run(*ARGS_RED, stream=0)
    won = (dict(first.launchers[0].config.kwargs), first.launchers[0].config.num_warps)
    benched, compiled = len(gpu.benched), len(gpu.compiled)
    # a new Store object on the file, and a module Inductor loads again (another graph, another process)
    with inductor.enable(store=str(tmp_path / "s.sqlite")) as h:
        again = load("triton_red_fused_1", "\n# another graph\n")
        assert [(dict(c.kwargs), c.num_warps) for c in again.configs] == [won], "the store's winner, alone"
        assert again.configs[0].found_by_coordesc and again._abt_stored
        # the mark on the config can be lost on the way to the parent (seen on an H200 with torch
        # 2.11): the autotuner's own record of the store hit still holds
        del again.configs[0].found_by_coordesc
        prime(again).run(*ARGS_RED, stream=0)
        assert h.stats["searches"] == 0 and h.stats["store_hits"] == 0
    assert len(gpu.benched) == benched and len(gpu.compiled) == compiled, "nothing searched, nothing compiled"


def test_a_compile_worker_reads_the_store_file_by_itself(tmp_path, monkeypatch):
    """In a worker no enable() is live: the loader's settings name the file, opened read-only."""
    FakeGPU({"XBLOCK": 2, "R0_BLOCK": 512, "num_warps": 4}).install(monkeypatch)
    with inductor.enable(store=tmp_path / "s.sqlite") as h:
        prime(load("triton_red_fused_1")).run(*ARGS_RED, stream=0)
        settings = h.settings
    assert inductor._live(settings.token) is None
    loader = inductor._Loader(settings, async_compile._load_triton_kernel_from_source)
    import pickle

    loader = pickle.loads(pickle.dumps(loader))  # as Inductor sends it to a worker
    t = loader("triton_red_fused_1", KERNELS["triton_red_fused_1"] + "\n# worker\n")
    assert t._abt_stored and len(t.configs) == 1
    assert inductor._STORES[settings.store].read_only


def test_a_search_that_fails_keeps_inductors_winner(tmp_path, monkeypatch):
    FakeGPU({"XBLOCK": 2}).install(monkeypatch)
    monkeypatch.setattr(inductor, "Session", None)  # any failure inside the finish
    with inductor.enable(store=tmp_path / "s.sqlite") as h:
        t = prime(load("triton_red_fused_1"))
        t.run(*ARGS_RED, stream=0)
        assert h.stats["failed"] == 1
    assert t.launchers[0].calls == 1  # the model still ran, on Inductor's pick


def test_after_undo_a_kernel_behaves_as_inductor_would(tmp_path, monkeypatch):
    gpu = FakeGPU({"XBLOCK": 2}).install(monkeypatch)
    with inductor.enable(store=tmp_path / "s.sqlite", min_us=0):
        t = prime(load("triton_red_fused_1"))
    n = len(t.launchers)
    assert n >= 2  # abductune's candidates and Inductor's list
    t.run(*ARGS_RED, stream=0)  # first launched after the with: Inductor picks, no finish (none was asked)
    assert len(gpu.benched) == n and gpu.compiled == []
    assert not getattr(t.launchers[0].config, "found_by_coordesc", False)


def test_compiles_run_ahead_in_the_workers_and_failures_are_measurements():
    """The evaluator sends a batch and the strategy's expected configs to the compile workers
    at once (a `warm` function), then compiles here from Triton's cache; a config that fails
    to compile or to run is a measurement with a reason, never an exception."""
    from concurrent.futures import Future

    from abductune.integrations.inductor_measure import AheadLaunchEvaluator, LaunchEvaluator

    desc = K.describe("reduction", {"x": 64, "r0_": 4096}, {"XBLOCK": 1, "R0_BLOCK": 2048}, {}, DEV,
                      src_hash="a" * 16, dtype="fp32")
    sent = []

    def warm(configs):
        sent.extend((dict(c.kwargs), c.num_warps) for c in configs)
        out = []
        for _ in configs:
            f = Future()
            f.set_result(None)
            out.append(f)
        return out

    class Tuner:
        lock = __import__("threading").Lock()
        coordesc_tuner = triton_heuristics.CoordescTuner(size_hints={"x": 64, "r0_": 4096})
        benchmark_failure_reasons: dict = {}

        def _precompile_config(self, cfg):
            if cfg.kwargs["R0_BLOCK"] == 64:
                raise RuntimeError("out of resource: shared memory")
            return type("R", (), {"make_launcher": lambda _: FakeLauncher(cfg)})()

        def bench(self, launcher, *args):
            if launcher.config.num_warps == 32:
                raise RuntimeError("illegal memory access")
            return 2.0 if launcher.config.kwargs["XBLOCK"] == 4 else float("inf")

    start = FakeLauncher(triton_heuristics.Config({"XBLOCK": 1, "R0_BLOCK": 2048}, num_warps=16, num_stages=1))
    assert not hasattr(LaunchEvaluator, "expect")  # a strategy plans ahead only for an evaluator that listens
    ev = AheadLaunchEvaluator(Tuner(), start, desc, ("in", "out", 64, 4096), warm=warm)
    batch = [{"XBLOCK": 4, "R0_BLOCK": 1024, "num_warps": 8}, {"XBLOCK": 2, "R0_BLOCK": 64, "num_warps": 8},
             {"XBLOCK": 2, "R0_BLOCK": 1024, "num_warps": 32}, {"XBLOCK": 1, "R0_BLOCK": 2048, "num_warps": 16},
             {"XBLOCK": 8, "R0_BLOCK": 1024, "num_warps": 4}]
    ev.expect([{"XBLOCK": 16, "R0_BLOCK": 512, "num_warps": 4}])
    assert sent == [({"XBLOCK": 16, "R0_BLOCK": 512}, 4)]
    ms = ev.evaluate(batch)
    assert len(sent) == 5 and ({"XBLOCK": 1, "R0_BLOCK": 2048}, 16) not in sent  # Inductor's is compiled
    assert [m.status.value for m in ms] == ["ok", "resource_error", "runtime_error", "resource_error",
                                             "resource_error"]
    assert ms[0].time_ms == 2.0 and ms[0].registers == 32 and "out of resource" in ms[1].error
    assert ev.warmed == 3 and ev.compiled == 3  # the failing compile was sent ahead too, and failed here
    assert ev.remeasure(batch[:1], rounds=3)[0].samples_ms == (2.0, 2.0, 2.0)


# ----------------------------------------------------------------------------- dynamic shapes

def test_dynamic_shapes_get_a_config_per_size_bucket(tmp_path, monkeypatch):
    # the best XBLOCK grows with the rows: one config cannot serve both shapes
    gpu = FakeGPU({"XBLOCK": lambda a: 1 if a[3] < 1000 else 8, "R0_BLOCK": 256, "num_warps": 4})
    gpu.install(monkeypatch)
    with inductor.enable(store=tmp_path / "s.sqlite", budget=24) as h:
        t = load("triton_red_fused_mul_sum_0")
        assert type(t).__name__ == "AbductuneDynamicAutotuner"
        assert t._abt_numels == [(3, "x"), (4, "r0_")]  # xnumel, r0_numel are launch arguments 3 and 4
        prime(t)
        small, large = ("in", "out", 300, 100, 300), ("in", "out", 300, 5000, 300)
        t.run(*small, stream=0)
        cfg_small = t.launchers[0].config
        t.run(*large, stream=0)
        cfg_large = t.launchers[0].config
        assert h.stats["searches"] == 2
        assert [(e["decision"], e["size_hints"]["x"]) for e in h.report] == [("searched", 128), ("searched", 8192)]
        assert cfg_large.kwargs["XBLOCK"] > cfg_small.kwargs["XBLOCK"]
        n = len(gpu.benched)
        t.run(*small, stream=0)  # back to the first bucket: its launcher, nothing searched
        assert t.launchers[0].config is cfg_small and len(gpu.benched) == n
        assert all(ints[1] == 5000 for _, _, ints in gpu.benched[n - 3:n]), "a bucket is timed on its own shape"
    with Store(tmp_path / "s.sqlite") as store:
        runs = store.runs()
        dims = sorted(tuple(sorted(r.context.dims.items())) for r in runs)
        # the second bucket's search first tried the first bucket's winner (`session.NEAREST_SEEDS`)
        first_won = store.best(runs[0].context).config
        assert runs[1].summary["seeds"][0] == {"config": first_won, "source": "store:nearest shape"}
        assert all(s["source"] != "store:nearest shape" for s in runs[0].summary["seeds"])
    assert dims == [(("cols", 512), ("rows", 128)), (("cols", 512), ("rows", 8192))]


def test_static_kernels_take_no_per_launch_dispatch(tmp_path):
    with inductor.enable(store=tmp_path / "s.sqlite"):
        assert type(load("triton_red_fused_1")).__name__ == "AbductuneAutotuner"
    with inductor.enable(store=tmp_path / "s.sqlite", per_shape=False):
        assert type(load("triton_red_fused_mul_sum_0", "\n# off\n")).__name__ == "AbductuneAutotuner"


def test_numel_arguments_of_static_and_dynamic_kernels():
    sig = {"in_ptr0": "*fp32", "ks0": "i64", "xnumel": "i32", "r0_numel": "i32", "XBLOCK": "constexpr"}
    assert K.numel_args(sig, "def k(...):\n    xnumel = 64\n    r0_numel = 4096\n") == []
    assert K.numel_args(sig, "def k(...):\n    r0_numel = 4096\n    x = 1\n") == [(2, "x")]
    assert K.bucket({"x": 100, "r0_": 300}) == {"x": 128, "r0_": 512}


# ----------------------------------------------------------------------------- combo kernels

def _combo_meta(order: bool) -> dict:
    grid = {"num_kernels": 2, "min_blocks": None, "autotune_grouping": False, "default_config": None,
            "no_x_dim_0": False, "heuristic_0": "pointwise", "size_hints_0": {"x": 1024}, "inductor_meta_0": {},
            "tile_hint_0": "TileHint.DEFAULT", "xnumel_0": 1000,
            "no_x_dim_1": False, "heuristic_1": "reduction", "size_hints_1": {"x": 64, "r0_": 2048},
            "inductor_meta_1": {}, "reduction_hint_1": "INNER", "xnumel_1": 64}
    meta = {"combo_grid_meta": grid}
    if order:  # what torch 2.13 writes: the larger subkernel's fields first, limits per field
        meta["combo_coordesc_field_order"] = ["XBLOCK_1", "R0_BLOCK_1", "XBLOCK_0"]
        meta["combo_coordesc_field_limits"] = {"XBLOCK_0": 1024, "XBLOCK_1": 16, "R0_BLOCK_1": 2048}
    return meta


DEV = {"type": "cuda", "multi_processor_count": 132, "cc": 90, "max_threads_per_block": 1024, "warp_size": 32}
COMBO_KW = {"XBLOCK_0": 1024, "XBLOCK_1": 1, "R0_BLOCK_1": 2048}


def test_combo_field_order_and_limits_are_honoured():
    meta = _combo_meta(order=True)
    space, names = K.build_space("pointwise", COMBO_KW, meta, None, DEV)
    assert names[:3] == meta["combo_coordesc_field_order"] and names[-1] == "num_warps"
    for f, limit in meta["combo_coordesc_field_limits"].items():
        assert max(space[f].values) == limit
    # torch 2.11 writes no order: subkernel by subkernel, limits from each subkernel's size hints
    space, names = K.build_space("pointwise", COMBO_KW, _combo_meta(order=False), None, DEV)
    assert names == ["XBLOCK_0", "XBLOCK_1", "R0_BLOCK_1", "num_warps"]
    assert max(space["XBLOCK_0"].values) == 1024 and max(space["XBLOCK_1"].values) == 64
    assert max(space["R0_BLOCK_1"].values) == 2048
    assert "XBLOCK_1 * R0_BLOCK_1 <= 1048576" not in [c.source for c in space.constraints]  # 64 x 2048 fits


def test_a_combo_kernels_finish_moves_only_its_fields_within_their_limits(tmp_path, monkeypatch):
    meta = _combo_meta(order=True)
    # registers of the fused kernel rise with the reduction's block: what diagnosis must see
    gpu = FakeGPU({"XBLOCK_0": 256, "XBLOCK_1": 4, "R0_BLOCK_1": 512, "num_warps": 8},
                  regs=lambda c: 32 + c.kwargs["R0_BLOCK_1"] // 64).install(monkeypatch)
    src = textwrap.dedent('''
        import triton
        import triton.language as tl

        @triton.jit
        def triton_combo_0(in_ptr0, out_ptr0, XBLOCK_0: tl.constexpr, XBLOCK_1: tl.constexpr,
                           R0_BLOCK_1: tl.constexpr):
            pass
        ''')
    path = tmp_path / "combo_kernel.py"
    path.write_text(src)
    sys.path.insert(0, str(tmp_path))
    try:
        import combo_kernel
    finally:
        sys.path.remove(str(tmp_path))
    tmeta = {"signature": {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "XBLOCK_0": "constexpr", "XBLOCK_1": "constexpr",
                           "R0_BLOCK_1": "constexpr"},
             "device": triton_heuristics.DeviceProperties("cuda", 0, 132, 90, 9, 65536, 2048, 1024, 32)}
    cfg = triton_heuristics.Config(dict(COMBO_KW), num_warps=4, num_stages=1)
    with inductor.enable(store=tmp_path / "s.sqlite", budget=12) as h:
        with inductor._wrapped(h.settings):
            deco = triton_heuristics.cached_autotune(None, [cfg], triton_meta=tmeta,
                                                     heuristic_type=triton_heuristics.HeuristicType.POINTWISE,
                                                     filename=str(path), inductor_meta=dict(meta))
        t = deco(combo_kernel.triton_combo_0)
        assert type(t).__name__ == "AbductuneAutotuner"
        prime(t, gpu).run("in", "out", stream=0)
        assert h.stats["searches"] == 1
    limits = meta["combo_coordesc_field_limits"]
    assert len(gpu.benched) > 3
    for kw, warps, _ in gpu.benched:
        assert set(kw) == set(COMBO_KW)
        assert all(kw[f] <= limits[f] for f in limits)
    with Store(tmp_path / "s.sqlite") as store:
        (run,) = store.runs()
        rows = [m for m in store.measurements(run.context) if m.ok]
    assert rows and all(m.registers == 32 + m.config["R0_BLOCK_1"] // 64 for m in rows)


# ----------------------------------------------------------------------------- the space

def test_spaces_follow_inductors_coordinate_descent():
    red = K.describe("reduction", {"x": 64, "r0_": 4096}, {"XBLOCK": 1, "R0_BLOCK": 2048}, {}, DEV,
                     src_hash="a" * 16, dtype="fp32")
    assert red.fields == ("XBLOCK", "R0_BLOCK", "num_warps")
    assert red.space["XBLOCK"].values == (1, 2, 4, 8, 16, 32, 64)  # up to the size hint
    assert max(red.space["R0_BLOCK"].values) == 4096 and max(red.space["num_warps"].values) == 32
    # a thread holds at most 128 block elements (Triton's compile of more ran for minutes)
    assert all(c["XBLOCK"] * c["R0_BLOCK"] <= 128 * 32 * c["num_warps"] for c in red.space.valid_configs())
    assert red.space.is_valid({"XBLOCK": 1, "R0_BLOCK": 4096, "num_warps": 1})
    assert not red.space.is_valid({"XBLOCK": 64, "R0_BLOCK": 4096, "num_warps": 1})
    per = K.describe("persistent_reduction", {"x": 256, "r0_": 1024}, {"XBLOCK": 8}, {}, DEV,
                     src_hash="a" * 16, dtype="bf16")
    assert per.space["R0_BLOCK"].values == (1024,) and per.fixed == {"R0_BLOCK": 1024}
    assert per.kwargs_of(per.config_of({"XBLOCK": 8}, 4), {"XBLOCK": 8}) == ({"XBLOCK": 8}, 4)
    tiled = K.describe("pointwise", {"y": 1 << 20, "x": 64}, {"YBLOCK": 32, "XBLOCK": 32}, {"min_xblock": 4}, DEV,
                       src_hash="a" * 16, dtype="fp32")
    assert min(tiled.space["YBLOCK"].values) >= 16  # 2^20 / 16 rows of blocks fit the 65535 y-grid
    assert min(tiled.space["XBLOCK"].values) == 4 and tiled.problem.kernel_class == "other"
    nox = K.tunable_fields("reduction", {"XBLOCK": 1, "R0_BLOCK": 64}, {"no_x_dim": True})
    assert nox == ["R0_BLOCK", "num_warps"]
    mix = K.build_space("persistent_reduction", {"XBLOCK": 8, "RSPLIT_SIZE": 16, "NUM_STAGES": 2},
                        {}, {"x": 4096, "r0_": 512}, DEV)[0]
    assert "NUM_STAGES" in mix.names and not mix.is_valid({"XBLOCK": 32, "R0_BLOCK": 512, "NUM_STAGES": 1,
                                                           "num_warps": 4})


def test_hardware_is_named_by_the_driver_when_it_can_be():
    assert K.hardware(DEV, "NVIDIA H100 80GB HBM3").name == "H100-SXM"
    assert K.hardware(DEV, "NVIDIA H200").name == "H200"
    anon = K.hardware(DEV)
    assert anon.family == "hopper" and anon.name == "cuda-sm90-132sm"  # H100 and H200 look alike


# ----------------------------------------------------------------------------- ABDUCTUNE_INDUCTOR

def test_the_environment_variable(tmp_path):
    assert inductor.from_env({}) is None and inductor.from_env({"ABDUCTUNE_INDUCTOR": "0"}) is None
    h = inductor.from_env({"ABDUCTUNE_INDUCTOR": "1", "ABDUCTUNE_INDUCTOR_BUDGET": "5"})
    try:
        assert inductor.active() is h and h.settings.evaluations == 5
    finally:
        h.undo()
    with pytest.raises(AbductuneError, match="ABDUCTUNE_INDUCTOR='maybe'"):
        inductor.from_env({"ABDUCTUNE_INDUCTOR": "maybe"})
    with pytest.raises(AbductuneError, match="ABDUCTUNE_INDUCTOR_BUDGET"):
        inductor.from_env({"ABDUCTUNE_INDUCTOR": "1", "ABDUCTUNE_INDUCTOR_BUDGET": "lots"})


def test_a_script_that_cannot_be_edited_runs_with_abductune_on(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import sys\nfrom abductune.integrations import inductor\n"
                      "h = inductor.active()\nprint('on' if h else 'off', h.settings.evaluations if h else '', "
                      "sys.argv[1:])\n")
    env = {**os.environ, "ABDUCTUNE_INDUCTOR_BUDGET": "7", "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("ABDUCTUNE_INDUCTOR", None)
    run = subprocess.run([sys.executable, "-m", "abductune.integrations.inductor", str(script), "--lr", "1"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["on", "7", "['--lr',", "'1']"]
    env["ABDUCTUNE_INDUCTOR"] = "0"
    run = subprocess.run([sys.executable, "-m", "abductune.integrations.inductor", str(script)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.stdout.split() == ["off", "[]"], run.stderr


# ----------------------------------------------------------------------------- on a GPU

GPU_SCRIPT = r'''
import json, logging, sys, torch
logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
from abductune.integrations import inductor
store, min_us = sys.argv[1], float(sys.argv[2])
def f(x, w):
    y = torch.nn.functional.layer_norm(torch.nn.functional.gelu(x), (x.shape[-1],), w)
    return torch.softmax(y, -1).sum(0)
x = torch.randn(512, 768, device="cuda", dtype=torch.bfloat16)
w = torch.randn(768, device="cuda", dtype=torch.bfloat16)
with inductor.enable(store=store, budget=8, min_us=min_us) as h:
    out = torch.compile(f)(x, w)
    g = torch.compile(lambda t: (t * 3).sum(-1), dynamic=True)
    g(torch.randn(100, 300, device="cuda")); g(torch.randn(5000, 300, device="cuda"))
    stats, summary = dict(h.stats), h.summary()
ok = torch.allclose(out.float(), f(x, w).float(), atol=5e-2, rtol=5e-2)
print(json.dumps({"ok": bool(ok), "stats": stats, "summary": summary}))
'''


@pytest.mark.gpu
def test_on_a_gpu_tuned_once_then_answered_by_the_store(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    script = tmp_path / "model.py"
    script.write_text(GPU_SCRIPT)
    store = tmp_path / "s.sqlite"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "PYTHONUNBUFFERED": "1"}
    import json

    outs = []
    # two processes searching every kernel (min_us 0), each with fresh Inductor caches, the store
    # shared; then one at the default min_us with a store of its own: these kernels run a few
    # microseconds, so it keeps Inductor's picks and searches nothing
    for i, (path, min_us) in enumerate([(store, 0), (store, 0), (tmp_path / "kept.sqlite", K.DEFAULT_MIN_US)]):
        env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / f"inductor{i}")
        run = subprocess.run([sys.executable, str(script), str(path), str(min_us)], capture_output=True, text=True,
                             env=env, timeout=600)
        print(run.stderr[-4000:])  # the finishes' log lines, for whoever reads the run
        assert run.returncode == 0, run.stderr[-3000:]
        outs.append(json.loads(run.stdout.strip().splitlines()[-1]))
    assert outs[0]["ok"] and outs[1]["ok"] and outs[2]["ok"]
    assert outs[0]["stats"].get("searches", 0) >= 2, outs[0]
    assert outs[1]["stats"].get("searches", 0) == 0, outs[1]
    assert outs[1]["summary"]["decisions"]["stored"] >= 2, outs[1]
    assert outs[2]["stats"].get("searches", 0) == 0 and outs[2]["stats"].get("kept", 0) >= 2, outs[2]
    assert outs[2]["summary"]["compiled"] == 0, outs[2]
    with Store(store) as s:
        runs = s.runs()
    assert all(r.status == "done" for r in runs)
    assert any(r.context.kernel_class == "row_reduction" for r in runs)
    assert len({Context.identity.fget(r.context) for r in runs}) == len(runs)


def test_a_search_runs_under_the_ptxas_watch(tmp_path, monkeypatch):
    # Inductor compiles in its own worker processes, under this one: a ptxas stuck for minutes
    # there is killed while the search runs (measure/ptxas_watch.py)
    from watch_fixtures import recording_watch

    entered = []
    monkeypatch.setattr(inductor, "watching", recording_watch(entered))
    gpu = FakeGPU({"XBLOCK": 8, "R0_BLOCK": 256, "num_warps": 4})
    gpu.install(monkeypatch)
    with inductor.enable(store=tmp_path / "s.sqlite", budget=8) as h:
        t = load("triton_red_fused_mul_sum_0")
        prime(t)
        t.run("in", "out", 300, 5000, 300, stream=0)
        assert h.stats["searches"] == 1 and entered == ["in", "out"]


def test_timing_alone_answers_nothing_from_inductor_and_writes_nothing_into_its_cache():
    """With a timer of the launcher alone (`inductor._alone_timer`, on a GPU), every config is
    timed by it: Inductor's own timings, taken through its bench's copies, are not mixed in."""
    from abductune.integrations.inductor_measure import LaunchEvaluator

    desc = K.describe("reduction", {"x": 64, "r0_": 4096}, {"XBLOCK": 1, "R0_BLOCK": 2048}, {}, DEV,
                      src_hash="b" * 16, dtype="fp32")
    own = triton_heuristics.Config({"XBLOCK": 1, "R0_BLOCK": 2048}, num_warps=16, num_stages=1)
    other = {"XBLOCK": 4, "R0_BLOCK": 1024, "num_warps": 8}

    class Tuner:
        lock = __import__("threading").Lock()
        coordesc_tuner = triton_heuristics.CoordescTuner(size_hints={"x": 64, "r0_": 4096})
        benchmark_failure_reasons: dict = {}

        def _precompile_config(self, cfg):
            return type("R", (), {"make_launcher": lambda _: FakeLauncher(cfg)})()

        def bench(self, launcher, *args):
            raise AssertionError("timed through Inductor's bench")

    tuner = Tuner()
    tuner.coordesc_tuner.cache_benchmark_result(own, 9.0)  # Inductor timed its pick (through its copies)
    timed = []

    def alone(launcher):
        timed.append(launcher.config.kwargs["XBLOCK"])
        return 1.0 + launcher.config.kwargs["XBLOCK"]

    start = FakeLauncher(own)
    ev = LaunchEvaluator(tuner, start, desc, ("in", "out", 64, 4096), alone=alone)
    ms = ev.evaluate([{"XBLOCK": 1, "R0_BLOCK": 2048, "num_warps": 16}, other])
    assert [m.time_ms for m in ms] == [2.0, 5.0] and timed == [1, 4] and ev.answered == 0
    assert ev.answers([other]) == []
    assert tuner.coordesc_tuner.lookup_in_cache(ev.triton_config(other)) is None
    # without it, Inductor's timing of its pick answers, as before
    ev2 = LaunchEvaluator(tuner, start, desc, ("in", "out", 64, 4096))
    assert ev2.evaluate([{"XBLOCK": 1, "R0_BLOCK": 2048, "num_warps": 16}])[0].time_ms == 9.0 and ev2.answered == 1


def test_no_alone_timer_where_inductor_zeroes_arguments_or_there_is_no_gpu():
    import torch

    class Zeroes:
        reset_to_zero_arg_names = ["out_ptr0"]

    assert inductor._alone_timer(Zeroes(), (), {}) is None

    class Mutates:
        reset_to_zero_arg_names: list = []
        mutated_arg_names = ["in_out_ptr0"]
        fn = type("Fn", (), {"arg_names": ["in_out_ptr0", "xnumel"]})()

        def maybe_clone_args(self, exclude, *args, **kwargs):
            return list(args), dict(kwargs)

        def get_device_interface(self):
            raise RuntimeError("no GPU here")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the timer is built")
    assert inductor._alone_timer(Mutates(), (torch.zeros(4), 4), {}) is None
