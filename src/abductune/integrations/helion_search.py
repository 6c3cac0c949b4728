"""abductune's search inside Helion: Sessions over a kernel's ConfigSpec, measured by Helion's own benchmarking.

Imports Helion at the top: `helion.py` imports this module only after its version check.

What `_autotune` does:
1. maps the ConfigSpec (`helion_space.HelionMap`) and the kernel (`helion_kernel.facts_of`);
2. seeds, measured exactly as given in one Session over the full space with a fixed list:
   the user's `autotune_seed_configs`, the config Helion runs with `autotune_effort="none"`
   (its default, with any promoted heuristic seed), with `abductune_seeds` the theory store's
   predictions and the observed database's and heuristics' seeds for this class, shape and
   dtype, then the ConfigSpec's compiler seeds (Helion's `AutotunerHeuristic`s, abductune's
   among them where `helion.install` registered them);
3. searches views around the best so far, one Session each (`HelionMap.plan`: roles first,
   then the fields that matter most), with the strategy asked for (abduction by default);
4. returns the winner of the last Session: each Session judges its own run-off, the anchor
   among the contenders, so the result is never slower than the best seed beyond noise.

Every measurement is Helion's: `make_unbenchmarked` / `benchmark_population` (parallel
precompile, Helion's timing, its accuracy check against the default config's output) and
`rebenchmark` for the Session's run-off. A Helion config measured once (two abductune configs
Helion normalizes to one) answers again for free. Helion's caches wrap the search as they
wrap its own (`helion.autotuner(...)` returns the cache class Helion's settings name).
"""
from __future__ import annotations

import inspect
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from helion.autotuner.base_search import PopulationBasedSearch

from ..hardware import HardwareInfo, lookup
from ..measure.base import Evaluator
from ..measurement import Measurement
from ..search import Budget, make_strategy
from ..search.base import Seed
from ..session import Session
from ..store import Store
from .helion_kernel import facts_of
from .helion_space import HelionError, HelionMap, read_slots

log = logging.getLogger(__name__)

# evaluations per kernel and shape for Helion's effort levels (a Helion "quick" run measures
# about a hundred configs, "full" many hundreds)
DEFAULT_EVALUATIONS = {"quick": 24, "full": 64}
SEED_LIMIT = 8  # seeds measured before the search, user seeds not counted
THEORY_SEEDS = 2
FIRST_GROUP_SHARE = 2 / 3  # of the evaluations left after the seeds, for the group holding the roles


# ----------------------------------------------------------------------------- the map of a kernel

def kernel_map(config_gen: Any, config_spec: Any, roles: Mapping[str, str], name: str = "helion") -> HelionMap:
    """The HelionMap of a ConfigGeneration's flat spec (its own field view where it has one)."""
    fields = config_gen._flat_fields() if hasattr(config_gen, "_flat_fields") else config_spec._flat_fields()
    layout = [(key, *f._flat_key_info()) for key, f in fields.items()]
    extra = len(config_gen.flat_spec) - sum(n for _, n, _ in layout)
    if extra == 1:  # an advanced-controls-file choice closes Helion's layout when one is given
        layout.append(("advanced_controls_file", 1, False))
    block_ids = {key: [tuple(getattr(item, "block_ids", ())) for item in f]
                 for key, f in fields.items() if hasattr(f, "_encode_flat_values")}
    slots = read_slots(config_gen.flat_spec, layout, block_ids)
    known = {s.name for s in slots}
    return HelionMap(slots, {k: v for k, v in roles.items() if k in known}, name=name)


def tensors_of(args: Sequence[Any]) -> list[tuple[tuple[int, ...], Any]]:
    out = []
    for a in args:
        if hasattr(a, "shape") and hasattr(a, "dtype"):
            try:
                out.append((tuple(int(d) for d in a.shape), a.dtype))
            except (TypeError, ValueError):  # a symbolic size: no static shape to read
                continue
    return out


def device_hardware(args: Sequence[Any]) -> HardwareInfo | None:
    """The GPU the arguments live on, as abductune knows it (None off a CUDA device)."""
    for a in args:
        dev = getattr(a, "device", None)
        if dev is not None and getattr(dev, "type", "") == "cuda":
            import torch

            return lookup(torch.cuda.get_device_name(dev), strict=False)
    return None


def toolchain() -> str:
    from importlib import metadata

    parts = []
    for pkg in ("helion", "torch", "triton"):
        try:
            parts.append(f"{pkg}={metadata.version(pkg)}")
        except metadata.PackageNotFoundError:
            continue
    return ";".join(parts)


# ----------------------------------------------------------------------------- the evaluator

@dataclass
class _Shared:
    """What every phase's evaluator shares: Helion config -> its member, and the clock."""

    members: dict[Any, Any] = field(default_factory=dict)
    clock: float = 0.0


def _no_raise(search: Any) -> dict[str, Any]:
    """Ask Helion for failed rows instead of its compile error when a whole batch fails, where
    it can (Helion 1.5; 1.4 raises, as its own searches do)."""
    params = inspect.signature(search.benchmark_population).parameters
    return {"raise_if_no_viable_config": False} if "raise_if_no_viable_config" in params else {}


_STATUS = {"timeout": "timeout", "accuracy_error": "wrong_result", "filtered": "pruned",
           "source_rejected": "pruned"}


class HelionEvaluator(Evaluator):
    """Measures configs of `space` through the Helion search `search` (module docstring).
    `to_full`: a config of `space` -> a config of the HelionMap's full space."""

    def __init__(self, search: Any, hmap: HelionMap, space: Any, problem: Any,
                 to_full: Callable[[Mapping[str, Any]], dict[str, Any]], shared: _Shared):
        self.search, self.hmap, self.space, self.problem = search, hmap, space, problem
        self.to_full = to_full
        self.shared = shared

    @property
    def clock(self) -> float:  # type: ignore[override]
        return self.shared.clock

    def member(self, cfg: Mapping[str, Any]) -> tuple[Any, Measurement | None]:
        """(Helion's member for cfg, None) or (None, the measurement that says why there is none)."""
        try:
            flat = self.hmap.to_flat(self.to_full(cfg))
            m = self.search.make_unbenchmarked(flat)
        except Exception as e:  # noqa: BLE001 - a config Helion cannot read is a failed measurement
            return None, Measurement(dict(cfg), "compile_error", error=f"{type(e).__name__}: {e}"[:2000])
        if m is None:
            return None, Measurement(dict(cfg), "pruned", error="Helion rejects this config for this kernel "
                                                                "(InvalidConfig or not viable on its backend)")
        return self.shared.members.get(m.config, m), None

    def row(self, cfg: Mapping[str, Any], m: Any, compile_s: float = 0.0, bench_s: float = 0.0) -> Measurement:
        perf = m.perf if m.perfs else math.inf
        extra = {"helion_config": repr(m.config), "helion_status": str(m.status)}
        if math.isfinite(perf) and m.status not in _STATUS and m.status != "error":
            return Measurement(dict(cfg), "ok", time_ms=float(perf), samples_ms=(float(perf),),
                               compile_s=compile_s, bench_s=bench_s, extra=extra)
        status = _STATUS.get(m.status, "runtime_error" if m.compile_time is not None else "compile_error")
        return Measurement(dict(cfg), status, compile_s=compile_s, bench_s=bench_s, extra=extra,
                           error=f"Helion status {m.status}")

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        out: list[Measurement | None] = []
        todo: list[tuple[int, Any]] = []
        fresh: dict[Any, Any] = {}
        for i, cfg in enumerate(configs):
            m, failed = self.member(cfg)
            out.append(failed)
            if failed is None:
                key = m.config
                if key not in self.shared.members:  # measured in an earlier batch: answered for free
                    m = fresh.setdefault(key, m)
                todo.append((i, m))
        batch = list(fresh.values())
        spent = 0.0
        if batch:
            t0 = time.perf_counter()
            self.search.benchmark_population(batch, desc="abductune", **_no_raise(self.search))
            spent = time.perf_counter() - t0
            self.shared.clock += spent
            for key, m in fresh.items():
                self.shared.members[key] = m
                self.shared.members[m.config] = m  # Helion may hand back a normalized config
        share = spent / max(1, len(batch))
        for i, m in todo:
            new = any(m is b for b in batch)
            c = (m.compile_time or 0.0) if new else 0.0
            out[i] = self.row(configs[i], m, c, max(0.0, share - c) if new else 0.0)
        return out  # type: ignore[return-value]

    def remeasure(self, configs: Sequence[Mapping[str, Any]], *, rounds: int = 1) -> list[Measurement]:
        """Helion's interleaved re-benchmark of the configs (already measured: no compile)."""
        pairs = [self.member(c) for c in configs]
        unknown = [c for c, (m, f) in zip(configs, pairs) if f is None and m.config not in self.shared.members]
        if unknown:
            self.evaluate(unknown)
            pairs = [self.member(c) for c in configs]
        live = [m for m, f in pairs if f is None and m.perfs and math.isfinite(m.perf)]
        t0 = time.perf_counter()
        if len({id(m) for m in live}) >= 2:
            self.search.rebenchmark(list({id(m): m for m in live}.values()), desc="abductune run-off")
        self.shared.clock += time.perf_counter() - t0
        return [f if f is not None else self.row(c, m) for c, (m, f) in zip(configs, pairs)]


# ----------------------------------------------------------------------------- the search

class AbductuneSearch(PopulationBasedSearch):
    """abductune's search as a Helion search algorithm (`HELION_AUTOTUNER=abductune` once
    `abductune.integrations.helion` is imported). Options: `strategy` (an abductune strategy
    name, default "abduction"), `max_evaluations` (default by `autotune_effort`: quick 24,
    full 64), `seconds` (also capped by Helion's `autotune_budget_seconds`), `seed`,
    `abductune_seeds` (the theory store's and observed database's seeds; Helion's own seeds
    are always measured), `store` (a path or Store: abductune's measurement store; default
    in memory), `options` (the strategy's)."""

    def __init__(self, kernel: Any, args: Sequence[object], *, strategy: str = "abduction",
                 max_evaluations: int | None = None, seconds: float | None = None, seed: int = 0,
                 abductune_seeds: bool = True, store: Any = None, options: Mapping[str, Any] | None = None,
                 finishing_rounds: int = 0, benchmark_provider_cls: Any = None) -> None:
        super().__init__(kernel, args, finishing_rounds=finishing_rounds)
        if benchmark_provider_cls is not None:  # another of Helion's providers (or a stand-in for tests)
            self._benchmark_provider_cls = benchmark_provider_cls
        effort = str(getattr(self.settings, "autotune_effort", "quick"))
        self.max_evaluations = int(max_evaluations or DEFAULT_EVALUATIONS.get(effort, DEFAULT_EVALUATIONS["quick"]))
        self.seconds = seconds
        self.strategy = strategy
        self.seed = int(seed)
        self.abductune_seeds = bool(abductune_seeds)
        self.store = store
        self.options = dict(options if options is not None else
                            ({"stop_early": True} if strategy == "abduction" else {}))
        make_strategy(strategy, seed=self.seed, **self.options)  # a bad name or option fails here
        self.report: dict[str, Any] = {}

    @classmethod
    def get_kwargs_from_profile(cls, profile: Any, settings: Any) -> dict[str, object]:
        effort = str(getattr(settings, "autotune_effort", "quick"))
        return {"max_evaluations": DEFAULT_EVALUATIONS.get(effort, DEFAULT_EVALUATIONS["quick"])}

    # -- helpers
    def _facts(self) -> Any:
        kobj = getattr(self.kernel, "kernel", None)
        name = str(getattr(kobj, "name", "") or "helion_kernel")
        try:
            source = kobj.kernel_source() if kobj is not None and hasattr(kobj, "kernel_source") else ""
        except OSError:
            source = ""
        return facts_of(self.config_spec, tensors_of(self.args), name=name, source=source,
                        hardware=device_hardware(self.args))

    def _budget(self, evaluations: int, t_start: float) -> Budget:
        limits = [s for s in (self.seconds, getattr(self.settings, "autotune_budget_seconds", None)) if s]
        left = None if not limits else max(0.0, min(limits) - (time.perf_counter() - t_start))
        return Budget(max(0, int(evaluations)), left)

    def _seeds(self, hmap: HelionMap, problem: Any) -> list[Seed]:
        """Seeds as full-space configs with where each came from, deduplicated (module docstring)."""
        gen = self.config_gen
        seeds: list[Seed] = []
        keys: set[tuple] = set()

        def add(flat: Any, source: str) -> None:
            try:
                canon, _ = gen.canonicalize_flat(flat)
                cfg = hmap.from_flat(canon)
            except Exception as e:  # noqa: BLE001 - a seed that cannot transfer is skipped, as Helion does
                log.info("abductune: seed from %s skipped: %s: %s", source, type(e).__name__, e)
                return
            k = hmap.full.key(cfg)
            if k not in keys:
                keys.add(k)
                seeds.append(Seed(cfg, source))

        for c in self._autotune_seed_configs():
            add(gen.flatten(c), "user")
        n_user = len(seeds)
        add(gen.flatten(self.config_spec.default_config()), "helion:default")
        if self.abductune_seeds:  # before Helion's compiler seeds: ours among those keep their name
            default = seeds[n_user].config if len(seeds) > n_user else hmap.full.default()
            for cfg, source in abductune_seeds(hmap, problem, default):
                add(hmap.to_flat(cfg), source)
        for flat, _ in gen.seed_flat_config_pairs():
            add(flat, "helion:heuristic")
        return seeds[:n_user + SEED_LIMIT]

    # -- the search
    def _autotune(self) -> Any:
        t_start = time.perf_counter()
        facts = self._facts()
        problem = facts.problem
        hmap = kernel_map(self.config_gen, self.config_spec, facts.roles, name=problem.kernel)
        shared = _Shared()
        store = self.store if isinstance(self.store, Store) else Store(":memory:" if self.store is None else self.store)
        tc = toolchain()
        seeds = self._seeds(hmap, problem)
        self.report = {"problem": problem.to_dict(), "roles": dict(hmap.roles),
                       "seeds": [{"source": s.source, "config": hmap.to_flat(s.config)} for s in seeds],
                       "phases": []}
        spent = 0
        try:
            ev = HelionEvaluator(self, hmap, hmap.full, problem, dict, shared)
            with Session(ev, strategy="fixed", options={"configs": [s.config for s in seeds]},
                         budget=self._budget(len(seeds), t_start), seeds=seeds, store=store,
                         toolchain=tc) as s0:
                res = s0.run()
            spent += res.evaluations
            best = res.winner if res.winner is not None and res.winner.ok else None
            anchor = dict(best.config) if best is not None else dict(seeds[0].config)
            self.report["phases"].append(_phase("seeds", [], res))
            groups = hmap.plan(anchor)
            left = self.max_evaluations - spent
            for i, names in enumerate(groups):
                if left <= 0:
                    break
                share = left if i == len(groups) - 1 else (
                    math.ceil(left * FIRST_GROUP_SHARE) if i == 0 else math.ceil(left / (len(groups) - i)))
                view = hmap.view(anchor, names)
                start = view.project(anchor)
                self.set_generation(i + 1)
                ev = HelionEvaluator(self, hmap, view.space, problem, view.to_full, shared)
                with Session(ev, strategy=self.strategy, seed=self.seed, options=self.options,
                             budget=self._budget(share + 1, t_start), seeds=[Seed(start, "anchor")],
                             store=store, toolchain=tc) as s:
                    res = s.run(baselines={"anchor": [start]})
                spent += max(0, res.evaluations - 1)
                left = self.max_evaluations - spent
                self.report["phases"].append(_phase(f"group{i + 1}", names, res))
                # the Session judged its winner against the anchor in one run-off: it is the new anchor
                if res.winner is not None and res.winner.ok:
                    best, anchor = res.winner, view.to_full(res.winner.config)
        finally:
            if store is not self.store:
                store.close()
        measured = [m for m in {id(m): m for m in shared.members.values()}.values() if m.perfs]
        self.population = measured or self.population
        if best is None:
            take = getattr(self.benchmark_provider, "take_no_viable_config_error", None)
            err = take() if take is not None else None
            if err is not None:
                raise err
            from helion import exc

            raise exc.NoConfigFound
        member, why = HelionEvaluator(self, hmap, hmap.full, problem, dict, shared).member(anchor)
        if member is None:
            raise HelionError(f"abductune's winner does not map back to a Helion config: {why.error if why else ''}")
        self._selected_member = member
        self.report.update(evaluations=spent, winner=repr(member.config), winner_ms=best.time_ms,
                           search_s=time.perf_counter() - t_start)
        log.info("abductune: %s %s after %d evaluations: %s", problem.kernel, problem.shape_key(), spent,
                 member.config)
        return member.config


def _phase(name: str, units: Sequence[str], res: Any) -> dict[str, Any]:
    w = res.winner
    return {"phase": name, "units": list(units), "evaluations": res.evaluations,
            "winner_ms": w.time_ms if w is not None and w.ok else None, "seconds": res.seconds}


def abductune_seeds(hmap: HelionMap, problem: Any, default: Mapping[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """abductune's seeds for this kernel as full-space configs, with their sources: the theory
    store's predictions, then the observed database and the heuristics (tune's order), each
    instantiated on the view that holds the roles (the first group around `default`)."""
    groups = hmap.plan(default)
    if not groups or problem.kernel_class == "other":
        return []
    view = hmap.view(default, groups[0])
    out: list[tuple[dict[str, Any], str]] = []
    try:
        from ..theory.store import predictions

        for i, p in enumerate(predictions(problem, view.space, fallback=False)[:THEORY_SEEDS]):
            out.append((view.to_full(p.config), f"theory:{p.rule.regime}" + (":runner-up" if i else "")))
    except Exception as e:  # noqa: BLE001 - a prediction must never stop a search
        log.warning("abductune: theory prediction for %s failed: %s: %s", problem.kernel, type(e).__name__, e)
    try:
        from ..heuristics import seed_configs

        rep = seed_configs(problem, view.space, problem.hardware, base=view.project(default, lossy=True))
        for cfg in rep.configs:
            src = next((f"{f.get('source')}:{f.get('name')}" for f in rep.fired
                        if f.get("status") == "seed" and f.get("config") == cfg), "heuristic")
            out.append((view.to_full(cfg), src))
    except Exception as e:  # noqa: BLE001 - contained, as above
        log.warning("abductune: seed heuristics for %s failed: %s: %s", problem.kernel, type(e).__name__, e)
    return out
