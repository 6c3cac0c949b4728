"""Rotary position embedding (RoPE) of q and k, bf16, rotate-half (GPT-NeoX / Llama) convention.

After Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding" (2021), in the
rotate-half layout: a head vector x of head_dim D is split into halves x1 = x[:D/2] and
x2 = x[D/2:], and with c = cos(pos * theta_i), s = sin(pos * theta_i) for i < D/2,

    out[:D/2] = x1 * c - x2 * s,      out[D/2:] = x2 * c + x1 * s,

which is x * cat(c, c) + rotate_half(x) * cat(s, s). q holds `heads` query heads and k
`kv_heads` key heads per token (grouped-query attention); both are rotated by the same position.

Layout, serving style: q (tokens, heads, D) and k (tokens, kv_heads, D) bf16, a `positions`
int32 vector (one position per token: decode tokens sit at arbitrary positions, a packed
prefill batch restarts at 0 for each sequence), and cos/sin tables (CONTEXT, D/2) in fp32,
gathered by position. Out of place: q_out, k_out (so every timed launch does the same work).

Each program takes TOKENS_PER_PROGRAM consecutive tokens; for each it gathers one cos/sin row
and walks the token's q heads, then its k heads, BLOCK_HEADS heads at a time as a
(BLOCK_HEADS, D/2) tile per half, computing in fp32.

Classification: kernel_class "elementwise" with dims tokens, heads, kv_heads, head_dim. Without
a `numel` dim, classify.canonical_dims keeps these names, the fallback category is "all", and
the shape bucket rounds each of the four dims. infer_role gives BLOCK_HEADS the role
tile:HEADS, which classify.tile_dim_name maps to the `heads` dim (the generic rule: the dim
named like the role's axis); TOKENS_PER_PROGRAM has no role.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import triton
import triton.language as tl

from ...errors import AbductuneError
from ...hardware import HardwareInfo
from ...problem import Problem
from ...space import Choice, Pow2, Space
from ..base import Constexpr, KernelSpec, cdiv, launch_options, torch_dtype

if TYPE_CHECKING:
    import torch

# rows in the cos/sin tables (the model's context length) and the rotary base
CONTEXT = 4096
THETA = 10000.0
# the head dim the space's thread bound is written for (the suite's; Llama-style models)
HEAD_DIM_SUITE = 128


@triton.jit
def _rotate_token_heads(src, dst, n_heads, c, s, HEAD_DIM: tl.constexpr, BLOCK_HEADS: tl.constexpr):
    """Rotate the n_heads head vectors at src (one token) into dst, BLOCK_HEADS at a time."""
    lane = tl.arange(0, HEAD_DIM // 2)[None, :]
    for h0 in range(0, n_heads, BLOCK_HEADS):
        head = h0 + tl.arange(0, BLOCK_HEADS)[:, None]
        ok = head < n_heads
        first = head * HEAD_DIM + lane
        x1 = tl.load(src + first, mask=ok, other=0.0).to(tl.float32)
        x2 = tl.load(src + first + HEAD_DIM // 2, mask=ok, other=0.0).to(tl.float32)
        tl.store(dst + first, (x1 * c - x2 * s).to(dst.dtype.element_ty), mask=ok)
        tl.store(dst + first + HEAD_DIM // 2, (x2 * c + x1 * s).to(dst.dtype.element_ty), mask=ok)


# token counts are not specialised: a 1-token decode step and a prefill share one compile
@triton.jit(do_not_specialize=["n_tokens"])
def rope_rotate_half_kernel(q_ptr, k_ptr, pos_ptr, cos_ptr, sin_ptr, q_out_ptr, k_out_ptr,
                            n_tokens, n_heads, n_kv_heads,
                            HEAD_DIM: tl.constexpr, BLOCK_HEADS: tl.constexpr,
                            TOKENS_PER_PROGRAM: tl.constexpr):
    lane = tl.arange(0, HEAD_DIM // 2)[None, :]
    tok0 = tl.program_id(0) * TOKENS_PER_PROGRAM
    for i in range(TOKENS_PER_PROGRAM):
        tok = tok0 + i
        # the last program may run past the end: such a token reads a valid position and
        # rotates no heads at all
        live = tok < n_tokens
        q_heads = tl.where(live, n_heads, 0)
        k_heads = tl.where(live, n_kv_heads, 0)
        tok = tl.minimum(tok, n_tokens - 1).to(tl.int64)
        row = tl.load(pos_ptr + tok).to(tl.int64) * (HEAD_DIM // 2)
        c = tl.load(cos_ptr + row + lane)
        s = tl.load(sin_ptr + row + lane)
        q_off = tok * n_heads * HEAD_DIM
        k_off = tok * n_kv_heads * HEAD_DIM
        _rotate_token_heads(q_ptr + q_off, q_out_ptr + q_off, q_heads, c, s, HEAD_DIM, BLOCK_HEADS)
        _rotate_token_heads(k_ptr + k_off, k_out_ptr + k_off, k_heads, c, s, HEAD_DIM, BLOCK_HEADS)


class RopeBf16(KernelSpec):
    origin = "abductune zoo (ours), after RoFormer (Su et al. 2021), rotate-half (GPT-NeoX/Llama) layout"
    kernel_class = "elementwise"
    dims = ("tokens", "heads", "kv_heads", "head_dim")
    dtype = "bf16"
    no_specialize = ("n_tokens",)

    def __init__(self) -> None:
        self.name = "zoo_rope_bf16"

    @property
    def triton_fn(self) -> Any:
        return rope_rotate_half_kernel

    # ------------------------------------------------------------------ tuning surface
    def space(self) -> Space:
        return Space(
            [Pow2("BLOCK_HEADS", 1, 32, default=8), Pow2("TOKENS_PER_PROGRAM", 1, 16, default=1),
             Pow2("num_warps", 1, 8, default=4), Choice("num_stages", [1, 2], default=1)],
            # no idle threads: a head block (BLOCK_HEADS rows of D/2) has an element per thread
            constraints=["BLOCK_HEADS * HALF >= 32 * num_warps"],
            constants={"HALF": HEAD_DIM_SUITE // 2},
            name=self.name,
        )

    def fixed_configs(self) -> list[dict]:
        rows = [(1, 1, 1), (2, 1, 2), (4, 1, 4), (8, 1, 4), (8, 2, 4), (8, 4, 8), (16, 1, 8), (32, 1, 8),
                (4, 4, 2), (8, 8, 4)]
        return [{"BLOCK_HEADS": h, "TOKENS_PER_PROGRAM": t, "num_warps": w, "num_stages": 1} for h, t, w in rows]

    def default_config(self) -> dict:
        return {"BLOCK_HEADS": 8, "TOKENS_PER_PROGRAM": 1, "num_warps": 4, "num_stages": 1}

    def suite_shapes(self) -> list[dict[str, int]]:
        # Llama-3-8B heads (32 q / 8 kv of 128): one decode token, a decode batch of 64, a ragged
        # 3000-token prefill, 4k and 16k packed prefill; Llama-3-70B heads (64 / 8) at 4k
        llama8 = {"heads": 32, "kv_heads": 8, "head_dim": 128}
        return [{"tokens": 1, **llama8}, {"tokens": 64, **llama8}, {"tokens": 3000, **llama8},
                {"tokens": 4096, **llama8}, {"tokens": 16384, **llama8},
                {"tokens": 4096, "heads": 64, "kv_heads": 8, "head_dim": 128}]

    # ------------------------------------------------------------------ problem
    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        t, h, kvh, hd = d["tokens"], d["heads"], d["kv_heads"], d["head_dim"]
        if hd % 2 or hd & (hd - 1):
            raise AbductuneError(f"{self.name}: head_dim must be an even power of two, got {hd}")
        elems = t * (h + kvh) * hd
        # per element: two multiplies and an add/subtract
        # bytes: q and k read and written (bf16), one position (int32) and one cos and sin row
        # (fp32) per token, at most CONTEXT distinct rows
        rows = min(t, CONTEXT)
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"q": self.dtype, "k": self.dtype, "positions": "int32", "cos": "fp32",
                               "sin": "fp32", "q_out": self.dtype, "k_out": self.dtype},
                       flops=3.0 * elems, min_bytes=2.0 * 2 * elems + 4.0 * t + 2 * 4.0 * rows * (hd // 2),
                       hardware=hardware, source_hash=self.source_hash)

    # ------------------------------------------------------------------ running
    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        d, g, dt = problem.dims, self._generator(device, seed), torch_dtype(self.dtype)
        t, hd = d["tokens"], d["head_dim"]
        q = torch.randn(t, d["heads"], hd, generator=g, device=device).to(dt)
        k = torch.randn(t, d["kv_heads"], hd, generator=g, device=device).to(dt)
        if t <= 64:  # decode: each token of the batch sits somewhere in its own context
            positions = torch.randint(0, CONTEXT, (t,), generator=g, device=device, dtype=torch.int32)
        else:  # packed prefill: sequences of CONTEXT tokens (the last one cut short)
            positions = torch.arange(t, device=device, dtype=torch.int32) % CONTEXT
        inv_freq = THETA ** (-torch.arange(0, hd // 2, device=device, dtype=torch.float64) / (hd // 2))
        angle = torch.arange(CONTEXT, device=device, dtype=torch.float64)[:, None] * inv_freq[None, :]
        return q, k, positions, torch.cos(angle).float(), torch.sin(angle).float()

    def reference(self, inputs: tuple) -> tuple:
        q, k, positions, cos, sin = inputs
        c = cos.double()[positions.long()][:, None, :]
        s = sin.double()[positions.long()][:, None, :]

        def rotate(x):
            import torch
            x = x.double()
            x1, x2 = x.chunk(2, dim=-1)
            return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).float()

        import torch
        return torch.cat([rotate(q).flatten(), rotate(k).flatten()])

    def alloc_output(self, problem: Problem, inputs: tuple) -> Any:
        # one buffer holding the rotated q then the rotated k (the benchmark worker poisons and
        # checks one output tensor); `_split` gives the two contiguous views the kernel writes
        import torch
        q, k = inputs[0], inputs[1]
        return torch.empty(q.numel() + k.numel(), dtype=q.dtype, device=q.device)

    @staticmethod
    def _split(out: Any, q: Any, k: Any) -> tuple:
        return out[:q.numel()].view(q.shape), out[q.numel():].view(k.shape)

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        q, k, positions, cos, sin = inputs
        q_out, k_out = self._split(out, q, k)
        t, h, hd = q.shape
        meta, opts = launch_options(config)
        grid = (cdiv(t, meta["TOKENS_PER_PROGRAM"]),)
        rope_rotate_half_kernel[grid](q, k, positions, cos, sin, q_out, k_out, t, h, k.shape[1],
                                      HEAD_DIM=hd, **meta, **opts)

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        import torch
        # the Hugging Face Llama formula: x * cos + rotate_half(x) * sin, tables gathered by
        # position and cast to the activations' dtype
        q, k, positions, cos, sin = inputs
        idx = positions.long()
        c = torch.cat([cos[idx], cos[idx]], dim=-1).to(q.dtype)[:, None, :]
        s = torch.cat([sin[idx], sin[idx]], dim=-1).to(q.dtype)[:, None, :]
        for x, y in zip((q, k), self._split(out, q, k)):
            x1, x2 = x.chunk(2, dim=-1)
            torch.add(x * c, torch.cat([-x2, x1], dim=-1) * s, out=y)

    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        d = problem.dims
        ptr = f"*{self.dtype}"
        return {"q_ptr": ptr, "k_ptr": ptr, "pos_ptr": "*i32", "cos_ptr": "*fp32", "sin_ptr": "*fp32",
                "q_out_ptr": ptr, "k_out_ptr": ptr, "n_tokens": d["tokens"], "n_heads": d["heads"],
                "n_kv_heads": d["kv_heads"], "HEAD_DIM": Constexpr(d["head_dim"]),
                "BLOCK_HEADS": Constexpr(config["BLOCK_HEADS"]),
                "TOKENS_PER_PROGRAM": Constexpr(config["TOKENS_PER_PROGRAM"])}
