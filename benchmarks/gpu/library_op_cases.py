"""The public library ops `library_ops.py` times (issue 24), each on one LLM shape with a torch
reference, and the small library of our own its `--smoke` path imports under Triton's interpreter.

Every op here reaches a kernel under an autotuner in the library's own source (read from the
published wheels: Liger-Kernel 0.8.5, fla-core 0.6.0, FlagGems 5.0.2); `kernels` names it and
the size of its list, `est_s` guesses each mode's cold child (triton, patch, patch32) on an H100
with 16 cores, for the deadline's planning only. A setup imports its library inside (after the
patch, in the patch modes), builds the inputs and computes the reference before the timed call.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

LIBRARIES = {"liger": "liger_kernel", "fla": "fla", "flaggems": "flag_gems", "smoke": "abt_smoke_lib"}
# what the reach child imports (names), then walks (every submodule below that imports); FlagGems'
# vendor backends other than NVIDIA's fail to import on an NVIDIA machine and are not walked
REACH_ROOTS = {
    "liger": (["liger_kernel"], ["liger_kernel.ops"]),
    "fla": ([], ["fla"]),
    "flaggems": (["flag_gems"], ["flag_gems.ops", "flag_gems.fused", "flag_gems.experimental_ops", "flag_gems.modules",
                                 "flag_gems.runtime.backend._nvidia"]),
    "smoke": ([], ["abt_smoke_lib"]),
}
# what each library imports beyond torch and triton when it is imported (from the wheels' METADATA
# and their import lines); checked before any child starts, so a missing one is named once
NEEDS = {"liger": [], "fla": ["einops", "packaging"], "flaggems": ["yaml", "sqlalchemy", "packaging", "numpy"],
         "smoke": []}


@dataclass
class Case:
    call: Callable[[], Any]  # one launch of the op on the prepared inputs
    ref: Any  # the torch reference of what `call` returns (its first output)
    tol: float  # max |out - ref| / max |ref| allowed


@dataclass
class Op:
    name: str
    library: str
    kernels: str
    shape: str
    est_s: tuple[float, float, float]
    setup: Callable[[str], Case]
    default: bool = True


def _g(device: str) -> Any:
    import torch

    return torch.Generator(device=device).manual_seed(0)


def _randn(*shape: int, device: str, dtype: Any = None, scale: float = 1.0) -> Any:
    import torch

    return torch.randn(*shape, device=device, dtype=dtype or torch.bfloat16, generator=_g(device)) * scale


# ----------------------------------------------------------------------------- Liger-Kernel
def liger_dyt(device: str) -> Case:
    import torch
    from liger_kernel.ops.dyt import liger_dyt_fwd

    x = _randn(8192, 4096, device=device)
    alpha = torch.full((1,), 0.5, device=device, dtype=torch.bfloat16)
    gamma, beta = _randn(4096, device=device), _randn(4096, device=device)
    ref = gamma.float() * torch.tanh(alpha.float() * x.float()) + beta.float()
    return Case(lambda: liger_dyt_fwd(x, alpha, gamma, beta), ref, 2e-2)


def liger_int8int2(device: str) -> Case:
    import torch
    from liger_kernel.ops.experimental.mm_int8int2 import matmul, pack_weights, unpack_weights

    g = _g(device)
    a = torch.randint(-128, 127, (1024, 4096), device=device, dtype=torch.int8, generator=g)
    w = torch.randint(-1, 2, (4096, 4096), device=device, dtype=torch.int32, generator=g)
    b = pack_weights(w.clone(), 2).to(torch.int8).contiguous()
    ref = a.double() @ unpack_weights(b.to(torch.uint8), 2).double()
    return Case(lambda: matmul(a, b), ref, 1e-9)


def liger_mlp(device: str) -> Case:
    import torch
    from liger_kernel.ops.mlp import LigerMLPFunction

    x = _randn(1, 4096, 4096, device=device)
    wg, wu = _randn(14336, 4096, device=device, scale=0.02), _randn(14336, 4096, device=device, scale=0.02)
    wd = _randn(4096, 14336, device=device, scale=0.02)
    ref = (torch.nn.functional.silu(x @ wg.T) * (x @ wu.T)) @ wd.T
    return Case(lambda: LigerMLPFunction.apply(x, wg, wu, wd), ref, 3e-2)  # no grad: the inference kernel


def liger_moe(device: str) -> Case:
    import torch
    from liger_kernel.ops.fused_moe import LigerFusedMoEFunction

    tokens, experts, hidden, inter, topk = 4096, 60, 2048, 1408, 4  # Qwen1.5-MoE-A2.7B's layer
    x = _randn(tokens, hidden, device=device, scale=0.1)
    w1 = _randn(experts, 2 * inter, hidden, device=device, scale=0.02)
    w2 = _randn(experts, hidden, inter, device=device, scale=0.02)
    top_w, top_i = torch.rand(tokens, experts, device=device, generator=_g(device)).topk(topk, dim=1)
    top_w = (top_w / top_w.sum(1, keepdim=True)).to(torch.bfloat16)
    top_i = top_i.to(torch.int32)
    rows = 64  # the reference on the first tokens: the whole layer in fp32, token by token, is slow
    ref = torch.zeros(rows, hidden, device=device)
    for t in range(rows):
        for j in range(topk):
            e = int(top_i[t, j])
            gu = w1[e].float() @ x[t].float()
            ref[t] += float(top_w[t, j]) * (w2[e].float() @ (torch.nn.functional.silu(gu[:inter]) * gu[inter:]))
    return Case(lambda: LigerFusedMoEFunction.apply(x, w1, w2, top_i, top_w)[:rows], ref, 5e-2)


# ----------------------------------------------------------------------------- fla-core
def fla_swiglu(device: str) -> Case:
    import torch
    from fla.modules.activations import swiglu

    x, y = _randn(4, 2048, 14336, device=device), _randn(4, 2048, 14336, device=device)
    ref = torch.nn.functional.silu(x.float()) * y.float()
    return Case(lambda: swiglu(x, y), ref, 2e-2)


def fla_l2norm(device: str) -> Case:
    from fla.modules.l2norm import l2norm

    x = _randn(8, 4096, 16, 128, device=device)  # q or k of a gated-delta-rule layer, normed per head
    xf = x.float()
    ref = xf / (xf.pow(2).sum(-1, keepdim=True) + 1e-6).sqrt()
    return Case(lambda: l2norm(x), ref, 2e-2)


def fla_rms_norm(device: str) -> Case:
    import torch
    from fla.modules.layernorm import rms_norm

    x, w = _randn(8, 4096, 16, 128, device=device), _randn(128, device=device)  # per-head q/k norm
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5) * w.float()
    return Case(lambda: rms_norm(x, w, None, eps=1e-5), ref, 2e-2)


def _gla_inputs(device: str) -> tuple:
    import torch

    b, t, h, d = 4, 2048, 16, 128
    q, k, v = (_randn(b, t, h, d, device=device, scale=s) for s in (1.0, 1.0, 1.0))
    gk = torch.nn.functional.logsigmoid(_randn(b, t, h, d, device=device, dtype=torch.float32)) / 16
    from fla.ops.gla.naive import naive_recurrent_gla

    ref, _ = naive_recurrent_gla(q, k, v, gk.bfloat16())
    return q, k, v, gk.bfloat16(), ref.float()


def fla_fused_recurrent(device: str) -> Case:
    from fla.ops.gla import fused_recurrent_gla

    q, k, v, gk, ref = _gla_inputs(device)
    return Case(lambda: fused_recurrent_gla(q, k, v, gk)[0], ref, 2e-2)


def fla_chunk_gla(device: str) -> Case:
    from fla.ops.gla import chunk_gla

    q, k, v, gk, ref = _gla_inputs(device)
    return Case(lambda: chunk_gla(q, k, v, gk)[0], ref, 2e-2)


# ----------------------------------------------------------------------------- FlagGems
def flaggems_rms_norm(device: str) -> Case:
    import flag_gems
    import torch

    x, w = _randn(4096, 8192, device=device), _randn(8192, device=device)
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    return Case(lambda: flag_gems.rms_norm(x, [8192], w, 1e-6), ref, 2e-2)


def flaggems_layer_norm(device: str) -> Case:
    import flag_gems
    import torch

    x, w, b = _randn(4096, 8192, device=device), _randn(8192, device=device), _randn(8192, device=device)
    ref = torch.nn.functional.layer_norm(x.float(), [8192], w.float(), b.float(), 1e-5)
    return Case(lambda: flag_gems.layer_norm(x, [8192], w, b, 1e-5)[0], ref, 2e-2)


def flaggems_sdpa(device: str) -> Case:
    """FlagGems' attention forward (`_attn_fwd` under its LibTuner), non-causal; its list opens
    with a config over the H100's shared memory (session 23)."""
    import flag_gems
    import torch

    q, k, v = (_randn(4, 32, 2048, 128, device=device) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v).float()
    return Case(lambda: flag_gems.scaled_dot_product_attention(q, k, v), ref, 2e-2)


def flaggems_avg_pool2d(device: str) -> Case:
    import flag_gems
    import torch

    x = _randn(32, 64, 112, 112, device=device)
    ref = torch.nn.functional.avg_pool2d(x.float(), 3, 2, 1)
    return Case(lambda: flag_gems.avg_pool2d(x, 3, 2, 1), ref, 1e-2)


def flaggems_cross_entropy(device: str) -> Case:
    import flag_gems
    import torch

    logits = _randn(4096, 32000, device=device)
    target = torch.randint(0, 32000, (4096,), device=device, generator=_g(device))
    ref = torch.nn.functional.cross_entropy(logits.float(), target)
    return Case(lambda: flag_gems.cross_entropy_loss(logits, target), ref, 1e-3)


def flaggems_addmm(device: str) -> Case:
    import flag_gems
    import torch

    a, b = _randn(4096, 4096, device=device), _randn(4096, 4096, device=device, scale=0.02)
    bias = _randn(4096, device=device)
    ref = torch.addmm(bias.float(), a.float(), b.float())
    return Case(lambda: flag_gems.addmm(bias, a, b), ref, 2e-2)


def flaggems_mm(device: str) -> Case:
    import flag_gems

    a, b = _randn(4096, 4096, device=device), _randn(4096, 4096, device=device, scale=0.02)
    return Case(lambda: flag_gems.mm(a, b), a.float() @ b.float(), 2e-2)


# Four ops whose kernels the zoo's replay says have room beyond their lists (benchmarks/list_beyond.py:
# the list's best is 1.14x, 1.29x, 1.12x and 1.2-1.5x the recorded space's optimum on these shapes),
# chosen for that, to see whether the replay's gain holds live (session 27)
def flaggems_var_mean(device: str) -> Case:
    import flag_gems

    x = _randn(16384, 4096, device=device)
    return Case(lambda: flag_gems.var_mean(x, [1], correction=1)[0], x.float().var(-1), 3e-2)


def flaggems_log_softmax_bwd(device: str) -> Case:
    import torch
    from flag_gems.ops.log_softmax import log_softmax_backward

    out = torch.log_softmax(_randn(8192, 4096, device=device).float(), -1).bfloat16()
    dy = _randn(8192, 4096, device=device)
    ref = dy.float() - out.float().exp() * dy.float().sum(-1, keepdim=True)
    return Case(lambda: log_softmax_backward(dy, out, 1, torch.bfloat16), ref, 3e-2)


def flaggems_max_pool2d(device: str) -> Case:
    import flag_gems
    import torch

    x = _randn(64, 128, 56, 56, device=device)
    ref = torch.nn.functional.max_pool2d(x.float(), 2, 2, 0)
    return Case(lambda: flag_gems.max_pool2d_with_indices(x, 2, 2, 0)[0], ref, 1e-2)


def flaggems_bicubic(device: str) -> Case:
    import flag_gems
    import torch

    x = _randn(16, 64, 128, 128, device=device)
    ref = torch.nn.functional.interpolate(x.float(), scale_factor=2, mode="bicubic", align_corners=False)
    return Case(lambda: flag_gems.upsample_bicubic2d(x, [256, 256], False), ref, 3e-2)


# The four FlagGems kernels recorded fresh in session 28, each on its recording's first shape (a
# rule fixed before any figure was read), to see live what the replay says of them beyond
# their lists
def flaggems_weight_norm(device: str) -> Case:
    import flag_gems

    v = _randn(1024, 512, 4, 4, device=device)
    gain = _randn(1, 512, 1, 1, device=device)
    ref = v.float() * gain.float() / v.float().pow(2).sum((0, 2, 3), keepdim=True).sqrt()
    return Case(lambda: flag_gems.weight_norm(v, gain, 1), ref, 2e-2)


def flaggems_reglu(device: str) -> Case:
    import flag_gems
    import torch

    x = _randn(16384, 2 * 2816, device=device)
    return Case(lambda: flag_gems.reglu(x), torch.relu(x[:, :2816].float()) * x[:, 2816:].float(), 1e-2)


def flaggems_softmax_bwd_non_inner(device: str) -> Case:
    import torch
    from flag_gems.ops.softmax import softmax_backward

    out = torch.softmax(_randn(8, 150, 16384, device=device).float(), 1).bfloat16()
    dy = _randn(8, 150, 16384, device=device)
    ref = out.float() * (dy.float() - (out.float() * dy.float()).sum(1, keepdim=True))
    return Case(lambda: softmax_backward(dy, out, 1, torch.bfloat16), ref, 3e-2)


def flaggems_instance_norm(device: str) -> Case:
    import flag_gems
    import torch

    x = _randn(4, 64, 256, 256, device=device)
    w, b = _randn(64, device=device), _randn(64, device=device)
    ref = torch.nn.functional.instance_norm(x.float(), weight=w.float(), bias=b.float(), eps=1e-5)
    return Case(lambda: flag_gems.instance_norm(x, w, b, None, None, True, 0.1, 1e-5), ref, 2e-2)


# ----------------------------------------------------------------------------- our own, for --smoke
SMOKE_LIB = {
    "abt_smoke_lib/__init__.py": '"""A kernel library of our own for library_ops.py --smoke."""\n',
    "abt_smoke_lib/ops/__init__.py": '''
import time


def wall_bench(fn, quantiles=None):
    """The library's own benchmarker (Triton's needs a GPU driver; the interpreter has none)."""
    ms = []
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    return [ms[min(2, int(q * 3))] for q in quantiles] if quantiles else ms[1]
''',
    "abt_smoke_lib/ops/scale.py": '''
import torch
import triton
import triton.language as tl


from abt_smoke_lib.ops import wall_bench


@triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (16, 32) for w in (1, 2)], key=["n"],
                 do_bench=wall_bench)
@triton.jit
def scale_kernel(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * a, mask=m)


def scale(x, a):
    y = torch.empty_like(x)
    n = x.numel()
    scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, a, n)
    return y
''',
    "abt_smoke_lib/ops/tuned_add.py": '''
import torch
import triton
import triton.language as tl
from triton.runtime.autotuner import Autotuner

from abt_smoke_lib.ops import wall_bench

class CountingTuner(Autotuner):
    """A library's own subclass built without triton.autotune (as fla's CachedAutotuner)."""

    def run(self, *args, **kwargs):
        self.calls = getattr(self, "calls", 0) + 1
        return super().run(*args, **kwargs)


@triton.jit
def _add(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(z_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


add_kernel = CountingTuner(_add, _add.arg_names, [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})],
                           ["n"], None, None, do_bench=wall_bench)


def add(x, y):
    z = torch.empty_like(x)
    n = x.numel()
    add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, z, n)
    return z
''',
    "abt_smoke_lib/ops/untuned.py": '''
import triton
import triton.language as tl


@triton.autotune(configs=[], key=[])
@triton.jit
def fill_kernel(x_ptr, v, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), v)
''',
    "abt_smoke_lib/ops/vendor.py": 'raise ImportError("needs a vendor runtime this machine lacks")\n',
}


def smoke_scale(device: str) -> Case:
    import torch
    from abt_smoke_lib.ops.scale import scale

    x = torch.arange(200, dtype=torch.float32, device=device)
    return Case(lambda: scale(x, 3.0), x * 3.0, 1e-6)


def smoke_add(device: str) -> Case:
    import torch
    from abt_smoke_lib.ops.tuned_add import add

    x, y = torch.arange(200, dtype=torch.float32, device=device), torch.ones(200, device=device)
    return Case(lambda: add(x, y), x + y, 1e-6)


# in the order they run, in groups of four (library_ops.py --group): first what the issue found
# broken or unreached (@libentry, fla's CachedAutotuner, FlagGems' LibTuner, heuristics over
# autotune), then a list that is not a cross product and the dtype-argument kernel, then the
# descriptor kernel and the slow ones; the first eight cover each library at least twice
OPS = {o.name: o for o in [
    Op("flaggems_rms_norm", "flaggems", "rms_norm_loop_kernel (@libentry over triton.autotune, 12)",
       "4096x8192 bf16", (8, 8, 15), flaggems_rms_norm),
    Op("fla_l2norm", "fla", "l2norm_fwd_kernel (fla's CachedAutotuner, 25)", "8x4096x16x128 bf16",
       (15, 10, 15), fla_l2norm),
    Op("liger_dyt", "liger", "_dyt_fwd_kernel (triton.autotune, 18)", "8192x4096 bf16", (11, 8, 15), liger_dyt),
    Op("flaggems_addmm", "flaggems", "addmm_kernel (FlagGems' LibTuner under @libentry, 8)",
       "4096x4096x4096 bf16 + bias", (12, 10, 25), flaggems_addmm),
    Op("fla_fused_recurrent", "fla", "fused_recurrent_fwd_kernel (heuristics over triton.autotune, 2)",
       "GLA 4x2048x16, K=V=128 bf16", (4, 5, 15), fla_fused_recurrent),
    Op("flaggems_cross_entropy", "flaggems", "celoss_indices_kernel (@libentry over triton.autotune, 9)",
       "4096 tokens x 32000 bf16", (7, 7, 15), flaggems_cross_entropy),
    Op("liger_int8int2", "liger", "matmul_kernel (triton.autotune, 12, not a cross product)",
       "1024x4096x4096 int8 x int2", (15, 10, 25), liger_int8int2),
    Op("fla_swiglu", "fla", "swiglu_fwd_kernel (triton.autotune, 30)", "4x2048x14336 bf16", (19, 15, 20),
       fla_swiglu),
    Op("liger_mlp", "liger", "_swiglu_kernel_forward_inference (tensor descriptors, 32)",
       "4096 tokens, 4096 -> 14336 bf16", (45, 20, 30), liger_mlp),
    Op("fla_rms_norm", "fla", "layer_norm_fwd_kernel (triton.autotune, 9)", "8x4096x16x128 bf16",
       (7, 7, 15), fla_rms_norm),
    Op("flaggems_layer_norm", "flaggems", "layer_norm_loop_kernel (@libentry over triton.autotune, 12)",
       "4096x8192 bf16", (8, 8, 15), flaggems_layer_norm),
    Op("fla_chunk_gla", "fla", "chunk_gla forward: cumsum, chunk_fwd_h, intra A, fwd_o (CachedAutotuner and "
       "triton.autotune, about 130 configs)", "GLA 4x2048x16, K=V=128 bf16", (100, 40, 60), fla_chunk_gla),
    Op("liger_moe", "liger", "_fused_up_proj_swiglu, _fused_down_proj, _token_gather (triton.autotune, 32+32+30)",
       "4096 tokens, E=60, H=2048, I=1408, top-4", (90, 40, 60), liger_moe),
    Op("flaggems_mm", "flaggems", "mm_kernel_general_host_tma (LibTuner, 162 on an H100)", "4096^3 bf16",
       (240, 60, 60), flaggems_mm, default=False),
    Op("flaggems_sdpa", "flaggems", "_attn_fwd (FlagGems' LibTuner under @libentry, 45)", "4x32x2048x128 bf16",
       (40, 20, 40), flaggems_sdpa, default=False),
    Op("flaggems_avg_pool2d", "flaggems", "avg_pool2d_forward_kernel (@libentry over triton.autotune, 9)",
       "32x64x112x112, 3x3 stride 2 bf16", (8, 8, 15), flaggems_avg_pool2d, default=False),
    Op("flaggems_var_mean", "flaggems", "var_mean_welford_kernel (@libentry over triton.autotune, 24)",
       "16384x4096 bf16", (8, 8, 15), flaggems_var_mean, default=False),
    Op("flaggems_log_softmax_bwd", "flaggems", "log_softmax_backward_kernel (@libentry over triton.autotune, 3)",
       "8192x4096 bf16", (8, 8, 15), flaggems_log_softmax_bwd, default=False),
    Op("flaggems_max_pool2d", "flaggems", "max_pool2d_forward_kernel (@libentry over triton.autotune, 12)",
       "64x128x56x56, 2x2 stride 2 bf16", (8, 8, 20), flaggems_max_pool2d, default=False),
    Op("flaggems_bicubic", "flaggems", "_upsample_bicubic2d_row_kernel (triton.autotune, 5)",
       "16x64x128x128 -> 256x256 bf16", (8, 8, 15), flaggems_bicubic, default=False),
    Op("flaggems_weight_norm", "flaggems", "weight_norm_except_dim_kernel (@libentry over triton.autotune, 60)",
       "1024x512x4x4, dim 1 bf16", (10, 10, 20), flaggems_weight_norm, default=False),
    Op("flaggems_reglu", "flaggems", "reglu_kernel (FlagGems' LibTuner under @libentry, 4)",
       "16384x5632 bf16", (8, 8, 15), flaggems_reglu, default=False),
    Op("flaggems_softmax_bwd_non_inner", "flaggems",
       "softmax_backward_kernel_non_inner (@libentry over triton.autotune over heuristics, 5)",
       "8x150x16384 over dim 1 bf16", (8, 8, 15), flaggems_softmax_bwd_non_inner, default=False),
    Op("flaggems_instance_norm", "flaggems", "instance_norm_loop_kernel (@libentry over triton.autotune, 12)",
       "4x64x256x256 bf16", (8, 8, 15), flaggems_instance_norm, default=False),
    Op("smoke_scale", "smoke", "scale_kernel (triton.autotune, 4)", "200 fp32", (3, 3, 3), smoke_scale, False),
    Op("smoke_add", "smoke", "add_kernel (an Autotuner subclass, 2)", "200 fp32", (3, 3, 3), smoke_add, False),
]}
