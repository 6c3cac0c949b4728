"""A layer norm that accumulates: Y += LN(X) * w + b, and adds each row's sum of squares of
the normalised values into `Stats` with an atomic add. Timing it naively would add LN(X)
into Y once per trial: `restore_value=["Y"]` and `reset_to_zero=["Stats"]` keep it exact."""
import triton
import triton.language as tl

import abductune

CONFIGS = [triton.Config({"BLOCK_SIZE": b}, num_warps=w) for b, w in ((16, 1), (32, 2), (64, 4))]


@triton.jit
def layernorm_acc_kernel(X, Y, W, B, Stats, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    X += row * stride
    Y += row * stride
    mean_acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mean_acc += tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(mean_acc, axis=0) / N
    var_acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.0)
        var_acc += x * x
    rstd = 1 / tl.sqrt(tl.sum(var_acc, axis=0) / N + eps)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        y = tl.load(Y + cols, mask=mask)
        tl.store(Y + cols, y + (x - mean) * rstd * w + b, mask=mask)
    tl.atomic_add(Stats, tl.sum(var_acc, axis=0) * rstd * rstd)


def make(**options):
    return abductune.autotune(configs=CONFIGS, key=["N"], reset_to_zero=["Stats"], restore_value=["Y"],
                              **options)(layernorm_acc_kernel)


def layernorm_acc(kernel, x, y, w, b, stats, eps=1e-5):
    rows, n = x.shape
    kernel[(rows,)](x, y, w, b, stats, x.stride(0), n, eps)
    return y, stats
