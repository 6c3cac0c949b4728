"""Complete the headers of library kernels recorded through `abductune sweep --call` before
record mode filled in FLOPs and bytes (session 14's Liger recordings): the facts of the call
that the autotuner's key does not carry (DyT's 4,096 rows; int8 x int2's packed weights; the
fused MoE's tokens, experts and top-k) and
the FLOPs and minimum bytes they give. The records themselves are left as recorded.

    python benchmarks/library_headers.py RAW_DIR OUT_DIR [--as DIR=KEY] ...

RAW_DIR holds <kernel>/<shape>.jsonl.gz as `sweep --call --out` wrote them; OUT_DIR gets the
same under the names below (kernels not listed are skipped, and said so).
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))

from abductune.classify import next_pow2  # noqa: E402
from abductune.datasets.format import read_dataset, write_dataset  # noqa: E402
from abductune.measurement import Measurement  # noqa: E402
from library_shapes import DYT_ROWS as ROWS  # noqa: E402
from library_shapes import FLAGGEMS_BMM_BMNK, FLAGGEMS_RMS_ROWS, GLA_CHUNK, GLA_SHAPES  # noqa: E402
from library_shapes import FLAGGEMS_ATTN, FLAGGEMS_AVGPOOL, FLAGGEMS_KRON, FLAGGEMS_MAXPOOL  # noqa: E402
from library_shapes import GDN_CHUNK, GDN_SHAPES  # noqa: E402
from library_shapes import FLAGGEMS_BATCH_NORM, FLAGGEMS_BICUBIC  # noqa: E402
from library_shapes import FLAGGEMS_INSTANCE_NORM, FLAGGEMS_WEIGHT_NORM  # noqa: E402
from library_shapes import FLAGGEMS_BICUBIC_AA, FLAGGEMS_CONV3D, FLAGGEMS_CROSS_ENTROPY  # noqa: E402
from library_shapes import FLAGGEMS_SCALED_MM_BLOCKWISE_FP8, FLAGGEMS_SCALED_MM_FP8  # noqa: E402
from library_shapes import FLA_LAYERNORM_TD  # noqa: E402
from library_shapes import MOE_LAYERS as _MOE_CALLS  # noqa: E402


def _dyt(p):
    n = p.dims["N"]
    # y = gamma * tanh(alpha * x) + beta: x read and y written once (bf16), gamma and beta per column
    return "liger_dyt_fwd_bf16", replace(p, kernel_class="elementwise", dims={"rows": ROWS, "N": n},
                                         flops=4.0 * ROWS * n, min_bytes=ROWS * n * 4.0 + 2 * n * 2.0)


def _int8int2(p):
    m, n, k = p.dims["M"], p.dims["N"], p.dims["K"]
    # A int8 (M x K), B packed four 2-bit weights to a byte (K/4 x N), C int32 (M x N)
    return "liger_mm_int8int2", replace(p, kernel_class="quantized_matmul", flops=2.0 * m * n * k,
                                        min_bytes=m * k + k * n / 4 + 4.0 * m * n)


# liger_moe's layers keyed by (hidden, intermediate) as the autotuner's key is: (tokens, experts, top-k)
MOE_LAYERS = {(h, i): (t, e, k) for t, e, h, i, k in _MOE_CALLS}


def _moe(p, up: bool):
    h, i = p.dims["H_dim"], p.dims["I_dim"]
    t, e, topk = MOE_LAYERS[(h, i)]
    m = t * topk  # the GEMM's rows: every (token, expert) pair routed, grouped by expert
    if up:  # gathered x (M x H) @ W1[e]^T (2I x H) -> pre-activation (M x 2I) and SwiGLU (M x I)
        n, k = 2 * i, h
        min_bytes = 2.0 * (t * h + e * n * k + m * n + m * i)
        name = "liger_moe_up_swiglu_bf16"
    else:  # activations (M x I) @ W2[e]^T (H x I) -> Y (M x H), weighted and summed later
        n, k = h, i
        min_bytes = 2.0 * (m * i + e * n * k + m * h)
        name = "liger_moe_down_bf16"
    return name, replace(p, kernel_class="matmul", dims={"M": m, "N": n, "K": k, "E": e},
                         flops=2.0 * m * n * k, min_bytes=min_bytes)


# fla_chunk_gla's shapes keyed by (key dim, value dim) as both autotuners' keys carry them: (batch, tokens, heads)
GLA = {(dk, dv): (b, t, h) for b, t, h, dk, dv in GLA_SHAPES}
CHUNK = GLA_CHUNK


def _gla(p, state: bool):
    dk, dv = p.dims["K"], p.dims["V"]
    b, t, h = GLA[(dk, dv)]
    rows, chunks = b * t * h, b * h * (t // CHUNK)
    if state:  # per chunk h += k^T v (gated): k, v bf16 and the gate cumsum fp32 in; one bf16 state per chunk out
        flops = 2.0 * rows * dk * dv
        min_bytes = rows * (2.0 * dk + 2.0 * dv + 4.0 * dk) + 2.0 * chunks * dk * dv
        name = "fla_chunk_h_bf16"
    else:  # o = (q * exp(g)) h + A v: q bf16, g fp32, A fp32 (chunk x chunk), v and the states in; o out
        flops = 2.0 * rows * dk * dv + 2.0 * rows * CHUNK * dv
        min_bytes = rows * (2.0 * dk + 4.0 * dk + 4.0 * CHUNK + 2.0 * dv + 2.0 * dv) + 2.0 * chunks * dk * dv
        name = "fla_chunk_gla_o_bf16"
    return name, replace(p, dims={"batch": b, "tokens": t, "heads": h, "K": dk, "V": dv}, flops=flops,
                         min_bytes=min_bytes)


def _gla_bwd(p, part: str):
    """chunk_gla's backward kernels, the same (batch, tokens, heads) lookup as the forward's;
    FLOPs and bytes are what each kernel's matmuls and tensors come to, not measured."""
    dk, dv = p.dims["K"], p.dims["V"]
    b, t, h = GLA[(dk, dv)]
    rows, chunks = b * t * h, b * h * (t // CHUNK)
    states = 2.0 * chunks * dk * dv  # one bf16 K x V state (or its gradient) per chunk
    if part == "dh":  # per chunk, backwards in time: dh += (q * exp(g))^T do; q, do bf16 and g fp32 in
        flops = 2.0 * rows * dk * dv
        min_bytes = rows * (2.0 * dk + 2.0 * dv + 4.0 * dk) + states
        name = "fla_chunk_dh_bwd_bf16"
    elif part == "dv":  # dv = A^T do + (k * exp(g)) dh: k bf16, g fp32, A fp32 (chunk x chunk), do in; dv out
        flops = 2.0 * rows * CHUNK * dv + 2.0 * rows * dk * dv
        min_bytes = rows * (2.0 * dk + 4.0 * dk + 4.0 * CHUNK + 2.0 * dv + 2.0 * dv) + states
        name = "fla_chunk_gla_dv_bwd_bf16"
    else:  # dq = do h^T, dk = v dh^T (gated), dg from both: q, k, v, do bf16, g fp32, h and dh in; dq, dk, dg out
        flops = 4.0 * rows * dk * dv
        min_bytes = rows * (2.0 * 2 * dk + 4.0 * dk + 2.0 * 2 * dv + 2.0 * 2 * dk + 4.0 * dk) + 2 * states
        name = "fla_chunk_gla_inter_bwd_bf16"
    return name, replace(p, kernel_class="other", dims={"batch": b, "tokens": t, "heads": h, "K": dk, "V": dv},
                         flops=flops, min_bytes=min_bytes)


# fla_gated_delta's shapes keyed by (q/k heads, value heads, key dim) as every key carries them
# (the WY-solve's key has no V): (batch, tokens, value dim)
GDN = {(h, hv, dk): (b, t, dv) for b, t, h, hv, dk, dv in GDN_SHAPES}


def _gdn(p, part: str):
    """The gated delta rule's four forward kernels. dims: heads are the value heads (HV), the
    heads every grid runs over; qk_heads the q/k heads they share (grouped value attention).
    FLOPs count the tensor-core products each kernel must compute, dense over a chunk as the
    kernels compute them (the causal mask is applied after, so half of a chunk's scores are
    thrown away); min_bytes every input read once and every output written once, k (and q) once
    per q/k head however many value heads read it; the gate cumsum is fp32, the rest bf16."""
    h, hv, dk = p.dims["H"], p.dims["HV"], p.dims["K"]
    b, t, dv = GDN[(h, hv, dk)]
    bt = GDN_CHUNK
    rows, qk_rows, chunks = b * t * hv, b * t * h, b * hv * (t // bt)
    dims = {"batch": b, "tokens": t, "heads": hv, "qk_heads": h, "K": dk, "V": dv}
    if part == "kkt":  # A = (I + tril(beta k k^T, gated))^-1 per chunk: the 10 lower 16 x 16 blocks of k k^T
        bc = 16        # (2 * 10 * BC^2 * K a chunk) and a 64 x 64 unit-lower-triangular inverse (BT^3 / 3)
        flops = chunks * (2.0 * 10 * bc * bc * dk + bt ** 3 / 3.0)
        min_bytes = 2.0 * qk_rows * dk + rows * (4.0 + 2.0) + 2.0 * rows * bt  # k; g, beta; A out (bf16)
        name, dims = "fla_gdn_kkt_solve_bf16", {k: v for k, v in dims.items() if k != "V"}
    elif part == "wy":  # w = A (k * beta * exp(g)), u = A (v * beta): (BT x BT) @ (BT x K) and @ (BT x V)
        flops = 2.0 * rows * bt * (dk + dv)
        min_bytes = (2.0 * qk_rows * dk + 2.0 * rows * dv + rows * (2.0 + 4.0) + 2.0 * rows * bt
                     + 2.0 * rows * (dk + dv))  # k, v; beta, g; A; w and u out
        name = "fla_gdn_wy_bf16"
    elif part == "h":  # per chunk v_new = u - w h, then h = h * exp(g_last) + k^T v_new: two K x V products a row
        flops = 4.0 * rows * dk * dv
        min_bytes = (2.0 * qk_rows * dk + 2.0 * rows * (dk + dv) + 4.0 * rows  # k; w, u; g
                     + 2.0 * rows * dv + 2.0 * chunks * dk * dv)  # v_new out; one state per chunk out
        name = "fla_gdn_h_bf16"
    else:  # o = (q h) * exp(g) + (tril(q k^T) gated) v_new: q h, q k^T over the chunk, A v_new
        flops = 2.0 * rows * dk * dv + 2.0 * rows * bt * dk + 2.0 * rows * bt * dv
        min_bytes = (2.0 * 2.0 * qk_rows * dk + 2.0 * rows * dv + 2.0 * chunks * dk * dv  # q, k; v_new; states
                     + 4.0 * rows + 2.0 * rows * dv)  # g; o out
        name = "fla_gdn_o_bf16"
    return name, replace(p, dims=dims, flops=flops, min_bytes=min_bytes)


def _fg_rms(p):
    rows, cols = FLAGGEMS_RMS_ROWS, p.dims["N"]
    # x read and y written (bf16), the weight once, 1/rms per row (fp32)
    return "flaggems_rmsnorm_loop_bf16", replace(p, kernel_class="row_reduction", dims={"rows": rows, "cols": cols},
                                                 flops=4.0 * rows * cols, min_bytes=4.0 * rows * cols + 2.0 * cols + 4.0 * rows)


def _fg_ln(p):
    rows, cols = p.dims["M"], p.dims["N"]
    # x read and y written (bf16), weight and bias once, mean and rstd per row (bf16 here)
    return "flaggems_layernorm_loop_bf16", replace(p, kernel_class="row_reduction", dims={"rows": rows, "cols": cols},
                                                   flops=8.0 * rows * cols,
                                                   min_bytes=4.0 * rows * cols + 4.0 * cols + 4.0 * rows)


def _fg_lsm_bwd(p):
    rows, cols = p.dims["M"], p.dims["N"]
    # dx = dy - exp(out) * sum(dy): out and dy read, dx written (bf16)
    return "flaggems_log_softmax_bwd_bf16", replace(p, kernel_class="row_reduction", dims={"rows": rows, "cols": cols},
                                                    flops=4.0 * rows * cols, min_bytes=6.0 * rows * cols)


def _fg_var_mean(p):
    rows, cols = p.dims["M"], p.dims["N"]
    # Welford over each row: x read once (bf16), a variance and a mean per row written (bf16)
    return "flaggems_var_mean_bf16", replace(p, kernel_class="row_reduction", dims={"rows": rows, "cols": cols},
                                             flops=4.0 * rows * cols, min_bytes=2.0 * rows * cols + 4.0 * rows)


def _fg_smx_bwd(p):
    rows, cols = p.dims["M"], p.dims["N"]
    # dx = y * (dy - sum(y * dy)): y and dy read, dx written (bf16)
    return "flaggems_softmax_bwd_bf16", replace(p, kernel_class="row_reduction", dims={"rows": rows, "cols": cols},
                                                flops=4.0 * rows * cols, min_bytes=6.0 * rows * cols)


def _fg_addmv(p):
    # the kernel names the rows of A "N" and the reduced length "M": out = beta * inp + alpha * A @ x;
    # A read once (bf16), x once, inp read and out written per row (bf16)
    rows, cols = p.dims["N"], p.dims["M"]
    return "flaggems_addmv_bf16", replace(p, kernel_class="row_reduction", dims={"rows": rows, "cols": cols},
                                          flops=2.0 * rows * cols, min_bytes=2.0 * rows * cols + 2.0 * cols + 4.0 * rows)


def _fg_norm(p):
    # one norm per row: each row read once (bf16), one bf16 value written per row
    rows, cols = p.dims["M"], p.dims["N"]
    return "flaggems_vector_norm_bf16", replace(p, kernel_class="row_reduction", dims={"rows": rows, "cols": cols},
                                                flops=2.0 * rows * cols, min_bytes=2.0 * rows * cols + 2.0 * rows)


BMM = {(m, n, k): b for b, m, n, k in FLAGGEMS_BMM_BMNK}


def _fg_bmm(p):
    # the key carries M, N, K (and two strides), not the batch: it comes from the call's shapes
    m, n, k = p.dims["M"], p.dims["N"], p.dims["K"]
    b = BMM[(m, n, k)]
    return "flaggems_bmm_bf16", replace(p, kernel_class="matmul", dims={"batch": b, "M": m, "N": n, "K": k},
                                        flops=2.0 * b * m * n * k, min_bytes=2.0 * b * (m * k + k * n + m * n))


def _fla_mm(p):
    # the key is (M, N, K) and record mode filled the rest (2MNK FLOPs, each operand once): kept
    assert p.kernel_class == "matmul" and set(p.dims) == {"M", "N", "K"}, p
    return "fla_matmul_bf16", p


def _fla_ln(p):
    # the key carries D (and NB, the row blocks of 2,048 rows); the rows are the call's
    # (library_shapes.FLA_LAYERNORM_TD). Dims named for the kernel's own tiles (BT over the rows,
    # BD over D), as a live call under patch_triton would name them; x read and y written (bf16),
    # weight and bias once (bf16), mean and rstd per row (fp32)
    d = p.dims["D"]
    t = dict((dd, tt) for tt, dd in FLA_LAYERNORM_TD)[d]
    assert not any(p.dims.get(k) for k in ("HAS_RESIDUAL", "STORE_RESIDUAL_OUT", "IS_RMS_NORM")), p
    return "fla_layernorm_bf16", replace(p, dims={"T": t, "D": d}, flops=8.0 * t * d,
                                         min_bytes=4.0 * t * d + 4.0 * d + 8.0 * t)


def _fg_upsample(p):
    # a gather-copy: every output element written once (bf16), every input element read once
    # (a quarter as many at 2x); no arithmetic, counted as one operation per output element
    # (the zoo's headers carry positive FLOPs; a copy is memory-bound either way)
    out = p.dims["N"] * p.dims["C"] * p.dims["OH"] * p.dims["OW"]
    return "flaggems_upsample_nearest2d_bf16", replace(p, kernel_class="elementwise", dims={"numel": out},
                                                       flops=float(out), min_bytes=2.0 * out * 1.25)


def _fg_conv(p):
    # an implicit GEMM: output pixels (batch x out height x out width) by output channels, reduced
    # over input channels x kernel taps; the kernel names its tiles for the conv's own dims, so the
    # dataset's roles are restated as the product's (CONV_ROLES); each input read once, the
    # weights once, the output written once (bf16)
    d = p.dims
    m = d["in_n"] * d["out_height"] * d["out_width"]
    n, k = d["out_c"], d["weight_c"] * d["weight_height"] * d["weight_width"]
    inp = d["in_n"] * d["weight_c"] * d["input_height"] * d["input_width"]
    return "flaggems_conv2d_bf16", replace(p, kernel_class="matmul", dims={"M": m, "N": n, "K": k},
                                           flops=2.0 * m * n * k, min_bytes=2.0 * (inp + n * k + m * n))


# flaggems_attn's shapes keyed by (KV_CTX, HEAD_DIM) as the key is: (batch, heads, sequence)
ATTN = {(sq, d): (b, h, sq) for b, h, sq, d in FLAGGEMS_ATTN}


def _fg_attn(p):
    # non-causal attention (the op's default; the key does not say, so the header does): Q K^T and
    # P V, 2 FLOPs a multiply-add each over every (query, key) pair; q, k, v read and o written once
    # (bf16), and the fp32 log-sum-exp per query row (M) written
    kv, d = p.dims["KV_CTX"], p.dims["HEAD_DIM"]
    b, h, sq = ATTN[(kv, d)]
    return "flaggems_attn_fwd_bf16", replace(p, kernel_class="attention",
                                             dims={"batch": b, "heads": h, "seq": sq, "head_dim": d},
                                             flops=4.0 * b * h * sq * kv * d,
                                             min_bytes=2.0 * b * h * d * (2 * sq + 2 * kv) + 4.0 * b * h * sq)


def _pool_out(size: int, k: int, s: int, pad: int) -> int:
    return (size + 2 * pad - k) // s + 1


def _pool_shapes(shapes) -> dict:
    """A pooling call's shapes keyed as its autotuner's key is (out_h, out_w, kernel_h, kernel_w,
    stride_h, stride_w): (batch, channels, input height = width, padding)."""
    return {(_pool_out(hw, k, s, pad), _pool_out(hw, k, s, pad), k, k, s, s): (n, c, hw, pad)
            for n, c, hw, k, s, pad in shapes}


POOL, MAXPOOL = _pool_shapes(FLAGGEMS_AVGPOOL), _pool_shapes(FLAGGEMS_MAXPOOL)


def _pooled(p, shapes: dict, name: str, index_bytes: float = 0.0):
    # a k x k window per output: k*k operations; each input read once and each output written
    # once (bf16), however many windows share an input, with `index_bytes` more per output where
    # the op writes the window's argmax beside it. abductune files pools under `other` (its own
    # inference: a 2-D windowed reduction, no class fits); batch and channels (the grid's first
    # axis) come from the call, the padding is stated in meta.call
    d = p.dims
    n, c, hw, pad = shapes[tuple(d[k] for k in ("out_h", "out_w", "kernel_h", "kernel_w", "stride_h", "stride_w"))]
    k, s, out = d["kernel_h"], d["stride_h"], n * c * d["out_h"] * d["out_w"]
    return name, replace(p, kernel_class="other", dims={
        "batch": n, "channels": c, "in_h": hw, "in_w": hw, "out_h": d["out_h"], "out_w": d["out_w"],
        "kernel": k, "stride": s}, flops=float(out * k * k),
        min_bytes=2.0 * (n * c * hw * hw + out) + index_bytes * out)


def _fg_pool(p):  # the average (the divide not counted)
    return _pooled(p, POOL, "flaggems_avg_pool2d_bf16")


def _fg_maxpool(p):  # the maximum and its int64 flat index
    return _pooled(p, MAXPOOL, "flaggems_max_pool2d_bf16", index_bytes=8.0)


# flaggems_kron's pairs keyed as its key is (M, N) of the output: (M1, N1, M2, N2)
KRON = {(m1 * m2, n1 * n2): (m1, n1, m2, n2) for m1, n1, m2, n2 in FLAGGEMS_KRON}


def _fg_kron(p):
    # one multiply per output element; A and B read (small, cached), the output written once (bf16).
    # An elementwise gather-multiply over a 2-D tile of the output
    m, n = p.dims["M"], p.dims["N"]
    m1, n1, m2, n2 = KRON[(m, n)]
    return "flaggems_kron_bf16", replace(p, kernel_class="elementwise", dims={"M": m, "N": n},
                                         flops=float(m * n), min_bytes=2.0 * (m * n + m1 * n1 + m2 * n2))


# flaggems_batch_norm's shapes keyed as its key is (batch_dim, spatial_dim): (batch, channels, height, width)
BATCH_NORM = {(n, h * w): (n, c, h, w) for n, c, h, w in FLAGGEMS_BATCH_NORM}


def _fg_batch_norm(p):
    # training mode: each channel (a program) reduces its batch x spatial elements to a mean and a
    # variance (a Welford pass), then writes them normalised, scaled and shifted: a row reduction
    # with a row per channel (the class abductune infers from the name), the row being batch x
    # spatial elements in runs of `spatial` contiguous ones. About 10 operations an element (the
    # Welford update, then subtract, two multiplies and an add); x read once and y written once
    # (bf16) at the least (the kernel reads x twice), weight and bias read and the batch mean and
    # 1/std written (bf16), the fp32 running mean and variance read and written
    n, hw = p.dims["batch_dim"], p.dims["spatial_dim"]
    _, c, h, w = BATCH_NORM[(n, hw)]
    elems = n * c * hw
    return "flaggems_batch_norm_bf16", replace(p, kernel_class="row_reduction", dims={
        "rows": c, "cols": n * hw, "batch": n, "height": h, "width": w},
        flops=10.0 * elems, min_bytes=4.0 * elems + 2.0 * 4 * c + 4.0 * 4 * c)


# flaggems_bicubic's shapes keyed as its key is (W_out, the output width): (batch, channels, in height, in width)
BICUBIC = {2 * w: (n, c, h, w) for n, c, h, w in FLAGGEMS_BICUBIC}


def _fg_bicubic(p):
    # a gather of 4 x 4 input taps per output pixel, each weighted (Keys' cubic), in fp32: 16
    # multiply-adds an output element (the per-row and per-column weights not counted); every
    # output written once and every input read once (bf16). An elementwise map over the output
    # (as the nearest upsampling), its dims the output's with the row width W that BLOCK_W tiles
    wo = p.dims["W_out"]
    n, c, h, w = BICUBIC[wo]
    out = n * c * 2 * h * wo
    return "flaggems_upsample_bicubic2d_bf16", replace(p, kernel_class="elementwise", dims={
        "numel": out, "batch": n, "channels": c, "H": 2 * h, "W": wo},
        flops=32.0 * out, min_bytes=2.0 * (out + n * c * h * w))


def _fg_triu(p):
    # a masked copy: every output element written (bf16), those on or above the diagonal read
    # (at the least: the kernel reads them all); one compare-and-select an element. As kron, an
    # elementwise map over a 2-D output, its dims the matrix's M and N
    m, n = p.dims["M"], p.dims["N"]
    kept = sum(max(0, n - i) for i in range(m))  # elements with column >= row (diagonal 0)
    return "flaggems_triu_bf16", replace(p, kernel_class="elementwise", dims={"M": m, "N": n},
                                         flops=float(m * n), min_bytes=2.0 * (m * n + kept))


def _fg_amax(p):
    # one maximum an element; x read once (bf16), one maximum a row written (bf16)
    m, n = p.dims["M"], p.dims["N"]
    return "flaggems_amax_bf16", replace(p, kernel_class="row_reduction", dims={"rows": m, "cols": n},
                                         flops=float(m * n), min_bytes=2.0 * m * n + 2.0 * m)


# flaggems_weight_norm's weights keyed as its key is (v_shape0, v_shape1, v_shape2): the weight's shape
WEIGHT_NORM = {(v[0], v[1], math.prod(v[2:])): v for v in FLAGGEMS_WEIGHT_NORM}


def _fg_weight_norm(p):
    # the norm over every dim but 1: a row per output channel (v_shape1, BLOCK_ROW_SIZE of them a
    # program) of in_channels x taps elements (the column loop), each row a run of `taps`
    # contiguous elements every out x taps. A square and an add an element, then a multiply and a
    # divide writing it; v read once and the output written once (bf16) at the least (the kernel
    # reads v twice), g read (bf16) and the norm written (fp32) per row
    v0, v1, v2 = p.dims["v_shape0"], p.dims["v_shape1"], p.dims["v_shape2"]
    elems = v0 * v1 * v2
    return "flaggems_weight_norm_bf16", replace(p, kernel_class="row_reduction", dims={
        "rows": v1, "cols": v0 * v2, "in_channels": v0, "taps": v2},
        flops=4.0 * elems, min_bytes=4.0 * elems + 2.0 * v1 + 4.0 * v1)


def _fg_reglu(p):
    # relu(a) * b: a maximum and a multiply an output element; the input's two halves read and
    # the output written once (bf16). An elementwise map over a 2-D output tiled BLOCK_M x BLOCK_N,
    # its dims the output's M and N (as kron's) beside numel
    m, n = p.dims["M"], p.dims["N_OUT"]
    return "flaggems_reglu_bf16", replace(p, kernel_class="elementwise", dims={"numel": m * n, "M": m, "N": n},
                                          flops=2.0 * m * n, min_bytes=6.0 * m * n)


def _fg_smx_non_inner(p):
    # dx = y * (dy - sum(y * dy)) over dim 1 of an M x N x K tensor: each of the M outer indices
    # (rows, grid axis 0) reduces N (the cols, strided by K) for each of its K columns, TILE_K of
    # them a program (grid axis 1); y and dy read, dx written once (bf16)
    m, n, k = p.dims["M"], p.dims["N"], p.dims["K"]
    return "flaggems_softmax_bwd_non_inner_bf16", replace(p, kernel_class="row_reduction", dims={
        "rows": m, "cols": n, "K": k}, flops=4.0 * m * n * k, min_bytes=6.0 * m * n * k)


# flaggems_instance_norm's inputs keyed as its key is (M, N) = (batch x channels, spatial elements)
INSTANCE_NORM = {(x[0] * x[1], math.prod(x[2:])): x for x in FLAGGEMS_INSTANCE_NORM}


def _fg_instance_norm(p):
    # one program a (sample, channel) row of N spatial elements: a Welford pass, then a
    # normalising pass, about 10 operations an element as batch norm's; x read once and y
    # written once (bf16) at the least (the kernel reads x twice), weight and bias read (bf16)
    # and the mean and 1/std written (fp32) per row. The samples are named apart from the rows
    # they multiply (not `batch`, which would count as programs of their own)
    m, n = p.dims["M"], p.dims["N"]
    shape = INSTANCE_NORM[(m, n)]
    return "flaggems_instance_norm_bf16", replace(p, kernel_class="row_reduction", dims={
        "rows": m, "cols": n, "samples": shape[0], "channels": shape[1]},
        flops=10.0 * m * n, min_bytes=4.0 * m * n + 2.0 * 2 * shape[1] + 4.0 * 2 * m)


# flaggems_cross_entropy's logits keyed as its key is (C, D): the classes and the elements after them
CROSS_ENTROPY = {(s[1], math.prod(s[2:])): s for s in FLAGGEMS_CROSS_ENTROPY}


def _fg_cross_entropy(p):
    # one program a row (a token, or an image: grid axis 1) and BLOCK_D of the D elements after
    # the class dim (grid axis 0; D = 1 for an LLM's tokens): an online maximum and sum of
    # exponentials over the C classes (the cols) in BLOCK_C steps, then the target's logit
    # gathered; about 5 operations a logit (a maximum, two exponentials, a multiply and an add).
    # The logits read once (bf16); per (row, D) element an int64 target read and an fp32 loss and
    # an fp32 target weight written. A row reduction as the softmax over a middle dim: rows the
    # outer index, cols the classes, D the trailing elements BLOCK_D tiles (the name its tile reads)
    c, d = p.dims["C"], p.dims["D"]
    rows = CROSS_ENTROPY[(c, d)][0]
    return "flaggems_cross_entropy_bf16", replace(p, kernel_class="row_reduction", dims={
        "rows": rows, "cols": c, "D": d}, flops=5.0 * rows * c * d, min_bytes=2.0 * rows * c * d + 16.0 * rows * d)


def _conv3d_mnk(n: int, c: int, d: int, h: int, w: int, k: int, r, s, pad) -> tuple[int, int, int]:
    """A conv3d's implicit GEMM: (output voxels, output channels, input channels x kernel taps)."""
    out = [(size + 2 * q - kk) // st + 1 for size, kk, st, q in zip((d, h, w), r, s, pad)]
    return n * math.prod(out), k, c * math.prod(r)


# flaggems_conv3d's shapes keyed by their GEMM's (M, N, K), the header's dims: the call as made
CONV3D = {_conv3d_mnk(*x): x for x in FLAGGEMS_CONV3D}


def _fg_conv3d(p):
    # an implicit GEMM, as conv2d's: output voxels (batch x out depth x height x width) by output
    # channels, reduced over input channels x kernel taps; the kernel names its tiles for the
    # conv's own dims, so the dataset's roles are restated as the product's (CONV3D_ROLES). Each
    # input read once, the weights and the bias once, the output written once (bf16)
    d = p.dims
    m = d["in_n"] * d["out_depth"] * d["out_height"] * d["out_width"]
    n, k = d["out_c"], d["weight_c"] * d["weight_depth"] * d["weight_height"] * d["weight_width"]
    inp = d["in_n"] * d["weight_c"] * d["input_depth"] * d["input_height"] * d["input_width"]
    return "flaggems_conv3d_bf16", replace(p, kernel_class="matmul", dims={"M": m, "N": n, "K": k},
                                           flops=2.0 * m * n * k, min_bytes=2.0 * (inp + n * k + n + m * n))


# flaggems_bicubic_aa's shapes keyed as its key is (N, C, OH, OW): (batch, channels, in h, in w, out h, out w)
BICUBIC_AA = {x[:2] + x[4:]: x for x in FLAGGEMS_BICUBIC_AA}


def _aa_taps(size_in: int, size_out: int) -> int:
    """The input taps a side the anti-aliased kernel loops over (align_corners=False): 2 x
    int(support + 0.5) + 1, the support twice the scale where it shrinks (2 where it grows)."""
    scale = size_in / size_out
    support = 2.0 * scale if scale >= 1.0 else 2.0
    return int(support + 0.5) * 2 + 1


def _fg_bicubic_aa(p):
    # a filter over taps_h x taps_w input taps an output pixel (its weights normalised per row and
    # column): a multiply-add a tap, the weights not counted; every input read once and every
    # output written once (bf16) at the least. Filed under `other`, as the pools (a 2-D windowed
    # reduction): a BLOCK_Y x BLOCK_X tile of output pixels a program (BLOCK_Y and BLOCK_X restated
    # as tiles of the output's height and width, BICUBIC_AA_ROLES), every (sample, channel) plane
    # looped over inside it, so the samples are named apart from a batch (which would count as
    # programs of their own)
    n, c, oh, ow = (p.dims[k] for k in ("N", "C", "OH", "OW"))
    h, w = BICUBIC_AA[(n, c, oh, ow)][2:4]
    th, tw = _aa_taps(h, oh), _aa_taps(w, ow)
    out = n * c * oh * ow
    return "flaggems_upsample_bicubic2d_aa_bf16", replace(p, kernel_class="other", dims={
        "samples": n, "channels": c, "in_h": h, "in_w": w, "out_h": oh, "out_w": ow, "taps_h": th, "taps_w": tw},
        flops=2.0 * out * th * tw, min_bytes=2.0 * (n * c * h * w + out))


# flaggems_scaled_mm's shapes keyed as both kernels' keys are (_M_NPO2, N, K): the call's M
SCALED_MM = {(next_pow2(m), n, k): m for m, n, k in FLAGGEMS_SCALED_MM_FP8}
SCALED_MM_BLOCKWISE = {(next_pow2(m), n, k): m for m, n, k in FLAGGEMS_SCALED_MM_BLOCKWISE_FP8}
SCALE_BLOCK = 128  # the block-wise kernel's scale block, 128 of K by 128 of N (FlagGems' launcher fixes it)


def _fg_scaled_mm(p, blockwise: bool):
    # an fp8 e4m3 x fp8 e4m3 GEMM accumulated in fp32, its scales applied (per token and per
    # channel in the epilogue; or per 128 of K in the loop, per token and per 128 x 128 weight
    # block), bf16 out. Filed under `matmul`, not `quantized_matmul`: every operand fp8 (the
    # output and scales aside) is a matmul as abductune classifies it live (`classify._fp8_operands`,
    # which these kernels' keys meet) and as the zoo's zoo_mm_fp8 is filed; the dtypes, as
    # recorded, say fp8 operands and fp32 scales, the operands first: the per-token kernel's
    # signature starts with its bf16 output, and a problem's dtype (the compute peak, the dtype
    # family) is its first. The key's M is _M_NPO2 (M's next power of two): the call's M comes from
    # its shapes. a and b read once (1 byte), the scales once (fp32), the output written once (bf16)
    n, k = p.dims["N"], p.dims["K"]
    dtypes = {**{x: p.dtypes[x] for x in ("a_ptr", "b_ptr") if x in p.dtypes}, **p.dtypes}
    m = (SCALED_MM_BLOCKWISE if blockwise else SCALED_MM)[(p.dims["_M_NPO2"], n, k)]
    if blockwise:
        kb, nb = -(-k // SCALE_BLOCK), -(-n // SCALE_BLOCK)
        scales, name = m * kb + kb * nb, "flaggems_scaled_mm_blockwise_fp8"
    else:
        scales, name = m + n, "flaggems_scaled_mm_fp8"
    return name, replace(p, kernel_class="matmul", dims={"M": m, "N": n, "K": k}, dtypes=dtypes,
                         flops=2.0 * m * n * k, min_bytes=1.0 * (m * k + k * n) + 4.0 * scales + 2.0 * m * n)


def _conv3d_call(dims: dict) -> dict:
    """What flaggems_conv3d passed, from the header's M, N and K (`CONV3D`)."""
    n, c, d, h, w, k, r, s, pad = CONV3D[(dims["M"], dims["N"], dims["K"])]
    return {"input": [n, c, d, h, w], "weight": [k, c, *r], "stride": list(s), "padding": list(pad),
            "dilation": 1, "groups": 1, "bias": True}


# what the call passed that neither the key nor the dims say (kernel -> problem dims -> meta.call)
def _padding(shapes: dict, dims: dict) -> int:
    """A pool's padding, from the problem dims its header states (`_pooled`)."""
    return shapes[(dims["out_h"], dims["out_w"], dims["kernel"], dims["kernel"], dims["stride"], dims["stride"])][3]


CALLS = {"_attn_fwd": lambda dims: {"is_causal": False, "attn_mask": None, "kv_heads": dims["heads"]},
         "avg_pool2d_forward_kernel": lambda dims: {
             "padding": _padding(POOL, dims), "count_include_pad": True, "ceil_mode": False},
         "max_pool2d_forward_kernel": lambda dims: {
             "padding": _padding(MAXPOOL, dims), "dilation": 1, "ceil_mode": False},
         "kron_kernel_for_batch_size_1": lambda dims: dict(zip(("M1", "N1", "M2", "N2"),
                                                               KRON[(dims["M"], dims["N"])])),
         "batch_norm_forward_kernel": lambda dims: {
             "input": "batch x channels x height x width", "training": True, "momentum": 0.1, "eps": 1e-5,
             "weight": True, "bias": True, "running_stats": "fp32"},
         "_upsample_bicubic2d_row_kernel": lambda dims: {
             "in_h": dims["H"] // 2, "in_w": dims["W"] // 2, "scale": 2, "align_corners": False},
         "triu_kernel": lambda dims: {"diagonal": 0},
         "amax_kernel": lambda dims: {"dim": [-1], "keepdim": False},
         "weight_norm_except_dim_kernel": lambda dims: {
             "v": list(WEIGHT_NORM[(dims["in_channels"], dims["rows"], dims["taps"])]), "dim": 1,
             "g": "1 x out x 1 ... (bf16)"},
         "reglu_kernel": lambda dims: {"input": "M x 2N, the gate's half first"},
         "softmax_backward_kernel_non_inner": lambda dims: {
             "dim": 1, "input_dtype": "bf16", "y": "torch.softmax over dim 1 (fp32), as bf16"},
         "instance_norm_loop_kernel": lambda dims: {
             "input": list(INSTANCE_NORM[(dims["rows"], dims["cols"])]), "use_input_stats": True,
             "weight": True, "bias": True, "running_stats": None, "eps": 1e-5},
         "celoss_indices_kernel": lambda dims: {
             "logits": list(CROSS_ENTROPY[(dims["cols"], dims["D"])]), "target": "int64 class indices",
             "reduction": "none", "weight": None, "ignore_index": -100, "label_smoothing": 0.0},
         "conv3d_forward_kernel": _conv3d_call,
         "general_interpolate_bicubic2d_aa_kernel": lambda dims: {
             "align_corners": False, "antialias": True, "scales": None},
         "_pertensor_or_pertoken_smm_kernel": lambda dims: {
             "a": "M x K fp8 e4m3, row-major", "b": "K x N fp8 e4m3, column-major (an N x K weight, transposed)",
             "a_scale": "M x 1 fp32, one per token", "b_scale": "N x 1 fp32, one per output channel",
             "bias": None, "out": "M x N bf16", "quantisation": "absolute maximum / 448 per row"},
         "_block_wise_smm_kernel": lambda dims: {
             "a": "M x K fp8 e4m3, row-major", "b": "K x N fp8 e4m3, column-major (an N x K weight, transposed)",
             "a_scale": "M x K/128 fp32, one per token and 128 of K, column-major",
             "b_scale": "K/128 x N/128 fp32, one per 128 x 128 weight block (N/128 x K/128, transposed)",
             "scale_block": [SCALE_BLOCK, SCALE_BLOCK], "bias": None, "out": "M x N bf16",
             "quantisation": "absolute maximum / 448 per scale block"}}


CONV_ROLES = {"BLOCK_NI_HO_WO": "tile:M", "BLOCK_CO": "tile:N", "BLOCK_CI": "tile:K"}
CONV3D_ROLES = {"BLOCK_NI_DO_HO_WO": "tile:M", "BLOCK_CO": "tile:N", "BLOCK_CI": "tile:K"}
# the cross entropy's BLOCK_C (read as a tile of a dim "C") walks the classes, the cols it reduces
CROSS_ENTROPY_ROLES = {"BLOCK_C": "tile:R"}
# the anti-aliased bicubic's BLOCK_X and BLOCK_Y tile the output's width and height
BICUBIC_AA_ROLES = {"BLOCK_X": "tile:W", "BLOCK_Y": "tile:H"}
# the block-wise scaled matmul's SWIZZLE_GROUP_M is the L2 grouping of M tiles (`space.infer_role`
# reads a name beginning with GROUP only); recorded at the list's one value, 8
SCALED_MM_BLOCKWISE_ROLES = {"SWIZZLE_GROUP_M": "group"}
ROLES = {"conv2d_forward_kernel": CONV_ROLES, "conv3d_forward_kernel": CONV3D_ROLES,
         "celoss_indices_kernel": CROSS_ENTROPY_ROLES,
         "general_interpolate_bicubic2d_aa_kernel": BICUBIC_AA_ROLES,
         "_block_wise_smm_kernel": SCALED_MM_BLOCKWISE_ROLES}  # kernel -> {parameter: role} restated


KERNELS = {"_dyt_fwd_kernel": _dyt, "matmul_kernel": _int8int2,
           "chunk_fwd_kernel_h": lambda p: _gla(p, True), "chunk_gla_fwd_kernel_o": lambda p: _gla(p, False),
           "rms_norm_loop_kernel": _fg_rms, "layer_norm_loop_kernel": _fg_ln,
           "log_softmax_backward_kernel": _fg_lsm_bwd,
           "var_mean_welford_kernel": _fg_var_mean, "softmax_backward_kernel_inner": _fg_smx_bwd,
           "addmv_kernel": _fg_addmv, "l2_norm_kernel": _fg_norm, "bmm_kernel": _fg_bmm,
           "upsample_nearest2d_kernel": _fg_upsample, "conv2d_forward_kernel": _fg_conv,
           "_fused_up_proj_swiglu_kernel": lambda p: _moe(p, True),
           "_fused_down_proj_kernel": lambda p: _moe(p, False),
           "chunk_gated_delta_rule_fwd_kkt_solve_kernel": lambda p: _gdn(p, "kkt"),
           "recompute_w_u_fwd_kernel": lambda p: _gdn(p, "wy"),
           "chunk_gated_delta_rule_fwd_kernel_h_blockdim64": lambda p: _gdn(p, "h"),
           "chunk_fwd_kernel_o": lambda p: _gdn(p, "o"),
           "_attn_fwd": _fg_attn, "avg_pool2d_forward_kernel": _fg_pool,
           "max_pool2d_forward_kernel": _fg_maxpool, "kron_kernel_for_batch_size_1": _fg_kron,
           "chunk_bwd_kernel_dh": lambda p: _gla_bwd(p, "dh"), "chunk_gla_bwd_kernel_dv": lambda p: _gla_bwd(p, "dv"),
           "chunk_gla_bwd_kernel_inter": lambda p: _gla_bwd(p, "inter"),
           "batch_norm_forward_kernel": _fg_batch_norm, "_upsample_bicubic2d_row_kernel": _fg_bicubic,
           "triu_kernel": _fg_triu, "amax_kernel": _fg_amax,
           "weight_norm_except_dim_kernel": _fg_weight_norm, "reglu_kernel": _fg_reglu,
           "softmax_backward_kernel_non_inner": _fg_smx_non_inner, "instance_norm_loop_kernel": _fg_instance_norm,
           "celoss_indices_kernel": _fg_cross_entropy, "conv3d_forward_kernel": _fg_conv3d,
           "general_interpolate_bicubic2d_aa_kernel": _fg_bicubic_aa,
           "_pertensor_or_pertoken_smm_kernel": lambda p: _fg_scaled_mm(p, False),
           "_block_wise_smm_kernel": lambda p: _fg_scaled_mm(p, True),
           "fla:matmul_kernel": _fla_mm, "layer_norm_fwd_kernel": _fla_ln}
# the library release each was recorded from (benchmarks/gpu/library_calls.py's wheels)
RELEASES = {"_dyt_fwd_kernel": ("Liger-Kernel 0.8.5", "liger_dyt_fwd"),
            "matmul_kernel": ("Liger-Kernel 0.8.5", "experimental mm_int8int2.matmul"),
            "_fused_up_proj_swiglu_kernel": ("Liger-Kernel 0.8.5", "LigerFusedMoEFunction"),
            "_fused_down_proj_kernel": ("Liger-Kernel 0.8.5", "LigerFusedMoEFunction"),
            "chunk_fwd_kernel_h": ("flash-linear-attention (fla-core) 0.6.0 (MIT)", "fla.ops.gla.chunk_gla"),
            "chunk_gla_fwd_kernel_o": ("flash-linear-attention (fla-core) 0.6.0 (MIT)", "fla.ops.gla.chunk_gla"),
            "rms_norm_loop_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.rms_norm"),
            "layer_norm_loop_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.layer_norm"),
            "log_softmax_backward_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.ops.log_softmax.log_softmax_backward"),
            "var_mean_welford_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.var_mean"),
            "softmax_backward_kernel_inner": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.ops.softmax.softmax_backward"),
            "addmv_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.addmv"),
            "l2_norm_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.vector_norm"),
            "bmm_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.bmm"),
            "upsample_nearest2d_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.upsample_nearest2d"),
            "conv2d_forward_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.conv2d"),
            "_attn_fwd": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.scaled_dot_product_attention"),
            "avg_pool2d_forward_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.avg_pool2d"),
            "max_pool2d_forward_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.max_pool2d_with_indices"),
            "kron_kernel_for_batch_size_1": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.kron"),
            "batch_norm_forward_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.batch_norm"),
            "_upsample_bicubic2d_row_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.upsample_bicubic2d"),
            "triu_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.triu"),
            "amax_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.amax"),
            "weight_norm_except_dim_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.weight_norm"),
            "reglu_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.reglu"),
            "softmax_backward_kernel_non_inner": ("FlagGems 5.0.2 (Apache-2.0)",
                                                  "flag_gems.ops.softmax.softmax_backward"),
            "instance_norm_loop_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.instance_norm"),
            "celoss_indices_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.cross_entropy_loss"),
            "conv3d_forward_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.conv3d"),
            "general_interpolate_bicubic2d_aa_kernel": ("FlagGems 5.0.2 (Apache-2.0)",
                                                        "flag_gems.ops.upsample_bicubic2d_aa._upsample_bicubic2d_aa"),
            "_pertensor_or_pertoken_smm_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.cutlass_scaled_mm"),
            "_block_wise_smm_kernel": ("FlagGems 5.0.2 (Apache-2.0)", "flag_gems.cutlass_scaled_mm"),
            "fla:matmul_kernel": ("flash-linear-attention (fla-core) 0.6.0 (MIT)", "fla.ops.utils.matmul.matmul"),
            "layer_norm_fwd_kernel": ("flash-linear-attention (fla-core) 0.6.0 (MIT)",
                                      "fla.modules.norm.layernorm.layer_norm"),
            **{k: ("flash-linear-attention (fla-core) 0.6.0 (MIT)", "fla.ops.gla.chunk_gla (backward)")
               for k in ("chunk_bwd_kernel_dh", "chunk_gla_bwd_kernel_dv", "chunk_gla_bwd_kernel_inter")},
            **{k: ("flash-linear-attention (fla-core) 0.6.0 (MIT)", "fla.ops.gated_delta_rule.chunk_gated_delta_rule")
               for k in ("chunk_gated_delta_rule_fwd_kkt_solve_kernel", "recompute_w_u_fwd_kernel",
                         "chunk_gated_delta_rule_fwd_kernel_h_blockdim64", "chunk_fwd_kernel_o")}}


UNFINISHED = ("not recorded: the device calls' time ran out before it was measured (ptxas had taken minutes "
              "on the largest tiles at one warp; the ptxas watch killed some at 15-90 s)")
UNLAUNCHED = ("RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered (not launched: "
              "the CUDA context was dead after an earlier config's fault in the same process)")


def _without_record(ds, configs) -> list[dict]:
    """Those of `configs` (in their order) that `ds` holds no record of."""
    space = ds.stated_space()
    have = {space.key(m.config) for m in ds.records}
    return [dict(c) for c in configs if space.key(c) not in have]


def _unsampled(ds) -> list[dict]:
    """The configs of a sampled dataset's sample (`sweep.sample_configs`, as the header states
    it) that have no record."""
    from abductune.sweep import sample_configs

    smp = ds.meta.get("sample") or {}
    want, _ = sample_configs(ds.stated_space(), list(ds.meta.get("fixed_configs") or []), size=smp["random"],
                             seed=smp["seed"], exhaustive_max=0)
    return _without_record(ds, want)


def _unlaunched(ds) -> list[dict]:
    """The configs of a recorded key's stated space that have no record, in the space's order."""
    return _without_record(ds, ds.stated_space().valid_configs())


def main() -> None:
    ap = argparse.ArgumentParser(description="Complete library recordings' headers.")
    ap.add_argument("raw", type=Path)
    ap.add_argument("out", type=Path)
    # read RAW/DIR with KEY's facts, where two libraries' kernels share a function name (Liger's
    # int8 x int2 and fla's bf16 matmul are both `matmul_kernel`)
    ap.add_argument("--as", dest="alias", action="append", default=[], metavar="DIR=KEY",
                    type=lambda a: tuple(a.split("=", 1)) if "=" in a else ap.error(f"--as wants DIR=KEY, got {a!r}"))
    a = ap.parse_args()
    raw, out, alias = a.raw, a.out, dict(a.alias)
    for d in sorted(x for x in raw.iterdir() if x.is_dir()):
        key = alias.get(d.name, d.name)
        fix = KERNELS.get(key)
        if fix is None:
            print(f"skipped {d.name}: no header facts known for it")
            continue
        for f in sorted(d.glob("*.jsonl.gz")):
            ds = read_dataset(f, strict=True)
            name, problem = fix(ds.problem)
            problem = replace(problem, kernel=name)
            release, op = RELEASES[key]
            base = str(ds.meta.get('origin', d.name)).replace(' (through patch_triton)', '')
            licence = "" if "(" in release else " (BSD-2-Clause)"  # Liger's entries name no licence
            origin = (f"{release}{licence}: {base}, recorded through its public "
                      f"op {op} under patch_triton, never copied")
            roles = ROLES.get(key, {})
            space = {**ds.space_dict, "params": [{**q, "role": roles.get(q["name"], q["role"])}
                                                 for q in ds.space_dict["params"]]}
            meta = {**ds.meta, "origin": origin, "header_completed": "benchmarks/library_headers.py"}
            if key in CALLS:
                meta["call"] = CALLS[key](problem.dims)
            records = list(ds.records)
            missing = _unlaunched(ds) if not ds.restricted_to_records else []
            if missing:
                # configs of the grown space without a record: after a CUDA illegal memory access every
                # later config of that process failed unlaunched in the dead context (session 22's fla
                # chunk_fwd_kernel_o; benchmarks/results/session22/strip_poisoned.py dropped those records
                # from the raw files so reruns could measure them). They are failures as the recorder saw
                # them, never timed: stated as such, and counted in the header
                records += [Measurement(c, "runtime_error", compile_s=0.0, bench_s=0.0, error=UNLAUNCHED)
                            for c in missing]
                meta["unlaunched_after_fault"] = len(missing)
            unfinished = _unsampled(ds) if ds.restricted_to_records and ds.meta.get("sample") else []
            if unfinished:
                # a sampled key whose recording ran out of device time on its slowest compiles: the
                # sample's configs without a record are stated as timeouts (a live tuner pays for them
                # the same way), so the replay's space is the sample, not the sample minus its worst
                records += [Measurement(c, "timeout", compile_s=0.0, bench_s=0.0, error=UNFINISHED)
                            for c in unfinished]
                meta["unfinished_compiles"] = len(unfinished)
            ds = replace(ds, problem=problem, space_dict=space, _space=None, records=records, meta=meta)
            # MoE keys name (H_dim, I_dim); its datasets are named for the GEMM's own dims
            stem = ("_".join(f"{k}{v}" for k, v in problem.dims.items())
                    if name.startswith(("liger_moe", "fla_", "flaggems_")) else None)
            dest = out / name / (f"{stem}.jsonl.gz" if stem else f.name)
            dest.parent.mkdir(parents=True, exist_ok=True)
            write_dataset(ds, dest)
            print(f"wrote {dest}: {problem.kernel_class} {problem.dims} {problem.flops:.3g} FLOPs")


if __name__ == "__main__":
    main()
