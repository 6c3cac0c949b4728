"""GPUs the table does not list (hardware.from_properties, local_hardware): a board abductune
has never seen still gets limits, peaks and a family, so the resource model, the roofline and
the theories work on it; the boards added to the table are found by their driver names."""
from __future__ import annotations

import sys
import types

import pytest

from abductune import hardware
from abductune.hardware import KNOWN_GPUS, candidates, estimated_peaks, from_properties
from abductune.measurement import Measurement
from abductune.problem import Problem
from abductune.space import Choice, Pow2, Space
from abductune.theory import resources
from abductune.theory.diagnose import diagnose


@pytest.mark.parametrize("driver,entry", [
    ("NVIDIA L4", "L4"), ("NVIDIA A10", "A10"), ("Tesla T4", "T4"), ("NVIDIA H100 NVL", "H100-NVL"),
    ("NVIDIA H20", "H20"), ("NVIDIA L40", "L40"), ("NVIDIA L40S", "L40S"), ("NVIDIA A40", "A40"),
    ("NVIDIA H200", "H200"), ("NVIDIA H100 80GB HBM3", "H100-SXM"), ("AMD Instinct MI325X", "MI325X"),
    ("AMD Instinct MI210", "MI210"),
])
def test_driver_names_of_listed_boards(driver, entry):
    assert candidates(driver) == (entry,)


@pytest.mark.parametrize("driver", ["NVIDIA A10G", "NVIDIA GH200 480GB", "NVIDIA GeForce RTX 5090",
                                    "NVIDIA H800"])
def test_boards_that_only_look_like_listed_ones_are_not_taken_for_them(driver):
    # an A10G is not an A10, a GH200 is not an H200: each is left to its own properties
    assert candidates(driver) == ()


# boost clocks (MHz) from the boards' public specifications; GeForce boards run fp16 inputs with
# FP32 accumulation at half rate
BOOST = {"A100-SXM": 1410, "V100-SXM2": 1530, "L40S": 2520, "RTX 3090": 1695, "RTX 4090": 2520,
         "RTX 2080 Ti": 1545, "TITAN RTX": 1770, "RTX A6000": 1800, "L4": 2040, "A10": 1695,
         "T4": 1590, "A40": 1740, "H100-SXM": 1980, "B200": 1965}


@pytest.mark.parametrize("name", sorted(BOOST))
def test_estimated_peaks_agree_with_the_datasheets(name):
    h = KNOWN_GPUS[name]
    est = estimated_peaks(h.compute_capability, h.sms, BOOST[name] * 1e6,
                          geforce=name.startswith(("RTX 3", "RTX 4", "RTX 2")))
    for dtype, peak in h.peak_flops.items():
        if dtype in est:
            assert est[dtype] / peak == pytest.approx(1.0, abs=0.10), dtype


def test_no_estimate_without_an_architecture_or_a_clock():
    assert estimated_peaks((3, 0), 10, 1e9) == {}
    assert estimated_peaks((9, 0), 132, 0) == {}


def test_an_unlisted_board_gets_its_reported_limits_peaks_and_bandwidth():
    # an A10G as CUDA reports it: 80 SMs of sm_86, 1710 MHz, 6251 MHz GDDR6 on a 384-bit bus
    h = from_properties("NVIDIA A10G", (8, 6), 80, sm_clock_khz=1_710_000, mem_clock_khz=6_251_000,
                        mem_bus_bits=384, l2_bytes=6 << 20, smem_per_block=101_376)
    assert h.name == "NVIDIA A10G" and h.family == "ampere" and h.sms == 80
    assert h.smem_per_block == 101_376 and h.smem_per_sm == 100 * 1024  # the latter from sm_86's table
    assert h.max_threads_per_sm == 1536 and h.max_blocks_per_sm == 16
    assert h.mem_bandwidth == pytest.approx(600e9, rel=0.01)
    assert h.peak("bf16") == pytest.approx(80 * 1.71e9 * 1024) and "fp8" not in h.peak_flops


def test_a_listed_board_is_its_entry_with_the_sms_it_reports():
    h = from_properties("NVIDIA H100 80GB HBM3", (9, 0), 114)  # a cut-down part or a MIG slice
    assert h.name == "H100-SXM" and h.sms == 114 and h.peak("fp16") == KNOWN_GPUS["H100-SXM"].peak("fp16")


@pytest.mark.parametrize("entry,arch,clock_mhz", [("MI300X", "gfx942:sramecc+:xnack-", 2100),
                                                  ("MI250X", "gfx90a:sramecc+:xnack-", 1700),
                                                  ("MI210", "gfx90a", 1700)])
def test_an_unlisted_amd_board_gets_its_family_lds_and_cdna_peaks(entry, arch, clock_mhz):
    """A CDNA board under a name the table does not hold (a future part of a known architecture):
    its peaks from CUs x clock x the family's matrix rate per CU reproduce the listed board's."""
    t = KNOWN_GPUS[entry]
    h = from_properties(f"AMD board {arch}", (9, 4), t.sms, vendor="amd", arch_name=arch,
                        sm_clock_khz=clock_mhz * 1000)
    assert h.family == t.family and h.warp_size == 64 and h.smem_per_block == 64 * 1024
    for dtype, peak in t.peak_flops.items():
        assert h.peak_flops[dtype] / peak == pytest.approx(1.0, abs=0.01), dtype


def test_an_amd_board_of_an_architecture_without_rates_gets_no_guessed_peaks():
    h = from_properties("AMD board gfx950", (9, 5), 256, vendor="amd", arch_name="gfx950", sm_clock_khz=2400000)
    assert h.family == "cdna4" and not h.peak_flops and h.smem_per_block == 64 * 1024


def _matmul(hw):
    sp = Space([Pow2("BM", 16, 256), Pow2("BN", 16, 256), Pow2("BK", 16, 256),
                Choice("num_warps", [4, 8]), Choice("num_stages", [2, 3, 4, 5])])
    p = Problem("mm", "matmul", {"M": 4096, "N": 4096, "K": 4096}, {"a": "fp16", "b": "fp16", "c": "fp16"},
                flops=2.0 * 4096 ** 3, min_bytes=3 * 2.0 * 4096 ** 2, hardware=hw)
    return p, sp


def test_diagnosis_and_the_resource_model_work_on_an_unlisted_board():
    """An H100 under a name the table does not know, as its properties describe it: the roofline
    places a measurement as it does on the listed H100, and the resource model refuses a config
    that needs more shared memory than a block may have. Before, such a board was a bare name:
    bound "unknown", nothing pruned."""
    unlisted = from_properties("NVIDIA H100 engineering sample", (9, 0), 132, sm_clock_khz=1_980_000,
                               mem_clock_khz=2_619_000, mem_bus_bits=5120, smem_per_block=232_448,
                               smem_per_sm=233_472)
    p, sp = _matmul(unlisted)
    cfg = {"BM": 128, "BN": 128, "BK": 64, "num_warps": 8, "num_stages": 3}
    m = Measurement(cfg, "ok", time_ms=0.25)  # 550 TFLOP/s: most of either board's fp16 roof
    d = diagnose(m, p, sp)
    ref = diagnose(m, *_matmul(KNOWN_GPUS["H100-SXM"]))
    assert d.bound == ref.bound == "compute"
    assert d.frac_peak_flops == pytest.approx(ref.frac_peak_flops, rel=0.1)
    big = {"BM": 256, "BN": 256, "BK": 128, "num_warps": 8, "num_stages": 4}
    assert "shared memory" in resources.infeasible(p, sp, big)


def test_local_hardware_reads_an_unlisted_device(monkeypatch):
    props = types.SimpleNamespace(
        name="NVIDIA Future GPU", major=9, minor=0, multi_processor_count=100,
        gcnArchName="NVIDIA Future GPU",  # torch on CUDA fills it too (seen on the H100 with torch 2.11)
        shared_memory_per_block_optin=200_000, shared_memory_per_multiprocessor=210_000,
        regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, warp_size=32,
        L2_cache_size=40 << 20, clock_rate=1_500_000, memory_clock_rate=2_000_000, memory_bus_width=4096)
    cuda = types.SimpleNamespace(is_available=lambda: True, current_device=lambda: 0,
                                 get_device_properties=lambda i: props)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda, version=types.SimpleNamespace(
        cuda="13.0", hip=None)))
    monkeypatch.setitem(sys.modules, "triton", types.SimpleNamespace())  # no driver: torch's alone
    h = hardware.local_hardware()
    assert h.name == "NVIDIA Future GPU" and h.sms == 100 and h.smem_per_block == 200_000
    assert h.mem_bandwidth == pytest.approx(2e9 * 2 * 512) and h.l2_bytes == 40 << 20
    assert h.peak("fp16") == pytest.approx(100 * 1.5e9 * 4096) and h.family == "hopper"
