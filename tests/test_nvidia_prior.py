"""The NVIDIA matmul prior (heuristics/nvidia.py): eligibility, role mapping, top-k, seeding.

Tests that need nvidia-matmul-heuristics are skipped with a reason when it is absent, unless
ABDUCTUNE_REQUIRE_NVIDIA=1, which turns the skip into a failure. The missing-package tests
run everywhere (they hide the package).
"""
from __future__ import annotations

import logging
import os

import pytest

from abductune.datasets.bundled import bundled_datasets
from abductune.datasets.format import read_dataset
from abductune.errors import AbductuneError
from abductune.hardware import HardwareInfo, lookup
from abductune.heuristics import REGISTRY, nvidia, seed_configs
from abductune.heuristics.harvest import observation_from_dataset
from abductune.problem import Problem
from abductune.space import Choice, Pow2, Space
from nvidia_fixtures import require_nvidia

H100 = lookup("H100-SXM")


@pytest.fixture
def nv():
    """The nvMatmulHeuristics module: skipped with a reason when absent, a failure when
    ABDUCTUNE_REQUIRE_NVIDIA=1."""
    require_nvidia()
    assert nvidia.available()
    os.environ[nvidia.SEED_ENV] = "1"  # the seed is opt-in; these tests check it when asked for
    try:
        yield nvidia
    finally:
        os.environ.pop(nvidia.SEED_ENV, None)


def test_the_seed_is_off_unless_asked_for(nv):
    o = bundled_matmul("M2048_N14336_K4096")
    os.environ.pop(nvidia.SEED_ENV, None)
    st = {f["name"]: f for f in seed_configs(o.problem, o.space, o.problem.hardware).fired}
    assert st[nvidia.NAME]["status"] == "ineligible"
    assert nv.nvidia_topk(o.problem, o.space, 1)  # the model itself stays usable


@pytest.fixture
def hidden(monkeypatch):
    """The package made to look absent."""
    monkeypatch.setattr(nvidia, "_MOD", None)
    return nvidia


def mm(m, n, k, hw=H100, dtype="fp16", cls="matmul", **extra_dtypes):
    return Problem(kernel="mm", kernel_class=cls, dims={"M": m, "N": n, "K": k},
                   dtypes={"a": dtype, "b": dtype, **extra_dtypes, "c": dtype if dtype in ("fp16", "bf16") else "bf16"},
                   flops=2.0 * m * n * k, hardware=hw)


def bundled_matmul(name="M4096_N4096_K4096"):
    path = next(p for p in bundled_datasets(kernel="matmul_fp16") if p.name.startswith(name + "."))
    return observation_from_dataset(read_dataset(path))


def odd_names_space(split=False):
    """A matmul space whose parameter names say nothing: only the roles do."""
    params = [Pow2("rows_per_cta", 16, 256, role="tile:M"), Pow2("cols_per_cta", 16, 256, role="tile:N"),
              Pow2("depth", 16, 128, role="tile:K"), Choice("lanes", [1, 2, 4, 8], role="warps"),
              Choice("pipe", [1, 2, 3, 4, 5, 6], role="stages"), Choice("band", [1, 4, 8, 16], role="group")]
    if split:
        params.append(Choice("kparts", [1, 2, 4, 8], role="split:K"))
    return Space(params)


# ------------------------------------------------------------------------ eligibility

def test_eligible_for_an_h100_matmul_and_not_for_a_row_kernel_or_unknown_gpu(nv):
    h = REGISTRY.get(nvidia.NAME)
    assert h is not None and h.kernel_classes == ("matmul", "quantized_matmul")
    assert h.is_eligible(mm(4096, 4096, 4096), H100)
    assert h.is_eligible(mm(4096, 4096, 4096, dtype="bf16"), H100)
    row = Problem(kernel="softmax", kernel_class="row_reduction", dims={"rows": 4096, "cols": 4096},
                  dtypes={"x": "fp16", "y": "fp16"}, hardware=H100)
    assert not h.is_eligible(row, H100)
    mystery = HardwareInfo("Mystery GPU 9000", vendor="nvidia", compute_capability=(9, 0), sms=100)
    assert not h.is_eligible(mm(4096, 4096, 4096, hw=mystery), mystery)
    old = lookup("RTX 2080 Ti")  # in our table, not in the model's
    assert not h.is_eligible(mm(4096, 4096, 4096, hw=old), old)
    assert not h.is_eligible(mm(4096, 4096, 4096, hw=lookup("MI300X")), lookup("MI300X"))
    assert not h.is_eligible(mm(4096, 4096, 4096, hw=None), None)
    with pytest.raises(AbductuneError, match="no description of GPU"):
        nvidia.nvidia_topk(mm(4096, 4096, 4096, hw=mystery), odd_names_space(), 1)
    with pytest.raises(AbductuneError, match="covers matmuls"):
        nvidia.nvidia_topk(row, odd_names_space(), 1)


def test_gpu_and_precision_mapping(nv):
    for table, member in [("H100-SXM", "H100_SXM"), ("H200", "H200_SXM"), ("A100-SXM", "A100_SXM_80GB"),
                          ("L40S", "L40S"), ("H100-PCIe", "H100_PCIE")]:
        assert nvidia.gpu_enum_name(lookup(table)) == member
    assert nvidia.gpu_enum_name(HardwareInfo("L4")) == "L4"  # a name spelling a model GPU
    assert nvidia.gpu_enum_name(lookup("A100-SXM-40GB")) is None
    assert nvidia.precision_string(mm(64, 64, 64)) == "HSH"
    assert nvidia.precision_string(mm(64, 64, 64, dtype="bf16")) == "TST"
    fp8 = Problem(kernel="f8", kernel_class="quantized_matmul", dims={"M": 64, "N": 64, "K": 64},
                  dtypes={"x": "fp8", "w": "fp8", "x_scale": "fp32", "w_scale": "fp32", "y": "bf16"})
    assert nvidia.precision_string(fp8) == "QQTST"
    i8 = Problem(kernel="i8", kernel_class="quantized_matmul", dims={"M": 64, "N": 64, "K": 64},
                 dtypes={"a": "int8", "b": "int8", "a_scale": "fp32", "b_scale": "fp32", "c": "fp16"})
    assert nvidia.precision_string(i8) == "BII"
    w4 = Problem(kernel="w4", kernel_class="quantized_matmul", dims={"M": 64, "N": 64, "K": 64},
                 dtypes={"a": "fp16", "b": "uint4", "b_scale": "fp16", "c": "fp16"})
    assert nvidia.precision_string(w4) == "HSH"  # weight-only: the 16-bit GEMM
    fp4 = Problem(kernel="f4", kernel_class="quantized_matmul", dims={"M": 64, "N": 64, "K": 64},
                  dtypes={"a": "mxfp4", "b": "mxfp4", "c": "bf16"})
    assert nvidia.precision_string(fp4) is None
    assert not REGISTRY.get(nvidia.NAME).is_eligible(Problem(**{**fp4.__dict__, "hardware": H100}), H100)
    assert nvidia.layout_name(mm(64, 64, 64)) == "NN_ROW_MAJOR"
    assert nvidia.layout_name(mm(64, 64, 64), layout="NT") == "NT_ROW_MAJOR"


def test_precision_reads_pointer_names_as_the_cost_model_does():
    """Pure name reading (no model needed): `c_ptr` is the output and `a_scale_ptr` a side input,
    the names `costs` reads a product's operands by; an fp32 output on fp16 operands is HSS."""
    from abductune import costs

    p = Problem(kernel="p", kernel_class="matmul", dims={"M": 64, "N": 64, "K": 64},
                dtypes={"a_ptr": "fp16", "b_ptr": "fp16", "c_ptr": "fp32"})
    assert nvidia.precision_string(p) == "HSS"
    q = Problem(kernel="q", kernel_class="quantized_matmul", dims={"M": 64, "N": 64, "K": 64},
                dtypes={"out_ptr": "bf16", "a_ptr": "fp8", "a_scale_ptr": "fp32", "b_ptr": "fp8",
                        "b_scale_ptr": "fp32"})
    assert nvidia.precision_string(q) == "QQTST"
    assert costs.product_operand_bytes(q.dtypes) == (1.0, 1.0)


# ------------------------------------------------------------------------ top-1 and top-k

def test_top1_is_valid_in_every_bundled_matmul_space(nv):
    paths = bundled_datasets(kernel="matmul_fp16")
    assert paths
    for p in paths:
        o = observation_from_dataset(read_dataset(p))
        top = nv.nvidia_topk(o.problem, o.space, 1)
        assert len(top) == 1, o.name
        assert o.space.is_valid(top[0]), (o.name, top[0])
        t = o.time_of(top[0])
        assert t is not None and t < float("inf"), (o.name, top[0])  # recorded, and it ran
        assert top.precision == "HSH" and top.gpu == "H100_SXM" and top.layout == "NN_ROW_MAJOR"


def test_tiles_map_by_role_not_by_name(nv):
    pb = bundled_matmul().problem  # 4096^3 fp16 on the H100
    space = odd_names_space()
    top = nv.nvidia_topk(pb, space, 1)
    assert len(top) == 1 and space.is_valid(top[0])
    first = next(f for f in top.fired if f["status"] == "seed")
    model = first["model"]
    cfg = top[0]
    # the model's CTA tile, stages (clamped into 1..6) and warps landed on the roles' parameters
    assert (cfg["rows_per_cta"], cfg["cols_per_cta"], cfg["depth"]) == tuple(model["cta"])
    assert cfg["lanes"] == model["warps"]
    assert cfg["pipe"] == min(6, model["stages"])
    assert cfg["band"] == space["band"].clamp(model["swizzle"])
    # with a split:K parameter the model may use it; without one it is told there is none
    split_space = odd_names_space(split=True)
    small = mm(128, 128, 16384)
    with_split = nv.nvidia_topk(small, split_space, 4)
    assert all(split_space.is_valid(c) for c in with_split)
    assert all(c["kparts"] == split_space["kparts"].clamp(f["model"]["split_k"])
               for c, f in zip(with_split, [f for f in with_split.fired if f["status"] == "seed"]))
    without = nv.nvidia_topk(small, space, 4)
    assert all(f["model"]["split_k"] == 1 for f in without.fired if f["model"]["pass"] == "expressible")


def test_topk_gives_k_distinct_valid_configs_and_says_what_it_dropped(nv):
    o = bundled_matmul()
    for k in (1, 4, 8):
        top = nv.nvidia_topk(o.problem, o.space, k)
        assert len(top) == k
        assert len({o.space.key(c) for c in top}) == k
        assert all(o.space.is_valid(c) for c in top)
        assert all(o.time_of(c) is not None for c in top)
        assert [f["config"] for f in top.fired if f["status"] == "seed"] == list(top)
        assert {f["status"] for f in top.fired} <= {"seed", "duplicate", "invalid"}
    # the resource model shrinks what it can (and says so) ...
    small_smem = HardwareInfo("H100-SXM", "nvidia", (9, 0), 132, 16 * 1024, 16 * 1024)
    pb = Problem(**{**o.problem.__dict__, "hardware": small_smem})
    top = nv.nvidia_topk(pb, o.space, 2, hardware=H100)
    assert top and all(o.space.is_valid(c) for c in top)
    assert any("resource model" in f["reason"] for f in top.fired if f["status"] == "seed")
    # ... and drops, with the reason, what nothing in the space can rescue
    big_only = Space([Pow2("BM", 128, 256, role="tile:M"), Pow2("BN", 128, 256, role="tile:N"),
                      Pow2("BK", 64, 128, role="tile:K"), Choice("num_warps", [4, 8], role="warps"),
                      Choice("num_stages", [2, 3], role="stages")])
    top = nv.nvidia_topk(pb, big_only, 4, hardware=H100)
    assert len(top) == 0 and top.fired
    assert all(f["status"] == "invalid" and "resource model" in f["reason"] for f in top.fired)


def test_seeding_lists_the_nvidia_heuristic_in_fired(nv):
    o = bundled_matmul("M2048_N14336_K4096")
    rep = seed_configs(o.problem, o.space, o.problem.hardware)
    st = {f["name"]: f for f in rep.fired}
    assert st[nvidia.NAME]["status"] == "seed"
    assert st[nvidia.NAME]["source"] == "registry"
    cfg = st[nvidia.NAME]["config"]
    assert o.space.is_valid(cfg) and cfg in rep.configs or st[nvidia.NAME].get("duplicate_of")
    assert cfg == nv.nvidia_topk(o.problem, o.space, 1)[0]
    # a row kernel: listed, ineligible
    row = Problem(kernel="softmax", kernel_class="row_reduction", dims={"rows": 4096, "cols": 4096},
                  dtypes={"x": "fp16", "y": "fp16"}, hardware=H100)
    rs = Space([Pow2("BLOCK", 64, 8192, role="tile:R"), Choice("num_warps", [1, 2, 4, 8, 16], role="warps")])
    st = {f["name"]: f for f in seed_configs(row, rs, H100).fired}
    assert st[nvidia.NAME]["status"] == "ineligible"


# ------------------------------------------------------------------------ without the package

def test_missing_package_error_and_quiet_seeding(hidden, caplog):
    assert not hidden.available()
    o = bundled_matmul()
    with pytest.raises(AbductuneError) as e:
        hidden.nvidia_topk(o.problem, o.space, 8)
    assert str(e.value) == ("the NVIDIA matmul model needs nvidia-matmul-heuristics: "
                            "pip install 'abductune[nvidia]'")
    assert "\n" not in str(e.value)
    with caplog.at_level(logging.DEBUG):
        rep = seed_configs(o.problem, o.space, o.problem.hardware)
    st = {f["name"]: f for f in rep.fired}
    assert st[nvidia.NAME]["status"] == "ineligible"
    assert not [r for r in caplog.records if "nvidia" in r.getMessage().lower()]


def test_a_batched_matmul_is_asked_with_its_batch_size(nv, monkeypatch):
    # FlagGems' bmm (session 21): the model ranks tiles for one product unless told the batch
    asked = []
    real = nvidia._query

    def spy(*a, **k):
        asked.append(a[-1] if len(a) > 8 else k.get("batch", 1))
        return real(*a, **k)
    monkeypatch.setattr(nvidia, "_query", spy)
    h100 = lookup("H100-SXM")
    one = Problem("mm", "matmul", {"M": 512, "N": 512, "K": 128}, {"a": "bf16", "b": "bf16"}, hardware=h100)
    many = Problem("bmm", "matmul", {"batch": 32, "M": 512, "N": 512, "K": 128}, {"a": "bf16", "b": "bf16"},
                   hardware=h100)
    assert nvidia.batch_of(one) == 1 and nvidia.batch_of(many) == 32
    a, b = nvidia.model_configs(one, 4), nvidia.model_configs(many, 4)
    assert asked == [1, 32] and a and b
    # 16 tiles of 128 x 128 leave most of 132 SMs idle for one product, not for 32 of them
    assert [c.runtime_s for c in a] != [c.runtime_s for c in b]
