"""A kernel that computes wrongly with one config beyond its list, for the isolate=True list
check: out = 2 * x, except that BLOCK=32 (one step below the list's only config, 64, where
`budget=` grows the space) writes 3 * x. A program of the list's config covers 32 elements and
one of any other config 128, so the list's config needs the largest grid: launched with any
other config's grid it would leave part of `out` unwritten (zeroed before each launch), and
right configs would be judged against a wrong expectation. The timer makes 32 the fastest, then
128, then 64."""
import triton
import triton.language as tl

import abductune

TIMES = {32: 0.5, 64: 2.0, 128: 1.0}
CONFIGS = [triton.Config({"BLOCK": 64})]


def reference(args):
    return {"out_ptr": 2 * args["x_ptr"]}


def timer(cfg, launch):
    launch()
    return [TIMES[cfg["BLOCK"]] + cfg.get("num_warps", 4) / 100]


@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    CHUNK: tl.constexpr = 32 if BLOCK == 64 else 128
    offs = tl.program_id(0) * CHUNK + tl.arange(0, CHUNK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if BLOCK == 32:
        y = 3 * x
    else:
        y = 2 * x
    tl.store(out_ptr + offs, y, mask=mask)


def make(**options):
    return abductune.autotune(configs=CONFIGS, key=["n"], budget=12, timer=timer, isolate=True,
                              reset_to_zero=["out_ptr"], **options)(double_kernel)


def double(kernel, x, out):
    n = x.numel()
    kernel[lambda meta: (triton.cdiv(n, 32 if meta["BLOCK"] == 64 else 128),)](x, out, n)
    return out
