"""Seed heuristics: hardware matching, eligibility, merge/clamp/dedupe, containment, classes."""
from __future__ import annotations

import json
import logging

import pytest

from abductune.classify import bucket_value, classify, fallback_category, shape_bucket
from abductune.errors import AbductuneError, InvalidSeed
from abductune.hardware import KNOWN_GPUS, HardwareInfo, hardware_matches, is_amd, is_hopper, is_nvidia
from abductune.heuristics import REGISTRY, AutotunerHeuristic, HeuristicRegistry, seed_configs
from abductune.heuristics.realize import problem_caps, realize, template_keys, template_scope
from abductune.heuristics.triton import BUILTIN, elementwise_block, row_warps
from abductune.problem import Problem
from abductune.space import Choice, Pow2, Space

H100 = KNOWN_GPUS["H100-SXM"]
A100 = KNOWN_GPUS["A100-SXM"]
MI300 = KNOWN_GPUS["MI300X"]

SMEM = 232448


def matmul_space() -> Space:
    """The built-in matmul space (kernels/matmul.py), rebuilt so these tests need no triton."""
    return Space(
        [Pow2("BLOCK_M", 16, 256, default=128), Pow2("BLOCK_N", 32, 256, default=128),
         Pow2("BLOCK_K", 32, 128, default=64), Choice("GROUP_M", [1, 8], role="group", default=8),
         Choice("num_warps", [2, 4, 8], default=4), Choice("num_stages", [2, 3, 4, 5], default=3)],
        constraints=[f"num_stages * (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 2 <= {SMEM}",
                     "BLOCK_M * BLOCK_N <= 128 * 32 * num_warps",
                     "BLOCK_M * BLOCK_N >= 16 * 32 * num_warps"], name="matmul_fp16")


def row_space() -> Space:
    return Space([Pow2("BLOCK", 128, 16384, role="tile:R", default=2048),
                  Choice("ROWS_PER_PROGRAM", [1, 2, 4], role="tile:X", default=1),
                  Pow2("num_warps", 1, 16, default=8), Choice("num_stages", [1, 2, 3], default=2)],
                 constraints=["ROWS_PER_PROGRAM * BLOCK >= 32 * num_warps",
                              "ROWS_PER_PROGRAM * BLOCK <= 64 * 32 * num_warps"], name="softmax_fp16")


def ew_space() -> Space:
    return Space([Pow2("BLOCK", 128, 8192, role="tile:X", default=1024),
                  Pow2("num_warps", 1, 16, default=4), Choice("num_stages", [1, 2], default=1)],
                 constraints=["BLOCK >= 32 * num_warps"], name="gelu_mul_fp16")


def mm(m: int, n: int, k: int, hw: HardwareInfo | None = H100, dtype: str = "fp16", **kw) -> Problem:
    return Problem("matmul_fp16", kw.pop("kernel_class", "matmul"), {"M": m, "N": n, "K": k},
                   {"a": dtype, "b": dtype, "c": dtype}, hardware=hw, **kw)


def rows(r: int, c: int, hw: HardwareInfo | None = H100) -> Problem:
    return Problem("softmax_fp16", "row_reduction", {"rows": r, "cols": c}, {"x": "fp16", "y": "fp16"},
                   hardware=hw)


def ew(n: int, hw: HardwareInfo | None = H100) -> Problem:
    return Problem("gelu_mul_fp16", "elementwise", {"numel": n}, {"x": "fp16"}, hardware=hw)


# ----------------------------------------------------------------------------- hardware

def test_hardware_matching_by_vendor_cc_family_and_name():
    assert is_hopper(H100) and is_hopper("NVIDIA H100 80GB HBM3") and is_hopper(KNOWN_GPUS["H200"])
    assert not is_hopper(A100) and not is_hopper(MI300)  # MI300X has cc (9, 4) but is AMD
    assert is_nvidia(A100) and not is_nvidia(MI300) and is_amd(MI300)
    assert hardware_matches(A100, min_cc=(8, 0), max_cc=(8, 9))
    assert not hardware_matches(H100, max_cc=(8, 9))
    assert hardware_matches(H100, family="hopper", name_pattern=r"h100")
    assert not hardware_matches(H100, name_pattern=r"A100")
    # unknown hardware: every criterion fails, no criterion passes
    assert not hardware_matches(None, vendor="nvidia") and hardware_matches(None)
    # a driver name we do not know still becomes hardware, of unknown vendor
    assert not is_nvidia("Some Future GPU")


# ----------------------------------------------------------------------------- eligibility

def builtin(name: str) -> AutotunerHeuristic:
    h = REGISTRY.get(name)
    assert h is not None, name
    return h


def test_builtin_heuristics_are_registered_for_triton():
    assert [h.name for h in REGISTRY.heuristics("triton")][:len(BUILTIN)] == list(BUILTIN)
    assert REGISTRY.heuristics("cuda") == []


@pytest.mark.parametrize("name, problem, eligible", [
    ("decode_gemm", mm(16, 4096, 4096), True),
    ("decode_gemm", mm(64, 4096, 4096), True),
    ("decode_gemm", mm(65, 4096, 4096), False),
    ("decode_gemm", rows(16, 4096), False),
    ("skinny_gemm", mm(8192, 1024, 4096), True),   # ratio exactly 8
    ("skinny_gemm", mm(8192, 1025, 4096), False),
    ("skinny_gemm", mm(16, 4096, 4096), True),
    ("large_square_gemm_hopper", mm(4096, 4096, 4096), True),
    ("large_square_gemm_hopper", mm(4096, 4096, 4096, hw=A100), False),
    ("large_square_gemm_hopper", mm(4096, 4096, 4096, hw=None), False),
    ("large_square_gemm_hopper", mm(1024, 4096, 4096), False),
    ("large_square_gemm_hopper", mm(4096, 4096, 512), False),
    ("row_reduction", rows(4096, 1024), True),
    ("row_reduction", mm(4096, 4096, 4096), False),
    ("elementwise", ew(1 << 20), True),
    ("elementwise", rows(1, 2), False),
])
def test_eligibility(name, problem, eligible):
    assert builtin(name).is_eligible(problem, problem.hardware) is eligible


def test_default_is_eligible_uses_class_and_hardware_attributes():
    class AmdOnly(AutotunerHeuristic):
        name = "amd_only"
        kernel_classes = ("matmul",)
        vendor = "amd"

    h = AmdOnly()
    assert h.is_eligible(mm(512, 512, 512, hw=MI300), MI300)
    assert not h.is_eligible(mm(512, 512, 512), H100)
    assert not h.is_eligible(rows(4, 4), MI300)
    assert not h.is_eligible(mm(512, 512, 512), None)


# ----------------------------------------------------------------------------- merge / clamp

def test_realize_merges_onto_default_and_clamps_into_domain():
    sp = matmul_space()
    cfg = realize(sp, {"@tile:N": 100, "@warps": 8}, mm(4096, 4096, 4096))
    # BLOCK_N 100 -> 128 (nearest on a log scale); the rest is the default
    assert cfg == {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8,
                   "num_stages": 3}
    assert sp.is_valid(cfg)
    # an explicit parameter name wins over its role
    assert realize(sp, {"@tile:M": 64, "BLOCK_M": 32}, mm(4096, 4096, 4096))["BLOCK_M"] == 32
    # a role the space lacks is dropped, not an error
    assert realize(sp, {"@tile:R": 4096, "@warps": 8}, None)["num_warps"] == 8


def test_realize_caps_tiles_at_the_problem_unless_the_space_forces_it():
    sp = matmul_space()
    # M = 20 -> BLOCK_M at most 32 (next power of two); N = 40 -> BLOCK_N at most 64
    cfg = realize(sp, {"@tile:M": 256, "@tile:N": 256, "@warps": 4}, mm(20, 40, 4096))
    assert cfg["BLOCK_M"] <= 32 and cfg["BLOCK_N"] <= 64 and sp.is_valid(cfg)
    # M = 1: the space allows nothing below 16, so 16 it is (forced), and the base default
    # (BLOCK_M 128) is capped too
    assert realize(sp, {}, mm(1, 4096, 4096))["BLOCK_M"] == 16
    caps = problem_caps(sp, classify(mm(1, 8, 4096)))
    assert caps == {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 128}


def test_realize_repairs_constraints_keeping_the_proposed_values():
    sp = matmul_space()
    # 256 x 256 needs more than 8 warps' worth of accumulator registers: infeasible as is
    cfg = realize(sp, {"@tile:M": 256, "@tile:N": 256, "@tile:K": 128, "@stages": 5},
                  mm(8192, 8192, 8192))
    assert sp.is_valid(cfg)
    assert cfg != {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_M": 8, "num_warps": 4,
                   "num_stages": 5}


def test_realize_rejects_unknown_names_and_unreadable_values():
    sp = matmul_space()
    with pytest.raises(InvalidSeed, match="BLOK_M"):
        realize(sp, {"BLOK_M": 64}, None)
    with pytest.raises(InvalidSeed, match="not one of"):
        realize(sp, {"BLOCK_M": "big"}, None)
    with pytest.raises(InvalidSeed):
        realize(sp, [("BLOCK_M", 64)], None)  # type: ignore[arg-type]


def test_template_keys_use_roles_only_when_unique():
    sp = matmul_space()
    cfg = sp.default()
    t = template_keys(sp, cfg)
    assert set(t) == {"@tile:M", "@tile:N", "@tile:K", "@group", "@warps", "@stages"}
    assert realize(sp, t, None) == cfg
    assert template_scope(sp) == ""
    raw = Space([Choice("block_size_x", [16, 32]), Choice("tile_size_x", [1, 2]), Choice("use_shmem", [0, 1])])
    assert template_keys(raw, {"block_size_x": 16, "tile_size_x": 2, "use_shmem": 1}) == \
        {"block_size_x": 16, "tile_size_x": 2, "use_shmem": 1}  # tile:X is held twice
    assert template_scope(raw) == "names:block_size_x,tile_size_x,use_shmem"


# ----------------------------------------------------------------------------- seed_configs

class Fixed(AutotunerHeuristic):
    def __init__(self, name, cfg):
        self.name, self.cfg = name, cfg

    def get_seed_config(self, problem, hardware, space):
        return self.cfg


class Boom(AutotunerHeuristic):
    name = "boom"

    def get_seed_config(self, problem, hardware, space):
        raise ZeroDivisionError("kaboom")


class NotEligible(AutotunerHeuristic):
    name = "never"

    def is_eligible(self, problem, hardware):
        return False


class EligibilityBoom(AutotunerHeuristic):
    name = "bad_eligibility"

    def is_eligible(self, problem, hardware):
        raise RuntimeError("eligibility exploded")


def test_seed_configs_dedupes_contains_errors_and_records_everything(caplog):
    reg = HeuristicRegistry()
    reg.register(Fixed("a", {"@tile:M": 64, "@warps": 8}))
    reg.register(Boom)
    reg.register(Fixed("same_as_a", {"BLOCK_M": 64, "num_warps": 8}))
    reg.register(Fixed("typo", {"BLOCK_MM": 64}))
    reg.register(Fixed("garbage", 42))
    reg.register(NotEligible)
    reg.register(EligibilityBoom)
    reg.register(Fixed("nothing", None))
    reg.register(Fixed("b", {"@tile:K": 128, "@stages": 4}))
    sp = matmul_space()
    with caplog.at_level(logging.WARNING, logger="abductune.heuristics.seeds"):
        rep = seed_configs(mm(4096, 4096, 4096), sp, database=False, registry=reg, ranker=False)
    assert len(rep.configs) == 2 and all(sp.is_valid(c) for c in rep.configs)
    assert rep.configs[0]["BLOCK_M"] == 64 and rep.configs[0]["num_warps"] == 8
    assert rep.configs[1]["BLOCK_K"] == 128 and rep.configs[1]["num_stages"] == 4
    st = {f["name"]: f for f in rep.fired}
    assert st["a"]["status"] == "seed" and st["b"]["status"] == "seed"
    assert st["same_as_a"]["status"] == "seed" and st["same_as_a"]["duplicate_of"] == "a"
    assert st["boom"]["status"] == "error" and "kaboom" in st["boom"]["reason"]
    assert st["bad_eligibility"]["status"] == "error"
    assert st["typo"]["status"] == "invalid" and "BLOCK_MM" in st["typo"]["reason"]
    assert st["garbage"]["status"] == "invalid"
    assert st["never"]["status"] == "ineligible"
    assert st["nothing"]["status"] == "noop"
    assert rep.names() == ["a", "b"]
    assert any("kaboom" in r.getMessage() for r in caplog.records)
    assert json.loads(json.dumps(rep.to_json())) == rep.fired  # recordable as is


def test_fired_heuristics_are_recorded_with_the_run():
    from abductune.store import Context, Store

    sp = matmul_space()
    p = mm(16, 4096, 4096)
    reg = HeuristicRegistry()
    reg.register(Boom)
    reg.register(builtin("decode_gemm"))
    rep = seed_configs(p, sp, database=False, registry=reg, ranker=False)
    with Store(":memory:") as store:
        ctx = Context.of(p, sp)
        store.start_run(ctx, "coordesc", {"budget": 8}, heuristics=rep.fired)
        (run,) = store.runs(ctx)
    assert run.heuristics == json.loads(json.dumps(rep.fired))
    assert [h["status"] for h in run.heuristics] == ["error", "seed"]


def test_seed_configs_limit_and_backend():
    sp = matmul_space()
    rep = seed_configs(mm(16, 4096, 4096), sp, database=False, limit=1)
    assert len(rep.configs) == 1
    assert seed_configs(mm(16, 4096, 4096), sp, database=False, backend="cuda").configs == []


# ----------------------------------------------------------------------------- built-in seeds

def seeds_by_name(problem, space):
    rep = seed_configs(problem, space, database=False)
    return {f["name"]: f["config"] for f in rep.fired if f["status"] == "seed"}


def test_decode_gemm_seed():
    sp = matmul_space()
    s = seeds_by_name(mm(1, 14336, 4096), sp)["decode_gemm"]
    assert s["BLOCK_M"] == 16 and s["BLOCK_K"] == 128 and s["num_stages"] >= 4
    # 14336 / 128 = 112 tiles >= 0.8 * 132 SMs: the largest N tile that fills the GPU
    assert s["BLOCK_N"] == 128
    s = seeds_by_name(mm(40, 4096, 4096), sp)["decode_gemm"]
    assert s["BLOCK_M"] == 64  # next_pow2(40)


def test_skinny_and_large_square_seeds():
    sp = matmul_space()
    s = seeds_by_name(mm(8192, 128, 4096), sp)["skinny_gemm"]
    assert s["BLOCK_N"] == 128 and s["BLOCK_M"] == 64  # 8192 / 64 = 128 tiles fill 132 SMs
    s = seeds_by_name(mm(4096, 4096, 4096), sp)["large_square_gemm_hopper"]
    assert (s["BLOCK_M"], s["BLOCK_N"], s["BLOCK_K"], s["num_warps"]) == (128, 256, 64, 8)


def test_row_and_elementwise_seeds():
    s = seeds_by_name(rows(4096, 1000), row_space())["row_reduction"]
    assert s["BLOCK"] == 1024 and s["num_warps"] == 4 and s["ROWS_PER_PROGRAM"] == 1
    s = seeds_by_name(rows(4096, 128256), row_space())["row_reduction"]
    assert s["BLOCK"] == 8192 and s["num_warps"] == 16
    assert [row_warps(b) for b in (1024, 2048, 4096)] == [4, 8, 16]
    s = seeds_by_name(ew(8192 * 14336), ew_space())["elementwise"]
    assert s["BLOCK"] == 4096 and s["num_warps"] == 8
    assert elementwise_block(1000, 132) == 256 and elementwise_block(1 << 30, 132) == 4096


def test_builtin_seeds_fit_the_real_kernel_spaces():
    kernels = pytest.importorskip("abductune.kernels")
    pytest.importorskip("triton")
    seeded = 0
    for name in kernels.names():
        spec = kernels.get(name)
        for dims in spec.suite_shapes():
            p = spec.problem(dims, H100)
            rep = seed_configs(p, spec.space(), database=False)
            seeded += bool(rep.configs)
            if spec.kernel_class != "matmul":  # rows and elementwise always have a heuristic
                assert rep.configs, (name, dims)
            assert all(spec.space().is_valid(c) for c in rep.configs)
            assert not [f for f in rep.fired if f["status"] in ("error", "invalid")]
    assert seeded >= 30


# ----------------------------------------------------------------------------- classes

def test_matmul_fallback_boundaries():
    f = fallback_category
    assert f("matmul", {"M": 64, "N": 4096, "K": 4096}) == "small_m"
    assert f("matmul", {"M": 65, "N": 256, "K": 4096}) == "small_n"
    assert f("matmul", {"M": 65, "N": 257, "K": 512}) == "small_k"
    assert f("matmul", {"M": 8 * 300, "N": 300, "K": 513}) == "rect"
    assert f("matmul", {"M": 8 * 300 - 1, "N": 300, "K": 513}) == "balanced"
    assert f("matmul", {"x": 4096, "y": 4096}) == "all"  # dims not known: one fallback


def test_rows_elementwise_attention_fallback_boundaries():
    f = fallback_category
    assert f("row_reduction", {"rows": 127, "cols": 100000}) == "short"
    assert f("row_reduction", {"rows": 128, "cols": 1024}) == "narrow"
    assert f("row_reduction", {"rows": 128, "cols": 1025}) == "square"
    assert f("row_reduction", {"rows": 128, "cols": 16384}) == "wide"
    assert f("elementwise", {"numel": 1 << 20}) == "tiny"
    assert f("elementwise", {"numel": (1 << 20) + 1}) == "mid"
    assert f("elementwise", {"numel": 1 << 26}) == "huge"
    assert f("attention", {"seq": 100000, "head_dim": 32}) == "small_head"
    assert f("attention", {"seq": 512, "head_dim": 128}) == "short_seq"
    assert f("attention", {"seq": 513, "head_dim": 128}) == "mid_seq"
    assert f("attention", {"seq": 8192, "head_dim": 128}) == "long_seq"
    assert f("stencil", {"x": 5}) == "all"


def test_bucket_values():
    assert [bucket_value(v) for v in (1, 2, 4, 5, 16, 17, 64, 65, 4096, 4097)] == \
        [1, 4, 4, 16, 16, 64, 64, 256, 4096, 16384]
    assert [bucket_value(v, 1) for v in (1, 3, 64, 65)] == [1, 4, 64, 128]
    # the one bucket function: name order, any granularity, dims below 1 kept
    assert shape_bucket({"N": 4097, "M": 5, "K": 0}) == "K=0,M=16,N=16384"
    assert shape_bucket({"N": 4097, "M": 5}, granularity=1) == "M=8,N=8192"
    c = classify(mm(64, 4097, 4096))
    assert c.bucket == "K=4096,M=64,N=16384" and c.fallback == "small_m"


@pytest.mark.parametrize("dims, dtypes, kernel, cls, variant, fam", [
    ({"M": 16, "N": 4096, "K": 4096}, {"a": "fp16", "b": "fp16"}, "mm", "matmul", "", "fp16"),
    ({"M": 16, "N": 4096, "K": 4096}, {"a": "bf16", "b": "bf16"}, "mm", "matmul", "", "fp16"),
    ({"M": 16, "N": 4096, "K": 4096}, {"a": "fp16", "b": "int4"}, "mm", "quantized_matmul", "int4", "int4"),
    ({"M": 16, "N": 4096, "K": 4096, "pack": 8}, {"a": "fp16", "b": "int32"}, "mm",
     "quantized_matmul", "int4", "int4"),
    ({"M": 16, "N": 4096, "K": 4096, "pack": 2}, {"a": "fp16", "b": "int32"}, "mm",
     "quantized_matmul", "int16", "int16"),
    ({"M": 16, "N": 4096, "K": 4096, "pack": 2}, {"a": "fp16", "b": "uint8", "b_scale": "e8m0"}, "mm",
     "quantized_matmul", "fp4", "fp4"),
    ({"M": 16, "N": 4096, "K": 4096, "pack": 2}, {"a": "fp16", "b": "uint8"}, "mm",
     "quantized_matmul", "int4", "int4"),
    ({"M": 16, "N": 4096, "K": 4096}, {"a": "bf16", "b": "e2m1"}, "mm", "quantized_matmul", "fp4", "fp4"),
    ({"M": 16, "N": 4096, "K": 4096}, {"a": "fp8", "b": "fp8"}, "mm", "matmul", "", "fp8"),
    ({"M": 16, "N": 4096, "K": 4096}, {"x_ptr": "float8_e4m3fn", "w_ptr": "float8_e4m3fn", "y_ptr": "bfloat16",
                                        "x_scale_ptr": "float32", "w_scale_ptr": "float32"}, "mm", "matmul", "", "fp8"),
    ({"M": 16, "N": 4096, "K": 4096}, {"a": "bf16", "b": "fp8"}, "mm", "quantized_matmul", "fp8", "fp8"),
    ({"M": 16, "N": 4096, "K": 4096}, {"a": "int8", "b": "int8"}, "mm", "quantized_matmul", "int8", "int8"),
    ({"M": 16, "N": 4096, "E": 8}, {"a": "fp8", "b": "fp8", "out": "bf16"}, "fused_moe", "matmul", "moe", "fp8"),
    ({"rows": 4, "cols": 4096}, {"x": "fp32"}, "whatever", "row_reduction", "", "fp32"),
    ({"numel": 4096}, {"x": "fp16"}, "whatever", "elementwise", "", "fp16"),
    ({"batch": 4, "heads": 32, "seq": 4096, "head_dim": 128}, {"q": "fp16"}, "k", "attention", "", "fp16"),
    ({"M": 16, "N": 4096, "E": 8}, {"a": "fp16"}, "fused_moe", "matmul", "moe", "fp16"),
    ({"x": 4096, "y": 4096}, {}, "Xgemm", "matmul", "", "any"),
    ({"x": 7}, {}, "mystery", "other", "", "any"),
])
def test_classifier_infers_class_variant_and_family(dims, dtypes, kernel, cls, variant, fam):
    c = classify(Problem(kernel, "other", dims, dtypes))
    assert (c.kernel_class, c.variant, c.dtype_family) == (cls, variant, fam)


def test_classifier_uses_space_roles_and_canonical_dims():
    p = Problem("my_gemm", "other", {"m": 64, "n": 128, "k": 256}, {"a": "fp16"})
    c = classify(p, matmul_space())
    assert c.kernel_class == "matmul" and c.dims == {"M": 64, "N": 128, "K": 256}
    p = Problem("red", "other", {"n_rows": 64, "n_cols": 512}, {"x": "fp16"})
    assert classify(p, row_space()).kernel_class == "row_reduction"
    assert classify(p, row_space()).dims == {"rows": 64, "cols": 512}
    # a given class wins
    assert classify(Problem("x", "convolution", {"M": 1, "N": 1, "K": 1})).kernel_class == "convolution"


def test_m_n_k_keys_of_a_kernel_named_for_another_class_are_not_a_matmul():
    """FlagGems keys its softmax backward over a dim that is not the last by M, N and K (outer,
    softmaxed and inner extents): live, `patch_triton` read it as a matmul and seeded it with the
    matmul fallback's config, where its recording (a row reduction) had the row rules' and the
    observed database's (session 28). Its name decides where the space has no tiles of all three;
    tiles of M, N and K still make a matmul, and so do M, N and K under a name that says nothing."""
    tile_k = Space([Pow2("TILE_K", 16, 2048, default=128), Choice("num_warps", [2, 4, 8], default=4)])
    dims = {"M": 8, "N": 150, "K": 16384}
    c = classify(Problem("softmax_backward_kernel_non_inner", "other", dims, {"out_ptr": "bf16"}), tile_k)
    assert c.kernel_class == "row_reduction" and c.dims == {"rows": 8, "cols": 150, "K": 16384}
    assert classify(Problem("my_kernel", "other", dims), tile_k).kernel_class == "matmul"
    assert classify(Problem("layer_norm_fused", "other", dims), matmul_space()).kernel_class == "matmul"


@pytest.mark.parametrize("kernel,dims,cls", [
    ("var_mean_welford_kernel", {"M": 16384, "N": 4096}, "row_reduction"),
    ("amax_kernel", {"M": 4096, "N": 32000}, "row_reduction"),
    ("addmv_kernel", {"M": 128256, "N": 4096}, "row_reduction"),
    ("argmin_kernel", {"M": 64, "N": 1024}, "row_reduction"),
    ("reglu_kernel", {"M": 8192, "N_OUT": 14336}, "elementwise"),
    ("triu_kernel", {"M": 8192, "N": 8192}, "elementwise"),
    ("upsample_nearest2d_kernel", {"C": 64, "N": 8, "OH": 256, "OW": 256}, "elementwise"),
    ("max_pool2d_forward_kernel", {"out_h": 28, "out_w": 28}, "other"),
    ("chunk_gla_fwd_kernel_o", {"BT": 64, "K": 128, "V": 128}, "other"),
])
def test_library_kernels_keyed_by_bare_dims_take_their_class_from_their_names(kernel, dims, cls):
    """What `patch_triton` reads live from a library kernel's name and key (session 28: FlagGems'
    var_mean, amax, addmv, reglu, triu and upsampling were "other" live, while their recordings'
    headers, which the replay figures use, name their classes)."""
    assert classify(Problem(kernel, "other", dims, {"x": "bf16"})).kernel_class == cls


# ----------------------------------------------------------------------------- layout

SRC = __import__("pathlib").Path(__file__).resolve().parents[1] / "src" / "abductune"


def _imports(path) -> set[str]:
    """Package-relative modules a file imports ("classify", "heuristics.observed", ...)."""
    import ast

    pkg = path.relative_to(SRC).parent.parts
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(pkg[:len(pkg) - node.level + 1])
            mod = ".".join(base + ([node.module] if node.module else []))
            out |= {mod} if node.module else {".".join(base + [a.name]) for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("abductune."):
            out.add(node.module.removeprefix("abductune."))
    return out


def test_records_import_nothing_above_them_and_heuristics_no_front_door():
    records = {"errors", "hardware", "problem", "space", "classify", "measurement", "format", "costs",
               "kernel_facts", "dtypes"}
    for name in records - {"measurement"}:
        assert _imports(SRC / f"{name}.py") <= records, name
    for f in (SRC / "theory").glob("*.py"):  # the theory layer prints configs through `format`
        bad = {m for m in _imports(f) if m.split(".")[0] in ("cli", "daemon", "autotune")}
        assert not bad, (f.name, bad)
    for f in (SRC / "heuristics").glob("*.py"):
        bad = {m for m in _imports(f) if m.split(".")[0] in ("cli", "tune", "sweep", "session",
                                                             "evaluate", "store")}
        assert not bad, (f.name, bad)
    assert "heuristics.registry" not in {m for f in SRC.rglob("*.py") for m in _imports(f)}


@pytest.mark.parametrize("module", ["abductune.heuristics.observed", "abductune.heuristics.seeds",
                                    "abductune.heuristics.harvest", "abductune.classify"])
def test_each_module_imports_first_without_a_cycle(module):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_toolchain_key_is_derived_from_toolchain_without_the_date():
    from abductune.hardware import toolchain, toolchain_key

    info = {"python": "3.11", "torch": "2.4.1", "triton": "3.4.0", "cuda": "12.4",
            "date": "2025-01-01T00:00:00+00:00", "driver": "550"}
    assert toolchain_key(info) == "torch=2.4.1;triton=3.4.0"
    assert toolchain_key({"python": "3.11", "date": "x"}) == ""
    tc = toolchain()
    assert "python" in tc and "date" in tc
    assert "date" not in toolchain_key() and toolchain_key() == toolchain_key(tc)


def test_invalid_seed_is_a_user_error():
    assert issubclass(InvalidSeed, AbductuneError)

