"""Issue 24, item 6: `tune-moe` and vLLM fused-MoE tables. The vLLM JSON round-trips through a
reader written to vLLM's format; file names, the nearest-key lookup and the default config
follow vLLM's rules; routing distributions give the expert loads they promise (seeded);
each batch size is seeded with its neighbours' winners first; and an end-to-end `tune_moe`
under Triton's interpreter (injected timer) writes a table the reader loads, resumes after a
crash and refuses to mix settings."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune_kernels import INTERPRET, interpreted

from abductune import kernels
from abductune.cli import main
from abductune.errors import AbductuneError
from abductune.heuristics.vllm import import_vllm, parse_filename
from abductune.heuristics.vllm_moe import (DEFAULT_BATCH_SIZES, default_config, device_name, dtype_selector,
                                           from_vllm, lookup, nearest_key, read_table, table_file_name, to_vllm,
                                           write_table)
from abductune.kernels.zoo import moe_routing
from abductune.moe import KERNEL, MoeEntry, neighbour_seeds, plan_moe, tune_moe
from abductune.space import Choice, Pow2, Space

torch = pytest.importorskip("torch")

if INTERPRET:  # the interpreter multiplies bf16 bit patterns in tl.dot unless widened first
    from interpreter_bf16 import widen_bf16_dot

    widen_bf16_dot()

CFG = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 256, "GROUP_SIZE_M": 16, "num_warps": 8,
       "num_stages": 5}
CFG2 = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, "num_warps": 4,
        "num_stages": 3}


# ------------------------------------------------------------------------------ the file
def test_table_round_trips_through_the_reader(tmp_path: Path):
    path = tmp_path / table_file_name(8, 14336, "NVIDIA H100 80GB HBM3")
    write_table(path, {256: CFG2, 1: CFG, 24: CFG}, triton_version="3.4.0")
    text = path.read_text()
    assert text.startswith('{\n    "triton_version": "3.4.0",\n    "1": {\n        "BLOCK_SIZE_M": 16,')
    assert text.endswith("}\n")
    got = read_table(path)
    assert got == {1: CFG, 24: CFG, 256: CFG2}
    assert list(got) == [1, 24, 256]  # ascending, as written; the version key dropped
    # the package's vLLM importer (observed heuristics) reads the same file: one exact rule per batch size
    db = import_vllm([path])
    assert sorted(r.exact["M"] for r in db) == [1, 24, 256]
    assert {r.exact["N"] for r in db} == {14336}


def test_reader_refuses_what_vllm_could_not_read(tmp_path: Path):
    p = tmp_path / "E=8,N=1792,device_name=X.json"
    p.write_text(json.dumps({"16": CFG, "note": "tuned by hand"}))
    with pytest.raises(AbductuneError, match="key 'note' is not a batch size"):
        read_table(p)
    p.write_text(json.dumps({"16": [1, 2]}))
    with pytest.raises(AbductuneError, match="batch size 16 maps to"):
        read_table(p)
    p.write_text("{")
    with pytest.raises(AbductuneError, match="not valid JSON"):
        read_table(p)
    with pytest.raises(AbductuneError, match="does not exist"):
        read_table(tmp_path / "missing.json")
    with pytest.raises(AbductuneError, match="batch sizes are token counts"):
        write_table(p, {0: CFG})


@pytest.mark.parametrize("args, want", [
    ((8, 14336, "NVIDIA H100 80GB HBM3"), "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json"),
    ((8, 1792, "NVIDIA H100 80GB HBM3", dtype_selector("bf16")), "E=8,N=1792,device_name=NVIDIA_H100_80GB_HBM3.json"),
    ((60, 1408, "NVIDIA A100-SXM4-80GB", dtype_selector("fp32")),
     "E=60,N=1408,device_name=NVIDIA_A100-SXM4-80GB,dtype=float32.json"),
    ((256, 128, "NVIDIA H200 NVL", "fp8_w8a8", [128, 128]),
     "E=256,N=128,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json"),
    ((16, 512, "NVIDIA H200", "int8_w8a16", [0, 128]), "E=16,N=512,device_name=NVIDIA_H200,dtype=int8_w8a16.json"),
])
def test_file_name_follows_vllms_convention(args, want):
    name = table_file_name(*args)
    assert name == want
    info = parse_filename(name)
    assert (info["E"], info["N"], info["device_name"]) == (args[0], args[1], device_name(args[2]))


def test_device_names():
    assert device_name("NVIDIA H100 80GB HBM3") == "NVIDIA_H100_80GB_HBM3"
    assert device_name("NVIDIA H200 NVL") == "NVIDIA_H200"  # the whole H200 family shares one name
    assert device_name("NVIDIA GH200 480GB") == "NVIDIA_GH200_480GB"  # GH200 is not "H200"
    assert dtype_selector("fp16") is None and dtype_selector("bf16") is None
    with pytest.raises(AbductuneError, match="no vLLM dtype selector"):
        dtype_selector("fp64")


# ------------------------------------------------------------------------------ lookup and default
@pytest.mark.parametrize("keys, m, want", [
    ([1, 2, 4, 8, 16], 16, 16),        # exact
    ([16, 32, 64], 1, 16),             # below every key
    ([16, 32, 64], 4096, 64),          # above every key
    ([16, 32], 24, 16),                # a tie: the key met first wins
    ([32, 16], 24, 32),                # ... in the file's order, not the smaller
    ([1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512], 200, 256),
    ([1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512], 192, 128),  # 192 is as far from 128 as from 256
    ([7], 100000, 7),
])
def test_nearest_key_edge_cases(keys, m, want):
    assert nearest_key(keys, m) == want
    assert nearest_key(keys, m) == min(keys, key=lambda x: abs(x - m))  # vLLM's expression, as the oracle


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 5000), min_size=1, max_size=20, unique=True), st.integers(1, 6000))
def test_nearest_key_agrees_with_vllms_expression(keys, m):
    table = {k: {"BLOCK_SIZE_M": k} for k in keys}
    assert nearest_key(keys, m) == min(keys, key=lambda x: abs(x - m))
    assert lookup(table, m) == table[min(table, key=lambda x: abs(x - m))]


def test_nearest_key_of_an_empty_table_is_refused():
    with pytest.raises(AbductuneError, match="empty vLLM table"):
        nearest_key([], 16)


def test_default_config_rule():
    small = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}
    large = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}
    assert default_config(1, 8, 1792, 4096, 2) == small
    assert default_config(8, 8, 1792, 4096, 2) == small  # M <= E
    assert default_config(9, 8, 1792, 4096, 2) == large
    assert default_config(60, 64, 1408, 2048, 4, "float32") == small
    assert default_config(4096, 8, 1792, 4096, 2, "fp8_w8a8") == large  # per-tensor fp8: same rule
    assert default_config(4096, 256, 128, 7168, 8, "fp8_w8a8", [128, 128]) == {
        "BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, "num_warps": 4,
        "num_stages": 3}
    with pytest.raises(AbductuneError, match="not reimplemented"):
        default_config(16, 8, 1792, 4096, 2, "int4_w4a16", [0, 128])


# ------------------------------------------------------------------------------ configs by role
def _renamed_space() -> Space:
    """A MoE kernel whose parameters are named otherwise, with the roles declared."""
    return Space([Pow2("BM", 16, 128, role="tile:M"), Pow2("BN", 32, 256, role="tile:N"),
                  Pow2("BK", 32, 256, role="tile:K"), Choice("SWIZZLE", [1, 8, 16], role="group"),
                  Choice("num_warps", [4, 8]), Choice("num_stages", [2, 3, 4]), Choice("EVEN_K", [0, 1])],
                 name="renamed_moe")


def test_configs_map_to_vllm_keys_by_role():
    space = _renamed_space()
    cfg = {"num_stages": 3, "BK": 64, "EVEN_K": 1, "BM": 32, "SWIZZLE": 8, "BN": 128, "num_warps": 4}
    v = to_vllm(cfg, space)
    assert list(v) == ["BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages",
                       "EVEN_K"]  # vLLM's order, the parameter without a vLLM role after them by its name
    assert (v["BLOCK_SIZE_M"], v["GROUP_SIZE_M"], v["EVEN_K"]) == (32, 8, 1)
    assert from_vllm(v, space) == cfg
    # what vLLM's default leaves out comes from Triton's launch defaults; SPLIT_K=1 means no split
    d = from_vllm({**default_config(8, 8, 1792, 4096, 2), "SPLIT_K": 1}, space)
    assert d == {"BM": 16, "BN": 32, "BK": 64, "SWIZZLE": 1, "num_warps": 4, "num_stages": 3}
    assert list(d) == ["BM", "BN", "BK", "SWIZZLE", "num_warps", "num_stages"]  # the kernel's order
    with pytest.raises(AbductuneError, match="SPLIT_K=2 has no parameter"):
        from_vllm({**CFG, "SPLIT_K": 2}, space)


def test_zoo_kernel_maps_one_to_one():
    space = kernels.get(KERNEL).space()
    assert to_vllm(CFG2, space) == CFG2 and from_vllm(CFG2, space) == CFG2


# ------------------------------------------------------------------------------ routing
def _top2_share(w: list[float]) -> list[float]:
    """P(expert e among a token's 2 draws without replacement, each proportional to weight)."""
    p = [x / sum(w) for x in w]
    return [pe + sum(pj * pe / (1 - pj) for j, pj in enumerate(p) if j != e) for e, pe in enumerate(p)]


@pytest.mark.parametrize("routing", ["uniform", "zipf:1.2", "zipf:0.5", "loads:50,0,10,30,5,5,0,100"])
def test_routing_gives_the_expected_expert_loads(routing: str):
    m, e = 20000, 8
    ids = moe_routing.sample_topk(m, e, 2, routing, seed=3)
    assert ids.shape == (m, 2) and ids.dtype == torch.int32
    assert bool((ids[:, 0] != ids[:, 1]).all())  # two distinct experts per token
    share = (torch.bincount(ids.flatten().long(), minlength=e).double() / m).tolist()
    want = _top2_share(moe_routing.weights(routing, e))
    for got, exp in zip(share, want):
        assert got == pytest.approx(exp, abs=0.012), (routing, share, want)
    if routing.startswith("loads"):
        assert share[1] == 0 and share[6] == 0  # an expert the trace never used gets no token
    if routing.startswith("zipf"):
        assert share == sorted(share, reverse=True)  # expert 0 the hottest, then by rank


def test_routing_is_seeded():
    a = moe_routing.sample_topk(64, 8, 2, "zipf:1.2", seed=1)
    assert torch.equal(a, moe_routing.sample_topk(64, 8, 2, "zipf:1.2", seed=1))
    assert not torch.equal(a, moe_routing.sample_topk(64, 8, 2, "zipf:1.2", seed=2))
    with pytest.raises(AbductuneError, match="fewer than 2 experts"):
        moe_routing.sample_topk(4, 4, 2, "loads:0,0,9,0", seed=0)


def test_routing_strings_and_traces(tmp_path: Path):
    assert moe_routing.canonical("uniform", 8) == "uniform"
    assert moe_routing.canonical("zipf:1.20", 8) == "zipf:1.2"
    for bad, msg in (("zipf:x", "must be a number"), ("zipf:-1", ">= 0"), ("zipf", "must be a number"),
                     ("skewed", "unknown routing"), ("trace:", "name the trace file"),
                     ("loads:1,2", "loads for 2 experts")):
        with pytest.raises(AbductuneError, match=msg):
            moe_routing.canonical(bad, 8)
    (tmp_path / "counts.json").write_text(json.dumps({"counts": [5, 0, 3, 2]}))
    (tmp_path / "ids.json").write_text(json.dumps({"topk_ids": [[0, 2], [3, 0], [0, 2]]}))
    (tmp_path / "rows.json").write_text(json.dumps([[0, 2], [3, 0], [0, 2]]))
    (tmp_path / "flat.json").write_text(json.dumps([0, 2, 3, 0, 0, 2]))
    assert moe_routing.canonical("trace:counts.json", 4, base=tmp_path) == "loads:5,0,3,2"
    for f in ("ids.json", "rows.json", "flat.json"):
        assert moe_routing.canonical(f"trace:{tmp_path / f}", 4) == "loads:3,0,2,1"
    for content, msg in (({"counts": [1, 2]}, "one number per expert"), ({"expert_ids": [0, 9]}, "outside 0..3"),
                         ({"counts": [0, 0, 0, 0]}, "no expert has any load"), ({"x": 1}, "expected a JSON object"),
                         ({"counts": [1, -1, 0, 0]}, "whole numbers >= 0")):
        (tmp_path / "bad.json").write_text(json.dumps(content))
        with pytest.raises(AbductuneError, match=msg):
            moe_routing.read_trace(tmp_path / "bad.json", 4)
    with pytest.raises(AbductuneError, match="does not exist"):
        moe_routing.canonical("trace:nope.json", 4, base=tmp_path)


def test_kernel_inputs_follow_the_routing_and_keep_the_zoo_default():
    spec = kernels.get(KERNEL)
    p = spec.problem({"M": 37, "N": 40, "K": 32, "E": 5})
    # no routing in the problem: the recorded zoo routing (biased logits), identity unchanged
    x = spec.make_inputs(p, "cpu", seed=1)
    ids, pairs, start = spec.route(37, 5, 1)
    assert torch.equal(x[2], ids) and torch.equal(x[3], pairs) and torch.equal(x[4], start)
    assert "routing" not in p.dtypes
    z = moe_routing.routed(p, "zipf:1.2")
    assert z.key() != p.key() and z.key() != moe_routing.routed(p, "uniform").key()
    assert moe_routing.routed(z, None).key() == p.key()
    _, _, topk, sorted_pairs, expert_start = spec.make_inputs(z, "cpu", seed=1)
    assert torch.equal(topk, moe_routing.sample_topk(37, 5, 2, "zipf:1.2", 1))
    counts = torch.bincount(topk.flatten().long(), minlength=5)
    assert torch.equal(expert_start[1:] - expert_start[:-1], counts.to(torch.int32))
    flat = topk.flatten().long()
    for e in range(5):  # expert e's slice of the sorted pairs holds exactly its pairs
        got = sorted_pairs[expert_start[e]:expert_start[e + 1]].long()
        assert bool((flat[got] == e).all()) and got.numel() == int(counts[e])


# ------------------------------------------------------------------------------ seeding and plans
def _entry(b: int, bm: int) -> MoeEntry:
    cfg = {**CFG2, "BLOCK_SIZE_M": bm}
    return MoeEntry(b, cfg, dict(cfg), 1.0, 2.0, 4)


def test_neighbour_seeding_puts_the_nearest_winner_first():
    entries = {2: _entry(2, 16), 64: _entry(64, 64), 1024: _entry(1024, 128)}
    seeds = neighbour_seeds(48, entries)
    assert [s.source for s in seeds] == ["neighbour:M=64", "neighbour:M=2"]  # log scale: 64 is nearer than 2
    assert seeds[0].config == entries[64].config
    assert [s.source for s in neighbour_seeds(4, entries)] == ["neighbour:M=2", "neighbour:M=64"]
    assert [s.source for s in neighbour_seeds(4096, entries)] == ["neighbour:M=1024"]
    assert [s.source for s in neighbour_seeds(8, {4: _entry(4, 16), 16: _entry(16, 32)})][0] == "neighbour:M=4"
    assert neighbour_seeds(16, {}) == []


def test_plan_checks_settings_and_names_the_file(tmp_path: Path):
    plan = plan_moe(8, 3584, 4096, batch_sizes=[256, 16, 2048, 16], routing="zipf:1.2", budget=16,
                    out_dir=tmp_path, device_name="NVIDIA H100 80GB HBM3")
    assert plan.batch_sizes == [16, 256, 2048]
    assert plan.path == tmp_path / "E=8,N=1792,device_name=NVIDIA_H100_80GB_HBM3.json"
    text = "\n".join(plan.lines())
    assert "zipf:1.2" in text and "16,256,2048" in text and "N=1792" in text
    assert plan_moe(8, 4096, 1792, projection="down", device_name="x").settings["file_n"] == 1792
    assert plan_moe(8, 3584, 4096, vllm_n=7168, device_name="x").settings["file_n"] == 7168
    for kw, msg in (({"E": 1}, "fewer than the 2"), ({"N": 3585}, "N=3585 is odd"), ({"dtype": "fp16"}, "--dtype bf16"),
                    ({"batch_sizes": [0]}, "token counts >= 1"), ({"budget": 0}, "at least 1 evaluation"),
                    ({"strategy": "nope"}, "unknown strategy"), ({"kernel": "zoo_rmsnorm_bf16"}, "fused-MoE kernel")):
        args = {"E": 8, "N": 3584, "K": 4096, **kw}
        with pytest.raises(AbductuneError, match=msg):
            plan_moe(**args)
    assert list(DEFAULT_BATCH_SIZES) == plan_moe(8, 3584, 4096).batch_sizes
    with pytest.raises(AbductuneError, match="give device_name"):
        tune_moe(8, 3584, 4096, batch_sizes=[16], timer=lambda cfg, launch: 1.0)


def test_cli_dry_run_and_no_gpu(tmp_path: Path):
    from abductune.tune import gpu_available

    r = CliRunner().invoke(main, ["tune-moe", "-E", "8", "--n", "3584", "--k", "4096", "--routing", "zipf:1.2",
                                  "--out", str(tmp_path), "--device-name", "NVIDIA H100 80GB HBM3", "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "E=8,N=1792,device_name=NVIDIA_H100_80GB_HBM3.json" in r.stdout
    assert ",".join(map(str, DEFAULT_BATCH_SIZES)) in r.stdout  # the CLI's default grid is vLLM's
    assert not list(tmp_path.iterdir())  # a dry run writes nothing
    r = CliRunner().invoke(main, ["tune-moe", "-E", "8", "--n", "3584", "--k", "4096", "--routing", "zipf:x"])
    assert r.exit_code == 2 and r.stderr.startswith("error: routing 'zipf:x'")
    if not gpu_available():
        r = CliRunner().invoke(main, ["tune-moe", "-E", "8", "--n", "3584", "--k", "4096", "--out", str(tmp_path)])
        assert r.exit_code == 2
        assert r.stderr == ("error: tune-moe measures the kernel on a GPU and found none here; --dry-run prints the "
                            "plan without one\n")
        with pytest.raises(AbductuneError, match="found none here"):
            tune_moe(8, 3584, 4096, batch_sizes=[16])


# ------------------------------------------------------------------------------ end to end, interpreted
def _time(cfg: dict) -> float:
    """A deterministic kernel time: best at BLOCK_SIZE_M=32, BLOCK_SIZE_N=64, fewest stages."""
    return 1.0 + 0.1 * abs(math.log2(cfg["BLOCK_SIZE_M"] / 32)) + 0.05 * abs(math.log2(cfg["BLOCK_SIZE_N"] / 64)) \
        + 0.01 * cfg["num_stages"]


class _Recorder:
    """Injected timer and progress hook: every config timed, in order, with a marker where
    each batch size starts; raises KeyboardInterrupt at the start of `crash_at`."""

    def __init__(self, crash_at: int | None = None):
        self.seen: list = []
        self.events: list = []
        self.crash_at = crash_at

    def timer(self, cfg, launch):
        self.seen.append(dict(cfg))
        return [_time(cfg)]

    def progress(self, e):
        self.events.append((e["event"], e["batch"]))
        if e["event"] == "start":
            self.seen.append(("start", e["batch"]))
            if e["batch"] == self.crash_at:
                raise KeyboardInterrupt


GPU = "NVIDIA H100 80GB HBM3"


@interpreted
def test_tune_moe_end_to_end_writes_a_table_vllm_reads(tmp_path: Path):
    rec = _Recorder()
    table = tune_moe(4, 32, 48, batch_sizes=[8, 2, 24], routing="zipf:1.2", budget=4, out_dir=tmp_path,
                     device_name=GPU, timer=rec.timer, heuristics=False, on_progress=rec.progress)
    assert table.path == tmp_path / "E=4,N=16,device_name=NVIDIA_H100_80GB_HBM3.json"
    assert (tmp_path / ("tune-moe." + table.path.name)).exists()
    got = read_table(table.path)
    assert list(got) == [2, 8, 24]
    space = kernels.get(KERNEL).space()
    for b, e in table.entries.items():
        assert got[b] == e.vllm and from_vllm(got[b], space) == e.config
        assert e.time_ms == pytest.approx(_time(e.config))
        assert e.default_ms is not None and e.time_ms <= e.default_ms  # never slower than the kernel's default
        assert 1 <= e.evaluations <= 4
    assert rec.events == [("start", 2), ("done", 2), ("start", 8), ("done", 8), ("start", 24), ("done", 24)]
    # each batch size's first measurement is its tuned neighbour's winner
    for prev, b in ((2, 8), (8, 24)):
        i = rec.seen.index(("start", b))
        assert rec.seen[i + 1] == table.entries[prev].config
        assert table.entries[b].seeded_from == [prev]
    assert table.entries[2].seeded_from == []
    # vLLM picks from it by nearest key
    assert lookup(got, 5) == got[2] and lookup(got, 100) == got[24]


@interpreted
def test_tune_moe_resumes_after_a_crash_and_keeps_settings_apart(tmp_path: Path):
    kw = dict(routing="zipf:1.2", budget=3, out_dir=tmp_path, device_name=GPU, heuristics=False)
    crash = _Recorder(crash_at=24)
    with pytest.raises(KeyboardInterrupt):
        tune_moe(4, 32, 48, batch_sizes=[2, 8, 24], timer=crash.timer, on_progress=crash.progress, **kw)
    path = tmp_path / "E=4,N=16,device_name=NVIDIA_H100_80GB_HBM3.json"
    assert list(read_table(path)) == [2, 8]  # written after each batch size
    again = _Recorder()
    table = tune_moe(4, 32, 48, batch_sizes=[2, 8, 24], timer=again.timer, on_progress=again.progress, **kw)
    assert again.events == [("kept", 2), ("kept", 8), ("start", 24), ("done", 24)]
    assert again.seen[0] == ("start", 24)  # nothing timed for the kept batch sizes
    assert again.seen[1] == table.entries[8].config  # the kept neighbour seeds the new one
    assert list(read_table(path)) == [2, 8, 24] and table.kept == [2, 8]
    # other settings never mix into this table
    with pytest.raises(AbductuneError, match="tuned with routing=zipf:1.2, not uniform"):
        tune_moe(4, 32, 48, batch_sizes=[2], timer=again.timer, **{**kw, "routing": "uniform"})
    dry = plan_moe(4, 32, 48, batch_sizes=[2, 8, 24, 48], routing="zipf:1.2", out_dir=tmp_path, device_name=GPU)
    assert dry.kept == [2, 8, 24] and any(line.startswith("kept ") for line in dry.lines())
    # --fresh starts over: only what it tunes now is in the table
    fresh = tune_moe(4, 32, 48, batch_sizes=[8], timer=again.timer, fresh=True, **{**kw, "routing": "uniform",
                                                                                    "budget": 1})
    assert list(read_table(path)) == [8] and fresh.settings["routing"] == "uniform"
    # a table tune-moe did not write is not overwritten
    other = tmp_path / "other"
    other.mkdir()
    (other / path.name).write_text(json.dumps({"16": CFG}))
    with pytest.raises(AbductuneError, match="was not written by tune-moe"):
        tune_moe(4, 32, 48, batch_sizes=[2], timer=again.timer, **{**kw, "out_dir": other})


@interpreted
def test_tune_moe_says_why_when_no_config_runs(tmp_path: Path):
    def broken(cfg, launch):
        raise RuntimeError("launch failed: too many resources requested")
    with pytest.raises(AbductuneError, match=r"no config of zoo_moe_gemm_bf16 ran correctly at M=2 \(2 tried: "
                                             r"runtime_error: RuntimeError: launch failed"):
        tune_moe(4, 32, 48, batch_sizes=[2], budget=2, out_dir=tmp_path, device_name=GPU, timer=broken,
                 heuristics=False)
    assert not list(tmp_path.glob("E=*.json"))  # nothing written for a batch size that found nothing
