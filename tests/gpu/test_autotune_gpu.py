"""The decorator on a GPU (issue 9): with isolate=True a config that poisons its CUDA context
(illegal address) or hangs fails alone in the worker, the caller's own context stays usable,
and the winner runs correctly in the caller; without isolation the in-process path measures
with CUDA events and stores the winner for the next process. Run on a GPU machine:
pytest -m gpu tests/gpu"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).parent))  # the isolated worker imports the kernel module

import isolated_gpu_kernel as kmod  # noqa: E402

from abductune.store import Store  # noqa: E402


def test_isolated_worker_survives_an_illegal_address_and_a_hang(tmp_path: Path):
    store = tmp_path / "s.sqlite"
    k = kmod.make(store=store)
    n = 1 << 20
    x = torch.randn(n, device="cuda")
    y = torch.zeros(n, device="cuda")
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    kmod.copy(k, x, y, flag)
    torch.cuda.synchronize()  # the caller's context is healthy: no sticky error reached it
    assert torch.equal(y, x)
    [choice] = k.choices.values()
    assert choice.config["MODE"] == 0 and choice.source == "tuned"
    with Store(store) as s:
        rows = [m for m in s.measurements(s.runs()[0].context) if m.kind != "verify"]
    by = {(m.config["BLOCK"], m.config["MODE"]): m for m in rows}
    assert by[(256, 1)].status == "runtime_error", by[(256, 1)]
    assert by[(1024, 2)].status == "timeout", by[(1024, 2)]
    assert by[(512, 0)].ok and by[(1024, 0)].ok and by[(512, 0)].time_ms > 0
    # still usable afterwards, and a hit launches in this process
    y2 = torch.zeros(n, device="cuda")
    kmod.copy(k, x, y2, flag)
    assert torch.equal(y2, x) and torch.equal(x + 1, x + torch.ones_like(x))


def test_in_process_decorator_times_on_the_gpu_and_stores_the_winner(tmp_path: Path):
    store = tmp_path / "s.sqlite"
    safe = [c for c in kmod.CONFIGS if c.kwargs["MODE"] == 0]
    import abductune

    k = abductune.autotune(configs=safe, key=["n"], reference=kmod.reference, store=store)(kmod.copy_kernel)
    n = 1 << 22
    x = torch.randn(n, device="cuda")
    y = torch.zeros(n, device="cuda")
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    kmod.copy(k, x, y, flag)
    assert torch.equal(y, x) and k.stats["evaluations"] == len(safe)
    with Store(store) as s:
        rows = [m for m in s.measurements(s.runs()[0].context) if m.kind != "verify"]
    assert {m.config["BLOCK"] for m in rows} == {512, 1024} and all(m.ok and 0 < m.time_ms < 10 for m in rows)
    k2 = abductune.autotune(configs=safe, key=["n"], reference=kmod.reference, store=store)(kmod.copy_kernel)
    kmod.copy(k2, x, torch.zeros_like(y), flag)
    assert k2.stats["evaluations"] == 0 and k2.stats["store_hits"] == 1
