"""A count the kernel's source loops over (items per program) is not raised while SMs idle.

`scope.counted_tiles` reads `for i in range(T)` as a count (not `range(0, n, T)`, a tile
walked over a dim); `diagnose.serializes_idle` says a config wastes SMs when the next smaller
count still launches no more programs than there are SMs; the ranker leaves such configs out.
"""
from __future__ import annotations

from abductune.hardware import lookup
from abductune.problem import Problem
from abductune.space import Choice, Pow2, Space
from abductune.theory.diagnose import serializes_idle
from abductune.theory.store.scope import counted_tiles

SRC = '''
def k(x_ptr, n_tokens, n_heads, BLOCK_HEADS: tl.constexpr, TOKENS_PER_PROGRAM: tl.constexpr,
      BLOCK_K: tl.constexpr):
    tok0 = tl.program_id(0) * TOKENS_PER_PROGRAM
    for i in range(TOKENS_PER_PROGRAM):
        for h0 in range(0, n_heads, BLOCK_HEADS):
            pass
    for j in tl.range(0, tl.cdiv(n_heads, BLOCK_K)):
        pass
'''


def test_counted_tiles_reads_count_loops_only():
    assert counted_tiles(SRC) == {"TOKENS_PER_PROGRAM"}
    assert counted_tiles("def k(T):\n    for i in tl.static_range(0, T):\n        pass\n") == {"T"}
    assert counted_tiles("not python (") == frozenset()


def _problem(tokens: int) -> tuple[Problem, Space]:
    space = Space([Pow2("TOKENS_PER_PROGRAM", 1, 16, default=1), Pow2("num_warps", 1, 8, default=4),
                   Choice("num_stages", [1], default=1)])
    pb = Problem(kernel="t", kernel_class="elementwise", dims={"tokens": tokens, "hidden": 4096},
                 dtypes={"x": "bf16"}, flops=float(tokens), min_bytes=4.0 * tokens * 4096,
                 hardware=lookup("H100-SXM"))
    return pb, space


def test_serializes_idle_only_while_the_smaller_count_fits_the_sms():
    pb, space = _problem(64)  # 132 SMs: 64 programs at one token each
    counted = {"TOKENS_PER_PROGRAM"}
    cfg = {"TOKENS_PER_PROGRAM": 16, "num_warps": 4, "num_stages": 1}
    assert serializes_idle(pb, space, cfg, counted) is not None
    assert serializes_idle(pb, space, {**cfg, "TOKENS_PER_PROGRAM": 1}, counted) is None
    assert serializes_idle(pb, space, cfg, set()) is None  # no source fact: nothing assumed
    big, _ = _problem(65536)  # 4,096 programs at 16 tokens: halving them cannot land on idle SMs
    assert serializes_idle(big, space, cfg, counted) is None
    # 264 tokens: 2 per program fills 132 SMs exactly; 4 per program (66) leaves half idle
    mid, _ = _problem(264)
    assert serializes_idle(mid, space, {**cfg, "TOKENS_PER_PROGRAM": 4}, counted) is not None
    assert serializes_idle(mid, space, {**cfg, "TOKENS_PER_PROGRAM": 2}, counted) is None


def test_rope_source_counts_tokens_per_program():
    from abductune.theory.store.scope import kernel_counted_tiles
    assert "TOKENS_PER_PROGRAM" in kernel_counted_tiles("zoo_rope_bf16")
    assert "BLOCK_HEADS" not in kernel_counted_tiles("zoo_rope_bf16")


def test_ranker_keeps_rope_decode_batch_on_one_token_per_program():
    # 64 tokens on 132 SMs: every config with more than one token per program leaves SMs idle
    # (recorded: 16 per program ran 3.7x to 5.8x the optimum, session 38's worst zero-shot pick)
    from abductune.datasets.format import read_dataset
    from abductune.datasets.paths import expand_dataset_args
    from abductune.heuristics.ranker_shipped import rank
    from abductune.problem import Holdout

    path = next(p for p in expand_dataset_args(["zoo:zoo_rope_bf16"]) if p.name.startswith("tokens64_"))
    ds = read_dataset(path)
    got = rank(ds.problem, ds.space(), exclude=Holdout(ds.problem, "kernel"))
    assert got.configs and all(c["TOKENS_PER_PROGRAM"] == 1 for c in got.configs[:5])
