"""`patch_triton`: every Triton autotuner built while the patch is on becomes abductune's, so
third-party kernels get the store, bucketing and search without edits (reversible).

Reach. Triton's `Autotuner` class is the one seam every autotuner passes through: `triton.autotune`
builds one, a library may build one directly, and libraries subclass it (fla's `CachedAutotuner`,
FlagGems' `LibTuner`) and build their own without `triton.autotune`. So the patch hooks the
class's construction (`__new__`, installed once and inert while no patch is on):

- `Autotuner(...)` itself builds abductune's `Autotuner` (a subclass of Triton's);
- a library's subclass builds a class that puts abductune's between it and Triton's (its MRO:
  the library's class, abductune's, Triton's), so its own `__init__` and methods stay and its
  `super()` calls reach abductune's. Where the subclass's `run` calls `super().run`, it is kept
  (fla reads its own config files first, then tunes through abductune). Where it re-implements
  tuning without `super().run` (FlagGems' `LibTuner`: its own loop, policy and SQLite cache),
  abductune's `run` replaces it, and its per-key `strategy` (FlagGems' "align32", "log") is kept
  as abductune's buckets.

The object is an instance of the library's class and of Triton's `Autotuner`, so `isinstance`
checks (`@libentry()`, torch.compile) pass. What cannot be taken over (no configs, arguments
abductune refuses, a class excluded with `exclude=`) stays what it was written as, and the patch
says so: `patch.report()`, and at exit a log line (printed when ABDUCTUNE_PRINT_AUTOTUNING=1 or
`report_at_exit=True`)."""
from __future__ import annotations

import atexit
import gc
import inspect
import logging
import sys
import threading
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from triton.runtime.autotuner import Autotuner as TritonAutotuner

from ..errors import AbductuneError
from .arguments import check_beyond, check_record_options
from .autotuner import Autotuner
from .evaluation import printing

log = logging.getLogger(__name__)

_ACTIVE: list["TritonPatch"] = []  # patches on, the innermost last
_LOCK = threading.RLock()
_MIXED: dict[type, type] = {}  # a library's subclass -> its class with abductune's between
_APPLIED: list["TritonPatch"] = []  # every patch applied in this process, for the report at exit
_HOW_TRITON = "Triton's Autotuner (triton.autotune, or built directly)"


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _calls_super_run(cls: type) -> bool | None:
    """None when no class between `cls` and Triton's overrides `run`; else whether the nearest
    override calls `super().run` (then it wraps Triton's tuning and is kept)."""
    for k in cls.__mro__:
        if k is TritonAutotuner:
            return None
        run = k.__dict__.get("run")
        if run is not None:
            code = getattr(run, "__code__", None)
            return code is not None and "super" in code.co_names and "run" in code.co_names
    return None


def _mixed(cls: type) -> type:
    """`cls` (a library's subclass of Triton's Autotuner) with abductune's Autotuner between it
    and Triton's; `run` is abductune's where `cls` re-implements tuning."""
    with _LOCK:
        if cls in _MIXED:
            return _MIXED[cls]
        keeps = _calls_super_run(cls)
        ns: dict[str, Any] = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__,
                              "_abductune_mixed": True, "_abductune_original": cls}
        if keeps is False:
            ns["run"] = Autotuner.run
            how = f"{_qualname(cls)} (a subclass of Triton's Autotuner whose run re-implements tuning: abductune's run"
        elif keeps:
            how = f"{_qualname(cls)} (a subclass of Triton's Autotuner: its run kept, it tunes through abductune's"
        else:
            how = f"{_qualname(cls)} (a subclass of Triton's Autotuner"
        ns["_abductune_how"] = how

        mixed = type(cls.__name__, (cls, Autotuner), ns)

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            patch = self.__dict__.get("_abductune_patch")
            super(mixed, self).__init__(*args, **kwargs)  # the library's __init__, else abductune's
            if not isinstance(self, Autotuner):
                return  # left alone by abductune's __init__: it is `cls` again
            if "_key_spec" not in self.__dict__:  # its __init__ called Triton's by name, not super()
                self.__dict__.pop("_abductune_patch", None)
                self.__class__ = cls
                if patch is not None:
                    patch.leave_alone(self, "its __init__ calls Triton's Autotuner.__init__ by name, not super()")
                return
            _adopt(self, replaced=keeps is False)
        mixed.__init__ = __init__  # type: ignore[misc]
        _MIXED[cls] = mixed
        return mixed


def _adopt(tuner: Autotuner, replaced: bool) -> None:
    """After a library's subclass set itself up over abductune's: keep what its replaced `run`
    meant that abductune can carry, its per-key `strategy` (a callable per key) as buckets,
    unless buckets were given."""
    strategy = tuner.__dict__.get("strategy")
    if not replaced or tuner._buckets_given or not isinstance(strategy, (list, tuple)):
        return
    if len(strategy) != len(tuner.keys) or not all(callable(f) for f in strategy):
        return
    tuner._key_spec = [(tuner.arg_names.index(n), n, _integral(f)) for n, f in zip(tuner.keys, strategy)]
    tuner._adopted = "its per-key strategy kept as buckets"


def _integral(f: Any) -> Any:
    """A library's key strategy as a bucket: a whole float it returns (FlagGems' "log": 2 ** ceil(log2))
    as the int, so the bucket stays a dimension of the problem."""
    def bucket(v: Any) -> Any:
        r = f(v)
        return int(r) if isinstance(r, float) and r.is_integer() else r
    return bucket


def _new(cls: type, *args: Any, **kwargs: Any) -> Any:
    """Triton's `Autotuner.__new__` while abductune is imported: with a patch on, what would be
    Triton's autotuner (or a library's) is built as abductune's; otherwise exactly Triton's."""
    patch = _ACTIVE[-1] if _ACTIVE else None
    if patch is None or (issubclass(cls, Autotuner) and not cls.__dict__.get("_abductune_mixed")):
        return object.__new__(cls)
    target = patch._target(cls)
    obj = object.__new__(target)
    if target is not cls or cls.__dict__.get("_abductune_mixed"):
        obj.__dict__["_abductune_patch"] = patch  # Autotuner.__init__ takes the patch's options from here
    return obj


def _install() -> None:
    with _LOCK:
        if TritonAutotuner.__dict__.get("__new__") is not None and \
                getattr(TritonAutotuner.__dict__["__new__"], "__func__", None) is _new:
            return
        TritonAutotuner.__new__ = staticmethod(_new)  # type: ignore[assignment]


@dataclass(eq=False)
class TritonPatch:
    """Every Triton autotuner built until `undo()` (or the end of the `with` block) is
    abductune's, with `options` as its defaults. Patches nest; undo them in reverse order.

    `autotuners`: abductune's autotuners built under the patch; `left_alone`: (what, why) for
    each one that stayed Triton's or the library's; `report()` says both, and what the searches
    found beyond the libraries' lists."""

    options: dict[str, Any] = field(default_factory=dict)
    exclude: tuple[Any, ...] = ()
    report_at_exit: bool | None = None
    record_only: tuple[str, ...] = ()  # with `record`: the kernels (by function name) to record
    autotuners: list[Autotuner] = field(default_factory=list)  # built while the patch was on
    left_alone: list[tuple[str, str]] = field(default_factory=list)
    _kept: Any = field(default_factory=weakref.WeakSet)  # the instances left alone
    _on: bool = False

    def apply(self) -> "TritonPatch":
        _install()
        with _LOCK:
            _ACTIVE.append(self)
            if self not in _APPLIED:
                _APPLIED.append(self)
            self._on = True
        return self

    def undo(self) -> None:
        with _LOCK:
            if self in _ACTIVE:
                _ACTIVE.remove(self)
            if self in _APPLIED and not (self.autotuners or self.left_alone):
                _APPLIED.remove(self)  # nothing to report at exit
            self._on = False

    def __enter__(self) -> "TritonPatch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.undo()

    # -- construction (patch._target, then Autotuner.__init__ calls back reached / leave_alone)
    def _target(self, cls: type) -> type:
        original = cls.__dict__.get("_abductune_original", cls)
        if self._excluded(original):
            self.left_alone.append((_qualname(original), "excluded by patch_triton(exclude=...)"))
            return original
        if original is TritonAutotuner:
            return Autotuner
        try:
            return _mixed(original)
        except TypeError as e:  # a metaclass or layout that cannot take a second base
            self.left_alone.append((_qualname(original), f"its class cannot take abductune's as a base: {e}"))
            return original

    def _excluded(self, cls: type) -> bool:
        for x in self.exclude:
            if (isinstance(x, type) and issubclass(cls, x)) or x in (cls.__name__, _qualname(cls)):
                return True
        return False

    def reached(self, tuner: Autotuner) -> None:
        tuner._reached = type(tuner).__dict__.get("_abductune_how", _HOW_TRITON)
        self.autotuners.append(tuner)

    def leave_alone(self, tuner: Any, why: str) -> None:
        self.left_alone.append((_kernel_name(tuner), f"{why} (it stays {_qualname(type(tuner))}, as written)"))
        self._kept.add(tuner)

    # -- what the patch did
    def report(self, census: bool = True) -> str:
        """What the patch reached, by kind; what each reached kernel's searches found beyond its
        list; what it left alone and why. With `census`, Triton autotuners alive in this process
        that were built outside any patch (before it was applied, or after `undo()`) are counted
        too (a scan of the garbage collector's objects)."""
        lines = [f"abductune patch_triton: reached {len(self.autotuners)} autotuner(s), "
                 f"left {len(self.left_alone)} alone"]
        kinds: dict[str, int] = {}
        for t in self.autotuners:
            how = getattr(t, "_reached", _HOW_TRITON)
            adopted = getattr(t, "_adopted", None)
            how = how + (f"; {adopted})" if adopted else ")" if how != _HOW_TRITON else "")
            kinds[how] = kinds.get(how, 0) + 1
        for how, n in sorted(kinds.items(), key=lambda kv: -kv[1]):
            lines.append(f"  {n:4d}  {how}")
        tuned = [t for t in self.autotuners if t.stats["tunes"] or t.stats["store_hits"]]
        if tuned:
            lines.append("  tuned:")
            for t in tuned:
                lines.append(f"    {t.name}: {_beyond_line(t)}")
        for what, why in self.left_alone:
            lines.append(f"  left alone: {what}: {why}")
        if census:
            outside = _outside(self)
            if outside:
                names = ", ".join(sorted(outside)[:8]) + (", ..." if len(outside) > 8 else "")
                lines.append(f"  left alone: {len(outside)} Triton autotuner(s) built outside the patch (before it "
                             f"was applied or after undo; import their modules under it): {names}")
        return "\n".join(lines)


def _kernel_name(tuner: Any) -> str:
    base = getattr(tuner, "base_fn", None)
    name = getattr(base, "__qualname__", None) or getattr(tuner, "__name__", None) or type(tuner).__name__
    return f"{getattr(base, '__module__', '?')}.{name}" if base is not None else str(name)


def _beyond_line(t: Autotuner) -> str:
    s = t.stats
    text = f"{s['tunes']} key(s) tuned, {s['store_hits']} from the store, {s['evaluations']} evaluations"
    if t._beyond:
        text += (f"; beyond its list: {s['beyond_list']} config(s) measured ({s['beyond_failed']} failed), "
                 f"{s['beyond_pruned']} pruned unmeasured, "
                 f"the winner on {s['won_beyond_list']} key(s)")
        if s["won_beyond_list"]:
            text += f" (up to {s['gain_beyond_list']:.2f}x the list's best)"
        if s.get("kept_listed"):
            text += f"; the list's best kept on {s['kept_listed']} key(s) where a lead beyond it was not in every run-off round"
    else:
        text += "; the list only (give budget= or beyond= to search beyond it)"
    if s.get("ptxas_killed"):
        text += f"; {s['ptxas_killed']} compile(s) killed by the ptxas watch"
    return text


def _outside(patch: TritonPatch) -> set[str]:
    """Kernels of the Triton autotuners alive now that no patch built as abductune's and none left alone."""
    kept = set(map(id, patch._kept))
    for p in _APPLIED:
        kept |= set(map(id, p._kept))
    out = set()
    with warnings.catch_warnings():  # isinstance on some modules' lazy objects warns (torch.distributed)
        warnings.simplefilter("ignore")
        objects = gc.get_objects()
        found = [o for o in objects if _is_triton_only(o)]
    for o in found:
        if id(o) not in kept:
            out.add(_kernel_name(o))
    return out


def _is_triton_only(o: Any) -> bool:
    try:
        return isinstance(o, TritonAutotuner) and not isinstance(o, Autotuner)
    except Exception:  # noqa: BLE001 - an object whose class lookup fails is not ours to judge
        return False


def _report_at_exit() -> None:
    for p in _APPLIED:
        if not (p.autotuners or p.left_alone):
            continue
        loud = p.report_at_exit if p.report_at_exit is not None else printing()
        if loud:
            print(p.report(), file=sys.stderr)
        elif log.isEnabledFor(logging.INFO):
            log.info("%s", p.report(census=False))


atexit.register(_report_at_exit)


def _option_names() -> set[str]:
    return {n for n, p in inspect.signature(Autotuner._setup).parameters.items() if p.kind is p.KEYWORD_ONLY}


def patch_triton(*, exclude: Iterable[Any] | Sequence[Any] = (), report_at_exit: bool | None = None,
                 record_only: Iterable[str] = (), **options: Any) -> TritonPatch:
    """Make every Triton autotuner built from now on abductune's: `triton.autotune` kernels, an
    `Autotuner` built directly, and libraries' subclasses of it (fla's `CachedAutotuner`,
    FlagGems' `LibTuner`), with `options` (abductune's keyword options: store, budget, beyond,
    bucket, timer, ...) as their defaults; `beyond=N` has each autotuner measure its whole list
    and then N configs beyond it (one `budget=` meets lists of every length). Kernels built while the patch is on are affected (import
    their modules after patching). `exclude`: classes (or their names) to leave alone.
    `report_at_exit`: print `report()` at exit (default: when ABDUCTUNE_PRINT_AUTOTUNING=1; a
    log line at INFO otherwise). Reversible: `p = patch_triton(); ...; p.undo()`, or
    `with abductune.patch_triton(store=...): import their_kernels`. With `record=DIR`,
    `record_only` names the kernels (their functions' names) to record; the others tune their
    own list as usual; `record_sample=N` records N configs (plus the kernel's own list) of a grown
    space past 1,000 valid configs instead of 400; `record_progress` gets the progress lines."""
    unknown = sorted(set(options) - _option_names())
    if unknown:
        raise AbductuneError(f"patch_triton: unknown option {', '.join(unknown)}; abductune's options are "
                             f"{', '.join(sorted(_option_names()))}")
    check_beyond(options.get("budget"), options.get("beyond"))  # here, not at a library's import
    record_only = tuple(record_only)
    if record_only and options.get("record") is None:
        raise AbductuneError("patch_triton: record_only names kernels to record, but no record=DIR is given")
    # refused here: an autotuner refusing them would be left alone, and record nothing
    check_record_options(options.get("record"), options.get("record_sample"), options.get("record_progress"),
                         "patch_triton")
    return TritonPatch(dict(options), tuple(exclude), report_at_exit, record_only=record_only).apply()
