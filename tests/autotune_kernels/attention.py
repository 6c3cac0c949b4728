"""A small attention forward (flash-attention style: online softmax over K/V blocks)."""
import triton
import triton.language as tl

import abductune

CONFIGS = [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=4, num_stages=s)
           for m, n, s in ((16, 16, 2), (32, 16, 2), (16, 32, 3))]


@triton.jit
def attn_fwd(Q, K, V, Out, sm_scale, stride_h, stride_s, N_CTX, HEAD_DIM: tl.constexpr,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    off_h = tl.program_id(1)
    base = off_h * stride_h
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * stride_s + offs_d[None, :], mask=offs_m[:, None] < N_CTX, other=0.0)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for start_n in range(0, N_CTX, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + base + cols[None, :] * stride_s + offs_d[:, None], mask=cols[None, :] < N_CTX, other=0.0)
        qk = tl.dot(q, k) * sm_scale
        qk = tl.where(cols[None, :] < N_CTX, qk, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp(qk - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + cols[:, None] * stride_s + offs_d[None, :], mask=cols[:, None] < N_CTX, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(Out + base + offs_m[:, None] * stride_s + offs_d[None, :], acc.to(Out.dtype.element_ty),
             mask=offs_m[:, None] < N_CTX)


def make(**options):
    return abductune.autotune(configs=CONFIGS, key=["N_CTX", "HEAD_DIM"], **options)(attn_fwd)


def attention(kernel, q, k, v, out=None):
    """q, k, v: (heads, seq, head_dim), contiguous."""
    H, S, D = q.shape
    out = q.new_empty(q.shape) if out is None else out
    grid = lambda meta: (triton.cdiv(S, meta["BLOCK_M"]), H)  # noqa: E731
    kernel[grid](q, k, v, out, D ** -0.5, q.stride(0), q.stride(1), S, D)
    return out
