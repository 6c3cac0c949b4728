"""Search spaces: typed parameters with roles, constraints, enumeration and neighbourhoods.

Every parameter is discrete (a tuple of allowed values), so a config is a dict name -> value
and its canonical key is the tuple of values in parameter order. Roles ("tile:M", "warps",
...) let theories and heuristics speak of "the tile along M" rather than of `BLOCK_SIZE_M`.
"""
from __future__ import annotations

import ast
import hashlib
import itertools
import json
import math
import numbers
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from .errors import SpaceError

Config = dict[str, Any]


def config_id(config: Mapping[str, Any]) -> str:
    """A config's name, the same whatever its keys' order: what the compile pool, the decorator's
    evaluator and its isolated worker key a config by where no space is at hand."""
    return repr(sorted(dict(config).items()))

# ----------------------------------------------------------------------------- roles

_ROLE_RULES: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    (re.compile(r"^num_?warps$|^warps$", re.I), lambda m: "warps"),
    (re.compile(r"^num_?stages$|^stages$", re.I), lambda m: "stages"),
    (re.compile(r"^num_?ctas$", re.I), lambda m: "ctas"),
    # the L2 swizzle: groups of M tiles (GROUP_M, GROUP_SIZE_M, kernl's GROUP_M_SIZE, a bare
    # GROUP_SIZE). Not GROUP_K or GROUP_N: in block-scaled quantised GEMMs (aiter, vLLM) those are
    # the scales' block shape, fixed by how the weights were quantised, never a tunable grouping
    (re.compile(r"^group(?:_?size)?(?:_?m)?(?:_?size)?$", re.I), lambda m: "group"),
    (re.compile(r"^split_?([a-z])$|^split$", re.I), lambda m: f"split:{(m.group(1) or 'K').upper()}"),
    # a count of splits: aiter's NUM_KSPLIT, vLLM decode's NUM_KV_SPLITS, Inductor's RSPLIT
    (re.compile(r"^num_?([a-z]*?)_?splits?$", re.I), lambda m: f"split:{(m.group(1) or 'K').upper()}"),
    (re.compile(r"^([a-z])split$", re.I), lambda m: f"split:{m.group(1).upper()}"),
    (re.compile(r"^(?:block|tile)(?:_?size)?$", re.I), lambda m: "tile"),
    # XBLOCK, YBLOCK, RBLOCK, R0_BLOCK (Inductor)
    (re.compile(r"^([xyzr])0?_?block$", re.I), lambda m: f"tile:{m.group(1).upper()}"),
    # BLOCK_M, BLOCK_SIZE_N, TILE_K, BM, BN, BK
    (re.compile(r"^(?:block(?:_size)?|tile(?:_size)?)_([a-z][a-z0-9]*)$", re.I),
     lambda m: f"tile:{m.group(1).upper()}"),
    (re.compile(r"^b([mnk])$", re.I), lambda m: f"tile:{m.group(1).upper()}"),
    # BLOCK_ROW_SIZE, BLOCK_COL_SIZE (FlagGems): the dim between BLOCK and SIZE
    (re.compile(r"^(?:block|tile)_([a-z][a-z0-9]*)_size$", re.I), lambda m: f"tile:{m.group(1).upper()}"),
    # M_BLOCK_SIZE, N_BLOCK_SIZE, BATCH_BLOCK_SIZE, ROW_TILE (FlagGems' triu, bmm-like kernels): the
    # dim first; never NUM_BLOCK (a count), and X_BLOCK / R0_BLOCK stay Inductor's above
    (re.compile(r"^(?!num_)([a-z][a-z0-9]*)_(?:block|tile)(?:_?size)?$", re.I), lambda m: f"tile:{m.group(1).upper()}"),
    # BT, BV, BC, BS, BD (flash-linear-attention, Mamba, FlashAttention ports): B and one capital,
    # a block of the dim that letter names; capitals only, so a lower-case `bs` (a batch size) is
    # not read as a tile
    (re.compile(r"^B([A-Z])$"), lambda m: f"tile:{m.group(1)}"),
    # ROWS_PER_PROGRAM, TOKENS_PER_BLOCK: how many of a dim one program owns is a tile of it
    (re.compile(r"^([a-z][a-z0-9]*)_per_(?:program|block|cta|pid)$", re.I), lambda m: f"tile:{m.group(1).upper()}"),
]


def infer_role(name: str, values: Sequence[Any] | None = None) -> str | None:
    """Role of a parameter from its name, or None when the name says nothing we know. With its
    `values`, a name read as a tile whose values are not all positive integers is no tile (a
    TILE_MODE of 0, 1 or 2 selects a code path; a tile is a size): no role."""
    for pat, make in _ROLE_RULES:
        m = pat.match(name)
        if m:
            role = make(m)
            if values is not None and role.startswith("tile") and not all(
                    isinstance(v, numbers.Integral) and not isinstance(v, bool) and v > 0 for v in values):
                return None
            return role
    return None


# ------------------------------------------------------------------------ parameters

@dataclass(frozen=True)
class Param:
    """A discrete parameter. `ordered` params move one step at a time; others jump anywhere."""

    name: str
    values: tuple[Any, ...]
    role: str | None = None
    default: Any = None
    ordered: bool = True
    kind: str = "choice"

    def __post_init__(self) -> None:
        if not self.name or not self.name.isidentifier():
            raise SpaceError(f"parameter name {self.name!r} is not a valid identifier")
        if not self.values:
            raise SpaceError(f"parameter {self.name!r} has no values")
        if len(set(self.values)) != len(self.values):
            raise SpaceError(f"parameter {self.name!r} has duplicate values: {list(self.values)}")
        if self.default is not None and self.default not in self.values:
            raise SpaceError(f"default {self.default!r} of parameter {self.name!r} is not one of "
                             f"its values {list(self.values)}")
        if self.role is None:
            object.__setattr__(self, "role", infer_role(self.name, self.values))
        object.__setattr__(self, "_index", {v: i for i, v in enumerate(self.values)})

    def index(self, value: Any) -> int:
        try:
            return self._index[value]  # type: ignore[attr-defined]
        except (KeyError, TypeError):
            raise SpaceError(f"value {value!r} is outside the domain of parameter {self.name!r} "
                             f"({list(self.values)})") from None

    def contains(self, value: Any) -> bool:
        try:
            return value in self._index  # type: ignore[attr-defined]
        except TypeError:
            return False

    @property
    def default_value(self) -> Any:
        return self.values[0] if self.default is None else self.default

    def clamp(self, value: Any) -> Any:
        """Nearest allowed value (log scale for powers of two); unknown choices -> default."""
        if self.contains(value):
            return value
        if self.ordered and isinstance(value, (int, float)) and not isinstance(value, bool):
            if self.kind == "pow2" and value > 0:
                key = lambda v: abs(math.log2(v) - math.log2(value))  # noqa: E731
            else:
                key = lambda v: abs(v - value)  # noqa: E731
            return min(self.values, key=key)
        return self.default_value

    def encode(self, value: Any) -> float:
        n = len(self.values)
        return 0.0 if n == 1 else self.index(value) / (n - 1)

    def step(self, value: Any, delta: int) -> Any | None:
        """The value `delta` positions away, or None past either end."""
        j = self.index(value) + delta
        return self.values[j] if 0 <= j < len(self.values) else None

    def moves(self, value: Any) -> list[Any]:
        """Values one move away: ±1 step if ordered, every other value otherwise."""
        if self.ordered:
            return [v for v in (self.step(value, -1), self.step(value, +1)) if v is not None]
        return [v for v in self.values if v != value]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "values": list(self.values), "role": self.role,
                "default": self.default, "ordered": self.ordered}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "Param":
        try:
            # JSON turns tuple values into lists; they must be hashable again
            values = tuple(tuple(v) if isinstance(v, list) else v for v in d["values"])
            default = d.get("default")
            return Param(d["name"], values, d.get("role"), tuple(default) if isinstance(default, list) else default,
                         bool(d.get("ordered", True)), d.get("kind", "choice"))
        except KeyError as e:
            raise SpaceError(f"parameter description {dict(d)!r} lacks {e}") from None


def Pow2(name: str, lo: int, hi: int, role: str | None = None, default: int | None = None) -> Param:
    """Powers of two from lo to hi inclusive."""
    if lo <= 0 or hi < lo or lo & (lo - 1) or hi & (hi - 1):
        raise SpaceError(f"Pow2 {name!r}: bounds must be powers of two with lo <= hi, got {lo}..{hi}")
    vals = tuple(1 << k for k in range(lo.bit_length() - 1, hi.bit_length()))
    return Param(name, vals, role, default, True, "pow2")


def IntRange(name: str, lo: int, hi: int, step: int = 1, role: str | None = None,
             default: int | None = None) -> Param:
    """Integers lo, lo+step, ..., up to hi inclusive."""
    if step <= 0 or hi < lo:
        raise SpaceError(f"IntRange {name!r}: need lo <= hi and step > 0, got {lo}..{hi} step {step}")
    return Param(name, tuple(range(lo, hi + 1, step)), role, default, True, "int")


def Choice(name: str, values: Sequence[Any], role: str | None = None, default: Any = None,
           ordered: bool | None = None) -> Param:
    """Any listed values; ordered by default when all are numbers (moves go to neighbours)."""
    vals = tuple(values)
    if ordered is None:
        ordered = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)
        if ordered:
            vals = tuple(sorted(vals))
    return Param(name, vals, role, default, ordered, "choice")


def Bool(name: str, role: str | None = None, default: bool | None = None) -> Param:
    return Param(name, (False, True), role, default, False, "bool")


# ----------------------------------------------------------------------- constraints

_ALLOWED_NODES = (
    ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd,
    ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow,
    ast.LShift, ast.RShift, ast.BitAnd, ast.BitOr, ast.BitXor, ast.Invert,
    ast.Compare, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn,
    ast.Name, ast.Load, ast.Constant, ast.Tuple, ast.List, ast.Set, ast.IfExp, ast.Call,
)
_FUNCS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "abs": abs, "int": int,
                                         "log2": math.log2, "ceil": math.ceil, "floor": math.floor}

# Bounds on what one constraint may build, so a dataset header cannot exhaust memory or time
# (`1 << (1 << 36)` is 8 GiB, `9 ** 9 ** 9` hangs, `(0,) * 10**9` is a huge tuple). No launch
# parameter comes near them.
MAX_SHIFT = 64
MAX_EXPONENT = 64
MAX_INT = 1 << 128
MAX_SEQUENCE = 4096


class _Unbounded(Exception):
    """An operation in a constraint would exceed the bounds above."""


def _check_int(v: Any, op: str) -> Any:
    if type(v) is int and not -MAX_INT <= v <= MAX_INT:
        raise _Unbounded(f"'{op}' gives an integer beyond 2**128")
    return v


def _shl(a: Any, b: Any) -> Any:
    if isinstance(b, int) and b > MAX_SHIFT:
        raise _Unbounded(f"shift by {b} exceeds {MAX_SHIFT}")
    return _check_int(a << b, "<<")


def _pow(a: Any, b: Any) -> Any:
    if isinstance(b, (int, float)) and abs(b) > MAX_EXPONENT:
        raise _Unbounded(f"exponent {b} exceeds {MAX_EXPONENT}")
    return _check_int(a ** b, "**")


def _mul(a: Any, b: Any) -> Any:
    # sequence repetition: check the length before building it
    for seq, n in ((a, b), (b, a)):
        if isinstance(seq, (str, tuple, list)) and isinstance(n, int) and len(seq) * n > MAX_SEQUENCE:
            raise _Unbounded(f"repetition builds a sequence longer than {MAX_SEQUENCE}")
    return _check_int(a * b, "*")


# AST names that no parsed expression can write (not identifiers), so they cannot be called
_GUARDS: dict[type, tuple[str, Callable[[Any, Any], Any]]] = {
    ast.LShift: ("<shl>", _shl), ast.Pow: ("<pow>", _pow), ast.Mult: ("<mul>", _mul)}


class _Guard(ast.NodeTransformer):
    """Turn `a << b`, `a ** b` and `a * b` into calls of the bounded versions."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        guard = _GUARDS.get(type(node.op))
        if guard is None:
            return node
        return ast.copy_location(ast.Call(func=ast.Name(id=guard[0], ctx=ast.Load()),
                                          args=[node.left, node.right], keywords=[]), node)


def _config_text(cfg: Mapping[str, Any]) -> str:
    try:
        return repr(dict(cfg))
    except Exception:  # noqa: BLE001 - only used to word an error
        return repr(cfg)


@dataclass(frozen=True)
class Constraint:
    """A predicate over a config: a whitelisted expression string, or a callable with a key.
    `fn` raises SpaceError (naming the constraint and the config) when evaluation fails."""

    source: str
    fn: Callable[[Mapping[str, Any]], bool] = field(compare=False, repr=False)
    names: frozenset[str] = frozenset()

    def __call__(self, cfg: Mapping[str, Any]) -> bool:
        return bool(self.fn(cfg))


def parse_constraint(expr: str, param_names: Iterable[str],
                     constants: Mapping[str, Any] | None = None) -> Constraint:
    """Compile `expr` after checking every AST node against a whitelist; names must be
    parameter names, `constants`, or the functions min/max/abs/int/log2/ceil/floor.
    Evaluation is bounded (shifts, exponents, integers and repeated sequences are capped) and
    an expression that raises for some config raises SpaceError naming it and the config."""
    if not isinstance(expr, str):
        raise SpaceError(f"constraint {expr!r} is not an expression string")
    params = set(param_names)
    consts = dict(constants or {})
    src = expr.strip()
    try:
        tree = ast.parse(src, mode="eval")
    except SyntaxError as e:
        raise SpaceError(f"constraint {expr!r} is not a valid expression: {e.msg}") from None
    except ValueError as e:  # e.g. a NUL byte in the text
        raise SpaceError(f"constraint {expr!r} is not a valid expression: {e}") from None
    used: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise SpaceError(f"constraint {expr!r} uses {type(node).__name__}, which is not allowed "
                             "(only arithmetic, comparisons, and/or/not, and min/max/abs/int/"
                             "log2/ceil/floor calls)")
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS or node.keywords:
                raise SpaceError(f"constraint {expr!r} calls something other than "
                                 f"{'/'.join(_FUNCS)} with positional arguments")
        if isinstance(node, ast.Name):
            if node.id in params:
                used.add(node.id)
            elif node.id not in consts and node.id not in _FUNCS:
                raise SpaceError(f"constraint {expr!r} names {node.id!r}, which is not a parameter "
                                 f"(parameters: {', '.join(sorted(params))})")
        if isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) > MAX_INT:
            raise SpaceError(f"constraint {expr!r} holds the integer {node.value}, beyond 2**128")
        if (isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))
                and len(node.value) > MAX_SEQUENCE):
            raise SpaceError(f"constraint {expr!r} holds a string longer than {MAX_SEQUENCE}")
    tree = ast.fix_missing_locations(_Guard().visit(tree))
    code = compile(tree, f"<constraint {src}>", "eval")
    glb = {"__builtins__": {}, **_FUNCS, **consts, **{n: f for n, f in _GUARDS.values()}}

    def fn(cfg: Mapping[str, Any]) -> bool:
        try:
            return eval(code, glb, cfg)  # noqa: S307 - code is whitelisted above
        except _Unbounded as e:
            raise SpaceError(f"constraint {src!r} is unbounded for config {_config_text(cfg)}: {e}; "
                             "keep shifts and exponents at most 64 and integers within 2**128") from None
        except SpaceError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure of a user expression is a user error
            raise SpaceError(f"constraint {src!r} cannot be evaluated for config {_config_text(cfg)}: "
                             f"{type(e).__name__}: {e}; rewrite it so it is true or false for every "
                             "config (e.g. guard a division with 'num_warps != 4 and ...')") from None

    return Constraint(src, fn, frozenset(used))


def callable_constraint(fn: Callable[[Mapping[str, Any]], bool], key: str | None = None) -> Constraint:
    """Wrap a Python callable; `key` names it in the fingerprint (defaults to its qualname).
    An exception from the callable becomes a SpaceError naming the key and the config."""
    name = key or f"callable:{getattr(fn, '__qualname__', repr(fn))}"

    def safe(cfg: Mapping[str, Any]) -> bool:
        try:
            return fn(cfg)
        except SpaceError:
            raise
        except Exception as e:  # noqa: BLE001 - a user callable may raise anything
            raise SpaceError(f"constraint {name!r} raised {type(e).__name__}: {e} for config "
                             f"{_config_text(cfg)}") from e

    return Constraint(name, safe)


# ---------------------------------------------------------------------------- space

class Space:
    """Typed parameters + constraints. Enumerates lazily, caches the valid list on demand."""

    def __init__(self, params: Sequence[Param], constraints: Sequence[str | Constraint |
                 Callable[[Mapping[str, Any]], bool]] = (), constants: Mapping[str, Any] | None = None,
                 name: str = ""):
        if not params:
            raise SpaceError("a space needs at least one parameter")
        names = [p.name for p in params]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise SpaceError(f"duplicate parameter names: {', '.join(dup)}")
        self.name = name
        self.params: tuple[Param, ...] = tuple(params)
        self.names: tuple[str, ...] = tuple(names)
        self._by_name = {p.name: p for p in self.params}
        self.constants = dict(constants or {})
        cons: list[Constraint] = []
        for c in constraints:
            if isinstance(c, Constraint):
                cons.append(c)
            elif isinstance(c, str):
                cons.append(parse_constraint(c, names, self.constants))
            elif callable(c):
                cons.append(callable_constraint(c))
            else:
                raise SpaceError(f"constraint {c!r} is neither an expression string nor a callable")
        self.constraints: tuple[Constraint, ...] = tuple(cons)
        self._valid: list[Config] | None = None
        self._valid_keys: dict[tuple, int] | None = None
        # valid configs as value indices (n, P) and the ordered mask (P,), for nearest_valid
        self._valid_index: tuple[np.ndarray, np.ndarray] | None = None

    # -- basic facts
    def __getitem__(self, name: str) -> Param:
        try:
            return self._by_name[name]
        except KeyError:
            raise SpaceError(f"no parameter named {name!r} (parameters: {', '.join(self.names)})") from None

    def __contains__(self, cfg: object) -> bool:
        return isinstance(cfg, Mapping) and self.is_valid(cfg)

    def __len__(self) -> int:
        return len(self.valid_configs())

    def __repr__(self) -> str:
        return f"Space({', '.join(self.names)}; {len(self.constraints)} constraints)"

    @property
    def cardinality(self) -> int:
        """Size of the Cartesian product before constraints."""
        return math.prod(len(p.values) for p in self.params)

    def by_role(self, role: str) -> Param | None:
        return next((p for p in self.params if p.role == role), None)

    def roles(self) -> dict[str, str]:
        return {p.role: p.name for p in self.params if p.role}

    # -- config helpers
    def key(self, cfg: Mapping[str, Any]) -> tuple:
        """Canonical hashable identity of a full config."""
        try:
            return tuple(cfg[n] for n in self.names)
        except KeyError as e:
            raise SpaceError(f"config {dict(cfg)!r} lacks parameter {e.args[0]!r}") from None

    def from_key(self, key: Sequence[Any]) -> Config:
        return dict(zip(self.names, key))

    def check_domain(self, cfg: Mapping[str, Any]) -> None:
        """Raise SpaceError if a key is unknown or a value is outside its parameter's domain."""
        for k, v in cfg.items():
            self[k].index(v)

    def satisfies(self, cfg: Mapping[str, Any]) -> bool:
        return all(c(cfg) for c in self.constraints)

    def is_valid(self, cfg: Mapping[str, Any]) -> bool:
        if set(cfg) != set(self.names):
            return False
        if not all(p.contains(cfg[p.name]) for p in self.params):
            return False
        return self.satisfies(cfg)

    # -- enumeration
    def iter_configs(self) -> Iterator[Config]:
        """Lazily yield every valid config in a fixed (lexicographic by value index) order."""
        names = self.names
        cons = self.constraints
        for combo in itertools.product(*(p.values for p in self.params)):
            cfg = dict(zip(names, combo))
            if all(c.fn(cfg) for c in cons):
                yield cfg

    def valid_configs(self) -> list[Config]:
        """All valid configs (cached). Raises SpaceError when none exists."""
        if self._valid is None:
            valid = list(self.iter_configs())
            if not valid:
                raise SpaceError(f"the space {self.name or self!r} has no valid config: its "
                                 f"constraints reject all {self.cardinality} combinations")
            self._valid = valid
            self._valid_keys = {self.key(c): i for i, c in enumerate(self._valid)}
        return self._valid

    def index_of(self, cfg: Mapping[str, Any]) -> int | None:
        """Position of a valid config in `valid_configs()`, None if it is not valid."""
        self.valid_configs()
        assert self._valid_keys is not None
        try:
            return self._valid_keys.get(self.key(cfg))
        except (SpaceError, TypeError):
            return None

    # -- defaults, merge, clamp
    def default(self) -> Config:
        cfg = {p.name: p.default_value for p in self.params}
        return cfg if self.satisfies(cfg) else self.nearest_valid(cfg)

    def declared_default(self) -> Config | None:
        """The default where a parameter declares one (a decorator's space: its first config;
        a built-in or recorded kernel's default), else None: the first values of a space that
        declares none are no one's choice."""
        if not any(p.default is not None for p in self.params):
            return None
        try:
            return self.default()
        except SpaceError:
            return None

    def clamp(self, cfg: Mapping[str, Any]) -> Config:
        """Every value moved to its parameter's nearest allowed value; unknown keys rejected."""
        out = {}
        for k, v in cfg.items():
            out[k] = self[k].clamp(v)
        return out

    def complete(self, partial: Mapping[str, Any], base: Mapping[str, Any] | None = None,
                 caps: Mapping[str, Any] | None = None) -> Config:
        """Merge a partial config onto `base` (default: the space default), clamp it into the
        domains and under `caps` (parameter -> largest allowed value), and return it if valid,
        else the nearest valid config that keeps the partial's own values where it can."""
        merged = dict(self.default() if base is None else base)
        merged.update(self.clamp(partial))
        for n, cap in (caps or {}).items():
            if self[n].index(merged[n]) > self[n].index(cap):
                merged[n] = cap
        if self.satisfies(merged):
            return merged
        return self.nearest_valid(merged, prefer=partial.keys(), caps=caps)

    def distance(self, a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
        """Sum over parameters of index distance (ordered) or 0/1 mismatch (unordered)."""
        d = 0.0
        for p in self.params:
            if p.ordered:
                d += abs(p.index(a[p.name]) - p.index(b[p.name]))
            else:
                d += float(a[p.name] != b[p.name])
        return d

    def nearest_valid(self, cfg: Mapping[str, Any], prefer: Iterable[str] = (),
                      caps: Mapping[str, Any] | None = None) -> Config:
        """Valid config closest to `cfg` by `distance`; ties go to the first in
        `valid_configs()` order. Keys in `prefer` move only when no valid config keeps them
        (their weight exceeds any possible distance over the other keys). With `caps`
        (parameter -> largest allowed value), only configs within every cap count, unless
        none is. Vectorised over a cached index matrix: one call costs O(configs x params)
        in numpy, not in Python (it runs in every TPE and GA step)."""
        target = self.clamp({**{p.name: p.default_value for p in self.params}, **cfg})
        cap_idx = {self.names.index(self[n].name): self[n].index(c) for n, c in (caps or {}).items()}
        t = np.array([p.index(target[p.name]) for p in self.params], dtype=np.int32)
        if all(t[j] <= c for j, c in cap_idx.items()) and self.satisfies(target):
            return target  # distance 0: nothing is nearer
        idx, ordered = self._index_matrix()
        big = sum(len(p.values) for p in self.params) + 1
        pref = set(prefer)
        w = np.array([big if n in pref else 1 for n in self.names], dtype=np.int64)
        diff = np.abs(idx - t)
        diff = np.where(ordered, diff, diff != 0)
        dist = diff @ w
        if cap_idx:
            ok = np.ones(len(idx), dtype=bool)
            for j, c in cap_idx.items():
                ok &= idx[:, j] <= c
            if ok.any():
                dist = np.where(ok, dist, np.iinfo(np.int64).max)
        return dict(self.valid_configs()[int(np.argmin(dist))])

    def _index_matrix(self) -> tuple[np.ndarray, np.ndarray]:
        """(value index of every valid config (n, P), ordered mask (P,)), built once."""
        if self._valid_index is None:
            valid = self.valid_configs()
            cols = [[p.index(c[p.name]) for c in valid] for p in self.params]
            idx = np.array(cols, dtype=np.int32).T.copy()
            self._valid_index = (idx, np.array([p.ordered for p in self.params], dtype=bool))
        return self._valid_index

    # -- neighbourhoods
    def neighbours(self, cfg: Mapping[str, Any], radius: int = 1) -> list[Config]:
        """Valid configs reached by moving 1..radius parameters one move each (±1 step for
        ordered parameters, any other value for unordered ones). Deterministic order."""
        base = dict(cfg)
        out: list[Config] = []
        seen = {self.key(base)}
        moves = [(p.name, p.moves(base[p.name])) for p in self.params]
        for r in range(1, radius + 1):
            for combo in itertools.combinations(range(len(moves)), r):
                for vals in itertools.product(*(moves[i][1] for i in combo)):
                    c = dict(base)
                    for i, v in zip(combo, vals):
                        c[moves[i][0]] = v
                    k = self.key(c)
                    if k not in seen and self.satisfies(c):
                        seen.add(k)
                        out.append(c)
        return out

    # -- encoding
    def encode(self, cfg: Mapping[str, Any]) -> list[float]:
        """Each parameter's index scaled to [0, 1], in parameter order (for models)."""
        return [p.encode(cfg[p.name]) for p in self.params]

    # -- identity and serialisation
    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "params": [p.to_dict() for p in self.params],
                "constraints": [c.source for c in self.constraints], "constants": self.constants}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], extra_constraints: Sequence[Any] = ()) -> "Space":
        """Rebuild a space; callable constraints (recorded as 'callable:...') are skipped and
        must be supplied again in `extra_constraints`."""
        params = [Param.from_dict(p) for p in d.get("params", [])]
        cons: list[Any] = [c for c in d.get("constraints", []) if not c.startswith("callable:")]
        return cls(params, [*cons, *extra_constraints], d.get("constants"), d.get("name", ""))

    def fingerprint(self) -> str:
        blob = json.dumps({"params": [p.to_dict() for p in self.params],
                           "constraints": [c.source for c in self.constraints],
                           "constants": self.constants}, sort_keys=True, default=repr)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]
