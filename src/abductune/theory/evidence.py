"""Evidence: did a tested hypothesis hold, and how sure are we?

A hypothesis predicts that its config beats the incumbent. The test compares the two measured
times against a noise threshold:

  - supported: the candidate is faster by more than the threshold;
  - refuted:   it is slower by more than the threshold, or it failed (compile, launch, ...);
  - close:     within the threshold either way. A close call the candidate seems to win is
               confirmed by an interleaved re-measurement of both before the incumbent changes
               (the engine asks for it; this module only says when it is needed) -- unless
               earlier re-measurements reproduced their times exactly (a deterministic
               evaluator: a replay without noise), when a faster time is simply faster.
               While nothing says how noisy the times are (one sample each, no repeats yet),
               every apparent win is confirmed this way, which also measures the noise.

The threshold is `confidence` standard errors of the log-time difference, never below `floor`.
Each config's standard error is the larger of what its own samples say (robust spread of the
samples over sqrt(n), the standard error of a median) and what repeats say: when a config has
been measured more than once, the pooled scatter of repeats around their config's mean is the
run-to-run noise, which sample spread within one run underestimates. Estimates pool every
observation of a config (log-mean), so a re-measured config is known better than a fresh one.

`Ledger` keeps, per theory, support / refute / neutral counts and the measurement ids behind
each verdict, so `explain` can cite what confirmed what; `set_priors` starts the credibility
of each theory from the verdicts of earlier runs on problems of the same class and hardware
(the Session reads them from the store), scaled to a few tests' worth. Pure bookkeeping:
nothing here measures.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..errors import AbductuneError
from ..measurement import Measurement

NOISE_FLOOR = 0.01  # below 1% a GPU timing difference is not trusted (as Session judges)
NOISE_CAP = 0.25  # a threshold above 25% would call every real difference a tie
CONFIDENCE = 2.0  # standard errors of the difference that make a verdict
MEDIAN_SE = 1.2533  # standard error of a median = 1.2533 sd / sqrt(n) (normal samples)
MAD_SD = 1.4826  # sd = 1.4826 x median absolute deviation (normal samples)

OUTCOMES = ("supported", "refuted", "neutral", "failed")


def sample_error(m: Measurement) -> float | None:
    """Relative standard error of `m`'s median time from its own samples (robust: MAD-based);
    None when it has fewer than 2 samples or no time."""
    if not m.ok or len(m.samples_ms) < 2:
        return None
    med = statistics.median(m.samples_ms)
    if med <= 0:
        return None
    mad = statistics.median(abs(s - med) for s in m.samples_ms)
    sd = MAD_SD * mad / med
    if sd == 0.0:  # half the samples identical: fall back to the plain spread
        sd = (m.spread or 0.0) / 4
    return MEDIAN_SE * sd / math.sqrt(len(m.samples_ms))


@dataclass
class _Observed:
    """Every successful time seen for one config (logs), and the measurements themselves."""

    logs: list[float] = field(default_factory=list)
    sample_se: list[float] = field(default_factory=list)
    rows: list[Measurement] = field(default_factory=list)
    failed: bool = False

    @property
    def mean(self) -> float:
        return statistics.fmean(self.logs) if self.logs else math.inf


@dataclass(frozen=True)
class Verdict:
    """The outcome of testing one hypothesis: `candidate` against `incumbent`."""

    theory: str
    outcome: str  # one of OUTCOMES
    candidate: dict[str, Any] = field(hash=False)
    incumbent: dict[str, Any] = field(hash=False)
    ratio: float  # candidate time / incumbent time (pooled estimates); inf when it failed
    threshold: float  # relative noise threshold the ratio was judged against
    confirmed: bool = False  # decided after an interleaved re-measurement
    ids: tuple[int, ...] = ()  # the measurements (candidate's, then incumbent's) it rests on

    @property
    def supports(self) -> bool:
        return self.outcome == "supported"

    def to_dict(self) -> dict[str, Any]:
        return {"theory": self.theory, "outcome": self.outcome, "candidate": self.candidate,
                "incumbent": self.incumbent, "ratio": self.ratio, "threshold": self.threshold,
                "confirmed": self.confirmed, "ids": list(self.ids)}


@dataclass
class Tally:
    """Per theory: how often its predictions held, and the measurement ids behind each count."""

    supported: int = 0
    refuted: int = 0
    neutral: int = 0
    support_ids: list[int] = field(default_factory=list)
    refute_ids: list[int] = field(default_factory=list)

    @property
    def tests(self) -> int:
        return self.supported + self.refuted + self.neutral

    @property
    def credibility(self) -> float:
        """Posterior mean of 'this theory's next prediction holds' under a uniform prior
        (Laplace's rule); neutral outcomes count half a failure (no gain is a miss, not a loss)."""
        return credibility(self.supported, self.refuted, self.neutral)


def credibility(supported: float, refuted: float, neutral: float) -> float:
    return (supported + 1.0) / (supported + refuted + 0.5 * neutral + 2.0)


PRIOR_WEIGHT = 4.0  # verdicts of earlier runs count as at most this many tests of this run


class Ledger:
    """Observations per config, the noise they show, verdicts, and per-theory tallies."""

    def __init__(self, key: Any, *, floor: float = NOISE_FLOOR, confidence: float = CONFIDENCE):
        if not (isinstance(floor, (int, float)) and 0.0 <= floor < 1.0):
            raise AbductuneError(f"noise floor must be a number in [0, 1), got {floor!r}")
        if not (isinstance(confidence, (int, float)) and confidence > 0):
            raise AbductuneError(f"confidence must be a number > 0, got {confidence!r}")
        self.key = key  # config -> hashable identity (Space.key)
        self.floor = float(floor)
        self.confidence = float(confidence)
        self._obs: dict[tuple, _Observed] = {}
        self.verdicts: list[Verdict] = []
        self.tallies: dict[str, Tally] = {}
        self.priors: dict[str, tuple[float, float, float]] = {}  # theory -> pseudo-counts

    def set_priors(self, tallies: Mapping[str, Sequence[float]], weight: float = PRIOR_WEIGHT) -> None:
        """Start each theory's credibility from earlier runs' verdicts (supported, refuted,
        neutral), scaled down to at most `weight` tests in all: what other problems of the
        class showed ranks the first hypotheses, and a few verdicts on this one override it."""
        self.priors = {}
        for name, counts in tallies.items():
            s, r, n = (float(c) for c in (list(counts) + [0, 0, 0])[:3])
            total = s + r + n
            if total > 0:
                f = min(1.0, weight / total)
                self.priors[name] = (s * f, r * f, n * f)

    # -- observations
    def observe(self, m: Measurement) -> None:
        """Add one measurement (first-time or repeat) of its config."""
        o = self._obs.setdefault(self.key(m.config), _Observed())
        o.rows.append(m)
        if not m.ok:
            o.failed = o.failed or not o.logs
            return
        o.logs.append(math.log(m.time_ms))  # type: ignore[arg-type]
        se = sample_error(m)
        if se is not None:
            o.sample_se.append(se)

    def observed(self, cfg: Mapping[str, Any]) -> bool:
        return self.key(cfg) in self._obs

    def estimate(self, cfg: Mapping[str, Any]) -> float:
        """Pooled time estimate (geometric mean of every ok observation); inf if none."""
        o = self._obs.get(self.key(cfg))
        return math.exp(o.mean) if o is not None and o.logs else math.inf

    def times(self, cfg: Mapping[str, Any]) -> int:
        o = self._obs.get(self.key(cfg))
        return len(o.logs) if o is not None else 0

    def ids(self, cfg: Mapping[str, Any]) -> list[int]:
        o = self._obs.get(self.key(cfg))
        return [m.id for m in o.rows if m.id is not None] if o is not None else []

    def best(self) -> tuple[dict[str, Any], float] | None:
        """The config with the lowest pooled estimate, and that estimate."""
        live = [(o.mean, o.rows[0].config) for o in self._obs.values() if o.logs]
        if not live:
            return None
        mean, cfg = min(live, key=lambda t: t[0])
        return dict(cfg), math.exp(mean)

    def repeat_noise(self) -> float | None:
        """Run-to-run noise: pooled sd of log times around their config's mean, over configs
        measured more than once (None until one has been)."""
        ss, dof = 0.0, 0
        for o in self._obs.values():
            if len(o.logs) > 1:
                mu = o.mean
                ss += sum((x - mu) ** 2 for x in o.logs)
                dof += len(o.logs) - 1
        return math.sqrt(ss / dof) if dof else None

    @property
    def deterministic(self) -> bool:
        """Whether re-measurements have reproduced their first time exactly (a replay without
        noise): then a faster time is faster, and confirming a close call buys nothing."""
        repeated = [o for o in self._obs.values() if len(o.logs) > 1]
        return bool(repeated) and all(max(o.logs) == min(o.logs) for o in repeated)

    def error(self, cfg: Mapping[str, Any]) -> float:
        """Standard error of a config's pooled log-time estimate."""
        o = self._obs.get(self.key(cfg))
        n = len(o.logs) if o is not None and o.logs else 1
        own = statistics.fmean(o.sample_se) if o is not None and o.sample_se else 0.0
        rep = self.repeat_noise() or 0.0
        return max(own, rep) / math.sqrt(n)

    def threshold(self, a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
        """Relative difference between a and b that noise cannot explain."""
        se = math.hypot(self.error(a), self.error(b))
        return min(NOISE_CAP, max(self.floor, math.expm1(self.confidence * se)))

    # -- verdicts
    def compare(self, candidate: Mapping[str, Any], incumbent: Mapping[str, Any]) -> tuple[str, float, float]:
        """(outcome, ratio, threshold) of candidate against incumbent, where outcome is
        supported / refuted / failed / 'close' (within the threshold: confirm or call neutral)."""
        tc, ti = self.estimate(candidate), self.estimate(incumbent)
        thr = self.threshold(candidate, incumbent)
        if not math.isfinite(tc):
            return "failed", math.inf, thr
        if not math.isfinite(ti):
            return "supported", 0.0, thr  # anything that runs beats what did not
        r = tc / ti
        if r < 1.0 / (1.0 + thr):
            return "supported", r, thr
        if r > 1.0 + thr:
            return "refuted", r, thr
        return "close", r, thr

    def noise_known(self, a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
        """Whether anything measured says how noisy a and b are: their own samples, or repeats."""
        if self.repeat_noise() is not None:
            return True
        return any(o is not None and o.sample_se for o in (self._obs.get(self.key(a)), self._obs.get(self.key(b))))

    def needs_confirmation(self, candidate: Mapping[str, Any], incumbent: Mapping[str, Any]) -> bool:
        """Re-measure both before moving: a close call the candidate seems to win, or any win
        while nothing measured says how noisy the times are (single samples, no repeats yet:
        one look proves nothing). Never when repeats have proven the evaluator deterministic."""
        outcome, r, _t = self.compare(candidate, incumbent)
        if outcome == "failed" or r >= 1.0 or self.deterministic:
            return False
        return outcome == "close" or not self.noise_known(candidate, incumbent)

    def record(self, theory: str, candidate: Mapping[str, Any], incumbent: Mapping[str, Any],
               confirmed: bool = False) -> Verdict:
        """Judge candidate against incumbent now and add the verdict to `theory`'s tally.
        A close call becomes neutral (no visible effect)."""
        outcome, r, thr = self.compare(candidate, incumbent)
        if outcome == "close":
            outcome = "neutral"
        ids = tuple(self.ids(candidate) + self.ids(incumbent))
        v = Verdict(theory, outcome, dict(candidate), dict(incumbent), r, thr, confirmed, ids)
        self.verdicts.append(v)
        t = self.tallies.setdefault(theory, Tally())
        if outcome == "supported":
            t.supported += 1
            t.support_ids += list(ids)
        elif outcome in ("refuted", "failed"):
            t.refuted += 1
            t.refute_ids += list(ids)
        else:
            t.neutral += 1
        return v

    def credibility(self, theory: str) -> float:
        t = self.tallies.get(theory, Tally())
        ps, pr, pn = self.priors.get(theory, (0.0, 0.0, 0.0))
        return credibility(t.supported + ps, t.refuted + pr, t.neutral + pn)

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per theory: counts and the ids that support or refute it (for the run journal)."""
        return {name: {"supported": t.supported, "refuted": t.refuted, "neutral": t.neutral,
                       "support_ids": sorted(set(t.support_ids)), "refute_ids": sorted(set(t.refute_ids))}
                for name, t in sorted(self.tallies.items())}
