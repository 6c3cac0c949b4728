"""The `Autotuner` that `@abductune.autotune` returns, and `autotune()`, the decorator factory: the
call path of a drop-in for `@triton.autotune`, readable here as Triton's `runtime/autotuner.py`.

`run` builds the in-memory key and launches (the hit path); `_miss` builds the Problem and
Context (keys.py), reads the store, else `_tune`s: one `Session` over the call (evaluation.py, or
isolation.py's worker with isolate=True), so every measurement is stored and judged in one place.
Also: `Choice` (choices.py), config conversion (configs.py), compile workers (compiling.py),
argument checks (arguments.py), ranks of one job agreeing (keys.py, ranks.py).

A subclass of Triton's `Autotuner` keeping its attributes and call protocol (`fn`, `configs`,
`keys`, `cache`, `best_config`, `configs_timings`, `nargs`, `run`, `warmup`, the hooks), so
`isinstance` checks (`@libentry()`, torch.compile) and wrappers (`@triton.heuristics`) keep
working; `patch_triton` (patch.py) builds one wherever Triton's would be built.
"""
from __future__ import annotations

import inspect
import logging
import math
import threading
import time
from typing import Any, Callable, Mapping, Sequence

import triton
from triton.runtime.autotuner import Autotuner as TritonAutotuner

from ..errors import AbductuneError
from ..measure.ptxas_watch import watching
from ..measurement import Measurement
from ..problem import Problem
from ..search import Budget
from ..search.base import Seed
from ..session import NEAREST_SEEDS, Session, SessionResult, nearest_first
from ..space import Config, Space
from ..store import Context, Store
from .arguments import NOTHING_TO_TUNE, check_arguments, key_spec, set_hooks, set_options, set_space
from .asserts import call_asserts, failing, with_asserts
from .choices import Choice, key_space, observed_prediction, pick, theory_prediction, theory_predictions
from .compiling import compile_only, compile_plan, early_start, parallel_warm, peelable
from .configs import LAUNCH_KW, OPTIONS, config_dict, fill_options, launch_kwargs, triton_config
from .evaluation import call_evaluator, printing
from .fixed import FixedEvaluator, call_fixed, fixed_of, own, with_fixed, without
from .keys import (key_problem, key_value, open_store, python_fn, triton_key, triton_toolchain, tuning_lock,
                   why_missed)
from .phases import count_beyond, now, tune_phases
from .record import Recorder

log = logging.getLogger(__name__)

try:  # what a descriptor argument is keyed by: the dtype of the tensor it describes
    from triton.tools.tensor_descriptor import TensorDescriptor as _TensorDescriptor
    _DESCRIPTORS: tuple[type, ...] = (_TensorDescriptor,)
except ImportError:  # pragma: no cover - Triton before descriptors
    _DESCRIPTORS = ()


class Autotuner(TritonAutotuner):
    """The object `@abductune.autotune` returns. Launch it like the kernel: `kernel[grid](...)`.

    An instance of Triton's `Autotuner`, with its attributes: `fn`, `base_fn`, `arg_names`,
    `configs`, `keys`, `cache` (Triton's key of a call that missed -> the triton.Config it
    launches), `best_config`, `configs_timings`, `bench_time`, `nargs` (during a call), the hooks
    and `prune_configs_by`'s parts. Added: `choices` (abductune's key -> Choice: what the hit path
    reads), `stats` (tunes, store hits, predictions, evaluations the budget counted, re-timings on
    top, configs measured beyond the list and keys won there), `last_result` (the last
    SessionResult), `wait()` (join background tunes)."""

    def __init__(self, fn: Any, arg_names: Sequence[str], configs: Sequence[Any] | None, key: Sequence[str],
                 reset_to_zero: Sequence[str] | None = None, restore_value: Sequence[str] | None = None,
                 pre_hook: Callable | None = None, post_hook: Callable | None = None,
                 prune_configs_by: Mapping[str, Any] | None = None, warmup: int | None = None,
                 rep: int | None = None, use_cuda_graph: bool = False, do_bench: Callable | None = None,
                 cache_results: bool = False, **options: Any):
        triton_args = (fn, arg_names, configs, key, reset_to_zero, restore_value)
        triton_kw = dict(pre_hook=pre_hook, post_hook=post_hook, prune_configs_by=prune_configs_by, warmup=warmup,
                         rep=rep, use_cuda_graph=use_cuda_graph, do_bench=do_bench, cache_results=cache_results)
        patch = self.__dict__.pop("_abductune_patch", None)  # set by patch_triton when it built this one
        if patch is None:
            self._setup(*triton_args, **triton_kw, **options)
            return
        try:
            options = {**patch.options, **options}
            if patch.record_only and python_fn(fn, any_wrapper=True).__name__ not in patch.record_only:
                for k in ("record", "record_sample", "record_progress"):
                    options.pop(k, None)  # not one the sweep records: it tunes its own list
            if not configs and options.get("space") is None:
                raise AbductuneError("no configs: nothing to tune (Triton launches its default config)")
            self._setup(*triton_args, **triton_kw, **options)
        except (AbductuneError, TypeError, ValueError) as e:
            # a library's autotuner abductune cannot take over stays what it was written as: its
            # own class (Triton's, or the library's subclass), built by Triton's __init__
            self.__dict__.clear()
            self.__class__ = getattr(type(self), "_abductune_original", TritonAutotuner)
            accepted = inspect.signature(TritonAutotuner.__init__).parameters
            TritonAutotuner.__init__(self, *triton_args, **{k: v for k, v in triton_kw.items() if k in accepted})
            patch.leave_alone(self, str(e).split("\n")[0])
            return
        patch.reached(self)

    def _setup(self, fn: Any, arg_names: Sequence[str], configs: Sequence[Any] | None, key: Sequence[str],
               reset_to_zero: Sequence[str] | None = None, restore_value: Sequence[str] | None = None,
               pre_hook: Callable | None = None, post_hook: Callable | None = None,
               prune_configs_by: Mapping[str, Any] | None = None, warmup: int | None = None,
               rep: int | None = None, use_cuda_graph: bool = False, do_bench: Callable | None = None,
               cache_results: bool = False, *, space: Space | None = None, strategy: str = "pattern",
               strategy_options: Mapping[str, Any] | None = None, seed: int = 0,
               budget: int | Budget | None = None, beyond: int | None = None, bucket: Any = None,
               reference: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None,
               reference_tol: float | None = None, on_miss: str = "tune", store: Any = None,
               implementations: Mapping[str, Callable] | None = None, timer: Callable | None = None,
               compile: str = "auto", judge: bool = True, name: str | None = None,
               kernel_class: str | None = None, wait_timeout_s: float = 3600.0, isolate: bool = False,
               isolate_timeout_s: float = 120.0, database: Any = None, record: Any = None,
               record_sample: int | None = None, record_progress: Callable[[str], None] | None = None) -> None:
        """`__init__`'s work: the arguments checked and set (arguments.py), then the call path's state."""
        self.fn = fn
        self.base_fn = python_fn(fn, any_wrapper=True)
        self.arg_names = list(arg_names)
        check_arguments(fn, self.base_fn, self.arg_names, configs, key, reset_to_zero, restore_value, space=space,
                        on_miss=on_miss, compile=compile, isolate=isolate, isolate_timeout_s=isolate_timeout_s)
        self.configs = list(configs) if configs else ([] if space is not None else [triton.Config({})])
        self.keys = list(key or ())
        self.nargs: dict[str, Any] | None = None
        self.restore_copies: dict[str, Any] = {}  # Triton's; a subclass's hooks may keep copies here
        self.reset_to_zero = list(reset_to_zero or ())
        self.restore_value = list(restore_value or ())
        set_options(self, name=name, kernel_class=kernel_class, on_miss=on_miss, strategy=strategy,
                    strategy_options=strategy_options, seed=seed, budget=budget, beyond=beyond, reference=reference,
                    reference_tol=reference_tol, store=store, cache_results=cache_results,
                    implementations=implementations, compile=compile, judge=judge, wait_timeout_s=wait_timeout_s,
                    isolate=isolate, isolate_timeout_s=isolate_timeout_s, database=database)
        # hooks, prune_configs_by and timing (Triton's attributes); the space grown around the list
        # (its configs are the seeds) and record mode; the key spec the hit path reads
        set_hooks(self, pre_hook, post_hook, prune_configs_by, timer, do_bench, warmup, rep, use_cuda_graph)
        set_space(self, space, budget if beyond is None else beyond, record, record_sample, record_progress)
        _note_source(self)
        self._hooks = [(d, getattr(c, "pre_hook", None)) for d, c in zip(self._list, self.configs)]
        self._buckets_given = bucket is not None
        self._said_budget = False  # a budget below the list is said once (`_budget`)
        self._key_spec = key_spec(self._list, self.arg_names, self.keys, bucket)
        # one config, no search, no alternatives: Triton launches it without tuning; so do we
        self._single: Choice | None = None
        if len(self._list) == 1 and self._grown and not self.implementations and self.budget is None \
                and self.beyond is None:
            self._single = self._choice(self._list[0], "single")

        self.choices: dict[tuple, Choice] = {}  # the hit path: abductune's key -> what it launches
        self.cache: dict[tuple, Any] = {}  # Triton's: Triton's key of a call that missed -> its triton.Config
        self._filed: set[tuple] = set()  # the keys of `cache` this autotuner filed itself
        self.best_config: Any = None
        self.configs_timings: dict[Any, Any] = {}
        self.bench_time = 0.0
        # evaluations: what the budget counted (as in `abductune tune`); retimed: the final
        # run-off and the competing implementations, timed on top of it; beyond_list: configs
        # outside the list measured (beyond_failed: of those, failed; beyond_pruned: rejected
        # unmeasured by the resource model or early_config_prune), won_beyond_list: keys whose winner is outside the list, gain_beyond_list:
        # the largest list-best / winner time ratio among them; kept_listed: keys where the list's best
        # was kept over a config beyond it whose lead some run-off round reversed; ptxas_killed: compiles the ptxas
        # watch killed while a key tuned (measure/ptxas_watch.py)
        self.stats = {"tunes": 0, "store_hits": 0, "predicted": 0, "evaluations": 0, "retimed": 0,
                      "waited_s": 0.0, "beyond_list": 0, "beyond_failed": 0, "beyond_pruned": 0, "won_beyond_list": 0,
                      "gain_beyond_list": 1.0, "kept_listed": 0, "ptxas_killed": 0}
        self.last_result: SessionResult | None = None
        self._lock = threading.RLock()
        self._threads: list[threading.Thread] = []
        self._source_hash: str | None = None
        self._plan: tuple[str, str] | None = None
        self.phases: list[dict[str, Any]] = []  # per tune, where its time went (phases.py)
        try:  # the compile workers start importing while the caller goes on (compile_workers.py)
            early_start(self)
        except Exception as e:  # noqa: BLE001 - an optimisation: the pool starts at the first miss instead
            log.debug("%s: compile pool not started early: %s", self.name, e)

    # -- launching: the hit path is the key, one dict lookup and the launch
    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        choice = self._single
        if choice is None:
            key = self._key(args, kwargs)
            choice = self.choices.get(key)
            if choice is None:
                choice = self._miss(key, args, kwargs)
        self.best_config = choice.triton_config
        if choice.pre_hook is not None:
            choice.pre_hook({**dict(zip(self.arg_names, args)), **kwargs, **choice.kwargs})
        if choice.impl is not None:
            return choice.impl(*args, **{k: v for k, v in kwargs.items() if k not in LAUNCH_KW})
        return self.fn.run(*args, **kwargs, **choice.kwargs)

    def _key(self, args: tuple, kwargs: dict) -> tuple:
        """Triton's key (the key arguments, then the dtype of every argument that has one, a
        tensor descriptor's that of its tensor), with each key value in its bucket."""
        n = len(args)
        key = []
        for i, name, b in self._key_spec:
            v = args[i] if i < n else kwargs.get(name)
            v = v if b is None else b(v)
            key.append(v if type(v) is int else key_value(v, name))  # a tensor: (shape, dtype)
        for a in args:
            if type(a) is int:
                continue
            dt = getattr(a, "dtype", None)
            if dt is not None:
                key.append(dt)
            elif isinstance(a, _DESCRIPTORS):
                key.append(a.base.dtype)
        if len(kwargs) > 2:  # more than grid and warmup: arguments passed by name
            for k, a in kwargs.items():
                dt = getattr(a, "dtype", None)
                if dt is None and isinstance(a, _DESCRIPTORS):
                    dt = a.base.dtype
                if dt is not None:
                    key.append((k, dt))
        return tuple(key)

    def warmup(self, *args: Any, **kwargs: Any) -> list[Any]:
        """Compile every config of the (pruned) list, as Triton's `Autotuner.warmup`."""
        self.nargs = dict(zip(self.arg_names, args))
        try:
            return [self.fn.warmup(*args, **kwargs, **launch_kwargs(config_dict(c)))
                    for c in self.prune_configs(kwargs)]
        finally:
            self.nargs = None

    def wait(self, timeout: float | None = None) -> None:
        """Join the background tunes started by on_miss="predict"."""
        for t in list(self._threads):
            t.join(timeout)
        self._threads = [t for t in self._threads if t.is_alive()]

    # -- hooks (Triton's defaults; restore_value is saved once per tune instead of per trial)
    def _default_pre_hook(self, nargs: dict[str, Any], reset_only: bool = False) -> None:
        for n in self.reset_to_zero:
            if nargs.get(n) is not None:
                nargs[n].zero_()

    def _post(self, nargs: dict[str, Any], exception: BaseException | None, saved: Mapping[str, Any]) -> None:
        if self.post_hook is not None:
            self.post_hook(nargs, exception=exception)
        else:
            for n, v in saved.items():
                nargs[n].copy_(v)

    # -- pruning: Triton's prune_configs over the list
    def prune_configs(self, kwargs: Mapping[str, Any]) -> list[Any]:
        """Triton's: the list after `early_config_prune` and `perf_model`/`top_k`, as triton.Configs
        (reads `self.nargs`, the call's positional arguments by name, as Triton's does)."""
        nargs = dict(self.nargs or {})
        pruned = list(self.configs)
        if self.early_config_prune and pruned:
            pruned = list(self.early_config_prune(pruned, nargs, **kwargs))
            if not pruned:
                raise AbductuneError("early_config_prune returned no config; it must keep at least one")
        if self.perf_model:
            top_k = self.configs_top_k
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = max(1, int(len(pruned) * top_k))
            elif isinstance(top_k, bool) or not isinstance(top_k, int):
                raise AbductuneError(f"prune_configs_by top_k must be a float <= 1.0 or an int, got {top_k!r}")
            if len(pruned) > top_k:
                est = [self.perf_model(**nargs, **kwargs, **launch_kwargs(config_dict(c))) for c in pruned]
                order = sorted(range(len(pruned)), key=lambda i: est[i])
                pruned = [pruned[i] for i in order[:top_k]]
        return pruned

    def _seeds(self, kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The pruned list as configs of the space: a missed key's seeds (a subclass's own
        `prune_configs` is honoured)."""
        return [self._as_space_config(c) for c in self.prune_configs(kwargs)]

    def _as_space_config(self, cfg: Any) -> dict[str, Any]:
        """A list config as a config of the space (with space=, every kwarg it sets must be a
        parameter; options left at Triton's defaults may be left out of the space)."""
        d = config_dict(cfg)
        if self._grown:
            return fill_options(self.space, d)
        extra = [k for k, v in d.items() if k not in self.space.names and not (k in OPTIONS and v == OPTIONS[k])]
        if extra:
            raise AbductuneError(f"config {d} sets {', '.join(extra)}, which space= has no parameter for; add "
                                 "them to the space (a one-value Choice fixes a value) or leave them out")
        return {n: d[n] if n in d else self.space[n].default_value for n in self.space.names}

    def _choice(self, config: Mapping[str, Any], source: str, time_ms: float | None = None) -> Choice:
        config = own(config, self.space)  # a key's space may hold tiles the caller passes (`autotune.fixed`)
        if "impl" in config:
            impl = self.implementations.get(config["impl"])
            if impl is None:
                raise AbductuneError(f"the store chose implementation {config['impl']!r}, which this "
                                     f"autotuner does not offer (implementations: {list(self.implementations)})")
            return Choice(config, {}, None, impl, source, time_ms, None)
        hook = self._config_hook(config)
        return Choice(config, launch_kwargs(config), hook, None, source, time_ms, triton_config(config, hook))

    def _config_hook(self, config: Mapping[str, Any]) -> Callable | None:
        """A list config's own pre_hook; a config the search found takes its nearest list
        config's (hooks such as `init_to_zero` are usually the same for the whole list)."""
        hooks = [(d, h) for d, h in self._hooks if self.space.is_valid(d)]
        if not hooks:
            return None
        for d, h in hooks:
            if d == dict(config):
                return h

        def distance(d: Mapping[str, Any]) -> float:  # `config` may hold values beyond the space (key_space)
            return sum(abs(p.index(d[p.name]) - p.index(p.clamp(config.get(p.name)))) if p.ordered
                       else float(d[p.name] != config.get(p.name)) for p in self.space.params)
        return min(hooks, key=lambda dh: distance(dh[0]))[1]

    # -- a missed key
    def _miss(self, key: tuple, args: tuple, kwargs: dict) -> Choice:
        with self._lock:
            got = self.choices.get(key)
            if got is not None:
                return got
            t0 = time.perf_counter()
            nargs = dict(zip(self.arg_names, args))
            self.nargs = nargs  # Triton's: the call's arguments by name while it is decided
            try:
                choice = self._decide_key(key, args, kwargs, nargs, t0)
            finally:
                self.nargs = None
            tk = triton_key(self.arg_names, self.keys, nargs, kwargs)
            if choice.source != "failed" and choice.triton_config is not None and type(self.cache) is dict:
                self.cache[tk] = choice.triton_config  # what Triton's cache would hold for this call
                self._filed.add(tk)
            return choice

    def _decide_key(self, key: tuple, args: tuple, kwargs: dict, nargs: dict[str, Any], t0: float) -> Choice:
        clash = set(kwargs) & set(self.space.names)
        if clash:
            raise AbductuneError(f"conflicting meta-parameters: {', '.join(sorted(clash))} are passed to "
                                 f"{self.name} and tuned; do not pass tuned parameters yourself")
        tk = triton_key(self.arg_names, self.keys, nargs, kwargs)
        given = self.cache.get(tk) if type(self.cache) is dict and tk not in self._filed else None
        if given is not None and hasattr(given, "kwargs"):
            # a config filed in Triton's `cache` by someone else (a subclass's own config files,
            # the user): launched as Triton's `run` would, without tuning
            choice = self._choice(fill_options(self.space, config_dict(given)), "given")
            self.choices[key] = choice
            return choice
        seeds = self._seeds(kwargs)
        if len(seeds) == 1 and self._grown and not self.implementations and self.budget is None \
                and self.beyond is None:
            choice = self._choice(seeds[0], "single")  # Triton: one config left, nothing to time
            self.choices[key] = choice
            return choice
        problem = key_problem(self, nargs, kwargs)
        space = key_space(problem, self.space) if self._beyond else self.space
        space = with_fixed(space, call_fixed(self, space, kwargs))  # tiles the caller passes, seen by the knowledge
        asserted = call_asserts(self, space, {**nargs, **kwargs})  # the kernel's static_asserts, for this call
        if asserted:
            narrowed = with_asserts(space, asserted)
            if narrowed is not space:
                space = narrowed
                gone = set(failing(asserted, space, seeds))
                if gone:
                    log.info("%s: %d listed config(s) fail the kernel's own %s for key %s: not tried",
                             self.name, len(gone), " and ".join(f"static_assert({c})" for c in asserted), key)
                    seeds = [c for i, c in enumerate(seeds) if i not in gone]
        store = open_store(self.store_spec)
        ctx = Context.of(problem, space, triton_toolchain())
        budget = self._budget(len(seeds))
        choice, why = self._stored_choice(store, ctx, budget)
        if choice is not None:
            self.stats["store_hits"] += 1
            self._report(key, choice, time.perf_counter() - t0, "from the store, 0 evaluations")
            self.choices[key] = choice
            return choice
        log.info("%s: key %s missed: %s", self.name, key, why)
        if self.isolate and not self._isolatable:  # in the caller, before any (background) tune
            from .isolation import worker_spec

            worker_spec(self)
            self._isolatable = True
        if self.on_miss == "predict":
            choice = self._predict(store, ctx, seeds, problem)
            self.stats["predicted"] += 1
            self.choices[key] = choice
            clones = tuple(_clone(a) for a in args)
            ckw = {k: _clone(v) for k, v in kwargs.items()}
            t = threading.Thread(target=self._tune_in_background, name=f"abductune-{self.name}",
                                 args=(key, clones, ckw, problem, ctx, seeds, budget, space), daemon=True)
            self._threads.append(t)
            t.start()
            return choice
        self._t_miss = t0
        choice = self._tune(key, args, kwargs, problem, ctx, seeds, budget, space)
        if choice.source != "failed":
            self.choices[key] = choice
        return choice

    def _budget(self, n_seeds: int) -> Budget:
        if self.beyond is not None and self.record is None:
            return Budget(n_seeds + self.beyond)  # each key's list, then `beyond` more
        b = self.budget
        if b is not None and b.evaluations is not None and b.evaluations < n_seeds and self.record is None:
            # a budget never cuts the list short: what triton.autotune measures is measured, so its
            # pick is never missed; a budget below the list searches nothing beyond it (said once:
            # one budget under patch_triton meets lists of every length)
            if not self._said_budget:
                self._said_budget = True
                log.warning("%s: budget=%d is below its list of %d configs: the whole list is measured, as "
                            "triton.autotune does, and nothing beyond it (budget=%d would also search %d "
                            "beyond it)", self.name, b.evaluations, n_seeds, n_seeds + b.evaluations,
                            b.evaluations)
            return Budget(n_seeds, b.seconds)
        if b is not None:
            return b
        # a list only: measure the list, as triton.autotune does (the same cold cost)
        return Budget(n_seeds if self._grown else max(32, n_seeds))

    def _tune_key(self) -> str:
        """The Session's identity of this tune (strategy, seed, options), computed once."""
        if self._tk is None:
            from ..search import make_strategy
            from ..session import tune_key

            self._tk = tune_key(make_strategy(self.search_strategy, seed=self.seed, **self.strategy_options),
                                self.strategy_options)
        return self._tk

    def _stored_choice(self, store: Store, ctx: Context, budget: Budget) -> tuple[Choice | None, str]:
        """A finished tune of this context (same strategy and options, budget at least ours) or
        an imported winner: read it, measure nothing. Else None and why the key missed. Record
        mode always measures: a key an earlier run stored would otherwise write no dataset."""
        if self.record is not None:
            return None, "record mode measures every key (the store is not read)"
        runs = [r for r in store.runs(ctx) if r.status == "done" and r.winner_id is not None]
        tk = self._tune_key()

        def enough(r: Any) -> bool:
            b = (r.options.get("budget") or [None])[0]
            return b is None or (budget.evaluations is not None and b >= budget.evaluations)
        mine = [r for r in runs if r.tune_key == tk and enough(r)]
        src = mine[-1] if mine else next((r for r in reversed(runs) if r.strategy == "import"), None)
        if src is None:
            return None, why_missed(store, ctx, runs)
        [winner] = store.by_id([src.winner_id]) or [None]
        if winner is None:
            return None, f"run {src.id} names winner {src.winner_id}, which is not in the store"
        rows = store.measurements(ctx)
        if any(not any(m.config == {"impl": n} for m in rows) for n in self.implementations):
            return None, "an implementation offered now was never timed for this key"
        return self._decide(winner, rows, "store"), ""

    def _decide(self, winner: Measurement | None, rows: Sequence[Measurement], source: str) -> Choice:
        """The Triton winner, unless an offered implementation is faster (see `pick`)."""
        cfg, t = pick(winner, rows, self.implementations)
        if cfg is None:
            raise AbductuneError(f"{self.name}: no config ran (see the log for each config's error)")
        return self._choice(cfg, source, t if math.isfinite(t) else None)

    def _predict(self, store: Store, ctx: Context, seeds: Sequence[Config], problem: Problem | None = None) -> Choice:
        """What a missed key launches while it is tuned: the store's best config for the
        nearest shape of this kernel (same space, device, toolchain, dtypes, bucket group; this
        shape on a sibling GPU first, `Store.best_nearby`),
        else the theory store's zero-shot prediction for the kernel's class and regime, else
        the observed database's config (harvested bests, imported vLLM tables), else the
        first config of the list the resource model lets launch (`runnable_default`)."""
        near = store.best_nearby(ctx)
        if near is not None and self.space.is_valid(near.config):
            log.info("%s: serving %s from the nearest stored shape %s (tuned on %s) while tuning", self.name,
                     near.config, near.context.dims, near.context.hardware or "an unknown GPU")
            return self._choice(near.config, "predicted")
        pred = theory_prediction(problem, self.space) if problem is not None else None
        if pred is not None:
            log.info("%s: serving the theory prediction %s while tuning (%s)", self.name, pred.config,
                     pred.describe())
            return self._choice(dict(pred.config), "predicted")
        seen = observed_prediction(problem, self.space, self.database) if problem is not None else None
        if seen is not None:
            log.info("%s: serving the observed database's config %s while tuning (%s)", self.name, seen.config,
                     seen.describe())
            return self._choice(dict(seen.config), "predicted")
        first = seeds[0] if seeds else self.space.default()
        if problem is not None:  # a list written for another GPU may start with a config this one cannot launch
            from ..theory.resources import runnable_default

            first, moved = runnable_default(problem, self.space, dict(first), seeds)
            for line in moved:
                log.info("%s: %s", self.name, line)
        return self._choice(first, "predicted")

    def _tune_in_background(self, key: tuple, args: tuple, kwargs: dict, *rest: Any) -> None:
        try:
            choice = self._tune(key, args, kwargs, *rest)
            if choice.source != "failed":
                self.choices[key] = choice  # swap the winner in
        except Exception:  # noqa: BLE001 - a background tune must not kill the program
            log.exception("%s: background tune of key %s failed; keeping the prediction", self.name, key)

    # -- tuning: one Session on the caller's arguments
    def _tune(self, key: tuple, args: tuple, kwargs: dict, problem: Problem, ctx: Context,
              seeds: Sequence[Config], budget: Budget, space: Space) -> Choice:
        t0 = time.perf_counter()
        marks = {"start": t0}
        store = open_store(self.store_spec)
        with tuning_lock(self, store, ctx, budget, lambda: self._stored_choice(store, ctx, budget)[0] is not None), \
                watching() as watch:  # a ptxas that runs for minutes is killed: its config fails, the tune goes on
            kills = len(watch.kills) if watch is not None else 0
            choice, _ = self._stored_choice(store, ctx, budget)  # another process may have finished it
            if choice is not None:
                self.stats["store_hits"] += 1
                self._report(key, choice, time.perf_counter() - t0, "tuned by another process, 0 evaluations")
                return choice
            nargs = dict(zip(self.arg_names, args))
            full = {**nargs, **kwargs}
            saved = {n: full[n].clone() for n in self.restore_value if full.get(n) is not None}
            ev = warm = None
            try:
                plan = self._compile_plan()
                if plan[0] == "parallel":  # the pool starts now unless it did at decoration
                    warm = parallel_warm(plan[1], args, kwargs, self._workers_failed,
                                         self.fn if peelable(self.fn) else None, compile_only(self, args, kwargs))
                fixed = fixed_of(space, self.space)
                options = self.strategy_options
                if fixed:  # the search sees the call's tiles; the launch gets them from the call alone
                    seeds = [{**s, **fixed} for s in seeds]
                    ev = FixedEvaluator(call_evaluator(self, problem, args, kwargs, nargs, saved,
                                                       without(space, fixed), warm, fixed), space, fixed)
                    if "configs" in options:  # record mode's plan, in the key's space
                        options = {**options, "configs": [{**c, **fixed} for c in options["configs"]]}
                else:
                    ev = call_evaluator(self, problem, args, kwargs, nargs, saved, space, warm)
                if self.record is not None:  # each config appended to the key's .jsonl as it lands
                    recorder = Recorder(self, problem, space, store.memo(ctx, space), options["configs"])
                    ev = recorder.evaluator(ev)
                baselines = {"configs": list(seeds)} if seeds and (budget.evaluations is None or
                                                                   budget.evaluations >= len(seeds)) else {}
                seed_list = [Seed(s, "configs") for s in seeds]
                if (budget.evaluations is None or budget.evaluations > len(seeds)) and self.record is None:
                    # room beyond the user's list: the first bets are this kernel's own winners on
                    # the nearest shapes tuned before (any bucket: measured on this very kernel,
                    # they go ahead of every rule learned elsewhere), then the theory store's
                    # predictions (the best rule's, then the runner-up's), then the observed database's
                    # (here, not by the Session's `nearest`: they must fit in the room left
                    # beside the user's list, and the ranker's seeds in what room is left after)
                    bets = nearest_first([], store.nearest_bests(ctx, NEAREST_SEEDS), space)
                    bets += [Seed(dict(p.config), f"theory:{p.rule.regime}" + (":runner-up" if i else ""))
                             for i, p in enumerate(theory_predictions(problem, space))]
                    seen = observed_prediction(problem, space, self.database)
                    if seen is not None:
                        bets.append(Seed(dict(seen.config), f"observed:{seen.level}"))
                    given = [dict(s) for s in seeds]
                    fresh = []
                    for b in bets:
                        if b.config not in given and b.config not in [f.config for f in fresh]:
                            fresh.append(b)
                    seed_list = fresh + seed_list
                    # then the ranker's top configs, in what room the budget leaves: never one of the
                    # user's configs displaced (heuristics.seeds.RANKER_SEEDS)
                    from ..heuristics.seeds import RANKER_SEEDS, ranker_prior, ranker_seeds

                    room = RANKER_SEEDS if budget.evaluations is None else budget.evaluations - len(seed_list)
                    known = [s.config for s in seed_list]
                    seed_list += [Seed(c, src) for c, src in ranker_seeds(problem, space, min(RANKER_SEEDS, room))
                                  if c not in known]
                    # where abduction's exploring share looks first (no other strategy reads it)
                    abduction = getattr(self.search_strategy, "name", self.search_strategy) == "abduction"
                    prior = ranker_prior(problem, space) if abduction else []
                else:
                    prior = []
                marks["session"] = now()
                with Session(ev, strategy=self.search_strategy, seed=self.seed, options=options,
                             budget=budget, seeds=seed_list, store=store,
                             toolchain=ctx.toolchain, batch_size=max(8, len(seeds)), judge=self.judge,
                             wait_timeout_s=self.wait_timeout_s, prior=prior) as session:
                    # the implementations are timed as baselines and join the final run-off
                    result = session.run(baselines=baselines, impls=list(self.implementations))
                marks["session_end"] = now()
            finally:
                if ev is not None:
                    ev.close()  # an isolated evaluator's worker ends here
                # Triton resets reset_to_zero after tuning; restore_value is restored as well
                self.pre_hook({**full}, reset_only=True)
                for n, v in saved.items():
                    full[n].copy_(v)
        self.last_result = result
        if self.record is not None:
            recorder.finish(result)
        self.stats["tunes"] += 1
        if watch is not None:  # (other keys tuning at once in this process may add theirs)
            self.stats["ptxas_killed"] += len(watch.kills) - kills
        self.stats["evaluations"] += result.evaluations
        self.stats["retimed"] += len(result.runoff)
        count_beyond(self, result)
        self.bench_time = time.perf_counter() - t0
        self.configs_timings = {triton_config(own(m.config, self.space)): list(m.samples_ms) or [m.objective]
                                for m in result.history if "impl" not in m.config}
        rows = store.measurements(ctx)
        try:
            choice = self._decide(result.winner, rows, "tuned")
        except AbductuneError:
            errors = sorted({m.error.splitlines()[0] for m in rows if not m.ok and m.error})[:3]
            log.error("%s: no config of key %s ran: %s", self.name, key, "; ".join(errors))
            return self._choice(seeds[0] if seeds else self.space.default(), "failed")
        log.info("%s: tuned key %s in %.2fs: %d evaluations (%d seeds from the config list, strategy %s, "
                 "%d spent before), %s at %.4g ms", self.name, key, self.bench_time, result.evaluations,
                 len(seeds), result.strategy, result.spent_before, choice.name, choice.time_ms or math.nan)
        self._report(key, choice, self.bench_time, f"{ev.calls} evaluations")
        marks["end"] = now()
        self.phases.append({"key": repr(key)[:200], "lookup_s": round(t0 - getattr(self, "_t_miss", t0), 4),
                            **tune_phases(result, marks, warm, plan, ev)})
        return choice

    def _workers_failed(self, why: str) -> None:
        """Compile workers could not compile this kernel (not one config: the kernel): the rest of
        its configs, this tune's and later ones, compile in this process (compiling.parallel_warm
        said so once)."""
        self._plan = ("serial", f"compile workers failed on it: {why}")

    def _compile_plan(self) -> tuple[str, str]:
        if self._plan is None:
            self._plan = compile_plan(self, self.compile)
            if self._plan[0] == "serial" and self.compile != "serial":
                log.warning("%s: compiling configs one by one in this process: %s", self.name, self._plan[1])
        return self._plan

    def _report(self, key: tuple, choice: Choice, seconds: float, how: str) -> None:
        if printing():
            print(f"abductune autotuning for function {self.name},\nwith key as {key},\n"
                  f"finished after {seconds:.2f}s ({how}),\nbest config selected: {choice.name};")


def _clone(v: Any) -> Any:
    """A copy of a tensor argument for a background tune (the caller may reuse or free its own)."""
    return v.clone() if hasattr(v, "clone") and hasattr(v, "data_ptr") else v


def autotune(configs: Sequence[Any] | None = None, key: Sequence[str] = (), prune_configs_by: Mapping[str, Any] | None = None,
             reset_to_zero: Sequence[str] | None = None, restore_value: Sequence[str] | None = None,
             pre_hook: Callable | None = None, post_hook: Callable | None = None, warmup: int | None = None,
             rep: int | None = None, use_cuda_graph: bool = False, do_bench: Callable | None = None,
             cache_results: bool = False, **options: Any) -> Callable[[Any], Autotuner]:
    """Decorator for a `@triton.jit` function, with `triton.autotune`'s arguments and meaning.

    abductune's own keyword options: `space` (a Space to search; the configs become seeds),
    `strategy` ("pattern"; any registered name), `strategy_options`, `seed`, `budget` (int
    evaluations or a Budget; default: the list's length with a list only, else 32; with a budget
    the space also reaches one step beyond the list's hull along tile, warps, stages and grouping
    roles, and per shape to the theory store's predictions; a budget below the list's length
    measures the whole list and nothing beyond), `beyond` (instead of `budget`: each key measures
    its whole list, then this many evaluations beyond it, in the same grown space: one setting
    for lists of every length, as under `patch_triton`), `bucket`
    (per key argument: "exact", "pow2", ("align", N) or a callable; a dict name -> bucket, or
    one for all), `reference` (args dict -> {output name: expected}; a config whose outputs
    differ is `wrong_result` and never wins), `reference_tol`, `on_miss` ("tune" or "predict"),
    `store` (a path or a Store; default $ABDUCTUNE_STORE or the user cache dir),
    `implementations` ({name: callable(*args, **kwargs)} competing with the kernel), `timer`
    (config, launch -> ms; for tests), `compile` ("auto", "parallel", "serial"), `judge`
    (re-time close contenders, default True), `name`, `kernel_class`, `wait_timeout_s`,
    `isolate` (measure in a worker process that a crashing config may kill; the kernel and
    every callable option must be importable module-level names), `isolate_timeout_s`
    (seconds a config may take there before it counts as a timeout; default 120), `database`
    (observed-heuristics database path or Database; default the packaged one), `record` (a
    folder: a key that must be tuned measures the whole space grown around the list instead, or
    a fixed sample of it past 1,000 valid configs, and writes it there as a dataset, each config
    appended to `<record>/<kernel>/<shape>.jsonl` as it is measured, so a rerun measures only the
    rest; what `abductune sweep --call` sets through `patch_triton`), `record_sample` (record mode's
    sample size past 1,000 valid configs, a positive int; default 400, the kernel's own list is
    always in it), `record_progress` (a function given record mode's progress lines: at a key's
    start, at most every 10 s, at its end; default the log at INFO).
    """
    if isinstance(configs, (list, tuple, type(None))) and not configs and options.get("space") is None:
        raise AbductuneError(NOTHING_TO_TUNE.format(what="no configs" if configs is None else "configs=[]"))

    def decorator(fn: Any) -> Autotuner:
        arg_names = getattr(fn, "arg_names", None)
        if arg_names is None:
            base = python_fn(fn, any_wrapper=True)
            if base is None:
                raise AbductuneError(f"@abductune.autotune decorates a @triton.jit function, got {fn!r}")
            arg_names = list(inspect.signature(base).parameters)
        return Autotuner(fn, arg_names, configs, key, reset_to_zero, restore_value, pre_hook=pre_hook,
                         post_hook=post_hook, prune_configs_by=prune_configs_by, warmup=warmup, rep=rep,
                         use_cuda_graph=use_cuda_graph, do_bench=do_bench, cache_results=cache_results, **options)
    return decorator


def _note_source(tuner: Any) -> None:
    """Tell the theory store's scope checks the kernel's source, so a rule confirmed on kernels
    that hold a row whole is not served to one that loops over it (theory/store/scope.py)."""
    from .. import kernel_facts
    from ..theory.store.scope import note_facts, note_source
    from .record import source_text, tile_facts, tile_loads

    try:
        src = source_text(tuner)
    except Exception as e:  # noqa: BLE001 - an unreadable source leaves the loops unknown, never fails the decorator
        log.debug("%s: source not read: %s: %s", tuner.name, type(e).__name__, e)
        return
    if src:
        note_source(tuner.name, src)
        # and its tiles' loops, which the classifier reads too (which dim BLOCK_M walks)
        note_facts(tuner.name, tile_facts(tuner))
        kernel_facts.tell_loads(tuner.name, tile_loads(tuner))  # what the resource model counts
