"""A small third-party kernel library of the kinds issue 24 met, written without abductune:
each is imported under `abductune.patch_triton()` by tests/test_patch_libraries.py.

- `LibEntry` / `libentry()`: FlagGems' wrapper, which accepts only Triton's `Autotuner` or
  `Heuristics` between it and the kernel (anything else: "Invalid Runtime Function") and reads
  the autotuner's `best_config` after the launch;
- `CachedTuner` / `cached_autotune`: fla's `CachedAutotuner`, a subclass of Triton's `Autotuner`
  built without `triton.autotune`, that files configs from its own files in `cache` under
  Triton's key, then tunes through `super().run`;
- `PolicyTuner` / `libtuner`: FlagGems' `LibTuner`, a subclass whose `run` re-implements tuning
  (its own loop, a cache object that is not a dict, a per-key `strategy` such as align32);
- kernels: `@libentry()` over `@triton.autotune`; `@triton.heuristics` over `@triton.autotune`
  (fla's chunked kernels); keyword tensors with `do_not_specialize` and a constexpr default
  (fla's swiglu); tensor descriptors set per config by a config pre_hook (Liger's MLP); an empty
  config list."""
import inspect

import torch
import triton
import triton.language as tl
from triton.runtime.autotuner import Autotuner, Heuristics
from triton.tools.tensor_descriptor import TensorDescriptor

CONFIGS = [triton.Config({"BLOCK": 16}, num_warps=1), triton.Config({"BLOCK": 32}, num_warps=2)]


class LibEntry(triton.KernelInterface):
    """FlagGems' @libentry(): walks to the kernel through Triton's autotuners and heuristics only."""

    def __init__(self, fn):
        self.fn = fn
        self.arg_names = fn.arg_names
        self.seen = []  # (kind, best config kwargs) per wrapper, as LibEntry collects constexprs

    def run(self, *args, **kwargs):
        out = self.fn.run(*args, **kwargs)
        fn = self.fn
        while not inspect.isfunction(getattr(fn, "fn", None)):  # down to the @triton.jit object
            if isinstance(fn, Autotuner):
                config = fn.best_config
                self.seen.append(("autotuner", dict(config.kwargs), config.num_warps, config.num_stages))
            elif isinstance(fn, Heuristics):
                self.seen.append(("heuristics", dict(fn.values), None, None))
            else:
                raise RuntimeError("Invalid Runtime Function")
            fn = fn.fn
        return out


def libentry():
    return LibEntry


class CachedTuner(Autotuner):
    """fla's CachedAutotuner: configs from its own files first, filed in Triton's `cache`."""

    FILES: dict = {}  # kernel name -> triton.Config (fla reads JSON files per GPU)

    def __init__(self, fn, arg_names, configs, key, reset_to_zero, restore_value, **kwargs):
        super().__init__(fn, arg_names, configs, key, reset_to_zero, restore_value, **kwargs)
        self.kernel_name = fn.fn.__name__ if hasattr(fn, "fn") else fn.__name__

    def run(self, *args, **kwargs):
        cfg = self.FILES.get(self.kernel_name)
        if cfg is not None:
            named = {**dict(zip(self.arg_names, args)), **kwargs}
            key = tuple(named[k] for k in self.keys) + tuple(str(v.dtype) for v in named.values()
                                                             if hasattr(v, "dtype"))
            self.cache[key] = cfg
        return super().run(*args, **kwargs)


def cached_autotune(configs, key, **kwargs):
    return lambda fn: CachedTuner(fn, fn.arg_names, configs, key, None, None, **kwargs)


def align32(v):
    return -(-v // 32) * 32


class LibCache:
    """FlagGems' ConfigCache: not a dict."""

    def __init__(self):
        self._d = {}

    def __contains__(self, key):
        return key in self._d

    def __getitem__(self, key):
        return self._d[key]

    def __setitem__(self, key, value):
        self._d[key] = value

    def get(self, key):
        return self._d.get(key)


class PolicyTuner(Autotuner):
    """FlagGems' LibTuner: its run re-implements tuning and never calls Triton's."""

    def __init__(self, fn, arg_names, configs, key, reset_to_zero, restore_value, pre_hook=None, post_hook=None,
                 prune_configs_by=None, warmup=None, rep=None, use_cuda_graph=False, do_bench=None, strategy=None):
        super().__init__(fn, arg_names, configs, key, reset_to_zero, restore_value, pre_hook, post_hook,
                         prune_configs_by, warmup, rep, use_cuda_graph)
        self.keys = key
        self.strategy = list(strategy)
        self.cache = LibCache()
        self.policy_calls = 0

    def policy(self, bench, configs):
        timings = {c: bench(c) for c in configs}
        return min(timings, key=timings.get), timings

    def run(self, *args, **kwargs):
        self.nargs = dict(zip(self.arg_names, args))
        key = tuple(s(self.nargs[k]) for s, k in zip(self.strategy, self.keys))
        if key not in self.cache:
            self.policy_calls += 1
            best, self.configs_timings = self.policy(lambda c: self._bench(*args, config=c, **kwargs),
                                                     self.prune_configs(kwargs))
            self.cache[key] = best
        self.best_config = self.cache[key]
        out = self.fn.run(*args, **kwargs, **self.best_config.all_kwargs())
        self.nargs = None
        return out


def libtuner(configs, key, strategy, **kwargs):
    return lambda fn: PolicyTuner(fn, fn.arg_names, configs, key, None, None, strategy=strategy, **kwargs)


class ThinTuner(Autotuner):
    """A subclass with no __init__ or run of its own (a helper method only)."""

    def describe(self):
        return f"{len(self.configs)} configs"


class NamedInitTuner(Autotuner):
    """A subclass whose __init__ calls Triton's by name, not through super()."""

    def __init__(self, fn, arg_names, configs, key):
        Autotuner.__init__(self, fn, arg_names, configs, key, None, None)


def _grid(n):
    return lambda meta: (triton.cdiv(n, meta["BLOCK"]),)


# FlagGems' shape: @libentry() over @triton.autotune
@libentry()
@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def entry_scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)


# fla's shape: its own Autotuner subclass, no triton.autotune
@cached_autotune(configs=CONFIGS, key=["n"])
@triton.jit
def cached_scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)


# FlagGems' LibTuner: @libentry() over a subclass that re-implements tuning, keyed by align32
@libentry()
@libtuner(configs=CONFIGS, key=["n"], strategy=[align32])
@triton.jit
def policy_scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)


# fla's chunked kernels: @triton.heuristics over @triton.autotune (the heuristics' values reach
# the autotuner as keyword arguments; a compile worker must not compute them again)
@triton.heuristics({"HAS_BIAS": lambda args: args["bias_ptr"] is not None})
@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def heur_scale_kernel(x_ptr, bias_ptr, out_ptr, n, alpha, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(x_ptr + offs, mask=mask) * alpha
    if HAS_BIAS:
        y += tl.load(bias_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, y, mask=mask)


# fla's swiglu: tensors passed by keyword, do_not_specialize, a constexpr default
@triton.autotune(configs=CONFIGS, key=["D"])
@triton.jit(do_not_specialize=["T"])
def swiglu_kernel(x, y, z, T, D: tl.constexpr, SCALE: tl.constexpr = 1.0, BLOCK: tl.constexpr = 8):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < T
    a = tl.load(x + offs, mask=mask).to(tl.float32)
    b = tl.load(y + offs, mask=mask).to(tl.float32)
    tl.store(z + offs, (a * tl.sigmoid(a) * b * SCALE).to(z.dtype.element_ty), mask=mask)


def _set_blocks(nargs):  # Triton's TMA tutorials: the config's tile is the descriptors' block
    nargs["in_desc"].block_shape = [nargs["BM"], nargs["BN"]]
    nargs["out_desc"].block_shape = [nargs["BM"], nargs["BN"]]


DESC_CONFIGS = [triton.Config({"BM": 16, "BN": 32}, num_warps=1, pre_hook=_set_blocks),
                triton.Config({"BM": 32, "BN": 32}, num_warps=2, pre_hook=_set_blocks)]


# Liger's MLP: tensor descriptors only (no tensor argument to read a dtype or device from)
@triton.autotune(configs=DESC_CONFIGS, key=["M"])
@triton.jit
def desc_scale_kernel(in_desc, out_desc, M, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    x = in_desc.load([pid * BM, 0])
    out_desc.store([pid * BM, 0], x * 2)


@triton.jit
def _scale_body(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)


thin_scale_kernel = ThinTuner(_scale_body, _scale_body.arg_names, CONFIGS, ["n"], None, None)
named_init_kernel = NamedInitTuner(_scale_body, _scale_body.arg_names, CONFIGS, ["n"])


@triton.autotune(configs=[], key=["n"])
@triton.jit
def untuned_kernel(x_ptr, n, BLOCK: tl.constexpr = 16):
    pass


def entry_scale(x, alpha):
    out = torch.empty_like(x)
    entry_scale_kernel[_grid(x.numel())](x, out, x.numel(), alpha)
    return out


def cached_scale(x, alpha):
    out = torch.empty_like(x)
    cached_scale_kernel[_grid(x.numel())](x, out, x.numel(), alpha)
    return out


def thin_scale(x, alpha):
    out = torch.empty_like(x)
    thin_scale_kernel[_grid(x.numel())](x, out, x.numel(), alpha)
    return out


def policy_scale(x, alpha):
    out = torch.empty_like(x)
    policy_scale_kernel[_grid(x.numel())](x, out, x.numel(), alpha)
    return out


def heur_scale(x, alpha, bias=None):
    out = torch.empty_like(x)
    heur_scale_kernel[_grid(x.numel())](x, bias, out, x.numel(), alpha)
    return out


def swiglu(x, y):
    z = torch.empty_like(x)
    T, D = x.numel(), x.shape[-1]
    swiglu_kernel[_grid(T)](x=x, y=y, z=z, T=T, D=D)
    return z


def desc_scale(x):
    out = torch.empty_like(x)
    M, N = x.shape
    dummy = [8, N]  # replaced by the config's pre_hook
    desc_scale_kernel[lambda meta: (triton.cdiv(M, meta["BM"]),)](
        TensorDescriptor.from_tensor(x, dummy), TensorDescriptor.from_tensor(out, dummy), M)
    return out
