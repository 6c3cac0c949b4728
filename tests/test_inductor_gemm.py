"""abductune's picks for Inductor's Triton matmul template (integrations/inductor_gemm.py, the
picks, no torch; integrations/inductor_templates.py, the seam), on a CPU.

The picks are the shipped ranker's, read for an H100; the seam is driven through Inductor's own
heuristic classes and lowerings table, and a small matmul compiled on the CPU goes through the
wrapped lowering end to end (the Triton template itself needs a GPU: it is measured on one,
docs/INDUCTOR.md).
"""
from __future__ import annotations

import types

import pytest

from abductune.errors import AbductuneError
from abductune.hardware import lookup
from abductune.integrations import inductor_gemm as G
from abductune.problem import Problem
from abductune.theory.resources import trouble

H100 = lookup("H100-SXM")
DECODE = (32, 4096, 4096)  # a decode step's projection: 32 rows
SQUARE = (4096, 4096, 4096)


# ----------------------------------------------------------------------------- the picks (no torch)

@pytest.mark.parametrize("mnk", [DECODE, (32, 14336, 4096), (1, 4096, 14336), SQUARE, (2048, 1024, 4096)])
def test_picks_are_distinct_tiles_inductor_compiles_as_they_are_and_that_fit(mnk):
    picks = G.pick(*mnk, "bf16", H100, 4)
    assert 1 <= len(picks) <= 4
    tiles = [(c["BLOCK_M"], c["BLOCK_N"]) for c in picks]
    assert len(set(tiles)) == len(tiles)
    problem = G.problem(*mnk, "bf16", H100)
    for c in picks:
        assert set(c) == set(G.NAMES) and G.SPACE.is_valid(c)
        assert G.as_compiled(c, *mnk)
        assert trouble(problem, G.SPACE, c) is None
    assert G.pick(*mnk, "bf16", H100, 4) == picks  # the same answer again (and from the cache)
    assert G.pick(*mnk, "bf16", H100, 2) == picks[:2]


def test_a_decode_matmul_is_tiled_for_its_rows():
    # 32 rows: Inductor cuts a larger M tile to 32 anyway; the picks never waste one on padding
    for c in G.pick(*DECODE, "bf16", H100, 4):
        assert c["BLOCK_M"] <= 32


def test_as_compiled_mirrors_inductors_scaling():
    c = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4, "num_stages": 3}
    assert G.as_compiled(c, 64, 64, 64)
    assert not G.as_compiled(c, 32, 64, 64)  # Inductor would cut BLOCK_M to 32
    assert not G.as_compiled(c, 64, 64, 16)  # and BLOCK_K to 16
    assert G.as_compiled({**c, "BLOCK_M": 16}, 3, 64, 64)  # 16 is Inductor's floor
    assert not G.as_compiled({**c, "BLOCK_M": 16, "BLOCK_N": 32, "num_warps": 4}, 16, 64, 64)  # 512 / 256 = 2 warps


def test_memory_bound_is_read_off_the_roofline():
    assert G.memory_bound(*DECODE, "bf16", H100)
    assert not G.memory_bound(*SQUARE, "bf16", H100)
    assert not G.memory_bound(*DECODE, "bf16", None)  # no roofline: not judged memory-bound
    # the ridge point moves with the GPU: with 8 times the bandwidth, 256 rows are compute-bound
    import dataclasses

    fast = dataclasses.replace(H100, mem_bandwidth=H100.mem_bandwidth * 8)
    m, n, k = 256, 4096, 4096
    assert G.memory_bound(m, n, k, "bf16", H100) and not G.memory_bound(m, n, k, "bf16", fast)


def test_a_pick_needs_a_matmul_and_a_known_gpu():
    with pytest.raises(AbductuneError, match="nothing to tile"):
        G.pick(0, 4096, 4096, "bf16", H100)
    unknown = Problem("x", "matmul", {"M": 1}, hardware=None)
    with pytest.raises(AbductuneError, match="cannot rank"):
        G.pick(32, 4096, 4096, "bf16", unknown.hardware)


def test_sizes_from_inductor():
    sympy = pytest.importorskip("sympy")
    assert G.as_int(sympy.Integer(32)) == 32 and G.as_int(7) == 7
    assert G.as_int(sympy.Symbol("s0")) is None and G.as_int(0) is None and G.as_int("x") is None


def _pick(bm, bn, bk, warps=4, stages=4):
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "num_warps": warps, "num_stages": stages}


def test_the_store_keeps_what_inductors_timing_chose(tmp_path):
    from abductune.store import Store

    tc = "toolchain-a"
    with Store(tmp_path / "s.sqlite") as st:
        assert G.verdict(st, tc, *DECODE, "bf16", H100, 4) is None
        got = G.record(st, tc, *DECODE, "bf16", H100, 4,
                       [(_pick(32, 64, 128), 0.031), (_pick(16, 128, 64), 0.027), (_pick(64, 256, 64), float("inf"))],
                       aten_ms=0.040)
        assert got == {"won": "template", "config": _pick(16, 128, 64)}
        assert G.verdict(st, tc, *DECODE, "bf16", H100, 4) == got
        assert G.verdict(st, tc, *DECODE, "bf16", H100, 3) == got  # fewer picks asked: answered
        assert G.verdict(st, tc, *DECODE, "bf16", H100, 8) is None  # more asked: timed again
        assert G.verdict(st, "toolchain-b", *DECODE, "bf16", H100, 4) is None  # another Triton: timed again
        assert G.verdict(st, tc, *DECODE, "bf16", H100, 4, judge="cuda_graph") is None  # timed another way
        assert G.verdict(st, tc, 64, 4096, 4096, "bf16", H100, 4) is None  # another shape
        failed = [m for m in st.latest(G._context(*DECODE, "bf16", H100, tc)) if not m.ok]
        assert len(failed) == 1 and failed[0].config["BLOCK_N"] == 256  # the failure is kept as one
        # a later timing where ATen won is the answer from then on
        assert G.record(st, tc, *DECODE, "bf16", H100, 4, [(_pick(16, 128, 64), 0.027)], 0.025)["won"] == "aten"
        assert G.verdict(st, tc, *DECODE, "bf16", H100, 4) == {"won": "aten", "config": None}
        # every pick failed: ATen, whatever its time
        assert G.record(st, tc, 32, 1024, 1024, "bf16", H100, 4, [(_pick(16, 64, 64), float("nan"))],
                        0.5) == {"won": "aten", "config": None}
        # `explain` says what Inductor's timing chose, and names no winner where ATen won
        from click.testing import CliRunner

        from abductune.cli import main

        aten_run = st.runs()[-1].id
        out = CliRunner().invoke(main, ["explain", str(aten_run), "--store", str(tmp_path / "s.sqlite")]).output
        assert "ATen 500 µs, fastest template config -: ATen won" in out and "winner #" not in out
        # ATen not timed beside the picks: no verdict (nothing says the template beats it)
        G.record(st, tc, 32, 2048, 1024, "bf16", H100, 4, [(_pick(16, 64, 64), 0.01)], None)
        assert G.verdict(st, tc, 32, 2048, 1024, "bf16", H100, 4) is None


# ----------------------------------------------------------------------------- the seam (torch)

torch = pytest.importorskip("torch", reason="the seam hooks Inductor")
pytest.importorskip("triton", reason="Inductor's template heuristics import triton")

from abductune.integrations import inductor  # noqa: E402
from abductune.integrations import inductor_templates as T  # noqa: E402

if not inductor.SUPPORTED[0] <= inductor.torch_version(torch.__version__) <= inductor.SUPPORTED[1]:
    pytest.skip(f"torch {torch.__version__} is outside the versions abductune.inductor supports",
                allow_module_level=True)

from torch._inductor import config as iconfig  # noqa: E402
from torch._inductor.lowering import lowerings  # noqa: E402
from torch._inductor.template_heuristics import triton as tt  # noqa: E402

aten = torch.ops.aten


@pytest.fixture(autouse=True)
def on_an_h100(monkeypatch):
    """The seam reads the GPU it runs on; these tests say it is an H100, and the CPU matmuls
    they compile are judged as if they ran on it."""
    monkeypatch.setattr(T, "_hardware", lambda: H100)
    monkeypatch.setattr(T, "_ON_ANY_DEVICE", True)


def _table():
    return {k: v for k, v in lowerings.items() if k in (aten.mm, aten.addmm) or
            getattr(k, "overloadpacket", None) in (aten.mm, aten.addmm)}


def _configs(heuristic, m, n, k, op="mm"):
    """What Inductor's heuristic yields for an m x n x k matmul of 16-bit inputs, as
    `_get_template_configs_impl` asks for it (needs a graph's size variables)."""
    from torch._inductor.sizevars import SizeVarAllocator
    from torch._inductor.virtualized import V

    with V.set_graph_handler(types.SimpleNamespace(sizevars=SizeVarAllocator())):
        got = heuristic.get_mm_configs()(m, n, k, dtype_size=2, op_name=op)
        return [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"], c.num_warps, c.num_stages)
                for c in got]


def test_enable_and_undo_put_the_matmul_seam_back_exactly(tmp_path):
    table, pre = _table(), tt.BaseConfigHeuristic.preprocess_mm_configs
    flags = (iconfig.max_autotune_gemm, iconfig.max_autotune_gemm_backends)
    h = inductor.enable(store=tmp_path / "s.sqlite", gemm=4)
    assert all(lowerings[k] is not v and lowerings[k]._abt_original is v for k, v in table.items())
    assert tt.BaseConfigHeuristic.preprocess_mm_configs is not pre
    assert (iconfig.max_autotune_gemm, iconfig.max_autotune_gemm_backends) == flags  # never switched globally
    inner = inductor.enable(store=tmp_path / "t.sqlite", gemm=0)  # the innermost enable's gemm counts
    assert all(lowerings[k] is v for k, v in table.items()) and tt.BaseConfigHeuristic.preprocess_mm_configs is pre
    inner.undo()
    assert all(lowerings[k] is not v for k, v in table.items())
    h.undo()
    assert all(lowerings[k] is v for k, v in table.items()) and tt.BaseConfigHeuristic.preprocess_mm_configs is pre
    with inductor.enable(store=tmp_path / "u.sqlite", gemm=0):
        assert all(lowerings[k] is v for k, v in table.items())


def test_bad_gemm_fails_before_anything_is_patched():
    table = _table()
    for bad in (-1, True, 2.5, "4"):
        with pytest.raises(AbductuneError, match="gemm must be"):
            inductor.enable(store=":memory:", gemm=bad)
    assert inductor.active() is None and all(lowerings[k] is v for k, v in table.items())


def test_inside_a_switched_lowering_the_picks_replace_inductors_list(tmp_path):
    h = tt.CUDAMMTemplateConfigHeuristic()
    theirs = _configs(h, *DECODE)
    with inductor.enable(store=tmp_path / "s.sqlite", gemm=3) as handle:
        assert _configs(h, *DECODE) == theirs  # outside a lowering the seam switched on: untouched
        assert handle.gemm == []
        with T.lowering_scope("mm", list(DECODE), "bf16"):
            ours = _configs(h, *DECODE)
    picks = G.pick(*DECODE, "bf16", H100, 3)
    assert ours == [(c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], c["num_warps"], c["num_stages"]) for c in picks]
    assert ours != theirs and len(theirs) > len(ours)
    [entry] = handle.gemm
    assert entry["decision"] == "template" and entry["picks"] == picks and entry["inductor_configs"] > 3


def test_other_templates_inside_a_switched_lowering_get_nothing(tmp_path):
    name = next((n for n in ("CUDAPersistentTMATemplateConfigHeuristic", "CUDAInt8MMTemplateConfigHeuristic")
                 if hasattr(tt, n)), None)
    if name is None:
        pytest.skip("this torch has neither a persistent-TMA nor an int8 template heuristic")
    with inductor.enable(store=tmp_path / "s.sqlite", gemm=4) as handle:
        with T.lowering_scope("mm", list(DECODE), "bf16"):
            assert _configs(getattr(tt, name)(), *DECODE) == []
    assert [e["decision"] for e in handle.gemm] == ["aten"] and name in handle.gemm[0]["why"]


def test_a_pick_that_fails_keeps_inductors_list(tmp_path, monkeypatch):
    h = tt.CUDAMMTemplateConfigHeuristic()
    theirs = _configs(h, *DECODE)

    def broken(*a, **k):
        raise AbductuneError("no ranker here")

    monkeypatch.setattr(G, "pick", broken)
    with inductor.enable(store=tmp_path / "s.sqlite", gemm=4) as handle:
        with T.lowering_scope("mm", list(DECODE), "bf16"):
            assert _configs(h, *DECODE) == theirs
    assert handle.gemm[0]["decision"] == "inductor" and "no ranker here" in handle.gemm[0]["why"]


def _compile_matmul(m, n, k, tmp_path, monkeypatch, gemm=4):
    """Compile x @ y on the CPU under enable(gemm); also what Inductor's template switch read
    in each mm lowering (a recorder put in the table under the seam's wrapper)."""
    torch._dynamo.reset()
    a = torch.randn(m, k, dtype=torch.bfloat16)
    b = torch.randn(k, n, dtype=torch.bfloat16)
    seen = []
    real = lowerings[aten.mm]

    def recorder(*args, **kwargs):
        seen.append((iconfig.max_autotune_gemm, iconfig.max_autotune_gemm_backends))
        return real(*args, **kwargs)

    for key, fn in list(lowerings.items()):
        if fn is real:
            monkeypatch.setitem(lowerings, key, recorder)
    # lowered every time: no graph from Inductor's caches
    with iconfig.patch(force_disable_caches=True), inductor.enable(store=tmp_path / "s.sqlite", gemm=gemm) as handle:
        got = torch.compile(lambda x, y: x @ y, backend="inductor")(a, b)
    torch.testing.assert_close(got, a @ b, rtol=2e-2, atol=2e-1)
    assert seen, "the mm lowering did not run"
    return handle, seen


def test_a_memory_bound_matmul_is_lowered_with_the_template_switched_on(tmp_path, monkeypatch):
    before = (iconfig.max_autotune_gemm, iconfig.max_autotune_gemm_backends)
    handle, seen = _compile_matmul(16, 256, 512, tmp_path, monkeypatch)
    assert seen == [(True, "ATEN,TRITON")]  # inside that lowering
    assert (iconfig.max_autotune_gemm, iconfig.max_autotune_gemm_backends) == before  # and only there
    assert handle.gemm == [] or all(e["M"] == 16 for e in handle.gemm)  # a CPU matmul asks no template


def test_a_compute_bound_matmul_is_lowered_as_inductor_would(tmp_path, monkeypatch):
    before = (iconfig.max_autotune_gemm, iconfig.max_autotune_gemm_backends)
    handle, seen = _compile_matmul(1024, 1024, 1024, tmp_path, monkeypatch)
    assert seen == [before]
    assert [(e["op"], e["decision"], e["why"]) for e in handle.gemm] == [("mm", "inductor", "compute-bound")]
    assert handle.summary()["matmuls"] == {"inductor": 1}


def test_without_gemm_every_matmul_is_lowered_as_inductor_would(tmp_path, monkeypatch):
    before = (iconfig.max_autotune_gemm, iconfig.max_autotune_gemm_backends)
    handle, seen = _compile_matmul(16, 256, 512, tmp_path, monkeypatch, gemm=0)
    assert seen == [before] and handle.gemm == []


def test_graphs_lowered_with_the_seam_are_kept_apart_in_inductors_graph_cache(tmp_path, monkeypatch):
    """A graph compiled without the seam, cached, is not served to a compile with it (it would
    never be lowered again), nor the reverse."""
    from torch._inductor import codecache

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    keys = []
    real = codecache.compiled_fx_graph_hash

    def spy(*args, **kwargs):
        got = real(*args, **kwargs)
        keys.append(got[0])
        return got

    monkeypatch.setattr(codecache, "compiled_fx_graph_hash", spy)
    a, b = torch.randn(16, 512, dtype=torch.bfloat16), torch.randn(512, 256, dtype=torch.bfloat16)

    def compile_once():
        torch._dynamo.reset()
        torch.compile(lambda x, y: x @ y)(a, b)

    compile_once()
    with inductor.enable(store=tmp_path / "s.sqlite", gemm=4):
        compile_once()
    compile_once()
    # the third compile is the first again (AOTAutograd's cache may answer it before any FX key)
    assert len(keys) >= 2 and keys[0] != keys[1] and all(k == keys[0] for k in keys[2:])
    assert iconfig.post_grad_custom_post_pass is None


def test_a_post_grad_pass_of_the_users_is_left_alone(tmp_path):
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class Mine(CustomGraphPass):
        def __call__(self, graph):
            return None

        def uuid(self):
            return "mine"

    mine = Mine()
    with iconfig.patch(post_grad_custom_post_pass=mine):
        with inductor.enable(store=tmp_path / "s.sqlite", gemm=4):
            assert iconfig.post_grad_custom_post_pass is mine
        assert iconfig.post_grad_custom_post_pass is mine
    with inductor.enable(store=tmp_path / "t.sqlite", gemm=4):
        assert iconfig.post_grad_custom_post_pass is not None
        assert "abductune" in iconfig.post_grad_custom_post_pass.uuid()
    assert iconfig.post_grad_custom_post_pass is None


def test_a_cpu_matmul_is_left_to_inductor(tmp_path, monkeypatch):
    monkeypatch.setattr(T, "_ON_ANY_DEVICE", False)
    before = (iconfig.max_autotune_gemm, iconfig.max_autotune_gemm_backends)
    handle, seen = _compile_matmul(16, 256, 512, tmp_path, monkeypatch)
    assert seen == [before] and handle.gemm == []


def test_the_environment_variable_sets_gemm(monkeypatch, tmp_path):
    monkeypatch.setenv("ABDUCTUNE_STORE", str(tmp_path / "s.sqlite"))
    table = _table()
    with inductor.from_env({"ABDUCTUNE_INDUCTOR": "1", "ABDUCTUNE_INDUCTOR_GEMM": "0"}) as h:
        assert h.settings.gemm == 0 and all(lowerings[k] is v for k, v in table.items())
    with inductor.from_env({"ABDUCTUNE_INDUCTOR": "1"}) as h:
        assert h.settings.gemm == G.DEFAULT_LIMIT and all(lowerings[k] is not v for k, v in table.items())
    assert all(lowerings[k] is v for k, v in table.items())
    with pytest.raises(AbductuneError, match="ABDUCTUNE_INDUCTOR_GEMM"):
        inductor.from_env({"ABDUCTUNE_INDUCTOR": "1", "ABDUCTUNE_INDUCTOR_GEMM": "four"})


def test_an_inductor_without_the_matmul_seam_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.delattr(tt, "CUDAAddMMTemplateConfigHeuristic")
    table = _table()
    with pytest.raises(inductor.InductorVersionError, match="CUDAAddMMTemplateConfigHeuristic.*gemm=0") as e:
        inductor.enable(store=tmp_path / "s.sqlite", gemm=4)
    assert "\n" not in str(e.value) and inductor.active() is None
    assert all(lowerings[k] is v for k, v in table.items())
    with inductor.enable(store=tmp_path / "t.sqlite", gemm=0):  # matmuls left to Inductor: nothing to hook
        assert all(lowerings[k] is v for k, v in table.items())


class _Node:
    """An IR node as `_sizes` reads it."""

    def __init__(self, *size, device="cuda"):
        self.size, self.device = list(size), device

    def get_size(self):
        return self.size

    def get_device(self):
        return torch.device(self.device)

    def get_dtype(self):
        return torch.bfloat16


class _Template:
    def __init__(self, c):
        self.log_info = {"tile_shape": str((c["BLOCK_M"], c["BLOCK_K"], c["BLOCK_N"])), "GROUP_M": c["GROUP_M"],
                         "num_warps": c["num_warps"], "num_stages": c["num_stages"], "backend": "Triton"}


class _Aten:
    def info_dict(self):
        return {"backend": "extern", "kernel_call_name": "extern_kernels.mm"}


def test_inductors_timings_of_a_switched_matmul_go_into_the_store(tmp_path):
    from torch._inductor import select_algorithm as sa

    m, n, k = DECODE
    nodes = [_Node(m, k), _Node(k, n)]
    fast, slow = _pick(16, 128, 64), _pick(32, 64, 128, warps=8, stages=3)
    with inductor.enable(store=tmp_path / "s.sqlite", gemm=4) as handle:
        T._feedback({_Template(fast): 0.02}, "mm", nodes)  # not a matmul the seam switched on: not kept
        assert G.verdict(handle.store, handle.toolchain, *DECODE, "bf16", H100, 4, judge=T.judge()) is None
        handle.gemm.append({"op": "mm", "M": m, "N": n, "K": k, "dtype": "bf16", "decision": "template"})
        T._PENDING[("mm", DECODE, "bf16")] = (handle, 4)
        T._feedback({_Template(slow): 0.03, _Aten(): 0.025, _Template(fast): 0.02}, "mm", nodes, [], None, {})
        assert G.verdict(handle.store, handle.toolchain, *DECODE, "bf16", H100, 4, judge=T.judge()) == \
            {"won": "template", "config": fast}
        assert G.verdict(handle.store, handle.toolchain, *DECODE, "bf16", H100, 4) is None  # judged in graphs
        assert handle.gemm[-1]["won"] == "template" and handle.gemm[-1]["aten_ms"] == 0.025
        assert handle.summary()["matmuls_won"] == {"template": 1}
        assert not T._PENDING
        # an addmm's nodes are (bias, mat1, mat2); one where ATen won
        T._PENDING[("addmm", (64, n, k), "bf16")] = (handle, 4)
        T._feedback({_Template(fast): 0.05, _Aten(): 0.04}, "addmm", [_Node(64, n), _Node(64, k), _Node(k, n)])
        assert G.verdict(handle.store, handle.toolchain, 64, n, k, "bf16", H100, 4, judge=T.judge()) == \
            {"won": "aten", "config": None}
        # a store that fails is logged, never raised into Inductor's compile
        T._PENDING[("mm", DECODE, "bf16")] = (types.SimpleNamespace(store=None, toolchain="x", gemm=[]), 4)
        T._feedback({_Template(fast): 0.02, _Aten(): 0.03}, "mm", nodes)
    assert T._feedback not in sa.get_algorithm_selector_cache().feedback_saver_fns  # gone with the seam


def test_a_stored_pick_is_lowered_alone_and_a_stored_aten_as_inductor_would(tmp_path, monkeypatch):
    before = (iconfig.max_autotune_gemm, iconfig.max_autotune_gemm_backends)
    m, n, k = 16, 256, 512
    from abductune.hardware import toolchain_key
    from abductune.store import Store

    h = tt.CUDAMMTemplateConfigHeuristic()
    pick = _pick(16, 64, 64)
    with Store(tmp_path / "s.sqlite") as st:
        G.record(st, toolchain_key(), m, n, k, "bf16", H100, 4, [(pick, 0.01)], 0.02, judge=T.judge())
    with inductor.enable(store=tmp_path / "s.sqlite", gemm=4):
        with T.lowering_scope("mm", [m, n, k], "bf16", forced=pick):
            assert _configs(h, m, n, k) == [(16, 64, 64, 4, 4)]  # the stored pick alone
    handle, seen = _compile_matmul(m, n, k, tmp_path, monkeypatch)
    # the stored pick alone (on a GPU one choice, which Inductor takes untimed); a CPU matmul has
    # no Triton template, so Inductor refuses it, and the matmul is lowered again with ATen beside
    # the picks, as if nothing were stored (a refusal must never break the compile)
    assert seen == [(True, "TRITON"), (True, "ATEN,TRITON")]
    assert [(e["decision"], e["picks"]) for e in handle.gemm] == [("store_template_refused", [pick])]
    assert "No choices" in handle.gemm[0]["why"]
    assert (iconfig.max_autotune_gemm, iconfig.max_autotune_gemm_backends) == before
    with Store(tmp_path / "s.sqlite") as st:
        G.record(st, toolchain_key(), m, n, k, "bf16", H100, 4, [(pick, 0.03)], 0.02, judge=T.judge())
    handle, seen = _compile_matmul(m, n, k, tmp_path, monkeypatch)
    assert seen == [before] and [e["decision"] for e in handle.gemm] == ["store_aten"]


def test_a_switched_lowering_waits_for_inductors_timings(tmp_path, monkeypatch):
    from torch._inductor import select_algorithm as sa

    class Pending(dict):
        def __setitem__(self, key, value):
            cache = sa.get_algorithm_selector_cache()
            waited.append((key, T._feedback in cache.feedback_saver_fns and T._in_graphs in cache.preprocessing_fns))
            super().__setitem__(key, value)

    waited: list = []
    monkeypatch.setattr(T, "_PENDING", Pending())
    handle, seen = _compile_matmul(16, 256, 512, tmp_path, monkeypatch)
    # the matmul waits for Inductor's timings with the feedback function in Inductor's selector
    # (on the CPU Inductor has one choice, ATen, and times nothing); both are gone with the seam
    assert seen == [(True, "ATEN,TRITON")] and waited == [(("mm", (16, 256, 512), "bf16"), True)]
    cache = sa.get_algorithm_selector_cache()
    assert not T._PENDING and T._feedback not in cache.feedback_saver_fns and T._in_graphs not in cache.preprocessing_fns


def test_a_switched_matmuls_choices_are_timed_from_cuda_graphs(monkeypatch):
    import inspect

    from torch._inductor.select_algorithm import AlgorithmSelectorCache

    if "benchmark_with_cudagraphs" not in inspect.signature(AlgorithmSelectorCache.__call__).parameters:
        assert T.judge() == "inductor"
        pytest.skip("this torch's Inductor cannot time a selection from CUDA graphs")
    assert T.judge() == "cuda_graph"
    def choices():
        return [types.SimpleNamespace(_benchmark_with_cudagraphs=False) for _ in range(3)]

    outside = choices()
    assert T._in_graphs(outside) == outside and not any(c._benchmark_with_cudagraphs for c in outside)
    with T.lowering_scope("mm", list(DECODE), "bf16"):
        inside = T._in_graphs(choices())
        assert len(inside) == 3 and all(c._benchmark_with_cudagraphs for c in inside)
        assert T._in_graphs([object()])  # a choice without the attribute is passed on as it is
    with T.lowering_scope("mm", list(DECODE), "bf16", forced=_pick(16, 64, 64)):  # one choice, nothing timed
        assert not any(c._benchmark_with_cudagraphs for c in T._in_graphs(choices()))
    monkeypatch.setattr(T, "judge", lambda: "inductor")  # an Inductor without it (torch 2.11): left as it is
    with T.lowering_scope("mm", list(DECODE), "bf16"):
        assert not any(c._benchmark_with_cudagraphs for c in T._in_graphs(choices()))


def test_the_profiler_judge_re_times_a_switched_matmul_and_inductor_chooses_on_it(tmp_path, monkeypatch):
    """Experimental (ABDUCTUNE_INDUCTOR_GEMM_JUDGE=profiler, for an Inductor without CUDA-graph
    timing): the feedback calls Inductor's profiler thunk and writes its kernel times into the
    dict Inductor chooses from; the verdict is kept under that judge. Without the variable the
    thunk is never called."""
    m, n, k = DECODE
    nodes = [_Node(m, k), _Node(k, n)]
    pick, aten = _Template(_pick(16, 128, 64)), _Aten()
    calls = []

    def profiled():
        calls.append(1)
        return {pick: 0.012, aten: 0.009}

    monkeypatch.setattr(T, "_graph_judge", lambda: False)
    with inductor.enable(store=tmp_path / "s.sqlite", gemm=4) as handle:
        timings = {pick: 0.025, aten: 0.045}  # eager: the template looks faster
        T._PENDING[("mm", DECODE, "bf16")] = (handle, 4)
        T._feedback(timings, "mm", nodes, [pick, aten], profiled, {})
        assert calls == [] and T.judge() == "inductor" and timings == {pick: 0.025, aten: 0.045}
        assert G.verdict(handle.store, handle.toolchain, *DECODE, "bf16", H100, 4, judge="inductor")["won"] == "template"
        monkeypatch.setenv(T.JUDGE_ENV, "profiler")
        T._PENDING[("mm", DECODE, "bf16")] = (handle, 4)
        T._feedback(timings, "mm", nodes, [pick, aten], profiled, {})
        assert calls == [1] and timings == {pick: 0.012, aten: 0.009}  # Inductor now chooses ATen
        assert G.verdict(handle.store, handle.toolchain, *DECODE, "bf16", H100, 4, judge="profiler") == \
            {"won": "aten", "config": None}
        # a thunk that fails leaves the eager times
        timings = {pick: 0.025, aten: 0.045}
        T._PENDING[("mm", DECODE, "bf16")] = (handle, 4)
        T._feedback(timings, "mm", nodes, [pick, aten], lambda: 1 / 0, {})
        assert timings == {pick: 0.025, aten: 0.045}
