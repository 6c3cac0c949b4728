"""The decorator's arguments, checked and turned into an `Autotuner`'s settings when it is built."""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import AbductuneError
from ..search import Budget
from ..space import Space
from .configs import LAUNCH_KW, grow_space, space_from_configs
from .keys import bucket_function

# an empty list searches nothing and launches with no meta-parameters: refused when decorating
NOTHING_TO_TUNE = ("@abductune.autotune with {what} has nothing to tune: give at least one triton.Config "
                   "(triton.Config({{}}) launches with Triton's defaults), or space= to search (budget= "
                   "alone gives no space)")


def check_arguments(fn: Any, base_fn: Any, arg_names: Sequence[str], configs: Sequence[Any] | None,
                    key: Sequence[str] | None, reset_to_zero: Sequence[str] | None,
                    restore_value: Sequence[str] | None, *, space: Space | None, on_miss: str, compile: str,
                    isolate: Any, isolate_timeout_s: Any) -> None:
    """Refuse, before anything is built, what the decorator cannot tune: not a @triton.jit
    function, an empty list, a name that is not an argument, an unknown option value."""
    if base_fn is None:
        raise AbductuneError(f"@abductune.autotune decorates a @triton.jit function, got {fn!r}")
    if configs is not None and not list(configs) and space is None:
        raise AbductuneError(NOTHING_TO_TUNE.format(what="configs=[]"))
    # like Triton >= 3.9: a misspelt name would silently never re-tune; say so now
    for what, names in (("key", key), ("reset_to_zero", reset_to_zero), ("restore_value", restore_value)):
        unknown = [n for n in list(names or ()) if n not in arg_names]
        if unknown:
            raise AbductuneError(f"{what} names {', '.join(unknown)}, which are not arguments of "
                                 f"{base_fn.__name__}; its arguments are {', '.join(arg_names)}")
    if on_miss not in ("tune", "predict"):
        raise AbductuneError(f"on_miss={on_miss!r}: use 'tune' (block and tune) or 'predict' (serve a "
                             "prediction at once and tune in the background)")
    if compile not in ("auto", "serial", "parallel"):
        raise AbductuneError(f"compile={compile!r}: use 'auto', 'parallel' or 'serial'")
    if not isinstance(isolate, bool):
        raise AbductuneError(f"isolate={isolate!r}: use True (measure in a worker process) or False")
    if isinstance(isolate_timeout_s, bool) or not isinstance(isolate_timeout_s, (int, float)) \
            or not isolate_timeout_s > 0:
        raise AbductuneError(f"isolate_timeout_s={isolate_timeout_s!r}: seconds per config, a number > 0")


def check_beyond(budget: Any, beyond: Any) -> None:
    """`beyond=` is a count of evaluations past each list, and excludes `budget=`."""
    if beyond is None:
        return
    if budget is not None:
        raise AbductuneError(f"give budget= or beyond=, not both (budget={budget!r}, beyond={beyond!r}): "
                             "beyond=N measures each list and then N more")
    if isinstance(beyond, bool) or not isinstance(beyond, int) or beyond < 0:
        raise AbductuneError(f"beyond= is a count of evaluations past the list, an int >= 0; got {beyond!r}")


def set_options(tuner: Any, *, name: str | None, kernel_class: str | None, on_miss: str, strategy: str,
                strategy_options: Mapping[str, Any] | None, seed: int, budget: int | Budget | None,
                beyond: int | None,
                reference: Callable | None, reference_tol: float | None, store: Any, cache_results: bool,
                implementations: Mapping[str, Callable] | None, compile: str, judge: bool, wait_timeout_s: float,
                isolate: bool, isolate_timeout_s: float, database: Any) -> None:
    """abductune's own options as the autotuner's attributes (after `check_arguments`)."""
    tuner.name = name or tuner.base_fn.__name__
    tuner.kernel_class = kernel_class
    tuner.on_miss = on_miss
    tuner.search_strategy = strategy  # not `strategy`: a library's subclass may use that name (FlagGems' LibTuner)
    tuner.strategy_options = dict(strategy_options or {})
    tuner.seed = seed
    tuner._tk = None
    tuner._tune_key()  # an unknown strategy or option fails here, not at the first launch
    tuner.budget = budget if budget is None or isinstance(budget, Budget) else Budget(budget)
    check_beyond(budget, beyond)
    tuner.beyond = beyond
    tuner.reference = reference
    tuner.reference_tol = reference_tol
    tuner.store_spec = store
    tuner.cache_results = cache_results  # accepted for Triton compatibility: the store always persists
    tuner.implementations = dict(implementations or {})
    tuner.compile = compile
    tuner.judge = judge
    tuner.wait_timeout_s = wait_timeout_s
    tuner.isolate = isolate
    tuner.isolate_timeout_s = float(isolate_timeout_s)
    tuner.database = database  # observed-heuristics database: a path, a Database, None (packaged)
    if database is not None:
        from ..heuristics.observed import load_database

        tuner.database = load_database(database)  # a bad path fails here, not at the first miss
    tuner._isolatable = False  # checked at the first key that must be tuned


def set_hooks(tuner: Any, pre_hook: Callable | None, post_hook: Callable | None,
              prune_configs_by: Mapping[str, Any] | None, timer: Callable | None, do_bench: Callable | None,
              warmup: int | None, rep: int | None, use_cuda_graph: bool) -> None:
    """The hooks, pruning and timing, with Triton's semantics and attribute names (a user hook
    replaces the default one; an injected timer(config, launch), else do_bench, Triton's or
    warmup/rep's)."""
    tuner.user_defined_pre_hook = pre_hook is not None
    tuner.user_defined_post_hook = post_hook is not None
    tuner.pre_hook = pre_hook or tuner._default_pre_hook
    tuner.post_hook = post_hook
    tuner.perf_model = tuner.early_config_prune = None
    tuner.configs_top_k = 1.0
    if prune_configs_by:
        tuner.perf_model = prune_configs_by.get("perf_model")
        tuner.configs_top_k = prune_configs_by.get("top_k", 1.0)
        tuner.early_config_prune = prune_configs_by.get("early_config_prune")
    tuner._timer = timer
    tuner._do_bench = do_bench
    tuner.num_warmups, tuner.num_reps, tuner.use_cuda_graph = warmup, rep, use_cuda_graph
    if warmup is not None or rep is not None or use_cuda_graph:
        # stack: here, Autotuner._setup, Autotuner.__init__, the code that built the autotuner
        warnings.warn("warmup, rep and use_cuda_graph are deprecated in triton.autotune; pass do_bench",
                      DeprecationWarning, stacklevel=4)


def check_record_options(record: Any, record_sample: Any, record_progress: Any, where: str) -> None:
    """Record mode's own options, refused in one line before anything is built (`where`: who
    was given them, e.g. "patch_triton")."""
    if record_sample is not None and (isinstance(record_sample, bool) or not isinstance(record_sample, int)
                                      or record_sample < 1):
        raise AbductuneError(f"{where}: record_sample={record_sample!r}: record mode's sample size (configs "
                             "drawn from a grown space past 1,000 valid configs, beside the kernel's own list) "
                             "must be a positive integer")
    if record_progress is not None and not callable(record_progress):
        raise AbductuneError(f"{where}: record_progress={record_progress!r}: give a function taking one line "
                             "of text, or None (the log at INFO)")
    if record is None and (record_sample is not None or record_progress is not None):
        raise AbductuneError(f"{where}: record_sample and record_progress go with record=DIR (record mode)")


def set_space(tuner: Any, space: Space | None, budget: int | Budget | None, record: Any,
              record_sample: int | None = None, record_progress: Callable[[str], None] | None = None) -> None:
    """The space: given, or grown around the list (whose configs are the seeds); with a budget
    and no record mode, one step beyond the list's hull along roles (configs.grow_space), and per
    key the theory store's predicted values beyond that (choices.key_space). Reads `tuner.configs`
    and `tuner.name`; sets `space`, `_grown`, `_beyond`, `_list` and record mode's settings
    (`record_sample`: the sample size past the exhaustive limit, default `sweep.SAMPLE_SIZE`;
    `record_progress`: where its progress lines go, default the log at INFO)."""
    check_record_options(record, record_sample, record_progress, "@abductune.autotune")
    tuner.space = space if space is not None else space_from_configs(tuner.configs, tuner.name)
    tuner._grown = space is None
    tuner._beyond = tuner._grown and budget is not None and not record
    # record mode grows the same step: the recorded data then covers what a budgeted search
    # of this kernel would measure, so replay can judge that search on it
    if tuner._beyond or (tuner._grown and record):
        tuner.space = grow_space(tuner.space)
    tuner._list = [tuner._as_space_config(c) for c in tuner.configs]
    # record mode (`abductune sweep --call`): a key that must be tuned measures the whole
    # grown space instead (or a fixed sample past 1,000 valid configs, with the list in it) and
    # writes it as a dataset under `record`/<kernel>/, as `abductune sweep` does for a spec
    tuner.record = Path(record) if record else None
    tuner.recorded = []  # datasets written in record mode
    tuner._record_sample = None
    tuner.record_progress = record_progress
    if tuner.record is not None:
        from ..sweep import sample_configs

        # the size passed only when given: a caller may have set sample_configs' default
        todo, tuner._record_sample = sample_configs(tuner.space, tuner._list, **(
            {} if record_sample is None else {"size": record_sample}))
        tuner.search_strategy, tuner.strategy_options = "fixed", {"configs": todo}
        tuner.budget, tuner.on_miss, tuner._tk = Budget(len(todo)), "tune", None
        tuner._tune_key()


def key_spec(configs: Sequence[Mapping[str, Any]], arg_names: Sequence[str], keys: Sequence[str],
             bucket: Any) -> list[tuple[int, str, Callable | None]]:
    """What `Autotuner._key` reads: (argument index, name, bucket function) per key argument,
    after refusing a list config that sets a launch keyword and a bucket for a non-key name."""
    for d in configs:
        clash = set(d) & set(LAUNCH_KW)
        if clash:
            raise AbductuneError(f"config {d} sets {', '.join(clash)}, which the launch itself passes")
    bad = [n for n in (bucket if isinstance(bucket, Mapping) else {}) if n not in keys]
    if bad:
        raise AbductuneError(f"bucket names {', '.join(bad)}, which are not in key={keys}")
    return [(arg_names.index(n), n, bucket_function(bucket.get(n) if isinstance(bucket, Mapping) else bucket, n))
            for n in keys]
