"""Observed-heuristics database: lookup order, buckets and fallbacks, harvest, vLLM round trip."""
from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from abductune.datasets.format import Dataset, write_dataset
from abductune.hardware import KNOWN_GPUS, HardwareInfo
from abductune.classify import classify
from abductune.cli import main
from abductune.errors import AbductuneError
from abductune.heuristics import Database, packaged_database, seed_configs
from abductune.heuristics.coverage import coverage, leave_one_out, summarize
from abductune.heuristics.harvest import (Observation, harvest, observations_from_datasets,
                                          observations_from_store)
from abductune.heuristics.observed import Rule, Template
from abductune.heuristics.vllm import export_vllm, import_vllm, parse_filename
from abductune.measurement import Measurement
from abductune.problem import Problem
from abductune.space import Choice, Pow2, Space

H100 = KNOWN_GPUS["H100-SXM"]
H200 = KNOWN_GPUS["H200"]
A100 = KNOWN_GPUS["A100-SXM"]


def small_space() -> Space:
    """A toy matmul-like space with roles: 4 x 3 x 3 = 36 configs, default (64, 64, 4)."""
    return Space([Pow2("BLOCK_M", 16, 128, default=64), Pow2("BLOCK_N", 32, 128, default=64),
                  Choice("num_warps", [2, 4, 8], default=4)], name="toy_mm")


def mm(m, n=4096, k=4096, hw=H100, dtype="fp16", kernel="toy_mm"):
    return Problem(kernel, "matmul", {"M": m, "N": n, "K": k}, {"a": dtype, "b": dtype}, hardware=hw)


def synth_times(space: Space, best: dict, scale: float = 1.0) -> dict[tuple, float]:
    """Time = 1 + distance (in steps) from `best`: `best` is the unique optimum."""
    out = {}
    for c in space.valid_configs():
        d = sum(abs(space[n].index(c[n]) - space[n].index(best[n])) for n in space.names)
        out[space.key(c)] = scale * (1.0 + 0.25 * d)
    return out


def obs(name, problem, best, space=None, **kw) -> Observation:
    sp = space or small_space()
    return Observation(name, problem, sp, synth_times(sp, best, **kw), sp.default())


# ----------------------------------------------------------------------------- lookup

def rule(bucket, cfg, hw="H100-SXM", fam="fp16", kclass="matmul", **kw) -> Rule:
    return Rule(kernel_class=kclass, bucket=bucket, dtype_family=fam, hardware=hw,
                templates=[Template(cfg, wins=1, shapes=1)], **kw)


def test_lookup_prefers_bucket_then_fallback_then_wider_hardware():
    sp = small_space()
    p = mm(16)  # bucket K=4096,M=16,N=4096 ; fallback small_m
    db = Database([rule("fallback:small_m", {"@tile:N": 32}),
                   rule("fallback:small_m", {"@tile:N": 128}, hw="*"),
                   rule("K=4096,M=16,N=4096", {"@warps": 2}, hw="family:nvidia/hopper")])
    hit = db.lookup(p, sp)
    assert hit.level == "H100-SXM/fallback" and hit.config["BLOCK_N"] == 32
    db.add(rule("K=4096,M=16,N=4096", {"@tile:M": 16, "@warps": 8}))
    hit = db.lookup(p, sp)
    assert hit.level == "H100-SXM/bucket" and hit.config == {"BLOCK_M": 16, "BLOCK_N": 64, "num_warps": 8}
    # an H200 has no rule of its own: the Hopper family rule answers, then "*"
    hit = db.lookup(mm(16, hw=H200), sp)
    assert hit.level == "family:nvidia/hopper/bucket" and hit.config["num_warps"] == 2
    assert db.lookup(mm(16, hw=A100), sp).level == "*/fallback"
    assert db.lookup(mm(16, hw=A100), sp).config["BLOCK_N"] == 128
    # a bucket the database does not know falls back to the category
    assert db.lookup(mm(17), sp).level == "H100-SXM/fallback"  # 17 -> bucket 64
    assert db.lookup(mm(4096), sp) is None  # balanced: no rule anywhere
    # unknown hardware: only "*" rules
    assert db.lookup(mm(16, hw=None), sp).level == "*/fallback"


def test_lookup_dtype_family_scope_and_inapplicable_templates():
    sp = small_space()
    db = Database([rule("fallback:small_m", {"@tile:N": 32}, fam="any"),
                   rule("fallback:small_m", {"@tile:N": 128}, fam="fp32")])
    assert db.lookup(mm(16, dtype="fp32"), sp).config["BLOCK_N"] == 128
    assert db.lookup(mm(16, dtype="bf16"), sp).config["BLOCK_N"] == 32  # "any" after fp16
    # a names-scoped rule applies only to spaces with exactly those names
    raw = Space([Choice("bsx", [16, 32, 64]), Choice("tsx", [1, 2])])
    db.add(rule("fallback:small_m", {"bsx": 64}, scope="names:bsx,tsx"))
    assert db.lookup(mm(16), raw).config == {"bsx": 64, "tsx": 1}
    assert db.lookup(mm(16), sp).config["BLOCK_N"] == 32
    # a template naming unknown parameters is skipped for the next one
    r = rule("K=4096,M=16,N=4096", {"NOPE": 1})
    r.templates.append(Template({"@tile:N": 128}, wins=0, shapes=1))
    db.add(r)
    hit = db.lookup(mm(16), sp)
    assert hit.template.config == {"@tile:N": 128} and hit.config["BLOCK_N"] == 128
    # the lookup clamps like a heuristic seed: M = 16 caps BLOCK_M at 16
    db.add(rule("K=4096,M=16,N=4096", {"@tile:M": 128, "@tile:N": 128}))
    assert db.lookup(mm(16), sp).config["BLOCK_M"] == 16


def test_observed_seed_comes_first_in_seed_configs():
    sp = small_space()
    db = Database([rule("fallback:small_m", {"@tile:M": 32, "@warps": 2})])
    rep = seed_configs(mm(64), sp, database=db)
    assert rep.configs[0] == {"BLOCK_M": 32, "BLOCK_N": 64, "num_warps": 2}
    assert rep.fired[0]["name"] == "observed" and rep.fired[0]["status"] == "seed"
    assert rep.fired[0]["rule"]["bucket"] == "fallback:small_m"
    rep = seed_configs(mm(4096), sp, database=db)
    assert rep.fired[0]["status"] == "noop"
    json.dumps(rep.fired)


def test_database_save_load_round_trip(tmp_path):
    db = Database([rule("fallback:small_m", {"@tile:M": 32}),
                   rule("K=4096,M=16,N=4096", {"bsx": 64}, hw="*", scope="names:bsx"),
                   rule("vllm:E=8,N=14336,M=1", {"@tile:M": 16}, exact={"E": 8, "N": 14336, "M": 1})])
    f = tmp_path / "db.json"
    db.save(f)
    assert Database.load(f).to_dict() == db.to_dict()
    files = db.save(tmp_path / "dir")
    assert sorted(p.name for p in files) == ["any.json", "h100-sxm.json"]
    assert Database.load(tmp_path / "dir").to_dict() == db.to_dict()
    with pytest.raises(Exception, match="not an observed-heuristics database"):
        Database.from_dict({"format": "nope"})


# ----------------------------------------------------------------------------- harvest

def test_harvest_gives_the_expected_rules():
    # two decode shapes that want (16, 128, 8), one that wants the default: the bucket rules
    # of the first two keep their optimum; the third shape's bucket gives no rule (margin).
    a = obs("m16", mm(16), {"BLOCK_M": 16, "BLOCK_N": 128, "num_warps": 8})
    b = obs("m4", mm(4), {"BLOCK_M": 16, "BLOCK_N": 128, "num_warps": 8})
    c = obs("m64", mm(64), {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4})  # = the default
    res = harvest([a, b, c], margin=0.05, levels=("name",))
    db = res.database
    by_bucket = {r.bucket: r for r in db}
    assert set(by_bucket) == {"K=4096,M=16,N=4096", "K=4096,M=4,N=4096", "fallback:small_m"}
    r = by_bucket["K=4096,M=16,N=4096"]
    assert r.hardware == "H100-SXM" and r.kernel_class == "matmul" and r.dtype_family == "fp16"
    t = r.templates[0]
    assert t.config == {"@tile:M": 16, "@tile:N": 128, "@warps": 8}
    assert t.wins == 1 and t.coverage == 1.0 and t.geomean_slowdown == 1.0
    # the default (64, 64, 4) is 1 + 0.25 * (2 + 1 + 1) = 2x the optimum
    assert t.vs_default == pytest.approx(0.5)
    assert all(tt.vs_default <= 0.95 for tt in r.templates) and len(r.templates) <= 3
    # the fallback over all three shapes: BLOCK_M 32 is capped to 16 at M = 4 and 16, where it
    # is optimal, and is nearer the optimum at M = 64 (1.75x) than BLOCK_M 16 would be (2x)
    fb = by_bucket["fallback:small_m"].templates[0]
    assert fb.config == {"@tile:M": 32, "@tile:N": 128, "@warps": 8} and fb.wins == 2 and fb.shapes == 3
    assert fb.geomean_slowdown == pytest.approx(1.75 ** (1 / 3))
    assert fb.p90_slowdown == pytest.approx(1.6)
    dropped = [g for g in res.groups if not g.kept]
    assert [g.key["bucket"] for g in dropped] == ["K=4096,M=64,N=4096"]
    assert "default" in dropped[0].reason
    # coverage: two shapes with a bucket rule, one answered by the fallback
    checks = coverage(db, [a, b, c])
    assert [ch.kind for ch in checks] == ["bucket", "bucket", "fallback"]
    assert checks[0].seed_ratio == 1.0 and checks[2].seed_ratio == pytest.approx(1.75)
    (row,) = summarize(checks)
    assert row["bucket_rule"] == pytest.approx(2 / 3) and row["fallback_rule"] == pytest.approx(1 / 3)


def test_harvest_hardware_levels():
    a = obs("m64", mm(64), {"BLOCK_M": 32, "BLOCK_N": 64, "num_warps": 4})
    assert {r.hardware for r in harvest([a]).database} == {"H100-SXM", "family:nvidia/hopper", "*"}
    assert {r.hardware for r in harvest([a], levels=("any",)).database} == {"*"}
    unknown = obs("m64", mm(64, hw=HardwareInfo(name="Mystery")), {"BLOCK_M": 32, "BLOCK_N": 64, "num_warps": 4})
    assert {r.hardware for r in harvest([unknown]).database} == {"Mystery", "*"}  # no family


def test_harvest_margin_is_enforced():
    a = obs("m64", mm(64), {"BLOCK_M": 32, "BLOCK_N": 64, "num_warps": 4})
    # the optimum is 0.8x the default's time
    assert harvest([a], margin=0.19).rules_added == 6
    res = harvest([a], margin=0.21)
    assert res.rules_added == 0 and len(res.database) == 0
    assert all("0.800x" in g.reason for g in res.groups)


def test_leave_one_out_uses_the_other_shapes():
    best = {"BLOCK_M": 16, "BLOCK_N": 128, "num_warps": 8}
    shapes = [obs(f"m{m}", mm(m), best) for m in (1, 4, 16)]
    shapes.append(obs("m4096", mm(4096), {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8}))
    checks = leave_one_out(shapes, levels=("name",))
    by = {c.name: c for c in checks}
    # held out, M=4 is answered by the small_m fallback harvested from M=1 and M=16
    assert by["m4"].kind == "fallback" and by["m4"].seed_ratio == 1.0
    # M=1 and M=16 share no bucket with anything else either, so the fallback answers
    assert by["m1"].kind == "fallback" and by["m16"].seed_ratio == 1.0
    # the balanced shape has no other balanced shape to learn from
    assert by["m4096"].kind == "none" and by["m4096"].seed_ratio is None
    assert by["m4096"].default_ratio == pytest.approx(1.0 + 0.25 * 3)


def test_harvest_from_datasets_and_store(tmp_path):
    from abductune.store import Context, Store

    sp = small_space()
    p = mm(16)
    times = synth_times(sp, {"BLOCK_M": 16, "BLOCK_N": 128, "num_warps": 8})
    recs = [Measurement(sp.from_key(k), time_ms=t) for k, t in times.items()]
    recs[5] = Measurement(recs[5].config, status="compile_error")
    ds = Dataset(p, sp.to_dict(), recs, meta={"default_config": sp.default()})
    path = tmp_path / "toy_mm" / "M16.jsonl.gz"
    path.parent.mkdir()
    write_dataset(ds, path)
    (o,) = observations_from_datasets([path])
    assert o.optimum == 1.0 and math.isinf(o.times[sp.key(recs[5].config)])
    assert harvest([o]).rules_added == 6
    with Store(":memory:") as store:
        store.put_many(Context.of(p, sp), recs)
        (so,) = observations_from_store(store, spaces={"toy_mm": sp})
        assert so.times == o.times and so.default == sp.default()
        db = harvest([so], levels=("name",)).database
    assert db.lookup(p, sp).config == {"BLOCK_M": 16, "BLOCK_N": 128, "num_warps": 8}


def test_harvest_public_style_raw_names():
    raw = Space([Choice("block_size_x", [16, 32, 64]), Choice("tile_size_x", [1, 2, 4])])
    gpus = [HardwareInfo(name=f"gpu{i}", vendor="nvidia") for i in range(3)]
    ob = [Observation(f"conv@{g.name}", Problem("conv", "convolution", {"x": 4096, "y": 4096}, {}, hardware=g),
                      raw, synth_times(raw, {"block_size_x": 64, "tile_size_x": 2}), raw.default())
          for g in gpus]
    checks = leave_one_out(ob)  # one shape per GPU: leaving one out leaves the others' "*" rules
    assert all(c.level == "*/bucket" and c.seed_ratio == 1.0 for c in checks)
    (r, *_) = [r for r in harvest(ob).database if r.hardware == "*" and not r.is_fallback]
    assert r.scope == "names:block_size_x,tile_size_x" and r.dtype_family == "any"
    assert r.templates[0].config == {"block_size_x": 64, "tile_size_x": 2}


# ----------------------------------------------------------------------------- vLLM

VLLM_H100 = {
    "triton_version": "3.4.0",
    "1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 256, "GROUP_SIZE_M": 16,
          "num_warps": 8, "num_stages": 5},
    "2": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 64,
          "num_warps": 4, "num_stages": 3},
    "64": {"num_warps": 8, "BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128,
           "GROUP_SIZE_M": 1, "num_stages": 4},
    "1024": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 64,
             "num_warps": 8, "num_stages": 4, "waves_per_eu": 0},
}


def write_vllm(tmp_path):
    d = tmp_path / "vllm_in"
    d.mkdir()
    a = d / "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json"
    a.write_text(json.dumps(VLLM_H100, indent=4) + "\n")
    b = d / "E=256,N=128,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json"
    b.write_text(json.dumps({"16": VLLM_H100["1"]}, indent=4) + "\n")
    return d, a, b


def test_vllm_round_trip_preserves_configs(tmp_path):
    d, a, b = write_vllm(tmp_path)
    db = import_vllm([d])
    assert len(db) == 5
    r = next(r for r in db if r.exact == {"E": 8, "N": 14336, "M": 1})
    assert r.hardware == "H100-SXM" and r.kernel_class == "matmul" and r.variant == "moe"
    assert r.templates[0].config["@tile:K"] == 256
    q = next(r for r in db if r.exact["E"] == 256)
    assert (q.kernel_class, q.variant, q.dtype_family, q.hardware) == ("matmul", "moe", "fp8", "H200")
    # through a database file and back
    db.save(tmp_path / "db.json")
    out = export_vllm(Database.load(tmp_path / "db.json"), tmp_path / "vllm_out")
    assert sorted(p.name for p in out) == sorted([a.name, b.name])
    for src in (a, b):
        got = (tmp_path / "vllm_out" / src.name).read_text()
        assert json.loads(got) == json.loads(src.read_text())
        assert list(json.loads(got)) == list(json.loads(src.read_text()))  # key order too
        for k, v in json.loads(src.read_text()).items():
            if isinstance(v, dict):
                assert list(json.loads(got)[k]) == list(v)
    assert parse_filename(b.name)["block_shape"] == [128, 128]


def test_vllm_rules_seed_moe_problems_by_nearest_batch(tmp_path):
    d, _, _ = write_vllm(tmp_path)
    db = import_vllm([d])
    sp = Space([Pow2("BLOCK_SIZE_M", 16, 256), Pow2("BLOCK_SIZE_N", 32, 256), Pow2("BLOCK_SIZE_K", 32, 256),
                Choice("GROUP_SIZE_M", [1, 16, 64]), Choice("num_warps", [4, 8]), Choice("num_stages", [2, 3, 4, 5])])
    p = Problem("fused_moe", "matmul", {"M": 48, "N": 14336, "K": 4096, "E": 8}, {"a": "fp16"}, hardware=H100)
    hit = db.lookup(p, sp)
    assert hit.level == "H100-SXM/exact" and hit.rule.exact["M"] == 64
    assert hit.config == {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1,
                          "num_warps": 8, "num_stages": 4}
    # 600 tokens is nearer 1024 than 64 on a log scale; waves_per_eu has no parameter here
    p2 = Problem("fused_moe", "matmul", {"M": 600, "N": 14336, "K": 4096, "E": 8}, {"a": "fp16"}, hardware=H100)
    assert db.lookup(p2, sp).rule.exact["M"] == 64
    assert classify(p2).variant == "moe"


# ----------------------------------------------------------------------------- CLI

def test_harvest_command(tmp_path):
    sp = small_space()
    for m, best in ((16, {"BLOCK_M": 16, "BLOCK_N": 128, "num_warps": 8}),
                    (4096, {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4})):
        p = mm(m)
        times = synth_times(sp, best)
        ds = Dataset(p, sp.to_dict(), [Measurement(sp.from_key(k), time_ms=t) for k, t in times.items()],
                     meta={"default_config": sp.default()})
        (tmp_path / "data").mkdir(exist_ok=True)
        write_dataset(ds, tmp_path / "data" / f"M{m}.jsonl.gz")
    d, a, _ = write_vllm(tmp_path)
    out = tmp_path / "db"
    res = CliRunner().invoke(main, ["harvest", str(tmp_path / "data"), "--out", str(out), "--margin", "0.1",
                                           "--vllm-import", str(a), "--vllm-export", str(tmp_path / "exp"),
                                           "--json", str(tmp_path / "report.json")])
    assert res.exit_code == 0, res.output
    assert "coverage" in res.output and "dropped" in res.output
    db = Database.load(out)
    assert any(r.bucket == "K=4096,M=16,N=4096" for r in db)
    assert not any(r.bucket == "K=4096,M=4096,N=4096" for r in db)  # the default is the best there
    assert (tmp_path / "exp" / a.name).exists()
    rep = json.loads((tmp_path / "report.json").read_text())
    assert {c["level"].rsplit("/", 1)[-1] for c in rep["coverage"]} == {"bucket", "none"}
    # a second run updates: the vLLM rules stay
    res = CliRunner().invoke(main, ["harvest", str(tmp_path / "data"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert len(Database.load(out)) == len(db)


# ----------------------------------------------------------------------------- provenance

def test_harvested_rules_carry_provenance_and_exclusion_leaves_them_out():
    a = obs("m16", mm(16), {"BLOCK_M": 16, "BLOCK_N": 128, "num_warps": 8})
    b = obs("m4", mm(4), {"BLOCK_M": 16, "BLOCK_N": 32, "num_warps": 2})
    db = harvest([a, b], levels=("name",)).database
    own = next(r for r in db if r.bucket == "K=4096,M=16,N=4096")
    assert [(o.key, o.shape, o.kernel) for o in own.learned_from] == \
        [(a.problem.key(), "M16_N4096_K4096", "toy_mm")]
    fb = next(r for r in db if r.is_fallback)
    assert {o.shape for o in fb.learned_from} == {"M16_N4096_K4096", "M4_N4096_K4096"}
    # provenance survives a save and a load
    assert Database.from_dict(db.to_dict()).to_dict() == db.to_dict()
    sp = small_space()
    assert db.lookup(mm(16), sp).rule is own
    # excluding M=16 (as a Problem or by its key) leaves out its bucket rule and the fallback
    # learned partly from it: nothing is left for M=16
    for ex in (a.problem, a.problem.key(), [a.problem]):
        assert db.lookup(mm(16), sp, exclude=ex) is None
    assert {r.bucket for r in db.left_out(mm(16), sp, exclude=a.problem)} == \
        {"K=4096,M=16,N=4096", "fallback:small_m"}
    # a rule learned only from another shape still fires
    only_b = harvest([b], levels=("name",)).database.find(is_fallback=True)
    db.add(Rule("matmul", "fallback:small_m", "fp16", "H100-SXM", templates=only_b[0].templates,
                learned_from=only_b[0].learned_from))  # replaces the shared fallback rule
    hit = db.lookup(mm(16), sp, exclude=a.problem)
    assert hit is not None and hit.level == "H100-SXM/fallback"
    assert hit.config == {"BLOCK_M": 16, "BLOCK_N": 32, "num_warps": 2}
    with pytest.raises(AbductuneError, match="exclude"):
        db.lookup(mm(16), sp, exclude=[42])


def test_seed_report_says_what_the_exclusion_left_out():
    a = obs("m16", mm(16), {"BLOCK_M": 16, "BLOCK_N": 128, "num_warps": 8})
    db = harvest([a], levels=("name",)).database
    sp = small_space()
    rep = seed_configs(mm(16), sp, database=db, use_registry=False)
    assert rep.fired[0]["status"] == "seed" and rep.fired[0]["learned_from"] == ["toy_mm/M16_N4096_K4096"]
    rep = seed_configs(mm(16), sp, database=db, use_registry=False, exclude=a.problem)
    assert rep.configs == []
    ex, noop = rep.fired
    assert ex["status"] == "excluded" and "left out 2 rule(s) learned from this shape" in ex["reason"]
    assert {r["bucket"] for r in ex["left_out"]} == {"K=4096,M=16,N=4096", "fallback:small_m"}
    assert noop["status"] == "noop"
    json.dumps(rep.fired)


# ----------------------------------------------------------------------------- packaged database

def bundled():
    from abductune.datasets.bundled import bundled_datasets
    from abductune.datasets.format import read_dataset

    return [read_dataset(p) for p in bundled_datasets()]


def test_packaged_database_is_non_empty_and_every_rule_has_provenance():
    from abductune.heuristics.observed import DATA_DIR

    db = packaged_database()
    assert len(db) >= 20
    assert Database.load(DATA_DIR).to_dict() == db.to_dict()
    assert {r.hardware for r in db} == {"H100-SXM", "family:nvidia/hopper"}
    assert {r.kernel_class for r in db} >= {"matmul", "row_reduction"}
    keys = {ds.problem.key(): ds for ds in bundled()}
    for r in db:
        assert r.learned_from, r.key_dict()
        for o in r.learned_from:
            assert o.key in keys and o.shape and o.kernel == keys[o.key].problem.kernel
    assert db.meta["harvest"]["datasets"] == ["bundled"]


def test_packaged_database_is_what_harvest_of_the_bundled_data_gives():
    """The committed files are not stale: `abductune harvest bundled --levels name,family`
    (the settings saved in the database's meta) rebuilds them exactly."""
    meta = packaged_database().meta["harvest"]
    got = harvest(observations_from_datasets(bundled()), margin=meta["margin"], top=meta["top"],
                  keep=meta["keep"], granularity=meta["granularity"],
                  levels=meta["levels"].split(","), exact=meta["exact"]).database
    assert got.to_dict()["rules"] == packaged_database().to_dict()["rules"]


def test_replaying_a_bundled_shape_never_uses_its_own_rule():
    datasets = bundled()
    fired_without = 0
    for ds in datasets:
        sp, key = ds.space(), ds.problem.key()
        base = ds.meta.get("default_config")
        plain = seed_configs(ds.problem, sp, database=None, base=base, use_registry=False)
        hit = next((f for f in plain.fired if f["status"] == "seed"), None)
        fired_without += hit is not None
        rep = seed_configs(ds.problem, sp, database=None, base=base, use_registry=False,
                           exclude=ds.problem)
        (ex,) = [f for f in rep.fired if f["status"] == "excluded"]
        assert ex["name"] == "observed" and "learned from this shape" in ex["reason"]
        assert (hit is None) or len(ex["left_out"]) >= 1
        hit = packaged_database().lookup(ds.problem, sp, base=base, exclude=ds.problem)
        assert hit is None or all(o.key != key for o in hit.rule.learned_from)
        for f in rep.fired:
            if f["status"] == "seed":
                rule = next(r for r in packaged_database() if r.key_dict() == f["rule"])
                assert key not in {o.key for o in rule.learned_from}
    assert fired_without >= 20  # without the exclusion most bundled shapes have their own rule


def test_a_rule_from_another_bundled_shape_still_fires_under_exclusion():
    datasets = bundled()
    db = packaged_database()
    checked = 0
    for y in datasets:
        sp = y.space()
        hit = db.lookup(y.problem, sp)
        if hit is None:
            continue
        own = {o.key for o in hit.rule.learned_from}
        for x in datasets:  # hold out a shape the rule did not learn from: it still fires
            if x.problem.key() not in own:
                again = db.lookup(y.problem, sp, exclude=x.problem)
                assert again is not None and again.rule is hit.rule
                rep = seed_configs(y.problem, sp, database=db, use_registry=False, exclude=x.problem)
                assert rep.configs and rep.fired[-1]["rule"] == hit.rule.key_dict()
                checked += 1
                break
    assert checked >= 20
