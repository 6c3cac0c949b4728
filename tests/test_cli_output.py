"""What the CLI prints for a reader (issue 28): the run id that `explain` needs, `--store` in
the same place for every command, unknown kernel names refused alike, predictions that say
which repair changed the rule's config, a tune table that fits 80 columns, and an `explain`
that reads like a story rather than a dump of dicts."""
from __future__ import annotations

import io
import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from abductune.cli import main
from test_cli_errors import assert_one_line, run_cli

GELU = ["--mode", "replay", "--kernel", "gelu_mul_fp16", "--shapes", "numel=917504", "--budget", "6"]
MATMUL = ["--mode", "replay", "--kernel", "matmul_fp16", "--shapes", "M=1,N=4096,K=4096", "--budget", "12"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding one gelu and one matmul tune (runs 1 and 2)."""
    d = tmp_path_factory.mktemp("store")
    for args in (GELU, MATMUL):
        code, _, err, exc = run_cli(["tune", *args, "--store", "s.sqlite"], d)
        assert code == 0, (err, exc)
    return d / "s.sqlite"


def _rows(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]


# ------------------------------------------------------------- item 8: the run id

def test_tune_prints_the_run_id_and_the_explain_command_that_works(tmp_path: Path):
    code, out, err, exc = run_cli(["tune", *GELU, "--store", "my store.sqlite"], tmp_path)
    assert code == 0, (err, exc)
    [line] = [ln for ln in out.splitlines() if "abductune explain" in ln]
    m = re.fullmatch(r"run (\d+): `abductune explain (\d+) --store 'my store.sqlite'` tells how it reached "
                     r"its winner", line)
    assert m and m.group(1) == m.group(2), line
    code, out, err, exc = run_cli(["explain", m.group(1), "--store", "my store.sqlite"], tmp_path)
    assert code == 0, (err, exc)
    assert out.startswith(f"run {m.group(1)}: abduction on gelu_mul_fp16")


def test_tune_of_several_shapes_names_each_run_and_replay_in_memory_says_how_to_keep_them(tmp_path: Path):
    code, out, err, exc = run_cli(["tune", "--mode", "replay", "--kernel", "gelu_mul_fp16", "--budget", "4",
                                   "--store", "s.sqlite"], tmp_path)
    assert code == 0, (err, exc)
    assert "runs 1-3 (#1-#3): `abductune explain RUN --store s.sqlite` tells how each reached its winner" in out
    code, out, err, exc = run_cli(["tune", *GELU], tmp_path)
    assert code == 0, (err, exc)
    assert "runs not kept: replay tunes in memory; add --store FILE" in out


# ------------------------------------------------------------- item 9: --store after `cache X`

@pytest.mark.parametrize("sub", [["ls"], ["show", "gelu_mul_fp16"], ["export", "out"]])
def test_cache_takes_store_after_the_subcommand_as_well_as_before(store: Path, tmp_path: Path, sub):
    after = run_cli(["cache", *sub, "--store", str(store)], tmp_path)
    assert after[0] == 0, after
    before = run_cli(["cache", "--store", str(store), *sub], tmp_path)
    assert before[0] == 0, before
    assert after[1] == before[1] and "gelu_mul_fp16" in after[1]


def test_cache_store_given_twice_differently_is_one_line(store: Path, tmp_path: Path):
    code, _, err, exc = run_cli(["cache", "--store", str(store), "ls", "--store", "other.sqlite"], tmp_path)
    assert_one_line(code, err, exc, "--store is given twice")
    code, _, err, exc = run_cli(["cache", "ls", "--store", "typo.sqlite"], tmp_path)
    assert_one_line(code, err, exc, "store typo.sqlite does not exist")


# ------------------------------------------------------------- item 18: unknown kernel names

@pytest.mark.parametrize("sub", [["clear", "nope", "--yes"], ["show", "nope"], ["clear", "nope"],
                                 ["export", "out", "--kernel", "nope"]])
def test_an_unknown_kernel_is_refused_alike_and_nothing_is_deleted(store: Path, tmp_path: Path, sub):
    n = _rows(store)
    code, _, err, exc = run_cli(["cache", *sub, "--store", str(store)], tmp_path)
    assert_one_line(code, err, exc, "no kernel named 'nope' in")
    assert "stored kernels: gelu_mul_fp16, matmul_fp16" in err
    assert _rows(store) == n and not (tmp_path / "out").exists()


def test_clearing_a_stored_kernel_still_works(store: Path, tmp_path: Path):
    copy = tmp_path / "c.sqlite"
    copy.write_bytes(store.read_bytes())
    code, out, err, _ = run_cli(["cache", "clear", "gelu_mul_fp16", "--yes", "--store", str(copy)], tmp_path)
    assert code == 0 and re.match(r"deleted [1-9]\d* measurement", out), (out, err)
    code, _, err, exc = run_cli(["cache", "show", "gelu_mul_fp16", "--store", str(copy)], tmp_path)
    assert_one_line(code, err, exc, "stored kernels: matmul_fp16")


# ------------------------------------------------------------- item 17: 80 columns

@pytest.fixture(scope="module")
def outcomes():
    from abductune.search import Budget
    from abductune.tune import tune_one

    shapes = [("gelu_mul_fp16", {"numel": 117440512}), ("matmul_fp16", {"M": 8192, "N": 4096, "K": 14336}),
              ("matmul_fp16", {"M": 16, "N": 11008, "K": 4096})]
    return [tune_one(k, d, budget=Budget(4, None), mode="replay") for k, d in shapes]


@pytest.mark.parametrize("mode", ["replay", "live"])
def test_tune_table_fits_80_columns_without_cutting_a_cell(outcomes, mode):
    from abductune.cli.tune import tune_table

    buf = io.StringIO()
    Console(file=buf, width=80).print(tune_table(outcomes, mode, 80))
    text = buf.getvalue()
    assert "…" not in text and "..." not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    flat = " ".join(text.split())
    for o in outcomes:
        assert o.kernel in text
        for a, b in o.dims.items():
            assert f"{a}={b}" in flat
        assert o.best_impl in text
    assert "optimum" in text if mode == "replay" else "optimum" not in text
    assert "times in µs" in text
    assert ("simulated" in text) == (mode == "replay")  # replay's seconds are recorded costs


def test_tune_table_keeps_the_wide_layout_where_it_fits(outcomes):
    from abductune.cli.tune import tune_table

    buf = io.StringIO()
    Console(file=buf, width=180).print(tune_table(outcomes, "replay", 180))
    text = buf.getvalue()
    assert "fixed list best" in text and "simulated s" in text and "…" not in text


def test_an_80_column_terminal_gets_the_compact_table(tmp_path: Path):
    """On a terminal (a pseudo-terminal here) of COLUMNS=80 no line of the table is longer."""
    import os
    import pty
    import subprocess
    import sys

    env = dict(os.environ, COLUMNS="80", PYTHONPATH=os.pathsep.join(sys.path), ABDUCTUNE_DAEMON="0")
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "abductune.cli", "tune", "--mode", "replay", "--kernel",
                          "matmul_fp16", "--budget", "2"], cwd=tmp_path, env=env, stdout=slave,
                         stderr=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    assert p.wait(timeout=300) == 0
    os.close(master)
    out = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode()).replace("\r", "")
    assert "times in µs" in out and "…" not in out
    table = out.split("\n#1 ")[0]
    assert max(len(line) for line in table.splitlines()) <= 80, table


# ------------------------------------------------------------- item 16: predictions say what changed them

def _rule_values(pred, space):
    """role param -> the rule's own constant value, where the rule has one."""
    out = {}
    for role, form in pred.rule.forms.items():
        p = space.by_role(role)
        if p is not None and form.kind == "const" and form.value in p.values:
            out[p.name] = form.value
    return out


@pytest.mark.parametrize("dims", [{"M": 16, "N": 4096, "K": 4096}, {"M": 1000, "N": 1000, "K": 2000},
                                  {"M": 768, "N": 768, "K": 768}, {"M": 1, "N": 14336, "K": 4096},
                                  {"M": 4096, "N": 4096, "K": 4096}])
def test_a_prediction_that_departs_from_its_rule_names_the_repair(dims):
    from abductune import kernels
    from abductune.hardware import lookup
    from abductune.theory.store import predictions

    spec = kernels.get("matmul_fp16")
    space = spec.space()
    for p in predictions(spec.problem(dims, lookup("H100-SXM")), space):
        for name, v in _rule_values(p, space).items():
            if p.config[name] != v:  # served another value than the rule's: a repair says so
                assert any(f"{name} {v} -> {p.config[name]}" in r for r in p.repairs), (dims, name, p.repairs)


def test_predict_prints_the_served_config_and_the_repair_that_changed_it():
    from abductune import kernels
    from abductune.hardware import lookup
    from abductune.theory.store import predict
    from abductune.cli.theory import explain_prediction

    spec = kernels.get("matmul_fp16")
    p = predict(spec.problem({"M": 16, "N": 4096, "K": 4096}, lookup("H100-SXM")), spec.space(), ranker=False)
    assert p.config["num_warps"] == 2 and p.rule.forms["warps"].value == 4  # the contradiction of the issue
    lines = explain_prediction(p)
    assert lines[0].startswith("because ") and "warps=4" in lines[0] and "repaired" not in lines[0]
    assert any("space constraints: num_warps 4 -> 2" in ln and "BLOCK_M * BLOCK_N >= 16 * 32 * num_warps" in ln
               for ln in lines[1:])


def test_the_compile_check_relief_is_named_as_a_repair():
    from abductune import kernels
    from abductune.hardware import lookup
    from abductune.theory.check import first_clean
    from abductune.theory.store import predictions

    spec = kernels.get("matmul_fp16")
    problem = spec.problem({"M": 700, "N": 4096, "K": 4321}, lookup("H100-SXM"))
    preds = predictions(problem, spec.space())
    first = dict(preds[0].config)

    def fake_compile(spec, cfg, problem, arch):  # the rule's own config spills, anything else is clean
        bad = cfg == first
        return {"status": "ok", "error": None, "spills": 600 if bad else 0, "registers": 255}
    got = first_clean(spec, problem, preds, compile_fn=fake_compile)
    assert got.config != first
    moved = ", ".join(f"{k} {first[k]} -> {got.config[k]}" for k in first if first[k] != got.config[k])
    assert got.repairs[-1] == f"compile check: {moved} (with the values before, it spills 600 bytes)"


# ------------------------------------------------------------- item 23: explain reads like a story

def test_explain_prints_configs_rounded_numbers_and_why_an_expected_loss_was_tested(store: Path, tmp_path: Path):
    code, out, err, exc = run_cli(["explain", "2", "--store", str(store)], tmp_path)
    assert code == 0, (err, exc)
    assert "{" not in out and '"' not in out  # no raw dicts or JSON
    assert not re.search(r"\d\.\d{6,}", out), re.search(r".{40}\d\.\d{6,}.{10}", out)
    assert re.search(r"config: BLOCK_K=\d+, BLOCK_M=\d+", out)
    hyps = [ln for ln in out.splitlines() if ln.strip().startswith("hypothesis")]
    losses = [ln for ln in hyps if re.search(r"expected gain: -\d", ln)]
    assert losses, "the fixture run tested no expected loss: pick another shape"
    for ln in losses:
        assert "tested although a loss is expected: " in ln
    assert any("until it settles or the budget is spent" in ln for ln in losses)


def test_explain_lines_format_each_kind_of_value():
    from abductune.cli.theory import event_lines

    cfg = {"BLOCK": 1024, "num_warps": 4}
    lines = event_lines([
        {"event": "hypothesis", "theory": "poll", "config": {**cfg, "num_warps": 8}, "from_config": cfg,
         "expected_gain": -0.02295410560611249, "credibility": 0.18877551020408162, "reason": "poll: x"},
        {"event": "verdict", "theory": "poll", "outcome": "refuted", "candidate": {**cfg, "num_warps": 8},
         "incumbent": cfg, "ratio": 1.1333332843163562, "threshold": 0.011060095497880961, "confirmed": False},
        {"event": "observe", "config": cfg, "time_ms": 0.022800000384449962, "k_trips": None,
         "padding": {"tile:X": 0.0}},
    ], {})
    assert lines[0].startswith("hypothesis change: num_warps 4->8; ")
    assert "; config: BLOCK=1024, num_warps=8;" in lines[0] and "BLOCK=1024, num_warps=4" not in lines[0]
    assert "expected gain: -2.3%" in lines[0] and "credibility: 0.19" in lines[0]
    assert "tested although a loss is expected" in lines[0]
    assert "ratio: 1.133x" in lines[1] and "threshold: 1.1%" in lines[1] and "confirmed: no" in lines[1]
    assert "time: 22.8 µs" in lines[2] and "K-loop" not in lines[2]


def test_cli_help_defines_score_p():
    out = CliRunner().invoke(main, ["replay", "--help"]).output
    assert "score P" in " ".join(out.split())


# ------------------------------------------------------------- item 20: docs and code agree

def test_import_with_an_unknown_gpu_name_warns_and_imports_as_documented(tmp_path: Path, caplog):
    import json
    import logging

    cache = {"device_name": "", "kernel_name": "my_matmul", "problem_size": [512, 256, 64],
             "tune_params_keys": ["BLOCK_M", "num_warps"],
             "tune_params": {"BLOCK_M": [16, 32], "num_warps": [4, 8]}, "objective": "time",
             "cache": {f"{b},{w}": {"BLOCK_M": b, "num_warps": w, "time": 1.0 + b / 100 + w / 10}
                       for b in (16, 32) for w in (4, 8)}}
    (tmp_path / "kt.json").write_text(json.dumps(cache))
    with caplog.at_level(logging.WARNING):
        code, out, err, exc = run_cli(["import", "kt.json", "out.jsonl", "--hardware", "Voodoo3",
                                       "--kernel-class", "matmul", "--dims", "M=512,N=256,K=64"], tmp_path)
    assert code == 0, (err, exc)
    assert (tmp_path / "out.jsonl").exists()
    said = " ".join(r.getMessage() for r in caplog.records) + err
    assert "GPU 'Voodoo3' is not in the hardware table" in said
    doc = (Path(__file__).resolve().parent.parent / "docs" / "TROUBLESHOOTING.md").read_text()
    assert "warning `GPU '…' is not in the hardware table" in doc and "(`import --hardware`)" in doc


def test_every_doc_gives_the_daemon_one_gpu_memory_figure():
    root = Path(__file__).resolve().parent.parent
    texts = [p.read_text() for p in [root / "README.md", *(root / "docs").glob("*.md"),
                                      *(root / "src" / "abductune").rglob("*.py")]]
    for t in texts:
        assert not re.search(r"0\.5\s*(-|–)?\s*(1\s*)?GB of GPU memory", t)
    assert sum("about 1 GB of GPU memory" in t for t in texts) >= 3


def test_readme_lists_every_command():
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    for name in main.commands:
        assert f"`abductune {name}" in readme or f"abductune {name}`" in readme, name
