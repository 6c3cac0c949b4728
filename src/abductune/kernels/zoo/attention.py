"""Attention forward in the FlashAttention-2 style, bf16: O = softmax(Q K^T / sqrt(d)) V.

After Dao, "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning"
(2023): each program owns one block of BLOCK_M query rows of one (batch, head) and streams the
keys and values past it in blocks of BLOCK_N, keeping a running row maximum `m`, a running
denominator `l` and an unnormalised fp32 output accumulator; when a new block raises the
maximum, the old `l` and accumulator are scaled down by exp(m_old - m_new) ("online softmax"),
and the single division by `l` happens once, after the last block. Exponentials are taken in
base 2 with log2(e) folded into the softmax scale.

The key loop is split in two passes over the same helper: blocks that need no mask at all
(wholly inside the sequence and, when causal, wholly below the diagonal) and then the few
boundary blocks (the diagonal block(s), a ragged last block) with the key/causal mask applied.
Causal programs skip every key block above the diagonal; within each (batch, head) the query
blocks are taken heaviest first (the last query block, which sees the most keys, gets the lowest
program id along axis 0), so the grid ends on short programs.

Tensors are contiguous (batch, heads, seq, head_dim); head_dim is a problem dim (a power of two,
16 to 128 here), never tuned. Grid: (query blocks, batch * heads). Tuned: BLOCK_M, BLOCK_N
(infer_role: tile:M and tile:N, which classify.tile_dim_name maps to `seq` for the attention
class), num_warps, num_stages. The space is shape-free, so its shared-memory and register
bounds are written for head_dim 128 (the largest): at head_dim 64 they are conservative.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import triton
import triton.language as tl

from ...hardware import HardwareInfo
from ...problem import Problem
from ...space import Choice, Pow2, Space
from ..base import Constexpr, KernelSpec, cdiv, launch_options, torch_dtype

if TYPE_CHECKING:
    import torch

LOG2E = 1.4426950408889634
# The largest head dim this kernel is written for; the space's resource bounds use it, since a
# shape-free space must admit its configs for every head dim the kernel is launched with.
HEAD_DIM_MAX = 128
# Dynamic shared memory one H100 block may request (227 KiB).
SMEM_PER_BLOCK = 232448


@triton.jit
def _fa2_sweep_keys(acc, run_max, run_sum, q, k_head, v_head, rows, lo, hi, seq_len, qk_scale,
                    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                    MASKED: tl.constexpr):
    """Fold key blocks [lo, hi) into (acc, run_max, run_sum). MASKED: apply the sequence end
    and, when CAUSAL, the diagonal; otherwise every key in the range is visible to every row."""
    dcol = tl.arange(0, HEAD_DIM)
    for start_n in range(lo, hi, BLOCK_N):
        keys = start_n + tl.arange(0, BLOCK_N)
        # K is read as its transpose, a (HEAD_DIM, BLOCK_N) tile, V as (BLOCK_N, HEAD_DIM)
        kt_ptrs = k_head + keys[None, :] * HEAD_DIM + dcol[:, None]
        v_ptrs = v_head + keys[:, None] * HEAD_DIM + dcol[None, :]
        if MASKED:
            kt = tl.load(kt_ptrs, mask=keys[None, :] < seq_len, other=0.0)
            vb = tl.load(v_ptrs, mask=keys[:, None] < seq_len, other=0.0)
        else:
            kt = tl.load(kt_ptrs)
            vb = tl.load(v_ptrs)
        s = tl.dot(q, kt) * qk_scale  # scores in log2 units, (BLOCK_M, BLOCK_N) fp32
        if MASKED:
            visible = keys[None, :] < seq_len
            if CAUSAL:
                visible = visible & (keys[None, :] <= rows[:, None])
            s = tl.where(visible, s, float("-inf"))
        # every row sees key 0 in the first block it visits, so new_max is finite from then on
        new_max = tl.maximum(run_max, tl.max(s, axis=1))
        shrink = tl.exp2(run_max - new_max)
        p = tl.exp2(s - new_max[:, None])
        run_sum = run_sum * shrink + tl.sum(p, axis=1)
        acc = acc * shrink[:, None] + tl.dot(p.to(vb.dtype), vb)
        run_max = new_max
    return acc, run_max, run_sum


@triton.jit
def fa2_forward_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq_len, qk_scale,
                       HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       CAUSAL: tl.constexpr):
    n_qblocks = tl.cdiv(seq_len, BLOCK_M)
    qblock = tl.program_id(0)
    if CAUSAL:  # heaviest query blocks first
        qblock = n_qblocks - 1 - qblock
    first_row = qblock * BLOCK_M
    head_base = tl.program_id(1).to(tl.int64) * seq_len * HEAD_DIM  # (batch * heads) index
    q_head = q_ptr + head_base
    k_head = k_ptr + head_base
    v_head = v_ptr + head_base

    rows = first_row + tl.arange(0, BLOCK_M)
    dcol = tl.arange(0, HEAD_DIM)
    row_ok = rows[:, None] < seq_len
    q = tl.load(q_head + rows[:, None] * HEAD_DIM + dcol[None, :], mask=row_ok, other=0.0)

    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    run_max = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    run_sum = tl.zeros((BLOCK_M,), dtype=tl.float32)

    # keys [0, clear_end) are visible to all rows of this block without any mask
    clear_end = (seq_len // BLOCK_N) * BLOCK_N
    stop = seq_len
    if CAUSAL:
        clear_end = tl.minimum(clear_end, ((first_row + 1) // BLOCK_N) * BLOCK_N)
        stop = tl.minimum(seq_len, first_row + BLOCK_M)
    acc, run_max, run_sum = _fa2_sweep_keys(acc, run_max, run_sum, q, k_head, v_head, rows, 0, clear_end,
                                            seq_len, qk_scale, HEAD_DIM, BLOCK_N, CAUSAL, False)
    acc, run_max, run_sum = _fa2_sweep_keys(acc, run_max, run_sum, q, k_head, v_head, rows, clear_end, stop,
                                            seq_len, qk_scale, HEAD_DIM, BLOCK_N, CAUSAL, True)

    out = acc / run_sum[:, None]
    tl.store(o_ptr + head_base + rows[:, None] * HEAD_DIM + dcol[None, :], out.to(o_ptr.dtype.element_ty),
             mask=row_ok)


class AttentionFwdBf16(KernelSpec):
    """Non-causal attention forward (prefill / training); see the module docstring."""

    origin = "abductune zoo (ours), after FlashAttention-2 (Dao 2023): online softmax over key blocks"
    kernel_class = "attention"
    dims = ("batch", "heads", "seq", "head_dim")
    dtype = "bf16"
    causal = False

    def __init__(self) -> None:
        self.name = "zoo_attn_causal_fwd_bf16" if self.causal else "zoo_attn_fwd_bf16"

    @property
    def triton_fn(self) -> Any:
        return fa2_forward_kernel

    # ------------------------------------------------------------------ tuning surface
    def space(self) -> Space:
        return Space(
            [Pow2("BLOCK_M", 16, 256, default=128), Pow2("BLOCK_N", 16, 256, default=64),
             Pow2("num_warps", 2, 16, default=8), Choice("num_stages", [1, 2, 3, 4], default=3)],
            constraints=[
                # early_config_prune's shared-memory bound: the Q tile plus num_stages buffered
                # K and V tiles (bf16) must fit one block's shared memory
                "BLOCK_M * HD * 2 + num_stages * BLOCK_N * HD * 4 <= SMEM",
                # the fp32 output accumulator and score tile stay in registers: at most 256
                # values per thread, past which they certainly spill
                "BLOCK_M * (HD + BLOCK_N) <= 256 * 32 * num_warps",
                # no warp left without query rows: warps split the BLOCK_M rows (16 per mma)
                "BLOCK_M >= 4 * num_warps",
            ],
            constants={"HD": HEAD_DIM_MAX, "SMEM": SMEM_PER_BLOCK},
            name=self.name,
        )

    def fixed_configs(self) -> list[dict]:
        rows = [(128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 2), (128, 128, 8, 3), (128, 32, 4, 4),
                (64, 64, 4, 4), (64, 32, 4, 3), (64, 128, 4, 2), (256, 64, 8, 2), (64, 64, 4, 3)]
        return [{"BLOCK_M": m, "BLOCK_N": n, "num_warps": w, "num_stages": s} for m, n, w, s in rows]

    def default_config(self) -> dict:
        return {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3}

    def suite_shapes(self) -> list[dict[str, int]]:
        # Llama-7B-like (32 heads of 128) training at 1k and prefill at 4k, a GPT-2-medium-like
        # 16 x 64 head layout at 512, 8 heads (GQA kv-side count) at 2k, and a ragged 3000 tokens
        return [{"batch": 4, "heads": 32, "seq": 1024, "head_dim": 128},
                {"batch": 1, "heads": 32, "seq": 4096, "head_dim": 128},
                {"batch": 8, "heads": 16, "seq": 512, "head_dim": 64},
                {"batch": 2, "heads": 8, "seq": 2048, "head_dim": 128},
                {"batch": 2, "heads": 16, "seq": 3000, "head_dim": 128}]

    # ------------------------------------------------------------------ problem
    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        b, h, s, hd = d["batch"], d["heads"], d["seq"], d["head_dim"]
        # two matmuls of 2*s*s*hd flops per (batch, head); causal computes about half of them
        flops = 4.0 * b * h * s * s * hd * (0.5 if self.causal else 1.0)
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"q": self.dtype, "k": self.dtype, "v": self.dtype, "o": self.dtype},
                       flops=flops, min_bytes=2.0 * 4 * b * h * s * hd, hardware=hardware,
                       source_hash=self.source_hash)

    # ------------------------------------------------------------------ running
    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        d, g, dt = problem.dims, self._generator(device, seed), torch_dtype(self.dtype)
        shape = (d["batch"], d["heads"], d["seq"], d["head_dim"])
        return tuple(torch.randn(shape, generator=g, device=device).to(dt) for _ in range(3))

    def tensor_shapes(self, problem: Problem) -> tuple[list[tuple[int, ...]], tuple[int, ...]]:
        d = problem.dims
        shape = (d["batch"], d["heads"], d["seq"], d["head_dim"])
        return [shape, shape, shape], shape

    def reference(self, inputs: tuple) -> torch.Tensor:
        import torch
        q, k, v = (t.double() for t in inputs)
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if self.causal:
            n = q.shape[-2]
            above = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
            s = s.masked_fill(above, float("-inf"))
        return (torch.softmax(s, dim=-1) @ v).float()

    def alloc_output(self, problem: Problem, inputs: tuple) -> torch.Tensor:
        import torch
        return torch.empty_like(inputs[0])

    def _qk_scale(self, head_dim: int) -> float:
        return LOG2E / math.sqrt(head_dim)

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        q, k, v = inputs
        b, h, s, hd = q.shape
        meta, opts = launch_options(config)
        grid = (cdiv(s, meta["BLOCK_M"]), b * h)
        fa2_forward_kernel[grid](q, k, v, out, s, self._qk_scale(hd), HEAD_DIM=hd, CAUSAL=self.causal,
                                 **meta, **opts)

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        import torch
        # SDPA has no out=; its result is dropped rather than copied into `out`, so the baseline
        # is not charged for a copy kernel
        q, k, v = inputs
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=self.causal)

    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        ptr = f"*{self.dtype}"
        hd = problem.dims["head_dim"]
        return {"q_ptr": ptr, "k_ptr": ptr, "v_ptr": ptr, "o_ptr": ptr, "seq_len": problem.dims["seq"],
                "qk_scale": self._qk_scale(hd), "HEAD_DIM": Constexpr(hd),
                "BLOCK_M": Constexpr(config["BLOCK_M"]), "BLOCK_N": Constexpr(config["BLOCK_N"]),
                "CAUSAL": Constexpr(self.causal)}


class CausalAttentionFwdBf16(AttentionFwdBf16):
    """Causal attention forward: key blocks above the diagonal are skipped, the diagonal masked."""

    causal = True
