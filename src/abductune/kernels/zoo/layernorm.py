"""LayerNorm with weight and bias (Ba, Kiros & Hinton 2016), bf16, forward and backward.

Forward, one program per row: y = (x - mean) * rstd * w + b, and the row's mean and rstd
(1 / sqrt(var + eps), biased variance) stored in fp32 for the backward. When BLOCK_SIZE covers
the row (WHOLE_ROW, derived from the shape) the row is read once and held in registers (mean,
then the centred variance). Otherwise the row is streamed twice: pass 1 accumulates lane-wise
sums of d = x - k and d^2, shifted by the row's first element k (the shifted-data variance,
which avoids the cancellation of E[x^2] - E[x]^2 when |mean| >> std), pass 2 writes y.

Backward: given x, dy, w and the saved mean and rstd, with xhat = (x - mean) rstd and g = w dy,
    dx = rstd (g - xhat c1 - c2),   c1 = mean(xhat g),  c2 = mean(g)   (per row)
    dw = sum_rows dy xhat,          db = sum_rows dy.
dw and db are a two-stage reduction: the rows are cut into at most GROUP_SIZE_M contiguous
groups, one program per group; it walks its rows, writes dx, and keeps dw/db partial sums for
its group, which it stores as one row of a (groups, cols) fp32 buffer (every program writes its
own row: no atomics, no zeroing). `launch` then sums the partial rows with torch and rounds to
bf16, as a user of the kernel pays it. Rows that fit one BLOCK_SIZE (WHOLE_ROW) are read once;
longer rows take two phases: the group's (c1, c2) into a small fp32 scratch, then chunk by chunk
of columns the group's rows again (dx written, dw/db for that chunk held in registers).

Outputs: the benchmark worker poisons and checks one output tensor, so the forward's y, mean and
rstd share one fp32 buffer (y seen as bf16; `fwd_parts`) and the backward's dx, dw and db one
bf16 buffer (`bwd_parts`), each part on a 16-byte boundary. `reference` gives the parts as a tuple.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import triton
import triton.language as tl

from ...hardware import HardwareInfo
from ...problem import Problem
from ...space import Choice, Pow2, Space
from ..base import TOLERANCE, Constexpr, KernelSpec, cdiv, launch_options, torch_dtype

if TYPE_CHECKING:
    import torch

EPS = 1e-5
STATS_TOLERANCE = 1e-3  # mean and rstd are fp32 on both sides


# hidden sizes 4096, 8192, 2048 and 5120 (Llama-2-13B / Qwen-14B widths) over 512..16384 tokens
_SHAPES = [{"rows": 512, "cols": 4096}, {"rows": 16384, "cols": 4096}, {"rows": 4096, "cols": 8192},
           {"rows": 16384, "cols": 2048}, {"rows": 3000, "cols": 5120}]


@triton.jit
def layernorm_fwd_rows(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_cols, x_row_stride, y_row_stride,
                       eps, BLOCK_SIZE: tl.constexpr, WHOLE_ROW: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row.to(tl.int64) * x_row_stride
    y_row = y_ptr + row.to(tl.int64) * y_row_stride
    lane = tl.arange(0, BLOCK_SIZE)
    if WHOLE_ROW:
        live = lane < n_cols
        x = tl.load(x_row + lane, mask=live, other=0.0).to(tl.float32)
        mu = tl.sum(x, axis=0) / n_cols
        centred = tl.where(live, x - mu, 0.0)
        rs = tl.rsqrt(tl.sum(centred * centred, axis=0) / n_cols + eps)
        w = tl.load(w_ptr + lane, mask=live, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + lane, mask=live, other=0.0).to(tl.float32)
        tl.store(y_row + lane, (centred * rs * w + b).to(y_ptr.dtype.element_ty), mask=live)
    else:
        shift = tl.load(x_row).to(tl.float32)
        s1 = tl.zeros((BLOCK_SIZE,), tl.float32)
        s2 = tl.zeros((BLOCK_SIZE,), tl.float32)
        for c0 in range(0, n_cols, BLOCK_SIZE):
            col = c0 + lane
            live = col < n_cols
            d = tl.where(live, tl.load(x_row + col, mask=live, other=0.0).to(tl.float32) - shift, 0.0)
            s1 += d
            s2 += d * d
        m1 = tl.sum(s1, axis=0) / n_cols
        m2 = tl.sum(s2, axis=0) / n_cols
        mu = shift + m1
        rs = tl.rsqrt(tl.maximum(m2 - m1 * m1, 0.0) + eps)
        for c0 in range(0, n_cols, BLOCK_SIZE):
            col = c0 + lane
            live = col < n_cols
            x = tl.load(x_row + col, mask=live, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + col, mask=live, other=0.0).to(tl.float32)
            b = tl.load(b_ptr + col, mask=live, other=0.0).to(tl.float32)
            tl.store(y_row + col, ((x - mu) * rs * w + b).to(y_ptr.dtype.element_ty), mask=live)
    tl.store(mean_ptr + row, mu)
    tl.store(rstd_ptr + row, rs)


# row counts are not specialised: one compile serves every token count
@triton.jit(do_not_specialize=["n_rows"])
def layernorm_bwd_groups(x_ptr, dy_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, partial_ptr, stats_ptr,
                         n_rows, n_cols, row_stride,
                         BLOCK_SIZE: tl.constexpr, GROUP_SIZE_M: tl.constexpr, WHOLE_ROW: tl.constexpr):
    # at most GROUP_SIZE_M groups of equal length (the last one shorter); the launch starts
    # one program per non-empty group
    rows_per_group = (n_rows + GROUP_SIZE_M - 1) // GROUP_SIZE_M
    grp = tl.program_id(0)
    first = grp * rows_per_group
    stop = tl.minimum(first + rows_per_group, n_rows)
    first64 = first.to(tl.int64)  # row offsets in int64: rows * cols may pass 2^31
    lane = tl.arange(0, BLOCK_SIZE)
    # partial sums, a (2, groups, n_cols) buffer: dw of group g in plane 0, db in plane 1
    pw_row = partial_ptr + grp.to(tl.int64) * n_cols
    pb_row = pw_row + tl.num_programs(0).to(tl.int64) * n_cols
    if WHOLE_ROW:
        live = lane < n_cols
        w = tl.load(w_ptr + lane, mask=live, other=0.0).to(tl.float32)
        dw = tl.zeros((BLOCK_SIZE,), tl.float32)
        db = tl.zeros((BLOCK_SIZE,), tl.float32)
        for r in range(first, stop):
            off = (first64 + (r - first)) * row_stride
            x = tl.load(x_ptr + off + lane, mask=live, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + off + lane, mask=live, other=0.0).to(tl.float32)
            mu = tl.load(mean_ptr + r)
            rs = tl.load(rstd_ptr + r)
            xhat = tl.where(live, (x - mu) * rs, 0.0)
            g = w * dy
            c1 = tl.sum(xhat * g, axis=0) / n_cols
            c2 = tl.sum(g, axis=0) / n_cols
            tl.store(dx_ptr + off + lane, ((g - xhat * c1 - c2) * rs).to(dx_ptr.dtype.element_ty), mask=live)
            dw += dy * xhat
            db += dy
        tl.store(pw_row + lane, dw, mask=live)
        tl.store(pb_row + lane, db, mask=live)
    else:
        # phase 1: (c1, c2) of every row of the group, streamed chunk by chunk
        for r in range(first, stop):
            off = (first64 + (r - first)) * row_stride
            mu = tl.load(mean_ptr + r)
            rs = tl.load(rstd_ptr + r)
            a1 = tl.zeros((BLOCK_SIZE,), tl.float32)
            a2 = tl.zeros((BLOCK_SIZE,), tl.float32)
            for c0 in range(0, n_cols, BLOCK_SIZE):
                col = c0 + lane
                live = col < n_cols
                x = tl.load(x_ptr + off + col, mask=live, other=0.0).to(tl.float32)
                dy = tl.load(dy_ptr + off + col, mask=live, other=0.0).to(tl.float32)
                w = tl.load(w_ptr + col, mask=live, other=0.0).to(tl.float32)
                g = w * dy
                a1 += tl.where(live, (x - mu) * rs, 0.0) * g
                a2 += g
            tl.store(stats_ptr + 2 * r, tl.sum(a1, axis=0) / n_cols)
            tl.store(stats_ptr + 2 * r + 1, tl.sum(a2, axis=0) / n_cols)
        # phase 2: one column chunk at a time over the group's rows
        for c0 in range(0, n_cols, BLOCK_SIZE):
            col = c0 + lane
            live = col < n_cols
            w = tl.load(w_ptr + col, mask=live, other=0.0).to(tl.float32)
            dw = tl.zeros((BLOCK_SIZE,), tl.float32)
            db = tl.zeros((BLOCK_SIZE,), tl.float32)
            for r in range(first, stop):
                off = (first64 + (r - first)) * row_stride
                x = tl.load(x_ptr + off + col, mask=live, other=0.0).to(tl.float32)
                dy = tl.load(dy_ptr + off + col, mask=live, other=0.0).to(tl.float32)
                mu = tl.load(mean_ptr + r)
                rs = tl.load(rstd_ptr + r)
                c1 = tl.load(stats_ptr + 2 * r)
                c2 = tl.load(stats_ptr + 2 * r + 1)
                xhat = tl.where(live, (x - mu) * rs, 0.0)
                g = w * dy
                tl.store(dx_ptr + off + col, ((g - xhat * c1 - c2) * rs).to(dx_ptr.dtype.element_ty), mask=live)
                dw += dy * xhat
                db += dy
            tl.store(pw_row + col, dw, mask=live)
            tl.store(pb_row + col, db, mask=live)


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


# The benchmark worker poisons and checks ONE output tensor, so each kernel's outputs live in one
# buffer, every part starting on a 16-byte boundary (the alignment a separate allocation has,
# which the compile hints assume).
def fwd_parts(buf: Any, rows: int, cols: int) -> tuple:
    """(y bf16 (rows, cols), mean fp32 (rows,), rstd fp32 (rows,)) inside one fp32 buffer."""
    import torch
    y_words = _round_up(-(-rows * cols // 2), 4)  # two bf16 per fp32 word
    stat = _round_up(rows, 4)
    y = buf[:y_words].view(torch.bfloat16)[:rows * cols].view(rows, cols)
    return y, buf[y_words:y_words + rows], buf[y_words + stat:y_words + stat + rows]


def fwd_words(rows: int, cols: int) -> int:
    return _round_up(-(-rows * cols // 2), 4) + 2 * _round_up(rows, 4)


def bwd_parts(buf: Any, rows: int, cols: int) -> tuple:
    """(dx (rows, cols), dwdb (2, cols): row 0 dw, row 1 db) inside one bf16 buffer."""
    start = _round_up(rows * cols, 8)
    return buf[:rows * cols].view(rows, cols), buf[start:start + 2 * cols].view(2, cols)


def _rel(o: Any, r: Any) -> float:
    import torch
    if tuple(o.shape) != tuple(r.shape):
        return math.inf
    o, r = o.detach().double(), r.detach().double()
    if not bool(torch.isfinite(o).all()):
        return math.inf
    denom = float(torch.linalg.vector_norm(r))
    num = float(torch.linalg.vector_norm(o - r))
    return num / denom if denom > 0 else num


class LayerNormFwdBf16(KernelSpec):
    origin = ("abductune zoo (ours), after layer normalisation (Ba, Kiros & Hinton 2016) with the "
              "shifted-data variance for rows longer than one block")
    kernel_class = "row_reduction"
    dims = ("rows", "cols")
    dtype = "bf16"

    def __init__(self) -> None:
        self.name = "zoo_layernorm_fwd_bf16"

    @property
    def triton_fn(self) -> Any:
        return layernorm_fwd_rows

    def space(self) -> Space:
        return Space(
            [Pow2("BLOCK_SIZE", 128, 16384, default=4096), Pow2("num_warps", 1, 16, default=8),
             Choice("num_stages", [1, 2, 3], default=1)],
            constraints=[
                "BLOCK_SIZE >= 32 * num_warps",  # every thread owns an element of the block
                "BLOCK_SIZE <= 32 * 32 * num_warps",  # at most 32 fp32 elements per thread
            ],
            name=self.name)

    def fixed_configs(self) -> list[dict]:
        rows = [(1024, 2, 2), (1024, 4, 1), (2048, 4, 1), (2048, 8, 1), (4096, 8, 1), (4096, 16, 1),
                (8192, 8, 2), (8192, 16, 1)]
        return [{"BLOCK_SIZE": b, "num_warps": w, "num_stages": s} for b, w, s in rows]

    def default_config(self) -> dict:
        return {"BLOCK_SIZE": 4096, "num_warps": 8, "num_stages": 1}

    def suite_shapes(self) -> list[dict[str, int]]:
        return [dict(s) for s in _SHAPES]

    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        rows, cols = d["rows"], d["cols"]
        # sum, subtract, square, sum, then (x - mean) * rstd * w + b: ~7 flops per element
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"x": self.dtype, "w": self.dtype, "b": self.dtype, "y": self.dtype,
                               "mean": "fp32", "rstd": "fp32"},
                       flops=7.0 * rows * cols, min_bytes=2.0 * (2 * rows * cols + 2 * cols) + 8.0 * rows,
                       hardware=hardware, source_hash=self.source_hash)

    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        rows, cols = problem.dims["rows"], problem.dims["cols"]
        g, dt = self._generator(device, seed), torch_dtype(self.dtype)
        # a residual stream: per-row offsets and scales, so the mean is not ~0 and rows differ
        x = (torch.randn(rows, cols, generator=g, device=device)
             * (0.5 + torch.rand(rows, 1, generator=g, device=device) * 2)
             + 3.0 * torch.randn(rows, 1, generator=g, device=device)).to(dt)
        w = (1.0 + 0.3 * torch.randn(cols, generator=g, device=device)).to(dt)
        b = (0.1 * torch.randn(cols, generator=g, device=device)).to(dt)
        return x, w, b

    def reference(self, inputs: tuple) -> tuple:
        import torch
        x, w, b = (t.double() for t in inputs)
        mu = x.mean(dim=1)
        rstd = torch.rsqrt(x.var(dim=1, unbiased=False) + EPS)
        y = (x - mu[:, None]) * rstd[:, None] * w + b
        return y.float(), mu.float(), rstd.float()

    def alloc_output(self, problem: Problem, inputs: tuple) -> Any:
        import torch
        # one fp32 buffer: y (as bf16), then mean, then rstd (see `fwd_parts`)
        rows, cols = inputs[0].shape
        return torch.empty(fwd_words(rows, cols), dtype=torch.float32, device=inputs[0].device)

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        x, w, b = inputs
        rows, cols = x.shape
        y, mean, rstd = fwd_parts(out, rows, cols)
        meta, opts = launch_options(config)
        layernorm_fwd_rows[(rows,)](x, w, b, y, mean, rstd, cols, x.stride(0), y.stride(0), EPS,
                                    WHOLE_ROW=meta["BLOCK_SIZE"] >= cols, **meta, **opts)

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        import torch
        # native_layer_norm is what F.layer_norm runs when autograd will need mean and rstd:
        # the same three outputs as this kernel
        x, w, b = inputs
        torch.ops.aten.native_layer_norm(x, [x.shape[-1]], w, b, EPS)

    def check(self, out: Any, ref: Any) -> tuple[bool, float]:
        """y within the bf16 tolerance, mean and rstd within STATS_TOLERANCE; the error
        reported is the worst of the three."""
        rows, cols = ref[0].shape
        if tuple(out.shape) != (fwd_words(rows, cols),):
            return False, math.inf
        errs = [_rel(o, r) for o, r in zip(fwd_parts(out, rows, cols), ref)]
        ok = errs[0] <= TOLERANCE[self.dtype] and errs[1] <= STATS_TOLERANCE and errs[2] <= STATS_TOLERANCE
        return ok, max(errs)

    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        cols = problem.dims["cols"]
        ptr = f"*{self.dtype}"
        return {"x_ptr": ptr, "w_ptr": ptr, "b_ptr": ptr, "y_ptr": ptr, "mean_ptr": "*fp32", "rstd_ptr": "*fp32",
                "n_cols": cols, "x_row_stride": cols, "y_row_stride": cols, "eps": EPS,
                "BLOCK_SIZE": Constexpr(config["BLOCK_SIZE"]),
                "WHOLE_ROW": Constexpr(config["BLOCK_SIZE"] >= cols)}


class LayerNormBwdBf16(KernelSpec):
    """Output: one bf16 buffer holding dx (rows, cols) then dw and db (`bwd_parts`)."""

    origin = ("abductune zoo (ours), after the layer-normalisation gradient (Ba, Kiros & Hinton 2016) "
              "with dw/db as per-group partial sums finished by a second reduction")
    kernel_class = "row_reduction"
    dims = ("rows", "cols")
    dtype = "bf16"
    no_specialize = ("n_rows",)

    def __init__(self) -> None:
        self.name = "zoo_layernorm_bwd_bf16"

    @property
    def triton_fn(self) -> Any:
        return layernorm_bwd_groups

    def space(self) -> Space:
        return Space(
            [Pow2("BLOCK_SIZE", 512, 16384, default=8192), Pow2("GROUP_SIZE_M", 32, 1024, default=128),
             Pow2("num_warps", 1, 16, default=16), Choice("num_stages", [1, 2], default=1)],
            constraints=[
                "BLOCK_SIZE >= 32 * num_warps",  # every thread owns an element of the block
                # x, dy, w, dw, db live per element: at most 32 elements per thread
                "BLOCK_SIZE <= 32 * 32 * num_warps",
            ],
            name=self.name)

    def fixed_configs(self) -> list[dict]:
        rows = [(1024, 256, 4, 2), (2048, 128, 4, 1), (4096, 128, 8, 1), (4096, 256, 8, 1), (8192, 64, 8, 2),
                (8192, 128, 16, 1), (8192, 256, 16, 1), (2048, 512, 4, 1)]
        return [{"BLOCK_SIZE": b, "GROUP_SIZE_M": g, "num_warps": w, "num_stages": s} for b, g, w, s in rows]

    def default_config(self) -> dict:
        return {"BLOCK_SIZE": 8192, "GROUP_SIZE_M": 128, "num_warps": 16, "num_stages": 1}

    def suite_shapes(self) -> list[dict[str, int]]:
        return [dict(s) for s in _SHAPES]

    @staticmethod
    def _groups(rows: int, group_size: int) -> tuple[int, int]:
        """(groups, rows per group) as the kernel cuts the rows: at most `group_size` groups of
        equal length but the last."""
        per = cdiv(rows, group_size)
        return cdiv(rows, per), per

    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        rows, cols = d["rows"], d["cols"]
        # xhat (2), g (1), two row sums (4), dx (4), dw and db accumulation (3): ~14 flops per element
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"x": self.dtype, "dy": self.dtype, "w": self.dtype, "mean": "fp32", "rstd": "fp32",
                               "dx": self.dtype, "dwdb": self.dtype},
                       flops=14.0 * rows * cols,
                       min_bytes=2.0 * (3 * rows * cols + cols + 2 * cols) + 8.0 * rows,
                       hardware=hardware, source_hash=self.source_hash)

    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        rows, cols = problem.dims["rows"], problem.dims["cols"]
        g, dt = self._generator(device, seed), torch_dtype(self.dtype)
        x = (torch.randn(rows, cols, generator=g, device=device)
             * (0.5 + torch.rand(rows, 1, generator=g, device=device) * 2)
             + 3.0 * torch.randn(rows, 1, generator=g, device=device)).to(dt)
        dy = torch.randn(rows, cols, generator=g, device=device).to(dt)
        w = (1.0 + 0.3 * torch.randn(cols, generator=g, device=device)).to(dt)
        # the forward's saved statistics, from the bf16 x (meta tensors: shapes only)
        xf = x.float()
        mean = xf.mean(dim=1)
        rstd = torch.rsqrt(xf.var(dim=1, unbiased=False) + EPS)
        return x, dy, w, mean, rstd

    def reference(self, inputs: tuple) -> tuple:
        import torch
        x, dy, w, mean, rstd = (t.double() for t in inputs)
        xhat = (x - mean[:, None]) * rstd[:, None]
        g = dy * w
        c1 = (xhat * g).mean(dim=1, keepdim=True)
        c2 = g.mean(dim=1, keepdim=True)
        dx = (g - xhat * c1 - c2) * rstd[:, None]
        return dx.float(), torch.stack([(dy * xhat).sum(dim=0), dy.sum(dim=0)]).float()

    def alloc_output(self, problem: Problem, inputs: tuple) -> Any:
        import torch
        # one bf16 buffer: dx, then dw and db (see `bwd_parts`)
        rows, cols = inputs[0].shape
        return torch.empty(_round_up(rows * cols, 8) + 2 * cols, dtype=inputs[0].dtype, device=inputs[0].device)

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        import torch
        x, dy, w, mean, rstd = inputs
        rows, cols = x.shape
        dx, dwdb = bwd_parts(out, rows, cols)
        meta, opts = launch_options(config)
        groups, _ = self._groups(rows, meta["GROUP_SIZE_M"])
        whole = meta["BLOCK_SIZE"] >= cols
        partial = torch.empty(2, groups, cols, dtype=torch.float32, device=x.device)
        stats = partial if whole else torch.empty(rows, 2, dtype=torch.float32, device=x.device)
        layernorm_bwd_groups[(groups,)](x, dy, w, mean, rstd, dx, partial, stats, rows, cols, x.stride(0),
                                        WHOLE_ROW=whole, **meta, **opts)
        # stage 2: the group partial sums, in fp32, then rounded to bf16
        dwdb.copy_(partial.sum(dim=1))

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        import torch
        # the op autograd runs for F.layer_norm's backward, on the same saved statistics. It
        # reads the bias only to know that one exists (db = sum of dy); w stands in for it.
        x, dy, w, mean, rstd = inputs
        if x.device.type == "cpu":  # CUDA keeps bf16 rows' statistics in fp32; the CPU op wants bf16
            mean, rstd = mean.to(x.dtype), rstd.to(x.dtype)
        torch.ops.aten.native_layer_norm_backward(dy, x, [x.shape[-1]], mean[:, None], rstd[:, None], w, w,
                                                  [True, True, True])

    def check(self, out: Any, ref: Any) -> tuple[bool, float]:
        """dx and (dw, db) each within the bf16 tolerance; the error reported is the worse."""
        rows, cols = ref[0].shape
        if tuple(out.shape) != (_round_up(rows * cols, 8) + 2 * cols,):
            return False, math.inf
        errs = [_rel(o, r) for o, r in zip(bwd_parts(out, rows, cols), ref)]
        return all(e <= TOLERANCE[self.dtype] for e in errs), max(errs)

    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        rows, cols = problem.dims["rows"], problem.dims["cols"]
        ptr = f"*{self.dtype}"
        return {"x_ptr": ptr, "dy_ptr": ptr, "w_ptr": ptr, "mean_ptr": "*fp32", "rstd_ptr": "*fp32", "dx_ptr": ptr,
                "partial_ptr": "*fp32", "stats_ptr": "*fp32", "n_rows": rows, "n_cols": cols, "row_stride": cols,
                "BLOCK_SIZE": Constexpr(config["BLOCK_SIZE"]), "GROUP_SIZE_M": Constexpr(config["GROUP_SIZE_M"]),
                "WHOLE_ROW": Constexpr(config["BLOCK_SIZE"] >= cols)}
