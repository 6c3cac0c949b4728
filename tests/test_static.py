"""Compile-only evaluation for sm_90 on a CPU: static facts, pruning, errors, workers, timeouts."""
from __future__ import annotations

import dataclasses
import os

import pytest

pytest.importorskip("triton")
pytest.importorskip("triton.backends.nvidia")

import abductune.kernels as K  # noqa: E402
from abductune.hardware import KNOWN_GPUS  # noqa: E402
from abductune.kernels.matmul import MatmulSpec  # noqa: E402
from abductune.measure.static import StaticEvaluator, compile_one, parse_ptxas_log  # noqa: E402

SPEC = K.get("matmul_fp16")
PROBLEM = SPEC.problem({"M": 1024, "N": 1024, "K": 1024})
SMALL = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, num_warps=4)  # compiles in well under a second


def test_parse_ptxas_log():
    log = ("ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
           "ptxas info    : Function properties for k\n"
           "    96 bytes stack frame, 120 bytes spill stores, 88 bytes spill loads\n"
           "ptxas info    : Used 255 registers, used 1 barriers, 1024 bytes smem, 400 bytes cmem[0]\n")
    assert parse_ptxas_log(log) == {"registers": 255, "spill_stores": 120, "spill_loads": 88,
                                    "stack_bytes": 96, "static_smem": 1024}
    assert parse_ptxas_log("nothing here")["registers"] is None


def test_registers_and_smem_grow_with_stages():
    r2 = compile_one("matmul_fp16", {**SMALL, "num_stages": 2}, PROBLEM.to_dict())
    r4 = compile_one("matmul_fp16", {**SMALL, "num_stages": 4}, PROBLEM.to_dict())
    for r in (r2, r4):
        assert r["status"] == "ok", r["error"]
        assert 0 < r["registers"] <= 255
        assert r["spills"] == 0 and r["compile_s"] > 0 and r["hardware"] == "H100-SXM"
    assert 0 < r2["smem_bytes"] < r4["smem_bytes"]
    # each extra stage buffers one more 64x32 A tile and 32x64 B tile of fp16
    assert r4["smem_bytes"] - r2["smem_bytes"] >= 2 * (64 * 32 + 32 * 64) * 2 - 1024


def test_shared_memory_over_the_limit_is_pruned():
    # BLOCK_K=256 lies outside the space (whose smem constraint would forbid this); 5 stages of
    # 64x256 + 256x64 fp16 tiles need ~320 KB, more than H100's 227 KB per block
    big = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=256, GROUP_M=8, num_warps=4, num_stages=5)
    r = compile_one("matmul_fp16", big, PROBLEM.to_dict())
    assert r["status"] == "pruned"
    assert r["smem_bytes"] > KNOWN_GPUS["H100-SXM"].smem_per_block
    assert "shared memory" in r["error"] and "H100-SXM" in r["error"]


def test_limits_come_from_the_problem_hardware():
    tiny = dataclasses.replace(KNOWN_GPUS["H100-SXM"], name="tiny-smem", smem_per_block=16 * 1024)
    problem = SPEC.problem({"M": 1024, "N": 1024, "K": 1024}, hardware=tiny)
    r = compile_one("matmul_fp16", {**SMALL, "num_stages": 3}, problem.to_dict())
    assert r["status"] == "pruned" and "tiny-smem" in r["error"] and r["smem_bytes"] > 16 * 1024
    few_regs = dataclasses.replace(KNOWN_GPUS["H100-SXM"], name="few-regs", regs_per_sm=4096)
    r = compile_one("matmul_fp16", {**SMALL, "num_stages": 3},
                    SPEC.problem({"M": 1024, "N": 1024, "K": 1024}, hardware=few_regs).to_dict())
    assert r["status"] == "pruned" and "registers" in r["error"]


def test_compile_error_is_captured_not_raised():
    # tl.dot needs K >= 16 per tile for fp16 operands
    r = compile_one("matmul_fp16", {**SMALL, "BLOCK_K": 8, "num_stages": 3}, PROBLEM.to_dict())
    assert r["status"] == "compile_error"
    assert "CompilationError" in r["error"] and "K >= 16" in r["error"]
    assert r["registers"] is None and r["smem_bytes"] is None
    bad_key = compile_one("matmul_fp16", {**SMALL, "num_stages": 3, "BLOCK_Z": 4}, PROBLEM.to_dict())
    assert bad_key["status"] == "compile_error" and "BLOCK_Z" in bad_key["error"]


def test_evaluator_keeps_order_and_records_failures():
    configs = [{**SMALL, "num_stages": 2}, {**SMALL, "BLOCK_K": 8, "num_stages": 3}, {**SMALL, "num_stages": 4}]
    with StaticEvaluator("matmul_fp16", PROBLEM, workers=2, timeout_s=120) as ev:
        ms = ev.evaluate(configs)
        assert [m.config for m in ms] == configs
        assert [m.status for m in ms] == ["ok", "compile_error", "ok"]
        assert all(m.time_ms is None for m in ms)
        assert ms[0].registers > 0 and 0 < ms[0].smem_bytes < ms[2].smem_bytes
        assert "K >= 16" in ms[1].error
        assert ev.clock > 0 and ms[0].extra["arch"] == "sm_90"
        first_clock = ev.clock
        kept, pruned = ev.prune(configs)
        assert kept == [configs[0], configs[2]]
        assert [m.status for m in pruned] == ["compile_error"]
        assert ev.clock > first_clock


class CrashingMatmul(MatmulSpec):
    """Kills its compiler process for BLOCK_M=32, like a segfault inside MLIR or ptxas would."""

    def __init__(self):
        super().__init__("fp16")
        self.name = "crashing_matmul"

    def compile_spec(self, config, problem):
        if config["BLOCK_M"] == 32:
            os._exit(3)
        return super().compile_spec(config, problem)


def test_a_crashing_compile_is_isolated_and_recorded():
    spec = CrashingMatmul()
    configs = [{**SMALL, "num_stages": 2}, {**SMALL, "BLOCK_M": 32, "num_stages": 2}, {**SMALL, "num_stages": 3}]
    with StaticEvaluator(spec, spec.problem({"M": 512, "N": 512, "K": 512}), workers=2, timeout_s=120) as ev:
        ms = ev.evaluate(configs)
    assert [m.status for m in ms] == ["ok", "compile_error", "ok"]
    assert "crashed" in ms[1].error


def test_a_compile_past_the_timeout_is_recorded_and_the_rest_go_on(tmp_path, monkeypatch):
    # a fresh Triton cache, so the slow config really compiles (~5 s: 256x256 tiles on 4 warps
    # spill heavily) instead of coming from an earlier run's cache
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    slow = dict(BLOCK_M=256, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=2)
    fast = {**SMALL, "num_stages": 2}
    with StaticEvaluator("matmul_fp16", PROBLEM, workers=2, timeout_s=30) as ev:
        ev.evaluate([fast])  # start the workers so their start-up is not charged to the deadline
        ev.timeout_s = 1.5
        ms = ev.evaluate([slow, fast])
    assert [m.status for m in ms] == ["timeout", "ok"]
    assert 1.5 <= ms[0].compile_s < 10 and "1.5" in ms[0].error
