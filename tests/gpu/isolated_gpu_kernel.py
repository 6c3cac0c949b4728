"""A copy kernel for the decorator's isolate=True test on a GPU. MODE 0 copies; MODE 1 writes
far out of bounds (an illegal address: a sticky CUDA error that poisons the context of the
process that launched it); MODE 2 spins forever on a flag nobody sets (a hang)."""
import triton
import triton.language as tl

import abductune


@triton.jit
def copy_kernel(x_ptr, y_ptr, flag_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if MODE == 2:
        while tl.load(flag_ptr, volatile=True) == 0:
            pass
    if MODE == 1:
        offs = offs.to(tl.int64) + (1 << 40)
    tl.store(y_ptr + offs, x, mask=mask)


def reference(args):
    return {"y_ptr": args["x_ptr"].clone()}


CONFIGS = [triton.Config({"BLOCK": 256, "MODE": 1}), triton.Config({"BLOCK": 512, "MODE": 0}),
           triton.Config({"BLOCK": 1024, "MODE": 2}), triton.Config({"BLOCK": 1024, "MODE": 0})]


def make(**options):
    options = {"reference": reference, "isolate": True, "isolate_timeout_s": 20, **options}
    return abductune.autotune(configs=CONFIGS, key=["n"], **options)(copy_kernel)


def copy(kernel, x, y, flag):
    n = x.numel()
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, flag, n)
    return y
