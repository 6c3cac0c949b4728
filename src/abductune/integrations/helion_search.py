"""abductune's search inside Helion: Sessions over a kernel's ConfigSpec, measured by Helion's own benchmarking.

Imports Helion at the top: `helion.py` imports this module only after its version check.

What `_autotune` does (each phase one Session, its rows in abductune's store):
1. maps the ConfigSpec (`helion_space.HelionMap`) and the kernel (`helion_kernel.facts_of`);
2. seeds, measured exactly as given in one batch: the user's `autotune_seed_configs`, the
   config Helion runs with `autotune_effort="none"` (its default, with any promoted heuristic
   seed), with `abductune_seeds` the theory store's predictions and the observed database's
   and heuristics' seeds for this class, shape and dtype, then the ConfigSpec's compiler seeds
   (Helion's `AutotunerHeuristic`s, abductune's among them where `helion.install` registered
   them; each moved the least way into what the resource model accepts, or dropped, as ours
   are: `screen_seed`); the user's seeds and Helion's default, measured as given, are pinned
   into the final verification; a seed of ours that failed is measured again with less to
   hold (`relieve_failed_seeds`);
3. coupled moves: every tile one power of two up, and down, with the warps following so each
   thread keeps its share of the tile (`helion_space.coupled_moves`), and the M and N tiles
   traded one power of two each way at the same held block (`helion_space.trade_moves`), in
   one batch, a winning move taken once more: moves the strategy's local steps (one or two
   parameters) cannot make, from small tiles on few warps to large tiles on many, and from a
   wide query tile to a long key loop;
4. the roles: the strategy asked for (abduction by default) searches the view holding the
   tiles, warps, stages and grouping around the best so far;
5. the sweep: every unit without a role and of few values (eviction policies, indexing, pid
   type, range settings, ...) tried one value at a time on the incumbent, all in one batch
   (`HelionMap.sweep`, led by tensor-descriptor indexing where Helion offers it:
   `helion_space.sweep_hints`; part of the budget is kept for it before the roles run), then
   the improving values together;
6. what budget is left searches the remaining units (and the roles again around the new
   incumbent);
7. Helion's final verification (`final_rebenchmark_best`): the best few measured configs and
   the pinned ones re-timed side by side, interleaved, or each alone in Helion's benchmark
   worker where one of them sets a load eviction policy (`rebenchmark`: interleaved, a config
   that keeps its inputs in L2 speeds up its rivals too); a pinned config (Helion's default)
   wins a tie, so the result is never slower than the default beyond that noise.

Each config is timed by Helion as a replayed CUDA graph (Helion's `HELION_BENCHMARK_CUDAGRAPH`,
switched on for the search unless the user set it: `helion_measure.graph_timing`), as Helion's
per-call timing cannot see a kernel of a few microseconds behind its launch.
Evaluations count configs Helion compiled and timed: a config Helion normalises onto one
measured, or whose generated source is identical to one measured, is answered free, and what
it did not cost goes to the later phases. How the search measures, and where its time goes,
is `helion_measure.py`; the report (`AbductuneSearch.report`) has both, per phase.
Helion's caches wrap the search as they wrap its own (`helion.autotuner(...)` returns the
cache class Helion's settings name). Helion's benchmark worker outlives the search: it is
kept for the next one in this process (`helion_worker.py`).
"""
from __future__ import annotations

import logging
import math
import os
import time
from typing import Any, Mapping, Sequence

from helion.autotuner.base_search import PopulationBasedSearch

from ..hardware import HardwareInfo, local_hardware
from ..search import Budget, make_strategy
from ..search.base import Seed
from ..measure.ptxas_watch import watching
from ..session import Session
from ..store import Store
from ..theory.check import halve_larger_tile
from ..theory.resources import fit, trouble
from .helion_kernel import facts_of
from .helion_measure import (HelionEvaluator, Shared, accepted, adopt_worker, graph_timing, return_worker,
                             start_worker)
from .helion_space import (SWEEP_MAX_VALUES, HelionError, HelionMap, coupled_moves, read_slots, sweep_hints,
                           trade_moves)
from .helion_worker import KEEPER

log = logging.getLogger(__name__)

# evaluations per kernel and shape for Helion's effort levels (a Helion "quick" run measures
# about a hundred configs, "full" many hundreds)
DEFAULT_EVALUATIONS = {"quick": 24, "full": 64}
SEED_LIMIT = 8  # seeds measured before the search, user seeds not counted
THEORY_SEEDS = 2
RELIEVED_SEEDS = 2  # configs easing abductune's failed seeds (`_Phases.relieve_failed_seeds`)
SWEEP_SHARE = 1 / 2  # at most this share of the evaluations left after the seeds is kept for the sweep
# the coupled moves take at most this share of the evaluations left after the seeds, the
# roles and the sweep keeping the rest (a bound, not fitted: a quick search's 16 leave room for
# the two moves and one extension)
COUPLED_SHARE = 1 / 4
# Helion's final verification: the best FINAL_TOP_K measured configs and the pinned ones,
# re-timed interleaved for about FINAL_TARGET_MS each (Helion's own searches: 8 and 5000 ms,
# sized for hundreds of configs; a few tens need a shorter look)
FINAL_TOP_K = 5
# A config whose compile takes this many times the slowest seed's (and at least the floor) is cut
# off: Helion's own searches cut at the 90th percentile of their first population, never below
# 30 s, which is three times a whole 24-evaluation search of ours; one exploring draw that hung
# the compiler (layer_norm, block 4096, persistent) cost 60 s of an 80 s search on the H100.
COMPILE_TIMEOUT_FACTOR = 5.0
COMPILE_TIMEOUT_FLOOR_S = 10.0
FINAL_TARGET_MS = 200.0
# Helion's switch for timing the finalists each alone (its default only on CuTe); where the user
# set it, Helion's handling stands (`AbductuneSearch.rebenchmark`)
FINAL_ISOLATED_ENV = "HELION_AUTOTUNE_FINAL_REBENCHMARK_ISOLATED"
# abduction's options in the searched views (roles, rest): no exploring share (`explore` off;
# the theories still get one test per batch until they win here). The seeds phase has already
# spread a batch over the space (Helion's default and heuristic seeds, ours) and the coupled
# moves have scaled the tiles, so a view refines that winner with 7-14 evaluations, and on a
# kernel no theory was confirmed on a draw from the whole space took one test of every three
# (abduction's batch). In the session 45 H200 runs (helion_h, helion_i) none of the 13 such
# draws in 5 roles phases beat the incumbent (each 1.3 to 52 times slower, or one failed);
# those kernels' figures after this change are in-sample for it.
ABDUCTION_OPTIONS = {"stop_early": True, "explore": False}


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
            return local_hardware(dev.index)  # a GPU the table lacks: from its properties
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
                            (dict(ABDUCTION_OPTIONS) if strategy == "abduction" else {}))
        make_strategy(strategy, seed=self.seed, **self.options)  # a bad name or option fails here
        self.report: dict[str, Any] = {}
        self.seed_screen: list[dict[str, str]] = []  # Helion's compiler seeds the resource model moved or dropped

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

        def add(flat: Any, source: str, screened: bool = False) -> None:
            try:
                canon, _ = gen.canonicalize_flat(flat)
                cfg = hmap.from_flat(canon)
            except Exception as e:  # noqa: BLE001 - a seed that cannot transfer is skipped, as Helion does
                log.info("abductune: seed from %s skipped: %s: %s", source, type(e).__name__, e)
                return
            if screened:
                cfg, why = screen_seed(hmap, problem, cfg)
                if why:
                    self.seed_screen.append({"source": source, "why": why})
                if cfg is None:
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
            add(flat, "helion:heuristic", screened=True)
        return seeds[:n_user + SEED_LIMIT]

    # -- Helion's machinery, sized for this search
    def autotune(self, *, skip_cache: bool = False) -> Any:
        # configs timed as replayed CUDA graphs (`graph_timing`), switched on before Helion's
        # preparation, where the benchmark worker is spawned
        with graph_timing() as on:
            self._graph_timing = on
            return super().autotune(skip_cache=skip_cache)

    def _prepare(self) -> None:
        """Helion's preparation (its provider computes the accuracy baseline), with Helion's
        benchmark worker taken from an earlier search, or spawned first so its start-up runs
        meanwhile (helion_measure)."""
        if self._prepared:
            return super()._prepare()
        worker, self._worker_reused = start_worker(self)
        t0 = time.perf_counter()
        try:
            super()._prepare()
        except BaseException:
            if worker is not None:
                KEEPER.give(worker, used=False)
            raise
        self._prepare_s = time.perf_counter() - t0
        self._worker_early = adopt_worker(self.benchmark_provider, worker)

    def _final_rebenchmark_top_k_default(self) -> int:
        return FINAL_TOP_K

    def _final_rebenchmark_target_ms(self) -> float:
        if os.getenv("HELION_AUTOTUNE_FINAL_REBENCHMARK_TARGET_MS") is not None:  # the user's choice stands
            return super()._final_rebenchmark_target_ms()
        return FINAL_TARGET_MS

    def rebenchmark(self, members: list[Any], **kw: Any) -> None:
        """Helion's re-timing; inside the final verification, where a finalist sets an eviction
        policy on its loads, each finalist timed alone in the benchmark worker (one steady
        window each, no interleaving, no fresh process), unless the user set FINAL_ISOLATED_ENV.
        Otherwise interleaved, as Helion does: paired timing ranks near-tied finalists better
        than windows one after another (Helion measured those 1-3% apart on one config).

        Why: on Triton Helion's final verification times its finalists interleaved, and a config
        whose loads evict last keeps its inputs in L2 for every rival timed after it, so the
        config that causes the speed-up cannot out-measure the others (Helion's own comment on
        the CuTe default, which times each alone in a fresh worker process: seconds each).
        Session 44, H200: the sweep's eviction-policy winners (softmax 5.06 against 5.88 us,
        layer norm 4.64 against 5.55 us in the search) were dropped by the interleaved final,
        and those searches ended 1.023 and 1.038 of Helion `quick`'s kernel."""
        if getattr(self, "_final_alone", False) and os.getenv(FINAL_ISOLATED_ENV) is None and _evicting(members):
            kw.update(accepted(super().rebenchmark, {"use_isolated": True, "use_interleaved": False,
                                                     "candidate_private_args": False, "confirm_suspicious": False}))
        super().rebenchmark(members, **kw)

    def _pin(self, hmap: HelionMap, seeds: Sequence[Seed]) -> list[str]:
        """Pin the user's seeds and Helion's default into the final verification."""
        pinned = []
        for s in seeds:
            if s.source not in ("user", "helion:default"):
                continue
            try:
                m = self.make_unbenchmarked(hmap.to_flat(s.config))
            except Exception:  # noqa: BLE001 - a seed Helion cannot read is measured (and fails) as one
                m = None
            if m is not None and hasattr(self, "pin_finalist_config"):
                self.pin_finalist_config(m.config)
                pinned.append(s.source)
        return pinned

    # -- the search
    def _autotune(self) -> Any:
        t_start = time.perf_counter()
        facts = self._facts()
        problem = facts.problem
        hmap = kernel_map(self.config_gen, self.config_spec, facts.roles, name=problem.kernel)
        store = self.store if isinstance(self.store, Store) else Store(":memory:" if self.store is None else self.store)
        seeds = self._seeds(hmap, problem)
        run = _Phases(self, hmap, problem, Shared(), store, toolchain(), t_start)
        self.report = {"problem": problem.to_dict(), "roles": dict(hmap.roles),
                       "graph_timing": bool(getattr(self, "_graph_timing", False)),
                       "seeds": [{"source": s.source, "config": hmap.to_flat(s.config)} for s in seeds],
                       "seed_screen": list(self.seed_screen),
                       "pinned": self._pin(hmap, seeds), "phases": run.phases}
        timeout = self.settings.autotune_compile_timeout  # `tighten_compile_timeout` lowers it
        try:
            run.run(seeds)
            return self._finish(run, hmap, problem, t_start)
        finally:
            self.settings.autotune_compile_timeout = timeout  # the kernel's settings outlive this search
            if store is not self.store:
                store.close()
            # keep Helion's benchmark worker for the next search (helion_worker), before
            # Helion's cleanup of this search's provider would shut it down
            t0 = time.perf_counter()
            kept = return_worker(getattr(self, "benchmark_provider", None))
            self.report.setdefault("timing", {}).update(worker_kept=kept,
                                                        worker_return_s=round(time.perf_counter() - t0, 4))

    def _finish(self, run: "_Phases", hmap: HelionMap, problem: Any, t_start: float) -> Any:
        """The search's winner through Helion's final verification, and the report."""
        shared = run.shared
        measured = [m for m in {id(m): m for m in shared.members.values()}.values() if m.perfs]
        self.population = measured or self.population
        if run.best is None:
            take = getattr(self.benchmark_provider, "take_no_viable_config_error", None)
            err = take() if take is not None else None
            if err is not None:
                raise err
            from helion import exc

            raise exc.NoConfigFound
        member, why = run.evaluator(hmap.full, dict).member(run.anchor)
        if member is None:
            raise HelionError(f"abductune's winner does not map back to a Helion config: {why.error if why else ''}")
        chosen, final_s = self._final_pick(member)
        self._selected_member = chosen
        self.best_perf_so_far = min(self.best_perf_so_far, chosen.perf)
        search_s = time.perf_counter() - t_start
        t = shared.timing
        pinned_pick = any(c == chosen.config for c in getattr(self, "_pinned_finalist_members", {}))
        self.report.update(
            evaluations=t.timed, winner=repr(chosen.config), winner_ms=chosen.perf, search_s=search_s,
            final={"seconds": round(final_s, 4), "changed": chosen.config != member.config,
                   "pinned_won": pinned_pick, "searched_winner": repr(member.config)},
            timing={"prepare_s": round(getattr(self, "_prepare_s", 0.0), 4), "search_s": round(search_s, 4),
                    **t.to_dict(), "final_s": round(final_s, 4),
                    "ours_s": round(max(0.0, search_s - t.compile_s - t.bench_s - t.runoff_s - final_s), 4),
                    "worker_early": bool(getattr(self, "_worker_early", False)),
                    "worker_reused": bool(getattr(self, "_worker_reused", False))})
        log.info("abductune: %s %s after %d evaluations: %s", problem.kernel, problem.shape_key(), t.timed,
                 chosen.config)
        return chosen.config

    def _final_pick(self, member: Any) -> tuple[Any, float]:
        """Helion's final verification over the best measured and the pinned configs (module
        docstring); the searched winner where this Helion has none or it cannot run."""
        t0 = time.perf_counter()
        pick = getattr(self, "final_rebenchmark_best", None)
        chosen = member
        if pick is not None:
            from helion import exc

            self._final_alone = True  # `rebenchmark`: the finalists each timed alone
            try:
                chosen = pick(member)
            except exc.NoConfigFound:
                chosen = member
            finally:
                self._final_alone = False
        return chosen, time.perf_counter() - t0


def _evicting(members: Sequence[Any]) -> bool:
    """Whether a member's config sets an eviction policy on a load (any value but Helion's
    default, the empty string)."""
    for m in members:
        cfg = getattr(getattr(m, "config", None), "config", None) or {}
        if any(v for v in cfg.get("load_eviction_policies") or ()):
            return True
    return False


def compile_timeout(current: float, seed_compile_s: Sequence[float]) -> int:
    """The compile timeout for the rest of a search: `COMPILE_TIMEOUT_FACTOR` times the slowest
    seed's compile, at least `COMPILE_TIMEOUT_FLOOR_S`, never above `current`; `current` where no
    seed compiled."""
    times = [t for t in seed_compile_s if t and t > 0]
    if not times:
        return int(current)
    return int(min(current, max(COMPILE_TIMEOUT_FLOOR_S, COMPILE_TIMEOUT_FACTOR * max(times))))


class _Phases:
    """One search's phases (module docstring), each a Session, sharing Helion's members."""

    def __init__(self, search: AbductuneSearch, hmap: HelionMap, problem: Any, shared: Shared, store: Store,
                 tc: str, t_start: float):
        self.search, self.hmap, self.problem, self.shared = search, hmap, problem, shared
        self.store, self.tc, self.t_start = store, tc, t_start
        self.phases: list[dict[str, Any]] = []
        self.best: Any = None
        self.anchor: dict[str, Any] = {}
        self.roles: list[str] = []  # the strategy's first view: the roles, and what else fits

    def evaluator(self, space: Any, to_full: Any) -> HelionEvaluator:
        return HelionEvaluator(self.search, self.hmap, space, self.problem, to_full, self.shared)

    def left(self) -> int:
        return self.search.max_evaluations - self.shared.timing.timed

    def out_of_time(self) -> bool:
        b = self.search._budget(1, self.t_start)
        return b.seconds is not None and b.seconds <= 0

    def session(self, name: str, units: Sequence[str], ev: HelionEvaluator, strategy: str, options: Mapping[str, Any],
                evaluations: int, seeds: Sequence[Seed], baselines: Mapping[str, Any] | None, batch: int = 8,
                seed: int = 0) -> Any:
        before, known, start = self.shared.timing.snapshot(), len(self.shared.members), dict(self.anchor)
        self.search.set_generation(len(self.phases) + 1)
        with watching(), Session(ev, strategy=strategy, seed=seed, options=options, seeds=seeds,  # kill stuck ptxas
                                 store=self.store, budget=self.search._budget(evaluations, self.t_start),
                                 toolchain=self.tc, batch_size=max(1, batch)) as s:
            res = s.run(baselines=baselines)
        w = res.winner
        self.phases.append({"phase": name, "units": list(units), "evaluations": res.evaluations,
                            "winner_ms": w.time_ms if w is not None and w.ok else None, "seconds": res.seconds,
                            "wall_s": round(res.wall_s, 4), "timing": self.shared.timing.since(before),
                            "measured": self.measured_since(known, start)})
        tests = self.tests_of(res.events, ev, start)
        if tests:
            self.phases[-1]["tests"] = tests
        if w is not None and w.ok:  # the Session judged its winner against the anchor in a run-off
            self.best, self.anchor = w, ev.to_full(w.config)
        return res

    @staticmethod
    def tests_of(events: Sequence[Mapping[str, Any]], ev: HelionEvaluator, anchor: Mapping[str, Any]) -> list[list[Any]]:
        """The strategy's tests in order, each [why it was proposed (the theory, or the kind of
        move), the units where it differs from `anchor`]: what a phase chose to measure and why,
        which `measured` (Helion's side, after normalising) cannot say."""
        out = []
        for e in events:
            if e.get("event") != "test" or "kind" in e or not isinstance(e.get("config"), Mapping):
                continue
            try:
                full = ev.to_full(e["config"])
            except Exception:  # noqa: BLE001 - a report line must never stop a search
                continue
            out.append([e.get("theory"), {k: v for k, v in full.items() if anchor.get(k) != v}])
        return out

    def measured_since(self, known: int, anchor: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The configs Helion measured after the first `known` members, in order: each one's
        time (ms, its newest reading; None with Helion's `status` where it has none) and the
        Helion fields where it differs from `anchor` (the phase's starting incumbent; the
        fields' defaults where there was none)."""
        try:
            base = self.search.config_gen.unflatten(self.hmap.to_flat(anchor or self.hmap.full.default())).config
        except Exception:  # noqa: BLE001 - a report line must never stop a search
            base = {}
        out, seen = [], set()
        for m in list(self.shared.members.values())[known:]:
            if id(m) in seen or not getattr(m, "perfs", None):
                continue
            seen.add(id(m))
            cfg = dict(getattr(m.config, "config", {}) or {})
            ok = math.isfinite(m.perf)
            row = {"ms": round(float(m.perf), 6) if ok else None,
                   "changed": {k: v for k, v in cfg.items() if base.get(k) != v}}
            if not ok:  # why it has no time (Helion's status: a timeout, an accuracy failure, an error, ...)
                row["status"] = str(getattr(m, "status", "unknown"))
            out.append(row)
        return out

    def fixed(self, name: str, configs: Sequence[Mapping[str, Any]], seeds: Sequence[Seed] = (),
              units: Sequence[str] = ()) -> Any:
        """Measure full-space configs as given, in one batch (one round of parallel compiles);
        the anchor, where there is one, runs in the closing run-off. `units`: what the
        phase's report says it changed."""
        ev = self.evaluator(self.hmap.full, dict)
        base = {"anchor": [dict(self.anchor)]} if self.anchor else None
        return self.session(name, list(units), ev, "fixed", {"configs": [dict(c) for c in configs]}, len(configs),
                            seeds, base, batch=len(configs))

    def view(self, name: str, names: Sequence[str], evaluations: int, seed: int = 0) -> Any:
        view = self.hmap.view(self.anchor, names)
        start = view.project(self.anchor)
        ev = self.evaluator(view.space, view.to_full)
        return self.session(name, names, ev, self.search.strategy, self.search.options, evaluations + 1,
                            [Seed(start, "anchor")], {"anchor": [start]}, seed=seed)

    def swept(self) -> list[str]:
        """The units the sweep tries: those without a role, and the roles the strategy's view
        could not hold (VIEW_CAP)."""
        return [u.name for u in self.hmap.units(self.anchor) if not u.role or u.name not in self.roles]

    def fresh(self, changes: Sequence[tuple[Any, Any, dict[str, Any]]]) -> list[tuple[Any, Any, dict[str, Any]]]:
        """The changes (.., .., full config) that are new distinct Helion configs: no-op changes
        Helion normalises onto the anchor, and configs measured before, left out (they cost
        nothing)."""
        ev = self.evaluator(self.hmap.full, dict)
        here, _ = ev.member(self.anchor)
        seen = {here.config} if here is not None else set()
        out = []
        for change in changes:
            m, failed = ev.member(change[2])
            if failed is None and m.config not in seen and m.config not in self.shared.members:
                seen.add(m.config)
                out.append(change)
        return out

    def sweep_list(self) -> list[tuple[str, Any, dict[str, Any]]]:
        """The sweep around the anchor (led as the kernel's facts say: `sweep_hints`), as new
        distinct Helion configs."""
        first, lead = sweep_hints(self.hmap, self.problem, self.anchor)
        return self.fresh(self.hmap.sweep(self.anchor, SWEEP_MAX_VALUES, only=self.swept(), first=first, lead=lead))

    def coupled(self) -> None:
        """The coupled moves around the incumbent (`coupled_moves`: every tile one way, then
        `trade_moves`: the M and N tiles opposite ways) in one batch, at most COUPLED_SHARE of
        what is left; a move that won is taken once more."""
        def moves(kind: str, directions: Sequence[int]) -> list[tuple[str, tuple[str, int], dict[str, Any]]]:
            make = coupled_moves if kind == "scale" else trade_moves
            got = make(self.hmap, self.problem, self.anchor, directions)
            return self.fresh([(label, (kind, 1 if label.startswith(("up", "trade:tile:M+")) else -1), cfg)
                               for label, cfg in got])

        cap = int(self.left() * COUPLED_SHARE)
        todo = (moves("scale", (+1, -1)) + moves("trade", (+1, -1)))[:cap]
        if not todo or self.out_of_time():
            return
        before = dict(self.anchor)
        self.fixed("coupled", [c for _, _, c in todo], units=[label for label, _, _ in todo])
        won = next((how for _, how, c in todo if c == self.anchor and self.anchor != before), None)
        if won is None or cap <= len(todo) or self.out_of_time():
            return
        again = moves(won[0], (won[1],))
        if again:
            self.fixed("coupled", [again[0][2]], units=[again[0][0]])

    def run(self, seeds: Sequence[Seed]) -> None:
        self.fixed("seeds", [s.config for s in seeds], seeds)
        self.tighten_compile_timeout()
        self.relieve_failed_seeds(seeds)
        if self.best is None:
            self.anchor = dict(seeds[0].config)
        else:
            self.coupled()
        groups = self.hmap.plan(self.anchor)
        if not groups:
            return
        self.roles = list(groups[0])
        left = self.left()
        reserve = min(len(self.sweep_list()), math.ceil(left * SWEEP_SHARE))
        if left - reserve > 0 and not self.out_of_time():
            self.view("roles", self.roles, left - reserve)
        self._sweep()
        swept = {n for n, _, _ in self.hmap.sweep(self.anchor, SWEEP_MAX_VALUES, only=self.swept())}
        rest = [u.name for u in self.hmap.units(self.anchor) if len(u.values) > 1 and u.name not in swept]
        for i, names in enumerate(self.hmap.plan(self.anchor, only=rest)):
            if self.left() <= 0 or self.out_of_time():
                break
            self.view(f"rest{i + 1}", names, self.left(), seed=self.search.seed + 1)

    def relieve_failed_seeds(self, seeds: Sequence[Seed]) -> None:
        """One of abductune's seeds (the theory store's, the observed database's, the
        heuristics': chosen for this kernel's class and shape) that failed, measured once more
        with less to hold (`eased`: its K tile one step smaller and one pipeline stage fewer),
        then, where room is left, eased with its larger output tile halved (the accumulator is
        what is left to give, as `theory.check.relief` gives it last): `RELIEVED_SEEDS`
        configs at most, in one batch. A compile failure says the seed's buffers or registers
        did not fit, which the resource model missed (it cannot see what a kernel unpacks or
        converts on the way to its dot), not that its region of the space is wrong. The
        user's seeds and Helion's default are measured as given, and Helion's compiler seeds,
        a spread of generic configs one per dot, are not eased either: a failure among them
        says little about this kernel, and easing them spent 2 of attention's 24 evaluations
        for nothing in session 46's run m. Why: on Helion's int4 matmul at 2048 x 8192 x 2048
        (session 46, H200) our one seed (K 64, M 128, N 256 tiles; 3 stages) failed, and the
        search climbed from Helion's default (67.7 ms) to 2.10 ms, 7.6 times `quick`'s kernel
        (K 32, M 128, N 128; 3 stages); the eased seed on 8 and on 16 warps failed too."""
        ev = self.evaluator(self.hmap.full, dict)
        space = self.hmap.full
        firsts: list[dict[str, Any]] = []
        seconds: list[dict[str, Any]] = []
        for s in seeds:
            if s.source == "user" or s.source.startswith("helion:"):
                continue
            m, failed = ev.member(s.config)
            if failed is not None or getattr(m, "status", None) != "error":
                continue
            cfg = eased(space, s.config)
            if cfg is None:
                continue
            firsts.append(cfg)
            smaller = halve_larger_tile(space, cfg)
            if smaller is not None and space.is_valid(smaller):
                seconds.append(smaller)
        out: list[dict[str, Any]] = []
        keys: set[tuple] = set()
        for cfg in firsts + seconds:  # every failed seed eased, then each with a smaller accumulator
            if len(out) < RELIEVED_SEEDS and space.key(cfg) not in keys:
                keys.add(space.key(cfg))
                out.append(cfg)
        n = min(len(out), self.left())
        if n > 0 and not self.out_of_time():
            self.fixed("seed_relief", out[:n])

    def tighten_compile_timeout(self) -> None:
        """Helion's compile timeout, lowered from the seeds' compile times (`compile_timeout`),
        where Helion's adaptive timeouts are on; the setting is put back when the search ends."""
        settings = self.search.settings
        if not getattr(settings, "autotune_adaptive_timeout", False):
            return
        times = [m.compile_time for m in {id(m): m for m in self.shared.members.values()}.values()
                 if getattr(m, "compile_time", None)]
        now = settings.autotune_compile_timeout
        new = compile_timeout(now, times)
        if new < now:
            settings.autotune_compile_timeout = new
            self.search.report["compile_timeout_s"] = new

    def _sweep(self) -> None:
        """Every swept value once on the incumbent (one batch), then the improving ones together:
        those that beat the incumbent beyond the noise, and, as a second config where the budget
        allows, every value that beat it at all. A gain within the noise is not confirmed by one
        reading, but the combination is itself measured and must win on its own to be kept, so
        one evaluation tests it; the sweep reads each value once on the incumbent, and gains
        that small are what tensor-descriptor indexing and eviction hints make on row kernels.
        Why: on layer_norm 4096 x 768 and 2048 x 4096 (session 45, H200) the sweep read
        indexing 2.4% faster, within the noise, and combined only the eviction win; Helion
        `quick` ended with both. In-sample: the change came from those traces."""
        todo = self.sweep_list()
        n = min(len(todo), self.left() - (1 if len(todo) > 1 else 0))
        if n <= 0 or self.out_of_time():
            return
        todo = todo[:n]
        anchor = dict(self.anchor)
        res = self.fixed("sweep", [c for _, _, c in todo])
        ref = self._time_of(anchor)
        if ref is None:
            return
        noise = max(float(getattr(res, "noise", 0.0) or 0.0), 0.0)
        gains: dict[str, tuple[float, Any]] = {}  # unit -> (time, value): its fastest improving value
        for name, value, cfg in todo:
            t = self._time_of(cfg)
            if t is not None and t < ref and (name not in gains or t < gains[name][0]):
                gains[name] = (t, value)
        sure = {u for u, (t, _) in gains.items() if t < ref * (1 - noise)}
        # the sure gains together, then every gain (a superset: a second config only where larger)
        groups = [g for g in (sure, set(gains) if set(gains) != sure else set()) if len(g) >= 2]
        combos = []
        for names in groups:
            combined = dict(anchor)
            for u in self.hmap.units(anchor):
                if u.name in names:
                    combined.update({e: gains[u.name][1] for e in u.elements})
            combos.append(combined)
        room = min(len(combos), self.left())
        if room <= 0 or self.out_of_time():
            return
        self.fixed("combine", combos[:room])

    def _time_of(self, cfg: Mapping[str, Any]) -> float | None:
        """A full config's newest time: Helion's member holds every timing, run-offs last."""
        m, failed = self.evaluator(self.hmap.full, dict).member(cfg)
        if failed is not None or not m.perfs or not math.isfinite(m.perf):
            return None
        return float(m.perf)


def eased(space: Any, cfg: Mapping[str, Any]) -> dict[str, Any] | None:
    """`cfg` holding less (`_Phases.relieve_failed_seeds`): its K tile one step smaller and its
    pipeline one stage shorter, each where the space has the role and a smaller value; None
    where neither moves or the result is not a config of `space`."""
    out = dict(cfg)
    for role in ("tile:K", "stages"):
        p = space.by_role(role)
        v = p.step(out[p.name], -1) if p is not None and p.name in out else None
        if v is not None:
            out[p.name] = v
    return out if out != dict(cfg) and space.is_valid(out) else None


def screen_seed(hmap: HelionMap, problem: Any, cfg: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """One of Helion's compiler seeds as abductune's own seeds are made (`heuristics.seeds`):
    where the resource model says it cannot launch or will spill, moved the least way into what
    it accepts (`resources.fit`: fewer stages, a smaller K tile, more warps), or dropped where
    nothing does; with why ("" where it stands as given). A measurement is not spent on a
    failure the model foresees. Helion's default and the user's seeds are never screened: they
    are measured as given. Why: Helion's compiler seeds are one config per dot, written for a
    matmul, and a kernel with two dots in its loop (attention) holds more: 2 of the 8 seeds
    measured on attention 4 x 16 x 1024 x 64 in session 45 failed where the model says they
    need more shared memory than a block has (64 x 512 tiles at 3 stages, 128 x 256 at 4).
    Session 46's runs measured them moved: some still fail, where the model sees nothing wrong,
    so this spares a measurement only where the model is right."""
    if problem is None or getattr(problem, "hardware", None) is None:
        return dict(cfg), ""
    fitted, changes = fit(problem, hmap.full, cfg)
    if fitted is None:
        return None, "dropped: " + str(trouble(problem, hmap.full, cfg))
    if changes:
        return dict(fitted), "moved: " + ", ".join(changes)
    return dict(cfg), ""


def abductune_seeds(hmap: HelionMap, problem: Any, default: Mapping[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """abductune's seeds for this kernel as full-space configs, with their sources: the theory
    store's predictions, then the observed database and the heuristics (tune's order), each
    instantiated on the view of every role around `default` (the first group where no role)."""
    groups = hmap.plan(default)
    if not groups or problem.kernel_class == "other":
        return []
    # every role, whatever the cap on a searched view: a prediction enumerates nothing
    roles = [u.name for u in hmap.units(default) if u.role and len(u.values) > 1]
    view = hmap.view(default, roles or groups[0])
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
