"""A kernel's own compile-time assertions over what it tunes: `tl.static_assert(BLOCK_N <= HEAD_DIM)`
(Triton's fused-attention tutorial, and FlagGems' attention made from it) fails every config with
a key tile wider than the head, at compile time. Read from the kernel's source, with the values
the call passes put in (HEAD_DIM = 64), each such assertion becomes a constraint of the key's
space (`BLOCK_N <= 64`): no config that fails it is grown, proposed, predicted or compiled, and
record mode's datasets carry it. Assertions that name anything else (a tensor's dtype, a value the
call does not pass) or use what a space constraint cannot express are left to the compiler."""
from __future__ import annotations

import ast
import logging
from typing import Any, Mapping, Sequence

from ..errors import SpaceError
from ..space import Space, parse_constraint
from ..theory.store.scope import kernel_def

log = logging.getLogger(__name__)

_ASSERT_NAMES = ("static_assert",)


def kernel_asserts(src: str) -> list[ast.expr]:
    """The conditions of the `tl.static_assert(...)` calls at the top level of the kernel's body
    (one inside an `if` holds only on that path, so it is not a constraint of every config)."""
    fn = kernel_def(src)
    if fn is None:
        return []
    out = []
    for stmt in fn.body:
        call = stmt.value if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) else None
        if call is None or not call.args:
            continue
        f = call.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        if name in _ASSERT_NAMES:
            out.append(call.args[0])
    return out


class _Fill(ast.NodeTransformer):
    def __init__(self, values: Mapping[str, Any]):
        self.values = values

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.values:
            return ast.copy_location(ast.Constant(self.values[node.id]), node)
        return node


def assert_constraints(conditions: Sequence[ast.expr], space: Space, values: Mapping[str, Any]) -> list[str]:
    """Each condition that names at least one of `space`'s parameters and otherwise only values
    the call passes (ints and bools), as a constraint string with those values put in; the rest
    are skipped."""
    known = {k: v for k, v in values.items() if isinstance(v, (int, bool)) and k not in space.names}
    out: list[str] = []
    for cond in conditions:
        names = {n.id for n in ast.walk(cond) if isinstance(n, ast.Name)}
        if not names & set(space.names) or not names <= set(space.names) | set(known):
            continue
        text = ast.unparse(_Fill(known).visit(ast.parse(ast.unparse(cond), mode="eval")).body)
        try:
            parse_constraint(text, space.names)
        except SpaceError as e:
            log.debug("static_assert %r is not a space constraint: %s", text, e)
            continue
        if text not in out:
            out.append(text)
    return out


def with_asserts(space: Space, constraints: Sequence[str]) -> Space:
    """`space` with `constraints` added, or `space` itself where there are none or where they
    would leave no config (the list's own configs all fail them: the compiler will say so)."""
    new = [c for c in constraints if c not in {k.source for k in space.constraints}]
    if not new:
        return space
    out = Space(space.params, [*space.constraints, *new], space.constants, name=space.name)
    try:
        if not out.valid_configs():
            return space
    except SpaceError:
        return space
    return out


def call_asserts(tuner: Any, space: Space, values: Mapping[str, Any]) -> list[str]:
    """The kernel's static assertions as constraints for this call's values (`assert_constraints`);
    the source is read once per autotuner."""
    if "_asserts" not in tuner.__dict__:
        from .record import source_text

        src = source_text(tuner)
        tuner._asserts = kernel_asserts(src) if src else []
    return assert_constraints(tuner._asserts, space, values) if tuner._asserts else []


def failing(constraints: Sequence[str], space: Space, configs: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices of `configs` (a list's own configs) that fail any of `constraints`."""
    checks = [parse_constraint(c, space.names) for c in constraints]
    return [i for i, cfg in enumerate(configs) if not all(chk(cfg) for chk in checks)]
