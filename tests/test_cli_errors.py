"""Every mistake a user can make on the command line (issue 11) ends as exit code 2 and one
plain line on stderr that names the problem, never a traceback; and what the CLI writes
(databases, reports, sweep folders) is checked before the work and written whole."""
from __future__ import annotations

import gzip
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from abductune.cli import main
from abductune.datasets.bundled import bundled_datasets
from abductune.heuristics.observed import Database, Rule, Template
from abductune.tune import gpu_available

HAS_GPU_STACK = all(importlib.util.find_spec(m) is not None for m in ("torch", "triton"))


def _gelu_small() -> Path:
    [p] = [p for p in bundled_datasets(kernel="gelu_mul_fp16") if "numel917504" in str(p)]
    return p


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of good, wrong-kind, truncated and corrupt inputs (names used by CASES)."""
    d = tmp_path_factory.mktemp("inputs")
    src = _gelu_small()
    raw = gzip.decompress(src.read_bytes())
    (d / "good.jsonl").write_bytes(raw)
    (d / "trunc.jsonl").write_bytes(raw[: len(raw) // 2])
    (d / "trunc.jsonl.gz").write_bytes(src.read_bytes()[:400])
    (d / "binary.jsonl").write_bytes(b"\x00\xff\xfe garbage\n")
    (d / "empty.jsonl").write_bytes(b"")
    (d / "list.json").write_text("[1, 2, 3]")
    (d / "text.txt").write_text("hello\n")
    (d / "adir").mkdir()
    (d / "db_trunc.json").write_text('{"format": "abductune-observed-heuristics", "rules": [{')
    (d / "db_list.json").write_text("[]")
    (d / "db_other.json").write_text('{"format": "something-else"}')
    _newer_store(d / "newer.sqlite")
    _bad_time_files(d, raw)
    return d


BAD_TIMES = {"neg": -46.81, "zero": 0, "nan": float("nan"), "str": "fast"}


def _bad_time_files(d: Path, raw: bytes) -> None:
    """Issue 28 item 3: for each bad time (negative, zero, NaN, a string), an abductune dataset
    (`ds_*.jsonl`, line 4 bad), a Kernel Tuner cache (`kt_*.json`, entry '32,4' bad) and a T4
    file (`t4_*.json`, results[2] bad); and good small ones of each foreign kind."""
    lines = raw.decode().splitlines()
    cache = {f"{b},{w}": {"BLOCK": b, "num_warps": w, "time": b / w, "times": [b / w] * 3,
                          "compile_time": 10.0} for b in (16, 32, 64) for w in (4, 8)}
    kt = {"device_name": "NVIDIA A100-PCIE-40GB", "kernel_name": "my_gemm", "problem_size": [64, 64],
          "tune_params_keys": ["BLOCK", "num_warps"], "tune_params": {"BLOCK": [16, 32, 64], "num_warps": [4, 8]}}
    (d / "kt_good.json").write_text(json.dumps({**kt, "cache": cache}))
    t4 = {"schema_version": "1.0.0", "metadata": {"timeunit": "milliseconds"}, "results": [
        {"configuration": {"BLOCK": r["BLOCK"], "num_warps": r["num_warps"]}, "objectives": ["time"],
         "times": {"compilation_time": 10.0, "runtimes": r["times"]}, "invalidity": "correct", "correctness": 1,
         "measurements": [{"name": "time", "value": r["time"], "unit": "milliseconds"}]} for r in cache.values()]}
    (d / "t4_good.json").write_text(json.dumps(t4))
    for name, bad in BAD_TIMES.items():
        rec = json.loads(lines[3])
        rec["time_ms"] = bad
        (d / f"ds_{name}.jsonl").write_text("\n".join([*lines[:3], json.dumps(rec), *lines[4:]]) + "\n")
        c = json.loads(json.dumps(cache))
        c["32,4"]["time"] = bad
        (d / f"kt_{name}.json").write_text(json.dumps({**kt, "cache": c}))
        t = json.loads(json.dumps(t4))
        t["results"][2]["measurements"][0]["value"] = bad
        (d / f"t4_{name}.json").write_text(json.dumps(t))


def _contents(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _newer_store(path: Path) -> None:
    """A store written by a future abductune (schema version one above ours), not in WAL mode."""
    import sqlite3

    from abductune.store import SCHEMA_VERSION, Store

    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = DELETE")
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    db.commit()
    db.close()


# (args, what the error line must contain); paths are relative to the `files` folder
CASES: list[tuple[list[str], str]] = [
    # usage: unknown commands and options, missing and malformed values
    (["nosuch"], "No such command 'nosuch'"),
    (["--nosuch"], "No such option '--nosuch'"),
    (["strategies", "extra"], "unexpected extra argument (extra)"),
    (["kernels", "--all"], "No such option '--all'"),
    # tune: numbers, names, files of the wrong kind, read-only outputs
    (["tune", "--budget", "0"], "--budget must be at least 1"),
    (["tune", "--budget", "-3"], "--budget must be at least 1"),
    (["tune", "--budget", "many"], "'many' is not a valid integer"),
    (["tune", "--seconds", "0"], "--seconds must be positive"),
    (["tune", "--seconds", "nan"], "--seconds must be positive"),
    (["tune", "--kernel", "gelu_mul_fp16,nope"], "unknown kernel(s) nope"),
    (["tune", "--strategy", "annealing"], "unknown strategy 'annealing'"),
    (["tune", "--mode", "fast"], "'fast' is not one of"),
    (["tune", "--kernel", "gelu_mul_fp16", "--json", "/proc/x.json"], "cannot write /proc/x.json"),
    (["tune", "--kernel", "gelu_mul_fp16", "--json", "adir"], "'adir' is a directory"),
    (["tune", "--kernel", "gelu_mul_fp16", "--json", "text.txt/x.json"], "text.txt is not a folder"),
    (["tune", "--mode", "replay", "--kernel", "gelu_mul_fp16", "--shapes", "numel=x"], "bad shape 'numel=x'"),
    (["tune", "--mode", "replay", "--kernel", "gelu_mul_fp16", "--shapes", "numel=3"],
     "no bundled dataset for gelu_mul_fp16 at numel3"),
    (["tune", "--mode", "replay", "--kernel", "gelu_mul_fp16", "--database", "missing.json"],
     "'missing.json' does not exist"),
    (["tune", "--mode", "replay", "--kernel", "gelu_mul_fp16", "--database", "db_trunc.json"],
     "db_trunc.json:1: not valid JSON"),
    (["tune", "--mode", "replay", "--kernel", "gelu_mul_fp16", "--database", "db_list.json"],
     "db_list.json: not an observed-heuristics database"),
    (["tune", "--mode", "replay", "--kernel", "gelu_mul_fp16", "--database", "db_other.json"],
     "not an observed-heuristics database (format 'something-else'"),
    (["tune", "--mode", "replay", "--kernel", "gelu_mul_fp16", "--database", "binary.jsonl"],
     "binary.jsonl: not a text file"),
    (["tune", "--mode", "replay", "--kernel", "gelu_mul_fp16", "--store", "text.txt"],
     "text.txt is not an abductune store"),
    (["tune", "--mode", "replay", "--kernel", "gelu_mul_fp16", "--store", "adir"],
     "store path adir is a directory"),
    (["tune", "--mode", "replay", "--kernel", "gelu_mul_fp16", "--store", "newer.sqlite"],
     "store newer.sqlite has schema version 3, newer than this abductune understands"),
    (["tune", "--mode", "replay", "--kernel", "gelu_mul_fp16", "--store", "/proc/s.sqlite"],
     "cannot open store /proc/s.sqlite"),
    (["tune", "--mode", "replay", "--kernel", "mymodule:MySpec"], "mymodule:MySpec is a user kernel"),
    (["tune", "--mode", "live", "--kernel", "no_such_module:Spec"],
     "cannot load kernel 'no_such_module:Spec': No module named 'no_such_module'"),
    # replay
    (["replay"], "Missing argument 'DATASETS...'"),
    (["replay", "missing.jsonl"], "dataset missing.jsonl does not exist"),
    (["replay", "adir"], "no dataset files in adir"),
    (["replay", "trunc.jsonl"], "trunc.jsonl:32: not valid JSON"),
    (["replay", "trunc.jsonl.gz"], "trunc.jsonl.gz:1: cannot read"),
    (["replay", "binary.jsonl"], "binary.jsonl:1: not UTF-8 text"),
    (["replay", "empty.jsonl"], "empty.jsonl: empty file"),
    (["replay", "list.json"], "list.json: not a dataset abductune knows"),
    (["replay", "text.txt"], "text.txt:1: not valid JSON"),
    (["replay", "/proc/self/mem"], "cannot read"),
    (["replay", "good.jsonl", "--budget", "0"], "budgets must be positive integers"),
    (["replay", "good.jsonl", "--budget", "8,x"], "expected a comma-separated list, got '8,x'"),
    (["replay", "good.jsonl", "--repeats", "0"], "--repeats must be positive"),
    (["replay", "good.jsonl", "--seconds", "-1"], "--seconds must be positive"),
    (["replay", "good.jsonl", "--strategy", "random,annealing"], "unknown strategy 'annealing'"),
    (["replay", "good.jsonl", "--seeds", "all"], "'all' is not one of"),
    (["replay", "good.jsonl", "--json", "/proc/r.json"], "cannot write /proc/r.json"),
    (["replay", "good.jsonl", "--plot", "adir"], "'adir' is a directory"),
    (["replay", "good.jsonl", "--plot", "nofolder/p.png"], "folder nofolder does not exist"),
    # import
    (["import", "missing.json", "o.jsonl"], "'missing.json' does not exist"),
    (["import", "adir", "o.jsonl"], "'adir' is a directory"),
    (["import", "good.jsonl", "adir"], "'adir' is a directory"),
    (["import", "good.jsonl", "/proc/o.jsonl"], "cannot write /proc/o.jsonl"),
    (["import", "trunc.jsonl", "o.jsonl"], "trunc.jsonl:32: not valid JSON"),
    (["import", "binary.jsonl", "o.jsonl"], "binary.jsonl:1: not UTF-8 text"),
    (["import", "list.json", "o.jsonl"], "not a dataset abductune knows"),
    (["import", "good.jsonl", "o.jsonl", "--dims", "M"], "--dims must look like M=64,N=4096"),
    (["import", "kt_good.json", "o.jsonl", "--dims", "M=16,N=8,M=32"], "--dims 'M=16,N=8,M=32' gives dim M twice"),
    (["import", "good.jsonl", "o.jsonl", "--kernel-class", "banana"], "unknown kernel_class 'banana'"),
    (["import", "good.jsonl", "o.jsonl", "--hardware", "RTX 3090"], "overrides hardware are not accepted"),
    # harvest
    (["harvest"], "give datasets, --from-store, or --vllm-import"),
    (["harvest", "adir"], "no dataset files in adir"),
    (["harvest", "missing.jsonl"], "dataset missing.jsonl does not exist"),
    (["harvest", "trunc.jsonl"], "trunc.jsonl:32: not valid JSON"),
    (["harvest", "text.txt"], "text.txt:1: not valid JSON"),
    (["harvest", "good.jsonl", "--top", "0"], "--top must be at least 1, got 0"),
    (["harvest", "good.jsonl", "--keep", "0"], "--keep must be at least 1, got 0"),
    (["harvest", "good.jsonl", "--granularity", "0"], "--granularity must be at least 1"),
    (["harvest", "good.jsonl", "--margin", "1"], "--margin must be in [0, 1)"),
    (["harvest", "good.jsonl", "--levels", "name,gpu"], "--levels 'name,gpu'"),
    (["harvest", "good.jsonl", "--out", "/proc/db.json"], "cannot write /proc/db.json"),
    (["harvest", "good.jsonl", "--out", "/proc/dbdir"], "cannot create or write folder /proc/dbdir"),
    (["harvest", "good.jsonl", "--out", "text.txt"], "--out text.txt is a file without .json suffix"),
    (["harvest", "good.jsonl", "--out", "text.txt/db.json"], "--out text.txt is a file, not a folder"),
    (["harvest", "good.jsonl", "--out", "db_trunc.json"], "db_trunc.json:1: not valid JSON"),
    (["harvest", "good.jsonl", "--out", "db_list.json"], "not an observed-heuristics database"),
    (["harvest", "good.jsonl", "--json", "/proc/h.json"], "cannot write /proc/h.json"),
    (["harvest", "good.jsonl", "--vllm-export", "text.txt"], "'text.txt' is a file"),
    (["harvest", "good.jsonl", "--store", "s.sqlite"], "--store is only read with --from-store"),
    (["harvest", "--from-store", "--store", "typo/store.sqlite"], "store typo/store.sqlite does not exist"),
    (["harvest", "--from-store", "--store", "text.txt"], "text.txt is not an abductune store"),
    (["harvest", "--vllm-import", "text.txt"], "not a vLLM fused-MoE config file name"),
    (["harvest", "--vllm-import", "adir"], "no vLLM config files given"),
]

# issue 28: bad times where a file is read or imported (item 3), dims checked where --shapes is
# parsed and against the kernel before any dataset lookup (item 5), kernels without replay data
# (item 10)
_TIME_WORDS = {"neg": "is -46.81;", "zero": "is 0;", "nan": "is nan;", "str": "is 'fast';"}
_rule = "a recorded time must be a positive, finite number of milliseconds"
for _name, _word in _TIME_WORDS.items():
    CASES += [
        (["replay", f"ds_{_name}.jsonl"], f"ds_{_name}.jsonl:4: time_ms {_word} {_rule}"),
        (["replay", f"kt_{_name}.json"], f"kt_{_name}.json: cache entry '32,4': 'time' {_word} {_rule}"),
        (["replay", f"t4_{_name}.json"], f"t4_{_name}.json: results[2]: measurement 'time' {_word} {_rule}"),
        (["import", f"kt_{_name}.json", "o.jsonl"], f"kt_{_name}.json: cache entry '32,4': 'time' {_word}"),
        (["import", f"t4_{_name}.json", "o.jsonl"], f"t4_{_name}.json: results[2]: measurement 'time' {_word}"),
        (["import", f"ds_{_name}.jsonl", "o.jsonl"], f"ds_{_name}.jsonl:4: time_ms {_word}"),
    ]
CASES += [
    (["harvest", "kt_neg.json"], "kt_neg.json: cache entry '32,4': 'time' is -46.81;"),
    (["learn", "ds_nan.jsonl", "--out", "t.json"], "ds_nan.jsonl:4: time_ms is nan;"),
    (["predict", "t4_str.json"], "t4_str.json: results[2]: measurement 'time' is 'fast';"),
]
_MM = ["tune", "--mode", "replay", "--kernel", "matmul_fp16", "--shapes"]
_PR = ["predict", "--kernel", "matmul_fp16", "--no-check", "--shapes"]
for _cmd in (_MM, _PR, ["tune", "--kernel", "matmul_fp16", "--shapes"]):  # the last: --mode auto
    CASES += [
        ([*_cmd, "M=0,N=4096,K=4096"], "bad shape 'M=0,N=4096,K=4096': every dim must be positive, got M=0"),
        ([*_cmd, "M=-16,N=4096,K=4096"], "every dim must be positive, got M=-16"),
        ([*_cmd, "N=4096,K=4096"], "kernel 'matmul_fp16' takes dims ['M', 'N', 'K'], got {'N': 4096, 'K': 4096}"),
        ([*_cmd, "M=16,N=4096,K=4096,Q=3"], "takes dims ['M', 'N', 'K'], got {'M': 16, 'N': 4096, 'K': 4096, 'Q': 3}"),
        ([*_cmd, "M=16,M=32,N=4096,K=4096"], "bad shape 'M=16,M=32,N=4096,K=4096': dim M is given twice"),
        ([*_cmd, "M=16,N=4096,K=4096;M=16,N=4096,K=4096,K=8"], "dim K is given twice"),
        ([*_cmd, ";"], "--shapes ';' names no shape"),
    ]
CASES += [
    # a second shape's mistake is found before the first shape is looked up or tuned
    ([*_MM, "M=16,N=4096,K=4096;M=16,N=4096"], "takes dims ['M', 'N', 'K'], got {'M': 16, 'N': 4096}"),
    (["tune", "--mode", "replay", "--kernel", "matmul_bf16"], "matmul_bf16 has no bundled replay data"),
    (["tune", "--kernel", "rmsnorm_bf16", "--shapes", "rows=4096,cols=4096"],
     "rmsnorm_bf16 has no bundled replay data, so it can only be tuned live on a GPU (--mode live); without "
     "a GPU, tune one that has: matmul_fp16, softmax_fp16, rmsnorm_fp16, gelu_mul_fp16"),
    # nothing is opened or written first: no store, no --json file (the folder is compared)
    ([*_MM, "M=16,N=4096,K=0", "--store", "s.sqlite", "--json", "o.json"], "every dim must be positive"),
]

# sweep needs torch and triton to get past its first check (see test_sweep_says_install_the_gpu_extra)
SWEEP_CASES: list[tuple[list[str], str]] = [
    (["sweep", "--out", "s"], "sweep needs one of --kernel (a kernel spec) or --call"),
    (["sweep", "--kernel", "nope", "--out", "s"], "unknown kernel 'nope'"),
    (["sweep", "--kernel", "gelu_mul_fp16", "--out", "s", "--shapes", "M=1"], "takes dims ['numel']"),
    (["sweep", "--kernel", "gelu_mul_fp16", "--out", "s", "--shapes", "numel=0"],
     "every dim must be positive"),
    (["sweep", "--kernel", "gelu_mul_fp16", "--out", "s", "--shapes", "numel=?"], "bad shape 'numel=?'"),
    (["sweep", "--kernel", "gelu_mul_fp16", "--out", "s", "--workers", "0"], "--workers must be at least 1"),
    (["sweep", "--kernel", "gelu_mul_fp16", "--out", "s", "--limit", "-1"], "--limit must be at least 1"),
    (["sweep", "--kernel", "gelu_mul_fp16", "--out", "/proc/sw"], "cannot create or write folder /proc/sw"),
    (["sweep", "--kernel", "gelu_mul_fp16", "--out", "text.txt"], "'text.txt' is a file"),
    (["sweep", "--kernel", "gelu_mul_fp16", "--out", "text.txt/sub"],
     "cannot create folder text.txt/sub (--out): text.txt is a file"),
]
if HAS_GPU_STACK and not gpu_available():
    SWEEP_CASES.append((["sweep", "--kernel", "gelu_mul_fp16", "--out", "s"], "no CUDA GPU is visible"))


def _cases() -> list:
    out = [pytest.param(a, w, id=" ".join(a)) for a, w in CASES]
    out += [pytest.param(a, w, id=" ".join(a), marks=pytest.mark.skipif(
        not HAS_GPU_STACK, reason="needs torch and triton")) for a, w in SWEEP_CASES]
    if "cache" in main.commands:  # registered by the cache work when present
        out.append(pytest.param(["cache", "--nosuch"], "No such option '--nosuch'", id="cache --nosuch"))
    return out


def run_cli(args: list[str], cwd: Path) -> tuple[int, str, str, BaseException | None]:
    """(exit code, stdout, stderr, exception) of `abductune ARGS` run in `cwd`."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        r = CliRunner().invoke(main, args)
    finally:
        os.chdir(old)
    return r.exit_code, r.stdout, r.stderr, r.exception


def assert_one_line(code: int, stderr: str, exc: BaseException | None, want: str) -> None:
    assert exc is None or isinstance(exc, SystemExit), f"uncaught {exc!r}"
    assert code == 2, (code, stderr)
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and stderr.endswith("\n"), f"expected one line, got {stderr!r}"
    assert lines[0].startswith("error: ") and want in lines[0], lines[0]
    assert "[/" not in lines[0] and "\x1b" not in lines[0]  # no markup, no colour codes


@pytest.mark.parametrize("args, want", _cases())
def test_bad_input_gives_one_line_and_exit_2(files: Path, args: list[str], want: str):
    before = sorted(p.name for p in files.iterdir())
    contents = _contents(files)
    newer = (files / "newer.sqlite").read_bytes()
    code, _, err, exc = run_cli(args, files)
    assert_one_line(code, err, exc, want)
    # a failed command leaves nothing behind: no output, no store, no sweep folder
    assert sorted(p.name for p in files.iterdir()) == before
    assert (files / "newer.sqlite").read_bytes() == newer  # a refused store is not modified
    assert _contents(files) == contents  # no input file is changed either


def test_a_read_only_store_answers_a_finished_tune_and_refuses_new_work_in_one_line(tmp_path: Path,
                                                                                     monkeypatch):
    """Issue 28 item 12: rerunning a finished tune on a store the user cannot write answers from
    it (exit 0, file unchanged); a tune that must measure fails at once with one line."""
    from abductune.store import _sqlite

    args = ["tune", "--mode", "replay", "--kernel", "gelu_mul_fp16", "--shapes", "numel=917504",
            "--budget", "6", "--store", "S.sqlite"]
    code, _, err, exc = run_cli(args, tmp_path)
    assert code == 0, (err, exc)
    before = (tmp_path / "S.sqlite").read_bytes()
    monkeypatch.setattr(_sqlite, "read_only_reason", lambda p: "the file is not writable")
    code, out, err, exc = run_cli(args + ["--json", "r.json"], tmp_path)
    assert code == 0, (err, exc)
    assert json.loads((tmp_path / "r.json").read_text())[0]["evaluations"] == 0
    code, _, err, exc = run_cli(args[:4] + ["rmsnorm_fp16", "--shapes", "rows=1,cols=4096"] + args[7:], tmp_path)
    assert_one_line(code, err, exc, "store S.sqlite is read-only (the file is not writable)")
    assert "chmod u+w" in err
    assert (tmp_path / "S.sqlite").read_bytes() == before


# ------------------------------------------------------------- item 1: outputs checked first

def test_harvest_checks_outputs_before_reading_any_dataset(files: Path, monkeypatch):
    import abductune.heuristics.harvest as harvest

    def boom(*a, **kw):
        raise AssertionError("datasets were read before the output was checked")
    monkeypatch.setattr(harvest, "observations_from_datasets", boom)
    for out in (["--out", "/proc/db.json"], ["--json", "/proc/h.json"], ["--out", "text.txt/db"]):
        code, _, err, exc = run_cli(["harvest", "good.jsonl", *out], files)
        assert_one_line(code, err, exc, "/")


def test_harvest_writes_json_and_database_whole_with_umask_permissions(tmp_path: Path):
    old = os.umask(0o027)
    try:
        code, out, err, exc = run_cli(["harvest", str(_gelu_small()), "--levels", "name", "--margin", "0",
                                       "--out", "new/db.json", "--json", "report.json"], tmp_path)
    finally:
        os.umask(old)
    assert code == 0, (err, exc)
    report = json.loads((tmp_path / "report.json").read_text())
    db = Database.load(tmp_path / "new" / "db.json")
    assert report["rules"] == len(db) > 0
    for p in (tmp_path / "report.json", tmp_path / "new" / "db.json"):
        assert p.stat().st_mode & 0o777 == 0o640
    leftovers = [p.name for p in tmp_path.rglob("*") if p.name.endswith((".tmp", ".check"))]
    assert leftovers == []


# ------------------------------------------------------------- item 7: the gpu extra

@pytest.fixture
def no_gpu_stack(monkeypatch):
    real = importlib.util.find_spec

    def find_spec(name, *a, **kw):
        return None if name in ("torch", "triton") else real(name, *a, **kw)
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


@pytest.mark.parametrize("args", [
    ["sweep", "--kernel", "gelu_mul_fp16", "--out", "s"],
    ["sweep", "--kernel", "nope", "--out", "/proc/sw", "--workers", "0"],  # said before anything else
    ["tune", "--mode", "live", "--kernel", "gelu_mul_fp16"],
])
def test_sweep_and_live_tune_say_install_the_gpu_extra(files: Path, no_gpu_stack, args):
    code, _, err, exc = run_cli(args, files)
    assert_one_line(code, err, exc, "torch and triton not installed")
    assert "pip install 'abductune[gpu]'" in err
    assert not (files / "s").exists()


# ------------------------------------------------------------- item 11: harvest and the store

def _rule(cls: str, bucket: str) -> Rule:
    return Rule(kernel_class=cls, bucket=bucket, hardware="H100-SXM",
                templates=[Template({"@warps": 4}, wins=1, shapes=1)])


def test_saving_with_merge_keeps_rules_written_since_loading(tmp_path: Path):
    path = tmp_path / "db.json"
    Database([_rule("matmul", "M=16")]).save(path)
    a = Database.load(path)  # two harvests load the same file ...
    b = Database.load(path)
    a.add(_rule("matmul", "M=64"))
    b.add(_rule("elementwise", "numel=1024"))
    a.save(path, merge=True)  # ... and save one after the other
    b.save(path, merge=True)
    assert {r.bucket for r in Database.load(path)} == {"M=16", "M=64", "numel=1024"}
    # the same for a folder database (one file per hardware key)
    Database([_rule("matmul", "M=16")]).save(tmp_path / "dir")
    Database([_rule("matmul", "M=64")]).save(tmp_path / "dir", merge=True)
    assert {r.bucket for r in Database.load(tmp_path / "dir")} == {"M=16", "M=64"}
    # without merge a save replaces the file
    Database([_rule("matmul", "M=256")]).save(path)
    assert {r.bucket for r in Database.load(path)} == {"M=256"}


def test_concurrent_harvests_into_one_database_keep_every_run_rules(tmp_path: Path):
    groups = [[str(p) for p in bundled_datasets(kernel=k)] for k in ("gelu_mul_fp16", "softmax_fp16")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    opts = ["--levels", "name", "--margin", "0"]
    cmd = [sys.executable, "-m", "abductune.cli", "harvest", *opts, "--out", "db.json"]
    procs = [subprocess.Popen(cmd + g, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for g in groups]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errs
    # what each run harvests alone
    alone = set()
    for i, g in enumerate(groups):
        code, _, err, exc = run_cli(["harvest", *opts, "--out", f"alone{i}.json", *g], tmp_path)
        assert code == 0, (err, exc)
        alone |= {r.key() for r in Database.load(tmp_path / f"alone{i}.json")}
    got = {r.key() for r in Database.load(tmp_path / "db.json")}
    assert {k[1] for k in got} == {"elementwise", "row_reduction"}
    assert got == alone


def test_from_store_with_a_mistyped_path_creates_nothing(tmp_path: Path):
    code, _, err, exc = run_cli(["harvest", "--from-store", "--store", "stroe/s.sqlite"], tmp_path)
    assert_one_line(code, err, exc, "does not exist")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------- item 8: user kernels from the cwd

def test_user_kernel_spec_loads_from_the_current_folder_without_pythonpath(tmp_path: Path):
    pytest.importorskip("triton")
    (tmp_path / "my_kernels.py").write_text(textwrap.dedent("""
        from abductune.kernels.elementwise import GeluMulSpec

        class MyGelu(GeluMulSpec):
            def __init__(self):
                super().__init__("fp16")

        class NotASpec:
            pass
    """))
    probe = textwrap.dedent("""
        import os, sys
        # like the `abductune` script: the current folder is not on sys.path
        sys.path[:] = [p for p in sys.path if p not in ("", ".", os.getcwd())]
        from abductune import kernels
        from abductune.errors import AbductuneError
        spec = kernels.get("my_kernels:MyGelu")
        print(spec.name, len(spec.space().valid_configs()))
        for bad in ("my_kernels:NotASpec", "my_kernels:Missing", "nope_module:X"):
            try:
                kernels.get(bad)
            except AbductuneError as e:
                print("error", e)
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and Path(p).resolve() != tmp_path.resolve())
    r = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[0] == "my_kernels:MyGelu" and int(lines[0].split()[1]) > 0
    assert "NotASpec is not a KernelSpec subclass" in lines[1]
    assert "has no attribute 'Missing'" in lines[2]
    assert "No module named 'nope_module'" in lines[3] and "PYTHONPATH" in lines[3]


# ------------------------------------------------------------- item 12: seconds are a hard cap

def test_replay_seconds_limit_is_never_exceeded(tmp_path: Path):
    limit = 3.0  # a gelu config costs 0.05-1.3 recorded seconds: about ten fit
    code, _, err, exc = run_cli(["replay", str(_gelu_small()), "--strategy", "random,pattern",
                                 "--budget", "64", "--seconds", str(limit), "--repeats", "4",
                                 "--json", "r.json"], tmp_path)
    assert code == 0, (err, exc)
    cells = json.loads((tmp_path / "r.json").read_text())["cells"]
    for c in cells:
        assert c["mean_seconds"] <= limit, c
        assert 0 < c["mean_evaluations"] < 64  # the limit, not the budget, ended the runs


def test_version_and_help_exit_0(tmp_path: Path):
    code, out, err, _ = run_cli(["--version"], tmp_path)
    assert code == 0 and out.startswith("abductune, version ") and err == ""
    code, out, _, _ = run_cli(["harvest", "--help"], tmp_path)
    assert code == 0 and "--from-store" in out


def test_sweep_out_folder_that_cannot_be_made_is_named(tmp_path: Path):
    from abductune.errors import AbductuneError
    from abductune.sweep import make_out_dir

    (tmp_path / "f").write_text("x")
    for bad in (tmp_path / "f", tmp_path / "f" / "gelu", Path("/proc/abductune-sweep")):
        with pytest.raises(AbductuneError, match=f"cannot create folder {bad}"):
            make_out_dir(bad)
    assert make_out_dir(tmp_path / "a" / "b").is_dir()


# ------------------------------------------------------------- issue 28 item 14: Ctrl-C

def test_ctrl_c_during_tune_exits_130_says_what_was_kept_and_a_rerun_resumes(tmp_path: Path, monkeypatch):
    import re

    from abductune.measure.replay import ReplayEvaluator
    from abductune.store import Store

    calls = [0]
    evaluate = ReplayEvaluator.evaluate

    def interrupted_on_the_third_batch(self, configs):
        calls[0] += 1
        if calls[0] == 3:
            raise KeyboardInterrupt
        return evaluate(self, configs)
    monkeypatch.setattr(ReplayEvaluator, "evaluate", interrupted_on_the_third_batch)
    args = ["tune", "--mode", "replay", "--kernel", "gelu_mul_fp16", "--shapes", "numel=917504", "--budget", "12",
            "--full-budget", "--store", "S.sqlite", "--json", "r.json"]
    code, _, err, exc = run_cli(args, tmp_path)
    assert code == 130, (err, exc)
    assert "Traceback" not in err and "aborted" not in err
    [line] = err.splitlines()
    assert line.startswith("interrupted: 0 of 1 shape(s) finished; ") and "rerun the same command to resume" in line
    kept = int(re.search(r"(\d+) new measurement\(s\) were kept in S.sqlite", line).group(1))
    with Store(tmp_path / "S.sqlite") as s:
        assert kept == s.stats()["measurements"] > 0
        assert [r.status for r in s.runs()] == ["interrupted"]
    monkeypatch.setattr(ReplayEvaluator, "evaluate", evaluate)
    code, _, err, exc = run_cli(args, tmp_path)  # the rerun resumes: it spends only what is left
    assert code == 0, (err, exc)
    [o] = json.loads((tmp_path / "r.json").read_text())
    assert o["spent_before"] > 0 and o["evaluations"] + o["spent_before"] == 12


def test_ctrl_c_during_a_replay_tune_without_store_and_a_replay_say_nothing_was_kept(tmp_path: Path, monkeypatch):
    import abductune.evaluate as evaluate_mod
    from abductune.measure.replay import ReplayEvaluator

    def interrupt(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(ReplayEvaluator, "evaluate", interrupt)
    code, _, err, _ = run_cli(["tune", "--mode", "replay", "--kernel", "gelu_mul_fp16"], tmp_path)
    assert code == 130 and len(err.splitlines()) == 1
    assert err.startswith("interrupted: 0 of 3 shape(s) finished; ") and "none were kept" in err
    monkeypatch.setattr(evaluate_mod, "compare_on_dataset", interrupt)
    code, _, err, _ = run_cli(["replay", str(_gelu_small()), "--strategy", "random", "--repeats", "1"], tmp_path)
    assert code == 130 and err.splitlines() == [
        "interrupted: replay measures nothing and keeps nothing (it reads recorded datasets): rerun it to start again"]


# ------------------------------------------------------------- issue 28: the first ten minutes

NO_GPU_STACK = textwrap.dedent("""
    # this process has no triton and no torch, whatever is installed
    import importlib.abc, importlib.util, json, sys

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in ("triton", "torch"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    sys.meta_path.insert(0, Block())
    real = importlib.util.find_spec
    importlib.util.find_spec = lambda name, *a, **k: None if name.split(".")[0] in ("triton", "torch") \\
        else real(name, *a, **k)
    from click.testing import CliRunner
    from abductune.cli import main
    out = []
    for args in json.loads(sys.argv[1]):
        r = CliRunner().invoke(main, args)
        out.append([r.exit_code, r.stdout, r.stderr, "triton" in sys.modules or "torch" in sys.modules])
    print(json.dumps(out))
""")


def test_predict_no_check_and_dims_checks_work_without_triton(tmp_path: Path):
    """Item 2: `predict --kernel ... --no-check` serves an unchecked prediction with a note on a
    machine without Triton (the built-in specs import without it); item 5 there too: the dims
    of `tune` and `predict` are checked against the kernel, one line each; item 10: `kernels`."""
    runs = [["predict", "--kernel", "matmul_fp16", "--shapes", "M=16,N=4096,K=4096;M=200,N=5000,K=700",
             "--no-check"],
            ["predict", "--kernel", "rmsnorm_fp16", "--shapes", "rows=4096,cols=4096"],
            ["predict", "--kernel", "matmul_fp16", "--shapes", "M=16,N=4096", "--no-check"],
            ["tune", "--kernel", "matmul_fp16", "--shapes", "M=16,M=32,N=4096,K=4096"],
            ["tune", "--kernel", "gelu_mul_fp16", "--shapes", "rows=4"],
            ["kernels"]]
    r = subprocess.run([sys.executable, "-c", NO_GPU_STACK, json.dumps(runs)], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert r.returncode == 0, r.stderr[-3000:]
    (nocheck, default, missing, dup, wrong, kern) = json.loads(r.stdout.splitlines()[-1])
    assert not any(run[3] for run in (nocheck, default, missing, dup, wrong, kern))  # really without them
    code, out, err, _ = nocheck
    assert code == 0 and err == "", (out, err)
    lines = out.splitlines()
    assert lines[0].startswith("predictions unchecked (--no-check): ")
    assert [ln.split(":")[0] for ln in lines if not ln.startswith(" ")][1:] == [
        "matmul_fp16 M=16,N=4096,K=4096", "matmul_fp16 M=200,N=5000,K=700"]
    assert all("BLOCK_M=" in ln for ln in lines if ln.startswith("matmul_fp16"))
    code, out, err, _ = default
    assert code == 0 and out.startswith("predictions unchecked: Triton is not installed") and "BLOCK=" in out
    for (code, out, err, _), want in ((missing, "takes dims ['M', 'N', 'K'], got {'M': 16, 'N': 4096}"),
                                      (dup, "dim M is given twice"),
                                      (wrong, "kernel 'gelu_mul_fp16' takes dims ['numel'], got {'rows': 4}")):
        assert code == 2 and out == "" and err.count("\n") == 1 and want in err, (code, out, err)
    code, out, err, _ = kern
    assert code == 0 and "matmul_bf16" in out


def test_kernels_says_which_have_replay_data_and_the_fix_works(tmp_path: Path):
    """Item 10: `abductune kernels` marks the kernels that `tune` can replay without a GPU, and
    names the dims; a kernel without data says where it can be tuned, and a kernel it names
    as having data does tune."""
    code, out, err, exc = run_cli(["kernels"], tmp_path)
    assert code == 0 and exc is None, err
    rows = {ln.split()[0]: ln for ln in out.splitlines() if ln.split() and "_" in ln.split()[0]}
    assert set(rows) == {"matmul_fp16", "matmul_bf16", "softmax_fp16", "rmsnorm_fp16", "rmsnorm_bf16",
                         "gelu_mul_fp16"}
    for k in ("matmul_bf16", "rmsnorm_bf16"):
        assert "no: live only" in rows[k]
    assert "yes: 16 recorded shapes" in rows["matmul_fp16"] and "M,N,K" in rows["matmul_fp16"]
    assert "yes: 3 recorded shapes" in rows["gelu_mul_fp16"] and "numel" in rows["gelu_mul_fp16"]
    code, _, err, exc = run_cli(["tune", "--mode", "replay", "--kernel", "rmsnorm_bf16"], tmp_path)
    assert_one_line(code, err, exc, "tune one that has: matmul_fp16, softmax_fp16, rmsnorm_fp16, gelu_mul_fp16")
    suggested = err.split("tune one that has: ")[1].split(" (")[0].split(", ")
    code, out, err, exc = run_cli(["tune", "--mode", "replay", "--kernel", suggested[-1], "--budget", "4"],
                                  tmp_path)
    assert code == 0, (err, exc)
    assert f"#1 {suggested[-1]}" in out


def test_replay_plot_without_matplotlib_fails_before_the_replay(files: Path, monkeypatch):
    """Item 13: the missing extra is said at once, not after the whole replay."""
    import abductune.evaluate as evaluate

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a, **k: None if name == "matplotlib" else real(name, *a, **k))

    def replayed(*a, **kw):
        raise AssertionError("the replay ran before matplotlib was checked")
    monkeypatch.setattr(evaluate, "compare_on_dataset", replayed)
    before = _contents(files)
    code, _, err, exc = run_cli(["replay", "good.jsonl", "--plot", "p.png"], files)
    assert_one_line(code, err, exc, "plotting needs matplotlib: pip install abductune[plot]")
    assert _contents(files) == before


def test_learn_shows_progress_on_stderr(tmp_path: Path, monkeypatch):
    """Item 15: `learn` says what it is doing (reading each dataset, fitting the rules) with the
    same progress bar on stderr as `tune` and `replay` (a terminal only; none in a pipe)."""
    import io

    from rich.console import Console

    from abductune.cli import output

    buf = io.StringIO()
    monkeypatch.setattr(output, "err_console", Console(file=buf, force_terminal=True, width=120))
    monkeypatch.setattr(output, "quiet_bar", lambda: False)
    gelu = [str(p) for p in bundled_datasets(kernel="gelu_mul_fp16")]
    code, out, err, exc = run_cli(["learn", *gelu, "--out", "t.json"], tmp_path)
    assert code == 0, (err, exc)
    shown = buf.getvalue()
    assert "reading datasets" in shown and f"read {len(gelu)} dataset(s)" in shown
    assert f"fitting rules to {len(gelu)} problems" in shown and f"{len(gelu)}/{len(gelu)}" in shown
    assert out.startswith("wrote t.json")
    # in a pipe (the default here) nothing but the result
    code, out, err, exc = run_cli(["learn", *gelu, "--out", "t2.json"], tmp_path)
    assert code == 0 and err == ""


def test_replay_takes_a_complete_small_kernel_tuner_cache_and_refuses_a_cut_one(files: Path, tmp_path: Path):
    """Item 25: a cache of every config of a small space (6 here, below the 100-config floor) is
    exhaustive; a cut one, and a small T4 file whose space is read off its own records (a cut
    file would look complete too), are refused, and the message does not contradict itself."""
    code, out, err, exc = run_cli(["replay", str(files / "kt_good.json"), "--strategy", "random",
                                   "--budget", "4", "--repeats", "2"], tmp_path)
    assert code == 0, (err, exc)
    assert "random" in out
    cut = json.loads((files / "kt_good.json").read_text())
    cut["cache"] = dict(list(cut["cache"].items())[:4])
    (tmp_path / "kt_cut.json").write_text(json.dumps(cut))
    code, _, err, exc = run_cli(["replay", "kt_cut.json"], tmp_path)
    assert_one_line(code, err, exc, "kt_cut.json: not exhaustive: 4 records, 4 distinct configs, cover 4/6 "
                    "valid configs")
    assert "or every combination of its values" in err
    code, _, err, exc = run_cli(["replay", str(files / "t4_good.json")], tmp_path)
    assert code == 2 and "cover 6/6" in err and "its space was read off its own records" in err
    assert err.splitlines()[-1].startswith("error: ")
