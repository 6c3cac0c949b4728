"""The decorator's in-process evaluator keeps each config's static facts (registers, spills,
shared memory) from the binary its launch ran, as a sweep's records do (issue 22: a dataset
recorded through `patch_triton` carries them too)."""
from __future__ import annotations

from types import SimpleNamespace

from abductune.measure.inprocess import InProcessEvaluator, Launch, static_facts
from abductune.problem import Problem
from abductune.space import Pow2, Space


def _evaluator(result):
    space = Space([Pow2("BLOCK", 16, 64, role="tile:N")])
    return InProcessEvaluator(Problem("k", dims={"N": 100}), space, lambda cfg: Launch(lambda: result),
                              lambda cfg, launch: 0.5)


def test_a_launch_returning_a_compiled_kernel_gives_its_facts():
    kernel = SimpleNamespace(n_regs=96, n_spills=3, metadata=SimpleNamespace(shared=16384))
    (m,) = _evaluator(kernel).evaluate([{"BLOCK": 32}])
    assert m.ok and m.time_ms == 0.5
    assert (m.registers, m.spills, m.smem_bytes) == (96, 12, 16384)  # spills: 4-byte words to bytes


def test_anything_else_gives_no_facts_and_no_error():
    for result in (None, 3, SimpleNamespace(n_regs=0), SimpleNamespace(n_regs="x")):
        (m,) = _evaluator(result).evaluate([{"BLOCK": 16}])
        assert m.ok and m.registers is None and m.smem_bytes is None
    assert static_facts(SimpleNamespace(n_regs=40)) == {"registers": 40, "spills": None, "smem_bytes": None}
