"""Replay evaluator: answers from a recorded dataset with a simulated clock.

The first evaluation of a config adds its recorded compile + benchmark seconds to the clock
(a failure costs what it cost when recorded, usually its compile time); repeats are free,
as they would be with a memoising tuner; a `remeasure` costs the benchmark seconds again. A
config absent from the dataset is `pruned`.

With a `NoiseModel`, every answer (first and re-measured) is the recorded time times a
log-normal factor drawn from the spread we measured on the H100 (the bundled noise study), so
the evidence logic meets realistic noise; the seed makes it reproducible.
"""
from __future__ import annotations

import json
import math
import random
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..datasets.format import Dataset
from ..errors import AbductuneError
from ..measurement import Measurement
from .base import Evaluator

NOISE_STUDY = Path(__file__).resolve().parent.parent / "datasets" / "data" / "h100" / "noise_matmul_fp16.json"


@dataclass(frozen=True)
class NoiseModel:
    """Multiplicative log-normal noise: time * exp(N(0, sigma)) per repeat."""

    sigma: float

    @classmethod
    def from_study(cls, path: str | Path = NOISE_STUDY) -> "NoiseModel":
        """sigma = pooled sd of log(median / mean of its repeats) over the study's configs."""
        try:
            rows = json.loads(Path(path).read_text())
            logs = [math.log(x / statistics.mean(r["medians_ms"])) for r in rows for x in r["medians_ms"]]
        except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError) as e:
            raise AbductuneError(f"cannot read the noise study {path}: {e}") from None
        return cls(statistics.pstdev(logs))

    def factor(self, rng: random.Random) -> float:
        return math.exp(rng.gauss(0.0, self.sigma)) if self.sigma > 0 else 1.0


class ReplayEvaluator(Evaluator):
    def __init__(self, dataset: Dataset, *, noise: NoiseModel | None = None, seed: int = 0):
        self.dataset = dataset
        self.space = dataset.space()
        self.problem = dataset.problem
        self.noise = noise
        self._rng = random.Random(seed)
        key = self.space.key
        table: dict[tuple, Measurement] = {}
        for m in dataset.records:
            if m.ok and m.frac_peak_flops is None and m.frac_peak_bw is None:
                ff, fb = self.problem.roofline(m.time_ms)  # the one roofline, as live computes it
                m = m.replace(frac_peak_flops=ff, frac_peak_bw=fb)
            table[key(m.config)] = m
        self._table = table
        self._seen: set[tuple] = set()
        self.clock = 0.0
        self.evaluations = 0

    def true_time(self, cfg: Mapping[str, Any]) -> float:
        """The recorded (noise-free) time of cfg; inf when it failed or is absent."""
        m = self._table.get(self.space.key(cfg))
        return m.objective if m is not None else math.inf

    def _answer(self, m: Measurement) -> Measurement:
        if self.noise is None or not m.ok:
            return m
        f = self.noise.factor(self._rng)
        ff, fb = self.problem.roofline(m.time_ms * f)
        return m.replace(time_ms=m.time_ms * f, samples_ms=(m.time_ms * f,), frac_peak_flops=ff,
                         frac_peak_bw=fb, extra={**m.extra, "true_ms": m.time_ms})

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        out = []
        for cfg in configs:
            k = self.space.key(cfg)
            m = self._table.get(k)
            if m is None:
                out.append(Measurement(dict(cfg), "pruned", error="config not in the recorded dataset"))
                continue
            if k not in self._seen:
                self._seen.add(k)
                self.clock += m.cost_s
                self.evaluations += 1
            out.append(self._answer(m))
        return out

    def remeasure(self, configs: Sequence[Mapping[str, Any]], *, rounds: int = 1) -> list[Measurement]:
        out = []
        for cfg in configs:
            m = self._table.get(self.space.key(cfg))
            if m is None:
                out.append(Measurement(dict(cfg), "pruned", error="config not in the recorded dataset"))
                continue
            self.clock += m.bench_s * rounds
            if self.noise is None or not m.ok:
                out.append(m)
                continue
            # `rounds` interleaved repeats: their median is what a run-off would see
            ts = sorted(m.time_ms * self.noise.factor(self._rng) for _ in range(max(1, rounds)))
            t = statistics.median(ts)
            ff, fb = self.problem.roofline(t)
            out.append(m.replace(time_ms=t, samples_ms=tuple(ts), frac_peak_flops=ff, frac_peak_bw=fb,
                                 extra={**m.extra, "true_ms": m.time_ms}))
        return out

    vendor_name = "torch"

    def vendor_baseline(self) -> Measurement:
        """The vendor implementation's recorded time (torch / cuBLAS), as a measurement of the
        pseudo-config {"impl": "torch"}."""
        t = self.dataset.baselines.get("torch_ms")
        if t is None:
            return Measurement({"impl": "torch"}, "pruned", error="no torch baseline in the dataset")
        return Measurement({"impl": "torch"}, "ok", time_ms=float(t))

    def reset(self) -> None:
        self._seen.clear()
        self.clock = 0.0
        self.evaluations = 0
