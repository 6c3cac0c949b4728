"""`autotune.evaluation.ListCheck` on tensors the kernels of the zoo pass: fp8 operands (torch has
no isfinite, equal or arithmetic for them; a FlagGems fp8 recording on the H200 stopped at the
first config beyond the list on that) are compared in fp32, and a tensor the check cannot compare
turns the check off with a warning instead of failing the tune."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from abductune.autotune.evaluation import ListCheck, _differs  # noqa: E402
from abductune.measure.inprocess import Launch  # noqa: E402

FP8 = getattr(torch, "float8_e4m3fn", None)
needs_fp8 = pytest.mark.skipif(FP8 is None, reason="this torch has no float8_e4m3fn")


@needs_fp8
def test_fp8_tensors_are_compared_in_fp32():
    a = torch.randn(8, 16).to(FP8)
    assert _differs("a", a.clone(), a, None) is None
    b = (a.float() * 1.5).to(FP8)
    why = _differs("a", b, a, None)
    assert why is not None and why.startswith("a: relative error")
    nan = a.float()
    nan[0, 0] = float("nan")
    assert "non-finite" in _differs("a", a, nan.to(FP8), None)


def _check(tensors: dict, write) -> ListCheck:
    first = {"BLOCK": 64}
    return ListCheck(first, lambda c: c != first, lambda c: Launch(lambda: write(c)), lambda: tensors, None, "k")


@needs_fp8
def test_a_config_beyond_the_list_is_judged_with_fp8_operands_among_the_tensors():
    """An fp8 matmul's call: fp8 operands, a bf16 output; a config beyond the list that scales
    the output wrongly is caught, one that computes the same is not."""
    a = torch.randn(16, 32).to(FP8)
    b = torch.randn(32, 8).to(FP8)
    out = torch.zeros(16, 8, dtype=torch.bfloat16)
    scale = {64: 1.0, 128: 1.0, 256: 1.25}

    def write(c):
        out.copy_((a.float() @ b.float() * scale[c["BLOCK"]]).to(torch.bfloat16))
    check = _check({"a": a, "b": b, "out": out}, write)
    check.prepare()
    assert check.off is None and set(check.expected) == {"a", "b", "out"}
    for block, wrong in ((128, False), (256, True)):
        write({"BLOCK": block})
        why = check({"BLOCK": block})
        assert (why is not None) == wrong, why
    assert "out: relative error" in check({"BLOCK": 256})


def test_a_tensor_that_cannot_be_compared_turns_the_check_off_not_the_tune(monkeypatch, caplog):
    out = torch.zeros(4)

    def write(c):
        out.fill_(1.0)
    import abductune.autotune.evaluation as ev

    def broken(*a, **k):
        raise NotImplementedError("no comparison for this dtype")
    monkeypatch.setattr(ev, "_differs", broken)
    check = _check({"out": out}, write)
    with caplog.at_level("WARNING", logger="abductune"):
        check.prepare()
    assert check.off is not None and "could not be compared" in check.off and "NotImplementedError" in check.off
    assert check({"BLOCK": 128}) is None  # nothing checked, nothing raised
    assert any("not checked against the kernel's own config" in m for m in caplog.messages)
