"""abductune inside Helion: its search algorithm, its AutotunerHeuristics and the version check.

    import abductune.integrations.helion as ath      # registers everything (see install)

    @helion.kernel(autotuner_fn=ath.autotuner)       # this kernel tunes with abductune
    def matmul(x, y): ...

    HELION_AUTOTUNER=abductune python train.py       # every kernel, once the module is imported

Importing this module imports Helion (after `check_helion`; a missing or unsupported Helion
is one `HelionError` line) and calls `install()`: `AbductuneSearch` joins Helion's
`search_algorithms` registry as "abductune", and the two heuristics join the Triton
backend's `AutotunerHeuristic` registry (`HEURISTICS_BY_BACKEND["triton"]`), after Helion's
own. ABDUCTUNE_HELION_HEURISTICS=0 leaves the heuristics out. ABDUCTUNE_HELION_PROMOTE=1
(or `install(promote=True)`) makes our seed the config Helion runs with `autotune_effort="none"`
(Helion's `promote_seed_to_default`) where none of Helion's own heuristics promoted one for the
kernel: Helion's promoted seeds are validated per GPU by Helion, ours fill the kernels they do
not cover. ABDUCTUNE_HELION_PROMOTE=always (`promote="always"`) puts ours first everywhere.

The heuristics (`AbductuneTheoryHeuristic`, `AbductuneObservedHeuristic`) read the kernel's
facts from the ConfigSpec and its bound inputs (`helion_kernel.facts_of`), are eligible when
the kernel is of a class abductune knows on a GPU it can name, and seed one config each: the
theory store's first prediction, the observed database's best template. Helion records which
fired (`ConfigSpec.autotuner_heuristics`); so does `FIRED` here, with the config and why.
The search itself is `helion_search.py`; the observed database in Helion's layout is
`helion_observed.py`. Helion's benchmark worker (a process that takes 10-15 s to start) is
kept across abductune's searches in a process (`helion_worker.py`; `release_worker`,
`prestart_worker`, ABDUCTUNE_HELION_WORKER_IDLE_S).
"""
from __future__ import annotations

import logging
import os
from importlib import metadata
from typing import Any, Callable, Mapping, Sequence

from .helion_kernel import facts_of
from .helion_space import HelionError
from .versions import major_minor

log = logging.getLogger(__name__)

NAME = "abductune"  # the name in Helion's search_algorithms registry (HELION_AUTOTUNER)
SUPPORTED = ((1, 4), (1, 5))  # Helion minor versions, both ends included
FIRED: list[dict[str, Any]] = []  # what our heuristics did, newest last (capped)
_FIRED_KEEP = 256


def helion_version(text: str) -> tuple[int, int]:
    try:
        return major_minor(text)
    except ValueError:
        raise HelionError(f"cannot read the Helion version {text!r}") from None


def check_helion(version: str | None = None) -> Any:
    """The `helion` module when it imports and its version is supported; else HelionError,
    one line naming what to install."""
    lo, hi = SUPPORTED
    want = f"Helion {lo[0]}.{lo[1]} to {hi[0]}.{hi[1]}"
    if version is None:
        try:
            version = metadata.version("helion")
        except metadata.PackageNotFoundError:
            raise HelionError(f"abductune.integrations.helion needs {want} (pip install 'abductune[helion]'); "
                              "Helion is not installed") from None
    if not lo <= helion_version(version) <= hi:
        raise HelionError(f"abductune.integrations.helion supports {want}; this is Helion {version}: "
                          "install one of those")
    try:
        import helion
        from helion import autotuner  # noqa: F401 - the registry lives there
        from helion._compiler import autotuner_heuristics  # noqa: F401
    except ImportError as e:  # e.g. Helion 1.5.1 with torch 2.11 (IntelGPUError)
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise HelionError(f"Helion {version} does not import here ({type(e).__name__}: {first}); "
                          f"install a Helion that matches this torch ({want}; 1.5.0 for torch 2.11)") from None
    return helion


# ----------------------------------------------------------------------------- the heuristics

def _env_tensors(env: Any) -> list[tuple[tuple[int, ...], Any]]:
    """(shape, dtype) of the kernel's tensor inputs at bind time, sizes as hints."""
    out = []
    for t in getattr(env, "input_sources", {}) or {}:
        try:
            out.append((tuple(int(env.size_hint(d)) for d in t.shape), t.dtype))
        except Exception:  # noqa: BLE001 - an input without a readable shape is left out
            continue
    return out


def _env_hardware(env: Any) -> Any:
    dev = getattr(env, "device", None)
    if dev is None or getattr(dev, "type", "") != "cuda":
        return None
    from ..hardware import local_hardware

    return local_hardware(dev.index)  # a GPU the table lacks: from its properties


def _seed(kind: str, env: Any) -> tuple[Any, str]:
    """(Helion Config, where it came from) of abductune's `kind` seed ("theory" or
    "observed") for the kernel bound in `env`, or (None, why not)."""
    from .helion_search import abductune_seeds, kernel_map

    spec = env.config_spec
    facts = facts_of(spec, _env_tensors(env), hardware=_env_hardware(env))
    if facts.problem.kernel_class == "other":
        return None, "a kernel of no class abductune knows"
    gen = spec.create_config_generation()
    hmap = kernel_map(gen, spec, facts.roles, name=facts.problem.kernel)
    default = hmap.from_flat(gen.flatten(spec.default_config()))
    for cfg, source in abductune_seeds(hmap, facts.problem, default):
        if source.startswith(kind):  # "theory:<regime>", "observed:observed" (not the registry's)
            return gen.unflatten(hmap.to_flat(cfg)), source
    return None, f"no {kind} seed for {facts.problem.kernel_class} {facts.problem.shape_key()}"


def _note(name: str, status: str, reason: str, config: Any = None) -> None:
    FIRED.append({"name": name, "status": status, "reason": reason,
                  "config": None if config is None else repr(config)})
    del FIRED[:-_FIRED_KEEP]


def _heuristic_classes() -> tuple[type, type]:
    from helion._compiler.autotuner_heuristics.registry import AutotunerHeuristic

    class _Abductune(AutotunerHeuristic):
        kind = ""
        promote_mode: str | bool = False  # False, True ("fill": where Helion promoted none) or "always"

        @classmethod
        def is_eligible(cls, env: Any, device_ir: Any) -> bool:
            cfg, why = _seed(cls.kind, env)
            env._abductune_seeds = {**getattr(env, "_abductune_seeds", {}), cls.name: cfg}
            if cfg is None:
                _note(cls.name, "ineligible", why)
            return cfg is not None

        @classmethod
        def should_promote(cls, env: Any) -> bool:
            # Helion asks right after our seed fired; a default set before, and not by us, is
            # one of Helion's own promoted seeds, which "fill" keeps
            mode = cls.promote_mode
            ours = getattr(env, "_abductune_promoted", False)
            if not mode or not (mode == "always" or ours or env.config_spec.compiler_default_config is None):
                return False
            env._abductune_promoted = True
            return True

        @classmethod
        def get_seed_config(cls, env: Any, device_ir: Any) -> Any:
            cfg = getattr(env, "_abductune_seeds", {}).get(cls.name)
            if cfg is None:
                cfg, _ = _seed(cls.kind, env)
            if cfg is not None:
                _note(cls.name, "seed", f"{cls.kind} seed", cfg)
            return cfg

    class AbductuneObservedHeuristic(_Abductune):
        """The observed database's best template for the kernel's class, shape bucket and dtype."""

        name = "abductune_observed"
        backend = "triton"
        kind = "observed"

    class AbductuneTheoryHeuristic(_Abductune):
        """The theory store's zero-shot prediction (its first rule that applies)."""

        name = "abductune_theory"
        backend = "triton"
        kind = "theory"

    return AbductuneObservedHeuristic, AbductuneTheoryHeuristic


_HEURISTICS: tuple[type, type] | None = None


def heuristics() -> tuple[type, type]:
    """(AbductuneObservedHeuristic, AbductuneTheoryHeuristic): Helion AutotunerHeuristic
    classes, made once. Registered in this order, so where both fire and promotion is on the
    theory's seed (registered last) is the one Helion promotes."""
    global _HEURISTICS
    if _HEURISTICS is None:
        check_helion()
        _HEURISTICS = _heuristic_classes()
    return _HEURISTICS


# ----------------------------------------------------------------------------- registration

def install(*, search: bool = True, with_heuristics: bool | None = None, promote: bool | str | None = None) -> None:
    """Register abductune with Helion (idempotent; see the module docstring)."""
    check_helion()
    from helion import autotuner as hat
    from helion._compiler import autotuner_heuristics as reg

    from .helion_search import AbductuneSearch

    if search:
        hat.search_algorithms[NAME] = AbductuneSearch
    if with_heuristics is None:
        with_heuristics = os.environ.get("ABDUCTUNE_HELION_HEURISTICS", "1") != "0"
    if promote is None:
        env_promote = os.environ.get("ABDUCTUNE_HELION_PROMOTE", "0")
        promote = "always" if env_promote == "always" else env_promote == "1"
    if promote not in (True, False, "always"):
        raise HelionError(f"promote must be True, False or 'always', got {promote!r}")
    ours = heuristics()
    for cls in ours:
        cls.promote_seed_to_default = bool(promote)
        cls.promote_mode = promote
    triton = tuple(h for h in reg.HEURISTICS_BY_BACKEND.get("triton", ()) if h not in ours)
    reg.HEURISTICS_BY_BACKEND["triton"] = triton + (ours if with_heuristics else ())


def uninstall() -> None:
    """Take abductune out of Helion's registries again."""
    check_helion()
    from helion import autotuner as hat
    from helion._compiler import autotuner_heuristics as reg

    if hat.search_algorithms.get(NAME) is not None and hat.search_algorithms[NAME].__module__.startswith("abductune"):
        del hat.search_algorithms[NAME]
    ours = heuristics()
    reg.HEURISTICS_BY_BACKEND["triton"] = tuple(h for h in reg.HEURISTICS_BY_BACKEND.get("triton", ())
                                                if h not in ours)


# ----------------------------------------------------------------------------- autotuner_fn

_OPTIONS = {"strategy", "max_evaluations", "seconds", "seed", "abductune_seeds", "store", "options",
            "finishing_rounds", "benchmark_provider_cls"}


def autotuner_with(**options: Any) -> Callable[..., Any]:
    """An `autotuner_fn` for `@helion.kernel` with AbductuneSearch options (strategy,
    max_evaluations, seconds, seed, abductune_seeds, store, options), checked here."""
    from ..search import make_strategy
    from .helion_search import AbductuneSearch

    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise HelionError(f"AbductuneSearch has no option {', '.join(unknown)} "
                          f"(options: {', '.join(sorted(_OPTIONS))})")
    strategy = options.get("strategy", "abduction")
    make_strategy(strategy, seed=int(options.get("seed", 0)),
                  **(options.get("options") or ({"stop_early": True} if strategy == "abduction" else {})))

    def autotuner_fn(bound_kernel: Any, args: Sequence[object], **kwargs: Any) -> Any:
        from helion.autotuner import cache_classes
        from helion.autotuner.effort_profile import get_effort_profile

        settings = bound_kernel.settings
        kw = {**AbductuneSearch.get_kwargs_from_profile(get_effort_profile(settings.autotune_effort), settings),
              **options, **kwargs}

        def factory() -> Any:
            return AbductuneSearch(bound_kernel, args, **kw)

        cache_cls = cache_classes.get(settings.autotune_cache)
        if cache_cls is None:
            raise HelionError(f"Helion's autotune_cache {settings.autotune_cache!r} is not one of "
                              f"{', '.join(cache_classes)}")
        return cache_cls(factory(), autotuner_factory=factory)

    return autotuner_fn


def autotuner(bound_kernel: Any, args: Sequence[object], **kwargs: Any) -> Any:
    """`@helion.kernel(autotuner_fn=autotuner)`: abductune's search, wrapped in Helion's cache."""
    return autotuner_with()(bound_kernel, args, **kwargs)


def prestart_worker() -> bool:
    """Start Helion's benchmark worker now and keep it for the first search of this process
    (its 10-15 s start-up then overlaps the program's own work); True where one is kept."""
    from .helion_worker import prestart

    return prestart()


def release_worker() -> bool:
    """Shut down the benchmark worker kept between searches (it holds a CUDA context);
    True where there was one. It also goes after ABDUCTUNE_HELION_WORKER_IDLE_S idle seconds."""
    from .helion_worker import KEEPER

    return KEEPER.release()


def worker_stats() -> dict[str, int]:
    """How this process's searches got their benchmark worker: spawned, reused, kept, dropped,
    expired, released (`helion_worker.Keeper`)."""
    from .helion_worker import KEEPER

    return dict(KEEPER.stats)


def fired(clear: bool = False) -> list[dict[str, Any]]:
    """What abductune's heuristics did in this process (name, status, reason, config)."""
    out = [dict(f) for f in FIRED]
    if clear:
        FIRED.clear()
    return out


def __getattr__(name: str) -> Any:
    if name == "AbductuneSearch":
        from .helion_search import AbductuneSearch

        return AbductuneSearch
    if name in ("AbductuneObservedHeuristic", "AbductuneTheoryHeuristic"):
        return dict(zip(("AbductuneObservedHeuristic", "AbductuneTheoryHeuristic"), heuristics()))[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _auto_install(env: Mapping[str, str] = os.environ) -> None:
    """Install on import, unless ABDUCTUNE_HELION_INSTALL=0 (then call `install` yourself)."""
    if env.get("ABDUCTUNE_HELION_INSTALL", "1") != "0":
        install()


_auto_install()
