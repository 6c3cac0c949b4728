"""Property tests of Space over random spaces (random parameters of every kind and random
constraint expressions from a small grammar), plus roles, clamping and the SpaceError cases."""
from __future__ import annotations

import itertools
import json
import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from abductune.errors import AbductuneError, SpaceError
from abductune.space import (Bool, Choice, IntRange, Param, Pow2, Space, callable_constraint,
                             infer_role, parse_constraint)

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
WORDS = ("a", "b", "c", "d")
FUNCS = {"min": min, "max": max, "abs": abs}


# ------------------------------------------------------------------ random spaces

@st.composite
def param_spec(draw, i: int) -> dict:
    kind = draw(st.sampled_from(["pow2", "int", "choice_num", "choice_str", "bool"]))
    name = f"p{i}"
    if kind == "pow2":
        lo = draw(st.integers(0, 5))
        hi = draw(st.integers(lo, lo + 4))
        return {"kind": kind, "name": name, "lo": 1 << lo, "hi": 1 << hi}
    if kind == "int":
        lo = draw(st.integers(-3, 8))
        step = draw(st.integers(1, 3))
        n = draw(st.integers(1, 5))
        return {"kind": kind, "name": name, "lo": lo, "hi": lo + step * (n - 1), "step": step}
    if kind == "choice_num":
        vals = draw(st.lists(st.integers(-8, 300), min_size=1, max_size=6, unique=True))
        return {"kind": kind, "name": name, "values": vals}
    if kind == "choice_str":
        vals = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4, unique=True))
        return {"kind": kind, "name": name, "values": vals}
    return {"kind": kind, "name": name}


def build_param(spec: dict) -> Param:
    k = spec["kind"]
    if k == "pow2":
        return Pow2(spec["name"], spec["lo"], spec["hi"])
    if k == "int":
        return IntRange(spec["name"], spec["lo"], spec["hi"], spec["step"])
    if k in ("choice_num", "choice_str"):
        return Choice(spec["name"], spec["values"])
    return Bool(spec["name"])


@st.composite
def num_expr(draw, names: list[str], depth: int) -> str:
    if depth <= 0 or draw(st.integers(0, 2)) == 0:
        if names and draw(st.booleans()):
            return draw(st.sampled_from(names))
        return str(draw(st.integers(0, 64)))
    op = draw(st.sampled_from(["+", "-", "*", "//", "%", "min", "max", "abs", "neg"]))
    a = draw(num_expr(names, depth - 1))
    if op == "abs":
        return f"abs({a})"
    if op == "neg":
        return f"(-{a})"
    if op in ("//", "%"):
        return f"({a} {op} {draw(st.integers(1, 8))})"
    b = draw(num_expr(names, depth - 1))
    if op in ("min", "max"):
        return f"{op}({a}, {b})"
    return f"({a} {op} {b})"


@st.composite
def bool_expr(draw, num_names: list[str], str_names: list[str], depth: int) -> str:
    choices = ["cmp"] + (["str"] if str_names else []) + (["and", "or", "not", "ifexp"] if depth > 0 else [])
    kind = draw(st.sampled_from(choices))
    if kind == "cmp":
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
        return f"{draw(num_expr(num_names, 2))} {op} {draw(num_expr(num_names, 2))}"
    if kind == "str":
        n = draw(st.sampled_from(str_names))
        if draw(st.booleans()):
            return f"{n} {draw(st.sampled_from(['==', '!=']))} {draw(st.sampled_from(WORDS))!r}"
        ws = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3, unique=True))
        return f"{n} {draw(st.sampled_from(['in', 'not in']))} {tuple(ws)!r}"
    if kind == "not":
        return f"not ({draw(bool_expr(num_names, str_names, depth - 1))})"
    if kind == "ifexp":
        a, b, c = (draw(bool_expr(num_names, str_names, depth - 1)) for _ in range(3))
        return f"(({a}) if ({b}) else ({c}))"
    a = draw(bool_expr(num_names, str_names, depth - 1))
    b = draw(bool_expr(num_names, str_names, depth - 1))
    return f"({a}) {kind} ({b})"


@st.composite
def space_spec(draw) -> tuple[list[dict], list[str]]:
    n = draw(st.integers(1, 4))
    params = [draw(param_spec(i)) for i in range(n)]
    num = [p["name"] for p in params if p["kind"] != "choice_str"]
    strs = [p["name"] for p in params if p["kind"] == "choice_str"]
    cons = draw(st.lists(bool_expr(num, strs, 2), min_size=0, max_size=3))
    return params, cons


def build(spec: tuple[list[dict], list[str]]) -> Space:
    params, cons = spec
    return Space([build_param(p) for p in params], cons, name="random")


def brute_force(spec) -> list[dict]:
    """The valid set computed independently: Cartesian product filtered by plain eval."""
    params = [build_param(p) for p in spec[0]]
    out = []
    for combo in itertools.product(*(p.values for p in params)):
        cfg = dict(zip((p.name for p in params), combo))
        if all(eval(c, dict(FUNCS), dict(cfg)) for c in spec[1]):  # noqa: S307 - generated here
            out.append(cfg)
    return out


def nonempty(spec) -> tuple[Space, list[dict]]:
    expected = brute_force(spec)
    space = build(spec)
    if not expected:
        with pytest.raises(SpaceError, match="no valid config"):
            space.valid_configs()
        assume(False)
    return space, expected


def sample(configs: list[dict], k: int = 8) -> list[dict]:
    step = max(1, len(configs) // k)
    return configs[::step][:k]


# --------------------------------------------------------------------- properties

@SETTINGS
@given(space_spec())
def test_enumeration_matches_brute_force_and_respects_domains(spec):
    space, expected = nonempty(spec)
    got = space.valid_configs()
    assert [space.key(c) for c in got] == [space.key(c) for c in expected]  # same order too
    assert list(space.iter_configs()) == got
    assert len(space) == len(expected) <= space.cardinality
    for c in got:
        space.check_domain(c)
        assert space.is_valid(c) and c in space and space.satisfies(c)
        assert all(con(c) for con in space.constraints)
        assert space.index_of(c) == got.index(c)


@SETTINGS
@given(space_spec(), st.data())
def test_neighbours_are_valid_close_and_exclude_self(spec, data):
    space, valid = nonempty(spec)
    valid_keys = {space.key(c) for c in valid}
    for cfg in sample(valid, 6):
        n1 = space.neighbours(cfg, radius=1)
        n2 = space.neighbours(cfg, radius=2)
        assert n1 == space.neighbours(cfg, radius=1)  # deterministic
        for radius, ns in ((1, n1), (2, n2)):
            keys = [space.key(n) for n in ns]
            assert len(keys) == len(set(keys))
            assert space.key(cfg) not in keys
            for n in ns:
                assert space.key(n) in valid_keys
                changed = [p for p in space.params if n[p.name] != cfg[p.name]]
                assert 1 <= len(changed) <= radius
                for p in changed:  # each changed parameter made one move
                    assert n[p.name] in p.moves(cfg[p.name])
        assert {space.key(n) for n in n1} <= {space.key(n) for n in n2}
        # radius 1 is complete: every valid single move is there
        singles = {space.key({**cfg, p.name: v}) for p in space.params for v in p.moves(cfg[p.name])}
        assert {space.key(n) for n in n1} == singles & valid_keys


@SETTINGS
@given(space_spec(), st.data())
def test_fingerprint_stable_and_sensitive(spec, data):
    a, b = build(spec), build(spec)
    assert a.fingerprint() == b.fingerprint()
    params, cons = spec
    # changing a value changes it
    i = data.draw(st.integers(0, len(params) - 1))
    p = params[i]
    changed = dict(p)
    if p["kind"] == "pow2":
        changed["hi"] = p["hi"] * 2
    elif p["kind"] == "int":
        changed["hi"] = p["hi"] + p["step"]
    elif p["kind"] == "choice_num":
        changed["values"] = [*p["values"], max(p["values"]) + 1]
    elif p["kind"] == "choice_str":
        extra = [w for w in WORDS + ("zz",) if w not in p["values"]][0]
        changed["values"] = [*p["values"], extra]
    else:
        changed = {"kind": "choice_num", "name": p["name"], "values": [0, 1]}
    c = build(([*params[:i], changed, *params[i + 1:]], cons))
    assert c.fingerprint() != a.fingerprint()
    # changing, adding or removing a constraint changes it
    d = build((params, [*cons, "1 == 1"]))
    assert d.fingerprint() != a.fingerprint()
    if cons:
        assert build((params, cons[1:])).fingerprint() != a.fingerprint()
    # a different name does not (the fingerprint is about what can be measured)
    e = Space(a.params, a.constraints, name="other")
    assert e.fingerprint() == a.fingerprint()


@SETTINGS
@given(space_spec())
def test_to_dict_from_dict_round_trip(spec):
    space = build(spec)
    d = json.loads(json.dumps(space.to_dict()))
    back = Space.from_dict(d)
    assert back.fingerprint() == space.fingerprint()
    assert back.names == space.names
    assert [p.role for p in back.params] == [p.role for p in space.params]
    assert [p.kind for p in back.params] == [p.kind for p in space.params]
    expected = brute_force(spec)
    if expected:
        assert back.valid_configs() == space.valid_configs()
    else:
        with pytest.raises(SpaceError):
            back.valid_configs()


@SETTINGS
@given(space_spec(), st.data())
def test_complete_of_partial_config(spec, data):
    space, valid = nonempty(spec)
    names = data.draw(st.lists(st.sampled_from(space.names), unique=True, max_size=len(space.names)))
    partial = {}
    for n in names:
        p = space[n]
        if p.ordered and data.draw(st.booleans()):  # a number outside the domain: clamped
            partial[n] = data.draw(st.integers(min(p.values) - 50, max(p.values) + 50))
        else:
            partial[n] = data.draw(st.sampled_from(p.values))
    out = space.complete(partial)
    assert space.is_valid(out)
    clamped = space.clamp(partial)
    merged = {**space.default(), **clamped}
    if space.satisfies(merged):
        assert out == merged  # nothing to repair: the partial values are kept as given
    # the result is a closest valid config to the merged one (partial keys weigh 4x)
    w = {n: 4.0 if n in partial else 1.0 for n in space.names}

    def dist(c):
        return sum(w[p.name] * (abs(p.index(c[p.name]) - p.index(merged[p.name])) if p.ordered
                                else float(c[p.name] != merged[p.name])) for p in space.params)
    assert dist(out) == min(dist(c) for c in valid)


@SETTINGS
@given(space_spec(), st.data())
def test_complete_keeps_partial_values_when_one_step_repairs(spec, data):
    """When some valid config holds the partial values and differs from the merged config in
    one other parameter only, complete() keeps the partial values."""
    space, valid = nonempty(spec)
    n = data.draw(st.sampled_from(space.names))
    v = data.draw(st.sampled_from(space[n].values))
    merged = {**space.default(), n: v}
    out = space.complete({n: v})
    close = [c for c in valid if c[n] == v and sum(c[k] != merged[k] for k in space.names) <= 1
             and all(space[k].ordered is False or abs(space[k].index(c[k]) - space[k].index(merged[k])) <= 1
                     for k in space.names)]
    if close:
        assert out[n] == v


@SETTINGS
@given(space_spec())
def test_encode_in_unit_interval_and_injective(spec):
    space, valid = nonempty(spec)
    seen = set()
    for c in valid:
        e = space.encode(c)
        assert len(e) == len(space.params)
        assert all(0.0 <= x <= 1.0 for x in e)
        seen.add(tuple(e))
    assert len(seen) == len(valid)
    for p in space.params:
        if len(p.values) > 1:
            assert p.encode(p.values[0]) == 0.0 and p.encode(p.values[-1]) == 1.0


@SETTINGS
@given(st.integers(0, 9), st.integers(0, 9), st.floats(0.5, 3000, allow_nan=False))
def test_clamp_to_nearest(lo, span, value):
    p2 = Pow2("BLOCK", 1 << lo, 1 << min(lo + span, 11))
    got = p2.clamp(value)
    best = min(abs(math.log2(v) - math.log2(value)) for v in p2.values)
    assert abs(math.log2(got) - math.log2(value)) == pytest.approx(best)
    lin = IntRange("n", 3, 40, 3)
    got = lin.clamp(value)
    assert abs(got - value) == pytest.approx(min(abs(v - value) for v in lin.values))
    assert p2.clamp(p2.values[-1]) == p2.values[-1]  # a member stays


def test_clamp_examples():
    p = Pow2("BLOCK_N", 16, 128)
    assert p.clamp(93) == 128  # log scale: 93 is nearer 128 than 64 (linear would say 64)
    assert Choice("c", [16, 32, 64, 128]).clamp(93) == 64
    assert p.clamp(5) == 16 and p.clamp(10_000) == 128 and p.clamp(64) == 64
    assert p.clamp(0) == 16 and p.clamp(-3) == 16
    s = Choice("order", ["row", "col"], default="col")
    assert s.clamp("diag") == "col"  # unknown choice -> default
    assert Bool("EVEN").clamp(True) is True
    space = Space([p, IntRange("num_stages", 1, 5)])
    assert space.clamp({"BLOCK_N": 100, "num_stages": 9}) == {"BLOCK_N": 128, "num_stages": 5}
    with pytest.raises(SpaceError, match="no parameter named 'nope'"):
        space.clamp({"nope": 1})
    assert space.complete({"BLOCK_N": 93}) == {"BLOCK_N": 128, "num_stages": 1}


# ----------------------------------------------------------------------------- roles

@pytest.mark.parametrize("name, role", [
    ("BLOCK_M", "tile:M"), ("BLOCK_N", "tile:N"), ("BLOCK_K", "tile:K"),
    ("BLOCK_SIZE_M", "tile:M"), ("BLOCK_SIZE_N", "tile:N"), ("BLOCK_SIZE_K", "tile:K"),
    ("block_m", "tile:M"), ("TILE_K", "tile:K"), ("BM", "tile:M"), ("BN", "tile:N"), ("BK", "tile:K"),
    ("XBLOCK", "tile:X"), ("YBLOCK", "tile:Y"), ("RBLOCK", "tile:R"), ("R0_BLOCK", "tile:R"),
    ("num_warps", "warps"), ("NUM_WARPS", "warps"), ("num_stages", "stages"), ("num_ctas", "ctas"),
    ("GROUP_SIZE_M", "group"), ("GROUP_M", "group"), ("SPLIT_K", "split:K"),
    ("BLOCK", "tile"), ("BLOCK_SIZE", "tile"), ("TILE_SIZE", "tile"), ("BLOCKSIZE", "tile"),
    ("foo", None), ("EVEN_K", None), ("USE_TMA", None),
])
def test_role_inference(name, role):
    assert infer_role(name) == role
    assert Param(name, (1, 2)).role == role


def test_explicit_role_wins_and_by_role():
    space = Space([Pow2("BLOCK_M", 16, 64, role="tile:N"), Pow2("foo", 1, 4, role="tile:M"),
                   Choice("num_warps", [4, 8])])
    assert space["BLOCK_M"].role == "tile:N"
    assert space.by_role("tile:M").name == "foo"
    assert space.by_role("warps").name == "num_warps"
    assert space.by_role("stages") is None
    assert space.roles() == {"tile:N": "BLOCK_M", "tile:M": "foo", "warps": "num_warps"}
    assert Space.from_dict(space.to_dict())["foo"].role == "tile:M"


# ----------------------------------------------------------------------- SpaceError

def test_unknown_name_in_constraint():
    with pytest.raises(SpaceError, match="names 'BLOCK_Q'.*parameters: BLOCK_M"):
        Space([Pow2("BLOCK_M", 16, 64)], ["BLOCK_Q <= 32"])
    # constants are names too
    s = Space([Pow2("BLOCK_M", 16, 64)], ["BLOCK_M <= M"], constants={"M": 32})
    assert [c["BLOCK_M"] for c in s.valid_configs()] == [16, 32]


@pytest.mark.parametrize("expr", [
    "__import__('os')",
    "__import__('os').system('true') == 0",
    "BLOCK_M.bit_length() > 1",
    "BLOCK_M.__class__ is int",
    "(lambda: True)()",
    "[x for x in (1, 2)] == [1, 2]",
    "(y := BLOCK_M) > 0",
    "BLOCK_M[0] > 1",
    "open('/etc/passwd')",
    "getattr(BLOCK_M, 'real') > 0",
    "min(BLOCK_M, 2, key=abs) > 0",
    "f'{BLOCK_M}' == '16'",
    "print(BLOCK_M) or True",
])
def test_disallowed_syntax(expr):
    with pytest.raises(SpaceError, match="constraint"):
        Space([Pow2("BLOCK_M", 16, 64)], [expr])


def test_syntax_error_and_bad_constraint_types():
    with pytest.raises(SpaceError, match="not a valid expression"):
        parse_constraint("BLOCK_M >", ["BLOCK_M"])
    with pytest.raises(SpaceError, match="neither an expression string nor a callable"):
        Space([Pow2("BLOCK_M", 16, 64)], [42])


def test_allowed_functions_and_callables():
    s = Space([Pow2("BLOCK_M", 16, 128), Pow2("BLOCK_K", 16, 128)],
              ["log2(BLOCK_M) + log2(BLOCK_K) <= 12", "max(BLOCK_M, BLOCK_K) // min(BLOCK_M, BLOCK_K) <= 4",
               "ceil(BLOCK_M / 48) >= 1 and floor(1.5) == 1 and abs(-BLOCK_M) == int(BLOCK_M)",
               callable_constraint(lambda c: c["BLOCK_M"] != 32, key="no32")])
    configs = s.valid_configs()
    assert configs and all(c["BLOCK_M"] != 32 for c in configs)
    assert all(c["BLOCK_M"] * c["BLOCK_K"] <= 4096 for c in configs)
    assert "no32" in json.dumps(s.to_dict())


def test_empty_space():
    s = Space([Pow2("BLOCK_M", 16, 64), Choice("num_warps", [4, 8])], ["BLOCK_M > 1000"], name="tiny")
    with pytest.raises(SpaceError, match="tiny.*no valid config.*6 combinations"):
        s.valid_configs()
    assert isinstance(SpaceError("x"), AbductuneError)
    with pytest.raises(SpaceError, match="no valid config"):
        len(Space([Pow2("BLOCK_M", 16, 64)], ["BLOCK_M > 1000"]))


def test_empty_space_raises_every_time():
    s = Space([Pow2("BLOCK_M", 16, 64)], ["BLOCK_M > 1000"])
    for _ in range(2):
        with pytest.raises(SpaceError, match="no valid config"):
            s.valid_configs()


def test_check_domain():
    s = Space([Pow2("BLOCK_M", 16, 64), Choice("order", ["row", "col"])])
    s.check_domain({"BLOCK_M": 32, "order": "row"})
    s.check_domain({"BLOCK_M": 32})  # partial configs are fine
    with pytest.raises(SpaceError, match="value 48 is outside the domain of parameter 'BLOCK_M'"):
        s.check_domain({"BLOCK_M": 48})
    with pytest.raises(SpaceError, match="outside the domain of parameter 'order'"):
        s.check_domain({"order": ["row"]})  # unhashable
    with pytest.raises(SpaceError, match="no parameter named 'BLOCK_Q'"):
        s.check_domain({"BLOCK_Q": 16})
    assert not s.is_valid({"BLOCK_M": 48, "order": "row"})
    assert not s.is_valid({"BLOCK_M": 32})  # missing key
    assert not s.is_valid({"BLOCK_M": 32, "order": "row", "extra": 1})
    assert s.index_of({"BLOCK_M": 48, "order": "row"}) is None
    assert s.index_of({"BLOCK_M": 32}) is None


def test_duplicate_names_and_bad_params():
    with pytest.raises(SpaceError, match="duplicate parameter names: BLOCK_M"):
        Space([Pow2("BLOCK_M", 16, 64), Choice("BLOCK_M", [1, 2])])
    with pytest.raises(SpaceError, match="at least one parameter"):
        Space([])
    with pytest.raises(SpaceError, match="duplicate values"):
        Choice("c", [1, 2, 2])
    with pytest.raises(SpaceError, match="no values"):
        Choice("c", [])
    with pytest.raises(SpaceError, match="not a valid identifier"):
        Choice("2bad", [1])
    with pytest.raises(SpaceError, match="default 3"):
        Choice("c", [1, 2], default=3)
    with pytest.raises(SpaceError, match="IntRange"):
        IntRange("n", 5, 1)
    with pytest.raises(SpaceError, match="IntRange"):
        IntRange("n", 1, 5, 0)


@pytest.mark.parametrize("lo, hi", [(3, 8), (8, 4), (0, 4), (-2, 4), (4, 12), (16, 0)])
def test_bad_pow2_bounds(lo, hi):
    with pytest.raises(SpaceError, match="Pow2 'BLOCK'"):
        Pow2("BLOCK", lo, hi)


def test_pow2_values_and_choice_ordering():
    assert Pow2("B", 16, 128).values == (16, 32, 64, 128)
    assert Pow2("B", 1, 1).values == (1,)
    c = Choice("c", [64, 16, 32])
    assert c.values == (16, 32, 64) and c.ordered
    s = Choice("s", ["row", "col"])
    assert s.values == ("row", "col") and not s.ordered
    assert s.moves("row") == ["col"]
    assert c.moves(16) == [32] and c.moves(32) == [16, 64]
    assert Bool("b").moves(False) == [True]


def test_default_and_nearest_valid():
    s = Space([Pow2("BLOCK_M", 16, 128, default=128), Pow2("BLOCK_N", 16, 128, default=128)],
              ["BLOCK_M * BLOCK_N <= 64 * 64"])
    d = s.default()
    assert s.is_valid(d)
    assert s.distance(d, {"BLOCK_M": 128, "BLOCK_N": 128}) == 2  # two steps from the default
    assert s.nearest_valid({"BLOCK_M": 128, "BLOCK_N": 16}) == {"BLOCK_M": 128, "BLOCK_N": 16}
    assert s.nearest_valid({"BLOCK_M": 128, "BLOCK_N": 64}) in (
        {"BLOCK_M": 64, "BLOCK_N": 64}, {"BLOCK_M": 128, "BLOCK_N": 32})  # a tie: one step each
    # complete() weighs the given keys 4x, so it moves BLOCK_N two steps rather than BLOCK_M one
    assert s.complete({"BLOCK_M": 128}) == {"BLOCK_M": 128, "BLOCK_N": 32}


def test_complete_keeps_partial_values_whenever_possible():
    s = Space([Choice(f"p{i}", [0, 1]) for i in range(6)], ["p0 == 0 or p1 + p2 + p3 + p4 + p5 == 5"])
    assert s.complete({"p0": 1})["p0"] == 1  # (1, 1, 1, 1, 1, 1) is valid
