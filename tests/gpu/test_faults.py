"""GPU fault tests: a hang, an illegal address, a compile error, an out-of-resources config and
a wrong result in one run. Run on a GPU machine: pytest -m gpu tests/gpu"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).parent))  # spawn workers inherit sys.path

from abductune import kernels  # noqa: E402
from abductune.measure.live import LiveEvaluator  # noqa: E402

NAME = "faulty_kernel:FaultySpec"


def cfg(mode: int, block: int = 256) -> dict:
    return {"BLOCK": block, "MODE": mode, "num_warps": 4, "num_stages": 1}


def test_every_fault_gets_its_status_and_the_run_goes_on():
    spec = kernels.get(NAME)
    ev = LiveEvaluator(spec, spec.problem({"n": 1 << 20}), compile_workers=4, bench_timeout_s=20)
    try:
        configs = [cfg(0), cfg(1), cfg(0, 512), cfg(2), cfg(0, 1024), cfg(3), cfg(4), cfg(5), cfg(0, 128)]
        ms = ev.evaluate(configs)
        statuses = [m.status for m in ms]
        print(statuses, [m.error[:120] for m in ms])
        assert len(ms) == len(configs)
        assert statuses == ["ok", "timeout", "ok", "runtime_error", "ok", "compile_error",
                            "resource_error", "wrong_result", "ok"]
        assert all(m.time_ms and m.time_ms > 0 for m in ms if m.status == "ok")
        assert "illegal" in ms[3].error.lower() or "died" in ms[3].error
        assert ev.worker.restarts >= 2  # after the hang and after the sticky error
    finally:
        ev.close()
