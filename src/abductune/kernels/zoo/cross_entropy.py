"""Per-row cross-entropy over a large vocabulary: loss[r] = logsumexp(logits[r, :]) - logits[r, t[r]].

The LM-head loss of a training step: logits (rows, vocab) in bf16, int64 targets (rows,), one
fp32 loss per row (reduction "none"; rows whose target is IGNORE_INDEX get 0, as in PyTorch).
One program owns one row and streams it once in chunks of BLOCK_SIZE columns, keeping a running
maximum and a running sum of exponentials that is rescaled whenever the maximum grows (the
online normaliser of Milakov & Gimelshein, "Online normalizer calculation for softmax", 2018).
The arithmetic is done in base 2 (logits pre-multiplied by log2(e), exp2/log2) and converted
back to nats at the end. The target logit is read with one scalar load, not picked out of the
chunks. No gradient is produced.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import triton
import triton.language as tl

from ...hardware import HardwareInfo
from ...problem import Problem
from ...space import Choice, Pow2, Space
from ..base import Constexpr, KernelSpec, launch_options, torch_dtype

if TYPE_CHECKING:
    import torch

IGNORE_INDEX = -100


@triton.jit
def ce_loss_rows(logits_ptr, target_ptr, loss_ptr, vocab, row_stride, ignore_index,
                 BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    row_start = logits_ptr + row.to(tl.int64) * row_stride
    lane = tl.arange(0, BLOCK_SIZE)

    # running maximum (log2 units) and the sum of 2^(z - maximum) seen so far
    hi = tl.max(tl.full((BLOCK_SIZE,), -float("inf"), tl.float32), axis=0)
    acc = tl.sum(tl.zeros((BLOCK_SIZE,), tl.float32), axis=0)
    for off in range(0, vocab, BLOCK_SIZE):
        idx = off + lane
        z = tl.load(row_start + idx, mask=idx < vocab, other=-float("inf")).to(tl.float32) * 1.4426950408889634
        hi_next = tl.maximum(hi, tl.max(z, axis=0))
        acc = acc * tl.exp2(hi - hi_next) + tl.sum(tl.exp2(z - hi_next), axis=0)
        hi = hi_next
    lse = (hi + tl.log2(acc)) * 0.6931471805599453

    tgt = tl.load(target_ptr + row)
    skip = tgt == ignore_index
    picked = tl.load(row_start + tl.where(skip, 0, tgt)).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(skip, 0.0, lse - picked))


class CrossEntropyBf16(KernelSpec):
    origin = ("abductune zoo (ours), after the online softmax normaliser (Milakov & Gimelshein 2018) "
              "applied to the fused LM-head cross-entropy loss")
    kernel_class = "row_reduction"
    dims = ("rows", "cols")  # cols = vocabulary size
    dtype = "bf16"
    TOLERANCE = 1e-3  # fp32 math on both sides; a wrong chunk or target is off by O(1)

    def __init__(self) -> None:
        self.name = "zoo_cross_entropy_bf16"

    @property
    def triton_fn(self) -> Any:
        return ce_loss_rows

    def space(self) -> Space:
        return Space(
            [Pow2("BLOCK_SIZE", 256, 32768, default=4096), Pow2("num_warps", 1, 16, default=8),
             Choice("num_stages", [1, 2, 3, 4], default=2)],
            constraints=[
                "BLOCK_SIZE >= 32 * num_warps",  # no thread without an element of the chunk
                "BLOCK_SIZE <= 64 * 32 * num_warps",  # at most 64 fp32 logits per thread
            ],
            name=self.name)

    def fixed_configs(self) -> list[dict]:
        rows = [(1024, 4, 1), (2048, 4, 2), (2048, 8, 1), (4096, 8, 2), (4096, 16, 1), (8192, 8, 3),
                (8192, 16, 2), (16384, 16, 2)]
        return [{"BLOCK_SIZE": b, "num_warps": w, "num_stages": s} for b, w, s in rows]

    def default_config(self) -> dict:
        return {"BLOCK_SIZE": 4096, "num_warps": 8, "num_stages": 2}

    def suite_shapes(self) -> list[dict[str, int]]:
        # training micro-batches of tokens against Llama-2 (32000), Llama-3 (128256) and Qwen2
        # (151936) vocabularies; 2731 rows is a ragged final micro-batch
        return [{"rows": 8192, "cols": 32000}, {"rows": 4096, "cols": 128256},
                {"rows": 8192, "cols": 128256}, {"rows": 1024, "cols": 151936},
                {"rows": 2731, "cols": 151936}]

    def problem(self, dims: dict[str, int], hardware: HardwareInfo | None = None) -> Problem:
        d = self._check_dims(dims)
        rows, vocab = d["rows"], d["cols"]
        # scale, max, subtract, exp2, add per logit: ~5 flops
        return Problem(kernel=self.name, kernel_class=self.kernel_class, dims=d,
                       dtypes={"logits": self.dtype, "target": "int64", "loss": "fp32"},
                       flops=5.0 * rows * vocab, min_bytes=2.0 * rows * vocab + 8.0 * rows + 4.0 * rows,
                       hardware=hardware, source_hash=self.source_hash)

    def make_inputs(self, problem: Problem, device: str = "cuda", seed: int = 0) -> tuple:
        import torch
        rows, vocab = problem.dims["rows"], problem.dims["cols"]
        g = self._generator(device, seed)
        # logits with a spread of a few nats, as an LM head gives; every 16th row is padding
        logits = (3.0 * torch.randn(rows, vocab, generator=g, device=device)).to(torch_dtype(self.dtype))
        target = torch.randint(0, vocab, (rows,), generator=g, device=device, dtype=torch.int64)
        target[::16] = IGNORE_INDEX
        return logits, target

    def reference(self, inputs: tuple) -> torch.Tensor:
        import torch
        logits, target = inputs
        return torch.nn.functional.cross_entropy(logits.double(), target, reduction="none",
                                                 ignore_index=IGNORE_INDEX).float()

    def alloc_output(self, problem: Problem, inputs: tuple) -> torch.Tensor:
        import torch
        return torch.empty(inputs[0].shape[0], dtype=torch.float32, device=inputs[0].device)

    def launch(self, config: dict, inputs: tuple, out: Any) -> None:
        logits, target = inputs
        rows, vocab = logits.shape
        meta, opts = launch_options(config)
        ce_loss_rows[(rows,)](logits, target, out, vocab, logits.stride(0), IGNORE_INDEX, **meta, **opts)

    def torch_baseline(self, inputs: tuple, out: Any) -> None:
        import torch
        # what a training loop writes: the logits upcast to fp32 (as Hugging Face models do
        # before the loss), then PyTorch's cross-entropy without reduction
        logits, target = inputs
        torch.nn.functional.cross_entropy(logits.float(), target, reduction="none", ignore_index=IGNORE_INDEX)

    def check(self, out: Any, ref: Any) -> tuple[bool, float]:
        import torch
        if tuple(out.shape) != tuple(ref.shape) or out.dtype != torch.float32:
            return False, math.inf
        o, r = out.double(), ref.double()
        if not bool(torch.isfinite(o).all()):
            return False, math.inf
        denom = float(torch.linalg.vector_norm(r))
        num = float(torch.linalg.vector_norm(o - r))
        rel = num / denom if denom > 0 else num
        return rel <= self.TOLERANCE, rel

    def kernel_args(self, config: dict, problem: Problem) -> dict[str, Any]:
        vocab = problem.dims["cols"]
        return {"logits_ptr": f"*{self.dtype}", "target_ptr": "*i64", "loss_ptr": "*fp32", "vocab": vocab,
                "row_stride": vocab, "ignore_index": IGNORE_INDEX,
                "BLOCK_SIZE": Constexpr(config["BLOCK_SIZE"])}
