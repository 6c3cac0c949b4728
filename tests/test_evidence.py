"""Evidence: noise thresholds from measured spread and repeats, verdicts, confirmation of close
calls, and per-theory tallies that cite measurement ids."""
from __future__ import annotations

import math

import pytest

from abductune.errors import AbductuneError
from abductune.measurement import Measurement
from abductune.space import Pow2, Space
from abductune.theory.evidence import NOISE_FLOOR, Ledger, Tally, sample_error

SPACE = Space([Pow2("BLOCK", 16, 256)])


def m(block: int, t: float | None, samples: tuple[float, ...] = (), id: int | None = None) -> Measurement:
    if t is None:
        return Measurement({"BLOCK": block}, "compile_error", id=id)
    return Measurement({"BLOCK": block}, "ok", time_ms=t, samples_ms=samples, id=id)


def cfg(block: int) -> dict:
    return {"BLOCK": block}


def test_sample_error_shrinks_with_more_samples_and_needs_two():
    few = m(16, 1.0, (0.95, 1.0, 1.05))
    many = m(16, 1.0, (0.95, 1.0, 1.05) * 10)
    assert sample_error(m(16, 1.0)) is None and sample_error(m(16, 1.0, (1.0,))) is None
    assert sample_error(few) > sample_error(many) > 0
    assert sample_error(m(16, None)) is None


def test_verdicts_against_the_floor_when_nothing_says_more():
    led = Ledger(SPACE.key)
    for b, t in [(16, 1.00), (32, 0.90), (64, 1.10), (128, 0.995), (256, None)]:
        led.observe(m(b, t))
    assert led.threshold(cfg(32), cfg(16)) == pytest.approx(NOISE_FLOOR)
    assert led.compare(cfg(32), cfg(16))[0] == "supported"
    assert led.compare(cfg(64), cfg(16))[0] == "refuted"
    assert led.compare(cfg(128), cfg(16))[0] == "close"
    assert led.compare(cfg(256), cfg(16))[0] == "failed"
    assert led.needs_confirmation(cfg(128), cfg(16))  # close and seemingly faster
    assert not led.needs_confirmation(cfg(16), cfg(128))  # close but slower: no reason to move


def test_threshold_grows_with_sample_spread_and_with_repeat_noise():
    quiet, loud = Ledger(SPACE.key), Ledger(SPACE.key)
    quiet.observe(m(16, 1.0, (0.999, 1.0, 1.001)))
    quiet.observe(m(32, 0.97, (0.969, 0.97, 0.971)))
    loud.observe(m(16, 1.0, (0.9, 1.0, 1.1)))
    loud.observe(m(32, 0.97, (0.87, 0.97, 1.07)))
    assert quiet.compare(cfg(32), cfg(16))[0] == "supported"
    assert loud.compare(cfg(32), cfg(16))[0] == "close"
    assert loud.threshold(cfg(32), cfg(16)) > quiet.threshold(cfg(32), cfg(16))
    # repeats that scatter by ~5% reveal run-to-run noise that one sample cannot show
    rep = Ledger(SPACE.key)
    rep.observe(m(16, 1.0))
    rep.observe(m(32, 0.95))
    assert rep.compare(cfg(32), cfg(16))[0] == "supported"
    rep.observe(m(16, 1.05))
    rep.observe(m(16, 0.95))
    assert rep.repeat_noise() == pytest.approx(0.05, rel=0.1)
    assert rep.compare(cfg(32), cfg(16))[0] == "close"


def test_pooled_estimate_and_deterministic_repeats():
    led = Ledger(SPACE.key)
    led.observe(m(16, 1.0))
    led.observe(m(32, 0.995))
    assert led.needs_confirmation(cfg(32), cfg(16)) and not led.deterministic
    led.observe(m(16, 1.0))
    led.observe(m(32, 0.995))  # re-measured: the very same times
    assert led.deterministic and led.times(cfg(32)) == 2
    assert not led.needs_confirmation(cfg(32), cfg(16))  # nothing to gain from a third look
    led.observe(m(32, 1.2))
    assert not led.deterministic
    assert led.estimate(cfg(32)) == pytest.approx(math.exp((2 * math.log(0.995) + math.log(1.2)) / 3))


def test_record_tallies_verdicts_with_measurement_ids_and_credibility():
    led = Ledger(SPACE.key)
    for b, t, i in [(16, 1.0, 1), (32, 0.8, 2), (64, 1.3, 3), (128, None, 4)]:
        led.observe(m(b, t, id=i))
    v1 = led.record("padding", cfg(32), cfg(16))
    v2 = led.record("padding", cfg(64), cfg(16))
    v3 = led.record("waves", cfg(128), cfg(16))
    assert (v1.outcome, v2.outcome, v3.outcome) == ("supported", "refuted", "failed")
    assert v1.ids == (2, 1) and v2.ids == (3, 1) and v3.ids == (4, 1)
    s = led.summary()
    assert s["padding"] == {"supported": 1, "refuted": 1, "neutral": 0, "support_ids": [1, 2], "refute_ids": [1, 3]}
    assert s["waves"]["refute_ids"] == [1, 4]
    assert led.credibility("padding") == pytest.approx(0.5)
    assert led.credibility("waves") < 0.5 < Tally(supported=2).credibility
    assert v1.to_dict()["ratio"] == pytest.approx(0.8)


def test_close_call_becomes_neutral_and_best_is_the_pooled_minimum():
    led = Ledger(SPACE.key)
    led.observe(m(16, 1.0))
    led.observe(m(32, 1.004))
    assert led.record("x", cfg(32), cfg(16)).outcome == "neutral"
    assert led.tallies["x"].neutral == 1
    assert led.best() == (cfg(16), pytest.approx(1.0))


def test_bad_settings_are_rejected():
    with pytest.raises(AbductuneError, match="floor"):
        Ledger(SPACE.key, floor=1.5)
    with pytest.raises(AbductuneError, match="confidence"):
        Ledger(SPACE.key, confidence=0)
