"""Grouped GEMM of a mixture-of-experts layer (bf16): every routed (token, slot) pair times its
expert's weight matrix, in one launch.

Each of M tokens is routed to TOP_K = 2 of E experts (Mixtral-style; the Qwen-MoE shapes below
keep top-2 as well). The (token, slot) pairs p = token * TOP_K + slot are sorted by expert
once per layer, before any GEMM (the router's job, shared by the up and down projections), so
the inputs are

    x (M, K) bf16, w (E, N, K) bf16 (nn.Linear layout per expert),
    sorted_pairs (M * TOP_K,) int32: pair ids grouped by expert,
    expert_start (E + 1,) int32: expert e owns sorted_pairs[expert_start[e]:expert_start[e+1]],

and the output is out (M, TOP_K, N) bf16 with out[t, j] = x[t] @ w[topk_ids[t, j]]^T.

None of this depends on the tuned tile: unlike the classic design that pads every expert's
rows to a multiple of BLOCK_SIZE_M (padding that would have to be redone per config), each
program derives its (expert, m-tile) itself. It loads the E + 1 offsets as one vector, counts
every expert's m-tiles for its own BLOCK_SIZE_M, takes the running sum, and finds its expert by
counting the tile ends at or below its m-tile index. The grid is a worst-case count known from
the shape alone (ceil(M * TOP_K / BLOCK_SIZE_M) + E m-tiles times the n-tiles); programs past
the real tile count return at once. So the launch is one kernel, with no host sync, and a
meta-device launch needs only shapes.

Which experts the tokens pick: by default (the recorded zoo data) top-2 of logits with a
per-expert bias (`route`); a problem that names a routing distribution (`moe_routing`:
uniform, Zipf, a trace's expert loads) draws from it instead (`abductune tune-moe`).

Style: vLLM fused-MoE-like names (BLOCK_SIZE_M/N/K, GROUP_SIZE_M swizzle over the m-tiles),
gathered A rows, K always masked, int64 expert offsets into w.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import triton
import triton.language as tl

from ...classify import next_pow2
from ...hardware import HardwareInfo
from ...problem import Problem
from ...space import Choice, Pow2, Space
from ..base import Constexpr, KernelSpec, cdiv
from . import moe_routing

if TYPE_CHECKING:
    import torch

TOP_K = 2


@triton.jit(do_not_specialize=["M"])
def _moe_grouped_gemm(x_ptr, w_ptr, out_ptr, pairs_ptr, expert_start_ptr,
                      M, N, K, num_experts,
                      stride_xm, stride_xk, stride_we, stride_wn, stride_wk, stride_om, stride_on,
                      TOP_K: tl.constexpr, E_POW2: tl.constexpr,
                      BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                      GROUP_SIZE_M: tl.constexpr):
    # worst-case m-tile count: every expert may end in a partial tile
    pid = tl.program_id(0)
    m_tiles = tl.cdiv(M * TOP_K, BLOCK_SIZE_M) + num_experts
    n_tiles = tl.cdiv(N, BLOCK_SIZE_N)
    span = GROUP_SIZE_M * n_tiles
    first = (pid // span) * GROUP_SIZE_M
    height = tl.minimum(m_tiles - first, GROUP_SIZE_M)
    pid_m = first + (pid % span) % height
    pid_n = (pid % span) // height

    # which expert owns m-tile pid_m, from the per-expert row offsets
    e = tl.arange(0, E_POW2)
    e_ok = e < num_experts
    lo = tl.load(expert_start_ptr + e, mask=e_ok, other=0)
    hi = tl.load(expert_start_ptr + e + 1, mask=e_ok, other=0)
    tiles = (hi - lo + BLOCK_SIZE_M - 1) // BLOCK_SIZE_M
    tile_end = tl.cumsum(tiles, axis=0)
    expert = tl.sum((tile_end <= pid_m).to(tl.int32), axis=0)
    if expert >= num_experts:
        return
    mine = e == expert
    tile_in_expert = pid_m - tl.sum(tl.where(mine, tile_end - tiles, 0), axis=0)
    row_lo = tl.sum(tl.where(mine, lo, 0), axis=0)
    row_hi = tl.sum(tl.where(mine, hi, 0), axis=0)

    rows = row_lo + tile_in_expert * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    row_ok = rows < row_hi
    pair = tl.load(pairs_ptr + rows, mask=row_ok, other=0)
    token = pair // TOP_K
    cols = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    col_ok = cols < N
    ks = tl.arange(0, BLOCK_SIZE_K)

    a_ptrs = x_ptr + token[:, None] * stride_xm + ks[None, :] * stride_xk
    b_ptrs = (w_ptr + expert.to(tl.int64) * stride_we
              + cols[None, :] * stride_wn + ks[:, None] * stride_wk)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_SIZE_K):
        k_ok = ks < K - k0
        a = tl.load(a_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_SIZE_K * stride_xk
        b_ptrs += BLOCK_SIZE_K * stride_wk

    o_ptrs = out_ptr + pair[:, None] * stride_om + cols[None, :] * stride_on
    tl.store(o_ptrs, acc.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


_SMEM_BYTES = 232448  # H100 opt-in shared memory per block


class MoeGemmBf16(KernelSpec):
    """zoo_moe_gemm_bf16: out[t, j] = x[t] @ w[expert of (t, j)]^T for top-2 routing over E experts."""

    origin = ("abductune zoo (ours), after the fused-MoE grouped GEMM of Mixtral serving "
              "(MegaBlocks, Gale et al. 2023; vLLM fused_moe): expert-sorted tokens, one launch")
    name = "zoo_moe_gemm_bf16"
    kernel_class = "matmul"
    dims = ("M", "N", "K", "E")
    dtype = "bf16"
    no_specialize = ("M",)
    top_k = TOP_K

    @property
    def triton_fn(self) -> Any:
        return _moe_grouped_gemm

    # ------------------------------------------------------------------ tuning surface
    def space(self) -> Space:
        return Space(
            [Pow2("BLOCK_SIZE_M", 16, 128, default=64), Pow2("BLOCK_SIZE_N", 32, 256, default=64),
             Pow2("BLOCK_SIZE_K", 32, 256, default=64), Choice("GROUP_SIZE_M", [1, 16], default=1),
             Choice("num_warps", [4, 8], default=4), Choice("num_stages", [2, 3, 4, 5], default=3)],
            constraints=[
                # bf16 A and B tiles of every pipeline stage in shared memory
                f"num_stages * (BLOCK_SIZE_M + BLOCK_SIZE_N) * BLOCK_SIZE_K * 2 <= {_SMEM_BYTES}",
                # fp32 accumulator: at most 128 per thread, at least 8
                "BLOCK_SIZE_M * BLOCK_SIZE_N <= 128 * 32 * num_warps",
                "BLOCK_SIZE_M * BLOCK_SIZE_N >= 8 * 32 * num_warps",
            ],
            name=self.name,
        )

    def fixed_configs(self) -> list[dict]:
        # the kind of list fused-MoE configs hold: small BLOCK_SIZE_M for few tokens per expert
        rows = [(16, 64, 64, 1, 4, 4), (16, 64, 128, 1, 4, 4), (16, 64, 256, 1, 4, 3), (32, 64, 64, 16, 4, 4),
                (32, 128, 64, 1, 4, 4), (64, 64, 64, 16, 4, 3), (64, 128, 64, 1, 4, 4), (64, 128, 128, 16, 8, 3),
                (128, 128, 64, 16, 8, 4), (128, 256, 64, 16, 8, 3)]
        return [{"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": g,
                 "num_warps": w, "num_stages": s} for m, n, k, g, w, s in rows]

    def default_config(self) -> dict:
        return {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1,
                "num_warps": 4, "num_stages": 3}

    def suite_shapes(self) -> list[dict[str, int]]:
        # N, K are one tensor-parallel shard of an expert's projection
        return [{"M": m, "N": n, "K": k, "E": e} for m, n, k, e in [
            (16, 3584, 4096, 8),     # Mixtral-8x7B gate+up (2 * 14336 / tp8), decode
            (2048, 3584, 4096, 8),   # Mixtral-8x7B gate+up, prefill
            (4000, 4096, 1792, 8),   # Mixtral-8x7B down (14336 / tp8), ragged prefill
            (256, 2816, 2048, 60),   # Qwen1.5-MoE-A2.7B gate+up (2 * 1408), 60 experts
            (2048, 2048, 1408, 60),  # Qwen1.5-MoE-A2.7B down, K = 11 * 128
            (16, 1280, 3584, 64),    # Qwen2-57B-A14B gate+up (2 * 2560 / tp4), 64 experts, decode
        ]]

    # ------------------------------------------------------------------ problem
    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        m, n, k, e = d["M"], d["N"], d["K"], d["E"]
        pairs = m * TOP_K
        touched = min(e, pairs)  # at most this many experts have any row: only their weights are read
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"a": "bf16", "b": "bf16", "c": "bf16", "sorted_pairs": "int32",
                               "expert_start": "int32"},
                       flops=2.0 * pairs * n * k,
                       min_bytes=float(2 * m * k + 2 * touched * n * k + 4 * pairs + 4 * (e + 1) + 2 * pairs * n),
                       hardware=hardware, source_hash=self.source_hash)

    # ------------------------------------------------------------------ running
    @staticmethod
    def route(m: int, e: int, seed: int) -> tuple:
        """Deterministic top-2 routing on the CPU: (topk_ids (M, 2), sorted_pairs, expert_start).
        Logits carry a per-expert bias so loads are uneven, as trained routers' are."""
        import torch
        g = torch.Generator(device="cpu")
        g.manual_seed(seed)
        bias = 0.7 * torch.randn(e, generator=g)
        logits = torch.randn(m, e, generator=g) + bias
        topk_ids = logits.topk(TOP_K, dim=1).indices.to(torch.int32)
        return (topk_ids, *MoeGemmBf16.sort_pairs(topk_ids, e))

    @staticmethod
    def sort_pairs(topk_ids: torch.Tensor, e: int) -> tuple:
        """(sorted_pairs, expert_start) of a routing: pair ids grouped by expert, and offsets."""
        import torch
        flat = topk_ids.reshape(-1).long()
        sorted_pairs = torch.sort(flat, stable=True).indices.to(torch.int32)
        counts = torch.bincount(flat, minlength=e)
        expert_start = torch.zeros(e + 1, dtype=torch.int32)
        expert_start[1:] = torch.cumsum(counts, 0)
        return sorted_pairs, expert_start

    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        d = problem.dims
        m, n, k, e = d["M"], d["N"], d["K"], d["E"]
        if device == "meta":
            return (torch.empty(m, k, dtype=torch.bfloat16, device="meta"),
                    torch.empty(e, n, k, dtype=torch.bfloat16, device="meta"),
                    torch.empty(m, TOP_K, dtype=torch.int32, device="meta"),
                    torch.empty(m * TOP_K, dtype=torch.int32, device="meta"),
                    torch.empty(e + 1, dtype=torch.int32, device="meta"))
        g = self._generator(device, seed)
        x = torch.randn(m, k, generator=g, device=device).to(torch.bfloat16)
        w = torch.empty(e, n, k, dtype=torch.bfloat16, device=device)
        for i in range(e):  # one expert at a time: no fp32 copy of every expert at once
            w[i] = (torch.randn(n, k, generator=g, device=device) / k ** 0.5).to(torch.bfloat16)
        routing = moe_routing.routing_of(problem)
        if routing is None:  # the recorded zoo default: biased logits (route)
            topk_ids, sorted_pairs, expert_start = self.route(m, e, seed)
        else:  # a routing distribution the problem names (moe_routing: uniform, zipf, trace loads)
            topk_ids = moe_routing.sample_topk(m, e, TOP_K, routing, seed)
            sorted_pairs, expert_start = self.sort_pairs(topk_ids, e)
        return x, w, topk_ids.to(device), sorted_pairs.to(device), expert_start.to(device)

    def reference(self, inputs: tuple) -> torch.Tensor:
        import torch
        x, w, topk_ids = inputs[:3]
        m, n = x.shape[0], w.shape[1]
        ref = torch.zeros(m, TOP_K, n, dtype=torch.float32, device=x.device)
        for e in range(w.shape[0]):  # from topk_ids directly: the sorted lists are checked too
            t, j = (topk_ids == e).nonzero(as_tuple=True)
            if t.numel():
                ref[t, j] = x[t].float() @ w[e].float().t()
        return ref

    def alloc_output(self, problem: Problem, inputs: tuple) -> torch.Tensor:
        import torch
        x, w = inputs[0], inputs[1]
        return torch.empty(x.shape[0], TOP_K, w.shape[1], dtype=torch.bfloat16, device=x.device)

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        x, w, _, sorted_pairs, expert_start = inputs
        m, k = x.shape
        e, n = w.shape[0], w.shape[1]
        bm, bn = config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"]
        grid = ((cdiv(m * TOP_K, bm) + e) * cdiv(n, bn),)
        _moe_grouped_gemm[grid](x, w, out, sorted_pairs, expert_start, m, n, k, e,
                                x.stride(0), x.stride(1), w.stride(0), w.stride(1), w.stride(2),
                                out.stride(1), out.stride(2),
                                TOP_K=TOP_K, E_POW2=next_pow2(e),
                                BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=config["BLOCK_SIZE_K"],
                                GROUP_SIZE_M=config["GROUP_SIZE_M"],
                                num_warps=config["num_warps"], num_stages=config["num_stages"])

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        # without the kernel: a Python loop over experts, gathering each one's tokens
        x, w, _, sorted_pairs, expert_start = inputs
        bounds = expert_start.tolist()  # host sync, as the per-expert loop needs the counts
        pairs = sorted_pairs.long()
        flat = out.view(-1, out.shape[-1])
        for e in range(w.shape[0]):
            lo, hi = bounds[e], bounds[e + 1]
            if hi == lo:
                continue
            p = pairs[lo:hi]
            flat.index_copy_(0, p, x.index_select(0, p // TOP_K) @ w[e].t())

    # ------------------------------------------------------------------ compiling
    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        m, n, k, e = (problem.dims[x] for x in ("M", "N", "K", "E"))
        return {"x_ptr": "*bf16", "w_ptr": "*bf16", "out_ptr": "*bf16", "pairs_ptr": "*i32",
                "expert_start_ptr": "*i32", "M": m, "N": n, "K": k, "num_experts": e,
                "stride_xm": k, "stride_xk": 1, "stride_we": n * k, "stride_wn": k, "stride_wk": 1,
                "stride_om": n, "stride_on": 1,
                "TOP_K": Constexpr(TOP_K), "E_POW2": Constexpr(next_pow2(e)),
                **{p: Constexpr(config[p]) for p in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M")}}
