"""Source facts in a dataset's header (issue 27, item 5): a kernel whose Triton source cannot be
read at replay time (a library's, never copied) is judged from the `reduction` facts recorded
with it (`meta.source_facts`), as the live kernel would be; `sweep --call` writes them."""
from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from abductune import kernel_facts
from abductune.datasets import format as fmt
from abductune.datasets.format import Dataset, read_dataset, write_dataset
from abductune.datasets.paths import expand_dataset_args
from abductune.heuristics.harvest import observations_from_datasets
from abductune.theory.store import TheoryBook, packaged_book, predict
from abductune.theory.store import scope

SRC = Path(__file__).resolve().parents[1] / "src"

LOOP_ROWS = '''
def k(x_ptr, n_cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.arange(0, BLOCK_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for c0 in range(0, n_cols, BLOCK_N):
        acc += tl.load(x_ptr + rows[:, None] * n_cols + c0 + tl.arange(0, BLOCK_N)[None, :])
'''


def _forget(kernel: str) -> None:
    kernel_facts.forget(kernel)


def test_the_facts_field_reads_old_new_and_malformed_headers(caplog):
    assert fmt.source_facts({}) == {}  # a file from before the field: readable, no facts
    good = fmt.make_source_facts({"BLOCK_N": "loop", "BLOCK_M": "whole", "X": "sideways"})
    assert good == {"version": 1, "reduction": {"BLOCK_M": "whole", "BLOCK_N": "loop"}}
    assert fmt.source_facts({"source_facts": good}) == {"BLOCK_M": "whole", "BLOCK_N": "loop"}
    with caplog.at_level(logging.INFO):
        assert fmt.source_facts({"source_facts": {"version": 2, "reduction": {"B": "loop"}}}, "f") == {}
        assert fmt.source_facts({"source_facts": ["loop"]}, "f") == {}
        assert fmt.source_facts({"source_facts": {"version": 1, "reduction": {"B": "up", "C": "loop"}}},
                                "f") == {"C": "loop"}
    assert "version 2" in caplog.text and "not an object" in caplog.text and "one of whole/loop/either" in caplog.text


def test_facts_are_read_from_source_per_tile_parameter():
    from theory_fixtures import row_space
    from abductune.space import Pow2, Space

    sp = Space([Pow2("BLOCK_M", 1, 8), Pow2("BLOCK_N", 128, 4096)], name="rows")
    assert scope.source_facts(LOOP_ROWS, sp) == {"BLOCK_M": scope.WHOLE, "BLOCK_N": scope.LOOP}
    assert scope.source_facts(LOOP_ROWS, row_space()) == {}  # BLOCK is not in this source: not told
    assert scope.source_facts("def k(:", sp) == {}


@pytest.fixture(scope="module")
def online():
    return observations_from_datasets(expand_dataset_args(["zoo:zoo_softmax_online_fp16"]))


def _as_theirs(o, tmp_path: Path, facts: dict | None) -> Dataset:
    """The online softmax's 4096-column shape renamed as a library kernel whose source we lack,
    written and read back (with or without facts in its header)."""
    src = read_dataset(o.source)
    pb = dataclasses.replace(src.problem, kernel="their_rows_fp16", source_hash="")
    meta = {"source_facts": fmt.make_source_facts(facts)} if facts is not None else {}
    path = tmp_path / ("with.jsonl.gz" if facts is not None else "without.jsonl.gz")
    write_dataset(Dataset(pb, src.space_dict, list(src.records), meta=meta), path)
    return read_dataset(path)


def test_replay_judges_a_loop_kernel_from_its_header_facts(online, tmp_path):
    """The whole-row rule (confirmed on kernels with a one-chunk path) on a kernel that loops
    on every path: unread, it is served with "not known"; with the header's facts it is
    declined exactly as when the live source is told (test_theory_scope)."""
    o = next(x for x in online if x.problem.dims["cols"] == 4096)
    rule = next(r for r in packaged_book() if r.kernel_class == "row_reduction" and r.regime == "square"
                and r.hardware == "H100-SXM")
    book = TheoryBook([rule])
    try:
        bare = _as_theirs(o, tmp_path, None)
        assert bare.meta == {} and scope.structure(bare.problem, bare.space()) is None
        p = book.predict(bare.problem, bare.space())
        assert p is not None and any("not known" in r for r in p.reasons)
        told = _as_theirs(o, tmp_path, {"BLOCK_N": "loop"})
        assert scope.structure(told.problem, told.space()) == scope.LOOP
        assert book.predict(told.problem, told.space()) is None
        why = book.judged(told.problem, told.space())[1][0][1]
        assert "walked in tile steps on every path" in why
        assert predict(told.problem, told.space(), book=book).source == "ranker"  # the chain's next source
        # a source, when readable, wins over the facts
        scope.note_source("their_rows_fp16", textwrap.dedent('''
            def k(x_ptr, n_cols, BLOCK_N: tl.constexpr):
                x = tl.load(x_ptr + tl.arange(0, BLOCK_N))
        '''))
        assert scope.structure(told.problem, told.space()) == scope.WHOLE
    finally:
        _forget("their_rows_fp16")
        scope._SOURCES.pop("their_rows_fp16", None)
        scope._structure_cached.cache_clear()


@pytest.mark.parametrize("kernel, tile", [("flaggems_rmsnorm_loop_bf16", "TILE_N"),
                                          ("flaggems_layernorm_loop_bf16", "TILE_N"),
                                          ("flaggems_log_softmax_bwd_bf16", "BLOCK_N")])
def test_the_zoo_library_loop_kernels_carry_their_facts(kernel, tile):
    """FlagGems' row kernels that walk the row in tiles: read as `loop` from their headers."""
    paths = expand_dataset_args([f"zoo:{kernel}"])
    ds = read_dataset(paths[0])
    assert ds.meta["source_facts"]["reduction"][tile] == scope.LOOP
    assert scope.structure(ds.problem, ds.space()) == scope.LOOP


LIBRARY = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl


    @triton.autotune(configs=[triton.Config({"BLOCK_N": 32}, num_warps=1),
                              triton.Config({"BLOCK_N": 64}, num_warps=1)], key=["n_cols"])
    @triton.jit
    def row_sum_kernel(x, out, n_cols, BLOCK_N: tl.constexpr):
        row = tl.program_id(0)
        acc = tl.zeros((BLOCK_N,), tl.float32)
        for c0 in range(0, n_cols, BLOCK_N):
            offs = c0 + tl.arange(0, BLOCK_N)
            acc += tl.load(x + row * n_cols + offs, mask=offs < n_cols, other=0.0)
        tl.store(out + row, tl.sum(acc, axis=0))


    def row_sum(x):
        out = torch.empty(x.shape[0])
        row_sum_kernel[(x.shape[0],)](x, out, x.shape[1])
        return out
''')

CALLER = textwrap.dedent('''
    import torch


    def run():
        import thirdparty
        x = torch.randn(4, 200)
        assert torch.allclose(thirdparty.row_sum(x), x.sum(1), atol=1e-4)
''')


def test_a_dataset_recorded_in_record_mode_carries_the_facts(tmp_path):
    """`sweep --call` (patch_triton's record mode, Triton's interpreter on the CPU) writes the
    facts read from the jit function's source, never the source."""
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    (tmp_path / "thirdparty.py").write_text(LIBRARY)
    (tmp_path / "caller.py").write_text(CALLER)
    env = {**os.environ, "TRITON_INTERPRET": "1", "ABDUCTUNE_STORE": str(tmp_path / "store.sqlite"),
           "PYTHONPATH": os.pathsep.join([str(SRC), str(tmp_path)])}
    r = subprocess.run([sys.executable, "-m", "abductune", "sweep", "--call", "caller:run", "--out",
                        str(tmp_path / "out")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    paths = sorted((tmp_path / "out" / "row_sum_kernel").glob("*.jsonl.gz"))
    assert paths
    try:
        ds = read_dataset(paths[0])
        # a row kernel's loop loads 1-D slices only: no 2-D tile staged per step
        assert ds.meta["source_facts"] == {"version": 1, "reduction": {"BLOCK_N": "loop"}, "loads": []}
        import gzip

        assert "tl.load" not in gzip.open(paths[0], "rt").read()  # facts only, never the source
        assert fmt.facts_read(ds.problem.kernel) == {"BLOCK_N": "loop"}
    finally:
        _forget("row_sum_kernel")


def test_the_decorator_tells_the_scope_checks_its_kernels_source():
    """Live, the decorator has the jit function: the scope checks read the kernel's loops from
    it (a rule for kernels that hold a row whole is then judged against a kernel that loops)."""
    import triton
    import triton.language as tl

    import abductune

    @triton.jit
    def scope_loop_probe_kernel(x_ptr, out_ptr, n_cols, BLOCK_N: tl.constexpr):
        row = tl.program_id(0)
        acc = tl.zeros((BLOCK_N,), tl.float32)
        for c0 in range(0, n_cols, BLOCK_N):
            acc += tl.load(x_ptr + row * n_cols + c0 + tl.arange(0, BLOCK_N))
        tl.store(out_ptr + row, tl.sum(acc))

    tuned = abductune.autotune(configs=[triton.Config({"BLOCK_N": 256})], key=["n_cols"])(scope_loop_probe_kernel)
    src = scope.kernel_source(tuned.name)
    assert src is not None and "for c0 in range(0, n_cols, BLOCK_N)" in src
    assert scope.loop_structure(src, "BLOCK_N") == scope.LOOP
    scope._SOURCES.pop(tuned.name, None)
