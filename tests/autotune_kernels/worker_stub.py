"""What a compile worker sees, without a GPU: `RecordingJit` stands for a @triton.jit function.
Each compile-only launch is recorded, and every argument that is not a constexpr is specialized
as Triton's JIT does (`mangle_type`), so an argument the JIT cannot take (a torch.dtype where a
tensor was) fails here as it failed in the workers of issue 24. The kernel below has fla's shape:
@triton.heuristics over @triton.autotune, tensors passed by keyword, a constexpr dtype."""
import inspect

import triton
import triton.language as tl
from triton.runtime.jit import KernelInterface, mangle_type


class RecordingJit(KernelInterface):
    calls: list = []

    def __init__(self, fn):
        self.fn = fn
        self.params = inspect.signature(fn).parameters
        self.arg_names = list(self.params)

    def run(self, *args, grid, warmup, **kwargs):
        named = {**dict(zip(self.arg_names, args)), **kwargs}
        missing = [n for n in self.arg_names if n not in named and self.params[n].default is inspect.Parameter.empty]
        assert not missing, f"the launch lacks {missing}"
        types = {n: mangle_type(v) for n, v in named.items()
                 if n in self.params and self.params[n].annotation is not tl.constexpr and v is not None}
        RecordingJit.calls.append({"args": named, "types": types, "warmup": warmup, "grid": grid})


@triton.heuristics({"HAS_Y": lambda args: args["y"] is not None})
@triton.autotune(configs=[triton.Config({"BLOCK": 16}, num_warps=1), triton.Config({"BLOCK": 32}, num_warps=2)],
                 key=["n"])
@RecordingJit
def fla_like_kernel(x, y, z, desc, n, DTYPE: tl.constexpr, HAS_Y: tl.constexpr, BLOCK: tl.constexpr,
                    SCALE: tl.constexpr = 1):
    pass


def _blocks(nargs):  # Liger's MLP and Triton's TMA tutorials: the config's tile is the descriptor's block
    nargs["desc"].block_shape = [nargs["BM"], 32]


@triton.autotune(configs=[triton.Config({"BM": 16}, pre_hook=_blocks), triton.Config({"BM": 32}, pre_hook=_blocks)],
                 key=["n"])
@RecordingJit
def desc_kernel(desc, n, BM: tl.constexpr):
    pass
