"""The kernels `helion_bench.py` measures, written here in our words after Helion's examples, and
the CPU harness of its `--cpu` smoke path.

matmul (fp16 [M, K] x [K, N], `hl.tile` over M and N with an `addmm` K loop), softmax and layer
norm (fp16 rows, one row tile and the whole row as a reduction), attention (fp16 [B, H, S, D],
Helion's online-softmax loop) and an int4 matmul (bf16 activations, int8 weights packed two a
byte, unpacked and summed by hand as Helion's int4 example does).

On a CPU (`--cpu`: Triton's interpreter, no GPU) kernel times come from a wall-clock timer
injected in place of Helion's CUDA-event `do_bench`, in this process (Helion's
`autotune_benchmark_fn` setting) and in Helion's benchmark worker: that worker is spawned and
so runs `helion_bench.py` again as its main module, which calls `install_cpu_timer` when
HELION_BENCH_CPU=1. Those times say nothing about kernels; the CPU path shows the plumbing and
the worker's start-up and reuse. Only the matmuls run in Triton 3.9's interpreter here (the
row reductions fail in it).
"""
from __future__ import annotations

import math
import os
import statistics
import time
from typing import Any, Callable

import torch

import helion.language as hl

CPU = os.environ.get("HELION_BENCH_CPU") == "1"


def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            acc = torch.addmm(acc, x[tm, tk], y[tk, tn])
        out[tm, tn] = acc.to(x.dtype)
    return out


def softmax(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tr in hl.tile(x.size(0)):
        out[tr, :] = torch.nn.functional.softmax(x[tr, :], dim=1)
    return out


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tr in hl.tile(x.size(0)):
        row = x[tr, :].to(torch.float32)
        centred = row - row.mean(dim=-1, keepdim=True)
        var = (centred * centred).mean(dim=-1, keepdim=True)
        y = centred * torch.rsqrt(var + 1e-5) * w[:].to(torch.float32) + b[:].to(torch.float32)
        out[tr, :] = y.to(x.dtype)
    return out


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    sq, skv = q.size(-2), k.size(-2)
    d = hl.specialize(q.size(-1))
    qv, kv, vv = q.reshape([-1, sq, d]), k.reshape([-1, skv, d]), v.reshape([-1, skv, d])
    out = torch.empty_like(qv)
    scale = 1.44269504 / math.sqrt(d)
    for tb, tm in hl.tile([qv.size(0), sq]):
        m_i = hl.full([tb, tm], float("-inf"), dtype=torch.float32)
        l_i = torch.full_like(m_i, 1.0)
        acc = hl.zeros([tb, tm, d], dtype=torch.float32)
        qt = qv[tb, tm, :]
        for tn in hl.tile(skv):
            s = torch.bmm(qt, kv[tb, tn, :].transpose(1, 2), torch.float32) * scale  # scores in fp32
            m_new = torch.maximum(m_i, torch.amax(s, -1))
            p = torch.exp2(s - m_new[:, :, None])
            alpha = torch.exp2(m_i - m_new)
            l_i = l_i * alpha + torch.sum(p, -1)
            acc = torch.baddbmm(acc * alpha[:, :, None], p.to(vv.dtype), vv[tb, tn, :])
            m_i = m_new
        out[tb, tm, :] = (acc / l_i[:, :, None]).to(out.dtype)
    return out.view(q.size())


def int4_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    _, n = b.shape
    c = torch.empty(m, n, dtype=torch.bfloat16, device=a.device)
    bk = hl.register_block_size(k // 2)
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tkp in hl.tile(k // 2, block_size=bk):
            a_t = a[tm, tkp.begin * 2: tkp.begin * 2 + bk * 2].to(torch.float32)
            packed = b[tkp, tn]
            w = torch.stack([((packed << 4) >> 4).to(torch.int8), (packed >> 4).to(torch.int8)], dim=1)
            w = w.reshape(tkp.block_size * 2, tn.block_size).to(torch.float32)
            acc = acc + (a_t.unsqueeze(2) * w.unsqueeze(0)).sum(dim=1)
        c[tm, tn] = acc.to(torch.bfloat16)
    return c


def _unpack(packed: torch.Tensor) -> torch.Tensor:
    lo, hi = ((packed << 4) >> 4).to(torch.int8), (packed >> 4).to(torch.int8)
    return torch.stack([lo, hi], dim=1).reshape(packed.shape[0] * 2, packed.shape[1])


def _pack(w: torch.Tensor) -> torch.Tensor:
    r = w.reshape(w.shape[0] // 2, 2, w.shape[1]).permute(1, 0, 2)
    return ((r[0] & 0xF) | (r[1] << 4)).to(torch.int8)


def kernels(dev: str | None = None) -> dict[str, Any]:
    """name -> (function, make_args(shape), reference(*args) in fp32 for the error,
    baseline(*args): PyTorch's own op in the kernel's dtype, timed beside it)."""
    dev = dev or ("cpu" if CPU else "cuda")
    f16 = torch.float32 if dev == "cpu" else torch.float16  # named for the GPU runs; fp32 in the CPU interpreter
    F = torch.nn.functional

    def ln(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, fp32: bool) -> torch.Tensor:
        t = (lambda v: v.float()) if fp32 else (lambda v: v)
        return F.layer_norm(t(x), (x.shape[1],), t(w), t(b), 1e-5).to(x.dtype)

    return {
        "matmul": (matmul, lambda s: (torch.randn(s[0], s[2], dtype=f16, device=dev),
                                      torch.randn(s[2], s[1], dtype=f16, device=dev)),
                   lambda x, y: (x.float() @ y.float()).to(x.dtype), lambda x, y: x @ y),
        "softmax": (softmax, lambda s: (torch.randn(*s, dtype=f16, device=dev),),
                    lambda x: torch.softmax(x.float(), dim=1).to(x.dtype), lambda x: torch.softmax(x, dim=1)),
        "layer_norm": (layer_norm, lambda s: (torch.randn(*s, dtype=f16, device=dev),
                                              torch.randn(s[1], dtype=f16, device=dev),
                                              torch.randn(s[1], dtype=f16, device=dev)),
                       lambda x, w, b: ln(x, w, b, True), lambda x, w, b: ln(x, w, b, False)),
        "attention": (attention, lambda s: tuple(torch.randn(*s, dtype=f16, device=dev) for _ in range(3)),
                      lambda q, k, v: F.scaled_dot_product_attention(q.float(), k.float(), v.float()).to(q.dtype),
                      lambda q, k, v: F.scaled_dot_product_attention(q, k, v)),
        "int4_matmul": (int4_matmul, lambda s: (torch.randn(s[0], s[2], dtype=torch.bfloat16, device=dev),
                                                _pack(torch.randint(-8, 8, (s[2], s[1]), dtype=torch.int8,
                                                                    device=dev))),
                        lambda a, b: (a.float() @ _unpack(b).float()).to(torch.bfloat16),
                        lambda a, b: a @ _unpack(b).to(torch.bfloat16)),
    }


# ----------------------------------------------------------------------------- timing, GPU or CPU

def cpu_ms(fn: Callable[[], Any], reps: int = 3) -> float:
    """Median wall milliseconds of `reps` calls (the CPU stand-in for a kernel timer)."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _cpu_do_bench(fn: Callable[[], Any], **_: Any) -> float:
    return cpu_ms(fn)


def cpu_benchmark_fn(fns: list[Callable[[], Any]], *, repeat: int = 1, desc: str | None = None) -> list[float]:
    """Helion's `autotune_benchmark_fn` contract, timed on the CPU."""
    return [cpu_ms(f) for f in fns]


def install_cpu_timer() -> None:
    """Helion's benchmark jobs time with the CPU timer (in whichever process runs them)."""
    from helion.autotuner import benchmark_job

    benchmark_job.do_bench = _cpu_do_bench


def sync() -> None:
    if not CPU:
        torch.cuda.synchronize()


# HELION_BENCH_TIMER=graph (helion_bench.py --timer graph): kernels replayed as a CUDA graph. A
# Helion kernel's call from Python (binding its arguments, its launcher) takes tens of
# microseconds on the host, more than a ~10 us kernel runs, so do_bench's back-to-back calls
# can time the host rather than the kernel (session 42: every matmul 1024^3 config re-timed at
# 0.023-0.033 ms beside torch's 0.010).
GRAPH_FALLBACKS: list[str] = []  # why a graph timing fell back to do_bench, for the row


def timer_name() -> str:
    if CPU:
        return "cpu"
    return "cuda graph" if os.environ.get("HELION_BENCH_TIMER") == "graph" else "do_bench"


def bench_ms(fn: Callable[[], Any], warmup: int = 50, rep: int = 200) -> float:
    """A ready kernel's time: `triton.testing.do_bench` median (ms), with HELION_BENCH_TIMER=graph
    `do_bench_cudagraph`'s (falling back to do_bench where the call cannot be captured, said in
    GRAPH_FALLBACKS), or the CPU timer."""
    if CPU:
        return cpu_ms(fn)
    import triton

    if timer_name() == "cuda graph":
        try:
            return float(triton.testing.do_bench_cudagraph(fn, rep=rep, return_mode="median"))
        except Exception as e:  # noqa: BLE001 - not capturable: timed the plain way, and said
            GRAPH_FALLBACKS.append(f"{type(e).__name__}: {e}"[:300])
            torch.cuda.synchronize()
    return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))


def device_name() -> str:
    return "cpu (Triton interpreter)" if CPU else torch.cuda.get_device_name()


def versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for p in ("helion", "torch", "triton", "abductune"):
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = "?"
    return out


if CPU:
    install_cpu_timer()
