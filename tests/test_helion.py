"""abductune inside Helion (src/abductune/integrations/helion*.py), on a CPU.

Helion binds kernels on a CPU (its ConfigSpec, flat layout, compiler seeds and heuristics
all run there), so the mapping, the registries and the heuristics are tested with Helion's
own objects. Timing a config needs a GPU: the search is driven end to end through Helion's
`BenchmarkProvider` seam (`StandIn` below answers each config with a time from a model whose
optimum is known) and its `autotune_benchmark_fn` setting for the run-off. The observed
database's export is read back by the reader written to Helion's layout.
"""
from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from abductune.errors import DatasetError
from abductune.heuristics.observed import packaged_database
from abductune.integrations import helion_observed as HO
from abductune.integrations.helion_space import ANCHOR, HelionError

torch = pytest.importorskip("torch", reason="Helion needs torch")
try:
    import helion
    import helion.language as hl
except ImportError as e:  # e.g. Helion 1.5.1 with torch 2.11
    if os.environ.get("ABDUCTUNE_REQUIRE_HELION") == "1":  # CI installs Helion: a missing one is a failure
        raise
    pytest.skip(f"Helion does not import here ({type(e).__name__}: {e}); the mapping tests need it",
                allow_module_level=True)

import abductune.integrations.helion as ath  # noqa: E402 - registers abductune with Helion
from abductune.integrations import helion_search as ath_search  # noqa: E402
from abductune.integrations.helion_kernel import facts_of  # noqa: E402
from abductune.integrations.helion_search import AbductuneSearch, kernel_map, tensors_of  # noqa: E402
from helion._compiler import autotuner_heuristics as registry  # noqa: E402
from helion.autotuner import search_algorithms  # noqa: E402
from helion_fixtures import stand_in_provider  # noqa: E402


# ------------------------------------------------------------------------- kernels: the benchmark's

# one definition of Helion's examples (in our words) serves both the benchmark and these tests
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "gpu"))
import helion_bench  # noqa: E402

mm, softmax, layer_norm, attention, int4_mm = (
    helion.kernel(static_shapes=True)(f) for f in (helion_bench.matmul, helion_bench.softmax, helion_bench.layer_norm,
                                                   helion_bench.attention, helion_bench.int4_matmul))


def _args(name: str) -> tuple:
    f16 = torch.float16
    return {"mm": lambda: (torch.randn(256, 128, dtype=f16), torch.randn(128, 512, dtype=f16)),
            "softmax": lambda: (torch.randn(1024, 512, dtype=f16),),
            "layer_norm": lambda: (torch.randn(512, 768, dtype=f16), torch.randn(768, dtype=f16),
                                   torch.randn(768, dtype=f16)),
            "attention": lambda: tuple(torch.randn(2, 4, 256, 64, dtype=f16) for _ in range(3)),
            "int4_mm": lambda: (torch.randn(64, 256, dtype=torch.bfloat16),
                                torch.randint(-8, 7, (128, 512), dtype=torch.int8))}[name]()


KERNELS = {"mm": mm, "softmax": softmax, "layer_norm": layer_norm, "attention": attention, "int4_mm": int4_mm}


def _bound(name: str):
    args = _args(name)
    return KERNELS[name].bind(args), args


def _map(name: str):
    bound, args = _bound(name)
    spec = bound.config_spec
    facts = facts_of(spec, tensors_of(args), name=name)
    gen = spec.create_config_generation()
    return bound, gen, facts, kernel_map(gen, spec, facts.roles, name=name)


# ----------------------------------------------------------------------------- the mapping

@pytest.mark.parametrize("name", list(KERNELS))
def test_every_helion_field_round_trips(name):
    bound, gen, _, hmap = _map(name)
    spec = bound.config_spec
    # every field of Helion's flat layout is a slot, and every flat entry an element
    layout = spec.flat_key_layout()
    assert [s.key for s in hmap.slots] == [k for k, n, _ in layout for _ in range(n)]
    random.seed(7)
    flats = [gen.default_flat(), *(gen.random_flat() for _ in range(40)),
             *(f for f, _ in gen.seed_flat_config_pairs())]
    for flat in flats:
        canon, config = gen.canonicalize_flat(flat)
        cfg = hmap.from_flat(canon)
        assert hmap.full.is_valid(cfg)
        back = hmap.to_flat(cfg)
        assert back == canon
        assert gen.unflatten(back) == config  # the very Helion Config, every field included


@pytest.mark.parametrize("name", ["mm", "layer_norm"])
def test_views_keep_the_anchor_and_cover_every_unit(name):
    _, gen, _, hmap = _map(name)
    random.seed(3)
    anchor = hmap.from_flat(gen.canonicalize_flat(gen.random_flat())[0])
    groups = hmap.plan(anchor, cap=5000)
    assert all(len(g) for g in groups)
    searched = {u for g in groups for u in g}
    assert searched == {u.name for u in hmap.units(anchor) if len(u.values) > 1}
    for names in groups:
        view = hmap.view(anchor, names)
        assert view.space.cardinality <= 5000 or len(names) == 1
        start = view.project(anchor)
        assert start is not None and view.to_full(start) == anchor
        # a config of the view changes only its own units
        other = view.space.valid_configs()[-1]
        full = view.to_full(other)
        units = {n for u in view.units for n in u.elements}
        assert all(full[n] == anchor[n] for n in hmap.full.names if n not in units)


def test_a_mixed_list_is_kept_by_the_anchor_value():
    _, gen, _, hmap = _map("layer_norm")
    anchor = hmap.from_flat(gen.canonicalize_flat(gen.default_flat())[0])
    evict = [n for n in hmap.full.names if n.startswith("load_eviction_policies_")]
    assert len(evict) >= 2
    anchor[evict[0]], anchor[evict[1]] = "first", "last"
    unit = next(u for u in hmap.units(anchor) if u.name == "load_eviction_policies")
    assert unit.uniform and unit.values[0] == ANCHOR
    view = hmap.view(anchor, ["load_eviction_policies"])
    assert view.project(anchor) == {"load_eviction_policies": ANCHOR}
    assert view.to_full({"load_eviction_policies": "last"})[evict[0]] == "last"


def test_fragments_of_other_backends_map():
    """CuTe's thread counts, permutations over three loops and lists of booleans do not occur
    in a CPU-bound Triton kernel: Helion's own fragment classes, mapped directly."""
    from helion.autotuner.config_fragment import (BooleanFragment, EnumFragment, ListOf, NumThreadsFragment,
                                                  PermutationFragment, PowerOfTwoFragment)

    from abductune.integrations.helion_space import HelionMap, read_slots

    spec = [PermutationFragment(3), ListOf(BooleanFragment(), 2), NumThreadsFragment(8),
            EnumFragment(("a", "b")), PowerOfTwoFragment(2, 32, 4)]
    layout = [("loop_orders", 1, True), ("flags", 1, False), ("num_threads", 1, True), ("mode", 1, False),
              ("num_warps", 1, False)]
    hmap = HelionMap(read_slots(spec, layout), {"num_warps": "warps"})
    assert hmap.full["loop_orders_0"].values[0] == (0, 1, 2) and len(hmap.full["loop_orders_0"].values) == 6
    assert hmap.full["num_threads_0"].values == (0, 1, 2, 4, 8)
    assert hmap.full.roles() == {"warps": "num_warps"}
    flat = [[2, 0, 1], [True, False], 4, "b", 16]
    assert hmap.to_flat(hmap.from_flat(flat)) == flat
    with pytest.raises(HelionError, match="outside its spec"):
        hmap.from_flat([[2, 0, 1], [True, False], 3, "b", 16])
    with pytest.raises(HelionError, match="flat entries"):
        read_slots(spec, layout[:-1])


@pytest.mark.parametrize("name,kclass,roles", [
    ("mm", "matmul", {"block_sizes_0": "tile:M", "block_sizes_1": "tile:N", "block_sizes_2": "tile:K"}),
    ("softmax", "row_reduction", {"block_sizes_0": "tile:X", "reduction_loops_0": "tile:R"}),
    ("layer_norm", "row_reduction", {"block_sizes_0": "tile:X", "reduction_loops_0": "tile:R"}),
    ("attention", "attention", {"block_sizes_1": "tile:M", "block_sizes_2": "tile:N"}),
    ("int4_mm", "quantized_matmul", {"block_sizes_0": "tile:K", "block_sizes_1": "tile:M", "block_sizes_2": "tile:N"}),
])
def test_kernel_facts_give_class_dims_and_roles(name, kclass, roles):
    _, _, facts, hmap = _map(name)
    p = facts.problem
    assert p.kernel_class == kclass
    assert {k: v for k, v in facts.roles.items() if v.startswith("tile")} == roles
    assert facts.roles["num_warps"] == "warps" and facts.roles["num_stages"] == "stages"
    assert hmap.full.roles()["warps"] == "num_warps"
    expect = {"mm": {"M": 256, "N": 512, "K": 128}, "softmax": {"rows": 1024, "cols": 512},
              "layer_norm": {"rows": 512, "cols": 768}, "int4_mm": {"M": 64, "N": 512, "K": 256},
              "attention": {"batch": 2, "heads": 4, "seq": 256, "head_dim": 64}}[name]
    assert p.dims == expect
    assert p.flops > 0 and p.min_bytes > 0
    if name == "int4_mm":
        from abductune.classify import classify

        assert classify(p).variant == "int4"


# ----------------------------------------------------------------------------- registration

class _Cache:
    """Helion's cache classes key the cache by the GPU; this one only holds the search."""

    def __init__(self, autotuner, *, autotuner_factory=None):
        self.autotuner = autotuner


def test_search_is_found_by_helions_own_lookups(monkeypatch):
    assert search_algorithms[ath.NAME] is AbductuneSearch
    from helion.autotuner import cache_classes
    from helion.runtime.settings import default_autotuner_fn

    monkeypatch.setitem(cache_classes, mm.settings.autotune_cache, _Cache)
    bound, args = _bound("mm")
    monkeypatch.setenv("HELION_AUTOTUNER", "abductune")
    tuner = default_autotuner_fn(bound, args)  # what Helion calls when a kernel autotunes
    assert isinstance(tuner.autotuner, AbductuneSearch)
    assert tuner.autotuner.max_evaluations == ath_search.DEFAULT_EVALUATIONS[mm.settings.autotune_effort]
    monkeypatch.delenv("HELION_AUTOTUNER")

    @helion.kernel(static_shapes=True, autotuner_fn=ath.autotuner_with(strategy="pattern", max_evaluations=9))
    def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for t in hl.tile(x.size()):
            out[t] = x[t] + y[t]
        return out

    xs = (torch.randn(4096), torch.randn(4096))
    b = add.bind(xs)
    monkeypatch.setitem(cache_classes, b.settings.autotune_cache, _Cache)
    tuner = b.settings.autotuner_fn(b, xs)
    assert isinstance(tuner.autotuner, AbductuneSearch)
    assert (tuner.autotuner.strategy, tuner.autotuner.max_evaluations) == ("pattern", 9)
    with pytest.raises(HelionError, match="no option budget"):
        ath.autotuner_with(budget=3)


def test_heuristics_are_found_by_helions_registry_and_fire():
    names = [h.name for h in registry.get_heuristics("triton")]
    assert names[-2:] == ["abductune_observed", "abductune_theory"]
    ath.fired(clear=True)
    spec = softmax.bind((torch.randn(2048, 1000, dtype=torch.float16),)).config_spec  # a shape bound only here
    assert "abductune_theory" in spec.autotuner_heuristics  # Helion's own record of what fired
    ours = ath.fired()
    seeded = [f for f in ours if f["status"] == "seed"]
    assert {f["name"] for f in seeded} >= {"abductune_theory"}
    assert any(repr(c) == seeded[0]["config"] for c in spec.compiler_seed_configs)
    assert spec.compiler_default_config is None or "abductune" not in repr(spec.compiler_default_config)


def test_heuristics_can_be_promoted_and_uninstalled():
    try:
        ath.install(promote=True)
        args = (torch.randn(512, 256, dtype=torch.float16), torch.randn(256, 1024, dtype=torch.float16))
        spec = mm.bind(args).config_spec
        assert spec.autotuner_heuristics[-1] == "abductune_theory"
        theory = [f for f in ath.fired() if f["name"] == "abductune_theory" and f["status"] == "seed"][-1]
        assert repr(spec.compiler_default_config) == theory["config"]  # what autotune_effort="none" runs
        ath.uninstall()
        assert ath.NAME not in search_algorithms
        assert not {"abductune_observed", "abductune_theory"} & {h.name for h in registry.get_heuristics("triton")}
        other = (torch.randn(1024, 256, dtype=torch.float16), torch.randn(256, 1024, dtype=torch.float16))
        assert "abductune_theory" not in mm.bind(other).config_spec.autotuner_heuristics
    finally:
        ath.install(promote=False)
    assert search_algorithms[ath.NAME] is AbductuneSearch


def test_the_promoted_seed_is_the_config_autotune_effort_none_runs():
    """Not only recorded as Helion's default: the bound kernel with autotune_effort="none" runs
    it (session 42 found no GPU row where ours had run, and checked that it does here)."""
    try:
        ath.install(promote=True)
        args = (torch.randn(384, 256, dtype=torch.float16), torch.randn(256, 768, dtype=torch.float16))
        bound = helion.kernel(static_shapes=True, autotune_effort="none")(helion_bench.matmul).bind(args)
        promoted = bound.config_spec.compiler_default_config
        theory = [f for f in ath.fired() if f["name"] == "abductune_theory" and f["status"] == "seed"][-1]
        assert promoted is not None and repr(promoted) == theory["config"]
        bound.ensure_config_exists(args)
        assert bound._config == bound.config_spec.default_config()
        assert all(bound._config.config[k] == v for k, v in promoted.config.items())
    finally:
        ath.install(promote=False)


@pytest.mark.parametrize("promote,ours", [(True, False), ("always", True)])
def test_promotion_keeps_helions_own_promoted_default_unless_always(monkeypatch, promote, ours):
    from helion._compiler.autotuner_heuristics.registry import AutotunerHeuristic

    class HelionsOwn(AutotunerHeuristic):  # stands for a Helion heuristic that promotes its seed
        name = "helions_own"
        backend = "triton"
        promote_seed_to_default = True

        @classmethod
        def is_eligible(cls, env, device_ir):
            return True

        @classmethod
        def get_seed_config(cls, env, device_ir):
            return helion.Config(block_sizes=[32, 32, 32], num_warps=2)

    monkeypatch.setitem(registry.HEURISTICS_BY_BACKEND, "triton",
                        (HelionsOwn, *registry.HEURISTICS_BY_BACKEND["triton"]))
    try:
        ath.install(promote=promote)
        shape = (96, 160) if ours else (160, 96)
        spec = mm.bind((torch.randn(shape[0], 64, dtype=torch.float16),
                        torch.randn(64, shape[1], dtype=torch.float16))).config_spec
        assert spec.autotuner_heuristics[0] == "helions_own" and "abductune_theory" in spec.autotuner_heuristics
        promoted = spec.compiler_default_config.config["block_sizes"] != [32, 32, 32]
        assert promoted == ours
    finally:
        ath.install(promote=False)


# ------------------------------------------------------------------------- the search, through Helion's provider seam

def _cost(config) -> float:
    """A time model with its optimum at block sizes (64, 128, *), 8 warps, 3 stages, pid flat."""
    c = config.config
    bs = c["block_sizes"]
    t = 1.0 + abs(math.log2(bs[0] / 64)) + 0.5 * abs(math.log2(bs[1] / 128))
    t += 0.3 * abs(math.log2(c["num_warps"] / 8)) + 0.2 * abs(c["num_stages"] - 3)
    return t + (0.4 if c.get("pid_type", "flat") != "flat" else 0.0)


StandIn = stand_in_provider(_cost)  # Helion's BenchmarkProvider contract, answering from `_cost`


@pytest.fixture
def quiet_mm(monkeypatch):
    # the run-off goes through Helion's rebenchmark, which times with autotune_benchmark_fn
    monkeypatch.setattr(mm.settings, "autotune_benchmark_fn", lambda fns, *, repeat=1, desc=None: [f() for f in fns])
    monkeypatch.setattr(mm.settings, "autotune_progress_bar", False)
    monkeypatch.setattr(mm.settings, "autotune_log_level", 40)
    StandIn.seen = []
    return mm


@pytest.mark.parametrize("seeds", [True, False])
def test_search_runs_through_helions_benchmarking(quiet_mm, seeds):
    args = _args("mm")
    bound = quiet_mm.bind(args)
    search = AbductuneSearch(bound, args, benchmark_provider_cls=StandIn, max_evaluations=20,
                             abductune_seeds=seeds)
    best = search.autotune(skip_cache=True)
    measured = StandIn.seen
    assert 0 < len(measured) <= 20  # each Helion config benchmarked once, within the budget
    assert len(set(measured)) == len(measured)
    assert _cost(best) == min(_cost(c) for c in measured)  # the winner is the best measured
    default = bound.config_spec.default_config()
    assert _cost(best) <= _cost(default)
    assert _cost(best) < 3.0  # the default costs 4.5: the search moved towards the optimum
    sources = [s["source"] for s in search.report["seeds"]]
    assert sources[0] == "helion:default"
    assert any(s.startswith("theory") for s in sources) == seeds
    assert search.report["phases"][0]["phase"] == "seeds"
    assert search.report["evaluations"] <= 20
    assert search.report["roles"]["block_sizes_0"] == "tile:M"


def test_search_with_a_store_keeps_every_measurement(quiet_mm, tmp_path):
    from abductune.store import Store

    args = _args("mm")
    path = tmp_path / "helion.db"
    search = AbductuneSearch(quiet_mm.bind(args), args, benchmark_provider_cls=StandIn, max_evaluations=10,
                             store=str(path), strategy="random")
    search.autotune(skip_cache=True)
    with Store(str(path)) as st:
        runs = st.runs()
        rows = [m for r in runs for m in st.measurements(r.context)]
    assert len(runs) == len(search.report["phases"]) and all(r.status == "done" for r in runs)
    assert {r.strategy for r in runs} == {"fixed", "random"}  # the seeds, then the search
    # every Helion config timed has its row (a config Helion normalises to one measured before answers free)
    assert len({m.extra["helion_config"] for m in rows if m.kind != "verify"}) == len(StandIn.seen)


# ----------------------------------------------------------------------------- versions

def test_supported_versions_and_clear_errors():
    assert ath.check_helion("1.5.0") is helion
    assert ath.check_helion("1.4.0") is helion
    for v in ("1.3.2", "1.6.0", "0.3.3"):
        with pytest.raises(HelionError, match=r"supports Helion 1\.4 to 1\.5; this is Helion"):
            ath.check_helion(v)


@pytest.mark.parametrize("case,expect", [
    ("absent", "Helion is not installed"),
    ("broken", "does not import here (ModuleNotFoundError"),
])
def test_without_a_working_helion_import_fails_in_one_line(case, expect):
    code = textwrap.dedent(f"""
        import sys, importlib.metadata as md
        real = md.version
        if {case!r} == "absent":
            def fake(name):
                if name == "helion":
                    raise md.PackageNotFoundError(name)
                return real(name)
            md.version = fake
        sys.modules["helion"] = None  # import helion raises ImportError, as Helion 1.5.1 does on torch 2.11
        try:
            import abductune.integrations.helion
        except Exception as e:
            print(type(e).__name__ + "|" + str(e))
        """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    kind, _, message = out.stdout.strip().partition("|")
    assert kind == "HelionError", out.stdout + out.stderr
    assert expect in message and "\n" not in message


# ----------------------------------------------------------------------------- the observed database, Helion's layout

def test_exported_observed_database_loads_in_the_reader(tmp_path):
    db = packaged_database()
    path = tmp_path / "observed_heuristics_h100.json"
    out = HO.export_observed_layout(db, hardware="H100-SXM", path=path)
    raw = json.loads(path.read_text())
    assert raw["schema_version"] == 2 and raw["rules"] and raw["fallbacks"]
    layout = HO.read_observed_layout(path)
    assert len(layout.rules) == len(out.rules) > 0
    assert {r.kernel_class for r in layout.rules} >= {"matmul", "row_softmax", "row_norm_rms"}
    assert set(layout.fallbacks["matmul"]) <= {"small_m", "small_n", "small_k", "balanced", "rect"}
    # every matmul template in the file is one of the database's role templates, written as Helion fields
    ours = {json.dumps(t.config, sort_keys=True) for r in db.rules if r.kernel_class == "matmul"
            and r.hardware == "H100-SXM" for t in r.templates}
    for r in layout.rules:
        assert r.shape_bucket["dtype"] == "fp16_bf16"
        for t in r.templates:
            if r.kernel_class == "matmul":
                assert json.dumps(HO.from_helion_template("matmul", t.template), sort_keys=True) in ours
                assert len(t.template["block_sizes"]) == 3 and "win_count" in t.stats
    # a shape a rule was learned from finds it again through Helion's bucketing
    rule = next(r for r in db.rules if r.kernel_class == "matmul" and not r.is_fallback and r.hardware == "H100-SXM")
    dims = rule.learned_from[0].dims
    got = layout.role_templates("matmul", dims, "fp16_bf16")
    assert got and got[0] == {k: v for k, v in rule.templates[0].config.items()}


def test_reader_takes_helions_own_file_layout():
    helion_style = {"schema_version": 2, "description": "x", "policy": {"device": "NVIDIA B200 sm100"},
                    "rules": [{"kernel_class": "attention", "match_exact_only": True, "validation": {"g": 0.7},
                               "shape_bucket": {"batch_heads_bin": "<=32", "dtype": "fp16_bf16",
                                                "head_dim_bin": "<=64", "seq_bin": "<=2048"},
                               "templates": [{"template": {"block_sizes": [1, 128, 64], "num_warps": 4,
                                                           "num_stages": 3, "pid_type": "flat"}}]}],
                    "fallbacks": {"matmul": {"rect": {"template": {"block_sizes": [256, 256, 64]},
                                                      "source": {"n_archive_shapes": 10}}}}}
    layout = HO.read_observed_layout(helion_style)
    dims = {"batch": 2, "heads": 8, "seq": 2048, "head_dim": 64}
    assert layout.role_templates("attention", dims, "fp16_bf16") == [
        {"@tile:M": 128, "@tile:N": 64, "@warps": 4, "@stages": 3}]
    rect = layout.lookup("matmul", {"M": 8192, "N": 1024, "K": 4096}, "fp16_bf16")
    assert rect[0].template["block_sizes"] == [256, 256, 64]
    assert layout.lookup("matmul", {"M": 64, "N": 1024, "K": 4096}, "fp16_bf16") == []  # small_m: no fallback
    assert HO.read_observed_layout(layout.to_dict()).rules[0].shape_bucket == layout.rules[0].shape_bucket


@pytest.mark.parametrize("bad,where", [
    ({"rules": {}}, "a 'rules' list"),
    ({"rules": [{"kernel_class": "matmul"}]}, "rules[0]"),
    ({"rules": [{"kernel_class": "matmul", "shape_bucket": {}, "templates": [{"cfg": 1}]}]}, "rules[0].templates[0]"),
    ({"rules": [], "schema_version": 9}, "schema_version 9"),
])
def test_reader_names_what_is_wrong(bad, where):
    with pytest.raises(DatasetError) as e:
        HO.read_observed_layout(bad)
    assert where in str(e.value)


def test_helion_buckets_and_groups():
    assert HO.bin_le(4096, HO.BINS["m_bin"]) == "<=4096" and HO.bin_le(5000, HO.BINS["m_bin"]) == ">4096"
    assert HO.shape_bucket("matmul", {"M": 16, "N": 4096, "K": 4096}, "fp16_bf16") == {
        "aspect": "skinny_m", "dtype": "fp16_bf16", "k_bin": "<=4096", "m_bin": "<=16", "n_bin": "<=4096"}
    assert HO.fallback_group("matmul", {"M": 4096, "N": 4096, "K": 4096}) == "balanced"
    assert HO.fallback_group("row_softmax", {"rows": 4096, "cols": 16384}) == "wide"
    assert HO.helion_class("row_reduction", kernels=["rmsnorm_fp16"]) == "row_norm_rms"
    assert HO.helion_class("quantized_matmul", "int4") == "matmul_int4"
    assert HO.helion_class("row_reduction", kernels=["mystery"]) is None


def test_abductune_helion_is_the_integration():
    import abductune

    assert abductune.helion is ath and abductune.helion.autotuner is ath.autotuner
