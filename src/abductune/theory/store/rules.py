"""A rule's records: how one role's value is chosen (`Form`), the rule itself, and a prediction made from it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ...problem import Holdout, Problem, as_holdout, kernel_family
from ...space import Config

ALL = "all"  # the regime of a rule for every shape of its class


@dataclass(frozen=True)
class Form:
    """How one role's value is chosen: kind const (value), fit, or grid (programs per SM)."""

    kind: str
    value: Any = None

    def to_json(self) -> list[Any]:
        return [self.kind, self.value]

    @classmethod
    def from_json(cls, v: Sequence[Any]) -> "Form":
        kind, value = v[0], v[1]
        return cls(str(kind), tuple(value) if isinstance(value, list) else value)

    def describe(self, role: str) -> str:
        if self.kind == "fit":
            return f"{role} covers its dim"
        if self.kind == "grid":
            return f"{role} sized for ~{self.value:g} programs/SM"
        if self.kind == "par":
            return f"{role}={self.value[0]}, smaller until >= {self.value[1]:g} programs/SM"
        if self.kind == "per":
            return f"{role} for ~{self.value:g} tile elements per thread"
        return f"{role}={self.value}"


@dataclass
class TheoryRule:
    hardware: str  # GPU name, "family:vendor/family" or "*"
    kernel_class: str
    regime: str  # the class's fallback category, or "all"
    dtype_family: str
    forms: dict[str, Form]
    geomean: float = 1.0  # predicted / optimum over the problems it was learned from
    worst: float = 1.0
    support: int = 0
    refute: int = 0
    # {key, kernel, dims, hardware} and, from this version on, the facts the rule's config met
    # there (`scope.facts`: reduction, held, bound); a file without them is read by `scope`
    learned_from: list[dict[str, Any]] = field(default_factory=list)
    dims_range: dict[str, list[int]] = field(default_factory=dict)  # canonical dim -> [min, max]
    # the roles its spaces had (tiles by the dim they cover) -> [min, max]; None: not recorded
    # (an older file), filled from the learned kernels' specs where `scope` can find them
    roles: dict[str, list[Any]] | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.hardware, self.kernel_class, self.regime, self.dtype_family)

    @property
    def confidence(self) -> float:
        """Share of the problems it was learned from that it predicted within tolerance (Laplace)."""
        return (self.support + 1) / (self.support + self.refute + 2)

    def describe(self) -> str:
        return "; ".join(f.describe(r) for r, f in sorted(self.forms.items()))

    def kernels(self) -> set[str]:
        """The kernels (by family: dtype suffix dropped) this rule was confirmed on."""
        return {kernel_family(str(o.get("kernel", ""))) for o in self.learned_from if o.get("kernel")}

    def learned_from_problem(self, problem: "Problem | Holdout") -> bool:
        """Whether a dataset this rule was learned from is one the holdout (a Problem: its
        shape) must not know."""
        h = as_holdout(problem)
        assert h is not None
        return any(h.covers(str(o.get("kernel", "")), o.get("dims"), str(o.get("key", "")),
                            str(o.get("source_hash", ""))) for o in self.learned_from)

    def to_dict(self) -> dict[str, Any]:
        return {"hardware": self.hardware, "kernel_class": self.kernel_class, "regime": self.regime,
                "dtype_family": self.dtype_family, "forms": {r: f.to_json() for r, f in self.forms.items()},
                "geomean": round(self.geomean, 4), "worst": round(self.worst, 4), "support": self.support,
                "refute": self.refute, "learned_from": self.learned_from, "dims_range": self.dims_range,
                **({"roles": self.roles} if self.roles is not None else {})}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TheoryRule":
        return cls(d["hardware"], d["kernel_class"], d["regime"], d["dtype_family"],
                   {r: Form.from_json(v) for r, v in d["forms"].items()}, float(d.get("geomean", 1.0)),
                   float(d.get("worst", 1.0)), int(d.get("support", 0)), int(d.get("refute", 0)),
                   list(d.get("learned_from") or []), {k: list(v) for k, v in (d.get("dims_range") or {}).items()},
                   {k: list(v) for k, v in d["roles"].items()} if isinstance(d.get("roles"), dict) else None)


@dataclass(frozen=True)
class Prediction:
    config: Config
    rule: TheoryRule
    level: str  # which hardware level matched: name, family or any
    confidence: float
    extrapolates: bool
    reasons: tuple[str, ...]
    # what moved the rule's own config to the one served ("warpgroup MMA: BLOCK_M 32 -> 64",
    # "resource model: num_stages 4 -> 3"), in order; empty when served as the rule gave it
    repairs: tuple[str, ...] = ()
    # "theory"; the next source that served because every rule was outside its conditions
    # ("observed:observed", "registry:<heuristic>"; `rule` is then the first rule declined); or
    # "declined": a declined rule's own config, offered after the next source's as a seed to test
    source: str = "theory"
    declined: tuple[str, ...] = ()  # rules passed over as outside their conditions, and why

    def describe(self) -> str:
        r = self.rule
        if self.source == "declined":
            return (f"{r.kernel_class}/{r.regime}/{r.dtype_family} on {r.hardware} ({self.level}): {r.describe()}; "
                    f"declined as outside the conditions it was confirmed under ({', '.join(self.reasons)}), offered "
                    "only as a config for a search to test"
                    + ("; repaired: " + ", ".join(self.repairs) if self.repairs else ""))
        if self.source != "theory":
            return ("no theory rule applies within the conditions it was confirmed under ("
                    + "; ".join(self.declined) + f"); served the next source, {self.source}"
                    + (": " + ", ".join(self.reasons) if self.reasons else "")
                    + ("; repaired: " + ", ".join(self.repairs) if self.repairs else ""))
        return (f"{r.kernel_class}/{r.regime}/{r.dtype_family} on {r.hardware} ({self.level}): {r.describe()}; "
                f"confidence {self.confidence:.2f} (support {r.support}, refute {r.refute})"
                + ("; extrapolates: " + ", ".join(self.reasons) if self.extrapolates else "")
                + ("; passed over as outside their conditions: " + "; ".join(self.declined) if self.declined else "")
                + ("; repaired: " + ", ".join(self.repairs) if self.repairs else ""))
