"""A kernel with configs that kill or hang the process measuring them, deterministically, for
the isolate=True tests. BLOCK=16: its config pre_hook kills its process with SIGSEGV;
BLOCK=32: the timer sleeps past any test timeout; BLOCK=64 and 128 run, 128 faster. Had they
run, 16 and 32 would have been the fastest.

The kernel accumulates into `out` (out += 2 * x), so a trial that ran without reset_to_zero
leaves a wrong result, which `reference` catches."""
import os
import signal
import time

import torch
import triton
import triton.language as tl

import abductune

TIMES = {16: 0.1, 32: 0.2, 64: 2.0, 128: 1.0}


def segfault(nargs):
    os.kill(os.getpid(), signal.SIGSEGV)


def timer(cfg, launch):
    launch()
    if cfg["BLOCK"] == 32:
        time.sleep(60)
    return [TIMES[cfg["BLOCK"]]]


def reference(args):
    return {"out_ptr": 2 * args["x_ptr"]}


CONFIGS = [triton.Config({"BLOCK": 16}, pre_hook=segfault), triton.Config({"BLOCK": 32}),
           triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})]


@triton.jit
def accumulate_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.load(out_ptr + offs, mask=mask) + 2 * tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, acc, mask=mask)


def make(**options):
    """The kernel under @abductune.autotune(isolate=True) with the test's options."""
    options = {"reference": reference, "timer": timer, "isolate": True, **options}
    return abductune.autotune(configs=CONFIGS, key=["n"], reset_to_zero=["out_ptr"], **options)(accumulate_kernel)


def accumulate(kernel, x, out):
    n = x.numel()
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)  # a closure: the caller evaluates it
    return out


def scale_reference(args):
    return {"out_ptr": args["out_ptr"] * args["x_ptr"]}


@abductune.autotune(configs=CONFIGS[2:], key=["n"], restore_value=["out_ptr"], reference=scale_reference,
                    isolate=True)
@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Decorated in place, as users write it: the worker finds it under the module-level
    autotuner. In place (out *= x): each trial needs restore_value."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(out_ptr + offs, mask=mask) * tl.load(x_ptr + offs, mask=mask), mask=mask)


def main(store: str, n: int) -> dict:
    """A second process on a store: what it launched and what it measured."""
    k = make(store=store, isolate_timeout_s=8)
    x = torch.arange(float(n))
    ok = torch.equal(accumulate(k, x, torch.zeros(n)), 2 * x)
    [choice] = k.choices.values()
    return {"ok": ok, "stats": k.stats, "winner": choice.config, "source": choice.source}
