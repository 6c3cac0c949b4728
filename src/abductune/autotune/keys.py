"""Keys and store context: what a call is keyed by (its key arguments, bucketed, and the
kernel's source hash) and what a missed key is stored under (its Problem, the store, and the
claim that lets one process tune a context while the others wait)."""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import hashlib
import inspect
import logging
import numbers
import os
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import AbductuneError
from ..hardware import HardwareInfo
from ..problem import Problem
from ..store import Context, Store, default_path

log = logging.getLogger(__name__)

# ----------------------------------------------------------------------------- buckets

def _pow2(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 1:
        return v
    return 1 << (v - 1).bit_length()


def bucket_function(spec: Any, name: str = "") -> Callable[[Any], Any] | None:
    """A key argument's bucket: "exact" (None: the value itself), "pow2" (next power of two),
    ("align", N) (next multiple of N) or a callable value -> bucket."""
    if spec is None or spec == "exact":
        return None
    if spec == "pow2":
        return _pow2
    if isinstance(spec, tuple) and len(spec) == 2 and spec[0] == "align":
        n = spec[1]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise AbductuneError(f"bucket for {name!r}: ('align', N) needs an integer N >= 1, got {n!r}")
        return lambda v: -(-v // n) * n if isinstance(v, int) and not isinstance(v, bool) else v
    if callable(spec):
        return spec
    raise AbductuneError(f"bucket for {name!r} is {spec!r}; use 'exact', 'pow2', ('align', N) or a callable")


_KEY_TEXT_MAX = 120  # a key value stored by its text longer than this is data, not a key


def key_value(v: Any, name: str = "") -> Any:
    """A key argument's value as the key (and the store) holds it. A tensor (anything with a
    shape and a dtype) is keyed by its shape and dtype, as a user keying on it means: never by
    its contents, which would retune for every new tensor and put the user's data in the
    store. Numbers, strings, None, dtypes and short tuples of them stay as they are; anything
    whose text is long is refused (AbductuneError naming the argument)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, numbers.Number):  # a numpy scalar: its plain value
        return v.item() if hasattr(v, "item") else v
    shape, dtype = getattr(v, "shape", None), getattr(v, "dtype", None)
    if shape is not None and dtype is not None:
        return ("tensor", tuple(int(d) for d in shape), dtype_name(dtype))
    if len(str(v)) > _KEY_TEXT_MAX:
        raise AbductuneError(f"key argument {name!r} is a {type(v).__name__} whose value is "
                             f"{len(str(v))} characters of text; key on ints, strings, dtypes or tensors "
                             "(a tensor is keyed by its shape and dtype), or drop it from key=")
    return v


def triton_key(arg_names: Sequence[str], keys: Sequence[str], nargs: Mapping[str, Any],
               kwargs: Mapping[str, Any]) -> tuple:
    """The key Triton's `Autotuner.run` files a call under in `cache`: the key arguments' values,
    then the text of every argument's dtype (a tensor named in key stands as its shape and dtype,
    so the cache never holds a caller's tensor)."""
    every = {k: v for k, v in {**nargs, **kwargs}.items() if k in arg_names}
    out = [every[k] if not hasattr(every[k], "data_ptr") else key_value(every[k], k) for k in keys if k in every]
    out += [str(v.dtype) for v in every.values() if hasattr(v, "dtype")]
    return tuple(out)


# ----------------------------------------------------------------------------- identity

_MISSING = object()


def python_fn(obj: Any, any_wrapper: bool = False) -> Any:
    """The Python function under a Triton JIT object (JITFunction, InterpretedFunction, an
    Autotuner or Heuristics wrapping one), or None for anything else (with `any_wrapper`,
    under any object whose `.fn` chain ends in a function)."""
    if inspect.isfunction(obj):
        return obj
    if not any_wrapper and not (type(obj).__module__ or "").startswith(("triton", "abductune")):
        return None
    fn = getattr(obj, "fn", None)
    for _ in range(16):
        if fn is None or inspect.isfunction(fn):
            return fn
        fn = getattr(fn, "fn", None)
    return None


def _is_constexpr(v: Any) -> bool:
    return type(v).__name__ == "constexpr" and (type(v).__module__ or "").startswith("triton")


def _resolve(node: ast.AST, scope: Mapping[str, Any]) -> Any:
    """The object a Name or a module attribute chain (`mod.helper`) refers to."""
    if isinstance(node, ast.Name):
        return scope.get(node.id, _MISSING)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, scope)
        if inspect.ismodule(base):
            return getattr(base, node.attr, _MISSING)
    return _MISSING


def _function_source(f: Any) -> str:
    try:
        src = textwrap.dedent(inspect.getsource(f))
    except (OSError, TypeError):  # no source file: hash the bytecode instead
        return repr((f.__code__.co_code, f.__code__.co_consts))
    i = src.find("def ")  # from the `def` on, as Triton does: decorators are not the kernel
    return src[i:] if i >= 0 else src


def kernel_source_hash(fn: Any) -> str:
    """sha256 (16 hex) of a kernel's source and of every `@triton.jit` function it calls,
    transitively, plus the constexpr globals they read: what Triton's `JITFunction.cache_key`
    covers, without its line numbers (moving a kernel in its file keeps its winners). Works
    on compiled and interpreted kernels alike."""
    base = python_fn(fn, any_wrapper=True)
    if base is None:
        raise AbductuneError(f"{fn!r} is not a @triton.jit function; put @abductune.autotune above @triton.jit")
    parts: list[str] = []
    seen: set[int] = set()
    stack = [base]
    while stack:
        f = stack.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        src = _function_source(f)
        try:
            nonlocals = inspect.getclosurevars(f).nonlocals
        except (TypeError, ValueError):
            nonlocals = {}
        scope = {**f.__globals__, **nonlocals}
        consts: set[tuple[str, str]] = set()
        try:
            tree = ast.parse(src)
        except SyntaxError:
            tree = ast.parse("")
        for node in ast.walk(tree):
            val = _resolve(node, scope)
            if val is _MISSING or inspect.ismodule(val):
                continue
            if _is_constexpr(val):
                consts.add((ast.unparse(node), repr(getattr(val, "value", val))))
                continue
            dep = python_fn(val) if not inspect.isfunction(val) else None  # plain Python helpers are not kernels
            if dep is not None:
                stack.append(dep)
        parts.append(src + "\n" + repr(sorted(consts)))
    return hashlib.sha256("\n--\n".join(sorted(parts)).encode()).hexdigest()[:16]


def dtype_name(dt: Any) -> str:
    s = str(dt).replace("torch.", "")
    return {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64"}.get(s, s)


# ----------------------------------------------------------------------------- store context

_STORES: dict[str, Store] = {}
_STORES_LOCK = threading.Lock()


def open_store(spec: Any) -> Store:
    """One Store per path per process (kernels share a connection)."""
    if isinstance(spec, Store):
        return spec
    path = str(default_path() if spec is None else spec)
    with _STORES_LOCK:
        if path not in _STORES:
            if path != ":memory:":
                Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            _STORES[path] = Store(path)
        return _STORES[path]


_HW: dict[Any, HardwareInfo] = {}
INTERPRETER = HardwareInfo(name="cpu-interpreter", vendor="cpu")


def interpreted(fn: Any) -> bool:
    """Whether the kernel under `fn` (through any wrappers) runs in Triton's interpreter
    (TRITON_INTERPRET=1 when Triton was imported): its JIT object is an InterpretedFunction."""
    for _ in range(16):
        if fn is None:
            return False
        if type(fn).__name__ == "InterpretedFunction":
            return True
        fn = getattr(fn, "fn", None)
    return False


def is_descriptor(v: Any) -> bool:
    """A tensor descriptor (triton.tools.tensor_descriptor.TensorDescriptor, Gluon's): an object
    whose `.base` is the tensor it describes, with a block shape."""
    return type(v).__name__ == "TensorDescriptor" and hasattr(v, "base") and hasattr(v, "block_shape")


def tensor_of(v: Any) -> Any:
    """The tensor an argument carries: itself when it is tensor-like (a dtype and a data
    pointer: torch tensors, Triton's MockTensor, stand-ins), a descriptor's base; else None."""
    if hasattr(v, "dtype") and hasattr(v, "data_ptr"):
        return v
    if is_descriptor(v):
        base = v.base
        return base if hasattr(base, "dtype") else None
    return None


def _cuda_hardware(index: int | None) -> HardwareInfo | None:
    """The CUDA device `index` (the current device when None) as a HardwareInfo, or None where
    no CUDA device is visible."""
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch
        except ImportError:
            return None
    try:
        if not torch.cuda.is_available():
            return None
        index = torch.cuda.current_device() if index is None else int(index)
    except Exception:  # noqa: BLE001 - no usable CUDA runtime: not a CUDA machine
        return None
    if ("cuda", index) not in _HW:
        from ..hardware import local_hardware

        _HW["cuda", index] = local_hardware(index)  # a GPU the table lacks: from its properties
    return _HW["cuda", index]


def hardware_of(tensor: Any, interpreting: bool) -> HardwareInfo:
    """The hardware a call runs on: Triton's interpreter when the kernel is interpreted (whatever
    device its tensors name), else the device of its first tensor (a CUDA tensor: that GPU), else
    the current CUDA device; never the interpreter for a kernel that runs on a GPU."""
    if interpreting:
        return INTERPRETER
    dev = getattr(tensor, "device", None)
    kind = getattr(dev, "type", None)
    if kind in ("cuda", None, "cpu", "meta"):
        hw = _cuda_hardware(getattr(dev, "index", None) if kind == "cuda" else None)
        if hw is not None:
            return hw
    kind = kind or "cpu"
    if kind not in _HW:
        _HW[kind] = HardwareInfo(name=kind, vendor=kind)
    return _HW[kind]


def triton_toolchain() -> str:
    import triton

    return f"triton={triton.__version__}"


def key_problem(tuner: Any, nargs: Mapping[str, Any], kwargs: Mapping[str, Any]) -> Problem:
    """The Problem a missed key of `tuner` is tuned and stored under: its key values (bucketed) as
    dims, the dtypes of its tensors, the device they live on and the kernel's source hash."""
    every = {**nargs, **{k: v for k, v in kwargs.items() if k in tuner.arg_names}}
    dims: dict[str, int] = {}
    dtypes: dict[str, str] = {}
    for _, name, b in tuner._key_spec:
        v = every.get(name)
        v = key_value(v if b is None else b(v), name)
        if isinstance(v, (bool, int)):
            dims[name] = int(v)
        elif isinstance(v, tuple) and len(v) == 3 and v[0] == "tensor":  # shape and dtype, no data
            dims.update({f"{name}.dim{j}": d for j, d in enumerate(v[1])})
            dtypes[f"key:{name}"] = v[2]
        else:
            dtypes[f"key:{name}"] = str(v)
    tensor = None
    for name in tuner.arg_names:
        t = tensor_of(every.get(name))  # a tensor, or the tensor a descriptor describes
        if t is not None:
            dtypes[name] = dtype_name(t.dtype)
            tensor = tensor if tensor is not None else t
    if tuner._source_hash is None:
        tuner._source_hash = kernel_source_hash(tuner.fn)
    p = Problem(kernel=tuner.name, kernel_class=tuner.kernel_class or "other", dims=dims, dtypes=dtypes,
                hardware=hardware_of(tensor, interpreted(tuner.fn)), source_hash=tuner._source_hash)
    if tuner.kernel_class is None:
        from ..classify import infer_kernel_class

        p = Problem(p.kernel, infer_kernel_class(p, tuner.space), p.dims, p.dtypes, hardware=p.hardware,
                    source_hash=p.source_hash)
    # its FLOPs and bytes, as a recording's header states them: without them a live tune's
    # diagnosis has no roofline (every config "bound unknown"), where the replays the engine is
    # judged by have one, and the theories that read it never fire live (session 29)
    from ..costs import problem_costs

    costs = problem_costs(p.kernel_class, p.dims, p.dtypes)
    if costs:
        p = dataclasses.replace(p, flops=costs[0], min_bytes=costs[1])
    return p


def why_missed(store: Store, ctx: Context, runs: Sequence[Any]) -> str:
    """Observability: name what differs from the nearest stored context of this kernel."""
    if runs:
        return "the stored tune used another strategy, options or a smaller budget"
    same = store.execute("SELECT source_hash, space_fingerprint, hardware, toolchain FROM contexts "
                         "WHERE kernel = ? AND dims = ?",
                         (ctx.kernel, _json(ctx.dims)))
    for sh, fp, hw, tc in same:
        diffs = [n for n, a, b in (("kernel source", sh, ctx.source_hash), ("space", fp, ctx.space_fingerprint),
                                   ("device", hw, ctx.hardware), ("toolchain", tc, ctx.toolchain)) if a != b]
        if diffs:
            return f"the store has this shape with another {', '.join(diffs)} ({store.path})"
    return f"no stored winner for this kernel, key, device and toolchain in {store.path}"


def _json(d: Mapping[str, Any]) -> str:
    import json

    return json.dumps(dict(d), sort_keys=True, separators=(",", ":"))


@contextlib.contextmanager
def tuning_lock(tuner: Any, store: Store, ctx: Context, budget: Any = None,
                stored: Callable[[], bool] | None = None) -> Any:
    """One process tunes a context, the others wait and then read its winner (ranks of one
    job agree). A claim in the store, taken over when its holder died; inside it, where
    torch.distributed runs a job of several ranks, the job's claim (ranks.py), so that one
    rank of all the machines tunes. `stored()` says whether the store file holds a winner
    by then (a process on this machine finished it): then no rank is asked."""
    from .ranks import across_ranks, agreement_mode, wait_until

    mode = agreement_mode()
    if mode == "off":
        yield
        return
    if store.path == ":memory:":
        with across_ranks(tuner, store, ctx, budget, stored, mode):
            yield
        return
    token = [{"__autotune__": ctx.problem_key}]
    me = -os.getpid()
    t0 = time.perf_counter()
    told = [False]

    def waiting() -> None:
        if not told[0]:
            log.info("%s: another process is tuning this key; waiting for its winner", tuner.name)
            told[0] = True
    if not wait_until(lambda: store.claim(ctx, token, me)[0], tuner.wait_timeout_s, waiting):
        log.warning("%s: waited %.0fs for another process tuning this key; tuning here", tuner.name,
                    tuner.wait_timeout_s)
    if told[0]:
        tuner.stats["waited_s"] += time.perf_counter() - t0
    try:
        with across_ranks(tuner, store, ctx, budget, stored, mode):
            yield
    finally:
        store.release(ctx, token)
